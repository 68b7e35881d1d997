"""Rules that match a tenant's frames by EtherType (``ethertype: arp``): read, written, checked
against the JSON Schema, compiled, and classified by the engine against frames scapy builds and
the sample capture's own ARP."""

from __future__ import annotations

import csv
import warnings
from collections import Counter
from typing import Any

import jsonschema  # type: ignore[import-untyped]
import numpy as np
import pytest
from scapy.layers.inet import IP, UDP  # type: ignore[import-untyped]
from scapy.layers.inet6 import IPv6  # type: ignore[import-untyped]
from scapy.layers.l2 import ARP, Ether  # type: ignore[import-untyped]
from scapy.layers.vxlan import VXLAN  # type: ignore[import-untyped]
from scapy.packet import Raw  # type: ignore[import-untyped]
from scapy.utils import rdpcap  # type: ignore[import-untyped]

import isolane
from isolane import Engine, Policy, PolicyWarning, Reason
from support.locations import ROOT, SAMPLE
from support.policy_edits import quiet
from support.truth import SHARED_REAL, capture_names, csv_path, pcap_path

LLDP = 0x88CC


def tenant(*rules: dict[str, Any], default: str = "drop") -> dict[str, Any]:
    return {"tenants": [{"name": "t", "vnis": [7], "default": default, "classes": [{"name": "bulk"}, {"name": "control"}], "rules": list(rules)}]}


def inner(ethertype: int | None = None) -> Any:
    """The Ethernet header of a tenant's frame (scapy sets the EtherType from what follows, unless given)."""
    fields = {} if ethertype is None else {"type": ethertype}
    return Ether(src="02:00:00:00:00:01", dst="ff:ff:ff:ff:ff:ff", **fields)


def batch_of(*frames: Any) -> isolane.PacketBatch:
    """A batch of VXLAN (VNI 7) packets carrying the given tenant frames."""
    outer = Ether() / IP(src="192.0.2.1", dst="192.0.2.2") / UDP(sport=1234, dport=4789) / VXLAN(vni=7)
    frames = tuple(bytes(outer / frame) for frame in frames)
    offsets = np.cumsum([0] + [len(f) for f in frames[:-1]]).astype(np.uint64)
    lengths = np.array([len(f) for f in frames], dtype=np.uint32)
    data = np.frombuffer(b"".join(frames), dtype=np.uint8)
    return isolane.PacketBatch.from_arrays(data, offsets, lengths, np.arange(len(frames), dtype=np.int64))


TSHARK_NAMES = {"ip": 0x0800, "ipv6": 0x86DD, "arp": 0x0806}


def tshark_ethertype(protocols: str) -> tuple[int, bool] | None:
    """The tenant frame's EtherType by tshark's ``frame.protocols`` (what follows its last
    ``ethertype`` token), and whether a tunnel comes before it; None where it names none we know."""
    tokens = protocols.split(":")
    if "ethertype" not in tokens:
        return None
    last = len(tokens) - 1 - tokens[::-1].index("ethertype")
    following = tokens[last + 1] if last + 1 < len(tokens) else None
    if following not in TSHARK_NAMES:
        return None
    return TSHARK_NAMES[following], any(t in ("vxlan", "geneve") for t in tokens[:last])


@pytest.mark.skipif(not SHARED_REAL.is_dir(), reason=f"the real captures and their tshark truth are not at {SHARED_REAL}")
def test_the_records_ethertype_is_tsharks_on_the_real_captures() -> None:
    """Every frame whose tenant frame tshark names IPv4, IPv6 or ARP (where isolane sees the
    same tunnel, or none, and parsed it) carries that EtherType."""
    checked: Counter[int] = Counter()
    for name in capture_names():
        rows = isolane.parse(isolane.read_pcap(pcap_path(name)))
        with open(csv_path(name), newline="") as truth:
            for line, record in zip(csv.DictReader(truth), rows):
                expected = tshark_ethertype(line["frame.protocols"])
                if expected is None or expected[1] != (record["tunnel"] != 0) or record["status"] not in (isolane.Status.OK, isolane.Status.UNSUPPORTED):
                    continue
                assert int(record["ethertype"]) == expected[0], f"{name} frame {line['frame.number']}: {line['frame.protocols']}"
                checked[expected[0]] += 1
    assert checked[0x0800] > 1000 and checked[0x86DD] > 100 and checked[0x0806] > 0, checked


def test_names_numbers_and_hex_text_are_read_and_written_back() -> None:
    for value, number in (("arp", 0x0806), ("ipv6", 0x86DD), (LLDP, LLDP), ("0x88CC", LLDP)):
        rule = quiet(tenant({"ethertype": value, "action": "allow", "class": "control"})).tenants[0].rules[0]
        assert rule.ethertype == number
        assert Policy.from_dict(tenant(rule.to_dict())).tenants[0].rules[0] == rule
    assert quiet(tenant({"ethertype": LLDP, "action": "drop"})).tenants[0].rules[0].to_dict() == {"ethertype": "0x88cc", "action": "drop"}


def test_unquoted_hex_in_yaml_is_a_number(tmp_path: Any) -> None:
    path = tmp_path / "p.yaml"
    path.write_text("tenants:\n  - name: t\n    vnis: [7]\n    rules:\n      - {ethertype: 0x88cc, action: allow}\n")
    assert Policy.from_file(path).tenants[0].rules[0].ethertype == LLDP


