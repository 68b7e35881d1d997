//! The engine's per-tenant counters, the classifier's view: every packet classified (by
//! `classify` or `process`) by its verdict, while the enforcer's statistics count the packets
//! `process` enforced, with drops at every stage (`docs/qos.md`, "Statistics"). Kept by tenant
//! name so that they run on across policy updates, and counted in shards so that classifying
//! threads never wait.

use std::sync::{Arc, Mutex};

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
    /// The name of each slot after [`UNKNOWN_SLOT`], shared with the tables'.
    names: Vec<Arc<str>>,
    /// Slots by their name's hash, open-addressed ([`FREE`] marks a free bucket, probed
    /// linearly): 4 bytes a bucket, where a map of names to slots took 24 (41 bytes a tenant).
    buckets: Vec<u32>,
}

/// An empty bucket of [`CounterNames::buckets`].
const FREE: u32 = u32::MAX;

impl Default for CounterNames {
    fn default() -> Self {
        CounterNames { names: Vec::new(), buckets: vec![FREE; 16] }
    }
}

impl CounterNames {
    pub(super) fn slot(&mut self, name: &Arc<str>) -> u32 {
        let bucket = self.bucket_of(name);
        if self.buckets[bucket] != FREE {
            return self.buckets[bucket];
        }
        let slot = self.len() as u32;
        self.buckets[bucket] = slot;
        self.push_name(Arc::clone(name));
        if self.names.len() * 8 > self.buckets.len() * 7 {
            self.rehash(self.buckets.len() * 2);
        }
        slot
    }

    /// How many slots there are, [`UNKNOWN_SLOT`] among them.
    pub(super) fn len(&self) -> usize {
        self.names.len() + 1
    }

    /// The name of each slot (`None`: [`UNKNOWN_SLOT`]).
    pub(super) fn names(&self) -> Vec<Option<Arc<str>>> {
        std::iter::once(None).chain(self.names.iter().cloned().map(Some)).collect()
    }

    /// The bucket that holds `name`'s slot, or the free one where it would go.
    fn bucket_of(&self, name: &str) -> usize {
        let mask = self.buckets.len() - 1;
        let mut bucket = hash(name) as usize & mask;
        loop {
            match self.buckets[bucket] {
                FREE => return bucket,
                slot if *self.names[(slot - UNKNOWN_SLOT - 1) as usize] == *name => return bucket,
                _ => bucket = (bucket + 1) & mask,
            }
        }
    }

    /// Appends a slot's name, growing the list by an eighth at a time (doubling, it would hold
    /// up to twice the room it needs).
    fn push_name(&mut self, name: Arc<str>) {
        if self.names.len() == self.names.capacity() {
            self.names.reserve_exact((self.names.len() / 8).max(16));
        }
        self.names.push(name);
    }

    fn rehash(&mut self, buckets: usize) {
        self.buckets = vec![FREE; buckets];
        for slot in UNKNOWN_SLOT + 1..self.len() as u32 {
            let bucket = self.bucket_of(&self.names[(slot - UNKNOWN_SLOT - 1) as usize]);
            self.buckets[bucket] = slot;
        }
    }
}

fn hash(name: &str) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut hasher = rustc_hash::FxHasher::default();
    name.hash(&mut hasher);
    hasher.finish()
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_name_keeps_its_slot_as_the_buckets_grow_and_slots_are_named_in_order() {
        let mut names = CounterNames::default();
        let name = |i: usize| -> Arc<str> { format!("t{i}").into() };
        let slots: Vec<u32> = (0..1000).map(|i| names.slot(&name(i))).collect();
        assert_eq!(slots, (1..=1000).collect::<Vec<u32>>());
        assert!((0..1000).rev().all(|i| names.slot(&name(i)) == i as u32 + 1));
        assert_eq!(names.len(), 1001);
        let named = names.names();
        assert_eq!((named[0].as_deref(), named[1].as_deref(), named[1000].as_deref()), (None, Some("t0"), Some("t999")));
        assert!(names.buckets.len() * 7 >= names.names.len() * 8 && names.names.capacity() * 8 <= names.names.len() * 9 + 128);
    }
}
