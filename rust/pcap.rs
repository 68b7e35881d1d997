//! Streaming pcap and pcapng reader with bounded memory and errors that say where.
//!
//! The format is detected from the first four bytes, never from the file name. This module
//! owns the buffering (packets stay where they were read, memory stays bounded, and every error
//! knows its byte offset), the checks that turn a corrupt file into an error instead of a hang,
//! and the count of what Wireshark reads with a warning ([`Issues`]): a file cut short, time
//! going backwards, impossible sub-second fields and wire lengths. pcapng blocks are decoded
//! in [`pcapng`]; [`input`] opens files, standard input and compressed captures, and [`merge`]
//! reads several captures as one, in timestamp order.

use std::io::{self, Read};

use pcap_parser::parse_pcap_header;

use crate::batch::{linktype, PacketBuffers};
use crate::error::{CoreError, Result};
use crate::memory;

pub mod input;
pub mod merge;
mod pcapng;

/// No real capture has a record this large (libpcap caps pcapng blocks at 16 MiB); a length
/// beyond it means a corrupt file, and honouring it would mean allocating gigabytes.
const MAX_BLOCK_LEN: usize = 16 << 20;
/// A snap length of 0 means "unlimited"; libpcap's largest snap length stands in for it.
const DEFAULT_SNAPLEN: u32 = 262_144;
/// A streamed batch reads its bytes up to this much at a time (and at least its byte limit):
/// few system calls, and few enough bytes read ahead of the batch.
const READ_CHUNK: usize = 1 << 20;
/// A batch buffer that must grow grows by at least this much.
const MIN_GROWTH: usize = 64 << 10;

/// What the first bytes say the file is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Pcap,
    PcapNg,
}

#[derive(Debug)]
enum State {
    Pcap { big_endian: bool, nanoseconds: bool, snaplen: u32, link_type: u16 },
    PcapNg(pcapng::Section),
}

/// A packet found in a record, relative to the record's first byte.
struct PacketAt {
    start: usize,
    len: usize,
    wire_len: u32,
    timestamp_ns: i64,
    link_type: u16,
}

/// What a record has that the reader counts in its [`Issues`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Note {
    Plain,
    /// A pcap record whose sub-second field is a second or more.
    SubsecondOutOfRange,
    ObsoletePacketBlock,
    UnknownBlock,
}

/// The outcome of looking at the bytes where the next record starts.
enum Step {
    /// A whole record of `len` bytes, carrying a packet or not (interface, statistics blocks).
    Record { len: usize, packet: Option<PacketAt>, note: Note },
    /// The record needs `total` bytes from its start; `what` names it for the error if the
    /// file ends first.
    NeedMore { total: usize, what: &'static str },
}

/// How much one batch may hold.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub packets: usize,
    /// Bytes of the file per batch (packet bytes plus record headers), checked between records.
    pub bytes: usize,
}

impl Limits {
    pub const WHOLE_FILE: Limits = Limits { packets: usize::MAX, bytes: usize::MAX };
}

/// What the reader met that Wireshark reads too, with a warning or without a word; counted so
/// that the commands can say it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Issues {
    /// The file ended inside a record: every packet before it was read.
    pub truncated: Option<Truncation>,
    /// Packets whose timestamp is earlier than the packet's before them.
    pub out_of_order: u64,
    /// pcap records whose microseconds (nanoseconds) field is 1e6 (1e9) or more; the excess is
    /// carried into the seconds, as Wireshark's time arithmetic does.
    pub bad_subsecond: u64,
    /// Packets whose wire length is below their captured length; it is raised to the captured
    /// length (the bytes captured were on the wire, and Wireshark dissects them all).
    pub wire_below_captured: u64,
    /// Packets read from pcapng's obsolete Packet Blocks (type 2).
    pub obsolete_packet_blocks: u64,
    /// Well-formed pcapng blocks of types the spec does not define (local-use ones among
    /// them), skipped.
    pub unknown_blocks_skipped: u64,
}

