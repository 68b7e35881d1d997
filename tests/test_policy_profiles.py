"""Adaptive profiles in policies (docs/qos.md, "Adaptive profiles"; docs/policy.md): a tenant's
on_burst and on_overload and the port's overload, read from YAML, TOML, JSON or a dict, checked
(every error at its place, warnings), written back by to_dict, described by the JSON Schema, and
compiled into the rows the engine reads (ProfileRow, OverloadRow)."""

from __future__ import annotations

import json
import re
import warnings
from fractions import Fraction
from pathlib import Path
from typing import Any

import jsonschema  # type: ignore[import-untyped]
import pytest
import yaml  # type: ignore[import-untyped]

from isolane import Engine
from isolane import policy as P
from isolane.cli import main
from isolane.policy import Policy, PolicyWarning, qos_context, qos_settings, tenant_qos
from isolane.policy.qos import ClassQos, MeterRow, OverloadRow, ProfileRow, ShaperRow
from support.locations import ROOT
from support.policy_edits import errors_of, policy_warnings, quiet

SCHEMA = P.schema()
VALIDATOR = jsonschema.Draft202012Validator(SCHEMA)

PROFILES_YAML = """
port:
  rate: 100Gbps
  buffer: 32MiB
  overload: {above: 80%, below: 4MiB, stagger: 50us}
tenants:
  - name: training
    vnis: [100]
    rate: 40Gbps
    ceil: 50Gbps
    microburst: {window: 10us, threshold: 150%}
    on_burst:
      meter: {kind: srtcm, cir: 20Gbps}
      shaper: {queue: 256KiB}
      priority: 6
      weight: 3
      hold: 200us
      max_switches: 1000
    on_overload: {priority: 7, borrow: false}
    classes:
      - {name: collective, priority: 1, weight: 3, rate: 30Gbps}
      - {name: bulk}
  - name: inference
    vnis: [200]
    rate: 20Gbps
    microburst: {window: 20us, threshold: 30Gbps}
    on_burst: {shaper: {rate: 10Gbps, max_delay: 100us}}
    on_overload: {meter: {kind: trtcm, cir: 5Gbps, pir: 10Gbps, count: inner}, weight: 1}
"""

PROFILES_TOML = """
[port]
rate = "100Gbps"
buffer = "32MiB"
overload = { above = "80%", below = "4MiB", stagger = "50us" }

[[tenants]]
name = "training"
vnis = [100]
rate = "40Gbps"
ceil = "50Gbps"
microburst = { window = "10us", threshold = "150%" }
on_overload = { priority = 7, borrow = false }
classes = [{ name = "collective", priority = 1, weight = 3, rate = "30Gbps" }, { name = "bulk" }]

[tenants.on_burst]
meter = { kind = "srtcm", cir = "20Gbps" }
shaper = { queue = "256KiB" }
priority = 6
weight = 3
hold = "200us"
max_switches = 1000

[[tenants]]
name = "inference"
vnis = [200]
rate = "20Gbps"
microburst = { window = "20us", threshold = "30Gbps" }
on_burst = { shaper = { rate = "10Gbps", max_delay = "100us" } }
on_overload = { meter = { kind = "trtcm", cir = "5Gbps", pir = "10Gbps", count = "inner" }, weight = 1 }
"""

PROFILES = yaml.safe_load(PROFILES_YAML)

# What it compiles to: rates in bytes per second, sizes in bytes, times in ns.
TRAINING_BURST = ProfileRow(
    # srTCM at 20 Gbit/s: both buckets 1 ms at CIR; the policy's count (outer, 1).
    meter=MeterRow(1, False, 1, 2_500_000_000, 2_500_000, 0, 2_500_000, 0, 0, (0, 0, 2), (0, 0, 0)),
    # No rate of its own: the tenant's ceil, 50 Gbit/s; 256 KiB take 41,943.04 ns to leave (rounded up).
    shaper=ShaperRow(6_250_000_000, 6_250_000, 262_144, 41_944),
    priority=6,
    weight=3,
    no_borrowing=False,
    hold_ns=200_000,
    max_switches_per_s=1000,
)
TRAINING_OVERLOAD = ProfileRow(None, None, 7, None, True, 0, 0)
INFERENCE_BURST = ProfileRow(None, ShaperRow(1_250_000_000, 1_250_000, 125_000, 100_000), None, None, False, 0, 0)
INFERENCE_OVERLOAD = ProfileRow(MeterRow(2, False, 0, 625_000_000, 625_000, 0, 0, 1_250_000_000, 1_250_000, (0, 0, 2), (0, 0, 0)), None, None, 1, False, 0, 0)
# 80% of 32 MiB is 26,843,545.6 B: rounded down.
OVERLOAD = OverloadRow(26_843_545, 4 * 2**20, 50_000)


