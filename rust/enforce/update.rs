//! How the enforcer follows policy updates: by tenant name, a tenant whose contract did not
//! change keeps its meters and shapers ([`Enforcer::retarget`]), and a one-tenant change of
//! contract with the same classes touches that tenant and its port queues alone
//! ([`Enforcer::replace_contracts`]), and so does a tenant added ([`Enforcer::insert`]),
//! removed ([`Enforcer::remove`]) or reshaped ([`Enforcer::reshape`]), its rows and queues
//! taken or left vacant where they are (`enforce/lines.rs`), and one moved (both, keeping its
//! stages: `enforce/moves.rs`).

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::hash::BuildHasher;
use std::sync::Arc;

use rustc_hash::{FxBuildHasher, FxHashMap, FxHashSet};

use super::kept::{same_name, Kept, KeptClass, TermsPool};
use super::lines::VacantRows;
use super::rows::StatsRows;
use super::{Contract, Enforcer, InFlight, Lane, Overload, PortState, Profiles, QosSpec, Stage, StatsKey, TenantQos, TenantState, NO_ROW};
use crate::bursts::{BurstConfig, TenantBursts};
use crate::shaping::port::check_queues;
use crate::shaping::{Port, PortConfig, QueueConfig, WeightScale};

impl Enforcer {
    /// `spec` (checked) applies from the next [`retarget`](Enforcer::retarget); `None`
    /// withdraws a spec whose tables were refused.
    pub fn stage(&mut self, spec: Option<QosSpec>) {
        self.staged = spec;
    }

