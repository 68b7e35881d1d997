"""The policy loader: every bad policy, in any format or as a dict, is a PolicyError that names
its place, never another exception (docs/policy.md, "Errors")."""

from __future__ import annotations

import copy
import json
import re
import tempfile
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import tomllib
import yaml  # type: ignore[import-untyped]
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import isolane
from isolane import policy as P
from isolane.policy import Policy, PolicyError, PolicyWarning
from support.locations import ROOT
from support.policy_edits import errors_of
from test_policy import POLICY_DICT
from test_policy_qos import QOS_DICT

EXAMPLE = ROOT / "pcaps" / "tenants.yaml"
DOCS = ROOT / "docs"


def one_tenant(**tenant: Any) -> dict[str, Any]:
    return {"tenants": [{"name": "t", "vnis": [1], **tenant}]}


def file_errors(path: Path, text: str) -> list[tuple[str, str]]:
    """The errors of reading ``text`` as the file ``path``."""
    path.write_text(text)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PolicyWarning)
        with pytest.raises(PolicyError) as info:
            Policy.from_file(path)
    return info.value.errors


# ---------------------------------------------------------------------------------------------
# integers: a float is never one, whatever the format
# ---------------------------------------------------------------------------------------------

WHOLE_FLOATS = [
    (one_tenant(vnis=[100.0]), "tenants[0].vnis[0]", "expected VNI (an integer), got a number (100.0)"),
    (one_tenant(vlans=[7.0]), "tenants[0].vlans[0]", "expected VLAN id (an integer), got a number (7.0)"),
    (one_tenant(weight=2.0), "tenants[0].weight", "expected weight (an integer), got a number (2.0)"),
    (one_tenant(classes=[{"name": "c", "priority": 1.0}]), "tenants[0].classes[0].priority", "expected priority (an integer), got a number (1.0)"),
    (
        one_tenant(rules=[{"proto": "tcp", "dst_ports": 80.0, "action": "allow"}]),
        "tenants[0].rules[0].dst_ports",
        "expected a port (integer), a range ('80-90') or a list of them, got a number (80.0)",
    ),
    (
        one_tenant(rules=[{"proto": "tcp", "dst_ports": [[80.0, 90]], "action": "allow"}]),
        "tenants[0].rules[0].dst_ports[0]",
        "expected a port (integer) or a range ('80-90' or [80, 90]), got a list",
    ),
    (one_tenant(rules=[{"proto": 6.0, "action": "allow"}]), "tenants[0].rules[0].proto", "expected protocol (an integer), got a number (6.0)"),
    (one_tenant(rules=[{"dscp": 46.0, "action": "allow"}]), "tenants[0].rules[0].dscp", "expected DSCP (an integer), got a number (46.0)"),
    ({"version": 1.0, "tenants": []}, "version", "expected the version, an integer (1), got a number (1.0)"),
    ({"version": True, "tenants": []}, "version", "expected the version, an integer (1), got a boolean (true)"),
]


@pytest.mark.parametrize(("data", "where", "message"), WHOLE_FLOATS, ids=[w for _, w, _ in WHOLE_FLOATS])
def test_a_whole_float_is_not_an_integer(data: dict[str, Any], where: str, message: str) -> None:
    assert errors_of(data) == [(where, message)]


def test_values_read_before_are_told_apart_by_type_and_bad_ones_reported_at_each_place() -> None:
    """Rules' values are remembered once read (a policy repeats them): 1 read as a protocol must not
    make true one, 80 must not make 80.0 a port, and a bad value is reported wherever it is."""
    rules = [
        {"proto": 1, "action": "allow"},
        {"proto": True, "action": "allow"},
        {"proto": "tcp", "dst_ports": [80, 443], "action": "allow"},
        {"proto": "tcp", "dst_ports": [80.0, 443], "action": "allow"},
        {"proto": "tcp", "dst_ports": 99999, "action": "allow"},
        {"proto": "tcp", "dst_ports": 99999, "action": "alow"},
    ]
    assert errors_of(one_tenant(rules=rules)) == [
        ("tenants[0].rules[1].proto", "expected protocol (an integer), got a boolean (true)"),
        ("tenants[0].rules[3].dst_ports[0]", "expected a port (integer) or a range ('80-90' or [80, 90]), got a number (80.0)"),
        ("tenants[0].rules[4].dst_ports", "port 99999 is outside 0-65535"),
        ("tenants[0].rules[5].action", "'alow' is not an action; did you mean 'allow'?"),
        ("tenants[0].rules[5].dst_ports", "port 99999 is outside 0-65535"),
    ]
    good = P.Policy.from_dict(one_tenant(rules=rules[:1] + rules[2:3])).tenants[0].rules
    assert [(r.proto, r.dst_ports) for r in good] == [((1,), None), ((6,), ((80, 80), (443, 443)))]


