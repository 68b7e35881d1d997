//! First-match 5-tuple (+DSCP) classification with one-rule updates in microseconds.
//!
//! Decision trees for fast lookups ([`tree`]), tuple space for one-rule updates in
//! microseconds ([`tuples`]); [`RuleTable`] puts the two together.

mod chunked;
pub mod shadowed;
mod tree;
mod tuples;

use crate::error::CoreError;
pub(crate) use chunked::{Chunked, Item};
use std::sync::Arc;
pub use tree::{Fields, Forest, NO_RULE};
use tuples::TupleSpace;

/// A packet's fields as the classifier sees them (addresses as 128-bit, IPv4-mapped).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Key {
    pub src: u128,
    pub dst: u128,
    pub src_port: u16,
    pub dst_port: u16,
    pub proto: u8,
    pub dscp: u8,
}

/// One rule: prefixes over 128-bit addresses, inclusive port ranges, masked protocol and DSCP.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rule {
    pub src: u128,
    pub src_len: u8,
    pub dst: u128,
    pub dst_len: u8,
    pub src_ports: (u16, u16),
    pub dst_ports: (u16, u16),
    pub proto: u8,
    pub proto_mask: u8,
    pub dscp: u8,
    pub dscp_mask: u8,
}

impl Rule {
    /// A rule that matches every packet.
    pub const ANY: Rule =
        Rule { src: 0, src_len: 0, dst: 0, dst_len: 0, src_ports: (0, u16::MAX), dst_ports: (0, u16::MAX), proto: 0, proto_mask: 0, dscp: 0, dscp_mask: 0 };

    /// Checks the fields a table's hash does not cover (and the prefixes beyond its lengths).
    #[inline]
    pub fn matches(&self, key: &Key) -> bool {
        (key.src ^ self.src) & prefix_mask(self.src_len) == 0
            && (key.dst ^ self.dst) & prefix_mask(self.dst_len) == 0
            && (self.dst_ports.0..=self.dst_ports.1).contains(&key.dst_port)
            && (self.src_ports.0..=self.src_ports.1).contains(&key.src_port)
            && (key.proto ^ self.proto) & self.proto_mask == 0
            && (key.dscp ^ self.dscp) & self.dscp_mask == 0
    }

    /// Rejects what no packet could be compared against: lengths over 128, reversed ranges.
    pub fn check(&self) -> Result<(), CoreError> {
        if self.src_len > 128 || self.dst_len > 128 {
            return Err(CoreError::spec(format!("prefix length {} is over 128", self.src_len.max(self.dst_len))));
        }
        if self.src_ports.0 > self.src_ports.1 || self.dst_ports.0 > self.dst_ports.1 {
            return Err(CoreError::spec("port range is reversed"));
        }
        Ok(())
    }
}

/// The DSCP value and mask bit that mark a row as a frame (EtherType) rule, which no IP packet
/// matches (`FRAME_RULE_DSCP` in `python/isolane/policy/constants.py`).
pub const FRAME_RULE_DSCP: u8 = 0x40;

#[inline]
pub fn prefix_mask(len: u8) -> u128 {
    match len {
        0 => 0,
        len => u128::MAX << (128 - u32::from(len.min(128))),
    }
}

/// A rule's place in the order: ranks grow with the index but leave gaps, so that a rule
/// inserted between two others takes a rank between theirs and no other rule is renumbered
/// (which would copy every bucket of a table that is being patched).
type Rank = u64;
/// The gap between the ranks a build gives consecutive rules: 32 inserts at one place before
/// the rules inserted there are respread.
const RANK_GAP: Rank = 1 << 32;

/// What a table's owner keeps with each rule, in the rule's row (the engine: what the rule
/// does), so that it takes no second list: a few bytes fit in the row's padding. `()` for none.
pub trait Payload: Copy + Default + PartialEq + std::fmt::Debug {
    /// Whether the row opens a group: groups are numbered by counting ([`RuleTable::numbered`]).
    fn opens_group(&self) -> bool {
        true
    }
}

