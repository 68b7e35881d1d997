//! `Engine::process` on one thread or several (docs/qos.md, "Several threads").
//!
//! A batch is parsed records, or a capture parsed as it goes: a chunk at a time, so that its
//! records are still in cache when they are classified and enforced, and a capture's records
//! never fill memory. On several threads, classification (with parsing) is spread over the
//! threads; enforcement is not. The batch is cut into pieces that any thread may take, in
//! order; one enforcer, on the calling thread, takes the pieces' verdicts in order and meters
//! and shapes every packet as one thread would. When the piece it needs has not been taken
//! yet, the enforcer classifies it itself, so no thread waits for another unless that one is
//! already working on the piece it needs. The rows and statistics are those of one thread by
//! construction (one state, packets in arrival order, a port included), and two threads run
//! about as fast as the slower half, enforcement or the rest, allows.

use bytemuck::Zeroable;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use crate::batch::BatchView;
use crate::enforce::{Chunks, Enforcer, Processed, QosSpec, QosStats, StatsKey, CHUNK};
use crate::error::CoreError;
use crate::parse::{parse_range, PacketInfo, ParseConfig};
use crate::verdict::Verdict;

/// Packets a thread takes at a time: a few of the enforcer's chunks, so that taking a piece
/// costs nothing next to its work and a chunk never spans two pieces.
const PIECE: usize = 4096;
const _: () = assert!(PIECE.is_multiple_of(CHUNK), "a chunk never spans two pieces");

/// Batches shorter than this are processed on the calling thread alone: waking the pool costs
/// more than it saves on them.
const INLINE_BELOW: usize = 2 * PIECE;

/// What a batch is made of.
#[derive(Clone, Copy)]
pub enum Packets<'a> {
    /// Records `isolane.parse` made.
    Records(&'a [PacketInfo]),
    /// A capture, parsed as it is processed.
    Capture { batch: &'a BatchView<'a>, config: &'a ParseConfig, timestamps_ns: &'a [i64] },
}

impl<'a> Packets<'a> {
    pub fn len(&self) -> usize {
        match self {
            Packets::Records(records) => records.len(),
            Packets::Capture { batch, .. } => batch.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The records of packets `first..first + len`: the batch's own, or parsed into `scratch`.
    fn records<'s>(&self, first: usize, len: usize, scratch: &'s mut [PacketInfo]) -> &'s [PacketInfo]
    where
        'a: 's,
    {
        match *self {
            Packets::Records(records) => &records[first..first + len],
            Packets::Capture { batch, config, timestamps_ns } => {
                let scratch = &mut scratch[..len];
                parse_range(batch, config, timestamps_ns, first, scratch);
                scratch
            }
        }
    }
}

pub(super) struct QosPipeline {
    enforcer: Enforcer,
    threads: usize,
}

impl QosPipeline {
    pub(super) fn new(threads: usize) -> Result<Self, CoreError> {
        if threads == 0 {
            return Err(CoreError::InvalidArgument("threads must be at least 1".to_string()));
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
    pub(super) fn retarget(&mut self, names: &[Arc<str>]) {
        self.enforcer.retarget(names);
    }

    pub(super) fn stats(&self) -> Vec<(StatsKey, QosStats)> {
        self.enforcer.stats()
    }

    pub(super) fn drain(&mut self) {
        self.enforcer.drain();
    }

    pub(super) fn enforcer_mut(&mut self) -> &mut Enforcer {
        &mut self.enforcer
    }

    /// Classifies (with `classify`) and enforces a batch, appending packet `i`'s result to
    /// `out` as its `i`-th new row.
    pub(super) fn process(&mut self, packets: Packets<'_>, out: &mut Vec<Processed>, classify: &(impl Fn(&[PacketInfo], &mut [Verdict]) + Sync)) {
        let pool = if self.threads == 1 || packets.len() < INLINE_BELOW { None } else { crate::pool::thread_pool(self.threads) };
        match pool {
            Some(pool) => pool.install(|| self.process_on_pool(packets, out, classify)),
            None => self.enforcer.enforce_chunks(&mut Inline { packets, classify }, out),
        }
    }

    /// The enforcer on this thread, the pool's other threads classifying ahead of it.
    fn process_on_pool(&mut self, packets: Packets<'_>, out: &mut Vec<Processed>, classify: &(impl Fn(&[PacketInfo], &mut [Verdict]) + Sync)) {
        let pieces = Pieces::new(packets, classify);
        rayon::scope(|scope| {
            for _ in 1..self.threads {
                scope.spawn(|_| while pieces.classify_next() {});
            }
            self.enforcer.enforce_chunks(&mut Ahead { pieces: &pieces, current: None }, out);
        });
    }
}

/// A batch classified a chunk at a time on the enforcer's thread.
struct Inline<'p, C> {
    packets: Packets<'p>,
    classify: &'p C,
}

impl<C: Fn(&[PacketInfo], &mut [Verdict])> Chunks for Inline<'_, C> {
    fn packets(&self) -> usize {
        self.packets.len()
    }

