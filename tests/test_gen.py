"""`isolane gen`'s packets, checked against tshark's and scapy's reading of them: every packet
decodes as built (VXLAN to port 4789 with the tenant's VNI, RoCEv2 BTH, TCP, BFD), checksums
are right, PSNs and sequence numbers advance, timestamps are the generator's to the
nanosecond, and `isolane inspect` sees one tenant per VNI."""

from __future__ import annotations

import builtins
import shutil
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

import isolane
from isolane.cli import main
from isolane.commands.inspect import summarize
from isolane.gen import frames, templates, yamlwriter
from isolane.gen.scenarios import SCENARIOS, build
from test_scenarios import SAMPLES, sample_command

scapy_all = pytest.importorskip("scapy.all", reason="isolane gen builds its headers with scapy")
from scapy.contrib.roce import BTH  # noqa: E402 (after the skip: scapy may be missing)

STACK = "eth:ethertype:ip:udp:vxlan:eth:ethertype:ip:"
# What tshark calls each kind's packets; with whole packets it also reassembles each RoCE SEND
# message (zero payload reads as RPC-over-RDMA) and shows TCP's payload as data.
EXPECTED_STACKS = {STACK + "udp:infiniband", STACK + "udp:infiniband:data", STACK + "udp:infiniband:rpcordma", STACK + "tcp:data", STACK + "udp:bfd"}


def generate(tmp_path: Path, scenario: str, *options: str) -> Path:
    capture = tmp_path / f"{scenario}.pcap"
    assert main(["gen", scenario, "-o", str(capture), *options]) == 0
    return capture


