"""Realistic ``isolane replay --json`` reports for the tests of ``isolane.report``: a generated
multi-tenant VXLAN scenario (burst_traffic) replayed through ``isolane.commands.replay.replay``,
with the report's newer keys (``schema_version``, ``duration_ns``, ``warnings``, ``timeline``)
attached here. The timeline is computed in numpy from the same packets by
:func:`reference_timeline`, a plain reference the engine's own timeline can be tested against.

The timeline's rules, as this reference reads the report's contract:

- a packet's time is its time as enforced: its timestamp, or the latest before it if earlier;
- bin 0 starts at the first packet's time, and the bin of time ``t`` is ``(t - start) // bin_ns``;
  ``bin_ns`` is the burst window times the smallest power of two that needs at most 512 bins;
- a tenant's ``bytes``, ``packets`` and ``dropped`` count every packet of the tenant (as the
  report's tenant rows do: classifier drops included), ``bytes`` as the policy's ``count`` says;
- ``peak_bytes``: the most bytes of the tenant's packets in one window ``(t - W, t]`` ending at
  the time ``t`` of one of its packets in the bin (the burst detector's window, docs/bursts.md);
- a class's ``delay_*``: the port's queueing delays of the class's packets by the bin of their
  arrival at the port (their release by the shapers; the scenarios here shape nothing), None in
  a bin without one.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

import isolane
from isolane.codes import Outcome
from isolane.commands.replay import replay
from isolane.policy import PORT_MODES
from support.burst_reference import packet_bytes
from support.burst_traffic import VNI_BASE, Burst, make_trace, write_pcap
from support.port_reference import Port, port_queues

MAX_BINS = 512
MS = 1_000_000
DEFAULT_NAMES = ("training", "inference", "evaluation")
RDMA_PORT = 4791  # the class "collective" holds a tenant's traffic to this port
_DROPPED = np.array([Outcome(code).dropped for code in range(max(Outcome) + 1)])


@dataclasses.dataclass
class TimelinePackets:
    """The packets of a replay, one entry per packet in the order replayed."""

    time_ns: np.ndarray
    """int64 timestamps (made monotonic by :func:`reference_timeline`)."""
    tenant: np.ndarray
    """int index into the tenant names, -1 for no tenant."""
    cls: np.ndarray
    """int class id within the tenant, -1 for none."""
    bytes: np.ndarray
    """int64 bytes as the policy's ``count`` says."""
    dropped: np.ndarray
    """bool: dropped anywhere (classifier, meter, shaper, port)."""
    delay_ns: np.ndarray
    """int64 queueing delay at the port, -1 where the packet was not sent by the port."""


def timeline_bin_ns(span_ns: int, window_ns: int, max_bins: int = MAX_BINS) -> int:
    """The window times the smallest power of two whose bins cover ``span_ns`` (the last time
    minus the first) in at most ``max_bins``."""
    bin_ns = window_ns
    while span_ns // bin_ns + 1 > max_bins:
        bin_ns *= 2
    return bin_ns


def window_peaks(time_ns: np.ndarray, nbytes: np.ndarray, window_ns: int) -> np.ndarray:
    """Per packet (times sorted), the bytes of the packets with time in ``(t - W, t]``."""
    total = np.concatenate([[0], np.cumsum(nbytes, dtype=np.int64)])
    first = np.searchsorted(time_ns, time_ns - window_ns, side="right")
    last = np.searchsorted(time_ns, time_ns, side="right")
    return total[last] - total[first]  # type: ignore[no-any-return]


def _per_bin(bin_of: np.ndarray, values: np.ndarray, bins: int) -> list[int]:
    return np.bincount(bin_of, weights=values, minlength=bins).astype(np.int64).tolist()  # type: ignore[no-any-return]


