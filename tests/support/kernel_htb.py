"""Reading an HTB tree back from the kernel, for the tests that apply one to va0 of
support/netns.py's namespace A: its classes and filters as comparable values, its counters, and
the check that the dry run's tc commands build what apply built."""

from __future__ import annotations

import subprocess
import time
from collections import Counter

from isolane.linux import apply_plan, read_stats, tc_commands
from isolane.linux.apply import as_kernel_filter, device_filters
from isolane.linux.htb import HtbPlan
from isolane.linux.netlink import htb_classes, link_index, open_netns
from support.netns import FRESH, A, run


def tree(netns: str, dev: str) -> tuple[set[object], Counter[object]]:
    """The device's HTB classes and u32 filters, as comparable values."""
    with open_netns(netns) as ipr:
        index = link_index(ipr, dev)
        classes = {kernel for kernel, _ in htb_classes(ipr, index)}
        filters = Counter(f.same_as() for f in device_filters(ipr, index, list(classes)))
    return classes, filters


def planned_filters(plan: HtbPlan) -> Counter[object]:
    return Counter(as_kernel_filter(f).same_as() for f in plan.filters)


def assert_tc_builds_what_apply_made(plan: HtbPlan) -> None:
    """The dry run's commands, run in a fresh namespace, make the tree apply made on A's va0."""
    subprocess.run(["ip", "netns", "del", FRESH], capture_output=True)
    try:
        run("ip", "netns", "add", FRESH)
        run("ip", "-n", FRESH, "link", "add", "va0", "type", "veth", "peer", "name", "vc1")
        for line in tc_commands(plan, "va0", FRESH):
            run(*line.split())
        assert tree(FRESH, "va0") == tree(A, "va0")
        assert apply_plan(plan, "va0", FRESH) == []  # apply sees tc's tree as its own
    finally:
        subprocess.run(["ip", "netns", "del", FRESH], capture_output=True)


def htb_counts(plan: HtbPlan) -> dict[str, tuple[int, int]]:
    return {row["classid"]: (row["packets"], row["bytes"]) for row in read_stats(plan, "va0", A)}


def quiet_counts(plan: HtbPlan) -> dict[str, tuple[int, int]]:
    """The counters once nothing has passed the link class for 2.5 s: the underlay's own start-up
    traffic is over (MLDv2 repeats its unsolicited reports up to a second apart)."""
    before, quiet_since = htb_counts(plan), time.monotonic()
    deadline = quiet_since + 15
    while time.monotonic() < deadline:
        time.sleep(0.5)
        now = htb_counts(plan)
        if now["1:1"] != before["1:1"]:
            before, quiet_since = now, time.monotonic()
        elif time.monotonic() - quiet_since >= 2.5:
            return now
    raise AssertionError(f"the underlay never went quiet: {before}")
