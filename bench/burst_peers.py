"""What a user has today for finding microbursts in a capture, for bench/test_burst_bench.py to
run beside ``isolane.Engine``: a numpy script that bins bytes per tenant at the window, and
``tshark -z io,stat`` at its finest useful interval.

* :func:`dpkt_numpy_bins` is the script a user would write: dpkt reads each packet's
  timestamp, its length on the wire and its VNI; numpy sums the bytes of each (tenant, bin) of
  ``window_ns`` and keeps the bins over ``limit_bytes``. Bins are fixed, from the epoch, as any
  binning script has them (a burst that straddles two bins is halved between them).
* :func:`numpy_bins` is its numpy part alone, which :func:`records_numpy_bins` also runs on
  ``isolane.parse``'s records (the same script with a fast reader).
* :func:`tshark_io_stat` runs ``tshark -q -z io,stat,<interval>`` on the whole capture and parses
  its table: frames and bytes per interval of the port, with no tenants.

Everything is timed around the whole job (reading the file included); comparisons with the
injected bursts are left to the bench.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

__all__ = [
    "ALARM_DTYPE",
    "BinResult",
    "IoStat",
    "VXLAN_PORT",
    "dpkt_numpy_bins",
    "find_tshark",
    "numpy_bins",
    "parse_io_stat",
    "records_numpy_bins",
    "tshark_io_stat",
]

VXLAN_PORT = 4789
NS = 1_000_000_000

ALARM_DTYPE = np.dtype([("vni", "<i8"), ("start_ns", "<i8"), ("end_ns", "<i8"), ("bytes", "<i8")])
"""One alarm of a binning script: a tenant (by VNI), the time it covers, its bytes."""


@dataclass
class BinResult:
    flagged: np.ndarray  # ALARM_DTYPE: one row per (tenant, bin) over the limit, by VNI then time
    packets: int
    read_s: float  # reading the capture (dpkt), 0 when given arrays
    bin_s: float  # the numpy part

    @property
    def seconds(self) -> float:
        return self.read_s + self.bin_s


def numpy_bins(times_ns: np.ndarray, wire_len: np.ndarray, vni: np.ndarray, window_ns: int, limit_bytes: int) -> np.ndarray:
    """The (VNI, bin) pairs whose bytes are over ``limit_bytes``, bins of ``window_ns`` from the
    epoch (ALARM_DTYPE rows, by VNI then time)."""
    bins = times_ns // window_ns
    first = bins.min() if len(bins) else 0
    key = (vni.astype(np.int64) << 40) | (bins - first)  # VNIs are 24 bits; 2^40 bins of 1 us is 12 days
    keys, inverse = np.unique(key, return_inverse=True)
    sums = np.bincount(inverse.ravel(), weights=wire_len).astype(np.int64)
    over = sums > limit_bytes
    out = np.empty(int(over.sum()), dtype=ALARM_DTYPE)
    out["vni"] = keys[over] >> 40
    out["start_ns"] = ((keys[over] & ((1 << 40) - 1)) + first) * window_ns
    out["end_ns"] = out["start_ns"] + window_ns
    out["bytes"] = sums[over]
    return out


def dpkt_numpy_bins(path: str | Path, window_ns: int, limit_bytes: int, vxlan_port: int = VXLAN_PORT) -> BinResult:
    """A user's script: dpkt for the timestamps, wire lengths and VNIs, numpy to bin them.

    The capture holds each frame's first bytes only (a snap length), so the length on the wire
    is the outer IPv4 header's total length plus the Ethernet header (dpkt's reader does not
    give the record's original length). dpkt gives a nanosecond capture's timestamps as
    ``Decimal``, which the script turns into whole nanoseconds (a float would be off by up to
    ~120 ns at today's epoch)."""
    import dpkt

    Ethernet, IP, UDP = dpkt.ethernet.Ethernet, dpkt.ip.IP, dpkt.udp.UDP
    times, lengths, vnis = [], [], []
    start = time.perf_counter()
    with open(path, "rb") as f:
        for ts, buf in dpkt.pcap.Reader(f):
            ip = Ethernet(buf).data
            if not isinstance(ip, IP):
                continue
            udp = ip.data
            if not isinstance(udp, UDP) or udp.dport != vxlan_port:
                continue
            vx = udp.data
            if len(vx) < 8 or not vx[0] & 0x08:
                continue
            times.append(int(ts * NS))
            lengths.append(ip.len + 14)
            vnis.append(int.from_bytes(vx[4:7], "big"))
    read_s = time.perf_counter() - start
    start = time.perf_counter()
    flagged = numpy_bins(np.array(times, dtype=np.int64), np.array(lengths, dtype=np.int64), np.array(vnis, dtype=np.int64), window_ns, limit_bytes)
    return BinResult(flagged, len(times), read_s, time.perf_counter() - start)


def records_numpy_bins(records: np.ndarray, window_ns: int, limit_bytes: int) -> BinResult:
    """The same binning on ``isolane.parse``'s records (VXLAN packets only)."""
    start = time.perf_counter()
    vx = records[records["vni"] >= 0]
    flagged = numpy_bins(vx["timestamp_ns"].astype(np.int64), vx["wire_len"].astype(np.int64), vx["vni"].astype(np.int64), window_ns, limit_bytes)
    return BinResult(flagged, len(vx), 0.0, time.perf_counter() - start)


# ---------------------------------------------------------------------------------------------
# tshark


def find_tshark() -> tuple[str | None, str]:
    """(path, "") of tshark, or (None, why not)."""
    path = shutil.which("tshark")
    if path is None:
        return None, "tshark is not installed (apt-get install tshark)"
    return path, ""


@dataclass
class IoStat:
    interval_ns: int
    frames: np.ndarray  # int64, one per interval from the capture's first packet
    bytes: np.ndarray  # int64
    seconds: float
    command: list[str]


_ROW = re.compile(r"^\|\s*([0-9.]+)\s*<>\s*(?:[0-9.]+|Dur:?[^|]*?)\s*\|\s*([0-9]+)\s*\|\s*([0-9]+)\s*\|\s*$")


def parse_io_stat(text: str) -> tuple[np.ndarray, np.ndarray]:
    """Frames and bytes of each interval row of ``tshark -z io,stat,<interval>`` (one column:
    no filter), in order."""
    frames, sizes = [], []
    for line in text.splitlines():
        match = _ROW.match(line)
        if match:
            frames.append(int(match.group(2)))
            sizes.append(int(match.group(3)))
    return np.array(frames, dtype=np.int64), np.array(sizes, dtype=np.int64)


def _seconds_text(ns: int) -> str:
    return f"{ns / NS:.9f}".rstrip("0").rstrip(".")


def tshark_io_stat(path: str | Path, interval_ns: int, tshark: str = "tshark") -> IoStat:
    """``tshark -n -q -r <path> -z io,stat,<interval>``: the port's frames and bytes (the frames'
    lengths on the wire) per interval, intervals counted from the first packet's time, which
    io,stat rounds to whole microseconds (its finest interval is 1 us). Its cost grows with
    packets x intervals: ~7 s for 270k packets at 10 us here, ~100 s for 1.07M."""
    command = [tshark, "-n", "-q", "-r", str(path), "-z", f"io,stat,{_seconds_text(interval_ns)}"]
    start = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed (rc={done.returncode}): {done.stderr[-500:]}")
    frames, sizes = parse_io_stat(done.stdout)
    if not len(frames):
        raise RuntimeError(f"no interval rows in tshark's output: {done.stdout[:500]!r}")
    return IoStat(interval_ns, frames, sizes, seconds, command)
