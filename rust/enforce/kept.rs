//! The contracts the enforcer keeps, one per tenant: the name and the number of its own
//! contract's [`Profile`](super::Profile) (which can give the contract back: a tenant of a
//! contract of its own keeps it once, there) apart, the terms shared by every tenant of equal
//! terms (tenants on a few plans keep a few, whatever their own contracts).

use std::sync::Arc;

use rustc_hash::FxHashMap;

use super::shared::Shared;
use super::{BurstProfile, ClassBurstProfile, ClassQos, ProfileQos, Profiles, TenantQos, NO_CONTRACT};
use crate::shaping::QueueConfig;

/// A tenant's contract less its name and its own contract: its classes and profiles.
#[derive(Debug, PartialEq, Eq, Hash)]
pub(super) struct Terms {
    classes: Box<[KeptClass]>,
    on_burst: Option<Box<BurstProfile>>,
    on_overload: Option<Box<ProfileQos>>,
}

/// A class as kept: [`ClassQos`] with its contract as its profile's number.
#[derive(Debug, PartialEq, Eq, Hash)]
pub(super) struct KeptClass {
    pub(super) profile: u32,
    pub(super) queue: QueueConfig,
    on_burst: Option<Box<ClassBurstProfile>>,
}

impl KeptClass {
    fn of(class: &ClassQos, profiles: &mut Profiles) -> KeptClass {
        KeptClass { profile: profiles.of(&class.contract), queue: class.queue, on_burst: class.on_burst.clone() }
    }

    fn qos(&self, profiles: &Profiles) -> ClassQos {
        ClassQos { contract: profiles.get(self.profile).contract(), queue: self.queue, on_burst: self.on_burst.clone() }
    }

    /// Whether its stage enforces `class`: all but the port queue is the same.
    fn enforces(&self, class: &ClassQos, profiles: &Profiles) -> bool {
        self.on_burst == class.on_burst && profiles.get(self.profile).contract() == class.contract
    }
}

impl Terms {
    fn of(qos: &TenantQos, profiles: &mut Profiles) -> Terms {
        Terms {
            classes: qos.classes.iter().map(|class| KeptClass::of(class, profiles)).collect(),
            on_burst: qos.on_burst.clone(),
            on_overload: qos.on_overload.clone(),
        }
    }

    fn renumbered(&self, renumber: &mut impl FnMut(&mut u32)) -> Terms {
        let mut number = |mut profile: u32| {
            renumber(&mut profile);
            profile
        };
        let classes = self.classes.iter().map(|class| KeptClass { profile: number(class.profile), queue: class.queue, on_burst: class.on_burst.clone() });
        Terms { classes: classes.collect(), on_burst: self.on_burst.clone(), on_overload: self.on_overload.clone() }
    }

    fn matches(&self, qos: &TenantQos, class_matches: impl Fn(&KeptClass, &ClassQos) -> bool) -> bool {
        let classes = self.classes.len() == qos.classes.len() && self.classes.iter().zip(&qos.classes).all(|(kept, class)| class_matches(kept, class));
        classes && self.on_burst == qos.on_burst && self.on_overload == qos.on_overload
    }
}

/// A tenant as the enforcer keeps it: its name, and if it has a contract, its own contract's
/// profile number and its terms.
#[derive(Debug)]
pub(super) struct Kept {
    pub(super) name: Arc<str>,
    profile: u32,
    terms: Option<Arc<Terms>>,
}

impl Kept {
    pub(super) fn without_contract(name: &Arc<str>) -> Kept {
        Kept { name: Arc::clone(name), profile: NO_CONTRACT, terms: None }
    }

    pub(super) fn has_contract(&self) -> bool {
        self.terms.is_some()
    }

    /// Its contract, as the spec gives it, from the profiles it was kept with.
    pub(super) fn qos(&self, profiles: &Profiles) -> Option<TenantQos> {
        let terms = self.terms.as_ref()?;
        Some(TenantQos {
            name: Arc::clone(&self.name),
            contract: profiles.get(self.profile).contract(),
            classes: terms.classes.iter().map(|class| class.qos(profiles)).collect(),
            on_burst: terms.on_burst.clone(),
            on_overload: terms.on_overload.clone(),
        })
    }

    /// Whether its stages enforce `qos` (name and all but the port queues the same), so that
    /// they may go on: a change of port weights alone re-weighs the queues, not the meters.
    pub(super) fn enforces(&self, qos: &TenantQos, profiles: &Profiles) -> bool {
        self.is_named_and_bound_by(qos, profiles) && self.terms.as_ref().is_some_and(|terms| terms.matches(qos, |kept, class| kept.enforces(class, profiles)))
    }

