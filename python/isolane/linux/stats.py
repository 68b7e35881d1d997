"""The kernel's per-class counters (HTB) or per-device counters (TBF), read through netlink and
named by the plan (``isolane linux stats``). tc sends no change notifications: read again to see new counts."""

from __future__ import annotations

from typing import Any

from isolane.linux.htb import HtbPlan, format_handle
from isolane.linux.netlink import LinuxError, htb_classes, link_index, open_netns, root_message
from isolane.linux.tbf import TBF_HANDLE, TbfPlan


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
        cls = planned.get(kernel.classid)
        rows.append(
            {
                "classid": format_handle(kernel.classid),
                "role": cls.role if cls else "unknown",
                "tenant": cls.tenant if cls else None,
                "cls": cls.cls if cls else None,
                "class": cls.class_name if cls else None,
                **_counters(message),
            }
        )
    return rows


def read_tbf_stats(plan: TbfPlan, netns: str | None = None) -> list[dict[str, Any]]:
    """The counters of the TBF root of every device of ``plan``, in its order: the keys of
    :func:`read_stats`, with ``dev`` (the vxlan device), ``classid`` ``1:`` (the qdisc's handle)
    and ``role`` ``tenant``; ``cls`` and ``class`` are None (TBF has no classes). ``bytes`` are
    the inner frames the device passed (without the tunnel headers TBF charges as overhead). A
    :class:`LinuxError` when a device has no isolane TBF root."""
    rows = []
    with open_netns(netns) as ipr:
        for qdisc in plan.qdiscs:
            message = root_message(ipr, link_index(ipr, qdisc.dev))
            if message is None or (message.get_attr("TCA_KIND"), int(message["handle"])) != ("tbf", TBF_HANDLE):
                raise LinuxError(f"{qdisc.dev} has no isolane TBF root (apply it first: isolane linux apply --mode tbf)")
            identity = {"dev": qdisc.dev, "classid": format_handle(TBF_HANDLE), "role": "tenant", "tenant": qdisc.tenant_name, "cls": None, "class": None}
            rows.append(identity | _counters(message))
    return rows


def _counters(message: Any) -> dict[str, int]:
    """A class's or qdisc's counters (0 where the kernel gave none)."""
    stats2 = message.get_attr("TCA_STATS2")
    basic = dict(stats2.get_attr("TCA_STATS_BASIC") or {}) if stats2 is not None else {}
    queue = dict(stats2.get_attr("TCA_STATS_QUEUE") or {}) if stats2 is not None else {}
    return {
        "packets": basic.get("packets", 0),
        "bytes": basic.get("bytes", 0),
        "drops": queue.get("drops", 0),
        "overlimits": queue.get("overlimits", 0),
        "backlog_bytes": queue.get("backlog", 0),
        "backlog_packets": queue.get("qlen", 0),
    }


WRAPPING = ("packets", "drops", "overlimits")
"""The counters the kernel keeps in 32 bits."""


class StatsPoller:
    """Reads :func:`read_stats` again and again, carrying the 32-bit counters (:data:`WRAPPING`)
    across their wraps, so that they keep counting up: a counter that went down since the
    previous read wrapped once. Poll more often than a counter can wrap twice (2^32 packets: at
    10 million packets per second, every 7 minutes). A class deleted and made again (a new apply)
    starts again from its new counts."""

    def __init__(self, plan: HtbPlan | TbfPlan, dev: str | None = None, netns: str | None = None) -> None:
        if isinstance(plan, HtbPlan) and dev is None:
            raise ValueError("an HTB plan's counters are read from its device: give dev")
        self.plan, self.dev, self.netns = plan, dev, netns
        self._previous: dict[tuple[str | None, str], dict[str, int]] = {}

    def read(self) -> list[dict[str, Any]]:
        """:func:`read_stats` (:func:`read_tbf_stats` for a TBF plan), with ``packets``, ``drops`` and ``overlimits`` unwrapped."""
        if isinstance(self.plan, TbfPlan):
            return self.carry(read_tbf_stats(self.plan, self.netns))
        assert self.dev is not None
        return self.carry(read_stats(self.plan, self.dev, self.netns))

    def carry(self, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """``rows`` (one reading) with the 32-bit counters carried past their wraps since the previous reading."""
        out = []
        for row in rows:
            key = (row.get("dev"), row["classid"])
            previous = self._previous.get(key)
            unwrapped = dict(row)
            if previous is not None:
                for counter in WRAPPING:
                    unwrapped[counter] = unwrap_32(previous[counter], row[counter])
            self._previous[key] = {counter: unwrapped[counter] for counter in WRAPPING}
            out.append(unwrapped)
        return out


def unwrap_32(previous: int, current: int) -> int:
    """A 32-bit counter read as ``current`` (0 to 2^32 - 1) after it stood at ``previous`` (its
    unwrapped value): the smallest value at or above ``previous`` whose low 32 bits are ``current``."""
    value = (previous & ~0xFFFF_FFFF) | current
    return value if value >= previous else value + (1 << 32)
