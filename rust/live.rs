//! Live capture from a Linux device through an AF_PACKET socket and a TPACKET_V3 ring.
//!
//! The kernel fills the ring's blocks with packets and their headers and hands each block over
//! when it is full or `block_timeout_ms` after its first packet. [`LiveCapture::next_batch`]
//! takes the blocks ready at that moment and returns their packets as one [`PacketBuffers`]:
//! each block is copied out with one memcpy and given straight back, and the batch's offsets
//! point into the copies (no copy or allocation per packet). Timestamps are the kernel's, in
//! ns. What the kernel could not put in the ring is its drop counter ([`CaptureStats`]).
//!
//! [`socket`] makes and binds the socket, [`ring`] maps and reads the ring, [`netns`] makes
//! the socket in another network namespace.

mod netns;
mod ring;
mod socket;
#[cfg(test)]
mod tests;

use std::io;
use std::time::{Duration, Instant};

use crate::batch::PacketBuffers;
use crate::error::{CoreError, Result};

use ring::Ring;
use socket::PacketSocket;

/// At most this many bytes of blocks go into one batch (at least one block does).
const BATCH_BYTES: usize = 8 << 20;

/// Which packets of the device to keep: a veth end, for one, sees what it sends as well as
/// what it receives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    Both,
    /// Received by the device: the kernel leaves outgoing packets out of the ring
    /// (`PACKET_IGNORE_OUTGOING`).
    Incoming,
    /// Sent by the device: the ring holds both, and incoming ones are counted as skipped.
    Outgoing,
}

impl Direction {
    /// `"both"`, `"in"` or `"out"`.
    pub fn from_name(name: &str) -> Result<Direction> {
        match name {
            "both" => Ok(Direction::Both),
            "in" => Ok(Direction::Incoming),
            "out" => Ok(Direction::Outgoing),
            other => Err(CoreError::InvalidArgument(format!("direction must be 'both', 'in' or 'out', not '{other}'"))),
        }
    }

    /// Whether a packet of `sll_pkttype` `kind` is wanted.
    fn keeps(self, kind: u8) -> bool {
        match self {
            Direction::Both => true,
            Direction::Incoming => kind != libc::PACKET_OUTGOING,
            Direction::Outgoing => kind == libc::PACKET_OUTGOING,
        }
    }
}

/// How to capture. The ring takes `block_size` × `blocks` bytes of kernel memory.
#[derive(Debug, Clone, Copy)]
pub struct CaptureOptions {
    /// Bytes kept of each packet (the rest still counts in its wire length).
    pub snaplen: u32,
    /// A multiple of the page size; a packet longer than a block is cut to fit it.
    pub block_size: u32,
    pub blocks: u32,
    /// How long the kernel keeps a block that is not full before handing it over.
    pub block_timeout_ms: u32,
    pub direction: Direction,
}

impl Default for CaptureOptions {
    fn default() -> Self {
        CaptureOptions { snaplen: 262_144, block_size: 1 << 20, blocks: 64, block_timeout_ms: 10, direction: Direction::Both }
    }
}

impl CaptureOptions {
    fn check(&self) -> Result<()> {
        // SAFETY: sysconf has no preconditions.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(1) as u32;
        let refuse = |reason: String| Err(CoreError::InvalidArgument(reason));
        if self.block_size == 0 || !self.block_size.is_multiple_of(page) {
            return refuse(format!("block_size must be a positive multiple of the page size ({page} bytes), not {}", self.block_size));
        }
        if self.blocks == 0 || u64::from(self.block_size) * u64::from(self.blocks) > isize::MAX as u64 {
            return refuse(format!("blocks must be at least 1 and the ring must fit in memory, not {} blocks", self.blocks));
        }
        if self.snaplen == 0 || self.block_timeout_ms == 0 {
            return refuse("snaplen and block_timeout_ms must be at least 1".to_string());
        }
        Ok(())
    }
}

