//! Adaptive profiles in the data path (docs/qos.md, "Adaptive profiles"). A tenant with a
//! burst profile takes it from the packet after the one that starts a rate event of its
//! microburst scope, and leaves it once the event has ended and its hold has passed. Every
//! tenant with an overload profile takes it at the packet after which the port's buffer holds
//! more than its threshold; once the buffer has drained they return one by one, staggered, so
//! that they do not all come back at once. Each profile's contract and queues are worked out
//! when the policy is installed: a switch swaps a tenant's stage and sets its port queues, and
//! nothing is asked of the control path.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::Arc;

use rustc_hash::FxHashMap;

use super::update::lane;
use super::{Contract, Enforcer, Overload, PortState, Profiles, QosSpec, Stage, TenantQos, TenantState, NO_ROW};
use crate::bursts::RateState;
use crate::shaping::QueueConfig;
use crate::verdict::Verdict;

mod records;
pub use records::{profile_event_fields, ProfileCounts, ProfileEvent, ProfileId, SwitchCause};

const NONE: u32 = u32::MAX;

/// A tenant with profiles, and where it stands.
#[derive(Debug, Clone)]
struct Switchable {
    tenant: u32,
    name: i32,
    /// A class's profile: its class id and row (its stage, statistics row and port queue).
    class: Option<(u16, u32)>,
    active: ProfileId,
    /// Each profile's slot in `stages`: profiles with the tenant's own contract share its state.
    stage_of: [usize; 3],
    /// Meter and shaper state by slot; the active profile's lives in the tenant's line instead.
    stages: [Stage; 3],
    /// Each profile's class queues at the port (empty: it has no such profile).
    queues: [Vec<QueueConfig>; 3],
    has: [bool; 3],
    hold_ns: u64,
    /// Packet time between switches into the burst profile (0: no limit), and when the next
    /// may come (GCRA: a second's worth may come at once).
    switch_interval_ns: u64,
    switch_tat_ns: u64,
    /// A rate event of its scope is open.
    in_burst: bool,
    /// The latest burst was let switch the tenant; until when it keeps the profile.
    granted: bool,
    hold_until: u64,
    overloaded: bool,
    counts: ProfileCounts,
    /// Its packets (in the statistics rows) when it took its current profile.
    mark: u64,
}

impl Switchable {
    fn wanted(&self, now: u64) -> ProfileId {
        if self.overloaded && self.has[ProfileId::Overload as usize] {
            ProfileId::Overload
        } else if self.granted && (self.in_burst || now < self.hold_until) {
            ProfileId::Burst
        } else {
            ProfileId::Normal
        }
    }

    /// Whether the switch limit lets a burst switch the tenant at `now`.
    fn may_switch(&mut self, now: u64) -> bool {
        if self.switch_interval_ns == 0 {
            return true;
        }
        let tat = self.switch_tat_ns.max(now) + self.switch_interval_ns;
        if tat - now > 1_000_000_000 {
            return false;
        }
        self.switch_tat_ns = tat;
        true
    }
}

/// The port's overload state.
#[derive(Debug, Clone)]
struct OverloadState {
    config: Overload,
    active: bool,
    /// Tenants with an overload profile (their `switchable` slots), in policy order.
    order: Vec<u32>,
    /// How many have returned, and when the next returns (once the buffer drained).
    returned: usize,
    next_return: Option<u64>,
}

/// Every tenant's profiles; see the module documentation.
#[derive(Debug, Default)]
pub(super) struct Adaptive {
    /// What every packet reads, by the engine's tenant index: for a tenant with a burst
    /// profile its slot << 1 | whether it is in a burst, else [`NONE`].
    watch: Vec<u32>,
    /// The same by class row, for classes with a burst profile; empty if none has one.
    class_watch: Vec<u32>,
    switchable: Vec<Switchable>,
    /// (when, slot): a bursting tenant's window to settle, or its hold to end.
    due: BinaryHeap<Reverse<(u64, u32)>>,
    overload: Option<OverloadState>,
    events: Vec<ProfileEvent>,
    names: Vec<String>,
    name_ids: FxHashMap<String, i32>,
    /// Counts since the engine was made, by tenant name and class, up to the latest update.
    archive: FxHashMap<(String, Option<u16>), ProfileCounts>,
}

