"""isolane.linux.LiveCapture against the real kernel: VXLAN traffic sent from namespace A is
captured on the underlay veth end vb0 in namespace B (tests/support/netns.py) and counted per VNI,
by isolane's parser and by an engine, exactly as sent; the ring drops nothing at this rate. The
underlay may carry a few packets of its own (IPv6 multicast listener reports): they are counted,
never taken for VXLAN. Waiting, timeouts and Ctrl-C are tried on B's loopback, where nothing
travels. Errors: no such device, no such namespace, no privileges. Skipped, saying why, without
root or the kernel features."""

from __future__ import annotations

import shutil
import signal
import subprocess
import sys
import threading
import time
from collections import Counter

import numpy as np
import pytest

import isolane
from isolane import Engine, PacketBatch, Policy, Tunnel
from isolane.linux import CaptureError, LiveCapture, apply_plan, plan_htb, remove

pytest.importorskip("pyroute2")  # tests/support/netns.py probes the kernel with it

from support.kernel_htb import htb_counts  # noqa: E402
from support.netns import OVERLAYS, TAG, A, B, run, send  # noqa: E402
from support.signals import interruptible  # noqa: E402

#: (VNI, datagrams, payload bytes) sent from A, one row per VXLAN device.
SENT = [(100, 120, 100), (200, 80, 1000), (300, 50, 1300)]
#: The frame's bytes besides the payload: outer Ethernet, IP (v4: 20, v6: 40), UDP, VXLAN, then
#: inner Ethernet, IPv4 and UDP.
OVERHEAD = {"4": 14 + 20 + 8 + 8 + 14 + 20 + 8, "6": 14 + 40 + 8 + 8 + 14 + 20 + 8}
POLICY = {
    "port": {"rate": "10Gbps", "buffer": "4MiB"},
    "tenants": [{"name": "hundred", "vnis": [100]}, {"name": "two-hundred", "vnis": [200]}, {"name": "three-hundred", "vnis": [300]}],
}
TENANT = {100: "hundred", 200: "two-hundred", 300: "three-hundred"}


def _capture_sent(**options: object) -> tuple[list[PacketBatch], isolane.linux.LiveStats]:
    """Sends SENT from A while capturing what reaches vb0 in B, until every datagram came (or 5 s)."""
    expected = sum(count for _, count, _ in SENT)
    batches: list[PacketBatch] = []
    with LiveCapture("vb0", B, direction="in", block_size=256 << 10, blocks=16, duration=5.0, **options) as capture:  # type: ignore[arg-type]
        send(*((OVERLAYS[vni][2], count, size) for vni, count, size in SENT))
        vxlan = 0
        for batch in capture:
            batches.append(batch)
            vxlan += int((isolane.parse(batch)["tunnel"] == Tunnel.VXLAN).sum())
            if vxlan >= expected:
                break
    return batches, capture.stats()


def test_every_datagram_sent_is_captured_once_per_vni_with_its_bytes(pair: None) -> None:
    batches, stats = _capture_sent()
    records = np.concatenate([isolane.parse(batch) for batch in batches])
    vxlan = records["tunnel"] == Tunnel.VXLAN
    assert Counter(records["vni"][vxlan].tolist()) == {vni: count for vni, count, _ in SENT}
    underlay_own = records[~vxlan]
    assert not ((underlay_own["proto"] == 17) & (underlay_own["dst_port"] == 4789)).any()
    for vni, count, size in SENT:
        lengths = np.concatenate([batch.lengths for batch in batches])[vxlan & (records["vni"] == vni)]
        assert lengths.tolist() == [OVERHEAD[OVERLAYS[vni][0]] + size] * count, vni
    wire = np.concatenate([batch.wire_lengths for batch in batches])
    assert (wire == np.concatenate([batch.lengths for batch in batches])).all()
    timestamps = np.concatenate([batch.timestamps_ns for batch in batches])
    assert (np.diff(timestamps) >= 0).all() and abs(timestamps[0] / 1e9 - time.time()) < 60  # the kernel's real time
    assert all(batch.link_type == 1 for batch in batches)
    assert (stats.packets, stats.delivered, stats.drops, stats.skipped) == (len(records), len(records), 0, 0)
    assert stats.blocks >= 1


def test_an_engine_fed_live_batches_counts_each_tenants_packets_exactly(pair: None) -> None:
    batches, stats = _capture_sent(snaplen=128)  # headers are enough to classify; wire lengths keep the sizes
    engine = Engine(Policy.from_dict(POLICY))
    for batch in batches:
        engine.process(batch)
    counters = engine.counters()
    for vni, count, size in SENT:
        frame = OVERHEAD[OVERLAYS[vni][0]] + size
        assert (counters[TENANT[vni]]["packets"], counters[TENANT[vni]]["bytes"]) == (count, count * frame), vni
    assert sum(counts["packets"] for counts in counters.values()) == stats.delivered  # the underlay's own: no tenant's
    assert all((batch.lengths <= 128).all() for batch in batches) and stats.drops == 0


