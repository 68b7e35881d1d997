"""A plain reference of microburst detection (docs/bursts.md), for tests only, written from the
doc alone: the rate view (sliding window, starts, ends at t_e + W, drain), what each event holds
(packets, bytes, peak, outcomes, exactly counted top flows) and the polled rate view.

Not modelled: the queue view (use policies whose fates are all known at arrival: no port, or a
port with no shaper in front, so that no row is PENDING) and ``update``. Events come out in the
order the doc numbers them: the order their end is found, packet by packet; within one packet,
port scope, then tenant, then class; in ``drain()``, the port, then the tenants in policy order,
each before its classes (by class id), as docs/bursts.md ("Details", "Ids") says.
"""

from __future__ import annotations

import ipaddress
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Protocol

import numpy as np

from isolane.codes import Action, Outcome
from isolane.policy import COUNT_MODES, COUNT_OVERHEAD, parse_duration, parse_rate

PORT, TENANT, CLASS = 0, 1, 2  # isolane.BurstScope
RATE, QUEUE = 0, 1  # isolane.BurstView
DEFAULT_INTERVALS_NS = (1_000_000_000, 100_000_000, 10_000_000, 1_000_000)
MAX_FLOWS = 8  # flows Engine.burst_flows reports per event
NANO = 10**9

FlowKey = tuple[bytes, bytes, int, int, int]  # src, dst (16 bytes, IPv4 mapped), sport, dport, proto

# The BURST_DTYPE fields, in the doc's order.
EVENT_FIELDS = (
    "id", "scope", "view", "tenant", "cls", "start_ns", "end_ns", "packets", "bytes", "peak_bps",
    "max_queue_bytes", "dropped", "remarked", "drop_meter", "drop_shaper_bytes", "drop_shaper_time",
    "drop_port_buffer", "drop_port_queue", "flows",
)  # fmt: skip
_DROP_FIELD: dict[int, str] = {
    Outcome.DROP_METER: "drop_meter",
    Outcome.DROP_SHAPER_BYTES: "drop_shaper_bytes",
    Outcome.DROP_SHAPER_TIME: "drop_shaper_time",
    Outcome.DROP_PORT_BUFFER: "drop_port_buffer",
    Outcome.DROP_PORT_QUEUE: "drop_port_queue",
}


def address(text: str) -> bytes:
    """An address as the parser reports it: 16 bytes, IPv4 as ``::ffff:a.b.c.d``."""
    ip = ipaddress.ip_address(text)
    return (b"\0" * 10 + b"\xff\xff" + ip.packed) if ip.version == 4 else ip.packed


def flow_key(src: str, dst: str, sport: int, dport: int, proto: int) -> FlowKey:
    return (address(src), address(dst), sport, dport, proto)


def packet_bytes(count: str, wire_len: Any, inner_len: Any) -> Any:
    """The bytes a packet counts under the policy's ``count`` (scalars or arrays)."""
    return inner_len if count == "inner" else wire_len + COUNT_OVERHEAD[count]


class Flows(Protocol):
    def __getitem__(self, i: int) -> FlowKey: ...


class RecordFlows:
    """The 5-tuples of parsed records (``isolane.PARSED_DTYPE``), built only when asked for
    (only packets counted in an open event need theirs)."""

    def __init__(self, parsed: np.ndarray) -> None:
        self.src, self.dst = np.ascontiguousarray(parsed["src"]), np.ascontiguousarray(parsed["dst"])
        self.ports = parsed["src_port"].tolist(), parsed["dst_port"].tolist(), parsed["proto"].tolist()

    def __getitem__(self, i: int) -> FlowKey:
        return (self.src[i].tobytes(), self.dst[i].tobytes(), self.ports[0][i], self.ports[1][i], self.ports[2][i])


@dataclass(frozen=True)
class ScopeSpec:
    scope: int  # PORT, TENANT or CLASS
    tenant: int  # the verdict's tenant index; -1 for the port
    cls: int  # the class id for a class scope, else -1
    window_ns: int
    threshold_bps: int

    @property
    def limit(self) -> int:
        """L = floor(T x W / 8e9) bytes: the window is above the threshold when S > L."""
        return self.threshold_bps * self.window_ns // (8 * NANO)