def test_json_100_0_is_not_vni_100(tmp_path: Path) -> None:
    errors = file_errors(
        tmp_path / "p.json", '{"tenants": [{"name": "a", "vnis": [100.0], "rules": [{"proto": "tcp", "dst_ports": [80.0], "action": "allow"}]}]}'
    )
    assert errors == [
        ("tenants[0].vnis[0]", "expected VNI (an integer), got a number (100.0)"),
        ("tenants[0].rules[0].dst_ports[0]", "expected a port (integer) or a range ('80-90' or [80, 90]), got a number (80.0)"),
    ]


def test_a_negative_port_in_a_pair_is_out_of_range() -> None:
    errors = errors_of(one_tenant(rules=[{"proto": "tcp", "dst_ports": [[-1, 5]], "action": "allow"}]))
    assert errors == [("tenants[0].rules[0].dst_ports[0]", "port -1 is outside 0-65535")]


def test_integers_too_long_to_print_are_named_by_size() -> None:
    huge = 10**5000
    assert errors_of(one_tenant(vnis=[huge])) == [("tenants[0].vnis[0]", "VNI about 10^5000 is outside 0-16777215 (24 bits)")]
    assert errors_of(one_tenant(rate=-huge)) == [("tenants[0].rate", "-about 10^5000 has no unit: write it as a string with its unit, e.g. '40Gbps'")]
    port = {"rate": "1Gbps", "buffer": "1MB", "alpha": huge}
    assert errors_of({"port": port, "tenants": []})[0][1].startswith("alpha about 10^5000 is not a power of two")
    assert errors_of({"version": huge, "tenants": []}) == [("version", "unsupported version about 10^5000: this isolane reads version 1")]
    assert errors_of(one_tenant(weight=huge)) == [("tenants[0].weight", "weight about 10^5000 is over 4294967295 (32 bits)")]



# ---------------------------------------------------------------------------------------------
# JSON duplicate keys: an error at the object's place and the key's line, as in YAML and TOML
# ---------------------------------------------------------------------------------------------

JSON_DUPLICATES = [
    ('{"tenants": [], "tenants": []}', "", "line 1, column 17: duplicate key 'tenants' (first at line 1, column 2)"),
    ('{"tenants": [\n  {"name": "a",\n   "vnis": [1],\n   "name": "b"}]}', "tenants[0]", "line 4, column 4: duplicate key 'name' (first at line 2, column 4)"),
    ('{"tenants": [{"n\\u0061me": "a", "name": "b"}]}', "tenants[0]", "line 1, column 33: duplicate key 'name' (first at line 1, column 15)"),
    (
        '{"tenants": [{"name": "a"}, {"name": "b", "classes": [{"name": "x"}, {"name": "y", "rate": "1Gbps", "rate": "2Gbps"}]}]}',
        "tenants[1].classes[1]",
        "line 1, column 101: duplicate key 'rate' (first at line 1, column 84)",
    ),
    # The first repeat in the text, though the decoder meets the inner object's first.
    ('{"x": 1, "x": {"k": 1, "k": 2}}', "", "line 1, column 10: duplicate key 'x' (first at line 1, column 2)"),
    ('{"a": "{\\"b\\": 1, \\"b\\": 2}", "c": [{}, {"d": [], "d": {}}]}', "c[1]", "line 1, column 51: duplicate key 'd' (first at line 1, column 42)"),
]


@pytest.mark.parametrize(("text", "where", "message"), JSON_DUPLICATES)
def test_json_duplicate_keys_are_errors_at_their_place(tmp_path: Path, text: str, where: str, message: str) -> None:
    assert file_errors(tmp_path / "dup.json", text) == [(where, message)]


# ---------------------------------------------------------------------------------------------
# Documents too deep or numbers too long for Python's parsers
# ---------------------------------------------------------------------------------------------

DEEP = 5000

