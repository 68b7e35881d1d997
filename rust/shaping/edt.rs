//! Earliest-departure-time shaping: each packet is given the time it may leave, instead of
//! being held in a queue that a timer drains.
//!
//! GCRA, the virtual-scheduling form of a token bucket of `burst` bytes filling at `rate`: the
//! state is the theoretical arrival time (TAT), the time at which the bucket would be full
//! again. A packet of `b` bytes moves the TAT to `max(TAT, now) + b/rate` and may leave once the
//! bucket holds it, at `max(now, TAT - burst/rate)`. The TAT is kept as whole nanoseconds plus a
//! remainder in 1/rate ns, so that a billion packets at a rate land exactly where they should.

use super::{MAX_RATE, NS_PER_S};

/// The smallest Ethernet frame: a burst below it could never let a frame through at once.
pub const MIN_BURST: u64 = 64;

/// A flow's shaping policy. Rates are bytes per second, sizes bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ShaperParams {
    pub rate: u64,
    /// Bytes that may leave at once after a quiet spell; guidance: about 1 ms at `rate`, and at
    /// least the largest frame (a larger frame waits for the excess, as if the bucket had gone
    /// into debt).
    pub burst: u64,
    /// Most bytes that may wait: the bytes the shaper still owes beyond its burst, counting the
    /// new packet (see [`ShaperState::backlog_bytes`]). 0 with `max_delay_ns` 0 is a policer.
    pub max_queue_bytes: u64,
    /// Longest a packet may be held (release minus arrival).
    pub max_delay_ns: u64,
}

impl ShaperParams {
    /// Rejects what cannot shape: no rate, a rate too large for exact arithmetic, a burst that
    /// holds no frame.
    pub fn check(&self) -> Result<(), String> {
        if self.rate == 0 {
            return Err("rate must be positive".to_string());
        }
        if self.rate > MAX_RATE {
            return Err(format!("rate {} B/s is over the largest supported, {MAX_RATE} B/s", self.rate));
        }
        if self.burst < MIN_BURST {
            return Err(format!("burst {} B is smaller than one frame ({MIN_BURST} B)", self.burst));
        }
        Ok(())
    }
}

/// Why a packet was dropped at the tail of the shaper's queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ShapeDrop {
    /// Waiting bytes would exceed `max_queue_bytes` (checked first).
    QueueBytes,
    /// The packet would wait longer than `max_delay_ns`.
    QueueTime,
}

/// One flow's shaper: 24 bytes. Starts with a full bucket.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ShaperState {
    /// The TAT is `tat_ns + tat_rem / rate` nanoseconds.
    tat_ns: u64,
    tat_rem: u64,
    /// The latest time of an accepted packet: an earlier timestamp is read as this one.
    last_ns: u64,
}

/// A shaper's parameters with what each packet would otherwise divide for, computed once: the
/// per-packet path compares (ns, remainder) pairs, and stays exact.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ShaperConsts {
    pub params: ShaperParams,
    rate: Divisor,
    /// `burst` in ns at the rate: whole ns plus a remainder in 1/rate ns.
    burst_ns: u128,
    burst_rem: u64,
    /// The same for `burst + max_queue_bytes`: how far ahead of now the TAT may be.
    limit_ns: u128,
    limit_rem: u64,
}

impl ShaperConsts {
    /// `params` must have passed [`ShaperParams::check`].
    pub fn new(params: &ShaperParams) -> Self {
        let rate = u128::from(params.rate);
        let burst_scaled = u128::from(params.burst) * NS_PER_S;
        let limit_scaled = burst_scaled + u128::from(params.max_queue_bytes) * NS_PER_S;
        ShaperConsts {
            params: *params,
            rate: Divisor::new(params.rate),
            burst_ns: burst_scaled / rate,
            burst_rem: (burst_scaled % rate) as u64,
            limit_ns: limit_scaled / rate,
            limit_rem: (limit_scaled % rate) as u64,
        }
    }
}

impl ShaperState {
    /// The release time of a packet of `bytes` arriving at `now_ns` (>= the effective arrival
    /// time), or why it is dropped; a dropped packet changes no state. A timestamp earlier
    /// than the last accepted packet's is treated as that time.
    pub fn shape(&mut self, params: &ShaperParams, now_ns: u64, bytes: u32) -> Result<u64, ShapeDrop> {
        self.shape_with(&ShaperConsts::new(params), now_ns, bytes)
    }

