"""QoS in policies (docs/qos.md): meters, shapers, guarantees and ceilings, the egress port; their
validation (errors with paths, warnings about bursts), their JSON Schema, and the integer arrays
of Policy.compile_qos()."""

from __future__ import annotations

import json
import re
import warnings
from pathlib import Path
from typing import Any

import jsonschema  # type: ignore[import-untyped]
import numpy as np
import pytest
import tomllib
import yaml  # type: ignore[import-untyped]
from hypothesis import given, settings
from hypothesis import strategies as st

from isolane import policy as P
from isolane.policy import Policy, PolicyError, PolicyWarning
from support.locations import ROOT
from support.policy_edits import DELETE, assert_schema_accepts_if_isolane_does, edited, errors_of, policy_warnings, quiet

DOCS = ROOT / "docs"
EXAMPLE = ROOT / "pcaps" / "tenants.yaml"



def doc_blocks(path: Path) -> list[tuple[str, Any]]:
    """The YAML and TOML examples of a document, parsed."""
    blocks = re.findall(r"```(yaml|toml)\n(.*?)```", path.read_text(), re.S)
    assert blocks, path
    return [(lang, yaml.safe_load(body) if lang == "yaml" else tomllib.loads(body)) for lang, body in blocks]


# ---------------------------------------------------------------------------------------------
# One policy, three spellings, and the integers it compiles to
# ---------------------------------------------------------------------------------------------

QOS_YAML = """
count: wire_fcs
largest_frame: 1514B
color_map: {af12: yellow, af13: red, 5: red, cs1: yellow}
port: {rate: 100Gbps, buffer: 16MiB, mode: shared_fifo}
tenants:
  - name: a
    vnis: [1]
    rate: 10Gbps
    burst: 2MB
    ceil: 20Gbps
    meter:
      kind: trtcm
      cir: 10Gbps
      pir: 20Gbps
      pbs: 4MB
      color_aware: true
      count: inner
      actions: {green: pass, yellow: {remark: af12}, red: {remark: 8}}
    shaper: {queue: 1MiB}
    classes:
      - name: hi
        priority: 1
        weight: 3
        rate: 4Gbps
        ceil: 8Gbps
        meter: {kind: rfc4115, cir: 4Gbps, cbs: 1MB, eir: 0bps}
      - name: lo
        shaper: {rate: 1Gbps, burst: 64KiB, max_delay: 2ms}
  - name: b
    vnis: [2]
    classes:
      - {name: x, rate: 1Gbps, meter: {kind: srtcm, cir: 1Gbps, ebs: 0B}}
      - {name: y, rate: 500Mbps}
"""

QOS_TOML = """
count = "wire_fcs"
largest_frame = "1514B"
color_map = { af12 = "yellow", af13 = "red", "5" = "red", cs1 = "yellow" }
port = { rate = "100Gbps", buffer = "16MiB", mode = "shared_fifo" }

[[tenants]]
name = "a"
vnis = [1]
rate = "10Gbps"
burst = "2MB"
ceil = "20Gbps"
shaper = { queue = "1MiB" }
classes = [
  { name = "hi", priority = 1, weight = 3, rate = "4Gbps", ceil = "8Gbps", meter = { kind = "rfc4115", cir = "4Gbps", cbs = "1MB", eir = "0bps" } },
  { name = "lo", shaper = { rate = "1Gbps", burst = "64KiB", max_delay = "2ms" } },
]

[tenants.meter]
kind = "trtcm"
cir = "10Gbps"
pir = "20Gbps"
pbs = "4MB"
color_aware = true
count = "inner"
actions = { green = "pass", yellow = { remark = "af12" }, red = { remark = 8 } }

[[tenants]]
name = "b"
vnis = [2]
classes = [
  { name = "x", rate = "1Gbps", meter = { kind = "srtcm", cir = "1Gbps", ebs = "0B" } },
  { name = "y", rate = "500Mbps" },
]
"""

QOS_DICT: dict[str, Any] = yaml.safe_load(QOS_YAML)

GB = 1_000_000_000 // 8  # bytes per second in 1 Gbit/s

