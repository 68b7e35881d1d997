"""Synthetic VXLAN traffic for the isolane benchmarks, generated with numpy.

Every packet is 114 bytes and looks like this::

    offset  size  header
         0    14  outer Ethernet      (dst 02:00:5e:00:00:01, src 02:00:ac:10:xx:yy, type 0x0800)
        14    20  outer IPv4          (VTEP -> VTEP in 172.16.0.0/16, DF, TTL 64, proto 17)
        34     8  outer UDP           (src 49152-65535 flow entropy, dst 4789, checksum 0)
        42     8  VXLAN               (flags 0x08 = I, VNI from a table of ``n_vnis`` VNIs)
        50    14  inner Ethernet      (type 0x0800)
        64    20  inner IPv4          (10.0.0.0/8 -> 10.0.0.0/8, DSCP varied, proto 6 or 17)
        84    30  inner TCP (20 + 10 bytes payload) or inner UDP (8 + 22 bytes payload)

so the inner Ethernet frame is 64 bytes. All IPv4 header checksums and the inner TCP/UDP
checksums are correct (the outer UDP checksum is 0, as usual for VXLAN over IPv4).

Packets are drawn from a table of ``n_flows`` flows (tenant VNI, VTEP pair, inner 5-tuple,
DSCP), built from ``seed``; which flow each packet belongs to, the IP ids, TCP sequence numbers
and the inter-packet gaps are drawn from an rng seeded with ``(seed, chunk index)``. Everything
is vectorised: a million packets take well under a second.

Public API
----------
``make_vxlan_traffic(n)``      -> :class:`Traffic` (arrays + ground truth per packet)
``make_vxlan_arrays(n)``       -> ``(data, offsets, lengths, timestamps_ns)``
``write_vxlan_pcap(path, n)``  -> writes a classic nanosecond pcap of ``n`` packets
``write_vxlan_pcap_size(path, target_bytes)`` -> same, sized to at most ``target_bytes``
``truth_tuples(truth, k)``     -> the first ``k`` ground-truth rows as peer-style tuples
"""

from __future__ import annotations

import ipaddress
import os
from dataclasses import dataclass

import numpy as np

__all__ = [
    "PACKET_LEN",
    "INNER_FRAME_LEN",
    "PCAP_GLOBAL_HEADER_LEN",
    "PCAP_RECORD_HEADER_LEN",
    "PCAP_RECORD_LEN",
    "DEFAULT_N",
    "Traffic",
    "make_vxlan_traffic",
    "make_vxlan_arrays",
    "write_vxlan_pcap",
    "write_vxlan_pcap_size",
    "pcap_packet_count",
    "truth_tuples",
    "ipv4_str",
]

OUTER_LEN = 14 + 20 + 8 + 8  # 50
INNER_FRAME_LEN = 64
PACKET_LEN = OUTER_LEN + INNER_FRAME_LEN  # 114
PCAP_GLOBAL_HEADER_LEN = 24
PCAP_RECORD_HEADER_LEN = 16
PCAP_RECORD_LEN = PCAP_RECORD_HEADER_LEN + PACKET_LEN  # 130
PCAP_MAGIC_NS = 0xA1B23C4D
LINKTYPE_ETHERNET = 1
VXLAN_PORT = 4789
DEFAULT_N = 1_000_000
DEFAULT_CHUNK = 1 << 18  # packets per chunk when writing pcaps (~34 MB of records)
DEFAULT_START_NS = 1_700_000_000_000_000_000  # 2023-11-14T22:13:20Z

# Byte offsets inside a packet.
_O_ETH, _O_IP, _O_UDP, _O_VX = 0, 14, 34, 42
_I_ETH, _I_IP, _I_L4 = 50, 64, 84
_L4_LEN = PACKET_LEN - _I_L4  # 30
_INNER_IP_TOTAL = INNER_FRAME_LEN - 14  # 50
_OUTER_IP_TOTAL = PACKET_LEN - 14  # 100
_OUTER_UDP_LEN = PACKET_LEN - _O_UDP  # 80

