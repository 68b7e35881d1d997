"""`isolane replay`: a capture through a tenant policy, what happened to every tenant.

The report's numbers are checked against counts made here from the engine's rows and the
parsed packets, and, under congestion, against the Python reference of meters, shapers and
the port (tests/support/port_reference.py); every packet read must be accounted for."""

from __future__ import annotations

import ipaddress
import json
import shlex
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

import isolane
from isolane.cli import main
from isolane.commands.replay import replay
from isolane.policy import COUNT_MODES
from isolane.report.findings import wrapped
from isolane.report.model import DROP_STAGES, REASONS, Report
from isolane.report.text import rate_text, time_text
from support.locations import ROOT, SAMPLE
from support.port_reference import process_with_port
from support.qos_reference import frame_bytes

POLICY = ROOT / "pcaps" / "tenants.yaml"
OUTCOME_STAGE = {f"drop_{stage}": stage for stage in DROP_STAGES}


def replay_json(capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, Any]:
    assert main(["replay", "--json", *args]) == 0
    return json.loads(capsys.readouterr().out)  # type: ignore[no-any-return]


def congested_policy(tmp_path: Path) -> Path:
    """The sample's policy on a 100Mbps port with a 20KiB buffer, its contracts scaled down
    so that the sample's traffic is coloured yellow and red, re-marked, dropped by meters,
    shapers and the port, and still in a shaper at the capture's end."""
    data = yaml.safe_load(POLICY.read_text())
    data["port"] = {"rate": "100Mbps", "buffer": "20KiB"}
    training, inference, evaluation = data["tenants"]
    training.update(rate="40Mbps", ceil="50Mbps", burst="16KiB")
    training["meter"].update(cir="20Mbps", pir="40Mbps", cbs="20KiB", pbs="40KiB")
    training["classes"][1].update(rate="30Mbps", burst="16KiB")
    training["classes"][2]["shaper"] = {"rate": "5Mbps", "queue": "16KiB"}
    inference.update(rate="10Mbps", burst="16KiB", shaper={"rate": "1Mbps", "burst": "1KiB", "queue": "16KiB", "max_delay": "10s"})
    inference["classes"][0].update(rate="2Mbps", meter={"kind": "srtcm", "cir": "2Mbps", "color_aware": True})
    evaluation.update(rate="5Mbps", burst="16KiB")
    evaluation["classes"][0]["shaper"] = {"rate": "1Mbps", "burst": "64B", "queue": "16KiB", "max_delay": "10s"}
    path = tmp_path / "congested.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def tenant_by_vni_and_source(rows: np.ndarray, policy: isolane.Policy) -> list[str | None]:
    """Each packet's tenant as the policy describes it: tunnelled packets by VNI, the others by
    source prefix."""
    assert not any(t.vlans for t in policy.tenants), "this test knows VNIs and sources only"
    owners: list[str | None] = []
    for row, src in zip(rows, isolane.format_addresses(rows["src"])):
        if row["tunnel"] != isolane.Tunnel.NONE:
            owners.append(next((t.name for t in policy.tenants if row["vni"] in t.vnis), None))
        elif src:
            address = ipaddress.ip_address(src)
            owners.append(next((t.name for t in policy.tenants if any(address in net for net in t.sources)), None))
        else:  # not IP: no source
            owners.append(None)
    return owners


def assert_adds_up(report: dict[str, Any], packets_read: int) -> None:
    """Every packet read once in the report: tenants, classes, fates, colours, drop reasons."""
    assert report["packets"] == packets_read == sum(report["reasons"].values())
    assert report["total"]["packets"] == sum(t["packets"] for t in report["tenants"]) == packets_read
    for entry in [report["total"]] + report["tenants"] + [c for t in report["tenants"] for c in t["classes"]]:
        assert entry["passed"] + entry["remarked"] + entry["dropped"] + entry["in_flight"] == entry["packets"]
        assert sum(entry["colors"].values()) + entry["drops"]["classifier"] == entry["packets"]
        assert sum(entry["drops"].values()) == entry["dropped"]
        assert sum(entry["classifier_drops"].values()) == entry["drops"]["classifier"]
    for tenant in report["tenants"]:
        for key in ("packets", "bytes", "passed", "remarked", "dropped", "in_flight"):
            assert tenant[key] == sum(c[key] for c in tenant["classes"])


