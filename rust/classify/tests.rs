//! The tables against a plainly written first-match scan, on random rule sets with random
//! updates, and against ClassBench's labelled traces.

use super::*;
use proptest::prelude::*;

fn brute_force(rules: &[Rule], key: &Key) -> Option<usize> {
    rules.iter().position(|rule| rule.matches(key))
}

fn v4(address: [u8; 4]) -> u128 {
    ipv4_mapped(u32::from_be_bytes(address))
}

/// The index of a table of more than [`SMALL_RULES`] rules.
fn indexed(table: &RuleTable) -> &Indexed {
    table.indexed.as_deref().expect("an indexed table")
}

#[test]
fn first_match_wins_and_wildcards_match_everything() {
    let web = Rule { dst: v4([10, 0, 0, 0]), dst_len: 104, dst_ports: (80, 80), proto: 6, proto_mask: 0xff, ..Rule::ANY };
    let subnet = Rule { dst: v4([10, 0, 0, 0]), dst_len: 104, ..Rule::ANY };
    let table = RuleTable::new(vec![web, subnet, Rule::ANY]).unwrap();
    let key = |dst, port, proto| Key { dst: v4(dst), dst_port: port, proto, ..Key::default() };
    assert_eq!(table.lookup(&key([10, 1, 2, 3], 80, 6)), Some(0));
    assert_eq!(table.lookup(&key([10, 1, 2, 3], 81, 6)), Some(1));
    assert_eq!(table.lookup(&key([11, 1, 2, 3], 80, 6)), Some(2));
    assert_eq!(RuleTable::new(vec![web]).unwrap().lookup(&key([11, 0, 0, 0], 80, 6)), None);
}

#[test]
fn updates_shift_later_rules() {
    let a = Rule { src: v4([1, 0, 0, 0]), src_len: 104, ..Rule::ANY };
    let b = Rule { src: v4([1, 2, 0, 0]), src_len: 112, ..Rule::ANY };
    let mut table = RuleTable::new(vec![a, Rule::ANY]).unwrap();
    let key = Key { src: v4([1, 2, 3, 4]), ..Key::default() };
    assert_eq!(table.lookup(&key), Some(0));
    table.insert(0, b).unwrap();
    assert_eq!(table.lookup(&key), Some(0));
    assert_eq!(table.rules().nth(1), Some(a));
    table.remove(0).unwrap();
    table.remove(0).unwrap();
    assert_eq!(table.lookup(&key), Some(0));
    assert_eq!(table.len(), 1);
    assert!(table.insert(5, a).is_err() && table.remove(3).is_err());
}

#[test]
fn many_inserts_at_one_place_use_up_the_rank_gap_and_still_order_right() {
    let rule = |port: u16| Rule { dst_ports: (port, port), ..Rule::ANY };
    // Indexed from the start (more than SMALL_RULES rules), the inserts all going between the first two.
    let mut reference: Vec<Rule> = [rule(1)].into_iter().chain((0..SMALL_RULES as u16).map(|k| rule(60_000 + k))).chain([Rule::ANY]).collect();
    let mut table = RuleTable::new(reference.clone()).unwrap();
    table.rebuild_elsewhere(); // so that only running out of ranks could rebuild the trees
    for port in 2..42 {
        table.insert(1, rule(port)).unwrap();
        reference.insert(1, rule(port));
        let shared = table.clone(); // clones share buckets; editing one must not change the other
        table.insert(0, rule(1000)).unwrap();
        table.remove(0).unwrap();
        for probe in [1, 2, port, port / 2, 1000, 5000] {
            let key = Key { dst_port: probe, ..Key::default() };
            assert_eq!(table.lookup(&key), brute_force(&reference, &key), "port {probe} after {port}");
            assert_eq!(shared.lookup(&key), brute_force(&reference, &key), "clone, port {probe} after {port}");
        }
    }
    // Ranks were respread (40 inserts at one place), but the trees were never rebuilt.
    assert_eq!(indexed(&table).fresh.len(), 40);
}