_TCP_PORTS = np.array([22, 80, 443, 3306, 5432, 6379, 8080, 8443], dtype=np.uint16)
_UDP_PORTS = np.array([53, 123, 443, 514, 4500, 5353, 8125, 9995], dtype=np.uint16)
_DSCPS = np.array([0, 0, 0, 0, 10, 18, 26, 46], dtype=np.uint8)
_PAYLOAD = np.frombuffer(b"isolane-bench-payload-0123456789", dtype=np.uint8)


def _template() -> np.ndarray:
    """The constant bytes of every packet (varied fields are overwritten)."""
    t = np.zeros(PACKET_LEN, dtype=np.uint8)
    # outer Ethernet: dst 02:00:5e:00:00:01, src 02:00:ac:10:(vtep), IPv4
    t[0:6] = [0x02, 0x00, 0x5E, 0x00, 0x00, 0x01]
    t[6:10] = [0x02, 0x00, 0xAC, 0x10]
    t[12:14] = [0x08, 0x00]
    # outer IPv4
    ip = _O_IP
    t[ip] = 0x45
    t[ip + 2 : ip + 4] = [_OUTER_IP_TOTAL >> 8, _OUTER_IP_TOTAL & 0xFF]
    t[ip + 6] = 0x40  # DF
    t[ip + 8] = 64  # TTL
    t[ip + 9] = 17  # UDP
    t[ip + 12 : ip + 14] = [172, 16]
    t[ip + 16 : ip + 18] = [172, 16]
    # outer UDP
    u = _O_UDP
    t[u + 2 : u + 4] = [VXLAN_PORT >> 8, VXLAN_PORT & 0xFF]
    t[u + 4 : u + 6] = [_OUTER_UDP_LEN >> 8, _OUTER_UDP_LEN & 0xFF]
    # VXLAN: flags = I
    t[_O_VX] = 0x08
    # inner Ethernet: dst 02:01:(vni):..., src 02:02:..., IPv4
    t[_I_ETH + 0 : _I_ETH + 2] = [0x02, 0x01]
    t[_I_ETH + 6 : _I_ETH + 8] = [0x02, 0x02]
    t[_I_ETH + 12 : _I_ETH + 14] = [0x08, 0x00]
    # inner IPv4
    ip = _I_IP
    t[ip] = 0x45
    t[ip + 2 : ip + 4] = [0, _INNER_IP_TOTAL]
    t[ip + 8] = 64
    t[ip + 12] = 10
    t[ip + 16] = 10
    return t


_TEMPLATE = _template()


@dataclass
class _Flows:
    """Flow table: one entry per flow (all arrays have the same length)."""

    vni: np.ndarray  # u4 (24-bit)
    outer_src: np.ndarray  # u4 IPv4
    outer_dst: np.ndarray  # u4 IPv4
    outer_sport: np.ndarray  # u2
    src: np.ndarray  # u4 IPv4
    dst: np.ndarray  # u4 IPv4
    proto: np.ndarray  # u1
    src_port: np.ndarray  # u2
    dst_port: np.ndarray  # u2
    dscp: np.ndarray  # u1


_FLOW_CACHE: dict[tuple[int, int, int], _Flows] = {}


def _vni_table(n_vnis: int) -> np.ndarray:
    # n_vnis distinct VNIs spread over the whole 24-bit space (all three bytes vary).
    if not 1 <= n_vnis <= 1 << 16:
        raise ValueError("n_vnis must be in 1..65536")
    k = np.arange(n_vnis, dtype=np.uint64)
    return ((k * 16411 + 4099) % (1 << 24)).astype(np.uint32)  # 16411 odd -> distinct


