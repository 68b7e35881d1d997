//! Tenants' lines (their state by the engine's tenant index) and class rows (their class
//! stages, statistics rows and port queues, a block each, where it was given for as long as
//! the tenant stays): a tenant put in or taken out moves no other tenant's class rows, so that
//! an update costs what it changes, whatever the number of tenants. [`Enforcer::vacate`]
//! empties a line and leaves its rows vacant, [`Enforcer::occupy`] fills an empty line, taking
//! vacant rows or the room's first; [`Enforcer::open`] and [`Enforcer::close`] put in and take
//! away an empty line (the later tenants' ids move, as the engine's do). A full retarget puts
//! the rows in tenant order again, the vacant ones gone.

use std::ops::Range;
use std::sync::Arc;

use rustc_hash::FxHashMap;

use super::kept::Kept;
use super::moves::carry;
use super::update::{class_stage, name_hash, queues_of};
use super::{Contract, Enforcer, Stage, TenantQos, TenantState, NO_ROW};
use crate::bursts::TenantBursts;

/// Blocks of class rows that tenants taken out left vacant (zero rows, vacant port queues),
/// by their length, for tenants of as many classes put in later.
#[derive(Debug, Default)]
pub(super) struct VacantRows {
    by_len: FxHashMap<u32, Vec<u32>>,
}

impl VacantRows {
    fn take(&mut self, len: usize) -> Option<usize> {
        self.by_len.get_mut(&(len as u32))?.pop().map(|first| first as usize)
    }

    fn give(&mut self, rows: Range<usize>) {
        if !rows.is_empty() {
            self.by_len.entry(rows.len() as u32).or_default().push(rows.start as u32);
        }
    }

    pub(super) fn count(&self, len: usize) -> usize {
        self.by_len.get(&(len as u32)).map_or(0, Vec::len)
    }
}

impl Enforcer {
    /// Class rows for a tenant of `count` classes: a vacant block of as many, else the room's first.
    fn take_class_rows(&mut self, count: usize) -> Range<usize> {
        if count == 0 {
            return 0..0;
        }
        let first = self.vacant.take(count).unwrap_or_else(|| {
            self.class_rows += count;
            self.class_rows - count
        });
        first..first + count
    }

    /// Whether vacant rows and the room hold the classes of tenants `added`.
    pub(super) fn rows_fit(&self, added: &[TenantQos]) -> bool {
        let mut tenants_by_classes: FxHashMap<usize, usize> = FxHashMap::default();
        for qos in added.iter().filter(|qos| !qos.classes.is_empty()) {
            *tenants_by_classes.entry(qos.classes.len()).or_default() += 1;
        }
        let from_room: usize = tenants_by_classes.iter().map(|(&len, &tenants)| len * tenants.saturating_sub(self.vacant.count(len))).sum();
        self.class_rows + from_room <= self.no_tenant_row
    }

    /// An empty line at `index`, before the tenant there: the later tenants' ids rise by one.
    pub(super) fn open(&mut self, index: usize) {
        self.tenants.insert(index, TenantState::without_contract());
        self.contracts.insert(index, Kept::without_contract(&Arc::from("")));
        self.own_rows.insert(index, NO_ROW);
        self.bursts.open_tenant(index);
        self.adaptive.open_tenant(index);
    }

    /// Takes away the empty line `index` ([`Enforcer::vacate`]): the later tenants' ids fall by one.
    pub(super) fn close(&mut self, index: usize) {
        self.tenants.remove(index);
        self.contracts.remove(index);
        self.own_rows.remove(index);
        self.bursts.close_tenant(index);
        self.adaptive.close_tenant(index);
    }