impl Adaptive {
    /// Whether a change of tenant `index` to `qos` concerns profiles (its own, or new ones):
    /// then the enforcer retargets rather than replacing its contract alone.
    pub(super) fn involves(&self, index: usize, qos: &TenantQos) -> bool {
        let profiles = qos.on_burst.is_some() || qos.on_overload.is_some() || qos.classes.iter().any(|c| c.on_burst.is_some());
        profiles || self.switchable.iter().any(|sw| sw.tenant as usize == index)
    }

    /// Follows an empty line put in at `index` ([`Enforcer::open`]): the later tenants number up.
    pub(super) fn open_tenant(&mut self, index: usize) {
        self.watch.insert(index, NONE);
        self.renumber_tenants(|tenant| if tenant >= index as u32 { tenant + 1 } else { tenant });
    }

    /// Follows the class rows `rows` given to a tenant ([`Adaptive::add_tenant`] then takes its
    /// profiles, if any): watched by none yet.
    pub(super) fn occupy_rows(&mut self, rows: std::ops::Range<usize>) {
        if !self.class_watch.is_empty() {
            if self.class_watch.len() < rows.end {
                self.class_watch.resize(rows.end, NONE);
            }
            self.class_watch[rows].fill(NONE);
        }
    }

    /// The switching states of the tenant just put in at `index` ([`Adaptive::open_tenant`],
    /// [`Adaptive::occupy_rows`]) for its profiles, its own and its classes': in their normal
    /// profiles, as a retarget would start them. One with an overload profile takes its place in the order of return
    /// (policy order); its slot is given back if the port is overloaded and its turn to return
    /// has not come: it is to take its overload profile now, as the others did.
    #[must_use]
    pub(super) fn add_tenant(
        &mut self,
        qos: &TenantQos,
        index: usize,
        tenants: &[TenantState],
        class_stages: &[Stage],
        spec: &QosSpec,
        profiles: &mut Profiles,
    ) -> Option<u32> {
        self.add_classes(qos, index as u32, &qos.name, tenants, class_stages, spec, profiles);
        if qos.on_burst.is_none() && qos.on_overload.is_none() {
            return None;
        }
        let name = self.name_id(&qos.name);
        let slot = self.switchable.len() as u32;
        if qos.on_burst.is_some() {
            self.watch[index] = slot << 1;
        }
        self.switchable.push(switchable(qos, index as u32, name, &tenants[index].stage, spec, profiles));
        let (Some(overload), true) = (&mut self.overload, qos.on_overload.is_some()) else { return None };
        let switchable = &self.switchable;
        let at = overload.order.partition_point(|&s| (switchable[s as usize].tenant as usize) < index);
        overload.order.insert(at, slot);
        if at < overload.returned {
            overload.returned += 1; // its turn has passed: it stays in its normal profile
            return None;
        }
        overload.active.then_some(slot)
    }

    /// Follows tenant `index` gone from its line, whose classes had the class rows `rows` (its
    /// switching states gone before: [`Enforcer::remove_switchable`]): they are watched by none.
    pub(super) fn vacate_tenant(&mut self, index: usize, rows: std::ops::Range<usize>) {
        self.watch[index] = NONE;
        if !self.class_watch.is_empty() {
            self.class_watch[rows].fill(NONE);
        }
    }

    /// Follows the empty line `index` taken away ([`Enforcer::close`]): the later tenants number down.
    pub(super) fn close_tenant(&mut self, index: usize) {
        self.watch.remove(index);
        self.renumber_tenants(|tenant| if tenant > index as u32 { tenant - 1 } else { tenant });
    }

