"""isolane beside a Linux network stack (``docs/linux.md``; needs ``isolane[linux]``, i.e.
pyroute2): probe the kernel's features, discover a namespace's VXLAN tenants, push a policy's
guarantees and ceilings as an HTB tree with u32 filters on the VNI and the tenants' rules, or
its ceilings as TBF on each tenant's vxlan devices, read the kernel's counters back; export an
engine's counters as Prometheus metrics; capture live traffic as packet batches.

One module per job: :mod:`probe` (kernel features), :mod:`discover` (vxlan devices, policy
skeleton), :mod:`htb` and :mod:`tbf` (the plans, pure Python), :mod:`u32` (what HTB's VNI filters match), :mod:`rules`
(the rules' filters on the inner headers), :mod:`tc` (the plans as tc commands),
:mod:`apply` and :mod:`tbf_apply` (the plans through netlink, and back out), :mod:`transaction`
(changes undone on a failure), :mod:`stats` (counters), :mod:`netlink` (pyroute2),
:mod:`metrics` (Prometheus, with prometheus_client), :mod:`live` (AF_PACKET capture). Importing this package imports neither
pyroute2 nor prometheus_client; the functions that need them do."""

from __future__ import annotations

from isolane._core import CaptureError, CapturePermissionError
from isolane.linux.apply import apply_plan, remove
from isolane.linux.discover import VxlanDevice, discover_vxlan, policy_skeleton
from isolane.linux.htb import HtbClass, HtbPlan, plan_htb
from isolane.linux.live import LiveCapture, LiveStats
from isolane.linux.metrics import EngineCollector, MetricsAddressError, MetricsServer, parse_metrics_address, serve
from isolane.linux.netlink import LinuxError
from isolane.linux.probe import Feature, Features, probe_features
from isolane.linux.stats import StatsPoller, read_stats, read_tbf_stats
from isolane.linux.tbf import TbfPlan, TbfQdisc, plan_tbf
from isolane.linux.tbf_apply import apply_tbf, remove_tbf
from isolane.linux.tc import tbf_tc_commands, tc_commands
from isolane.linux.transaction import RollbackFailed
from isolane.linux.u32 import U32Filter

__all__ = [
    "CaptureError",
    "CapturePermissionError",
    "EngineCollector",
    "Feature",
    "Features",
    "HtbClass",
    "HtbPlan",
    "LinuxError",
    "LiveCapture",
    "LiveStats",
    "MetricsAddressError",
    "MetricsServer",
    "RollbackFailed",
    "StatsPoller",
    "TbfPlan",
    "TbfQdisc",
    "U32Filter",
    "VxlanDevice",
    "apply_plan",
    "apply_tbf",
    "discover_vxlan",
    "parse_metrics_address",
    "plan_htb",
    "plan_tbf",
    "policy_skeleton",
    "probe_features",
    "read_stats",
    "read_tbf_stats",
    "remove",
    "remove_tbf",
    "serve",
    "tbf_tc_commands",
    "tc_commands",
]
