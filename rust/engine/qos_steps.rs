//! How an update reaches the enforcer: the tenants it changes, each taken alone where the
//! enforcer can ([`QosShape`]), else the whole spec resolved again and a retarget.

use std::sync::Arc;

use rustc_hash::FxHashSet;

use super::{Delta, Engine, EngineTables, TenantOp};
use crate::bursts::{BurstConfig, BurstSpec, TenantBursts};
use crate::enforce::{Enforcer, Overload, QosInputs, QosSettings, QosSpec, TenantInput, TenantQos};
use crate::error::CoreError;
use crate::shaping::PortConfig;

/// Steps that move the tenants after them (inserts and removals before the last tenant, each a
/// memmove of the later rows and queues) an update takes one by one: past this many, a retarget
/// costs less.
const MOST_MOVES: usize = 64;

impl Engine {
    /// Swaps in `tables` with the QoS state: only the tenants that changed (when the enforcer
    /// can take them alone), else the whole spec (the inputs', if not given). Nothing is
    /// installed if that spec is refused.
    pub(super) fn install_contracts(&self, tables: EngineTables, change: QosChange, inputs: &QosInputs) -> Result<(), CoreError> {
        let mut qos = self.lock_qos();
        let (taken, full_spec) = match change {
            // In order: a refusal after some went leaves a state the retarget below aligns by name.
            QosChange::Steps(steps, checks, moved) => {
                let enforcer = qos.enforcer_mut();
                enforcer.begin_moves(moved);
                let taken = steps.into_iter().all(|step| step.take(enforcer, &checks));
                enforcer.end_moves();
                if taken {
                    enforcer.set_weight_scale(inputs.weight_scale);
                }
                (taken, None)
            }
            QosChange::Port(config, overload, microburst) => {
                let enforcer = qos.enforcer_mut();
                let taken = enforcer.set_port(config, overload, microburst);
                if taken {
                    enforcer.set_weight_scale(inputs.weight_scale);
                }
                (taken, None)
            }
            QosChange::Full(spec) => (false, Some(*spec)),
        };
        if taken {
            self.tables.store(Arc::new(tables));
            return Ok(());
        }
        let spec = match full_spec.map_or_else(|| inputs.spec(|at| &tables.tenants[at].name), Ok) {
            Ok(spec) => spec,
            Err(refused) => {
                // Steps taken before: the enforcer follows the tables in force again.
                let current = self.tables.load_full();
                let spec = self.qos_inputs.lock().unwrap_or_else(|p| p.into_inner()).spec(|at| &current.tenants[at].name)?;
                qos.stage(spec);
                qos.retarget(&current.shared_names());
                return Err(refused);
            }
        };
        let names = tables.shared_names();
        qos.stage(spec);
        self.tables.store(Arc::new(tables));
        qos.retarget(&names);
        Ok(())
    }
}

/// What an update changes of the QoS inputs, as far as the enforcer is concerned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum QosShape {
    /// Only tenants put in place of tenants of the same name: no tenant moves, so the enforcer
    /// is given them all at once
    /// ([`crate::enforce::Enforcer::replace_contracts`]), with the microburst settings of those
    /// at these positions, which changed ([`crate::enforce::Enforcer::rescope`]).
    Replaced(Vec<usize>),
    /// Tenants put in, taken out and replaced, in order, at most [`MOST_MOVES`] of them moving
    /// others: each is given to the enforcer alone ([`Taken`]).
    Steps,
    /// No tenant, and new settings of the port's own alone (those its queues do not depend
    /// on: [`port_alone`]): the enforcer takes them in place ([`crate::enforce::Enforcer::set_port`]).
    Port,
    /// Anything else: every tenant is resolved again.
    Full,
}

impl QosShape {
    pub(super) fn of(delta: &Delta, current: &EngineTables, inputs: &QosInputs) -> QosShape {
        if let Some(settings) = &delta.settings {
            if delta.ops.is_empty() && port_alone(&inputs.settings, settings) {
                QosShape::Port
            } else {
                QosShape::Full
            }
        } else if let Some(rescoped) = replaced_alone(delta, current, inputs) {
            QosShape::Replaced(rescoped)
        } else if moves(delta, current.tenants.len()) <= MOST_MOVES {
            QosShape::Steps
        } else {
            QosShape::Full
        }
    }
}

