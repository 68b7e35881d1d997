//! Updates that cost what changed: tenant operations by position (put a tenant in place of
//! another, insert one, remove one) on the installed tables, with what selects each tenant's
//! traffic ([`Route`]) kept beside its tables, and its QoS inputs beside the engine's others.
//! Unchanged tenants are not read, compared or copied (their tables are shared by pointer).

use std::sync::Arc;

use super::qos_steps::{replacements, steps, QosChange, QosShape, Taken};
use super::{build, check_tenant, incremental, Engine, EngineTables, HotTenant, TenantHead, TenantSpec, TenantTables, UpdateReport, VniMap};
use crate::chunked_vec::GroupedVec;
use crate::enforce::TenantInput;
use crate::error::CoreError;
use crate::shaping::WeightScale;
use rustc_hash::FxHashSet;

/// What selects a tenant's traffic.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Route {
    pub vnis: Vec<u32>,
    /// Outer VLAN ids of untunnelled traffic.
    pub vlans: Vec<u16>,
    /// Outer source prefixes of untunnelled traffic: (address, length over 128 bits).
    pub sources: Vec<(u128, u8)>,
}

/// A tenant's route as the tables keep it: a lone VNI, the common case, inline (a simple tenant
/// then holds 8 B more in its chunk instead of 92 B on the heap); any other route by pointer.
#[derive(Debug, Clone)]
pub(super) enum KeptRoute {
    Vni(u32),
    Other(Arc<Route>),
}

impl KeptRoute {
    fn of(route: &Route) -> KeptRoute {
        match route.vnis[..] {
            [vni] if route.vlans.is_empty() && route.sources.is_empty() => KeptRoute::Vni(vni),
            _ => KeptRoute::Other(Arc::new(route.clone())),
        }
    }

    fn vnis(&self) -> &[u32] {
        match self {
            KeptRoute::Vni(vni) => std::slice::from_ref(vni),
            KeptRoute::Other(route) => &route.vnis,
        }
    }

    fn vlans(&self) -> &[u16] {
        match self {
            KeptRoute::Vni(_) => &[],
            KeptRoute::Other(route) => &route.vlans,
        }
    }

    fn sources(&self) -> &[(u128, u8)] {
        match self {
            KeptRoute::Vni(_) => &[],
            KeptRoute::Other(route) => &route.sources,
        }
    }
}

/// A tenant as an update gives it: its tables, route and QoS inputs.
#[derive(Debug, Clone)]
pub struct TenantEntry {
    pub tables: TenantSpec,
    pub route: Route,
    pub qos: TenantInput,
}

/// One change to the tenants, applied in order; positions are tenant ids at that point.
#[derive(Debug, Clone)]
pub enum TenantOp {
    /// Tenant `at` becomes `tenant`.
    Replace { at: usize, tenant: Box<TenantEntry> },
    /// `tenant` goes in at `at` (the tenant count appends); later tenants' ids rise by one.
    Insert { at: usize, tenant: Box<TenantEntry> },
    /// Tenant `at` goes; later tenants' ids fall by one.
    Remove { at: usize },
}

/// A policy update as the tenants that changed.
#[derive(Debug, Clone, Default)]
pub struct Delta {
    pub ops: Vec<TenantOp>,
    /// How the tenants' shares become units of weight at the port (the policy's guarantees'
    /// common divisor, or its tenants' weights as they are).
    pub weight_scale: WeightScale,
    /// The policy-wide QoS settings, when they changed.
    pub settings: Option<crate::enforce::QosSettings>,
    pub unknown_action: u8,
}

/// A [`VniMap`]'s blocks while an update edits them.
struct VniBlocks(Vec<Option<Arc<[i32; 4096]>>>);

impl VniBlocks {
    fn get(&self, vni: u32) -> i32 {
        self.0.get((vni >> 12) as usize).and_then(|b| b.as_ref()).map_or(-1, |block| block[(vni & 0xfff) as usize])
    }

    fn set(&mut self, vni: u32, tenant: i32) {
        if self.0.is_empty() {
            self.0 = vec![None; 4096];
        }
        let block = self.0[(vni >> 12) as usize & 0xfff].get_or_insert_with(|| Arc::new([-1; 4096]));
        Arc::make_mut(block)[(vni & 0xfff) as usize] = tenant;
    }

