"""A capture replayed through a policy, tenant by tenant: what ``isolane replay`` reports.

:func:`replay` streams a capture through an :class:`~isolane.Engine` batch by batch (bounded
memory) and builds a :class:`ReplayReport` from :meth:`~isolane.Engine.stats_array` (per tenant
and class: colours, outcomes, queueing delays), :meth:`~isolane.Engine.counters` (every packet's
verdict reason) and, for the classifier's drops, the reason of each dropped row. Every packet
read is accounted for once; :meth:`ReplayReport.discrepancies` says where the numbers do not
add up (which would be a bug in isolane). ``docs/qos.md`` ("Replaying a capture") describes
the table and the JSON.
"""

from __future__ import annotations

import dataclasses
import os
from collections import Counter
from collections.abc import Callable, Container, Iterable, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from isolane import _core
from isolane.codes import Color, Outcome, Reason
from isolane.commands.replay_bursts import ScopeBursts, burst_events, format_bursts, scope_summaries, with_window
from isolane.commands.replay_profiles import format_profiles, profile_counts, profile_switches
from isolane.engine import DEFAULT_POLLS, Engine, stats_delays, stats_key
from isolane.policy import Policy

_METERED = [color for color in Color if color != Color.NONE]
COLORS = [color.name.lower() for color in _METERED]
_DROPS = [outcome for outcome in Outcome if outcome.dropped]
DROP_STAGES = [outcome.name.lower().removeprefix("drop_") for outcome in _DROPS]
"""Where a packet was dropped: ``classifier``, ``meter``, ``shaper_bytes``, ... (the
:class:`~isolane.Outcome` names)."""
REASONS = [reason.name.lower() for reason in Reason]
"""Why the classifier gave its verdict (the :class:`~isolane.Reason` names)."""
StatsKey = tuple[str | None, int | None]
"""(tenant name, class id) of a statistics row, None for no tenant or no class."""
NO_DELAYS: dict[str, int | None] = {"count": 0, "p50": None, "p99": None, "p999": None, "max": None}

COUNT_MEANINGS = {
    "inner": "the tenants' own frames, inside the tunnel",
    "outer": "frames as captured",
    "wire": "frames + 20 B of preamble and gap",
    "wire_fcs": "frames + 24 B of preamble, gap and FCS",
}


def _zeros(keys: Iterable[str]) -> dict[str, int]:
    return dict.fromkeys(keys, 0)


def _plus(a: dict[str, int], b: dict[str, int]) -> dict[str, int]:
    return {key: a[key] + b[key] for key in a}


@dataclasses.dataclass
class Counts:
    """What happened to some packets (a class of a tenant, a tenant, the whole capture), in
    packets except ``bytes``, which count as the policy's ``count`` says."""

    packets: int = 0
    bytes: int = 0
    colors: dict[str, int] = dataclasses.field(default_factory=lambda: _zeros(COLORS))
    """Packets the meters coloured (every packet the classifier let through)."""
    passed: int = 0
    remarked: int = 0
    drops: dict[str, int] = dataclasses.field(default_factory=lambda: _zeros(DROP_STAGES))
    """Dropped packets by the stage that dropped them."""
    classifier_drops: dict[str, int] = dataclasses.field(default_factory=lambda: _zeros(REASONS))
    """The classifier's drops by the reason for its verdict."""
    in_flight: int = 0
    """Released by a shaper after the capture's last packet: not at the port yet."""

    @property
    def dropped(self) -> int:
        return sum(self.drops.values())

    def __add__(self, other: Counts) -> Counts:
        return Counts(
            packets=self.packets + other.packets,
            bytes=self.bytes + other.bytes,
            colors=_plus(self.colors, other.colors),
            passed=self.passed + other.passed,
            remarked=self.remarked + other.remarked,
            drops=_plus(self.drops, other.drops),
            classifier_drops=_plus(self.classifier_drops, other.classifier_drops),
            in_flight=self.in_flight + other.in_flight,
        )

    def discrepancies(self, label: str) -> list[str]:
        """Where these counts contradict each other (``docs/qos.md``, "Statistics")."""
        problems = []
        fates = self.passed + self.remarked + self.dropped + self.in_flight
        if fates != self.packets:
            problems.append(f"{label}: {self.packets:,} packets in, but {fates:,} passed, re-marked, dropped or in flight")
        coloured = sum(self.colors.values()) + self.drops["classifier"]
        if coloured != self.packets:
            problems.append(f"{label}: {self.packets:,} packets in, but {coloured:,} coloured or dropped by the classifier")
        explained = sum(self.classifier_drops.values())
        if explained != self.drops["classifier"]:
            problems.append(f"{label}: {self.drops['classifier']:,} classifier drops, but {explained:,} with a reason")
        return problems

    def to_json(self) -> dict[str, Any]:
        return {
            "packets": self.packets,
            "bytes": self.bytes,
            "colors": self.colors,
            "passed": self.passed,
            "remarked": self.remarked,
            "dropped": self.dropped,
            "drops": self.drops,
            "classifier_drops": self.classifier_drops,
            "in_flight": self.in_flight,
        }


