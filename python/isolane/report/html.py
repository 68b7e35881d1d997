"""A replay report as one self-contained HTML page: inline CSS, the pictures of
:mod:`isolane.report.plot` as PNG data URIs, a small inline script to sort the burst list (the
page reads the same without it), nothing fetched from the network. Every string of the report is
escaped: tenant and class names come from the user's files."""

from __future__ import annotations

import base64
import html
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from isolane.commands.replay_bursts import PROTOCOL_NAMES
from isolane.report.model import COUNT_MEANINGS
from isolane.report.plot import Picture, render, select_tenants, tenant_label
from isolane.report.units import MISSING, duration_text, rate_text, size_text

LISTED_BURSTS = 1000
"""The burst list shows this many, the biggest first (the JSON has them all)."""
QUANTILES = (("p50", "p50"), ("p99", "p99"), ("p999", "p99.9"), ("max", "max"))

_CSS = """
body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif; margin: 1.5rem auto; max-width: 1200px;
       padding: 0 1rem; color: #1b1b1b; line-height: 1.4; }
h1 { font-size: 1.5rem; margin-bottom: 0.3rem; } h2 { font-size: 1.2rem; margin-top: 2rem; border-bottom: 1px solid #ccc; }
dl.facts { display: grid; grid-template-columns: max-content auto; gap: 0.15rem 1rem; } dl.facts dt { font-weight: 600; }
.warnings { background: #fff4ce; border: 1px solid #e0c060; padding: 0.5rem 1rem; }
.findings { background: #eef5ff; border: 1px solid #7fa7e0; padding: 0.5rem 1rem; margin: 0.5rem 0; } .note { color: #555; font-size: 0.9rem; }
table { border-collapse: collapse; font-size: 0.85rem; margin: 0.5rem 0; } th, td { padding: 0.2rem 0.5rem; border-bottom: 1px solid #e4e4e4; }
th { background: #f3f3f3; text-align: left; position: sticky; top: 0; } td.n { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
td.nowrap { white-space: nowrap; }
tr.tenant td { font-weight: 600; background: #fafafa; } tr.class td:first-child { padding-left: 1.6rem; }
tr.total td { font-weight: 700; border-top: 2px solid #999; }
table.sortable th { cursor: pointer; } table.sortable th::after { content: " \\2195"; color: #999; }
figure { margin: 1rem 0; } figure img { max-width: 100%; border: 1px solid #ddd; }
.scroll { max-height: 32rem; overflow: auto; }
"""

_SORT_SCRIPT = """
document.querySelectorAll("table.sortable th").forEach(function (th) {
  th.addEventListener("click", function () {
    var body = th.closest("table").tBodies[0], col = th.cellIndex, up = th.dataset.dir !== "up";
    th.dataset.dir = up ? "up" : "down";
    var key = function (row) { var cell = row.cells[col]; return cell.dataset.v !== undefined ? parseFloat(cell.dataset.v) : cell.textContent; };
    var rows = Array.prototype.slice.call(body.rows);
    rows.sort(function (a, b) { var x = key(a), y = key(b); return (x > y ? 1 : x < y ? -1 : 0) * (up ? 1 : -1); });
    rows.forEach(function (row) { body.appendChild(row); });
  });
});
"""


