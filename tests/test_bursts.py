"""Microburst detection in the engine (docs/bursts.md) against the plain reference
(support/burst_reference.py) and the spec: random traces event by event, detection quality on generated
multi-tenant traffic, batch boundaries and the on_burst callback, verdicts untouched, the queue
view at a port, a real capture, and the errors bad settings get."""

from __future__ import annotations

import dataclasses
import warnings
from collections import Counter
from typing import Any

import hypothesis
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import isolane
from isolane import Engine, Outcome, Policy, PolicyError
from support import port_reference
from support.burst_reference import (
    CLASS,
    DEFAULT_INTERVALS_NS,
    EVENT_FIELDS,
    PORT,
    QUEUE,
    RATE,
    TENANT,
    BurstReference,
    Event,
    ScopeSpec,
    _Scope,
    flow_key,
    packet_bytes,
    scopes_from_dict,
)  # fmt: skip
from support.burst_traffic import Burst, make_trace, policy_for

COUNT_MODES = ("inner", "outer", "wire", "wire_fcs")
VNIS = {"a": 100, "b": 101, "c": 102}
UNKNOWN_VNI = 999
T0 = 1_000_000_000_000  # ns: the traces' first timestamp, a whole second
SCOPE_NAMES = {PORT: "port", TENANT: "tenant", CLASS: "class"}


def make_policy(data: dict[str, Any]) -> Policy:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", isolane.PolicyWarning)
        return Policy.from_dict(data)


def ipv4_mapped(a: Any) -> np.ndarray:
    """(n, 16) bytes: IPv4 addresses (ints) as ::ffff:a.b.c.d."""
    a = np.asarray(a, dtype=np.uint64)
    out = np.zeros((len(a), 16), dtype=np.uint8)
    out[:, 10:12] = 0xFF
    for k in range(4):
        out[:, 12 + k] = (a >> np.uint64(8 * (3 - k))) & np.uint64(0xFF)
    return out


def records(vni: Any, timestamps: Any, wire_len: Any, src: Any, dst: Any, sport: Any, dport: Any, proto: Any = 6) -> np.ndarray:
    """Parsed VXLAN records (inner IPv4) with the given columns; inner frame = wire - 50."""
    n = len(timestamps)
    rows = np.zeros(n, dtype=isolane.PARSED_DTYPE)
    rows["tunnel"] = isolane.Tunnel.VXLAN
    rows["vni"] = vni
    rows["vlan"] = -1
    rows["ip_version"] = 4
    rows["proto"] = proto
    rows["src"] = ipv4_mapped(np.broadcast_to(src, (n,)))
    rows["dst"] = ipv4_mapped(np.broadcast_to(dst, (n,)))
    rows["src_port"] = sport
    rows["dst_port"] = dport
    rows["timestamp_ns"] = timestamps
    rows["wire_len"] = wire_len
    rows["inner_len"] = np.asarray(wire_len) - 50
    return rows


# ---------------------------------------------------------------------------------------------
# The reference with updates (docs/bursts.md, "Batches, updates, drain"), events labelled by
# tenant name, and each event's step: the packet, update or drain during which it ended.


class UpdatingReference(BurstReference):
    """``BurstReference`` over a policy dict, with ``update``: a scope (the port, a tenant by
    name, a class by tenant name and class id) whose setting did not change keeps its window and
    open event; one whose setting changed or is gone ends its open event at the latest packet
    time seen; a new one starts empty.

    An event's end is found only when its scope's next packet comes (or a port event of its
    queues, or the drain: docs/bursts.md, "Details", "Ids"), so an event whose window fell to L
    before the update, with no packet of its scope since, is still open then and ends at the
    latest packet time, as the doc's words have it and the engine does.
    ``expire_on_update = True`` reads it the other way (the window first empties of what left
    it by then, so such an event ends where its window fell, as drain() dates it).
    """

    expire_on_update = True

    def __init__(self, policy: dict[str, Any], intervals_ns: tuple[int, ...] = DEFAULT_INTERVALS_NS) -> None:
        super().__init__([], intervals_ns)
        self.intervals_ns = intervals_ns
        self.names: list[str] = []  # event.tenant indexes this (-1: the port)
        self.steps: list[str] = []  # per event: "packet", or "update #k" / "drain #k" (which one)
        self.count = policy.get("count", "outer")
        self.retired: set[tuple[int, str | None, int]] = set()  # (scope, tenant name, cls) whose setting changed or went
        self._install(policy)

    def _name_id(self, name: str) -> int:
        if name not in self.names:
            self.names.append(name)
        return self.names.index(name)

    def _install(self, policy: dict[str, Any]) -> list[Event]:
        names = [t["name"] for t in policy["tenants"]]
        old = {(s.spec.scope, self.names[s.spec.tenant] if s.spec.tenant >= 0 else None, s.spec.cls): s for s in self.scopes}
        placed: list[tuple[ScopeSpec, _Scope]] = []
        specs = scopes_from_dict(policy)
        for t, name in enumerate(names):  # burst_tenants: names in the order first watched
            if any(spec.tenant == t for spec in specs):
                self._name_id(name)
        for spec in specs:
            name = names[spec.tenant] if spec.tenant >= 0 else None
            key = (spec.scope, name, spec.cls)
            label = dataclasses.replace(spec, tenant=self._name_id(name) if name is not None else -1)
            previous = old.get(key)
            if previous is not None and (previous.spec.window_ns, previous.spec.threshold_bps) == (spec.window_ns, spec.threshold_bps):
                del old[key]
                placed.append((spec, previous))
            else:
                placed.append((spec, _Scope(label, self.intervals_ns)))
        ended: list[Event] = []
        self.retired.update(old)
        for scope in old.values():  # changed or gone
            if self.clock is not None and self.expire_on_update:
                scope._leave_until(self.clock, ended)
            if scope.open is not None:
                scope.open.end_ns = self.clock
                ended.append(scope.open)
                scope.open = None
        self.scopes = [scope for _, scope in placed]
        self.port = next((s for spec, s in placed if spec.scope == PORT), None)
        self.tenants = {spec.tenant: s for spec, s in placed if spec.scope == TENANT}
        self.classes = {(spec.tenant, spec.cls): s for spec, s in placed if spec.scope == CLASS}
        # drain(): the port, then the tenants in (this) policy's order, each before its classes
        by_policy = sorted(placed, key=lambda p: (p[0].scope != PORT, p[0].tenant, p[0].scope, p[0].cls))
        self.drain_order = [scope for _, scope in by_policy]
        return self._note(ended, "update")

    def _note(self, ended: list[Event], step: str) -> list[Event]:
        self._number(ended)
        self.steps.extend([f"{step} #{len(self.steps)}"] * len(ended))
        return ended

    def update(self, policy: dict[str, Any]) -> list[Event]:
        return self._install(policy)

    def feed(self, parsed: np.ndarray, processed: np.ndarray) -> list[Event]:
        ended = self.process_rows(parsed, processed, self.count)
        self.steps.extend(["packet"] * len(ended))
        return ended

    def drain(self) -> list[Event]:
        ended: list[Event] = []
        for scope in self.drain_order:
            scope._leave_until(None, ended)
        return self._note(ended, "drain")


def event_key(row: dict[str, Any]) -> tuple[Any, ...]:
    return (row["scope"], row["view"], row["tenant"], row["cls"], row["start_ns"])


