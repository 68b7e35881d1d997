//! Exact token buckets on the port's clock, for guarantees and ceilings.
//!
//! The port counts time in ticks of 1/line_rate ns, so that a frame's transmission time
//! (bytes x 1e9 ticks) is whole. Tokens are counted in units of 1/(1e9 x line_rate) byte, so a
//! bucket at `rate` bytes/s gains exactly `rate` units per tick: nothing is ever rounded.

use std::num::NonZeroU64;

/// A point on the port's clock, in 1/line_rate ns.
pub(super) type Tick = u128;

/// The smallest bucket: one largest (jumbo) frame, so that any frame can pass on its own.
pub const MIN_BUCKET_BYTES: u64 = 9216;

/// A guarantee's or a ceiling's default burst: 1 ms of traffic at its rate (the usual advice,
/// enough for TCP not to collapse), but at least one jumbo frame.
pub fn bucket_bytes(rate: u64) -> u64 {
    (rate / 1000).max(MIN_BUCKET_BYTES)
}

/// A port queue has two of these: `rate` is never zero (a queue without a guarantee or ceiling has
/// no bucket), which lets an `Option<Bucket>` take no more room than a bucket.
#[derive(Debug, Clone)]
pub(super) struct Bucket {
    rate: NonZeroU64,
    /// In bytes, not units: a port's thousands of queues keep 16 bytes less each, and each use
    /// multiplies by the unit.
    depth_bytes: u64,
    /// Tokens at tick `at`; below zero only after a frame larger than the bucket.
    tokens: i128,
    at: Tick,
}

impl Bucket {
    /// A full bucket at `rate` bytes/s, `depth_bytes` deep; `unit` is the token units in a byte
    /// (1e9 x line_rate).
    pub(super) fn new(rate: NonZeroU64, depth_bytes: u64, unit: i128) -> Self {
        Bucket { rate, depth_bytes, tokens: i128::from(depth_bytes) * unit, at: 0 }
    }

    /// This bucket full at tick 0, as a new one of its rate and depth.
    pub(super) fn refilled(&self, unit: i128) -> Self {
        Bucket::new(self.rate, self.depth_bytes, unit)
    }

    /// This bucket at a new `rate` and `depth_bytes` from `now` on, with the tokens it holds
    /// then (at most the new depth): a change of contract neither refills nor empties it.
    pub(super) fn retuned(&self, rate: NonZeroU64, depth_bytes: u64, unit: i128, now: Tick) -> Self {
        let depth = i128::from(depth_bytes) * unit;
        Bucket { rate, depth_bytes, tokens: self.tokens_at(now.max(self.at), unit).min(depth), at: now.max(self.at) }
    }

    /// The depth in token units.
    #[inline]
    fn depth(&self, unit: i128) -> i128 {
        i128::from(self.depth_bytes) * unit
    }

    /// Tokens at `now` (not before the last charge).
    fn tokens_at(&self, now: Tick, unit: i128) -> i128 {
        let depth = self.depth(unit);
        let missing = depth - self.tokens;
        if missing <= 0 {
            return self.tokens;
        }
        // Full once `elapsed x rate` covers what is missing: a multiplication, where dividing
        // `missing` by the rate took a 128-bit division on every charge.
        match (now - self.at).checked_mul(u128::from(self.rate.get())) {
            Some(gained) if gained < missing as u128 => self.tokens + gained as i128,
            _ => depth,
        }
    }

    /// The first tick from which the bucket holds `need` units (or is full, if `need` is more
    /// than it can hold): from then on a frame of that size may pass.
    pub(super) fn ready_at(&self, need: i128, unit: i128) -> Tick {
        // Holding `need`, it holds the least of `need` and its depth: the depth is worked out
        // (a multiplication) only when it must.
        if self.tokens >= need {
            return self.at;
        }
        let need = need.min(self.depth(unit));
        if self.tokens >= need {
            self.at
        } else {
            self.at + ((need - self.tokens) as u128).div_ceil(u128::from(self.rate.get()))
        }
    }

    /// Takes `amount` units at `now`.
    pub(super) fn charge(&mut self, now: Tick, amount: i128, unit: i128) {
        self.tokens = self.tokens_at(now, unit) - amount;
        self.at = now;
    }
}
