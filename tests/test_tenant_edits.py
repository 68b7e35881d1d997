"""One-tenant edits (``Policy.with_tenant`` / ``without_tenant``) and updates that cost what
changed: an engine that went through edits equals an engine built fresh from the final policy,
the policy equals the one read from its own document, and traffic across updates loses nothing."""

from __future__ import annotations

import random
import warnings
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import isolane
from isolane import Engine, Policy, PolicyError, PolicyWarning
from isolane import policy as P
from isolane.policy.claims import WeightBasis
from isolane.policy.diff import aligned, tenant_changes
from isolane.policy.qos import qos_context, tenant_qos

RATES = ("10Mbps", "20Mbps", "30Mbps", "40Mbps")


def tenant_doc(name: str, vni: int, draw: st.DrawFn, profiles: bool = False) -> dict[str, Any]:
    """A tenant; with ``profiles`` (the port has an overload setting) perhaps with a microburst
    scope and a burst profile, or an overload profile."""
    doc: dict[str, Any] = {"name": name, "vnis": [vni]}
    if draw(st.booleans()):
        doc["rate"] = draw(st.sampled_from(RATES))
    if draw(st.booleans()):
        doc["meter"] = {"kind": "srtcm", "cir": draw(st.sampled_from(RATES))}
    if profiles and draw(st.booleans()):
        doc["microburst"] = {"window": "10us", "threshold": "5Gbps"}
        doc["on_burst"] = {"meter": {"kind": "srtcm", "cir": "5Mbps"}, "hold": "1ms"}
    if profiles and draw(st.booleans()):
        doc["on_overload"] = {"meter": {"kind": "srtcm", "cir": draw(st.sampled_from(RATES))}}
    if draw(st.booleans()):
        doc["classes"] = [{"name": "bulk", "priority": 5}, {"name": "rpc", "priority": 1, "weight": draw(st.integers(1, 4))}]
        doc["default_class"] = "bulk"
    ports = draw(st.lists(st.integers(1, 2000), max_size=3))
    doc["rules"] = [{"dst_ports": p, "proto": "tcp", "action": draw(st.sampled_from(("allow", "drop")))} for p in ports]
    return doc


PORT_CHANGES = (
    {"rate": "1Gbps"},
    {"rate": "2Gbps"},
    {"rate": "100Gbps"},
    {"buffer": "8MB"},
    {"buffer": "16MB"},
    {"mode": "shared_fifo"},
    {"mode": "per_tenant"},
    {"microburst": {"window": "20us", "threshold": "50%"}},
    {"microburst": {"window": "10us", "threshold": "100%"}},
)
"""Each a change of one of the port's own settings (the engine takes them in place)."""


@st.composite
def edit_runs(draw: st.DrawFn) -> tuple[dict[str, Any], list[tuple[str, Any]]]:
    """A policy document and a sequence of edits: ("with", tenant document), ("without", name)
    or ("port", the port's settings), each with whether the engine is updated after it (and
    always after the last)."""
    count = draw(st.integers(1, 6))
    # At 1 Gbps the traffic between updates queues at the port (8 us a packet, 1 us apart): a
    # tenant removed then has packets there.
    port = {"rate": draw(st.sampled_from(("100Gbps", "1Gbps"))), "buffer": "16MB"} if draw(st.booleans()) else None
    profiles = port is not None and draw(st.booleans())
    if profiles:
        port["overload"] = {"above": "50%", "below": "10%"}
    doc: dict[str, Any] = {"tenants": [tenant_doc(f"t{i}", 100 + i, draw, profiles) for i in range(count)]}
    if port:
        doc["port"] = port
    names = [f"t{i}" for i in range(count)]
    edits: list[tuple[str, Any, bool]] = []
    for step in range(draw(st.integers(1, 8))):
        update = draw(st.booleans())
        if port and draw(st.integers(0, 4)) == 0:  # the port's own settings, as a document read again gives them
            port = {**port, **draw(st.sampled_from(PORT_CHANGES))}
            edits.append(("port", port, update))
            continue
        if names and draw(st.integers(0, 3)) == 0:
            name = draw(st.sampled_from(names))
            names.remove(name)
            edits.append(("without", name, update))
            continue
        name = draw(st.sampled_from(names + [f"n{step}"]))
        if name not in names:
            names.append(name)
        vni = 100 + int(name[1:]) + (1000 if name[0] == "n" else 0)
        edits.append(("with", tenant_doc(name, vni, draw, profiles), update))
    return doc, edits


