//! Enforcement of one chunk of packets in passes over the chunk, rather than packet after
//! packet: each pass is a short loop that does one thing, so little is live at once and a pass
//! that a policy does not need is skipped.
//!
//! 1. Start the rows: the packet's time and bytes, its row as if it passed untouched (or as the
//!    classifier's drop); ask the cache for its tenant.
//! 2. Tenant meters: the statistics row (asked for from the cache), the tenant's meter and its
//!    colour action; without class meters in the policy, the shapers too.
//! 3. Class meters, only if some class has one; then the shapers.
//! 4. Outcomes: statistics, and the port, in packet order.
//!
//! Every meter and shaper still sees its packets in arrival order (each pass walks the chunk in
//! order, and a packet meets its stages in the same order as before: tenant meter, class meter,
//! shapers), and the port sees what it saw packet at a time, so the results are the same to
//! the bit. With a million tenants the misses of a whole chunk overlap: pass 1 asks for every
//! packet's tenant line before pass 2 reads them, pass 2 for every statistics row before pass 4.

use super::{Enforcer, InFlight, Outcome, PortState, Processed, ShapeDrop, ShaperConsts, Stage, CHUNK, DROP, NO_COLOR};
use crate::engine::Verdict;
use crate::memory::prefetch;
use crate::meter::Color;
use crate::parse::PacketInfo;
use std::cmp::Reverse;

/// A packet whose tenant has a contract, on its way from the tenant's meter to the shapers.
#[derive(Debug, Clone, Copy)]
struct Job {
    /// Its index in the chunk.
    packet: u32,
    tenant: u32,
    /// Its class's stage, or [`NO_CLASS_STAGE`] when no class of the tenant has a contract or
    /// the packet is in no class.
    class: u32,
    /// The colour a colour-aware class meter takes: the tenant meter's, else the DSCP's.
    incoming: Color,
}

const NO_CLASS_STAGE: u32 = u32::MAX;

/// A chunk's columns, [`CHUNK`] long, kept between batches so that a batch allocates nothing.
#[derive(Debug, Default)]
pub(super) struct ChunkColumns {
    /// Packet time: the clock once the packet has moved it.
    now_ns: Vec<u64>,
    /// Bytes as the policy counts them (shapers, port, statistics).
    bytes: Vec<u32>,
    stats_rows: Vec<u32>,
    /// The shapers' release of a packet that passed them (what the port sees: the row's
    /// `release_ns` is this as an i64).
    release_ns: Vec<u64>,
    /// Packets between the tenant meters and the shapers (when class meters are between).
    jobs: Vec<Job>,
}

impl ChunkColumns {
    fn ensure_chunk_size(&mut self) {
        if self.now_ns.len() < CHUNK {
            *self = ChunkColumns { now_ns: vec![0; CHUNK], bytes: vec![0; CHUNK], stats_rows: vec![0; CHUNK], release_ns: vec![0; CHUNK], jobs: Vec::with_capacity(CHUNK) };
        }
    }
}

impl Enforcer {
    /// Enforces `records` (classified as `verdicts`, at most [`CHUNK`] of them), which start at
    /// `first` in the batch: their rows are `out[first..]`.
    #[inline(never)] // one call a chunk; a symbol of its own for profilers
    pub(super) fn enforce_chunk(&mut self, port: &mut Option<PortState>, records: &[PacketInfo], verdicts: &[Verdict], out: &mut [Processed], first: usize) {
        let mut columns = std::mem::take(&mut self.columns);
        columns.ensure_chunk_size();
        let len = records.len().min(verdicts.len()).min(CHUNK);
        let rows = &mut out[first..first + len];
        self.start_rows(&mut columns, &records[..len], verdicts, rows);
        if self.class_meters {
            self.meter_tenants::<false>(&mut columns, records, verdicts, rows);
            self.meter_classes(&mut columns, records, rows);
            self.shape_jobs(&mut columns, rows);
        } else {
            self.meter_tenants::<true>(&mut columns, records, verdicts, rows);
        }
        match port {
            Some(state) => self.count_outcomes_at_port(&columns, &mut state.port, out, first, len),
            None => self.count_outcomes(&columns, rows),
        }
        self.columns = columns;
    }