def test_the_kernels_htb_classes_and_an_engine_on_the_live_capture_agree_per_tenant(pair: None) -> None:
    """Issue 19's differential test: the same traffic counted by the kernel, in each tenant's HTB
    class on A's egress (va0, u32 filters on the VNI), and by isolane, on what vb0 captured."""
    plan = plan_htb(Policy.from_dict(POLICY))
    apply_plan(plan, "va0", A)
    try:
        before = htb_counts(plan)
        batches, _ = _capture_sent()
        after = htb_counts(plan)
    finally:
        remove("va0", A)
    engine = Engine(Policy.from_dict(POLICY))
    for batch in batches:
        engine.process(batch)
    counters = engine.counters()
    for number, (vni, count, size) in enumerate(SENT, 1):  # the policy's tenants, in SENT's order
        classid = f"1:{number:x}00"
        kernel = (after[classid][0] - before[classid][0], after[classid][1] - before[classid][1])
        assert kernel == (count, count * (OVERHEAD[OVERLAYS[vni][0]] + size)), classid
        assert (counters[TENANT[vni]]["packets"], counters[TENANT[vni]]["bytes"]) == kernel, TENANT[vni]


def _quiet(**options: object) -> LiveCapture:
    """A capture on B's loopback, where nothing travels."""
    return LiveCapture("lo", B, block_size=64 << 10, blocks=2, **options)  # type: ignore[arg-type]


def test_a_duration_ends_the_iteration_of_a_quiet_device(pair: None) -> None:
    start = time.monotonic()
    with _quiet(duration=0.3) as capture:
        assert list(capture) == []
    assert 0.3 <= time.monotonic() - start < 3
    assert capture.closed and capture.stats().packets == 0


def test_waiting_releases_the_gil(pair: None) -> None:
    ticks = 0
    waiting = True

    def count() -> None:
        nonlocal ticks
        while waiting:
            ticks += 1
            time.sleep(0.001)

    counter = threading.Thread(target=count)
    with _quiet() as capture:
        counter.start()
        try:
            assert capture.next_batch(0.3) is None
        finally:
            waiting = False
            counter.join()
    assert ticks > 50  # the other thread ran all along (about 300 ticks of 1 ms)


WAIT_FOREVER = """
import sys
from isolane.linux import LiveCapture
with LiveCapture("lo", sys.argv[1], block_size=65536, blocks=2) as capture:
    print("waiting", flush=True)
    try:
        capture.next_batch()
    except KeyboardInterrupt:
        print("interrupted", flush=True)
"""


def test_ctrl_c_interrupts_a_wait_without_a_timeout(pair: None) -> None:
    waiter = subprocess.Popen([sys.executable, "-c", WAIT_FOREVER, B], stdout=subprocess.PIPE, text=True, preexec_fn=interruptible)
    try:
        assert waiter.stdout is not None and waiter.stdout.readline() == "waiting\n"
        time.sleep(0.2)
        sent = time.monotonic()
        waiter.send_signal(signal.SIGINT)
        assert waiter.wait(timeout=10) == 0
        assert time.monotonic() - sent < 1.0  # within a wait slice (100 ms), with room for a busy machine
        assert waiter.stdout.read() == "interrupted\n"
    finally:
        waiter.kill()


def test_a_device_or_namespace_that_is_not_there_is_named(pair: None) -> None:
    with pytest.raises(CaptureError, match=f"^no device 'nope0' in network namespace '{B}': No such device$") as raised:
        LiveCapture("nope0", B)
    assert isinstance(raised.value, OSError) and raised.value.errno == 19
    with pytest.raises(CaptureError, match=f"^no network namespace '{TAG}-absent' \\(see ip netns list\\)"):
        LiveCapture("vb0", f"{TAG}-absent")
    with pytest.raises(isolane.EngineError, match="direction must be 'both', 'in' or 'out', not 'up'"):
        LiveCapture("vb0", B, direction="up")


def test_a_device_deleted_while_captured_ends_the_iteration_with_an_error(pair: None) -> None:
    run("ip", "-n", B, "link", "add", "gone0", "type", "veth", "peer", "name", "gone1")
    run("ip", "-n", B, "link", "set", "gone0", "up")
    with LiveCapture("gone0", B, block_size=64 << 10, blocks=2) as capture:
        run("ip", "-n", B, "link", "del", "gone0")  # down first, then gone: the socket holds ENETDOWN
        start = time.monotonic()
        with pytest.raises(CaptureError, match="^capturing on 'gone0' stopped: Network is down$"):
            for _ in capture:
                pass
    assert time.monotonic() - start < 1.0  # at once, not after spinning through waits


def test_a_closed_capture_says_so(pair: None) -> None:
    capture = _quiet()
    capture.close()
    capture.close()
    with pytest.raises(CaptureError, match="the capture on 'lo' is closed"):
        capture.next_batch(0.01)


PROBE = """
import sys
from isolane.linux import CapturePermissionError, LiveCapture
try:
    LiveCapture(*sys.argv[1:])
except CapturePermissionError as err:
    assert isinstance(err, PermissionError)
    print(err)
"""


def test_without_privileges_capturing_says_what_needs_root(pair: None) -> None:
    """In a user namespace of its own, a process has no capabilities over the host's network."""
    if shutil.which("unshare") is None or subprocess.run(["unshare", "--user", "true"], capture_output=True).returncode != 0:
        pytest.skip("needs util-linux's unshare and user namespaces")
    here = subprocess.run(["unshare", "--user", sys.executable, "-c", PROBE, "lo"], capture_output=True, text=True, check=True)
    assert here.stdout == "cannot open an AF_PACKET socket (capturing needs CAP_NET_RAW, in practice root): Operation not permitted\n"
    there = subprocess.run(["unshare", "--user", sys.executable, "-c", PROBE, "vb0", B], capture_output=True, text=True, check=True)
    assert there.stdout == f"cannot enter network namespace '{B}' (that needs CAP_SYS_ADMIN, in practice root): Operation not permitted\n"
