//! Microburst detection in packet time (docs/bursts.md): per scope (the port, a tenant, a
//! class), a sliding window of its bytes (the rate view) and its queue depth at the port (the
//! queue view), the events they open and close, their top flows, and what polled counters
//! would have shown of the same traffic.
//!
//! The enforcer feeds the [`Detector`] every packet after enforcing it, and every admission,
//! transmission start and verdict at the port; the detector changes no verdict.

mod event;
mod flows;
mod monitor;
mod polls;

use rustc_hash::FxHashMap;
use std::sync::Arc;

use crate::error::CoreError;
use crate::outcome::Outcome;
use crate::parse::PacketInfo;
use crate::verdict::{Verdict, DROP};
use event::Seen;
use flows::TopFlows;
pub use monitor::RateState;
use monitor::{Hot, Monitor};
use polls::PollClock;

pub use event::{event_fields, window_bps, BurstEvent, Scope, View};
pub use flows::{flow_fields, FlowKey, FlowRow, COUNTERS, REPORTED};
pub use polls::{check_intervals, PollView};

/// The shortest and longest windows a scope may have.
pub const MIN_WINDOW_NS: u64 = 1_000;
pub const MAX_WINDOW_NS: u64 = 10_000_000;

/// The queue view's thresholds: an event starts above `rise_bytes` and ends at or below
/// `fall_bytes`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct QueueThresholds {
    pub rise_bytes: u64,
    pub fall_bytes: u64,
}

/// One scope's `microburst` setting, its threshold resolved to bit/s.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct BurstConfig {
    pub window_ns: u64,
    pub threshold_bps: u64,
    pub queue: Option<QueueThresholds>,
}

impl BurstConfig {
    pub fn check(&self) -> Result<(), CoreError> {
        if !(MIN_WINDOW_NS..=MAX_WINDOW_NS).contains(&self.window_ns) {
            return Err(CoreError::spec(format!("window {} ns is not within 1 us to 10 ms", self.window_ns)));
        }
        if self.threshold_bps == 0 {
            return Err(CoreError::spec("threshold must be above 0"));
        }
        match self.queue {
            Some(q) if q.fall_bytes > q.rise_bytes => Err(CoreError::spec(format!("queue fall {} B is above its rise {} B", q.fall_bytes, q.rise_bytes))),
            _ => Ok(()),
        }
    }

    /// The most bytes the window may hold at or below the threshold.
    pub(super) fn limit_bytes(&self) -> u64 {
        let limit = u128::from(self.threshold_bps) * u128::from(self.window_ns) / 8_000_000_000;
        limit.min(u128::from(u64::MAX)) as u64
    }
}

/// A tenant's settings and its classes', by class id.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TenantBursts {
    pub name: String,
    pub tenant: Option<BurstConfig>,
    pub classes: Vec<(u16, BurstConfig)>,
}

impl TenantBursts {
    /// Whether any scope is watched: the tenant's own or a class's.
    pub fn watches_any(&self) -> bool {
        self.tenant.is_some() || !self.classes.is_empty()
    }
}

/// A policy's microburst settings, matched to the engine's tenants by name.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BurstSpec {
    pub port: Option<BurstConfig>,
    pub tenants: Vec<TenantBursts>,
    /// The polled views' intervals (docs/bursts.md, "Polled counters").
    pub poll_ns: Vec<u64>,
}

impl BurstSpec {
    pub fn check(&self) -> Result<(), CoreError> {
        check_intervals(&self.poll_ns).map_err(|err| err.within("poll"))?;
        if let Some(port) = &self.port {
            port.check().map_err(|err| err.within("port microburst"))?;
        }
        for tenant in &self.tenants {
            if let Some(config) = &tenant.tenant {
                config.check().map_err(|err| err.within(format!("tenant '{}' microburst", tenant.name)))?;
            }
            for (cls, config) in &tenant.classes {
                config.check().map_err(|err| err.within(format!("tenant '{}', class {cls} microburst", tenant.name)))?;
            }
        }
        Ok(())
    }
}

