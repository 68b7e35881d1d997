"""isolane.linux's HTB plan, tc commands and policy skeleton, without a kernel: the u32 keys are
checked against VXLAN packets scapy builds, the tree against the policy's compiled rates."""

from __future__ import annotations

import sys

import pytest
from scapy.layers.inet import IP, UDP
from scapy.layers.inet6 import IPv6, IPv6ExtHdrHopByHop
from scapy.layers.l2 import Ether
from scapy.layers.vxlan import VXLAN

from isolane.cli import main
from isolane.linux import Feature, Features, LinuxError, VxlanDevice, plan_htb, policy_skeleton, probe_features, tc_commands
from isolane.linux.htb import DEFAULT_MINOR, MIN_RATE_BYTES, ROOT_HANDLE, UNMATCHED_MINOR, HtbPlan, format_handle, read_ticks_per_us, xmit_ticks
from isolane.linux.stats import StatsPoller, unwrap_32
from isolane.linux.u32 import ETH_P_IP, ETH_P_IPV6, VNI_PRIO, vni_keys
from isolane.policy import Policy
from isolane.policy.units import default_burst
from support.u32_model import kernel_class, matches

TICKS = 15.625
POLICY = {
    "port": {"rate": "100Gbps", "buffer": "4MiB"},
    "tenants": [
        {
            "name": "training",
            "vnis": [100, 101],
            "rate": "10Gbps",
            "burst": "256KiB",
            "ceil": "50Gbps",
            "classes": [{"name": "bulk", "rate": "2Gbps"}, {"name": "control", "priority": 0}],
            "default_class": "control",
        },
        {"name": "inference", "vnis": [300]},
    ],
}


def _plan(policy: dict[str, object] = POLICY, **options: object):  # type: ignore[no-untyped-def]
    return plan_htb(Policy.from_dict(policy), ticks_per_us=TICKS, **options)  # type: ignore[arg-type]


_ETHER = Ether(src="02:00:00:00:00:01", dst="02:00:00:00:00:02")  # no address lookup by scapy


def _outer(packet: Ether) -> bytes:
    return bytes(packet)[14:]


def _inner() -> Ether:
    return _ETHER / IP() / UDP() / (b"x" * 40)


def _vxlan4(vni: int, port: int = 4789, **ip: object) -> Ether:
    return _ETHER / IP(src="192.0.2.1", dst="192.0.2.2", **ip) / UDP(sport=49152, dport=port) / VXLAN(flags=0x08, vni=vni) / _inner()


def _vxlan6(vni: int, port: int = 4789) -> Ether:
    return _ETHER / IPv6(src="2001:db8::1", dst="2001:db8::2") / UDP(sport=49152, dport=port) / VXLAN(flags=0x08, vni=vni) / _inner()


def test_ipv4_keys_match_their_vni_at_offset_32_and_nothing_else() -> None:
    keys = vni_keys(100, 4789, ETH_P_IP)
    assert (100 << 8, 0xFFFFFF00, 32) in keys
    assert matches(keys, _outer(_vxlan4(100)))
    assert matches(keys, _outer(_vxlan4(100, flags="MF")))  # the first fragment carries the VXLAN header
    assert not matches(keys, _outer(_vxlan4(101)))
    assert not matches(keys, _outer(_vxlan4(100, port=4790)))
    assert not matches(keys, _outer(_vxlan4(100, frag=185)))  # a later fragment: no UDP header there
    assert not matches(keys, _outer(_vxlan4(100, options=b"\x01\x01\x01\x00")))  # IHL 6: the VNI is elsewhere
    tcp = _ETHER / IP() / UDP(dport=4789)
    tcp[IP].proto = 6
    assert not matches(keys, _outer(tcp / VXLAN(vni=100)))


def test_ipv6_keys_match_their_vni_at_offset_52() -> None:
    keys = vni_keys(300, 4789, ETH_P_IPV6)
    assert (300 << 8, 0xFFFFFF00, 52) in keys
    assert matches(keys, _outer(_vxlan6(300)))
    assert not matches(keys, _outer(_vxlan6(301)))
    assert not matches(keys, _outer(_vxlan6(300, port=8472)))
    with_extension = _ETHER / IPv6() / IPv6ExtHdrHopByHop() / UDP(dport=4789) / VXLAN(vni=300)
    assert not matches(keys, _outer(with_extension))