def profile_rows(policy: Policy) -> list[tuple[ProfileRow | None, ProfileRow | None]]:
    context = qos_context(policy)
    return [(q.on_burst, q.on_overload) for q in (tenant_qos(t, context) for t in policy.tenants)]


def test_yaml_toml_json_and_dict_compile_to_the_same_rows(tmp_path: Path) -> None:
    (tmp_path / "p.yaml").write_text(PROFILES_YAML)
    (tmp_path / "p.toml").write_text(PROFILES_TOML)
    (tmp_path / "p.json").write_text(json.dumps(PROFILES))
    from_dict = quiet(PROFILES)
    for name in ("p.yaml", "p.toml", "p.json"):
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            assert Policy.from_file(tmp_path / name) == from_dict, name
    assert profile_rows(from_dict) == [(TRAINING_BURST, TRAINING_OVERLOAD), (INFERENCE_BURST, INFERENCE_OVERLOAD)]
    port = qos_settings(from_dict, ()).port
    assert port is not None and port.overload == OVERLOAD


def test_the_model_holds_what_the_document_says() -> None:
    policy = quiet(PROFILES)
    training, inference = policy.tenants
    assert training.on_burst == P.Profile(
        meter=P.Meter("srtcm", 20_000_000_000), shaper=P.Shaper(queue_bytes=2**18), priority=6, weight=3, hold_ns=200_000, max_switches=1000
    )
    assert training.on_overload == P.Profile(priority=7, borrow=False)
    assert inference.on_burst == P.Profile(shaper=P.Shaper(10_000_000_000, max_delay_ns=100_000))
    assert policy.port is not None
    assert policy.port.overload == P.Overload(26_843_545, 4 * 2**20, 50_000, above_percent=Fraction(80))


def test_no_profile_compiles_to_none_and_stagger_defaults_to_10us() -> None:
    policy = quiet({"port": {"rate": "10Gbps", "buffer": "1MiB", "overload": {"above": "512KiB", "below": "0%"}}, "tenants": [{"name": "a", "vnis": [1]}]})
    assert profile_rows(policy) == [(None, None)]
    port = qos_settings(policy, ()).port
    assert port is not None and port.overload == OverloadRow(512 * 1024, 0, 10_000)
    assert qos_settings(quiet({"port": {"rate": "10Gbps", "buffer": "1MiB"}, "tenants": []}), ()).port.overload is None  # type: ignore[union-attr]


def test_the_example_of_qos_md_compiles_to_what_it_says() -> None:
    blocks = re.findall(r"```yaml\n(.*?)```", (ROOT / "docs" / "qos.md").read_text(), re.S)
    [example] = [yaml.safe_load(b) for b in blocks if "on_overload: {meter:" in b]
    policy = quiet(example)
    assert profile_rows(policy) == [
        (ProfileRow(None, ShaperRow(3_750_000_000, 3_750_000, 262_144, 69_906), None, None, False, 200_000, 1000), ProfileRow(None, None, 7, None, True, 0, 0)),
        (None, ProfileRow(MeterRow(1, False, 1, 1_250_000_000, 1_250_000, 0, 1_250_000, 0, 0, (0, 0, 2), (0, 0, 0)), None, None, None, False, 0, 0)),
    ]
    assert qos_settings(policy, ()).port.overload == (26_843_545, 6_710_886, 50_000)  # type: ignore[union-attr]


def test_a_profile_meter_and_shaper_compile_as_the_tenants_own() -> None:
    """The same meter and shaper written in a profile compile to the tenant's rows, defaults and
    all; a profile shaper without a rate shapes to the tenant's ceil, else its rate."""
    meter = {"kind": "rfc4115", "cir": "1Gbps", "eir": "500Mbps", "actions": {"yellow": {"remark": "af12"}}}
    for contract in ({"rate": "2Gbps"}, {"rate": "2Gbps", "ceil": "3Gbps"}):
        tenant = {"name": "a", "vnis": [1], **contract, "meter": meter, "shaper": {"max_delay": "1ms"}, "microburst": {"window": "10us", "threshold": "5Gbps"}}
        tenant["on_burst"] = {"meter": meter, "shaper": {"max_delay": "1ms"}}
        policy = quiet({"count": "wire", "largest_frame": "1500B", "tenants": [tenant]})
        qos = tenant_qos(policy.tenants[0], qos_context(policy))
        assert qos.on_burst is not None
        assert (qos.on_burst.meter, qos.on_burst.shaper) == (qos.meter, qos.shaper)
        assert qos.shaper.rate == int(P.parse_rate(contract.get("ceil", contract["rate"]))) // 8


# ---------------------------------------------------------------------------------------------
# Errors, each at its place
# ---------------------------------------------------------------------------------------------

