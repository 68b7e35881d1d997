"""Rules the core reads as it parses a YAML policy (``rust/plain_rules.rs``): where it finds a rule
plainly valid, Python takes it as it is instead of checking it. Such a rule must be exactly the
rule Python's checks read, without an error; every other rule is left to Python."""

from __future__ import annotations

import functools
from ipaddress import ip_network
from typing import Any

import pytest
import yaml  # type: ignore[import-untyped]
from hypothesis import given, settings
from hypothesis import strategies as st

from isolane import _core
from isolane.policy import Policy
from isolane.policy.compact import CompactField
from isolane.policy.compile import _tenant_tables
from isolane.policy.constants import NO_CLASS, RULE_VOCABULARY
from isolane.policy.model import RULE_SLOTS, Rule, Tenant
from isolane.policy.validate import _Checker
from support.policy_reads import file_outcome, outcome


def plain_rules_of(rules: list[Any], flow: bool | None = None, class_names: list[str] | None = None) -> list[Rule | None]:
    """What the core makes of ``rules`` (one tenant's, written as YAML) in a tenant of the
    classes ``class_names``, the first its default."""
    class_names = class_names or ["default"]
    text = yaml.safe_dump({"tenants": [{"name": "t", "rules": rules}]}, default_flow_style=flow, sort_keys=False)
    stream = _core.stream_yaml(text, "tenants", RULE_VOCABULARY)
    found = stream.plain_rules(0, class_names, class_names[0], RULE_SLOTS)
    assert found is not None and len(found[0]) == len(rules) and found[1] == found[0].count(None)
    return found[0]


def test_typical_rules_are_read_by_the_core() -> None:
    rules = [
        {"dst": "10.1.2.3/32", "dst_ports": 443, "proto": "tcp", "action": "allow"},
        {"src": "192.168.0.0/16", "dst": "any", "src_ports": ["1000-2000", [3000, 3100], 22], "action": "drop", "name": "no ssh"},
        {"proto": ["udp", 132], "dscp": ["ef", 10], "action": "allow", "class": "default"},
    ]
    found = plain_rules_of(rules)
    assert found == [
        Rule("allow", "default", None, ip_network("10.1.2.3/32"), None, ((443, 443),), (6,)),
        Rule("drop", None, ip_network("192.168.0.0/16"), None, ((22, 22), (1000, 2000), (3000, 3100)), name="no ssh"),
        Rule("allow", "default", proto=(17, 132), dscp=(10, 46)),
    ]
    checker = _Checker()
    assert found == [checker.rule(raw, "r", ["default"], "default") for raw in rules]
    assert checker.errors == []
    dst = Rule.__dict__["dst"]
    assert isinstance(dst, CompactField) and dst.held(found[0]) == (0x0A010203 << 8) | 32, "an IPv4 prefix held as one integer"


def test_rules_python_reads_its_own_way_are_left_to_it() -> None:
    rules = [
        {"dst": "fd00::/64", "action": "allow"},
        {"dst": "10.0.0.1/8", "action": "allow"},
        {"action": "allow", "ethertype": "arp"},
        {"action": "allow", "description": "web"},
        {"action": "allow", "name": "café"},
        {"action": "drop", "class": "default"},
        {"action": "allow", "proto": "icmp", "dst_ports": 80},
        {"action": "allow", "dst_ports": 1.5},
        {"action": "deny"},
    ]
    assert plain_rules_of(rules) == [None] * len(rules)


def test_a_class_the_tenant_lacks_is_reported_where_the_rule_is() -> None:
    assert plain_rules_of([{"action": "allow", "class": "gold"}], class_names=["default"]) == [None]
    assert plain_rules_of([{"action": "allow", "class": "gold"}], class_names=["default", "gold"]) == [Rule("allow", "gold")]
    kind, errors, _ = file_outcome("tenants:\n- name: t\n  vnis: [1]\n  rules:\n  - {action: allow, class: gold}\n")
    assert kind == "errors"
    assert errors == [("tenants[0].rules[0].class", "unknown class 'gold' (the tenant's classes: 'default')")]


def test_a_stream_without_a_vocabulary_reads_no_rule() -> None:
    stream = _core.stream_yaml("tenants:\n- {name: t, rules: [{action: allow}]}\n", "tenants")
    assert stream.plain_rules(0, ["default"], "default", RULE_SLOTS) is None


