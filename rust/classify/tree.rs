//! Decision trees over IPv4 5-tuples: the part of a rule table that looks up fast.
//!
//! HiCuts-style multi-way cuts on bit boundaries: a node takes a few bits of one field and
//! indexes its children with them (a subtraction, a shift and a min: no search), until few
//! enough rules are left to scan in rank order. A node cuts within a window, the smallest
//! aligned block that holds every rule narrow in that field, so that the bits those rules share
//! are skipped rather than cut one node at a time; values outside the window go to one more
//! child, which holds only the rules wide enough to reach them. Rules that are wide in a field
//! would be copied into every cut of it, so the rules are first split, as EffiCuts and CutSplit
//! do, by which address they pin down, and each group gets its own tree.
//!
//! Trees are immutable once built and hold every rule they were built from (none is dropped as
//! hidden behind another, since that one may be removed later): the rule table marks removed
//! rules dead and keeps new rules in its tuple space until the next rebuild.

use super::{Key, Rule};
use crate::memory::prefetch;
use bytemuck::{Pod, Zeroable};
use rustc_hash::FxHashMap;
use std::hint::select_unpredictable;
use std::sync::Arc;

/// Fields, in cut order: source, destination, source port, destination port, protocol.
const FIELDS: usize = 5;
/// Rules a leaf may hold before it is cut. Few: a leaf's scan stops at a place no branch
/// predictor guesses (~20 cycles lost), while one more level of cuts is one load, usually
/// cached (eight a leaf: acl1_10k 20.9 Mpps; two: 26.1, tables 1.6 -> 1.8 MB).
const LEAF_RULES: usize = 2;
/// The most bits one node takes (at most 256 children).
const MAX_CUT_BITS: u32 = 8;
/// How much copying a cut may cause: rule copies in its children plus the children themselves
/// stay under this many times the node's rules (HiCuts' space factor).
const SPACE_FACTOR: usize = 4;
/// Bytes the trees may take per rule (plus [`SPARE_BYTES`]): past it, nodes stop being cut
/// and leaves grow instead, so a rule set that copies badly costs lookup speed, not memory.
const BYTES_PER_RULE: usize = 256;
const SPARE_BYTES: usize = 2 << 20;
/// A source or destination prefix at least this long (of 32) counts as pinned down.
const SPECIFIC_PREFIX: u8 = 16;

/// A child reference with this bit set is a leaf: the arena block of its first rule; without
/// it, a node: the arena word its header starts at.
const LEAF: u32 = 1 << 31;
/// Trees a forest holds at most (one per rule group, see [`group`]).
const MAX_TREES: usize = 3;
/// Tree ids are ranks in order; no rule has this one, which ends every leaf.
pub const NO_RULE: u32 = (1 << 31) - 1;
/// Set in the id of a leaf's last rule (ids are below [`NO_RULE`]): a leaf needs no end marker.
const LAST_IN_LEAF: u32 = 1 << 31;

/// A packet's fields as the trees index them.
#[derive(Debug, Clone, Copy, Default)]
pub struct Fields {
    values: [u32; FIELDS],
    dscp: u8,
}

impl Fields {
    /// The IPv4 fields of `key`, if both its addresses are IPv4(-mapped).
    #[inline]
    pub fn of(key: &Key) -> Option<Fields> {
        Fields::new(key.src, key.dst, key.src_port, key.dst_port, key.proto, key.dscp)
    }

    /// The fields of a packet with these addresses, if both are IPv4(-mapped).
    #[inline]
    pub fn new(src: u128, dst: u128, src_port: u16, dst_port: u16, proto: u8, dscp: u8) -> Option<Fields> {
        let mapped = |address: u128| (address >> 32 == 0xffff).then_some(address as u32);
        let values = [mapped(src)?, mapped(dst)?, u32::from(src_port), u32::from(dst_port), u32::from(proto)];
        Some(Fields { values, dscp })
    }