EXPECTED: dict[str, Any] = {
    "count": 3,  # wire_fcs
    "largest_frame": 1514,
    "port_rate": 100 * GB,
    "port_buffer": 16 * 2**20,
    "port_mode": 1,  # shared_fifo
    "tenant_rate": [10 * GB, 1 * GB + GB // 2],  # b: what its classes are guaranteed
    "tenant_burst": [2_000_000, 187_500],  # b: 1 ms at 1.5Gbps
    "tenant_ceil": [20 * GB, 100 * GB],  # b: the line rate
    "tenant_weight": [20, 3],  # 1.25 GB/s : 187.5 MB/s, reduced by 62.5 MB/s
    "class_offsets": [0, 2, 4],
    "class_tenant": [0, 0, 1, 1],
    "class_priority": [1, 7, 7, 7],
    "class_weight": [3, 1, 1, 1],
    "class_rate": [4 * GB, 0, 1 * GB, GB // 2],
    "class_burst": [500_000, 0, 125_000, 62_500],
    "class_ceil": [8 * GB, 20 * GB, 100 * GB, 100 * GB],
    "tenant_meter": {
        "kind": [2, 0],
        "color_aware": [1, 0],
        "count": [0, 3],  # inner; the policy's wire_fcs
        "cir": [10 * GB, 0],
        "cbs": [1_250_000, 0],  # default: 1 ms at CIR
        "eir": [0, 0],
        "ebs": [0, 0],
        "pir": [20 * GB, 0],
        "pbs": [4_000_000, 0],
        "action": [[0, 1, 1], [0, 0, 0]],
        "remark_dscp": [[0, 12, 8], [0, 0, 0]],
    },
    "class_meter": {
        "kind": [3, 0, 1, 0],
        "color_aware": [0, 0, 0, 0],
        "count": [3, 3, 3, 3],
        "cir": [4 * GB, 0, 1 * GB, 0],
        "cbs": [1_000_000, 0, 125_000, 0],
        "eir": [0, 0, 0, 0],
        "ebs": [0, 0, 0, 0],  # E off (eir 0); srTCM's E explicitly 0
        "pir": [0, 0, 0, 0],
        "pbs": [0, 0, 0, 0],
        "action": [[0, 0, 2], [0, 0, 0], [0, 0, 2], [0, 0, 0]],
        "remark_dscp": [[0, 0, 0]] * 4,
    },
    "tenant_shaper": {
        "rate": [20 * GB, 0],  # the tenant's ceil
        "burst": [2_500_000, 0],
        "queue": [1_048_576, 0],
        "max_delay_ns": [419_431, 0],  # 1 MiB at 2.5 GB/s: 419,430.4 ns, rounded up
    },
    "class_shaper": {
        "rate": [0, 1 * GB, 0, 0],
        "burst": [0, 65_536, 0, 0],
        "queue": [0, 250_000, 0, 0],  # 2 ms at 125 MB/s
        "max_delay_ns": [0, 2_000_000, 0, 0],
    },
}


def assert_compiles_to(qos: P.CompiledQos, expected: dict[str, Any]) -> None:
    for name, want in expected.items():
        got = getattr(qos, name)
        if isinstance(want, dict):
            for column, values in want.items():
                assert getattr(got, column).tolist() == values, f"{name}.{column}"
        elif isinstance(got, np.ndarray):
            assert got.tolist() == want, name
        else:
            assert got == want, name


def test_yaml_toml_json_and_dict_compile_to_the_same_integers(tmp_path: Path) -> None:
    (tmp_path / "q.yaml").write_text(QOS_YAML)
    (tmp_path / "q.toml").write_text(QOS_TOML)
    (tmp_path / "q.json").write_text(json.dumps(QOS_DICT))
    from_dict = quiet(QOS_DICT)
    for name in ("q.yaml", "q.toml", "q.json"):
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            read = Policy.from_file(tmp_path / name)
        assert read == from_dict, name
        assert_compiles_to(read.compile_qos(), EXPECTED)
    qos = from_dict.compile_qos()
    assert_compiles_to(qos, EXPECTED)
    colours = {5: 2, 8: 1, 12: 1, 14: 2}  # af11 (10) and af22 (20) are green: the map replaces the default
    assert qos.color_map.tolist() == [colours.get(d, 0) for d in range(64)]
    assert from_dict.compile_qos() is qos  # computed once


def test_the_model_holds_what_the_file_says() -> None:
    policy = quiet(QOS_DICT)
    a = policy.tenants[0]
    assert policy.count == "wire_fcs" and policy.largest_frame == 1514
    assert policy.color_map == ((5, "red"), (8, "yellow"), (12, "yellow"), (14, "red"))
    assert policy.port == P.Port(100_000_000_000, 16 * 2**20, "shared_fifo")
    assert a.contract.meter == P.Meter(
        "trtcm",
        cir_bps=10_000_000_000,
        pir_bps=20_000_000_000,
        pbs_bytes=4_000_000,
        color_aware=True,
        count="inner",
        yellow=P.Remark(12),
        red=P.Remark(8),
    )
    assert a.contract.shaper == P.Shaper(queue_bytes=2**20)
    assert a.classes[1].contract.shaper == P.Shaper(1_000_000_000, 65_536, None, 2_000_000)
    assert a.weight is None and a.classes[0].weight == 3


# ---------------------------------------------------------------------------------------------
# Bits become bytes, exactly; defaults
# ---------------------------------------------------------------------------------------------


def meter_policy(meter: dict[str, Any], **top: Any) -> dict[str, Any]:
    return {**top, "tenants": [{"name": "t", "vnis": [1], "meter": meter}]}


@pytest.mark.parametrize(
    ("text", "bytes_per_second"),
    [
        ("40Gbps", 5_000_000_000),
        ("1.5Gbps", 187_500_000),
        ("5GB/s", 5_000_000_000),
        ("8bps", 1),
        ("1 Tbps", 125_000_000_000),
        ("100Mbit/s", 12_500_000),
        ("1Kibps", 128),
        ("2MiB/s", 2 * 2**20),
        ("4398046511104B/s", P.MAX_RATE_BYTES),
        ("35184372088832bps", P.MAX_RATE_BYTES),
    ],
)
def test_bits_become_bytes_exactly(text: str, bytes_per_second: int) -> None:
    policy = Policy.from_dict(meter_policy({"kind": "srtcm", "cir": text}))
    assert policy.compile_qos().tenant_meter.cir.tolist() == [bytes_per_second]


@pytest.mark.parametrize(
    ("rate", "largest_frame", "burst", "rfc4115_burst"),
    [
        ("1Gbps", None, 125_000, 125_000),  # 1 ms at 125 MB/s
        ("40Gbps", None, 5_000_000, 5_000_000),
        ("400Gbps", "1500B", 50_000_000, 50_000_000),
        ("10Mbps", None, 9216, 9217),  # 1 ms is 1,250 B: the largest frame (default 9216 B), a byte more for RFC 4115
        ("10Mbps", "1514B", 1514, 1515),
        ("10Mbps", "1000B", 1250, 1250),
        ("1234568bps", "64B", 154, 154),  # 154,321 B/s: 154.321 B in 1 ms, rounded down as in Rust
        ("8bps", "64B", 64, 65),
    ],
)
def test_default_bursts_are_a_millisecond_but_at_least_the_largest_frame(rate: str, largest_frame: str | None, burst: int, rfc4115_burst: int) -> None:
    """RFC 4115 passes a packet only if a bucket holds more than its bytes: its buckets get a byte
    more than the largest frame."""
    top = {"largest_frame": largest_frame} if largest_frame else {}
    for meter, columns, expected in (
        ({"kind": "srtcm", "cir": rate}, ("cbs", "ebs"), burst),
        ({"kind": "trtcm", "cir": rate, "pir": rate}, ("cbs", "pbs"), burst),
        ({"kind": "rfc4115", "cir": rate, "eir": rate}, ("cbs", "ebs"), rfc4115_burst),
    ):
        qos = Policy.from_dict(meter_policy(meter, **top)).compile_qos()
        for column in columns:
            assert getattr(qos.tenant_meter, column).tolist() == [expected], (meter, column)
    data = {**top, "tenants": [{"name": "t", "vnis": [1], "rate": rate, "shaper": {}, "classes": [{"name": "c", "rate": rate}]}]}
    qos = Policy.from_dict(data).compile_qos()
    assert qos.tenant_burst.tolist() == [burst] and qos.class_burst.tolist() == [burst] and qos.tenant_shaper.burst.tolist() == [burst]


def test_default_burst_mirrors_the_rust_meter() -> None:
    # rust/meter/tests.rs: the_default_burst_is_a_millisecond_but_at_least_a_frame
    gbit = 125_000_000
    assert P.default_burst(gbit, 1514) == 125_000
    assert P.default_burst(100 * gbit, 9000) == 12_500_000
    assert P.default_burst(125_000, 1514) == 1514
    assert P.default_burst(2**64 - 1, 1514) == P.MAX_BURST_BYTES == 8 * 2**30
    assert P.default_burst(gbit) == 125_000 and P.default_burst(1) == P.DEFAULT_LARGEST_FRAME == 9216


def test_peak_and_excess_buckets_default_at_their_own_rate() -> None:
    qos = quiet(meter_policy({"kind": "trtcm", "cir": "8Gbps", "pir": "16Gbps"})).compile_qos()
    assert (qos.tenant_meter.cbs.tolist(), qos.tenant_meter.pbs.tolist()) == ([1_000_000], [2_000_000])
    qos = quiet(meter_policy({"kind": "rfc4115", "cir": "8Gbps", "eir": "16Gbps"})).compile_qos()
    assert (qos.tenant_meter.cbs.tolist(), qos.tenant_meter.ebs.tolist()) == ([1_000_000], [2_000_000])
    # a bucket with no rate is off: no default size
    qos = quiet(meter_policy({"kind": "rfc4115", "cir": "0bps", "eir": "16Gbps"})).compile_qos()
    assert (qos.tenant_meter.cbs.tolist(), qos.tenant_meter.ebs.tolist()) == ([0], [2_000_000])
    # srTCM's E fills from C's overflow: at CIR
    qos = quiet(meter_policy({"kind": "srtcm", "cir": "8Gbps", "cbs": "2MB"})).compile_qos()
    assert (qos.tenant_meter.cbs.tolist(), qos.tenant_meter.ebs.tolist()) == ([2_000_000], [1_000_000])
    # the largest allowed burst is accepted
    qos = quiet(meter_policy({"kind": "srtcm", "cir": "8Gbps", "cbs": "8GiB"})).compile_qos()
    assert qos.tenant_meter.cbs.tolist() == [8 * 2**30]


def test_meter_defaults() -> None:
    policy = quiet(meter_policy({"kind": "srtcm", "cir": "1Gbps"}))
    meter = policy.tenants[0].contract.meter
    assert meter == P.Meter("srtcm", 1_000_000_000)
    assert (meter.color_aware, meter.count, meter.green, meter.yellow, meter.red) == (False, None, "pass", "pass", "drop")
    m = policy.compile_qos().tenant_meter
    assert (m.kind.tolist(), m.color_aware.tolist(), m.count.tolist()) == ([1], [0], [1])  # outer
    assert m.action.tolist() == [[0, 0, 2]] and m.remark_dscp.tolist() == [[0, 0, 0]]
    # the policy's count reaches meters that name none, and rows without a meter
    qos = quiet(
        {"count": "wire", "tenants": [{"name": "t", "vnis": [1], "meter": {"kind": "srtcm", "cir": "1Gbps"}}, {"name": "u", "vnis": [2]}]}
    ).compile_qos()
    assert qos.count == 2 and qos.tenant_meter.count.tolist() == [2, 2] and qos.tenant_meter.kind.tolist() == [1, P.METER_NONE]


def test_a_policy_without_qos_compiles_to_neutral_arrays() -> None:
    qos = quiet({"tenants": [{"name": "a", "vnis": [1], "classes": [{"name": "x"}, {"name": "y", "priority": 2}]}, {"name": "b", "vnis": [2]}]}).compile_qos()
    assert (qos.port_rate, qos.port_buffer, qos.port_mode, qos.count, qos.largest_frame) == (0, 0, 0, 1, 9216)
    assert qos.tenant_rate.tolist() == [0, 0] and qos.tenant_ceil.tolist() == [0, 0]  # 0: uncapped
    assert qos.tenant_weight.tolist() == [1, 1]
    assert qos.class_priority.tolist() == [7, 2, 7] and qos.class_weight.tolist() == [1, 1, 1]
    assert qos.class_ceil.tolist() == [0, 0, 0] and qos.class_offsets.tolist() == [0, 2, 3]
    assert qos.tenant_meter.kind.tolist() == [0, 0] and qos.tenant_meter.action.tolist() == [[0, 0, 0]] * 2
    assert qos.class_shaper.rate.tolist() == [0, 0, 0] and qos.class_shaper.queue.tolist() == [0, 0, 0]
    # the default colour map: AF drop precedences
    expected = [0] * 64
    for af in (1, 2, 3, 4):
        expected[8 * af + 4], expected[8 * af + 6] = 1, 2
    assert qos.color_map.tolist() == expected


def test_the_compiled_layout() -> None:
    qos = quiet(QOS_DICT).compile_qos()
    dtypes = {
        "tenant_rate": np.uint64, "tenant_burst": np.uint64, "tenant_ceil": np.uint64, "tenant_weight": np.uint32,
        "class_offsets": np.int64, "class_tenant": np.uint32, "class_priority": np.uint8, "class_weight": np.uint32,
        "class_rate": np.uint64, "class_burst": np.uint64, "class_ceil": np.uint64, "color_map": np.uint8,
    }  # fmt: skip
    for name, dtype in dtypes.items():
        array = getattr(qos, name)
        assert array.dtype == dtype and not array.flags.writeable, name
    for meters, n in ((qos.tenant_meter, 2), (qos.class_meter, 4)):
        assert len(meters) == n
        for name in ("kind", "color_aware", "count"):
            assert getattr(meters, name).dtype == np.uint8 and getattr(meters, name).shape == (n,)
        for name in ("cir", "cbs", "eir", "ebs", "pir", "pbs"):
            assert getattr(meters, name).dtype == np.uint64 and getattr(meters, name).shape == (n,)
        for name in ("action", "remark_dscp"):
            assert getattr(meters, name).dtype == np.uint8 and getattr(meters, name).shape == (n, 3)
            assert not getattr(meters, name).flags.writeable
    for shapers, n in ((qos.tenant_shaper, 2), (qos.class_shaper, 4)):
        assert len(shapers) == n
        for name in ("rate", "burst", "queue", "max_delay_ns"):
            assert getattr(shapers, name).dtype == np.uint64 and getattr(shapers, name).shape == (n,)
    assert qos.tenant_names == ["a", "b"]
    assert [qos.class_row(t, c) for t, c in ((0, 0), (0, 1), (1, 0), (1, 1))] == [0, 1, 2, 3]
    with pytest.raises(IndexError):
        qos.class_row(0, 2)
    assert P.METER_KINDS == {"srtcm": 1, "trtcm": 2, "rfc4115": 3} and P.METER_NONE == 0
    assert P.COUNT_MODES == {"inner": 0, "outer": 1, "wire": 2, "wire_fcs": 3}
    assert P.COUNT_OVERHEAD == {"inner": 0, "outer": 0, "wire": 20, "wire_fcs": 24}
    assert P.COLORS == {"green": 0, "yellow": 1, "red": 2} and P.COLOR_ACTIONS == {"pass": 0, "remark": 1, "drop": 2}
    assert P.PORT_MODES == {"per_tenant": 0, "shared_fifo": 1}


# ---------------------------------------------------------------------------------------------
# Shapers, guarantees, ceilings, weights
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("contract", "row"),
    [
        ({"rate": "8Gbps", "shaper": {}}, (1_000_000_000, 1_000_000, 1_000_000, 1_000_000)),  # 1 ms
        ({"rate": "8Gbps", "ceil": "16Gbps", "shaper": {}}, (2_000_000_000, 2_000_000, 2_000_000, 1_000_000)),  # at the ceil
        ({"ceil": "16Gbps", "shaper": {"rate": "8Gbps"}}, (1_000_000_000, 1_000_000, 1_000_000, 1_000_000)),
        ({"rate": "8Gbps", "shaper": {"queue": "3MB"}}, (1_000_000_000, 1_000_000, 3_000_000, 3_000_000)),
        ({"rate": "8Gbps", "shaper": {"max_delay": "250us"}}, (1_000_000_000, 1_000_000, 250_000, 250_000)),
        ({"shaper": {"rate": "8Gbps", "burst": "64B", "queue": "1MB", "max_delay": "1s"}}, (1_000_000_000, 64, 1_000_000, 10**9)),
        ({"shaper": {"rate": "24bps", "queue": "64B"}}, (3, 9216, 64, 21_333_333_334)),  # 64/3 s, rounded up
        ({"shaper": {"rate": "8bps", "max_delay": "1ns"}}, (1, 9216, 1, 1)),  # 1e-9 B, rounded up to a byte
    ],
)
def test_shaper_defaults(contract: dict[str, Any], row: tuple[int, int, int, int]) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PolicyWarning)
        shaper = Policy.from_dict({"tenants": [{"name": "t", "vnis": [1], **contract}]}).compile_qos().tenant_shaper
    assert (shaper.rate.tolist(), shaper.burst.tolist(), shaper.queue.tolist(), shaper.max_delay_ns.tolist()) == tuple([v] for v in row)


