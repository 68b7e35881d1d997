"""Live capture on a veth pair (issue 19): packets a second received, and the share dropped, by

- ``ring + engine``: ``isolane.linux.LiveCapture`` (TPACKET_V3 ring) with ``Engine.process`` on
  every batch (a tenant per VNI);
- ``ring``: the same capture, batches counted only;
- ``socket.recv``: a plain Python loop of ``recv_into`` on an AF_PACKET socket;
- ``tcpdump -w /dev/null``: libpcap's own TPACKET_V3 ring, writing nowhere;

each with the same senders in the same run: raw VXLAN frames (prebuilt by scapy, 8 VNIs)
sent into ``tx0`` in namespace S by sender processes calling ``sendmmsg`` through ctypes, 256
frames a call, captured on its peer ``rx0`` in namespace R. Every receiver gets the same kernel
memory (``--memory-mib``, 64: the ring's blocks of 1 MiB, or 16 blocks when that is less;
tcpdump's ``-B``; the socket's ``SO_RCVBUFFORCE``). Loads: as fast as the senders go, and paced at ``--paced`` packets a
second, where nothing should be dropped. The senders share the machine's cores with the receiver,
so what they offer is measured each time (and falls when the receiver takes more CPU). Drops are
the kernel's own counters (``PACKET_STATISTICS``; tcpdump's "dropped by kernel"). The column
before the last is the receiver's own CPU time a packet received (the kernel's copy into the ring or
socket queue runs in softirq, mostly charged to the senders); the last, what was sent but neither
received nor counted as dropped (0 when everything is accounted for).

    python bench/live_bench.py [--seconds 3] [--senders 3] [--paced 100000] [--memory-mib 64]   # as root

The frames go to a MAC address rx0 does not have, so the stack drops them right after the
capture taps (no replies travel back).
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from isolane import Engine, Policy
from isolane.linux import LiveCapture

SENDER_NS, RECEIVER_NS = f"islbench{os.getpid()}s", f"islbench{os.getpid()}r"
VNIS = range(100, 108)

SENDER = r"""
import ctypes, socket, sys, time
dev, seconds, rate, frames_file = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
frames = [bytes.fromhex(line) for line in open(frames_file).read().split()]

class IoVec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("length", ctypes.c_size_t)]

class MsgHdr(ctypes.Structure):
    _fields_ = [("name", ctypes.c_void_p), ("namelen", ctypes.c_uint32), ("iov", ctypes.POINTER(IoVec)), ("iovlen", ctypes.c_size_t),
                ("control", ctypes.c_void_p), ("controllen", ctypes.c_size_t), ("flags", ctypes.c_int)]

class MMsgHdr(ctypes.Structure):
    _fields_ = [("hdr", MsgHdr), ("sent", ctypes.c_uint)]

BATCH = 256
buffers = [ctypes.create_string_buffer(frame, len(frame)) for frame in frames]
iovecs, messages = (IoVec * BATCH)(), (MMsgHdr * BATCH)()
for i in range(BATCH):
    frame = buffers[i % len(buffers)]
    iovecs[i].base, iovecs[i].length = ctypes.addressof(frame), len(frame)
    messages[i].hdr.iov, messages[i].hdr.iovlen = ctypes.pointer(iovecs[i]), 1
libc = ctypes.CDLL(None, use_errno=True)
with socket.socket(socket.AF_PACKET, socket.SOCK_RAW) as s:
    s.bind((dev, 0))
    start = time.monotonic()
    end, sent = start + seconds, 0
    while (now := time.monotonic()) < end:
        if rate and sent > (now - start) * rate:
            time.sleep(BATCH / rate)  # paced: no faster than the rate
            continue
        done = libc.sendmmsg(s.fileno(), messages, BATCH, 0)
        sent += max(done, 0)
    print(sent, time.monotonic() - start)
"""

RECV_LOOP = r"""
import socket, struct, sys, time
dev, ring_bytes, ready = sys.argv[1], int(sys.argv[2]), sys.argv[3]
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(3))
s.setsockopt(socket.SOL_SOCKET, 33, ring_bytes)  # SO_RCVBUFFORCE
s.bind((dev, 0))
open(ready, "w").close()
s.settimeout(1.0)
buffer, received = bytearray(65536), 0
try:
    while True:
        s.recv_into(buffer)
        received += 1
except socket.timeout:
    pass
