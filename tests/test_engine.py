"""Engine: tenants by VNI, verdicts for every packet, isolation, live updates."""

from __future__ import annotations

import threading
import time

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import isolane
from isolane import Engine, Policy, Reason
from support.locations import ROOT, SAMPLE

TENANTS_YAML = ROOT / "pcaps" / "tenants.yaml"


def records(vnis: list[int], dst_port: int = 80) -> np.ndarray:
    """Parsed records of VXLAN packets with the given VNIs (inner IPv4 TCP to ``dst_port``)."""
    rows = np.zeros(len(vnis), dtype=isolane.PARSED_DTYPE)
    rows["tunnel"] = isolane.Tunnel.VXLAN
    rows["vni"] = vnis
    rows["vlan"] = -1
    rows["ip_version"] = 4
    rows["proto"] = 6
    rows["dst_port"] = dst_port
    rows["src"][:, 10:12] = 0xFF
    rows["dst"][:, 10:12] = 0xFF
    rows["wire_len"] = 100
    return rows


def test_every_packet_of_the_sample_gets_a_verdict_and_is_counted() -> None:
    engine = Engine(Policy.from_file(TENANTS_YAML))
    batch = isolane.read_pcap(SAMPLE)
    rows = isolane.parse(batch)
    verdicts = engine.classify(batch)
    assert len(verdicts) == len(batch)
    names = engine.tenant_names
    for vni, name in ((100, "training"), (200, "inference"), (300, "evaluation")):
        tunnelled = (rows["vni"] == vni) & (rows["tunnel"] != 0)
        assert tunnelled.any() and (verdicts["tenant"][tunnelled] == names.index(name)).all()
    counters = engine.counters()
    assert sum(c["packets"] for c in counters.values()) == len(batch)
    for name, counts in counters.items():
        mine = verdicts["tenant"] == (names.index(name) if name is not None else -1)
        assert counts["packets"] == counts["classifier_allowed"]["packets"] + counts["classifier_dropped"]["packets"] == int(mine.sum())
        assert counts["classifier_allowed"]["packets"] == int((verdicts["action"][mine] == 1).sum())
        assert sum(counts["reasons"].values()) == int(mine.sum())


def _policy(owners: dict[str, list[int]], rules: list[dict] | None = None) -> Policy:
    """Tenants owning the given VNIs; the first one gets ``rules``."""
    return Policy.from_dict(
        {"tenants": [{"name": name, "vnis": vnis, "default": "allow", "rules": (rules or []) if i == 0 else []}
                     for i, (name, vnis) in enumerate(owners.items())]}
    )


@settings(max_examples=60, deadline=None)
@given(
    st.dictionaries(st.sampled_from(["a", "b", "c", "d"]), st.sets(st.integers(0, (1 << 24) - 1), min_size=1, max_size=5), min_size=1)
    .filter(lambda d: len(set().union(*d.values())) == sum(len(v) for v in d.values())),
    st.lists(st.integers(0, (1 << 24) - 1), min_size=1, max_size=50),
)
def test_a_packet_only_ever_belongs_to_the_tenant_of_its_vni(owners: dict[str, set[int]], stray: list[int]) -> None:
    engine = Engine(_policy({name: sorted(vnis) for name, vnis in owners.items()}))
    owner = {vni: engine.tenant_names.index(name) for name, vnis in owners.items() for vni in vnis}
    vnis = sorted(owner) + stray
    verdicts = engine.classify(records(vnis))
    assert verdicts["tenant"].tolist() == [owner.get(vni, -1) for vni in vnis]
    assert all(verdicts["reason"][i] == Reason.UNKNOWN_TENANT for i, vni in enumerate(vnis) if vni not in owner)


def test_first_matching_policy_rule_and_its_class() -> None:
    policy = Policy.from_dict({"tenants": [{
        "name": "t", "vnis": [7], "default": "drop",
        "classes": [{"name": "bulk"}, {"name": "web"}],
        "rules": [
            {"dst_ports": [22, 23], "proto": "tcp", "action": "drop"},
            {"dst_ports": "80-443", "proto": "tcp", "action": "allow", "class": "web"},
        ],
    }]})
    verdicts = Engine(policy).classify(np.concatenate([records([7], 23), records([7], 443), records([7], 8080)]))
    assert verdicts["rule"].tolist() == [0, 1, -1]
    assert verdicts["action"].tolist() == [0, 1, 0]
    assert verdicts["cls"].tolist() == [-1, 1, -1]
    assert verdicts["reason"].tolist() == [Reason.RULE, Reason.RULE, Reason.DEFAULT]


def _big_policy(extra_port: int | None) -> Policy:
    rules = [{"dst": f"10.{i // 250}.{i % 250}.0/24", "dst_ports": 1000 + i % 5000, "proto": "tcp", "action": "allow"} for i in range(10_000)]
    if extra_port is not None:
        rules.insert(5000, {"dst_ports": extra_port, "proto": "udp", "action": "drop"})
    return _policy({"big": [1], "small": [2]}, rules=rules)


def test_one_rule_change_is_applied_incrementally_and_other_tenants_are_kept() -> None:
    engine = Engine(_big_policy(None))
    before = engine.classify(records([1, 2], 1000))
    start = time.perf_counter()
    report = engine.update(_big_policy(53))
    elapsed = time.perf_counter() - start
    assert report == isolane.UpdateReport(kept=1, incremental=1, rebuilt=0), report
    udp = records([1], 53)
    udp["proto"] = 17
    assert engine.classify(udp)["rule"].tolist() == [5000]
    assert engine.classify(records([1, 2], 1000))["rule"].tolist() == before["rule"].tolist()
    assert elapsed < 5, f"a one-rule update took {elapsed:.3f} s"  # generous: the number is in bench/RESULTS.md


