"""isolane.linux against the real kernel, in network namespaces the tests make and always delete:
apply, idempotence, rollback, remove, the dry run's tc commands, discovery, and the kernel's own
class counters on real VXLAN traffic (IPv4 and IPv6 underlay). Skipped, saying why, without
root, iproute2 or the kernel features.

The namespaces, their veth pair and VXLAN devices: tests/support/netns.py. The underlay carries
what the test sends, so the counters are compared exactly."""

from __future__ import annotations

import dataclasses
import json
import shutil
import subprocess
import sys
import time
from typing import Any

import numpy as np
import pytest

from isolane import Engine, PacketBatch
from isolane.cli import main
from isolane.engine import ClassifierCounters
from isolane.linux import LinuxError, StatsPoller, apply_plan, discover_vxlan, plan_htb, probe_features, read_stats, remove
from isolane.linux.apply import as_kernel
from isolane.linux.htb import ROOT_HANDLE, HtbClass, HtbPlan
from isolane.linux.netlink import link_index, open_netns, root_qdisc
from isolane.linux.probe import _reason
from isolane.policy import Policy

pytest.importorskip("pyroute2")

from support.kernel_htb import assert_tc_builds_what_apply_made, htb_counts, planned_filters, quiet_counts, tree  # noqa: E402
from support.netns import FLOOD, MAC, OVERLAYS, RAW_SENDER, TAG, UNDERLAY, A, run, send  # noqa: E402

POLICY = {
    "count": "wire",  # HTB charges frame + 20 B (its overhead)
    "port": {"rate": "100Gbps", "buffer": "4MiB"},
    "tenants": [
        {"name": "training", "vnis": [100], "rate": "10Gbps", "ceil": "50Gbps", "classes": [{"name": "bulk", "rate": "1Gbps"}, {"name": "control"}]},
        {"name": "inference", "vnis": [300], "rate": "5Gbps"},
    ],
}


def _plan(policy: dict[str, object] = POLICY) -> HtbPlan:
    return plan_htb(Policy.from_dict(policy))


def _root(netns: str, dev: str) -> str:
    with open_netns(netns) as ipr:
        return root_qdisc(ipr, link_index(ipr, dev))[0]


def test_probe_finds_what_the_fixture_used(pair: None) -> None:
    features = probe_features(A)
    assert all(features.features[name].available for name in ("veth", "vxlan", "htb", "u32"))
    with pytest.raises(LinuxError, match="no network namespace"):
        probe_features(f"{TAG}-absent")


def test_an_absent_kind_is_reported_as_not_built_in(pair: None) -> None:
    """fq_codel and dummy devices are not built into this kind of machine's kernel (issue 19)."""
    with open_netns(A) as ipr:
        lo = link_index(ipr, "lo")
        try:
            ipr.tc("add", "fq_codel", lo, ROOT_HANDLE)
        except Exception as err:
            assert _reason(err) == "not built into this kernel (No such file or directory)"
        else:
            pytest.skip("this kernel has fq_codel (the namespace's lo keeps it; no test uses lo)")


def test_discover_reads_each_vxlan_device(pair: None) -> None:
    found = {d.name: d for d in discover_vxlan(A)}
    assert sorted(found) == ["vx100", "vx200", "vx300"]
    vx100, vx300 = found["vx100"], found["vx300"]
    assert (vx100.vni, vx100.udp_port, vx100.local, vx100.remote, vx100.underlay, vx100.mtu) == (100, 4789, "192.0.2.1", "192.0.2.2", "va0", 1450)
    assert (vx300.vni, vx300.local, vx300.remote, vx300.underlay, vx300.mtu) == (300, "2001:db8::1", "2001:db8::2", "va0", 1430)


def test_apply_builds_the_plan_and_a_second_apply_changes_nothing(clean: None) -> None:
    plan = _plan()
    changes = apply_plan(plan, "va0", A)
    assert len(changes) == 1 + len(plan.classes) + len(plan.filters)
    classes, filters = tree(A, "va0")
    assert classes == {as_kernel(c) for c in plan.classes}
    assert filters == planned_filters(plan)
    assert apply_plan(plan, "va0", A) == []
    assert tree(A, "va0") == (classes, filters)
    above_32_bits = [k for k in classes if k.ceil >= 1 << 32]  # 50 and 100 Gbit/s: HTB's 64-bit rate attributes
    assert len(above_32_bits) == len(classes) == 8 and all(k.cbuffer > 0 for k in above_32_bits)
    assert {k.overhead for k in classes} == {20}


