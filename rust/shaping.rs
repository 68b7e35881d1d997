//! Shaping and egress queueing in packet time: what a rate limit or a shared port does to each
//! packet, computed exactly so that a replay gives the same answer on every machine.
//!
//! - [`edt`]: an earliest-departure-time shaper (GCRA): a release time per packet, no queue to
//!   simulate, 24 bytes of state per flow.
//! - [`port`]: an egress port: strict priority, then weighted deficit round robin, with a
//!   guarantee and a ceiling per queue (HTB-like), or one shared FIFO to compare against.
//! - [`histogram`]: the log-linear histogram behind the per-queue delay quantiles.
//!
//! Time is packet time in nanoseconds, never the wall clock. Rates are bytes per second (the
//! caller converts from bits and decides which bytes a packet counts: add 20 B per frame for
//! preamble and gap if the wire is what matters). No float touches the data path: clocks that
//! need fractions of a nanosecond carry them as exact integers, so nothing drifts.

mod bucket;
pub mod edt;
pub mod histogram;
pub mod port;
mod wdrr;

pub use edt::{Offer, ShapeDrop, ShaperConsts, ShaperParams, ShaperState};
pub use histogram::LogHistogram;
pub use port::{bucket_bytes, Departure, Port, PortConfig, PortDrop, PortMode, QueueConfig, QueueStats, WeightScale};

/// Rates above this (about 35 Tbit/s) are refused, so that every product of a time, a rate and
/// a size fits in 128 bits with room to spare.
pub const MAX_RATE: u64 = 1 << 42;

const NS_PER_S: u128 = 1_000_000_000;

#[cfg(test)]
mod reference;
#[cfg(test)]
mod tests;