    /// Every tenant id at or above `from` moved by `by`.
    fn shift(&mut self, from: i32, by: i32) {
        for block in self.0.iter_mut().flatten() {
            if block.iter().any(|&t| t >= from) {
                Arc::make_mut(block).iter_mut().filter(|t| **t >= from).for_each(|t| *t += by);
            }
        }
    }
}

/// The tables being edited: a copy of the installed ones, made once per update.
struct Edit<'a> {
    next: EngineTables,
    vnis: VniBlocks,
    engine: &'a Engine,
    report: UpdateReport,
    sources_changed: bool,
    /// What the ops claimed for whom, checked at the end.
    claims: Vec<(Claim, String)>,
    /// Who made claims in this update (so that one removed again withdraws them).
    claimers: FxHashSet<String>,
    /// Claims the ops took from tenants that held them, and from whom.
    displaced: Vec<(Claim, String)>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Claim {
    Vni(u32),
    Vlan(u16),
}

impl Edit<'_> {
    /// Maps `route` to tenant `at`. A claim is checked once every op is applied (a tenant may
    /// take a VNI that a later op frees).
    fn route(&mut self, route: &Route, at: usize) {
        let name = self.next.tenants[at].name.to_string();
        if !route.vnis.is_empty() || !route.vlans.is_empty() {
            self.claimers.insert(name.clone());
        }
        for &vni in &route.vnis {
            self.displaced(Claim::Vni(vni), self.vnis.get(vni), at);
            self.vnis.set(vni, at as i32);
            self.claims.push((Claim::Vni(vni), name.clone()));
        }
        for &vlan in &route.vlans {
            let holder = Arc::make_mut(&mut self.next.vlans).insert(vlan, at as i32).unwrap_or(-1);
            self.displaced(Claim::Vlan(vlan), holder, at);
            self.claims.push((Claim::Vlan(vlan), name.clone()));
        }
        self.sources_changed |= !route.sources.is_empty();
    }

    /// Notes that `claim`, held by tenant `holder`, went to tenant `at`: the holder must have
    /// let it go by the end of the update.
    fn displaced(&mut self, claim: Claim, holder: i32, at: usize) {
        let taker = &self.next.tenants[at].name;
        // A tenant that moved to another position takes its own claims along.
        if let Some(tenant) = usize::try_from(holder).ok().filter(|&h| h != at).and_then(|h| self.next.tenants.get(h)).filter(|t| &t.name != taker) {
            self.displaced.push((claim, tenant.name.to_string()));
        }
    }

    /// Unmaps what tenant `at` claims (and still holds).
    fn unroute(&mut self, at: usize) {
        let route = self.next.routes[at].clone();
        for &vni in route.vnis() {
            if self.vnis.get(vni) == at as i32 {
                self.vnis.set(vni, -1);
            }
        }
        for vlan in route.vlans() {
            if self.next.vlans.get(vlan) == Some(&(at as i32)) {
                Arc::make_mut(&mut self.next.vlans).remove(vlan);
            }
        }
        self.sources_changed |= !route.sources().is_empty();
        // A tenant that claimed in this update and goes again (removed or replaced) withdraws its claims.
        let name = &*self.next.tenants[at].name;
        if self.claimers.contains(name) {
            let withdrawn = |claim: &Claim| match *claim {
                Claim::Vni(vni) => route.vnis().contains(&vni),
                Claim::Vlan(vlan) => route.vlans().contains(&vlan),
            };
            self.claims.retain(|(claim, holder)| holder != name || !withdrawn(claim));
        }
    }

    /// Every claim made by the ops is held by its tenant: none was claimed twice.
    fn check_claims(&self) -> Result<(), CoreError> {
        for (claim, name) in &self.claims {
            let (holder, what) = match *claim {
                Claim::Vni(vni) => (self.vnis.get(vni), format!("VNI {vni}")),
                Claim::Vlan(vlan) => (self.next.vlans.get(&vlan).copied().unwrap_or(-1), format!("VLAN {vlan}")),
            };
            let held_by = usize::try_from(holder).ok().and_then(|t| self.next.tenants.get(t)).map(|t| &*t.name);
            if held_by != Some(name.as_str()) {
                return Err(CoreError::spec(format!("{what} is claimed by both '{}' and '{name}'", held_by.unwrap_or("?"))));
            }
        }
        if self.displaced.is_empty() {
            return Ok(());
        }
        // A tenant that held a claim taken from it must have let it go (in its new route).
        let positions: rustc_hash::FxHashMap<&str, usize> = self.next.tenants.iter().enumerate().map(|(i, t)| (&*t.name, i)).collect();
        for (claim, holder) in &self.displaced {
            let Some(&at) = positions.get(holder.as_str()) else { continue };
            let route = &self.next.routes[at];
            let (still, what) = match *claim {
                Claim::Vni(vni) => (route.vnis().contains(&vni), format!("VNI {vni}")),
                Claim::Vlan(vlan) => (route.vlans().contains(&vlan), format!("VLAN {vlan}")),
            };
            if still {
                let taker = self.claims.iter().rev().find(|(c, _)| c == claim);
                return Err(CoreError::spec(format!("{what} is claimed by both '{holder}' and '{}'", taker.map_or("?", |(_, n)| n.as_str()))));
            }
        }
        Ok(())
    }

    /// Tenant ids at or above `from` moved by `by`, wherever they are kept.
    fn shift(&mut self, from: usize, by: i32) {
        let from = from as i32;
        self.vnis.shift(from, by);
        if self.next.vlans.values().any(|&t| t >= from) {
            Arc::make_mut(&mut self.next.vlans).values_mut().filter(|t| **t >= from).for_each(|t| *t += by);
        }
        self.sources_changed |= !self.next.sources.is_empty();
    }

    /// The tables of `spec` for position `at`, sharing or patching `old`'s when it holds the
    /// same tenant.
    fn tables(&mut self, spec: &TenantSpec, old: Option<&Arc<TenantTables>>, at: usize) -> Result<Arc<TenantTables>, CoreError> {
        check_tenant(spec).map_err(|e| e.within(format!("tenant {at} ({})", spec.name)))?;
        let Some(old) = old.filter(|old| *old.name == spec.name) else {
            self.report.rebuilt += 1;
            return Ok(Arc::new(build(spec, at)?));
        };
        if old.holds(spec) {
            return Ok(Arc::clone(old));
        }
        Ok(Arc::new(match incremental(old, spec) {
            Some(table) => {
                self.report.incremental += 1;
                TenantTables::new(spec, table)
            }
            None => {
                self.report.rebuilt += 1;
                build(spec, at)?
            }
        }))
    }

    fn place(&mut self, at: usize, tables: Arc<TenantTables>, route: &Route) {
        let slot = self.engine.counter_names.lock().unwrap_or_else(|p| p.into_inner()).slot(&tables.name);
        self.next.data_path.set(at, TenantHead::of(&tables, slot), Some(HotTenant::of(&tables)));
        self.next.tenants.set(at, tables);
        self.route(route, at);
        self.next.routes.set(at, KeptRoute::of(route));
    }

    /// Applies `op`, borrowed: what the engine keeps of it is copied, so that it is made while
    /// the update's ops still stand and lies apart from them, not in the holes each op would
    /// leave as it went (pages the heap could then not hand back).
    fn apply(&mut self, op: &TenantOp, qos: &mut GroupedVec<Arc<TenantInput>>) -> Result<(), CoreError> {
        let count = self.next.tenants.len();
        match *op {
            TenantOp::Replace { at, ref tenant } if at < count => {
                let TenantEntry { tables, route, qos: input } = &**tenant;
                let old = Arc::clone(&self.next.tenants[at]);
                let tables = self.tables(tables, Some(&old), at)?;
                self.unroute(at);
                self.place(at, tables, route);
                let input = self.engine.input_pool.lock().unwrap_or_else(|p| p.into_inner()).share(input);
                if !Arc::ptr_eq(&qos[at], &input) {
                    qos.set(at, input);
                }
            }
            TenantOp::Insert { at, ref tenant } if at <= count => {
                let TenantEntry { tables, route, qos: input } = &**tenant;
                let tables = self.tables(tables, None, at)?;
                if at < count {
                    self.shift(at, 1); // none at the end: a policy installed tenant by tenant stays linear
                }
                let placeholder = Arc::clone(&tables);
                self.next.tenants.insert(at, placeholder);
                self.next.data_path.insert(at, TenantHead::default(), None);
                self.next.routes.insert(at, KeptRoute::Other(Arc::default()));
                self.place(at, tables, route);
                qos.insert(at, self.engine.input_pool.lock().unwrap_or_else(|p| p.into_inner()).share(input));
            }
            TenantOp::Remove { at } if at < count => {
                self.unroute(at);
                self.next.tenants.remove(at);
                self.next.data_path.remove(at);
                self.next.routes.remove(at);
                if at + 1 < count {
                    self.shift(at + 1, -1); // none after the last: removing it stays O(1)
                }
                qos.remove(at);
            }
            TenantOp::Replace { at, .. } | TenantOp::Insert { at, .. } | TenantOp::Remove { at } => {
                return Err(CoreError::InvalidArgument(format!("no tenant position {at}: the engine has {count} tenants")));
            }
        }
        Ok(())
    }

    /// The finished tables: the VNI blocks and, if they moved, the source prefixes in policy order.
    fn finish(mut self, unknown_action: u8) -> Result<(EngineTables, UpdateReport), CoreError> {
        self.check_claims()?;
        self.next.vnis = VniMap { blocks: self.vnis.0.into() };
        if self.sources_changed {
            let routes = self.next.routes.iter().enumerate();
            self.next.sources = routes.flat_map(|(t, r)| r.sources().iter().map(move |&(address, len)| (address, len, t as i32))).collect();
        }
        self.next.unknown_action = unknown_action;
        self.next.counter_slots = self.engine.counter_names.lock().unwrap_or_else(|p| p.into_inner()).len();
        // Tenants the ops did not touch are shared as they are.
        self.report.kept = self.next.tenants.len() - self.report.incremental - self.report.rebuilt;
        Ok((self.next, self.report))
    }
}