    /// The key these fields are of.
    #[inline]
    pub fn key(&self) -> Key {
        let [src, dst, src_port, dst_port, proto] = self.values;
        Key {
            src: super::ipv4_mapped(src),
            dst: super::ipv4_mapped(dst),
            src_port: src_port as u16,
            dst_port: dst_port as u16,
            proto: proto as u8,
            dscp: self.dscp,
        }
    }
}

/// A rule as ranges over the IPv4 fields (`value - low <= span` is one compare), 32 bytes.
#[derive(Debug, Clone, Copy, Pod, Zeroable)]
#[repr(C, align(32))]
struct LeafRule {
    src: u32,
    src_span: u32,
    dst: u32,
    dst_span: u32,
    src_port: u16,
    src_port_span: u16,
    dst_port: u16,
    dst_port_span: u16,
    proto: u8,
    proto_mask: u8,
    dscp: u8,
    dscp_mask: u8,
    id: u32,
}

impl LeafRule {
    /// The only rule of the empty leaf: its id stops every scan.
    const NONE: LeafRule = LeafRule {
        src: 0,
        src_span: 0,
        dst: 0,
        dst_span: 0,
        src_port: 0,
        src_port_span: 0,
        dst_port: 0,
        dst_port_span: 0,
        proto: 0,
        proto_mask: 0,
        dscp: 0,
        dscp_mask: 0,
        id: NO_RULE | LAST_IN_LEAF,
    };

    #[inline]
    fn matches(&self, fields: &Fields) -> bool {
        let [src, dst, src_port, dst_port, proto] = fields.values;
        (src.wrapping_sub(self.src) <= self.src_span)
            & (dst.wrapping_sub(self.dst) <= self.dst_span)
            & ((src_port as u16).wrapping_sub(self.src_port) <= self.src_port_span)
            & ((dst_port as u16).wrapping_sub(self.dst_port) <= self.dst_port_span)
            & ((proto as u8 ^ self.proto) & self.proto_mask == 0)
            & ((fields.dscp ^ self.dscp) & self.dscp_mask == 0)
    }
}

/// A rule's IPv4 view: the ranges the trees cut on. (A partial protocol mask or a DSCP makes
/// a rule narrower than its ranges; leaves check every field.)
#[derive(Debug, Clone, Copy)]
struct Ranges {
    field: [(u32, u32); FIELDS],
}

/// The IPv4 part of a rule (`None` if it cannot match an IPv4 packet) as ranges.
fn ipv4_ranges(rule: &Rule) -> Option<Ranges> {
    let (src_low, src_high) = ipv4_range(rule.src, rule.src_len)?;
    let (dst_low, dst_high) = ipv4_range(rule.dst, rule.dst_len)?;
    let proto = match rule.proto_mask {
        0xff => (u32::from(rule.proto), u32::from(rule.proto)),
        _ => (0, 255),
    };
    let ports = |(low, high): (u16, u16)| (u32::from(low), u32::from(high));
    Some(Ranges { field: [(src_low, src_high), (dst_low, dst_high), ports(rule.src_ports), ports(rule.dst_ports), proto] })
}

/// The IPv4 addresses a 128-bit prefix holds, as a range, if it holds any.
fn ipv4_range(prefix: u128, len: u8) -> Option<(u32, u32)> {
    let mapped = super::ipv4_mapped(0);
    if len <= 96 {
        return ((prefix ^ mapped) & super::prefix_mask(len) == 0).then_some((0, u32::MAX));
    }
    if (prefix ^ mapped) >> 32 != 0 {
        return None;
    }
    let host_bits = 128 - u32::from(len);
    let low = (prefix as u32) & !((1u64 << host_bits) - 1) as u32;
    Some((low, low | ((1u64 << host_bits) - 1) as u32))
}

/// Whether a rule's IPv4 part is every rule's business: true when it can match IPv4 packets.
pub fn matches_ipv4(rule: &Rule) -> bool {
    ipv4_ranges(rule).is_some()
}

