"""A tenant's rules in the real kernel (isolane.linux.rules), in the namespaces of
tests/support/netns.py: the kernel's HTB class counters count each packet, exactly, in the class
isolane's own classifier gives it (a drop in the tenant's default class: this kernel has no gact),
over IPv4 and IPv6 underlays, with inner IPv4 and IPv6; the dry run's tc commands build the same
filters; a second apply changes nothing. Skipped, saying why, without root, iproute2 or the
kernel features."""

from __future__ import annotations

import dataclasses
import sys

import pytest

from isolane.linux import LinuxError, apply_plan, plan_htb
from isolane.linux.htb import HtbClass, HtbPlan
from isolane.policy import Policy

pytest.importorskip("pyroute2")
scapy = pytest.importorskip("scapy.all")

from support.kernel_htb import assert_tc_builds_what_apply_made, htb_counts, planned_filters, quiet_counts, tree  # noqa: E402
from support.netns import MAC, OVERLAYS, RAW_SENDER, UNDERLAY, A, run  # noqa: E402
from support.u32_model import isolane_class  # noqa: E402

RULES: list[dict[str, object]] = [
    {"proto": "udp", "dst_ports": 5003, "action": "drop"},  # before the allow rule that also holds 5003: its packets stay in bulk
    {"proto": "udp", "dst_ports": 5001, "action": "allow", "class": "a"},
    {"proto": "udp", "dst_ports": "5002-5010", "action": "allow", "class": "b"},
    {"src": "fd00:1::/64", "proto": "udp", "action": "allow", "class": "a"},
    {"ethertype": "arp", "action": "allow", "class": "b"},
    {"dscp": "ef", "action": "allow", "class": "b"},
]
POLICY = {
    "count": "outer",
    "port": {"rate": "10Gbps", "buffer": "4MiB"},
    "tenants": [
        {"name": "training", "vnis": [100, 300], "classes": [{"name": "bulk"}, {"name": "a"}, {"name": "b"}], "rules": RULES},
        {"name": "strict", "vnis": [200], "default": "drop", "rules": [{"proto": "tcp", "action": "allow"}]},
    ],
}
SENDER = """
import socket, sys
for spec in sys.argv[1:]:
    address, port, count, size = spec.split(",")
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        for _ in range(int(count)):
            s.sendto(b"x" * int(size), (address, int(port)))
"""


@pytest.fixture
def plan(request: pytest.FixtureRequest) -> HtbPlan:
    """POLICY applied to va0 (which ``clean`` gives its default qdisc again afterwards)."""
    request.getfixturevalue("clean")
    applied = plan_htb(Policy.from_dict(POLICY))
    apply_plan(applied, "va0", A)
    return applied


def test_apply_pushes_the_rule_filters_once_and_tc_builds_the_same(plan: HtbPlan) -> None:
    assert tree(A, "va0")[1] == planned_filters(plan)
    # per VNI and underlay: rules[0], [1] and [5] inner IPv4 and IPv6, [2] those x 4 pieces of 5002-5010, [3] IPv6, [4] ARP
    assert sum(f.rule is not None for f in plan.filters) == 2 * 2 * (2 + 2 + 2 * 4 + 1 + 1 + 2)
    assert apply_plan(plan, "va0", A) == []
    assert_tc_builds_what_apply_made(plan)


def _sent(plan: HtbPlan, *sender: str) -> dict[str, tuple[int, int]]:
    """Packets and bytes per leaf class the ``sender`` script, run in A, passed (none are zero)."""
    before = quiet_counts(plan)
    run("ip", "netns", "exec", A, sys.executable, "-c", *sender)
    after = htb_counts(plan)
    leaves = {f"1:{c.classid & 0xFFFF:x}" for c in plan.classes if c.role in ("class", "default", "unmatched")}
    delta = {c: (after[c][0] - before[c][0], after[c][1] - before[c][1]) for c in leaves}
    return {c: counted for c, counted in delta.items() if counted != (0, 0)}


def _expected(frames: list[bytes]) -> dict[str, tuple[int, int]]:
    """Packets and bytes per class, as isolane's classifier puts the frames."""
    counts: dict[str, tuple[int, int]] = {}
    for frame, classid in zip(frames, isolane_class(Policy.from_dict(POLICY), frames)):
        packets, size = counts.get(classid, (0, 0))
        counts[classid] = (packets + 1, size + len(frame))
    return counts


def _frame(vni: int, inner: object) -> bytes:
    """``inner`` in VXLAN from A to B, over the underlay of ``vni``'s device."""
    ether = scapy.Ether(src=MAC["va0"], dst=MAC["vb0"])
    family = OVERLAYS.get(vni, ("4",))[0]
    ip = scapy.IP if family == "4" else scapy.IPv6
    outer = ip(src=UNDERLAY[family][0], dst=UNDERLAY[family][1])
    return bytes(ether / outer / scapy.UDP(sport=49152, dport=4789) / scapy.VXLAN(flags=0x08, vni=vni) / inner)


