//! Capture files built byte by byte: both pcap byte orders and resolutions, pcapng with several
//! interfaces and sections, and every kind of corruption the reader must name.

use super::*;
use proptest::prelude::*;

pub(super) fn pcap_file(big_endian: bool, nanos: bool, snaplen: u32, link: u32, records: &[(u32, u32, &[u8], u32)]) -> Vec<u8> {
    let u32b = |v: u32| if big_endian { v.to_be_bytes() } else { v.to_le_bytes() };
    let u16b = |v: u16| if big_endian { v.to_be_bytes() } else { v.to_le_bytes() };
    let mut file = Vec::new();
    file.extend_from_slice(&u32b(if nanos { 0xa1b2_3c4d } else { 0xa1b2_c3d4 }));
    file.extend_from_slice(&u16b(2));
    file.extend_from_slice(&u16b(4));
    file.extend_from_slice(&[0; 8]);
    file.extend_from_slice(&u32b(snaplen));
    file.extend_from_slice(&u32b(link));
    for &(sec, frac, data, wire) in records {
        for v in [sec, frac, data.len() as u32, wire] {
            file.extend_from_slice(&u32b(v));
        }
        file.extend_from_slice(data);
    }
    file
}

fn block(block_type: u32, body: &[u8]) -> Vec<u8> {
    let len = (12 + body.len().div_ceil(4) * 4) as u32;
    let mut out = block_type.to_le_bytes().to_vec();
    out.extend_from_slice(&len.to_le_bytes());
    out.extend_from_slice(body);
    out.resize(len as usize - 4, 0);
    out.extend_from_slice(&len.to_le_bytes());
    out
}

fn shb() -> Vec<u8> {
    let mut body = pcapng::BYTE_ORDER_MAGIC.to_le_bytes().to_vec();
    body.extend_from_slice(&[1, 0, 0, 0]);
    body.extend_from_slice(&u64::MAX.to_le_bytes());
    block(pcapng::SHB, &body)
}

fn idb(link: u16, tsresol: Option<u8>) -> Vec<u8> {
    let mut body = link.to_le_bytes().to_vec();
    body.extend_from_slice(&[0, 0]);
    body.extend_from_slice(&0u32.to_le_bytes());
    if let Some(resol) = tsresol {
        body.extend_from_slice(&[9, 0, 1, 0, resol, 0, 0, 0]); // if_tsresol
        body.extend_from_slice(&[0, 0, 0, 0]); // opt_endofopt
    }
    block(1, &body)
}

fn epb(interface: u32, ticks: u64, data: &[u8], wire: u32) -> Vec<u8> {
    let mut body = interface.to_le_bytes().to_vec();
    body.extend_from_slice(&((ticks >> 32) as u32).to_le_bytes());
    body.extend_from_slice(&(ticks as u32).to_le_bytes());
    body.extend_from_slice(&(data.len() as u32).to_le_bytes());
    body.extend_from_slice(&wire.to_le_bytes());
    body.extend_from_slice(data);
    block(6, &body)
}

/// Reads through both paths (streamed and indexed in place) and checks they agree.
fn read(bytes: &[u8]) -> Result<PacketBuffers> {
    let streamed = read_all(bytes, bytes.len());
    let mut indexed = index(bytes);
    match (&streamed, &mut indexed) {
        (Ok(streamed), Ok(indexed)) => {
            indexed.data = bytes.to_vec();
            assert_eq!(packets(streamed), packets(indexed));
            assert_eq!((&streamed.timestamps_ns, &streamed.wire_lengths), (&indexed.timestamps_ns, &indexed.wire_lengths));
            assert_eq!(streamed.link_types, indexed.link_types);
        }
        (Err(CoreError::Pcap { offset: a, packet: p, reason: r }), Err(CoreError::Pcap { offset: b, packet: q, reason: s })) => {
            assert_eq!((*a, *p, r.as_str()), (*b, *q, s.as_str()));
        }
        (streamed, indexed) => panic!("paths disagree: {streamed:?} vs {indexed:?}"),
    }
    streamed
}

