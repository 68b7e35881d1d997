//! An egress port in packet time: which packet leaves when, and which are dropped, when many
//! queues share one line and one buffer.
//!
//! [`PortMode::PerTenant`] is HTB-like and work conserving. Whenever the line is free and packets
//! wait, the next packet comes from the queues still within their guarantee (strict priority,
//! then weighted deficit round robin within a priority); if there are none, from the queues
//! below their ceiling (again priority, then WDRR: spare capacity is shared by weight); a queue
//! at its ceiling waits, and the line idles if every waiting queue is at its ceiling.
//! Guarantees and ceilings are token buckets, the guarantee's `burst_bytes` deep (by default
//! [`bucket_bytes`]: 1 ms at its rate, at least one jumbo frame), the ceiling's as deep as the
//! larger of its own default and the guarantee's (a ceiling never cuts a burst the guarantee
//! allows): a queue is within one while its bucket holds its head packet. Bytes sent under the
//! guarantee are charged to both buckets, borrowed bytes only to the ceiling.
//! [`PortMode::SharedFifo`] is one FIFO for every packet, same line and buffer: what a port
//! without isolation does.
//!
//! Exact semantics (the test suite's reference model follows them independently):
//! - Time runs in ticks of 1/line_rate ns; a packet of `b` bytes holds the line for exactly
//!   `b` x 1e9 ticks. Reported times are rounded up to whole ns.
//! - A packet occupies the buffer from its arrival until its transmission starts. In PerTenant
//!   mode a queue's first `reserved_bytes` are its own; what it holds beyond them comes from the
//!   shared pool (the buffer less every reserve). An arrival is dropped if it would take its
//!   queue over `limit_bytes` (`QueueLimit`); else, if it fits in the queue's reserve, admitted;
//!   else dropped if the queue's part of the shared pool would exceed 2^`alpha_log2` x the
//!   shared bytes free before the arrival (`QueueLimit`: the dynamic threshold of Choudhury and
//!   Hahne, so that a flooding queue cannot take the buffer from the others) or if the pool has
//!   no room (`BufferFull`). In SharedFifo mode the buffer is one pool: an arrival that would
//!   take the port over `buffer_bytes` is dropped (`BufferFull`).
//! - Events at one instant: arrivals first (in call order), then queues whose buckets fill (by
//!   rank: the index of a port made with its queues, [`Port::place_queues`] keeps it), then the
//!   scheduling decision; so every packet arriving at an instant competes for the line at that
//!   instant.
//! - A queue joins a ring at the tail when it becomes able to send in that phase: on the
//!   arrival that makes it backlogged, when its bucket fills, or right after sending. It leaves
//!   when it empties (its deficits go to 0) or after a send leaves its bucket short (its turn
//!   ends, its deficit stays). Quantum = units x weight x [`QUANTUM_BYTES`], so every turn
//!   sends; a queue's units are its share through the port's [`WeightScale`], so that a
//!   policy-wide change of scale (its tenants' guarantees' common divisor) is the port's alone.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::num::{NonZeroU128, NonZeroU64};

pub use super::bucket::{bucket_bytes, MIN_BUCKET_BYTES};
use super::bucket::{Bucket, Tick};
use super::edt::saturate;
use super::histogram::LogHistogram;
use super::wdrr::{Phase, Scheduler};
use super::NS_PER_S;
use crate::error::CoreError;

mod config;
pub use config::{check_queues, PortConfig, PortMode, QueueConfig, WeightScale, ALPHA_LOG2_RANGE, MAX_BURST_BYTES, QUANTUM_BYTES};

/// Why an arrival was dropped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PortDrop {
    /// The shared buffer had no room.
    BufferFull = 0,
    /// The queue's own limit had no room: its fixed limit or its dynamic threshold.
    QueueLimit = 1,
    /// No such queue: counted for the port, not for a queue.
    UnknownQueue = 2,
}

/// A packet's transmission: `start_ns - arrival` is its queueing delay, `depart_ns` is when its
/// last byte has left at line rate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Departure {
    pub packet: u64,
    pub queue: u32,
    pub arrival_ns: u64,
    pub start_ns: u64,
    pub depart_ns: u64,
    pub bytes: u32,
}

