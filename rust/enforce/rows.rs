//! The statistics rows as the data path counts them: per row, (packets, bytes) by colour and
//! by outcome, each pair packed in one u64 so that a row takes 96 bytes, not 192. Each field
//! has a guard bit above it: a count that reaches one (8.4 million packets, 512 GiB) hands it
//! over to an exact overflow table, so the counts stay exact at the cost of one test a packet.

use std::ops::Range;

use bytemuck::Zeroable;
use rustc_hash::FxHashMap;

use super::stats::QosCounters;
use super::{Outcome, OUTCOMES};
use crate::memory::prefetch;
use crate::meter::Color;

/// Bytes in the low 39 bits, then their guard bit; packets in the next 23, then theirs (the
/// top bit). A packet adds less than 2^32 bytes, so a field never carries past its guard.
const BYTE_BITS: u32 = 39;
const PACKET_SHIFT: u32 = BYTE_BITS + 1;
const PACKET_BITS: u32 = 23;
const BYTE_GUARD: u64 = 1 << BYTE_BITS;
const PACKET_GUARD: u64 = 1 << (PACKET_SHIFT + PACKET_BITS);
const GUARDS: u64 = BYTE_GUARD | PACKET_GUARD;
const PACKET_SHIFT_MASK: u64 = (1 << PACKET_SHIFT) - 1;

/// A row's pairs: the colours, then the outcomes (`Pass` first: with the colours, the first 32
/// bytes, which never straddle a cache line).
const PAIRS: usize = 3 + OUTCOMES;

/// One row: its pairs, packed. Packets in are not counted apart: each has a colour or was
/// dropped by the classifier, never both.
#[repr(C, align(32))]
#[derive(Debug, Clone, Copy, Zeroable)]
struct PackedRow([u64; PAIRS]);

const _: () = assert!(std::mem::size_of::<PackedRow>() == 96);

/// Packets in the low 64 bits, bytes in the high: what a pair carried over its packed fields.
type Wide = u128;

/// Every statistics row, by row number (see `Enforcer::rows`).
#[derive(Debug, Default)]
pub(super) struct StatsRows {
    packed: Vec<PackedRow>,
    /// By row, what its pairs carried over: empty but for rows past millions of packets.
    overflow: FxHashMap<u32, [Wide; PAIRS]>,
}

impl StatsRows {
    /// `len` rows, zero.
    pub(super) fn zeroed(len: usize) -> Self {
        StatsRows { packed: crate::memory::zeroed_vec(len), overflow: FxHashMap::default() }
    }

    pub(super) fn len(&self) -> usize {
        self.packed.len()
    }

    /// The bytes of the rows packets read at random.
    pub(super) fn state_bytes(&self) -> usize {
        std::mem::size_of_val(self.packed.as_slice())
    }

    /// A new row at the end, zero; its number.
    pub(super) fn push_zeroed(&mut self) -> usize {
        self.packed.push(PackedRow::zeroed());
        self.packed.len() - 1
    }

    #[inline]
    pub(super) fn prefetch(&self, row: usize) {
        prefetch(&self.packed[row]);
    }

    #[inline]
    pub(super) fn count_color(&mut self, row: usize, color: Color, bytes: u32) {
        self.count_pairs(row, [color as usize], bytes);
    }

    #[inline]
    pub(super) fn count_outcome(&mut self, row: usize, outcome: Outcome, bytes: u32) {
        self.count_pairs(row, [3 + outcome as usize], bytes);
    }

    /// A packet whose colour and outcome are known at once.
    #[inline]
    pub(super) fn count(&mut self, row: usize, color: Color, outcome: Outcome, bytes: u32) {
        self.count_pairs(row, [color as usize, 3 + outcome as usize], bytes);
    }

    /// One packet of `bytes` into pairs `pairs` of `row`: an add each, then one branch, never
    /// taken but when a field reached its guard bit.
    #[inline(always)]
    fn count_pairs<const N: usize>(&mut self, row: usize, pairs: [usize; N], bytes: u32) {
        let packed = &mut self.packed[row].0;
        let mut guards = 0;
        for pair in pairs {
            packed[pair] += 1 << PACKET_SHIFT | u64::from(bytes);
            guards |= packed[pair];
        }
        if guards & GUARDS != 0 {
            self.spill(row);
        }
    }

