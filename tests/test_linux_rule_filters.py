"""A tenant's rules as u32 filters (isolane.linux.rules), without a kernel: port ranges decomposed
exactly, keys word-aligned, priorities in rule order, the notes of what is not enforced, and the
filters, run as the kernel's u32 runs them (tests/support/u32_model.py), put each of several
hundred frames scapy builds in the class isolane's own classifier gives it."""

from __future__ import annotations

import random
import struct

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from scapy.layers.inet import ICMP, IP, TCP, UDP
from scapy.layers.inet6 import ICMPv6EchoRequest, IPv6, IPv6ExtHdrHopByHop
from scapy.layers.l2 import ARP, Ether
from scapy.layers.sctp import SCTP
from scapy.layers.vxlan import VXLAN

from isolane.linux import plan_htb
from isolane.linux.rules import (
    INNER_ETHERNET,
    LAST_PRIO,
    MAX_FILTERS_PER_RULE,
    MAX_KEY_OFFSET,
    PORTLESS_NOTE,
    port_pieces,
    rule_prio,
    tenant_rule_filters,
    word_keys,
)
from isolane.linux.u32 import ETH_P_IP, ETH_P_IPV6
from isolane.policy import Policy
from support.u32_model import isolane_class, kernel_class

CLASSES = [{"name": name} for name in ("bulk", "a", "b", "c", "ctl")]
RULES: list[dict[str, object]] = [
    {"proto": "tcp", "dst_ports": 22, "action": "drop"},
    {"src": "10.1.0.0/16", "proto": "udp", "dst_ports": "5001-5003", "action": "allow", "class": "a"},
    {"dst": "10.2.3.0/24", "src_ports": "1000-1999", "proto": ["tcp", "udp"], "action": "allow", "class": "b"},
    {"dscp": ["ef", "af41"], "action": "allow", "class": "c"},
    {"src": "fd00:1::/48", "dst_ports": [53, "8000-8080"], "action": "allow", "class": "a"},  # no protocol: those with ports
    {"ethertype": "arp", "action": "allow", "class": "ctl"},
    {"dst": "::ffff:10.9.0.0/112", "action": "allow", "class": "b"},  # IPv4 10.9/16, and IPv6 packets to the mapped addresses
    {"proto": ["icmp", "icmpv6"], "action": "allow", "class": "ctl"},
    {"dst": "2001:db8:5::/64", "proto": "sctp", "action": "allow", "class": "c"},
    {"src": "10.5.0.0/16", "action": "allow", "class": "bulk"},  # the default class, before a rule to another
    {"dst_ports": "60000-65535", "proto": "udp", "action": "allow", "class": "b"},
    {"proto": "udp", "action": "allow"},  # to the default class, after the last rule to another: no filter
]
POLICY = {
    "port": {"rate": "100Gbps", "buffer": "4MiB"},
    "tenants": [
        {"name": "training", "vnis": [100, 300], "classes": CLASSES, "default_class": "bulk", "rules": RULES},
        {
            "name": "strict",
            "vnis": [200],
            "classes": [{"name": "x"}, {"name": "y"}],
            "default_class": "y",
            "default": "drop",
            "rules": [{"proto": "udp", "action": "allow", "class": "x"}],
        },
    ],
}


def _plan(policy: dict[str, object] = POLICY):  # type: ignore[no-untyped-def]
    return plan_htb(Policy.from_dict(policy), ticks_per_us=15.625)


@given(st.integers(0, 65535), st.integers(0, 65535))
def test_port_pieces_cover_the_range_and_nothing_else(a: int, b: int) -> None:
    lo, hi = min(a, b), max(a, b)
    pieces = port_pieces(lo, hi)
    ports = np.arange(65536)
    times_matched = sum(((ports & mask) == value).astype(int) for value, mask in pieces)
    assert np.array_equal(times_matched, ((ports >= lo) & (ports <= hi)).astype(int))  # each port of the range once, no other
    assert all(value & ~mask & 0xFFFF == 0 for value, mask in pieces)
    assert len(pieces) <= 30  # 2 x 16 - 2: the most any range of 16-bit ports needs


