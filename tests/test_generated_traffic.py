"""Property-based tests: random packet stacks built with scapy, parsed by isolane, checked
against scapy's own dissection of the same bytes.

Hypothesis draws packet *recipes* (link layer, VLAN tags, outer IPv4 with options / IPv6 with
extension headers, fragments, VXLAN / Geneve tunnels, inner Ethernet, tenant IPv4/IPv6 and an
upper layer); scapy builds the bytes. The expected record is NOT taken from the recipe: the bytes
are dissected again by scapy and ``expectation()`` below applies docs/parsing.md to scapy's layer
tree. Many packets are parsed in one ``isolane.parse`` batch per example (the batch is fast,
scapy is slow).

``HYPOTHESIS_PROFILE=thorough`` runs many more examples (the default run stays well under a
minute).
"""

from __future__ import annotations

import logging
import os
import socket
import struct
from dataclasses import dataclass, field

import numpy as np
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from scapy.config import conf
from scapy.contrib.geneve import GENEVE, GeneveOptions
from scapy.fields import ByteEnumField, ByteField, StrLenField
from scapy.layers.inet import (
    ICMP,
    IP,
    TCP,
    UDP,
    IPOption_LSRR,
    IPOption_NOP,
    IPOption_Router_Alert,
    IPOption_RR,
)
from scapy.layers.inet6 import (
    HBHOptUnknown,
    ICMPv6EchoRequest,
    IPv6,
    IPv6ExtHdrDestOpt,
    IPv6ExtHdrFragment,
    IPv6ExtHdrHopByHop,
    IPv6ExtHdrRouting,
    IPv6ExtHdrSegmentRouting,
    MIP6MH_Generic,
    PadN,
    RouterAlert,
    _IPv6ExtHdr,
    _MobilityHeader,
    ipv6nh,
    ipv6nhcls,
)
from scapy.layers.ipsec import AH
from scapy.layers.l2 import ARP, CookedLinux, CookedLinuxV2, Dot1AD, Dot1Q, Ether, Loopback, LoopbackOpenBSD
from scapy.layers.sctp import SCTP
from scapy.layers.vxlan import VXLAN
from scapy.packet import NoPayload, Packet, Raw, bind_bottom_up, bind_layers

import isolane
from isolane import Status, Tunnel

# --------------------------------------------------------------------------------------------
# scapy set-up. Everything below only fills gaps in scapy's *dissection* (layers it lacks, one
# length it gets wrong), so that its layer tree reaches the headers the spec talks about; none
# of it decides an expected value.
# --------------------------------------------------------------------------------------------
conf.verb = 0
conf.padding = True
logging.getLogger("scapy.runtime").setLevel(logging.ERROR)  # "Found 2 Source Routing Options" etc.


