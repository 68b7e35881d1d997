"""Reading a policy's values by their shape: mappings, sequences, strings and names, integers,
choices, prefixes, and quantities with units (rates, sizes, durations) within the core's limits.
Every problem is collected with its place (:class:`_Shapes` is the base of the checker)."""

from __future__ import annotations

import unicodedata
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from isolane import _core
from isolane.policy.addresses import Network, _parse_prefix, _parse_rule_prefix
from isolane.policy.constants import (
    DEFAULT_LARGEST_FRAME,
    DSCP_NAMES,
    MAX_BURST_BYTES,
    MAX_DELAY_NS,
    MAX_QUEUE_BYTES,
    MAX_RATE_BYTES,
    MAX_WEIGHT,
    PORT_ALPHA_LOG2,
    SCHEMA_VERSION,
)
from isolane.policy.errors import _at, _describe, _did_you_mean, _int_text, _or_list
from isolane.policy.model import Port
from isolane.policy.units import (
    format_duration,
    format_size,
    parse_duration,
    parse_rate,
    parse_size,
)

if TYPE_CHECKING:
    pass


class _Bad:
    """Marks a value that was reported as an error."""


BAD = _Bad()

_LARGEST_QUEUE = f"the largest queue isolane handles, {format_size(MAX_QUEUE_BYTES)}"
_LONGEST_DELAY = f"the longest max_delay isolane handles, {format_duration(MAX_DELAY_NS)} (about {MAX_DELAY_NS // (365 * 86400 * 10**9)} years)"

#: A color_map key of more digits is no DSCP number (and int() refuses one of 4300 digits).
_LONGEST_DSCP_KEY = 9

#: Each alpha the port takes, and its log2 (an int and a float of the same value look up alike).
_ALPHA_LOG2 = {2.0**k: k for k in PORT_ALPHA_LOG2}


_KEY_SETS: dict[int, tuple[Sequence[str], frozenset[str]]] = {}


def _key_set(keys: Sequence[str]) -> frozenset[str]:
    """``keys`` as a set, made once for each sequence of keys (they are the module's constants)."""
    found = _KEY_SETS.get(id(keys))
    if found is None or found[0] is not keys:
        if len(_KEY_SETS) >= 64:  # a caller's own keys, not a constant: keep the table small
            _KEY_SETS.clear()
        found = _KEY_SETS[id(keys)] = (keys, frozenset(keys))
    return found[1]


