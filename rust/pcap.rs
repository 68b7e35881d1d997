//! Streaming pcap and pcapng reader with bounded memory and errors that say where.
//!
//! The format is detected from the first four bytes, never from the file name. Records are
//! decoded by the `pcap-parser` crate; this module owns the buffering (so that memory stays
//! bounded and every error knows its byte offset) and the checks that turn a corrupt file into
//! an error instead of a hang or a silently shorter capture.

use std::io::Read;

use pcap_parser::pcapng::{self, Block};
use pcap_parser::traits::PcapNGPacketBlock;
use pcap_parser::{parse_pcap_frame, parse_pcap_frame_be, parse_pcap_header, LegacyPcapBlock};

use crate::batch::{linktype, PacketBuffers};
use crate::error::{CoreError, Result};

/// No real capture has a record this large (libpcap caps pcapng blocks at 16 MiB); a length
/// beyond it means a corrupt file, and honouring it would mean allocating gigabytes.
const MAX_BLOCK_LEN: usize = 16 << 20;
/// A snap length of 0 means "unlimited"; libpcap's largest snap length stands in for it.
const DEFAULT_SNAPLEN: u32 = 262_144;
/// Reads go 1 MiB at a time; the window starts smaller so a small file costs little.
const READ_CHUNK: usize = 1 << 20;
const FIRST_WINDOW: usize = 64 << 10;
const PCAPNG_SHB: u32 = 0x0a0d_0d0a;
const PCAPNG_BYTE_ORDER_MAGIC: u32 = 0x1a2b_3c4d;

/// What the first bytes say the file is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Pcap,
    PcapNg,
}

/// A growable window over a reader that knows the file offset of every byte it holds.
struct Window<R> {
    reader: R,
    buf: Vec<u8>,
    start: usize,
    end: usize,
    /// File offset of `buf[0]`.
    base: u64,
    exhausted: bool,
}

impl<R: Read> Window<R> {
    fn new(reader: R) -> Self {
        Window { reader, buf: vec![0; FIRST_WINDOW], start: 0, end: 0, base: 0, exhausted: false }
    }

    fn bytes(&self) -> &[u8] {
        &self.buf[self.start..self.end]
    }

    fn offset(&self) -> u64 {
        self.base + self.start as u64
    }

    fn consume(&mut self, len: usize) {
        self.start += len;
    }

    /// Makes `len` bytes available; false if the file ends first.
    fn fill(&mut self, len: usize) -> std::io::Result<bool> {
        while self.end - self.start < len && !self.exhausted {
            if self.start + len > self.buf.len() {
                self.buf.copy_within(self.start..self.end, 0);
                self.base += self.start as u64;
                self.end -= self.start;
                self.start = 0;
                if len > self.buf.len() || self.buf.len() < READ_CHUNK {
                    self.buf.resize(len.next_power_of_two().max(READ_CHUNK), 0);
                }
            }
            match self.reader.read(&mut self.buf[self.end..]) {
                Ok(0) => self.exhausted = true,
                Ok(read) => self.end += read,
                Err(err) if err.kind() == std::io::ErrorKind::Interrupted => {}
                Err(err) => return Err(err),
            }
        }
        Ok(self.end - self.start >= len)
    }

    fn at_end(&mut self) -> std::io::Result<bool> {
        Ok(!self.fill(1)?)
    }
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

/// Reads packets from a pcap or pcapng stream, a batch at a time.
pub struct PcapReader<R> {
    window: Window<R>,
    state: State,
    packets_read: u64,
}

impl<R: Read> PcapReader<R> {
    /// Reads the file header; fails on anything that is neither pcap nor pcapng.
    pub fn new(reader: R) -> Result<Self> {
        let mut window = Window::new(reader);
        if !window.fill(4)? {
            return Err(pcap_error(0, 0, format!("file too short for a capture header ({} bytes)", window.bytes().len())));
        }
        let magic = u32::from_le_bytes(window.bytes()[..4].try_into().unwrap_or_default());
        let state = match detect(magic) {
            Some(Format::Pcap) => read_pcap_header(&mut window)?,
            Some(Format::PcapNg) => State::PcapNg { big_endian: false, interfaces: Vec::new() },
            None => {
                return Err(pcap_error(0, 0, format!("bad magic 0x{magic:08x}: not a pcap or pcapng file")));
            }
        };
        Ok(PcapReader { window, state, packets_read: 0 })
    }

    pub fn format(&self) -> Format {
        match self.state {
            State::Pcap { .. } => Format::Pcap,
            State::PcapNg { .. } => Format::PcapNg,
        }
    }

    /// Bytes of the file consumed so far (for progress reports).
    pub fn position(&self) -> u64 {
        self.window.offset()
    }

