"""isolane on live traffic against the kernel's own enforcement, in the namespaces of
tests/support/netns.py (skipped, saying why, without root or the kernel's features):

- enforcement: UDP offered well above a tenant's ceiling, the rate the kernel's HTB class delivers
  and the rate isolane's shaper releases for the same offered traffic (mirrored before the qdisc
  and captured live) agree within 5%;
- ``isolane linux live``: the report of a live capture, and its Prometheus endpoint while it
  runs."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator

import numpy as np
import pytest

pytest.importorskip("pyroute2")

from isolane import Engine, Outcome, PacketBatch  # noqa: E402
from isolane.cli import main  # noqa: E402
from isolane.linux import LiveCapture, apply_plan, plan_htb  # noqa: E402
from isolane.policy import Policy  # noqa: E402
from support.kernel_htb import htb_counts  # noqa: E402
from support.netns import OVERLAYS, A, B, run, send  # noqa: E402
from support.signals import interruptible  # noqa: E402

POLICY = {
    "count": "wire",  # HTB charges frame + 20 B (its overhead), as isolane's wire count does
    "port": {"rate": "10Gbps", "buffer": "4MiB"},
    "tenants": [
        {"name": "training", "vnis": [100], "rate": "1Gbps", "classes": [{"name": "bulk"}, {"name": "control"}]},
        {"name": "inference", "vnis": [300], "rate": "1Gbps"},
    ],
}
CEILING_BPS = 20_000_000
CAPPED = {
    "count": "wire",
    "port": {"rate": "10Gbps", "buffer": "4MiB"},
    "tenants": [{"name": "capped", "vnis": [100], "rate": "10Mbps", "ceil": "20Mbps", "shaper": {"max_delay": "50ms"}}],
}


def _read_until_quiet(capture: LiveCapture, into: list[PacketBatch]) -> None:
    """Batches as they come (a ring left unread fills in blocks_count x block_timeout: 0.64 s),
    until nothing came for a second, after a first packet."""
    while (batch := capture.next_batch(5.0 if not into else 1.0)) is not None:
        into.append(batch)


MIRROR = ("vm0", "vm1")
SHAPER_DROPS = [Outcome.DROP_SHAPER_BYTES, Outcome.DROP_SHAPER_TIME]


@pytest.fixture
def mirrored(clean: None) -> Iterator[None]:
    """va0's offered traffic (before its qdisc: clsact's egress hook) mirrored to vm0, captured on vm1."""
    run("ip", "-n", A, "link", "add", MIRROR[0], "type", "veth", "peer", "name", MIRROR[1])
    for dev in MIRROR:
        run("ip", "-n", A, "link", "set", dev, "up")
    run("tc", "-n", A, "qdisc", "add", "dev", "va0", "clsact")
    try:
        run("tc", "-n", A, "filter", "add", "dev", "va0", "egress", "protocol", "all", "prio", "1", "u32", "match", "u32", "0", "0",
            "action", "mirred", "egress", "mirror", "dev", MIRROR[0])  # fmt: skip
        yield
    finally:
        subprocess.run(["tc", "-n", A, "qdisc", "del", "dev", "va0", "clsact"], capture_output=True)
        subprocess.run(["ip", "-n", A, "link", "del", MIRROR[0]], capture_output=True)


PACED = """
import socket, sys, time
rate_pps, seconds = float(sys.argv[2]), float(sys.argv[3])
start = time.monotonic()
sent = 0
with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
    while (now := time.monotonic()) < start + seconds:
        while sent < (now - start) * rate_pps:
            s.sendto(b"z" * 1000, (sys.argv[1], 5001))
            sent += 1
        time.sleep(0.001)