    /// Aligns the state with the engine's new tenants (by name): a tenant whose contract
    /// (and the policy-wide count and colour map) did not change keeps its meters and shapers,
    /// whatever its port queues; the port keeps its packets if no port setting changed and it
    /// has the same queues (by tenant and class), each taking its new configuration in place.
    pub fn retarget(&mut self, names: &[Arc<str>]) {
        self.restore_profiles();
        let old_keys = self.row_keys();
        let mut spec = self.staged.take().unwrap_or_else(|| self.current_spec());
        let same_globals = spec.count == self.spec.count && spec.color_map == self.spec.color_map;
        let old_queues: Vec<QueueConfig> = if self.port.is_some() { self.queues_by_row() } else { Vec::new() };
        let mut old = self.take_states();
        let by_name: FxHashMap<&str, &TenantQos> = spec.tenants.iter().map(|t| (&*t.name, t)).collect();
        // Packets read these at random: huge pages spare a TLB miss per packet when they are large.
        let class_count = names.iter().filter_map(|name| by_name.get(&**name)).map(|qos| qos.classes.len()).sum();
        let keep_class_stages = names.iter().filter_map(|name| by_name.get(&**name)).any(|qos| classes_enforced(qos));
        // Of their exact sizes and room for tenants added later (`append`): grown by pushes,
        // they would keep up to half again as slack, and copy themselves whole on the way.
        let mut tenants = crate::memory::with_capacity(names.len() + room_for(names.len()));
        let mut class_stages = crate::memory::with_capacity(if keep_class_stages { class_count + room_for(class_count) } else { 0 });
        let mut class_rows = 0;
        let mut contracts = Vec::with_capacity(names.len() + room_for(names.len()));
        let mut terms = TermsPool::default();
        let (mut queues, mut queue_scopes) = (Vec::with_capacity(class_count), Vec::with_capacity(class_count));
        let mut profiles = Profiles::default();
        for (index, name) in names.iter().enumerate() {
            let Some(&qos) = by_name.get(&**name) else {
                tenants.push(TenantState::without_contract());
                contracts.push(Kept::without_contract(name));
                continue;
            };
            let kept = old.remove(&**name).filter(|(old_qos, ..)| same_globals && old_qos.enforces(qos, &self.profiles));
            let (mut stage, mut classes) = kept.map_or_else(|| (Stage::new(&qos.contract), Vec::new()), |(_, stage, classes)| (stage, classes));
            let kept = terms.keep(qos, &mut profiles);
            stage.profile = kept.profile();
            stage.classes_enforced = classes_enforced(qos);
            stage.lane = lane(&profiles, &stage, &spec);
            tenants.push(TenantState { stage, first_row: class_rows as u32, classes: qos.classes.len() as u32 });
            class_rows += qos.classes.len();
            if keep_class_stages {
                if classes.is_empty() {
                    // None kept (new, or none was kept before): each fresh.
                    classes = qos.classes.iter().map(|c| Stage::new(&c.contract)).collect();
                }
                for (class_stage, class) in classes.iter_mut().zip(kept.classes()) {
                    class_stage.profile = class.profile;
                }
                class_stages.extend(classes);
            }
            queues.extend(qos.classes.iter().map(|class| class.queue));
            queue_scopes.extend((0..qos.classes.len()).map(|c| (index, c as u16)));
            contracts.push(kept);
        }
        let new_class_keys = class_keys(&contracts);
        let port_kept = self.replace_port(spec.port, &old_queues, queues, &old_keys[..self.class_rows], &new_class_keys);
        if let Some(state) = &mut self.port {
            state.port.set_weight_scale(spec.weight_scale);
        }
        let queue_scopes = if spec.port.is_some() { queue_scopes } else { Vec::new() };
        self.bursts.retarget(&spec.bursts, names, &queue_scopes, port_kept, self.clock_ns);
        self.archive_rows(&old_keys);
        self.class_rows = class_rows;
        self.no_tenant_row = self.class_rows + room_for(self.class_rows);
        self.rows = StatsRows::zeroed(self.no_tenant_row + 1);
        self.vacant = VacantRows::default();
        self.own_rows = Vec::with_capacity(names.len() + room_for(names.len()));
        self.own_rows.resize(names.len(), NO_ROW);
        self.free_rows = Vec::new();
        self.name_hashes = FxHashMap::with_capacity_and_hasher(names.len() + room_for(names.len()), FxBuildHasher);
        for kept in contracts.iter().filter(|kept| kept.has_contract()) {
            *self.name_hashes.entry(name_hash(&kept.name)).or_default() += 1;
        }
        self.adaptive.retarget(&spec, names, &tenants, &class_stages, &mut profiles);
        profiles.shrink_to(room_for);
        (self.tenants, self.contracts, self.terms, self.class_stages, self.profiles) = (tenants, contracts, terms, class_stages, profiles);
        self.profiles_numbered = self.profiles.len();
        self.rebind_timeline();
        // Each contract is kept once, in `contracts`: the spec keeps only those of no tenant of the tables.
        let in_tables: FxHashSet<&str> = names.iter().map(|name| &**name).collect();
        spec.tenants.retain(|t| !in_tables.contains(&*t.name));
        spec.tenants.shrink_to_fit();
        self.spec = spec;
    }

    /// Makes the port queues' shares units of weight through `scale` (a policy's guarantees'
    /// common divisor changed): the port's quanta alone change.
    pub fn set_weight_scale(&mut self, scale: WeightScale) {
        self.spec.weight_scale = scale;
        if let Some(state) = &mut self.port {
            state.port.set_weight_scale(scale);
        }
    }

    /// The spec in force: the contracts of the tenants in the tables, and those kept for tenants not in them.
    fn current_spec(&self) -> QosSpec {
        let mut spec = self.spec.clone();
        spec.tenants.extend(self.contracts.iter().filter_map(|kept| kept.qos(&self.profiles)));
        spec
    }