PORT = {"rate": "100Gbps", "buffer": "32MiB", "overload": {"above": "80%", "below": "20%"}}
MICROBURST = {"window": "10us", "threshold": "150%"}


def one_tenant(port: dict[str, Any] | None = PORT, **keys: Any) -> dict[str, Any]:
    tenant = {"name": "a", "vnis": [1], "rate": "40Gbps", "microburst": MICROBURST, **keys}
    return {"tenants": [tenant]} if port is None else {"port": port, "tenants": [tenant]}


def with_port(**overload: Any) -> dict[str, Any]:
    return {"port": {"rate": "100Gbps", "buffer": "32MiB", "overload": overload}, "tenants": []}


NOTHING_BURST = "the profile changes nothing: give it a meter, shaper, priority or weight"
NOTHING_OVERLOAD = NOTHING_BURST + ", or borrow: false"
NO_MICROBURST = (
    "a burst profile is taken when a rate event of the tenant's own microburst setting starts, and the tenant has none: give it one, "
    "e.g. microburst: {window: 10us, threshold: 150%} (a class's microburst does not switch the tenant)"
)
NO_OVERLOAD = (
    "an overload profile is taken while the port is overloaded, and the port has no overload setting: give it one, e.g. overload: {above: 80%, below: 20%}"
)
NO_PORT = (
    "an overload profile is taken while the port is overloaded, and the policy has no port: give it one with an overload setting, "
    "e.g. port: {rate: 100Gbps, buffer: 32MiB, overload: {above: 80%, below: 20%}}"
)
OVER_10S = "is over 10s, the longest isolane takes (a profile kept longer is a new contract)"
SWITCHES = "is outside 1-1000000 (switches a second)"
NEVER = "is not below the buffer (32MiB): more can never wait, so the port would never be overloaded"
NO_GUARANTEE = "false caps every class queue at its guarantee, and the tenant has none: give it a rate, or give its classes rates"


def no_share(names: str) -> str:
    return (
        f"false caps every class queue at its guarantee, and {names} would get none (no rate of its own, and no share of the tenant's rate "
        "its classes leave): give it a rate, or the tenant a rate its classes do not claim in full"
    )


