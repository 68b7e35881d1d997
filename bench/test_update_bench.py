"""Live one-rule edits of a 10k-rule tenant, against rebuilding that tenant, in the same run.

    python -m pytest bench/test_update_bench.py --benchmark-only -s

Enough edits (700 inserts, 700 removals) to cross the point where the tenant's decision trees
are rebuilt (every max(64, n/16) edits), so the worst edit is in the numbers too.
"""

from __future__ import annotations

import statistics
import time

import numpy as np

import isolane

RULES = 10_000
EDITS = 700
EXTRA = {"dst_ports": 53, "proto": "udp", "action": "drop"}


def _policy(extra: bool) -> isolane.Policy:
    rules: list[dict[str, object]] = [
        {"dst": f"10.{i // 250}.{i % 250}.0/24", "dst_ports": 1000 + i % 5000, "proto": "tcp", "action": "allow"} for i in range(RULES)
    ]
    if extra:  # a different rule at both ends: more than one edit, so the tenant is rebuilt
        rules = [EXTRA, *rules[1:-1], {**EXTRA, "dst_ports": 54}]
    return isolane.Policy.from_dict({"tenants": [{"name": "big", "vnis": [1], "rules": rules}, {"name": "small", "vnis": [2]}]})


def _ms(seconds: list[float]) -> np.ndarray:
    return np.array(seconds) * 1e3


def test_one_rule_edits_against_rebuilding_the_tenant(benchmark, bench_report) -> None:
    engine = isolane.Engine(_policy(False))
    inserts, removals = [], []
    for _ in range(EDITS):
        start = time.perf_counter()
        engine.insert_rule("big", RULES // 2, EXTRA)
        middle = time.perf_counter()
        engine.remove_rule("big", RULES // 2)
        inserts.append(middle - start)
        removals.append(time.perf_counter() - middle)
    rebuild_policies = [_policy(True), _policy(False)]
    rebuilds = []
    for policy in rebuild_policies * 3:
        start = time.perf_counter()
        report = engine.update(policy)
        rebuilds.append(time.perf_counter() - start)
        assert report.rebuilt == 1, report
    benchmark.group = "live update"
    benchmark.pedantic(engine.insert_rule, args=("big", RULES // 2, EXTRA), rounds=1, iterations=1)
    insert_ms, remove_ms = _ms(inserts), _ms(removals)
    info = {
        "insert median ms": float(np.median(insert_ms)),
        "insert p99 ms": float(np.percentile(insert_ms, 99)),
        "insert max ms": float(insert_ms.max()),
        "inserts over 1 ms": int((insert_ms > 1).sum()),
        "remove median ms": float(np.median(remove_ms)),
        "remove p99 ms": float(np.percentile(remove_ms, 99)),
        "remove max ms": float(remove_ms.max()),
        "rebuild of the tenant (Engine.update) median ms": statistics.median(rebuilds) * 1e3,
        "rebuild / median insert": statistics.median(rebuilds) / float(np.median(inserts)),
    }
    benchmark.extra_info.update(info)
    bench_report[f"live update: {EDITS} inserts and removals in a {RULES:,}-rule tenant"] = info
    assert np.median(insert_ms) < 50 and np.median(remove_ms) < 50  # generous floor; numbers in RESULTS.md
