"""Constants of the policy format: its limits, the codes of the compiled arrays, the names of
protocols and DSCPs, and the keys of each mapping in a file.

The codes come from the Rust core (``isolane.codes.CODES``); the ``Literal`` types beside them
spell the same names for type checkers (``tests/test_codes.py`` checks that they agree)."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any, Literal, NamedTuple

from isolane.codes import CODES

SCHEMA_VERSION = 1
"""The only ``version`` a policy file may declare today."""
MAX_VNI = (1 << 24) - 1
MAX_VLAN = 4095
MAX_PORT = 65535
MAX_PRIORITY = 7
ACTION_DROP = CODES["action"]["drop"]
"""``TenantTables.action`` / ``default_action`` / ``CompiledPolicy.unknown_action`` value: drop."""
ACTION_ALLOW = CODES["action"]["allow"]
"""... and allow."""
NO_CLASS = 0xFFFF
"""``TenantTables.cls`` / ``default_cls`` of a drop: dropped packets go into no class."""
MAX_RULE_EXPANSION = 65536
"""A single policy rule may expand into at most this many table rules."""
MAX_CLASSES = NO_CLASS
"""Class ids are uint16 and ``NO_CLASS`` is reserved."""

#: EtherType names accepted by a rule's ``ethertype`` (a number 0x0600-0xffff is accepted too).
ETHERTYPES: dict[str, int] = {"ipv4": 0x0800, "arp": 0x0806, "ipv6": 0x86DD}
MIN_ETHERTYPE = 0x0600
"""Below it, the field is an 802.3 length, not an EtherType."""
#: VLAN tag protocol ids: the parser looks past the tags, so a frame's EtherType is never one.
VLAN_TPIDS = frozenset({0x8100, 0x88A8, 0x9100})
FRAME_RULE_DSCP = 0x40
"""A rule with ``ethertype`` compiles to one table row that no IP packet matches (its DSCP value and
mask carry this bit, which a 6-bit DSCP never has) and that holds the EtherType in its source port
range; the engine matches frames against such rows (``rust/engine/frames.rs``)."""

ActionName = Literal["allow", "drop"]
ACTIONS: tuple[ActionName, ...] = ("allow", "drop")

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
MAX_QUEUE_BYTES = 1 << 50
"""The largest queue (a shaper's, given or the bytes its ``max_delay`` lets wait), port
buffer or reserve, and microburst queue threshold: 1 PiB, beyond any switch's buffer and far
enough below 2**64 that the core's byte counts (a full queue plus a frame) never overflow."""
MAX_DELAY_NS = (1 << 64) - 1
"""The longest shaper ``max_delay`` (given, or the time its ``queue`` takes to leave), about
584 years: the Rust shaper's ``max_delay_ns`` is a u64."""
DEFAULT_LARGEST_FRAME = 9216
"""The largest frame (bytes) when the policy names none: a jumbo frame."""
MIN_FRAME = 64
"""The smallest Ethernet frame: no shaper burst and no ``largest_frame`` may be below it."""
MAX_LARGEST_FRAME = (1 << 32) - 1
"""``largest_frame`` is 32-bit in the Rust meter."""
DEFAULT_MAX_DELAY_NS = 1_000_000
"""A shaper's queue bound when it names neither ``queue`` nor ``max_delay``: 1 ms at its rate."""
MAX_PROFILE_SWITCHES = 1_000_000
"""The largest ``max_switches`` of a burst profile (per second; the core's is a u32)."""
MAX_PROFILE_TIME_NS = 10 * 10**9
"""The longest ``hold`` of a burst profile and ``stagger`` of the port's overload (10 s), far
beyond any microburst or buffer drain: a profile kept longer is a new contract, not a reaction."""
DEFAULT_STAGGER_NS = 10_000
"""The port overload's ``stagger`` when the policy names none: tenants return 10 us apart."""

METER_NONE = CODES["meter_kind"]["none"]
"""``MeterArrays.kind`` of a tenant or class without a meter."""
MeterKind = Literal["srtcm", "trtcm", "rfc4115"]
#: Meter kinds and their codes in ``MeterArrays.kind``: RFC 2697, RFC 2698, RFC 4115.
METER_KINDS: dict[str, int] = {name: code for name, code in CODES["meter_kind"].items() if code != METER_NONE}
CountMode = Literal["inner", "outer", "wire", "wire_fcs"]
#: Which bytes of a packet count, and their codes: the tenant's inner frame (the outer frame for
#: untunnelled traffic), the outer frame as captured, the outer frame plus 20 B of preamble and
#: inter-frame gap, or plus 24 B (preamble, gap and an FCS the capture does not hold).
COUNT_MODES: dict[str, int] = dict(CODES["count"])
#: Bytes added to each frame per count mode.
COUNT_OVERHEAD: dict[str, int] = {"inner": 0, "outer": 0, "wire": 20, "wire_fcs": 24}
ColorName = Literal["green", "yellow", "red"]
#: Colours and their codes (the Rust meter's ``Color``; ``none``, a packet no meter saw, is no
#: colour a policy names).
COLORS: dict[str, int] = {name: code for name, code in CODES["color"].items() if name != "none"}
#: What a meter does with a packet of a colour, and the codes in ``MeterArrays.action``.
COLOR_ACTIONS: dict[str, int] = dict(CODES["color_action"])
PortMode = Literal["per_tenant", "shared_fifo"]
#: Egress port modes and their codes in ``CompiledQos.port_mode``.
PORT_MODES: dict[str, int] = dict(CODES["port_mode"])

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


class RuleVocabulary(NamedTuple):
    """The names and limits the core reads plainly valid rules with (``_core.stream_yaml``), so
    that it reads them as ``isolane.policy.validate`` does."""

    protocols: dict[str, int]
    dscps: dict[str, int]
    port_protocols: frozenset[int]
    max_expansion: int


RULE_VOCABULARY = RuleVocabulary(PROTOCOLS, DSCP_NAMES, PORT_PROTOCOLS, MAX_RULE_EXPANSION)

#: The colour map when the policy gives none: the AF drop precedences of RFC 2597, ``afX1``
#: green, ``afX2`` yellow, ``afX3`` red; every other DSCP is green. Only non-green entries are
#: listed, as ``(dscp, colour)`` sorted by DSCP.
DEFAULT_COLOR_MAP: tuple[tuple[int, ColorName], ...] = tuple(
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

#: The dynamic threshold's alpha is 2**k for k in this range (1/128 to 128), as switches offer it.
PORT_ALPHA_LOG2 = range(-7, 8)
#: Each burst and the rate that fills it, per kind.
_METER_BUCKETS: dict[str, tuple[tuple[str, str], ...]] = {
    "srtcm": (("cbs", "cir"), ("ebs", "cir")),
    "trtcm": (("cbs", "cir"), ("pbs", "pir")),
    "rfc4115": (("cbs", "cir"), ("ebs", "eir")),
}
_METER_WORDS = {"cir": "committed rate", "eir": "excess rate", "pir": "peak rate"}

# The keys of each mapping in a policy file, in the order to_dict writes them, and which rates and
# bursts each meter kind takes, are the fields of the models in schema.py, the one place the
# document's shape is written. schema.py imports this module, so they are read from it when first
# asked for here (by module: the package's attribute ``schema`` is the function of json_schema.py).
_FROM_SCHEMA = frozenset(
    {
        "_CONTRACT_KEYS",
        "_TOP_KEYS",
        "_TENANT_KEYS",
        "_CLASS_KEYS",
        "_RULE_KEYS",
        "_SHAPER_KEYS",
        "_MICROBURST_KEYS",
        "_QUEUE_VIEW_KEYS",
        "_PORT_KEYS",
        "_OVERLOAD_KEYS",
        "_BURST_PROFILE_KEYS",
        "_OVERLOAD_PROFILE_KEYS",
        "_METER_KEYS",
        "_METER_ACTION_KEYS",
        "_REMARK_KEYS",
        "_METER_BUCKET_KEYS",
        "_METER_FIELDS",
        "_METER_REQUIRED",
    }
)


if TYPE_CHECKING:  # read from the models on first use (below); their types, for mypy
    _TOP_KEYS: tuple[str, ...]
    _TENANT_KEYS: tuple[str, ...]
    _CLASS_KEYS: tuple[str, ...]
    _RULE_KEYS: tuple[str, ...]
    _SHAPER_KEYS: tuple[str, ...]
    _MICROBURST_KEYS: tuple[str, ...]
    _QUEUE_VIEW_KEYS: tuple[str, ...]
    _PORT_KEYS: tuple[str, ...]
    _OVERLOAD_KEYS: tuple[str, ...]
    _BURST_PROFILE_KEYS: tuple[str, ...]
    _OVERLOAD_PROFILE_KEYS: tuple[str, ...]
    _METER_KEYS: tuple[str, ...]
    _METER_ACTION_KEYS: tuple[str, ...]
    _REMARK_KEYS: tuple[str, ...]
    _METER_BUCKET_KEYS: tuple[str, ...]
    _METER_FIELDS: dict[str, tuple[str, ...]]
    _METER_REQUIRED: dict[str, tuple[str, ...]]


def __getattr__(name: str) -> Any:
    if name in _FROM_SCHEMA:
        return getattr(importlib.import_module("isolane.policy.schema"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
