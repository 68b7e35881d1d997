"""isolane: tenant isolation for shared AI data-center networks, at wire speed.

The data path is Rust (``isolane._core``); this package is the control path. Start with
:func:`read_pcap` / :func:`iter_pcap` / :func:`open_captures` (several captures, standard input,
compressed files) to get :class:`PacketBatch` objects and :func:`parse` to turn them into one
record per packet (see ``docs/parsing.md``).
"""

from __future__ import annotations

import importlib.metadata
import os

from isolane._core import (
    GENEVE_PORT,
    VXLAN_PORT,
    BatchError,
    EngineError,
    IsolaneError,
    NoTenantError,
    PacketBatch,
    PcapError,
    PcapIterator,
    RuleIndexError,
    RuleTable,
    read_pcap,
)
from isolane.capture import CaptureIssues, Captures, Truncation, TunnelPortCheck, open_captures
from isolane.codes import Action, BurstScope, BurstView, Color, Outcome, ProfileId, Reason, Status, SwitchCause, Tunnel
from isolane.commands.replay import replay
from isolane.engine import (
    BURST_DTYPE,
    BURST_FLOW_DTYPE,
    DEFAULT_POLLS,
    DELAY_EDGES_NS,
    PROCESSED_DTYPE,
    PROFILE_EVENT_DTYPE,
    STATS_DTYPE,
    VERDICT_DTYPE,
    ActionCounts,
    ClassifierCounters,
    ColorCounts,
    DelayHistograms,
    DelayStats,
    Engine,
    MicroburstStats,
    OutcomeCounts,
    PacketsBytes,
    StatsEntry,
    UpdateReport,
)
from isolane.parsing import PARSED_DTYPE, LinkType, format_addresses, parse
from isolane.policy import Policy, PolicyError, PolicyWarning
from isolane.report.model import Report
from isolane.report.table import format_report

__all__ = [
    "BURST_DTYPE",
    "PROFILE_EVENT_DTYPE",
    "BURST_FLOW_DTYPE",
    "DEFAULT_POLLS",
    "DELAY_EDGES_NS",
    "GENEVE_PORT",
    "PARSED_DTYPE",
    "PROCESSED_DTYPE",
    "STATS_DTYPE",
    "VERDICT_DTYPE",
    "VXLAN_PORT",
    "Action",
    "ActionCounts",
    "BurstScope",
    "ProfileId",
    "SwitchCause",
    "BatchError",
    "BurstView",
    "CaptureIssues",
    "Captures",
    "ClassifierCounters",
    "Color",
    "ColorCounts",
    "DelayHistograms",
    "DelayStats",
    "Engine",
    "EngineError",
    "IsolaneError",
    "LinkType",
    "MicroburstStats",
    "NoTenantError",
    "Outcome",
    "OutcomeCounts",
    "PacketBatch",
    "PacketsBytes",
    "PcapError",
    "PcapIterator",
    "Policy",
    "PolicyError",
    "PolicyWarning",
    "Reason",
    "Report",
    "RuleIndexError",
    "RuleTable",
    "StatsEntry",
    "Status",
    "Truncation",
    "Tunnel",
    "TunnelPortCheck",
    "UpdateReport",
    "format_addresses",
    "format_report",
    "iter_pcap",
    "open_captures",
    "parse",
    "read_pcap",
    "replay",
]

__version__ = importlib.metadata.version("isolane")
"""The installed package's version (``pyproject.toml``)."""


def iter_pcap(path: str | os.PathLike[str], batch_size: int = 65536) -> PcapIterator:
    """Stream a pcap/pcapng capture as :class:`PacketBatch` objects of at most ``batch_size``
    packets (and about 32 MiB of packet bytes), so memory stays bounded for any file size.

    The returned iterator also reports ``position`` and ``size`` (bytes) for progress bars. A
    capture cut short raises :class:`PcapError` here; :func:`open_captures` reads its complete
    packets and warns instead.
    """
    return PcapIterator(path, batch_size)