    /// Whether its classes' port queues are `qos`'s (with [`Kept::enforces`], whether it is `qos`).
    pub(super) fn queues_match(&self, qos: &TenantQos) -> bool {
        self.classes().len() == qos.classes.len() && self.classes().iter().zip(&qos.classes).all(|(kept, class)| kept.queue == class.queue)
    }

    /// Whether it has `qos`'s name and own contract.
    fn is_named_and_bound_by(&self, qos: &TenantQos, profiles: &Profiles) -> bool {
        same_name(&self.name, &qos.name) && self.profile != NO_CONTRACT && profiles.get(self.profile).contract() == qos.contract
    }

    /// Its own contract's profile number ([`NO_CONTRACT`] without a contract).
    pub(super) fn profile(&self) -> u32 {
        self.profile
    }

    /// Its classes (none without a contract).
    pub(super) fn classes(&self) -> &[KeptClass] {
        self.terms.as_ref().map_or(&[], |terms| &terms.classes)
    }
}

/// Whether two names are the same: most often one allocation, the tables' (no string to read).
pub(super) fn same_name(a: &Arc<str>, b: &Arc<str>) -> bool {
    Arc::ptr_eq(a, b) || **a == **b
}

/// The terms of the tenants kept, each once.
#[derive(Debug, Default)]
pub(super) struct TermsPool(Shared<Terms>);

impl TermsPool {
    /// `qos` as kept, its contracts numbered in `profiles` and its terms shared with every
    /// tenant kept with equal ones.
    pub(super) fn keep(&mut self, qos: &TenantQos, profiles: &mut Profiles) -> Kept {
        Kept { name: Arc::clone(&qos.name), profile: profiles.of(&qos.contract), terms: Some(self.share(Terms::of(qos, profiles))) }
    }

    /// `kept`, which enforces `qos` ([`Kept::enforces`]), with `qos`'s port queues: its profile
    /// numbers stay (its contracts are the same), only its terms are shared anew.
    pub(super) fn requeued(&mut self, kept: &Kept, qos: &TenantQos) -> Kept {
        let classes = kept.classes().iter().zip(&qos.classes);
        let classes = classes.map(|(kept, class)| KeptClass { profile: kept.profile, queue: class.queue, on_burst: class.on_burst.clone() });
        let terms = Terms { classes: classes.collect(), on_burst: qos.on_burst.clone(), on_overload: qos.on_overload.clone() };
        Kept { name: Arc::clone(&kept.name), profile: kept.profile, terms: Some(self.share(terms)) }
    }

    fn share(&mut self, terms: Terms) -> Arc<Terms> {
        match self.0.get(&terms) {
            Some(shared) => Arc::clone(shared),
            None => self.0.share(Arc::new(terms)),
        }
    }

    /// Every tenant of `contracts` with its profile numbers through `renumber` (terms shared
    /// before stay shared).
    pub(super) fn renumber(&mut self, contracts: &mut [Kept], renumber: &mut impl FnMut(&mut u32)) {
        let mut renumbered: FxHashMap<*const Terms, Arc<Terms>> = FxHashMap::default();
        let mut pool = TermsPool::default();
        for kept in contracts.iter_mut() {
            renumber(&mut kept.profile);
            let Some(terms) = kept.terms.as_mut() else { continue };
            let new = renumbered.entry(Arc::as_ptr(terms)).or_insert_with(|| pool.share(terms.renumbered(renumber)));
            *terms = Arc::clone(new);
        }
        *self = pool;
    }

