"""isolane.parse against tshark, packet by packet, on every real VXLAN/Geneve capture.

Ground truth: ``../shared/pcaps/real/NAME.nodefrag_all.csv`` (tshark 4.0, reassembly off),
turned into expected isolane fields by ``tests/support/truth.py`` (see its docstring for what it can and
cannot derive). Every field the truth knows is compared for every frame; all mismatches of a
capture are collected and reported together.
"""
from __future__ import annotations

import ipaddress
from collections import Counter

import numpy as np
import pytest

from support.locations import REAL_PCAPS as REAL

if not REAL.is_dir():
    pytest.skip(
        f"shared real captures not found at {REAL} (the project expects ../shared beside "
        "its root)",
        allow_module_level=True,
    )


import isolane  # noqa: E402  (after the skip: no captures, nothing to test)
from support import truth  # noqa: E402

# Captures whose tunnel port is not a default one.
VXLAN_PORTS = {"tcpdump__vxlan_port_8472": (4789, 8472)}
GENEVE_PORTS: dict[str, tuple[int, ...]] = {}

# Frames that cannot be compared because tshark itself cannot decode them, keyed by
# (capture, frame number), value (fields to skip or "*" for all, reason).
# Policy: only for frames tshark genuinely fails on; never for a disagreement between a
# correct tshark decode and isolane. Currently none: tshark decodes every frame of every
# VXLAN/Geneve capture as far as its captured bytes allow.
EXCEPTIONS: dict[tuple[str, int], tuple[tuple[str, ...] | str, str]] = {}

# Expectations the CSV cannot provide but the capture's bytes settle unambiguously
# (truth.py leaves these fields out). Keyed like EXCEPTIONS: (capture, frame) -> {field: value}.
EXTRA_EXPECTATIONS: dict[tuple[str, int], dict[str, object]] = {
    # 156 bytes on the wire, 58 captured: Ethernet | IPv4 (total length 44 = 0x002c) |
    # UDP (length 24) | Geneve ver 0, opt len 8, proto 0x6558, VNI 0 | 8 bytes of options.
    # The outer IP packet, as declared, ends exactly where the Geneve options end, so the inner
    # Ethernet header lies past the IP packet's declared length: more capture would not supply
    # it. docs/parsing.md: MALFORMED = "a header running past ... its IP packet's declared
    # length". tunnel/vni are still set ("set as soon as its UDP header is read").
    ("zeek__tunnels_geneve-truncated", 1): {"status": int(isolane.Status.MALFORMED)},
}

SCALAR_FIELDS = ("status", "tunnel", "vni", "vlan", "ip_version", "proto", "src_port",
                 "dst_port", "is_fragment", "wire_len")
ADDRESS_FIELDS = ("outer_src", "outer_dst", "src", "dst")
FIELD_ORDER = ("status", "tunnel", "vni", "vlan", "outer_src", "outer_dst", "src", "dst",
               "ip_version", "proto", "src_port", "dst_port", "is_fragment", "wire_len")
MAX_LINES = 80

NAMES = truth.capture_names(REAL)


def _cases():
    cases = []
    for name in NAMES:
        cases.append(pytest.param(name, VXLAN_PORTS.get(name, truth.DEFAULT_VXLAN_PORTS),
                                  GENEVE_PORTS.get(name, truth.DEFAULT_GENEVE_PORTS), id=name))
    # The 8472 capture again with the default ports: isolane must then see plain UDP.
    if "tcpdump__vxlan_port_8472" in NAMES:
        cases.append(pytest.param("tcpdump__vxlan_port_8472", truth.DEFAULT_VXLAN_PORTS,
                                  truth.DEFAULT_GENEVE_PORTS,
                                  id="tcpdump__vxlan_port_8472-default-ports"))
    return cases


def _mapped(addr) -> bytes:
    if addr is None:
        return bytes(16)
    if addr.version == 4:
        return bytes(10) + b"\xff\xff" + addr.packed
    return addr.packed


def _show_got_addr(raw: bytes) -> str:
    if raw == bytes(16):
        return "(all zero)"
    if raw[:12] == bytes(10) + b"\xff\xff":
        return str(ipaddress.IPv4Address(raw[12:]))
    return str(ipaddress.IPv6Address(raw))


def _show(fieldname: str, value) -> str:
    if fieldname == "status":
        try:
            return f"{isolane.Status(value).name}({value})"
        except ValueError:
            return str(value)
    if fieldname == "tunnel":
        try:
            return f"{isolane.Tunnel(value).name}({value})"
        except ValueError:
            return str(value)
    if fieldname in ADDRESS_FIELDS:
        return "(none)" if value is None else str(value)
    return str(value)


