"""Policies: reading (YAML, TOML, JSON, dict), validation errors and warnings, units, the JSON
Schema, and compilation into the classification arrays of docs/classify-contract.md."""

from __future__ import annotations

import ipaddress
import itertools
import json
import os
import random
import subprocess
import sys
import time
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import jsonschema  # type: ignore[import-untyped]
import numpy as np
import pytest
import yaml  # type: ignore[import-untyped]
from hypothesis import given, settings
from hypothesis import strategies as st

import isolane
from isolane import policy as P
from isolane.policy import Policy, PolicyError, PolicyWarning
from support.locations import ROOT, SAMPLE, SHARED
from support.policy_edits import DELETE, assert_schema_accepts_if_isolane_does, edited, errors_of, policy_warnings, quiet

EXAMPLE = ROOT / "pcaps" / "tenants.yaml"
CLASSBENCH = SHARED / "classbench"


# ---------------------------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------------------------


def one_tenant(*rules: Any, **tenant: Any) -> dict[str, Any]:
    """A one-tenant policy (VNI 1) with the given rules."""
    return {"tenants": [{"name": "t", "vnis": [1], **tenant, "rules": list(rules)}]}


@pytest.fixture
def caught() -> Iterator[list[warnings.WarningMessage]]:
    with warnings.catch_warnings(record=True) as found:
        warnings.simplefilter("always")
        yield found



# ---------------------------------------------------------------------------------------------
# reading
# ---------------------------------------------------------------------------------------------

POLICY_DICT: dict[str, Any] = {
    "unknown_tenant": "allow",
    "tenants": [
        {
            "name": "a",
            "vnis": [100, 101],
            "vlans": [7],
            "rate": "40Gbps",
            "burst": "256KiB",
            "classes": [{"name": "gold", "priority": 0, "weight": 3, "ceil": "1Gbps"}, {"name": "bulk"}],
            "default_class": "bulk",
            "default": "drop",
            "rules": [
                {
                    "name": "web",
                    "src": "10.0.0.0/8",
                    "dst": "10.1.2.3",
                    "proto": "tcp",
                    "dst_ports": [80, "443", "8000-8080"],
                    "action": "allow",
                    "class": "gold",
                },
                {"src": "fd00::/64", "dscp": ["ef", 10], "action": "allow"},
                {"proto": [6, "udp"], "src_ports": [[1000, 2000]], "action": "drop"},
            ],
        },
        {"name": "b", "vnis": [200], "sources": ["192.0.2.0/24", "2001:db8::/32"], "microburst": {"window": "10us", "threshold": "35Gbps"}},
    ],
}

POLICY_YAML = """
unknown_tenant: allow
tenants:
  - name: a
    vnis: [100, 101]
    vlans: [7]
    rate: 40Gbps
    burst: 256KiB
    classes:
      - {name: gold, priority: 0, weight: 3, ceil: 1Gbps}
      - {name: bulk}
    default_class: bulk
    default: drop
    rules:
      - {name: web, src: 10.0.0.0/8, dst: 10.1.2.3, proto: tcp, dst_ports: [80, "443", 8000-8080], action: allow, class: gold}
      - {src: "fd00::/64", dscp: [ef, 10], action: allow}
      - {proto: [6, udp], src_ports: [[1000, 2000]], action: drop}
  - name: b
    vnis: [200]
    sources: [192.0.2.0/24, "2001:db8::/32"]
    microburst: {window: 10us, threshold: 35Gbps}
"""

POLICY_TOML = """
unknown_tenant = "allow"

[[tenants]]
name = "a"
vnis = [100, 101]
vlans = [7]
rate = "40Gbps"
burst = "256KiB"
classes = [{ name = "gold", priority = 0, weight = 3, ceil = "1Gbps" }, { name = "bulk" }]
default_class = "bulk"
default = "drop"

[[tenants.rules]]
name = "web"
src = "10.0.0.0/8"
dst = "10.1.2.3"
proto = "tcp"
dst_ports = [80, "443", "8000-8080"]
action = "allow"
class = "gold"

[[tenants.rules]]
src = "fd00::/64"
dscp = ["ef", 10]
action = "allow"

[[tenants.rules]]
proto = [6, "udp"]
src_ports = [[1000, 2000]]
action = "drop"

[[tenants]]
name = "b"
vnis = [200]
sources = ["192.0.2.0/24", "2001:db8::/32"]
microburst = { window = "10us", threshold = "35Gbps" }
"""


def test_yaml_toml_json_and_dict_are_one_schema(tmp_path: Path, caught: list[warnings.WarningMessage]) -> None:
    (tmp_path / "p.yaml").write_text(POLICY_YAML)
    (tmp_path / "p.yml").write_text(POLICY_YAML)
    (tmp_path / "p.toml").write_text(POLICY_TOML)
    (tmp_path / "p.json").write_text(json.dumps(POLICY_DICT))
    (tmp_path / "P.YAML").write_text(POLICY_YAML)
    from_dict = Policy.from_dict(POLICY_DICT)
    for name in ("p.yaml", "p.yml", "p.toml", "p.json", "P.YAML"):
        assert Policy.from_file(tmp_path / name) == from_dict, name
        assert Policy.from_file(str(tmp_path / name)).to_dict() == from_dict.to_dict(), name
    assert [str(w.message) for w in caught] == []


def test_the_model_holds_what_the_file_says() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PolicyWarning)
        policy = Policy.from_dict(POLICY_DICT)
    a, b = policy.tenants
    assert policy.unknown_tenant == "allow" and policy.tenant_names == ["a", "b"]
    assert a.vnis == (100, 101) and a.vlans == (7,) and a.sources == ()
    assert a.contract == P.Contract(rate_bps=40_000_000_000, burst_bytes=262_144)
    assert a.classes[0] == P.TrafficClass("gold", 0, 3, P.Contract(ceil_bps=1_000_000_000))
    assert a.class_names == ["gold", "bulk"] and a.class_id("bulk") == 1
    assert a.default == "drop" and a.default_class == "bulk"
    web, v6, drop = a.rules
    assert web == P.Rule(
        action="allow",
        class_name="gold",
        src=ipaddress.ip_network("10.0.0.0/8"),
        dst=ipaddress.ip_network("10.1.2.3/32"),
        dst_ports=((80, 80), (443, 443), (8000, 8080)),
        proto=(6,),
        name="web",
    )
    assert v6.class_name == "bulk" and v6.dscp == (10, 46) and v6.src == ipaddress.ip_network("fd00::/64")
    assert drop.class_name is None and drop.proto == (6, 17) and drop.src_ports == ((1000, 2000),)
    assert b.sources == (ipaddress.ip_network("192.0.2.0/24"), ipaddress.ip_network("2001:db8::/32"))
    assert b.contract.microburst == P.Microburst(window_ns=10_000, threshold_bps=35_000_000_000)
    assert b.classes == (P.TrafficClass("default"),) and b.default == "allow" and b.default_class == "default"
    assert policy.tenant("b") is b
    with pytest.raises(KeyError):
        policy.tenant("c")


