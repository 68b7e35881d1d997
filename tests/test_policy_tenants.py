"""``isolane.policy.Tenants``: the immutable sequence a policy keeps its tenants in, which an edit
copies in part. It must behave as the tuple of the same tenants through any edits."""

from __future__ import annotations

import pickle

import pytest
from hypothesis import given
from hypothesis import strategies as st

from isolane.policy import Policy, Tenant, Tenants
from isolane.policy import tenants as tenants_module

POOL = [Tenant(name=f"t{i}", vnis=(i,)) for i in range(40)]

edits = st.lists(st.tuples(st.sampled_from(("replace", "insert", "remove")), st.integers(0, 1000), st.sampled_from(POOL)), max_size=60)


@pytest.mark.parametrize("chunk", [1, 2, 3, 256])
@given(start=st.lists(st.sampled_from(POOL), max_size=30), steps=edits)
def test_edited_tenants_equal_the_same_edits_on_a_list(chunk: int, start: list[Tenant], steps: list[tuple[str, int, Tenant]]) -> None:
    saved = tenants_module._CHUNK
    tenants_module._CHUNK = chunk  # small chunks: edits split, empty and grow them
    try:
        seq, model = Tenants(start), list(start)
        for op, where, tenant in steps:
            at = where % (len(model) + (op == "insert")) if model or op == "insert" else None
            if at is None:
                continue
            previous, before = seq, list(seq)
            if op == "replace":
                seq, model[at] = seq.replaced(at, tenant), tenant
            elif op == "insert":
                seq = seq.inserted(at, tenant)
                model.insert(at, tenant)
            else:
                seq = seq.removed(at)
                del model[at]
            assert list(seq) == model and len(seq) == len(model)
            assert all(seq[i] is model[i] for i in range(len(model)))
            assert all(seq[-i] is model[-i] for i in range(1, len(model) + 1))
            assert list(previous) == before  # the sequence it was made from is untouched
            assert previous.differing(seq) == _differing(before, model)
        first = Tenants(start)
        assert first.differing(seq) == _differing(start, model) and seq.differing(first) == _differing(model, start)
        assert seq.differing(seq) == [] and seq.differing(Tenants(model)) == []
        assert seq == tuple(model) and seq == model and seq == Tenants(model) and hash(seq) == hash(tuple(model))
        assert seq[1:3] == tuple(model[1:3])
    finally:
        tenants_module._CHUNK = saved


def _differing(a: list[Tenant], b: list[Tenant]) -> list[int]:
    return [i for i in range(min(len(a), len(b))) if a[i] is not b[i]]


def test_an_edit_shares_every_chunk_but_the_one_it_changes() -> None:
    big = Tenants(POOL * 100)
    one = big.replaced(2000, POOL[0])
    assert sum(a is b for a, b in zip(big._chunks, one._chunks)) == len(big._chunks) - 1


def test_out_of_range_positions_raise_index_error() -> None:
    seq = Tenants(POOL[:3])
    with pytest.raises(IndexError):
        seq[3]
    with pytest.raises(IndexError):
        seq.replaced(-4, POOL[0])
    assert Tenants() == () and len(Tenants()) == 0 and Tenants().inserted(0, POOL[0]) == (POOL[0],)


def test_a_policy_keeps_its_tenants_as_tenants_and_compares_and_pickles_as_before() -> None:
    policy = Policy(tenants=tuple(POOL[:3]))
    assert isinstance(policy.tenants, Tenants) and policy.tenants == tuple(POOL[:3])
    assert policy == Policy(tenants=list(POOL[:3])) and hash(policy) == hash(Policy(tenants=POOL[:3]))
    assert pickle.loads(pickle.dumps(policy)) == policy
    assert policy.tenants + (POOL[5],) == (*POOL[:3], POOL[5])


def test_tenants_with_equal_contracts_classes_and_rule_values_share_them() -> None:
    """A policy of many alike tenants holds one object for each value they repeat (memory a tenant)."""

    def tenant(i: int, rate: str) -> dict[str, object]:
        rule = {"dst": f"10.0.{i}.0/24", "dst_ports": [443, 8443], "proto": "tcp", "action": "allow"}
        return {"name": f"t{i}", "vnis": [100 + i], "rate": rate, "ceil": "1Gbps", "meter": {"kind": "srtcm", "cir": rate}, "rules": [rule]}

    a, b, c = Policy.from_dict({"tenants": [tenant(0, "10Mbps"), tenant(1, "10Mbps"), tenant(2, "20Mbps")]}).tenants
    assert a.contract is b.contract and a.contract.meter is b.contract.meter and a.classes is b.classes
    assert a.rules[0].dst_ports is b.rules[0].dst_ports and a.rules[0].proto is b.rules[0].proto
    assert c.contract != a.contract and c.contract.rate_bps == 20_000_000
    assert a.rules[0].dst != b.rules[0].dst


def test_shared_values_keep_their_type() -> None:
    from isolane.policy.sharing import shared, sharing

    with sharing():
        assert shared(1) is not True and shared(True) is True and shared(1.0).__class__ is float


def test_values_are_shared_within_a_read_and_nothing_is_held_after_it() -> None:
    """Tenants of distinct contracts keep no table of them once read (docs/policy.md, memory)."""
    import weakref

    from isolane.policy import sharing as S
    from isolane.policy.sharing import shared, sharing

    class Value:
        def __init__(self, n: int) -> None:
            self.n = n

        def __eq__(self, other: object) -> bool:
            return isinstance(other, Value) and other.n == self.n

        def __hash__(self) -> int:
            return self.n

    first = Value(1)
    with sharing():
        assert shared(Value(1)) is not first  # not seen in this scope
        kept = shared(Value(2))
        with sharing():  # an inner scope is the outer one
            assert shared(Value(2)) is kept
        held = weakref.ref(kept)
        for n in range(S._RECENT_MOST + 1):
            S.remember("test", n, Value(n))
        assert all(S.recall("test", n) == Value(n) for n in range(S._RECENT_MOST + 1)), "the scope keeps every entry"
    assert shared(first) is first
    del kept
    assert held() is None and S.recall("test", 0) is None, "a scope's values and entries go with it"
    for n in range(S._RECENT_MOST + 1):
        S.remember("test", n, Value(n))
    assert S.recall("test", 0) is None and S.recall("test", S._RECENT_MOST) == Value(S._RECENT_MOST), "outside one, only the latest"


def test_a_scope_holds_a_bounded_table_and_caches_however_many_distinct_values_it_sees() -> None:
    """A policy of a rate a tenant would otherwise keep a key a tenant until the read ends."""
    from isolane.policy import sharing as S
    from isolane.policy.sharing import shared, sharing

    with sharing():
        for n in range(3 * S._SCOPE_MOST):
            shared(("rate", n))
            S.remember("test", n, n)
        scope = S._SCOPE.get()
        assert scope is not None and len(scope.values) <= S._SCOPE_MOST and len(scope.caches["test"]) <= S._SCOPE_MOST
        assert S.recall("test", 3 * S._SCOPE_MOST - 1) == 3 * S._SCOPE_MOST - 1, "the latest are kept"
        tier = shared(("tier", 1))
        assert shared(("tier", 1)) is tier, "values seen again are shared"