/// Where a capture was cut short.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Truncation {
    /// The number of the packet that was cut (counted from 1, as Wireshark does).
    pub packet: u64,
    /// The byte offset of the record that was cut.
    pub offset: u64,
    /// The record's length as far as it was read, and the bytes the file still had of it.
    pub announced: usize,
    pub bytes_left: usize,
    pub what: &'static str,
}

impl Truncation {
    /// The error of a reader that takes a cut file as corrupt.
    pub fn error(&self) -> CoreError {
        let reason = format!("truncated final {}: {} bytes announced, {} left in the file", self.what, self.announced, self.bytes_left);
        pcap_error(self.offset, self.packet, reason)
    }
}

/// Reads packets from a pcap or pcapng stream, a batch at a time.
///
/// A batch's `data` is the file's bytes as read, record headers and all: packets stay where
/// they were read and `offsets` point at them, so no packet byte is copied. Only a record cut
/// by the end of one batch moves, to the start of the next. A file that ends inside a record
/// ends the stream there, recorded in [`Issues::truncated`].
pub struct PcapReader<R> {
    reader: R,
    state: State,
    /// Bytes read but not yet taken into a batch, and the file offset of the first.
    carry: Vec<u8>,
    carry_offset: u64,
    exhausted: bool,
    packets_read: u64,
    last_timestamp_ns: Option<i64>,
    issues: Issues,
}

impl<R: Read> PcapReader<R> {
    /// Reads the file header; fails on anything that is neither pcap nor pcapng.
    pub fn new(mut reader: R) -> Result<Self> {
        let mut head = Vec::with_capacity(24);
        read_fully(&mut reader, &mut head, 24)?;
        let exhausted = head.len() < 24;
        if head.len() < 4 {
            return Err(pcap_error(0, 0, format!("file too short for a capture header ({} bytes)", head.len())));
        }
        let magic = u32::from_le_bytes([head[0], head[1], head[2], head[3]]);
        let (state, carry_offset) = match detect(magic) {
            Some(Format::Pcap) => {
                let state = read_pcap_header(&head)?;
                head.clear();
                (state, 24)
            }
            Some(Format::PcapNg) => (State::PcapNg(pcapng::Section::default()), 0), // the section header is the first block
            None => return Err(pcap_error(0, 0, format!("bad magic 0x{magic:08x}: not a pcap or pcapng file"))),
        };
        Ok(PcapReader { reader, state, carry: head, carry_offset, exhausted, packets_read: 0, last_timestamp_ns: None, issues: Issues::default() })
    }

    pub fn format(&self) -> Format {
        match self.state {
            State::Pcap { .. } => Format::Pcap,
            State::PcapNg(_) => Format::PcapNg,
        }
    }

    /// Bytes of the file taken into batches so far (for progress reports).
    pub fn position(&self) -> u64 {
        self.carry_offset
    }

    pub fn packets_read(&self) -> u64 {
        self.packets_read
    }

    pub fn issues(&self) -> &Issues {
        &self.issues
    }

    /// An error if the file was cut short: for callers that take that as corruption.
    pub fn check_complete(&self) -> Result<()> {
        self.issues.truncated.as_ref().map_or(Ok(()), |cut| Err(cut.error()))
    }

