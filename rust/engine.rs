//! The classification engine: packets to tenants (by VNI, or by outer VLAN / source prefix
//! for untunnelled traffic), then to the tenant's first matching rule.
//!
//! The tables are immutable and swapped whole (`ArcSwap`): a batch loads them once, so a
//! classifying thread never waits for an update and never sees half of one. An update shares
//! the tables of tenants whose rules did not change and applies a one-rule difference
//! incrementally, so that its cost follows the change, not the policy.

use std::sync::{Arc, Mutex};

use arc_swap::ArcSwap;
use bytemuck::{Pod, Zeroable};
use rustc_hash::FxHashMap;

use crate::classify::{prefix_mask, Key, Rule, RuleTable};
use crate::enforce::{Enforcer, Processed, QosSpec, QosStats, StatsKey};
use crate::parse::{PacketInfo, Status, Tunnel};

/// Why a packet got its verdict.
#[repr(u8)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reason {
    /// A rule of the tenant matched.
    Rule = 0,
    /// No rule matched: the tenant's default.
    Default = 1,
    /// No tenant claims the packet: the policy's unknown-tenant action.
    UnknownTenant = 2,
    /// The capture stopped before the headers needed: dropped.
    Truncated = 3,
    /// Impossible headers: dropped.
    Malformed = 4,
    /// The tenant's packet is not IP (ARP, ...): the tenant's default.
    NotIp = 5,
}

pub const REASONS: usize = 6;
/// The class of a packet that is dropped (shown as -1 in verdicts).
pub const NO_CLASS: u16 = u16::MAX;

#[inline]
fn class_id(class: u16) -> i32 {
    if class == NO_CLASS {
        -1
    } else {
        i32::from(class)
    }
}
pub const DROP: u8 = 0;
pub const ALLOW: u8 = 1;

/// One packet's verdict, laid out as numpy's `isolane.VERDICT_DTYPE`.
#[repr(C, packed)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Pod, Zeroable)]
pub struct Verdict {
    pub tenant: i32,
    /// The index of the policy rule that matched (a policy rule may compile to several).
    pub rule: i32,
    pub cls: i32,
    pub action: u8,
    pub reason: u8,
}

pub fn verdict_fields() -> Vec<(&'static str, &'static str, usize)> {
    use std::mem::offset_of;
    vec![
        ("tenant", "=i4", offset_of!(Verdict, tenant)),
        ("rule", "=i4", offset_of!(Verdict, rule)),
        ("cls", "=i4", offset_of!(Verdict, cls)),
        ("action", "u1", offset_of!(Verdict, action)),
        ("reason", "u1", offset_of!(Verdict, reason)),
    ]
}

/// What a tenant's part of a policy compiles to.
#[derive(Debug, Clone, PartialEq)]
pub struct TenantSpec {
    pub name: String,
    pub rules: Vec<Rule>,
    /// Per rule: the action and class, and the index of the policy rule it came from.
    pub actions: Vec<u8>,
    pub classes: Vec<u16>,
    pub policy_rules: Vec<i32>,
    pub default_action: u8,
    pub default_class: u16,
}

#[derive(Debug, Clone)]
pub struct TenantTables {
    pub spec: TenantSpec,
    pub table: RuleTable,
}

/// A table rule with what it does: the rows one policy rule compiles to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RuleRow {
    pub rule: Rule,
    pub action: u8,
    pub class: u16,
}

/// One policy rule of one tenant changed, by its index among the tenant's policy rules.
#[derive(Debug, Clone, PartialEq)]
pub enum RuleEdit {
    Insert { at: i32, rows: Vec<RuleRow> },
    Remove { at: i32 },
    Replace { at: i32, rows: Vec<RuleRow> },
}

impl TenantTables {
    fn policy_rule_count(&self) -> i32 {
        self.spec.policy_rules.last().map_or(0, |last| last + 1)
    }

    /// The table rows policy rule `at` compiled to (they are contiguous: rules compile in order).
    fn rows_of(&self, at: i32) -> std::ops::Range<usize> {
        let rules = &self.spec.policy_rules;
        rules.partition_point(|&p| p < at)..rules.partition_point(|&p| p <= at)
    }

    fn apply(&mut self, edit: RuleEdit) -> Result<(), String> {
        match edit {
            RuleEdit::Insert { at, rows } => self.insert_rows(at, rows),
            RuleEdit::Remove { at } => self.remove_rows(at),
            RuleEdit::Replace { at, rows } => {
                self.remove_rows(at)?;
                self.insert_rows(at, rows)
            }
        }
    }

