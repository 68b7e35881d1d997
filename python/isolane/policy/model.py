"""The policy model: the frozen dataclasses a :class:`~isolane.policy.Policy` is made of (tenants,
classes, rules, contracts, meters, shapers, the port), each with its canonical data (``to_dict``)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, fields
from fractions import Fraction
from typing import TYPE_CHECKING, Any, Literal, NamedTuple, TypeVar

from isolane.policy.addresses import CompactPrefix, Network, PortRange
from isolane.policy.compact import SingleItem, compact_fields, field_slots, held_together
from isolane.policy.constants import _DSCP_NAME, _METER_FIELDS, _PROTO_NAME, DEFAULT_STAGGER_NS, ETHERTYPES, ActionName, CountMode, MeterKind, PortMode
from isolane.policy.sharing import shared
from isolane.policy.units import format_duration, format_rate, format_size

_T = TypeVar("_T")
_ETHERTYPE_NAME = {number: name for name, number in ETHERTYPES.items()}


def _unless_none(convert: Callable[[_T], Any], value: _T | None) -> Any:
    return None if value is None else convert(value)


def _given(**values: Any) -> dict[str, Any]:
    """The values that are set, in order: ``to_dict`` leaves defaults (``None``) out."""
    return {key: value for key, value in values.items() if value is not None}


@dataclass(frozen=True, slots=True)
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


@dataclass(frozen=True, slots=True)
class Remark:
    """A meter action: pass the packet with its DSCP rewritten to ``dscp``."""

    dscp: int

    def to_dict(self) -> dict[str, Any]:
        return {"remark": _DSCP_NAME.get(self.dscp, self.dscp)}


ColorAction = Literal["pass", "drop"] | Remark


def _action_to_data(action: ColorAction) -> str | dict[str, Any]:
    return action.to_dict() if isinstance(action, Remark) else action


@dataclass(frozen=True, slots=True)
class _MeterTerms:
    """A meter's fields but its kind and rate: meters of distinct rates (a tenant's own) most often
    share them, and a read keeps them once (:func:`~isolane.policy.sharing.shared`)."""

    cbs_bytes: int | None
    ebs_bytes: int | None
    pir_bps: int | None
    pbs_bytes: int | None
    eir_bps: int | None
    color_aware: bool
    count: CountMode | None
    green: ColorAction
    yellow: ColorAction
    red: ColorAction


@held_together("_terms", _MeterTerms)  # 56 bytes a meter, not 128: tenants of distinct rates have one each
@dataclass(frozen=True, init=False)
class Meter:
    """A token-bucket meter: RFC 2697 srTCM (``cir``, ``cbs``, ``ebs``), RFC 2698 trTCM (``cir``,
    ``cbs``, ``pir``, ``pbs``) or RFC 4115 (``cir``, ``cbs``, ``eir``, ``ebs``). Rates are bits per
    second as written (the compiled view has bytes), bursts bytes; ``None`` is the default burst
    (:func:`default_burst` of its rate) and, for ``count``, the policy's ``count``. Fields that
    the kind does not have are ``None``. A colour-aware meter reads the packet's colour from its
    DSCP through the policy's ``color_map``. ``green``/``yellow``/``red`` say what happens to
    packets of each colour."""

    __slots__ = ("kind", "cir_bps", "_terms")  # the other fields are read from _terms
    kind: MeterKind
    cir_bps: int
    cbs_bytes: int | None
    ebs_bytes: int | None
    pir_bps: int | None
    pbs_bytes: int | None
    eir_bps: int | None
    color_aware: bool
    count: CountMode | None
    green: ColorAction
    yellow: ColorAction
    red: ColorAction
    if TYPE_CHECKING:
        _terms: _MeterTerms

    def __init__(
        self,
        kind: MeterKind,
        cir_bps: int,
        cbs_bytes: int | None = None,
        ebs_bytes: int | None = None,
        pir_bps: int | None = None,
        pbs_bytes: int | None = None,
        eir_bps: int | None = None,
        color_aware: bool = False,
        count: CountMode | None = None,
        green: ColorAction = "pass",
        yellow: ColorAction = "pass",
        red: ColorAction = "drop",
    ) -> None:
        terms = _MeterTerms(cbs_bytes, ebs_bytes, pir_bps, pbs_bytes, eir_bps, color_aware, count, green, yellow, red)
        object.__setattr__(self, "kind", kind)
        object.__setattr__(self, "cir_bps", cir_bps)
        object.__setattr__(self, "_terms", shared(terms))

    def __reduce__(self) -> tuple[type[Meter], tuple[Any, ...]]:
        """Pickled as its fields: made again, it shares its terms as a read would."""
        terms = self._terms
        return Meter, (self.kind, self.cir_bps, *(getattr(terms, f.name) for f in fields(terms)))

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


@dataclass(frozen=True, slots=True)
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
    microburst: Microburst | None = None
    """Bursts of the whole port (``docs/bursts.md``); the engine watches the port with a 10 us
    window at its line rate when this is None."""
    overload: Overload | None = None
    """When the tenants with an ``on_overload`` profile take it (``docs/qos.md``, "Adaptive profiles")."""

    @property
    def alpha(self) -> int | float:
        """The dynamic threshold's alpha (exact: a power of two)."""
        return 1 << self.alpha_log2 if self.alpha_log2 >= 0 else 0.5**-self.alpha_log2

    def to_dict(self) -> dict[str, Any]:
        out = {"rate": format_rate(self.rate_bps), "buffer": format_size(self.buffer_bytes), "mode": self.mode}
        reserve = format_size(self.reserve_bytes) if self.reserve_bytes else None
        return out | _given(
            alpha=self.alpha if self.alpha_log2 else None,
            reserve=reserve,
            microburst=_unless_none(Microburst.to_dict, self.microburst),
            overload=_unless_none(Overload.to_dict, self.overload),
        )


