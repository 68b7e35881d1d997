//! Streaming pcap and pcapng reader with bounded memory and errors that say where.
//!
//! The format is detected from the first four bytes, never from the file name. Records are
//! decoded by the `pcap-parser` crate; this module owns the buffering (packets stay where they
//! were read, memory stays bounded, and every error knows its byte offset) and the checks that
//! turn a corrupt file into an error instead of a hang or a silently shorter capture.

use std::io::Read;

use pcap_parser::parse_pcap_header;
use pcap_parser::pcapng::{self, Block};
use pcap_parser::traits::PcapNGPacketBlock;

use crate::batch::{linktype, PacketBuffers};
use crate::error::{CoreError, Result};
use crate::memory;

/// No real capture has a record this large (libpcap caps pcapng blocks at 16 MiB); a length
/// beyond it means a corrupt file, and honouring it would mean allocating gigabytes.
const MAX_BLOCK_LEN: usize = 16 << 20;
/// A snap length of 0 means "unlimited"; libpcap's largest snap length stands in for it.
const DEFAULT_SNAPLEN: u32 = 262_144;
/// Reads go at least 1 MiB at a time.
const READ_CHUNK: usize = 1 << 20;
const PCAPNG_SHB: u32 = 0x0a0d_0d0a;
const PCAPNG_BYTE_ORDER_MAGIC: u32 = 0x1a2b_3c4d;

/// What the first bytes say the file is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Pcap,
    PcapNg,
}

/// One pcapng interface: what its packets' link type and timestamps mean.
#[derive(Debug, Clone, Copy)]
struct Interface {
    link_type: u16,
    snaplen: u32,
    /// Timestamp units per second.
    resolution: u64,
    offset_seconds: i64,
}

/// What a pcapng block brings, copied out of the buffer it was parsed from.
enum BlockContent {
    Interface(Interface),
    Packet { interface: usize, bytes: std::ops::Range<usize>, wire_len: u32, ticks: u64 },
    Nothing,
}

#[derive(Debug)]
enum State {
    Pcap { big_endian: bool, nanoseconds: bool, snaplen: u32, link_type: u16 },
    PcapNg { big_endian: bool, interfaces: Vec<Interface> },
}

/// A packet found in a record, relative to the record's first byte.
struct PacketAt {
    start: usize,
    len: usize,
    wire_len: u32,
    timestamp_ns: i64,
    link_type: u16,
}

/// The outcome of looking at the bytes where the next record starts.
enum Step {
    /// A whole record of `len` bytes, carrying a packet or not (interface, statistics blocks).
    Record { len: usize, packet: Option<PacketAt> },
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

/// Reads packets from a pcap or pcapng stream, a batch at a time.
///
/// A batch's `data` is the file's bytes as read, record headers and all: packets stay where
/// they were read and `offsets` point at them, so no packet byte is copied. Only a record cut
/// by the end of one batch moves, to the start of the next.
pub struct PcapReader<R> {
    reader: R,
    state: State,
    /// Bytes read but not yet taken into a batch, and the file offset of the first.
    carry: Vec<u8>,
    carry_offset: u64,
    exhausted: bool,
    packets_read: u64,
}

impl<R: Read> PcapReader<R> {
    /// Reads the file header; fails on anything that is neither pcap nor pcapng.
    pub fn new(reader: R) -> Result<Self> {
        let mut this = PcapReader {
            reader,
            state: State::PcapNg { big_endian: false, interfaces: Vec::new() },
            carry: Vec::new(),
            carry_offset: 0,
            exhausted: false,
            packets_read: 0,
        };
        this.carry_at_least(24)?;
        let head = &this.carry;
        if head.len() < 4 {
            return Err(pcap_error(0, 0, format!("file too short for a capture header ({} bytes)", head.len())));
        }
        let magic = u32::from_le_bytes([head[0], head[1], head[2], head[3]]);
        match detect(magic) {
            Some(Format::Pcap) => {
                this.state = read_pcap_header(head)?;
                this.carry.drain(..24);
                this.carry_offset = 24;
            }
            Some(Format::PcapNg) => {} // the section header is the first block
            None => return Err(pcap_error(0, 0, format!("bad magic 0x{magic:08x}: not a pcap or pcapng file"))),
        }
        Ok(this)
    }

