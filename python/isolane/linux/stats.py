"""The kernel's per-class counters, read through netlink and named by the plan
(``isolane linux stats``). tc sends no change notifications: read again to see new counts."""

from __future__ import annotations

from typing import Any

from isolane.linux.htb import HtbPlan, format_handle
from isolane.linux.netlink import htb_classes, link_index, open_netns


def read_stats(plan: HtbPlan, dev: str, netns: str | None = None) -> list[dict[str, Any]]:
    """Every HTB class of ``dev`` with its counters, in the plan's order (classes the plan does not
    have last). Keys as :meth:`isolane.Engine.stats` where they mean the same: ``tenant`` (None
    for the link and the default class), ``cls`` and ``class`` (id and name; None above the traffic
    classes), ``packets`` and ``bytes`` the class passed; then ``classid``, ``role`` (``link``,
    ``default``, ``unmatched``, ``tenant``, ``class``, or ``unknown`` for a class the plan lacks),
    ``drops``, ``overlimits``, ``backlog_bytes`` and ``backlog_packets``. ``packets``, ``drops``
    and ``overlimits`` are 32-bit in the kernel and wrap; ``bytes`` is 64-bit. An inner class
    (the link, a tenant) counts everything its children passed."""
    with open_netns(netns) as ipr:
        found = htb_classes(ipr, link_index(ipr, dev))
    planned = plan.class_by_id()
    order = {classid: n for n, classid in enumerate(planned)}
    rows = []
    for kernel, message in sorted(found, key=lambda pair: order.get(pair[0].classid, len(order))):
        basic, queue = _counters(message)
        cls = planned.get(kernel.classid)
        rows.append(
            {
                "classid": format_handle(kernel.classid),
                "role": cls.role if cls else "unknown",
                "tenant": cls.tenant if cls else None,
                "cls": cls.cls if cls else None,
                "class": cls.class_name if cls else None,
                "packets": basic.get("packets", 0),
                "bytes": basic.get("bytes", 0),
                "drops": queue.get("drops", 0),
                "overlimits": queue.get("overlimits", 0),
                "backlog_bytes": queue.get("backlog", 0),
                "backlog_packets": queue.get("qlen", 0),
            }
        )
    return rows


def _counters(message: Any) -> tuple[dict[str, int], dict[str, int]]:
    stats2 = message.get_attr("TCA_STATS2")
    if stats2 is None:
        return {}, {}
    return dict(stats2.get_attr("TCA_STATS_BASIC") or {}), dict(stats2.get_attr("TCA_STATS_QUEUE") or {})
