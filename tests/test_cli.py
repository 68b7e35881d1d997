"""`isolane inspect`: the first thing a network engineer runs on a capture."""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml  # type: ignore[import-untyped]

import isolane
from isolane.cli import main
from support.locations import ROOT, SAMPLE
from support.signals import interruptible


def test_inspect_table_on_the_sample(capsys) -> None:  # type: ignore[no-untyped-def]
    assert main(["inspect", str(SAMPLE)]) == 0
    out = capsys.readouterr().out
    assert "1,696 packets" in out
    for tenant in ("vxlan vni 100", "vxlan vni 200", "vxlan vni 300", "untunnelled"):
        assert tenant in out


def test_inspect_json_adds_up_to_the_capture(capsys) -> None:  # type: ignore[no-untyped-def]
    assert main(["inspect", "--json", str(SAMPLE)]) == 0
    report = json.loads(capsys.readouterr().out)
    batch = isolane.read_pcap(SAMPLE)
    rows = isolane.parse(batch)
    groups = {(g["tunnel"], g["vni"]): g for g in report["groups"]}
    assert report["packets"] == len(batch) == sum(g["packets"] for g in groups.values())
    assert report["bytes"] == int(batch.wire_lengths.sum())
    vni100 = rows["vni"] == 100
    group = groups[("vxlan", 100)]
    assert group["packets"] == int(vni100.sum())
    assert group["bytes"] == int(rows["wire_len"][vni100].sum())
    assert group["first_ns"] == int(batch.timestamps_ns[vni100].min())
    assert group["last_ns"] == int(batch.timestamps_ns[vni100].max())
    assert group["protocols"]["tcp"] == int(((rows["proto"] == 6) & vni100).sum())
    assert sum(g["statuses"].get("ok", 0) for g in groups.values()) == int((rows["status"] == 0).sum())


def test_inspect_in_small_batches_gives_the_same_report(capsys) -> None:  # type: ignore[no-untyped-def]
    main(["inspect", "--json", str(SAMPLE)])
    whole = json.loads(capsys.readouterr().out)
    main(["inspect", "--json", "--batch-size", "7", str(SAMPLE)])
    assert json.loads(capsys.readouterr().out) == whole


def test_inspect_vxlan_port_option(real_pcaps: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    capture = str(real_pcaps / "tcpdump__vxlan_port_8472.pcap")
    main(["inspect", "--json", capture])
    assert [g["tunnel"] for g in json.loads(capsys.readouterr().out)["groups"]] == ["none"]
    main(["inspect", "--json", "--vxlan-port", "8472", capture])
    groups = json.loads(capsys.readouterr().out)["groups"]
    assert [(g["tunnel"], g["vni"]) for g in groups] == [("vxlan", 100)]


def test_inspect_bad_file_is_a_clear_error_not_a_traceback(tmp_path: Path) -> None:
    bad = tmp_path / "broken.pcap"
    content = bytearray(SAMPLE.read_bytes()[:5000])
    content[4954 + 8 : 4954 + 12] = (1 << 30).to_bytes(4, "little")  # packet 34's captured length: 1 GiB
    bad.write_bytes(bytes(content))
    result = subprocess.run([sys.executable, "-m", "isolane.cli", "inspect", str(bad)], capture_output=True, text=True)
    assert result.returncode == 2
    assert result.stderr.startswith("isolane: error: ") and "byte offset 4954, packet 34" in result.stderr
    assert "Traceback" not in result.stderr


def test_format_addresses() -> None:
    rows = isolane.parse(isolane.read_pcap(SAMPLE))
    texts = isolane.format_addresses(rows["outer_src"][:1])
    assert texts == ["192.0.2.1"]
    assert isolane.format_addresses(np.zeros((1, 16), np.uint8)) == [""]


# ---------------------------------------------------------------------------------------------
# Errors, Ctrl-C, --version, check, help: through a subprocess, as a user meets them

POLICY = ROOT / "pcaps" / "tenants.yaml"


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "isolane.cli", *args], capture_output=True, text=True)


