"""An AI cluster's traffic as numpy arrays of :data:`~isolane.gen.frames.PACKET_DTYPE`, one
function a workload: ring all-reduce bursts (RoCEv2), inference requests and responses (TCP,
Poisson arrivals), checkpoint writes (TCP, full segments) and BFD control sessions. Each takes
the tenant, its times in ns and a ``numpy.random.Generator`` where it draws anything, so that a
seed decides everything."""

from __future__ import annotations

import dataclasses

import numpy as np
import numpy.typing as npt

from isolane.gen.frames import PACKET_DTYPE
from isolane.gen.templates import BFD, INNER_ETH, ROCE, TCP, TRANSPORT

ROCE_MTU = 4096
"""RoCE payload per packet (the IB MTU NICs use on a 9000-byte network)."""
TCP_MSS = 8910
"""TCP payload per full segment: a 9000-byte underlay less VXLAN's 50 bytes, IPv4 and TCP's 40."""
ROCE_HEADERS = TRANSPORT - INNER_ETH + 8 + 12 + 4  # Ethernet, IPv4, UDP, BTH, ICRC
TCP_HEADERS = TRANSPORT - INNER_ETH + 20
SEND_FIRST, SEND_MIDDLE, SEND_LAST, SEND_ONLY = 0x00, 0x01, 0x02, 0x04
"""InfiniBand RC opcodes (BTH) of a message's packets."""
TCP_ACK, TCP_PSH_ACK = 0x10, 0x18
DSCP_AF41, DSCP_CS6, DSCP_AF21 = 34, 48, 18
Ints = npt.NDArray[np.int64]


MAX_TENANT_NUMBER = 4095
"""Tenants are numbered 1 to this: their tunnel endpoints' addresses stay in 172.16.0.0/12."""


@dataclasses.dataclass(frozen=True)
class Tenant:
    """A tenant's addresses: its VNI, its hosts ``10.0.<number>.<host>`` behind tunnel
    endpoints ``172.16.<number>.<host>`` (numbers above 255 carry into the second octet)."""

    name: str
    number: int
    vni: int

    def host(self, host: npt.ArrayLike) -> npt.NDArray[np.uint32]:
        return np.uint32((10 << 24) | (self.number << 8)) + np.asarray(host, dtype=np.uint32)

    def vtep(self, host: npt.ArrayLike) -> npt.NDArray[np.uint32]:
        return np.uint32((172 << 24) | (16 << 16) + (self.number << 8)) + np.asarray(host, dtype=np.uint32)

    @property
    def subnet(self) -> str:
        return f"10.{self.number >> 8}.{self.number & 255}.0/24"


def wire_ns(frame_len: npt.ArrayLike, rate_bps: float) -> npt.NDArray[np.float64]:
    """Time a frame of the tenant's ``frame_len`` takes on a link of ``rate_bps``, with VXLAN's
    50 bytes and Ethernet's 20 of preamble and gap."""
    return (np.asarray(frame_len, dtype=np.float64) + 70) * 8e9 / rate_bps


