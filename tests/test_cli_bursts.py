"""`isolane replay`'s microbursts: the table's section, the JSON's `microbursts` and
`burst_scopes`, `--window` and `--poll`, checked against the engine's own events and against
counts made here from the sample capture's packets."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

import isolane
from isolane.cli import main
from support.locations import ROOT, SAMPLE

POLICY = ROOT / "pcaps" / "tenants.yaml"
ALL_REDUCE = ("10.100.0.1", "10.100.0.2", 40000, 5001, 17)


def replay_json(capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, Any]:
    assert main(["replay", "--json", *args]) == 0
    return json.loads(capsys.readouterr().out)  # type: ignore[no-any-return]


def all_reduce_groups(gap_ns: int = 1_000_000) -> list[tuple[int, int]]:
    """The sample's all-reduce datagrams (VNI 100, UDP to 5001) in groups apart by more than
    ``gap_ns``: (first timestamp, packets) of each, found here from the parsed packets."""
    rows = isolane.parse(isolane.read_pcap(SAMPLE))
    mine = rows[(rows["vni"] == 100) & (rows["proto"] == 17) & (rows["dst_port"] == 5001) & (rows["is_fragment"] == 0)]
    times = np.sort(mine["timestamp_ns"])
    starts = np.r_[0, np.flatnonzero(np.diff(times) > gap_ns) + 1]
    sizes = np.diff(np.r_[starts, len(times)])
    return [(int(times[s]), int(n)) for s, n in zip(starts, sizes)]


def test_the_sample_policy_finds_each_all_reduce_burst_with_its_flow(capsys: pytest.CaptureFixture[str]) -> None:
    report = replay_json(capsys, str(SAMPLE), "--policy", str(POLICY))
    collective = [e for e in report["microbursts"] if e["scope"] == "class" and e["class"] == "collective"]
    groups = [g for g in all_reduce_groups() if g[1] >= 16]
    assert len(groups) == 10 and len(collective) == len(groups)
    for event, (first_ns, packets) in zip(collective, groups):
        assert event["tenant"] == "training" and event["view"] == "rate"
        assert first_ns <= event["start_ns"] < event["end_ns"]
        assert 0 < event["packets"] <= packets
        top = event["flows"][0]
        assert (top["src"], top["dst"], top["src_port"], top["dst_port"], top["proto"]) == ALL_REDUCE
        assert top["bytes"] == event["bytes"] and top["error_bytes"] == 0
    scope = next(s for s in report["burst_scopes"] if s["scope"] == "class" and s["class"] == "collective")
    assert scope["bursts"] == 10 and scope["longest_ns"] == max(e["duration_ns"] for e in collective)
    assert scope["time_in_burst_ns"] == sum(e["duration_ns"] for e in collective)
    second = next(p for p in scope["polls"] if p["interval_ns"] == 1_000_000_000)
    assert second["peak_bps"] < scope["peak_window_bps"] / 50, "a 1 s poll averages the bursts away"


def test_the_table_shows_the_bursts_beside_the_polls(capsys: pytest.CaptureFixture[str]) -> None:
    report = replay_json(capsys, str(SAMPLE), "--policy", str(POLICY))
    assert main(["replay", str(SAMPLE), "--policy", str(POLICY)]) == 0
    out = capsys.readouterr().out
    section = out[out.index("\nmicrobursts") :]
    lines = section.strip().splitlines()
    assert lines[0].split()[:4] == ["microbursts", "window", "threshold", "bursts"]
    training = lines.index(next(line for line in lines if line.startswith("training ")))
    collective = lines[training + 1]
    assert collective.startswith("  collective"), "a class under its tenant"
    assert collective.split()[1:4] == ["1ms", "100", "Mbps"] and collective.split()[4] == "10"
    polls = lines.index(next(line for line in lines if line.startswith("what polls showed")))
    assert "1s: peak rate, max queue" in lines[polls] and "1ms: peak rate, max queue" in lines[polls]
    polled = next(line for line in lines[polls:] if line.startswith("  collective")).split()[1:]
    scope = next(s for s in report["burst_scopes"] if s["class"] == "collective")
    views = {p["interval_ns"]: p for p in scope["polls"]}
    assert [float(polled[0]), float(polled[4])] == pytest.approx([views[10**9]["peak_bps"] / 1e6, views[10**6]["peak_bps"] / 1e6], rel=0.01)
    assert polled[1::4] == ["Mbps,", "Mbps,"] and polled[2] == polled[6] == "0"
    assert max(len(line) for line in lines) <= 100, "readable in a 100-column terminal"
    assert "biggest bursts (10 of 10" in section
    assert "10.100.0.1:40000 > 10.100.0.2:5001 udp" in section


def test_window_and_poll_override_the_policy(capsys: pytest.CaptureFixture[str]) -> None:
    report = replay_json(capsys, str(SAMPLE), "--policy", str(POLICY), "--window", "100us", "--poll", "10ms,1ms")
    assert {s["window_ns"] for s in report["burst_scopes"]} == {100_000}
    assert all([p["interval_ns"] for p in s["polls"]] == [10_000_000, 1_000_000] for s in report["burst_scopes"])
    thresholds = {s["scope"] + str(s["tenant"]) + str(s["class"]): s["threshold_bps"] for s in report["burst_scopes"]}
    assert thresholds["classtrainingcollective"] == 100_000_000, "thresholds are the policy's"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--window", "100ms"], "--window '100ms' is not within 1us to 10ms"),
        (["--window", "ten"], "'ten'"),
        (["--poll", "2ms,3ms"], "polling intervals 2ms, 3ms: each must be a multiple of the shortest"),
        (["--poll", "1ms,1ms"], "given twice"),
    ],
)
def test_bad_window_or_poll_exit_2_with_one_line(capsys: pytest.CaptureFixture[str], args: list[str], message: str) -> None:
    assert main(["replay", str(SAMPLE), "--policy", str(POLICY), *args]) == 2
    err = capsys.readouterr().err
    assert err.startswith("isolane: error: ") and message in err and err.count("\n") == 1


def test_a_policy_without_microbursts_still_reports_the_port(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    data = yaml.safe_load(POLICY.read_text())
    for tenant in data["tenants"]:
        tenant.pop("microburst", None)
        for cls in tenant.get("classes", []):
            cls.pop("microburst", None)
    path = tmp_path / "plain.yaml"
    path.write_text(yaml.safe_dump(data))
    report = replay_json(capsys, str(SAMPLE), "--policy", str(path))
    assert [s["scope"] for s in report["burst_scopes"]] == ["port"]
    port = report["burst_scopes"][0]
    assert port["window_ns"] == isolane.policy.DEFAULT_PORT_BURST_WINDOW_NS and port["threshold_bps"] == 100_000_000_000
    assert report["microbursts"] == [] and port["bursts"] == 0
