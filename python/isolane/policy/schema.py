"""The shape of a policy document, written once: pydantic models of its mappings, each key with its
type, its allowed values, its default and what it means (``docs/policy.md``, ``docs/qos.md``,
``docs/bursts.md``).

Two things are derived from the models:

* the keys each mapping accepts, in the order ``to_dict`` writes them (``_TOP_KEYS``,
  ``_TENANT_KEYS``, ..., and which rates and bursts each meter kind takes): the checker reads
  them (through :mod:`isolane.policy.constants`), so a key added here is one the checker accepts;
* the JSON Schema (draft 2020-12) of the format, :func:`json_schema`, which ``isolane schema``
  prints.

The models validate nothing at run time. :class:`isolane.policy.validate._Checker` does, reporting
every problem with its place, a did-you-mean and units explained, none of which pydantic's own
messages give (``bench/schema_library_compare.py`` measures both). In a document an optional key
may be left out but is never ``null``: the JSON Schema says so (:class:`_Generator`).
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic.json_schema import GenerateJsonSchema, JsonSchemaValue
from pydantic_core import core_schema

from isolane.policy.addresses import PORT_PATTERN, PREFIX_PATTERN
from isolane.policy.constants import (
    DEFAULT_LARGEST_FRAME,
    DEFAULT_PRIORITY,
    DSCP_NAMES,
    ETHERTYPES,
    MAX_PORT,
    MAX_PRIORITY,
    MAX_PROFILE_SWITCHES,
    MAX_VLAN,
    MAX_VNI,
    MAX_WEIGHT,
    METER_KINDS,
    MIN_ETHERTYPE,
    PORT_ALPHA_LOG2,
    PROTOCOLS,
    SCHEMA_VERSION,
    ActionName,
    ColorName,
    CountMode,
    MeterKind,
    PortMode,
)
from isolane.policy.units import DURATION_PATTERN, RATE_PATTERN, SIZE_PATTERN

# -- values ----------------------------------------------------------------------------------------

Text = str
Name = Annotated[str, Field(min_length=1, pattern=r"\S")]
Rate = Annotated[str, Field(pattern=RATE_PATTERN, description="bits (bps, bit/s) or bytes (B/s) per second, e.g. '40Gbps'")]
Size = Annotated[str, Field(pattern=SIZE_PATTERN, description="bytes (B) or bits (bit), e.g. '256KiB'")]
Duration = Annotated[str, Field(pattern=DURATION_PATTERN, description="ns, us, ms or s, e.g. '10us'")]
Percent = Annotated[str, Field(pattern=r"^[0-9]+(\.[0-9]+)? ?%$", description="a percentage, e.g. '80%'")]
Prefix = Annotated[str, Field(pattern=PREFIX_PATTERN, description="an IPv4 or IPv6 prefix (a bare address is a host prefix) or 'any'")]
Source = Annotated[
    str, Field(pattern=PREFIX_PATTERN, description="an IPv4 or IPv6 prefix (a bare address is a host prefix)", json_schema_extra={"not": {"const": "any"}})
]
Weight = Annotated[int, Field(ge=1, le=MAX_WEIGHT)]
CountSetting = Annotated[CountMode, Field(description="inner frame, outer frame, outer frame + 20 B (wire) or + 24 B (wire_fcs)")]

PortNumber = Annotated[int, Field(ge=0, le=MAX_PORT)]
PortText = Annotated[str, Field(pattern=PORT_PATTERN, description="a port ('80') or an inclusive range ('8000-8080')")]
PortPair = Annotated[tuple[PortNumber, PortNumber], Field(description="an inclusive range [lo, hi], as an entry of a list")]
Ports = PortNumber | PortText | Annotated[list[PortNumber | PortText | PortPair], Field(min_length=1)]

if TYPE_CHECKING:  # names computed at run time are no Literal to a type checker
    ProtocolName = str
    DscpName = str
    EtherTypeName = str
else:
    ProtocolName = Literal[tuple(sorted(PROTOCOLS))]
    DscpName = Literal[tuple(sorted(DSCP_NAMES))]
    EtherTypeName = Literal[tuple(sorted(ETHERTYPES))]
Protocol = Annotated[int, Field(ge=0, le=255)] | ProtocolName
Dscp = Annotated[int, Field(ge=0, le=63)] | DscpName
EtherType = (
    EtherTypeName
    | Annotated[int, Field(ge=MIN_ETHERTYPE, le=0xFFFF)]
    | Annotated[str, Field(pattern=r"^0[xX][0-9a-fA-F]{1,4}$", description="a number in hexadecimal, e.g. '0x88cc'")]
)
#: A key of ``color_map``: a DSCP's name or number (a number is text in JSON, an integer in YAML).
DscpKey = DscpName | Annotated[int, Field(ge=0, le=63)] | Annotated[str, Field(pattern=r"^0*(?:6[0-3]|[1-5]?[0-9])$")]
Alpha = Annotated[float, Field(json_schema_extra={"enum": [2**k for k in PORT_ALPHA_LOG2]})]


class _Mapping(BaseModel):
    """A mapping of the document: only its keys, each at most once."""

    # defer_build: the models are read for their fields; pydantic builds a validator (used only to
    # generate the JSON Schema) on first use, not at import.
    model_config = ConfigDict(extra="forbid", defer_build=True)


# -- contracts (docs/qos.md) -----------------------------------------------------------------------


@dataclass(frozen=True)
class _Bucket:
    """Marks a meter's rate or burst: the kinds that take it (all by default) and those that need it."""

    kinds: tuple[MeterKind, ...] = tuple(METER_KINDS)  # type: ignore[arg-type]
    required: tuple[MeterKind, ...] = ()