impl Engine {
    /// Applies a policy update given as the tenants that changed: their tables are built (or
    /// patched, for a one-rule change of a tenant of the same name), every other tenant's are
    /// shared; the QoS state follows (tenants whose contract and queues did not change keep
    /// theirs, as with [`Engine::update_with_qos`]). Nothing is installed if anything is refused.
    pub fn apply(&self, delta: Delta) -> Result<UpdateReport, CoreError> {
        let _serial = self.updating.lock().unwrap_or_else(|p| p.into_inner());
        let current = self.tables.load_full();
        let scale_now = self.qos_inputs.lock().unwrap_or_else(|p| p.into_inner()).weight_scale;
        if delta.ops.is_empty() && delta.weight_scale == scale_now && delta.settings.is_none() && delta.unknown_action == current.unknown_action {
            return Ok(UpdateReport { kept: current.tenants.len(), ..UpdateReport::default() });
        }
        let mut inputs = self.qos_inputs.lock().unwrap_or_else(|p| p.into_inner()).clone();
        if inputs.tenants.len() != current.tenants.len() {
            return Err(CoreError::InvalidArgument(
                "the engine's tenants were installed by update(): apply() edits tenants that apply() installed".to_string(),
            ));
        }
        let shape = QosShape::of(&delta, &current, &inputs);
        let mut edit = Edit {
            next: (*current).clone(),
            vnis: VniBlocks(current.vnis.blocks.to_vec()),
            engine: self,
            report: UpdateReport::default(),
            sources_changed: false,
            claims: Vec::new(),
            claimers: FxHashSet::default(),
            displaced: Vec::new(),
        };
        let replaced: Vec<usize> = delta.ops.iter().filter_map(|op| if let TenantOp::Replace { at, .. } = op { Some(*at) } else { None }).collect();
        let (mut taken, mut worn) = (Vec::new(), Vec::new());
        for op in &delta.ops {
            let before = if shape == QosShape::Steps { Taken::before(op, &inputs, |at| edit.next.tenants.get(at).map(|t| &*t.name)) } else { None };
            let replacing = if let TenantOp::Replace { at, .. } = op { Some(*at) } else { None };
            edit.apply(op, &mut inputs.tenants)?;
            // A table patched too often is built afresh in the background, by name (positions move).
            if let Some(table) = replacing.and_then(|at| edit.next.tenants.get(at)).filter(|t| t.table.is_worn()) {
                worn.push(table.name.to_string());
            }
            if let Some(before) = before {
                let name = edit.next.tenants.get(before.at()).map_or_else(Arc::default, |t| Arc::clone(&t.name));
                taken.push(before.after(&inputs, &name));
            }
        }
        inputs.weight_scale = delta.weight_scale;
        if let Some(settings) = delta.settings {
            inputs.settings = settings;
        }
        let name = |at: usize| &edit.next.tenants[at].name;
        let change = match shape {
            QosShape::Replaced(rescoped) => {
                let mut replaced = replaced;
                replaced.sort_unstable();
                replaced.dedup();
                replacements(&replaced, &rescoped, &inputs, name)?
            }
            QosShape::Steps => steps(taken, &inputs, name)?,
            QosShape::Port => match inputs.settings.port()? {
                Some(config) => QosChange::Port(config, inputs.settings.overload(), inputs.settings.port.map(|p| p.microburst.config())),
                None => QosChange::Full(Box::new(inputs.spec(name)?)),
            },
            QosShape::Full => QosChange::Full(Box::new(inputs.spec(name)?)),
        };
        let (tables, report) = edit.finish(delta.unknown_action)?;
        self.install_contracts(tables, change, &inputs)?;
        *self.qos_inputs.lock().unwrap_or_else(|p| p.into_inner()) = inputs;
        for name in worn {
            self.rebuild_in_background(&name);
        }
        Ok(report)
    }
}

