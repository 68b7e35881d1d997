"""Compiled QoS (``docs/qos.md``): a policy's meters, shapers, guarantees, ceilings and port as
the integer arrays the Rust meters and schedulers take (:class:`CompiledQos`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np
import numpy.typing as npt

from isolane.policy.across import _guarantee
from isolane.policy.compile import I64, U8, U32, U64, _readonly
from isolane.policy.constants import (
    _METER_BUCKETS,
    COLOR_ACTIONS,
    COLORS,
    COUNT_MODES,
    DEFAULT_MAX_DELAY_NS,
    DEFAULT_PRIORITY,
    METER_KINDS,
    PORT_MODES,
)
from isolane.policy.model import Contract, Meter, Microburst, Profile, Remark, Tenant
from isolane.policy.sharing import recall, remember, shared, sharing
from isolane.policy.units import bytes_in, default_burst, smallest_meter_burst, time_of

if TYPE_CHECKING:
    from isolane.policy.policy import Policy


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
class BurstArrays:
    """The scopes watched for microbursts (``docs/bursts.md``), one row each: the port's first
    if the policy has a port (its own setting, else a 10 us window at the line rate)."""

    scope: U8
    """0 the port, 1 a tenant, 2 a class."""
    tenant: I64
    """The tenant id (-1 for the port)."""
    cls: I64
    """The class id of a class scope (else -1)."""
    window_ns: U64
    threshold_bps: U64
    has_queue: U8
    """1 where the scope has a queue view, with ``queue_rise`` and ``queue_fall`` bytes."""
    queue_rise: U64
    queue_fall: U64

    def __len__(self) -> int:
        return len(self.scope)


DEFAULT_PORT_BURST_WINDOW_NS = 10_000
"""The port's window when the policy gives it no ``microburst``: 10 us at its line rate."""


class MeterRow(NamedTuple):
    """A meter as :class:`MeterArrays` holds it in a row (``kind`` 0: none)."""

    kind: int
    color_aware: bool
    byte_count: int
    """Which bytes it counts (``COUNT_MODES`` code)."""
    cir: int
    cbs: int
    eir: int
    ebs: int
    pir: int
    pbs: int
    actions: tuple[int, int, int]
    remark_dscp: tuple[int, int, int]


class ShaperRow(NamedTuple):
    """A shaper as :class:`ShaperArrays` holds it in a row (``rate`` 0: none)."""

    rate: int
    burst: int
    queue: int
    max_delay_ns: int


class BurstRow(NamedTuple):
    """A scope's microburst setting: its window, threshold (bit/s) and queue view (rise, fall bytes)."""

    window_ns: int
    threshold_bps: int
    queue: tuple[int, int] | None


class ProfileRow(NamedTuple):
    """An adaptive profile (docs/qos.md, "Adaptive profiles"): what it changes of its tenant's
    (or class's) contract and class queues, ``None`` keeping the owner's own. The meter and
    shaper are compiled as the owner's are."""

    meter: MeterRow | None
    shaper: ShaperRow | None
    priority: int | None
    """Every class queue's priority (a class's profile: its queue's)."""
    weight: int | None
    """The tenant's port weight (a class's profile: the class's weight within its tenant)."""
    no_borrowing: bool
    """Every class queue capped at its guarantee (``borrow: false``)."""
    hold_ns: int
    max_switches_per_s: int
    """0: no limit."""


class ClassQos(NamedTuple):
    """A class's contract and the inputs of its port queue (the engine works out the queue)."""

    priority: int
    weight: int
    rate: int
    burst: int
    burst_given: bool
    ceil: int
    """Its ceil, else its tenant's; 0: uncapped (the port's line rate)."""
    meter: MeterRow
    shaper: ShaperRow
    microburst: BurstRow | None
    on_burst: ProfileRow | None
    """Taken while a rate event of the class's own microburst setting is open."""


class TenantQos(NamedTuple):
    """A tenant's QoS compiled from its part of the policy alone (rates bytes/s, sizes bytes),
    under the policy-wide settings it depends on (:class:`QosContext`); what the engine reads."""

    name: str
    rate: int
    weight: int
    """Its port ``weight`` (0: none; its guarantee, ``rate``, is then its share of the port's
    spare capacity, through the policy's weight scale: :func:`~isolane.policy.across.weight_scale`)."""
    burst: int
    burst_given: bool
    ceil: int
    """Its ceil; 0: uncapped (the port's line rate, whatever it is, so that a new line rate
    compiles no tenant again)."""
    meter: MeterRow
    shaper: ShaperRow
    microburst: BurstRow | None
    classes: tuple[ClassQos, ...]
    on_burst: ProfileRow | None
    on_overload: ProfileRow | None


