//! Rules that never match: the policy rules of a tenant's table each of whose rows a row of an
//! earlier policy rule covers (`isolane.policy.shadowed` warns about them).
//!
//! Instead of comparing all pairs, candidates come from hash indexes: a covering row's source
//! prefix is one of the (few) existing prefixes containing the later row's source, the same for
//! the destination, and its protocol and DSCP masks are among the (few) masks in use. Rows with
//! equal prefixes, protocol and DSCP form a group whose port ranges are compared.

use rustc_hash::{FxHashMap, FxHashSet};

use super::{prefix_mask, Rule, FRAME_RULE_DSCP};
/// `::ffff:0:0/96`, every IPv4 address.
const MAPPED_ANY: u128 = 0xFFFF << 32;

/// A policy rule that never matches, and the earliest policy rules covering its rows (ascending).
pub type Shadowed = (i32, Vec<i32>);

/// The policy rules of `rows` (in priority order; `policy_rules[i]` is row i's policy rule, a
/// policy rule's rows adjacent) none of whose rows can match. A group of rows with the same
/// prefixes, protocol and DSCP larger than `big_group` is indexed by port ranges instead of scanned.
pub fn shadowed_rules(rows: &[Rule], policy_rules: &[i32], big_group: usize) -> Vec<Shadowed> {
    if rows.len() < 2 {
        return Vec::new();
    }
    let index = CoverIndex::new(rows, big_group);
    let mut shadowed = Vec::new();
    let mut start = 0;
    while start < rows.len() {
        let end = start + policy_rules[start..].iter().take_while(|&&p| p == policy_rules[start]).count();
        if start > 0 {
            let covers: Option<FxHashSet<i32>> = (start..end).map(|r| index.first_cover(r, start).map(|e| policy_rules[e])).collect();
            if let Some(covers) = covers {
                let mut covers: Vec<i32> = covers.into_iter().collect();
                covers.sort_unstable();
                shadowed.push((policy_rules[start], covers));
            }
        }
        start = end;
    }
    shadowed
}

/// A row as the comparison sees it: effective prefixes, protocol and DSCP values under their masks.
fn effective(rule: &Rule) -> Rule {
    let mut rule = *rule;
    rule.proto &= rule.proto_mask;
    rule.dscp &= rule.dscp_mask;
    // A row whose one side is IPv4-only sees IPv4 packets only, so an "any" other side
    // effectively means any IPv4 address.
    if ipv4_only(rule.src, rule.src_len) && contains_ipv4(rule.dst, rule.dst_len) {
        (rule.dst, rule.dst_len) = (MAPPED_ANY, 96);
    }
    if ipv4_only(rule.dst, rule.dst_len) && contains_ipv4(rule.src, rule.src_len) {
        (rule.src, rule.src_len) = (MAPPED_ANY, 96);
    }
    rule
}

fn ipv4_only(address: u128, len: u8) -> bool {
    len >= 96 && address >> 32 == 0xFFFF
}

fn contains_ipv4(address: u128, len: u8) -> bool {
    len < 96 && MAPPED_ANY & prefix_mask(len) == address
}

fn ports_cover(earlier: &Rule, later: &Rule) -> bool {
    PortBounds::of(earlier).contain(later)
}

/// One side's distinct prefixes, each with the existing prefixes containing it (itself included).
struct Prefixes {
    of_row: Vec<u32>,
    ancestors: Vec<Vec<u32>>,
}

impl Prefixes {
    fn new(sides: impl Iterator<Item = (u8, u128)>) -> Prefixes {
        let mut ids: FxHashMap<(u8, u128), u32> = FxHashMap::default();
        let mut distinct = Vec::new();
        let of_row = sides
            .map(|prefix| {
                *ids.entry(prefix).or_insert_with(|| {
                    distinct.push(prefix);
                    (distinct.len() - 1) as u32
                })
            })
            .collect();
        let mut lengths: Vec<u8> = distinct.iter().map(|&(len, _)| len).collect();
        lengths.sort_unstable();
        lengths.dedup();
        let ancestors = distinct
            .iter()
            .map(|&(len, value)| lengths.iter().take_while(|&&l| l <= len).filter_map(|&l| ids.get(&(l, value & prefix_mask(l))).copied()).collect())
            .collect();
        Prefixes { of_row, ancestors }
    }