/// What a scope is, across policy updates.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ScopeKey {
    Port,
    Tenant(String),
    Class(String, u16),
}

/// A scope's totals (docs/bursts.md, "beside it, the truth").
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Totals {
    pub rate_events: u64,
    pub queue_events: u64,
    pub time_in_burst_ns: u64,
    /// The highest window rate, over every setting the scope had (each at its own window).
    pub peak_window_bps: u64,
    pub max_queue_bytes: u64,
}

impl Totals {
    fn add(&mut self, other: &Totals) {
        self.rate_events += other.rate_events;
        self.queue_events += other.queue_events;
        self.time_in_burst_ns += other.time_in_burst_ns;
        self.peak_window_bps = self.peak_window_bps.max(other.peak_window_bps);
        self.max_queue_bytes = self.max_queue_bytes.max(other.max_queue_bytes);
    }
}

/// One scope's statistics, for `Engine.burst_stats()`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScopeStats {
    pub key: ScopeKey,
    pub config: BurstConfig,
    pub totals: Totals,
    /// The polled views of the scope's current setting (a changed setting starts new ones).
    pub polls: Vec<PollView>,
}

/// Where ended events go, and the flow counters open events borrow.
#[derive(Debug, Default)]
pub(super) struct Sink {
    pub(super) events: Vec<BurstEvent>,
    pub(super) flows: Vec<FlowRow>,
    /// Where each event's flows start in `flows` (events end in id order).
    pub(super) flow_starts: Vec<usize>,
    #[allow(clippy::vec_box)] // boxes move between the pool and open events without a copy
    pub(super) pool: Vec<Box<TopFlows>>,
}

impl Sink {
    pub(super) fn take_flows(&mut self) -> Box<TopFlows> {
        self.pool.pop().unwrap_or_default()
    }
}

/// No monitor.
const NONE: u32 = u32::MAX;

/// A tenant's monitors: its own, and its classes' from `first_class` in `class_slots`.
#[derive(Debug, Clone, Copy)]
struct TenantSlots {
    tenant: u32,
    first_class: u32,
    classes: u32,
}

impl TenantSlots {
    /// A tenant with no scope.
    const NONE: TenantSlots = TenantSlots { tenant: NONE, first_class: 0, classes: 0 };

    /// Where its classes' monitors are in `class_slots`.
    fn class_range(&self) -> std::ops::Range<usize> {
        self.first_class as usize..(self.first_class + self.classes) as usize
    }
}

/// The detector of one engine; see the module documentation.
#[derive(Debug, Default)]
pub struct Detector {
    /// Every scope's hot state, side by side, and the rest of it, by the same index.
    hot: Vec<Hot>,
    monitors: Vec<Monitor>,
    port: Option<u32>,
    /// By the engine's tenant index.
    tenants: Vec<TenantSlots>,
    class_slots: Vec<u32>,
    /// By port queue: the tenant's and the class's monitors, and the bytes waiting there.
    queues: Vec<QueueSlots>,
    /// Tenant names events refer to, never removed.
    names: Vec<String>,
    name_ids: FxHashMap<String, i32>,
    sink: Sink,
    /// Totals of scopes whose setting changed or went away.
    archive: FxHashMap<ScopeKey, (BurstConfig, Totals)>,
    /// The instances of the shortest polling interval.
    clock: PollClock,
    /// The scopes that counted bytes in the shortest polling interval's current instance: only
    /// they fold at its end, so that a sparse capture does not pay for every scope each time.
    counted: Vec<u32>,
    /// Events already handed out by [`Detector::take_ended`].
    handed_out: usize,
}

#[derive(Debug, Clone, Copy)]
struct QueueSlots {
    monitors: [u32; 2],
    depth: u64,
}