class Remark(_Mapping):
    """Pass the packet with its DSCP rewritten."""

    remark: Dscp = Field(description="the DSCP to write: a name or 0-63")


ColorAction = Literal["pass", "drop"] | Remark


class MeterActions(_Mapping):
    """What the meter does with a packet of each colour: pass, drop or {remark: <DSCP>}."""

    green: ColorAction = "pass"
    yellow: ColorAction = "pass"
    red: ColorAction = "drop"


def _meter_kinds_schema(schema: dict[str, Any]) -> None:
    """The keys each meter kind takes and needs, as if/then (an editor then names the key)."""
    schema["allOf"] = [
        {
            "if": {"properties": {"kind": {"const": kind}}},
            "then": {
                "required": list(_METER_REQUIRED[kind]),
                "properties": {key: False for key in _METER_BUCKET_KEYS if key not in _METER_FIELDS[kind]},
            },
        }
        for kind in METER_KINDS
    ]


class Meter(_Mapping):
    """RFC 2697 srTCM (cir, cbs, ebs), RFC 2698 trTCM (cir, cbs, pir, pbs) or RFC 4115 (cir, cbs, eir, ebs)."""

    model_config = ConfigDict(json_schema_extra=_meter_kinds_schema)

    kind: MeterKind = Field(description="srtcm (RFC 2697), trtcm (RFC 2698) or rfc4115 (RFC 4115)")
    cir: Annotated[Rate, _Bucket()] = Field(description="committed rate: C fills at it")
    cbs: Annotated[Size | None, _Bucket()] = Field(None, description="the size of C (default: 1 ms at CIR, at least largest_frame, for rfc4115 a byte more)")
    eir: Annotated[Rate | None, _Bucket(("rfc4115",), required=("rfc4115",))] = Field(
        None, description="excess rate, RFC 4115: E fills at it ('0bps' switches E off)"
    )
    ebs: Annotated[Size | None, _Bucket(("srtcm", "rfc4115"))] = Field(
        None, description="the size of E (default: 1 ms at its rate, CIR for srtcm; at least largest_frame, for rfc4115 a byte more)"
    )
    pir: Annotated[Rate | None, _Bucket(("trtcm",), required=("trtcm",))] = Field(None, description="peak rate, trTCM: P fills at it (at least CIR)")
    pbs: Annotated[Size | None, _Bucket(("trtcm",))] = Field(None, description="the size of P (default: 1 ms at PIR, at least largest_frame)")
    color_aware: bool = Field(False, description="true: a packet's colour on arrival (its DSCP through color_map) counts, and the meter never improves it")
    count: CountSetting | None = Field(None, description="which bytes it counts (default: the policy's count)")
    actions: MeterActions | None = Field(None, description="what it does with each colour (default: green and yellow pass, red is dropped)")


class Shaper(_Mapping):
    """Earliest-departure-time shaper; drops at its tail beyond queue bytes or max_delay."""

    rate: Rate | None = Field(None, description="the shaping rate (default: the owner's ceil, else its rate)")
    burst: Size | None = Field(
        None, description="bytes that may leave at once after a quiet spell, at least 64 B (default: 1 ms at the rate, at least largest_frame)"
    )
    queue: Size | None = Field(None, description="most bytes that may wait (default: what leaves in max_delay)")
    max_delay: Duration | None = Field(None, description="longest a packet may wait (default: the time queue takes to leave; with neither, 1 ms)")


