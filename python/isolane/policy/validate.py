"""Validation: :class:`_Checker` reads the data of a policy piece by piece and collects every
problem; then the checks that take the whole policy at once, and its warnings."""

from __future__ import annotations

import unicodedata
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from isolane.policy.addresses import _PORT_TEXT_RE, Network, PortRange, _families, _mapped, _merge_ranges, _parse_prefix
from isolane.policy.bursts import read_microburst
from isolane.policy.compile import tenant_tables
from isolane.policy.constants import (
    _CLASS_KEYS,
    _METER_ACTION_KEYS,
    _METER_BUCKET_KEYS,
    _METER_BUCKETS,
    _METER_FIELDS,
    _METER_KEYS,
    _METER_REQUIRED,
    _METER_WORDS,
    _PORT_KEYS,
    _PROTO_NAME,
    _REMARK_KEYS,
    _RULE_KEYS,
    _SHAPER_KEYS,
    _TENANT_KEYS,
    ACTIONS,
    COLORS,
    COUNT_MODES,
    DEFAULT_LARGEST_FRAME,
    DSCP_NAMES,
    MAX_BURST_BYTES,
    MAX_CLASSES,
    MAX_DELAY_NS,
    MAX_LARGEST_FRAME,
    MAX_PORT,
    MAX_PRIORITY,
    MAX_QUEUE_BYTES,
    MAX_RATE_BYTES,
    MAX_RULE_EXPANSION,
    MAX_VLAN,
    MAX_VNI,
    MAX_WEIGHT,
    METER_KINDS,
    MIN_FRAME,
    PORT_ALPHA_LOG2,
    PORT_MODES,
    PORT_PROTOCOLS,
    PROTOCOLS,
    SCHEMA_VERSION,
    ColorName,
)
from isolane.policy.errors import _at, _describe, _did_you_mean, _int_text, _or_list, _shown
from isolane.policy.model import ColorAction, Contract, Meter, Port, Remark, Rule, Shaper, Tenant, TrafficClass
from isolane.policy.shadowed import _MASKS, _shadowed_rules
from isolane.policy.units import (
    _span,
    bytes_in,
    default_burst,
    format_duration,
    format_rate,
    format_size,
    parse_duration,
    parse_rate,
    parse_size,
    read_number,
    time_of,
)

if TYPE_CHECKING:
    from isolane.policy.policy import Policy


class _Bad:
    """Marks a value that was reported as an error."""


BAD = _Bad()

_LARGEST_QUEUE = f"the largest queue isolane handles, {format_size(MAX_QUEUE_BYTES)}"
_LONGEST_DELAY = f"the longest max_delay isolane handles, {format_duration(MAX_DELAY_NS)} (about {MAX_DELAY_NS // (365 * 86400 * 10**9)} years)"

#: A color_map key of more digits is no DSCP number (and int() refuses one of 4300 digits).
_LONGEST_DSCP_KEY = 9

#: Each alpha the port takes, and its log2 (an int and a float of the same value look up alike).
_ALPHA_LOG2 = {2.0**k: k for k in PORT_ALPHA_LOG2}


