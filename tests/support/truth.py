"""Expected ``isolane.parse`` fields, derived from tshark's per-packet ground truth.

Plain Python (stdlib only, no isolane import) so it can be run and checked on its own::

    python3 tests/support/truth.py [NAME ...]      # prints the expectations, frame by frame

Input: ``NAME.nodefrag_all.csv`` in ``../shared/pcaps/real`` (tshark 4.0, IP reassembly off,
every occurrence of a field, outermost first, ``|``-separated). Columns::

    frame.number, frame.time_epoch, frame.len, frame.cap_len, frame.protocols, vlan.id,
    vxlan.vni, ip.src, ip.dst, ip.proto, ipv6.src, ipv6.dst, ipv6.nxt,
    tcp.srcport, tcp.dstport, udp.srcport, udp.dstport, geneve.vni

Every multi-valued column has one value per occurrence of its protocol in ``frame.protocols``
(``ip.*`` per ``ip`` layer, ``udp.*`` per ``udp`` layer, ...), so the k-th ``ip`` token of
``frame.protocols`` owns the k-th value of ``ip.src``. That is how the tenant's values are picked.

Output (see docs/parsing.md): per frame, a dict ``expected`` holding only the fields the CSV
determines. Addresses are ``ipaddress`` objects (IPv4 stays IPv4), ``None`` meaning "not
reached" (all-zero bytes). Fields:

    status, tunnel, vni, vlan, outer_src, outer_dst, src, dst, ip_version, proto,
    src_port, dst_port, is_fragment (only ever set to True, see below), wire_len

What the CSV cannot tell, and is therefore left out (never guessed):
  * ``dscp`` (no column).
  * ``is_fragment`` = False: a first fragment (MF set, offset 0) is dissected like a whole
    packet when reassembly is off, and there is no flags/offset column. The loader only
    asserts ``is_fragment`` = True, for non-first IPv4 fragments (an ``ip`` layer followed by
    ``data`` although its protocol is one tshark always dissects) and IPv6 fragment headers.
  * ``status`` where the protocol stack stops before a header isolane needs and the frame was
    cut by the capture: whether it is TRUNCATED or MALFORMED depends on IP length fields that
    are not in the CSV. Such frames get a note and no ``status``.
  * The VXLAN I flag (no flags column): the loader assumes it is set (checked by hand against
    the bytes of every current capture: flags are 0x08, 0xff or 0x0c, all with I).
"""
from __future__ import annotations

import csv
import ipaddress
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# Same codes as isolane.Status / isolane.Tunnel (kept here so this module runs stand-alone).
OK, TRUNCATED, MALFORMED, UNSUPPORTED = 0, 1, 2, 3
STATUS_NAMES = {OK: "OK", TRUNCATED: "TRUNCATED", MALFORMED: "MALFORMED", UNSUPPORTED: "UNSUPPORTED"}
NONE, VXLAN, GENEVE = 0, 1, 2
TUNNEL_NAMES = {NONE: "NONE", VXLAN: "VXLAN", GENEVE: "GENEVE"}

DEFAULT_VXLAN_PORTS = (4789,)
DEFAULT_GENEVE_PORTS = (6081,)

SHARED_REAL = Path(__file__).resolve().parents[2].parent / "shared" / "pcaps" / "real"
SUFFIX = ".nodefrag_all.csv"

# Link-layer tokens that may precede the outer IP header (Ethernet, 802.1Q/802.1ad, SLL,
# BSD loopback, raw IP).
OUTER_LINK_TOKENS = {"eth", "ethertype", "vlan", "sll", "null", "loop", "raw", "ieee8021ad"}
# Tokens that may sit between a tunnel header and the tenant's IP header.
INNER_LINK_TOKENS = {"eth", "ethertype", "vlan", "ieee8021ad"}

