//! Packet batches: every packet's bytes in one buffer, described by parallel arrays.
//!
//! This is the layout numpy hands in and gets back without copies: `data` holds the packets
//! back to back (or anywhere, as `offsets` say), and packet `i` is
//! `data[offsets[i] .. offsets[i] + lengths[i]]`.

use crate::error::{CoreError, Result};

/// Link-layer header types (the pcap LINKTYPE_ values isolane understands).
pub mod linktype {
    pub const NULL: u16 = 0;
    pub const ETHERNET: u16 = 1;
    pub const RAW: u16 = 101;
    pub const LOOP: u16 = 108;
    pub const LINUX_SLL: u16 = 113;
    pub const IPV4: u16 = 228;
    pub const IPV6: u16 = 229;
    pub const LINUX_SLL2: u16 = 276;

    pub fn is_supported(link_type: u16) -> bool {
        matches!(link_type, NULL | ETHERNET | RAW | LOOP | LINUX_SLL | IPV4 | IPV6 | LINUX_SLL2)
    }
}

/// The link type of every packet of a batch: one for all (the common case), or one each
/// (a pcapng file whose interfaces differ).
#[derive(Debug, Clone, Copy)]
pub enum LinkTypes<'a> {
    Uniform(u16),
    PerPacket(&'a [u16]),
}

impl LinkTypes<'_> {
    #[inline]
    pub fn get(&self, index: usize) -> u16 {
        match self {
            LinkTypes::Uniform(link_type) => *link_type,
            LinkTypes::PerPacket(link_types) => link_types[index],
        }
    }
}

/// A borrowed, validated view of a batch: what the parser reads.
#[derive(Debug, Clone, Copy)]
pub struct BatchView<'a> {
    pub data: &'a [u8],
    pub offsets: &'a [u64],
    pub lengths: &'a [u32],
    pub wire_lengths: &'a [u32],
    pub link_types: LinkTypes<'a>,
}

impl<'a> BatchView<'a> {
    /// Checks that the arrays describe packets inside `data`, so that later per-packet work
    /// can index without failing.
    pub fn new(data: &'a [u8], offsets: &'a [u64], lengths: &'a [u32], wire_lengths: &'a [u32], link_types: LinkTypes<'a>) -> Result<Self> {
        let count = offsets.len();
        if lengths.len() != count || wire_lengths.len() != count {
            return Err(CoreError::InvalidBatch(format!(
                "offsets, lengths and wire_lengths must have one entry per packet; got {count}, {}, {}",
                lengths.len(),
                wire_lengths.len()
            )));
        }
        if let LinkTypes::PerPacket(link_types) = link_types {
            if link_types.len() != count {
                return Err(CoreError::InvalidBatch(format!("link_types has {} entries for {count} packets", link_types.len())));
            }
        }
        if let Some(index) = (0..count).find(|&i| !fits(data.len(), offsets[i], lengths[i])) {
            return Err(CoreError::InvalidBatch(format!(
                "packet {index} (offset {}, length {}) runs past the end of data ({} bytes)",
                offsets[index],
                lengths[index],
                data.len()
            )));
        }
        Ok(BatchView { data, offsets, lengths, wire_lengths, link_types })
    }

    pub fn len(&self) -> usize {
        self.offsets.len()
    }

    pub fn is_empty(&self) -> bool {
        self.offsets.is_empty()
    }

    #[inline]
    pub fn packet(&self, index: usize) -> &'a [u8] {
        let start = self.offsets[index] as usize;
        &self.data[start..start + self.lengths[index] as usize]
    }

    /// Asks the cache for the first two lines of packet `index` (a tunnel's headers and the
    /// tenant's), if there is one.
    #[inline]
    pub fn prefetch_headers(&self, index: usize) {
        let Some(&start) = self.offsets.get(index) else { return };
        if let Some(first) = self.data.get(start as usize) {
            crate::memory::prefetch(first);
        }
        if let Some(second) = self.data.get(start as usize + 64) {
            crate::memory::prefetch(second);
        }
    }
}