/// A rule with an IPv4 prefix on one side and none on the other (a policy rule that names only
/// `dst: 10.0.0.0/24`) is an IPv4 rule: it stays out of the IPv6 tuple space, yet still matches a
/// key whose other address is IPv6 (an IPv6 packet may carry an IPv4-mapped address).
#[test]
fn ipv4_rules_with_an_open_side_stay_out_of_ipv6_tuple_space_and_still_match_ipv6_keys() {
    let web = |third: u8| Rule { dst: v4([10, 0, third, 0]), dst_len: 120, dst_ports: (80, 80), ..Rule::ANY };
    let ipv6_src = Rule { src: 0x2001_0db8u128 << 96, src_len: 32, ..Rule::ANY };
    // Rules after the catch-all (never matched) make the table large enough to be indexed.
    let rules: Vec<Rule> = [web(1), ipv6_src, web(2), Rule::ANY].into_iter().chain((100..100 + SMALL_RULES as u8).map(web)).collect();
    let table = RuleTable::new(rules.clone()).unwrap();
    assert_eq!(indexed(&table).ipv6.len(), 1, "only the rule with no IPv4 address on a side");
    let ipv6 = (0x2001_0db8u128 << 96) | 7;
    let mixed = |src, third| Key { src, dst: v4([10, 0, third, 9]), dst_port: 80, ..Key::default() };
    for key in [mixed(ipv6, 2), mixed(ipv6 ^ (1 << 100), 2), mixed(ipv6, 3), mixed(v4([1, 2, 3, 4]), 1), Key { src: ipv6, dst: ipv6, ..Key::default() }] {
        assert_eq!(table.lookup(&key), brute_force(&rules, &key), "{key:x?}");
    }
    assert_eq!(table.lookup(&mixed(ipv6 ^ (1 << 100), 2)), Some(2), "past the IPv6 rule, to an IPv4 one");
}

/// Inserts piling up at a few places, some IPv6 rules among them, respread only the rules
/// inserted there since the build: the trees and every other rank stay as they were.
#[test]
fn respreading_moves_only_the_run_of_inserted_rules() {
    let port_rule = |port: u16| Rule { dst_ports: (port, port), ..Rule::ANY };
    let ipv6_rule = |port: u16| Rule { dst: 0x2001_0db8u128 << 96, dst_len: 32, dst_ports: (port, port), ..Rule::ANY };
    let mut reference: Vec<Rule> = (0..50).map(port_rule).collect();
    let mut table = RuleTable::new(reference.clone()).unwrap();
    table.rebuild_elsewhere();
    let (trees_before, anchors_before) = (indexed(&table).tree_ranks.clone(), table.rows.iter().map(|row| row.rank).collect::<Vec<_>>());
    for n in 0..120u16 {
        // At the front, in the middle and at the end (no anchor after the run there).
        let at = [0, reference.len() / 2, reference.len() - 1][usize::from(n % 3)];
        let rule = if n % 4 == 0 { ipv6_rule(1000 + n) } else { port_rule(1000 + n) };
        table.insert(at, rule).unwrap();
        reference.insert(at, rule);
        if n == 45 {
            table.remove(reference.len() - 1).unwrap(); // the last anchor: the end run grows over it
            reference.pop();
        }
        for probe in [0, 1, 25, 49, 1000 + n, 1000 + n / 2, 999 + n / 3] {
            for dst in [0, v4([10, 0, 0, 1]), (0x2001_0db8u128 << 96) | 5] {
                let key = Key { dst, dst_port: probe, ..Key::default() };
                assert_eq!(table.lookup(&key), brute_force(&reference, &key), "port {probe} to {dst:x} after {n} inserts");
            }
        }
    }
    assert!(Arc::ptr_eq(&trees_before, &indexed(&table).tree_ranks), "no tree rule moved, no rebuild");
    let anchors: Vec<Rank> = table.rows.iter().filter(|row| row.anchored).map(|row| row.rank).collect();
    assert_eq!(anchors, anchors_before[..49], "the anchors kept their ranks (but the removed last)");
    let ranks: Vec<Rank> = table.rows.iter().map(|row| row.rank).collect();
    assert!(ranks.windows(2).all(|pair| pair[0] < pair[1]));
}

