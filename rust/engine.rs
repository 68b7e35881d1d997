//! The classification engine: packets to tenants (by VNI, or by outer VLAN / source prefix
//! for untunnelled traffic), then to the tenant's first matching rule.
//!
//! The tables are immutable and swapped whole (`ArcSwap`): a batch loads them once, so a
//! classifying thread never waits for an update and never sees half of one. An update shares
//! the tables of tenants whose rules did not change and applies a one-rule difference
//! incrementally, so that its cost follows the change, not the policy.

use std::sync::{Arc, Mutex};

use arc_swap::ArcSwap;
use rustc_hash::FxHashMap;

use crate::chunked_vec::{GroupedVec, PairedVec};
use crate::classify::{first_match, prefix_mask, Fields, Forest, Key, Match, Payload, Ranked, Rule, RuleTable, DEAD, NO_RULE};
use crate::enforce::{InputPool, Processed, QosInputs, QosSpec, QosStats, StatsKey};
use crate::error::CoreError;
use crate::memory::prefetch;
use crate::parse::{PacketInfo, Status, Tunnel};
use crate::verdict::class_id;
pub use crate::verdict::{verdict_fields, Reason, Verdict, ALLOW, DROP, NO_CLASS, REASONS};
use build::{build, check_tenant, incremental, outcomes};
pub use counters::Counters;
use counters::{CounterNames, CounterShards, UNKNOWN_SLOT};
pub use pipeline::Packets;
use pipeline::QosPipeline;

mod build;
mod counters;
mod delta;
mod frames;
mod pipeline;
mod qos_steps;

use frames::FrameRules;
pub use frames::{frame_ethertype, frame_rule, FRAME_RULE_DSCP};

use delta::KeptRoute;
pub use delta::{Delta, Route, TenantEntry, TenantOp};

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

/// A tenant as the engine keeps it: its rules in a [`RuleTable`], each row with what it does,
/// in chunks that an edited copy shares (an edit copies kilobytes, not the tenant).
#[derive(Debug, Clone)]
pub struct TenantTables {
    /// Shared with the counters' names (a tenant's name is held once).
    pub name: Arc<str>,
    pub table: RuleTable<RowOutcome>,
    default_action: u8,
    default_class: u16,
    /// Its rules by EtherType, read from the rows (`engine/frames.rs`), if it has any: here, not
    /// beside the trees, so that the data path's per-tenant part stays as small as it was.
    frames: Option<Box<FrameRules>>,
}

/// What a table row does. The first row of each policy rule opens a group, so that policy rules
/// are numbered by counting (inserting or removing one renumbers nothing).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RowOutcome {
    action: u8,
    class: u16,
    first_of_policy_rule: bool,
}

impl Payload for RowOutcome {
    fn opens_group(&self) -> bool {
        self.first_of_policy_rule
    }
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
    /// The tables of `spec`, whose rules `table` holds (`spec` checked by [`check_tenant`]).
    fn new(spec: &TenantSpec, mut table: RuleTable<RowOutcome>) -> TenantTables {
        table.set_payloads(outcomes(spec));
        let mut tables =
            TenantTables { table, name: spec.name.as_str().into(), default_action: spec.default_action, default_class: spec.default_class, frames: None };
        tables.frames = tables.read_frames();
        tables
    }

    /// The spec these tables hold (as edited since).
    pub fn spec(&self) -> TenantSpec {
        let numbered: Vec<(i32, RowOutcome)> = self.numbered_rows().collect();
        TenantSpec {
            name: self.name.to_string(),
            rules: self.table.rules().collect(),
            actions: numbered.iter().map(|(_, row)| row.action).collect(),
            classes: numbered.iter().map(|(_, row)| row.class).collect(),
            policy_rules: numbered.iter().map(|&(policy_rule, _)| policy_rule).collect(),
            default_action: self.default_action,
            default_class: self.default_class,
        }
    }

