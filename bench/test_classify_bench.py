"""ClassBench classification: isolane's RuleTable next to DPDK rte_acl (dpdk-test-acl).

    python -m pytest bench/test_classify_bench.py --benchmark-only            # 10k sets
    python -m pytest bench/test_classify_bench.py --benchmark-only -m slow    # 100k sets

For each rule set: RuleTable build time (best of 3) and ``memory_bytes``; lookup throughput
over the whole 100,000-header trace in one call and in batches of 256 (Python call overhead
included); and, in the same run, dpdk-test-acl on the same files (AVX2, 256-packet bursts,
median of 3 runs for the 10k sets), with the isolane/DPDK ratios. Both run on one core:
this process is pinned to ``$ISOLANE_BENCH_CPU`` (default 0), the core DPDK runs on (-l).
When dpdk-test-acl is unavailable (see bench/dpdk_acl.py) the DPDK columns say why and the
isolane figures are still measured. And the fixed cost of one lookup call (1 and 256 keys),
against a numpy call into C of the same size (``searchsorted``), in the same run.

Correctness before speed: every labelled trace header must get its label from isolane
(0 mismatches), and DPDK's own per-packet results are checked against the labels too (10k).
Floors are generous (regressions by an order of magnitude, not noise):

    ISOLANE_BENCH_MIN_CLASSIFY_MPPS  1.0   whole-trace lookup, every set
    ISOLANE_BENCH_MIN_VS_DPDK        0.1   isolane / DPDK Mpps (whole trace), 10k sets
    ISOLANE_BENCH_MAX_BUILD_S_100K   20    RuleTable build, 100k sets (target: 2)
    ISOLANE_BENCH_MAX_TABLE_MB_100K  640   memory_bytes, 100k sets (target: 64)
    ISOLANE_BENCH_CPU                0     core for isolane and DPDK
    ISOLANE_BENCH_DPDK_REPEAT        3     dpdk-test-acl runs per 10k set (median)
    ISOLANE_BENCH_DPDK_EXTRA_ALGS    ""    more rte_acl algorithms to report, e.g. avx512x32
"""

from __future__ import annotations

import os
import statistics
import time

import numpy as np
import pytest

import dpdk_acl
from machine_load import ForeignLoad
from support.classbench import rule_set, rule_set_paths

core = pytest.importorskip("isolane._core")
if not hasattr(core, "RuleTable"):
    pytest.skip("isolane._core.RuleTable is not built yet", allow_module_level=True)
RuleTable = core.RuleTable

MIN_MPPS = float(os.environ.get("ISOLANE_BENCH_MIN_CLASSIFY_MPPS", "1.0"))
MIN_VS_DPDK = float(os.environ.get("ISOLANE_BENCH_MIN_VS_DPDK", "0.1"))
MAX_BUILD_S_100K = float(os.environ.get("ISOLANE_BENCH_MAX_BUILD_S_100K", "20"))
MAX_TABLE_MB_100K = float(os.environ.get("ISOLANE_BENCH_MAX_TABLE_MB_100K", "640"))
CPU = int(os.environ.get("ISOLANE_BENCH_CPU", "0"))
DPDK_REPEAT = int(os.environ.get("ISOLANE_BENCH_DPDK_REPEAT", "3"))
# more rte_acl algorithms to report besides AVX2 (the baseline), e.g. "avx512x32"
EXTRA_ALGS = os.environ.get("ISOLANE_BENCH_DPDK_EXTRA_ALGS", "").replace(",", " ").split()
BATCH = 256

# GiB of available memory a dpdk-test-acl run needs (its build peaks at ~10.7 GB on fw1_100k)
DPDK_NEEDS_GIB = {"fw1_100k": 13.0, "acl1_100k": 3.0, "ipc1_100k": 3.0}

SETS_10K = ["acl1_10k", "fw1_10k", "ipc1_10k"]
SETS_100K = ["acl1_100k", "fw1_100k", "ipc1_100k"]

FIXED_COST_SET = "acl1_10k"
FIXED_COST_CALLS = 2_000  # calls a timed round
FIXED_COST_ROUNDS = 15
MAX_ONE_KEY_OVER_NUMPY = 20  # generous (measured ~2x): a 1-key lookup against a 1-key searchsorted


def _mem_available_gib() -> float:
    try:
        for line in open("/proc/meminfo"):
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) / 2**20
    except OSError:
        pass
    return float("inf")


@pytest.fixture(scope="module")
def one_core():
    """Pin this process to CPU (the core dpdk-test-acl gets) for the module."""
    if not hasattr(os, "sched_setaffinity"):
        yield None
        return
    before = os.sched_getaffinity(0)
    cpu = CPU if CPU in before else min(before)
    os.sched_setaffinity(0, {cpu})
    try:
        yield cpu
    finally:
        os.sched_setaffinity(0, before)


@pytest.fixture(scope="module")
def dpdk():
    """(DpdkAcl or None, reason)."""
    return dpdk_acl.find()


