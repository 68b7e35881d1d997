"""Reading YAML policies: isolane's loader (Rust, YAML 1.2) against PyYAML's CSafeLoader (libyaml
parsing, Python constructing) and SafeLoader (all Python), parse only, on a 10,000-tenant policy
and on one tenant of 100,000 rules, both written by yaml.safe_dump.

    python -m pytest bench/test_policy_load_bench.py --benchmark-only -s
    python -m pytest bench/test_policy_load_bench.py -m slow -s   # SafeLoader (seconds a parse)

Times are medians of 3 parses of text already in memory. Peak memory is measured in a subprocess
per loader: how far the parse raises the peak RSS (VmHWM) above where it stood with the text read.
The gates are ratios measured in the same run, never wall-clock limits.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml  # type: ignore[import-untyped]

from isolane import _core

# Measured (2 cores shared with other work): isolane 16-25x as fast as CSafeLoader and 73-84x as
# fast as SafeLoader, at 0.41-0.45x CSafeLoader's peak; the gates leave room for a busy machine.
MIN_OVER_CSAFELOADER = 3
MIN_OVER_SAFELOADER = 10
# isolane's peak holds its own tree and the Python objects at once; PyYAML's holds its nodes and
# the Python objects.
MAX_PEAK_OVER_CSAFELOADER = 1.5

TENANTS = 10_000
RULES = 100_000


def tenants_policy() -> dict[str, Any]:
    return {
        "tenants": [
            {
                "name": f"t{i}",
                "vnis": [i + 1],
                "rate": "10Mbps",
                "ceil": "1Gbps",
                "meter": {"kind": "srtcm", "cir": "10Mbps"},
                "rules": [{"dst": f"10.{i // 256}.{i % 256}.0/24", "dst_ports": 443, "proto": "tcp", "action": "allow"}],
            }
            for i in range(TENANTS)
        ]
    }


def rules_policy() -> dict[str, Any]:
    rules = [{"dst": f"10.{i // 65536}.{i // 256 % 256}.{i % 256}/32", "dst_ports": 1000 + i % 5000, "proto": "tcp", "action": "allow"} for i in range(RULES)]
    return {"tenants": [{"name": "big", "vnis": [1], "rules": rules}]}


SHAPES: dict[str, Callable[[], dict[str, Any]]] = {f"{TENANTS:_}-tenants": tenants_policy, f"{RULES:_}-rules": rules_policy}

LOADERS: dict[str, Callable[[str], Any]] = {
    "isolane": _core.load_yaml,
    "CSafeLoader": lambda text: yaml.load(text, Loader=yaml.CSafeLoader),  # noqa: S506 (a safe loader)
    "SafeLoader": lambda text: yaml.load(text, Loader=yaml.SafeLoader),  # noqa: S506
}


@pytest.fixture(scope="module")
def policy_files(data_dir: Path) -> dict[str, Path]:
    """The policies as YAML files (kept in $ISOLANE_BENCH_DIR between runs, when it is set)."""
    files = {}
    for shape, make in SHAPES.items():
        path = data_dir / f"policy-{shape}.yaml"
        if not path.exists():
            # libyaml's emitter writes what safe_dump writes (the same text, checked), ~5x sooner.
            dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
            path.write_text(yaml.dump(make(), Dumper=dumper, sort_keys=False), encoding="utf-8")
        files[shape] = path
    return files


def median_seconds(load: Callable[[str], Any], text: str, rounds: int = 3) -> tuple[float, Any]:
    seconds, loaded = [], None
    for _ in range(rounds):
        loaded = None  # the previous result is freed before the next parse
        start = time.perf_counter()
        loaded = load(text)
        seconds.append(time.perf_counter() - start)
    return statistics.median(seconds), loaded


def against(benchmark: Any, bench_report: dict[str, dict[str, Any]], policy_files: dict[str, Path], shape: str, peer: str) -> float:
    """isolane's median parse time and the peer's, with both results compared; returns the ratio."""
    text = policy_files[shape].read_text(encoding="utf-8")
    benchmark.group = f"load a YAML policy ({shape})"
    ours = benchmark.pedantic(_core.load_yaml, args=(text,), rounds=3, iterations=1)
    ours_seconds = benchmark.stats.stats.median
    peer_seconds, theirs = median_seconds(LOADERS[peer], text)
    assert ours == theirs
    ratio = peer_seconds / ours_seconds
    info = {
        "file MB": len(text.encode()) / 1e6,
        f"isolane ms (vs {peer})": ours_seconds * 1e3,
        f"{peer} ms": peer_seconds * 1e3,
        f"{peer} / isolane": ratio,
    }
    benchmark.extra_info.update(info)
    bench_report.setdefault(f"YAML policy, {shape}", {}).update(info)
    return ratio


@pytest.mark.parametrize("shape", SHAPES)
def test_against_libyaml(benchmark: Any, bench_report: dict[str, dict[str, Any]], policy_files: dict[str, Path], shape: str) -> None:
    ratio = against(benchmark, bench_report, policy_files, shape, "CSafeLoader")
    assert ratio >= MIN_OVER_CSAFELOADER, f"isolane only {ratio:.1f}x as fast as CSafeLoader"


@pytest.mark.slow
@pytest.mark.parametrize("shape", SHAPES)
def test_against_pure_python_pyyaml(benchmark: Any, bench_report: dict[str, dict[str, Any]], policy_files: dict[str, Path], shape: str) -> None:
    ratio = against(benchmark, bench_report, policy_files, shape, "SafeLoader")
    assert ratio >= MIN_OVER_SAFELOADER, f"isolane only {ratio:.1f}x as fast as SafeLoader"


_PEAK_SCRIPT = """
import json, sys, time
sys.path.insert(0, sys.argv[3])
import yaml
from isolane import _core
from test_policy_load_bench import LOADERS

def hwm():
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024

text = open(sys.argv[1], encoding="utf-8").read()
before = hwm()
start = time.perf_counter()
loaded = LOADERS[sys.argv[2]](text)
print(json.dumps({"seconds": time.perf_counter() - start, "growth": hwm() - before}))
"""


def peak_growth(path: Path, loader: str) -> dict[str, float]:
    run = [sys.executable, "-c", _PEAK_SCRIPT, str(path), loader, str(Path(__file__).resolve().parent)]
    out = subprocess.run(run, check=True, capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("shape", SHAPES)
def test_peak_memory(bench_report: dict[str, dict[str, Any]], policy_files: dict[str, Path], shape: str) -> None:
    ours, libyaml = (peak_growth(policy_files[shape], loader)["growth"] for loader in ("isolane", "CSafeLoader"))
    bench_report.setdefault(f"YAML policy, {shape}", {}).update({"isolane peak MB": ours / 1e6, "CSafeLoader peak MB": libyaml / 1e6})
    assert ours <= MAX_PEAK_OVER_CSAFELOADER * libyaml, f"isolane's peak {ours / 1e6:.0f} MB, CSafeLoader's {libyaml / 1e6:.0f} MB"


@pytest.mark.slow
@pytest.mark.parametrize("shape", SHAPES)
def test_peak_memory_of_pure_python_pyyaml(bench_report: dict[str, dict[str, Any]], policy_files: dict[str, Path], shape: str) -> None:
    growth = peak_growth(policy_files[shape], "SafeLoader")["growth"]
    bench_report.setdefault(f"YAML policy, {shape}", {})["SafeLoader peak MB"] = growth / 1e6