/// A port queue of no tenant: watched by no scope, empty.
const VACANT_QUEUE: QueueSlots = QueueSlots { monitors: [NONE; 2], depth: 0 };

impl Detector {
    /// Whether any scope is watched: without one, the enforcer calls nothing here.
    #[inline]
    pub fn active(&self) -> bool {
        !self.monitors.is_empty()
    }

    /// Aligns the monitors with the engine's tenants (`names`) and the port's queues
    /// (`queues`: each one's tenant index and class id; empty without a port). A scope whose
    /// setting (and the polling intervals) did not change keeps its state; the others' open
    /// events end at `now`. `queues_kept`: the port was kept, so the bytes waiting in it stay.
    pub fn retarget(&mut self, spec: &BurstSpec, names: &[Arc<str>], queues: &[(usize, u16)], queues_kept: bool, now: u64) {
        let old_scopes = std::mem::take(&mut self.hot).into_iter().zip(std::mem::take(&mut self.monitors));
        let mut old: FxHashMap<ScopeKey, (Hot, Monitor)> = old_scopes.map(|(hot, m)| (m.key.clone(), (hot, m))).collect();
        let old_depths: Vec<u64> = if queues_kept { self.queues.iter().map(|q| q.depth).collect() } else { vec![0; queues.len()] };
        let by_name: FxHashMap<&str, &TenantBursts> = spec.tenants.iter().map(|t| (t.name.as_str(), t)).collect();
        let depth_of = |tenant: Option<usize>, cls: Option<u16>| -> u64 {
            let matches = |(t, c): &(usize, u16)| tenant.is_none_or(|tenant| *t == tenant) && cls.is_none_or(|cls| *c == cls);
            queues.iter().zip(&old_depths).filter(|(q, _)| matches(q)).map(|(_, depth)| depth).sum()
        };
        if self.clock.intervals_ns() != spec.poll_ns {
            self.clock = PollClock::new(&spec.poll_ns); // every scope starts anew (below)
        }
        let (mut hots, mut monitors, mut retired) = (Vec::new(), Vec::new(), Vec::new());
        let mut add = |key: ScopeKey, scope: Scope, tenant: i32, cls: i32, config: BurstConfig, depth: u64| -> u32 {
            let kept = match old.remove(&key) {
                Some((hot, m)) if m.config == config && m.polls.intervals_ns() == spec.poll_ns => Some((hot, m)),
                Some(changed) => {
                    retired.push(changed);
                    None
                }
                None => None,
            };
            let seen = Seen::new(scope, tenant, cls, &config);
            let (hot, monitor) = kept.unwrap_or_else(|| (Hot::new(&config), Monitor::new(key, seen, config, depth, &spec.poll_ns)));
            hots.push(hot);
            monitors.push(monitor);
            (monitors.len() - 1) as u32
        };
        let port = spec.port.map(|config| add(ScopeKey::Port, Scope::Port, -1, -1, config, depth_of(None, None)));
        let mut tenants = Vec::with_capacity(names.len());
        let mut class_slots = Vec::new();
        for (index, name) in names.iter().enumerate() {
            let Some(settings) = by_name.get(&**name) else {
                tenants.push(TenantSlots::NONE);
                continue;
            };
            let id = self.name_id(name);
            let tenant =
                settings.tenant.map_or(NONE, |config| add(ScopeKey::Tenant(name.to_string()), Scope::Tenant, id, -1, config, depth_of(Some(index), None)));
            let classes = settings.classes.iter().map(|(cls, _)| u32::from(*cls) + 1).max().unwrap_or(0);
            let first_class = class_slots.len() as u32;
            class_slots.resize(class_slots.len() + classes as usize, NONE);
            for &(cls, config) in &settings.classes {
                let key = ScopeKey::Class(name.to_string(), cls);
                class_slots[(first_class + u32::from(cls)) as usize] = add(key, Scope::Class, id, i32::from(cls), config, depth_of(Some(index), Some(cls)));
            }
            tenants.push(TenantSlots { tenant, first_class, classes });
        }
        retired.extend(old.into_values());
        self.retire(retired, now);
        self.queues = queues
            .iter()
            .zip(&old_depths)
            .map(|(&(tenant, cls), &depth)| {
                let slots = tenants.get(tenant).copied().unwrap_or(TenantSlots::NONE);
                let class = if u32::from(cls) < slots.classes { class_slots[(slots.first_class + u32::from(cls)) as usize] } else { NONE };
                QueueSlots { monitors: [slots.tenant, class], depth }
            })
            .collect();
        self.counted = (0..hots.len() as u32).filter(|&m| hots[m as usize].counted_bytes()).collect();
        (self.hot, self.monitors, self.port, self.tenants, self.class_slots) = (hots, monitors, port, tenants, class_slots);
    }

