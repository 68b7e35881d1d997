"""Header templates of the generated packets, built once with scapy.

Every generated packet is VXLAN over IPv4 (RFC 7348): outer Ethernet, IPv4, UDP to port 4789 and
the VXLAN header, then the tenant's frame: Ethernet, IPv4 and one of three transports
(:data:`KINDS`). scapy builds each header stack once, with its constant fields right (versions,
flags, TTLs, protocol numbers, the BFD session); :mod:`isolane.gen.frames` copies the bytes
into every packet and writes the per-packet fields at the offsets below with numpy.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

import numpy as np
import numpy.typing as npt

SCAPY_MISSING = "isolane gen needs scapy: pip install 'isolane[gen]'"

ROCE, TCP, BFD = 0, 1, 2
"""Packet kinds: RoCEv2 (InfiniBand BTH over UDP 4791), TCP, BFD control (UDP 3784)."""
KINDS = (ROCE, TCP, BFD)

VXLAN_PORT = 4789
ROCE_PORT = 4791
BFD_PORT = 3784

# Offsets in the outer frame (VXLAN over IPv4, no VLAN) and in the tenant's frame after it.
OUTER_IP = 14
OUTER_UDP = 34
VXLAN = 42
INNER_ETH = 50
INNER_IP = 64
TRANSPORT = 84
BTH = TRANSPORT + 8
OUTER_OVERHEAD = INNER_ETH
"""Bytes before the tenant's frame: outer Ethernet 14, IPv4 20, UDP 8, VXLAN 8."""

ROUTER_MAC = "00:1b:21:0a:00:01"
VTEP_MAC = "00:1b:21:0a:00:02"


@dataclasses.dataclass(frozen=True)
class Template:
    """The bytes of one kind's headers, outer Ethernet to the end of its transport header (a
    BFD packet's whole frame)."""

    kind: int
    header: npt.NDArray[np.uint8]

    @property
    def length(self) -> int:
        return len(self.header)


def _scapy() -> Any:
    """scapy's layers, imported on first use: the core does not need scapy."""
    try:
        from scapy.contrib.bfd import BFD as BFDLayer
        from scapy.contrib.roce import BTH as BTHLayer
        from scapy.layers.inet import IP, UDP
        from scapy.layers.inet import TCP as TCPLayer
        from scapy.layers.l2 import Ether
        from scapy.layers.vxlan import VXLAN as VXLANLayer
    except ImportError as err:
        raise ImportError(SCAPY_MISSING) from err
    return Ether, IP, UDP, TCPLayer, VXLANLayer, BTHLayer, BFDLayer


@functools.cache
def templates() -> dict[int, Template]:
    """The template of each kind (built on the first call)."""
    ether, ip, udp, tcp, vxlan, bth, bfd = _scapy()
    outer = ether(src=ROUTER_MAC, dst=VTEP_MAC) / ip(flags="DF", ttl=64) / udp(sport=49152, dport=VXLAN_PORT, chksum=0) / vxlan(flags=0x08, vni=0)
    inner = ether(src="02:00:00:00:00:01", dst="02:00:00:00:00:02") / ip(flags="DF", ttl=64)
    stacks = {
        # RoCEv2 sets the UDP checksum to 0; the BTH's P_Key is the default partition.
        ROCE: inner / udp(sport=49152, dport=ROCE_PORT, chksum=0) / bth(opcode=0, pkey=0xFFFF, dqpn=0, psn=0),
        TCP: inner / tcp(sport=49152, dport=80, flags="A", window=0xFFFF),
        # An asynchronous BFD session in state Up, 300 ms timers (RFC 5880).
        BFD: inner / udp(sport=49152, dport=BFD_PORT) / bfd(version=1, sta=3, detect_mult=3, min_tx_interval=300_000, min_rx_interval=300_000),
    }
    out = {}
    for kind, stack in stacks.items():
        raw = np.frombuffer(bytes(outer / stack), dtype=np.uint8)
        if kind == ROCE:
            raw = raw[: BTH + 12]  # the BTH without scapy's ICRC: the ICRC ends the frame, after the payload
        out[kind] = Template(kind, raw.copy())
    return out