    /// Puts each `(index, contract)` in place of tenant `index`'s contract, touching nothing
    /// else, when that is all that changed: the tenant keeps its name and classes (so its
    /// statistics rows, the port and burst scopes stand), and no staged spec waits. A tenant
    /// whose contract changed starts with full buckets, as [`Enforcer::retarget`] does, and one
    /// whose port queues alone changed (re-weighed) keeps them; a port queue whose
    /// configuration changed takes it in place ([`Port::set_queue`]). Changes
    /// nothing and returns false when any of them is more than that.
    pub fn replace_contracts(&mut self, changes: &[(usize, TenantQos)]) -> bool {
        let same_shape = |index: usize, qos: &TenantQos| match self.contracts.get(index) {
            Some(old) => old.has_contract() && same_name(&old.name, &qos.name) && old.classes().len() == qos.classes.len(),
            None => false,
        };
        let mut seen = FxHashSet::default();
        let alone = |index: usize, qos: &TenantQos| same_shape(index, qos) && !self.adaptive.involves(index, qos);
        // A tenant changed twice in one go would count its old queues twice in the port's sums.
        if self.staged.is_some() || !changes.iter().all(|(index, qos)| seen.insert(*index) && alone(*index, qos)) {
            return false;
        }
        let queues = self.queue_changes(changes);
        let (old, new): (Vec<QueueConfig>, Vec<QueueConfig>) = queues.iter().map(|(_, old, new)| (*old, *new)).unzip();
        let sums = self.port_sums_with(&old, &new);
        if !queues.is_empty() && sums.is_none() {
            return false;
        }
        for (index, qos) in changes {
            let index = *index;
            let kept = &self.contracts[index];
            if kept.enforces(qos, &self.profiles) {
                if !kept.queues_match(qos) {
                    // Re-weighed: its queues change (below), its stages go on.
                    let kept = self.terms.requeued(kept, qos);
                    self.terms.release(std::mem::replace(&mut self.contracts[index], kept));
                }
                continue;
            }
            let kept = self.terms.keep(qos, &mut self.profiles);
            let stage = self.fresh_stage(qos, &kept);
            if stage.classes_enforced {
                self.make_class_stages();
            }
            let first = self.tenants[index].first_row as usize;
            if !self.class_stages.is_empty() {
                for (c, class) in kept.classes().iter().enumerate() {
                    self.class_stages[first + c] = class_stage(&self.profiles, class);
                }
            }
            self.tenants[index].stage = stage;
            self.terms.release(std::mem::replace(&mut self.contracts[index], kept));
        }
        if let (Some(state), Some(sums)) = (&mut self.port, sums) {
            (state.guaranteed, state.reserved) = sums;
            set_queues(&mut state.port, queues);
        }
        self.compact_profiles_if_due();
        true
    }

    /// Follows tenant `index`'s microburst settings changed to `bursts` (`None`: it has none
    /// now), its contract already replaced ([`crate::bursts::Detector::rescope_tenant`]).
    pub fn rescope(&mut self, index: usize, bursts: Option<TenantBursts>) {
        let queues = if self.port.is_some() { self.class_rows_of(index) } else { 0..0 };
        self.bursts.rescope_tenant(index, queues, bursts.as_ref(), self.clock_ns);
        let name = self.tenant_name(index).to_owned();
        self.spec.bursts.tenants.retain(|b| b.name != name); // what a later full retarget reads
        self.spec.bursts.tenants.extend(bursts);
    }

    /// Takes tenants added after the others ([`Enforcer::insert`] at the end).
    pub fn append(&mut self, added: Vec<TenantQos>) -> bool {
        self.insert(self.tenants.len(), added)
    }

    /// Takes tenants put in at `index` on (before the tenant there, if any), touching no other
    /// tenant's state: their class rows take rows that tenants taken out left vacant, or the
    /// room's first rows, and so do their port queues; no other tenant's rows or queues move.
    /// Each starts as in a fresh engine, with full buckets and zero counters, and no microburst
    /// scope ([`Enforcer::insert_watched`] gives them theirs). One with an overload profile
    /// takes it at once if the port is overloaded and its turn to return has not come. A
    /// tenant the update moves ([`Enforcer::begin_moves`]) takes the meters and shapers it had
    /// instead, and may come in while its copy is still in place. Changes nothing and returns
    /// false when it takes a full retarget: a spec waits, a tenant has a burst profile without
    /// its microburst scope ([`Enforcer::insert_watched`] gives scopes), or a name already
    /// given (or a hash collision), the room is too small, or the port refuses their queues.
    pub fn insert(&mut self, index: usize, added: Vec<TenantQos>) -> bool {
        self.insert_watched(index, added, Vec::new())
    }