def _time(fn, repeat: int) -> list[float]:
    out = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return out


def run_dpdk(tool, name: str, cpu: int, repeat: int, iters: int, alg: str | None = None):
    """Median (by Mpps) of ``repeat`` dpdk-test-acl runs, or (None, why)."""
    need = DPDK_NEEDS_GIB.get(name, 2.0)
    if _mem_available_gib() < need:
        return None, f"needs ~{need:.0f} GiB free, {_mem_available_gib():.1f} available"
    rules, trace = rule_set_paths(name)
    runs = []
    for _ in range(repeat):
        r = tool.run(rules, trace, alg=alg or dpdk_acl.default_alg(), iters=iters,
                     tracestep=BATCH, lcore=cpu, timeout=900)
        if not r.ok:
            tail = r.output.strip().splitlines()[-3:]
            return None, f"dpdk-test-acl failed (rc={r.returncode}): {' | '.join(tail)}"
        runs.append(r)
    runs.sort(key=lambda r: r.mpps)
    return runs[len(runs) // 2], ""


def classify_bench(name, benchmark, bench_report, one_core, dpdk, *, dpdk_repeat, dpdk_iters,
                   check_dpdk_labels):
    rules, trace = rule_set(name)
    n = len(trace)
    args = (trace.src, trace.dst, trace.src_port, trace.dst_port, trace.proto)
    info: dict = {"rules": len(rules), "headers": n}

    # build
    builds = _time(lambda: RuleTable(*rules.args()), 3)
    table = RuleTable(*rules.args())
    info["isolane build s"] = min(builds)
    if hasattr(RuleTable, "from_classbench"):
        path, _ = rule_set_paths(name)
        info["isolane from_classbench s"] = min(
            _time(lambda: RuleTable.from_classbench(str(path)), 3))
    mem = getattr(table, "memory_bytes", None)
    if mem is not None:
        info["isolane table MB"] = mem / 1e6
    if hasattr(table, "table_count"):
        info["isolane hash tables"] = table.table_count

    # correctness first: every labelled header gets its label
    got = np.asarray(table.lookup(*args))
    lab = trace.labelled
    bad = int((got[lab] != trace.label[lab]).sum())
    info["isolane mismatches"] = bad
    assert bad == 0, f"{name}: {bad} labelled headers misclassified"

    # whole trace in one call
    benchmark.group = f"classify {name} (100k headers per call)"
    with ForeignLoad() as load:
        benchmark.pedantic(table.lookup, args=args, rounds=15, warmup_rounds=2)
        s = benchmark.stats.stats
        # batches of 256 (one lookup call each)
        batches = [tuple(a[i:i + BATCH] for a in args) for i in range(0, n, BATCH)]

        def run_batches():
            for b in batches:
                table.lookup(*b)

        run_batches()
        t256 = _time(run_batches, 7)
    info["isolane Mpps 1 call (med)"] = n / s.median / 1e6
    info["isolane Mpps 1 call (best)"] = n / s.min / 1e6
    info["isolane Mpps 256/call (med)"] = n / statistics.median(t256) / 1e6
    info["isolane Mpps 256/call (best)"] = n / min(t256) / 1e6
    info["other load (cores)"] = load.cores
    info["core"] = one_core

    # DPDK, same run, same core
    tool, why = dpdk
    dres = None
    if tool is not None:
        dres, why = run_dpdk(tool, name, one_core if one_core is not None else 0,
                             dpdk_repeat, dpdk_iters)
    if dres is None:
        info["DPDK"] = f"unavailable: {why}"
    else:
        info["DPDK alg"] = dres.alg
        info.update(dres.summary())
        info["isolane/DPDK Mpps (1 call)"] = info[
            "isolane Mpps 1 call (med)"] / dres.mpps
        info["isolane/DPDK Mpps (256)"] = info[
            "isolane Mpps 256/call (med)"] / dres.mpps
        if dres.build_s:
            info["DPDK/isolane build time"] = dres.build_s / min(builds)
        if dres.table_bytes and mem:
            info["DPDK/isolane table bytes"] = dres.table_bytes / mem
        for alg in EXTRA_ALGS:
            x, xwhy = run_dpdk(tool, name, one_core or 0, dpdk_repeat, dpdk_iters, alg)
            info[f"DPDK {alg} Mpps"] = x.mpps if x else f"unavailable: {xwhy}"
            if x:
                info[f"isolane/{alg} (1 call)"] = info["isolane Mpps 1 call (med)"] / x.mpps
        if check_dpdk_labels:
            rules_p, trace_p = rule_set_paths(name)
            v = tool.run(rules_p, trace_p, alg=dpdk_acl.default_alg(), iters=1, tracestep=BATCH,
                         verbose=3, lcore=one_core or 0, timeout=900)
            if v.matches is not None and len(v.matches) == n:
                m = np.array(v.matches)
                info["DPDK mismatches"] = int((m[lab] != trace.label[lab]).sum())
    benchmark.extra_info.update({k: v for k, v in info.items()
                                 if isinstance(v, (int, float, str))})
    bench_report[f"classify {name}"] = info

    assert info["isolane Mpps 1 call (med)"] >= MIN_MPPS
    return info


@pytest.mark.parametrize("name", SETS_10K)
def test_classify_10k(name, benchmark, bench_report, one_core, dpdk):
    info = classify_bench(name, benchmark, bench_report, one_core, dpdk,
                          dpdk_repeat=DPDK_REPEAT, dpdk_iters=50, check_dpdk_labels=True)
    if "isolane/DPDK Mpps (1 call)" in info:
        assert info["isolane/DPDK Mpps (1 call)"] >= MIN_VS_DPDK
    if "DPDK mismatches" in info:
        assert info["DPDK mismatches"] == 0, "dpdk-test-acl disagrees with labels"


@pytest.mark.slow
@pytest.mark.parametrize("name", SETS_100K)
def test_classify_100k(name, benchmark, bench_report, one_core, dpdk):
    info = classify_bench(name, benchmark, bench_report, one_core, dpdk,
                          dpdk_repeat=1, dpdk_iters=20, check_dpdk_labels=False)
    assert info["isolane build s"] < MAX_BUILD_S_100K
    if "isolane table MB" in info:
        assert info["isolane table MB"] < MAX_TABLE_MB_100K


def _seconds_per_call(call, args, calls: int) -> float:
    start = time.perf_counter()
    for _ in range(calls):
        call(*args)
    return (time.perf_counter() - start) / calls


def test_lookup_call_cost_against_a_numpy_call(benchmark, bench_report, one_core):
    """The fixed cost of a RuleTable.lookup call (acl1_10k) with 1 and 256 keys, against the
    floor of a numpy call into C over an array of the same size: the ``searchsorted`` method of
    as many sorted addresses, with the same keys (the method, since ``numpy.searchsorted``
    adds a Python-level dispatch of ~1 us). Alternating rounds on the same core; the ratios are
    medians of the rounds' ratios, which load on the machine moves less than times."""
    rules, trace = rule_set(FIXED_COST_SET)
    table = RuleTable(*rules.args())
    searchsorted = np.sort(trace.dst[: len(rules)]).searchsorted
    columns = (trace.src, trace.dst, trace.src_port, trace.dst_port, trace.proto)
    info: dict = {"rules": len(rules), "calls a round": FIXED_COST_CALLS, "rounds": FIXED_COST_ROUNDS}
    batches = {keys: tuple(np.ascontiguousarray(c[:keys]) for c in columns) for keys in (1, BATCH)}
    with ForeignLoad() as load:
        for keys, batch in batches.items():
            labelled = trace.labelled[:keys]
            assert (table.lookup(*batch)[labelled] == trace.label[:keys][labelled]).all()
            isolane_s, numpy_s = [], []
            for _ in range(FIXED_COST_ROUNDS):
                isolane_s.append(_seconds_per_call(table.lookup, batch, FIXED_COST_CALLS))
                numpy_s.append(_seconds_per_call(searchsorted, (batch[1],), FIXED_COST_CALLS))
            info[f"isolane {keys} key(s) us (best)"] = min(isolane_s) * 1e6
            info[f"numpy {keys} key(s) us (best)"] = min(numpy_s) * 1e6
            info[f"isolane/numpy {keys} key(s)"] = statistics.median(i / n for i, n in zip(isolane_s, numpy_s))
        benchmark.group = "lookup call cost"
        benchmark.pedantic(table.lookup, args=batches[1], rounds=FIXED_COST_ROUNDS, iterations=FIXED_COST_CALLS)
    info["isolane ns a key beyond the first"] = (info[f"isolane {BATCH} key(s) us (best)"] - info["isolane 1 key(s) us (best)"]) * 1e3 / (BATCH - 1)
    info["other load (cores)"] = load.cores
    info["core"] = one_core
    benchmark.extra_info.update(info)
    bench_report[f"lookup call cost, {FIXED_COST_SET}"] = info
    assert info["isolane/numpy 1 key(s)"] < MAX_ONE_KEY_OVER_NUMPY, info


def test_dpdk_tool_parses_its_output(dpdk):
    """dpdk_acl's parser on a real run of the 1k set (skips when DPDK is unavailable)."""
    tool, why = dpdk
    if tool is None:
        pytest.skip(f"dpdk-test-acl unavailable: {why}")
    rules, trace = rule_set_paths("acl1_1k")
    r = tool.run(rules, trace, iters=2, verbose=1)
    assert r.ok, r.output[-2000:]
    assert r.packets == 200_000 and r.num_rules == 942
    assert r.mpps > 0 and r.table_bytes > 0 and r.build_pool_bytes > 0
    assert r.build_s is not None and 0 <= r.build_s < r.wall_s
    assert r.peak_rss_bytes > 10e6