    pub fn packets_read(&self) -> u64 {
        self.packets_read
    }

    /// Appends packets to `out` until it holds `max_packets` more, or `max_bytes` more packet
    /// bytes (bounding memory whatever the packet sizes); returns how many (0 at the end).
    pub fn read_into(&mut self, out: &mut PacketBuffers, max_packets: usize, max_bytes: usize) -> Result<usize> {
        let before = out.len();
        let bytes_before = out.data.len();
        while out.len() - before < max_packets && out.data.len() - bytes_before < max_bytes && !self.window.at_end()? {
            match self.state {
                State::Pcap { .. } => self.next_pcap_record(out)?,
                State::PcapNg { .. } => self.next_pcapng_block(out)?,
            }
        }
        Ok(out.len() - before)
    }

    fn error(&self, reason: String) -> CoreError {
        pcap_error(self.window.offset(), self.packets_read, reason)
    }

    /// Makes a whole record or block of `len` bytes available, or says why it cannot be.
    fn fill_record(&mut self, len: usize, what: &str) -> Result<()> {
        if !self.window.fill(len)? {
            let have = self.window.bytes().len();
            return Err(self.error(format!("truncated final {what}: {len} bytes announced, {have} left in the file")));
        }
        Ok(())
    }

    fn next_pcap_record(&mut self, out: &mut PacketBuffers) -> Result<()> {
        let State::Pcap { big_endian, nanoseconds, snaplen, link_type } = self.state else {
            unreachable!("called for pcap files only")
        };
        self.fill_record(16, "record header")?;
        let field = |at: usize, bytes: &[u8]| read_u32(&bytes[at..at + 4], big_endian);
        let caplen = field(8, self.window.bytes());
        if caplen > snaplen.max(DEFAULT_SNAPLEN) {
            return Err(self.error(format!("record of {caplen} bytes is longer than the snap length {snaplen}")));
        }
        self.fill_record(16 + caplen as usize, "record")?;
        let parsed = if big_endian { parse_pcap_frame_be } else { parse_pcap_frame };
        let (rest, block): (_, LegacyPcapBlock) = parsed(self.window.bytes())
            .map_err(|err| self.error(format!("bad record: {err:?}")))?;
        let consumed = self.window.bytes().len() - rest.len();
        let fraction_ns = if nanoseconds { u64::from(block.ts_usec) } else { u64::from(block.ts_usec) * 1000 };
        let timestamp = i64::from(block.ts_sec) * 1_000_000_000 + fraction_ns as i64;
        out.push(block.data, block.origlen, timestamp, link_type);
        self.window.consume(consumed);
        self.packets_read += 1;
        Ok(())
    }

    fn next_pcapng_block(&mut self, out: &mut PacketBuffers) -> Result<()> {
        self.fill_record(12, "block header")?;
        let header = self.window.bytes();
        let block_type = u32::from_le_bytes(header[..4].try_into().unwrap_or_default());
        if block_type == PCAPNG_SHB {
            return self.section_header();
        }
        let State::PcapNg { big_endian, .. } = self.state else { unreachable!("called for pcapng files only") };
        let block_len = read_u32(&header[4..8], big_endian) as usize;
        self.check_block_len(block_len)?;
        self.fill_record(block_len, "block")?;
        let bytes = &self.window.bytes()[..block_len];
        let trailer = read_u32(&bytes[block_len - 4..], big_endian) as usize;
        if trailer != block_len {
            return Err(self.error(format!("block length {block_len} does not match its trailing copy {trailer}")));
        }
        let parse = if big_endian { pcapng::parse_block_be } else { pcapng::parse_block_le };
        let block = parse(bytes).map_err(|err| self.error(format!("bad block of type 0x{block_type:08x}: {err:?}")))?.1;
        let packet_at = |data: &[u8]| data.as_ptr() as usize - bytes.as_ptr() as usize..data.as_ptr() as usize - bytes.as_ptr() as usize + data.len();
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
            Block::SimplePacket(spb) => {
                BlockContent::Packet { interface: 0, bytes: packet_at(spb.packet_data()), wire_len: spb.origlen, ticks: 0 }
            }
            _ => BlockContent::Nothing, // statistics, name resolution, custom blocks: nothing to count
        };
        match content {
            BlockContent::Interface(interface) if interface.resolution == 0 => {
                return Err(self.error("interface has an impossible if_tsresol (finer than 1e-19 s or 2^-63 s)".to_string()));
            }
            BlockContent::Interface(interface) => self.interfaces().push(interface),
            BlockContent::Packet { interface, bytes, wire_len, ticks } => {
                self.push_pcapng_packet(out, interface, bytes, wire_len, ticks)?;
            }
            BlockContent::Nothing => {}
        }
        self.window.consume(block_len);
        Ok(())
    }