/// A table scanned while it has at most SMALL_RULES rules is indexed once it has more, and
/// scanned again once it has no more: inserts, removals and replacements on either side of
/// the boundary, each form checked against a plain scan, and a clone made before a change of
/// form keeps answering for its own rules.
#[test]
fn a_table_changes_form_at_small_rules_both_ways_and_answers_alike() {
    let rule = |port: u16| Rule { dst: v4([10, 0, (port % 4) as u8, 0]), dst_len: 120, dst_ports: (port, port + 2), ..Rule::ANY };
    let ipv6_rule = Rule { dst: 0x2001_0db8u128 << 96, dst_len: 32, dst_ports: (5, 5), ..Rule::ANY };
    let mut reference: Vec<Rule> = (0..SMALL_RULES as u16 - 1).map(|k| rule(10 * k)).collect();
    reference.push(ipv6_rule);
    let mut table = RuleTable::new(reference.clone()).unwrap();
    let check = |table: &RuleTable, reference: &[Rule], what: &str| {
        assert_eq!(table.indexed.is_some(), reference.len() > SMALL_RULES, "{what}: {} rules", reference.len());
        assert_eq!((table.trees().is_some(), table.small_rows().is_some()), (reference.len() > SMALL_RULES, (1..=SMALL_RULES).contains(&reference.len())));
        assert_eq!(table.rules().collect::<Vec<_>>(), reference, "{what}");
        for port in 0..100 {
            for dst in [v4([10, 0, (port % 4) as u8, 1]), v4([10, 0, 1, 1]), (0x2001_0db8u128 << 96) | 1] {
                let key = Key { dst, dst_port: port, ..Key::default() };
                assert_eq!(table.lookup(&key), brute_force(reference, &key), "{what}: port {port} to {dst:x}");
            }
        }
    };
    check(&table, &reference, "small, at the boundary");
    let before_growing = (table.clone(), reference.clone());
    for (step, at) in [(0u16, 3usize), (1, 0), (2, 9)] {
        table.insert(at, rule(31 + step)).unwrap();
        reference.insert(at, rule(31 + step));
        check(&table, &reference, &format!("insert {step}"));
    }
    check(&before_growing.0, &before_growing.1, "the clone from before the table grew");
    // From SMALL_RULES + 2 rules down to SMALL_RULES - 2: a replacement just past the boundary
    // stays indexed, one at it stays small; a removal crosses it.
    for removed in [0usize, 4, 2, 0] {
        table.replace(1, rule(7)).unwrap();
        reference[1] = rule(7);
        check(&table, &reference, "replace");
        let before = (table.clone(), reference.clone());
        assert_eq!(table.remove(removed).unwrap(), reference.remove(removed));
        check(&table, &reference, &format!("removed down to {}", reference.len()));
        check(&before.0, &before.1, "the clone from before the removal");
    }
    // Grown past the boundary again, the form follows the count once more.
    table.insert(reference.len(), Rule::ANY).unwrap();
    reference.push(Rule::ANY);
    table.insert(0, ipv6_rule).unwrap();
    reference.insert(0, ipv6_rule);
    check(&table, &reference, "grown again");
    assert!(!table.is_worn(), "an indexed table just built is not worn");
}

/// A payload that opens a group when `opens`, numbered by counting as the engine's policy rules are.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Tagged {
    tag: u16,
    opens: bool,
}

impl Payload for Tagged {
    fn opens_group(&self) -> bool {
        self.opens
    }
}

