"""DPDK's ``dpdk-test-acl`` (rte_acl) as a side-by-side peer for isolane's RuleTable.

Nothing is installed: Debian's ``dpdk-dev`` package and the few shared libraries the tool
links against are fetched with ``apt-get download`` and unpacked with ``dpkg-deb -x`` into a
cache directory (``$ISOLANE_DPDK_DIR``, default ``/var/tmp/isolane-dpdk``). The tool runs
without NICs or hugepages (``--no-huge --no-pci``) on the ClassBench files as they are.

    import dpdk_acl
    tool, why = dpdk_acl.find()          # (DpdkAcl, "") or (None, reason)
    r = tool.run("acl1_10k", "acl1_10k_trace")
    r.mpps, r.build_s, r.table_bytes, r.build_pool_bytes, r.peak_rss_bytes

Command line (what ``run`` executes; see ``DpdkAcl.command``)::

    LD_LIBRARY_PATH=$D/root/usr/lib/x86_64-linux-gnu $D/root/usr/bin/dpdk-test-acl \\
        --no-huge -m 2048 --no-pci --no-telemetry --file-prefix=isolane-PID -l 0 \\
        --log-level=lib.acl:debug -- --rulesf=acl1_10k --rulenum=N --tracef=acl1_10k_trace \\
        --tracenum=N --iter=10 --tracestep=256 --alg=avx2 --verbose=1

Environment knobs:

    ISOLANE_DPDK_TEST_ACL   path of a dpdk-test-acl binary to use as is
    ISOLANE_DPDK_DIR        cache directory for the unpacked packages (/var/tmp/isolane-dpdk)
    ISOLANE_DPDK_NO_FETCH   set to 1 to never run apt-get (use only what is already there)

Run as a script to print the numbers for rule sets of ../shared/classbench::

    python bench/dpdk_acl.py acl1_10k fw1_10k ipc1_10k [--alg avx2] [--iter 10]
"""

from __future__ import annotations

import dataclasses
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

CACHE = Path(os.environ.get("ISOLANE_DPDK_DIR", "/var/tmp/isolane-dpdk"))
LIBDIR = "usr/lib/x86_64-linux-gnu"

# dpdk-test-acl's own package and the shared libraries it links against that a plain Debian
# system lacks (everything else it needs, libc/libnuma/..., is in the base system; anything
# still missing is reported by ldd and makes find() return a reason).
PACKAGES = (
    "dpdk-dev",
    "librte-acl23",
    "librte-eal23",
    "librte-kvargs23",
    "librte-telemetry23",
    "librte-net23",
    "librte-mbuf23",
    "librte-mempool23",
    "librte-ring23",
    "libfdt1",
)

SHARED = Path(__file__).resolve().parents[1].parent / "shared"
CLASSBENCH = SHARED / "classbench"


@dataclasses.dataclass
class DpdkResult:
    """What one dpdk-test-acl run reported (None where it did not say)."""

    rules_file: str
    alg: str
    tracestep: int
    iterations: int
    packets: int | None = None  # packets classified over all iterations
    mpps: float | None = None  # its own pkt/sec over the search loop, / 1e6
    cycles_per_pkt: float | None = None
    num_rules: int | None = None
    num_tries: int | None = None
    table_bytes: int | None = None  # "runtime memory footprint ... total" (the lookup tables)
    build_pool_bytes: int | None = None  # "memory consumed" by the build phase's node pool
    build_s: float | None = None  # wall time from the end of its config dump to "finished"
    peak_rss_bytes: int | None = None  # the process's ru_maxrss (build and search)
    wall_s: float | None = None
    returncode: int | None = None
    matches: list[int] | None = None  # with verbose=3: the result for each trace line
    command: list[str] = dataclasses.field(default_factory=list)
    output: str = ""

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and self.mpps is not None

    def summary(self) -> dict:
        d = {
            "DPDK Mpps": self.mpps,
            "DPDK cycles/pkt": self.cycles_per_pkt,
            "DPDK build s": self.build_s,
            "DPDK table MB": None if self.table_bytes is None else self.table_bytes / 1e6,
            "DPDK build pool MB": None if self.build_pool_bytes is None
            else self.build_pool_bytes / 1e6,
            "DPDK peak RSS MB": None if self.peak_rss_bytes is None
            else self.peak_rss_bytes / 1e6,
            "DPDK tries": self.num_tries,
        }
        return {k: v for k, v in d.items() if v is not None}