class QueueView(_Mapping):
    """The queue view's thresholds."""

    rise: Size = Field(description="a burst starts when the scope's queues hold more than this")
    fall: Size | None = Field(None, description="... and ends when they are down to this (at most rise; default half of rise)")


class Microburst(_Mapping):
    """Microburst detection (docs/bursts.md): a window carrying more than the threshold is a burst."""

    window: Duration = Field(description="the sliding window, 1us to 10ms")
    threshold: Rate | Percent = Field(description="a rate, or a percentage of the scope's own rate (the line rate for the port)")
    queue: Size | QueueView | None = Field(
        None,
        description="the queue view (needs a port): a burst while the scope's queues hold more than rise, until they fall to fall (default half of rise)",
    )


class _ProfileChanges(_Mapping):
    """What a profile may change of its tenant's contract and port queues (docs/qos.md, "Adaptive profiles")."""

    meter: Meter | None = Field(None, description="replaces the tenant's meter while the profile holds")
    shaper: Shaper | None = Field(None, description="replaces the tenant's shaper while the profile holds (its rate defaults as the tenant's shaper's does)")
    priority: Annotated[int, Field(ge=0, le=MAX_PRIORITY)] | None = Field(None, description="every class queue's priority at the port, 0 is served first")
    weight: Weight | None = Field(None, description="the tenant's port weight")


def _changes_something(*extra: dict[str, Any]) -> dict[str, Any]:
    """A profile gives at least one change: one of the keys of _ProfileChanges, or ``extra``."""
    return {"anyOf": [{"required": [key]} for key in _ProfileChanges.model_fields] + list(extra)}


class BurstProfile(_ProfileChanges):
    """The profile a tenant takes while a rate event of its own microburst setting is open, and for its hold after it."""

    model_config = ConfigDict(json_schema_extra=_changes_something())

    hold: Duration = Field("0ns", description="how long the profile is kept after the burst ends, at most 10s")
    max_switches: Annotated[int, Field(ge=1, le=MAX_PROFILE_SWITCHES)] | None = Field(
        None, description="at most this many switches into the profile in any second of packet time (default: no limit)"
    )


class OverloadProfile(_ProfileChanges):
    """The profile a tenant takes while the port is overloaded (the port's overload setting)."""

    model_config = ConfigDict(json_schema_extra=_changes_something({"required": ["borrow"], "properties": {"borrow": {"const": False}}}))

    borrow: bool = Field(True, description="false: every class queue is capped at its guarantee (the tenant or its classes need a rate)")


class _Contract(_Mapping):
    """The keys of a tenant's or a class's contract."""

    rate: Rate | None = Field(None, description="guaranteed rate at the egress port")
    burst: Size | None = Field(None, description="burst of the guarantee (default: 1 ms at the rate, at least the largest frame)")
    ceil: Rate | None = Field(None, description="the most the tenant or class may use at the egress port (at least rate)")
    meter: Meter | None = Field(None, description="a policer: its rates and bursts, and what it does with each colour (docs/qos.md)")
    shaper: Shaper | None = None
    microburst: Microburst | None = None


# -- rules, classes, tenants (docs/policy.md) ------------------------------------------------------


class Rule(_Mapping):
    """A rule of a tenant: it matches a packet when every field given matches; the first rule that matches decides."""

    model_config = ConfigDict(
        json_schema_extra={"if": {"properties": {"action": {"const": "drop"}}, "required": ["action"]}, "then": {"not": {"required": ["class"]}}}
    )

    name: Text | None = Field(None, description="for people (warnings quote it)")
    description: Text | None = None
    src: Prefix | None = Field(None, description="source prefix (omitted = any)")
    dst: Prefix | None = Field(None, description="destination prefix (omitted = any)")
    src_ports: Ports | None = Field(
        None, description="a port, a range or a list of them ([80, 443] is two ports; a list expands into several table rules); omitted = any"
    )
    dst_ports: Ports | None = Field(
        None, description="a port, a range or a list of them ([80, 443] is two ports; a list expands into several table rules); omitted = any"
    )
    proto: Protocol | Annotated[list[Protocol], Field(min_length=1)] | None = Field(None, description="protocol names or numbers; omitted = any")
    dscp: Dscp | Annotated[list[Dscp], Field(min_length=1)] | None = Field(None, description="DSCP names or numbers 0-63; omitted = any")
    ethertype: EtherType | None = Field(
        None, description="match the tenant's frames of this EtherType (arp, ipv4, ipv6 or a number such as 0x88cc); with no src, dst, ports, proto or dscp"
    )
    action: ActionName = Field(description="allow or drop")
    class_: Name | None = Field(None, alias="class", description="for allow: a class of the tenant (default: its default_class); not on drop")