/// What happened to one queue's packets.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct QueueStats {
    pub sent_packets: u64,
    pub sent_bytes: u64,
    /// Indexed by `PortDrop::BufferFull as usize` and `PortDrop::QueueLimit as usize`.
    pub dropped_packets: [u64; 2],
    pub dropped_bytes: [u64; 2],
    /// Queueing delay (transmission start minus arrival) in ns: quantiles within 1/128, exact max.
    pub delay_ns: LogHistogram,
}

impl QueueStats {
    pub fn drops(&self, reason: PortDrop) -> u64 {
        self.dropped_packets.get(reason as usize).copied().unwrap_or(0)
    }
}

/// A packet in the buffer.
#[derive(Debug, Clone, Copy)]
struct Waiting {
    packet: u64,
    arrival_ns: u64,
    bytes: u32,
    queue: u32,
}

#[derive(Debug, Clone)]
struct Queue {
    packets: VecDeque<Waiting>,
    bytes: u64,
    limit_bytes: u64,
    reserved_bytes: u64,
    alpha_log2: Option<i8>,
    /// Its [`QueueConfig::share`] and weight: its quantum again when the scale changes.
    weight: u32,
    share: u64,
    guarantee: Option<Bucket>,
    ceil: Option<Bucket>,
    /// When the queue next joins a ring, if it is waiting for a bucket (always after tick 0,
    /// so the option takes no room of its own); `timer_id` tells the live heap entry from stale ones.
    timer: Option<NonZeroU128>,
    timer_id: u32,
}

impl Queue {
    /// Empty, with full buckets; a ceiling at or over the line rate caps nothing.
    fn new(config: &QueueConfig, unit: i128, line_rate: u64) -> Queue {
        Queue {
            packets: VecDeque::new(),
            bytes: 0,
            limit_bytes: config.limit_bytes,
            reserved_bytes: config.reserved_bytes,
            alpha_log2: config.alpha_log2,
            weight: config.weight,
            share: config.share,
            guarantee: guarantee_rate(config).map(|rate| Bucket::new(rate, config.guarantee_depth(), unit)),
            ceil: ceil_rate(config, line_rate).map(|rate| Bucket::new(rate, config.ceil_depth(), unit)),
            timer: None,
            timer_id: 0,
        }
    }
}

fn guarantee_rate(config: &QueueConfig) -> Option<NonZeroU64> {
    NonZeroU64::new(config.guarantee)
}

/// A ceiling at or over the line rate caps nothing.
fn ceil_rate(config: &QueueConfig, line_rate: u64) -> Option<NonZeroU64> {
    NonZeroU64::new(config.ceil).filter(|_| config.ceil < line_rate)
}

/// The port: feed it arrivals in time order, collect departures. Cloning it forks the
/// simulation (e.g. to compare what-ifs from one state).
#[derive(Debug, Clone)]
pub struct Port {
    line_rate: u64,
    buffer_bytes: u64,
    mode: PortMode,
    /// Token units per byte: 1e9 x line_rate.
    unit: i128,
    weight_scale: WeightScale,
    queues: Vec<Queue>,
    stats: Vec<QueueStats>,
    scheduler: Scheduler,
    /// Bucket timers: (tick, rank, queue, timer_id), earliest first, ties by rank.
    timers: BinaryHeap<Reverse<(Tick, u32, u32, u32)>>,
    /// By queue, its place among the queues whose buckets fill at one instant (lower first):
    /// apart from the queues, so that making room among them reads no queue.
    ranks: Vec<u32>,
    /// Above every queue's rank.
    next_rank: u32,
    /// SharedFifo mode's one queue.
    fifo: VecDeque<Waiting>,
    queued_bytes: u64,
    /// PerTenant mode: the buffer less every queue's reserve, and the bytes queues hold in it.
    shared_capacity: u64,
    shared_used: u64,
    /// Every event before this tick has been processed.
    clock: Tick,
    /// The line is busy until this tick.
    free_at: Tick,
    /// `free_at` in whole ns rounded up, and the ticks the rounding added (`None` past u64::MAX
    /// ns): a transmission right after the last one takes its times from it without dividing.
    free_at_ns: Option<(u64, u64)>,
    departures: Vec<Departure>,
    unknown_queue_drops: u64,
}