def test_repeated_ports_and_protocols_are_one_object() -> None:
    first, _, last = plain_rules_of([{"dst_ports": 443, "proto": "tcp", "action": "allow"}] * 3)
    assert first is not None and last is not None
    assert first.dst_ports is last.dst_ports and first.proto is last.proto


def mostly(valid: st.SearchStrategy[Any], edges: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """``valid`` four times in five, else ``edges``: most rules are then plain, some not."""
    return st.sampled_from([True] * 4 + [False]).flatmap(lambda plain: valid if plain else edges)


# Values around each edge of what the core reads: valid and not, plain and not.
prefixes = mostly(
    st.sampled_from(["10.0.0.0/8", "10.1.2.3", "10.1.2.3/32", "0.0.0.0/0", "255.255.255.255/32", "192.168.4.0/22", "any"]),
    st.sampled_from(["10.0.0.1/8", "10.0.0.01", "10.0.0.0/08", "10.0.0.0/33", "256.0.0.0/8", "10.0.0", "10.0.0.0.0", "fd00::/64",
                     "::ffff:10.0.0.0/104", " 10.0.0.0/8", "10.0.0.0/255.0.0.0", "", 10]),
)  # fmt: skip
near = st.integers(76, 86)  # ports that touch and overlap, to merge
one_port = mostly(
    st.one_of(near, st.sampled_from(["80", "0080", "79-81", "0-65535", "83-65535", "0-79", "65535"])),
    st.one_of(st.integers(-2, 65537), st.sampled_from(["90-80", "80-", "-80", "65536", "1_000", " 80", "٣", "0x50"]), st.just(True), st.just(8.0)),
)
pair = mostly(st.lists(st.one_of(near, near, st.sampled_from([0, 65535])), min_size=2, max_size=2), st.lists(st.integers(-1, 65536), max_size=3))
ports = st.one_of(one_port, st.lists(st.one_of(one_port, pair), max_size=4))
protocol = mostly(
    st.sampled_from(["tcp", "udp", "sctp", 6, 17, 136]),
    st.one_of(st.sampled_from(["icmp", "gre", "TCP", "ipv6-icmp", "bogus", 1, 255]), st.integers(-1, 257), st.just(False)),
)
dscp = mostly(st.one_of(st.sampled_from(["ef", "af41", "cs1", "be", "va"]), st.integers(0, 63)), st.one_of(st.sampled_from(["EF", "tcp"]), st.integers(-1, 65)))
names = mostly(st.sampled_from(["web", "", "a b", "gold", "default"]), st.sampled_from(["café", "cafe\u0301", "tab\there", 7, "silver"]))
values = {
    "class": names,
    "name": names,
    "src": prefixes,
    "dst": prefixes,
    "src_ports": ports,
    "dst_ports": ports,
    "proto": st.one_of(protocol, st.lists(protocol, max_size=3)),
    "dscp": st.one_of(dscp, st.lists(dscp, max_size=3)),
}

rule = st.builds(
    lambda plain, action, others: {**plain, **action, **others},
    st.fixed_dictionaries({}, optional=values),
    st.sampled_from([{"action": "allow"}] * 6 + [{"action": "drop"}] * 3 + [{"action": "Allow"}, {}]),
    st.sampled_from([{}] * 12 + [{"description": "a rule"}, {"ethertype": "arp"}, {"colour": "red"}]),
)
class_lists = st.sampled_from([None, ["gold"], ["gold", "default"], ["default", "café"]])


def assert_read_alike(rules: list[dict[str, Any]], class_names: list[str], flow: bool | None = None) -> None:
    """Each rule the core makes is the rule Python's checks read, without an error."""
    for made, raw in zip(plain_rules_of(rules, flow, class_names), rules, strict=True):
        checker = _Checker()
        read = checker.rule(raw, "r", class_names, class_names[0])
        if made is not None:
            assert checker.errors == [], f"the core made {raw!r}, which has errors"
            assert made == read, raw


@settings(max_examples=400, deadline=None)
@given(st.sampled_from(sorted(values)).flatmap(lambda key: st.lists(values[key].map(lambda value: {"action": "allow", key: value}), min_size=1, max_size=8)))
def test_each_value_the_core_reads_is_read_as_python_reads_it(rules: list[dict[str, Any]]) -> None:
    assert_read_alike(rules, ["default", "gold"])


@settings(max_examples=200, deadline=None)
@given(st.lists(st.fixed_dictionaries({"action": st.just("allow"), "proto": values["proto"], "dst_ports": ports}), min_size=1, max_size=6))
def test_protocols_that_match_ports_are_read_as_python_reads_them(rules: list[dict[str, Any]]) -> None:
    assert_read_alike(rules, ["default"])


@settings(max_examples=400, deadline=None)
@given(st.lists(rule, min_size=1, max_size=6), class_lists, st.sampled_from([False, True, None]))
def test_a_rule_the_core_reads_is_the_rule_python_reads(rules: list[dict[str, Any]], classes: list[str] | None, flow: bool | None) -> None:
    assert_read_alike(rules, classes or ["default"], flow)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.lists(rule, max_size=4), min_size=1, max_size=4), class_lists)
