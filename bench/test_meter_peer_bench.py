"""isolane's meters against DPDK's rte_meter in the same run: srTCM meters, one per tenant, on the
traffic of ``examples/enforce_speed.rs`` (114-byte packets spread over the tenants in a scattered
order and over one second of packet time, each tenant offering 1.5x its CIR).

    python -m pytest bench/test_meter_peer_bench.py -s              # 1,000 meters
    python -m pytest bench/test_meter_peer_bench.py -s -m slow      # 1,000,000 meters

isolane's cost is ``Engine.process`` over ``Engine.classify`` on the same records (what metering
adds to classification: the meter, its colour action, the statistics and the output row), with
policies of one meter per tenant and nothing else; DPDK's is its colour-blind check alone, in a
C loop over the same packets (``dpdk_meter.c``). Both run ``ROUNDS`` consecutive seconds of the
traffic, best round reported, and must colour the packets alike.
"""

from __future__ import annotations

import time

import numpy as np
import pytest

import dpdk_meter
import isolane

SIZE = 114
SECOND_NS = 10**9
ROUNDS = 5
LARGEST_FRAME = 1500


def scattered_tenants(packets: int, tenants: int) -> np.ndarray:
    """enforce_speed.rs's tenant of packet i: a multiplicative hash of i."""
    i = np.arange(packets, dtype=np.uint64)
    return ((i * np.uint64(0x9E3779B97F4A7C15)) >> np.uint64(17)) % np.uint64(tenants)


def meter_policy(tenants: int, cir: int) -> isolane.Policy:
    meter = {"kind": "srtcm", "cir": f"{cir}B/s"}  # bursts by default: max(cir / 1000, 1500 B)
    return isolane.Policy.from_dict(
        {
            "largest_frame": f"{LARGEST_FRAME}B",
            "count": "outer",
            "tenants": [{"name": f"t{t}", "vnis": [t + 1], "default": "allow", "meter": meter} for t in range(tenants)],
        }
    )


def records(tenant: np.ndarray, times_ns: np.ndarray) -> np.ndarray:
    rows = np.zeros(len(tenant), dtype=isolane.PARSED_DTYPE)
    rows["tunnel"] = isolane.Tunnel.VXLAN
    rows["vni"] = tenant + 1
    rows["vlan"] = -1
    rows["ip_version"] = 4
    rows["proto"] = 17
    rows["wire_len"] = SIZE
    rows["inner_len"] = SIZE - 50
    rows["timestamp_ns"] = times_ns
    return rows


def compare(tenants: int, packets: int, rounds: int, bench_report) -> None:
    peer, why = dpdk_meter.find()
    if peer is None:
        pytest.skip(f"DPDK rte_meter peer unavailable: {why}")
    tenant = scattered_tenants(packets, tenants)
    times_ns = np.arange(packets, dtype=np.int64) * SECOND_NS // packets
    cir = packets * SIZE // tenants * 2 // 3  # B/s: each tenant offers 1.5x its CIR
    burst = isolane.policy.default_burst(cir, LARGEST_FRAME)
    dpdk = peer.run(tenant, np.full(packets, SIZE), times_ns, tenants, cir, burst, burst, rounds, SECOND_NS)

    engine = isolane.Engine(meter_policy(tenants, cir))
    rows = records(tenant, times_ns)
    classify_s, process_s, colors = [], [], np.zeros(3, dtype=np.int64)
    for round_ in range(rounds):
        start = time.perf_counter()
        engine.classify(rows)
        classify_s.append(time.perf_counter() - start)
        shifted = rows.copy()
        shifted["timestamp_ns"] += round_ * SECOND_NS
        start = time.perf_counter()
        processed = engine.process(shifted)
        process_s.append(time.perf_counter() - start)
        colors += np.bincount(processed["color"], minlength=3)[:3]
    # The same RFC on the same packets: the colours agree but for rte_meter's rounding of the
    # rate to whole clock periods (and bytes per period).
    np.testing.assert_allclose(colors, dpdk.colors, atol=packets * rounds // 1000)

    ns = lambda seconds: min(seconds) * 1e9 / packets  # noqa: E731
    isolane_ns = ns(process_s) - ns(classify_s)
    info = {
        "meters": tenants,
        "packets": packets,
        "DPDK rte_meter srTCM check ns/packet (best)": dpdk.ns_per_packet,
        "isolane process ns/packet (best)": ns(process_s),
        "isolane classify ns/packet (best)": ns(classify_s),
        "isolane process - classify ns/packet": isolane_ns,
        "isolane metering / DPDK (time ratio)": isolane_ns / dpdk.ns_per_packet,
        **{
            f"share {name} isolane / DPDK": f"{colors[c] / colors.sum():.4f} / {dpdk.colors[c] / sum(dpdk.colors):.4f}"
            for c, name in enumerate(["green", "yellow", "red"])
        },
        "DPDK command": " ".join(dpdk.command),
    }
    bench_report[f"meters against DPDK rte_meter, {tenants:,} srTCM meters"] = info
    assert info["isolane process ns/packet (best)"] < 10_000  # a floor against hangs; the ratio is in RESULTS.md


def test_1000_srtcm_meters_against_dpdk_rte_meter(bench_report) -> None:
    compare(1_000, 1_000_000, ROUNDS, bench_report)


@pytest.mark.slow
def test_1000000_srtcm_meters_against_dpdk_rte_meter(bench_report) -> None:
    """Ten packets a meter on average, as enforce_speed.rs; the policy alone takes minutes to build."""
    compare(1_000_000, 10_000_000, 3, bench_report)
