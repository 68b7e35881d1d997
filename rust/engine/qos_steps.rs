//! How an update reaches the enforcer: the tenants it changes, each taken alone where the
//! enforcer can ([`QosShape`]), else the whole spec resolved again and a retarget.

use std::sync::Arc;

use super::{Delta, Engine, EngineTables, TenantOp};
use crate::bursts::{BurstSpec, TenantBursts};
use crate::enforce::{QosInputs, QosSpec, TenantInput, TenantQos};
use crate::error::CoreError;
use crate::shaping::PortConfig;

impl Engine {
    /// Swaps in `tables` with the QoS state: only the contracts changed or the tenants added
    /// (when the enforcer can take them alone), else the whole spec (the inputs', if not
    /// given). Nothing is installed if that spec is refused.
    pub(super) fn install_contracts(&self, tables: EngineTables, change: QosChange, inputs: &QosInputs) -> Result<(), CoreError> {
        let mut qos = self.lock_qos();
        let mut full_spec = None;
        let taken = match change {
            QosChange::Replaced(changed, rescoped) => {
                let enforcer = qos.enforcer_mut();
                let taken = enforcer.replace_contracts(changed);
                for (at, bursts) in rescoped.into_iter().filter(|_| taken) {
                    enforcer.rescope(at, bursts);
                }
                taken
            }
            QosChange::Inserted(at, added, bursts) => qos.enforcer_mut().insert_watched(at, added, bursts),
            // One by one, in order: a refusal after some went leaves a state the retarget below aligns by name.
            QosChange::Removed(positions) => positions.into_iter().all(|at| qos.enforcer_mut().remove(at)),
            QosChange::Full(spec) => {
                full_spec = Some(*spec);
                false
            }
        };
        if taken {
            self.tables.store(Arc::new(tables));
            return Ok(());
        }
        let spec = match full_spec {
            Some(spec) => spec,
            None => inputs.spec(|at| &*tables.tenants[at].name)?,
        };
        let names = tables.tenant_names();
        qos.stage(spec);
        self.tables.store(Arc::new(tables));
        qos.retarget(&names);
        Ok(())
    }
}

/// What an update changes of the QoS inputs, as far as the enforcer is concerned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum QosShape {
    /// Only the contracts of tenants put in place of tenants of the same name, and weights
    /// (a guarantee that changes the common divisor re-weighs every tenant): the enforcer may
    /// take the new contracts of those and of the tenants re-weighed alone
    /// ([`crate::enforce::Enforcer::replace_contracts`]), and the microburst settings of those
    /// at these positions, which changed ([`crate::enforce::Enforcer::rescope`]).
    Replaced(Vec<usize>),
    /// Only (first, count) tenants put in one after another, with no overload profile, and no
    /// other tenant's weight: the enforcer may take them alone, microburst scopes and all
    /// ([`crate::enforce::Enforcer::insert_watched`]).
    Inserted(usize, usize),
    /// Only tenants removed, and no weight set: the enforcer may take them out alone
    /// ([`crate::enforce::Enforcer::remove`]), at these positions in turn.
    Removed(Vec<usize>),
    /// Anything else: every tenant is resolved again.
    Full,
}

impl QosShape {
    pub(super) fn of(delta: &Delta, current: &EngineTables, inputs: &QosInputs) -> QosShape {
        if delta.settings.is_some() {
            QosShape::Full
        } else if let Some(rescoped) = replaced_alone(delta, current, inputs) {
            QosShape::Replaced(rescoped)
        } else if let Some((first, count)) = inserted_alone(delta, current.tenants.len()) {
            QosShape::Inserted(first, count)
        } else if let Some(positions) = removed_alone(delta) {
            QosShape::Removed(positions)
        } else {
            QosShape::Full
        }
    }
}

/// What the enforcer is given of an update (see [`QosShape`]).
pub(super) enum QosChange {
    /// The new contracts, and the new microburst settings (if any) of those whose settings changed.
    Replaced(Vec<(usize, TenantQos)>, Vec<(usize, Option<TenantBursts>)>),
    /// At this position on, with the microburst settings of those that have any.
    Inserted(usize, Vec<TenantQos>, Vec<TenantBursts>),
    Removed(Vec<usize>),
    /// Boxed: far larger than the others.
    Full(Box<QosSpec>),
}