ERRORS: list[tuple[dict[str, Any], list[tuple[str, str]]]] = [
    # a profile that changes nothing
    (one_tenant(on_burst={}), [("tenants[0].on_burst", NOTHING_BURST)]),
    (one_tenant(on_burst={"hold": "1ms", "max_switches": 5}), [("tenants[0].on_burst", NOTHING_BURST)]),
    (one_tenant(on_overload={"borrow": True}), [("tenants[0].on_overload", NOTHING_OVERLOAD)]),
    # what starts a profile
    ({"tenants": [{"name": "a", "vnis": [1], "on_burst": {"priority": 1}}]}, [("tenants[0].on_burst", NO_MICROBURST)]),
    (
        {"tenants": [{"name": "a", "vnis": [1], "classes": [{"name": "c", "microburst": {"window": "1us", "threshold": "1Gbps"}}], "on_burst": {"weight": 2}}]},
        [("tenants[0].on_burst", NO_MICROBURST)],
    ),
    (one_tenant(port={"rate": "100Gbps", "buffer": "32MiB"}, on_overload={"priority": 1}), [("tenants[0].on_overload", NO_OVERLOAD)]),
    (one_tenant(port=None, on_overload={"priority": 1}), [("tenants[0].on_overload", NO_PORT)]),
    # the keys of a profile
    (one_tenant(on_burst={"priority": 8}), [("tenants[0].on_burst.priority", "priority 8 is outside 0-7")]),
    (one_tenant(on_overload={"weight": 0}), [("tenants[0].on_overload.weight", "weight must be at least 1, got 0")]),
    (one_tenant(on_burst={"priority": "1"}), [("tenants[0].on_burst.priority", "expected priority (an integer), got a string ('1')")]),
    (one_tenant(on_burst={"priority": 1, "hold": "11s"}), [("tenants[0].on_burst.hold", f"'11s' {OVER_10S}")]),
    (one_tenant(on_burst={"priority": 1, "hold": 5}), [("tenants[0].on_burst.hold", "5 has no unit: write it as a string with its unit, e.g. '10us'")]),
    (one_tenant(on_burst={"priority": 1, "max_switches": 0}), [("tenants[0].on_burst.max_switches", f"max_switches 0 {SWITCHES}")]),
    (one_tenant(on_burst={"priority": 1, "max_switches": 1_000_001}), [("tenants[0].on_burst.max_switches", f"max_switches 1000001 {SWITCHES}")]),
    (
        one_tenant(on_burst={"priority": 1, "max_switches": True}),
        [("tenants[0].on_burst.max_switches", "expected max_switches (an integer), got a boolean (true)")],
    ),
    (one_tenant(on_overload={"priority": 1, "borrow": "no"}), [("tenants[0].on_overload.borrow", "expected true or false, got a string ('no')")]),
    (one_tenant(on_burst={"prioriti": 1}), [("tenants[0].on_burst.prioriti", "unknown key; did you mean 'priority'?"), ("tenants[0].on_burst", NOTHING_BURST)]),
    (
        one_tenant(on_burst={"priority": 1, "borrow": False}),
        [
            (
                "tenants[0].on_burst.borrow",
                "unknown key: only on_overload profiles take borrow (a burst profile cannot cap the tenant's queues at their guarantees)",
            )
        ],
    ),
    (
        one_tenant(on_overload={"priority": 1, "hold": "1ms", "max_switches": 3}),
        [
            (
                "tenants[0].on_overload.hold",
                "unknown key: only on_burst profiles take hold "
                "(an overload profile is kept while the port is overloaded; port.overload.stagger spaces the returns)",
            ),
            ("tenants[0].on_overload.max_switches", "unknown key: only on_burst profiles take max_switches (an overload profile is taken once per overload)"),
        ],
    ),
    (one_tenant(on_burst=[{"priority": 1}]), [("tenants[0].on_burst", "expected a mapping, got a list")]),
    # a meter and a shaper are checked as a tenant's are
    (one_tenant(on_burst={"meter": {"kind": "trtcm", "cir": "1Gbps"}}), [("tenants[0].on_burst.meter", "missing key 'pir': trtcm meters need a peak rate")]),
    (
        {"tenants": [{"name": "a", "vnis": [1], "microburst": MICROBURST | {"threshold": "1Gbps"}, "on_burst": {"shaper": {"queue": "1MiB"}}}]},
        [
            (
                "tenants[0].on_burst.shaper",
                "a shaper needs a rate: give it 'rate', or give its tenant or class a 'ceil' or 'rate' (it then shapes to the ceil, else the rate)",
            )
        ],
    ),
    # borrow: false needs a guarantee in every class queue
    ({"port": PORT, "tenants": [{"name": "a", "vnis": [1], "on_overload": {"borrow": False}}]}, [("tenants[0].on_overload.borrow", NO_GUARANTEE)]),
    (
        {"port": PORT, "tenants": [{"name": "a", "vnis": [1], "classes": [{"name": "x", "rate": "1Gbps"}, {"name": "y"}], "on_overload": {"borrow": False}}]},
        [("tenants[0].on_overload.borrow", no_share("'y'"))],
    ),
    # 2 B/s over three classes of weight 1: shares 0, 0, 0, and the first takes the 2 left over.
    (
        {"port": PORT, "tenants": [{"name": "a", "vnis": [1], "rate": "16bps", "classes": [{"name": n} for n in "xyz"], "on_overload": {"borrow": False}}]},
        [("tenants[0].on_overload.borrow", no_share("'y', 'z'"))],
    ),
    # a profile weight times a class weight must fit 32 bits
    (
        one_tenant(classes=[{"name": "x", "weight": 2**31}, {"name": "y", "weight": 2}], on_burst={"weight": 2}),
        [("tenants[0].on_burst.weight", "the port weighs class 'x' by the tenant's weight times its own, 2 x 2147483648, which is over 4294967295 (32 bits)")],
    ),
    # the port's overload
    (with_port(above="32MiB", below="1MiB"), [("port.overload.above", f"'32MiB' {NEVER}")]),
    (with_port(above="100%", below="1MiB"), [("port.overload.above", f"'100%' (32MiB) {NEVER}")]),
    (with_port(above="1MiB", below="20%"), [("port.overload.below", "'20%' (6710886B) is above '1MiB': the buffer must fall to where it rose or lower")]),
    (with_port(above="0%", below="0B"), [("port.overload.above", "'0%' of the buffer (32MiB) is under 1 byte: it must be more than zero")]),
    (with_port(above="0B", below="0%"), [("port.overload.above", "'0B' must be more than zero")]),
    (
        with_port(above="80", below="20 %", stagger=5),
        [
            ("port.overload.above", "'80' has no unit: write e.g. '256KiB'; or a percentage of the buffer, e.g. '80%'"),
            ("port.overload.stagger", "5 has no unit: write it as a string with its unit, e.g. '10us'"),
        ],
    ),
    (with_port(above="1MiB", below="1KiB", stagger="10.5s"), [("port.overload.stagger", f"'10.5s' {OVER_10S}")]),
    (
        with_port(abve="1MiB"),
        [("port.overload.abve", "unknown key; did you mean 'above'?"), ("port.overload", "missing key 'above'"), ("port.overload", "missing key 'below'")],
    ),
    ({"port": {"rate": "100Gbps", "buffer": "32MiB", "overload": "80%"}, "tenants": []}, [("port.overload", "expected a mapping, got a string ('80%')")]),
]


