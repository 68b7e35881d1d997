"""TBF on per-tenant vxlan devices, and rollbacks that fail, against the real kernel, in network
namespaces the tests make and always delete (tests/support/netns.py: vx100 and vx200 on an IPv4
underlay, vx300 on IPv6). Skipped, saying why, without root, iproute2 or the kernel features."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from isolane.cli import main
from isolane.linux import (
    LinuxError,
    RollbackFailed,
    StatsPoller,
    TbfPlan,
    apply_plan,
    apply_tbf,
    discover_vxlan,
    plan_htb,
    plan_tbf,
    probe_features,
    read_tbf_stats,
    remove,
    remove_tbf,
    tbf_tc_commands,
)
from isolane.linux import transaction as transaction_module
from isolane.linux.htb import HtbClass
from isolane.linux.netlink import KernelTbf, link_index, open_netns, root_qdisc
from isolane.linux.tbf_apply import read_tbf
from isolane.policy import Policy

pytest.importorskip("pyroute2")

from support.netns import FLOOD, FRESH, OVERLAYS, A, namespaces, run  # noqa: E402

DEVICES = ("vx100", "vx200", "vx300")
POLICY: dict[str, Any] = {
    "count": "wire",
    "port": {"rate": "100Gbps", "buffer": "4MiB"},
    "tenants": [
        {"name": "training", "vnis": [100, 200], "rate": "10Gbps", "ceil": "50Gbps"},  # above 2^32 - 1 B/s: TBF's 64-bit rate
        {"name": "inference", "vnis": [300], "rate": "20Mbps"},
    ],
}

State = dict[str, tuple[str, int, KernelTbf | None]]


@pytest.fixture(scope="module")
def pair() -> Iterator[None]:
    with namespaces():
        missing = probe_features(A).missing(("tbf",))
        if missing:
            pytest.skip(f"the kernel lacks {missing[0]}")
        yield


@pytest.fixture
def clean(pair: None) -> Iterator[None]:
    """The vxlan devices with their default qdisc before and after the test."""
    _restore_defaults()
    yield
    _restore_defaults()


def _restore_defaults() -> None:
    for dev in DEVICES:
        subprocess.run(["tc", "-n", A, "qdisc", "del", "dev", dev, "root"], capture_output=True)


def _plan(policy: dict[str, Any] = POLICY, netns: str = A) -> TbfPlan:
    return plan_tbf(Policy.from_dict(policy), discover_vxlan(netns))


def _state(netns: str = A, devices: tuple[str, ...] = DEVICES) -> State:
    """Each device's root qdisc: kind, handle and, when isolane's TBF, its parameters."""
    with open_netns(netns) as ipr:
        return {dev: (*root_qdisc(ipr, link_index(ipr, dev))[:2], read_tbf(ipr, dev)) for dev in devices}


def test_apply_builds_the_plan_and_a_second_apply_changes_nothing(clean: None) -> None:
    plan = _plan()
    changes = apply_tbf(plan, A)
    assert [c.split(" with TBF")[0] for c in changes] == [f"replace the root qdisc (noqueue) of {dev}" for dev in DEVICES]
    state = _state()
    assert state == {q.dev: ("tbf", 0x1_0000, q.as_kernel()) for q in plan.qdiscs}
    assert state["vx100"][2] == KernelTbf(6_250_000_000, 15625, 6_250_000 + 62_500_000, 14 + 20 + 8 + 8 + 20)  # read back through TCA_TBF_RATE64
    assert state["vx300"][2].overhead == 14 + 40 + 8 + 8 + 20  # type: ignore[union-attr]  # the IPv6 underlay's headers
    assert apply_tbf(plan, A) == []
    assert _state() == state


def test_a_changed_policy_changes_in_place_and_deletes_roots_no_tenant_has(clean: None) -> None:
    apply_tbf(_plan(), A)
    training = {**POLICY["tenants"][0], "vnis": [100]}
    changed = {**POLICY, "tenants": [training, {"name": "inference", "vnis": [300], "rate": "40Mbps"}]}
    changes = apply_tbf(_plan(changed), A)
    assert [c.split(":")[0] for c in changes] == ["change the TBF root of vx300", "delete the TBF root of vx200 (no tenant's)"]
    after = _state()
    assert after["vx200"] == ("noqueue", 0, None)
    assert after["vx300"][2] == next(q for q in _plan(changed).qdiscs if q.dev == "vx300").as_kernel()
    assert apply_tbf(_plan(changed), A) == []


def test_remove_puts_the_default_qdisc_back_once_and_leaves_other_roots_alone(clean: None) -> None:
    apply_tbf(_plan(), A)
    run("tc", "-n", A, "qdisc", "replace", "dev", "vx200", "root", "handle", "2:", "pfifo")  # another program's root
    assert remove_tbf(None, A) == ["vx100", "vx300"]
    assert {dev: kind for dev, (kind, _, _) in _state().items()} == {"vx100": "noqueue", "vx200": "pfifo", "vx300": "noqueue"}
    assert remove_tbf(None, A) == []
    with pytest.raises(LinuxError, match=r"root qdiscs isolane did not make: vx200 \(pfifo 2:\): remove them first \(nothing was changed\)"):
        apply_tbf(_plan(), A)
    assert _state()["vx100"] == ("noqueue", 0, None)


def test_dry_run_commands_build_the_same_qdiscs(clean: None) -> None:
    plan = _plan()
    apply_tbf(plan, A)
    subprocess.run(["ip", "netns", "del", FRESH], capture_output=True)
    try:
        run("ip", "netns", "add", FRESH)
        for dev in DEVICES:
            run("ip", "-n", FRESH, "link", "add", dev, "type", "vxlan", "id", dev[2:], "dstport", "4789")
        for line in tbf_tc_commands(plan, FRESH):
            run(*line.split())
        assert _state(FRESH) == _state(A)
        assert apply_tbf(plan, FRESH) == []  # apply sees tc's qdiscs as its own
    finally:
        subprocess.run(["ip", "netns", "del", FRESH], capture_output=True)


def test_a_failed_apply_puts_every_device_back_as_it_was(clean: None) -> None:
    """The kernel refuses a TBF whose burst is 0 (the last device); the devices before it had the
    default qdisc and an older TBF of isolane's."""
    apply_tbf(_plan(), A)
    remove_tbf(["vx100"], A)
    before = _state()
    faster = {**POLICY, "tenants": [{**POLICY["tenants"][0], "ceil": "60Gbps"}, {"name": "inference", "vnis": [300], "rate": "40Mbps"}]}
    plan = _plan(faster)
    broken = dataclasses.replace(plan, qdiscs=(*plan.qdiscs[:2], dataclasses.replace(plan.qdiscs[2], burst=0)))
    with pytest.raises(LinuxError, match="change the TBF root of vx300: .*Invalid argument") as raised:
        apply_tbf(broken, A)
    assert not isinstance(raised.value, RollbackFailed)
    assert _state() == before