/// Payloads ride in the rows through inserts, removals, replacements (which keep theirs) and
/// changes of form; setting them copies only the chunks that change, and a row stays 64 bytes.
#[test]
fn payloads_stay_with_their_rules_and_number_groups() {
    assert_eq!(std::mem::size_of::<Ranked<Tagged>>(), std::mem::size_of::<Ranked>());
    let rule = |port: u16| Rule { dst_ports: (port, port), ..Rule::ANY };
    let tagged = |tag: u16| Tagged { tag, opens: tag.is_multiple_of(2) };
    let mut table = RuleTable::with_payloads((0..300).map(|k| (rule(k), tagged(k)))).unwrap();
    let expected = |payloads: &[Tagged]| {
        payloads
            .iter()
            .scan(-1i64, |group, p| {
                *group += i64::from(p.opens);
                Some((*group as usize, *p))
            })
            .collect::<Vec<_>>()
    };
    let mut reference: Vec<Tagged> = (0..300).map(tagged).collect();
    let check = |table: &RuleTable<Tagged>, reference: &[Tagged]| {
        assert_eq!(table.payloads().collect::<Vec<_>>(), reference);
        assert_eq!((0..reference.len()).map(|row| table.numbered(row)).collect::<Vec<_>>(), expected(reference));
        assert_eq!(table.group_count(), reference.iter().filter(|p| p.opens).count());
    };
    check(&table, &reference);
    table.insert_with(5, rule(1000), tagged(1000)).unwrap();
    reference.insert(5, tagged(1000));
    table.replace(7, rule(1001)).unwrap(); // keeps row 7's payload
    table.remove(0).unwrap();
    reference.remove(0);
    check(&table, &reference);
    assert_eq!(table.lookup(&Key { dst_port: 1001, ..Key::default() }), Some(6));
    let before = table.clone();
    reference[250] = tagged(3);
    table.set_payloads(reference.iter().copied());
    check(&table, &reference);
    let shared = table.rows.chunks().filter(|chunk| before.rows.chunks().any(|old| Arc::ptr_eq(old, chunk))).count();
    assert_eq!(shared, table.rows.chunks().count() - 1, "only the chunk of row 250 was copied");
    while table.len() > SMALL_RULES {
        table.remove(table.len() - 1).unwrap();
        reference.pop();
    }
    assert!(table.small_rows().is_some());
    check(&table, &reference);
}

#[test]
fn impossible_rules_are_refused_with_their_index() {
    let reversed = Rule { dst_ports: (90, 80), ..Rule::ANY };
    let err = RuleTable::new(vec![Rule::ANY, reversed]).unwrap_err();
    assert!(matches!(&err, CoreError::InvalidSpec { place, .. } if place == "rule 1"), "{err:?}");
    assert_eq!(err.to_string(), "rule 1: port range is reversed");
    assert!(RuleTable::new(vec![Rule { src_len: 129, ..Rule::ANY }]).is_err());
}

#[test]
fn classbench_rule_syntax() {
    let rules = parse_classbench("@10.1.0.0/16\t0.0.0.0/0\t0 : 65535\t80 : 80\t0x06/0xFF\t0x1000/0x1000\t\n").unwrap();
    assert_eq!(rules[0].src, v4([10, 1, 0, 0]));
    assert_eq!((rules[0].src_len, rules[0].dst_len, rules[0].dst_ports, rules[0].proto_mask), (112, 96, (80, 80), 0xff));
    let err = parse_classbench("@10.1.0.0/33\t0.0.0.0/0\t0 : 1\t0 : 1\t0x06/0xFF\n").unwrap_err();
    assert_eq!(err.to_string(), "line 1: '33' is not a prefix length");
}