#[derive(Debug, Clone, Copy, Default)]
struct Node {
    /// The window the node cuts: `2^shift`-sized cells from `low` on, `mask + 1` of them;
    /// values outside it go to one more child (the rules wide enough to reach them).
    low: u32,
    /// Where this node's children start.
    base: u32,
    mask: u16,
    field: u8,
    shift: u8,
}

impl Node {
    /// Arena words a node takes: its header (`low`, then `mask`, `field` and `shift` packed),
    /// then its children.
    const HEADER_WORDS: usize = 2;

    #[inline]
    fn child(&self, fields: &Fields) -> usize {
        let offset = fields.values[usize::from(self.field)].wrapping_sub(self.low) >> self.shift;
        (self.base + offset.min(u32::from(self.mask) + 1)) as usize
    }

    fn children(&self) -> usize {
        usize::from(self.mask) + 2
    }

    fn header(&self) -> [u32; 2] {
        [self.low, u32::from(self.mask) | u32::from(self.field) << 16 | u32::from(self.shift) << 24]
    }

    /// The node whose header is at word `at` of the arena.
    #[inline]
    fn at(words: &[u32], at: usize) -> Node {
        let packed = words[at + 1];
        Node { low: words[at], base: (at + Node::HEADER_WORDS) as u32, mask: packed as u16, field: (packed >> 16) as u8, shift: (packed >> 24) as u8 }
    }
}

/// A tree's entry, kept in the forest itself (no load to find it): its root node, or its only
/// leaf, whose reference (`LEAF` set) is then the node's `base` (no word beside the node tells
/// the two apart: 16 bytes a root, 8 bytes less a tenant in the data path's chunks).
#[derive(Debug, Clone, Copy, Default)]
struct Root {
    node: Node,
    /// The tree's best (smallest) id: a lookup skips the tree once it has a better match.
    best: u32,
}

impl Root {
    #[inline]
    fn is_leaf(&self) -> bool {
        self.node.base & LEAF != 0
    }

    #[inline]
    fn first_child(&self, words: &[u32], fields: &Fields) -> u32 {
        if self.is_leaf() {
            return self.node.base;
        }
        words[self.node.child(fields)]
    }
}

/// 32 bytes of the arena: one leaf rule, or eight words of node headers and child references.
#[derive(Debug, Clone, Copy, Default, Pod, Zeroable)]
#[repr(C, align(32))]
struct Block([u32; 8]);

/// Trees over rules numbered by rank order (ids `0..n`): a smaller id wins.
///
/// Every node and leaf is in one allocation (the arena), each node's children right after its
/// header, so that a step down a tree is one load where the parts are close; the roots are
/// inline. Cloning shares the arena.
#[derive(Debug, Clone)]
pub struct Forest {
    arena: Arc<[Block]>,
    roots: [Root; MAX_TREES],
    /// 32 bits, so that a tenant's data-path state, which holds a forest, fits in 112 bytes.
    trees: u32,
    /// The leaf with no rule (ends a walk that a better match made pointless).
    empty_leaf: u32,
}

/// No trees: every empty forest shares one empty arena (a small rule table has none, and an
/// arena each would be 32 bytes a tenant).
impl Default for Forest {
    fn default() -> Self {
        static EMPTY: std::sync::OnceLock<Arc<[Block]>> = std::sync::OnceLock::new();
        Forest { arena: Arc::clone(EMPTY.get_or_init(|| Arc::from([]))), roots: [Root::default(); MAX_TREES], trees: 0, empty_leaf: 0 }
    }
}

