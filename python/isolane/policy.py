"""Tenant policies: the file format, its validation, and its compilation into classification tables.

A policy is read from YAML or TOML (:meth:`Policy.from_file`) or built from a dict
(:meth:`Policy.from_dict`). It is checked completely before anything else happens: every problem is
collected and reported at once in one :class:`PolicyError`, each naming its place
(``tenants[2].rules[5].dst: '10.0.0.0/33' is not a valid prefix``). Rules that can never match are
reported as :class:`PolicyWarning` warnings. :meth:`Policy.compile` turns a policy into the numpy
arrays of ``docs/classify-contract.md`` (:class:`CompiledPolicy`, one :class:`TenantTables` per
tenant). ``docs/policy.md`` is the user documentation; :func:`schema_text` gives the JSON Schema.

The quality-of-service part of a policy (meters, shapers, guarantees and ceilings, the egress
port; ``docs/qos.md``) is checked here too, and :meth:`Policy.compile_qos` turns it into the
integer arrays the Rust meters and schedulers take (:class:`CompiledQos`).
"""

from __future__ import annotations

import bisect
import difflib
import functools
import hashlib
import importlib
import ipaddress
import itertools
import json
import math
import os
import re
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any, Literal, TypeVar, Union

import numpy as np
import numpy.typing as npt

from isolane._core import IsolaneError

__all__ = [
    "ACTION_ALLOW",
    "ACTION_DROP",
    "COLORS",
    "COLOR_ACTIONS",
    "COUNT_MODES",
    "COUNT_OVERHEAD",
    "DEFAULT_COLOR_MAP",
    "DEFAULT_LARGEST_FRAME",
    "DSCP_NAMES",
    "MAX_BURST_BYTES",
    "MAX_RATE_BYTES",
    "METER_KINDS",
    "METER_NONE",
    "NO_CLASS",
    "PORT_ALPHA_LOG2",
    "PORT_MODES",
    "PROTOCOLS",
    "RULE_FIELDS",
    "CompiledPolicy",
    "CompiledQos",
    "Contract",
    "Meter",
    "MeterArrays",
    "Microburst",
    "Policy",
    "PolicyError",
    "PolicyWarning",
    "Port",
    "Remark",
    "Rule",
    "Shaper",
    "ShaperArrays",
    "Tenant",
    "TenantTables",
    "TrafficClass",
    "default_burst",
    "format_duration",
    "format_rate",
    "format_size",
    "parse_duration",
    "parse_rate",
    "parse_size",
    "schema",
    "schema_text",
]

# ---------------------------------------------------------------------------------------------
# Constants
# ---------------------------------------------------------------------------------------------

SCHEMA_VERSION = 1
"""The only ``version`` a policy file may declare today."""
MAX_VNI = (1 << 24) - 1
MAX_VLAN = 4095
MAX_PORT = 65535
MAX_PRIORITY = 7
ACTION_DROP = 0
"""``TenantTables.action`` / ``default_action`` / ``CompiledPolicy.unknown_action`` value: drop."""
ACTION_ALLOW = 1
"""... and allow."""
NO_CLASS = 0xFFFF
"""``TenantTables.cls`` / ``default_cls`` of a drop: dropped packets go into no class."""
MAX_RULE_EXPANSION = 65536
"""A single policy rule may expand into at most this many table rules."""
MAX_CLASSES = NO_CLASS
"""Class ids are uint16 and ``NO_CLASS`` is reserved."""

Action = Literal["allow", "drop"]
ACTIONS: tuple[Action, ...] = ("allow", "drop")

# -- quality of service (docs/qos.md) -----------------------------------------------------------

MAX_WEIGHT = (1 << 32) - 1
"""Weights are 32-bit (the Rust port scheduler's ``QueueConfig.weight``)."""
DEFAULT_PRIORITY = MAX_PRIORITY
"""The priority of a class that names none: the last, so it never preempts a class that asked
for a priority."""
MAX_BURST_BYTES = 8 << 30
"""The largest burst (8 GiB): the Rust meter's ``MAX_BURST_BYTES`` (two full buckets in
nano-bytes must fit in a u64)."""
MAX_RATE_BYTES = 1 << 42
"""The largest rate in bytes per second (about 35 Tbit/s): the Rust shapers' ``MAX_RATE``, so that
their products of a time, a rate and a size stay exact."""
DEFAULT_LARGEST_FRAME = 9216
"""The largest frame (bytes) when the policy names none: a jumbo frame."""
MIN_FRAME = 64
"""The smallest Ethernet frame: no shaper burst and no ``largest_frame`` may be below it."""
MAX_LARGEST_FRAME = (1 << 32) - 1
"""``largest_frame`` is 32-bit in the Rust meter."""
DEFAULT_MAX_DELAY_NS = 1_000_000
"""A shaper's queue bound when it names neither ``queue`` nor ``max_delay``: 1 ms at its rate."""

METER_NONE = 0
"""``MeterArrays.kind`` of a tenant or class without a meter."""
MeterKind = Literal["srtcm", "trtcm", "rfc4115"]
#: Meter kinds and their codes in ``MeterArrays.kind``: RFC 2697, RFC 2698, RFC 4115.
METER_KINDS: dict[str, int] = {"srtcm": 1, "trtcm": 2, "rfc4115": 3}
Count = Literal["inner", "outer", "wire", "wire_fcs"]
#: Which bytes of a packet count, and their codes: the tenant's inner frame (the outer frame for
#: untunnelled traffic), the outer frame as captured, the outer frame plus 20 B of preamble and
#: inter-frame gap, or plus 24 B (preamble, gap and an FCS the capture does not hold).
COUNT_MODES: dict[str, int] = {"inner": 0, "outer": 1, "wire": 2, "wire_fcs": 3}
#: Bytes added to each frame per count mode.
COUNT_OVERHEAD: dict[str, int] = {"inner": 0, "outer": 0, "wire": 20, "wire_fcs": 24}
Color = Literal["green", "yellow", "red"]
#: Colours and their codes (the Rust meter's ``Color``).
COLORS: dict[str, int] = {"green": 0, "yellow": 1, "red": 2}
#: What a meter does with a packet of a colour, and the codes in ``MeterArrays.action``.
COLOR_ACTIONS: dict[str, int] = {"pass": 0, "remark": 1, "drop": 2}
PortMode = Literal["per_tenant", "shared_fifo"]
#: Egress port modes and their codes in ``CompiledQos.port_mode``.
PORT_MODES: dict[str, int] = {"per_tenant": 0, "shared_fifo": 1}

#: Protocol names accepted by ``proto`` (IANA protocol numbers). The first name of a number is the
#: one ``to_dict`` writes.
PROTOCOLS: dict[str, int] = {
    "hopopt": 0,
    "icmp": 1,
    "igmp": 2,
    "ipip": 4,
    "tcp": 6,
    "egp": 8,
    "udp": 17,
    "dccp": 33,
    "ipv6": 41,
    "rsvp": 46,
    "gre": 47,
    "esp": 50,
    "ah": 51,
    "icmpv6": 58,
    "ipv6-icmp": 58,
    "ospf": 89,
    "pim": 103,
    "vrrp": 112,
    "l2tp": 115,
    "sctp": 132,
    "udplite": 136,
}
_PROTO_NAME: dict[int, str] = {}
for _name, _number in PROTOCOLS.items():
    _PROTO_NAME.setdefault(_number, _name)

#: Protocols whose packets carry ports in ``isolane.parse`` (tcp, udp, dccp, sctp, udplite).
PORT_PROTOCOLS = frozenset({6, 17, 33, 132, 136})


def _dscp_names() -> dict[str, int]:
    names = {"cs0": 0, "be": 0, "df": 0, "le": 1}
    for n in range(1, 8):
        names[f"cs{n}"] = 8 * n
    for x in range(1, 5):
        for y in range(1, 4):
            names[f"af{x}{y}"] = 8 * x + 2 * y
    names["va"] = 44
    names["ef"] = 46
    return names


#: DSCP names (RFC 2474, 2597, 3246, 5865, 8622): ``csN`` = 8N, ``afXY`` = 8X + 2Y, ``ef`` = 46,
#: ``va`` = 44, ``le`` = 1, ``be``/``df``/``cs0`` = 0.
DSCP_NAMES: dict[str, int] = _dscp_names()
_DSCP_NAME: dict[int, str] = {number: name for name, number in DSCP_NAMES.items() if name not in ("be", "df")}

#: The colour map when the policy gives none: the AF drop precedences of RFC 2597, ``afX1``
#: green, ``afX2`` yellow, ``afX3`` red; every other DSCP is green. Only non-green entries are
#: listed, as ``(dscp, colour)`` sorted by DSCP.
DEFAULT_COLOR_MAP: tuple[tuple[int, Color], ...] = tuple(
    sorted((8 * x + 2 * y, "yellow" if y == 2 else "red") for x in range(1, 5) for y in (2, 3))
)

#: The rule arrays, in ``RuleTable``'s argument order (``docs/classify-contract.md``).
RULE_FIELDS: tuple[str, ...] = (
    "src",
    "src_len",
    "dst",
    "dst_len",
    "src_port_lo",
    "src_port_hi",
    "dst_port_lo",
    "dst_port_hi",
    "proto",
    "proto_mask",
    "dscp",
    "dscp_mask",
)

# Keys of each mapping in the file, in the order to_dict writes them.
_CONTRACT_KEYS = ("rate", "burst", "ceil", "meter", "shaper", "microburst")
_TOP_KEYS = ("version", "description", "unknown_tenant", "count", "largest_frame", "color_map", "port", "tenants")
_TENANT_KEYS = (
    "name",
    "description",
    "vnis",
    "vlans",
    "sources",
    "weight",
    *_CONTRACT_KEYS,
    "classes",
    "default_class",
    "default",
    "rules",
)
_CLASS_KEYS = ("name", "description", "priority", "weight", *_CONTRACT_KEYS)
_RULE_KEYS = ("name", "description", "src", "dst", "src_ports", "dst_ports", "proto", "dscp", "action", "class")
_SHAPER_KEYS = ("rate", "burst", "queue", "max_delay")
_MICROBURST_KEYS = ("window", "threshold")
_PORT_KEYS = ("rate", "buffer", "mode", "alpha", "reserve")
#: The dynamic threshold's alpha is 2**k for k in this range (1/128 to 128), as switches offer it.
PORT_ALPHA_LOG2 = range(-7, 8)
_METER_KEYS = ("kind", "cir", "cbs", "eir", "ebs", "pir", "pbs", "color_aware", "count", "actions")
#: The rates and bursts of each meter kind, in the order to_dict writes them.
_METER_FIELDS: dict[str, tuple[str, ...]] = {
    "srtcm": ("cir", "cbs", "ebs"),
    "trtcm": ("cir", "cbs", "pir", "pbs"),
    "rfc4115": ("cir", "cbs", "eir", "ebs"),
}
_METER_REQUIRED: dict[str, tuple[str, ...]] = {"srtcm": ("cir",), "trtcm": ("cir", "pir"), "rfc4115": ("cir", "eir")}
#: Each burst and the rate that fills it, per kind.
_METER_BUCKETS: dict[str, tuple[tuple[str, str], ...]] = {
    "srtcm": (("cbs", "cir"), ("ebs", "cir")),
    "trtcm": (("cbs", "cir"), ("pbs", "pir")),
    "rfc4115": (("cbs", "cir"), ("ebs", "eir")),
}
_METER_WORDS = {"cir": "committed rate", "eir": "excess rate", "pir": "peak rate"}