impl Port {
    /// A port with its queues, numbered by their index; every queue starts with full buckets.
    pub fn new(config: PortConfig, queues: Vec<QueueConfig>) -> Result<Port, CoreError> {
        check_queues(&config, &queues)?;
        let unit = i128::from(config.line_rate) * NS_PER_S as i128;
        let weight_scale = WeightScale::default();
        let scheduler = Scheduler::new(queues.iter().map(|q| (q.priority, weight_scale.quantum(q.share, q.weight))));
        let states = queues.iter().map(|q| Queue::new(q, unit, config.line_rate)).collect();
        let reserved: u64 = queues.iter().map(|q| q.reserved_bytes).sum();
        Ok(Port {
            shared_capacity: config.buffer_bytes - reserved,
            shared_used: 0,
            line_rate: config.line_rate,
            buffer_bytes: config.buffer_bytes,
            mode: config.mode,
            unit,
            weight_scale,
            stats: vec![QueueStats::default(); queues.len()],
            queues: states,
            scheduler,
            timers: BinaryHeap::new(),
            ranks: (0..queues.len() as u32).collect(),
            next_rank: queues.len() as u32,
            fifo: VecDeque::new(),
            queued_bytes: 0,
            clock: 0,
            free_at: 0,
            free_at_ns: Some((0, 0)),
            departures: Vec::new(),
            unknown_queue_drops: 0,
        })
    }

    /// Room for `additional` more queues at the end ([`Port::place_queues`]) without moving the others.
    pub fn reserve(&mut self, additional: usize) {
        self.queues.reserve_exact(additional);
        self.stats.reserve_exact(additional);
        self.ranks.reserve_exact(additional);
        self.scheduler.reserve(additional);
    }

    /// Whether any of `queues` holds a packet.
    pub fn holds_packets(&self, queues: std::ops::Range<u32>) -> bool {
        let holds = |queue: u32| !self.queues[queue as usize].packets.is_empty();
        queues.clone().any(holds) || self.fifo.iter().any(|waiting| queues.contains(&waiting.queue))
    }

    /// Leaves the queues `gone`, which hold no packet ([`Port::holds_packets`]), vacant: no
    /// guarantee, ceiling or reserve, no timer, zero statistics, for [`Port::place_queues`] to
    /// give to others. No other queue moves. Their statistics, in order. The caller keeps the
    /// port's queues valid as a whole (less reserve and guarantee only makes room).
    pub fn vacate_queues(&mut self, gone: std::ops::Range<u32>) -> Vec<QueueStats> {
        debug_assert!(!self.holds_packets(gone.clone()));
        let (unit, line_rate) = (self.unit, self.line_rate);
        for state in &mut self.queues[gone.start as usize..gone.end as usize] {
            self.shared_capacity += state.reserved_bytes;
            *state = Queue::new(&QueueConfig::BEST_EFFORT, unit, line_rate);
        }
        self.timers.retain(|Reverse((_, _, queue, _))| !gone.contains(queue));
        self.departures.retain(|departure| !gone.contains(&departure.queue));
        self.stats[gone.start as usize..gone.end as usize].iter_mut().map(std::mem::take).collect()
    }

    /// Gives `configs` the queues `first..` (vacant, or new at the end: the queues in between
    /// are made vacant), empty with full buckets and zero statistics. Their buckets fill at one
    /// instant just before those of queue `before`'s (after every queue's if `None`), as if
    /// they had been put in before it in a port made afresh. The caller checks the port's
    /// queues as a whole ([`check_queues`]) first.
    pub fn place_queues(&mut self, first: u32, configs: &[QueueConfig], before: Option<u32>) {
        let (first, end) = (first as usize, first as usize + configs.len());
        let (unit, line_rate) = (self.unit, self.line_rate);
        if self.queues.len() < end {
            self.queues.resize(end, Queue::new(&QueueConfig::BEST_EFFORT, unit, line_rate));
            self.stats.resize(end, QueueStats::default());
            self.ranks.resize(end, 0);
        }
        let rank = self.make_ranks(before, configs.len() as u32);
        for (offset, config) in configs.iter().enumerate() {
            self.shared_capacity -= config.reserved_bytes;
            self.queues[first + offset] = Queue::new(config, unit, line_rate);
            self.ranks[first + offset] = rank + offset as u32;
            self.stats[first + offset] = QueueStats::default();
        }
        let scale = self.weight_scale;
        self.scheduler.place(first as u32, end as u32, configs.iter().map(|config| (config.priority, scale.quantum(config.share, config.weight))));
    }

