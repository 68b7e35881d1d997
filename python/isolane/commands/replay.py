"""Captures replayed through a policy, tenant by tenant: what ``isolane replay`` does.

:func:`replay` streams the captures through an :class:`~isolane.Engine` batch by batch (bounded
memory) and builds a :class:`~isolane.Report` from :meth:`~isolane.Engine.stats_array` (per
tenant and class: colours, outcomes, queueing delays), :meth:`~isolane.Engine.counters` (every
packet's verdict reason), :meth:`~isolane.Engine.timeline` (rates over time) and, for the
classifier's drops, the reason of each dropped row. ``docs/report.md`` describes the report.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Callable, Iterable, Sequence

import numpy as np
import numpy.typing as npt

from isolane import _core
from isolane._core import SERIES_FIELDS
from isolane.capture import TunnelPortCheck, open_captures
from isolane.codes import Outcome, Reason
from isolane.commands.replay_bursts import burst_events, scope_summaries, with_window
from isolane.commands.replay_profiles import profile_counts, profile_switches
from isolane.engine import DEFAULT_POLLS, Engine, stats_delays, stats_key
from isolane.parsing import parse
from isolane.policy import Policy
from isolane.report.findings import findings
from isolane.report.isolation import AUTO_ALONE_MAX, ClassDelay, Isolation, TenantIsolation
from isolane.report.model import COLORS, DROP_OUTCOMES, DROP_STAGES, METERED_COLORS, NO_DELAYS, REASONS, ClassReport, Counts, Report, TenantReport
from isolane.report.timeline import holds_by_key, rates_by_key, timeline_arrays

DEFAULT_WINDOW_NS = 10_000
"""The timeline's burst window when neither ``--window`` nor the policy's port names one."""
StatsKey = tuple[str | None, int | None]
"""(tenant name, class id) of a statistics row, None for no tenant or no class."""
Paths = str | os.PathLike[str] | Sequence[str | os.PathLike[str]]


def replay(
    captures: Paths,
    policy: Policy,
    *,
    vxlan_ports: Iterable[int] = (_core.VXLAN_PORT,),
    geneve_ports: Iterable[int] = (_core.GENEVE_PORT,),
    batch_size: int = 65536,
    threads: int = 1,
    progress: Callable[[int, int], None] | None = None,
    drain: bool = True,
    window_ns: int | None = None,
    poll: Iterable[int | str] = DEFAULT_POLLS,
    alone: Iterable[str] | None = None,
) -> Report:
    """Process ``captures`` (a path or several) through a new ``Engine(policy, threads=threads)``
    batch by batch and report per tenant and class, with the bursts it saw (``docs/bursts.md``)
    and the timeline. ``progress(bytes_read, total)`` is called after every batch. At the end
    the port is drained (:meth:`Engine.drain`), so that every packet has its fate and every
    burst has ended; ``drain=False`` reports what was still in flight. ``window_ns`` watches
    every scope of the policy at that window instead of its own (and is the timeline's
    window); ``poll``: the polled views' intervals. ``alone``: the tenants also replayed alone
    through the same port, to measure how much the others inflate their queueing delays
    (``docs/report.md``, "Isolation"); by default every tenant when the policy has a port and at
    most 16 tenants."""
    paths = [os.fspath(captures)] if isinstance(captures, (str, os.PathLike)) else [os.fspath(p) for p in captures]
    reader = open_captures(paths, batch_size)
    replayer = Replayer(policy, vxlan_ports=vxlan_ports, geneve_ports=geneve_ports, threads=threads, window_ns=window_ns, poll=poll, alone=alone)
    for batch in reader:
        replayer.add(batch)
        if progress is not None:
            progress(reader.position, reader.size or 0)
    if drain:
        replayer.drain()
    return replayer.report(reader.paths, reader.format, reader.warnings())


class Replayer:
    """A policy's engine fed batch by batch from any source (captures, a live interface), with
    the tenants to replay alone beside it, and the report on what it was fed.
    :func:`replay` and ``isolane linux live`` are built on it; its options are :func:`replay`'s."""

    def __init__(
        self,
        policy: Policy,
        *,
        vxlan_ports: Iterable[int] = (_core.VXLAN_PORT,),
        geneve_ports: Iterable[int] = (_core.GENEVE_PORT,),
        threads: int = 1,
        window_ns: int | None = None,
        poll: Iterable[int | str] = DEFAULT_POLLS,
        alone: Iterable[str] | None = None,
    ) -> None:
        poll = list(poll)
        self.engine = Engine(policy if window_ns is None else with_window(policy, window_ns), threads=threads, poll=poll)
        """The engine the batches go through: its counters are live while it is fed."""
        self.engine.keep_timeline(window_ns or _port_window(policy))
        parse_options = {"vxlan_ports": list(vxlan_ports), "geneve_ports": list(geneve_ports)}
        self._replayed = _Replayed(self.engine, policy, parse_options, _alone_engines(policy, alone, poll))

    @property
    def packets(self) -> int:
        """Packets fed so far."""
        return self._replayed.packets

    def add(self, batch: _core.PacketBatch) -> None:
        """Processes ``batch`` (its times after those of the batches before)."""
        self._replayed.add(batch)

    def drain(self) -> None:
        """Lets every packet still on its way to the port reach it, and every burst end."""
        for engine in [self.engine, *(e for _, e in self._replayed.alone.values())]:
            engine.drain()

    def report(self, sources: list[str], format: str, warnings: list[str]) -> Report:
        """The report on everything fed: ``sources`` and ``format`` name where the packets came
        from; ``warnings`` are the source's own, listed before the replay's."""
        return self._replayed.report(sources, format, warnings)