    /// Each row as if the packet passed untouched (green, its DSCP, released on arrival), or as
    /// the classifier's drop; the packet's time and bytes; a prefetch of its tenant.
    fn start_rows(&mut self, columns: &mut ChunkColumns, records: &[PacketInfo], verdicts: &[Verdict], rows: &mut [Processed]) {
        let count = self.spec.count;
        let mut clock_ns = self.clock_ns;
        let packets = records.iter().zip(verdicts).zip(rows.iter_mut());
        for (((info, verdict), row), (now_ns, bytes)) in packets.zip(columns.now_ns.iter_mut().zip(columns.bytes.iter_mut())) {
            // A negative timestamp is read as 0, an earlier one as the clock.
            clock_ns = clock_ns.max(info.timestamp_ns.max(0) as u64);
            *now_ns = clock_ns;
            *bytes = count.bytes(info);
            if let Some(tenant) = self.tenants.get(verdict.tenant as usize) {
                prefetch(tenant);
            }
            let dropped = verdict.action == DROP;
            *row = Processed {
                verdict: *verdict,
                color: if dropped { NO_COLOR } else { Color::Green as u8 },
                outcome: if dropped { Outcome::DropClassifier as u8 } else { Outcome::Pass as u8 },
                dscp: info.dscp,
                release_ns: if dropped { -1 } else { clock_ns as i64 },
            };
        }
        self.clock_ns = clock_ns;
    }

    /// Finds each packet's statistics row and, for a packet with a contract, runs its tenant's
    /// meter and its colour action, then (`SHAPE`: no class meters come between) its shapers;
    /// otherwise the packets that pass the meter become the jobs of the next passes.
    fn meter_tenants<const SHAPE: bool>(&mut self, columns: &mut ChunkColumns, records: &[PacketInfo], verdicts: &[Verdict], rows: &mut [Processed]) {
        columns.jobs.clear();
        let packets = rows.iter_mut().zip(records).zip(verdicts).zip(columns.stats_rows.iter_mut().zip(&columns.now_ns));
        for (packet, (((row, info), verdict), (stats_row, &now_ns))) in packets.enumerate() {
            let tenant_index = verdict.tenant as usize;
            let tenant = self.tenants.get(tenant_index);
            let row_index = self.row_of(verdict, tenant);
            *stats_row = row_index as u32;
            if let Some(counters) = self.rows.get(row_index) {
                prefetch(counters);
            }
            let Some(tenant) = tenant.filter(|t| t.has_contract() && verdict.action != DROP) else {
                continue;
            };
            let class = match self.class_stages.get(row_index) {
                Some(class) if tenant.stage.classes_enforced => {
                    prefetch(class);
                    row_index as u32
                }
                _ => NO_CLASS_STAGE,
            };
            let stage = &mut self.tenants[tenant_index].stage;
            let mut incoming = self.spec.color_map[usize::from(info.dscp & 63)];
            if let Some(meter) = &self.profiles[stage.profile as usize].meter {
                let Some(color) = meter.meter(&mut stage.meter, info, now_ns, incoming, row) else {
                    continue;
                };
                incoming = color;
            }
            let job = Job { packet: packet as u32, tenant: tenant_index as u32, class, incoming };
            if SHAPE {
                let bytes = columns.bytes[packet];
                if let Some(release_ns) = self.shape_packet(job, now_ns, bytes, row) {
                    columns.release_ns[packet] = release_ns;
                }
            } else {
                columns.jobs.push(job);
            }
        }
    }

    /// The class meters: the colour the tenant's gave goes in; a packet a class meter drops
    /// leaves the jobs.
    fn meter_classes(&mut self, columns: &mut ChunkColumns, records: &[PacketInfo], rows: &mut [Processed]) {
        let now_ns = &columns.now_ns;
        columns.jobs.retain(|job| {
            let Some(stage) = self.class_stages.get_mut(job.class as usize) else {
                return true;
            };
            let Some(meter) = &self.profiles[stage.profile as usize].meter else {
                return true;
            };
            let packet = job.packet as usize;
            meter.meter(&mut stage.meter, &records[packet], now_ns[packet], job.incoming, &mut rows[packet]).is_some()
        });
    }