_SEARCH_RE = re.compile(
    r"search_ip5tuples\s+@lcore\s+\d+:\s+(\d+)\s+iterations,\s+(\d+)\s+pkts,.*?"
    r"([\d.]+)\s+cycles/pkt,\s+([\d.]+)\s+pkt/sec")


def parse_output(text: str, result: DpdkResult) -> DpdkResult:
    """Fill ``result`` from dpdk-test-acl's output (verbose>=1 and lib.acl debug logs)."""
    m = _SEARCH_RE.search(text)
    if m:
        result.packets = int(m.group(2))
        result.cycles_per_pkt = float(m.group(3))
        result.mpps = float(m.group(4)) / 1e6
    for key, pat, conv in (
        ("num_rules", r"^\s*num_rules=(\d+)", int),
        ("num_tries", r"^\s*num_tries=(\d+)", int),
        ("table_bytes", r"^total:\s*(\d+)\s*bytes", int),
        ("build_pool_bytes", r"^memory consumed:\s*(\d+)", int),
    ):
        mm = re.search(pat, text, re.M)
        if mm:
            setattr(result, key, conv(mm.group(1)))
    if "result:" in text:
        res = re.findall(r"^ipv4_5tuple:\s*(\d+), category: 0, result:\s*(-?\d+)", text, re.M)
        if res:
            result.matches = [int(r) for _, r in res]
    return result


def _line_count(path: Path) -> int:
    with open(path, "rb") as f:
        return sum(1 for line in f if line.strip())


def _avx2() -> bool:
    try:
        return " avx2" in Path("/proc/cpuinfo").read_text()
    except OSError:
        return False