    /// Reads the next batch within `limits`; an empty batch means the end of the file.
    /// `capacity` is the room to reserve for its bytes (the file size, for a whole file).
    pub fn next_batch(&mut self, limits: Limits, capacity: usize) -> Result<PacketBuffers> {
        let mut out = PacketBuffers::default();
        let mut buffer = FillBuffer::new(capacity.max(self.carry.len()));
        buffer.extend_from_slice(&self.carry);
        self.carry.clear();
        let base = self.carry_offset;
        let mut pos = 0;
        loop {
            let mut need = None;
            while out.len() < limits.packets && pos < limits.bytes && pos < buffer.filled {
                match self.step(&buffer.bytes[pos..buffer.filled], base + pos as u64, out.len())? {
                    Step::Record { len, packet, .. } => {
                        if let Some(p) = packet {
                            out.push_at(pos + p.start, p.len, p.wire_len, p.timestamp_ns, p.link_type);
                        }
                        pos += len;
                    }
                    Step::NeedMore { total, what } => {
                        need = Some((total, what));
                        break;
                    }
                }
            }
            let full = out.len() >= limits.packets || pos >= limits.bytes;
            if full || (self.exhausted && pos == buffer.filled) {
                break;
            }
            if self.exhausted {
                let (announced, what) = need.unwrap_or((0, "record"));
                self.cut_short(base + pos as u64, out.len(), announced, buffer.filled - pos, what)?;
                buffer.filled = pos;
                break;
            }
            // The record being cut needs `wanted` more bytes; beyond it, read no further than the
            // batch's byte limit, so that little is left over to copy into the next batch.
            let wanted = need.map_or(0, |(total, _)| total.saturating_sub(buffer.filled - pos));
            let ahead = match limits.packets {
                usize::MAX => buffer.spare(),
                _ => READ_CHUNK.min(limits.bytes.saturating_sub(buffer.filled)).min(buffer.spare()),
            };
            self.read_more(&mut buffer, wanted.max(ahead).max(1))?;
        }
        self.carry.extend_from_slice(&buffer.bytes[pos..buffer.filled]);
        out.data = buffer.into_vec(pos);
        self.carry_offset = base + pos as u64;
        self.packets_read += out.len() as u64;
        Ok(out)
    }

    /// Appends up to `len` more bytes of the file to `buffer`, in as few reads as the source allows.
    fn read_more(&mut self, buffer: &mut FillBuffer, len: usize) -> Result<()> {
        let got = buffer.read_from(&mut self.reader, len)?;
        self.exhausted |= got < len;
        Ok(())
    }

    /// Records that the file ends inside the record at `offset`; a pcapng file cut before its
    /// first section header is complete is not a capture at all.
    fn cut_short(&mut self, offset: u64, packets_in_batch: usize, announced: usize, bytes_left: usize, what: &'static str) -> Result<()> {
        let cut = Truncation { packet: self.packets_read + packets_in_batch as u64 + 1, offset, announced, bytes_left, what };
        if matches!(self.state, State::PcapNg(_)) && offset == 0 {
            return Err(cut.error());
        }
        self.issues.truncated = Some(cut);
        Ok(())
    }

    #[inline]
    fn step(&mut self, bytes: &[u8], at: u64, packets_in_batch: usize) -> Result<Step> {
        let number = self.packets_read + packets_in_batch as u64 + 1;
        let step = match &mut self.state {
            State::Pcap { big_endian, nanoseconds, snaplen, link_type } => pcap_record(bytes, *big_endian, *nanoseconds, *snaplen, *link_type),
            State::PcapNg(section) => section.block(bytes),
        };
        match step.map_err(|reason| pcap_error(at, number, reason))? {
            Step::Record { len, mut packet, note } => {
                self.count(packet.as_mut(), note);
                Ok(Step::Record { len, packet, note })
            }
            need => Ok(need),
        }
    }

    /// Counts what `note` and the packet say in the issues, and raises a wire length below
    /// the captured length to it.
    #[inline]
    fn count(&mut self, packet: Option<&mut PacketAt>, note: Note) {
        match note {
            Note::Plain => {}
            Note::SubsecondOutOfRange => self.issues.bad_subsecond += 1,
            Note::ObsoletePacketBlock => self.issues.obsolete_packet_blocks += 1,
            Note::UnknownBlock => self.issues.unknown_blocks_skipped += 1,
        }
        let Some(packet) = packet else { return };
        if (packet.wire_len as usize) < packet.len {
            self.issues.wire_below_captured += 1;
            packet.wire_len = packet.len as u32;
        }
        if self.last_timestamp_ns.is_some_and(|last| packet.timestamp_ns < last) {
            self.issues.out_of_order += 1;
        }
        self.last_timestamp_ns = Some(packet.timestamp_ns);
    }
}

/// A batch's bytes: a zeroed allocation (fresh pages, so zeroing costs nothing) filled from
/// the front by reads straight into it, so that a read can ask for megabytes at once.
struct FillBuffer {
    bytes: Vec<u8>,
    filled: usize,
}