    /// Scopes whose setting changed or that went away: their open events end at `now` (in
    /// key order, so that event ids do not depend on where the scopes were), their totals stay.
    fn retire(&mut self, mut retired: Vec<(Hot, Monitor)>, now: u64) {
        retired.sort_by(|a, b| a.1.key.cmp(&b.1.key));
        for (mut hot, mut monitor) in retired {
            monitor.close(&mut hot, now, &mut self.sink);
            let archived = self.archive.entry(monitor.key.clone()).or_insert((monitor.config, Totals::default()));
            archived.0 = monitor.config;
            archived.1.add(&monitor.totals(&hot));
        }
    }

    /// Follows an empty line put in at `index` (no scope): the later tenants number up.
    pub fn open_tenant(&mut self, index: usize) {
        self.tenants.insert(index, TenantSlots::NONE);
    }

    /// Follows a tenant put on the empty line `index`, whose classes have the port queues
    /// `queues` (class `c` at `queues.start + c`, vacant or new at the end; none without a
    /// port): its scopes (`settings`, if it has a microburst setting) start as a new scope does
    /// in [`Detector::retarget`]. No other scope or queue changes.
    pub fn occupy_tenant(&mut self, index: usize, queues: std::ops::Range<usize>, settings: Option<&TenantBursts>) {
        let slots = settings.map_or(TenantSlots::NONE, |settings| self.add_scopes(settings, |_, _, _| None));
        self.tenants[index] = slots;
        if self.queues.len() < queues.end {
            self.queues.resize(queues.end, VACANT_QUEUE);
        }
        for (c, queue) in queues.enumerate() {
            self.queues[queue] = QueueSlots { monitors: [slots.tenant, self.class_monitor(slots, c)], depth: 0 };
        }
    }

    /// The port's queues numbered again: queue `order[i]` is queue `i` (the others, vacant, go).
    pub fn reorder_queues(&mut self, order: &[u32]) {
        self.queues = order.iter().map(|&old| self.queues[old as usize]).collect();
    }

    /// A tenant's scopes, after the others: its own and its classes' (a block of
    /// `class_slots` at the end); `kept` gives the monitor of a scope that keeps its state (by
    /// class id, `None` for the tenant's own), if there is one.
    fn add_scopes(&mut self, settings: &TenantBursts, kept: impl Fn(&Detector, Option<u16>, &BurstConfig) -> Option<u32>) -> TenantSlots {
        let (name, id) = (&settings.name, self.name_id(&settings.name));
        let tenant = match settings.tenant {
            Some(config) => kept(self, None, &config)
                .unwrap_or_else(|| self.add_scope(ScopeKey::Tenant(name.to_string()), Seen::new(Scope::Tenant, id, -1, &config), config)),
            None => NONE,
        };
        let classes = settings.classes.iter().map(|(cls, _)| u32::from(*cls) + 1).max().unwrap_or(0);
        let first_class = self.class_slots.len() as u32;
        self.class_slots.resize(self.class_slots.len() + classes as usize, NONE);
        for &(cls, config) in &settings.classes {
            let seen = Seen::new(Scope::Class, id, i32::from(cls), &config);
            let m = kept(self, Some(cls), &config).unwrap_or_else(|| self.add_scope(ScopeKey::Class(name.to_string(), cls), seen, config));
            self.class_slots[(first_class + u32::from(cls)) as usize] = m;
        }
        TenantSlots { tenant, first_class, classes }
    }