    /// `count` ranks just before queue `before`'s (after every queue's if `None`): the first.
    fn make_ranks(&mut self, before: Option<u32>, count: u32) -> u32 {
        if self.next_rank.checked_add(count).is_none() {
            self.rank_afresh();
        }
        let Some(before) = before else {
            self.next_rank += count;
            return self.next_rank - count;
        };
        let rank = self.ranks[before as usize];
        for later in self.ranks.iter_mut().filter(|later| **later >= rank) {
            *later += count;
        }
        self.next_rank += count;
        if self.timers.iter().any(|Reverse((_, timer_rank, ..))| *timer_rank >= rank) {
            let timers = std::mem::take(&mut self.timers).into_vec().into_iter();
            self.timers = timers
                .map(|Reverse((tick, timer_rank, queue, id))| Reverse((tick, timer_rank + if timer_rank >= rank { count } else { 0 }, queue, id)))
                .collect();
        }
        rank
    }

    /// Ranks 0.. in the order of the ranks (the ranks' room spent by some 4 billion queues placed).
    fn rank_afresh(&mut self) {
        let mut by_rank: Vec<u32> = (0..self.ranks.len() as u32).collect();
        by_rank.sort_unstable_by_key(|&queue| self.ranks[queue as usize]);
        for (rank, &queue) in by_rank.iter().enumerate() {
            self.ranks[queue as usize] = rank as u32;
        }
        self.next_rank = by_rank.len() as u32;
        let timers = std::mem::take(&mut self.timers).into_vec().into_iter();
        self.timers = timers.map(|Reverse((tick, _, queue, id))| Reverse((tick, self.ranks[queue as usize], queue, id))).collect();
    }

    /// Numbers the queues afresh: queue `order[i]` becomes queue `i`, its rank `i`, keeping its
    /// packets, buckets, timers, statistics and places in the scheduler's rings. The queues
    /// not in `order` go; they must be vacant ([`Port::vacate_queues`]).
    pub fn reorder(&mut self, order: &[u32]) {
        let mut new_index = vec![u32::MAX; self.queues.len()];
        for (new, &old) in order.iter().enumerate() {
            new_index[old as usize] = new as u32;
        }
        debug_assert!(new_index.iter().enumerate().all(|(q, &new)| new != u32::MAX || !self.holds_packets(q as u32..q as u32 + 1)));
        let waiting = self.queues.iter_mut().flat_map(|state| &mut state.packets).chain(&mut self.fifo);
        waiting.for_each(|waiting| waiting.queue = new_index[waiting.queue as usize]);
        for departure in &mut self.departures {
            departure.queue = new_index[departure.queue as usize];
        }
        self.departures.retain(|departure| departure.queue != u32::MAX);
        let timers = std::mem::take(&mut self.timers).into_vec().into_iter().map(|Reverse((tick, _, queue, id))| (tick, new_index[queue as usize], id));
        self.timers = timers.filter(|(_, queue, _)| *queue != u32::MAX).map(|(tick, queue, id)| Reverse((tick, queue, queue, id))).collect();
        let mut queues: Vec<Option<Queue>> = std::mem::take(&mut self.queues).into_iter().map(Some).collect();
        self.queues = order.iter().map(|&old| queues[old as usize].take().expect("each queue once")).collect();
        self.ranks = (0..order.len() as u32).collect();
        self.next_rank = order.len() as u32;
        self.stats = order.iter().map(|&old| std::mem::take(&mut self.stats[old as usize])).collect();
        self.scheduler.reorder(order, &new_index);
    }

    /// Gives `queue` a new configuration from the port's clock on, keeping its packets and what
    /// its buckets hold (at most their new depth): a queue whose priority did not change keeps
    /// its place in the scheduler's rings. The caller checks the port's queues as a whole
    /// ([`check_queues`]) first.
    pub fn set_queue(&mut self, queue: u32, config: &QueueConfig) {
        let (now, unit, line_rate) = (self.clock, self.unit, self.line_rate);
        let state = &mut self.queues[queue as usize];
        self.shared_used -= shared_part(state, state.bytes);
        self.shared_capacity = self.shared_capacity + state.reserved_bytes - config.reserved_bytes;
        (state.reserved_bytes, state.limit_bytes, state.alpha_log2) = (config.reserved_bytes, config.limit_bytes, config.alpha_log2);
        (state.weight, state.share) = (config.weight, config.share);
        self.shared_used += shared_part(state, state.bytes);
        let retune = |bucket: &Option<Bucket>, rate: NonZeroU64, depth: u64| match bucket {
            Some(bucket) => bucket.retuned(rate, depth, unit, now),
            None => Bucket::new(rate, depth, unit),
        };
        state.guarantee = guarantee_rate(config).map(|rate| retune(&state.guarantee, rate, config.guarantee_depth()));
        state.ceil = ceil_rate(config, line_rate).map(|rate| retune(&state.ceil, rate, config.ceil_depth()));
        self.scheduler.set_share(queue, config.priority, self.weight_scale.quantum(config.share, config.weight));
        if self.mode == PortMode::PerTenant {
            self.refresh(queue, now);
        }
    }