fn packets(out: &PacketBuffers) -> Vec<Vec<u8>> {
    let view = out.view();
    (0..view.len()).map(|i| view.packet(i).to_vec()).collect()
}

fn reason(err: CoreError) -> (u64, u64, String) {
    match err {
        CoreError::Pcap { offset, packet, reason } => (offset, packet, reason),
        other => panic!("expected a pcap error, got {other}"),
    }
}

#[test]
fn pcap_all_magics() {
    for big_endian in [false, true] {
        for nanos in [false, true] {
            let file = pcap_file(big_endian, nanos, 65535, 1, &[(10, 5, &[1, 2, 3], 60), (11, 0, &[4], 1)]);
            let out = read(&file).unwrap();
            let unit = if nanos { 1 } else { 1000 };
            assert_eq!(out.timestamps_ns, vec![10_000_000_000 + 5 * unit, 11_000_000_000]);
            assert_eq!((out.lengths.clone(), out.wire_lengths.clone()), (vec![3, 1], vec![60, 1]));
            assert_eq!(packets(&out), vec![vec![1, 2, 3], vec![4]]);
        }
    }
}

#[test]
fn pcap_timestamps_past_2038_stay_positive() {
    let out = read(&pcap_file(false, false, 0, 1, &[(u32::MAX, 999_999, &[0], 1)])).unwrap();
    assert_eq!(out.timestamps_ns[0], i64::from(u32::MAX) * 1_000_000_000 + 999_999_000);
}

#[test]
fn bad_magic_and_short_files() {
    assert!(reason(read(b"GIF89a....").unwrap_err()).2.contains("bad magic 0x38464947"));
    assert!(reason(read(&[0xd4, 0xc3]).unwrap_err()).2.contains("too short"));
    let header_only = &pcap_file(false, false, 100, 1, &[])[..20];
    assert!(reason(read(header_only).unwrap_err()).2.contains("truncated pcap file header"));
    assert_eq!(read(&pcap_file(false, false, 100, 1, &[])).unwrap().len(), 0);
}

#[test]
fn truncated_final_record_names_offset_and_packet() {
    let file = pcap_file(false, false, 100, 1, &[(1, 0, &[7; 10], 10), (2, 0, &[8; 10], 10)]);
    let (offset, packet, why) = reason(read(&file[..file.len() - 3]).unwrap_err());
    assert_eq!((offset, packet), (24 + 26, 2));
    assert!(why.contains("truncated final record: 26 bytes announced, 23 left"), "{why}");
    let (offset, _, why) = reason(read(&file[..24 + 26 + 5]).unwrap_err());
    assert_eq!(offset, 50);
    assert!(why.contains("record header"), "{why}");
}

#[test]
fn record_longer_than_snaplen_is_an_error_not_an_allocation() {
    let mut file = pcap_file(false, false, 65535, 1, &[(1, 0, &[0; 4], 4)]);
    file[24 + 8..24 + 12].copy_from_slice(&0xffff_fff0u32.to_le_bytes());
    let (offset, packet, why) = reason(read(&file).unwrap_err());
    assert_eq!((offset, packet), (24, 1));
    assert!(why.contains("longer than the snap length"), "{why}");
}

#[test]
fn fcs_bits_of_the_link_type_field_are_ignored() {
    let out = read(&pcap_file(false, false, 100, 0x4000_0001, &[(1, 0, &[0; 4], 4)])).unwrap();
    assert_eq!(out.link_types, vec![linktype::ETHERNET]);
}

#[test]
fn unsupported_link_type_is_named() {
    let why = reason(read(&pcap_file(false, false, 100, 105, &[])).unwrap_err()).2;
    assert!(why.contains("unsupported link type 105"), "{why}");
}

