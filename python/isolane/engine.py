"""The classification engine: packets to tenants and to each tenant's first matching rule.

``Engine(policy)`` compiles a :class:`~isolane.policy.Policy` into Rust tables; ``classify``
runs without the GIL; ``update`` swaps in a new policy atomically while other threads keep
classifying, sharing the tables of tenants that did not change and patching a one-rule change
instead of rebuilding. ``process`` also enforces the policy's QoS contracts (meters, shapers,
the egress port; ``docs/qos.md``) in packet time, and ``stats_array`` (``stats``: its rows as
dicts) reports what they did; ``Engine(policy, threads=2)`` processes each batch on two threads
(they share classification, one of them enforces), with the same results as on one.
"""

from __future__ import annotations

import contextlib
import dataclasses
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, NoReturn, TypedDict, cast

import numpy as np
import numpy.typing as npt

from isolane import _core
from isolane.codes import BurstScope, Color, Outcome, ProfileId, Reason
from isolane.parsing import PARSED_DTYPE, dtype_of, parse, tunnel_ports
from isolane.pause_gc import gc_paused
from isolane.policy import Policy, PolicyError, Rule, TenantTables, _Checker, _tenant_tables, format_duration, parse_duration, tenant_tables
from isolane.policy.claims import TenantChange
from isolane.policy.constants import ACTION_ALLOW, ACTION_DROP
from isolane.policy.diff import tenant_changes
from isolane.policy.qos import QosContext, TenantQos, qos_context, qos_settings, tenant_qos
from isolane.policy.sharing import sharing

VERDICT_DTYPE: np.dtype = dtype_of(_core.verdict_layout())
"""One row of :meth:`Engine.classify`: ``tenant`` (-1 unknown), ``rule`` (index of the policy
rule within the tenant, -1 default), ``cls`` (class id within the tenant, -1 none), ``action``
(:class:`Action`), ``reason`` (:class:`Reason`)."""


PROCESSED_DTYPE: np.dtype = dtype_of(_core.processed_layout())
"""One row of :meth:`Engine.process`: the fields of :data:`VERDICT_DTYPE` (what classify
returns), then ``color`` (:class:`Color`), ``outcome`` (:class:`Outcome`), ``dscp`` (the DSCP the
packet leaves with) and ``release_ns`` (when the shapers release it: its timestamp if unshaped,
-1 if dropped before)."""


BURST_DTYPE: np.dtype = dtype_of(_core.burst_layout())
"""One row of :meth:`Engine.bursts`; its fields are documented in ``docs/bursts.md``."""

BURST_FLOW_DTYPE: np.dtype = dtype_of(_core.burst_flow_layout())
"""One row of :meth:`Engine.burst_flows`: ``event`` (the burst's id), ``rank``, the 5-tuple
(``src``, ``dst`` as 16 bytes, ``src_port``, ``dst_port``, ``proto``), ``packets``, ``bytes`` and
``error_bytes`` (the most ``bytes`` may be over: 0 while a burst has at most 32 flows)."""

PROFILE_EVENT_DTYPE: np.dtype = dtype_of(_core.profile_event_layout())
"""One row of :meth:`Engine.profile_events`, a switch of adaptive profile (``docs/qos.md``,
"Adaptive profiles"): ``time_ns`` (packet time: the packet after which the tenant switched, or
the instant a hold ended or a turn to return came), ``tenant`` (an index into
:attr:`Engine.profile_tenants`), ``cls`` (the class that switched, -1: the tenant), ``from`` and
``to`` (:class:`ProfileId`), ``cause`` (:class:`SwitchCause`)."""

STATS_DTYPE: np.dtype = dtype_of(_core.stats_layout())
"""One row of :meth:`Engine.stats_array`, a tenant and class seen (``docs/qos.md``,
"Statistics"): ``tenant`` (an index into :attr:`Engine.stats_tenants`, -1: packets of no tenant),
``cls`` (class id, -1: packets in no class), ``packets`` and ``bytes`` in, ``color_packets`` and
``color_bytes`` (3 each, by :class:`Color`), ``outcome_packets`` and ``outcome_bytes`` (by
:class:`Outcome`; ``pending`` always 0), ``in_flight``, ``delay_count`` and ``delay_p50_ns``,
``delay_p99_ns``, ``delay_p999_ns``, ``delay_max_ns`` (all 0 where ``delay_count`` is 0)."""