impl FillBuffer {
    fn new(capacity: usize) -> Self {
        FillBuffer { bytes: memory::zeroed_vec(capacity), filled: 0 }
    }

    fn spare(&self) -> usize {
        self.bytes.len() - self.filled
    }

    fn make_room(&mut self, len: usize) {
        if self.spare() < len {
            let wanted = (self.filled + len).max(self.bytes.len() * 2).max(MIN_GROWTH);
            self.bytes.resize(wanted, 0);
        }
    }

    fn extend_from_slice(&mut self, more: &[u8]) {
        self.make_room(more.len());
        self.bytes[self.filled..self.filled + more.len()].copy_from_slice(more);
        self.filled += more.len();
    }

    /// Reads until `len` bytes came or the source ended; returns how many came. A full buffer
    /// first reads one byte aside, so that finding the source's end costs no growth.
    fn read_from(&mut self, source: &mut impl Read, len: usize) -> io::Result<usize> {
        if self.spare() == 0 && len > 0 {
            let mut probe = [0u8; 1];
            if read_some(source, &mut probe)? == 0 {
                return Ok(0);
            }
            self.extend_from_slice(&probe);
            return Ok(1 + self.read_from(source, len - 1)?);
        }
        self.make_room(len);
        let (start, end) = (self.filled, self.filled + len);
        while self.filled < end {
            match read_some(source, &mut self.bytes[self.filled..end])? {
                0 => break,
                got => self.filled += got,
            }
        }
        Ok(self.filled - start)
    }

    fn into_vec(mut self, len: usize) -> Vec<u8> {
        self.bytes.truncate(len);
        self.bytes
    }
}

/// One read, retried when a signal interrupts it.
fn read_some(source: &mut impl Read, buf: &mut [u8]) -> io::Result<usize> {
    loop {
        match source.read(buf) {
            Err(err) if err.kind() == io::ErrorKind::Interrupted => {}
            done => return done,
        }
    }
}

/// Appends up to `len` bytes of `source` to `out`, fewer only at its end.
fn read_fully(source: &mut impl Read, out: &mut Vec<u8>, len: usize) -> io::Result<()> {
    source.take(len as u64).read_to_end(out).map(drop)
}

/// One classic pcap record: a 16-byte header and the captured bytes. This is the per-packet
/// hot path of reading, so the fixed header is read directly rather than through a parser.
#[inline]
fn pcap_record(bytes: &[u8], big_endian: bool, nanoseconds: bool, snaplen: u32, link_type: u16) -> std::result::Result<Step, String> {
    let Some(header) = bytes.get(..16) else {
        return Ok(Step::NeedMore { total: 16, what: "record header" });
    };
    let field = |at: usize| read_u32(&header[at..at + 4], big_endian);
    let caplen = field(8);
    if caplen > snaplen.max(DEFAULT_SNAPLEN) {
        return Err(format!("record of {caplen} bytes is longer than the snap length {snaplen}"));
    }
    let len = 16 + caplen as usize;
    if bytes.len() < len {
        return Ok(Step::NeedMore { total: len, what: "record" });
    }
    let fraction = u64::from(field(4));
    let (fraction_ns, per_second) = if nanoseconds { (fraction, 1_000_000_000) } else { (fraction * 1000, 1_000_000) };
    // A fraction of a second or more is taken as read, the excess carried into the seconds:
    // the time Wireshark computes with (it shows such a time as 10.1500000000 s).
    let note = if fraction >= per_second { Note::SubsecondOutOfRange } else { Note::Plain };
    let timestamp_ns = i64::from(field(0)) * 1_000_000_000 + fraction_ns as i64;
    let packet = PacketAt { start: 16, len: caplen as usize, wire_len: field(12), timestamp_ns, link_type };
    Ok(Step::Record { len, packet: Some(packet), note })
}

fn check_block_len(block_len: usize) -> std::result::Result<(), String> {
    if block_len < 12 || !block_len.is_multiple_of(4) || block_len > MAX_BLOCK_LEN {
        return Err(format!("impossible block length {block_len}"));
    }
    Ok(())
}

