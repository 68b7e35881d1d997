"""A replay report as PNG pictures (matplotlib, the optional extra ``isolane[plot]``):

- per tenant, its arrival rate over the capture: the peak rate at the burst window and the
  mean rate of each timeline bin, beside what a counter polled every second shows, with the
  tenant's bursts shaded and its drops below (needs the report's ``timeline``);
- the queueing delay at the port over time, a panel per class (needs a port and the timeline);
- the bursts of every scope as bars on a lane per tenant.

Times are from the start of the timeline (the capture's first packet), in the unit the span
asks for; rates in the unit the data asks for. matplotlib is imported only here, only when
drawing, with its Agg backend (no display needed), and the same report gives the same bytes.
"""

from __future__ import annotations

import dataclasses
import io
import math
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from isolane.report.units import RATE_UNITS, TIME_UNITS, duration_text, rate_text, unit_for

POLL_NS = 1_000_000_000
"""The polled counter drawn beside the truth: read every second, as switches' counters are."""
MAX_DELAY_PANELS = 6
MIN_BAR_SHARE = 1 / 250
"""A burst is drawn at least this share of the time axis wide, so that a 1 µs burst shows."""
DPI = 100
INSTALL_HINT = "pip install 'isolane[plot]'"
BURST_COLORS = {
    ("port", "rate"): "#7f7f7f",
    ("port", "queue"): "#c7c7c7",
    ("tenant", "rate"): "#d62728",
    ("tenant", "queue"): "#ff9896",
    ("class", "rate"): "#9467bd",
    ("class", "queue"): "#c5b0d5",
}
SHADE_ALPHA = 0.3
"""How opaque a tenant's burst's band is over its rates."""
CLASS_STRIP = 0.04
"""The height of the strip (a share of the axes) that marks a class's bursts on its tenant's rates."""
BURST_BANDS = {"port": (-0.35, 0.7), "tenant": (-0.4, 0.38), "class": (0.02, 0.38)}
"""Where a burst's bar lies in its lane (offset from the lane's middle, height; y grows down):
a tenant's own bursts above its classes'."""
BURST_NAMES = {"port": "port", "tenant": "tenant", "class": "class"}
_STYLE = {
    "font.size": 10,
    "axes.titlesize": 11,
    "figure.titlesize": 13,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "text.parse_math": False,  # tenant names are the user's: a "$" is a dollar
    "svg.hashsalt": "isolane",
}


@dataclasses.dataclass(frozen=True)
class Picture:
    """One PNG: ``name`` its file name, ``title`` what it shows (an image's alt text)."""

    name: str
    title: str
    png: bytes


@dataclasses.dataclass(frozen=True)
class Selection:
    """The tenants drawn (entries of the report's ``tenants``), of how many with packets."""

    tenants: list[dict[str, Any]]
    candidates: int

    @property
    def note(self) -> str:
        """What the cap left out, or empty."""
        left = self.candidates - len(self.tenants)
        return f"{len(self.tenants):,} of {self.candidates:,} tenants drawn: those with the most bursts, then bytes" if left > 0 else ""


def tenant_label(name: str | None) -> str:
    return "(no tenant)" if name is None else name


def select_tenants(report: dict[str, Any], tenants: Iterable[str | None] | None = None, max_tenants: int = 12) -> Selection:
    """The tenants to draw: those named in ``tenants`` (None: every tenant with packets), at
    most ``max_tenants`` of them, those with the most bursts first, then the most bytes; in the
    report's order."""
    rows = report["tenants"]
    if tenants is None:
        candidates = [row for row in rows if row["packets"]]
    else:
        wanted = set(tenants)
        candidates = [row for row in rows if row["tenant"] in wanted]
    bursts = Counter(e["tenant"] for e in report["microbursts"] if e["scope"] != "port")
    ranked = sorted(range(len(candidates)), key=lambda i: (-bursts[candidates[i]["tenant"]], -candidates[i]["bytes"], i))
    return Selection([candidates[i] for i in sorted(ranked[:max_tenants])], len(candidates))


def _matplotlib() -> Any:
    """matplotlib with the Agg backend, or an ImportError that says how to install it."""
    try:
        import matplotlib
        from matplotlib.backends.backend_agg import FigureCanvasAgg
    except ImportError as missing:
        raise ImportError(f"plotting a report needs matplotlib: {INSTALL_HINT}") from missing
    return matplotlib, FigureCanvasAgg


