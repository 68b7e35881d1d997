"""What a large policy repeats is read and compiled once (contracts, their compiled QoS), and
what it holds per rule is small (prefixes): the results must be those of reading every tenant
afresh, each message at its own place."""

from __future__ import annotations

import dataclasses
import gc
import ipaddress
import pickle
import sys
import warnings
from typing import Any

import pytest

import isolane.engine
from isolane import Engine
from isolane import policy as P
from isolane.policy import Policy
from isolane.policy.compile import tenant_tables
from isolane.policy.qos import qos_context, tenant_qos
from isolane.policy.sharing import sharing
from isolane.policy.tenants import Tenants
from support.policy_edits import errors_of, policy_warnings, quiet


def tenants(*contracts: dict[str, Any], **top: Any) -> dict[str, Any]:
    return {**top, "tenants": [{"name": f"t{i}", "vnis": [i + 1], **c} for i, c in enumerate(contracts)]}


def test_a_repeated_contract_warns_at_each_place() -> None:
    small_queue = {"rate": "1Gbps", "shaper": {"queue": "4KiB"}}
    found = policy_warnings(tenants(small_queue, small_queue, small_queue))
    assert [w.split(":")[0] for w in found] == ["tenants[0].shaper.queue", "tenants[1].shaper.queue", "tenants[2].shaper.queue"]


def test_a_repeated_bad_contract_is_reported_at_each_place() -> None:
    bad = {"rate": "2Gbps", "ceil": "1Gbps"}
    assert errors_of(tenants(bad, {}, bad)) == [
        ("tenants[0].ceil", "ceil '1Gbps' is below rate '2Gbps'"),
        ("tenants[2].ceil", "ceil '1Gbps' is below rate '2Gbps'"),
    ]


def test_a_contract_read_under_one_port_is_checked_again_under_another() -> None:
    contract = {"rate": "50Gbps"}
    assert quiet(tenants(contract, port={"rate": "100Gbps", "buffer": "16MiB"})).tenants[0].contract.rate_bps == 50_000_000_000
    assert errors_of(tenants(contract, port={"rate": "40Gbps", "buffer": "16MiB"})) == [
        ("tenants[0].rate", "rate '50Gbps' is above the port's line rate 40Gbps: it cannot be guaranteed")
    ]


@pytest.mark.parametrize("second", [1, 1.0, "true"])
def test_values_equal_in_python_but_not_in_type_are_read_apart(second: Any) -> None:
    """``True == 1 == 1.0``: a contract kept for ``true`` must not answer for the others."""

    def meter(value: Any) -> dict[str, Any]:
        return tenants({"meter": {"kind": "srtcm", "cir": "1Gbps", "color_aware": value}})

    assert quiet(meter(True)).tenants[0].contract.meter.color_aware is True  # kept
    assert errors_of(meter(second)) == [("tenants[0].meter.color_aware", f"expected true or false, got {_described(second)}")]


def _described(value: Any) -> str:
    return {int: "an integer (1)", float: "a number (1.0)", str: "a string ('true')"}[type(value)]


def test_equal_contracts_compile_once_under_each_name_within_one_pass() -> None:
    policy = quiet(tenants({"rate": "1Gbps", "meter": {"kind": "srtcm", "cir": "1Gbps"}}, {"rate": "1Gbps", "meter": {"kind": "srtcm", "cir": "1Gbps"}}))
    with sharing():
        a, b = (tenant_qos(t, qos_context(policy), keep=False) for t in policy.tenants)
    assert (a.name, b.name) == ("t0", "t1")
    assert a._replace(name="t1") == b and a.meter is b.meter
    c, d = (tenant_qos(policy.tenants[0], qos_context(policy), keep=False) for _ in range(2))  # one at a time: among the latest
    assert c == d == a and c.meter is d.meter


def test_compiled_qos_follows_the_context() -> None:
    """The default burst depends on the largest frame: a policy-wide setting, not the tenant's."""
    data = tenants({"rate": "1Mbps"})
    small, large = (quiet({**data, "largest_frame": f}) for f in ("1514B", "9KiB"))
    assert tenant_qos(small.tenants[0], qos_context(small)).burst == 1514
    assert tenant_qos(large.tenants[0], qos_context(large)).burst == 9216


def test_rules_hold_ipv4_prefixes_compactly_and_give_networks_back() -> None:
    rule = P.Rule("allow", "default", ipaddress.ip_network("10.1.0.0/16"), ipaddress.ip_network("fd00::/64"))
    assert rule.src == ipaddress.IPv4Network("10.1.0.0/16") and isinstance(rule.src, ipaddress.IPv4Network)
    assert rule.dst == ipaddress.IPv6Network("fd00::/64")
    held = P.Rule.__dict__["src"]._slot.__get__(rule)
    assert sys.getsizeof(held) < sys.getsizeof(rule.src)  # an integer, not the network
    assert pickle.loads(pickle.dumps(rule)) == rule
    assert dataclasses.replace(rule, dst=ipaddress.ip_network("0.0.0.0/0")).dst == ipaddress.IPv4Network("0.0.0.0/0")
    assert hash(rule) == hash(P.Rule("allow", "default", ipaddress.ip_network("10.1.0.0/16"), ipaddress.ip_network("fd00::/64")))
    assert P.Rule("allow").src is None