    /// Whether these tables hold `spec`, compared where they lie (no copy).
    fn holds(&self, spec: &TenantSpec) -> bool {
        let held = self.numbered_rows().zip(self.table.rules()).map(|((policy_rule, row), rule)| (policy_rule, rule, row.action, row.class));
        let wanted = (0..spec.rules.len()).map(|i| (spec.policy_rules[i], spec.rules[i], spec.actions[i], spec.classes[i]));
        *self.name == spec.name && (self.default_action, self.default_class) == (spec.default_action, spec.default_class) && held.eq(wanted)
    }

    /// These tables with `table` in place of theirs.
    fn with_table(&self, table: RuleTable<RowOutcome>) -> TenantTables {
        TenantTables { name: self.name.clone(), table, frames: self.frames.clone(), ..*self }
    }

    /// Every table row with its policy rule, in order.
    fn numbered_rows(&self) -> impl Iterator<Item = (i32, RowOutcome)> + '_ {
        self.table.payloads().scan(-1, |policy_rule, row| {
            *policy_rule += i32::from(row.first_of_policy_rule);
            Some((*policy_rule, row))
        })
    }

    /// Table row `row`'s policy rule and what it does.
    fn outcome(&self, row: usize) -> (i32, RowOutcome) {
        let (policy_rule, outcome) = self.table.numbered(row);
        (policy_rule as i32, outcome)
    }

    fn policy_rule_count(&self) -> i32 {
        self.table.group_count() as i32
    }

    /// The table rows policy rule `at` compiled to (they are contiguous: rules compile in order).
    fn rows_of(&self, at: usize) -> std::ops::Range<usize> {
        self.table.group_start(at)..self.table.group_start(at + 1)
    }

    fn apply(&mut self, edit: RuleEdit) -> Result<(), CoreError> {
        match edit {
            RuleEdit::Insert { at, rows } => self.insert_rows(at, rows)?,
            RuleEdit::Remove { at } => self.remove_rows(at)?,
            RuleEdit::Replace { at, rows } => {
                self.remove_rows(at)?;
                self.insert_rows(at, rows)?;
            }
        }
        self.frames = self.read_frames();
        Ok(())
    }

    fn insert_rows(&mut self, at: i32, rows: Vec<RuleRow>) -> Result<(), CoreError> {
        if !(0..=self.policy_rule_count()).contains(&at) || rows.is_empty() {
            return Err(CoreError::RuleIndex { what: "policy rule", index: at.into(), rules: self.policy_rule_count() as usize, insert: true });
        }
        let start = self.rows_of(at as usize).start;
        for (offset, row) in rows.into_iter().enumerate() {
            let outcome = RowOutcome { action: row.action, class: row.class, first_of_policy_rule: offset == 0 };
            self.table.insert_with(start + offset, row.rule, outcome)?;
        }
        Ok(())
    }

    fn remove_rows(&mut self, at: i32) -> Result<(), CoreError> {
        if !(0..self.policy_rule_count()).contains(&at) {
            return Err(CoreError::RuleIndex { what: "policy rule", index: at.into(), rules: self.policy_rule_count() as usize, insert: false });
        }
        let rows = self.rows_of(at as usize);
        for _ in rows.clone() {
            self.table.remove(rows.start)?;
        }
        Ok(())
    }
}

/// What a tree rule gives a packet it matches, by tree id.
#[derive(Debug, Clone, Copy, Default)]
struct Outcome {
    policy_rule: i32,
    class: u16,
    action: u8,
    live: bool,
}

/// The part of a tenant the data path reads, kept inline in the engine's tables so that a
/// packet goes from its tenant straight to the trees: the trees, and per tree rule its outcome
/// (in place of three lookups through the rule's current index); or a small table's rows. One
/// shape for both, so that the trees' path checks no variant.
#[derive(Debug, Clone)]
struct HotTenant {
    trees: Forest,
    outcomes: Arc<[Outcome]>,
    /// A small table's rules, each with what it does, shared with the tenant's table (held
    /// once): scanned in order. No trees then.
    small: Option<Arc<[Ranked<RowOutcome>]>>,
    /// Whether the trees do not hold every rule: rules were added since they were built (the
    /// tenant's table has them), or the table is small.
    fresh: bool,
    /// Whether every tree rule is live: a match needs no outcome to be checked.
    all_live: bool,
}