def render(report: dict[str, Any], *, tenants: Iterable[str | None] | None = None, max_tenants: int = 12) -> list[Picture]:
    """The report's pictures in memory: a rate picture per tenant drawn (:func:`select_tenants`),
    the queueing delays (with a port), the bursts' timeline. Without a ``timeline`` in the
    report, the burst timeline alone."""
    matplotlib, canvas = _matplotlib()
    selection = select_tenants(report, tenants, max_tenants)
    timeline = report.get("timeline")
    pictures = []
    with matplotlib.rc_context(_STYLE):
        if timeline and timeline["bins"]:
            by_name = {t["tenant"]: t for t in timeline["tenants"]}
            for index, tenant in enumerate(selection.tenants):
                if tenant["tenant"] in by_name:
                    figure = _rate_figure(report, timeline, by_name[tenant["tenant"]])
                    pictures.append(_picture(canvas, figure, f"rate-{index + 1:02d}-{_slug(tenant['tenant'])}.png"))
            if report.get("port") and timeline["classes"]:
                drawn = {t["tenant"] for t in selection.tenants}
                figure = _delay_figure(report, timeline, drawn)
                if figure is not None:
                    pictures.append(_picture(canvas, figure, "delay.png"))
        pictures.append(_picture(canvas, _burst_figure(report, selection), "bursts.png"))
    return pictures


def plot_report(report: dict[str, Any], out_dir: str | Path, *, tenants: Iterable[str | None] | None = None, max_tenants: int = 12) -> list[Path]:
    """Write the report's pictures (:func:`render`) as PNG files into ``out_dir`` (made if
    missing); returns their paths. ``tenants``: the tenant names to draw (None for the
    packets of no tenant), by default all with packets; at most ``max_tenants`` of them."""
    directory = Path(out_dir)
    directory.mkdir(parents=True, exist_ok=True)
    paths = []
    for picture in render(report, tenants=tenants, max_tenants=max_tenants):
        path = directory / picture.name
        path.write_bytes(picture.png)
        paths.append(path)
    return paths


def _picture(canvas: Any, figure: Any, name: str) -> Picture:
    canvas(figure)
    out = io.BytesIO()
    figure.savefig(out, format="png", dpi=DPI, metadata={"Software": None})
    return Picture(name, figure.get_label(), out.getvalue())


def _title(figure: Any, text: str) -> None:
    """The figure's title, kept as its label too (the picture's alt text)."""
    figure.suptitle(text)
    figure.set_label(text)


