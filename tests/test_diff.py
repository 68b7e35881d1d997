"""``isolane diff``: two replays compared, and the neighbour behind a victim's worse delay named
(``docs/report.md``, "Comparing two captures")."""

from __future__ import annotations

import json
import subprocess
import sys
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema
import pytest

import isolane
from isolane.commands.diff import CULPRIT_MIN_SCORE, ReportDiff, diff
from isolane.commands.diff_overlap import Bursts, delay_overlap, tenant_bursts
from isolane.report.diff_schema import diff_schema
from support.burst_traffic import Burst, make_trace, policy_for, write_pcap
from support.locations import ROOT

SAMPLES = ROOT / "pcaps" / "scenarios"
POLICY = SAMPLES / "drift.yaml"
MORNING, AFTERNOON = SAMPLES / "drift.morning.pcap", SAMPLES / "drift.afternoon.pcap"
VICTIM, NEIGHBOUR = "inference", "training"
"""docs/scenarios.md: inference is the victim, training the neighbour whose all-reduce steps
the afternoon has more of."""
US = 1_000
PERIOD_NS = 400 * US


@cache
def drift_report(capture: Path) -> isolane.Report:
    return isolane.replay(capture, isolane.Policy.from_file(POLICY), alone=[])


def valid(result: ReportDiff) -> dict[str, Any]:
    data = result.to_json()
    jsonschema.validate(data, diff_schema())
    json.dumps(data)  # plain JSON: no numpy numbers, no tuples as keys
    return data


def tenant_entry(data: dict[str, Any], name: str | None) -> dict[str, Any]:
    return next(t for t in data["tenants"] if t["tenant"] == name)


def class_entry(data: dict[str, Any], tenant: str, name: str) -> dict[str, Any]:
    return next(c for c in tenant_entry(data, tenant)["classes"] if c["class"] == name)


def test_drift_names_the_neighbour_that_bursts_more_for_the_victims_fifth_more_p99() -> None:
    data = valid(diff(drift_report(MORNING), drift_report(AFTERNOON)))
    p99 = class_entry(data, VICTIM, "serving")["delay_ns"]["p99"]
    assert 15 <= p99["percent"] <= 25, p99
    victim = tenant_entry(data, VICTIM)
    assert victim["traffic_unchanged"] and victim["traffic_differences"] == []
    assert victim["packets"]["change"] == 0 and victim["bytes"]["change"] == 0
    neighbour = tenant_entry(data, NEIGHBOUR)
    assert not neighbour["traffic_unchanged"] and neighbour["packets"]["change"] > 0
    # the neighbour that bursts more, as the two reports show it
    most_bursts = max((t for t in data["tenants"] if t["bursts"]["count"]["change"] is not None), key=lambda t: t["bursts"]["count"]["change"])
    assert most_bursts["tenant"] == NEIGHBOUR and most_bursts["bursts"]["count"]["change"] > 0
    (found,) = [v for v in data["victims"] if (v["tenant"], v["class"]) == (VICTIM, "serving")]
    assert found["culprit"] == NEIGHBOUR and found["traffic_unchanged"]
    top = found["neighbours"][0]
    assert top["tenant"] == NEIGHBOUR and top["share_after"] > top["share_before"] and top["score"] >= CULPRIT_MIN_SCORE
    assert f"rose {p99['percent']:.0f}%" in found["summary"] and "with its own traffic unchanged" in found["summary"]
    assert f"{NEIGHBOUR}'s bursts overlap {100 * top['share_after']:.0f}%" in found["summary"]


def test_a_capture_against_itself_shows_no_change_and_no_culprit() -> None:
    data = valid(diff(drift_report(AFTERNOON), drift_report(AFTERNOON)))
    assert data["victims"] == []
    for tenant in data["tenants"]:
        assert tenant["traffic_unchanged"], tenant["traffic_differences"]
        for record in [*changes(tenant), *(r for c in tenant["classes"] for r in changes(c))]:
            assert record["change"] in (0, None) and record["before"] == record["after"], record
    assert "no class's p99 delay rose" in diff(drift_report(AFTERNOON), drift_report(AFTERNOON)).to_text()