def run_patched(patch: str, *args: str) -> subprocess.CompletedProcess[str]:
    """``isolane ARGS`` in a subprocess whose ``isolane.cli.summarize`` (what inspect runs) is
    ``patch``, a lambda taking anything."""
    script = f"import os, signal, sys, time\nimport isolane.cli as cli\ncli.summarize = {patch}\nsys.exit(cli.main(sys.argv[1:]))"
    return subprocess.run([sys.executable, "-c", script, *args], capture_output=True, text=True, timeout=60, preexec_fn=interruptible)


def assert_one_line_error(result: subprocess.CompletedProcess[str], *expected: str) -> None:
    assert result.returncode == 2, result.stderr
    assert result.stdout == ""
    assert result.stderr.startswith("isolane: error: ") and result.stderr.count("\n") == 1 and "Traceback" not in result.stderr, result.stderr
    for text in expected:
        assert text in result.stderr


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["inspect", str(SAMPLE), "--batch-size", "-5"], "argument --batch-size: '-5' is not at least 1"),
        (["replay", str(SAMPLE), "--policy", str(POLICY), "--batch-size", str(2**70)], "batch_size: int too big to convert"),
        (["replay", str(SAMPLE), "--policy", str(POLICY), "--batch-size", "0"], "argument --batch-size: '0' is not at least 1"),
        (["replay", str(SAMPLE), "--policy", str(POLICY), "--threads", "0"], "threads must be at least 1"),
        (["replay", str(SAMPLE), "--policy", str(POLICY), "--threads", "two"], "argument --threads: invalid int value: 'two' (see isolane replay --help)"),
        (["replay", str(SAMPLE)], "the following arguments are required: --policy"),
        (["inspect", str(SAMPLE), "--vxlan-port", "70000"], "70000 is not a UDP port"),
        (["inspect", "/no/such/capture.pcap"], "No such file"),
        (["frobnicate"], "invalid choice: 'frobnicate'"),
        ([], "the following arguments are required: COMMAND"),
    ],
)
def test_every_bad_option_or_input_is_one_line_and_status_2(args: list[str], expected: str) -> None:
    assert_one_line_error(run_cli(*args), expected)


@pytest.mark.parametrize(
    ("bug", "last_line"),
    [
        ("OverflowError('math range error')", "OverflowError: math range error"),
        ("TypeError('a bug')", "TypeError: a bug"),
        ("KeyError('a bug')", "KeyError: 'a bug'"),
    ],
)
def test_a_bug_keeps_its_traceback(bug: str, last_line: str) -> None:
    """Only what says it is bad input is turned into a one-line error: an OverflowError that is
    no argument the core could not convert, or any other exception, is a bug and shows where."""
    result = run_patched(f"lambda *a, **k: (_ for _ in ()).throw({bug})", "inspect", str(SAMPLE))
    assert result.returncode == 1
    assert result.stderr.startswith("Traceback") and result.stderr.rstrip().endswith(last_line)


def test_ctrl_c_is_status_130_and_one_line() -> None:
    """A real SIGINT, sent by the command to itself while it works (deterministic: no race with
    a timer)."""
    result = run_patched("lambda *a, **k: (os.kill(os.getpid(), signal.SIGINT), time.sleep(30))", "inspect", str(SAMPLE))
    assert (result.returncode, result.stdout, result.stderr) == (130, "", "isolane: interrupted\n")


def test_version_is_the_package_metadata() -> None:
    result = run_cli("--version")
    assert (result.returncode, result.stdout) == (0, f"isolane {importlib.metadata.version('isolane')}\n")
    assert isolane.__version__ == importlib.metadata.version("isolane")


def test_check_validates_a_policy_without_a_capture(tmp_path: Path) -> None:
    policy = isolane.Policy.from_file(POLICY)
    rules = sum(len(t.rules) for t in policy.tenants)
    result = run_cli("check", str(POLICY))
    assert (result.returncode, result.stdout, result.stderr) == (0, f"{POLICY}: ok, 3 tenants, {rules} rules\n", "")
    data = yaml.safe_load(POLICY.read_text())
    data["tenants"][1]["rules"].append({"name": "again", "src": "10.200.0.0/24", "action": "allow"})
    data["tenants"][2]["rules"][0]["dst"] = "10.30.0.0/33"
    data["tenants"][2]["rules"][1]["proto"] = "udpp"
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(data))
    result = run_cli("check", str(bad))
    assert result.returncode == 2 and result.stdout == "" and "Traceback" not in result.stderr
    assert "tenants[2].rules[0].dst: '10.30.0.0/33'" in result.stderr
    assert "tenants[2].rules[1].proto: 'udpp' is not a protocol name; did you mean 'udp'?" in result.stderr
    del data["tenants"][2]["rules"][0]["dst"]
    data["tenants"][2]["rules"][1]["proto"] = "udp"
    warned = tmp_path / "warned.yaml"
    warned.write_text(yaml.safe_dump(data))
    result = run_cli("check", str(warned))
    assert result.returncode == 0 and result.stdout == f"{warned}: ok, 3 tenants, {rules + 1} rules\n"
    assert result.stderr.startswith(f"isolane: warning: {warned}: tenants[1].rules[6] ('again') is never matched")