impl Forest {
    /// Builds trees over `rules` (which must all match IPv4: see [`matches_ipv4`]); a rule's id
    /// is its position.
    pub fn new(rules: &[Rule]) -> Forest {
        let ranges: Vec<Ranges> = rules.iter().map(|rule| ipv4_ranges(rule).expect("an IPv4 rule")).collect();
        let leaf_rules: Vec<LeafRule> = rules.iter().zip(&ranges).enumerate().map(|(id, (rule, r))| leaf_rule(rule, r, id as u32)).collect();
        let budget = BYTES_PER_RULE * rules.len() + SPARE_BYTES;
        let mut builder = Builder { ranges: &ranges, leaf_rules: &leaf_rules, draft: Draft::default(), leaf_of: FxHashMap::default(), budget };
        builder.draft.leaves.push(LeafRule::NONE); // the empty leaf, shared
        let mut groups: [Vec<u32>; MAX_TREES] = Default::default();
        for (id, rule) in rules.iter().enumerate() {
            groups[group(rule)].push(id as u32);
        }
        let mut roots = Vec::new();
        for ids in groups.into_iter().filter(|ids| !ids.is_empty()) {
            let best = ids[0];
            let region = [(0, u32::MAX), (0, u32::MAX), (0, 0xffff), (0, 0xffff), (0, 0xff)];
            roots.push((builder.build(ids, region, 0), best));
        }
        roots.sort_by_key(|&(_, best)| best);
        builder.draft.link(&roots)
    }

    /// The smallest id of a live rule matching `fields` below `bound`; `alive(id)` says whether
    /// a rule still counts.
    #[inline]
    pub fn lookup(&self, fields: &Fields, bound: u32, alive: impl Fn(u32) -> bool) -> u32 {
        let words: &[u32] = bytemuck::cast_slice(&self.arena);
        let mut best = bound;
        for root in &self.roots[..self.trees as usize] {
            if root.best >= best {
                break;
            }
            let mut child = root.first_child(words, fields);
            while child & LEAF == 0 {
                child = words[Node::at(words, child as usize).child(fields)];
            }
            best = self.scan_leaf(child, fields, best, &alive);
        }
        best
    }

    /// [`Forest::lookup`] for `N` packets at once, `best` holding each one's bound: every tree
    /// is walked by all of them in step, with no branch on any one packet's path, so that
    /// their loads overlap and only the group's deepest walk ends the loop unpredictably.
    #[inline]
    pub fn lookup_group<const N: usize>(&self, fields: &[Fields; N], best: &mut [u32; N], alive: impl Fn(u32) -> bool) {
        let words: &[u32] = bytemuck::cast_slice(&self.arena);
        for root in &self.roots[..self.trees as usize] {
            let mut child: [u32; N] = std::array::from_fn(|p| select_unpredictable(root.best < best[p], root.first_child(words, &fields[p]), self.empty_leaf));
            while child.iter().fold(LEAF, |all, &c| all & c) == 0 {
                for (child, fields) in child.iter_mut().zip(fields) {
                    // A packet at its leaf steps through the dummy node at word 0 and stays.
                    let at_leaf = *child & LEAF != 0;
                    let next = words[Node::at(words, select_unpredictable(at_leaf, 0, *child) as usize).child(fields)];
                    *child = select_unpredictable(at_leaf, *child, next);
                }
            }
            // Most keys end at the empty leaf (nothing there, or the tree skipped): scan only
            // the others, so that the scan's branches see leaves with rules.
            let mut pending = [0u8; N];
            let mut count = 0;
            for (p, &leaf) in child.iter().enumerate() {
                pending[count] = p as u8;
                count += usize::from(leaf != self.empty_leaf);
            }
            for &p in &pending[..count] {
                let p = usize::from(p);
                best[p] = self.scan_leaf(child[p], &fields[p], best[p], &alive);
            }
        }
    }

    /// Asks the cache for the first step of the first tree's walk, so that a batch can start
    /// it a few packets ahead.
    #[inline]
    pub fn prefetch(&self, fields: &Fields) {
        let Some(root) = self.roots[..self.trees as usize].first() else { return };
        if !root.is_leaf() {
            let words: &[u32] = bytemuck::cast_slice(&self.arena);
            if let Some(slot) = words.get(root.node.child(fields)) {
                prefetch(slot);
            }
        }
    }

