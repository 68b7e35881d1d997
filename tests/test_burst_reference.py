"""The microburst reference (support/burst_reference.py) on tiny traces worked out by hand from
docs/bursts.md, and the burst traffic generator (support/burst_traffic.py)."""

from __future__ import annotations

import math
import time

import numpy as np
import pytest

import isolane
from isolane.codes import Outcome
from support.burst_reference import (
    CLASS,
    EVENT_FIELDS,
    PORT,
    RATE,
    TENANT,
    BurstReference,
    Event,
    ScopeSpec,
    flow_key,
    flow_rows,
    scopes_from_dict,
    to_array,
)  # fmt: skip
from support.burst_traffic import Burst, make_trace, policy_for, write_pcap

W = 1000  # ns
T = 8_000_000_000  # bit/s: L = T x W / 8e9 = 1000 bytes


def tenant_reference(window: int = W, threshold: int = T, **kw) -> BurstReference:
    return BurstReference([ScopeSpec(TENANT, 0, -1, window, threshold)], **kw)


def feed(ref: BurstReference, packets: list[tuple[int, int]], **kw) -> list[Event]:
    times, sizes = zip(*packets)
    return ref.process(list(times), list(sizes), **kw)


def brief(event: Event) -> tuple[int, int, int, int, int]:
    return event.start_ns, event.end_ns, event.packets, event.bytes, event.peak_bps


def test_limit_is_floored() -> None:
    assert ScopeSpec(TENANT, 0, -1, 1000, 8_000_000_000).limit == 1000
    assert ScopeSpec(TENANT, 0, -1, 1000, 8_000_000_007).limit == 1000
    assert ScopeSpec(TENANT, 0, -1, 1000, 7_999_999_999).limit == 999