/// What the enforcer is given of an update (see [`QosShape`]).
pub(super) enum QosChange {
    /// In order, then the port's weight scale; what a tenant put in alone is checked against
    /// ([`alone_checks`]); and the names of the tenants they move (take out and put in again),
    /// which keep their state ([`Enforcer::begin_moves`]).
    Steps(Vec<QosStep>, Box<QosSpec>, FxHashSet<String>),
    /// The port's new configuration, overload and microburst settings ([`QosShape::Port`]).
    Port(PortConfig, Option<Overload>, Option<BurstConfig>),
    /// Boxed: far larger than the others.
    Full(Box<QosSpec>),
}

/// Whether `new` differs from `old` in settings of the port's own alone, which its queues'
/// configurations do not depend on: its buffer, line rate, mode, microburst setting and
/// overload thresholds, not its alpha (every queue's) or its reserve (shared by the queues by
/// guarantee over the line rate, so a new line rate counts only without one). An overload
/// setting that comes or goes counts too.
fn port_alone(old: &QosSettings, new: &QosSettings) -> bool {
    let same_globals = (old.byte_count, &old.color_map, &old.poll_ns) == (new.byte_count, &new.color_map, &new.poll_ns);
    match (&old.port, &new.port) {
        (Some(was), Some(now)) => {
            let same_queues = (was.alpha_log2, was.reserve) == (now.alpha_log2, now.reserve) && (was.reserve == 0 || was.rate == now.rate);
            same_globals && same_queues && was.overload.is_some() == now.overload.is_some()
        }
        _ => false,
    }
}

/// What a tenant put in place of another brings besides its contract.
pub(super) struct Replacement {
    /// Its microburst settings, checked (none if it watches nothing).
    bursts: Vec<TenantBursts>,
    /// Whether they changed ([`Enforcer::rescope`] then follows them).
    rescoped: bool,
}

/// One step of an update, as the enforcer takes it.
pub(super) enum QosStep {
    /// Tenants put in place of others, one after another in the update: (position, contract),
    /// and what each brings besides.
    Replace(Vec<(usize, TenantQos)>, Vec<Replacement>),
    /// Tenants put in one after another from this position, with their microburst settings.
    Insert(usize, Vec<TenantQos>, Vec<TenantBursts>),
    Remove(usize),
}

impl QosStep {
    /// Whether the enforcer took it. Replacements go all at once, else one by one, a tenant whose
    /// contract cannot be put in place going out and in again.
    fn take(self, enforcer: &mut Enforcer, checks: &QosSpec) -> bool {
        match self {
            QosStep::Replace(contracts, replacements) => {
                if enforcer.replace_contracts(&contracts) {
                    for ((at, _), replacement) in contracts.iter().zip(replacements).filter(|(_, r)| r.rescoped) {
                        enforcer.rescope(*at, replacement.bursts.into_iter().next());
                    }
                    return true;
                }
                contracts.into_iter().zip(replacements).all(|(contract, replacement)| replacement.take_alone(contract, enforcer, checks))
            }
            QosStep::Insert(at, added, bursts) => enforcer.insert_watched(at, added, bursts),
            QosStep::Remove(at) => enforcer.remove(at),
        }
    }
}

impl Replacement {
    fn take_alone(self, contract: (usize, TenantQos), enforcer: &mut Enforcer, checks: &QosSpec) -> bool {
        let taken = enforcer.replace_contracts(std::slice::from_ref(&contract));
        let (at, qos) = contract;
        if taken {
            if self.rescoped {
                enforcer.rescope(at, self.bursts.into_iter().next());
            }
            return true;
        }
        let Ok(qos) = checked_alone(qos, checks, &self.bursts) else { return false };
        enforcer.reshape(at, qos, self.bursts)
    }
}

