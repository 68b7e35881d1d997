//! QoS enforcement on several threads, sharded by tenant (docs/qos.md, "Several threads").
//!
//! Each shard is an [`Enforcer`] that sees the packets of its tenants only, so one thread
//! meters and shapes a tenant's packets, in their arrival order. A tenant belongs to shard
//! `counter slot % shards`: the engine gives a tenant name its counter slot once for its whole
//! life, so a tenant whose state an update keeps stays with the shard that holds that state.
//! Packets of no tenant go to shard 0.
//!
//! A batch is taken a chunk at a time, in three steps on the pool's threads: the chunk is split
//! into contiguous parts that are classified at once; each shard gathers its packets from every
//! part, in order, and enforces them; each part takes its packets' rows back from the shards.
//! Time is what one enforcer would see: a packet's clock is the latest timestamp of the whole
//! stream up to it, which its gathered copy carries as its timestamp. The statistics of the
//! shards are added up. With one shard the engine enforces as it always did: classifying and
//! enforcing in one pass, with no copies.

use bytemuck::Zeroable;
use rayon::prelude::*;
use rustc_hash::FxHashMap;

use super::Verdict;
use crate::enforce::{Enforcer, Processed, QosSpec, QosStats, StatsKey};
use crate::parse::PacketInfo;

/// Packets a step takes at a time: a chunk's records (96 B each) and the shards' copies of
/// them stay in the cores' L2 caches between the steps.
const CHUNK: usize = 16 * 1024;

/// Batches shorter than this are processed on the calling thread (all shards in turn): waking
/// the pool costs more than it saves on them.
const INLINE_BELOW: usize = 4096;

pub(super) struct QosShards {
    shards: Vec<Shard>,
    /// The shard of each tenant of the installed tables, by tenant index.
    owners: Vec<u32>,
    /// The latest packet time seen by any shard: the clock one enforcer would have.
    clock_ns: u64,
    /// A chunk's parts (kept, so that a batch allocates nothing once warm).
    parts: Vec<Part>,
}

#[derive(Default)]
struct Shard {
    enforcer: Enforcer,
    /// A chunk's packets of this shard's tenants, in arrival order, and what became of them.
    records: Vec<PacketInfo>,
    verdicts: Vec<Verdict>,
    out: Vec<Processed>,
}

/// A contiguous part of a chunk, classified by one thread.
#[derive(Default)]
struct Part {
    verdicts: Vec<Verdict>,
    /// Per packet, the latest time seen in the part up to and including it.
    clocks: Vec<u64>,
    /// Per packet, the shard that enforces it.
    owners: Vec<u32>,
    /// The part's packets per shard.
    per_shard: Vec<usize>,
    /// The latest time seen before the part's first packet.
    start_clock: u64,
    /// Per shard, where the part's first packet of that shard is in the shard's results
    /// (advanced as the part takes its rows back).
    cursors: Vec<usize>,
}

impl QosShards {
    pub(super) fn new(threads: usize) -> Result<Self, String> {
        if threads == 0 {
            return Err("threads must be at least 1".to_string());
        }
        Ok(QosShards { shards: (0..threads).map(|_| Shard::default()).collect(), owners: Vec::new(), clock_ns: 0, parts: Vec::new() })
    }

    pub(super) fn threads(&self) -> usize {
        self.shards.len()
    }

    /// `spec` applies from the next [`retarget`](QosShards::retarget). A port cannot be
    /// sharded: it is one queueing system that takes every tenant's packets in the order they
    /// reach it, and a tenant's state cannot move out of its shard into one enforcer later.
    pub(super) fn stage(&mut self, spec: QosSpec) -> Result<(), String> {
        if spec.port.is_some() && self.shards.len() > 1 {
            return Err(format!(
                "a policy with a port is enforced on one thread (the port takes every tenant's packets in the order they reach it); this engine runs on {} threads: make it with threads=1",
                self.shards.len()
            ));
        }
        for shard in &mut self.shards {
            shard.enforcer.stage(Some(spec.clone()));
        }
        Ok(())
    }

