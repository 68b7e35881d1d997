//! Tuple space search in the style of TupleMerge: the part of a rule table that takes one-rule
//! updates in microseconds. Rules live in hash tables keyed by their source and destination
//! prefixes cut to the table's lengths (a table hashes no more bits than any of its rules
//! specify); a bucket holds the rules sharing a masked key, in rank order, and ports, protocol
//! and DSCP are checked there. Tables are probed best-first (by the best rank they hold), so a
//! lookup stops as soon as no later table can beat its match.

use super::{prefix_mask, Key, Rank, Rule};
use rustc_hash::FxHashMap;

/// How many rules may share one bucket before a rule goes to a more specific table.
const BUCKET_LIMIT: usize = 32;
/// Prefix lengths a new table is cut to: coarse enough to share, fine enough to spread.
const LENGTH_STEP: u8 = 8;

/// Rules sharing a masked key, by rank; shared between clones of a table until one is edited.
type Bucket = std::sync::Arc<[(Rank, Rule)]>;

#[derive(Debug, Clone)]
struct TupleTable {
    src_len: u8,
    dst_len: u8,
    src_mask: u128,
    dst_mask: u128,
    /// Each bucket holds its rules themselves: no second lookup to check them.
    buckets: FxHashMap<(u128, u128), Bucket>,
    /// The best (smallest) rank in the table: the probe order and the early exit.
    best: Rank,
    rules: usize,
}

impl TupleTable {
    fn new(src_len: u8, dst_len: u8) -> Self {
        TupleTable {
            src_len,
            dst_len,
            src_mask: prefix_mask(src_len),
            dst_mask: prefix_mask(dst_len),
            buckets: FxHashMap::default(),
            best: Rank::MAX,
            rules: 0,
        }
    }

    fn accepts(&self, rule: &Rule) -> bool {
        self.src_len <= rule.src_len && self.dst_len <= rule.dst_len
    }

    fn bucket_key(&self, src: u128, dst: u128) -> (u128, u128) {
        (src & self.src_mask, dst & self.dst_mask)
    }

    fn holds(&self, rule: &Rule, rank: Rank) -> bool {
        self.accepts(rule) && self.buckets.get(&self.bucket_key(rule.src, rule.dst)).is_some_and(|b| b.iter().any(|(r, _)| *r == rank))
    }

    fn recompute_best(&mut self) {
        self.best = self.buckets.values().filter_map(|b| b.first().map(|(r, _)| *r)).min().unwrap_or(Rank::MAX);
    }

    fn memory_bytes(&self) -> usize {
        let entry = std::mem::size_of::<((u128, u128), Bucket)>() + 1;
        let lists: usize = self.buckets.values().map(|b| 16 + b.len() * std::mem::size_of::<(Rank, Rule)>()).sum();
        std::mem::size_of::<TupleTable>() + self.buckets.capacity() * entry + lists
    }
}

/// Ranked rules in tuple tables. Cloning is cheap (buckets are shared), so a live update can
/// patch a copy while readers keep the original.
#[derive(Debug, Clone, Default)]
pub struct TupleSpace {
    /// None empty: a table emptied by a removal goes.
    tables: Vec<TupleTable>,
}

impl TupleSpace {
    pub fn len(&self) -> usize {
        self.tables.iter().map(|table| table.rules).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.tables.is_empty()
    }

    pub fn table_count(&self) -> usize {
        self.tables.len()
    }

    pub fn memory_bytes(&self) -> usize {
        self.tables.iter().map(TupleTable::memory_bytes).sum()
    }

    /// The best rank below `bound` of a rule matching `key`.
    #[inline]
    pub fn lookup(&self, key: &Key, bound: Rank) -> Option<Rank> {
        let mut best = bound;
        for table in &self.tables {
            if table.best >= best {
                break;
            }
            let Some(bucket) = table.buckets.get(&table.bucket_key(key.src, key.dst)) else { continue };
            for (rank, rule) in bucket.iter() {
                if *rank >= best {
                    break;
                }
                if rule.matches(key) {
                    best = *rank;
                    break;
                }
            }
        }
        (best < bound).then_some(best)
    }