# ---------------------------------------------------------------------------------------------
# Errors and warnings
# ---------------------------------------------------------------------------------------------


class PolicyError(IsolaneError, ValueError):
    """A policy that cannot be used. ``errors`` lists every problem found as ``(path, message)``
    (path ``""`` is the policy itself); ``source`` is the file it came from, if any."""

    errors: list[tuple[str, str]]
    source: str | None

    def __init__(self, errors: Sequence[tuple[str, str]], source: str | os.PathLike[str] | None = None) -> None:
        self.errors = list(errors)
        self.source = None if source is None else os.fspath(source)
        super().__init__(self._render())

    def _render(self) -> str:
        lines = [_render_error(path, message) for path, message in self.errors]
        where = f"{self.source}: " if self.source else ""
        if len(lines) == 1:
            return where + lines[0]
        head = f"{where}{len(lines)} errors" if where else f"{len(lines)} errors in the policy"
        shown = lines[:_MAX_LISTED_ERRORS]
        if len(lines) > len(shown):
            shown.append(f"... and {len(lines) - len(shown)} more (all of them are in the exception's .errors)")
        return head + ":\n" + "\n".join("  " + line for line in shown)

    def __str__(self) -> str:
        return self._render()


_MAX_LISTED_ERRORS = 200


def _render_error(path: str, message: str) -> str:
    return f"{path or 'policy'}: {message}"


class PolicyWarning(UserWarning):
    """Something in a valid policy that is probably a mistake, such as a rule that can never
    match because earlier rules cover it."""


# ---------------------------------------------------------------------------------------------
# Units
# ---------------------------------------------------------------------------------------------

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


def _parse_quantity(value: object, pattern: re.Pattern[str], kind: str, example: str) -> Fraction:
    if isinstance(value, bool) or not isinstance(value, str):
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            raise ValueError(f"{value!r} has no unit: write it as a string with its unit, e.g. {example!r}")
        raise ValueError(f"expected a {kind} like {example!r}, got {_describe(value)}")
    match = pattern.fullmatch(value)
    if not match:
        units = {"rate": _ALL_RATE_UNITS, "size": _ALL_SIZE_UNITS}.get(kind, list(_TIME_UNITS))
        raise ValueError(_unit_problem(value, kind, units, example))
    groups = match.groups()
    number = Fraction(groups[0])
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
    bits = _parse_quantity(value, _RATE_RE, "rate", "40Gbps")
    if bits.denominator != 1:
        raise ValueError(f"{value!r} is not a whole number of bits per second")
    return int(bits)


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


def _span(size_bytes: int, rate_bytes_per_s: int) -> str:
    """How long ``size_bytes`` lasts at the rate, as short text (three significant digits)."""
    ns = size_bytes * 1e9 / rate_bytes_per_s
    for unit, scale in (("s", 1e9), ("ms", 1e6), ("us", 1e3)):
        if ns >= scale:
            return f"{ns / scale:.3g}{unit}"
    return f"{ns:.3g}ns"


# ---------------------------------------------------------------------------------------------
# Addresses and ports
# ---------------------------------------------------------------------------------------------

Network = Union[ipaddress.IPv4Network, ipaddress.IPv6Network]
PortRange = tuple[int, int]

_OCTET = r"(?:25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])"
_IPV4 = rf"{_OCTET}(?:\.{_OCTET}){{3}}"
_H16 = r"[0-9A-Fa-f]{1,4}"
_LS32 = rf"(?:{_H16}:{_H16}|{_IPV4})"


def _ipv6_pattern() -> str:
    """RFC 3986's IPv6address grammar as a regular expression (valid in Python and ECMA-262)."""
    alternatives = [rf"(?:{_H16}:){{6}}{_LS32}", rf"::(?:{_H16}:){{5}}{_LS32}"]
    for before, after in ((0, 4), (1, 3), (2, 2), (3, 1), (4, 0)):
        alternatives.append(rf"(?:(?:{_H16}:){{0,{before}}}{_H16})?::(?:{_H16}:){{{after}}}{_LS32}")
    alternatives.append(rf"(?:(?:{_H16}:){{0,5}}{_H16})?::{_H16}")
    alternatives.append(rf"(?:(?:{_H16}:){{0,6}}{_H16})?::")
    return "(?:" + "|".join(alternatives) + ")"


_IPV6 = _ipv6_pattern()
_LEN4 = r"(?:3[0-2]|[12]?[0-9])"
_LEN6 = r"(?:12[0-8]|1[01][0-9]|[1-9]?[0-9])"
PREFIX_PATTERN = rf"^(?:any|{_IPV4}(?:/{_LEN4})?|{_IPV6}(?:/{_LEN6})?)$"
_PREFIX_RE = re.compile(PREFIX_PATTERN)
_ADDR_SHAPE_RE = re.compile(r"^([^/]*)(?:/(.*))?$")
_PORT_NUMBER = r"0*(?:6553[0-5]|655[0-2][0-9]|65[0-4][0-9]{2}|6[0-4][0-9]{3}|[1-5][0-9]{4}|[1-9][0-9]{0,3}|0)"
PORT_PATTERN = rf"^{_PORT_NUMBER}(?:-{_PORT_NUMBER})?$"
_PORT_TEXT_RE = re.compile(r"^([0-9]+)(?:-([0-9]+))?$")
_MAPPED_V4 = ipaddress.IPv6Network("::ffff:0:0/96")


@functools.lru_cache(maxsize=1 << 16)
def _parse_prefix(text: str) -> Network | None | str:
    """A prefix, ``None`` for ``any``, or the error message."""
    if _PREFIX_RE.fullmatch(text):
        if text == "any":
            return None
        try:
            return ipaddress.ip_network(text, strict=True)
        except ValueError:
            network = ipaddress.ip_network(text, strict=False)
            return f"{text!r} has host bits set; did you mean '{network}'?"
    bad = f"{text!r} is not a valid prefix"
    shape = _ADDR_SHAPE_RE.fullmatch(text.strip())
    if text != text.strip():
        return f"{bad}: remove the spaces around it"
    if shape is None or not shape.group(1):
        return bad
    address, length = shape.group(1), shape.group(2)
    if not re.fullmatch(_IPV4, address) and not re.fullmatch(_IPV6, address):
        return f"{bad}: {address!r} is not an IPv4 or IPv6 address"
    is_v4 = bool(re.fullmatch(_IPV4, address))
    if length is not None and not re.fullmatch(_LEN4 if is_v4 else _LEN6, length):
        if re.fullmatch(r"[0-9.]+", length) and "." in length:
            return f"{bad}: write a prefix length (/24), not a netmask"
        return f"{bad}: the length of an {'IPv4' if is_v4 else 'IPv6'} prefix is 0-{32 if is_v4 else 128}"
    return bad


@functools.lru_cache(maxsize=1 << 16)
def _mapped(network: Network | None) -> tuple[bytes, int]:
    """A prefix over the 128-bit IPv4-mapped address space: (16 address bytes, length)."""
    if network is None:
        return bytes(16), 0
    if network.version == 4:
        return bytes(10) + b"\xff\xff" + network.network_address.packed, 96 + network.prefixlen
    return network.network_address.packed, network.prefixlen


def _families(network: Network | None) -> frozenset[int]:
    """The IP versions of packets whose address can fall in ``network``."""
    if network is None:
        return frozenset((4, 6))
    if network.version == 4:
        return frozenset((4,))
    assert isinstance(network, ipaddress.IPv6Network)
    if network.subnet_of(_MAPPED_V4):
        return frozenset((4,))
    if network.supernet_of(_MAPPED_V4):
        return frozenset((4, 6))
    return frozenset((6,))


def _merge_ranges(ranges: Iterable[PortRange]) -> tuple[PortRange, ...]:
    merged: list[list[int]] = []
    for lo, hi in sorted(ranges):
        if merged and lo <= merged[-1][1] + 1:
            merged[-1][1] = max(merged[-1][1], hi)
        else:
            merged.append([lo, hi])
    return tuple((lo, hi) for lo, hi in merged)


# ---------------------------------------------------------------------------------------------
# The policy model
# ---------------------------------------------------------------------------------------------


_T = TypeVar("_T")


def _unless_none(convert: Callable[[_T], Any], value: _T | None) -> Any:
    return None if value is None else convert(value)


def _given(**values: Any) -> dict[str, Any]:
    """The values that are set, in order: ``to_dict`` leaves defaults (``None``) out."""
    return {key: value for key, value in values.items() if value is not None}


@dataclass(frozen=True)
class Shaper:
    """An earliest-departure-time shaper: packets leave no faster than ``rate_bps`` after a
    ``burst_bytes`` burst; a packet that would make the queue hold more than ``queue_bytes`` or
    wait longer than ``max_delay_ns`` is dropped. ``None`` is the default (``docs/qos.md``): the
    rate is the owner's ``ceil``, else its ``rate``; the burst 1 ms at the rate; a missing queue
    bound follows from the other one, and without either the queue holds 1 ms at the rate."""

    rate_bps: int | None = None
    burst_bytes: int | None = None
    queue_bytes: int | None = None
    max_delay_ns: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return _given(
            rate=_unless_none(format_rate, self.rate_bps),
            burst=_unless_none(format_size, self.burst_bytes),
            queue=_unless_none(format_size, self.queue_bytes),
            max_delay=_unless_none(format_duration, self.max_delay_ns),
        )


@dataclass(frozen=True)
class Remark:
    """A meter action: pass the packet with its DSCP rewritten to ``dscp``."""

    dscp: int

    def to_dict(self) -> dict[str, Any]:
        return {"remark": _DSCP_NAME.get(self.dscp, self.dscp)}


ColorAction = Union[Literal["pass", "drop"], Remark]


def _action_to_data(action: ColorAction) -> str | dict[str, Any]:
    return action.to_dict() if isinstance(action, Remark) else action