def test_keys_are_word_aligned_as_tc_writes_them() -> None:
    for f in _plan(vxlan_ports=(65535,)).filters:
        assert all(offset % 4 == 0 and value & ~mask == 0 for value, mask, offset in f.keys), f.label


def _classify(plan: HtbPlan, packet: Ether) -> str:
    return kernel_class(plan, bytes(packet))


def test_packets_the_vni_filters_cannot_read_are_counted_apart() -> None:
    plan = _plan()
    unmatched = format_handle(ROOT_HANDLE | UNMATCHED_MINOR)
    assert _classify(plan, _vxlan4(100)) == _classify(plan, _vxlan4(100, flags="MF")) == _classify(plan, _vxlan6(101)) == "1:102"
    assert _classify(plan, _vxlan4(300)) == "1:201"
    assert _classify(plan, _vxlan4(555)) == _classify(plan, _vxlan6(555)) == "1:ffff"  # a VNI of no tenant
    assert _classify(plan, _ETHER / IP() / UDP(dport=53)) == _classify(plan, _ETHER / IPv6() / UDP(dport=4790)) == "1:ffff"
    for options in (b"\x01\x01\x01\x00", b"\x01" * 40):  # IHL 6 and 15
        assert _classify(plan, _vxlan4(100, options=options)) == unmatched
    assert _classify(plan, _vxlan4(100, port=4790, options=b"\x01\x01\x01\x00")) == "1:ffff"  # with options, but not to a VXLAN port
    for offset in (1, 185, 8191):
        assert _classify(plan, _vxlan4(100, frag=offset)) == unmatched
    hop_by_hop = _ETHER / IPv6() / IPv6ExtHdrHopByHop() / UDP(dport=4789) / VXLAN(flags=0x08, vni=100)
    assert _classify(plan, hop_by_hop) == unmatched
    mld = _ETHER / IPv6(dst="ff02::16", nh=0) / IPv6ExtHdrHopByHop(nh=58) / (b"\x8f" + bytes(27))  # the underlay's own MLD report
    assert _classify(plan, mld) == "1:ffff"


def test_tree_has_link_default_tenant_and_class_ids() -> None:
    plan = _plan()
    by_id = {format_handle(c.classid): c for c in plan.classes}
    assert list(by_id) == ["1:1", "1:ffff", "1:fffe", "1:100", "1:101", "1:102", "1:200", "1:201"]
    assert [by_id[i].parent for i in ("1:1", "1:ffff", "1:100", "1:101", "1:201")] == [ROOT_HANDLE, 0x10001, 0x10001, 0x10100, 0x10200]
    assert (by_id["1:ffff"].role, by_id["1:ffff"].tenant, by_id["1:fffe"].role) == ("default", None, "unmatched")
    assert "1:10" not in by_id  # pyroute2's default class id is no class here
    assert (by_id["1:102"].tenant, by_id["1:102"].cls, by_id["1:102"].class_name) == ("training", 1, "control")


def test_rates_ceilings_and_bursts_follow_the_compiled_policy() -> None:
    plan = _plan()
    by_id = {format_handle(c.classid): c for c in plan.classes}
    link, training, bulk, control, inference = (by_id[i] for i in ("1:1", "1:100", "1:101", "1:102", "1:200"))
    assert (link.rate, link.ceil) == (12_500_000_000, 12_500_000_000)
    assert (training.rate, training.ceil, training.burst) == (1_250_000_000, 6_250_000_000, 256 * 1024)
    assert training.buffer == xmit_ticks(1_250_000_000, 256 * 1024, TICKS) == int(209 * TICKS)
    assert (bulk.rate, bulk.ceil, bulk.burst) == (250_000_000, 6_250_000_000, default_burst(250_000_000, 9216))
    assert (control.rate, control.prio, control.ceil) == (MIN_RATE_BYTES, 0, 6_250_000_000)
    assert (inference.rate, inference.ceil) == (MIN_RATE_BYTES, 12_500_000_000)
    assert bulk.cbuffer == xmit_ticks(6_250_000_000, default_burst(6_250_000_000, 9216), TICKS)