    pub fn format(&self) -> Format {
        match self.state {
            State::Pcap { .. } => Format::Pcap,
            State::PcapNg { .. } => Format::PcapNg,
        }
    }

    /// Bytes of the file taken into batches so far (for progress reports).
    pub fn position(&self) -> u64 {
        self.carry_offset
    }

    pub fn packets_read(&self) -> u64 {
        self.packets_read
    }

    /// Reads the next batch within `limits`; an empty batch means the end of the file.
    /// `capacity` is the room to reserve for its bytes (the file size, for a whole file).
    pub fn next_batch(&mut self, limits: Limits, capacity: usize) -> Result<PacketBuffers> {
        let mut out = PacketBuffers { data: memory::byte_buffer(capacity.max(self.carry.len())), ..Default::default() };
        out.data.append(&mut self.carry);
        let base = self.carry_offset;
        let mut pos = 0;
        loop {
            let mut need = None;
            while out.len() < limits.packets && pos < limits.bytes && pos < out.data.len() {
                let at = base + pos as u64;
                match self.step(&out.data[pos..], at, out.len())? {
                    Step::Record { len, packet } => {
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
            if full || (self.exhausted && pos == out.data.len()) {
                break;
            }
            if self.exhausted {
                let (total, what) = need.unwrap_or((0, "record"));
                let have = out.data.len() - pos;
                let packet = self.packets_read + out.len() as u64;
                return Err(pcap_error(base + pos as u64, packet, format!("truncated final {what}: {total} bytes announced, {have} left in the file")));
            }
            let wanted = need.map_or(0, |(total, _)| total.saturating_sub(out.data.len() - pos));
            let spare = out.data.capacity() - out.data.len();
            let read_size = if limits.packets == usize::MAX { spare } else { 0 };
            self.read_more(&mut out.data, wanted.max(read_size).max(READ_CHUNK))?;
        }
        self.carry.extend_from_slice(&out.data[pos..]);
        out.data.truncate(pos);
        self.carry_offset = base + pos as u64;
        self.packets_read += out.len() as u64;
        Ok(out)
    }

    /// Appends up to `len` more bytes of the file to `data`, without zero-filling first.
    fn read_more(&mut self, data: &mut Vec<u8>, len: usize) -> Result<()> {
        let got = (&mut self.reader).take(len as u64).read_to_end(data)?;
        self.exhausted |= got < len;
        Ok(())
    }

    fn carry_at_least(&mut self, len: usize) -> Result<()> {
        let mut carry = std::mem::take(&mut self.carry);
        let missing = len.saturating_sub(carry.len());
        self.read_more(&mut carry, missing)?;
        self.carry = carry;
        Ok(())
    }

    #[inline]
    fn step(&mut self, bytes: &[u8], at: u64, packets_in_batch: usize) -> Result<Step> {
        let packet = self.packets_read + packets_in_batch as u64;
        let error = |reason: String| pcap_error(at, packet, reason);
        match self.state {
            State::Pcap { big_endian, nanoseconds, snaplen, link_type } => pcap_record(bytes, big_endian, nanoseconds, snaplen, link_type).map_err(error),
            State::PcapNg { .. } => self.pcapng_block(bytes).map_err(error),
        }
    }

    fn pcapng_block(&mut self, bytes: &[u8]) -> std::result::Result<Step, String> {
        if bytes.len() < 12 {
            return Ok(Step::NeedMore { total: 12, what: "block header" });
        }
        let block_type = u32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]);
        if block_type == PCAPNG_SHB {
            return self.section_header(bytes);
        }
        let State::PcapNg { big_endian, .. } = self.state else { unreachable!("called for pcapng files only") };
        let block_len = read_u32(&bytes[4..8], big_endian) as usize;
        check_block_len(block_len)?;
        if bytes.len() < block_len {
            return Ok(Step::NeedMore { total: block_len, what: "block" });
        }
        let bytes = &bytes[..block_len];
        let trailer = read_u32(&bytes[block_len - 4..], big_endian) as usize;
        if trailer != block_len {
            return Err(format!("block length {block_len} does not match its trailing copy {trailer}"));
        }
        let parse = if big_endian { pcapng::parse_block_be } else { pcapng::parse_block_le };
        let block = parse(bytes).map_err(|err| format!("bad block of type 0x{block_type:08x}: {err:?}"))?.1;
        let packet_at = |data: &[u8]| {
            let start = data.as_ptr() as usize - bytes.as_ptr() as usize;
            start..start + data.len()
        };
        let content = match block {
            Block::InterfaceDescription(idb) => BlockContent::Interface(Interface {
                link_type: idb.linktype.0 as u16,
                snaplen: idb.snaplen,
                resolution: ts_resolution(idb.if_tsresol).unwrap_or(0),
                offset_seconds: idb.ts_offset(),
            }),
            Block::EnhancedPacket(epb) => BlockContent::Packet {
                interface: epb.if_id as usize,
                bytes: packet_at(epb.packet_data()),
                wire_len: epb.origlen,
                ticks: (u64::from(epb.ts_high) << 32) | u64::from(epb.ts_low),
            },
            Block::SimplePacket(spb) => BlockContent::Packet { interface: 0, bytes: packet_at(spb.packet_data()), wire_len: spb.origlen, ticks: 0 },
            _ => BlockContent::Nothing, // statistics, name resolution, custom blocks: nothing to count
        };
        let packet = match content {
            BlockContent::Interface(interface) if interface.resolution == 0 => {
                return Err("interface has an impossible if_tsresol (finer than 1e-19 s or 2^-63 s)".to_string());
            }
            BlockContent::Interface(interface) => {
                self.interfaces().push(interface);
                None
            }
            BlockContent::Packet { interface, bytes, wire_len, ticks } => Some(self.pcapng_packet(interface, bytes, wire_len, ticks)?),
            BlockContent::Nothing => None,
        };
        Ok(Step::Record { len: block_len, packet })
    }

    fn pcapng_packet(&self, interface: usize, bytes: std::ops::Range<usize>, wire_len: u32, ticks: u64) -> std::result::Result<PacketAt, String> {
        let State::PcapNg { interfaces, .. } = &self.state else { unreachable!("called for pcapng files only") };
        let Some(interface) = interfaces.get(interface).copied() else {
            return Err(format!("packet names interface {interface}, but the section has {}", interfaces.len()));
        };
        check_link_type(interface.link_type)?;
        if bytes.len() > interface.snaplen.max(DEFAULT_SNAPLEN) as usize {
            return Err(format!("packet of {} bytes is longer than the snap length {}", bytes.len(), interface.snaplen));
        }
        let timestamp_ns = pcapng_timestamp_ns(ticks, interface).ok_or_else(|| format!("timestamp {ticks} is out of range"))?;
        Ok(PacketAt { start: bytes.start, len: bytes.len(), wire_len, timestamp_ns, link_type: interface.link_type })
    }

    fn interfaces(&mut self) -> &mut Vec<Interface> {
        match &mut self.state {
            State::PcapNg { interfaces, .. } => interfaces,
            State::Pcap { .. } => unreachable!("called for pcapng files only"),
        }
    }

    /// A section header starts a new section: its byte order applies from here, and the
    /// interfaces of the previous section are forgotten.
    fn section_header(&mut self, bytes: &[u8]) -> std::result::Result<Step, String> {
        let byte_order = u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]);
        let big_endian = match byte_order {
            PCAPNG_BYTE_ORDER_MAGIC => false,
            magic if magic == PCAPNG_BYTE_ORDER_MAGIC.swap_bytes() => true,
            magic => return Err(format!("bad pcapng byte-order magic 0x{magic:08x}")),
        };
        let block_len = read_u32(&bytes[4..8], big_endian) as usize;
        check_block_len(block_len)?;
        if bytes.len() < block_len {
            return Ok(Step::NeedMore { total: block_len, what: "section header block" });
        }
        pcapng::parse_sectionheaderblock(&bytes[..block_len]).map_err(|err| format!("bad section header block: {err:?}"))?;
        self.state = State::PcapNg { big_endian, interfaces: Vec::new() };
        Ok(Step::Record { len: block_len, packet: None })
    }
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
    let fraction_ns = if nanoseconds { fraction } else { fraction * 1000 };
    let timestamp_ns = i64::from(field(0)) * 1_000_000_000 + fraction_ns as i64;
    Ok(Step::Record { len, packet: Some(PacketAt { start: 16, len: caplen as usize, wire_len: field(12), timestamp_ns, link_type }) })
}

