"""The generated packets: a table of what each packet is (:data:`PACKET_DTYPE`, one row a
packet, made by :mod:`isolane.gen.workloads`) turned into a nanosecond pcap, the per-packet
header fields written with numpy over the templates of :mod:`isolane.gen.templates`."""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import numpy.typing as npt

from isolane._core import PacketBatch
from isolane.gen import pcapwriter
from isolane.gen.templates import BFD, BTH, INNER_ETH, INNER_IP, KINDS, OUTER_IP, OUTER_OVERHEAD, OUTER_UDP, ROCE, TCP, TRANSPORT, VXLAN, templates

PACKET_DTYPE = np.dtype(
    [
        ("time_ns", "<i8"),
        ("vni", "<u4"),
        ("kind", "u1"),  # templates.ROCE, TCP or BFD
        ("dscp", "u1"),
        ("outer_src", "<u4"),  # tunnel endpoints (IPv4 as integers)
        ("outer_dst", "<u4"),
        ("src", "<u4"),  # the tenant's own packet
        ("dst", "<u4"),
        ("src_port", "<u2"),
        ("dst_port", "<u2"),
        ("frame_len", "<u4"),  # the tenant's frame, Ethernet header to the end of the payload
        ("seq", "<u4"),  # RoCE: PSN (24 bits); TCP: sequence number; BFD: my discriminator
        ("ack", "<u4"),  # TCP: acknowledgement number
        ("qpn", "<u4"),  # RoCE: destination QP (24 bits)
        ("opcode", "u1"),  # RoCE: BTH opcode; TCP: flags
    ]
)
"""One generated packet. ``frame_len`` + 50 is its length on the wire (without FCS)."""

DEFAULT_SNAPLEN = 128
"""Bytes of each packet written by default: every header, the start of the payload (as a
packet broker slices a capture); the wire length is kept."""

_IPV4_PROTOCOL = {ROCE: 17, TCP: 6, BFD: 17}
_ECN = {ROCE: 0b10, TCP: 0, BFD: 0}
"""ECT(0) on RoCEv2, whose congestion control (DCQCN) reacts to ECN marks; copied to the outer
header as RFC 6040 asks of a tunnel."""


def write_capture(path: str | os.PathLike[str], packets: npt.NDArray[np.void], snaplen: int = DEFAULT_SNAPLEN) -> None:
    """Write ``packets`` (sorted by time) as a nanosecond pcap, each cut to ``snaplen`` bytes
    (0: whole packets, their payload zero)."""
    pcapwriter.write(path, capture_bytes(packets, snaplen))


def capture_bytes(packets: npt.NDArray[np.void], snaplen: int = DEFAULT_SNAPLEN) -> npt.NDArray[np.uint8]:
    """The pcap file of :func:`write_capture`, in memory."""
    return _capture(packets, snaplen)[0]


def packet_batch(packets: npt.NDArray[np.void], snaplen: int = DEFAULT_SNAPLEN) -> PacketBatch:
    """The packets as an :class:`isolane.PacketBatch` over the capture's bytes (not written)."""
    buffer, offsets, captured, wire = _capture(packets, snaplen)
    return PacketBatch.from_arrays(buffer, offsets.astype(np.uint64), captured, packets["time_ns"].astype(np.int64), wire_lengths=wire)


def _capture(
    packets: npt.NDArray[np.void], snaplen: int
) -> tuple[npt.NDArray[np.uint8], npt.NDArray[np.int64], npt.NDArray[np.uint32], npt.NDArray[np.uint32]]:
    """The pcap file's bytes, where each packet starts in them, its captured and wire lengths."""
    wire = (packets["frame_len"] + OUTER_OVERHEAD).astype(np.uint32)
    limit = snaplen or int(wire.max(initial=0))
    captured = np.minimum(wire, limit).astype(np.uint32)
    headers = templates()
    needed = max(t.length for t in headers.values())
    if limit < needed:
        raise ValueError(f"snaplen {snaplen} cuts the headers: at least {needed} bytes are needed")
    buffer, offsets = pcapwriter.layout(packets["time_ns"], captured, wire, limit)
    for kind in KINDS:
        rows = np.flatnonzero(packets["kind"] == kind)
        if len(rows):
            pcapwriter.scatter(buffer, offsets[rows], _headers(kind, packets[rows], wire[rows]))
    return buffer, offsets, captured, wire


