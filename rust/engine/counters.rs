//! The engine's per-tenant counters, the classifier's view: every packet classified (by
//! `classify` or `process`) by its verdict, while the enforcer's statistics count the packets
//! `process` enforced, with drops at every stage (`docs/qos.md`, "Statistics"). Kept by tenant
//! name so that they run on across policy updates, and counted in shards so that classifying
//! threads never wait.

use std::sync::{Arc, Mutex};

use rustc_hash::FxHashMap;

use crate::verdict::{Verdict, REASONS};

/// Per-tenant counters, kept by tenant name so that they run on across policy updates.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Counters {
    pub packets: [u64; 2],
    pub bytes: [u64; 2],
    pub reasons: [u64; REASONS],
}

impl Counters {
    pub(super) fn add(&mut self, verdict: &Verdict, wire_len: u32) {
        let action = usize::from(verdict.action.min(1));
        self.packets[action] += 1;
        self.bytes[action] += u64::from(wire_len);
        self.reasons[usize::from(verdict.reason)] += 1;
    }

    fn merge(&mut self, other: &Counters) {
        for i in 0..2 {
            self.packets[i] += other.packets[i];
            self.bytes[i] += other.bytes[i];
        }
        for (sum, add) in self.reasons.iter_mut().zip(other.reasons) {
            *sum += add;
        }
    }
}

/// The counter slot of packets no tenant claims.
pub(super) const UNKNOWN_SLOT: u32 = 0;

/// Names of the counter slots: one per tenant name ever installed, and [`UNKNOWN_SLOT`]. Slots
/// outlive policy updates, so a tenant's counts run on.
#[derive(Debug)]
pub(super) struct CounterNames {
    /// Names shared with the tables'. The names by slot are read from it, rarely: a list of
    /// them beside it cost 16-32 bytes a tenant.
    slot_of: FxHashMap<Arc<str>, u32>,
    slots: u32,
}

impl Default for CounterNames {
    fn default() -> Self {
        CounterNames { slot_of: FxHashMap::default(), slots: UNKNOWN_SLOT + 1 }
    }
}

impl CounterNames {
    pub(super) fn slot(&mut self, name: &Arc<str>) -> u32 {
        if let Some(&slot) = self.slot_of.get(name) {
            return slot;
        }
        let slot = self.slots;
        self.slots += 1;
        self.slot_of.insert(Arc::clone(name), slot);
        slot
    }

    /// How many slots there are, [`UNKNOWN_SLOT`] among them.
    pub(super) fn len(&self) -> usize {
        self.slots as usize
    }

    /// The name of each slot (`None`: [`UNKNOWN_SLOT`]).
    pub(super) fn names(&self) -> Vec<Option<Arc<str>>> {
        let mut names = vec![None; self.len()];
        for (name, &slot) in &self.slot_of {
            names[slot as usize] = Some(Arc::clone(name));
        }
        names
    }
}

/// Running counters by slot, in shards: a classifying thread counts a whole batch into
/// whichever shard is free (so classifiers never wait for each other, and nothing is merged
/// per batch), and a reader adds the shards up.
pub(super) struct CounterShards {
    shards: Box<[Mutex<Vec<Counters>>]>,
}

impl Default for CounterShards {
    fn default() -> Self {
        let count = std::thread::available_parallelism().map_or(4, |n| n.get()).clamp(2, 32) * 2;
        CounterShards { shards: (0..count).map(|_| Mutex::default()).collect() }
    }
}

impl CounterShards {
    /// A free shard (this thread's usual one if it is free), with room for `slots` slots.
    pub(super) fn take(&self, slots: usize) -> std::sync::MutexGuard<'_, Vec<Counters>> {
        use std::hash::{Hash, Hasher};
        let mut hasher = rustc_hash::FxHasher::default();
        std::thread::current().id().hash(&mut hasher);
        let start = hasher.finish() as usize % self.shards.len();
        let free = (0..self.shards.len()).find_map(|i| match self.shards[(start + i) % self.shards.len()].try_lock() {
            Ok(shard) => Some(shard),
            Err(std::sync::TryLockError::Poisoned(poisoned)) => Some(poisoned.into_inner()),
            Err(std::sync::TryLockError::WouldBlock) => None,
        });
        let mut shard = free.unwrap_or_else(|| self.shards[start].lock().unwrap_or_else(|p| p.into_inner()));
        if shard.len() < slots {
            shard.resize(slots, Counters::default());
        }
        shard
    }

    pub(super) fn totals(&self) -> Vec<Counters> {
        let mut totals: Vec<Counters> = Vec::new();
        for shard in self.shards.iter() {
            let shard = shard.lock().unwrap_or_else(|p| p.into_inner());
            if totals.len() < shard.len() {
                totals.resize(shard.len(), Counters::default());
            }
            for (total, counts) in totals.iter_mut().zip(shard.iter()) {
                total.merge(counts);
            }
        }
        totals
    }
}
