"""Adaptive profiles in the data path (docs/qos.md, "Adaptive profiles"): burst profiles against
a plain reference of the switching rules on random traces with injected bursts, the reaction
time, accounting through every switch, and the port's overload profile with staggered returns."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from isolane import Engine, Outcome, ProfileId, SwitchCause
from support.profile_reference import BurstProfileReference
from test_engine_qos import policy, records

# A burst profile whose meter drops every packet (a 64-byte bucket holds none of them): a
# packet's outcome then says which profile it was enforced under.
DROP_ALL = {"kind": "srtcm", "cir": "8bps", "cbs": "64B", "ebs": "0B", "actions": {"yellow": "drop", "red": "drop"}}
RATE_BPS = 100_000_000  # every tenant's guarantee: 100 Mbit/s


def bursty(rng: np.random.Generator, vni: int, duration_ns: int, bursts: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(times, vnis, sizes): Poisson background under the tenant's rate, and packet trains
    100-2,000 ns apart at random instants (microbursts)."""
    background = np.sort(rng.integers(0, duration_ns, int(duration_ns * 2e-6)))
    trains = [start + np.cumsum(rng.integers(100, 2000, rng.integers(3, 40))) for start in rng.integers(0, duration_ns, bursts)]
    times = np.sort(np.concatenate([background, *trains]))
    return times, np.full(len(times), vni), rng.integers(100, 1500, len(times))


def random_profile(rng: np.random.Generator) -> dict[str, Any]:
    window_ns = int(rng.choice([1_000, 5_000, 10_000, 50_000]))
    return {
        "window_ns": window_ns,
        "threshold_pct": int(rng.choice([100, 150, 300, 1000])),
        "hold_ns": int(rng.choice([0, 1_000, 20_000, 200_000])),
        "max_switches": int(rng.choice([0, 0, 200, 2_000])),
    }


def tenant(index: int, setting: dict[str, Any] | None) -> dict[str, Any]:
    doc: dict[str, Any] = {"name": f"t{index}", "vnis": [100 + index], "rate": f"{RATE_BPS}bps"}
    if setting is not None:
        doc["microburst"] = {"window": f"{setting['window_ns']}ns", "threshold": f"{setting['threshold_pct']}%"}
        doc["on_burst"] = {"meter": DROP_ALL, "hold": f"{setting['hold_ns']}ns"}
        if setting["max_switches"]:
            doc["on_burst"]["max_switches"] = setting["max_switches"]
    return doc


def run_engine(pol: Any, rows: np.ndarray, rng: np.random.Generator) -> tuple[Engine, np.ndarray]:
    engine = Engine(pol)
    cuts = np.sort(rng.choice(np.arange(1, len(rows)), size=7, replace=False))
    out = np.concatenate([engine.process(part) for part in np.split(rows, cuts)])
    engine.drain()
    return engine, out


def engine_switches(engine: Engine, name: str) -> list[tuple[int, int, int, int]]:
    tenant = engine.profile_tenants.index(name)
    events = engine.profile_events()
    mine = events[events["tenant"] == tenant]
    return [(int(e["time_ns"]), int(e["from"]), int(e["to"]), int(e["cause"])) for e in mine]