DELAY_EDGES_NS: tuple[int, ...] = (0, *(2**k - 1 for k in range(7, 31)))
"""The default edges of :meth:`Engine.delay_histograms`: 0 (no wait), then 2^k - 1 ns from 127 ns
to about 1.07 s. Each is the top of a histogram bucket, so the counts at them are exact (delays
are whole ns: at or below 2^k - 1 is below 2^k)."""

DEFAULT_POLLS = ("1s", "100ms", "10ms", "1ms")
"""The polling intervals of the polled views, as a switch's counters are read."""


def _poll_intervals(poll: Iterable[int | str]) -> tuple[int, ...]:
    """Polling intervals in ns, checked: each at least 1 ns and a multiple of the shortest."""
    if isinstance(poll, (str, int)):
        poll = (poll,)
    intervals = tuple(parse_duration(p) if isinstance(p, str) else p for p in poll)
    for ns in intervals:
        if isinstance(ns, bool) or not isinstance(ns, int) or ns < 1:
            raise _core.EngineError(f"a polling interval must be a duration such as '1ms' or a positive number of ns, got {ns!r}")
    if intervals and any(ns % min(intervals) for ns in intervals):
        raise _core.EngineError(f"polling intervals {', '.join(format_duration(ns) for ns in intervals)}: each must be a multiple of the shortest")
    if len(set(intervals)) != len(intervals):
        raise _core.EngineError("a polling interval is given twice")
    return intervals


@dataclasses.dataclass(frozen=True)
class UpdateReport:
    """How ``Engine.update`` applied a policy, tenant by tenant."""

    kept: int
    """Tenants whose tables were shared unchanged."""
    incremental: int
    """Tenants patched by one rule insertion, removal or replacement."""
    rebuilt: int
    """Tenants whose tables were built anew (new tenants, larger changes)."""


@dataclasses.dataclass(frozen=True)
class DelayHistograms:
    """:meth:`Engine.delay_histograms`: the statistics rows with their queueing delays at the port
    cut at fixed edges, from one reading."""

    rows: npt.NDArray[np.void]
    """The statistics rows (:data:`STATS_DTYPE`), as :meth:`Engine.stats_array` gives them."""
    tenants: list[str]
    """Tenant names by the rows' ``tenant`` (:attr:`Engine.stats_tenants`)."""
    edges_ns: npt.NDArray[np.uint64]
    """The edges asked for, ns."""
    at_or_below: npt.NDArray[np.uint64]
    """Rows x edges: the delays at or below each edge (cumulative, as Prometheus's ``le``)."""
    sum_ns: list[int]
    """Per row, the exact sum of its delays in ns (Python ints: it may pass 2^64)."""


class PacketsBytes(TypedDict):
    """Packets and bytes (bytes as the policy's ``count`` says in :meth:`Engine.stats`, frame
    bytes on the wire in :meth:`Engine.counters`)."""

    packets: int
    bytes: int


class ColorCounts(TypedDict):
    """:meth:`Engine.stats`'s ``colors``: the meters' colours of the packets the classifier let through."""

    green: PacketsBytes
    yellow: PacketsBytes
    red: PacketsBytes


OutcomeCounts = TypedDict(
    "OutcomeCounts",
    {
        "pass": PacketsBytes,
        "remarked": PacketsBytes,
        "drop_classifier": PacketsBytes,
        "drop_meter": PacketsBytes,
        "drop_shaper_bytes": PacketsBytes,
        "drop_shaper_time": PacketsBytes,
        "drop_port_buffer": PacketsBytes,
        "drop_port_queue": PacketsBytes,
    },
)
""":meth:`Engine.stats`'s ``outcomes``: each :class:`Outcome` but ``pending``, by its name."""

ActionCounts = TypedDict("ActionCounts", {"pass": int, "remark": int, "drop": int})
""":meth:`Engine.stats`'s ``actions``: packets passed, re-marked and dropped at any stage."""


class DelayStats(TypedDict):
    """Queueing delay at the port (ns): ``count`` delays recorded; the others None where it is 0."""

    count: int
    p50: int | None
    p99: int | None
    p999: int | None
    max: int | None


