//! The fast lane ([`Lane::Fast`]): a tenant whose contract is one meter and one shaper of its
//! own, with no class contract and no port.
//!
//! The same results as `Enforcer::enforce_general` would give, with no branch that depends on
//! the traffic: the shaper sees every packet, and keeps its new state only if the meter passed
//! the packet and the shaper sent it.

use std::hint::select_unpredictable;

use super::stats::RowCounters;
use super::{Count, Outcome, Processed, Profile, TenantState};
use crate::engine::Verdict;
use crate::meter::Color;
use crate::parse::PacketInfo;

/// What the fast lane reads and writes of the enforcer, borrowed apart so that stores to the
/// state cannot alias the tables (LLVM would reload them every packet).
pub(super) struct FastLane<'e> {
    pub tenants: &'e mut [TenantState],
    pub profiles: &'e [Profile],
    pub rows: &'e mut [RowCounters],
    pub class_rows: usize,
    pub count: Count,
    pub color_map: &'e [Color; 64],
}

impl FastLane<'_> {
    /// One packet of fast-lane `tenant`, at `now`.
    #[inline(always)]
    pub fn enforce(&mut self, tenant: usize, info: &PacketInfo, verdict: Verdict, now: u64) -> Processed {
        let state = &mut self.tenants[tenant];
        // Its class's row, else its own (a class id out of range is large as a u32).
        let in_class = (verdict.cls as u32) < state.classes;
        let row = select_unpredictable(in_class, (state.first_row + verdict.cls as u32) as usize, self.class_rows + tenant);
        let stage = &mut state.stage;
        let Some(contract) = &self.profiles[stage.profile as usize].fast else { unreachable!("a fast lane has a fast profile") };
        // The meter counts the bytes the shaper does (or the tenant is not on this lane).
        let bytes = self.count.bytes(info.wire_len, info.inner_len);
        let dscp = info.dscp;
        let incoming = self.color_map[usize::from(dscp & 63)];
        let color = stage.meter.mark_with(&contract.meter, now, bytes, incoming);
        let metered = contract.actions.outcome[color as usize];
        let remark = contract.actions.remark[color as usize];
        let offer = stage.shaper.offer(&contract.shaper, now, bytes);
        let metered_out = metered == Outcome::DropMeter;
        let sent = !metered_out & offer.drop.is_none();
        stage.shaper.settle(&offer, sent);
        // A table, not a `match`: LLVM would jump.
        const SHAPED_OUT: [Outcome; 3] = [Outcome::DropShaperBytes, Outcome::DropShaperTime, Outcome::Pass];
        let shaped_out = SHAPED_OUT[offer.drop.map_or(2, |drop| drop as usize)];
        let outcome = select_unpredictable(sent | metered_out, metered, shaped_out);
        self.rows[row].count(color, outcome, bytes);
        let release_ns = select_unpredictable(sent, i64::try_from(offer.release_ns).unwrap_or(i64::MAX), -1);
        Processed { verdict, color: color as u8, outcome: outcome as u8, dscp: remark.unwrap_or(dscp), release_ns }
    }
}
