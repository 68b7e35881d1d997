"""Two replay reports compared: ``isolane diff BEFORE AFTER --policy P`` (``docs/report.md``,
"Comparing two captures"). Per tenant and class what changed (rates, drops, bursts, queueing
delays), whether a tenant's own traffic is the same in both, and for each class whose delay got
worse, the neighbours ranked by how much more of its delay falls while they burst."""

from __future__ import annotations

import dataclasses
import textwrap
from collections.abc import Iterable, Mapping
from typing import Any

from isolane.commands.diff_overlap import Bursts, DelayOverlap, class_bursts, delay_overlap, tenant_bursts
from isolane.report.model import DROP_STAGES, Report
from isolane.report.text import align, rate_text, time_text

DIFF_SCHEMA_VERSION = 1
"""The version of the diff's JSON; it changes when a field changes meaning or goes away."""
VICTIM_MIN_RISE = 0.05
"""A class is a victim when its p99 delay rose by at least this share of its p99 before..."""
VICTIM_MIN_RISE_NS = 100
"""... and by at least this much (a 1,250-byte frame's time at 100 Gbit/s): quantiles are kept
within 1/128, and a few ns of a near-empty queue are no harm."""
CULPRIT_MIN_SCORE = 0.05
"""A neighbour is named responsible when its bursts overlap at least this much more of the
victim's delay (a share of it) after than before, and it ranks first."""
DELAY_QUANTILES = ("p50", "p99", "p999", "max")
LABEL_WIDTH = 22

ReportLike = Report | Mapping[str, Any]


def change(before: float | None, after: float | None) -> dict[str, Any]:
    """A number before and after, the change and the change in percent of before (None where
    either is missing, or for the percent when before is 0)."""
    delta = after - before if before is not None and after is not None else None
    percent = 100 * delta / before if delta is not None and before else None
    return {"before": before, "after": after, "change": delta, "percent": percent}


@dataclasses.dataclass
class Neighbour:
    """How much of a victim's queueing delay a neighbour's bursts overlap, in each capture."""

    tenant: str | None
    traffic_unchanged: bool
    """Its own traffic the same in both captures: then its bursts are too, and cannot be what changed."""
    bursts_before: Bursts
    bursts_after: Bursts
    before: DelayOverlap
    after: DelayOverlap

    @property
    def score(self) -> float:
        """The share of the victim's delay the bursts overlap after, minus before (0 for a share
        that cannot be had: no delay, or no bursts known)."""
        return (self.after.share or 0.0) - (self.before.share or 0.0)

    @property
    def added_delay_share(self) -> float | None:
        """Of the delay the victim gained (summed over its packets), the part in overlapped bins."""
        gained = self.after.total_ns - self.before.total_ns
        return (self.after.overlapped_ns - self.before.overlapped_ns) / gained if gained > 0 else None

    def to_json(self) -> dict[str, Any]:
        return {
            "tenant": self.tenant,
            "traffic_unchanged": self.traffic_unchanged,
            "bursts": {"before": self.bursts_before.to_json(), "after": self.bursts_after.to_json()},
            "share_before": self.before.share,
            "share_after": self.after.share,
            "score": self.score,
            "added_delay_share": self.added_delay_share,
        }


@dataclasses.dataclass
class Victim:
    """A class whose p99 queueing delay rose, and the other tenants ranked by :attr:`Neighbour.score`."""

    tenant: str | None
    cls: int | None
    name: str | None
    p99_ns: dict[str, Any]
    traffic_unchanged: bool
    neighbours: list[Neighbour]

    @property
    def culprit(self) -> Neighbour | None:
        """The best-ranked neighbour whose own traffic changed, if its score reaches
        :data:`CULPRIT_MIN_SCORE` (a neighbour sending the same in both captures bursts the same:
        its overlap can only have moved with the others' change)."""
        changed = [n for n in self.neighbours if not n.traffic_unchanged]
        return changed[0] if changed and changed[0].score >= CULPRIT_MIN_SCORE else None

    @property
    def summary(self) -> str:
        """The finding in one sentence."""
        before, after = self.p99_ns["before"], self.p99_ns["after"]
        rise = f"{self.p99_ns['percent']:.0f}%" if self.p99_ns["percent"] is not None else "from 0 ns"
        own = "with its own traffic unchanged" if self.traffic_unchanged else "while its own traffic changed too"
        head = f"{_label(self.tenant)}'s p99 delay ({self.name}) rose {rise} ({time_text(before)} -> {time_text(after)}) {own}"
        top = self.culprit
        if top is None:
            return f"{head}; no other tenant whose traffic changed has bursts overlapping more of its queueing delay than before"
        was = f"up from {_percent(top.before.share)}" if top.before.share is not None else "no delay before"
        return f"{head}; {_label(top.tenant)}'s bursts overlap {_percent(top.after.share)} of its queueing delay ({was})"

    def to_json(self) -> dict[str, Any]:
        top = self.culprit
        return {
            "tenant": self.tenant,
            "cls": self.cls,
            "class": self.name,
            "p99_ns": self.p99_ns,
            "traffic_unchanged": self.traffic_unchanged,
            "neighbours": [n.to_json() for n in self.neighbours],
            "culprit": top.tenant if top is not None else None,
            "summary": self.summary,
        }


