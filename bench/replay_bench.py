"""`isolane replay` end to end beside its peers on the same capture (issue 18): wall time from
process start to report written, packets and bytes a second, and peak resident memory, for

- isolane: ``isolane replay CAPTURE --policy POLICY -o REPORT``, default options, as a user runs it;
- dpkt: a script that reads the capture and counts packets and bytes per VNI (`dpkt_vni_counts`);
- tshark: ``tshark -r CAPTURE -T fields -e vxlan.vni``, counted per VNI.

Each runs as a process of its own, started by a small launcher process whose ``os.wait4`` gives
its peak RSS (a child forked from this benchmark would inherit the benchmark's own high-water mark). The peers' per-VNI counts
are checked against isolane's per-tenant packets (the policy's tenant ``i`` has VNI ``5000 + i``).

    python bench/replay_bench.py [BYTES [RUNS]]   # writes the workload to $ISOLANE_BENCH_DIR or /var/tmp/isolane-bench

It also times the engine's pass alone (``Engine.process`` of every batch and ``drain``, in a
process of its own) with and without the timeline ``isolane replay`` keeps, to say what it costs.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import replay_workload
from machine_load import ForeignLoad


@dataclass
class Run:
    """One process: its wall time, its peak RSS and what it printed."""

    seconds: float
    peak_rss_bytes: int
    stdout: str


LAUNCHER = """
import os, subprocess, sys
process = subprocess.Popen(sys.argv[2:])
_, status, usage = os.wait4(process.pid, 0)
with open(sys.argv[1], "w") as peak:
    peak.write(str(usage.ru_maxrss))
sys.exit(os.waitstatus_to_exitcode(status))
"""
"""Runs a command and writes its peak RSS (KiB) to a file. Linux carries a process's RSS
high-water mark across fork and exec: measured from the benchmark's own process, a child would
report at least the benchmark's peak; from this small process, its own."""


def run_process(command: list[str]) -> Run:
    """Runs ``command`` to its end, through :data:`LAUNCHER`, which gives its own peak RSS."""
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err, tempfile.NamedTemporaryFile("r") as peak:
        start = time.perf_counter()
        process = subprocess.run([sys.executable, "-c", LAUNCHER, peak.name, *command], stdout=out, stderr=err, text=True)
        seconds = time.perf_counter() - start
        out.seek(0), err.seek(0)
        if process.returncode != 0:
            raise RuntimeError(f"{' '.join(command)} failed ({process.returncode}): {err.read().strip()}")
        return Run(seconds, int(peak.read()) * 1024, out.read())


def isolane_command(capture: Path, policy: Path, report: Path) -> list[str]:
    return [shutil.which("isolane") or "isolane", "replay", str(capture), "--policy", str(policy), "-o", str(report)]


def dpkt_vni_counts(capture: str | os.PathLike[str]) -> dict[int, tuple[int, int]]:
    """VNI -> (packets, frame bytes) of the VXLAN packets (UDP 4789, I flag) of a capture: what a
    user's script would do with dpkt to see each tenant's traffic."""
    import dpkt

    counts: dict[int, list[int]] = {}
    with open(capture, "rb") as f:
        for _ts, frame in dpkt.pcap.Reader(f):
            ip = dpkt.ethernet.Ethernet(frame).data
            udp = getattr(ip, "data", None)
            if isinstance(udp, dpkt.udp.UDP) and udp.dport == 4789 and len(udp.data) >= 8 and udp.data[0] & 0x08:
                entry = counts.setdefault(int.from_bytes(udp.data[4:7], "big"), [0, 0])
                entry[0] += 1
                entry[1] += len(frame)
    return {vni: (packets, size) for vni, (packets, size) in counts.items()}


def dpkt_command(capture: Path) -> list[str]:
    return [sys.executable, str(Path(__file__)), "dpkt", str(capture)]


def dpkt_vni_packets(stdout: str) -> dict[int, int]:
    """VNI -> packets, from what ``dpkt_command`` printed."""
    return {int(vni): packets for vni, packets in json.loads(stdout).items()}


def tshark_command(capture: Path) -> list[str] | None:
    tshark = shutil.which("tshark")
    return [tshark, "-n", "-r", str(capture), "-T", "fields", "-e", "vxlan.vni"] if tshark else None