def _another_program_at(step: str, command: tuple[str, ...], monkeypatch: pytest.MonkeyPatch) -> None:
    """Runs ``command`` (another program, through its own netlink socket) just before isolane sends
    the request ``step``. Only isolane's own ``request`` is wrapped: every refusal comes from the kernel."""
    real: Callable[..., None] = transaction_module.request

    def request_after(ipr: Any, message: Any, msg_type: int, flags: int, doing: str) -> None:
        if doing.startswith(step):
            run(*command)
        real(ipr, message, msg_type, flags, doing)

    monkeypatch.setattr(transaction_module, "request", request_after)


def test_a_rollback_that_fails_says_what_is_left_and_how_to_clean_up(clean: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """vx300's TBF is refused (burst 0); just before, another program replaced vx100's new TBF
    root with its own pfifo, so the kernel refuses to delete isolane's root there (the delete names
    handle and kind). vx200 is put back; vx100 keeps the other program's root."""
    plan = _plan()
    broken = dataclasses.replace(plan, qdiscs=(*plan.qdiscs[:2], dataclasses.replace(plan.qdiscs[2], burst=0)))
    _another_program_at(
        "replace the root qdisc (noqueue) of vx300", ("tc", "-n", A, "qdisc", "replace", "dev", "vx100", "root", "handle", "2:", "pfifo"), monkeypatch
    )
    with pytest.raises(RollbackFailed) as raised:
        apply_tbf(broken, A)
    err = raised.value
    assert "replace the root qdisc (noqueue) of vx300 with TBF" in str(err.cause) and "Invalid argument" in str(err.cause)
    assert err.devices == ("vx100",)
    assert err.failures == [("vx100", "deleting the TBF root of vx100: Invalid argument")]
    assert err.cleanup == (f"isolane linux remove --netns {A} --mode tbf --dev vx100, then check tc -n {A} qdisc show dev vx100",)
    assert "rolling back failed too, so vx100 may not be as before (vx100: deleting the TBF root of vx100: Invalid argument)" in str(err)
    assert "\n" not in str(err)
    assert {dev: (kind, handle) for dev, (kind, handle, _) in _state().items()} == {
        "vx100": ("pfifo", 0x2_0000),
        "vx200": ("noqueue", 0),
        "vx300": ("noqueue", 0),
    }


def test_a_device_that_vanishes_mid_apply_is_named_in_the_report(clean: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """vx150 (made here) gets its TBF, then vanishes just before vx300's TBF is refused (burst 0):
    the kernel refuses the undo step on vx150 (no such device); vx100 is put back."""
    run("ip", "-n", A, "link", "add", "vx150", "type", "vxlan", "id", "150", "dstport", "4789", "local", "192.0.2.1", "remote", "192.0.2.2", "dev", "va0")
    try:
        plan = _plan({**POLICY, "tenants": [{**POLICY["tenants"][0], "vnis": [100, 150]}, POLICY["tenants"][1]]})
        assert [q.dev for q in plan.qdiscs] == ["vx100", "vx150", "vx300"]
        broken = dataclasses.replace(plan, qdiscs=(*plan.qdiscs[:2], dataclasses.replace(plan.qdiscs[2], burst=0)))
        _another_program_at("replace the root qdisc (noqueue) of vx300", ("ip", "-n", A, "link", "del", "vx150"), monkeypatch)
        with pytest.raises(RollbackFailed) as raised:
            apply_tbf(broken, A)
        assert raised.value.failures == [("vx150", "deleting the TBF root of vx150: No such device")]
        assert _state(devices=("vx100", "vx300")) == {"vx100": ("noqueue", 0, None), "vx300": ("noqueue", 0, None)}
    finally:
        subprocess.run(["ip", "-n", A, "link", "del", "vx150"], capture_output=True)


def test_an_htb_rollback_that_fails_says_what_is_left_and_how_to_clean_up(clean: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """HTB refuses a class of another qdisc (2:5, last); just before, another program replaced
    va0's new HTB root with its own pfifo, taking isolane's classes and filters with it: every
    undo step fails in the kernel, the root's delete because the root is no longer isolane's."""
    plan = plan_htb(Policy.from_dict(POLICY))
    refused = HtbClass(0x2_0005, 0x1_0001, 1000, 1000, 9216, 9216, 1000, 1000, 0, "class")
    broken = dataclasses.replace(plan, classes=(*plan.classes, refused))
    _another_program_at("add class 2:5", ("tc", "-n", A, "qdisc", "replace", "dev", "va0", "root", "handle", "2:", "pfifo"), monkeypatch)
    try:
        with pytest.raises(RollbackFailed) as raised:
            apply_plan(broken, "va0", A)
        err = raised.value
        undone = 1 + len(plan.classes)  # the root and the classes before 2:5 (filters come after the classes)
        assert err.devices == ("va0",) and len(err.failures) == undone
        assert err.failures[-1] == ("va0", "deleting the HTB root of va0: Invalid argument")
        assert f"and {undone - 3} more undo steps failed" in str(err)
        assert err.cleanup == (f"isolane linux remove --netns {A} --dev va0, then check tc -n {A} qdisc show dev va0",)
        with open_netns(A) as ipr:
            assert root_qdisc(ipr, link_index(ipr, "va0"))[:2] == ("pfifo", 0x2_0000)  # the other program's, left alone
        assert remove("va0", A) is False
    finally:
        subprocess.run(["tc", "-n", A, "qdisc", "del", "dev", "va0", "root"], capture_output=True)


def test_tbf_holds_a_tenant_offered_above_its_ceiling_to_it(clean: None) -> None:
    """While the tenant's queue stays full, its vxlan device's TBF passes, counted as the policy
    counts (inner frame + the tunnel's 50 B + 20 B for count wire), its ceiling (within 5%)."""
    ceiling_bps = 20_000_000
    policy = {"count": "wire", "tenants": [{"name": "capped", "vnis": [100], "rate": "10Mbps", "ceil": "20Mbps"}]}
    plan = _plan(policy)
    apply_tbf(plan, A)
    overhead = plan.qdiscs[0].overhead

    def charged() -> tuple[int, float]:
        row = read_tbf_stats(plan, A)[0]
        return row["bytes"] + row["packets"] * overhead, time.monotonic()

    flood = subprocess.Popen(["ip", "netns", "exec", A, sys.executable, "-c", FLOOD, OVERLAYS[100][2], "2.0"])
    try:
        time.sleep(0.5)  # the queue fills
        start_bytes, start = charged()
        time.sleep(1.0)
        end_bytes, end = charged()
        row = read_tbf_stats(plan, A)[0]
    finally:
        flood.wait(timeout=10)
    assert row["backlog_packets"] > 0 and row["overlimits"] > 0  # still offered above the ceiling when measured
    delivered_bps = (end_bytes - start_bytes) * 8 / (end - start)
    assert abs(delivered_bps - ceiling_bps) / ceiling_bps < 0.05, delivered_bps


def test_stats_count_each_tenants_packets_on_its_devices(clean: None) -> None:
    plan = _plan()
    apply_tbf(plan, A)
    poller = StatsPoller(plan, netns=A)
    before = {row["dev"]: row for row in poller.read()}
    run("ip", "netns", "exec", A, sys.executable, "-c", _SENDER, *(f"{OVERLAYS[vni][2]},{n}" for vni, n in ((100, 7), (200, 5), (300, 3))))
    after = {row["dev"]: row for row in poller.read()}
    inner_frame = 14 + 20 + 8 + 100  # what the vxlan device passes: Ethernet, IPv4, UDP, payload
    for dev, count in (("vx100", 7), ("vx200", 5), ("vx300", 3)):
        assert (after[dev]["packets"] - before[dev]["packets"], after[dev]["bytes"] - before[dev]["bytes"]) == (count, count * inner_frame)
    assert [(row["tenant"], row["classid"], row["role"], row["cls"]) for row in after.values()] == [("training", "1:", "tenant", None)] * 2 + [
        ("inference", "1:", "tenant", None)
    ]


_SENDER = """
import socket, sys
for spec in sys.argv[1:]:
    address, count = spec.split(",")
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        for _ in range(int(count)):
            s.sendto(b"x" * 100, (address, 5001))
"""


def test_the_command_line_applies_reads_and_removes_tbf(clean: None, tmp_path: Any, capsys: pytest.CaptureFixture[str]) -> None:
    policy = tmp_path / "policy.yaml"
    policy.write_text(json.dumps({**POLICY, "tenants": [*POLICY["tenants"], {"name": "elsewhere", "vnis": [999], "ceil": "1Gbps"}]}))
    options = ["--netns", A, "--policy", str(policy), "--mode", "tbf"]
    assert main(["linux", "apply", *options, "--dry-run"]) == 0
    out, err = capsys.readouterr()
    assert out.splitlines() == tbf_tc_commands(_plan(), A)
    assert "isolane: warning: not enforced by the kernel: tenants[2]: no vxlan device here has its VNIs (999): nothing enforces elsewhere" in err
    assert _state()["vx100"][0] == "noqueue"  # a dry run changes nothing
    assert main(["linux", "apply", *options]) == 0
    assert capsys.readouterr().out.count("replace the root qdisc (noqueue) of vx") == 3
    assert main(["linux", "apply", *options]) == 0
    assert capsys.readouterr().out == "vx100, vx200, vx300: already as the policy says, nothing changed\n"
    assert main(["linux", "stats", *options, "--json"]) == 0
    assert [(row["dev"], row["tenant"]) for row in json.loads(capsys.readouterr().out)] == [
        ("vx100", "training"),
        ("vx200", "training"),
        ("vx300", "inference"),
    ]
    assert main(["linux", "stats", *options]) == 0
    assert capsys.readouterr().out.splitlines()[0].split()[:3] == ["device", "tenant", "/"]
    assert main(["linux", "remove", "--netns", A, "--mode", "tbf", "--dev", "vx200"]) == 0
    assert capsys.readouterr().out == "vx200: isolane's TBF root deleted, back to the default qdisc\n"
    assert main(["linux", "remove", "--netns", A, "--mode", "tbf"]) == 0
    assert capsys.readouterr().out.splitlines() == [f"{dev}: isolane's TBF root deleted, back to the default qdisc" for dev in ("vx100", "vx300")]
    assert main(["linux", "remove", "--netns", A, "--mode", "tbf"]) == 0
    assert capsys.readouterr().out == "no isolane TBF root, nothing changed\n"
    nowhere = tmp_path / "nowhere.yaml"
    nowhere.write_text("tenants: [{name: x, vnis: [999], ceil: 1Gbps}]\n")
    assert main(["linux", "apply", "--netns", A, "--policy", str(nowhere), "--mode", "tbf"]) == 2
    assert "isolane: error: tenants: no tenant has a vxlan device here (their VNIs: 999; the devices' VNIs: 100, 200, 300)" in capsys.readouterr().err
    assert main(["linux", "apply", "--netns", A, "--policy", str(policy)]) == 2
    assert "--dev: the underlay device is needed in htb mode" in capsys.readouterr().err