def _flows(seed: int, n_flows: int, n_vnis: int) -> _Flows:
    key = (seed, n_flows, n_vnis)
    f = _FLOW_CACHE.get(key)
    if f is not None:
        return f
    rng = np.random.default_rng([seed, 0, 0])
    vnis = _vni_table(n_vnis)
    vni = vnis[rng.integers(0, n_vnis, n_flows)]
    # 254 VTEPs 172.16.0.1 .. 172.16.0.254; src != dst
    vtep_a = rng.integers(1, 255, n_flows, dtype=np.uint32)
    vtep_b = (vtep_a - 1 + rng.integers(1, 254, n_flows, dtype=np.uint32)) % 254 + 1
    base = np.uint32(0xAC100000)
    proto = np.where(rng.random(n_flows) < 0.5, 6, 17).astype(np.uint8)
    is_tcp = proto == 6
    well_known = np.where(
        is_tcp,
        _TCP_PORTS[rng.integers(0, len(_TCP_PORTS), n_flows)],
        _UDP_PORTS[rng.integers(0, len(_UDP_PORTS), n_flows)],
    )
    ephemeral = rng.integers(1024, 65536, n_flows).astype(np.uint16)
    # half of the flows are client -> server, half server -> client
    to_server = rng.random(n_flows) < 0.5
    f = _Flows(
        vni=vni.astype(np.uint32),
        outer_src=base + vtep_a,
        outer_dst=base + vtep_b,
        outer_sport=rng.integers(49152, 65536, n_flows).astype(np.uint16),
        src=(np.uint32(0x0A000000) | rng.integers(1, 1 << 24, n_flows, dtype=np.uint32)),
        dst=(np.uint32(0x0A000000) | rng.integers(1, 1 << 24, n_flows, dtype=np.uint32)),
        proto=proto,
        src_port=np.where(to_server, ephemeral, well_known).astype(np.uint16),
        dst_port=np.where(to_server, well_known, ephemeral).astype(np.uint16),
        dscp=_DSCPS[rng.integers(0, len(_DSCPS), n_flows)],
    )
    if len(_FLOW_CACHE) > 8:
        _FLOW_CACHE.clear()
    _FLOW_CACHE[key] = f
    return f


# ---------------------------------------------------------------------------------------------
# vectorised packet construction through structured (big-endian, unaligned) views


def _fields(base: int, itemsize: int, extra=()) -> tuple[np.dtype, np.dtype]:
    """Two structured dtypes over rows of ``itemsize`` bytes with the packet at ``base``:
    one with the inner TCP layout, one with the inner UDP layout (they overlap at L4)."""
    common = [
        ("osmac", ">u2", _O_ETH + 10),
        ("oip_id", ">u2", _O_IP + 4),
        ("oip_csum", ">u2", _O_IP + 10),
        ("oip_src", ">u4", _O_IP + 12),
        ("oip_dst", ">u4", _O_IP + 16),
        ("oudp_sport", ">u2", _O_UDP),
        ("vni_hi", "u1", _O_VX + 4),
        ("vni_lo", ">u2", _O_VX + 5),
        ("idmac_vni_hi", "u1", _I_ETH + 2),
        ("idmac_vni_lo", ">u2", _I_ETH + 3),
        ("idmac_host", "u1", _I_ETH + 5),
        ("ismac_vni_hi", "u1", _I_ETH + 8),
        ("ismac_vni_lo", ">u2", _I_ETH + 9),
        ("ismac_host", "u1", _I_ETH + 11),
        ("iip_tos", "u1", _I_IP + 1),
        ("iip_id", ">u2", _I_IP + 4),
        ("iip_proto", "u1", _I_IP + 9),
        ("iip_csum", ">u2", _I_IP + 10),
        ("iip_src", ">u4", _I_IP + 12),
        ("iip_dst", ">u4", _I_IP + 16),
        ("sport", ">u2", _I_L4),
        ("dport", ">u2", _I_L4 + 2),
    ]
    tcp = common + [
        ("seq", ">u4", _I_L4 + 4),
        ("ack", ">u4", _I_L4 + 8),
        ("off_flags_win", ">u4", _I_L4 + 12),
        ("csum", ">u2", _I_L4 + 16),
        ("urg", ">u2", _I_L4 + 18),
        ("payload", ("u1", _L4_LEN - 20), _I_L4 + 20),
    ]
    udp = common + [
        ("ulen", ">u2", _I_L4 + 4),
        ("csum", ">u2", _I_L4 + 6),
        ("payload", ("u1", _L4_LEN - 8), _I_L4 + 8),
    ]

    def mk(fs):
        names = [f[0] for f in extra] + [f[0] for f in fs]
        formats = [f[1] for f in extra] + [f[1] for f in fs]
        offsets = [f[2] for f in extra] + [f[2] + base for f in fs]
        return np.dtype({"names": names, "formats": formats, "offsets": offsets,
                         "itemsize": itemsize})

    return mk(tcp), mk(udp)