    /// Every switching state's stages' profile numbers, through `renumber`.
    pub(super) fn renumber_profiles(&mut self, renumber: &mut impl FnMut(&mut u32)) {
        for stage in self.switchable.iter_mut().flat_map(|sw| &mut sw.stages) {
            renumber(&mut stage.profile);
        }
    }

    /// Slot `slot` out, its counts to the archive: the later slots number down.
    fn remove_slot(&mut self, slot: u32) {
        let sw = self.switchable.remove(slot as usize);
        let key = (self.names[sw.name as usize].clone(), sw.class.map(|(cls, _)| cls));
        self.archive.entry(key).or_default().add(&sw.counts);
        let later = |s: u32| if s > slot { s - 1 } else { s };
        for watch in self.watch.iter_mut().chain(&mut self.class_watch).filter(|watch| **watch != NONE) {
            *watch = later(*watch >> 1) << 1 | (*watch & 1);
        }
        let due = std::mem::take(&mut self.due).into_iter().filter(|Reverse((_, s))| *s != slot);
        self.due = due.map(|Reverse((at, s))| Reverse((at, later(s)))).collect();
        if let Some(overload) = &mut self.overload {
            if let Some(at) = overload.order.iter().position(|&s| s == slot) {
                overload.order.remove(at);
                overload.returned -= usize::from(at < overload.returned);
            }
            overload.order.iter_mut().for_each(|s| *s = later(*s));
        }
    }

    /// Every profile slot's tenant index, through `tenant`.
    fn renumber_tenants(&mut self, tenant: impl Fn(u32) -> u32) {
        for sw in &mut self.switchable {
            sw.tenant = tenant(sw.tenant);
        }
    }

    /// Whether any tenant has a profile: without one the enforcer calls nothing here.
    #[inline]
    pub(super) fn active(&self) -> bool {
        !self.switchable.is_empty()
    }

    fn set_in_burst(&mut self, slot: u32, in_burst: bool) {
        let sw = &mut self.switchable[slot as usize];
        sw.in_burst = in_burst;
        let watch = match sw.class {
            Some((_, row)) => self.class_watch.get_mut(row as usize),
            None => self.watch.get_mut(sw.tenant as usize),
        };
        if let Some(watch) = watch.filter(|w| **w != NONE) {
            *watch = slot << 1 | u32::from(in_burst);
        }
    }