def test_help_gives_the_project_urls_not_files_that_are_not_installed() -> None:
    urls = dict(entry.split(", ", 1) for entry in importlib.metadata.metadata("isolane").get_all("Project-URL") or [])
    assert urls == {
        "Homepage": "https://github.com/isolane/isolane",
        "Documentation": "https://github.com/isolane/isolane/tree/main/docs",
        "Changelog": "https://github.com/isolane/isolane/blob/main/CHANGELOG.md",
        "Issues": "https://github.com/isolane/isolane/issues",
    }
    top, replay, check, diff = (run_cli(*args, "--help").stdout for args in ([], ["replay"], ["check"], ["diff"]))
    assert urls["Documentation"] in top and urls["Issues"] in top
    assert "https://github.com/isolane/isolane/blob/main/docs/report.md" in " ".join(replay.split())
    assert "https://github.com/isolane/isolane/blob/main/docs/policy.md" in " ".join(check.split())
    for text in (top, replay, check, diff):
        assert re.search(r"(?<![/\w])docs/\w+\.md", text) is None, text


def test_the_license_is_the_apache_2_0_text_and_ships_with_the_package() -> None:
    text = (ROOT / "LICENSE").read_text()
    assert hashlib.md5(text.encode()).hexdigest() == "3b83ef96387f14655fc854ddc3c6bd57"  # apache.org's LICENSE-2.0.txt
    metadata = importlib.metadata.metadata("isolane")
    assert metadata["License-Expression"] == "Apache-2.0" and metadata.get_all("License-File") == ["LICENSE"]


def test_the_progress_bar_shows_on_a_terminal_for_big_captures_and_goes_away() -> None:
    """A bar (rich) for 64 MB or more, of a known size or not; none below; gone at the end."""
    import io

    from rich.console import Console

    from isolane.progress import PROGRESS_MIN_BYTES, ReadingProgress

    screen = io.StringIO()
    bar = ReadingProgress(Console(file=screen, force_terminal=True, width=100))
    bar(1 << 20, 10 << 20)
    assert screen.getvalue() == "", "a small capture gets no bar"
    total = 2 * PROGRESS_MIN_BYTES
    bar = ReadingProgress(Console(file=screen, force_terminal=True, width=100))
    bar(PROGRESS_MIN_BYTES // 2, total)
    assert "reading" in screen.getvalue() and "33.6/134.2 MB" in screen.getvalue(), "a bar from the first call of a big capture"
    bar(total, total)
    assert bar._bar is None, "the bar stops when reading ends"
    unknown = ReadingProgress(Console(file=io.StringIO(), force_terminal=True, width=100))
    unknown(PROGRESS_MIN_BYTES - 1, 0)
    assert unknown._bar is None
    unknown(PROGRESS_MIN_BYTES, 0)
    assert unknown._bar is not None, "standard input: a bar once 64 MB are read"
    unknown.close()


def test_inspect_table_fits_100_columns_with_each_tenants_mix_under_it() -> None:
    result = subprocess.run([sys.executable, "-m", "isolane.cli", "inspect", str(SAMPLE)], capture_output=True, text=True)
    lines = result.stdout.splitlines()
    assert result.returncode == 0 and max(map(len, lines)) <= 100
    assert lines[1].split() == ["tenant", "packets", "bytes", "first", "(UTC)", "duration"]
    tenants = lines[2::2]
    assert [line.split("  ")[0] for line in tenants] == ["vxlan vni 100", "vxlan vni 200", "vxlan vni 300", "untunnelled"]
    assert all(mix.startswith("  protocols ") and "; status ok:" in mix for mix in lines[3::2])
