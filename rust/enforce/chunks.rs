//! How a batch reaches the enforcer: a chunk at a time, from records classified before or
//! classified just before each chunk is enforced (so that its records are still in cache).

use crate::parse::PacketInfo;
use crate::verdict::Verdict;

/// A batch's packets with their verdicts, handed to the enforcer a chunk at a time:
/// classified records, or a capture parsed and classified as it goes (`engine/pipeline.rs`).
pub trait Chunks {
    /// Packets in the batch.
    fn packets(&self) -> usize;

    /// Packets `first..first + len` (at most [`CHUNK`](super::CHUNK)) and their verdicts, in scratch space
    /// the source may fill and return (`records` and `verdicts` hold at least `len`).
    fn chunk<'s>(&'s mut self, first: usize, len: usize, records: &'s mut [PacketInfo], verdicts: &'s mut [Verdict]) -> (&'s [PacketInfo], &'s [Verdict]);
}

/// Records with their verdicts, handed over as they are.
pub(super) struct Given<'r> {
    pub(super) records: &'r [PacketInfo],
    pub(super) verdicts: &'r [Verdict],
}

impl Chunks for Given<'_> {
    fn packets(&self) -> usize {
        self.records.len()
    }

    fn chunk<'s>(&'s mut self, first: usize, len: usize, _: &'s mut [PacketInfo], _: &'s mut [Verdict]) -> (&'s [PacketInfo], &'s [Verdict]) {
        (&self.records[first..first + len], &self.verdicts[first..first + len])
    }
}

/// Records classified a chunk at a time by `classify`, just before they are enforced.
pub struct Classified<'r, C> {
    pub records: &'r [PacketInfo],
    pub classify: C,
}

impl<C: FnMut(&[PacketInfo], &mut [Verdict])> Chunks for Classified<'_, C> {
    fn packets(&self) -> usize {
        self.records.len()
    }

    fn chunk<'s>(&'s mut self, first: usize, len: usize, _: &'s mut [PacketInfo], verdicts: &'s mut [Verdict]) -> (&'s [PacketInfo], &'s [Verdict]) {
        let (records, verdicts) = (&self.records[first..first + len], &mut verdicts[..len]);
        (self.classify)(records, verdicts);
        (records, verdicts)
    }
}