impl Payload for () {}

/// A rule with its rank and payload. Anchored rules (those ranked by the last build, and
/// appended ones) keep their rank until the next build; their ranks are distinct multiples of
/// [`RANK_GAP`], so the rules inserted between two anchors (a run) always have room to be
/// respread.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Ranked<P = ()> {
    rank: Rank,
    rule: Rule,
    anchored: bool,
    payload: P,
}

impl<P: Payload> Item for Ranked<P> {
    fn opens_group(&self) -> bool {
        self.payload.opens_group()
    }
}

impl<P: Copy> Ranked<P> {
    pub(crate) fn payload(&self) -> P {
        self.payload
    }
}

/// Marks a tree rule removed since the trees were built.
pub const DEAD: u32 = u32::MAX;

/// Where a key's first match is: a tree rule, by tree id ([`RuleTable::trees`] gives its row),
/// or another rule, by row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Match {
    Tree(u32),
    Row(usize),
}

/// Tables of at most this many rules keep no index: a lookup scans their rules in order, which
/// for so few is about as fast as the trees and costs none of their memory (a tenant of one
/// rule holds its rule once, in 64 bytes, instead of ~500 bytes of trees and ranks).
pub const SMALL_RULES: usize = 8;

/// An ordered rule set: index 0 is checked first, and the first match wins.
///
/// A table of up to [`SMALL_RULES`] rules is scanned in order, and edited in place. A larger
/// one is indexed: IPv4 rules (rules that can match a packet with IPv4 addresses) are compiled
/// into decision trees ([`tree`]), which look up fast but cannot be edited; edits go to tuple
/// space ([`tuples`]), which takes one rule in microseconds: a new rule joins `fresh`, a removed
/// tree rule is marked dead, and once enough edits pile up the trees are rebuilt. The other
/// rules live in tuple space only. A table that grows past [`SMALL_RULES`] is indexed, one that
/// shrinks to it drops its index. Cloning is cheap (rules, trees and buckets are shared), so a
/// live update can patch a copy.
#[derive(Debug, Clone, Default)]
pub struct RuleTable<P = ()> {
    /// The rules in order; while indexed, ranks strictly increase (a small table's are unused).
    rows: Chunked<Ranked<P>>,
    /// `None` while the table is small; boxed, so that a small table holds 8 bytes of it.
    indexed: Option<Box<Indexed>>,
    /// Set by an owner that rebuilds worn trees itself, off its update path
    /// ([`RuleTable::rebuilt`]): edits then rebuild in line only when long past due.
    rebuilds_elsewhere: bool,
}

/// What a table of more than [`SMALL_RULES`] rules looks its rules up through.
#[derive(Debug, Clone, Default)]
struct Indexed {
    /// The IPv4 rules as of the last build, their ids in rank order.
    trees: Forest,
    /// Rank of each tree id (sorted): finds a removed rule's id.
    tree_ranks: Arc<[Rank]>,
    /// Current index of each tree id, [`DEAD`] once removed.
    tree_index: Arc<[u32]>,
    /// Whether some tree rule's source (destination) prefix reaches beyond IPv4: only then can
    /// a key with an IPv6 source (destination) match in the trees.
    trees_reach_ipv6: [bool; 2],
    dead: u32,
    /// IPv4 rules added since the trees were built.
    fresh: TupleSpace,
    /// The rules that match no IPv4 packet (one of their prefixes holds no IPv4 address).
    ipv6: TupleSpace,
    /// Of those, how many were inserted between two rules since the build (an edit the next
    /// build undoes: it anchors them).
    ipv6_inserted: u32,
}

/// The first of `rows` that matches `key`: a small table's lookup.
#[inline]
pub(crate) fn first_match<P>(rows: &[Ranked<P>], key: &Key) -> Option<usize> {
    rows.iter().position(|row| row.rule.matches(key))
}

