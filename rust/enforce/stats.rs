//! Per (tenant, class) QoS statistics: every packet in is counted once by its outcome, so that
//! the outcomes and the packets still on their way to the port add up to the packets in.

use bytemuck::Zeroable;

use super::{Outcome, OUTCOMES};
use crate::meter::Color;
use crate::shaping::LogHistogram;

/// (tenant name, class id): `None` for packets of no tenant, or in no class (classifier drops).
pub type StatsKey = (Option<String>, Option<u16>);

/// Bytes are those the policy's `count` says (what shapers and the port count).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct QosCounters {
    pub packets: u64,
    pub bytes: u64,
    /// By `Color`: every packet the classifier let through.
    pub color_packets: [u64; 3],
    pub color_bytes: [u64; 3],
    /// By [`Outcome`] (never `Pending`: a packet is counted when its fate is known).
    pub outcome_packets: [u64; OUTCOMES],
    pub outcome_bytes: [u64; OUTCOMES],
}

impl QosCounters {
    pub(super) fn add(&mut self, other: &QosCounters) {
        self.packets += other.packets;
        self.bytes += other.bytes;
        add_all(&mut self.color_packets, &other.color_packets);
        add_all(&mut self.color_bytes, &other.color_bytes);
        add_all(&mut self.outcome_packets, &other.outcome_packets);
        add_all(&mut self.outcome_bytes, &other.outcome_bytes);
    }
}

/// A statistics row as the data path counts it: (packets, bytes) by colour and by outcome,
/// three cache lines, the colours and `Pass` in the first. Packets in are not counted apart:
/// each has a colour or was dropped by the classifier, never both.
#[repr(C, align(64))]
#[derive(Debug, Clone, Copy, Default, Zeroable)]
pub(super) struct RowCounters {
    colors: [Pair; 3],
    outcomes: [Pair; OUTCOMES],
}

/// Packets in the low 64 bits, bytes in the high: one 128-bit add counts both (two
/// instructions; a pair of u64 becomes vector loads and stores). Packets never carry into
/// bytes: that would take 2^64 of them.
type Pair = u128;

impl RowCounters {
    #[inline]
    pub(super) fn count_color(&mut self, color: Color, bytes: u32) {
        count(&mut self.colors[color as usize], bytes);
    }

    #[inline]
    pub(super) fn count_outcome(&mut self, outcome: Outcome, bytes: u32) {
        count(&mut self.outcomes[outcome as usize], bytes);
    }

    /// A packet whose colour and outcome are known at once.
    #[inline]
    pub(super) fn count(&mut self, color: Color, outcome: Outcome, bytes: u32) {
        self.count_color(color, bytes);
        self.count_outcome(outcome, bytes);
    }

    pub(super) fn counters(&self) -> QosCounters {
        let in_total = self.colors.iter().sum::<Pair>() + self.outcomes[Outcome::DropClassifier as usize];
        QosCounters {
            packets: packets(in_total),
            bytes: bytes(in_total),
            color_packets: self.colors.map(packets),
            color_bytes: self.colors.map(bytes),
            outcome_packets: self.outcomes.map(packets),
            outcome_bytes: self.outcomes.map(bytes),
        }
    }
}

#[inline]
fn count(pair: &mut Pair, bytes: u32) {
    *pair += 1 | Pair::from(bytes) << 64;
}

fn packets(pair: Pair) -> u64 {
    pair as u64
}

fn bytes(pair: Pair) -> u64 {
    (pair >> 64) as u64
}

fn add_all(sums: &mut [u64], values: &[u64]) {
    for (sum, value) in sums.iter_mut().zip(values) {
        *sum += value;
    }
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct QosStats {
    pub counters: QosCounters,
    /// Packets the shapers released to the port after the latest packet time seen.
    pub in_flight: u64,
    /// Queueing delay at the port (transmission start minus release), ns.
    pub delay_ns: LogHistogram,
}