/// The steps among `delta`'s ops that move the tenants after them, the tenants being `count`.
fn moves(delta: &Delta, mut count: usize) -> usize {
    let mut moves = 0;
    for op in &delta.ops {
        match op {
            TenantOp::Insert { at, .. } => {
                moves += usize::from(*at < count);
                count += 1;
            }
            TenantOp::Remove { at } => {
                count = count.saturating_sub(1);
                moves += usize::from(*at < count);
            }
            TenantOp::Replace { .. } => {}
        }
    }
    moves
}

/// An op of an update, with what the enforcer's step reads of it: the inputs at its position
/// as they were before it ([`Taken::before`]) and after it ([`Taken::after`]).
pub(super) enum Taken {
    /// `was`: the name of the tenant it replaces.
    Replace {
        at: usize,
        name: Arc<str>,
        was: String,
        old: Arc<TenantInput>,
        new: Arc<TenantInput>,
    },
    Insert {
        at: usize,
        name: Arc<str>,
        new: Arc<TenantInput>,
    },
    Remove {
        at: usize,
        was: String,
        old: Arc<TenantInput>,
    },
}

impl Taken {
    /// `op` as it is about to be applied to `inputs`, the tenant at `at` being `name(at)`
    /// (`None`: a position out of range, which the op refuses).
    pub(super) fn before<'a>(op: &TenantOp, inputs: &QosInputs, name: impl Fn(usize) -> Option<&'a str>) -> Option<Taken> {
        Some(match op {
            TenantOp::Replace { at, .. } => {
                let old = Arc::clone(inputs.tenants.get(*at)?);
                Taken::Replace { at: *at, name: Arc::default(), was: name(*at)?.to_string(), new: Arc::clone(&old), old }
            }
            TenantOp::Insert { at, tenant } => Taken::Insert { at: *at, name: tenant.tables.name.as_str().into(), new: Arc::default() },
            TenantOp::Remove { at } => Taken::Remove { at: *at, was: name(*at)?.to_string(), old: Arc::clone(inputs.tenants.get(*at)?) },
        })
    }

    pub(super) fn at(&self) -> usize {
        match self {
            Taken::Replace { at, .. } | Taken::Insert { at, .. } | Taken::Remove { at, .. } => *at,
        }
    }

    /// The name of the tenant it takes out, if it takes one out under its name (not one put
    /// in place of a tenant of the same name).
    fn takes_out(&self) -> Option<&str> {
        match self {
            Taken::Replace { name, was, .. } if **name != **was => Some(was),
            Taken::Remove { was, .. } => Some(was),
            Taken::Replace { .. } | Taken::Insert { .. } => None,
        }
    }

    /// The op applied: the tenant it gave, from `inputs` and `name`.
    pub(super) fn after(mut self, inputs: &QosInputs, name: &Arc<str>) -> Taken {
        if let Taken::Replace { at, name: given, new, .. } | Taken::Insert { at, name: given, new } = &mut self {
            *new = Arc::clone(&inputs.tenants[*at]);
            *given = Arc::clone(name);
        }
        self
    }

    /// The name of the tenant it gives, if any.
    pub(super) fn gives(&self) -> Option<&str> {
        match self {
            Taken::Replace { name, .. } | Taken::Insert { name, .. } => Some(name),
            Taken::Remove { .. } => None,
        }
    }
}

/// The names of the tenants the ops take out and put in again (moved, or taken out and put
/// back).
fn moved(taken: &[Taken]) -> FxHashSet<String> {
    let out: FxHashSet<&str> = taken.iter().filter_map(Taken::takes_out).collect();
    let given = taken.iter().filter(|t| !matches!(t, Taken::Replace { name, was, .. } if **name == **was)).filter_map(Taken::gives);
    given.filter(|name| out.contains(name)).map(str::to_owned).collect()
}