def test_a_file_of_such_rules_reads_as_the_document_read_whole(rule_lists: list[list[dict[str, Any]]], classes: list[str] | None) -> None:
    tenants = [{"name": f"t{i}", "vnis": [i + 1], "rules": rules} for i, rules in enumerate(rule_lists)]
    if classes is not None:
        tenants[0]["classes"] = [{"name": name} for name in classes]
    text = yaml.safe_dump({"tenants": tenants}, sort_keys=False)
    whole = outcome(lambda: Policy.from_dict(_core.load_yaml(text)))
    assert file_outcome(text) == whole


@pytest.mark.parametrize("count", [1, 3])
def test_rules_past_a_fallback_keep_their_places(count: int) -> None:
    rules = [{"action": "allow", "dst": "fd00::/64"}] * count + [{"action": "allow", "dst": "10.0.0.1/8"}]
    kind, errors, _ = file_outcome(yaml.safe_dump({"tenants": [{"name": "t", "vnis": [1], "rules": rules}]}))
    assert (kind, errors) == ("errors", [(f"tenants[0].rules[{count}].dst", "'10.0.0.1/8' has host bits set; did you mean '10.0.0.0/8'?")])


def tenant_read_with_core(tenant: dict[str, Any]) -> Tenant | None:
    """``tenant`` as the checks read it, taking the rules (and rows) the core made."""
    stream = _core.stream_yaml(yaml.safe_dump({"tenants": [tenant]}), "tenants", RULE_VOCABULARY)
    return _Checker().tenant(stream[0], "tenants[0]", functools.partial(stream.plain_rules, 0, slots=RULE_SLOTS))


def test_the_core_packs_the_rows_of_a_tenant_of_plain_rules() -> None:
    rules = [{"dst": "10.0.0.0/8", "proto": ["tcp", "udp"], "dst_ports": [80, 443], "action": "allow", "class": "web"}, {"action": "drop"}]
    read = tenant_read_with_core({"name": "t", "classes": [{"name": "bulk"}, {"name": "web"}], "default_class": "bulk", "rules": rules})
    assert read is not None and read._tables is not None, "the tables kept as the core packed them"
    assert read._tables.packed_rows == _tenant_tables(read).packed_rows
    assert list(read._tables.cls) == [1, 1, 1, 1, NO_CLASS] and list(read._tables.policy_rule) == [0, 0, 0, 0, 1]
    one = tenant_read_with_core({"name": "t", "rules": rules[1:]})
    assert one is not None and one._tables is None, "a one-rule tenant's tables are compiled when an engine takes it"


@settings(max_examples=300, deadline=None)
@given(st.lists(rule, min_size=2, max_size=6), class_lists, st.sampled_from([None, "gold", "default"]))
def test_rows_the_core_packs_are_the_rows_python_packs(rules: list[dict[str, Any]], classes: list[str] | None, default: str | None) -> None:
    tenant: dict[str, Any] = {"name": "t", "rules": rules}
    if classes is not None:
        tenant["classes"] = [{"name": name} for name in classes]
    if default is not None:
        tenant["default_class"] = default
    read = tenant_read_with_core(tenant)
    if read is not None and read._tables is not None:
        assert read._tables.packed_rows == _tenant_tables(read).packed_rows
        assert (read._tables.default_action, read._tables.default_cls) == (_tenant_tables(read).default_action, _tenant_tables(read).default_cls)
