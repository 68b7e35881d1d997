"""Engine.process and Engine.stats (docs/qos.md, "Enforcement"): packet by packet against a plain
reference on random traffic, policing accuracy, conforming traffic untouched, state across
updates, statistics that add up, and the errors bad input gets."""

from __future__ import annotations

import dataclasses
import warnings
from typing import Any

import numpy as np
import pytest

import isolane
from isolane import PROCESSED_DTYPE, VERDICT_DTYPE, Color, Engine, Outcome, Policy
from support.locations import SAMPLE
from support.qos_reference import Reference
from test_engine import records as vxlan_records

VERDICT_FIELDS = list(VERDICT_DTYPE.names or ())
QOS_FIELDS = ["color", "outcome", "dscp", "release_ns"]


def policy(data: dict[str, Any]) -> Policy:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", isolane.PolicyWarning)
        return Policy.from_dict({"version": 1, "largest_frame": "1500B", **data})


def records(vnis: Any, timestamps: Any, wire_len: Any, dst_port: Any = 443, dscp: Any = 0) -> np.ndarray:
    """Parsed VXLAN records (inner IPv4 TCP) with the given columns (scalars broadcast)."""
    rows = vxlan_records(list(vnis))
    rows["dst_port"] = dst_port
    rows["dscp"] = dscp
    rows["timestamp_ns"] = timestamps
    rows["wire_len"] = wire_len
    rows["inner_len"] = np.asarray(wire_len) - 50
    return rows


def process_in_batches(engine: Engine, rows: np.ndarray, rng: np.random.Generator, batches: int) -> np.ndarray:
    cuts = np.sort(rng.choice(np.arange(1, len(rows)), size=batches - 1, replace=False))
    return np.concatenate([engine.process(part) for part in np.split(rows, cuts)])


# ---------------------------------------------------------------------------------------------
# Against the reference, packet by packet


def random_meter(rng: np.random.Generator) -> dict[str, Any]:
    kind = str(rng.choice(["srtcm", "trtcm", "rfc4115"]))
    cir = int(rng.integers(50_000, 1_000_000))
    meter: dict[str, Any] = {
        "kind": kind,
        "cir": f"{cir}B/s",
        "cbs": f"{rng.integers(1500, 20_000)}B",
        "color_aware": bool(rng.integers(2)),
        "count": str(rng.choice(["inner", "outer", "wire", "wire_fcs"])),
        "actions": {
            "green": "pass",
            "yellow": ["pass", "drop", {"remark": int(rng.integers(64))}][rng.integers(3)],
            "red": ["drop", {"remark": 8}][rng.integers(2)],
        },
    }
    if kind == "srtcm":
        meter["ebs"] = f"{rng.choice([0, rng.integers(1500, 20_000)])}B"
    elif kind == "trtcm":
        meter.update(pir=f"{cir + rng.integers(0, 1_000_000)}B/s", pbs=f"{rng.integers(1500, 30_000)}B")
    else:
        eir = int(rng.choice([0, rng.integers(10_000, 500_000)]))
        meter.update(eir=f"{eir}B/s", ebs=f"{rng.integers(1500, 20_000) if eir else 0}B")
    return meter


def random_shaper(rng: np.random.Generator) -> dict[str, Any]:
    return {
        "rate": f"{rng.integers(100_000, 1_000_000)}B/s",
        "burst": f"{rng.integers(1500, 10_000)}B",
        "queue": f"{rng.integers(1500, 12_000)}B",
        "max_delay": f"{rng.integers(1_000_000, 60_000_000)}ns",
    }


def random_policy(rng: np.random.Generator) -> Policy:
    tenants = []
    for t in range(3):
        web: dict[str, Any] = {"name": "web"}
        if rng.integers(2):
            web["meter"] = random_meter(rng)
        if rng.integers(3):
            web["shaper"] = random_shaper(rng)
        tenant: dict[str, Any] = {
            "name": f"t{t}",
            "vnis": [100 + t],
            "classes": [{"name": "bulk"}, web],
            "rules": [{"dst_ports": 80, "class": "web", "action": "allow"}, {"dst_ports": 22, "action": "drop"}],
        }
        if rng.integers(3):
            tenant["meter"] = random_meter(rng)
        if rng.integers(3):
            tenant["shaper"] = random_shaper(rng)
        tenants.append(tenant)
    return policy({"count": str(rng.choice(["inner", "outer", "wire", "wire_fcs"])), "unknown_tenant": "allow", "tenants": tenants})


