"""The microbursts of a replay (``docs/bursts.md``): every burst the engine saw, per scope what
the truth was beside what polled counters showed, as JSON and as the table ``isolane replay``
prints under the tenants."""

from __future__ import annotations

import dataclasses
import ipaddress
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from isolane.codes import BurstScope, BurstView
from isolane.engine import Engine
from isolane.policy import Microburst, Policy, format_duration
from isolane.report.text import rate_text, size_text, time_text

PROTOCOL_NAMES = {1: "icmp", 6: "tcp", 17: "udp", 58: "icmpv6"}
DROP_FIELDS = ("drop_meter", "drop_shaper_bytes", "drop_shaper_time", "drop_port_buffer", "drop_port_queue")
DROP_NAMES = tuple(field.removeprefix("drop_") for field in DROP_FIELDS)
LISTED_BURSTS = 10
"""The table lists this many of the biggest bursts."""
LISTED_IN_JSON = 10_000
"""The report's JSON lists this many of the biggest bursts, with their flows (the scopes'
summaries count them all), so that its memory does not grow with the capture's length."""


def with_window(policy: Policy, window_ns: int) -> Policy:
    """``policy`` with every scope it watches for bursts watched at ``window_ns`` (thresholds
    kept), the port's included."""

    def rewindow(burst: Microburst | None) -> Microburst | None:
        return None if burst is None else dataclasses.replace(burst, window_ns=window_ns)

    def contract(holder: Any) -> Any:
        return dataclasses.replace(holder, contract=dataclasses.replace(holder.contract, microburst=rewindow(holder.contract.microburst)))

    tenants = tuple(dataclasses.replace(contract(t), classes=tuple(contract(c) for c in t.classes)) for t in policy.tenants)
    port = policy.port
    if port is not None:
        port = dataclasses.replace(port, microburst=rewindow(port.microburst or Microburst(window_ns, port.rate_bps)))
    return dataclasses.replace(policy, tenants=tenants, port=port, warnings=())