/// What every packet of a tenant reads: 8 bytes, so that a thousand tenants take 8 KiB of L1
/// (a tenant without rules, the common case, reads nothing else).
#[derive(Debug, Clone, Copy, Default)]
struct TenantHead {
    /// Where the engine counts this tenant's packets.
    counter_slot: u32,
    default_class: u16,
    default_action: u8,
    /// What an IP packet of the tenant needs beyond the trees: [`RULELESS`], [`IP_FRAME_RULES`].
    flags: u8,
}

/// The tenant has no rules: every IP packet of it takes the default (a tenant that is a VNI and
/// a contract skips the trees and their fields).
const RULELESS: u8 = 1;
/// A rule of the tenant matches IPv4 or IPv6 frames by EtherType: its IP packets skip the trees
/// for the whole table and then its frame rules (a check on the trees' path slowed every packet
/// by 18 % at 1,000 tenants: `cargo run --release --example engine_speed 1000 256`).
const IP_FRAME_RULES: u8 = 2;

impl TenantHead {
    fn of(tenant: &TenantTables, counter_slot: u32) -> TenantHead {
        let frame_rules_name_ip = tenant.frames.as_ref().is_some_and(|frames| frames.name_ip());
        let flags = if tenant.table.is_empty() { RULELESS } else { 0 } | if frame_rules_name_ip { IP_FRAME_RULES } else { 0 };
        TenantHead { counter_slot, default_class: tenant.default_class, default_action: tenant.default_action, flags }
    }

    /// The verdict when no rule matches.
    #[inline]
    fn default_verdict(&self, tenant: i32) -> Verdict {
        Verdict { tenant, rule: -1, cls: class_id(self.default_class), action: self.default_action, reason: Reason::Default as u8 }
    }
}

impl HotTenant {
    fn of(tenant: &TenantTables) -> HotTenant {
        let Some((trees, indices)) = tenant.table.trees() else {
            let small = tenant.table.small_rows();
            return HotTenant { trees: Forest::default(), outcomes: no_outcomes(), small, fresh: true, all_live: true };
        };
        // Live tree rules are in row order: one pass over the rows numbers their policy rules.
        let (mut rows, mut next_row) = (tenant.numbered_rows(), 0);
        let mut outcome = |index: u32| match index {
            DEAD => Outcome::default(),
            index => {
                let (policy_rule, row) = rows.nth(index as usize - next_row).expect("a live tree rule's row");
                next_row = index as usize + 1;
                Outcome { policy_rule, class: row.class, action: row.action, live: true }
            }
        };
        HotTenant {
            trees: trees.clone(),
            outcomes: indices.iter().map(|&index| outcome(index)).collect(),
            small: None,
            fresh: tenant.table.has_fresh(),
            all_live: !indices.contains(&DEAD),
        }
    }

    /// The first live rule matching an IPv4 packet ([`NO_RULE`]: none), by tree id or a small
    /// table's row, if the tenant's rules here are all its rules (else the tenant's table
    /// answers: see [`EngineTables::classify_by_table`]).
    #[inline]
    fn tree_match(&self, fields: &Fields) -> Option<u32> {
        if self.fresh {
            return self.small.as_ref().map(|rules| first_match(rules, &fields.key()).map_or(NO_RULE, |row| row as u32));
        }
        if self.all_live {
            return Some(self.trees.lookup(fields, NO_RULE, |_| true));
        }
        let outcomes = &self.outcomes;
        Some(self.trees.lookup(fields, NO_RULE, |id| outcomes[id as usize].live))
    }