    fn containing(&self, row: usize) -> &[u32] {
        &self.ancestors[self.of_row[row] as usize]
    }
}

/// Rows alike in everything but ports: (source prefix, destination prefix, protocol mask and
/// value, DSCP mask and value).
type GroupKey = (u32, u32, u8, u8, u8, u8);

/// A group's rows in order, and for a big group its distinct port ranges, each with its earliest
/// row (a later row with the same ports covers nothing the earliest does not).
struct Group {
    members: Vec<u32>,
    ports: Option<PortIndex>,
}

/// Distinct port ranges in trees of their bounds: those with one destination port by that port
/// (they can cover only rows of that one port), the others in one tree.
struct PortIndex {
    by_dst_port: FxHashMap<u16, RangeTree>,
    dst_ranges: RangeTree,
}

/// Rows in ascending order as the leaves of a complete binary tree whose every node holds the
/// widest port bounds below it, so that the search for the first row covering another skips each
/// subtree whose bounds cannot cover it (one with a destination range ending too early, say).
struct RangeTree {
    rows: Vec<u32>,
    bounds: Vec<PortBounds>,
    leaves: usize,
}

/// The lowest low and highest high ends of some rows' source and destination port ranges.
#[derive(Clone, Copy)]
struct PortBounds {
    src: (u16, u16),
    dst: (u16, u16),
}

struct CoverIndex {
    rows: Vec<Rule>,
    src: Prefixes,
    dst: Prefixes,
    prefix_pairs: FxHashSet<(u32, u32)>,
    proto_masks: Vec<u8>,
    dscp_masks: Vec<u8>,
    groups: FxHashMap<GroupKey, Group>,
}

impl CoverIndex {
    fn new(rows: &[Rule], big_group: usize) -> CoverIndex {
        let rows: Vec<Rule> = rows.iter().map(effective).collect();
        let src = Prefixes::new(rows.iter().map(|r| (r.src_len, r.src)));
        let dst = Prefixes::new(rows.iter().map(|r| (r.dst_len, r.dst)));
        let mut groups: FxHashMap<GroupKey, Group> = FxHashMap::default();
        let mut prefix_pairs = FxHashSet::default();
        for (i, row) in rows.iter().enumerate() {
            let (s, d) = (src.of_row[i], dst.of_row[i]);
            prefix_pairs.insert((s, d));
            let key = (s, d, row.proto_mask, row.proto, row.dscp_mask, row.dscp);
            groups.entry(key).or_insert_with(|| Group { members: Vec::new(), ports: None }).members.push(i as u32);
        }
        for group in groups.values_mut().filter(|g| g.members.len() > big_group) {
            group.ports = Some(PortIndex::new(&rows, &group.members));
        }
        let distinct = |values: Vec<u8>| -> Vec<u8> { values.into_iter().collect::<std::collections::BTreeSet<u8>>().into_iter().collect() };
        let proto_masks = distinct(rows.iter().map(|r| r.proto_mask).collect());
        let dscp_masks = distinct(rows.iter().map(|r| r.dscp_mask).collect());
        CoverIndex { rows, src, dst, prefix_pairs, proto_masks, dscp_masks, groups }
    }

    /// The earliest row before `limit` covering row `r`.
    fn first_cover(&self, r: usize, limit: usize) -> Option<usize> {
        let row = &self.rows[r];
        let mut best = limit;
        for &s in self.src.containing(r) {
            for &d in self.dst.containing(r).iter().filter(|&&d| self.prefix_pairs.contains(&(s, d))) {
                for &pm in self.proto_masks.iter().filter(|&&pm| pm & !row.proto_mask == 0) {
                    for &dm in self.dscp_masks.iter().filter(|&&dm| dm & !row.dscp_mask == 0 && (dm ^ row.dscp_mask) & FRAME_RULE_DSCP == 0) {
                        if let Some(group) = self.groups.get(&(s, d, pm, row.proto & pm, dm, row.dscp & dm)) {
                            best = group.first_cover(&self.rows, row, best);
                        }
                    }
                }
            }
        }
        (best < limit).then_some(best)
    }
}