"""


def test_isolanes_shaper_releases_what_htb_delivers_of_traffic_above_the_ceiling(mirrored: None) -> None:
    """About 4x the ceiling is offered for 3 s; the HTB class's leaf queue is short (va0's
    txqueuelen 20), so the excess is dropped at the qdisc instead of slowing the sender."""
    policy = Policy.from_dict(CAPPED)
    run("ip", "-n", A, "link", "set", "va0", "txqueuelen", "20")
    plan = plan_htb(policy)
    apply_plan(plan, "va0", A)
    offered: list[PacketBatch] = []
    frame = 14 + 20 + 8 + 8 + 14 + 20 + 8 + 1000
    rate_pps = 4 * CEILING_BPS / 8 / (frame + 20)
    with LiveCapture(MIRROR[1], netns=A, direction="in") as capture:
        reader = threading.Thread(target=_read_until_quiet, args=(capture, offered))
        reader.start()
        sender = subprocess.Popen(["ip", "netns", "exec", A, sys.executable, "-c", PACED, OVERLAYS[100][2], str(rate_pps), "3.0"])
        try:
            time.sleep(1.0)  # the queue is full
            start_bytes, start = htb_counts(plan)["1:100"][1], time.monotonic()
            time.sleep(1.5)
            end_bytes, end = htb_counts(plan)["1:100"][1], time.monotonic()
        finally:
            sender.wait(timeout=15)
            reader.join(timeout=15)
        assert capture.stats().drops == 0
    kernel_bps = (end_bytes - start_bytes) * 8 / (end - start)
    isolane_bps, offered_bps = _released_rate(policy, offered)
    assert offered_bps > 3 * CEILING_BPS, offered_bps
    assert abs(kernel_bps - CEILING_BPS * frame / (frame + 20)) / CEILING_BPS < 0.05, kernel_bps
    assert abs(isolane_bps - kernel_bps) / kernel_bps < 0.05, (isolane_bps, kernel_bps)


def _released_rate(policy: Policy, batches: list[PacketBatch]) -> tuple[float, float]:
    """The frame bytes per second isolane's shaper releases of the capped tenant's traffic, in the
    capture's time from 1 s to 2.5 s after its first packet; and the rate offered over the whole."""
    engine = Engine(policy)
    times, lengths, releases, tenants = [], [], [], []
    for batch in batches:
        rows = engine.process(batch)
        times.append(batch.timestamps_ns)
        lengths.append(batch.wire_lengths)
        releases.append(np.where(np.isin(rows["outcome"], SHAPER_DROPS), -1, rows["release_ns"]))  # the port decides later
        tenants.append(rows["tenant"])
    time_ns, wire, release, tenant = (np.concatenate(column) for column in (times, lengths, releases, tenants))
    mine = tenant == 0
    first, last = int(time_ns[mine].min()), int(time_ns[mine].max())
    window = (release >= first + 1_000_000_000) & (release < first + 2_500_000_000) & mine
    released_bps = int(wire[window].sum()) * 8 / 1.5
    offered_bps = int(wire[mine].sum()) * 8 / ((last - first) / 1e9)
    return released_bps, offered_bps


def test_the_live_command_reports_and_serves_metrics_while_it_runs(pair: None, tmp_path) -> None:  # type: ignore[no-untyped-def]
    policy = tmp_path / "policy.json"
    policy.write_text(json.dumps(POLICY))
    out = tmp_path / "report.json"
    command = [sys.executable, "-m", "isolane.cli", "linux", "live", "--netns", B, "--dev", "vb0", "--direction", "in", "--policy", str(policy)]
    live = subprocess.Popen(
        [*command, "--duration", "4s", "--json", "-o", str(out), "--metrics", "127.0.0.1:0"], stderr=subprocess.PIPE, text=True
    )
    try:
        address = _served_address(live)
        send((OVERLAYS[100][2], 30, 300), (OVERLAYS[300][2], 12, 500))
        scraped = _scrape_until(address, lambda packets: packets.get("training") == 30 and packets.get("inference") == 12)
    finally:
        _, err = live.communicate(timeout=30)
    assert live.returncode == 0, err
    report = json.loads(out.read_text())
    packets = {t["tenant"]: t["packets"] for t in report["tenants"]}
    assert (packets["training"], packets["inference"]) == (30, 12)
    assert report["format"] == "live capture (AF_PACKET, TPACKET_V3)"
    assert scraped == {name: count for name, count in packets.items() if name}  # served while running: what the report says at the end