impl RuleTable {
    /// Errors name the rule refused (`rule 3`).
    pub fn new(rules: Vec<Rule>) -> Result<Self, CoreError> {
        RuleTable::with_payloads(rules.into_iter().map(|rule| (rule, ())))
    }
}

impl<P: Payload> RuleTable<P> {
    /// A table of these rules, each with its payload; errors name the rule refused (`rule 3`).
    pub fn with_payloads(rows: impl IntoIterator<Item = (Rule, P)>) -> Result<Self, CoreError> {
        let rows: Vec<Ranked<P>> = rows.into_iter().map(|(rule, payload)| Ranked { rank: 0, rule, anchored: true, payload }).collect();
        for (index, row) in rows.iter().enumerate() {
            row.rule.check().map_err(|err| err.within(format!("rule {index}")))?;
        }
        let mut table = RuleTable { rows: rows.into_iter().collect(), indexed: None, rebuilds_elsewhere: false };
        table.rebuild();
        Ok(table)
    }

    /// Row `row`'s payload and its group: the groups opened by it and the rows before it, less one.
    pub fn numbered(&self, row: usize) -> (usize, P) {
        let (group, found) = self.rows.numbered(row);
        (group, found.payload)
    }

    /// The index of the row that opens `group`, or the length if there is no such group.
    pub fn group_start(&self, group: usize) -> usize {
        self.rows.group_start(group)
    }

    pub fn group_count(&self) -> usize {
        self.rows.group_count()
    }