#[cfg(test)]
mod tests {
    use bytemuck::Zeroable;

    use super::*;
    use crate::classify::Rule;
    use crate::enforce::{ClassInput, MeterRow};
    use crate::engine::TablesSpec;
    use crate::parse::{PacketInfo, Status, Tunnel};
    use crate::verdict::{Verdict, ALLOW, DROP};

    fn entry(name: &str, vnis: &[u32], port: u16) -> Box<TenantEntry> {
        let rule = Rule { dst_ports: (port, port), ..Rule::ANY };
        let tables = TenantSpec {
            name: name.to_string(),
            rules: vec![rule],
            actions: vec![ALLOW],
            classes: vec![0],
            policy_rules: vec![0],
            default_action: DROP,
            default_class: 0,
        };
        let qos = TenantInput { classes: [ClassInput { weight: 1, priority: 7, ..ClassInput::default() }].into(), ..TenantInput::default() };
        Box::new(TenantEntry { tables, route: Route { vnis: vnis.to_vec(), ..Route::default() }, qos })
    }

    /// A tenant policed by an srTCM meter of `cir` B/s (0: one the core refuses).
    fn metered(name: &str, vni: u32, cir: u64) -> Box<TenantEntry> {
        let mut tenant = entry(name, &[vni], 80);
        tenant.qos.meter = Some(MeterRow { kind: 1, byte_count: 1, cir, cbs: 1500, ebs: 1500, actions: [0, 0, 2], ..MeterRow::default() });
        tenant
    }