    /// The verdict of match `id` from [`HotTenant::tree_match`] ([`NO_RULE`]: the default).
    #[inline]
    fn verdict(&self, head: &TenantHead, tenant: i32, id: u32) -> Verdict {
        let (policy_rule, class, action) = match (self.outcomes.get(id as usize), &self.small) {
            (Some(o), _) => (o.policy_rule, o.class, o.action),
            // Its policy rule: the policy rules its rows and those before it open, less one.
            (None, Some(rules)) => match rules.get(..=id as usize) {
                Some(through @ [.., last]) => {
                    let opened = through.iter().filter(|rule| rule.payload().first_of_policy_rule).count();
                    (opened as i32 - 1, last.payload().class, last.payload().action)
                }
                _ => return head.default_verdict(tenant),
            },
            (None, None) => return head.default_verdict(tenant),
        };
        Verdict { tenant, rule: policy_rule, cls: class_id(class), action, reason: Reason::Rule as u8 }
    }
}

/// The outcomes of a tenant without trees: one empty list that they all share (a list each
/// would be 16 bytes a small tenant).
fn no_outcomes() -> Arc<[Outcome]> {
    static NONE: std::sync::OnceLock<Arc<[Outcome]>> = std::sync::OnceLock::new();
    Arc::clone(NONE.get_or_init(|| Arc::from([])))
}

/// VNI to tenant over the 24-bit space: a direct index in 4096 blocks of 4096, a block
/// allocated only where a VNI is claimed (a flat array would be 64 MB). Shared between the
/// tables of successive edits, which do not change it.
#[derive(Debug, Clone, Default)]
struct VniMap {
    blocks: Arc<[Option<Arc<[i32; 4096]>>]>,
}

impl VniMap {
    fn new(vnis: impl IntoIterator<Item = (u32, i32)>) -> VniMap {
        let mut blocks: Vec<Option<Arc<[i32; 4096]>>> = Vec::new();
        for (vni, tenant) in vnis {
            if blocks.is_empty() {
                blocks = vec![None; 4096];
            }
            let block = blocks[(vni >> 12) as usize & 0xfff].get_or_insert_with(|| Arc::new([-1; 4096]));
            Arc::make_mut(block)[(vni & 0xfff) as usize] = tenant;
        }
        VniMap { blocks: blocks.into() }
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
    /// In shared chunks, so that an update copies a pointer per 64 tenants, not each tenant.
    tenants: GroupedVec<Arc<TenantTables>>,
    /// `tenants[t]`'s data-path parts, its head and hot state (always `Some`), found together,
    /// in chunks that an update copies one of (`chunked_vec/paired.rs`).
    data_path: PairedVec<TenantHead, Option<HotTenant>>,
    /// What selects each tenant's traffic, as [`Engine::apply`] was given it.
    routes: GroupedVec<KeptRoute>,
    vnis: VniMap,
    /// Shared by pointer with the tables of updates that do not change them.
    vlans: Arc<FxHashMap<u16, i32>>,
    /// Outer source prefixes of untunnelled traffic, checked in order.
    sources: Arc<[(u128, u8, i32)]>,
    unknown_action: u8,
    /// How many counter slots the engine had named when these tables were made.
    counter_slots: usize,
}

impl EngineTables {
    /// The tenants' names, shared with the tables.
    pub fn shared_names(&self) -> Vec<Arc<str>> {
        // Exact: collected from the chunks' iterator, the list would grow by doubling.
        let mut names = Vec::with_capacity(self.tenants.len());
        names.extend(self.tenants.iter().map(|t| Arc::clone(&t.name)));
        names
    }