@dataclass(frozen=True, slots=True)
class Overload:
    """The port is overloaded from the packet after which more than ``above_bytes`` wait in its
    buffer until it holds ``below_bytes`` or less; the tenants then leave their ``on_overload``
    profiles one every ``stagger_ns``. ``above_percent``/``below_percent``: a threshold as
    written, a share of the buffer, when it was written so."""

    above_bytes: int
    below_bytes: int
    stagger_ns: int = DEFAULT_STAGGER_NS
    above_percent: Fraction | None = None
    below_percent: Fraction | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "above": _size_or_percent(self.above_bytes, self.above_percent),
            "below": _size_or_percent(self.below_bytes, self.below_percent),
            "stagger": format_duration(self.stagger_ns),
        }


def _size_or_percent(size: int, percent: Fraction | None) -> str:
    return format_size(size) if percent is None else f"{_decimal(percent)}%"


@dataclass(frozen=True, slots=True)
class Microburst:
    """Microburst detection for a tenant, a class or the port (``docs/bursts.md``): a window of
    ``window_ns`` carrying more than ``threshold_bps`` is a burst (the rate view); with
    ``queue_rise_bytes``, so is the scope's queue at the port above it, until it falls to
    ``queue_fall_bytes`` (the queue view). ``threshold_percent``: the threshold as written, a
    share of the scope's rate (of the line rate for the port), when it was written so."""

    window_ns: int
    threshold_bps: int
    queue_rise_bytes: int | None = None
    queue_fall_bytes: int | None = None
    threshold_percent: Fraction | None = None

    def to_dict(self) -> dict[str, Any]:
        percent = self.threshold_percent
        threshold = format_rate(self.threshold_bps) if percent is None else f"{_decimal(percent)}%"
        out: dict[str, Any] = {"window": format_duration(self.window_ns), "threshold": threshold}
        if self.queue_rise_bytes is not None:
            out["queue"] = {"rise": format_size(self.queue_rise_bytes), "fall": format_size(self.queue_fall_bytes or 0)}
        return out


def _decimal(value: Fraction) -> str:
    """A percentage as it was written (it came from a decimal, so it is one)."""
    return str(value.numerator) if value.denominator == 1 else str(float(value))