def test_to_dict_is_canonical_plain_data_that_reads_back_the_same(tmp_path: Path) -> None:
    policy = quiet(yaml.safe_load(EXAMPLE.read_text()))
    data = policy.to_dict()
    assert Policy.from_dict(data) == policy
    assert json.loads(json.dumps(data)) == data  # plain data only

    def no_none(value: Any) -> None:
        assert value is not None
        for item in value.values() if isinstance(value, dict) else value if isinstance(value, list) else ():
            no_none(item)

    no_none(data)
    (tmp_path / "again.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert Policy.from_file(tmp_path / "again.yaml") == policy
    # defaults are written out; several ports are written as strings, which older versions
    # (where a list of two integers was a range) read the same
    minimal = quiet({"tenants": [{"name": "x", "vnis": [9], "rules": [{"dst_ports": [80, 443], "action": "allow"}]}]}).to_dict()
    assert minimal == {
        "version": 1,
        "unknown_tenant": "drop",
        "tenants": [
            {
                "name": "x",
                "vnis": [9],
                "classes": [{"name": "default"}],
                "default_class": "default",
                "default": "allow",
                "rules": [{"dst_ports": ["80", "443"], "action": "allow", "class": "default"}],
            }
        ],
    }


def test_file_format_comes_from_the_extension(tmp_path: Path) -> None:
    (tmp_path / "p.txt").write_text(POLICY_YAML)
    with pytest.raises(PolicyError) as info:
        Policy.from_file(tmp_path / "p.txt")
    assert info.value.errors == [("", "cannot tell the format from the extension '.txt': use .yaml, .yml, .toml or .json")]
    assert str(info.value) == f"{tmp_path / 'p.txt'}: policy: cannot tell the format from the extension '.txt': use .yaml, .yml, .toml or .json"
    with pytest.raises(FileNotFoundError):
        Policy.from_file(tmp_path / "missing.yaml")


def test_syntax_errors_name_the_line(tmp_path: Path) -> None:
    (tmp_path / "bad.yaml").write_text("tenants:\n  - name: a\n    vnis: [1, 2\n")
    with pytest.raises(PolicyError) as info:
        Policy.from_file(tmp_path / "bad.yaml")
    assert info.value.source == str(tmp_path / "bad.yaml")
    assert info.value.errors[0][1].startswith("invalid YAML: line 4, column 1:")
    (tmp_path / "bad.toml").write_text('[[tenants]]\nname = "a"\nvnis = 1 2\n')
    with pytest.raises(PolicyError) as info:
        Policy.from_file(tmp_path / "bad.toml")
    assert info.value.errors == [("", "invalid TOML: Expected newline or end of document after a statement (at line 3, column 10)")]
    (tmp_path / "bad.json").write_text('{"tenants": [}')
    with pytest.raises(PolicyError) as info:
        Policy.from_file(tmp_path / "bad.json")
    assert info.value.errors == [("", "line 1, column 14: Expecting value")]


def test_yaml_duplicate_keys_are_errors_not_silently_dropped(tmp_path: Path) -> None:
    (tmp_path / "dup.yaml").write_text("tenants:\n  - name: a\n    vnis: [1]\n    name: b\n")
    with pytest.raises(PolicyError) as info:
        Policy.from_file(tmp_path / "dup.yaml")
    assert info.value.errors == [("", "line 4: duplicate key 'name' (first at line 2)")]


def test_empty_file_and_non_mapping(tmp_path: Path) -> None:
    (tmp_path / "empty.yaml").write_text("# nothing\n")
    with pytest.raises(PolicyError) as info:
        Policy.from_file(tmp_path / "empty.yaml")
    assert info.value.errors == [("", "the policy is empty: expected a mapping with 'tenants'")]
    assert errors_of([1, 2]) == [("", "expected a mapping, got a list")]
    assert errors_of({}) == [("", "missing key 'tenants'")]
    assert quiet({"tenants": []}).tenants == ()


def test_defaults() -> None:
    policy = quiet({"tenants": [{"name": "a", "vnis": [5], "classes": [{"name": "x"}, {"name": "y"}], "rules": [{"action": "allow"}]}]})
    tenant = policy.tenants[0]
    assert policy.unknown_tenant == "drop"
    assert tenant.default == "allow" and tenant.default_class == "x" and tenant.rules[0].class_name == "x"
    tables = policy.compile()
    assert tables.unknown_action == P.ACTION_DROP
    assert tables.tenants[0].default_action == P.ACTION_ALLOW and tables.tenants[0].default_cls == 0


# ---------------------------------------------------------------------------------------------
# errors
# ---------------------------------------------------------------------------------------------


def test_the_issue_example_message() -> None:
    rules = [{"action": "allow"}] * 5 + [{"dst": "10.0.0.0/33", "action": "allow"}]
    data = {"tenants": [{"name": "a", "vnis": [1]}, {"name": "b", "vnis": [2]}, {"name": "c", "vnis": [3], "rules": rules}]}
    with pytest.raises(PolicyError) as info:
        Policy.from_dict(data)
    err = info.value
    assert isinstance(err, isolane.IsolaneError) and isinstance(err, ValueError)
    assert err.errors == [("tenants[2].rules[5].dst", "'10.0.0.0/33' is not a valid prefix: the length of an IPv4 prefix is 0-32")]
    assert str(err) == "tenants[2].rules[5].dst: '10.0.0.0/33' is not a valid prefix: the length of an IPv4 prefix is 0-32"
    assert err.source is None


RULE_ERRORS = [
    # (rule, path under tenants[0].rules[0], message)
    ({"src": "10.0.0.0/33"}, "src", "'10.0.0.0/33' is not a valid prefix: the length of an IPv4 prefix is 0-32"),
    ({"dst": "fd00::/129"}, "dst", "'fd00::/129' is not a valid prefix: the length of an IPv6 prefix is 0-128"),
    ({"src": "10.0.0.256/24"}, "src", "'10.0.0.256/24' is not a valid prefix: '10.0.0.256' is not an IPv4 or IPv6 address"),
    ({"src": "fd00:::1"}, "src", "'fd00:::1' is not a valid prefix: 'fd00:::1' is not an IPv4 or IPv6 address"),
    ({"src": "10.0.0.0/255.0.0.0"}, "src", "'10.0.0.0/255.0.0.0' is not a valid prefix: write a prefix length (/24), not a netmask"),
    ({"src": "010.0.0.0/8"}, "src", "'010.0.0.0/8' is not a valid prefix: '010.0.0.0' is not an IPv4 or IPv6 address"),
    ({"src": " 10.0.0.0/8"}, "src", "' 10.0.0.0/8' is not a valid prefix: remove the spaces around it"),
    ({"src": "10.0.0.1/24"}, "src", "'10.0.0.1/24' has host bits set; did you mean '10.0.0.0/24'?"),
    ({"dst": "fd00::1/64"}, "dst", "'fd00::1/64' has host bits set; did you mean 'fd00::/64'?"),
    ({"src": 167772160}, "src", "expected a prefix such as '10.0.0.0/8' or 'fd00::/64', got an integer (167772160)"),
    ({"src": "10.0.0.0/8", "dst": "fd00::/8"}, "dst", "'fd00::/8' is IPv6 but src '10.0.0.0/8' is IPv4: no packet can match both"),
    ({"src": "fd00::/8", "dst": "10.0.0.1"}, "dst", "'10.0.0.1/32' is IPv4 but src 'fd00::/8' is IPv6: no packet can match both"),
    ({"dst_ports": "90-80"}, "dst_ports", "'90-80' is reversed (90 > 80); did you mean '80-90'?"),
    ({"dst_ports": [[90, 80]]}, "dst_ports[0]", "[90, 80] is reversed (90 > 80); did you mean [80, 90]?"),
    ({"dst_ports": ["443-80"]}, "dst_ports[0]", "'443-80' is reversed (443 > 80); did you mean '80-443'?"),
    ({"src_ports": [22, [9, 3]]}, "src_ports[1]", "[9, 3] is reversed (9 > 3); did you mean [3, 9]?"),
    ({"dst_ports": 65536}, "dst_ports", "port 65536 is outside 0-65535"),
    ({"dst_ports": -1}, "dst_ports", "port -1 is outside 0-65535"),
    ({"dst_ports": "1-70000"}, "dst_ports", "port 70000 is outside 0-65535"),
    ({"dst_ports": [22, 80, 99999]}, "dst_ports[2]", "port 99999 is outside 0-65535"),
    ({"dst_ports": "http"}, "dst_ports", "'http' is not a port or a port range (write 80 or '8000-8080')"),
    ({"dst_ports": 8.5}, "dst_ports", "expected a port (integer), a range ('80-90') or a list of them, got a number (8.5)"),
    ({"dst_ports": True}, "dst_ports", "expected a port (integer), a range ('80-90') or a list of them, got a boolean (true)"),
    ({"dst_ports": [80, [90, 100, 110]]}, "dst_ports[1]", "expected a port (integer) or a range ('80-90' or [80, 90]), got a list"),
    ({"dst_ports": []}, "dst_ports", "an empty list matches no packet: leave the key out to match any port"),
    ({"proto": "tpc"}, "proto", "'tpc' is not a protocol name; did you mean 'tcp'?"),
    ({"proto": "TCP"}, "proto", "'TCP' is not a protocol name; did you mean 'tcp'?"),
    ({"proto": ["udp", 256]}, "proto[1]", "protocol 256 is outside 0-255"),
    ({"proto": []}, "proto", "an empty list matches no packet: leave the key out to match any protocol"),
    ({"dscp": 64}, "dscp", "DSCP 64 is outside 0-63"),
    ({"dscp": "af44"}, "dscp", "'af44' is not a DSCP name; did you mean 'af43'?"),
    ({"dscp": "EF"}, "dscp", "'EF' is not a DSCP name; did you mean 'ef'?"),
    ({"proto": "icmp", "dst_ports": 80}, "proto", "'icmp' has no ports, but the rule matches ports (ports exist for tcp, udp, sctp, dccp and udplite)"),
    (
        {"proto": ["tcp", "gre", 1], "src_ports": 80},
        "proto",
        "'icmp', 'gre' have no ports, but the rule matches ports (ports exist for tcp, udp, sctp, dccp and udplite)",
    ),
    ({"action": "drop", "class": "gold"}, "class", "a drop rule puts packets in no class: remove 'class' or make the action 'allow'"),
    ({"class": "gld"}, "class", "unknown class 'gld'; did you mean 'gold'?"),
    ({"class": "platinum"}, "class", "unknown class 'platinum' (the tenant's classes: 'gold', 'bulk')"),
    ({"action": "alow"}, "action", "'alow' is not an action; did you mean 'allow'?"),
    ({"action": "permit"}, "action", "'permit' is not an action (expected 'allow' or 'drop')"),
    ({"action": None}, "action", "expected an action ('allow' or 'drop'), got nothing (null)"),
    ({"dst_port": 80}, "dst_port", "unknown key; did you mean 'dst_ports'?"),
    ({"source": "10.0.0.0/8"}, "source", "unknown key; did you mean 'src'?"),
    ({"zzz": 1}, "zzz", "unknown key (expected one of: name, description, src, dst, src_ports, dst_ports, proto, dscp, ethertype, action, class)"),
    ({"name": 5}, "name", "expected a string, got an integer (5)"),
    ({"ethertype": "apr"}, "ethertype", "'apr' is not an EtherType name; did you mean 'arp'?"),
    ({"ethertype": "lldp"}, "ethertype", "'lldp' is not an EtherType name (names: arp, ipv4, ipv6; or a number such as 0x88cc)"),
    ({"ethertype": 0x05DC}, "ethertype", "EtherType 1500 is outside 1536-65535 (below 0x0600 the field is a length)"),
    ({"ethertype": "0x8100"}, "ethertype", "0x8100 is a VLAN tag: isolane looks past VLAN tags to the frame's EtherType"),
    ({"ethertype": "0xzz"}, "ethertype", "'0xzz' is not a hexadecimal number"),
    (
        {"ethertype": "arp", "proto": "udp", "dst": "10.0.0.1"},
        "ethertype",
        "a rule that matches frames by EtherType takes no IP keys: remove dst, proto (or ethertype, to match IP packets by their fields)",
    ),
]


@pytest.mark.parametrize(("rule", "where", "message"), RULE_ERRORS, ids=[f"{w}:{m[:30]}" for _, w, m in RULE_ERRORS])
def test_rule_errors_name_the_place(rule: dict[str, Any], where: str, message: str) -> None:
    rule = {"action": "allow", **rule}
    data = one_tenant({"action": "allow"}, rule, classes=[{"name": "gold"}, {"name": "bulk"}])
    assert errors_of(data) == [(f"tenants[0].rules[1].{where}", message)]


def test_a_rule_without_action_and_a_rule_that_is_not_a_mapping() -> None:
    assert errors_of(one_tenant({"src": "10.0.0.0/8"}, "allow")) == [
        ("tenants[0].rules[0]", "missing key 'action'"),
        ("tenants[0].rules[1]", "expected a mapping, got a string ('allow')"),
    ]


def test_prefixes_of_either_family_that_can_meet_are_fine() -> None:
    # ::/0 and ::/64 contain the IPv4-mapped range, so they can meet an IPv4 address
    policy = quiet(one_tenant({"src": "10.0.0.0/8", "dst": "::/0", "action": "allow"}, {"src": "::/64", "dst": "10.0.0.1", "action": "allow"}))
    assert len(policy.tenants[0].rules) == 2
    quiet(one_tenant({"src": "10.0.0.0/8", "dst": "::ffff:0:0/96", "action": "allow"}))
    assert errors_of(one_tenant({"src": "10.0.0.0/8", "dst": "64:ff9b::/96", "action": "allow"})) == [
        ("tenants[0].rules[0].dst", "'64:ff9b::/96' is IPv6 but src '10.0.0.0/8' is IPv4: no packet can match both")
    ]


TENANT_ERRORS = [
    ({"vnis": [16777216]}, "vnis[0]", "VNI 16777216 is outside 0-16777215 (24 bits)"),
    ({"vnis": [-1]}, "vnis[0]", "VNI -1 is outside 0-16777215 (24 bits)"),
    ({"vnis": [5, 5]}, "vnis[1]", "VNI 5 is already listed at tenants[0].vnis[0]"),
    ({"vnis": "100"}, "vnis", "expected a list of VNIs (integers), got a string ('100')"),
    ({"vnis": [True]}, "vnis[0]", "expected VNI (an integer), got a boolean (true)"),
    ({"vnis": [1.5]}, "vnis[0]", "expected VNI (an integer), got a number (1.5)"),
    ({"vlans": [4096]}, "vlans[0]", "VLAN id 4096 is outside 0-4095 (12 bits)"),
    ({"sources": ["10.0.0.1/8"]}, "sources[0]", "'10.0.0.1/8' has host bits set; did you mean '10.0.0.0/8'?"),
    ({"sources": ["any"]}, "sources[0]", "'any' cannot be a source: list the prefixes the tenant owns"),
    ({"name": ""}, "name", "a tenant name must not be empty"),
    ({"name": ["a"]}, "name", "expected a tenant name, got a list"),
    ({"rulez": []}, "rulez", "unknown key; did you mean 'rules'?"),
    ({"vni": [1]}, "vni", "unknown key; did you mean 'vnis'?"),
    ({"defualt": "drop"}, "defualt", "unknown key; did you mean 'default'?"),
    ({"default": "deny"}, "default", "'deny' is not an action (expected 'allow' or 'drop')"),
    ({"default_class": "glod"}, "default_class", "unknown class 'glod'; did you mean 'gold'?"),
    ({"classes": []}, "classes", "a tenant needs at least one class: leave 'classes' out for one class 'default'"),
    ({"classes": [{"name": "gold"}, {"name": "gold"}]}, "classes[1].name", "class 'gold' is already defined at tenants[0].classes[0]"),
    ({"classes": [{"name": "gold", "priority": 8}]}, "classes[0].priority", "priority 8 is outside 0-7"),
    ({"classes": [{"name": "gold", "weight": 0}]}, "classes[0].weight", "weight must be at least 1, got 0"),
    ({"classes": [{"name": "gold", "wieght": 2}]}, "classes[0].wieght", "unknown key; did you mean 'weight'?"),
    ({"classes": [{"priority": 1}]}, "classes[0]", "missing key 'name'"),
    ({"rules": {"action": "allow"}}, "rules", "expected a list of rules (mappings), got a mapping"),
    ({"rate": "40gbps"}, "rate", "'40gbps': unknown rate unit 'gbps'; did you mean 'Gbps'?"),
    ({"rate": 40_000_000_000}, "rate", "40000000000 has no unit: write it as a string with its unit, e.g. '40Gbps'"),
    ({"rate": "256KiB"}, "rate", "'256KiB' is a size, not a rate: write e.g. '40Gbps'"),
    ({"rate": "0Gbps"}, "rate", "'0Gbps' must be more than zero"),
    ({"burst": "1.5bit"}, "burst", "'1.5bit' is not a whole number of bytes"),
    ({"burst": "40Gbps"}, "burst", "'40Gbps' is a rate, not a size: write e.g. '256KiB'"),
    ({"rate": "40Gbps", "ceil": "10Gbps"}, "ceil", "ceil '10Gbps' is below rate '40Gbps'"),
    ({"shaper": {"rate": "1Gbps", "queu": "1MiB"}}, "shaper.queu", "unknown key; did you mean 'queue'?"),
    ({"shaper": {"queue": "1MHz"}}, "shaper.queue", "'1MHz': unknown size unit 'MHz' (e.g. '256KiB')"),
    ({"shaper": "fast"}, "shaper", "expected a mapping, got a string ('fast')"),
    ({"microburst": {"window": "10us"}}, "microburst", "missing key 'threshold'"),
    ({"microburst": {"window": "10 minutes", "threshold": "1Gbps"}}, "microburst.window", "'10 minutes': unknown duration unit 'minutes' (e.g. '10us')"),
    ({"microburst": {"window": "0.5ns", "threshold": "1Gbps"}}, "microburst.window", "'0.5ns' is not a whole number of nanoseconds"),
]


@pytest.mark.parametrize(("tenant", "where", "message"), TENANT_ERRORS, ids=[f"{w}:{m[:30]}" for _, w, m in TENANT_ERRORS])
def test_tenant_errors_name_the_place(tenant: dict[str, Any], where: str, message: str) -> None:
    data = {"tenants": [{"name": "t", "vnis": [1], "classes": [{"name": "gold"}], **tenant}]}
    assert errors_of(data) == [(f"tenants[0].{where}", message)]


def test_top_level_errors() -> None:
    assert errors_of({"tenant": []}) == [("tenant", "unknown key; did you mean 'tenants'?"), ("", "missing key 'tenants'")]
    assert errors_of({"tenants": [], "unknown_tenant": "reject"}) == [("unknown_tenant", "'reject' is not an action (expected 'allow' or 'drop')")]
    assert errors_of({"tenants": [], "version": 2}) == [("version", "unsupported version 2: this isolane reads version 1")]
    assert errors_of({"tenants": {}}) == [("tenants", "expected a list of tenants (mappings), got a mapping")]
    assert errors_of({"tenants": [[]]}) == [("tenants[0]", "expected a mapping, got a list")]
    assert errors_of({"tenants": [{"vnis": [1]}]}) == [("tenants[0]", "missing key 'name'")]
    assert errors_of({"tenants": [], 3: "x"}) == [("", "keys must be strings, got an integer (3)")]


def test_duplicate_tenant_names_and_shared_vnis_and_vlans_name_both() -> None:
    data = {
        "tenants": [
            {"name": "a", "vnis": [100, 101], "vlans": [7]},
            {"name": "b", "vnis": [102, 101]},
            {"name": "a", "vnis": [103], "vlans": [7]},
        ]
    }
    assert errors_of(data) == [
        ("tenants[1].vnis[1]", "VNI 101 is claimed by both 'a' (tenants[0].vnis[1]) and 'b'"),
        ("tenants[2].name", "'a' is already the name of tenants[0]"),
        ("tenants[2].vlans[0]", "VLAN id 7 is claimed by both 'a' (tenants[0].vlans[0]) and 'a'"),
    ]


def test_all_errors_are_reported_at_once() -> None:
    data = {
        "unknown_tenat": "drop",
        "tenants": [
            {
                "name": "a",
                "vnis": [100, 1 << 24],
                "classes": [{"name": "bulk"}],
                "rules": [
                    {"src": "10.0.0.1/24", "action": "allow"},
                    {"dst_ports": "90-80", "action": "allow", "class": "bulkk"},
                ],
            },
            {"name": "b", "vnis": [100], "rules": [{"proto": "tcpp", "action": "drop"}]},
            {"name": "a"},
        ],
    }
    expected = [
        ("unknown_tenat", "unknown key; did you mean 'unknown_tenant'?"),
        ("tenants[0].vnis[1]", "VNI 16777216 is outside 0-16777215 (24 bits)"),
        ("tenants[0].rules[0].src", "'10.0.0.1/24' has host bits set; did you mean '10.0.0.0/24'?"),
        ("tenants[0].rules[1].class", "unknown class 'bulkk'; did you mean 'bulk'?"),
        ("tenants[0].rules[1].dst_ports", "'90-80' is reversed (90 > 80); did you mean '80-90'?"),
        ("tenants[1].rules[0].proto", "'tcpp' is not a protocol name; did you mean 'tcp'?"),
        ("tenants[1].vnis[0]", "VNI 100 is claimed by both 'a' (tenants[0].vnis[0]) and 'b'"),
        ("tenants[2].name", "'a' is already the name of tenants[0]"),
    ]
    with pytest.raises(PolicyError) as info:
        Policy.from_dict(data)
    assert info.value.errors == expected
    lines = str(info.value).splitlines()
    assert lines[0] == "8 errors in the policy:"
    assert lines[1:] == [f"  {path}: {message}" for path, message in expected]


def test_errors_from_a_file_name_the_file(tmp_path: Path) -> None:
    path = tmp_path / "broken.yaml"
    path.write_text("tenants:\n  - name: a\n    vnis: [1]\n    rulez: []\n  - name: b\n    vnis: [1]\n")
    with pytest.raises(PolicyError) as info:
        Policy.from_file(path)
    assert str(info.value) == (
        f"{path}: 2 errors:\n"
        "  tenants[0].rulez: unknown key; did you mean 'rules'?\n"
        "  tenants[1].vnis[0]: VNI 1 is claimed by both 'a' (tenants[0].vnis[0]) and 'b'"
    )


def test_thousands_of_errors_are_all_kept_and_the_message_stays_readable() -> None:
    rules = [{"src": f"10.0.{i % 256}.1/24", "action": "allow"} for i in range(1000)]
    with pytest.raises(PolicyError) as info:
        Policy.from_dict(one_tenant(*rules))
    assert len(info.value.errors) == 1000
    lines = str(info.value).splitlines()
    assert lines[0] == "1000 errors in the policy:" and len(lines) == 202
    assert lines[-1] == "  ... and 800 more (all of them are in the exception's .errors)"


def test_port_lists_are_sorted_and_merged() -> None:
    policy = quiet(
        one_tenant(
            {"proto": "tcp", "dst_ports": [82, 80, 81], "action": "allow"},
            {"proto": "udp", "dst_ports": ["85-95", "80-90", 100, "101", [96, 98]], "action": "allow"},
            {"proto": "sctp", "src_ports": ["0-100", "101-65535"], "action": "allow"},
        )
    )
    tcp, udp, sctp = policy.tenants[0].rules
    assert tcp.dst_ports == ((80, 82),)
    assert udp.dst_ports == ((80, 98), (100, 101))
    assert sctp.src_ports is None  # all ports: the same as leaving it out
    tables = policy.compile().tenants[0]
    assert tables.dst_port_lo.tolist() == [80, 80, 100, 0] and tables.dst_port_hi.tolist() == [82, 98, 101, 65535]
    assert tables.policy_rule.tolist() == [0, 1, 1, 2]


def test_a_list_of_two_integers_is_two_ports_not_a_range(tmp_path: Path) -> None:
    (tmp_path / "p.yaml").write_text("tenants:\n  - {name: t, vnis: [1], rules: [{proto: tcp, dst_ports: [80, 443], action: drop}]}\n")
    (tmp_path / "p.toml").write_text('[[tenants]]\nname = "t"\nvnis = [1]\nrules = [{ proto = "tcp", dst_ports = [80, 443], action = "drop" }]\n')
    from_dict = quiet(one_tenant({"proto": "tcp", "dst_ports": [80, 443], "action": "drop"}))
    assert from_dict.tenants[0].rules[0].dst_ports == ((80, 80), (443, 443))
    for name in ("p.yaml", "p.toml"):
        assert Policy.from_file(tmp_path / name) == from_dict, name
    assert quiet(one_tenant({"proto": "tcp", "dst_ports": (80, 443), "action": "drop"})) == from_dict  # a tuple is a list
    assert quiet(from_dict.to_dict()) == from_dict
    tables = from_dict.compile().tenants[0]
    assert list(zip(tables.dst_port_lo.tolist(), tables.dst_port_hi.tolist())) == [(80, 80), (443, 443)]
    table = isolane.RuleTable(**tables.rule_arrays())
    ports = np.array([80, 443, 81, 442], dtype=np.uint16)
    ipv4 = np.full(len(ports), 0x0A000001, dtype=np.uint32)
    matched = table.lookup(ipv4, ipv4, np.full(len(ports), 5000, dtype=np.uint16), ports, np.full(len(ports), 6, dtype=np.uint8))
    assert matched.tolist() == [0, 1, -1, -1]


@pytest.mark.parametrize("written", ["80-443", ["80-443"], [[80, 443]], [(80, 443)], [[80, 100], "101-443"]])
def test_a_range_is_a_string_or_a_pair_inside_a_list(written: Any) -> None:
    policy = quiet(one_tenant({"dst_ports": written, "action": "allow"}))
    assert policy.tenants[0].rules[0].dst_ports == ((80, 443),)


def test_ranges_read_the_same_from_yaml_and_toml(tmp_path: Path) -> None:
    (tmp_path / "p.yaml").write_text('tenants:\n  - {name: t, vnis: [1], rules: [{dst_ports: [[80, 443], "8000-8080"], action: allow}]}\n')
    (tmp_path / "p.toml").write_text('[[tenants]]\nname = "t"\nvnis = [1]\nrules = [{ dst_ports = [[80, 443], "8000-8080"], action = "allow" }]\n')
    for name in ("p.yaml", "p.toml"):
        assert Policy.from_file(tmp_path / name).tenants[0].rules[0].dst_ports == ((80, 443), (8000, 8080)), name


def test_a_rule_may_not_expand_without_bound() -> None:
    ports = [str(p) for p in range(0, 1000, 2)]  # 500 separate ports
    errors = errors_of(one_tenant({"src_ports": ports, "dst_ports": ports, "action": "allow"}))
    assert errors == [("tenants[0].rules[0]", "the rule expands into 250,000 table rules (at most 65,536): use port ranges")]


# ---------------------------------------------------------------------------------------------
# warnings: rules that are never matched
# ---------------------------------------------------------------------------------------------


def test_a_covered_rule_is_reported_naming_both_rules() -> None:
    data = one_tenant(
        {"proto": "udp", "action": "allow"},
        {"name": "tcp", "src": "10.0.0.0/8", "proto": "tcp", "action": "allow"},
        {"src": "10.1.0.0/16", "proto": "tcp", "dst_ports": 80, "action": "drop"},
        {"name": "web", "src": "10.1.2.0/24", "dst": "10.9.9.9", "proto": "tcp", "dst_ports": "80-80", "dscp": "ef", "action": "drop"},
    )
    assert policy_warnings(data) == [
        "tenants[0].rules[2] is never matched: tenants[0].rules[1] ('tcp') covers it",
        "tenants[0].rules[3] ('web') is never matched: tenants[0].rules[1] ('tcp') covers it",
    ]


def test_warnings_point_at_the_callers_line(caught: list[warnings.WarningMessage]) -> None:
    Policy.from_dict(one_tenant({"action": "allow"}, {"action": "drop"}))
    assert len(caught) == 1 and caught[0].category is PolicyWarning
    assert caught[0].filename == __file__
    assert str(caught[0].message) == "tenants[0].rules[1] is never matched: tenants[0].rules[0] covers it"


@pytest.mark.parametrize(
    ("earlier", "later"),
    [
        ({"dst_ports": "85-95"}, {"dst_ports": "80-90"}),  # partial port overlap
        ({"dst_ports": "80-90"}, {"dst_ports": "80-91"}),
        ({"src": "10.0.0.0/25"}, {"src": "10.0.0.0/24"}),  # narrower earlier prefix
        ({"src": "10.0.0.0/8", "dst": "10.1.0.0/16"}, {"src": "10.0.0.0/8", "dst": "10.0.0.0/8"}),
        ({"src": "10.0.0.0/8"}, {"dst": "10.0.0.0/8"}),  # different fields constrained
        ({"proto": "tcp"}, {}),  # earlier matches a protocol, later any
        ({"proto": "tcp"}, {"proto": "udp"}),
        ({"dscp": "ef"}, {"dscp": ["ef", "af41"]}),  # covers one expansion of two
        ({"dst_ports": 22, "proto": "tcp"}, {"dst_ports": ["22", "80"], "proto": "tcp"}),
        ({"src": "0.0.0.0/0"}, {"src": "fd00::/8"}),  # 'any IPv4' does not cover IPv6
        ({"src": "0.0.0.0/0"}, {}),  # ... nor any
        ({"src": "fd00::/8"}, {"src": "::ffff:10.0.0.0/104"}),
        ({"proto": "hopopt"}, {}),  # protocol 0 is a protocol, not "any"
        ({"dscp": 0}, {}),  # ... and DSCP 0 a DSCP
        ({"dscp": "cs0"}, {"dscp": "ef"}),
    ],
)
def test_partial_overlap_is_not_shadowing(earlier: dict[str, Any], later: dict[str, Any]) -> None:
    assert policy_warnings(one_tenant({**earlier, "action": "allow"}, {**later, "action": "drop"})) == []


@pytest.mark.parametrize(
    ("earlier", "later"),
    [
        ({}, {"src": "10.0.0.0/8", "proto": "tcp", "dst_ports": 80, "dscp": 46}),  # match-all
        ({"src": "10.0.0.0/8"}, {"src": "10.0.0.0/8"}),  # identical
        ({"dst_ports": "80-90"}, {"dst_ports": "85-90"}),
        ({"dst_ports": [[80, 90]]}, {"dst_ports": [[81, 89]]}),
        ({"proto": ["tcp", "udp"]}, {"proto": "udp", "src_ports": 53}),
        ({"dscp": ["ef", "af41"]}, {"dscp": "ef"}),
        ({"src": "::/0"}, {"src": "10.0.0.0/8"}),  # ::/0 holds the IPv4-mapped range
        ({"src": "::ffff:0:0/96"}, {"src": "10.0.0.0/8"}),
        ({"dst": "fd00::/16"}, {"dst": "fd00:1::/32", "proto": "icmpv6"}),
        ({"src": "10.0.0.0/8", "dst": "0.0.0.0/0"}, {"src": "10.1.0.0/16"}),  # an IPv4 rule's any is any IPv4
        ({"src": "10.0.0.0/8"}, {"src": "10.1.0.0/16", "dst": "0.0.0.0/0"}),
    ],
)
def test_covered_rules_are_found(earlier: dict[str, Any], later: dict[str, Any]) -> None:
    assert policy_warnings(one_tenant({**earlier, "action": "allow"}, {**later, "action": "drop"})) == [
        "tenants[0].rules[1] is never matched: tenants[0].rules[0] covers it"
    ]


def test_an_expanded_rule_is_shadowed_only_when_every_part_is() -> None:
    data = one_tenant(
        {"proto": "tcp", "dst_ports": 22, "action": "drop"},
        {"proto": "tcp", "dst_ports": "80-90", "action": "allow"},
        {"proto": "tcp", "dst_ports": ["22", "85"], "action": "allow"},  # 22 by rule 0, 85 by rule 1
        {"proto": "tcp", "dst_ports": ["22", "95"], "action": "allow"},  # 95 is reachable
        {"proto": "tcp", "dst_ports": ["22", "95"], "action": "allow"},  # ... but not any more
        {"src": "10.0.0.0/8", "proto": "tcp", "dst_ports": ["80-85", "86-90"], "action": "allow"},  # merged: 80-90
    )
    assert policy_warnings(data) == [
        "tenants[0].rules[2] is never matched: tenants[0].rules[0] and tenants[0].rules[1] cover it",
        "tenants[0].rules[4] is never matched: tenants[0].rules[0] and tenants[0].rules[3] cover it",
        "tenants[0].rules[5] is never matched: tenants[0].rules[1] covers it",
    ]


def test_union_coverage_is_not_claimed() -> None:
    # 80-85 and 86-90 together cover 80-90, but no single earlier rule does (documented limit)
    data = one_tenant({"dst_ports": "80-85", "action": "allow"}, {"dst_ports": "86-90", "action": "allow"}, {"dst_ports": "80-90", "action": "drop"})
    assert policy_warnings(data) == []


def test_rules_of_other_tenants_do_not_shadow() -> None:
    data = {"tenants": [{"name": "a", "vnis": [1], "rules": [{"action": "allow"}]}, {"name": "b", "vnis": [2], "rules": [{"action": "drop"}]}]}
    assert policy_warnings(data) == []


def test_other_warnings() -> None:
    data = {
        "tenants": [
            {"name": "a", "vnis": [1], "sources": ["10.0.0.0/8"]},
            {"name": "b", "sources": ["10.1.0.0/16", "192.0.2.0/24", "192.0.2.128/25"]},
            {"name": "idle"},
        ]
    }
    assert policy_warnings(data) == [
        "tenants[2] ('idle') has no vnis, vlans or sources: no traffic reaches it",
        "tenants[1].sources[0] ('10.1.0.0/16') is never used: tenants[0].sources[0] ('10.0.0.0/8') covers it",
        "tenants[1].sources[2] ('192.0.2.128/25') is never used: tenants[1].sources[1] ('192.0.2.0/24') covers it",
    ]


def test_warnings_from_a_file_name_the_file(tmp_path: Path) -> None:
    path = tmp_path / "p.toml"
    path.write_text('[[tenants]]\nname = "a"\nvnis = [1]\nrules = [{ action = "allow" }, { action = "drop", name = "late" }]\n')
    with pytest.warns(PolicyWarning) as found:
        policy = Policy.from_file(path)
    assert [str(w.message) for w in found] == [f"{path}: tenants[0].rules[1] ('late') is never matched: tenants[0].rules[0] covers it"]
    assert policy.warnings == (f"{path}: tenants[0].rules[1] ('late') is never matched: tenants[0].rules[0] covers it",)


# A plain reference for the shadowing check: every pair, with ipaddress objects.

_MAPPED = ipaddress.IPv6Network("::ffff:0:0/96")


def _as_v6(network: Any) -> ipaddress.IPv6Network:
    if network is None:
        return ipaddress.IPv6Network("::/0")
    if network.version == 4:
        return ipaddress.IPv6Network(f"::ffff:{network.network_address}/{96 + network.prefixlen}")
    return network


def reference_shadowed(tenant: P.Tenant) -> list[tuple[int, list[int]]]:
    rows = []  # (policy rule, src, dst, src ports, dst ports, proto or None, dscp or None)
    for index, rule in enumerate(tenant.rules):
        src, dst = _as_v6(rule.src), _as_v6(rule.dst)
        if src.subnet_of(_MAPPED) and dst.supernet_of(_MAPPED):
            dst = _MAPPED
        if dst.subnet_of(_MAPPED) and src.supernet_of(_MAPPED):
            src = _MAPPED
        for proto, dscp, sp, dp in itertools.product(rule.proto or [None], rule.dscp or [None], rule.src_ports or [(0, 65535)], rule.dst_ports or [(0, 65535)]):
            rows.append((index, src, dst, sp, dp, proto, dscp))

    def covers(e: tuple[Any, ...], r: tuple[Any, ...]) -> bool:
        return (
            e[1].supernet_of(r[1])
            and e[2].supernet_of(r[2])
            and e[3][0] <= r[3][0] <= r[3][1] <= e[3][1]
            and e[4][0] <= r[4][0] <= r[4][1] <= e[4][1]
            and e[5] in (None, r[5])
            and e[6] in (None, r[6])
        )

    out = []
    for index in range(len(tenant.rules)):
        mine = [r for r in rows if r[0] == index]
        earlier = [e for e in rows if e[0] < index]
        firsts = []
        for r in mine:
            first = next((e[0] for e in earlier if covers(e, r)), None)
            if first is None:
                break
            firsts.append(first)
        else:
            out.append((index, sorted(set(firsts))))
    return out


_PREFIXES = [
    None,
    "0.0.0.0/0",
    "10.0.0.0/8",
    "10.1.0.0/16",
    "10.1.2.0/24",
    "10.1.2.3",
    "10.2.0.0/16",
    "::/0",
    "::ffff:0:0/96",
    "fd00::/8",
    "fd00:1::/32",
    "fd00:1::5",
    "fe80::/10",
]
_PORTS = [None, 0, 22, 80, "80-90", "85-95", "0-1023", [22, "80-90"], ["85", "1000-2000"]]


@st.composite
def random_rules(draw: st.DrawFn) -> list[dict[str, Any]]:
    rules = []
    for _ in range(draw(st.integers(1, 14))):
        rule: dict[str, Any] = {"action": draw(st.sampled_from(["allow", "drop"]))}
        for key, choices in (
            ("src", _PREFIXES),
            ("dst", _PREFIXES),
            ("src_ports", _PORTS[:5]),
            ("dst_ports", _PORTS),
            ("proto", [None, "tcp", "udp", ["tcp", "udp"]]),
            ("dscp", [None, "ef", 0, ["ef", "af41"]]),
        ):
            value = draw(st.sampled_from(choices))
            if value is not None:
                rule[key] = value
        src, dst = (ipaddress.ip_network(rule[k]) if k in rule else None for k in ("src", "dst"))
        fams = [P._families(x) for x in (src, dst)]
        if not fams[0] & fams[1]:
            continue
        rules.append(rule)
    return rules


def shadowed_both_ways(policy: Policy) -> list[tuple[int, list[int]]]:
    """The fast check, with small groups scanned in Python and with every group vectorised:
    both must give the same answer."""
    tables = policy.compile().tenants[0]
    small = P._shadowed_rules(tables)
    saved = P.shadowed._BIG_GROUP  # set where _shadowed_rules reads it (isolane.policy.shadowed)
    P.shadowed._BIG_GROUP = 0
    try:
        assert P._shadowed_rules(tables) == small
    finally:
        P.shadowed._BIG_GROUP = saved
    return small


@settings(max_examples=300, deadline=None)
@given(random_rules())
def test_shadowing_agrees_with_a_plain_reference(rules: list[dict[str, Any]]) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PolicyWarning)
        policy = Policy.from_dict(one_tenant(*rules))
    assert shadowed_both_ways(policy) == reference_shadowed(policy.tenants[0])


