//! The TPACKET_V3 receive ring: blocks the kernel fills and hands over (`TP_STATUS_USER`),
//! copied out with one memcpy per block, given straight back (`TP_STATUS_KERNEL`) and indexed
//! in the copy, so the kernel can refill a block while the engine works on its copy.

use std::io;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, Ordering};

use crate::batch::PacketBuffers;
use crate::error::{CoreError, Result};

use super::socket::PacketSocket;
use super::{capture_error, CaptureOptions, Direction};

/// The frame size the ring request names: TPACKET_V3 packs packets by their own length, but
/// the kernel still checks a frame size and count.
const FRAME_SIZE: u32 = 2048;

/// Where `tpacket_block_desc`'s fields sit (`hdr.bh1` starts at 8).
mod block {
    pub const STATUS: usize = 8;
    pub const PACKETS: usize = 12;
    pub const FIRST_PACKET: usize = 16;
    pub const USED_LENGTH: usize = 20;
    pub const HEADER: usize = 48;
}

/// Where `tpacket3_hdr`'s fields sit, and the `sockaddr_ll` after it (at TPACKET_ALIGN(48)).
mod packet {
    pub const NEXT: usize = 0;
    pub const SECONDS: usize = 4;
    pub const NANOSECONDS: usize = 8;
    pub const CAPTURED: usize = 12;
    pub const WIRE: usize = 16;
    pub const MAC: usize = 24;
    pub const PACKET_TYPE: usize = 48 + 10;
    pub const HEADER: usize = 48 + 20;
}

/// What one block held.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(super) struct BlockCount {
    pub(super) kept: u64,
    /// Left out by the direction option (`Direction::Outgoing` keeps only outgoing packets).
    pub(super) skipped: u64,
}

/// The mapped ring. The kernel owns a block while its status is `TP_STATUS_KERNEL`, this
/// reader while it has `TP_STATUS_USER`.
pub(super) struct Ring {
    base: NonNull<u8>,
    block_size: usize,
    blocks: usize,
    /// The block to read next: the kernel fills them in order.
    current: usize,
}

// SAFETY: the mapping belongs to this Ring alone (no other handle to it exists) and is only
// touched through `&mut self`, so moving it to another thread is sound.
unsafe impl Send for Ring {}

impl Ring {
    /// Switches `socket` to TPACKET_V3, asks for the ring and maps it.
    pub(super) fn map(socket: &PacketSocket, options: &CaptureOptions) -> Result<Ring> {
        let version = libc::tpacket_versions::TPACKET_V3 as libc::c_int;
        socket.set_option(libc::SOL_PACKET, libc::PACKET_VERSION, &version, "PACKET_VERSION (TPACKET_V3)")?;
        let request = libc::tpacket_req3 {
            tp_block_size: options.block_size,
            tp_block_nr: options.blocks,
            tp_frame_size: FRAME_SIZE,
            tp_frame_nr: options.block_size / FRAME_SIZE * options.blocks,
            tp_retire_blk_tov: options.block_timeout_ms,
            tp_sizeof_priv: 0,
            tp_feature_req_word: 0,
        };
        socket.set_option(libc::SOL_PACKET, libc::PACKET_RX_RING, &request, "PACKET_RX_RING (the ring's blocks)")?;
        let (block_size, blocks) = (options.block_size as usize, options.blocks as usize);
        // SAFETY: maps the ring the kernel just made for this socket, at the size it was asked for.
        let base = unsafe { libc::mmap(std::ptr::null_mut(), block_size * blocks, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_SHARED, socket.raw(), 0) };
        if base == libc::MAP_FAILED {
            return Err(capture_error("cannot map the ring", io::Error::last_os_error()));
        }
        let base = NonNull::new(base.cast()).ok_or_else(|| CoreError::Capture { message: "the ring was mapped at address 0".into(), errno: None })?;
        Ok(Ring { base, block_size, blocks, current: 0 })
    }

    pub(super) fn block_size(&self) -> usize {
        self.block_size
    }

    fn block_start(&self, index: usize) -> *mut u8 {
        // SAFETY: the index is taken modulo `blocks`, so the block lies inside the mapping.
        unsafe { self.base.as_ptr().add(index % self.blocks * self.block_size) }
    }

    fn status(&self, index: usize) -> &AtomicU32 {
        // SAFETY: a block's status word lies inside the mapping, 4-byte aligned (blocks are
        // page-aligned); the kernel writes it concurrently, hence the atomic.
        unsafe { AtomicU32::from_ptr(self.block_start(index).add(block::STATUS).cast()) }
    }

