"""Microburst detection (docs/bursts.md): what it costs in the whole pipeline, and what it finds
in a capture beside what a user has today.

    python -m pytest bench/test_burst_bench.py -q -s -p no:cacheprovider -m "not slow"  # ~20-40 s
    python -m pytest bench/test_burst_bench.py -q -s -p no:cacheprovider -m slow        # 1M packets, minutes

**Detection cost.** bench/test_qos_bench.py's one-core pipeline (its traffic, policy and timing:
`Engine.process(batch)` on 1,000,000 VXLAN packets of 1,000 tenants, each metered and shaped,
a fresh engine each run), timed with and without a tenant-level ``microburst`` setting on every
tenant, at a 1 us and a 10 us window, each run with detection next to one without (their order
alternating), best of ``ROUNDS``. Two thresholds per window: one whose limit is 125 bytes a
window (1 Gbit/s over 1 us, 100 Mbit/s over 10 us), so that a tenant bursts when two of its
114-byte packets fall in one window (a few thousand events at 1 us, a few tens of thousands at
10 us: some, not constantly), and 150 % of each tenant's metered rate (CIR), which these
tenants (3.3 Mbit/s each) exceed with any one packet at microsecond windows, so that every
packet opens an event: the most the events can cost. One more run, the first 10 us setting
with the polled views at 1 s only, shows what the default polling intervals (down to 1 ms)
add. The issue's targets (at most 5 ns a packet
over the pipeline without detection; the pipeline with it at least 20 Mpps on one core) are
printed, not asserted on wall-clock; the gate is relative (with detection at most
``MAX_SLOWDOWN`` times without, the two 125-byte settings) and the rows must be the same.

**Finding bursts in a capture.** ``tests/support/burst_traffic.py`` makes 50 tenants' VXLAN traffic,
each tenant sending an evenly spaced 2 Gbit/s of 1500-byte frames (so no window of the
background alone is over the threshold) plus injected bursts of four shapes, one flow each, at
random instants: "spike" 2 us at 40 Gbit/s (7 frames), "short" 8 us at 12 Gbit/s (8 frames),
"edge" 6 us at 10 Gbit/s (5 frames), "long" 200 us at 10 Gbit/s. Each tenant's ``rate`` is
4 Gbit/s and its threshold 150 % of it (6 Gbit/s: 7,500 bytes per 10 us window). The capture
(`write_pcap`, 114 bytes of each frame, wire lengths in the records) goes to each finder in
the same run: isolane (``Engine(policy).process(read_pcap(path)); drain(); bursts()``), the
numpy binning script of bench/burst_peers.py (dpkt to read, numpy to bin per tenant at the same
10 us and limit; also run on ``isolane.parse``'s records, the same script with a fast reader),
and ``tshark -z io,stat,0.00001`` (the port's frames and bytes per 10 us, no tenants; skipped
with the reason when tshark is not installed). Each finder's alarms are judged against the
injected bursts: found, missed, split (a burst covered by more than one alarm, also after
joining a tenant's alarms less than a window apart, as a user reading them would), false alarms.
The default capture has 250,000 packets; the ``slow`` one ~1,000,000 (tshark's io,stat takes
minutes there: its cost grows with intervals x packets).

Environment: ``ISOLANE_BENCH_BURST_ROUNDS`` (5), ``ISOLANE_BENCH_MAX_BURST_SLOWDOWN`` (see
``MAX_SLOWDOWN``), ``ISOLANE_BENCH_BURST_PACKETS`` (250000: the default capture's size).
"""

from __future__ import annotations

import ipaddress
import os
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

import burst_peers
import isolane
import test_qos_bench as qos
from machine_load import ForeignLoad
from support import burst_traffic


def _env(name: str, default: float) -> float:
    value = os.environ.get(name, "").replace("_", "")
    return float(value) if value else default


