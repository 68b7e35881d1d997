//! pcapng blocks (draft-ietf-opsawg-pcapng), decoded by hand so that every error says in words
//! what is wrong. The blocks that carry packets or describe interfaces are read; every other
//! well-formed block is skipped, as the spec asks of a reader that does not understand it.

use super::{check_block_len, check_link_type, read_u32, Note, PacketAt, Step, DEFAULT_SNAPLEN};

pub(super) const SHB: u32 = 0x0a0d_0d0a;
pub(super) const BYTE_ORDER_MAGIC: u32 = 0x1a2b_3c4d;
const IDB: u32 = 1;
const OBSOLETE_PACKET_BLOCK: u32 = 2;
const SPB: u32 = 3;
const EPB: u32 = 6;
/// Blocks the spec defines that carry nothing isolane needs: name resolution, interface
/// statistics, IRIG timestamps, ARINC 429, systemd journal, decryption secrets, custom blocks.
const KNOWN_UNUSED: [u32; 8] = [4, 5, 7, 8, 9, 10, 0x0bad, 0x4000_0bad];
/// Bytes of a section header block before its options: header, byte-order magic, version,
/// section length, trailer.
const SHB_FIXED: usize = 28;
const IF_TSRESOL: u16 = 9;
const IF_TSOFFSET: u16 = 14;

/// One interface: what its packets' link type and timestamps mean.
#[derive(Debug, Clone, Copy)]
struct Interface {
    link_type: u16,
    snaplen: u32,
    /// Timestamp units per second.
    resolution: u64,
    offset_seconds: i64,
}

/// The section being read: its byte order and the interfaces described so far.
#[derive(Debug, Default)]
pub(super) struct Section {
    big_endian: bool,
    interfaces: Vec<Interface>,
}

/// The fixed fields of the two blocks that carry one timestamped packet.
struct PacketFields {
    interface: usize,
    ticks: u64,
    caplen: usize,
    wire_len: u32,
}