def _slug(name: str | None) -> str:
    """A file-name-safe form of a tenant name (the index before it keeps names apart)."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", tenant_label(name)).strip("_.")[:40] or "tenant"


def _capture(report: dict[str, Any]) -> str:
    return Path(str(report["capture"])).name


def _new_figure(width: float, height: float) -> Any:
    from matplotlib.figure import Figure

    return Figure(figsize=(width, height), dpi=DPI, layout="constrained")


# --- time and rate axes ----------------------------------------------------------------------


def time_axis(span_ns: float) -> tuple[int, str]:
    """The unit of a time axis covering ``span_ns``: numbers from 0 to at most ~1000."""
    return unit_for(span_ns, TIME_UNITS)


def polled_rates(
    bytes_per_bin: Sequence[int], start_ns: int, bin_ns: int, poll_ns: int = POLL_NS, last_ns: int | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """What a counter read every ``poll_ns`` shows of a timeline's bins: the polls are
    ``[kP, (k+1)P)`` of packet time (``docs/bursts.md``) from the one of the first bin to the one
    of ``last_ns`` (the last packet's time; by default the bins' end), their edges clipped to
    the bins, and each one's rate is its bytes x 8 / ``poll_ns``. A bin across a poll's
    boundary is split in proportion; a capture shorter than a poll gives one partial poll."""
    edges = start_ns + bin_ns * np.arange(len(bytes_per_bin) + 1, dtype=np.float64)
    cumulative = np.concatenate([[0.0], np.cumsum(np.asarray(bytes_per_bin, dtype=np.float64))])
    last = (int(edges[-1]) - 1 if last_ns is None else last_ns) // poll_ns
    inside = np.arange(start_ns // poll_ns + 1, last + 1, dtype=np.float64) * poll_ns
    boundaries = np.concatenate([edges[:1], inside, edges[-1:]])
    polled = np.diff(np.interp(boundaries, edges, cumulative))
    return boundaries, polled * 8e9 / poll_ns


def _steps(axes: Any, edges: np.ndarray, values: np.ndarray, **style: Any) -> Any:
    """``values`` as a step line over the intervals between ``edges``."""
    return axes.stairs(values, edges, baseline=None, **style)


# --- a tenant's rate -----------------------------------------------------------------------------


def _rate_figure(report: dict[str, Any], timeline: dict[str, Any], series: dict[str, Any]) -> Any:
    start, bin_ns, window_ns, bins = timeline["start_ns"], timeline["bin_ns"], timeline["window_ns"], timeline["bins"]
    name = series["tenant"]
    scale, unit = time_axis(bins * bin_ns)
    edges = np.arange(bins + 1) * bin_ns / scale
    peak = np.asarray(series["peak_bytes"], dtype=np.float64) * 8e9 / window_ns
    mean = np.asarray(series["bytes"], dtype=np.float64) * 8e9 / bin_ns
    last_ns = start + report["duration_ns"] if "duration_ns" in report else None
    poll_edges, polled = polled_rates(series["bytes"], start, bin_ns, last_ns=last_ns)
    threshold = _threshold(report, name)
    highest = max(float(peak.max()), threshold or 0.0, 1.0)
    rate_scale, rate_unit = unit_for(highest, RATE_UNITS)

    figure = _new_figure(11, 5.6)
    rates, drops = figure.subplots(2, 1, sharex=True, height_ratios=[4, 1])
    _title(figure, f"{tenant_label(name)}: arrival rate over time ({_capture(report)})")
    _shade_bursts(rates, report, name, start, scale, narrowest=edges[-1] * MIN_BAR_SHARE)
    _steps(rates, edges, peak / rate_scale, color="#1f77b4", linewidth=1.0, label=f"peak rate: the busiest {duration_text(window_ns)} window in each bin")
    _steps(rates, edges, mean / rate_scale, color="#ff7f0e", linewidth=1.0, label=f"mean rate over each {duration_text(bin_ns)} bin")
    polls = len(polled)
    polled_label = f"counter polled every {duration_text(POLL_NS)}: {rate_text(float(polled.max()))}" + (
        f" (one poll; the capture lasts {duration_text(bins * bin_ns)})" if polls == 1 else f" at most ({polls} polls)"
    )
    _steps(rates, (poll_edges - start) / scale, polled / rate_scale, color="black", linewidth=2.0, linestyle="--", label=polled_label)
    if threshold is not None:
        rates.axhline(threshold / rate_scale, color="#d62728", linestyle=":", linewidth=1.2, label=f"burst threshold {rate_text(threshold)}")
    rates.set_ylabel(f"rate ({rate_unit})")
    rates.set_ylim(0, highest / rate_scale * 1.08)  # room for the strip of the classes' bursts
    rates.legend(loc="lower left", bbox_to_anchor=(0.0, 1.01), ncol=2, fontsize=9, frameon=False)
    rates.annotate(
        f"what a {duration_text(POLL_NS)} poll shows", (0.5, polled.max() / rate_scale), xycoords=("axes fraction", "data"), xytext=(0, 6),
        textcoords="offset points", ha="center", fontsize=9, bbox={"boxstyle": "round", "facecolor": "white", "edgecolor": "black"},
    )

    dropped = np.asarray(series["dropped"], dtype=np.float64)
    drops.stairs(dropped, edges, fill=True, color="#d62728")
    drops.set_ylabel("dropped\n(packets per bin)")
    drops.set_ylim(bottom=0, top=max(1.0, float(dropped.max()) * 1.15))
    drops.yaxis.get_major_locator().set_params(integer=True)
    total = int(dropped.sum())
    drops.text(0.995, 0.9, f"{total:,} packets dropped" if total else "no packet dropped", transform=drops.transAxes, ha="right", va="top", fontsize=9)
    drops.set_xlabel(f"time from the start of the capture ({unit})")
    drops.set_xlim(0, edges[-1])
    return figure


def _threshold(report: dict[str, Any], name: str | None) -> float | None:
    """The tenant's burst threshold, if its tenant scope is watched."""
    return next((float(s["threshold_bps"]) for s in report["burst_scopes"] if s["scope"] == "tenant" and s["tenant"] == name), None)


