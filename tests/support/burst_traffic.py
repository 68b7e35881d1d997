"""Seeded multi-tenant VXLAN traffic with injected microbursts, made with numpy, for the burst
tests. Each packet is outer Ethernet / IPv4 / UDP 4789 / VXLAN (the tenant's VNI) / inner
Ethernet / IPv4 / UDP or TCP with its flow's 5-tuple. Frames are ``frame_bytes`` long on the wire
(at least 114: a 64-byte inner frame); the capture holds their first 114 bytes (every header),
as a capture with a snap length does, so a million packets take ~114 MB.

Background traffic is Poisson per tenant (exponential gaps; ``smooth=True``: evenly spaced) over
``flows_per_tenant`` flows; each ``Burst`` adds one flow's packets evenly spaced at its rate.
Times in ``Burst`` are offsets from the trace's ``start_ns``.
"""

from __future__ import annotations

import ipaddress
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

import isolane

SNAP = 114  # captured bytes per packet: 50 B of tunnel + a minimal 64 B inner frame
MIN_FRAME = SNAP
DEFAULT_START_NS = 1_700_000_000_000_000_000  # a whole second, so poll intervals line up
VNI_BASE = 5000  # tenant t has VNI VNI_BASE + t
_O_IP, _O_UDP, _VX, _I_ETH, _I_IP, _L4 = 14, 34, 42, 50, 64, 84

Flow = tuple[str, str, int, int, int]  # src, dst, sport, dport, proto (6 or 17)


@dataclass(frozen=True)
class Burst:
    """One flow of ``tenant`` sending ``frame_bytes`` frames at ``rate_bps`` for ``duration_ns``
    from ``start_ns`` (offset from the trace's start)."""

    tenant: int
    flow: Flow
    start_ns: int
    duration_ns: int
    rate_bps: int
    frame_bytes: int = 1500


@dataclass
class Trace:
    batch: isolane.PacketBatch
    timestamps_ns: np.ndarray  # int64, sorted
    tenant: np.ndarray  # int32 tenant index per packet
    flow: np.ndarray  # int32 index into ``flows`` per packet
    burst: np.ndarray  # int32 index into ``bursts`` per packet, -1 for background
    wire_len: np.ndarray  # uint32
    flows: list[Flow]
    vnis: list[int]  # per tenant
    bursts: list[Burst]
    start_ns: int

    def __len__(self) -> int:
        return len(self.timestamps_ns)


def _template() -> np.ndarray:
    t = np.zeros(SNAP, dtype=np.uint8)
    t[0:14] = [2, 0, 0x5E, 0, 0, 1, 2, 0, 0xAC, 0x10, 0, 0, 8, 0]  # outer Ethernet, IPv4
    t[_O_IP : _O_IP + 10] = [0x45, 0, 0, 0, 0, 0, 0x40, 0, 64, 17]  # DF, TTL 64, UDP
    t[_O_UDP + 2 : _O_UDP + 4] = [0x12, 0xB5]  # dst 4789
    t[_VX] = 0x08  # VXLAN I flag
    t[_I_ETH : _I_ETH + 14] = [2, 1, 0, 0, 0, 1, 2, 2, 0, 0, 0, 1, 8, 0]
    t[_I_IP : _I_IP + 9] = [0x45, 0, 0, 0, 0, 0, 0, 0, 64]
    return t


_TEMPLATE = _template()


def _put(rows: np.ndarray, offset: int, values: Any, size: int) -> None:
    """Write ``values`` (one per row, or one for all) big-endian into ``size`` bytes at ``offset``."""
    v = np.broadcast_to(np.asarray(values, dtype=np.uint64), (len(rows),)).astype(">u8")
    rows[:, offset : offset + size] = v.view(np.uint8).reshape(-1, 8)[:, 8 - size :]


def _ipv4_checksums(rows: np.ndarray, offset: int) -> None:
    s = np.ascontiguousarray(rows[:, offset : offset + 20]).view(">u2").sum(axis=1, dtype=np.uint32)
    s = (s & 0xFFFF) + (s >> 16)
    s = (s & 0xFFFF) + (s >> 16)
    _put(rows, offset + 10, ~s & 0xFFFF, 2)


def _ip(text: str) -> int:
    return int(ipaddress.IPv4Address(text))