def _alone_engines(policy: Policy, alone: Iterable[str] | None, poll: Iterable[int | str]) -> dict[str, tuple[int, Engine]]:
    """An engine for each tenant to replay alone (by its index in ``policy``), on a policy of
    that tenant only, with the same port."""
    names = policy.tenant_names
    if alone is None:
        alone = names if policy.port is not None and len(names) <= AUTO_ALONE_MAX else []
    chosen = list(dict.fromkeys(alone))
    unknown = [name for name in chosen if name not in names]
    if unknown:
        raise ValueError(f"no tenant {', '.join(map(repr, unknown))} in the policy to replay alone; its tenants are {', '.join(names)}")
    data = policy.to_dict() if chosen else {}
    single = {name: Policy.from_dict({**data, "tenants": [t for t in data["tenants"] if t["name"] == name]}) for name in chosen}
    return {name: (names.index(name), Engine(single[name], poll=poll)) for name in chosen}


def _port_window(policy: Policy) -> int:
    burst = policy.port.microburst if policy.port is not None else None
    return burst.window_ns if burst is not None else DEFAULT_WINDOW_NS


class _Replayed:
    """What the replay counts in Python besides the engine: per batch, the classifier's drops by
    reason, the VNIs no tenant claims, the capture's first and last times, frames too big for
    the policy."""

    def __init__(self, engine: Engine, policy: Policy, parse_options: dict[str, list[int]], alone: dict[str, tuple[int, Engine]]) -> None:
        self.engine, self.policy, self.parse_options, self.alone = engine, policy, parse_options, alone
        self.packets = 0
        self.start_ns: int | None = None
        self.end_ns: int | None = None
        self.classifier_drops: Counter[tuple[str | None, str]] = Counter()
        self.unclaimed_vnis: Counter[int] = Counter()
        self.tunnel_ports = TunnelPortCheck()
        self.oversized = 0

    def add(self, batch: _core.PacketBatch) -> None:
        rows = self.engine.process(batch, **self.parse_options)
        self.packets += len(rows)
        if len(rows):
            times = batch.timestamps_ns
            self.start_ns = int(times.min()) if self.start_ns is None else min(self.start_ns, int(times.min()))
            self.end_ns = int(times.max()) if self.end_ns is None else max(self.end_ns, int(times.max()))
        self.classifier_drops += _classifier_drops(rows, self.engine.tenant_names)
        self.oversized += int(np.count_nonzero(batch.wire_lengths > self.policy.largest_frame))
        unknown = np.flatnonzero(rows["reason"] == Reason.UNKNOWN_TENANT)
        if len(unknown):
            self._count_vnis(_packets(batch, unknown))
        for index, engine in self.alone.values():
            mine = np.flatnonzero(rows["tenant"] == index)
            if len(mine):
                engine.process(_packets(batch, mine), **self.parse_options)

    def _count_vnis(self, packets: _core.PacketBatch) -> None:
        """Parses again the packets of no tenant (few, usually) to name their VNIs, and to see
        whether they are tunnels on ports isolane was not told about."""
        records = parse(packets, vxlan_ports=self.parse_options["vxlan_ports"], geneve_ports=self.parse_options["geneve_ports"])
        self.tunnel_ports.observe(records)
        vnis = records["vni"]
        values, counts = np.unique(vnis[vnis >= 0], return_counts=True)
        self.unclaimed_vnis.update(dict(zip(values.tolist(), counts.tolist())))

    def warnings(self) -> list[str]:
        tunnels = self.tunnel_ports.warnings(self.parse_options["vxlan_ports"], self.parse_options["geneve_ports"])
        if not self.oversized:
            return tunnels
        return tunnels + [
            f"{self.oversized:,} frames are larger than the policy's largest_frame ({self.policy.largest_frame:,} B; GSO or BIG TCP captures?): "
            "meters whose burst is smaller meter them red; raise largest_frame if the network carries such frames"
        ]

    def report(self, paths: list[str], format: str, reader_warnings: list[str]) -> Report:
        engine, policy = self.engine, self.policy
        reasons: Counter[str] = Counter()
        for counters in engine.counters().values():
            reasons.update(counters["reasons"])
        rows = engine.stats_array()
        tenants = engine.stats_tenants  # read after the rows, so that it names every one of them
        stats = {stats_key(row, tenants): row for row in rows}
        every_burst = engine.bursts()
        events = burst_events(engine, self.start_ns or 0, every_burst)
        view = engine.timeline()
        duration_ns = (self.end_ns or 0) - (self.start_ns or 0)
        class_names = {t.name: list(t.class_names) for t in policy.tenants}
        report = Report(
            captures=paths,
            format=format,
            count=policy.count,
            port=policy.port is not None,
            packets=self.packets,
            reasons={reason: reasons[reason] for reason in REASONS},
            tenants=_tenant_reports(policy, stats, self.classifier_drops),
            start_ns=self.start_ns,
            end_ns=self.end_ns,
            warnings=reader_warnings + self.warnings(),
            unclaimed_vnis=dict(self.unclaimed_vnis),
            microbursts=events,
            burst_scopes=scope_summaries(engine, every_burst, _drops(stats)),
            profiles=profile_counts(engine),
            profile_switches=profile_switches(engine, self.start_ns or 0),
            timeline=timeline_arrays(view, class_names) if view is not None else None,
        )
        if view is not None:
            _add_rates(report, view, duration_ns)
            report.isolation = self._isolation(stats, view, duration_ns)
        report.findings = findings(report)
        return report

    def _isolation(self, stats: dict[StatsKey, np.void], view: _core.TimelineView, duration_ns: int) -> Isolation:
        seconds = duration_ns / 1e9 or float("inf")
        conforming = {name: int(series[SERIES_FIELDS.index("conforming_dropped")].sum()) for name, series in zip(view.tenants, view.tenant_series)}
        offered_bytes: Counter[str | None] = Counter()
        achieved_bytes: Counter[str | None] = Counter()
        for (name, _), row in stats.items():  # one pass, not one per tenant
            offered_bytes[name] += int(row["bytes"])
            achieved_bytes[name] += int(row["outcome_bytes"][Outcome.PASS]) + int(row["outcome_bytes"][Outcome.REMARKED])
        tenants = []
        for tenant in self.policy.tenants:
            offered, achieved = offered_bytes[tenant.name], achieved_bytes[tenant.name]
            entry = TenantIsolation(tenant.name, tenant.contract.rate_bps, offered * 8 / seconds, achieved * 8 / seconds, conforming.get(tenant.name, 0))
            if tenant.name in self.alone:
                entry.delays = _delays_alone(tenant.name, tenant.class_names, stats, self.alone[tenant.name][1])
            tenants.append(entry)
        return Isolation(tenants)