def _e(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _cell(text: str, sort_value: float | None = None, numeric: bool = True) -> str:
    """A table cell: ``text`` escaped, right-aligned if ``numeric``, with the number to sort by."""
    attributes = ' class="n"' if numeric else ""
    if sort_value is not None:
        attributes += f' data-v="{sort_value}"'
    return f"<td{attributes}>{_e(text)}</td>"


def _count(n: int | None) -> str:
    return _cell(MISSING if n is None else f"{n:,}", n)


def _table(header: Sequence[str], rows: Iterable[str], *, css_class: str = "") -> str:
    head = "".join(f"<th>{_e(h)}</th>" for h in header)
    attribute = f' class="{css_class}"' if css_class else ""
    return f"<table{attribute}><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"


def html_report(report: dict[str, Any], *, plots: bool = True, tenants: Iterable[str | None] | None = None, max_tenants: int = 12) -> str:
    """The report (the dict ``isolane replay --json`` prints) as one HTML page: the capture and
    its warnings, the tenants and their classes, the bursts beside what polled counters showed,
    the list of bursts, the profile switches, then the pictures (``plots=True``, which needs
    matplotlib: ``pip install 'isolane[plot]'``; ``tenants`` and ``max_tenants`` as
    :func:`isolane.report.plot.plot_report` takes them). ``plots=False``: tables only."""
    tenants = None if tenants is None else list(tenants)  # read twice
    pictures = render(report, tenants=tenants, max_tenants=max_tenants) if plots else []
    title = f"isolane replay: {Path(str(report['capture'])).name}"
    body = [
        f"<h1>{_e(title)}</h1>",
        _header(report),
        "<h2>Tenants</h2>",
        _tenant_table(report),
        _reasons(report),
        *_isolation(report),
        *_bursts(report),
        *_profiles(report),
        *_pictures(report, pictures, plots, tenants, max_tenants),
    ]
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f'<meta name="viewport" content="width=device-width, initial-scale=1"><title>{_e(title)}</title><style>{_CSS}</style></head>\n'
        f"<body>\n{chr(10).join(body)}\n<script>{_SORT_SCRIPT}</script>\n</body></html>\n"
    )


def _header(report: dict[str, Any]) -> str:
    duration = report.get("duration_ns")
    facts = [
        ("capture", str(report["capture"])),
        ("format", str(report["format"])),
        ("packets", f"{report['packets']:,}"),
        ("duration", duration_text(duration) + " (first to last packet)" if duration is not None else "not in this report"),
        ("bytes counted", f"{COUNT_MEANINGS.get(report['count'], report['count'])} (count: {report['count']})"),
        ("egress port", "yes: queueing delays and port drops below" if report["port"] else "none in the policy: no queueing delays"),
    ]
    out = ['<dl class="facts">', *(f"<dt>{_e(k)}</dt><dd>{_e(v)}</dd>" for k, v in facts), "</dl>"]
    found = report.get("findings")
    if found:
        out.append('<div class="findings"><strong>Findings</strong><ul>' + "".join(f"<li>{_e(f)}</li>" for f in found) + "</ul></div>")
    warnings = report.get("warnings")
    if warnings:
        out.append('<div class="warnings"><strong>Warnings</strong><ul>' + "".join(f"<li>{_e(w)}</li>" for w in warnings) + "</ul></div>")
    if "timeline" not in report:
        out.append('<p class="note">This report has no timeline (an older isolane made it): rates over time and delays over time are left out.</p>')
    return "\n".join(out)


# --- tenants -------------------------------------------------------------------------------------


def _tenant_table(report: dict[str, Any]) -> str:
    delays = bool(report["port"])
    held = any((cls.get("hold_ns") or {}).get("max") for tenant in report["tenants"] for cls in tenant["classes"])
    header = ["tenant / class", "packets", "bytes", "mean rate", "peak rate", "passed", "remarked", "dropped"]
    if delays:
        header += [f"delay {label}" for _, label in QUANTILES]
    header += ["held p99", "held max"] * held + ["drop reasons"]
    duration = report.get("duration_ns") or 0
    peaks = _peak_rates(report)
    # Delays and holds are per class: they do not add up.
    blank = ["<td></td>"] * ((len(QUANTILES) if delays else 0) + 2 * held)
    rows = []
    for tenant in report["tenants"]:
        name = tenant["tenant"]
        rows.append(_counts_row("tenant", tenant_label(name), tenant, duration, tenant.get("peak_bps", peaks.get((name, None))), blank))
        if any(cls["cls"] is not None for cls in tenant["classes"]):
            for cls in tenant["classes"]:
                label = cls["class"] if cls["class"] is not None else ("(no class)" if cls["cls"] is None else f"class {cls['cls']}")
                quantiles = _delay_cells(cls["delay_ns"]) if delays else []
                holds = [_cell(duration_text(cls["hold_ns"].get(key)), cls["hold_ns"].get(key)) for key in ("p99", "max")] if held else []
                rows.append(_counts_row("class", label, cls, duration, cls.get("peak_bps", peaks.get((name, cls["cls"]))), quantiles + holds))
    rows.append(_counts_row("total", "total", report["total"], duration, None, blank))
    note = (
        '<p class="note">mean rate: bytes × 8 over the capture\'s duration; peak rate: the busiest burst window; '
        "delays: queueing at the port, per class; held: time in the shapers (release minus arrival), per class.</p>"
    )
    return _table(header, rows) + note + _unclaimed(report)