class _Checker:
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

    def sequence(self, value: Any, path: str, what: str) -> list[Any] | None:
        if isinstance(value, (list, tuple)):
            return list(value)
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

    def unique_ints(self, value: Any, path: str, hi: int, what: str, note: str) -> list[tuple[int, str]]:
        """A list of integers 0..hi without repeats: [(value, path)] of the good ones."""
        items = self.sequence(value, path, f"{what}s (integers)")
        out: list[tuple[int, str]] = []
        seen: dict[int, str] = {}
        for i, item in enumerate(items or []):
            number = self.integer(item, _at(path, i), 0, hi, what, note)
            if isinstance(number, _Bad):
                continue
            if number in seen:
                self.error(_at(path, i), f"{what} {number} is already listed at {seen[number]}")
                continue
            seen[number] = _at(path, i)
            out.append((number, _at(path, i)))
        return out

    def prefix(self, value: Any, path: str) -> Network | None | _Bad:
        if not isinstance(value, str):
            self.error(path, f"expected a prefix such as '10.0.0.0/8' or 'fd00::/64', got {_describe(value)}")
            return BAD
        parsed = _parse_prefix(value)
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
        if isinstance(value, str):
            if value in DSCP_NAMES:
                return DSCP_NAMES[value]
            hint = _did_you_mean(value, DSCP_NAMES) or f" (names: {', '.join(sorted(DSCP_NAMES))}; or a number 0-63)"
            self.error(path, f"{value!r} is not a DSCP name{hint}")
            return None
        number = self.integer(value, path, 0, 63, "DSCP")
        return None if isinstance(number, _Bad) else number

    def contract(self, data: dict[str, Any], path: str) -> Contract:
        rate = self.byte_rate(data["rate"], _at(path, "rate")) if "rate" in data else None
        burst = self.burst(data["burst"], _at(path, "burst")) if "burst" in data else None
        ceil = self.byte_rate(data["ceil"], _at(path, "ceil")) if "ceil" in data else None
        if rate is not None and ceil is not None and ceil < rate:
            self.error(_at(path, "ceil"), f"ceil {data['ceil']!r} is below rate {data['rate']!r}")
        if self.egress is not None:
            line = format_rate(self.egress.rate_bps)
            if rate is not None and rate > self.egress.rate_bps:
                self.error(_at(path, "rate"), f"rate {data['rate']!r} is above the port's line rate {line}: it cannot be guaranteed")
            if ceil is not None and ceil > self.egress.rate_bps:
                self.error(_at(path, "ceil"), f"ceil {data['ceil']!r} is above the port's line rate {line}")
        meter = self.meter(data["meter"], _at(path, "meter")) if "meter" in data else None
        shaper = self.shaper(data["shaper"], _at(path, "shaper"), ceil if ceil is not None else rate) if "shaper" in data else None
        microburst = read_microburst(self, data["microburst"], _at(path, "microburst"), rate, _at(path, "rate")) if "microburst" in data else None
        return Contract(rate, burst, ceil, shaper, microburst, meter)

    def shaper(self, value: Any, path: str, owner_bps: int | None) -> Shaper | None:
        """A shaper; without a rate of its own it shapes to ``owner_bps``, its owner's ceil or rate."""
        data = self.mapping(value, path, _SHAPER_KEYS)
        if data is None:
            return None
        before = len(self.errors)
        rate = self.byte_rate(data["rate"], _at(path, "rate")) if "rate" in data else None
        burst = self.burst(data["burst"], _at(path, "burst")) if "burst" in data else None
        queue = self.queue_size(data["queue"], _at(path, "queue")) if "queue" in data else None
        max_delay = self.max_delay(data["max_delay"], _at(path, "max_delay")) if "max_delay" in data else None
        if burst is not None and burst < MIN_FRAME:
            self.error(_at(path, "burst"), f"{data['burst']!r} is smaller than the smallest frame ({MIN_FRAME}B): no frame could leave at once")
        if len(self.errors) > before:
            return None
        shaping_bps = rate if rate is not None else owner_bps
        if shaping_bps is None:
            self.error(
                path, "a shaper needs a rate: give it 'rate', or give its tenant or class a 'ceil' or 'rate' (it then shapes to the ceil, else the rate)"
            )
            return None
        if not self.implied_bound_fits(queue, max_delay, shaping_bps // 8, data, path):
            return None
        if queue is not None and queue < self.largest_frame:
            self.warnings.append(
                f"{_at(path, 'queue')}: {data['queue']!r} is smaller than the largest frame ({format_size(self.largest_frame)}): "
                "frames that size are always dropped (set largest_frame if the network's frames are smaller)"
            )
        if queue is not None and self.egress is not None and queue > self.egress.buffer_bytes:
            self.warnings.append(
                f"{_at(path, 'queue')}: {data['queue']!r} is larger than the port's buffer ({format_size(self.egress.buffer_bytes)}): it can never fill"
            )
        return Shaper(rate, burst, queue, max_delay)

    def implied_bound_fits(self, queue: int | None, max_delay: int | None, rate: int, data: Mapping[str, Any], path: str) -> bool:
        """A shaper given a queue or a max_delay alone is bounded by the other too, as the time
        the queue takes to leave at ``rate`` (B/s) or the bytes that leave in max_delay
        (``qos._shaper_row``): that bound must be within its limit as well (reported if not)."""
        if max_delay is not None and queue is None and bytes_in(max_delay, rate) > MAX_QUEUE_BYTES:
            waiting = format_size(bytes_in(max_delay, rate))
            self.error(_at(path, "max_delay"), f"{data['max_delay']!r} at {format_rate(rate * 8)} lets {waiting} wait, over {_LARGEST_QUEUE}: give a queue too")
            return False
        if queue is not None and max_delay is None and time_of(queue, rate) > MAX_DELAY_NS:
            leaving = format_duration(time_of(queue, rate))
            at_rate = format_rate(rate * 8)
            self.error(_at(path, "queue"), f"{data['queue']!r} takes {leaving} to leave at {at_rate}, over {_LONGEST_DELAY}: give a max_delay too")
            return False
        return True

    def meter(self, value: Any, path: str) -> Meter | None:
        data = self.mapping(value, path, _METER_KEYS, required=("kind",))
        if data is None:
            return None
        before = len(self.errors)
        kind = self.choice(data["kind"], _at(path, "kind"), tuple(METER_KINDS), "a meter kind") if "kind" in data else BAD
        fields = _METER_FIELDS[kind] if isinstance(kind, str) else _METER_BUCKET_KEYS
        if isinstance(kind, str):
            for key in _METER_BUCKET_KEYS:
                if key in data and key not in fields:
                    owners = [k for k, own in _METER_FIELDS.items() if key in own]
                    self.error(
                        _at(path, key),
                        f"{kind} meters have no {key} (they take {', '.join(fields)}); {key} belongs to {_or_list(owners)} meters",
                    )
            for key in _METER_REQUIRED[kind]:
                if key not in data:
                    self.error(path, f"missing key {key!r}: {kind} meters need a {_METER_WORDS[key]}")
        values: dict[str, int] = {}  # the rates and bursts given that are good
        bad_values = False
        for key in fields:
            if key in data:
                parse = self.byte_rate if key.endswith("ir") else self.burst
                value = parse(data[key], _at(path, key), zero_ok=True)
                if value is None:
                    bad_values = True
                else:
                    values[key] = value
        color_aware = data.get("color_aware", False)
        if not isinstance(color_aware, bool):
            self.error(_at(path, "color_aware"), f"expected true or false, got {_describe(color_aware)}")
        count = self.choice(data["count"], _at(path, "count"), tuple(COUNT_MODES), "a byte count") if "count" in data else None
        actions: dict[str, ColorAction] = {"green": "pass", "yellow": "pass", "red": "drop"}
        if "actions" in data:
            actions.update(self.color_actions(data["actions"], _at(path, "actions")))
        if isinstance(kind, str):
            self.meter_semantics(kind, values, data, path)  # on what could be read
        if len(self.errors) > before or isinstance(kind, _Bad) or bad_values:
            return None
        assert not isinstance(count, _Bad)
        self.meter_warnings(kind, values, data, path)
        return Meter(
            kind,  # type: ignore[arg-type]
            cir_bps=values["cir"],
            cbs_bytes=values.get("cbs"),
            ebs_bytes=values.get("ebs"),
            pir_bps=values.get("pir"),
            pbs_bytes=values.get("pbs"),
            eir_bps=values.get("eir"),
            color_aware=color_aware,
            count=count,  # type: ignore[arg-type]
            green=actions["green"],
            yellow=actions["yellow"],
            red=actions["red"],
        )

    def meter_semantics(self, kind: str, values: Mapping[str, int], data: Mapping[str, Any], path: str) -> None:
        """What RFCs 2697, 2698 and 4115 forbid, and buckets that could never work. ``values``
        holds the rates and bursts that were given and are good; a check that needs one that
        is missing or bad is left out."""
        cir = values.get("cir")
        if kind in ("srtcm", "trtcm") and cir == 0:
            rfc = "RFC 2697" if kind == "srtcm" else "RFC 2698"
            self.error(_at(path, "cir"), f"the committed rate is 0: C would never refill ({rfc} needs CIR above 0)")
        if kind == "srtcm" and values.get("cbs") == 0 and values.get("ebs") == 0:
            self.error(path, "cbs and ebs are both 0: every packet would be red (RFC 2697 needs one of them above 0)")
        if kind == "trtcm":
            pir = values.get("pir")
            if pir == 0:
                self.error(_at(path, "pir"), "the peak rate is 0: P would never refill (RFC 2698 needs PIR above 0)")
            elif pir is not None and cir is not None and pir < cir:
                self.error(_at(path, "pir"), f"PIR {data['pir']!r} is below CIR {data['cir']!r}: RFC 2698 needs PIR >= CIR")
            for key in ("cbs", "pbs"):
                if values.get(key) == 0:
                    self.error(_at(path, key), f"{key.upper()} is 0: RFC 2698 needs PBS and CBS both above 0 (leave {key} out for the default)")
        if kind == "rfc4115":
            if cir == 0 and values.get("eir") == 0:
                self.error(path, "cir and eir are both 0: every packet would be red")
                return
            for bucket, rate_key, size_key in (("C", "cir", "cbs"), ("E", "eir", "ebs")):
                rate, size = values.get(rate_key), values.get(size_key)
                if rate == 0 and size:
                    self.error(
                        _at(path, size_key),
                        f"{size_key} is {data[size_key]!r} but {rate_key} is 0, so {bucket} would never refill "
                        f"(leave {size_key} out to switch {bucket} off)",
                    )
                elif rate and size == 0:
                    self.error(
                        _at(path, size_key),
                        f"{size_key} is 0 but {rate_key} is {data[rate_key]!r}: {bucket} could never hold a token (leave {size_key} out for the default)",
                    )

    def meter_warnings(self, kind: str, values: Mapping[str, int], data: Mapping[str, Any], path: str) -> None:
        """Explicit bursts that make policers hurt TCP: below the largest frame or ~1 ms at the rate."""
        for size_key, rate_key in _METER_BUCKETS[kind]:
            size, rate_bits = values.get(size_key), values.get(rate_key)
            if not size or not rate_bits:
                continue
            rate = rate_bits // 8
            where = f"{_at(path, size_key)}: {data[size_key]!r}"
            if size < self.largest_frame:
                self.warnings.append(
                    f"{where} is smaller than the largest frame ({format_size(self.largest_frame)}): a frame that size "
                    "would never fit in the bucket (set largest_frame if the network's frames are smaller)"
                )
            elif size < rate // 1000:
                default = format_size(default_burst(rate, self.largest_frame))
                self.warnings.append(
                    f"{where} is only {_span(size, rate)} of traffic at {rate_key} {data[rate_key]!r}: a policer burst "
                    f"below about 1 ms at its rate makes TCP run far below the rate (leave {size_key} out for {default})"
                )

    def color_actions(self, value: Any, path: str) -> dict[str, ColorAction]:
        data = self.mapping(value, path, _METER_ACTION_KEYS)
        out: dict[str, ColorAction] = {}
        for colour, item in (data or {}).items():
            where = _at(path, colour)
            if isinstance(item, Mapping):
                remark = self.mapping(item, where, _REMARK_KEYS, required=("remark",))
                if remark is not None and "remark" in remark:
                    dscp = self.dscp_value(remark["remark"], _at(where, "remark"))
                    if dscp is not None:
                        out[colour] = Remark(dscp)
            elif item == "remark":
                self.error(where, "say which DSCP to re-mark to: {remark: af12}")
            elif isinstance(item, str) and item in ("pass", "drop"):
                out[colour] = item  # type: ignore[assignment]
            elif isinstance(item, str):
                hint = _did_you_mean(item, ("pass", "drop", "remark")) or " (expected 'pass', 'drop' or {remark: <DSCP>})"
                self.error(where, f"{item!r} is not a meter action{hint}")
            else:
                self.error(where, f"expected 'pass', 'drop' or {{remark: <DSCP>}}, got {_describe(item)}")
        return out

    # -- policy-wide QoS settings --------------------------------------------------------------

    def largest_frame_setting(self, value: Any, path: str) -> int | None:
        size = self.quantity(value, path, parse_size)
        if size is None:
            return None
        if not MIN_FRAME <= size <= MAX_LARGEST_FRAME:
            self.error(path, f"{value!r} is outside {MIN_FRAME}B-{MAX_LARGEST_FRAME}B (the smallest Ethernet frame to 32 bits)")
            return None
        return size

    def port_setting(self, value: Any, path: str) -> Port | None:
        data = self.mapping(value, path, _PORT_KEYS, required=("rate", "buffer"))
        if data is None:
            return None
        rate = self.byte_rate(data["rate"], _at(path, "rate")) if "rate" in data else None
        buffer = self.queue_size(data["buffer"], _at(path, "buffer")) if "buffer" in data else None
        mode = self.choice(data["mode"], _at(path, "mode"), tuple(PORT_MODES), "a port mode") if "mode" in data else "per_tenant"
        alpha_log2 = self.port_alpha(data["alpha"], _at(path, "alpha")) if "alpha" in data else 0
        reserve = self.queue_size(data["reserve"], _at(path, "reserve"), zero_ok=True) if "reserve" in data else 0
        microburst = read_microburst(self, data["microburst"], _at(path, "microburst"), rate, "port.rate") if "microburst" in data else None
        if rate is None or buffer is None or isinstance(mode, _Bad) or alpha_log2 is None or reserve is None or ("microburst" in data and microburst is None):
            return None
        if buffer < self.largest_frame:
            self.warnings.append(
                f"{_at(path, 'buffer')}: {data['buffer']!r} is smaller than the largest frame ({format_size(self.largest_frame)}): "
                "frames that size are always dropped"
            )
        if reserve > buffer:
            self.error(_at(path, "reserve"), f"{data['reserve']!r} is more than the buffer {data['buffer']!r}: a reserve is part of the buffer")
            return None
        return Port(rate, buffer, mode, alpha_log2, reserve, microburst)  # type: ignore[arg-type]

    def port_alpha(self, value: Any, path: str) -> int | None:
        """The dynamic threshold's alpha, a power of two from 1/128 to 128: its log2."""
        if isinstance(value, (int, float)) and not isinstance(value, bool) and value in _ALPHA_LOG2:
            return _ALPHA_LOG2[value]
        self.error(
            path,
            f"alpha {_shown(value)} is not a power of two from 1/128 to 128 (e.g. 0.25, 1, 8): "
            "a queue may hold alpha x the free buffer, and switches offer these",
        )
        return None

    def color_map(self, value: Any, path: str) -> tuple[tuple[int, ColorName], ...] | None:
        if not isinstance(value, Mapping):
            self.error(path, f"expected a mapping from DSCP to colour (e.g. {{af12: yellow}}), got {_describe(value)}")
            return None
        before = len(self.errors)
        seen: dict[int, str] = {}
        out: dict[int, ColorName] = {}
        for key, colour in value.items():
            where = _at(path, key if isinstance(key, str) else _shown(key))
            dscp: int | None = None
            if isinstance(key, str) and key.isascii() and key.isdigit() and len(key) <= _LONGEST_DSCP_KEY:
                dscp = self.dscp_value(int(key), where)
            elif isinstance(key, (str, int)) and not isinstance(key, bool):
                dscp = self.dscp_value(key, where)
            else:
                self.error(path, f"keys must be DSCP names or numbers, got {_describe(key)}")
            chosen = self.choice(colour, where, tuple(COLORS), "a colour")
            if dscp is None or isinstance(chosen, _Bad):
                continue
            if dscp in seen:
                self.error(where, f"DSCP {dscp} is already mapped by {seen[dscp]}")
                continue
            seen[dscp] = where
            out[dscp] = chosen  # type: ignore[assignment]
        if len(self.errors) > before:
            return None
        return tuple(sorted((dscp, colour) for dscp, colour in out.items() if colour != "green"))

    # -- rule fields ---------------------------------------------------------------------------

    def port(self, value: Any, path: str, *, in_list: bool) -> PortRange | None:
        """One port or range: an integer, "port" or "lo-hi"; in a list also [lo, hi]."""
        if isinstance(value, int) and not isinstance(value, bool):
            if not 0 <= value <= MAX_PORT:
                self.error(path, f"port {_int_text(value)} is outside 0-{MAX_PORT}")
                return None
            return (value, value)
        if isinstance(value, str):
            match = _PORT_TEXT_RE.fullmatch(value)
            if not match:
                self.error(path, f"{value!r} is not a port or a port range (write 80 or '8000-8080')")
                return None
            try:
                lo = int(read_number(match.group(1), value))
                hi = int(read_number(match.group(2), value)) if match.group(2) is not None else lo
            except ValueError as err:
                self.error(path, str(err))
                return None
            return self._range(lo, hi, path, value)
        if in_list and _is_int_pair(value):
            lo, hi = value
            return self._range(lo, hi, path, list(value))
        expected = "a port (integer) or a range ('80-90' or [80, 90])" if in_list else "a port (integer), a range ('80-90') or a list of them"
        self.error(path, f"expected {expected}, got {_describe(value)}")
        return None

    def _range(self, lo: int, hi: int, path: str, text: Any) -> PortRange | None:
        bad = [p for p in (lo, hi) if not 0 <= p <= MAX_PORT]
        if bad:
            self.error(path, f"port {_int_text(bad[0])} is outside 0-{MAX_PORT}")
            return None
        if lo > hi:
            fixed: Any = [hi, lo] if isinstance(text, list) else f"{hi}-{lo}"
            self.error(path, f"{text!r} is reversed ({lo} > {hi}); did you mean {fixed!r}?")
            return None
        return (lo, hi)

    def ports(self, value: Any, path: str) -> tuple[PortRange, ...] | None | _Bad:
        """A port or range, or a list of them: a list is never a range itself, so [80, 443] is
        two ports (a range in a list is "80-443" or [80, 443] as an entry)."""
        if isinstance(value, (list, tuple)):
            if not value:
                self.error(path, "an empty list matches no packet: leave the key out to match any port")
                return BAD
            ranges = [self.port(item, _at(path, i), in_list=True) for i, item in enumerate(value)]
            if any(r is None for r in ranges):
                return BAD
            merged = _merge_ranges(r for r in ranges if r is not None)
        else:
            one = self.port(value, path, in_list=False)
            if one is None:
                return BAD
            merged = (one,)
        return None if merged == ((0, MAX_PORT),) else merged

    def numbers(self, value: Any, path: str, names: Mapping[str, int], hi: int, what: str) -> tuple[int, ...] | _Bad:
        """proto / dscp: a name or number, or a list of them."""
        items = list(value) if isinstance(value, (list, tuple)) else [value]
        if isinstance(value, (list, tuple)) and not value:
            self.error(path, f"an empty list matches no packet: leave the key out to match any {what}")
            return BAD
        out: set[int] = set()
        ok = True
        for i, item in enumerate(items):
            where = _at(path, i) if isinstance(value, (list, tuple)) else path
            if isinstance(item, str):
                if item in names:
                    out.add(names[item])
                    continue
                hint = _did_you_mean(item, names) or f" (names: {', '.join(sorted(names))}; or a number 0-{hi})"
                self.error(where, f"{item!r} is not a {what} name{hint}")
                ok = False
                continue
            number = self.integer(item, where, 0, hi, what)
            if isinstance(number, _Bad):
                ok = False
            else:
                out.add(number)
        return tuple(sorted(out)) if ok else BAD

    def rule(self, value: Any, path: str, class_names: list[str] | None, default_class: str | None) -> Rule | None:
        data = self.mapping(value, path, _RULE_KEYS, required=("action",))
        if data is None:
            return None
        errors_before = len(self.errors)
        name = self.name(data["name"], _at(path, "name"), "a string") if "name" in data else None
        description = self.string(data["description"], _at(path, "description")) if "description" in data else None
        action = self.choice(data["action"], _at(path, "action"), ACTIONS, "an action") if "action" in data else BAD
        cls: str | _Bad | None = None
        if "class" in data:
            cls = self.name_reference(data["class"], _at(path, "class"))
            if action == "drop":
                self.error(_at(path, "class"), "a drop rule puts packets in no class: remove 'class' or make the action 'allow'")
            elif isinstance(cls, str) and class_names is not None and cls not in class_names:
                hint = _did_you_mean(cls, class_names) or f" (the tenant's classes: {', '.join(map(repr, class_names))})"
                self.error(_at(path, "class"), f"unknown class {cls!r}{hint}")
        elif action == "allow":
            cls = default_class
        src = self.prefix(data["src"], _at(path, "src")) if "src" in data else None
        dst = self.prefix(data["dst"], _at(path, "dst")) if "dst" in data else None
        if not isinstance(src, _Bad) and not isinstance(dst, _Bad) and not (_families(src) & _families(dst)):
            assert src is not None and dst is not None
            self.error(
                _at(path, "dst"),
                f"{str(dst)!r} is IPv{dst.version} but src {str(src)!r} is IPv{src.version}: no packet can match both",
            )
        src_ports = self.ports(data["src_ports"], _at(path, "src_ports")) if "src_ports" in data else None
        dst_ports = self.ports(data["dst_ports"], _at(path, "dst_ports")) if "dst_ports" in data else None
        proto = self.numbers(data["proto"], _at(path, "proto"), PROTOCOLS, 255, "protocol") if "proto" in data else None
        dscp = self.numbers(data["dscp"], _at(path, "dscp"), DSCP_NAMES, 63, "DSCP") if "dscp" in data else None
        if isinstance(proto, tuple) and ("src_ports" in data or "dst_ports" in data):
            portless = [p for p in proto if p not in PORT_PROTOCOLS]
            if portless:
                names = ", ".join(repr(_PROTO_NAME.get(p, p)) for p in portless)
                self.error(
                    _at(path, "proto"),
                    f"{names} {'has' if len(portless) == 1 else 'have'} no ports, but the rule matches ports "
                    "(ports exist for tcp, udp, sctp, dccp and udplite)",
                )
        if len(self.errors) > errors_before or isinstance(action, _Bad):
            return None
        assert not isinstance(src, _Bad) and not isinstance(dst, _Bad) and not isinstance(cls, _Bad)
        assert not isinstance(src_ports, _Bad) and not isinstance(dst_ports, _Bad)
        assert not isinstance(proto, _Bad) and not isinstance(dscp, _Bad)
        assert not isinstance(name, _Bad) and not isinstance(description, _Bad)
        rule = Rule(action, cls, src, dst, src_ports, dst_ports, proto, dscp, name, description)  # type: ignore[arg-type]
        if rule.expansion > MAX_RULE_EXPANSION:
            self.error(path, f"the rule expands into {rule.expansion:,} table rules (at most {MAX_RULE_EXPANSION:,}): use port ranges")
            return None
        return rule

    # -- tenants and classes -------------------------------------------------------------------

    def traffic_class(self, value: Any, path: str) -> TrafficClass | None:
        data = self.mapping(value, path, _CLASS_KEYS, required=("name",))
        if data is None:
            return None
        before = len(self.errors)
        name = self.name(data["name"], _at(path, "name"), "a class name", non_empty=True) if "name" in data else BAD
        description = self.string(data["description"], _at(path, "description")) if "description" in data else None
        priority = self.integer(data["priority"], _at(path, "priority"), 0, MAX_PRIORITY, "priority") if "priority" in data else None
        weight = self.weight(data["weight"], _at(path, "weight")) if "weight" in data else None
        contract = self.contract(data, path)
        if len(self.errors) > before or isinstance(name, _Bad):
            return None
        assert not isinstance(priority, _Bad) and not isinstance(weight, _Bad) and not isinstance(description, _Bad)
        return TrafficClass(name, priority, weight, contract, description)

    def tenant(self, value: Any, path: str) -> Tenant | None:
        data = self.mapping(value, path, _TENANT_KEYS, required=("name",))
        if data is None:
            return None
        before = len(self.errors)
        name = self.name(data["name"], _at(path, "name"), "a tenant name", non_empty=True) if "name" in data else BAD
        description = self.string(data["description"], _at(path, "description")) if "description" in data else None
        vnis = self.unique_ints(data.get("vnis", []), _at(path, "vnis"), MAX_VNI, "VNI", " (24 bits)")
        vlans = self.unique_ints(data.get("vlans", []), _at(path, "vlans"), MAX_VLAN, "VLAN id", " (12 bits)")
        sources: list[Network] = []
        for i, item in enumerate(self.sequence(data.get("sources", []), _at(path, "sources"), "prefixes") or []):
            where = _at(_at(path, "sources"), i)
            prefix = self.prefix(item, where)
            if prefix is None:
                self.error(where, "'any' cannot be a source: list the prefixes the tenant owns")
            elif not isinstance(prefix, _Bad):
                sources.append(prefix)
        weight = self.weight(data["weight"], _at(path, "weight")) if "weight" in data else None
        contract = self.contract(data, path)

        # class_names stays None when a class could not be read: rules naming it are not reported.
        classes: list[TrafficClass] = [TrafficClass("default")]
        class_names: list[str] | None = ["default"]
        if "classes" in data:
            classes_path = _at(path, "classes")
            items = self.sequence(data["classes"], classes_path, "classes (mappings with a name)")
            if items is not None and not items:
                self.error(classes_path, "a tenant needs at least one class: leave 'classes' out for one class 'default'")
            if items is not None and len(items) >= MAX_CLASSES:
                self.error(classes_path, f"at most {MAX_CLASSES - 1} classes")
            classes, class_names = [], []
            seen: dict[str, tuple[int, str]] = {}  # each class name (NFC): where it is, and as written there
            for i, item in enumerate(items or []):
                tc = self.traffic_class(item, _at(classes_path, i))
                if tc is None:
                    class_names = None
                elif tc.name in seen:
                    first, written = seen[tc.name]
                    note = _spelt_apart(written, item["name"])
                    self.error(_at(_at(classes_path, i), "name"), f"class {tc.name!r} is already defined at {classes_path}[{first}]{note}")
                else:
                    seen[tc.name] = (i, item["name"])
                    classes.append(tc)
            if items is None or not items:
                class_names = None
            elif class_names is not None:
                class_names = [c.name for c in classes]
                self.class_contracts(contract, classes, path)

        default_class: str | None = class_names[0] if class_names else None
        if "default_class" in data:
            given = self.name_reference(data["default_class"], _at(path, "default_class"))
            if isinstance(given, str):
                if class_names is not None and given not in class_names:
                    hint = _did_you_mean(given, class_names) or f" (the tenant's classes: {', '.join(map(repr, class_names))})"
                    self.error(_at(path, "default_class"), f"unknown class {given!r}{hint}")
                default_class = given
        default = self.choice(data["default"], _at(path, "default"), ACTIONS, "an action") if "default" in data else "allow"

        rules: list[Rule] = []
        rule_items = self.sequence(data.get("rules", []), _at(path, "rules"), "rules (mappings)") or []
        for i, item in enumerate(rule_items):
            rule = self.rule(item, _at(_at(path, "rules"), i), class_names, default_class)
            if rule is not None:
                rules.append(rule)
        if len(self.errors) > before or isinstance(name, _Bad) or isinstance(default, _Bad) or isinstance(weight, _Bad):
            return None
        assert default_class is not None and not isinstance(description, _Bad)
        return Tenant(
            name=name,
            vnis=tuple(v for v, _ in vnis),
            vlans=tuple(v for v, _ in vlans),
            sources=tuple(sources),
            classes=tuple(classes),
            default_class=default_class,
            default=default,  # type: ignore[arg-type]
            rules=tuple(rules),
            contract=contract,
            description=description,
            weight=weight,
        )

    def class_contracts(self, tenant: Contract, classes: Sequence[TrafficClass], path: str) -> None:
        """A class's guarantee and ceiling against its tenant's."""
        if tenant.ceil_bps is not None:
            for k, tc in enumerate(classes):
                where = _at(_at(path, "classes"), k)
                limit = format_rate(tenant.ceil_bps)
                if tc.contract.rate_bps is not None and tc.contract.rate_bps > tenant.ceil_bps:
                    self.error(_at(where, "rate"), f"rate {format_rate(tc.contract.rate_bps)} is above the tenant's ceil {limit}: it cannot be guaranteed")
                if tc.contract.ceil_bps is not None and tc.contract.ceil_bps > tenant.ceil_bps:
                    self.error(_at(where, "ceil"), f"ceil {format_rate(tc.contract.ceil_bps)} is above the tenant's ceil {limit}")
        guaranteed = sum(tc.contract.rate_bps or 0 for tc in classes)
        if tenant.rate_bps is not None and guaranteed > tenant.rate_bps:
            self.error(
                _at(path, "classes"),
                f"the classes' rates add up to {format_rate(guaranteed)}, more than the tenant's rate {format_rate(tenant.rate_bps)}: "
                "they cannot all be guaranteed",
            )


def _comparable_name(value: Any) -> str | None:
    """A name as names are compared (NFC), if it is text that is not blank."""
    return unicodedata.normalize("NFC", value) if isinstance(value, str) and value.strip() else None


def _spelt_apart(first: str, again: str) -> str:
    """What the error of a repeated name adds when the two are the same only in NFC."""
    return "" if first == again else " (written with other code points, but the same name in Unicode NFC: they print alike)"


def _is_int_pair(value: Any) -> bool:
    return isinstance(value, (list, tuple)) and len(value) == 2 and all(isinstance(v, int) and not isinstance(v, bool) for v in value)


def _rule_label(path: str, rule: Rule) -> str:
    return f"{path} ({rule.name!r})" if rule.name else path


def _guarantee(tenant: Tenant) -> int:
    """A tenant's guarantee in bits per second: its rate, or what its classes are guaranteed."""
    if tenant.contract.rate_bps is not None:
        return tenant.contract.rate_bps
    return sum(c.contract.rate_bps or 0 for c in tenant.classes)


def _tenant_weights(tenants: Sequence[Tenant]) -> list[int]:
    guarantees = np.array([_guarantee(t) // 8 for t in tenants], dtype=np.uint64)
    explicit = np.array([t.weight or 0 for t in tenants], dtype=np.uint32)
    return port_weights(guarantees, explicit).tolist()


def port_weights(guarantees: npt.NDArray[np.uint64], explicit: npt.NDArray[np.uint32]) -> npt.NDArray[np.uint32]:
    """Each tenant's share of the port's spare capacity, from its guarantee (bytes/s) and its
    ``weight`` (0: none): the weights if tenants have them (all or none do, checked); else in
    proportion to the guarantees, each divided by their greatest common divisor (a tenant
    without a guarantee counts one unit), scaled to 32 bits if that is not enough."""
    if explicit.any():
        return np.maximum(explicit, 1).astype(np.uint32)
    given = guarantees[guarantees > 0]
    unit = int(np.gcd.reduce(given)) if len(given) else 0
    if unit == 0:
        return np.ones(len(guarantees), dtype=np.uint32)
    units = np.maximum(guarantees // np.uint64(unit), 1)
    if int(units.max()) <= MAX_WEIGHT:
        return units.astype(np.uint32)
    top = int(guarantees.max())  # a tiny common divisor: keep the proportions in 32 bits
    return np.array([max(round(int(g) * MAX_WEIGHT / top), 1) for g in guarantees], dtype=np.uint32)


def _port_checks(ck: _Checker, tenants: Sequence[Tenant]) -> None:
    """What takes every tenant at once: guarantees against the line rate, and weights."""
    if ck.egress is not None:
        guaranteed = sum(_guarantee(t) for t in tenants)
        if guaranteed > ck.egress.rate_bps:
            ck.error(
                "port.rate",
                f"the tenants' guarantees add up to {format_rate(guaranteed)}, more than the port's line rate "
                f"{format_rate(ck.egress.rate_bps)}: they cannot all be met",
            )
    weighted = [(i, t) for i, t in enumerate(tenants) if t.weight is not None]
    if weighted:
        first, tenant = weighted[0]
        for i, other in enumerate(tenants):
            if other.weight is None:
                ck.error(
                    f"tenants[{i}]",
                    f"{other.name!r} has no weight, but tenants[{first}] ({tenant.name!r}) has one: give every tenant a "
                    "weight, or none (spare capacity is then shared in proportion to the guarantees)",
                )
    _port_weight_checks(ck, tenants)


def _port_weight_checks(ck: _Checker, tenants: Sequence[Tenant]) -> None:
    """A class's queue at the port is weighed by its tenant's weight times its own (docs/qos.md,
    "The port in the engine"), which must fit the 32 bits of the port scheduler's weights."""
    for i, (tenant, tenant_weight) in enumerate(zip(tenants, _tenant_weights(tenants))):
        for k, tc in enumerate(tenant.classes):
            if tc.weight is not None and tenant_weight * tc.weight > MAX_WEIGHT:
                whose = "its tenant's weight" if tenant.weight is not None else "its tenant's weight from the guarantees"
                ck.error(
                    f"tenants[{i}].classes[{k}].weight",
                    f"the port weighs this class by {whose} times its own, {tenant_weight} x {tc.weight}, which is over {MAX_WEIGHT} (32 bits)",
                )


def _policy_warnings(policy: Policy) -> list[str]:
    found = [w for i, tenant in enumerate(policy.tenants) for w in _no_traffic_warnings(i, tenant)]
    # Source prefixes are checked in policy order: one covered by an earlier one is never used.
    seen: dict[int, dict[int, str]] = {}
    for i, tenant in enumerate(policy.tenants):
        for k, source in enumerate(tenant.sources):
            addr, length = _mapped(source)
            value = int.from_bytes(addr, "big")
            here = f"tenants[{i}].sources[{k}]"
            cover = next(
                (seen[ln][value & _MASKS[ln]] for ln in sorted(seen) if ln <= length and value & _MASKS[ln] in seen[ln]),
                None,
            )
            if cover is not None:
                found.append(f"{here} ('{source}') is never used: {cover} covers it")
            else:
                seen.setdefault(length, {})[value] = f"{here} ('{source}')"
    found.extend(w for i, tenant in enumerate(policy.tenants) for w in _shadowed_warnings(i, tenant))
    return found


def _tenant_warnings(i: int, tenant: Tenant) -> list[str]:
    """The warnings about tenant ``i`` alone (a tenant added or replaced by itself)."""
    return _no_traffic_warnings(i, tenant) + _shadowed_warnings(i, tenant)


def _no_traffic_warnings(i: int, tenant: Tenant) -> list[str]:
    if tenant.vnis or tenant.vlans or tenant.sources:
        return []
    return [f"tenants[{i}] ({tenant.name!r}) has no vnis, vlans or sources: no traffic reaches it"]


def _shadowed_warnings(i: int, tenant: Tenant) -> list[str]:
    if len(tenant.rules) < 2:
        return []  # only an earlier rule can cover one
    found = []
    for rule_index, covering in _shadowed_rules(tenant_tables(tenant)):
        rule_path = f"tenants[{i}].rules[{rule_index}]"
        labels = [_rule_label(f"tenants[{i}].rules[{c}]", tenant.rules[c]) for c in covering]
        verb = "covers" if len(labels) == 1 else "cover"
        who = labels[0] if len(labels) == 1 else ", ".join(labels[:-1]) + " and " + labels[-1]
        found.append(f"{_rule_label(rule_path, tenant.rules[rule_index])} is never matched: {who} {verb} it")
    return found