@dataclass(frozen=True)
class Meter:
    """A token-bucket meter: RFC 2697 srTCM (``cir``, ``cbs``, ``ebs``), RFC 2698 trTCM (``cir``,
    ``cbs``, ``pir``, ``pbs``) or RFC 4115 (``cir``, ``cbs``, ``eir``, ``ebs``). Rates are bits per
    second as written (the compiled view has bytes), bursts bytes; ``None`` is the default burst
    (:func:`default_burst` of its rate) and, for ``count``, the policy's ``count``. Fields that
    the kind does not have are ``None``. A colour-aware meter reads the packet's colour from its
    DSCP through the policy's ``color_map``. ``green``/``yellow``/``red`` say what happens to
    packets of each colour."""

    kind: MeterKind
    cir_bps: int
    cbs_bytes: int | None = None
    ebs_bytes: int | None = None
    pir_bps: int | None = None
    pbs_bytes: int | None = None
    eir_bps: int | None = None
    color_aware: bool = False
    count: Count | None = None
    green: ColorAction = "pass"
    yellow: ColorAction = "pass"
    red: ColorAction = "drop"

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": self.kind}
        values = {
            "cir": self.cir_bps,
            "cbs": self.cbs_bytes,
            "ebs": self.ebs_bytes,
            "pir": self.pir_bps,
            "pbs": self.pbs_bytes,
            "eir": self.eir_bps,
        }
        for key in _METER_FIELDS[self.kind]:
            value = values[key]
            if value is not None:
                out[key] = format_rate(value) if key.endswith("ir") else format_size(value)
        out["color_aware"] = self.color_aware
        if self.count is not None:
            out["count"] = self.count
        out["actions"] = {"green": _action_to_data(self.green), "yellow": _action_to_data(self.yellow), "red": _action_to_data(self.red)}
        return out


@dataclass(frozen=True)
class Port:
    """The egress port the tenants share: its line rate (bits per second), its buffer (bytes),
    whether it schedules per tenant and class or is one shared FIFO, and how per-tenant queues
    share the buffer (``docs/qos.md``, "Sharing the buffer"): each queue may hold at most
    ``2 ** alpha_log2`` times the shared buffer still free, and ``reserve_bytes`` of the buffer
    are set aside for the guarantees."""

    rate_bps: int
    buffer_bytes: int
    mode: PortMode = "per_tenant"
    alpha_log2: int = 0
    reserve_bytes: int = 0

    @property
    def alpha(self) -> int | float:
        """The dynamic threshold's alpha (exact: a power of two)."""
        return 1 << self.alpha_log2 if self.alpha_log2 >= 0 else 0.5**-self.alpha_log2

    def to_dict(self) -> dict[str, Any]:
        out = {"rate": format_rate(self.rate_bps), "buffer": format_size(self.buffer_bytes), "mode": self.mode}
        return out | _given(alpha=self.alpha if self.alpha_log2 else None, reserve=format_size(self.reserve_bytes) if self.reserve_bytes else None)


@dataclass(frozen=True)
class Microburst:
    """Microburst detection settings (placeholder: used by the upcoming microburst detection):
    a ``window_ns`` window carrying more than ``threshold_bps`` is a microburst."""

    window_ns: int
    threshold_bps: int

    def to_dict(self) -> dict[str, Any]:
        return {"window": format_duration(self.window_ns), "threshold": format_rate(self.threshold_bps)}


@dataclass(frozen=True)
class Contract:
    """The contract of a tenant or a class (``docs/qos.md``): its guarantee (``rate_bps``, with
    ``burst_bytes``) and ceiling (``ceil_bps``) at the egress port, a meter, a shaper, and
    microburst detection (upcoming). All rates are in bits per second, sizes in bytes; ``None``
    is the default."""

    rate_bps: int | None = None
    burst_bytes: int | None = None
    ceil_bps: int | None = None
    shaper: Shaper | None = None
    microburst: Microburst | None = None
    meter: Meter | None = None

    def to_dict(self) -> dict[str, Any]:
        return _given(
            rate=_unless_none(format_rate, self.rate_bps),
            burst=_unless_none(format_size, self.burst_bytes),
            ceil=_unless_none(format_rate, self.ceil_bps),
            meter=_unless_none(Meter.to_dict, self.meter),
            shaper=_unless_none(Shaper.to_dict, self.shaper),
            microburst=_unless_none(Microburst.to_dict, self.microburst),
        )


@dataclass(frozen=True)
class TrafficClass:
    """A tenant's traffic class; its id is its index in ``Tenant.classes``. ``priority`` (0
    first) and ``weight`` (its share within the priority) schedule it at the egress port;
    ``None`` is the default (priority 7, weight 1)."""

    name: str
    priority: int | None = None
    weight: int | None = None
    contract: Contract = field(default_factory=Contract)
    description: str | None = None

    def to_dict(self) -> dict[str, Any]:
        out = _given(name=self.name, description=self.description, priority=self.priority, weight=self.weight)
        out.update(self.contract.to_dict())
        return out


@dataclass(frozen=True)
class Rule:
    """One policy rule. ``None`` matches anything; ``src_ports``/``dst_ports`` are sorted,
    merged inclusive ranges; ``proto``/``dscp`` sorted numbers. ``cls`` is the class name of an
    ``allow`` rule (the tenant's default class when the file names none), ``None`` for ``drop``."""

    action: Action
    cls: str | None = None
    src: Network | None = None
    dst: Network | None = None
    src_ports: tuple[PortRange, ...] | None = None
    dst_ports: tuple[PortRange, ...] | None = None
    proto: tuple[int, ...] | None = None
    dscp: tuple[int, ...] | None = None
    name: str | None = None
    description: str | None = None

    @property
    def expansion(self) -> int:
        """How many table rules this rule compiles into."""
        count = 1
        for values in (self.proto, self.dscp, self.src_ports, self.dst_ports):
            count *= len(values) if values else 1
        return count

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.name is not None:
            out["name"] = self.name
        if self.description is not None:
            out["description"] = self.description
        if self.src is not None:
            out["src"] = str(self.src)
        if self.dst is not None:
            out["dst"] = str(self.dst)
        for key, ports in (("src_ports", self.src_ports), ("dst_ports", self.dst_ports)):
            if ports is not None:
                out[key] = _ports_to_data(ports)
        if self.proto is not None:
            names = [_PROTO_NAME.get(p, p) for p in self.proto]
            out["proto"] = names[0] if len(names) == 1 else names
        if self.dscp is not None:
            dscps = [_DSCP_NAME.get(d, d) for d in self.dscp]
            out["dscp"] = dscps[0] if len(dscps) == 1 else dscps
        out["action"] = self.action
        if self.cls is not None:
            out["class"] = self.cls
        return out


def _ports_to_data(ports: tuple[PortRange, ...]) -> int | str | list[str]:
    # List entries are written as strings, which older isolane versions read the same (they read
    # a list of exactly two integers as a range).
    texts = [str(lo) if lo == hi else f"{lo}-{hi}" for lo, hi in ports]
    if len(ports) == 1:
        lo, hi = ports[0]
        return lo if lo == hi else texts[0]
    return texts


@dataclass(frozen=True)
class Tenant:
    """A tenant: what selects its traffic (``vnis``; ``vlans`` and ``sources`` for untunnelled
    traffic), its classes, rules (first match wins), default action and contract."""

    name: str
    vnis: tuple[int, ...] = ()
    vlans: tuple[int, ...] = ()
    sources: tuple[Network, ...] = ()
    classes: tuple[TrafficClass, ...] = (TrafficClass("default"),)
    default_class: str = "default"
    default: Action = "allow"
    rules: tuple[Rule, ...] = ()
    contract: Contract = field(default_factory=Contract)
    description: str | None = None
    weight: int | None = None
    """Its share of the port's spare capacity; ``None``: in proportion to its guarantee
    (``docs/qos.md``)."""

    @property
    def class_names(self) -> list[str]:
        return [c.name for c in self.classes]

    def class_id(self, name: str) -> int:
        """The id (index) of the class called ``name``."""
        return self.class_names.index(name)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name}
        if self.description is not None:
            out["description"] = self.description
        out["vnis"] = list(self.vnis)
        if self.vlans:
            out["vlans"] = list(self.vlans)
        if self.sources:
            out["sources"] = [str(s) for s in self.sources]
        if self.weight is not None:
            out["weight"] = self.weight
        out.update(self.contract.to_dict())
        out["classes"] = [c.to_dict() for c in self.classes]
        out["default_class"] = self.default_class
        out["default"] = self.default
        out["rules"] = [r.to_dict() for r in self.rules]
        return out


@dataclass(frozen=True)
class Policy:
    """A validated policy. Build it with :meth:`from_file` or :meth:`from_dict` (which check
    everything); ``to_dict`` gives the canonical data back (``from_dict(p.to_dict()) == p``)."""

    tenants: tuple[Tenant, ...] = ()
    unknown_tenant: Action = "drop"
    description: str | None = None
    count: Count = "outer"
    """Which bytes meters (unless they say otherwise), shapers and the port count."""
    largest_frame: int = DEFAULT_LARGEST_FRAME
    """The largest frame in bytes: no default burst is smaller."""
    color_map: tuple[tuple[int, Color], ...] = DEFAULT_COLOR_MAP
    """The incoming colour of each DSCP for colour-aware meters: ``(dscp, colour)`` for the
    DSCPs that are not green, sorted."""
    port: Port | None = None
    warnings: tuple[str, ...] = field(default=(), compare=False, repr=False)
    """The :class:`PolicyWarning` messages found when the policy was read."""

    @classmethod
    def from_file(cls, path: str | os.PathLike[str]) -> Policy:
        """Read a policy from a ``.yaml``/``.yml``, ``.toml`` or ``.json`` file (chosen by the
        extension). Raises :class:`PolicyError` listing every problem, ``FileNotFoundError``
        if there is no such file; warns (:class:`PolicyWarning`) about rules that never match."""
        data = _read_file(path)
        policy = _build(data, os.fspath(path))
        _emit(policy.warnings)
        return policy

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Policy:
        """Build a policy from data shaped like the file (see ``docs/policy.md``)."""
        policy = _build(data, None)
        _emit(policy.warnings)
        return policy

    def to_dict(self) -> dict[str, Any]:
        """The policy as plain data (str, int, bool, list, dict only; no ``None``), every default
        written out except the policy-wide QoS settings (``count``, ``largest_frame``,
        ``color_map``), which are written when they differ from the default; suitable for YAML,
        TOML or JSON."""
        out: dict[str, Any] = {"version": SCHEMA_VERSION}
        if self.description is not None:
            out["description"] = self.description
        out["unknown_tenant"] = self.unknown_tenant
        if self.count != "outer":
            out["count"] = self.count
        if self.largest_frame != DEFAULT_LARGEST_FRAME:
            out["largest_frame"] = format_size(self.largest_frame)
        if self.color_map != DEFAULT_COLOR_MAP:
            out["color_map"] = {_DSCP_NAME.get(dscp, str(dscp)): colour for dscp, colour in self.color_map}
        if self.port is not None:
            out["port"] = self.port.to_dict()
        out["tenants"] = [t.to_dict() for t in self.tenants]
        return out

    @property
    def tenant_names(self) -> list[str]:
        return [t.name for t in self.tenants]

    def tenant(self, name: str) -> Tenant:
        """The tenant called ``name`` (``KeyError`` if none)."""
        for tenant in self.tenants:
            if tenant.name == name:
                return tenant
        raise KeyError(name)

    def compile(self) -> CompiledPolicy:
        """The classification tables of this policy (``docs/classify-contract.md``)."""
        return _compile(self)

    def compile_qos(self) -> CompiledQos:
        """The QoS settings of this policy as integer arrays for the Rust meters, shapers and
        port scheduler, every default filled in (``docs/qos.md``); computed once."""
        return self._qos

    @functools.cached_property
    def _qos(self) -> CompiledQos:
        return _compile_qos(self)

    @functools.cached_property
    def _tables(self) -> tuple[TenantTables, ...]:
        return tuple(_tenant_tables(t) for t in self.tenants)