    /// Lets `kept` go, and its terms with it if no other tenant has them.
    pub(super) fn release(&mut self, kept: Kept) {
        if let Some(terms) = kept.terms {
            self.0.release(terms);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::{ColorAction, Contract, Count, MeterSpec};
    use super::*;
    use crate::meter::{MeterKind, MeterParams};
    use crate::shaping::ShaperParams;

    /// Whether `kept` is `qos`, name and terms.
    fn is(kept: &Kept, qos: &TenantQos, profiles: &Profiles) -> bool {
        kept.enforces(qos, profiles) && kept.queues_match(qos)
    }

    fn tenant(name: &str, weight: u32) -> TenantQos {
        let class = ClassQos { contract: Contract::default(), queue: QueueConfig { weight, ..QueueConfig::BEST_EFFORT }, on_burst: None };
        TenantQos { name: name.into(), contract: Contract::default(), classes: vec![class], on_burst: None, on_overload: None }
    }

    #[test]
    fn tenants_of_equal_terms_share_them_until_the_last_goes() {
        let (mut pool, mut profiles) = (TermsPool::default(), Profiles::default());
        let (a, b, c) = (pool.keep(&tenant("a", 1), &mut profiles), pool.keep(&tenant("b", 1), &mut profiles), pool.keep(&tenant("c", 2), &mut profiles));
        assert!(Arc::ptr_eq(a.terms.as_ref().unwrap(), b.terms.as_ref().unwrap()));
        assert!(!Arc::ptr_eq(a.terms.as_ref().unwrap(), c.terms.as_ref().unwrap()));
        assert_eq!(pool.0.len(), 2);
        pool.release(a);
        assert_eq!(pool.0.len(), 2, "b still has a's terms");
        pool.release(b);
        pool.release(c);
        assert!(pool.0.is_empty());
    }

    #[test]
    fn tenants_of_contracts_of_their_own_share_equal_terms() {
        let (mut pool, mut profiles) = (TermsPool::default(), Profiles::default());
        let shaped = |name: &str, rate: u64| {
            let shaper = ShaperParams { rate, burst: 1500, max_queue_bytes: 0, max_delay_ns: 0 };
            TenantQos { contract: Contract { meter: None, shaper: Some(shaper) }, ..tenant(name, 1) }
        };
        let (a, b) = (pool.keep(&shaped("a", 1000), &mut profiles), pool.keep(&shaped("b", 2000), &mut profiles));
        assert!(Arc::ptr_eq(a.terms.as_ref().unwrap(), b.terms.as_ref().unwrap()) && pool.0.len() == 1);
        assert_ne!(a.profile(), b.profile());
        assert_eq!((a.qos(&profiles), b.qos(&profiles)), (Some(shaped("a", 1000)), Some(shaped("b", 2000))));
        assert!(is(&a, &shaped("a", 1000), &profiles) && !is(&a, &shaped("a", 2000), &profiles) && !a.enforces(&shaped("a", 2000), &profiles));
    }

    #[test]
    fn a_kept_tenant_gives_back_the_contract_it_was_kept_from() {
        let (mut pool, mut profiles) = (TermsPool::default(), Profiles::default());
        let kept = pool.keep(&tenant("a", 3), &mut profiles);
        assert_eq!(kept.qos(&profiles), Some(tenant("a", 3)));
        assert!(is(&kept, &tenant("a", 3), &profiles));
        assert!(!is(&kept, &tenant("b", 3), &profiles) && !is(&kept, &tenant("a", 4), &profiles));
        assert_eq!(kept.classes().len(), 1);
        let meter = MeterSpec {
            params: MeterParams::aware(MeterKind::TrTcm { pir: 9, pbs: 900, cir: 3, cbs: 300 }),
            count: Count::Inner,
            actions: [ColorAction::Pass, ColorAction::Remark(10), ColorAction::Drop],
        };
        let shaper = ShaperParams { rate: 1000, burst: 1500, max_queue_bytes: 0, max_delay_ns: 7 };
        let mut metered = tenant("m", 1);
        (metered.contract, metered.classes[0].contract) =
            (Contract { meter: Some(meter), shaper: None }, Contract { meter: Some(meter), shaper: Some(shaper) });
        let kept = pool.keep(&metered, &mut profiles);
        assert_eq!(kept.qos(&profiles), Some(metered.clone()), "each contract given back from its profile");
        metered.classes[0].queue.weight = 5;
        assert!(!is(&kept, &metered, &profiles) && kept.enforces(&metered, &profiles), "its queue weighs anew, enforced alike");
        let requeued = pool.requeued(&kept, &metered);
        assert!(is(&requeued, &metered, &profiles) && requeued.profile() == kept.profile(), "its new queues, its profiles as they were");
        assert_eq!(requeued.classes()[0].profile, kept.classes()[0].profile);
        let kept_afresh = pool.keep(&metered, &mut profiles);
        assert!(Arc::ptr_eq(requeued.terms.as_ref().unwrap(), kept_afresh.terms.as_ref().unwrap()), "its terms shared with equal ones");
        metered.classes[0].contract.shaper = None;
        assert!(!is(&kept, &metered, &profiles) && !kept.enforces(&metered, &profiles), "a class's contract is compared");
        let bare = Kept::without_contract(&"z".into());
        assert!(!bare.has_contract() && bare.qos(&profiles).is_none() && bare.classes().is_empty() && !is(&bare, &tenant("z", 1), &profiles));
    }
}