def tenants_policy(*tenants: dict[str, Any], **top: Any) -> dict[str, Any]:
    return {**top, "tenants": [{"name": chr(ord("a") + i), "vnis": [i + 1], **t} for i, t in enumerate(tenants)]}


@pytest.mark.parametrize(
    ("tenants", "weights"),
    [
        (({"rate": "40Gbps"}, {"rate": "10Gbps"}, {"rate": "5Gbps"}), [8, 2, 1]),
        (({"rate": "40Gbps"}, {"rate": "40Gbps"}), [1, 1]),
        (({"rate": "40Gbps"}, {}, {"rate": "10Gbps"}), [4, 1, 1]),  # no guarantee: one unit
        (({}, {}), [1, 1]),
        (({"rate": "3Gbps"}, {"classes": [{"name": "x", "rate": "1Gbps"}, {"name": "y", "rate": "1Gbps"}]}), [3, 2]),
        (({"weight": 5, "rate": "40Gbps"}, {"weight": 7}), [5, 7]),
        (({"rate": "32Tbps"}, {"rate": "8bps"}), [P.MAX_WEIGHT, 1]),  # 4e12 : 1 does not fit 32 bits: proportional, at least 1
    ],
)
def test_tenant_weights_follow_the_guarantees_unless_given(tenants: tuple[dict[str, Any], ...], weights: list[int]) -> None:
    assert quiet(tenants_policy(*tenants)).compile_qos().tenant_weight.tolist() == weights