    /// The payloads in row order.
    pub fn payloads(&self) -> impl DoubleEndedIterator<Item = P> + '_ {
        self.rows.iter().map(|row| row.payload)
    }

    /// Gives the rows these payloads, in order (one for each row), copying only the chunks
    /// between the first and last that change.
    pub fn set_payloads(&mut self, payloads: impl IntoIterator<Item = P>) {
        let payloads: Vec<P> = payloads.into_iter().collect();
        let changed: Vec<usize> = self.rows.iter().zip(&payloads).enumerate().filter(|(_, (row, new))| row.payload != **new).map(|(at, _)| at).collect();
        let (Some(&first), Some(&last)) = (changed.first(), changed.last()) else { return };
        let mut new = payloads[first..=last].iter();
        self.rows.edit_range(first..last + 1, |row| row.payload = *new.next().expect("a payload per row"));
    }

    /// Ranks and anchors every rule anew, compiles the IPv4 rules into fresh trees and files
    /// the others in `ipv6`; the edit buffers empty. A small table drops its index instead.
    fn rebuild(&mut self) {
        if self.rows.len() <= SMALL_RULES {
            self.indexed = None;
            return;
        }
        let (mut ranks, mut rules, mut indices, mut ipv6) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        self.rows = self.rows.iter().enumerate().map(|(index, row)| Ranked { rank: (index as Rank + 1) * RANK_GAP, anchored: true, ..*row }).collect();
        for (index, row) in self.rows.iter().enumerate() {
            if tree::matches_ipv4(&row.rule) {
                ranks.push(row.rank);
                rules.push(row.rule);
                indices.push(index as u32);
            } else {
                ipv6.push((row.rank, row.rule));
            }
        }
        let mut indexed = Indexed {
            trees_reach_ipv6: [rules.iter().any(|rule| rule.src_len < 96), rules.iter().any(|rule| rule.dst_len < 96)],
            trees: Forest::new(&rules),
            tree_ranks: ranks.into(),
            tree_index: indices.into(),
            ..Indexed::default()
        };
        indexed.ipv6.extend(ipv6);
        self.indexed = Some(Box::new(indexed));
    }

    pub fn len(&self) -> usize {
        self.rows.len()
    }

    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// The rules in order.
    pub fn rules(&self) -> impl DoubleEndedIterator<Item = Rule> + '_ {
        self.rows.iter().map(|row| row.rule)
    }

    /// The trees and each tree id's current rule index ([`DEAD`] once removed), for a caller
    /// that walks them itself with what it keeps per rule beside them; they answer alone only
    /// while no rule was added since they were built ([`RuleTable::has_fresh`]). `None` for a
    /// small table, which has no trees ([`RuleTable::small_rows`]).
    pub fn trees(&self) -> Option<(&Forest, &[u32])> {
        self.indexed.as_deref().map(|indexed| (&indexed.trees, &*indexed.tree_index))
    }

    /// A small table's rules in order, shared with it, for a caller that scans them itself
    /// ([`first_match`]); `None` if the table is indexed or empty.
    pub(crate) fn small_rows(&self) -> Option<Arc<[Ranked<P>]>> {
        (self.indexed.is_none() && !self.rows.is_empty()).then(|| self.rows.shared_slice())
    }

    /// Whether rules were added since the trees were built.
    pub fn has_fresh(&self) -> bool {
        self.indexed.as_deref().is_some_and(|indexed| !indexed.fresh.is_empty())
    }

    /// How many structures a lookup may visit: trees plus tuple tables (a small table's rules
    /// are one).
    pub fn table_count(&self) -> usize {
        match self.indexed.as_deref() {
            None => usize::from(!self.rows.is_empty()),
            Some(indexed) => indexed.trees.tree_count() + indexed.fresh.table_count() + indexed.ipv6.table_count(),
        }
    }

    /// Bytes held by the rules, trees and tuple tables (buckets counted at their capacity).
    pub fn memory_bytes(&self) -> usize {
        let rules = self.rows.len() * std::mem::size_of::<Ranked>();
        let index = |indexed: &Indexed| {
            let trees = indexed.trees.memory_bytes() + indexed.tree_ranks.len() * std::mem::size_of::<Rank>() + indexed.tree_index.len() * 4;
            std::mem::size_of::<Indexed>() + trees + indexed.fresh.memory_bytes() + indexed.ipv6.memory_bytes()
        };
        rules + self.indexed.as_deref().map_or(0, index)
    }

    /// The first rule matching `key`, if any.
    #[inline]
    pub fn lookup(&self, key: &Key) -> Option<usize> {
        self.find(key).map(|found| self.row_of(found))
    }

    /// The first rule matching `key`, if any, as the trees found it if they did: a caller that
    /// keeps what each tree rule does by tree id needs no row.
    #[inline]
    pub fn find(&self, key: &Key) -> Option<Match> {
        let Some(indexed) = self.indexed.as_deref() else {
            return self.rows.iter().position(|row| row.rule.matches(key)).map(Match::Row);
        };
        let Some(fields) = Fields::of(key) else {
            return indexed.find_beyond_ipv4(&self.rows, key);
        };
        let tree_index = &indexed.tree_index;
        let id = indexed.trees.lookup(&fields, tree::NO_RULE, |id| tree_index[id as usize] != DEAD);
        indexed.with_fresh(&self.rows, key, id)
    }

    fn row_of(&self, found: Match) -> usize {
        match found {
            Match::Row(row) => row,
            // Only an indexed table finds rules in trees.
            Match::Tree(id) => self.indexed.as_deref().map_or(id as usize, |indexed| indexed.tree_index[id as usize] as usize),
        }
    }

    /// The first match of each key (-1 for none); IPv4 keys are looked up a group at a time.
    pub fn lookup_all(&self, keys: &[Key], out: &mut [i32]) {
        const GROUP: usize = 8;
        let as_index = |found: Option<usize>| found.map_or(-1, |index| index as i32);
        let Some(indexed) = self.indexed.as_deref() else {
            for (key, slot) in keys.iter().zip(out) {
                *slot = as_index(self.lookup(key));
            }
            return;
        };
        let (mut key_groups, mut out_groups) = (keys.chunks_exact(GROUP), out.chunks_exact_mut(GROUP));
        for (keys, out) in key_groups.by_ref().zip(out_groups.by_ref()) {
            let keys: &[Key; GROUP] = keys.try_into().expect("chunks_exact");
            let Some(fields) = group_fields(keys) else {
                for (key, slot) in keys.iter().zip(out) {
                    *slot = as_index(self.lookup(key));
                }
                continue;
            };
            let mut best = [tree::NO_RULE; GROUP];
            let tree_index = &indexed.tree_index;
            indexed.trees.lookup_group(&fields, &mut best, |id| tree_index[id as usize] != DEAD);
            for ((key, id), slot) in keys.iter().zip(best).zip(out) {
                *slot = as_index(indexed.with_fresh(&self.rows, key, id).map(|found| self.row_of(found)));
            }
        }
        for (key, slot) in key_groups.remainder().iter().zip(out_groups.into_remainder()) {
            *slot = as_index(self.lookup(key));
        }
    }

    /// Inserts `rule` at `index`: it is checked before the rules from `index` on, which move
    /// down by one.
    pub fn insert(&mut self, index: usize, rule: Rule) -> Result<(), CoreError> {
        self.insert_with(index, rule, P::default())
    }

    /// [`RuleTable::insert`] with the row's payload.
    pub fn insert_with(&mut self, index: usize, rule: Rule, payload: P) -> Result<(), CoreError> {
        rule.check()?;
        if index > self.rows.len() {
            return Err(CoreError::RuleIndex { what: "rule", index: index as i64, rules: self.rows.len(), insert: true });
        }
        self.insert_row(index, rule, payload);
        self.settle();
        Ok(())
    }

    /// Removes the rule at `index`; the rules after it move up by one.
    pub fn remove(&mut self, index: usize) -> Result<Rule, CoreError> {
        if index >= self.rows.len() {
            return Err(CoreError::RuleIndex { what: "rule", index: index as i64, rules: self.rows.len(), insert: false });
        }
        let rule = self.remove_row(index);
        self.settle();
        Ok(rule)
    }

    /// Replaces the rule at `index`, its payload kept (a removal and an insertion at the same
    /// place, with no change of form between them).
    pub fn replace(&mut self, index: usize, rule: Rule) -> Result<Rule, CoreError> {
        rule.check()?;
        if index >= self.rows.len() {
            return Err(CoreError::RuleIndex { what: "rule", index: index as i64, rules: self.rows.len(), insert: false });
        }
        let payload = self.rows[index].payload;
        let old = self.remove_row(index);
        self.insert_row(index, rule, payload);
        self.settle();
        Ok(old)
    }

    /// Indexes a table grown past [`SMALL_RULES`], drops the index of one shrunk to it, and
    /// rebuilds worn trees.
    fn settle(&mut self) {
        match (self.indexed.is_some(), self.rows.len() <= SMALL_RULES) {
            (true, true) => self.indexed = None,
            (false, false) => self.rebuild(),
            (true, false) => self.rebuild_if_worn(),
            (false, true) => {}
        }
    }

    /// Puts `rule` at `index` in the rows and, if the table is indexed, in its tuple space.
    fn insert_row(&mut self, index: usize, rule: Rule, payload: P) {
        if self.indexed.is_none() {
            self.rows.insert(index, Ranked { rank: 0, rule, anchored: true, payload });
            return;
        }
        let appended = index == self.rows.len();
        let rank = if appended { self.appended_rank() } else { self.rank_before(index) };
        self.rows.insert(index, Ranked { rank, rule, anchored: appended, payload });
        let Some(indexed) = self.indexed.as_deref_mut() else { return };
        indexed.renumber_tree_rules(|at| if at != DEAD && at as usize >= index { at + 1 } else { at });
        if tree::matches_ipv4(&rule) {
            indexed.fresh.insert(rank, rule);
        } else {
            indexed.ipv6.insert(rank, rule);
            indexed.ipv6_inserted += u32::from(!appended);
        }
    }

    /// Takes the rule at `index` out of the rows and, if the table is indexed, out of its index.
    fn remove_row(&mut self, index: usize) -> Rule {
        let Ranked { rank, rule, anchored, .. } = self.rows.remove(index);
        let Some(indexed) = self.indexed.as_deref_mut() else { return rule };
        if !tree::matches_ipv4(&rule) {
            indexed.ipv6.remove(rank, &rule);
            indexed.ipv6_inserted -= u32::from(!anchored);
        } else if !indexed.fresh.remove(rank, &rule) && indexed.tree_ranks.binary_search(&rank).is_ok() {
            indexed.dead += 1;
        }
        // The tree rule at `index`, if it is one, dies; the ones after it move up.
        indexed.renumber_tree_rules(|at| match at {
            DEAD => DEAD,
            at if at as usize == index => DEAD,
            at if at as usize > index => at - 1,
            at => at,
        });
        rule
    }

    /// An appended rule's rank: the next multiple of [`RANK_GAP`], an anchor.
    fn appended_rank(&self) -> Rank {
        let last = self.rows.iter().next_back().map_or(0, |row| row.rank);
        (last / RANK_GAP + 1) * RANK_GAP
    }

    /// A free rank between rules `index - 1` and `index`: halfway, after respreading the run
    /// there if there is no room (after ~32 inserts at one place).
    fn rank_before(&mut self, index: usize) -> Rank {
        let neighbours = |rows: &Chunked<Ranked<P>>| (if index == 0 { 0 } else { rows[index - 1].rank }, rows[index].rank);
        let (mut below, mut above) = neighbours(&self.rows);
        if above - below < 2 {
            self.respread_run(index);
            (below, above) = neighbours(&self.rows);
        }
        below + (above - below) / 2
    }

    /// Spreads the ranks of the run around the gap before rule `index` (the unanchored rules
    /// there: at least one of its neighbours is, since anchors are far apart) evenly over the
    /// room between the anchors that bound it, at least [`RANK_GAP`]. Only the run's rules
    /// change, in place: no tree, no other rule, and tuple space only where the run is.
    fn respread_run(&mut self, index: usize) {
        let rows = &self.rows;
        let start = index - (0..index).rev().take_while(|&at| !rows[at].anchored).count();
        let end = index + (index..rows.len()).take_while(|&at| !rows[at].anchored).count();
        let floor = if start == 0 { 0 } else { rows[start - 1].rank };
        // No anchor after the run: the next multiple of the gap is free.
        let ceiling = if end < rows.len() { rows[end].rank } else { (rows[end - 1].rank / RANK_GAP + 1) * RANK_GAP };
        let step = (ceiling - floor) / (end - start + 1) as Rank;
        debug_assert!(step >= 2, "a run of {} rules in {} ranks", end - start, ceiling - floor);
        let run: Vec<(Rank, Rule)> = (start..end).map(|at| (rows[at].rank, rows[at].rule)).collect();
        let old: Vec<Rank> = run.iter().map(|&(rank, _)| rank).collect();
        let new_rank = |rank: Rank| old.binary_search(&rank).map_or(rank, |k| floor + step * (k as Rank + 1));
        let (ipv4, others): (Vec<_>, Vec<_>) = run.into_iter().partition(|(_, rule)| tree::matches_ipv4(rule));
        if let Some(indexed) = self.indexed.as_deref_mut() {
            indexed.fresh.rerank(&ipv4, new_rank);
            indexed.ipv6.rerank(&others, new_rank);
        }
        self.rows.edit_range(start..end, |row| row.rank = new_rank(row.rank));
    }

    /// Whether the edits since the last build slow lookups down enough to rebuild the trees:
    /// every fresh rule is a tuple probe away, every dead one a wasted check (and rules
    /// inserted between others wait for the build to anchor them). Never for a small table.
    pub fn is_worn(&self) -> bool {
        self.edits_since_build() > self.edits_due()
    }

    /// Leaves rebuilding worn trees to the caller ([`RuleTable::is_worn`],
    /// [`RuleTable::rebuilt`]), so that an edit costs microseconds, not a rebuild.
    pub fn rebuild_elsewhere(&mut self) {
        self.rebuilds_elsewhere = true;
    }

    /// This table with its trees rebuilt over its current rules.
    pub fn rebuilt(&self) -> Self {
        let mut table = self.clone();
        table.rebuild();
        table
    }

    fn edits_since_build(&self) -> usize {
        self.indexed.as_deref().map_or(0, |indexed| indexed.fresh.len() + indexed.dead as usize + indexed.ipv6_inserted as usize)
    }

    /// Edits a table takes before a rebuild is due (more for large tables: 1/16 of their rules,
    /// so that rebuilds cost each edit a bounded share).
    fn edits_due(&self) -> usize {
        REBUILD_EDITS.max(self.rows.len() / 16)
    }

    fn rebuild_if_worn(&mut self) {
        let overdue = if self.rebuilds_elsewhere { OVERDUE } else { 1 };
        if self.edits_since_build() > self.edits_due() * overdue {
            self.rebuild();
        }
    }
}

