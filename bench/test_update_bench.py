"""Live one-rule edits of a 10k-rule tenant, against rebuilding that tenant, in the same run.

    python -m pytest bench/test_update_bench.py --benchmark-only -s

700 rounds of insert, replace and remove in the middle of the tenant. And inserts piling up at
one place (300, below the point where the tenant's decision trees are rebuilt, every
max(64, n/16) edits): once every 32 they use up the gap between two rules' ranks, and the rules
inserted there since the build are respread (without rebuilding a tree or touching other ranks).
"""

from __future__ import annotations

import statistics
import time

import numpy as np

import isolane

RULES = 10_000
EDITS = 700
# The rank gap (2**32) halves at each insert at one place, then the run of rules inserted there
# is respread (~10 times in 300 inserts); 300 edits stay below the tree rebuild (625 for 10,000).
SAME_PLACE_INSERTS = 300
REBUILD_EVERY = 25  # inserts between two rebuilds of the peer: 12 rebuilds
# Measured (bench/RESULTS.md, 2026-11-22 edit-latency): a rebuild costs 20-48 median inserts or
# replacements (65-135 removals) and 10-21 p99 ones; the gates leave room for a busy machine.
MIN_REBUILD_OVER_MEDIAN_EDIT = 8
MIN_REBUILD_OVER_P99_EDIT = 3
EXTRA = {"dst_ports": 53, "proto": "udp", "action": "drop"}


def _policy(extra: bool) -> isolane.Policy:
    rules: list[dict[str, object]] = [
        {"dst": f"10.{i // 250}.{i % 250}.0/24", "dst_ports": 1000 + i % 5000, "proto": "tcp", "action": "allow"} for i in range(RULES)
    ]
    if extra:  # a different rule at both ends: more than one edit, so the tenant is rebuilt
        rules = [EXTRA, *rules[1:-1], {**EXTRA, "dst_ports": 54}]
    return isolane.Policy.from_dict({"tenants": [{"name": "big", "vnis": [1], "rules": rules}, {"name": "small", "vnis": [2]}]})


def _rebuild_seconds(engine: isolane.Engine, policy: isolane.Policy) -> float:
    """Seconds of Engine.update rebuilding the big tenant (the peer of an edit)."""
    start = time.perf_counter()
    report = engine.update(policy)
    seconds = time.perf_counter() - start
    assert report.rebuilt == 1, report
    return seconds


def _spread(what: str, seconds: list[float]) -> dict[str, float]:
    ms = np.array(seconds) * 1e3
    return {f"{what} median ms": float(np.median(ms)), f"{what} p99 ms": float(np.percentile(ms, 99)), f"{what} max ms": float(ms.max())}


def test_one_rule_edits_against_rebuilding_the_tenant(benchmark, bench_report) -> None:
    engine = isolane.Engine(_policy(False))
    edits: dict[str, list[float]] = {"insert": [], "replace": [], "remove": []}
    replacement = {**EXTRA, "dst_ports": 5353}
    for _ in range(EDITS):
        for what, edit in (
            ("insert", lambda: engine.insert_rule("big", RULES // 2, EXTRA)),
            ("replace", lambda: engine.replace_rule("big", RULES // 2, replacement)),
            ("remove", lambda: engine.remove_rule("big", RULES // 2)),
        ):
            start = time.perf_counter()
            edit()
            edits[what].append(time.perf_counter() - start)
    rebuilds = [_rebuild_seconds(engine, policy) for policy in [_policy(True), _policy(False)] * 3]
    benchmark.group = "live update"
    benchmark.pedantic(engine.insert_rule, args=("big", RULES // 2, EXTRA), rounds=1, iterations=1)
    rebuild = statistics.median(rebuilds)
    info: dict[str, float] = {}
    for what, seconds in edits.items():
        info.update(_spread(what, seconds))
        info[f"{what}s over 1 ms"] = int((np.array(seconds) > 1e-3).sum())
    info["rebuild of the tenant (Engine.update) median ms"] = rebuild * 1e3
    for what, seconds in edits.items():
        info[f"rebuild / median {what}"] = rebuild / statistics.median(seconds)
        info[f"rebuild / p99 {what}"] = rebuild / float(np.percentile(seconds, 99))
    benchmark.extra_info.update(info)
    bench_report[f"live update: {EDITS} inserts, replacements and removals in a {RULES:,}-rule tenant"] = info
    for what in edits:
        assert info[f"rebuild / median {what}"] >= MIN_REBUILD_OVER_MEDIAN_EDIT, info
        assert info[f"rebuild / p99 {what}"] >= MIN_REBUILD_OVER_P99_EDIT, info


def test_inserts_piling_up_at_one_place_against_rebuilding_the_tenant(benchmark, bench_report) -> None:
    engine, rebuilder = isolane.Engine(_policy(False)), isolane.Engine(_policy(False))
    # The rebuilder swaps between these; compiled before, so that a rebuild times the engine only.
    policies = [_policy(True), _policy(False)]
    for policy in policies:
        policy.compile()
        policy.compile_qos()
    inserts: list[float] = []
    rebuilds: list[float] = []
    for i in range(SAME_PLACE_INSERTS):
        if i % REBUILD_EVERY == 0:  # the peer between the inserts: the same load on both
            rebuilds.append(_rebuild_seconds(rebuilder, policies[len(rebuilds) % 2]))
        start = time.perf_counter()
        engine.insert_rule("big", RULES // 2, EXTRA)
        inserts.append(time.perf_counter() - start)
    assert len(engine.policy.tenant("big").rules) == RULES + SAME_PLACE_INSERTS
    benchmark.group = "live update"
    benchmark.pedantic(engine.insert_rule, args=("big", RULES // 2, EXTRA), rounds=1, iterations=1)
    rebuild = statistics.median(rebuilds)
    info = {
        **_spread("insert", inserts),
        "rebuild of the tenant (Engine.update) median ms": rebuild * 1e3,
        "rebuild / median insert": rebuild / statistics.median(inserts),
        "rebuild / p99 insert": rebuild / float(np.percentile(inserts, 99)),
        "rebuild / max insert": rebuild / max(inserts),
    }
    benchmark.extra_info.update(info)
    bench_report[f"live update: {SAME_PLACE_INSERTS} inserts at one place of a {RULES:,}-rule tenant"] = info
    assert info["rebuild / median insert"] >= MIN_REBUILD_OVER_MEDIAN_EDIT, info
    assert info["rebuild / p99 insert"] >= MIN_REBUILD_OVER_P99_EDIT, info
