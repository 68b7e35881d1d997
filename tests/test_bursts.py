"""Microburst detection in the engine (docs/bursts.md) against the plain reference
(burst_reference.py) and the spec: random traces event by event, detection quality on generated
multi-tenant traffic, batch boundaries and the on_burst callback, verdicts untouched, the queue
view at a port, a real capture, and the errors bad settings get."""

from __future__ import annotations

import dataclasses
import time
import warnings
from collections import Counter
from fractions import Fraction
from typing import Any

import numpy as np
import pytest
from burst_reference import (
    CLASS, DEFAULT_INTERVALS_NS, EVENT_FIELDS, PORT, QUEUE, RATE, TENANT, BurstReference, Event, RecordFlows, ScopeSpec,
    _Scope, flow_key, packet_bytes, scopes_from_dict,
)  # fmt: skip
from burst_traffic import Burst, make_trace, policy_for
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import isolane
from isolane import BURST_DTYPE, BURST_FLOW_DTYPE, Engine, Outcome, Policy, PolicyError

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
    time seen (its window first empties of what has left it by then: an event whose window fell
    to L earlier ended then, as the rate view dates it); a new one starts empty."""

    def __init__(self, policy: dict[str, Any], intervals_ns: tuple[int, ...] = DEFAULT_INTERVALS_NS) -> None:
        super().__init__([], intervals_ns)
        self.intervals_ns = intervals_ns
        self.names: list[str] = []  # event.tenant indexes this (-1: the port)
        self.steps: list[str] = []  # per event: "packet", or "update #k" / "drain #k" (which one)
        self.count = policy.get("count", "outer")
        self._install(policy)

    def _name_id(self, name: str) -> int:
        if name not in self.names:
            self.names.append(name)
        return self.names.index(name)

    def _install(self, policy: dict[str, Any]) -> list[Event]:
        names = [t["name"] for t in policy["tenants"]]
        old = {(s.spec.scope, self.names[s.spec.tenant] if s.spec.tenant >= 0 else None, s.spec.cls): s for s in self.scopes}
        placed: list[tuple[ScopeSpec, _Scope]] = []
        for spec in scopes_from_dict(policy):
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
        for scope in old.values():  # changed or gone
            if self.clock is not None:
                scope._leave_until(self.clock, ended)
            if scope.open is not None:
                scope.open.end_ns = self.clock
                ended.append(scope.open)
                scope.open = None
        for name in names:
            self._name_id(name)
        self.scopes = [scope for _, scope in placed]
        self.port = next((s for spec, s in placed if spec.scope == PORT), None)
        self.tenants = {spec.tenant: s for spec, s in placed if spec.scope == TENANT}
        self.classes = {(spec.tenant, spec.cls): s for spec, s in placed if spec.scope == CLASS}
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
        for scope in self.scopes:
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


def assert_same_events(got: list[dict[str, Any]], want: list[dict[str, Any]], steps: list[str]) -> None:
    """Event for event, in id order. The spec numbers events "in the order events end"; the
    order among the events one update or one drain ends is not fixed by it, so within each such
    step the events are compared as a set (each must still take an id of that step)."""
    assert len(got) == len(want), (len(got), len(want), got[len(want) :] or want[len(got) :])
    i = 0
    while i < len(want):
        j = i + 1
        if steps[i] == "packet":
            assert got[i] == want[i], f"event {i}:\n got {got[i]}\nwant {want[i]}"
        else:
            while j < len(want) and steps[j] == steps[i]:
                j += 1
            assert [r["id"] for r in got[i:j]] == list(range(i, j))
            g = sorted((dict(r, id=None) for r in got[i:j]), key=event_key)
            w = sorted((dict(r, id=None) for r in want[i:j]), key=event_key)
            assert g == w, f"events {i}..{j - 1} ({steps[i]}):\n got {g}\nwant {w}"
        i = j


def assert_same_flows(engine: Engine, ref: UpdatingReference) -> int:
    """Top flows of every event: exact (as the reference counts them) while an event has at most
    32 distinct flows; beyond that, within Space-Saving's bounds. Returns how many were exact."""
    exact = 0
    events = ref.events
    flows = engine.burst_flows(np.arange(len(events)))
    by_event: dict[int, list[np.void]] = {}
    for row in flows:
        by_event.setdefault(int(row["event"]), []).append(row)
    for event in events:
        got = by_event.get(event.id, [])
        assert [int(r["rank"]) for r in got] == list(range(len(got)))
        assert len(got) == event.flows
        rows = [((bytes(r["src"]), bytes(r["dst"]), int(r["src_port"]), int(r["dst_port"]), int(r["proto"])), int(r["packets"]), int(r["bytes"]), int(r["error_bytes"])) for r in got]
        if len(event.flow_counts) <= 32:
            assert [(k, p, b) for k, p, b, _ in rows] == event.top_flows(), f"event {event.id}"
            assert all(e == 0 for *_, e in rows)
            exact += 1
        else:
            for key, packets, nbytes, error in rows:
                true_packets, true_bytes = event.flow_counts.get(key, [0, 0])
                assert true_bytes <= nbytes <= true_bytes + error and true_packets <= packets
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
        threshold = f"{Fraction(quarter_percents, 4).__float__():g}%"
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
    n = pick.integer(1, 400)
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
    assert_same_events(engine_rows(engine), reference_rows(ref), ref.steps)
    assert_same_flows(engine, ref)
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
        assert got["peak_window_bps"] >= want["peak_window_bps"]  # over every setting the scope had
        for interval, view in want["polls"].items():
            assert {k: got["polls"][interval][k] for k in view} == view, (key, interval)
            assert got["polls"][interval]["queue_polls"] == 0


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.data())
def test_engine_events_equal_the_reference_on_random_traces(data: st.DataObject) -> None:
    case = random_case(Pick(data))
    engine, ref, _ = run_case(case)
    check_case(engine, ref)