MicroburstStats = TypedDict("MicroburstStats", {"tenant": dict[str, Any] | None, "class": dict[str, Any] | None})
"""The :meth:`Engine.burst_stats` entries of a stats entry's tenant and class (None: not watched)."""

StatsEntry = TypedDict(
    "StatsEntry",
    {
        "tenant": str | None,
        "cls": int | None,
        "class": str | None,
        "packets": int,
        "bytes": int,
        "colors": ColorCounts,
        "outcomes": OutcomeCounts,
        "actions": ActionCounts,
        "in_flight": int,
        "delay_ns": DelayStats,
        "microburst": MicroburstStats,
    },
)
"""One entry of :meth:`Engine.stats`: a tenant and class, as ``docs/qos.md`` ("Statistics") describes."""


class ClassifierCounters(TypedDict):
    """One tenant's entry of :meth:`Engine.counters`, the classifier's view: ``packets`` and
    ``bytes`` (frame bytes on the wire) classified, by :meth:`Engine.classify` or
    :meth:`Engine.process`; of them, what the classifier allowed and dropped (drops by later
    stages are in :meth:`Engine.stats`); ``reasons``: packets by :class:`Reason` name (those
    counted)."""

    packets: int
    bytes: int
    classifier_allowed: PacketsBytes
    classifier_dropped: PacketsBytes
    reasons: dict[str, int]


def stats_key(row: np.void, tenants: Sequence[str]) -> tuple[str | None, int | None]:
    """A :data:`STATS_DTYPE` row's (tenant name, class id), None where -1; ``tenants``:
    :attr:`Engine.stats_tenants`, read after the row."""
    tenant, cls = int(row["tenant"]), int(row["cls"])
    return tenants[tenant] if tenant >= 0 else None, cls if cls >= 0 else None


def stats_delays(row: np.void) -> dict[str, int | None]:
    """A :data:`STATS_DTYPE` row's queueing delays as :meth:`Engine.stats` gives them
    (:class:`DelayStats`): ``count``, then ``p50``, ``p99``, ``p999`` and ``max`` in ns, None
    where no packet was sent."""
    return cast("dict[str, int | None]", _delay_stats(row))


def _delay_stats(row: np.void) -> DelayStats:
    count = int(row["delay_count"])
    p50, p99, p999, most = (int(row[f"delay_{q}_ns"]) if count else None for q in ("p50", "p99", "p999", "max"))
    return {"count": count, "p50": p50, "p99": p99, "p999": p999, "max": most}


def _as_records(rows: npt.NDArray[np.void]) -> npt.NDArray[np.void]:
    """Records in PARSED_DTYPE's exact layout; arrays with the same fields (as numpy makes
    when it concatenates or slices records) are converted field by field."""
    if rows.dtype == PARSED_DTYPE:
        return rows
    names = rows.dtype.names or ()
    missing = [name for name in PARSED_DTYPE.names or () if name not in names]
    if missing:
        raise TypeError(f"classify takes a PacketBatch or records of isolane.PARSED_DTYPE; these lack {', '.join(missing)}")
    out = np.empty(rows.shape, dtype=PARSED_DTYPE)
    for name in PARSED_DTYPE.names or ():
        out[name] = rows[name]
    return out


def _with_edits(policy: Policy, edits: list[tuple[int, str, int, Rule | None]]) -> Policy:
    """``policy`` with rule edits applied in order, each tenant's rules copied once."""
    rules = {position: list(policy.tenants[position].rules) for position, *_ in edits}
    for position, op, index, rule in edits:
        edited = rules[position]
        if rule is None:
            del edited[index]
        else:
            edited[index : index + (op == "replace")] = [rule]
    tenants = list(policy.tenants)
    for position, edited in rules.items():
        tenants[position] = dataclasses.replace(tenants[position], rules=tuple(edited))
    return dataclasses.replace(policy, tenants=tuple(tenants), warnings=())


Op = tuple[str, int, TenantTables | None, TenantQos | None]
"""A tenant operation as the core applies it: ("replace" | "insert", position, tables, QoS) or
("remove", position, None, None)."""


