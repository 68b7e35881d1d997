//! A log-linear histogram of u64 samples (queueing delays in ns): quantiles within 1/128 of the
//! true value in bounded memory, whatever the number of samples.
//!
//! Values below 64 get a bucket each; above, every power of two is cut into 64 equal buckets,
//! so a bucket is at most 1/64 of its lower edge wide. A quantile is reported as the middle of
//! the bucket holding it (kept within the exact minimum and maximum), which is off by at most
//! half a bucket: relative error <= 1/128 (0.78%). The bucket array grows only up to the largest
//! value seen: about 5 KB for microsecond delays, 13 KB for seconds, 30 KB at most.
//!
//! For export as a Prometheus histogram it also keeps the exact sum of the samples and counts
//! the samples at or below an edge: exactly where the edge is the top of a bucket (every value
//! below 64, and `2^k - 1` or `(64 + s) x 2^j - 1` above), else leaving out the bucket that
//! straddles the edge (samples within 1/64 below it).

const SUB_BITS: u32 = 6;
const SUB_BUCKETS: usize = 1 << SUB_BITS;

/// The cells before the buckets: the sample count, the exact sum (low and high words), the
/// smallest and the largest sample.
const TOTAL: usize = 0;
const SUM_LOW: usize = 1;
const SUM_HIGH: usize = 2;
const MIN: usize = 3;
const MAX: usize = 4;
const HEADER: usize = 5;

/// Empty, it holds no allocation and takes 16 bytes: a port has a histogram for each of its
/// thousands of queues, most of them idle. Its figures sit in the allocation of its buckets,
/// which every sample touches anyway.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LogHistogram {
    /// [`HEADER`] cells, then the bucket counts; empty before the first sample.
    cells: Box<[u64]>,
}

const _: () = assert!(std::mem::size_of::<LogHistogram>() == 16);

impl LogHistogram {
    pub fn new() -> Self {
        Self::default()
    }

    #[inline]
    pub fn record(&mut self, value: u64) {
        let bucket = bucket_index(value);
        if HEADER + bucket >= self.cells.len() {
            // A whole power of two at a time: delays that creep up one bucket after another
            // (a queue building) would otherwise grow the array, and copy it, on most samples.
            self.grow(HEADER + (bucket | (SUB_BUCKETS - 1)) + 1);
        }
        let (header, buckets) = self.cells.split_at_mut(HEADER);
        let header: &mut [u64; HEADER] = header.try_into().expect("grown past the header");
        buckets[bucket] += 1;
        header[MIN] = if header[TOTAL] == 0 { value } else { header[MIN].min(value) };
        header[MAX] = header[MAX].max(value);
        header[TOTAL] += 1;
        let (low, carried) = header[SUM_LOW].overflowing_add(value);
        (header[SUM_LOW], header[SUM_HIGH]) = (low, header[SUM_HIGH] + u64::from(carried));
    }

    /// Room for `len` cells, the new ones zero.
    #[cold]
    fn grow(&mut self, len: usize) {
        let mut cells = std::mem::take(&mut self.cells).into_vec();
        cells.resize(len, 0);
        self.cells = cells.into_boxed_slice();
    }

    fn cell(&self, at: usize) -> u64 {
        self.cells.get(at).copied().unwrap_or(0)
    }

    fn counts(&self) -> &[u64] {
        self.cells.get(HEADER..).unwrap_or(&[])
    }

    /// Adds every sample of `other`, as if each had been recorded here.
    pub fn merge(&mut self, other: &LogHistogram) {
        if other.count() == 0 {
            return;
        }
        let (empty, sum) = (self.count() == 0, self.sum() + other.sum());
        if other.cells.len() > self.cells.len() {
            self.grow(other.cells.len());
        }
        let cells = &mut self.cells;
        for (total, &count) in cells[HEADER..].iter_mut().zip(other.counts()) {
            *total += count;
        }
        cells[MIN] = if empty { other.min() } else { cells[MIN].min(other.min()) };
        cells[MAX] = cells[MAX].max(other.max());
        cells[TOTAL] += other.count();
        (cells[SUM_LOW], cells[SUM_HIGH]) = (sum as u64, (sum >> 64) as u64);
    }