    pub fn tenant_names(&self) -> Vec<String> {
        self.shared_names().iter().map(|name| name.to_string()).collect()
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

    /// Classifies a batch a few packets at a time, in passes that each take one step of every
    /// packet's walk and ask the cache for the next (the first tree steps, the tree match, then
    /// its outcome), so that packets of different tenants wait for memory together rather than
    /// in turn. Each packet is counted in `counters` by its tenant's counter slot.
    pub fn classify_all(&self, records: &[PacketInfo], out: &mut [Verdict], counters: &mut [Counters]) {
        const GROUP: usize = 16;
        for (records, out) in records.chunks(GROUP).zip(out.chunks_mut(GROUP)) {
            // Each packet's tenant parts are found once, in the first pass.
            let mut packets = [(-1i32, None, None, None); GROUP];
            for ((tenant, parts, fields, id), info) in packets.iter_mut().zip(records) {
                *tenant = self.tenant_of(info);
                let Some((head, hot)) = self.parts_of(*tenant) else { continue };
                *parts = Some((head, hot));
                match head.flags {
                    0 => {
                        if let Some(found) = fields_of(info) {
                            hot.trees.prefetch(fields.insert(found));
                        }
                    }
                    RULELESS => *id = Some(NO_RULE), // its default, whatever the packet's fields
                    _ => {}                          // rules by IP EtherType: the whole table answers, then the frame rules
                }
            }
            for (_, parts, fields, _) in &packets[..records.len()] {
                if let (Some((_, hot)), Some(fields)) = (parts, fields) {
                    hot.trees.prefetch_second(fields);
                }
            }
            for (_, parts, fields, id) in &mut packets[..records.len()] {
                if let (Some((_, hot)), Some(fields)) = (parts, fields) {
                    *id = hot.tree_match(fields);
                    if let Some(outcome) = id.and_then(|id| hot.outcomes.get(id as usize)) {
                        prefetch(outcome);
                    }
                }
            }
            for ((&(tenant, parts, _, id), info), slot) in packets.iter().zip(records).zip(out.iter_mut()) {
                *slot = self.classify_as(tenant, parts, id, info);
                let counter = parts.map_or(UNKNOWN_SLOT, |(head, _)| head.counter_slot);
                counters[counter as usize].add(slot, info.wire_len);
            }
        }
    }

    /// `tenant`'s head and hot state (`None`: no tenant, -1, or past the last).
    #[inline]
    fn parts_of(&self, tenant: i32) -> Option<(&TenantHead, &HotTenant)> {
        let (head, hot) = self.data_path.get(usize::try_from(tenant).ok()?)?;
        Some((head, hot.as_ref()?))
    }

    /// The verdict on a packet of `tenant` (-1: no tenant claims it), given its parts and its
    /// tree match (`None`: not an IPv4 packet, or the trees do not hold every rule of the tenant).
    #[inline]
    fn classify_as(&self, tenant: i32, parts: Option<(&TenantHead, &HotTenant)>, tree_match: Option<u32>, info: &PacketInfo) -> Verdict {
        let Some((head, hot)) = parts else {
            return Verdict { tenant: -1, rule: -1, cls: -1, action: self.unknown_action, reason: Reason::UnknownTenant as u8 };
        };
        let fallback = |reason: Reason, action: u8| Verdict { tenant, rule: -1, cls: class_id(head.default_class), action, reason: reason as u8 };
        match info.status {
            s if s == Status::Truncated as u8 => return fallback(Reason::Truncated, DROP),
            s if s == Status::Malformed as u8 => return fallback(Reason::Malformed, DROP),
            _ if info.ip_version == 0 => return self.by_frame_rules(tenant, info).unwrap_or_else(|| fallback(Reason::NotIp, head.default_action)),
            _ => {}
        }
        match tree_match {
            Some(NO_RULE) => return head.default_verdict(tenant),
            Some(id) => return hot.verdict(head, tenant, id),
            None => {}
        }
        let by_ip_rules = self.classify_by_table(tenant, (head, hot), info);
        if head.flags & IP_FRAME_RULES != 0 {
            return self.frames_first(tenant, info, by_ip_rules);
        }
        by_ip_rules
    }

    /// The verdict from the tenant's whole table: for IPv6 packets, and while rules added
    /// since the trees were built wait for the background rebuild. (Kept inline: marked cold
    /// and out of line, it slowed the common path by 5-20 %.)
    #[inline]
    fn classify_by_table(&self, tenant: i32, (head, hot): (&TenantHead, &HotTenant), info: &PacketInfo) -> Verdict {
        let key = Key {
            src: u128::from_be_bytes(info.src),
            dst: u128::from_be_bytes(info.dst),
            src_port: info.src_port,
            dst_port: info.dst_port,
            proto: info.proto,
            dscp: info.dscp,
        };
        let tables = &self.tenants[tenant as usize];
        // A tree rule's outcome is kept by tree id (exact for every live one), so only a rule
        // added since the build is looked up by its row.
        let id = match tables.table.find(&key) {
            Some(Match::Row(row)) => {
                let (policy_rule, row) = tables.outcome(row);
                return Verdict { tenant, rule: policy_rule, cls: class_id(row.class), action: row.action, reason: Reason::Rule as u8 };
            }
            Some(Match::Tree(id)) => id,
            None => NO_RULE,
        };
        hot.verdict(head, tenant, id)
    }
}

/// An IPv4 packet's fields as the trees take them.
#[inline]
fn fields_of(info: &PacketInfo) -> Option<Fields> {
    Fields::new(u128::from_be_bytes(info.src), u128::from_be_bytes(info.dst), info.src_port, info.dst_port, info.proto, info.dscp)
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

/// How an update was applied to each tenant.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct UpdateReport {
    pub kept: usize,
    pub incremental: usize,
    pub rebuilt: usize,
}

pub struct Engine {
    /// Shared with background rebuilds, which install what they build.
    tables: Arc<ArcSwap<EngineTables>>,
    counter_names: Mutex<CounterNames>,
    counters: CounterShards,
    /// Serialises updates (never the data path), so each diff is against the tables it replaces.
    updating: Arc<Mutex<()>>,
    /// Background rebuilds of worn trees, by tenant name.
    rebuilds: Mutex<FxHashMap<String, std::thread::JoinHandle<()>>>,
    /// QoS state and the threads that feed it (`engine/pipeline.rs`), taken once per `process`
    /// batch (meters must see packets in order) and by updates when they install tables, so a
    /// batch sees tables and contracts of one policy.
    qos: Mutex<QosPipeline>,
    /// The QoS inputs of the tenants [`Engine::apply`] installed, by tenant position.
    qos_inputs: Mutex<QosInputs>,
    /// The inputs `qos_inputs` holds, each once for the tenants that give it.
    input_pool: Mutex<InputPool>,
}

impl Engine {
    /// An engine that processes batches on the calling thread.
    pub fn new(spec: TablesSpec) -> Result<Self, CoreError> {
        Engine::with_threads(spec, 1)
    }