def _shade_bursts(axes: Any, report: dict[str, Any], name: str | None, origin_ns: int, scale: int, narrowest: float) -> None:
    """The tenant's own bursts as bands over the whole height, its classes' as a strip along the
    top (so that the two do not blend), at least ``narrowest`` wide, one legend entry per kind."""
    mine = [e for e in report["microbursts"] if e["scope"] != "port" and e["tenant"] == name]
    for kind in BURST_COLORS:
        events = [e for e in mine if (e["scope"], e["view"]) == kind]
        strip = kind[0] == "class"
        where = {"ymin": 1 - CLASS_STRIP, "alpha": 1.0} if strip else {"alpha": SHADE_ALPHA}
        for i, e in enumerate(events):
            left = (e["start_ns"] - origin_ns) / scale
            label = f"{_burst_kind(kind)} ({len(events):,}{', strip at the top' if strip else ''})" if i == 0 else None
            axes.axvspan(left, left + max(e["duration_ns"] / scale, narrowest), color=BURST_COLORS[kind], linewidth=0, label=label, **where)


def _burst_kind(kind: tuple[str, str]) -> str:
    scope, view = kind
    return f"{BURST_NAMES[scope]} bursts, {view} view"


# --- queueing delay --------------------------------------------------------------------------


def _delay_figure(report: dict[str, Any], timeline: dict[str, Any], drawn: set[str | None]) -> Any:
    """A panel per class whose packets waited at the port (the highest p99 first, at most
    MAX_DELAY_PANELS); None when no packet waited (an axis of zeros tells nothing)."""
    p99 = {(t["tenant"], c["cls"]): (c["delay_ns"] or {}).get("p99") or 0 for t in report["tenants"] for c in t["classes"]}
    classes = [c for c in timeline["classes"] if c["tenant"] in drawn and any(m for m in c["delay_max_ns"] if m is not None)]
    if not classes:
        return None
    classes.sort(key=lambda c: -p99.get((c["tenant"], c["cls"]), 0))
    shown = classes[:MAX_DELAY_PANELS]
    bins, bin_ns = timeline["bins"], timeline["bin_ns"]
    scale, unit = time_axis(bins * bin_ns)
    edges = np.arange(bins + 1) * bin_ns / scale
    worst = max(max((m for m in c["delay_max_ns"] if m is not None), default=0) for c in shown)
    delay_scale, delay_unit = unit_for(max(worst, 1), TIME_UNITS)
    columns = 1 if len(shown) == 1 else 2
    rows = math.ceil(len(shown) / columns)
    figure = _new_figure(11, 1.2 + 2.3 * rows)
    panels = np.atleast_1d(figure.subplots(rows, columns, sharex=True, sharey=True, squeeze=False)).reshape(-1)
    _title(figure, f"queueing delay at the port, per class ({_capture(report)})")
    for axes, entry in zip(panels, shown):
        label = f"{tenant_label(entry['tenant'])} / {entry['class'] if entry['class'] is not None else entry['cls']}"
        quantiles = p99.get((entry["tenant"], entry["cls"]))
        axes.set_title(f"{label} (p99 {duration_text(quantiles)})", fontsize=10)
        _steps(axes, edges, _nan(entry["delay_max_ns"]) / delay_scale, color="#e8575a", linewidth=1.8, label="max in the bin")
        _steps(axes, edges, _nan(entry["delay_mean_ns"]) / delay_scale, color="#1f4e99", linewidth=0.8, label="mean in the bin")
        axes.set_ylim(bottom=0)
        axes.set_xlim(0, edges[-1])
    for axes in panels[len(shown) :]:
        axes.set_visible(False)
    panels[0].legend(loc="upper right", fontsize=9)
    for axes in panels[: len(shown)]:
        if axes.get_subplotspec().is_first_col():
            axes.set_ylabel(f"delay ({delay_unit})")
        if axes.get_subplotspec().is_last_row() or len(shown) - list(panels).index(axes) <= columns:
            axes.set_xlabel(f"packet arrival, from the start of the capture ({unit})")
    note = f"bins of {duration_text(bin_ns)}; no line where no packet of the class arrived"
    if len(classes) > len(shown):
        note += f"; {len(shown)} of {len(classes)} classes whose packets waited, the highest p99 first"
    figure.supxlabel(note, fontsize=9, color="#444444")
    return figure