    /// Makes the queues' shares units of weight through `scale` from now on: each queue's
    /// quantum anew, made when its next turn begins (a turn under way keeps what it was
    /// given), so that a new scale costs the same at any number of queues; nothing else.
    pub fn set_weight_scale(&mut self, scale: WeightScale) {
        if scale == self.weight_scale {
            return;
        }
        self.weight_scale = scale;
        if self.scheduler.rescale() {
            for (queue, state) in self.queues.iter().enumerate() {
                self.scheduler.set_quantum(queue as u32, scale.quantum(state.share, state.weight));
            }
        }
    }

    /// A packet of `bytes` for `queue` at `now_ns`: first settles everything before `now_ns`,
    /// then queues the packet or drops it at the tail. Times must not go backwards; an earlier
    /// time is treated as the latest seen (or the last transmission start, after [`finish`]).
    ///
    /// [`finish`]: Port::finish
    pub fn arrive(&mut self, now_ns: u64, bytes: u32, queue: u32, packet: u64) -> Result<(), PortDrop> {
        let now = self.advance(now_ns);
        let Some(state) = self.queues.get(queue as usize) else {
            self.unknown_queue_drops += 1;
            return Err(PortDrop::UnknownQueue);
        };
        if let Err(reason) = self.admit(state, bytes) {
            let stats = &mut self.stats[queue as usize];
            stats.dropped_packets[reason as usize] += 1;
            stats.dropped_bytes[reason as usize] += u64::from(bytes);
            return Err(reason);
        }
        // `now` is the arrival's own time unless the clock was ahead of it: no division then.
        let arrival_ns = if now == u128::from(now_ns) * u128::from(self.line_rate) { now_ns } else { self.ns_at(now) };
        let waiting = Waiting { packet, arrival_ns, bytes, queue };
        self.queued_bytes += u64::from(bytes);
        match self.mode {
            PortMode::SharedFifo => self.fifo.push_back(waiting),
            PortMode::PerTenant => {
                let state = &mut self.queues[queue as usize];
                self.shared_used += shared_part(state, state.bytes + u64::from(bytes)) - shared_part(state, state.bytes);
                state.packets.push_back(waiting);
                state.bytes += u64::from(bytes);
                if state.packets.len() == 1 {
                    self.refresh(queue, now);
                }
            }
        }
        Ok(())
    }

    /// Settles every decision before `now_ns`: the packets that start before it are reported.
    /// Decisions at `now_ns` itself wait, since more packets may still arrive at `now_ns`.
    pub fn advance_to(&mut self, now_ns: u64) {
        self.advance(now_ns);
    }

    /// Starts again from tick 0 as a new port of the same queues would, each queue keeping its
    /// configuration and statistics, empty with full buckets: for a port that [`Port::finish`]
    /// emptied, so that arrivals take their own times again (after `finish` they would wait
    /// for the last transmission start).
    pub fn restart(&mut self) {
        debug_assert!(self.queued_bytes == 0 && self.fifo.is_empty(), "restart follows finish");
        let unit = self.unit;
        for queue in &mut self.queues {
            queue.guarantee = queue.guarantee.as_ref().map(|bucket| bucket.refilled(unit));
            queue.ceil = queue.ceil.as_ref().map(|bucket| bucket.refilled(unit));
            queue.timer = None;
        }
        self.scheduler = self.scheduler.restarted();
        self.timers.clear();
        (self.clock, self.free_at, self.free_at_ns, self.shared_used) = (0, 0, Some((0, 0)), 0);
    }