def test_event_ends_exactly_at_t_e_plus_w() -> None:
    ref = tenant_reference()
    # S = 1200 > 1000 at 100: starts with that packet. At 999 packet 0 is still in (0 + W > 999).
    assert feed(ref, [(0, 600), (100, 600), (999, 10)]) == []
    [open_event] = ref.open_events()
    assert (open_event.start_ns, open_event.packets, open_event.bytes) == (100, 2, 610)
    # At 1000 packet 0 leaves (0 + W <= 1000): S = 610 <= L, the event ends at 0 + W.
    [event] = feed(ref, [(1000, 10)])
    assert brief(event) == (100, 1000, 2, 610, 1210 * 8_000_000_000 // W)
    assert (event.id, event.scope, event.view, event.tenant, event.cls) == (0, TENANT, RATE, 0, -1)
    assert ref.open_events() == []  # S = 620 after the packet at 1000 joins: no new event


def test_end_is_found_late_but_dated_exactly() -> None:
    ref = tenant_reference()
    # The next packet comes long after: the event still ends at 0 + W, not at 5000.
    [event] = feed(ref, [(0, 600), (100, 600), (5000, 1)])
    assert brief(event) == (100, 1000, 1, 600, 9_600_000_000)


def test_equal_timestamps_and_time_never_goes_back() -> None:
    ref = tenant_reference()
    # Two packets at 500, a third stamped 300 is taken at 500 (S = 1200: starts there).
    assert feed(ref, [(500, 400), (500, 400), (300, 400), (1499, 1)]) == []
    # At 1500 the first packet at 500 leaves: S = 801 <= L, so the event ends at 1500; had the
    # third kept its 300, it would have left first.
    [event] = feed(ref, [(1500, 1)])
    assert brief(event) == (500, 1500, 2, 401, 1201 * 8_000_000_000 // W)


def test_event_restarts_at_the_instant_it_ends() -> None:
    ref = tenant_reference()
    [first] = feed(ref, [(0, 600), (100, 600), (1000, 1000)])
    assert brief(first) == (100, 1000, 1, 600, 9_600_000_000)
    [second] = ref.open_events()  # 600 + 1000 > L once packet 0 has left: a new event at 1000
    assert (second.start_ns, second.packets, second.bytes) == (1000, 1, 1000)


def test_drain_closes_where_the_window_falls_to_l() -> None:
    ref = tenant_reference()
    assert feed(ref, [(0, 600), (200, 600), (400, 600)]) == []
    # Packet 0 leaves: S = 1200 > L; packet 200 leaves: S = 600, the event ends at 200 + W.
    [event] = ref.drain()
    assert brief(event) == (200, 1200, 2, 1200, 1800 * 8_000_000_000 // W)
    assert ref.drain() == [] and ref.open_events() == []
    [stats] = ref.stats()
    assert (stats["rate_events"], stats["time_in_burst_ns"], stats["peak_window_bps"]) == (1, 1000, 14_400_000_000)


def test_burst_across_calls_is_one_event() -> None:
    packets = [(0, 600), (200, 600), (400, 600), (900, 300), (1300, 5)]
    whole = tenant_reference()
    whole_events = feed(whole, packets) + whole.drain()
    split = tenant_reference()
    split_events = feed(split, packets[:2]) + feed(split, packets[2:4]) + feed(split, packets[4:]) + split.drain()
    assert [e.row() for e in split_events] == [e.row() for e in whole_events]
    # S: 600, 1200 (start at 200), 1800, 2100; at 1300 packets 0 and 200 leave -> 900 + 5: end 1200
    assert [brief(e) for e in whole_events] == [(200, 1200, 3, 1500, 2100 * 8_000_000_000 // W)]


def test_two_bursts() -> None:
    ref = tenant_reference()
    events = feed(ref, [(0, 600), (100, 600), (2000, 600), (2050, 600), (2100, 600), (5000, 1)])
    assert [brief(e) for e in events] == [(100, 1000, 1, 600, 9_600_000_000), (2050, 3050, 2, 1200, 14_400_000_000)]
    assert [e.id for e in events] == [0, 1] and ref.events == events
    rows = to_array(events, np.dtype([(name, "<i8") for name in EVENT_FIELDS]))  # as BURST_DTYPE will be
    assert rows["end_ns"].tolist() == [1000, 3050] and rows["flows"].tolist() == [1, 1]
    assert ref.stats()[0]["rate_events"] == 2 and ref.stats()[0]["time_in_burst_ns"] == 900 + 1000


def test_scopes_port_tenant_class() -> None:
    specs = [ScopeSpec(CLASS, 0, 1, W, T), ScopeSpec(TENANT, 0, -1, W, T), ScopeSpec(PORT, -1, -1, W, T)]
    ref = BurstReference(specs)
    ref.process(
        [0, 100, 200, 300, 400],
        [600, 600, 5000, 100, 500],
        tenant=[0, 1, 0, -1, 0],
        cls=[1, 0, -1, -1, 0],
        action=[1, 1, 0, 1, 1],  # 200: a classifier drop is in no scope; 300: no tenant, allowed
    )
    events = ref.drain()
    # Port: S 600, 1200 (start at 100), 1300, 1800; drain: 1200, 600 -> ends at 100 + W.
    # Tenant 0: 600, 1100 at 400 (start); drain: 500 -> ends at 0 + W. Class (0, 1): 600 only.
    assert [(e.scope, e.tenant, e.cls) for e in events] == [(PORT, -1, -1), (TENANT, 0, -1)]
    assert [brief(e) for e in events] == [(100, 1100, 3, 1200, 14_400_000_000), (400, 1000, 1, 500, 8_800_000_000)]
    stats = {(s["scope"], s["tenant"], s["cls"]): s for s in ref.stats()}
    assert stats[(CLASS, 0, 1)]["rate_events"] == 0 and stats[(CLASS, 0, 1)]["peak_window_bps"] == 4_800_000_000


def test_outcomes_while_open() -> None:
    ref = tenant_reference()
    outcomes = [Outcome.DROP_METER, Outcome.PASS, Outcome.DROP_METER, Outcome.REMARKED, Outcome.DROP_SHAPER_TIME, Outcome.DROP_SHAPER_BYTES]
    feed(ref, [(0, 600), (100, 600), (200, 10), (300, 10), (400, 10), (500, 10)], outcome=outcomes)
    [event] = ref.drain()
    row = event.row()
    assert (row["packets"], row["dropped"], row["remarked"]) == (5, 3, 1)  # packet 0 came before the start
    assert (row["drop_meter"], row["drop_shaper_time"], row["drop_shaper_bytes"], row["drop_port_buffer"]) == (1, 1, 1, 0)
    with pytest.raises(ValueError, match="PENDING"):
        tenant_reference().process([0], [10], outcome=Outcome.PENDING)


def test_top_flows_exact_and_ranked() -> None:
    ref = tenant_reference(threshold=1)  # L = 0: every packet is in an event
    keys = [flow_key(f"10.0.0.{i}", "10.0.1.1", 1000 + i, 5001, 17) for i in range(10)]
    sizes = [100, 300, 300, 50, 70, 80, 90, 110, 120, 130]  # flow 0 sends 3 x 100: 0, 1, 2 tie
    order = [9, 8, 7, 6, 5, 4, 3, 2, 1, 0, 0, 0]  # arrivals in reverse: ties go by 5-tuple, not by arrival
    ref.process(list(range(len(order))), [sizes[f] for f in order], flows=[keys[f] for f in order])
    [event] = ref.drain()
    assert event.flows == 8 and len(event.flow_counts) == 10 and event.packets == 12
    assert event.top_flows(4) == [(keys[0], 3, 300), (keys[1], 1, 300), (keys[2], 1, 300), (keys[9], 1, 130)]
    assert [(r["event"], r["rank"], r["bytes"]) for r in flow_rows([event])][:2] == [(0, 0, 300), (0, 1, 300)]
    assert len(flow_rows([event])) == 8
    assert flow_key("10.0.0.1", "::1", 1, 2, 6)[0] == bytes(10) + b"\xff\xff" + bytes([10, 0, 0, 1])


def test_polls() -> None:
    ref = tenant_reference(window=10, threshold=10**12, intervals_ns=(1000, 100))
    feed(ref, [(50, 10), (150, 20), (160, 30), (420, 5)])
    polls = ref.stats()[0]["polls"]
    # P = 100: intervals 0..4 hold 10, 50, 0, 0, 5 bytes.
    assert polls[100] == {"polls": 5, "peak_bps": 50 * 8 * 10**9 // 100, "mean_bps": 65 * 8 * 10**9 // 500}
    assert polls[1000] == {"polls": 1, "peak_bps": 520_000_000, "mean_bps": 520_000_000}


def test_scopes_from_dict() -> None:
    policy = {
        "port": {"rate": "100Gbps", "buffer": "32MiB", "microburst": {"window": "10us", "threshold": "50%"}},
        "tenants": [
            {"name": "a", "vnis": [1]},
            {
                "name": "training",
                "rate": "40Gbps",
                "microburst": {"window": "10us", "threshold": "150%"},
                "classes": [{"name": "x"}, {"name": "collective", "microburst": {"window": "1us", "threshold": "30Gbps"}}],
            },
        ],
    }
    assert scopes_from_dict(policy) == [
        ScopeSpec(PORT, -1, -1, 10_000, 50_000_000_000),
        ScopeSpec(TENANT, 1, -1, 10_000, 60_000_000_000),
        ScopeSpec(CLASS, 1, 1, 1_000, 30_000_000_000),
    ]


# --- the generator ---------------------------------------------------------------------------

BURST = Burst(tenant=1, flow=("10.9.9.9", "10.8.8.8", 40000, 5001, 17), start_ns=2_000_000, duration_ns=50_000, rate_bps=40_000_000_000)


def trace_bytes(trace) -> np.ndarray:
    return trace.wire_len.astype(np.int64)  # count: outer


def test_generator_makes_what_it_says(tmp_path) -> None:
    tcp_burst = Burst(3, ("10.7.7.7", "10.6.6.6", 33333, 443, 6), 4_000_000, 20_000, 10_000_000_000, 9000)
    trace = make_trace(7, 4, 5_000_000, 2_000_000_000, [BURST, tcp_burst], frame_bytes=[114, 1500])
    rows = isolane.parse(trace.batch)
    assert (rows["status"] == isolane.Status.OK).all() and (rows["tunnel"] == isolane.Tunnel.VXLAN).all()
    assert (rows["vni"] == np.asarray(trace.vnis)[trace.tenant]).all()
    assert (np.diff(trace.timestamps_ns) >= 0).all() and (rows["timestamp_ns"] == trace.timestamps_ns).all()
    assert (rows["wire_len"] == trace.wire_len).all() and (rows["inner_len"] == trace.wire_len - 50).all()
    for i, burst in enumerate(trace.bursts):
        mine = trace.burst == i
        gap = burst.frame_bytes * 8e9 / burst.rate_bps
        assert mine.sum() == math.ceil(burst.duration_ns / gap)
        offsets = trace.timestamps_ns[mine] - trace.start_ns
        assert offsets.min() == burst.start_ns and offsets.max() < burst.start_ns + burst.duration_ns
        src, dst, sport, dport, proto = burst.flow
        got = rows[mine]
        assert set(isolane.format_addresses(got["src"])) == {src} and set(isolane.format_addresses(got["dst"])) == {dst}
        assert (got["src_port"] == sport).all() and (got["dst_port"] == dport).all() and (got["proto"] == proto).all()
        assert (got["vni"] == trace.vnis[burst.tenant]).all() and (trace.wire_len[mine] == burst.frame_bytes).all()
    # Background: Poisson at 2 Gbit/s per tenant of frames averaging 807 B, within 5 sigma.
    expected = 5_000_000 * 2e9 / (807 * 8e9)
    for t in range(4):
        n = ((trace.tenant == t) & (trace.burst < 0)).sum()
        assert abs(n - expected) < 5 * expected**0.5
    write_pcap(trace, tmp_path / "t.pcap")
    again = isolane.read_pcap(tmp_path / "t.pcap")
    assert (isolane.parse(again) == rows).all()
    assert isolane.Policy.from_dict(policy_for(trace, "10us", "10Gbps")).tenant_names == ["t0", "t1", "t2", "t3"]


def test_reference_finds_the_injected_burst() -> None:
    trace = make_trace(3, 4, 5_000_000, 1_000_000_000, [BURST])
    ref = BurstReference(scopes_from_dict(policy_for(trace, "10us", "10Gbps")))
    ref.process(trace.timestamps_ns, trace_bytes(trace), tenant=trace.tenant, flows=[flow_key(*trace.flows[f]) for f in trace.flow])
    ref.drain()
    [event] = ref.events
    start, end = trace.start_ns + BURST.start_ns, trace.start_ns + BURST.start_ns + BURST.duration_ns
    assert event.tenant == 1 and start <= event.start_ns <= start + 10_000 and end <= event.end_ns <= end + 10_000
    assert event.top_flows(1)[0][0] == flow_key(*BURST.flow)
    assert event.peak_bps >= 40_000_000_000 - 1_200_000_000  # one 1500 B frame of 10us is 1.2 Gbit/s


@pytest.mark.parametrize("load, events", [(0.9, 0), (1.1, 1)])
def test_smooth_traffic_around_the_threshold(load: float, events: int) -> None:
    # 100us windows hold 125 kB at 10 Gbit/s (83 frames): evenly spaced at 90% never exceeds it.
    trace = make_trace(5, 2, 10_000_000, int(10_000_000_000 * load), smooth=True)
    ref = BurstReference(scopes_from_dict(policy_for(trace, "100us", "10Gbps")))
    ref.process(trace.timestamps_ns, trace_bytes(trace), tenant=trace.tenant)
    ref.drain()
    found = ref.events
    assert len(found) == events * 2
    for stats in ref.stats():
        assert abs(stats["peak_window_bps"] - 10_000_000_000 * load) <= 120_000_000  # a frame in 100us
    if events:  # above the threshold throughout: one event per tenant from its first full window to the end
        assert all(e.start_ns - trace.start_ns < 200_000 and e.end_ns > trace.timestamps_ns[-1] for e in found)


@pytest.mark.slow
def test_million_packets_in_seconds() -> None:
    began = time.perf_counter()
    trace = make_trace(11, 8, 100_000_000, 9_000_000_000, [BURST], frame_bytes=[114, 600, 1500])
    elapsed = time.perf_counter() - began
    assert len(trace) >= 1_000_000 and elapsed < 10, (len(trace), elapsed)