def test_filters_send_each_vni_to_its_tenants_default_class_per_family_and_port() -> None:
    plan = _plan(vxlan_ports=(4789, 8472))
    seen = {(f.vni, f.udp_port, f.protocol): (f.prio, format_handle(f.classid)) for f in plan.filters if f.vni is not None}
    assert len(seen) == 3 * 2 * 2
    assert len(plan.filters) == len(seen) + 2 * 10 + 13 + 4  # unmatched: IHL 6-15 per port, fragment offset bits, IPv6 extension headers
    assert seen[(100, 8472, ETH_P_IP)] == (VNI_PRIO[ETH_P_IP], "1:102")
    assert seen[(101, 4789, ETH_P_IPV6)] == (VNI_PRIO[ETH_P_IPV6], "1:102")
    assert seen[(300, 4789, ETH_P_IP)] == (VNI_PRIO[ETH_P_IP], "1:201")


def test_link_rate_comes_from_the_port_or_the_option() -> None:
    no_port = {"tenants": [{"name": "a", "vnis": [1]}]}
    with pytest.raises(ValueError, match="--link-rate"):
        _plan(no_port)
    plan = _plan(no_port, link_rate_bps=10_000_000_000)
    assert plan.classes[0].rate == 1_250_000_000


def test_limits_are_errors_with_their_place() -> None:
    many = {"tenants": [{"name": f"t{n}", "vnis": [n]} for n in range(255)], "port": {"rate": "1Gbps", "buffer": "1MiB"}}
    with pytest.raises(ValueError, match="255 tenants"):
        _plan(many)
    slow_burst = {"port": {"rate": "1Gbps", "buffer": "1MiB"}, "tenants": [{"name": "a", "vnis": [1], "rate": "8kbps", "burst": "1MiB"}]}
    with pytest.raises(ValueError, match=r"tenants\[0\]\.burst"):
        _plan(slow_burst)


def test_tc_commands_say_the_same_rates_bursts_and_keys() -> None:
    plan = _plan()
    lines = tc_commands(plan, "eth1", "ns1")
    assert lines[0] == f"tc -n ns1 qdisc replace dev eth1 root handle 1: htb default {DEFAULT_MINOR:x}"
    assert "classid 1:100 htb rate 10000000000bit ceil 50000000000bit burst 262144b cburst 6250000b prio 0" in lines[4]
    vni100 = [line for line in lines if "0x00006400 0xffffff00" in line]
    assert len(vni100) == 2
    assert "protocol ip prio 1 u32" in vni100[0] and "at 32 flowid 1:102" in vni100[0]
    assert "protocol ipv6 prio 2 u32" in vni100[1] and "at 52 flowid 1:102" in vni100[1]
    assert len(lines) == 1 + len(plan.classes) + len(plan.filters)


def test_ticks_follow_tc_reading_of_psched(tmp_path) -> None:  # type: ignore[no-untyped-def]
    psched = tmp_path / "psched"
    psched.write_text("000003e8 00000040 000f4240 3b9aca00\n")
    assert read_ticks_per_us(str(psched)) == 15.625
    psched.write_text("000003e8 00000040 3b9aca00 3b9aca00\n")  # a nanosecond clock: tc takes t2us = us2t
    assert read_ticks_per_us(str(psched)) == 1000.0
    assert read_ticks_per_us(str(tmp_path / "missing")) == 15.625