    fn add_scope(&mut self, key: ScopeKey, seen: Seen, config: BurstConfig) -> u32 {
        self.hot.push(Hot::new(&config));
        self.monitors.push(Monitor::new(key, seen, config, 0, self.clock.intervals_ns()));
        (self.monitors.len() - 1) as u32
    }

    /// The monitor of class `c` of a tenant with `slots` ([`NONE`] if it is not watched).
    fn class_monitor(&self, slots: TenantSlots, c: usize) -> u32 {
        if c < slots.classes as usize {
            self.class_slots[slots.first_class as usize + c]
        } else {
            NONE
        }
    }

    /// Whether tenant `index` may go by [`Detector::vacate_tenant`]: its port queues
    /// (`queues`) hold no bytes (the queue views' depths would lose them).
    pub fn removable(&self, index: usize, queues: std::ops::Range<usize>) -> bool {
        index < self.tenants.len() && self.queues.get(queues).is_some_and(|queues| queues.iter().all(|q| q.depth == 0))
    }

    /// Follows tenant `index` gone from its line, with its port queues `queues` (left vacant):
    /// its scopes go as in [`Detector::retarget`] (their open events end at `now`, their
    /// totals stay); no other scope changes. Whether it had scopes.
    pub fn vacate_tenant(&mut self, index: usize, queues: std::ops::Range<usize>, now: u64) -> bool {
        let slots = std::mem::replace(&mut self.tenants[index], TenantSlots::NONE);
        self.queues[queues].fill(VACANT_QUEUE);
        let gone: Vec<u32> = self.class_slots[slots.class_range()].iter().copied().chain([slots.tenant]).filter(|&m| m != NONE).collect();
        let had_scopes = !gone.is_empty();
        self.take_out(slots.class_range(), gone, now);
        had_scopes
    }

    /// Follows the empty line `index` taken away: the later tenants number down.
    pub fn close_tenant(&mut self, index: usize) {
        self.tenants.remove(index);
    }

    /// Follows tenant `index`'s microburst settings changed to `settings`, its classes having
    /// the port queues `queues`: as in [`Detector::retarget`], a scope whose setting did not
    /// change keeps its state, a changed or gone one ends its open events at `now` and keeps its
    /// totals, a new one starts empty. No other scope changes.
    pub fn rescope_tenant(&mut self, index: usize, queues: std::ops::Range<usize>, settings: Option<&TenantBursts>, now: u64) {
        let old = self.tenants[index];
        let unchanged = |d: &Detector, cls: Option<u16>, config: &BurstConfig| {
            let m = cls.map_or(old.tenant, |cls| d.class_monitor(old, usize::from(cls)));
            (m != NONE && d.monitors[m as usize].config == *config).then_some(m)
        };
        let slots = settings.map_or(TenantSlots::NONE, |settings| self.add_scopes(settings, unchanged));
        self.tenants[index] = slots;
        for (c, queue) in queues.enumerate() {
            self.queues[queue].monitors = [slots.tenant, self.class_monitor(slots, c)];
        }
        let in_use = |m: &u32| *m == slots.tenant || self.class_slots[slots.class_range()].contains(m);
        let gone = self.class_slots[old.class_range()].iter().chain([&old.tenant]).filter(|&m| *m != NONE && !in_use(m)).copied().collect();
        self.take_out(old.class_range(), gone, now);
    }