    /// An engine that processes each batch on `threads` threads: they share classification,
    /// one of them enforces (`engine/pipeline.rs`); the same results as on one thread.
    pub fn with_threads(spec: TablesSpec, threads: usize) -> Result<Self, CoreError> {
        let engine = Engine {
            tables: Arc::new(ArcSwap::from_pointee(EngineTables::default())),
            counter_names: Mutex::default(),
            counters: CounterShards::default(),
            updating: Arc::default(),
            rebuilds: Mutex::default(),
            qos: Mutex::new(QosPipeline::new(threads)?),
            qos_inputs: Mutex::default(),
            input_pool: Mutex::default(),
        };
        engine.update(spec)?;
        Ok(engine)
    }

    /// How many threads `process` runs on.
    pub fn threads(&self) -> usize {
        self.lock_qos().threads()
    }

    pub fn tables(&self) -> Arc<EngineTables> {
        self.tables.load_full()
    }

    /// Classifies a batch against one consistent set of tables and counts the result.
    pub fn classify(&self, records: &[PacketInfo], out: &mut [Verdict]) {
        let tables = self.tables.load_full();
        let mut counters = self.counters.take(tables.counter_slots);
        tables.classify_all(records, out, &mut counters);
    }

    /// Every tenant's counters (`None`: packets no tenant claimed), including tenants no
    /// longer in the policy: every packet `classify` or `process` classified, by verdict.
    pub fn counters(&self) -> FxHashMap<Option<String>, Counters> {
        let names = self.counter_names.lock().unwrap_or_else(|p| p.into_inner()).names();
        let totals = self.counters.totals();
        let counted = names.iter().zip(&totals).filter(|(_, c)| c.packets != [0, 0]);
        counted.map(|(name, counters)| (name.as_deref().map(String::from), counters.clone())).collect()
    }