#[test]
fn pcapng_interfaces_resolutions_and_sections() {
    let mut file = shb();
    file.extend(idb(1, None)); // microseconds by default
    file.extend(idb(113, Some(9))); // nanoseconds
    file.extend(epb(0, 1_500_000, &[1, 2], 70));
    file.extend(epb(1, 2_000_000_123, &[3], 3));
    file.extend(shb()); // a new section forgets the interfaces
    file.extend(idb(1, Some(0x80 | 10))); // 2^-10 s
    file.extend(epb(0, 1024 + 512, &[4, 5, 6], 6));
    let out = read(&file).unwrap();
    assert_eq!(out.timestamps_ns, vec![1_500_000_000, 2_000_000_123, 1_500_000_000]);
    assert_eq!(out.link_types, vec![1, 113, 1]);
    assert_eq!(out.lengths, vec![2, 1, 3]);
    assert_eq!(out.wire_lengths, vec![70, 3, 6]);
    assert_eq!(out.uniform_link_type(), None);
}

#[test]
fn pcapng_corruptions_are_named() {
    let mut good = shb();
    good.extend(idb(1, None));
    let shb_len = shb().len() as u64;
    let packets_from = good.len() as u64;
    good.extend(epb(0, 1, &[1, 2, 3, 4], 4));

    let mut bad_len = good.clone();
    bad_len[packets_from as usize + 4] = 13;
    let (offset, _, why) = reason(read(&bad_len).unwrap_err());
    assert_eq!(offset, packets_from);
    assert!(why.contains("impossible block length 13"), "{why}");

    let mut mismatch = good.clone();
    let end = mismatch.len();
    mismatch[end - 4] = 0x40;
    assert!(reason(read(&mismatch).unwrap_err()).2.contains("does not match its trailing copy"));

    let mut unknown_interface = good.clone();
    unknown_interface[packets_from as usize + 8] = 3;
    let why = reason(read(&unknown_interface).unwrap_err()).2;
    assert!(why.contains("interface 3, but the section has 1"), "{why}");

    let truncated = &good[..good.len() - 2];
    let (offset, packet, why) = reason(read(truncated).unwrap_err());
    assert_eq!((offset, packet), (packets_from, 1));
    assert!(why.contains("truncated final block"), "{why}");

    let mut bad_order = good.clone();
    bad_order[8] = 0;
    assert!(reason(read(&bad_order).unwrap_err()).2.contains("byte-order magic"));
    assert!(shb_len > 0);
}

#[test]
fn streaming_in_small_batches_sees_every_packet_once() {
    let records: Vec<(u32, u32, Vec<u8>)> = (0..1000u32).map(|i| (i, i, vec![i as u8; (i % 50) as usize])).collect();
    let refs: Vec<_> = records.iter().map(|(s, f, d)| (*s, *f, d.as_slice(), d.len() as u32)).collect();
    let file = pcap_file(false, true, 100, 1, &refs);
    let mut reader = PcapReader::new(file.as_slice()).unwrap();
    let (mut seen, mut seen_packets) = (Vec::new(), Vec::new());
    loop {
        let out = reader.next_batch(Limits { packets: 7, bytes: 200 }, 256).unwrap();
        if out.is_empty() {
            break;
        }
        assert!(out.len() <= 7 && out.data.len() < 200 + 16 + 50, "batch of {} packets, {} bytes", out.len(), out.data.len());
        seen_packets.extend(packets(&out));
        seen.extend(out.timestamps_ns);
    }
    assert_eq!(seen, (0..1000i64).map(|i| i * 1_000_000_000 + i).collect::<Vec<_>>());
    assert_eq!(seen_packets, records.iter().map(|r| r.2.clone()).collect::<Vec<_>>());
    assert_eq!(reader.position(), file.len() as u64);
    assert_eq!(reader.packets_read(), 1000);
}

/// A reader that hands out one byte per call, to exercise every refill path.
struct Trickle<'a>(&'a [u8]);