fn fits(data_len: usize, offset: u64, length: u32) -> bool {
    offset.checked_add(u64::from(length)).is_some_and(|end| end <= data_len as u64)
}

/// An owned batch, as the pcap reader fills it.
#[derive(Debug, Default, Clone)]
pub struct PacketBuffers {
    pub data: Vec<u8>,
    pub offsets: Vec<u64>,
    pub lengths: Vec<u32>,
    pub wire_lengths: Vec<u32>,
    pub timestamps_ns: Vec<i64>,
    pub link_types: Vec<u16>,
}

impl PacketBuffers {
    /// Empty buffers with room for `bytes` of data and `packets` packets (huge pages advised
    /// where they are large), so that filling them never moves what is in them.
    pub fn with_capacity(bytes: usize, packets: usize) -> Self {
        PacketBuffers {
            data: crate::memory::byte_buffer(bytes),
            offsets: crate::memory::with_capacity(packets),
            lengths: crate::memory::with_capacity(packets),
            wire_lengths: crate::memory::with_capacity(packets),
            timestamps_ns: crate::memory::with_capacity(packets),
            link_types: crate::memory::with_capacity(packets),
        }
    }

    pub fn len(&self) -> usize {
        self.offsets.len()
    }

    pub fn is_empty(&self) -> bool {
        self.offsets.is_empty()
    }

    /// Appends a copy of `bytes` as the next packet.
    pub fn push(&mut self, bytes: &[u8], wire_length: u32, timestamp_ns: i64, link_type: u16) {
        let start = self.data.len();
        self.data.extend_from_slice(bytes);
        self.push_at(start, bytes.len(), wire_length, timestamp_ns, link_type);
    }

    /// Describes the next packet as `data[start .. start + len]`, already in place.
    pub fn push_at(&mut self, start: usize, len: usize, wire_length: u32, timestamp_ns: i64, link_type: u16) {
        self.offsets.push(start as u64);
        self.lengths.push(len as u32);
        self.wire_lengths.push(wire_length);
        self.timestamps_ns.push(timestamp_ns);
        self.link_types.push(link_type);
    }

    /// The link type shared by every packet, if they share one (an empty batch: Ethernet).
    pub fn uniform_link_type(&self) -> Option<u16> {
        match self.link_types.split_first() {
            None => Some(linktype::ETHERNET),
            Some((first, rest)) => rest.iter().all(|t| t == first).then_some(*first),
        }
    }

    pub fn view(&self) -> BatchView<'_> {
        let link_types = match self.uniform_link_type() {
            Some(link_type) => LinkTypes::Uniform(link_type),
            None => LinkTypes::PerPacket(&self.link_types),
        };
        BatchView { data: &self.data, offsets: &self.offsets, lengths: &self.lengths, wire_lengths: &self.wire_lengths, link_types }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rejects_packets_outside_data() {
        let data = [0u8; 10];
        let err = BatchView::new(&data, &[0, 8], &[4, 4], &[4, 4], LinkTypes::Uniform(1)).unwrap_err();
        assert!(err.to_string().contains("packet 1"), "{err}");
    }

    #[test]
    fn rejects_mismatched_lengths() {
        let data = [0u8; 10];
        assert!(BatchView::new(&data, &[0], &[4, 4], &[4], LinkTypes::Uniform(1)).is_err());
        assert!(BatchView::new(&data, &[0], &[4], &[4], LinkTypes::PerPacket(&[1, 1])).is_err());
    }

    #[test]
    fn rejects_offset_overflow() {
        let data = [0u8; 10];
        assert!(BatchView::new(&data, &[u64::MAX], &[4], &[4], LinkTypes::Uniform(1)).is_err());
    }

    #[test]
    fn buffers_collapse_to_one_link_type() {
        let mut buffers = PacketBuffers::default();
        buffers.push(&[1, 2], 2, 0, 1);
        buffers.push(&[3], 3, 1, 1);
        assert_eq!(buffers.uniform_link_type(), Some(1));
        assert_eq!(buffers.view().packet(1), &[3]);
        buffers.push(&[4], 1, 2, 113);
        assert!(matches!(buffers.view().link_types, LinkTypes::PerPacket(_)));
    }
}