packets, drops = struct.unpack("II", s.getsockopt(263, 6, 8))  # SOL_PACKET, PACKET_STATISTICS
print(received, packets, drops)
"""


@dataclass
class Result:
    """What one receiver got of one load."""

    receiver: str
    load: str
    offered: int
    seconds: float
    received: int
    drops: int
    cpu_seconds: float

    def row(self) -> str:
        share = self.drops / (self.received + self.drops) if self.received + self.drops else 0.0
        return (
            f"{self.receiver:<24} {self.load:<8} {self.offered / self.seconds / 1e6:>8.3f} {self.received / self.seconds / 1e6:>9.3f}"
            f" {self.received:>11,} {self.drops:>10,} {share:>7.1%} {self.cpu_seconds * 1e9 / max(self.received, 1):>8,.0f}"
            f" {self.offered - self.received - self.drops:>8,}"
        )


#: A receiver: given how to start the senders, (frames sent, received, dropped, seconds sent for, CPU seconds).
Receiver = Callable[[Callable[[], "Senders"]], tuple[int, int, int, float, float]]


def run(*command: str) -> None:
    subprocess.run(command, check=True, capture_output=True, text=True)


def make_pair() -> None:
    for ns in (SENDER_NS, RECEIVER_NS):
        run("ip", "netns", "add", ns)
        run("ip", "netns", "exec", ns, "sysctl", "-qw", "net.ipv6.conf.default.disable_ipv6=1", "net.ipv6.conf.all.disable_ipv6=1")
    run("ip", "link", "add", "tx0", "netns", SENDER_NS, "type", "veth", "peer", "name", "rx0", "netns", RECEIVER_NS)
    run("ip", "-n", SENDER_NS, "link", "set", "tx0", "up")
    run("ip", "-n", RECEIVER_NS, "link", "set", "rx0", "up")


def delete_pair() -> None:
    for ns in (SENDER_NS, RECEIVER_NS):
        subprocess.run(["ip", "netns", "del", ns], capture_output=True)


def write_frames(path: Path, payload: int) -> int:
    """VXLAN frames, one per VNI and inner flow, to a MAC rx0 does not have; their size."""
    from scapy.all import IP, UDP, VXLAN, Ether

    frames = []
    for vni in VNIS:
        for flow in range(4):
            inner = Ether() / IP(src=f"10.{vni - 100}.0.{flow + 1}", dst="10.9.9.9") / UDP(sport=1000 + flow, dport=5001) / (b"x" * payload)
            outer = Ether(src="02:00:00:00:00:01", dst="02:00:00:00:00:99") / IP(src="192.0.2.1", dst="192.0.2.2") / UDP(sport=49152 + flow, dport=4789)
            frames.append(bytes(outer / VXLAN(vni=vni) / inner))
    path.write_text("\n".join(frame.hex() for frame in frames))
    return len(frames[0])


class Senders:
    """The sender processes for one measurement: ``--senders`` of them, sharing the rate."""

    def __init__(self, count: int, seconds: float, rate: float, frames: Path) -> None:
        command = [sys.executable, "-c", SENDER, "tx0", str(seconds), str(rate / count), str(frames)]
        self.processes = [subprocess.Popen(["ip", "netns", "exec", SENDER_NS, *command], stdout=subprocess.PIPE, text=True) for _ in range(count)]

    def wait(self) -> tuple[int, float]:
        """Frames sent by all, and the longest time one sent for."""
        reports = [process.communicate()[0].split() for process in self.processes]
        return sum(int(sent) for sent, _ in reports), max(float(seconds) for _, seconds in reports)


def own_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def reap(process: subprocess.Popen[str]) -> float:
    """Waits for ``process`` (whose output was read) and returns its CPU time."""
    _, status, usage = os.wait4(process.pid, 0)
    process.returncode = os.waitstatus_to_exitcode(status)  # reaped here, not by Popen
    return usage.ru_utime + usage.ru_stime


def ring_receiver(with_engine: bool, memory: int) -> Receiver:
    def receive(start: Callable[[], Senders]) -> tuple[int, int, int, float, float]:
        engine = Engine(Policy.from_dict({"tenants": [{"name": f"t{vni}", "vnis": [vni]} for vni in VNIS]})) if with_engine else None
        block_size = min(1 << 20, memory // 16)  # at least 16 blocks: the kernel fills one while the reader copies another
        with LiveCapture("rx0", RECEIVER_NS, direction="in", block_size=block_size, blocks=memory // block_size) as capture:
            senders, cpu = start(), own_cpu()
            while (batch := capture.next_batch(1.0)) is not None:
                if engine is not None:
                    engine.process(batch)
            cpu = own_cpu() - cpu
            sent, seconds = senders.wait()
            stats = capture.stats()
        if engine is not None:  # the engine saw every packet the ring handed on
            assert sum(counts["packets"] for counts in engine.counters().values()) == stats.delivered
        return sent, stats.delivered, stats.drops, seconds, cpu

    return receive


def recv_loop(memory: int) -> Receiver:
    return lambda start: _recv_loop(start, memory)


def _recv_loop(start: Callable[[], Senders], memory: int) -> tuple[int, int, int, float, float]:
    with tempfile.TemporaryDirectory() as scratch:
        ready = Path(scratch) / "ready"
        command = ["ip", "netns", "exec", RECEIVER_NS, sys.executable, "-c", RECV_LOOP, "rx0", str(memory), str(ready)]
        loop = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
        wait_for(ready.exists)
        sent, seconds = start().wait()
        assert loop.stdout is not None
        received, _, drops = map(int, loop.stdout.read().split())
        cpu = reap(loop)
    return sent, received, drops, seconds, cpu


def tcpdump(memory: int) -> Receiver:
    return lambda start: _tcpdump(start, memory)


def _tcpdump(start: Callable[[], Senders], memory: int) -> tuple[int, int, int, float, float]:
    command = ["ip", "netns", "exec", RECEIVER_NS, "tcpdump", "-i", "rx0", "-Q", "in", "-n", "-B", str(memory >> 10), "-w", "/dev/null"]
    dump = subprocess.Popen(command, stderr=subprocess.PIPE, text=True)
    assert dump.stderr is not None
    while "listening on" not in (line := dump.stderr.readline()):  # tcpdump says so once its ring is up
        if not line:
            raise RuntimeError("tcpdump did not start")
    sent, seconds = start().wait()
    time.sleep(1.0)  # tcpdump writes what its ring still holds
    dump.send_signal(signal.SIGINT)
    summary = dump.stderr.read()
    cpu = reap(dump)
    counts = {line.split(" ", 1)[1]: int(line.split(" ", 1)[0]) for line in summary.splitlines() if line[:1].isdigit()}
    return sent, counts["packets captured"], counts["packets dropped by kernel"], seconds, cpu


def wait_for(ready: Callable[[], bool], seconds: float = 10.0) -> None:
    end = time.monotonic() + seconds
    while not ready():
        if time.monotonic() > end:
            raise RuntimeError("a receiver did not start")
        time.sleep(0.01)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=3.0, help="how long the senders send, per measurement")
    parser.add_argument("--senders", type=int, default=3)
    parser.add_argument("--paced", type=float, default=100_000, help="the bounded load, packets a second (0: none)")
    parser.add_argument("--payload", type=int, default=32, help="inner UDP payload bytes")
    parser.add_argument("--memory-mib", type=int, default=64, help="kernel memory of each receiver")
    args = parser.parse_args()
    memory = args.memory_mib << 20
    if os.geteuid() != 0 or shutil.which("ip") is None:
        sys.exit("live_bench.py needs root and iproute2's ip")
    receivers: dict[str, Receiver] = {
        "ring + engine": ring_receiver(True, memory),
        "ring": ring_receiver(False, memory),
        "socket.recv": recv_loop(memory),
    }
    if shutil.which("tcpdump"):
        receivers["tcpdump -w /dev/null"] = tcpdump(memory)
    else:
        print("tcpdump: not installed, its rows are left out (apt-get install tcpdump)")
    loads = {"full": 0.0, **({"paced": args.paced} if args.paced else {})}
    delete_pair()
    try:
        make_pair()
        with tempfile.TemporaryDirectory() as scratch:
            frames = Path(scratch) / "frames.hex"
            size = write_frames(frames, args.payload)
            print(f"{args.senders} senders, {size}-byte frames, {args.seconds} s a measurement, {args.memory_mib} MiB a receiver")
            print(f"load average {os.getloadavg()[0]:.1f} before the run")
            print(f"{'receiver':<24} {'load':<8} {'offered':>8} {'received':>9} {'packets':>11} {'drops':>10} {'dropped':>7} {'CPU':>8} {'missing':>8}")
            print(f"{'':<24} {'':<8} {'Mpps':>8} {'Mpps':>9} {'':>11} {'':>10} {'':>7} {'ns/pkt':>8} {'':>8}")
            for load, rate in loads.items():
                for name, receive in receivers.items():
                    sent, received, drops, seconds, cpu = receive(lambda: Senders(args.senders, args.seconds, rate, frames))  # noqa: B023
                    print(Result(name, load, sent, seconds, received, drops, cpu).row(), flush=True)
    finally:
        delete_pair()


if __name__ == "__main__":
    main()