impl std::io::Read for Trickle<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let Some((&first, rest)) = self.0.split_first() else { return Ok(0) };
        if buf.is_empty() {
            return Ok(0);
        }
        buf[0] = first;
        self.0 = rest;
        Ok(1)
    }
}

#[test]
fn byte_at_a_time_reads_match() {
    let mut file = shb();
    file.extend(idb(1, None));
    for i in 0..50u64 {
        file.extend(epb(0, i, &vec![i as u8; i as usize], i as u32));
    }
    let trickled = read_all(Trickle(&file), 0).unwrap();
    assert_eq!(packets(&trickled), packets(&read(&file).unwrap()));
    assert_eq!(trickled.len(), 50);
}

/// Streams `bytes` in batches of 3 packets, as the commands read: every packet, and the issues.
fn stream(bytes: &[u8]) -> (PacketBuffers, Issues) {
    stream_from(PcapReader::new(bytes).unwrap())
}

fn stream_from<R: std::io::Read>(reader: PcapReader<R>) -> (PacketBuffers, Issues) {
    try_stream(reader).unwrap()
}

fn try_stream<R: std::io::Read>(mut reader: PcapReader<R>) -> Result<(PacketBuffers, Issues)> {
    let mut all = PacketBuffers::default();
    loop {
        let batch = reader.next_batch(Limits { packets: 3, bytes: 1 << 20 }, 64)?;
        if batch.is_empty() {
            return Ok((all, reader.issues().clone()));
        }
        let view = batch.view();
        for i in 0..batch.len() {
            all.push(view.packet(i), batch.wire_lengths[i], batch.timestamps_ns[i], batch.link_types[i]);
        }
    }
}

#[test]
fn a_capture_cut_short_streams_its_complete_packets_and_says_where() {
    let file = pcap_file(false, false, 100, 1, &[(1, 0, &[7; 10], 10), (2, 0, &[8; 10], 10), (3, 0, &[9; 10], 10), (4, 0, &[6; 10], 10)]);
    let (out, issues) = stream(&file[..file.len() - 3]);
    assert_eq!(packets(&out), vec![vec![7; 10], vec![8; 10], vec![9; 10]]);
    let cut = issues.truncated.unwrap();
    assert_eq!((cut.packet, cut.offset, cut.announced, cut.bytes_left, cut.what), (4, 24 + 3 * 26, 26, 23, "record"));
    let (out, issues) = stream(&file[..24 + 26 + 5]);
    assert_eq!((out.len(), issues.truncated.map(|cut| (cut.packet, cut.bytes_left, cut.what))), (1, Some((2, 5, "record header"))));
    assert_eq!(stream(&file).1, Issues::default());
}

#[test]
fn a_pcapng_file_cut_inside_its_section_header_is_no_capture() {
    let file = shb();
    let mut reader = PcapReader::new(&file[..file.len() - 1]).unwrap();
    let (offset, packet, why) = reason(reader.next_batch(Limits::WHOLE_FILE, 0).unwrap_err());
    assert_eq!((offset, packet), (0, 1));
    assert!(why.contains("truncated final section header block"), "{why}");
}

#[test]
fn packets_earlier_than_the_one_before_are_counted() {
    let file = pcap_file(false, false, 100, 1, &[(5, 0, &[1], 1), (4, 0, &[2], 1), (4, 0, &[3], 1), (6, 0, &[4], 1), (3, 0, &[5], 1)]);
    let (out, issues) = stream(&file);
    assert_eq!(out.timestamps_ns, vec![5_000_000_000, 4_000_000_000, 4_000_000_000, 6_000_000_000, 3_000_000_000]);
    assert_eq!(issues.out_of_order, 2);
}