def _served_address(live: subprocess.Popen[str]) -> str:
    """The metrics URL the command prints on stderr when it starts serving."""
    assert live.stderr is not None
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        line = live.stderr.readline()
        if "serving metrics at " in line:
            return line.split("serving metrics at ", 1)[1].strip()
        if not line and live.poll() is not None:
            break
    raise AssertionError("the live command never said where it serves its metrics")


def _scrape_until(url: str, done: Callable[[dict[str, int]], bool]) -> dict[str, int]:
    """Packets by tenant in isolane_packets_total, scraped until ``done`` says so (the engine sees
    a block once the kernel hands it over) or 10 s passed."""
    from prometheus_client.parser import text_string_to_metric_families

    deadline = time.monotonic() + 10
    while True:
        with urllib.request.urlopen(url, timeout=10) as response:
            text = response.read().decode()
        packets: dict[str, int] = {}
        for family in text_string_to_metric_families(text):
            if family.name == "isolane_packets":
                for sample in family.samples:
                    if sample.name == "isolane_packets_total" and sample.labels["tenant"]:
                        packets[sample.labels["tenant"]] = packets.get(sample.labels["tenant"], 0) + int(sample.value)
        if done(packets) or time.monotonic() > deadline:
            return packets
        time.sleep(0.1)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (["--dev", "lo", "--duration", "0s"], "--duration '0s' is not above 0"),
        (["--dev", "lo", "--duration", "5 parsecs"], "'5 parsecs'"),
        (["--dev", "lo", "--count", "0"], "--count 0 is not at least 1"),
        (["--dev", "lo", "--duration", "1s", "--metrics", "localhost:http"], "'localhost:http'"),
        (["--dev", "nope0", "--duration", "1s"], "'nope0'"),
    ],
)
def test_the_live_command_refuses_bad_options_in_one_line(tmp_path, capsys, options: list[str], message: str) -> None:  # type: ignore[no-untyped-def]
    """Before any capture starts: nothing is served, nothing is captured."""
    policy = tmp_path / "policy.json"
    policy.write_text(json.dumps(POLICY))
    assert main(["linux", "live", "--policy", str(policy), *options]) == 2
    err = capsys.readouterr().err
    assert err.startswith("isolane: error: ") and message in err and err.count("\n") == 1, err


def test_ctrl_c_stops_the_live_command_and_it_still_reports(pair: None, tmp_path) -> None:  # type: ignore[no-untyped-def]
    policy = tmp_path / "policy.json"
    policy.write_text(json.dumps(POLICY))
    command = [sys.executable, "-m", "isolane.cli", "linux", "live", "--netns", B, "--dev", "vb0", "--direction", "in", "--policy", str(policy), "--json"]
    # The metrics say when the ring is open and when the engine has seen the packets: no sleep
    # to guess either on a busy machine.
    live = subprocess.Popen([*command, "--metrics", "127.0.0.1:0"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=interruptible)
    try:
        address = _served_address(live)
        send((OVERLAYS[100][2], 7, 100))
        seen = _scrape_until(address, lambda packets: packets.get("training") == 7)
    finally:
        live.send_signal(signal.SIGINT)
        out, err = live.communicate(timeout=30)
    assert seen.get("training") == 7, "the engine saw the packets before Ctrl-C"
    assert live.returncode == 0, err
    report = json.loads(out)
    assert {t["tenant"]: t["packets"] for t in report["tenants"]}["training"] == 7
    assert "the capture was stopped by Ctrl-C" in err