@pytest.mark.parametrize("seed", range(24))
def test_burst_profiles_switch_as_the_reference_says_packet_by_packet(seed: int) -> None:
    rng = np.random.default_rng(seed)
    settings = [random_profile(rng), random_profile(rng), None]
    parts = [bursty(rng, 100 + i, 20_000_000, 30) for i in range(3)]
    times, vnis, sizes = (np.concatenate([p[k] for p in parts]) for k in range(3))
    order = np.argsort(times, kind="stable")
    rows = records(vnis[order], times[order], sizes[order])
    pol = policy({"count": "outer", "tenants": [tenant(i, s) for i, s in enumerate(settings)]})
    engine, out = run_engine(pol, rows, rng)
    for i, setting in enumerate(settings):
        mine = rows["vni"] == 100 + i
        dropped = out["outcome"][mine] == Outcome.DROP_METER
        if setting is None:
            assert not dropped.any() and f"t{i}" not in engine.profile_tenants
            continue
        limit = setting["threshold_pct"] * RATE_BPS // 100 * setting["window_ns"] // 8_000_000_000
        reference = BurstProfileReference(setting["window_ns"], limit, setting["hold_ns"], setting["max_switches"])
        expected = np.array([reference.packet(int(t), int(b)) for t, b in zip(rows["timestamp_ns"][mine], rows["wire_len"][mine])])
        reference.drain()
        np.testing.assert_array_equal(dropped, expected == ProfileId.BURST, err_msg=f"t{i}: packets under the burst profile")
        assert engine_switches(engine, f"t{i}") == reference.switches
        assert reference.switches, "the trace has bursts that switch"
        stats = next(s for s in engine.profile_stats() if s["tenant"] == f"t{i}")
        assert stats["packets"] == {"normal": int((expected == 0).sum()), "burst": int((expected == 1).sum()), "overload": 0}
        assert stats["switches"] == len(reference.switches)


def test_the_packet_after_the_one_that_starts_a_burst_is_under_the_burst_profile() -> None:
    """Reaction time: the next packet of the tenant, within the same batch, whatever it is."""
    rng = np.random.default_rng(7)
    window_ns, hold_ns = 10_000, 50_000
    times, vnis, sizes = bursty(rng, 100, 50_000_000, 200)
    rows = records(vnis, times, sizes)
    setting = {"window_ns": window_ns, "threshold_pct": 150, "hold_ns": hold_ns, "max_switches": 0}
    engine = Engine(policy({"count": "outer", "tenants": [tenant(0, setting)]}))
    out = engine.process(rows)  # one batch: the switch takes effect inside it
    engine.drain()
    switches = engine_switches(engine, "t0")
    starts = [time for time, _, to, cause in switches if cause == SwitchCause.BURST_STARTED]
    assert len(starts) >= 50
    ends = {int(e["start_ns"]): int(e["end_ns"]) for e in engine.bursts()}
    reactions = []
    for start in starts:
        after = int(np.searchsorted(rows["timestamp_ns"], start, side="right"))  # the packet after the one that started it
        if after < len(rows) and rows["timestamp_ns"][after] < ends[start] + hold_ns:
            assert out["outcome"][after] == Outcome.DROP_METER, f"burst at {start} ns: the next packet is under the burst profile"
        if after < len(rows) and rows["timestamp_ns"][after] < ends[start]:
            reactions.append(int(rows["timestamp_ns"][after]) - start)
    # Packets of a burst come less than a window apart: the reaction is within one window.
    assert len(reactions) >= 50 and max(reactions) <= window_ns
    # Out of the profile exactly hold after its rate event ended.
    ended = [time for time, _, to, cause in switches if cause == SwitchCause.BURST_ENDED]
    assert all(time - hold_ns in ends.values() for time in ended)