def _background_flows(rng: np.random.Generator, tenants: int, per_tenant: int) -> list[Flow]:
    n = tenants * per_tenant
    owner = np.repeat(np.arange(tenants), per_tenant)
    src = (10 << 24) | ((owner & 0xFF) << 16) | rng.integers(1, 1 << 16, n)
    dst = (11 << 24) | ((owner & 0xFF) << 16) | rng.integers(1, 1 << 16, n)
    sport = rng.integers(1024, 65536, n)
    dport = rng.choice([80, 443, 4791, 5001, 9000], n)
    proto = rng.choice([6, 17], n)
    return [
        (str(ipaddress.IPv4Address(int(a))), str(ipaddress.IPv4Address(int(b))), int(c), int(d), int(e))
        for a, b, c, d, e in zip(src, dst, sport, dport, proto)
    ]


def _arrivals(rng: np.random.Generator, duration: int, gap: float, smooth: bool) -> np.ndarray:
    """Offsets in [0, duration): Poisson with mean gap ``gap``, or evenly spaced from a random phase."""
    if smooth:
        times = np.floor(rng.uniform(0, gap) + np.arange(int(duration / gap) + 1) * gap).astype(np.int64)
        return times[times < duration]
    expected = duration / gap
    times = np.cumsum(rng.exponential(gap, int(expected + 8 * expected**0.5 + 16)))
    while times[-1] < duration:  # (practically never) not enough draws
        times = np.concatenate([times, times[-1] + np.cumsum(rng.exponential(gap, len(times)))])
    return np.floor(times[times < duration]).astype(np.int64)


def make_trace(
    seed: int,
    tenants: int,
    duration_ns: int,
    background_bps_per_tenant: int,
    bursts: Sequence[Burst] = (),
    *,
    flows_per_tenant: int = 16,
    frame_bytes: int | Sequence[int] = 1500,
    smooth: bool = False,
    start_ns: int = DEFAULT_START_NS,
) -> Trace:
    """The trace's packets sorted by time (ties: background first, then bursts in order)."""
    rng = np.random.default_rng(seed)
    sizes = np.atleast_1d(np.asarray(frame_bytes, dtype=np.int64))
    if sizes.min() < MIN_FRAME or min((b.frame_bytes for b in bursts), default=MIN_FRAME) < MIN_FRAME:
        raise ValueError(f"frames are at least {MIN_FRAME} bytes (a 64-byte inner frame in VXLAN)")
    flows = _background_flows(rng, tenants, flows_per_tenant)
    parts: list[tuple[np.ndarray, ...]] = []  # (offsets, tenant, flow, burst, wire_len)
    gap = float(sizes.mean()) * 8e9 / background_bps_per_tenant if background_bps_per_tenant else 0.0
    for t in range(tenants if gap else 0):
        times = _arrivals(rng, duration_ns, gap, smooth)
        n = len(times)
        flow = t * flows_per_tenant + rng.integers(0, flows_per_tenant, n)
        parts.append((times, np.full(n, t), flow, np.full(n, -1), rng.choice(sizes, n)))
    for i, b in enumerate(bursts):
        if not 0 <= b.tenant < tenants or b.flow[4] not in (6, 17):
            raise ValueError(f"bursts[{i}]: tenant out of range or protocol not TCP/UDP")
        bgap = b.frame_bytes * 8e9 / b.rate_bps
        times = b.start_ns + np.floor(np.arange(int(np.ceil(b.duration_ns / bgap))) * bgap).astype(np.int64)
        n = len(times)
        flows.append(b.flow)
        parts.append((times, np.full(n, b.tenant), np.full(n, len(flows) - 1), np.full(n, i), np.full(n, b.frame_bytes)))
    offsets, tenant, flow, burst, wire = (np.concatenate([p[k] for p in parts]) for k in range(5))
    order = np.argsort(offsets, kind="stable")
    tenant, flow, burst = tenant[order].astype(np.int32), flow[order].astype(np.int32), burst[order].astype(np.int32)
    wire = wire[order].astype(np.uint32)
    timestamps = offsets[order] + np.int64(start_ns)
    vnis = [VNI_BASE + t for t in range(tenants)]
    batch = isolane.PacketBatch.from_arrays(
        _frames(flows, flow, tenant, wire, vnis).reshape(-1),
        np.arange(len(order), dtype=np.uint64) * np.uint64(SNAP),
        np.full(len(order), SNAP, dtype=np.uint32),
        timestamps,
        wire,
    )
    return Trace(batch, timestamps, tenant, flow, burst, wire, flows, vnis, list(bursts), start_ns)