def test_guarantees_and_ceilings_inherit() -> None:
    data = tenants_policy(
        {"ceil": "50Gbps", "classes": [{"name": "x", "rate": "10Gbps"}, {"name": "y", "ceil": "20Gbps"}, {"name": "z"}]},
        {"rate": "30Gbps"},
        port={"rate": "400Gbps", "buffer": "64MiB"},
    )
    qos = quiet(data).compile_qos()
    assert qos.tenant_rate.tolist() == [10 * GB, 30 * GB]  # a: its classes' sum
    assert qos.tenant_ceil.tolist() == [50 * GB, 400 * GB]  # b: the line rate
    assert qos.class_ceil.tolist() == [50 * GB, 20 * GB, 50 * GB, 400 * GB]  # the tenant's ceiling
    assert qos.port_rate == 400 * GB and qos.port_buffer == 64 * 2**20 and qos.port_mode == P.PORT_MODES["per_tenant"]
    assert (qos.port_alpha_log2, qos.port_reserve) == (0, 0)  # alpha 1, nothing reserved


@pytest.mark.parametrize(("alpha", "log2"), [(1, 0), (0.25, -2), (8, 3), (1 / 128, -7), (128, 7), (2.0, 1)])
def test_the_port_buffer_sharing_compiles_and_reads_back(alpha: float, log2: int) -> None:
    data = tenants_policy(
        {"rate": "1Gbps", "burst": "100kB", "classes": [{"name": "x", "burst": "20kB"}, {"name": "y"}]}, port={**PORT, "alpha": alpha, "reserve": "4MiB"}
    )
    policy = quiet(data)
    qos = policy.compile_qos()
    assert (qos.port_alpha_log2, qos.port_reserve) == (log2, 4 * 2**20)
    assert qos.tenant_burst_given.tolist() == [1] and qos.class_burst_given.tolist() == [1, 0]
    assert policy.port is not None and policy.port.alpha == alpha
    assert Policy.from_dict(policy.to_dict()) == policy
    # Defaults are not written out.
    plain = quiet(tenants_policy({}, port=PORT)).to_dict()["port"]
    assert plain == {**PORT, "mode": "per_tenant"}


# ---------------------------------------------------------------------------------------------
# Errors: each names its place
# ---------------------------------------------------------------------------------------------

SR = {"kind": "srtcm", "cir": "1Gbps"}
TR = {"kind": "trtcm", "cir": "1Gbps", "pir": "2Gbps"}
RFC4115 = {"kind": "rfc4115", "cir": "1Gbps", "eir": "1Gbps"}

METER_ERRORS: list[tuple[dict[str, Any], str, str]] = [
    # RFC 2698
    ({**TR, "cir": "40Gbps", "pir": "30Gbps"}, ".pir", "PIR '30Gbps' is below CIR '40Gbps': RFC 2698 needs PIR >= CIR"),
    ({**TR, "pbs": "0B"}, ".pbs", "PBS is 0: RFC 2698 needs PBS and CBS both above 0 (leave pbs out for the default)"),
    ({**TR, "cbs": "0B"}, ".cbs", "CBS is 0: RFC 2698 needs PBS and CBS both above 0 (leave cbs out for the default)"),
    ({**TR, "cir": "0bps"}, ".cir", "the committed rate is 0: C would never refill (RFC 2698 needs CIR above 0)"),
    ({**TR, "pir": "0bps"}, ".pir", "the peak rate is 0: P would never refill (RFC 2698 needs PIR above 0)"),
    # RFC 2697
    ({**SR, "cir": "0bps"}, ".cir", "the committed rate is 0: C would never refill (RFC 2697 needs CIR above 0)"),
    ({**SR, "cbs": "0B", "ebs": "0B"}, "", "cbs and ebs are both 0: every packet would be red (RFC 2697 needs one of them above 0)"),
    # RFC 4115
    ({**RFC4115, "cir": "0bps", "eir": "0bps"}, "", "cir and eir are both 0: every packet would be red"),
    ({**RFC4115, "eir": "0bps", "ebs": "1MB"}, ".ebs", "ebs is '1MB' but eir is 0, so E would never refill (leave ebs out to switch E off)"),
    ({**RFC4115, "cir": "0bps", "cbs": "1MB"}, ".cbs", "cbs is '1MB' but cir is 0, so C would never refill (leave cbs out to switch C off)"),
    ({**RFC4115, "cbs": "0B"}, ".cbs", "cbs is 0 but cir is '1Gbps': C could never hold a token (leave cbs out for the default)"),
    ({**RFC4115, "ebs": "0B"}, ".ebs", "ebs is 0 but eir is '1Gbps': E could never hold a token (leave ebs out for the default)"),
    # limits and units
    ({**SR, "cbs": "9GiB"}, ".cbs", "'9GiB' is over the largest burst, 8GiB (the limit of isolane's token buckets)"),
    ({**TR, "pbs": "8589934593B"}, ".pbs", "'8589934593B' is over the largest burst, 8GiB (the limit of isolane's token buckets)"),
    ({**SR, "cir": "1001bps"}, ".cir", "'1001bps' is not a whole number of bytes per second (isolane meters, shapes and schedules bytes)"),
    ({**SR, "cir": "40Tbps"}, ".cir", "'40Tbps' is over the largest rate isolane handles, 4,398,046,511,104 B/s (about 35.2Tbps)"),
    ({**SR, "cir": 1_000_000_000}, ".cir", "1000000000 has no unit: write it as a string with its unit, e.g. '40Gbps'"),
    ({**SR, "cbs": "1MHz"}, ".cbs", "'1MHz': unknown size unit 'MHz' (e.g. '256KiB')"),
    ({**SR, "ebs": "1Gbps"}, ".ebs", "'1Gbps' is a rate, not a size: write e.g. '256KiB'"),
    # keys
    ({**SR, "pir": "2Gbps"}, ".pir", "srtcm meters have no pir (they take cir, cbs, ebs); pir belongs to 'trtcm' meters"),
    ({**RFC4115, "pbs": "1MB"}, ".pbs", "rfc4115 meters have no pbs (they take cir, cbs, eir, ebs); pbs belongs to 'trtcm' meters"),
    ({**TR, "ebs": "1MB"}, ".ebs", "trtcm meters have no ebs (they take cir, cbs, pir, pbs); ebs belongs to 'srtcm' or 'rfc4115' meters"),
    ({"kind": "trtcm", "cir": "1Gbps"}, "", "missing key 'pir': trtcm meters need a peak rate"),
    ({"kind": "rfc4115", "cir": "1Gbps"}, "", "missing key 'eir': rfc4115 meters need a excess rate"),
    ({"kind": "srtcm"}, "", "missing key 'cir': srtcm meters need a committed rate"),
    ({"cir": "1Gbps"}, "", "missing key 'kind'"),
    ({**SR, "kind": "trTCM", "pir": "2Gbps"}, ".kind", "'trTCM' is not a meter kind; did you mean 'trtcm'?"),
    ({**SR, "kind": "policer"}, ".kind", "'policer' is not a meter kind (expected 'srtcm', 'trtcm' or 'rfc4115')"),
    ({**SR, "cbz": "1MB"}, ".cbz", "unknown key; did you mean 'cbs'?"),
    ({**SR, "colour_aware": True}, ".colour_aware", "unknown key; did you mean 'color_aware'?"),
    ({**SR, "color_aware": "yes"}, ".color_aware", "expected true or false, got a string ('yes')"),
    ({**SR, "count": "wire_crc"}, ".count", "'wire_crc' is not a byte count; did you mean 'wire_fcs'?"),
    ({**SR, "count": "ip"}, ".count", "'ip' is not a byte count (expected 'inner', 'outer', 'wire' or 'wire_fcs')"),
    # actions
    ({**SR, "actions": {"yellow": "remark"}}, ".actions.yellow", "say which DSCP to re-mark to: {remark: af12}"),
    ({**SR, "actions": {"red": {"remark": "af44"}}}, ".actions.red.remark", "'af44' is not a DSCP name; did you mean 'af43'?"),
    ({**SR, "actions": {"red": {"remark": 64}}}, ".actions.red.remark", "DSCP 64 is outside 0-63"),
    ({**SR, "actions": {"red": "dorp"}}, ".actions.red", "'dorp' is not a meter action; did you mean 'drop'?"),
    ({**SR, "actions": {"red": 5}}, ".actions.red", "expected 'pass', 'drop' or {remark: <DSCP>}, got an integer (5)"),
    ({**SR, "actions": {"blue": "pass"}}, ".actions.blue", "unknown key (expected one of: green, yellow, red)"),
    ({**SR, "actions": ["drop"]}, ".actions", "expected a mapping, got a list"),
]


