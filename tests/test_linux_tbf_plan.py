"""isolane.linux's TBF plan, its tc commands, and the transaction's report of a rollback that
failed, without a kernel (tests/test_linux_tbf.py runs them against the real one)."""

from __future__ import annotations

from typing import Any

import pytest

from isolane.cli import main
from isolane.linux import LinuxError, RollbackFailed, StatsPoller, TbfPlan, VxlanDevice, plan_htb, plan_tbf, tbf_tc_commands
from isolane.linux import transaction as transaction_module
from isolane.linux.netlink import KernelTbf
from isolane.linux.tbf import LATENCY_US, buffer_ticks
from isolane.linux.transaction import transaction
from isolane.policy import Policy
from isolane.policy.units import default_burst

DEVICES = [
    VxlanDevice("vx100", 100, 4789, "192.0.2.1", "192.0.2.2", "eth0", 1450),
    VxlanDevice("vx100b", 100, 4789, "192.0.2.1", "192.0.2.3", "eth0", 8950),
    VxlanDevice("vx300", 300, 4789, "2001:db8::1", "2001:db8::2", "eth0", 1430),
    VxlanDevice("vx555", 555, 4789, None, None, None, 1450),
]
POLICY = {
    "count": "wire",
    "tenants": [
        {"name": "training", "vnis": [100], "rate": "10Gbps", "ceil": "50Gbps", "classes": [{"name": "bulk", "rate": "1Gbps"}, {"name": "control"}]},
        {"name": "inference", "vnis": [300], "rate": "20Mbps", "burst": "64KiB"},
        {"name": "batch", "vnis": [555]},
        {"name": "elsewhere", "vnis": [999], "ceil": "1Gbps"},
    ],
}


def _plan(policy: dict[str, Any] = POLICY, devices: list[VxlanDevice] = DEVICES) -> TbfPlan:
    return plan_tbf(Policy.from_dict(policy), devices)


def test_each_tenant_device_gets_its_ceiling_or_else_its_rate() -> None:
    plan = _plan()
    by_dev = {q.dev: q for q in plan.qdiscs}
    assert list(by_dev) == ["vx100", "vx100b", "vx300"]
    assert plan.unclaimed == ("vx555",)  # batch has neither ceil nor rate
    assert [(q.tenant, q.tenant_name, q.vni) for q in plan.qdiscs] == [(0, "training", 100), (0, "training", 100), (1, "inference", 300)]
    assert by_dev["vx100"].rate == by_dev["vx100b"].rate == 50_000_000_000 // 8
    assert by_dev["vx300"].rate == 20_000_000 // 8


def test_bursts_come_from_the_policy_and_hold_a_frame_of_the_device() -> None:
    by_dev = {q.dev: q for q in _plan().qdiscs}
    assert by_dev["vx100"].burst == default_burst(6_250_000_000, 9216) == 6_250_000  # 1 ms at the ceiling
    assert by_dev["vx300"].burst == 64 * 1024  # the tenant's own burst
    small = {"largest_frame": "1500B", "tenants": [{"name": "t", "vnis": [100], "ceil": "8Mbps"}]}
    assert [q.burst for q in _plan(small).qdiscs] == [1500, 8950 + 14]  # 1 ms at 1 MB/s is below a frame: the frame, or the device's MTU + Ethernet


@pytest.mark.parametrize(("count", "ipv4", "ipv6"), [("outer", 50, 70), ("wire", 70, 90), ("wire_fcs", 74, 94), ("inner", 0, 0)])
def test_overhead_is_the_tunnel_and_what_the_count_adds(count: str, ipv4: int, ipv6: int) -> None:
    by_dev = {q.dev: q for q in _plan({**POLICY, "count": count}).qdiscs}
    assert (by_dev["vx100"].overhead, by_dev["vx300"].overhead) == (ipv4, ipv6)


def test_limit_is_the_burst_plus_the_latency_at_the_rate() -> None:
    for q in _plan().qdiscs:
        assert q.limit == q.burst + q.rate * LATENCY_US // 1_000_000
    vx300 = _plan().qdiscs[2]
    assert vx300.as_kernel() == KernelTbf(2_500_000, buffer_ticks(2_500_000, 65536 + 90), 65536 + 25_000, 90)  # the buffer holds burst + overhead


