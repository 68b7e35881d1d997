//! Token-bucket meters: RFC 2697 (srTCM), RFC 2698 (trTCM) and RFC 4115, each colour-blind or
//! colour-aware, following the RFCs' token rules to the byte.
//!
//! A meter is split in two: [`MeterParams`] (rates, burst sizes, mode), which every meter of a
//! profile shares, and [`MeterState`] (24 bytes: a clock and two token counts), one per tenant
//! or flow, so that a million meters take 24 MB.
//!
//! Time is packet time in nanoseconds (capture timestamps), never the wall clock, so a run over
//! a capture is reproducible. Tokens are counted in nano-bytes (bytes x 10^9): a rate in bytes/s
//! times an elapsed time in ns is then an exact token count, with no rounding and no floats, and
//! a packet of B bytes would exactly empty a bucket that holds B x 10^9, which RFCs 2697 and
//! 2698 allow ("Tc(t)-B >= 0") and RFC 4115 does not ("Tc(t)- B > 0"). Tokens accrue continuously
//! (the RFCs add a byte CIR times a second: the same rate, without its steps); what a full
//! bucket cannot hold is lost (in srTCM it spills from C into E first).

use std::hint::select_unpredictable;

use bytemuck::{Pod, Zeroable};

use crate::codes::codes;
use crate::error::CoreError;

/// Nano-bytes per byte: the token unit.
const NANO: u64 = 1_000_000_000;

/// The largest burst size: 8 GiB, so that two full buckets in nano-bytes fit in one u64 (and
/// an arrival count that saturates at `u64::MAX` still fills both).
pub const MAX_BURST_BYTES: u64 = 8 << 30;

codes! {
    /// A packet's colour, in or out of a meter; ordered from best to worst (`isolane.Color`).
    #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
    pub enum Color: "colour" {
        Green = 0,
        Yellow = 1,
        Red = 2,
    }
}

/// Which RFC a meter follows, with its rates (bytes/s) and burst sizes (bytes).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MeterKind {
    /// RFC 2697: one rate; tokens fill C up to CBS, and what C cannot hold fills E up to EBS.
    SrTcm { cir: u64, cbs: u64, ebs: u64 },
    /// RFC 2698: P filled at the peak rate, C at the committed rate; every packet within the
    /// peak spends P, a green one spends C too.
    TrTcm { pir: u64, pbs: u64, cir: u64, cbs: u64 },
    /// RFC 4115: C filled at CIR and E at EIR, independently; a green packet spends only C, a
    /// yellow one only E, so excess traffic cannot eat into the committed rate. A bucket takes a
    /// packet only if it holds more than the packet's bytes, not just as many.
    Rfc4115 { cir: u64, cbs: u64, eir: u64, ebs: u64 },
}

codes! {
    /// A meter's kind in the compiled arrays (`MeterArrays.kind`, `METER_KINDS` in Python): none,
    /// or the RFC it follows ([`MeterKind`], with its rates).
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum MeterKindCode: "meter kind" {
        None = 0,
        Srtcm = 1,
        Trtcm = 2,
        Rfc4115 = 3,
    }
}

/// A meter profile: shared by every [`MeterState`] metered with it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct MeterParams {
    pub kind: MeterKind,
    /// Colour-aware meters take the packet's colour into account and never improve it.
    pub color_aware: bool,
}

impl MeterParams {
    pub fn blind(kind: MeterKind) -> Self {
        MeterParams { kind, color_aware: false }
    }

    pub fn aware(kind: MeterKind) -> Self {
        MeterParams { kind, color_aware: true }
    }