/// Whether the tenants of `taken` that are `moved` move as steps: they have no microburst
/// settings and no profiles, before and after (a retarget keeps the scopes and profiles of a
/// tenant that moves, by name; steps would start them anew).
fn move_alone(taken: &[Taken], moved: &FxHashSet<String>) -> bool {
    let plain = |input: &TenantInput| {
        let classes = input.classes.iter().all(|class| class.microburst.is_none() && class.on_burst.is_none());
        classes && input.microburst.is_none() && input.on_burst.is_none() && input.on_overload.is_none()
    };
    taken.iter().all(|op| match op {
        Taken::Replace { name, was, old, new, .. } => !(moved.contains(&**name) || moved.contains(was)) || (plain(old) && plain(new)),
        Taken::Insert { name, new, .. } => !moved.contains(&**name) || plain(new),
        Taken::Remove { was, old, .. } => !moved.contains(was) || plain(old),
    })
}

/// The enforcer's steps for the ops `taken`, `inputs` being the final inputs and tenant `at`
/// being `name(at)`.
pub(super) fn steps<'a>(taken: Vec<Taken>, inputs: &QosInputs, name: impl Fn(usize) -> &'a Arc<str> + Copy) -> Result<QosChange, CoreError> {
    let moved = moved(&taken);
    if !move_alone(&taken, &moved) {
        return Ok(QosChange::Full(Box::new(inputs.spec(name)?)));
    }
    let (port, checks) = (inputs.settings.port.as_ref(), alone_checks(inputs)?);
    let mut steps: Vec<QosStep> = Vec::with_capacity(taken.len());
    for op in &taken {
        match op {
            Taken::Replace { at, name, old, new, .. } => {
                let qos = new.resolve(name, port)?;
                let bursts = watched_one(new, name, inputs)?;
                let replacement = Replacement { bursts, rescoped: !same_bursts(old, new) };
                match steps.last_mut() {
                    Some(QosStep::Replace(contracts, replacements)) => {
                        contracts.push((*at, qos));
                        replacements.push(replacement);
                    }
                    _ => steps.push(QosStep::Replace(vec![(*at, qos)], vec![replacement])),
                }
            }
            Taken::Insert { at, name, new } => {
                let qos = new.resolve(name, port)?;
                let bursts = watched_one(new, name, inputs)?;
                let qos = checked_alone(qos, &checks, &bursts)?;
                match steps.last_mut() {
                    Some(QosStep::Insert(first, added, watched)) if *first + added.len() == *at => {
                        added.push(qos);
                        watched.extend(bursts);
                    }
                    _ => steps.push(QosStep::Insert(*at, vec![qos], bursts)),
                }
            }
            Taken::Remove { at, .. } => steps.push(QosStep::Remove(*at)),
        }
    }
    Ok(QosChange::Steps(steps, Box::new(checks), moved))
}

/// The enforcer's step for an update that only puts tenants in place of tenants of the same
/// name at `replaced` (in order, each once), those at `rescoped` with new microburst settings;
/// `inputs` are the final ones.
pub(super) fn replacements<'a>(
    replaced: &[usize],
    rescoped: &[usize],
    inputs: &QosInputs,
    name: impl Fn(usize) -> &'a Arc<str>,
) -> Result<QosChange, CoreError> {
    let port = inputs.settings.port.as_ref();
    let (mut contracts, mut replacements) = (Vec::with_capacity(replaced.len()), Vec::with_capacity(replaced.len()));
    for &at in replaced {
        let input = &inputs.tenants[at];
        contracts.push((at, input.resolve(name(at), port)?));
        replacements.push(Replacement { bursts: watched_one(input, name(at), inputs)?, rescoped: rescoped.binary_search(&at).is_ok() });
    }
    Ok(QosChange::Steps(vec![QosStep::Replace(contracts, replacements)], Box::new(alone_checks(inputs)?), FxHashSet::default()))
}

/// Whether `delta` only puts tenants in place of tenants of the same name (`None` if not),
/// and the positions of those whose microburst settings changed, in order.
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
    rescoped.sort_unstable();
    rescoped.dedup();
    Some(rescoped)
}

