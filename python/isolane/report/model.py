"""What a replay found, tenant by tenant (``docs/report.md``): the report's classes and its JSON.

Every packet read is accounted for once, and :meth:`Report.discrepancies` says where the
numbers do not add up (which would be a bug in isolane).
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from isolane.codes import Color, Outcome, Reason
from isolane.report.isolation import Isolation

if TYPE_CHECKING:  # replay_bursts reads report.text: importing it here would go round in a circle
    from isolane.commands.replay_bursts import ScopeBursts

SCHEMA_VERSION = 1
"""The version of the report's JSON (``docs/report.md``); it changes when a field changes
meaning or goes away, not when one is added."""

METERED_COLORS = [color for color in Color if color != Color.NONE]
COLORS = [color.name.lower() for color in METERED_COLORS]
DROP_OUTCOMES = [outcome for outcome in Outcome if outcome.dropped]
DROP_STAGES = [outcome.name.lower().removeprefix("drop_") for outcome in DROP_OUTCOMES]
"""Where a packet was dropped: ``classifier``, ``meter``, ``shaper_bytes``, ... (the
:class:`~isolane.Outcome` names)."""
REASONS = [reason.name.lower() for reason in Reason]
"""Why the classifier gave its verdict (the :class:`~isolane.Reason` names)."""
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
class Rates:
    """How fast some packets came: over the capture's whole duration, and at their busiest
    burst window."""

    first_ns: int | None = None
    """Their first and last arrival (ns since the epoch); None without packets."""
    last_ns: int | None = None
    mean_bps: float = 0.0
    """Bits (as the policy counts bytes) per second over the capture's duration."""
    mean_pps: float = 0.0
    peak_bps: float = 0.0
    """The most bits in one burst window, per second of the window."""

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


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
    rates: Rates = dataclasses.field(default_factory=Rates)
    hold_ns: dict[str, int | None] = dataclasses.field(default_factory=lambda: dict(NO_DELAYS))
    """How long the shapers held the packets they let through (release minus arrival; 0 for
    a packet not held): ``count``, ``p50``, ``p99``, ``p999``, ``max``."""

    @property
    def label(self) -> str:
        return "(no class)" if self.name is None else self.name

    def to_json(self) -> dict[str, Any]:
        return {"cls": self.cls, "class": self.name, **self.counts.to_json(), **self.rates.to_json(), "delay_ns": self.delay_ns, "hold_ns": self.hold_ns}


@dataclasses.dataclass
class TenantReport:
    """A tenant of the policy (``name`` None: the packets no tenant claims) and its classes."""

    name: str | None
    classes: list[ClassReport]
    rates: Rates = dataclasses.field(default_factory=Rates)

    @property
    def label(self) -> str:
        return "(no tenant)" if self.name is None else self.name

    @property
    def counts(self) -> Counts:
        return sum((c.counts for c in self.classes), Counts())

    def to_json(self) -> dict[str, Any]:
        return {"tenant": self.name, **self.counts.to_json(), **self.rates.to_json(), "classes": [c.to_json() for c in self.classes]}


