//! Earliest-departure-time shaping: each packet is given the time it may leave, instead of
//! being held in a queue that a timer drains.
//!
//! GCRA, the virtual-scheduling form of a token bucket of `burst` bytes filling at `rate`: the
//! state is the theoretical arrival time (TAT), the time at which the bucket would be full
//! again. A packet of `b` bytes moves the TAT to `max(TAT, now) + b/rate` and may leave once the
//! bucket holds it, at `max(now, TAT - burst/rate)`. The TAT is kept as whole nanoseconds plus a
//! remainder in 1/rate ns, so that a billion packets at a rate land exactly where they should.

use std::hint::select_unpredictable;
use std::num::NonZeroU64;

use super::{MAX_RATE, NS_PER_S};
use crate::error::CoreError;

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
    pub fn check(&self) -> Result<(), CoreError> {
        if self.rate == 0 {
            return Err(CoreError::spec("rate must be positive"));
        }
        if self.rate > MAX_RATE {
            return Err(CoreError::spec(format!("rate {} B/s is over the largest supported, {MAX_RATE} B/s", self.rate)));
        }
        if self.burst < MIN_BURST {
            return Err(CoreError::spec(format!("burst {} B is smaller than one frame ({MIN_BURST} B)", self.burst)));
        }
        Ok(())
    }
}

/// Why a packet was dropped at the tail of the shaper's queue (numbered, to index tables).
#[repr(u8)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ShapeDrop {
    /// Waiting bytes would exceed `max_queue_bytes` (checked first).
    QueueBytes = 0,
    /// The packet would wait longer than `max_delay_ns`.
    QueueTime = 1,
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
    /// `burst` in ns at the rate, as a [`Pair`].
    burst: Pair,
    /// The same for `burst + max_queue_bytes`: how far ahead of now the TAT may be.
    limit: Pair,
}

impl ShaperConsts {
    /// `params` must have passed [`ShaperParams::check`].
    pub fn new(params: &ShaperParams) -> Self {
        let burst_scaled = u128::from(params.burst) * NS_PER_S;
        let limit_scaled = burst_scaled + u128::from(params.max_queue_bytes) * NS_PER_S;
        ShaperConsts {
            params: *params,
            rate: Divisor::new(params.rate),
            burst: Pair::of_scaled(burst_scaled, params.rate),
            limit: Pair::of_scaled(limit_scaled, params.rate),
        }
    }

    /// How long a packet that leaves the TAT `ahead` of now waits, or why it is dropped. Owing
    /// nothing beyond the burst, it does not wait; otherwise the part of a ns left over rounds up.
    #[inline]
    fn wait(&self, ahead: Pair) -> (u64, Option<ShapeDrop>) {
        let (owed, within_burst) = ahead.0.overflowing_sub(self.burst.0);
        let owed = select_unpredictable(within_burst, 0, owed);
        let wait = (owed >> 64) as u64 + u64::from(owed as u64 != 0);
        let too_late = select_unpredictable(wait > self.params.max_delay_ns, Some(ShapeDrop::QueueTime), None);
        (wait, select_unpredictable(ahead > self.limit, Some(ShapeDrop::QueueBytes), too_late))
    }
}

/// What a shaper would do with a packet: its release time, or why it would be dropped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Offer {
    /// The shaper's state once the packet is sent (a dropped packet leaves it as it was).
    pub sent: ShaperState,
    pub release_ns: u64,
    pub drop: Option<ShapeDrop>,
}

impl ShaperState {
    /// The release time of a packet of `bytes` arriving at `now_ns` (>= the effective arrival
    /// time), or why it is dropped; a dropped packet changes no state. A timestamp earlier
    /// than the last accepted packet's is treated as that time.
    pub fn shape(&mut self, params: &ShaperParams, now_ns: u64, bytes: u32) -> Result<u64, ShapeDrop> {
        self.shape_with(&ShaperConsts::new(params), now_ns, bytes)
    }

    /// [`shape`](ShaperState::shape) with the constants computed beforehand.
    #[inline]
    pub fn shape_with(&mut self, consts: &ShaperConsts, now_ns: u64, bytes: u32) -> Result<u64, ShapeDrop> {
        let offer = self.offer(consts, now_ns, bytes);
        match offer.drop {
            None => {
                *self = offer.sent;
                Ok(offer.release_ns)
            }
            Some(drop) => Err(drop),
        }
    }

