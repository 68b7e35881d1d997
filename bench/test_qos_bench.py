"""What QoS enforcement costs over classification: Engine.process against Engine.classify on
the same records, in the same run, with 1,000 tenants each metered (srTCM) and shaped; and the
whole pipeline (parse, classify, meter, shape) on VXLAN packets in memory, on one core and on
two against one in the same run. The one-core pipeline runs DPDK's building blocks on the same
packets in the same run (dpdk-test-acl, then rte_meter; see `_dpdk_building_blocks`).

    python -m pytest bench/test_qos_bench.py -s

Each round gives process the next second of packet time (the timestamps move on), so meters
and shapers see a steady 1.5x their rate: green, yellow and red packets and shaper drops all
occur, as in a policed network, and no round finds its buckets empty from the round before.
"""

from __future__ import annotations

import ipaddress
import os
import tempfile
import time
from pathlib import Path

import numpy as np
import pytest

import dpdk_acl
import dpdk_meter
import isolane
import traffic
from machine_load import MIN_PARALLEL_CAPACITY, ForeignLoad, parallel_capacity

TENANTS = 1000
RULES = 10
PACKETS = 1_000_000
ROUNDS = 5
SECOND_NS = 10**9
SIZE = 114
LARGEST_FRAME = 1500
# Two threads must be at least this much faster than one on an idle machine (the issue's
# target, 1.7, is reported, not gated: the shared 2-vCPU machines rarely give two whole cores).
MIN_TWO_THREAD_SPEEDUP = 1.3


def _policy(rate: int) -> isolane.Policy:
    tenants = []
    for t in range(TENANTS):
        rules = [{"dst": f"10.{t % 250}.{r}.0/24", "proto": "udp", "action": "allow"} for r in range(RULES)]
        tenants.append(
            {
                "name": f"t{t}",
                "vnis": [t + 1],
                "default": "drop",
                "rules": rules,
                "meter": {"kind": "srtcm", "cir": f"{rate}B/s"},
                "shaper": {"rate": f"{rate * 5 // 4}B/s", "queue": "16KiB", "max_delay": "100ms"},
            }
        )
    return isolane.Policy.from_dict({"largest_frame": f"{LARGEST_FRAME}B", "count": "outer", "tenants": tenants})


def _records(rng: np.random.Generator) -> np.ndarray:
    rows = np.zeros(PACKETS, dtype=isolane.PARSED_DTYPE)
    tenant = rng.integers(0, TENANTS, PACKETS)
    rows["tunnel"] = isolane.Tunnel.VXLAN
    rows["vni"] = tenant + 1
    rows["vlan"] = -1
    rows["ip_version"] = 4
    rows["proto"] = 17
    rows["src"][:, 10:12] = 0xFF
    rows["dst"][:, 10:12] = 0xFF
    rows["dst"][:, 12] = 10
    rows["dst"][:, 13] = tenant % 250
    rows["dst"][:, 14] = rng.integers(0, RULES, PACKETS)
    rows["wire_len"] = SIZE
    rows["inner_len"] = SIZE - 50
    rows["timestamp_ns"] = np.sort(rng.integers(0, SECOND_NS, PACKETS))
    return rows