def changes(entry: dict[str, Any]) -> list[dict[str, Any]]:
    """Every change record of a tenant's or class's entry."""
    out = [entry[key] for key in ("packets", "bytes", "mean_bps", "peak_bps", "dropped")]
    out += [*entry["drops"].values(), entry["bursts"]["count"], entry["bursts"]["time_ns"], *entry.get("delay_ns", {}).values()]
    return out


def test_swapping_before_and_after_shows_the_p99_down_and_no_culprit() -> None:
    data = valid(diff(drift_report(AFTERNOON), drift_report(MORNING)))
    p99 = class_entry(data, VICTIM, "serving")["delay_ns"]["p99"]
    assert p99["change"] < 0 and -25 <= p99["percent"] <= -10
    assert all(v["culprit"] is None for v in data["victims"])
    assert (VICTIM, "serving") not in [(v["tenant"], v["class"]) for v in data["victims"]]


def test_the_diff_of_saved_json_reports_is_the_diff_of_the_reports() -> None:
    before, after = drift_report(MORNING), drift_report(AFTERNOON)
    saved = [json.loads(json.dumps(r.to_json())) for r in (before, after)]
    assert diff(*saved).to_json() == diff(before, after).to_json()


def test_reports_without_a_timeline_rank_nobody_and_say_so() -> None:
    """Reports saved before the timeline existed: the delays still compare, the bursts and the
    overlaps are unknown, and nobody is blamed."""
    saved = [{**r.to_json(), "timeline": None} for r in (drift_report(MORNING), drift_report(AFTERNOON))]
    result = diff(*saved)
    data = valid(result)
    (found,) = [v for v in data["victims"] if (v["tenant"], v["class"]) == (VICTIM, "serving")]
    assert found["culprit"] is None and all(n["share_before"] is None and n["share_after"] is None for n in found["neighbours"])
    assert tenant_entry(data, NEIGHBOUR)["bursts"]["source"] == {"before": None, "after": None}
    assert "no other tenant whose traffic changed" in found["summary"]


def quiet_time_captures(tmp_path: Path, watched: bool) -> tuple[isolane.Report, isolane.Report]:
    """Three tenants at a 10 Gbit/s shared FIFO, 4 ms: t0, the victim, sends 20 us at 15 Gbit/s
    every 400 us (its own small queue); in the second capture t1 sends 20 us at 20 Gbit/s at
    the same moment in 3 of the 10 periods, and t2, at 40 Gbit/s, 20 us in every period 200 us
    later, when the victim is silent and its queue long gone (t2 drains in 80 us)."""
    victim = [Burst(0, ("10.0.0.1", "11.0.0.1", 5000, 5001, 17), k * PERIOD_NS + 100 * US, 20 * US, 15_000_000_000) for k in range(10)]
    overlapping = [Burst(1, ("10.1.0.1", "11.1.0.1", 6000, 6001, 17), k * PERIOD_NS + 100 * US, 20 * US, 20_000_000_000) for k in (2, 5, 8)]
    quiet = [Burst(2, ("10.2.0.1", "11.2.0.1", 7000, 7001, 17), k * PERIOD_NS + 300 * US, 20 * US, 40_000_000_000) for k in range(10)]
    return shared_fifo_replays(tmp_path, [victim, victim + overlapping + quiet], tenants=3, watched=watched)


def shared_fifo_replays(tmp_path: Path, bursts: list[list[Burst]], tenants: int, watched: bool = False) -> tuple[isolane.Report, isolane.Report]:
    """Two captures of 4 ms, of ``bursts`` only, replayed at a 10 Gbit/s shared FIFO; each tenant
    guaranteed 3 Gbit/s (``watched``: also watched for bursts above 5 Gbit/s)."""
    reports = []
    for name, each in zip(("before", "after"), bursts):
        trace = make_trace(1, tenants, 10 * PERIOD_NS, 0, each)
        write_pcap(trace, tmp_path / f"{name}.pcap")
        port = {"rate": "10Gbps", "buffer": "4MiB", "mode": "shared_fifo"}
        policy = policy_for(trace, "10us" if watched else None, "5Gbps", rate="3Gbps", port=port)
        reports.append(isolane.replay(tmp_path / f"{name}.pcap", isolane.Policy.from_dict(policy), alone=[]))
    return reports[0], reports[1]


