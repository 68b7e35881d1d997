"""The replay benchmark's workload (issue 18): an IMIX-like VXLAN capture over 1,000 tenants and
their policy, each tenant with a meter, a guarantee and a ceiling at a shared 100 Gbps port.

Packets: outer Ethernet/IPv4/UDP 4789/VXLAN (50 B) around an inner Ethernet/IPv4/UDP frame of
64, 576 or 1500 bytes, drawn 7:4:1. Tenant ``i`` sends on VNI ``FIRST_VNI + i``; one tenant in
ten is heavy (five times the packets of the others). Gaps are exponential, offered at
``LOAD`` of the line on average, so that queues build and drain at the port; the heavy tenants
run over their meter and their ceiling (colours, meter drops, queueing, buffer drops). All
IPv4 header checksums are right; the UDP checksums are 0 (allowed over IPv4).

    python bench/replay_workload.py DIR [BYTES [TENANTS]]   # DIR/imix-1000-<BYTES>.pcap, DIR/tenants-1000.yaml

Files are written in chunks (bounded memory) and appear atomically; an existing file of the
same name is reused.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import numpy as np
import yaml

TENANTS = 1000
FIRST_VNI = 5000
INNER_SIZES = np.array([64, 576, 1500])
INNER_WEIGHTS = np.array([7, 4, 1]) / 12
HEAVY_EVERY = 10
HEAVY_FACTOR = 5
LINE_BPS = 100_000_000_000
LOAD = 0.95
OUTER_LEN = 50
RECORD_HEADER_LEN = 16
START_NS = 1_700_000_000_000_000_000
CHUNK = 1 << 18

_GLOBAL_HEADER = np.array([0xA1B23C4D, 0x00040002, 0, 0, 262144, 1], dtype="<u4").tobytes()  # ns pcap, Ethernet
_WIRE_OVERHEAD = 20  # preamble and inter-frame gap: the policy counts the wire


def tenant_policy(i: int, tenants: int = TENANTS) -> dict:
    """Tenant ``i`` of ``tenants``, in shares of the line: at 1,000 tenants 50 Mbps guaranteed (half
    the line over all), a 200 Mbps ceiling and a 250 Mbps srTCM meter; light tenants send ~70 Mbps,
    heavy ones ~330 Mbps."""
    mbps = 1000 // tenants
    return {
        "name": f"t{i}",
        "vnis": [FIRST_VNI + i],
        "rate": f"{50 * mbps}Mbps",
        "ceil": f"{200 * mbps}Mbps",
        "meter": {"kind": "srtcm", "cir": f"{250 * mbps}Mbps"},
        "rules": [{"proto": "udp", "action": "allow"}],
    }


def policy_document(tenants: int = TENANTS) -> dict:
    return {"count": "wire", "port": {"rate": "100Gbps", "buffer": "32MiB"}, "tenants": [tenant_policy(i, tenants) for i in range(tenants)]}


def write_policy(path: str | os.PathLike[str], tenants: int = TENANTS) -> Path:
    path = Path(path)
    if not path.exists():
        _atomic_write(path, yaml.safe_dump(policy_document(tenants), width=1 << 16, sort_keys=False).encode())
    return path


def packet_count(target_bytes: int) -> int:
    """How many packets :func:`write_capture` writes for ``target_bytes`` (the mean record size
    times the count stays under it)."""
    mean = RECORD_HEADER_LEN + OUTER_LEN + float(INNER_SIZES @ INNER_WEIGHTS)
    return int((target_bytes - len(_GLOBAL_HEADER)) / mean * 0.995)


def write_capture(path: str | os.PathLike[str], target_bytes: int, tenants: int = TENANTS, seed: int = 0) -> Path:
    """A capture of about ``target_bytes`` (a little under) over ``tenants``, reused if it exists."""
    path = Path(path)
    if path.exists():
        return path
    tmp = path.with_name(path.name + ".partial")
    rng = np.random.default_rng(seed)
    weights = np.where(np.arange(tenants) % HEAVY_EVERY == 0, HEAVY_FACTOR, 1).astype(float)
    weights /= weights.sum()
    total, clock_ns = packet_count(target_bytes), START_NS
    with open(tmp, "wb") as out:
        out.write(_GLOBAL_HEADER)
        for first in range(0, total, CHUNK):
            count = min(CHUNK, total - first)
            inner = rng.choice(INNER_SIZES, size=count, p=INNER_WEIGHTS)
            senders = rng.choice(tenants, size=count, p=weights)
            times = clock_ns + _gaps(rng, inner).cumsum()
            clock_ns = int(times[-1])
            out.write(_records(inner, senders, times, rng))
    os.replace(tmp, path)
    return path


def _gaps(rng: np.random.Generator, inner: np.ndarray) -> np.ndarray:
    """Exponential gaps whose mean is each packet's time on the line divided by the load."""
    wire_ns = (inner + OUTER_LEN + _WIRE_OVERHEAD) * 8e9 / LINE_BPS
    return np.maximum(1, np.rint(rng.exponential(wire_ns / LOAD))).astype(np.int64)