def test_a_changed_policy_changes_only_what_differs(clean: None) -> None:
    apply_plan(_plan(), "va0", A)
    changed = {**POLICY, "tenants": [{**POLICY["tenants"][0], "ceil": "40Gbps"}, {"name": "inference", "vnis": [300, 301]}]}  # type: ignore[index]
    changes = apply_plan(_plan(changed), "va0", A)
    assert "change class 1:100" in changes and "change class 1:200" in changes
    assert sum(c.startswith("add u32 filter: VNI 301") for c in changes) == 2
    assert not any(c.startswith(("add class", "delete")) for c in changes)
    classes, _ = tree(A, "va0")
    assert classes == {as_kernel(c) for c in _plan(changed).classes}


def test_a_smaller_policy_deletes_the_classes_and_filters_it_no_longer_has(clean: None) -> None:
    apply_plan(_plan(), "va0", A)
    smaller = {**POLICY, "tenants": [{"name": "inference", "vnis": [300]}]}
    changes = apply_plan(_plan(smaller), "va0", A)
    deleted = [c for c in changes if c.startswith("delete class")]  # the tenants move up: inference is 1:100 now
    assert sorted(deleted) == ["delete class 1:102", "delete class 1:200", "delete class 1:201"]
    assert deleted.index("delete class 1:201") < deleted.index("delete class 1:200")  # children first
    assert tree(A, "va0") == (
        {as_kernel(c) for c in _plan(smaller).classes},
        planned_filters(_plan(smaller)),
    )


def test_a_failed_apply_leaves_the_device_as_it_was(clean: None) -> None:
    plan = _plan()
    refused = HtbClass(0x2_0005, 0x1_0001, 1000, 1000, 9216, 9216, 1000, 1000, 0, "class")  # HTB refuses a class of another qdisc (2:)
    broken = dataclasses.replace(plan, classes=(*plan.classes, refused))
    with pytest.raises(LinuxError, match="add class 2:5"):
        apply_plan(broken, "va0", A)
    assert _root(A, "va0") == "noqueue"  # the HTB root it made is gone again
    apply_plan(plan, "va0", A)
    before = tree(A, "va0")
    changed = {**POLICY, "tenants": [{**POLICY["tenants"][0], "rate": "20Gbps"}]}  # type: ignore[index]
    broken = dataclasses.replace(_plan(changed), classes=(*_plan(changed).classes, refused))
    with pytest.raises(LinuxError):
        apply_plan(broken, "va0", A)
    assert tree(A, "va0") == before


def test_remove_goes_back_to_the_default_qdisc_once(clean: None) -> None:
    apply_plan(_plan(), "va0", A)
    assert _root(A, "va0") == "htb"
    assert remove("va0", A) is True
    assert _root(A, "va0") == "noqueue"
    assert remove("va0", A) is False


def test_a_root_another_program_made_is_an_error_and_left_alone(clean: None) -> None:
    """A rollback deletes isolane's root, which would bring back the default qdisc, not this one."""
    run("tc", "-n", A, "qdisc", "replace", "dev", "va0", "root", "handle", "2:", "pfifo")
    try:
        with pytest.raises(LinuxError, match=r"va0 has a root qdisc that isolane did not make \(pfifo 2:\): remove it first"):
            apply_plan(_plan(), "va0", A)
        assert _root(A, "va0") == "pfifo"
        assert remove("va0", A) is False
    finally:
        subprocess.run(["tc", "-n", A, "qdisc", "del", "dev", "va0", "root"], capture_output=True)


def test_dry_run_commands_build_the_same_classes_and_filters(clean: None) -> None:
    plan = _plan()
    apply_plan(plan, "va0", A)
    assert_tc_builds_what_apply_made(plan)


