//! One scope's state: [`Hot`], what every packet reads and writes (one cache line, the scopes'
//! side by side), and [`Monitor`], what only events, port events and reports read.

use super::event::{BurstEvent, OpenEvent, Seen, View};
use super::polls::Polls;
use super::{BurstConfig, ScopeKey, Sink, Totals};
use crate::outcome::Outcome;
use crate::parse::PacketInfo;

/// Packets a window holds in its own cache line before they spill to the heap.
const INLINE: usize = 4;

/// The packets in a window, oldest first, as (the instant it leaves the window, bytes): a ring
/// of a power-of-two capacity, first [`INLINE`] slots beside the scope's hot state, then on the
/// heap, grown when full and kept, so that nothing is allocated per packet.
#[derive(Debug, Default)]
struct Ring {
    /// Empty while the inline slots suffice.
    spilled: Box<[(u64, u32)]>,
    head: u32,
    len: u32,
    inline: [(u64, u32); INLINE],
}

impl Ring {
    #[inline]
    fn slots(&self) -> &[(u64, u32)] {
        if self.spilled.is_empty() {
            &self.inline
        } else {
            &self.spilled
        }
    }

    #[inline]
    fn front(&self) -> Option<(u64, u32)> {
        (self.len > 0).then(|| self.slots()[self.head as usize])
    }

    #[inline]
    fn pop_front(&mut self) {
        self.head = (self.head + 1) & (self.slots().len() as u32 - 1);
        self.len -= 1;
    }

    #[inline]
    fn push_back(&mut self, entry: (u64, u32)) {
        let capacity = self.slots().len() as u32;
        if self.len == capacity {
            self.grow();
            return self.push_back(entry);
        }
        let at = ((self.head + self.len) & (capacity - 1)) as usize;
        match self.spilled.is_empty() {
            true => self.inline[at] = entry,
            false => self.spilled[at] = entry,
        }
        self.len += 1;
    }

    #[cold]
    fn grow(&mut self) {
        let slots = self.slots();
        let mut grown = vec![(0, 0); slots.len() * 2].into_boxed_slice();
        for (i, slot) in grown.iter_mut().take(self.len as usize).enumerate() {
            *slot = slots[(self.head as usize + i) & (slots.len() - 1)];
        }
        (self.spilled, self.head) = (grown, 0);
    }
}

/// What every packet of a scope reads and writes, in two adjacent cache lines (the second the
/// window's inline slots).
#[repr(C, align(128))]
#[derive(Debug, Default)]
pub(super) struct Hot {
    window: Ring,
    /// The bytes in the window, and the most it may hold at or below the threshold.
    sum: u64,
    limit: u64,
    /// At most 10 ms ([`MAX_WINDOW_NS`](super::MAX_WINDOW_NS)).
    window_ns: u32,
    /// An event of either view is open: every packet takes [`Monitor::arrive_open`].
    open: bool,
    /// The scope's bytes in the shortest polling interval's current instance.
    fine_bytes: u64,
    peak_window_bytes: u64,
}

const _: () = assert!(std::mem::size_of::<Hot>() == 128, "a scope's hot state is two cache lines");

impl Hot {
    /// Whether the scope counted bytes in the shortest polling interval's current instance.
    #[inline]
    pub(super) fn counted_bytes(&self) -> bool {
        self.fine_bytes > 0
    }

    #[inline]
    pub(super) fn is_open(&self) -> bool {
        self.open
    }

    /// Asks the cache for both lines.
    #[inline]
    pub(super) fn prefetch(&self) {
        crate::memory::prefetch(self);
        crate::memory::prefetch(&self.peak_window_bytes);
    }

    pub(super) fn new(config: &BurstConfig) -> Hot {
        Hot { limit: config.limit_bytes(), window_ns: config.window_ns as u32, ..Hot::default() }
    }

    /// Packets whose window has passed by `now` leave it (no event is open).
    #[inline]
    fn leave_quietly(&mut self, now: u64) {
        while let Some((leaves, bytes)) = self.window.front() {
            if leaves > now {
                return;
            }
            self.window.pop_front();
            self.sum -= u64::from(bytes);
        }
    }

    #[inline]
    fn join(&mut self, now: u64, bytes: u32) {
        self.window.push_back((now.saturating_add(u64::from(self.window_ns)), bytes));
        self.sum += u64::from(bytes);
        self.fine_bytes += u64::from(bytes);
        if self.sum > self.peak_window_bytes {
            self.peak_window_bytes = self.sum; // a branch, rarely taken once the peak is set: no store
        }
    }
}

