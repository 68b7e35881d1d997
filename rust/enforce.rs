//! QoS enforcement in the data path (docs/qos.md, "Enforcement"): each classified packet goes
//! through its tenant's meter, its class's meter, their colour actions, the tenant's and the
//! class's EDT shapers, and the egress port model, in packet time.
//!
//! - [`QosSpec`]: a policy's contracts, per tenant and per class (what `compile_qos` gives).
//! - [`Enforcer`]: the state (meters, shapers, the port, packets on their way to it) and the
//!   statistics, kept by tenant name so that an update keeps what did not change.
//!
//! Order per packet, so that a packet dropped early spends no later tokens: classifier drop
//! (not metered) -> tenant meter -> its colour action -> class meter -> its colour action ->
//! both shapers (release = the later of the two; a drop by either leaves both untouched) ->
//! the port, which sees the packet at its release time.

mod adaptive;
mod chunks;
mod inputs;
mod kept;
mod lines;
mod metered;
mod moves;
mod observe;
mod profiles;
mod rows;
mod shared;
mod spec;
mod stats;
mod update;

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::hint::select_unpredictable;

use bytemuck::Zeroable;
use rustc_hash::FxHashMap;

use crate::bursts::{BurstEvent, Detector, FlowRow, ScopeStats};
use crate::memory::prefetch;
use crate::meter::{Color, MeterState};
use crate::parse::PacketInfo;
use crate::shaping::{Port, PortConfig, ShapeDrop, ShaperConsts, ShaperState};
use crate::timeline::Timeline;
use crate::verdict::{Verdict, DROP};

pub use crate::outcome::{processed_fields, Outcome, Processed, NO_COLOR, OUTCOMES};
use adaptive::Adaptive;
pub use adaptive::{profile_event_fields, ProfileCounts, ProfileEvent, ProfileId, SwitchCause};
use chunks::Given;
pub use chunks::{Chunks, Classified};
pub use inputs::{BurstRow, ClassInput, InputPool, MeterRow, OverloadRow, PortInput, ProfileInput, QosInputs, QosSettings, ShaperRow, TenantInput};
use kept::{Kept, TermsPool};
use lines::VacantRows;
use metered::{shape, Metered};
use profiles::{Profile, Profiles};
use rows::StatsRows;
pub use spec::{
    Arrival, BurstProfile, ClassBurstProfile, ClassQos, ColorAction, ColorActionCode, Contract, Count, MeterSpec, Overload, ProfileQos, QosSpec, TenantQos,
};
use stats::StatsNames;
pub use stats::{stats_fields, DelayHistograms, QosCounters, QosStats, StatsKey, StatsRow};

/// A packet's time as the enforcer reads it (a negative timestamp is 0).
#[inline]
fn packet_time(info: &PacketInfo) -> u64 {
    u64::try_from(info.timestamp_ns).unwrap_or(0)
}

/// A tenant's or a class's meter and shaper state, and the profile they enforce.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
struct Stage {
    meter: MeterState,
    shaper: ShaperState,
    profile: u32,
    /// Of a tenant's stage: some class of the tenant has a meter or a shaper (without one, the
    /// class stages are never read).
    classes_enforced: bool,
    /// Of a tenant's stage: how its packets are enforced.
    lane: Lane,
}

impl Stage {
    /// Full buckets (meters fill up to their burst on the first packet).
    fn new(contract: &Contract) -> Self {
        let meter = contract.meter.map_or(MeterState::zeroed(), |m| MeterState::new(&m.params, 0));
        Stage { meter, shaper: ShaperState::default(), profile: NO_CONTRACT, classes_enforced: false, lane: Lane::General }
    }
}

/// Packets parsed, classified, then enforced, at a time, at most: the chunk of a state too
/// large for the caches, whose packets prefetch their state a few packets ahead (the first
/// packets of a chunk have no packets before them to have asked for theirs: with chunks of 256,
/// a million meters took 10-20% longer).
pub const CHUNK: usize = 2048;

/// The chunk of a state that stays in the caches: its records (96 B each, 24 KiB) stay in a
/// 48 KiB L1 cache from one step to the next (2,048 of them spilled to L2 and took 7% longer
/// through the whole pipeline).
const CACHED_CHUNK: usize = 256;

