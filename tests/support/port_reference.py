"""A plain reference of the egress port (docs/qos.md, "The port in the engine" and "The port's
exact rules"), for tests only: written from those rules with Python integers and fractions, one
event at a time, scanning every queue at every event. It shares nothing with the Rust port
(rust/shaping/port.rs) nor with its Rust reference (rust/shaping/reference.rs).

`port_queues` turns a compiled policy into the port's queues; `Port` runs arrivals through
them; `process_with_port` is the whole of `Engine.process` for a policy with a port (the
meters and shapers of qos_reference, then the port) and what `Engine.stats` then reports."""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import numpy as np

from isolane.codes import Outcome
from isolane.policy import PORT_MODES, CompiledQos
from support.qos_reference import Reference, frame_bytes

NANO = 10**9
QUANTUM_BYTES = 9216  # a queue's round-robin quantum per unit of weight: one jumbo frame
SMALLEST_BUCKET = 9216
GUARANTEED, BORROWED = 0, 1


@dataclass(frozen=True)
class QueueSpec:
    priority: int
    weight: int
    guarantee: int  # B/s, 0 = none
    ceil: int  # B/s, 0 or >= the line rate = uncapped
    burst: int = 0  # the guarantee bucket's depth, 0 = 1 ms at the guarantee (at least 9216 B)
    reserved: int = 0  # bytes of the buffer only this queue may fill
    alpha: Fraction = Fraction(1)  # it may hold alpha x the free shared buffer beyond its reserve


