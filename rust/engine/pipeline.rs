//! `Engine::process` on several threads (docs/qos.md, "Several threads").
//!
//! Classification is spread over the threads; enforcement is not. A batch is cut into pieces
//! that any thread may classify, claimed in order; one enforcer, on the calling thread, takes
//! the pieces' verdicts in order and meters and shapes every packet as one thread would. When
//! the piece it needs has not been claimed yet, the enforcer classifies it itself, so no
//! thread waits for another unless that one is already classifying the piece it needs. The
//! rows and statistics are those of one thread by construction (one state, packets in arrival
//! order, a port included), and two threads run about as fast as the slower half, enforcement
//! or classification, allows.

use bytemuck::Zeroable;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::OnceLock;

use super::Verdict;
use crate::enforce::{Enforcer, Processed, QosSpec, QosStats, StatsKey};
use crate::parse::PacketInfo;

/// Packets a thread classifies at a time: big enough that claiming a piece costs nothing, small
/// enough that the enforcer can start soon and that a piece's verdicts (14 B a packet) are
/// still in cache when it takes them.
const PIECE: usize = 4096;

/// Batches shorter than this are processed on the calling thread alone: waking the pool costs
/// more than it saves on them.
const INLINE_BELOW: usize = 2 * PIECE;

pub(super) struct QosPipeline {
    enforcer: Enforcer,
    threads: usize,
}

impl QosPipeline {
    pub(super) fn new(threads: usize) -> Result<Self, String> {
        if threads == 0 {
            return Err("threads must be at least 1".to_string());
        }
        Ok(QosPipeline { enforcer: Enforcer::default(), threads })
    }

    pub(super) fn threads(&self) -> usize {
        self.threads
    }

    /// `spec` applies from the next [`retarget`](QosPipeline::retarget).
    pub(super) fn stage(&mut self, spec: QosSpec) {
        self.enforcer.stage(Some(spec));
    }

    /// Withdraws a staged spec whose tables were refused.
    pub(super) fn withdraw(&mut self) {
        self.enforcer.stage(None);
    }

    /// Aligns the enforcer with the engine's new tenants.
    pub(super) fn retarget(&mut self, names: &[String]) {
        self.enforcer.retarget(names);
    }

    pub(super) fn stats(&self) -> Vec<(StatsKey, QosStats)> {
        self.enforcer.stats()
    }

    /// Classifies (with `classify`) and enforces a batch; `out[i]` is packet `i`'s result.
    pub(super) fn process(&mut self, records: &[PacketInfo], out: &mut [Processed], classify: &(impl Fn(&[PacketInfo], &mut [Verdict]) + Sync)) {
        let records = &records[..records.len().min(out.len())];
        let pool = if self.threads == 1 || records.len() < INLINE_BELOW { None } else { crate::pool::thread_pool(self.threads) };
        match pool {
            Some(pool) => pool.install(|| self.process_on_pool(records, out, classify)),
            None => self.enforcer.classify_and_enforce(records, out, classify),
        }
    }

    /// The enforcer on this thread, the pool's other threads classifying ahead of it.
    fn process_on_pool(&mut self, records: &[PacketInfo], out: &mut [Processed], classify: &(impl Fn(&[PacketInfo], &mut [Verdict]) + Sync)) {
        let pieces = Pieces::new(records, classify);
        rayon::scope(|scope| {
            for _ in 1..self.threads {
                scope.spawn(|_| while pieces.classify_next() {});
            }
            let mut taken = 0;
            self.enforcer.classify_and_enforce(records, out, |chunk, verdicts| {
                pieces.copy_verdicts(taken, &mut verdicts[..chunk.len()]);
                taken += chunk.len();
            });
        });
    }
}

/// A batch's pieces and their verdicts once classified.
struct Pieces<'a, C> {
    records: &'a [PacketInfo],
    classify: &'a C,
    /// The first piece no thread has claimed.
    next: AtomicUsize,
    verdicts: Vec<OnceLock<Vec<Verdict>>>,
    /// A thread panicked while classifying: the piece it claimed will never come.
    failed: AtomicBool,
}

/// Marks `failed` if dropped while its thread unwinds.
struct PanicFlag<'a>(&'a AtomicBool);

impl Drop for PanicFlag<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.0.store(true, Ordering::Release);
        }
    }
}

impl<'a, C: Fn(&[PacketInfo], &mut [Verdict]) + Sync> Pieces<'a, C> {
    fn new(records: &'a [PacketInfo], classify: &'a C) -> Self {
        let verdicts = (0..records.len().div_ceil(PIECE)).map(|_| OnceLock::new()).collect();
        Pieces { records, classify, next: AtomicUsize::new(0), verdicts, failed: AtomicBool::new(false) }
    }

    /// Claims and classifies the next piece; false once every piece is claimed.
    fn classify_next(&self) -> bool {
        let piece = self.next.fetch_add(1, Ordering::Relaxed);
        let Some(slot) = self.verdicts.get(piece) else { return false };
        let records = &self.records[piece * PIECE..self.records.len().min((piece + 1) * PIECE)];
        let mut verdicts = vec![Verdict::zeroed(); records.len()];
        let flag = PanicFlag(&self.failed);
        (self.classify)(records, &mut verdicts);
        drop(flag);
        // Only the thread that claimed the piece sets it.
        let _ = slot.set(verdicts);
        true
    }

    /// Copies the verdicts of packets `first..first + out.len()` into `out`, classifying
    /// pieces itself (or, if all are claimed, waiting) until they are there.
    fn copy_verdicts(&self, first: usize, out: &mut [Verdict]) {
        let mut copied = 0;
        while copied < out.len() {
            let index = first + copied;
            let piece = self.wait_for(index / PIECE);
            let from = &piece[index % PIECE..];
            let count = from.len().min(out.len() - copied);
            out[copied..copied + count].copy_from_slice(&from[..count]);
            copied += count;
        }
    }

    fn wait_for(&self, piece: usize) -> &[Verdict] {
        loop {
            if let Some(verdicts) = self.verdicts[piece].get() {
                return verdicts;
            }
            // Claimed by another thread, which is classifying it now (or failed to: its
            // panic ends the pool's scope once this thread stops waiting).
            assert!(!self.failed.load(Ordering::Acquire), "a thread classifying for the enforcer panicked");
            if !self.classify_next() {
                std::hint::spin_loop();
            }
        }
    }
}

#[cfg(test)]
mod tests;