@pytest.mark.parametrize(("meter", "where", "message"), METER_ERRORS, ids=[f"{w}:{m[:40]}" for _, w, m in METER_ERRORS])
def test_meter_errors_name_the_place(meter: dict[str, Any], where: str, message: str) -> None:
    # on the second tenant, and on a tenant's class
    data = tenants_policy({}, {"meter": meter})
    assert errors_of(data) == [(f"tenants[1].meter{where}", message)]
    data = tenants_policy({"classes": [{"name": "x"}, {"name": "y", "meter": meter}]})
    assert errors_of(data) == [(f"tenants[0].classes[1].meter{where}", message)]


def test_a_misspelt_remark_is_unknown_and_missing() -> None:
    assert errors_of(meter_policy({**SR, "actions": {"red": {"mark": "af11"}}})) == [
        ("tenants[0].meter.actions.red.mark", "unknown key; did you mean 'remark'?"),
        ("tenants[0].meter.actions.red", "missing key 'remark'"),
    ]


def test_every_meter_problem_is_reported_at_once() -> None:
    meter = {"kind": "trtcm", "cir": "40Gbps", "pir": "30Gbps", "cbs": "0B", "eir": "1Gbps", "actions": {"red": "dorp"}}
    assert errors_of(tenants_policy({"meter": meter})) == [
        ("tenants[0].meter.eir", "trtcm meters have no eir (they take cir, cbs, pir, pbs); eir belongs to 'rfc4115' meters"),
        ("tenants[0].meter.actions.red", "'dorp' is not a meter action; did you mean 'drop'?"),
        ("tenants[0].meter.pir", "PIR '30Gbps' is below CIR '40Gbps': RFC 2698 needs PIR >= CIR"),
        ("tenants[0].meter.cbs", "CBS is 0: RFC 2698 needs PBS and CBS both above 0 (leave cbs out for the default)"),
    ]


PORT = {"rate": "100Gbps", "buffer": "16MiB"}
ALPHA_ERROR = "is not a power of two from 1/128 to 128 (e.g. 0.25, 1, 8): a queue may hold alpha x the free buffer, and switches offer these"
SHAPER_NEEDS_RATE = "a shaper needs a rate: give it 'rate', or give its tenant or class a 'ceil' or 'rate' (it then shapes to the ceil, else the rate)"
WEIGHT_HINT = "give every tenant a weight, or none (spare capacity is then shared in proportion to the guarantees)"

