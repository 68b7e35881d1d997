"""Capture files built byte by byte for tests: classic pcap and pcapng, good and corrupt."""

from __future__ import annotations

import struct
from collections.abc import Iterable, Sequence

Record = tuple[int, int, bytes, int]  # seconds, fraction (us or ns), captured bytes, wire length


def pcap(records: Iterable[Record], *, link_type: int = 1, snaplen: int = 65535, nanos: bool = False, big_endian: bool = False) -> bytes:
    order = ">" if big_endian else "<"
    magic = 0xA1B23C4D if nanos else 0xA1B2C3D4
    out = bytearray(struct.pack(order + "IHHiIII", magic, 2, 4, 0, 0, snaplen, link_type))
    for seconds, fraction, data, wire in records:
        out += struct.pack(order + "IIII", seconds, fraction, len(data), wire) + data
    return bytes(out)


def block(block_type: int, body: bytes) -> bytes:
    """One little-endian pcapng block of any type, its body padded to 4 bytes."""
    body += b"\0" * (-len(body) % 4)
    length = 12 + len(body)
    return struct.pack("<II", block_type, length) + body + struct.pack("<I", length)


def pcapng(interfaces: Sequence[tuple[int, int | None]], packets: Iterable[tuple[int, int, bytes, int]]) -> bytes:
    """One section; ``interfaces`` are (link type, if_tsresol or None); ``packets`` are
    (interface, timestamp ticks, captured bytes, wire length)."""
    out = bytearray(block(0x0A0D0D0A, struct.pack("<IHHq", 0x1A2B3C4D, 1, 0, -1)))
    for link_type, tsresol in interfaces:
        options = b"" if tsresol is None else struct.pack("<HHB3x", 9, 1, tsresol) + struct.pack("<HH", 0, 0)
        out += block(1, struct.pack("<HHI", link_type, 0, 0) + options)
    for interface, ticks, data, wire in packets:
        out += block(6, struct.pack("<IIIII", interface, ticks >> 32, ticks & 0xFFFFFFFF, len(data), wire) + data)
    return bytes(out)