def traffic(vnis: list[int]) -> np.ndarray:
    """TCP packets of every VNI (and one no tenant has) to a few ports, 1 us apart."""
    ports = [1, 80, 443, 1000, 2000, 3000]
    rows = np.zeros(len(vnis) * len(ports) + 1, dtype=isolane.PARSED_DTYPE)
    rows["vni"] = [v for v in vnis for _ in ports] + [999_999]
    rows["dst_port"] = ports * len(vnis) + [80]
    rows["tunnel"] = isolane.Tunnel.VXLAN
    rows["ip_version"] = 4
    rows["proto"] = 6
    rows["wire_len"] = rows["inner_len"] = 1000
    rows["dst"][:, 10:12] = 0xFF
    rows["timestamp_ns"] = np.arange(len(rows)) * 1000
    return rows


def quietly(make: Any) -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PolicyWarning)
        return make()


def tables_of(policy: Policy) -> list[tuple[str, str, tuple[int, ...]]]:
    return [(t.name, t.fingerprint, t.vnis) for t in policy.compile().tenants]


def delays_by_key(engine: Engine) -> dict[tuple[str | None, int], int]:
    """The sum of the port's queueing delays (ns) by (tenant, class) of the statistics rows."""
    found = engine.delay_histograms()
    return {(found.tenants[row["tenant"]] if row["tenant"] >= 0 else None, int(row["cls"])): total for row, total in zip(found.rows, found.sum_ns)}


def counts_by_key(engine: Engine) -> dict[tuple[str | None, int | None], tuple[int, ...]]:
    """Packets and bytes in, and packets by colour, by (tenant, class) of the engine's statistics."""
    return {(e["tenant"], e["cls"]): (e["packets"], e["bytes"], *(c["packets"] for c in e["colors"].values())) for e in engine.stats()}


def edit(policy: Policy, written: dict[str, dict[str, Any]], op: str, arg: Any) -> Policy:
    """``policy`` edited; ``written``: its tenants as written (by name, in order), which a port
    edit reads again as a document under the new port, as a policy file read again is."""
    if op == "port":
        return Policy.from_dict({"port": arg, "tenants": list(written.values())})
    if op == "with":
        written[arg["name"]] = arg
        return policy.with_tenant(arg)
    del written[arg]
    return policy.without_tenant(arg)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(edit_runs())
def test_an_engine_that_went_through_edits_equals_one_built_from_the_final_policy(run: tuple[dict[str, Any], list[tuple[str, Any, bool]]]) -> None:
    """Edits one by one, or several in one update (tenants put in, taken out and replaced in
    one go), the port's own settings changed among them, with traffic between updates."""
    doc, edits = run
    policy = quietly(lambda: Policy.from_dict(doc))
    written = {tenant["name"]: tenant for tenant in doc["tenants"]}
    edited = Engine(policy)
    vnis = sorted({v for step in [doc["tenants"], *[[e[1]] for e in edits if e[0] == "with"]] for t in step for v in t["vnis"]})
    packets = traffic(vnis)
    processed = 0
    for k, (op, arg, update) in enumerate(edits):
        policy = quietly(lambda before=policy, op=op, arg=arg: edit(before, written, op, arg))
        if update or k == len(edits) - 1:
            edited.update(policy)
            edited.process(packets)  # traffic between updates
            processed += len(packets)
    fresh = Engine(policy)
    for field in ("tenant", "rule", "cls", "action", "reason"):
        np.testing.assert_array_equal(edited.classify(packets)[field], fresh.classify(packets)[field], err_msg=field)
    # Long after the traffic (buckets full, queues empty), both enforce the same contracts.
    edited.drain()
    later = np.repeat(packets, 20)  # 20 KB at once per VNI and port: meters and shapers tell their rates
    later["timestamp_ns"] = 10**12
    counted_before, delayed_before = counts_by_key(edited), delays_by_key(edited)
    edited_rows, fresh_rows = edited.process(later), fresh.process(later)
    for field in ("color", "outcome", "dscp", "release_ns"):
        np.testing.assert_array_equal(edited_rows[field], fresh_rows[field], err_msg=field)
    # The port sends them in the same order (its weights, priorities and buckets the same): the same delays.
    edited.drain()
    fresh.drain()
    delayed = {key: total - delayed_before.get(key, 0) for key, total in delays_by_key(edited).items()}
    assert {key: total for key, total in delayed.items() if total} == {key: total for key, total in delays_by_key(fresh).items() if total}
    # The statistics rows take the same packets under the same (tenant, class) as the fresh engine's.
    counted_after = counts_by_key(edited)
    counted_later = {key: tuple(a - b for a, b in zip(value, counted_before.get(key, (0,) * len(value)))) for key, value in counted_after.items()}
    assert {key: value for key, value in counted_later.items() if value[0]} == counts_by_key(fresh)
    processed += len(later)
    # The same policy read from its own document compiles to the same tables and QoS arrays.
    reread = quietly(lambda: Policy.from_dict(policy.to_dict()))
    assert reread == policy
    assert tables_of(reread) == tables_of(policy)
    for name in ("tenant_rate", "tenant_burst", "tenant_ceil", "tenant_weight", "class_rate", "class_ceil", "class_weight", "class_priority"):
        np.testing.assert_array_equal(getattr(reread.compile_qos(), name), getattr(policy.compile_qos(), name), err_msg=name)
    # Nothing lost: every packet processed is in the statistics, across every update.
    counted = sum(entry["packets"] for entry in edited.stats())
    assert counted == processed