    /// Rejects what the RFCs forbid and what would make a bucket useless or overflow.
    pub fn check(&self) -> Result<(), CoreError> {
        match self.kind {
            MeterKind::SrTcm { cir, cbs, ebs } => {
                check_burst("srTCM CBS", cbs)?;
                check_burst("srTCM EBS", ebs)?;
                if cir == 0 {
                    return Err(CoreError::spec("srTCM CIR is 0: the buckets would never refill"));
                }
                if cbs == 0 && ebs == 0 {
                    return Err(CoreError::spec("srTCM CBS and EBS are both 0: every packet would be red (RFC 2697 needs one above 0)"));
                }
            }
            MeterKind::TrTcm { pir, pbs, cir, cbs } => {
                check_burst("trTCM PBS", pbs)?;
                check_burst("trTCM CBS", cbs)?;
                if cir == 0 {
                    return Err(CoreError::spec("trTCM CIR is 0: C would never refill"));
                }
                if pir < cir {
                    return Err(CoreError::spec(format!("trTCM PIR ({pir} B/s) is below CIR ({cir} B/s): RFC 2698 needs PIR >= CIR")));
                }
                if pbs == 0 || cbs == 0 {
                    return Err(CoreError::spec(format!("trTCM PBS ({pbs}) and CBS ({cbs}) must both be above 0 (RFC 2698)")));
                }
            }
            MeterKind::Rfc4115 { cir, cbs, eir, ebs } => {
                check_burst("RFC 4115 CBS", cbs)?;
                check_burst("RFC 4115 EBS", ebs)?;
                check_bucket("RFC 4115 C", "CIR", cir, "CBS", cbs)?;
                check_bucket("RFC 4115 E", "EIR", eir, "EBS", ebs)?;
                if cir == 0 && eir == 0 {
                    return Err(CoreError::spec("RFC 4115 CIR and EIR are both 0: every packet would be red"));
                }
            }
        }
        Ok(())
    }
}

fn check_burst(name: &str, bytes: u64) -> Result<(), CoreError> {
    if bytes > MAX_BURST_BYTES {
        return Err(CoreError::spec(format!("{name} of {bytes} bytes is over the {MAX_BURST_BYTES}-byte limit (two buckets in nano-bytes must fit in a u64)")));
    }
    Ok(())
}

/// An RFC 4115 bucket is either off (rate and size 0) or on (both above 0): a size with no rate
/// would serve once and never refill, a rate with no size could never hold a token.
fn check_bucket(bucket: &str, rate_name: &str, rate: u64, size_name: &str, size: u64) -> Result<(), CoreError> {
    match (rate, size) {
        (0, 0) => Ok(()),
        (0, _) => Err(CoreError::spec(format!("{bucket}: {size_name} is {size} bytes but {rate_name} is 0, so it would never refill"))),
        (_, 0) => Err(CoreError::spec(format!("{bucket}: {rate_name} is {rate} B/s but {size_name} is 0, so it could never hold a token"))),
        _ => Ok(()),
    }
}

/// A meter profile as the per-packet path reads it, computed once: the three RFCs differ only
/// in where E's (or P's) tokens come from and in which bucket a packet tries first. It gives
/// back the parameters it was made from ([`MeterConsts::params`]) instead of keeping them: a
/// tenant of a contract of its own holds one profile.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MeterConsts {
    color_aware: bool,
    /// CBS, and EBS or PBS, in nano-bytes.
    committed_cap: u64,
    excess_or_peak_cap: u64,
    /// CIR, and EIR or PIR (0 for srTCM, whose E fills only with what C cannot hold).
    committed_rate: u64,
    excess_or_peak_rate: u64,
    /// srTCM: what C cannot hold spills into E.
    spills: bool,
    /// trTCM: a packet tries P first.
    peak_first: bool,
    /// RFC 4115: a bucket takes a packet only if it holds more tokens than the packet's bytes
    /// ("Tc(t)- B > 0"), where RFCs 2697 and 2698 take one that empties it ("Tc(t)-B >= 0").
    needs_more_than_cost: bool,
}

impl MeterConsts {
    /// `params` must have passed [`MeterParams::check`] (so that its bursts are exact in nano-bytes).
    pub fn new(params: &MeterParams) -> Self {
        let (committed, excess_or_peak) = params.burst_sizes();
        let (committed_rate, excess_or_peak_rate) = match params.kind {
            MeterKind::SrTcm { cir, .. } => (cir, 0),
            MeterKind::TrTcm { pir, cir, .. } => (cir, pir),
            MeterKind::Rfc4115 { cir, eir, .. } => (cir, eir),
        };
        MeterConsts {
            color_aware: params.color_aware,
            committed_cap: nano(committed),
            excess_or_peak_cap: nano(excess_or_peak),
            committed_rate,
            excess_or_peak_rate,
            spills: matches!(params.kind, MeterKind::SrTcm { .. }),
            peak_first: matches!(params.kind, MeterKind::TrTcm { .. }),
            needs_more_than_cost: matches!(params.kind, MeterKind::Rfc4115 { .. }),
        }
    }