    /// Follows the port's microburst setting changed to `config`: as in [`Detector::retarget`],
    /// its scope starts anew with the bytes waiting at the port, the old one's open events
    /// ending at `now` and its totals kept. No other scope changes.
    pub fn rescope_port(&mut self, config: BurstConfig, poll_ns: &[u64], now: u64) {
        let Some(m) = self.port.map(|m| m as usize) else { return };
        let seen = Seen::new(Scope::Port, -1, -1, &config);
        let depth: u64 = self.queues.iter().map(|queue| queue.depth).sum();
        let hot = std::mem::replace(&mut self.hot[m], Hot::new(&config));
        let monitor = std::mem::replace(&mut self.monitors[m], Monitor::new(ScopeKey::Port, seen, config, depth, poll_ns));
        self.retire(vec![(hot, monitor)], now);
        self.counted.retain(|&counted| counted as usize != m); // the new scope has counted nothing
    }

    /// Takes out the class slots `classes` and the monitors `gone` (which no tenant or queue
    /// refers to any more): their open events end at `now`, their totals stay, and the later
    /// monitors' and class slots' indexes move down.
    fn take_out(&mut self, classes: std::ops::Range<usize>, mut gone: Vec<u32>, now: u64) {
        if gone.is_empty() && classes.is_empty() {
            return; // nothing moves: the common case, a tenant with no scope
        }
        self.class_slots.drain(classes.clone());
        gone.sort_unstable();
        let retired = gone.iter().rev().map(|&m| (self.hot.remove(m as usize), self.monitors.remove(m as usize))).collect();
        self.retire(retired, now);
        self.counted.retain(|m| gone.binary_search(m).is_err());
        let monitor = |m: u32| if m == NONE { NONE } else { m - gone.partition_point(|&g| g < m) as u32 };
        let class_count = classes.len() as u32;
        for slots in &mut self.tenants {
            slots.tenant = monitor(slots.tenant);
            if slots.first_class >= classes.end as u32 {
                slots.first_class -= class_count;
            }
        }
        for m in self.class_slots.iter_mut().chain(self.queues.iter_mut().flat_map(|q| q.monitors.iter_mut())).chain(self.counted.iter_mut()) {
            *m = monitor(*m);
        }
        self.port = self.port.map(monitor);
    }

    fn name_id(&mut self, name: &str) -> i32 {
        if let Some(&id) = self.name_ids.get(name) {
            return id;
        }
        self.names.push(name.to_string());
        let id = (self.names.len() - 1) as i32;
        self.name_ids.insert(name.to_string(), id);
        id
    }

    /// A packet after enforcement: `now` its time as enforced, `bytes` as the policy counts,
    /// `outcome` its row's (`Pending` if the port decides later).
    #[inline]
    pub fn observe(&mut self, now: u64, bytes: u32, verdict: &Verdict, info: &PacketInfo, outcome: u8) {
        if verdict.action == DROP {
            return;
        }
        if now >= self.clock.end {
            self.next_poll(now);
        }
        if let Some(port) = self.port {
            self.arrive(port, now, bytes, info, outcome);
        }
        let Some(&slots) = usize::try_from(verdict.tenant).ok().and_then(|t| self.tenants.get(t)) else { return };
        if slots.tenant != NONE {
            self.arrive(slots.tenant, now, bytes, info, outcome);
        }
        let cls = verdict.cls as u32; // -1 is out of range
        if cls < slots.classes {
            let slot = self.class_slots[(slots.first_class + cls) as usize];
            if slot != NONE {
                self.arrive(slot, now, bytes, info, outcome);
            }
        }
    }

    /// Whether an event of tenant `tenant`'s scope is open (of either view): one flag in the
    /// state its packet just read, so that a caller asks [`Detector::tenant_rate`] only then.
    #[inline]
    pub fn tenant_open(&self, tenant: usize) -> bool {
        self.tenants.get(tenant).and_then(|slots| self.hot.get(slots.tenant as usize)).is_some_and(|hot| hot.is_open())
    }

