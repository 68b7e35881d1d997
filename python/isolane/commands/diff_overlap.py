"""Which neighbour's bursts fall on a victim's queueing delay (``docs/report.md``, "Comparing two
captures"): a tenant's bursts as spans of time, read from one report's JSON, and the share of a
class's delay in the timeline's bins that those spans overlap."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import numpy.typing as npt


@dataclasses.dataclass
class Bursts:
    """A tenant's bursts in one report: ``spans`` (start, end) in ns since the epoch.

    ``source`` says where they come from: ``events``, the burst detector's rate events of the
    tenant's scope (or, when only its classes are watched, of its classes); ``timeline``, the
    timeline's bins whose busiest window is above ``threshold_bps`` (each span a whole bin);
    None when the report shows neither (no timeline, nothing to compare with)."""

    source: str | None
    threshold_bps: float | None
    spans: list[tuple[int, int]]

    @property
    def count(self) -> int:
        return len(self.spans)

    @property
    def time_ns(self) -> int:
        return sum(end - start for start, end in self.spans)

    def to_json(self) -> dict[str, Any]:
        return {"source": self.source, "threshold_bps": self.threshold_bps, "count": self.count, "time_ns": self.time_ns}


def tenant_bursts(report: dict[str, Any], tenant: str | None) -> Bursts:
    """``tenant``'s bursts: the detector's events when the policy watches it or its classes,
    else the timeline's bins above its guarantee (without one, above the port's threshold)."""
    watched = {s["scope"] for s in report.get("burst_scopes", []) if s["scope"] != "port" and s["tenant"] == tenant}
    if watched:
        scope = "tenant" if "tenant" in watched else "class"
        events = [e for e in report["microbursts"] if e["tenant"] == tenant and e["scope"] == scope and e["view"] == "rate"]
        return Bursts("events", None, sorted((int(e["start_ns"]), int(e["end_ns"])) for e in events))
    threshold = _threshold(report, tenant)
    timeline = report.get("timeline")
    series = next((t for t in (timeline or {}).get("tenants", []) if t["tenant"] == tenant), None)
    if timeline is None or threshold is None:
        return Bursts(None, threshold, [])
    return Bursts("timeline", threshold, _bins_above(timeline, series, threshold))


def class_bursts(report: dict[str, Any], tenant: str | None, cls: int | None) -> Bursts:
    """The detector's rate events of one class (only a watched class has bursts of its own)."""
    if not any(s["scope"] == "class" and s["tenant"] == tenant and s["cls"] == cls for s in report.get("burst_scopes", [])):
        return Bursts(None, None, [])
    events = [e for e in report["microbursts"] if (e["scope"], e["tenant"], e["cls"], e["view"]) == ("class", tenant, cls, "rate")]
    return Bursts("events", None, sorted((int(e["start_ns"]), int(e["end_ns"])) for e in events))


def _threshold(report: dict[str, Any], tenant: str | None) -> float | None:
    """The rate above which a tenant not watched is taken to burst: its guarantee (what it sends
    beyond it, it takes from the others), else the port's burst threshold."""
    isolation = report.get("isolation") or {}
    guarantee = next((t["entitled_bps"] for t in isolation.get("tenants", []) if t["tenant"] == tenant), None)
    if guarantee:
        return float(guarantee)
    port = next((s for s in report.get("burst_scopes", []) if s["scope"] == "port"), None)
    return float(port["threshold_bps"]) if port is not None else None


def _bins_above(timeline: dict[str, Any], series: dict[str, Any] | None, threshold_bps: float) -> list[tuple[int, int]]:
    """Runs of consecutive bins whose busiest window is above ``threshold_bps``, as spans."""
    if series is None:
        return []
    peak_bps = np.asarray(series["peak_bytes"], dtype=np.float64) * 8e9 / timeline["window_ns"]
    above = np.concatenate([[False], peak_bps > threshold_bps, [False]])
    edges = np.flatnonzero(np.diff(above.astype(np.int8)))
    start, width = int(timeline["start_ns"]), int(timeline["bin_ns"])
    return [(start + int(first) * width, start + int(last) * width) for first, last in zip(edges[::2], edges[1::2])]


@dataclasses.dataclass
class DelayOverlap:
    """How much of a class's queueing delay (the sum over its packets, ns) falls in bins that a
    neighbour's bursts overlap."""

    total_ns: float
    overlapped_ns: float

    @property
    def share(self) -> float | None:
        return self.overlapped_ns / self.total_ns if self.total_ns else None


def delay_overlap(report: dict[str, Any], tenant: str | None, cls: int | None, bursts: Bursts) -> DelayOverlap:
    """The class's delay in the timeline (per bin: packets x mean delay) and the part of it in
    bins [start - longest delay in the bin, end) that meet one of ``bursts``' spans: a packet
    that waited d was held up by what reached the port up to about d before it."""
    timeline = report.get("timeline") or {}
    series = next((c for c in timeline.get("classes", []) if (c["tenant"], c["cls"]) == (tenant, cls)), None)
    if series is None:
        return DelayOverlap(0.0, 0.0)
    counts = np.asarray(series["delay_count"], dtype=np.float64)
    means = np.array([m or 0.0 for m in series["delay_mean_ns"]], dtype=np.float64)
    longest = np.array([m or 0 for m in series["delay_max_ns"]], dtype=np.int64)
    weights = counts * means
    starts = int(timeline["start_ns"]) + np.arange(len(counts), dtype=np.int64) * int(timeline["bin_ns"])
    hit = _meets(bursts.spans, starts - longest, starts + int(timeline["bin_ns"]))
    return DelayOverlap(float(weights.sum()), float(weights[hit].sum()))


def _meets(spans: list[tuple[int, int]], lows: npt.NDArray[np.int64], highs: npt.NDArray[np.int64]) -> npt.NDArray[np.bool_]:
    """For each interval [low, high): whether some span (start, end) meets it (start < high and
    end > low). The spans sorted by start, the latest end among those starting before ``high``
    says it."""
    if not spans:
        return np.zeros(len(lows), dtype=bool)
    ordered = np.array(sorted(spans), dtype=np.int64)
    latest_end = np.maximum.accumulate(ordered[:, 1])
    before = np.searchsorted(ordered[:, 0], highs, side="left")
    return (before > 0) & (latest_end[np.maximum(before - 1, 0)] > lows)
