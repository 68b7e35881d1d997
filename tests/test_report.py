"""The replay report (docs/report.md): its JSON against its schema, its timeline against
counts made here from the engine's rows and the packets, rates, shaper holds, the VNIs no
tenant claims, and the warnings."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import numpy as np
import pytest
import yaml

import isolane
from isolane.commands.replay import replay
from isolane.policy import COUNT_MODES
from isolane.report.schema import report_schema
from isolane.report.text import time_text
from support.locations import ROOT, SAMPLE
from support.qos_reference import frame_bytes

POLICY = ROOT / "pcaps" / "tenants.yaml"


def policy_with(tmp_path: Path, change: Any) -> isolane.Policy:
    data = yaml.safe_load(POLICY.read_text())
    change(data)
    path = tmp_path / "policy.yaml"
    path.write_text(yaml.safe_dump(data))
    return isolane.Policy.from_file(path)


def engine_rows(policy: isolane.Policy) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The sample's parsed records, the engine's rows for them, and each packet's bytes as the
    policy counts them."""
    parsed = isolane.parse(isolane.read_pcap(SAMPLE))
    rows = isolane.Engine(policy).process(parsed)
    sizes = np.array([frame_bytes(COUNT_MODES[policy.count], int(r["wire_len"]), int(r["inner_len"])) for r in parsed])
    return parsed, rows, sizes


def test_the_json_follows_its_schema_with_and_without_a_port(tmp_path: Path) -> None:
    validator = jsonschema.Draft202012Validator(report_schema())
    validator.check_schema(report_schema())
    without_port = policy_with(tmp_path, lambda data: data.pop("port"))
    for policy, drain in [(isolane.Policy.from_file(POLICY), True), (without_port, False)]:
        report = replay(SAMPLE, policy, drain=drain).to_json()
        validator.validate(report)
        assert (report["timeline"]["classes"] == []) == (policy.port is None), "delays over time only with a port"
    broken = replay(SAMPLE, without_port).to_json()
    broken["tenants"][0]["colors"].pop("red")
    with pytest.raises(jsonschema.ValidationError):
        validator.validate(broken)


def test_the_timeline_holds_each_tenants_bytes_per_bin_and_its_busiest_window() -> None:
    policy = isolane.Policy.from_file(POLICY)
    report = replay(SAMPLE, policy).to_json()
    timeline = report["timeline"]
    parsed, rows, sizes = engine_rows(policy)
    start, bin_ns, window = timeline["start_ns"], timeline["bin_ns"], timeline["window_ns"]
    times = np.maximum.accumulate(parsed["timestamp_ns"])  # the engine reads an earlier time as the latest
    assert start == times[0] and bin_ns % window == 0 and timeline["bins"] <= 512
    names = np.array([None, *policy.tenant_names], dtype=object)[rows["tenant"] + 1]
    by_name = {t["tenant"]: t for t in timeline["tenants"]}
    for tenant in report["tenants"]:
        mine = names == tenant["tenant"]
        bins = (times[mine] - start) // bin_ns
        expected = np.bincount(bins, weights=sizes[mine], minlength=timeline["bins"]).astype(int)
        series = by_name[tenant["tenant"]]
        assert series["bytes"] == expected.tolist(), tenant["tenant"]
        assert sum(series["packets"]) == tenant["packets"] and sum(series["dropped"]) == tenant["dropped"]
        mine_times, mine_sizes = times[mine], sizes[mine]
        in_window = [int(mine_sizes[(mine_times > t - window) & (mine_times <= t)].sum()) for t in mine_times.tolist()]
        peaks = [0] * timeline["bins"]
        for bin_index, total in zip(bins.tolist(), in_window):
            peaks[bin_index] = max(peaks[bin_index], total)
        assert series["peak_bytes"] == peaks, tenant["tenant"]
        assert tenant["peak_bps"] == max(peaks) * 8e9 / window
        assert tenant["mean_bps"] == pytest.approx(tenant["bytes"] * 8e9 / report["duration_ns"])
        assert (tenant["first_ns"], tenant["last_ns"]) == (int(times[mine][0]), int(times[mine][-1]))
    for series in timeline["classes"]:
        cls = next(c for t in report["tenants"] if t["tenant"] == series["tenant"] for c in t["classes"] if c["cls"] == series["cls"])
        assert sum(series["delay_count"]) == cls["delay_ns"]["count"]
        assert max(m for m in series["delay_max_ns"] if m is not None) == cls["delay_ns"]["max"]