def _nan(values: Sequence[float | None]) -> np.ndarray:
    return np.array([np.nan if v is None else v for v in values], dtype=np.float64)


# --- the bursts' timeline --------------------------------------------------------------------


def _origin_and_span(report: dict[str, Any]) -> tuple[int, int]:
    """The time axis of the burst timeline: from the timeline's start (else the capture's first
    packet, which the bursts' ``offset_ns`` count from) over the capture."""
    events = report["microbursts"]
    timeline = report.get("timeline")
    if timeline and timeline["bins"]:
        origin = timeline["start_ns"]
        span = timeline["bins"] * timeline["bin_ns"]
    else:
        origin = min((e["start_ns"] - e["offset_ns"] for e in events), default=0)
        span = report.get("duration_ns") or max((e["end_ns"] - origin for e in events), default=0)
    return origin, max(span, max((e["end_ns"] - origin for e in events), default=0), 1)


def _burst_figure(report: dict[str, Any], selection: Selection) -> Any:
    events = report["microbursts"]
    lanes: list[tuple[str, str | None]] = []  # (scope, tenant)
    if any(s["scope"] == "port" for s in report["burst_scopes"]) or any(e["scope"] == "port" for e in events):
        lanes.append(("port", None))
    lanes += [("tenant", t["tenant"]) for t in selection.tenants]
    origin, span = _origin_and_span(report)
    scale, unit = time_axis(span)
    figure = _new_figure(11, 1.9 + 0.42 * max(len(lanes), 2))
    axes = figure.subplots()
    _title(figure, f"microbursts by tenant over time ({_capture(report)})")
    minimum = span * MIN_BAR_SHARE
    drawn_kinds: Counter[tuple[str, str]] = Counter()
    for row, (scope, tenant) in enumerate(lanes):
        mine = [e for e in events if (e["scope"] == "port") == (scope == "port") and (scope == "port" or e["tenant"] == tenant)]
        for e in mine:
            kind = (e["scope"], e["view"])
            offset, height = BURST_BANDS[e["scope"]]
            width = max(e["duration_ns"], minimum) / scale
            axes.broken_barh([((e["start_ns"] - origin) / scale, width)], (row + offset, height), color=BURST_COLORS[kind], linewidth=0)
            drawn_kinds[kind] += 1
    from matplotlib.patches import Patch

    handles = [Patch(color=BURST_COLORS[k], label=f"{_burst_kind(k)} ({drawn_kinds[k]:,})") for k in BURST_COLORS if drawn_kinds[k]]
    if handles:
        axes.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=9)
    else:
        message = "no burst above the thresholds" if report["packets"] else "no packet in the capture"
        axes.text(0.5, 0.5, message, transform=axes.transAxes, ha="center", va="center", fontsize=12, color="#444444")
    axes.set_yticks(range(len(lanes)), [_lane_label(scope, tenant) for scope, tenant in lanes])
    axes.set_ylim(len(lanes) - 0.5, -0.5)
    axes.set_xlim(0, span / scale)
    axes.grid(axis="y", visible=False)
    if report["packets"]:
        axes.set_xlabel(f"time from the start of the capture ({unit})")
    else:
        axes.set_xticks([])
    notes = [selection.note] if selection.note else []
    if handles:
        bars = f"bars at least {duration_text(minimum)} wide, so that the shortest bursts show"
        notes.insert(0, f"{bars}; in a tenant's lane its own bursts above, its classes' below")
    if notes:
        figure.supxlabel("\n".join(notes), fontsize=9, color="#444444")
    return figure


def _lane_label(scope: str, tenant: str | None) -> str:
    label = "port" if scope == "port" else tenant_label(tenant)
    return label if len(label) <= 28 else label[:27] + "…"
