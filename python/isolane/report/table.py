"""The report as ``isolane replay`` prints it: a table under 100 columns, a line per tenant and
per class, then what the table leaves out in short lines (drops by reason, unclaimed VNIs),
the microbursts and the adaptive profiles. The JSON and the HTML have every detail."""

from __future__ import annotations

from isolane.commands.replay_bursts import format_bursts
from isolane.commands.replay_profiles import format_profiles
from isolane.report.findings import wrapped
from isolane.report.isolation import Isolation
from isolane.report.model import COUNT_MEANINGS, ClassReport, Counts, Rates, Report, TenantReport
from isolane.report.text import align, rate_text, time_text

LABEL_WIDTH = 22
"""Names longer than this are cut (with ``~``) so that the table keeps to 100 columns."""
LISTED_VNIS = 8


def format_report(report: Report) -> str:
    """The report as text: a header line, the tenants' table, the notes under it."""
    head = f"{report.capture}: {report.format}, {report.packets:,} packets over {time_text(report.duration_ns)}"
    held = any(c.hold_ns["max"] for t in report.tenants for c in t.classes)
    header = ["tenant / class", "packets", "mean rate", "peak rate", "dropped", "drop %"]
    header += ["delay p99"] * report.port + ["held p99"] * held
    rows = [header]
    for tenant in report.tenants:
        if tenant.name is None and not tenant.counts.packets:
            continue  # every packet found its tenant
        rows.append(_row(_cut(tenant.label), tenant.counts, tenant.rates, None, held, report.port))
        if len(tenant.classes) > 1 or (report.port and tenant.classes and tenant.classes[0].cls is not None):
            rows += [_row("  " + _cut(c.label, LABEL_WIDTH - 2), c.counts, c.rates, c, held, report.port) for c in tenant.classes]
    rows.append(_row("total", report.total, None, None, held, report.port))
    lines = [head, *wrapped(report.findings), "", *align(rows, right=range(1, len(header)))]
    lines.append(f"rates count {COUNT_MEANINGS[report.count]} (count: {report.count})")
    window = (report.timeline or {}).get("window_ns")
    if window:
        lines.append(f"peak rate: the busiest {time_text(window)} window" + ("; held: time in the shapers" if held else ""))
    lines += _drop_lines(report.tenants) + _vni_lines(report.unclaimed_vnis)
    reasons = ", ".join(f"{name} {count:,}" for name, count in report.reasons.items() if count)
    lines.append(f"verdict reasons: {reasons or 'none'}")
    lines += _isolation_lines(report.isolation)
    lines += format_bursts(report.burst_scopes, report.microbursts, align)
    lines += format_profiles(report.profiles, report.profile_switches, align)
    return "\n".join(lines)


def _cut(label: str, width: int = LABEL_WIDTH) -> str:
    return label if len(label) <= width else label[: width - 1] + "~"


def _row(label: str, counts: Counts, rates: Rates | None, cls: ClassReport | None, held: bool, port: bool) -> list[str]:
    share = f"{100 * counts.dropped / counts.packets:.3g}%" if counts.packets and counts.dropped else "-"
    mean, peak = ("", "") if rates is None else (rate_text(rates.mean_bps), rate_text(rates.peak_bps))
    cells = [label, f"{counts.packets:,}", mean, peak, f"{counts.dropped:,}", share]
    if port:
        cells.append(time_text(cls.delay_ns["p99"]) if cls is not None and cls.delay_ns else "")
    if held:
        cells.append(time_text(cls.hold_ns["p99"]) if cls is not None else "")
    return cells


def _drop_lines(tenants: list[TenantReport]) -> list[str]:
    """A line per tenant that lost packets: where, and the classifier's reasons."""
    lines = []
    for tenant in tenants:
        counts = tenant.counts
        if not counts.dropped:
            continue
        parts = [f"{stage} {count:,}" for stage, count in counts.drops.items() if count]
        if counts.drops["classifier"]:
            parts[0] += " (" + ", ".join(f"{reason} {n:,}" for reason, n in counts.classifier_drops.items() if n) + ")"
        lines.append(f"  {tenant.label}: " + ", ".join(parts))
    if any(t.counts.in_flight for t in tenants):
        lines.append("  in flight at the end (--no-drain): " + ", ".join(f"{t.label} {t.counts.in_flight:,}" for t in tenants if t.counts.in_flight))
    return ["drops by stage:", *lines] if lines else []


def _vni_lines(unclaimed: dict[int, int]) -> list[str]:
    if not unclaimed:
        return []
    biggest = sorted(unclaimed.items(), key=lambda item: (-item[1], item[0]))
    named = ", ".join(f"{vni} ({packets:,} packets)" for vni, packets in biggest[:LISTED_VNIS])
    more = f" and {len(biggest) - LISTED_VNIS:,} more (in the JSON)" if len(biggest) > LISTED_VNIS else ""
    return [f"VNIs no tenant claims: {named}{more}"]


def _isolation_lines(isolation: Isolation | None) -> list[str]:
    """Per tenant: its share of what it could claim, conforming packets lost, and the worst
    inflation of a class's p99 delay by the others; then Jain's index."""
    if isolation is None or not isolation.tenants:
        return []
    rows = [["isolation", "guarantee", "share", "conforming lost", "p99 with others / alone (worst class)"]]
    for t in isolation.tenants:
        worst = max((d for d in t.delays if d.p99_ns is not None), key=lambda d: (d.only_with_others, d.inflation or 0), default=None)
        inflation = "-"
        if worst is not None:
            ratio = "only with others" if worst.only_with_others else f"{worst.inflation:.3g}x"
            inflation = f"{ratio} ({_cut(worst.name, 16)}: {time_text(worst.p99_ns)} / {time_text(worst.alone_p99_ns)})"
        share = "-" if t.share is None else f"{t.share:.3g}"
        rows.append([_cut(t.tenant), rate_text(t.entitled_bps) if t.entitled_bps else "-", share, f"{t.conforming_dropped:,}", inflation])
    index = isolation.fairness_index
    fairness = f"Jain's fairness index over the shares: {'-' if index is None else f'{index:.3f}'} (1: all got the same share of their claim)"
    return ["", *align(rows, right={1, 2, 3}), fairness]