    /// The shapers of every packet the meters passed.
    fn shape_jobs(&mut self, columns: &mut ChunkColumns, rows: &mut [Processed]) {
        for &job in &columns.jobs {
            let packet = job.packet as usize;
            if let Some(release_ns) = self.shape_packet(job, columns.now_ns[packet], columns.bytes[packet], &mut rows[packet]) {
                columns.release_ns[packet] = release_ns;
            }
        }
    }

    /// The tenant's shaper and the class's on one packet: its release (also written to its
    /// row), or `None` when a shaper drops it (its row says why).
    #[inline]
    fn shape_packet(&mut self, job: Job, now_ns: u64, bytes: u32, row: &mut Processed) -> Option<u64> {
        let profiles = &self.profiles;
        let tenant = &mut self.tenants[job.tenant as usize].stage;
        let tenant_shaper = profiles[tenant.profile as usize].shaper.as_ref().map(|consts| (consts, tenant));
        let class_shaper = self.class_stages.get_mut(job.class as usize).and_then(|stage| Some((profiles[stage.profile as usize].shaper.as_ref()?, stage)));
        match shape(now_ns, bytes, tenant_shaper, class_shaper) {
            Ok(release_ns) => {
                row.release_ns = i64::try_from(release_ns).unwrap_or(i64::MAX);
                Some(release_ns)
            }
            Err(drop) => {
                row.outcome = Outcome::of_shaping(drop) as u8;
                row.release_ns = -1;
                None
            }
        }
    }

    /// Statistics, without a port: every packet's fate is known.
    fn count_outcomes(&mut self, columns: &ChunkColumns, rows: &[Processed]) {
        for ((row, &stats_row), &bytes) in rows.iter().zip(&columns.stats_rows).zip(&columns.bytes) {
            if let Some(counters) = self.rows.get_mut(stats_row as usize) {
                counters.count_color_code(row.color, bytes);
                counters.count_outcome_code(row.outcome, bytes);
            }
        }
    }

    /// In packet order: the port takes what the shapers released by the packet's time, then
    /// the packet is counted, or, if it passed and its class has a port queue, sent on its way
    /// to the port (pending: counted when it arrives there).
    fn count_outcomes_at_port(&mut self, columns: &ChunkColumns, port: &mut crate::shaping::Port, out: &mut [Processed], first: usize, len: usize) {
        for index in 0..len {
            self.arrive_at_port(port, columns.now_ns[index], out);
            let (stats_row, bytes) = (columns.stats_rows[index], columns.bytes[index]);
            let row = &mut out[first + index];
            let counters = &mut self.rows[stats_row as usize];
            counters.count_color_code(row.color, bytes);
            let passed = row.outcome <= Outcome::Remarked as u8;
            if passed && (stats_row as usize) < self.class_rows {
                self.sequence += 1;
                let remarked = row.outcome == Outcome::Remarked as u8;
                let packet = InFlight { release_ns: columns.release_ns[index], sequence: self.sequence, row: stats_row, bytes, batch: self.batch, index: first + index, remarked };
                self.in_flight.push(Reverse(packet));
                row.outcome = Outcome::Pending as u8;
            } else {
                counters.count_outcome_code(row.outcome, bytes);
            }
        }
    }
}

/// The release time under the tenant's shaper and the class's (the later of the two, as EDT
/// composes), or the first one's reason to drop; a dropped packet changes neither shaper (a
/// shaper that drops changes nothing itself, so only the tenant's waits for the class's).
#[inline]
fn shape(now: u64, bytes: u32, tenant: Option<(&ShaperConsts, &mut Stage)>, class: Option<(&ShaperConsts, &mut Stage)>) -> Result<u64, ShapeDrop> {
    match (tenant, class) {
        (None, None) => Ok(now),
        (Some((consts, stage)), None) | (None, Some((consts, stage))) => stage.shaper.shape_with(consts, now, bytes),
        (Some((tenant_consts, tenant)), Some((class_consts, class))) => {
            let mut tenant_state = tenant.shaper;
            let tenant_release = tenant_state.shape_with(tenant_consts, now, bytes)?;
            let class_release = class.shaper.shape_with(class_consts, now, bytes)?;
            tenant.shaper = tenant_state;
            Ok(tenant_release.max(class_release))
        }
    }
}