    fn insert_rows(&mut self, at: i32, rows: Vec<RuleRow>) -> Result<(), String> {
        if !(0..=self.policy_rule_count()).contains(&at) || rows.is_empty() {
            return Err(format!("cannot insert policy rule {at}: the tenant has {} rules", self.policy_rule_count()));
        }
        let start = self.rows_of(at).start;
        for later in &mut self.spec.policy_rules[start..] {
            *later += 1;
        }
        for (offset, row) in rows.into_iter().enumerate() {
            let position = start + offset;
            self.table.insert(position, row.rule)?;
            self.spec.rules.insert(position, row.rule);
            self.spec.actions.insert(position, row.action);
            self.spec.classes.insert(position, row.class);
            self.spec.policy_rules.insert(position, at);
        }
        Ok(())
    }

    fn remove_rows(&mut self, at: i32) -> Result<(), String> {
        let rows = self.rows_of(at);
        if rows.is_empty() {
            return Err(format!("no policy rule {at}: the tenant has {} rules", self.policy_rule_count()));
        }
        for _ in rows.clone() {
            self.table.remove(rows.start)?;
        }
        self.spec.rules.drain(rows.clone());
        self.spec.actions.drain(rows.clone());
        self.spec.classes.drain(rows.clone());
        self.spec.policy_rules.drain(rows.clone());
        for later in &mut self.spec.policy_rules[rows.start..] {
            *later -= 1;
        }
        Ok(())
    }
}

/// VNI to tenant over the 24-bit space: a direct index in 4096 blocks of 4096, a block
/// allocated only where a VNI is claimed (a flat array would be 64 MB).
#[derive(Debug, Clone, Default)]
struct VniMap {
    blocks: Vec<Option<Box<[i32; 4096]>>>,
}

impl VniMap {
    fn insert(&mut self, vni: u32, tenant: i32) {
        if self.blocks.is_empty() {
            self.blocks = vec![None; 4096];
        }
        let block = self.blocks[(vni >> 12) as usize & 0xfff].get_or_insert_with(|| Box::new([-1; 4096]));
        block[(vni & 0xfff) as usize] = tenant;
    }

    #[inline]
    fn get(&self, vni: i32) -> i32 {
        if !(0..1 << 24).contains(&vni) {
            return -1;
        }
        match self.blocks.get((vni >> 12) as usize) {
            Some(Some(block)) => block[(vni & 0xfff) as usize],
            _ => -1,
        }
    }
}

/// Everything the data path reads, swapped as one.
#[derive(Debug, Clone, Default)]
pub struct EngineTables {
    tenants: Vec<Arc<TenantTables>>,
    vnis: VniMap,
    vlans: FxHashMap<u16, i32>,
    /// Outer source prefixes of untunnelled traffic, checked in order.
    sources: Vec<(u128, u8, i32)>,
    unknown_action: u8,
}

impl EngineTables {
    pub fn tenant_names(&self) -> Vec<String> {
        self.tenants.iter().map(|t| t.spec.name.clone()).collect()
    }

    pub fn tenant(&self, index: usize) -> Option<&TenantTables> {
        self.tenants.get(index).map(Arc::as_ref)
    }

    #[inline]
    fn tenant_of(&self, info: &PacketInfo) -> i32 {
        if info.tunnel != Tunnel::None as u8 {
            return self.vnis.get(info.vni); // a tunnelled packet belongs only to its VNI's tenant
        }
        if info.vlan >= 0 {
            if let Some(&tenant) = self.vlans.get(&(info.vlan as u16)) {
                return tenant;
            }
        }
        if info.ip_version != 0 {
            let outer = u128::from_be_bytes(info.outer_src);
            if let Some(&(_, _, tenant)) = self.sources.iter().find(|(prefix, len, _)| (outer ^ prefix) & prefix_mask(*len) == 0) {
                return tenant;
            }
        }
        -1
    }

    #[inline]
    pub fn classify(&self, info: &PacketInfo) -> Verdict {
        let tenant = self.tenant_of(info);
        let Some(tables) = usize::try_from(tenant).ok().and_then(|t| self.tenants.get(t)) else {
            return Verdict { tenant: -1, rule: -1, cls: -1, action: self.unknown_action, reason: Reason::UnknownTenant as u8 };
        };
        let spec = &tables.spec;
        let fallback = |reason: Reason, action: u8| Verdict { tenant, rule: -1, cls: class_id(spec.default_class), action, reason: reason as u8 };
        match info.status {
            s if s == Status::Truncated as u8 => return fallback(Reason::Truncated, DROP),
            s if s == Status::Malformed as u8 => return fallback(Reason::Malformed, DROP),
            _ if info.ip_version == 0 => return fallback(Reason::NotIp, spec.default_action),
            _ => {}
        }
        let key = Key {
            src: u128::from_be_bytes(info.src),
            dst: u128::from_be_bytes(info.dst),
            src_port: info.src_port,
            dst_port: info.dst_port,
            proto: info.proto,
            dscp: info.dscp,
        };
        match tables.table.lookup(&key) {
            Some(rule) => Verdict {
                tenant,
                rule: spec.policy_rules[rule],
                cls: class_id(spec.classes[rule]),
                action: spec.actions[rule],
                reason: Reason::Rule as u8,
            },
            None => fallback(Reason::Default, spec.default_action),
        }
    }
}