/// What a tenant put in alone is checked against: the port and its overload setting.
fn alone_checks(inputs: &QosInputs) -> Result<QosSpec, CoreError> {
    Ok(QosSpec { port: inputs.settings.port()?, overload: inputs.settings.overload(), ..QosSpec::default() })
}

/// `qos` checked as [`QosSpec::check`] checks a tenant's contracts, against `checks`
/// ([`alone_checks`]) and with its microburst settings among `bursts` (a burst profile needs
/// its scope); its port queues against the others' are the enforcer's to check.
fn checked_alone(qos: TenantQos, checks: &QosSpec, bursts: &[TenantBursts]) -> Result<TenantQos, CoreError> {
    let own = bursts.iter().filter(|b| *b.name == *qos.name).cloned().collect();
    let spec = QosSpec { tenants: vec![qos], bursts: BurstSpec { tenants: own, ..BurstSpec::default() }, ..checks.clone() };
    spec.check()?;
    Ok(spec.tenants.into_iter().next().expect("one tenant"))
}

/// The microburst settings of the tenant `name` of `input`, if it has any, checked as
/// [`QosSpec::check`] checks them.
fn watched_one(input: &TenantInput, name: &str, inputs: &QosInputs) -> Result<Vec<TenantBursts>, CoreError> {
    let bursts = input.bursts(name);
    if !bursts.watches_any() {
        return Ok(Vec::new());
    }
    let bursts = BurstSpec { tenants: vec![bursts], poll_ns: inputs.settings.poll_ns.clone(), port: None };
    let spec = QosSpec { bursts, port: inputs.settings.port()?, ..QosSpec::default() };
    spec.check()?;
    Ok(spec.bursts.tenants)
}

/// Whether two tenants have the same microburst settings, their own and their classes'.
fn same_bursts(old: &TenantInput, new: &TenantInput) -> bool {
    old.microburst == new.microburst
        && old.classes.len() == new.classes.len()
        && old.classes.iter().zip(new.classes.iter()).all(|(o, n)| o.microburst == n.microburst)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::enforce::{BurstRow, OverloadRow, PortInput};

    #[test]
    fn settings_of_the_port_own_alone_are_taken_in_place() {
        let overload = OverloadRow { above: 500, below: 100, stagger_ns: 0 };
        let port = PortInput { rate: 1_000, buffer: 1_000, overload: Some(overload), ..PortInput::default() };
        let old = QosSettings { port: Some(port), poll_ns: vec![1_000], ..QosSettings::default() };
        let with_port = |port: PortInput| QosSettings { port: Some(port), ..old.clone() };
        let larger = with_port(PortInput { buffer: 2_000, overload: Some(OverloadRow { above: 1_000, ..overload }), ..port });
        let taken = [
            larger.clone(),
            with_port(PortInput { rate: 2_000, ..port }),
            with_port(PortInput { mode: 1, ..port }),
            with_port(PortInput { microburst: BurstRow { window_ns: 10, ..port.microburst }, ..port }),
            with_port(PortInput { rate: 2_000, buffer: 3_000, mode: 1, ..port }),
        ];
        for new in taken {
            assert!(port_alone(&old, &new), "{new:?}");
        }
        let reserved = with_port(PortInput { reserve: 100, ..port });
        assert!(port_alone(&reserved, &with_port(PortInput { reserve: 100, buffer: 2_000, ..port })));
        let others = [
            (&old, with_port(PortInput { alpha_log2: 1, ..port })),
            (&old, with_port(PortInput { reserve: 100, ..port })),
            (&reserved, with_port(PortInput { reserve: 100, rate: 2_000, ..port })), // every queue's reserve follows
            (&old, with_port(PortInput { buffer: 2_000, overload: None, ..port })),
            (&old, QosSettings { poll_ns: vec![2_000], ..larger.clone() }),
            (&old, QosSettings { byte_count: old.byte_count ^ 1, ..larger.clone() }),
            (&old, QosSettings { port: None, ..old.clone() }),
        ];
        for (was, new) in others {
            assert!(!port_alone(was, &new), "{new:?}");
        }
    }
}