ROUNDS = int(_env("ISOLANE_BENCH_BURST_ROUNDS", 5))
# With detection (the two 125-byte settings) at most this many times the pipeline without it.
# The 5 ns would be ~1.1x; the 2-vCPU VM measures 1.4x (1 us) and 1.8x (10 us, where
# 3% of packets open an event), so this gate catches a detector gone badly wrong, not the
# target (the target is printed as met or not met, and recorded in bench/RESULTS.md).
MAX_SLOWDOWN = _env("ISOLANE_BENCH_MAX_BURST_SLOWDOWN", 2.5)
TARGET_EXTRA_NS = 5.0
TARGET_MPPS = 20.0
PACKETS = qos.PACKETS

# The capture of the side-by-side.
CAPTURE_PACKETS = int(_env("ISOLANE_BENCH_BURST_PACKETS", 250_000))
TENANTS = 50
TENANT_RATE = "4Gbps"
THRESHOLD = "150%"
WINDOW_NS = 10_000
LIMIT_BYTES = 6_000_000_000 * WINDOW_NS // 8_000_000_000  # 150 % of 4 Gbit/s over the window: 7,500 B
BACKGROUND_BPS = 2_000_000_000
FRAME = 1500
SLOT_NS = 3_750_000  # one burst per tenant per slot
KINDS = (("spike", 2_000, 40_000_000_000), ("short", 8_000, 12_000_000_000), ("edge", 6_000, 10_000_000_000), ("long", 200_000, 10_000_000_000))
SEED = 29
ISOLANE_ROUNDS = 3

# The closing table: metric -> "isolane | peer | peer/isolane", filled by the tests.
TABLE_NAME = "bursts: isolane beside its peers"
TABLE_KEY = 58


def _table(bench_report: dict, metric: str, ours: str, peer: str, ratio: str = "") -> None:
    """A row of the closing table (keys padded alike: the summary prints key, then value)."""
    table = bench_report.setdefault(TABLE_NAME, {f"{'metric':<{TABLE_KEY}}": f"{'isolane':>14} | {'peer':>14} | peer / isolane"})
    table[f"{metric:<{TABLE_KEY}}"] = f"{ours:>14} | {peer:>14} | {ratio}"


# ---------------------------------------------------------------------------------------------
# what detection costs in the pipeline


@dataclass(frozen=True)
class _Setting:
    label: str
    window: str
    threshold: str
    gated: bool  # "some bursts, not constantly": gated; every packet an event: printed only
    poll: tuple[str, ...] | None = None  # the engine's polling intervals; None: its default


def _settings(cir_bytes_per_s: int) -> list[_Setting]:
    over_cir = f"{cir_bytes_per_s * 8 * 3 // 2}bps"
    return [
        _Setting("1us, 1Gbps", "1us", "1Gbps", True),
        _Setting("10us, 100Mbps", "10us", "100Mbps", True),
        _Setting("1us, 150% CIR", "1us", over_cir, False),
        _Setting("10us, 150% CIR", "10us", over_cir, False),
        # What the polled views cost: the default's finest interval (1 ms) rolls over every few
        # packets of a tenant here; with 1 s only it almost never does.
        _Setting("10us, 100Mbps, poll=1s", "10us", "100Mbps", False, ("1s",)),
    ]


def _with_microburst(policy: isolane.Policy, window: str, threshold: str) -> isolane.Policy:
    data = policy.to_dict()
    for tenant in data["tenants"]:
        tenant["microburst"] = {"window": window, "threshold": threshold}
    return isolane.Policy.from_dict(data)


def _timed_process(policy: isolane.Policy, batch: isolane.PacketBatch, poll: tuple[str, ...] | None = None) -> tuple[float, isolane.Engine, np.ndarray]:
    engine = isolane.Engine(policy) if poll is None else isolane.Engine(policy, poll=poll)
    start = time.perf_counter()
    rows = engine.process(batch)
    return time.perf_counter() - start, engine, rows