def all_reduce(
    tenant: Tenant, starts_ns: npt.ArrayLike, *, flows: int, message_bytes: int, flow_rate_bps: float, rng: np.random.Generator, first_qp: int = 0x11
) -> npt.NDArray[np.void]:
    """Ring all-reduce steps: at each start, ``flows`` ring neighbours (host k+1 to host k+2)
    each send one ``message_bytes`` RDMA SEND at ``flow_rate_bps``, starting within 200 ns of
    each other. PSNs run on across steps, per queue pair."""
    starts = np.asarray(starts_ns, dtype=np.int64)
    per_message = -(-message_bytes // ROCE_MTU)
    payload = np.full(per_message, ROCE_MTU)
    payload[-1] = message_bytes - ROCE_MTU * (per_message - 1)
    gaps = wire_ns(payload + ROCE_HEADERS, flow_rate_bps)
    offsets = np.concatenate(([0.0], np.cumsum(gaps)[:-1]))
    jitter = rng.integers(0, 200, size=(len(starts), flows, 1))
    times = starts[:, None, None] + jitter + offsets.astype(np.int64)[None, None, :]
    out = np.zeros(times.shape, dtype=PACKET_DTYPE)
    flow = np.arange(flows)[None, :, None]
    sender, receiver = flow + 1, (flow + 1) % max(flows, 2) + 1  # the ring's next host
    out["time_ns"] = times
    out["kind"] = ROCE
    out["dscp"] = DSCP_AF41
    out["src"], out["dst"] = tenant.host(sender), tenant.host(receiver)
    out["outer_src"], out["outer_dst"] = tenant.vtep(sender), tenant.vtep(receiver)
    out["src_port"] = 49152 + ((first_qp + flow) * 2654435761 % 16384)  # RoCEv2: a source port per QP
    out["dst_port"] = 4791
    out["frame_len"] = payload + ROCE_HEADERS
    out["qpn"] = first_qp + flow
    step = np.arange(len(starts))[:, None, None]
    out["seq"] = (rng.integers(0, 1 << 24, size=(1, flows, 1)) + step * per_message + np.arange(per_message)) & 0xFFFFFF
    out["opcode"] = np.where(per_message == 1, SEND_ONLY, SEND_MIDDLE)
    if per_message > 1:
        out["opcode"][..., 0], out["opcode"][..., -1] = SEND_FIRST, SEND_LAST
    return _tagged(out.reshape(-1), tenant)


def inference(
    tenant: Tenant,
    start_ns: int,
    end_ns: int,
    *,
    requests_per_s: float,
    request_bytes: int,
    response_bytes: int,
    server_rate_bps: float,
    rng: np.random.Generator,
) -> npt.NDArray[np.void]:
    """Model serving: requests arrive as a Poisson process from 16 clients (hosts 101-116) at 4
    servers (hosts 11-14, port 8001), each one segment of about ``request_bytes``; each response
    follows 20-100 µs later, about ``response_bytes`` (exponential) in full segments sent at
    ``server_rate_bps``. One TCP connection per client and server, its sequence numbers running
    on."""
    count = rng.poisson(requests_per_s * (end_ns - start_ns) / 1e9)
    arrivals = np.sort(rng.integers(start_ns, end_ns, size=count))
    client, server = rng.integers(101, 117, size=count), rng.integers(11, 15, size=count)
    request = np.minimum(rng.integers(request_bytes // 2, request_bytes * 3 // 2, size=count), TCP_MSS)
    response = np.maximum(rng.exponential(response_bytes, size=count).astype(np.int64), 64)
    replies = arrivals + rng.integers(20_000, 100_000, size=count)
    segments = -(-response // TCP_MSS)
    owner = np.repeat(np.arange(count), segments)
    index = np.arange(len(owner)) - np.repeat(np.cumsum(segments) - segments, segments)
    sizes = np.where(index < segments[owner] - 1, TCP_MSS, response[owner] - TCP_MSS * (segments[owner] - 1))
    times = replies[owner] + (index * wire_ns(TCP_MSS + TCP_HEADERS, server_rate_bps)).astype(np.int64)
    connection = client * 64 + server
    asks = _tcp(tenant, arrivals, client, server, 8001, request, connection, TCP_PSH_ACK)
    answers = _tcp(tenant, times, server[owner], client[owner], None, sizes, connection[owner], TCP_ACK)
    answers["src_port"], answers["dst_port"] = 8001, asks["src_port"][owner]
    _sequence(asks, answers, connection, connection[owner], request, sizes)
    return _tagged(np.concatenate([asks, answers]), tenant)


def checkpoint(
    tenant: Tenant, start_ns: int, end_ns: int, *, rate_bps: float, rng: np.random.Generator, host: int = 1, storage: int = 200
) -> npt.NDArray[np.void]:
    """A checkpoint written to a storage host (port 9000) over one TCP connection: full
    segments at ``rate_bps``, sequence numbers advancing by the segment."""
    gap = float(wire_ns(TCP_MSS + TCP_HEADERS, rate_bps))
    times = np.arange(start_ns, end_ns, gap).astype(np.int64)
    sizes = np.full(len(times), TCP_MSS)
    out = _tcp(tenant, times, np.full(len(times), host), np.full(len(times), storage), 9000, sizes, np.zeros(len(times), np.int64), TCP_ACK)
    out["seq"] = (rng.integers(0, 1 << 32, dtype=np.uint64) + np.arange(len(times), dtype=np.uint64) * TCP_MSS) & 0xFFFFFFFF
    out["ack"] = rng.integers(0, 1 << 32, dtype=np.uint64)
    return _tagged(out, tenant)


def control(tenant: Tenant, start_ns: int, end_ns: int, *, sessions: int, interval_ns: int, rng: np.random.Generator) -> npt.NDArray[np.void]:
    """BFD sessions (RFC 5880) between the tenant's hosts: one packet each ``interval_ns`` per
    session, jittered by up to 25% as the RFC asks."""
    per_session = max(int((end_ns - start_ns) // interval_ns), 1)
    times = start_ns + rng.integers(0, interval_ns, size=(sessions, 1)) + np.arange(per_session) * interval_ns
    times -= rng.integers(0, interval_ns // 4, size=times.shape)
    out = np.zeros(times.shape, dtype=PACKET_DTYPE)
    session = np.arange(sessions)[:, None]
    out["time_ns"] = np.clip(times, start_ns, end_ns - 1)
    out["kind"] = BFD
    out["dscp"] = DSCP_CS6
    out["src"], out["dst"] = tenant.host(session + 1), tenant.host(session + 2)
    out["outer_src"], out["outer_dst"] = tenant.vtep(session + 1), tenant.vtep(session + 2)
    out["src_port"], out["dst_port"] = 49152 + session, 3784
    out["frame_len"] = TRANSPORT - INNER_ETH + 8 + 24
    out["seq"] = 0x1000 + session  # my discriminator
    return _tagged(out.reshape(-1), tenant)


def merge(*parts: npt.NDArray[np.void]) -> npt.NDArray[np.void]:
    """Packets of several workloads in time order (ties in the order given)."""
    packets = np.concatenate(parts)
    return packets[np.argsort(packets["time_ns"], kind="stable")]


def _tcp(tenant: Tenant, times: Ints, src: Ints, dst: Ints, dst_port: int | None, payload: Ints, connection: Ints, flags: int) -> npt.NDArray[np.void]:
    """TCP segments of ``payload`` bytes from host ``src`` to ``dst``, the client's port from
    its ``connection``; sequence numbers are the caller's."""
    out = np.zeros(len(times), dtype=PACKET_DTYPE)
    out["time_ns"] = times
    out["kind"] = TCP
    out["dscp"] = DSCP_AF21
    out["src"], out["dst"] = tenant.host(src), tenant.host(dst)
    out["outer_src"], out["outer_dst"] = tenant.vtep(src), tenant.vtep(dst)
    out["src_port"] = 32768 + (connection * 7919 % 28000)
    if dst_port is not None:
        out["dst_port"] = dst_port
    out["frame_len"] = payload + TCP_HEADERS
    out["opcode"] = flags
    return out


def _sequence(
    asks: npt.NDArray[np.void],
    answers: npt.NDArray[np.void],
    ask_conn: Ints,
    answer_conn: Ints,
    ask_bytes: Ints,
    answer_bytes: Ints,
) -> None:
    """Sequence numbers of both directions of each connection, in time order, and each
    segment's acknowledgement: what the other side had sent before it."""
    origin = int(np.concatenate([asks["time_ns"], answers["time_ns"]]).min(initial=np.iinfo(np.int64).max))
    for side, other, conn, sizes, other_conn, other_sizes, salt in (
        (asks, answers, ask_conn, ask_bytes, answer_conn, answer_bytes, 0),
        (answers, asks, answer_conn, answer_bytes, ask_conn, ask_bytes, 1),
    ):
        side["seq"] = (_initial_sequence(conn, salt) + _sent_before(conn, side["time_ns"], sizes)) & 0xFFFFFFFF
        acknowledged = _acknowledged(conn, side["time_ns"] - origin, other_conn, other["time_ns"] - origin, other_sizes)
        side["ack"] = (_initial_sequence(conn, 1 - salt) + acknowledged) & 0xFFFFFFFF


def _initial_sequence(conn: Ints, side: int) -> npt.NDArray[np.uint64]:
    """A connection's initial sequence number on one side (0: the client's, 1: the server's)."""
    return (conn.astype(np.uint64) * np.uint64(0x9E3779B1) + np.uint64(side * 0x5BD1E995)) & np.uint64(0xFFFFFFFF)


def _sent_before(conn: Ints, times: Ints, sizes: Ints) -> npt.NDArray[np.uint64]:
    """Bytes each segment's connection sent before it, in time order."""
    order = np.lexsort((times, conn))
    totals = np.cumsum(sizes[order])
    starts = np.r_[True, conn[order][1:] != conn[order][:-1]]
    group_base = np.maximum.accumulate(np.where(starts, totals - sizes[order], 0))
    out = np.empty(len(conn), dtype=np.uint64)
    out[order] = totals - sizes[order] - group_base
    return out


def _acknowledged(
    conn: Ints,
    times: Ints,
    other_conn: Ints,
    other_times: Ints,
    other_sizes: Ints,
) -> npt.NDArray[np.uint64]:
    """Bytes the other side of each segment's connection had sent before the segment (times
    counted from the first packet)."""
    keys = other_conn.astype(np.int64) << 40 | other_times  # times from the first packet: under 2**40 ns
    order = np.argsort(keys, kind="stable")
    sent = _sent_before(other_conn, other_times, other_sizes)[order] + other_sizes[order]
    place = np.searchsorted(keys[order], conn.astype(np.int64) << 40 | times) - 1
    valid = (place >= 0) & (other_conn[order][np.maximum(place, 0)] == conn)
    return np.where(valid, sent[np.maximum(place, 0)], 0).astype(np.uint64)


def _tagged(packets: npt.NDArray[np.void], tenant: Tenant) -> npt.NDArray[np.void]:
    packets["vni"] = tenant.vni
    return packets