/// Below this much state ([`Enforcer::state_bytes`]) it stays in a 2 MiB L2 cache, and
/// prefetching costs more instructions (~30-50 a packet) than it saves misses (1,000 tenants of
/// one class each: ~0.5 MB).
const PREFETCH_ABOVE_BYTES: usize = 1 << 20;

/// The profile of a tenant with no contract in the spec: its packets pass, green.
const NO_CONTRACT: u32 = u32::MAX;

/// A tenant's own row not made yet (see `Enforcer::own_rows`).
const NO_ROW: u32 = u32::MAX;

/// How a tenant's packets are enforced.
#[repr(u8)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Lane {
    /// A meter and a shaper of the tenant's own, nothing of its classes', no port:
    /// [`Enforcer::enforce_fast`].
    Fast,
    /// Anything else, a contract or none: [`Enforcer::enforce_general`].
    General,
}

const _: () = assert!(std::mem::size_of::<TenantState>() == 64, "a tenant's state is one cache line");

/// What the data path reads of a tenant, in one cache line (its contract's spec stays apart,
/// for updates).
#[repr(C, align(64))]
#[derive(Debug, Clone, Copy)]
struct TenantState {
    stage: Stage,
    /// Row of class 0 in `class_stages`, the statistics rows and the port queues.
    first_row: u32,
    classes: u32,
}

impl TenantState {
    fn without_contract() -> Self {
        TenantState { stage: Stage::new(&Contract::default()), first_row: 0, classes: 0 }
    }

    fn has_contract(&self) -> bool {
        self.stage.profile != NO_CONTRACT
    }
}

/// A packet on its way from the shapers to the port. Ordered by release, then arrival.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct InFlight {
    release_ns: u64,
    sequence: u64,
    row: u32,
    bytes: u32,
    /// The batch it came in and its index there, to fill in its outcome while that lasts.
    batch: u64,
    index: usize,
    remarked: bool,
    /// Green after the meters: within its contract (a drop at the port is then a conforming
    /// packet lost).
    green: bool,
}

#[derive(Debug, Clone)]
struct PortState {
    /// Its queues by class row, as the tenants' contracts configure them.
    port: Port,
    config: PortConfig,
    /// The queues' guarantees and reserves, summed: a queue changed in place is checked against
    /// them without reading every queue.
    guaranteed: u128,
    reserved: u128,
}

/// The QoS state of an engine; see the module documentation.
#[derive(Debug, Default)]
pub struct Enforcer {
    /// The spec in force, without the contracts of the tables' tenants (kept in `contracts`).
    spec: QosSpec,
    /// A spec waiting for the next tables (see [`Enforcer::stage`]).
    staged: Option<QosSpec>,
    /// By the engine's tenant index (a tenant without a contract has profile [`NO_CONTRACT`]).
    tenants: Vec<TenantState>,
    profiles: Profiles,
    /// How many profiles there were when they were last numbered afresh (a retarget, or
    /// [`Enforcer::compact_profiles`]).
    profiles_numbered: usize,
    /// Each tenant's name and the contract its state enforces, by the same index; their terms, each once.
    contracts: Vec<Kept>,
    terms: TermsPool,
    /// Every class's stage, by class row (a tenant's classes' in a block, as the port queues),
    /// while some tenant's classes are enforced; else none (they would never be read, and a
    /// simple policy spares 56 bytes a class).
    class_stages: Vec<Stage>,
    /// Statistics rows: every class row (a block a tenant, in tenant order after a full
    /// retarget; see `enforce/lines.rs`), room for more (unused rows, zero), the row of packets
    /// of no tenant, then the tenants' own rows in the order they were made;
    /// [`Enforcer::row_keys`] names them. The room and the vacant rows let a tenant put in take
    /// rows without moving any other's ([`Enforcer::insert`]).
    rows: StatsRows,
    /// Class rows given out (the port's queues, the class stages), vacant ones included.
    class_rows: usize,
    /// Class rows that tenants taken out left, for tenants put in.
    vacant: VacantRows,
    /// The row of packets of no tenant; `class_rows..no_tenant_row` are the room.
    no_tenant_row: usize,
    /// By tenant index, its own row (packets in no class: every packet of a tenant without a
    /// contract, the classifier's drops of one with classes), or [`NO_ROW`] until its first
    /// such packet: most tenants with classes never have one, and a row is 96 bytes.
    own_rows: Vec<u32>,
    /// Own rows of tenants removed, zero, for the next tenant that needs one.
    free_rows: Vec<u32>,
    /// The names of the tenants with a contract, hashed, each with the tenants of that hash (two
    /// names may share one): a tenant added under one of them is left to a full retarget (which
    /// refuses a name given twice).
    name_hashes: FxHashMap<u64, u32>,
    /// The tenants the update under way moves, and what those taken out left for their return.
    moves: moves::Moves,
    /// Statistics of rows and ports replaced by updates.
    archive: FxHashMap<StatsKey, QosStats>,
    /// Tenant names by the `tenant` of the [`StatsRow`]s handed out so far.
    stats_names: StatsNames,
    port: Option<PortState>,
    in_flight: BinaryHeap<Reverse<InFlight>>,
    bursts: Detector,
    adaptive: Adaptive,
    /// Time series per tenant and class, when asked for ([`Enforcer::keep_timeline`]).
    timeline: Option<Timeline>,
    /// A chunk's records and verdicts (kept, so that a batch allocates nothing).
    records: Vec<PacketInfo>,
    verdicts: Vec<Verdict>,
    /// The latest packet time seen: an earlier timestamp is read as this.
    clock_ns: u64,
    sequence: u64,
    batch: u64,
}