    #[inline]
    fn next_due(&self) -> u64 {
        self.due.peek().map_or(u64::MAX, |Reverse((at, _))| *at)
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

    /// New thresholds of the port's overload setting, which it had and keeps: the state goes
    /// on, read against them from the next packet.
    pub(super) fn set_overload(&mut self, config: Option<Overload>) {
        if let (Some(state), Some(config)) = (&mut self.overload, config) {
            state.config = config;
        }
    }

    /// The profiles of the policy `spec` for the engine's tenants `names` (whose states are in
    /// `tenants`, all in their normal profile); the counts so far go to the archive.
    pub(super) fn retarget(&mut self, spec: &QosSpec, names: &[Arc<str>], tenants: &[TenantState], class_stages: &[Stage], profiles: &mut Profiles) {
        for sw in std::mem::take(&mut self.switchable) {
            let key = (self.names[sw.name as usize].clone(), sw.class.map(|(cls, _)| cls));
            self.archive.entry(key).or_default().add(&sw.counts);
        }
        self.due.clear();
        self.watch = vec![NONE; names.len()];
        self.class_watch.clear();
        let by_name: FxHashMap<&str, &TenantQos> = spec.tenants.iter().map(|t| (&*t.name, t)).collect();
        for (index, name) in names.iter().enumerate() {
            let Some(qos) = by_name.get(&**name) else { continue };
            self.add_classes(qos, index as u32, name, tenants, class_stages, spec, profiles);
            if qos.on_burst.is_none() && qos.on_overload.is_none() {
                continue;
            }
            let name = self.name_id(name);
            let slot = self.switchable.len() as u32;
            if qos.on_burst.is_some() {
                self.watch[index] = slot << 1;
            }
            self.switchable.push(switchable(qos, index as u32, name, &tenants[index].stage, spec, profiles));
        }
        self.overload = spec.overload.map(|config| OverloadState {
            config,
            active: false,
            order: (0..self.switchable.len() as u32).filter(|&s| self.switchable[s as usize].has[ProfileId::Overload as usize]).collect(),
            returned: 0,
            next_return: None,
        });
    }

    /// The switching state of `qos`'s classes that have a burst profile (tenant `index`).
    #[allow(clippy::too_many_arguments)] // the parts of the enforcer it reads
    fn add_classes(
        &mut self,
        qos: &TenantQos,
        index: u32,
        name: &str,
        tenants: &[TenantState],
        class_stages: &[Stage],
        spec: &QosSpec,
        profiles: &mut Profiles,
    ) {
        for (cls, class) in qos.classes.iter().enumerate() {
            let Some(burst) = &class.on_burst else { continue };
            let row = tenants[index as usize].first_row + cls as u32;
            if self.class_watch.is_empty() {
                self.class_watch = vec![NONE; class_stages.len()];
            }
            let slot = self.switchable.len() as u32;
            self.class_watch[row as usize] = slot << 1;
            let name = self.name_id(name);
            let mut sw = new_switchable(index, name, &class_stages[row as usize], vec![class.queue], burst.hold_ns, burst.max_switches_per_s);
            sw.class = Some((cls as u16, row));
            sw.add_profile(ProfileId::Burst, &burst.contract, &class.contract, vec![burst.queue], spec, profiles);
            self.switchable.push(sw);
        }
    }

    /// Tenant names, by the `tenant` of events.
    pub(super) fn names(&self) -> &[String] {
        &self.names
    }

    pub(super) fn events(&self) -> &[ProfileEvent] {
        &self.events
    }

    /// Every tenant that had profiles: its counts since the engine was made, by name order;
    /// `open`: each current tenant's packets since it took its profile.
    fn counts(&self, open: Vec<u64>) -> Vec<(String, Option<u16>, ProfileCounts)> {
        let mut all = self.archive.clone();
        for (sw, open) in self.switchable.iter().zip(open) {
            let mut counts = sw.counts;
            counts.packets[sw.active as usize] += open;
            all.entry((self.names[sw.name as usize].clone(), sw.class.map(|(cls, _)| cls))).or_default().add(&counts);
        }
        let mut all: Vec<(String, Option<u16>, ProfileCounts)> = all.into_iter().map(|((name, cls), counts)| (name, cls, counts)).collect();
        all.sort_by(|a, b| (&a.0, a.1).cmp(&(&b.0, b.1)));
        all
    }
}

/// A tenant's switching state from its spec; `normal`: its stage as installed.
fn switchable(qos: &TenantQos, tenant: u32, name: i32, normal: &Stage, spec: &QosSpec, profiles: &mut Profiles) -> Switchable {
    let (hold_ns, max_switches) = qos.on_burst.as_ref().map_or((0, 0), |b| (b.hold_ns, b.max_switches_per_s));
    let mut sw = new_switchable(tenant, name, normal, qos.classes.iter().map(|c| c.queue).collect(), hold_ns, max_switches);
    if let Some(burst) = &qos.on_burst {
        sw.add_profile(ProfileId::Burst, &burst.profile.contract, &qos.contract, burst.profile.queues.clone(), spec, profiles);
    }
    if let Some(profile) = &qos.on_overload {
        sw.add_profile(ProfileId::Overload, &profile.contract, &qos.contract, profile.queues.clone(), spec, profiles);
    }
    sw
}

/// A tenant's or a class's switching state in its normal profile: `normal` its stage,
/// `queues` its port queues.
fn new_switchable(tenant: u32, name: i32, normal: &Stage, queues: Vec<QueueConfig>, hold_ns: u64, max_switches_per_s: u32) -> Switchable {
    Switchable {
        tenant,
        name,
        class: None,
        active: ProfileId::Normal,
        stage_of: [0; 3],
        stages: [*normal; 3],
        queues: [queues, Vec::new(), Vec::new()],
        has: [true, false, false],
        hold_ns,
        switch_interval_ns: if max_switches_per_s > 0 { 1_000_000_000 / u64::from(max_switches_per_s) } else { 0 },
        switch_tat_ns: 0,
        in_burst: false,
        granted: false,
        hold_until: 0,
        overloaded: false,
        counts: ProfileCounts::default(),
        mark: 0,
    }
}

impl Switchable {
    /// Profile `id`: `contract` in place of the `own` one (a stage of its own unless they are
    /// equal), `queues` at the port.
    fn add_profile(&mut self, id: ProfileId, contract: &Contract, own: &Contract, queues: Vec<QueueConfig>, spec: &QosSpec, profiles: &mut Profiles) {
        let at = id as usize;
        self.has[at] = true;
        self.queues[at] = queues;
        if contract != own {
            let mut stage = Stage::new(contract);
            stage.profile = profiles.of(contract);
            stage.classes_enforced = self.stages[0].classes_enforced;
            stage.lane = lane(profiles, &stage, spec);
            (self.stages[at], self.stage_of[at]) = (stage, at);
        }
    }
}

impl Enforcer {
    /// Before the packet at `now` is enforced: holds that ended and bursts whose window fell
    /// by then end, and the port's buffer is checked for overload, so that the packet finds
    /// each tenant in the profile it has at that instant.
    #[inline]
    pub(super) fn adapt_before(&mut self, now: u64, port: Option<&mut PortState>) {
        match port {
            Some(state) => {
                if self.adaptive.next_due() <= now {
                    self.settle_due(now, Some(&mut *state));
                }
                self.watch_overload(now, state);
            }
            None if self.adaptive.next_due() <= now => self.settle_due(now, None),
            None => {}
        }
    }