class _Shapes:
    def __init__(self) -> None:
        self.errors: list[tuple[str, str]] = []
        self.warnings: list[str] = []
        # Policy-wide QoS settings, read before the tenants (defaults if they are bad).
        self.largest_frame = DEFAULT_LARGEST_FRAME
        self.egress: Port | None = None

    def error(self, path: str, message: str) -> None:
        self.errors.append((path, message))

    # -- shapes --------------------------------------------------------------------------------

    def mapping(self, value: Any, path: str, keys: Sequence[str], required: Sequence[str] = ()) -> dict[str, Any] | None:
        if value.__class__ is dict and value.keys() <= _key_set(keys) and all(key in value for key in required):
            return value  # the common case: nothing to report, nothing to leave out
        if not isinstance(value, Mapping):
            self.error(path, f"expected a mapping, got {_describe(value)}")
            return None
        out: dict[str, Any] = {}
        for key, item in value.items():
            if not isinstance(key, str):
                self.error(path, f"keys must be strings, got {_describe(key)}")
            elif key not in keys:
                hint = _did_you_mean(key, keys) or f" (expected one of: {', '.join(keys)})"
                self.error(_at(path, key), "unknown key" + hint)
            else:
                out[key] = item
        for key in required:
            if key not in value:
                self.error(path, f"missing key {key!r}")
        return out

    def sequence(self, value: Any, path: str, what: str) -> Sequence[Any] | None:
        if isinstance(value, (list, tuple)):
            return list(value)
        if isinstance(value, _core.YamlStream):  # a YAML document's items, made as they are read
            return value  # type: ignore[return-value]  # registered as a Sequence (isolane.policy.read)
        self.error(path, f"expected a list of {what}, got {_describe(value)}")
        return None

    def string(self, value: Any, path: str, what: str = "a string", non_empty: bool = False) -> str | _Bad:
        if not isinstance(value, str):
            self.error(path, f"expected {what}, got {_describe(value)}")
            return BAD
        if non_empty and not value.strip():
            self.error(path, f"{what} must not be empty")
            return BAD
        return value

    def name(self, value: Any, path: str, what: str, non_empty: bool = False) -> str | _Bad:
        """A tenant's, class's or rule's name, in Unicode NFC: names that print alike are the same
        name. Control characters (category C: newline, NUL, zero-width ...) are refused, since
        names label reports and tables, where they would break the lines or hide."""
        text = self.string(value, path, what, non_empty)
        if isinstance(text, _Bad):
            return text
        if text.isascii() and text.isprintable():  # the common case: no control character, NFC already
            return text
        bad = next((c for c in text if unicodedata.category(c).startswith("C")), None)
        if bad is not None:
            self.error(path, f"{text!r} has the control character U+{ord(bad):04X}: a name must print as it reads (names label reports and tables)")
            return BAD
        return unicodedata.normalize("NFC", text)

    def name_reference(self, value: Any, path: str) -> str | _Bad:
        """A class named by a rule or as the default: compared in NFC, as names are."""
        text = self.string(value, path, "a class name")
        return text if isinstance(text, _Bad) else unicodedata.normalize("NFC", text)

    def integer(self, value: Any, path: str, lo: int, hi: int | None, what: str, note: str = "") -> int | _Bad:
        # A float is never an integer, whole or not (100.0 in JSON is as wrong as 1.5 in YAML).
        if isinstance(value, bool) or not isinstance(value, int):
            self.error(path, f"expected {what} (an integer), got {_describe(value)}")
            return BAD
        if value < lo or (hi is not None and value > hi):
            bounds = f"{lo}-{hi}" if hi is not None else f"at least {lo}"
            number = _int_text(value)
            self.error(path, f"{what} {number} is outside {bounds}{note}" if hi is not None else f"{what} must be {bounds}, got {number}")
            return BAD
        return value

    def version(self, value: Any, path: str) -> None:
        if isinstance(value, bool) or not isinstance(value, int):
            self.error(path, f"expected the version, an integer ({SCHEMA_VERSION}), got {_describe(value)}")
        elif value != SCHEMA_VERSION:
            self.error(path, f"unsupported version {_int_text(value)}: this isolane reads version {SCHEMA_VERSION}")

    def choice(self, value: Any, path: str, choices: Sequence[str], what: str) -> str | _Bad:
        if not isinstance(value, str) or value not in choices:
            if isinstance(value, str):
                hint = _did_you_mean(value, choices) or f" (expected {_or_list(choices)})"
                self.error(path, f"{value!r} is not {what}{hint}")
            else:
                self.error(path, f"expected {what} ({_or_list(choices)}), got {_describe(value)}")
            return BAD
        return value

    def unique_ints(self, value: Any, path: str, hi: int, what: str, note: str) -> tuple[int, ...]:
        """A list of integers 0..hi without repeats: the good ones."""
        items = self.sequence(value, path, f"{what}s (integers)")
        seen: dict[int, int] = {}  # each good number: where it is listed first
        for i, item in enumerate(items or []):
            number = item if item.__class__ is int and 0 <= item <= hi else self.integer(item, _at(path, i), 0, hi, what, note)
            if isinstance(number, _Bad):
                continue
            if number in seen:
                self.error(_at(path, i), f"{what} {number} is already listed at {_at(path, seen[number])}")
                continue
            seen[number] = i
        return tuple(seen)

    def prefix(self, value: Any, path: str) -> Network | None | _Bad:
        return self._prefix(value, path, _parse_prefix)  # type: ignore[return-value]  # _parse_prefix gives no integer

    def rule_prefix(self, data: Mapping[str, Any], path: str, key: str) -> int | Network | None | _Bad:
        """A rule's prefix ``data[key]``, as the rule holds it (an IPv4 prefix as one integer:
        :class:`CompactPrefix`); its place ``path.key`` is spelt only for an error (rules are
        many, their errors few)."""
        value = data[key]
        parsed = _parse_rule_prefix(value) if value.__class__ is str else None
        if parsed is None or isinstance(parsed, str):
            return self._prefix(value, _at(path, key), _parse_rule_prefix)
        return parsed

    def _prefix(self, value: Any, path: str, parse: Callable[[str], int | Network | None | str]) -> int | Network | None | _Bad:
        if not isinstance(value, str):
            self.error(path, f"expected a prefix such as '10.0.0.0/8' or 'fd00::/64', got {_describe(value)}")
            return BAD
        parsed = parse(value)
        if isinstance(parsed, str):
            self.error(path, parsed)
            return BAD
        return parsed

    # -- units ---------------------------------------------------------------------------------

    def quantity(self, value: Any, path: str, parse: Any, zero_ok: bool = False) -> int | None:
        try:
            amount = int(parse(value))
        except ValueError as err:
            self.error(path, str(err))
            return None
        if amount < 0 or (amount == 0 and not zero_ok):
            self.error(path, f"{value!r} must be more than zero")
            return None
        return amount

    def byte_rate(self, value: Any, path: str, zero_ok: bool = False) -> int | None:
        """A rate that meters, shapers or the port use: whole bytes per second (so that the
        compiled bytes are exact), at most MAX_RATE_BYTES. Returned in bits per second."""
        bits = self.quantity(value, path, parse_rate, zero_ok)
        if bits is None:
            return None
        if bits % 8:
            self.error(path, f"{value!r} is not a whole number of bytes per second (isolane meters, shapes and schedules bytes)")
            return None
        if not self.within_largest_rate(bits, path, repr(value)):
            return None
        return bits

    def within_largest_rate(self, bits: int, path: str, text: str) -> bool:
        """Whether a rate in bits per second is one the core takes (reported if not); ``text``
        is how the policy wrote it."""
        if bits <= MAX_RATE_BYTES * 8:
            return True
        self.error(path, f"{text} is over the largest rate isolane handles, {MAX_RATE_BYTES:,} B/s (about 35.2Tbps)")
        return False

    def queue_size(self, value: Any, path: str, zero_ok: bool = False) -> int | None:
        """A queue's, buffer's or reserve's size, or a queue threshold: at most MAX_QUEUE_BYTES."""
        size = self.quantity(value, path, parse_size, zero_ok)
        if size is not None and size > MAX_QUEUE_BYTES:
            self.error(path, f"{value!r} is over {_LARGEST_QUEUE}")
            return None
        return size

    def max_delay(self, value: Any, path: str) -> int | None:
        delay = self.quantity(value, path, parse_duration)
        if delay is not None and delay > MAX_DELAY_NS:
            self.error(path, f"{value!r} is over {_LONGEST_DELAY}")
            return None
        return delay

    def burst(self, value: Any, path: str, zero_ok: bool = False) -> int | None:
        size = self.quantity(value, path, parse_size, zero_ok)
        if size is not None and size > MAX_BURST_BYTES:
            self.error(path, f"{value!r} is over the largest burst, {format_size(MAX_BURST_BYTES)} (the limit of isolane's token buckets)")
            return None
        return size

    def weight(self, value: Any, path: str) -> int | None | _Bad:
        weight = self.integer(value, path, 1, None, "weight")
        if isinstance(weight, int) and weight > MAX_WEIGHT:
            self.error(path, f"weight {_int_text(weight)} is over {MAX_WEIGHT} (32 bits)")
            return BAD
        return weight

    def dscp_value(self, value: Any, path: str) -> int | None:
        number = self.named_integer(value, path, DSCP_NAMES, ("a DSCP name", "a number 0-63"), 0, 63, "DSCP")
        return None if isinstance(number, _Bad) else number

    def named_integer(self, value: Any, path: str, names: Mapping[str, int], hints: tuple[str, str], lo: int, hi: int, what: str, note: str = "") -> int | _Bad:
        """A name of ``names`` or an integer ``lo``..``hi``; ``hints``: what a name is ("a DSCP
        name") and what else is accepted ("a number 0-63"), for the error."""
        if isinstance(value, str):
            if value in names:
                return names[value]
            hint = _did_you_mean(value, names) or f" (names: {', '.join(sorted(names))}; or {hints[1]})"
            self.error(path, f"{value!r} is not {hints[0]}{hint}")
            return BAD
        return self.integer(value, path, lo, hi, what, note)