    /// [`Enforcer::insert`] of tenants of which those named in `bursts` have microburst
    /// settings: their scopes start as a new scope does in a full retarget, and no other
    /// scope changes; their burst profiles start in their normal profiles, as in a retarget.
    pub fn insert_watched(&mut self, index: usize, added: Vec<TenantQos>, bursts: Vec<TenantBursts>) -> bool {
        let lines = self.tenants.len() + added.len() <= self.tenants.capacity();
        if index > self.tenants.len() || !lines || !self.admits(&added, &bursts) {
            return false;
        }
        for (at, qos) in (index..).zip(added) {
            self.open(at);
            self.occupy(at, qos, &bursts);
        }
        self.admitted(bursts);
        true
    }

    /// Puts `qos` in place of tenant `index`, as [`Enforcer::remove`] then
    /// [`Enforcer::insert_watched`] at `index` would, for a tenant whose name or classes
    /// changed (else [`Enforcer::replace_contracts`] keeps its rows): the old tenant's state
    /// goes, the new one's starts, and no other tenant's line, rows or queues move. Returns
    /// false when either takes a full retarget; the old tenant may then be gone already.
    pub fn reshape(&mut self, index: usize, qos: TenantQos, bursts: Vec<TenantBursts>) -> bool {
        let added = [qos];
        if !self.vacate(index) || !self.admits(&added, &bursts) {
            return false;
        }
        let [qos] = added;
        self.occupy(index, qos, &bursts);
        self.admitted(bursts);
        true
    }

    /// Whether tenants `added` (with microburst settings `bursts`) may come in alone, on lines
    /// of their own: no spec waits, each has the microburst scope its burst profiles read, no
    /// name is given already (or shares a hash with one), there are rows for their classes,
    /// and the port takes their queues.
    fn admits(&self, added: &[TenantQos], bursts: &[TenantBursts]) -> bool {
        let mut hashes = FxHashSet::default();
        let fresh = |qos: &TenantQos| {
            let hash = name_hash(&qos.name);
            // A burst profile reads its tenant's or class's scope.
            let profiles = qos.on_burst.is_some() || qos.classes.iter().any(|c| c.on_burst.is_some());
            let scoped = !profiles || bursts.iter().any(|b| *b.name == *qos.name);
            // A tenant the update moves may come in while its copy is still in place.
            let present = self.name_hashes.get(&hash).copied().unwrap_or(0);
            hashes.insert(hash) && present == self.moved_copies(&qos.name) && scoped
        };
        if self.spec_waits() || !self.rows_fit(added) || !added.iter().all(fresh) {
            return false;
        }
        self.port.is_none() || self.port_sums_with(&[], &queues_of(added)).is_some()
    }

    /// What follows tenants put in ([`Enforcer::occupy`]) with microburst settings `bursts`.
    fn admitted(&mut self, bursts: Vec<TenantBursts>) {
        self.spec.bursts.tenants.extend(bursts); // what a later full retarget reads
        self.rebind_timeline(); // the new tenants need own rows
        self.compact_profiles_if_due();
    }

    /// Takes tenant `index` out, touching no other tenant's state: its class stages, statistics
    /// rows and port queues are left vacant for tenants put in later (no other tenant's move;
    /// the later tenants' ids fall by one, as the engine's do), its counters, queueing delays
    /// and microburst scopes' totals go to the archive as a full retarget keeps them (its open
    /// burst events end now; a burst profile it or a class of it is in ends as an update ends
    /// it, and it leaves the order of return from overload). If packets of it are on their way
    /// to the port or queued there, the port is first drained and started again as a retarget
    /// does it ([`Enforcer::restart_port`]): every tenant's queued packets are sent, and nothing
    /// else of theirs changes. A tenant the update moves ([`Enforcer::begin_moves`]) leaves its
    /// stages for its return. Changes nothing and returns false when it takes a full retarget:
    /// a spec waits.
    pub fn remove(&mut self, index: usize) -> bool {
        if !self.vacate(index) {
            return false;
        }
        self.close(index);
        self.rebind_timeline();
        true
    }

    /// Whether tenant `index` may go by [`Enforcer::remove`].
    pub(super) fn removable(&self, index: usize) -> bool {
        let queues = if self.port.is_some() { self.class_rows_of(index) } else { 0..0 };
        !self.packets_at_port(index) && self.bursts.removable(index, queues)
    }