/// Every labelled header of every ClassBench trace in ../shared gets its label.
#[test]
fn classbench_traces_match_their_labels() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/classbench");
    if !dir.is_dir() {
        eprintln!("skipped: {} not found", dir.display());
        return;
    }
    let sizes: &[&str] = if cfg!(debug_assertions) { &["1k", "10k"] } else { &["1k", "10k", "100k"] };
    for family in ["acl1", "fw1", "ipc1"] {
        for size in sizes {
            let name = format!("{family}_{size}");
            let rules = parse_classbench(&std::fs::read_to_string(dir.join(&name)).unwrap()).unwrap();
            let table = RuleTable::new(rules).unwrap();
            let trace = std::fs::read_to_string(dir.join(format!("{name}_trace"))).unwrap();
            let (mut keys, mut labels) = (Vec::new(), Vec::new());
            for (line_number, line) in trace.lines().enumerate() {
                let f: Vec<i64> = line.split_whitespace().map(|v| v.parse().unwrap()).collect();
                if f[5] < 0 {
                    continue; // a 100k trace's unlabelled tail: the rule it came from, not the first match
                }
                keys.push(Key {
                    src: ipv4_mapped(f[0] as u32),
                    dst: ipv4_mapped(f[1] as u32),
                    src_port: f[2] as u16,
                    dst_port: f[3] as u16,
                    proto: f[4] as u8,
                    dscp: 0,
                });
                labels.push((line_number + 1, f[5] as i32));
            }
            assert!(keys.len() >= 5120, "{name}: only {} labelled headers", keys.len());
            let mut found = vec![0i32; keys.len()];
            table.lookup_all(&keys, &mut found);
            for ((key, (line_number, label)), found) in keys.iter().zip(labels).zip(found) {
                assert_eq!(found, label, "{name} trace line {line_number}, all at once");
                assert_eq!(table.lookup(key), Some(label as usize), "{name} trace line {line_number}");
            }
        }
    }
}

pub(crate) fn rule_strategy() -> impl Strategy<Value = Rule> {
    let address = prop_oneof![
        (0u8..4).prop_map(|n| v4([10, n, 0, 0])),
        any::<u32>().prop_map(ipv4_mapped),
        (any::<u8>()).prop_map(|b| 0x2001_0db8u128 << 96 | u128::from(b) << 64),
    ];
    let length = prop_oneof![Just(0u8), 96u8..=128, 0u8..=128];
    let ports = prop_oneof![Just((0u16, u16::MAX)), (0u16..100).prop_map(|p| (p, p)), (0u16..100, 0u16..100).prop_map(|(a, b)| (a.min(b), a.max(b)))];
    (
        address.clone(),
        length.clone(),
        address,
        length,
        ports.clone(),
        ports,
        (0u8..20, prop_oneof![Just(0u8), Just(0xffu8), any::<u8>()]),
        (0u8..64, prop_oneof![Just(0u8), Just(0x3fu8)]),
    )
        .prop_map(|(src, src_len, dst, dst_len, src_ports, dst_ports, (proto, proto_mask), (dscp, dscp_mask))| Rule {
            src,
            src_len,
            dst,
            dst_len,
            src_ports,
            dst_ports,
            proto,
            proto_mask,
            dscp,
            dscp_mask,
        })
}

/// A key inside `rule` (so that lookups hit), or anywhere.
pub(crate) fn key_for(rule: &Rule, noise: u128, port_noise: u16) -> Key {
    let pick = |value: u128, len: u8| (value & prefix_mask(len)) | (noise & !prefix_mask(len));
    Key {
        src: pick(rule.src, rule.src_len),
        dst: pick(rule.dst, rule.dst_len),
        src_port: rule.src_ports.0.saturating_add(port_noise % 3),
        dst_port: rule.dst_ports.0,
        proto: rule.proto,
        dscp: rule.dscp,
    }
}

#[derive(Debug, Clone)]
enum Update {
    Insert(prop::sample::Index, Rule),
    Remove(prop::sample::Index),
}