    /// Withdraws a staged spec whose tables were refused.
    pub(super) fn withdraw(&mut self) {
        for shard in &mut self.shards {
            shard.enforcer.stage(None);
        }
    }

    /// Aligns every shard with the engine's new tenants (`counter_slots[t]` is tenant `t`'s).
    pub(super) fn retarget(&mut self, names: &[String], counter_slots: &[u32]) {
        for shard in &mut self.shards {
            shard.enforcer.retarget(names);
        }
        let shards = self.shards.len() as u32;
        self.owners = counter_slots.iter().map(|slot| slot % shards).collect();
    }

    /// The statistics of all shards, added up per (tenant, class).
    pub(super) fn stats(&self) -> Vec<(StatsKey, QosStats)> {
        if let [only] = &self.shards[..] {
            return only.enforcer.stats();
        }
        let mut merged: FxHashMap<StatsKey, QosStats> = FxHashMap::default();
        for shard in &self.shards {
            for (key, stats) in shard.enforcer.stats() {
                add_stats(merged.entry(key).or_default(), &stats);
            }
        }
        let mut merged: Vec<(StatsKey, QosStats)> = merged.into_iter().collect();
        merged.sort_by(|a, b| a.0.cmp(&b.0));
        merged
    }

    /// Classifies (with `classify`) and enforces a batch; `out[i]` is packet `i`'s result, the
    /// same as one enforcer would give.
    pub(super) fn process(&mut self, records: &[PacketInfo], out: &mut [Processed], classify: &(impl Fn(&[PacketInfo], &mut [Verdict]) + Sync)) {
        if let [only] = &mut self.shards[..] {
            only.enforcer.classify_and_enforce(records, out, classify);
            return;
        }
        let records = &records[..records.len().min(out.len())];
        let pool = if records.len() < INLINE_BELOW { None } else { crate::pool::thread_pool(self.shards.len()) };
        let parallel = pool.is_some();
        let mut run = || {
            for (records, out) in records.chunks(CHUNK).zip(out.chunks_mut(CHUNK)) {
                self.process_chunk(records, out, classify, parallel);
            }
        };
        match pool {
            Some(pool) => pool.install(run),
            None => run(),
        }
    }

    fn process_chunk(&mut self, records: &[PacketInfo], out: &mut [Processed], classify: &(impl Fn(&[PacketInfo], &mut [Verdict]) + Sync), parallel: bool) {
        let QosShards { shards, owners, clock_ns, parts } = self;
        let shard_count = shards.len();
        let part_len = records.len().div_ceil(if parallel { shard_count } else { 1 });
        let part_ranges: Vec<std::ops::Range<usize>> = (0..records.len()).step_by(part_len.max(1)).map(|start| start..(start + part_len).min(records.len())).collect();
        parts.resize_with(part_ranges.len(), Part::default);
        each_mut(parts, parallel, |p, part| part.classify(&records[part_ranges[p].clone()], classify, owners, shard_count));
        let mut cursors = vec![0; shard_count];
        for part in parts.iter_mut() {
            part.start_clock = *clock_ns;
            *clock_ns = (*clock_ns).max(part.clocks.last().copied().unwrap_or(0));
            part.cursors.clone_from(&cursors);
            for (cursor, count) in cursors.iter_mut().zip(&part.per_shard) {
                *cursor += count;
            }
        }
        let gathered_from: &[Part] = parts;
        each_mut(shards, parallel, |s, shard| shard.enforce(s as u32, records, &part_ranges, gathered_from));
        let mut returns: Vec<(&mut Part, &mut [Processed])> = parts.iter_mut().zip(out.chunks_mut(part_len.max(1))).collect();
        each_mut(&mut returns, parallel, |_, (part, out)| part.take_rows(shards, out));
    }
}