_MEM_DTYPES = _fields(0, PACKET_LEN)
_PCAP_DTYPES = _fields(
    PCAP_RECORD_HEADER_LEN, PCAP_RECORD_LEN,
    extra=[("ts_sec", "<u4", 0), ("ts_nsec", "<u4", 4), ("incl_len", "<u4", 8),
           ("orig_len", "<u4", 12)],
)


def _fold(s: np.ndarray) -> np.ndarray:
    """Internet checksum (one's complement of the folded sum) of u8 sums of 16-bit words."""
    s = (s & 0xFFFF) + (s >> 16)
    s = (s & 0xFFFF) + (s >> 16)
    s = (s & 0xFFFF) + (s >> 16)
    return ((~s) & 0xFFFF).astype(np.uint16)


def _words(v: np.ndarray) -> np.ndarray:
    """hi + lo 16-bit words of u4 values, as u8."""
    v = v.astype(np.uint64)
    return (v >> 16) + (v & 0xFFFF)


def _const_sum(b: np.ndarray) -> int:
    b = b.astype(np.uint64)
    if len(b) % 2:
        b = np.append(b, 0)
    return int((b[0::2] << 8).sum() + b[1::2].sum())


_T = _TEMPLATE
_OIP_CONST = _const_sum(_T[_O_IP:_O_IP + 20])  # includes the 172.16 halves of the addresses
_IIP_CONST = _const_sum(_T[_I_IP:_I_IP + 20])  # includes the two 10 high bytes
_UDP_PAYLOAD = _PAYLOAD[: _L4_LEN - 8]
_TCP_PAYLOAD = _PAYLOAD[: _L4_LEN - 20]
_UDP_CONST = _const_sum(_UDP_PAYLOAD) + _L4_LEN  # + ulen
_TCP_OFW = (0x50 << 24) | (0x18 << 16) | 0xFFFF  # data offset 5, PSH|ACK, window 65535
_TCP_CONST = _const_sum(_TCP_PAYLOAD) + (_TCP_OFW >> 16) + (_TCP_OFW & 0xFFFF)