def _unclaimed(report: dict[str, Any]) -> str:
    vnis = sorted(report.get("unclaimed_vnis") or [], key=lambda v: -v["packets"])
    if not vnis:
        return ""
    listed = ", ".join(f"{v['vni']} ({v['packets']:,} packets)" for v in vnis)
    return f'<p class="note">VNIs no tenant claims: {_e(listed)}</p>'


def _isolation(report: dict[str, Any]) -> list[str]:
    """Per tenant: what it got against its guarantee, conforming packets lost, and the worst
    inflation of a class's p99 delay by the others (``docs/report.md``, "Isolation")."""
    isolation = report.get("isolation")
    if not isolation:
        return []
    header = ["tenant", "guarantee", "offered", "achieved", "share", "conforming lost", "p99 delay: with others / alone (worst class)"]
    rows = []
    for t in isolation["tenants"]:
        worst = max((d for d in t["delays"] if d["inflation"] is not None), key=lambda d: d["inflation"], default=None)
        inflation = MISSING
        if worst is not None:
            inflation = f"{worst['class']}: {duration_text(worst['p99_ns'])} / {duration_text(worst['alone_p99_ns'])} = {worst['inflation']:.3g}x"
        cells = [_cell(tenant_label(t["tenant"]), numeric=False), _cell(rate_text(t["entitled_bps"]), t["entitled_bps"])]
        cells += [_cell(rate_text(t["offered_bps"]), t["offered_bps"]), _cell(rate_text(t["achieved_bps"]), t["achieved_bps"])]
        share = t["share"]
        cells += [_cell(MISSING if share is None else f"{share:.3g}", share), _count(t["conforming_dropped"]), _cell(inflation, worst and worst["inflation"])]
        rows.append(f"<tr>{''.join(cells)}</tr>")
    index = isolation["fairness_index"]
    note = (
        f'<p class="note">Jain\'s fairness index over the shares: {_e("-" if index is None else f"{index:.3f}")} (1: every tenant got the same share '
        "of what it could claim). share: achieved over its guarantee, or over what it offered if less. conforming lost: packets the meters "
        "coloured green that were dropped after. with others / alone: the class's p99 queueing delay, and the same when the tenant is "
        "replayed alone through the same port.</p>"
    )
    return ["<h2>Isolation</h2>", _table(header, rows), note]


def _peak_rates(report: dict[str, Any]) -> dict[tuple[str | None, int | None], int]:
    """The highest window rate by (tenant, class id or None): the timeline's per tenant, the
    burst scopes' where watched."""
    peaks: dict[tuple[str | None, int | None], int] = {}
    timeline = report.get("timeline")
    if timeline and timeline["bins"]:
        for series in timeline["tenants"]:
            peaks[(series["tenant"], None)] = max(series["peak_bytes"], default=0) * 8_000_000_000 // timeline["window_ns"]
    for scope in report["burst_scopes"]:
        if scope["scope"] != "port":
            peaks.setdefault((scope["tenant"], scope["cls"]), scope["peak_window_bps"])
    return peaks


def _counts_row(kind: str, label: str, counts: dict[str, Any], duration_ns: int, peak_bps: int | None, delay_cells: list[str]) -> str:
    mean = counts["bytes"] * 8e9 / duration_ns if duration_ns else None
    cells = [
        _cell(label, numeric=False),
        _count(counts["packets"]),
        _cell(size_text(counts["bytes"]), counts["bytes"]),
        _cell(rate_text(mean), mean),
        _cell(rate_text(peak_bps), peak_bps),
        _count(counts["passed"]),
        _count(counts["remarked"]),
        _count(counts["dropped"]),
    ]
    return f'<tr class="{kind}">{"".join(cells + delay_cells)}<td>{_e(drop_reasons(counts))}</td></tr>'