impl Part {
    fn classify(&mut self, records: &[PacketInfo], classify: &impl Fn(&[PacketInfo], &mut [Verdict]), owners: &[u32], shards: usize) {
        self.verdicts.resize(records.len(), Verdict::zeroed());
        classify(records, &mut self.verdicts);
        self.clocks.clear();
        self.owners.clear();
        self.per_shard.clear();
        self.per_shard.resize(shards, 0);
        let mut clock = 0;
        for (info, verdict) in records.iter().zip(&self.verdicts) {
            clock = clock.max(packet_time(info));
            self.clocks.push(clock);
            // A negative tenant (none) is out of range as a usize: shard 0.
            let owner = owners.get(verdict.tenant as usize).copied().unwrap_or(0);
            self.owners.push(owner);
            self.per_shard[owner as usize] += 1;
        }
    }

    /// Writes the part's rows from the shards' results, in the part's order.
    fn take_rows(&mut self, shards: &[Shard], out: &mut [Processed]) {
        for (row, &owner) in out.iter_mut().zip(&self.owners) {
            let cursor = &mut self.cursors[owner as usize];
            *row = shards[owner as usize].out[*cursor];
            *cursor += 1;
        }
    }
}

impl Shard {
    /// Gathers the chunk's packets of shard `me` from every part, in order, each timed as one
    /// enforcer would time it, and enforces them.
    fn enforce(&mut self, me: u32, records: &[PacketInfo], part_ranges: &[std::ops::Range<usize>], parts: &[Part]) {
        self.records.clear();
        self.verdicts.clear();
        for (part, range) in parts.iter().zip(part_ranges) {
            let packets = records[range.clone()].iter().zip(&part.verdicts).zip(&part.clocks).zip(&part.owners);
            for (((info, verdict), &clock), _) in packets.filter(|(_, &owner)| owner == me) {
                // At most i64::MAX: every clock is a timestamp, or 0.
                let timestamp_ns = clock.max(part.start_clock) as i64;
                self.records.push(PacketInfo { timestamp_ns, ..*info });
                self.verdicts.push(*verdict);
            }
        }
        self.out.resize(self.records.len(), Processed::zeroed());
        self.enforcer.enforce(&self.records, &self.verdicts, &mut self.out);
    }
}

/// A packet's time as the enforcer reads it (a negative timestamp is 0).
fn packet_time(info: &PacketInfo) -> u64 {
    u64::try_from(info.timestamp_ns).unwrap_or(0)
}

/// Runs `work` on every item (with its index): on the current pool's threads if `parallel`,
/// else in turn on this thread.
fn each_mut<T: Send>(items: &mut [T], parallel: bool, work: impl Fn(usize, &mut T) + Sync + Send) {
    if parallel {
        items.par_iter_mut().enumerate().for_each(|(index, item)| work(index, item));
    } else {
        items.iter_mut().enumerate().for_each(|(index, item)| work(index, item));
    }
}

fn add_stats(sum: &mut QosStats, stats: &QosStats) {
    let (sum_counters, counters) = (&mut sum.counters, &stats.counters);
    sum_counters.packets += counters.packets;
    sum_counters.bytes += counters.bytes;
    for (sums, values) in [
        (&mut sum_counters.color_packets[..], &counters.color_packets[..]),
        (&mut sum_counters.color_bytes[..], &counters.color_bytes[..]),
        (&mut sum_counters.outcome_packets[..], &counters.outcome_packets[..]),
        (&mut sum_counters.outcome_bytes[..], &counters.outcome_bytes[..]),
    ] {
        for (sum, value) in sums.iter_mut().zip(values) {
            *sum += value;
        }
    }
    sum.in_flight += stats.in_flight;
    sum.delay_ns.merge(&stats.delay_ns);
}

#[cfg(test)]
mod tests;