def _ops(changes: list[TenantChange], context: QosContext) -> list[Op]:
    ops: list[Op] = []
    # Many tenants share what they repeat for the pass; one tenant's change is compiled among the latest.
    with sharing() if len(changes) > 1 else contextlib.nullcontext():
        for op, at, _, new in changes:
            if new is None:
                ops.append((op, at, None, None))
            else:
                ops.append((op, at, tenant_tables(new, keep=False), tenant_qos(new, context, keep=False)))
    return ops


class Engine:
    """Classifies packets against a policy and enforces its QoS contracts; see the module
    documentation.

    ``threads``: how many threads :meth:`process` runs each batch on (``docs/qos.md``, "Several
    threads"). The threads classify pieces of the batch ahead of one enforcer, which meters and
    shapes every packet in arrival order, so the rows and :meth:`stats` are exactly those of one
    thread, a port included.

    Microbursts (``docs/bursts.md``): the policy's ``microburst`` settings say which scopes are
    watched; ``poll`` the polling intervals of the polled views (durations such as ``"1s"`` or
    nanoseconds, each a multiple of the shortest); ``on_burst`` is called after each
    :meth:`process` and :meth:`drain` with the bursts that ended during it (an array of
    :data:`BURST_DTYPE`), with the GIL held and outside the data path.

    ``policy``: a :class:`~isolane.policy.Policy`, or a mapping read as
    :meth:`Policy.from_dict <isolane.policy.Policy.from_dict>` reads it. An engine cannot be
    copied or pickled (it is a running data path); make another from its :attr:`policy`."""

    def __init__(
        self,
        policy: Policy | Mapping[str, Any],
        *,
        threads: int = 1,
        poll: Iterable[int | str] = DEFAULT_POLLS,
        on_burst: Callable[[npt.NDArray[np.void]], object] | None = None,
    ) -> None:
        if isinstance(threads, bool) or not isinstance(threads, int):
            raise TypeError(f"threads must be an int, got {threads!r}")
        if threads < 1:
            raise _core.EngineError(f"threads must be at least 1, got {threads}")
        if isinstance(policy, Mapping):
            policy = Policy.from_dict(policy)
        elif not isinstance(policy, Policy):
            raise TypeError(f"Engine takes an isolane.Policy or a mapping as Policy.from_dict takes, got {type(policy).__name__}")
        self._poll_ns = _poll_intervals(poll)
        self._on_burst = on_burst
        self._core = _core.Engine(threads)
        empty = Policy()
        self._policy = empty
        # Rule edits (tenant position, op, index, rule) made since `_policy`, applied to it when
        # `policy` is read, so that an edit costs its one rule, not a copy of the tenant's rules;
        # and the rule count of each tenant they edit. The lock keeps both whole.
        self._edits: list[tuple[int, str, int, Rule | None]] = []
        self._rule_counts: dict[int, int] = {}
        self._editing = threading.Lock()
        with gc_paused():
            self._install(policy, [("insert", i, None, t) for i, t in enumerate(policy.tenants)])

    def __copy__(self) -> NoReturn:
        raise TypeError(_NOT_COPIED)

    def __deepcopy__(self, memo: dict[int, Any]) -> NoReturn:
        raise TypeError(_NOT_COPIED)

    def __reduce_ex__(self, protocol: Any) -> NoReturn:
        raise TypeError(_NOT_COPIED)

    @property
    def policy(self) -> Policy:
        """The policy in force: the last one installed, with the rule edits made since."""
        with self._editing:
            self._apply_edits()
            return self._policy

    def _apply_edits(self) -> None:
        """Brings ``_policy`` up to the rule edits made since it (with the lock held)."""
        if self._edits:
            self._policy = _with_edits(self._policy, self._edits)
            self._edits, self._rule_counts = [], {}

    @property
    def threads(self) -> int:
        """How many threads :meth:`process` runs each batch on."""
        return self._core.threads

    @property
    def tenant_names(self) -> list[str]:
        return self._core.tenant_names

    def classify(self, packets: _core.PacketBatch | npt.NDArray[np.void], **parse_options: Any) -> npt.NDArray[np.void]:
        """Verdicts (:data:`VERDICT_DTYPE`) for a :class:`~isolane.PacketBatch` (parsed first,
        with ``parse_options`` such as ``vxlan_ports``) or for records :func:`~isolane.parse`
        returned. One consistent policy applies to the whole call, even during an update."""
        raw = self._core.classify_records(self._records(packets, parse_options))
        return raw.view(VERDICT_DTYPE)

    def process(
        self,
        packets: _core.PacketBatch | npt.NDArray[np.void],
        *,
        vxlan_ports: Iterable[int] = (_core.VXLAN_PORT,),
        geneve_ports: Iterable[int] = (_core.GENEVE_PORT,),
    ) -> npt.NDArray[np.void]:
        """Classify and enforce QoS (``docs/qos.md``, "Enforcement"): rows of
        :data:`PROCESSED_DTYPE`, whose verdict fields equal what :meth:`classify` returns. Takes
        records :func:`~isolane.parse` returned, or a :class:`~isolane.PacketBatch`, which is
        parsed (with ``vxlan_ports`` and ``geneve_ports`` as :func:`~isolane.parse` takes them)
        a few thousand packets at a time as it is processed, so its records never fill memory.
        Time is each packet's ``timestamp_ns`` (a capture's time, never the wall clock).
        Meters, shapers and the port keep their state from batch to batch, so call it with a
        capture's batches in order; one policy applies to the whole call. Runs on the engine's
        ``threads`` (a batch of a few thousand packets or less on the calling thread alone)."""
        if isinstance(packets, _core.PacketBatch):
            raw = self._core.process_batch(packets, *tunnel_ports(vxlan_ports, geneve_ports))
        else:
            raw = self._core.process_records(self._records(packets, {}))
        self._hand_bursts()
        return raw.view(PROCESSED_DTYPE)

    def stats_array(self) -> npt.NDArray[np.void]:
        """QoS statistics since the engine was made, one row per tenant and class seen
        (:data:`STATS_DTYPE`; ``docs/qos.md``, "Statistics"), by tenant name then class id (no
        tenant and no class first), so that they run on across updates. ``tenant`` indexes
        :attr:`stats_tenants`. In every row, ``packets`` = ``outcome_packets.sum()`` +
        ``in_flight``."""
        return self._core.qos_stats().view(STATS_DTYPE)

    def delay_histograms(self, edges_ns: Iterable[int] | npt.NDArray[np.integer[Any]] = DELAY_EDGES_NS) -> DelayHistograms:
        """The statistics rows (as :meth:`stats_array`) with, per row, how many queueing delays at
        the port were at or below each of ``edges_ns`` (increasing, ns) and their exact sum, from
        one reading taken between batches (``docs/linux.md``, "Prometheus metrics"). A count is
        exact where its edge is the top of a bucket of the delay histogram (every edge below 128,
        every ``2^k - 1``; :data:`DELAY_EDGES_NS`); at another edge the delays of the bucket
        holding it, all within 1/64 below the edge, are left out."""
        given = edges_ns.tolist() if isinstance(edges_ns, np.ndarray) else list(edges_ns)
        whole = all(isinstance(edge, int) and not isinstance(edge, bool) and 0 <= edge < 2**64 for edge in given)
        if not whole or any(a >= b for a, b in zip(given, given[1:])):
            raise _core.EngineError(f"delay histogram edges must be increasing whole ns from 0 to 2^64 - 1, got {given!r}")
        edges = np.array(given, dtype=np.uint64)
        rows, at_or_below, sum_ns, tenants = self._core.delay_histograms(edges)
        return DelayHistograms(rows.view(STATS_DTYPE), tenants, edges, at_or_below, sum_ns)

    @property
    def stats_tenants(self) -> list[str]:
        """Tenant names by the ``tenant`` field of :meth:`stats_array` (a name keeps its index
        once given, so names read after an array cover it)."""
        return self._core.stats_tenants()

    def stats(self) -> list[StatsEntry]:
        """:meth:`stats_array` as one dict per row (see ``docs/qos.md``, "Statistics"):
        ``tenant`` (its name; None: packets of no tenant), ``cls`` (None: packets in no class,
        i.e. classifier drops), ``class`` (its name in the current policy, if any), ``packets``
        and ``bytes`` in, ``colors`` and ``outcomes`` (each name to ``packets`` and ``bytes``;
        :class:`Outcome` names but ``pending``), ``actions`` (packets passed, re-marked,
        dropped), ``in_flight`` (released to the port after the latest packet time seen),
        ``delay_ns`` (queueing delay at the port: ``count``, ``p50``, ``p99``, ``p999``,
        ``max``; None where no packet was sent), ``microburst`` (the burst statistics of the
        entry's ``tenant`` and of its ``class``, as :meth:`burst_stats` gives them, each None
        where that scope is not watched). Packets in = sum of outcomes + in_flight. Only the
        packets :meth:`process` took are here (:meth:`counters` has every packet classified)."""
        rows = self.stats_array()
        tenants = self.stats_tenants  # read after the rows, so that it names every one of them
        class_names = {t.name: t.class_names for t in self.policy.tenants}
        scopes = {(s["scope"], s["tenant"], s["cls"]): s for s in self.burst_stats()}
        entries = [_stats_entry(row, tenants, class_names) for row in rows]
        for entry in entries:
            tenant, cls = entry["tenant"], entry["cls"]
            entry["microburst"] = {"tenant": scopes.get(("tenant", tenant, None)), "class": scopes.get(("class", tenant, cls))}
        return entries

    def drain(self) -> None:
        """End the packet stream at the port, as at the end of a capture (``docs/qos.md``,
        "Pending packets"): every packet in flight reaches the port in release order and
        everything queued is sent, so that :meth:`stats` counts their outcomes and queueing
        delays and ``in_flight`` is 0. The port stays, empty; a later packet reaches it no
        earlier than the last of these. Every burst still open ends (``docs/bursts.md``)."""
        self._core.drain()
        self._hand_bursts()

    def _hand_bursts(self) -> None:
        if self._on_burst is not None:
            ended = self._core.take_ended_bursts().view(BURST_DTYPE)
            if len(ended):
                self._on_burst(ended)

    def keep_timeline(self, window_ns: int) -> None:
        """Keeps time series per tenant and class from the next packet on (``docs/report.md``,
        "Timeline"): bytes, packets and drops per bin, the most bytes in one window of
        ``window_ns`` inside each bin, queueing delays at the port and shaper holds; bins
        merge as time runs on, so memory stays bounded. It costs a pass over each batch."""
        self._core.keep_timeline(window_ns)

    def timeline(self) -> _core.TimelineView | None:
        """The series kept since :meth:`keep_timeline` (None if never asked for)."""
        return self._core.timeline()

    def bursts(self) -> npt.NDArray[np.void]:
        """Every burst that ended so far, in the order they ended (:data:`BURST_DTYPE`;
        ``docs/bursts.md``); :meth:`drain` ends those still open."""
        return self._core.bursts().view(BURST_DTYPE)

    def burst_flows(self, ids: Iterable[int] | npt.NDArray[np.integer[Any]]) -> npt.NDArray[np.void]:
        """The top flows (at most 8 each) of the bursts ``ids`` (:data:`BURST_FLOW_DTYPE`), burst
        by burst in the order asked, each burst's by rank."""
        wanted = ids if isinstance(ids, np.ndarray) else np.fromiter(ids, dtype=np.uint64)
        return self._core.burst_flows(np.ascontiguousarray(wanted, dtype=np.uint64)).view(BURST_FLOW_DTYPE)

    @property
    def burst_tenants(self) -> list[str]:
        """Tenant names by the ``tenant`` field of :meth:`bursts` (a name stays once seen)."""
        return self._core.burst_tenants()

    def profile_events(self) -> npt.NDArray[np.void]:
        """Every switch of adaptive profile so far, in order (:data:`PROFILE_EVENT_DTYPE`;
        ``docs/qos.md``, "Adaptive profiles"); :meth:`drain` ends holds and overloads."""
        return self._core.profile_events().view(PROFILE_EVENT_DTYPE)

    @property
    def profile_tenants(self) -> list[str]:
        """Tenant names by the ``tenant`` field of :meth:`profile_events` (a name stays once seen)."""
        return self._core.profile_tenants()

    def profile_stats(self) -> list[dict[str, Any]]:
        """Per tenant and class that has or had adaptive profiles, by name and class:
        ``tenant``, ``cls`` (the class id for a class's profile, None for the tenant's),
        ``packets`` (the packets enforced under each profile: ``normal``, ``burst``,
        ``overload``) and ``switches``, since the engine was made."""
        names = [p.name.lower() for p in ProfileId]
        counts = self._core.profile_counts()
        return [{"tenant": name, "cls": cls, "packets": dict(zip(names, packets)), "switches": switches} for name, cls, packets, switches in counts]

    def burst_stats(self) -> list[dict[str, Any]]:
        """Per scope watched, now or before (``docs/bursts.md``, "Polled counters"): ``scope``
        (``port``, ``tenant``, ``class``), ``tenant``, ``cls``, ``class``, its setting
        (``window_ns``, ``threshold_bps``, ``queue``: rise and fall bytes or None), the truth
        (``rate_events``, ``queue_events``, ``time_in_burst_ns``, ``peak_window_bps``,
        ``max_queue_bytes``) and ``polls``: per polling interval in ns, what a poller saw
        (``polls``, ``peak_bps``, ``mean_bps``, ``peak_utilisation`` and ``mean_utilisation`` of
        the port's line rate (None without a port), ``queue_polls``, ``queue_nonzero_polls``,
        ``queue_max_at_polls``)."""
        policy = self.policy
        class_names = {t.name: t.class_names for t in policy.tenants}
        line_bps = policy.port.rate_bps if policy.port is not None else None
        out = []
        for raw in self._core.burst_stats():
            cls, names = raw["cls"], class_names.get(raw["tenant"], [])
            scope = BurstScope(raw["scope"]).name.lower()
            polls = {view.pop("interval_ns"): view for view in raw.pop("polls")}
            for view in polls.values():
                view["peak_utilisation"] = view["peak_bps"] / line_bps if line_bps else None
                view["mean_utilisation"] = view["mean_bps"] / line_bps if line_bps else None
            out.append({**raw, "scope": scope, "class": names[cls] if cls is not None and cls < len(names) else None, "polls": polls})
        return out

    @staticmethod
    def _records(packets: _core.PacketBatch | npt.NDArray[np.void], parse_options: dict[str, Any]) -> npt.NDArray[np.uint8]:
        rows = parse(packets, **parse_options) if isinstance(packets, _core.PacketBatch) else _as_records(packets)
        return np.ascontiguousarray(rows).view(np.uint8)

    def update(self, policy: Policy) -> UpdateReport:
        """Swap in ``policy`` atomically: classifying threads finish their batch on the old
        tables and start the next on the new; counters run on by tenant name. A tenant whose
        QoS contract did not change keeps its meters, shapers and port queue; a changed or
        new one starts with full buckets."""
        with self._editing, gc_paused():
            self._apply_edits()
            return self._install(policy, tenant_changes(self._policy, policy))

    def _install(self, policy: Policy, changes: list[TenantChange]) -> UpdateReport:
        """Hands the core the tenants that changed (every tenant, if what their compiled QoS
        depends on changed), the port's weight scale and the QoS settings if they changed."""
        old = self._policy
        context = qos_context(policy)
        settings = None
        if (policy.count, policy.largest_frame, policy.color_map, policy.port) != (old.count, old.largest_frame, old.color_map, old.port) or not old.tenants:
            settings = qos_settings(policy, self._poll_ns)
            if qos_context(old) != context:
                changes = tenant_changes(old, policy, everything=True)
        unknown = ACTION_ALLOW if policy.unknown_tenant == "allow" else ACTION_DROP
        policy._carry_weight_basis(old, changes)
        report = UpdateReport(*self._core.apply(_ops(changes, context), policy._weight_basis.weight_scale, settings, unknown))
        self._policy, self._edits, self._rule_counts = policy, [], {}
        return report

    def insert_rule(self, tenant: str, index: int, rule: Mapping[str, Any]) -> None:
        """Insert ``rule`` (as written in a policy file) before rule ``index`` of ``tenant``:
        only that rule is validated and compiled and only that tenant's tables patched, so
        the change reaches the data path in well under a millisecond even in a large policy.
        Whole-policy checks (rules never matched) are left to ``update``."""
        self._edit(tenant, "insert", index, rule)

    def replace_rule(self, tenant: str, index: int, rule: Mapping[str, Any]) -> None:
        """Replace rule ``index`` of ``tenant``; see :meth:`insert_rule`."""
        self._edit(tenant, "replace", index, rule)

    def remove_rule(self, tenant: str, index: int) -> None:
        """Remove rule ``index`` of ``tenant``; later rules move up by one."""
        self._edit(tenant, "remove", index, None)

    def _edit(self, tenant_name: str, op: str, index: int, data: Mapping[str, Any] | None) -> None:
        with self._editing:
            position = self._policy._position(tenant_name)
            if position is None:
                raise _core.NoTenantError(f"no tenant {tenant_name!r}")
            tenant = self._policy.tenants[position]  # its classes as now: edits change rules only
            count = self._rule_counts.get(position, len(tenant.rules))
            if not 0 <= index < count + (op == "insert"):
                raise _core.RuleIndexError(f"tenants[{position}].rules[{index}]: {tenant_name!r} has {count} rules")
            rule, rows = None, None
            if data is not None:
                checker = _Checker()
                rule = checker.rule(data, f"tenants[{position}].rules[{index}]", tenant.class_names, tenant.default_class)
                if rule is None or checker.errors:
                    raise PolicyError(checker.errors)
                rows = _tenant_tables(dataclasses.replace(tenant, rules=(rule,)))
            self._core.edit_tenant(tenant_name, op, index, rows)
            self._edits.append((position, op, index, rule))
            self._rule_counts[position] = count + {"insert": 1, "remove": -1}.get(op, 0)

    def counters(self) -> dict[str | None, ClassifierCounters]:
        """The classifier's view (``docs/qos.md``, "Statistics"), per tenant name (``None``:
        packets no tenant claims) since the engine was made: every packet :meth:`classify` or
        :meth:`process` classified (:class:`ClassifierCounters`). A tenant's ``packets`` here
        equal its :meth:`stats` packets when only :meth:`process` fed the engine, and its
        ``classifier_dropped`` packets their ``drop_classifier`` outcome; drops by meters,
        shapers or the port are in :meth:`stats` only."""
        out: dict[str | None, ClassifierCounters] = {}
        for name, counts in self._core.counters().items():
            (dropped, allowed), (dropped_bytes, allowed_bytes) = counts["packets"], counts["bytes"]
            out[name] = {
                "packets": dropped + allowed,
                "bytes": dropped_bytes + allowed_bytes,
                "classifier_allowed": {"packets": allowed, "bytes": allowed_bytes},
                "classifier_dropped": {"packets": dropped, "bytes": dropped_bytes},
                "reasons": {Reason(i).name.lower(): n for i, n in enumerate(counts["reasons"]) if n},
            }
        return out