UNREADABLE = [
    ("deep.json", '{"tenants": ' + "[" * DEEP + "]" * DEEP + "}", f"line 1, column {12 + DEEP}: nested {DEEP + 1} levels deep, too deep to read"),
    ("deep.toml", "# [[[ {{{\ntenants = " + "[" * DEEP + "]" * DEEP + "\n", f"line 2, column {10 + DEEP}: nested {DEEP} levels deep, too deep to read"),
    (
        "deep_tables.toml",
        "a = '[['\nb = " + "{c = " * DEEP + "1" + "}" * DEEP + "\n",
        f"line 2, column {5 * DEEP}: nested {DEEP} levels deep, too deep to read",
    ),
    (
        "long.json",
        '{"description": "' + "1" * 5000 + '", "tenants": [{"name": "a", "vnis": [' + "1" * 5000 + "]}]}",
        "line 1, column 5056: a number of 5000 digits, too long to read (at most 4300)",
    ),
    (
        "long.toml",
        'description = """\n' + "2" * 5000 + '"""\n[[tenants]]\nname = "a"\nvnis = [' + "1_2" * 3000 + "]\n",
        "line 5, column 9: a number of 6000 digits, too long to read (at most 4300)",
    ),
]


@pytest.mark.parametrize(("name", "text", "message"), UNREADABLE, ids=[u[0] for u in UNREADABLE])
def test_what_the_parsers_cannot_hold_is_an_error_at_its_line(tmp_path: Path, name: str, text: str, message: str) -> None:
    assert file_errors(tmp_path / name, text) == [("", message)]


def nested(depth: int, inner: Any = None, key: str | None = None) -> Any:
    """``inner`` in ``depth`` lists (or one-key mappings), built without recursion."""
    for _ in range(depth):
        inner = [inner] if key is None else {key: inner}
    return inner


DEEP_DICTS = [
    ({"version": nested(DEEP), "tenants": []}, "version", "expected the version, an integer (1), got a list"),
    ({"tenants": nested(DEEP)}, "tenants[0]", "expected a mapping, got a list"),
    (one_tenant(name=nested(DEEP)), "tenants[0].name", "expected a tenant name, got a list"),
    (
        one_tenant(rules=[{"proto": "tcp", "dst_ports": nested(DEEP), "action": "allow"}]),
        "tenants[0].rules[0].dst_ports[0]",
        "expected a port (integer) or a range ('80-90' or [80, 90]), got a list",
    ),
    (
        one_tenant(meter={"kind": "srtcm", "cir": "1Gbps", "actions": {"red": nested(DEEP)}}),
        "tenants[0].meter.actions.red",
        "expected 'pass', 'drop' or {remark: <DSCP>}, got a list",
    ),
    ({"port": {"rate": "1Gbps", "buffer": "1MB", "alpha": nested(DEEP)}, "tenants": []}, "port.alpha", "alpha a list is not a power of two from 1/128 to 128"),
    (one_tenant(rate=nested(DEEP)), "tenants[0].rate", "expected a rate like '40Gbps', got a list"),
    (
        one_tenant(microburst={"window": "1ms", "threshold": "1Gbps", "queue": nested(DEEP, key="rise")}),
        "tenants[0].microburst.queue.rise",
        "expected a size like '256KiB', got a mapping",
    ),
]


@pytest.mark.parametrize(("data", "where", "message"), DEEP_DICTS, ids=[w for _, w, _ in DEEP_DICTS])
def test_deep_dicts_are_policy_errors(data: dict[str, Any], where: str, message: str) -> None:
    (error,) = errors_of(data)
    assert error[0] == where and error[1].startswith(message)


LONG_NUMBER = "has a number of 5000 digits: no setting takes one that long"


@pytest.mark.parametrize(
    ("data", "where"),
    [
        (one_tenant(rate="1" * 5000 + "bps"), "tenants[0].rate"),
        (one_tenant(shaper={"rate": "1Gbps", "max_delay": "0." + "0" * 4998 + "1s"}), "tenants[0].shaper.max_delay"),
        (one_tenant(rules=[{"proto": "tcp", "dst_ports": "1" * 5000, "action": "allow"}]), "tenants[0].rules[0].dst_ports"),
        (one_tenant(rules=[{"proto": "tcp", "dst_ports": ["80-" + "9" * 5000], "action": "allow"}]), "tenants[0].rules[0].dst_ports[0]"),
        (one_tenant(rate="1Gbps", microburst={"window": "1ms", "threshold": "1" * 5000 + "%"}), "tenants[0].microburst.threshold"),
    ],
    ids=["rate", "duration", "port", "port range", "percentage"],
)
def test_numbers_too_long_for_any_setting(data: dict[str, Any], where: str) -> None:
    (error,) = errors_of(data)
    assert error[0] == where and error[1].endswith(LONG_NUMBER)