    /// Changes one policy rule of one tenant without touching the rest of the policy: the
    /// tenant's tables are patched and swapped in with every other tenant's shared.
    pub fn edit_tenant(&self, name: &str, edit: RuleEdit) -> Result<(), CoreError> {
        let _serial = self.updating.lock().unwrap_or_else(|p| p.into_inner());
        let current = self.tables.load_full();
        let index = current.tenants.iter().position(|t| &*t.name == name).ok_or_else(|| CoreError::NoTenant(name.to_string()))?;
        let mut tenant = (*current.tenants[index]).clone();
        tenant.apply(edit)?;
        let worn = tenant.table.is_worn();
        install(&self.tables, &current, index, tenant);
        if worn {
            self.rebuild_in_background(name);
        }
        Ok(())
    }

    /// Rebuilds a tenant's worn trees on another thread and installs them, so that no edit
    /// waits for a rebuild. If the tenant is edited meanwhile, the rebuild starts over from
    /// the newer tables.
    fn rebuild_in_background(&self, name: &str) {
        let mut rebuilds = self.rebuilds.lock().unwrap_or_else(|p| p.into_inner());
        rebuilds.retain(|_, rebuild| !rebuild.is_finished());
        if rebuilds.contains_key(name) {
            return;
        }
        let (tables, updating, tenant) = (Arc::clone(&self.tables), Arc::clone(&self.updating), name.to_string());
        let rebuild = std::thread::spawn(move || loop {
            let snapshot = tables.load_full();
            let Some(old) = snapshot.tenants.iter().find(|t| *t.name == tenant).filter(|t| t.table.is_worn()) else { return };
            let table = old.table.rebuilt();
            let _serial = updating.lock().unwrap_or_else(|p| p.into_inner());
            let current = tables.load_full();
            let found = current.tenants.iter().position(|t| Arc::ptr_eq(t, old));
            if let Some(index) = found {
                install(&tables, &current, index, old.with_table(table));
                return;
            }
        });
        rebuilds.insert(name.to_string(), rebuild);
    }

    /// Waits for the background rebuilds under way.
    pub fn wait_for_rebuilds(&self) {
        let rebuilds = std::mem::take(&mut *self.rebuilds.lock().unwrap_or_else(|p| p.into_inner()));
        for rebuild in rebuilds.into_values() {
            let _ = rebuild.join();
        }
    }

    /// Installs a new policy's tables: unchanged tenants are shared, a tenant whose rules
    /// differ by one insertion, removal or replacement is updated in place of a rebuild.
    pub fn update(&self, spec: TablesSpec) -> Result<UpdateReport, CoreError> {
        let _serial = self.updating.lock().unwrap_or_else(|p| p.into_inner());
        let current = self.tables.load_full();
        let by_name: FxHashMap<&str, &Arc<TenantTables>> = current.tenants.iter().map(|t| (&*t.name, t)).collect();
        let mut report = UpdateReport::default();
        let mut tenants = Vec::with_capacity(spec.tenants.len());
        for (index, tenant) in spec.tenants.into_iter().enumerate() {
            check_tenant(&tenant).map_err(|err| err.within(format!("tenant {index} ({})", tenant.name)))?;
            let tables = match by_name.get(&*tenant.name) {
                Some(old) if old.holds(&tenant) => {
                    report.kept += 1;
                    Arc::clone(old)
                }
                Some(old) => match incremental(old, &tenant) {
                    Some(table) => {
                        report.incremental += 1;
                        Arc::new(TenantTables::new(&tenant, table))
                    }
                    None => {
                        report.rebuilt += 1;
                        Arc::new(build(&tenant, index)?)
                    }
                },
                None => {
                    report.rebuilt += 1;
                    Arc::new(build(&tenant, index)?)
                }
            };
            tenants.push(tables);
        }
        let mut names = self.counter_names.lock().unwrap_or_else(|p| p.into_inner());
        let data_path = tenants.iter().map(|t| (TenantHead::of(t, names.slot(&t.name)), Some(HotTenant::of(t)))).collect();
        let counter_slots = names.len();
        drop(names);
        let mut tables = EngineTables {
            tenants: tenants.into(),
            data_path,
            vnis: VniMap::new(spec.vnis),
            unknown_action: spec.unknown_action,
            counter_slots,
            ..Default::default()
        };
        tables.vlans = Arc::new(spec.vlans.into_iter().collect());
        tables.sources = spec.sources.into();
        let worn: Vec<String> = tables.tenants.iter().filter(|t| t.table.is_worn()).map(|t| t.name.to_string()).collect();
        self.install_tables(tables);
        for name in worn {
            self.rebuild_in_background(&name);
        }
        Ok(report)
    }

