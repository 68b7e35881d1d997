"""Peer parsers for side-by-side comparison with ``isolane.parse``.

Each peer reads the first ``limit`` packets of a pcap file and extracts, for every packet, the
fields isolane extracts for the tunnel case (see docs/parsing.md):

    (outer_src, outer_dst, vni, src, dst, proto, src_port, dst_port)

* ``outer_src`` / ``outer_dst``: the outermost IP header's addresses;
* ``vni``: the VNI of a VXLAN header (UDP destination port 4789, I flag set), else -1;
* ``src`` .. ``dst_port``: the first IP packet inside the tunnel (the tenant's packet), or the
  outer IP packet when there is no tunnel; ports for TCP and UDP, 0 otherwise.

One tuple per packet, in file order, like isolane's one row per packet. Addresses are in each
library's native form (``bytes`` for dpkt, ``str`` for scapy), because converting them inside
the timed loop would be work isolane does not do either (it returns 16-byte arrays);
:func:`normalize` turns any result row into dotted-quad / canonical IPv6 strings for comparison,
outside the timed region.

Every peer does the full extraction with its library's own decoders (no byte-offset shortcuts
except the 8-byte VXLAN header for dpkt, which has no VXLAN class), and returns a
:class:`PeerResult` with the rows and the packets/second measured around the whole read+parse
loop (file open included).
"""

from __future__ import annotations

import ipaddress
import socket
import time
from typing import NamedTuple

__all__ = [
    "PeerResult",
    "VXLAN_PORT",
    "dpkt_extract",
    "scapy_extract",
    "PEERS",
    "normalize",
    "normalize_rows",
    "isolane_rows",
]

VXLAN_PORT = 4789
NO_TUPLE = (None, None, -1, None, None, 0, 0, 0)


class PeerResult(NamedTuple):
    rows: list  # one tuple per packet
    pps: float  # packets / second (read + parse + extraction)
    packets: int
    seconds: float


# ---------------------------------------------------------------------------------------------
# dpkt


def dpkt_extract(path, limit: int | None = None, vxlan_port: int = VXLAN_PORT) -> PeerResult:
    """dpkt: ``dpkt.pcap.Reader`` + ``dpkt.ethernet.Ethernet`` (which decodes IP/IPv6, TCP and
    UDP and strips 802.1Q tags); the 8-byte VXLAN header is decoded by hand (dpkt has no VXLAN
    class) and the inner frame is parsed with ``dpkt.ethernet.Ethernet`` again."""
    import dpkt

    Ethernet = dpkt.ethernet.Ethernet
    IP, IP6 = dpkt.ip.IP, dpkt.ip6.IP6
    TCP, UDP = dpkt.tcp.TCP, dpkt.udp.UDP
    UnpackError = dpkt.UnpackError

    rows = []
    append = rows.append
    t0 = time.perf_counter()
    with open(path, "rb") as f:
        reader = dpkt.pcap.Reader(f)
        for n, (_ts, buf) in enumerate(reader):
            if n == limit:
                break
            try:
                eth = Ethernet(buf)
            except UnpackError:
                append(NO_TUPLE)
                continue
            ip = eth.data
            if not isinstance(ip, (IP, IP6)):
                append(NO_TUPLE)
                continue
            outer_src, outer_dst = ip.src, ip.dst
            vni = -1
            tenant = ip
            l4 = ip.data
            if isinstance(l4, UDP) and l4.dport == vxlan_port:
                vx = l4.data  # bytes: dpkt does not decode UDP payloads
                if len(vx) >= 8 and vx[0] & 0x08:  # I flag
                    vni = int.from_bytes(vx[4:7], "big")
                    try:
                        inner = Ethernet(vx[8:])
                        tenant = inner.data
                    except UnpackError:
                        tenant = None
                    if not isinstance(tenant, (IP, IP6)):
                        append((outer_src, outer_dst, vni, None, None, 0, 0, 0))
                        continue
                    l4 = tenant.data
                else:
                    append((outer_src, outer_dst, -1, None, None, 0, 0, 0))
                    continue
            proto = tenant.p  # IPv6: dpkt's ``p`` is the header after the extension headers
            if isinstance(l4, (TCP, UDP)):
                append((outer_src, outer_dst, vni, tenant.src, tenant.dst, proto,
                        l4.sport, l4.dport))
            else:
                append((outer_src, outer_dst, vni, tenant.src, tenant.dst, proto, 0, 0))
    dt = time.perf_counter() - t0
    return PeerResult(rows, len(rows) / dt if dt > 0 else float("inf"), len(rows), dt)


# ---------------------------------------------------------------------------------------------
# scapy