/// A policy's tables before they are installed: tenants in order (ids are positions).
#[derive(Debug, Clone, Default)]
pub struct TablesSpec {
    pub tenants: Vec<TenantSpec>,
    pub vnis: Vec<(u32, i32)>,
    pub vlans: Vec<(u16, i32)>,
    pub sources: Vec<(u128, u8, i32)>,
    pub unknown_action: u8,
}

/// Per-tenant counters, kept by tenant name so that they run on across policy updates.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Counters {
    pub packets: [u64; 2],
    pub bytes: [u64; 2],
    pub reasons: [u64; REASONS],
}

impl Counters {
    fn add(&mut self, verdict: &Verdict, wire_len: u32) {
        let action = usize::from(verdict.action.min(1));
        self.packets[action] += 1;
        self.bytes[action] += u64::from(wire_len);
        self.reasons[usize::from(verdict.reason)] += 1;
    }
}

/// How an update was applied to each tenant.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct UpdateReport {
    pub kept: usize,
    pub incremental: usize,
    pub rebuilt: usize,
}

pub struct Engine {
    tables: ArcSwap<EngineTables>,
    /// By tenant name; `None` for packets no tenant claims.
    counters: Mutex<FxHashMap<Option<String>, Counters>>,
    /// Serialises updates (never the data path), so each diff is against the tables it replaces.
    updating: Mutex<()>,
    /// QoS state, taken once per `process` batch (meters must see packets in order) and by
    /// updates when they install tables, so a batch sees tables and contracts of one policy.
    qos: Mutex<Enforcer>,
}

impl Engine {
    pub fn new(spec: TablesSpec) -> Result<Self, String> {
        let engine = Engine {
            tables: ArcSwap::from_pointee(EngineTables::default()),
            counters: Mutex::default(),
            updating: Mutex::default(),
            qos: Mutex::default(),
        };
        engine.update(spec)?;
        Ok(engine)
    }

    pub fn tables(&self) -> Arc<EngineTables> {
        self.tables.load_full()
    }

    /// Classifies a batch against one consistent set of tables and counts the result.
    pub fn classify(&self, records: &[PacketInfo], out: &mut [Verdict]) {
        let tables = self.tables.load_full();
        let mut batch_counters: Vec<Counters> = vec![Counters::default(); tables.tenants.len() + 1];
        for (info, slot) in records.iter().zip(out.iter_mut()) {
            *slot = tables.classify(info);
            let index = usize::try_from(slot.tenant).unwrap_or(tables.tenants.len());
            batch_counters[index].add(slot, info.wire_len);
        }
        let mut counters = self.counters.lock().unwrap_or_else(|p| p.into_inner());
        for (index, batch) in batch_counters.into_iter().enumerate() {
            if batch.packets.iter().sum::<u64>() == 0 {
                continue;
            }
            let name = tables.tenants.get(index).map(|t| t.spec.name.clone());
            let total = counters.entry(name).or_default();
            for i in 0..2 {
                total.packets[i] += batch.packets[i];
                total.bytes[i] += batch.bytes[i];
            }
            for (sum, add) in total.reasons.iter_mut().zip(batch.reasons) {
                *sum += add;
            }
        }
    }