def _inner_frames() -> list[object]:
    ether = scapy.Ether(src="02:00:00:00:01:0a", dst="02:00:00:00:01:0b")
    v4 = {"src": "10.100.0.1", "dst": "10.100.0.2"}
    v6 = {"src": "fd00:1::1", "dst": "fd00:2::1"}
    frames: list[object] = []
    for port in (5001, 5002, 5003, 5010, 5011, 80):
        frames.append(ether / scapy.IP(**v4) / scapy.UDP(sport=40000, dport=port) / (b"u" * (port % 97)))
        frames.append(ether / scapy.IPv6(src="fd00:9::1", dst="fd00:2::1") / scapy.UDP(sport=40000, dport=port) / (b"v" * 33))
    frames.append(ether / scapy.IPv6(**v6) / scapy.UDP(sport=1, dport=5003) / (b"w" * 10))  # rules[0] first: bulk
    frames.append(ether / scapy.IPv6(**v6) / scapy.TCP(sport=1, dport=5003))  # rules[3] wants UDP: bulk
    frames.append(ether / scapy.IPv6(**v6) / scapy.UDP(sport=1, dport=9))  # rules[3]: a
    frames.append(ether / scapy.IP(**v4, tos=46 << 2) / scapy.TCP(dport=22))  # rules[5]: b
    frames.append(ether / scapy.IPv6(src="fd00:9::1", dst="fd00:2::1", tc=46 << 2) / scapy.ICMPv6EchoRequest())  # rules[5]: b
    frames.append(ether / scapy.IP(**v4) / scapy.ICMP())  # no rule: bulk
    frames.append(scapy.Ether(src="02:00:00:00:01:0a", dst="ff:ff:ff:ff:ff:ff") / scapy.ARP(psrc="10.100.0.1", pdst="10.100.0.9"))  # rules[4]: b
    return frames


def test_the_kernel_counts_each_frame_in_the_class_isolane_gives_it(plan: HtbPlan) -> None:
    """Frames scapy builds, sent on va0 through an AF_PACKET socket (which passes the qdisc): each
    inner frame over VNI 100 (IPv4 underlay) and VNI 300 (IPv6 underlay), some over VNI 200
    (``strict``, whose ``default: drop`` the kernel cannot do) and VNI 400 (no tenant's)."""
    inner = _inner_frames()
    frames = [_frame(vni, frame) for vni in (100, 300) for frame in inner]
    frames += [_frame(vni, frame) for vni in (200, 400) for frame in inner[:4]]

    expected = _expected(frames)
    assert set(expected) == {"1:101", "1:102", "1:103", "1:201", "1:ffff"}  # every class of training, strict's, no tenant's
    assert _sent(plan, RAW_SENDER, "va0", *(frame.hex() for frame in frames)) == expected


def test_kernel_vxlan_traffic_is_counted_by_rule_over_both_underlays(plan: HtbPlan) -> None:
    """UDP sent through the namespace's own vxlan devices, to ports the rules tell apart."""
    sends = [(vni, port, count, size) for vni in (100, 300) for port, count, size in ((5001, 7, 100), (5002, 5, 200), (5003, 3, 300), (6000, 4, 50))]

    frames = []
    for vni, port, count, size in sends:
        ether = scapy.Ether(src=OVERLAYS[vni][3], dst=OVERLAYS[vni][4])
        inner = ether / scapy.IP(src=OVERLAYS[vni][1], dst=OVERLAYS[vni][2]) / scapy.UDP(sport=40000, dport=port) / (b"x" * size)
        frames += [_frame(vni, inner)] * count  # what the vxlan device sends, but for its UDP source port
    expected = _expected(frames)
    assert {c: packets for c, (packets, _) in expected.items()} == {"1:101": 2 * (3 + 4), "1:102": 2 * 7, "1:103": 2 * 5}  # 5003 dropped: bulk
    assert _sent(plan, SENDER, *(f"{OVERLAYS[vni][2]},{port},{n},{s}" for vni, port, n, s in sends)) == expected


def test_a_changed_policy_moves_the_rule_filters_and_a_failed_apply_puts_them_back(plan: HtbPlan) -> None:
    """A rule inserted first shifts every rule's priority, and the second tenant's; a tenant that
    loses its rules loses its class's filters. A refused class undoes it all, filters on classes too."""
    before = tree(A, "va0")
    tenants: list[dict[str, object]] = POLICY["tenants"]  # type: ignore[assignment]
    changed = {**POLICY, "tenants": [{**tenants[0], "rules": [{"proto": "icmp", "action": "allow", "class": "b"}, *RULES]}, {**tenants[1], "rules": []}]}
    changed_plan = plan_htb(Policy.from_dict(changed))
    refused = HtbClass(0x2_0005, 0x1_0001, 1000, 1000, 9216, 9216, 1000, 1000, 0, "class")  # HTB refuses a class of another qdisc (2:)
    with pytest.raises(LinuxError, match="add class 2:5"):
        apply_plan(dataclasses.replace(changed_plan, classes=(*changed_plan.classes, refused)), "va0", A)
    assert tree(A, "va0") == before
    assert apply_plan(changed_plan, "va0", A) != []
    assert tree(A, "va0")[1] == planned_filters(changed_plan)
    assert not any(f.parent == 0x1_0200 for f in changed_plan.filters)
    assert apply_plan(changed_plan, "va0", A) == []