def deep_tuple(depth: int) -> tuple[Any, ...]:
    inner: tuple[Any, ...] = ()
    for _ in range(depth):
        inner = (inner,)
    return inner


@pytest.mark.parametrize(
    ("key", "where", "message"),
    [
        ("1" * 5000, f"color_map.{'1' * 5000}", f"{'1' * 5000!r} is not a DSCP name"),
        ("\u00b2", "color_map.\u00b2", "'\u00b2' is not a DSCP name"),  # a digit to isdigit(), not to int()
        ("0000000063", "color_map.0000000063", "'0000000063' is not a DSCP name"),
        (deep_tuple(DEEP), "color_map", "keys must be DSCP names or numbers, got a list"),
    ],
    ids=["5000 digits", "superscript two", "10 digits", "a deep tuple"],
)
def test_color_map_keys_that_are_no_dscp(key: Any, where: str, message: str) -> None:
    errors = errors_of({"color_map": {key: "red"}, "tenants": []})
    assert errors[0][0] == where and errors[0][1].startswith(message)
    assert Policy.from_dict({"color_map": {"000000063": "red"}, "tenants": []}).color_map == ((63, "red"),)


# ---------------------------------------------------------------------------------------------
# names: printable, and compared as they print (Unicode NFC)
# ---------------------------------------------------------------------------------------------

CAFE_NFC, CAFE_NFD = "caf\u00e9", "cafe\u0301"
PRINT_HINT = "a name must print as it reads (names label reports and tables)"


@pytest.mark.parametrize(
    ("name", "point"), [("a\nb", "000A"), ("a\x00", "0000"), ("\x7fdel", "007F"), ("a\u0085", "0085"), ("zero\u200bwidth", "200B"), ("rtl\u202e", "202E")]
)
def test_names_with_control_characters_are_refused(name: str, point: str) -> None:
    message = f"{name!r} has the control character U+{point}: {PRINT_HINT}"
    assert errors_of(one_tenant(name=name)) == [("tenants[0].name", message)]
    assert errors_of(one_tenant(classes=[{"name": name}])) == [("tenants[0].classes[0].name", message)]
    assert errors_of(one_tenant(rules=[{"name": name, "action": "allow"}])) == [("tenants[0].rules[0].name", message)]


def test_names_are_read_in_nfc() -> None:
    data = {"tenants": [{"name": CAFE_NFD, "vnis": [1], "classes": [{"name": CAFE_NFD}], "rules": [{"name": CAFE_NFD, "class": CAFE_NFC, "action": "allow"}]}]}
    (tenant,) = Policy.from_dict(data).tenants
    assert tenant.name == tenant.classes[0].name == tenant.rules[0].name == tenant.rules[0].class_name == CAFE_NFC
    assert tenant.default_class == CAFE_NFC
    data["tenants"][0]["default_class"] = CAFE_NFD
    assert Policy.from_dict(data).tenants[0].default_class == CAFE_NFC


NFC_NOTE = " (written with other code points, but the same name in Unicode NFC: they print alike)"


def test_names_that_print_alike_are_one_name(tmp_path: Path) -> None:
    tenants = [{"name": CAFE_NFC, "vnis": [1]}, {"name": CAFE_NFD, "vnis": [2]}, {"name": CAFE_NFC, "vnis": [3]}]
    assert errors_of({"tenants": tenants}) == [
        ("tenants[1].name", f"'{CAFE_NFC}' is already the name of tenants[0]{NFC_NOTE}"),
        ("tenants[2].name", f"'{CAFE_NFC}' is already the name of tenants[0]"),
    ]
    assert errors_of(one_tenant(classes=[{"name": CAFE_NFD}, {"name": CAFE_NFC}])) == [
        ("tenants[0].classes[1].name", f"class '{CAFE_NFC}' is already defined at tenants[0].classes[0]{NFC_NOTE}")
    ]
    text = '{"tenants": [{"name": "caf\\u00e9", "vnis": [1]}, {"name": "cafe\\u0301", "vnis": [2]}]}'
    assert file_errors(tmp_path / "p.json", text) == [("tenants[1].name", f"'{CAFE_NFC}' is already the name of tenants[0]{NFC_NOTE}")]


