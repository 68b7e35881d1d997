"""YAML policy files as YAML 1.2 reads them (docs/policy.md, "YAML"): the YAML 1.1 number forms
that PyYAML's SafeLoader silently changed, duplicate keys, nesting, tags and aliases; PyYAML as
the reference for documents it dumps; and random text, which is read or refused, never a crash."""

from __future__ import annotations

import re
import sys
import tempfile
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
import yaml  # type: ignore[import-untyped]
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from isolane import _core
from isolane.policy import Policy, PolicyError, PolicyWarning
from isolane.policy.reuse import source_key


def read(tmp_path: Path, text: str) -> Policy:
    path = tmp_path / "p.yaml"
    path.write_text(text, encoding="utf-8")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PolicyWarning)
        return Policy.from_file(path)


def refused(tmp_path: Path, text: str) -> list[tuple[str, str]]:
    with pytest.raises(PolicyError) as info:
        read(tmp_path, text)
    assert info.value.source == str(tmp_path / "p.yaml")
    return info.value.errors


def tenant_yaml(**fields: str) -> str:
    """A one-tenant policy with `fields` written as they are (YAML text) into its one rule."""
    rule = "".join(f"\n        {key}: {value}" for key, value in fields.items())
    return f"tenants:\n  - name: t\n    vnis: [1]\n    rules:\n      - action: allow{rule}\n"


# ---------------------------------------------------------------------------------------------
# YAML 1.1's number forms
# ---------------------------------------------------------------------------------------------


def test_a_leading_zero_is_decimal_not_octal(tmp_path: Path) -> None:
    text = tenant_yaml(proto="tcp", dst_ports="0022")
    assert yaml.safe_load(text)["tenants"][0]["rules"][0]["dst_ports"] == 18  # what PyYAML made of it
    assert read(tmp_path, text).tenants[0].rules[0].dst_ports == ((22, 22),)
    policy = read(tmp_path, "tenants:\n  - name: t\n    vnis: [0100]\n")
    assert policy.tenants[0].vnis == (100,)
    assert _core.load_yaml("[0100, 0o17, 0x1F, 017, -012]") == [100, 15, 31, 17, -12]


@pytest.mark.parametrize("text", ["1:30", "0b11", "8_0", "1_000", "-0x1F", "190:20:30"])
def test_yaml_1_1_numbers_are_strings(text: str) -> None:
    assert _core.load_yaml(f"k: {text}") == {"k": text}
    assert yaml.safe_load(f"k: {text}")["k"] != text  # PyYAML read a number


def test_a_sexagesimal_port_is_an_error_in_its_place(tmp_path: Path) -> None:
    errors = refused(tmp_path, tenant_yaml(proto="tcp", dst_ports="1:30"))
    assert errors == [("tenants[0].rules[0].dst_ports", "'1:30' is not a port or a port range (write 80 or '8000-8080')")]
    place, message = refused(tmp_path, tenant_yaml(proto="tcp", dst_ports="8_0"))[0]
    assert place == "tenants[0].rules[0].dst_ports" and "'8_0'" in message


def test_yaml_1_1_booleans_are_strings(tmp_path: Path) -> None:
    assert _core.load_yaml("[yes, No, on, OFF, y, true, False, TRUE]") == ["yes", "No", "on", "OFF", "y", True, False, True]
    assert [t.name for t in read(tmp_path, "tenants:\n  - {name: no, vnis: [1]}\n  - {name: on, vnis: [2]}\n").tenants] == ["no", "on"]


def test_core_schema_scalars() -> None:
    text = "[~, null, '', \"\", 1e3, .5, -.inf, .NaN, +12, 9223372036854775808, 0xffffffffffffffffff, '12', !!str 12]"
    loaded = _core.load_yaml(text)
    assert loaded[:8] == [None, None, "", "", 1000.0, 0.5, float("-inf"), loaded[7]] and loaded[7] != loaded[7]
    assert loaded[8:] == [12, 2**63, 2**72 - 1, "12", "12"]
    assert [type(v) for v in loaded[8:11]] == [int, int, int]
    assert _core.load_yaml("") is None and _core.load_yaml("# only a comment\n") is None


