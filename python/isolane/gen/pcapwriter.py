"""Nanosecond pcap files written from numpy arrays in one go, no Python per packet.

:func:`layout` makes the whole file in memory, the file header and every record header
filled, each packet's bytes zero at its offset; the caller writes the packets' bytes there
(:mod:`isolane.gen.frames`), then :func:`write` saves the buffer.
"""

from __future__ import annotations

import os

import numpy as np
import numpy.typing as npt

Bytes = npt.NDArray[np.uint8]
Offsets = npt.NDArray[np.int64]
NANOSECOND_MAGIC = 0xA1B23C4D
LINKTYPE_ETHERNET = 1
FILE_HEADER = 24
RECORD_HEADER = 16


def layout(
    timestamps_ns: npt.NDArray[np.int64], captured: npt.NDArray[np.uint32], wire: npt.NDArray[np.uint32], snaplen: int
) -> tuple[npt.NDArray[np.uint8], npt.NDArray[np.int64]]:
    """A pcap file's bytes for these packets (their bytes zero) and where each packet's bytes
    start in it."""
    count = len(timestamps_ns)
    record_sizes = RECORD_HEADER + captured.astype(np.int64)
    starts = FILE_HEADER + np.concatenate(([0], np.cumsum(record_sizes)[:-1])) if count else np.zeros(0, np.int64)
    total = FILE_HEADER + int(record_sizes.sum())
    buffer = np.zeros(total, dtype=np.uint8)
    # version 2.4 as two little-endian u16s, then time zone, accuracy, snaplen, link type
    header = np.array([NANOSECOND_MAGIC, 2 | (4 << 16), 0, 0, snaplen, LINKTYPE_ETHERNET], dtype="<u4")
    buffer[:FILE_HEADER] = header.view(np.uint8)
    records = np.empty((count, 4), dtype="<u4")
    records[:, 0] = timestamps_ns // 1_000_000_000
    records[:, 1] = timestamps_ns % 1_000_000_000
    records[:, 2] = captured
    records[:, 3] = wire
    scatter(buffer, starts, records.view(np.uint8).reshape(count, RECORD_HEADER))
    return buffer, starts + RECORD_HEADER


def scatter(buffer: npt.NDArray[np.uint8], offsets: npt.NDArray[np.int64], rows: npt.NDArray[np.uint8], chunk: int = 1 << 16) -> None:
    """Write row i of ``rows`` (all one width) at ``buffer[offsets[i]:]``, a chunk of rows at a
    time so that the index arrays stay small."""
    columns = np.arange(rows.shape[1], dtype=np.int64)
    for first in range(0, len(offsets), chunk):
        part = slice(first, first + chunk)
        buffer[offsets[part, None] + columns] = rows[part]


def copy_packets(buffer: Bytes, offsets: Offsets, source: Bytes, source_offsets: Offsets, lengths: npt.NDArray[np.uint32]) -> None:
    """Copy packets of any lengths from ``source`` (e.g. a :class:`~isolane.PacketBatch`'s
    data) to their places in ``buffer``."""
    lengths = lengths.astype(np.int64)
    ends = np.cumsum(lengths)
    within = np.arange(int(ends[-1]) if len(ends) else 0, dtype=np.int64) - np.repeat(ends - lengths, lengths)
    buffer[np.repeat(offsets, lengths) + within] = source[np.repeat(source_offsets.astype(np.int64), lengths) + within]


def write(path: str | os.PathLike[str], buffer: npt.NDArray[np.uint8]) -> None:
    with open(path, "wb") as out:
        out.write(buffer.data)