def _headers(kind: int, packets: npt.NDArray[np.void], wire: npt.NDArray[np.uint32]) -> npt.NDArray[np.uint8]:
    """Every packet's headers of one kind: the template with the packet's fields written in."""
    out = np.tile(templates()[kind].header, (len(packets), 1))
    traffic_class = packets["dscp"].astype(np.uint32) << 2 | np.uint32(_ECN[kind])
    _outer(out, packets, wire, traffic_class)
    _inner_ip(out, packets, _IPV4_PROTOCOL[kind], traffic_class)
    put(out, TRANSPORT, packets["src_port"], 2)
    put(out, TRANSPORT + 2, packets["dst_port"], 2)
    if kind == ROCE:
        put(out, TRANSPORT + 4, packets["frame_len"] - (TRANSPORT - INNER_ETH), 2)
        put(out, BTH, packets["opcode"], 1)
        put(out, BTH + 5, packets["qpn"], 3)
        put(out, BTH + 9, packets["seq"], 3)
    elif kind == TCP:
        _tcp(out, packets)
    else:
        put(out, TRANSPORT + 4, packets["frame_len"] - (TRANSPORT - INNER_ETH), 2)
        put(out, TRANSPORT + 8 + 4, packets["seq"], 4)  # BFD: my discriminator
        put(out, TRANSPORT + 8 + 8, packets["seq"] ^ 0xFFFF, 4)  # your discriminator: the peer's
        _udp_checksum(out, packets)
    return out


def _outer(out: npt.NDArray[np.uint8], packets: npt.NDArray[np.void], wire: npt.NDArray[np.uint32], traffic_class: npt.NDArray[np.integer[Any]]) -> None:
    """Outer IPv4 (DSCP and ECN copied from the tenant's packet, an IP id per packet), UDP
    (source port from the inner flow's hash, RFC 7348 section 5) and VXLAN (the tenant's VNI)."""
    put(out, OUTER_IP + 1, traffic_class, 1)
    put(out, OUTER_IP + 2, wire - OUTER_IP, 2)
    put(out, OUTER_IP + 4, flow_hash(packets) ^ (packets["seq"] & 0xFFFF), 2)
    put(out, OUTER_IP + 12, packets["outer_src"], 4)
    put(out, OUTER_IP + 16, packets["outer_dst"], 4)
    put(out, OUTER_IP + 10, ipv4_checksum(out[:, OUTER_IP : OUTER_IP + 20]), 2)
    put(out, OUTER_UDP, 49152 + flow_hash(packets) % 16384, 2)
    put(out, OUTER_UDP + 4, wire - OUTER_UDP, 2)
    put(out, VXLAN + 4, packets["vni"], 3)


def _inner_ip(out: npt.NDArray[np.uint8], packets: npt.NDArray[np.void], protocol: int, traffic_class: npt.NDArray[np.integer[Any]]) -> None:
    put(out, INNER_ETH + 3, packets["dst"], 3)  # locally administered MACs: 02:00:00 and the host's address
    put(out, INNER_ETH + 9, packets["src"], 3)
    put(out, INNER_IP + 1, traffic_class, 1)
    put(out, INNER_IP + 2, packets["frame_len"] - (INNER_IP - INNER_ETH), 2)
    put(out, INNER_IP + 4, packets["seq"] & 0xFFFF, 2)
    out[:, INNER_IP + 9] = protocol
    put(out, INNER_IP + 12, packets["src"], 4)
    put(out, INNER_IP + 16, packets["dst"], 4)
    put(out, INNER_IP + 10, ipv4_checksum(out[:, INNER_IP : INNER_IP + 20]), 2)