def test_an_unchanged_tenant_keeps_its_meter_state_and_counters_across_an_edit() -> None:
    doc = {"tenants": [{"name": "a", "vnis": [1], "meter": {"kind": "srtcm", "cir": "8Mbps", "cbs": "3000B", "ebs": "0B"}}, {"name": "b", "vnis": [2]}]}
    policy = Policy.from_dict(doc)
    engine = Engine(policy)
    burst = traffic([1])[:1].repeat(3)  # three 1000 B packets at once: the 3000 B bucket empties
    burst["timestamp_ns"] = 0
    assert (engine.process(burst)["outcome"] == isolane.Outcome.PASS).all()
    engine.update(policy.with_tenant({"name": "b", "vnis": [2], "rules": [{"dst_ports": 22, "action": "drop"}]}))
    again = burst[:1].copy()
    again["timestamp_ns"] = 1000  # 1 us later: 1 byte of tokens, not 1000
    assert engine.process(again)["outcome"].tolist() == [isolane.Outcome.DROP_METER]
    assert isolane.engine.UpdateReport(kept=1, incremental=1, rebuilt=0) == engine.update(engine.policy.with_tenant({"name": "b", "vnis": [2]}))
    totals = {e["tenant"]: e["packets"] for e in engine.stats() if e["cls"] is not None or e["tenant"] is None}
    assert sum(totals.values()) == 4


def test_a_tenant_removed_from_the_middle_leaves_the_others_meters_queues_and_counters_in_place() -> None:
    tenants = [{"name": f"t{i}", "vnis": [i], "meter": {"kind": "srtcm", "cir": "8Mbps", "cbs": "3000B", "ebs": "0B"}, "rate": "1Gbps"} for i in range(4)]
    policy = Policy.from_dict({"tenants": tenants, "port": {"rate": "10Gbps", "buffer": "1MB"}})
    engine = Engine(policy)
    burst = traffic([0, 2, 3])[:-1:6].repeat(3)  # three 1000 B packets at once per tenant but t1: each bucket empties
    burst["timestamp_ns"] = 0
    engine.process(burst)
    engine.drain()
    before = counts_by_key(engine)
    engine.update(policy.without_tenant("t1"))
    assert counts_by_key(engine) == before
    again = burst[::3].copy()
    again["timestamp_ns"] = 1000  # 1 us later: 1 byte of tokens, not 1000
    processed = engine.process(again)
    assert processed["outcome"].tolist() == [isolane.Outcome.DROP_METER] * 3  # t2 and t3 kept their (empty) buckets
    assert engine.classify(again)["tenant"].tolist() == [0, 1, 2]
    assert sum(entry["packets"] for entry in engine.stats()) == len(burst) + len(again)


def queued_at_a_port(count: int) -> tuple[list[dict[str, Any]], Policy, Engine, np.ndarray]:
    """``count`` tenants metered at 8 Mbps (3000 B buckets) and guaranteed 10 Mbps at a 100 Mbps
    port, with three 1000 B packets at once at packet time 0 for t0, t2 and t3: each bucket
    empties, and 9 KB take 72 us to send. The tenants' documents, the policy, the engine and those packets."""
    tenants = [{"name": f"t{i}", "vnis": [i], "meter": {"kind": "srtcm", "cir": "8Mbps", "cbs": "3000B", "ebs": "0B"}, "rate": "10Mbps"} for i in range(count)]
    policy = Policy.from_dict({"tenants": tenants, "port": {"rate": "100Mbps", "buffer": "1MB"}})
    engine = Engine(policy)
    burst = traffic([0, 2, 3])[:-1:6].repeat(3)
    burst["timestamp_ns"] = 0
    engine.process(burst)
    return tenants, policy, engine, burst


def sent(engine: Engine) -> int:
    """Packets the port has started sending."""
    return sum(entry["delay_ns"]["count"] for entry in engine.stats() if entry["delay_ns"] is not None)