    /// After the packet of `tenant` at `now` was enforced and its burst scopes saw it: switches
    /// the tenant if the packet started a burst. Reads a word of the tenant and a flag of its
    /// scope's state (which the detector just read): a rate event can have started only if an
    /// event of the scope is open.
    #[inline]
    pub(super) fn adapt(&mut self, verdict: &Verdict, now: u64, mut port: Option<&mut PortState>) {
        let tenant = verdict.tenant as usize; // -1 is out of range
        if let Some(&watch) = self.adaptive.watch.get(tenant).filter(|&&watch| watch != NONE) {
            if self.bursts.tenant_open(tenant) != (watch & 1 == 1) {
                self.rate_changed(watch >> 1, now, port.as_deref_mut());
            }
        }
        if !self.adaptive.class_watch.is_empty() {
            self.adapt_class(verdict, now, port);
        }
    }

    /// [`adapt`](Enforcer::adapt) for the packet's class (out of line: most policies have no
    /// class profile, and the loop keeps its registers).
    #[inline(never)]
    fn adapt_class(&mut self, verdict: &Verdict, now: u64, port: Option<&mut PortState>) {
        let Some(state) = self.tenants.get(verdict.tenant as usize).filter(|t| (verdict.cls as u32) < t.classes) else { return };
        let row = (state.first_row + verdict.cls as u32) as usize;
        let Some(&watch) = self.adaptive.class_watch.get(row).filter(|&&watch| watch != NONE) else { return };
        if self.bursts.class_open(verdict.tenant as usize, verdict.cls as u16) != (watch & 1 == 1) {
            self.rate_changed(watch >> 1, now, port);
        }
    }

    #[cold]
    fn rate_changed(&mut self, slot: u32, now: u64, port: Option<&mut PortState>) {
        let in_burst = self.adaptive.switchable[slot as usize].in_burst;
        if let Some(rate) = self.rate_of(slot, now).filter(|rate| rate.open != in_burst) {
            self.burst_changed(slot, rate, now, port);
        }
    }

    /// The rate view of `slot`'s scope (its tenant's or its class's) at `now`.
    fn rate_of(&mut self, slot: u32, now: u64) -> Option<RateState> {
        let sw = &self.adaptive.switchable[slot as usize];
        match sw.class {
            Some((cls, _)) => self.bursts.class_rate(sw.tenant as usize, cls, now),
            None => self.bursts.tenant_rate(sw.tenant as usize, now),
        }
    }

