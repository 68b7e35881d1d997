"""A tenant's rules as u32 filters on the inner headers (``docs/linux.md``, "Rules"). Pure Python.

Each filter carries its VNI filter's keys (so a rule is its tenant's only) and then keys on the
frame inside the tunnel, at fixed offsets behind the outer headers the VNI filters assume: the
inner Ethernet header at 36 from an outer IPv4 header (IHL 5, UDP, VXLAN), at 56 from an outer
IPv6 header (no extension headers). Inside, no VLAN tag, an IPv4 header of IHL 5 where ports are
read, an IPv6 header without extension headers where the protocol or ports are read.

The filters hang on the tenant's class (``1:T00``), to which the root's VNI filters send the
tenant's packets: HTB runs an inner class's filters on them, so a packet walks its own tenant's
rules only. First match wins as in isolane: from the tenant's first priority ``p``, rule ``r``
gets ``p + 2r`` (outer IPv4) and ``p + 2r + 1`` (outer IPv6), then the class's own VNI filters
send what no rule took to the tenant's default class. Every tenant has priorities of its own:
the kernel's u32 lists the filters of every class of a qdisc that share a priority together."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from isolane.linux.u32 import ETH_P_IP, ETH_P_IPV6, UNMATCHED_PRIO, U32Filter, U32Key, vni_filters, vni_keys
from isolane.policy.compile import TenantTables, tenant_tables
from isolane.policy.constants import ACTION_ALLOW, FRAME_RULE_DSCP, MAX_PORT, PORT_PROTOCOLS
from isolane.policy.model import Tenant

INNER_ETHERNET = {ETH_P_IP: 36, ETH_P_IPV6: 56}
"""Where the inner Ethernet header starts, from the outer network header: IP, UDP (8), VXLAN (8)."""
ETHERNET_HEADER = 14
MAX_KEY_OFFSET = 255
"""The largest u32 key offset pyroute2 takes; the deepest key here (an inner IPv6 packet's ports
behind an IPv6 underlay) is at 112."""
MAX_FILTERS_PER_RULE = 128
"""At most this many filters per rule, VNI, UDP port and underlay family: every packet that
reaches a rule's priority walks its filters."""
FIRST_RULE_PRIO = UNMATCHED_PRIO[ETH_P_IPV6] + 1
"""The first tenant's first priority: after the root's filters'."""
LAST_PRIO = 0xFFFF
_MAPPED_IPV4 = bytes(10) + b"\xff\xff"

Field = tuple[int, int, int, int]
"""A match on the inner frame: (byte offset from the inner Ethernet header, width in bytes, value, mask)."""


@dataclass(frozen=True)
class RuleFilters:
    """A tenant's rule filters and, by place, what of its rules they leave out."""

    filters: tuple[U32Filter, ...]
    unenforced: tuple[str, ...]
    next_prio: int
    """The next tenant's first priority."""


def rule_prio(first: int, rule: int, outer: int) -> int:
    """Rule ``rule``'s priority for an ``outer`` (IPv4 or IPv6) underlay, from its tenant's ``first``."""
    return first + 2 * rule + (outer == ETH_P_IPV6)


def port_pieces(lo: int, hi: int) -> list[tuple[int, int]]:
    """The inclusive range ``lo``-``hi`` of 16-bit ports as (value, mask) pairs that together match
    exactly its ports, each port once: the largest aligned power-of-two blocks, left to right."""
    pieces = []
    while lo <= hi:
        size = lo & -lo if lo else 1 << 16
        while size > hi - lo + 1:
            size >>= 1
        pieces.append((lo, MAX_PORT & ~(size - 1)))
        lo += size
    return pieces


def word_keys(fields: list[Field], base: int) -> tuple[U32Key, ...]:
    """``fields`` (offsets from ``base``) as word-aligned u32 keys, as tc writes them: fields that
    share a word share its key. Offsets past :data:`MAX_KEY_OFFSET` are an error."""
    words: dict[int, tuple[int, int]] = {}
    for offset, width, value, mask in fields:
        for byte in range(width):
            shift = 8 * (width - 1 - byte)
            byte_mask = (mask >> shift) & 0xFF
            if not byte_mask:
                continue
            at = base + offset + byte
            lane = 8 * (3 - at % 4)
            word_value, word_mask = words.get(at - at % 4, (0, 0))
            words[at - at % 4] = (word_value | (((value >> shift) & byte_mask) << lane), word_mask | (byte_mask << lane))
    if words and max(words) > MAX_KEY_OFFSET:
        raise ValueError(f"a u32 key at offset {max(words)}, past the {MAX_KEY_OFFSET} pyroute2 takes")
    return tuple((value, mask, offset) for offset, (value, mask) in sorted(words.items()))