    /// Asks the cache for the second step of the first tree's walk (the first should be
    /// there by now, from [`Forest::prefetch`]).
    #[inline]
    pub fn prefetch_second(&self, fields: &Fields) {
        let Some(root) = self.roots[..self.trees as usize].first() else { return };
        let words: &[u32] = bytemuck::cast_slice(&self.arena);
        let child = root.first_child(words, fields);
        let at = match child & LEAF {
            0 => child as usize,
            _ => (child & !LEAF) as usize * 8,
        };
        if let Some(word) = words.get(at) {
            prefetch(word);
        }
    }

    /// The first live rule of `leaf` that matches, or `best`.
    #[inline]
    fn scan_leaf(&self, leaf: u32, fields: &Fields, best: u32, alive: &impl Fn(u32) -> bool) -> u32 {
        let leaves: &[LeafRule] = bytemuck::cast_slice(&self.arena);
        let mut at = (leaf & !LEAF) as usize;
        loop {
            let rule = &leaves[at];
            let id = rule.id & !LAST_IN_LEAF;
            if (rule.matches(fields) & (id < best)) && alive(id) {
                return id;
            }
            // Past `best`, or the leaf's last rule (its flag puts it past any `best`).
            if rule.id >= best {
                return best;
            }
            at += 1;
        }
    }

    pub fn memory_bytes(&self) -> usize {
        std::mem::size_of_val(&*self.arena)
    }

    pub fn tree_count(&self) -> usize {
        self.trees as usize
    }
}

/// Trees as the builder grows them: nodes, children and leaves in separate lists, linked into
/// one arena at the end.
#[derive(Debug, Default)]
struct Draft {
    nodes: Vec<Node>,
    children: Vec<u32>,
    leaves: Vec<LeafRule>,
}

impl Draft {
    fn memory_bytes(&self) -> usize {
        self.nodes.len() * Node::HEADER_WORDS * 4 + self.children.len() * 4 + self.leaves.len() * std::mem::size_of::<LeafRule>()
    }

    /// The forest with these trees (`(child, best)` per root, best first): a dummy node (all
    /// zero: two children, both word 0), then each node's header followed by its children, in
    /// the order the nodes were made, then the leaves. Trees that are all leaves (a tenant's few
    /// rules) never step through a node, so they go without the dummy (a block of 32 B).
    fn link(self, roots: &[(u32, u32)]) -> Forest {
        const DUMMY_NODE_WORDS: usize = Node::HEADER_WORDS + 2;
        let mut node_words = Vec::with_capacity(self.nodes.len());
        let mut words = if self.nodes.is_empty() { 0 } else { DUMMY_NODE_WORDS };
        for node in &self.nodes {
            node_words.push(words as u32);
            words += Node::HEADER_WORDS + node.children();
        }
        let first_leaf = words.div_ceil(8);
        let relink = |child: u32| match child & LEAF {
            0 => node_words[child as usize],
            _ => LEAF | (first_leaf + (child & !LEAF) as usize) as u32,
        };
        let mut arena = vec![Block::default(); first_leaf + self.leaves.len()];
        let arena_words: &mut [u32] = bytemuck::cast_slice_mut(&mut arena);
        for (node, &at) in self.nodes.iter().zip(&node_words) {
            let at = at as usize;
            arena_words[at..at + Node::HEADER_WORDS].copy_from_slice(&node.header());
            let children = &self.children[node.base as usize..][..node.children()];
            for (slot, &child) in arena_words[at + Node::HEADER_WORDS..].iter_mut().zip(children) {
                *slot = relink(child);
            }
        }
        let leaf_blocks: &mut [LeafRule] = bytemuck::cast_slice_mut(&mut arena[first_leaf..]);
        leaf_blocks.copy_from_slice(&self.leaves);
        let mut forest = Forest { arena: arena.into(), trees: roots.len() as u32, empty_leaf: relink(LEAF), ..Forest::default() };
        let words: &[u32] = bytemuck::cast_slice(&forest.arena);
        for (root, &(child, best)) in forest.roots.iter_mut().zip(roots) {
            let child = relink(child);
            let node = if child & LEAF == 0 { Node::at(words, child as usize) } else { Node { base: child, ..Node::default() } };
            *root = Root { node, best };
        }
        forest
    }
}

