"""The incident isolane exists for, as a test (docs/bursts.md, "Polled counters, beside the
truth"): a tenant loses 2% of its packets at a shared egress port that its operator's counters,
polled every second (or every 100 ms), show as nearly idle with an empty queue. The losses come
from 10-20 us incast bursts that overflow the tenant's own queue at the port; the buffer as a
whole never fills. The polled views miss them; the truth (rate and queue events) shows each.

Run with ``pytest -s`` to see the polled views beside the truth."""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np

import isolane
from isolane import Engine, Policy
from support.burst_traffic import Burst, make_trace, policy_for

LINE_BPS = 100_000_000_000
SECOND, MS = 1_000_000_000, 1_000_000
NAMES = ["victim", "web", "db", "batch", "cache"]
BURSTS, SENDERS, SENDER_BPS = 12, 4, 50_000_000_000  # incast: 4 senders at 50 Gbit/s into a 100 Gbit/s port
VICTIM_THRESHOLD_BPS = 20_000_000_000  # 200% of its 10 Gbit/s guarantee


def incident() -> tuple[Any, dict[str, Any]]:
    """1.5 s at a 100 Gbit/s port with a 4 MiB buffer shared per tenant at alpha 1/128, so one
    queue may hold about 4 MiB / 129 = 32 KB. Five tenants send smooth 1500 B frames at
    500 Mbit/s each (2.5% of the line together). The victim also gets 12 incast bursts of 10 to
    20 us, 4 flows at 50 Gbit/s each: 200 Gbit/s into the line's 100, so its queue fills in
    about 3 us and then drops half of what comes. Each burst starts in the first half of a
    millisecond, so none is near a 100 ms poll instant."""
    rng = np.random.default_rng(2024)
    starts = np.sort(rng.choice(np.arange(1, 1499), BURSTS, replace=False)) * MS + rng.integers(0, MS // 2, BURSTS)
    bursts = []
    for start in starts:
        duration = int(rng.integers(10_000, 20_001))
        for sender in range(SENDERS):
            flow = (f"10.0.9.{sender + 1}", "10.0.8.1", 40_000 + sender, 4791, 17)
            bursts.append(Burst(0, flow, int(start), duration, SENDER_BPS))
    trace = make_trace(7, len(NAMES), 3 * SECOND // 2, 500_000_000, bursts, frame_bytes=1500, smooth=True)
    port = {"rate": "100Gbps", "buffer": "4MiB", "alpha": 1 / 128, "microburst": {"window": "10us", "threshold": "50%"}}
    policy = policy_for(trace, None, rate="10Gbps", port=port)
    for name, tenant in zip(NAMES, policy["tenants"]):
        tenant["name"] = name
    policy["tenants"][0]["microburst"] = {"window": "10us", "threshold": "200%", "queue": "16KiB"}
    return trace, policy


def gbps(bps: int) -> str:
    return f"{bps / 1e9:7.2f} Gbps"


def test_bursts_polls_cannot_see_lose_a_tenant_two_percent() -> None:
    trace, policy = incident()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", isolane.PolicyWarning)
        engine = Engine(Policy.from_dict(policy), poll=["1s", "100ms", "1ms"])
    engine.process(trace.batch)
    engine.drain()
    stats = {s["tenant"]: s for s in engine.stats()}
    scopes = {(s["scope"], s["tenant"]): s for s in engine.burst_stats()}
    port, victim = scopes[("port", None)], scopes[("tenant", "victim")]

    # What happened: the victim lost about 2% of its packets, all at its own queue.
    victim_stats = stats["victim"]
    lost = victim_stats["outcomes"]["drop_port_queue"]["packets"]
    assert 0.01 <= lost / victim_stats["packets"] <= 0.03, (lost, victim_stats["packets"])
    assert sum(s["outcomes"]["drop_port_buffer"]["packets"] for s in stats.values()) == 0  # the buffer never filled
    assert all(s["actions"]["drop"] == 0 for name, s in stats.items() if name != "victim")

    # What the polls showed: a port under 10% busy and an empty queue at every poll instant.
    for interval in (SECOND, 100 * MS):
        for view in (port["polls"][interval], victim["polls"][interval]):
            assert view["queue_polls"] > 0 and view["queue_nonzero_polls"] == 0 and view["queue_max_at_polls"] == 0
    assert port["polls"][SECOND]["polls"] == 2 and port["polls"][SECOND]["peak_bps"] < LINE_BPS // 10
    assert port["polls"][SECOND]["peak_utilisation"] == port["polls"][SECOND]["peak_bps"] / LINE_BPS < 0.1
    assert victim["polls"][SECOND]["peak_bps"] < VICTIM_THRESHOLD_BPS // 10  # nowhere near its threshold

    # The truth: a rate event per burst, far above the threshold, its queue at the port filled
    # and every lost packet lost inside a burst.
    events = engine.bursts()
    victim_id = engine.burst_tenants.index("victim")
    mine = events[(events["tenant"] == victim_id) & (events["scope"] == isolane.BurstScope.TENANT)]
    rate = mine[mine["view"] == isolane.BurstView.RATE]
    queue = mine[mine["view"] == isolane.BurstView.QUEUE]
    assert len(rate) == BURSTS == len(queue) == victim["rate_events"] == victim["queue_events"]
    assert victim["peak_window_bps"] > 5 * VICTIM_THRESHOLD_BPS and (rate["peak_bps"] > VICTIM_THRESHOLD_BPS).all()
    assert victim["max_queue_bytes"] > 16 * 1024 and (queue["max_queue_bytes"] > 16 * 1024).all()
    assert int(rate["dropped"].sum()) == int(rate["drop_port_queue"].sum()) == lost
    assert int(queue["drop_port_queue"].sum()) == lost
    burst_starts = trace.start_ns + np.array([b.start_ns for b in trace.bursts[::SENDERS]])
    burst_ends = burst_starts + np.array([b.duration_ns for b in trace.bursts[::SENDERS]])
    assert (rate["start_ns"] >= burst_starts).all() and (rate["start_ns"] < burst_starts + 10_000).all()
    assert (rate["end_ns"] > burst_ends).all() and (rate["end_ns"] <= burst_ends + 10_000).all()
    assert (rate["dropped"] > 0).all()  # every burst cost packets
    flows = engine.burst_flows(rate["id"])
    for event in rate["id"]:  # the incast senders on top, then the victim's background flows if any
        top = flows[(flows["event"] == event) & (flows["rank"] < SENDERS)]
        assert sorted(top["src_port"].tolist()) == [40_000 + s for s in range(SENDERS)]

    print()
    print(f"{'':24}{'polled every 1 s':>26}{'every 100 ms':>26}   {'truth (10 us window)':>40}")
    print(f"{'':24}{'peak rate, queue':>26}{'peak rate, queue':>26}   {'peak rate, deepest queue, bursts, lost':>40}")
    for name, view in (("port", port), ("victim", victim)):
        polled = [f"{gbps(view['polls'][p]['peak_bps'])}, {view['polls'][p]['queue_max_at_polls']:>5} B" for p in (SECOND, 100 * MS)]
        drops = lost if name == "victim" else sum(s["actions"]["drop"] for s in stats.values())
        truth = f"{gbps(view['peak_window_bps'])}, {view['max_queue_bytes']:>6} B, {view['rate_events']:>3}, {drops:>5}"
        print(f"{name:24}{polled[0]:>26}{polled[1]:>26}   {truth:>40}")
    print(f"victim: {lost} of {victim_stats['packets']} packets lost ({lost / victim_stats['packets']:.1%}), all inside its {len(rate)} bursts")
