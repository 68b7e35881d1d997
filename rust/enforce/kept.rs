//! The contracts the enforcer keeps, one per tenant: the name apart, the terms shared by every
//! tenant of equal terms (tenants on a few plans keep a few), as [`Profiles`](super::Profiles)
//! share what enforces them.

use std::sync::Arc;

use rustc_hash::FxHashSet;

use super::{BurstProfile, ClassQos, Contract, ProfileQos, TenantQos};

/// A tenant's contract less its name.
#[derive(Debug, PartialEq, Eq, Hash)]
pub(super) struct Terms {
    contract: Contract,
    classes: Box<[ClassQos]>,
    on_burst: Option<Box<BurstProfile>>,
    on_overload: Option<Box<ProfileQos>>,
}

impl Terms {
    fn of(qos: &TenantQos) -> Terms {
        Terms { contract: qos.contract, classes: qos.classes.as_slice().into(), on_burst: qos.on_burst.clone(), on_overload: qos.on_overload.clone() }
    }

    fn matches(&self, qos: &TenantQos) -> bool {
        self.contract == qos.contract && *self.classes == *qos.classes && self.on_burst == qos.on_burst && self.on_overload == qos.on_overload
    }
}

/// A tenant as the enforcer keeps it: its name, and its terms if it has a contract.
#[derive(Debug)]
pub(super) struct Kept {
    pub(super) name: Box<str>,
    terms: Option<Arc<Terms>>,
}

impl Kept {
    pub(super) fn without_contract(name: &str) -> Kept {
        Kept { name: name.into(), terms: None }
    }

    pub(super) fn has_contract(&self) -> bool {
        self.terms.is_some()
    }

    /// Its contract, as the spec gives it.
    pub(super) fn qos(&self) -> Option<TenantQos> {
        let terms = self.terms.as_ref()?;
        let (on_burst, on_overload) = (terms.on_burst.clone(), terms.on_overload.clone());
        Some(TenantQos { name: self.name.to_string(), contract: terms.contract, classes: terms.classes.to_vec(), on_burst, on_overload })
    }

    /// Whether it is `qos`, name and terms.
    pub(super) fn is(&self, qos: &TenantQos) -> bool {
        *self.name == *qos.name && self.terms.as_ref().is_some_and(|terms| terms.matches(qos))
    }

    /// Its classes (none without a contract).
    pub(super) fn classes(&self) -> &[ClassQos] {
        self.terms.as_ref().map_or(&[], |terms| &terms.classes)
    }
}

/// The terms of the tenants kept, each once.
#[derive(Debug, Default)]
pub(super) struct TermsPool(FxHashSet<Arc<Terms>>);

impl TermsPool {
    /// `qos` as kept, its terms shared with every tenant kept with equal ones.
    pub(super) fn keep(&mut self, qos: &TenantQos) -> Kept {
        let terms = Terms::of(qos);
        let shared = match self.0.get(&terms) {
            Some(shared) => Arc::clone(shared),
            None => {
                let shared = Arc::new(terms);
                self.0.insert(Arc::clone(&shared));
                shared
            }
        };
        Kept { name: qos.name.as_str().into(), terms: Some(shared) }
    }

    /// Lets `kept` go, and its terms with it if no other tenant has them.
    pub(super) fn release(&mut self, kept: Kept) {
        if let Some(terms) = kept.terms {
            // This one and the pool's: the last tenant of these terms.
            if Arc::strong_count(&terms) == 2 {
                self.0.remove(&*terms);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shaping::QueueConfig;

    fn tenant(name: &str, weight: u32) -> TenantQos {
        let class = ClassQos { contract: Contract::default(), queue: QueueConfig { weight, ..QueueConfig::BEST_EFFORT }, on_burst: None };
        TenantQos { name: name.into(), contract: Contract::default(), classes: vec![class], on_burst: None, on_overload: None }
    }

    #[test]
    fn tenants_of_equal_terms_share_them_until_the_last_goes() {
        let mut pool = TermsPool::default();
        let (a, b, c) = (pool.keep(&tenant("a", 1)), pool.keep(&tenant("b", 1)), pool.keep(&tenant("c", 2)));
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
    fn a_kept_tenant_gives_back_the_contract_it_was_kept_from() {
        let mut pool = TermsPool::default();
        let kept = pool.keep(&tenant("a", 3));
        assert_eq!(kept.qos(), Some(tenant("a", 3)));
        assert!(kept.is(&tenant("a", 3)));
        assert!(!kept.is(&tenant("b", 3)) && !kept.is(&tenant("a", 4)));
        assert_eq!(kept.classes().len(), 1);
        let bare = Kept::without_contract("z");
        assert!(!bare.has_contract() && bare.qos().is_none() && bare.classes().is_empty() && !bare.is(&tenant("z", 1)));
    }
}