@pytest.mark.parametrize(("data", "expected"), ERRORS, ids=range(len(ERRORS)))
def test_errors_name_the_place(data: dict[str, Any], expected: list[tuple[str, str]]) -> None:
    assert errors_of(data) == expected


def test_every_profile_problem_is_reported_at_once() -> None:
    data = {
        "port": {"rate": "100Gbps", "buffer": "32MiB", "overload": {"above": "1MiB", "below": "2MiB"}},
        "tenants": [
            {"name": "a", "vnis": [1], "on_burst": {"priority": 9, "hold": "1 hour"}},
            {"name": "b", "vnis": [2], "on_overload": {}},
        ],
    }
    assert [path for path, _ in errors_of(data)] == [
        "port.overload.below",
        "tenants[0].on_burst.priority",
        "tenants[0].on_burst.hold",
        "tenants[0].on_burst",  # no microburst
        "tenants[1].on_overload",  # changes nothing
        "tenants[1].on_overload",  # and no port to take it (the port could not be read)
    ]


# ---------------------------------------------------------------------------------------------
# Warnings
# ---------------------------------------------------------------------------------------------



def test_queue_changes_without_per_tenant_queues_are_warned_about() -> None:
    no_port = "the policy has no port: it changes nothing"
    assert policy_warnings(one_tenant(port=None, on_burst={"priority": 1, "weight": 2, "hold": "1ms"})) == [
        f"tenants[0].on_burst.priority: priority changes the tenant's queues at the port, and {no_port}",
        f"tenants[0].on_burst.weight: weight changes the tenant's queues at the port, and {no_port}",
    ]
    fifo = "the port is a shared_fifo (one FIFO: priorities, weights and ceilings do not apply): it changes nothing"
    assert policy_warnings(one_tenant(port=PORT | {"mode": "shared_fifo"}, on_overload={"borrow": False, "meter": {"kind": "srtcm", "cir": "1Gbps"}})) == [
        f"tenants[0].on_overload.borrow: borrow: false changes the tenant's queues at the port, and {fifo}"
    ]
    # at a per-tenant port they change the queues; a meter or a shaper changes something anywhere
    quiet(one_tenant(on_burst={"priority": 1, "weight": 2}, on_overload={"borrow": False}))
    quiet(one_tenant(port=None, on_burst={"meter": {"kind": "srtcm", "cir": "1Gbps"}, "shaper": {}}))


def test_a_tenant_read_again_warns_again_at_its_new_place() -> None:
    tenant = {"name": "b", "vnis": [2], "rate": "1Gbps", "microburst": MICROBURST, "on_burst": {"priority": 0}}
    first = policy_warnings({"tenants": [tenant]})
    again = policy_warnings({"tenants": [{"name": "a", "vnis": [1]}, tenant]})
    assert [w.split(":")[0] for w in first] == ["tenants[0].on_burst.priority"]
    assert [w.split(":")[0] for w in again] == ["tenants[1].on_burst.priority"]


# ---------------------------------------------------------------------------------------------
# Written back, described by the schema, part of a tenant's identity
# ---------------------------------------------------------------------------------------------


def test_to_dict_writes_what_is_set_and_reads_back_the_same(tmp_path: Path) -> None:
    policy = quiet(PROFILES)
    out = policy.to_dict()
    assert out["port"]["overload"] == {"above": "80%", "below": "4MiB", "stagger": "50us"}
    training = out["tenants"][0]
    assert list(training)[:9] == ["name", "vnis", "rate", "ceil", "microburst", "on_burst", "on_overload", "classes", "default_class"]
    assert training["on_burst"] == {
        "meter": {"kind": "srtcm", "cir": "20Gbps", "color_aware": False, "actions": {"green": "pass", "yellow": "pass", "red": "drop"}},
        "shaper": {"queue": "256KiB"},
        "priority": 6,
        "weight": 3,
        "hold": "200us",
        "max_switches": 1000,
    }
    assert training["on_overload"] == {"priority": 7, "borrow": False}
    assert out["tenants"][1]["on_overload"]["weight"] == 1 and "borrow" not in out["tenants"][1]["on_overload"]
    assert Policy.from_dict(out) == policy
    assert VALIDATOR.is_valid(out)
    (tmp_path / "again.yaml").write_text(yaml.safe_dump(out, sort_keys=False))
    again = Policy.from_file(tmp_path / "again.yaml")
    assert again == policy and profile_rows(again) == profile_rows(policy)
    # a hold of 0 and a default stagger read back the same, written or not
    plain = quiet(one_tenant(on_burst={"priority": 1, "hold": "0us"}, port=PORT | {"overload": {"above": "1MiB", "below": "0B", "stagger": "10us"}}))
    assert plain.to_dict()["tenants"][0]["on_burst"] == {"priority": 1}
    assert plain.to_dict()["port"]["overload"] == {"above": "1MiB", "below": "0B", "stagger": "10us"}
    assert quiet(plain.to_dict()) == plain