@dataclasses.dataclass
class ClassReport:
    """One class of a tenant; ``cls`` None holds the tenant's packets in no class (the
    classifier's drops, or the packets of no tenant)."""

    cls: int | None
    name: str | None
    counts: Counts
    delay_ns: dict[str, int | None] | None
    """Queueing delay at the port (``count``, ``p50``, ``p99``, ``p999``, ``max``); None
    without a port."""

    @property
    def label(self) -> str:
        return "(no class)" if self.name is None else self.name

    def to_json(self) -> dict[str, Any]:
        return {"cls": self.cls, "class": self.name, **self.counts.to_json(), "delay_ns": self.delay_ns}


@dataclasses.dataclass
class TenantReport:
    """A tenant of the policy (``name`` None: the packets no tenant claims) and its classes."""

    name: str | None
    classes: list[ClassReport]

    @property
    def label(self) -> str:
        return "(no tenant)" if self.name is None else self.name

    @property
    def counts(self) -> Counts:
        return sum((c.counts for c in self.classes), Counts())

    def to_json(self) -> dict[str, Any]:
        return {"tenant": self.name, **self.counts.to_json(), "classes": [c.to_json() for c in self.classes]}


@dataclasses.dataclass
class ReplayReport:
    """What a policy did to every packet of a capture."""

    capture: str
    format: str
    count: str
    """The policy's ``count``: which bytes ``bytes`` counts."""
    port: bool
    """Whether the policy has a port (and so queueing delays)."""
    packets: int
    """Packets read from the capture."""
    reasons: dict[str, int]
    """Every packet read by the reason for its verdict (:class:`~isolane.Reason` names)."""
    tenants: list[TenantReport]
    """The policy's tenants in its order, then the packets of no tenant."""
    microbursts: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    """Every burst the engine saw (``docs/bursts.md``), in the order they ended."""
    burst_scopes: list[ScopeBursts] = dataclasses.field(default_factory=list)
    """Per scope watched for bursts: the truth beside what polled counters showed."""
    profiles: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    """Per tenant with adaptive profiles: packets under each, and switches (``docs/qos.md``)."""
    profile_switches: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    """Every switch of adaptive profile, in order."""

    @property
    def total(self) -> Counts:
        return sum((t.counts for t in self.tenants), Counts())

    def discrepancies(self) -> list[str]:
        """Where the report does not add up: empty unless isolane has a bug."""
        problems = []
        accounted = self.total.packets
        if accounted != self.packets:
            problems.append(f"the tenants' packets add up to {accounted:,}, not to the {self.packets:,} read")
        with_reason = sum(self.reasons.values())
        if with_reason != self.packets:
            problems.append(f"{with_reason:,} packets have a verdict reason, not the {self.packets:,} read")
        for tenant in self.tenants:
            for cls in tenant.classes:
                problems += cls.counts.discrepancies(f"{tenant.label} / {cls.label}")
        return problems

    def to_json(self) -> dict[str, Any]:
        return {
            "capture": self.capture,
            "format": self.format,
            "count": self.count,
            "port": self.port,
            "packets": self.packets,
            "reasons": self.reasons,
            "tenants": [t.to_json() for t in self.tenants],
            "total": self.total.to_json(),
            "microbursts": self.microbursts,
            "burst_scopes": [scope.to_json() for scope in self.burst_scopes],
            "profiles": self.profiles,
            "profile_switches": self.profile_switches,
        }