def _tcp(out: npt.NDArray[np.uint8], packets: npt.NDArray[np.void]) -> None:
    """Sequence and acknowledgement numbers, flags, and the checksum: the payload is zeros, so
    the pseudo-header and the TCP header are all it sums."""
    put(out, TRANSPORT + 4, packets["seq"], 4)
    put(out, TRANSPORT + 8, packets["ack"], 4)
    put(out, TRANSPORT + 13, packets["opcode"], 1)
    segment = packets["frame_len"].astype(np.uint64) - (TRANSPORT - INNER_ETH)
    out[:, TRANSPORT + 16 : TRANSPORT + 18] = 0
    put(out, TRANSPORT + 16, _transport_checksum(out[:, TRANSPORT : TRANSPORT + 20], packets, 6, segment), 2)


def _udp_checksum(out: npt.NDArray[np.uint8], packets: npt.NDArray[np.void]) -> None:
    """A whole UDP datagram's checksum (BFD: the template holds all of it)."""
    length = out.shape[1] - TRANSPORT
    out[:, TRANSPORT + 6 : TRANSPORT + 8] = 0
    checksum = _transport_checksum(out[:, TRANSPORT:], packets, 17, np.full(len(packets), length, np.uint64))
    put(out, TRANSPORT + 6, np.where(checksum == 0, 0xFFFF, checksum), 2)  # 0 would mean "no checksum"


def _transport_checksum(header: npt.NDArray[np.uint8], packets: npt.NDArray[np.void], protocol: int, length: npt.NDArray[np.uint64]) -> npt.NDArray[np.uint32]:
    """RFC 793/768 checksum: the pseudo-header (addresses, protocol, length) and ``header``."""
    src, dst = packets["src"].astype(np.uint64), packets["dst"].astype(np.uint64)
    pseudo = (src >> 16) + (src & 0xFFFF) + (dst >> 16) + (dst & 0xFFFF) + protocol + length
    return internet_checksum(header, pseudo)


def ipv4_checksum(header: npt.NDArray[np.uint8]) -> npt.NDArray[np.uint32]:
    """The IPv4 header checksum of each row (20 bytes), its own field taken as zero."""
    zeroed = header.copy()
    zeroed[:, 10:12] = 0
    return internet_checksum(zeroed)


def internet_checksum(data: npt.NDArray[np.uint8], extra: npt.NDArray[np.uint64] | int = 0) -> npt.NDArray[np.uint32]:
    """RFC 1071: the one's complement of the one's-complement sum of each row's 16-bit words
    (rows of even width, the checksum field zero) plus ``extra``."""
    words = (data[:, 0::2].astype(np.uint64) << 8) | data[:, 1::2]
    total = words.sum(axis=1, dtype=np.uint64) + extra
    while (total >> 16).any():
        total = (total & 0xFFFF) + (total >> 16)
    return (~total.astype(np.uint32)) & 0xFFFF


def flow_hash(packets: npt.NDArray[np.void]) -> npt.NDArray[np.uint32]:
    """A 32-bit hash of the tenant packet's 5-tuple (the same for every packet of a flow)."""
    key = packets["src"].astype(np.uint64) * 0x9E3779B1
    key ^= packets["dst"].astype(np.uint64) * 0x85EBCA77
    key ^= (packets["src_port"].astype(np.uint64) << 16 | packets["dst_port"]) * 0xC2B2AE3D
    key ^= packets["kind"].astype(np.uint64) * 0x27D4EB2F
    key ^= key >> 29
    return ((key * 0x165667B1) >> 16 & 0xFFFFFFFF).astype(np.uint32)


def put(out: npt.NDArray[np.uint8], offset: int, values: npt.NDArray[np.integer] | int, width: int) -> None:
    """Write ``values`` big-endian, ``width`` bytes (at most 4) at column ``offset`` of every row."""
    big_endian = np.broadcast_to(np.asarray(values, dtype=np.uint64).astype(">u4"), (len(out),))
    out[:, offset : offset + width] = big_endian.view(np.uint8).reshape(len(out), 4)[:, 4 - width :]