def test_integers_beyond_128_bits_are_refused(tmp_path: Path) -> None:
    assert _core.load_yaml(f"[{2**127 - 1}, {-(2**127)}]") == [2**127 - 1, -(2**127)]
    assert refused(tmp_path, f"tenants: [{2**127}]\n") == [("", "invalid YAML: line 1, column 11: an integer beyond 128 bits")]
    assert refused(tmp_path, f"tenants: {'9' * 5000}\n") == [("", "invalid YAML: line 1, column 10: an integer beyond 128 bits")]


# ---------------------------------------------------------------------------------------------
# errors
# ---------------------------------------------------------------------------------------------


def test_duplicate_keys_name_both_lines(tmp_path: Path) -> None:
    text = "tenants:\n  - name: a\n    vnis: [1]\n    rules:\n      - action: allow\n        proto: tcp\n        proto: udp\n"
    assert refused(tmp_path, text) == [("", "line 7: duplicate key 'proto' (first at line 6)")]
    assert refused(tmp_path, "tenants: []\ntenants: []\n") == [("", "line 2: duplicate key 'tenants' (first at line 1)")]
    with pytest.raises(_core.DuplicateKeyError) as info:
        _core.load_yaml("{a: 1,\n b: 2,\n 'a': 3}")
    assert (info.value.line, info.value.column, info.value.first_line) == (3, 2, 1)
    assert isinstance(info.value, _core.YamlError)


@pytest.mark.parametrize("shape", ["flow", "block", "dashes"])
def test_five_thousand_levels_are_one_line_not_a_recursion_error(tmp_path: Path, shape: str) -> None:
    levels = 5_000
    text = {
        "flow": "tenants: " + "[" * levels + "]" * levels + "\n",
        "block": "tenants:\n" + "".join(f"{'  ' * (level + 1)}k:\n" for level in range(levels)),
        "dashes": "tenants:\n" + "- " * levels + "x\n",
    }[shape]
    [(place, message)] = refused(tmp_path, text)
    assert place == "" and "\n" not in message
    assert re.fullmatch(r"invalid YAML: line \d+, column \d+: nested deeper than 200 levels", message), message


def test_two_hundred_levels_are_read() -> None:
    nested = _core.load_yaml("[" * 200 + "]" * 200)
    for _ in range(199):
        [nested] = nested
    assert nested == []


def test_syntax_errors_name_line_and_column(tmp_path: Path) -> None:
    assert refused(tmp_path, "tenants:\n  - name: a\n    vnis: [1, 2\n") == [
        ("", "invalid YAML: line 4, column 1: while parsing a flow sequence, expected ',' or ']'")
    ]
    assert refused(tmp_path, "tenants: []\n---\ntenants: []\n") == [("", "invalid YAML: line 2, column 1: expected one document, found a second")]
    assert refused(tmp_path, "[a, b]: 1\n") == [("", "invalid YAML: line 1, column 1: a mapping key must be a scalar, not a collection")]
    with pytest.raises(_core.YamlError) as info:
        _core.load_yaml("a: 1\n  b: 2\n")
    assert (info.value.line, info.value.column) == (2, 4)


# ---------------------------------------------------------------------------------------------
# tags and aliases
# ---------------------------------------------------------------------------------------------


def test_core_tags_are_honoured(tmp_path: Path) -> None:
    assert _core.load_yaml("[!!str 0022, !!int '0022', !!float 1, !!bool 'true', !!null '', ! 12, !!seq [], !!map {}]") == [
        "0022",
        22,
        1.0,
        True,
        None,
        "12",
        [],
        {},
    ]
    assert read(tmp_path, tenant_yaml(proto="tcp", dst_ports="!!int '0x1bb'")).tenants[0].rules[0].dst_ports == ((443, 443),)


@pytest.mark.parametrize(
    ("tag", "shown"),
    [
        ("!!python/object/apply:os.system ['true']", "!!python/object/apply:os.system"),
        ("!!binary aGk=", "!!binary"),
        ("!!set {a}", "!!set"),
        ("!port 80", "!port"),
    ],
)
def test_other_tags_are_refused(tmp_path: Path, tag: str, shown: str) -> None:
    [(place, message)] = refused(tmp_path, tenant_yaml(proto="tcp", dst_ports=tag))
    assert place == "" and message.startswith(f"invalid YAML: line 7, column 20: unknown tag {shown}: only the core schema's"), message