def engine_rows(engine: Engine, bursts: np.ndarray | None = None) -> list[dict[str, Any]]:
    """Engine events as dicts, ``tenant`` as a name (None: the port)."""
    names = engine.burst_tenants
    out = []
    for b in engine.bursts() if bursts is None else bursts:
        row = {name: int(b[name]) for name in EVENT_FIELDS}
        row["tenant"] = names[row["tenant"]] if row["tenant"] >= 0 else None
        out.append(row)
    return out


def reference_rows(ref: UpdatingReference) -> list[dict[str, Any]]:
    out = []
    for event in ref.events:
        row = event.row()
        row["tenant"] = ref.names[row["tenant"]] if row["tenant"] >= 0 else None
        out.append(row)
    return out


def assert_same_events(got: list[dict[str, Any]], want: list[dict[str, Any]], steps: list[str]) -> list[int]:
    """Event for event, in id order (docs/bursts.md, "Details", "Ids": the order ends are found;
    for one packet port, tenant, class; at drain() the port, then each tenant in policy order
    before its classes). The order among the events one update ends is not fixed by the doc, so
    within an update they are compared as a set (each must still take an id of that update).
    Returns the engine's id of each reference event."""
    assert len(got) == len(want), (len(got), len(want), got[len(want) :] or want[len(got) :])
    assert [r["id"] for r in got] == list(range(len(got)))
    engine_id = list(range(len(want)))
    i = 0
    while i < len(want):
        j = i + 1
        if not steps[i].startswith("update"):
            assert got[i] == want[i], f"event {i} ({steps[i]}):\n got {got[i]}\nwant {want[i]}"
        else:
            while j < len(want) and steps[j] == steps[i]:
                j += 1
            g = sorted(range(i, j), key=lambda k: event_key(got[k]))
            w = sorted(range(i, j), key=lambda k: event_key(want[k]))
            assert [dict(got[k], id=None) for k in g] == [dict(want[k], id=None) for k in w], f"events {i}..{j - 1} ({steps[i]})"
            for a, b in zip(w, g):
                engine_id[a] = b
        i = j
    return engine_id


def assert_same_flows(engine: Engine, ref: UpdatingReference, engine_id: list[int]) -> int:
    """Top flows of every event: exact (as the reference counts them) while an event has at most
    32 distinct flows; beyond that, within Space-Saving's bounds. Returns how many were exact."""
    exact = 0
    events = ref.events
    flows = engine.burst_flows(np.asarray(engine_id, dtype=np.uint64))
    by_event: dict[int, list[np.void]] = {}
    for row in flows:
        by_event.setdefault(int(row["event"]), []).append(row)
    for event in events:
        got = by_event.get(engine_id[event.id], [])
        assert [int(r["rank"]) for r in got] == list(range(len(got)))
        assert len(got) == event.flows
        rows = [
            (
                (bytes(r["src"]), bytes(r["dst"]), int(r["src_port"]), int(r["dst_port"]), int(r["proto"])),
                int(r["packets"]),
                int(r["bytes"]),
                int(r["error_bytes"]),
            )
            for r in got
        ]
        if len(event.flow_counts) <= 32:
            assert [(k, p, b) for k, p, b, _ in rows] == event.top_flows(), f"event {event.id}"
            assert all(e == 0 for *_, e in rows)
            exact += 1
        else:
            for key, _, nbytes, error in rows:  # packets: see test_space_saving_packets_are_never_under
                true_bytes = event.flow_counts.get(key, [0, 0])[1]
                assert true_bytes <= nbytes <= true_bytes + error
                assert error <= event.bytes // 32
            assert [b for _, _, b, _ in rows] == sorted((b for _, _, b, _ in rows), reverse=True)
    return exact


# ---------------------------------------------------------------------------------------------
# 1. Random traces, event by event against the reference


class Pick:
    """Choices for a random case: from hypothesis (``data``, so that failures shrink) or from a
    numpy generator (the seeded coverage test)."""

    def __init__(self, source: Any) -> None:
        self.source = source

    def integer(self, lo: int, hi: int) -> int:
        if isinstance(self.source, np.random.Generator):
            return int(self.source.integers(lo, hi + 1))
        return self.source.draw(st.integers(lo, hi))

    def choice(self, options: list[Any]) -> Any:
        return options[self.integer(0, len(options) - 1)]

    def chance(self, percent: int) -> bool:
        return self.integer(0, 99) < percent


RATES = {"a": 1_000_000_000, "b": 2_000_000_000, "c": 800_000_000}  # bit/s; classes get 40% and 60%