def tshark_vni_packets(stdout: str) -> dict[int, int]:
    return {int(vni): count for vni, count in Counter(stdout.split()).items()}


def isolane_tenant_packets(capture: Path, policy: Path) -> dict[int, int]:
    """VNI -> packets of each tenant, from ``isolane replay --json`` (a run of its own, untimed)."""
    report = json.loads(run_process([*isolane_command(capture, policy, Path(os.devnull))[:-2], "--json"]).stdout)
    return {replay_workload.FIRST_VNI + int(t["tenant"][1:]): t["packets"] for t in report["tenants"] if t["tenant"] is not None}


def engine_pass(capture: str, policy: str, timeline: bool) -> float:
    """Seconds of ``Engine.process`` over the capture, batch after batch as ``isolane replay``
    reads it, then ``drain``: with ``timeline``, keeping the timeline as replay does."""
    import isolane
    from isolane import _core

    engine = isolane.Engine(isolane.Policy.from_file(policy))
    if timeline:
        engine.keep_timeline(10_000)
    start = time.perf_counter()
    for batch in _core.PcapIterator(capture, 65536):
        engine.process(batch)
    engine.drain()
    if timeline:
        engine.timeline()
    return time.perf_counter() - start


def engine_pass_command(capture: Path, policy: Path, timeline: bool) -> list[str]:
    return [sys.executable, str(Path(__file__)), "engine-pass", str(capture), str(policy), str(int(timeline))]


def measure(command: list[str], runs: int) -> tuple[list[Run], float]:
    """``runs`` runs of ``command`` and the other processes' load meanwhile (cores; the runs'
    own CPU, which ``ForeignLoad`` sees as another process's, taken out)."""
    children_before, start = sum(os.times()[2:4]), time.perf_counter()
    with ForeignLoad() as load:
        results = [run_process(command) for _ in range(runs)]
    own = (sum(os.times()[2:4]) - children_before) / (time.perf_counter() - start)
    return results, max(0.0, load.cores - own)


def summary(name: str, results: list[Run], packets: int, size: int) -> str:
    times = sorted(r.seconds for r in results)
    best, median = times[0], statistics.median(times)
    rss = max(r.peak_rss_bytes for r in results) / 2**20
    return f"{name:8} best {best:6.2f} s  median {median:6.2f} s  {packets / best / 1e6:5.2f} Mpps  {size / best / 1e9:5.3f} GB/s  peak RSS {rss:6.0f} MiB"


def main(target_bytes: int, runs: int) -> None:
    directory = Path(os.environ.get("ISOLANE_BENCH_DIR", "/var/tmp/isolane-bench"))
    capture, policy = replay_workload.workload(directory, target_bytes)
    packets, size = replay_workload.packet_count(target_bytes), capture.stat().st_size
    report = directory / "report.txt"
    commands = {"isolane": isolane_command(capture, policy, report), "dpkt": dpkt_command(capture), "tshark": tshark_command(capture)}
    for name, command in commands.items():
        if command is None:
            print(f"{name}: not installed")
            continue
        results, load = measure(command, runs if name == "isolane" else 1)
        print(f"{summary(name, results, packets, size)}  (other load {load:.2f} cores)")
    for timeline in (False, True, False, True):  # alternating: the machine's load drifts
        results, load = measure(engine_pass_command(capture, policy, timeline), runs)
        seconds = sorted(float(r.stdout) for r in results)
        rss = max(r.peak_rss_bytes for r in results) / 2**20
        print(
            f"Engine.process + drain, timeline {'on ' if timeline else 'off'}: best {seconds[0]:.3f} s ({seconds[0] / packets * 1e9:.0f} ns a packet), "
            f"median {statistics.median(seconds):.3f} s, peak RSS {rss:.0f} MiB (other load {load:.2f} cores)"
        )


if __name__ == "__main__":
    if sys.argv[1:2] == ["engine-pass"]:
        print(engine_pass(sys.argv[2], sys.argv[3], sys.argv[4] == "1"))
    elif sys.argv[1:2] == ["dpkt"]:
        counts = dpkt_vni_counts(sys.argv[2])
        print(json.dumps({str(vni): packets for vni, (packets, _) in sorted(counts.items())}))
    else:
        main(int(float(sys.argv[1])) if len(sys.argv) > 1 else 1_000_000_000, int(sys.argv[2]) if len(sys.argv) > 2 else 5)