def test_tenants_sharing_a_huge_vni_are_named() -> None:
    huge = 10**5000
    errors = errors_of({"tenants": [{"name": "a", "vnis": [huge]}, {"name": "b", "vnis": [huge]}]})
    assert ("tenants[1].vnis[0]", "VNI about 10^5000 is claimed by both 'a' (tenants[0].vnis[0]) and 'b'") in errors


# ---------------------------------------------------------------------------------------------
# limits: what the Rust core takes is checked when the policy is read, at its place
# ---------------------------------------------------------------------------------------------

RATE = f"{P.MAX_RATE_BYTES}B/s"  # the largest rate ...
OVER_RATE = f"{P.MAX_RATE_BYTES + 1}B/s"  # ... and one byte per second more
RATE_ERROR = f"'{OVER_RATE}' is over the largest rate isolane handles, 4,398,046,511,104 B/s (about 35.2Tbps)"
BURST, OVER_BURST = "8GiB", f"{P.MAX_BURST_BYTES + 1}B"
QUEUE, OVER_QUEUE = "1024TiB", f"{P.MAX_QUEUE_BYTES + 1}B"
QUEUE_ERROR = f"'{OVER_QUEUE}' is over the largest queue isolane handles, 1024TiB"
DELAY, OVER_DELAY = f"{2**64 - 1}ns", f"{2**64}ns"
LONGEST = "the longest max_delay isolane handles, 18446744073709551615ns (about 584 years)"
PORT = {"rate": "100Gbps", "buffer": "16MiB"}


def port_policy(port: dict[str, Any], **tenant: Any) -> dict[str, Any]:
    return {"port": {**PORT, **port}, "tenants": [{"name": "t", "vnis": [1], **tenant}]}


def weighed(tenant_weight: int, class_weight: int) -> dict[str, Any]:
    return one_tenant(weight=tenant_weight, classes=[{"name": "c", "weight": class_weight}])


def implicit_weights(class_weight: int) -> dict[str, Any]:
    """Tenant a weighs 5e9 / 1 B/s, over 32 bits, so its weight is scaled to the largest."""
    a = {"name": "a", "vnis": [1], "rate": "40Gbps", "classes": [{"name": "c", "weight": class_weight}]}
    return {"tenants": [a, {"name": "b", "vnis": [2], "rate": "8bps"}]}