def test_readme_first_line_runs_in_the_project_root() -> None:
    """The README's first command, as a user types it after `pip install .`: the incident of its
    sample is said at a glance, in the first lines, within 100 columns."""
    first_line = (ROOT / "README.md").read_text().split("```bash\n", 1)[1].splitlines()[0]
    command = shlex.split(first_line.split("&&", 1)[1].split("#", 1)[0])
    assert command[:2] == ["isolane", "replay"]
    result = subprocess.run([sys.executable, "-m", "isolane.cli", *command[1:]], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    lines = result.stdout.splitlines()
    assert max(len(line) for line in lines) <= 100, "the table fits a terminal of 100 columns"
    report = replay(ROOT / command[2], isolane.Policy.from_file(ROOT / command[command.index("--policy") + 1])).to_json()
    assert lines[0] == f"{command[2]}: pcap, {report['packets']:,} packets over 20 ms"
    training = next(t for t in report["tenants"] if t["tenant"] == "training")
    assert 0.01 < training["dropped"] / training["packets"] < 0.03, "the sample loses about 2% of training's packets"
    assert lines[1].startswith(f"* training lost {training['dropped']:,} of {training['packets']:,} packets")
    assert "its microbursts account for" in lines[1] and "polled every second" in " ".join(lines[1:3])
    reasons = next(i for i, line in enumerate(lines) if line.startswith("verdict reasons: "))
    assert lines[reasons + 2].startswith("isolation"), "isolation follows the tenants"


def test_replay_of_the_sample_matches_the_packets_and_the_engines_rows(capsys: pytest.CaptureFixture[str]) -> None:
    report = replay_json(capsys, str(SAMPLE), "--policy", str(POLICY))
    policy = isolane.Policy.from_file(POLICY)
    batch = isolane.read_pcap(SAMPLE)
    parsed = isolane.parse(batch)
    rows = isolane.Engine(policy).process(parsed)
    assert_adds_up(report, len(batch))
    assert (report["count"], report["port"], report["format"]) == ("wire", True, "pcap")

    # Tenants as the policy's VNIs and sources say, then everything per tenant from the rows.
    owners = np.array(tenant_by_vni_and_source(parsed, policy), dtype=object)
    names = np.array([None, *policy.tenant_names], dtype=object)[rows["tenant"] + 1]
    assert (owners == names).all()
    sizes = np.array([frame_bytes(COUNT_MODES[policy.count], int(r["wire_len"]), int(r["inner_len"])) for r in parsed])
    tenants = {t["tenant"]: t for t in report["tenants"]}
    assert list(tenants) == [*policy.tenant_names, None]
    for name, tenant in tenants.items():
        mine = owners == name
        outcomes = Counter(isolane.Outcome(o).name.lower() for o in rows["outcome"][mine])
        assert tenant["packets"] == mine.sum()
        assert tenant["bytes"] == sizes[mine].sum()
        assert tenant["colors"] == {c.name.lower(): int((rows["color"][mine] == c).sum()) for c in isolane.Color if c != isolane.Color.NONE}
        assert (tenant["passed"], tenant["remarked"]) == (outcomes["pass"], outcomes["remarked"])
        assert tenant["drops"] == {stage: outcomes[f"drop_{stage}"] for stage in DROP_STAGES}
        dropped = rows[mine & (rows["outcome"] == isolane.Outcome.DROP_CLASSIFIER)]
        assert tenant["classifier_drops"] == {r: int((dropped["reason"] == isolane.Reason[r.upper()]).sum()) for r in REASONS}
        for cls in tenant["classes"]:
            in_class = mine & (rows["cls"] == (-1 if cls["cls"] is None else cls["cls"]))
            assert cls["packets"] == in_class.sum(), (name, cls["class"])
    assert report["reasons"] == {r: int((rows["reason"] == isolane.Reason[r.upper()]).sum()) for r in REASONS}
    assert report["reasons"]["unknown_tenant"] == tenants[None]["packets"] > 0


@pytest.mark.parametrize("drain", [True, False], ids=["drained", "no_drain"])
def test_replay_under_congestion_matches_the_reference_port(tmp_path: Path, capsys: pytest.CaptureFixture[str], drain: bool) -> None:
    """Meters, shapers and the port recomputed in plain Python: every class's fates, bytes,
    packets in flight at the end (none once the port is drained, as by default) and
    queueing delays."""
    policy_path = congested_policy(tmp_path)
    options = [] if drain else ["--no-drain"]
    report = replay_json(capsys, str(SAMPLE), "--policy", str(policy_path), "--batch-size", "300", *options)
    policy = isolane.Policy.from_file(policy_path)
    parsed = isolane.parse(isolane.read_pcap(SAMPLE))
    verdicts = isolane.Engine(policy).classify(parsed)
    batch_ends = [*range(300, len(parsed), 300), len(parsed)]
    _, expected = process_with_port(policy.compile_qos(), parsed, verdicts, batch_ends, drain=drain)
    assert_adds_up(report, len(parsed))
    seen = 0
    for tenant in report["tenants"]:
        for cls in tenant["classes"]:
            want = expected.pop((tenant["tenant"], cls["cls"]), None)
            if want is None:
                assert cls["packets"] == 0
                continue
            fates = {OUTCOME_STAGE.get(name, name): packets for name, (packets, _) in want["outcomes"].items()}
            got = {"pass": cls["passed"], "remarked": cls["remarked"], **cls["drops"]}
            assert {k: v for k, v in got.items() if v} == fates, (tenant["tenant"], cls["class"])
            assert (cls["packets"], cls["bytes"], cls["in_flight"]) == (want["packets"], want["bytes"], want["in_flight"])
            if cls["cls"] is not None:
                assert cls["delay_ns"] == want["delay_ns"], (tenant["tenant"], cls["class"])
            seen += cls["packets"]
    assert expected == {} and seen == len(parsed)
    total = report["total"]
    assert all(total["colors"].values()) and total["remarked"] and bool(total["in_flight"]) != drain
    assert all(total["drops"][stage] for stage in ("classifier", "meter", "shaper_bytes", "port_queue"))


def test_replay_table_shows_the_json_numbers(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    policy_path = str(congested_policy(tmp_path))
    report = replay_json(capsys, str(SAMPLE), "--policy", policy_path)
    assert main(["replay", str(SAMPLE), "--policy", policy_path]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert max(len(line) for line in lines) <= 100
    table = next(i for i, line in enumerate(lines) if line.startswith("tenant / class"))
    assert lines[1 : table - 1] == [line for line in wrapped(report["findings"])], "the findings come first"
    header = lines[table].split("  ")
    assert [cell.strip() for cell in header if cell.strip()] == [
        "tenant / class", "packets", "mean rate", "peak rate", "dropped", "drop %", "delay p99", "held p99"
    ]
    last = next(i for i, line in enumerate(lines) if line.startswith("verdict reasons: "))
    rows = {line.split("  ")[0].strip(): line for line in lines[table + 1 : last] if not line.startswith(("peak rate:", "drops by stage"))}
    entries = {t["tenant"] or "(no tenant)": t for t in report["tenants"]} | {"total": report["total"]}
    for label, entry in entries.items():
        cells = [cell.strip() for cell in rows[label][len(label) :].split("  ") if cell.strip()]
        assert int(cells[0].replace(",", "")) == entry["packets"], label
        if label != "total":
            assert cells[1:3] == [rate_text(entry["mean_bps"]), rate_text(entry["peak_bps"])], label
        assert f"{entry['dropped']:,}" in cells, label
        share = f"{100 * entry['dropped'] / entry['packets']:.3g}%" if entry["dropped"] else "-"
        assert share in cells, label
    for tenant in report["tenants"]:
        first = next(i for i, line in enumerate(lines) if line.startswith((tenant["tenant"] or "(no tenant)") + " "))
        for line, cls in zip(lines[first + 1 :], tenant["classes"] if len(tenant["classes"]) > 1 else []):
            assert line.startswith("  " + (cls["class"] or "(no class)")), line
            assert line.endswith(time_text(cls["hold_ns"]["p99"]) if cls["hold_ns"]["count"] else "-"), line
    stages = lines.index("drops by stage:")
    for tenant in report["tenants"]:
        if tenant["dropped"]:
            parts = ", ".join(f"{stage} {n:,}" for stage, n in tenant["drops"].items() if n)
            assert any(line.startswith(f"  {tenant['tenant'] or '(no tenant)'}: {parts.split(',')[0]}") for line in lines[stages:last]), tenant["tenant"]
    assert lines[last] == "verdict reasons: " + ", ".join(f"{r} {n:,}" for r, n in report["reasons"].items() if n)


def test_replay_in_small_batches_gives_the_same_report(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    policy_path = str(congested_policy(tmp_path))
    whole = replay_json(capsys, str(SAMPLE), "--policy", policy_path)
    assert replay_json(capsys, str(SAMPLE), "--policy", policy_path, "--batch-size", "7") == whole


def test_replay_on_two_threads_gives_the_same_report(capsys: pytest.CaptureFixture[str]) -> None:
    one = replay_json(capsys, str(SAMPLE), "--policy", str(POLICY), "--batch-size", "500")
    assert replay_json(capsys, str(SAMPLE), "--policy", str(POLICY), "--batch-size", "500", "--threads", "2") == one
    assert one["port"] is True


def test_replay_vxlan_port_option(capsys: pytest.CaptureFixture[str]) -> None:
    """With VXLAN expected on another port, no packet has a VNI: only the inference tenant's
    source prefix claims packets."""
    report = replay_json(capsys, str(SAMPLE), "--policy", str(POLICY), "--vxlan-port", "8472")
    policy = isolane.Policy.from_file(POLICY)
    owners = Counter(tenant_by_vni_and_source(isolane.parse(isolane.read_pcap(SAMPLE), vxlan_ports=[8472]), policy))
    assert {t["tenant"]: t["packets"] for t in report["tenants"]} == {name: owners[name] for name in [*policy.tenant_names, None]}
    assert owners["inference"] > 0 and owners["training"] == 0


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "isolane.cli", *args], capture_output=True, text=True)


def assert_clear_error(result: subprocess.CompletedProcess[str], *expected: str) -> None:
    assert result.returncode == 2, result.stderr
    assert result.stdout == ""
    assert result.stderr.startswith("isolane: error: ") and "Traceback" not in result.stderr
    for text in expected:
        assert text in result.stderr


def test_missing_files_are_clear_errors(tmp_path: Path) -> None:
    missing = str(tmp_path / "nowhere.pcap")
    assert_clear_error(run_cli("replay", missing, "--policy", str(POLICY)), "No such file", missing)
    assert_clear_error(run_cli("replay", str(SAMPLE), "--policy", str(tmp_path / "nowhere.yaml")), "No such file", "nowhere.yaml")


def test_bad_policy_is_a_clear_error_naming_the_place(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(POLICY.read_text().replace("dst: 10.100.0.2\n", "dst: 10.100.0.0/33\n", 1))
    assert_clear_error(run_cli("replay", str(SAMPLE), "--policy", str(bad)), str(bad), "tenants[0].rules[5].dst", "10.100.0.0/33")


def test_corrupt_capture_is_a_clear_error_with_its_offset(tmp_path: Path) -> None:
    broken = tmp_path / "broken.pcap"
    content = bytearray(SAMPLE.read_bytes()[:5000])
    content[4954 + 8 : 4954 + 12] = (1 << 30).to_bytes(4, "little")  # packet 34's captured length: 1 GiB
    broken.write_bytes(bytes(content))
    assert_clear_error(run_cli("replay", str(broken), "--policy", str(POLICY)), str(broken), "byte offset 4954, packet 34")


def test_a_capture_cut_mid_record_is_replayed_up_to_the_cut_with_a_warning(tmp_path: Path) -> None:
    """As tshark and capinfos do: the complete packets, a warning, status 0."""
    cut = tmp_path / "cut.pcap"
    cut.write_bytes(SAMPLE.read_bytes()[:5000])
    result = run_cli("replay", str(cut), "--policy", str(POLICY), "--json")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["packets"] == 33, "the 33 packets before the cut"
    warnings = [line for line in result.stderr.splitlines() if line.startswith("isolane: warning: ")]
    assert any(str(cut) in line and "packet 34 (byte offset 4,954" in line for line in warnings), result.stderr



def test_policy_warnings_are_the_clis(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = yaml.safe_load(POLICY.read_text())
    data["tenants"][0]["rules"].append(dict(data["tenants"][0]["rules"][0], name="shadowed"))
    policy_path = tmp_path / "shadowed.yaml"
    policy_path.write_text(yaml.safe_dump(data))
    assert main(["replay", str(SAMPLE), "--policy", str(policy_path)]) == 0
    err = capsys.readouterr().err.splitlines()
    last = len(data["tenants"][0]["rules"]) - 1
    assert err[0].startswith(f"isolane: warning: {policy_path}: tenants[0].rules[{last}] ('shadowed') is never matched")
    assert [line for line in err[1:] if "tenants[" in line] == [], "the policy's warning once, before the capture's"


def test_a_report_that_does_not_add_up_fails_loudly(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """If the engine ever lost a packet, the command says so and fails (status 1)."""

    def one_packet_lost(*args: Any, **kwargs: Any) -> Report:
        report = replay(*args, **kwargs)
        report.tenants[0].classes[0].counts.passed -= 1
        report.packets += 1
        return report

    monkeypatch.setattr("isolane.cli.replay", one_packet_lost)
    assert main(["replay", str(SAMPLE), "--policy", str(POLICY)]) == 1
    problems = [line for line in capsys.readouterr().err.splitlines() if line.startswith("isolane: error: ")]
    assert problems == [
        "isolane: error: the report does not add up (a bug in isolane): the tenants' packets add up to 1,696, not to the 1,697 read",
        "isolane: error: the report does not add up (a bug in isolane): 1,696 packets have a verdict reason, not the 1,697 read",
        "isolane: error: the report does not add up (a bug in isolane): training / control: 423 packets in, but 422 passed, re-marked, dropped or in flight",
    ]


def test_replay_reports_the_profile_switches_of_a_tenant_with_a_burst_profile(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The sample's training tenant watched at 1 ms (its all-reduce bursts: docs/bursts.md) with
    a burst profile: the report lists its switches and its packets under each profile."""
    data = yaml.safe_load(POLICY.read_text())
    training = data["tenants"][0]
    training["microburst"] = {"window": "1ms", "threshold": "100Mbps"}
    training["on_burst"] = {"shaper": {"rate": "50Mbps", "queue": "64KiB"}, "hold": "100us"}
    path = tmp_path / "profiles.yaml"
    path.write_text(yaml.safe_dump(data))
    report = replay_json(capsys, str(SAMPLE), "--policy", str(path))
    rate_bursts = [b for b in report["microbursts"] if b["scope"] == "tenant" and b["tenant"] == "training" and b["view"] == "rate"]
    starts = [s for s in report["profile_switches"] if s["cause"] == "burst_started"]
    assert rate_bursts and [s["time_ns"] for s in starts] == [b["start_ns"] for b in rate_bursts], "each rate burst switches it"
    ends = [s for s in report["profile_switches"] if s["cause"] == "burst_ended"]
    assert [s["time_ns"] for s in ends] == [b["end_ns"] + 100_000 for b in rate_bursts]
    (profiles,) = report["profiles"]
    training_packets = next(t for t in report["tenants"] if t["tenant"] == "training")["packets"]
    assert profiles["tenant"] == "training" and profiles["switches"] == 2 * len(rate_bursts)
    assert profiles["packets"]["burst"] > 0 and sum(profiles["packets"].values()) <= training_packets
    assert main(["replay", str(SAMPLE), "--policy", str(path)]) == 0
    table = capsys.readouterr().out
    assert "adaptive profiles" in table and "burst started" in table
    assert max(len(line) for line in table.splitlines()[table.splitlines().index("") :]) <= 100
