//! Per (tenant, class) QoS statistics: every packet in is counted once by its outcome, so that
//! the outcomes and the packets still on their way to the port add up to the packets in.

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
    #[inline]
    pub(super) fn count_in(&mut self, bytes: u32) {
        self.packets += 1;
        self.bytes += u64::from(bytes);
    }

    #[inline]
    pub(super) fn count_color(&mut self, color: Color, bytes: u32) {
        self.color_packets[color as usize] += 1;
        self.color_bytes[color as usize] += u64::from(bytes);
    }

    #[inline]
    pub(super) fn count_outcome(&mut self, outcome: Outcome, bytes: u32) {
        self.outcome_packets[outcome as usize] += 1;
        self.outcome_bytes[outcome as usize] += u64::from(bytes);
    }

    pub(super) fn add(&mut self, other: &QosCounters) {
        self.packets += other.packets;
        self.bytes += other.bytes;
        add_all(&mut self.color_packets, &other.color_packets);
        add_all(&mut self.color_bytes, &other.color_bytes);
        add_all(&mut self.outcome_packets, &other.outcome_packets);
        add_all(&mut self.outcome_bytes, &other.outcome_bytes);
    }
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