def test_the_json_schema_takes_what_validation_takes_and_refuses_unknown_names() -> None:
    validator = jsonschema.Draft202012Validator(isolane.policy.schema())
    for value in ("arp", "ipv4", LLDP, "0x88cc"):
        validator.validate(tenant({"ethertype": value, "action": "allow"}))
    for value in ("apr", 0x05DC, "88cc"):
        with pytest.raises(jsonschema.ValidationError):
            validator.validate(tenant({"ethertype": value, "action": "allow"}))


def test_frame_rules_are_shadowed_only_by_frame_rules_of_their_ethertype() -> None:
    quiet(tenant({"action": "allow"}, {"ethertype": "arp", "action": "drop"}))  # an IP rule matches no ARP frame
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        Policy.from_dict(tenant({"ethertype": "arp", "action": "drop"}, {"ethertype": "ipv4", "action": "drop"}, {"ethertype": "arp", "action": "allow"}))
    messages = [str(w.message) for w in caught if issubclass(w.category, PolicyWarning)]
    assert messages == ["tenants[0].rules[2] is never matched: tenants[0].rules[0] covers it"]


def test_the_engine_matches_inner_frames_by_ethertype_in_rule_order() -> None:
    policy = Policy.from_dict(
        tenant(
            {"ethertype": "arp", "action": "allow", "class": "control"},
            {"proto": "udp", "dst_ports": 53, "action": "allow"},
            {"ethertype": "ipv6", "action": "allow", "class": "control"},
            {"ethertype": LLDP, "action": "drop"},
        )
    )
    batch = batch_of(
        inner() / ARP(op=1, psrc="10.0.0.1", pdst="10.0.0.2"),
        inner() / IP(src="10.0.0.1", dst="10.0.0.2") / UDP(dport=53),
        inner() / IP(src="10.0.0.1", dst="10.0.0.2") / UDP(dport=80),
        inner() / IPv6(src="fd00::1", dst="fd00::2") / UDP(dport=53),
        inner() / IPv6(src="fd00::1", dst="fd00::2") / UDP(dport=80),
        inner(LLDP) / Raw(b"\x02\x07\x04" + bytes(40)),
        inner(0x88B5) / Raw(bytes(46)),  # a local experimental EtherType no rule names
    )
    records = isolane.parse(batch)
    assert records["ethertype"].tolist() == [0x0806, 0x0800, 0x0800, 0x86DD, 0x86DD, LLDP, 0x88B5]
    verdicts = Engine(policy).classify(batch)
    assert verdicts["rule"].tolist() == [0, 1, -1, 1, 2, 3, -1]
    assert verdicts["cls"].tolist() == [1, 0, -1, 0, 1, -1, -1]
    assert [Reason(r).name for r in verdicts["reason"]] == ["RULE", "RULE", "DEFAULT", "RULE", "RULE", "RULE", "NOT_IP"]


def test_a_rule_edit_adds_and_removes_a_frame_rule() -> None:
    engine = Engine(tenant({"proto": "udp", "action": "allow"}))
    arp = batch_of(inner() / ARP(op=1, psrc="10.0.0.1", pdst="10.0.0.2"))
    assert engine.classify(arp)["reason"].tolist() == [Reason.NOT_IP]
    engine.insert_rule("t", 0, {"ethertype": "arp", "action": "allow", "class": "control"})
    assert (engine.classify(arp)[["rule", "cls", "reason"]].tolist()) == [(0, 1, Reason.RULE)]
    with pytest.raises(isolane.PolicyError, match=r"tenants\[0\]\.rules\[1\]\.ethertype: a rule that matches frames by EtherType takes no IP keys"):
        engine.insert_rule("t", 1, {"ethertype": "arp", "proto": "udp", "action": "allow"})
    engine.remove_rule("t", 0)
    assert engine.classify(arp)["reason"].tolist() == [Reason.NOT_IP]
    assert [r.ethertype for r in engine.policy.tenants[0].rules] == [None]


def test_the_sample_policy_passes_its_tenants_arp_as_scapy_counts_it() -> None:
    """Every inner ARP frame of the sample (scapy's reading) gets the ARP rule of its tenant, and
    no packet of training or evaluation is dropped as not IP any more."""
    policy = Policy.from_file(ROOT / "pcaps" / "tenants.yaml")
    arp_by_vni: dict[int, int] = {}
    for packet in rdpcap(str(SAMPLE)):
        if packet.haslayer(VXLAN) and packet[VXLAN].payload.haslayer(ARP):
            arp_by_vni[packet[VXLAN].vni] = arp_by_vni.get(packet[VXLAN].vni, 0) + 1
    assert arp_by_vni.get(100) and arp_by_vni.get(300), arp_by_vni
    engine = Engine(policy)
    verdicts = engine.classify(isolane.read_pcap(SAMPLE))
    for name in ("training", "evaluation"):
        position = engine.tenant_names.index(name)
        arp_rule = next(i for i, r in enumerate(policy.tenants[position].rules) if r.ethertype == 0x0806)
        mine = verdicts[verdicts["tenant"] == position]
        vni = policy.tenants[position].vnis[0]
        assert int((mine["rule"] == arp_rule).sum()) == arp_by_vni[vni]
        assert not (mine["reason"] == Reason.NOT_IP).any()
        assert engine.counters()[name]["reasons"].get("not_ip") is None