#: (what, the policy at the limit, the policy just over it, where, the error)
LIMITS = [
    ("tenant rate", one_tenant(rate=RATE), one_tenant(rate=OVER_RATE), "tenants[0].rate", RATE_ERROR),
    (
        "class ceil",
        one_tenant(classes=[{"name": "c", "ceil": RATE}]),
        one_tenant(classes=[{"name": "c", "ceil": OVER_RATE}]),
        "tenants[0].classes[0].ceil",
        RATE_ERROR,
    ),
    ("shaper rate", one_tenant(shaper={"rate": RATE}), one_tenant(shaper={"rate": OVER_RATE}), "tenants[0].shaper.rate", RATE_ERROR),
    (
        "meter rate",
        one_tenant(meter={"kind": "trtcm", "cir": RATE, "pir": RATE}),
        one_tenant(meter={"kind": "trtcm", "cir": "1Gbps", "pir": OVER_RATE}),
        "tenants[0].meter.pir",
        RATE_ERROR,
    ),
    ("port rate", port_policy({"rate": RATE}), port_policy({"rate": OVER_RATE}), "port.rate", RATE_ERROR),
    (
        "microburst threshold",
        one_tenant(microburst={"window": "10ms", "threshold": f"{P.MAX_RATE_BYTES * 8}bps"}),
        one_tenant(microburst={"window": "10ms", "threshold": f"{P.MAX_RATE_BYTES * 8 + 1}bps"}),
        "tenants[0].microburst.threshold",
        f"'{P.MAX_RATE_BYTES * 8 + 1}bps' is over the largest rate isolane handles, 4,398,046,511,104 B/s (about 35.2Tbps)",
    ),
    (
        "microburst threshold as a share",
        one_tenant(rate=RATE, microburst={"window": "1us", "threshold": "100%"}),
        one_tenant(rate=RATE, microburst={"window": "1us", "threshold": "100.00001%"}),
        "tenants[0].microburst.threshold",
        "'100.00001%' of 35184372088832bps is over the largest rate isolane handles, 4,398,046,511,104 B/s (about 35.2Tbps)",
    ),
    (
        "tenant burst",
        one_tenant(rate="1Gbps", burst=BURST),
        one_tenant(rate="1Gbps", burst=OVER_BURST),
        "tenants[0].burst",
        f"'{OVER_BURST}' is over the largest burst, 8GiB",
    ),
    (
        "shaper burst",
        one_tenant(shaper={"rate": "1Gbps", "burst": BURST}),
        one_tenant(shaper={"rate": "1Gbps", "burst": OVER_BURST}),
        "tenants[0].shaper.burst",
        f"'{OVER_BURST}' is over the largest burst, 8GiB",
    ),
    (
        "meter burst",
        one_tenant(meter={"kind": "srtcm", "cir": "1Gbps", "cbs": BURST, "ebs": BURST}),
        one_tenant(meter={"kind": "srtcm", "cir": "1Gbps", "ebs": OVER_BURST}),
        "tenants[0].meter.ebs",
        f"'{OVER_BURST}' is over the largest burst, 8GiB",
    ),
    (
        "shaper queue",
        one_tenant(shaper={"rate": RATE, "queue": QUEUE}),
        one_tenant(shaper={"rate": RATE, "queue": OVER_QUEUE}),
        "tenants[0].shaper.queue",
        QUEUE_ERROR,
    ),
    ("port buffer", port_policy({"buffer": QUEUE, "reserve": QUEUE}), port_policy({"buffer": OVER_QUEUE}), "port.buffer", QUEUE_ERROR),
    ("port reserve", port_policy({"buffer": QUEUE, "reserve": QUEUE}), port_policy({"buffer": QUEUE, "reserve": OVER_QUEUE}), "port.reserve", QUEUE_ERROR),
    (
        "microburst queue",
        port_policy({}, microburst={"window": "10us", "threshold": "1Gbps", "queue": {"rise": QUEUE, "fall": QUEUE}}),
        port_policy({}, microburst={"window": "10us", "threshold": "1Gbps", "queue": {"rise": OVER_QUEUE}}),
        "tenants[0].microburst.queue.rise",
        QUEUE_ERROR,
    ),
    (
        "shaper max_delay",
        one_tenant(shaper={"rate": RATE, "queue": "1MB", "max_delay": DELAY}),
        one_tenant(shaper={"rate": "8bps", "max_delay": OVER_DELAY}),
        "tenants[0].shaper.max_delay",
        f"'{OVER_DELAY}' is over {LONGEST}",
    ),
    (
        "the queue a max_delay lets wait",
        one_tenant(shaper={"rate": RATE, "max_delay": "256s"}),  # 2**42 B/s for 256 s: 2**50 B
        one_tenant(shaper={"rate": RATE, "max_delay": "256000000001ns"}),
        "tenants[0].shaper.max_delay",
        "'256000000001ns' at 35184372088832bps lets 1125899906847023B wait, over the largest queue isolane handles, 1024TiB: give a queue too",
    ),
    (
        "the time a queue takes to leave",
        one_tenant(ceil="8bps", shaper={"queue": "18446744073B"}),  # at 1 B/s: 2**64 - 1 ns, rounded up
        one_tenant(ceil="8bps", shaper={"queue": "18446744074B"}),
        "tenants[0].shaper.queue",
        f"'18446744074B' takes 18446744074s to leave at 8bps, over {LONGEST}: give a max_delay too",
    ),
    ("tenant weight", weighed(P.MAX_WEIGHT, 1), weighed(P.MAX_WEIGHT + 1, 1), "tenants[0].weight", "weight 4294967296 is over 4294967295 (32 bits)"),
    ("class weight", weighed(1, P.MAX_WEIGHT), weighed(1, P.MAX_WEIGHT + 1), "tenants[0].classes[0].weight", "weight 4294967296 is over 4294967295 (32 bits)"),
    (
        "port weight",
        weighed(65535, 65537),  # 2**32 - 1
        weighed(65535, 65538),
        "tenants[0].classes[0].weight",
        "the port weighs this class by its tenant's weight times its own, 65535 x 65538, which is over 4294967295 (32 bits)",
    ),
    (
        "port weight from the guarantees",
        implicit_weights(1),
        implicit_weights(2),
        "tenants[0].classes[0].weight",
        "the port weighs this class by its tenant's weight from the guarantees times its own, 4294967295 x 2, which is over 4294967295 (32 bits)",
    ),
    (
        "priority",
        one_tenant(classes=[{"name": "c", "priority": 7}]),
        one_tenant(classes=[{"name": "c", "priority": 8}]),
        "tenants[0].classes[0].priority",
        "priority 8 is outside 0-7",
    ),
    (
        "largest frame",
        {"largest_frame": f"{2**32 - 1}B", "tenants": [{"name": "t", "vnis": [1], "rate": "1Gbps"}]},
        {"largest_frame": f"{2**32}B", "tenants": []},
        "largest_frame",
        f"'{2**32}B' is outside 64B-4294967295B (the smallest Ethernet frame to 32 bits)",
    ),
]