impl Indexed {
    /// The first match of a key with an IPv6 address. An IPv4 rule matches it only through
    /// prefixes that reach beyond IPv4 (shorter than 96 bits: `::/0`, none given), on each side
    /// where the key's address is IPv6; such a prefix holds every IPv4 address, and the trees
    /// file it under any. So the trees are walked if they hold such prefixes, and `ipv6` holds
    /// the other rules that can match.
    fn find_beyond_ipv4<P: Payload>(&self, rows: &Chunked<Ranked<P>>, key: &Key) -> Option<Match> {
        let [src_reach, dst_reach] = self.trees_reach_ipv6;
        let walk = (src_reach || is_ipv4_mapped(key.src)) && (dst_reach || is_ipv4_mapped(key.dst));
        let found = self.with_fresh(rows, key, if walk { self.tree_match_beyond_ipv4(rows, key) } else { tree::NO_RULE });
        let bound = found.map_or(Rank::MAX, |found| match found {
            Match::Tree(id) => self.tree_ranks[id as usize],
            Match::Row(row) => rows[row].rank,
        });
        self.ipv6.lookup(key, bound).map(|rank| Match::Row(index_of(rows, rank))).or(found)
    }

    /// The trees' first match of a key with an IPv6 address: walked with `0.0.0.0` in place of
    /// each IPv6 address, every candidate checked in full.
    fn tree_match_beyond_ipv4<P: Payload>(&self, rows: &Chunked<Ranked<P>>, key: &Key) -> u32 {
        let as_ipv4 = |address: u128| if is_ipv4_mapped(address) { address } else { ipv4_mapped(0) };
        let fields = Fields::new(as_ipv4(key.src), as_ipv4(key.dst), key.src_port, key.dst_port, key.proto, key.dscp).expect("IPv4 addresses");
        let matches = |id: u32| match self.tree_index[id as usize] {
            DEAD => false,
            index => rows[index as usize].rule.matches(key),
        };
        self.trees.lookup(&fields, tree::NO_RULE, matches)
    }

