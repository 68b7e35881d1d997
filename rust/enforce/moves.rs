//! Tenants an update moves: taken out and put in again under their names (as a document whose
//! tenants changed places makes them), in either order. Each keeps its meters and shapers, as a
//! retarget keeps them by name, and the other tenants keep everything, their packets at the
//! port included. Only tenants without microburst settings and profiles move this way (the
//! engine leaves the others to a retarget, which keeps their scopes by name).

use rustc_hash::{FxHashMap, FxHashSet};

use super::{Enforcer, Stage, TenantQos};

/// The tenants an update moves (by name), and the state of those taken out before they are
/// put in again.
#[derive(Debug, Default)]
pub(super) struct Moves {
    names: FxHashSet<String>,
    parked: FxHashMap<String, Parked>,
}

/// What a moved tenant taken out leaves for its return: the contract its state enforced, its
/// stage and its class stages (none if they were never kept).
#[derive(Debug)]
struct Parked {
    qos: TenantQos,
    stage: Stage,
    classes: Vec<Stage>,
}

impl Enforcer {
    /// The tenants named in `names` are taken out and put in again by the steps that follow
    /// ([`Enforcer::remove`], [`Enforcer::insert_watched`]), until [`Enforcer::end_moves`].
    pub fn begin_moves(&mut self, names: FxHashSet<String>) {
        self.moves = Moves { names, parked: FxHashMap::default() };
    }

    /// The update's steps are over: what moved tenants left and did not take back goes.
    pub fn end_moves(&mut self) {
        self.moves = Moves::default();
    }

    /// Whether the update moves the tenant `name`, and its copy still in place (if any) is
    /// another of its tenants with a contract.
    pub(super) fn moved_copies(&self, name: &str) -> u32 {
        u32::from(self.moves.names.contains(name) && self.contracts.iter().any(|kept| *kept.name == *name && kept.has_contract()))
    }

    /// Keeps tenant `index`'s state for its return, if the update moves it (before it is taken out).
    pub(super) fn park(&mut self, index: usize) {
        let kept = &self.contracts[index];
        if !self.moves.names.contains(&*kept.name) {
            return;
        }
        if let Some(qos) = kept.qos(&self.profiles) {
            let parked = Parked { qos, stage: self.tenants[index].stage, classes: self.class_stages_of(index) };
            self.moves.parked.insert(kept.name.to_string(), parked);
        }
    }

    /// The stage and class stages `qos`'s tenant carries in, if the update moves it and they
    /// enforce `qos` (all but its port queues as before): those it left when taken out, else
    /// those of its copy still in place.
    pub(super) fn carried(&mut self, qos: &TenantQos) -> Option<(Stage, Vec<Stage>)> {
        if !self.moves.names.contains(&*qos.name) {
            return None;
        }
        if let Some(Parked { qos: old, stage, classes }) = self.moves.parked.remove(&*qos.name) {
            return enforces_alike(&old, qos).then_some((stage, classes));
        }
        let index = self.contracts.iter().position(|kept| *kept.name == *qos.name)?;
        self.contracts[index].enforces(qos, &self.profiles).then(|| (self.tenants[index].stage, self.class_stages_of(index)))
    }

    /// Tenant `index`'s class stages, if they are kept.
    fn class_stages_of(&self, index: usize) -> Vec<Stage> {
        if self.class_stages.is_empty() {
            return Vec::new();
        }
        self.class_stages[self.class_rows_of(index)].to_vec()
    }
}

/// Whether a state that enforced `old` enforces `new`: the same contracts and profiles, class by
/// class (the port queues may differ), as [`super::kept::Kept::enforces`] reads a tenant still
/// in place (a parked one's profile numbers may have been renumbered since).
fn enforces_alike(old: &TenantQos, new: &TenantQos) -> bool {
    let classes =
        old.classes.len() == new.classes.len() && old.classes.iter().zip(&new.classes).all(|(o, n)| o.contract == n.contract && o.on_burst == n.on_burst);
    classes && old.contract == new.contract && old.on_burst == new.on_burst && old.on_overload == new.on_overload
}

/// The stage a moved tenant takes: `fresh` (its new profile and lane) with the meter and
/// shaper state of `carried`.
pub(super) fn carry(fresh: &mut Stage, carried: &Stage) {
    (fresh.meter, fresh.shaper) = (carried.meter, carried.shaper);
}