@pytest.mark.parametrize(("at_limit", "over", "where", "message"), [limit[1:] for limit in LIMITS], ids=[limit[0] for limit in LIMITS])
def test_each_limit_builds_an_engine_and_one_more_is_an_error(at_limit: dict[str, Any], over: dict[str, Any], where: str, message: str) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PolicyWarning)
        isolane.Engine(Policy.from_dict(at_limit))
    (error,) = errors_of(over)
    assert error[0] == where and error[1].startswith(message)


def test_a_key_that_would_break_the_line_is_quoted() -> None:
    assert errors_of({"tenants": [], "a\nb": 1}) == [
        ("['a\\nb']", "unknown key (expected one of: version, description, unknown_tenant, count, largest_frame, color_map, port, tenants)")
    ]


# ---------------------------------------------------------------------------------------------
# Any document, any format: a Policy (that an Engine takes) or a PolicyError, nothing else
# ---------------------------------------------------------------------------------------------


def sample_policies() -> list[dict[str, Any]]:
    """The project's valid policies (other tests check that they are): the sample, the docs'
    examples, the tests' own."""
    found: list[Any] = [yaml.safe_load(EXAMPLE.read_text()), POLICY_DICT, QOS_DICT]
    for doc in sorted(DOCS.glob("*.md")):
        for lang, body in re.findall(r"```(yaml|toml)\n(.*?)```", doc.read_text(), re.S):
            found.append(yaml.safe_load(body) if lang == "yaml" else tomllib.loads(body))
    return found


SAMPLES = sample_policies()


@dataclass
class Deep:
    """``inner`` in ``depth`` lists, written as brackets so that writing it needs no recursion."""

    inner: Any
    depth: int


class Repeated(dict):  # type: ignore[type-arg]
    """A mapping that JSON and TOML write with ``again``'s keys a second time."""

    again: list[tuple[str, Any]]


WORDS = [
    "", " ", "10Gbps", "1.5Gbps", "1001bps", "0bps", RATE, OVER_RATE, "64B", "9216B", BURST, OVER_BURST, QUEUE, OVER_QUEUE,
    DELAY, OVER_DELAY, "256s", "1ms", "10us", "0.5ns", "50%", "100000%", "allow", "drop", "srtcm", "trtcm", "rfc4115",
    "pass", "remark", "af11", "ef", "tcp", "icmp", "10.0.0.0/8", "10.0.0.1/8", "fd00::/64", "any", "80", "80-90", "90-80",
    "a\nb", "nul\x00", CAFE_NFC, CAFE_NFD, "per_tenant", "shared_fifo", "inner", "wire_fcs", "green", "red", "default",
]  # fmt: skip
KEYS = sorted({*P._TOP_KEYS, *P._TENANT_KEYS, *P._CLASS_KEYS, *P._RULE_KEYS, *P._SHAPER_KEYS, *P._METER_KEYS, *P._PORT_KEYS, *P._MICROBURST_KEYS})
SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.sampled_from([0, 1, 7, 8, 63, 64, 65535, 65536, 2**24 - 1, 2**24, 2**32 - 1, 2**32, 2**64]),
    st.floats(),
    st.sampled_from([100.0, 80.0, 1.0, 0.25, 2.0]),
    st.text(max_size=8),
    st.sampled_from(WORDS),
)
VALUES = st.recursive(
    SCALARS, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from(KEYS) | st.text(max_size=4), inner, max_size=3), max_leaves=6
)