def _frames(flows: list[Flow], flow: np.ndarray, tenant: np.ndarray, wire: np.ndarray, vnis: list[int]) -> np.ndarray:
    """(n, SNAP) captured bytes: the template with every per-packet field patched."""
    table = np.array([(_ip(s), _ip(d), sp, dp, p) for s, d, sp, dp, p in flows], dtype=np.uint64).reshape(-1, 5)
    src, dst, sport, dport, proto = (table[flow, k] for k in range(5))
    n, wire64 = len(flow), wire.astype(np.uint64)
    rows = np.empty((n, SNAP), dtype=np.uint8)
    rows[:] = _TEMPLATE
    ident = np.arange(n, dtype=np.uint64) & np.uint64(0xFFFF)
    # outer: the tenant's VTEP 172.16.x.y -> 172.16.255.254, UDP source port from the flow (entropy)
    _put(rows, 10, tenant, 2)
    _put(rows, _O_IP + 2, wire64 - 14, 2)
    _put(rows, _O_IP + 4, ident, 2)
    _put(rows, _O_IP + 12, 0xAC100001 + tenant.astype(np.uint64), 4)
    _put(rows, _O_IP + 16, 0xAC10FFFE, 4)
    _put(rows, _O_UDP, 49152 + (flow.astype(np.uint64) * 2654435761 % 16384), 2)
    _put(rows, _O_UDP + 4, wire64 - 34, 2)
    _put(rows, _VX + 4, np.asarray(vnis, dtype=np.uint64)[tenant], 3)
    # inner IPv4 and L4 (UDP: length, checksum 0 = none; TCP: data offset 5, ACK)
    _put(rows, _I_IP + 2, wire64 - 64, 2)
    _put(rows, _I_IP + 4, ident, 2)
    rows[:, _I_IP + 9] = proto
    _put(rows, _I_IP + 12, src, 4)
    _put(rows, _I_IP + 16, dst, 4)
    _put(rows, _L4, sport, 2)
    _put(rows, _L4 + 2, dport, 2)
    udp = proto == 17  # UDP rows get their length at +4; TCP rows data offset, flags, window at +12
    _put(rows, _L4 + 4, np.where(udp, wire64 - 84, 0), 2)
    _put(rows, _L4 + 12, np.where(udp, 0, 0x5010FFFF), 4)
    _ipv4_checksums(rows, _O_IP)
    _ipv4_checksums(rows, _I_IP)
    return rows


def policy_for(
    trace_or_tenants: Trace | int,
    window: str | int | None = "10us",
    threshold: str | int | None = "10Gbps",
    *,
    rate: str | None = None,
    port: dict[str, Any] | None = None,
    classes: list[dict[str, Any]] | None = None,
    meter: dict[str, Any] | None = None,
    count: str | None = None,
) -> dict[str, Any]:
    """A policy dict for ``isolane.Policy.from_dict``: tenant ``t{i}`` owns VNI ``VNI_BASE + i``
    and, unless ``window`` is None, has ``microburst: {window, threshold}`` (ints are ns and
    bit/s; a percentage threshold needs ``rate``). ``port``, ``classes``, ``meter`` and
    ``count`` are copied in as given (``port`` may carry its own ``microburst``)."""
    n = len(trace_or_tenants.vnis) if isinstance(trace_or_tenants, Trace) else trace_or_tenants
    tenants = []
    for t in range(n):
        tenant: dict[str, Any] = {"name": f"t{t}", "vnis": [VNI_BASE + t]}
        if rate is not None:
            tenant["rate"] = rate
        if meter is not None:
            tenant["meter"] = dict(meter)
        if classes is not None:
            tenant["classes"] = [dict(c) for c in classes]
        if window is not None:
            tenant["microburst"] = {
                "window": f"{window}ns" if isinstance(window, int) else window,
                "threshold": f"{threshold}bps" if isinstance(threshold, int) else threshold,
            }
        tenants.append(tenant)
    policy: dict[str, Any] = {"tenants": tenants}
    if port is not None:
        policy["port"] = dict(port)
    if count is not None:
        policy["count"] = count
    return policy


def write_pcap(trace: Trace, path: Any) -> None:
    """A classic pcap with nanosecond timestamps (snap length SNAP)."""
    n, ts = len(trace), trace.timestamps_ns
    header = np.zeros(n, dtype=[("sec", "<u4"), ("nsec", "<u4"), ("incl", "<u4"), ("orig", "<u4")])
    header["sec"], header["nsec"], header["incl"], header["orig"] = ts // 10**9, ts % 10**9, SNAP, trace.wire_len
    records = np.empty((n, 16 + SNAP), dtype=np.uint8)
    records[:, :16] = header.view(np.uint8).reshape(n, 16)
    records[:, 16:] = np.asarray(trace.batch.data).reshape(n, SNAP)
    with open(path, "wb") as f:
        f.write(struct.pack("<IHHiIII", 0xA1B23C4D, 2, 4, 0, 0, SNAP, 1))
        f.write(records.tobytes())