@pytest.mark.parametrize("seed", range(4))
def test_shadowing_in_large_groups_agrees_with_the_reference(seed: int) -> None:
    # hundreds of rules with equal prefixes, protocol and DSCP: only port ranges differ
    rng = random.Random(seed)
    rules = []
    for _ in range(300):
        lo, lo2 = rng.randrange(0, 60), rng.randrange(0, 60)
        rules.append(
            {
                "src": "10.0.0.0/8",
                "proto": "tcp",
                "src_ports": f"{lo}-{lo + rng.randrange(0, 40)}",
                "dst_ports": f"{lo2}-{lo2 + rng.randrange(0, 40)}",
                "action": "allow",
            }
        )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PolicyWarning)
        policy = Policy.from_dict(one_tenant(*rules))
    found = shadowed_both_ways(policy)
    assert found == reference_shadowed(policy.tenants[0])
    assert 50 < len(found) < 290


def cpu_seconds(work: Callable[[], object]) -> float:
    """This process's CPU time for ``work`` (other processes' load does not count)."""
    start = time.process_time()
    work()
    return time.process_time() - start


def assert_grows_linearly(seconds_at: Callable[[int], float], rules: int) -> None:
    """Four times the rules in at most eight times the time (quadratic work takes sixteen), plus
    a little fixed time: a relative gate, not a wall-clock one. Each the best of three, as
    other processes' load slows this one's CPU time too (shared caches, a collection)."""
    small, large = (min(seconds_at(count) for _ in range(3)) for count in (rules // 4, rules))
    assert large < 8 * small + 0.1, f"{rules // 4:,} rules: {small:.3f} s; {rules:,} rules: {large:.3f} s"


def mixed_rules(count: int) -> list[dict[str, Any]]:
    """IPv4 rules with port lists and IPv6 rules with DSCP, alternately."""
    rules: list[dict[str, Any]] = []
    for i in range(count):
        if i % 2:
            rules.append(
                {
                    "src": f"10.{i >> 8 & 255}.{i & 255}.0/24",
                    "dst": f"10.200.{i & 255}.{i >> 8 & 255}",
                    "proto": ["tcp", "udp"],
                    "dst_ports": [i % 1000, "8000-8080"],
                    "action": "allow",
                }
            )
        else:
            rules.append(
                {"src": f"fd00:{i:x}::/64", "dst": "fd01::/48", "proto": "udp", "src_ports": f"{i % 60000}-{i % 60000 + 10}", "dscp": i % 64, "action": "drop"}
            )
    return rules


def test_ten_thousand_rules_validate_in_time_that_grows_linearly() -> None:
    rules = mixed_rules(10_000)
    rules.append({"src": "10.3.5.0/24", "dst": "10.200.5.3", "proto": "tcp", "dst_ports": 8001, "action": "drop"})  # covered by rule 773
    with warnings.catch_warnings(record=True) as found:
        warnings.simplefilter("always")
        policy = Policy.from_dict(one_tenant(*rules))
    assert [str(w.message) for w in found] == ["tenants[0].rules[10000] is never matched: tenants[0].rules[773] covers it"]
    assert len(policy.compile().tenants[0]) == 5_000 * 4 + 5_000 + 1
    assert_grows_linearly(lambda count: cpu_seconds(lambda: policy_warnings(one_tenant(*mixed_rules(count)))), 10_000)


def nested_port_rules(count: int) -> list[dict[str, Any]]:
    """Every rule with the same prefixes and protocol: only the port ranges tell them apart,
    each range inside the one before it."""
    return [{"proto": "tcp", "dst_ports": f"{i}-{2 * count - i}", "action": "allow"} for i in range(count)]


def test_ten_thousand_rules_in_one_group_of_ports() -> None:
    rules = nested_port_rules(10_000)
    warned = policy_warnings(one_tenant(*rules))
    assert len(warned) == 9_999 and warned[-1] == "tenants[0].rules[9999] is never matched: tenants[0].rules[0] covers it"
    assert_grows_linearly(lambda count: cpu_seconds(lambda: policy_warnings(one_tenant(*nested_port_rules(count)))), 10_000)
    rules.reverse()  # now each range holds the ones before it: every earlier rule is a candidate, none covers
    assert policy_warnings(one_tenant(*rules)) == []
    assert_grows_linearly(lambda count: cpu_seconds(lambda: policy_warnings(one_tenant(*reversed(nested_port_rules(count))))), 10_000)


def classbench_policy(path: Path) -> dict[str, Any]:
    rules = []
    for line in path.read_text().splitlines():
        fields = line.lstrip("@").split("\t")
        src, dst = (str(ipaddress.ip_network(f, strict=False)) for f in fields[:2])
        sport, dport = ([int(x) for x in f.split(":")] for f in fields[2:4])
        proto, mask = (int(x, 16) for x in fields[4].split("/"))
        rule: dict[str, Any] = {"src": src, "dst": dst, "action": "allow"}
        if sport != [0, 65535]:
            rule["src_ports"] = f"{sport[0]}-{sport[1]}"
        if dport != [0, 65535]:
            rule["dst_ports"] = f"{dport[0]}-{dport[1]}"
        if mask:
            rule["proto"] = proto
        rules.append(rule)
    return one_tenant(*rules)


@pytest.mark.parametrize("name", ["acl1_1k", "fw1_1k", "ipc1_1k"])
def test_shadowing_on_classbench_agrees_with_the_reference(name: str) -> None:
    if not (CLASSBENCH / name).is_file():
        pytest.skip(f"{CLASSBENCH / name} not found (../shared beside the project)")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PolicyWarning)
        policy = Policy.from_dict(classbench_policy(CLASSBENCH / name))
    found = P._shadowed_rules(policy.compile().tenants[0])
    assert found == reference_shadowed(policy.tenants[0])
    assert len(found) == {"acl1_1k": 22, "fw1_1k": 9, "ipc1_1k": 0}[name]


@pytest.mark.parametrize("name", ["acl1_10k", "fw1_10k", "ipc1_10k"])
def test_classbench_10k_validates_in_well_under_a_few_seconds(name: str) -> None:
    if not (CLASSBENCH / name).is_file():
        pytest.skip(f"{CLASSBENCH / name} not found (../shared beside the project)")
    data = classbench_policy(CLASSBENCH / name)
    start = time.perf_counter()
    warned = policy_warnings(data)
    assert time.perf_counter() - start < 3.0
    assert len(warned) == {"acl1_10k": 81, "fw1_10k": 23, "ipc1_10k": 14}[name]


# ---------------------------------------------------------------------------------------------
# units
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "bits_per_second"),
    [
        ("40Gbps", 40_000_000_000),
        ("40 Gbps", 40_000_000_000),
        ("40Gbit/s", 40_000_000_000),
        ("5GB/s", 40_000_000_000),  # bytes
        ("1.5Gbps", 1_500_000_000),
        ("100kbps", 100_000),
        ("100Kbps", 100_000),
        ("1Kibps", 1024),
        ("1KiB/s", 8192),
        ("2Mibps", 2 * 1024**2),
        ("1Tbps", 10**12),
        ("1bps", 1),
        ("3B/s", 24),
    ],
)
def test_parse_rate(text: str, bits_per_second: int) -> None:
    assert P.parse_rate(text) == bits_per_second