def test_port_pieces_of_known_ranges() -> None:
    assert port_pieces(0, 65535) == [(0, 0)]
    assert port_pieces(22, 22) == [(22, 0xFFFF)]
    assert port_pieces(5001, 5003) == [(5001, 0xFFFF), (5002, 0xFFFE)]
    assert port_pieces(1, 65534) == port_pieces(1, 65534) and len(port_pieces(1, 65534)) == 30


def test_fields_become_word_aligned_keys_sharing_words() -> None:
    # behind an IPv4 underlay the inner EtherType is at 48-49 and the inner IPv4 header's first byte at 50: one word
    assert word_keys([(12, 2, 0x0800, 0xFFFF), (14, 1, 0x45, 0xFF)], 36) == ((0x0800_4500, 0xFFFF_FF00, 48),)
    # an inner IPv4 source address at 62-65 straddles two words
    assert word_keys([(26, 4, 0x0A01_0000, 0xFFFF_0000)], 36) == ((0x0000_0A01, 0x0000_FFFF, 60),)
    assert word_keys([(26, 4, 0x0A01_0203, 0xFFFF_FFFF)], 36) == ((0x0000_0A01, 0x0000_FFFF, 60), (0x0203_0000, 0xFFFF_0000, 64))
    with pytest.raises(ValueError, match="offset 256, past the 255"):
        word_keys([(0, 1, 1, 0xFF)], MAX_KEY_OFFSET + 1)


def test_the_deepest_key_an_inner_ipv6_port_behind_an_ipv6_underlay_fits_pyroute2() -> None:
    deepest = max(offset for f in _plan().filters for _, _, offset in f.keys)
    assert deepest == INNER_ETHERNET[ETH_P_IPV6] + 14 + 42 == 112 <= MAX_KEY_OFFSET  # the word of the inner destination port
    assert all(offset % 4 == 0 and value & ~mask == 0 for f in _plan().filters for value, mask, offset in f.keys)


def test_priorities_try_rule_r_before_r_plus_1_and_every_rule_before_the_vni_filters() -> None:
    plan = _plan()
    root = [f for f in plan.filters if f.parent is None]
    assert {(f.prio, f.classid) for f in root if f.vni is not None} == {(1, 0x1_0100), (2, 0x1_0100), (1, 0x1_0200), (2, 0x1_0200)}  # to the tenant classes
    assert {f.prio for f in root if f.vni is None} == {3, 4}  # what the VNI filters cannot read
    training = [f for f in plan.filters if f.parent == 0x1_0100]
    for f in training:
        expected = rule_prio(5, f.rule, f.protocol) if f.rule is not None else rule_prio(5, 11, f.protocol)  # rules 0-10, then the VNI filters
        assert f.prio == expected == 5 + 2 * (11 if f.rule is None else f.rule) + (f.protocol == ETH_P_IPV6), f.label
    assert {f.classid for f in training if f.rule is None} == {0x1_0101}  # the rest: the default class, bulk
    strict = [f for f in plan.filters if f.parent == 0x1_0200]
    assert sorted({f.prio for f in strict}) == [29, 30, 31, 32]  # its rule, then its VNI filters, after training's
    parents_of = {}
    for f in plan.filters:
        parents_of.setdefault(f.prio, set()).add(f.parent)
    assert all(len(parents) == 1 for parents in parents_of.values())  # u32 lists a qdisc's filters of one priority together
    assert {f.prio % 2 for f in plan.filters if f.protocol == ETH_P_IP} == {1}  # u32 filters of different protocols, different priorities
    assert {f.prio % 2 for f in plan.filters if f.protocol == ETH_P_IPV6} == {0}