POLICY_ERRORS: list[tuple[dict[str, Any], list[tuple[str, str]]]] = [
    # the port
    (tenants_policy({}, port={"rate": "100Gbps"}), [("port", "missing key 'buffer'")]),
    (tenants_policy({}, port={**PORT, "mode": "shared"}), [("port.mode", "'shared' is not a port mode; did you mean 'shared_fifo'?")]),
    (tenants_policy({}, port={**PORT, "rate": "100GBps"}), [("port.rate", "'100GBps': unknown rate unit 'GBps'; did you mean 'GB/s' or 'Gbps'?")]),
    (tenants_policy({}, port={**PORT, "buffer": "0B"}), [("port.buffer", "'0B' must be more than zero")]),
    (
        tenants_policy({}, port={**PORT, "speed": "1Gbps"}),
        [("port.speed", "unknown key (expected one of: rate, buffer, mode, alpha, reserve, microburst, overload)")],
    ),
    *(
        (tenants_policy({}, port={**PORT, "alpha": alpha}), [("port.alpha", f"alpha {alpha!r} {ALPHA_ERROR}")])
        for alpha in (0.3, 0, -1, 3, 256, 1 / 256, True, "1")
    ),
    (tenants_policy({}, port={**PORT, "reserve": "17MiB"}), [("port.reserve", "'17MiB' is more than the buffer '16MiB': a reserve is part of the buffer")]),
    (tenants_policy({}, port={**PORT, "reserve": "-1B"}), [("port.reserve", "'-1B' is not a size: write a number and a unit, e.g. '256KiB'")]),
    (tenants_policy({}, port="400Gbps"), [("port", "expected a mapping, got a string ('400Gbps')")]),
    # guarantees and ceilings against the port and the tenant
    (tenants_policy({"ceil": "200Gbps"}, port=PORT), [("tenants[0].ceil", "ceil '200Gbps' is above the port's line rate 100Gbps")]),
    (tenants_policy({"rate": "200Gbps"}, port=PORT), [("tenants[0].rate", "rate '200Gbps' is above the port's line rate 100Gbps: it cannot be guaranteed")]),
    (
        tenants_policy({"classes": [{"name": "x", "ceil": "101Gbps"}]}, port=PORT),
        [("tenants[0].classes[0].ceil", "ceil '101Gbps' is above the port's line rate 100Gbps")],
    ),
    (
        tenants_policy({"ceil": "20Gbps", "classes": [{"name": "x", "ceil": "30Gbps"}]}),
        [("tenants[0].classes[0].ceil", "ceil 30Gbps is above the tenant's ceil 20Gbps")],
    ),
    (
        tenants_policy({"ceil": "20Gbps", "classes": [{"name": "x", "rate": "30Gbps"}]}),
        [("tenants[0].classes[0].rate", "rate 30Gbps is above the tenant's ceil 20Gbps: it cannot be guaranteed")],
    ),
    (
        tenants_policy({"rate": "10Gbps", "classes": [{"name": "x", "rate": "6Gbps"}, {"name": "y", "rate": "6Gbps"}]}),
        [("tenants[0].classes", "the classes' rates add up to 12Gbps, more than the tenant's rate 10Gbps: they cannot all be guaranteed")],
    ),
    (
        tenants_policy({"rate": "60Gbps"}, {"classes": [{"name": "x", "rate": "60Gbps"}]}, port=PORT),
        [("port.rate", "the tenants' guarantees add up to 120Gbps, more than the port's line rate 100Gbps: they cannot all be met")],
    ),
    (
        tenants_policy({"rate": "1001bps"}),
        [("tenants[0].rate", "'1001bps' is not a whole number of bytes per second (isolane meters, shapes and schedules bytes)")],
    ),
    (tenants_policy({"burst": "9GiB"}), [("tenants[0].burst", "'9GiB' is over the largest burst, 8GiB (the limit of isolane's token buckets)")]),
    # weights
    (
        tenants_policy({"weight": 2}, {}, {"weight": 1}, {}),
        [
            ("tenants[1]", f"'b' has no weight, but tenants[0] ('a') has one: {WEIGHT_HINT}"),
            ("tenants[3]", f"'d' has no weight, but tenants[0] ('a') has one: {WEIGHT_HINT}"),
        ],
    ),
    (tenants_policy({"weight": 0}), [("tenants[0].weight", "weight must be at least 1, got 0")]),
    (tenants_policy({"weight": 2**32}), [("tenants[0].weight", "weight 4294967296 is over 4294967295 (32 bits)")]),
    (tenants_policy({"weight": "3"}), [("tenants[0].weight", "expected weight (an integer), got a string ('3')")]),
    (tenants_policy({"classes": [{"name": "x", "weight": 2**32}]}), [("tenants[0].classes[0].weight", "weight 4294967296 is over 4294967295 (32 bits)")]),
    (tenants_policy({"wieght": 2}), [("tenants[0].wieght", "unknown key; did you mean 'weight'?")]),
    # shapers
    (tenants_policy({"shaper": {"queue": "1MB"}}), [("tenants[0].shaper", SHAPER_NEEDS_RATE)]),
    (tenants_policy({"classes": [{"name": "x", "shaper": {}}]}), [("tenants[0].classes[0].shaper", SHAPER_NEEDS_RATE)]),
    (
        tenants_policy({"shaper": {"rate": "1Gbps", "burst": "63B"}}),
        [("tenants[0].shaper.burst", "'63B' is smaller than the smallest frame (64B): no frame could leave at once")],
    ),
    (
        tenants_policy({"shaper": {"rate": "1Gbps", "max_delay": "2MiB"}}),
        [("tenants[0].shaper.max_delay", "'2MiB' is a size, not a duration: write e.g. '10us'")],
    ),
    (tenants_policy({"shaper": {"rate": "1Gbps", "max_delay": "0ms"}}), [("tenants[0].shaper.max_delay", "'0ms' must be more than zero")]),
    (tenants_policy({"shaper": {"rate": "1Gbps", "max_dealy": "2ms"}}), [("tenants[0].shaper.max_dealy", "unknown key; did you mean 'max_delay'?")]),
    (
        tenants_policy({"shaper": {"rate": "12bps"}}),
        [("tenants[0].shaper.rate", "'12bps' is not a whole number of bytes per second (isolane meters, shapes and schedules bytes)")],
    ),
    # policy-wide settings
    (tenants_policy({}, count="wires"), [("count", "'wires' is not a byte count; did you mean 'wire'?")]),
    (tenants_policy({}, largest_frame="32B"), [("largest_frame", "'32B' is outside 64B-4294967295B (the smallest Ethernet frame to 32 bits)")]),
    (tenants_policy({}, largest_frame="4GiB"), [("largest_frame", "'4GiB' is outside 64B-4294967295B (the smallest Ethernet frame to 32 bits)")]),
    (tenants_policy({}, largest_frame=1500), [("largest_frame", "1500 has no unit: write it as a string with its unit, e.g. '256KiB'")]),
    (tenants_policy({}, color_map={"af12": "amber"}), [("color_map.af12", "'amber' is not a colour (expected 'green', 'yellow' or 'red')")]),
    (tenants_policy({}, color_map={"af12": "Yellow"}), [("color_map.af12", "'Yellow' is not a colour; did you mean 'yellow'?")]),
    (tenants_policy({}, color_map={"af14": "red"}), [("color_map.af14", "'af14' is not a DSCP name; did you mean 'af43'?")]),
    (tenants_policy({}, color_map={"64": "red"}), [("color_map.64", "DSCP 64 is outside 0-63")]),
    (tenants_policy({}, color_map={"af11": "green", 10: "red"}), [("color_map.10", "DSCP 10 is already mapped by color_map.af11")]),
    (tenants_policy({}, color_map={"cs1": "red", "8": "red"}), [("color_map.8", "DSCP 8 is already mapped by color_map.cs1")]),
    (tenants_policy({}, color_map={True: "red"}), [("color_map", "keys must be DSCP names or numbers, got a boolean (true)")]),
    (tenants_policy({}, color_map="af"), [("color_map", "expected a mapping from DSCP to colour (e.g. {af12: yellow}), got a string ('af')")]),
    (tenants_policy({}, colour_map={}), [("colour_map", "unknown key; did you mean 'color_map'?")]),
]


@pytest.mark.parametrize(("data", "errors"), POLICY_ERRORS, ids=[e[0][0] + ":" + e[0][1][:40] for _, e in POLICY_ERRORS])
def test_contract_and_port_errors_name_the_place(data: dict[str, Any], errors: list[tuple[str, str]]) -> None:
    assert errors_of(data) == errors


def test_the_issue_path_example() -> None:
    data = tenants_policy({}, {"meter": {"kind": "trtcm", "cir": "40Gbps", "pir": "30Gbps"}})
    with pytest.raises(PolicyError) as info:
        Policy.from_dict(data)
    assert str(info.value) == "tenants[1].meter.pir: PIR '30Gbps' is below CIR '40Gbps': RFC 2698 needs PIR >= CIR"


def test_zero_is_accepted_only_where_the_rfcs_allow_it() -> None:
    quiet(meter_policy({"kind": "srtcm", "cir": "1Gbps", "ebs": "0B"}))  # a two-colour policer
    quiet(meter_policy({"kind": "srtcm", "cir": "1Gbps", "cbs": "0B"}))  # nothing green: legal in RFC 2697
    quiet(meter_policy({"kind": "rfc4115", "cir": "1Gbps", "eir": "0bps"}))  # E off
    quiet(meter_policy({"kind": "rfc4115", "cir": "0bps", "eir": "1Gbps"}))  # C off: everything excess
    assert errors_of(tenants_policy({"rate": "0bps"})) == [("tenants[0].rate", "'0bps' must be more than zero")]
    assert errors_of(tenants_policy({"shaper": {"rate": "0bps"}})) == [("tenants[0].shaper.rate", "'0bps' must be more than zero")]


# ---------------------------------------------------------------------------------------------
# Warnings
# ---------------------------------------------------------------------------------------------

TCP_HINT = "a policer burst below about 1 ms at its rate makes TCP run far below the rate"
FRAME_HINT = "would never fit in the bucket (set largest_frame if the network's frames are smaller)"