    pub fn counters(&self) -> FxHashMap<Option<String>, Counters> {
        self.counters.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Changes one policy rule of one tenant without touching the rest of the policy: the
    /// tenant's tables are patched and swapped in with every other tenant's shared.
    pub fn edit_tenant(&self, name: &str, edit: RuleEdit) -> Result<(), String> {
        let _serial = self.updating.lock().unwrap_or_else(|p| p.into_inner());
        let current = self.tables.load_full();
        let index = current.tenants.iter().position(|t| t.spec.name == name).ok_or_else(|| format!("no tenant '{name}'"))?;
        let mut tenant = (*current.tenants[index]).clone();
        tenant.apply(edit)?;
        let mut tables = (*current).clone();
        tables.tenants[index] = Arc::new(tenant);
        self.tables.store(Arc::new(tables));
        Ok(())
    }

    /// Installs a new policy's tables: unchanged tenants are shared, a tenant whose rules
    /// differ by one insertion, removal or replacement is updated in place of a rebuild.
    pub fn update(&self, spec: TablesSpec) -> Result<UpdateReport, String> {
        let _serial = self.updating.lock().unwrap_or_else(|p| p.into_inner());
        let current = self.tables.load_full();
        let by_name: FxHashMap<&str, &Arc<TenantTables>> = current.tenants.iter().map(|t| (t.spec.name.as_str(), t)).collect();
        let mut report = UpdateReport::default();
        let mut tenants = Vec::with_capacity(spec.tenants.len());
        for (index, tenant) in spec.tenants.into_iter().enumerate() {
            check_tenant(&tenant).map_err(|why| format!("tenant {index} ({}): {why}", tenant.name))?;
            let tables = match by_name.get(tenant.name.as_str()) {
                Some(old) if old.spec == tenant => {
                    report.kept += 1;
                    Arc::clone(old)
                }
                Some(old) => match incremental(old, &tenant) {
                    Some(table) => {
                        report.incremental += 1;
                        Arc::new(TenantTables { spec: tenant, table })
                    }
                    None => {
                        report.rebuilt += 1;
                        Arc::new(build(tenant, index)?)
                    }
                },
                None => {
                    report.rebuilt += 1;
                    Arc::new(build(tenant, index)?)
                }
            };
            tenants.push(tables);
        }
        let mut tables = EngineTables { tenants, unknown_action: spec.unknown_action, ..Default::default() };
        for (vni, tenant) in spec.vnis {
            tables.vnis.insert(vni, tenant);
        }
        tables.vlans = spec.vlans.into_iter().collect();
        tables.sources = spec.sources;
        self.install_tables(tables);
        Ok(report)
    }

    /// Installs a policy's tables and QoS contracts together: tenants whose contract did not
    /// change (by name) keep their meters, shapers and queues.
    pub fn update_with_qos(&self, spec: TablesSpec, qos: QosSpec) -> Result<UpdateReport, String> {
        qos.check()?;
        self.lock_qos().stage(Some(qos));
        let report = self.update(spec);
        if report.is_err() {
            self.lock_qos().stage(None);
        }
        report
    }

    /// Classifies and enforces one batch (`rust/enforce.rs`) against one policy's tables and
    /// contracts; counts the verdicts as `classify` does.
    pub fn process(&self, records: &[PacketInfo], out: &mut [Processed]) {
        let mut qos = self.lock_qos();
        let mut verdicts: Vec<Verdict> = crate::memory::zeroed_vec(records.len());
        self.classify(records, &mut verdicts);
        qos.enforce(records, &verdicts, out);
    }

    /// QoS statistics per (tenant, class) since the engine was made.
    pub fn qos_stats(&self) -> Vec<(StatsKey, QosStats)> {
        self.lock_qos().stats()
    }

    /// Swaps in new tables while holding the QoS state, which follows them by tenant name.
    fn install_tables(&self, tables: EngineTables) {
        let names = tables.tenant_names();
        let mut qos = self.lock_qos();
        self.tables.store(Arc::new(tables));
        qos.retarget(&names);
    }

    fn lock_qos(&self) -> std::sync::MutexGuard<'_, Enforcer> {
        self.qos.lock().unwrap_or_else(|p| p.into_inner())
    }
}

fn check_tenant(tenant: &TenantSpec) -> Result<(), String> {
    let n = tenant.rules.len();
    if tenant.actions.len() != n || tenant.classes.len() != n || tenant.policy_rules.len() != n {
        return Err(format!("{n} rules but {} actions, {} classes, {} policy rule indices", tenant.actions.len(), tenant.classes.len(), tenant.policy_rules.len()));
    }
    Ok(())
}

fn build(tenant: TenantSpec, index: usize) -> Result<TenantTables, String> {
    let table = RuleTable::new(tenant.rules.clone()).map_err(|(rule, why)| format!("tenant {index} ({}), rule {rule}: {why}", tenant.name))?;
    Ok(TenantTables { spec: tenant, table })
}

/// The old table with the one rule that differs inserted, removed or replaced; `None` when
/// the rule lists differ by more than that.
fn incremental(old: &TenantTables, new: &TenantSpec) -> Option<RuleTable> {
    let (a, b) = (&old.spec.rules, &new.rules);
    let head = a.iter().zip(b).take_while(|(x, y)| x == y).count();
    let tail = a[head..].iter().rev().zip(b[head..].iter().rev()).take_while(|(x, y)| x == y).count();
    let mut table = old.table.clone();
    match (a.len() - head - tail, b.len() - head - tail) {
        (0, 0) => {}
        (0, 1) => table.insert(head, b[head]).ok()?,
        (1, 0) => {
            table.remove(head).ok()?;
        }
        (1, 1) => {
            table.replace(head, b[head]).ok()?;
        }
        _ => return None,
    }
    Some(table)
}

#[cfg(test)]
mod tests;
