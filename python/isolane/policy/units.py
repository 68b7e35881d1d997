"""Units: rates, sizes and durations as text (``'40Gbps'``, ``'256KiB'``, ``'10us'``), read
exactly and written back; the default burst."""

from __future__ import annotations

import difflib
import functools
import re
from collections.abc import Sequence
from fractions import Fraction

from isolane.policy.constants import DEFAULT_LARGEST_FRAME, MAX_BURST_BYTES
from isolane.policy.errors import _describe, _or_list, _shown

_NUM = r"[0-9]+(?:\.[0-9]+)?"
_UNIT_PREFIXES: dict[str, int] = {
    "": 1,
    "k": 10**3,
    "K": 10**3,
    "M": 10**6,
    "G": 10**9,
    "T": 10**12,
    "Ki": 2**10,
    "Mi": 2**20,
    "Gi": 2**30,
    "Ti": 2**40,
}
_PFX = "(Ki|Mi|Gi|Ti|k|K|M|G|T)?"
_RATE_UNITS = {"bps": 1, "bit/s": 1, "B/s": 8}  # in bits per second
_SIZE_UNITS = {"B": 8, "bit": 1}  # in bits (a size must come out as whole bytes)
_TIME_UNITS = {"ns": 1, "us": 10**3, "\u00b5s": 10**3, "\u03bcs": 10**3, "ms": 10**6, "s": 10**9}
RATE_PATTERN = rf"^({_NUM}) ?{_PFX}(bps|bit/s|B/s)$"
SIZE_PATTERN = rf"^({_NUM}) ?{_PFX}(B|bit)$"
DURATION_PATTERN = rf"^({_NUM}) ?(ns|us|\u00b5s|\u03bcs|ms|s)$"
_RATE_RE = re.compile(RATE_PATTERN)
_SIZE_RE = re.compile(SIZE_PATTERN)
_DURATION_RE = re.compile(DURATION_PATTERN)
_ALL_RATE_UNITS = [p + u for u in _RATE_UNITS for p in _UNIT_PREFIXES]
_ALL_SIZE_UNITS = [p + u for u in _SIZE_UNITS for p in _UNIT_PREFIXES]
_SPLIT_UNIT_RE = re.compile(rf"^({_NUM}) ?(.*)$")


def _unit_problem(text: str, kind: str, units: list[str], example: str) -> str:
    split = _SPLIT_UNIT_RE.match(text.strip())
    if not split:
        return f"{text!r} is not a {kind}: write a number and a unit, e.g. {example!r}"
    unit = split.group(2)
    if not unit:
        return f"{text!r} has no unit: write e.g. {example!r}"
    others = {"rate": _ALL_RATE_UNITS, "size": _ALL_SIZE_UNITS, "duration": list(_TIME_UNITS)}
    for other, other_units in others.items():
        if other != kind and unit in other_units:
            return f"{text!r} is a {other}, not a {kind}: write e.g. {example!r}"
    # Spellings that leave bits or bytes open ('Gb/s', 'GBps', 'Mb') get both readings.
    close: list[str] = []
    if unit.endswith("b/s"):
        close = [unit[:-3] + "bps", unit[:-3] + "bit/s", unit[:-3] + "B/s"]
    elif unit.endswith("Bps"):
        close = [unit[:-3] + "B/s", unit[:-3] + "bps"]
    elif unit.endswith("b"):
        close = [unit[:-1] + "B", unit[:-1] + "bit"]
    close = [u for u in close if u in units]
    close += [u for u in units if u.lower() == unit.lower() and u not in close]
    close = close or difflib.get_close_matches(unit, units, n=3, cutoff=0.5)
    hint = f"; did you mean {_or_list(close)}?" if close else f" (e.g. {example!r})"
    return f"{text!r}: unknown {kind} unit {unit!r}{hint}"


def read_number(digits: str, value: object) -> Fraction:
    """The number written ``digits`` (a point may part them) in the setting ``value``; a
    ValueError if it is longer than any setting needs (Python's int() refuses 4300 digits)."""
    count = len(digits.replace(".", ""))
    if count > MOST_DIGITS:
        raise ValueError(f"{_describe(value)} has a number of {count} digits: no setting takes one that long")
    return Fraction(digits)