def test_a_shaped_class_reports_how_long_its_packets_were_held(tmp_path: Path) -> None:
    """The issue's case: a class shaped to 100 kbit/s showed 0 ns of delay while its packets
    waited about a second."""

    def shape_control(data: dict[str, Any]) -> None:
        data["tenants"][0]["classes"][0]["shaper"] = {"rate": "100kbps", "queue": "1MiB", "max_delay": "30s"}

    policy = policy_with(tmp_path, shape_control)
    report = replay(SAMPLE, policy)
    control = report.tenant("training").classes[0]
    _, rows, _ = engine_rows(policy)
    parsed = isolane.parse(isolane.read_pcap(SAMPLE))
    times = np.maximum.accumulate(parsed["timestamp_ns"])
    mine = (rows["tenant"] == 0) & (rows["cls"] == 0) & (rows["release_ns"] >= 0)
    held = np.sort(rows["release_ns"][mine] - times[mine])
    assert control.hold_ns["count"] == len(held) > 100
    assert control.hold_ns["max"] == held[-1] > 100_000_000, "held for more than 100 ms"
    p99 = held[int(np.ceil(0.99 * len(held))) - 1]
    assert abs(control.hold_ns["p99"] - p99) <= p99 / 128
    text = isolane.format_report(report)
    header = next(line for line in text.splitlines() if line.startswith("tenant / class"))
    assert header.endswith("held p99")
    assert f"* training / control: its shapers held packets {time_text(control.hold_ns['p99'])} at p99" in text


def test_the_vnis_no_tenant_claims_are_named(tmp_path: Path) -> None:
    policy = policy_with(tmp_path, lambda data: data["tenants"].pop(2))  # evaluation, VNI 300
    report = replay(SAMPLE, policy)
    parsed = isolane.parse(isolane.read_pcap(SAMPLE))
    assert report.unclaimed_vnis == {300: int((parsed["vni"] == 300).sum())}
    text = isolane.format_report(report)
    assert f"VNIs no tenant claims: 300 ({report.unclaimed_vnis[300]:,} packets)" in text
    assert f"{report.unclaimed_vnis[300]:,} of them in 1 VNI that no tenant claims" in text
    assert replay(SAMPLE, isolane.Policy.from_file(POLICY)).unclaimed_vnis == {}


def test_frames_larger_than_the_policy_expects_are_a_warning(tmp_path: Path) -> None:
    policy = policy_with(tmp_path, lambda data: data.update(largest_frame="1200B"))
    report = replay(SAMPLE, policy)
    oversized = int((isolane.read_pcap(SAMPLE).wire_lengths > 1200).sum())
    assert oversized > 0
    assert [w for w in report.warnings if "largest_frame" in w] == [
        f"{oversized:,} frames are larger than the policy's largest_frame (1,200 B; GSO or BIG TCP captures?): "
        "meters whose burst is smaller meter them red; raise largest_frame if the network carries such frames"
    ]
    assert not [w for w in replay(SAMPLE, isolane.Policy.from_file(POLICY)).warnings if "largest_frame" in w]


def test_the_shipped_schema_file_is_the_one_isolane_prints() -> None:
    """docs/report-v1.schema.json, which the schema's $id names, is `isolane schema --report`."""
    shipped = json.loads((ROOT / "docs" / "report-v1.schema.json").read_text())
    assert shipped == report_schema()
    assert shipped["$id"].endswith("/docs/report-v1.schema.json")


def test_the_json_lists_the_biggest_bursts_and_the_scopes_still_count_them_all(monkeypatch: pytest.MonkeyPatch) -> None:
    """A long capture's report stays bounded: the JSON lists the biggest bursts, in the order
    they ended; the scopes' summaries (counts, longest, biggest, drops in bursts) cover all."""
    sample = ROOT / "pcaps" / "scenarios" / "invisible-loss"
    policy = isolane.Policy.from_file(sample.with_suffix(".yaml"))
    whole = replay(sample.with_suffix(".pcap"), policy).to_json()
    assert len(whole["microbursts"]) > 20
    monkeypatch.setattr("isolane.commands.replay_bursts.LISTED_IN_JSON", 5)
    bounded = replay(sample.with_suffix(".pcap"), policy).to_json()
    biggest = sorted(whole["microbursts"], key=lambda e: -e["bytes"])[:5]
    assert bounded["microbursts"] == sorted(biggest, key=lambda e: e["id"])
    assert bounded["burst_scopes"] == whole["burst_scopes"]
    every = sum(s["bursts"] + s["queue_bursts"] for s in whole["burst_scopes"])
    assert every == len(whole["microbursts"])
    assert f"biggest bursts (5 of {every:,};" in isolane.format_report(replay(sample.with_suffix(".pcap"), policy))
