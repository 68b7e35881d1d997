//! What a poller would have seen of a scope (docs/bursts.md, "Polled counters"): per polling
//! interval, the average rate of each interval and the queue depth at each poll instant.
//!
//! Bytes are counted per interval of the shortest polling period, and folded into the longer
//! ones (multiples of it) only when that interval ends: one compare and one add a packet.

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

#[derive(Debug, Clone, Default)]
struct Interval {
    ns: u64,
    /// `ns` over the shortest interval.
    ratio: u64,
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
    /// The shortest interval; the bytes of its current instance, which ends at `fine_end`.
    fine_ns: u64,
    fine_index: u64,
    fine_end: u64,
    fine_bytes: u64,
    started: bool,
    /// The time of the port's latest event in this scope, once there was one.
    last_queue_event: Option<u64>,
}

impl Polls {
    /// `intervals_ns`: checked ([`check_intervals`]).
    pub fn new(intervals_ns: &[u64]) -> Polls {
        let fine_ns = intervals_ns.iter().copied().min().unwrap_or(0);
        let intervals = intervals_ns.iter().map(|&ns| Interval { ns, ratio: ns / fine_ns.max(1), ..Interval::default() }).collect();
        Polls { intervals, fine_ns, ..Polls::default() }
    }

    pub fn intervals_ns(&self) -> Vec<u64> {
        self.intervals.iter().map(|interval| interval.ns).collect()
    }

    #[inline]
    pub fn add(&mut self, now: u64, bytes: u32) {
        if now >= self.fine_end || !self.started {
            self.next_fine(now);
        }
        self.fine_bytes += u64::from(bytes);
    }

    /// Folds the ending fine interval into the longer ones and starts the one `now` is in.
    #[cold]
    fn next_fine(&mut self, now: u64) {
        if self.fine_ns == 0 {
            self.fine_end = u64::MAX;
            self.started = true;
            return;
        }
        if self.started {
            self.fold();
        }
        self.fine_index = now / self.fine_ns;
        self.fine_end = self.fine_index.saturating_add(1).saturating_mul(self.fine_ns);
        for interval in &mut self.intervals {
            let index = self.fine_index / interval.ratio;
            if !self.started {
                (interval.first, interval.current) = (index, index);
            } else if index != interval.current {
                interval.peak_bytes = interval.peak_bytes.max(interval.current_bytes);
                (interval.current, interval.current_bytes) = (index, 0);
            }
        }
        self.started = true;
    }

    fn fold(&mut self) {
        for interval in &mut self.intervals {
            interval.current_bytes += self.fine_bytes;
            interval.total_bytes += self.fine_bytes;
        }
        self.fine_bytes = 0;
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

    pub fn views(&self) -> Vec<PollView> {
        self.intervals
            .iter()
            .map(|interval| {
                let (current, total) = (interval.current_bytes + self.fine_bytes, interval.total_bytes + self.fine_bytes);
                let polls = if self.started { interval.current - interval.first + 1 } else { 0 };
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
pub fn check_intervals(intervals_ns: &[u64]) -> Result<(), String> {
    let Some(&fine) = intervals_ns.iter().min() else { return Ok(()) };
    if fine == 0 {
        return Err("a polling interval must be at least 1 ns".to_string());
    }
    if let Some(odd) = intervals_ns.iter().find(|&&ns| ns % fine != 0) {
        return Err(format!("polling interval {odd} ns is not a multiple of the shortest, {fine} ns"));
    }
    let mut sorted = intervals_ns.to_vec();
    sorted.sort_unstable();
    if sorted.windows(2).any(|pair| pair[0] == pair[1]) {
        return Err("a polling interval is given twice".to_string());
    }
    Ok(())
}
