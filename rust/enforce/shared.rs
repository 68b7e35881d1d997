//! Values kept once each, by content ([`Shared`]): the QoS inputs an engine keeps and the terms
//! its enforcer keeps are each held once for every tenant that has equal ones.

use std::hash::Hash;
use std::sync::Arc;

use rustc_hash::FxHashSet;

/// Values kept once each, by content, and let go once no one else holds them: when released,
/// or swept as the set grows.
#[derive(Debug)]
pub(super) struct Shared<T: ?Sized> {
    kept: FxHashSet<Arc<T>>,
    /// The size at which those no one holds any more are let go.
    sweep_at: usize,
}

impl<T: ?Sized> Default for Shared<T> {
    fn default() -> Self {
        Shared { kept: FxHashSet::default(), sweep_at: 0 }
    }
}

impl<T: ?Sized + Eq + Hash> Shared<T> {
    pub(super) fn get(&self, value: &T) -> Option<&Arc<T>> {
        self.kept.get(value)
    }

    /// The one kept equal to `value`, else `value`, kept from now on.
    pub(super) fn share(&mut self, value: Arc<T>) -> Arc<T> {
        if let Some(kept) = self.kept.get(&value) {
            return Arc::clone(kept);
        }
        if self.kept.len() >= self.sweep_at {
            self.kept.retain(|kept| Arc::strong_count(kept) > 1); // amortised: the size to come doubles
            self.sweep_at = (2 * self.kept.len()).max(64);
        }
        self.kept.insert(Arc::clone(&value));
        value
    }

    /// Lets `value` go, and the one kept with it if no one else holds it.
    pub(super) fn release(&mut self, value: Arc<T>) {
        // This one and the set's: the last holder.
        if Arc::strong_count(&value) == 2 {
            self.kept.remove(&*value);
        }
    }

    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.kept.len()
    }

    #[cfg(test)]
    pub(super) fn is_empty(&self) -> bool {
        self.kept.is_empty()
    }

    #[cfg(test)]
    pub(super) fn contains(&self, value: &T) -> bool {
        self.kept.contains(value)
    }
}