    /// The port's buffer after the packets that reached it by `now`: tenants switch to their
    /// overload profile when it passes the threshold, and return one by one once it drained.
    #[inline]
    fn watch_overload(&mut self, now: u64, state: &mut PortState) {
        let Some(overload) = &self.adaptive.overload else { return };
        let depth = state.port.queued_bytes();
        let config = overload.config;
        if !overload.active && depth <= config.above_bytes {
            return;
        }
        self.overload_changed(now, depth, config, state);
    }

    #[cold]
    fn overload_changed(&mut self, now: u64, depth: u64, config: Overload, state: &mut PortState) {
        let Some(overload) = &mut self.adaptive.overload else { return };
        let above = depth > config.above_bytes;
        // Who takes the overload profile now: everyone as it starts, those that returned if it
        // starts again while they return.
        let switching = match (above, overload.active) {
            (true, false) => {
                overload.returned = 0;
                overload.order.len()
            }
            (true, true) => std::mem::take(&mut overload.returned),
            (false, _) => 0,
        };
        if above {
            (overload.active, overload.next_return) = (true, None);
        } else if overload.next_return.is_none() && depth <= config.below_bytes {
            overload.next_return = Some(now);
        }
        let order = std::mem::take(&mut overload.order);
        for &slot in &order[..switching] {
            self.adaptive.switchable[slot as usize].overloaded = true;
            self.switch(slot, now, SwitchCause::Overload, Some(&mut *state));
        }
        if let Some(overload) = &mut self.adaptive.overload {
            overload.order = order;
        }
        self.return_staggered(now, config, state);
    }

    /// Tenants whose turn to return came by `now`, each at its own instant.
    fn return_staggered(&mut self, now: u64, config: Overload, state: &mut PortState) {
        loop {
            let Some(overload) = &mut self.adaptive.overload else { return };
            let Some(at) = overload.next_return.filter(|&at| at <= now) else { return };
            let Some(&slot) = overload.order.get(overload.returned) else {
                (overload.active, overload.next_return) = (false, None);
                return;
            };
            overload.returned += 1;
            let done = overload.returned == overload.order.len();
            overload.next_return = if done { None } else { Some(at + config.stagger_ns) };
            overload.active = !done;
            self.adaptive.switchable[slot as usize].overloaded = false;
            self.switch(slot, at, SwitchCause::Recovered, Some(&mut *state));
        }
    }

    /// A tenant's rate event started (`rate.open`) or ended.
    fn burst_changed(&mut self, slot: u32, rate: RateState, now: u64, port: Option<&mut PortState>) {
        self.adaptive.set_in_burst(slot, rate.open);
        let sw = &mut self.adaptive.switchable[slot as usize];
        if rate.open {
            if !sw.granted || now >= sw.hold_until {
                sw.granted = sw.may_switch(now);
            }
            if sw.granted {
                self.adaptive.due.push(Reverse((rate.next_leave_ns, slot)));
                self.switch(slot, now, SwitchCause::BurstStarted, port);
            }
            return;
        }
        sw.hold_until = rate.ended_ns.saturating_add(sw.hold_ns);
        let hold_until = sw.hold_until;
        if hold_until <= now {
            self.switch(slot, hold_until, SwitchCause::BurstEnded, port);
        } else {
            self.adaptive.due.push(Reverse((hold_until, slot)));
        }
    }

    /// Bursting tenants whose window may have fallen, and holds that ended, by `now`.
    #[cold]
    fn settle_due(&mut self, now: u64, mut port: Option<&mut PortState>) {
        while let Some(&Reverse((at, slot))) = self.adaptive.due.peek() {
            if at > now {
                return;
            }
            self.adaptive.due.pop();
            let sw = &self.adaptive.switchable[slot as usize];
            if sw.in_burst {
                let Some(rate) = self.rate_of(slot, now) else { continue };
                if rate.open {
                    self.adaptive.due.push(Reverse((rate.next_leave_ns, slot)));
                } else {
                    self.burst_changed(slot, rate, now, port.as_deref_mut());
                }
            } else if sw.active == ProfileId::Burst && sw.hold_until <= now {
                let hold_until = sw.hold_until;
                self.switch(slot, hold_until, SwitchCause::BurstEnded, port.as_deref_mut());
            }
        }
    }

