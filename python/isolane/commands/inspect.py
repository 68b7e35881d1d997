"""Per-tenant summary of a capture: what ``isolane inspect`` prints.

A tenant here is a (tunnel, VNI) pair; packets without a tunnel form one more group. The
summary is built batch by batch from :func:`isolane.open_captures` (several captures merged
by time, standard input, compressed files), so memory stays bounded; what the reader met and
tunnels on ports not configured become warnings.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Callable, Iterable, Sequence

import numpy as np
import numpy.typing as npt

from isolane import _core
from isolane.capture import PathArg, TunnelPortCheck, open_captures
from isolane.codes import Status, Tunnel
from isolane.parsing import parse

PROTOCOL_NAMES = {1: "icmp", 2: "igmp", 6: "tcp", 17: "udp", 41: "ipv6", 47: "gre", 50: "esp", 51: "ah", 58: "icmpv6", 132: "sctp"}


@dataclasses.dataclass
class GroupSummary:
    """Counters for one tenant (tunnel, VNI) or for the untunnelled packets."""

    tunnel: Tunnel
    vni: int
    packets: int = 0
    bytes: int = 0
    first_ns: int | None = None
    last_ns: int | None = None
    protocols: Counter[str] = dataclasses.field(default_factory=Counter)
    statuses: Counter[str] = dataclasses.field(default_factory=Counter)

    @property
    def label(self) -> str:
        if self.tunnel == Tunnel.NONE:
            return "untunnelled"
        if self.vni < 0:
            return f"{self.tunnel.name.lower()} (no VNI)"
        return f"{self.tunnel.name.lower()} vni {self.vni}"

    def to_json(self) -> dict[str, object]:
        return {
            "tunnel": self.tunnel.name.lower(),
            "vni": self.vni if self.vni >= 0 else None,
            "packets": self.packets,
            "bytes": self.bytes,
            "first_ns": self.first_ns,
            "last_ns": self.last_ns,
            "protocols": dict(self.protocols.most_common()),
            "statuses": dict(self.statuses.most_common()),
        }


@dataclasses.dataclass
class CaptureSummary:
    """Per-tenant counters over one capture or several read as one; ``warnings``: what the
    reader met and tunnels on ports not configured, one sentence each."""

    paths: list[str]
    formats: list[str]
    packets: int = 0
    bytes: int = 0
    groups: dict[tuple[int, int], GroupSummary] = dataclasses.field(default_factory=dict)
    warnings: list[str] = dataclasses.field(default_factory=list)

    @property
    def path(self) -> str:
        return ", ".join(self.paths)

    @property
    def format(self) -> str:
        return self.formats[0] if len(self.formats) == 1 else "merged"

    def sorted_groups(self) -> list[GroupSummary]:
        return sorted(self.groups.values(), key=lambda g: (g.tunnel == Tunnel.NONE, g.tunnel, g.vni))

    def to_json(self) -> dict[str, object]:
        return {
            "path": self.path,
            "format": self.format,
            "files": [{"path": path, "format": format} for path, format in zip(self.paths, self.formats)],
            "packets": self.packets,
            "bytes": self.bytes,
            "groups": [g.to_json() for g in self.sorted_groups()],
            "warnings": self.warnings,
        }


def summarize(
    paths: PathArg | Sequence[PathArg],
    *,
    vxlan_ports: Iterable[int] = (_core.VXLAN_PORT,),
    geneve_ports: Iterable[int] = (_core.GENEVE_PORT,),
    batch_size: int = 65536,
    progress: Callable[[int, int], None] | None = None,
) -> CaptureSummary:
    """Read the captures at ``paths`` (``"-"``: standard input) batch by batch, merged by time,
    and count packets, bytes, time span, protocols and parse statuses per tenant.
    ``progress(bytes_read, total_size)`` is called after every batch (``total_size`` 0 when
    unknown, as for standard input)."""
    vxlan_ports, geneve_ports = list(vxlan_ports), list(geneve_ports)
    batches = open_captures(paths, batch_size)
    summary = CaptureSummary(paths=batches.paths, formats=batches.formats)
    tunnel_ports = TunnelPortCheck()
    for batch in batches:
        rows = parse(batch, vxlan_ports=vxlan_ports, geneve_ports=geneve_ports)
        _add_batch(summary, rows, batch.timestamps_ns)
        tunnel_ports.observe(rows)
        if progress is not None:
            progress(batches.position, batches.size or 0)
    summary.warnings = batches.warnings() + tunnel_ports.warnings(vxlan_ports, geneve_ports)
    return summary


def _add_batch(summary: CaptureSummary, rows: npt.NDArray[np.void], timestamps: npt.NDArray[np.int64]) -> None:
    keys = (rows["tunnel"].astype(np.int64) << 32) | (rows["vni"].astype(np.int64) & 0xFFFFFFFF)
    unique, group_of = np.unique(keys, return_inverse=True)
    wire_len = rows["wire_len"].astype(np.int64)
    packets = np.bincount(group_of, minlength=len(unique))
    sizes = np.bincount(group_of, weights=wire_len, minlength=len(unique))
    order = np.argsort(group_of, kind="stable")
    starts = np.searchsorted(group_of[order], np.arange(len(unique)))
    firsts = np.minimum.reduceat(timestamps[order], starts)
    lasts = np.maximum.reduceat(timestamps[order], starts)
    protocol_keys = np.where(rows["ip_version"] == 0, 256, rows["proto"].astype(np.int64))
    protocols = _pair_counts(group_of, protocol_keys, 257)
    statuses = _pair_counts(group_of, rows["status"].astype(np.int64), 4)
    for index, key in enumerate(unique.tolist()):
        tunnel, vni = Tunnel(key >> 32), np.int32(np.uint32(key & 0xFFFFFFFF)).item()
        group = summary.groups.setdefault((tunnel, vni), GroupSummary(tunnel=tunnel, vni=vni))
        group.packets += int(packets[index])
        group.bytes += int(sizes[index])
        first, last = int(firsts[index]), int(lasts[index])
        group.first_ns = first if group.first_ns is None else min(group.first_ns, first)
        group.last_ns = last if group.last_ns is None else max(group.last_ns, last)
        for protocol, count in protocols.get(index, {}).items():
            group.protocols[_protocol_name(protocol)] += count
        for status, count in statuses.get(index, {}).items():
            group.statuses[Status(status).name.lower()] += count
    summary.packets += len(rows)
    summary.bytes += int(wire_len.sum())


def _pair_counts(group_of: npt.NDArray[np.intp], values: npt.NDArray[np.int64], width: int) -> dict[int, dict[int, int]]:
    pairs, counts = np.unique(group_of.astype(np.int64) * width + values, return_counts=True)
    out: dict[int, dict[int, int]] = {}
    for pair, count in zip(pairs.tolist(), counts.tolist()):
        out.setdefault(pair // width, {})[pair % width] = count
    return out


def _protocol_name(protocol: int) -> str:
    if protocol == 256:
        return "non-ip"
    return PROTOCOL_NAMES.get(protocol, f"ip-proto-{protocol}")