    /// `config` in place of the port's, for a port that [`Port::finish`] emptied and
    /// [`Port::restart`] started again; the queues' reserves must fit its buffer (its caller
    /// checks them). A new line rate makes every queue's buckets again, full, from `queues`
    /// (each queue's configuration as the port has it): tokens count in units of the line
    /// rate, and a ceiling caps only below it. `queues` is read only then.
    pub fn set_config(&mut self, config: PortConfig, queues: &[QueueConfig]) {
        debug_assert!(self.queued_bytes == 0 && self.fifo.is_empty() && self.clock == 0, "a new configuration follows finish and restart");
        let reserved = self.buffer_bytes - self.shared_capacity;
        (self.shared_capacity, self.buffer_bytes, self.mode) = (config.buffer_bytes - reserved, config.buffer_bytes, config.mode);
        if config.line_rate != self.line_rate {
            debug_assert_eq!(queues.len(), self.queues.len(), "every queue's configuration");
            (self.line_rate, self.unit) = (config.line_rate, i128::from(config.line_rate) * NS_PER_S as i128);
            for (state, queue) in self.queues.iter_mut().zip(queues) {
                let fresh = Queue::new(queue, self.unit, self.line_rate);
                (state.guarantee, state.ceil) = (fresh.guarantee, fresh.ceil);
            }
        }
    }

    /// Sends everything still queued (the line runs until the last packet has started).
    pub fn finish(&mut self) {
        self.run(None);
    }

    /// The departures decided since the last call, in order of transmission.
    pub fn take_departures(&mut self) -> Vec<Departure> {
        std::mem::take(&mut self.departures)
    }

    /// Like [`take_departures`](Port::take_departures), appending to `out` (no allocation
    /// once `out` is large enough).
    pub fn drain_departures_into(&mut self, out: &mut Vec<Departure>) {
        out.append(&mut self.departures);
    }

    /// The departures decided since they were last taken or cleared, in order of transmission.
    pub fn departures(&self) -> &[Departure] {
        &self.departures
    }

    /// Forgets the departures decided so far, keeping their room: for a caller that reads only
    /// the statistics.
    pub fn clear_departures(&mut self) {
        self.departures.clear();
    }

    pub fn stats(&self, queue: u32) -> &QueueStats {
        &self.stats[queue as usize]
    }

    pub fn queue_count(&self) -> usize {
        self.queues.len()
    }

    /// Bytes waiting (not yet started), all queues together.
    pub fn queued_bytes(&self) -> u64 {
        self.queued_bytes
    }

    /// Bytes waiting in one queue (in SharedFifo mode, found by scanning the FIFO).
    pub fn queued_bytes_of(&self, queue: u32) -> u64 {
        match self.mode {
            PortMode::PerTenant => self.queues[queue as usize].bytes,
            PortMode::SharedFifo => self.fifo.iter().filter(|w| w.queue == queue).map(|w| u64::from(w.bytes)).sum(),
        }
    }

    pub fn unknown_queue_drops(&self) -> u64 {
        self.unknown_queue_drops
    }

    fn advance(&mut self, now_ns: u64) -> Tick {
        let now = (u128::from(now_ns) * u128::from(self.line_rate)).max(self.clock);
        self.run(Some(now));
        self.clock = now;
        now
    }

    fn admit(&self, queue: &Queue, bytes: u32) -> Result<(), PortDrop> {
        let bytes = u64::from(bytes);
        if self.mode == PortMode::SharedFifo {
            return if self.queued_bytes + bytes > self.buffer_bytes { Err(PortDrop::BufferFull) } else { Ok(()) };
        }
        let after = queue.bytes + bytes;
        if queue.limit_bytes > 0 && after > queue.limit_bytes {
            return Err(PortDrop::QueueLimit);
        }
        let taken = shared_part(queue, after) - shared_part(queue, queue.bytes);
        if taken == 0 {
            return Ok(());
        }
        // A reserve that shrank in place may leave a queue holding more than the pool has.
        let free = self.shared_capacity.saturating_sub(self.shared_used);
        if queue.alpha_log2.is_some_and(|alpha_log2| !within_threshold(shared_part(queue, after), free, alpha_log2)) {
            return Err(PortDrop::QueueLimit);
        }
        if taken > free {
            return Err(PortDrop::BufferFull);
        }
        Ok(())
    }

