//! The top flows of a burst: Space-Saving (Metwally, Agrawal and El Abbadi, 2005) over
//! [`COUNTERS`] counters, weighted by bytes. Exact while a burst has at most [`COUNTERS`]
//! distinct flows; beyond that a counted flow's bytes are over its true bytes by at most its
//! `error`, itself at most the burst's bytes / [`COUNTERS`].

use bytemuck::{Pod, Zeroable};

use crate::parse::PacketInfo;

/// Counters an open burst keeps.
pub const COUNTERS: usize = 32;
/// Flows reported per burst.
pub const REPORTED: usize = 8;

/// A packet's own 5-tuple (the inner one of a tunnelled packet), ordered field by field.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct FlowKey {
    pub src: [u8; 16],
    pub dst: [u8; 16],
    pub src_port: u16,
    pub dst_port: u16,
    pub proto: u8,
}

impl FlowKey {
    #[inline]
    pub fn of(info: &PacketInfo) -> FlowKey {
        FlowKey { src: info.src, dst: info.dst, src_port: info.src_port, dst_port: info.dst_port, proto: info.proto }
    }
}

#[derive(Debug, Clone, Copy, Default)]
struct Counter {
    key: FlowKey,
    packets: u64,
    bytes: u64,
    /// The count the flow inherited when it took the counter over: its most overcount.
    error_bytes: u64,
}

/// The counters of one open burst (taken from a pool when a burst starts: nothing is allocated
/// per packet).
#[derive(Debug, Clone)]
pub struct TopFlows {
    counters: [Counter; COUNTERS],
    /// Each counter's key packed into one word, so that a lookup compares words first.
    tags: [u64; COUNTERS],
    len: usize,
}

impl Default for TopFlows {
    fn default() -> Self {
        TopFlows { counters: [Counter::default(); COUNTERS], tags: [0; COUNTERS], len: 0 }
    }
}

impl TopFlows {
    pub fn clear(&mut self) {
        self.len = 0;
    }

    #[inline]
    pub fn add(&mut self, info: &PacketInfo, bytes: u32) {
        let key = FlowKey::of(info);
        let tag = tag_of(&key);
        let bytes = u64::from(bytes);
        let found = (0..self.len).find(|&i| self.tags[i] == tag && self.counters[i].key == key);
        let slot = match found {
            Some(i) => i,
            None if self.len < COUNTERS => {
                self.len += 1;
                self.counters[self.len - 1] = Counter { key, ..Counter::default() };
                self.len - 1
            }
            None => {
                // The least counted flow gives its counter up; the newcomer inherits its count.
                let i = (0..COUNTERS).min_by_key(|&i| self.counters[i].bytes).expect("COUNTERS > 0");
                let old = self.counters[i];
                self.counters[i] = Counter { key, packets: old.packets, bytes: old.bytes, error_bytes: old.bytes };
                i
            }
        };
        self.tags[slot] = tag;
        let counter = &mut self.counters[slot];
        counter.packets += 1;
        counter.bytes += bytes;
    }

    /// Appends the [`REPORTED`] flows with the most bytes, then the lower 5-tuple, to `out` as
    /// rows of `event`, and says how many. Sorts the counters in place: the burst is over.
    pub fn report_into(&mut self, event: u64, out: &mut Vec<FlowRow>) -> usize {
        let counted = &mut self.counters[..self.len];
        counted.sort_unstable_by(|a, b| b.bytes.cmp(&a.bytes).then(a.key.cmp(&b.key)));
        let top = &counted[..counted.len().min(REPORTED)];
        out.extend(top.iter().enumerate().map(|(rank, c)| FlowRow::new(event, rank as u8, c)));
        top.len()
    }
}

#[inline]
fn tag_of(key: &FlowKey) -> u64 {
    let word = |bytes: &[u8]| u64::from_le_bytes(bytes.try_into().expect("8 bytes"));
    let ports = u64::from(key.src_port) << 24 | u64::from(key.dst_port) << 8 | u64::from(key.proto);
    word(&key.src[8..]) ^ word(&key.dst[8..]).rotate_left(29) ^ ports.rotate_left(47)
}

/// One of a burst's top flows, laid out as numpy's `isolane.BURST_FLOW_DTYPE`.
#[repr(C, packed)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Pod, Zeroable)]
pub struct FlowRow {
    pub event: u64,
    pub rank: u8,
    pub src: [u8; 16],
    pub dst: [u8; 16],
    pub src_port: u16,
    pub dst_port: u16,
    pub proto: u8,
    pub packets: u64,
    pub bytes: u64,
    pub error_bytes: u64,
}

impl FlowRow {
    fn new(event: u64, rank: u8, c: &Counter) -> FlowRow {
        let k = &c.key;
        FlowRow {
            event,
            rank,
            src: k.src,
            dst: k.dst,
            src_port: k.src_port,
            dst_port: k.dst_port,
            proto: k.proto,
            packets: c.packets,
            bytes: c.bytes,
            error_bytes: c.error_bytes,
        }
    }
}

pub fn flow_fields() -> Vec<(&'static str, &'static str, usize)> {
    use std::mem::offset_of;
    vec![
        ("event", "=u8", offset_of!(FlowRow, event)),
        ("rank", "u1", offset_of!(FlowRow, rank)),
        ("src", "16u1", offset_of!(FlowRow, src)),
        ("dst", "16u1", offset_of!(FlowRow, dst)),
        ("src_port", "=u2", offset_of!(FlowRow, src_port)),
        ("dst_port", "=u2", offset_of!(FlowRow, dst_port)),
        ("proto", "u1", offset_of!(FlowRow, proto)),
        ("packets", "=u8", offset_of!(FlowRow, packets)),
        ("bytes", "=u8", offset_of!(FlowRow, bytes)),
        ("error_bytes", "=u8", offset_of!(FlowRow, error_bytes)),
    ]
}