def _fill(rows: np.ndarray, base: int, dtypes, rng: np.random.Generator,
          flows: _Flows, first_index: int) -> np.ndarray:
    """Fill packets into ``rows``, a C-contiguous (n, itemsize) uint8 array whose packets
    start at column ``base``, through the structured views ``dtypes`` (from :func:`_fields`);
    ``first_index`` numbers the outer IP ids. Returns the flow index of each row."""
    if not rows.flags.c_contiguous or rows.shape[1] != dtypes[0].itemsize:
        raise ValueError("rows must be a C-contiguous (n, itemsize) uint8 array")
    n = rows.shape[0]
    fi = rng.integers(0, len(flows.vni), n)
    vni = flows.vni[fi]
    osrc = flows.outer_src[fi]
    odst = flows.outer_dst[fi]
    src = flows.src[fi]
    dst = flows.dst[fi]
    proto = flows.proto[fi]
    dscp = flows.dscp[fi]
    is_tcp = proto == 6
    is_udp = ~is_tcp

    rows[:, base:base + PACKET_LEN] = _TEMPLATE
    t = rows.reshape(-1).view(dtypes[0])
    u = rows.reshape(-1).view(dtypes[1])

    # outer Ethernet / IPv4 / UDP
    oid = ((np.arange(n, dtype=np.uint64) + np.uint64(first_index)) & 0xFFFF).astype(np.uint16)
    t["osmac"] = osrc & 0xFFFF
    t["oip_id"] = oid
    t["oip_src"] = osrc
    t["oip_dst"] = odst
    # template already holds the 172.16 high words, so only add the low words
    t["oip_csum"] = _fold(_OIP_CONST + oid.astype(np.uint64)
                          + (osrc & 0xFFFF) + (odst & 0xFFFF))
    t["oudp_sport"] = flows.outer_sport[fi]
    # VXLAN
    vhi = (vni >> 16).astype(np.uint8)
    vlo = (vni & 0xFFFF).astype(np.uint16)
    t["vni_hi"] = vhi
    t["vni_lo"] = vlo
    # inner Ethernet
    t["idmac_vni_hi"] = vhi
    t["idmac_vni_lo"] = vlo
    t["idmac_host"] = dst & 0xFF
    t["ismac_vni_hi"] = vhi
    t["ismac_vni_lo"] = vlo
    t["ismac_host"] = src & 0xFF
    # inner IPv4 (template: 0x45, total 50, ttl 64, 10 / 10 high bytes of addresses)
    iid = rng.integers(0, 1 << 16, n, dtype=np.uint32).astype(np.uint16)
    tos = (dscp << 2).astype(np.uint8)
    t["iip_tos"] = tos
    t["iip_id"] = iid
    t["iip_proto"] = proto
    t["iip_src"] = src
    t["iip_dst"] = dst
    t["iip_csum"] = _fold(_IIP_CONST - (10 << 8) * 2 + tos.astype(np.uint64)
                          + iid + proto.astype(np.uint64) + _words(src) + _words(dst))
    # inner L4
    sport = flows.src_port[fi]
    dport = flows.dst_port[fi]
    t["sport"] = sport
    t["dport"] = dport
    pseudo = _words(src) + _words(dst) + proto.astype(np.uint64) + _L4_LEN
    l4sum = pseudo + sport.astype(np.uint64) + dport.astype(np.uint64)
    tcp_rows = np.flatnonzero(is_tcp)
    udp_rows = np.flatnonzero(is_udp)
    # UDP rows
    u["ulen"][udp_rows] = _L4_LEN
    u["payload"][udp_rows] = _UDP_PAYLOAD
    c = _fold(l4sum[udp_rows] + _UDP_CONST)
    c[c == 0] = 0xFFFF  # 0 would mean "no checksum"
    u["csum"][udp_rows] = c
    # TCP rows
    seq = rng.integers(0, 1 << 32, len(tcp_rows), dtype=np.uint64)
    ack = rng.integers(0, 1 << 32, len(tcp_rows), dtype=np.uint64)
    t["seq"][tcp_rows] = seq
    t["ack"][tcp_rows] = ack
    t["off_flags_win"][tcp_rows] = _TCP_OFW
    t["urg"][tcp_rows] = 0
    t["payload"][tcp_rows] = _TCP_PAYLOAD
    t["csum"][tcp_rows] = _fold(l4sum[tcp_rows] + _TCP_CONST + _words(seq) + _words(ack))
    return fi


def _timestamps(rng: np.random.Generator, n: int, start_ns: int) -> np.ndarray:
    """Strictly increasing timestamps starting at start_ns (gaps 60..500 ns, ~3.6 Mpps)."""
    gaps = rng.integers(60, 501, n, dtype=np.int64)
    gaps[0] = 0
    return np.cumsum(gaps) + np.int64(start_ns)


# ---------------------------------------------------------------------------------------------
# in-memory batches


