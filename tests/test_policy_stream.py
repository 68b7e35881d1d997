"""A YAML policy file read while the core parses it (docs/policy.md, "YAML"): its tenants are
checked as they are parsed, under the settings written before them. Whatever the order of its
keys and whatever its problems, the file must read as the same document read whole does: the same
policy and warnings, or the same errors in the same order."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
import yaml  # type: ignore[import-untyped]
from hypothesis import given, settings
from hypothesis import strategies as st

from isolane import _core
from isolane.policy import Policy, PolicyError
from support.policy_reads import Outcome, file_outcome, outcome


def read_both(text: str) -> tuple[Outcome, Outcome]:
    """The file read by ``Policy.from_file`` and the same text parsed whole, then read. The whole
    read comes first: a policy read wrongly from the file, alive, could lend its tenants to it."""
    whole = outcome(lambda: Policy.from_dict(_core.load_yaml(text)))
    return file_outcome(text), whole


# Mostly valid values, so that most documents read, a few that are not.
rates = st.sampled_from(["10Mbps", "1Gbps"] * 4 + ["fast"])
ceilings = st.sampled_from(["1Gbps", "40Gbps", "200Gbps"] * 4 + ["10 Gbit"])  # some above a port's line rate
rules = st.lists(
    st.fixed_dictionaries(
        {"action": st.sampled_from(["allow"] * 8 + ["drop"] * 8 + ["alow"])},
        optional={"dst": st.sampled_from(["10.0.0.0/8", "10.1.0.0/16"] * 8 + ["10.0.0.0/33"]), "proto": st.sampled_from(["tcp", "udp", "gre"])},
    ),
    max_size=3,
)
shaper = st.fixed_dictionaries({"queue": st.sampled_from(["1MB", "128MB", "1KB"])})
tenant = st.fixed_dictionaries({}, optional={"rate": rates, "ceil": ceilings, "rules": rules, "shaper": shaper})
settings_keys = st.fixed_dictionaries(
    {},
    optional={
        "port": st.fixed_dictionaries(
            {"rate": st.sampled_from(["10Gbps", "100Gbps"] * 8 + ["slow"]), "buffer": st.sampled_from(["64MB", "16MB"] * 8 + ["big"])}
        ),
        "largest_frame": st.sampled_from(["9216B", "1500B", "2MB"] * 8 + ["10Mbps"]),
        "unknown_tenant": st.sampled_from(["drop", "allow"] * 8 + ["deny"]),
        "version": st.sampled_from([1] * 16 + [2]),
        "description": st.just("policies under test"),
    },
)


@settings(max_examples=300, deadline=None)
@given(settings_keys, st.lists(tenant, max_size=8), st.data())
def test_a_file_read_while_it_is_parsed_reads_as_the_document_read_whole(others: dict[str, Any], tenants: list[Any], data: st.DataObject) -> None:
    tenants = [{"name": f"t{i}", "vnis": [i + 1], **t} for i, t in enumerate(tenants)]
    if tenants and data.draw(st.integers(0, 7)) == 0:  # now and then a name or VNI claimed twice, or an unknown key
        tenants[-1][data.draw(st.sampled_from(["name", "vnis", "colour"]))] = tenants[0]["name" if data.draw(st.booleans()) else "vnis"]
    order = data.draw(st.permutations([*others, "tenants"]))
    document = {key: tenants if key == "tenants" else others[key] for key in order}
    flow = data.draw(st.sampled_from([False, None]))
    text = yaml.safe_dump(document, sort_keys=False, default_flow_style=flow, allow_unicode=True)
    streamed, whole = read_both(text)
    assert streamed == whole, text


def test_settings_after_the_tenants_are_those_the_tenants_are_read_under() -> None:
    tenants = "tenants:\n  - {name: a, vnis: [1], rate: 1Gbps, ceil: 2Gbps}\n"
    for port in ("port: {rate: 10Gbps, buffer: 64MB}\n", "port: {rate: 1Gbps, buffer: 1MB}\n"):
        for text in (port + tenants, tenants + port):
            streamed, whole = read_both(text)
            assert streamed == whole, text
    # A port slower than the tenant's ceiling, after the tenants: an error all the same.
    streamed, whole = read_both(tenants + "port: {rate: 1Gbps, buffer: 1MB}\n")
    assert whole == ("errors", [("tenants[0].ceil", "ceil '2Gbps' is above the port's line rate 1Gbps")], None)
    assert streamed == whole


def test_a_syntax_error_after_bad_tenants_is_the_files_one_error(tmp_path: Path) -> None:
    path = tmp_path / "p.yaml"
    path.write_text("tenants:\n  - {name: a, vnis: [1], rate: fast}\n  - {name: a, vnis: [1]\n", encoding="utf-8")
    try:
        Policy.from_file(path)
    except PolicyError as err:
        assert err.errors == [("", "invalid YAML: line 4, column 1: while parsing a flow mapping, did not find expected ',' or '}'")]
    else:
        raise AssertionError("read a file that is not YAML")


def reader_threads() -> int:
    """The YAML reader's threads alive in this process (Linux names each thread in /proc)."""
    return sum(comm.read_text().strip() == "isolane-yaml" for comm in Path("/proc/self/task").glob("*/comm"))


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="threads are counted through Linux's /proc")
def test_the_reader_thread_ends_once_the_read_is_over(tmp_path: Path) -> None:
    """It waits for the stream to go, then hands back its heap and ends: reads leave no thread
    behind, good or bad."""
    good, bad = tmp_path / "good.yaml", tmp_path / "bad.yaml"
    good.write_text("tenants:\n" + "".join(f"  - {{name: t{i}, vnis: [{i + 1}]}}\n" for i in range(200)))
    bad.write_text("tenants:\n  - {name: a, vnis: [1]}\n  - [unclosed\n")
    before = reader_threads()
    for _ in range(5):
        Policy.from_file(good)
        with pytest.raises(PolicyError):
            Policy.from_file(bad)
    deadline = time.monotonic() + 10
    while reader_threads() > before and time.monotonic() < deadline:
        time.sleep(0.01)
    assert reader_threads() == before