/// The kernel's counters for the socket (`PACKET_STATISTICS`, `tpacket_stats_v3`).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct KernelStats {
    /// Packets the socket saw, dropped ones included.
    pub packets: u64,
    /// Packets the kernel could not put in the ring because every block was full.
    pub drops: u64,
    /// Times the ring filled up (the queue froze until a block came back).
    pub freezes: u64,
}

/// What a capture has seen since it opened: the kernel's counters, accumulated (reading them
/// resets them in the kernel), and what this reader handed on.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct CaptureStats {
    pub kernel: KernelStats,
    /// Packets returned in batches.
    pub delivered: u64,
    /// Packets in the ring that the direction option left out.
    pub skipped: u64,
    pub blocks: u64,
}

/// A capture on one device: its socket and ring.
pub struct LiveCapture {
    // The ring is declared first so that it is unmapped before the socket closes.
    ring: Ring,
    socket: PacketSocket,
    dev: String,
    direction: Direction,
    link_type: u16,
    stats: CaptureStats,
}

impl LiveCapture {
    /// Opens a capture on device `dev` of network namespace `netns` (an `ip netns` name; None:
    /// the calling thread's namespace). Needs CAP_NET_RAW (and CAP_SYS_ADMIN for `netns`).
    pub fn open(dev: &str, netns: Option<&str>, options: &CaptureOptions) -> Result<LiveCapture> {
        options.check()?;
        socket::device_name(dev)?;
        netns::within(netns, || {
            let socket = PacketSocket::open()?;
            let (index, link_type) = socket.device(dev, netns)?;
            socket.set_snaplen(options.snaplen)?;
            socket.set_direction(options.direction)?;
            let ring = Ring::map(&socket, options)?;
            socket.bind(index, dev)?;
            Ok(LiveCapture { ring, socket, dev: dev.to_string(), direction: options.direction, link_type, stats: CaptureStats::default() })
        })
    }

    /// The pcap link type of the device's frames (Ethernet, or raw IP).
    pub fn link_type(&self) -> u16 {
        self.link_type
    }

    /// The packets of the blocks ready now, waiting up to `timeout` for one; None when the
    /// time passed without a packet to hand on. A device that went down or away is an error
    /// (once what the ring held is handed on).
    pub fn next_batch(&mut self, timeout: Duration) -> Result<Option<PacketBuffers>> {
        let deadline = Instant::now() + timeout;
        loop {
            let batch = self.take_ready()?;
            if !batch.is_empty() {
                return Ok(Some(batch));
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Ok(None);
            }
            self.socket.wait(left).map_err(|err| capture_error(&format!("capturing on '{}' stopped", self.dev), err))?;
        }
    }

    /// The ready blocks' packets, in buffers made for them at once: the blocks are copied into
    /// place, never moved again.
    fn take_ready(&mut self) -> Result<PacketBuffers> {
        let (blocks, packets) = self.ring.ready((BATCH_BYTES / self.ring.block_size()).max(1));
        let mut batch = PacketBuffers::with_capacity(blocks * self.ring.block_size(), packets);
        for _ in 0..blocks {
            let count = self.ring.take_block(&mut batch, self.direction, self.link_type)?;
            self.stats.delivered += count.kept;
            self.stats.skipped += count.skipped;
            self.stats.blocks += 1;
        }
        Ok(batch)
    }

    /// The counters so far (reads the kernel's and adds them to the earlier ones).
    pub fn stats(&mut self) -> Result<CaptureStats> {
        let now = self.socket.take_stats()?;
        let kernel = &mut self.stats.kernel;
        kernel.packets += now.packets;
        kernel.drops += now.drops;
        kernel.freezes += now.freezes;
        Ok(self.stats)
    }
}

/// A capture error saying what failed (`context`) and the kernel's answer.
fn capture_error(context: &str, err: io::Error) -> CoreError {
    let errno = err.raw_os_error();
    let text = err.to_string();
    let text = errno.and_then(|code| text.strip_suffix(&format!(" (os error {code})"))).unwrap_or(&text);
    CoreError::Capture { message: format!("{context}: {text}"), errno }
}