@dataclass
class Event:
    """One rate event with the BURST_DTYPE fields (``row()``) and its exact flow counts."""

    scope: int
    tenant: int
    cls: int
    start_ns: int
    window_ns: int
    id: int = -1
    view: int = RATE
    end_ns: int = -1
    packets: int = 0
    bytes: int = 0
    peak_bytes: int = 0  # max S while open
    max_queue_bytes: int = 0
    dropped: int = 0
    remarked: int = 0
    drop_meter: int = 0
    drop_shaper_bytes: int = 0
    drop_shaper_time: int = 0
    drop_port_buffer: int = 0
    drop_port_queue: int = 0
    flow_counts: dict[FlowKey, list[int]] = field(default_factory=dict)  # key -> [packets, bytes]

    @property
    def peak_bps(self) -> int:
        return self.peak_bytes * 8 * NANO // self.window_ns

    @property
    def flows(self) -> int:
        return min(MAX_FLOWS, len(self.flow_counts))

    def top_flows(self, k: int = MAX_FLOWS) -> list[tuple[FlowKey, int, int]]:
        """(key, packets, bytes), ranked by bytes (more first), then by the 5-tuple (lower first)."""
        ranked = sorted(self.flow_counts.items(), key=lambda item: (-item[1][1], item[0]))
        return [(key, p, b) for key, (p, b) in ranked[:k]]

    def row(self) -> dict[str, int]:
        return {name: getattr(self, name) for name in EVENT_FIELDS}


class _Poll:
    """One polling interval's counters for one scope: intervals [kP, (k+1)P)."""

    def __init__(self, period: int) -> None:
        self.period, self.first, self.last = period, -1, -1
        self.current = self.most = self.total = 0

    def add(self, t: int, b: int) -> None:
        k = t // self.period
        if self.first < 0:
            self.first = self.last = k
        if k != self.last:  # time never goes back, so k only grows
            self.most, self.current, self.last = max(self.most, self.current), 0, k
        self.current += b
        self.total += b

    def stats(self) -> dict[str, int]:
        polls = self.last - self.first + 1 if self.first >= 0 else 0
        peak = max(self.most, self.current) * 8 * NANO // self.period
        mean = self.total * 8 * NANO // (polls * self.period) if polls else 0
        return {"polls": polls, "peak_bps": peak, "mean_bps": mean}


class _Scope:
    def __init__(self, spec: ScopeSpec, intervals: Sequence[int]) -> None:
        self.spec, self.limit, self.w = spec, spec.limit, spec.window_ns
        self.window: deque[tuple[int, int]] = deque()  # (time, bytes), arrival order
        self.s = 0
        self.open: Event | None = None
        self.peak_s = self.rate_events = self.time_in_burst = 0
        self.polls = [_Poll(p) for p in intervals]

    def _leave_until(self, t: int | None, ended: list[Event]) -> None:
        """Step 1 (t None: drain, everything leaves)."""
        while self.window and (t is None or self.window[0][0] + self.w <= t):
            te, be = self.window.popleft()
            self.s -= be
            if self.open is not None and self.s <= self.limit:
                self.open.end_ns = te + self.w
                self.rate_events += 1
                self.time_in_burst += self.open.end_ns - self.open.start_ns
                ended.append(self.open)
                self.open = None

    def add(self, t: int, b: int, outcome: int, flows: Flows, i: int, ended: list[Event]) -> None:
        self._leave_until(t, ended)
        self.window.append((t, b))  # step 2
        self.s += b
        self.peak_s = max(self.peak_s, self.s)
        for poll in self.polls:
            poll.add(t, b)
        if self.open is None and self.s > self.limit:  # step 3
            self.open = Event(self.spec.scope, self.spec.tenant, self.spec.cls, t, self.w)
        event = self.open
        if event is None:
            return
        event.packets += 1  # step 4
        event.bytes += b
        event.peak_bytes = max(event.peak_bytes, self.s)
        drop = _DROP_FIELD.get(outcome)  # no port queue modelled: the fate is known at arrival
        if drop is not None:
            event.dropped += 1
            setattr(event, drop, getattr(event, drop) + 1)
        event.remarked += outcome == Outcome.REMARKED
        counts = event.flow_counts.setdefault(flows[i], [0, 0])
        counts[0] += 1
        counts[1] += b

    def stats(self) -> dict[str, Any]:
        spec = self.spec
        return {
            "scope": spec.scope,
            "tenant": spec.tenant,
            "cls": spec.cls,
            "rate_events": self.rate_events,
            "queue_events": 0,
            "time_in_burst_ns": self.time_in_burst,
            "peak_window_bps": self.peak_s * 8 * NANO // self.w,
            "max_queue_bytes": 0,
            "polls": {poll.period: poll.stats() for poll in self.polls},
        }