@dataclass
class Traffic:
    """An in-memory batch plus the ground truth for each packet.

    ``data`` is one contiguous uint8 buffer; packet ``i`` is
    ``data[offsets[i] : offsets[i] + lengths[i]]``.
    ``truth`` maps field name -> array of length n: ``vni`` (u4), ``outer_src``, ``outer_dst``,
    ``src``, ``dst`` (u4 IPv4 addresses in host order), ``proto`` (u1), ``src_port``,
    ``dst_port`` (u2), ``dscp`` (u1).
    """

    data: np.ndarray
    offsets: np.ndarray
    lengths: np.ndarray
    timestamps_ns: np.ndarray
    truth: dict

    def __len__(self) -> int:
        return len(self.offsets)

    def arrays(self):
        return self.data, self.offsets, self.lengths, self.timestamps_ns


def _truth(flows: _Flows, fi: np.ndarray) -> dict:
    return {
        "vni": flows.vni[fi],
        "outer_src": flows.outer_src[fi],
        "outer_dst": flows.outer_dst[fi],
        "src": flows.src[fi],
        "dst": flows.dst[fi],
        "proto": flows.proto[fi],
        "src_port": flows.src_port[fi],
        "dst_port": flows.dst_port[fi],
        "dscp": flows.dscp[fi],
    }


def _chunks(n: int, chunk_packets: int):
    """(chunk index, first packet, end packet) for n packets in chunks of chunk_packets."""
    if n < 0:
        raise ValueError("n must be >= 0")
    if chunk_packets <= 0:
        raise ValueError("chunk_packets must be > 0")
    for k, lo in enumerate(range(0, n, chunk_packets)):
        yield k, lo, min(n, lo + chunk_packets)


def _chunk_rng(seed: int, k: int) -> np.random.Generator:
    return np.random.default_rng([seed, 1, k])


def make_vxlan_traffic(
    n: int = DEFAULT_N,
    *,
    seed: int = 0,
    n_vnis: int = 1000,
    n_flows: int = 100_000,
    start_ns: int = DEFAULT_START_NS,
    chunk_packets: int = DEFAULT_CHUNK,
) -> Traffic:
    """``n`` VXLAN packets (see module docstring) with their ground truth.

    The packets are byte-for-byte those of ``write_vxlan_pcap(path, n)`` with the same
    keyword arguments (generation runs in chunks of ``chunk_packets``, each with its own rng
    seeded from ``(seed, chunk index)``; the chunking only matters for reproducibility).
    """
    flows = _flows(seed, n_flows, n_vnis)
    pkts = np.empty((n, PACKET_LEN), dtype=np.uint8)
    ts = np.empty(n, dtype=np.int64)
    fi = np.empty(n, dtype=np.intp)
    next_ns = start_ns
    for k, lo, hi in _chunks(n, chunk_packets):
        rng = _chunk_rng(seed, k)
        fi[lo:hi] = _fill(pkts[lo:hi], 0, _MEM_DTYPES, rng, flows, lo)
        ts[lo:hi] = _timestamps(rng, hi - lo, next_ns)
        next_ns = int(ts[hi - 1]) + 100
    return Traffic(
        data=pkts.reshape(-1),
        offsets=np.arange(n, dtype=np.uint64) * np.uint64(PACKET_LEN),
        lengths=np.full(n, PACKET_LEN, dtype=np.uint32),
        timestamps_ns=ts,
        truth=_truth(flows, fi),
    )


def make_vxlan_arrays(n: int = DEFAULT_N, **kw):
    """``(data, offsets, lengths, timestamps_ns)`` for ``n`` VXLAN packets.

    dtypes: uint8 (one contiguous buffer of n * 114 bytes), uint64, uint32, int64.
    Keyword arguments as for :func:`make_vxlan_traffic`.
    """
    return make_vxlan_traffic(n, **kw).arrays()


# ---------------------------------------------------------------------------------------------
# pcap files


def _pcap_global_header(snaplen: int = 262144) -> bytes:
    h = np.zeros(1, dtype=[("magic", "<u4"), ("vmaj", "<u2"), ("vmin", "<u2"),
                           ("zone", "<i4"), ("sigfigs", "<u4"), ("snaplen", "<u4"),
                           ("linktype", "<u4")])
    h[0] = (PCAP_MAGIC_NS, 2, 4, 0, 0, snaplen, LINKTYPE_ETHERNET)
    return h.tobytes()