def reference_timeline(
    packets: TimelinePackets, tenant_names: Sequence[str], class_names: Sequence[Sequence[str]] | None, window_ns: int
) -> dict[str, Any]:
    """The report's ``timeline`` of ``packets`` (the module's docstring says how), with a
    ``classes`` entry per class of every tenant when ``class_names`` (per tenant, None: no
    port, no delays). Tenants in the names' order, then the packets of no tenant if any."""
    time_ns = np.maximum.accumulate(np.asarray(packets.time_ns, dtype=np.int64)) if len(packets.time_ns) else np.zeros(0, np.int64)
    start = int(time_ns[0]) if len(time_ns) else 0
    span = int(time_ns[-1]) - start if len(time_ns) else 0
    bin_ns = timeline_bin_ns(span, window_ns)
    bins = span // bin_ns + 1 if len(time_ns) else 0
    bin_of = (time_ns - start) // bin_ns
    tenants = []
    present = [*range(len(tenant_names)), *([-1] if np.any(packets.tenant < 0) else [])]
    for t in present:
        mine = packets.tenant == t
        peaks = np.zeros(bins, dtype=np.int64)
        np.maximum.at(peaks, bin_of[mine], window_peaks(time_ns[mine], packets.bytes[mine], window_ns))
        tenants.append(
            {
                "tenant": tenant_names[t] if t >= 0 else None,
                "bytes": _per_bin(bin_of[mine], packets.bytes[mine], bins),
                "packets": _per_bin(bin_of[mine], np.ones(int(mine.sum())), bins),
                "dropped": _per_bin(bin_of[mine], packets.dropped[mine].astype(np.float64), bins),
                "peak_bytes": peaks.tolist(),
            }
        )
    classes = []
    for t, names in enumerate(class_names or []):
        for cls, name in enumerate(names):
            sent = (packets.tenant == t) & (packets.cls == cls) & (packets.delay_ns >= 0)
            count = np.bincount(bin_of[sent], minlength=bins)
            total = np.bincount(bin_of[sent], weights=packets.delay_ns[sent], minlength=bins)
            worst = np.full(bins, -1, dtype=np.int64)
            np.maximum.at(worst, bin_of[sent], packets.delay_ns[sent])
            classes.append(
                {
                    "tenant": tenant_names[t],
                    "cls": cls,
                    "class": name,
                    "delay_count": count.tolist(),
                    "delay_mean_ns": [float(s / n) if n else None for s, n in zip(total.tolist(), count.tolist())],
                    "delay_max_ns": [m if m >= 0 else None for m in worst.tolist()],
                }
            )
    return {"start_ns": start, "bin_ns": bin_ns, "window_ns": window_ns, "bins": bins, "tenants": tenants, "classes": classes}


def replay_packets(batch: isolane.PacketBatch, policy: isolane.Policy) -> TimelinePackets:
    """Every packet of ``batch`` through a new engine (one batch, then drain), with its port
    fate and delay from the plain port reference (tests/support/port_reference.py)."""
    engine = isolane.Engine(policy)
    rows = engine.process(batch)
    records = isolane.parse(batch)
    nbytes = packet_bytes(policy.count, records["wire_len"].astype(np.int64), records["inner_len"].astype(np.int64))
    dropped = _DROPPED[rows["outcome"]]
    delay = np.full(len(rows), -1, dtype=np.int64)
    if policy.port is not None:
        qos = policy.compile_qos()
        port = Port(qos.port_rate, qos.port_buffer, qos.port_mode == PORT_MODES["shared_fifo"], port_queues(qos))
        released = np.flatnonzero((rows["release_ns"] >= 0) & (rows["cls"] >= 0) & ~dropped)
        for i in released[np.argsort(rows["release_ns"][released], kind="stable")].tolist():
            port.arrive(int(rows["release_ns"][i]), int(nbytes[i]), qos.class_row(int(rows["tenant"][i]), int(rows["cls"][i])), i)
        port.advance(None)
        for i in released.tolist():
            if port.verdicts.get(i) is not None:
                dropped[i] = True
            elif i in port.starts:
                delay[i] = port.delay_ns(i)
    return TimelinePackets(batch.timestamps_ns.astype(np.int64), rows["tenant"].astype(np.int64), rows["cls"].astype(np.int64), nbytes, dropped, delay)