    /// The parameters it was made from.
    pub fn params(&self) -> MeterParams {
        let (cir, cbs, other_rate, other_bs) = (self.committed_rate, self.committed_cap / NANO, self.excess_or_peak_rate, self.excess_or_peak_cap / NANO);
        let kind = if self.spills {
            MeterKind::SrTcm { cir, cbs, ebs: other_bs }
        } else if self.peak_first {
            MeterKind::TrTcm { pir: other_rate, pbs: other_bs, cir, cbs }
        } else {
            MeterKind::Rfc4115 { cir, cbs, eir: other_rate, ebs: other_bs }
        };
        MeterParams { kind, color_aware: self.color_aware }
    }
}

impl MeterParams {
    /// (CBS, EBS or PBS) in bytes.
    fn burst_sizes(&self) -> (u64, u64) {
        match self.kind {
            MeterKind::SrTcm { cbs, ebs, .. } | MeterKind::Rfc4115 { cbs, ebs, .. } => (cbs, ebs),
            MeterKind::TrTcm { pbs, cbs, .. } => (cbs, pbs),
        }
    }
}

/// One meter's state: 24 bytes, buckets in nano-bytes.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Pod, Zeroable)]
pub struct MeterState {
    /// Packet time of the latest refill; it never moves back.
    last_ns: u64,
    /// Tc (all kinds).
    committed: u64,
    /// Te (srTCM, RFC 4115) or Tp (trTCM).
    excess_or_peak: u64,
}

impl MeterState {
    /// A meter whose buckets are full at `now_ns`, as every RFC starts them.
    pub fn new(params: &MeterParams, now_ns: u64) -> Self {
        let (committed, excess_or_peak) = params.burst_sizes();
        MeterState { last_ns: now_ns, committed: nano(committed), excess_or_peak: nano(excess_or_peak) }
    }

    /// Meters one packet of `bytes` arriving at `now_ns`, precoloured `color_in` (ignored when
    /// colour-blind), and returns its colour. `params` must have passed [`MeterParams::check`];
    /// it may change between packets (tokens above a smaller burst are then dropped).
    pub fn mark(&mut self, params: &MeterParams, now_ns: u64, bytes: u32, color_in: Color) -> Color {
        self.mark_with(&MeterConsts::new(params), now_ns, bytes, color_in)
    }

    /// [`mark`](MeterState::mark) with the constants computed beforehand.
    #[inline]
    pub fn mark_with(&mut self, consts: &MeterConsts, now_ns: u64, bytes: u32, color_in: Color) -> Color {
        let elapsed_ns = self.advance_clock(now_ns);
        // The RFCs' colour-blind rules are their colour-aware rules for a packet that came in green.
        let color_in = select_unpredictable(consts.color_aware, color_in, Color::Green);
        let cost = u64::from(bytes) * NANO;
        let spill = fill(&mut self.committed, consts.committed_cap, arrivals(consts.committed_rate, elapsed_ns));
        // One of the two terms is 0: srTCM has no E rate, the others drop C's spill.
        let excess_or_peak_in = arrivals(consts.excess_or_peak_rate, elapsed_ns) + select_unpredictable(consts.spills, spill, 0);
        fill(&mut self.excess_or_peak, consts.excess_or_peak_cap, excess_or_peak_in);
        if consts.peak_first {
            self.peak_then_committed(cost, color_in)
        } else {
            // Tokens are whole nano-bytes, so "more than the cost" is "at least the cost + 1".
            let fewest_tokens = cost + u64::from(consts.needs_more_than_cost);
            self.committed_then_excess(cost, fewest_tokens, color_in)
        }
    }

    /// Whole bytes in C.
    pub fn committed_bytes(&self) -> u64 {
        self.committed / NANO
    }

    /// Whole bytes in E (srTCM, RFC 4115) or P (trTCM).
    pub fn excess_or_peak_bytes(&self) -> u64 {
        self.excess_or_peak / NANO
    }