impl Group {
    /// The earliest member before `before` whose ports cover `row`'s, or `before`.
    fn first_cover(&self, rows: &[Rule], row: &Rule, before: usize) -> usize {
        let Some(ports) = &self.ports else {
            return earliest_covering(rows, &self.members, row, before);
        };
        let in_ranges = ports.dst_ranges.first_cover(row, before);
        match ports.by_dst_port.get(&row.dst_ports.0).filter(|_| row.dst_ports.0 == row.dst_ports.1) {
            Some(one_port) => one_port.first_cover(row, in_ranges),
            None => in_ranges,
        }
    }
}

/// The first of `candidates` (ascending) before `before` whose ports cover `row`'s, or `before`.
fn earliest_covering(rows: &[Rule], candidates: &[u32], row: &Rule, before: usize) -> usize {
    candidates.iter().map(|&e| e as usize).take_while(|&e| e < before).find(|&e| ports_cover(&rows[e], row)).unwrap_or(before)
}

impl PortIndex {
    fn new(rows: &[Rule], members: &[u32]) -> PortIndex {
        let mut seen = FxHashSet::default();
        let mut by_dst_port: FxHashMap<u16, Vec<u32>> = FxHashMap::default();
        let mut dst_ranges = Vec::new();
        for &e in members {
            let row = &rows[e as usize];
            if !seen.insert((row.src_ports, row.dst_ports)) {
                continue;
            }
            match row.dst_ports {
                (lo, hi) if lo == hi => by_dst_port.entry(lo).or_default().push(e),
                _ => dst_ranges.push(e),
            }
        }
        let by_dst_port = by_dst_port.into_iter().map(|(port, members)| (port, RangeTree::new(rows, members))).collect();
        PortIndex { by_dst_port, dst_ranges: RangeTree::new(rows, dst_ranges) }
    }
}

impl PortBounds {
    /// Bounds that cover no range (the padding leaves').
    const NONE: PortBounds = PortBounds { src: (u16::MAX, 0), dst: (u16::MAX, 0) };

    fn of(row: &Rule) -> PortBounds {
        PortBounds { src: row.src_ports, dst: row.dst_ports }
    }

    fn union(self, other: PortBounds) -> PortBounds {
        let widest = |a: (u16, u16), b: (u16, u16)| (a.0.min(b.0), a.1.max(b.1));
        PortBounds { src: widest(self.src, other.src), dst: widest(self.dst, other.dst) }
    }

    /// Whether `row`'s port ranges lie within these bounds.
    fn contain(&self, row: &Rule) -> bool {
        self.src.0 <= row.src_ports.0 && self.src.1 >= row.src_ports.1 && self.dst.0 <= row.dst_ports.0 && self.dst.1 >= row.dst_ports.1
    }
}

impl RangeTree {
    fn new(rows: &[Rule], members: Vec<u32>) -> RangeTree {
        let leaves = members.len().next_power_of_two();
        let mut bounds = vec![PortBounds::NONE; 2 * leaves];
        for (leaf, &e) in members.iter().enumerate() {
            bounds[leaves + leaf] = PortBounds::of(&rows[e as usize]);
        }
        for node in (1..leaves).rev() {
            bounds[node] = bounds[2 * node].union(bounds[2 * node + 1]);
        }
        RangeTree { rows: members, bounds, leaves }
    }

    /// The first row before `before` whose ports cover `row`'s, or `before`.
    fn first_cover(&self, row: &Rule, before: usize) -> usize {
        self.search(1, 0, self.leaves, row, before).unwrap_or(before)
    }

