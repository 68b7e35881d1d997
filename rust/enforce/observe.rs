//! The enforcer's time series (docs/report.md, "Timeline"): a pass over each enforced chunk,
//! while its records and rows are still in L1, so that the loops that enforce stay as they
//! are and cost nothing more when no timeline is kept.

use super::{packet_time, Arrival, Enforcer, Outcome, Processed};
use crate::meter::Color;
use crate::parse::PacketInfo;
use crate::timeline::Timeline;
use crate::verdict::Verdict;

impl Enforcer {
    /// Keeps time series per tenant and class from the next packet on, with the most bytes in
    /// one window of `window_ns` in each bin (an engine keeps one at most: a second call
    /// starts it again).
    pub fn keep_timeline(&mut self, window_ns: u64) {
        self.timeline = Some(Timeline::new(window_ns, &[]));
        self.rebind_timeline();
    }

    pub fn timeline(&self) -> Option<&Timeline> {
        self.timeline.as_ref()
    }

    /// Hands a chunk just enforced to the timeline. `clock_ns`: the clock before the chunk.
    /// Drops at the port are counted when the packet reaches it (`arrive_at_port`), delays
    /// when the port starts sending it (`hand_departures`).
    #[inline(never)]
    pub(super) fn observe_timeline(&mut self, mut clock_ns: u64, records: &[PacketInfo], verdicts: &[Verdict], rows: &[Processed]) {
        let Some(mut timeline) = self.timeline.take() else { return };
        // Thousands of tenants' series are far apart: their lines are asked for ahead, the
        // series two steps ahead, then, from them, the bins one step ahead. Each packet's
        // statistics row is found once, two steps ahead, and kept in a ring until its turn.
        const AHEAD: usize = 8;
        const RING: usize = 2 * AHEAD;
        // Every tenant has its own row while a timeline is kept (`rebind_timeline`).
        let row_of = |verdict: &Verdict| self.row_of(verdict, self.tenants.get(verdict.tenant as usize)).unwrap_or(usize::MAX);
        let mut ring = [0usize; RING];
        for (slot, verdict) in ring.iter_mut().zip(verdicts) {
            *slot = row_of(verdict);
        }
        for (i, ((info, _), processed)) in records.iter().zip(verdicts).zip(rows).enumerate() {
            let row = ring[i % RING];
            if let Some(ahead) = verdicts.get(i + RING) {
                ring[i % RING] = row_of(ahead);
                timeline.prefetch_series(ring[i % RING]);
            }
            if let Some(at) = records.get(i + AHEAD) {
                timeline.prefetch_bins(ring[(i + AHEAD) % RING], packet_time(at));
            }
            clock_ns = clock_ns.max(packet_time(info));
            timeline.arrive(row, clock_ns, self.spec.count.bytes(&Arrival::of(info, clock_ns)));
            let (outcome, release_ns) = (processed.outcome, processed.release_ns);
            if release_ns >= 0 {
                timeline.held(row, (release_ns as u64).saturating_sub(clock_ns));
            }
            if dropped_before_port(outcome) {
                timeline.dropped(row, clock_ns, processed.color == Color::Green as u8);
            }
        }
        self.timeline = Some(timeline);
    }
}

/// Dropped by the classifier, a meter or a shaper: the port's drops are counted at the port.
fn dropped_before_port(outcome: u8) -> bool {
    (Outcome::DropClassifier as u8..=Outcome::DropShaperTime as u8).contains(&outcome)
}