    /// The latest packet time seen.
    pub fn last_ns(&self) -> u64 {
        self.last_ns
    }

    /// Nanoseconds since the latest packet. A timestamp before it (capture jitter) brings no
    /// tokens and leaves the clock where it was, so tokens are never counted twice.
    #[inline]
    fn advance_clock(&mut self, now_ns: u64) -> u64 {
        let elapsed_ns = now_ns.saturating_sub(self.last_ns);
        self.last_ns = self.last_ns.max(now_ns);
        elapsed_ns
    }

    /// srTCM and RFC 4115: a green packet that fits in C (holds `fewest_tokens`: the cost, or
    /// one nano-byte more for RFC 4115) stays green and spends C; otherwise a green or yellow one
    /// that fits in E is yellow and spends E; anything else is red and spends nothing. Without
    /// branches: the colour depends on the traffic.
    #[inline]
    fn committed_then_excess(&mut self, cost: u64, fewest_tokens: u64, color_in: Color) -> Color {
        let green = (color_in == Color::Green) & (self.committed >= fewest_tokens);
        let yellow = !green & (color_in != Color::Red) & (self.excess_or_peak >= fewest_tokens);
        self.committed -= select_unpredictable(green, cost, 0);
        self.excess_or_peak -= select_unpredictable(yellow, cost, 0);
        pick_color(green, yellow)
    }

    /// trTCM: a red packet, or one over the peak bucket, is red and spends nothing; a yellow
    /// one, or one over C, is yellow and spends only P; a green one spends both.
    #[inline]
    fn peak_then_committed(&mut self, cost: u64, color_in: Color) -> Color {
        let red = (color_in == Color::Red) | (self.excess_or_peak < cost);
        let green = !red & (color_in == Color::Green) & (self.committed >= cost);
        self.excess_or_peak -= select_unpredictable(red, 0, cost);
        self.committed -= select_unpredictable(green, cost, 0);
        pick_color(green, !red & !green)
    }
}

/// Green, else yellow, else red (at most one of the two is true), without a branch: LLVM
/// turns a select between enum values back into a jump.
#[inline]
fn pick_color(green: bool, yellow: bool) -> Color {
    const BY_FLAGS: [Color; 4] = [Color::Red, Color::Yellow, Color::Green, Color::Green];
    BY_FLAGS[usize::from(green) * 2 + usize::from(yellow)]
}

/// A burst size in nano-bytes: exact for the bursts `check` accepts, saturating beyond.
#[inline]
fn nano(bytes: u64) -> u64 {
    bytes.saturating_mul(NANO)
}

/// Nano-bytes that arrive at `rate` bytes/s in `elapsed_ns`: exact, or `u64::MAX` when there
/// are more, which is more than two buckets can hold, so a long idle time just fills them.
#[inline]
fn arrivals(rate: u64, elapsed_ns: u64) -> u64 {
    rate.saturating_mul(elapsed_ns)
}

/// Adds `arrived` to a bucket up to `cap` (dropping what a smaller, reconfigured burst no longer
/// holds) and returns what did not fit.
#[inline]
fn fill(tokens: &mut u64, cap: u64, arrived: u64) -> u64 {
    let held = (*tokens).min(cap);
    let taken = arrived.min(cap - held);
    *tokens = held + taken;
    arrived - taken
}

/// A burst size for `rate_bytes_per_s`: 1 ms of traffic at the rate, never below the largest
/// frame (and never above [`MAX_BURST_BYTES`]).
///
/// Too small a burst is the most common policer mistake: TCP sends a window at a time, a bucket
/// that cannot absorb it drops the tail of every window, and the flow collapses far below the
/// configured rate. About a millisecond at the rate covers a data-center window; a bucket
/// smaller than a frame would mark that frame red forever. An RFC 4115 bucket must hold more
/// than a frame's bytes to pass it: give it the largest frame + 1, as `isolane.policy` does.
pub fn default_burst(rate_bytes_per_s: u64, largest_frame: u32) -> u64 {
    (rate_bytes_per_s / 1000).max(u64::from(largest_frame)).min(MAX_BURST_BYTES)
}

#[cfg(test)]
mod tests;