class _ClassKeys(_Mapping):
    name: Name = Field(description="unique within the tenant")
    description: Text | None = None
    priority: Annotated[int, Field(ge=0, le=MAX_PRIORITY)] = Field(DEFAULT_PRIORITY, description="at the egress port, 0 is served first")
    weight: Weight = Field(1, description="share within its priority")


class _ClassProfiles(_Mapping):
    on_burst: BurstProfile | None = Field(
        None, description="taken while the class bursts (needs its own microburst); its meter and shaper replace the class's, its weight is the class's"
    )


# The keys in the order to_dict writes them: _ClassKeys's, the contract's, then the profile.
class TrafficClass(_ClassProfiles, _Contract, _ClassKeys):
    """A traffic class of a tenant; its id is its position in the tenant's classes."""


class _TenantKeys(_Mapping):
    name: Name = Field(description="unique among tenants")
    description: Text | None = None
    vnis: Annotated[list[Annotated[int, Field(ge=0, le=MAX_VNI)]], Field(json_schema_extra={"uniqueItems": True})] = Field(
        [], description="VXLAN/Geneve VNIs (24 bits) of the tenant's tunnelled traffic; a VNI belongs to one tenant only"
    )
    vlans: Annotated[list[Annotated[int, Field(ge=0, le=MAX_VLAN)]], Field(json_schema_extra={"uniqueItems": True})] = Field(
        [], description="outer VLAN ids of the tenant's untunnelled traffic; a VLAN belongs to one tenant only"
    )
    sources: list[Source] = Field([], description="outer source prefixes of the tenant's untunnelled traffic")
    weight: Weight | None = Field(
        None, description="share of the port's spare capacity; every tenant has one or none does (default: in proportion to the guarantee)"
    )


class _TenantRules(_Mapping):
    classes: Annotated[list[TrafficClass], Field(min_length=1)] | None = Field(
        None, description="traffic classes, at least one (default: one class, 'default')"
    )
    default_class: Name | None = Field(None, description="class of allow rules without 'class' and of default: allow (default: the first class)")
    default: ActionName = Field("allow", description="action when no rule matches")
    rules: list[Rule] = Field([], description="in order; the first rule that matches decides")


class _TenantProfiles(_Mapping):
    on_burst: BurstProfile | None = Field(None, description="taken while the tenant bursts (needs its microburst)")
    on_overload: OverloadProfile | None = Field(None, description="taken while the port is overloaded (needs the port's overload)")


# The keys in the order to_dict writes them: pydantic puts a base's fields before its subclass's, the
# bases taken from the last (so _TenantKeys's come first, then the contract's, the profiles, then _TenantRules's).
class Tenant(_TenantRules, _TenantProfiles, _Contract, _TenantKeys):
    """A tenant: the traffic that is its own (vnis, vlans, sources), its classes, rules and contract."""


class Overload(_Mapping):
    """When the port is overloaded (docs/qos.md, "Adaptive profiles"): tenants with on_overload take it."""

    above: Size | Percent = Field(description="overloaded once more than this waits in the buffer: a size or a percentage of the buffer, below it")
    below: Size | Percent = Field(description="no longer overloaded once the buffer holds this or less (at most above)")
    stagger: Duration = Field("10us", description="then the tenants return one by one, one every stagger (at most 10s; 0ns: all at once)")


class Port(_Mapping):
    """The egress port the tenants share (docs/qos.md)."""

    rate: Rate = Field(description="the line rate")
    buffer: Size = Field(description="bytes that may wait, all queues together")
    mode: PortMode = Field(
        "per_tenant", description="per_tenant (guarantees, ceilings, priorities and weights apply) or shared_fifo (one FIFO, to compare against)"
    )
    alpha: Alpha = Field(1, description="per_tenant: a queue may hold at most alpha x the shared buffer still free (dynamic threshold)")
    reserve: Size = Field("0B", description="per_tenant: bytes of the buffer set aside for the guarantees, in proportion to them")
    microburst: Microburst | None = Field(None, description="bursts of the whole port (default: a 10us window at the line rate)")
    overload: Overload | None = Field(None, description="when tenants take their on_overload profiles")