impl Enforcer {
    /// Ends the packet stream at the port, as at the end of a capture: every packet in flight
    /// reaches it in release order and everything queued is sent, their outcomes and delays
    /// into the statistics. The port stays, empty, its time at the last of these events: a
    /// later packet reaches it no earlier.
    fn drain_port(&mut self) {
        let Some(mut state) = self.port.take() else { return };
        self.arrive_at_port(&mut state.port, u64::MAX, &mut []);
        state.port.finish();
        self.hand_departures(&mut state.port);
        self.port = Some(state);
    }

    /// Ends the packet stream: the port drains (packets in flight reach it, all it holds is sent), then
    /// every burst window empties, so that every open burst ends (docs/bursts.md).
    pub fn drain(&mut self) {
        self.drain_port();
        self.bursts.drain();
        self.finish_profiles();
    }

    /// Hands the port's transmission starts to the burst detector and forgets them (the port's
    /// statistics keep the delays).
    fn hand_departures(&mut self, port: &mut Port) {
        if self.bursts.active() {
            for departure in port.departures() {
                self.bursts.departed(departure.queue, departure.start_ns, departure.bytes);
            }
        }
        if let Some(timeline) = &mut self.timeline {
            for departure in port.departures() {
                timeline.departed(departure.queue as usize, departure.arrival_ns, departure.start_ns - departure.arrival_ns);
            }
        }
        port.clear_departures();
    }

    /// Enforces one classified batch in packet order, appending packet `i`'s result to `out`
    /// as its `i`-th new row.
    pub fn enforce(&mut self, records: &[PacketInfo], verdicts: &[Verdict], out: &mut Vec<Processed>) {
        let len = records.len().min(verdicts.len());
        self.enforce_chunks(&mut Given { records: &records[..len], verdicts: &verdicts[..len] }, out);
    }

    /// Classifies a batch with `classify` and enforces it in packet order, a chunk at a time so
    /// that a chunk's records are still in cache when it is enforced, appending packet `i`'s
    /// result to `out` as its `i`-th new row.
    pub fn classify_and_enforce(&mut self, records: &[PacketInfo], out: &mut Vec<Processed>, classify: impl FnMut(&[PacketInfo], &mut [Verdict])) {
        self.enforce_chunks(&mut Classified { records, classify }, out);
    }

