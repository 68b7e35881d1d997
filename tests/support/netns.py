"""Two network namespaces joined by a veth pair, with three VXLAN devices each, for the tests
that need the real kernel (tests/test_linux_*.py). Every name carries the test process's id; the
tests delete what they make.

    ns A (va0 192.0.2.1 / 2001:db8::1)  <== veth ==>  ns B (vb0 192.0.2.2 / 2001:db8::2)
    vx100: VNI 100, IPv4 underlay
    vx200: VNI 200, IPv4 underlay
    vx300: VNI 300, IPv6 underlay

Static neighbours (underlay and overlay), IPv6 off on the vxlan devices and no router
solicitations keep the underlay quiet: it carries what the test sends."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from isolane.linux import probe_features

TAG = f"isl{os.getpid()}"
A, B, FRESH = f"{TAG}a", f"{TAG}b", f"{TAG}c"
MAC = {"va0": "02:00:00:00:00:0a", "vb0": "02:00:00:00:00:0b"}
#: VNI: (underlay family, A's inner address, B's inner address, vxlan MAC in A, in B)
OVERLAYS = {
    100: ("4", "10.100.0.1", "10.100.0.2", "02:00:00:00:01:0a", "02:00:00:00:01:0b"),
    200: ("4", "10.200.0.1", "10.200.0.2", "02:00:00:00:02:0a", "02:00:00:00:02:0b"),
    300: ("6", "10.30.0.1", "10.30.0.2", "02:00:00:00:03:0a", "02:00:00:00:03:0b"),
}
UNDERLAY = {"4": ("192.0.2.1", "192.0.2.2"), "6": ("2001:db8::1", "2001:db8::2")}


def run(*command: str) -> None:
    subprocess.run(command, check=True, capture_output=True, text=True)


def delete_namespaces() -> None:
    for name in (A, B, FRESH):
        subprocess.run(["ip", "netns", "del", name], capture_output=True)


def skip_reason() -> str | None:
    if os.geteuid() != 0:
        return "needs root (network namespaces)"
    for tool in ("ip", "tc"):
        if shutil.which(tool) is None:
            return f"needs iproute2's {tool}"
    missing = probe_features().missing(("veth", "vxlan", "htb", "u32"))
    return "the kernel lacks " + "; ".join(missing) if missing else None


def make_pair() -> None:
    for ns in (A, B):
        run("ip", "netns", "add", ns)
        # no router solicitations: the kernel repeats them with backoff, at any time
        run("ip", "netns", "exec", ns, "sysctl", "-qw", "net.ipv6.conf.default.router_solicitations=0", "net.ipv6.conf.default.accept_ra=0")
    run("ip", "link", "add", "va0", "netns", A, "address", MAC["va0"], "type", "veth", "peer", "name", "vb0", "netns", B, "address", MAC["vb0"])
    for ns, dev, peer, me in ((A, "va0", "vb0", 0), (B, "vb0", "va0", 1)):
        run("ip", "-n", ns, "link", "set", "lo", "up")
        for family, (here, there) in UNDERLAY.items():
            mine, theirs = (here, there) if me == 0 else (there, here)
            run("ip", "-n", ns, "addr", "add", f"{mine}/{24 if family == '4' else 64}", "dev", dev, *(["nodad"] if family == "6" else []))
            run("ip", "-n", ns, "neigh", "replace", theirs, "lladdr", MAC[peer], "dev", dev, "nud", "permanent")
        run("ip", "-n", ns, "link", "set", dev, "up")
        run("ip", "netns", "exec", ns, "sysctl", "-qw", "net.ipv6.conf.default.disable_ipv6=1")  # for the vxlan devices made next
        for vni, (family, inner_a, inner_b, mac_a, mac_b) in OVERLAYS.items():
            local, remote = UNDERLAY[family] if me == 0 else UNDERLAY[family][::-1]
            inner, other, mac, other_mac = (inner_a, inner_b, mac_a, mac_b) if me == 0 else (inner_b, inner_a, mac_b, mac_a)
            vx = f"vx{vni}"
            tunnel = ("id", str(vni), "local", local, "remote", remote, "dstport", "4789", "dev", dev)
            run("ip", "-n", ns, "link", "add", vx, "address", mac, "type", "vxlan", *tunnel)
            run("ip", "-n", ns, "addr", "add", f"{inner}/24", "dev", vx)
            run("ip", "-n", ns, "neigh", "replace", other, "lladdr", other_mac, "dev", vx, "nud", "permanent")
            run("ip", "-n", ns, "link", "set", vx, "up")


@contextmanager
def namespaces() -> Iterator[None]:
    """The pair for the duration (skipping the test, saying why, when the machine cannot make it),
    deleted afterwards whatever happens."""
    reason = skip_reason()
    if reason:
        pytest.skip(reason)
    delete_namespaces()
    try:
        make_pair()
        yield
    finally:
        delete_namespaces()


SENDER = """
import socket, sys
for spec in sys.argv[1:]:
    address, count, size = spec.split(",")
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        for _ in range(int(count)):
            s.sendto(b"x" * int(size), (address, 5001))
"""


def send(*specs: tuple[str, int, int]) -> None:
    """UDP datagrams from namespace A: (inner destination, count, payload bytes) each."""
    run("ip", "netns", "exec", A, sys.executable, "-c", SENDER, *(f"{a},{n},{s}" for a, n, s in specs))


RAW_SENDER = """
import socket, sys
with socket.socket(socket.AF_PACKET, socket.SOCK_RAW) as s:
    s.bind((sys.argv[1], 0))
    for frame in sys.argv[2:]:
        s.send(bytes.fromhex(frame))
"""


FLOOD = """
import socket, sys, time
end = time.monotonic() + float(sys.argv[2])
with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
    while time.monotonic() < end:  # bounded by time
        for _ in range(100):
            s.sendto(b"z" * 1000, (sys.argv[1], 5001))
"""

