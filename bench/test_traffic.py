"""Checks of the synthetic traffic (bench/traffic.py) against scapy. Small N, runs in seconds.

    python -m pytest bench/test_traffic.py bench/test_peers.py
"""

import numpy as np
import pytest

import traffic

scapy_all = pytest.importorskip("scapy.all")
from scapy.all import IP, TCP, UDP, VXLAN, Ether, PcapReader, rdpcap  # noqa: E402

N = 400


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    path = tmp_path_factory.mktemp("traffic") / "small.pcap"
    # small chunks so that several chunk boundaries are crossed
    size = traffic.write_vxlan_pcap(path, N, seed=7, chunk_packets=128)
    tr = traffic.make_vxlan_traffic(N, seed=7, chunk_packets=128)
    return path, size, tr


def test_arrays_layout():
    tr = traffic.make_vxlan_traffic(1000, seed=3)
    data, offsets, lengths, ts = tr.arrays()
    assert data.dtype == np.uint8 and data.ndim == 1 and data.flags.c_contiguous
    assert offsets.dtype == np.uint64 and lengths.dtype == np.uint32 and ts.dtype == np.int64
    assert len(data) == 1000 * traffic.PACKET_LEN == 114_000
    assert (offsets == np.arange(1000, dtype=np.uint64) * 114).all()
    assert (lengths == 114).all()
    assert (np.diff(ts) > 0).all()
    # deterministic
    again = traffic.make_vxlan_traffic(1000, seed=3)
    assert np.array_equal(again.data, data) and np.array_equal(again.timestamps_ns, ts)
    assert not np.array_equal(traffic.make_vxlan_traffic(1000, seed=4).data, data)


def test_variety():
    tr = traffic.make_vxlan_traffic(20_000, seed=1)
    t = tr.truth
    assert len(np.unique(t["vni"])) > 900  # ~1000 VNIs in play
    assert set(np.unique(t["proto"]).tolist()) == {6, 17}
    assert len(np.unique(t["src"])) > 5_000
    assert len(np.unique(t["src_port"])) > 5_000
    assert t["vni"].max() > 1 << 16  # all three VNI bytes vary
    # ~50/50 TCP/UDP
    assert 0.4 < (t["proto"] == 6).mean() < 0.6


def test_pcap_file(small):
    path, size, tr = small
    raw = path.read_bytes()
    assert len(raw) == size == 24 + 130 * N
    assert raw[:4] == bytes.fromhex("4d3cb2a1")  # 0xa1b23c4d little-endian: nanosecond pcap
    hdr = np.frombuffer(raw[:24], dtype="<u4", offset=0, count=1)
    assert int(hdr[0]) == 0xA1B23C4D
    assert int(np.frombuffer(raw[20:24], "<u4")[0]) == 1  # LINKTYPE_ETHERNET
    rec = np.frombuffer(raw[24:], dtype=np.uint8).reshape(N, 130)
    # same bytes as the in-memory batch, same timestamps
    assert np.array_equal(rec[:, 16:].reshape(-1), tr.data)
    h = rec[:, :16].copy().view("<u4")
    ts = h[:, 0].astype(np.int64) * 1_000_000_000 + h[:, 1]
    assert np.array_equal(ts, tr.timestamps_ns)
    assert (h[:, 1] < 1_000_000_000).all()
    assert (h[:, 2] == 114).all() and (h[:, 3] == 114).all()


def test_pcap_size_target(tmp_path):
    target = 1_000_003
    p = tmp_path / "sized.pcap"
    n = traffic.write_vxlan_pcap_size(p, target, chunk_packets=1000)
    size = p.stat().st_size
    assert n == traffic.pcap_packet_count(target) == (target - 24) // 130
    assert target - 130 < size <= target
    rec = np.fromfile(p, dtype=np.uint8, offset=24).reshape(n, 130)
    h = rec[:, :16].copy().view("<u4")
    ts = h[:, 0].astype(np.int64) * 1_000_000_000 + h[:, 1]
    assert (np.diff(ts) > 0).all()  # increasing across chunk boundaries
    assert not (p.parent / (p.name + ".partial")).exists()


def test_scapy_sees_vxlan(small):
    path, _, tr = small
    pkts = rdpcap(str(path))
    assert len(pkts) == N
    t = tr.truth
    for i, p in enumerate(pkts):
        assert len(p) == 114
        assert float(p.time) == pytest.approx(tr.timestamps_ns[i] / 1e9, abs=1e-6)
        assert Ether in p and p[Ether].type == 0x0800
        o = p[IP]
        assert o.version == 4 and o.ihl == 5 and o.len == 100 and o.proto == 17
        assert o.src == traffic.ipv4_str(t["outer_src"][i])
        assert o.dst == traffic.ipv4_str(t["outer_dst"][i])
        assert o.flags.DF and o.frag == 0
        ou = p[UDP]
        assert ou.dport == 4789 and ou.len == 80 and ou.chksum == 0
        assert 49152 <= ou.sport <= 65535
        assert VXLAN in p
        vx = p[VXLAN]
        assert vx.flags == 0x08  # I flag only
        assert vx.vni == int(t["vni"][i])
        inner = vx.payload
        assert isinstance(inner, Ether) and len(inner) == 64
        ip = inner[IP]
        assert ip.len == 50 and ip.ihl == 5
        assert ip.src == traffic.ipv4_str(t["src"][i])
        assert ip.dst == traffic.ipv4_str(t["dst"][i])
        assert ip.proto == int(t["proto"][i])
        assert ip.tos >> 2 == int(t["dscp"][i])
        l4 = ip[TCP] if ip.proto == 6 else ip[UDP]
        assert isinstance(l4, TCP if ip.proto == 6 else UDP)
        assert l4.sport == int(t["src_port"][i])
        assert l4.dport == int(t["dst_port"][i])
    # the expected tuples, seen through scapy
    seen = [
        (p[IP].src, p[IP].dst, p[VXLAN].vni, p[VXLAN].payload[IP].src,
         p[VXLAN].payload[IP].dst, p[VXLAN].payload[IP].proto,
         p[VXLAN].payload[IP].payload.sport, p[VXLAN].payload[IP].payload.dport)
        for p in PcapReader(str(path))
    ]
    assert seen == traffic.truth_tuples(t)


def test_checksums_valid(small):
    """Outer and inner IPv4 header checksums and the inner TCP/UDP checksums (with the pseudo
    header) are the ones scapy computes."""
    path, _, _ = small
    for p in rdpcap(str(path)):
        ip = p[VXLAN].payload[IP]
        i2 = IP(bytes(ip))
        want = i2.chksum
        del i2.chksum
        assert IP(bytes(i2)).chksum == want
        raw = bytes(ip)
        re = IP(raw)
        l4 = re[TCP] if re.proto == 6 else re[UDP]
        want = l4.chksum
        assert want != 0
        del l4.chksum
        assert IP(bytes(re)).payload.chksum == want
    for p in rdpcap(str(path)):
        o = IP(bytes(p[IP]))
        want = o.chksum
        del o.chksum
        assert IP(bytes(o)).chksum == want
