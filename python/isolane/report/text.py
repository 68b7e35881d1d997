"""Numbers for people, as the tables print them: three significant digits and a unit."""

from __future__ import annotations

from collections.abc import Container, Sequence


def rate_text(bps: float) -> str:
    """A rate in bits per second (``1.23 Gbps``)."""
    for scale, unit in ((10**12, "Tbps"), (10**9, "Gbps"), (10**6, "Mbps"), (10**3, "kbps")):
        if bps >= scale:
            return f"{bps / scale:.3g} {unit}"
    return f"{bps:.3g} bps" if bps else "0"


def size_text(size: int) -> str:
    """A size in bytes (``1.5 MB``)."""
    for scale, unit in ((10**9, "GB"), (10**6, "MB"), (10**3, "KB")):
        if size >= scale:
            return f"{size / scale:.3g} {unit}"
    return f"{size} B"


def time_text(ns: int | None) -> str:
    """A duration in nanoseconds (``4.2 ms``); ``-`` for none."""
    if ns is None:
        return "-"
    for scale, unit in ((10**9, "s"), (10**6, "ms"), (10**3, "us")):
        if ns >= scale:
            return f"{ns / scale:.3g} {unit}"
    return f"{ns} ns"


def align(rows: Sequence[Sequence[str]], right: Container[int]) -> list[str]:
    """``rows`` of cells as lines of columns two spaces apart, the columns in ``right``
    aligned right."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = []
    for row in rows:
        cells = [cell.rjust(width) if i in right else cell.ljust(width) for i, (cell, width) in enumerate(zip(row, widths))]
        lines.append("  ".join(cells).rstrip())
    return lines
