"""Reading a policy's QoS settings: contracts, shapers, meters and their colour actions, the
port, the largest frame and the colour map, each checked against the others it depends on."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from isolane.policy.bursts import read_microburst
from isolane.policy.constants import (
    _METER_ACTION_KEYS,
    _METER_BUCKET_KEYS,
    _METER_BUCKETS,
    _METER_FIELDS,
    _METER_KEYS,
    _METER_REQUIRED,
    _METER_WORDS,
    _PORT_KEYS,
    _REMARK_KEYS,
    _SHAPER_KEYS,
    COLORS,
    COUNT_MODES,
    MAX_DELAY_NS,
    MAX_LARGEST_FRAME,
    MAX_QUEUE_BYTES,
    METER_KINDS,
    MIN_FRAME,
    PORT_MODES,
    ColorName,
)
from isolane.policy.errors import _at, _describe, _did_you_mean, _or_list, _shown
from isolane.policy.model import ColorAction, Contract, Meter, Port, Remark, Shaper
from isolane.policy.profiles import read_overload
from isolane.policy.sharing import recall, remember, shared
from isolane.policy.units import (
    _span,
    bytes_in,
    default_burst,
    format_duration,
    format_rate,
    format_size,
    parse_size,
    smallest_meter_burst,
    time_of,
)
from isolane.policy.validate_shapes import _ALPHA_LOG2, _LARGEST_QUEUE, _LONGEST_DELAY, _LONGEST_DSCP_KEY, BAD, _Bad, _Shapes

_CONTRACT_KEYS = ("rate", "burst", "ceil", "meter", "shaper", "microburst")
_PLAIN = (str, int, float, bool)


def _contract_key(data: Mapping[str, Any]) -> tuple[Any, ...] | None:
    """The values of ``data``'s contract keys with their types, if each is plain or a flat
    mapping of plain values (``None``: not kept)."""
    key: list[Any] = []
    for name in _CONTRACT_KEYS:
        if name in data:
            value = data[name]
            if value.__class__ is dict:
                if not all(v.__class__ in _PLAIN for v in value.values()):
                    return None
                value = tuple((k, v.__class__, v) for k, v in value.items())
            elif value.__class__ not in _PLAIN:
                return None
            key.append((name, value.__class__, value))
    return tuple(key)


class _QosChecks(_Shapes):
    def contract(self, data: dict[str, Any], path: str) -> Contract:
        """A tenant's or class's contract. Policies repeat a few contracts over many tenants, so
        one read without complaint is remembered (by the port, the largest frame and the values
        given, with their types: ``True`` is not ``1``) and given again for the same values.
        Only one without complaint: a complaint names a place."""
        given = _contract_key(data)
        key = (self.egress, self.largest_frame, given) if given is not None else None
        found = recall("contracts", key) if key is not None else None
        if found is not None:
            return found  # type: ignore[no-any-return]
        errors, warnings = len(self.errors), len(self.warnings)
        contract = self._read_contract(data, path)
        if key is not None and len(self.errors) == errors and len(self.warnings) == warnings:
            remember("contracts", key, contract)
        return contract

    def _read_contract(self, data: dict[str, Any], path: str) -> Contract:
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
        return shared(Contract(rate, burst, ceil, shaper, microburst, meter))

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
        return shared(Meter(
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
        ))

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
        """Explicit bursts that make policers hurt TCP: too small for the largest frame or ~1 ms at the rate."""
        smallest = smallest_meter_burst(kind, self.largest_frame)
        for size_key, rate_key in _METER_BUCKETS[kind]:
            size, rate_bits = values.get(size_key), values.get(rate_key)
            if not size or not rate_bits:
                continue
            rate = rate_bits // 8
            where = f"{_at(path, size_key)}: {data[size_key]!r}"
            largest = format_size(self.largest_frame)
            if size < smallest and kind == "rfc4115":
                self.warnings.append(
                    f"{where} is not larger than the largest frame ({largest}): RFC 4115 passes a packet only if the bucket holds more "
                    "than its bytes, so a frame that size never would (set largest_frame if the network's frames are smaller)"
                )
            elif size < smallest:
                self.warnings.append(
                    f"{where} is smaller than the largest frame ({largest}): a frame that size "
                    "would never fit in the bucket (set largest_frame if the network's frames are smaller)"
                )
            elif size < rate // 1000:
                default = format_size(default_burst(rate, smallest))
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
        overload = read_overload(self, data["overload"], _at(path, "overload"), buffer) if "overload" in data else None
        if rate is None or buffer is None or isinstance(mode, _Bad) or alpha_log2 is None or reserve is None:
            return None
        if ("microburst" in data and microburst is None) or ("overload" in data and overload is None):
            return None
        if buffer < self.largest_frame:
            self.warnings.append(
                f"{_at(path, 'buffer')}: {data['buffer']!r} is smaller than the largest frame ({format_size(self.largest_frame)}): "
                "frames that size are always dropped"
            )
        if reserve > buffer:
            self.error(_at(path, "reserve"), f"{data['reserve']!r} is more than the buffer {data['buffer']!r}: a reserve is part of the buffer")
            return None
        return Port(rate, buffer, mode, alpha_log2, reserve, microburst, overload)  # type: ignore[arg-type]

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