    fn insert(at: usize, tenant: Box<TenantEntry>) -> TenantOp {
        TenantOp::Insert { at, tenant }
    }

    fn engine(names: &[(&str, u32)]) -> Engine {
        let engine = Engine::new(TablesSpec::default()).unwrap();
        let ops = names.iter().enumerate().map(|(i, (name, vni))| insert(i, entry(name, &[*vni], 80))).collect();
        engine.apply(Delta { ops, ..Delta::default() }).unwrap();
        engine
    }

    /// The tenant name and verdict action for a TCP packet of `vni` to `port`.
    fn verdict(engine: &Engine, vni: i32, port: u16) -> (Option<String>, u8) {
        let info = PacketInfo {
            vni,
            tunnel: Tunnel::Vxlan as u8,
            ip_version: 4,
            proto: 6,
            dst_port: port,
            status: Status::Ok as u8,
            wire_len: 100,
            ..PacketInfo::zeroed()
        };
        let mut out = [Verdict::zeroed()];
        engine.classify(&[info], &mut out);
        let names = engine.tables().tenant_names();
        (usize::try_from(out[0].tenant).ok().map(|t| names[t].clone()), out[0].action)
    }

    #[test]
    fn inserts_and_removes_move_the_later_tenants_and_their_vnis_follow() {
        let engine = engine(&[("a", 10), ("b", 20), ("c", 30)]);
        engine.apply(Delta { ops: vec![insert(1, entry("new", &[15], 80))], ..Delta::default() }).unwrap();
        assert_eq!(engine.tables().tenant_names(), ["a", "new", "b", "c"]);
        assert_eq!(verdict(&engine, 20, 80), (Some("b".to_string()), ALLOW));
        engine.apply(Delta { ops: vec![TenantOp::Remove { at: 0 }], ..Delta::default() }).unwrap();
        assert_eq!(verdict(&engine, 10, 80).0, None); // its VNI went with it
        assert_eq!(verdict(&engine, 15, 80).0.as_deref(), Some("new"));
        assert_eq!(verdict(&engine, 30, 80).0.as_deref(), Some("c"));
    }

