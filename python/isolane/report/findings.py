"""What a replay found, in a few sentences at the top of the report (``docs/report.md``,
"Findings"): packets lost and whether in microbursts the polled counters hid, tenants slowed by
the others, long shaper holds, tenants short of their guarantee, packets of no tenant."""

from __future__ import annotations

import textwrap

from isolane.report.model import Report, TenantReport
from isolane.report.text import rate_text, size_text, time_text

INFLATION_WORTH_SAYING = 1.2
"""A class's p99 delay with the others at least this many times its p99 alone is a finding."""
HOLD_WORTH_SAYING_NS = 1_000_000
SHARE_WORTH_SAYING = 0.95
POLL_NS = 1_000_000_000


def wrapped(sentences: list[str], width: int = 100) -> list[str]:
    """Each finding as a bullet, wrapped to ``width`` columns."""
    return [line for s in sentences for line in textwrap.wrap(s, width, initial_indent="* ", subsequent_indent="  ")]


def findings(report: Report) -> list[str]:
    """One sentence a finding, the most telling first; one saying so when there is none."""
    out: list[str] = []
    for tenant in report.tenants:
        if tenant.name is not None and tenant.counts.dropped:
            out.append(_loss(report, tenant))
    out += _slowed(report) + _holds(report) + _short(report) + _unclaimed(report)
    return out or ["no tenant lost a packet, none was slowed by the others, and every packet found its tenant"]


def _unclaimed(report: Report) -> list[str]:
    """The packets no tenant claims, and the VNIs among them."""
    orphans = next((t.counts.packets for t in report.tenants if t.name is None), 0)
    if not orphans:
        return []
    text = f"{orphans:,} of {report.packets:,} packets ({100 * orphans / report.packets:.3g}%) found no tenant"
    if report.unclaimed_vnis:
        vnis = len(report.unclaimed_vnis)
        text += f", {sum(report.unclaimed_vnis.values()):,} of them in {vnis:,} VNI{'' if vnis == 1 else 's'} that no tenant claims"
    return [text]


def _loss(report: Report, tenant: TenantReport) -> str:
    counts = tenant.counts
    text = f"{tenant.name} lost {counts.dropped:,} of {counts.packets:,} packets ({100 * counts.dropped / counts.packets:.3g}%)"
    scope = next((s for s in report.burst_scopes if s.scope == "tenant" and s.tenant == tenant.name), None)
    if scope is None:
        scope = next((s for s in report.burst_scopes if s.scope == "port"), None) if report.port else None
    if scope is None or not scope.dropped:
        return text
    where = "its" if scope.scope == "tenant" else "the port's"
    text += f"; {where} microbursts account for {scope.dropped_in_bursts:,} of the {scope.dropped:,} drops there"
    poll = scope.polls.get(POLL_NS)
    if poll is not None:
        text += f", while polled every second {where} counters showed at most {rate_text(poll['peak_bps'])}"
        text += f" and a queue of {size_text(poll['queue_max_at_polls'])}"
    return text


def _slowed(report: Report) -> list[str]:
    """The tenants whose busiest class waited at the port much longer than it does alone."""
    if report.isolation is None:
        return []
    out = []
    for entry in report.isolation.tenants:
        measured = [d for d in entry.delays if d.p99_ns is not None]
        if not measured:
            continue  # not replayed alone
        packets = {c.cls: c.counts.packets for c in report.tenant(entry.tenant).classes}
        busiest = max(measured, key=lambda d: packets.get(d.cls, 0))
        if busiest.only_with_others:
            out.append(f"{entry.tenant} / {busiest.name} waited at the port only because of the others (p99 {time_text(busiest.p99_ns)}, none alone)")
        elif busiest.inflation is not None and busiest.inflation >= INFLATION_WORTH_SAYING:
            out.append(
                f"{entry.tenant} / {busiest.name} waited {busiest.inflation:.3g}x longer at the port with the others than alone "
                f"(p99 {time_text(busiest.p99_ns)} against {time_text(busiest.alone_p99_ns)})"
            )
    return out


def _holds(report: Report) -> list[str]:
    out = []
    for tenant in report.tenants:
        for cls in tenant.classes:
            p99 = cls.hold_ns["p99"]
            if p99 is not None and p99 >= HOLD_WORTH_SAYING_NS:
                out.append(f"{tenant.label} / {cls.label}: its shapers held packets {time_text(p99)} at p99 (up to {time_text(cls.hold_ns['max'])})")
    return out


def _short(report: Report) -> list[str]:
    if report.isolation is None:
        return []
    return [
        f"{t.tenant} got {t.share:.0%} of what it could claim ({rate_text(t.achieved_bps)} of {rate_text(min(t.offered_bps, t.entitled_bps or 0))})"
        for t in report.isolation.tenants
        if t.share is not None and t.share < SHARE_WORTH_SAYING
    ]