class _OneFlow:
    def __getitem__(self, i: int) -> FlowKey:
        return (b"\0" * 16, b"\0" * 16, 0, 0, 0)


def _column(value: Any, n: int) -> list[int]:
    return np.broadcast_to(np.asarray(value), (n,)).tolist()


class BurstReference:
    """The rate view of every scope in ``scopes``; state is kept between ``process`` calls."""

    def __init__(self, scopes: Sequence[ScopeSpec], intervals_ns: Sequence[int] = DEFAULT_INTERVALS_NS) -> None:
        ordered = sorted(scopes, key=lambda s: (s.scope, s.tenant, s.cls))  # port, tenants, classes
        self.scopes = [_Scope(spec, intervals_ns) for spec in ordered]
        self.port = next((s for s in self.scopes if s.spec.scope == PORT), None)
        self.tenants = {s.spec.tenant: s for s in self.scopes if s.spec.scope == TENANT}
        self.classes = {(s.spec.tenant, s.spec.cls): s for s in self.scopes if s.spec.scope == CLASS}
        self.clock: int | None = None  # the latest timestamp seen: time as enforced
        self.events: list[Event] = []  # every ended event, by id

    def _number(self, ended: list[Event]) -> list[Event]:
        for event in ended:
            event.id = len(self.events)
            self.events.append(event)
        return ended

    def process(
        self,
        timestamps_ns: Any,
        nbytes: Any,
        *,
        tenant: Any = 0,
        cls: Any = 0,
        action: Any = Action.ALLOW,
        outcome: Any = Outcome.PASS,
        flows: Flows | None = None,
    ) -> list[Event]:
        """Take packets in order (per-packet arrays or scalars for all); returns the events
        that ended during the call. ``flows[i]`` is packet i's FlowKey (default: one flow)."""
        times = np.asarray(timestamps_ns).tolist()
        n = len(times)
        sizes, tenants, classes = _column(nbytes, n), _column(tenant, n), _column(cls, n)
        actions, outcomes = _column(action, n), _column(outcome, n)
        flows = _OneFlow() if flows is None else flows
        ended: list[Event] = []
        for i in range(n):
            t = times[i] if self.clock is None else max(self.clock, times[i])
            self.clock = t
            if actions[i] != Action.ALLOW:  # a packet the classifier drops is in no scope
                continue
            if outcomes[i] == Outcome.PENDING:
                raise ValueError(f"packet {i} is PENDING: its fate is not known at arrival (the queue view is not modelled)")
            scope_list = [self.port, self.tenants.get(tenants[i]), self.classes.get((tenants[i], classes[i]))]
            for scope in scope_list:
                if scope is not None:
                    scope.add(t, sizes[i], outcomes[i], flows, i, ended)
        return self._number(ended)

    def process_rows(self, parsed: np.ndarray, processed: np.ndarray, count: str = "outer") -> list[Event]:
        """``process`` on parsed records and the engine's processed rows for them."""
        if count not in COUNT_MODES:
            raise ValueError(f"unknown count {count!r}")
        nbytes = packet_bytes(count, parsed["wire_len"].astype(np.int64), parsed["inner_len"].astype(np.int64))
        return self.process(
            parsed["timestamp_ns"],
            nbytes,
            tenant=processed["tenant"],
            cls=processed["cls"],
            action=processed["action"],
            outcome=processed["outcome"],
            flows=RecordFlows(parsed),
        )

    def drain(self) -> list[Event]:
        """End of stream: every window empties, so open events end where their window falls to L;
        the port first, then each tenant (in policy order) before its classes (by class id)."""
        ended: list[Event] = []
        for scope in sorted(self.scopes, key=lambda s: (s.spec.scope != PORT, s.spec.tenant, s.spec.scope, s.spec.cls)):
            scope._leave_until(None, ended)
        return self._number(ended)

    def open_events(self) -> list[Event]:
        return [s.open for s in self.scopes if s.open is not None]

    def stats(self) -> list[dict[str, Any]]:
        """Per scope, as ``Engine.burst_stats()`` (rate view only; ``polls`` without the queue keys)."""
        return [scope.stats() for scope in self.scopes]


