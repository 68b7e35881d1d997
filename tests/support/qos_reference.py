"""A plain reference of QoS enforcement (docs/qos.md, "Enforcement"), for tests only: the RFC
meters and the earliest-departure-time shaper written out from their definitions with Python
integers and fractions, and the order of stages, applied one packet at a time. The port that
may follow them is in port_reference.py."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import numpy as np

from isolane.codes import Color, Outcome
from isolane.policy import COUNT_MODES, COUNT_OVERHEAD, CompiledQos, MeterArrays, ShaperArrays

NANO = 10**9
GREEN, YELLOW, RED = Color.GREEN, Color.YELLOW, Color.RED
SRTCM, TRTCM, RFC4115 = 1, 2, 3
PASS, REMARK, DROP = 0, 1, 2


def frame_bytes(count: int, wire_len: int, inner_len: int) -> int:
    """The bytes a packet counts: inner (0), outer (1), wire (2: + 20), wire_fcs (3: + 24)."""
    overhead = {COUNT_MODES[name]: extra for name, extra in COUNT_OVERHEAD.items()}
    return inner_len if count == COUNT_MODES["inner"] else wire_len + overhead[count]


@dataclass
class Meter:
    """One meter; token counts in nano-bytes so that rate x elapsed ns is exact."""

    kind: int
    aware: bool
    count: int
    cir: int
    cbs: int
    eir: int
    ebs: int
    pir: int
    pbs: int
    actions: list[tuple[int, int]]
    tc: int = 0
    te_or_tp: int = 0
    last: int = 0
    ties: int = 0
    """Tests of a bucket that held exactly the packet's bytes: where RFC 4115 parts from the others."""

    def __post_init__(self) -> None:
        # Every RFC starts its buckets full.
        self.tc = self.cbs * NANO
        self.te_or_tp = (self.pbs if self.kind == TRTCM else self.ebs) * NANO

    def mark(self, now: int, size: int, incoming: Color) -> Color:
        elapsed = max(0, now - self.last)
        self.last = max(self.last, now)
        color = incoming if self.aware else GREEN
        need = size * NANO
        if self.kind == SRTCM:
            # RFC 2697: C fills at CIR up to CBS; what C cannot take goes to E, up to EBS.
            filled = self.tc + self.cir * elapsed
            spill = max(0, filled - self.cbs * NANO)
            self.tc = min(filled, self.cbs * NANO)
            self.te_or_tp = min(self.te_or_tp + spill, self.ebs * NANO)
        elif self.kind == RFC4115:
            # RFC 4115: C at CIR up to CBS, E at EIR up to EBS, independently.
            self.tc = min(self.tc + self.cir * elapsed, self.cbs * NANO)
            self.te_or_tp = min(self.te_or_tp + self.eir * elapsed, self.ebs * NANO)
        else:
            # RFC 2698: C at CIR up to CBS, P at PIR up to PBS.
            self.tc = min(self.tc + self.cir * elapsed, self.cbs * NANO)
            self.te_or_tp = min(self.te_or_tp + self.pir * elapsed, self.pbs * NANO)
            # "If the packet has been precolored as red or if Tp(t)-B < 0, the packet is red, else
            # if the packet has been precolored as yellow or if Tc(t)-B < 0, the packet is yellow"
            if color == RED or not self.holds(self.te_or_tp, need):
                return RED
            if color == YELLOW or not self.holds(self.tc, need):
                self.te_or_tp -= need
                return YELLOW
            self.te_or_tp -= need
            self.tc -= need
            return GREEN
        if color == GREEN and self.holds(self.tc, need):
            self.tc -= need
            return GREEN
        if color != RED and self.holds(self.te_or_tp, need):
            self.te_or_tp -= need
            return YELLOW
        return RED

    def holds(self, tokens: int, need: int) -> bool:
        """Whether a bucket can take the packet. RFC 2697 (Tc(t)-B >= 0) and RFC 2698 (red or
        yellow only if Tp(t)-B < 0 or Tc(t)-B < 0) let a packet empty a bucket; RFC 4115 asks for
        more tokens than bytes: green "if Tc(t)- B > 0", yellow "if Te(t)- B > 0"."""
        self.ties += tokens == need
        return tokens > need if self.kind == RFC4115 else tokens >= need