def _delays_alone(name: str, class_names: list[str], stats: dict[StatsKey, np.void], alone: Engine) -> list[ClassDelay]:
    """Each class's p99 queueing delay with the others (``stats``) and alone."""
    rows = alone.stats_array()
    by_key = {stats_key(row, alone.stats_tenants): row for row in rows}
    out = []
    for cls, class_name in enumerate(class_names):
        together, by_itself = stats.get((name, cls)), by_key.get((name, cls))
        out.append(ClassDelay(cls, class_name, _p99(together), _p99(by_itself)))
    return out


def _p99(row: np.void | None) -> int | None:
    return int(row["delay_p99_ns"]) if row is not None and int(row["delay_count"]) else None


def _packets(batch: _core.PacketBatch, rows: npt.NDArray[np.intp]) -> _core.PacketBatch:
    """Packets ``rows`` of ``batch``, their bytes not copied."""
    columns = (batch.offsets, batch.lengths, batch.timestamps_ns, batch.wire_lengths, batch.link_types)
    return _core.PacketBatch.from_arrays(batch.data, *(column[rows] for column in columns))


def _add_rates(report: Report, view: _core.TimelineView, duration_ns: int) -> None:
    tenant_rates, class_rates = rates_by_key(view, duration_ns)
    holds = holds_by_key(view)
    for tenant in report.tenants:
        if tenant.name in tenant_rates:
            tenant.rates = tenant_rates[tenant.name]
        for cls in tenant.classes:
            key = (tenant.name, cls.cls)
            if key in class_rates:
                cls.rates, cls.hold_ns = class_rates[key], holds[key]