@pytest.mark.parametrize(
    ("text", "size_bytes"),
    [
        ("256KiB", 262_144),
        ("1500B", 1500),
        ("64kB", 64_000),
        ("64KB", 64_000),
        ("1MiB", 1_048_576),
        ("1.5KiB", 1536),
        ("8Mbit", 1_000_000),
        ("16bit", 2),
        ("1 GiB", 2**30),
    ],
)
def test_parse_size(text: str, size_bytes: int) -> None:
    assert P.parse_size(text) == size_bytes


@pytest.mark.parametrize(
    ("text", "ns"), [("10us", 10_000), ("10µs", 10_000), ("10μs", 10_000), ("1.5ms", 1_500_000), ("2s", 2 * 10**9), ("250ns", 250), ("0.5us", 500)]
)
def test_parse_duration(text: str, ns: int) -> None:
    assert P.parse_duration(text) == ns


@pytest.mark.parametrize(
    ("parse", "value", "message"),
    [
        (P.parse_rate, "40gbps", "'40gbps': unknown rate unit 'gbps'; did you mean 'Gbps'?"),
        (P.parse_rate, "5GBps", "'5GBps': unknown rate unit 'GBps'; did you mean 'GB/s' or 'Gbps'?"),
        (P.parse_rate, "40Gb/s", "'40Gb/s': unknown rate unit 'Gb/s'; did you mean 'Gbps', 'Gbit/s' or 'GB/s'?"),
        (P.parse_rate, "fast", "'fast' is not a rate: write a number and a unit, e.g. '40Gbps'"),
        (P.parse_rate, "40", "'40' has no unit: write e.g. '40Gbps'"),
        (P.parse_rate, 40, "40 has no unit: write it as a string with its unit, e.g. '40Gbps'"),
        (P.parse_rate, True, "expected a rate like '40Gbps', got a boolean (true)"),
        (P.parse_rate, "10us", "'10us' is a duration, not a rate: write e.g. '40Gbps'"),
        (P.parse_rate, "0.1bps", "'0.1bps' is not a whole number of bits per second"),
        (P.parse_size, "1Mb", "'1Mb': unknown size unit 'Mb'; did you mean 'MB' or 'Mbit'?"),
        (P.parse_size, "3bit", "'3bit' is not a whole number of bytes"),
        (P.parse_size, "0.5B", "'0.5B' is not a whole number of bytes"),
        (P.parse_size, "1kiB", "'1kiB': unknown size unit 'kiB'; did you mean 'KiB'?"),
        (P.parse_duration, "1min", "'1min': unknown duration unit 'min' (e.g. '10us')"),
        (P.parse_duration, "-1us", "'-1us' is not a duration: write a number and a unit, e.g. '10us'"),
        (P.parse_duration, None, "expected a duration like '10us', got nothing (null)"),
    ],
)
def test_unit_errors_say_what_is_wrong(parse: Any, value: Any, message: str) -> None:
    with pytest.raises(ValueError) as info:
        parse(value)
    assert str(info.value) == message