    /// Installs a policy's tables and QoS contracts together: tenants whose contract did not
    /// change (by name) keep their meters, shapers and queues.
    pub fn update_with_qos(&self, spec: TablesSpec, qos: QosSpec) -> Result<UpdateReport, CoreError> {
        qos.check()?;
        self.lock_qos().stage(qos);
        let report = self.update(spec);
        if report.is_err() {
            self.lock_qos().withdraw();
        }
        report
    }

    /// Classifies and enforces one batch (`rust/enforce.rs`) against one policy's tables and
    /// contracts, on the engine's threads; counts the verdicts as `classify` does. Appends a
    /// row to `out` for each record, in order.
    pub fn process(&self, records: &[PacketInfo], out: &mut Vec<Processed>) {
        self.process_packets(Packets::Records(records), out);
    }

    /// [`Engine::process`] for records or a capture that is parsed as it goes (its records
    /// never all in memory at once): appends a row to `out` for each packet, in order.
    pub fn process_packets(&self, packets: Packets<'_>, out: &mut Vec<Processed>) {
        let mut qos = self.lock_qos();
        qos.process(packets, out, &|records, verdicts| self.classify(records, verdicts));
    }

    /// QoS statistics per (tenant, class) since the engine was made.
    pub fn qos_stats(&self) -> Vec<(StatsKey, QosStats)> {
        self.lock_qos().stats()
    }

    /// Ends the packet stream ([`Enforcer::drain`](crate::enforce::Enforcer::drain)): the port
    /// sends everything, every open burst ends.
    pub fn drain(&self) {
        self.lock_qos().drain();
    }

    /// Reads or changes the QoS state (bursts, statistics) while no batch runs.
    pub fn with_enforcer<T>(&self, work: impl FnOnce(&mut crate::enforce::Enforcer) -> T) -> T {
        work(self.lock_qos().enforcer_mut())
    }

    /// Swaps in new tables while holding the QoS state, which follows them by tenant name.
    fn install_tables(&self, tables: EngineTables) {
        let names = tables.shared_names();
        let mut qos = self.lock_qos();
        self.tables.store(Arc::new(tables));
        qos.retarget(&names);
    }

    fn lock_qos(&self) -> std::sync::MutexGuard<'_, QosPipeline> {
        self.qos.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Stores `current` with tenant `index` replaced by `tenant` (its counters kept).
fn install(tables: &ArcSwap<EngineTables>, current: &EngineTables, index: usize, tenant: TenantTables) {
    let mut next = current.clone();
    let counter_slot = current.data_path.get(index).map(|(head, _)| head.counter_slot).expect("an installed tenant");
    next.data_path.set(index, TenantHead::of(&tenant, counter_slot), Some(HotTenant::of(&tenant)));
    next.tenants.set(index, Arc::new(tenant));
    tables.store(Arc::new(next));
}

#[cfg(test)]
mod tests;