    /// The first match, given the trees' best `id` for the key: a rule added since the trees
    /// were built may come first.
    #[inline]
    fn with_fresh<P: Payload>(&self, rows: &Chunked<Ranked<P>>, key: &Key, id: u32) -> Option<Match> {
        let from_trees = (id != tree::NO_RULE).then_some(Match::Tree(id));
        if self.fresh.is_empty() {
            return from_trees;
        }
        let bound = self.tree_ranks.get(id as usize).copied().unwrap_or(Rank::MAX);
        self.fresh.lookup(key, bound).map(|rank| Match::Row(index_of(rows, rank))).or(from_trees)
    }

    /// Gives every tree rule its new index, in one pass over a copy (readers keep theirs).
    fn renumber_tree_rules(&mut self, new_index: impl Fn(u32) -> u32) {
        self.tree_index = self.tree_index.iter().map(|&at| new_index(at)).collect();
    }
}

/// The index of the rule with `rank`.
fn index_of<P: Payload>(rows: &Chunked<Ranked<P>>, rank: Rank) -> usize {
    rows.partition_point(|row| row.rank < rank)
}

const REBUILD_EDITS: usize = 64;
/// How far past due a table that is rebuilt elsewhere may get before an edit rebuilds it (the
/// rebuild elsewhere could not keep up).
const OVERDUE: usize = 8;