    #[test]
    fn a_vni_may_pass_from_one_tenant_to_another_within_an_update_but_not_be_claimed_twice() {
        let engine = engine(&[("a", 10), ("b", 20)]);
        // a takes b's VNI while b moves to another: checked once every op is applied.
        let swap = vec![TenantOp::Replace { at: 0, tenant: entry("a", &[20], 80) }, TenantOp::Replace { at: 1, tenant: entry("b", &[21], 80) }];
        engine.apply(Delta { ops: swap, ..Delta::default() }).unwrap();
        assert_eq!(verdict(&engine, 20, 80).0.as_deref(), Some("a"));
        let twice = vec![TenantOp::Replace { at: 1, tenant: entry("b", &[20], 80) }];
        let err = engine.apply(Delta { ops: twice, ..Delta::default() }).unwrap_err().to_string();
        assert!(err.contains("VNI 20 is claimed by both"), "{err}");
        assert_eq!(verdict(&engine, 21, 80).0.as_deref(), Some("b")); // the refused update changed nothing
    }

    #[test]
    fn a_tenant_put_in_and_taken_out_in_one_update_withdraws_its_claims() {
        let engine = engine(&[("a", 10), ("b", 20)]);
        let mut passing = entry("passing", &[15], 80);
        passing.route.vlans = vec![7];
        let ops = vec![insert(1, passing), TenantOp::Remove { at: 1 }];
        engine.apply(Delta { ops, ..Delta::default() }).unwrap();
        assert_eq!(engine.tables().tenant_names(), ["a", "b"]);
        assert_eq!((verdict(&engine, 15, 80).0, tenant_on_vlan(&engine, 7)), (None, None));
        // Withdrawn by name and claim alone: a real conflict in the same update is still refused.
        let ops = vec![insert(2, entry("c", &[15], 80)), TenantOp::Replace { at: 0, tenant: entry("a", &[15], 80) }];
        let err = engine.apply(Delta { ops, ..Delta::default() }).unwrap_err().to_string();
        assert!(err.contains("VNI 15 is claimed by both"), "{err}");
    }

    /// The tenant name for an untunnelled TCP packet on outer VLAN `vlan`.
    fn tenant_on_vlan(engine: &Engine, vlan: i16) -> Option<String> {
        let info = PacketInfo { vlan, ip_version: 4, proto: 6, dst_port: 80, status: Status::Ok as u8, wire_len: 100, ..PacketInfo::zeroed() };
        let mut out = [Verdict::zeroed()];
        engine.classify(&[info], &mut out);
        usize::try_from(out[0].tenant).ok().map(|t| engine.tables().tenant_names()[t].clone())
    }

    #[test]
    fn a_route_kept_inline_and_one_kept_by_pointer_claim_and_release_alike() {
        let engine = engine(&[("a", 10), ("b", 20)]);
        let mut wide = entry("a", &[10, 11], 80);
        wide.route.vlans = vec![7];
        engine.apply(Delta { ops: vec![TenantOp::Replace { at: 0, tenant: wide }], ..Delta::default() }).unwrap();
        assert_eq!((verdict(&engine, 11, 80).0.as_deref(), tenant_on_vlan(&engine, 7).as_deref()), (Some("a"), Some("a")));
        // Back to a lone VNI (kept inline): the second VNI and the VLAN are free for b.
        engine.apply(Delta { ops: vec![TenantOp::Replace { at: 0, tenant: entry("a", &[10], 80) }], ..Delta::default() }).unwrap();
        assert_eq!((verdict(&engine, 11, 80).0, tenant_on_vlan(&engine, 7)), (None, None));
        let mut b = entry("b", &[11], 80);
        b.route.vlans = vec![7];
        engine.apply(Delta { ops: vec![TenantOp::Replace { at: 1, tenant: b }], ..Delta::default() }).unwrap();
        assert_eq!((verdict(&engine, 11, 80).0.as_deref(), tenant_on_vlan(&engine, 7).as_deref()), (Some("b"), Some("b")));
        assert_eq!((verdict(&engine, 10, 80).0.as_deref(), verdict(&engine, 20, 80).0), (Some("a"), None)); // b let 20 go
        let twice = engine.apply(Delta { ops: vec![TenantOp::Replace { at: 0, tenant: entry("a", &[11], 80) }], ..Delta::default() }).unwrap_err();
        assert!(twice.to_string().contains("VNI 11 is claimed by both"), "{twice}");
    }