def test_canonical_unit_text() -> None:
    assert P.format_rate(40_000_000_000) == "40Gbps"
    assert P.format_rate(1_500_000_000) == "1500Mbps"
    assert P.format_rate(7) == "7bps"
    assert P.format_size(262_144) == "256KiB"
    assert P.format_size(1_000_000) == "1MB"
    assert P.format_size(1536) == "1536B"
    assert P.format_size(2_048_000) == "2000KiB"
    assert P.format_duration(10_000) == "10us"
    assert P.format_duration(1_500_000) == "1500us"


@given(st.integers(1, 10**16))
def test_format_then_parse_is_the_identity(n: int) -> None:
    assert P.parse_rate(P.format_rate(n)) == n
    assert P.parse_size(P.format_size(n)) == n
    assert P.parse_duration(P.format_duration(n)) == n


# ---------------------------------------------------------------------------------------------
# JSON Schema
# ---------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def validator() -> jsonschema.Draft202012Validator:
    schema = json.loads(P.schema_text())
    assert schema == P.schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    return jsonschema.Draft202012Validator(schema)


def test_the_schema_accepts_the_example_and_canonical_policies(validator: jsonschema.Draft202012Validator) -> None:
    example = yaml.safe_load(EXAMPLE.read_text())
    assert list(validator.iter_errors(example)) == []
    assert list(validator.iter_errors(quiet(example).to_dict())) == []
    assert list(validator.iter_errors(POLICY_DICT)) == []