def test_the_kernel_counts_each_tenants_vxlan_traffic_in_its_class(clean: None) -> None:
    plan = _plan()
    apply_plan(plan, "va0", A)
    before = quiet_counts(plan)
    sends = {100: (50, 200), 200: (20, 100), 300: (30, 300)}
    send(*((OVERLAYS[vni][2], count, size) for vni, (count, size) in sends.items()))
    after = htb_counts(plan)
    delta = {classid: (after[classid][0] - before[classid][0], after[classid][1] - before[classid][1]) for classid in after}

    def on_wire(vni: int) -> tuple[int, int]:
        count, size = sends[vni]
        outer = 14 + (20 if OVERLAYS[vni][0] == "4" else 40) + 8 + 8  # Ethernet, IP, UDP, VXLAN
        return count, count * (outer + 14 + 20 + 8 + size)  # the inner frame: Ethernet, IPv4, UDP, payload

    assert delta["1:101"] == on_wire(100)  # training's default class: its first, bulk
    assert delta["1:102"] == (0, 0)
    assert delta["1:100"] == on_wire(100)  # the tenant counts what its classes passed
    assert delta["1:201"] == delta["1:200"] == on_wire(300)
    assert delta["1:ffff"] == on_wire(200)  # VNI 200 is no tenant's
    assert delta["1:fffe"] == (0, 0)
    assert delta["1:1"] == tuple(map(sum, zip(on_wire(100), on_wire(200), on_wire(300))))
    rows = {row["classid"]: row for row in read_stats(plan, "va0", A)}
    assert (rows["1:101"]["tenant"], rows["1:101"]["cls"], rows["1:101"]["class"], rows["1:101"]["role"]) == ("training", 0, "bulk", "class")
    assert (rows["1:100"]["tenant"], rows["1:100"]["cls"], rows["1:100"]["role"]) == ("training", None, "tenant")
    assert rows["1:ffff"]["tenant"] is None and rows["1:ffff"]["drops"] == 0
    poller = StatsPoller(plan, "va0", A)
    assert [(r["classid"], r["packets"]) for r in poller.read()] == [(r["classid"], r["packets"]) for r in read_stats(plan, "va0", A)]