_NOT_COPIED = "an isolane.Engine cannot be copied or pickled: it is a running data path (tables, meters, queues, counters); make a new Engine(engine.policy)"


# The codes a statistics row's colour and outcome columns are indexed by, with their names in
# Engine.stats (plain ints and strings: read for every row).
_COLORS = [(int(c), c.name.lower()) for c in Color if c != Color.NONE]
_OUTCOMES = [(int(o), o.name.lower()) for o in Outcome if o != Outcome.PENDING]
_DROPPED = [int(o) for o in Outcome if o.dropped]


def _stats_entry(row: np.void, tenants: Sequence[str], class_names: dict[str, list[str]]) -> StatsEntry:
    """A :data:`STATS_DTYPE` row as :meth:`Engine.stats` gives it (but ``microburst``)."""
    tenant, cls = stats_key(row, tenants)
    names = class_names.get(tenant, []) if tenant is not None else []
    color_packets, color_bytes = row["color_packets"].tolist(), row["color_bytes"].tolist()
    outcome_packets, outcome_bytes = row["outcome_packets"].tolist(), row["outcome_bytes"].tolist()
    return {
        "tenant": tenant,
        "cls": cls,
        "class": names[cls] if cls is not None and cls < len(names) else None,
        "packets": int(row["packets"]),
        "bytes": int(row["bytes"]),
        "colors": cast(ColorCounts, {name: {"packets": color_packets[c], "bytes": color_bytes[c]} for c, name in _COLORS}),
        "outcomes": cast(OutcomeCounts, {name: {"packets": outcome_packets[o], "bytes": outcome_bytes[o]} for o, name in _OUTCOMES}),
        "actions": {
            "pass": outcome_packets[Outcome.PASS],
            "remark": outcome_packets[Outcome.REMARKED],
            "drop": sum(outcome_packets[o] for o in _DROPPED),
        },
        "in_flight": int(row["in_flight"]),
        "delay_ns": _delay_stats(row),
        "microburst": {"tenant": None, "class": None},
    }