def test_aliases_copy_and_merge_keys_are_refused(tmp_path: Path) -> None:
    text = "rules: &web [{proto: tcp, dst_ports: 443, action: allow}]\ntenants:\n  - {name: a, vnis: [1], rules: *web}\n  - {name: b, vnis: [2], rules: *web}\n"
    with pytest.raises(PolicyError) as info:  # `rules` is no top-level key: the aliases were read
        read(tmp_path, text)
    assert [place for place, _ in info.value.errors] == ["rules"]
    assert _core.load_yaml(text)["tenants"][1]["rules"] == [{"proto": "tcp", "dst_ports": 443, "action": "allow"}]
    merge = "base: &b {vnis: [1]}\ntenants:\n  - name: a\n    <<: *b\n"
    assert refused(tmp_path, merge) == [("", "invalid YAML: line 4, column 5: merge keys (<<) are YAML 1.1, not 1.2: write the keys out")]


def test_billion_laughs_is_refused_quickly(tmp_path: Path) -> None:
    lines = ["a0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, 10)]
    [(place, message)] = refused(tmp_path, "\n".join(lines) + "\n")
    assert place == "" and message.endswith(": anchors and aliases copy more than 1000000 nodes")


# ---------------------------------------------------------------------------------------------
# properties
# ---------------------------------------------------------------------------------------------


class CoreSchemaDumper(yaml.SafeDumper):  # type: ignore[misc]
    """safe_dump quotes strings that YAML 1.1 would read as something else; this also quotes
    those that only YAML 1.2 reads as numbers (`0o17`, `0x1F` without 1.1's meaning, `1e3`)."""


CoreSchemaDumper.add_implicit_resolver("tag:yaml.org,2002:int", re.compile(r"^(?:0o[0-7]+|0x[0-9a-fA-F]+)$"), list("0"))
CoreSchemaDumper.add_implicit_resolver(
    "tag:yaml.org,2002:float", re.compile(r"^[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?$"), list("-+.0123456789")
)

scalars = st.none() | st.booleans() | st.integers(-(2**127), 2**127 - 1) | st.floats(allow_nan=False) | st.text()
documents = st.recursive(scalars, lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(), inner, max_size=5), max_leaves=30)


@settings(max_examples=500, deadline=None)
@given(documents, st.sampled_from([False, True, None]), st.booleans(), st.sampled_from([20, 80]))
def test_documents_pyyaml_dumps_read_back_as_pyyaml_reads_them(document: Any, flow: bool | None, unicode: bool, width: int) -> None:
    text = yaml.dump(document, Dumper=CoreSchemaDumper, default_flow_style=flow, allow_unicode=unicode, width=width)
    # YAML 1.1 breaks lines at NEL, LS and PS too, and PyYAML writes them raw as breaks when it may
    # write Unicode; YAML 1.2 reads them as ordinary characters. Escaped (as \N, \L, \P), they agree.
    assume(not any(c in text for c in "\x85\u2028\u2029"))
    assert _core.load_yaml(text) == yaml.safe_load(text) == document, text


yaml_pieces = st.sampled_from([*"-:?,[]{}'\"!&*#|>%@` \t\r\n0123456789abcxyz.~_<=\u00e9\u2028\ufeff", "!!", "  ", "tenants", "name", "vnis"])
yaml_like = st.lists(yaml_pieces, max_size=60).map("".join)


@settings(max_examples=500, deadline=None)
@given(st.one_of(st.text(), yaml_like, documents.map(yaml.safe_dump)))
def test_random_text_is_a_policy_or_a_policy_error(text: str) -> None:
    with tempfile.TemporaryDirectory() as folder:
        try:
            read(Path(folder), text)
        except PolicyError as err:
            for place, message in err.errors:
                assert place != "" or "\n" not in message, message