impl Section {
    /// Looks at the block starting at `bytes`.
    pub(super) fn block(&mut self, bytes: &[u8]) -> Result<Step, String> {
        if bytes.len() < 12 {
            return Ok(Step::NeedMore { total: 12, what: "block header" });
        }
        // The section header's type reads the same in both byte orders.
        if u32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]) == SHB {
            return self.section_header(bytes);
        }
        let block_type = self.u32_at(bytes, 0);
        let block_len = self.u32_at(bytes, 4) as usize;
        check_block_len(block_len)?;
        if bytes.len() < block_len {
            return Ok(Step::NeedMore { total: block_len, what: "block" });
        }
        let trailer = self.u32_at(bytes, block_len - 4) as usize;
        if trailer != block_len {
            return Err(format!("block length {block_len} does not match its trailing copy {trailer}"));
        }
        let body = &bytes[8..block_len - 4];
        let record = |packet, note| Ok(Step::Record { len: block_len, packet, note });
        match block_type {
            IDB => {
                self.interface(body)?;
                record(None, Note::Plain)
            }
            EPB => {
                let fields = self.packet_fields(body, "enhanced packet block", |body| self.u32_at(body, 0) as usize)?;
                record(Some(self.packet(fields)?), Note::Plain)
            }
            OBSOLETE_PACKET_BLOCK => {
                // Interface id and drops count are 16 bits each where the EPB has a 32-bit id.
                let interface = |body: &[u8]| usize::from(self.u16_at(body, 0));
                let fields = self.packet_fields(body, "packet block", interface)?;
                record(Some(self.packet(fields)?), Note::ObsoletePacketBlock)
            }
            SPB => record(Some(self.simple_packet(body)?), Note::Plain),
            known if KNOWN_UNUSED.contains(&known) => record(None, Note::Plain),
            _ => record(None, Note::UnknownBlock),
        }
    }

    /// A section header starts a new section: its byte order applies from here, and the
    /// interfaces of the previous section are forgotten.
    fn section_header(&mut self, bytes: &[u8]) -> Result<Step, String> {
        let big_endian = match u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]) {
            BYTE_ORDER_MAGIC => false,
            magic if magic == BYTE_ORDER_MAGIC.swap_bytes() => true,
            magic => return Err(format!("bad pcapng byte-order magic 0x{magic:08x}")),
        };
        let section = Section { big_endian, interfaces: Vec::new() };
        let block_len = section.u32_at(bytes, 4) as usize;
        check_block_len(block_len)?;
        if block_len < SHB_FIXED {
            return Err(format!("section header block of {block_len} bytes is shorter than its {SHB_FIXED} fixed bytes"));
        }
        if bytes.len() < block_len {
            return Ok(Step::NeedMore { total: block_len, what: "section header block" });
        }
        let trailer = section.u32_at(bytes, block_len - 4) as usize;
        if trailer != block_len {
            return Err(format!("block length {block_len} does not match its trailing copy {trailer}"));
        }
        let (major, minor) = (section.u16_at(bytes, 12), section.u16_at(bytes, 14));
        if major != 1 {
            return Err(format!("unsupported pcapng version {major}.{minor} (isolane reads version 1)"));
        }
        *self = section;
        Ok(Step::Record { len: block_len, packet: None, note: Note::Plain })
    }

    fn interface(&mut self, body: &[u8]) -> Result<(), String> {
        if body.len() < 8 {
            return Err(format!("interface description block of {} bytes is shorter than its 20 fixed bytes", body.len() + 12));
        }
        let mut interface = Interface { link_type: self.u16_at(body, 0), snaplen: self.u32_at(body, 4), resolution: 1_000_000, offset_seconds: 0 };
        let mut options = &body[8..];
        while options.len() >= 4 {
            let (code, len) = (self.u16_at(options, 0), usize::from(self.u16_at(options, 2)));
            if code == 0 {
                break; // opt_endofopt
            }
            let value = options.get(4..4 + len).ok_or_else(|| format!("interface option {code} of {len} bytes runs past its block"))?;
            match (code, value) {
                (IF_TSRESOL, [resolution, ..]) => {
                    interface.resolution =
                        ts_resolution(*resolution).ok_or_else(|| "interface has an impossible if_tsresol (finer than 1e-19 s or 2^-63 s)".to_string())?;
                }
                (IF_TSOFFSET, [a, b, c, d, e, f, g, h, ..]) => {
                    let raw = [*a, *b, *c, *d, *e, *f, *g, *h];
                    interface.offset_seconds = if self.big_endian { i64::from_be_bytes(raw) } else { i64::from_le_bytes(raw) };
                }
                _ => {} // names, descriptions, filters: nothing isolane uses
            }
            options = options.get(4 + len.next_multiple_of(4)..).unwrap_or_default();
        }
        self.interfaces.push(interface);
        Ok(())
    }

    /// The fixed fields of an enhanced or obsolete packet block (they differ only in how
    /// `interface_of` reads the first four bytes), checked against the block's size.
    fn packet_fields(&self, body: &[u8], what: &str, interface_of: impl Fn(&[u8]) -> usize) -> Result<PacketFields, String> {
        if body.len() < 20 {
            return Err(format!("{what} of {} bytes is shorter than its 32 fixed bytes", body.len() + 12));
        }
        let caplen = self.u32_at(body, 12) as usize;
        if caplen > body.len() - 20 {
            return Err(format!("{what}'s captured length {caplen} runs past its block ({} bytes)", body.len() + 12));
        }
        let ticks = (u64::from(self.u32_at(body, 4)) << 32) | u64::from(self.u32_at(body, 8));
        Ok(PacketFields { interface: interface_of(body), ticks, caplen, wire_len: self.u32_at(body, 16) })
    }

    fn packet(&self, fields: PacketFields) -> Result<PacketAt, String> {
        let PacketFields { interface, ticks, caplen, wire_len } = fields;
        let interface = self.interface_at(interface)?;
        if caplen > interface.snaplen.max(DEFAULT_SNAPLEN) as usize {
            return Err(format!("packet of {caplen} bytes is longer than the snap length {}", interface.snaplen));
        }
        let timestamp_ns = timestamp_ns(ticks, interface).ok_or_else(|| format!("timestamp {ticks} is out of range"))?;
        Ok(PacketAt { start: 28, len: caplen, wire_len, timestamp_ns, link_type: interface.link_type })
    }

    /// A simple packet block: interface 0, no timestamp, and as many bytes as the block, the
    /// original length and the interface's snap length allow (as Wireshark reads it).
    fn simple_packet(&self, body: &[u8]) -> Result<PacketAt, String> {
        if body.len() < 4 {
            return Err(format!("simple packet block of {} bytes is shorter than its 16 fixed bytes", body.len() + 12));
        }
        let interface = self.interface_at(0)?;
        let wire_len = self.u32_at(body, 0);
        let snaplen = if interface.snaplen == 0 { u32::MAX } else { interface.snaplen };
        let len = (body.len() - 4).min(wire_len as usize).min(snaplen as usize);
        Ok(PacketAt { start: 12, len, wire_len, timestamp_ns: 0, link_type: interface.link_type })
    }

    fn interface_at(&self, index: usize) -> Result<Interface, String> {
        let interface = self.interfaces.get(index).copied();
        let interface = interface.ok_or_else(|| format!("packet names interface {index}, but the section has {}", self.interfaces.len()))?;
        check_link_type(interface.link_type)?;
        Ok(interface)
    }

    fn u32_at(&self, bytes: &[u8], at: usize) -> u32 {
        read_u32(&bytes[at..at + 4], self.big_endian)
    }

    fn u16_at(&self, bytes: &[u8], at: usize) -> u16 {
        let raw = [bytes[at], bytes[at + 1]];
        if self.big_endian {
            u16::from_be_bytes(raw)
        } else {
            u16::from_le_bytes(raw)
        }
    }
}

/// Timestamp units per second: 10^n, or 2^n when the top bit is set.
fn ts_resolution(if_tsresol: u8) -> Option<u64> {
    let exponent = u32::from(if_tsresol & 0x7f);
    if if_tsresol & 0x80 == 0 {
        10u64.checked_pow(exponent)
    } else {
        1u64.checked_shl(exponent).filter(|_| exponent < 64)
    }
}

fn timestamp_ns(ticks: u64, interface: Interface) -> Option<i64> {
    let ticks = u128::from(ticks);
    let resolution = u128::from(interface.resolution);
    let nanos = (ticks / resolution) * 1_000_000_000 + (ticks % resolution) * 1_000_000_000 / resolution;
    let nanos = i64::try_from(nanos).ok()?;
    nanos.checked_add(interface.offset_seconds.checked_mul(1_000_000_000)?)
}