    #[test]
    fn a_one_tenant_change_keeps_every_other_tenant_and_reports_only_it() {
        let engine = engine(&[("a", 10), ("b", 20), ("c", 30)]);
        let before = engine.tables();
        let report = engine.apply(Delta { ops: vec![TenantOp::Replace { at: 1, tenant: entry("b", &[20], 443) }], ..Delta::default() }).unwrap();
        assert_eq!(report, UpdateReport { kept: 2, incremental: 1, rebuilt: 0 });
        let after = engine.tables();
        assert!(Arc::ptr_eq(&before.tenants[0], &after.tenants[0]) && Arc::ptr_eq(&before.tenants[2], &after.tenants[2]));
        assert_eq!(verdict(&engine, 20, 443), (Some("b".to_string()), ALLOW));
        assert_eq!(verdict(&engine, 20, 80).1, DROP);
        assert!(engine.apply(Delta { ops: vec![TenantOp::Remove { at: 3 }], ..Delta::default() }).unwrap_err().to_string().contains("no tenant position 3"));
    }

    #[test]
    fn a_replacement_copies_only_the_chunk_that_holds_the_tenant() {
        let names: Vec<(String, u32)> = (0..5000).map(|i| (format!("t{i}"), 1000 + i)).collect();
        let engine = engine(&names.iter().map(|(name, vni)| (name.as_str(), *vni)).collect::<Vec<_>>());
        let (before, inputs_before) = (engine.tables(), engine.qos_inputs.lock().unwrap().clone());
        let mut changed = entry("t10", &[1010], 443);
        changed.qos.rate = 1000; // a new contract: its input is stored anew
        engine.apply(Delta { ops: vec![TenantOp::Replace { at: 10, tenant: changed }], ..Delta::default() }).unwrap();
        let (after, inputs) = (engine.tables(), engine.qos_inputs.lock().unwrap().clone());
        // 5,000 tenants: the data path's parts are 40 chunks of 128, of which a replacement copies
        // one; the other vectors group chunks of 64 by 64 (tenants 0-4095, 4096-), of which it
        // copies one group.
        assert_eq!(after.data_path.shared_chunks(&before.data_path), 39);
        let groups =
            [after.tenants.shared_groups(&before.tenants), after.routes.shared_groups(&before.routes), inputs.tenants.shared_groups(&inputs_before.tenants)];
        assert_eq!(groups, [1; 3]);
        assert_eq!((inputs.tenants[10].rate, verdict(&engine, 1010, 443)), (1000, (Some("t10".to_string()), ALLOW)));
    }

    #[test]
    fn tenants_with_equal_contracts_share_one_kept_input_and_a_changed_one_gets_its_own() {
        let engine = engine(&[("a", 10), ("b", 20), ("c", 30)]);
        let kept = |at: usize| Arc::clone(&engine.qos_inputs.lock().unwrap().tenants[at]);
        assert!(Arc::ptr_eq(&kept(0), &kept(2)), "one input");
        engine.apply(Delta { ops: vec![TenantOp::Replace { at: 1, tenant: metered("b", 20, 1000) }], ..Delta::default() }).unwrap();
        assert!(!Arc::ptr_eq(&kept(0), &kept(1)) && Arc::ptr_eq(&kept(0), &kept(2)));
        engine.apply(Delta { ops: vec![TenantOp::Replace { at: 2, tenant: metered("c", 30, 1000) }], ..Delta::default() }).unwrap();
        assert!(Arc::ptr_eq(&kept(1), &kept(2)), "c's new contract is b's");
        let tables = engine.tables();
        let spec = engine.qos_inputs.lock().unwrap().spec(|at| &tables.tenants[at].name).unwrap();
        assert_eq!(spec.tenants.iter().map(|t| &*t.name).collect::<Vec<_>>(), ["a", "b", "c"]);
    }

    #[test]
    fn a_contract_change_reaches_the_enforcer_alone_or_through_a_full_retarget() {
        let engine = engine(&[("a", 10), ("b", 20)]);
        engine.apply(Delta { ops: vec![TenantOp::Replace { at: 1, tenant: metered("b", 20, 1000) }], ..Delta::default() }).unwrap();
        let tables = engine.tables();
        let qos = engine.qos_inputs.lock().unwrap().spec(|at| &tables.tenants[at].name).unwrap();
        assert!(qos.tenants[1].contract.meter.is_some() && qos.tenants[0].contract.meter.is_none());
        let enforced = engine.with_enforcer(|e| e.contract_of(1));
        assert_eq!(enforced, Some(qos.tenants[1].clone()));
    }