    fn push_pcapng_packet(
        &mut self,
        out: &mut PacketBuffers,
        interface: usize,
        bytes: std::ops::Range<usize>,
        wire_len: u32,
        ticks: u64,
    ) -> Result<()> {
        let State::PcapNg { interfaces, .. } = &self.state else { unreachable!("called for pcapng files only") };
        let Some(interface) = interfaces.get(interface).copied() else {
            return Err(self.error(format!("packet names interface {interface}, but the section has {}", interfaces.len())));
        };
        check_link_type(interface.link_type).map_err(|reason| self.error(reason))?;
        let snaplen = if interface.snaplen == 0 { DEFAULT_SNAPLEN } else { interface.snaplen.max(DEFAULT_SNAPLEN) };
        if bytes.len() > snaplen as usize {
            let captured = bytes.len();
            return Err(self.error(format!("packet of {captured} bytes is longer than the snap length {}", interface.snaplen)));
        }
        let timestamp = pcapng_timestamp_ns(ticks, interface)
            .ok_or_else(|| self.error(format!("timestamp {ticks} is out of range")))?;
        out.push(&self.window.bytes()[bytes], wire_len, timestamp, interface.link_type);
        self.packets_read += 1;
        Ok(())
    }

    fn interfaces(&mut self) -> &mut Vec<Interface> {
        match &mut self.state {
            State::PcapNg { interfaces, .. } => interfaces,
            State::Pcap { .. } => unreachable!("called for pcapng files only"),
        }
    }

    fn check_block_len(&self, block_len: usize) -> Result<()> {
        if block_len < 12 || block_len % 4 != 0 || block_len > MAX_BLOCK_LEN {
            return Err(self.error(format!("impossible block length {block_len}")));
        }
        Ok(())
    }

    /// A section header starts a new section: its byte order applies from here, and the
    /// interfaces of the previous section are forgotten.
    fn section_header(&mut self) -> Result<()> {
        let header = self.window.bytes();
        let byte_order = u32::from_le_bytes(header[8..12].try_into().unwrap_or_default());
        let big_endian = match byte_order {
            PCAPNG_BYTE_ORDER_MAGIC => false,
            magic if magic == PCAPNG_BYTE_ORDER_MAGIC.swap_bytes() => true,
            magic => return Err(self.error(format!("bad pcapng byte-order magic 0x{magic:08x}"))),
        };
        let block_len = read_u32(&header[4..8], big_endian) as usize;
        self.check_block_len(block_len)?;
        self.fill_record(block_len, "section header block")?;
        pcapng::parse_sectionheaderblock(&self.window.bytes()[..block_len])
            .map_err(|err| self.error(format!("bad section header block: {err:?}")))?;
        self.state = State::PcapNg { big_endian, interfaces: Vec::new() };
        self.window.consume(block_len);
        Ok(())
    }
}

/// Reads a whole capture into one batch.
pub fn read_all<R: Read>(reader: R) -> Result<PacketBuffers> {
    let mut reader = PcapReader::new(reader)?;
    let mut out = PacketBuffers::default();
    reader.read_into(&mut out, usize::MAX, usize::MAX)?;
    Ok(out)
}

fn detect(magic: u32) -> Option<Format> {
    match magic {
        0xa1b2_c3d4 | 0xd4c3_b2a1 | 0xa1b2_3c4d | 0x4d3c_b2a1 => Some(Format::Pcap),
        PCAPNG_SHB => Some(Format::PcapNg),
        _ => None,
    }
}

fn read_pcap_header<R: Read>(window: &mut Window<R>) -> Result<State> {
    if !window.fill(24)? {
        return Err(pcap_error(0, 0, format!("truncated pcap file header: {} of 24 bytes", window.bytes().len())));
    }
    let (_, header) = parse_pcap_header(window.bytes())
        .map_err(|err| pcap_error(0, 0, format!("bad pcap file header: {err:?}")))?;
    // The top bits carry FCS information (libpcap's LT_LINKTYPE keeps the low 26 bits).
    let link_type = header.network.0 & 0x03ff_ffff;
    let link_type = u16::try_from(link_type).map_err(|_| pcap_error(20, 0, format!("unknown link type {link_type}")))?;
    check_link_type(link_type).map_err(|reason| pcap_error(20, 0, reason))?;
    window.consume(24);
    Ok(State::Pcap {
        big_endian: header.is_bigendian(),
        nanoseconds: header.is_nanosecond_precision(),
        snaplen: header.snaplen,
        link_type,
    })
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