def random_traffic(rng: np.random.Generator, n: int) -> np.ndarray:
    # Quiet spells and bursts, so that buckets both refill and run dry.
    gaps = np.where(rng.random(n) < 0.3, rng.exponential(10_000, n), rng.exponential(500_000, n)).astype(np.int64)
    timestamps = np.cumsum(gaps) + 1_000
    jitter = rng.random(n) < 0.05  # a few timestamps run backwards, as in merged captures
    timestamps[jitter] -= rng.integers(0, 2_000_000, int(jitter.sum()))
    vnis = rng.choice([100, 101, 102, 100, 101, 102, 999], n)
    return records(
        vnis,
        timestamps,
        rng.integers(64, 1501, n),
        dst_port=rng.choice([80, 80, 443, 22], n),
        dscp=rng.integers(0, 64, n),
    )


SEEDS = range(8)


@pytest.mark.parametrize("seed", SEEDS)
def test_process_agrees_with_the_reference_packet_by_packet(seed: int) -> None:
    rng = np.random.default_rng(seed)
    pol = random_policy(rng)
    rows = random_traffic(rng, 3000)
    processed = process_in_batches(Engine(pol), rows, rng, batches=7)
    np.testing.assert_array_equal(processed[VERDICT_FIELDS], Engine(pol).classify(rows))
    expected = Reference(pol.compile_qos()).run(rows, processed[VERDICT_FIELDS])
    got = np.stack([processed[name].astype(np.int64) for name in QOS_FIELDS], axis=1)
    for i in np.flatnonzero((got != expected).any(axis=1))[:1]:
        pytest.fail(f"packet {i}: engine {dict(zip(QOS_FIELDS, got[i]))}, reference {dict(zip(QOS_FIELDS, expected[i]))}")


TIE_METERS = [
    {"kind": "srtcm", "cir": "100000B/s", "cbs": "1000B", "ebs": "600B"},
    {"kind": "trtcm", "cir": "100000B/s", "cbs": "600B", "pir": "200000B/s", "pbs": "1000B"},
    {"kind": "rfc4115", "cir": "100000B/s", "cbs": "1000B", "eir": "50000B/s", "ebs": "600B"},
]


@pytest.mark.parametrize("aware", [False, True], ids=["blind", "aware"])
@pytest.mark.parametrize("meter", TIE_METERS, ids=[m["kind"] for m in TIE_METERS])
def test_meters_agree_with_the_reference_where_packets_exactly_empty_a_bucket(meter: dict[str, Any], aware: bool) -> None:
    """The random traffic above almost never has a packet find exactly its bytes in a bucket,
    where RFC 4115 (Tc(t)- B > 0) parts from RFCs 2697 and 2698 (Tc(t)-B >= 0). Here packets are
    whole milliseconds apart and sizes whole hundreds of bytes, so buckets hold multiples of 50
    bytes and such ties are common."""
    rng = np.random.default_rng(4115)
    n = 20_000
    gaps = rng.choice([0, 0, 1, 2, 5], n) * 1_000_000
    rows = records(np.full(n, 100), np.cumsum(gaps), rng.choice([100, 200, 300, 500, 600, 1000], n), dscp=rng.choice([0, 0, 12, 14], n))
    contract = {**meter, "color_aware": aware, "actions": {"red": "pass"}}
    pol = policy({"count": "outer", "tenants": [{"name": "a", "vnis": [100], "meter": contract}]})
    processed = process_in_batches(Engine(pol), rows, rng, batches=5)
    reference = Reference(pol.compile_qos())
    expected = reference.run(rows, processed[VERDICT_FIELDS])
    got = np.stack([processed[name].astype(np.int64) for name in QOS_FIELDS], axis=1)
    differ = np.flatnonzero((got != expected).any(axis=1))
    for i in differ[:1]:
        pytest.fail(f"{len(differ)} of {n} packets differ; packet {i}: engine {dict(zip(QOS_FIELDS, got[i]))}, reference {dict(zip(QOS_FIELDS, expected[i]))}")
    ties = reference.tenant_meters[0].ties
    assert ties > 1000 and np.bincount(expected[:, 0], minlength=3).min() > 100, ties


