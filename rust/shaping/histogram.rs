//! A log-linear histogram of u64 samples (queueing delays in ns): quantiles within 1/128 of the
//! true value in bounded memory, whatever the number of samples.
//!
//! Values below 64 get a bucket each; above, every power of two is cut into 64 equal buckets,
//! so a bucket is at most 1/64 of its lower edge wide. A quantile is reported as the middle of
//! the bucket holding it (kept within the exact minimum and maximum), which is off by at most
//! half a bucket: relative error <= 1/128 (0.78%). The bucket array grows only up to the largest
//! value seen: about 5 KB for microsecond delays, 13 KB for seconds, 30 KB at most.

const SUB_BITS: u32 = 6;
const SUB_BUCKETS: usize = 1 << SUB_BITS;

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LogHistogram {
    counts: Vec<u64>,
    total: u64,
    min: u64,
    max: u64,
}

impl LogHistogram {
    pub fn new() -> Self {
        Self::default()
    }

    #[inline]
    pub fn record(&mut self, value: u64) {
        let index = bucket_index(value);
        if index >= self.counts.len() {
            // A whole power of two at a time: delays that creep up one bucket after another
            // (a queue building) would otherwise grow the array, and copy it, on most samples.
            self.counts.resize((index | (SUB_BUCKETS - 1)) + 1, 0);
        }
        self.counts[index] += 1;
        self.min = if self.total == 0 { value } else { self.min.min(value) };
        self.max = self.max.max(value);
        self.total += 1;
    }

    /// Adds every sample of `other`, as if each had been recorded here.
    pub fn merge(&mut self, other: &LogHistogram) {
        if other.total == 0 {
            return;
        }
        if other.counts.len() > self.counts.len() {
            self.counts.resize(other.counts.len(), 0);
        }
        for (sum, &count) in self.counts.iter_mut().zip(&other.counts) {
            *sum += count;
        }
        self.min = if self.total == 0 { other.min } else { self.min.min(other.min) };
        self.max = self.max.max(other.max);
        self.total += other.total;
    }

    pub fn count(&self) -> u64 {
        self.total
    }

    /// The exact smallest sample (0 when empty).
    pub fn min(&self) -> u64 {
        self.min
    }

    /// The exact largest sample (0 when empty).
    pub fn max(&self) -> u64 {
        self.max
    }

    /// The nearest-rank quantile `numerator/denominator` (the smallest sample with at least that
    /// share of samples at or below it), within 1/128 of it; `None` when empty.
    pub fn quantile(&self, numerator: u64, denominator: u64) -> Option<u64> {
        if self.total == 0 {
            return None;
        }
        let rank = (u128::from(self.total) * u128::from(numerator)).div_ceil(u128::from(denominator.max(1)));
        let rank = (rank as u64).clamp(1, self.total);
        let mut seen = 0;
        for (index, &count) in self.counts.iter().enumerate() {
            seen += count;
            if seen >= rank {
                return Some(bucket_middle(index).clamp(self.min, self.max));
            }
        }
        Some(self.max)
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
        std::mem::size_of::<Self>() + self.counts.capacity() * std::mem::size_of::<u64>()
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