class _UniformExtHdr(_IPv6ExtHdr):
    """An IPv6 extension header in the uniform format of RFC 6564 (next header, length in 8-octet
    units not counting the first 8, data). HIP (139, RFC 7401) and shim6 (140, RFC 5533) use it;
    scapy has no layer for either, so without this it would leave them as Raw bytes."""

    fields_desc = [ByteEnumField("nh", 59, ipv6nh), ByteField("len", None),
                   StrLenField("data", b"\0" * 6, length_from=lambda pkt: (pkt.len + 1) * 8 - 2)]

    def post_build(self, p, pay):
        if self.len is None:
            p = p[:1] + bytes([(len(p) - 8) // 8]) + p[2:]
        return p + pay


class HIPHeader(_UniformExtHdr):
    name = "HIP (RFC 6564 format)"


class Shim6Header(_UniformExtHdr):
    name = "shim6 (RFC 6564 format)"


ipv6nhcls[139] = HIPHeader
ipv6nhcls[140] = Shim6Header

# scapy bug: MIP6MH_Generic dissects its message as 8 * len - 6 bytes, but a mobility header is
# 8 * (len + 1) bytes (RFC 6275 6.1.1; scapy's own post_build writes len that way) and its fixed
# part is 6 bytes, so the message is 8 * len + 2 bytes. Correct that one length.
_msg_field = MIP6MH_Generic.fields_desc[-1]
assert _msg_field.name == "msg"
_msg_field.length_from = lambda pkt: 8 * pkt.len + 2

# scapy's AH only continues into IP/IPv6 (next header 4/41), and scapy's IPv6 extension headers
# do not continue into AH at all (only the IPv6 header does). In an IPv6 extension-header chain
# AH is one header like the others: let dissection go on through it.
for _nh, _cls in {6: TCP, 17: UDP, 132: SCTP, 60: IPv6ExtHdrDestOpt, 43: IPv6ExtHdrRouting, 44: IPv6ExtHdrFragment,
                  51: AH, 135: MIP6MH_Generic, 139: HIPHeader, 140: Shim6Header}.items():
    bind_bottom_up(AH, _cls, nh=_nh)
for _cls in (IPv6ExtHdrHopByHop, IPv6ExtHdrRouting, IPv6ExtHdrSegmentRouting, IPv6ExtHdrDestOpt, IPv6ExtHdrFragment,
             HIPHeader, Shim6Header):
    bind_bottom_up(_cls, AH, nh=51)

# scapy knows the TPIDs 0x8100 and 0x88a8 but not the old QinQ TPID 0x9100 (docs/parsing.md lists it).
bind_layers(Ether, Dot1Q, type=0x9100)

# BSD loopback (pcap NULL / LOOP): scapy on Linux maps only Linux's AF_INET6 (10) to IPv6; the
# values pcap uses for IPv6 are the BSD ones, 24, 28 and 30 (scapy's LOOPBACK_TYPES names them IPv6).
for _family in (24, 28, 30):
    bind_bottom_up(Loopback, IPv6, type=_family)  # LoopbackOpenBSD shares Loopback's table

# VXLAN (4789) and Geneve (6081) are bound to UDP destination ports by scapy itself. The
# expectation still re-dissects the UDP payload explicitly, because scapy also takes several
# *source* ports and other destination ports for VXLAN, which are no tunnel for isolane.

VXLAN_PORTS = (4789,)  # isolane.parse's default tunnel ports (docs/parsing.md); the tests use the defaults
GENEVE_PORTS = (6081,)

NULL, ETHERNET, RAW, LOOP, LINUX_SLL, IPV4, IPV6, LINUX_SLL2 = 0, 1, 101, 108, 113, 228, 229, 276
INET_FAMILIES = {2, 24, 28, 30}  # pcap NULL / LOOP address families: IPv4, and IPv6 as BSDs number it

IPV6_EXT = (IPv6ExtHdrHopByHop, IPv6ExtHdrRouting, IPv6ExtHdrSegmentRouting, IPv6ExtHdrDestOpt, IPv6ExtHdrFragment, AH,
            _MobilityHeader, _UniformExtHdr)
IPV6_EXT_NUMBERS = {0, 43, 44, 60, 51, 135, 139, 140}
PORT_LAYERS = {6: TCP, 17: UDP, 132: SCTP}
# DCCP (33) and UDP-Lite (136) have no scapy layer; both start with source and destination
# port (RFC 4340 5.1, RFC 3828 3), read here from the raw bytes scapy leaves after the IP header.
RAW_PORT_PROTOS = {33: 12, 136: 8}  # protocol -> length of the header carrying the ports

ZERO16 = bytes(16)
DEFAULTS = {
    "tunnel": int(Tunnel.NONE),
    "vni": -1,
    "vlan": -1,
    "outer_src": ZERO16,
    "outer_dst": ZERO16,
    "src": ZERO16,
    "dst": ZERO16,
    "ip_version": 0,
    "proto": 0,
    "src_port": 0,
    "dst_port": 0,
    "dscp": 0,
    "is_fragment": False,
}
TENANT_FIELDS = ("src", "dst", "ip_version", "proto", "src_port", "dst_port", "dscp")
ALWAYS = 1 << 40  # "a cut length beyond any frame"


def mapped(address: str) -> bytes:
    """16-byte form of an address as isolane reports it (IPv4 as ::ffff:a.b.c.d)."""
    if ":" in address:
        return socket.inet_pton(socket.AF_INET6, address)
    return b"\0" * 10 + b"\xff\xff" + socket.inet_aton(address)


# --------------------------------------------------------------------------------------------
# Expected record, from scapy's dissection
# --------------------------------------------------------------------------------------------
@dataclass
class Expected:
    """What isolane must report for a frame, and for every prefix of it.

    Each field has *stages* ``(lo, hi, value)`` in the order a parser meets them: the bytes that
    determine ``value`` end at ``lo`` (a capture shorter than ``lo`` cannot know it), and the
    whole header holding it ends at ``hi`` (a capture of at least ``hi`` bytes has reached it, so
    the field must show it). ``hi is None`` marks an optional stage: a value a parser may show
    before it can know better (the outer IP packet as "tenant" before the UDP destination port
    says there is a tunnel). A field absent from ``stages`` keeps its default.
    """

    wire_len: int
    status: Status = Status.OK
    stages: dict = field(default_factory=lambda: {name: [] for name in DEFAULTS})
    needed_min: int = 0  # below this capture length isolane cannot have finished
    needed_max: int = 0  # from this capture length on every header isolane needs was captured
    path: list = field(default_factory=list)  # scapy layer names, for messages
    ip_lengths: list = field(default_factory=list)  # IPHeader.lengths of the outer and tenant IP

    def reach(self, name, value, lo, hi, optional=False):
        self.stages[name].append((lo, None if optional else hi, value))
        if not optional:
            self.needed_min = max(self.needed_min, lo)
            self.needed_max = max(self.needed_max, hi)

    def unsupported(self, lo, hi, status=Status.UNSUPPORTED):
        """The record ends with ``status`` once the bytes up to ``lo`` (all of ``hi``) are read."""
        self.status = status
        self.needed_min = max(self.needed_min, lo)
        self.needed_max = max(self.needed_max, hi)

    def allowed(self, name, cut):
        """Values ``name`` may show when ``cut`` bytes of the frame were captured."""
        stages = self.stages[name]
        required = -1
        for i, (_lo, hi, _value) in enumerate(stages):
            if hi is not None and hi <= cut:
                required = i
        out = {stages[required][2] if required >= 0 else DEFAULTS[name]}
        out.update(value for lo, _hi, value in stages[required + 1 :] if lo <= cut)
        return out

    def allowed_status(self, cut, incomplete=Status.TRUNCATED):
        """Statuses allowed with ``cut`` bytes of the frame available; ``incomplete`` is the status
        for a record that could not finish (TRUNCATED for a short capture, MALFORMED for a short
        frame or IP packet)."""
        if cut >= self.needed_max:
            return {self.status}
        if cut < self.needed_min:
            return {incomplete}
        return {incomplete, self.status}


@dataclass
class IPHeader:
    """One IP header as scapy dissected it, with the byte offsets the stages need."""

    version: int
    src: bytes
    dst: bytes
    dscp: int
    proto: int
    start: int
    end: int  # end of the header including IPv4 options / IPv6 extension headers
    proto_lo: int
    fragment: tuple | None  # (lo, hi) of the bytes saying "fragment", None if not a fragment
    non_first: bool
    next_index: int  # index in the layer list of what follows the header chain
    lengths: tuple  # (offset of the length field, shortest legal value, declared value, packet end - value)

    def lo(self, name):
        s = self.start
        if self.version == 4:
            return {"ip_version": s + 1, "dscp": s + 2, "proto": self.proto_lo, "src": s + 16, "dst": s + 20}[name]
        return {"ip_version": s + 1, "dscp": s + 2, "proto": self.proto_lo, "src": s + 24, "dst": s + 40}[name]


def layer_list(pkt: Packet, base: int, total: int):
    """[(layer, start, header_end)] along scapy's layer chain, offsets in the frame.

    A dissected layer rebuilds byte-exactly from its cache and Padding layers sit at the end of
    the chain, so ``total - len(raw(layer))`` is where the layer starts.
    """
    out = []
    layer = pkt
    while not isinstance(layer, NoPayload):
        own = len(bytes(layer))
        start = base + total - own
        end = start + own - len(bytes(layer.payload))
        out.append((layer, start, end))
        layer = layer.payload
    return out


def ip_header(layers, i) -> IPHeader:
    ip, start, end = layers[i]
    j = i + 1
    if isinstance(ip, IP):
        fragment = (start + 8, end) if (ip.flags.MF or ip.frag) else None
        return IPHeader(4, mapped(ip.src), mapped(ip.dst), ip.tos >> 2, ip.proto, start, end, start + 10,
                        fragment, ip.frag != 0, j, (start + 2, ip.ihl * 4, ip.len, start))
    assert isinstance(ip, IPv6), ip
    proto, proto_lo, fragment, non_first = ip.nh, start + 7, None, False
    while not non_first and j < len(layers) and isinstance(layers[j][0], IPV6_EXT):
        ext, ext_start, end = layers[j]
        proto, proto_lo = ext.nh, ext_start + 1
        if isinstance(ext, IPv6ExtHdrFragment):
            fragment = fragment or (ext_start + 4, ext_start + 8)
            non_first = ext.offset != 0
        j += 1
    # An extension header scapy could not dissect would leave a wrong protocol here.
    assert non_first or proto not in IPV6_EXT_NUMBERS, f"scapy stopped inside the IPv6 chain at {proto}"
    return IPHeader(6, mapped(ip.src), mapped(ip.dst), ip.tc >> 2, proto, start, end, proto_lo,
                    fragment, non_first, j, (start + 4, 1, ip.plen, start + 40))


def ports(layers, ip: IPHeader):
    """(sport, dport, lo_sport, lo_dport, header_end) of the upper layer, or None."""
    if ip.non_first or ip.next_index >= len(layers):
        return None
    l4, start, end = layers[ip.next_index]
    if ip.proto in PORT_LAYERS:
        assert isinstance(l4, PORT_LAYERS[ip.proto]), f"scapy did not dissect protocol {ip.proto}: {l4!r}"
        return l4.sport, l4.dport, start + 2, start + 4, end
    if ip.proto in RAW_PORT_PROTOS:
        assert isinstance(l4, Raw), l4
        sport, dport = struct.unpack("!HH", bytes(l4)[:4])
        return sport, dport, start + 2, start + 4, start + RAW_PORT_PROTOS[ip.proto]
    return None


def reach_tenant(e: Expected, layers, ip: IPHeader, hi: int, optional=False):
    for name in ("ip_version", "dscp", "proto", "src", "dst"):
        value = {"ip_version": ip.version, "dscp": ip.dscp, "proto": ip.proto, "src": ip.src, "dst": ip.dst}[name]
        e.reach(name, value, ip.lo(name), hi, optional)
    if optional:
        return
    p = ports(layers, ip)
    if p is not None:
        sport, dport, lo_s, lo_d, l4_end = p
        e.reach("src_port", sport, lo_s, l4_end)
        e.reach("dst_port", dport, lo_d, l4_end)


def skip_ethernet(layers, i, e: Expected, outer: bool):
    """Skip Ether + VLAN tags at ``layers[i]``; record the outer frame's VLAN. Returns the index of
    the layer after the tags and the offset where it starts."""
    assert isinstance(layers[i][0], Ether), layers[i][0]
    i += 1
    first_tag = None
    while i < len(layers) and isinstance(layers[i][0], Dot1Q):  # Dot1AD is a Dot1Q
        first_tag = first_tag or layers[i]
        i += 1
    l3_start = layers[i][1] if i < len(layers) else layers[i - 1][2]
    if outer and first_tag is not None:
        tag, tag_start, _ = first_tag
        e.reach("vlan", tag.vlan, tag_start + 2, l3_start)
    return i, l3_start


def dissect(frame: bytes, link_type: int) -> Packet:
    if link_type == ETHERNET:
        return Ether(frame)
    if link_type == LINUX_SLL:
        return CookedLinux(frame)
    if link_type == LINUX_SLL2:
        return CookedLinuxV2(frame)
    if link_type == NULL:  # family in the capturing host's byte order, either
        little = len(frame) >= 4 and struct.unpack("<I", frame[:4])[0] in INET_FAMILIES
        return Loopback(frame) if little else LoopbackOpenBSD(frame)
    if link_type == LOOP:  # family in network byte order
        return LoopbackOpenBSD(frame)
    if link_type == IPV4:
        return IP(frame)
    if link_type == IPV6:
        return IPv6(frame)
    assert link_type == RAW
    return IP(frame) if frame[0] >> 4 == 4 else IPv6(frame)


def expectation(frame: bytes, link_type: int = ETHERNET) -> Expected:
    """docs/parsing.md applied to scapy's dissection of ``frame``."""
    pkt = dissect(frame, link_type)
    assert bytes(pkt) == frame, "scapy does not rebuild the frame it dissected"
    total = len(frame)
    layers = layer_list(pkt, 0, total)
    e = Expected(total)
    e.path = [type(layer).__name__ for layer, _, _ in layers]
    e.ip_lengths = []

    if link_type == ETHERNET:
        i, l3_start = skip_ethernet(layers, 0, e, outer=True)
    elif link_type in (LINUX_SLL, LINUX_SLL2, NULL, LOOP):
        i, l3_start = 1, layers[1][1]
    else:
        i, l3_start = 0, 0
    if i >= len(layers) or not isinstance(layers[i][0], (IP, IPv6)):
        e.unsupported(l3_start, l3_start)
        return e

    outer = ip_header(layers, i)
    e.ip_lengths.append(outer.lengths)
    e.reach("outer_src", outer.src, outer.lo("src"), outer.end)
    e.reach("outer_dst", outer.dst, outer.lo("dst"), outer.end)
    fragments = [outer.fragment] if outer.fragment else []

    udp = None
    if not outer.non_first and outer.proto == 17:
        udp = layers[outer.next_index]
        assert isinstance(udp[0], UDP), udp
    dport = udp[0].dport if udp else None

    if dport in VXLAN_PORTS or dport in GENEVE_PORTS:
        udp_start = udp[1]
        kind = Tunnel.VXLAN if dport in VXLAN_PORTS else Tunnel.GENEVE
        e.reach("tunnel", int(kind), udp_start + 4, udp_start + 8)
        # Before the destination port is read the outer packet may show as the tenant; once
        # the tunnel is known, tenant fields are empty until the tenant IP header is reached.
        reach_tenant(e, layers, outer, None, optional=True)
        for name in TENANT_FIELDS:
            e.reach(name, DEFAULTS[name], udp_start + 4, udp_start + 8)
        tenant = tunnel_payload(frame, udp_start + 8, kind, e)
        if tenant is not None:
            inner_layers, tenant = tenant
            e.ip_lengths.append(tenant.lengths)
            reach_tenant(e, inner_layers, tenant, tenant.end)
            if tenant.fragment:
                fragments.append(tenant.fragment)
            e.path += ["|"] + [type(layer).__name__ for layer, _, _ in inner_layers]
    else:
        # Without a tunnel the tenant is the outer packet; for UDP that is only known once the
        # destination port was read.
        reach_tenant(e, layers, outer, udp[2] if udp else outer.end)
    if fragments:
        e.reach("is_fragment", True, *fragments[0])
    return e


def tunnel_payload(frame: bytes, start: int, kind: Tunnel, e: Expected):
    """Dissect the UDP payload at ``start`` as the tunnel header; returns (layers, tenant IP) or
    None when the tenant packet is not IP (status UNSUPPORTED)."""
    sub = frame[start:]
    if kind == Tunnel.VXLAN:
        layers = layer_list(VXLAN(sub), start, len(sub))
        vx = layers[0][0]
        assert not vx.flags.NextProtocol, vx  # the generator's promise: no VXLAN-GPE
        if not vx.flags.Instance:
            e.unsupported(start + 1, start + 8, Status.MALFORMED)  # "VXLAN without the I flag"
            return None
        e.reach("vni", vx.vni, start + 7, start + 8)
        if len(layers) < 2:
            e.unsupported(start + 8, start + 8)
            return None
        i, l3_start = skip_ethernet(layers, 1, e, outer=False)
    else:
        layers = layer_list(GENEVE(sub), start, len(sub))
        gen, _, header_end = layers[0]
        if gen.version != 0:
            # The spec does not say whether the VNI of an unknown Geneve version is read.
            e.reach("vni", gen.vni, start + 7, header_end, optional=True)
            e.unsupported(start + 1, header_end)
            return None
        e.reach("vni", gen.vni, start + 7, header_end)
        if gen.proto == 0x6558:
            i, l3_start = skip_ethernet(layers, 1, e, outer=False)
        elif gen.proto in (0x0800, 0x86DD):
            i, l3_start = 1, header_end
        else:
            e.unsupported(start + 4, header_end)
            return None
    if i >= len(layers) or not isinstance(layers[i][0], (IP, IPv6)):
        e.unsupported(l3_start, l3_start)
        return None
    return layers, ip_header(layers, i)


# --------------------------------------------------------------------------------------------
# Comparing isolane's rows with the expectation
# --------------------------------------------------------------------------------------------
def row_values(row) -> dict:
    out = {}
    for name in DEFAULTS:
        value = row[name]
        if name in ("outer_src", "outer_dst", "src", "dst"):
            out[name] = bytes(np.asarray(value, dtype=np.uint8))
        elif name == "is_fragment":
            out[name] = bool(value)
        else:
            out[name] = int(value)
    return out


def show(name, value):
    if isinstance(value, bytes):
        return isolane.format_addresses(np.frombuffer(value, dtype=np.uint8))[0] or "0"
    return repr(value)


def check_row(row, e: Expected, cut: int, incomplete=Status.TRUNCATED, wire_len=None) -> list[str]:
    """Mismatches between one isolane row (``cut`` bytes of the frame available) and the
    expectation."""
    errors = []
    got = row_values(row)
    status = Status(int(row["status"]))
    statuses = e.allowed_status(cut, incomplete)
    if status not in statuses:
        errors.append(f"status {status.name}, expected {'/'.join(s.name for s in statuses)}")
    # A finished record (OK / UNSUPPORTED / MALFORMED where the whole frame is) must show every
    # field as of the whole frame, unless its status is also the one for "could not finish".
    finished = status == e.status != incomplete
    for name in DEFAULTS:
        allowed = e.allowed(name, ALWAYS if finished else cut)
        if got[name] not in allowed:
            errors.append(f"{name} {show(name, got[name])}, expected {' or '.join(show(name, v) for v in allowed)}")
    wire_len = e.wire_len if wire_len is None else wire_len
    if int(row["wire_len"]) != wire_len:
        errors.append(f"wire_len {int(row['wire_len'])}, expected {wire_len}")
    return errors


def parse_frames(frames, wire_lens, link_types):
    data = np.frombuffer(b"".join(frames), dtype=np.uint8) if frames else np.zeros(0, np.uint8)
    lengths = np.array([len(f) for f in frames], dtype=np.uint32)
    offsets = np.zeros(len(frames), dtype=np.uint64)
    if len(frames):
        offsets[1:] = np.cumsum(lengths[:-1], dtype=np.uint64)
    batch = isolane.PacketBatch.from_arrays(
        data, offsets, lengths, np.zeros(len(frames), dtype=np.int64),
        wire_lengths=np.array(wire_lens, dtype=np.uint32),
        link_type=np.array(link_types, dtype=np.uint16),
    )
    rows = isolane.parse(batch)  # default ports: VXLAN_PORTS, GENEVE_PORTS
    assert len(rows) == len(frames)
    assert rows.tobytes() == isolane.parse(batch, threads=1).tobytes(), "the result depends on the thread count"
    return rows


def describe(sample, e: Expected, note="", wire=None) -> str:
    return (f"link {sample.link_type}{note}: {' / '.join(e.path)}\n"
            f"    isolane input: {(sample.wire if wire is None else wire).hex()}\n"
            f"    recipe: {sample.recipe}")


# --------------------------------------------------------------------------------------------
# Strategies: random stacks built with scapy
# --------------------------------------------------------------------------------------------
u8 = st.integers(0, 0xFF)
u16 = st.integers(0, 0xFFFF)
ports_ = u16.filter(lambda p: p not in VXLAN_PORTS and p not in GENEVE_PORTS)
ipv4_address = st.integers(0, 2**32 - 1).map(lambda n: socket.inet_ntoa(n.to_bytes(4, "big")))
ipv6_address = st.integers(0, 2**128 - 1).map(lambda n: socket.inet_ntop(socket.AF_INET6, n.to_bytes(16, "big")))
mac = st.binary(min_size=6, max_size=6).map(lambda b: ":".join(f"{x:02x}" for x in b))
traffic_class = st.tuples(st.integers(0, 63), st.integers(0, 3)).map(lambda t: t[0] << 2 | t[1])
OTHER_PROTOS = [2, 4, 41, 47, 50, 59, 89, 103, 112, 253, 255]


@st.composite
def vlan_tags(draw):
    """0-2 tags: 802.1Q, QinQ 802.1ad + 802.1Q, double 802.1Q, 0x9100 + 802.1Q."""
    shape = draw(st.sampled_from(["none", "none", "q", "ad-q", "q-q", "9100-q"]))
    vids = [draw(st.integers(0, 4095)) for _ in range(2)]
    prio, dei = draw(st.integers(0, 7)), draw(st.integers(0, 1))  # the TCI bits around the VLAN id
    if shape == "none":
        return None, []
    if shape == "q":
        return 0x8100, [Dot1Q(vlan=vids[0], prio=prio, dei=dei)]
    if shape == "ad-q":
        return 0x88A8, [Dot1AD(vlan=vids[0], prio=prio, dei=dei), Dot1Q(vlan=vids[1])]
    if shape == "q-q":
        return 0x8100, [Dot1Q(vlan=vids[0], prio=prio, dei=dei), Dot1Q(vlan=vids[1])]
    return 0x9100, [Dot1Q(vlan=vids[0], prio=prio, dei=dei), Dot1Q(vlan=vids[1])]


def ethernet(src, dst, tags):
    tpid, layers = tags
    frame = Ether(src=src, dst=dst) if tpid is None else Ether(src=src, dst=dst, type=tpid)
    for tag in layers:
        frame = frame / tag
    return frame


@st.composite
def ipv4_options(draw):
    options = []
    for kind in draw(st.lists(st.sampled_from(["nop", "rr", "lsrr", "ra"]), max_size=3)):
        if kind == "nop":
            options.append(IPOption_NOP())
        elif kind == "ra":
            options.append(IPOption_Router_Alert())
        elif kind == "rr":
            options.append(IPOption_RR(routers=draw(st.lists(ipv4_address, min_size=1, max_size=2))))
        else:
            options.append(IPOption_LSRR(routers=draw(st.lists(ipv4_address, min_size=1, max_size=2))))
    return options  # at most 3 * 11 bytes, below the 40-byte limit


@st.composite
def ip_stack(draw, allow_non_first=True, version=None, allow_mobility=True, ipv4_options_allowed=True):
    """An IP header chain as a list of scapy layers, plus its fragment kind.

    Returns (layers, non_first): ``non_first`` means the payload must be raw bytes.
    """
    version = version or draw(st.sampled_from([4, 6]))
    frag_kinds = ["none"] * 8 + ["first"] + (["middle", "last"] if allow_non_first else [])
    kind = draw(st.sampled_from(frag_kinds + (["atomic"] if version == 6 else ["df"])))
    if version == 4:
        flags = {"none": 0, "df": 2, "first": 1, "middle": 1, "last": 0}[kind]
        offset = draw(st.integers(1, 8191)) if kind in ("middle", "last") else 0
        header = IP(src=draw(ipv4_address), dst=draw(ipv4_address), tos=draw(traffic_class), ttl=draw(u8),
                    id=draw(u16), flags=flags, frag=offset,
                    options=draw(ipv4_options()) if ipv4_options_allowed and draw(st.booleans()) else [])
        return [header], kind in ("middle", "last")
    chain = [IPv6(src=draw(ipv6_address), dst=draw(ipv6_address), tc=draw(traffic_class),
                  fl=draw(st.integers(0, 2**20 - 1)), hlim=draw(u8))]
    names = draw(st.lists(st.sampled_from(["rt", "srh", "dst", "ah"] * 2 + ["hip", "shim6"]), max_size=3))
    if draw(st.booleans()):
        names.insert(0, "hbh")  # hop-by-hop only ever directly after the IPv6 header
    if kind != "none":
        names.insert(draw(st.integers(0, len(names))) if not names or names[0] != "hbh" else
                     draw(st.integers(1, len(names))), "frag")
    if allow_mobility and draw(st.integers(0, 15)) == 0:
        names.append("mobility")  # its next header is always "none" (59, RFC 6275 6.1.1): last
    non_first = False
    for name in names:
        if non_first:
            break  # after a non-first fragment header everything is fragment data
        if name in ("hbh", "dst"):
            opts = draw(st.lists(st.sampled_from(["padn", "ra", "unknown"]), max_size=3))
            built = []
            for opt in opts:
                if opt == "padn":
                    built.append(PadN(optdata=b"\0" * draw(st.integers(0, 5))))
                elif opt == "ra":
                    built.append(RouterAlert(value=draw(u16)))
                else:  # option types with the top bits 00: "skip if unknown"
                    otype = draw(st.integers(0x02, 0x3F).filter(lambda t: t not in (0x04, 0x05)))
                    built.append(HBHOptUnknown(otype=otype, optdata=draw(st.binary(max_size=10))))
            cls = IPv6ExtHdrHopByHop if name == "hbh" else IPv6ExtHdrDestOpt
            chain.append(cls(options=built))
        elif name == "rt":
            chain.append(IPv6ExtHdrRouting(addresses=draw(st.lists(ipv6_address, max_size=3))))
        elif name == "srh":
            chain.append(IPv6ExtHdrSegmentRouting(addresses=draw(st.lists(ipv6_address, min_size=1, max_size=3))))
        elif name == "ah":
            icv = draw(st.sampled_from([4, 12, 20]))  # AH is 8-byte aligned in IPv6
            chain.append(AH(payloadlen=(12 + icv) // 4 - 2, spi=draw(st.integers(1, 2**32 - 1)),
                            seq=draw(st.integers(0, 2**32 - 1)), icv=draw(st.binary(min_size=icv, max_size=icv))))
        elif name in ("hip", "shim6"):
            cls = HIPHeader if name == "hip" else Shim6Header
            size = 6 + 8 * draw(st.integers(0, 2))
            chain.append(cls(data=draw(st.binary(min_size=size, max_size=size))))
        elif name == "mobility":
            # A message type scapy does not know, so that it keeps the generic layout.
            size = 2 + 8 * draw(st.integers(0, 2))
            chain.append(MIP6MH_Generic(nh=59, mhtype=draw(st.integers(0x40, 0xFF)),
                                        msg=draw(st.binary(min_size=size, max_size=size))))
        else:
            offset = draw(st.integers(1, 8191)) if kind in ("middle", "last") else 0
            more = {"first": 1, "middle": 1, "last": 0, "atomic": 0}[kind]
            chain.append(IPv6ExtHdrFragment(offset=offset, m=more, id=draw(st.integers(0, 2**32 - 1))))
            non_first = offset != 0
    return chain, non_first


def chain_to_packet(chain, next_header: int):
    """Stack an IP header chain, setting each next-header field explicitly (scapy's automatic
    values are not right for every combination, e.g. AH followed by a destination options header)."""
    numbers = {IPv6ExtHdrHopByHop: 0, IPv6ExtHdrRouting: 43, IPv6ExtHdrSegmentRouting: 43,
               IPv6ExtHdrFragment: 44, IPv6ExtHdrDestOpt: 60, AH: 51, MIP6MH_Generic: 135, HIPHeader: 139,
               Shim6Header: 140}
    for layer, after in zip(chain, chain[1:]):
        if not isinstance(layer, IP):
            layer.nh = numbers[type(after)]
    last = chain[-1]
    if isinstance(last, IP):
        last.proto = next_header
    else:
        last.nh = next_header
    pkt = chain[0]
    for layer in chain[1:]:
        pkt = pkt / layer
    return pkt


@st.composite
def upper_layer(draw, version, tunnels_allowed=False, nested=False):
    """(next header number, scapy payload): TCP/UDP/ICMP/SCTP/DCCP/UDP-Lite/other, or (for the
    tenant, when ``nested``) a further VXLAN / Geneve packet, which isolane must not enter."""
    choices = ["tcp", "udp", "icmp", "sctp", "dccp", "udplite", "other"]
    if nested:
        choices += ["vxlan-in", "geneve-in"]
    kind = draw(st.sampled_from(choices))
    if kind == "tcp":
        options = draw(st.sampled_from([[], [("MSS", 1460)], [("NOP", None), ("WScale", 7), ("SAckOK", b"")]]))
        return 6, TCP(sport=draw(u16), dport=draw(u16), flags=draw(u8), seq=draw(st.integers(0, 2**32 - 1)),
                      options=options) / Raw(draw(st.binary(max_size=20)))
    if kind == "udp":
        sport = draw(st.sampled_from([4789, 6081, 8472])) if draw(st.integers(0, 4)) == 0 else draw(u16)
        # scapy also takes 4790, 6633, 8472 and 48879 for VXLAN; isolane (default ports) must not.
        dport = draw(st.sampled_from([4790, 6633, 8472, 48879])) if draw(st.integers(0, 4)) == 0 else draw(ports_)
        return 17, UDP(sport=sport, dport=dport) / Raw(draw(st.binary(max_size=20)))
    if kind == "icmp":
        if version == 4:
            return 1, ICMP(type=draw(u8), code=draw(u8)) / Raw(draw(st.binary(max_size=16)))
        return 58, ICMPv6EchoRequest(id=draw(u16), seq=draw(u16))
    if kind == "sctp":
        return 132, SCTP(sport=draw(u16), dport=draw(u16), tag=draw(st.integers(0, 2**32 - 1))) / \
            Raw(draw(st.binary(max_size=16)))
    if kind == "dccp":  # generic header with X = 0: ports, data offset 3, CCVal/CsCov, checksum, type, seq
        packet_type = draw(st.integers(0, 9)) << 1
        header = struct.pack("!HHBBHBBH", draw(u16), draw(u16), 3, 0, 0, packet_type, draw(u8), draw(u16))
        return 33, Raw(header + draw(st.binary(max_size=8)))
    if kind == "udplite":
        header = struct.pack("!HHHH", draw(u16), draw(u16), 8, 0)
        return 136, Raw(header + draw(st.binary(max_size=8)))
    if kind == "vxlan-in":
        return 17, UDP(sport=draw(u16), dport=4789) / VXLAN(flags=0x08, vni=draw(st.integers(0, 2**24 - 1))) / \
            Ether() / IP(src=draw(ipv4_address)) / UDP(sport=draw(u16), dport=draw(u16))
    if kind == "geneve-in":
        return 17, UDP(sport=draw(u16), dport=6081) / GENEVE(proto=0x0800, vni=draw(st.integers(0, 2**24 - 1))) / \
            IP(src=draw(ipv4_address)) / TCP(sport=draw(u16), dport=draw(u16))
    proto = draw(st.sampled_from(OTHER_PROTOS))
    return proto, Raw(draw(st.binary(max_size=24)))


@st.composite
def ip_packet(draw, allow_non_first=True, version=None, nested=False, ipv4_options_allowed=True):
    chain, non_first = draw(ip_stack(allow_non_first=allow_non_first, version=version,
                                     ipv4_options_allowed=ipv4_options_allowed))
    if non_first:
        next_header = draw(st.sampled_from([6, 17, 1, 58, 132, 60, 47]))
        return chain_to_packet(chain, next_header) / Raw(draw(st.binary(min_size=1, max_size=32)))
    if isinstance(chain[-1], MIP6MH_Generic):
        return chain_to_packet(chain, 59)
    next_header, payload = draw(upper_layer(chain[0].version, nested=nested))
    return chain_to_packet(chain, next_header) / payload


@st.composite
def tenant_frame(draw, common=False):
    """Inner Ethernet (optionally tagged) with an IP packet, sometimes ARP (UNSUPPORTED).
    ``common``: untagged Ethernet and IPv4 without options, the shape isolane has a fast path for."""
    frame = ethernet(draw(mac), draw(mac), (None, []) if common else draw(vlan_tags()))
    if draw(st.integers(0, 15)) == 0:
        return frame / ARP(psrc=draw(ipv4_address), pdst=draw(ipv4_address))
    if common:
        return frame / draw(ip_packet(version=4, nested=True, ipv4_options_allowed=False))
    return frame / draw(ip_packet(nested=True))


@st.composite
def tunnel_packet(draw, common=False):
    """UDP + VXLAN / Geneve + tenant (``common``: VXLAN + ``tenant_frame(common=True)``)."""
    if common or draw(st.booleans()):
        gbp = draw(st.booleans())
        flags = 0x88 if gbp else 0x08
        if draw(st.integers(0, 15)) == 0:
            flags &= ~0x08  # no I flag: MALFORMED
        vxlan = VXLAN(flags=flags, vni=draw(st.integers(0, 2**24 - 1)), reserved2=draw(u8))
        if gbp:
            vxlan.gpflags = draw(st.sampled_from([0, 0x08, 0x40, 0x48]))
            vxlan.gpid = draw(u16)
        else:
            vxlan.reserved1 = draw(st.integers(0, 2**24 - 1))
        return UDP(sport=draw(u16), dport=4789) / vxlan / draw(tenant_frame(common=common))
    options = []
    for _ in range(draw(st.integers(0, 3))):
        words = draw(st.integers(0, 4))
        data = draw(st.binary(min_size=4 * words, max_size=4 * words))
        options.append(GeneveOptions(classid=draw(u16), type=draw(u8), data=data))
    payload = draw(st.sampled_from(["ether"] * 3 + ["ipv4"] * 2 + ["ipv6"] * 2 + ["other-proto", "other-version"]))
    proto = {"ether": 0x6558, "ipv4": 0x0800, "ipv6": 0x86DD, "other-version": 0x6558,
             "other-proto": draw(st.sampled_from([0x0806, 0x8847, 0x88CC]))}[payload]
    geneve = GENEVE(version=draw(st.integers(1, 3)) if payload == "other-version" else 0, oam=draw(st.integers(0, 1)),
                    critical=draw(st.integers(0, 1)), reserved=draw(st.integers(0, 63)), proto=proto,
                    vni=draw(st.integers(0, 2**24 - 1)), reserved2=draw(u8), options=options)
    if payload in ("ether", "other-version"):
        inner = draw(tenant_frame())
    elif payload == "ipv4":
        inner = draw(ip_packet(version=4, nested=True))
    elif payload == "ipv6":
        inner = draw(ip_packet(version=6, nested=True))
    else:
        inner = Raw(draw(st.binary(min_size=1, max_size=40)))
    return UDP(sport=draw(u16), dport=6081) / geneve / inner


class Sample:
    """One generated frame (a plain class: Hypothesis prints it through ``__repr__``)."""

    def __init__(self, frame: bytes, wire: bytes, link_type: int, recipe: str):
        self.frame = frame  # what scapy dissects for the expectation
        self.wire = wire  # what isolane parses (equal to frame, or with an IP length zeroed)
        self.link_type = link_type
        self.recipe = recipe

    def __repr__(self):
        zeroed = "" if self.wire == self.frame else ", one IP length zeroed"
        return f"<link {self.link_type}{zeroed}: {self.recipe}: {self.wire.hex()}>"


@st.composite
def sample(draw):
    """One frame: link layer + outer IP + (plain upper layer | tunnel)."""
    shape = draw(st.sampled_from(["plain"] * 5 + ["vxlan/geneve"] * 6 + ["common"] * 3 + ["not ip"]))
    if shape == "not ip":  # ARP or MPLS in an Ethernet frame: UNSUPPORTED
        tags = draw(vlan_tags())
        frame = ethernet(draw(mac), draw(mac), tags)
        if draw(st.booleans()):
            frame = frame / ARP(op=draw(st.integers(1, 2)), psrc=draw(ipv4_address), pdst=draw(ipv4_address))
        else:
            frame = frame / Raw(draw(st.binary(min_size=4, max_size=30)))
            frame[Raw].underlayer.type = 0x8847
        return Sample(bytes(frame), bytes(frame), ETHERNET, frame.summary())
    if shape == "plain":
        outer = draw(ip_packet())
    elif shape == "common":
        # Ethernet / IPv4 / UDP / VXLAN / Ethernet / IPv4, mostly without tags, options or
        # fragments: isolane parses this shape on a fast path of its own, so it gets its own share
        # (with its near misses: a tag, a fragment, a short capture, another upper layer, ...).
        chain, _ = draw(ip_stack(version=4, allow_non_first=False, ipv4_options_allowed=False))
        outer = chain_to_packet(chain, 17) / draw(tunnel_packet(common=True))
    else:
        chain, _ = draw(ip_stack(allow_non_first=False, allow_mobility=False))
        outer = chain_to_packet(chain, 17) / draw(tunnel_packet())
    version = 4 if isinstance(outer, IP) else 6
    link_type = draw(st.sampled_from([ETHERNET] * 8 + [RAW, IPV4 if version == 4 else IPV6, LINUX_SLL, LINUX_SLL2,
                                                        NULL, LOOP]))
    if shape == "common" and draw(st.integers(0, 3)) != 0:
        link_type = ETHERNET
    if link_type == ETHERNET:
        tags = (None, []) if shape == "common" and draw(st.integers(0, 3)) != 0 else draw(vlan_tags())
        pkt = ethernet(draw(mac), draw(mac), tags) / outer
    elif link_type == LINUX_SLL:
        pkt = CookedLinux(pkttype=draw(st.integers(0, 4)), lladdrtype=1, lladdrlen=6,
                          src=draw(st.binary(min_size=8, max_size=8)), proto=0x0800 if version == 4 else 0x86DD) / outer
    elif link_type == LINUX_SLL2:
        pkt = CookedLinuxV2(proto=0x0800 if version == 4 else 0x86DD, ifindex=draw(st.integers(0, 2**31)),
                            lladdrtype=1, pkttype=draw(st.integers(0, 4)), lladdrlen=6,
                            src=draw(st.binary(min_size=8, max_size=8))) / outer
    elif link_type in (NULL, LOOP):
        family = 2 if version == 4 else draw(st.sampled_from([24, 28, 30]))
        little = link_type == NULL and draw(st.booleans())  # NULL: the capturing host's byte order
        pkt = (Loopback(type=family) if little else LoopbackOpenBSD(type=family)) / outer
    else:
        pkt = outer
    frame = bytes(pkt)
    if link_type == ETHERNET and draw(st.integers(0, 4)) == 0:
        frame += draw(st.binary(min_size=1, max_size=24))  # Ethernet padding/trailer after the IP packet
    wire = frame
    # TSO/GSO: 0 = "to the end of the frame". Only for frames scapy reads back (the rest are
    # filtered out below), since the lengths come from its dissection.
    if draw(st.integers(0, 7)) == 0 and bytes(dissect(frame, link_type)) == frame:
        wire = zero_ip_length(frame, link_type, draw(st.integers(0, 1)))
    return Sample(frame, wire, link_type, pkt.summary())


def zero_ip_length(frame: bytes, link_type: int, which: int) -> bytes:
    """The frame with the outer (``which`` 0) or tenant (1) IPv4 total length / IPv6 payload
    length set to 0. The expectation is still taken from the frame with the real length: scapy
    reads a zero IPv6 payload length as an empty payload, while docs/parsing.md says it means "to
    the end of the frame"; only an IP packet that ends where the frame ends is zeroed, so both
    mean the same bytes."""
    ends_with_frame = [(at, end - value) for at, _, value, end in expectation(frame, link_type).ip_lengths
                       if end + value == len(frame)]
    if not ends_with_frame:
        return frame
    at, _ = ends_with_frame[min(which, len(ends_with_frame) - 1)]
    return frame[:at] + b"\0\0" + frame[at + 2:]


# --------------------------------------------------------------------------------------------
# Tests
# --------------------------------------------------------------------------------------------
THOROUGH = os.environ.get("HYPOTHESIS_PROFILE") == "thorough"
# No shrinking: every example is a batch of scapy packets, and shrinking one costs minutes. A
# failure message lists the wrong packets themselves (hex, scapy layers, fields) instead.
COMMON = dict(deadline=None, phases=[Phase.explicit, Phase.reuse, Phase.generate],
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def failures_report(failures, total, what):
    """One entry per packet (its first wrong record), at most five packets."""
    by_packet = {}
    for key, text in failures:
        by_packet.setdefault(key, [0, text])[0] += 1
    lines = [f"({count} wrong record(s) for this packet) {text}" for count, text in list(by_packet.values())[:5]]
    return f"{len(by_packet)} of {total} packets: {what}:\n" + "\n".join(lines)


def scapy_round_trips(candidate: Sample) -> bool:
    """Expected values come from scapy's dissection, which is only trustworthy where scapy
    rebuilds the very bytes it dissected; a few frames with inconsistent lengths it does not
    (it moves padding), and those are left out rather than compared against a wrong reading."""
    return bytes(dissect(candidate.frame, candidate.link_type)) == candidate.frame


dissectable_sample = sample().filter(scapy_round_trips)


@settings(max_examples=1000 if THOROUGH else 100, **COMMON)
@given(st.lists(dissectable_sample, min_size=20, max_size=40))
def test_whole_packets_match_scapy(samples):
    expected = [expectation(s.frame, s.link_type) for s in samples]
    rows = parse_frames([s.wire for s in samples], [len(s.wire) for s in samples], [s.link_type for s in samples])
    failures = []
    for k, (s, e, row) in enumerate(zip(samples, expected, rows)):
        errors = check_row(row, e, len(s.wire))
        if errors:
            failures.append((k, f"{describe(s, e)}\n    " + "\n    ".join(errors)))
    if failures:
        raise AssertionError(failures_report(failures, len(samples), "isolane differs from scapy"))


@settings(max_examples=1000 if THOROUGH else 150, **COMMON)
@given(st.lists(dissectable_sample, min_size=3, max_size=6))
def test_truncated_capture_at_every_byte(samples):
    """Capture length below wire length: fields reached are right, the rest empty, status
    TRUNCATED until every header isolane needs was captured, then as for the whole frame."""
    frames, wires, links, owners = [], [], [], []
    expected = [expectation(s.frame, s.link_type) for s in samples]
    for k, s in enumerate(samples):
        for cut in range(len(s.wire) + 1):
            frames.append(s.wire[:cut])
            wires.append(len(s.wire))
            links.append(s.link_type)
            owners.append((k, cut))
    rows = parse_frames(frames, wires, links)
    failures = []
    for (k, cut), row in zip(owners, rows):
        errors = check_row(row, expected[k], cut)
        if errors:
            note = f", captured {cut} of {len(samples[k].wire)} bytes"
            failures.append((k, f"{describe(samples[k], expected[k], note)}\n    " + "\n    ".join(errors)))
    if failures:
        raise AssertionError(failures_report(failures, len(samples), "wrong truncated records"))


@settings(max_examples=1000 if THOROUGH else 120, **COMMON)
@given(st.lists(dissectable_sample, min_size=3, max_size=6), st.randoms(use_true_random=False))
def test_short_frames_and_short_ip_lengths_are_malformed(samples, rnd):
    """A frame that really ends early (captured whole: wire length = its length), or an IPv4
    total length / IPv6 payload length that ends before the headers do: the headers inside are
    what they are, and the status is MALFORMED (more capture would not help), never TRUNCATED."""
    frames, wires, links, owners = [], [], [], []
    expected = [expectation(s.frame, s.link_type) for s in samples]
    for k, (s, e) in enumerate(zip(samples, expected)):
        for cut in range(len(s.wire)):
            frames.append(s.wire[:cut])
            wires.append(cut)
            links.append(s.link_type)
            owners.append((k, cut, f", a frame of only {cut} bytes", s.wire[:cut]))
        for at, shortest, declared, base in e.ip_lengths:
            values = list(range(shortest, declared))
            for value in rnd.sample(values, min(len(values), 12)):
                # The packet as built by scapy, with one IP packet's declared length lowered:
                # everything after its new end is outside that IP packet (and outside any tunnel
                # it carries), exactly as if the frame ended there, but the bytes stay.
                frame = s.frame[:at] + value.to_bytes(2, "big") + s.frame[at + 2:]
                frames.append(frame)
                wires.append(len(frame))
                links.append(s.link_type)
                owners.append((k, base + value, f", IP length at byte {at} lowered from {declared} to {value}", frame))
    rows = parse_frames(frames, wires, links)
    failures = []
    for (k, cut, note, frame), row, wire in zip(owners, rows, wires):
        errors = check_row(row, expected[k], cut, incomplete=Status.MALFORMED, wire_len=wire)
        if errors:
            failures.append((k, f"{describe(samples[k], expected[k], note, frame)}\n    " + "\n    ".join(errors)))
    if failures:
        raise AssertionError(failures_report(failures, len(samples), "wrong records for short frames or IP lengths"))


def test_expectation_reads_scapy_not_the_recipe():
    """The oracle itself, on a hand-made VXLAN-in-QinQ packet with known answers."""
    pkt = (Ether() / Dot1AD(vlan=100) / Dot1Q(vlan=200) / IP(src="10.0.0.1", dst="10.0.0.2", tos=0xB8)
           / UDP(sport=1234, dport=4789) / VXLAN(flags=0x08, vni=0xABCDE) / Ether() / Dot1Q(vlan=7)
           / IPv6(src="2001:db8::1", dst="2001:db8::2", tc=0x28) / IPv6ExtHdrHopByHop()
           / IPv6ExtHdrFragment(offset=0, m=1, nh=6) / TCP(sport=80, dport=443))
    frame = bytes(pkt)
    e = expectation(frame)
    final = {name: e.allowed(name, ALWAYS) for name in DEFAULTS}
    assert final["vlan"] == {100} and final["vni"] == {0xABCDE} and final["tunnel"] == {int(Tunnel.VXLAN)}
    assert final["outer_src"] == {mapped("10.0.0.1")} and final["src"] == {mapped("2001:db8::1")}
    assert final["proto"] == {6} and final["src_port"] == {80} and final["dst_port"] == {443}
    assert final["dscp"] == {0x28 >> 2} and final["ip_version"] == {6} and final["is_fragment"] == {True}
    tcp = len(frame) - 20  # the TCP header (no options, no payload) ends the frame
    assert e.allowed_status(len(frame)) == {Status.OK}
    assert e.allowed_status(tcp + 3) == {Status.TRUNCATED}  # destination port not captured
    assert e.allowed_status(tcp + 4) == {Status.TRUNCATED, Status.OK}  # ports captured, rest of TCP not
    assert e.allowed("proto", tcp - 8) == {0}  # the fragment header (its next header) not captured
    assert e.allowed("proto", tcp - 7) == {0, 6}
    assert e.allowed("src", tcp - 8) == {ZERO16, mapped("2001:db8::1")}  # its header chain not whole
    assert e.allowed("src", tcp) == {mapped("2001:db8::1")}
    udp = 14 + 8 + 20
    assert e.allowed("src", udp + 3) == {ZERO16, mapped("10.0.0.1")}  # UDP destination port not read yet
    assert e.allowed("src", udp + 8) == {ZERO16}  # a tunnel, its tenant not reached
    rows = parse_frames([frame], [len(frame)], [ETHERNET])
    assert check_row(rows[0], e, len(frame)) == []