    /// Enforces a batch that `source` hands over a chunk at a time (classified just before, so
    /// that its records are still in cache), appending packet `i`'s result to `out` as its
    /// `i`-th new row. `out` grows a chunk at a time, each chunk's rows zeroed just before they
    /// are written: zeroing a whole fresh batch up front cost ~2 ns a packet in memory traffic.
    pub fn enforce_chunks(&mut self, source: &mut impl Chunks, out: &mut Vec<Processed>) {
        let mut port = self.start_batch();
        let (mut records, mut verdicts) = (std::mem::take(&mut self.records), std::mem::take(&mut self.verdicts));
        records.resize(CHUNK, PacketInfo::zeroed());
        verdicts.resize(CHUNK, Verdict::zeroed());
        let (base, len) = (out.len(), source.packets());
        out.reserve_exact(len);
        let chunk_len = self.chunk_len();
        for first in (0..len).step_by(chunk_len) {
            let count = chunk_len.min(len - first);
            out.resize(base + first + count, Processed::zeroed());
            let (chunk, chunk_verdicts) = source.chunk(first, count, &mut records, &mut verdicts);
            let clock_ns = self.clock_ns;
            self.enforce_chunk(&mut port, chunk, chunk_verdicts, &mut out[base..], first);
            if self.timeline.is_some() {
                self.observe_timeline(clock_ns, chunk, chunk_verdicts, &out[base + first..base + first + count]);
            }
        }
        (self.records, self.verdicts) = (records, verdicts);
        self.finish_batch(port, &mut out[base..]);
    }

    /// Packets a chunk: [`CHUNK`] when packets prefetch their state, else [`CACHED_CHUNK`].
    fn chunk_len(&self) -> usize {
        if self.prefetches() {
            CHUNK
        } else {
            CACHED_CHUNK
        }
    }

    /// Whether the state is too large for the caches, so that packets ask for theirs ahead.
    fn prefetches(&self) -> bool {
        self.state_bytes() > PREFETCH_ABOVE_BYTES
    }

    /// The port, taken out of `self` for the batch.
    fn start_batch(&mut self) -> Option<PortState> {
        self.batch += 1;
        self.port.take()
    }

    /// Enforces `records` (classified as `verdicts`), which start at `first` in the batch, packet
    /// after packet: their rows are `out[first..]`.
    #[inline(never)] // one call a chunk; a symbol of its own for profilers
    fn enforce_chunk(&mut self, port: &mut Option<PortState>, records: &[PacketInfo], verdicts: &[Verdict], out: &mut [Processed], first: usize) {
        let (prefetch, bursts, adaptive) = (self.prefetches(), self.bursts.active(), self.adaptive.active());
        let Some(state) = port else {
            let out = &mut out[first..];
            if adaptive {
                return self.enforce_adaptive_without_port(records, verdicts, out, first);
            }
            let clock_ns = self.clock_ns;
            if prefetch {
                self.enforce_without_port::<true>(records, verdicts, out, first);
            } else {
                self.enforce_without_port::<false>(records, verdicts, out, first);
            }
            if bursts {
                self.observe_chunk(clock_ns, records, verdicts, out);
            }
            return;
        };
        for (i, (info, verdict)) in records.iter().zip(verdicts).enumerate() {
            if prefetch {
                self.prefetch_ahead(verdicts, i);
            }
            self.clock_ns = self.clock_ns.max(packet_time(info));
            self.arrive_at_port(&mut state.port, self.clock_ns, out);
            if bursts {
                // The queues as they are at this packet, whatever the batch's bounds.
                state.port.advance_to(self.clock_ns);
                self.hand_departures(&mut state.port);
            }
            if adaptive {
                self.adapt_before(self.clock_ns, Some(state));
            }
            let arrival = Arrival::of(info, self.clock_ns);
            out[first + i] = self.enforce_general(arrival, *verdict, first + i, true);
            if bursts {
                self.observe_burst(&arrival, verdict, info, out[first + i].outcome);
            }
            if adaptive {
                self.adapt(verdict, self.clock_ns, Some(state));
            }
        }
    }