def port_queues(qos: CompiledQos) -> list[QueueSpec]:
    """One queue per class, tenant by tenant. The class's share of the tenant's unclaimed
    guarantee is rounded down and what rounding leaves over goes to the tenant's first class.
    Its burst is the class's if set, else the tenant's scaled by guarantee / tenant guarantee;
    its reserve the port's reserve scaled by guarantee / line rate."""
    alpha = Fraction(2) ** qos.port_alpha_log2
    queues = []
    for tenant in range(len(qos.tenant_names)):
        rows = range(int(qos.class_offsets[tenant]), int(qos.class_offsets[tenant + 1]))
        weights = [int(qos.class_weight[r]) for r in rows]
        unclaimed = int(qos.tenant_rate[tenant]) - sum(int(qos.class_rate[r]) for r in rows)
        shares = [unclaimed * w // sum(weights) for w in weights]
        shares[0] += unclaimed - sum(shares)
        for row, share, weight in zip(rows, shares, weights):
            ceil = int(qos.class_ceil[row])
            guarantee = int(qos.class_rate[row]) + share
            guarantee = min(guarantee, ceil) if ceil else guarantee
            if qos.class_burst_given[row]:
                burst = int(qos.class_burst[row])
            elif qos.tenant_burst_given[tenant] and guarantee:
                burst = max(1, math.floor(Fraction(int(qos.tenant_burst[tenant]) * guarantee, int(qos.tenant_rate[tenant]))))
            else:
                burst = 0
            reserved = math.floor(Fraction(qos.port_reserve * guarantee, qos.port_rate))
            queues.append(QueueSpec(int(qos.class_priority[row]), int(qos.tenant_weight[tenant]) * weight, guarantee, ceil, burst, reserved, alpha))
    return queues


def default_depth(rate: int) -> int:
    """A bucket's depth when no burst is given: 1 ms at its rate, at least one jumbo frame."""
    return max(rate // 1000, SMALLEST_BUCKET)


class Bucket:
    """A guarantee's or a ceiling's token bucket, in bytes: `rate` B/s, `depth` deep, full at
    time 0. Time is in ticks of 1/line_rate ns."""

    def __init__(self, rate: int, depth: int, line_rate: int) -> None:
        self.rate = Fraction(rate, NANO * line_rate)  # bytes per tick
        self.depth = depth
        self.tokens = Fraction(self.depth)
        self.at = 0

    def level(self, tick: int) -> Fraction:
        return min(Fraction(self.depth), self.tokens + self.rate * (tick - self.at))

    def holds(self, tick: int, size: int) -> bool:
        # A frame larger than the bucket passes when the bucket is full.
        return self.level(tick) >= min(size, self.depth)

    def first_tick_holding(self, size: int) -> int:
        missing = min(size, self.depth) - self.tokens
        return self.at + max(0, math.ceil(missing / self.rate))

    def take(self, tick: int, size: int) -> None:
        self.tokens = self.level(tick) - size
        self.at = tick


@dataclass
class Queue:
    spec: QueueSpec
    guarantee: Bucket | None
    ceil: Bucket | None
    waiting: deque[tuple[int, int, int]] = field(default_factory=deque)  # (packet, arrival tick, bytes)
    deficit: list[int] = field(default_factory=lambda: [0, 0])  # by phase
    in_turn: list[bool] = field(default_factory=lambda: [False, False])

    def may_send(self, phase: int, tick: int) -> bool:
        """Its head packet is below the ceiling (and, to send as guaranteed, within the guarantee)."""
        if not self.waiting:
            return False
        size = self.waiting[0][2]
        below_ceiling = self.ceil is None or self.ceil.holds(tick, size)
        if phase == BORROWED:
            return below_ceiling
        return below_ceiling and self.guarantee is not None and self.guarantee.holds(tick, size)

    def first_tick_sending(self, phase: int) -> int | None:
        size = self.waiting[0][2]
        below_ceiling = 0 if self.ceil is None else self.ceil.first_tick_holding(size)
        if phase == BORROWED:
            return below_ceiling
        return None if self.guarantee is None else max(below_ceiling, self.guarantee.first_tick_holding(size))


class Port:
    """The port in packet time: `arrive` in time order, `advance` to settle what starts before a
    time. `verdicts[packet]` is None (admitted), Outcome.DROP_PORT_QUEUE (over its dynamic
    threshold) or Outcome.DROP_PORT_BUFFER (no room); `starts[packet]` is
    the tick its transmission starts."""

    def __init__(self, line_rate: int, buffer: int, shared_fifo: bool, queues: list[QueueSpec]) -> None:
        self.line_rate, self.buffer, self.shared_fifo = line_rate, buffer, shared_fifo

        def buckets(q: QueueSpec) -> tuple[Bucket | None, Bucket | None]:
            """The guarantee's (its burst deep) and the ceiling's (never shallower)."""
            guarantee_depth = q.burst or default_depth(q.guarantee)
            ceil_depth = max(default_depth(q.ceil), guarantee_depth if q.guarantee else 0)
            guarantee = Bucket(q.guarantee, guarantee_depth, line_rate) if q.guarantee else None
            return guarantee, Bucket(q.ceil, ceil_depth, line_rate) if 0 < q.ceil < line_rate else None

        self.queues = [Queue(q, *buckets(q)) for q in queues]
        self.shared_pool = buffer - sum(q.reserved for q in queues)
        self.rings: list[dict[int, list[int]]] = [{}, {}]  # phase -> priority -> queue indices, head first
        self.fifo: deque[tuple[int, int, int, int]] = deque()  # (packet, arrival tick, bytes, queue)
        self.now = 0
        self.line_free = 0
        self.verdicts: dict[int, Outcome | None] = {}
        self.starts: dict[int, tuple[int, int]] = {}  # packet -> (queue, start tick)
        self.arrivals: dict[int, int] = {}

    def waiting_bytes(self) -> int:
        if self.shared_fifo:
            return sum(size for _, _, size, _ in self.fifo)
        return sum(size for q in self.queues for _, _, size in q.waiting)

    def arrive(self, ns: int, size: int, queue: int, packet: int) -> None:
        tick = ns * self.line_rate
        self.advance(tick)  # arrivals come before anything else decided at their instant
        self.now = tick
        self.arrivals[packet] = tick
        self.verdicts[packet] = self.fifo_verdict(size) if self.shared_fifo else self.queue_verdict(self.queues[queue], size)
        if self.verdicts[packet] is not None:
            return
        if self.shared_fifo:
            self.fifo.append((packet, tick, size, queue))
            return
        self.queues[queue].waiting.append((packet, tick, size))
        if len(self.queues[queue].waiting) == 1:
            self.update_rings(queue)

    def fifo_verdict(self, size: int) -> Outcome | None:
        return Outcome.DROP_PORT_BUFFER if self.waiting_bytes() + size > self.buffer else None

    def queue_verdict(self, queue: Queue, size: int) -> Outcome | None:
        """A queue's bytes beyond its reserve come from the shared pool (the buffer less every
        reserve); they may be at most alpha x the pool's free bytes before the arrival."""

        def beyond_reserve(q: Queue, extra: int = 0) -> int:
            return max(0, sum(s for _, _, s in q.waiting) + extra - q.spec.reserved)

        if sum(s for _, _, s in queue.waiting) + size <= queue.spec.reserved:
            return None
        in_pool = sum(beyond_reserve(q) for q in self.queues)
        if beyond_reserve(queue, size) > queue.spec.alpha * (self.shared_pool - in_pool):
            return Outcome.DROP_PORT_QUEUE
        if in_pool + beyond_reserve(queue, size) - beyond_reserve(queue) > self.shared_pool:
            return Outcome.DROP_PORT_BUFFER
        return None

    def advance(self, until: int | None) -> None:
        """Everything decided before tick `until` (everything, if None)."""
        while True:
            fill = self.next_bucket_fill()
            decision = self.next_decision()
            if fill is not None and (decision is None or fill <= decision):
                tick, is_fill = fill, True  # a bucket that fills as the line frees counts first
            elif decision is not None:
                tick, is_fill = decision, False
            else:
                return
            if until is not None and tick >= until:
                return
            self.now = tick
            if is_fill:
                for index in range(len(self.queues)):  # queues whose buckets fill together join by index
                    self.update_rings(index)
            else:
                self.send_one()

    def next_decision(self) -> int | None:
        someone_may_send = self.fifo if self.shared_fifo else any(self.rings[BORROWED].values())
        return max(self.line_free, self.now) if someone_may_send else None

    def next_bucket_fill(self) -> int | None:
        """The first tick after now at which a backlogged queue may send in a phase it is not in."""
        if self.shared_fifo:
            return None
        ticks = []
        for index, queue in enumerate(self.queues):
            for phase in (GUARANTEED, BORROWED):
                if queue.waiting and not self.in_ring(phase, index):
                    tick = queue.first_tick_sending(phase)
                    if tick is not None:
                        ticks.append(tick)
        return min(ticks, default=None)

    def in_ring(self, phase: int, index: int) -> bool:
        return index in self.rings[phase].get(self.queues[index].spec.priority, [])

    def update_rings(self, index: int) -> None:
        """A queue joins a ring at the tail when it may send in that phase and leaves when it may
        not (its turn ends, its deficit stays); an empty queue loses its deficits."""
        queue = self.queues[index]
        for phase in (GUARANTEED, BORROWED):
            ring = self.rings[phase].setdefault(queue.spec.priority, [])
            may_send = queue.may_send(phase, self.now)
            if may_send and index not in ring:
                ring.append(index)
                queue.in_turn[phase] = False
            elif not may_send and index in ring:
                ring.remove(index)
                queue.in_turn[phase] = False
        if not queue.waiting:
            queue.deficit = [0, 0]

    def send_one(self) -> None:
        if self.shared_fifo:
            packet, _, size, queue_index = self.fifo.popleft()
            self.start(packet, queue_index, size)
            return
        phase = GUARANTEED if any(self.rings[GUARANTEED].values()) else BORROWED
        ring = self.rings[phase][min(p for p, r in self.rings[phase].items() if r)]
        # Deficit round robin: the head queue's turn adds its quantum once; it sends while its
        # head packet fits in its deficit, else its turn ends and it goes to the tail.
        while True:
            queue = self.queues[ring[0]]
            if not queue.in_turn[phase]:
                queue.in_turn[phase] = True
                queue.deficit[phase] += queue.spec.weight * QUANTUM_BYTES
            size = queue.waiting[0][2]
            if size <= queue.deficit[phase]:
                break
            queue.in_turn[phase] = False
            ring.append(ring.pop(0))
        index = ring[0]
        queue.deficit[phase] -= size
        packet, _, _ = queue.waiting.popleft()
        if queue.ceil is not None:
            queue.ceil.take(self.now, size)
        if phase == GUARANTEED:
            assert queue.guarantee is not None
            queue.guarantee.take(self.now, size)
        self.start(packet, index, size)
        self.update_rings(index)

    def start(self, packet: int, queue: int, size: int) -> None:
        self.starts[packet] = (queue, self.now)
        self.line_free = self.now + size * NANO

    def start_ns(self, packet: int) -> int:
        return -(-self.starts[packet][1] // self.line_rate)

    def delay_ns(self, packet: int) -> int:
        return self.start_ns(packet) - self.arrivals[packet] // self.line_rate


def histogram_quantiles(delays: list[int]) -> dict[str, int | None]:
    """What a log-linear histogram reports (docs/qos.md, "Statistics"): count, the exact max, and
    each nearest-rank quantile as the middle of its bucket, kept within the exact min and max.
    Values below 64 have a bucket each; above, each power of two is cut into 64 buckets."""
    if not delays:
        return {"count": 0, "p50": None, "p99": None, "p999": None, "max": None}
    ordered = sorted(delays)

    def reported(numerator: int, denominator: int) -> int:
        rank = min(max(-(-len(ordered) * numerator // denominator), 1), len(ordered))
        value = ordered[rank - 1]
        if value < 64:
            return value
        width = 1 << (value.bit_length() - 1 - 6)
        middle = value - value % width + width // 2
        return min(max(middle, ordered[0]), ordered[-1])

    return {"count": len(ordered), "p50": reported(1, 2), "p99": reported(99, 100), "p999": reported(999, 1000), "max": ordered[-1]}


def process_with_port(
    qos: CompiledQos, records: np.ndarray, verdicts: np.ndarray, batch_ends: list[int], drain: bool = False, keep_delays: bool = False
) -> tuple[np.ndarray, dict[tuple[Any, Any], dict[str, Any]]]:
    """Rows (color, outcome, dscp, release_ns) and stats by (tenant name, class id) of
    `Engine.process` called on `records` cut at `batch_ends` (each batch's end index), then
    `Engine.drain` if `drain` (the stats then; the rows are what the batches returned);
    `keep_delays`: each entry also holds its queueing delays in ns (`delays`)."""
    assert qos.port_rate > 0
    meters_and_shapers = Reference(qos)
    rows = np.array([meters_and_shapers.packet(r, v) for r, v in zip(records, verdicts)], dtype=np.int64).reshape(-1, 4)
    # A packet's time is the latest timestamp seen so far; a batch's port work ends at its last.
    clock = np.maximum.accumulate(records["timestamp_ns"].astype(np.int64))
    batch_of = np.searchsorted(np.asarray(batch_ends), np.arange(len(records)), side="right")
    batch_clock = clock[np.asarray(batch_ends) - 1]
    sizes = [frame_bytes(qos.count, int(r["wire_len"]), int(r["inner_len"])) for r in records]
    tenants, classes = verdicts["tenant"].astype(int), verdicts["cls"].astype(int)

    def key(i: int) -> tuple[str | None, int | None]:
        """The stats row: the packet's class, else its tenant (classifier drops), else no tenant."""
        tenant = tenants[i]
        if tenant < 0:
            return None, None
        in_class = 0 <= classes[i] < qos.class_offsets[tenant + 1] - qos.class_offsets[tenant]
        return qos.tenant_names[tenant], int(classes[i]) if in_class else None

    # Packets in a class that passed meters and shapers reach the port at their release, in
    # release order, then in the order they came in.
    passed = {i for i in range(len(records)) if key(i)[1] is not None and rows[i, 1] in (Outcome.PASS, Outcome.REMARKED)}
    port = Port(qos.port_rate, qos.port_buffer, qos.port_mode == PORT_MODES["shared_fifo"], port_queues(qos))
    final = int(clock[-1])
    for release, i in sorted((int(rows[i, 3]), i) for i in passed):
        if release > final and not drain:
            break
        port.arrive(release, sizes[i], qos.class_row(tenants[i], classes[i]), i)
    port.advance(None if drain else final * qos.port_rate)

    stats: dict[tuple[Any, Any], dict[str, Any]] = {}
    for i in range(len(records)):
        entry = stats.setdefault(key(i), {"packets": 0, "bytes": 0, "outcomes": {}, "in_flight": 0, "delays": []})
        entry["packets"] += 1
        entry["bytes"] += sizes[i]
        fate = Outcome(int(rows[i, 1]))
        if i in passed:
            if i not in port.verdicts:  # released after the last packet's time: still on its way
                rows[i, 1] = Outcome.PENDING
                entry["in_flight"] += 1
                continue
            verdict = port.verdicts[i]
            if verdict is not None:
                fate = verdict
            # The row holds the port's verdict if it came before the end of the packet's batch.
            rows[i, 1] = Outcome.PENDING if rows[i, 3] > batch_clock[batch_of[i]] else fate
            if i in port.starts and (drain or port.starts[i][1] < final * qos.port_rate):
                entry["delays"].append(port.delay_ns(i))
        name = fate.name.lower()
        packets, size = entry["outcomes"].get(name, (0, 0))
        entry["outcomes"][name] = (packets + 1, size + sizes[i])
    for entry in stats.values():
        delays = entry["delays"] if keep_delays else entry.pop("delays")
        entry["delay_ns"] = histogram_quantiles(delays)
    return rows, stats