@pytest.fixture(scope="module")
def whole_packets(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """2 ms of the invisible-loss scenario (all three kinds of packet), whole packets."""
    return generate(tmp_path_factory.mktemp("gen"), "invisible-loss", "--duration", "2ms", "--snaplen", "0", "--tenants", "3")


def tshark_fields(capture: Path, *fields: str) -> list[list[str]]:
    if shutil.which("tshark") is None:
        pytest.skip("tshark is not installed")
    checks = ["-o", "ip.check_checksum:TRUE", "-o", "udp.check_checksum:TRUE", "-o", "tcp.check_checksum:TRUE"]
    command = ["tshark", "-r", str(capture), *checks, "-T", "fields", "-E", "occurrence=a", "-E", "aggregator=,"]
    out = subprocess.run([*command, *(f for field in fields for f in ("-e", field))], capture_output=True, text=True, check=True).stdout
    return [line.split("\t") for line in out.splitlines()]


def test_tshark_decodes_every_packet_as_built_with_good_checksums(whole_packets: Path) -> None:
    fields = (
        "frame.protocols",
        "_ws.expert.severity",
        "ip.checksum.status",
        "tcp.checksum.status",
        "udp.checksum.status",
        "vxlan.vni",
        "udp.dstport",
        "ip.dsfield.ecn",
    )
    rows = tshark_fields(whole_packets, *fields)
    assert len(rows) == len(isolane.read_pcap(whole_packets).timestamps_ns)
    stacks = {row[0] for row in rows}
    assert stacks <= EXPECTED_STACKS and STACK + "tcp:data" in stacks and STACK + "udp:bfd" in stacks
    severities = {severity for row in rows for severity in row[1].split(",") if severity}
    assert not severities & {"8388608", "6291456"}, "no error or warning (malformed, bad checksum) in any packet"
    assert {row[2] for row in rows} == {"1,1"}, "both IPv4 header checksums are good"
    assert {row[3] for row in rows if "tcp" in row[0]} == {"1"}
    assert {row[4] for row in rows if "bfd" in row[0]} == {"3,1"}, "VXLAN's UDP checksum is zero (RFC 7348); BFD's is good"
    assert {row[4] for row in rows if "infiniband" in row[0]} == {"3,3"}, "RoCEv2 sets its UDP checksum to zero"
    vnis = {int(row[5]) for row in rows}
    assert vnis == {t.vnis[0] for t in isolane.Policy.from_file(whole_packets.with_suffix(".yaml")).tenants}
    assert {row[6].split(",")[0] for row in rows} == {"4789"}
    assert {row[7] for row in rows if "infiniband" in row[0]} == {"2,2"} and {row[7] for row in rows if "infiniband" not in row[0]} == {"0,0"}, (
        "RoCEv2 is ECN-capable (ECT(0)), in the outer header too"
    )


@pytest.mark.parametrize("capture", sorted(path.name for path in SAMPLES.glob("*.pcap")))
def test_tshark_decodes_the_samples_headers_without_a_complaint(capture: str) -> None:
    rows = tshark_fields(SAMPLES / capture, "frame.protocols", "_ws.expert.severity", "ip.checksum.status")
    assert {row[0] for row in rows} <= EXPECTED_STACKS
    assert {row[1] for row in rows} == {""}, "no expert note at all: the payload cut at 128 bytes is a capture's snaplen"
    assert {row[2] for row in rows} == {"1,1"}


def test_headers_agree_with_scapys_reading(whole_packets: Path) -> None:
    packets = scapy_all.rdpcap(str(whole_packets))
    by_qp: dict[tuple[str, int], list[int]] = defaultdict(list)
    by_tcp_flow: dict[tuple[str, str, int, int], list[tuple[int, int]]] = defaultdict(list)
    acks_checked = 0
    for packet in packets:
        outer, inner = packet[scapy_all.IP], packet[scapy_all.VXLAN][scapy_all.IP]
        for ip in (outer, inner):
            rebuilt = ip.copy()
            del rebuilt.chksum
            assert scapy_all.IP(bytes(rebuilt)).chksum == ip.chksum
        assert 49152 <= packet[scapy_all.UDP].sport <= 65535
        if inner.haslayer(scapy_all.TCP):
            segment = inner[scapy_all.TCP]
            rebuilt = inner.copy()
            del rebuilt[scapy_all.TCP].chksum
            assert scapy_all.IP(bytes(rebuilt))[scapy_all.TCP].chksum == segment.chksum
            reverse = by_tcp_flow.get((inner.dst, inner.src, segment.dport, segment.sport))
            if reverse:  # it acknowledges what the other side sent before it
                assert segment.ack == (reverse[-1][0] + reverse[-1][1]) % (1 << 32)
                acks_checked += 1
            by_tcp_flow[(inner.src, inner.dst, segment.sport, segment.dport)].append((segment.seq, inner.len - 40))
        elif inner[scapy_all.UDP].dport == templates.ROCE_PORT:
            bth = BTH(bytes(inner[scapy_all.UDP].payload))
            by_qp[(inner.src, bth.dqpn)].append(bth.psn)
    assert by_qp and by_tcp_flow and acks_checked
    for psns in by_qp.values():
        assert all((b - a) % (1 << 24) == 1 for a, b in zip(psns, psns[1:])), "each QP's PSNs run on by one"
    for segments in by_tcp_flow.values():
        assert all((b[0] - a[0]) % (1 << 32) == a[1] for a, b in zip(segments, segments[1:])), "sequence numbers advance by the payload"


def test_checksum_is_rfc_1071_as_scapy_computes_it() -> None:
    rng = np.random.default_rng(7)
    data = rng.integers(0, 256, size=(200, 40), dtype=np.uint8)
    ours = frames.internet_checksum(data)
    assert ours.tolist() == [scapy_all.checksum(bytes(row)) for row in data]


def test_inspect_sees_one_tenant_per_vni(tmp_path: Path) -> None:
    capture = generate(tmp_path, "overload", "--duration", "2ms", "--tenants", "6")
    summary = summarize(capture)
    policy = isolane.Policy.from_file(capture.with_suffix(".yaml"))
    assert len(policy.tenants) == 6
    assert {group.label for group in summary.groups.values()} == {f"vxlan vni {t.vnis[0]}" for t in policy.tenants}
    assert all(set(group.statuses) == {"ok"} for group in summary.groups.values())


def test_timestamps_and_lengths_are_the_generators(tmp_path: Path) -> None:
    capture = generate(tmp_path, "noisy-neighbour", "--duration", "3ms", "--seed", "5")
    packets = build("noisy-neighbour", seed=5, duration_ns=3_000_000).captures[""]
    batch = isolane.read_pcap(capture)
    np.testing.assert_array_equal(batch.timestamps_ns, packets["time_ns"])
    np.testing.assert_array_equal(batch.wire_lengths, packets["frame_len"] + templates.OUTER_OVERHEAD)
    assert batch.lengths.max() == frames.DEFAULT_SNAPLEN
    rows = isolane.parse(batch)
    np.testing.assert_array_equal(rows["vni"], packets["vni"])
    np.testing.assert_array_equal(rows["dst_port"], packets["dst_port"])
    starts = batch.offsets.astype(np.int64) + templates.OUTER_UDP
    outer_source_ports = batch.data[starts].astype(np.int64) << 8 | batch.data[starts + 1]
    ports_of_flow = defaultdict(set)
    for row, port in zip(rows, outer_source_ports.tolist()):
        ports_of_flow[(row["src"].tobytes(), row["dst"].tobytes(), int(row["src_port"]), int(row["dst_port"]))].add(port)
    assert all(len(ports) == 1 for ports in ports_of_flow.values()), "one outer source port per flow (RFC 7348: a hash of the inner flow)"
    assert len(set(outer_source_ports.tolist())) > 1 and outer_source_ports.min() >= 49152


def test_the_same_seed_gives_the_same_files_and_another_seed_others(tmp_path: Path) -> None:
    files = []
    for run, seed in enumerate(("3", "3", "4")):
        (tmp_path / str(run)).mkdir()
        files.append(generate(tmp_path / str(run), "drift", "--seed", seed, "--duration", "3ms"))
    morning = [capture.with_name("drift.morning.pcap").read_bytes() for capture in files]
    assert morning[0] == morning[1] != morning[2]
    assert files[0].with_suffix(".yaml").read_text() == files[1].with_suffix(".yaml").read_text()


@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_the_shipped_samples_are_what_isolane_gen_writes(tmp_path: Path, scenario: str) -> None:
    command = sample_command(SAMPLES / f"{scenario}.yaml")
    assert command[0] == scenario
    generate(tmp_path, *command)
    shipped = sorted(path.name for path in SAMPLES.glob(f"{scenario}.*"))
    assert shipped == sorted(path.name for path in tmp_path.iterdir())
    for name in shipped:
        assert (tmp_path / name).read_bytes() == (SAMPLES / name).read_bytes(), name
        assert name.endswith(".yaml") or (SAMPLES / name).stat().st_size < 1_500_000


@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_every_policy_written_reads_back_as_built(tmp_path: Path, scenario: str) -> None:
    built = build(scenario, duration_ns=2_000_000, tenants=SCENARIOS[scenario][1] + 1)
    capture = generate(tmp_path, scenario, "--duration", "2ms", "--tenants", str(SCENARIOS[scenario][1] + 1))
    for name, document in {"": built.policy, **built.variants}.items():
        path = capture.with_suffix(f".{name}.yaml" if name else ".yaml")
        assert isolane.Policy.from_file(path).to_dict() == isolane.Policy.from_dict(document).to_dict()


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (["overload", "--tenants", "2"], "takes 4 to 4095 tenants, not 2"),
        (["overload", "--tenants", "4096"], "takes 4 to 4095 tenants, not 4096"),
        (["drift", "--duration", "1ms"], "at least 2ms"),
        (["invisible-loss", "--snaplen", "64"], "snaplen 64 cuts the headers"),
        (["drift", "--duration", "fast"], "fast"),
    ],
)
def test_bad_options_are_errors_that_say_why(tmp_path: Path, capsys: pytest.CaptureFixture[str], options: list[str], message: str) -> None:
    assert main(["gen", *options, "-o", str(tmp_path / "x.pcap")]) == 2
    assert message in capsys.readouterr().err