def assert_buckets_kept(engine: Engine, burst: np.ndarray) -> None:
    """t0, t2 and t3 of :func:`queued_at_a_port` kept their (empty) buckets: a packet each 1 us
    later finds 1 byte of tokens, not 1000; and every packet is counted."""
    again = burst[::3].copy()
    again["timestamp_ns"] = 1000
    assert engine.process(again)["outcome"].tolist() == [isolane.Outcome.DROP_METER] * 3
    engine.drain()
    assert sum(entry["packets"] for entry in engine.stats()) == len(burst) + len(again)


def test_a_guarantee_that_re_weighs_every_tenant_keeps_their_meters_and_queued_packets() -> None:
    """15 Mbps among 10 Mbps guarantees changes the common divisor: every tenant's port weight
    changes (2 and 3 in place of 1), and nothing else of theirs."""
    tenants, policy, engine, burst = queued_at_a_port(4)
    before = sent(engine)
    assert before < len(burst)
    rated = policy.with_tenant(dict(tenants[1], rate="15Mbps"))
    assert rated._weight_basis.weight_scale != policy._weight_basis.weight_scale
    assert rated.compile_qos().tenant_weight.tolist() == [2, 3, 2, 2]
    engine.update(rated)
    assert sent(engine) == before, "the port still has their packets"
    assert_buckets_kept(engine, burst)


def test_a_rename_and_new_classes_in_one_update_leave_the_other_tenants_queued_packets_at_the_port() -> None:
    """t1 renamed (taken out, a new tenant put in) and t4 given classes, in one update: each goes
    alone, and the packets t0, t2 and t3 have queued at the port stay there."""
    tenants, policy, engine, burst = queued_at_a_port(5)
    before = sent(engine)
    assert before < len(burst)
    classes = [{"name": "bulk", "priority": 5, "rate": "5Mbps"}, {"name": "rpc", "priority": 1, "rate": "5Mbps"}]
    edited = policy.without_tenant("t1").with_tenant(dict(tenants[1], name="x")).with_tenant(dict(tenants[4], classes=classes, default_class="bulk"))
    report = engine.update(edited)
    assert sent(engine) == before, "the port still has their packets"
    assert report == isolane.engine.UpdateReport(kept=4, incremental=0, rebuilt=1)  # t4 keeps its tables; x is new
    assert engine.policy.tenant_names == ["t0", "t2", "t3", "t4", "x"]
    assert_buckets_kept(engine, burst)


@pytest.mark.parametrize(("moved", "to_front"), [(1, False), (2, False), (4, True), (3, True)])
def test_a_tenant_moved_in_the_document_keeps_its_meters_and_the_port_the_others_packets(moved: int, to_front: bool) -> None:
    """A tenant moved to the end of the document (put in before its copy is taken out) or to
    the front (taken out first), with nothing queued at the port (t1, t4) or with packets queued
    and its bucket empty (t2, t3): taken out and put in again alone, it keeps its meter; a move
    of a tenant with nothing queued leaves the packets queued at the port there, the others'
    send them first (their queues go)."""
    tenants, policy, engine, burst = queued_at_a_port(5)
    before = sent(engine)
    assert before < len(burst)
    others = tenants[:moved] + tenants[moved + 1 :]
    reordered = [tenants[moved], *others] if to_front else [*others, tenants[moved]]
    engine.update(Policy.from_dict({"tenants": reordered, "port": {"rate": "100Mbps", "buffer": "1MB"}}))
    assert engine.policy.tenant_names == [t["name"] for t in reordered]
    assert (sent(engine) == before) == (moved in (1, 4))
    assert_buckets_kept(engine, burst)


def test_edits_are_checked_against_the_other_tenants_with_their_place() -> None:
    port = {"rate": "100Mbps", "buffer": "1MB"}
    policy = Policy.from_dict({"port": port, "tenants": [{"name": "a", "vnis": [1], "rate": "60Mbps"}, {"name": "b", "vnis": [2]}]})
    with pytest.raises(PolicyError) as taken:
        policy.with_tenant({"name": "c", "vnis": [3, 1]})
    assert taken.value.errors == [("tenants[2].vnis[1]", "VNI 1 is claimed by both 'a' (tenants[0]) and 'c'")]
    with pytest.raises(PolicyError) as over:
        policy.with_tenant({"name": "b", "vnis": [2], "rate": "50Mbps"})
    assert over.value.errors[0][0] == "port.rate" and "110Mbps" in over.value.errors[0][1]
    with pytest.raises(PolicyError) as typo:
        policy.with_tenant({"name": "b", "vnis": [2], "rulez": []})
    assert typo.value.errors[0][0] == "tenants[1].rulez"
    with pytest.raises(PolicyError, match="weight"):
        policy.with_tenant({"name": "b", "vnis": [2], "weight": 3})
    with pytest.raises(KeyError):
        policy.without_tenant("nobody")
    moved = policy.without_tenant("a").with_tenant({"name": "c", "vnis": [1]})  # a's VNI is free again
    assert moved.tenant_names == ["b", "c"]