    /// Every field of `row` that reached its guard bit hands that bit's worth over to the
    /// overflow table.
    #[cold]
    #[inline(never)]
    fn spill(&mut self, row: usize) {
        let carried = self.overflow.entry(row as u32).or_insert([0; PAIRS]);
        for (pair, carried) in self.packed[row].0.iter_mut().zip(carried) {
            *carried += Wide::from((*pair & PACKET_GUARD) >> PACKET_SHIFT) | Wide::from(*pair & BYTE_GUARD) << 64;
            *pair &= !GUARDS;
        }
    }

    /// Row `row`'s pairs, whole.
    fn pairs(&self, row: usize) -> [Wide; PAIRS] {
        let mut pairs = self.packed[row].0.map(|pair| Wide::from(pair >> PACKET_SHIFT) | Wide::from(pair & (PACKET_SHIFT_MASK)) << 64);
        if let Some(carried) = self.overflow.get(&(row as u32)) {
            for (pair, carried) in pairs.iter_mut().zip(carried) {
                *pair += carried;
            }
        }
        pairs
    }

    pub(super) fn counters(&self, row: usize) -> QosCounters {
        let pairs = self.pairs(row);
        let (colors, outcomes) = pairs.split_at(3);
        let colors: [Wide; 3] = colors.try_into().expect("three colours");
        let outcomes: [Wide; OUTCOMES] = outcomes.try_into().expect("every outcome");
        let in_total = colors.iter().sum::<Wide>() + outcomes[Outcome::DropClassifier as usize];
        QosCounters {
            packets: packets(in_total),
            bytes: bytes(in_total),
            color_packets: colors.map(packets),
            color_bytes: colors.map(bytes),
            outcome_packets: outcomes.map(packets),
            outcome_bytes: outcomes.map(bytes),
        }
    }

    /// The counters of rows `rows`, for tests to compare.
    #[cfg(test)]
    pub(super) fn counters_of(&self, rows: Range<usize>) -> Vec<QosCounters> {
        rows.map(|row| self.counters(row)).collect()
    }

    /// Rows `rows`, zero.
    pub(super) fn zero(&mut self, rows: Range<usize>) {
        self.packed[rows.clone()].fill(PackedRow::zeroed());
        self.overflow.retain(|&row, _| !rows.contains(&(row as usize)));
    }
}

fn packets(pair: Wide) -> u64 {
    pair as u64
}

fn bytes(pair: Wide) -> u64 {
    (pair >> 64) as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A row near its fields' limits counts on exactly, across the spill, until it is zeroed.
    #[test]
    fn pairs_past_their_packed_fields_count_exactly() {
        let mut rows = StatsRows::zeroed(4);
        rows.packed[1].0[3 + Outcome::Pass as usize] = ((PACKET_GUARD >> PACKET_SHIFT) - 2) << PACKET_SHIFT | (BYTE_GUARD - 10);
        for _ in 0..3 {
            rows.count_outcome(1, Outcome::Pass, u32::MAX);
        }
        let expected = |rows: &StatsRows, row| {
            let counters = rows.counters(row);
            assert_eq!(counters.outcome_packets[Outcome::Pass as usize], (PACKET_GUARD >> PACKET_SHIFT) + 1);
            assert_eq!(counters.outcome_bytes[Outcome::Pass as usize], BYTE_GUARD - 10 + 3 * u64::from(u32::MAX));
        };
        expected(&rows, 1);
        assert!(rows.packed[1].0.iter().all(|pair| pair & GUARDS == 0));
        rows.zero(1..2);
        assert_eq!(rows.counters(1), QosCounters::default());
        assert!(rows.overflow.is_empty());
    }

    #[test]
    fn counters_add_colours_and_classifier_drops() {
        let mut rows = StatsRows::zeroed(1);
        rows.count(0, Color::Yellow, Outcome::Pass, 100);
        rows.count_outcome(0, Outcome::DropClassifier, 60);
        let counters = rows.counters(0);
        assert_eq!((counters.packets, counters.bytes), (2, 160));
        assert_eq!(counters.color_bytes, [0, 100, 0]);
    }
}
