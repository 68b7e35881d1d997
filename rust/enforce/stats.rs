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
    colors: [[u64; 2]; 3],
    outcomes: [[u64; 2]; OUTCOMES],
}

impl RowCounters {
    #[inline]
    pub(super) fn count_color(&mut self, color: Color, bytes: u32) {
        count(&mut self.colors[color as usize], bytes);
    }

    #[inline]
    pub(super) fn count_outcome(&mut self, outcome: Outcome, bytes: u32) {
        count(&mut self.outcomes[outcome as usize], bytes);
    }

    pub(super) fn counters(&self) -> QosCounters {
        let dropped = self.outcomes[Outcome::DropClassifier as usize];
        let colored = self.colors.iter().fold([0, 0], |sum, pair| [sum[0] + pair[0], sum[1] + pair[1]]);
        QosCounters {
            packets: colored[0] + dropped[0],
            bytes: colored[1] + dropped[1],
            color_packets: std::array::from_fn(|c| self.colors[c][0]),
            color_bytes: std::array::from_fn(|c| self.colors[c][1]),
            outcome_packets: std::array::from_fn(|o| self.outcomes[o][0]),
            outcome_bytes: std::array::from_fn(|o| self.outcomes[o][1]),
        }
    }
}

#[inline]
fn count(pair: &mut [u64; 2], bytes: u32) {
    pair[0] += 1;
    pair[1] += u64::from(bytes);
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