@dataclass(frozen=True, slots=True)
class Contract:
    """The contract of a tenant or a class (``docs/qos.md``): its guarantee (``rate_bps``, with
    ``burst_bytes``) and ceiling (``ceil_bps``) at the egress port, a meter, a shaper, and
    microburst detection (``docs/bursts.md``). All rates are in bits per second, sizes in bytes; ``None``
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


@dataclass(frozen=True, slots=True)
class Profile:
    """An adaptive profile of a tenant or a class (``docs/qos.md``, "Adaptive profiles"): what it
    changes while it holds; ``None`` keeps its owner's own. ``meter`` and ``shaper`` replace the
    owner's; ``priority`` is every class queue's at the port (a class's: its queue's) and ``weight``
    the tenant's port weight (a class's: its weight within its tenant). An ``on_overload`` profile may cap every class queue at its guarantee
    (``borrow=False``); an ``on_burst`` profile is kept ``hold_ns`` after the burst and taken at
    most ``max_switches`` times in a second (``None``: no limit)."""

    meter: Meter | None = None
    shaper: Shaper | None = None
    priority: int | None = None
    weight: int | None = None
    borrow: bool = True
    hold_ns: int = 0
    max_switches: int | None = None

    def to_dict(self) -> dict[str, Any]:
        # Only what is set: borrow belongs to on_overload profiles, hold and max_switches to on_burst ones.
        return _given(
            meter=_unless_none(Meter.to_dict, self.meter),
            shaper=_unless_none(Shaper.to_dict, self.shaper),
            priority=self.priority,
            weight=self.weight,
            borrow=None if self.borrow else False,
            hold=format_duration(self.hold_ns) if self.hold_ns else None,
            max_switches=self.max_switches,
        )


@dataclass(frozen=True, slots=True)
class TrafficClass:
    """A tenant's traffic class; its id is its index in ``Tenant.classes``. ``priority`` (0
    first) and ``weight`` (its share within the priority) schedule it at the egress port;
    ``None`` is the default (priority 7, weight 1)."""

    name: str
    priority: int | None = None
    weight: int | None = None
    contract: Contract = field(default_factory=Contract)
    description: str | None = None
    on_burst: Profile | None = None
    """Taken while a rate event of its own ``microburst`` setting is open (``docs/qos.md``, "Adaptive profiles")."""

    def to_dict(self) -> dict[str, Any]:
        out = _given(name=self.name, description=self.description, priority=self.priority, weight=self.weight)
        out.update(self.contract.to_dict())
        out.update(_given(on_burst=_unless_none(Profile.to_dict, self.on_burst)))
        return out


@compact_fields(CompactPrefix, "src", "dst")  # the most numerous objects of a large policy
@dataclass(frozen=True, slots=True)
class Rule:
    """One policy rule. ``None`` matches anything; ``src_ports``/``dst_ports`` are sorted,
    merged inclusive ranges; ``proto``/``dscp`` sorted numbers. ``class_name`` is the file's
    ``class``: the class of an ``allow`` rule (the tenant's default class when the file names
    none), ``None`` for ``drop``; its id in the compiled tables is ``cls``. ``ethertype``: the rule
    matches the tenant's frames of that EtherType (ARP, ...) and has no IP fields."""

    action: ActionName
    class_name: str | None = None
    src: Network | None = None
    dst: Network | None = None
    src_ports: tuple[PortRange, ...] | None = None
    dst_ports: tuple[PortRange, ...] | None = None
    proto: tuple[int, ...] | None = None
    dscp: tuple[int, ...] | None = None
    name: str | None = None
    description: str | None = None
    ethertype: int | None = None

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
        if self.ethertype is not None:
            out["ethertype"] = _ETHERTYPE_NAME.get(self.ethertype, f"0x{self.ethertype:04x}")
        out["action"] = self.action
        if self.class_name is not None:
            out["class"] = self.class_name
        return out


class RuleSlots(NamedTuple):
    """What the core makes :class:`Rule` objects with (``YamlStream.plain_rules``): the type, and
    the member descriptor of each field, in their order."""

    kind: type[Rule]
    fields: tuple[Any, ...]


RULE_SLOTS = RuleSlots(Rule, field_slots(Rule))


def _ports_to_data(ports: tuple[PortRange, ...]) -> int | str | list[str]:
    # List entries are written as strings, which older isolane versions read the same (they read
    # a list of exactly two integers as a range).
    texts = [str(lo) if lo == hi else f"{lo}-{hi}" for lo, hi in ports]
    if len(ports) == 1:
        lo, hi = ports[0]
        return lo if lo == hi else texts[0]
    return texts


@compact_fields(SingleItem, "vnis", "rules")  # most tenants have one of each
@dataclass(frozen=True, slots=True)
class Tenant:
    """A tenant: what selects its traffic (``vnis``; ``vlans`` and ``sources`` for untunnelled
    traffic), its classes, rules (first match wins), default action and contract."""

    name: str
    vnis: tuple[int, ...] = ()
    vlans: tuple[int, ...] = ()
    sources: tuple[Network, ...] = ()
    classes: tuple[TrafficClass, ...] = (TrafficClass("default"),)
    default_class: str = "default"
    default: ActionName = "allow"
    rules: tuple[Rule, ...] = ()
    contract: Contract = field(default_factory=Contract)
    description: str | None = None
    weight: int | None = None
    """Its share of the port's spare capacity; ``None``: in proportion to its guarantee
    (``docs/qos.md``)."""
    on_burst: Profile | None = None
    """Taken while a rate event of its ``microburst`` setting is open (``docs/qos.md``, "Adaptive profiles")."""
    on_overload: Profile | None = None
    """Taken while the port is overloaded (``Port.overload``)."""
    # What is made from the tenant once, kept on it (it is immutable) by the modules that make it.
    _source: bytes | tuple[bytes, str, tuple[str, ...]] | None = field(default=None, init=False, repr=False, compare=False)
    """A digest of the data it was read from; with where it was read and what reading it
    warned, if it warned (``isolane.policy.reuse``). One field: a tenant's every slot counts."""
    _tables: Any = field(default=None, init=False, repr=False, compare=False)
    """Its ``TenantTables`` (``isolane.policy.compile.tenant_tables``)."""
    _compiled_qos: Any = field(default=None, init=False, repr=False, compare=False)
    """(``QosContext``, ``TenantQos``) (``isolane.policy.qos.tenant_qos``)."""

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
        out.update(_given(on_burst=_unless_none(Profile.to_dict, self.on_burst), on_overload=_unless_none(Profile.to_dict, self.on_overload)))
        out["classes"] = [c.to_dict() for c in self.classes]
        out["default_class"] = self.default_class
        out["default"] = self.default
        out["rules"] = [r.to_dict() for r in self.rules]
        return out