/// Which tree a rule goes to: by the address it pins down (destination first), so that cutting
/// that address does not copy the rule.
fn group(rule: &Rule) -> usize {
    let specific = |len: u8| len >= 96 + SPECIFIC_PREFIX;
    match (specific(rule.dst_len), specific(rule.src_len)) {
        (true, _) => 0,
        (false, true) => 1,
        (false, false) => 2,
    }
}

fn leaf_rule(rule: &Rule, ranges: &Ranges, id: u32) -> LeafRule {
    let [src, dst, src_port, dst_port, _] = ranges.field;
    LeafRule {
        src: src.0,
        src_span: src.1 - src.0,
        dst: dst.0,
        dst_span: dst.1 - dst.0,
        src_port: src_port.0 as u16,
        src_port_span: (src_port.1 - src_port.0) as u16,
        dst_port: dst_port.0 as u16,
        dst_port_span: (dst_port.1 - dst_port.0) as u16,
        proto: rule.proto,
        proto_mask: rule.proto_mask,
        dscp: rule.dscp,
        dscp_mask: rule.dscp_mask,
        id,
    }
}

type Region = [(u32, u32); FIELDS];

fn clamp((low, high): (u32, u32), (region_low, region_high): (u32, u32)) -> (u32, u32) {
    (low.max(region_low), high.min(region_high))
}

struct Builder<'a> {
    ranges: &'a [Ranges],
    leaf_rules: &'a [LeafRule],
    draft: Draft,
    /// Leaves are plain rule lists checked in full, so equal lists share one leaf.
    leaf_of: FxHashMap<Vec<u32>, u32>,
    /// Bytes the trees may grow to.
    budget: usize,
}

/// How a node cuts: `bits` bits of `field` within `window` (the smallest aligned block that
/// holds every rule narrower than the region there), the bits the window fixes skipped.
#[derive(Debug, Clone, Copy)]
struct Cut {
    field: usize,
    window: (u32, u32),
    bits: u32,
    shift: u32,
    largest_child: usize,
    copies: usize,
}

impl Cut {
    fn cells(&self) -> usize {
        1 << self.bits
    }
}

