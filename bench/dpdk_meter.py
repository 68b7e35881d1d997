"""DPDK's rte_meter (srTCM, RFC 2697) as a side-by-side peer for isolane's meters.

Nothing is installed: Debian's ``libdpdk-dev`` (headers and ``librte_meter.a``) is fetched with
``apt-get download`` and unpacked with ``dpkg-deb -x`` into the cache directory ``dpdk_acl``
uses (``$ISOLANE_DPDK_DIR``, default ``/var/tmp/isolane-dpdk``), unless the headers are
installed. ``dpdk_meter.c`` is compiled there with the system C compiler, linked statically
against ``librte_meter.a``; it needs neither EAL nor hugepages (see its comment).

    import dpdk_meter
    peer, why = dpdk_meter.find()        # (DpdkMeter, "") or (None, reason)
    result = peer.run(meters, bytes_, times_ns, n_meters, cir, cbs, ebs, rounds, shift_ns)
    result.ns_per_packet, result.colors  # best round; green, yellow, red over all rounds

Environment knobs: ``ISOLANE_DPDK_DIR``, ``ISOLANE_DPDK_NO_FETCH`` (as for dpdk_acl), ``CC``.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import numpy as np

from dpdk_acl import CACHE, LIBDIR

SOURCE = Path(__file__).with_name("dpdk_meter.c")
PACKAGE = "libdpdk-dev"
TRAFFIC_DTYPE = np.dtype([("meter", "<u4"), ("bytes", "<u4"), ("time_ns", "<u8")])
COMPILE_FLAGS = ["-O3", "-march=native"]


@dataclasses.dataclass
class MeterResult:
    ns_per_packet: float
    colors: tuple[int, int, int]
    command: list[str]


class DpdkMeter:
    def __init__(self, binary: Path) -> None:
        self.binary = binary

    def command(self, traffic: Path, n_meters: int, cir: int, cbs: int, ebs: int, rounds: int, shift_ns: int) -> list[str]:
        return [str(self.binary), str(traffic), *(str(v) for v in (n_meters, cir, cbs, ebs, rounds, shift_ns))]

    def run(self, meters: np.ndarray, bytes_: np.ndarray, times_ns: np.ndarray, n_meters: int, cir: int, cbs: int, ebs: int,
            rounds: int, shift_ns: int) -> MeterResult:
        """Meter the packets (meter index, bytes, time) `rounds` times, each `shift_ns` later."""
        traffic = np.zeros(len(meters), dtype=TRAFFIC_DTYPE)
        traffic["meter"], traffic["bytes"], traffic["time_ns"] = meters, bytes_, times_ns
        with tempfile.TemporaryDirectory(prefix="isolane-dpdk-meter-") as tmp:
            path = Path(tmp) / "traffic.bin"
            traffic.tofile(path)
            command = self.command(path, n_meters, cir, cbs, ebs, rounds, shift_ns)
            out = subprocess.run(command, capture_output=True, text=True, check=True, timeout=1800).stdout
        match = re.search(r"ns_per_packet=([\d.]+) green=(\d+) yellow=(\d+) red=(\d+)", out)
        if match is None:
            raise RuntimeError(f"unexpected output of {command}: {out!r}")
        green, yellow, red = (int(match.group(i)) for i in (2, 3, 4))
        return MeterResult(float(match.group(1)), (green, yellow, red), command)


def _dpdk_root() -> tuple[Path | None, str]:
    """The directory holding include/dpdk and the static meter library: installed, cached, or
    fetched into the cache now."""
    for root in (Path("/usr"), CACHE / "root/usr"):
        if (root / "include/dpdk/rte_meter.h").exists() and (root / LIBDIR.removeprefix("usr/") / "librte_meter.a").exists():
            return root, ""
    if os.environ.get("ISOLANE_DPDK_NO_FETCH", "") in ("1", "true", "yes"):
        return None, f"no DPDK headers installed or in {CACHE} (fetching disabled)"
    if not (shutil.which("apt-get") and shutil.which("dpkg-deb")):
        return None, "no DPDK headers, and no apt-get/dpkg-deb to fetch them (not a Debian system)"
    debs = CACHE / "debs"
    debs.mkdir(parents=True, exist_ok=True)
    fetched = subprocess.run(["apt-get", "download", PACKAGE], cwd=debs, capture_output=True, text=True, timeout=300)
    if fetched.returncode != 0:
        return None, f"apt-get download {PACKAGE} failed: {fetched.stderr.strip()[-400:]}"
    for deb in debs.glob(f"{PACKAGE}_*.deb"):
        subprocess.run(["dpkg-deb", "-x", str(deb), str(CACHE / "root")], check=True, timeout=300)
    return _dpdk_root() if (CACHE / "root/usr/include/dpdk/rte_meter.h").exists() else (None, f"{PACKAGE} has no rte_meter.h")


def find() -> tuple[DpdkMeter | None, str]:
    """(DpdkMeter, "") once dpdk_meter.c is compiled against rte_meter, else (None, why not)."""
    compiler = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        return None, "no C compiler (cc, gcc or $CC)"
    root, why = _dpdk_root()
    if root is None:
        return None, why
    library = root / LIBDIR.removeprefix("usr/") / "librte_meter.a"
    includes = [f"-I{root / 'include/dpdk'}", f"-I{root / 'include/x86_64-linux-gnu/dpdk'}"]
    # The binary is named after everything it is built from, so a change rebuilds it.
    key = hashlib.sha256("\n".join([SOURCE.read_text(), compiler, *COMPILE_FLAGS, *includes, str(library)]).encode()).hexdigest()[:16]
    binary = CACHE / "build" / f"dpdk_meter-{key}"
    if not binary.exists():
        binary.parent.mkdir(parents=True, exist_ok=True)
        built = subprocess.run([compiler, *COMPILE_FLAGS, *includes, str(SOURCE), str(library), "-lm", "-o", str(binary)],
                               capture_output=True, text=True, timeout=300)
        if built.returncode != 0:
            return None, f"compiling {SOURCE.name} failed: {built.stderr.strip()[-400:]}"
    return DpdkMeter(binary), ""
