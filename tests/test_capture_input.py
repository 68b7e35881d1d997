"""`isolane.open_captures` and `isolane inspect` on what users hand over: captures cut short,
time going back, obsolete and unknown pcapng blocks, impossible sub-second fields and wire
lengths, several captures merged, standard input and compressed files; checked against
tshark, capinfos and mergecap where they are installed."""

from __future__ import annotations

import gzip
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import isolane
from isolane.commands.inspect import summarize
from support.locations import SAMPLE
from support.pcapfiles import block, pcap, pcapng

ETH_IPV4_UDP = bytes.fromhex("020000000001" "020000000002" "0800" "4500001c00010000401100000a0000010a000002" "04d2003500080000")


def need(tool: str) -> str:
    path = shutil.which(tool)
    if path is None:
        pytest.skip(f"{tool} is not installed")
    return path


def tshark_fields(path: Path, *fields: str) -> tuple[list[list[str]], str]:
    """tshark's value of each field, frame by frame, and what it said on stderr."""
    command = [need("tshark"), "-r", str(path), "-T", "fields", *(arg for f in fields for arg in ("-e", f))]
    result = subprocess.run(command, capture_output=True, text=True)
    return [line.split("\t") for line in result.stdout.splitlines()], result.stderr


def epoch_ns(text: str) -> int:
    """tshark's frame.time_epoch in ns; it prints a sub-second field of a second or more as it is
    (10 s and 1,500,000,000 ns: ``10.1500000000``)."""
    seconds, fraction = text.split(".")
    return int(seconds) * 10**9 + int(fraction if len(fraction) >= 9 else fraction.ljust(9, "0"))


def read_all(paths: object, batch_size: int = 3) -> tuple[isolane.Captures, list[int], list[bytes], list[int]]:
    """Every packet of ``open_captures(paths)``: timestamps, bytes, wire lengths."""
    captures = isolane.open_captures(paths, batch_size=batch_size)  # type: ignore[arg-type]
    times, packets, wire = [], [], []
    for batch in captures:
        assert 0 < len(batch) <= batch_size
        times += batch.timestamps_ns.tolist()
        packets += [batch.packet(i) for i in range(len(batch))]
        wire += batch.wire_lengths.tolist()
    return captures, times, packets, wire