    /// Adds `rule` with `rank` (ranks are unique).
    pub fn insert(&mut self, rank: Rank, rule: Rule) {
        self.place(rank, rule);
        self.sort_tables();
    }

    /// Adds many rules at once, sorting the tables once.
    pub fn extend(&mut self, rules: impl IntoIterator<Item = (Rank, Rule)>) {
        for (rank, rule) in rules {
            self.place(rank, rule);
        }
        self.sort_tables();
    }

    /// Removes the rule with `rank`; false if it is not here.
    pub fn remove(&mut self, rank: Rank, rule: &Rule) -> bool {
        let Some(slot) = self.tables.iter().position(|t| t.holds(rule, rank)) else { return false };
        let table = &mut self.tables[slot];
        let key = table.bucket_key(rule.src, rule.dst);
        if let Some(bucket) = table.buckets.get_mut(&key) {
            let kept: Vec<(Rank, Rule)> = bucket.iter().copied().filter(|(r, _)| *r != rank).collect();
            if kept.is_empty() {
                table.buckets.remove(&key);
            } else {
                *bucket = kept.into();
            }
        }
        table.rules -= 1;
        if table.rules == 0 {
            self.tables.swap_remove(slot);
        } else if table.best == rank {
            table.recompute_best();
        }
        self.sort_tables();
        true
    }

    /// Gives the rules `moved` (rank, rule) the ranks `new_rank` maps theirs to (every other
    /// rank maps to itself). The map must keep every rank's place among all of them, so the
    /// tables and buckets stay in order; each bucket is mapped once, so that a new rank is
    /// never taken for an old one.
    pub fn rerank(&mut self, moved: &[(Rank, Rule)], new_rank: impl Fn(Rank) -> Rank) {
        let mut buckets: Vec<(usize, (u128, u128))> = moved
            .iter()
            .map(|(rank, rule)| {
                let slot = self.tables.iter().position(|t| t.holds(rule, *rank)).expect("a rule of this tuple space");
                (slot, self.tables[slot].bucket_key(rule.src, rule.dst))
            })
            .collect();
        buckets.sort_unstable();
        buckets.dedup();
        for (slot, key) in buckets {
            let bucket = self.tables[slot].buckets.get_mut(&key).expect("the rule's bucket");
            *bucket = bucket.iter().map(|&(rank, rule)| (new_rank(rank), rule)).collect();
        }
        for table in &mut self.tables {
            table.best = new_rank(table.best);
        }
    }

    /// Puts a rule into the first table (best first) that can hash it without overfilling its
    /// bucket, or into a new table cut to the rule's own lengths.
    fn place(&mut self, rank: Rank, rule: Rule) {
        let fits = self.tables.iter().position(|t| t.accepts(&rule) && t.buckets.get(&t.bucket_key(rule.src, rule.dst)).map_or(0, |b| b.len()) < BUCKET_LIMIT);
        let slot = fits.unwrap_or_else(|| {
            let cut = |len: u8| if len == 128 { 128 } else { len - len % LENGTH_STEP };
            let wanted = (cut(rule.src_len), cut(rule.dst_len));
            // An identical tuple may exist with a full bucket: rules that share their masked
            // prefixes cannot be spread by hashing, so they share the bucket.
            self.tables.iter().position(|t| (t.src_len, t.dst_len) == wanted).unwrap_or_else(|| {
                self.tables.push(TupleTable::new(wanted.0, wanted.1));
                self.tables.len() - 1
            })
        });
        let table = &mut self.tables[slot];
        // Buckets are shared with clones of the table: an edit builds the bucket anew.
        let slot = table.buckets.entry(table.bucket_key(rule.src, rule.dst)).or_insert_with(|| Vec::new().into());
        let mut bucket = slot.to_vec();
        let at = bucket.partition_point(|(r, _)| *r < rank);
        bucket.insert(at, (rank, rule));
        *slot = bucket.into();
        table.rules += 1;
        table.best = table.best.min(rank);
    }

    fn sort_tables(&mut self) {
        self.tables.sort_by_key(|t| t.best);
    }
}
