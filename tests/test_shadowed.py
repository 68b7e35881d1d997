"""The check for rules that never match (Rust, ``rust/classify/shadowed.rs``) against a plainly
written comparison of every pair, on random tenants' tables built row by row."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from isolane._core import IsolaneError, shadowed_rules
from isolane.policy.compile import RULE_ROW_DTYPE, TenantTables
from isolane.policy.constants import FRAME_RULE_DSCP
from isolane.policy.shadowed import _BIG_GROUP, _shadowed_rules

MAPPED_ANY = 0xFFFF << 32
ALL_PORTS = (0, 65535)


def prefix(text: str) -> tuple[int, int]:
    """A prefix as the tables hold it: 128-bit value, IPv4 mapped, length over 128 bits."""
    network = ipaddress.ip_network(text)
    if network.version == 4:
        return MAPPED_ANY | int(network.network_address), 96 + network.prefixlen
    return int(network.network_address), network.prefixlen


PREFIXES = [(0, 0)] + [
    prefix(p) for p in ("0.0.0.0/0", "10.0.0.0/8", "10.1.0.0/16", "10.1.2.0/24", "10.1.2.3/32", "192.168.0.0/16", "2001:db8::/32", "2001:db8::1/128", "::/0")
]
PORTS = [ALL_PORTS, ALL_PORTS, (80, 80), (443, 443), (0, 1023), (80, 443), (1000, 2000)]
PROTOS = [(0, 0), (0, 0), (6, 0xFF), (17, 0xFF), (4, 0xFC)]
DSCPS = [(0, 0), (0, 0), (46, 0x3F), (32, 0x38)]
ETHERTYPES = [0x88CC, 0x8906]


@dataclass(frozen=True)
class Row:
    src: tuple[int, int]
    dst: tuple[int, int]
    src_ports: tuple[int, int]
    dst_ports: tuple[int, int]
    proto: tuple[int, int]
    dscp: tuple[int, int]


def frame_row(ethertype: int) -> Row:
    """An ethertype rule's row (isolane.policy.constants.FRAME_RULE_DSCP)."""
    return Row((0, 0), (0, 0), (ethertype, ethertype), ALL_PORTS, (0, 0), (FRAME_RULE_DSCP, FRAME_RULE_DSCP))


ip_rows = st.builds(Row, *(st.sampled_from(choices) for choices in (PREFIXES, PREFIXES, PORTS, PORTS, PROTOS, DSCPS)))
rows = st.one_of(ip_rows, ip_rows, ip_rows, st.sampled_from(ETHERTYPES).map(frame_row))


def pack(policy_rules: list[list[Row]]) -> TenantTables:
    table = [(i, row) for i, rule_rows in enumerate(policy_rules) for row in rule_rows]
    packed = np.zeros(len(table), dtype=RULE_ROW_DTYPE)
    for k, (i, row) in enumerate(table):
        record = packed[k]
        record["src"] = np.frombuffer(row.src[0].to_bytes(16, "big"), dtype=np.uint8)
        record["dst"] = np.frombuffer(row.dst[0].to_bytes(16, "big"), dtype=np.uint8)
        record["src_len"], record["dst_len"] = row.src[1], row.dst[1]
        record["src_port_lo"], record["src_port_hi"] = row.src_ports
        record["dst_port_lo"], record["dst_port_hi"] = row.dst_ports
        record["proto"], record["proto_mask"] = row.proto
        record["dscp"], record["dscp_mask"] = row.dscp
        record["policy_rule"] = i
    return TenantTables(name="t", packed_rows=packed.tobytes(), default_action=0, default_cls=0, class_names=[])


def mask(length: int) -> int:
    return ((1 << length) - 1) << (128 - length)


def effective(row: Row) -> Row:
    """An "any" side beside an IPv4-only side means any IPv4 address."""

    def ipv4_only(side: tuple[int, int]) -> bool:
        return side[1] >= 96 and side[0] >> 32 == 0xFFFF

    def contains_ipv4(side: tuple[int, int]) -> bool:
        return side[1] < 96 and MAPPED_ANY & mask(side[1]) == side[0]

    src, dst = row.src, row.dst
    if ipv4_only(src) and contains_ipv4(dst):
        dst = (MAPPED_ANY, 96)
    if ipv4_only(dst) and contains_ipv4(src):
        src = (MAPPED_ANY, 96)
    return Row(src, dst, row.src_ports, row.dst_ports, row.proto, row.dscp)


def covers(earlier: Row, later: Row) -> bool:
    """Every packet ``later`` matches, ``earlier`` matches (frame rows compared with frame rows only)."""
    a, b = effective(earlier), effective(later)
    prefixes = all(x[1] <= y[1] and y[0] & mask(x[1]) == x[0] for x, y in ((a.src, b.src), (a.dst, b.dst)))
    ports = all(x[0] <= y[0] and y[1] <= x[1] for x, y in ((a.src_ports, b.src_ports), (a.dst_ports, b.dst_ports)))
    masked = all(x[1] & ~y[1] == 0 and (x[0] & x[1]) == (y[0] & x[1]) for x, y in ((a.proto, b.proto), (a.dscp, b.dscp)))
    frames = (a.dscp[1] ^ b.dscp[1]) & FRAME_RULE_DSCP == 0
    return prefixes and ports and masked and frames


def reference(policy_rules: list[list[Row]]) -> list[tuple[int, list[int]]]:
    """Every pair compared: a policy rule is shadowed when each of its rows has an earlier covering row."""
    table = [(i, row) for i, rule_rows in enumerate(policy_rules) for row in rule_rows]
    found = []
    for i, rule_rows in enumerate(policy_rules):
        if i == 0:
            continue
        earlier = [(j, row) for j, row in table if j < i]
        firsts = [next((j for j, e in earlier if covers(e, r)), None) for r in rule_rows]
        if all(j is not None for j in firsts):
            found.append((i, sorted({j for j in firsts if j is not None})))
    return found


@settings(max_examples=400, deadline=None)
@given(st.lists(st.lists(rows, min_size=1, max_size=3), min_size=1, max_size=14))
def test_shadowed_rules_agree_with_comparing_every_pair(policy_rules: list[list[Row]]) -> None:
    tables = pack(policy_rules)
    expected = reference(policy_rules)
    assert _shadowed_rules(tables) == expected
    assert shadowed_rules(tables.packed_rows, tables.name, 0) == expected, "every group indexed by port"


@settings(max_examples=50, deadline=None)
@given(st.lists(st.sampled_from(PORTS[2:]), min_size=_BIG_GROUP + 1, max_size=3 * _BIG_GROUP), st.sampled_from(PORTS[2:]))
def test_a_big_group_of_port_rules_agrees_with_comparing_every_pair(ports: list[tuple[int, int]], last: tuple[int, int]) -> None:
    """Rows alike but for their ports, more than _BIG_GROUP of them: indexed by port."""
    policy_rules = [[Row(PREFIXES[5], PREFIXES[5], ALL_PORTS, p, PROTOS[2], DSCPS[0])] for p in [*ports, last]]
    assert _shadowed_rules(pack(policy_rules)) == reference(policy_rules)


def test_rows_that_are_not_whole_records_are_an_error_naming_the_tenant() -> None:
    packed = pack([[Row(PREFIXES[0], PREFIXES[0], ALL_PORTS, ALL_PORTS, PROTOS[0], DSCPS[0])]] * 2).packed_rows
    with pytest.raises(IsolaneError, match="tenant 'web'.*not whole 56-byte records"):
        shadowed_rules(packed[:-1], "web", _BIG_GROUP)