fn check_block_len(block_len: usize) -> std::result::Result<(), String> {
    if block_len < 12 || !block_len.is_multiple_of(4) || block_len > MAX_BLOCK_LEN {
        return Err(format!("impossible block length {block_len}"));
    }
    Ok(())
}

/// Reads a whole capture into one batch.
pub fn read_all<R: Read>(reader: R, size_hint: usize) -> Result<PacketBuffers> {
    PcapReader::new(reader)?.next_batch(Limits::WHOLE_FILE, size_hint)
}

/// Finds every packet of a capture that is already in memory (a mapped file), without copying
/// a byte: the result's `data` is left empty and its `offsets` point into `capture`.
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
            Step::Record { len, packet } => {
                if let Some(p) = packet {
                    out.push_at(pos + p.start, p.len, p.wire_len, p.timestamp_ns, p.link_type);
                }
                pos += len;
            }
            Step::NeedMore { total, what } => {
                let (have, packet) = (capture.len() - pos, out.len());
                return Err(pcap_error(pos as u64, packet as u64, format!("truncated final {what}: {total} bytes announced, {have} left in the file")));
            }
        }
    }
    Ok(out)
}

fn detect(magic: u32) -> Option<Format> {
    match magic {
        0xa1b2_c3d4 | 0xd4c3_b2a1 | 0xa1b2_3c4d | 0x4d3c_b2a1 => Some(Format::Pcap),
        PCAPNG_SHB => Some(Format::PcapNg),
        _ => None,
    }
}

