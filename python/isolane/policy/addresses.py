"""Addresses and ports: the syntax of prefixes and ports, prefixes over the IPv4-mapped address
space, port ranges."""

from __future__ import annotations

import functools
import ipaddress
import re
from collections.abc import Iterable
from typing import Any

from isolane.policy.compact import CompactField

Network = ipaddress.IPv4Network | ipaddress.IPv6Network
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


# Small caches: policies repeat some prefixes (any, a shared range), while most are each
# tenant's own, which a large cache would keep alive beside the tenant, once per tenant.
@functools.lru_cache(maxsize=1024)
def _parse_prefix(text: str) -> Network | None | str:
    """A prefix, ``None`` for ``any``, or the error message."""
    if _PREFIX_RE.fullmatch(text):
        if text == "any":
            return None
        if ":" not in text:  # IPv4, its octets and length checked by the pattern: skip ipaddress's parsing
            value, bits = _ipv4_prefix(text)
            if not value & ((1 << (32 - bits)) - 1):
                return ipaddress.IPv4Network((value, bits))
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


def _ipv4_prefix(text: str) -> tuple[int, int]:
    """(address, length) of an IPv4 prefix that ``_PREFIX_RE`` matched."""
    address, _, length = text.partition("/")
    a, b, c, d = address.split(".")
    return (int(a) << 24) | (int(b) << 16) | (int(c) << 8) | int(d), int(length or 32)


@functools.lru_cache(maxsize=1024)
def _parse_rule_prefix(text: str) -> int | Network | None | str:
    """A prefix as a rule holds it (:class:`CompactPrefix`): an IPv4 prefix as one integer, made
    without the ``ipaddress`` network; otherwise as :func:`_parse_prefix` gives it."""
    if ":" not in text and text != "any" and _PREFIX_RE.fullmatch(text):
        value, bits = _ipv4_prefix(text)
        if not value & ((1 << (32 - bits)) - 1):
            return value << 8 | bits
    return _parse_prefix(text)


def _as_network(prefix: int | Network) -> Network:
    """A prefix as :func:`_parse_rule_prefix` gives it, as a network."""
    return ipaddress.IPv4Network((prefix >> 8, prefix & 0xFF)) if isinstance(prefix, int) else prefix


_ANY = (bytes(16), 0)
_MAPPED_HEAD = bytes(10) + b"\xff\xff"


def _mapped(network: Network | None) -> tuple[bytes, int]:
    """A prefix over the 128-bit IPv4-mapped address space: (16 address bytes, length). Not
    cached: hashing a network costs more than this."""
    if network is None:
        return _ANY
    if network.version == 4:
        return _MAPPED_HEAD + network.network_address.packed, 96 + network.prefixlen
    return network.network_address.packed, network.prefixlen


class CompactPrefix(CompactField):
    """A prefix field that holds an IPv4 prefix as one integer (its address shifted left by 8, or
    its length: 32 bytes) instead of an ``ipaddress`` network and its address (about 184 bytes),
    and gives the network back when read. A policy of 100,000 one-rule tenants holds 100,000 of
    them. Other values (``None``, IPv6 prefixes) are held as they are."""

    __slots__ = ()

    def pack(self, value: Any) -> Any:
        """``value``: a network, ``None``, or an IPv4 prefix already as one integer (:func:`_parse_rule_prefix`)."""
        if value.__class__ is ipaddress.IPv4Network:
            return int(value.network_address) << 8 | value.prefixlen
        return value

    def expand(self, held: Any) -> Any:
        return ipaddress.IPv4Network((held >> 8, held & 0xFF)) if held.__class__ is int else held

    def mapped(self, owner: Any) -> tuple[bytes, int]:
        """``_mapped`` of the prefix ``owner`` holds, without making the network."""
        held = self.held(owner)
        if held.__class__ is int:
            return _MAPPED_HEAD + (held >> 8).to_bytes(4, "big"), 96 + (held & 0xFF)
        return _mapped(held)


def _families(network: int | Network | None) -> frozenset[int]:
    """The IP versions of packets whose address can fall in ``network`` (an integer: an IPv4 prefix)."""
    if network is None:
        return frozenset((4, 6))
    if isinstance(network, int) or network.version == 4:
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