def test_edits_share_every_unchanged_tenant_and_documents_share_equal_ones() -> None:
    doc = {"tenants": [{"name": f"t{i}", "vnis": [i], "rules": [{"dst_ports": 80, "action": "allow"}]} for i in range(50)]}
    policy = Policy.from_dict(doc)
    edited = policy.with_tenant({"name": "t7", "vnis": [7]})
    assert [a is b for a, b in zip(policy.tenants, edited.tenants)].count(False) == 1
    assert edited.changes_since(policy) == [("replace", 7, policy.tenants[7], edited.tenants[7])]
    again = Policy.from_dict(doc)  # equal data read again: the very same tenants
    assert all(a is b for a, b in zip(policy.tenants, again.tenants))
    engine = Engine(policy)
    assert engine.update(again) == isolane.engine.UpdateReport(kept=50, incremental=0, rebuilt=0)


def test_edits_chained_in_one_expression_read_as_their_changes_though_the_middle_policy_is_gone() -> None:
    policy = Policy.from_dict({"tenants": [{"name": f"t{i}", "vnis": [i]} for i in range(20)]})
    renamed = policy.without_tenant("t7").with_tenant({"name": "x", "vnis": [7]})  # the policy between is collected
    changes = renamed.changes_since(policy)
    assert changes is not None and [(op, at) for op, at, _, _ in changes] == [("remove", 7), ("insert", 19)]
    later, kept = renamed, {}
    for i in range(300):  # the chain reaches back 256 edits at most
        later = later.with_tenant({"name": "x", "vnis": [7], "rules": [{"dst_ports": i + 1, "action": "allow"}]})
        kept[i] = later
    assert later.changes_since(policy) is None and later.changes_since(renamed) is None
    assert [(op, at) for op, at, _, _ in later.changes_since(kept[199]) or []] == [("replace", 19)] * 100


def test_positions_by_name_follow_edits_that_move_tenants() -> None:
    """Tenants put in and taken out anywhere, 300 edits: each tenant is found where it is,
    through the moves the edits made (and the map made afresh past 64 of them)."""
    rng = random.Random(3)
    policy = Policy.from_dict({"tenants": [{"name": f"t{i}", "vnis": [i]} for i in range(50)]})
    policy._position("t0")  # the map, made once: the edits below carry it
    carried = 0
    for step in range(300):
        names = policy.tenant_names
        if names and rng.random() < 0.5:
            policy = policy.without_tenant(rng.choice(names))
        else:
            policy = policy.with_tenant({"name": f"n{step}", "vnis": [1000 + step]})
            if rng.random() < 0.5:  # and one moved: taken out and put in at the end
                moved = rng.choice(policy.tenant_names)
                policy = policy.without_tenant(moved).with_tenant({"name": moved, "vnis": [5000 + step]})
        carried += "_positions" in policy.__dict__
        assert [policy._position(name) for name in policy.tenant_names] == list(range(len(policy.tenant_names))), step
        assert policy._position("nobody") is None
    assert carried > 250, f"the map was made afresh {300 - carried} times"


GUARANTEES = (None, "8bps", "10Mbps", "20Mbps", "30Mbps", "100Gbps")  # 8bps to 100Gbps: weights scaled to 32 bits


@st.composite
def weighted_edit_runs(draw: st.DrawFn) -> tuple[dict[str, Any], list[tuple[str, Any]]]:
    """Tenants with assorted guarantees (or all with weights), then edits that add, replace and remove them."""
    weighted = draw(st.booleans())

    def doc(name: str, vni: int) -> dict[str, Any]:
        out: dict[str, Any] = {"name": name, "vnis": [vni]}
        rate = draw(st.sampled_from(GUARANTEES))
        if rate:
            out["rate"] = rate
        if weighted:
            out["weight"] = draw(st.integers(1, 5))
        return out

    names = [f"t{i}" for i in range(draw(st.integers(1, 8)))]
    first = {"tenants": [doc(name, 100 + i) for i, name in enumerate(names)]}
    edits: list[tuple[str, Any]] = []
    for step in range(draw(st.integers(1, 10))):
        if len(names) > 1 and draw(st.integers(0, 3)) == 0:
            edits.append(("without", names.pop(draw(st.integers(0, len(names) - 1)))))
            continue
        name = draw(st.sampled_from(names + [f"n{step}"]))
        names += [name] if name not in names else []
        edits.append(("with", doc(name, 1000 + step)))
    return first, edits