def _delay_cells(quantiles: dict[str, int | None] | None) -> list[str]:
    return [_cell(duration_text((quantiles or {}).get(key)), (quantiles or {}).get(key)) for key, _ in QUANTILES]


def drop_reasons(counts: dict[str, Any]) -> str:
    """Nonzero drops by stage, the classifier's followed by its reasons: ``classifier 2 (not_ip 2)``."""
    parts = [f"{stage} {n:,}" for stage, n in counts["drops"].items() if n]
    reasons = " ".join(f"{reason} {n:,}" for reason, n in counts.get("classifier_drops", {}).items() if n)
    if counts["drops"].get("classifier") and reasons:
        parts[0] += f" ({reasons})"
    return ", ".join(parts)


def _reasons(report: dict[str, Any]) -> str:
    reasons = ", ".join(f"{name} {n:,}" for name, n in report["reasons"].items())
    return f'<p class="note">every packet by the reason for its verdict: {_e(reasons)}</p>'


# --- bursts --------------------------------------------------------------------------------------


def scope_label(scope: str, tenant: str | None, class_name: str | None, cls: int | None) -> str:
    if scope == "port":
        return "port"
    if scope == "class":
        return f"{tenant_label(tenant)} / {class_name if class_name is not None else cls}"
    return tenant_label(tenant)


def _bursts(report: dict[str, Any]) -> list[str]:
    scopes = report["burst_scopes"]
    if not scopes:
        return ["<h2>Microbursts</h2>", '<p class="note">The policy watches no scope for microbursts.</p>']
    out = ["<h2>Microbursts</h2>", _scope_table(scopes), "<h2>What polled counters showed, beside the truth</h2>", _poll_table(scopes)]
    out += ["<h2>Bursts</h2>", _burst_list(report["microbursts"])]
    return out


def _scope_table(scopes: Sequence[dict[str, Any]]) -> str:
    header = ["scope", "window", "threshold", "bursts", "queue bursts", "time in bursts", "longest", "biggest", "peak rate", "max queue", "dropped in bursts"]
    rows = []
    for s in scopes:
        cells = [
            _cell(scope_label(s["scope"], s["tenant"], s["class"], s["cls"]), numeric=False),
            _cell(duration_text(s["window_ns"]), s["window_ns"]),
            _cell(rate_text(s["threshold_bps"]), s["threshold_bps"]),
            _count(s["bursts"]),
            _count(s["queue_bursts"]),
            _cell(duration_text(s["time_in_burst_ns"]), s["time_in_burst_ns"]),
            _cell(duration_text(s["longest_ns"]), s["longest_ns"]),
            _cell(size_text(s["biggest_bytes"]), s["biggest_bytes"]),
            _cell(rate_text(s["peak_window_bps"]), s["peak_window_bps"]),
            _cell(size_text(s["max_queue_bytes"]), s["max_queue_bytes"]),
            _cell(f"{s['dropped_in_bursts']:,} of {s['dropped']:,}", s["dropped_in_bursts"]),
        ]
        rows.append(f"<tr>{''.join(cells)}</tr>")
    note = '<p class="note">peak rate: the busiest window of the whole capture; max queue: the deepest the scope\'s queues were.</p>'
    return _table(header, rows) + note


def _poll_table(scopes: Sequence[dict[str, Any]]) -> str:
    intervals = sorted({p["interval_ns"] for s in scopes for p in s["polls"]}, reverse=True)
    header = ["scope", "truth: peak rate at the window", *(f"polled every {duration_text(i)}: peak rate, max queue" for i in intervals)]
    rows = []
    for s in scopes:
        polls = {p["interval_ns"]: p for p in s["polls"]}
        cells = [_cell(scope_label(s["scope"], s["tenant"], s["class"], s["cls"]), numeric=False)]
        cells.append(_cell(f"{rate_text(s['peak_window_bps'])}, {size_text(s['max_queue_bytes'])}", s["peak_window_bps"]))
        for interval in intervals:
            p = polls.get(interval)
            text = f"{rate_text(p['peak_bps'])}, {size_text(p['queue_max_at_polls'])} ({p['polls']:,} poll{'' if p['polls'] == 1 else 's'})" if p else MISSING
            cells.append(_cell(text, p["peak_bps"] if p else None))
        rows.append(f"<tr>{''.join(cells)}</tr>")
    note = (
        '<p class="note">A poller reads byte counters and the queue depth every interval: its peak rate is the busiest interval\'s average, '
        "its max queue the deepest it read. The bursts live between the polls.</p>"
    )
    return _table(header, rows) + note


