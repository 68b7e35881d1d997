//! What a port is made of: its configuration and its queues' ([`PortConfig`], [`QueueConfig`]),
//! the scale that makes queues' shares weights ([`WeightScale`]), their limits, and the check
//! that a port may have its queues ([`check_queues`]).

use std::num::NonZeroU64;

use super::super::bucket::bucket_bytes;
use super::super::MAX_RATE;
use crate::codes::codes;
use crate::error::CoreError;

/// A queue's round-robin quantum per unit of weight: one jumbo frame, so that every turn sends
/// at least one packet (larger packets, e.g. unsegmented TSO captures, take several turns).
pub const QUANTUM_BYTES: u64 = 9216;

/// The deepest guarantee bucket (8 GiB, the meters' limit): token arithmetic stays in 128 bits.
pub const MAX_BURST_BYTES: u64 = 8 << 30;

/// The dynamic threshold's alpha is 2^alpha_log2 with alpha_log2 in this range (1/65536 to 65536).
pub const ALPHA_LOG2_RANGE: std::ops::RangeInclusive<i8> = -16..=16;

codes! {
    /// How the port isolates its queues (`PORT_MODES` in Python, a policy's `port.mode`).
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum PortMode: "port mode" {
        /// Each queue (in the engine, each tenant's class) apart: priorities, weights,
        /// guarantees, ceilings, per-queue limits.
        PerTenant = 0,
        /// One FIFO for every queue's packets: only the line rate and the buffer apply.
        SharedFifo = 1,
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PortConfig {
    /// Bytes per second.
    pub line_rate: u64,
    /// Bytes that may wait, all queues together.
    pub buffer_bytes: u64,
    pub mode: PortMode,
}

/// One queue (in the engine: one tenant's class). Rates are bytes per second.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct QueueConfig {
    /// 0 is served first.
    pub priority: u8,
    /// Share of the spare capacity (and of the guaranteed phase) within the priority: this
    /// times the units of `share`; >= 1.
    pub weight: u32,
    /// The share, before the port's [`WeightScale`] makes it units (at least one): in the
    /// engine, the tenant's guarantee or its `weight` (0: one unit).
    pub share: u64,
    /// Rate served before any borrowing; 0 = none. The port's guarantees may not add up to
    /// more than its line rate.
    pub guarantee: u64,
    /// How far the queue may run ahead of its guarantee: the guarantee bucket's depth in bytes;
    /// 0 = [`bucket_bytes`] of the guarantee. At most [`MAX_BURST_BYTES`].
    pub burst_bytes: u64,
    /// Rate never exceeded; 0 or >= the line rate = uncapped.
    pub ceil: u64,
    /// Most bytes this queue may hold; 0 = no fixed limit.
    pub limit_bytes: u64,
    /// Bytes of the buffer only this queue may fill (PerTenant mode). The port's reserves may not
    /// add up to more than its buffer.
    pub reserved_bytes: u64,
    /// Dynamic threshold (PerTenant mode): beyond its reserve the queue may hold at most
    /// 2^alpha_log2 x the shared buffer still free; `None` = as much as is free.
    pub alpha_log2: Option<i8>,
}

impl QueueConfig {
    /// An equal share of the spare capacity and nothing else.
    pub const BEST_EFFORT: QueueConfig =
        QueueConfig { priority: 0, weight: 1, share: 0, guarantee: 0, burst_bytes: 0, ceil: 0, limit_bytes: 0, reserved_bytes: 0, alpha_log2: None };

    /// The guarantee bucket's depth in bytes.
    pub fn guarantee_depth(&self) -> u64 {
        if self.burst_bytes > 0 {
            self.burst_bytes
        } else {
            bucket_bytes(self.guarantee)
        }
    }

    /// The ceiling bucket's depth in bytes: never shallower than the guarantee's.
    pub fn ceil_depth(&self) -> u64 {
        let guarantee = if self.guarantee > 0 { self.guarantee_depth() } else { 0 };
        bucket_bytes(self.ceil).max(guarantee)
    }
}

/// How queues' shares ([`QueueConfig::share`]) become units of weight: `share x times / per`,
/// rounded down, at least 1 and at most `u32::MAX`. The engine's: its tenants' `weight`s as
/// they are (1/1), else their guarantees over their greatest common divisor (1/divisor), or
/// scaled so that the largest is `u32::MAX` (`u32::MAX`/largest) when that is not enough.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct WeightScale {
    pub times: u32,
    pub per: NonZeroU64,
}

impl Default for WeightScale {
    /// A share is its units.
    fn default() -> Self {
        WeightScale { times: 1, per: NonZeroU64::MIN }
    }
}

impl WeightScale {
    /// The units of `share`.
    pub fn units(&self, share: u64) -> u64 {
        let units = u128::from(share) * u128::from(self.times) / u128::from(self.per.get());
        units.clamp(1, u128::from(u32::MAX)) as u64
    }

    /// The round-robin quantum of a queue of `share` and `weight`: units x weight (at most
    /// `u32::MAX`, what a policy may give) x [`QUANTUM_BYTES`].
    pub(super) fn quantum(&self, share: u64, weight: u32) -> u64 {
        (self.units(share) * u64::from(weight)).min(u64::from(u32::MAX)) * QUANTUM_BYTES
    }
}

/// Whether a port of `config` may have `queues`: what [`Port::new`] and a caller of
/// [`Port::set_queue`] check.
pub fn check_queues(config: &PortConfig, queues: &[QueueConfig]) -> Result<(), CoreError> {
    if config.line_rate == 0 || config.line_rate > MAX_RATE {
        return Err(CoreError::spec(format!("line rate {} B/s is not in 1..={MAX_RATE}", config.line_rate)));
    }
    if config.buffer_bytes == 0 {
        return Err(CoreError::spec("buffer_bytes must be positive"));
    }
    if queues.len() >= u32::MAX as usize {
        return Err(CoreError::spec("too many queues"));
    }
    for (index, queue) in queues.iter().enumerate() {
        if queue.weight == 0 {
            return Err(CoreError::spec_at(format!("queue {index}"), "weight must be >= 1"));
        }
        if queue.burst_bytes > MAX_BURST_BYTES {
            return Err(CoreError::spec_at(format!("queue {index}"), format!("burst {} B is over {MAX_BURST_BYTES} B", queue.burst_bytes)));
        }
        if queue.alpha_log2.is_some_and(|alpha_log2| !ALPHA_LOG2_RANGE.contains(&alpha_log2)) {
            return Err(CoreError::spec_at(format!("queue {index}"), format!("alpha_log2 {:?} is not in {ALPHA_LOG2_RANGE:?}", queue.alpha_log2)));
        }
        let capped = queue.ceil > 0 && queue.ceil < config.line_rate;
        if capped && queue.guarantee > queue.ceil {
            return Err(CoreError::spec_at(format!("queue {index}"), format!("guarantee {} B/s is over its ceiling {} B/s", queue.guarantee, queue.ceil)));
        }
    }
    let reserved: u128 = queues.iter().map(|q| u128::from(q.reserved_bytes)).sum();
    if reserved > u128::from(config.buffer_bytes) {
        return Err(CoreError::spec(format!("reserves add up to {reserved} B, over the buffer {} B", config.buffer_bytes)));
    }
    let guaranteed: u128 = queues.iter().map(|q| u128::from(q.guarantee)).sum();
    if guaranteed > u128::from(config.line_rate) {
        return Err(CoreError::spec(format!("guarantees add up to {guaranteed} B/s, over the line rate {} B/s", config.line_rate)));
    }
    Ok(())
}