def test_random_traffic_reaches_every_stage() -> None:
    """The packet-by-packet comparison is only as good as the outcomes its traffic produces."""
    seen: set[int] = set()
    for seed in SEEDS:
        rng = np.random.default_rng(seed)
        pol = random_policy(rng)
        seen |= set(Engine(pol).process(random_traffic(rng, 3000))["outcome"].tolist())
    wanted = {Outcome.PASS, Outcome.REMARKED, Outcome.DROP_CLASSIFIER, Outcome.DROP_METER, Outcome.DROP_SHAPER_BYTES, Outcome.DROP_SHAPER_TIME}
    assert wanted <= seen


# ---------------------------------------------------------------------------------------------
# Policing accuracy and conforming traffic

CIR = 125_000_000  # 1Gbps in bytes/s


@pytest.mark.parametrize(
    "meter",
    [
        {"kind": "srtcm", "cir": "1Gbps"},
        {"kind": "trtcm", "cir": "1Gbps", "pir": "1Gbps", "actions": {"yellow": "drop"}},
        {"kind": "rfc4115", "cir": "1Gbps", "eir": "0bps"},
    ],
)
def test_a_tenant_offered_twice_its_cir_for_a_second_gets_its_cir(meter: dict[str, Any]) -> None:
    engine = Engine(policy({"tenants": [{"name": "a", "vnis": [100], "meter": meter}]}))
    size, offered = 1500, 2 * CIR
    n = offered // size  # one second of packet time
    timestamps = np.arange(n, dtype=np.int64) * (10**9 * size // offered)
    rows = records(np.full(n, 100), timestamps, size)
    passed = 0
    for start in range(0, n, 65536):
        out = engine.process(rows[start : start + 65536])
        passed += int(out["outcome"].__eq__(Outcome.PASS).sum()) * size
    assert abs(passed / CIR - 1) < 0.005, passed
    stats = next(s for s in engine.stats() if s["tenant"] == "a")
    assert stats["outcomes"]["pass"]["bytes"] == passed


@pytest.mark.parametrize("seed", range(4))
def test_conforming_packets_are_never_dropped_nor_delayed(seed: int) -> None:
    rng = np.random.default_rng(seed)
    rate = int(rng.integers(1_000_000, 100_000_000))
    meter = {"kind": str(rng.choice(["srtcm", "trtcm", "rfc4115"])), "cir": f"{rate}B/s", "color_aware": True}
    if meter["kind"] == "trtcm":
        meter["pir"] = f"{rate}B/s"
    if meter["kind"] == "rfc4115":
        meter["eir"] = "0bps"
    contract = {"meter": meter, "shaper": {"rate": f"{rate}B/s"}}
    engine = Engine(policy({"count": "outer", "tenants": [{"name": "a", "vnis": [100], **contract, "classes": [{"name": "c", **contract}]}]}))
    n = 20_000
    sizes = rng.integers(64, 1501, n)
    # Each packet no sooner than its bytes take at the rate, after the one before: within contract.
    gaps = np.ceil(sizes * 1e9 / rate).astype(np.int64) + rng.integers(0, 50_000, n)
    timestamps = np.cumsum(gaps)
    out = process_in_batches(engine, records(np.full(n, 100), timestamps, sizes, dscp=10), rng, batches=5)
    assert (out["outcome"] == Outcome.PASS).all()
    assert (out["color"] == Color.GREEN).all()
    np.testing.assert_array_equal(out["release_ns"], timestamps)


# ---------------------------------------------------------------------------------------------
# Updates and statistics


def two_tenants(cir_b: str, rules_a: list[dict[str, Any]]) -> Policy:
    meter = {"kind": "srtcm", "cir": "1000B/s", "cbs": "3000B", "ebs": "0B"}
    return policy(
        {
            "tenants": [
                {"name": "a", "vnis": [100], "meter": meter, "rules": rules_a},
                {"name": "b", "vnis": [200], "meter": {**meter, "cir": cir_b}},
            ]
        }
    )


def test_update_keeps_the_state_of_unchanged_contracts_and_resets_changed_ones() -> None:
    engine = Engine(two_tenants("1000B/s", []))
    burst = records([100, 100, 200, 200], 0, 1500)
    assert engine.process(burst)["outcome"].tolist() == [Outcome.PASS] * 4
    # a's rules change (not its contract), b's rate changes; both buckets are empty now.
    report = engine.update(two_tenants("2000B/s", [{"dst_ports": 22, "action": "drop"}]))
    assert (report.kept, report.rebuilt + report.incremental) == (1, 1)
    after = engine.process(records([100, 200], 1_000, 1500))["outcome"].tolist()
    assert after == [Outcome.DROP_METER, Outcome.PASS]
    # The same policy again: nothing is reset.
    engine.update(two_tenants("2000B/s", [{"dst_ports": 22, "action": "drop"}]))
    assert engine.process(records([200, 200], 2_000, 1500))["outcome"].tolist() == [Outcome.PASS, Outcome.DROP_METER]
    packets = {s["tenant"]: s["packets"] for s in engine.stats()}
    assert packets == {"a": 3, "b": 5}


def mixed_run() -> tuple[Engine, np.ndarray]:
    """An engine that processed random traffic of two tenants (one with two classes) and of no
    tenant through meters that re-mark, shapers and a port that drops; and the rows."""
    rng = np.random.default_rng(11)
    pol = policy(
        {
            "unknown_tenant": "allow",
            "port": {"rate": "60MB/s", "buffer": "64KiB"},
            "tenants": [
                {"name": "a", "vnis": [100], "rate": "40MB/s", "meter": {"kind": "trtcm", "cir": "30MB/s", "pir": "50MB/s",
                                                                        "actions": {"yellow": {"remark": "af12"}}},
                 "classes": [{"name": "bulk", "priority": 2}, {"name": "web", "priority": 0, "shaper": {"rate": "20MB/s"}}],
                 "rules": [{"dst_ports": 80, "class": "web", "action": "allow"}, {"dst_ports": 22, "action": "drop"}]},
                {"name": "b", "vnis": [101], "rate": "20MB/s", "shaper": {"rate": "40MB/s", "queue": "64KiB"},
                 "meter": {"kind": "srtcm", "cir": "45MB/s", "cbs": "16KiB", "ebs": "16KiB"}},
            ],
        }
    )
    engine = Engine(pol)
    n = 30_000
    rows = records(rng.choice([100, 100, 101, 101, 999], n), np.cumsum(rng.exponential(6_000, n).astype(np.int64)),
                   rng.integers(64, 1501, n), dst_port=rng.choice([80, 443, 22], n))
    return engine, process_in_batches(engine, rows, rng, batches=9)


def test_stats_add_up_to_the_packets_in_and_to_the_rows() -> None:
    engine, out = mixed_run()
    stats = engine.stats()
    assert sum(s["packets"] for s in stats) == len(out)
    for s in stats:
        outcomes = sum(o["packets"] for o in s["outcomes"].values())
        assert outcomes + s["in_flight"] == s["packets"], s
        assert sum(c["packets"] for c in s["colors"].values()) + s["outcomes"]["drop_classifier"]["packets"] == s["packets"], s
        assert sum(s["actions"].values()) == outcomes
    # Rows marked pending got their port verdict in the statistics later, or are still in flight.
    in_rows = np.bincount(out["outcome"], minlength=len(Outcome))
    in_stats = {o: sum(s["outcomes"][o.name.lower()]["packets"] for s in stats) for o in Outcome if o != Outcome.PENDING}
    resolved_later = {o: in_stats[o] - int(in_rows[o]) for o in in_stats}
    assert all(v >= 0 for v in resolved_later.values()), resolved_later
    assert sum(resolved_later.values()) + sum(s["in_flight"] for s in stats) == in_rows[Outcome.PENDING]
    # The port drops at its queues' dynamic threshold (alpha 1: before the buffer itself is full).
    assert in_rows[Outcome.PENDING] > 0 and in_stats[Outcome.DROP_PORT_QUEUE] > 0 and in_stats[Outcome.REMARKED] > 0
    web = next(s for s in stats if (s["tenant"], s["class"]) == ("a", "web"))
    assert web["delay_ns"]["count"] > 0 and web["delay_ns"]["p50"] <= web["delay_ns"]["p99"] <= web["delay_ns"]["p999"]


def test_the_stats_array_is_what_stats_reports_row_by_row() -> None:
    engine, _ = mixed_run()
    engine.stats_array()
    before = engine.stats_tenants
    # b leaves and c arrives: b's rows stay under its name, whose index does not change.
    pol = engine.policy
    engine.update(dataclasses.replace(pol, tenants=(pol.tenants[0], dataclasses.replace(pol.tenants[1], name="c", vnis=(102,)))))
    engine.process(records([100, 102, 999], 10**10, 1000))
    rows, stats, names = engine.stats_array(), engine.stats(), engine.stats_tenants
    assert rows.dtype == isolane.STATS_DTYPE and before == ["a", "b"] and names == ["a", "b", "c"]
    assert len(rows) == len(stats) == 6  # no tenant; a's classes and its packets in no class; b's class; c's
    for row, entry in zip(rows, stats):
        assert (names[row["tenant"]] if row["tenant"] >= 0 else None, row["cls"] if row["cls"] >= 0 else None) == (entry["tenant"], entry["cls"])
        assert (row["packets"], row["bytes"], row["in_flight"]) == (entry["packets"], entry["bytes"], entry["in_flight"])
        for color in Color:
            if color != Color.NONE:
                assert (row["color_packets"][color], row["color_bytes"][color]) == tuple(entry["colors"][color.name.lower()].values())
        for outcome in Outcome:
            got = (row["outcome_packets"][outcome], row["outcome_bytes"][outcome])
            assert got == ((0, 0) if outcome == Outcome.PENDING else tuple(entry["outcomes"][outcome.name.lower()].values()))
        delay = entry["delay_ns"]
        assert row["delay_count"] == delay["count"]
        for quantile in ("p50", "p99", "p999", "max"):
            assert row[f"delay_{quantile}_ns"] == (delay[quantile] if delay["count"] else 0)
    # What the traffic exercised: both metered colours, drops at several stages, queueing delays.
    totals = rows["outcome_packets"].sum(axis=0)
    assert rows["color_packets"][:, Color.YELLOW].sum() > 0 and rows["color_packets"][:, Color.RED].sum() > 0
    assert all(totals[o] > 0 for o in (Outcome.REMARKED, Outcome.DROP_CLASSIFIER, Outcome.DROP_METER, Outcome.DROP_PORT_QUEUE))
    assert (rows["delay_count"] > 0).sum() >= 2


def test_every_row_of_the_stats_array_adds_up() -> None:
    engine, out = mixed_run()
    rows = engine.stats_array()
    assert (rows["in_flight"] > 0).any(), "the port still holds packets: in_flight counts"
    np.testing.assert_array_equal(rows["outcome_packets"].sum(axis=1) + rows["in_flight"], rows["packets"])
    np.testing.assert_array_equal(rows["outcome_bytes"].sum(axis=1) <= rows["bytes"], True)
    np.testing.assert_array_equal(rows["color_packets"].sum(axis=1) + rows["outcome_packets"][:, Outcome.DROP_CLASSIFIER], rows["packets"])
    np.testing.assert_array_equal(rows["outcome_packets"][:, Outcome.PENDING], 0)
    assert rows["packets"].sum() == len(out)
    engine.drain()
    rows = engine.stats_array()
    np.testing.assert_array_equal(rows["in_flight"], 0)
    np.testing.assert_array_equal(rows["outcome_packets"].sum(axis=1), rows["packets"])
    np.testing.assert_array_equal(rows["outcome_bytes"].sum(axis=1), rows["bytes"])


def test_the_stats_dtype_is_the_rust_row() -> None:
    fields, itemsize = isolane._core.stats_layout()
    dtype = isolane.STATS_DTYPE
    assert dtype.fields is not None and dtype.itemsize == itemsize and list(dtype.fields) == [name for name, _, _ in fields]
    numpy_fields = {name: (field[0], field[1]) for name, field in dtype.fields.items()}
    assert [numpy_fields[name][1] for name, _, _ in fields] == [offset for _, _, offset in fields]
    # The fields tile the row: no byte of Rust's struct is left out or read twice.
    spans = sorted((offset, offset + numpy_fields[name][0].itemsize) for name, _, offset in fields)
    assert spans[0][0] == 0 and spans[-1][1] == itemsize and all(a[1] == b[0] for a, b in zip(spans, spans[1:]))
    assert dtype["outcome_packets"].shape == (len(Outcome),) and dtype["color_packets"].shape == (len(Color) - 1,)
    assert Engine(policy({"tenants": []})).stats_array().dtype == dtype


def test_parse_fills_the_timestamp_and_the_tenant_frame_length() -> None:
    batch = isolane.read_pcap(SAMPLE)
    rows = isolane.parse(batch)
    np.testing.assert_array_equal(rows["timestamp_ns"], batch.timestamps_ns)
    vxlan_v4 = (rows["tunnel"] == isolane.Tunnel.VXLAN) & (rows["outer_src"][:, 10] == 0xFF)
    assert vxlan_v4.any()
    # Ethernet + IPv4 + UDP + VXLAN headers: 50 bytes before the tenant's frame.
    np.testing.assert_array_equal(rows["inner_len"][vxlan_v4], rows["wire_len"][vxlan_v4] - 50)
    assert PROCESSED_DTYPE.names is not None and set(VERDICT_FIELDS + QOS_FIELDS) == set(PROCESSED_DTYPE.names)


def test_bad_input_gets_a_clear_exception() -> None:
    pol = two_tenants("1000B/s", [])
    engine = Engine(pol)
    old_records = np.zeros(2, dtype=[("vni", "<i4"), ("wire_len", "<u4")])
    with pytest.raises(TypeError, match="timestamp_ns"):
        engine.process(old_records)
    core = isolane._core.Engine()
    tables = isolane.policy.tenant_tables(pol.tenants[0])
    qos = isolane.policy.tenant_qos(pol.tenants[0], isolane.policy.qos_context(pol))
    with pytest.raises(ValueError, match=r"tenant 'a': meter kind 7"):
        core.apply([("insert", 0, tables, qos._replace(meter=qos.meter._replace(kind=7)))], (1, 1), None, 0)
    with pytest.raises(TypeError, match="OpArg"):  # the core reads the compiler's types, not look-alikes
        core.apply([("insert", 0, tables, {"name": "a"})], (1, 1), None, 0)
    with pytest.raises(ValueError, match="no tenant position 5"):
        core.apply([("replace", 5, tables, qos)], (1, 1), None, 0)
    with pytest.raises(ValueError, match="tenant op 'move'"):
        core.apply([("move", 0, tables, qos)], (1, 1), None, 0)
    with pytest.raises(isolane.EngineError, match="weight scale's divisor"):
        core.apply([("insert", 0, tables, qos)], (1, 0), None, 0)
    assert core.tenant_names == []  # nothing is installed when anything is refused
    with pytest.raises(ValueError, match="whole parsed records"):
        engine._core.process_records(np.zeros(3, dtype=np.uint8))


def test_drain_gives_every_packet_in_flight_its_fate_and_the_stream_goes_on() -> None:
    """At the end of a stream the port takes what is in flight and sends what is queued: no
    packet stays in flight, every one sent has its delay, and later batches go on."""
    pol = policy(
        {
            "port": {"rate": "10MB/s", "buffer": "1MiB"},
            "tenants": [{"name": "a", "vnis": [100], "rate": "5MB/s", "shaper": {"rate": "2MB/s", "queue": "256KiB", "max_delay": "1s"}}],
        }
    )
    engine = Engine(pol)
    n = 200
    out = engine.process(records([100] * n, np.arange(n, dtype=np.int64) * 1_000, [1500] * n))
    (before,) = engine.stats()
    assert before["in_flight"] > 0 and before["in_flight"] == (out["outcome"] == Outcome.PENDING).sum()
    engine.drain()
    (after,) = engine.stats()
    assert after["in_flight"] == 0 and after["packets"] == n
    assert sum(o["packets"] for o in after["outcomes"].values()) == n
    sent = after["outcomes"]["pass"]["packets"]
    assert sent == before["outcomes"]["pass"]["packets"] + before["in_flight"] and after["delay_ns"]["count"] == sent
    engine.drain()
    assert engine.stats() == [after]
    late = 10**9 + np.arange(3, dtype=np.int64)
    assert engine.process(records([100] * 3, late, [1500] * 3))["outcome"].tolist() == [Outcome.PASS, Outcome.PENDING, Outcome.PENDING]
    Engine(policy({"tenants": [{"name": "a", "vnis": [100]}]})).drain()  # no port: nothing to do