BURST_WARNINGS: list[tuple[dict[str, Any], dict[str, Any], list[str]]] = [
    (
        {"kind": "srtcm", "cir": "1Gbps", "cbs": "64KiB"},
        {},
        [f"tenants[0].meter.cbs: '64KiB' is only 524us of traffic at cir '1Gbps': {TCP_HINT} (leave cbs out for 125kB)"],
    ),
    (
        {"kind": "srtcm", "cir": "1Gbps", "ebs": "100kB"},
        {},
        [f"tenants[0].meter.ebs: '100kB' is only 800us of traffic at cir '1Gbps': {TCP_HINT} (leave ebs out for 125kB)"],
    ),
    (
        {"kind": "trtcm", "cir": "1Gbps", "pir": "20Gbps", "pbs": "1MB"},
        {},
        [f"tenants[0].meter.pbs: '1MB' is only 400us of traffic at pir '20Gbps': {TCP_HINT} (leave pbs out for 2500kB)"],
    ),
    (
        {"kind": "rfc4115", "cir": "1Gbps", "eir": "400Gbps", "ebs": "256KiB"},
        {},
        [f"tenants[0].meter.ebs: '256KiB' is only 5.24us of traffic at eir '400Gbps': {TCP_HINT} (leave ebs out for 50MB)"],
    ),
    (
        {"kind": "srtcm", "cir": "10Mbps", "cbs": "4KiB"},
        {},
        [f"tenants[0].meter.cbs: '4KiB' is smaller than the largest frame (9KiB): a frame that size {FRAME_HINT}"],
    ),
    (
        {"kind": "rfc4115", "cir": "10Mbps", "cbs": "1514B", "eir": "0bps"},
        {"largest_frame": "1514B"},
        [
            "tenants[0].meter.cbs: '1514B' is not larger than the largest frame (1514B): RFC 4115 passes a packet only if the bucket "
            "holds more than its bytes, so a frame that size never would (set largest_frame if the network's frames are smaller)"
        ],
    ),
    # no warning: at least 1 ms, at least the largest frame (a byte more for RFC 4115), zero (a choice), or defaults
    ({"kind": "srtcm", "cir": "10Mbps", "cbs": "4KiB"}, {"largest_frame": "1514B"}, []),
    ({"kind": "srtcm", "cir": "10Mbps", "cbs": "1514B"}, {"largest_frame": "1514B"}, []),
    ({"kind": "rfc4115", "cir": "10Mbps", "cbs": "1515B", "eir": "0bps"}, {"largest_frame": "1514B"}, []),
    ({"kind": "rfc4115", "cir": "10Mbps", "eir": "10Mbps"}, {}, []),
    ({"kind": "srtcm", "cir": "1Gbps", "cbs": "125kB", "ebs": "0B"}, {}, []),
    ({"kind": "trtcm", "cir": "40Gbps", "pir": "50Gbps"}, {}, []),
    ({"kind": "srtcm", "cir": "1Gbps", "cbs": "8GiB"}, {}, []),
]


@pytest.mark.parametrize(("meter", "top", "expected"), BURST_WARNINGS, ids=lambda v: str(v)[:40])
def test_bursts_that_starve_tcp_are_warned_about(meter: dict[str, Any], top: dict[str, Any], expected: list[str]) -> None:
    assert policy_warnings(meter_policy(meter, **top)) == expected


def test_a_meter_with_errors_warns_about_nothing() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(PolicyError):
            Policy.from_dict(meter_policy({"kind": "trtcm", "cir": "40Gbps", "pir": "50Gbps", "cbs": "1500B", "pbs": "3s"}))


def test_queue_and_buffer_warnings() -> None:
    data = tenants_policy(
        {"rate": "1Gbps", "shaper": {"queue": "4KiB"}},
        {"rate": "1Gbps", "shaper": {"queue": "128MiB"}},
        port={"rate": "100Gbps", "buffer": "64MiB"},
    )
    assert policy_warnings(data) == [
        "tenants[0].shaper.queue: '4KiB' is smaller than the largest frame (9KiB): "
        "frames that size are always dropped (set largest_frame if the network's frames are smaller)",
        "tenants[1].shaper.queue: '128MiB' is larger than the port's buffer (64MiB): it can never fill",
    ]
    assert policy_warnings(tenants_policy({}, port={"rate": "100Gbps", "buffer": "4KiB"})) == [
        "port.buffer: '4KiB' is smaller than the largest frame (9KiB): frames that size are always dropped"
    ]
    assert policy_warnings(tenants_policy({"rate": "1Gbps", "shaper": {"queue": "4KiB"}}, largest_frame="1514B")) == []


def test_warnings_from_a_file_name_the_file(tmp_path: Path) -> None:
    path = tmp_path / "p.yaml"
    path.write_text("tenants:\n  - {name: a, vnis: [1], meter: {kind: srtcm, cir: 1Gbps, cbs: 64KiB}}\n")
    with pytest.warns(PolicyWarning) as found:
        Policy.from_file(path)
    assert [str(w.message) for w in found] == [
        f"{path}: tenants[0].meter.cbs: '64KiB' is only 524us of traffic at cir '1Gbps': {TCP_HINT} (leave cbs out for 125kB)"
    ]


# ---------------------------------------------------------------------------------------------
# Round trip
# ---------------------------------------------------------------------------------------------

ROUND_TRIP: list[dict[str, Any]] = [
    QOS_DICT,
    yaml.safe_load(EXAMPLE.read_text()),
    tenants_policy(
        {
            "weight": 3,
            "meter": {"kind": "rfc4115", "cir": "0bps", "eir": "1Gbps", "count": "wire"},
            "shaper": {"rate": "1Gbps", "burst": "64B", "queue": "1MB", "max_delay": "1s"},
        },
        # The largest weight: the port weighs the class by 4294967295 x its own, so that is 1.
        {
            "weight": 4294967295,
            "classes": [
                {
                    "name": "x",
                    "priority": 0,
                    "weight": 1,
                    "meter": {"kind": "srtcm", "cir": "1Gbps", "ebs": "0B", "actions": {"green": {"remark": 5}, "yellow": "drop"}},
                }
            ],
        },
        color_map={},
        count="inner",
        largest_frame="64B",
        port={"rate": "1Tbps", "buffer": "1GiB"},
    ),
    tenants_policy({}, color_map={"7": "yellow", "af11": "green", "ef": "red"}),
    *[data for _, data in doc_blocks(DOCS / "qos.md")],
]


@pytest.mark.parametrize("data", ROUND_TRIP, ids=range(len(ROUND_TRIP)))
def test_to_dict_reads_back_the_same(data: dict[str, Any], tmp_path: Path) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PolicyWarning)
        policy = Policy.from_dict(data)
        out = policy.to_dict()
        assert Policy.from_dict(out) == policy
        assert json.loads(json.dumps(out)) == out  # plain data
        (tmp_path / "again.yaml").write_text(yaml.safe_dump(out, sort_keys=False))
        again = Policy.from_file(tmp_path / "again.yaml")
    assert again == policy
    for name in P.CompiledQos.__dataclass_fields__:
        a, b = getattr(again.compile_qos(), name), getattr(policy.compile_qos(), name)
        if isinstance(a, (P.MeterArrays, P.ShaperArrays, P.BurstArrays)):
            for column in type(a).__dataclass_fields__:
                assert np.array_equal(getattr(a, column), getattr(b, column)), (name, column)
        elif isinstance(a, np.ndarray):
            assert np.array_equal(a, b), name
        else:
            assert a == b, name


def test_to_dict_writes_meter_defaults_and_only_changed_policy_settings() -> None:
    out = quiet(meter_policy({"kind": "srtcm", "cir": "1Gbps"})).to_dict()
    assert set(out) == {"version", "unknown_tenant", "tenants"}
    assert out["tenants"][0]["meter"] == {"kind": "srtcm", "cir": "1Gbps", "color_aware": False, "actions": {"green": "pass", "yellow": "pass", "red": "drop"}}
    out = quiet(tenants_policy({}, count="wire", largest_frame="1500B", color_map={"af11": "green", "cs1": "red"})).to_dict()
    assert (out["count"], out["largest_frame"], out["color_map"]) == ("wire", "1500B", {"cs1": "red"})
    # the default map, written out, is the default again
    assert quiet(
        tenants_policy(
            {}, color_map={"af12": "yellow", "af13": "red", "af22": "yellow", "af23": "red", "af32": "yellow", "af33": "red", "af42": "yellow", "af43": "red"}
        )
    ) == quiet(tenants_policy({}))


def test_qos_settings_leave_the_classification_fingerprints_alone() -> None:
    base = quiet(tenants_policy({"rules": [{"action": "allow"}]})).compile().fingerprints
    changed = tenants_policy({"rules": [{"action": "allow"}], "rate": "1Gbps", "meter": {"kind": "srtcm", "cir": "1Gbps"}, "shaper": {}}, port=PORT)
    assert quiet(changed).compile().fingerprints == base