def _mutate(path: list[Any], value: Any) -> dict[str, Any]:
    return edited(POLICY_DICT, path, value)


RULE0 = ["tenants", 0, "rules", 0]

BAD_FOR_BOTH: list[tuple[list[Any], Any]] = [
    (["tenants", 0, "rulez"], []),
    (["unknown_tenat"], "drop"),
    (["tenants", 0, "vnis"], [1 << 24]),
    (["tenants", 0, "vnis"], [True]),
    (["tenants", 0, "vnis"], "100"),
    (["tenants", 0, "vlans"], [4096]),
    (["tenants", 0, "sources"], ["any"]),
    (["tenants", 0, "sources"], ["10.0.0.0/33"]),
    (["tenants", 0, "name"], ""),
    (["tenants", 0, "classes"], []),
    (["tenants", 0, "classes", 0, "priority"], 9),
    (["tenants", 0, "rate"], "40gbps"),
    (["tenants", 0, "burst"], 5),
    (["tenants", 0, "microburst"], {"window": "10us"}),
    (["tenants", 0, "shaper"], {"queue": "10us"}),
    ([*RULE0, "src"], "10.0.0.0/33"),
    ([*RULE0, "src"], "10.0.0.256"),
    ([*RULE0, "dst"], "fd00::/129"),
    ([*RULE0, "dst"], "fd00:::1"),
    ([*RULE0, "dst"], 5),
    ([*RULE0, "dst_ports"], 70000),
    ([*RULE0, "dst_ports"], "70000"),
    ([*RULE0, "dst_ports"], "80-"),
    ([*RULE0, "dst_ports"], []),
    ([*RULE0, "dst_ports"], [80, 90, 70000]),
    ([*RULE0, "dst_ports"], [[80, 70000]]),
    ([*RULE0, "dst_ports"], [[80, 90, 100]]),
    ([*RULE0, "proto"], "tpc"),
    ([*RULE0, "proto"], 256),
    ([*RULE0, "dscp"], 64),
    ([*RULE0, "dscp"], "af44"),
    ([*RULE0, "action"], "permit"),
    ([*RULE0, "action"], DELETE),
    ([*RULE0, "class"], ""),
    ([*RULE0, "clas"], "gold"),
    (["tenants", 0, "rules", 2, "class"], "gold"),  # class on a drop rule
    (["version"], 2),
    (["tenants"], DELETE),
]