#[test]
fn sub_second_fields_of_a_second_or_more_carry_into_the_seconds_and_are_counted() {
    let micro = pcap_file(false, false, 100, 1, &[(10, 999_999, &[1], 1), (10, 1_000_000, &[2], 1), (10, 2_147_000_000, &[3], 1)]);
    let (out, issues) = stream(&micro);
    assert_eq!(out.timestamps_ns, vec![10_999_999_000, 11_000_000_000, 2_157_000_000_000]);
    assert_eq!(issues.bad_subsecond, 2);
    let nano = pcap_file(true, true, 100, 1, &[(10, 999_999_999, &[1], 1), (10, 1_500_000_000, &[2], 1)]);
    let (out, issues) = stream(&nano);
    assert_eq!((out.timestamps_ns, issues.bad_subsecond), (vec![10_999_999_999, 11_500_000_000], 1));
}

#[test]
fn a_wire_length_below_the_captured_length_is_raised_to_it_and_counted() {
    let file = pcap_file(false, false, 100, 1, &[(1, 0, &[1; 42], 30), (1, 1, &[1; 42], 60)]);
    let (out, issues) = stream(&file);
    assert_eq!((out.wire_lengths, issues.wire_below_captured), (vec![42, 60], 1));
    assert_eq!(read(&file).unwrap().wire_lengths, vec![42, 60]); // read_pcap's paths too
}

/// An obsolete Packet Block: 16-bit interface id and drops count, then the EPB's fields.
fn obsolete_packet_block(interface: u16, ticks: u64, data: &[u8], wire: u32) -> Vec<u8> {
    let mut body = interface.to_le_bytes().to_vec();
    body.extend_from_slice(&7u16.to_le_bytes()); // drops
    body.extend_from_slice(&((ticks >> 32) as u32).to_le_bytes());
    body.extend_from_slice(&(ticks as u32).to_le_bytes());
    body.extend_from_slice(&(data.len() as u32).to_le_bytes());
    body.extend_from_slice(&wire.to_le_bytes());
    body.extend_from_slice(data);
    body.extend_from_slice(&[0; 4]); // opt_endofopt
    block(2, &body)
}

#[test]
fn obsolete_packet_blocks_are_read_like_enhanced_ones() {
    let mut file = shb();
    file.extend(idb(1, Some(9)));
    file.extend(idb(113, None));
    file.extend(obsolete_packet_block(1, (3 << 32) | 5, &[1, 2, 3], 60));
    file.extend(epb(0, 20, &[4], 4));
    let out = read(&file).unwrap();
    assert_eq!(packets(&out), vec![vec![1, 2, 3], vec![4]]);
    assert_eq!(out.timestamps_ns, vec![((3u64 << 32) + 5) as i64 * 1000, 20]);
    assert_eq!((out.wire_lengths.clone(), out.link_types.clone()), (vec![60, 4], vec![113, 1]));
    assert_eq!(stream(&file).1.obsolete_packet_blocks, 1);
}

#[test]
fn well_formed_blocks_isolane_does_not_use_are_skipped_whatever_their_length() {
    let mut file = shb();
    file.extend(idb(1, None));
    // Empty name resolution, statistics, decryption secrets and custom blocks, then local-use
    // and undefined types, empty and not.
    for block_type in [4, 5, 10, 0x0bad, 0x4000_0bad, 0x8000_0001, 0x8000_0001, 0x0000_0fff] {
        file.extend(block(block_type, &[]));
    }
    file.extend(block(0x8000_0002, &[1, 2, 3, 4, 5]));
    file.extend(epb(0, 1, &[9], 1));
    let (out, issues) = stream(&file);
    assert_eq!(packets(&out), vec![vec![9]]);
    assert_eq!(issues.unknown_blocks_skipped, 4);
    assert_eq!(read(&file).unwrap().len(), 1);
}