@dataclasses.dataclass
class Report:
    """What a policy did to every packet of one capture or several (merged by time)."""

    captures: list[str]
    format: str
    count: str
    """The policy's ``count``: which bytes ``bytes`` counts."""
    port: bool
    """Whether the policy has a port (and so queueing delays)."""
    packets: int
    """Packets read from the captures."""
    reasons: dict[str, int]
    """Every packet read by the reason for its verdict (:class:`~isolane.Reason` names)."""
    tenants: list[TenantReport]
    """The policy's tenants in its order, then the packets of no tenant."""
    start_ns: int | None = None
    """The first packet's time and the last's (ns since the epoch)."""
    end_ns: int | None = None
    warnings: list[str] = dataclasses.field(default_factory=list)
    """What the reader and the replay met that may make the numbers mislead (one sentence each)."""
    unclaimed_vnis: dict[int, int] = dataclasses.field(default_factory=dict)
    """Packets of each VNI that no tenant claims."""
    microbursts: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    """Every burst the engine saw (``docs/bursts.md``), in the order they ended."""
    burst_scopes: list[ScopeBursts] = dataclasses.field(default_factory=list)
    """Per scope watched for bursts: the truth beside what polled counters showed."""
    profiles: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    """Per tenant with adaptive profiles: packets under each, and switches (``docs/qos.md``)."""
    profile_switches: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    """Every switch of adaptive profile, in order."""
    timeline: dict[str, Any] | None = None
    """Per tenant and class over time (``docs/report.md``, "Timeline"), its series as numpy
    arrays (:func:`~isolane.report.timeline.timeline_arrays`; lists in :meth:`to_json`)."""
    isolation: Isolation | None = None
    """How well each tenant was kept from the others (``docs/report.md``, "Isolation")."""
    findings: list[str] = dataclasses.field(default_factory=list)
    """What the replay found, one sentence each, the most telling first (``docs/report.md``,
    "Findings")."""

    @property
    def capture(self) -> str:
        """The captures' names, as one string."""
        return ", ".join(self.captures)

    @property
    def duration_ns(self) -> int:
        return 0 if self.start_ns is None or self.end_ns is None else self.end_ns - self.start_ns

    @property
    def total(self) -> Counts:
        return sum((t.counts for t in self.tenants), Counts())

    def tenant(self, name: str | None) -> TenantReport:
        """The tenant called ``name`` (None: the packets of no tenant)."""
        for tenant in self.tenants:
            if tenant.name == name:
                return tenant
        raise KeyError(f"no tenant {name!r} in the report; there are {', '.join(t.label for t in self.tenants)}")

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
        """The report as JSON-ready data, as ``docs/report.md`` describes it."""
        return {
            "schema_version": SCHEMA_VERSION,
            "captures": self.captures,
            "capture": self.capture,
            "format": self.format,
            "count": self.count,
            "port": self.port,
            "packets": self.packets,
            "start_ns": self.start_ns,
            "end_ns": self.end_ns,
            "duration_ns": self.duration_ns,
            "warnings": self.warnings,
            "findings": self.findings,
            "reasons": self.reasons,
            "unclaimed_vnis": [{"vni": vni, "packets": packets} for vni, packets in sorted(self.unclaimed_vnis.items())],
            "tenants": [t.to_json() for t in self.tenants],
            "total": self.total.to_json(),
            "microbursts": self.microbursts,
            "burst_scopes": [scope.to_json() for scope in self.burst_scopes],
            "profiles": self.profiles,
            "profile_switches": self.profile_switches,
            "timeline": timeline_json(self.timeline) if self.timeline is not None else None,
            "isolation": self.isolation.to_json() if self.isolation is not None else None,
        }

    def write_json(self, path: str | os.PathLike[str]) -> Path:
        """Writes :meth:`to_json` to ``path`` (indented); returns the path."""
        out = Path(path)
        out.write_text(json.dumps(self.to_json(), indent=2) + "\n")
        return out

    def to_html(self, *, plots: bool = True, tenants: Sequence[str | None] | None = None, max_tenants: int = 12) -> str:
        """One self-contained HTML page: the tables, the bursts and (``plots``, with matplotlib)
        the pictures (``docs/report.md``, "Pictures and the HTML page")."""
        from isolane.report.html import html_report

        return html_report(self.to_json(), plots=plots, tenants=tenants, max_tenants=max_tenants)

    def plot(self, out_dir: str | os.PathLike[str], *, tenants: Sequence[str | None] | None = None, max_tenants: int = 12) -> list[Path]:
        """Writes the pictures (PNG, with matplotlib: ``pip install 'isolane[plot]'``) into
        ``out_dir``; returns their paths."""
        from isolane.report.plot import plot_report

        return plot_report(self.to_json(), Path(out_dir), tenants=tenants, max_tenants=max_tenants)


def timeline_json(timeline: dict[str, Any]) -> dict[str, Any]:
    """The timeline (:func:`~isolane.report.timeline.timeline_arrays`) as JSON-ready data: lists, null for no value."""
    return {**timeline, "tenants": [_lists(t) for t in timeline["tenants"]], "classes": [_lists(c) for c in timeline["classes"]]}


def _lists(series: dict[str, Any]) -> dict[str, Any]:
    out = {}
    for key, value in series.items():
        if isinstance(value, np.ndarray):
            if value.dtype.kind == "f":
                value = [None if v != v else v for v in value.tolist()]  # NaN: no value
            elif value.dtype.kind == "i":
                value = [None if v < 0 else v for v in value.tolist()]  # -1: no value
            else:
                value = value.tolist()
        out[key] = value
    return out