fn read_pcap_header(head: &[u8]) -> Result<State> {
    if head.len() < 24 {
        return Err(pcap_error(0, 0, format!("truncated pcap file header: {} of 24 bytes", head.len())));
    }
    let (_, header) = parse_pcap_header(head).map_err(|err| pcap_error(0, 0, format!("bad pcap file header: {err:?}")))?;
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

/// Timestamp units per second: 10^n, or 2^n when the top bit is set. (pcap-parser's own
/// `build_ts_resolution` rejects every 2^n resolution, so it is decoded here.)
fn ts_resolution(if_tsresol: u8) -> Option<u64> {
    let exponent = u32::from(if_tsresol & 0x7f);
    if if_tsresol & 0x80 == 0 {
        10u64.checked_pow(exponent)
    } else {
        1u64.checked_shl(exponent).filter(|_| exponent < 64)
    }
}

fn pcapng_timestamp_ns(ticks: u64, interface: Interface) -> Option<i64> {
    let ticks = u128::from(ticks);
    let resolution = u128::from(interface.resolution);
    let nanos = (ticks / resolution) * 1_000_000_000 + (ticks % resolution) * 1_000_000_000 / resolution;
    let nanos = i64::try_from(nanos).ok()?;
    nanos.checked_add(interface.offset_seconds.checked_mul(1_000_000_000)?)
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