    /// Whether packets of tenant `index` are on their way to the port or queued there.
    pub(super) fn packets_at_port(&self, index: usize) -> bool {
        let rows = self.class_rows_of(index);
        let in_flight = self.in_flight.iter().any(|packet| rows.contains(&(packet.0.row as usize)));
        in_flight || self.port.as_ref().is_some_and(|state| state.port.holds_packets(rows.start as u32..rows.end as u32))
    }

    /// The port drained as a retarget drains it (packets in flight arrive, everything queued is
    /// sent, the delays recorded) and started again empty, every queue keeping its
    /// configuration (a profile's, for a tenant in one) and statistics; nothing else changes.
    pub(super) fn restart_port(&mut self) {
        self.drain_port();
        if let Some(state) = &mut self.port {
            state.port.restart();
        }
    }

    /// The port's own settings changed, and nothing else of the policy-wide settings: its
    /// buffer, line rate, mode, overload thresholds (bytes of its buffer) or microburst setting,
    /// none of which its queues' configurations depend on. A new buffer, line rate or mode
    /// drains the port and starts it again under them, as [`Enforcer::restart_port`] does for a
    /// tenant removed with packets there (a new line rate makes every queue's buckets again,
    /// full); every tenant keeps its stages, rows, queues and profiles; the overload state goes
    /// on, read against the new thresholds from the next packet; a new microburst setting
    /// starts the port's scope anew ([`Detector::rescope_port`](crate::bursts::Detector::rescope_port)),
    /// the packets at the port staying if nothing else changed, as in a full retarget. Changes nothing and
    /// returns false when that takes a full retarget: a spec waits, an overload or microburst
    /// setting comes or goes, or the queues, reserves or thresholds do not fit the new port
    /// (the retarget's check then says why).
    pub fn set_port(&mut self, config: PortConfig, overload: Option<Overload>, microburst: Option<BurstConfig>) -> bool {
        let same_kinds = self.spec.overload.is_some() == overload.is_some() && self.spec.bursts.port.is_some() == microburst.is_some();
        if self.spec_waits() || !same_kinds || microburst.is_some_and(|m| m.check().is_err()) {
            return false;
        }
        let Some(state) = &self.port else { return false };
        let new_line = config.line_rate != state.config.line_rate;
        // Only a new line rate reads them: the port's ceilings are made again from them.
        let queues = if new_line { self.queues_at_port() } else { Vec::new() };
        let fits = overload.is_none_or(|o| o.fits(config.buffer_bytes))
            && state.reserved <= u128::from(config.buffer_bytes)
            && state.guaranteed <= u128::from(config.line_rate)
            && (!new_line || queues.len() == state.port.queue_count())
            && check_queues(&config, &queues).is_ok();
        if !fits {
            return false;
        }
        if config != state.config {
            self.restart_port();
            if let Some(state) = &mut self.port {
                state.port.set_config(config, &queues);
                state.config = config;
            }
        }
        if let Some(setting) = microburst.filter(|setting| self.spec.bursts.port != Some(*setting)) {
            self.bursts.rescope_port(setting, &self.spec.bursts.poll_ns, self.clock_ns);
            self.spec.bursts.port = Some(setting);
        }
        self.spec.port = Some(config);
        self.spec.overload = overload;
        self.adaptive.set_overload(overload);
        true
    }

    /// Whether a spec waits for the tables (staged, or kept for tenants not in them): a change
    /// then takes a full retarget.
    pub(super) fn spec_waits(&self) -> bool {
        self.staged.is_some() || !self.spec.tenants.is_empty()
    }

    /// Tenant `index`'s class rows (its class stages, statistics rows and port queues).
    pub(super) fn class_rows_of(&self, index: usize) -> std::ops::Range<usize> {
        let state = &self.tenants[index];
        let first = state.first_row as usize;
        first..first + state.classes as usize
    }

    /// A new stage for `qos`'s tenant, kept as `kept`, with its profile and lane.
    pub(super) fn fresh_stage(&self, qos: &TenantQos, kept: &Kept) -> Stage {
        let mut stage = Stage::new(&qos.contract);
        stage.profile = kept.profile();
        stage.classes_enforced = classes_enforced(qos);
        stage.lane = lane(&self.profiles, &stage, &self.spec);
        stage
    }