def test_a_stream_hands_over_its_items_as_they_are_read() -> None:
    text = "port: {rate: 10Gbps}\ntenants:\n  - {name: a, vnis: [1]}\n  - {name: b, vnis: [2], rules: [{action: drop}]}\nother: [1, 2]\n"
    eager = _core.load_yaml(text)
    stream = _core.stream_yaml(text, "tenants")
    assert isinstance(stream, Sequence)
    assert stream.head() == {"port": {"rate": "10Gbps"}}  # what comes before the tenants
    assert stream[0] == eager["tenants"][0] and stream.available(16) == 2
    assert len(stream) == 2 and list(stream) == eager["tenants"] and stream[-1] == eager["tenants"][1]
    assert stream[0] is not stream[0]  # made anew at each read: nothing is kept
    with pytest.raises(IndexError):
        stream[2]
    document = stream.document()
    assert document["tenants"] is stream and {k: v for k, v in document.items() if k != "tenants"} == {k: v for k, v in eager.items() if k != "tenants"}
    # Only the root mapping's sequence under the key streams; anything else comes whole.
    for whole in ("- 1\n- 2\n", "tenants: 3\n", "tenants: &t [1]\nagain: *t\n", ""):
        stream = _core.stream_yaml(whole, "tenants")
        assert stream.head() is None and stream.document() == _core.load_yaml(whole) and len(stream) == 0


def spelt_plainly(value: Any) -> bool:
    """Whether ``repr`` spells ``value`` without rules of its own: no float, and strings of
    printable ASCII without a quote or a backslash (what the YAML reader digests itself)."""
    if isinstance(value, float):
        return False
    if isinstance(value, str):
        return all(" " <= c <= "~" and c not in "'\\" for c in value)
    if isinstance(value, list):
        return all(map(spelt_plainly, value))
    if isinstance(value, dict):
        return all(spelt_plainly(k) and spelt_plainly(v) for k, v in value.items())
    return True


ascii_text = st.text(st.characters(min_codepoint=32, max_codepoint=126))
ascii_documents = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**127), 2**127 - 1) | ascii_text,
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(ascii_text, inner, max_size=5),
    max_leaves=30,
)


@settings(max_examples=300, deadline=None)
@given(st.lists(documents | ascii_documents, max_size=4), st.sampled_from([False, None]))
def test_a_streams_digests_are_those_python_takes_of_its_items(items: list[Any], flow: bool | None) -> None:
    text = yaml.dump({"tenants": items}, Dumper=CoreSchemaDumper, default_flow_style=flow, allow_unicode=True)
    stream = _core.stream_yaml(text, "tenants")
    for i, item in enumerate(stream):
        digest = stream.repr_digest(i)
        assert digest is None or digest == source_key(item), (item, text)
        assert (digest is not None) == (isinstance(item, dict) and spelt_plainly(item)), item


@pytest.mark.parametrize(
    ("text", "items"),
    [
        ("tenants:\n  - {name: a}\n  - {name: b\n", 1),
        ("tenants: [{name: a}]\ntenants: [{name: b}]\n", 1),
        ("tenants:\n  - {name: a}\n  - !!foo {name: b}\n", 1),
    ],
)
def test_a_stream_raises_the_documents_error_where_its_items_stop(text: str, items: int) -> None:
    with pytest.raises(_core.YamlError) as whole:
        _core.load_yaml(text)
    stream = _core.stream_yaml(text, "tenants")
    assert stream.head() == {}
    assert [stream[i] for i in range(items)] == [{"name": "a"}][:items]
    for read in (lambda: stream[items], lambda: len(stream), stream.document, lambda: stream.available(16)):
        with pytest.raises(type(whole.value)) as streamed:
            read()
        assert str(streamed.value) == str(whole.value)


@pytest.mark.parametrize("streamed", [False, True])
def test_recurring_strings_are_one_object_and_unique_ones_are_not_interned(streamed: bool) -> None:
    """Keys and units recur: each is made once. Names and prefixes do not: interning them would
    keep an entry for each in Python's table of interned strings (two a tenant) for good."""
    text = "tenants:\n" + "".join(f"  - {{name: tenant-{i}, rate: 10Mbps, rules: [{{dst: 10.{i}.0.0/16, action: allow}}]}}\n" for i in range(50))
    items = list(_core.stream_yaml(text, "tenants") if streamed else _core.load_yaml(text)["tenants"])
    first, last = items[0], items[-1]
    assert [a is b for a, b in zip(first, last)] == [True, True, True]  # the keys
    assert first["rate"] is last["rate"] and first["rules"][0]["action"] is last["rules"][0]["action"]
    assert sys.intern("tenant-" + str(len(items) - 1)) is not last["name"]
    assert sys.intern("10.49.0.0/16") is not last["rules"][0]["dst"]