def test_classifying_threads_keep_going_through_updates_and_nothing_is_lost() -> None:
    policies = [_policy({"a": [1]}, [{"dst_ports": 80, "action": "drop"}]), _policy({"a": [1]}, [{"dst_ports": 81, "action": "drop"}])]
    engine = Engine(policies[0])
    batch = records([1] * 4096, 80)
    done = threading.Event()
    classified: list[int] = []
    torn: list[int] = []

    def classify() -> None:
        while not done.is_set():
            verdicts = engine.classify(batch)
            if len(set(verdicts["action"].tolist())) != 1:  # half one policy, half the other
                torn.append(len(classified))
            classified.append(len(verdicts))

    workers = [threading.Thread(target=classify) for _ in range(2)]
    for worker in workers:
        worker.start()
    for round_ in range(200):
        engine.update(policies[round_ % 2])
    done.set()
    for worker in workers:
        worker.join()
    assert not torn
    counters = engine.counters()["a"]
    assert counters["packets"] == sum(classified)


def test_rule_edits_reach_the_data_path_and_match_a_fresh_compile() -> None:
    engine = Engine(_policy({"a": [1], "b": [2]}, [{"dst_ports": 80, "proto": "tcp", "action": "allow"}]))
    engine.insert_rule("a", 0, {"dst_ports": [8080, 8081], "proto": "tcp", "action": "drop"})
    engine.insert_rule("a", 2, {"dst_ports": "9000-9100", "proto": "tcp", "action": "drop"})
    assert [engine.classify(records([1], port))["rule"][0] for port in (8081, 80, 9050, 7)] == [0, 1, 2, -1]
    engine.replace_rule("a", 0, {"dst_ports": 7, "proto": "tcp", "action": "drop"})
    engine.remove_rule("a", 1)
    assert [engine.classify(records([1], port))["rule"][0] for port in (8081, 80, 9050, 7)] == [-1, -1, 1, 0]
    # The tables patched rule by rule are exactly what the edited policy compiles to.
    assert engine.update(engine.policy) == isolane.UpdateReport(kept=2, incremental=0, rebuilt=0)
    assert [r.dst_ports for r in engine.policy.tenant("a").rules] == [((7, 7),), ((9000, 9100),)]


def test_rule_edits_show_in_the_policy_in_order_and_an_update_replaces_them() -> None:
    tcp = lambda port, action="allow": {"dst_ports": port, "proto": "tcp", "action": action}  # noqa: E731
    engine = Engine(_policy({"a": [1], "b": [2]}, [tcp(80), tcp(81)]))
    engine.insert_rule("b", 0, tcp(22, "drop"))
    engine.insert_rule("a", 2, tcp(82))
    engine.remove_rule("a", 0)
    engine.replace_rule("a", 1, tcp(83))
    engine.replace_rule("b", 0, tcp(23, "drop"))  # "b" has a rule now, though the policy was not read since
    try:
        engine.remove_rule("b", 1)
    except IndexError:
        pass
    else:
        raise AssertionError("an index past the edited rules was accepted")
    ports = lambda name: [rule.dst_ports[0][0] for rule in engine.policy.tenant(name).rules]  # noqa: E731
    assert (ports("a"), ports("b")) == ([81, 83], [23])
    assert engine.policy is engine.policy
    assert engine.update(engine.policy) == isolane.UpdateReport(kept=2, incremental=0, rebuilt=0)
    engine.remove_rule("b", 0)
    original = _policy({"a": [1], "b": [2]}, [tcp(80), tcp(81)])
    engine.update(original)
    assert engine.policy is original, "the update replaced the edit made before it"
    assert [engine.classify(records([1, 2], port))["rule"].tolist() for port in (80, 23)] == [[0, -1], [-1, -1]]


def test_rule_edits_refuse_what_is_not_a_rule() -> None:
    engine = Engine(_policy({"a": [1]}, [{"dst_ports": 80, "action": "allow"}]))
    try:
        engine.insert_rule("a", 0, {"dst": "10.0.0.0/33", "action": "allow"})
    except isolane.PolicyError as err:
        assert err.errors[0][0] == "tenants[0].rules[0].dst", err.errors
    else:
        raise AssertionError("an invalid prefix was accepted")
    for call in (lambda: engine.remove_rule("a", 1), lambda: engine.insert_rule("a", 2, {"action": "drop"})):
        try:
            call()
        except IndexError:
            pass
        else:
            raise AssertionError("an index past the rules was accepted")
    try:
        engine.remove_rule("nobody", 0)
    except KeyError:
        pass
    else:
        raise AssertionError("an unknown tenant was accepted")
    assert len(engine.policy.tenant("a").rules) == 1


def test_one_rule_insert_into_a_10k_rule_tenant_end_to_end() -> None:
    engine = Engine(_big_policy(None))
    times = []
    for _ in range(10):
        start = time.perf_counter()
        engine.insert_rule("big", 5000, {"dst_ports": 53, "proto": "udp", "action": "drop"})
        times.append(time.perf_counter() - start)
        engine.remove_rule("big", 5000)
    udp = records([1], 53)
    udp["proto"] = 17
    engine.insert_rule("big", 5000, {"dst_ports": 53, "proto": "udp", "action": "drop"})
    assert engine.classify(udp)["rule"].tolist() == [5000]
    assert sorted(times)[5] < 0.5, f"median {sorted(times)[5] * 1e3:.2f} ms"  # generous; the number is in bench/RESULTS.md