@dataclasses.dataclass
class ScopeBursts:
    """One scope watched for bursts: its setting, the truth, and what polling saw."""

    scope: str
    tenant: str | None
    cls: int | None
    class_name: str | None
    window_ns: int
    threshold_bps: int
    bursts: int
    """Rate events (the queue view's are counted apart)."""
    queue_bursts: int
    time_in_burst_ns: int
    longest_ns: int
    biggest_bytes: int
    peak_window_bps: int
    max_queue_bytes: int
    dropped: int
    """The scope's packets dropped, anywhere, over the whole capture."""
    dropped_in_bursts: int
    """Of those, dropped while one of the scope's rate events was open."""
    polls: dict[int, dict[str, int]]

    @property
    def label(self) -> str:
        if self.scope == "port":
            return "port"
        return f"{self.tenant} / {self.class_name}" if self.scope == "class" else str(self.tenant)

    def to_json(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        out["class"] = out.pop("class_name")
        out["polls"] = [{"interval_ns": interval, **view} for interval, view in self.polls.items()]
        return out


def burst_events(engine: Engine, start_ns: int, events: npt.NDArray[np.void]) -> list[dict[str, Any]]:
    """The :data:`LISTED_IN_JSON` biggest of ``events`` (``engine.bursts()``) as JSON, in the
    order they ended, with their flows; ``start_ns``: the capture's first timestamp, which
    ``offset_ns`` counts from. Built column by column (a long capture has tens of thousands of
    bursts), each address formatted once."""
    if len(events) > LISTED_IN_JSON:
        biggest = np.argsort(-events["bytes"].astype(np.int64), kind="stable")[:LISTED_IN_JSON]
        events = events[np.sort(biggest)]
    by_event = _flows_by_event(engine.burst_flows(events["id"]))
    names = engine.burst_tenants
    class_names = {t.name: t.class_names for t in engine.policy.tenants}
    scopes = [scope.name.lower() for scope in BurstScope]
    views = [view.name.lower() for view in BurstView]
    columns = {field: events[field].tolist() for field in events.dtype.names or ()}
    drops = [dict(zip(DROP_NAMES, values)) for values in zip(*(columns[field] for field in DROP_FIELDS))]
    out = []
    keys = zip(columns["id"], columns["tenant"], columns["cls"], columns["start_ns"], columns["end_ns"])
    for i, (event_id, tenant_index, cls, start, end) in enumerate(keys):
        tenant = names[tenant_index] if tenant_index >= 0 else None
        classes = class_names.get(tenant or "", [])
        out.append(
            {
                "id": event_id,
                "scope": scopes[columns["scope"][i]],
                "view": views[columns["view"][i]],
                "tenant": tenant,
                "cls": cls if cls >= 0 else None,
                "class": classes[cls] if 0 <= cls < len(classes) else None,
                "start_ns": start,
                "end_ns": end,
                "offset_ns": start - start_ns,
                "duration_ns": end - start,
                "bytes": columns["bytes"][i],
                "packets": columns["packets"][i],
                "peak_bps": columns["peak_bps"][i],
                "max_queue_bytes": columns["max_queue_bytes"][i],
                "dropped": columns["dropped"][i],
                "drops": drops[i],
                "remarked": columns["remarked"][i],
                "flows": by_event.get(event_id, []),
            }
        )
    return out


def _flows_by_event(flows: npt.NDArray[np.void]) -> dict[int, list[dict[str, Any]]]:
    """Each burst's flows as JSON, by burst id."""
    texts = _address_texts(np.concatenate([flows["src"], flows["dst"]]))
    sources, destinations = texts[: len(flows)], texts[len(flows) :]
    numbers = {field: flows[field].tolist() for field in ("event", "src_port", "dst_port", "proto", "packets", "bytes", "error_bytes")}
    by_event: dict[int, list[dict[str, Any]]] = {}
    for i, event in enumerate(numbers["event"]):
        by_event.setdefault(event, []).append(
            {
                "src": sources[i],
                "dst": destinations[i],
                **{field: numbers[field][i] for field in ("src_port", "dst_port", "proto", "packets", "bytes", "error_bytes")},
            }
        )
    return by_event


def _address_texts(raw: npt.NDArray[np.uint8]) -> list[str]:
    """16-byte addresses (IPv4 mapped into IPv6) as text, each distinct one formatted once."""
    if not len(raw):
        return []
    unique, inverse = np.unique(np.ascontiguousarray(raw).view("V16").ravel(), return_inverse=True)
    texts = [_address(bytes(address)) for address in unique.tolist()]
    return [texts[i] for i in inverse.ravel().tolist()]


def _address(raw: bytes) -> str:
    address = ipaddress.IPv6Address(raw)
    return str(address.ipv4_mapped or address)


def scope_summaries(engine: Engine, events: npt.NDArray[np.void], drops: dict[tuple[str | None, int | None], int]) -> list[ScopeBursts]:
    """Per scope watched, from every burst ``events`` (``engine.bursts()``): ``drops`` is the
    packets dropped after the classifier by (tenant, class), as ``Engine.stats_array()`` counts
    them."""
    out = []
    order = {name: index for index, name in enumerate(engine.policy.tenant_names)}
    in_policy_order = sorted(
        engine.burst_stats(), key=lambda s: (s["scope"] != "port", order.get(s["tenant"], len(order)), s["cls"] if s["cls"] is not None else -1)
    )
    rate_bursts = _rate_bursts_by_scope(events, engine.burst_tenants)
    for stats in in_policy_order:
        key = (stats["tenant"], stats["cls"])
        longest, biggest, dropped_in_bursts = rate_bursts.get((stats["scope"], *key), (0, 0, 0))
        if stats["scope"] == "port":
            dropped = sum(drops.values())
        elif stats["scope"] == "tenant":
            dropped = sum(n for (tenant, _), n in drops.items() if tenant == stats["tenant"])
        else:
            dropped = drops.get(key, 0)
        out.append(
            ScopeBursts(
                scope=stats["scope"],
                tenant=stats["tenant"],
                cls=stats["cls"],
                class_name=stats["class"],
                window_ns=stats["window_ns"],
                threshold_bps=stats["threshold_bps"],
                bursts=stats["rate_events"],
                queue_bursts=stats["queue_events"],
                time_in_burst_ns=stats["time_in_burst_ns"],
                longest_ns=longest,
                biggest_bytes=biggest,
                peak_window_bps=stats["peak_window_bps"],
                max_queue_bytes=stats["max_queue_bytes"],
                dropped=dropped,
                dropped_in_bursts=dropped_in_bursts,
                polls=stats["polls"],
            )
        )
    return out


def _rate_bursts_by_scope(events: npt.NDArray[np.void], names: Sequence[str]) -> dict[tuple[str, str | None, int | None], tuple[int, int, int]]:
    """Per (scope, tenant, class) the longest and biggest rate burst and the drops in them, in
    one pass over every burst."""
    rate = events[events["view"] == BurstView.RATE]
    out: dict[tuple[str, str | None, int | None], tuple[int, int, int]] = {}
    columns = zip(rate["scope"].tolist(), rate["tenant"].tolist(), rate["cls"].tolist(), (rate["end_ns"] - rate["start_ns"]).tolist())
    for (scope, tenant, cls, duration), size, dropped in zip(columns, rate["bytes"].tolist(), rate["dropped"].tolist()):
        key = (BurstScope(scope).name.lower(), names[tenant] if tenant >= 0 else None, cls if cls >= 0 else None)
        longest, biggest, lost = out.get(key, (0, 0, 0))
        out[key] = (max(longest, duration), max(biggest, size), lost + dropped)
    return out


def format_bursts(scopes: Sequence[ScopeBursts], events: Sequence[dict[str, Any]], align: Any) -> list[str]:
    """The bursts section of the table (under 100 columns): per scope the truth, then what the
    longest and shortest polls showed of the same traffic, then the biggest bursts."""
    if not scopes:
        return []
    labels = _nested_labels(scopes)
    header = ["microbursts", "window", "threshold", "bursts", "longest", "biggest", "peak", "max queue", "lost in bursts"]
    rows = [header]
    for s, label in zip(scopes, labels):
        cells = [label, format_duration(s.window_ns), rate_text(s.threshold_bps), f"{s.bursts:,}", time_text(s.longest_ns), size_text(s.biggest_bytes)]
        rows.append(cells + [rate_text(s.peak_window_bps), size_text(s.max_queue_bytes), f"{s.dropped_in_bursts:,} of {s.dropped:,}"])
    lines = ["", *align(rows, right=range(1, len(header)))]
    intervals = sorted({interval for scope in scopes for interval in scope.polls}, reverse=True)
    shown = intervals[:1] + intervals[-1:] if len(intervals) > 1 else intervals
    if shown:
        header = ["what polls showed", *(f"{format_duration(p)}: peak rate, max queue" for p in shown)]
        rows = [header] + [
            [label, *(f"{rate_text(s.polls[p]['peak_bps'])}, {size_text(s.polls[p]['queue_max_at_polls'])}" for p in shown)] for s, label in zip(scopes, labels)
        ]
        lines += ["", *align(rows, right=range(1, len(header)))]
    biggest = sorted(events, key=lambda e: (-e["bytes"], e["id"]))[:LISTED_BURSTS]
    if biggest:
        every = sum(s.bursts + s.queue_bursts for s in scopes)
        lines += ["", f"biggest bursts ({len(biggest)} of {every:,}; at: time from the first packet), with their top flow:"]
        rows = [["scope", "view", "at", "lasted", "bytes", "packets", "peak", "dropped"]]
        flows = []
        for e in biggest:
            label = "port" if e["scope"] == "port" else (f"{e['tenant']} / {e['class']}" if e["scope"] == "class" else e["tenant"])
            cells = [label, e["view"], time_text(e["offset_ns"]), time_text(e["duration_ns"]), size_text(e["bytes"]), f"{e['packets']:,}"]
            rows.append(cells + [rate_text(e["peak_bps"]), f"{e['dropped']:,}"])
            flows.append(_top_flow(e["flows"], e["bytes"]))
        table = align(rows, right=range(2, 8))
        lines.append(table[0])
        for row, flow in zip(table[1:], flows):
            lines += [row, f"    {flow}"]
    return lines


def _nested_labels(scopes: Sequence[ScopeBursts]) -> list[str]:
    """Each scope's label, a class indented under its tenant's line when that comes just before
    (as the tenants' table shows classes)."""
    labels = []
    for i, s in enumerate(scopes):
        tenant_above = i > 0 and scopes[i - 1].tenant == s.tenant and scopes[i - 1].scope in ("tenant", "class")
        labels.append(f"  {s.class_name}" if s.scope == "class" and tenant_above else s.label)
    return labels


def _top_flow(flows: Sequence[dict[str, Any]], total: int) -> str:
    if not flows:
        return "no flow"
    f = flows[0]
    proto = PROTOCOL_NAMES.get(f["proto"], str(f["proto"]))
    share = f", {100 * f['bytes'] / total:.0f}% of the bytes" if total else ""
    return f"{f['src']}:{f['src_port']} > {f['dst']}:{f['dst_port']} {proto}: {size_text(f['bytes'])}{share}"