def places(doc: Any) -> list[tuple[Any, Any]]:
    """Every (container, key or index) of the document, walked without recursion."""
    found, todo = [], [doc]
    while todo:
        container = todo.pop()
        keys = list(container) if isinstance(container, dict) else range(len(container)) if isinstance(container, list) else []
        for key in keys:
            found.append((container, key))
            todo.append(container[key])
    return found


def mutated(data: st.DataObject, doc: Any) -> Any:
    """``doc`` with a few values replaced by random ones, deleted, repeated or wrapped deep."""
    doc = copy.deepcopy(doc)
    for _ in range(data.draw(st.integers(1, 4))):
        spots = places(doc)
        if not spots:
            return doc
        container, key = spots[data.draw(st.integers(0, len(spots) - 1))]
        change = data.draw(st.sampled_from(["replace", "replace", "delete", "repeat", "wrap"]))
        if change == "replace":
            container[key] = data.draw(VALUES)
        elif change == "delete":
            del container[key]
        elif change == "wrap":
            container[key] = Deep(container[key], data.draw(st.sampled_from([1, 2, 30, 3000])))
        elif isinstance(container[key], dict) and container[key]:
            repeated = Repeated(container[key])
            repeated.again = [(data.draw(st.sampled_from(sorted(repeated, key=str))), data.draw(VALUES))]
            container[key] = repeated
    return doc


def as_json(value: Any) -> str:
    if isinstance(value, Deep):
        return "[" * value.depth + as_json(value.inner) + "]" * value.depth
    if isinstance(value, dict):
        pairs = [*value.items(), *getattr(value, "again", [])]
        return "{" + ", ".join(f"{json.dumps(str(k))}: {as_json(v)}" for k, v in pairs) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(as_json(v) for v in value) + "]"
    return json.dumps(value)


def as_toml_value(value: Any) -> str:
    if isinstance(value, Deep):
        return "[" * value.depth + as_toml_value(value.inner) + "]" * value.depth
    if isinstance(value, dict):  # TOML has no null: a None is an empty table
        pairs = [*value.items(), *getattr(value, "again", [])]
        return "{" + ", ".join(f"{as_toml_key(k)} = {as_toml_value(v)}" for k, v in pairs) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(as_toml_value(v) for v in value) + "]"
    if value is None:
        return "{}"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, str):
        return as_toml_key(value)
    return repr(value)  # 1.5, inf, nan, 1e+16 and integers are TOML as Python writes them


def as_toml_key(key: Any) -> str:
    return json.dumps(str(key), ensure_ascii=False).replace("\x7f", "\\u007f")


def as_toml(doc: Any) -> str:
    if not isinstance(doc, dict):
        return f"policy = {as_toml_value(doc)}\n"
    pairs = [*doc.items(), *getattr(doc, "again", [])]
    return "".join(f"{as_toml_key(k)} = {as_toml_value(v)}\n" for k, v in pairs)


def plain(value: Any, deepest: int) -> Any:
    """The document as plain data (repeated keys once), a Deep as at most ``deepest`` lists."""
    if isinstance(value, Deep):
        return nested(min(value.depth, deepest), plain(value.inner, deepest))
    if isinstance(value, dict):
        return {k: plain(v, deepest) for k, v in value.items()}
    if isinstance(value, list):
        return [plain(v, deepest) for v in value]
    return value


def read_back(path: Path, text: str) -> Policy | None:
    path.write_text(text, encoding="utf-8")
    return read(lambda: Policy.from_file(path))


def read(load: Any) -> Policy | None:
    """The policy ``load`` gives, or None for a PolicyError whose every error is one line."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", PolicyWarning)
            policy: Policy = load()
    except PolicyError as err:
        assert err.errors and all("\n" not in where + message for where, message in err.errors), err.errors
        return None
    isolane.Engine(policy)  # whatever validation lets through, the core takes
    return policy


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.data())
def test_any_mutated_policy_reads_as_a_policy_or_a_policy_error(data: st.DataObject) -> None:
    doc = mutated(data, data.draw(st.sampled_from(SAMPLES)))
    with tempfile.TemporaryDirectory() as folder:
        read_back(Path(folder) / "p.json", as_json(doc))
        read_back(Path(folder) / "p.toml", as_toml(doc))
        # PyYAML's loader recurses (another loader is on its way): 30 levels deep is enough.
        read_back(Path(folder) / "p.yaml", yaml.safe_dump(plain(doc, 30)))
    read(lambda: Policy.from_dict(plain(doc, 3000)))