def test_every_rule_filter_carries_its_vni_keys() -> None:
    for f in _plan().filters:
        if f.rule is not None:
            assert (f.vni << 8, 0xFFFF_FF00, 32 if f.protocol == ETH_P_IP else 52) in f.keys, f.label


def test_rule_filters_per_vni_port_and_underlay() -> None:
    plan = _plan()
    by_rule = {r: [f for f in plan.filters if f.tenant == "training" and f.rule == r] for r in range(12)}
    assert len(by_rule[0]) == 2 * 2 * 2  # tcp 22: IPv4 and IPv6 inside, 2 VNIs, 2 underlays
    assert len(by_rule[1]) == 2 * 2 * 2 * 2  # 10.1/16 (IPv4, and IPv6 mapped) x 2 pieces of 5001-5003, 2 VNIs, 2 underlays
    assert len(by_rule[4]) == 5 * (1 + 3) * 2 * 2  # 5 protocols with ports x (53; 8000-8063, 8064-8079, 8080), IPv6 only, 2 VNIs, 2 underlays
    assert len(by_rule[11]) == 0
    assert {f.classid for f in by_rule[0]} == {0x1_0101}  # a drop goes to the default class, bulk
    assert [f for f in plan.filters if f.tenant == "strict" and f.rule == 0][0].classid == 0x1_0201


def test_unenforced_lists_drops_and_what_the_filters_leave_out_by_place() -> None:
    policy = {
        **POLICY,
        "tenants": [
            {
                "name": "t",
                "vnis": [1],
                "classes": CLASSES,
                "default": "drop",
                "rules": [
                    {"src_ports": "1-65534", "dst_ports": "1-65534", "proto": "udp", "action": "allow", "class": "a"},
                    {"proto": "tcp", "dst_ports": 22, "action": "drop"},
                    {"dst_ports": "0-10", "proto": "udp", "action": "allow", "class": "b"},
                    {"src_ports": "0-10", "dst_ports": "0-20", "action": "allow", "class": "c"},
                ],
            },
        ],
    }
    assert _plan(policy).unenforced == (
        f"tenants[0].rules[0]: needs {2 * 30 * 30} u32 filters per VNI, more than {MAX_FILTERS_PER_RULE}: not pushed, the rules after it take its packets",
        "tenants[0].rules[1]: drops: not enforced (no gact), its packets go to class 'bulk'",
        f"tenants[0].rules[2]: {PORTLESS_NOTE}",
        f"tenants[0].rules[3]: {PORTLESS_NOTE}",
        "tenants[0].default: drop: not enforced (no gact), the packets no rule takes go to class 'bulk'",
    )
    assert not any(f.rule == 0 for f in _plan(policy).filters)
    assert _plan({**POLICY, "tenants": [{"name": "t", "vnis": [1], "rules": [{"proto": "udp", "action": "allow"}]}]}).unenforced == ()


def test_rules_past_the_last_priority_are_named() -> None:
    tenant = Policy.from_dict(
        {
            "tenants": [
                {"name": "t", "vnis": [1], "classes": CLASSES, "rules": [{"dst_ports": p, "proto": "udp", "action": "allow", "class": "a"} for p in (1, 2, 3)]}
            ]
        }
    ).tenants[0]
    found = tenant_rule_filters(0, tenant, [0x1_0101 + c for c in range(5)], (4789,), 0x1_0100, LAST_PRIO - 5)  # room for 2 rules and the VNI filters
    assert found.unenforced == ("tenants[0].rules[2:]: past the 65,535 priorities of u32 filters: not pushed, their packets go to class 'bulk'",)
    assert {f.rule for f in found.filters} == {0, 1, None} and max(f.prio for f in found.filters) == LAST_PRIO


_ETHER = Ether(src="02:00:00:00:01:0a", dst="02:00:00:00:01:0b")  # no address lookup by scapy


