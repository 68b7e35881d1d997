"""Reading a ``microburst`` setting (``docs/bursts.md``): its window, its threshold as a rate or
as a share of the scope's rate, and its queue view."""

from __future__ import annotations

import re
from fractions import Fraction
from typing import TYPE_CHECKING, Any

from isolane.policy.constants import _MICROBURST_KEYS, _QUEUE_VIEW_KEYS
from isolane.policy.errors import _at
from isolane.policy.model import Microburst
from isolane.policy.units import format_rate, parse_duration, parse_rate, read_number

if TYPE_CHECKING:
    from isolane.policy.validate_shapes import _Shapes

MIN_WINDOW_NS = 1_000
"""The shortest microburst window (1 us) ..."""
MAX_WINDOW_NS = 10_000_000
"""... and the longest (10 ms)."""

_PERCENT_RE = re.compile(r"^([0-9]+(?:\.[0-9]+)?) ?%$")


def read_microburst(ck: _Shapes, value: Any, path: str, base_bps: int | None, base: str) -> Microburst | None:
    """The setting at ``path``; a threshold written as a percentage is a share of ``base_bps``
    (``base`` names it in errors: ``tenants[0].rate``), which may be unset."""
    data = ck.mapping(value, path, _MICROBURST_KEYS, required=("window", "threshold"))
    if data is None:
        return None
    window = _window(ck, data["window"], _at(path, "window")) if "window" in data else None
    threshold = _threshold(ck, data["threshold"], _at(path, "threshold"), base_bps, base) if "threshold" in data else None
    queue = _queue(ck, data["queue"], _at(path, "queue")) if "queue" in data else (None, None)
    if window is None or threshold is None or (queue[0] is None and "queue" in data):
        return None
    if queue[0] is not None and ck.egress is None and base != "port.rate":
        ck.error(_at(path, "queue"), "the queue view watches the port's queues: the policy has no port")
        return None
    return Microburst(window, threshold[0], queue[0], queue[1], threshold[1])


def _window(ck: _Shapes, value: Any, path: str) -> int | None:
    window = ck.quantity(value, path, parse_duration)
    if window is not None and not MIN_WINDOW_NS <= window <= MAX_WINDOW_NS:
        ck.error(path, f"{value!r} is not within 1us to 10ms")
        return None
    return window


def _threshold(ck: _Shapes, value: Any, path: str, base_bps: int | None, base: str) -> tuple[int, Fraction | None] | None:
    """Bits per second, and the percentage it was written as (if it was)."""
    match = _PERCENT_RE.fullmatch(value) if isinstance(value, str) else None
    if match is None:
        bits = ck.quantity(value, path, parse_rate)
        return None if bits is None or not ck.within_largest_rate(bits, path, repr(value)) else (bits, None)
    try:
        percent = read_number(match.group(1), value)
    except ValueError as err:
        ck.error(path, str(err))
        return None
    if base_bps is None:
        ck.error(path, f"{value!r} is a share of {base}, which is not set: set it, or give a rate such as '10Gbps'")
        return None
    bits = int(base_bps * percent / 100)
    if bits <= 0:
        ck.error(path, f"{value!r} of {format_rate(base_bps)} is under 1 bit/s: it must be more than zero")
        return None
    if not ck.within_largest_rate(bits, path, f"{value!r} of {format_rate(base_bps)}"):
        return None
    return bits, percent


def _queue(ck: _Shapes, value: Any, path: str) -> tuple[int | None, int | None]:
    """The rise and fall thresholds: a size is the rise, the fall half of it."""
    if not isinstance(value, dict):
        rise = ck.queue_size(value, path)
        return (None, None) if rise is None else (rise, rise // 2)
    data = ck.mapping(value, path, _QUEUE_VIEW_KEYS, required=("rise",))
    if data is None or "rise" not in data:
        return None, None
    rise = ck.queue_size(data["rise"], _at(path, "rise"))
    fall = ck.queue_size(data["fall"], _at(path, "fall"), zero_ok=True) if "fall" in data else (None if rise is None else rise // 2)
    if rise is None or fall is None:
        return None, None
    if fall > rise:
        ck.error(_at(path, "fall"), f"{data['fall']!r} is above the rise {data['rise']!r}: the queue must fall below where it rose")
        return None, None
    return rise, fall
