"""Numbers of a report for people: a unit chosen from the value (or from an axis's range), three
significant digits."""

from __future__ import annotations

from collections.abc import Sequence

Units = Sequence[tuple[int, str]]
TIME_UNITS: Units = ((10**9, "s"), (10**6, "ms"), (10**3, "µs"), (1, "ns"))
RATE_UNITS: Units = ((10**12, "Tbit/s"), (10**9, "Gbit/s"), (10**6, "Mbit/s"), (10**3, "kbit/s"), (1, "bit/s"))
SIZE_UNITS: Units = ((10**9, "GB"), (10**6, "MB"), (10**3, "kB"), (1, "B"))
MISSING = "–"


def unit_for(value: float, units: Units) -> tuple[int, str]:
    """The largest unit not above ``value`` (the smallest for 0 and less)."""
    return next(((scale, name) for scale, name in units if value >= scale), units[-1])


def human(value: float | None, units: Units) -> str:
    """``value`` in the unit :func:`unit_for` picks, to three significant digits; a dash for None."""
    if value is None:
        return MISSING
    scale, name = unit_for(abs(value), units)
    return f"{value / scale:.3g} {name}"


def duration_text(ns: float | None) -> str:
    return human(ns, TIME_UNITS)


def rate_text(bps: float | None) -> str:
    return human(bps, RATE_UNITS)


def size_text(size: float | None) -> str:
    return human(size, SIZE_UNITS)