def _emit(messages: Iterable[str]) -> None:
    for message in messages:
        # stacklevel 3: the caller of Policy.from_file / from_dict
        warnings.warn(message, PolicyWarning, stacklevel=3)


# ---------------------------------------------------------------------------------------------
# Reading files
# ---------------------------------------------------------------------------------------------


def _read_file(path: str | os.PathLike[str]) -> Any:
    suffix = Path(path).suffix.lower()
    if suffix not in (".yaml", ".yml", ".toml", ".json"):
        raise PolicyError(
            [("", f"cannot tell the format from the extension {suffix or '(none)'!r}: use .yaml, .yml, .toml or .json")],
            path,
        )
    raw = Path(path).read_bytes()  # FileNotFoundError as it is
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as err:
        raise PolicyError([("", f"not UTF-8 text (byte {err.start})")], path) from None
    if suffix == ".toml":
        return _load_toml(text, path)
    if suffix == ".json":
        try:
            return json.loads(text)
        except json.JSONDecodeError as err:
            raise PolicyError([("", f"line {err.lineno}, column {err.colno}: {err.msg}")], path) from None
    return _load_yaml(text, path)


def _load_toml(text: str, path: str | os.PathLike[str]) -> Any:
    try:
        toml: Any = importlib.import_module("tomllib")
    except ModuleNotFoundError:  # Python 3.10
        try:
            toml = importlib.import_module("tomli")
        except ModuleNotFoundError:
            raise PolicyError([("", "reading TOML needs Python 3.11 or the 'tomli' package")], path) from None
    try:
        return toml.loads(text)
    except toml.TOMLDecodeError as err:
        raise PolicyError([("", f"invalid TOML: {err}")], path) from None


def _load_yaml(text: str, path: str | os.PathLike[str]) -> Any:
    try:
        yaml: Any = importlib.import_module("yaml")
    except ModuleNotFoundError:
        raise PolicyError([("", "reading YAML needs the 'PyYAML' package (pip install pyyaml)")], path) from None

    class Loader(yaml.SafeLoader):  # type: ignore[misc]
        """SafeLoader that refuses duplicate keys instead of keeping the last one."""

    def construct_mapping(loader: Any, node: Any, deep: bool = False) -> Any:
        loader.flatten_mapping(node)
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            key = loader.construct_object(key_node, deep=True)
            line = key_node.start_mark.line + 1
            try:
                if key in seen:
                    raise PolicyError([("", f"line {line}: duplicate key {key!r} (first at line {seen[key]})")], path)
                seen[key] = line
            except TypeError:  # an unhashable key: SafeLoader reports it below
                pass
        return loader.construct_mapping(node, deep)

    Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, construct_mapping)
    try:
        return yaml.load(text, Loader=Loader)  # noqa: S506 (a SafeLoader)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
        problem = getattr(err, "problem", None) or str(err)
        raise PolicyError([("", f"invalid YAML: {where}{problem}")], path) from None


# ---------------------------------------------------------------------------------------------
# Validation
# ---------------------------------------------------------------------------------------------


def _describe(value: object) -> str:
    if value is None:
        return "nothing (null)"
    if isinstance(value, bool):
        return f"a boolean ({str(value).lower()})"
    if isinstance(value, int):
        return f"an integer ({value})"
    if isinstance(value, float):
        return f"a number ({value!r})"
    if isinstance(value, str):
        text = value if len(value) <= 40 else value[:37] + "..."
        return f"a string ({text!r})"
    if isinstance(value, Mapping):
        return "a mapping"
    if isinstance(value, (list, tuple)):
        return "a list"
    return f"a {type(value).__name__}"


def _or_list(words: Sequence[str]) -> str:
    quoted = [repr(w) for w in words]
    if len(quoted) <= 1:
        return "".join(quoted)
    return ", ".join(quoted[:-1]) + " or " + quoted[-1]


def _did_you_mean(word: str, choices: Iterable[str]) -> str:
    choices = list(choices)
    close = difflib.get_close_matches(word, choices, n=1, cutoff=0.6)
    if not close:
        lower = {c.lower(): c for c in choices}
        if word.lower() in lower:
            close = [lower[word.lower()]]
    return f"; did you mean {close[0]!r}?" if close else ""


def _at(path: str, key: str | int) -> str:
    if isinstance(key, int):
        return f"{path}[{key}]"
    return f"{path}.{key}" if path else key


class _Bad:
    """Marks a value that was reported as an error."""


BAD = _Bad()


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

    def integer(self, value: Any, path: str, lo: int, hi: int | None, what: str, note: str = "") -> int | _Bad:
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if isinstance(value, bool) or not isinstance(value, int):
            self.error(path, f"expected {what} (an integer), got {_describe(value)}")
            return BAD
        if value < lo or (hi is not None and value > hi):
            bounds = f"{lo}-{hi}" if hi is not None else f"at least {lo}"
            self.error(path, f"{what} {value} is outside {bounds}{note}" if hi is not None else f"{what} must be {bounds}, got {value}")
            return BAD
        return value

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
        if bits // 8 > MAX_RATE_BYTES:
            self.error(path, f"{value!r} is over the largest rate isolane handles, {MAX_RATE_BYTES:,} B/s (about 35.2Tbps)")
            return None
        return bits

    def burst(self, value: Any, path: str, zero_ok: bool = False) -> int | None:
        size = self.quantity(value, path, parse_size, zero_ok)
        if size is not None and size > MAX_BURST_BYTES:
            self.error(path, f"{value!r} is over the largest burst, {format_size(MAX_BURST_BYTES)} (the limit of isolane's token buckets)")
            return None
        return size

    def weight(self, value: Any, path: str) -> int | None | _Bad:
        weight = self.integer(value, path, 1, None, "weight")
        if isinstance(weight, int) and weight > MAX_WEIGHT:
            self.error(path, f"weight {weight} is over {MAX_WEIGHT} (32 bits)")
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
        shaper = self.shaper(data["shaper"], _at(path, "shaper"), has_rate=rate is not None or ceil is not None) if "shaper" in data else None
        microburst = None
        if "microburst" in data:
            mpath = _at(path, "microburst")
            mdata = self.mapping(data["microburst"], mpath, _MICROBURST_KEYS, required=_MICROBURST_KEYS)
            if mdata is not None:
                window = self.quantity(mdata["window"], _at(mpath, "window"), parse_duration) if "window" in mdata else None
                threshold = self.quantity(mdata["threshold"], _at(mpath, "threshold"), parse_rate) if "threshold" in mdata else None
                if window is not None and threshold is not None:
                    microburst = Microburst(window, threshold)
        return Contract(rate, burst, ceil, shaper, microburst, meter)

    def shaper(self, value: Any, path: str, has_rate: bool) -> Shaper | None:
        data = self.mapping(value, path, _SHAPER_KEYS)
        if data is None:
            return None
        before = len(self.errors)
        rate = self.byte_rate(data["rate"], _at(path, "rate")) if "rate" in data else None
        burst = self.burst(data["burst"], _at(path, "burst")) if "burst" in data else None
        queue = self.quantity(data["queue"], _at(path, "queue"), parse_size) if "queue" in data else None
        max_delay = self.quantity(data["max_delay"], _at(path, "max_delay"), parse_duration) if "max_delay" in data else None
        if burst is not None and burst < MIN_FRAME:
            self.error(_at(path, "burst"), f"{data['burst']!r} is smaller than the smallest frame ({MIN_FRAME}B): no frame could leave at once")
        if len(self.errors) > before:
            return None
        if rate is None and not has_rate:
            self.error(path, "a shaper needs a rate: give it 'rate', or give its tenant or class a 'ceil' or 'rate' (it then shapes to the ceil, else the rate)")
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

    def meter(self, value: Any, path: str) -> Meter | None:
        data = self.mapping(value, path, _METER_KEYS, required=("kind",))
        if data is None:
            return None
        before = len(self.errors)
        kind = self.choice(data["kind"], _at(path, "kind"), tuple(METER_KINDS), "a meter kind") if "kind" in data else BAD
        fields = _METER_FIELDS[kind] if isinstance(kind, str) else _METER_KEYS[1:7]
        if isinstance(kind, str):
            for key in _METER_KEYS[1:7]:
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
        data = self.mapping(value, path, tuple(COLORS))
        out: dict[str, ColorAction] = {}
        for colour, item in (data or {}).items():
            where = _at(path, colour)
            if isinstance(item, Mapping):
                remark = self.mapping(item, where, ("remark",), required=("remark",))
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
        buffer = self.quantity(data["buffer"], _at(path, "buffer"), parse_size) if "buffer" in data else None
        mode = self.choice(data["mode"], _at(path, "mode"), tuple(PORT_MODES), "a port mode") if "mode" in data else "per_tenant"
        alpha_log2 = self.port_alpha(data["alpha"], _at(path, "alpha")) if "alpha" in data else 0
        reserve = self.quantity(data["reserve"], _at(path, "reserve"), parse_size, zero_ok=True) if "reserve" in data else 0
        if rate is None or buffer is None or isinstance(mode, _Bad) or alpha_log2 is None or reserve is None:
            return None
        if buffer < self.largest_frame:
            self.warnings.append(f"{_at(path, 'buffer')}: {data['buffer']!r} is smaller than the largest frame ({format_size(self.largest_frame)}): frames that size are always dropped")
        if reserve > buffer:
            self.error(_at(path, "reserve"), f"{data['reserve']!r} is more than the buffer {data['buffer']!r}: a reserve is part of the buffer")
            return None
        return Port(rate, buffer, mode, alpha_log2, reserve)  # type: ignore[arg-type]

    def port_alpha(self, value: Any, path: str) -> int | None:
        """The dynamic threshold's alpha, a power of two from 1/128 to 128: its log2."""
        if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0:
            mantissa, exponent = math.frexp(value)
            if mantissa == 0.5 and exponent - 1 in PORT_ALPHA_LOG2:
                return exponent - 1
        self.error(path, f"alpha {value!r} is not a power of two from 1/128 to 128 (e.g. 0.25, 1, 8): a queue may hold alpha x the free buffer, and switches offer these")
        return None

    def color_map(self, value: Any, path: str) -> tuple[tuple[int, Color], ...] | None:
        if not isinstance(value, Mapping):
            self.error(path, f"expected a mapping from DSCP to colour (e.g. {{af12: yellow}}), got {_describe(value)}")
            return None
        before = len(self.errors)
        seen: dict[int, str] = {}
        out: dict[int, Color] = {}
        for key, colour in value.items():
            where = _at(path, str(key))
            dscp: int | None = None
            if isinstance(key, str) and key.isdigit():
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
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if isinstance(value, int) and not isinstance(value, bool):
            if not 0 <= value <= MAX_PORT:
                self.error(path, f"port {value} is outside 0-{MAX_PORT}")
                return None
            return (value, value)
        if isinstance(value, str):
            match = _PORT_TEXT_RE.fullmatch(value)
            if not match:
                self.error(path, f"{value!r} is not a port or a port range (write 80 or '8000-8080')")
                return None
            lo = int(match.group(1))
            hi = int(match.group(2)) if match.group(2) is not None else lo
            return self._range(lo, hi, path, value)
        if in_list and _is_int_pair(value):
            lo, hi = (int(v) for v in value)
            return self._range(lo, hi, path, list(value))
        expected = "a port (integer) or a range ('80-90' or [80, 90])" if in_list else "a port (integer), a range ('80-90') or a list of them"
        self.error(path, f"expected {expected}, got {_describe(value)}")
        return None

    def _range(self, lo: int, hi: int, path: str, text: Any) -> PortRange | None:
        bad = [p for p in (lo, hi) if p > MAX_PORT]
        if bad:
            self.error(path, f"port {bad[0]} is outside 0-{MAX_PORT}")
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
        name = self.string(data["name"], _at(path, "name")) if "name" in data else None
        description = self.string(data["description"], _at(path, "description")) if "description" in data else None
        action = self.choice(data["action"], _at(path, "action"), ACTIONS, "an action") if "action" in data else BAD
        cls: str | _Bad | None = None
        if "class" in data:
            cls = self.string(data["class"], _at(path, "class"), "a class name")
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
        name = self.string(data["name"], _at(path, "name"), "a class name", non_empty=True) if "name" in data else BAD
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
        name = self.string(data["name"], _at(path, "name"), "a tenant name", non_empty=True) if "name" in data else BAD
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
            seen: dict[str, int] = {}
            for i, item in enumerate(items or []):
                tc = self.traffic_class(item, _at(classes_path, i))
                if tc is None:
                    class_names = None
                elif tc.name in seen:
                    self.error(_at(_at(classes_path, i), "name"), f"class {tc.name!r} is already defined at {classes_path}[{seen[tc.name]}]")
                else:
                    seen[tc.name] = i
                    classes.append(tc)
            if items is None or not items:
                class_names = None
            elif class_names is not None:
                class_names = [c.name for c in classes]
                self.class_contracts(contract, classes, path)

        default_class: str | None = class_names[0] if class_names else None
        if "default_class" in data:
            given = self.string(data["default_class"], _at(path, "default_class"), "a class name")
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


