//! Per (tenant, class) QoS statistics: every packet in is counted once by its outcome, so that
//! the outcomes and the packets still on their way to the port add up to the packets in.

use bytemuck::{Pod, Zeroable};
use rustc_hash::FxHashMap;

use super::OUTCOMES;
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

/// One (tenant, class) statistics entry, laid out as numpy's `isolane.STATS_DTYPE`
/// (docs/qos.md, "Statistics"). Not packed like the packet records: its fields fall on their
/// natural alignment with no padding between them (`Pod` refuses padding).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Pod, Zeroable)]
pub struct StatsRow {
    /// An index into [`StatsNames`]; -1: packets of no tenant.
    pub tenant: i32,
    /// The class id; -1: packets in no class (classifier drops).
    pub cls: i32,
    pub packets: u64,
    pub bytes: u64,
    /// By `Color` (green, yellow, red).
    pub color_packets: [u64; 3],
    pub color_bytes: [u64; 3],
    /// By [`Outcome`] (`Pending` always 0).
    pub outcome_packets: [u64; OUTCOMES],
    pub outcome_bytes: [u64; OUTCOMES],
    pub in_flight: u64,
    /// Packets sent by the port; the delays below are 0 when it is 0.
    pub delay_count: u64,
    pub delay_p50_ns: u64,
    pub delay_p99_ns: u64,
    pub delay_p999_ns: u64,
    pub delay_max_ns: u64,
}

impl StatsRow {
    pub(super) fn new(tenant: i32, cls: Option<u16>, stats: &QosStats) -> StatsRow {
        let (c, delay) = (&stats.counters, &stats.delay_ns);
        StatsRow {
            tenant,
            cls: cls.map_or(-1, i32::from),
            packets: c.packets,
            bytes: c.bytes,
            color_packets: c.color_packets,
            color_bytes: c.color_bytes,
            outcome_packets: c.outcome_packets,
            outcome_bytes: c.outcome_bytes,
            in_flight: stats.in_flight,
            delay_count: delay.count(),
            delay_p50_ns: delay.p50().unwrap_or(0),
            delay_p99_ns: delay.p99().unwrap_or(0),
            delay_p999_ns: delay.p999().unwrap_or(0),
            delay_max_ns: delay.max(),
        }
    }
}

/// The statistics rows with their queueing delays cut at fixed edges, as a Prometheus histogram
/// exports them, from one reading of the statistics.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DelayHistograms {
    pub rows: Vec<StatsRow>,
    /// Row after row, one count per edge: the delays at or below it
    /// ([`LogHistogram::count_at_or_below`]: exact at the top of a bucket).
    pub at_or_below: Vec<u64>,
    /// Per row, the exact sum of its delays in ns.
    pub sum_ns: Vec<u128>,
}

impl DelayHistograms {
    pub(super) fn new(rows: Vec<StatsRow>, stats: &[(StatsKey, QosStats)], edges_ns: &[u64]) -> DelayHistograms {
        let delays = || stats.iter().map(|(_, qos)| &qos.delay_ns);
        let at_or_below = delays().flat_map(|delay| edges_ns.iter().map(|&edge| delay.count_at_or_below(edge))).collect();
        DelayHistograms { rows, at_or_below, sum_ns: delays().map(LogHistogram::sum).collect() }
    }
}

/// The row's fields for numpy: (name, numpy type, byte offset).
pub fn stats_fields() -> Vec<(&'static str, String, usize)> {
    use std::mem::offset_of;
    let u64s = |n: usize| format!("({n},)=u8");
    vec![
        ("tenant", "=i4".into(), offset_of!(StatsRow, tenant)),
        ("cls", "=i4".into(), offset_of!(StatsRow, cls)),
        ("packets", "=u8".into(), offset_of!(StatsRow, packets)),
        ("bytes", "=u8".into(), offset_of!(StatsRow, bytes)),
        ("color_packets", u64s(3), offset_of!(StatsRow, color_packets)),
        ("color_bytes", u64s(3), offset_of!(StatsRow, color_bytes)),
        ("outcome_packets", u64s(OUTCOMES), offset_of!(StatsRow, outcome_packets)),
        ("outcome_bytes", u64s(OUTCOMES), offset_of!(StatsRow, outcome_bytes)),
        ("in_flight", "=u8".into(), offset_of!(StatsRow, in_flight)),
        ("delay_count", "=u8".into(), offset_of!(StatsRow, delay_count)),
        ("delay_p50_ns", "=u8".into(), offset_of!(StatsRow, delay_p50_ns)),
        ("delay_p99_ns", "=u8".into(), offset_of!(StatsRow, delay_p99_ns)),
        ("delay_p999_ns", "=u8".into(), offset_of!(StatsRow, delay_p999_ns)),
        ("delay_max_ns", "=u8".into(), offset_of!(StatsRow, delay_max_ns)),
    ]
}

/// Tenant names by the `tenant` of [`StatsRow`]s. A name keeps its index once given, so that
/// rows read at different times (and names read after them) agree.
#[derive(Debug, Default)]
pub(super) struct StatsNames {
    names: Vec<String>,
    index: FxHashMap<String, i32>,
}

impl StatsNames {
    pub(super) fn index_of(&mut self, name: &str) -> i32 {
        if let Some(&index) = self.index.get(name) {
            return index;
        }
        let index = self.names.len() as i32;
        self.names.push(name.to_string());
        self.index.insert(name.to_string(), index);
        index
    }

    pub(super) fn names(&self) -> &[String] {
        &self.names
    }
}