# tshark's names for the IPv6 extension headers isolane walks past (docs/parsing.md: hop-by-hop
# 0, routing 43, fragment 44, destination options 60, AH 51, mobility 135, HIP 139, shim6 140).
IPV6_EXT_TOKENS = {
    "ipv6.hopopts": 0,
    "ipv6.routing": 43,
    "ipv6.fraghdr": 44,
    "ipv6.dstopts": 60,
    "ah": 51,
    "mipv6": 135,
    "hip": 139,
    "shim6": 140,
}
# Upper-layer protocol numbers by tshark protocol name (for the protocol after an IPv6 chain).
UPPER_PROTO = {
    "icmp": 1, "igmp": 2, "ip": 4, "tcp": 6, "udp": 17, "dccp": 33, "ipv6": 41, "gre": 47,
    "esp": 50, "icmpv6": 58, "ospf": 89, "pim": 103, "vrrp": 112, "sctp": 132, "udplite": 136,
}
# IPv4 protocols tshark always hands to their own dissector: if such an ``ip`` layer is
# followed by ``data`` instead, tshark (reassembly off) stopped because the packet is a
# non-first fragment.
ALWAYS_DISSECTED = {1, 2, 6, 17, 58}
# Protocols that carry ports in isolane (TCP, UDP, SCTP, DCCP, UDP-Lite).
PORT_PROTOS = {6, 17, 33, 132, 136}
# Ports available in the CSV.
PORT_COLUMNS = {"tcp": ("tcp.srcport", "tcp.dstport"), "udp": ("udp.srcport", "udp.dstport")}

# Which protocol token owns which multi-valued column.
COLUMN_OWNER = {
    "vlan.id": "vlan",
    "vxlan.vni": "vxlan",
    "geneve.vni": "geneve",
    "ip.src": "ip", "ip.dst": "ip", "ip.proto": "ip",
    "ipv6.src": "ipv6", "ipv6.dst": "ipv6", "ipv6.nxt": "ipv6",
    "tcp.srcport": "tcp", "tcp.dstport": "tcp",
    "udp.srcport": "udp", "udp.dstport": "udp",
}


class TruthError(ValueError):
    """The CSV row is inconsistent with the way this loader reads it."""


@dataclass
class Frame:
    number: int
    time_epoch: str          # tshark's decimal string, e.g. "1795334485.169052741"
    time_ns: int             # exact integer nanoseconds of time_epoch
    len: int                 # frame.len (wire length)
    cap_len: int             # frame.cap_len (captured length)
    protocols: tuple[str, ...]
    expected: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    @property
    def truncated_capture(self) -> bool:
        return self.cap_len < self.len


def epoch_to_ns(text: str) -> int:
    """Exact integer nanoseconds of a decimal epoch string (no float on the way)."""
    text = text.strip()
    neg = text.startswith("-")
    if neg:
        text = text[1:]
    sec, _, frac = text.partition(".")
    if not sec.isdigit() or (frac and not frac.isdigit()) or len(frac) > 9:
        raise TruthError(f"unexpected frame.time_epoch {text!r}")
    ns = int(sec) * 1_000_000_000 + int(frac.ljust(9, "0") or "0")
    return -ns if neg else ns


class _Row:
    """One CSV row with occurrence-indexed access to the multi-valued columns."""

    def __init__(self, raw: dict[str, str], tokens: tuple[str, ...]):
        self.raw = raw
        self.tokens = tokens
        self.values = {
            col: (raw[col].split("|") if raw.get(col) else [])
            for col in COLUMN_OWNER
            if col in raw
        }
        # occurrence index of each token among the tokens of the same name
        seen: dict[str, int] = {}
        self.occ: list[int] = []
        for t in tokens:
            self.occ.append(seen.get(t, 0))
            seen[t] = seen.get(t, 0) + 1

    def get(self, col: str, pos: int) -> str:
        """Value of ``col`` for the protocol token at position ``pos`` of frame.protocols."""
        owner = COLUMN_OWNER[col]
        if self.tokens[pos] != owner:
            raise TruthError(f"column {col} read at token {self.tokens[pos]!r}")
        vals = self.values.get(col)
        if vals is None:
            raise TruthError(f"CSV has no column {col}")
        k = self.occ[pos]
        if k >= len(vals):
            raise TruthError(
                f"{col}: occurrence {k} of {owner!r} wanted, only {len(vals)} values {vals}"
            )
        return vals[k]