    /// Every class row's stage, fresh, if none is kept: each was fresh while no tenant's classes
    /// were enforced (none was ever read).
    pub(super) fn make_class_stages(&mut self) {
        if self.class_stages.len() == self.class_rows {
            return;
        }
        let mut stages = crate::memory::with_capacity(self.no_tenant_row);
        stages.resize(self.class_rows, Stage::new(&Contract::default()));
        for (tenant, kept) in self.tenants.iter().zip(&self.contracts) {
            let first = tenant.first_row as usize;
            for (stage, class) in stages[first..first + kept.classes().len()].iter_mut().zip(kept.classes()) {
                *stage = class_stage(&self.profiles, class);
            }
        }
        self.class_stages = stages;
    }

    /// The port queues to which `changes` give a new configuration: (queue, old, new).
    fn queue_changes(&self, changes: &[(usize, TenantQos)]) -> Vec<(u32, QueueConfig, QueueConfig)> {
        if self.port.is_none() {
            return Vec::new();
        }
        let mut queues = Vec::new();
        for (index, qos) in changes {
            let (first, old) = (self.tenants[*index].first_row, self.contracts[*index].classes());
            let changed = qos.classes.iter().zip(old).enumerate().filter(|(_, (new, old))| new.queue != old.queue);
            queues.extend(changed.map(|(c, (new, old))| (first + c as u32, old.queue, new.queue)));
        }
        queues
    }

    /// The port's guarantees' and reserves' sums with the queues `old` taken out and `new` put
    /// in, if its queues as a whole stay valid (each new one, and the sums); `None` without a port.
    fn port_sums_with(&self, old: &[QueueConfig], new: &[QueueConfig]) -> Option<(u128, u128)> {
        let state = self.port.as_ref()?;
        let sum = |queues: &[QueueConfig], field: fn(&QueueConfig) -> u64| queues.iter().map(|q| u128::from(field(q))).sum::<u128>();
        let guaranteed = state.guaranteed - sum(old, |q| q.guarantee) + sum(new, |q| q.guarantee);
        let reserved = state.reserved - sum(old, |q| q.reserved_bytes) + sum(new, |q| q.reserved_bytes);
        let valid = guaranteed <= u128::from(state.config.line_rate) && reserved <= u128::from(state.config.buffer_bytes);
        (valid && check_queues(&state.config, new).is_ok()).then_some((guaranteed, reserved))
    }

    /// Every class row's port queue (a vacant row's takes nothing).
    pub(super) fn queues_by_row(&self) -> Vec<QueueConfig> {
        let mut queues = vec![QueueConfig::BEST_EFFORT; self.class_rows];
        for (tenant, kept) in self.tenants.iter().zip(&self.contracts) {
            let first = tenant.first_row as usize;
            for (queue, class) in queues[first..first + kept.classes().len()].iter_mut().zip(kept.classes()) {
                *queue = class.queue;
            }
        }
        queues
    }

    /// The contract tenant `index` is enforced by.
    pub fn contract_of(&self, index: usize) -> Option<TenantQos> {
        self.contracts.get(index).and_then(|kept| kept.qos(&self.profiles))
    }

    /// Every tenant's contract with its stage and its classes' stages (none if none was kept:
    /// each was fresh), by name.
    fn take_states(&mut self) -> FxHashMap<Arc<str>, (Kept, Stage, Vec<Stage>)> {
        let class_stages = std::mem::take(&mut self.class_stages);
        let tenants = std::mem::take(&mut self.tenants).into_iter().zip(std::mem::take(&mut self.contracts));
        tenants
            .filter(|(_, kept)| kept.has_contract())
            .map(|(state, kept)| {
                let first = state.first_row as usize;
                let classes = if class_stages.is_empty() { Vec::new() } else { class_stages[first..first + state.classes as usize].to_vec() };
                (kept.name.clone(), (kept, state.stage, classes))
            })
            .collect()
    }

