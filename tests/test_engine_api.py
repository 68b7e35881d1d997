"""The Engine's API as a user meets it: one model of what counters() and stats() count, a policy
given as a mapping, an engine that refuses to be copied, and typed statistics."""

from __future__ import annotations

import copy
import pickle
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import isolane
from isolane import ClassifierCounters, ColorCounts, DelayStats, Engine, Outcome, OutcomeCounts, Policy, StatsEntry
from test_engine_qos import mixed_run, records


def per_tenant(stats: list[StatsEntry], field: Callable[[StatsEntry], int]) -> dict[str | None, int]:
    out: dict[str | None, int] = {}
    for entry in stats:
        out[entry["tenant"]] = out.get(entry["tenant"], 0) + field(entry)
    return out


def test_counters_and_stats_agree_on_every_packet_process_took() -> None:
    """Fed by process only, the classifier's view (counters) and the enforcement view (stats)
    count the same packets per tenant; the classifier's drops are the drop_classifier outcome,
    and drops at later stages (meters, shapers, the port) are in stats only."""
    engine, out = mixed_run()
    counters, stats = engine.counters(), engine.stats()
    assert {t: c["packets"] for t, c in counters.items()} == per_tenant(stats, lambda e: e["packets"])
    assert sum(c["packets"] for c in counters.values()) == len(out)
    # count: outer, so stats' bytes are frame bytes too
    assert {t: c["bytes"] for t, c in counters.items()} == per_tenant(stats, lambda e: e["bytes"])
    dropped = {t: c["classifier_dropped"]["packets"] for t, c in counters.items()}
    assert dropped == per_tenant(stats, lambda e: e["outcomes"]["drop_classifier"]["packets"])
    assert dropped["a"] > 0, "tenant a's ssh rule drops"
    # b's meter, shaper and port queue drop thousands of its packets: stats count them, the classifier none.
    later = per_tenant(stats, lambda e: e["actions"]["drop"] - e["outcomes"]["drop_classifier"]["packets"])
    assert later["b"] > 1000 and dropped["b"] == 0
    for entry in counters.values():
        assert entry["classifier_allowed"]["packets"] + entry["classifier_dropped"]["packets"] == entry["packets"] == sum(entry["reasons"].values())


def test_classify_counts_in_counters_only() -> None:
    engine, _ = mixed_run()
    before_counters, before_stats = engine.counters(), engine.stats_array()
    verdicts = engine.classify(records(np.full(40, 100), 0, 100))
    assert len(verdicts) == 40
    assert engine.counters()["a"]["packets"] == before_counters["a"]["packets"] + 40
    np.testing.assert_array_equal(engine.stats_array(), before_stats)


DATA = {"tenants": [{"name": "a", "vnis": [100], "rules": [{"dst_ports": 22, "action": "drop"}]}]}


def test_an_engine_takes_a_mapping_as_policy_from_dict_reads_it() -> None:
    rows = records(np.array([100, 100, 7]), 0, 100, dst_port=np.array([22, 80, 80]))
    from_mapping, from_policy = Engine(DATA), Engine(Policy.from_dict(DATA))
    np.testing.assert_array_equal(from_mapping.classify(rows), from_policy.classify(rows))
    assert from_mapping.policy == from_policy.policy
    with pytest.raises(isolane.PolicyError, match=r"tenants\[0\]\.rules\[0\]\.action"):
        Engine({"tenants": [{"name": "a", "vnis": [1], "rules": [{"action": "alow"}]}]})


@pytest.mark.parametrize("wrong", [[DATA], "tenants.yaml", None])
def test_anything_else_is_a_type_error_saying_what_to_pass(wrong: Any) -> None:
    with pytest.raises(TypeError, match=rf"^Engine takes an isolane.Policy or a mapping as Policy.from_dict takes, got {type(wrong).__name__}$"):
        Engine(wrong)


@pytest.mark.parametrize("duplicate", [copy.copy, copy.deepcopy, pickle.dumps], ids=["copy", "deepcopy", "pickle"])
def test_an_engine_is_never_copied(duplicate: Callable[[Any], Any]) -> None:
    """A shallow copy shared the original's Rust core: its packets counted in the original's
    statistics and its updates changed the original's rules."""
    engine = Engine(DATA)
    with pytest.raises(TypeError, match=r"^an isolane.Engine cannot be copied or pickled: .* make a new Engine\(engine.policy\)$"):
        duplicate(engine)
    assert Engine(engine.policy).policy == engine.policy


def test_the_typed_dicts_name_every_key_of_what_the_engine_returns() -> None:
    engine, _ = mixed_run()
    stats = engine.stats()
    for entry in stats:
        assert set(entry) == set(StatsEntry.__annotations__)
        assert set(entry["colors"]) == set(ColorCounts.__annotations__)
        assert set(entry["outcomes"]) == set(OutcomeCounts.__annotations__) == {o.name.lower() for o in Outcome if o != Outcome.PENDING}
        assert set(entry["delay_ns"]) == set(DelayStats.__annotations__)
    for counters in engine.counters().values():
        assert set(counters) == set(ClassifierCounters.__annotations__)