def test_the_json_schema_describes_the_profiles(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["schema"]) == 0
    printed = json.loads(capsys.readouterr().out)
    defs = printed["$defs"]
    assert list(defs["BurstProfile"]["properties"]) == ["meter", "shaper", "priority", "weight", "hold", "max_switches"]
    assert list(defs["OverloadProfile"]["properties"]) == ["meter", "shaper", "priority", "weight", "borrow"]
    assert list(defs["Overload"]["properties"]) == ["above", "below", "stagger"] and defs["Overload"]["required"] == ["above", "below"]
    assert defs["Tenant"]["properties"]["on_burst"]["$ref"] == "#/$defs/BurstProfile"
    assert defs["Tenant"]["properties"]["on_overload"]["$ref"] == "#/$defs/OverloadProfile"
    assert defs["Port"]["properties"]["overload"]["$ref"] == "#/$defs/Overload"
    assert VALIDATOR.is_valid(PROFILES)
    # what the schema can tell alone, it refuses as isolane does
    for data in (
        one_tenant(on_burst={}),
        one_tenant(on_burst={"hold": "1ms"}),
        one_tenant(on_overload={"borrow": True}),
        one_tenant(on_overload={"priority": 1, "hold": "1ms"}),
        one_tenant(on_burst={"priority": 1, "borrow": False}),
        one_tenant(on_burst={"priority": 8}),
        one_tenant(on_burst={"priority": 1, "max_switches": 0}),
        with_port(above="80%"),
        with_port(above="80", below="1MiB"),
    ):
        assert not VALIDATOR.is_valid(data), data
        assert errors_of(data)
    assert VALIDATOR.is_valid(one_tenant(on_overload={"borrow": False}))


def test_a_change_of_profile_makes_a_tenant_different() -> None:
    base = one_tenant(on_burst={"priority": 1, "hold": "1ms"})
    policy = quiet(base)
    assert policy.with_tenant(base["tenants"][0]).tenants[0] is policy.tenants[0]  # equal data: the same tenant, compiled once
    for change in ({"on_burst": {"priority": 1, "hold": "2ms"}}, {"on_overload": {"priority": 2}}):
        changed = policy.with_tenant(one_tenant(**{"on_burst": {"priority": 1, "hold": "1ms"}, **change})["tenants"][0])
        assert changed.tenants[0] != policy.tenants[0] and changed.tenants[0] is not policy.tenants[0]
        assert profile_rows(changed) != profile_rows(policy)
    edited = policy.with_tenant(base["tenants"][0] | {"on_burst": {"weight": 4}})
    assert edited.changes_since(policy) == [("replace", 0, policy.tenants[0], edited.tenants[0])]
    assert profile_rows(edited)[0][0] == ProfileRow(None, None, None, 4, False, 0, 0)
    with pytest.raises(P.PolicyError) as info:
        policy.with_tenant(base["tenants"][0] | {"on_burst": {"hold": "1ms"}})
    assert info.value.errors == [("tenants[0].on_burst", NOTHING_BURST)]
    # a port without overload: with_tenant checks on_overload against the policy's port
    with pytest.raises(P.PolicyError) as info:
        quiet(one_tenant(port={"rate": "100Gbps", "buffer": "32MiB"})).with_tenant(base["tenants"][0] | {"on_overload": {"priority": 0}})
    assert info.value.errors == [("tenants[0].on_overload", NO_OVERLOAD)]


@pytest.mark.parametrize(
    "data",
    [
        PROFILES,
        one_tenant(port=None, on_burst={"meter": {"kind": "srtcm", "cir": "1Gbps"}, "hold": "10s", "max_switches": 1_000_000}),
        # the guarantee's rounding gives every class something: 3 B/s over three classes
        {"port": PORT, "tenants": [{"name": "a", "vnis": [1], "rate": "24bps", "classes": [{"name": n} for n in "xyz"], "on_overload": {"borrow": False}}]},
        # the largest profile weight a class of weight 1 allows
        one_tenant(classes=[{"name": "x"}], on_burst={"weight": 2**32 - 1}, on_overload={"weight": 1, "priority": 0}),
    ],
    ids=range(4),
)
def test_a_valid_policy_with_profiles_builds_an_engine(data: dict[str, Any]) -> None:
    """What validation lets through, the core's checks take (rust/enforce/spec.rs, check_profiles)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PolicyWarning)
        policy = Policy.from_dict(data)
    Engine(policy)


# ---------------------------------------------------------------------------------------------
# A class's on_burst (issue 17): its own microburst starts it, it changes the class's meter,
# shaper and port queue
# ---------------------------------------------------------------------------------------------

CLASS_PROFILE_YAML = """
port: {rate: 100Gbps, buffer: 32MiB}
tenants:
  - name: training
    vnis: [100]
    rate: 40Gbps
    classes:
      - name: bulk
      - name: collective
        rate: 30Gbps
        ceil: 35Gbps
        microburst: {window: 1ms, threshold: 100Mbps}
        on_burst: {shaper: {rate: 10Gbps, queue: 1MiB}, priority: 6, weight: 1, hold: 200us, max_switches: 1000}
      - name: control
        rate: 1Gbps
        microburst: {window: 10us, threshold: 150%}
        on_burst: {meter: {kind: srtcm, cir: 500Mbps}, shaper: {max_delay: 100us}}