    pub fn count(&self) -> u64 {
        self.cell(TOTAL)
    }

    /// The exact sum of the samples.
    pub fn sum(&self) -> u128 {
        u128::from(self.cell(SUM_HIGH)) << 64 | u128::from(self.cell(SUM_LOW))
    }

    /// The samples at or below `edge`: exact where `edge` is the top of a bucket
    /// ([`is_exact_edge`]), at or above the smallest sample or the largest; elsewhere the
    /// samples of the bucket holding `edge` are left out (all of them within 1/64 below `edge`).
    pub fn count_at_or_below(&self, edge: u64) -> u64 {
        if self.count() == 0 || edge < self.min() {
            return 0;
        }
        if edge >= self.max() {
            return self.count();
        }
        let index = bucket_index(edge);
        let whole_buckets = if is_exact_edge(edge) { index + 1 } else { index };
        let counts = self.counts();
        counts[..whole_buckets.min(counts.len())].iter().sum()
    }

    /// The exact smallest sample (0 when empty).
    pub fn min(&self) -> u64 {
        self.cell(MIN)
    }

    /// The exact largest sample (0 when empty).
    pub fn max(&self) -> u64 {
        self.cell(MAX)
    }

    /// The nearest-rank quantile `numerator/denominator` (the smallest sample with at least that
    /// share of samples at or below it), within 1/128 of it; `None` when empty.
    pub fn quantile(&self, numerator: u64, denominator: u64) -> Option<u64> {
        let total = self.count();
        if total == 0 {
            return None;
        }
        let rank = (u128::from(total) * u128::from(numerator)).div_ceil(u128::from(denominator.max(1)));
        let rank = (rank as u64).clamp(1, total);
        let mut seen = 0;
        for (index, &count) in self.counts().iter().enumerate() {
            seen += count;
            if seen >= rank {
                return Some(bucket_middle(index).clamp(self.min(), self.max()));
            }
        }
        Some(self.max())
    }

    pub fn p50(&self) -> Option<u64> {
        self.quantile(1, 2)
    }

    pub fn p99(&self) -> Option<u64> {
        self.quantile(99, 100)
    }

    pub fn p999(&self) -> Option<u64> {
        self.quantile(999, 1000)
    }

    pub fn memory_bytes(&self) -> usize {
        std::mem::size_of_val(self) + std::mem::size_of_val(&*self.cells)
    }
}

#[inline]
fn bucket_index(value: u64) -> usize {
    if value < SUB_BUCKETS as u64 {
        return value as usize;
    }
    let top_bit = 63 - value.leading_zeros();
    let group = (top_bit - SUB_BITS + 1) as usize;
    let sub = ((value >> (top_bit - SUB_BITS)) as usize) & (SUB_BUCKETS - 1);
    group * SUB_BUCKETS + sub
}

/// Whether `edge` is the top of a bucket, where [`LogHistogram::count_at_or_below`] is exact.
pub fn is_exact_edge(edge: u64) -> bool {
    let (low, width) = bucket_bounds(bucket_index(edge));
    edge - low == width - 1
}

/// The lower edge and width of a bucket.
fn bucket_bounds(index: usize) -> (u64, u64) {
    let group = index / SUB_BUCKETS;
    if group == 0 {
        return (index as u64, 1);
    }
    let sub = (index % SUB_BUCKETS) as u64;
    let shift = group as u32 - 1;
    ((SUB_BUCKETS as u64 + sub) << shift, 1 << shift)
}

fn bucket_middle(index: usize) -> u64 {
    let (low, width) = bucket_bounds(index);
    low + width / 2
}