    /// Keeps the port if nothing about it changed, its queues numbered again in the new order
    /// (vacant ones gone); otherwise drains the old one (packets in flight arrive, everything
    /// queued is sent) into the statistics and starts a new one. `old_queues` are the port's
    /// queues, `old_keys` name them, `keys` name the new `queues`. Whether the port was kept.
    fn replace_port(
        &mut self,
        config: Option<PortConfig>,
        old_queues: &[QueueConfig],
        queues: Vec<QueueConfig>,
        old_keys: &[StatsKey],
        keys: &[StatsKey],
    ) -> bool {
        if let Some(current) = &mut self.port {
            if let Some(order) = (Some(current.config) == config).then(|| same_queues(old_keys, keys)).flatten() {
                let old_queues: Vec<QueueConfig> = order.iter().map(|&old| old_queues[old as usize]).collect();
                if order.len() != old_keys.len() || order.iter().enumerate().any(|(new, &old)| new != old as usize) {
                    current.port.reorder(&order);
                    current.port.reserve(room_for(order.len()));
                    self.bursts.reorder_queues(&order);
                    renumber_in_flight(&mut self.in_flight, &order);
                }
                requeue(current, &old_queues, &queues);
                return true;
            }
        }
        self.drain_port();
        if let Some(old) = self.port.take() {
            for (queue, key) in old_keys.iter().enumerate() {
                let stats = self.archive.entry(key.clone()).or_default();
                stats.delay_ns.merge(&old.port.stats(queue as u32).delay_ns);
            }
        }
        self.port = config.map(|config| {
            let guaranteed = queues.iter().map(|queue| u128::from(queue.guarantee)).sum();
            let reserved = queues.iter().map(|queue| u128::from(queue.reserved_bytes)).sum();
            let room = room_for(queues.len());
            let mut port = Port::new(config, queues).expect("QosSpec::check built this port");
            port.reserve(room);
            PortState { port, config, guaranteed, reserved }
        });
        false
    }

    /// The statistics rows' counters, into the archive under `keys` (theirs); a key is copied
    /// only for a row that counted packets.
    fn archive_rows(&mut self, keys: &[StatsKey]) {
        for (row, key) in keys.iter().enumerate() {
            if self.rows.counters(row).packets > 0 {
                self.archive_row(row, key.clone());
            }
        }
    }

    /// Statistics row `row`'s counters, into the archive under `key` (its).
    pub(super) fn archive_row(&mut self, row: usize, key: StatsKey) {
        let counters = self.rows.counters(row);
        if counters.packets > 0 {
            self.archive.entry(key).or_default().counters.add(&counters);
        }
    }

    /// The timeline's series, bound again to the statistics rows after they moved; every
    /// tenant's own row made first, so that none is made while the timeline is kept.
    pub(super) fn rebind_timeline(&mut self) {
        if self.timeline.is_some() {
            for tenant in 0..self.own_rows.len() {
                if self.own_rows[tenant] == NO_ROW {
                    self.make_own_row(tenant);
                }
            }
            let keys = self.row_keys();
            if let Some(timeline) = &mut self.timeline {
                timeline.bind(&keys);
            }
        }
    }

    /// The statistics rows' keys, by row: every class of the tenants with a contract, room for
    /// the classes of tenants added later (unnamed), none, the tenants' own rows (a free one
    /// unnamed). Made when read (by statistics and updates) rather than kept: two names a tenant
    /// cost more than its row.
    pub(super) fn row_keys(&self) -> Vec<StatsKey> {
        let mut keys = vec![(None, None); self.rows.len()];
        for (index, (tenant, &own_row)) in self.tenants.iter().zip(&self.own_rows).enumerate() {
            let first = tenant.first_row as usize;
            for (c, key) in keys[first..first + tenant.classes as usize].iter_mut().enumerate() {
                *key = (Some(self.tenant_name(index).to_owned()), Some(c as u16));
            }
            if own_row != NO_ROW {
                keys[own_row as usize] = (Some(self.tenant_name(index).to_owned()), None);
            }
        }
        keys
    }

    pub(super) fn tenant_name(&self, index: usize) -> &str {
        &self.contracts[index].name
    }
}