/// Applies one update to the table and the reference alike.
fn apply(update: Update, table: &mut RuleTable, reference: &mut Vec<Rule>) -> Result<(), TestCaseError> {
    match update {
        Update::Insert(at, rule) => {
            let at = at.index(reference.len() + 1);
            reference.insert(at, rule);
            table.insert(at, rule).unwrap();
        }
        Update::Remove(at) if !reference.is_empty() => {
            let at = at.index(reference.len());
            prop_assert_eq!(table.remove(at).unwrap(), reference.remove(at));
        }
        Update::Remove(_) => prop_assert!(table.remove(0).is_err()),
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(
        std::env::var("ISOLANE_FUZZ_CASES").ok().and_then(|n| n.parse().ok()).unwrap_or(300)
    ))]

    #[test]
    fn fuzz_tables_agree_with_brute_force_through_updates(
        rules in proptest::collection::vec(rule_strategy(), 0..60),
        updates in proptest::collection::vec(prop_oneof![
            (any::<prop::sample::Index>(), rule_strategy()).prop_map(|(i, r)| Update::Insert(i, r)),
            any::<prop::sample::Index>().prop_map(Update::Remove),
        ], 0..20),
        noise in any::<u128>(),
    ) {
        let mut reference = rules.clone();
        let mut table = RuleTable::new(rules).unwrap();
        // One key per rule and a stray one, looked up alone and all at once (in groups).
        let check = |table: &RuleTable, reference: &[Rule]| -> Result<(), TestCaseError> {
            let mut keys: Vec<Key> = reference.iter().enumerate().map(|(i, rule)| key_for(rule, noise.rotate_left(i as u32), i as u16)).collect();
            keys.push(Key { src: noise, dst: !noise, src_port: noise as u16, dst_port: 80, proto: 6, dscp: 0 });
            keys.sort_by_key(|key| Fields::of(key).is_none()); // IPv4 keys first, so they fill whole groups
            let mut all = vec![0i32; keys.len()];
            table.lookup_all(&keys, &mut all);
            for (key, from_all) in keys.iter().zip(all) {
                let expected = brute_force(reference, key);
                prop_assert_eq!(table.lookup(key), expected);
                prop_assert_eq!(from_all, expected.map_or(-1, |index| index as i32));
            }
            Ok(())
        };
        check(&table, &reference)?;
        for update in updates {
            apply(update, &mut table, &mut reference)?;
            check(&table, &reference)?;
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(
        std::env::var("ISOLANE_FUZZ_CASES").ok().and_then(|n| n.parse::<u32>().ok()).map_or(24, |n| (n / 10).max(1))
    ))]

    /// Enough edits to wear the trees out several times over: rebuilds keep the order right.
    #[test]
    fn fuzz_tables_agree_with_brute_force_through_rebuilds(
        rules in proptest::collection::vec(rule_strategy(), 20..120),
        updates in proptest::collection::vec(prop_oneof![
            (any::<prop::sample::Index>(), rule_strategy()).prop_map(|(i, r)| Update::Insert(i, r)),
            any::<prop::sample::Index>().prop_map(Update::Remove),
        ], 150..300),
        noise in any::<u128>(),
    ) {
        let mut reference = rules.clone();
        let mut table = RuleTable::new(rules).unwrap();
        for (step, update) in updates.into_iter().enumerate() {
            apply(update, &mut table, &mut reference)?;
            if let Some(rule) = reference.get(step % reference.len().max(1)) {
                let key = key_for(rule, noise.rotate_left(step as u32), step as u16);
                prop_assert_eq!(table.lookup(&key), brute_force(&reference, &key), "after {} edits", step + 1);
            }
        }
        for (i, rule) in reference.iter().enumerate() {
            let key = key_for(rule, noise.rotate_right(i as u32), i as u16);
            prop_assert_eq!(table.lookup(&key), brute_force(&reference, &key));
        }
    }

    /// Inserts piling up at three places (and removals there), so that runs of inserted rules
    /// use up their rank gaps and are respread, many times over.
    #[test]
    fn fuzz_tables_agree_with_brute_force_through_inserts_piling_up(
        rules in proptest::collection::vec(rule_strategy(), 1..40),
        edits in proptest::collection::vec((0usize..3, proptest::option::weighted(0.8, rule_strategy())), 100..250),
        noise in any::<u128>(),
    ) {
        let mut reference = rules.clone();
        let mut table = RuleTable::new(rules).unwrap();
        table.rebuild_elsewhere();
        for (step, (place, rule)) in edits.into_iter().enumerate() {
            let at = [0, reference.len() / 3, reference.len().saturating_sub(1)][place];
            match rule {
                Some(rule) => {
                    table.insert(at, rule).unwrap();
                    reference.insert(at, rule);
                }
                None if reference.len() > 1 => prop_assert_eq!(table.remove(at).unwrap(), reference.remove(at)),
                None => {}
            }
            let rule = reference[step % reference.len()];
            let key = key_for(&rule, noise.rotate_left(step as u32), step as u16);
            prop_assert_eq!(table.lookup(&key), brute_force(&reference, &key), "after {} edits", step + 1);
        }
        for (i, rule) in reference.iter().enumerate() {
            let key = key_for(rule, noise.rotate_right(i as u32), i as u16);
            prop_assert_eq!(table.lookup(&key), brute_force(&reference, &key));
        }
    }
}