@pytest.mark.parametrize("watched", [False, True], ids=["timeline", "events"])
def test_a_neighbour_bursting_while_the_victim_is_silent_is_not_ranked_first(tmp_path: Path, watched: bool) -> None:
    data = valid(diff(*quiet_time_captures(tmp_path, watched)))
    assert tenant_entry(data, "t0")["traffic_unchanged"]
    bursts = {t["tenant"]: t["bursts"]["count"]["after"] for t in data["tenants"] if t["tenant"] in ("t1", "t2")}
    assert bursts["t2"] > bursts["t1"] > 0, bursts  # the quiet-time neighbour bursts more
    assert {t["tenant"]: t["bursts"]["source"]["after"] for t in data["tenants"]}["t2"] == ("events" if watched else "timeline")
    (victim,) = data["victims"]  # t1 and t2 had no delay before: nothing to compare
    assert victim["tenant"] == "t0"
    assert [n["tenant"] for n in victim["neighbours"]] == ["t1", "t2"] and victim["culprit"] == "t1"
    assert victim["neighbours"][1]["share_after"] == 0


def test_a_neighbour_sending_the_same_is_not_blamed_when_the_victim_moves_into_its_bursts(tmp_path: Path) -> None:
    """t1 bursts the same in both captures, 200 us after each of t0's chunks; in the second t0
    also sends during 3 of t1's bursts. t1's overlap of t0's delay rises, but t0 changed, not t1."""
    chunk = [Burst(0, ("10.0.0.1", "11.0.0.1", 5000, 5001, 17), k * PERIOD_NS + 100 * US, 20 * US, 15_000_000_000) for k in range(10)]
    extra = [Burst(0, ("10.0.0.1", "11.0.0.1", 5000, 5001, 17), k * PERIOD_NS + 300 * US, 20 * US, 15_000_000_000) for k in (2, 5, 8)]
    neighbour = [Burst(1, ("10.1.0.1", "11.1.0.1", 6000, 6001, 17), k * PERIOD_NS + 300 * US, 20 * US, 20_000_000_000) for k in range(10)]
    data = valid(diff(*shared_fifo_replays(tmp_path, [chunk + neighbour, chunk + extra + neighbour], tenants=2)))
    assert tenant_entry(data, "t1")["traffic_unchanged"] and not tenant_entry(data, "t0")["traffic_unchanged"]
    victims = {v["tenant"]: v for v in data["victims"]}
    (neighbour_entry,) = victims["t0"]["neighbours"]
    assert neighbour_entry["score"] >= CULPRIT_MIN_SCORE and victims["t0"]["culprit"] is None
    assert "no other tenant whose traffic changed" in victims["t0"]["summary"]
    assert victims["t1"]["culprit"] == "t0"  # t0's new chunks land in t1's bursts: t1 is delayed by what changed


def test_the_same_counts_at_other_times_are_not_the_same_traffic(tmp_path: Path) -> None:
    """The victim's middle period moved by 40 us: the same packets, bytes, span and busiest
    window, but not the same arrivals."""
    flow = ("10.0.0.1", "11.0.0.1", 5000, 5001, 17)
    starts = [[k * PERIOD_NS + 100 * US for k in range(3)], [100 * US, PERIOD_NS + 140 * US, 2 * PERIOD_NS + 100 * US]]
    reports = []
    for name, times in zip(("before", "after"), starts):
        trace = make_trace(1, 1, 3 * PERIOD_NS, 0, [Burst(0, flow, start, 20 * US, 5_000_000_000) for start in times])
        write_pcap(trace, tmp_path / f"{name}.pcap")
        reports.append(isolane.replay(tmp_path / f"{name}.pcap", isolane.Policy.from_dict(policy_for(trace, None)), alone=[]))
    data = valid(diff(*reports))
    entry = tenant_entry(data, "t0")
    assert entry["packets"]["change"] == 0 and entry["bytes"]["change"] == 0 and entry["peak_bps"]["change"] == 0
    assert not entry["traffic_unchanged"] and entry["traffic_differences"] == ["its arrivals over time"]