def _columns(rows):
    names = rows.dtype.names or ()
    missing = [f for f in SCALAR_FIELDS + ADDRESS_FIELDS if f not in names]
    assert not missing, f"parse() result lacks fields {missing}; has {names}"
    cols = {f: rows[f].tolist() for f in SCALAR_FIELDS}
    for f in ADDRESS_FIELDS:
        arr = np.ascontiguousarray(rows[f], dtype=np.uint8)
        assert arr.shape == (len(rows), 16), f"rows[{f!r}] has shape {arr.shape}"
        flat = arr.tobytes()
        cols[f] = [flat[i * 16:(i + 1) * 16] for i in range(len(rows))]
    return cols


def _compare(name, frames, rows):
    cols = _columns(rows)
    mismatches = []  # (frame, field, expected, got)
    for i, fr in enumerate(frames):
        expected = dict(fr.expected)
        expected.update(EXTRA_EXPECTATIONS.get((name, fr.number), {}))
        skip_fields, _reason = EXCEPTIONS.get((name, fr.number), ((), ""))
        if skip_fields == "*":
            continue
        for f in FIELD_ORDER:
            if f not in expected or f in skip_fields:
                continue
            exp = expected[f]
            if f in ADDRESS_FIELDS:
                got_raw = cols[f][i]
                if got_raw != _mapped(exp):
                    mismatches.append((fr, f, _show(f, exp), _show_got_addr(got_raw)))
            else:
                got = cols[f][i]
                if f == "is_fragment":
                    got = bool(got)
                if got != exp:
                    mismatches.append((fr, f, _show(f, exp), _show(f, got)))
    return mismatches


def _report(name, frames, mismatches) -> str:
    per_field = Counter(f for _, f, _, _ in mismatches)
    bad_frames = {fr.number for fr, _, _, _ in mismatches}
    lines = [
        f"{name}: {len(mismatches)} mismatches in {len(bad_frames)} of {len(frames)} frames "
        f"({', '.join(f'{f}: {n}' for f, n in per_field.most_common())})"
    ]
    for fr, f, exp, got in mismatches[:MAX_LINES]:
        lines.append(f"  frame {fr.number} [{':'.join(fr.protocols)}] "
                     f"{f}: expected {exp}, got {got}")
    if len(mismatches) > MAX_LINES:
        lines.append(f"  ... {len(mismatches) - MAX_LINES} more")
    return "\n".join(lines)


@pytest.mark.parametrize("name, vxlan_ports, geneve_ports", _cases())
def test_parse_matches_tshark(name, vxlan_ports, geneve_ports):
    frames = truth.load(name, vxlan_ports=vxlan_ports, geneve_ports=geneve_ports, base=REAL)
    batch = isolane.read_pcap(str(truth.pcap_path(name, REAL)))
    rows = isolane.parse(batch, vxlan_ports=vxlan_ports, geneve_ports=geneve_ports)
    assert len(rows) == len(frames), (
        f"{name}: parse returned {len(rows)} rows, tshark has {len(frames)} frames"
    )
    mismatches = _compare(name, frames, rows)
    assert not mismatches, _report(name, frames, mismatches)


@pytest.mark.parametrize("name", NAMES)
def test_timestamps_and_lengths_match_tshark(name):
    frames = truth.load(name, base=REAL)
    batch = isolane.read_pcap(str(truth.pcap_path(name, REAL)))
    ts = np.asarray(batch.timestamps_ns)
    wire = np.asarray(batch.wire_lengths)
    cap = np.asarray(batch.lengths)
    assert ts.dtype == np.int64, f"timestamps_ns dtype {ts.dtype}, want int64"
    assert len(ts) == len(wire) == len(cap) == len(frames), (
        f"{name}: {len(ts)} timestamps, {len(wire)} wire lengths, {len(cap)} lengths; "
        f"tshark has {len(frames)} frames"
    )
    ts, wire, cap = ts.tolist(), wire.tolist(), cap.tolist()
    problems = []
    for i, fr in enumerate(frames):
        if ts[i] != fr.time_ns:
            problems.append(f"  frame {fr.number}: timestamps_ns expected {fr.time_ns} "
                            f"({fr.time_epoch}), got {ts[i]} (diff {ts[i] - fr.time_ns} ns)")
        if wire[i] != fr.len:
            problems.append(f"  frame {fr.number}: wire_lengths expected {fr.len}, got {wire[i]}")
        if cap[i] != fr.cap_len:
            problems.append(f"  frame {fr.number}: lengths expected {fr.cap_len}, got {cap[i]}")
    assert not problems, f"{name}: {len(problems)} problems\n" + "\n".join(problems[:MAX_LINES])


def test_exception_lists_refer_to_real_frames():
    for table in (EXCEPTIONS, EXTRA_EXPECTATIONS):
        for name, number in table:
            assert name in NAMES, f"{name} has no nodefrag_all.csv"
            assert 1 <= number <= len(truth.load(name, base=REAL)), (name, number)


def test_every_vxlan_and_geneve_capture_is_covered():
    # Guard against the glob silently finding nothing (or far fewer files than shared has).
    assert len(NAMES) >= 24, f"only {len(NAMES)} nodefrag_all.csv files in {REAL}"