@dataclasses.dataclass
class ReportDiff:
    """What changed from one report (``before``) to another (``after``), both as JSON dicts."""

    before: dict[str, Any]
    after: dict[str, Any]
    tenants: list[dict[str, Any]]
    """Per tenant (then its classes): every number before and after as a :func:`change`."""
    victims: list[Victim]

    def to_json(self) -> dict[str, Any]:
        """The diff as JSON-ready data, as ``docs/report.md`` describes it."""
        return {
            "schema_version": DIFF_SCHEMA_VERSION,
            "before": _capture_summary(self.before),
            "after": _capture_summary(self.after),
            "tenants": self.tenants,
            "victims": [v.to_json() for v in self.victims],
        }

    def to_text(self) -> str:
        """The diff as tables under 100 columns, then a paragraph per victim."""
        lines = [f"before: {_capture_line(self.before)}", f"after:  {_capture_line(self.after)}"]
        lines += _traffic_table(self.tenants) + _bursts_note(self.after) + _delay_table(self.tenants)
        if not self.victims:
            lines.append("no class's p99 delay rose: no neighbour to blame")
        for victim in self.victims:
            lines += ["", *textwrap.wrap(victim.summary, 99, subsequent_indent="  "), *_neighbour_table(victim)]
        return "\n".join(lines)


def diff(before: ReportLike, after: ReportLike) -> ReportDiff:
    """Compares two reports of the same policy (:class:`~isolane.Report` or its JSON dict), tenant
    by tenant (matched by name) and class by class (by id and name)."""
    old, new = (r.to_json() if isinstance(r, Report) else dict(r) for r in (before, after))
    names = list(dict.fromkeys([t["tenant"] for t in old["tenants"]] + [t["tenant"] for t in new["tenants"]]))
    tenants = [_tenant_change(old, new, name) for name in names]
    victims = [_victim(old, new, tenant, cls, tenants) for tenant in tenants for cls in tenant["classes"] if _is_victim(cls["delay_ns"]["p99"])]
    return ReportDiff(old, new, tenants, victims)


def _tenant_entry(report: dict[str, Any], name: str | None) -> dict[str, Any]:
    return next((t for t in report["tenants"] if t["tenant"] == name), {"tenant": name, "classes": []})


def _class_entry(tenant: dict[str, Any], cls: int | None, name: str | None) -> dict[str, Any]:
    return next((c for c in tenant["classes"] if (c["cls"], c["class"]) == (cls, name)), {})


def _tenant_change(old: dict[str, Any], new: dict[str, Any], name: str | None) -> dict[str, Any]:
    before, after = _tenant_entry(old, name), _tenant_entry(new, name)
    keys = list(dict.fromkeys([(c["cls"], c["class"]) for c in before["classes"]] + [(c["cls"], c["class"]) for c in after["classes"]]))
    classes = []
    for cls, class_name in keys:
        was, now = (_class_entry(t, cls, class_name) for t in (before, after))
        bursts = (class_bursts(old, name, cls), class_bursts(new, name, cls))
        classes.append({"cls": cls, "class": class_name, **_numbers(was, now, bursts), "delay_ns": _delays(was, now)})
    differences = _traffic_differences(old, new, before, after)
    bursts = (tenant_bursts(old, name), tenant_bursts(new, name))
    return {"tenant": name, "traffic_unchanged": not differences, "traffic_differences": differences, **_numbers(before, after, bursts), "classes": classes}


def _numbers(was: dict[str, Any], now: dict[str, Any], bursts: tuple[Bursts, Bursts]) -> dict[str, Any]:
    """The changes of what a tenant and a class both have: traffic, drops, bursts."""
    out = {key: change(was.get(key, 0), now.get(key, 0)) for key in ("packets", "bytes", "mean_bps", "peak_bps", "dropped")}
    out["drops"] = {stage: change(was.get("drops", {}).get(stage, 0), now.get("drops", {}).get(stage, 0)) for stage in DROP_STAGES}
    known = bursts[0].source is not None and bursts[1].source is not None
    out["bursts"] = {
        "source": {"before": bursts[0].source, "after": bursts[1].source},
        "threshold_bps": {"before": bursts[0].threshold_bps, "after": bursts[1].threshold_bps},
        "count": change(bursts[0].count, bursts[1].count) if known else change(None, None),
        "time_ns": change(bursts[0].time_ns, bursts[1].time_ns) if known else change(None, None),
    }
    return out