class DpdkAcl:
    """A runnable dpdk-test-acl: the binary and the LD_LIBRARY_PATH it needs."""

    def __init__(self, binary: Path, libdir: Path | None):
        self.binary = Path(binary)
        self.libdir = libdir

    def __repr__(self):
        return f"DpdkAcl({self.binary})"

    def env(self) -> dict:
        env = dict(os.environ)
        if self.libdir is not None:
            env["LD_LIBRARY_PATH"] = str(self.libdir) + (
                ":" + env["LD_LIBRARY_PATH"] if env.get("LD_LIBRARY_PATH") else "")
        return env

    def command(self, rules: Path, trace: Path | None, *, alg: str = "avx2", iters: int = 10,
                tracestep: int = 256, mem_mb: int = 2048, rulenum: int | None = None,
                tracenum: int | None = None, verbose: int = 1, prefix: str = "isolane",
                lcore: int = 0) -> list[str]:
        rules = Path(rules)
        rulenum = rulenum or _line_count(rules) + 16
        eal = [str(self.binary), "--no-huge", "-m", str(mem_mb), "--no-pci", "--no-telemetry",
               f"--file-prefix={prefix}", "-l", str(lcore), "--log-level=lib.acl:debug"]
        if alg.startswith("avx512"):
            eal.append("--force-max-simd-bitwidth=512")
        app = ["--", f"--rulesf={rules}", f"--rulenum={rulenum}", f"--iter={iters}",
               f"--tracestep={tracestep}", f"--alg={alg}", f"--verbose={verbose}"]
        if trace is not None:
            trace = Path(trace)
            tracenum = tracenum or _line_count(trace)
            app[2:2] = [f"--tracef={trace}", f"--tracenum={tracenum}"]
        return eal + app

    def run(self, rules, trace=None, *, alg: str = "avx2", iters: int = 10,
            tracestep: int = 256, mem_mb: int = 2048, verbose: int = 1,
            timeout: float = 600.0, lcore: int = 0) -> DpdkResult:
        """Build the rules and classify the trace ``iters`` times; parse what it prints.

        ``build_s`` is the wall time between the end of its configuration dump and its
        "rte_acl_build ... finished" line (rule parsing + ``rte_acl_build``; the trace file is
        read before the dump). ``peak_rss_bytes`` is the child's ru_maxrss."""
        rules = Path(rules)
        if not rules.is_absolute() and not rules.exists():
            rules = CLASSBENCH / rules
        if trace is not None:
            trace = Path(trace)
            if not trace.is_absolute() and not trace.exists():
                trace = CLASSBENCH / trace
        prefix = f"isolane-{os.getpid()}-{threading.get_ident() % 100000}"
        cmd = self.command(rules, trace, alg=alg, iters=iters, tracestep=tracestep,
                           mem_mb=mem_mb, verbose=verbose, prefix=prefix, lcore=lcore)
        stdbuf = shutil.which("stdbuf")
        if stdbuf:  # line-buffered, so that line timestamps mean something
            cmd = [stdbuf, "-oL", "-eL"] + cmd
        res = DpdkResult(rules_file=rules.name, alg=alg, tracestep=tracestep, iterations=iters,
                         command=cmd)
        lines: list[str] = []
        t_cfg = t_built = None
        t0 = time.perf_counter()
        with tempfile.TemporaryDirectory(prefix="isolane-dpdk-") as rundir:
            # --file-prefix keeps EAL's runtime files (/var/run/dpdk/PREFIX) apart per run;
            # they are removed afterwards
            p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                 stdin=subprocess.DEVNULL, env=self.env(), cwd=rundir,
                                 text=True, errors="replace")
            timer = threading.Timer(timeout, p.kill)
            timer.start()
            try:
                assert p.stdout is not None
                for line in p.stdout:
                    now = time.perf_counter()
                    if line.startswith("ipv6:") and t_cfg is None:
                        t_cfg = now
                    elif "rte_acl_build(" in line and "finished" in line:
                        t_built = now
                    lines.append(line)
                _, status, ru = os.wait4(p.pid, 0)
                p.returncode = os.waitstatus_to_exitcode(status)
            finally:
                timer.cancel()
                if p.returncode is None:
                    p.kill()
                    p.wait()
                for d in (Path("/var/run/dpdk") / prefix,
                          Path(os.environ.get("XDG_RUNTIME_DIR", "/nonexistent")) / "dpdk"
                          / prefix):
                    shutil.rmtree(d, ignore_errors=True)
        res.wall_s = time.perf_counter() - t0
        res.returncode = p.returncode
        res.peak_rss_bytes = ru.ru_maxrss * 1024
        if t_cfg is not None and t_built is not None:
            res.build_s = t_built - t_cfg
        res.output = "".join(lines)
        return parse_output(res.output, res)