def test_the_overlap_is_the_delay_in_bins_a_burst_meets_looking_back_the_bins_longest_delay() -> None:
    """Four 10 us bins from t=0; the class's delay per bin: 2 packets x 100 ns (longest 150),
    nothing, 1 x 3,000 ns (longest 3,000), 4 x 50 ns (longest 60). A burst from 12 to 18 us
    meets bin 1 (no delay) and, 3 us back, bin 2 [17 us, 30 us); not bin 3 [29.94 us, 40 us)."""
    timeline = {
        "start_ns": 0,
        "bin_ns": 10 * US,
        "window_ns": 10 * US,
        "tenants": [{"tenant": "n", "peak_bytes": [0, 20_000, 0, 0]}],
        "classes": [
            {"tenant": "v", "cls": 0, "delay_count": [2, 0, 1, 4], "delay_mean_ns": [100.0, None, 3000.0, 50.0], "delay_max_ns": [150, None, 3000, 60]}
        ],
    }
    report = {"timeline": timeline, "burst_scopes": [], "isolation": {"tenants": [{"tenant": "n", "entitled_bps": 10_000_000_000}]}}
    overlap = delay_overlap(report, "v", 0, Bursts("events", None, [(12 * US, 18 * US)]))
    assert (overlap.total_ns, overlap.overlapped_ns) == (3400.0, 3000.0)
    assert delay_overlap(report, "v", 0, Bursts("events", None, [(30 * US - 59, 30 * US - 50)])).overlapped_ns == 3200.0  # bins 2 and 3
    bursts = tenant_bursts(report, "n")  # not watched: bin 1's 20 KB in 10 us is 16 Gbit/s, above its 10 Gbit/s guarantee
    assert (bursts.source, bursts.threshold_bps, bursts.spans) == ("timeline", 10e9, [(10 * US, 20 * US)])
    assert delay_overlap(report, "v", 0, bursts).overlapped_ns == 3000.0


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "isolane.cli", "diff", *args], capture_output=True, text=True, cwd=ROOT)


def test_cli_prints_tables_under_100_columns_and_the_finding() -> None:
    result = run_cli(str(MORNING), str(AFTERNOON), "--policy", str(POLICY))
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert max(map(len, lines)) < 100
    text = " ".join(line.strip() for line in lines)
    assert f"{VICTIM}'s p99 delay (serving) rose 20%" in text and f"{NEIGHBOUR}'s bursts overlap" in text


def test_cli_json_to_a_file_validates(tmp_path: Path) -> None:
    out = tmp_path / "diff.json"
    result = run_cli(str(MORNING), str(AFTERNOON), "--policy", str(POLICY), "--json", "-o", str(out))
    assert result.returncode == 0 and result.stdout == "", result.stderr
    data = json.loads(out.read_text())
    jsonschema.validate(data, diff_schema())
    assert [v["culprit"] for v in data["victims"] if v["tenant"] == VICTIM] == [NEIGHBOUR]


@pytest.mark.parametrize(
    ("before", "policy", "expected"),
    [("missing.pcap", POLICY, "missing.pcap"), (POLICY, POLICY, "not a pcap or pcapng"), (MORNING, SAMPLES / "missing.yaml", "missing.yaml")],
)
def test_cli_bad_input_exits_2_with_one_line(before: Path | str, policy: Path, expected: str) -> None:
    result = run_cli(str(before), str(AFTERNOON), "--policy", str(policy))
    assert result.returncode == 2 and result.stdout == ""
    assert len(result.stderr.splitlines()) == 1 and result.stderr.startswith("isolane: error: ") and expected in result.stderr
