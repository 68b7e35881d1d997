//! A naive model of the port, for the tests only, written from the rules in `port.rs`'s doc and
//! sharing none of its structure: it sees the whole arrival list up front, scans every queue at
//! every decision, keeps each ring as a plain Vec, and finds when a bucket is ready by
//! searching time with a predicate instead of solving for it.

use std::collections::VecDeque;

use super::port::{Departure, PortConfig, PortDrop, PortMode, QueueConfig};

#[derive(Debug, Clone, Copy)]
pub struct Arrival {
    pub ns: u64,
    pub bytes: u32,
    pub queue: u32,
    pub packet: u64,
}

/// A token bucket, in the same exact units the rules define: bytes x 1e9 x line_rate, gaining
/// `rate` units per tick of 1/line_rate ns, `depth_bytes` deep, starting full.
#[derive(Debug, Clone)]
struct RefBucket {
    rate: u128,
    depth: i128,
    tokens: i128,
    last: u128,
}

impl RefBucket {
    fn new(rate: u64, depth_bytes: u64, line_rate: u64) -> Self {
        let depth = depth_bytes as i128 * 1_000_000_000 * line_rate as i128;
        RefBucket { rate: rate as u128, depth, tokens: depth, last: 0 }
    }

    fn level(&self, t: u128) -> i128 {
        let gained = (t - self.last).saturating_mul(self.rate);
        let gained = i128::try_from(gained).unwrap_or(i128::MAX / 2);
        std::cmp::min(self.depth, self.tokens.saturating_add(gained))
    }

    fn holds(&self, t: u128, bytes_units: i128) -> bool {
        self.level(t) >= std::cmp::min(bytes_units, self.depth)
    }

    fn take(&mut self, t: u128, bytes_units: i128) {
        self.tokens = self.level(t) - bytes_units;
        self.last = t;
    }
}

/// The first tick at or after `from` at which `ok` holds (it stays true from then on).
fn first_tick(from: u128, ok: impl Fn(u128) -> bool) -> u128 {
    if ok(from) {
        return from;
    }
    let mut step = 1u128;
    while !ok(from + step) {
        step *= 2;
    }
    let (mut bad, mut good) = (from + step / 2, from + step);
    if step == 1 {
        bad = from;
    }
    while good - bad > 1 {
        let mid = bad + (good - bad) / 2;
        if ok(mid) {
            good = mid;
        } else {
            bad = mid;
        }
    }
    good
}

struct RefQueue {
    config: QueueConfig,
    waiting: VecDeque<(Arrival, u128)>,
    guarantee: Option<RefBucket>,
    ceil: Option<RefBucket>,
    deficit: [u64; 2],
    in_turn: [bool; 2],
    /// The last event that could let the queue join a ring: (tick, kind, order), kind 0 for
    /// the arrival that made it backlogged (order = arrival index), 2 for its own send.
    since: (u128, u8, u64),
}

pub struct RefPort {
    config: PortConfig,
    queues: Vec<RefQueue>,
    /// rings[phase][priority]: phase 0 = within guarantee, 1 = below ceiling.
    rings: [Vec<Vec<usize>>; 2],
    fifo: VecDeque<(Arrival, u128)>,
    line_free: u128,
    pub departures: Vec<Departure>,
    pub verdicts: Vec<Result<(), PortDrop>>,
}

/// 1 ms at the rate, at least 9216 B: a bucket's depth when no burst is given.
fn default_depth(rate: u64) -> u64 {
    std::cmp::max(rate / 1000, 9216)
}

impl RefPort {
    pub fn new(config: PortConfig, queues: &[QueueConfig]) -> Self {
        let line = config.line_rate;
        let queues = queues
            .iter()
            .map(|&c| {
                let guarantee_depth = if c.burst_bytes > 0 { c.burst_bytes } else { default_depth(c.guarantee) };
                let ceil_depth = if c.guarantee > 0 { std::cmp::max(default_depth(c.ceil), guarantee_depth) } else { default_depth(c.ceil) };
                RefQueue {
                    config: c,
                    waiting: VecDeque::new(),
                    guarantee: if c.guarantee > 0 { Some(RefBucket::new(c.guarantee, guarantee_depth, line)) } else { None },
                    ceil: if c.ceil > 0 && c.ceil < line { Some(RefBucket::new(c.ceil, ceil_depth, line)) } else { None },
                    deficit: [0, 0],
                    in_turn: [false, false],
                    since: (0, 0, 0),
                }
            })
            .collect();
        RefPort {
            config,
            queues,
            rings: [vec![Vec::new(); 256], vec![Vec::new(); 256]],
            fifo: VecDeque::new(),
            line_free: 0,
            departures: Vec::new(),
            verdicts: Vec::new(),
        }
    }