def test_detection_cost_in_the_one_core_pipeline_with_1000_tenants(bench_report) -> None:
    flows = qos._pipeline_traffic()
    batch, plain, tenant_count = qos._vxlan_pipeline(flows)
    settings = _settings(qos._pipeline_rate(flows))
    policies = {s.label: _with_microburst(plain, s.window, s.threshold) for s in settings}
    _, _, plain_rows = _timed_process(plain, batch)  # warms up; the rows every run must give
    with_s: dict[str, list[float]] = {s.label: [] for s in settings}
    without_s: dict[str, list[float]] = {s.label: [] for s in settings}
    events, drain_s, same_rows = {}, {}, {}
    with ForeignLoad() as load:
        for round_ in range(ROUNDS):
            for setting in settings:
                for detect in (False, True) if round_ % 2 == 0 else (True, False):
                    seconds, engine, rows = _timed_process(policies[setting.label], batch, setting.poll) if detect else _timed_process(plain, batch)
                    (with_s if detect else without_s)[setting.label].append(seconds)
                    if detect and round_ == 0:
                        same_rows[setting.label] = bool(np.array_equal(rows, plain_rows))
                        start = time.perf_counter()
                        engine.drain()
                        events[setting.label] = len(engine.bursts())
                        drain_s[setting.label] = time.perf_counter() - start
                    del engine, rows
    ns = lambda seconds: min(seconds) * 1e9 / PACKETS  # noqa: E731
    plain_ns = min(ns(v) for v in without_s.values())
    info: dict = {
        "tenants": tenant_count,
        "packets": PACKETS,
        "rounds (best of)": ROUNDS,
        "other processes' load (cores)": load.cores,
        "without detection: ns/packet": plain_ns,
        "without detection: Mpps": 1e3 / plain_ns,
    }
    ratios = {}
    for s in settings:
        with_ns, without_ns = ns(with_s[s.label]), ns(without_s[s.label])
        paired = np.median(np.array(with_s[s.label]) - np.array(without_s[s.label])) * 1e9 / PACKETS
        ratios[s.label] = with_ns / without_ns
        info[f"{s.label}: ns/packet"] = with_ns
        info[f"{s.label}: Mpps"] = 1e3 / with_ns
        info[f"{s.label}: + ns (best of each)"] = with_ns - without_ns
        info[f"{s.label}: + ns (median of pairs)"] = float(paired)
        info[f"{s.label}: x without"] = ratios[s.label]
        info[f"{s.label}: events"] = events[s.label]
        info[f"{s.label}: drain + bursts() ms"] = drain_s[s.label] * 1e3
        extra = with_ns - without_ns
        _table(bench_report, f"ns/packet, detection {s.label} (peer: none)", f"{with_ns:.1f}", f"{without_ns:.1f}", f"{ratios[s.label]:.2f}x")
        if s.gated:
            info[f"{s.label}: target +{TARGET_EXTRA_NS:g} ns"] = f"{'met' if extra <= TARGET_EXTRA_NS else 'not met'} (+{extra:.1f} ns)"
            info[f"{s.label}: target {TARGET_MPPS:g} Mpps"] = f"{'met' if 1e3 / with_ns >= TARGET_MPPS else 'not met'} ({1e3 / with_ns:.1f} Mpps)"
    bench_report[f"bursts: detection cost in the pipeline, {tenant_count:,} tenants, one core"] = info
    print("\ndetection cost (ns/packet, best of each):")
    for s in settings:
        print(f"  {s.label:<16} with {info[f'{s.label}: ns/packet']:7.1f}  without {ns(without_s[s.label]):7.1f}  "
              f"+{info[f'{s.label}: + ns (best of each)']:6.1f} (median of pairs +{info[f'{s.label}: + ns (median of pairs)']:.1f})  "
              f"{ratios[s.label]:.2f}x  {events[s.label]:,} events")

    assert all(same_rows.values()), f"detection changed rows: {same_rows}"
    for s in settings:
        if s.gated:
            assert ratios[s.label] <= MAX_SLOWDOWN, (
                f"{s.label}: the pipeline with detection took {ratios[s.label]:.2f}x the time without (gate {MAX_SLOWDOWN}x)"
            )
        if "CIR" in s.label:
            assert events[s.label] > PACKETS // 2, f"{s.label}: {events[s.label]} events, meant to be one per packet or so"
        else:
            assert 0 < events[s.label] < PACKETS // 10, f"{s.label}: {events[s.label]} events, meant to be some, not constant"


# ---------------------------------------------------------------------------------------------
# finding bursts in a capture: isolane beside a numpy binning script and tshark