    /// Whether an event of the scope of tenant `tenant`'s class `cls` is open (see
    /// [`Detector::tenant_open`]).
    #[inline]
    pub fn class_open(&self, tenant: usize, cls: u16) -> bool {
        self.class_slot(tenant, cls).and_then(|slot| self.hot.get(slot)).is_some_and(|hot| hot.is_open())
    }

    /// The rate view of tenant `tenant`'s class `cls` at `now`, if its scope is watched.
    pub fn class_rate(&mut self, tenant: usize, cls: u16, now: u64) -> Option<RateState> {
        let slot = self.class_slot(tenant, cls)?;
        Some(self.monitors[slot].rate_at(&mut self.hot[slot], now, &mut self.sink))
    }

    fn class_slot(&self, tenant: usize, cls: u16) -> Option<usize> {
        let slots = self.tenants.get(tenant).filter(|slots| u32::from(cls) < slots.classes)?;
        Some(self.class_slots[(slots.first_class + u32::from(cls)) as usize]).filter(|&slot| slot != NONE).map(|slot| slot as usize)
    }

    /// Tenant `tenant`'s rate view at `now`, if its scope is watched (see [`RateState`]).
    pub fn tenant_rate(&mut self, tenant: usize, now: u64) -> Option<RateState> {
        let slot = self.tenants.get(tenant).map(|slots| slots.tenant).filter(|&slot| slot != NONE)? as usize;
        Some(self.monitors[slot].rate_at(&mut self.hot[slot], now, &mut self.sink))
    }

    /// Asks the cache for the state of the scopes a later packet will need (its tenant's and
    /// class's; the port's stays cached).
    #[inline]
    pub fn prefetch(&self, verdict: &Verdict) {
        let Some(&slots) = usize::try_from(verdict.tenant).ok().and_then(|t| self.tenants.get(t)) else { return };
        if let Some(hot) = self.hot.get(slots.tenant as usize) {
            hot.prefetch();
        }
        let cls = verdict.cls as u32;
        if cls < slots.classes {
            if let Some(hot) = self.hot.get(self.class_slots[(slots.first_class + cls) as usize] as usize) {
                hot.prefetch();
            }
        }
    }

    #[inline(always)]
    fn arrive(&mut self, scope: u32, now: u64, bytes: u32, info: &PacketInfo, outcome: u8) {
        let hot = &mut self.hot[scope as usize];
        if !hot.counted_bytes() {
            self.counted.push(scope);
        }
        self.monitors[scope as usize].arrive(hot, now, bytes, info, outcome, &mut self.sink);
    }

    /// The shortest polling interval ended (for the first time: began): the scopes that
    /// counted bytes in it fold them in.
    #[cold]
    fn next_poll(&mut self, now: u64) {
        let at = self.clock.instances();
        for &m in &self.counted {
            self.monitors[m as usize].fold_polls(&mut self.hot[m as usize], &at);
        }
        self.counted.clear();
        self.clock.advance(now);
    }

    /// The monitors of port queue `queue`'s scopes, in a fixed array (a port event allocates
    /// nothing): the port's, its tenant's, its class's, [`NONE`] where a scope is not watched.
    fn queue_monitors(&self, queue: u32) -> [u32; 3] {
        let [tenant, class] = self.queues.get(queue as usize).map_or([NONE; 2], |q| q.monitors);
        [self.port.unwrap_or(NONE), tenant, class]
    }

    /// A packet of port queue `queue` had its fate decided there at `now`: admitted (queued)
    /// or dropped.
    pub fn port_arrival(&mut self, queue: u32, now: u64, bytes: u32, outcome: Outcome) {
        let admitted = matches!(outcome, Outcome::Pass | Outcome::Remarked);
        if admitted {
            if let Some(slots) = self.queues.get_mut(queue as usize) {
                slots.depth += u64::from(bytes);
            }
        }
        for m in self.queue_monitors(queue).into_iter().filter(|&m| m != NONE).map(|m| m as usize) {
            let (hot, monitor) = (&mut self.hot[m], &mut self.monitors[m]);
            if admitted {
                monitor.admitted(hot, now, bytes, &mut self.sink);
            }
            monitor.decided(hot, now, outcome, &mut self.sink);
        }
    }