def run_inspect(*args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([sys.executable, "-m", "isolane.cli", "inspect", *args], input=stdin, capture_output=True)


def warnings_of(result: subprocess.CompletedProcess[bytes]) -> list[str]:
    lines = result.stderr.decode().splitlines()
    assert all(line.startswith("isolane: warning: ") for line in lines), lines
    return [line.removeprefix("isolane: warning: ") for line in lines]


# 1. A capture cut short


def test_a_capture_cut_mid_record_reads_its_complete_packets_and_warns(tmp_path: Path) -> None:
    path = tmp_path / "cut.pcap"
    path.write_bytes(pcap([(1, i, ETH_IPV4_UDP, 42) for i in range(5)])[:-10])
    captures, times, packets, _ = read_all(path)
    assert len(packets) == 4 and times == [1_000_000_000 + i * 1000 for i in range(4)]
    [issues] = captures.issues
    assert issues.truncated == isolane.Truncation(packet=5, offset=24 + 4 * 58, bytes_left=48, what="record")
    assert captures.warnings() == [
        f"{path}: the capture was cut short in the middle of packet 5 (byte offset 256, 48 bytes of its record left); the 4 packets before it were read"
    ]
    frames, said = tshark_fields(path, "frame.number")
    assert len(frames) == len(packets) and "cut short in the middle of a packet" in said
    result = run_inspect(str(path))
    assert result.returncode == 0 and b"4 packets" in result.stdout
    assert warnings_of(result) == captures.warnings()


def test_capinfos_counts_the_same_packets_of_a_cut_pcapng(tmp_path: Path) -> None:
    path = tmp_path / "cut.pcapng"
    path.write_bytes(pcapng([(1, 9)], [(0, i, ETH_IPV4_UDP, 42) for i in range(6)])[:-3])
    captures, _, packets, _ = read_all(path)
    assert len(packets) == 5 and captures.issues[0].truncated is not None
    info = subprocess.run([need("capinfos"), "-c", "-M", str(path)], capture_output=True, text=True)
    assert f"Number of packets:   {len(packets)}" in info.stdout, info.stdout


def test_read_pcap_and_iter_pcap_still_take_a_cut_capture_as_corrupt(tmp_path: Path) -> None:
    path = tmp_path / "cut.pcap"
    path.write_bytes(pcap([(1, 0, ETH_IPV4_UDP, 42)] * 2)[:-1])
    for read in (isolane.read_pcap, lambda p: list(isolane.iter_pcap(p))):
        with pytest.raises(isolane.PcapError, match="byte offset 82, packet 2: truncated final record"):
            read(path)


# 2. Time going back


def test_packets_earlier_than_the_one_before_are_counted_as_tshark_sees_them(tmp_path: Path) -> None:
    path = tmp_path / "merged-a.pcap"
    seconds = [5, 6, 4, 4, 7, 1, 8]
    path.write_bytes(pcap([(s, 0, ETH_IPV4_UDP, 42) for s in seconds]))
    captures, times, _, _ = read_all(path)
    assert times == [s * 10**9 for s in seconds]
    frames, _ = tshark_fields(path, "frame.time_delta")
    assert captures.issues[0].out_of_order == sum(float(delta) < 0 for (delta,) in frames) == 2
    assert "2 packets have a timestamp earlier than the packet before" in captures.warnings()[0]


def test_the_sample_goes_back_in_time_where_tshark_says(real_pcaps: Path) -> None:
    captures, _, _, _ = read_all(real_pcaps / "kernel_vxlan.pcap", batch_size=65536)
    frames, _ = tshark_fields(real_pcaps / "kernel_vxlan.pcap", "frame.time_delta")
    assert captures.issues[0].out_of_order == sum(float(delta) < 0 for (delta,) in frames) > 0


# 3, 4. Obsolete and unknown pcapng blocks


def obsolete_packet_block(interface: int, ticks: int, data: bytes, wire: int) -> bytes:
    """draft-ietf-opsawg-pcapng, Packet Block (obsolete): 16-bit interface id and drops count."""
    return block(2, struct.pack("<HHIIII", interface, 0, ticks >> 32, ticks & 0xFFFFFFFF, len(data), wire) + data)


def test_obsolete_packet_blocks_are_read_as_wireshark_reads_them(tmp_path: Path) -> None:
    path = tmp_path / "old.pcapng"
    content = pcapng([(1, 9)], [(0, 1_700_000_000_000_000_001, ETH_IPV4_UDP, 42)])
    content += obsolete_packet_block(0, 1_700_000_000_500_000_000, ETH_IPV4_UDP[:30], 42)
    content += obsolete_packet_block(0, 1_700_000_001_000_000_000, ETH_IPV4_UDP, 60)
    path.write_bytes(content)
    captures, times, packets, wire = read_all(path)
    frames, _ = tshark_fields(path, "frame.time_epoch", "frame.len", "frame.cap_len")
    assert times == [epoch_ns(t) for t, _, _ in frames]
    assert wire == [int(length) for _, length, _ in frames] and [len(p) for p in packets] == [int(c) for _, _, c in frames]
    assert packets == [ETH_IPV4_UDP, ETH_IPV4_UDP[:30], ETH_IPV4_UDP]
    assert captures.issues[0].obsolete_packet_blocks == 2


def between_two_packets(blocks: bytes) -> bytes:
    head = pcapng([(1, None)], [])
    packet = pcapng([(1, None)], [(0, 5, ETH_IPV4_UDP, 42)])[len(head) :]
    return head + packet + blocks + packet


def test_empty_blocks_of_kinds_isolane_ignores_are_skipped(tmp_path: Path) -> None:
    # Empty name resolution, decryption secrets and custom blocks: the spec gives each a
    # field or two that isolane would not read anyway (Wireshark 4.0 stops at them).
    path = tmp_path / "empty.pcapng"
    path.write_bytes(between_two_packets(b"".join(block(kind, b"") for kind in (4, 10, 0x0BAD, 0x40000BAD))))
    captures, _, packets, _ = read_all(path)
    assert len(packets) == 2 and captures.warnings() == []
    assert len(isolane.read_pcap(path)) == 2


def test_blocks_of_unknown_types_are_skipped_as_wireshark_skips_them(tmp_path: Path) -> None:
    path = tmp_path / "unknown.pcapng"
    local_use = [block(kind, b"") for kind in (0x80000001, 0x80000ABC)] + [block(0x80000002, b"local data")]
    path.write_bytes(between_two_packets(b"".join(local_use) + block(0x00000FFF, b"")))
    captures, _, packets, _ = read_all(path)
    frames, _ = tshark_fields(path, "frame.number")
    assert len(packets) == len(frames) == 2
    assert captures.issues[0].unknown_blocks_skipped == 4
    assert captures.warnings() == [f"{path}: 4 pcapng blocks of types isolane does not know were skipped"]


def test_no_error_message_shows_a_parser_internal(tmp_path: Path) -> None:
    path = tmp_path / "bad.pcapng"
    path.write_bytes(pcapng([(1, None)], []) + block(6, b"\0" * 8))
    with pytest.raises(isolane.PcapError) as caught:
        read_all(path)
    assert str(caught.value) == f"{path}: byte offset 48, packet 1: enhanced packet block of 20 bytes is shorter than its 32 fixed bytes"
    rust = Path(__file__).resolve().parents[1] / "rust"
    debug_formatted = [line for source in rust.rglob("*.rs") for line in source.read_text().splitlines() if "{err:?}" in line and "format!" in line]
    assert debug_formatted == []


# 5. Impossible sub-second fields and wire lengths


def test_sub_second_fields_of_a_second_or_more_are_taken_as_tshark_computes_them(tmp_path: Path) -> None:
    for nanos, fractions in ((False, [0, 5, 1_000_000, 1_999_999]), (True, [0, 999_999_999, 1_500_000_000])):
        path = tmp_path / f"subsecond-{nanos}.pcap"
        path.write_bytes(pcap([(10, fraction, ETH_IPV4_UDP, 42) for fraction in fractions], nanos=nanos))
        captures, times, _, _ = read_all(path)
        frames, _ = tshark_fields(path, "frame.time_epoch")
        assert times == [epoch_ns(t) for (t,) in frames], path
        assert captures.issues[0].bad_subsecond == (2 if not nanos else 1)
        assert "microseconds (nanoseconds) field of a second or more" in captures.warnings()[0]


def test_a_wire_length_below_the_captured_length_becomes_the_captured_length(tmp_path: Path) -> None:
    path = tmp_path / "wire.pcap"
    path.write_bytes(pcap([(1, 0, ETH_IPV4_UDP, 30), (1, 1, ETH_IPV4_UDP, 60)]))
    captures, _, _, wire = read_all(path)
    assert wire == [42, 60] and captures.issues[0].wire_below_captured == 1
    # tshark keeps frame.len 30 but flags it malformed, and dissects all 42 captured bytes:
    # isolane parses them too, with the captured length as the frame's.
    frames, _ = tshark_fields(path, "frame.len", "frame.cap_len", "udp.dstport", "_ws.expert.message")
    assert frames[0] == ["30", "42", "53", "Frame length is less than captured length"]
    rows = isolane.parse(isolane.read_pcap(path))
    assert rows["wire_len"].tolist() == [42, 60] and rows["dst_port"].tolist() == [53, 53]


# 6, 7, 8. Packet numbers, OS errors, batches


def test_packet_numbers_in_errors_count_from_one(tmp_path: Path) -> None:
    content = bytearray(pcap([(1, 0, ETH_IPV4_UDP, 42)] * 3))
    content[24 + 2 * 58 + 8 : 24 + 2 * 58 + 12] = struct.pack("<I", 1 << 30)
    path = tmp_path / "bad.pcap"
    path.write_bytes(bytes(content))
    with pytest.raises(isolane.PcapError, match=r"byte offset 140, packet 3: record of 1073741824 bytes") as caught:
        read_all(path)
    assert caught.value.packet == 3


def test_a_missing_file_reads_like_pythons_own_error(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere.pcap"
    with pytest.raises(FileNotFoundError) as ours:
        isolane.open_captures(missing)
    with pytest.raises(FileNotFoundError) as pythons:
        open(missing, "rb")
    assert str(ours.value) == str(pythons.value)
    result = run_inspect(str(missing))
    assert result.returncode == 2 and result.stderr.decode() == f"isolane: error: {pythons.value}\n"


def test_from_arrays_refuses_a_wire_length_below_the_captured_length() -> None:
    with pytest.raises(isolane.BatchError, match=r"wire_lengths\[1\] = 41 is below lengths\[1\] = 42"):
        isolane.PacketBatch.from_arrays(ETH_IPV4_UDP * 3, [0, 42, 84], [42, 42, 42], [1, 2, 3], wire_lengths=[42, 41, 40])


# 9. Tunnels on ports nobody configured


def test_tunnel_port_check_counts_untunnelled_udp_to_tunnel_ports() -> None:
    def udp_to(port: int) -> bytes:
        return ETH_IPV4_UDP[:36] + struct.pack(">H", port) + ETH_IPV4_UDP[38:]

    ports = [8472, 8472, 4790, 53, 6081, 4789]
    batch = isolane.PacketBatch.from_arrays(b"".join(udp_to(p) for p in ports), np.arange(6) * 42, np.full(6, 42), np.arange(6))
    check = isolane.TunnelPortCheck()
    check.observe(isolane.parse(batch, vxlan_ports=[4789], geneve_ports=[]))
    check.observe(isolane.parse(batch, vxlan_ports=[4789], geneve_ports=[]))
    assert check.counts == {4789: 0, 4790: 2, 6081: 2, 8472: 4}  # 4789 was decoded as VXLAN
    assert check.warnings([4789], []) == [
        "2 untunnelled UDP packets go to port 4790, which looks like VXLAN-GPE, which isolane does not decode",
        "2 untunnelled UDP packets go to port 6081, which looks like Geneve (IANA port); if they are, add `--geneve-port 6081`",
        "4 untunnelled UDP packets go to port 8472, which looks like VXLAN on the Linux kernel's and flannel's default port; "
        "if they are, add `--vxlan-port 8472`",
    ]
    assert len(check.warnings([4789, 8472], [6081])) == 1


def test_inspect_suggests_the_vxlan_port_of_a_kernel_capture(real_pcaps: Path) -> None:
    capture = str(real_pcaps / "tcpdump__vxlan_port_8472.pcap")
    result = run_inspect(capture)
    assert result.returncode == 0
    assert warnings_of(result) == [
        "10 untunnelled UDP packets go to port 8472, which looks like VXLAN on the Linux kernel's and flannel's default port; "
        "if they are, add `--vxlan-port 8472`"
    ]
    configured = run_inspect("--vxlan-port", "8472", capture)
    assert configured.returncode == 0 and warnings_of(configured) == []


# 10. Several captures merged by time


def write_pieces(tmp_path: Path, times: list[int], pieces: int, window_ns: int) -> list[Path]:
    """The packets of one capture dealt into ``pieces`` files by time window: window k goes to
    file k % pieces, so equal timestamps stay in one file."""
    records = [[] for _ in range(pieces)]  # type: list[list[tuple[int, int, bytes, int]]]
    for index, t in enumerate(times):
        payload = ETH_IPV4_UDP[:34] + struct.pack(">I", index)
        records[(t // window_ns) % pieces].append((t // 10**9, t % 10**9, payload, len(payload)))
    paths = []
    for piece, piece_records in enumerate(records):
        paths.append(tmp_path / f"piece{piece}.pcap")
        paths[-1].write_bytes(pcap(piece_records, nanos=True))
    return paths


def test_a_capture_dealt_into_pieces_by_time_merges_back_into_itself(tmp_path: Path) -> None:
    times = np.sort(np.random.default_rng(5).integers(0, 10**10, 5000)).tolist()
    times[100:103] = [times[100]] * 3  # ties
    whole = tmp_path / "whole.pcap"
    whole.write_bytes(pcap([(t // 10**9, t % 10**9, ETH_IPV4_UDP[:34] + struct.pack(">I", i), 38) for i, t in enumerate(times)], nanos=True))
    _, whole_times, whole_packets, _ = read_all(whole, batch_size=65536)
    captures, merged_times, merged_packets, _ = read_all(write_pieces(tmp_path, times, 4, 10**7), batch_size=777)
    assert (merged_times, merged_packets) == (whole_times, whole_packets)
    assert captures.format == "merged" and captures.formats == ["pcap"] * 4
    assert captures.position == captures.size == sum(p.stat().st_size for p in tmp_path.glob("piece*.pcap"))


def test_equal_timestamps_merge_as_mergecap_merges_them(tmp_path: Path) -> None:
    files = {"a": [(1, "A"), (2, "B"), (2, "C")], "b": [(2, "X"), (2, "Y"), (3, "Z")], "c": [(2, "Q")]}
    paths = []
    for name, records in files.items():
        paths.append(tmp_path / f"{name}.pcap")
        paths[-1].write_bytes(pcap([(seconds, 0, letter.encode() * 14, 14) for seconds, letter in records]))
    merged = tmp_path / "merged.pcapng"
    subprocess.run([need("mergecap"), "-w", str(merged), *map(str, paths)], check=True, capture_output=True)
    reference = isolane.read_pcap(merged)
    _, _, packets, _ = read_all(paths)
    assert [p[:1] for p in packets] == [reference.packet(i)[:1] for i in range(len(reference))] == [b"A", b"Q", b"X", b"Y", b"B", b"C", b"Z"]


def test_merging_real_captures_equals_mergecap(real_pcaps: Path, tmp_path: Path) -> None:
    names = ["kernel_vxlan.pcap", "tcpdump__vxlan.pcap", "tcpdump__vxlan_port_8472.pcap", "tcpdump__geneve.pcap", "zeek__http-vlan-0.pcap"]
    inputs = [real_pcaps / name for name in names]
    merged = tmp_path / "merged.pcapng"
    subprocess.run([need("mergecap"), "-w", str(merged), *map(str, inputs)], check=True, capture_output=True)
    reference = isolane.read_pcap(merged)
    captures, times, packets, wire = read_all(inputs, batch_size=100)
    assert times == reference.timestamps_ns.tolist()
    assert packets == [reference.packet(i) for i in range(len(reference))]
    assert wire == reference.wire_lengths.tolist()
    assert [issues.packets for issues in captures.issues] == [len(isolane.read_pcap(p)) for p in inputs]


# 11. Standard input and compressed captures


def test_gzip_and_zstd_captures_read_like_the_plain_one(tmp_path: Path) -> None:
    plain = SAMPLE.read_bytes()
    gz = tmp_path / "sample.pcap.gz"
    gz.write_bytes(gzip.compress(plain[:3000]) + gzip.compress(plain[3000:]))  # two members, as `cat a.gz b.gz` makes
    zst = tmp_path / "sample.bin"  # the content says zstd, not the name
    subprocess.run([need("zstd"), "-q", "-o", str(zst), str(SAMPLE)], check=True)
    _, times, packets, _ = read_all(SAMPLE, batch_size=500)
    for path, compression in ((gz, "gzip"), (zst, "zstd")):
        captures, got_times, got_packets, _ = read_all(path, batch_size=500)
        assert (got_times, got_packets) == (times, packets), path
        assert captures.compressions == [compression] and captures.format == "pcap"
        assert captures.position == captures.size == path.stat().st_size


def test_a_gzip_file_cut_short_reads_what_it_has_and_warns(tmp_path: Path) -> None:
    path = tmp_path / "cut.pcap.gz"
    path.write_bytes(gzip.compress(SAMPLE.read_bytes())[:20_000])
    captures, _, packets, _ = read_all(path, batch_size=500)
    [issues] = captures.issues
    assert 0 < len(packets) < 1696 and issues.compressed_stream_cut
    assert captures.warnings()[0] == f"{path}: the gzip stream ends in the middle: the file was cut short"


def test_a_corrupt_gzip_stream_is_a_pcap_error(tmp_path: Path) -> None:
    content = bytearray(gzip.compress(SAMPLE.read_bytes()))
    content[-8] ^= 0xFF  # the CRC-32 of the member
    path = tmp_path / "corrupt.pcap.gz"
    path.write_bytes(bytes(content))
    with pytest.raises(isolane.PcapError) as caught:
        read_all(path, batch_size=65536)
    assert str(caught.value).startswith(f"{path}: byte offset {len(content)}: the gzip stream is corrupt (the offset counts compressed bytes): ")
    assert "checksum" in str(caught.value)


def test_inspect_reads_standard_input_plain_or_compressed(tmp_path: Path) -> None:
    expected = run_inspect("--json", str(SAMPLE))
    for content in (SAMPLE.read_bytes(), gzip.compress(SAMPLE.read_bytes())):
        result = run_inspect("--json", "-", stdin=content)
        assert result.returncode == 0 and result.stdout.replace(b"<stdin>", str(SAMPLE).encode()) == expected.stdout


def test_standard_input_has_no_size_and_is_read_once() -> None:
    script = "import isolane; c = isolane.open_captures('-'); n = sum(len(b) for b in c); print(n, c.size, c.position, c.paths)"
    result = subprocess.run([sys.executable, "-c", script], input=SAMPLE.read_bytes(), capture_output=True, check=True)
    assert result.stdout.decode().split(maxsplit=3) == ["1696", "None", str(SAMPLE.stat().st_size), "['<stdin>']\n"]
    with pytest.raises(isolane.EngineError, match="only once"):
        isolane.open_captures(["-", "-"])


def test_inspect_merges_several_files_and_validates_its_batch_size(tmp_path: Path) -> None:
    pieces = write_pieces(tmp_path, list(range(0, 10**9, 10**6)), 3, 10**7)
    result = run_inspect("--json", *map(str, pieces))
    assert result.returncode == 0 and b'"packets": 1000' in result.stdout and b'"format": "merged"' in result.stdout
    for bad in ("0", "-3", "many"):
        refused = run_inspect("--batch-size", bad, str(SAMPLE))
        assert refused.returncode == 2 and refused.stderr.startswith(b"isolane: error: argument --batch-size: ") and refused.stderr.count(b"\n") == 1


def test_progress_counts_compressed_bytes_and_an_unknown_size_as_zero(tmp_path: Path) -> None:
    gz = tmp_path / "sample.pcap.gz"
    gz.write_bytes(gzip.compress(SAMPLE.read_bytes()))
    calls: list[tuple[int, int]] = []
    summarize(gz, batch_size=100, progress=lambda done, total: calls.append((done, total)))
    assert len(calls) == 17 and calls[-1] == (gz.stat().st_size, gz.stat().st_size)
    script = (
        "from isolane.commands.inspect import summarize; calls = []; "
        "summarize('-', batch_size=100, progress=lambda done, total: calls.append((done, total))); print(len(calls), calls[-1])"
    )
    result = subprocess.run([sys.executable, "-c", script], input=SAMPLE.read_bytes(), capture_output=True, check=True)
    assert result.stdout.decode() == f"17 ({SAMPLE.stat().st_size}, 0)\n"


def test_inspect_says_each_thing_it_met_in_one_line_and_exits_0(tmp_path: Path) -> None:
    backwards, overflow = tmp_path / "backwards.pcap", tmp_path / "overflow.pcap"
    backwards.write_bytes(pcap([(5, 0, ETH_IPV4_UDP, 42), (4, 0, ETH_IPV4_UDP, 42)]))
    overflow.write_bytes(pcap([(6, 1_000_000, ETH_IPV4_UDP, 30)]))
    result = run_inspect(str(backwards), str(overflow))
    assert result.returncode == 0 and b"merged, 3 packets" in result.stdout
    assert [warning.split(":")[0] for warning in warnings_of(result)] == [str(backwards), str(overflow), str(overflow)]
    assert [warning.split(": ", 1)[1][:30] for warning in warnings_of(result)] == [
        "1 packet has a timestamp earli",
        "1 packet has a microseconds (n",
        "1 packet has a wire length bel",
    ]