def _inner(rng: random.Random) -> Ether:
    """An inner frame near the rules' edges: addresses in and out of their prefixes, ports at the
    ends of their ranges, DSCPs, protocols with and without ports, later fragments, ARP."""
    if rng.random() < 0.05:
        return _ETHER / ARP()
    ports = [0, 1, 22, 53, 999, 1000, 1999, 2000, 5000, 5001, 5003, 5004, 7999, 8000, 8080, 8081, 59999, 60000, 65535]
    sport, dport = rng.choice(ports), rng.choice(ports)
    with_ports = {"udp": UDP(sport=sport, dport=dport), "tcp": TCP(sport=sport, dport=dport), "sctp": SCTP(sport=sport, dport=dport)}
    kind = rng.choice(["udp", "udp", "tcp", "sctp", "icmp"])
    if rng.random() < 0.6:
        addresses = ["10.1.2.3", "10.2.3.4", "10.2.4.4", "10.9.1.1", "10.5.0.1", "192.0.2.9"]
        ip = IP(src=rng.choice(addresses), dst=rng.choice(addresses), tos=rng.choice([0, 46 << 2, 34 << 2, 10 << 2]))
        if rng.random() < 0.1:  # a later fragment, ports of rules[1] and rules[2] in its payload: isolane gives it ports 0
            ip.frag, ip.proto = rng.randrange(1, 8192), 17
            return _ETHER / ip / struct.pack(">HH", 1500, 5002)
        return _ETHER / ip / with_ports.get(kind, ICMP()) / (b"p" * rng.randrange(0, 40))
    addresses = ["fd00:1::5", "fd00:2::5", "2001:db8:5::1", "::ffff:10.9.0.7", "::ffff:10.1.0.1", "2001:db8:6::1"]
    ip6 = IPv6(src=rng.choice(addresses), dst=rng.choice(addresses), tc=rng.choice([0, 46 << 2, 34 << 2]))
    return _ETHER / ip6 / with_ports.get(kind, ICMPv6EchoRequest()) / (b"p" * rng.randrange(0, 40))


def _outer(vni: int, inner: Ether) -> bytes:
    vxlan = UDP(sport=49152, dport=4789) / VXLAN(flags=0x08, vni=vni) / inner
    if vni == 300:
        return bytes(Ether(src="02:00:00:00:00:01", dst="02:00:00:00:00:02") / IPv6(src="2001:db8::1", dst="2001:db8::2") / vxlan)
    return bytes(Ether(src="02:00:00:00:00:01", dst="02:00:00:00:00:02") / IP(src="192.0.2.1", dst="192.0.2.2") / vxlan)


def test_the_filters_put_each_frame_where_isolane_puts_it() -> None:
    rng = random.Random(19)
    frames = [_outer(rng.choice([100, 200, 300, 400]), _inner(rng)) for _ in range(600)]
    expected = isolane_class(Policy.from_dict(POLICY), frames)
    assert len(set(expected)) == 8  # every class of both tenants, and no tenant's
    plan = _plan()
    assert [kernel_class(plan, frame) for frame in frames] == expected


def test_what_the_filters_assume_away_goes_on_to_later_rules() -> None:
    """An inner IPv6 extension header or IPv4 options: the port keys miss (isolane reads past them)."""
    behind_hop_by_hop = _ETHER / IPv6(src="fd00:1::5", dst="fd00:2::5") / IPv6ExtHdrHopByHop() / UDP(dport=53)
    with_options = _ETHER / IP(src="10.1.2.3", dst="10.2.4.4", options=b"\x01\x01\x01\x00") / UDP(dport=5001)
    frames = [_outer(100, behind_hop_by_hop), _outer(300, with_options)]
    assert isolane_class(Policy.from_dict(POLICY), frames) == ["1:102", "1:102"]  # rules[4], rules[1]: class a
    plan = _plan()
    assert [kernel_class(plan, frame) for frame in frames] == ["1:101", "1:101"]  # no rule's filter: the default class