    /// How many blocks, from the current one on and at most `most`, the kernel has handed
    /// over, and how many packets they hold.
    pub(super) fn ready(&self, most: usize) -> (usize, usize) {
        let mut packets = 0;
        for ahead in 0..most.min(self.blocks) {
            let index = self.current + ahead;
            if self.status(index).load(Ordering::Acquire) & libc::TP_STATUS_USER == 0 {
                return (ahead, packets);
            }
            // SAFETY: the block is this reader's now (TP_STATUS_USER); its header is inside it.
            let count = unsafe { self.block_start(index).add(block::PACKETS).cast::<u32>().read() } as usize;
            packets += count.min(self.block_size / packet::HEADER); // no more than fit, whatever the header says
        }
        (most.min(self.blocks), packets)
    }

    /// Appends the current block's packets to `batch` with one copy of the block, gives the
    /// block back to the kernel and moves on to the next. The block must be ready (`ready`).
    pub(super) fn take_block(&mut self, batch: &mut PacketBuffers, direction: Direction, link_type: u16) -> Result<BlockCount> {
        // SAFETY: the current block is inside the mapping, and the kernel does not write to it
        // while its status is TP_STATUS_USER (the caller saw it through `ready`).
        let whole = unsafe { std::slice::from_raw_parts(self.block_start(self.current), self.block_size) };
        let used = (read_u32(whole, block::USED_LENGTH) as usize).clamp(block::HEADER, self.block_size);
        // Copy first, then index the copy: the copy streams the block in, and indexing then
        // reads headers from the cache rather than one cold line at a time.
        let mut data = std::mem::take(&mut batch.data);
        let start = data.len();
        data.extend_from_slice(&whole[..used]);
        self.status(self.current).store(libc::TP_STATUS_KERNEL, Ordering::Release);
        self.current = (self.current + 1) % self.blocks;
        let counted = index_block(&data[start..], start, direction, link_type, batch);
        batch.data = data;
        counted
    }
}

impl Drop for Ring {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly the mapping made in `map`; nothing refers to it any more.
        unsafe { libc::munmap(self.base.as_ptr().cast(), self.block_size * self.blocks) };
    }
}

fn read_u32(bytes: &[u8], at: usize) -> u32 {
    bytes.get(at..at + 4).map_or(0, |word| u32::from_ne_bytes(word.try_into().expect("4 bytes")))
}

fn read_u16(bytes: &[u8], at: usize) -> u16 {
    bytes.get(at..at + 2).map_or(0, |word| u16::from_ne_bytes(word.try_into().expect("2 bytes")))
}

/// Describes the packets of `block` (its used part, which will sit at `data[start..]`) in
/// `batch`, keeping those `direction` wants. Every header is checked against the block's
/// length: a block that does not parse is an error (the kernel's ABI is not what this reader
/// knows), which ends the capture.
pub(super) fn index_block(block: &[u8], start: usize, direction: Direction, link_type: u16, batch: &mut PacketBuffers) -> Result<BlockCount> {
    let packets = read_u32(block, block::PACKETS) as usize;
    let mut at = read_u32(block, block::FIRST_PACKET) as usize;
    let mut count = BlockCount::default();
    for number in 1..=packets {
        let Some(header) = block.get(at..at + packet::HEADER) else {
            return Err(bad_block(number, packets, &format!("its header at byte {at} runs past the block's {} bytes", block.len())));
        };
        let (mac, captured) = (at + usize::from(read_u16(header, packet::MAC)), read_u32(header, packet::CAPTURED));
        if mac + captured as usize > block.len() {
            return Err(bad_block(number, packets, &format!("its {captured} bytes at byte {mac} run past the block's {} bytes", block.len())));
        }
        if direction.keeps(header[packet::PACKET_TYPE]) {
            let timestamp = i64::from(read_u32(header, packet::SECONDS)) * 1_000_000_000 + i64::from(read_u32(header, packet::NANOSECONDS));
            let wire = read_u32(header, packet::WIRE).max(captured);
            batch.push_at(start + mac, captured as usize, wire, timestamp, link_type);
            count.kept += 1;
        } else {
            count.skipped += 1;
        }
        let next = read_u32(header, packet::NEXT) as usize;
        if next == 0 && number < packets {
            return Err(bad_block(number, packets, "it says no packet follows"));
        }
        at += next;
    }
    Ok(count)
}