def _is_int_pair(value: Any) -> bool:
    return (
        isinstance(value, (list, tuple))
        and len(value) == 2
        and all((isinstance(v, int) and not isinstance(v, bool)) or (isinstance(v, float) and v.is_integer()) for v in value)
    )


def _rule_label(path: str, rule: Rule) -> str:
    return f"{path} ({rule.name!r})" if rule.name else path


def _build(data: Any, source: str | None) -> Policy:
    ck = _Checker()
    top = ck.mapping(data, "", _TOP_KEYS, required=("tenants",))
    if top is None:
        if data is None:
            ck.errors[-1] = ("", "the policy is empty: expected a mapping with 'tenants'")
        raise PolicyError(ck.errors, source)
    if "version" in top and (isinstance(top["version"], bool) or top["version"] != SCHEMA_VERSION):
        ck.error("version", f"unsupported version {top['version']!r}: this isolane reads version {SCHEMA_VERSION}")
    description = ck.string(top["description"], "description") if "description" in top else None
    unknown = ck.choice(top["unknown_tenant"], "unknown_tenant", ACTIONS, "an action") if "unknown_tenant" in top else "drop"
    count = ck.choice(top["count"], "count", tuple(COUNT_MODES), "a byte count") if "count" in top else "outer"
    largest_frame = ck.largest_frame_setting(top["largest_frame"], "largest_frame") if "largest_frame" in top else DEFAULT_LARGEST_FRAME
    ck.largest_frame = largest_frame or DEFAULT_LARGEST_FRAME
    color_map = ck.color_map(top["color_map"], "color_map") if "color_map" in top else DEFAULT_COLOR_MAP
    ck.egress = ck.port_setting(top["port"], "port") if "port" in top else None

    tenants: list[Tenant | None] = []
    items = ck.sequence(top["tenants"], "tenants", "tenants (mappings)") if "tenants" in top else None
    names: dict[str, int] = {}
    vni_owner: dict[int, tuple[int, str, str]] = {}
    vlan_owner: dict[int, tuple[int, str, str]] = {}
    for i, item in enumerate(items or []):
        path = f"tenants[{i}]"
        tenant = ck.tenant(item, path)
        tenants.append(tenant)
        # Cross-tenant checks, on what could be read even if the tenant has other errors.
        raw = item if isinstance(item, Mapping) else {}
        name = raw.get("name") if isinstance(raw.get("name"), str) and raw.get("name", "").strip() else None
        label = repr(name) if name is not None else path
        if name is not None:
            if name in names:
                ck.error(f"{path}.name", f"{name!r} is already the name of tenants[{names[name]}]")
            else:
                names[name] = i
        for key, owners, what in (("vnis", vni_owner, "VNI"), ("vlans", vlan_owner, "VLAN id")):
            values = raw.get(key)
            if not isinstance(values, (list, tuple)):
                continue
            mine: set[int] = set()
            for k, v in enumerate(values):
                if isinstance(v, bool) or not isinstance(v, int) or v in mine:
                    continue
                mine.add(v)
                if v in owners and owners[v][0] != i:
                    _, other_label, other_path = owners[v]
                    ck.error(f"{path}.{key}[{k}]", f"{what} {v} is claimed by both {other_label} ({other_path}) and {label}")
                else:
                    owners.setdefault(v, (i, label, f"{path}.{key}[{k}]"))

    if not ck.errors:
        _port_checks(ck, [t for t in tenants if t is not None])
    if ck.errors:
        raise PolicyError(ck.errors, source)
    assert not isinstance(unknown, _Bad) and not isinstance(description, _Bad) and not isinstance(count, _Bad)
    assert largest_frame is not None and color_map is not None
    policy = Policy(
        tuple(t for t in tenants if t is not None),
        unknown,  # type: ignore[arg-type]
        description,
        count=count,  # type: ignore[arg-type]
        largest_frame=largest_frame,
        color_map=color_map,
        port=ck.egress,
    )
    found = ck.warnings + _policy_warnings(policy)
    if source is not None:
        found = [f"{source}: {w}" for w in found]
    object.__setattr__(policy, "warnings", tuple(found))
    return policy


def _guarantee(tenant: Tenant) -> int:
    """A tenant's guarantee in bits per second: its rate, or what its classes are guaranteed."""
    if tenant.contract.rate_bps is not None:
        return tenant.contract.rate_bps
    return sum(c.contract.rate_bps or 0 for c in tenant.classes)


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


def _policy_warnings(policy: Policy) -> list[str]:
    found: list[str] = []
    for i, tenant in enumerate(policy.tenants):
        if not (tenant.vnis or tenant.vlans or tenant.sources):
            found.append(f"tenants[{i}] ({tenant.name!r}) has no vnis, vlans or sources: no traffic reaches it")
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
    for i, (tenant, tables) in enumerate(zip(policy.tenants, policy._tables)):
        for rule_index, covering in _shadowed_rules(tables):
            rule_path = f"tenants[{i}].rules[{rule_index}]"
            labels = [_rule_label(f"tenants[{i}].rules[{c}]", tenant.rules[c]) for c in covering]
            verb = "covers" if len(labels) == 1 else "cover"
            who = labels[0] if len(labels) == 1 else ", ".join(labels[:-1]) + " and " + labels[-1]
            found.append(f"{_rule_label(rule_path, tenant.rules[rule_index])} is never matched: {who} {verb} it")
    return found


# ---------------------------------------------------------------------------------------------
# Compilation
# ---------------------------------------------------------------------------------------------

U8 = npt.NDArray[np.uint8]
U16 = npt.NDArray[np.uint16]
I32 = npt.NDArray[np.int32]
U32 = npt.NDArray[np.uint32]
I64 = npt.NDArray[np.int64]
U64 = npt.NDArray[np.uint64]


@dataclass(frozen=True, eq=False)
class TenantTables:
    """One tenant's compiled rules: the arrays of ``docs/classify-contract.md`` in priority
    order (first match wins), plus what each rule does. Arrays are read-only."""

    name: str
    src: U8
    """(n, 16) prefix addresses, IPv6 or IPv4-mapped (``::ffff:a.b.c.d``)."""
    src_len: U8
    """Prefix length over 128 bits (IPv4 /24 -> 120; any -> 0)."""
    dst: U8
    dst_len: U8
    src_port_lo: U16
    src_port_hi: U16
    dst_port_lo: U16
    dst_port_hi: U16
    proto: U8
    proto_mask: U8
    dscp: U8
    dscp_mask: U8
    action: U8
    """``ACTION_DROP`` (0) or ``ACTION_ALLOW`` (1)."""
    cls: U16
    """Class id (index in ``class_names``); ``NO_CLASS`` for drops."""
    policy_rule: I32
    """The index in ``Tenant.rules`` each table rule came from (lists expand into several)."""
    default_action: int
    default_cls: int
    class_names: list[str]
    fingerprint: str
    """A stable hash of everything above except ``name`` and ``class_names``: equal
    fingerprints classify every packet alike."""

    def __len__(self) -> int:
        return int(self.src_len.shape[0])

    def rule_arrays(self) -> dict[str, npt.NDArray[Any]]:
        """The twelve arrays, in ``RuleTable``'s argument order: ``RuleTable(**t.rule_arrays())``."""
        return {name: getattr(self, name) for name in RULE_FIELDS}


@dataclass(frozen=True, eq=False)
class CompiledPolicy:
    """A policy as tables. Tenant ids are indices into ``tenant_names`` / ``tenants``."""

    tenant_names: list[str]
    tenants: list[TenantTables]
    vni_tenant: dict[int, int]
    """VNI -> tenant id; a VNI not in it belongs to no tenant."""
    vlan_tenant: dict[int, int]
    """Outer VLAN id -> tenant id, for untunnelled traffic."""
    source_prefixes: list[tuple[int, bytes, int]]
    """(tenant id, 16-byte address, length over 128 bits) in policy order, for untunnelled
    traffic: the first prefix containing the outer source address wins."""
    unknown_action: int

    @property
    def fingerprints(self) -> dict[str, str]:
        """Tenant name -> its tables' fingerprint."""
        return {t.name: t.fingerprint for t in self.tenants}

    def changed_tenants(self, previous: CompiledPolicy) -> list[str]:
        """Names of this policy's tenants that are new or classify differently than in ``previous``."""
        before = previous.fingerprints
        return [t.name for t in self.tenants if before.get(t.name) != t.fingerprint]

    def tenant_id(self, name: str) -> int:
        return self.tenant_names.index(name)