    /// The search in node `node`, whose leaves start at `first` and number `width`.
    fn search(&self, node: usize, first: usize, width: usize, row: &Rule, before: usize) -> Option<usize> {
        if first >= self.rows.len() || self.rows[first] as usize >= before || !self.bounds[node].contain(row) {
            return None;
        }
        if width == 1 {
            return Some(self.rows[first] as usize); // a leaf's bounds are its row's ports
        }
        let half = width / 2;
        self.search(2 * node, first, half, row, before).or_else(|| self.search(2 * node + 1, first + half, half, row, before))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::classify::ipv4_mapped;
    use proptest::prelude::*;

    fn v4(address: [u8; 4], len: u8) -> (u128, u8) {
        (ipv4_mapped(u32::from_be_bytes(address)), 96 + len)
    }

    fn to(dst: (u128, u8), port: (u16, u16)) -> Rule {
        Rule { dst: dst.0, dst_len: dst.1, dst_ports: port, ..Rule::ANY }
    }

    #[test]
    fn a_rule_is_shadowed_only_when_every_row_is_covered_by_the_earliest_covering_rules() {
        let net = v4([10, 0, 0, 0], 8);
        let host = v4([10, 1, 2, 3], 32);
        let rows = [to(net, (80, 80)), to(host, (0, 1023)), to(host, (80, 80)), to(host, (443, 443)), to(host, (80, 80)), to(host, (2000, 2000))];
        // Policy rule 2 has rows for ports 80 and 443: 1 covers both (0 covers only 80, but 0 is
        // the earliest for 80). Policy rule 3 has a row for port 2000 that nothing covers.
        let found = shadowed_rules(&rows, &[0, 1, 2, 2, 3, 3], usize::MAX);
        assert_eq!(found, vec![(2, vec![0, 1])]);
        assert_eq!(shadowed_rules(&rows, &[0, 1, 2, 2, 3, 3], 0), found, "big groups indexed by port give the same answer");
    }

    #[test]
    fn an_any_side_is_ipv4_only_beside_an_ipv4_side_and_frames_cover_frames_only() {
        let ipv4_any = Rule { src: MAPPED_ANY, src_len: 96, ..Rule::ANY };
        let to_host = to(v4([10, 1, 2, 3], 32), (0, u16::MAX));
        assert_eq!(shadowed_rules(&[ipv4_any, to_host], &[0, 1], 48), vec![(1, vec![0])]);
        let ipv6_host = Rule { dst: 0x2001_0db8 << 96, dst_len: 128, ..Rule::ANY };
        assert_eq!(shadowed_rules(&[ipv4_any, ipv6_host], &[0, 1], 48), vec![]);
        let frame = Rule { src_ports: (0x88cc, 0x88cc), dscp: FRAME_RULE_DSCP, dscp_mask: FRAME_RULE_DSCP, ..Rule::ANY };
        assert_eq!(shadowed_rules(&[Rule::ANY, frame], &[0, 1], 48), vec![]);
        assert_eq!(shadowed_rules(&[frame, frame, Rule::ANY], &[0, 1, 2], 48), vec![(1, vec![0])]);
    }

    proptest! {
        #[test]
        fn the_range_tree_finds_the_first_covering_row_as_a_scan_does(
            ranges in prop::collection::vec(((0u16..8, 0u16..8), (0u16..40, 0u16..40)), 1..70),
            before in 0usize..80,
        ) {
            let ordered = |(a, b): (u16, u16)| (a.min(b), a.max(b));
            let rows: Vec<Rule> = ranges.iter().map(|&(src, dst)| Rule { src_ports: ordered(src), dst_ports: ordered(dst), ..Rule::ANY }).collect();
            let members: Vec<u32> = (0..rows.len() as u32).collect();
            let tree = RangeTree::new(&rows, members.clone());
            for row in &rows {
                prop_assert_eq!(tree.first_cover(row, before), earliest_covering(&rows, &members, row, before));
            }
        }
    }
}