def scenario_policy(
    names: Sequence[str], *, port: bool = True, buffer: str = "64KiB", window: str = "20us"
) -> dict[str, Any]:
    """Tenant ``names[i]`` owns VNI ``VNI_BASE + i``, with a class ``collective`` (traffic to the
    RDMA port, watched for bursts above 5 Gbit/s) and a class ``bulk`` (the rest); each tenant
    is watched above 200% of its 3 Gbit/s, and the port (if any: 10 Gbit/s, more when the
    tenants' guarantees need it) above 90% of its line rate."""
    tenants = [
        {
            "name": name,
            "vnis": [VNI_BASE + i],
            "rate": "3Gbps",
            "microburst": {"window": window, "threshold": "200%"},
            "classes": [
                {"name": "collective", "priority": 1, "weight": 4, "microburst": {"window": window, "threshold": "5Gbps"}},
                {"name": "bulk", "priority": 2, "weight": 1},
            ],
            "default_class": "bulk",
            "rules": [{"name": "rdma", "dst_ports": [RDMA_PORT], "proto": "udp", "action": "allow", "class": "collective"}],
            "default": "allow",
        }
        for i, name in enumerate(names)
    ]
    policy: dict[str, Any] = {"tenants": tenants}
    if port:
        policy["port"] = {"rate": f"{max(10, 3 * len(names) + 1)}Gbps", "buffer": buffer, "microburst": {"window": window, "threshold": "90%"}}
    return policy


def default_bursts(tenants: int, duration_ns: int) -> list[Burst]:
    """All-reduce-like bursts of RDMA traffic: tenant 0 three times at 12 Gbit/s for 200 us,
    tenant 1 once at 8 Gbit/s for 1 ms (when there is one)."""
    def rdma(t: int) -> tuple[str, str, int, int, int]:
        return (f"10.{t}.9.1", f"10.{t}.9.2", 49152 + t, RDMA_PORT, 17)

    bursts = [Burst(0, rdma(0), duration_ns * k // 4, 200_000, 12_000_000_000) for k in (1, 2, 3)]
    if tenants > 1:
        bursts.append(Burst(1, rdma(1), duration_ns * 3 // 5, MS, 8_000_000_000))
    return bursts


def report_for(capture: Path, policy_dict: dict[str, Any]) -> dict[str, Any]:
    """``capture`` replayed through the policy: the report's JSON dict."""
    return replay(capture, isolane.Policy.from_dict(policy_dict)).to_json()


def reference_for(capture: Path, policy_dict: dict[str, Any], window_ns: int) -> dict[str, Any]:
    """The timeline of ``capture`` through the policy as :func:`reference_timeline` computes it."""
    policy = isolane.Policy.from_dict(policy_dict)
    class_names = [t.class_names for t in policy.tenants] if policy.port is not None else None
    return reference_timeline(replay_packets(isolane.read_pcap(capture), policy), policy.tenant_names, class_names, window_ns)


def scenario_report(
    directory: Path,
    names: Sequence[str] = DEFAULT_NAMES,
    *,
    duration_ns: int = 20 * MS,
    background_bps: int = 1_000_000_000,
    bursts: Sequence[Burst] | None = None,
    port: bool = True,
    seed: int = 7,
) -> dict[str, Any]:
    """A report of ``names`` sharing a port (``port=False``: none), each sending Poisson
    background traffic at ``background_bps`` for ``duration_ns``, with ``bursts`` (by default
    :func:`default_bursts`)."""
    chosen = default_bursts(len(names), duration_ns) if bursts is None else list(bursts)
    trace = make_trace(seed, len(names), duration_ns, background_bps, chosen, frame_bytes=[200, 1500], flows_per_tenant=8)
    write_pcap(trace, directory / "scenario.pcap")
    return report_for(directory / "scenario.pcap", scenario_policy(names, port=port))