def _readonly(array: npt.NDArray[Any]) -> npt.NDArray[Any]:
    array.setflags(write=False)
    return array


def _tenant_tables(tenant: Tenant) -> TenantTables:
    class_id = {c.name: i for i, c in enumerate(tenant.classes)}
    src: list[bytes] = []
    dst: list[bytes] = []
    columns: dict[str, list[int]] = {
        name: [] for name in RULE_FIELDS + ("action", "cls", "policy_rule") if name not in ("src", "dst")
    }
    any_ports: tuple[PortRange, ...] = ((0, MAX_PORT),)
    for index, rule in enumerate(tenant.rules):
        src_addr, src_len = _mapped(rule.src)
        dst_addr, dst_len = _mapped(rule.dst)
        action = ACTION_ALLOW if rule.action == "allow" else ACTION_DROP
        cls = class_id[rule.cls] if rule.cls is not None else NO_CLASS
        protos: Sequence[int | None] = rule.proto or (None,)
        dscps: Sequence[int | None] = rule.dscp or (None,)
        for proto, dscp, (sp_lo, sp_hi), (dp_lo, dp_hi) in itertools.product(
            protos, dscps, rule.src_ports or any_ports, rule.dst_ports or any_ports
        ):
            src.append(src_addr)
            dst.append(dst_addr)
            for name, value in (
                ("src_len", src_len),
                ("dst_len", dst_len),
                ("src_port_lo", sp_lo),
                ("src_port_hi", sp_hi),
                ("dst_port_lo", dp_lo),
                ("dst_port_hi", dp_hi),
                ("proto", proto or 0),
                ("proto_mask", 0 if proto is None else 0xFF),
                ("dscp", dscp or 0),
                ("dscp_mask", 0 if dscp is None else 0x3F),
                ("action", action),
                ("cls", cls),
                ("policy_rule", index),
            ):
                columns[name].append(value)
    dtypes: dict[str, type[np.integer[Any]]] = {name: np.uint16 for name in ("src_port_lo", "src_port_hi", "dst_port_lo", "dst_port_hi", "cls")}
    dtypes["policy_rule"] = np.int32
    arrays: dict[str, npt.NDArray[Any]] = {
        "src": np.frombuffer(b"".join(src), dtype=np.uint8).reshape(len(src), 16),
        "dst": np.frombuffer(b"".join(dst), dtype=np.uint8).reshape(len(dst), 16),
    }
    for name, values in columns.items():
        arrays[name] = _readonly(np.array(values, dtype=dtypes.get(name, np.uint8)))
    default_action = ACTION_ALLOW if tenant.default == "allow" else ACTION_DROP
    default_cls = class_id[tenant.default_class] if default_action == ACTION_ALLOW else NO_CLASS
    return TenantTables(
        name=tenant.name,
        default_action=default_action,
        default_cls=default_cls,
        class_names=tenant.class_names,
        fingerprint=_fingerprint(arrays, default_action, default_cls),
        **arrays,
    )


def _fingerprint(arrays: Mapping[str, npt.NDArray[Any]], default_action: int, default_cls: int) -> str:
    digest = hashlib.blake2b(b"isolane-tenant-tables-v1", digest_size=16)
    for name in RULE_FIELDS + ("action", "cls", "policy_rule"):
        array = np.ascontiguousarray(arrays[name])
        digest.update(f"|{name}:{array.dtype.str}:{array.shape}|".encode())
        digest.update(array.tobytes())
    digest.update(f"|default:{default_action}:{default_cls}".encode())
    return digest.hexdigest()


def _compile(policy: Policy) -> CompiledPolicy:
    vni_tenant: dict[int, int] = {}
    vlan_tenant: dict[int, int] = {}
    sources: list[tuple[int, bytes, int]] = []
    for i, tenant in enumerate(policy.tenants):
        for vni in tenant.vnis:
            vni_tenant[vni] = i
        for vlan in tenant.vlans:
            vlan_tenant[vlan] = i
        for prefix in tenant.sources:
            addr, length = _mapped(prefix)
            sources.append((i, addr, length))
    return CompiledPolicy(
        tenant_names=policy.tenant_names,
        tenants=list(policy._tables),
        vni_tenant=vni_tenant,
        vlan_tenant=vlan_tenant,
        source_prefixes=sources,
        unknown_action=ACTION_ALLOW if policy.unknown_tenant == "allow" else ACTION_DROP,
    )


# ---------------------------------------------------------------------------------------------
# Compiled QoS (docs/qos.md)
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class MeterArrays:
    """One meter per row (a tenant, or a tenant's class), every default filled in. Rates are
    bytes per second, bursts bytes; a column a kind does not use is 0. Arrays are read-only."""

    kind: U8
    """``METER_NONE`` (0: no meter) or a code of ``METER_KINDS`` (srtcm 1, trtcm 2, rfc4115 3)."""
    color_aware: U8
    """1 if the meter is colour-aware (the incoming colour is ``CompiledQos.color_map[dscp]``)."""
    count: U8
    """Which bytes count: ``COUNT_MODES`` (inner 0, outer 1, wire 2, wire_fcs 3)."""
    cir: U64
    cbs: U64
    eir: U64
    """RFC 4115 only."""
    ebs: U64
    """srTCM and RFC 4115."""
    pir: U64
    """trTCM only."""
    pbs: U64
    """trTCM only."""
    action: U8
    """(n, 3): what happens to a green, yellow, red packet: ``COLOR_ACTIONS`` (pass 0, remark 1, drop 2)."""
    remark_dscp: U8
    """(n, 3): the DSCP a ``remark`` action writes (0 for other actions)."""

    def __len__(self) -> int:
        return int(self.kind.shape[0])


@dataclass(frozen=True, eq=False)
class ShaperArrays:
    """One shaper per row, every default filled in; ``rate`` 0 means no shaper (then every
    column is 0). Arrays are read-only."""

    rate: U64
    """Bytes per second."""
    burst: U64
    """Bytes that may leave at once after a quiet spell."""
    queue: U64
    """Most bytes that may wait; a packet beyond it is dropped."""
    max_delay_ns: U64
    """Longest a packet may wait; a packet that would wait longer is dropped."""

    def __len__(self) -> int:
        return int(self.rate.shape[0])


@dataclass(frozen=True, eq=False)
class CompiledQos:
    """A policy's QoS settings as integers (``docs/qos.md``): per tenant (index = tenant id) and
    per class (all tenants' classes in one array, tenant by tenant: tenant ``t``'s class ``c`` is
    row ``class_offsets[t] + c``). Rates are bytes per second, sizes bytes, times nanoseconds."""

    tenant_names: list[str]
    count: int
    """The policy's ``count`` code (shapers and the port count these bytes)."""
    largest_frame: int
    color_map: U8
    """(64,): the incoming colour (``COLORS`` code) of each DSCP, for colour-aware meters."""
    port_rate: int
    """The port's line rate; 0: the policy has no port."""
    port_buffer: int
    port_mode: int
    """``PORT_MODES`` code (per_tenant 0, shared_fifo 1)."""
    port_alpha_log2: int
    """The dynamic threshold: a per-tenant queue may hold 2 ** port_alpha_log2 x the free shared buffer."""
    port_reserve: int
    """Bytes of the buffer set aside for the guarantees, in proportion to them (0 without a port)."""
    tenant_rate: U64
    """Guarantee: the tenant's rate, or the sum of its classes' rates; 0 = none."""
    tenant_burst: U64
    tenant_burst_given: U8
    """1 where the policy sets the tenant's ``burst`` (0: ``tenant_burst`` is the default)."""
    tenant_ceil: U64
    """Ceiling: the tenant's ceil, else the port's line rate; 0 = uncapped (no ceil, no port)."""
    tenant_weight: U32
    """Share of the spare capacity (>= 1)."""
    tenant_meter: MeterArrays
    tenant_shaper: ShaperArrays
    class_offsets: I64
    """(tenants + 1,): tenant ``t``'s classes are rows ``class_offsets[t]:class_offsets[t + 1]``."""
    class_tenant: U32
    """The tenant id of each class row."""
    class_priority: U8
    """0 first; a class without one gets 7."""
    class_weight: U32
    """Share within its priority (WDRR); 1 by default."""
    class_rate: U64
    class_burst: U64
    class_burst_given: U8
    """1 where the policy sets the class's ``burst``."""
    class_ceil: U64
    """The class's ceil, else its tenant's ceiling (0 = uncapped)."""
    class_meter: MeterArrays
    class_shaper: ShaperArrays

    def class_row(self, tenant: int, cls: int) -> int:
        """The row of tenant ``tenant``'s class ``cls`` in the ``class_*`` arrays."""
        first, end = int(self.class_offsets[tenant]), int(self.class_offsets[tenant + 1])
        if not 0 <= cls < end - first:
            raise IndexError(f"tenant {tenant} has {end - first} classes, not {cls + 1}")
        return first + cls


def _column(values: Sequence[Any], dtype: type[np.integer[Any]], shape: tuple[int, ...] | None = None) -> npt.NDArray[Any]:
    array = np.array(values, dtype=dtype)
    if shape is not None:
        array = array.reshape(shape)
    return _readonly(array)


def _meter_arrays(meters: Sequence[Meter | None], policy: Policy) -> MeterArrays:
    names = ("kind", "color_aware", "count", "cir", "cbs", "eir", "ebs", "pir", "pbs")
    columns: dict[str, list[int]] = {name: [] for name in names}
    actions: list[int] = []
    remarks: list[int] = []
    for meter in meters:
        row = dict.fromkeys(names, 0)
        row["count"] = COUNT_MODES[policy.count]
        colours: tuple[ColorAction, ...] = ("pass", "pass", "pass")
        if meter is not None:
            row["kind"] = METER_KINDS[meter.kind]
            row["color_aware"] = int(meter.color_aware)
            row["count"] = COUNT_MODES[meter.count or policy.count]
            rates = {"cir": meter.cir_bps, "eir": meter.eir_bps, "pir": meter.pir_bps}
            sizes = {"cbs": meter.cbs_bytes, "ebs": meter.ebs_bytes, "pbs": meter.pbs_bytes}
            for key, rate_bits in rates.items():
                row[key] = (rate_bits or 0) // 8
            for size_key, rate_key in _METER_BUCKETS[meter.kind]:
                size = sizes[size_key]
                rate = row[rate_key]
                row[size_key] = size if size is not None else (default_burst(rate, policy.largest_frame) if rate else 0)
            colours = (meter.green, meter.yellow, meter.red)
        for name in names:
            columns[name].append(row[name])
        for action in colours:
            actions.append(COLOR_ACTIONS["remark" if isinstance(action, Remark) else action])
            remarks.append(action.dscp if isinstance(action, Remark) else 0)
    n = len(meters)
    return MeterArrays(
        **{name: _column(columns[name], np.uint8 if name in ("kind", "color_aware", "count") else np.uint64) for name in names},
        action=_column(actions, np.uint8, (n, 3)),
        remark_dscp=_column(remarks, np.uint8, (n, 3)),
    )