def test_skeleton_is_a_policy_that_check_accepts(tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    devices = [
        VxlanDevice("vx100", 100, 4789, "192.0.2.1", "192.0.2.2", "eth0", 1450),
        VxlanDevice("vx100b", 100, 4789, "192.0.2.1", "192.0.2.3", "eth0", 1450),
        VxlanDevice("vx300", 300, 8472, "2001:db8::1", None, None, 1430),
    ]
    text = policy_skeleton(devices)
    path = tmp_path / "policy.yaml"
    path.write_text(text)
    assert main(["check", str(path)]) == 0
    assert "ok, 2 tenants" in capsys.readouterr().out
    policy = Policy.from_file(path)
    assert [(t.name, t.vnis) for t in policy.tenants] == [("vni-100", (100,)), ("vni-300", (300,))]
    assert "vx300: 2001:db8::1 -> learned port 8472, mtu 1430" in (policy.tenants[1].description or "")
    assert "# VXLAN UDP ports: 4789, 8472" in text
    empty = tmp_path / "empty.yaml"
    empty.write_text(policy_skeleton([]))
    assert Policy.from_file(empty).tenants == ()


def test_what_the_kernel_does_not_enforce_is_named_by_place() -> None:
    policy = {
        **POLICY,
        "tenants": [
            {**POLICY["tenants"][0], "rules": [{"proto": "udp", "action": "allow", "class": "bulk"}], "meter": {"kind": "srtcm", "cir": "1Gbps"}},  # type: ignore[dict-item]
            {"name": "untunnelled", "vlans": [12], "classes": [{"name": "only", "shaper": {"rate": "1Gbps"}}]},
        ],
    }
    notes = _plan(policy).unenforced
    assert notes == (  # the rule is pushed
        "tenants[0]: meter: isolane's only (HTB enforces rate and ceil)",
        "tenants[1]: its untunnelled traffic (vlans, sources) matches no filter: it lands in the default class",
        "tenants[1]: no VNIs: no filter sends untunnelled's traffic to its classes",
        "tenants[1].classes[0]: shaper: isolane's only (HTB enforces rate and ceil)",
    )
    assert _plan().unenforced == ()


def test_dry_run_prints_the_commands_and_the_warnings(tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "policy.yaml"
    path.write_text("tenants:\n  - {name: a, vnis: [7], rules: [{action: drop}]}\n")
    assert main(["linux", "apply", "--dev", "eth1", "--policy", str(path), "--link-rate", "10Gbps", "--vxlan-port", "8472", "--dry-run"]) == 0
    out, err = capsys.readouterr()
    assert out.splitlines() == tc_commands(plan_htb(Policy.from_file(path), link_rate_bps=10**10, vxlan_ports=(8472,)), "eth1")
    assert "0x00002118 0x0000ffff at 20" in out  # port 8472
    assert err == "isolane: warning: not enforced by the kernel: tenants[0].rules[0]: drops: not enforced (no gact), its packets go to class 'default'\n"
    assert main(["linux", "apply", "--dev", "eth1", "--policy", str(path), "--dry-run"]) == 2
    assert "--link-rate" in capsys.readouterr().err


def test_missing_features_are_named_before_anything_changes() -> None:
    features = Features({"htb": Feature("htb", True), "u32": Feature("u32", False, "not built into this kernel (Operation not supported)")})
    assert features.missing(("htb", "u32")) == ["u32: not built into this kernel (Operation not supported)"]
    with pytest.raises(LinuxError, match=r"cannot apply: u32: not built into this kernel"):
        features.require(("htb", "u32"), "apply")
    features.require(("htb",), "apply")


def test_without_pyroute2_the_error_says_what_to_install(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setitem(sys.modules, "pyroute2", None)
    with pytest.raises(LinuxError, match=r"pip install 'isolane\[linux\]'"):
        probe_features()


@pytest.mark.parametrize(("count", "overhead"), [("outer", 0), ("wire", 20), ("wire_fcs", 24), ("inner", 0)])
def test_htb_charges_the_bytes_the_policy_counts(count: str, overhead: int) -> None:
    plan = _plan({**POLICY, "count": count})
    assert {c.overhead for c in plan.classes} == {overhead}
    class_lines = [line for line in tc_commands(plan, "eth1") if " class add " in line]
    assert all(line.endswith(f" overhead {overhead}") == bool(overhead) for line in class_lines)
    assert ("count: inner: HTB charges the outer frame (it cannot leave the tunnel headers out)" in plan.unenforced) == (count == "inner")


def test_32_bit_counters_are_carried_across_their_wraps() -> None:
    assert unwrap_32(0, 5) == 5
    assert unwrap_32(4_294_967_290, 3) == 4_294_967_299  # wrapped once
    assert unwrap_32(3 * 2**32 + 10, 10) == 3 * 2**32 + 10  # no change
    assert unwrap_32(3 * 2**32 + 10, 9) == 4 * 2**32 + 9
    poller = StatsPoller(_plan(), "eth1")
    readings = [(2**32 - 2, 2**40), (1, 2**40 + 3000), (7, 2**40 + 9000)]
    carried = [poller.carry([{"classid": "1:101", "packets": p, "bytes": b, "drops": 0, "overlimits": p}])[0] for p, b in readings]
    assert [(r["packets"], r["overlimits"], r["bytes"]) for r in carried] == [
        (2**32 - 2, 2**32 - 2, 2**40),
        (2**32 + 1, 2**32 + 1, 2**40 + 3000),
        (2**32 + 7, 2**32 + 7, 2**40 + 9000),
    ]