@dataclass
class Shaper:
    """GCRA: the theoretical arrival time (TAT) as an exact fraction of a nanosecond."""

    rate: int
    burst: int
    queue: int
    max_delay: int
    tat: Fraction = Fraction(0)
    last: int = 0

    def try_shape(self, now: int, size: int) -> tuple[int, Fraction, int] | Outcome:
        """(release, new TAT, new last) or the reason to drop; changes nothing."""
        now = max(now, self.last)
        tat = max(self.tat, Fraction(now)) + Fraction(size * NANO, self.rate)
        owed_ns = max(Fraction(0), tat - now - Fraction(self.burst * NANO, self.rate))
        if owed_ns * self.rate > self.queue * NANO:
            return Outcome.DROP_SHAPER_BYTES
        wait = math.ceil(owed_ns)
        if wait > self.max_delay:
            return Outcome.DROP_SHAPER_TIME
        return now + wait, tat, now


def _meters(arrays: MeterArrays) -> list[Meter | None]:
    out: list[Meter | None] = []
    for row in range(len(arrays.kind)):
        if arrays.kind[row] == 0:
            out.append(None)
            continue
        actions = [(int(arrays.action[row, c]), int(arrays.remark_dscp[row, c])) for c in range(3)]
        columns = ("cir", "cbs", "eir", "ebs", "pir", "pbs")
        values = {name: int(getattr(arrays, name)[row]) for name in columns}
        out.append(Meter(int(arrays.kind[row]), bool(arrays.color_aware[row]), int(arrays.count[row]), actions=actions, **values))
    return out


def _shapers(arrays: ShaperArrays) -> list[Shaper | None]:
    return [
        Shaper(int(arrays.rate[r]), int(arrays.burst[r]), int(arrays.queue[r]), int(arrays.max_delay_ns[r])) if arrays.rate[r] else None
        for r in range(len(arrays.rate))
    ]


@dataclass
class Reference:
    """Meters and shapers of one policy (its port, if any, is port_reference's)."""

    qos: CompiledQos
    tenant_meters: list[Meter | None] = field(init=False)
    class_meters: list[Meter | None] = field(init=False)
    tenant_shapers: list[Shaper | None] = field(init=False)
    class_shapers: list[Shaper | None] = field(init=False)
    clock: int = 0

    def __post_init__(self) -> None:
        self.tenant_meters = _meters(self.qos.tenant_meter)
        self.class_meters = _meters(self.qos.class_meter)
        self.tenant_shapers = _shapers(self.qos.tenant_shaper)
        self.class_shapers = _shapers(self.qos.class_shaper)

    def packet(self, record: Any, verdict: Any) -> tuple[int, int, int, int]:
        """(color, outcome, dscp, release_ns) of one packet, in arrival order."""
        self.clock = max(self.clock, int(record["timestamp_ns"]))
        now, dscp = self.clock, int(record["dscp"])
        if verdict["action"] == 0:
            return Color.NONE, Outcome.DROP_CLASSIFIER, dscp, -1
        tenant = int(verdict["tenant"])
        if tenant < 0:
            return GREEN, Outcome.PASS, dscp, now
        row = self.qos.class_row(tenant, int(verdict["cls"]))
        wire, inner = int(record["wire_len"]), int(record["inner_len"])
        worst, remarked = GREEN, False
        incoming = Color(int(self.qos.color_map[dscp]))
        for meter in (self.tenant_meters[tenant], self.class_meters[row]):
            if meter is None:
                continue
            color = meter.mark(now, frame_bytes(meter.count, wire, inner), incoming)
            worst, incoming = max(worst, color), color
            action, remark_to = meter.actions[color]
            if action == DROP:
                return worst, Outcome.DROP_METER, dscp, -1
            if action == REMARK:
                dscp, remarked = remark_to, True
        size = frame_bytes(self.qos.count, wire, inner)
        shapers = [s for s in (self.tenant_shapers[tenant], self.class_shapers[row]) if s is not None]
        tried = [s.try_shape(now, size) for s in shapers]
        for attempt in tried:
            if isinstance(attempt, Outcome):
                return worst, attempt, dscp, -1
        release = now
        for shaper, attempt in zip(shapers, tried):
            assert not isinstance(attempt, Outcome)
            release = max(release, attempt[0])
            shaper.tat, shaper.last = attempt[1], attempt[2]
        return worst, Outcome.REMARKED if remarked else Outcome.PASS, dscp, release

    def run(self, records: np.ndarray, verdicts: np.ndarray) -> np.ndarray:
        rows = [self.packet(r, v) for r, v in zip(records, verdicts)]
        return np.array(rows, dtype=np.int64).reshape(-1, 4)