def _shaper_row(contract: Contract, largest_frame: int) -> tuple[int, int, int, int]:
    shaper = contract.shaper
    if shaper is None:
        return (0, 0, 0, 0)
    rate_bits = shaper.rate_bps or contract.ceil_bps or contract.rate_bps
    assert rate_bits is not None  # the checker insists on a rate
    rate = rate_bits // 8
    burst = shaper.burst_bytes if shaper.burst_bytes is not None else default_burst(rate, largest_frame)
    queue, delay = shaper.queue_bytes, shaper.max_delay_ns
    if queue is None and delay is None:
        delay = DEFAULT_MAX_DELAY_NS
    if queue is None:
        assert delay is not None
        queue = -(-rate * delay // 10**9)  # the bytes that leave in max_delay, rounded up
    if delay is None:
        delay = -(-queue * 10**9 // rate)  # the time the queue takes to leave, rounded up
    return (rate, burst, queue, delay)


def _shaper_arrays(rows: Sequence[tuple[int, int, int, int]]) -> ShaperArrays:
    columns = list(zip(*rows)) if rows else [(), (), (), ()]
    return ShaperArrays(*(_column(list(c), np.uint64) for c in columns))


def _tenant_weights(policy: Policy) -> list[int]:
    """Explicit weights, or weights in proportion to the guarantees: each guarantee divided by
    the greatest common divisor of them all (a tenant without a guarantee counts one unit)."""
    if any(t.weight is not None for t in policy.tenants):
        return [t.weight or 1 for t in policy.tenants]  # all or none have one (checked)
    guarantees = [_guarantee(t) // 8 for t in policy.tenants]
    unit = functools.reduce(math.gcd, (g for g in guarantees if g), 0)
    if unit == 0:
        return [1] * len(guarantees)
    weights = [max(g // unit, 1) for g in guarantees]
    if max(weights) > MAX_WEIGHT:  # guarantees with a tiny common divisor: keep the proportions in 32 bits
        top = max(guarantees)
        weights = [max(round(g * MAX_WEIGHT / top), 1) for g in guarantees]
    return weights


def _compile_qos(policy: Policy) -> CompiledQos:
    lf = policy.largest_frame
    port_rate = policy.port.rate_bps // 8 if policy.port is not None else 0
    tenant_rate, tenant_burst, tenant_ceil = [], [], []
    class_tenant, class_priority, class_weight, class_rate, class_burst, class_ceil = [], [], [], [], [], []
    tenant_meters: list[Meter | None] = []
    class_meters: list[Meter | None] = []
    tenant_shapers, class_shapers = [], []
    offsets = [0]
    for tid, tenant in enumerate(policy.tenants):
        c = tenant.contract
        rate = _guarantee(tenant) // 8
        ceil = c.ceil_bps // 8 if c.ceil_bps is not None else port_rate
        tenant_rate.append(rate)
        tenant_burst.append(c.burst_bytes if c.burst_bytes is not None else (default_burst(rate, lf) if rate else 0))
        tenant_ceil.append(ceil)
        tenant_meters.append(c.meter)
        tenant_shapers.append(_shaper_row(c, lf))
        for tc in tenant.classes:
            cc = tc.contract
            crate = (cc.rate_bps or 0) // 8
            class_tenant.append(tid)
            class_priority.append(tc.priority if tc.priority is not None else DEFAULT_PRIORITY)
            class_weight.append(tc.weight if tc.weight is not None else 1)
            class_rate.append(crate)
            class_burst.append(cc.burst_bytes if cc.burst_bytes is not None else (default_burst(crate, lf) if crate else 0))
            class_ceil.append(cc.ceil_bps // 8 if cc.ceil_bps is not None else ceil)
            class_meters.append(cc.meter)
            class_shapers.append(_shaper_row(cc, lf))
        offsets.append(offsets[-1] + len(tenant.classes))
    color_map = [0] * 64
    for dscp, colour in policy.color_map:
        color_map[dscp] = COLORS[colour]
    return CompiledQos(
        tenant_names=policy.tenant_names,
        count=COUNT_MODES[policy.count],
        largest_frame=lf,
        color_map=_column(color_map, np.uint8),
        port_rate=port_rate,
        port_buffer=policy.port.buffer_bytes if policy.port is not None else 0,
        port_mode=PORT_MODES[policy.port.mode] if policy.port is not None else PORT_MODES["per_tenant"],
        port_alpha_log2=policy.port.alpha_log2 if policy.port is not None else 0,
        port_reserve=policy.port.reserve_bytes if policy.port is not None else 0,
        tenant_rate=_column(tenant_rate, np.uint64),
        tenant_burst=_column(tenant_burst, np.uint64),
        tenant_burst_given=_column([t.contract.burst_bytes is not None for t in policy.tenants], np.uint8),
        tenant_ceil=_column(tenant_ceil, np.uint64),
        tenant_weight=_column(_tenant_weights(policy), np.uint32),
        tenant_meter=_meter_arrays(tenant_meters, policy),
        tenant_shaper=_shaper_arrays(tenant_shapers),
        class_offsets=_column(offsets, np.int64),
        class_tenant=_column(class_tenant, np.uint32),
        class_priority=_column(class_priority, np.uint8),
        class_weight=_column(class_weight, np.uint32),
        class_rate=_column(class_rate, np.uint64),
        class_burst=_column(class_burst, np.uint64),
        class_burst_given=_column([c.contract.burst_bytes is not None for t in policy.tenants for c in t.classes], np.uint8),
        class_ceil=_column(class_ceil, np.uint64),
        class_meter=_meter_arrays(class_meters, policy),
        class_shaper=_shaper_arrays(class_shapers),
    )


# ---------------------------------------------------------------------------------------------
# Rules that never match
# ---------------------------------------------------------------------------------------------

_MASKS = [((1 << n) - 1) << (128 - n) for n in range(129)]
_MAPPED_VALUE = 0xFFFF << 32
_BIG_GROUP = 48


def _addr_ints(addresses: U8) -> list[int]:
    words = np.ascontiguousarray(addresses).view(">u8").reshape(-1, 2)
    return [(hi << 64) | lo for hi, lo in zip(words[:, 0].tolist(), words[:, 1].tolist())]


def _shadowed_rules(t: TenantTables) -> list[tuple[int, list[int]]]:
    """Policy rules none of whose table rules can match because, for each of them, a table rule
    of an earlier policy rule covers it (every field of the earlier one contains the later one's).
    Returns ``[(rule, [earliest covering rules])]``.

    Instead of comparing all pairs, candidates are found through hash indexes: a covering rule's
    source prefix is one of the (few) existing prefixes containing the later rule's source, the
    same for the destination, and its protocol and DSCP masks are among the (few) masks in use.
    Rules with equal prefixes, protocol and DSCP form a group whose port ranges are compared
    (vectorised for large groups).
    """
    n = len(t)
    if n < 2:
        return []
    src, dst = _addr_ints(t.src), _addr_ints(t.dst)
    src_len, dst_len = t.src_len.tolist(), t.dst_len.tolist()
    # A rule whose one side is IPv4-only only sees IPv4 packets, so an "any" other side
    # effectively means any IPv4 address (::ffff:0:0/96). Compare effective prefixes.
    for a, a_len, b, b_len in ((src, src_len, dst, dst_len), (dst, dst_len, src, src_len)):
        for i in range(n):
            if a_len[i] >= 96 and (a[i] >> 32) == 0xFFFF and b_len[i] < 96 and (_MAPPED_VALUE & _MASKS[b_len[i]]) == b[i]:
                b[i], b_len[i] = _MAPPED_VALUE, 96
    spl, sph = t.src_port_lo.tolist(), t.src_port_hi.tolist()
    dpl, dph = t.dst_port_lo.tolist(), t.dst_port_hi.tolist()
    pmask = t.proto_mask.tolist()
    pval = [p & m for p, m in zip(t.proto.tolist(), pmask)]
    dmask = t.dscp_mask.tolist()
    dval = [d & m for d, m in zip(t.dscp.tolist(), dmask)]
    prule = t.policy_rule.tolist()

    groups: dict[tuple[int, ...], list[int]] = {}
    pairs: set[tuple[int, int, int, int]] = set()
    src_sets: dict[int, set[int]] = {}
    dst_sets: dict[int, set[int]] = {}
    for i in range(n):
        groups.setdefault((src_len[i], src[i], dst_len[i], dst[i], pmask[i], pval[i], dmask[i], dval[i]), []).append(i)
        pairs.add((src_len[i], src[i], dst_len[i], dst[i]))
        src_sets.setdefault(src_len[i], set()).add(src[i])
        dst_sets.setdefault(dst_len[i], set()).add(dst[i])
    src_lens, dst_lens = sorted(src_sets), sorted(dst_sets)
    pmasks, dmasks = sorted(set(pmask)), sorted(set(dmask))
    ancestors_cache: dict[tuple[int, int, int], list[tuple[int, int]]] = {}

    def ancestors(side: int, length: int, value: int) -> list[tuple[int, int]]:
        key = (side, length, value)
        found = ancestors_cache.get(key)
        if found is None:
            lens, sets = (src_lens, src_sets) if side == 0 else (dst_lens, dst_sets)
            found = []
            for ln in lens:
                if ln > length:
                    break
                masked = value & _MASKS[ln]
                if masked in sets[ln]:
                    found.append((ln, masked))
            ancestors_cache[key] = found
        return found

    vectors: dict[tuple[int, ...], tuple[npt.NDArray[np.int64], ...]] = {}

    def first_cover(r: int, limit: int) -> int:
        """The earliest row before ``limit`` covering row ``r``, or ``limit``."""
        best = limit
        for s_len, s_val in ancestors(0, src_len[r], src[r]):
            for d_len, d_val in ancestors(1, dst_len[r], dst[r]):
                if (s_len, s_val, d_len, d_val) not in pairs:
                    continue
                for pm in pmasks:
                    if pm & ~pmask[r]:
                        continue
                    for dm in dmasks:
                        if dm & ~dmask[r]:
                            continue
                        key = (s_len, s_val, d_len, d_val, pm, pval[r] & pm, dm, dval[r] & dm)
                        members = groups.get(key)
                        if members is None or members[0] >= best:
                            continue
                        if len(members) <= _BIG_GROUP:
                            for e in members:
                                if e >= best:
                                    break
                                if spl[e] <= spl[r] and sph[e] >= sph[r] and dpl[e] <= dpl[r] and dph[e] >= dph[r]:
                                    best = e
                                    break
                            continue
                        vec = vectors.get(key)
                        if vec is None:
                            vec = tuple(np.array([col[e] for e in members], dtype=np.int64) for col in (spl, sph, dpl, dph))
                            vectors[key] = vec
                        k = bisect.bisect_left(members, best)
                        hits = (vec[0][:k] <= spl[r]) & (vec[1][:k] >= sph[r]) & (vec[2][:k] <= dpl[r]) & (vec[3][:k] >= dph[r])
                        if k and hits.any():
                            best = members[int(hits.argmax())]
        return best

    shadowed: list[tuple[int, list[int]]] = []
    start = 0
    while start < n:
        end = start
        while end < n and prule[end] == prule[start]:
            end += 1
        covering: set[int] = set()
        if start > 0:
            for r in range(start, end):
                e = first_cover(r, start)
                if e >= start:
                    break
                covering.add(prule[e])
            else:
                shadowed.append((prule[start], sorted(covering)))
        start = end
    return shadowed


# ---------------------------------------------------------------------------------------------
# JSON Schema
# ---------------------------------------------------------------------------------------------


def schema() -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of the policy format.

    It checks the shape of a policy (keys, types, ranges, the syntax of prefixes, ports and
    units, which keys each meter kind takes). What needs more than one value at a time is
    checked by isolane only: host bits, reversed port ranges, duplicate names, VNIs claimed
    twice, class references, IPv4 with IPv6 in one rule, ports with portless protocols, zero
    quantities, rates that are not whole bytes, ceil below rate, rates above the port's, guarantees
    that add up to more than they can, the meters' RFC rules (PIR >= CIR, buckets that can never
    hold or refill), weights on some tenants only, a shaper without any rate.
    """
    port_number = {"type": "integer", "minimum": 0, "maximum": MAX_PORT}
    port_text = {"type": "string", "pattern": PORT_PATTERN, "description": "a port ('80') or an inclusive range ('8000-8080')"}
    port_pair = {
        "type": "array",
        "prefixItems": [port_number, port_number],
        "minItems": 2,
        "maxItems": 2,
        "description": "an inclusive range [lo, hi], as an entry of a list",
    }
    one_port = {"anyOf": [port_number, port_text, port_pair]}
    ports = {
        "description": "a port, a range or a list of them ([80, 443] is two ports; a list expands into several table rules); omitted = any",
        "anyOf": [port_number, port_text, {"type": "array", "minItems": 1, "items": one_port}],
    }

    def named_numbers(names: Iterable[str], hi: int, description: str) -> dict[str, Any]:
        one = {"anyOf": [{"type": "integer", "minimum": 0, "maximum": hi}, {"enum": sorted(names)}]}
        return {"description": description, "anyOf": [one, {"type": "array", "minItems": 1, "items": one}]}

    prefix = {
        "type": "string",
        "pattern": PREFIX_PATTERN,
        "description": "an IPv4 or IPv6 prefix (a bare address is a host prefix) or 'any'",
    }
    rate = {"type": "string", "pattern": RATE_PATTERN, "description": "bits (bps, bit/s) or bytes (B/s) per second, e.g. '40Gbps'"}
    size = {"type": "string", "pattern": SIZE_PATTERN, "description": "bytes (B) or bits (bit), e.g. '256KiB'"}
    duration = {"type": "string", "pattern": DURATION_PATTERN, "description": "ns, us, ms or s, e.g. '10us'"}
    action = {"enum": list(ACTIONS)}
    text = {"type": "string"}
    name = {"type": "string", "minLength": 1, "pattern": r"\S"}
    contract = {
        "rate": {**rate, "description": "guaranteed rate at the egress port"},
        "burst": {**size, "description": "burst of the guarantee (default: 1 ms at the rate, at least the largest frame)"},
        "ceil": {**rate, "description": "the most the tenant or class may use at the egress port (at least rate)"},
        "meter": {"$ref": "#/$defs/meter"},
        "shaper": {"$ref": "#/$defs/shaper"},
        "microburst": {"$ref": "#/$defs/microburst"},
    }
    weight = {"type": "integer", "minimum": 1, "maximum": MAX_WEIGHT}
    dscp = {"anyOf": [{"type": "integer", "minimum": 0, "maximum": 63}, {"enum": sorted(DSCP_NAMES)}]}
    colour = {"enum": list(COLORS)}
    color_action = {
        "anyOf": [
            {"enum": ["pass", "drop"]},
            {"type": "object", "additionalProperties": False, "required": ["remark"], "properties": {"remark": dscp}},
        ]
    }
    count = {"enum": list(COUNT_MODES), "description": "inner frame, outer frame, outer frame + 20 B (wire) or + 24 B (wire_fcs)"}
    meter_fields: dict[str, Any] = {"cir": rate, "cbs": size, "eir": rate, "ebs": size, "pir": rate, "pbs": size}
    by_kind = [
        {
            "if": {"properties": {"kind": {"const": kind}}},
            "then": {
                "required": list(_METER_REQUIRED[kind]),
                "properties": {key: False for key in meter_fields if key not in fields},
            },
        }
        for kind, fields in _METER_FIELDS.items()
    ]
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "urn:isolane:policy:1",
        "title": "isolane tenant policy",
        "description": "Tenants, their traffic classes, ordered rules (first match wins) and contracts. See docs/policy.md.",
        "type": "object",
        "additionalProperties": False,
        "required": ["tenants"],
        "properties": {
            "version": {"const": SCHEMA_VERSION},
            "description": text,
            "unknown_tenant": {**action, "description": "what happens to traffic of no tenant (default drop)"},
            "count": {**count, "description": "which bytes meters, shapers and the port count (default outer)"},
            "largest_frame": {**size, "description": "the largest frame (default 9216B); no default burst is smaller"},
            "color_map": {
                "type": "object",
                "description": "DSCP -> incoming colour for colour-aware meters; unmapped DSCPs are green (default: afX1 green, afX2 yellow, afX3 red)",
                "propertyNames": {"anyOf": [{"enum": sorted(DSCP_NAMES)}, {"pattern": "^0*(?:6[0-3]|[1-5]?[0-9])$"}]},
                "additionalProperties": colour,
            },
            "port": {"$ref": "#/$defs/port"},
            "tenants": {"type": "array", "items": {"$ref": "#/$defs/tenant"}},
        },
        "$defs": {
            "tenant": {
                "type": "object",
                "additionalProperties": False,
                "required": ["name"],
                "properties": {
                    "name": name,
                    "description": text,
                    "vnis": {
                        "type": "array",
                        "uniqueItems": True,
                        "items": {"type": "integer", "minimum": 0, "maximum": MAX_VNI},
                        "description": "VXLAN/Geneve VNIs (24 bits) of the tenant's tunnelled traffic",
                    },
                    "vlans": {
                        "type": "array",
                        "uniqueItems": True,
                        "items": {"type": "integer", "minimum": 0, "maximum": MAX_VLAN},
                        "description": "outer VLAN ids of the tenant's untunnelled traffic",
                    },
                    "sources": {
                        "type": "array",
                        "items": {**prefix, "not": {"const": "any"}},
                        "description": "outer source prefixes of the tenant's untunnelled traffic",
                    },
                    "weight": {**weight, "description": "share of the port's spare capacity (default: in proportion to the guarantee)"},
                    **contract,
                    "classes": {"type": "array", "minItems": 1, "items": {"$ref": "#/$defs/class"}},
                    "default_class": {**name, "description": "class of allow rules without 'class' (default: the first class)"},
                    "default": {**action, "description": "action when no rule matches (default allow)"},
                    "rules": {"type": "array", "items": {"$ref": "#/$defs/rule"}},
                },
            },
            "class": {
                "type": "object",
                "additionalProperties": False,
                "required": ["name"],
                "properties": {
                    "name": name,
                    "description": text,
                    "priority": {"type": "integer", "minimum": 0, "maximum": MAX_PRIORITY, "description": "0 is served first (default 7)"},
                    "weight": {**weight, "description": "share within its priority (default 1)"},
                    **contract,
                },
            },
            "rule": {
                "type": "object",
                "additionalProperties": False,
                "required": ["action"],
                "properties": {
                    "name": text,
                    "description": text,
                    "src": prefix,
                    "dst": prefix,
                    "src_ports": ports,
                    "dst_ports": ports,
                    "proto": named_numbers(PROTOCOLS, 255, "protocol names or numbers; omitted = any"),
                    "dscp": named_numbers(DSCP_NAMES, 63, "DSCP names or numbers 0-63; omitted = any"),
                    "action": action,
                    "class": name,
                },
                "if": {"properties": {"action": {"const": "drop"}}, "required": ["action"]},
                "then": {"not": {"required": ["class"]}},
            },
            "shaper": {
                "type": "object",
                "additionalProperties": False,
                "description": "earliest-departure-time shaper; drops at its tail beyond queue bytes or max_delay",
                "properties": {"rate": rate, "burst": size, "queue": size, "max_delay": duration},
            },
            "meter": {
                "type": "object",
                "additionalProperties": False,
                "required": ["kind"],
                "description": "RFC 2697 srTCM (cir, cbs, ebs), RFC 2698 trTCM (cir, cbs, pir, pbs) or RFC 4115 (cir, cbs, eir, ebs)",
                "properties": {
                    "kind": {"enum": list(METER_KINDS)},
                    **meter_fields,
                    "color_aware": {"type": "boolean"},
                    "count": count,
                    "actions": {
                        "type": "object",
                        "additionalProperties": False,
                        "properties": {c: color_action for c in COLORS},
                    },
                },
                "allOf": by_kind,
            },
            "port": {
                "type": "object",
                "additionalProperties": False,
                "required": ["rate", "buffer"],
                "description": "the egress port the tenants share",
                "properties": {
                    "rate": rate,
                    "buffer": size,
                    "mode": {"enum": list(PORT_MODES)},
                    "alpha": {
                        "enum": [2**k for k in PORT_ALPHA_LOG2],
                        "description": "per_tenant: a queue may hold at most alpha x the shared buffer still free (dynamic threshold; default 1)",
                    },
                    "reserve": {**size, "description": "per_tenant: bytes of the buffer set aside for the guarantees, in proportion to them (default 0B)"},
                },
            },
            "microburst": {
                "type": "object",
                "additionalProperties": False,
                "required": list(_MICROBURST_KEYS),
                "description": "placeholder for the upcoming microburst detection",
                "properties": {"window": duration, "threshold": rate},
            },
        },
    }


def schema_text() -> str:
    """The JSON Schema of the policy format as indented JSON text (what ``isolane schema`` prints)."""
    return json.dumps(schema(), indent=2, ensure_ascii=False) + "\n"