    /// What [`shape_with`](ShaperState::shape_with) would do, without doing it (so that a
    /// caller can decide without a branch whether to send the packet). In 1/rate ns the TAT moves
    /// to `max(TAT, now) + bytes x 1e9`; what the packet owes beyond the burst is
    /// `TAT - now x rate - burst x 1e9`, and it waits `ceil(owed / rate)` for it. All of it is
    /// done on (whole ns, remainder in 1/rate ns) [`Pair`]s, so that comparing two amounts is
    /// comparing pairs, and the one division left (of a 64-bit number, by the rate) is a
    /// multiply by a precomputed reciprocal. No branch depends on the traffic.
    #[inline]
    pub fn offer(&self, consts: &ShaperConsts, now_ns: u64, bytes: u32) -> Offer {
        let rate = consts.rate.divisor.get();
        let now = now_ns.max(self.last_ns);
        // max(TAT, now): the remainder is below the rate, so whole ns decide.
        let behind = self.tat_ns < now;
        let base_ns = self.tat_ns.max(now);
        let base_rem = select_unpredictable(behind, 0, self.tat_rem.min(rate - 1));
        // Below 2^42 + 2^32 x 1e9 < 2^64.
        let (add_ns, tat_rem) = consts.rate.div_rem(base_rem + u64::from(bytes) * NS_PER_S as u64);
        // How far the new TAT is ahead of now (never behind: base_ns >= now).
        let (ahead_ns, beyond_u64) = (base_ns - now).overflowing_add(add_ns);
        let (wait, drop) = if beyond_u64 { Self::wait_far_ahead(&consts.params, ahead_ns, tat_rem) } else { consts.wait(Pair::new(ahead_ns, tat_rem)) };
        // Past u64::MAX ns (far ahead, or late in time), the TAT saturates.
        let sent = ShaperState { tat_ns: base_ns.saturating_add(add_ns), tat_rem, last_ns: now };
        Offer { sent, release_ns: now.saturating_add(wait), drop }
    }

    /// Takes the state `offer` leaves if the packet is `sent`; without a branch.
    #[inline]
    pub fn settle(&mut self, offer: &Offer, sent: bool) {
        self.tat_ns = select_unpredictable(sent, offer.sent.tat_ns, self.tat_ns);
        self.tat_rem = select_unpredictable(sent, offer.sent.tat_rem, self.tat_rem);
        self.last_ns = select_unpredictable(sent, offer.sent.last_ns, self.last_ns);
    }

    /// [`ShaperConsts::wait`] for a TAT 2^64 ns or more ahead of now (`ahead_ns` is how far
    /// beyond 2^64; only a queue limit that large lets a TAT get there): exact, by plain
    /// division in 1/rate ns.
    #[cold]
    fn wait_far_ahead(params: &ShaperParams, ahead_ns: u64, tat_rem: u64) -> (u64, Option<ShapeDrop>) {
        let rate = u128::from(params.rate);
        let ahead = ((1u128 << 64) + u128::from(ahead_ns)) * rate + u128::from(tat_rem);
        if ahead > (u128::from(params.burst) + u128::from(params.max_queue_bytes)) * NS_PER_S {
            return (0, Some(ShapeDrop::QueueBytes));
        }
        match u64::try_from(ceil_div(ahead.saturating_sub(u128::from(params.burst) * NS_PER_S), rate)) {
            Ok(wait) if wait <= params.max_delay_ns => (wait, None),
            _ => (0, Some(ShapeDrop::QueueTime)),
        }
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

/// An amount of time at a rate, `ns << 64 | remainder in 1/rate ns`: remainders are below the
/// rate, so pairs compare as their amounts do, in one comparison. One beyond `u64::MAX` ns is
/// `u128::MAX`, which every amount the per-packet path compares with it stays below.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct Pair(u128);

impl Pair {
    fn new(ns: u64, rem: u64) -> Self {
        Pair(u128::from(ns) << 64 | u128::from(rem))
    }

    /// `scaled` (in 1/rate ns) as a pair.
    fn of_scaled(scaled: u128, rate: u64) -> Self {
        let rate = u128::from(rate);
        u64::try_from(scaled / rate).map_or(Pair(u128::MAX), |ns| Pair::new(ns, (scaled % rate) as u64))
    }
}

/// Exact division of 64-bit numbers by a fixed divisor: a multiply by its reciprocal, which
/// is at most one short, then one correction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Divisor {
    /// Not 0, which also lets an optional shaper take no room of its own.
    divisor: NonZeroU64,
    /// floor(2^64 / divisor), or 2^64 - 1 for 1 (it is never more than one short either way).
    reciprocal: u64,
}

impl Divisor {
    fn new(divisor: u64) -> Self {
        let divisor = NonZeroU64::new(divisor).expect("a checked shaper's rate is above 0");
        let reciprocal = u64::try_from((1u128 << 64) / u128::from(divisor.get())).unwrap_or(u64::MAX);
        Divisor { divisor, reciprocal }
    }

    /// (n / divisor, n % divisor), without a branch.
    #[inline]
    fn div_rem(&self, n: u64) -> (u64, u64) {
        let quotient = ((u128::from(n) * u128::from(self.reciprocal)) >> 64) as u64;
        let divisor = self.divisor.get();
        let rem = n - quotient * divisor;
        let short = rem >= divisor;
        (quotient + u64::from(short), rem - select_unpredictable(short, divisor, 0))
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