/// Whether `delta` only puts tenants in place of tenants of the same name (`None` if not),
/// and the positions of those whose microburst settings changed.
fn replaced_alone(delta: &Delta, current: &EngineTables, inputs: &QosInputs) -> Option<Vec<usize>> {
    let mut rescoped = Vec::new();
    for op in &delta.ops {
        let TenantOp::Replace { at, tenant } = op else { return None };
        let (old_tables, old) = (current.tenants.get(*at)?, inputs.tenants.get(*at)?);
        if *old_tables.name != tenant.tables.name {
            return None;
        }
        if !same_bursts(old, &tenant.qos) {
            rescoped.push(*at);
        }
    }
    Some(rescoped)
}

/// (first, count) of the tenants `delta` puts in one after another at a position of the `count`
/// there are, if that is all it does: with no overload profile, and no weight set but theirs.
fn inserted_alone(delta: &Delta, count: usize) -> Option<(usize, usize)> {
    // Burst profiles are what the enforcer takes alone (`Adaptive::insertable`).
    let plain = |qos: &TenantInput| qos.on_overload.is_none();
    let Some(TenantOp::Insert { at: first, .. }) = delta.ops.first() else { return None };
    let (first, added) = (*first, delta.ops.len());
    let inserts = delta.ops.iter().enumerate().all(|(i, op)| matches!(op, TenantOp::Insert { at, tenant } if *at == first + i && plain(&tenant.qos)));
    (first <= count && inserts && delta.weights.iter().all(|(at, _)| (first..first + added).contains(at))).then_some((first, added))
}

/// The positions `delta` removes tenants at, in turn, if that is all it does (no weight set).
fn removed_alone(delta: &Delta) -> Option<Vec<usize>> {
    let at = |op: &TenantOp| if let TenantOp::Remove { at } = op { Some(*at) } else { None };
    (!delta.ops.is_empty() && delta.weights.is_empty()).then(|| delta.ops.iter().map(at).collect()).flatten()
}

/// `qos` checked as [`QosSpec::check`] checks a tenant's contracts, with the port and its
/// microburst settings among `bursts` (a burst profile needs its scope); its port queues
/// against the others' are the enforcer's to check.
pub(super) fn checked_alone(qos: TenantQos, port: Option<PortConfig>, bursts: &[TenantBursts]) -> Result<TenantQos, CoreError> {
    let own = bursts.iter().filter(|b| b.name == qos.name).cloned().collect();
    let spec = QosSpec { tenants: vec![qos], port, bursts: BurstSpec { tenants: own, ..BurstSpec::default() }, ..QosSpec::default() };
    spec.check()?;
    Ok(spec.tenants.into_iter().next().expect("one tenant"))
}

/// The microburst settings of the tenants at `positions` that have any, checked as
/// [`QosSpec::check`] checks them.
pub(super) fn watched<'a>(inputs: &QosInputs, positions: std::ops::Range<usize>, name: impl Fn(usize) -> &'a str) -> Result<Vec<TenantBursts>, CoreError> {
    let bursts = positions.map(|at| inputs.tenants[at].bursts(name(at)));
    let tenants: Vec<TenantBursts> = bursts.filter(TenantBursts::watches_any).collect();
    if tenants.is_empty() {
        return Ok(tenants);
    }
    let bursts = BurstSpec { tenants, poll_ns: inputs.settings.poll_ns.clone(), port: None };
    let spec = QosSpec { bursts, port: inputs.settings.port()?, ..QosSpec::default() };
    spec.check()?;
    Ok(spec.bursts.tenants)
}

/// Whether two tenants have the same microburst settings, their own and their classes'.
fn same_bursts(old: &TenantInput, new: &TenantInput) -> bool {
    old.microburst == new.microburst
        && old.classes.len() == new.classes.len()
        && old.classes.iter().zip(&new.classes).all(|(o, n)| o.microburst == n.microburst)
}
