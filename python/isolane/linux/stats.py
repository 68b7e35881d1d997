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


WRAPPING = ("packets", "drops", "overlimits")
"""The counters the kernel keeps in 32 bits."""


class StatsPoller:
    """Reads :func:`read_stats` again and again, carrying the 32-bit counters (:data:`WRAPPING`)
    across their wraps, so that they keep counting up: a counter that went down since the
    previous read wrapped once. Poll more often than a counter can wrap twice (2^32 packets: at
    10 million packets per second, every 7 minutes). A class deleted and made again (a new apply)
    starts again from its new counts."""

    def __init__(self, plan: HtbPlan, dev: str, netns: str | None = None) -> None:
        self.plan, self.dev, self.netns = plan, dev, netns
        self._previous: dict[str, dict[str, int]] = {}

    def read(self) -> list[dict[str, Any]]:
        """:func:`read_stats`, with ``packets``, ``drops`` and ``overlimits`` unwrapped."""
        return self.carry(read_stats(self.plan, self.dev, self.netns))

    def carry(self, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """``rows`` (one reading) with the 32-bit counters carried past their wraps since the previous reading."""
        out = []
        for row in rows:
            previous = self._previous.get(row["classid"])
            unwrapped = dict(row)
            if previous is not None:
                for key in WRAPPING:
                    unwrapped[key] = unwrap_32(previous[key], row[key])
            self._previous[row["classid"]] = {key: unwrapped[key] for key in WRAPPING}
            out.append(unwrapped)
        return out


def unwrap_32(previous: int, current: int) -> int:
    """A 32-bit counter read as ``current`` (0 to 2^32 - 1) after it stood at ``previous`` (its
    unwrapped value): the smallest value at or above ``previous`` whose low 32 bits are ``current``."""
    value = (previous & ~0xFFFF_FFFF) | current
    return value if value >= previous else value + (1 << 32)
