"""`isolane inspect`: the first thing a network engineer runs on a capture."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np

import isolane
from isolane.cli import main
from support.locations import SAMPLE


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