    /// Puts tenant `slot` in the profile it wants at `time`, if it is not in it: its stage in its
    /// line, its queues at the port; the switch is an event.
    fn switch(&mut self, slot: u32, time: u64, cause: SwitchCause, port: Option<&mut PortState>) {
        let sw = &self.adaptive.switchable[slot as usize];
        let (from, to) = (sw.active, sw.wanted(time));
        if from == to {
            return;
        }
        self.close_segment(slot);
        let sw = &mut self.adaptive.switchable[slot as usize];
        if to != ProfileId::Burst {
            sw.granted = sw.granted && sw.in_burst; // a burst that ended needs a new grant
        }
        let first_row = self.tenants[sw.tenant as usize].first_row;
        let (stage, first_queue) = match sw.class {
            Some((_, row)) => (&mut self.class_stages[row as usize], row),
            None => (&mut self.tenants[sw.tenant as usize].stage, first_row),
        };
        let (was, will) = (sw.stage_of[from as usize], sw.stage_of[to as usize]);
        if was != will {
            sw.stages[was] = *stage;
            *stage = sw.stages[will];
        }
        if let Some(state) = port.filter(|_| sw.queues[from as usize] != sw.queues[to as usize]) {
            for (offset, queue) in sw.queues[to as usize].iter().enumerate() {
                state.port.set_queue(first_queue + offset as u32, queue);
            }
        }
        sw.active = to;
        sw.counts.switches += 1;
        let cls = sw.class.map_or(-1, |(cls, _)| i32::from(cls));
        self.adaptive.events.push(ProfileEvent { time_ns: time, tenant: sw.name, cls, from: from as u8, to: to as u8, cause: cause as u8, _pad: [0; 5] });
    }

    /// The packets of tenant `slot` since it took its profile go to that profile's count: the
    /// statistics rows count them (so that a packet pays nothing for the count).
    fn close_segment(&mut self, slot: u32) {
        let packets = self.packets_of(slot);
        let sw = &mut self.adaptive.switchable[slot as usize];
        sw.counts.packets[sw.active as usize] += packets - sw.mark;
        sw.mark = packets;
    }

    /// Packets of `slot`'s tenant or class in the statistics rows.
    fn packets_of(&self, slot: u32) -> u64 {
        let sw = &self.adaptive.switchable[slot as usize];
        match sw.class {
            Some((_, row)) => self.row_packets(row as usize),
            None => self.tenant_packets(sw.tenant as usize),
        }
    }

    /// Packets of tenant `tenant` in its statistics rows (its classes' and its own).
    fn tenant_packets(&self, tenant: usize) -> u64 {
        let Some(state) = self.tenants.get(tenant) else { return 0 };
        let first = state.first_row as usize;
        let classes = first..first + state.classes as usize;
        let own = self.own_rows.get(tenant).filter(|&&row| row != NO_ROW).map(|&row| row as usize);
        classes.chain(own).map(|row| self.row_packets(row)).sum()
    }

    /// Packets of statistics row `row` (0 if there is none).
    fn row_packets(&self, row: usize) -> u64 {
        if row < self.rows.len() {
            self.rows.counters(row).packets
        } else {
            0
        }
    }

    /// Tenant `index`'s switching states, if any, before the tenant goes alone
    /// ([`Enforcer::remove`]): each back in its normal profile as an update puts it (an event
    /// if it was not), its counts to the archive, its slot out (and out of the order of return
    /// from overload).
    pub(super) fn remove_switchable(&mut self, index: usize) {
        let slots: Vec<u32> =
            (0..self.adaptive.switchable.len() as u32).filter(|&slot| self.adaptive.switchable[slot as usize].tenant as usize == index).collect();
        let mut port = self.port.take();
        for &slot in slots.iter().rev() {
            self.back_to_normal(slot, port.as_mut());
            self.adaptive.remove_slot(slot);
        }
        self.port = port;
    }