def test_the_command_line_applies_reads_and_removes(clean: None, tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    discovered = tmp_path / "discovered.yaml"
    assert main(["linux", "discover", "--netns", A]) == 0
    discovered.write_text(capsys.readouterr().out)
    assert [t.vnis for t in Policy.from_file(discovered).tenants] == [(100,), (200,), (300,)]
    options = ["--netns", A, "--dev", "va0", "--policy", str(discovered), "--link-rate", "1Gbps"]
    assert main(["linux", "apply", *options]) == 0
    assert "add class 1:300" in capsys.readouterr().out
    assert main(["linux", "apply", *options]) == 0
    assert capsys.readouterr().out == "va0: already as the policy says, nothing changed\n"
    assert main(["linux", "stats", *options, "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [(r["classid"], r["tenant"], r["class"]) for r in rows][3:5] == [("1:100", "vni-100", None), ("1:101", "vni-100", "default")]
    assert main(["linux", "remove", "--netns", A, "--dev", "va0"]) == 0
    assert "back to the default qdisc" in capsys.readouterr().out
    assert main(["linux", "stats", *options[:4], "--dev", "nope", "--policy", str(discovered), "--link-rate", "1Gbps"]) == 2
    assert "no device 'nope'" in capsys.readouterr().err


def test_packets_the_vni_filters_cannot_read_land_in_the_unmatched_class(clean: None) -> None:
    """Frames scapy builds, sent on va0 through an AF_PACKET socket (which passes the qdisc)."""
    scapy = pytest.importorskip("scapy.all")
    plan = _plan()
    apply_plan(plan, "va0", A)
    ether = scapy.Ether(src=MAC["va0"], dst=MAC["vb0"])
    inner = scapy.Ether() / scapy.IP(src="10.100.0.1", dst="10.100.0.2") / scapy.UDP(dport=5001) / (b"x" * 64)
    v4 = {"src": UNDERLAY["4"][0], "dst": UNDERLAY["4"][1]}
    vxlan = scapy.UDP(sport=49152, dport=4789) / scapy.VXLAN(flags=0x08, vni=100) / inner
    plain = ether / scapy.IP(**v4) / vxlan  # a VXLAN packet of training's VNI
    with_options = ether / scapy.IP(**v4, options=[scapy.IPOption_RR()]) / vxlan  # the VNI is not at 32
    later_fragment = ether / scapy.IP(**v4, proto=17, frag=185) / (b"y" * 80)  # no UDP header
    hop_by_hop = ether / scapy.IPv6(src=UNDERLAY["6"][0], dst=UNDERLAY["6"][1]) / scapy.IPv6ExtHdrHopByHop() / vxlan
    no_tenant = ether / scapy.IP(**v4) / scapy.UDP(sport=49152, dport=4789) / scapy.VXLAN(flags=0x08, vni=999) / inner
    frames = {"1:101": [plain], "1:fffe": [with_options, later_fragment, hop_by_hop], "1:ffff": [no_tenant]}
    before = quiet_counts(plan)
    everything = [bytes(frame).hex() for sent in frames.values() for frame in sent]
    run("ip", "netns", "exec", A, sys.executable, "-c", RAW_SENDER, "va0", *everything)
    after = htb_counts(plan)
    delta = {classid: (after[classid][0] - before[classid][0], after[classid][1] - before[classid][1]) for classid in after}
    for classid, sent in frames.items():
        assert delta[classid] == _size(*sent), delta
    # isolane on the same bytes: what the kernel put in a tenant's class is the tenant's there too,
    # and isolane reads what the kernel's filters could not (options, an extension header)
    counted = _isolane_counters([frame for sent in frames.values() for frame in sent])
    assert (counted["training"]["packets"], counted["training"]["bytes"]) == tuple(map(sum, zip(delta["1:100"], _size(with_options, hop_by_hop))))
    assert (counted[None]["packets"], counted[None]["bytes"]) == tuple(map(sum, zip(delta["1:ffff"], _size(later_fragment))))


def _size(*frames: Any) -> tuple[int, int]:
    """Packets and bytes of scapy frames."""
    return len(frames), sum(len(bytes(frame)) for frame in frames)


def _isolane_counters(frames: list[Any]) -> dict[str | None, ClassifierCounters]:
    raw = [bytes(frame) for frame in frames]
    lengths = np.array([len(r) for r in raw], dtype=np.uint32)
    offsets = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.uint64)
    engine = Engine(Policy.from_dict(POLICY))
    engine.classify(PacketBatch.from_arrays(b"".join(raw), offsets, lengths, np.arange(len(raw), dtype=np.int64)))
    return engine.counters()


def test_without_privileges_nothing_is_probed_and_apply_says_why(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """In a user namespace of its own, a process has no capabilities over the host's network."""
    if shutil.which("unshare") is None or subprocess.run(["unshare", "--user", "true"], capture_output=True).returncode != 0:
        pytest.skip("needs util-linux's unshare and user namespaces")
    policy = tmp_path / "policy.yaml"
    policy.write_text("port: {rate: 1Gbps, buffer: 1MiB}\ntenants: [{name: a, vnis: [1]}]\n")
    isolane = [sys.executable, "-m", "isolane.cli", "linux"]
    probe = subprocess.run(["unshare", "--user", *isolane, "probe"], capture_output=True, text=True)
    assert probe.returncode == 0
    assert "htb        no   not probed: cannot make a scratch namespace" in probe.stdout and "it takes root" in probe.stdout
    apply = subprocess.run(["unshare", "--user", *isolane, "apply", "--dev", "lo", "--policy", str(policy)], capture_output=True, text=True)
    assert apply.returncode == 2
    assert apply.stderr.startswith("isolane: error: cannot apply an HTB tree to lo: htb: not probed: cannot make a scratch namespace")


def test_htb_holds_a_tenant_offered_above_its_ceiling_to_it(clean: None) -> None:
    """While the tenant's queue stays full, its class passes bytes at its ceiling (within 5%). (The
    sender's socket buffer, full of queued packets, slows the sender rather than the queue dropping.)"""
    ceiling_bps = 20_000_000
    policy = {"port": {"rate": "10Gbps", "buffer": "4MiB"}, "tenants": [{"name": "capped", "vnis": [100], "rate": "10Mbps", "ceil": "20Mbps"}]}
    plan = _plan(policy)
    apply_plan(plan, "va0", A)
    flood = subprocess.Popen(["ip", "netns", "exec", A, sys.executable, "-c", FLOOD, OVERLAYS[100][2], "2.0"])
    try:
        time.sleep(0.5)  # the queue fills
        start_bytes, start = htb_counts(plan)["1:100"][1], time.monotonic()
        time.sleep(1.0)
        end_bytes, end = htb_counts(plan)["1:100"][1], time.monotonic()
        backlog = next(row["backlog_packets"] for row in read_stats(plan, "va0", A) if row["classid"] == "1:101")
    finally:
        flood.wait(timeout=10)
    assert backlog > 0  # still offered above the ceiling when measured
    delivered_bps = (end_bytes - start_bytes) * 8 / (end - start)
    assert abs(delivered_bps - ceiling_bps) / ceiling_bps < 0.05, delivered_bps
