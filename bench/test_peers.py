"""The peer parsers (bench/peers.py) extract the intended fields. Runs in a few seconds."""

import pytest

import peers
import traffic

pytest.importorskip("dpkt")
pytest.importorskip("scapy")

N = 300


@pytest.fixture(scope="module")
def vx_pcap(tmp_path_factory):
    p = tmp_path_factory.mktemp("peers") / "vx.pcap"
    traffic.write_vxlan_pcap(p, N, seed=11)
    return p, traffic.truth_tuples(traffic.make_vxlan_traffic(N, seed=11).truth)


@pytest.mark.parametrize("name", sorted(peers.PEERS))
def test_peer_matches_truth(vx_pcap, name):
    path, want = vx_pcap
    res = peers.PEERS[name](path)
    assert res.packets == len(res.rows) == N
    assert res.pps > 0 and res.seconds > 0
    assert peers.normalize_rows(res.rows) == want


@pytest.mark.parametrize("name", sorted(peers.PEERS))
def test_peer_limit(vx_pcap, name):
    path, want = vx_pcap
    res = peers.PEERS[name](path, limit=17)
    assert res.packets == 17
    assert peers.normalize_rows(res.rows) == want[:17]


@pytest.fixture(scope="module")
def odd_pcap(tmp_path_factory):
    """Hand-made packets around the edges of the VXLAN case, with the expected rows."""
    from scapy.all import ARP, ICMP, IP, TCP, UDP, VXLAN, Dot1Q, Ether, IPv6, wrpcap
    from scapy.layers.inet6 import IPv6ExtHdrHopByHop

    def E():  # explicit MACs: a bare Ether() makes scapy ARP for the destination
        return Ether(src="02:00:00:00:00:01", dst="02:00:00:00:00:02")

    def vx(inner, vni=42, flags=0x08, dport=4789, outer=None):
        outer = outer or IP(src="192.0.2.1", dst="192.0.2.2")
        return E() / outer / UDP(sport=50000, dport=dport) / VXLAN(flags=flags, vni=vni) / inner

    t4 = E() / IP(src="10.0.0.1", dst="10.0.0.2") / TCP(sport=1234, dport=80)
    cases = [
        # plain TCP, no tunnel: tenant = outer
        (E() / IP(src="198.51.100.1", dst="198.51.100.2") / TCP(sport=1, dport=2),
         ("198.51.100.1", "198.51.100.2", -1, "198.51.100.1", "198.51.100.2", 6, 1, 2)),
        # ordinary VXLAN
        (vx(t4, vni=0xABCDEF),
         ("192.0.2.1", "192.0.2.2", 0xABCDEF, "10.0.0.1", "10.0.0.2", 6, 1234, 80)),
        # VLAN-tagged outer frame
        (E() / Dot1Q(vlan=7) / IP(src="192.0.2.1", dst="192.0.2.2") / UDP(sport=5, dport=4789)
         / VXLAN(vni=9) / t4,
         ("192.0.2.1", "192.0.2.2", 9, "10.0.0.1", "10.0.0.2", 6, 1234, 80)),
        # IPv6 outer
        (vx(t4, vni=3, outer=IPv6(src="2001:db8::1", dst="2001:db8::2")),
         ("2001:db8::1", "2001:db8::2", 3, "10.0.0.1", "10.0.0.2", 6, 1234, 80)),
        # IPv6 tenant with a hop-by-hop header, UDP
        (vx(E() / IPv6(src="fd00::1", dst="fd00::2") / IPv6ExtHdrHopByHop()
            / UDP(sport=7, dport=8), vni=4),
         ("192.0.2.1", "192.0.2.2", 4, "fd00::1", "fd00::2", 17, 7, 8)),
        # ICMP tenant: no ports
        (vx(E() / IP(src="10.0.0.3", dst="10.0.0.4") / ICMP(), vni=5),
         ("192.0.2.1", "192.0.2.2", 5, "10.0.0.3", "10.0.0.4", 1, 0, 0)),
        # ARP tenant: no tenant IP packet
        (vx(E() / ARP(), vni=6), ("192.0.2.1", "192.0.2.2", 6, None, None, 0, 0, 0)),
        # I flag clear: no VNI, tenant not reached
        (vx(t4, flags=0x00), ("192.0.2.1", "192.0.2.2", -1, None, None, 0, 0, 0)),
        # VXLAN on the Linux port 8472 is not a tunnel for isolane's defaults
        (vx(t4, dport=8472),
         ("192.0.2.1", "192.0.2.2", -1, "192.0.2.1", "192.0.2.2", 17, 50000, 8472)),
        # not IP at all
        (E() / ARP(), (None, None, -1, None, None, 0, 0, 0)),
    ]
    p = tmp_path_factory.mktemp("peers") / "odd.pcap"
    wrpcap(str(p), [c[0] for c in cases])
    return p, [c[1] for c in cases]


@pytest.mark.parametrize("name", sorted(peers.PEERS))
def test_peer_edge_cases(odd_pcap, name):
    path, want = odd_pcap
    got = peers.normalize_rows(peers.PEERS[name](path).rows)
    assert got == want


def test_isolane_rows_normal_form():
    import numpy as np

    dt = np.dtype([("outer_src", "u1", 16), ("outer_dst", "u1", 16), ("src", "u1", 16),
                   ("dst", "u1", 16), ("vni", "i4"), ("proto", "u1"), ("src_port", "u2"),
                   ("dst_port", "u2")])
    a = np.zeros(2, dtype=dt)
    mapped = bytes(10) + b"\xff\xff" + bytes([10, 0, 0, 1])
    a["outer_src"][0] = np.frombuffer(mapped, np.uint8)
    a["src"][0] = np.frombuffer(bytes.fromhex("20010db8" + "00" * 11 + "01"), np.uint8)
    a["vni"] = [5, -1]
    a["proto"][0] = 6
    a["src_port"][0] = 80
    rows = peers.isolane_rows(a)
    assert rows == [("10.0.0.1", None, 5, "2001:db8::1", None, 6, 80, 0),
                    (None, None, -1, None, None, 0, 0, 0)]