/// Rules that cross each other in every field copy badly under cuts: the trees stop cutting
/// at their byte budget (leaves grow instead) and still answer right.
#[test]
fn crossing_rules_stay_within_the_memory_budget() {
    let mut rules = Vec::new();
    for i in 0..3000u32 {
        let wide = |bits: u32| (i.wrapping_mul(2_654_435_761) >> bits) << bits;
        rules.push(Rule {
            src: ipv4_mapped(wide(16 - (i % 3) * 4)),
            src_len: 112 + (i % 3) as u8 * 4,
            dst: ipv4_mapped(wide(12).rotate_left(7) & 0xffff_0000),
            dst_len: 112,
            src_ports: ((i % 1000) as u16, (i % 1000 + 20000) as u16),
            dst_ports: ((i * 7 % 3000) as u16, (i * 7 % 3000 + 30000) as u16),
            ..Rule::ANY
        });
    }
    let table = RuleTable::new(rules.clone()).unwrap();
    assert!(table.memory_bytes() < 3000 * (256 + 200) + (2 << 20) + 4096, "{} bytes", table.memory_bytes());
    for (i, rule) in rules.iter().enumerate().step_by(7) {
        let key = key_for(rule, (i as u128) * 0x9e37_79b9_7f4a_7c15, i as u16);
        assert_eq!(table.lookup(&key), brute_force(&rules, &key), "rule {i}");
    }
}

#[test]
fn a_table_rebuilt_elsewhere_defers_its_rebuilds_until_long_past_due() {
    let rule = |port: u16| Rule { src: v4([10, 0, (port >> 8) as u8, port as u8]), src_len: 128, dst_ports: (port, port), ..Rule::ANY };
    let mut reference: Vec<Rule> = (0..100).map(rule).collect();
    let mut table = RuleTable::new(reference.clone()).unwrap();
    table.rebuild_elsewhere();
    for port in 100..100 + REBUILD_EDITS as u16 + 1 {
        table.insert(reference.len(), rule(port)).unwrap(); // at the end: ranks never run out
        reference.push(rule(port));
    }
    assert!(table.is_worn(), "past due, and not rebuilt by the edit");
    let rebuilt = table.rebuilt();
    assert!(!rebuilt.is_worn() && table.is_worn(), "the copy is rebuilt, the original untouched");
    for (i, rule) in reference.iter().enumerate() {
        let key = key_for(rule, i as u128, 0);
        assert_eq!(rebuilt.lookup(&key), brute_force(&reference, &key));
        assert_eq!(table.lookup(&key), brute_force(&reference, &key));
    }
    while table.is_worn() {
        let port = 1000 + reference.len() as u16;
        table.insert(reference.len(), rule(port)).unwrap();
        reference.push(rule(port));
        assert!(table.edits_since_build() <= table.edits_due() * OVERDUE, "rebuilt in line once long past due");
    }
}