    /// Tenant `index`'s state goes as [`Enforcer::remove`] says, its line left empty (no
    /// contract, no rows) and its class rows and port queues vacant. Changes nothing and
    /// returns false when that takes a full retarget: a spec waits, or there is no tenant `index`.
    pub(super) fn vacate(&mut self, index: usize) -> bool {
        if self.spec_waits() || index >= self.tenants.len() {
            return false;
        }
        if self.packets_at_port(index) {
            self.restart_port();
        }
        if !self.removable(index) {
            return false;
        }
        self.park(index);
        self.remove_switchable(index); // before its rows go: they count its packets by profile
        let rows = self.class_rows_of(index);
        let name = self.tenant_name(index).to_owned();
        for (c, row) in rows.clone().enumerate() {
            self.archive_row(row, (Some(name.clone()), Some(c as u16)));
        }
        self.rows.zero(rows.clone());
        self.vacant.give(rows.clone());
        let own_row = std::mem::replace(&mut self.own_rows[index], NO_ROW);
        if own_row != NO_ROW {
            self.archive_row(own_row as usize, (Some(name), None));
            self.rows.zero(own_row as usize..own_row as usize + 1);
            self.free_rows.push(own_row);
        }
        self.tenants[index] = TenantState::without_contract();
        let kept = std::mem::replace(&mut self.contracts[index], Kept::without_contract(&Arc::from("")));
        if let (Some(state), true) = (&mut self.port, kept.has_contract()) {
            let queues = state.port.vacate_queues(rows.start as u32..rows.end as u32);
            for (c, (queue, class)) in queues.iter().zip(kept.classes()).enumerate() {
                if queue.delay_ns.count() > 0 {
                    self.archive.entry((Some(kept.name.to_string()), Some(c as u16))).or_default().delay_ns.merge(&queue.delay_ns);
                }
                state.guaranteed -= u128::from(class.queue.guarantee);
                state.reserved -= u128::from(class.queue.reserved_bytes);
            }
        }
        let port_queues = if self.port.is_some() { rows.clone() } else { 0..0 };
        if self.bursts.vacate_tenant(index, port_queues, self.clock_ns) {
            self.spec.bursts.tenants.retain(|b| *b.name != *kept.name);
        }
        self.adaptive.vacate_tenant(index, rows);
        if kept.has_contract() {
            let hash = name_hash(&kept.name);
            if let Some(tenants) = self.name_hashes.get_mut(&hash) {
                *tenants -= 1;
                if *tenants == 0 {
                    self.name_hashes.remove(&hash);
                }
            }
        }
        self.terms.release(kept);
        true
    }

    /// Puts `qos`'s tenant on the empty line `index`, as [`Enforcer::insert`] says, with its
    /// microburst settings if `bursts` has them: its class rows and port queues are vacant
    /// ones or the room's first, its queues' buckets filling at one instant just before the
    /// next tenant's, as in a port made afresh.
    pub(super) fn occupy(&mut self, index: usize, qos: TenantQos, bursts: &[TenantBursts]) {
        let settings = bursts.iter().find(|b| *b.name == *qos.name);
        let carried = self.carried(&qos);
        let kept = self.terms.keep(&qos, &mut self.profiles);
        let mut stage = self.fresh_stage(&qos, &kept);
        if let Some((old, _)) = &carried {
            carry(&mut stage, old);
        }
        if stage.classes_enforced {
            self.make_class_stages(); // the other tenants' (the rows below are not theirs yet)
        }
        let rows = self.take_class_rows(qos.classes.len());
        if stage.classes_enforced || !self.class_stages.is_empty() {
            self.class_stages.resize(self.class_rows, Stage::new(&Contract::default()));
            let carried: &[Stage] = carried.as_ref().map_or(&[], |(_, classes)| classes);
            for (c, (stage, class)) in self.class_stages[rows.clone()].iter_mut().zip(kept.classes()).enumerate() {
                *stage = class_stage(&self.profiles, class);
                if let Some(old) = carried.get(c) {
                    carry(stage, old);
                }
            }
        }
        self.tenants[index] = TenantState { stage, first_row: rows.start as u32, classes: rows.len() as u32 };
        let before = self.tenants[index + 1..].iter().find(|t| t.classes > 0).map(|t| t.first_row);
        let port_queues = match &mut self.port {
            Some(state) => {
                let queues = queues_of(std::slice::from_ref(&qos));
                state.guaranteed += queues.iter().map(|queue| u128::from(queue.guarantee)).sum::<u128>();
                state.reserved += queues.iter().map(|queue| u128::from(queue.reserved_bytes)).sum::<u128>();
                state.port.place_queues(rows.start as u32, &queues, before);
                rows.clone()
            }
            None => 0..0,
        };
        self.bursts.occupy_tenant(index, port_queues, settings);
        self.adaptive.occupy_rows(rows);
        let overloaded = self.adaptive.add_tenant(&qos, index, &self.tenants, &self.class_stages, &self.spec, &mut self.profiles);
        *self.name_hashes.entry(name_hash(&qos.name)).or_default() += 1;
        self.contracts[index] = kept;
        if let Some(slot) = overloaded {
            self.overload_now(slot);
        }
    }
}