def random_microburst(pick: Pick, rate_bps: int) -> dict[str, Any]:
    """window 1-50 us; threshold a rate near (limit bytes) x 8e9 / window, or a percentage of the
    scope's rate, so that the limit L lands anywhere from a few bytes to a few frames."""
    window = pick.integer(1_000, 50_000)
    unit = pick.choice(["ns", "us"]) if window % 1000 == 0 else "ns"
    window_text = f"{window // 1000}us" if unit == "us" else f"{window}ns"
    if pick.chance(35):
        quarter_percents = pick.integer(1, 4 * max(1, 600_000 * 8 * 10**9 // (window * rate_bps) // 100))
        threshold = f"{quarter_percents / 4:g}%"  # 0.25% steps
    else:
        limit = pick.integer(50, 6_000)
        threshold = f"{limit * 8 * 10**9 // window + pick.integer(0, 999)}bps"
    return {"window": window_text, "threshold": threshold}


def random_meter(pick: Pick) -> dict[str, Any]:
    cir = pick.integer(50, 400) * 1_000_000  # B/s
    return {
        "kind": "srtcm",
        "cir": f"{cir}B/s",
        "cbs": f"{pick.integer(1_500, 12_000)}B",
        "ebs": f"{pick.choice([0, pick.integer(1_500, 12_000)])}B",
        "actions": {"yellow": pick.choice(["pass", {"remark": "af12"}, "drop"]), "red": pick.choice(["drop", {"remark": "cs1"}])},
    }


def random_policy(pick: Pick) -> dict[str, Any]:
    tenants = []
    for name in ("a", "b", "c"):
        rate = RATES[name]
        classes: list[dict[str, Any]] = [{"name": "bulk", "rate": f"{rate * 4 // 10}bps"}, {"name": "web", "rate": f"{rate * 6 // 10}bps"}]
        tenant: dict[str, Any] = {
            "name": name,
            "vnis": [VNIS[name]],
            "rate": f"{rate}bps",
            "classes": classes,
            "rules": [{"dst_ports": 80, "class": "web", "action": "allow"}, {"dst_ports": 22, "action": "drop"}],
        }
        if pick.chance(70):
            tenant["microburst"] = random_microburst(pick, rate)
        for c, klass in enumerate(classes):
            if pick.chance(50):
                klass["microburst"] = random_microburst(pick, rate * (4 + 2 * c) // 10)
        if pick.chance(50):
            tenant["meter"] = random_meter(pick)
        if pick.chance(25):
            classes[1]["meter"] = random_meter(pick)
        tenants.append(tenant)
    return {
        "version": 1,
        "largest_frame": "1500B",
        "count": pick.choice(list(COUNT_MODES)),
        "unknown_tenant": pick.choice(["allow", "drop"]),
        "tenants": tenants,
    }


def updated_policy(pick: Pick, policy: dict[str, Any]) -> dict[str, Any]:
    """``policy`` with some microburst settings kept, some changed, some removed or added, and
    perhaps the tenants in another order (scopes are matched by name)."""
    new = {**policy, "tenants": [dict(t, classes=[dict(c) for c in t["classes"]]) for t in policy["tenants"]]}
    for tenant in new["tenants"]:
        for owner, rate in [(tenant, RATES[tenant["name"]])] + [(c, RATES[tenant["name"]] * (4 + 2 * i) // 10) for i, c in enumerate(tenant["classes"])]:
            what = pick.choice(["keep", "keep", "change", "toggle"])
            if what == "change" and "microburst" in owner:
                owner["microburst"] = random_microburst(pick, rate)
            elif what == "toggle":
                if "microburst" in owner:
                    del owner["microburst"]
                else:
                    owner["microburst"] = random_microburst(pick, rate)
    if pick.chance(40):
        new["tenants"] = new["tenants"][1:] + new["tenants"][:1]
    return new


def random_traffic(seed: int, n: int, many_flows: bool) -> np.ndarray:
    rng = np.random.default_rng(seed)
    gaps = rng.choice([0, 10, 100, 400, 1_500, 6_000, 40_000], n, p=[0.15, 0.15, 0.2, 0.2, 0.15, 0.1, 0.05])
    gaps = gaps + rng.integers(0, 50, n) * (gaps > 0)
    timestamps = T0 + np.cumsum(gaps)
    back = rng.random(n) < 0.06  # out of order, as in merged captures
    timestamps[back] -= rng.integers(0, 20_000, int(back.sum()))
    vni = rng.choice([100, 101, 102, UNKNOWN_VNI], n, p=[0.35, 0.3, 0.25, 0.1])
    sport = rng.integers(1024, 65536, n) if many_flows else rng.choice([1000, 1001], n)
    return records(
        vni,
        timestamps,
        rng.integers(64, 1501, n),
        src=0x0A000001 + rng.integers(0, 3, n),
        dst=0x0A000101,
        sport=sport,
        dport=rng.choice([80, 443, 22, 5001], n, p=[0.35, 0.35, 0.1, 0.2]),
        proto=rng.choice([6, 17], n),
    )


@dataclasses.dataclass
class Case:
    policy: dict[str, Any]
    traffic: np.ndarray
    cuts: list[int]
    update_at: int | None  # index into cuts: update before that batch
    new_policy: dict[str, Any] | None


def random_case(pick: Pick) -> Case:
    policy = random_policy(pick)
    n = pick.integer(1, 800)
    traffic = random_traffic(pick.integer(0, 2**32 - 1), n, many_flows=pick.chance(15))
    cuts = sorted(pick.integer(0, n) for _ in range(pick.integer(0, 5)))
    update_at = pick.integer(0, len(cuts)) if pick.chance(50) else None
    return Case(policy, traffic, cuts, update_at, updated_policy(pick, policy) if update_at is not None else None)


POLL_NS = (1_000, 10_000, 100_000)


def run_case(case: Case) -> tuple[Engine, UpdatingReference, list[np.ndarray]]:
    engine = Engine(make_policy(case.policy), poll=POLL_NS)
    ref = UpdatingReference(case.policy, POLL_NS)
    rows = []
    for i, part in enumerate(np.split(case.traffic, case.cuts)):
        if i == case.update_at:
            engine.update(make_policy(case.new_policy))
            ref.update(case.new_policy)
        processed = engine.process(part)
        assert not (processed["outcome"] == Outcome.PENDING).any()
        ref.feed(part, processed)
        rows.append(processed)
    engine.drain()
    ref.drain()
    return engine, ref, rows


def check_case(engine: Engine, ref: UpdatingReference) -> None:
    assert engine.burst_tenants == ref.names
    engine_id = assert_same_events(engine_rows(engine), reference_rows(ref), ref.steps)
    assert_same_flows(engine, ref, engine_id)
    # The truth per scope adds up to the events; each current scope's polled views and peak as
    # the reference's (a scope whose setting changed starts new polled views).
    stats = {(s["scope"], s["tenant"], s["cls"]): s for s in engine.burst_stats()}
    events = engine_rows(engine)
    for (scope, tenant, cls), s in stats.items():
        mine = [e for e in events if (SCOPE_NAMES[e["scope"]], e["tenant"], e["cls"] if e["cls"] >= 0 else None) == (scope, tenant, cls)]
        assert s["rate_events"] == sum(e["view"] == RATE for e in mine) and s["queue_events"] == 0
        assert s["time_in_burst_ns"] == sum(e["end_ns"] - e["start_ns"] for e in mine if e["view"] == RATE)
    for scope in ref.scopes:
        spec = scope.spec
        key = (SCOPE_NAMES[spec.scope], ref.names[spec.tenant] if spec.tenant >= 0 else None, spec.cls if spec.cls >= 0 else None)
        got, want = stats[key], scope.stats()
        assert (got["window_ns"], got["threshold_bps"], got["queue"]) == (spec.window_ns, spec.threshold_bps, None)
        if (spec.scope, key[1], spec.cls) in ref.retired:  # over every setting the scope had: see
            assert got["peak_window_bps"] >= want["peak_window_bps"]  # test_peak_window_rate_across_a_window_change
        else:
            assert got["peak_window_bps"] == want["peak_window_bps"]
        for interval, view in want["polls"].items():
            assert {k: got["polls"][interval][k] for k in view} == view, (key, interval)
            assert got["polls"][interval]["queue_polls"] == 0


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.data())
def test_engine_events_equal_the_reference_on_random_traces(data: st.DataObject) -> None:
    case = random_case(Pick(data))
    engine, ref, _ = run_case(case)
    check_case(engine, ref)
    events = engine.bursts()
    hypothesis.event(f"events: {min(len(events), 20) // 5 * 5}+")
    hypothesis.event(f"dropped in an event: {bool(events['dropped'].any())}, remarked: {bool(events['remarked'].any())}")
    hypothesis.event(f"events ended by the update: {any(s.startswith('update') for s in ref.steps)}")


def test_random_cases_cover_drops_remarks_updates_and_the_drain() -> None:
    """Seeded cases of the property above, with what they must exercise checked, so that a
    change in the generator cannot quietly leave a field untested."""
    seen: Counter[str] = Counter()
    for seed in range(30):
        case = random_case(Pick(np.random.default_rng(seed)))
        engine, ref, _ = run_case(case)
        check_case(engine, ref)
        events = engine.bursts()
        seen["events"] += len(events)
        seen["dropped"] += int(events["dropped"].sum())
        seen["drop_meter"] += int(events["drop_meter"].sum())
        seen["remarked"] += int(events["remarked"].sum())
        seen["ended by an update"] += sum(s.startswith("update") for s in ref.steps)
        seen["ended by the drain"] += sum(s.startswith("drain") for s in ref.steps)
        seen["class events"] += int((events["scope"] == CLASS).sum())
        seen["out of order"] += int((np.diff(case.traffic["timestamp_ns"]) < 0).any())
    assert min(seen.values()) > 0, seen
    assert seen["drop_meter"] == seen["dropped"]  # no shaper, no port: the meters drop


def test_update_keeps_an_event_whose_setting_did_not_change_and_ends_one_whose_setting_did() -> None:
    # Tenant a: 1 Gbit/s over 10 us, L = 1250 B; packets of 1000 B (count outer).
    mb = {"window": "10us", "threshold": "1Gbps"}
    policy = {"tenants": [{"name": "a", "vnis": [100], "microburst": mb}, {"name": "b", "vnis": [101], "microburst": mb}]}
    engine = Engine(make_policy(policy))
    times = T0 + np.array([0, 100, 200, 300])
    engine.process(records([100, 101, 100, 101], times, 1000, 0x0A000001, 0x0A000002, 1, 2))  # both open: at 200, at 300
    # a keeps its setting (a rule added, the tenants swapped); b's threshold changes.
    changed = {
        "tenants": [
            {"name": "b", "vnis": [101], "microburst": dict(mb, threshold="2Gbps")},
            dict(policy["tenants"][0], rules=[{"dst_ports": 9, "action": "drop"}]),
        ]
    }
    engine.update(make_policy(changed))
    [b_event] = engine_rows(engine)  # ended by the update at the latest packet time, T0 + 300
    assert (b_event["tenant"], b_event["start_ns"], b_event["end_ns"], b_event["packets"], b_event["bytes"]) == ("b", T0 + 300, T0 + 300, 1, 1000)
    engine.process(records([100, 101, 101], T0 + np.array([5_000, 5_100, 5_200]), 1000, 0x0A000001, 0x0A000002, 1, 2))
    engine.drain()
    a_event = [e for e in engine_rows(engine) if e["tenant"] == "a"]
    # a's event went on across the update: its window held 0, 200 and 5000 (S = 3000 at 5000) and
    # fell to L when the packet at 200 left, at 10_200.
    assert [(e["start_ns"], e["end_ns"], e["packets"], e["bytes"], e["peak_bps"]) for e in a_event] == [
        (T0 + 200, T0 + 10_200, 2, 2000, 3000 * 8 * 10**9 // 10_000)
    ]
    # b started empty under its new setting (L = 2500 B): 1000 + 1000 at 5100, 5200 never exceed it.
    assert sum(e["tenant"] == "b" for e in engine_rows(engine)) == 1


def test_a_watched_tenant_added_and_removed_between_batches_leaves_the_others_events_as_they_were() -> None:
    """A tenant with a microburst setting put in (before a, as a document does) and taken out again: its events
    start and end as its scope's would in a whole update (ended at the latest packet time), its
    totals stay, and a's event goes on as in an engine that never had it."""
    mb = {"window": "10us", "threshold": "1Gbps"}  # L = 1250 B
    a = {"name": "a", "vnis": [100], "microburst": mb}
    b = {"name": "b", "vnis": [101], "microburst": mb, "rate": "1Gbps", "ceil": "10Gbps"}
    engine, alone = Engine(make_policy({"tenants": [a]})), Engine(make_policy({"tenants": [a]}))
    for e in (engine, alone):
        e.process(records([100, 100], T0 + np.array([0, 100]), 1000, 1, 2, 3, 4))  # a's event opens at 100
    engine.update(make_policy({"tenants": [b, a]}))
    engine.process(records([101, 101, 100], T0 + np.array([200, 300, 400]), 1000, 1, 2, 3, 4))  # b's opens at 300
    alone.process(records([100], T0 + np.array([400]), 1000, 1, 2, 3, 4))
    engine.update(engine.policy.without_tenant("b"))
    [b_event] = engine_rows(engine)  # ended by the removal at the latest packet time
    assert (b_event["tenant"], b_event["start_ns"], b_event["end_ns"], b_event["packets"]) == ("b", T0 + 300, T0 + 400, 1)
    for e in (engine, alone):
        e.drain()
    a_events = lambda e: [{k: v for k, v in row.items() if k != "id"} for row in engine_rows(e) if row["tenant"] == "a"]  # noqa: E731
    assert a_events(engine) == a_events(alone) and len(a_events(alone)) == 1
    stats = {row["tenant"]: row for row in engine.burst_stats() if row["scope"] == "tenant"}
    assert stats["b"]["rate_events"] == 1 and stats["b"]["peak_window_bps"] == 2000 * 8 * 10**9 // 10_000


def test_a_threshold_changed_by_with_tenant_ends_that_tenant_s_event_alone() -> None:
    """with_tenant changing b's threshold: b's event ends at the latest packet time (as in a
    whole update), a's goes on, and b starts empty under its new setting."""
    mb = {"window": "10us", "threshold": "1Gbps"}  # L = 1250 B
    a, b = ({"name": name, "vnis": [vni], "microburst": mb} for name, vni in (("a", 100), ("b", 101)))
    engine, whole = Engine(make_policy({"tenants": [a, b]})), Engine(make_policy({"tenants": [a, b]}))
    changed = dict(b, microburst=dict(mb, threshold="2Gbps"))
    for e, update in ((engine, engine.policy.with_tenant(changed)), (whole, make_policy({"tenants": [a, changed]}))):
        e.process(records([100, 101, 100, 101], T0 + np.array([0, 100, 200, 300]), 1000, 1, 2, 3, 4))  # both open
        e.update(update)
        e.process(records([100, 101, 101], T0 + np.array([5_000, 5_100, 5_200]), 1000, 1, 2, 3, 4))
        e.drain()
    rows = [{k: v for k, v in row.items() if k != "id"} for row in engine_rows(engine)]
    assert rows == [{k: v for k, v in row.items() if k != "id"} for row in engine_rows(whole)]
    assert [(r["tenant"], r["start_ns"], r["end_ns"]) for r in rows] == [("b", T0 + 300, T0 + 300), ("a", T0 + 200, T0 + 10_200)]


def test_update_ends_a_changed_scope_s_event_where_its_window_fell_or_at_the_latest_packet_time() -> None:
    """docs/bursts.md: a changed scope's rate event whose window fell before the latest packet
    time ends when it fell (as drain() would date it); one still above its limit ends at the
    latest packet time."""
    mb = {"window": "10us", "threshold": "1Gbps"}  # L = 1250 B
    policy = {"tenants": [{"name": "a", "vnis": [100], "microburst": mb}, {"name": "b", "vnis": [101]}]}
    engine = Engine(make_policy(policy))
    # a: 1000 B at 0 and 100 (S = 2000 > L: an event from 100); its window falls to L at 0 + 10us.
    # b: a packet 50 us later, so the latest packet time is T0 + 50_000 when a's setting changes.
    engine.process(records([100, 100, 101], T0 + np.array([0, 100, 50_000]), 1000, 0x0A000001, 0x0A000002, 1, 2))
    changed = make_policy({"tenants": [dict(policy["tenants"][0], microburst=dict(mb, threshold="2Gbps")), policy["tenants"][1]]})
    engine.update(changed)
    [event] = engine_rows(engine)
    assert (event["start_ns"], event["end_ns"], event["packets"]) == (T0 + 100, T0 + 10_000, 1)
    # Unchanged, the same event is dated alike, found at the drain.
    again = Engine(make_policy(policy))
    again.process(records([100, 100, 101], T0 + np.array([0, 100, 50_000]), 1000, 0x0A000001, 0x0A000002, 1, 2))
    again.drain()
    assert [(e["start_ns"], e["end_ns"]) for e in engine_rows(again)] == [(T0 + 100, T0 + 10_000)]
    # Still above its limit at the update (b's packet at 5 us): it ends at the latest packet time.
    still = Engine(make_policy(policy))
    still.process(records([100, 100, 101], T0 + np.array([0, 100, 5_000]), 1000, 0x0A000001, 0x0A000002, 1, 2))
    still.update(changed)
    assert [(e["start_ns"], e["end_ns"]) for e in engine_rows(still)] == [(T0 + 100, T0 + 5_000)]


def test_peak_window_rate_across_a_window_change() -> None:
    """peak_window_bps is the highest window rate seen (floor(max S x 8e9 / W)): after a window
    change, the higher of what each setting's window carried, never a rate no window saw."""
    policy = lambda window: {"tenants": [{"name": "a", "vnis": [100], "microburst": {"window": window, "threshold": "100Gbps"}}]}  # noqa: E731
    engine = Engine(make_policy(policy("50us")))
    engine.process(records([100] * 10, T0 + np.arange(10) * 1_000, 1500, 1, 2, 3, 4))  # 15 kB in 10 us
    [before] = engine.burst_stats()
    assert before["peak_window_bps"] == 15_000 * 8 * 10**9 // 50_000 == 2_400_000_000
    engine.update(make_policy(policy("1us")))
    engine.process(records([100], T0 + np.array([100_000]), 1500, 1, 2, 3, 4))  # 1.5 kB in 1 us: 12 Gbit/s
    [after] = engine.burst_stats()
    assert after["window_ns"] == 1_000 and after["rate_events"] == 0
    assert after["peak_window_bps"] == 12_000_000_000, "the higher of what each window carried, not 15 kB / 1 us"


def test_space_saving_bounds_bytes_not_packets() -> None:
    """docs/bursts.md: beyond 32 flows a reported flow's bytes are within error_bytes of its true
    bytes; its packets are an estimate. Flow X sends 2 small packets and is the least counted of
    32 when a 33rd flow takes its counter; X comes back with a third packet and takes over a
    counter of one 1000 B packet: it reports 2 packets for its 3, its bytes within bounds."""
    policy = {"tenants": [{"name": "a", "vnis": [100], "microburst": {"window": "10ms", "threshold": "1bps"}}]}  # L = 1 B
    engine = Engine(make_policy(policy))
    sport = [1, 1] + list(range(2, 33)) + [33, 1]  # X = port 1; 31 flows of 1000 B; Y = port 33; X again
    size = [100, 100] + [1000] * 31 + [1500, 100]
    engine.process(records([100] * len(sport), T0 + np.arange(len(sport)), size, 1, 2, sport, 80))
    engine.drain()
    [event] = engine.bursts()
    flows = engine.burst_flows([int(event["id"])])
    [x] = flows[flows["src_port"] == 1]
    assert int(x["bytes"]) - int(x["error_bytes"]) <= 300 <= int(x["bytes"])
    assert int(x["packets"]) == 2, "the counter's packets before X took it over, plus X's one"


# ---------------------------------------------------------------------------------------------
# 2. Detection quality on generated multi-tenant traffic


def injected_bursts(rng: np.random.Generator, tenants: int, duration_ns: int, window_ns: int, rate_bps: int) -> list[Burst]:
    """Two bursts per tenant, 2 to 10 windows long, far apart (their slots are 200 windows)."""
    slot = 200 * window_ns
    out = []
    for t in range(tenants):
        for k, s in enumerate(np.sort(rng.choice(np.arange(1, duration_ns // slot - 1), 2, replace=False))):
            start = int(s) * slot + int(rng.integers(0, slot // 2))
            flow = (f"10.200.{t}.{k + 1}", f"10.201.{t}.1", 30_000 + k, 5001, int(rng.choice([6, 17])))
            out.append(Burst(t, flow, start, int(rng.integers(2 * window_ns, 10 * window_ns + 1)), rate_bps))
    return out


@pytest.mark.parametrize(
    "window_ns, threshold_bps, background_bps, burst_bps",
    [
        (10_000, 10_000_000_000, 500_000_000, 40_000_000_000),  # L = 12.5 kB; background 5% of the threshold
        (1_000, 40_000_000_000, 200_000_000, 100_000_000_000),  # L = 5 kB: 3 full frames fit, 4 do not
    ],
)
def test_injected_bursts_are_found_on_time_with_their_flow(window_ns: int, threshold_bps: int, background_bps: int, burst_bps: int) -> None:
    rng = np.random.default_rng(window_ns)
    tenants, duration = 50, 40 * 200 * window_ns if window_ns < 10_000 else 20_000_000
    bursts = injected_bursts(rng, tenants, duration, window_ns, burst_bps)
    trace = make_trace(window_ns + 1, tenants, duration, background_bps, bursts, frame_bytes=[114, 576, 1500])
    engine = Engine(make_policy(policy_for(trace, window_ns, threshold_bps)))
    engine.process(trace.batch)
    engine.drain()
    events = engine.bursts()
    names = engine.burst_tenants
    tenant_of = np.array([int(names[t][1:]) for t in events["tenant"]])
    assert (events["scope"] == TENANT).all() and (events["view"] == RATE).all()
    top = {int(r["event"]): r for r in engine.burst_flows(events["id"]) if r["rank"] == 0}
    matched = np.zeros(len(events), dtype=bool)
    for i, burst in enumerate(bursts):
        start = trace.start_ns + burst.start_ns
        end = start + burst.duration_ns
        # A burst's bytes stay in the window for W after its last packet: an event that a
        # background packet starts then (S falls to L and rises again) is the burst's too.
        mine = np.nonzero((tenant_of == burst.tenant) & (events["start_ns"] < end + window_ns) & (events["end_ns"] >= start))[0]
        assert len(mine), f"burst {i} ({burst}) not found"
        matched[mine] = True
        onset, finish = int(events["start_ns"][mine].min()) - start, int(events["end_ns"][mine].max()) - end
        assert abs(onset) <= window_ns and abs(finish) <= window_ns, (i, onset, finish)
        # The burst's event (the one with most of its bytes; S may touch L at its edges and leave
        # a one-packet event beside it) has the injecting flow on top, and nearly all its bytes.
        main = mine[np.argmax(events["bytes"][mine])]
        row = top[int(events["id"][main])]
        assert (bytes(row["src"]), bytes(row["dst"]), int(row["src_port"]), int(row["dst_port"]), int(row["proto"])) == flow_key(*burst.flow)
        sent = int(trace.wire_len[trace.burst == i].sum())
        assert 0.8 * sent <= int(row["bytes"]) <= sent
        assert int(events["peak_bps"][main]) >= threshold_bps
    false_positives = int((~matched).sum())
    assert false_positives <= 0.01 * len(events), (false_positives, len(events))


@pytest.mark.parametrize("window_ns, threshold_bps", [(10_000, 10_000_000_000), (1_000, 40_000_000_000)])
def test_smooth_traffic_at_90_percent_of_the_threshold_is_no_burst(window_ns: int, threshold_bps: int) -> None:
    trace = make_trace(3, 10, 5_000_000, threshold_bps * 9 // 10, smooth=True)
    engine = Engine(make_policy(policy_for(trace, window_ns, threshold_bps)))
    engine.process(trace.batch)
    engine.drain()
    assert len(engine.bursts()) == 0
    stats = [s for s in engine.burst_stats() if s["scope"] == "tenant"]
    assert len(stats) == 10
    for s in stats:  # the window did carry close to 90%: the detector saw the traffic
        assert s["rate_events"] == 0 and 0.8 * threshold_bps < s["peak_window_bps"] <= threshold_bps


# ---------------------------------------------------------------------------------------------
# 3. Batch boundaries and the on_burst callback


def classes_policy(trace: Any) -> dict[str, Any]:
    """Tenants with a rate view, and classes "hot" (UDP/TCP to 5001, the bursts' port) and
    "bulk", "hot" with a rate view of its own (a percentage of its rate)."""
    classes = [{"name": "bulk"}, {"name": "hot", "rate": "4Gbps", "microburst": {"window": "5us", "threshold": "150%"}}]
    policy = policy_for(trace, "10us", "8Gbps", rate="8Gbps", classes=classes)
    for tenant in policy["tenants"]:
        tenant["rules"] = [{"dst_ports": 5001, "class": "hot", "action": "allow"}]
    return policy


def bursty_trace(seed: int, tenants: int = 8, duration_ns: int = 10_000_000) -> Any:
    rng = np.random.default_rng(seed)
    bursts = injected_bursts(rng, tenants, duration_ns, 10_000, 30_000_000_000)
    bursts += [dataclasses.replace(b, start_ns=b.start_ns + 3_000, rate_bps=8_000_000_000, flow=(b.flow[0], b.flow[1], 40_000, 5001, 6)) for b in bursts[::3]]
    return make_trace(seed, tenants, duration_ns, 1_500_000_000, bursts, frame_bytes=[114, 576, 1500])


def test_batches_change_nothing_and_on_burst_gets_each_call_s_events() -> None:
    trace = bursty_trace(21)
    policy = classes_policy(trace)
    parsed = isolane.parse(trace.batch)

    whole = Engine(make_policy(policy))
    whole.process(trace.batch)  # a PacketBatch, parsed as it goes
    whole.drain()
    assert len(whole.bursts()) > 20 and (whole.bursts()["scope"] == CLASS).any()

    rng = np.random.default_rng(0)
    cuts = np.sort(rng.choice(np.arange(1, len(parsed)), 200, replace=False))
    cuts = np.concatenate([cuts, [cuts[5], cuts[5] + 1]])  # an empty batch and one of one packet
    cuts.sort()
    handed: list[np.ndarray] = []
    calls: list[int] = []  # the call during which each handing came
    split = Engine(make_policy(policy), on_burst=lambda events: handed.append(events.copy()) or calls.append(call))
    ref = UpdatingReference(policy)
    for call, part in enumerate(np.split(parsed, cuts)):  # noqa: B007 (the on_burst callback above reads `call`)
        before = len(handed)
        ended = ref.feed(part, split.process(part))
        # The callback came once, with the events that ended during this call, or not at all.
        assert len(handed) - before == (1 if ended else 0)
        if ended:
            got = engine_rows(split, handed[-1])
            want = reference_rows(ref)[-len(ended) :]
            assert got == want
    call = len(cuts) + 1
    ended = ref.drain()
    split.drain()
    assert calls[-1] == call and len(handed[-1]) == len(ended)

    assert (np.concatenate(handed) == split.bursts()).all()
    assert (split.bursts() == whole.bursts()).all()
    ids = whole.bursts()["id"]
    assert (split.burst_flows(ids) == whole.burst_flows(ids)).all()
    assert split.burst_stats() == whole.burst_stats()
    engine_id = assert_same_events(engine_rows(whole), reference_rows(ref), ref.steps)
    assert assert_same_flows(whole, ref, engine_id) == len(ids)


# ---------------------------------------------------------------------------------------------
# 4. Detection changes no verdict


def without_microbursts(policy: dict[str, Any]) -> dict[str, Any]:
    strip = lambda d: {k: v for k, v in d.items() if k != "microburst"}  # noqa: E731
    out = dict(policy, tenants=[dict(strip(t), classes=[strip(c) for c in t.get("classes", [])]) for t in policy["tenants"]])
    if "port" in out:
        out["port"] = strip(out["port"])
    return out


def contracts(policy: dict[str, Any], port: bool) -> dict[str, Any]:
    """Meters (drops and re-marks), shapers (delays and drops) and perhaps a tight port, on
    ``classes_policy``, with queue views where there is a port."""
    policy = dict(policy, tenants=[dict(t, classes=[dict(c) for c in t["classes"]]) for t in policy["tenants"]])
    for i, tenant in enumerate(policy["tenants"]):
        if i % 2 == 0:
            tenant["meter"] = {"kind": "srtcm", "cir": "3Gbps", "cbs": "30kB", "ebs": "30kB", "actions": {"yellow": {"remark": "af12"}, "red": "drop"}}
        if i % 3 == 0:
            tenant["shaper"] = {"rate": "6Gbps", "burst": "20kB", "queue": "40kB"}
        if i % 4 == 1:
            tenant["classes"][1]["shaper"] = {"rate": "5Gbps", "max_delay": "20us"}
        tenant["rate"] = "4Gbps"
        tenant["classes"][1]["rate"] = "2Gbps"
        if port:
            tenant["microburst"]["queue"] = "32KiB"
            tenant["classes"][0]["microburst"] = {"window": "20us", "threshold": "1Gbps", "queue": {"rise": "16KiB", "fall": "0B"}}
    if port:
        policy["port"] = {"rate": "40Gbps", "buffer": "256KiB", "microburst": {"window": "10us", "threshold": "60%", "queue": "96KiB"}}
    return policy


@pytest.mark.parametrize("port", [False, True], ids=["no port", "port"])
def test_detection_changes_no_verdict_and_every_packet_has_one_outcome(port: bool) -> None:
    trace = bursty_trace(33)
    watched = contracts(classes_policy(trace), port)
    results = []
    for policy in (watched, without_microbursts(watched)):
        engine = Engine(make_policy(policy))
        rng = np.random.default_rng(1)
        parsed = isolane.parse(trace.batch)
        cuts = np.sort(rng.choice(np.arange(1, len(parsed)), 30, replace=False))
        rows = np.concatenate([engine.process(part) for part in np.split(parsed, cuts)])
        engine.drain()
        results.append((rows, engine.stats(), engine))
    (rows, stats, engine), (plain_rows, plain_stats, plain) = results
    assert (rows == plain_rows).all()
    qos = lambda entries: [{k: v for k, v in e.items() if k != "microburst"} for e in entries]  # noqa: E731
    assert qos(stats) == qos(plain_stats)
    assert any(e["microburst"]["tenant"] for e in stats) and not any(e["microburst"]["tenant"] for e in plain_stats)
    assert len(engine.bursts()) > len(plain.bursts())  # one watched the tenants and classes, the other not
    assert (plain.bursts()["scope"] == PORT).all()  # a port is watched by default: 10us at the line rate
    for policy, e in ((watched, engine), (without_microbursts(watched), plain)):
        settings_seen = {(s["scope"], s["tenant"], s["cls"]): (s["window_ns"], s["threshold_bps"]) for s in e.burst_stats()}
        names = [t["name"] for t in policy["tenants"]]
        expected = {
            (SCOPE_NAMES[x.scope], names[x.tenant] if x.tenant >= 0 else None, x.cls if x.cls >= 0 else None): (x.window_ns, x.threshold_bps)
            for x in scopes_from_dict(policy)
        }
        assert settings_seen == expected
    outcomes = Counter(Outcome(o).name.lower() for o in rows["outcome"])
    assert outcomes["drop_meter"] and outcomes["remarked"] and outcomes["drop_shaper_bytes"] + outcomes["drop_shaper_time"]
    if port:
        assert outcomes["pending"]  # the port decides them later, in stats()
        assert sum(s["outcomes"]["drop_port_queue"]["packets"] + s["outcomes"]["drop_port_buffer"]["packets"] for s in stats)
    for s in stats:  # every packet in has exactly one fate, the drain left none in flight
        assert s["in_flight"] == 0
        assert s["packets"] == sum(v["packets"] for v in s["outcomes"].values())
    assert sum(s["packets"] for s in stats) == len(trace)


# ---------------------------------------------------------------------------------------------
# 5. The queue view at a port


class LoggingPort(port_reference.Port):
    """The port reference, logging admissions and transmission starts in the order they happen:
    (tick, +bytes or -bytes, queue)."""

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.log: list[tuple[int, int, int]] = []

    def arrive(self, ns: int, size: int, queue: int, packet: int) -> None:
        super().arrive(ns, size, queue, packet)
        if self.verdicts[packet] is None:
            self.log.append((self.now, size, queue))

    def start(self, packet: int, queue: int, size: int) -> None:
        super().start(packet, queue, size)
        self.log.append((self.now, -size, queue))


def queue_events(port: LoggingPort, queues: set[int], rise: int, fall: int) -> list[tuple[int, int, int]]:
    """(start ns, end ns, deepest D) of the queue view of the scope made of ``queues``: from the
    admission after which D > rise to the transmission start after which D <= fall."""
    depth, open_at, deepest, out = 0, None, 0, []
    for tick, delta, queue in port.log:
        if queue not in queues:
            continue
        depth += delta
        ns = -(-tick // port.line_rate)
        if delta > 0 and open_at is None and depth > rise:
            open_at, deepest = ns, depth
        deepest = max(deepest, depth)
        if delta < 0 and open_at is not None and depth <= fall:
            out.append((open_at, ns, deepest))
            open_at = None
    assert open_at is None  # the port sent everything
    return out


def run_port_reference(policy: dict[str, Any], trace: Any, rows: np.ndarray) -> LoggingPort:
    """Every packet that passed meters and shapers (none here) reaches the port at its release."""
    qos = make_policy(policy).compile_qos()
    port = LoggingPort(qos.port_rate, qos.port_buffer, False, port_reference.port_queues(qos))
    sizes = packet_bytes(policy.get("count", "outer"), trace.wire_len.astype(np.int64), trace.wire_len.astype(np.int64) - 50)
    for i in np.argsort(rows["release_ns"], kind="stable"):
        if rows["release_ns"][i] >= 0 and rows["cls"][i] >= 0:
            port.arrive(int(rows["release_ns"][i]), int(sizes[i]), qos.class_row(int(rows["tenant"][i]), int(rows["cls"][i])), int(i))
    port.advance(None)
    return port


def test_a_burst_that_fills_its_queue_opens_a_queue_event_until_the_queue_drains() -> None:
    # t1 sends 40 Gbit/s for 300 us into a 10 Gbit/s port with a 1 MiB buffer: its queue grows
    # at 30 Gbit/s to its dynamic threshold (alpha 1: about half the buffer) and drops there.
    victim = Burst(1, ("10.200.1.1", "10.201.1.1", 30_000, 5001, 17), 1_000_000, 300_000, 40_000_000_000)
    trace = make_trace(4, 4, 3_000_000, 200_000_000, [victim], frame_bytes=[114, 1500])
    classes = [
        {"name": "bulk", "rate": "1Gbps", "microburst": {"window": "10us", "threshold": "5Gbps", "queue": {"rise": "48KiB", "fall": "16KiB"}}},
        {"name": "hot", "rate": "1Gbps", "microburst": {"window": "10us", "threshold": "5Gbps", "queue": "1KiB"}},  # no traffic
    ]
    port = {"rate": "10Gbps", "buffer": "1MiB", "microburst": {"window": "10us", "threshold": "50%", "queue": "256KiB"}}
    policy = policy_for(trace, "10us", "5Gbps", rate="2Gbps", port=port, classes=classes)
    for tenant in policy["tenants"]:
        tenant["microburst"]["queue"] = "64KiB"  # rise 64 KiB, fall (by default) half of it
    engine = Engine(make_policy(policy))
    rows = engine.process(trace.batch)
    engine.drain()
    events = engine_rows(engine)
    stats = {(s["scope"], s["tenant"], s["cls"]): s for s in engine.burst_stats()}
    assert stats[("tenant", "t1", None)]["queue"] == (65_536, 32_768)
    port_drops = {s["tenant"]: s["outcomes"]["drop_port_queue"]["packets"] + s["outcomes"]["drop_port_buffer"]["packets"] for s in engine.stats()}
    assert port_drops["t1"] > 100 and sum(port_drops.values()) == port_drops["t1"]

    reference = run_port_reference(policy, trace, rows)
    assert sum(v is not None for v in reference.verdicts.values()) == port_drops["t1"]
    burst_start = trace.start_ns + victim.start_ns
    last_burst_packet = int(trace.timestamps_ns[trace.burst == 0].max())
    t1_queues = {0 + 2, 1 + 2}  # tenant 1's classes are port queues 2 and 3
    for scope, tenant, cls, queues, rise, fall in [
        (TENANT, "t1", -1, t1_queues, 65_536, 32_768),
        (CLASS, "t1", 0, {2}, 48 * 1024, 16 * 1024),
        (PORT, None, -1, set(range(8)), 256 * 1024, 128 * 1024),
    ]:
        [event] = [e for e in events if (e["scope"], e["view"], e["tenant"], e["cls"]) == (scope, QUEUE, tenant, cls)]
        [(start, end, deepest)] = queue_events(reference, queues, rise, fall)
        assert (event["start_ns"], event["end_ns"], event["max_queue_bytes"]) == (start, end, deepest), (scope, event)
        assert burst_start < start < last_burst_packet < end and deepest > rise
        # Every port drop of t1 came while its queue was full, so inside this event.
        assert event["drop_port_queue"] + event["drop_port_buffer"] == event["dropped"] == port_drops["t1"]
        # It counts the scope's packets from the first after its start to the last before its end.
        mine = (trace.timestamps_ns > start) & (trace.timestamps_ns < end)
        if scope != PORT:
            mine &= trace.tenant == 1
        assert event["packets"] == int(mine.sum())
    for (scope, tenant, cls), s in stats.items():
        assert s["queue_events"] == (1 if tenant in ("t1", None) and cls in (None, 0) else 0), (scope, tenant, cls)
        if tenant != "t1" and scope != "port":
            assert s["max_queue_bytes"] < 64 * 1024
    assert stats[("tenant", "t1", None)]["max_queue_bytes"] == max(d for *_, d in queue_events(reference, t1_queues, 0, 0))
    # The rate view saw the burst too, with the same drops.
    [rate] = [e for e in events if (e["scope"], e["view"], e["tenant"]) == (TENANT, RATE, "t1")]
    assert rate["peak_bps"] >= 40_000_000_000 and rate["drop_port_queue"] == port_drops["t1"]


# ---------------------------------------------------------------------------------------------
# 6. A real capture


def test_the_ten_udp_microbursts_of_the_real_capture(real_pcaps: Any) -> None:
    """kernel_vxlan.pcap, VNI 100: 10 bursts of 32 UDP datagrams (1000 B of payload, 1092 B
    frames) from 10.100.0.1:40000 to 10.100.0.2:5001, about 5 ms apart, each within 0.35-0.88 ms.
    At 1 ms and 100 Mbit/s (L = 12,500 B) each is one rate event; as the doc counts an event's
    packets from the one that started it, each holds the datagrams from the 12th on (11 x 1092 B
    fit under L): 21 of the 32, and all of their bytes are the one flow's."""
    path = real_pcaps / "kernel_vxlan.pcap"
    if not path.exists():
        pytest.skip(f"{path} not found (../shared/pcaps/real)")
    batch = isolane.read_pcap(path)
    parsed = isolane.parse(batch)
    udp = (parsed["tunnel"] != 0) & (parsed["vni"] == 100) & (parsed["proto"] == 17) & (parsed["dst_port"] == 5001) & ~parsed["is_fragment"]
    assert udp.sum() == 320 and set(parsed["wire_len"][udp]) == {1092} and set(parsed["src_port"][udp]) == {40000}
    clock = np.maximum.accumulate(parsed["timestamp_ns"])  # time as enforced
    times = clock[udp]
    groups = np.split(np.arange(320), np.nonzero(np.diff(times) > 2_000_000)[0] + 1)
    assert [len(g) for g in groups] == [32] * 10
    assert all(200_000 < times[g[-1]] - times[g[0]] < 1_000_000 for g in groups)

    policy = {
        "tenants": [
            {
                "name": "training",
                "vnis": [100],
                "classes": [{"name": "control"}, {"name": "allreduce", "microburst": {"window": "1ms", "threshold": "100Mbps"}}],
                "rules": [{"proto": "udp", "dst_ports": 5001, "action": "allow", "class": "allreduce"}],
            },
            {"name": "inference", "vnis": [200]},
        ]
    }
    engine = Engine(make_policy(policy))
    ref = UpdatingReference(policy)
    ref.feed(parsed, engine.process(batch))
    engine.drain()
    ref.drain()
    events = engine_rows(engine)
    assert all((e["scope"], e["view"], e["tenant"], e["cls"]) == (CLASS, RATE, "training", 1) for e in events)
    assert len(events) == 10
    limit = 100_000_000 * 1_000_000 // 8_000_000_000
    before = limit // 1092  # datagrams of a burst in its window before the one that starts the event
    assert (limit, before) == (12_500, 11)
    for event, group in zip(events, groups):
        assert event["packets"] == 32 - before == 21 and event["bytes"] == 21 * 1092
        assert event["start_ns"] == times[group[before]]
        # The window falls to L when only 11 datagrams are left in it: as the 21st leaves.
        assert event["end_ns"] == times[group[20]] + 1_000_000
        assert event["peak_bps"] == 32 * 1092 * 8 * 10**9 // 1_000_000 and event["flows"] == 1
    flows = engine.burst_flows([e["id"] for e in events])
    assert len(flows) == 10 and (flows["rank"] == 0).all() and (flows["error_bytes"] == 0).all()
    for row, event in zip(flows, events):
        assert bytes(row["src"]) == bytes(10) + b"\xff\xff" + bytes([10, 100, 0, 1])
        assert bytes(row["dst"]) == bytes(10) + b"\xff\xff" + bytes([10, 100, 0, 2])
        assert (int(row["src_port"]), int(row["dst_port"]), int(row["proto"])) == (40000, 5001, 17)
        assert (int(row["packets"]), int(row["bytes"])) == (event["packets"], event["bytes"])
    engine_id = assert_same_events(events, reference_rows(ref), ref.steps)
    assert assert_same_flows(engine, ref, engine_id) == 10
    [stats] = [s for s in engine.burst_stats() if s["scope"] == "class"]
    assert stats["rate_events"] == 10 and stats["class"] == "allreduce"


# ---------------------------------------------------------------------------------------------
# 7. Bad input


@pytest.mark.parametrize(
    "policy, place, words",
    [
        ({"tenants": [{"name": "a", "microburst": {"window": "0.5us", "threshold": "1Gbps"}}]}, "tenants[0].microburst.window", "1us to 10ms"),
        ({"tenants": [{"name": "a", "microburst": {"window": "20ms", "threshold": "1Gbps"}}]}, "tenants[0].microburst.window", "1us to 10ms"),
        ({"tenants": [{"name": "a", "microburst": {"window": "10us", "threshold": "50%"}}]}, "tenants[0].microburst.threshold", "tenants[0].rate"),
        (
            {"tenants": [{"name": "a", "rate": "1Gbps", "classes": [{"name": "x", "microburst": {"window": "10us", "threshold": "50%"}}]}]},
            "tenants[0].classes[0].microburst.threshold",
            "tenants[0].classes[0].rate",
        ),
        ({"tenants": [{"name": "a", "microburst": {"window": "10us", "threshold": "1Gbps", "queue": "64KiB"}}]}, "tenants[0].microburst.queue", "no port"),
        (
            {
                "port": {"rate": "10Gbps", "buffer": "1MiB"},
                "tenants": [{"name": "a", "microburst": {"window": "10us", "threshold": "1Gbps", "queue": {"rise": "16KiB", "fall": "32KiB"}}}],
            },
            "tenants[0].microburst.queue.fall",
            "above the rise",
        ),
        (
            {"port": {"rate": "10Gbps", "buffer": "1MiB", "microburst": {"window": "10us", "threshold": "50%", "quue": "1MiB"}}, "tenants": []},
            "port.microburst.quue",
            "queue",
        ),
        ({"tenants": [{"name": "a", "microburst": {"window": "10us"}}]}, "tenants[0].microburst", "threshold"),
    ],
)
def test_bad_microburst_settings_are_policy_errors_naming_the_place(policy: dict[str, Any], place: str, words: str) -> None:
    with pytest.raises(PolicyError) as caught:
        make_policy(policy)
    places = {path: message for path, message in caught.value.errors}
    assert place in places, caught.value.errors
    assert words in places[place], places[place]


def test_polling_intervals_must_be_multiples_of_the_shortest() -> None:
    policy = make_policy({"tenants": [{"name": "a", "microburst": {"window": "10us", "threshold": "1Gbps"}}]})
    with pytest.raises(ValueError, match="multiple of the shortest"):
        Engine(policy, poll=["2ms", "3ms"])
    with pytest.raises(ValueError, match="polling interval"):
        Engine(policy, poll=["0ms"])
    with pytest.raises(ValueError, match="twice"):
        Engine(policy, poll=["1ms", "1000us"])
    engine = Engine(policy, poll=["1ms", "3ms"])  # 3 ms is a multiple of 1 ms
    engine.process(records([1], T0 + np.array([0]), 100, 1, 2, 3, 4))
    [stats] = engine.burst_stats()
    assert sorted(stats["polls"]) == [1_000_000, 3_000_000]