def _prefix_mask(length: int, bits: int) -> int:
    return ((1 << length) - 1) << (bits - length)


def _holds_family(address: bytes, length: int, ipv4: bool) -> bool:
    """Whether a 128-bit (IPv4-mapped) prefix holds any address of an IPv4 or an IPv6 packet."""
    mapped_bits = min(length, 96)
    return not ipv4 or not (int.from_bytes(address[:12], "big") ^ int.from_bytes(_MAPPED_IPV4, "big")) & _prefix_mask(mapped_bits, 96)


def _address_field(offset: int, address: bytes, length: int, ipv4: bool) -> Field | None:
    """The field matching a prefix that holds addresses of the family; None if it holds them all."""
    if ipv4:
        return (offset, 4, int.from_bytes(address[12:], "big"), _prefix_mask(length - 96, 32)) if length > 96 else None
    return (offset, 16, int.from_bytes(address, "big"), _prefix_mask(length, 128)) if length else None


def _ip_fields(tables: TenantTables, row: int, ipv4: bool) -> list[Field] | None:
    """What an inner IPv4 or IPv6 packet must hold to match table row ``row`` but its ports and
    protocol; None if no packet of the family matches it."""
    ip = ETHERNET_HEADER
    fields: list[Field] = [(12, 2, ETH_P_IP if ipv4 else ETH_P_IPV6, 0xFFFF)]
    addresses = (ip + 12, ip + 16) if ipv4 else (ip + 8, ip + 24)
    for offset, address, length in zip(addresses, (tables.src[row], tables.dst[row]), (tables.src_len[row], tables.dst_len[row])):
        if not _holds_family(bytes(address), int(length), ipv4):
            return None
        found = _address_field(offset, bytes(address), int(length), ipv4)
        if found:
            fields.append(found)
    dscp, dscp_mask = int(tables.dscp[row]), int(tables.dscp_mask[row])
    if dscp_mask:
        fields.append((ip + 1, 1, dscp << 2, dscp_mask << 2) if ipv4 else (ip, 2, dscp << 6, dscp_mask << 6))  # DSCP: TOS >> 2, traffic class >> 2
    return fields


def _port_ranges(tables: TenantTables, row: int) -> tuple[tuple[int, int], tuple[int, int]]:
    """Table row ``row``'s source and destination port ranges."""
    return (int(tables.src_port_lo[row]), int(tables.src_port_hi[row])), (int(tables.dst_port_lo[row]), int(tables.dst_port_hi[row]))


def _proto_port_fields(tables: TenantTables, row: int, ipv4: bool) -> Iterator[list[Field]]:
    """The row's protocol and port pieces, one list of fields per filter: ports are read from an
    IPv4 header of IHL 5 (a first fragment) or an IPv6 header without extension headers, and only
    of the protocols that have ports."""
    ip = ETHERNET_HEADER
    proto_field = ip + 9 if ipv4 else ip + 6
    ports = _port_ranges(tables, row)
    keyed = [r != (0, MAX_PORT) for r in ports]
    if not any(keyed):
        yield [(proto_field, 1, int(tables.proto[row]), int(tables.proto_mask[row]))] if tables.proto_mask[row] else []
        return
    protos = [int(tables.proto[row])] if tables.proto_mask[row] else sorted(PORT_PROTOCOLS)
    header = [(ip, 1, 0x45, 0xFF), (ip + 6, 2, 0, 0x1FFF)] if ipv4 else []  # IHL 5, the first fragment
    port_offset = ip + (20 if ipv4 else 40)
    src_pieces = port_pieces(*ports[0]) if keyed[0] else [(0, 0)]
    dst_pieces = port_pieces(*ports[1]) if keyed[1] else [(0, 0)]
    for proto in protos:
        for src_value, src_mask in src_pieces:
            for dst_value, dst_mask in dst_pieces:
                yield [*header, (proto_field, 1, proto, 0xFF), (port_offset, 2, src_value, src_mask), (port_offset + 2, 2, dst_value, dst_mask)]


def _row_fields(tables: TenantTables, row: int, ethertype: int | None) -> list[list[Field]]:
    """Every filter's fields for table row ``row``: a frame rule by its EtherType, an IP rule per
    inner family that it can match."""
    if ethertype is not None:
        return [[(12, 2, ethertype, 0xFFFF)]]
    found = []
    for ipv4 in (True, False):
        ip_fields = _ip_fields(tables, row, ipv4)
        if ip_fields is not None:
            found += [ip_fields + more for more in _proto_port_fields(tables, row, ipv4)]
    return found


PORTLESS_NOTE = "its port ranges hold 0, the ports isolane gives packets without any (ICMP, later fragments); its filters match packets with ports only"