    /// Processes events in time order, those before `limit` (all of them if `None`): bucket
    /// timers first, then a decision whenever the line is free and a queue may send.
    fn run(&mut self, limit: Option<Tick>) {
        loop {
            let decision = self.may_send().then(|| self.free_at.max(self.clock));
            let timer = self.next_timer();
            let (tick, is_timer) = match (timer, decision) {
                (Some(t), Some(d)) if t <= d => (t, true),
                (_, Some(d)) => (d, false),
                (Some(t), None) => (t, true),
                (None, None) => return,
            };
            if limit.is_some_and(|limit| tick >= limit) {
                return;
            }
            self.clock = tick;
            if is_timer {
                self.fire_timer();
            } else {
                self.send_next(tick);
            }
        }
    }

    #[inline]
    fn may_send(&self) -> bool {
        match self.mode {
            PortMode::PerTenant => self.scheduler.any(Phase::Borrowed),
            PortMode::SharedFifo => !self.fifo.is_empty(),
        }
    }

    fn send_next(&mut self, now: Tick) {
        match self.mode {
            PortMode::SharedFifo => {
                let waiting = self.fifo.pop_front().expect("a packet waits");
                self.transmit(now, waiting);
            }
            PortMode::PerTenant => {
                let (queues, scale) = (&self.queues, self.weight_scale);
                let head_bytes = |q: u32| queues[q as usize].packets.front().expect("a queue in a ring has packets").bytes;
                let quantum = |q: u32| scale.quantum(queues[q as usize].share, queues[q as usize].weight);
                let (phase, queue) = self.scheduler.pick(head_bytes, quantum).expect("a queue may send");
                let unit = self.unit;
                let state = &mut self.queues[queue as usize];
                let waiting = state.packets.pop_front().expect("picked queue has a packet");
                self.shared_used -= shared_part(state, state.bytes) - shared_part(state, state.bytes - u64::from(waiting.bytes));
                state.bytes -= u64::from(waiting.bytes);
                let amount = i128::from(waiting.bytes) * unit;
                if let Some(ceil) = &mut state.ceil {
                    ceil.charge(now, amount, unit);
                }
                if phase == Phase::Guaranteed {
                    state.guarantee.as_mut().expect("only guaranteed queues send in this phase").charge(now, amount, unit);
                }
                self.transmit(now, waiting);
                self.refresh(queue, now);
            }
        }
    }

    fn transmit(&mut self, now: Tick, waiting: Waiting) {
        self.queued_bytes -= u64::from(waiting.bytes);
        let start = if now == self.free_at { self.free_at_ns } else { self.ns_and_slack(now) };
        self.free_at = now + u128::from(waiting.bytes) * NS_PER_S;
        self.free_at_ns = start.and_then(|(ns, slack)| self.ns_and_slack_after(ns, slack, waiting.bytes));
        let start_ns = start.map_or_else(|| self.ns_at(now), |(ns, _)| ns);
        let depart_ns = self.free_at_ns.map_or_else(|| self.ns_at(self.free_at), |(ns, _)| ns);
        let stats = &mut self.stats[waiting.queue as usize];
        stats.sent_packets += 1;
        stats.sent_bytes += u64::from(waiting.bytes);
        stats.delay_ns.record(start_ns - waiting.arrival_ns);
        self.departures.push(Departure {
            packet: waiting.packet,
            queue: waiting.queue,
            arrival_ns: waiting.arrival_ns,
            start_ns,
            depart_ns,
            bytes: waiting.bytes,
        });
    }

    /// Puts `queue` in the rings it may send in at `now`, takes it out of the others, and sets
    /// its timer for when its buckets will let it join the next one.
    fn refresh(&mut self, queue: u32, now: Tick) {
        let state = &self.queues[queue as usize];
        let Some(head) = state.packets.front() else {
            self.scheduler.retire(queue);
            self.set_timer(queue, None);
            return;
        };
        let (unit, need) = (self.unit, i128::from(head.bytes) * self.unit);
        let borrow_from = state.ceil.as_ref().map_or(0, |b| b.ready_at(need, unit));
        let guaranteed_from = state.guarantee.as_ref().map_or(Tick::MAX, |b| b.ready_at(need, unit)).max(borrow_from);
        self.set_membership(Phase::Borrowed, queue, borrow_from <= now);
        self.set_membership(Phase::Guaranteed, queue, guaranteed_from <= now);
        // The first of the two still ahead (the guarantee's never comes before the ceiling's).
        let next = if borrow_from > now { borrow_from } else { guaranteed_from };
        let next = (next > now && next != Tick::MAX).then(|| NonZeroU128::new(next)).flatten();
        self.set_timer(queue, next);
    }