    /// Slot `slot`, of a tenant put in while the port is overloaded, into its overload profile
    /// as the others took theirs ([`Adaptive::add_tenant`]).
    pub(super) fn overload_now(&mut self, slot: u32) {
        self.adaptive.switchable[slot as usize].overloaded = true;
        let mut port = self.port.take();
        self.switch(slot, self.clock_ns, SwitchCause::Overload, port.as_mut());
        self.port = port;
    }

    /// Slot `slot` in its normal profile, as an update puts it, its counts closed.
    fn back_to_normal(&mut self, slot: u32, port: Option<&mut PortState>) {
        self.adaptive.set_in_burst(slot, false);
        let sw = &mut self.adaptive.switchable[slot as usize];
        (sw.granted, sw.overloaded, sw.hold_until) = (false, false, 0);
        self.switch(slot, self.clock_ns, SwitchCause::Update, port);
        self.close_segment(slot);
    }

    /// Every tenant back in its normal profile, its counts closed (before an update, which
    /// starts from there and archives the statistics rows).
    pub(super) fn restore_profiles(&mut self) {
        let mut port = self.port.take();
        for slot in 0..self.adaptive.switchable.len() as u32 {
            self.back_to_normal(slot, port.as_mut());
        }
        self.port = port;
    }

    /// Every class row's port queue as the port has it: a tenant's in a profile, the profile's.
    pub(super) fn queues_at_port(&self) -> Vec<QueueConfig> {
        let mut queues = self.queues_by_row();
        for sw in self.adaptive.switchable.iter().filter(|sw| sw.active != ProfileId::Normal) {
            let first = sw.class.map_or(self.tenants[sw.tenant as usize].first_row, |(_, row)| row) as usize;
            let given = &sw.queues[sw.active as usize];
            queues[first..first + given.len()].copy_from_slice(given);
        }
        queues
    }

    /// At the end of the stream (after the bursts drained): holds end and overloaded tenants
    /// return, each at its own instant after the last packet time.
    pub(super) fn finish_profiles(&mut self) {
        let mut port = self.port.take();
        for slot in 0..self.adaptive.switchable.len() as u32 {
            let sw = &self.adaptive.switchable[slot as usize];
            if sw.in_burst {
                if let Some(rate) = self.rate_of(slot, u64::MAX) {
                    self.burst_changed(slot, rate, self.clock_ns, port.as_mut());
                }
            }
        }
        while let Some(Reverse((at, _))) = self.adaptive.due.peek().copied() {
            self.settle_due(at.max(self.clock_ns), port.as_mut());
        }
        if let (Some(state), Some(overload)) = (port.as_mut(), self.adaptive.overload.as_mut()) {
            if overload.active {
                let config = overload.config;
                let start = *overload.next_return.get_or_insert(self.clock_ns);
                let last = start + config.stagger_ns * overload.order.len() as u64;
                self.return_staggered(last, config, state);
            }
        }
        self.port = port;
    }

    /// The tenants' profile switches so far, in order.
    pub fn profile_events(&self) -> &[ProfileEvent] {
        self.adaptive.events()
    }

    /// Tenant names, by the `tenant` of profile events.
    pub fn profile_tenants(&self) -> Vec<String> {
        self.adaptive.names().to_vec()
    }

    /// Per tenant that had profiles: packets under each, and switches.
    pub fn profile_counts(&self) -> Vec<(String, Option<u16>, ProfileCounts)> {
        let open = (0..self.adaptive.switchable.len() as u32).map(|slot| self.packets_of(slot) - self.adaptive.switchable[slot as usize].mark);
        self.adaptive.counts(open.collect())
    }
}

#[cfg(test)]
mod tests;