# ---------------------------------------------------------------------------------------------
# JSON Schema
# ---------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def validator() -> jsonschema.Draft202012Validator:
    schema = json.loads(P.schema_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


DOC_EXAMPLES = [(f"{path.name}[{i}]", data) for path in (DOCS / "qos.md", DOCS / "policy.md") for i, (_, data) in enumerate(doc_blocks(path))]


@pytest.mark.parametrize(("name", "data"), DOC_EXAMPLES, ids=[name for name, _ in DOC_EXAMPLES])
def test_the_docs_examples_are_valid_policies_the_schema_accepts(validator: jsonschema.Draft202012Validator, name: str, data: Any) -> None:
    assert list(validator.iter_errors(data)) == []
    with warnings.catch_warnings(record=True) as found:
        warnings.simplefilter("always")
        policy = Policy.from_dict(data)
    # only the burst example of qos.md is meant to warn
    assert [str(w.message).split(":")[0] for w in found] == (["tenants[0].meter.cbs"] if name == "qos.md[2]" else [])
    assert list(validator.iter_errors(policy.to_dict())) == []


def test_the_schema_accepts_the_sample_and_test_policies(validator: jsonschema.Draft202012Validator) -> None:
    for data in (yaml.safe_load(EXAMPLE.read_text()), QOS_DICT, tomllib.loads(QOS_TOML), *ROUND_TRIP):
        assert list(validator.iter_errors(data)) == []
    assert list(validator.iter_errors(json.loads(json.dumps(QOS_DICT)))) == []  # colour map keys as strings


def _mutate(path: list[Any], value: Any) -> dict[str, Any]:
    return edited(QOS_DICT, path, value)


METER0 = ["tenants", 0, "meter"]
CLASS0 = ["tenants", 0, "classes", 0]

BAD_FOR_BOTH: list[tuple[list[Any], Any]] = [
    ([*METER0, "kind"], "srTCM"),
    ([*METER0, "kind"], DELETE),
    ([*METER0, "pir"], DELETE),  # trtcm without its peak rate
    ([*METER0, "eir"], "1Gbps"),  # a key trtcm does not take
    ([*CLASS0, "meter", "pir"], "1Gbps"),  # ... nor rfc4115
    ([*CLASS0, "meter", "eir"], DELETE),
    ([*METER0, "cir"], "10 Gbit"),
    ([*METER0, "cbs"], "1Gbps"),
    ([*METER0, "color_aware"], "true"),
    ([*METER0, "count"], "frame"),
    ([*METER0, "actions", "yellow"], "remark"),
    ([*METER0, "actions", "yellow"], {"remark": "af44"}),
    ([*METER0, "actions", "yellow"], {"remark": 64}),
    ([*METER0, "actions", "blue"], "pass"),
    ([*METER0, "colour_aware"], True),
    (["tenants", 0, "shaper", "max_delay"], "2MiB"),
    (["tenants", 0, "shaper", "delay"], "2ms"),
    (["tenants", 0, "weight"], 0),
    (["tenants", 0, "weight"], 2**32),
    ([*CLASS0, "weight"], 2**32),
    ([*CLASS0, "priority"], 8),
    (["port", "buffer"], DELETE),
    (["port", "mode"], "fifo"),
    (["port", "rate"], "100"),
    (["count"], "ip"),
    (["largest_frame"], "1514"),
    (["color_map", "af12"], "amber"),
    (["color_map", "af14"], "red"),
    (["color_map", "64"], "red"),
    (["color_map"], ["af12"]),
]


@pytest.mark.parametrize(("path", "value"), BAD_FOR_BOTH, ids=[".".join(map(str, p)) + f"={v!r}"[:40] for p, v in BAD_FOR_BOTH])
def test_schema_and_validator_both_reject(validator: jsonschema.Draft202012Validator, path: list[Any], value: Any) -> None:
    data = _mutate(path, value)
    assert list(validator.iter_errors(data)), "the schema accepts it"
    assert errors_of(data)


BAD_FOR_ISOLANE_ONLY: list[tuple[list[Any], Any]] = [
    ([*METER0, "pir"], "5Gbps"),  # below CIR
    ([*METER0, "pbs"], "0B"),  # RFC 2698
    ([*METER0, "cir"], "1001bps"),  # not whole bytes
    ([*METER0, "cbs"], "9GiB"),  # over 8 GiB
    ([*CLASS0, "meter", "cbs"], "0B"),  # cir 4Gbps with a C that holds nothing
    (["tenants", 0, "ceil"], "200Gbps"),  # above the port
    ([*CLASS0, "rate"], "11Gbps"),  # classes above the tenant's rate
    (["port", "rate"], "10Gbps"),  # the guarantees add up to more
    (["tenants", 1, "weight"], 4),  # a weight on one tenant only
    (["tenants", 1, "shaper"], {"queue": "1MB"}),  # b has no rate or ceil to shape to
    (["largest_frame"], "32B"),
    (["color_map", "12"], "red"),  # af12 and 12: one DSCP twice
]


@pytest.mark.parametrize(("path", "value"), BAD_FOR_ISOLANE_ONLY, ids=[".".join(map(str, p)) + f"={v!r}" for p, v in BAD_FOR_ISOLANE_ONLY])
def test_what_only_isolane_checks(validator: jsonschema.Draft202012Validator, path: list[Any], value: Any) -> None:
    data = _mutate(path, value)
    assert list(validator.iter_errors(data)) == []
    assert errors_of(data)


_VALUES = st.one_of(
    st.sampled_from(
        [
            "40Gbps", "0bps", "1001bps", "5GB/s", "1.5Gbps", "40gbps", "256KiB", "0B", "9GiB", "8GiB", "1500B", "32B",
            "10us", "2ms", "0ms", "srtcm", "trtcm", "rfc4115", "inner", "outer", "wire", "wire_fcs", "pass", "drop", "remark",
            "green", "yellow", "red", "af12", "ef", "per_tenant", "shared_fifo", "",
        ]
    ),
    st.integers(-2, 2**33),
    st.booleans(),
    st.none(),
    st.fixed_dictionaries({"remark": st.sampled_from(["af11", 5, 64, "zz"])}),
)
_FIELDS = [
    [*METER0, "kind"], [*METER0, "cir"], [*METER0, "pir"], [*METER0, "cbs"], [*METER0, "pbs"], [*METER0, "ebs"], [*METER0, "eir"],
    [*METER0, "color_aware"], [*METER0, "count"], [*METER0, "actions", "red"], [*METER0, "actions", "yellow"],
    [*CLASS0, "meter", "cir"], [*CLASS0, "meter", "eir"], [*CLASS0, "meter", "ebs"], [*CLASS0, "weight"], [*CLASS0, "priority"],
    ["tenants", 0, "weight"], ["tenants", 0, "shaper", "max_delay"], ["tenants", 0, "shaper", "queue"], ["tenants", 0, "shaper", "rate"],
    ["port", "rate"], ["port", "buffer"], ["port", "mode"], ["count"], ["largest_frame"], ["color_map", "af12"], ["color_map", "7"],
]  # fmt: skip


@settings(max_examples=400, deadline=None)
@given(st.sampled_from(_FIELDS), _VALUES)
def test_every_policy_isolane_accepts_the_schema_accepts(validator: jsonschema.Draft202012Validator, path: list[Any], value: Any) -> None:
    assert_schema_accepts_if_isolane_does(validator, _mutate(path, value))