def scapy_extract(path, limit: int | None = None, vxlan_port: int = VXLAN_PORT) -> PeerResult:
    """scapy: ``PcapReader`` dissects every packet completely (Ether / IP / UDP / VXLAN /
    Ether / IP / TCP|UDP, VXLAN being bound to UDP 4789 by scapy's defaults); the fields are
    read from the dissected layers. scapy also binds VXLAN to other ports (4790, 8472, ...)
    and to source ports, so the destination port is checked to keep isolane's semantics."""
    from scapy.layers.inet import IP, TCP, UDP
    from scapy.layers.inet6 import IPv6, IPv6ExtHdrDestOpt, IPv6ExtHdrFragment, IPv6ExtHdrHopByHop, IPv6ExtHdrRouting
    from scapy.layers.l2 import Dot1AD, Dot1Q, Ether
    from scapy.layers.vxlan import VXLAN
    from scapy.utils import PcapReader

    v6_ext = (IPv6ExtHdrHopByHop, IPv6ExtHdrRouting, IPv6ExtHdrFragment, IPv6ExtHdrDestOpt)
    tags = (Dot1Q, Dot1AD)

    def l3_of(frame):
        l3 = frame.payload if isinstance(frame, Ether) else frame
        while isinstance(l3, tags):
            l3 = l3.payload
        return l3 if isinstance(l3, (IP, IPv6)) else None

    def upper(l3):
        """(proto, upper-layer packet) of an IP / IPv6 packet."""
        if isinstance(l3, IP):
            return l3.proto, l3.payload
        nh, p = l3.nh, l3.payload
        while isinstance(p, v6_ext):
            nh, p = p.nh, p.payload
        return nh, p

    rows = []
    append = rows.append
    t0 = time.perf_counter()
    with PcapReader(str(path)) as reader:
        for n, pkt in enumerate(reader):
            if n == limit:
                break
            ip = l3_of(pkt)
            if ip is None:
                append(NO_TUPLE)
                continue
            outer_src, outer_dst = ip.src, ip.dst
            vni = -1
            tenant = ip
            proto, l4 = upper(ip)
            if isinstance(l4, UDP) and l4.dport == vxlan_port and isinstance(l4.payload, VXLAN):
                vx = l4.payload
                if not vx.flags.Instance:
                    append((outer_src, outer_dst, -1, None, None, 0, 0, 0))
                    continue
                vni = vx.vni
                tenant = l3_of(vx.payload)
                if tenant is None:
                    append((outer_src, outer_dst, vni, None, None, 0, 0, 0))
                    continue
                proto, l4 = upper(tenant)
            if isinstance(l4, (TCP, UDP)):
                append((outer_src, outer_dst, vni, tenant.src, tenant.dst, proto,
                        l4.sport, l4.dport))
            else:
                append((outer_src, outer_dst, vni, tenant.src, tenant.dst, proto, 0, 0))
    dt = time.perf_counter() - t0
    return PeerResult(rows, len(rows) / dt if dt > 0 else float("inf"), len(rows), dt)


PEERS = {"dpkt": dpkt_extract, "scapy": scapy_extract}


# ---------------------------------------------------------------------------------------------
# normal form for comparisons (outside any timed region)


def _addr(a):
    if a is None:
        return None
    if isinstance(a, (bytes, bytearray, memoryview)):
        a = bytes(a)
        if len(a) == 4:
            return socket.inet_ntop(socket.AF_INET, a)
        if len(a) == 16:
            v6 = ipaddress.IPv6Address(a)
            if v6.ipv4_mapped is not None:
                return str(v6.ipv4_mapped)
            if a == bytes(16):
                return None
            return str(v6)
        raise ValueError(f"bad address length {len(a)}")
    return str(ipaddress.ip_address(a))


def normalize(row: tuple) -> tuple:
    """A peer / isolane row with string addresses (IPv4 dotted quad, IPv6 canonical) and
    plain ints."""
    osrc, odst, vni, src, dst, proto, sp, dp = row
    return (_addr(osrc), _addr(odst), int(vni), _addr(src), _addr(dst), int(proto), int(sp),
            int(dp))


def normalize_rows(rows) -> list[tuple]:
    return [normalize(r) for r in rows]


def isolane_rows(parsed, limit: int | None = None) -> list[tuple]:
    """Rows of ``isolane.parse`` output (a PARSED_DTYPE structured array) in the peers'
    normal form. IPv4 addresses come IPv4-mapped (``::ffff:a.b.c.d``); all-zero = not reached.
    """
    p = parsed if limit is None else parsed[:limit]
    osrc = p["outer_src"].tobytes()
    odst = p["outer_dst"].tobytes()
    src = p["src"].tobytes()
    dst = p["dst"].tobytes()
    vni = p["vni"].tolist()
    proto = p["proto"].tolist()
    sp = p["src_port"].tolist()
    dp = p["dst_port"].tolist()
    out = []
    for i in range(len(p)):
        s = slice(16 * i, 16 * i + 16)
        out.append((_addr(osrc[s]), _addr(odst[s]), int(vni[i]), _addr(src[s]), _addr(dst[s]),
                     int(proto[i]), int(sp[i]), int(dp[i])))
    return out