    /// Enforces `records` (classified as `verdicts`), which start at `first` in the batch, into
    /// `out`, with no port but profiles: each packet goes to the burst detector as it is
    /// enforced, so that a burst it starts switches its tenant for the very next packet.
    #[inline(never)]
    fn enforce_adaptive_without_port(&mut self, records: &[PacketInfo], verdicts: &[Verdict], out: &mut [Processed], first: usize) {
        let prefetch = self.prefetches();
        for (i, ((info, verdict), slot)) in records.iter().zip(verdicts).zip(out).enumerate() {
            if prefetch {
                self.prefetch_ahead(verdicts, i);
            }
            if let Some(ahead) = verdicts.get(i + 8) {
                self.bursts.prefetch(ahead);
            }
            let mut arrival = Arrival::of(info, packet_time(info));
            arrival.clock_ns = arrival.clock_ns.max(self.clock_ns);
            self.clock_ns = arrival.clock_ns;
            self.adapt_before(arrival.clock_ns, None);
            self.enforce_one(arrival, *verdict, first + i, false, slot);
            self.observe_burst(&arrival, verdict, info, slot.outcome);
            self.adapt(verdict, arrival.clock_ns, None);
        }
    }

    /// Enforces `records` (classified as `verdicts`), which start at `first` in the batch, into
    /// `out`, with no port: a loop of its own for each way of prefetching, so that the fast
    /// lane keeps its values in registers.
    #[inline(always)]
    fn enforce_without_port<const PREFETCH: bool>(&mut self, records: &[PacketInfo], verdicts: &[Verdict], out: &mut [Processed], first: usize) {
        for (i, ((info, verdict), slot)) in records.iter().zip(verdicts).zip(out).enumerate() {
            if PREFETCH {
                self.prefetch_ahead(verdicts, i);
            }
            let mut arrival = Arrival::of(info, packet_time(info));
            arrival.clock_ns = arrival.clock_ns.max(self.clock_ns);
            self.clock_ns = arrival.clock_ns;
            self.enforce_one(arrival, *verdict, first + i, false, slot);
        }
    }

    /// Hands a chunk enforced without a port to the burst detector, in a pass of its own (its
    /// records and rows are still in L1, and the fast lane's loop keeps its registers): every
    /// fate is decided, so the detector sees what it would have packet by packet. `clock_ns`:
    /// the clock before the chunk.
    #[inline(never)]
    fn observe_chunk(&mut self, mut clock_ns: u64, records: &[PacketInfo], verdicts: &[Verdict], out: &[Processed]) {
        for (i, ((info, verdict), row)) in records.iter().zip(verdicts).zip(out).enumerate() {
            if let Some(ahead) = verdicts.get(i + 8) {
                self.bursts.prefetch(ahead);
            }
            clock_ns = clock_ns.max(packet_time(info));
            self.observe_burst(&Arrival::of(info, clock_ns), verdict, info, row.outcome);
        }
    }

    /// Hands an enforced packet to the burst detector.
    #[inline(always)]
    fn observe_burst(&mut self, arrival: &Arrival, verdict: &Verdict, info: &PacketInfo, outcome: u8) {
        let bytes = self.spec.count.bytes(arrival);
        self.bursts.observe(arrival.clock_ns, bytes, verdict, info, outcome);
    }

    /// The port takes what was released by the batch's last packet time and sends what it can
    /// by then.
    fn finish_batch(&mut self, mut port: Option<PortState>, out: &mut [Processed]) {
        if let Some(state) = &mut port {
            self.arrive_at_port(&mut state.port, self.clock_ns, out);
            state.port.advance_to(self.clock_ns);
            self.hand_departures(&mut state.port);
        }
        self.port = port;
    }

    /// Bytes of the state packets read at random: tenant lines, class stages, statistics rows,
    /// profiles.
    fn state_bytes(&self) -> usize {
        use std::mem::size_of_val;
        size_of_val(self.tenants.as_slice()) + size_of_val(self.class_stages.as_slice()) + self.rows.state_bytes() + self.profiles.state_bytes()
    }

    /// Asks the cache for the state of packets ahead, so that the misses of several packets
    /// overlap (with a million tenants each packet's lines are far apart): the tenant's line
    /// two steps ahead, then, from it, its profile (tenants of distinct contracts read distinct
    /// ones), the statistics row and the class's stage one step ahead.
    #[inline]
    fn prefetch_ahead(&self, verdicts: &[Verdict], index: usize) {
        const AHEAD: usize = 8;
        if let Some(tenant) = verdicts.get(index + 2 * AHEAD).and_then(|v| self.tenants.get(v.tenant as usize)) {
            prefetch(tenant);
        }
        if let Some(verdict) = verdicts.get(index + AHEAD) {
            let tenant = self.tenants.get(verdict.tenant as usize);
            if let Some(tenant) = tenant {
                self.profiles.prefetch(tenant.stage.profile);
            }
            let Some(row) = self.row_of(verdict, tenant) else { return };
            self.rows.prefetch(row);
            if tenant.is_some_and(|t| t.stage.classes_enforced) && row < self.class_rows {
                prefetch(&self.class_stages[row]);
            }
        }
    }