MOST_DIGITS = 100


def _parse_quantity(value: object, pattern: re.Pattern[str], kind: str, example: str) -> Fraction:
    if type(value) is str:
        return _parse_text(value, pattern, kind, example)
    if isinstance(value, bool) or not isinstance(value, str):
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            raise ValueError(f"{_shown(value)} has no unit: write it as a string with its unit, e.g. {example!r}")
        raise ValueError(f"expected a {kind} like {example!r}, got {_describe(value)}")
    return _parse_text(value, pattern, kind, example)


@functools.lru_cache(maxsize=256)
def _parse_text(value: str, pattern: re.Pattern[str], kind: str, example: str) -> Fraction:
    """A quantity from its text; kept, since a policy writes the same few quantities over and
    over (10,000 tenants, a handful of rates). A few hundred are enough for that; more would
    hold distinct rates (a tenant each) that no other tenant reads again."""
    match = pattern.fullmatch(value)
    if not match:
        units = {"rate": _ALL_RATE_UNITS, "size": _ALL_SIZE_UNITS}.get(kind, list(_TIME_UNITS))
        raise ValueError(_unit_problem(value, kind, units, example))
    groups = match.groups()
    number = read_number(groups[0], value)
    if kind == "rate":
        return number * _UNIT_PREFIXES[groups[1] or ""] * _RATE_UNITS[groups[2]]
    if kind == "size":
        return number * _UNIT_PREFIXES[groups[1] or ""] * _SIZE_UNITS[groups[2]]
    return number * _TIME_UNITS[groups[1]]


def parse_rate(value: object) -> int:
    """A rate as a whole number of **bits** per second: ``'40Gbps'`` -> 40_000_000_000,
    ``'5GB/s'`` (bytes) -> 40_000_000_000, ``'1Kibit/s'`` is not a unit but ``'1Kibps'`` -> 1024.

    Units: ``bps`` or ``bit/s`` (bits), ``B/s`` (bytes), each with an optional prefix ``k``/``K``,
    ``M``, ``G``, ``T`` (powers of 1000) or ``Ki``, ``Mi``, ``Gi``, ``Ti`` (powers of 1024). One
    space may separate number and unit. Raises ``ValueError`` saying what is wrong.
    """
    return _rate_of_text(value) if type(value) is str else _rate(value)


def _rate(value: object) -> int:
    bits = _parse_quantity(value, _RATE_RE, "rate", "40Gbps")
    if bits.denominator != 1:
        raise ValueError(f"{value!r} is not a whole number of bits per second")
    return int(bits)


@functools.lru_cache(maxsize=256)
def _rate_of_text(value: str) -> int:
    """The same, kept: tenants that write the same rate then hold one number, not one each
    (a tenant of a contract of its own keeps its numbers for as long as the policy lives)."""
    return _rate(value)


def parse_size(value: object) -> int:
    """A size as a whole number of **bytes**: ``'256KiB'`` -> 262_144, ``'1500B'`` -> 1500,
    ``'64kB'`` -> 64_000, ``'8Mbit'`` (bits) -> 1_000_000.

    Units: ``B`` (bytes) or ``bit`` (bits; the total must be whole bytes), with the prefixes of
    :func:`parse_rate`. Raises ``ValueError`` saying what is wrong.
    """
    bits = _parse_quantity(value, _SIZE_RE, "size", "256KiB")
    if bits.denominator != 1 or bits.numerator % 8:
        raise ValueError(f"{value!r} is not a whole number of bytes")
    return int(bits) // 8


def parse_duration(value: object) -> int:
    """A duration as a whole number of **nanoseconds**: ``'10us'`` -> 10_000, ``'1.5ms'`` ->
    1_500_000. Units: ``ns``, ``us`` (also ``µs``), ``ms``, ``s``."""
    ns = _parse_quantity(value, _DURATION_RE, "duration", "10us")
    if ns.denominator != 1:
        raise ValueError(f"{value!r} is not a whole number of nanoseconds")
    return int(ns)


