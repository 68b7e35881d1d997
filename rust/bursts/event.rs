//! A burst while it is open, and the row it leaves when it ends (`isolane.BURST_DTYPE`).

use bytemuck::{Pod, Zeroable};

use super::flows::TopFlows;
use crate::codes::codes;
use crate::outcome::{Outcome, OUTCOMES};

codes! {
    /// Where a burst was seen (`isolane.BurstScope`).
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum Scope: "burst scope" {
        Port = 0,
        Tenant = 1,
        Class = 2,
    }
}

codes! {
    /// How a burst was seen (`isolane.BurstView`).
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum View: "burst view" {
        /// The window's rate above the threshold.
        Rate = 0,
        /// The queue above its rise threshold, until it falls to its fall threshold.
        Queue = 1,
    }
}

/// An event that has not ended.
#[derive(Debug)]
pub(super) struct OpenEvent {
    pub start_ns: u64,
    pub packets: u64,
    pub bytes: u64,
    pub peak_window_bytes: u64,
    pub max_queue_bytes: u64,
    /// Packets of the scope whose fate was decided while it was open, by [`Outcome`].
    pub outcomes: [u64; OUTCOMES],
    pub flows: Box<TopFlows>,
}

impl OpenEvent {
    pub fn new(start_ns: u64, depth: u64, mut flows: Box<TopFlows>) -> OpenEvent {
        flows.clear();
        OpenEvent { start_ns, packets: 0, bytes: 0, peak_window_bytes: 0, max_queue_bytes: depth, outcomes: [0; OUTCOMES], flows }
    }
}

/// A burst that ended, laid out as numpy's `isolane.BURST_DTYPE` (docs/bursts.md).
#[repr(C, packed)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Pod, Zeroable)]
pub struct BurstEvent {
    pub id: u64,
    pub scope: u8,
    pub view: u8,
    pub tenant: i32,
    pub cls: i32,
    pub start_ns: i64,
    pub end_ns: i64,
    pub packets: u64,
    pub bytes: u64,
    pub peak_bps: u64,
    pub max_queue_bytes: u64,
    pub dropped: u64,
    pub remarked: u64,
    pub drop_meter: u64,
    pub drop_shaper_bytes: u64,
    pub drop_shaper_time: u64,
    pub drop_port_buffer: u64,
    pub drop_port_queue: u64,
    pub flows: u8,
}

/// Who saw an event: the scope, its tenant (an index into the detector's names, -1: the port)
/// and class (-1: none), and the window that measures its rate.
#[derive(Debug, Clone, Copy)]
pub(super) struct Seen {
    pub scope: Scope,
    pub tenant: i32,
    pub cls: i32,
    pub window_ns: u64,
}

impl Seen {
    pub(super) fn new(scope: Scope, tenant: i32, cls: i32, config: &super::BurstConfig) -> Seen {
        Seen { scope, tenant, cls, window_ns: config.window_ns }
    }
}

impl BurstEvent {
    pub(super) fn of(id: u64, seen: Seen, view: View, open: &OpenEvent, end_ns: u64, flows: u8) -> BurstEvent {
        let o = &open.outcomes;
        let drop = |outcome: Outcome| o[outcome as usize];
        let dropped = (Outcome::DropClassifier as usize..OUTCOMES).map(|i| o[i]).sum();
        BurstEvent {
            id,
            scope: seen.scope as u8,
            view: view as u8,
            tenant: seen.tenant,
            cls: seen.cls,
            start_ns: clamp_i64(open.start_ns),
            end_ns: clamp_i64(end_ns),
            packets: open.packets,
            bytes: open.bytes,
            peak_bps: window_bps(open.peak_window_bytes, seen.window_ns),
            max_queue_bytes: open.max_queue_bytes,
            dropped,
            remarked: drop(Outcome::Remarked),
            drop_meter: drop(Outcome::DropMeter),
            drop_shaper_bytes: drop(Outcome::DropShaperBytes),
            drop_shaper_time: drop(Outcome::DropShaperTime),
            drop_port_buffer: drop(Outcome::DropPortBuffer),
            drop_port_queue: drop(Outcome::DropPortQueue),
            flows,
        }
    }
}

/// The rate of `bytes` in a window of `window_ns`, in bit/s (rounded down).
pub fn window_bps(bytes: u64, window_ns: u64) -> u64 {
    (u128::from(bytes) * 8_000_000_000 / u128::from(window_ns.max(1))).min(u128::from(u64::MAX)) as u64
}

fn clamp_i64(ns: u64) -> i64 {
    i64::try_from(ns).unwrap_or(i64::MAX)
}

pub fn event_fields() -> Vec<(&'static str, &'static str, usize)> {
    use std::mem::offset_of;
    vec![
        ("id", "=u8", offset_of!(BurstEvent, id)),
        ("scope", "u1", offset_of!(BurstEvent, scope)),
        ("view", "u1", offset_of!(BurstEvent, view)),
        ("tenant", "=i4", offset_of!(BurstEvent, tenant)),
        ("cls", "=i4", offset_of!(BurstEvent, cls)),
        ("start_ns", "=i8", offset_of!(BurstEvent, start_ns)),
        ("end_ns", "=i8", offset_of!(BurstEvent, end_ns)),
        ("packets", "=u8", offset_of!(BurstEvent, packets)),
        ("bytes", "=u8", offset_of!(BurstEvent, bytes)),
        ("peak_bps", "=u8", offset_of!(BurstEvent, peak_bps)),
        ("max_queue_bytes", "=u8", offset_of!(BurstEvent, max_queue_bytes)),
        ("dropped", "=u8", offset_of!(BurstEvent, dropped)),
        ("remarked", "=u8", offset_of!(BurstEvent, remarked)),
        ("drop_meter", "=u8", offset_of!(BurstEvent, drop_meter)),
        ("drop_shaper_bytes", "=u8", offset_of!(BurstEvent, drop_shaper_bytes)),
        ("drop_shaper_time", "=u8", offset_of!(BurstEvent, drop_shaper_time)),
        ("drop_port_buffer", "=u8", offset_of!(BurstEvent, drop_port_buffer)),
        ("drop_port_queue", "=u8", offset_of!(BurstEvent, drop_port_queue)),
        ("flows", "u1", offset_of!(BurstEvent, flows)),
    ]
}