def test_tenants_hold_one_vni_and_one_rule_as_the_item_and_give_tuples_back() -> None:
    one = quiet(tenants({"rules": [{"dst": "10.0.0.0/8", "action": "drop"}]})).tenants[0]
    assert one.vnis == (1,) and type(one.rules) is tuple and len(one.rules) == 1
    assert P.Tenant.__dict__["vnis"].held(one) == 1 and P.Tenant.__dict__["rules"].held(one) is one.rules[0]
    two = dataclasses.replace(one, vnis=(1, 2), rules=())
    assert two.vnis == (1, 2) and two.rules == () and P.Tenant.__dict__["vnis"].held(two) == (1, 2)
    assert pickle.loads(pickle.dumps(one)) == one and hash(dataclasses.replace(one)) == hash(one)
    assert Policy.from_dict(quiet(tenants({})).to_dict()).tenants[0].vnis == (1,)


def test_meters_of_distinct_rates_share_the_rest_of_their_terms_and_read_as_whole_meters() -> None:
    remark = {"remark": 10}
    meter = {"kind": "trtcm", "cbs": "10MB", "pir": "5Gbps", "pbs": "20MB", "count": "inner", "actions": {"yellow": remark, "red": "drop"}}
    policy = quiet(tenants(*({"meter": {**meter, "cir": f"{rate}Gbps"}} for rate in (1, 2, 1))))
    one, two, again = (t.contract.meter for t in policy.tenants)
    assert one is again and one is not two, "an equal meter read once"
    assert one._terms is two._terms, "distinct rates, the rest kept once"
    assert (one.cir_bps, two.cir_bps, two.pir_bps, two.pbs_bytes, two.count, two.yellow) == (10**9, 2 * 10**9, 5 * 10**9, 20_000_000, "inner", P.Remark(10))
    assert sys.getsizeof(one) < 64 < sys.getsizeof(two._terms), "the meter holds its kind, its rate and the shared rest"
    assert two == P.Meter("trtcm", 2 * 10**9, 10_000_000, None, 5 * 10**9, 20_000_000, count="inner", yellow=P.Remark(10)) != one
    assert hash(two) == hash(pickle.loads(pickle.dumps(two))) and pickle.loads(pickle.dumps(two)) == two
    assert dataclasses.replace(two, cir_bps=10**9) == one and dataclasses.replace(one, red="pass").red == "pass"
    assert [f.name for f in dataclasses.fields(P.Meter)][:3] == ["kind", "cir_bps", "cbs_bytes"] and "_terms" not in repr(one)
    with pytest.raises(dataclasses.FrozenInstanceError):
        one.pbs_bytes = 1  # type: ignore[misc]
    assert Policy.from_dict(policy.to_dict()).tenants[1].contract.meter == two


def test_a_vni_claimed_twice_names_where_it_was_claimed_first() -> None:
    data = {"tenants": [{"name": "a", "vnis": [5, 7]}, {"name": "b", "vnis": [6]}, {"name": "c", "vnis": [7]}]}
    assert errors_of(data) == [("tenants[2].vnis[0]", "VNI 7 is claimed by both 'a' (tenants[0].vnis[1]) and 'c'")]


def test_compact_prefixes_compile_to_the_same_rows() -> None:
    data = tenants({"rules": [{"src": "10.1.0.0/16", "dst": "192.0.2.7", "action": "allow"}, {"dst": "::ffff:10.0.0.0/104", "action": "drop"}]})
    tenant = quiet(data).tenants[0]
    rows = tenant_tables(tenant, keep=False).packed_rows
    as_networks = dataclasses.replace(tenant, rules=tuple(dataclasses.replace(r) for r in tenant.rules))
    assert tenant_tables(as_networks, keep=False).packed_rows == rows
    assert Policy.from_dict(quiet(data).to_dict()).tenants[0].rules == tenant.rules


def test_a_document_read_again_shares_the_tenants_of_the_policies_alive() -> None:
    data = tenants(*({"rate": f"{i + 1}Mbps"} for i in range(5)))
    first = quiet(data)
    data["tenants"][2] = {**data["tenants"][2], "rate": "9Mbps"}
    second = quiet(data)
    assert [a is b for a, b in zip(first.tenants, second.tenants)] == [True, True, False, True, True]


PORT = {"rate": "100Gbps", "buffer": "16MiB"}


def test_a_document_read_again_under_another_port_shares_every_tenant_that_reads_alike() -> None:
    data = tenants(*({"rate": f"{i + 1}Mbps"} for i in range(5)), port=PORT)
    first = quiet(data)
    again = quiet({**data, "port": {**PORT, "buffer": "32MiB"}})
    assert again.port != first.port
    assert all(a is b for a, b in zip(first.tenants, again.tenants, strict=True))


