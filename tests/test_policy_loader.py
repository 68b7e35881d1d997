"""The policy loader: every bad policy, in any format or as a dict, is a PolicyError that names
its place, never another exception (docs/policy.md, "Errors")."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import pytest

from isolane.policy import Policy, PolicyError, PolicyWarning
from policy_edits import errors_of


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


def test_json_100_0_is_not_vni_100(tmp_path: Path) -> None:
    errors = file_errors(tmp_path / "p.json", '{"tenants": [{"name": "a", "vnis": [100.0], "rules": [{"proto": "tcp", "dst_ports": [80.0], "action": "allow"}]}]}')
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