class QosContext(NamedTuple):
    """The policy-wide settings a tenant's compiled QoS depends on."""

    byte_count: int
    largest_frame: int


class OverloadRow(NamedTuple):
    """The port's overload setting: thresholds in bytes of its buffer, the stagger of returns."""

    above: int
    below: int
    stagger_ns: int


class PortQos(NamedTuple):
    rate: int
    buffer: int
    mode: int
    alpha_log2: int
    reserve: int
    microburst: BurstRow
    overload: OverloadRow | None


class QosSettings(NamedTuple):
    """The policy-wide QoS settings as the engine reads them."""

    byte_count: int
    color_map: bytes
    port: PortQos | None
    poll_ns: tuple[int, ...]


_NO_METER = tuple(MeterRow(0, False, mode, 0, 0, 0, 0, 0, 0, (0, 0, 0), (0, 0, 0)) for mode in range(len(COUNT_MODES)))
"""No meter, by the policy's byte count."""


def _meter_row(meter: Meter | None, context: QosContext) -> MeterRow:
    if meter is None:
        return _NO_METER[context.byte_count]
    rates = {"cir": (meter.cir_bps or 0) // 8, "eir": (meter.eir_bps or 0) // 8, "pir": (meter.pir_bps or 0) // 8}
    given = {"cbs": meter.cbs_bytes, "ebs": meter.ebs_bytes, "pbs": meter.pbs_bytes}
    sizes = dict.fromkeys(given, 0)
    smallest = smallest_meter_burst(meter.kind, context.largest_frame)
    for size_key, rate_key in _METER_BUCKETS[meter.kind]:
        size, rate = given[size_key], rates[rate_key]
        sizes[size_key] = size if size is not None else (default_burst(rate, smallest) if rate else 0)
    colours = (meter.green, meter.yellow, meter.red)
    return MeterRow(
        kind=METER_KINDS[meter.kind],
        color_aware=meter.color_aware,
        byte_count=COUNT_MODES[meter.count] if meter.count is not None else context.byte_count,
        **rates,
        **sizes,
        actions=tuple(COLOR_ACTIONS["remark" if isinstance(a, Remark) else a] for a in colours),  # type: ignore[arg-type]
        remark_dscp=tuple(a.dscp if isinstance(a, Remark) else 0 for a in colours),  # type: ignore[arg-type]
    )


def _burst_row(setting: Microburst | None) -> BurstRow | None:
    if setting is None:
        return None
    queue = (setting.queue_rise_bytes, setting.queue_fall_bytes or 0) if setting.queue_rise_bytes is not None else None
    return BurstRow(setting.window_ns, setting.threshold_bps, queue)


def _profile_row(profile: Profile | None, owner: Contract, context: QosContext) -> ProfileRow | None:
    if profile is None:
        return None
    # The profile's shaper in its owner's (tenant's or class's) contract: without a rate it shapes to the owner's ceil, else its rate.
    shaper = ShaperRow(*_shaper_row(replace(owner, shaper=profile.shaper), context.largest_frame)) if profile.shaper is not None else None
    return ProfileRow(
        meter=_meter_row(profile.meter, context) if profile.meter is not None else None,
        shaper=shaper,
        priority=profile.priority,
        weight=profile.weight,
        no_borrowing=not profile.borrow,
        hold_ns=profile.hold_ns,
        max_switches_per_s=profile.max_switches or 0,
    )


def _compile_tenant_qos(tenant: Tenant, context: QosContext) -> TenantQos:
    """``tenant``'s compiled QoS: what is compiled for its contract, classes and profiles, under
    its name and with its weight; remembered by the identity of those parts (tenants read with
    equal contracts share them) and the context. The cache holds the parts, so that their
    identities stay theirs."""
    parts = (tenant.contract, tenant.classes, tenant.on_burst, tenant.on_overload)
    key = (*map(id, parts), context)
    found: tuple[tuple[Any, ...], TenantQos] | None = recall("compiled qos", key)
    if found is None:
        found = (parts, _compile_qos_of(tenant, context))
        remember("compiled qos", key, found)
    compiled = found[1]
    return TenantQos(tenant.name, compiled.rate, tenant.weight or 0, *compiled[3:])


def _compile_qos_of(tenant: Tenant, context: QosContext) -> TenantQos:
    lf = context.largest_frame
    c = tenant.contract
    rate = _guarantee(tenant) // 8
    ceil = c.ceil_bps // 8 if c.ceil_bps is not None else 0
    classes = []
    for tc in tenant.classes:
        cc = tc.contract
        crate = (cc.rate_bps or 0) // 8
        classes.append(
            ClassQos(
                priority=tc.priority if tc.priority is not None else DEFAULT_PRIORITY,
                weight=tc.weight if tc.weight is not None else 1,
                rate=crate,
                burst=cc.burst_bytes if cc.burst_bytes is not None else (default_burst(crate, lf) if crate else 0),
                burst_given=cc.burst_bytes is not None,
                ceil=cc.ceil_bps // 8 if cc.ceil_bps is not None else ceil,
                meter=shared(_meter_row(cc.meter, context)),
                shaper=shared(ShaperRow(*_shaper_row(cc, lf))),
                microburst=_burst_row(cc.microburst),
                on_burst=_profile_row(tc.on_burst, cc, context),
            )
        )
    return TenantQos(
        name=tenant.name,
        rate=shared(rate),
        weight=tenant.weight or 0,
        burst=shared(c.burst_bytes if c.burst_bytes is not None else (default_burst(rate, lf) if rate else 0)),
        burst_given=c.burst_bytes is not None,
        ceil=shared(ceil),
        meter=shared(_meter_row(c.meter, context)),
        shaper=shared(ShaperRow(*_shaper_row(c, lf))),
        microburst=_burst_row(c.microburst),
        classes=shared(tuple(shared(cls) for cls in classes)),
        on_burst=_profile_row(tenant.on_burst, c, context),
        on_overload=_profile_row(tenant.on_overload, c, context),
    )


def tenant_qos(tenant: Tenant, context: QosContext, keep: bool = True) -> TenantQos:
    """``tenant``'s compiled QoS under ``context``, computed once and kept on the tenant (which
    is immutable), so that policies sharing a tenant share its compiled form. ``keep=False``:
    for one use (an engine copies it into its core), not kept unless it was already."""
    kept: tuple[QosContext, TenantQos] | None = tenant._compiled_qos
    if kept is not None and kept[0] == context:
        return kept[1]
    compiled = _compile_tenant_qos(tenant, context)
    if keep:
        object.__setattr__(tenant, "_compiled_qos", (context, compiled))
    return compiled


def qos_context(policy: Policy) -> QosContext:
    return QosContext(COUNT_MODES[policy.count], policy.largest_frame)


def qos_settings(policy: Policy, poll_ns: tuple[int, ...]) -> QosSettings:
    """The policy-wide settings the engine reads, with the polling intervals of its polled views."""
    color_map = bytearray(64)
    for dscp, colour in policy.color_map:
        color_map[dscp] = COLORS[colour]
    port = None
    if policy.port is not None:
        p = policy.port
        setting = p.microburst or Microburst(DEFAULT_PORT_BURST_WINDOW_NS, p.rate_bps)
        burst = _burst_row(setting)
        assert burst is not None
        overload = OverloadRow(p.overload.above_bytes, p.overload.below_bytes, p.overload.stagger_ns) if p.overload is not None else None
        port = PortQos(p.rate_bps // 8, p.buffer_bytes, PORT_MODES[p.mode], p.alpha_log2, p.reserve_bytes, burst, overload)
    return QosSettings(COUNT_MODES[policy.count], bytes(color_map), port, poll_ns)


def _burst_arrays(policy: Policy) -> BurstArrays:
    rows: list[tuple[int, int, int, Microburst]] = []
    if policy.port is not None:
        port = policy.port.microburst or Microburst(DEFAULT_PORT_BURST_WINDOW_NS, policy.port.rate_bps)
        rows.append((0, -1, -1, port))
    for tid, tenant in enumerate(policy.tenants):
        if tenant.contract.microburst is not None:
            rows.append((1, tid, -1, tenant.contract.microburst))
        rows.extend((2, tid, cid, tc.contract.microburst) for cid, tc in enumerate(tenant.classes) if tc.contract.microburst is not None)
    return BurstArrays(
        scope=_column([r[0] for r in rows], np.uint8),
        tenant=_column([r[1] for r in rows], np.int64),
        cls=_column([r[2] for r in rows], np.int64),
        window_ns=_column([r[3].window_ns for r in rows], np.uint64),
        threshold_bps=_column([r[3].threshold_bps for r in rows], np.uint64),
        has_queue=_column([r[3].queue_rise_bytes is not None for r in rows], np.uint8),
        queue_rise=_column([r[3].queue_rise_bytes or 0 for r in rows], np.uint64),
        queue_fall=_column([r[3].queue_fall_bytes or 0 for r in rows], np.uint64),
    )


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
    bursts: BurstArrays

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


def _meter_arrays(rows: Sequence[MeterRow]) -> MeterArrays:
    n = len(rows)
    small = ("kind", "color_aware", "count")
    columns = {name: _column([getattr(r, field) for r in rows], np.uint8 if name in small else np.uint64) for name, field in _METER_SCALARS}
    return MeterArrays(
        **columns,
        action=_column([a for r in rows for a in r.actions], np.uint8, (n, 3)),
        remark_dscp=_column([d for r in rows for d in r.remark_dscp], np.uint8, (n, 3)),
    )


_METER_SCALARS = [(name, "byte_count" if name == "count" else name) for name in ("kind", "color_aware", "count", "cir", "cbs", "eir", "ebs", "pir", "pbs")]
"""(MeterArrays column, MeterRow field)."""


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
        queue = bytes_in(delay, rate)
    if delay is None:
        delay = time_of(queue, rate)
    return (rate, burst, queue, delay)


def _shaper_arrays(rows: Sequence[ShaperRow]) -> ShaperArrays:
    columns = list(zip(*rows)) if rows else [(), (), (), ()]
    return ShaperArrays(*(_column(list(c), np.uint64) for c in columns))


@sharing()
def _compile_qos(policy: Policy) -> CompiledQos:
    """The columns of every tenant's :func:`tenant_qos`, tenant by tenant."""
    context = qos_context(policy)
    tenants = [tenant_qos(t, context) for t in policy.tenants]
    classes = [c for t in tenants for c in t.classes]
    offsets = [0]
    for t in tenants:
        offsets.append(offsets[-1] + len(t.classes))
    settings = qos_settings(policy, ())
    port = settings.port
    port_rate = port.rate if port is not None else 0
    return CompiledQos(
        tenant_names=policy.tenant_names,
        count=context.byte_count,
        largest_frame=context.largest_frame,
        color_map=_column(list(settings.color_map), np.uint8),
        port_rate=port_rate,
        port_buffer=port.buffer if port is not None else 0,
        port_mode=port.mode if port is not None else PORT_MODES["per_tenant"],
        port_alpha_log2=port.alpha_log2 if port is not None else 0,
        port_reserve=port.reserve if port is not None else 0,
        tenant_rate=_column([t.rate for t in tenants], np.uint64),
        tenant_burst=_column([t.burst for t in tenants], np.uint64),
        tenant_burst_given=_column([t.burst_given for t in tenants], np.uint8),
        tenant_ceil=_column([t.ceil or port_rate for t in tenants], np.uint64),
        tenant_weight=_readonly(policy._port_weights.copy()),
        tenant_meter=_meter_arrays([t.meter for t in tenants]),
        tenant_shaper=_shaper_arrays([t.shaper for t in tenants]),
        class_offsets=_column(offsets, np.int64),
        class_tenant=_column([tid for tid, t in enumerate(tenants) for _ in t.classes], np.uint32),
        class_priority=_column([c.priority for c in classes], np.uint8),
        class_weight=_column([c.weight for c in classes], np.uint32),
        class_rate=_column([c.rate for c in classes], np.uint64),
        class_burst=_column([c.burst for c in classes], np.uint64),
        class_burst_given=_column([c.burst_given for c in classes], np.uint8),
        class_ceil=_column([c.ceil or port_rate for c in classes], np.uint64),
        class_meter=_meter_arrays([c.meter for c in classes]),
        class_shaper=_shaper_arrays([c.shaper for c in classes]),
        bursts=_burst_arrays(policy),
    )