def test_process_against_classify_with_1000_metered_and_shaped_tenants(bench_report) -> None:
    rng = np.random.default_rng(3)
    offered = PACKETS // TENANTS * SIZE  # bytes a tenant offers in the second
    engine = isolane.Engine(_policy(rate=offered * 2 // 3))
    rows = _records(rng)
    classify_s, process_s, outcomes = [], [], np.zeros(len(isolane.Outcome), dtype=np.int64)
    for round_ in range(ROUNDS + 1):  # the first round warms caches and is not counted
        start = time.perf_counter()
        engine.classify(rows)
        classify_time = time.perf_counter() - start
        shifted = rows.copy()
        shifted["timestamp_ns"] += round_ * SECOND_NS
        start = time.perf_counter()
        processed = engine.process(shifted)
        process_time = time.perf_counter() - start
        if round_:
            classify_s.append(classify_time)
            process_s.append(process_time)
            outcomes += np.bincount(processed["outcome"], minlength=len(outcomes))
    assert outcomes[isolane.Outcome.DROP_METER] > 0 and outcomes[isolane.Outcome.PASS] > 0
    per_packet = lambda seconds: np.array(seconds) * 1e9 / PACKETS  # noqa: E731
    over = per_packet(process_s) - per_packet(classify_s)
    share = {o.name.lower(): float(outcomes[o] / outcomes.sum()) for o in isolane.Outcome if outcomes[o]}
    info = {
        "tenants": TENANTS,
        "packets": PACKETS,
        "classify ns/packet (best)": float(per_packet(classify_s).min()),
        "process ns/packet (best)": float(per_packet(process_s).min()),
        "process - classify ns (best of each)": float(per_packet(process_s).min() - per_packet(classify_s).min()),
        "process - classify ns (median, paired rounds)": float(np.median(over)),
        **{f"share {name}": value for name, value in share.items()},
    }
    bench_report[f"qos: process over classify, {TENANTS:,} tenants"] = info
    assert info["process ns/packet (best)"] < 10_000  # a floor against hangs; the target is in RESULTS.md


def _pipeline_rate(flows: traffic.Traffic) -> int:
    """The CIR (B/s) of every tenant of the pipeline traffic: 2/3 of what it offers."""
    seconds = (flows.timestamps_ns[-1] - flows.timestamps_ns[0]) / SECOND_NS
    return int(PACKETS / len(np.unique(flows.truth["vni"])) * traffic.PACKET_LEN / seconds * 2 / 3)


def _vxlan_pipeline(flows: traffic.Traffic) -> tuple[isolane.PacketBatch, isolane.Policy, int]:
    """The pipeline traffic as a batch, a policy that allows, meters and shapes each tenant at
    2/3 of what it offers, and the number of tenants."""
    batch = isolane.PacketBatch.from_arrays(*flows.arrays())
    vnis = np.unique(flows.truth["vni"])
    rate = _pipeline_rate(flows)
    tenants = [
        {
            "name": f"v{vni}",
            "vnis": [int(vni)],
            "default": "allow",
            "meter": {"kind": "srtcm", "cir": f"{rate}B/s"},
            "shaper": {"rate": f"{rate * 5 // 4}B/s", "queue": "16KiB", "max_delay": "100ms"},
        }
        for vni in vnis
    ]
    policy = isolane.Policy.from_dict({"largest_frame": f"{LARGEST_FRAME}B", "count": "outer", "tenants": tenants})
    return batch, policy, len(vnis)


def _pipeline_traffic() -> traffic.Traffic:
    """1,000,000 VXLAN packets of 1,000 tenants (bench/traffic.py)."""
    return traffic.make_vxlan_traffic(PACKETS, seed=5, n_vnis=TENANTS)


def _dpdk_building_blocks(flows: traffic.Traffic) -> tuple[dict, str]:
    """DPDK's pieces of the same job on the same packets, in ns/packet: rte_acl finding each
    packet's tenant (one rule per VNI, the VNI standing in the 5-tuple's source address, as
    dpdk-test-acl reads only 5-tuples) and rte_meter metering it (srTCM, the tenant's CIR and
    the bursts isolane gives it). Neither parses a packet, shapes or counts; their sum is a
    lower bound for a DPDK pipeline doing what Engine.process does. ({}, why) if unavailable."""
    acl, why = dpdk_acl.find()
    meter, meter_why = dpdk_meter.find()
    if acl is None or meter is None:
        return {}, why or meter_why
    vnis = flows.truth["vni"]
    tenant_vnis, tenant = np.unique(vnis, return_inverse=True)
    with tempfile.TemporaryDirectory(prefix="isolane-pipeline-peer-") as tmp:
        rules, trace = Path(tmp) / "rules", Path(tmp) / "trace"
        rules.write_text("".join(f"@{ipaddress.IPv4Address(int(v))}/32\t0.0.0.0/0\t0 : 65535\t0 : 65535\t0x00/0x00\n" for v in tenant_vnis))
        np.savetxt(trace, np.column_stack([vnis, np.zeros((len(vnis), 4), dtype=np.int64)]), fmt="%d")
        classified = acl.run(rules, trace, alg=dpdk_acl.default_alg(), iters=ROUNDS)
    if not classified.ok:
        return {}, f"dpdk-test-acl failed (rc={classified.returncode}): {classified.output[-300:]}"
    rate = _pipeline_rate(flows)
    burst = isolane.policy.default_burst(rate, LARGEST_FRAME)
    times_ns = flows.timestamps_ns - flows.timestamps_ns[0]
    span_ns = int(times_ns[-1]) + 1
    metered = meter.run(tenant, np.full(len(tenant), traffic.PACKET_LEN), times_ns, len(tenant_vnis), rate, burst, burst, ROUNDS, span_ns)
    acl_ns = 1e3 / classified.mpps
    return {
        "DPDK rte_acl ns/packet": acl_ns,
        "DPDK rte_meter ns/packet": metered.ns_per_packet,
        "DPDK acl + meter ns/packet": acl_ns + metered.ns_per_packet,
    }, ""


def test_full_pipeline_on_one_core_with_1000_metered_and_shaped_tenants(bench_report) -> None:
    """Engine.process on a PacketBatch (parsed, classified, metered and shaped a chunk at a
    time) on one thread, 1,000,000 VXLAN packets of 1,000 tenants (bench/traffic.py), each
    tenant allowed, metered and shaped at 2/3 of what it offers; a fresh engine each round, so
    every round starts with full buckets."""
    flows = _pipeline_traffic()
    batch, policy, tenant_count = _vxlan_pipeline(flows)
    peer, why_no_peer = _dpdk_building_blocks(flows)
    best, outcomes = float("inf"), None
    for _ in range(ROUNDS):
        engine = isolane.Engine(policy)
        start = time.perf_counter()
        processed = engine.process(batch)
        best = min(best, time.perf_counter() - start)
        outcomes = np.bincount(processed["outcome"], minlength=len(isolane.Outcome))
    assert outcomes[isolane.Outcome.PASS] > 0 and outcomes[isolane.Outcome.DROP_CLASSIFIER] == 0
    info = {
        "tenants": tenant_count,
        "packets": PACKETS,
        "ns/packet (best)": best * 1e9 / PACKETS,
        "Mpps (best)": PACKETS / best / 1e6,
        **{f"share {o.name.lower()}": float(outcomes[o] / PACKETS) for o in isolane.Outcome if outcomes[o]},
        **peer,
    }
    if peer:
        info["isolane / DPDK acl + meter (time)"] = info["ns/packet (best)"] / peer["DPDK acl + meter ns/packet"]
    else:
        info["DPDK peer"] = f"unavailable: {why_no_peer}"
    bench_report[f"qos: parse + process on one core, {tenant_count:,} tenants"] = info
    assert best < 60  # a floor against hangs; the target is in RESULTS.md


def _first_difference(one: np.ndarray, other: np.ndarray) -> str:
    """Where two row arrays first differ, field by field (a failure that happened once)."""
    if one.shape != other.shape:
        return f"{one.shape} rows against {other.shape}"
    found = []
    for field in one.dtype.names or ():
        at = np.flatnonzero(one[field] != other[field])
        if len(at):
            found.append(f"{field}: {len(at)} rows, first {at[0]} ({one[field][at[0]]} against {other[field][at[0]]})")
    return "; ".join(found)


def test_full_pipeline_on_two_threads_against_one(bench_report) -> None:
    """Engine.process on a PacketBatch with threads=1 and threads=2 (two threads parse and
    classify ahead of one enforcer), alternating in the same run so that background load hits both alike; the same
    traffic and policy as the one-core test, a fresh engine each round. The rows must be the
    same; the speed-up is gated only when the run had two otherwise idle CPUs, and the machine
    ran a plain two-thread job twice as fast as one just before and after."""
    batch, policy, tenant_count = _vxlan_pipeline(_pipeline_traffic())
    best = {1: float("inf"), 2: float("inf")}
    rows: dict[int, np.ndarray] = {}
    capacity_before = parallel_capacity()
    with ForeignLoad() as load:
        for _ in range(ROUNDS):
            for threads in (1, 2):
                engine = isolane.Engine(policy, threads=threads)
                start = time.perf_counter()
                rows[threads] = engine.process(batch)
                best[threads] = min(best[threads], time.perf_counter() - start)
    capacity = min(capacity_before, parallel_capacity())
    assert np.array_equal(rows[1], rows[2]), f"two threads must give the rows one thread gives: {_first_difference(rows[1], rows[2])}"
    speedup = best[1] / best[2]
    idle_cpus = len(os.sched_getaffinity(0)) - load.cores
    info = {
        "tenants": tenant_count,
        "packets": PACKETS,
        "Mpps threads=1 (best)": PACKETS / best[1] / 1e6,
        "Mpps threads=2 (best)": PACKETS / best[2] / 1e6,
        "speed-up 2 threads": speedup,
        "other processes' load (cores)": load.cores,
        "machine's two-thread capacity (plain job)": capacity,
    }
    bench_report[f"qos: parse + process on 2 threads against 1, {tenant_count:,} tenants"] = info
    print(f"\nfull pipeline: {info['Mpps threads=1 (best)']:.1f} Mpps on 1 thread, {info['Mpps threads=2 (best)']:.1f} on 2: {speedup:.2f}x")
    if idle_cpus < 1.8:
        pytest.skip(f"2 threads {speedup:.2f}x of 1, but only {idle_cpus:.1f} CPUs were idle for this run: not a fair scaling measurement")
    if capacity < MIN_PARALLEL_CAPACITY:
        pytest.skip(
            f"2 threads {speedup:.2f}x of 1, but the machine ran a plain job on 2 threads only {capacity:.2f}x as fast as on 1: not a fair scaling measurement"
        )
    assert speedup >= MIN_TWO_THREAD_SPEEDUP, f"2 threads only {speedup:.2f}x as fast as 1"