@pytest.mark.parametrize(("path", "value"), BAD_FOR_BOTH, ids=[".".join(map(str, p)) + f"={v!r}"[:40] for p, v in BAD_FOR_BOTH])
def test_schema_and_validator_both_reject(validator: jsonschema.Draft202012Validator, path: list[Any], value: Any) -> None:
    data = _mutate(path, value)
    assert list(validator.iter_errors(data)), "the schema accepts it"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PolicyWarning)
        with pytest.raises(PolicyError):
            Policy.from_dict(data)


BAD_FOR_ISOLANE_ONLY: list[tuple[list[Any], Any]] = [
    ([*RULE0, "src"], "10.0.0.1/8"),  # host bits
    ([*RULE0, "dst_ports"], "90-80"),  # reversed
    ([*RULE0, "dst_ports"], [[90, 80]]),  # reversed
    ([*RULE0, "class"], "platinum"),  # unknown class
    ([*RULE0, "dst"], "fd00::/8"),  # IPv4 src, IPv6 dst
    ([*RULE0, "proto"], "icmp"),  # ports on icmp
    (["tenants", 1, "name"], "a"),  # duplicate tenant
    (["tenants", 1, "vnis"], [100]),  # VNI of two tenants
    (["tenants", 0, "ceil"], "1Gbps"),  # below rate
    (["tenants", 0, "rate"], "0bps"),
]


@pytest.mark.parametrize(("path", "value"), BAD_FOR_ISOLANE_ONLY, ids=[".".join(map(str, p)) + f"={v!r}" for p, v in BAD_FOR_ISOLANE_ONLY])
def test_what_only_isolane_checks(validator: jsonschema.Draft202012Validator, path: list[Any], value: Any) -> None:
    data = _mutate(path, value)
    assert list(validator.iter_errors(data)) == []
    with pytest.raises(PolicyError):
        Policy.from_dict(data)


_VALUES = st.one_of(
    st.sampled_from(
        [
            "10.0.0.0/8", "10.0.0.0/33", "1.2.3.4", "::", "::/0", "fd00::/64", "1::2:3:4:5:6:7", "::1.2.3.4", "1:2:3:4:5:6:1.2.3.4",
            "::ffff:10.0.0.0/104", "1:2:3:4:5:6:7:8:9", "010.1.1.1", "10.0.0.0/08", "fe80::1%eth0", "any", "ANY", "",
            "80", "80-90", "0080", "65535", "65536", "00065535", "1-2-3", "tcp", "icmpv6", "ef", "af11", "allow", "drop",
            "40Gbps", "40 Gbps", "5GB/s", "256KiB", "10us", "10µs", "1.5Gbps", "40gbps",
        ]
    ),
    st.integers(-2, 70000),
    st.booleans(),
    st.none(),
    st.lists(st.one_of(st.integers(0, 66000), st.sampled_from(["80", "1-5", "udp", "ef"])), max_size=3),
)
_FIELDS = [
    [*RULE0, "src"], [*RULE0, "dst"], [*RULE0, "dst_ports"], [*RULE0, "src_ports"], [*RULE0, "proto"], [*RULE0, "dscp"],
    [*RULE0, "action"], ["tenants", 0, "vnis"], ["tenants", 1, "sources"], ["tenants", 0, "rate"], ["tenants", 0, "burst"],
    ["tenants", 1, "microburst", "window"], ["unknown_tenant"], ["tenants", 0, "default"],
]


@settings(max_examples=400, deadline=None)
@given(st.sampled_from(_FIELDS), _VALUES)
def test_every_policy_isolane_accepts_the_schema_accepts(validator: jsonschema.Draft202012Validator, path: list[Any], value: Any) -> None:
    assert_schema_accepts_if_isolane_does(validator, _mutate(path, value))


@settings(max_examples=300, deadline=None)
@given(
    st.sampled_from(["src", "dst"]),
    st.one_of(st.integers(0, 2**32 - 1).map(ipaddress.IPv4Address), st.integers(0, 2**128 - 1).map(ipaddress.IPv6Address)),
    st.data(),
)
def test_every_address_spelling_agrees(validator: jsonschema.Draft202012Validator, key: str, address: Any, data: st.DataObject) -> None:
    spelling = data.draw(st.sampled_from([address.compressed, address.exploded]))
    if address.version == 6 and data.draw(st.booleans()):  # the last 32 bits as IPv4
        spelling = ":".join(address.exploded.split(":")[:6]) + ":" + str(ipaddress.IPv4Address(int(address) & 0xFFFFFFFF))
    length = data.draw(st.integers(0, 140))
    text = f"{spelling}/{length}" if data.draw(st.booleans()) else spelling
    accepted_by_schema = not list(validator.iter_errors(_mutate([*RULE0, key], text)))
    try:
        ipaddress.ip_network(text, strict=False)
        valid = True
    except ValueError:
        valid = False
    assert accepted_by_schema == valid, text
    assert (P._PREFIX_RE.fullmatch(text) is not None) == valid, text


# ---------------------------------------------------------------------------------------------
# compilation
# ---------------------------------------------------------------------------------------------


def mapped(text: str) -> list[int]:
    return list(ipaddress.IPv6Address(f"::ffff:{text}").packed)


def test_compiled_arrays_follow_the_contract() -> None:
    policy = quiet(
        {
            "unknown_tenant": "allow",
            "tenants": [
                {
                    "name": "a",
                    "vnis": [100, 101],
                    "vlans": [7],
                    "classes": [{"name": "gold"}, {"name": "bulk"}],
                    "default": "drop",
                    "rules": [
                        {"src": "10.1.0.0/16", "dst": "10.2.3.4", "proto": "tcp", "dst_ports": ["443", "80"], "action": "allow", "class": "bulk"},
                        {"src": "fd00::/64", "dst": "fd01::1", "proto": ["udp", "tcp"], "dscp": ["ef", "af41"], "src_ports": "1000-2000", "action": "drop"},
                        {"action": "allow"},
                    ],
                },
                {"name": "b", "vnis": [200], "sources": ["192.0.2.0/24", "2001:db8::/32"], "default_class": "default"},
            ],
        }
    )
    compiled = policy.compile()
    assert policy.compile().tenants[0] is compiled.tenants[0]  # compiled once per policy
    assert compiled.tenant_names == ["a", "b"]
    assert compiled.vni_tenant == {100: 0, 101: 0, 200: 1}
    assert compiled.vlan_tenant == {7: 0}
    assert compiled.source_prefixes == [
        (1, bytes(mapped("192.0.2.0")), 120),
        (1, ipaddress.IPv6Address("2001:db8::").packed, 32),
    ]
    assert compiled.unknown_action == P.ACTION_ALLOW
    a = compiled.tenants[0]
    assert len(a) == 2 + 2 * 2 + 1
    expected_dtypes = {
        "src": np.uint8, "src_len": np.uint8, "dst": np.uint8, "dst_len": np.uint8,
        "src_port_lo": np.uint16, "src_port_hi": np.uint16, "dst_port_lo": np.uint16, "dst_port_hi": np.uint16,
        "proto": np.uint8, "proto_mask": np.uint8, "dscp": np.uint8, "dscp_mask": np.uint8,
        "action": np.uint8, "cls": np.uint16, "policy_rule": np.int32,
    }  # fmt: skip
    for name, dtype in expected_dtypes.items():
        array = getattr(a, name)
        assert array.dtype == dtype, name
        assert array.shape == ((7, 16) if name in ("src", "dst") else (7,)), name
        assert not array.flags.writeable, name
    assert list(a.rule_arrays()) == list(P.RULE_FIELDS)
    # one packed record a row, the layout Rust reads; the arrays are views of its fields
    assert a.rows.dtype == P.RULE_ROW_DTYPE and a.rows.tobytes() == a.packed_rows
    assert len(a.packed_rows) == 7 * P.RULE_ROW_DTYPE.itemsize
    assert set(P.RULE_ROW_DTYPE.names) == set(expected_dtypes)
    v6 = list(ipaddress.IPv6Address("fd00::").packed)
    v6_dst = list(ipaddress.IPv6Address("fd01::1").packed)
    assert a.src.tolist() == [mapped("10.1.0.0")] * 2 + [v6] * 4 + [[0] * 16]
    assert a.src_len.tolist() == [112, 112, 64, 64, 64, 64, 0]
    assert a.dst.tolist() == [mapped("10.2.3.4")] * 2 + [v6_dst] * 4 + [[0] * 16]
    assert a.dst_len.tolist() == [128, 128, 128, 128, 128, 128, 0]
    # expansion order: proto (sorted), dscp (sorted), src_ports, dst_ports (sorted)
    assert a.proto.tolist() == [6, 6, 6, 6, 17, 17, 0]
    assert a.proto_mask.tolist() == [255, 255, 255, 255, 255, 255, 0]
    assert a.dscp.tolist() == [0, 0, 34, 46, 34, 46, 0]
    assert a.dscp_mask.tolist() == [0, 0, 63, 63, 63, 63, 0]
    assert a.src_port_lo.tolist() == [0, 0, 1000, 1000, 1000, 1000, 0]
    assert a.src_port_hi.tolist() == [65535, 65535, 2000, 2000, 2000, 2000, 65535]
    assert a.dst_port_lo.tolist() == [80, 443, 0, 0, 0, 0, 0]
    assert a.dst_port_hi.tolist() == [80, 443, 65535, 65535, 65535, 65535, 65535]
    assert a.action.tolist() == [1, 1, 0, 0, 0, 0, 1]
    assert a.cls.tolist() == [1, 1, P.NO_CLASS, P.NO_CLASS, P.NO_CLASS, P.NO_CLASS, 0]
    assert a.policy_rule.tolist() == [0, 0, 1, 1, 1, 1, 2]
    assert (a.default_action, a.default_cls, a.class_names) == (P.ACTION_DROP, P.NO_CLASS, ("gold", "bulk"))
    b = compiled.tenants[1]
    assert len(b) == 0 and b.src.shape == (0, 16)
    assert (b.default_action, b.default_cls, b.class_names) == (P.ACTION_ALLOW, 0, ("default",))