    /// [`shape`](ShaperState::shape) with the constants computed beforehand. In 1/rate ns the
    /// TAT moves to `max(TAT, now) + bytes x 1e9`; what the packet owes beyond the burst is
    /// `TAT - now x rate - burst x 1e9`, and it waits `ceil(owed / rate)` for it. All of it is
    /// done on (whole ns, remainder in 1/rate ns) pairs, where a remainder is below the rate, so
    /// that comparing two amounts is comparing pairs, and the one division left (of a 64-bit
    /// number, by the rate) is a multiply by a precomputed reciprocal.
    #[inline]
    pub fn shape_with(&mut self, consts: &ShaperConsts, now_ns: u64, bytes: u32) -> Result<u64, ShapeDrop> {
        let rate = consts.rate.divisor;
        let now = now_ns.max(self.last_ns);
        // max(TAT, now): the remainder is below the rate, so whole ns decide.
        let (base_ns, base_rem) = if self.tat_ns >= now { (self.tat_ns, self.tat_rem.min(rate - 1)) } else { (now, 0) };
        // Below 2^42 + 2^32 x 1e9 < 2^64.
        let (add_ns, tat_rem) = consts.rate.div_rem(base_rem + u64::from(bytes) * NS_PER_S as u64);
        let tat_ns = u128::from(base_ns) + u128::from(add_ns);
        // How far the new TAT is ahead of now (never behind: base_ns >= now), in whole ns and
        // tat_rem.
        let ahead_ns = tat_ns - u128::from(now);
        if exceeds(ahead_ns, tat_rem, consts.limit_ns, consts.limit_rem) {
            return Err(ShapeDrop::QueueBytes);
        }
        // Owing nothing beyond the burst: no wait. Otherwise ahead >= burst in whole ns, and
        // the part of a ns left over rounds up.
        let wait = if exceeds(ahead_ns, tat_rem, consts.burst_ns, consts.burst_rem) { ahead_ns - consts.burst_ns + u128::from(tat_rem > consts.burst_rem) } else { 0 };
        if wait > u128::from(consts.params.max_delay_ns) {
            return Err(ShapeDrop::QueueTime);
        }
        self.tat_ns = saturate(tat_ns);
        self.tat_rem = tat_rem;
        self.last_ns = now;
        Ok(now.saturating_add(wait as u64))
    }

    /// Bytes still owed at `now_ns` beyond the burst: the fluid backlog. It differs from the
    /// bytes of packets whose release is after `now_ns` by less than one packet (the earliest of
    /// them counts only its part not yet paid for at `rate`).
    pub fn backlog_bytes(&self, params: &ShaperParams, now_ns: u64) -> u64 {
        let rate = u128::from(params.rate);
        let now_scaled = u128::from(now_ns.max(self.last_ns)) * rate;
        let burst = u128::from(params.burst) * NS_PER_S;
        saturate(ceil_div(self.tat_scaled(rate).saturating_sub(now_scaled + burst), NS_PER_S))
    }

    /// The TAT in 1/rate ns (a remainder left by another rate is cut to this one's range).
    #[inline]
    fn tat_scaled(&self, rate: u128) -> u128 {
        u128::from(self.tat_ns) * rate + u128::from(self.tat_rem).min(rate - 1)
    }
}

/// Whether (ns, rem) is more than (limit_ns, limit_rem): remainders are below the rate, so
/// whole ns decide unless equal.
#[inline]
fn exceeds(ns: u128, rem: u64, limit_ns: u128, limit_rem: u64) -> bool {
    ns > limit_ns || (ns == limit_ns && rem > limit_rem)
}

/// Exact division of 64-bit numbers by a fixed divisor: a multiply by its reciprocal, which
/// is at most one short, then one correction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Divisor {
    divisor: u64,
    /// floor(2^64 / divisor), or 2^64 - 1 for 1 (it is never more than one short either way).
    reciprocal: u64,
}

impl Divisor {
    fn new(divisor: u64) -> Self {
        let reciprocal = u64::try_from((1u128 << 64) / u128::from(divisor)).unwrap_or(u64::MAX);
        Divisor { divisor, reciprocal }
    }

    /// (n / divisor, n % divisor).
    #[inline]
    fn div_rem(&self, n: u64) -> (u64, u64) {
        let quotient = ((u128::from(n) * u128::from(self.reciprocal)) >> 64) as u64;
        let rem = n - quotient * self.divisor;
        if rem >= self.divisor {
            (quotient + 1, rem - self.divisor)
        } else {
            (quotient, rem)
        }
    }
}

#[inline]
pub(super) fn ceil_div(numerator: u128, denominator: u128) -> u128 {
    numerator.div_ceil(denominator)
}

#[inline]
pub(super) fn saturate(value: u128) -> u64 {
    u64::try_from(value).unwrap_or(u64::MAX)
}