@pytest.mark.parametrize(
    ("rate", "size", "ticks"),
    [
        (2_500_000, 30_070, 187_937),
        (1_000, 1_600, 25_000_000),
        (125_000_000, 125_020, 15_627),
        (6_250_000_000, 6_250_090, 15_625),
        (4_294_967_296, 5_000_003, 18_189),
    ],
)
def test_buffer_ticks_are_what_the_kernel_reported(rate: int, size: int, ticks: int) -> None:
    """Each (rate, burst + overhead) was made by tc on this project's CI kernel and read back."""
    assert buffer_ticks(rate, size) == ticks


def test_what_tbf_does_not_enforce_is_named_by_place() -> None:
    assert _plan().unenforced == (
        "tenants[0]: its guarantee (10Gbps) is not enforced: TBF caps it at its ceiling (50Gbps), neither guarantees nor borrows",
        "tenants[0]: 2 vxlan devices (vx100, vx100b), one TBF each: together they may pass 2x its rate",
        "tenants[0].classes: TBF is one bucket per device: no per-class rates, ceilings or priorities",
        "tenants[2]: no ceil and no rate: TBF has nothing to cap, batch's devices are left as they are",
        "tenants[3]: no vxlan device here has its VNIs (999): nothing enforces elsewhere",
        "vx555: no local or remote address: its tunnel headers are charged as IPv4's",
    )


def test_without_any_tenant_device_there_is_nothing_to_apply() -> None:
    with pytest.raises(ValueError, match=r"no tenant has a vxlan device here \(their VNIs: 999; the devices' VNIs: 100, 300, 555\)"):
        _plan({"tenants": [POLICY["tenants"][3]]})  # type: ignore[index]


def test_a_burst_longer_than_the_kernels_buffer_is_an_error_with_its_place() -> None:
    slow = {"tenants": [{"name": "a", "vnis": [100], "rate": "8kbps", "burst": "1MiB"}]}
    with pytest.raises(ValueError, match=r"tenants\[0\]\.burst: 1,048,576 B at 8,000 bit/s"):
        _plan(slow)


def test_tc_commands_say_the_same_rate_burst_limit_and_overhead() -> None:
    plan = _plan()
    assert (
        tbf_tc_commands(plan, "ns1")[0] == "tc -n ns1 qdisc replace dev vx100 root handle 1: tbf rate 50000000000bit burst 6250000b limit 68750000b overhead 70"
    )
    assert tbf_tc_commands(_plan({**POLICY, "count": "inner"}))[2] == "tc qdisc replace dev vx300 root handle 1: tbf rate 20000000bit burst 65536b limit 90536b"
    assert len(tbf_tc_commands(plan)) == len(plan.qdiscs)


def _fake_kernel(monkeypatch: pytest.MonkeyPatch, refused: set[str]) -> list[str]:
    """isolane's request, answering every request but those whose ``doing`` is in ``refused``."""
    sent: list[str] = []

    def request(ipr: Any, message: Any, msg_type: int, flags: int, doing: str) -> None:
        if doing in refused:
            raise LinuxError(22, f"{doing}: Invalid argument")
        sent.append(doing)

    monkeypatch.setattr(transaction_module, "request", request)
    return sent


def _change(tx: Any, dev: str, n: int) -> None:
    tx.change(f"add {dev} {n}", lambda: None, 0, 0, (f"undo {dev} {n}", lambda: None, 0, 0), dev)


def test_a_rollback_that_works_raises_the_first_error_unchanged(monkeypatch: pytest.MonkeyPatch) -> None:
    sent = _fake_kernel(monkeypatch, {"add b 0"})
    with pytest.raises(LinuxError) as raised, transaction(None, lambda dev: f"clean {dev}") as tx:
        _change(tx, "a", 0)
        _change(tx, "b", 0)
    assert not isinstance(raised.value, RollbackFailed) and str(raised.value) == "[Errno 22] add b 0: Invalid argument"
    assert sent == ["add a 0", "undo a 0"]