    fn chunk<'s>(&'s mut self, first: usize, len: usize, records: &'s mut [PacketInfo], verdicts: &'s mut [Verdict]) -> (&'s [PacketInfo], &'s [Verdict]) {
        let records = self.packets.records(first, len, records);
        let verdicts = &mut verdicts[..len];
        (self.classify)(records, verdicts);
        (records, verdicts)
    }
}

/// A piece's records (a capture's, parsed; none for records given) and verdicts.
#[derive(Default)]
struct Piece {
    records: Vec<PacketInfo>,
    verdicts: Vec<Verdict>,
}

/// A batch's pieces: taken in order by whichever thread comes first, and handed to the
/// enforcer once classified.
struct Pieces<'a, C> {
    packets: Packets<'a>,
    classify: &'a C,
    /// The first piece no thread has taken.
    next: AtomicUsize,
    done: Vec<Mutex<Option<Piece>>>,
    /// Pieces the enforcer is through with, to be filled again (no allocation per piece).
    spare: Mutex<Vec<Piece>>,
    /// A thread panicked while classifying: the piece it took will never come.
    failed: AtomicBool,
}

impl<'a, C: Fn(&[PacketInfo], &mut [Verdict]) + Sync> Pieces<'a, C> {
    fn new(packets: Packets<'a>, classify: &'a C) -> Self {
        let done = (0..packets.len().div_ceil(PIECE)).map(|_| Mutex::new(None)).collect();
        Pieces { packets, classify, next: AtomicUsize::new(0), done, spare: Mutex::default(), failed: AtomicBool::new(false) }
    }

    /// Takes and classifies the next piece; false once every piece is taken.
    fn classify_next(&self) -> bool {
        let index = self.next.fetch_add(1, Ordering::Relaxed);
        let Some(slot) = self.done.get(index) else { return false };
        let first = index * PIECE;
        let len = PIECE.min(self.packets.len() - first);
        let mut piece = lock(&self.spare).pop().unwrap_or_default();
        let flag = PanicFlag(&self.failed);
        if let Packets::Capture { .. } = self.packets {
            piece.records.resize(len, PacketInfo::zeroed());
        }
        piece.verdicts.resize(len, Verdict::zeroed());
        let records = self.packets.records(first, len, &mut piece.records);
        (self.classify)(records, &mut piece.verdicts);
        drop(flag);
        *lock(slot) = Some(piece);
        true
    }

    /// Piece `index`, classifying others (or, once all are taken, waiting) until it is done.
    fn take(&self, index: usize) -> Piece {
        loop {
            if let Some(piece) = lock(&self.done[index]).take() {
                return piece;
            }
            // Taken by another thread, which is classifying it now (or failed to: its panic
            // ends the pool's scope once this thread stops waiting).
            assert!(!self.failed.load(Ordering::Acquire), "a thread classifying for the enforcer panicked");
            if !self.classify_next() {
                std::hint::spin_loop();
            }
        }
    }
}

/// The enforcer's side of [`Pieces`]: the piece it is in.
struct Ahead<'p, 'a, C> {
    pieces: &'p Pieces<'a, C>,
    current: Option<(usize, Piece)>,
}

impl<C: Fn(&[PacketInfo], &mut [Verdict]) + Sync> Chunks for Ahead<'_, '_, C> {
    fn packets(&self) -> usize {
        self.pieces.packets.len()
    }

    fn chunk<'s>(&'s mut self, first: usize, len: usize, _: &'s mut [PacketInfo], _: &'s mut [Verdict]) -> (&'s [PacketInfo], &'s [Verdict]) {
        let index = first / PIECE;
        if self.current.as_ref().is_none_or(|(current, _)| *current != index) {
            if let Some((_, done)) = self.current.take() {
                lock(&self.pieces.spare).push(done);
            }
            self.current = Some((index, self.pieces.take(index)));
        }
        let piece = &self.current.as_ref().expect("set above").1;
        let at = first - index * PIECE; // chunks never span pieces: PIECE is a multiple of CHUNK
        let records = match self.pieces.packets {
            Packets::Records(records) => &records[first..first + len],
            Packets::Capture { .. } => &piece.records[at..at + len],
        };
        (records, &piece.verdicts[at..at + len])
    }
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

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

#[cfg(test)]
mod tests;