    /// The packet's statistics row: its class's (class rows are the class stages' rows), else
    /// its tenant's own (`None` until it has one), else the row of packets of no tenant. A
    /// tenant without a contract has no classes here.
    #[inline]
    fn row_of(&self, verdict: &Verdict, tenant: Option<&TenantState>) -> Option<usize> {
        match tenant {
            None => Some(self.no_tenant_row),
            Some(t) if (verdict.cls as u32) < t.classes => Some((t.first_row + verdict.cls as u32) as usize),
            Some(_) => Some(self.own_rows[verdict.tenant as usize]).filter(|&row| row != NO_ROW).map(|row| row as usize),
        }
    }

    /// The row the packet is counted in, its tenant's own row made if it has none yet.
    #[inline]
    fn counting_row(&mut self, verdict: &Verdict) -> usize {
        match self.row_of(verdict, self.tenants.get(verdict.tenant as usize)) {
            Some(row) => row,
            None => {
                debug_assert!(self.timeline.is_none(), "every tenant has its own row while a timeline is kept");
                self.make_own_row(verdict.tenant as usize)
            }
        }
    }

    /// Tenant `tenant`'s own row, zero, on its first packet in no class.
    #[cold]
    fn make_own_row(&mut self, tenant: usize) -> usize {
        let row = self.free_rows.pop().map_or_else(|| self.rows.push_zeroed(), |row| row as usize);
        self.own_rows[tenant] = row as u32;
        row
    }

    /// Hands the port every packet released by `until_ns`, in release order.
    fn arrive_at_port(&mut self, port: &mut Port, until_ns: u64, out: &mut [Processed]) {
        while let Some(&Reverse(packet)) = self.in_flight.peek() {
            if packet.release_ns > until_ns {
                return;
            }
            self.in_flight.pop();
            let result = port.arrive(packet.release_ns, packet.bytes, packet.row, packet.sequence);
            let outcome = Outcome::of_port(result, packet.remarked);
            if let (Some(timeline), true) = (&mut self.timeline, result.is_err()) {
                timeline.dropped(packet.row as usize, packet.release_ns, packet.green);
            }
            if self.bursts.active() {
                self.hand_departures(port); // they started before this arrival
                self.bursts.port_arrival(packet.row, packet.release_ns, packet.bytes, outcome);
            }
            self.rows.count_outcome(packet.row as usize, outcome, packet.bytes);
            if packet.batch == self.batch {
                if let Some(slot) = out.get_mut(packet.index) {
                    slot.outcome = outcome as u8;
                }
            }
        }
    }

    /// Enforces packet `index` of the batch into `slot`; `arrival.clock_ns` is its time as
    /// enforced, the latest seen so far.
    #[inline(always)] // two callers, each one loop around it
    fn enforce_one(&mut self, arrival: Arrival, verdict: Verdict, index: usize, has_port: bool, slot: &mut Processed) {
        let fast = self.tenants.get(verdict.tenant as usize).is_some_and(|t| t.stage.lane == Lane::Fast);
        if fast && verdict.action != DROP {
            self.enforce_fast(arrival, verdict, slot);
        } else {
            *slot = self.enforce_general(arrival, verdict, index, has_port);
        }
    }

