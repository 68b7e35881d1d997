//! A packet stream's time series per tenant and per class, for the pictures and the report of
//! a replay (docs/report.md, "Timeline"): bytes, packets and drops per time bin, the most
//! bytes in one burst window (sliding, as the burst detector's) ending inside each bin,
//! queueing delays at the port, and how long the shapers held each class's packets.
//!
//! Memory is bounded whatever the stream's length: at most [`MAX_BINS`] bins, each a power of
//! two of windows wide. When time runs past the last bin, neighbouring bins merge (sums add,
//! maxima take the larger) and bins double in width, so a peak seen at the window stays in the
//! series however coarse its bins become.

use std::collections::VecDeque;

use rustc_hash::FxHashMap;

use crate::shaping::LogHistogram;

/// Bins at most: enough for a picture a screen wide, small enough for thousands of series.
pub const MAX_BINS: usize = 512;

/// (tenant name, class id) of a class series; `None` for packets of no tenant, or the tenant's
/// packets in no class (as the statistics rows say).
pub type ClassKey = (Option<String>, Option<u16>);

/// Every tenant's series (by name) and every class's, as [`Timeline::snapshot`] gives them.
pub type Snapshot = (Vec<(Option<String>, Series)>, Vec<(ClassKey, Series)>);

/// One tenant's or class's series. Each array is empty until its first sample, then
/// [`MAX_BINS`] long.
#[derive(Debug, Clone, Default)]
pub struct Series {
    /// Bytes (as the policy counts them) and packets arriving in each bin.
    pub bytes: Vec<u64>,
    pub packets: Vec<u64>,
    /// Packets dropped in each bin, at any stage (the port's at their arrival there), and of
    /// those the ones the meters had coloured green: conforming to their contract.
    pub dropped: Vec<u64>,
    pub conforming_dropped: Vec<u64>,
    /// The most bytes that arrived in one window `(t - window, t]` ending at a packet's time `t`
    /// in the bin.
    pub peak_bytes: Vec<u64>,
    /// Packets the port started sending that reached it in the bin, their summed and largest
    /// queueing delays.
    pub delay_count: Vec<u64>,
    pub delay_sum_ns: Vec<u64>,
    pub delay_max_ns: Vec<u64>,
    /// The first and the last arrival.
    pub first_ns: Option<u64>,
    pub last_ns: u64,
    /// Shaper release minus arrival of every packet the shapers let through (0 when not held).
    pub hold_ns: LogHistogram,
    /// The packets of the window ending now (time, bytes) and their bytes.
    recent: VecDeque<(u64, u32)>,
    in_window: u64,
}

impl Series {
    fn arrive(&mut self, bin: usize, window_ns: u64, now_ns: u64, bytes: u32) {
        self.recent.push_back((now_ns, bytes));
        self.in_window += u64::from(bytes);
        while let Some(&(time, size)) = self.recent.front() {
            if time + window_ns > now_ns {
                break;
            }
            self.recent.pop_front();
            self.in_window -= u64::from(size);
        }
        let peaks = allocated(&mut self.peak_bytes);
        peaks[bin] = peaks[bin].max(self.in_window);
        allocated(&mut self.bytes)[bin] += u64::from(bytes);
        allocated(&mut self.packets)[bin] += 1;
        self.first_ns.get_or_insert(now_ns);
        self.last_ns = now_ns;
    }

    fn drop_at(&mut self, bin: usize, green: bool) {
        allocated(&mut self.dropped)[bin] += 1;
        if green {
            allocated(&mut self.conforming_dropped)[bin] += 1;
        }
    }

    fn depart(&mut self, bin: usize, delay_ns: u64) {
        allocated(&mut self.delay_count)[bin] += 1;
        let sums = allocated(&mut self.delay_sum_ns);
        sums[bin] = sums[bin].saturating_add(delay_ns);
        let maxima = allocated(&mut self.delay_max_ns);
        maxima[bin] = maxima[bin].max(delay_ns);
    }

    /// Merges bins pairwise: bin `i` becomes bins `2i` and `2i + 1`.
    fn halve(&mut self) {
        for array in [&mut self.bytes, &mut self.packets, &mut self.dropped, &mut self.conforming_dropped, &mut self.delay_count, &mut self.delay_sum_ns] {
            merge_pairs(array, |a, b| a + b);
        }
        for array in [&mut self.peak_bytes, &mut self.delay_max_ns] {
            merge_pairs(array, u64::max);
        }
    }
}

/// `array`, made [`MAX_BINS`] zeros long at its first use.
fn allocated(array: &mut Vec<u64>) -> &mut Vec<u64> {
    if array.is_empty() {
        array.resize(MAX_BINS, 0);
    }
    array
}

fn merge_pairs(array: &mut [u64], merge: impl Fn(u64, u64) -> u64) {
    if array.is_empty() {
        return;
    }
    let half = array.len() / 2;
    for i in 0..half {
        array[i] = merge(array[2 * i], array[2 * i + 1]);
    }
    array[half..].fill(0);
}

/// The series of every tenant and class seen, by name, so that a policy update keeps them.
#[derive(Debug, Clone)]
pub struct Timeline {
    window_ns: u64,
    /// Bin 0's start: the first sample's time.
    start_ns: Option<u64>,
    bin_ns: u64,
    /// The latest time of any sample.
    end_ns: u64,
    tenants: Vec<(Option<String>, Series)>,
    classes: Vec<(ClassKey, Series)>,
    /// By statistics row (the enforcer's): its tenant's series and its class's.
    rows: Vec<(usize, usize)>,
}

