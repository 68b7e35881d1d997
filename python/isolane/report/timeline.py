"""The report's timeline (``docs/report.md``, "Timeline") and the rates read from it, out of
the engine's :class:`~isolane._core.TimelineView`."""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from isolane import _core
from isolane.report.model import Rates

_FIELD = {name: index for index, name in enumerate(_core.SERIES_FIELDS)}
Key = tuple[str | None, int | None]
TENANT_FIELDS = ("bytes", "packets", "dropped", "conforming_dropped", "peak_bytes")
"""A tenant's series in the report's timeline."""


def timeline_arrays(view: _core.TimelineView, class_names: dict[str, list[str]]) -> dict[str, Any]:
    """Every tenant's series (the packets of no tenant's if any) and every class's with delays,
    as numpy arrays, one number a bin (lists only when the report becomes JSON: a thousand
    tenants' series as Python ints would take ten times the memory); a bin without delays has a
    NaN mean and a max of -1 (null in the JSON)."""
    tenants = [
        {"tenant": name, **{field: series[_FIELD[field]] for field in TENANT_FIELDS}}
        for name, series in zip(view.tenants, view.tenant_series)
        if name is not None or series[_FIELD["packets"]].any()  # packets of no tenant: only if there were some
    ]
    classes = []
    for (tenant, cls), series in zip(view.classes, view.class_series):
        count, total, largest = series[_FIELD["delay_count"]], series[_FIELD["delay_sum_ns"]], series[_FIELD["delay_max_ns"]]
        if cls is None or not count.any():
            continue  # no class, or no port: no delays to show
        names = class_names.get(tenant or "", [])
        mean = np.divide(total, count, out=np.full(len(count), np.nan), where=count > 0).round(1)
        classes.append({
            "tenant": tenant,
            "cls": cls,
            "class": names[cls] if cls < len(names) else None,
            "delay_count": count,
            "delay_mean_ns": mean,
            "delay_max_ns": np.where(count > 0, largest.astype(np.int64), -1),
        })
    return {"start_ns": view.start_ns, "bin_ns": view.bin_ns, "window_ns": view.window_ns, "bins": view.bins, "tenants": tenants, "classes": classes}


def rates_by_key(view: _core.TimelineView, duration_ns: int) -> tuple[dict[str | None, Rates], dict[Key, Rates]]:
    """Every tenant's rates (by name) and every class's (by tenant and class id)."""
    tenants = {name: _rates(series, span, view.window_ns, duration_ns) for name, series, span in zip(view.tenants, view.tenant_series, view.tenant_spans)}
    classes = {key: _rates(series, span, view.window_ns, duration_ns) for key, series, span in zip(view.classes, view.class_series, view.class_spans)}
    return tenants, classes


def holds_by_key(view: _core.TimelineView) -> dict[Key, dict[str, int | None]]:
    """How long the shapers held each class's packets (``count``, ``p50``, ``p99``, ``p999``,
    ``max``; None where none passed)."""
    out: dict[Key, dict[str, int | None]] = {}
    for key, (count, *quantiles) in zip(view.classes, view.class_holds.tolist()):
        out[key] = dict(zip(("count", "p50", "p99", "p999", "max"), [count, *(q if count else None for q in quantiles)]))
    return out


def _rates(series: npt.NDArray[np.uint64], span: npt.NDArray[np.int64], window_ns: int, duration_ns: int) -> Rates:
    first, last = (int(t) for t in span)
    if first < 0:
        return Rates()
    seconds = duration_ns / 1e9
    byte_total, packets = int(series[_FIELD["bytes"]].sum()), int(series[_FIELD["packets"]].sum())
    peak = int(series[_FIELD["peak_bytes"]].max(initial=0))
    return Rates(
        first_ns=first,
        last_ns=last,
        mean_bps=byte_total * 8 / seconds if seconds else 0.0,
        mean_pps=packets / seconds if seconds else 0.0,
        peak_bps=peak * 8e9 / window_ns,
    )
