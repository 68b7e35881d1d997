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
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
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

impl ShaperState {
    /// The release time of a packet of `bytes` arriving at `now_ns` (>= the effective arrival
    /// time), or why it is dropped; a dropped packet changes no state. A timestamp earlier
    /// than the last accepted packet's is treated as that time.
    #[inline]
    pub fn shape(&mut self, params: &ShaperParams, now_ns: u64, bytes: u32) -> Result<u64, ShapeDrop> {
        let rate = u128::from(params.rate);
        let now = now_ns.max(self.last_ns);
        let now_scaled = u128::from(now) * rate;
        let tat = self.tat_scaled(rate).max(now_scaled) + u128::from(bytes) * NS_PER_S;
        let burst = u128::from(params.burst) * NS_PER_S;
        let owed = tat.saturating_sub(now_scaled + burst);
        if owed > u128::from(params.max_queue_bytes) * NS_PER_S {
            return Err(ShapeDrop::QueueBytes);
        }
        let wait = ceil_div(owed, rate);
        if wait > u128::from(params.max_delay_ns) {
            return Err(ShapeDrop::QueueTime);
        }
        self.tat_ns = saturate(tat / rate);
        self.tat_rem = (tat % rate) as u64;
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

#[inline]
pub(super) fn ceil_div(numerator: u128, denominator: u128) -> u128 {
    numerator.div_ceil(denominator)
}

#[inline]
pub(super) fn saturate(value: u128) -> u64 {
    u64::try_from(value).unwrap_or(u64::MAX)
}
