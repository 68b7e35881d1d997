"""Compiled QoS (``docs/qos.md``): a policy's meters, shapers, guarantees, ceilings and port as
the integer arrays the Rust meters and schedulers take (:class:`CompiledQos`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

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
from isolane.policy.model import ColorAction, Contract, Meter, Microburst, Remark
from isolane.policy.units import bytes_in, default_burst, time_of
from isolane.policy.validate import _guarantee, _tenant_weights

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
        queue = bytes_in(delay, rate)
    if delay is None:
        delay = time_of(queue, rate)
    return (rate, burst, queue, delay)


def _shaper_arrays(rows: Sequence[tuple[int, int, int, int]]) -> ShaperArrays:
    columns = list(zip(*rows)) if rows else [(), (), (), ()]
    return ShaperArrays(*(_column(list(c), np.uint64) for c in columns))


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
        tenant_weight=_column(_tenant_weights(policy.tenants), np.uint32),
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
        bursts=_burst_arrays(policy),
    )