def _holds_portless(tables: TenantTables, rows: list[int]) -> bool:
    """Whether an IP row's port ranges, not both any, both hold port 0: isolane gives packets
    without ports (ICMP, later fragments) ports 0, so the rule matches them there."""
    for row in rows:
        ports = _port_ranges(tables, row)
        if tables.dscp_mask[row] != FRAME_RULE_DSCP and ports != ((0, MAX_PORT),) * 2 and ports[0][0] == ports[1][0] == 0:
            return True
    return False


def tenant_rule_filters(t: int, tenant: Tenant, classids: list[int], vxlan_ports: tuple[int, ...], parent: int, first_prio: int) -> RuleFilters:
    """Tenant ``t``'s rules as filters per VNI, UDP port and underlay family, among the filters of
    class ``parent`` (its tenant class) from priority ``first_prio`` on, then the class's VNI
    filters to the default class; ``classids``: the HTB leaf of each of its classes. A drop rule sends its packets to the default class (this
    kernel has no gact to drop them), so that no later rule takes them. Rules after the last one
    whose class differs from the default class's need no filter: the VNI filters send their
    packets there anyway."""
    tables = tenant_tables(tenant)
    where, default_name = f"tenants[{t}]", tenant.default_class
    drops = (r for r, rule in enumerate(tenant.rules) if rule.action == "drop")
    notes = [(r, f"{where}.rules[{r}]: drops: not enforced (no gact), its packets go to class {default_name!r}") for r in drops]
    if tenant.default == "drop":
        notes.append((len(tenant.rules), f"{where}.default: drop: not enforced (no gact), the packets no rule takes go to class {default_name!r}"))
    rows_of: dict[int, list[int]] = {}
    for row, rule in enumerate(tables.policy_rule.tolist()):
        rows_of.setdefault(rule, []).append(row)
    default = classids[tenant.class_id(default_name)]
    targets = [classids[int(tables.cls[rows_of[r][0]])] if tables.action[rows_of[r][0]] == ACTION_ALLOW else default for r in range(len(tenant.rules))]
    needed = max((r + 1 for r, target in enumerate(targets) if target != default), default=0)
    room = max((LAST_PRIO + 1 - first_prio) // 2 - 1, 0)  # rules whose priorities fit, the VNI filters' after them
    if needed > room:
        notes.append(
            (room, f"{where}.rules[{room}:]: past the {LAST_PRIO:,} priorities of u32 filters: not pushed, their packets go to class {default_name!r}")
        )
    filters: list[U32Filter] = []
    pushed = min(needed, room)
    for r in range(pushed):
        field_sets = [fields for row in rows_of[r] for fields in _row_fields(tables, row, tenant.rules[r].ethertype)]
        if len(field_sets) > MAX_FILTERS_PER_RULE:
            too_many = f"needs {len(field_sets)} u32 filters per VNI, more than {MAX_FILTERS_PER_RULE}: not pushed, the rules after it take its packets"
            notes.append((r, f"{where}.rules[{r}]: {too_many}"))
            continue
        if _holds_portless(tables, rows_of[r]):
            notes.append((r, f"{where}.rules[{r}]: {PORTLESS_NOTE}"))
        filters += _filters(f"{where}.rules[{r}]", (r, first_prio), field_sets, targets[r], tenant, vxlan_ports, parent)
    next_prio = first_prio
    if filters:
        last = rule_prio(first_prio, pushed, ETH_P_IP)
        filters += (f for vni in tenant.vnis for port in vxlan_ports for f in vni_filters(vni, port, default, tenant.name, parent, last))
        next_prio = last + 2
    return RuleFilters(tuple(filters), tuple(text for _, text in sorted(notes, key=lambda note: note[0])), next_prio)


def _filters(
    place: str, rule: tuple[int, int], field_sets: list[list[Field]], classid: int, tenant: Tenant, vxlan_ports: tuple[int, ...], parent: int
) -> Iterator[U32Filter]:
    """Rule ``r``'s filters, ``rule`` being ``r`` and its tenant's first priority."""
    r, first_prio = rule
    for vni in tenant.vnis:
        for port in vxlan_ports:
            for outer, family in ((ETH_P_IP, "IPv4"), (ETH_P_IPV6, "IPv6")):
                outer_keys = vni_keys(vni, port, outer)
                for fields in field_sets:
                    keys = outer_keys + word_keys(fields, INNER_ETHERNET[outer])
                    label = f"{place}, VNI {vni} ({family}, UDP {port})"
                    yield U32Filter(rule_prio(first_prio, r, outer), outer, keys, classid, label, tenant.name, vni, port, r, parent)