/// The old row of each of `keys` (the new rows' keys, in order), if `old_keys` (the old rows'
/// keys, those of vacant rows unnamed) name the same rows.
fn same_queues(old_keys: &[StatsKey], keys: &[StatsKey]) -> Option<Vec<u32>> {
    if old_keys == keys {
        return Some((0..keys.len() as u32).collect());
    }
    let named: FxHashMap<&StatsKey, u32> = old_keys.iter().zip(0..).filter(|(key, _)| key.0.is_some()).collect();
    let order: Option<Vec<u32>> = keys.iter().map(|key| named.get(key).copied()).collect();
    order.filter(|order| order.len() == named.len())
}

/// The class rows of packets in flight, after the rows numbered again: row `order[i]` is row `i`.
fn renumber_in_flight(in_flight: &mut BinaryHeap<Reverse<InFlight>>, order: &[u32]) {
    if in_flight.is_empty() {
        return;
    }
    let mut new_row = FxHashMap::default();
    new_row.extend(order.iter().zip(0..).map(|(&old, new)| (old, new)));
    let mut packets = std::mem::take(in_flight).into_vec();
    for Reverse(packet) in &mut packets {
        packet.row = new_row[&packet.row]; // a packet in flight has its tenant's class row
    }
    *in_flight = packets.into(); // the order is by release and sequence, which stay
}

/// The keys of the class rows of `contracts`' tenants, by row.
fn class_keys(contracts: &[Kept]) -> Vec<StatsKey> {
    contracts.iter().flat_map(|kept| (0..kept.classes().len()).map(|c| (Some(kept.name.to_string()), Some(c as u16)))).collect()
}

/// Whether `qos`'s class stages are read: a class has a contract, or a burst profile (a stage
/// to switch, read as any enforced class's).
fn classes_enforced(qos: &TenantQos) -> bool {
    qos.classes.iter().any(|c| c.contract != Contract::default() || c.on_burst.is_some())
}

/// A fresh stage for a class kept, with its profile.
pub(super) fn class_stage(profiles: &Profiles, class: &KeptClass) -> Stage {
    Stage { profile: class.profile, ..Stage::new(&profiles.get(class.profile).contract()) }
}

/// The port's queues from `old` to `new` configurations (the same queues, checked as a whole
/// by [`QosSpec::check`]), in place: their packets and buckets stay.
fn requeue(state: &mut PortState, old: &[QueueConfig], new: &[QueueConfig]) {
    set_queues(&mut state.port, (0..new.len()).filter(|&q| old[q] != new[q]).map(|q| (q as u32, old[q], new[q])).collect());
    state.guaranteed = new.iter().map(|queue| u128::from(queue.guarantee)).sum();
    state.reserved = new.iter().map(|queue| u128::from(queue.reserved_bytes)).sum();
}

/// Each (queue, old, new) configuration in place, those whose reserve falls first, so that the
/// reserves never sum above the buffer on the way (the new ones as a whole are checked).
fn set_queues(port: &mut Port, mut changes: Vec<(u32, QueueConfig, QueueConfig)>) {
    changes.sort_by_key(|(_, old, new)| new.reserved_bytes >= old.reserved_bytes);
    for (queue, _, config) in changes {
        port.set_queue(queue, &config);
    }
}

/// Room for tenants or classes added after `count`, until a full retarget makes more.
pub(super) fn room_for(count: usize) -> usize {
    count / 8 + 8
}

/// The port queues of the classes of tenants `added`, in order.
pub(super) fn queues_of(added: &[TenantQos]) -> Vec<QueueConfig> {
    added.iter().flat_map(|qos| qos.classes.iter().map(|class| class.queue)).collect()
}

/// A tenant's name, hashed.
pub(super) fn name_hash(name: &str) -> u64 {
    FxBuildHasher.hash_one(name)
}

/// How a tenant stage's packets are enforced: the fast lane takes a meter and a shaper of the
/// tenant's own that count the policy's bytes, nothing of its classes, and no port.
pub(super) fn lane(profiles: &Profiles, stage: &Stage, spec: &QosSpec) -> Lane {
    let profile = profiles.get(stage.profile);
    let fast = spec.port.is_none() && !stage.classes_enforced && profile.meter_and_shaper().is_some() && profile.meter_count == spec.count;
    if fast {
        Lane::Fast
    } else {
        Lane::General
    }
}