    #[test]
    fn a_tenant_added_at_the_end_is_resolved_and_checked_alone_and_a_refused_one_changes_nothing() {
        let engine = engine(&[("a", 10), ("b", 20)]);
        engine.apply(Delta { ops: vec![insert(2, metered("c", 30, 1000))], ..Delta::default() }).unwrap();
        let tables = engine.tables();
        let qos = engine.qos_inputs.lock().unwrap().spec(|at| &tables.tenants[at].name).unwrap();
        assert_eq!(engine.with_enforcer(|e| (0..3).map(|t| e.contract_of(t)).collect::<Vec<_>>()), qos.tenants.into_iter().map(Some).collect::<Vec<_>>());
        for (refused, why) in [(entry("a", &[40], 80), "tenant 'a' appears twice"), (metered("d", 40, 0), "tenant 'd': meter: srTCM CIR is 0")] {
            let err = engine.apply(Delta { ops: vec![insert(3, refused)], ..Delta::default() }).unwrap_err().to_string();
            assert!(err.contains(why), "{err}");
            assert_eq!(engine.tables().tenant_names(), ["a", "b", "c"]);
        }
        let contracts = engine.with_enforcer(|e| (0..4).map(|t| e.contract_of(t).map(|qos| qos.name)).collect::<Vec<_>>());
        assert_eq!(contracts, [Some("a".into()), Some("b".into()), Some("c".into()), None], "the enforcer follows the tables in force");
    }

    #[test]
    fn an_update_of_several_changes_reaches_the_enforcer_in_their_order() {
        let engine = engine(&[("a", 10), ("b", 20), ("c", 30)]);
        let ops = vec![
            TenantOp::Remove { at: 1 },
            insert(2, metered("d", 40, 2000)),
            TenantOp::Replace { at: 0, tenant: metered("a", 10, 1000) },
            TenantOp::Replace { at: 1, tenant: metered("e", 50, 3000) }, // c renamed
        ];
        engine.apply(Delta { ops, ..Delta::default() }).unwrap();
        let tables = engine.tables();
        assert_eq!(tables.tenant_names(), ["a", "e", "d"]);
        let qos = engine.qos_inputs.lock().unwrap().spec(|at| &tables.tenants[at].name).unwrap();
        let enforced = engine.with_enforcer(|e| (0..4).map(|t| e.contract_of(t)).collect::<Vec<_>>());
        assert_eq!(enforced, qos.tenants.into_iter().map(Some).chain([None]).collect::<Vec<_>>());
        assert_eq!(verdict(&engine, 30, 80).0, None, "c's VNI is free");
        assert_eq!(verdict(&engine, 50, 80).0.as_deref(), Some("e"));
    }

    #[test]
    fn tenants_inserted_and_removed_in_the_middle_keep_every_tenant_on_its_own_trees() {
        let engine = Engine::new(TablesSpec::default()).unwrap();
        let mut model: Vec<(String, u32, u16)> = Vec::new();
        let mut seed = 12_345_u32;
        let mut random = move |below: usize| {
            seed = seed.wrapping_mul(1_103_515_245).wrapping_add(12_345);
            (seed >> 8) as usize % below.max(1)
        };
        for step in 0..120u32 {
            let mut ops = Vec::new();
            // A removal every third step, before an insert in the same update.
            if step % 3 == 2 {
                let gone = random(model.len());
                ops.push(TenantOp::Remove { at: gone });
                model.remove(gone);
            }
            let added = (format!("t{step}"), 100 + step, 1000 + step as u16);
            let at = random(model.len() + 1);
            ops.push(insert(at, entry(&added.0, &[added.1], added.2)));
            model.insert(at, added);
            engine.apply(Delta { ops, ..Delta::default() }).unwrap();
        }
        assert_eq!(engine.tables().tenant_names(), model.iter().map(|(name, ..)| name.clone()).collect::<Vec<_>>());
        for (name, vni, port) in &model {
            assert_eq!(verdict(&engine, *vni as i32, *port), (Some(name.clone()), ALLOW), "{name}");
            assert_eq!(verdict(&engine, *vni as i32, port + 1).1, DROP, "{name}");
        }
    }
}