def test_an_unknown_scenario_lists_the_scenarios(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["gen", "outage", "-o", "x.pcap"])
    assert "invisible-loss" in capsys.readouterr().err


def test_without_scapy_the_error_says_what_to_install(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    real_import = builtins.__import__

    def no_scapy(name: str, *args: Any, **kwargs: Any) -> Any:
        if name.startswith("scapy"):
            raise ImportError(f"No module named {name!r}")
        return real_import(name, *args, **kwargs)

    templates.templates.cache_clear()
    monkeypatch.setattr(builtins, "__import__", no_scapy)
    try:
        with pytest.raises(ImportError, match=r"pip install 'isolane\[gen\]'"):
            templates.templates()
        assert main(["gen", "drift", "-o", str(tmp_path / "x.pcap")]) == 2
        assert capsys.readouterr().err == "isolane: error: isolane gen needs scapy: pip install 'isolane[gen]'\n"
        assert not list(tmp_path.iterdir())
    finally:
        monkeypatch.undo()
        templates.templates.cache_clear()


@pytest.mark.slow
def test_a_million_packets_take_seconds(tmp_path: Path) -> None:
    began = time.perf_counter()
    capture = generate(tmp_path, "noisy-neighbour", "--duration", "1800ms")
    elapsed = time.perf_counter() - began
    packets = len(isolane.read_pcap(capture).timestamps_ns)
    assert packets > 1_000_000
    print(f"{packets:,} packets in {elapsed:.1f} s: {packets / elapsed:,.0f} packets/s", file=sys.stderr)
    assert elapsed < 30


def test_policy_yaml_keeps_every_value_as_it_was() -> None:
    """Strings YAML would read as numbers, booleans or nulls are quoted; isolane's YAML 1.2
    reader and PyYAML's 1.1 both read back the document written."""
    tricky = ["100Gbps", "10.0.1.0/24", "1e3", "0x1F", "12", "yes", "no", "on", "null", "~", "cs6", "1:30", "x y", ".5", "-3", ".inf", "a: b", "#x", ""]
    document = {"strings": tricky, "numbers": [0, 7, -1, 2.5], "flags": [True, False], "nested": {"list": [{"k": "v", "n": 1}], "empty": {}}}
    text = yamlwriter.dump(document, "a comment\nover two lines")
    assert text.startswith("# a comment\n# over two lines\n")
    assert isolane._core.load_yaml(text) == document
    assert yaml.safe_load(text) == document
