"""The u32 filters of an HTB plan: what they match, as word-aligned keys from the network header
(``docs/linux.md``, "Filters"). Pure Python.

A VNI sits at a fixed offset only in an outer IPv4 header without options (IHL 5) that is a first
fragment, or in an outer IPv6 header without extension headers. The VNI filters assume that; the
"unmatched" filters catch, after them, the packets the assumption leaves out, so that they are
counted in a class of their own rather than mixed with traffic of no tenant."""

from __future__ import annotations

import socket
from collections.abc import Iterable
from dataclasses import dataclass

ETH_P_IP = 0x0800
ETH_P_IPV6 = 0x86DD
VNI_PRIO = {ETH_P_IP: 1, ETH_P_IPV6: 2}
"""The root's VNI filters' priorities: u32 filters of different protocols need different priorities."""
UNMATCHED_PRIO = {ETH_P_IP: 3, ETH_P_IPV6: 4}
IPV6_EXTENSION_HEADERS = {0: "hop-by-hop options", 43: "routing", 44: "fragment", 60: "destination options"}
FRAGMENT_OFFSET_BITS = 13

U32Key = tuple[int, int, int]
"""One u32 key: (value, mask, offset), offset a multiple of 4 from the network header."""


@dataclass(frozen=True)
class U32Filter:
    """A u32 filter: packets of ``protocol`` whose keys all match go to ``classid``. ``parent``:
    the inner class whose filters it is among (HTB runs them on the packets a filter sends to that
    class), None for the root qdisc's.
    ``label`` says what it matches; a VNI filter also names its tenant, VNI and UDP port, a rule
    filter also its rule (its index in the tenant's ``rules``)."""

    prio: int
    protocol: int
    keys: tuple[U32Key, ...]
    classid: int
    label: str
    tenant: str | None = None
    vni: int | None = None
    udp_port: int | None = None
    rule: int | None = None
    parent: int | None = None


def _ipv4_udp(ihl: int) -> tuple[U32Key, ...]:
    """An IPv4 header of ``ihl`` words, a first fragment, carrying UDP."""
    return ((ihl << 24, 0x0F00_0000, 0), (0, 0x0000_1FFF, 4), (socket.IPPROTO_UDP << 16, 0x00FF_0000, 8))


def _ipv6_next_header(number: int) -> U32Key:
    return (number << 8, 0x0000_FF00, 4)


def vni_keys(vni: int, udp_port: int, protocol: int) -> tuple[U32Key, ...]:
    """The keys that find a VXLAN packet of ``vni`` to ``udp_port``. IPv4: IHL 5, the first
    fragment, UDP, the port, then the VNI word at 32; IPv6: next header UDP, the port, the VNI
    word at 52."""
    if protocol == ETH_P_IP:
        return (*_ipv4_udp(5), (udp_port, 0x0000_FFFF, 20), (vni << 8, 0xFFFF_FF00, 32))
    return (_ipv6_next_header(socket.IPPROTO_UDP), (udp_port, 0x0000_FFFF, 40), (vni << 8, 0xFFFF_FF00, 52))


def vni_filters(vni: int, udp_port: int, classid: int, tenant: str, parent: int | None = None, prio: int = VNI_PRIO[ETH_P_IP]) -> list[U32Filter]:
    """A tenant's two filters of one VNI and port: IPv4 underlay at ``prio``, IPv6 at the next."""
    return [
        U32Filter(
            prio + (protocol == ETH_P_IPV6),
            protocol,
            vni_keys(vni, udp_port, protocol),
            classid,
            f"VNI {vni} ({family}, UDP {udp_port})",
            tenant,
            vni,
            udp_port,
            parent=parent,
        )
        for protocol, family in ((ETH_P_IP, "IPv4"), (ETH_P_IPV6, "IPv6"))
    ]


def unmatched_filters(udp_ports: Iterable[int], classid: int) -> list[U32Filter]:
    """The packets whose VNI the VNI filters cannot read, to ``classid``: IPv4 UDP to a VXLAN
    port with options (IHL 6 to 15: the port is then at 4 * IHL + 2); IPv4 later fragments of
    UDP (any port: the port is in the first fragment only; one filter per bit of the fragment
    offset, as u32 cannot say "not 0"); IPv6 UDP behind one extension header (any port: the
    port's offset depends on the header's length). The underlay's own IPv6 control traffic (MLD
    behind hop-by-hop options, ICMPv6) is not UDP and stays in the default class."""
    ipv4, ipv6 = UNMATCHED_PRIO[ETH_P_IP], UNMATCHED_PRIO[ETH_P_IPV6]
    found = [
        U32Filter(ipv4, ETH_P_IP, (*_ipv4_udp(ihl), (port, 0x0000_FFFF, 4 * ihl)), classid, f"IPv4 with options (IHL {ihl}), UDP {port}")
        for port in udp_ports
        for ihl in range(6, 16)
    ]
    for bit in range(FRAGMENT_OFFSET_BITS):
        keys = ((1 << bit, 1 << bit, 4), (socket.IPPROTO_UDP << 16, 0x00FF_0000, 8))
        found.append(U32Filter(ipv4, ETH_P_IP, keys, classid, f"IPv4 later fragments of UDP (offset bit {bit})"))
    for number, name in IPV6_EXTENSION_HEADERS.items():
        keys = (_ipv6_next_header(number), (socket.IPPROTO_UDP << 24, 0xFF00_0000, 40))  # the extension header's own next header
        found.append(U32Filter(ipv6, ETH_P_IPV6, keys, classid, f"IPv6 UDP behind a {name} header"))
    return found