/// A scope's rate view as adaptive profiles read it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RateState {
    /// A rate event is open.
    pub open: bool,
    /// When the latest one ended (0: none yet).
    pub ended_ns: u64,
    /// When the window's oldest packet leaves it (`u64::MAX`: it is empty): the first instant
    /// an open event may end.
    pub next_leave_ns: u64,
}

/// One scope's state besides [`Hot`].
#[derive(Debug)]
pub(super) struct Monitor {
    pub key: ScopeKey,
    pub config: BurstConfig,
    seen: Seen,
    /// Bytes waiting at the port in the scope's queues.
    depth: u64,
    rate: Option<OpenEvent>,
    queue: Option<OpenEvent>,
    /// When the latest rate event ended (0: none yet).
    rate_ended_ns: u64,
    totals: Totals,
    pub polls: Polls,
}

impl Monitor {
    pub(super) fn new(key: ScopeKey, seen: Seen, config: BurstConfig, depth: u64, poll_ns: &[u64]) -> Monitor {
        Monitor { key, config, seen, depth, rate: None, queue: None, rate_ended_ns: 0, totals: Totals::default(), polls: Polls::new(poll_ns) }
    }

    /// A packet of the scope at `now` (docs/bursts.md, "The rate view", steps 1-4). `outcome`:
    /// its fate, if decided (not `Pending`). While no event is open it reads and writes only
    /// `hot`.
    #[inline(always)]
    pub(super) fn arrive(&mut self, hot: &mut Hot, now: u64, bytes: u32, info: &PacketInfo, outcome: u8, sink: &mut Sink) {
        if hot.open {
            return self.arrive_open(hot, now, bytes, info, outcome, sink);
        }
        hot.leave_quietly(now);
        hot.join(now, bytes);
        if hot.sum > hot.limit {
            self.start(hot, View::Rate, now, sink);
            self.count(hot, bytes, info, outcome);
        }
    }

    /// [`arrive`](Monitor::arrive) while an event is open.
    #[cold]
    #[inline(never)]
    fn arrive_open(&mut self, hot: &mut Hot, now: u64, bytes: u32, info: &PacketInfo, outcome: u8, sink: &mut Sink) {
        self.leave_until(hot, now, sink);
        hot.join(now, bytes);
        if hot.sum > hot.limit && self.rate.is_none() {
            self.start(hot, View::Rate, now, sink);
        }
        if hot.open {
            self.count(hot, bytes, info, outcome);
        }
    }

    /// The shortest polling interval ended: its bytes go into each interval's instance `at`
    /// (none before the first packet, or without polls).
    pub(super) fn fold_polls(&mut self, hot: &mut Hot, at: &[u64]) {
        let bytes = std::mem::take(&mut hot.fine_bytes);
        if bytes > 0 && !at.is_empty() {
            self.polls.fold(at, bytes);
        }
    }

    /// Packets whose window has passed by `now` leave it; a rate event ends when its window
    /// falls to the limit, at the instant the packet that takes it there leaves.
    pub(super) fn leave_until(&mut self, hot: &mut Hot, now: u64, sink: &mut Sink) {
        while let Some((leaves, bytes)) = hot.window.front() {
            if leaves > now {
                return;
            }
            hot.window.pop_front();
            hot.sum -= u64::from(bytes);
            if hot.sum <= hot.limit {
                if let Some(open) = self.rate.take() {
                    self.end(hot, View::Rate, open, leaves, sink);
                }
            }
        }
    }

    fn start(&mut self, hot: &mut Hot, view: View, now: u64, sink: &mut Sink) {
        let event = Some(OpenEvent::new(now, self.depth, sink.take_flows()));
        match view {
            View::Rate => self.rate = event,
            View::Queue => self.queue = event,
        }
        hot.open = self.rate.is_some() || self.queue.is_some();
    }

    fn count(&mut self, hot: &Hot, bytes: u32, info: &PacketInfo, outcome: u8) {
        for event in [self.rate.as_mut(), self.queue.as_mut()].into_iter().flatten() {
            event.packets += 1;
            event.bytes += u64::from(bytes);
            event.peak_window_bytes = event.peak_window_bytes.max(hot.sum);
            event.flows.add(info, bytes);
            if outcome != Outcome::Pending as u8 {
                event.outcomes[usize::from(outcome)] += 1;
            }
        }
    }