    /// [`Lane::Fast`]: the tenant's meter, its colour action, the tenant's shaper. The same
    /// results as [`enforce_general`](Enforcer::enforce_general) would give, with no branch
    /// that depends on the traffic: the shaper sees every packet, and keeps its new state only
    /// if the meter passed the packet and the shaper sent it.
    #[inline(always)]
    fn enforce_fast(&mut self, info: Arrival, verdict: Verdict, slot: &mut Processed) {
        let now = info.clock_ns;
        let tenant = &self.tenants[verdict.tenant as usize];
        // Its class's row, else its own (a class id out of range is large as a u32): a branch
        // the traffic of a tenant with classes takes one way.
        let row = if (verdict.cls as u32) < tenant.classes { (tenant.first_row + verdict.cls as u32) as usize } else { self.counting_row(&verdict) };
        let Enforcer { spec, tenants, profiles, rows, .. } = self;
        let tenant = &mut tenants[verdict.tenant as usize].stage;
        let profile = profiles.get(tenant.profile);
        let Some((meter, shaper)) = profile.meter_and_shaper() else { unreachable!("a fast lane has a meter and a shaper") };
        // The meter counts the bytes the shaper does (or the tenant is not on this lane).
        let bytes = spec.count.bytes(&info);
        let incoming = spec.color_map[usize::from(info.dscp & 63)];
        let color = tenant.meter.mark_with(meter, now, bytes, incoming);
        let metered = profile.by_color.outcome[color as usize];
        let remark = profile.by_color.remark[color as usize];
        let offer = tenant.shaper.offer(shaper, now, bytes);
        let metered_out = metered == Outcome::DropMeter;
        let sent = !metered_out & offer.drop.is_none();
        tenant.shaper.settle(&offer, sent);
        // A table, not a `match`: LLVM would jump.
        const SHAPED_OUT: [Outcome; 3] = [Outcome::DropShaperBytes, Outcome::DropShaperTime, Outcome::Pass];
        let shaped_out = SHAPED_OUT[offer.drop.map_or(2, |drop| drop as usize)];
        let outcome = select_unpredictable(sent | metered_out, metered, shaped_out);
        rows.count(row, color, outcome, bytes);
        let release_ns = select_unpredictable(sent, i64::try_from(offer.release_ns).unwrap_or(i64::MAX), -1);
        *slot = Processed { verdict, color: color as u8, outcome: outcome as u8, dscp: remark.unwrap_or(info.dscp), release_ns };
    }

    /// Every lane: the general path, stage by stage.
    #[inline(never)]
    fn enforce_general(&mut self, info: Arrival, verdict: Verdict, index: usize, has_port: bool) -> Processed {
        let (now, info) = (info.clock_ns, &info);
        // A negative tenant or class is out of range as a u32 or usize.
        let row = self.counting_row(&verdict);
        let Enforcer { spec, tenants, profiles, class_stages, rows, class_rows, in_flight, sequence, batch, .. } = self;
        let bytes = spec.count.bytes(info);
        let mut result = Processed { verdict, color: NO_COLOR, outcome: Outcome::DropClassifier as u8, dscp: info.dscp, release_ns: -1 };
        if verdict.action == DROP {
            rows.count_outcome(row, Outcome::DropClassifier, bytes);
            return result;
        }
        let Some(tenant) = tenants.get_mut(verdict.tenant as usize).filter(|t| t.has_contract()) else {
            // No contract: the packet passes as it came, green.
            rows.count(row, Color::Green, Outcome::Pass, bytes);
            return Processed { color: Color::Green as u8, outcome: Outcome::Pass as u8, release_ns: now as i64, ..result };
        };
        let in_class = row < *class_rows;
        let mut class = (in_class && tenant.stage.classes_enforced).then(|| &mut class_stages[row]);
        let tenant = &mut tenant.stage;
        let (tenant_profile, class_profile) = (profiles.get(tenant.profile), class.as_ref().map(|c| profiles.get(c.profile)));
        let mut metered = Metered::new(spec.color_map[usize::from(info.dscp & 63)]);
        metered.meter(&tenant_profile, &mut tenant.meter, info, now);
        if let (Some(profile), Some(stage), false) = (class_profile, class.as_deref_mut(), metered.dropped) {
            metered.meter(&profile, &mut stage.meter, info, now);
        }
        rows.count_color(row, metered.color, bytes);
        result.color = metered.color as u8;
        result.dscp = metered.dscp.unwrap_or(info.dscp);
        if metered.dropped {
            rows.count_outcome(row, Outcome::DropMeter, bytes);
            result.outcome = Outcome::DropMeter as u8;
            return result;
        }
        let class_shaper = class_profile.and_then(|p| p.shaper).zip(class);
        let outcome = match shape(now, bytes, tenant_profile.shaper.map(|c| (c, tenant)), class_shaper) {
            Err(drop) => Outcome::of_shaping(drop),
            Ok(release_ns) => {
                result.release_ns = i64::try_from(release_ns).unwrap_or(i64::MAX);
                if has_port && in_class {
                    *sequence += 1;
                    let (remarked, green) = (metered.dscp.is_some(), metered.color == Color::Green);
                    let row = row as u32;
                    in_flight.push(Reverse(InFlight { release_ns, sequence: *sequence, row, bytes, batch: *batch, index, remarked, green }));
                    result.outcome = Outcome::Pending as u8;
                    return result; // counted when it reaches the port
                }
                if metered.dscp.is_some() {
                    Outcome::Remarked
                } else {
                    Outcome::Pass
                }
            }
        };
        rows.count_outcome(row, outcome, bytes);
        result.outcome = outcome as u8;
        result
    }