def to_array(events: Sequence[Event], dtype: np.dtype, tenant_index: Mapping[int, int] | None = None) -> np.ndarray:
    """Events as rows of ``dtype`` (``isolane.BURST_DTYPE``), to compare with ``Engine.bursts()``;
    ``tenant_index`` maps the policy's tenant index to the engine's ``burst_tenants`` index."""
    out = np.zeros(len(events), dtype=dtype)
    for i, event in enumerate(events):
        row = event.row()
        if tenant_index is not None and row["tenant"] >= 0:
            row["tenant"] = tenant_index[row["tenant"]]
        for name in dtype.names or ():
            out[name][i] = row[name]
    return out


def flow_rows(events: Sequence[Event]) -> list[dict[str, Any]]:
    """The top flows as ``Engine.burst_flows`` reports them (``isolane.BURST_FLOW_DTYPE`` fields),
    exact: ``error_bytes`` 0. Beyond 32 flows the engine's counts are Space-Saving estimates."""
    return [
        {"event": e.id, "rank": rank, "src": src, "dst": dst, "src_port": sport, "dst_port": dport, "proto": proto,
         "packets": packets, "bytes": nbytes, "error_bytes": 0}
        for e in events
        for rank, ((src, dst, sport, dport, proto), packets, nbytes) in enumerate(e.top_flows())
    ]  # fmt: skip


def _threshold(value: Any, rate: str | None, where: str) -> int:
    """A threshold in bit/s: a rate, or a percentage of ``rate`` (rounded down)."""
    if isinstance(value, str) and value.strip().endswith("%"):
        if rate is None:
            raise ValueError(f"{where}: a percentage threshold needs a rate")
        return int(Fraction(value.strip()[:-1]) * parse_rate(rate) // 100)
    return parse_rate(value)


def scopes_from_dict(policy: Mapping[str, Any]) -> list[ScopeSpec]:
    """The scopes a policy dict turns on (docs/bursts.md), port first, then each tenant (index =
    position) followed by its classes (id = position)."""

    def spec(scope: int, tenant: int, cls: int, mb: Mapping[str, Any], rate: str | None, where: str) -> ScopeSpec:
        return ScopeSpec(scope, tenant, cls, parse_duration(mb["window"]), _threshold(mb["threshold"], rate, where))

    out = []
    port = policy.get("port")
    if port is not None:  # a port is watched by default: 10us at its line rate (docs/qos.md)
        out.append(spec(PORT, -1, -1, port.get("microburst", {"window": "10us", "threshold": "100%"}), port["rate"], "port"))
    tenant_specs, class_specs = [], []
    for t, tenant in enumerate(policy.get("tenants", [])):
        if "microburst" in tenant:
            tenant_specs.append(spec(TENANT, t, -1, tenant["microburst"], tenant.get("rate"), f"tenants[{t}]"))
        for c, klass in enumerate(tenant.get("classes", [])):
            if "microburst" in klass:
                class_specs.append(spec(CLASS, t, c, klass["microburst"], klass.get("rate"), f"tenants[{t}].classes[{c}]"))
    return out + tenant_specs + class_specs