    /// A packet of the scope had its fate decided at the port at `now` (after an event whose
    /// window fell by then ended).
    pub(super) fn decided(&mut self, hot: &mut Hot, now: u64, outcome: Outcome, sink: &mut Sink) {
        self.leave_until(hot, now, sink);
        for event in [self.rate.as_mut(), self.queue.as_mut()].into_iter().flatten() {
            event.outcomes[outcome as usize] += 1;
        }
    }

    pub(super) fn admitted(&mut self, hot: &mut Hot, now: u64, bytes: u32, sink: &mut Sink) {
        self.leave_until(hot, now, sink);
        self.polls.queue_event(now, self.depth);
        self.depth += u64::from(bytes);
        self.totals.max_queue_bytes = self.totals.max_queue_bytes.max(self.depth);
        for event in [self.rate.as_mut(), self.queue.as_mut()].into_iter().flatten() {
            event.max_queue_bytes = event.max_queue_bytes.max(self.depth);
        }
        if self.config.queue.is_some_and(|q| self.depth > q.rise_bytes) && self.queue.is_none() {
            self.start(hot, View::Queue, now, sink);
        }
    }

    pub(super) fn departed(&mut self, hot: &mut Hot, now: u64, bytes: u32, sink: &mut Sink) {
        self.leave_until(hot, now, sink);
        self.polls.queue_event(now, self.depth);
        self.depth = self.depth.saturating_sub(u64::from(bytes));
        if self.config.queue.is_some_and(|q| self.depth <= q.fall_bytes) {
            if let Some(open) = self.queue.take() {
                self.end(hot, View::Queue, open, now, sink);
            }
        }
    }

    fn end(&mut self, hot: &mut Hot, view: View, mut open: OpenEvent, end_ns: u64, sink: &mut Sink) {
        let id = sink.events.len() as u64;
        sink.flow_starts.push(sink.flows.len());
        let flows = open.flows.report_into(id, &mut sink.flows);
        sink.events.push(BurstEvent::of(id, self.seen, view, &open, end_ns, flows as u8));
        match view {
            View::Rate => {
                self.rate_ended_ns = end_ns;
                self.totals.rate_events += 1;
                self.totals.time_in_burst_ns += end_ns.saturating_sub(open.start_ns);
            }
            View::Queue => self.totals.queue_events += 1,
        }
        sink.pool.push(open.flows);
        hot.open = self.rate.is_some() || self.queue.is_some();
    }

    /// The rate view at `now`, once the packets whose window passed by then left it (as the
    /// next packet would make them leave: the same events, at the same times).
    pub(super) fn rate_at(&mut self, hot: &mut Hot, now: u64, sink: &mut Sink) -> RateState {
        if self.rate.is_some() {
            self.leave_until(hot, now, sink);
        }
        RateState { open: self.rate.is_some(), ended_ns: self.rate_ended_ns, next_leave_ns: hot.window.front().map_or(u64::MAX, |(leaves, _)| leaves) }
    }

    /// Ends the open events at `now`, as a scope that goes away: a rate event whose window
    /// fell by then ended when it fell.
    pub(super) fn close(&mut self, hot: &mut Hot, now: u64, sink: &mut Sink) {
        self.leave_until(hot, now, sink);
        if let Some(open) = self.rate.take() {
            self.end(hot, View::Rate, open, now, sink);
        }
        if let Some(open) = self.queue.take() {
            self.end(hot, View::Queue, open, now, sink);
        }
    }

    /// The scope's totals, its window's peak rate with them.
    pub(super) fn totals(&self, hot: &Hot) -> Totals {
        Totals { peak_window_bps: super::window_bps(hot.peak_window_bytes, self.config.window_ns), ..self.totals }
    }

    /// What pollers saw of the scope; `at`: the instances the shortest interval's current one
    /// is in.
    pub(super) fn poll_views(&self, hot: &Hot, at: &[u64]) -> Vec<super::PollView> {
        self.polls.views(hot.fine_bytes, at)
    }

    #[cfg(test)]
    pub(super) fn is_open(&self, view: View) -> bool {
        match view {
            View::Rate => self.rate.is_some(),
            View::Queue => self.queue.is_some(),
        }
    }
}

#[cfg(test)]
impl Hot {
    pub(super) fn limit(&self) -> u64 {
        self.limit
    }

    pub(super) fn window_len(&self) -> u32 {
        self.window.len
    }
}