    /// A packet of port queue `queue` started its transmission at `now`.
    pub fn departed(&mut self, queue: u32, now: u64, bytes: u32) {
        if let Some(slots) = self.queues.get_mut(queue as usize) {
            slots.depth = slots.depth.saturating_sub(u64::from(bytes));
        }
        for m in self.queue_monitors(queue).into_iter().filter(|&m| m != NONE).map(|m| m as usize) {
            self.monitors[m].departed(&mut self.hot[m], now, bytes, &mut self.sink);
        }
    }

    /// The end of the stream: every window empties, so open rate events end (the port's
    /// drain, before, ended the queue events).
    pub fn drain(&mut self) {
        for m in self.scope_order() {
            self.monitors[m].leave_until(&mut self.hot[m], u64::MAX, &mut self.sink);
        }
    }

    /// Every monitor, the port's first, then each tenant's (in the engine's order) before its
    /// classes' (by class id): the order a drain numbers their events in (docs/bursts.md),
    /// wherever a tenant added or changed by itself put them.
    fn scope_order(&self) -> Vec<usize> {
        let classes = |slots: &TenantSlots| self.class_slots[slots.class_range()].iter().copied();
        let tenants = self.tenants.iter().flat_map(|slots| std::iter::once(slots.tenant).chain(classes(slots)));
        self.port.into_iter().chain(tenants).filter(|&m| m != NONE).map(|m| m as usize).collect()
    }

    /// Every event that ended, in id order.
    pub fn events(&self) -> &[BurstEvent] {
        &self.sink.events
    }

    /// The events that ended since the last call.
    pub fn take_ended(&mut self) -> &[BurstEvent] {
        let from = std::mem::replace(&mut self.handed_out, self.sink.events.len());
        &self.sink.events[from..]
    }

    /// The top flows of events `ids` (unknown ids give none), in the order asked.
    pub fn flows_of(&self, ids: &[u64]) -> Vec<FlowRow> {
        let sink = &self.sink;
        let range = |id: usize| sink.flow_starts[id]..sink.flow_starts.get(id + 1).copied().unwrap_or(sink.flows.len());
        ids.iter().filter(|&&id| id < sink.events.len() as u64).flat_map(|&id| sink.flows[range(id as usize)].iter().copied()).collect()
    }

    /// Tenant names, by the `tenant` of events.
    pub fn names(&self) -> &[String] {
        &self.names
    }

    /// Every scope watched now or before, in key order: its latest setting, its totals over
    /// every setting it had, and its current setting's polled views.
    pub fn stats(&self) -> Vec<ScopeStats> {
        let mut all: FxHashMap<ScopeKey, ScopeStats> = FxHashMap::default();
        for (key, (config, totals)) in &self.archive {
            all.insert(key.clone(), ScopeStats { key: key.clone(), config: *config, totals: *totals, polls: Vec::new() });
        }
        let at = self.clock.instances();
        for (hot, monitor) in self.hot.iter().zip(&self.monitors) {
            let entry = all.entry(monitor.key.clone()).or_insert_with(|| ScopeStats {
                key: monitor.key.clone(),
                config: monitor.config,
                totals: Totals::default(),
                polls: Vec::new(),
            });
            entry.config = monitor.config;
            entry.totals.add(&monitor.totals(hot));
            entry.polls = monitor.poll_views(hot, &at);
        }
        let mut all: Vec<ScopeStats> = all.into_values().collect();
        all.sort_by(|a, b| a.key.cmp(&b.key));
        all
    }
}

#[cfg(test)]
mod tests;