def test_a_rollback_that_fails_names_the_devices_what_failed_and_the_cleanup(monkeypatch: pytest.MonkeyPatch) -> None:
    sent = _fake_kernel(monkeypatch, {"add c 0", *(f"undo a {n}" for n in range(5)), "undo b 1"})
    with pytest.raises(RollbackFailed) as raised, transaction(None, lambda dev: f"isolane linux remove --dev {dev}") as tx:
        for dev, n in (("a", 0), ("b", 0), ("a", 1), ("b", 1), ("a", 2), ("a", 3), ("a", 4)):
            _change(tx, dev, n)
        _change(tx, "c", 0)
    err = raised.value
    assert sent[7:] == ["undo b 0"]  # every undo step is tried, newest first; the others failed
    assert err.devices == ("a", "b") and len(err.failures) == 6
    assert str(err) == (
        "[Errno 22] add c 0: Invalid argument; rolling back failed too, so a, b may not be as before "
        "(a: undo a 4: Invalid argument, undo a 3: Invalid argument, undo a 2: Invalid argument and 2 more undo steps failed; "
        "b: undo b 1: Invalid argument). To clean up: isolane linux remove --dev a; isolane linux remove --dev b"
    )
    assert isinstance(err, LinuxError) and isinstance(err.__cause__, LinuxError)


def test_an_interrupt_keeps_its_type_and_carries_the_report(monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_kernel(monkeypatch, {"undo a 0"})
    with pytest.raises(KeyboardInterrupt) as raised, transaction(None, lambda dev: f"clean {dev}") as tx:
        _change(tx, "a", 0)
        raise KeyboardInterrupt
    assert raised.value.__notes__ == [
        "KeyboardInterrupt; rolling back failed too, so a may not be as before (a: undo a 0: Invalid argument). To clean up: clean a"
    ]


def test_tbf_counters_are_carried_per_device() -> None:
    poller = StatsPoller(_plan())
    rows = [{"dev": dev, "classid": "1:", "packets": packets, "bytes": 0, "drops": 0, "overlimits": 0} for dev, packets in (("vx100", 2**32 - 1), ("vx300", 5))]
    poller.carry(rows)
    later = poller.carry([{**rows[0], "packets": 3}, {**rows[1], "packets": 6}])
    assert [r["packets"] for r in later] == [2**32 + 3, 6]
    with pytest.raises(ValueError, match="give dev"):
        StatsPoller(plan_htb(Policy.from_dict({**POLICY, "port": {"rate": "100Gbps", "buffer": "1MiB"}})))


def test_htb_mode_needs_a_device(tmp_path: Any, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "policy.yaml"
    path.write_text("tenants: [{name: a, vnis: [7]}]\n")
    assert main(["linux", "apply", "--policy", str(path), "--link-rate", "1Gbps", "--dry-run"]) == 2
    assert capsys.readouterr().err == "isolane: error: --dev: the underlay device is needed in htb mode\n"
    assert main(["linux", "remove"]) == 2
    assert "--dev: the underlay device is needed in htb mode" in capsys.readouterr().err


def test_the_command_line_prints_an_interrupts_rollback_report(tmp_path: Any, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    def interrupted_apply(*args: Any, **kwargs: Any) -> list[str]:
        interrupt = KeyboardInterrupt()
        interrupt.add_note("KeyboardInterrupt; rolling back failed too, so eth1 may not be as before (...). To clean up: ...")
        raise interrupt

    monkeypatch.setattr("isolane.linux.apply_plan", interrupted_apply)
    path = tmp_path / "policy.yaml"
    path.write_text("tenants: [{name: a, vnis: [7]}]\n")
    assert main(["linux", "apply", "--dev", "eth1", "--policy", str(path), "--link-rate", "1Gbps"]) == 130
    assert capsys.readouterr().err == "isolane: interrupted\nKeyboardInterrupt; rolling back failed too, so eth1 may not be as before (...). To clean up: ...\n"