#[test]
fn no_message_shows_a_parser_internal() {
    let mut file = shb();
    file.extend(block(1, &[1, 0])); // an interface block too short for its fields
    let why = reason(read(&file).unwrap_err()).2;
    assert_eq!(why, "interface description block of 16 bytes is shorter than its 20 fixed bytes");
    let mut file = shb();
    file.extend(idb(1, None));
    file.extend(block(6, &[0; 8]));
    assert_eq!(reason(read(&file).unwrap_err()).2, "enhanced packet block of 20 bytes is shorter than its 32 fixed bytes");
    let mut file = shb();
    file.extend(idb(1, None));
    let mut long = epb(0, 1, &[1; 4], 4);
    long[20] = 200; // captured length 200 in a block of 36 bytes
    file.extend(long);
    assert_eq!(reason(read(&file).unwrap_err()).2, "enhanced packet block's captured length 200 runs past its block (36 bytes)");
    let mut version_2 = shb();
    version_2[12] = 2;
    assert!(reason(read(&version_2).unwrap_err()).2.contains("unsupported pcapng version 2.0"));
}

/// The little-endian file's blocks, every field swapped to big endian.
fn big_endian_pcapng() -> Vec<u8> {
    let be_block = |block_type: u32, fields: &[u32], data: &[u8]| {
        let mut body: Vec<u8> = fields.iter().flat_map(|v| v.to_be_bytes()).collect();
        body.extend_from_slice(data);
        body.resize(body.len().div_ceil(4) * 4, 0);
        let len = (12 + body.len()) as u32;
        let mut out = block_type.to_be_bytes().to_vec();
        out.extend_from_slice(&len.to_be_bytes());
        out.extend(body);
        out.extend_from_slice(&len.to_be_bytes());
        out
    };
    let mut file = be_block(pcapng::SHB, &[pcapng::BYTE_ORDER_MAGIC, 0x0001_0000, u32::MAX, u32::MAX], &[]);
    file.extend(be_block(1, &[0x0001_0000, 0], &[0, 9, 0, 1, 9, 0, 0, 0])); // Ethernet; if_tsresol 9
    file.extend(be_block(6, &[0, 0, 1234, 2, 60], &[0xab, 0xcd]));
    file.extend(be_block(2, &[0x0000_0000, 0, 99, 1, 1], &[0xef]));
    file
}

#[test]
fn big_endian_pcapng_sections_read_every_field_in_their_order() {
    let out = read(&big_endian_pcapng()).unwrap();
    assert_eq!(packets(&out), vec![vec![0xab, 0xcd], vec![0xef]]);
    assert_eq!((out.timestamps_ns.clone(), out.wire_lengths.clone()), (vec![1234, 99], vec![60, 1]));
}

#[test]
fn packet_numbers_in_errors_count_from_one() {
    let mut file = pcap_file(false, false, 100, 1, &[(1, 0, &[1; 4], 4), (1, 0, &[1; 4], 4)]);
    file[24 + 20 + 10] = 0xff; // the second record's captured length: 16 MiB
    let err = read(&file).unwrap_err();
    assert!(err.to_string().starts_with("byte offset 44, packet 2: record of"), "{err}");
    assert_eq!(read(b"XXXXXXXXXXXXXXXXXXXXXXXXXXXX").unwrap_err().to_string(), "byte offset 0: bad magic 0x58585858: not a pcap or pcapng file");
}