def _addr(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    return ipaddress.ip_address(text)


def _ip_layer(row: _Row, pos: int) -> dict[str, Any]:
    """Addresses, version, upper-layer protocol and the position of the token after the IP
    header (after the IPv6 extension chain) for the IP token at ``pos``."""
    tok = row.tokens[pos]
    out: dict[str, Any] = {}
    nxt = pos + 1
    if tok == "ip":
        out["src"] = _addr(row.get("ip.src", pos))
        out["dst"] = _addr(row.get("ip.dst", pos))
        out["ip_version"] = 4
        out["proto"] = int(row.get("ip.proto", pos))
        out["fragment"] = False
    else:
        out["src"] = _addr(row.get("ipv6.src", pos))
        out["dst"] = _addr(row.get("ipv6.dst", pos))
        out["ip_version"] = 6
        base_nxt = int(row.get("ipv6.nxt", pos))
        chain = []
        while nxt < len(row.tokens) and row.tokens[nxt] in IPV6_EXT_TOKENS:
            chain.append(row.tokens[nxt])
            nxt += 1
        out["fragment"] = "ipv6.fraghdr" in chain
        if chain and IPV6_EXT_TOKENS[chain[0]] != base_nxt:
            raise TruthError(f"ipv6.nxt {base_nxt} but first extension header is {chain[0]}")
        if not chain:
            out["proto"] = base_nxt
        elif nxt < len(row.tokens) and row.tokens[nxt] in UPPER_PROTO:
            out["proto"] = UPPER_PROTO[row.tokens[nxt]]
        else:
            # chain ends in 'data' (non-first fragment, unknown protocol) or the stack stops:
            # the upper-layer protocol number is not in the CSV.
            out["proto"] = None
    out["next"] = nxt
    return out


def _transport(row: _Row, ipl: dict[str, Any]) -> dict[str, Any]:
    """Ports / fragment / completeness of what follows the IP header described by ``ipl``.

    Returns keys: ``ports`` ((src, dst), or None when unknown), ``nonfirst_fragment`` (bool),
    ``complete`` (True when the header isolane needs after IP was certainly read whole, None
    when the CSV cannot tell), ``transport_pos``.
    """
    toks = row.tokens
    nxt = ipl["next"]
    after = toks[nxt] if nxt < len(toks) else None
    proto = ipl["proto"]
    res: dict[str, Any] = {"ports": None, "nonfirst_fragment": False, "complete": True,
                           "transport_pos": None}

    if after == "data" and (
        (ipl["ip_version"] == 4 and proto in ALWAYS_DISSECTED)
        or (ipl["ip_version"] == 6 and ipl["fragment"] and toks[nxt - 1] == "ipv6.fraghdr")
    ):
        # Non-first fragment: no upper-layer header in this packet.
        res["nonfirst_fragment"] = True
        res["ports"] = (0, 0)
        return res

    if after in PORT_COLUMNS:
        scol, dcol = PORT_COLUMNS[after]
        res["ports"] = (int(row.get(scol, nxt)), int(row.get(dcol, nxt)))
        res["transport_pos"] = nxt
        # tshark reads the ports before the rest of the header; the header is known to be
        # complete if something was dissected after it, or the frame was captured whole.
        if nxt + 1 >= len(toks) and row_truncated(row):
            res["complete"] = None
        return res

    if proto is not None and proto not in PORT_PROTOS:
        res["ports"] = (0, 0)      # ICMP, IGMP, ICMPv6, ...: no ports
        return res

    # SCTP/DCCP/UDP-Lite (no port columns), or a TCP/UDP packet whose header tshark never
    # reached (stack stops after IP): ports unknown.
    res["complete"] = None
    return res


def row_truncated(row: _Row) -> bool:
    return int(row.raw["frame.cap_len"]) < int(row.raw["frame.len"])


def expected_for_row(
    raw: dict[str, str],
    vxlan_ports: tuple[int, ...] = DEFAULT_VXLAN_PORTS,
    geneve_ports: tuple[int, ...] = DEFAULT_GENEVE_PORTS,
) -> Frame:
    tokens = tuple(raw["frame.protocols"].split(":")) if raw["frame.protocols"] else ()
    fr = Frame(
        number=int(raw["frame.number"]),
        time_epoch=raw["frame.time_epoch"],
        time_ns=epoch_to_ns(raw["frame.time_epoch"]),
        len=int(raw["frame.len"]),
        cap_len=int(raw["frame.cap_len"]),
        protocols=tokens,
    )
    row = _Row(raw, tokens)
    exp = fr.expected
    exp["wire_len"] = fr.len

    # ---- outer link layer ---------------------------------------------------------------
    pos = 0
    while pos < len(tokens) and tokens[pos] in OUTER_LINK_TOKENS:
        pos += 1
    vlan_positions = [i for i in range(pos) if tokens[i] in ("vlan", "ieee8021ad")]
    if "vlan.id" in raw:
        exp["vlan"] = int(row.get("vlan.id", vlan_positions[0])) if vlan_positions else -1
    elif not vlan_positions:
        exp["vlan"] = -1

    # Defaults for everything that is "not reached" unless set below.
    exp.update(tunnel=NONE, vni=-1, outer_src=None, outer_dst=None, src=None, dst=None,
               ip_version=0, proto=0, src_port=0, dst_port=0)

    if pos >= len(tokens):
        # Stack ends inside the link layer.
        fr.notes.append("protocol stack ends before any network header")
        if not fr.truncated_capture:
            exp["status"] = MALFORMED
        return fr
    if tokens[pos] not in ("ip", "ipv6"):
        # ARP, LLC, MPLS, ... without a tunnel: the tenant packet is not IP.
        exp["status"] = UNSUPPORTED
        fr.notes.append(f"outer network layer is {tokens[pos]!r}")
        return fr

    # ---- outer IP --------------------------------------------------------------------------
    outer = _ip_layer(row, pos)
    exp["outer_src"], exp["outer_dst"] = outer["src"], outer["dst"]
    outer_tr = _transport(row, outer)
    fragment = outer["fragment"] or outer_tr["nonfirst_fragment"]

    tunnel = NONE
    tun_pos = None
    if outer_tr["transport_pos"] is not None and tokens[outer_tr["transport_pos"]] == "udp":
        upos = outer_tr["transport_pos"]
        dport = outer_tr["ports"][1]
        follower = tokens[upos + 1] if upos + 1 < len(tokens) else None
        if dport in vxlan_ports or dport in geneve_ports:
            want = "vxlan" if dport in vxlan_ports else "geneve"
            if follower != want:
                raise TruthError(
                    f"frame {fr.number}: UDP to port {dport} but tshark shows {follower!r}, "
                    f"not {want!r}: truth cannot be derived"
                )
            tunnel = VXLAN if want == "vxlan" else GENEVE
            tun_pos = upos + 1
        elif follower in ("vxlan", "geneve"):
            fr.notes.append(
                f"tshark decodes {follower} on UDP port {dport}; isolane (ports "
                f"vxlan={vxlan_ports} geneve={geneve_ports}) sees plain UDP"
            )

    if tunnel == NONE:
        # The tenant packet is the outer packet.
        exp.update(src=outer["src"], dst=outer["dst"], ip_version=outer["ip_version"])
        _set_proto(fr, outer)
        _set_ports_status(fr, outer_tr)
        if fragment:
            exp["is_fragment"] = True
        return fr

    # ---- tunnel ----------------------------------------------------------------------------
    exp["tunnel"] = tunnel
    if tunnel == VXLAN:
        exp["vni"] = int(row.get("vxlan.vni", tun_pos))
    else:
        exp["vni"] = int(row.get("geneve.vni", tun_pos), 0)   # tshark prints e.g. 0x00007b

    pos = tun_pos + 1
    while pos < len(tokens) and tokens[pos] in INNER_LINK_TOKENS:
        pos += 1
    if fragment:
        exp["is_fragment"] = True
    if pos >= len(tokens):
        fr.notes.append("protocol stack ends before the tenant's IP header")
        if fr.truncated_capture:
            # TRUNCATED if the capture cut it, MALFORMED if an IP/UDP length field did:
            # undecidable from the CSV.
            fr.notes.append("status not derivable from the CSV (TRUNCATED or MALFORMED)")
        else:
            exp["status"] = MALFORMED
        return fr
    if tokens[pos] not in ("ip", "ipv6"):
        exp["status"] = UNSUPPORTED
        fr.notes.append(f"tenant packet is {tokens[pos]!r}, not IP")
        return fr

    tenant = _ip_layer(row, pos)
    tenant_tr = _transport(row, tenant)
    exp.update(src=tenant["src"], dst=tenant["dst"], ip_version=tenant["ip_version"])
    _set_proto(fr, tenant)
    _set_ports_status(fr, tenant_tr)
    if tenant["fragment"] or tenant_tr["nonfirst_fragment"]:
        exp["is_fragment"] = True
    return fr


def _set_proto(fr: Frame, ipl: dict[str, Any]) -> None:
    if ipl["proto"] is None:
        del fr.expected["proto"]
        fr.notes.append("IPv6 upper-layer protocol not derivable from the CSV")
    else:
        fr.expected["proto"] = ipl["proto"]


def _set_ports_status(fr: Frame, tr: dict[str, Any]) -> None:
    exp = fr.expected
    if tr["ports"] is None:
        del exp["src_port"], exp["dst_port"]
        fr.notes.append("ports not derivable from the CSV")
    else:
        exp["src_port"], exp["dst_port"] = tr["ports"]
    if tr["complete"]:
        exp["status"] = OK
    else:
        fr.notes.append("status not derivable from the CSV")


def csv_path(name: str, base: Path = SHARED_REAL) -> Path:
    return base / f"{name}{SUFFIX}"


def capture_names(base: Path = SHARED_REAL) -> list[str]:
    """Every capture that has a NAME.nodefrag_all.csv."""
    return sorted(p.name[: -len(SUFFIX)] for p in base.glob(f"*{SUFFIX}"))


def pcap_path(name: str, base: Path = SHARED_REAL) -> Path:
    for ext in (".pcap", ".pcapng"):
        p = base / f"{name}{ext}"
        if p.exists():
            return p
    raise FileNotFoundError(f"no .pcap/.pcapng for {name} in {base}")


def load(
    name: str,
    vxlan_ports: tuple[int, ...] = DEFAULT_VXLAN_PORTS,
    geneve_ports: tuple[int, ...] = DEFAULT_GENEVE_PORTS,
    base: Path = SHARED_REAL,
) -> list[Frame]:
    """All frames of NAME.nodefrag_all.csv, in order, with their expectations."""
    with open(csv_path(name, base), newline="") as fh:
        frames = [expected_for_row(raw, vxlan_ports, geneve_ports) for raw in csv.DictReader(fh)]
    for i, fr in enumerate(frames, 1):
        if fr.number != i:
            raise TruthError(f"{name}: frame.number {fr.number} at row {i}")
    return frames


def fmt_value(fieldname: str, value: Any) -> str:
    if value is None and fieldname in ("src", "dst", "outer_src", "outer_dst"):
        return "(none)"
    if fieldname == "status" and value in STATUS_NAMES:
        return f"{STATUS_NAMES[value]}({value})"
    if fieldname == "tunnel" and value in TUNNEL_NAMES:
        return f"{TUNNEL_NAMES[value]}({value})"
    return str(value)


def _main(argv: list[str]) -> int:
    names = argv or capture_names()
    for name in names:
        vx = (4789, 8472) if name == "tcpdump__vxlan_port_8472" else DEFAULT_VXLAN_PORTS
        frames = load(name, vxlan_ports=vx)
        print(f"== {name}: {len(frames)} frames")
        for fr in frames:
            e = fr.expected
            order = ["status", "tunnel", "vni", "vlan", "outer_src", "outer_dst", "src", "dst",
                     "ip_version", "proto", "src_port", "dst_port", "is_fragment", "wire_len"]
            parts = [f"{k}={fmt_value(k, e[k])}" for k in order if k in e]
            print(f"  #{fr.number} t={fr.time_ns} len={fr.len}/{fr.cap_len} "
                  f"{':'.join(fr.protocols)}")
            print("      " + " ".join(parts))
            for n in fr.notes:
                print("      note: " + n)
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