/// The IPv4 fields of every key, if all are IPv4.
fn group_fields<const N: usize>(keys: &[Key; N]) -> Option<[Fields; N]> {
    let mut fields = [Fields::default(); N];
    for (slot, key) in fields.iter_mut().zip(keys) {
        *slot = Fields::of(key)?;
    }
    Some(fields)
}

fn is_ipv4_mapped(address: u128) -> bool {
    address >> 32 == 0xffff
}

/// Parses a ClassBench rule file (`@src/len dst/len sp : sp dp : dp proto/mask flags/mask`);
/// errors name the line (`line 3`, from 1).
pub fn parse_classbench(text: &str) -> Result<Vec<Rule>, CoreError> {
    let lines = text.lines().enumerate().filter(|(_, line)| !line.trim().is_empty());
    lines.map(|(number, line)| classbench_rule(line).map_err(|err| err.within(format!("line {}", number + 1)))).collect()
}

/// One rule; the field parsers' reasons become [`CoreError::InvalidSpec`] here.
fn classbench_rule(line: &str) -> Result<Rule, CoreError> {
    let fields: Vec<&str> = line.trim().trim_start_matches('@').split('\t').map(str::trim).collect();
    if fields.len() < 5 {
        return Err(CoreError::spec(format!("expected 5 tab-separated fields, found {}", fields.len())));
    }
    let (src, src_len) = ipv4_prefix(fields[0]).map_err(CoreError::spec)?;
    let (dst, dst_len) = ipv4_prefix(fields[1]).map_err(CoreError::spec)?;
    let (proto, proto_mask) = fields[4].split_once('/').ok_or_else(|| CoreError::spec("protocol is not VALUE/MASK"))?;
    let rule = Rule {
        src,
        src_len,
        dst,
        dst_len,
        src_ports: port_range(fields[2]).map_err(CoreError::spec)?,
        dst_ports: port_range(fields[3]).map_err(CoreError::spec)?,
        proto: hex_u8(proto).map_err(CoreError::spec)?,
        proto_mask: hex_u8(proto_mask).map_err(CoreError::spec)?,
        dscp: 0,
        dscp_mask: 0,
    };
    rule.check()?;
    Ok(rule)
}

