//! Several captures read as one, in timestamp order, as `mergecap` merges them.
//!
//! A k-way merge: each capture is read a small batch at a time, and the earliest packet at the
//! head of any capture goes next. Of equal timestamps, the capture given last goes first, as
//! in mergecap (its `is_earlier` is true for equal times, so a later file displaces an earlier
//! one); a capture's own packets keep their order, and a capture whose time goes backwards is
//! not sorted, as with mergecap. Memory is one small batch per capture plus the batch being made.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::io::Read;

use super::{Limits, PcapReader};
use crate::batch::PacketBuffers;
use crate::error::CoreError;

/// What each capture reads at a time when merged: small, since every capture holds one.
const SOURCE_LIMITS: Limits = Limits { packets: 4096, bytes: 1 << 20 };

/// An error of the merge, with the index of the capture it comes from.
pub type MergeError = (usize, CoreError);

struct Source<R> {
    reader: PcapReader<R>,
    batch: PacketBuffers,
    /// The next packet of `batch` to hand out.
    next: usize,
}

impl<R: Read> Source<R> {
    /// Reads the next batch once this one is used up; false at the end of the capture.
    fn refill(&mut self) -> crate::error::Result<bool> {
        if self.next == self.batch.len() {
            self.batch = self.reader.next_batch(SOURCE_LIMITS, SOURCE_LIMITS.bytes + (SOURCE_LIMITS.bytes >> 2))?;
            self.next = 0;
        }
        Ok(!self.batch.is_empty())
    }

    /// Copies the next packet to `out`.
    fn hand_out(&mut self, out: &mut PacketBuffers) {
        let (batch, at) = (&self.batch, self.next);
        let start = batch.offsets[at] as usize;
        let bytes = &batch.data[start..start + batch.lengths[at] as usize];
        out.push(bytes, batch.wire_lengths[at], batch.timestamps_ns[at], batch.link_types[at]);
        self.next += 1;
    }
}

/// Reads captures as one stream of batches in timestamp order. With one capture, its batches
/// pass through as they are read (no packet byte is copied).
pub struct Merger<R> {
    sources: Vec<Source<R>>,
    /// (timestamp of the head packet, capture index) of every capture with packets left: the
    /// earliest first, and of equal ones the last capture.
    heads: BinaryHeap<Reverse<(i64, Reverse<usize>)>>,
    started: bool,
}

impl<R: Read> Merger<R> {
    pub fn new(readers: Vec<PcapReader<R>>) -> Self {
        let sources = readers.into_iter().map(|reader| Source { reader, batch: PacketBuffers::default(), next: 0 }).collect();
        Merger { sources, heads: BinaryHeap::new(), started: false }
    }

    pub fn readers(&self) -> impl Iterator<Item = &PcapReader<R>> {
        self.sources.iter().map(|source| &source.reader)
    }

    /// The next batch within `limits`; an empty batch means every capture has ended.
    pub fn next_batch(&mut self, limits: Limits, capacity: usize) -> Result<PacketBuffers, MergeError> {
        if let [only] = self.sources.as_mut_slice() {
            return only.reader.next_batch(limits, capacity).map_err(|err| (0, err));
        }
        if !self.started {
            self.started = true;
            for index in 0..self.sources.len() {
                self.push_head(index)?;
            }
        }
        let mut out = PacketBuffers { data: Vec::with_capacity(capacity.min(limits.bytes)), ..Default::default() };
        while out.len() < limits.packets && out.data.len() < limits.bytes {
            let Some(Reverse((_, Reverse(index)))) = self.heads.pop() else { break };
            self.sources[index].hand_out(&mut out);
            self.push_head(index)?;
        }
        Ok(out)
    }

    /// Puts capture `index`'s next packet among the heads, reading more of it if needed.
    fn push_head(&mut self, index: usize) -> Result<(), MergeError> {
        let source = &mut self.sources[index];
        if source.refill().map_err(|err| (index, err))? {
            self.heads.push(Reverse((source.batch.timestamps_ns[source.next], Reverse(index))));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pcap::tests::pcap_file;

    fn merged(files: &[Vec<u8>], limits: Limits) -> Vec<(i64, Vec<u8>)> {
        let readers = files.iter().map(|file| PcapReader::new(file.as_slice()).unwrap()).collect();
        let mut merger = Merger::new(readers);
        let mut out = Vec::new();
        loop {
            let batch = merger.next_batch(limits, 64).unwrap();
            if batch.is_empty() {
                return out;
            }
            assert!(batch.len() <= limits.packets);
            let view = batch.view();
            out.extend((0..batch.len()).map(|i| (batch.timestamps_ns[i], view.packet(i).to_vec())));
        }
    }

    #[test]
    fn packets_come_in_time_order_ties_last_file_first() {
        let a = pcap_file(false, true, 100, 1, &[(0, 1, &[1], 1), (0, 3, &[3], 1), (0, 5, &[5], 1)]);
        let b = pcap_file(false, true, 100, 1, &[(0, 2, &[2], 1), (0, 3, &[33], 1), (0, 9, &[9], 1)]);
        let out = merged(&[a, b], Limits { packets: 2, bytes: usize::MAX });
        let expected: Vec<(i64, Vec<u8>)> = vec![(1, vec![1]), (2, vec![2]), (3, vec![33]), (3, vec![3]), (5, vec![5]), (9, vec![9])];
        assert_eq!(out, expected);
    }

    #[test]
    fn a_capture_whose_time_goes_back_keeps_its_order() {
        let a = pcap_file(false, true, 100, 1, &[(0, 5, &[5], 1), (0, 1, &[1], 1)]);
        let b = pcap_file(false, true, 100, 1, &[(0, 3, &[3], 1)]);
        let order: Vec<Vec<u8>> = merged(&[a, b], Limits::WHOLE_FILE).into_iter().map(|(_, bytes)| bytes).collect();
        assert_eq!(order, vec![vec![3], vec![5], vec![1]]);
    }

    #[test]
    fn many_small_batches_lose_nothing() {
        let records =
            |offset: u32| -> Vec<(u32, u32, Vec<u8>)> { (0..10_000u32).map(|i| (0, i * 3 + offset, vec![(i % 251) as u8; (i % 40) as usize])).collect() };
        let files: Vec<Vec<u8>> = (0..3)
            .map(|offset| {
                let owned = records(offset);
                let refs: Vec<_> = owned.iter().map(|(s, f, d)| (*s, *f, d.as_slice(), d.len() as u32)).collect();
                pcap_file(false, true, 100, 1, &refs)
            })
            .collect();
        let out = merged(&files, Limits { packets: 1000, bytes: 10_000 });
        assert_eq!(out.len(), 30_000);
        assert!(out.windows(2).all(|pair| pair[0].0 < pair[1].0));
    }

    #[test]
    fn errors_name_their_capture() {
        let good = pcap_file(false, true, 100, 1, &[(0, 1, &[1], 1)]);
        let mut bad = pcap_file(false, true, 100, 1, &[(0, 1, &[1], 1)]);
        bad[24 + 10] = 0xff; // a captured length of 16 MiB, beyond any snap length
        let readers = vec![PcapReader::new(good.as_slice()).unwrap(), PcapReader::new(bad.as_slice()).unwrap()];
        let (index, err) = Merger::new(readers).next_batch(Limits::WHOLE_FILE, 0).unwrap_err();
        assert_eq!(index, 1);
        assert!(err.to_string().contains("byte offset 24, packet 1: record of 16711681 bytes"), "{err}");
    }
}
