"""Fixtures for the isolane benchmarks: generated VXLAN traffic, in memory and as pcap files.

Files go to a session temporary directory, or to ``$ISOLANE_BENCH_DIR`` if set, where they
are kept and reused by later runs (the 2 GB file takes ~15-30 s to write).

Environment knobs (all optional):

    ISOLANE_BENCH_DIR        directory for the generated pcaps (kept between runs)
    ISOLANE_BENCH_N          packets in the in-memory batch and the "1M" pcap (1000000)
    ISOLANE_BENCH_BIG_BYTES  size of the big pcap for iter_pcap (2000000000)
    ISOLANE_BENCH_DPKT_N     dpkt prefix length (50000)
    ISOLANE_BENCH_SCAPY_N    scapy prefix length (3000)
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import traffic  # bench/ is on pytest's pythonpath (pyproject.toml)


def _env_int(name: str, default: int) -> int:
    v = os.environ.get(name, "").replace("_", "")
    return int(float(v)) if v else default


N_PACKETS = _env_int("ISOLANE_BENCH_N", traffic.DEFAULT_N)
BIG_BYTES = _env_int("ISOLANE_BENCH_BIG_BYTES", 2_000_000_000)
DPKT_N = _env_int("ISOLANE_BENCH_DPKT_N", 50_000)
SCAPY_N = _env_int("ISOLANE_BENCH_SCAPY_N", 3_000)
SEED = 0

# Filled by the benchmarks, printed at the end of the session (pytest_terminal_summary).
REPORT: dict[str, dict] = {}


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    if not REPORT:
        return
    tr = terminalreporter
    tr.section("isolane benchmark summary")
    for name, info in REPORT.items():
        tr.write_line(f"{name}:")
        for k, v in info.items():
            if isinstance(v, float):
                v = f"{v:,.3f}" if abs(v) < 1000 else f"{v:,.0f}"
            tr.write_line(f"    {k:<28} {v}")


@pytest.fixture(scope="session")
def bench_report():
    """Dict name -> dict of figures, printed in the terminal summary."""
    return REPORT


@pytest.fixture(scope="session")
def peer_limits() -> dict:
    """How many packets each peer parser reads (a prefix of the 1M pcap)."""
    return {"dpkt": DPKT_N, "scapy": SCAPY_N}


@pytest.fixture(scope="session")
def data_dir(tmp_path_factory) -> Path:
    d = os.environ.get("ISOLANE_BENCH_DIR")
    if d:
        p = Path(d)
        p.mkdir(parents=True, exist_ok=True)
        return p
    return tmp_path_factory.mktemp("isolane-bench")


def warm_page_cache(path, block: int = 16 << 20) -> int:
    """Read the whole file once (so the benchmarks measure parsing, not the disk)."""
    total = 0
    buf = bytearray(block)
    with open(path, "rb", buffering=0) as f:
        while True:
            k = f.readinto(buf)
            if not k:
                return total
            total += k


def _cached_pcap(path: Path, n: int) -> Path:
    """Write the standard VXLAN pcap of n packets to path unless it is already there."""
    want = traffic.PCAP_GLOBAL_HEADER_LEN + traffic.PCAP_RECORD_LEN * n
    if not (path.exists() and path.stat().st_size == want):
        traffic.write_vxlan_pcap(path, n, seed=SEED)
    return path


@pytest.fixture(scope="session")
def vxlan_traffic() -> traffic.Traffic:
    """N_PACKETS (1M) VXLAN packets in memory, with ground truth (~150 MB)."""
    return traffic.make_vxlan_traffic(N_PACKETS, seed=SEED)


@pytest.fixture(scope="session")
def vxlan_pcap(data_dir) -> Path:
    """Classic ns pcap of the same N_PACKETS packets as ``vxlan_traffic`` (~130 MB for 1M),
    page-cached."""
    p = _cached_pcap(data_dir / f"vxlan_n{N_PACKETS}_s{SEED}.pcap", N_PACKETS)
    warm_page_cache(p)
    return p


@pytest.fixture(scope="session")
def vxlan_pcap_big(data_dir) -> tuple[Path, int]:
    """(path, packet count) of a VXLAN pcap of at most BIG_BYTES bytes (2 GB), page-cached."""
    n = traffic.pcap_packet_count(BIG_BYTES)
    p = _cached_pcap(data_dir / f"vxlan_{BIG_BYTES}B_s{SEED}.pcap", n)
    warm_page_cache(p)
    return p, n