def replay(
    capture: str | os.PathLike[str],
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
) -> ReplayReport:
    """Process ``capture`` through a new ``Engine(policy, threads=threads)`` batch by batch
    and report per tenant and class, with the bursts it saw (``docs/bursts.md``).
    ``progress(bytes_read, file_size)`` is called after every batch. At the end of the
    capture the port is drained (:meth:`Engine.drain`), so that every packet has its fate and
    every burst has ended; ``drain=False`` reports what was still in flight. ``window_ns``
    watches every scope of the policy at that window instead of its own; ``poll``: the
    polled views' intervals."""
    parse_options = {"vxlan_ports": list(vxlan_ports), "geneve_ports": list(geneve_ports)}
    batches = _core.PcapIterator(capture, batch_size)
    engine = Engine(policy if window_ns is None else with_window(policy, window_ns), threads=threads, poll=poll)
    packets = 0
    start_ns: int | None = None
    classifier_drops: Counter[tuple[str | None, str]] = Counter()
    for batch in batches:
        if start_ns is None and len(batch):
            start_ns = int(batch.timestamps_ns.min())
        rows = engine.process(batch, **parse_options)
        packets += len(rows)
        classifier_drops += _classifier_drops(rows, engine.tenant_names)
        if progress is not None:
            progress(batches.position, batches.size)
    if drain:
        engine.drain()
    reasons: Counter[str] = Counter()
    for counters in engine.counters().values():
        reasons.update(counters["reasons"])
    rows = engine.stats_array()
    tenants = engine.stats_tenants  # read after the rows, so that it names every one of them
    stats = {stats_key(row, tenants): row for row in rows}
    events = burst_events(engine, start_ns or 0)
    return ReplayReport(
        capture=os.fspath(capture),
        format=batches.format,
        count=policy.count,
        port=policy.port is not None,
        packets=packets,
        reasons={reason: reasons[reason] for reason in REASONS},
        tenants=_tenant_reports(policy, stats, classifier_drops),
        microbursts=events,
        burst_scopes=scope_summaries(engine, events, _drops(stats)),
        profiles=profile_counts(engine),
        profile_switches=profile_switches(engine, start_ns or 0),
    )


def _drops(stats: dict[StatsKey, np.void]) -> dict[StatsKey, int]:
    """Packets dropped after the classifier (which puts its drops in no burst scope) by
    (tenant, class), as ``stats`` counts them."""
    later = [o for o in _DROPS if o != Outcome.DROP_CLASSIFIER]
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
        colors={name: colors[color] for name, color in zip(COLORS, _METERED)},
        passed=outcomes[Outcome.PASS],
        remarked=outcomes[Outcome.REMARKED],
        drops={stage: outcomes[outcome] for stage, outcome in zip(DROP_STAGES, _DROPS)},
        in_flight=int(row["in_flight"]),
    )


def format_report(report: ReplayReport) -> str:
    """The report as a table: a line per tenant, a line per class under it (unless the tenant
    has only one), a total line, then every packet by the reason for its verdict."""
    head = f"{report.capture}: {report.format}, {report.packets:,} packets replayed; bytes: {COUNT_MEANINGS[report.count]} (count: {report.count})"
    header = ["tenant / class", "packets", "bytes", "green", "yellow", "red", "passed", "remarked", "dropped", "in flight"]
    if report.port:
        header += ["delay p50", "p99", "p99.9"]
    no_delays = [""] * 3 if report.port else []  # delays are per class: they do not add up
    rows = [header + ["drop reasons"]]
    for tenant in report.tenants:
        rows.append(_row(tenant.label, tenant.counts, no_delays))
        if len(tenant.classes) > 1:
            rows += [_row(f"  {c.label}", c.counts, _delays(c.delay_ns)) for c in tenant.classes]
    rows.append(_row("total", report.total, no_delays))
    reasons = ", ".join(f"{name} {count:,}" for name, count in report.reasons.items())
    bursts = format_bursts(report.burst_scopes, report.microbursts, align)
    profiles = format_profiles(report.profiles, report.profile_switches, align)
    return "\n".join([head, *align(rows, right=range(1, len(header))), f"verdict reasons: {reasons}", *bursts, *profiles])


def _row(label: str, counts: Counts, delays: list[str]) -> list[str]:
    numbers = [counts.packets, counts.bytes, *counts.colors.values(), counts.passed, counts.remarked, counts.dropped, counts.in_flight]
    return [label, *(f"{n:,}" for n in numbers), *delays, _drop_reasons(counts)]


def _drop_reasons(counts: Counts) -> str:
    """Nonzero drops by stage, the classifier's (the first stage) followed by its reasons."""
    parts = [f"{stage}:{count:,}" for stage, count in counts.drops.items() if count]
    if counts.drops["classifier"]:
        parts[0] += " (" + " ".join(f"{reason}:{n:,}" for reason, n in counts.classifier_drops.items() if n) + ")"
    return " ".join(parts)


def _delays(delay_ns: dict[str, int | None] | None) -> list[str]:
    if delay_ns is None:
        return []
    return [_duration(delay_ns[quantile]) for quantile in ("p50", "p99", "p999")]


def _duration(ns: int | None) -> str:
    if ns is None:
        return "-"
    for scale, unit in ((1_000_000_000, "s"), (1_000_000, "ms"), (1_000, "us")):
        if ns >= scale:
            return f"{ns / scale:.3g} {unit}"
    return f"{ns} ns"


def align(rows: Sequence[Sequence[str]], right: Container[int]) -> list[str]:
    """``rows`` of cells as lines of columns two spaces apart, the columns in ``right``
    aligned right."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = []
    for row in rows:
        cells = [cell.rjust(width) if i in right else cell.ljust(width) for i, (cell, width) in enumerate(zip(row, widths))]
        lines.append("  ".join(cells).rstrip())
    return lines