#[cfg(test)]
pub(super) fn bounds_of(value: u64) -> (u64, u64) {
    bucket_bounds(bucket_index(value))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn histogram_of(samples: &[u64]) -> LogHistogram {
        let mut histogram = LogHistogram::new();
        for &sample in samples {
            histogram.record(sample);
        }
        histogram
    }

    fn brute_at_or_below(samples: &[u64], edge: u64) -> u64 {
        samples.iter().filter(|&&sample| sample <= edge).count() as u64
    }

    /// Samples spread over many powers of two: `top` bits, shifted right by up to `spread`.
    fn samples() -> impl Strategy<Value = Vec<u64>> {
        (1u32..48, 0u32..40)
            .prop_flat_map(|(top, spread)| proptest::collection::vec((0..1u64 << top, 0..=spread), 1..2000))
            .prop_map(|pairs| pairs.into_iter().map(|(value, shift)| value >> shift).collect())
    }

    #[test]
    fn exact_edges_are_the_tops_of_buckets() {
        let tops: Vec<u64> = (0..200).filter(|&edge| is_exact_edge(edge)).collect();
        let expected: Vec<u64> = (0..128).chain((129..200).step_by(2)).collect();
        assert_eq!(tops, expected);
        for k in 1..64 {
            assert!(is_exact_edge((1 << k) - 1), "2^{k} - 1");
        }
        for k in 7..64 {
            assert!(!is_exact_edge(1 << k), "2^{k} is the bottom of a bucket 2^{} wide", k - 6);
        }
        assert!(is_exact_edge(u64::MAX));
    }

    #[test]
    fn an_empty_histogram_counts_nothing() {
        let empty = LogHistogram::new();
        assert_eq!((empty.count_at_or_below(0), empty.count_at_or_below(u64::MAX), empty.sum()), (0, 0, 0));
    }

    #[test]
    fn the_sum_is_exact_past_u64() {
        let mut merged = histogram_of(&[u64::MAX, u64::MAX, 3]);
        merged.merge(&histogram_of(&[u64::MAX, 5]));
        assert_eq!(merged.sum(), 3 * u128::from(u64::MAX) + 8);
        assert_eq!(merged.count_at_or_below(u64::MAX - 1), 2);
    }

    proptest! {
        #[test]
        fn counts_at_or_below_agree_with_a_brute_force_count(samples in samples(), picks in proptest::collection::vec(any::<u64>(), 1..40)) {
            let histogram = histogram_of(&samples);
            prop_assert_eq!(histogram.sum(), samples.iter().map(|&s| u128::from(s)).sum::<u128>());
            let top = samples.iter().max().unwrap() * 2 + 2;
            // Edges at the samples, next to them and anywhere below twice the largest.
            let edges = samples.iter().take(40).flat_map(|&s| [s, s.saturating_sub(1), s + 1]).chain(picks.iter().map(|p| p % top));
            for edge in edges {
                let (counted, exact) = (histogram.count_at_or_below(edge), brute_at_or_below(&samples, edge));
                if is_exact_edge(edge) {
                    prop_assert_eq!(counted, exact, "edge {}", edge);
                } else {
                    // Only the samples of the bucket straddling the edge, within 1/64 below it, are left out.
                    let (low, _) = bucket_bounds(bucket_index(edge));
                    let straddling = samples.iter().filter(|&&s| (low..=edge).contains(&s)).count() as u64;
                    prop_assert!(counted <= exact && exact - counted <= straddling, "edge {}: {} of {}", edge, counted, exact);
                    prop_assert!((edge - low) * 64 <= edge);
                }
            }
        }

        #[test]
        fn merging_keeps_counts_and_sum(samples in samples(), cut in any::<prop::sample::Index>()) {
            let (first, second) = samples.split_at(cut.index(samples.len()));
            let mut merged = histogram_of(first);
            merged.merge(&histogram_of(second));
            prop_assert_eq!(merged, histogram_of(&samples));
        }
    }
}