def _format(amount: int, units: Sequence[tuple[str, int]]) -> str:
    if amount == 0:
        return f"0{units[-1][0]}"
    best: tuple[int, int, str] | None = None
    for rank, (unit, scale) in enumerate(units):
        if amount % scale == 0:
            candidate = (amount // scale, rank, unit)
            if best is None or candidate < best:
                best = candidate
    assert best is not None  # the last unit has scale 1
    return f"{best[0]}{best[2]}"


def format_rate(bits_per_second: int) -> str:
    """The canonical text of a rate in bits per second (``40_000_000_000`` -> ``'40Gbps'``);
    :func:`parse_rate` gives the number back exactly."""
    return _format(bits_per_second, [("Tbps", 10**12), ("Gbps", 10**9), ("Mbps", 10**6), ("kbps", 10**3), ("bps", 1)])


def format_size(size_bytes: int) -> str:
    """The canonical text of a size in bytes (``262_144`` -> ``'256KiB'``, ``1_000_000`` ->
    ``'1MB'``); :func:`parse_size` gives the number back exactly."""
    units = [("TiB", 2**40), ("TB", 10**12), ("GiB", 2**30), ("GB", 10**9), ("MiB", 2**20), ("MB", 10**6)]
    return _format(size_bytes, units + [("KiB", 2**10), ("kB", 10**3), ("B", 1)])


def format_duration(nanoseconds: int) -> str:
    """The canonical text of a duration in nanoseconds (``10_000`` -> ``'10us'``)."""
    return _format(nanoseconds, [("s", 10**9), ("ms", 10**6), ("us", 10**3), ("ns", 1)])


def default_burst(rate_bytes_per_s: int, largest_frame: int = DEFAULT_LARGEST_FRAME) -> int:
    """The burst (bytes) a bucket gets when the policy names none: 1 ms of traffic at
    ``rate_bytes_per_s``, never below ``largest_frame`` and never above :data:`MAX_BURST_BYTES`
    (the Rust meter's ``default_burst``, to the byte).

    Too small a burst is the most common policer mistake: TCP sends a window at a time, a bucket
    that cannot absorb it drops the tail of every window, and the flow collapses far below the
    configured rate. About a millisecond at the rate covers a data-center window; a bucket smaller
    than a frame would never let that frame through.
    """
    return min(max(rate_bytes_per_s // 1000, largest_frame), MAX_BURST_BYTES)


def smallest_meter_burst(kind: str, largest_frame: int) -> int:
    """The smallest bucket of a ``kind`` meter that can pass a frame of ``largest_frame`` bytes:
    the frame itself for RFC 2697 and 2698, which let a packet empty a bucket ("Tc(t)-B >= 0"),
    a byte more for RFC 4115, which needs more tokens than bytes ("Tc(t)- B > 0")."""
    return largest_frame + 1 if kind == "rfc4115" else largest_frame


def bytes_in(duration_ns: int, rate_bytes_per_s: int) -> int:
    """The bytes that leave at the rate in the duration, rounded up: a shaper's queue when it
    names only ``max_delay``."""
    return -(-rate_bytes_per_s * duration_ns // _NS_PER_S)


def time_of(size_bytes: int, rate_bytes_per_s: int) -> int:
    """The nanoseconds the bytes take to leave at the rate, rounded up: a shaper's ``max_delay``
    when it names only ``queue``."""
    return -(-size_bytes * _NS_PER_S // rate_bytes_per_s)


_NS_PER_S = 10**9


def _span(size_bytes: int, rate_bytes_per_s: int) -> str:
    """How long ``size_bytes`` lasts at the rate, as short text (three significant digits)."""
    ns = size_bytes * 1e9 / rate_bytes_per_s
    for unit, scale in (("s", 1e9), ("ms", 1e6), ("us", 1e3)):
        if ns >= scale:
            return f"{ns / scale:.3g}{unit}"
    return f"{ns:.3g}ns"
