"""isolane beside a Linux network stack (``docs/linux.md``; needs ``isolane[linux]``, i.e.
pyroute2): probe the kernel's features, discover a namespace's VXLAN tenants, push a policy's
guarantees and ceilings as an HTB tree with u32 filters on the VNI, read the kernel's counters
back; capture live traffic as packet batches (:mod:`live`, which needs no pyroute2).

One module per job: :mod:`probe` (kernel features), :mod:`discover` (vxlan devices, policy
skeleton), :mod:`htb` (the plan, pure Python), :mod:`u32` (what its filters match), :mod:`tc` (the plan as tc commands), :mod:`apply`
(the plan through netlink, and back out), :mod:`stats` (counters), :mod:`netlink` (pyroute2), :mod:`live` (AF_PACKET capture).
Importing this package does not import pyroute2; the functions that talk to the kernel do."""

from __future__ import annotations

from isolane._core import CaptureError, CapturePermissionError
from isolane.linux.apply import apply_plan, remove
from isolane.linux.discover import VxlanDevice, discover_vxlan, policy_skeleton
from isolane.linux.htb import HtbClass, HtbPlan, plan_htb
from isolane.linux.live import LiveCapture, LiveStats
from isolane.linux.netlink import LinuxError
from isolane.linux.probe import Feature, Features, probe_features
from isolane.linux.stats import StatsPoller, read_stats
from isolane.linux.tc import tc_commands
from isolane.linux.u32 import U32Filter

__all__ = [
    "CaptureError",
    "CapturePermissionError",
    "Feature",
    "Features",
    "HtbClass",
    "HtbPlan",
    "LinuxError",
    "LiveCapture",
    "LiveStats",
    "StatsPoller",
    "U32Filter",
    "VxlanDevice",
    "apply_plan",
    "discover_vxlan",
    "plan_htb",
    "policy_skeleton",
    "probe_features",
    "read_stats",
    "remove",
    "tc_commands",
]
