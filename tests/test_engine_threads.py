"""Engine(policy, threads=N) (docs/qos.md, "Several threads"): the same rows, statistics and
counters as one thread, packet by packet, on random policies and traffic, across updates that
keep, reset, add and drop tenants, when one tenant has every packet, and with a port."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import isolane
from isolane import Engine, Outcome, Policy
from support.locations import ROOT, SAMPLE
from test_engine_qos import policy, random_meter, random_policy, random_traffic

# Below 8,192 packets a batch runs on the calling thread; the sizes below try both paths and,
# at 40,000, several pieces classified ahead of the enforcer (rust/engine/pipeline.rs).
BATCH_SIZES = (1, 700, 5_000, 40_000)


def random_tenants(rng: np.random.Generator, count: int, first_vni: int = 100) -> list[dict[str, Any]]:
    """``count`` tenants as test_engine_qos's random policies make them (meters, shapers, two
    classes), named and numbered from ``first_vni``."""
    tenants: list[dict[str, Any]] = []
    while len(tenants) < count:
        tenants += random_policy(rng).to_dict()["tenants"]
    return [{**tenant, "name": f"t{first_vni + i}", "vnis": [first_vni + i]} for i, tenant in enumerate(tenants[:count])]


def tenants_policy(tenants: list[dict[str, Any]], count: str = "wire") -> Policy:
    return policy({"count": count, "unknown_tenant": "allow", "tenants": tenants})


def traffic(rng: np.random.Generator, n: int, vnis: list[int], start_ns: int) -> np.ndarray:
    rows = random_traffic(rng, n)  # VNIs 100-102 and 999 (no tenant)
    known = rows["vni"] != 999
    rows["vni"][known] = rng.choice(vnis, int(known.sum()))
    rows["timestamp_ns"] += start_ns
    return rows


def assert_same(engines: list[Engine], rows: np.ndarray, what: str) -> np.ndarray:
    expected = engines[0].process(rows)
    for engine in engines[1:]:
        got = engine.process(rows)
        differ = np.flatnonzero(got != expected)
        if len(differ):
            i = differ[0]
            pytest.fail(f"{what}, {engine.threads} threads, packet {i} of {len(rows)}: {got[i]}, one thread: {expected[i]}")
        assert engine.stats() == engines[0].stats(), f"{what}, {engine.threads} threads: stats"
        assert engine.counters() == engines[0].counters(), f"{what}, {engine.threads} threads: counters"
    return expected


@pytest.mark.parametrize("seed", range(3))
def test_two_and_three_threads_give_what_one_gives_across_updates(seed: int) -> None:
    rng = np.random.default_rng(seed)
    tenants = random_tenants(rng, int(rng.integers(1, 12)))
    engines = [Engine(tenants_policy(tenants), threads=threads) for threads in (1, 2, 3)]
    seen: set[int] = set()
    time = 0
    for step in range(3):
        vnis = [t["vnis"][0] for t in tenants]
        for size in BATCH_SIZES:
            rows = traffic(rng, size, vnis, time)
            time = int(rows["timestamp_ns"].max())
            seen |= set(assert_same(engines, rows, f"policy {step}, batch of {size}")["outcome"].tolist())
        # Drop some tenants, change some contracts, add new ones, shuffle: state follows names.
        kept = [t for t in tenants if rng.integers(5)]
        changed = [t if rng.integers(3) else {**t, "meter": random_meter(rng)} for t in kept]
        tenants = [changed[i] for i in rng.permutation(len(changed))] + random_tenants(rng, int(rng.integers(0, 3)), 200 + 10 * step)
        if not tenants:
            tenants = random_tenants(rng, 1, 300 + step)
        for engine in engines:
            engine.update(tenants_policy(tenants))
    assert {Outcome.PASS, Outcome.DROP_CLASSIFIER, Outcome.DROP_METER} <= seen, seen


def test_a_batch_of_one_tenant() -> None:
    rng = np.random.default_rng(7)
    tenants = random_tenants(rng, 6)
    tenants[0]["meter"] = {"kind": "srtcm", "cir": "2000000B/s", "cbs": "20000B"}
    engines = [Engine(tenants_policy(tenants), threads=threads) for threads in (1, 2)]
    rows = traffic(rng, 30_000, [100], 0)
    out = assert_same(engines, rows, "one tenant")
    assert sum(s["packets"] for s in engines[1].stats()) == len(rows)
    assert (out["outcome"] == Outcome.DROP_METER).any()


def test_a_port_on_two_threads_gives_what_one_gives() -> None:
    rng = np.random.default_rng(11)
    tenants = random_tenants(rng, 6)
    with_port = {"count": "wire", "unknown_tenant": "allow", "port": {"rate": "10Mbps", "buffer": "16KiB"}, "tenants": tenants}
    engines = [Engine(policy(with_port), threads=threads) for threads in (1, 2)]
    outcomes = np.concatenate(
        [assert_same(engines, traffic(rng, n, [100 + i for i in range(6)], n * 10**6), f"a port, {n} packets")["outcome"] for n in BATCH_SIZES]
    )
    for outcome in (Outcome.PASS, Outcome.DROP_PORT_QUEUE):
        assert (outcomes == outcome).sum() > 50, f"{outcome.name}: the port should see it"


def test_an_update_adds_a_port_to_a_two_thread_engine() -> None:
    rng = np.random.default_rng(12)
    tenants = random_tenants(rng, 3)
    without = tenants_policy(tenants)
    with_port = policy({"count": "wire", "unknown_tenant": "allow", "port": {"rate": "1Gbps", "buffer": "1MiB"}, "tenants": tenants})
    engines = [Engine(without, threads=threads) for threads in (1, 2)]
    assert_same(engines, traffic(rng, 20_000, [100, 101, 102], 0), "before the port")
    for engine in engines:
        engine.update(with_port)
    assert_same(engines, traffic(rng, 20_000, [100, 101, 102], 10**9), "with the port")


def test_threads_must_be_a_positive_int() -> None:
    pol = policy({"tenants": [{"name": "a", "vnis": [100]}]})
    with pytest.raises(ValueError, match="at least 1"):
        Engine(pol, threads=0)
    with pytest.raises(TypeError, match="int"):
        Engine(pol, threads=2.0)  # type: ignore[arg-type]
    assert Engine(pol, threads=4).threads == 4


SAMPLE_POLICY = ROOT / "pcaps" / "tenants.yaml"


def tiled_capture(copies: int) -> isolane.PacketBatch:
    """The sample capture `copies` times over, each copy a second after the one before."""
    sample = isolane.read_pcap(SAMPLE)
    data = np.asarray(sample.data)
    times = np.asarray(sample.timestamps_ns)
    span = int(times.max() - times.min()) + 10**9
    return isolane.PacketBatch.from_arrays(
        np.tile(data, copies),
        np.concatenate([np.asarray(sample.offsets) + i * len(data) for i in range(copies)]),
        np.tile(np.asarray(sample.lengths), copies),
        np.concatenate([times + i * span for i in range(copies)]),
        wire_lengths=np.tile(np.asarray(sample.wire_lengths), copies),
    )


@pytest.mark.parametrize("threads", [1, 2])
def test_a_capture_processed_as_it_is_parsed_gives_what_its_records_give(threads: int) -> None:
    batch = tiled_capture(12)  # 20,352 packets: several pieces on two threads
    sample_policy = Policy.from_file(SAMPLE_POLICY)
    from_records, from_capture = Engine(sample_policy, threads=threads), Engine(sample_policy, threads=threads)
    expected = from_records.process(isolane.parse(batch))
    got = from_capture.process(batch)
    differ = np.flatnonzero(got != expected)
    assert not len(differ), f"packet {differ[0]}: {got[differ[0]]}, from records: {expected[differ[0]]}"
    assert from_capture.stats() == from_records.stats() and from_capture.counters() == from_records.counters()
    assert len(np.unique(expected["outcome"])) > 1