/// Reads a whole capture into one batch; a capture cut short is an error.
pub fn read_all<R: Read>(reader: R, size_hint: usize) -> Result<PacketBuffers> {
    let mut reader = PcapReader::new(reader)?;
    let out = reader.next_batch(Limits::WHOLE_FILE, size_hint)?;
    reader.check_complete()?;
    Ok(out)
}

/// Finds every packet of a capture that is already in memory (a mapped file), without copying
/// a byte: the result's `data` is left empty and its `offsets` point into `capture`. A capture
/// cut short is an error.
pub fn index(capture: &[u8]) -> Result<PacketBuffers> {
    let mut reader = PcapReader::new(&capture[..capture.len().min(24)])?;
    // The smallest record is 16 bytes of header plus a 14-byte Ethernet header: room for that
    // many packets is reserved (untouched pages cost nothing) so the arrays never move.
    let most = capture.len() / 30 + 1;
    let mut out = PacketBuffers {
        offsets: memory::with_capacity(most),
        lengths: memory::with_capacity(most),
        wire_lengths: memory::with_capacity(most),
        timestamps_ns: memory::with_capacity(most),
        link_types: memory::with_capacity(most),
        ..Default::default()
    };
    let mut pos = reader.carry_offset as usize;
    while pos < capture.len() {
        match reader.step(&capture[pos..], pos as u64, out.len())? {
            Step::Record { len, packet, .. } => {
                if let Some(p) = packet {
                    out.push_at(pos + p.start, p.len, p.wire_len, p.timestamp_ns, p.link_type);
                }
                pos += len;
            }
            Step::NeedMore { total, what } => {
                let cut = Truncation { packet: out.len() as u64 + 1, offset: pos as u64, announced: total, bytes_left: capture.len() - pos, what };
                return Err(cut.error());
            }
        }
    }
    Ok(out)
}

fn detect(magic: u32) -> Option<Format> {
    match magic {
        0xa1b2_c3d4 | 0xd4c3_b2a1 | 0xa1b2_3c4d | 0x4d3c_b2a1 => Some(Format::Pcap),
        pcapng::SHB => Some(Format::PcapNg),
        _ => None,
    }
}

fn read_pcap_header(head: &[u8]) -> Result<State> {
    if head.len() < 24 {
        return Err(pcap_error(0, 0, format!("truncated pcap file header: {} of 24 bytes", head.len())));
    }
    // The magic was checked, and nothing else of 24 bytes can fail to parse.
    let (_, header) = parse_pcap_header(head).map_err(|_| pcap_error(0, 0, "bad pcap file header".to_string()))?;
    // The top bits carry FCS information (libpcap's LT_LINKTYPE keeps the low 26 bits).
    let link_type = header.network.0 & 0x03ff_ffff;
    let link_type = u16::try_from(link_type).map_err(|_| pcap_error(20, 0, format!("unknown link type {link_type}")))?;
    check_link_type(link_type).map_err(|reason| pcap_error(20, 0, reason))?;
    Ok(State::Pcap { big_endian: header.is_bigendian(), nanoseconds: header.is_nanosecond_precision(), snaplen: header.snaplen, link_type })
}

fn check_link_type(link_type: u16) -> std::result::Result<(), String> {
    if linktype::is_supported(link_type) {
        return Ok(());
    }
    Err(format!(
        "unsupported link type {link_type} ({}); isolane reads Ethernet (1), Linux cooked SLL (113) and SLL2 (276), raw IP (101, 228, 229) and loopback (0, 108)",
        pcap_parser::Linktype(i32::from(link_type))
    ))
}

#[inline]
fn read_u32(bytes: &[u8], big_endian: bool) -> u32 {
    let bytes: [u8; 4] = bytes[..4].try_into().unwrap_or_default();
    if big_endian {
        u32::from_be_bytes(bytes)
    } else {
        u32::from_le_bytes(bytes)
    }
}

fn pcap_error(offset: u64, packet: u64, reason: String) -> CoreError {
    CoreError::Pcap { offset, packet, reason }
}

#[cfg(test)]
mod tests;