def _records(inner: np.ndarray, tenants: np.ndarray, times: np.ndarray, rng: np.random.Generator) -> bytes:
    """Pcap records (header and packet) of the chunk, one contiguous buffer."""
    lengths = inner + OUTER_LEN
    ends = np.cumsum(lengths + RECORD_HEADER_LEN)
    starts = ends - lengths - RECORD_HEADER_LEN
    buffer = np.zeros(int(ends[-1]), dtype=np.uint8)
    header = np.zeros((len(inner), RECORD_HEADER_LEN), dtype=np.uint8)
    header.view("<u4")[:, 0], header.view("<u4")[:, 1] = times // 1_000_000_000, times % 1_000_000_000
    header.view("<u4")[:, 2], header.view("<u4")[:, 3] = lengths, lengths
    flows = rng.integers(0, 1 << 16, size=len(inner))
    packets = _headers(inner, tenants, flows)
    for size in INNER_SIZES:  # one scatter a size: the rows of a size are equally long
        rows = np.flatnonzero(inner == size)
        span = starts[rows][:, None] + np.arange(RECORD_HEADER_LEN + 92)
        buffer[span] = np.concatenate([header[rows], packets[rows]], axis=1)
    return buffer.tobytes()


def _headers(inner: np.ndarray, tenants: np.ndarray, flows: np.ndarray) -> np.ndarray:
    """The first 92 bytes of each packet (every header; the payload stays zero)."""
    count = len(inner)
    h = np.zeros((count, 92), dtype=np.uint8)
    h[:, 0:6] = [0x02, 0, 0x5E, 0, 0, 1]
    h[:, 6:12] = [0x02, 0, 0xAC, 0x10, 0, 1]
    h[:, 12:14] = [8, 0]
    _ipv4(h[:, 14:34], inner + 36, src=0xAC100001, dst=0xAC100002)
    _put(h[:, 34:36], 49152 + flows % 16384)
    _put(h[:, 36:38], 4789)
    _put(h[:, 38:40], inner + 16)
    h[:, 42] = 0x08  # VXLAN I flag
    _put(h[:, 46:49], FIRST_VNI + tenants)
    h[:, 50:56] = [0x02, 1, 0, 0, 0, 1]
    h[:, 56:62] = [0x02, 2, 0, 0, 0, 1]
    h[:, 62:64] = [8, 0]
    _ipv4(h[:, 64:84], inner - 14, src=0x0A000000 + tenants * 256 + 1, dst=0x0A000000 + tenants * 256 + 2)
    _put(h[:, 84:86], 10000 + flows % 20000)
    _put(h[:, 86:88], 5001)
    _put(h[:, 88:90], inner - 34)
    return h


def _ipv4(header: np.ndarray, total: np.ndarray, src: np.ndarray | int, dst: np.ndarray | int) -> None:
    header[:, 0] = 0x45
    _put(header[:, 2:4], total)
    header[:, 6] = 0x40  # DF
    header[:, 8] = 64
    header[:, 9] = 17
    _put(header[:, 12:16], src)
    _put(header[:, 16:20], dst)
    words = header.astype(np.uint32).reshape(len(header), 10, 2)
    total_sum = (words[:, :, 0] << 8 | words[:, :, 1]).sum(axis=1)
    while (total_sum >> 16).any():
        total_sum = (total_sum & 0xFFFF) + (total_sum >> 16)
    _put(header[:, 10:12], ~total_sum & 0xFFFF)


def _put(columns: np.ndarray, values: np.ndarray | int) -> None:
    """``values`` big-endian into ``columns`` (as wide as the field)."""
    values = np.broadcast_to(np.asarray(values, dtype=np.uint64), (len(columns),))
    for k in range(columns.shape[1]):
        columns[:, k] = (values >> np.uint64(8 * (columns.shape[1] - 1 - k))) & np.uint64(0xFF)


def _atomic_write(path: Path, data: bytes) -> None:
    tmp = path.with_name(path.name + ".partial")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def workload(directory: str | os.PathLike[str], target_bytes: int, tenants: int = TENANTS) -> tuple[Path, Path]:
    """(capture, policy) in ``directory``, written unless there already."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    capture = write_capture(directory / f"imix-{tenants}-{target_bytes}.pcap", target_bytes, tenants)
    return capture, write_policy(directory / f"tenants-{tenants}.yaml", tenants)


if __name__ == "__main__":
    size = int(float(sys.argv[2])) if len(sys.argv) > 2 else 1_000_000_000
    capture, policy = workload(sys.argv[1], size, int(sys.argv[3]) if len(sys.argv) > 3 else TENANTS)
    print(capture, policy)
