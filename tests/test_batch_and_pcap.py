"""PacketBatch construction, pcap/pcapng reading and the errors bad input gets."""

from __future__ import annotations

import csv
import struct
from pathlib import Path

import numpy as np
import pytest

import isolane
from support.pcapfiles import pcap, pcapng

ETH_IPV4_UDP = bytes.fromhex(
    "020000000001" "020000000002" "0800"
    "4500001c00010000401100000a0000010a000002"
    "04d2003500080000"
)


def test_from_arrays_does_not_copy_arrays_of_the_right_dtype() -> None:
    data = np.frombuffer(ETH_IPV4_UDP * 3, dtype=np.uint8).copy()
    offsets = np.array([0, 42, 84], dtype=np.uint64)
    lengths = np.full(3, 42, dtype=np.uint32)
    timestamps = np.array([1, 2, 3], dtype=np.int64)
    batch = isolane.PacketBatch.from_arrays(data, offsets, lengths, timestamps)
    assert batch.data is data and batch.offsets is offsets and batch.lengths is lengths
    assert batch.timestamps_ns is timestamps
    assert np.array_equal(batch.wire_lengths, lengths) and batch.wire_lengths is not lengths
    assert len(batch) == 3 and batch.link_type == 1
    assert batch.packet(-1) == ETH_IPV4_UDP


@pytest.mark.parametrize("threads", [1, 2])
def test_each_record_carries_its_packets_timestamp(threads: int) -> None:
    count = 10_000  # several of the parser's chunks, so that threads share them
    timestamps = np.random.default_rng(3).integers(-(10**9), 10**18, count)
    batch = isolane.PacketBatch.from_arrays(ETH_IPV4_UDP * count, np.arange(count) * 42, np.full(count, 42), timestamps)
    assert np.array_equal(isolane.parse(batch, threads=threads)["timestamp_ns"], timestamps)


def test_from_arrays_converts_same_kind_and_accepts_bytes() -> None:
    batch = isolane.PacketBatch.from_arrays(ETH_IPV4_UDP, [0], [42], [7], wire_lengths=[60])
    assert batch.offsets.dtype == np.uint64 and batch.wire_lengths.tolist() == [60]
    rows = isolane.parse(batch)
    assert rows["status"][0] == isolane.Status.OK
    assert (rows["src_port"][0], rows["dst_port"][0]) == (1234, 53)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"offsets": [0, 30]}, "packet 1"),
        ({"lengths": [42, 42, 42]}, "one entry per packet"),
        ({"timestamps_ns": [1.5, 2.5]}, "timestamps_ns"),
        ({"timestamps_ns": [1]}, "timestamps_ns has 1 entries for 2 packets"),
        ({"link_type": 105}, "unsupported link type 105"),
        ({"offsets": [[0], [0]]}, "one-dimensional"),
        ({"offsets": [0, -1]}, "offsets: values from -1 to 0 do not fit"),
    ],
)
def test_from_arrays_rejects_what_is_not_a_batch(kwargs: dict[str, object], message: str) -> None:
    arguments: dict[str, object] = {"data": ETH_IPV4_UDP, "offsets": [0, 0], "lengths": [42, 42], "timestamps_ns": [1, 2]}
    arguments.update(kwargs)
    with pytest.raises(ValueError, match=message):
        isolane.PacketBatch.from_arrays(**arguments)  # type: ignore[arg-type]


def test_batch_changed_after_construction_is_checked_again() -> None:
    batch = isolane.PacketBatch.from_arrays(
        np.frombuffer(ETH_IPV4_UDP, np.uint8).copy(), np.zeros(1, np.uint64), np.array([42], np.uint32), np.zeros(1, np.int64)
    )
    batch.offsets[0] = 10
    with pytest.raises(ValueError, match="runs past the end of data"):
        isolane.parse(batch)


def test_every_shared_capture_reads_with_its_packet_count(real_pcaps: Path) -> None:
    with open(real_pcaps / "SOURCES.tsv", newline="") as sources:
        expected = {row["file"]: int(row["packets"]) for row in csv.DictReader(sources, delimiter="\t")}
    assert len(expected) > 40
    for name, packets in expected.items():
        batch = isolane.read_pcap(real_pcaps / name)
        assert len(batch) == packets, name
        assert len(isolane.parse(batch)) == packets, name