def test_a_tenant_that_warns_otherwise_under_another_port_is_read_apart() -> None:
    """Its warnings are kept with it: shared, a document read again under the other port would
    report the first port's (none) for it."""
    data = tenants({"rate": "1Mbps"}, {"rate": "2Mbps", "shaper": {"queue": "8MiB"}}, port=PORT)
    first = quiet(data)
    smaller = {**data, "port": {**PORT, "buffer": "4MiB"}}
    for _ in range(2):  # the second time, from the tenants of the first
        with warnings.catch_warnings(record=True) as found:
            warnings.simplefilter("always")
            second = Policy.from_dict(smaller)
        assert [str(w.message).split(":")[0] for w in found] == ["tenants[1].shaper.queue"]
        assert second.tenants[0] is first.tenants[0] and second.tenants[1] is not first.tenants[1]
        assert second.tenants[1] == first.tenants[1]


def test_a_tenant_read_under_one_port_is_checked_again_under_another_while_both_are_alive() -> None:
    first = quiet(tenants({"rate": "50Gbps"}, port=PORT))
    assert errors_of(tenants({"rate": "50Gbps"}, port={**PORT, "rate": "40Gbps"})) == [
        ("tenants[0].rate", "rate '50Gbps' is above the port's line rate 40Gbps: it cannot be guaranteed")
    ]
    assert first.tenants[0].contract.rate_bps == 50_000_000_000


@pytest.mark.parametrize(
    "changed",
    [
        {"buffer": "32MiB"},
        {"rate": "400Gbps"},
        {"mode": "shared_fifo"},
        {"alpha": 4},
        {"reserve": "1MiB"},
        {"microburst": {"window": "20us", "threshold": "50%"}},
    ],
    ids=lambda changed: next(iter(changed)),
)
def test_an_engine_given_a_document_with_its_port_changed_compiles_no_tenant(monkeypatch: pytest.MonkeyPatch, changed: dict[str, Any]) -> None:
    """Nor a tenant without a ceiling under a new line rate: its ceiling is the port's, whatever it is."""
    data = tenants(*({"rate": f"{i + 1}Mbps"} for i in range(19)), {"rate": "1Mbps", "ceil": "1Gbps"}, port=PORT)
    engine = Engine(quiet(data))
    compiled: list[str] = []
    monkeypatch.setattr(isolane.engine, "tenant_tables", lambda tenant, keep=True: compiled.append(tenant.name) or tenant_tables(tenant, keep))
    edited = quiet({**data, "port": {**PORT, **changed}})
    report = engine.update(edited)
    assert compiled == [] and report.kept == 20
    assert engine.policy.port == edited.port != quiet(data).port


def test_tenants_are_not_kept_for_reading_once_no_policy_holds_them() -> None:
    data = tenants({"rate": "1Mbps"})
    first = quiet(data)
    held = first.tenants[0]
    del first
    gc.collect()
    assert sys.getrefcount(held) == 2  # `held` and the call's argument: no table of what was read holds a tenant


def test_with_tenant_of_the_same_data_keeps_the_tenant() -> None:
    data = tenants({"rate": "1Mbps"}, {"rate": "2Mbps"})
    policy = quiet(data)
    again = policy.with_tenant(data["tenants"][1])
    assert again.tenants[1] is policy.tenants[1]
    changed = policy.with_tenant({**data["tenants"][1], "rate": "3Mbps"})
    assert changed.tenants[1] is not policy.tenants[1] and changed.tenants[1].contract.rate_bps == 3_000_000


def test_a_small_document_beside_a_far_larger_policy_is_read_afresh() -> None:
    """Indexing 100,000 tenants to read one would cost more than reading it; a document of 16
    tenants or more shares whatever it can."""
    data = tenants(*({"rate": f"{i + 1}Mbps"} for i in range(400)))
    large = quiet(data)
    alone = quiet({"tenants": [data["tenants"][-1]]})
    assert alone.tenants[0] == large.tenants[-1] and alone.tenants[0] is not large.tenants[-1]
    some = quiet({"tenants": data["tenants"][:16]})
    assert all(a is b for a, b in zip(some.tenants, large.tenants, strict=False))


def test_policies_are_kept_track_of_without_hashing_their_tenants(monkeypatch: pytest.MonkeyPatch) -> None:
    """Hashing a policy hashes every tenant: an edit of one tenant must not."""
    policy = quiet(tenants({"rate": "1Mbps"}, {"rate": "2Mbps"}))

    def refuse(self: object) -> int:
        raise AssertionError("a policy was hashed")

    monkeypatch.setattr(Tenants, "__hash__", refuse)
    edited = policy.with_tenant({"name": "t1", "vnis": [2], "rate": "3Mbps"})
    assert quiet(tenants(*({"rate": f"{i + 1}Mbps"} for i in range(20)))).tenants[0] is not None
    assert edited.tenants[1].contract.rate_bps == 3_000_000