    fn set_membership(&mut self, phase: Phase, queue: u32, member: bool) {
        match (member, self.scheduler.is_linked(phase, queue)) {
            (true, false) => self.scheduler.join(phase, queue),
            (false, true) => self.scheduler.leave(phase, queue),
            _ => {}
        }
    }

    fn set_timer(&mut self, queue: u32, tick: Option<NonZeroU128>) {
        let state = &mut self.queues[queue as usize];
        if state.timer == tick {
            return;
        }
        state.timer = tick;
        state.timer_id = state.timer_id.wrapping_add(1);
        if let Some(tick) = tick {
            self.timers.push(Reverse((tick.get(), self.ranks[queue as usize], queue, state.timer_id)));
        }
    }

    /// The earliest live timer, dropping stale ones.
    fn next_timer(&mut self) -> Option<Tick> {
        while let Some(&Reverse((tick, _, queue, id))) = self.timers.peek() {
            let state = &self.queues[queue as usize];
            if state.timer_id == id && state.timer.map(NonZeroU128::get) == Some(tick) {
                return Some(tick);
            }
            self.timers.pop();
        }
        None
    }

    fn fire_timer(&mut self) {
        let Reverse((tick, _, queue, _)) = self.timers.pop().expect("a live timer");
        self.queues[queue as usize].timer = None;
        self.refresh(queue, tick);
    }

    /// A tick as whole ns rounded up, and the ticks the rounding added; `None` past u64::MAX ns.
    fn ns_and_slack(&self, tick: Tick) -> Option<(u64, u64)> {
        let line_rate = u128::from(self.line_rate);
        let (whole, rest) = (tick / line_rate, tick % line_rate);
        let slack = if rest == 0 { 0 } else { line_rate - rest };
        u64::try_from(whole + u128::from(rest != 0)).ok().map(|ns| (ns, slack as u64))
    }

    /// [`ns_and_slack`](Port::ns_and_slack) of the tick `bytes` x 1e9 after the one at `ns` less
    /// `slack`, in 64 bits: `bytes` x 1e9 < 2^63 and the slack is below the line rate.
    fn ns_and_slack_after(&self, ns: u64, slack: u64, bytes: u32) -> Option<(u64, u64)> {
        let ticks = u64::from(bytes) * NS_PER_S as u64;
        if ticks <= slack {
            return Some((ns, slack - ticks));
        }
        let whole = (ticks - slack).div_ceil(self.line_rate);
        Some((ns.checked_add(whole)?, whole * self.line_rate - (ticks - slack)))
    }

    /// A tick as whole ns, rounded up.
    fn ns_at(&self, tick: Tick) -> u64 {
        saturate(tick.div_ceil(u128::from(self.line_rate)))
    }
}

/// The bytes a queue holding `bytes` takes from the shared pool: those beyond its reserve.
fn shared_part(queue: &Queue, bytes: u64) -> u64 {
    bytes.saturating_sub(queue.reserved_bytes)
}

/// Whether `held` shared bytes are within 2^alpha_log2 x `free` (exact: a shift, no rounding).
fn within_threshold(held: u64, free: u64, alpha_log2: i8) -> bool {
    let (held, free) = (u128::from(held), u128::from(free));
    if alpha_log2 >= 0 {
        held <= free << alpha_log2
    } else {
        held << -alpha_log2 <= free
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Ranks whose room is spent are made afresh in their order, the timers' with them, and a
    /// queue placed then still ranks just before the next.
    #[test]
    fn ranks_out_of_room_are_made_afresh_in_their_order() {
        let config = PortConfig { line_rate: 1000, buffer_bytes: 100_000, mode: PortMode::PerTenant };
        let mut port = Port::new(config, vec![QueueConfig::BEST_EFFORT; 3]).unwrap();
        (port.ranks, port.next_rank) = (vec![5, u32::MAX - 7, u32::MAX - 3], u32::MAX);
        port.timers.push(Reverse((10, u32::MAX - 3, 2, 0)));
        port.vacate_queues(1..2);
        port.place_queues(1, &[QueueConfig::BEST_EFFORT], Some(2));
        assert_eq!((port.ranks.clone(), port.next_rank), (vec![0, 2, 3], 4));
        assert_eq!(port.timers.into_vec(), [Reverse((10, 3, 2, 0))]);
    }
}