def _burst_list(events: Sequence[dict[str, Any]]) -> str:
    if not events:
        return '<p class="note">No burst went above its threshold.</p>'
    biggest = sorted(events, key=lambda e: (-e["bytes"], e["id"]))[:LISTED_BURSTS]
    biggest.sort(key=lambda e: (e["start_ns"], e["id"]))
    header = ["#", "scope", "view", "at", "lasted", "bytes", "packets", "peak rate", "max queue", "dropped", "top flow"]
    rows = []
    for e in biggest:
        cells = [
            _count(e["id"]),
            _cell(scope_label(e["scope"], e["tenant"], e["class"], e["cls"]), numeric=False),
            _cell(e["view"], numeric=False),
            _cell(duration_text(e["offset_ns"]), e["offset_ns"]),
            _cell(duration_text(e["duration_ns"]), e["duration_ns"]),
            _cell(size_text(e["bytes"]), e["bytes"]),
            _count(e["packets"]),
            _cell(rate_text(e["peak_bps"]), e["peak_bps"]),
            _cell(size_text(e["max_queue_bytes"]), e["max_queue_bytes"]),
            _count(e["dropped"]),
            _cell(_top_flow(e), numeric=False),
        ]
        rows.append(f"<tr>{''.join(cells)}</tr>")
    shown = f"the {len(biggest):,} biggest of {len(events):,}" if len(biggest) < len(events) else f"all {len(events):,}"
    note = f'<p class="note">{_e(shown)}, in time order; at: from the first packet. Click a column to sort.</p>'
    return note + f'<div class="scroll">{_table(header, rows, css_class="sortable")}</div>'


def _top_flow(event: dict[str, Any]) -> str:
    if not event["flows"]:
        return ""
    f = event["flows"][0]
    share = f", {100 * f['bytes'] / event['bytes']:.0f}% of the bytes" if event["bytes"] else ""
    proto = PROTOCOL_NAMES.get(f["proto"], f"proto {f['proto']}")
    return f"{f['src']}:{f['src_port']} > {f['dst']}:{f['dst_port']} {proto}{share}"


# --- profiles and pictures -----------------------------------------------------------------------


def _profiles(report: dict[str, Any]) -> list[str]:
    switches = report.get("profile_switches") or []
    if not switches:
        return []
    rows = []
    for s in switches:
        scope = scope_label("tenant" if s["cls"] is None else "class", s["tenant"], s["class"], s["cls"])
        cells = [_cell(duration_text(s["offset_ns"]), s["offset_ns"]), _cell(scope, numeric=False)]
        rows.append(f"<tr>{''.join(cells + [_cell(s[key], numeric=False) for key in ('from', 'to', 'cause')])}</tr>")
    note = '<p class="note">at: from the first packet (docs/qos.md, "Adaptive profiles").</p>'
    return ["<h2>Profile switches</h2>", _table(["at", "tenant / class", "from", "to", "cause"], rows) + note]


def _pictures(report: dict[str, Any], pictures: Sequence[Picture], plots: bool, tenants: Iterable[str | None] | None, max_tenants: int) -> list[str]:
    if not plots:
        return []
    out = ["<h2>Pictures</h2>"]
    note = select_tenants(report, tenants, max_tenants).note
    if note:
        out.append(f'<p class="note">{_e(note)}.</p>')
    for picture in pictures:
        data = base64.b64encode(picture.png).decode("ascii")
        out.append(f'<figure><img src="data:image/png;base64,{data}" alt="{_e(picture.title)}"></figure>')
    return out