    /// Runs the whole arrival list (times must not decrease) and everything after it.
    pub fn run(mut self, arrivals: &[Arrival]) -> Self {
        let mut next = 0;
        loop {
            let decision = self.next_decision();
            match (arrivals.get(next), decision) {
                (Some(a), Some(t)) if (a.ns as u128) * (self.config.line_rate as u128) > t => self.decide(t),
                (Some(a), _) => {
                    self.arrive(*a, next as u64);
                    next += 1;
                }
                (None, Some(t)) => self.decide(t),
                (None, None) => return self,
            }
        }
    }

    fn units(&self, bytes: u32) -> i128 {
        bytes as i128 * 1_000_000_000 * self.config.line_rate as i128
    }

    fn arrive(&mut self, a: Arrival, index: u64) {
        let tick = a.ns as u128 * self.config.line_rate as u128;
        if a.queue as usize >= self.queues.len() {
            self.verdicts.push(Err(PortDrop::UnknownQueue));
            return;
        }
        let verdict = match self.config.mode {
            PortMode::SharedFifo => {
                let total: u64 = self.fifo.iter().map(|(w, _)| w.bytes as u64).sum();
                if total + a.bytes as u64 > self.config.buffer_bytes {
                    Err(PortDrop::BufferFull)
                } else {
                    Ok(())
                }
            }
            PortMode::PerTenant => self.per_queue_verdict(a),
        };
        let queue = &mut self.queues[a.queue as usize];
        self.verdicts.push(verdict);
        if verdict.is_err() {
            return;
        }
        match self.config.mode {
            PortMode::SharedFifo => self.fifo.push_back((a, tick)),
            PortMode::PerTenant => {
                if queue.waiting.is_empty() {
                    queue.since = (tick, 0, index);
                }
                queue.waiting.push_back((a, tick));
            }
        }
    }

    /// Admission to a queue: its fixed limit; then its reserve; then its dynamic threshold
    /// (its bytes beyond the reserve at most alpha x the free shared pool) and the pool's room.
    fn per_queue_verdict(&self, a: Arrival) -> Result<(), PortDrop> {
        let held = |q: &RefQueue| q.waiting.iter().map(|(w, _)| w.bytes as u64).sum::<u64>();
        let beyond_reserve = |q: &RefQueue, bytes: u64| bytes.saturating_sub(q.config.reserved_bytes);
        let pool = self.config.buffer_bytes - self.queues.iter().map(|q| q.config.reserved_bytes).sum::<u64>();
        let in_pool: u64 = self.queues.iter().map(|q| beyond_reserve(q, held(q))).sum();
        let queue = &self.queues[a.queue as usize];
        let after = held(queue) + a.bytes as u64;
        if queue.config.limit_bytes > 0 && after > queue.config.limit_bytes {
            return Err(PortDrop::QueueLimit);
        }
        if after <= queue.config.reserved_bytes {
            return Ok(());
        }
        let free = pool - in_pool;
        if let Some(k) = queue.config.alpha_log2 {
            // alpha = 2^k as an exact fraction: held x 2^-k <= free for k < 0.
            let (num, den) = if k >= 0 { (1u128 << k, 1u128) } else { (1, 1u128 << -k) };
            if beyond_reserve(queue, after) as u128 * den > free as u128 * num {
                return Err(PortDrop::QueueLimit);
            }
        }
        if in_pool - beyond_reserve(queue, held(queue)) + beyond_reserve(queue, after) > pool {
            return Err(PortDrop::BufferFull);
        }
        Ok(())
    }

    /// Whether queue `q` may send in `phase` at tick `t`.
    fn may_send(&self, q: usize, phase: usize, t: u128) -> bool {
        let queue = &self.queues[q];
        let Some((head, _)) = queue.waiting.front() else {
            return false;
        };
        let need = self.units(head.bytes);
        let below_ceiling = queue.ceil.as_ref().map(|b| b.holds(t, need)).unwrap_or(true);
        let within_guarantee = queue.guarantee.as_ref().map(|b| b.holds(t, need)).unwrap_or(false);
        below_ceiling && (phase == 1 || within_guarantee)
    }

