//! QoS enforcement on several threads, sharded by tenant (docs/qos.md, "Several threads").
//!
//! Each shard is an [`Enforcer`] that sees the packets of its tenants only, so one thread
//! meters and shapes a tenant's packets, in their arrival order. A tenant belongs to shard
//! `counter slot % shards`: the engine gives a tenant name its counter slot once for its whole
//! life, so a tenant whose state an update keeps stays with the shard that holds that state.
//! Packets of no tenant go to shard 0.
//!
//! A batch is taken a chunk at a time, in three steps on the pool's threads: the chunk is split
//! into contiguous parts, one per thread, and each part is classified and what enforcement
//! reads of its packets (an [`Arrival`] and the verdict, 38 bytes a packet) copied, in order, to
//! the shards that enforce them; each shard enforces its copies, part after part; each part
//! takes its packets' rows back from the shards. Time is what one enforcer would see: a
//! packet's clock is the latest timestamp of the whole stream up to it. The statistics of the
//! shards are added up. With one shard the engine enforces as it always did: classifying and enforcing
//! in one pass, with no copies.

use bytemuck::Zeroable;
use rayon::prelude::*;
use rustc_hash::FxHashMap;
use std::sync::{Mutex, MutexGuard};

use super::Verdict;
use crate::enforce::{packet_time, Arrival, Enforcer, Processed, QosSpec, QosStats, StatsKey};
use crate::parse::PacketInfo;

/// Packets a step takes at a time: a chunk's records (96 B each) and the shards' copies stay
/// in the cores' L2 caches between the steps.
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
    /// By part of the chunk: that part's packets of this shard's tenants. A part's thread
    /// fills it, the shard's thread enforces it, the part's thread takes the rows back; the
    /// locks are never contended (the steps do not overlap).
    staged: Vec<Mutex<Staged>>,
}

/// One part's packets of one shard, in arrival order, and what became of them.
#[derive(Default)]
struct Staged {
    arrivals: Vec<Arrival>,
    verdicts: Vec<Verdict>,
    out: Vec<Processed>,
}

/// A contiguous part of a chunk, classified by one thread.
#[derive(Default)]
struct Part {
    verdicts: Vec<Verdict>,
    /// Per packet, the shard that enforces it.
    owners: Vec<u32>,
    /// The latest time seen in the part, and before its first packet.
    last_clock: u64,
    start_clock: u64,
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
        let part_len = records.len().div_ceil(if parallel { shards.len() } else { 1 }).max(1);
        let part_count = records.len().div_ceil(part_len);
        parts.resize_with(part_count, Part::default);
        for shard in shards.iter_mut() {
            shard.staged.resize_with(part_count, Mutex::default);
        }
        let staging: &[Shard] = shards;
        let mut classifying: Vec<(&mut Part, &[PacketInfo])> = parts.iter_mut().zip(records.chunks(part_len)).collect();
        each_mut(&mut classifying, parallel, |p, (part, records)| part.classify_and_stage(p, records, classify, owners, staging));
        for part in parts.iter_mut() {
            part.start_clock = *clock_ns;
            *clock_ns = (*clock_ns).max(part.last_clock);
        }
        let clocks: &[Part] = parts;
        each_mut(shards, parallel, |_, shard| shard.enforce(clocks));
        let mut returns: Vec<(&Part, &mut [Processed])> = parts.iter().zip(out.chunks_mut(part_len)).collect();
        each_mut(&mut returns, parallel, |p, (part, out)| part.take_rows(p, shards, out));
    }
}

impl Part {
    /// Classifies part `p` and copies what enforcement reads of each packet, with its time so
    /// far in the part, to the shard that enforces it.
    fn classify_and_stage(&mut self, p: usize, records: &[PacketInfo], classify: &impl Fn(&[PacketInfo], &mut [Verdict]), owners: &[u32], shards: &[Shard]) {
        self.verdicts.resize(records.len(), Verdict::zeroed());
        classify(records, &mut self.verdicts);
        let mut staged: Vec<_> = shards.iter().map(|shard| lock(&shard.staged[p])).collect();
        for staged in &mut staged {
            staged.arrivals.clear();
            staged.verdicts.clear();
        }
        self.owners.clear();
        let mut clock = 0;
        for (info, verdict) in records.iter().zip(&self.verdicts) {
            clock = clock.max(packet_time(info));
            // A negative tenant (none) is out of range as a usize: shard 0.
            let owner = owners.get(verdict.tenant as usize).copied().unwrap_or(0);
            self.owners.push(owner);
            let staged = &mut staged[owner as usize];
            staged.arrivals.push(Arrival::of(info, clock));
            staged.verdicts.push(*verdict);
        }
        self.last_clock = clock;
    }

    /// Writes part `p`'s rows from the shards' results, in the part's order.
    fn take_rows(&self, p: usize, shards: &[Shard], out: &mut [Processed]) {
        let staged: Vec<_> = shards.iter().map(|shard| lock(&shard.staged[p])).collect();
        let mut results: Vec<_> = staged.iter().map(|staged| staged.out.iter()).collect();
        for (row, &owner) in out.iter_mut().zip(&self.owners) {
            *row = *results[owner as usize].next().expect("a shard has a result for each packet it was given");
        }
    }
}

impl Shard {
    /// Enforces the chunk's packets of this shard, part after part, each timed as one enforcer
    /// would time it: the latest time of the stream so far, earlier parts included.
    fn enforce(&mut self, parts: &[Part]) {
        for (staged, part) in self.staged.iter_mut().zip(parts) {
            let staged = staged.get_mut().unwrap_or_else(|poisoned| poisoned.into_inner());
            // Times within a part only rise: only the first few can be behind the parts before.
            for arrival in staged.arrivals.iter_mut().take_while(|arrival| arrival.clock_ns < part.start_clock) {
                arrival.clock_ns = part.start_clock;
            }
            staged.out.resize(staged.arrivals.len(), Processed::zeroed());
            self.enforcer.enforce_arrivals(&staged.arrivals, &staged.verdicts, &mut staged.out);
        }
    }
}

fn lock(staged: &Mutex<Staged>) -> MutexGuard<'_, Staged> {
    staged.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
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