@dataclass
class _Capture:
    trace: burst_traffic.Trace
    path: Path
    tenant: np.ndarray  # per injected burst
    kind: np.ndarray  # index into KINDS
    first_ns: np.ndarray  # its first packet's time
    last_ns: np.ndarray  # its last packet's time

    @property
    def duration_ns(self) -> int:
        return int(self.trace.timestamps_ns[-1] - self.trace.timestamps_ns[0])


def _capture(packets: int, directory: Path) -> _Capture:
    """~``packets`` packets of TENANTS tenants (background at BACKGROUND_BPS each) and one
    injected burst per tenant and SLOT_NS, the four KINDS in turn, at a random instant of its slot."""
    per_tenant_pps = BACKGROUND_BPS / (FRAME * 8)
    slots = max(4, round(packets / (TENANTS * per_tenant_pps) * 1e9 / SLOT_NS / 4) * 4)
    rng = np.random.default_rng(SEED)
    bursts, kinds = [], []
    for slot in range(slots):
        for tenant in range(TENANTS):
            kind = (slot + tenant) % len(KINDS)
            _, duration, rate = KINDS[kind]
            start = slot * SLOT_NS + int(rng.integers(SLOT_NS // 10, SLOT_NS - 2 * KINDS[-1][1]))
            flow = (f"12.{tenant}.{slot // 250}.{slot % 250 + 1}", f"13.{tenant}.0.1", 40_000 + slot % 20_000, 5001, 17)
            bursts.append(burst_traffic.Burst(tenant, flow, start, duration, rate, FRAME))
            kinds.append(kind)
    trace = burst_traffic.make_trace(SEED, TENANTS, slots * SLOT_NS, BACKGROUND_BPS, bursts, smooth=True, frame_bytes=FRAME)
    path = directory / f"bursts_{len(trace)}_s{SEED}.pcap"
    burst_traffic.write_pcap(trace, path)
    injected = trace.burst >= 0
    which, times = trace.burst[injected], trace.timestamps_ns[injected]
    first = np.full(len(bursts), np.iinfo(np.int64).max)
    last = np.full(len(bursts), np.iinfo(np.int64).min)
    np.minimum.at(first, which, times)
    np.maximum.at(last, which, times)
    return _Capture(trace, path, np.array([b.tenant for b in bursts]), np.array(kinds), first, last)


@dataclass
class _Judged:
    alarms: int
    hits: np.ndarray  # per injected burst: alarms of its tenant over it
    false: int  # alarms over no injected burst of their tenant

    def found(self) -> int:
        return int((self.hits > 0).sum())

    def missed(self) -> int:
        return int((self.hits == 0).sum())

    def split(self) -> int:
        return int((self.hits > 1).sum())

    def by_kind(self, capture: _Capture, selected: np.ndarray) -> str:
        return ", ".join(f"{name} {int((selected & (capture.kind == k)).sum())}/{int((capture.kind == k).sum())}" for k, (name, _, _) in enumerate(KINDS))


def _judge(capture: _Capture, tenant: np.ndarray, start: np.ndarray, end: np.ndarray) -> _Judged:
    """Alarms (tenant, [start, end]) against the injected bursts ([first packet, last packet +
    window]: a window holds a burst's bytes until then). A tenant's alarms do not overlap one
    another, nor do its bursts, so both sorted by start are sorted by end too."""
    hits = np.zeros(len(capture.tenant), dtype=np.int64)
    false = 0
    for t in range(TENANTS):
        mine = tenant == t
        order = np.argsort(start[mine], kind="stable")
        a_start, a_end = start[mine][order], end[mine][order]
        ids = np.flatnonzero(capture.tenant == t)
        ids = ids[np.argsort(capture.first_ns[ids])]
        b_start, b_end = capture.first_ns[ids], capture.last_ns[ids] + WINDOW_NS
        hits[ids] = np.searchsorted(a_start, b_end, "right") - np.searchsorted(a_end, b_start, "left")
        covers = np.searchsorted(b_start, a_end, "right") - np.searchsorted(b_end, a_start, "left")
        false += int((covers <= 0).sum())
    return _Judged(len(tenant), hits, false)


def _join(tenant: np.ndarray, start: np.ndarray, end: np.ndarray, gap_ns: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A tenant's alarms less than ``gap_ns`` apart joined into one."""
    if not len(tenant):
        return tenant, start, end
    order = np.lexsort((start, tenant))
    tenant, start, end = tenant[order], start[order], end[order]
    new = np.ones(len(tenant), dtype=bool)
    new[1:] = (tenant[1:] != tenant[:-1]) | (start[1:] - end[:-1] >= gap_ns)  # a tenant's alarms do not overlap
    first = np.flatnonzero(new)
    return tenant[first], start[first], np.maximum.reduceat(end, first)


def _isolane_find(path: Path, policy: isolane.Policy) -> tuple[float, isolane.Engine, np.ndarray]:
    start = time.perf_counter()
    engine = isolane.Engine(policy)
    engine.process(isolane.read_pcap(path))
    engine.drain()
    events = engine.bursts()
    return time.perf_counter() - start, engine, events


def _records_bins(path: Path) -> tuple[float, burst_peers.BinResult]:
    start = time.perf_counter()
    records = isolane.parse(isolane.read_pcap(path))
    read_s = time.perf_counter() - start
    result = burst_peers.records_numpy_bins(records, WINDOW_NS, LIMIT_BYTES)
    result.read_s = read_s
    return result.seconds, result


def _flow_text(row: np.void) -> tuple:
    ipv4 = lambda raw: str(ipaddress.IPv6Address(bytes(raw)).ipv4_mapped)  # noqa: E731
    return (ipv4(row["src"]), ipv4(row["dst"]), int(row["src_port"]), int(row["dst_port"]), int(row["proto"]))


def _injected_flows_reported(capture: _Capture, engine: isolane.Engine, events: np.ndarray, tenant: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per injected burst: whether its flow is the top flow (rank 0) of the first event over it,
    and whether it is among the reported flows of the events over it. (An event counts its
    packets from the one that takes the window over the limit: a burst that only just crosses
    it can have one of its own packets in its event beside a background one of equal bytes.)"""
    top = np.zeros(len(capture.tenant), dtype=bool)
    among = np.zeros(len(capture.tenant), dtype=bool)
    for i, t in enumerate(capture.tenant):
        over = np.flatnonzero((tenant == t) & (events["start_ns"] <= capture.last_ns[i] + WINDOW_NS) & (events["end_ns"] >= capture.first_ns[i]))
        if not len(over):
            continue
        over = over[np.argsort(events["start_ns"][over])]
        flows = engine.burst_flows(events["id"][over])
        injected = tuple(capture.trace.bursts[i].flow)
        first = flows[flows["event"] == events["id"][over[0]]]
        top[i] = bool(len(first)) and _flow_text(first[0]) == injected
        among[i] = any(_flow_text(row) == injected for row in flows)
    return top, among


def _tshark_view(capture: _Capture, io: burst_peers.IoStat) -> dict:
    """tshark's intervals against the injected bursts, tenants unknown: flagged = bytes over the
    column's mean + 3 standard deviations (a user's outlier rule). io,stat counts time from the
    first packet in whole microseconds, rounded (a packet 0.5 us before an interval's end is in
    the next one; the last half microsecond of the capture is in no interval)."""
    n = len(io.bytes)
    limit = io.bytes.mean() + 3 * io.bytes.std()
    flagged = io.bytes > limit
    origin = int(capture.trace.timestamps_ns[0])
    interval = lambda ns: np.clip((ns - origin + 500) // 1000 * 1000 // io.interval_ns, 0, n - 1)  # noqa: E731
    k0, k1 = interval(capture.first_ns), interval(capture.last_ns)
    cumulative = np.concatenate([[0], np.cumsum(flagged)])
    burst_in_flagged = cumulative[k1 + 1] - cumulative[k0] > 0
    starts_ends = np.zeros(n + 1, dtype=np.int64)
    np.add.at(starts_ends, k0, 1)
    np.add.at(starts_ends, k1 + 1, -1)
    has_burst = np.cumsum(starts_ends)[:n] > 0
    return {
        "intervals": n,
        "frames counted": int(io.frames.sum()),
        "limit bytes (mean + 3 sd)": float(limit),
        "intervals over it": int(flagged.sum()),
        "of which hold burst packets": int((flagged & has_burst).sum()),
        "bursts in a flagged interval": int(burst_in_flagged.sum()),
        "share of intervals holding burst packets": float(has_burst.mean()),
        "bursts_in_flagged": burst_in_flagged,
    }


@pytest.mark.parametrize(
    "packets", [CAPTURE_PACKETS, pytest.param(1_000_000, marks=pytest.mark.slow, id="1M")], ids=lambda n: f"{n:_}" if isinstance(n, int) else n
)
def test_finding_bursts_in_a_capture_beside_numpy_binning_and_tshark(bench_report, data_dir, packets) -> None:
    capture = _capture(packets, data_dir)
    n_packets, n_bursts = len(capture.trace), len(capture.tenant)
    policy = isolane.Policy.from_dict(burst_traffic.policy_for(capture.trace, "10us", THRESHOLD, rate=TENANT_RATE))
    tshark, why_no_tshark = burst_peers.find_tshark()

    isolane_s, records_s = [], []
    dpkt_result = io = None
    for round_ in range(ISOLANE_ROUNDS):
        seconds, engine, events = _isolane_find(capture.path, policy)
        isolane_s.append(seconds)
        seconds, records_result = _records_bins(capture.path)
        records_s.append(seconds)
        if round_ == 0:
            dpkt_result = burst_peers.dpkt_numpy_bins(capture.path, WINDOW_NS, LIMIT_BYTES)
            if tshark:
                io = burst_peers.tshark_io_stat(capture.path, WINDOW_NS, tshark)
    assert dpkt_result is not None

    # isolane's events, by tenant index
    rate_events = events[(events["scope"] == isolane.BurstScope.TENANT) & (events["view"] == isolane.BurstView.RATE)]
    tenant_of_name = np.array([int(name[1:]) for name in engine.burst_tenants])
    ev_tenant = tenant_of_name[rate_events["tenant"]]
    ev_start, ev_end = rate_events["start_ns"].astype(np.int64), rate_events["end_ns"].astype(np.int64)
    ours = _judge(capture, ev_tenant, ev_start, ev_end)
    ours_joined = _judge(capture, *_join(ev_tenant, ev_start, ev_end, WINDOW_NS))
    flow_on_top, flow_reported = _injected_flows_reported(capture, engine, rate_events, ev_tenant)

    # the binning script's flagged bins, raw and joined
    flagged = dpkt_result.flagged
    bin_tenant = flagged["vni"] - burst_traffic.VNI_BASE
    bins = _judge(capture, bin_tenant, flagged["start_ns"], flagged["end_ns"])
    bins_joined = _judge(capture, *_join(bin_tenant, flagged["start_ns"], flagged["end_ns"], WINDOW_NS))

    best_isolane, best_records = min(isolane_s), min(records_s)
    info: dict = {
        "packets": n_packets,
        "tenants": TENANTS,
        "capture ms": capture.duration_ns / 1e6,
        "injected bursts": n_bursts,
        "window / limit": f"{WINDOW_NS // 1000} us / {LIMIT_BYTES} B ({THRESHOLD} of {TENANT_RATE})",
        "isolane: s (best of 3)": best_isolane,
        "isolane: events": len(rate_events),
        "isolane: found": ours.found(),
        "isolane: missed": ours.missed(),
        "isolane: >1 event": ours.split(),
        "isolane: >1 event, joined <W": ours_joined.split(),
        "isolane: false alarms": ours.false,
        "isolane: injected flow on top": int(flow_on_top.sum()),
        "isolane: injected flow on top, by kind": ours.by_kind(capture, flow_on_top),
        "isolane: injected flow reported": int(flow_reported.sum()),
        "numpy+dpkt: s": dpkt_result.seconds,
        "numpy+dpkt: s reading (dpkt)": dpkt_result.read_s,
        "numpy+dpkt: s binning (numpy)": dpkt_result.bin_s,
        "numpy+dpkt: flagged bins": bins.alarms,
        "numpy+dpkt: found": bins.found(),
        "numpy+dpkt: missed": bins.missed(),
        "numpy+dpkt: missed by kind": bins.by_kind(capture, bins.hits == 0),
        "numpy+dpkt: >1 bin": bins.split(),
        "numpy+dpkt: alarms, joined <W": bins_joined.alarms,
        "numpy+dpkt: >1 alarm, joined": bins_joined.split(),
        "numpy+dpkt: >1 alarm by kind": bins_joined.by_kind(capture, bins_joined.hits > 1),
        "numpy+dpkt: false alarms": bins.false,
        "numpy on isolane.parse: s": best_records,
        "numpy on isolane.parse: s reading": records_result.read_s,
        "numpy on isolane.parse: same bins": bool(np.array_equal(records_result.flagged, flagged)),
    }
    tshark_view = None
    if io is not None:
        tshark_view = _tshark_view(capture, io)
        info["tshark: s"] = io.seconds
        info["tshark: command"] = " ".join(io.command[:1] + ["..."] + io.command[-2:])
        info.update({f"tshark: {k}": v for k, v in tshark_view.items() if k != "bursts_in_flagged"})
        info["tshark: bursts in flagged, by kind"] = ", ".join(
            f"{name} {int((tshark_view['bursts_in_flagged'] & (capture.kind == k)).sum())}/{int((capture.kind == k).sum())}"
            for k, (name, _, _) in enumerate(KINDS)
        )
    else:
        info["tshark"] = f"skipped: {why_no_tshark}"
    label = f"{n_packets:,} pkts"
    bench_report[f"bursts: finding them in a capture, {n_packets:,} packets, {TENANTS} tenants"] = info

    _table(bench_report, f"[{label}] wall s: numpy+dpkt", f"{best_isolane:.3f}", f"{dpkt_result.seconds:.2f}", f"{dpkt_result.seconds / best_isolane:.0f}x")
    _table(bench_report, f"[{label}] wall s: numpy on isolane.parse", f"{best_isolane:.3f}", f"{best_records:.3f}", f"{best_records / best_isolane:.2f}x")
    if io is not None:
        _table(bench_report, f"[{label}] wall s: tshark io,stat 10us", f"{best_isolane:.3f}", f"{io.seconds:.1f}", f"{io.seconds / best_isolane:.0f}x")
    _table(bench_report, f"[{label}] alarms: numpy bins", str(ours.alarms), str(bins.alarms))
    _table(bench_report, f"[{label}] found of {n_bursts}: numpy bins", str(ours.found()), str(bins.found()))
    _table(bench_report, f"[{label}] missed: numpy bins", str(ours.missed()), str(bins.missed()))
    _table(bench_report, f"[{label}] >1 alarm: numpy bins", str(ours.split()), str(bins.split()))
    _table(bench_report, f"[{label}] >1 alarm (joined <W): numpy bins", str(ours_joined.split()), str(bins_joined.split()))
    _table(bench_report, f"[{label}] false alarms: numpy bins", str(ours.false), str(bins.false))
    if tshark_view is not None:
        _table(bench_report, f"[{label}] found, tenant known: tshark", str(ours.found()), "0 (no tenants)")
        _table(bench_report, f"[{label}] in a flagged interval: tshark", str(ours.found()), str(tshark_view["bursts in a flagged interval"]))
    print(f"\nfinding {n_bursts} injected bursts in {n_packets:,} packets ({capture.duration_ns / 1e6:.0f} ms, {TENANTS} tenants):")
    for key, value in info.items():
        print(f"  {key:<48} {value:,.3f}" if isinstance(value, float) else f"  {key:<48} {value}")

    # Robust facts of this seeded capture (not timings).
    assert ours.missed() == 0, f"isolane missed {ours.missed()} injected bursts"
    assert ours.false == 0, f"isolane raised {ours.false} alarms over no injected burst of the tenant"
    assert flow_reported.all(), f"the injected flow is among the reported flows of only {int(flow_reported.sum())} of {n_bursts} bursts"
    assert info["numpy on isolane.parse: same bins"], "the binning script flags other bins when reading with isolane"
    assert bins.missed() > 0, "the binning script was expected to miss a burst that straddles two bins"
    if io is not None:
        assert abs(len(io.bytes) - capture.duration_ns / WINDOW_NS) <= 2, "tshark's intervals do not cover the capture"