/// An IPv4 prefix as an IPv4-mapped 128-bit prefix.
fn ipv4_prefix(text: &str) -> Result<(u128, u8), String> {
    let (address, len) = text.split_once('/').ok_or_else(|| format!("'{text}' is not ADDRESS/LENGTH"))?;
    let address: std::net::Ipv4Addr = address.parse().map_err(|_| format!("'{address}' is not an IPv4 address"))?;
    let len: u8 = len.parse().ok().filter(|&l| l <= 32).ok_or_else(|| format!("'{len}' is not a prefix length"))?;
    Ok((ipv4_mapped(u32::from(address)), 96 + len))
}

pub fn ipv4_mapped(address: u32) -> u128 {
    (0xffffu128 << 32) | u128::from(address)
}

fn port_range(text: &str) -> Result<(u16, u16), String> {
    let (lo, hi) = text.split_once(':').ok_or_else(|| format!("'{text}' is not LO : HI"))?;
    let port = |s: &str| s.trim().parse::<u16>().map_err(|_| format!("'{}' is not a port", s.trim()));
    Ok((port(lo)?, port(hi)?))
}

fn hex_u8(text: &str) -> Result<u8, String> {
    u8::from_str_radix(text.trim().trim_start_matches("0x").trim_start_matches("0X"), 16).map_err(|_| format!("'{text}' is not a hex byte"))
}

#[cfg(test)]
pub(crate) mod tests;