def test_every_packet_has_one_outcome_and_the_counters_run_on_through_every_switch() -> None:
    rng = np.random.default_rng(11)
    parts = [bursty(rng, 100 + i, 10_000_000, 40) for i in range(2)]
    times, vnis, sizes = (np.concatenate([p[k] for p in parts]) for k in range(3))
    order = np.argsort(times, kind="stable")
    rows = records(vnis[order], times[order], sizes[order])
    # 4 Gbit/s over 5 us: a lone packet does not burst, two within the window may.
    setting = {"window_ns": 5_000, "threshold_pct": 4000, "hold_ns": 20_000, "max_switches": 0}
    tenants = [tenant(0, setting), tenant(1, setting)]
    for doc in tenants:  # a burst profile that shapes rather than drops: packets wait, and some are dropped
        doc["on_burst"] = {"shaper": {"rate": "50Mbps", "queue": "16KiB"}, "hold": "20us"}
    pol = policy({"count": "outer", "tenants": tenants})
    engine = Engine(pol)
    # An update (t1's hold changes: the enforcer retargets, every tenant restarts from its
    # normal profile) right after a packet of t0's in its normal profile (the reference says
    # where), so that t0's packets since its last switch must be carried over.
    t0 = np.flatnonzero(rows["vni"] == 100)
    reference = BurstProfileReference(5_000, 4000 * RATE_BPS // 100 * 5_000 // 8_000_000_000, 20_000)
    profiles = [reference.packet(int(rows["timestamp_ns"][i]), int(rows["wire_len"][i])) for i in t0]
    switched_at = {time for time, *_ in reference.switches}
    calm = [k for k in range(len(t0) // 2, len(t0)) if profiles[k] == ProfileId.NORMAL and int(rows["timestamp_ns"][t0[k]]) not in switched_at]
    half = int(t0[calm[0]]) + 1  # t0's packet calm[0] left it in its normal profile
    first = engine.process(rows[:half])
    engine.update(pol.with_tenant({**tenants[1], "on_burst": {**tenants[1]["on_burst"], "hold": "50us"}}))
    out = np.concatenate([first, engine.process(rows[half:])])
    engine.drain()
    assert len(engine.profile_events()) > 20
    stats = engine.stats()
    for entry in stats:
        assert entry["packets"] == sum(o["packets"] for o in entry["outcomes"].values()) + entry["in_flight"]
    assert sum(e["packets"] for e in stats) == len(rows)
    counted = {s["tenant"]: sum(s["packets"].values()) for s in engine.profile_stats()}
    assert counted == {"t0": int((rows["vni"] == 100).sum()), "t1": int((rows["vni"] == 101).sum())}
    shaped_out = np.isin(out["outcome"], [Outcome.DROP_SHAPER_BYTES, Outcome.DROP_SHAPER_TIME]).sum()
    assert shaped_out > 0, "the burst profile's shaper acted"


# ---------------------------------------------------------------------------------------------
# The port's overload profile


def overload_run(stagger: str) -> tuple[Engine, np.ndarray, np.ndarray]:
    """Four tenants guaranteed 2 MB/s each at a 10 MB/s port: a flood of 4 MB/s each for 100 ms,
    then 3.5 MB/s each (still over the line). Overloaded, each is policed to its guarantee."""
    from test_engine_port import LINE, SECOND, offered, traffic

    rng = np.random.default_rng(5)
    parts = [offered(rng, 100 + i, 4_000_000, 0, SECOND // 10) for i in range(4)]
    parts += [offered(rng, 100 + i, 3_500_000, SECOND // 10, SECOND) for i in range(4)]
    rows = traffic(*parts)
    police = {"meter": {"kind": "srtcm", "cir": "2MB/s", "actions": {"red": "drop"}}}
    tenants = [{"name": f"t{i}", "vnis": [100 + i], "rate": "2MB/s", "on_overload": police} for i in range(4)]
    port = {"rate": f"{LINE}B/s", "buffer": "1MB", "overload": {"above": "50%", "below": "10%", "stagger": stagger}}
    engine = Engine(policy({"count": "outer", "unknown_tenant": "allow", "port": port, "tenants": tenants}))
    out = engine.process(rows)
    engine.drain()
    return engine, rows, out


def test_overloaded_tenants_switch_together_are_not_starved_and_return_one_by_one_staggered() -> None:
    engine, rows, out = overload_run("5ms")
    events = engine.profile_events()
    names = engine.profile_tenants
    starts = events[events["cause"] == SwitchCause.OVERLOAD]
    returns = events[events["cause"] == SwitchCause.RECOVERED]
    assert len(starts) >= 8 and len(starts) == len(returns), "several overloads, each recovered from"
    first_start, first_returns = starts[:4], returns[:4]
    assert len(set(first_start["time_ns"])) == 1 and (first_start["to"] == ProfileId.OVERLOAD).all()
    assert [names[t] for t in first_returns["tenant"]] == ["t0", "t1", "t2", "t3"], "in policy order"
    np.testing.assert_array_equal(np.diff(first_returns["time_ns"].astype(np.int64)), [5_000_000] * 3)
    # While overloaded, each tenant still sends about its guarantee (policed to it by a small
    # bucket, Poisson arrivals lose a few percent): none is starved.
    start_ns, end_ns = int(first_start["time_ns"][0]), int(first_returns["time_ns"][0])
    kept = np.isin(out["outcome"], [Outcome.PASS, Outcome.PENDING])  # pending: sent after the batch
    during = (rows["timestamp_ns"] > start_ns) & (rows["timestamp_ns"] < end_ns) & kept
    for i in range(4):
        sent = rows["wire_len"][during & (rows["vni"] == 100 + i)].sum()
        assert sent >= 0.9 * 2_000_000 * (end_ns - start_ns) / 1e9, f"t{i} sent {sent} B while overloaded"
    counts = {s["tenant"]: s["packets"] for s in engine.profile_stats()}
    assert all(c["overload"] > 0 and c["burst"] == 0 for c in counts.values())


def test_overload_profiles_added_and_taken_out_during_an_overload_leave_the_others_in_theirs() -> None:
    """In one update during an overload, t4 (with an overload profile) is added and t1 taken
    out: t0, t2 and t3 stay in their overload profiles (a rebuild would put them back in their
    normal ones), t1 goes back to its normal profile as an update puts it, t4 takes its overload
    profile at once, and they return in policy order."""
    from test_engine_port import LINE, SECOND, offered, traffic

    rng = np.random.default_rng(5)
    rows = traffic(*[offered(rng, 100 + i, 5_500_000, 0, SECOND // 10) for i in (0, 2, 3)])  # t1 sends nothing: none of it waits at the port
    police = {"meter": {"kind": "srtcm", "cir": "2MB/s", "actions": {"red": "drop"}}}
    tenants = [{"name": f"t{i}", "vnis": [100 + i], "rate": "2MB/s", "on_overload": police} for i in range(5)]
    port = {"rate": f"{LINE}B/s", "buffer": "1MB", "overload": {"above": "50%", "below": "10%", "stagger": "5ms"}}
    before = policy({"count": "outer", "unknown_tenant": "allow", "port": port, "tenants": tenants[:4]})
    engine = Engine(before)
    cut = int(np.searchsorted(rows["timestamp_ns"], SECOND * 95 // 1000))  # overloaded from about 80 ms
    engine.process(rows[:cut])
    names = engine.profile_tenants
    overloaded = {names[e["tenant"]]: int(e["to"]) for e in engine.profile_events()}
    assert overloaded == {f"t{i}": ProfileId.OVERLOAD for i in range(4)}, "all four are overloaded at the update"
    seen = len(engine.profile_events())
    engine.update(before.with_tenant(tenants[4]).without_tenant("t1"))
    names = engine.profile_tenants
    at_update = [(names[e["tenant"]], int(e["to"]), int(e["cause"])) for e in engine.profile_events()[seen:]]
    assert at_update == [("t4", ProfileId.OVERLOAD, SwitchCause.OVERLOAD), ("t1", ProfileId.NORMAL, SwitchCause.UPDATE)]
    engine.process(rows[cut:])
    engine.drain()
    events = engine.profile_events()[seen + 2 :]
    returns = events[events["cause"] == SwitchCause.RECOVERED]
    assert [names[t] for t in returns["tenant"][:4]] == ["t0", "t2", "t3", "t4"], "in policy order"


def test_a_tenant_removed_with_packets_at_the_port_during_an_overload_leaves_the_others_overloaded() -> None:
    """t1's packets wait at the port when it is removed: the port is drained and started again
    (as a rebuild would), but t0, t2 and t3 stay in their overload profiles and return in
    policy order; every packet is counted."""
    from test_engine_port import LINE, SECOND, offered, traffic

    rng = np.random.default_rng(5)
    rows = traffic(*[offered(rng, 100 + i, 4_000_000, 0, SECOND // 10) for i in range(4)])
    police = {"meter": {"kind": "srtcm", "cir": "2MB/s", "actions": {"red": "drop"}}}
    tenants = [{"name": f"t{i}", "vnis": [100 + i], "rate": "2MB/s", "on_overload": police} for i in range(4)]
    port = {"rate": f"{LINE}B/s", "buffer": "1MB", "overload": {"above": "50%", "below": "10%", "stagger": "5ms"}}
    before = policy({"count": "outer", "unknown_tenant": "allow", "port": port, "tenants": tenants})
    engine = Engine(before)
    cut = int(np.searchsorted(rows["timestamp_ns"], SECOND * 95 // 1000))
    engine.process(rows[:cut])
    waiting = {e["tenant"]: e["packets"] - e["delay_ns"]["count"] for e in engine.stats() if e["cls"] is not None}
    assert waiting["t1"] > 0, "t1's packets wait at the port"
    seen = len(engine.profile_events())
    engine.update(before.without_tenant("t1"))
    names = engine.profile_tenants
    assert [(names[e["tenant"]], int(e["to"]), int(e["cause"])) for e in engine.profile_events()[seen:]] == [("t1", ProfileId.NORMAL, SwitchCause.UPDATE)]
    engine.process(rows[cut:][rows["vni"][cut:] != 101])
    engine.drain()
    returns = engine.profile_events()[seen + 1 :]
    returns = returns[returns["cause"] == SwitchCause.RECOVERED]
    assert [names[t] for t in returns["tenant"][:3]] == ["t0", "t2", "t3"], "in policy order"
    assert sum(e["packets"] for e in engine.stats()) == cut + int((rows["vni"][cut:] != 101).sum())


def test_a_staggered_return_overloads_the_port_again_later_than_a_static_fallback() -> None:
    """The static fallback: every tenant to its conservative profile at once, and back at once."""
    staggered, _, staggered_out = overload_run("5ms")
    static, _, static_out = overload_run("0ns")
    times = {}
    for label, engine in (("staggered", staggered), ("static", static)):
        events = engine.profile_events()
        times[label] = events["time_ns"][events["cause"] == SwitchCause.OVERLOAD][::4].astype(np.int64)
        returns = events["time_ns"][events["cause"] == SwitchCause.RECOVERED]
        assert len(set(returns[:4])) == (4 if label == "staggered" else 1)
    assert len(times["staggered"]) <= len(times["static"])
    later = times["staggered"][1:] - times["static"][1 : len(times["staggered"])]
    assert (later > 0).all(), f"each overload after the first comes later when tenants return one by one: {later / 1e6} ms"
    policed = {label: int((out["outcome"] == Outcome.DROP_METER).sum()) for label, out in (("staggered", staggered_out), ("static", static_out))}
    assert policed["staggered"] < policed["static"], policed


# ---------------------------------------------------------------------------------------------
# Scenario: a training tenant's bursts and its neighbours' queueing delay at a shared FIFO


def neighbour_delays(with_profile: bool) -> tuple[dict[str, int], Engine]:
    """A 10 MB/s port shared as one FIFO. Two inference tenants offer 2 MB/s each; a training
    tenant, guaranteed 3 MB/s, sends 2 ms trains at 40 MB/s every 20 ms. With its burst
    profile, a train is shaped to 3 MB/s at the tenant from the packet after the one that
    starts its burst. The neighbours' p99 queueing delay at the port, by tenant."""
    from test_engine_port import SECOND, offered, traffic

    rng = np.random.default_rng(9)
    parts = [offered(rng, 101, 2_000_000, 0, SECOND), offered(rng, 102, 2_000_000, 0, SECOND)]
    for start in range(0, SECOND, 20_000_000):
        parts.append(offered(rng, 100, 40_000_000, start, start + 2_000_000))
    rows = traffic(*parts)
    train: dict[str, Any] = {"name": "train", "vnis": [100], "rate": "3MB/s", "microburst": {"window": "10us", "threshold": "200%"}}
    if with_profile:
        train["on_burst"] = {"shaper": {"rate": "3MB/s", "queue": "64KiB"}, "hold": "100us"}
    tenants = [train, {"name": "infer-a", "vnis": [101], "rate": "3MB/s"}, {"name": "infer-b", "vnis": [102], "rate": "3MB/s"}]
    port = {"rate": "10MB/s", "buffer": "4MB", "mode": "shared_fifo"}
    engine = Engine(policy({"count": "outer", "unknown_tenant": "allow", "port": port, "tenants": tenants}))
    engine.process(rows)
    engine.drain()
    p99 = {s["tenant"]: s["delay_ns"]["p99"] for s in engine.stats() if s["tenant"] in ("infer-a", "infer-b") and s["cls"] is not None}
    return p99, engine


def test_a_burst_profile_keeps_the_neighbours_queueing_delay_low_at_a_shared_fifo() -> None:
    without, _ = neighbour_delays(with_profile=False)
    with_profile, engine = neighbour_delays(with_profile=True)
    print(f"\nneighbours' p99 queueing delay, shared FIFO: without the burst profile {without} ns, with it {with_profile} ns")
    starts = engine.profile_events()
    # Every train switches the tenant (a gap in a train longer than the hold ends the profile;
    # the next packet starts it again).
    assert (starts["cause"] == SwitchCause.BURST_STARTED).sum() >= 50
    for name in ("infer-a", "infer-b"):
        # Without: a 2 ms train at 4x the line leaves ~6 ms of backlog ahead of them.
        assert without[name] > 5_000_000
        # With: only the packet that starts a burst passes unshaped; the port then carries the
        # train at 3 MB/s beside their 4 MB/s, and they wait as at a port 70% busy.
        assert with_profile[name] < without[name] / 5, (name, with_profile[name], without[name])


# ---------------------------------------------------------------------------------------------
# A class's burst profile


def test_a_class_burst_profile_follows_its_own_scope_and_leaves_the_other_class_alone() -> None:
    """Class "bulk" (dst port 5001) of tenant t0 has a burst profile that drops every packet;
    class "rest" has none. Against the reference fed the class's packets only."""
    rng = np.random.default_rng(31)
    times, vnis, sizes = bursty(rng, 100, 20_000_000, 60)
    ports = np.where(rng.random(len(times)) < 0.5, 5001, 443)
    rows = records(vnis, times, sizes, dst_port=ports)
    window_ns, hold_ns = 10_000, 20_000
    classes = [
        {"name": "rest", "rate": f"{RATE_BPS // 2}bps"},
        {
            "name": "bulk",
            "rate": f"{RATE_BPS // 2}bps",
            "microburst": {"window": f"{window_ns}ns", "threshold": "400%"},
            "on_burst": {"meter": DROP_ALL, "hold": f"{hold_ns}ns"},
        },
    ]
    rules = [{"dst_ports": 5001, "action": "allow", "class": "bulk"}]
    pol = policy({"count": "outer", "tenants": [{**tenant(0, None), "classes": classes, "default_class": "rest", "rules": rules}]})
    engine = Engine(pol)
    out = engine.process(rows)
    engine.drain()
    bulk = ports == 5001
    assert not (out["outcome"][~bulk] == Outcome.DROP_METER).any(), "the other class is untouched"
    limit = 400 * (RATE_BPS // 2) // 100 * window_ns // 8_000_000_000
    reference = BurstProfileReference(window_ns, limit, hold_ns)
    expected = np.array([reference.packet(int(t), int(b)) for t, b in zip(rows["timestamp_ns"][bulk], rows["wire_len"][bulk])])
    reference.drain()
    np.testing.assert_array_equal(out["outcome"][bulk] == Outcome.DROP_METER, expected == ProfileId.BURST)
    events = engine.profile_events()
    assert len(reference.switches) > 20 and (events["cls"] == 1).all()
    assert [(int(e["time_ns"]), int(e["from"]), int(e["to"]), int(e["cause"])) for e in events] == reference.switches
    (stats,) = engine.profile_stats()
    assert (stats["tenant"], stats["cls"]) == ("t0", 1)
    assert stats["packets"] == {"normal": int((expected == 0).sum()), "burst": int((expected == 1).sum()), "overload": 0}


def profiled(index: int, setting: dict[str, Any], where: str) -> dict[str, Any]:
    """:func:`tenant` with its burst profile its own, or its default class's ("class")."""
    if where == "tenant":
        return tenant(index, setting)
    own = tenant(index, setting)
    bulk = {"name": "bulk", "rate": f"{RATE_BPS // 2}bps", "microburst": own.pop("microburst"), "on_burst": own.pop("on_burst")}
    return {**own, "classes": [bulk, {"name": "rest", "rate": f"{RATE_BPS // 2}bps"}]}


@pytest.mark.parametrize("where", ["tenant", "class"])
def test_a_tenant_with_a_burst_profile_added_to_a_running_engine_leaves_the_others_in_theirs(where: str) -> None:
    """Added alone (no rebuild): t0, in its burst profile at the update, stays in it, and the
    new tenant switches as it would in an engine made with it; every packet as in that engine."""
    rng = np.random.default_rng(11)
    setting = {"window_ns": 10_000, "threshold_pct": 150, "hold_ns": 2_000_000, "max_switches": 0}
    times0, vnis0, sizes0 = bursty(rng, 100, 20_000_000, 60)
    times1, vnis1, sizes1 = bursty(rng, 101, 20_000_000, 60)
    cut = 10_000_000  # t1's traffic starts after the update
    keep = times1 >= cut
    order = np.argsort(np.concatenate([times0, times1[keep]]), kind="stable")
    rows = records(np.concatenate([vnis0, vnis1[keep]])[order], np.concatenate([times0, times1[keep]])[order], np.concatenate([sizes0, sizes1[keep]])[order])
    before = policy({"count": "outer", "tenants": [tenant(0, setting)]})
    after = before.with_tenant(profiled(1, setting, where))
    split = int(np.searchsorted(rows["timestamp_ns"], cut))
    edited = Engine(before)
    out = [edited.process(rows[:split])]
    in_burst = [to for time, _, to, _ in engine_switches(edited, "t0") if time <= cut]
    assert in_burst and in_burst[-1] == ProfileId.BURST, "t0 is in its burst profile at the update"
    edited.update(after)
    out.append(edited.process(rows[split:]))
    edited.drain()
    fresh, fresh_out = Engine(after), None
    fresh_out = np.concatenate([fresh.process(rows[:split]), fresh.process(rows[split:])])
    fresh.drain()
    for name in ("t0", "t1"):
        assert engine_switches(edited, name) == engine_switches(fresh, name), name
    assert len(engine_switches(edited, "t1")) >= 2, "t1 switched in and out"
    np.testing.assert_array_equal(np.concatenate(out)["outcome"], fresh_out["outcome"])


@pytest.mark.parametrize("where", ["tenant", "class"])
def test_a_tenant_with_a_burst_profile_removed_from_a_running_engine_leaves_the_others_in_theirs(where: str) -> None:
    """Removed alone (no rebuild): t1, in its burst profile at the update, stays in it, as in an
    engine made without t0; t0 goes back to its normal profile as an update puts it."""
    rng = np.random.default_rng(12)
    setting = {"window_ns": 10_000, "threshold_pct": 150, "hold_ns": 2_000_000, "max_switches": 0}
    parts = [bursty(rng, vni, 20_000_000, 60) for vni in (100, 101)]
    times, vnis, sizes = (np.concatenate(column) for column in zip(*parts))
    order = np.argsort(times, kind="stable")
    rows = records(vnis[order], times[order], sizes[order])
    both = policy({"count": "outer", "tenants": [profiled(0, setting, where), tenant(1, setting)]})
    cut = int(np.searchsorted(rows["timestamp_ns"], 10_000_000))
    edited = Engine(both)
    out = [edited.process(rows[:cut])]
    at_cut = int(rows["timestamp_ns"][cut - 1])
    for name in ("t0", "t1"):
        assert engine_switches(edited, name)[-1][2] == ProfileId.BURST, f"{name} is in its burst profile at the update"
    edited.update(both.without_tenant("t0"))
    out.append(edited.process(rows[cut:]))
    edited.drain()
    fresh = Engine(both.without_tenant("t0"))
    fresh_out = np.concatenate([fresh.process(rows[:cut]), fresh.process(rows[cut:])])
    fresh.drain()
    assert engine_switches(edited, "t1") == engine_switches(fresh, "t1")
    assert engine_switches(edited, "t0")[-1] == (at_cut, ProfileId.BURST, ProfileId.NORMAL, SwitchCause.UPDATE)
    t1 = rows["vni"] == 101
    np.testing.assert_array_equal(np.concatenate(out)["outcome"][t1], fresh_out["outcome"][t1])