fn bad_block(number: usize, packets: usize, what: &str) -> CoreError {
    CoreError::Capture { message: format!("the kernel handed over a ring block that does not parse: packet {number} of {packets}: {what}"), errno: None }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batch::linktype::ETHERNET;

    /// A block as the kernel lays it out, holding `frames` as (bytes, wire length, seconds,
    /// nanoseconds, sll_pkttype).
    fn block_of(frames: &[(&[u8], u32, u32, u32, u8)]) -> Vec<u8> {
        let mut block = vec![0u8; block::HEADER];
        block[block::PACKETS..block::PACKETS + 4].copy_from_slice(&(frames.len() as u32).to_ne_bytes());
        block[block::FIRST_PACKET..block::FIRST_PACKET + 4].copy_from_slice(&(block::HEADER as u32).to_ne_bytes());
        for (index, (bytes, wire, seconds, nanoseconds, kind)) in frames.iter().enumerate() {
            let mac = packet::HEADER.next_multiple_of(16) + 2; // as the kernel aligns the network header
            let size = (mac + bytes.len()).next_multiple_of(16);
            let mut header = vec![0u8; size];
            let next = if index + 1 == frames.len() { 0 } else { size as u32 };
            for (at, value) in [
                (packet::NEXT, next),
                (packet::SECONDS, *seconds),
                (packet::NANOSECONDS, *nanoseconds),
                (packet::CAPTURED, bytes.len() as u32),
                (packet::WIRE, *wire),
            ] {
                header[at..at + 4].copy_from_slice(&value.to_ne_bytes());
            }
            header[packet::MAC..packet::MAC + 2].copy_from_slice(&(mac as u16).to_ne_bytes());
            header[packet::PACKET_TYPE] = *kind;
            header[mac..mac + bytes.len()].copy_from_slice(bytes);
            block.extend_from_slice(&header);
        }
        let used = block.len() as u32;
        block[block::USED_LENGTH..block::USED_LENGTH + 4].copy_from_slice(&used.to_ne_bytes());
        block
    }

    #[test]
    fn indexes_every_packet_of_a_block_where_it_sits() {
        let block = block_of(&[(b"first", 60, 7, 5, libc::PACKET_HOST), (b"second!", 1514, 7, 999_999_999, libc::PACKET_OUTGOING)]);
        let mut batch = PacketBuffers { data: vec![0xee; 100], ..Default::default() };
        let count = index_block(&block, 100, Direction::Both, ETHERNET, &mut batch).unwrap();
        batch.data.extend_from_slice(&block);
        assert_eq!(count, BlockCount { kept: 2, skipped: 0 });
        assert_eq!((batch.view().packet(0), batch.view().packet(1)), (&b"first"[..], &b"second!"[..]));
        assert_eq!((batch.lengths.as_slice(), batch.wire_lengths.as_slice()), (&[5, 7][..], &[60, 1514][..]));
        assert_eq!(batch.timestamps_ns, [7_000_000_005, 7_999_999_999]);
    }

    #[test]
    fn direction_keeps_what_it_names_and_counts_the_rest() {
        let block = block_of(&[(b"in", 2, 1, 0, libc::PACKET_HOST), (b"out", 3, 1, 1, libc::PACKET_OUTGOING), (b"bcast", 5, 1, 2, libc::PACKET_BROADCAST)]);
        for (direction, kept, lengths) in [(Direction::Outgoing, 1, vec![3]), (Direction::Incoming, 2, vec![2, 5]), (Direction::Both, 3, vec![2, 3, 5])] {
            let mut batch = PacketBuffers::default();
            let count = index_block(&block, 0, direction, ETHERNET, &mut batch).unwrap();
            assert_eq!(count, BlockCount { kept, skipped: 3 - kept }, "{direction:?}");
            assert_eq!(batch.lengths, lengths);
        }
    }

    #[test]
    fn a_block_that_lies_about_its_packets_is_an_error_that_says_where() {
        let mut cut = block_of(&[(b"ok", 2, 1, 0, 0), (b"long", 4, 1, 0, 0)]);
        cut.truncate(cut.len() - 12); // into the second packet's 4 bytes, past its padding
        let err = index_block(&cut, 0, Direction::Both, ETHERNET, &mut PacketBuffers::default()).unwrap_err();
        assert!(err.to_string().contains("packet 2 of 2: its 4 bytes at byte"), "{err}");
        let mut one_more = block_of(&[(b"ok", 2, 1, 0, 0)]);
        one_more[block::PACKETS] = 2;
        let err = index_block(&one_more, 0, Direction::Both, ETHERNET, &mut PacketBuffers::default()).unwrap_err();
        assert!(err.to_string().ends_with("packet 1 of 2: it says no packet follows"), "{err}");
        let mut header_outside = block_of(&[(b"ok", 2, 1, 0, 0)]);
        header_outside[block::FIRST_PACKET..block::FIRST_PACKET + 4].copy_from_slice(&4000u32.to_ne_bytes());
        let err = index_block(&header_outside, 0, Direction::Both, ETHERNET, &mut PacketBuffers::default()).unwrap_err();
        assert!(err.to_string().contains("packet 1 of 1: its header at byte 4000 runs past the block's"), "{err}");
    }
}