def test_pcap_byte_orders_and_resolutions_agree(tmp_path: Path) -> None:
    records = [(1_700_000_000, 123, ETH_IPV4_UDP, 42), (1_700_000_001, 0, ETH_IPV4_UDP[:20], 42)]
    for big_endian in (False, True):
        for nanos in (False, True):
            path = tmp_path / f"{big_endian}{nanos}.cap"
            path.write_bytes(pcap(records, nanos=nanos, big_endian=big_endian))
            batch = isolane.read_pcap(path)
            unit = 1 if nanos else 1000
            assert batch.timestamps_ns.tolist() == [1_700_000_000_000_000_000 + 123 * unit, 1_700_000_001_000_000_000]
            assert batch.lengths.tolist() == [42, 20] and batch.wire_lengths.tolist() == [42, 42]
            assert isolane.parse(batch)["status"].tolist() == [isolane.Status.OK, isolane.Status.TRUNCATED]


def test_pcapng_with_mixed_link_types(tmp_path: Path) -> None:
    sll = struct.pack(">HHH8sH", 0, 1, 6, b"\0" * 8, 0x0800) + ETH_IPV4_UDP[14:]
    path = tmp_path / "capture.pcap"  # content decides the format, not the name
    path.write_bytes(pcapng([(1, 9), (113, None)], [(0, 5, ETH_IPV4_UDP, 42), (1, 7, sll, len(sll))]))
    batch = isolane.read_pcap(path)
    assert batch.link_type is None and batch.link_types.tolist() == [1, 113]
    assert batch.timestamps_ns.tolist() == [5, 7000]
    rows = isolane.parse(batch)
    assert rows["dst_port"].tolist() == [53, 53] and rows["vlan"].tolist() == [-1, -1]


def _error_for(tmp_path: Path, content: bytes) -> isolane.PcapError:
    path = tmp_path / "bad.pcap"
    path.write_bytes(content)
    with pytest.raises(isolane.PcapError) as caught:
        isolane.read_pcap(path)
    assert str(path) in str(caught.value) and caught.value.path == str(path)
    return caught.value


def test_bad_magic(tmp_path: Path) -> None:
    err = _error_for(tmp_path, b"this is not a capture")
    assert err.offset == 0 and "bad magic" in str(err)


def test_truncated_final_record_says_where(tmp_path: Path) -> None:
    whole = pcap([(1, 0, ETH_IPV4_UDP, 42)] * 3)
    err = _error_for(tmp_path, whole[:-5])
    assert (err.offset, err.packet) == (24 + 2 * 58, 3)  # the third packet, as Wireshark counts
    assert "truncated final record" in str(err) and "byte offset 140, packet 3" in str(err)


def test_record_longer_than_snaplen(tmp_path: Path) -> None:
    content = bytearray(pcap([(1, 0, ETH_IPV4_UDP, 42)]))
    content[32:36] = struct.pack("<I", 0x7FFF_0000)
    err = _error_for(tmp_path, bytes(content))
    assert err.offset == 24 and "longer than the snap length" in str(err)


def test_impossible_pcapng_block_length(tmp_path: Path) -> None:
    content = bytearray(pcapng([(1, None)], [(0, 1, ETH_IPV4_UDP, 42)]))
    epb_at = 28 + 20
    content[epb_at + 4 : epb_at + 8] = struct.pack("<I", 10)
    err = _error_for(tmp_path, bytes(content))
    assert err.offset == epb_at and "impossible block length 10" in str(err)


def test_unsupported_link_type_is_named(tmp_path: Path) -> None:
    err = _error_for(tmp_path, pcap([], link_type=147))
    assert "unsupported link type 147" in str(err)


def test_missing_file_is_file_not_found(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        isolane.read_pcap(tmp_path / "nope.pcap")


def test_iter_pcap_streams_every_packet_once(tmp_path: Path) -> None:
    path = tmp_path / "many.pcap"
    records = [(i, i, ETH_IPV4_UDP[: 14 + i % 28], 42) for i in range(1000)]
    path.write_bytes(pcap(records))
    whole = isolane.read_pcap(path)
    stream = isolane.iter_pcap(path, batch_size=64)
    batches = list(stream)
    assert [len(b) for b in batches] == [64] * 15 + [40]
    assert np.array_equal(np.concatenate([b.timestamps_ns for b in batches]), whole.timestamps_ns)
    assert b"".join(b.packet(i) for b in batches for i in range(len(b))) == b"".join(whole.packet(i) for i in range(len(whole)))
    assert stream.position == stream.size == path.stat().st_size and stream.packets_read == 1000
    assert stream.format == "pcap"


def test_iter_pcap_raises_at_the_corrupt_record(tmp_path: Path) -> None:
    path = tmp_path / "cut.pcap"
    path.write_bytes(pcap([(1, 0, ETH_IPV4_UDP, 42)] * 10)[:-1])
    stream = isolane.iter_pcap(path, batch_size=4)
    assert len(next(stream)) == 4 and len(next(stream)) == 4
    with pytest.raises(isolane.PcapError, match="packet 10"):
        next(stream)
    with pytest.raises(ValueError, match="batch_size"):
        isolane.iter_pcap(path, batch_size=0)
