//! What a poller would have seen of a scope (docs/bursts.md, "Polled counters"): per polling
//! interval, the average rate of each interval and the queue depth at each poll instant.
//!
//! A scope's packets add their bytes to one counter; when the shortest interval ends (for the
//! whole detector: [`PollClock`]), every scope that counted bytes folds them into each
//! interval's current instance. A packet costs an add.

use crate::error::CoreError;

/// What a poller at one interval saw.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PollView {
    pub interval_ns: u64,
    /// Intervals from that of the scope's first packet to that of its last.
    pub polls: u64,
    pub peak_bps: u64,
    pub mean_bps: u64,
    pub queue_polls: u64,
    pub queue_nonzero_polls: u64,
    pub queue_max_at_polls: u64,
}

/// The instances of the shortest polling interval, for every scope at once.
#[derive(Debug, Clone, Default)]
pub struct PollClock {
    intervals_ns: Vec<u64>,
    fine_ns: u64,
    /// The current instance of the shortest interval, and where it ends (`u64::MAX` without
    /// polls); `None` before the first packet.
    fine_index: Option<u64>,
    pub end: u64,
}

impl PollClock {
    /// `intervals_ns`: checked ([`check_intervals`]).
    pub fn new(intervals_ns: &[u64]) -> PollClock {
        let fine_ns = intervals_ns.iter().copied().min().unwrap_or(0);
        PollClock { intervals_ns: intervals_ns.to_vec(), fine_ns, fine_index: None, end: 0 }
    }

    pub fn intervals_ns(&self) -> &[u64] {
        &self.intervals_ns
    }

    /// The instance of each interval that the shortest one's current instance is in (empty
    /// before the first packet).
    pub fn instances(&self) -> Vec<u64> {
        let Some(fine) = self.fine_index else { return Vec::new() };
        self.intervals_ns.iter().map(|&ns| fine / (ns / self.fine_ns)).collect()
    }

    /// Moves to the instance `now` is in.
    pub fn advance(&mut self, now: u64) {
        if self.fine_ns == 0 {
            self.end = u64::MAX;
            return;
        }
        let index = now / self.fine_ns;
        self.fine_index = Some(index);
        self.end = index.saturating_add(1).saturating_mul(self.fine_ns);
    }
}

#[derive(Debug, Clone, Default)]
struct Interval {
    ns: u64,
    first: u64,
    current: u64,
    current_bytes: u64,
    peak_bytes: u64,
    total_bytes: u64,
    queue: PollView,
}

/// The polled views of one scope.
#[derive(Debug, Clone, Default)]
pub struct Polls {
    intervals: Vec<Interval>,
    /// Bytes were folded in.
    started: bool,
    /// The time of the port's latest event in this scope, once there was one.
    last_queue_event: Option<u64>,
}

impl Polls {
    pub fn new(intervals_ns: &[u64]) -> Polls {
        Polls { intervals: intervals_ns.iter().map(|&ns| Interval { ns, ..Interval::default() }).collect(), ..Polls::default() }
    }

    pub fn intervals_ns(&self) -> Vec<u64> {
        self.intervals.iter().map(|interval| interval.ns).collect()
    }

    /// The scope's `bytes` of an instance of the shortest interval, which lies in instance
    /// `at[i]` of interval `i`.
    pub fn fold(&mut self, at: &[u64], bytes: u64) {
        let started = self.started;
        for (interval, &index) in self.intervals.iter_mut().zip(at) {
            if !started {
                (interval.first, interval.current) = (index, index);
            } else if index != interval.current {
                interval.peak_bytes = interval.peak_bytes.max(interval.current_bytes);
                (interval.current, interval.current_bytes) = (index, 0);
            }
            interval.current_bytes += bytes;
            interval.total_bytes += bytes;
        }
        self.started = true;
    }

    /// The queue depth changes at `now`: every poll instant since the last change read `depth`.
    pub fn queue_event(&mut self, now: u64, depth: u64) {
        let Some(last) = self.last_queue_event.replace(now) else { return };
        for interval in &mut self.intervals {
            let instants = (now / interval.ns).saturating_sub(last / interval.ns);
            let view = &mut interval.queue;
            view.queue_polls += instants;
            if depth > 0 && instants > 0 {
                view.queue_nonzero_polls += instants;
                view.queue_max_at_polls = view.queue_max_at_polls.max(depth);
            }
        }
    }

    /// What pollers saw, with `pending` bytes of the shortest interval's current instance,
    /// `at` (each interval's instance it is in) not folded in yet.
    pub fn views(&self, pending: u64, at: &[u64]) -> Vec<PollView> {
        let mut polls = self.clone();
        if pending > 0 {
            polls.fold(at, pending);
        }
        polls
            .intervals
            .iter()
            .map(|interval| {
                let (current, total) = (interval.current_bytes, interval.total_bytes);
                let polls = if polls.started { interval.current - interval.first + 1 } else { 0 };
                let bps = |bytes: u64, ns: u128| (u128::from(bytes) * 8_000_000_000).checked_div(ns).unwrap_or(0) as u64;
                PollView {
                    interval_ns: interval.ns,
                    polls,
                    peak_bps: bps(interval.peak_bytes.max(current), u128::from(interval.ns)),
                    mean_bps: bps(total, u128::from(polls) * u128::from(interval.ns)),
                    ..interval.queue
                }
            })
            .collect()
    }
}

/// Polling intervals: each at least 1 ns and a multiple of the shortest, none twice.
pub fn check_intervals(intervals_ns: &[u64]) -> Result<(), CoreError> {
    let Some(&fine) = intervals_ns.iter().min() else { return Ok(()) };
    if fine == 0 {
        return Err(CoreError::spec("a polling interval must be at least 1 ns"));
    }
    if let Some(odd) = intervals_ns.iter().find(|&&ns| ns % fine != 0) {
        return Err(CoreError::spec(format!("polling interval {odd} ns is not a multiple of the shortest, {fine} ns")));
    }
    let mut sorted = intervals_ns.to_vec();
    sorted.sort_unstable();
    if sorted.windows(2).any(|pair| pair[0] == pair[1]) {
        return Err(CoreError::spec("a polling interval is given twice"));
    }
    Ok(())
}
