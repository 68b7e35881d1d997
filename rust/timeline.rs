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

use crate::memory::prefetch;
use crate::shaping::LogHistogram;

/// Bins at most: enough for a picture a screen wide, small enough for thousands of series.
pub const MAX_BINS: usize = 512;

/// (tenant name, class id) of a class series; `None` for packets of no tenant, or the tenant's
/// packets in no class (as the statistics rows say).
pub type ClassKey = (Option<String>, Option<u16>);

/// Every tenant's series (by name) and every class's, as [`Timeline::snapshot`] gives them.
pub type Snapshot = (Vec<(Option<String>, Series)>, Vec<(ClassKey, Series)>);

/// One bin of a series: one cache line, so that a packet touches one line of its tenant's
/// series and one of its class's.
#[repr(C, align(64))]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Bin {
    /// Bytes (as the policy counts them) and packets arriving in the bin.
    pub bytes: u64,
    pub packets: u64,
    /// Packets dropped in the bin, at any stage (the port's at their arrival there), and of
    /// those the ones the meters had coloured green: conforming to their contract.
    pub dropped: u64,
    pub conforming_dropped: u64,
    /// The most bytes that arrived in one window `(t - window, t]` ending at a packet's time `t`
    /// in the bin.
    pub peak_bytes: u64,
    /// Packets the port started sending that reached it in the bin, their summed and largest
    /// queueing delays.
    pub delay_count: u64,
    pub delay_sum_ns: u64,
    pub delay_max_ns: u64,
}

impl Bin {
    /// This bin and the next as one bin twice as wide.
    fn merged(&self, next: &Bin) -> Bin {
        Bin {
            bytes: self.bytes + next.bytes,
            packets: self.packets + next.packets,
            dropped: self.dropped + next.dropped,
            conforming_dropped: self.conforming_dropped + next.conforming_dropped,
            peak_bytes: self.peak_bytes.max(next.peak_bytes),
            delay_count: self.delay_count + next.delay_count,
            delay_sum_ns: self.delay_sum_ns.saturating_add(next.delay_sum_ns),
            delay_max_ns: self.delay_max_ns.max(next.delay_max_ns),
        }
    }
}

/// One tenant's or class's series. `bins` is empty until the first sample, then [`MAX_BINS`]
/// long.
#[derive(Debug, Clone, Default)]
pub struct Series {
    pub bins: Vec<Bin>,
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
    /// Bin `bin`, the bins made at the first sample.
    #[inline]
    fn bin(&mut self, bin: usize) -> &mut Bin {
        if self.bins.is_empty() {
            self.bins.resize(MAX_BINS, Bin::default());
        }
        &mut self.bins[bin]
    }

    /// One field of every bin, in order.
    pub fn column(&self, field: impl Fn(&Bin) -> u64) -> Vec<u64> {
        self.bins.iter().map(field).collect()
    }

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
        let in_window = self.in_window;
        let slot = self.bin(bin);
        slot.peak_bytes = slot.peak_bytes.max(in_window);
        slot.bytes += u64::from(bytes);
        slot.packets += 1;
        self.first_ns.get_or_insert(now_ns);
        self.last_ns = now_ns;
    }

    fn drop_at(&mut self, bin: usize, green: bool) {
        let slot = self.bin(bin);
        slot.dropped += 1;
        slot.conforming_dropped += u64::from(green);
    }

    fn depart(&mut self, bin: usize, delay_ns: u64) {
        let slot = self.bin(bin);
        slot.delay_count += 1;
        slot.delay_sum_ns = slot.delay_sum_ns.saturating_add(delay_ns);
        slot.delay_max_ns = slot.delay_max_ns.max(delay_ns);
    }

    /// Merges bins pairwise: bin `i` becomes bins `2i` and `2i + 1`.
    fn halve(&mut self) {
        if self.bins.is_empty() {
            return;
        }
        let half = self.bins.len() / 2;
        for i in 0..half {
            self.bins[i] = self.bins[2 * i].merged(&self.bins[2 * i + 1]);
        }
        self.bins[half..].fill(Bin::default());
    }
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

    /// Asks the cache for the series of row `row`.
    #[inline]
    pub fn prefetch_series(&self, row: usize) {
        if let Some(&(tenant, class)) = self.rows.get(row) {
            prefetch(&self.tenants[tenant].1);
            prefetch(&self.classes[class].1);
        }
    }

    /// Asks the cache for the bins of row `row` at `time_ns` and the ends of its windows.
    #[inline]
    pub fn prefetch_bins(&self, row: usize, time_ns: u64) {
        let (Some(&(tenant, class)), Some(start)) = (self.rows.get(row), self.start_ns) else { return };
        let bin = (time_ns.saturating_sub(start) / self.bin_ns).min(MAX_BINS as u64 - 1) as usize;
        for series in [&self.tenants[tenant].1, &self.classes[class].1] {
            if let Some(slot) = series.bins.get(bin) {
                prefetch(slot);
            }
            if let Some(last) = series.recent.back() {
                prefetch(last);
            }
        }
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

    /// Every tenant's series (by name) in the order first seen; a series' bins may be fewer than
    /// [`bins`](Timeline::bins) (none before its first sample), and those beyond are zeros.
    pub fn tenant_series(&self) -> &[(Option<String>, Series)] {
        &self.tenants
    }

    /// Every class's series, as [`tenant_series`](Timeline::tenant_series).
    pub fn class_series(&self) -> &[(ClassKey, Series)] {
        &self.classes
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
            series.bins.resize(bins, Bin::default());
            series
        };
        (self.tenants.iter().map(|(name, s)| (name.clone(), cut(s))).collect(), self.classes.iter().map(|(key, s)| (key.clone(), cut(s))).collect())
    }
}

#[cfg(test)]
mod tests;