    /// Every burst that ended (docs/bursts.md), in id order.
    pub fn bursts(&self) -> &[BurstEvent] {
        self.bursts.events()
    }

    /// The bursts that ended since the last call.
    pub fn take_ended_bursts(&mut self) -> Vec<BurstEvent> {
        self.bursts.take_ended().to_vec()
    }

    /// The top flows of bursts `ids`.
    pub fn burst_flows(&self, ids: &[u64]) -> Vec<FlowRow> {
        self.bursts.flows_of(ids)
    }

    /// Tenant names, by the `tenant` of bursts.
    pub fn burst_tenants(&self) -> Vec<String> {
        self.bursts.names().to_vec()
    }

    /// Every scope watched for bursts, now or before.
    pub fn burst_stats(&self) -> Vec<ScopeStats> {
        self.bursts.stats()
    }

    /// Every (tenant, class) seen since the engine was made, with its counters, the packets
    /// still on their way to the port and its queueing delays there.
    pub fn stats(&self) -> Vec<(StatsKey, QosStats)> {
        let mut all = self.archive.clone();
        let row_keys = self.row_keys();
        for (row, key) in row_keys.iter().enumerate() {
            let counters = self.rows.counters(row);
            if counters.packets > 0 {
                all.entry(key.clone()).or_default().counters.add(&counters);
            }
        }
        if let Some(state) = &self.port {
            for (queue, key) in row_keys.iter().take(self.class_rows).enumerate() {
                let delays = &state.port.stats(queue as u32).delay_ns;
                if delays.count() > 0 {
                    all.entry(key.clone()).or_default().delay_ns.merge(delays);
                }
            }
        }
        for Reverse(packet) in &self.in_flight {
            all.entry(row_keys[packet.row as usize].clone()).or_default().in_flight += 1;
        }
        let mut all: Vec<(StatsKey, QosStats)> = all.into_iter().collect();
        all.sort_by(|a, b| a.0.cmp(&b.0));
        all
    }

    /// [`stats`](Enforcer::stats) as rows, in the same order, their tenants indexing
    /// [`stats_tenants`](Enforcer::stats_tenants).
    pub fn stats_rows(&mut self) -> Vec<StatsRow> {
        let stats = self.stats();
        self.rows_of(&stats)
    }

    /// [`stats_rows`](Enforcer::stats_rows) with each row's queueing delays at or below each of
    /// `edges_ns` and their sum, read at one time.
    pub fn delay_histograms(&mut self, edges_ns: &[u64]) -> DelayHistograms {
        let stats = self.stats();
        DelayHistograms::new(self.rows_of(&stats), &stats, edges_ns)
    }

    fn rows_of(&mut self, stats: &[(StatsKey, QosStats)]) -> Vec<StatsRow> {
        let names = &mut self.stats_names;
        stats.iter().map(|((tenant, cls), qos)| StatsRow::new(tenant.as_ref().map_or(-1, |name| names.index_of(name)), *cls, qos)).collect()
    }

    /// Tenant names, by the `tenant` of statistics rows (a name keeps its index once given).
    pub fn stats_tenants(&self) -> Vec<String> {
        self.stats_names.names().to_vec()
    }
}

/// The statistics rows' keys: every class of the tenants with a contract, every tenant, none.
#[cfg(test)]
mod tests;