def _drops(stats: dict[StatsKey, np.void]) -> dict[StatsKey, int]:
    """Packets dropped after the classifier (which puts its drops in no burst scope) by
    (tenant, class), as ``stats`` counts them."""
    later = [o for o in DROP_OUTCOMES if o != Outcome.DROP_CLASSIFIER]
    return {key: int(row["outcome_packets"][later].sum()) for key, row in stats.items()}


def _classifier_drops(rows: npt.NDArray[np.void], tenant_names: Sequence[str]) -> Counter[tuple[str | None, str]]:
    """The classifier's drops in ``rows`` by (tenant name, reason name)."""
    dropped = rows[rows["outcome"] == Outcome.DROP_CLASSIFIER]
    keys = (dropped["tenant"].astype(np.int64) + 1) * len(Reason) + dropped["reason"]
    unique, counts = np.unique(keys, return_counts=True)
    out: Counter[tuple[str | None, str]] = Counter()
    for key, count in zip(unique.tolist(), counts.tolist()):
        tenant, reason = divmod(key, len(Reason))
        out[(tenant_names[tenant - 1] if tenant else None, REASONS[reason])] = count
    return out


def _tenant_reports(policy: Policy, stats: dict[StatsKey, np.void], classifier_drops: Counter[tuple[str | None, str]]) -> list[TenantReport]:
    """Every class of the policy in its order (with zeros where no packet came), then whatever
    else the engine counted: each tenant's packets in no class, the packets of no tenant."""
    keys: list[StatsKey] = [(t.name, cls) for t in policy.tenants for cls in range(len(t.classes))]
    extra = {*stats, *((tenant, None) for tenant, _ in classifier_drops), (None, None)}.difference(keys)
    keys += sorted(extra, key=lambda key: (key[0] is None, str(key[0]), -1 if key[1] is None else key[1]))
    class_names = {t.name: t.class_names for t in policy.tenants}
    tenants: dict[str | None, TenantReport] = {}
    for tenant, cls in keys:
        row = stats.get((tenant, cls))
        counts = _counts(row)
        if cls is None:
            counts.classifier_drops = {reason: classifier_drops[(tenant, reason)] for reason in REASONS}
        names = class_names.get(tenant, []) if tenant is not None else []
        name = names[cls] if cls is not None and cls < len(names) else None
        delay_ns = (stats_delays(row) if row is not None else dict(NO_DELAYS)) if policy.port is not None else None
        tenants.setdefault(tenant, TenantReport(tenant, [])).classes.append(ClassReport(cls, name, counts, delay_ns))
    return list(tenants.values())


def _counts(row: np.void | None) -> Counts:
    """One row of ``Engine.stats_array`` (None: no packet came) as Counts."""
    if row is None:
        return Counts()
    colors, outcomes = row["color_packets"].tolist(), row["outcome_packets"].tolist()
    return Counts(
        packets=int(row["packets"]),
        bytes=int(row["bytes"]),
        colors={name: colors[color] for name, color in zip(COLORS, METERED_COLORS)},
        passed=outcomes[Outcome.PASS],
        remarked=outcomes[Outcome.REMARKED],
        drops={stage: outcomes[outcome] for stage, outcome in zip(DROP_STAGES, DROP_OUTCOMES)},
        in_flight=int(row["in_flight"]),
    )