#[test]
fn compressed_captures_read_like_plain_ones() {
    use std::io::Write;
    let mut file = shb();
    file.extend(idb(1, None));
    file.extend((0..100u64).flat_map(|i| epb(0, i, &vec![i as u8; i as usize], i as u32)));
    let mut gzip = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gzip.write_all(&file).unwrap();
    let gzip = gzip.finish().unwrap();
    let (gzip_len, plain) = (gzip.len() as u64, read(&file).unwrap());
    let input = input::Input::new(std::io::Cursor::new(gzip), Some(gzip_len)).unwrap();
    assert_eq!(input.compression, input::Compression::Gzip);
    let progress = input.progress.clone();
    let out = read_all(input.reader, 0).unwrap();
    assert_eq!(packets(&out), packets(&plain));
    assert_eq!(progress.bytes(), gzip_len);
    let input = input::Input::new(std::io::Cursor::new(file.clone()), None).unwrap();
    assert_eq!(input.compression, input::Compression::None);
    assert_eq!(packets(&read_all(input.reader, 0).unwrap()), packets(&plain));
    let zstd = ruzstd::encoding::compress_to_vec(file.as_slice(), ruzstd::encoding::CompressionLevel::Fastest);
    let input = input::Input::new(std::io::Cursor::new(zstd), None).unwrap();
    assert_eq!(input.compression, input::Compression::Zstd);
    assert_eq!(packets(&read_all(input.reader, 0).unwrap()), packets(&plain));
}

#[test]
fn a_compressed_stream_cut_short_gives_the_packets_before_the_cut() {
    use std::io::Write;
    let records: Vec<(u32, u32, Vec<u8>)> = (0..2000u32).map(|i| (i, 0, i.to_le_bytes().repeat(20))).collect();
    let refs: Vec<_> = records.iter().map(|(s, f, d)| (*s, *f, d.as_slice(), d.len() as u32)).collect();
    let file = pcap_file(false, false, 100, 1, &refs);
    let mut gzip = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gzip.write_all(&file).unwrap();
    let gzip = gzip.finish().unwrap();
    let input = input::Input::new(std::io::Cursor::new(gzip[..gzip.len() / 2].to_vec()), None).unwrap();
    let progress = input.progress.clone();
    let (out, _) = stream_from(PcapReader::new(input.reader).unwrap());
    // zlib decodes 989 whole records from this half; the decoder may hold back a little.
    assert!(progress.stream_cut() && out.len() > 900 && out.len() < 990, "{} packets", out.len());
    assert_eq!(packets(&out), records[..out.len()].iter().map(|r| r.2.clone()).collect::<Vec<_>>());
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(
        std::env::var("ISOLANE_FUZZ_CASES").ok().and_then(|n| n.parse().ok()).unwrap_or(2_000)
    ))]

    #[test]
    fn fuzz_arbitrary_bytes_never_panic(body in proptest::collection::vec(any::<u8>(), 0..512), ng in any::<bool>()) {
        let mut file = if ng { shb() } else { pcap_file(false, false, 200, 1, &[]) };
        file.extend(body);
        let _ = read(&file);
    }

    #[test]
    fn fuzz_mutated_captures_never_panic(flips in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..6), cut in any::<prop::sample::Index>(), ng in any::<bool>()) {
        let mut file = if ng {
            let mut f = shb();
            f.extend(idb(1, Some(9)));
            f.extend(epb(0, 5, &[1; 30], 40));
            f.extend(epb(0, 6, &[2; 3], 3));
            f
        } else {
            pcap_file(true, true, 64, 1, &[(1, 2, &[1; 30], 40), (3, 4, &[2; 3], 3)])
        };
        for (at, value) in flips {
            let at = at.index(file.len());
            file[at] = value;
        }
        file.truncate(cut.index(file.len() + 1));
        let strict = read(&file);
        if let Ok(out) = &strict {
            prop_assert!(out.view().len() == out.len());
        }
        // Streamed, a cut file gives what the strict readers read up to the cut.
        if let Ok((out, issues)) = PcapReader::new(file.as_slice()).and_then(try_stream) {
            match (strict, issues.truncated) {
                (Ok(whole), None) => prop_assert_eq!(packets(&whole), packets(&out)),
                (Err(CoreError::Pcap { packet, .. }), Some(cut)) => prop_assert_eq!((packet, cut.packet), (out.len() as u64 + 1, out.len() as u64 + 1)),
                (strict, truncated) => prop_assert!(false, "strict {:?}, streamed cut {:?}", strict.map(|b| b.len()), truncated),
            }
        }
    }
}