def _delays(was: dict[str, Any], now: dict[str, Any]) -> dict[str, Any]:
    old, new = was.get("delay_ns") or {}, now.get("delay_ns") or {}
    return {key: change(old.get(key), new.get(key)) for key in DELAY_QUANTILES}


def _traffic_differences(old: dict[str, Any], new: dict[str, Any], before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    """How a tenant's own traffic differs between the reports, one phrase each (empty: the same).
    Compared: every class's packets and bytes, the tenant's span (first to last packet), its
    busiest window's rate and, when both timelines' bins fall alike on its first packet, its bytes
    and packets bin by bin."""
    differences = []
    counts = {side: {(c["cls"], c["class"]): (c["packets"], c["bytes"]) for c in t["classes"] if c["packets"]} for side, t in (("was", before), ("now", after))}
    for key in sorted(counts["was"].keys() | counts["now"].keys(), key=str):
        was, now = counts["was"].get(key, (0, 0)), counts["now"].get(key, (0, 0))
        if was != now:
            differences.append(f"{key[1] or '(no class)'}: {was[0]:,} packets, {was[1]:,} bytes -> {now[0]:,}, {now[1]:,}")
    spans = [t["last_ns"] - t["first_ns"] if t.get("first_ns") is not None else None for t in (before, after)]
    if spans[0] != spans[1]:
        differences.append(f"first to last packet: {time_text(spans[0])} -> {time_text(spans[1])}")
    if before.get("peak_bps", 0) != after.get("peak_bps", 0):
        differences.append(f"busiest window: {rate_text(before.get('peak_bps', 0))} -> {rate_text(after.get('peak_bps', 0))}")
    if not differences and _series_differ(old, new, before, after):
        differences.append("its arrivals over time")
    return differences


def _series_differ(old: dict[str, Any], new: dict[str, Any], before: dict[str, Any], after: dict[str, Any]) -> bool:
    """Whether the tenant's bytes or packets per bin differ, when both timelines' bins are alike
    and start alike before its first packet (else the bins cannot be compared: False)."""
    a, b = old.get("timeline"), new.get("timeline")
    if a is None or b is None or before.get("first_ns") is None or after.get("first_ns") is None:
        return False
    if a["bin_ns"] != b["bin_ns"] or before["first_ns"] - a["start_ns"] != after["first_ns"] - b["start_ns"]:
        return False
    series = [next((s for s in t["tenants"] if s["tenant"] == before["tenant"]), None) for t in (a, b)]
    if series[0] is None or series[1] is None:
        return series[0] is not series[1]
    return any(_trimmed(series[0][key]) != _trimmed(series[1][key]) for key in ("bytes", "packets"))


def _trimmed(values: list[int]) -> list[int]:
    end = len(values)
    while end and not values[end - 1]:
        end -= 1
    return values[:end]


def _is_victim(p99: dict[str, Any]) -> bool:
    """Whether a class's p99 delay rose enough to look for a cause (a class that sent nothing
    in one of the captures has nothing to compare)."""
    before, after = p99["before"], p99["after"]
    if before is None or after is None:
        return False
    rise = after - before
    return rise >= VICTIM_MIN_RISE_NS and rise >= VICTIM_MIN_RISE * before


def _victim(old: dict[str, Any], new: dict[str, Any], tenant: dict[str, Any], cls: dict[str, Any], tenants: Iterable[dict[str, Any]]) -> Victim:
    name, key = tenant["tenant"], cls["cls"]
    neighbours = []
    for other in tenants:
        if other is tenant or not (other["packets"]["before"] or other["packets"]["after"]):
            continue
        bursts = tenant_bursts(old, other["tenant"]), tenant_bursts(new, other["tenant"])
        overlaps = delay_overlap(old, name, key, bursts[0]), delay_overlap(new, name, key, bursts[1])
        neighbours.append(Neighbour(other["tenant"], other["traffic_unchanged"], *bursts, *overlaps))
    neighbours.sort(key=lambda n: (-n.score, -(n.added_delay_share or 0.0), str(n.tenant)))
    return Victim(name, key, cls["class"], cls["delay_ns"]["p99"], tenant["traffic_unchanged"], neighbours)


def _capture_summary(report: dict[str, Any]) -> dict[str, Any]:
    return {key: report.get(key) for key in ("capture", "packets", "start_ns", "end_ns", "duration_ns")}


def _capture_line(report: dict[str, Any]) -> str:
    return f"{report['capture']}: {report['packets']:,} packets over {time_text(report['duration_ns'])}"


def _label(tenant: str | None) -> str:
    return "(no tenant)" if tenant is None else tenant


def _cut(label: str, width: int = LABEL_WIDTH) -> str:
    return label if len(label) <= width else label[: width - 1] + "~"


def _percent(share: float | None) -> str:
    return "-" if share is None else f"{100 * share:.0f}%"


def _signed_percent(percent: float) -> str:
    """``+20%``; below 1% one decimal, so that a small change does not read ``-0%``."""
    if not percent:
        return "0%"
    return f"{percent:+.0f}%" if abs(percent) >= 1 else f"{percent:+.1f}%"


def _with_change(text: str, record: dict[str, Any], *, count: bool = False) -> str:
    """``text`` (the value after), and the change in brackets unless there is none."""
    if not record["change"]:
        return text
    if count or record["percent"] is None:
        return f"{text} ({record['change']:+,})" if count else f"{text} (new)"
    return f"{text} ({_signed_percent(record['percent'])})"


def _traffic_table(tenants: list[dict[str, Any]]) -> list[str]:
    """A line per tenant and per class with traffic: the values after, and their change."""
    rows = [["tenant / class", "own traffic", "packets", "mean rate", "dropped", "bursts"]]
    for tenant in tenants:
        own = "unchanged" if tenant["traffic_unchanged"] else "changed"
        rows.append([_cut(_label(tenant["tenant"])), own, *_traffic_cells(tenant)])
        busy = [c for c in tenant["classes"] if c["packets"]["before"] or c["packets"]["after"]]
        if len(busy) > 1:
            rows += [["  " + _cut(c["class"] or "(no class)", LABEL_WIDTH - 2), "", *_traffic_cells(c)] for c in busy]
    return align(rows, right={2, 3, 4, 5})


def _traffic_cells(numbers: dict[str, Any]) -> list[str]:
    packets, mean, dropped, bursts = numbers["packets"], numbers["mean_bps"], numbers["dropped"], numbers["bursts"]["count"]
    return [
        _with_change(f"{packets['after']:,}", packets),
        _with_change(rate_text(mean["after"]), mean),
        _with_change(f"{dropped['after']:,}", dropped, count=True),
        "-" if bursts["after"] is None else _with_change(f"{bursts['after']:,}", bursts, count=True),
    ]


def _bursts_note(report: dict[str, Any]) -> list[str]:
    """What the bursts column counts: the detector's events, or the timeline's bins above a rate."""
    timeline = report.get("timeline")
    if timeline is None:
        return ["bursts: the detector's events of the tenants and classes the policy watches"]
    bins = f"runs of the timeline's {time_text(timeline['bin_ns'])} bins whose busiest {time_text(timeline['window_ns'])} window"
    note = f"bursts: the detector's events where the policy watches a tenant; else {bins} is above its guarantee (else the port's threshold)"
    return textwrap.wrap(note, 99, subsequent_indent="  ")


def _delay_table(tenants: list[dict[str, Any]]) -> list[str]:
    """A line per class with a queueing delay in either report."""
    rows = [["delay at the port", "p99 before", "p99 after", "change", "p99.9 after", "max after"]]
    for tenant in tenants:
        for cls in tenant["classes"]:
            delay = cls["delay_ns"]
            if delay["p99"]["before"] is None and delay["p99"]["after"] is None:
                continue
            label = _cut(f"{_label(tenant['tenant'])} / {cls['class'] or '(no class)'}")
            p99 = delay["p99"]
            rise = "-" if p99["percent"] is None else _signed_percent(p99["percent"])
            tail = [_with_change(time_text(delay[key]["after"]), delay[key]) for key in ("p999", "max")]
            rows.append([label, time_text(p99["before"]), time_text(p99["after"]), rise, *tail])
    return ["", *align(rows, right={1, 2, 3, 4, 5})] if len(rows) > 1 else []


def _neighbour_table(victim: Victim) -> list[str]:
    if not victim.neighbours:
        return ["  no other tenant"]
    rows = [["  neighbour", "own traffic", "bursts before", "after", "overlap before", "after", "change"]]
    for n in victim.neighbours:
        counts = ["-" if b.source is None else f"{b.count:,}" for b in (n.bursts_before, n.bursts_after)]
        own = "unchanged" if n.traffic_unchanged else "changed"
        rows.append(["  " + _cut(_label(n.tenant)), own, *counts, _percent(n.before.share), _percent(n.after.share), f"{100 * n.score:+.0f} pts"])
    return align(rows, right={2, 3, 4, 5, 6})