@settings(max_examples=200, deadline=None)
@given(weighted_edit_runs())
def test_the_weight_scale_an_edit_chain_carries_weighs_each_tenants_share_as_the_final_policy_does(run: tuple[dict[str, Any], list[tuple[str, Any]]]) -> None:
    """The engine is given each tenant's share (its weight, else its guarantee: what its
    compiled QoS carries) and the policy's scale, carried through the edits: the port weights
    they make are the final policy's, read afresh."""
    doc, edits = run
    policy = quietly(lambda: Policy.from_dict(doc))
    written = {tenant["name"]: tenant for tenant in doc["tenants"]}
    for op, arg in edits:
        policy = quietly(lambda before=policy, op=op, arg=arg: edit(before, written, op, arg))
    times, per = policy._weight_basis.weight_scale
    assert (times, per) == WeightBasis.of(policy.tenants).weight_scale
    context = qos_context(policy)
    shares = [qos.weight or qos.rate for qos in (tenant_qos(t, context) for t in policy.tenants)]
    assert [min(max(share * times // per, 1), P.MAX_WEIGHT) for share in shares] == policy._port_weights.tolist()


def test_a_guarantee_edit_changes_the_weight_scale_alone() -> None:
    """A one-tenant change gives the engine that tenant and the scale: a guarantee that changes
    the common divisor of the guarantees changes the scale, not the other tenants."""
    policy = Policy.from_dict({"tenants": [{"name": f"t{i}", "vnis": [i], "rate": "10Mbps"} for i in range(1000)]})
    assert policy._weight_basis.weight_scale == (1, 1_250_000)
    doubled = policy.with_tenant({"name": "t7", "vnis": [7], "rate": "20Mbps"})
    assert doubled._weight_basis.weight_scale == (1, 1_250_000) and doubled._port_weights[6:9].tolist() == [1, 2, 1]
    halved = doubled.with_tenant({"name": "t7", "vnis": [7], "rate": "15Mbps"})
    assert halved._weight_basis.weight_scale == (1, 625_000) and halved._port_weights[6:9].tolist() == [2, 3, 2]
    assert halved.without_tenant("t7")._weight_basis.weight_scale == (1, 1_250_000)


@st.composite
def document_edits(draw: st.DrawFn) -> tuple[dict[str, Any], list[dict[str, Any]], set[str]]:
    """A policy document, then the same document with up to three stretches of its tenants
    changed, as an operator edits a file in places: tenants put in or taken out anywhere,
    changed, or renamed; and perhaps one tenant moved elsewhere (the names of those moved, apart)."""
    port = {"rate": "1Gbps", "buffer": "16MB"}
    count = draw(st.integers(1, 12))
    tenants = [tenant_doc(f"t{i}", 100 + i, draw) for i in range(count)]
    edited = list(tenants)
    for place in range(draw(st.integers(1, 3))):
        start = draw(st.integers(0, len(edited)))
        end = draw(st.integers(start, min(len(edited), start + 4)))
        out = draw(st.integers(0, end - start))  # a run of tenants taken out, first in the stretch
        middle = []
        for k, old in enumerate(edited[start + out : end]):
            kind = draw(st.sampled_from(("keep", "change", "rename")))
            middle.append(old if kind == "keep" else tenant_doc(old["name"] if kind == "change" else f"r{place}_{k}", old["vnis"][0], draw))
        added = [tenant_doc(f"n{place}_{k}", 500 + 10 * place + k, draw) for k in range(draw(st.integers(0, 3)))]
        middle[draw(st.integers(0, len(middle))) : 0] = added
        edited[start:end] = middle
    moved: set[str] = set()
    if len(edited) > 1 and draw(st.booleans()):  # and one tenant moved elsewhere
        tenant = edited.pop(draw(st.integers(0, len(edited) - 1)))
        edited.insert(draw(st.integers(0, len(edited))), tenant)
        moved.add(tenant["name"])
    return {"port": port, "tenants": tenants}, edited, moved


def passed_alone(before: list[dict[str, Any]], after: list[dict[str, Any]], moved: set[str]) -> set[str]:
    """The one tenant of both documents that the tenants ``moved`` passed, if they passed only
    one: either of the two may be the one taken out and put in again."""
    names = {t["name"] for t in before} & {t["name"] for t in after}
    old, new = ([t["name"] for t in tenants if t["name"] in names] for tenants in (before, after))
    passed = {n for m in moved & names for n in names - {m} if (old.index(n) < old.index(m)) != (new.index(n) < new.index(m))}
    return passed if len(passed) == 1 else set()


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(document_edits())
def test_a_document_with_tenants_put_in_or_taken_out_in_places_updates_only_those(run: tuple[dict[str, Any], list[dict[str, Any]], set[str]]) -> None:
    """A document read again with tenants changed in places, or moved: the engine is given
    those tenants (matched by name), not every later position, and ends as a fresh engine."""
    doc, edited_tenants, moved = run
    policy = quietly(lambda: Policy.from_dict(doc))
    engine = Engine(policy)
    packets = traffic(sorted({t["vnis"][0] for t in doc["tenants"] + edited_tenants}))
    engine.process(packets)
    edited = quietly(lambda: Policy.from_dict({**doc, "tenants": edited_tenants}))
    changes = tenant_changes(policy, edited)
    differing = {t["name"] for t in edited_tenants if t not in doc["tenants"]} | {t["name"] for t in doc["tenants"] if t not in edited_tenants}
    differing |= moved | passed_alone(doc["tenants"], edited_tenants, moved)
    assert {(change[2] or change[3]).name for change in changes} <= differing  # type: ignore[union-attr]
    report = engine.update(edited)
    assert report.rebuilt <= len(differing)
    assert edited._weight_basis.weight_scale == WeightBasis.of(edited.tenants).weight_scale  # carried through the changes
    fresh = Engine(edited)
    for field in ("tenant", "rule", "cls", "action"):
        np.testing.assert_array_equal(engine.classify(packets)[field], fresh.classify(packets)[field], err_msg=field)
    engine.drain()
    later = np.repeat(packets, 20)
    later["timestamp_ns"] = 10**12
    counted, delayed = counts_by_key(engine), delays_by_key(engine)
    rows, fresh_rows = engine.process(later), fresh.process(later)
    for field in ("color", "outcome", "release_ns"):
        np.testing.assert_array_equal(rows[field], fresh_rows[field], err_msg=field)
    engine.drain()
    fresh.drain()
    counted_later = {key: tuple(a - b for a, b in zip(value, counted.get(key, (0,) * len(value)))) for key, value in counts_by_key(engine).items()}
    assert {key: value for key, value in counted_later.items() if value[0]} == counts_by_key(fresh)
    delayed_later = {key: total - delayed.get(key, 0) for key, total in delays_by_key(engine).items()}
    assert {key: total for key, total in delayed_later.items() if total} == {key: total for key, total in delays_by_key(fresh).items() if total}
    assert sum(entry["packets"] for entry in engine.stats()) == len(packets) + len(later)


def test_a_tenant_put_in_or_taken_out_in_the_middle_of_a_document_is_that_change_alone() -> None:
    docs = [{"name": f"t{i}", "vnis": [i + 1], "rate": "10Mbps"} for i in range(300)]
    policy = Policy.from_dict({"tenants": docs})
    added = Policy.from_dict({"tenants": docs[:150] + [{"name": "new", "vnis": [999]}] + docs[150:]})
    assert [(op, at, new.name if new else None) for op, at, _, new in tenant_changes(policy, added)] == [("insert", 150, "new")]
    removed = Policy.from_dict({"tenants": docs[:150] + docs[151:]})
    assert [(op, at, old.name if old else None) for op, at, old, _ in tenant_changes(policy, removed)] == [("remove", 150, "t150")]
    # t149 changed and a tenant put in after it: the new one, then the change in place (the
    # changes go from the end of the stretch back, so that each position holds).
    changed = dict(docs[149], rate="20Mbps")
    both = Policy.from_dict({"tenants": docs[:149] + [changed, {"name": "new", "vnis": [999]}] + docs[150:]})
    assert [(op, at) for op, at, _, _ in tenant_changes(policy, both)] == [("insert", 150), ("replace", 149)]
    # Tenants put in at both ends: those two alone, however long the stretch between them.
    spread = Policy.from_dict({"tenants": [{"name": "a", "vnis": [1000]}] + docs + [{"name": "z", "vnis": [1001]}]})
    assert [(op, at, new.name if new else None) for op, at, _, new in tenant_changes(policy, spread)] == [("insert", 300, "z"), ("insert", 0, "a")]
    # Two tenants that swap places: each taken out and put in again at its new place.
    swapped = Policy.from_dict({"tenants": docs[:10] + [docs[200]] + docs[11:200] + [docs[10]] + docs[201:]})
    changes = [(op, at, (old or new).name) for op, at, old, new in tenant_changes(policy, swapped)]  # type: ignore[union-attr]
    assert changes == [("remove", 200, "t200"), ("insert", 200, "t10"), ("remove", 10, "t10"), ("insert", 10, "t200")]
    # A tenant moved from the front to the end, past all the others: that tenant alone.
    moved = Policy.from_dict({"tenants": docs[1:] + docs[:1]})
    assert [(op, at, (old or new).name) for op, at, old, new in tenant_changes(policy, moved)] == [("insert", 300, "t0"), ("remove", 0, "t0")]  # type: ignore[union-attr]
    engine = Engine(policy)
    assert engine.update(added).rebuilt == 1 and engine.update(removed).rebuilt == 0
    two_gone = Policy.from_dict({"tenants": docs[:100] + docs[102:150] + docs[151:]})
    assert [(op, at) for op, at, _, _ in tenant_changes(removed, two_gone)] == [("remove", 101), ("remove", 100)]
    engine.update(two_gone)
    assert engine.tenant_names == [t["name"] for t in docs[:100] + docs[102:150] + docs[151:]]


def test_a_document_edited_in_places_far_apart_is_those_changes_alone() -> None:
    docs = [{"name": f"t{i}", "vnis": [i + 1], "rate": "10Mbps"} for i in range(300)]
    policy = Policy.from_dict({"tenants": docs})
    # A tenant put in near the start, one taken out in the middle, one renamed and one changed near the end.
    edited_docs = docs[:5] + [{"name": "new", "vnis": [999]}] + docs[5:150] + docs[151:280] + [dict(docs[280], name="r")] + docs[281:290]
    edited_docs += [dict(docs[290], rate="20Mbps")] + docs[291:]
    edited = Policy.from_dict({"tenants": edited_docs})
    changes = [(op, at, (old or new).name) for op, at, old, new in tenant_changes(policy, edited)]  # type: ignore[union-attr]
    assert changes == [("replace", 290, "t290"), ("replace", 280, "t280"), ("remove", 150, "t150"), ("insert", 5, "new")]
    engine = Engine(policy)
    assert engine.update(edited).rebuilt == 2  # the tables of "new" and "r" (a guarantee changes no table)
    assert engine.tenant_names == [t["name"] for t in edited_docs]
    # Two tenants that swap places: the engine rebuilds its QoS state, and ends as a fresh one.
    swapped_docs = edited_docs[:10] + [edited_docs[200]] + edited_docs[11:200] + [edited_docs[10]] + edited_docs[201:]
    swapped = Policy.from_dict({"tenants": swapped_docs})
    engine.update(swapped)
    assert engine.tenant_names == [t["name"] for t in swapped_docs]
    packets = traffic([1, 11, 201, 999])
    np.testing.assert_array_equal(engine.classify(packets)["tenant"], Engine(swapped).classify(packets)["tenant"])


class Named:
    """A stand-in for a tenant: what the comparison of two documents reads of it."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return f"Named({self.name!r})"


def in_order_at_most(positions: list[int]) -> int:
    """The length of a longest increasing run in ``positions`` (the plain quadratic way)."""
    longest = [1] * len(positions)
    for k in range(len(positions)):
        longest[k] += max((longest[b] for b in range(k) if positions[b] < positions[k]), default=0)
    return max(longest, default=0)


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_the_changes_between_two_documents_make_the_second_and_move_the_fewest_tenants(data: st.DataObject) -> None:
    """Tenants of the first document in any order and subset, some read again (equal, not the
    same object), some new: the changes, applied in order, make the second document, and the
    tenants taken out and put in again are the fewest that leave the others in their order."""
    olds = [Named(f"t{k}") for k in range(data.draw(st.integers(0, 24)))]
    kept = data.draw(st.lists(st.sampled_from(range(len(olds))), unique=True)) if olds else []
    news = [olds[k] if data.draw(st.booleans()) else Named(olds[k].name) for k in kept]
    for n in range(data.draw(st.integers(0, 3))):
        news.insert(data.draw(st.integers(0, len(news))), Named(f"n{n}"))
    result = list(olds)
    taken_out, put_in = set(), set()
    for op, at, was, now in aligned(olds, news):  # type: ignore[arg-type]
        assert op == "insert" or result[at] is was
        if op == "remove":
            del result[at]
            taken_out.add(was.name)  # type: ignore[union-attr]
        elif op == "insert":
            result.insert(at, now)
            put_in.add(now.name)  # type: ignore[union-attr]
        else:
            result[at] = now
    assert len(result) == len(news) and all(a is b for a, b in zip(result, news))
    assert len(taken_out & put_in) == len(kept) - in_order_at_most(kept)