impl Builder<'_> {
    /// The subtree for rules `ids` (in id order) within `region`; returns its child reference.
    fn build(&mut self, ids: Vec<u32>, region: Region, depth: u32) -> u32 {
        if ids.len() <= LEAF_RULES || depth >= 32 || self.draft.memory_bytes() > self.budget {
            return self.leaf(ids);
        }
        let Some(cut) = self.best_cut(&ids, &region) else { return self.leaf(ids) };
        let node = self.draft.nodes.len() as u32;
        let base = self.draft.children.len() as u32;
        let mask = (cut.cells() - 1) as u16;
        self.draft.nodes.push(Node { low: cut.window.0, base, mask, field: cut.field as u8, shift: cut.shift as u8 });
        self.draft.children.resize(self.draft.children.len() + cut.cells() + 1, LEAF);
        let mut lists: Vec<Vec<u32>> = vec![Vec::new(); cut.cells() + 1];
        for &id in &ids {
            let (inside, outside) = self.cells_of(id, &region, &cut);
            for list in inside.map_or(&mut [][..], |(first, last)| &mut lists[first..=last]) {
                list.push(id);
            }
            if outside {
                lists[cut.cells()].push(id);
            }
        }
        for (cell, list) in lists.into_iter().enumerate() {
            let mut sub = region;
            if cell < cut.cells() {
                let cell_low = u64::from(cut.window.0) + ((cell as u64) << cut.shift);
                sub[cut.field] = (cell_low as u32, (cell_low + (1u64 << cut.shift) - 1) as u32);
            } // values outside the window: the region less the window, kept whole (a superset)
            let child = self.build(list, sub, depth + 1);
            self.draft.children[base as usize + cell] = child;
        }
        node
    }

    fn leaf(&mut self, ids: Vec<u32>) -> u32 {
        if ids.is_empty() {
            return LEAF; // the shared empty leaf at 0
        }
        if let Some(&leaf) = self.leaf_of.get(&ids) {
            return leaf;
        }
        let leaf = LEAF | self.draft.leaves.len() as u32;
        self.draft.leaves.extend(ids.iter().map(|&id| self.leaf_rules[id as usize]));
        if let Some(last) = self.draft.leaves.last_mut() {
            last.id |= LAST_IN_LEAF;
        }
        self.leaf_of.insert(ids, leaf);
        leaf
    }

    /// The cells of `cut`'s window a rule falls into (clamped to the region), and whether it
    /// reaches outside the window.
    fn cells_of(&self, id: u32, region: &Region, cut: &Cut) -> (Option<(usize, usize)>, bool) {
        let (low, high) = clamp(self.ranges[id as usize].field[cut.field], region[cut.field]);
        let (window_low, window_high) = cut.window;
        let outside = low < window_low || high > window_high;
        let (low, high) = (low.max(window_low), high.min(window_high));
        let inside = (low <= high).then(|| (((low - window_low) >> cut.shift) as usize, ((high - window_low) >> cut.shift) as usize));
        (inside, outside)
    }

    /// The cut that leaves the smallest largest child within the space allowance, if any
    /// cut separates the rules at all.
    fn best_cut(&self, ids: &[u32], region: &Region) -> Option<Cut> {
        let allowance = SPACE_FACTOR * ids.len();
        let mut best: Option<Cut> = None;
        let mut counts = Vec::new();
        for field in 0..FIELDS {
            let Some(window) = self.window(ids, region[field], field) else { continue };
            let window_bits = 64 - (u64::from(window.1) - u64::from(window.0)).leading_zeros();
            let first_bits = if window == region[field] { 1 } else { 0 };
            for bits in first_bits..=window_bits.min(MAX_CUT_BITS) {
                let probe = Cut { field, window, bits, shift: window_bits - bits, largest_child: 0, copies: 0 };
                counts.clear();
                counts.resize(probe.cells() + 2, 0i64);
                let (mut copies, mut outside) = (0, 0);
                for &id in ids {
                    let (inside, beyond) = self.cells_of(id, region, &probe);
                    if let Some((first, last)) = inside {
                        copies += last - first + 1;
                        counts[first] += 1;
                        counts[last + 1] -= 1;
                    }
                    outside += usize::from(beyond);
                }
                if bits > first_bits && copies + outside + probe.cells() > allowance {
                    break;
                }
                let mut running = 0;
                let largest_inside = counts.iter().map(|c| {
                    running += c;
                    running
                });
                let largest_child = (largest_inside.max().unwrap_or(0) as usize).max(outside);
                let cut = Cut { largest_child, copies: copies + outside, ..probe };
                let better = |b: &Cut| (cut.largest_child, cut.copies) < (b.largest_child, b.copies);
                if largest_child < ids.len() && best.as_ref().is_none_or(better) {
                    best = Some(cut);
                }
            }
        }
        best
    }

    /// The smallest aligned block of `field` holding every rule narrower than the region
    /// there; `None` if no rule is (the field cannot tell these rules apart).
    fn window(&self, ids: &[u32], region: (u32, u32), field: usize) -> Option<(u32, u32)> {
        let narrow = ids.iter().map(|&id| clamp(self.ranges[id as usize].field[field], region)).filter(|&range| range != region);
        let (low, high) = narrow.fold(None, |span: Option<(u32, u32)>, (low, high)| Some(span.map_or((low, high), |(l, h)| (l.min(low), h.max(high)))))?;
        let free = (1u64 << (32 - (low ^ high).leading_zeros())) - 1;
        Some((low & !free as u32, low | free as u32))
    }
}
