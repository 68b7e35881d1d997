"""Adaptive profiles (docs/qos.md, "Adaptive profiles"): what having them costs in the whole
pipeline while no burst is under way, and what switching costs when bursts come.

    python -m pytest bench/test_profile_bench.py -q -s -p no:cacheprovider   # ~30-60 s

bench/test_qos_bench.py's one-core pipeline (1,000,000 VXLAN packets of 1,000 tenants, each
metered and shaped, a fresh engine each run), every tenant watched for microbursts, timed with
and without a burst profile on every tenant (a shaper at half its own rate), best of
``ROUNDS``, the two runs of a round in alternating order. Two microburst settings: one the
traffic never crosses (10 us at 400 Gbit/s: profiles present, no burst), where the rows must be
the same with and without profiles; and 10 us at 100 Mbit/s (a tenant bursts when two of its
packets fall in one window: tens of thousands of switches), printed. The issue's target (at
most 2 ns a packet more with profiles and no burst) is printed as met or not, not asserted on
wall-clock; the gate is relative (``MAX_SLOWDOWN``).

Environment: ``ISOLANE_BENCH_PROFILE_ROUNDS`` (5), ``ISOLANE_BENCH_MAX_PROFILE_SLOWDOWN`` (1.5).
"""

from __future__ import annotations

import os

import numpy as np

import isolane
import test_qos_bench as qos
from machine_load import ForeignLoad
from test_burst_bench import _timed_process

ROUNDS = int(os.environ.get("ISOLANE_BENCH_PROFILE_ROUNDS", "5"))
MAX_SLOWDOWN = float(os.environ.get("ISOLANE_BENCH_MAX_PROFILE_SLOWDOWN", "1.5"))
TARGET_EXTRA_NS = 2.0
QUIET = ("10us", "400Gbps")
BURSTY = ("10us", "100Mbps")


def _watched(policy: isolane.Policy, window: str, threshold: str, profiles: bool) -> isolane.Policy:
    data = policy.to_dict()
    for tenant in data["tenants"]:
        tenant["microburst"] = {"window": window, "threshold": threshold}
        if profiles:
            shaper = tenant["shaper"]
            tenant["on_burst"] = {"shaper": {**shaper, "rate": isolane.policy.format_rate(isolane.policy.parse_rate(shaper["rate"]) // 2)}, "hold": "20us"}
    return isolane.Policy.from_dict(data)


def test_profiles_cost_in_the_one_core_pipeline_with_1000_tenants(bench_report) -> None:
    flows = qos._pipeline_traffic()
    batch, plain, tenant_count = qos._vxlan_pipeline(flows)
    settings = {"no burst": QUIET, "bursts": BURSTY}
    policies = {(label, profiles): _watched(plain, *setting, profiles) for label, setting in settings.items() for profiles in (False, True)}
    seconds: dict[tuple[str, bool], list[float]] = {key: [] for key in policies}
    rows: dict[tuple[str, bool], np.ndarray] = {}
    switches: dict[str, int] = {}
    with ForeignLoad() as load:
        for round_ in range(ROUNDS):
            for label in settings:
                for profiles in (False, True) if round_ % 2 == 0 else (True, False):
                    elapsed, engine, out = _timed_process(policies[(label, profiles)], batch)
                    seconds[(label, profiles)].append(elapsed)
                    if round_ == 0:
                        rows[(label, profiles)] = out
                        if profiles:
                            switches[label] = len(engine.profile_events())
                    del engine, out
    ns = {key: min(values) * 1e9 / qos.PACKETS for key, values in seconds.items()}
    info: dict = {"tenants": tenant_count, "packets": qos.PACKETS, "rounds (best of)": ROUNDS, "other processes' load (cores)": load.cores}
    print("\nadaptive profiles (ns/packet, best of each):")
    for label in settings:
        without, with_ = ns[(label, False)], ns[(label, True)]
        paired = float(np.median(np.array(seconds[(label, True)]) - np.array(seconds[(label, False)]))) * 1e9 / qos.PACKETS
        info[f"{label}: without profiles ns/packet"] = without
        info[f"{label}: with profiles ns/packet"] = with_
        info[f"{label}: + ns (best of each)"] = with_ - without
        info[f"{label}: + ns (median of pairs)"] = paired
        info[f"{label}: switches"] = switches[label]
        print(f"  {label:<9} without {without:6.1f}  with {with_:6.1f}  +{with_ - without:5.1f} (median of pairs +{paired:.1f})  {switches[label]:,} switches")
    extra = ns[("no burst", True)] - ns[("no burst", False)]
    info[f"target: +{TARGET_EXTRA_NS:g} ns with profiles and no burst"] = f"{'met' if extra <= TARGET_EXTRA_NS else 'not met'} (+{extra:.1f} ns)"
    bench_report[f"adaptive profiles: cost in the pipeline, {tenant_count:,} tenants, one core"] = info

    assert switches["no burst"] == 0 and switches["bursts"] > 1000
    assert np.array_equal(rows[("no burst", True)], rows[("no burst", False)]), "profiles with no burst change no row"
    assert ns[("no burst", True)] <= MAX_SLOWDOWN * ns[("no burst", False)]