class PolicyDocument(_Mapping):
    """Tenants, their traffic classes, ordered rules (first match wins) and contracts. See docs/policy.md."""

    model_config = ConfigDict(title="isolane tenant policy", json_schema_extra={"$id": f"urn:isolane:policy:{SCHEMA_VERSION}"})

    version: Literal[SCHEMA_VERSION] = Field(SCHEMA_VERSION, description="the version of the format")  # type: ignore[valid-type]
    description: Text | None = None
    unknown_tenant: ActionName = Field("drop", description="what happens to traffic of no tenant")
    count: CountSetting = Field("outer", description="which bytes meters, shapers and the port count")
    largest_frame: Size = Field(f"{DEFAULT_LARGEST_FRAME}B", description="the largest frame, 64B to 2^32 - 1 B; no default burst is smaller")
    color_map: dict[DscpKey, ColorName] | None = Field(
        None, description="DSCP -> incoming colour for colour-aware meters; unmapped DSCPs are green (default: afX1 green, afX2 yellow, afX3 red)"
    )
    port: Port | None = None
    tenants: list[Tenant] = Field(description="the tenants (may be empty)")


# -- the keys each mapping takes -------------------------------------------------------------------


def _keys(model: type[BaseModel]) -> tuple[str, ...]:
    """The keys of a mapping, in the order its model declares them."""
    return tuple(field.alias or name for name, field in model.model_fields.items())


def _bucket(model: type[BaseModel], key: str) -> _Bucket | None:
    return next((m for m in model.model_fields[key].metadata if isinstance(m, _Bucket)), None)


_CONTRACT_KEYS = _keys(_Contract)
_TOP_KEYS = _keys(PolicyDocument)
_TENANT_KEYS = _keys(Tenant)
_CLASS_KEYS = _keys(TrafficClass)
_RULE_KEYS = _keys(Rule)
_SHAPER_KEYS = _keys(Shaper)
_MICROBURST_KEYS = _keys(Microburst)
_QUEUE_VIEW_KEYS = _keys(QueueView)
_PORT_KEYS = _keys(Port)
_OVERLOAD_KEYS = _keys(Overload)
_BURST_PROFILE_KEYS = _keys(BurstProfile)
_OVERLOAD_PROFILE_KEYS = _keys(OverloadProfile)
_METER_KEYS = _keys(Meter)
_METER_ACTION_KEYS = _keys(MeterActions)
_REMARK_KEYS = _keys(Remark)
#: A meter's rates and bursts (the keys some kinds take and others do not).
_METER_BUCKET_KEYS = tuple(key for key in _METER_KEYS if _bucket(Meter, key) is not None)
#: The rates and bursts of each meter kind, in the order to_dict writes them.
_METER_FIELDS: dict[str, tuple[str, ...]] = {
    kind: tuple(key for key in _METER_BUCKET_KEYS if kind in _bucket(Meter, key).kinds)  # type: ignore[union-attr]
    for kind in METER_KINDS
}
#: The rates each kind needs.
_METER_REQUIRED: dict[str, tuple[str, ...]] = {
    kind: tuple(
        key
        for key in _METER_BUCKET_KEYS
        if Meter.model_fields[key].is_required() or kind in _bucket(Meter, key).required  # type: ignore[union-attr]
    )
    for kind in METER_KINDS
}


# -- the JSON Schema -------------------------------------------------------------------------------


class _Generator(GenerateJsonSchema):
    """pydantic's JSON Schema generator, for a document written by hand: an optional key may be
    left out but is never null, a default of None (computed by isolane) is not written, keys have
    no titles, and a mapping says what its keys may be (``color_map``)."""

    def nullable_schema(self, schema: core_schema.NullableSchema) -> JsonSchemaValue:
        return self.generate_inner(schema["schema"])

    def default_schema(self, schema: core_schema.WithDefaultSchema) -> JsonSchemaValue:
        if schema.get("default", ...) is None:
            return self.generate_inner(schema["schema"])
        return super().default_schema(schema)

    def field_title_should_be_set(self, schema: Any) -> bool:
        return False

    def dict_schema(self, schema: core_schema.DictSchema) -> JsonSchemaValue:
        out = super().dict_schema(schema)
        if "keys_schema" in schema and "propertyNames" not in out:
            out["propertyNames"] = self.generate_inner(schema["keys_schema"])
        return out


def json_schema() -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of the policy format, generated from the models, as a new
    dict (``isolane.policy.schema()``)."""
    return json.loads(schema_text())


@functools.lru_cache(maxsize=1)
def schema_text() -> str:
    """The JSON Schema as indented JSON text (what ``isolane schema`` prints)."""
    generated = PolicyDocument.model_json_schema(schema_generator=_Generator)
    head = {"$schema": _Generator.schema_dialect, "$id": generated.pop("$id"), "title": generated.pop("title"), "description": generated.pop("description")}
    defs = generated.pop("$defs")
    return json.dumps({**head, **generated, "$defs": defs}, indent=2, ensure_ascii=False) + "\n"
