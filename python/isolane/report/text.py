"""Numbers for people as the terminal table prints them: three significant digits and a unit,
in ASCII and the policy's units (``Gbps``, ``us``); the pictures and the page use
:mod:`isolane.report.units`' typographic ones."""

from __future__ import annotations

from collections.abc import Container, Sequence

from isolane.report.units import SIZE_UNITS, Units, human

TERMINAL_RATES: Units = ((10**12, "Tbps"), (10**9, "Gbps"), (10**6, "Mbps"), (10**3, "kbps"), (1, "bps"))
TERMINAL_TIMES: Units = ((10**9, "s"), (10**6, "ms"), (10**3, "us"), (1, "ns"))


def rate_text(bps: float) -> str:
    """A rate in bits per second (``1.23 Gbps``), with the policy's units."""
    return human(bps, TERMINAL_RATES) if bps else "0"


def size_text(size: int) -> str:
    """A size in bytes (``1.5 MB``)."""
    return human(size, SIZE_UNITS).replace("kB", "KB")


def time_text(ns: int | None) -> str:
    """A duration in nanoseconds (``4.2 ms``), ASCII; ``-`` for none."""
    return "-" if ns is None else human(ns, TERMINAL_TIMES)


def align(rows: Sequence[Sequence[str]], right: Container[int]) -> list[str]:
    """``rows`` of cells as lines of columns two spaces apart, the columns in ``right``
    aligned right."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = []
    for row in rows:
        cells = [cell.rjust(width) if i in right else cell.ljust(width) for i, (cell, width) in enumerate(zip(row, widths))]
        lines.append("  ".join(cells).rstrip())
    return lines