def write_vxlan_pcap(
    path,
    n: int = DEFAULT_N,
    *,
    seed: int = 0,
    n_vnis: int = 1000,
    n_flows: int = 100_000,
    start_ns: int = DEFAULT_START_NS,
    chunk_packets: int = DEFAULT_CHUNK,
    fsync: bool = False,
) -> int:
    """Write ``n`` VXLAN packets to a classic pcap (ns magic 0xa1b23c4d, LINKTYPE_ETHERNET,
    captured length = original length = 114).

    Written in chunks of ``chunk_packets`` packets, so memory stays at a few times
    ``chunk_packets * 130`` bytes (~100 MB by default) whatever ``n`` is. The packets and
    timestamps are those of ``make_vxlan_traffic(n, **same keywords)``. The file appears
    atomically (written as ``path + ".partial"`` then renamed). Returns the file size in bytes
    (24 + 130 * n).
    """
    flows = _flows(seed, n_flows, n_vnis)
    path = os.fspath(path)
    tmp = path + ".partial"
    with open(tmp, "wb") as f:
        f.write(_pcap_global_header())
        next_ns = start_ns
        for k, lo, hi in _chunks(n, chunk_packets):
            m = hi - lo
            rng = _chunk_rng(seed, k)
            rec = np.empty((m, PCAP_RECORD_LEN), dtype=np.uint8)
            _fill(rec, PCAP_RECORD_HEADER_LEN, _PCAP_DTYPES, rng, flows, lo)
            ts = _timestamps(rng, m, next_ns)
            next_ns = int(ts[-1]) + 100
            r = rec.reshape(-1).view(_PCAP_DTYPES[0])
            r["ts_sec"] = ts // 1_000_000_000
            r["ts_nsec"] = ts % 1_000_000_000
            r["incl_len"] = PACKET_LEN
            r["orig_len"] = PACKET_LEN
            f.write(memoryview(rec.reshape(-1)))
            del rec, r, ts
        f.flush()
        if fsync:
            os.fsync(f.fileno())
    os.replace(tmp, path)
    return PCAP_GLOBAL_HEADER_LEN + PCAP_RECORD_LEN * n


def pcap_packet_count(target_bytes: int) -> int:
    """The number of packets in a pcap written by :func:`write_vxlan_pcap_size`."""
    return max(0, (int(target_bytes) - PCAP_GLOBAL_HEADER_LEN) // PCAP_RECORD_LEN)


def write_vxlan_pcap_size(path, target_bytes: int = 2_000_000_000, **kw) -> int:
    """Write a VXLAN pcap of the largest whole number of packets whose size is at most
    ``target_bytes`` (so the file is within 130 bytes below the target). Memory is bounded
    as in :func:`write_vxlan_pcap` (keywords are passed on). Returns the packet count."""
    n = pcap_packet_count(target_bytes)
    write_vxlan_pcap(path, n, **kw)
    return n


# ---------------------------------------------------------------------------------------------
# ground truth as tuples (same shape as bench/peers.py results)


def ipv4_str(v: int) -> str:
    return str(ipaddress.IPv4Address(int(v)))


def truth_tuples(truth: dict, k: int | None = None) -> list[tuple]:
    """The first ``k`` packets' ground truth as
    ``(outer_src, outer_dst, vni, src, dst, proto, src_port, dst_port)`` with dotted-quad
    address strings, the normal form used by :func:`peers.normalize`."""
    k = len(truth["vni"]) if k is None else min(k, len(truth["vni"]))
    cols = [truth[c][:k].tolist() for c in
            ("outer_src", "outer_dst", "vni", "src", "dst", "proto", "src_port", "dst_port")]
    return [
        (ipv4_str(os_), ipv4_str(od), int(v), ipv4_str(s), ipv4_str(d), int(p), int(sp), int(dp))
        for os_, od, v, s, d, p, sp, dp in zip(*cols)
    ]