impl Timeline {
    /// Series at the window `window_ns` (at least 1 ns), for the rows `row_keys` names.
    pub fn new(window_ns: u64, row_keys: &[ClassKey]) -> Timeline {
        let window_ns = window_ns.max(1);
        let mut timeline = Timeline { window_ns, start_ns: None, bin_ns: window_ns, end_ns: 0, tenants: Vec::new(), classes: Vec::new(), rows: Vec::new() };
        timeline.bind(row_keys);
        timeline
    }

    /// Follows the rows of a new policy: a row whose tenant and class were seen before goes on
    /// with their series.
    pub fn bind(&mut self, row_keys: &[ClassKey]) {
        let mut tenants: FxHashMap<Option<String>, usize> = self.tenants.iter().enumerate().map(|(i, (name, _))| (name.clone(), i)).collect();
        let mut classes: FxHashMap<ClassKey, usize> = self.classes.iter().enumerate().map(|(i, (key, _))| (key.clone(), i)).collect();
        self.rows = row_keys
            .iter()
            .map(|key| {
                let tenant = *tenants.entry(key.0.clone()).or_insert_with(|| {
                    self.tenants.push((key.0.clone(), Series::default()));
                    self.tenants.len() - 1
                });
                let class = *classes.entry(key.clone()).or_insert_with(|| {
                    self.classes.push((key.clone(), Series::default()));
                    self.classes.len() - 1
                });
                (tenant, class)
            })
            .collect();
    }

    /// A packet of statistics row `row` arrived at `now_ns` (times never go back).
    #[inline]
    pub fn arrive(&mut self, row: usize, now_ns: u64, bytes: u32) {
        let Some(&(tenant, class)) = self.rows.get(row) else { return };
        let bin = self.bin_at(now_ns);
        self.tenants[tenant].1.arrive(bin, self.window_ns, now_ns, bytes);
        self.classes[class].1.arrive(bin, self.window_ns, now_ns, bytes);
    }

    /// A packet of row `row` dropped at `at_ns`; `green`: coloured green by the meters.
    pub fn dropped(&mut self, row: usize, at_ns: u64, green: bool) {
        let Some(&(tenant, class)) = self.rows.get(row) else { return };
        let bin = self.bin_at(at_ns);
        self.tenants[tenant].1.drop_at(bin, green);
        self.classes[class].1.drop_at(bin, green);
    }

    /// A packet of row `row` held `hold_ns` by the shapers.
    #[inline]
    pub fn held(&mut self, row: usize, hold_ns: u64) {
        if let Some(&(_, class)) = self.rows.get(row) {
            self.classes[class].1.hold_ns.record(hold_ns);
        }
    }

    /// The port started sending a packet of row `row` that reached it at `arrival_ns`.
    pub fn departed(&mut self, row: usize, arrival_ns: u64, delay_ns: u64) {
        let Some(&(_, class)) = self.rows.get(row) else { return };
        let bin = self.bin_at(arrival_ns);
        self.classes[class].1.depart(bin, delay_ns);
    }

    /// The bin of `time_ns`, merging bins until it has one.
    fn bin_at(&mut self, time_ns: u64) -> usize {
        let start = *self.start_ns.get_or_insert(time_ns);
        self.end_ns = self.end_ns.max(time_ns);
        let since = time_ns.saturating_sub(start);
        while since / self.bin_ns >= MAX_BINS as u64 {
            self.halve();
        }
        (since / self.bin_ns) as usize
    }

    /// Doubles the bins' width.
    fn halve(&mut self) {
        for series in self.tenants.iter_mut().map(|(_, s)| s).chain(self.classes.iter_mut().map(|(_, s)| s)) {
            series.halve();
        }
        self.bin_ns *= 2;
    }

    pub fn window_ns(&self) -> u64 {
        self.window_ns
    }

    pub fn bin_ns(&self) -> u64 {
        self.bin_ns
    }

    /// Bin 0's start (`None` before the first sample).
    pub fn start_ns(&self) -> Option<u64> {
        self.start_ns
    }

    /// Bins holding samples: those up to the latest sample's.
    pub fn bins(&self) -> usize {
        self.start_ns.map_or(0, |start| ((self.end_ns - start) / self.bin_ns) as usize + 1)
    }

    /// Every tenant's series and every class's, in the order first seen, their arrays cut to
    /// [`bins`](Timeline::bins).
    pub fn snapshot(&self) -> Snapshot {
        let bins = self.bins();
        let cut = |series: &Series| {
            let mut series = series.clone();
            series.recent.clear();
            for array in [
                &mut series.bytes,
                &mut series.packets,
                &mut series.dropped,
                &mut series.conforming_dropped,
                &mut series.peak_bytes,
                &mut series.delay_count,
                &mut series.delay_sum_ns,
                &mut series.delay_max_ns,
            ] {
                array.resize(bins, 0);
            }
            series
        };
        (self.tenants.iter().map(|(name, s)| (name.clone(), cut(s))).collect(), self.classes.iter().map(|(key, s)| (key.clone(), cut(s))).collect())
    }
}

#[cfg(test)]
mod tests;