    /// When (and in which order) a backlogged queue joins `phase`'s ring, if it is not in it.
    fn join_key(&self, q: usize, phase: usize) -> (u128, u8, u64) {
        let since = self.queues[q].since;
        let ready = first_tick(since.0, |t| self.may_send(q, phase, t));
        if ready == since.0 {
            since
        } else {
            (ready, 1, q as u64)
        }
    }

    fn next_decision(&self) -> Option<u128> {
        match self.config.mode {
            PortMode::SharedFifo => self.fifo.front().map(|(_, tick)| std::cmp::max(*tick, self.line_free)),
            PortMode::PerTenant => {
                let joins = (0..self.queues.len()).filter(|&q| !self.queues[q].waiting.is_empty()).map(|q| {
                    let prio = self.queues[q].config.priority as usize;
                    if self.rings[1][prio].contains(&q) {
                        0
                    } else {
                        self.join_key(q, 1).0
                    }
                });
                joins.min().map(|t| std::cmp::max(t, self.line_free))
            }
        }
    }

    fn decide(&mut self, t: u128) {
        if self.config.mode == PortMode::SharedFifo {
            let (a, _) = self.fifo.pop_front().unwrap();
            self.record(a, t);
            return;
        }
        // Queues that became able to send since the last decision join, in the order they did.
        for phase in 0..2 {
            let mut joining = Vec::new();
            for q in 0..self.queues.len() {
                let prio = self.queues[q].config.priority as usize;
                if self.may_send(q, phase, t) && !self.rings[phase][prio].contains(&q) {
                    joining.push((self.join_key(q, phase), q));
                }
            }
            joining.sort();
            for (_, q) in joining {
                let prio = self.queues[q].config.priority as usize;
                self.rings[phase][prio].push(q);
            }
        }
        let phase = if self.rings[0].iter().any(|r| !r.is_empty()) { 0 } else { 1 };
        let prio = self.rings[phase].iter().position(|r| !r.is_empty()).expect("someone may send");
        // Deficit round robin on that ring.
        let q = loop {
            let q = self.rings[phase][prio][0];
            let quantum = self.queues[q].config.weight as u64 * 9216;
            let head_bytes = self.queues[q].waiting[0].0.bytes as u64;
            let queue = &mut self.queues[q];
            if !queue.in_turn[phase] {
                queue.in_turn[phase] = true;
                queue.deficit[phase] += quantum;
            }
            if head_bytes <= queue.deficit[phase] {
                queue.deficit[phase] -= head_bytes;
                break q;
            }
            queue.in_turn[phase] = false;
            let ring = &mut self.rings[phase][prio];
            ring.remove(0);
            ring.push(q);
        };
        let (a, _) = self.queues[q].waiting.pop_front().unwrap();
        let units = self.units(a.bytes);
        let queue = &mut self.queues[q];
        if let Some(b) = queue.ceil.as_mut() {
            b.take(t, units);
        }
        if phase == 0 {
            queue.guarantee.as_mut().unwrap().take(t, units);
        }
        queue.since = (t, 2, 0);
        self.record(a, t);
        // Whoever can no longer send in a phase leaves its ring.
        for phase in 0..2 {
            for prio in 0..256 {
                let ring = std::mem::take(&mut self.rings[phase][prio]);
                let (stay, go): (Vec<usize>, Vec<usize>) = ring.into_iter().partition(|&q| self.may_send(q, phase, t));
                for q in go {
                    self.queues[q].in_turn[phase] = false;
                }
                self.rings[phase][prio] = stay;
            }
        }
        for queue in self.queues.iter_mut().filter(|q| q.waiting.is_empty()) {
            queue.deficit = [0, 0];
            queue.in_turn = [false, false];
        }
    }

    fn record(&mut self, a: Arrival, t: u128) {
        let line = self.config.line_rate as u128;
        let end = t + a.bytes as u128 * 1_000_000_000;
        self.line_free = end;
        let ns = |tick: u128| tick.div_ceil(line) as u64;
        self.departures.push(Departure { packet: a.packet, queue: a.queue, arrival_ns: a.ns, start_ns: ns(t), depart_ns: ns(end), bytes: a.bytes });
    }
}