"""
CLASS_PROFILE = yaml.safe_load(CLASS_PROFILE_YAML)
# 10 Gbit/s is 1.25 GB/s: 1 ms of burst; 1 MiB takes 838,860.8 ns to leave (rounded up).
COLLECTIVE_BURST = ProfileRow(None, ShaperRow(1_250_000_000, 1_250_000, 1_048_576, 838_861), 6, 1, False, 200_000, 1000)


def one_class(**keys: Any) -> dict[str, Any]:
    """A tenant whose second class has ``keys``."""
    return {"port": PORT, "tenants": [{"name": "a", "vnis": [1], "rate": "40Gbps", "classes": [{"name": "x"}, {"name": "c", "rate": "1Gbps", **keys}]}]}


CLASS_MICROBURST = {"window": "10us", "threshold": "2Gbps"}
NO_CLASS_MICROBURST = (
    "a burst profile is taken when a rate event of the class's own microburst setting starts, and the class has none: give it one, "
    "e.g. microburst: {window: 10us, threshold: 150%} (its tenant's microburst does not switch the class)"
)


def test_the_class_examples_of_the_docs_compile_to_what_they_say() -> None:
    for doc in ("qos.md", "policy.md"):
        blocks = re.findall(r"```yaml\n(.*?)```", (ROOT / "docs" / doc).read_text(), re.S)
        [example] = [yaml.safe_load(b) for b in blocks if "on_burst: {shaper: {rate: 10Gbps, queue: 1MiB}" in b]
        policy = quiet(example)
        assert tenant_qos(policy.tenants[0], qos_context(policy)).classes[0].on_burst == COLLECTIVE_BURST, doc


def test_a_class_profile_compiles_to_a_profile_row_of_the_class() -> None:
    policy = quiet(CLASS_PROFILE)
    qos = tenant_qos(policy.tenants[0], qos_context(policy))
    assert qos.on_burst is None and qos.classes[0].on_burst is None
    assert qos.classes[1].on_burst == COLLECTIVE_BURST
    assert ClassQos._fields[-1] == "on_burst"
    # its meter and shaper compile as the class's own: a shaper without a rate shapes to the class's ceil, else its rate
    control = qos.classes[2]
    assert control.on_burst is not None and (control.on_burst.priority, control.on_burst.weight) == (None, None)
    same = quiet(one_class(microburst=CLASS_MICROBURST, meter={"kind": "srtcm", "cir": "500Mbps"}, shaper={"max_delay": "100us"}))
    own = tenant_qos(same.tenants[0], qos_context(same)).classes[1]
    assert (control.on_burst.meter, control.on_burst.shaper) == (own.meter, own.shaper)
    assert own.shaper.rate == 1_000_000_000 // 8
    assert policy.tenants[0].classes[1].on_burst == P.Profile(None, P.Shaper(10_000_000_000, None, 1_048_576, None), 6, 1, True, 200_000, 1000)
    Engine(policy)


CLASS_ERRORS: list[tuple[dict[str, Any], list[tuple[str, str]]]] = [
    (one_class(on_burst={"priority": 1}), [("tenants[0].classes[1].on_burst", NO_CLASS_MICROBURST)]),
    # the tenant's microburst does not start a class's profile
    (
        {"tenants": [{"name": "a", "vnis": [1], "microburst": MICROBURST | {"threshold": "1Gbps"}, "classes": [{"name": "c", "on_burst": {"weight": 2}}]}]},
        [("tenants[0].classes[0].on_burst", NO_CLASS_MICROBURST)],
    ),
    (one_class(microburst=CLASS_MICROBURST, on_burst={}), [("tenants[0].classes[1].on_burst", NOTHING_BURST)]),
    (one_class(microburst=CLASS_MICROBURST, on_burst={"hold": "1ms", "max_switches": 5}), [("tenants[0].classes[1].on_burst", NOTHING_BURST)]),
    (
        one_class(microburst=CLASS_MICROBURST, on_burst={"wieght": 2}),
        [("tenants[0].classes[1].on_burst.wieght", "unknown key; did you mean 'weight'?"), ("tenants[0].classes[1].on_burst", NOTHING_BURST)],
    ),
    (
        one_class(microburst=CLASS_MICROBURST, on_burst={"priority": 1, "borrow": False}),
        [
            (
                "tenants[0].classes[1].on_burst.borrow",
                "unknown key: a class's profile cannot take borrow (only a tenant's on_overload profile caps its queues at their guarantees)",
            )
        ],
    ),
    (one_class(microburst=CLASS_MICROBURST, on_burst={"priority": 8}), [("tenants[0].classes[1].on_burst.priority", "priority 8 is outside 0-7")]),
    (one_class(microburst=CLASS_MICROBURST, on_burst={"priority": 1, "hold": "11s"}), [("tenants[0].classes[1].on_burst.hold", f"'11s' {OVER_10S}")]),
    (
        one_class(microburst=CLASS_MICROBURST, on_overload={"priority": 1}),
        [
            (
                "tenants[0].classes[1].on_overload",
                "unknown key (expected one of: name, description, priority, weight, rate, burst, ceil, meter, shaper, microburst, on_burst)",
            )
        ],
    ),
    (
        {"tenants": [{"name": "a", "vnis": [1], "classes": [{"name": "c", "microburst": CLASS_MICROBURST, "on_burst": {"shaper": {"queue": "1MiB"}}}]}]},
        [
            (
                "tenants[0].classes[0].on_burst.shaper",
                "a shaper needs a rate: give it 'rate', or give its tenant or class a 'ceil' or 'rate' (it then shapes to the ceil, else the rate)",
            )
        ],
    ),
    # the port weighs the class by its tenant's weight times the profile's
    (
        {
            "tenants": [
                {"name": "a", "vnis": [1], "weight": 2, "classes": [{"name": "c", "microburst": CLASS_MICROBURST, "on_burst": {"weight": 2**31}}]},
            ]
        },
        [
            (
                "tenants[0].classes[0].on_burst.weight",
                "the port weighs this class by its tenant's weight times its own, 2 x 2147483648, which is over 4294967295 (32 bits)",
            )
        ],
    ),
]


@pytest.mark.parametrize(("data", "expected"), CLASS_ERRORS, ids=range(len(CLASS_ERRORS)))
def test_class_profile_errors_name_the_place(data: dict[str, Any], expected: list[tuple[str, str]]) -> None:
    assert errors_of(data) == expected


def test_class_profile_queue_changes_without_per_tenant_queues_are_warned_about() -> None:
    data = one_class(microburst=CLASS_MICROBURST, on_burst={"priority": 1, "weight": 2})
    del data["port"]
    assert policy_warnings(data) == [
        f"tenants[0].classes[1].on_burst.{key}: {key} changes the class's queue at the port, and the policy has no port: it changes nothing"
        for key in ("priority", "weight")
    ]
    quiet(one_class(microburst=CLASS_MICROBURST, on_burst={"priority": 1, "weight": 2}))


def test_a_class_profile_is_written_back_and_described_by_the_schema() -> None:
    policy = quiet(CLASS_PROFILE)
    out = policy.to_dict()
    collective = out["tenants"][0]["classes"][1]
    assert list(collective) == ["name", "rate", "ceil", "microburst", "on_burst"]
    assert collective["on_burst"] == {"shaper": {"rate": "10Gbps", "queue": "1MiB"}, "priority": 6, "weight": 1, "hold": "200us", "max_switches": 1000}
    assert "on_burst" not in out["tenants"][0]["classes"][0]
    assert Policy.from_dict(out) == policy and VALIDATOR.is_valid(out)
    assert Policy.from_dict(yaml.safe_load(yaml.safe_dump(out, sort_keys=False))) == policy
    assert SCHEMA["$defs"]["TrafficClass"]["properties"]["on_burst"]["$ref"] == "#/$defs/BurstProfile"
    assert VALIDATOR.is_valid(CLASS_PROFILE)
    for data in (
        one_class(microburst=CLASS_MICROBURST, on_burst={}),
        one_class(microburst=CLASS_MICROBURST, on_burst={"hold": "1ms"}),
        one_class(microburst=CLASS_MICROBURST, on_burst={"priority": 1, "borrow": False}),
        one_class(microburst=CLASS_MICROBURST, on_overload={"priority": 1}),
    ):
        assert not VALIDATOR.is_valid(data), data
        assert errors_of(data)
    # a change of a class's profile makes its tenant different
    changed = quiet(yaml.safe_load(CLASS_PROFILE_YAML.replace("hold: 200us", "hold: 300us")))
    assert changed.tenants[0] != policy.tenants[0]