def _missing_libs(binary: Path, libdir: Path | None) -> list[str]:
    env = dict(os.environ)
    if libdir is not None:
        env["LD_LIBRARY_PATH"] = str(libdir)
    try:
        out = subprocess.run(["ldd", str(binary)], capture_output=True, text=True, env=env,
                             timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    return [ln.split()[0] for ln in out.splitlines() if "not found" in ln]


def _fetch(cache: Path) -> str:
    """apt-get download + dpkg-deb -x of PACKAGES into cache/root; '' or what failed."""
    if not (shutil.which("apt-get") and shutil.which("dpkg-deb")):
        return "apt-get/dpkg-deb not available (not a Debian system)"
    debs = cache / "debs"
    debs.mkdir(parents=True, exist_ok=True)

    def download():
        return subprocess.run(["apt-get", "download", *PACKAGES], cwd=debs,
                              capture_output=True, text=True, timeout=300)

    r = download()
    if r.returncode != 0 and os.geteuid() == 0:  # package lists may not have been fetched
        subprocess.run(["apt-get", "update"], capture_output=True, timeout=300)
        r = download()
    if r.returncode != 0:
        return f"apt-get download {' '.join(PACKAGES)} failed: {r.stderr.strip()[-400:]}"
    root = cache / "root"
    root.mkdir(parents=True, exist_ok=True)
    for deb in sorted(debs.glob("*.deb")):
        x = subprocess.run(["dpkg-deb", "-x", str(deb), str(root)], capture_output=True,
                           text=True, timeout=300)
        if x.returncode != 0:
            return f"dpkg-deb -x {deb.name} failed: {x.stderr.strip()[-400:]}"
    return ""


_FOUND: tuple[DpdkAcl | None, str] | None = None


def find(fetch: bool | None = None) -> tuple[DpdkAcl | None, str]:
    """(DpdkAcl, "") when dpdk-test-acl can run here, else (None, why not).

    Looks at $ISOLANE_DPDK_TEST_ACL, then an installed dpdk-test-acl, then the cache
    directory, and finally downloads and unpacks the packages there (unless fetch is False or
    $ISOLANE_DPDK_NO_FETCH=1). The answer is remembered for the process."""
    global _FOUND
    if _FOUND is not None and _FOUND[0] is not None:
        return _FOUND
    if fetch is None:
        fetch = os.environ.get("ISOLANE_DPDK_NO_FETCH", "") not in ("1", "true", "yes")
    if not sys.platform.startswith("linux"):
        return None, "dpdk-test-acl comparison runs on Linux only"
    candidates: list[tuple[Path, Path | None]] = []
    env_bin = os.environ.get("ISOLANE_DPDK_TEST_ACL")
    if env_bin:
        candidates.append((Path(env_bin), None))
    installed = shutil.which("dpdk-test-acl")
    if installed:
        candidates.append((Path(installed), None))
    cached = CACHE / "root/usr/bin/dpdk-test-acl"
    candidates.append((cached, CACHE / "root" / LIBDIR))
    reasons = []
    for attempt in range(2):
        for binary, libdir in candidates:
            if not binary.exists():
                continue
            missing = _missing_libs(binary, libdir)
            if missing:
                reasons.append(f"{binary}: missing shared libraries {missing}")
                continue
            _FOUND = (DpdkAcl(binary, libdir), "")
            return _FOUND
        if attempt == 0:
            if not fetch:
                reasons.append(f"no dpdk-test-acl installed or in {CACHE} (fetching disabled)")
                break
            err = _fetch(CACHE)
            if err:
                reasons.append(err)
                break
    _FOUND = (None, "; ".join(reasons) or "dpdk-test-acl not found")
    return _FOUND


def default_alg() -> str:
    return "avx2" if _avx2() else "sse"


def main(argv: list[str]) -> int:
    import argparse

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("sets", nargs="*", default=["acl1_10k", "fw1_10k", "ipc1_10k"])
    ap.add_argument("--alg", default=default_alg())
    ap.add_argument("--iter", type=int, default=10)
    ap.add_argument("--tracestep", type=int, default=256)
    ap.add_argument("-m", "--mem-mb", type=int, default=2048)
    ap.add_argument("--repeat", type=int, default=1, help="runs per set (median reported)")
    ap.add_argument("--lcore", type=int, default=0, help="the core it runs on (-l)")
    args = ap.parse_args(argv)
    tool, why = find()
    if tool is None:
        print(f"dpdk-test-acl unavailable: {why}")
        return 1
    print(f"# {tool.binary}  alg={args.alg} iter={args.iter} tracestep={args.tracestep} "
          f"lcore={args.lcore}")
    for name in args.sets:
        runs = []
        for _ in range(args.repeat):
            r = tool.run(name, f"{name}_trace", alg=args.alg, iters=args.iter,
                         tracestep=args.tracestep, mem_mb=args.mem_mb, lcore=args.lcore)
            if not r.ok:
                print(f"{name}: failed (rc={r.returncode}):\n{r.output[-2000:]}")
                break
            runs.append(r)
        if not runs:
            continue
        runs.sort(key=lambda r: r.mpps)
        r = runs[len(runs) // 2]
        mpps = ", ".join(f"{x.mpps:.2f}" for x in runs)
        print(f"{name}: {r.mpps:.2f} Mpps (runs: {mpps}), {r.cycles_per_pkt:.0f} cycles/pkt, "
              f"build {r.build_s:.2f} s, table {r.table_bytes / 1e6:.1f} MB, "
              f"build pool {r.build_pool_bytes / 1e6:.0f} MB, "
              f"peak RSS {r.peak_rss_bytes / 1e6:.0f} MB, tries {r.num_tries}, "
              f"wall {r.wall_s:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