def test_the_example_policy_on_the_sample_capture() -> None:
    """Classify the sample capture with the example policy by brute force over the compiled
    arrays: every parsed packet of the three tenants lands in the class its traffic calls for."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        compiled = Policy.from_file(EXAMPLE).compile()
    rows = isolane.parse(isolane.read_pcap(SAMPLE))
    rows = rows[rows["status"] == isolane.Status.OK]
    assert compiled.vni_tenant == {100: 0, 200: 1, 300: 2}

    def first_match(t: P.TenantTables, r: np.ndarray) -> np.ndarray:
        out = np.full(len(r), -1, np.int32)
        for i in reversed(range(len(t))):
            hit = np.ones(len(r), bool)
            for field, prefix, length in (("src", t.src[i], t.src_len[i]), ("dst", t.dst[i], t.dst_len[i])):
                bits = np.unpackbits(r[field], axis=1)[:, :length]
                hit &= (bits == np.unpackbits(prefix)[:length]).all(axis=1)
            hit &= (t.src_port_lo[i] <= r["src_port"]) & (r["src_port"] <= t.src_port_hi[i])
            hit &= (t.dst_port_lo[i] <= r["dst_port"]) & (r["dst_port"] <= t.dst_port_hi[i])
            hit &= (r["proto"] & t.proto_mask[i]) == t.proto[i] & t.proto_mask[i]
            hit &= (r["dscp"] & t.dscp_mask[i]) == t.dscp[i] & t.dscp_mask[i]
            out[hit] = i
        return out

    def classes(tid: int, selected: np.ndarray) -> list[str]:
        t = compiled.tenants[tid]
        index = first_match(t, rows[selected])
        cls = np.where(index >= 0, t.cls[index], t.default_cls)
        action = np.where(index >= 0, t.action[index], t.default_action)
        assert (action == P.ACTION_ALLOW).all()
        return [t.class_names[c] for c in cls]

    proto, vni = rows["proto"], rows["vni"]
    train = classes(0, vni == 100)
    expected = np.select([proto[vni == 100] == 17, proto[vni == 100] == 6], ["collective", "checkpoint"], "control")
    assert train == expected.tolist() and len(train) > 900
    infer = classes(1, vni == 200)
    expected = np.where(np.isin(proto[vni == 200], [1, 17]), "requests", "bulk")
    assert infer == expected.tolist() and infer.count("requests") == 170
    evaluation = classes(2, vni == 300)
    assert evaluation == np.where(proto[vni == 300] == 17, "results", "control").tolist()
    # untunnelled: the outer fragments of VNI 200's tunnel, claimed by their source
    addr, length = compiled.source_prefixes[0][1:]
    assert compiled.source_prefixes[0][0] == 1 and length == 128
    outer = (rows["tunnel"] == isolane.Tunnel.NONE) & (rows["outer_src"] == np.frombuffer(addr, np.uint8)).all(axis=1)
    assert outer.sum() == 160 and classes(1, outer) == ["bulk"] * 160


def fingerprint_policy(**changes: Any) -> dict[str, Any]:
    data = {
        "tenants": [
            {
                "name": "a",
                "vnis": [1],
                "classes": [{"name": "x"}, {"name": "y"}],
                "rules": [{"proto": "tcp", "action": "allow", "class": "y"}, {"dst_ports": 53, "action": "drop"}],
            },
            {"name": "b", "vnis": [2], "rules": [{"src": "10.0.0.0/8", "action": "allow"}]},
            {"name": "c", "vnis": [3]},
        ]
    }
    for path, value in changes.items():
        tenant, key = path.split("__")
        data["tenants"][int(tenant[1:])][key] = value
    return data


def fingerprints(data: dict[str, Any]) -> dict[str, str]:
    return quiet(data).compile().fingerprints


def test_fingerprints_change_only_with_a_tenants_rules() -> None:
    base = fingerprints(fingerprint_policy())
    assert base == fingerprints(fingerprint_policy())
    assert len(set(base.values())) == 3 and all(len(f) == 32 for f in base.values())
    same: list[dict[str, Any]] = [
        {"t0__vnis": [1, 5]},
        {"t0__rate": "1Gbps", "t0__microburst": {"window": "10us", "threshold": "1Gbps"}},
        {"t0__description": "x"},
        {"t0__classes": [{"name": "renamed"}, {"name": "y", "priority": 3}]},
        {"t1__rules": [{"src": "10.0.0.0/8", "action": "allow", "name": "named now"}]},
        {"t1__rules": [{"src": "10.0.0.0/8", "src_ports": "0-65535", "action": "allow"}]},  # same match
    ]
    for change in same:
        assert fingerprints(fingerprint_policy(**change)) == base, change
    different: list[tuple[str, dict[str, Any]]] = [
        ("a", {"t0__rules": [{"proto": "tcp", "action": "allow", "class": "x"}, {"dst_ports": 53, "action": "drop"}]}),
        ("a", {"t0__rules": [{"dst_ports": 53, "action": "drop"}, {"proto": "tcp", "action": "allow", "class": "y"}]}),
        ("a", {"t0__default": "drop"}),
        ("a", {"t0__default_class": "y"}),
        ("b", {"t1__rules": [{"src": "10.0.0.0/9", "action": "allow"}]}),
        ("b", {"t1__rules": [{"src": "10.0.0.0/8", "action": "drop"}]}),
        ("c", {"t2__rules": [{"action": "allow"}]}),
    ]
    for changed, change in different:
        now = fingerprints(fingerprint_policy(**change))
        assert [name for name in base if now[name] != base[name]] == [changed], change
    # the same table rules from one policy rule or from two are reported differently
    one = fingerprints(fingerprint_policy(t1__rules=[{"proto": ["tcp", "udp"], "action": "allow"}]))
    two = fingerprints(fingerprint_policy(t1__rules=[{"proto": "tcp", "action": "allow"}, {"proto": "udp", "action": "allow"}]))
    assert [name for name in one if one[name] != two[name]] == ["b"]
    # tenant order does not matter either: fingerprints are per tenant
    data = fingerprint_policy()
    data["tenants"].reverse()
    assert fingerprints(data) == base


def test_changed_tenants_between_two_policies() -> None:
    old = quiet(fingerprint_policy()).compile()
    data = fingerprint_policy(t1__default="drop")
    data["tenants"].append({"name": "d", "vnis": [4]})
    new = quiet(data).compile()
    assert new.changed_tenants(old) == ["b", "d"]
    assert new.changed_tenants(new) == []
    assert new.tenant_id("d") == 3


def test_fingerprints_are_stable_across_processes() -> None:
    code = f"import json, isolane.policy as P; print(json.dumps(P.Policy.from_dict({fingerprint_policy()!r}).compile().fingerprints))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env={**os.environ, "PYTHONHASHSEED": "123"})
    assert json.loads(out.stdout) == fingerprints(fingerprint_policy())


def test_ipv4_prefixes_read_as_ipaddress_reads_them() -> None:
    """isolane reads IPv4 prefixes itself (the common case, faster); it must refuse what
    ``ipaddress.ip_network(strict=True)`` refuses and give the same networks (it refuses more: a
    length with leading zeros, as its JSON Schema does)."""
    from isolane.policy.addresses import _parse_prefix

    rng = random.Random(7)
    texts = ["0.0.0.0/0", "255.255.255.255", "10.0.0.0/8", "10.0.0.1/8", "1.2.3.4/33", "01.2.3.4/32", "1.2.3.256"]
    for _ in range(20_000):
        value, length = rng.getrandbits(32), rng.randint(0, 32)
        if rng.random() < 0.5:
            value &= ~((1 << (32 - length)) - 1) & 0xFFFFFFFF
        texts.append(f"{ipaddress.IPv4Address(value)}/{length}" if rng.random() < 0.9 else str(ipaddress.IPv4Address(value)))
    for text in texts:
        got = _parse_prefix(text)
        try:
            want: Any = ipaddress.ip_network(text, strict=True)
        except ValueError:
            assert isinstance(got, str), text
            continue
        assert got == want and type(got) is type(want), text
    assert isinstance(_parse_prefix("1.2.3.4/032"), str)
