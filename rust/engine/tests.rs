//! Tenants by VNI, VLAN and source; the fallbacks; updates that keep, patch or rebuild
//! tenants; counters across updates; classifying while another thread updates.

use super::*;
use bytemuck::Zeroable;

use crate::classify::ipv4_mapped;

fn v4(a: [u8; 4]) -> [u8; 16] {
    ipv4_mapped(u32::from_be_bytes(a)).to_be_bytes()
}

fn tenant(name: &str, rules: Vec<Rule>) -> TenantSpec {
    let n = rules.len();
    TenantSpec {
        name: name.to_string(),
        rules,
        actions: vec![ALLOW; n],
        classes: (0..n as u16).collect(),
        policy_rules: (0..n as i32).collect(),
        default_action: DROP,
        default_class: 0,
    }
}

fn web_rule(port: u16) -> Rule {
    Rule { dst_ports: (port, port), proto: 6, proto_mask: 0xff, ..Rule::ANY }
}

fn spec() -> TablesSpec {
    TablesSpec {
        tenants: vec![tenant("red", vec![web_rule(80), web_rule(443)]), tenant("blue", vec![web_rule(22)])],
        vnis: vec![(100, 0), (200, 1)],
        vlans: vec![(7, 1)],
        sources: vec![(ipv4_mapped(0x0a00_0000), 104, 0)],
        unknown_action: DROP,
    }
}

fn packet(vni: i32, dst_port: u16) -> PacketInfo {
    PacketInfo {
        outer_src: v4([192, 0, 2, 1]),
        outer_dst: v4([192, 0, 2, 2]),
        src: v4([172, 16, 0, 1]),
        dst: v4([172, 16, 0, 2]),
        wire_len: 100,
        vni,
        vlan: -1,
        src_port: 999,
        dst_port,
        ethertype: 0x0800,
        status: Status::Ok as u8,
        tunnel: if vni >= 0 { Tunnel::Vxlan as u8 } else { Tunnel::None as u8 },
        ip_version: 4,
        proto: 6,
        dscp: 0,
        is_fragment: 0,
        timestamp_ns: 0,
        inner_len: 100,
    }
}

fn classify_one(engine: &Engine, info: PacketInfo) -> Verdict {
    let mut out = [Verdict::zeroed()];
    engine.classify(&[info], &mut out);
    out[0]
}

#[test]
fn tenants_by_vni_then_first_matching_rule() {
    let engine = Engine::new(spec()).unwrap();
    let v = classify_one(&engine, packet(100, 443));
    assert_eq!((v.tenant, v.rule, v.cls, v.action, v.reason), (0, 1, 1, ALLOW, Reason::Rule as u8));
    let v = classify_one(&engine, packet(100, 22));
    assert_eq!((v.tenant, v.rule, v.action, v.reason), (0, -1, DROP, Reason::Default as u8));
    let v = classify_one(&engine, packet(200, 22));
    assert_eq!((v.tenant, v.rule), (1, 0));
    let v = classify_one(&engine, packet(300, 80));
    assert_eq!((v.tenant, v.action, v.reason), (-1, DROP, Reason::UnknownTenant as u8));
}

#[test]
fn a_tunnelled_packet_only_ever_belongs_to_its_vni() {
    let engine = Engine::new(spec()).unwrap();
    let mut claimed_by_vlan = packet(300, 80);
    claimed_by_vlan.vlan = 7; // VLAN 7 belongs to blue, but the packet carries VNI 300
    claimed_by_vlan.outer_src = v4([10, 1, 1, 1]); // and red's source prefix
    assert_eq!({ classify_one(&engine, claimed_by_vlan).tenant }, -1);
    let mut untunnelled = packet(-1, 22);
    untunnelled.vlan = 7;
    assert_eq!({ classify_one(&engine, untunnelled).tenant }, 1);
    untunnelled.vlan = -1;
    untunnelled.outer_src = v4([10, 1, 1, 1]);
    assert_eq!({ classify_one(&engine, untunnelled).tenant }, 0);
}

#[test]
fn broken_and_non_ip_packets_are_counted_by_reason() {
    let engine = Engine::new(spec()).unwrap();
    let mut truncated = packet(100, 80);
    truncated.status = Status::Truncated as u8;
    let mut arp = packet(100, 0);
    arp.status = Status::Unsupported as u8;
    arp.ip_version = 0;
    assert_eq!({ classify_one(&engine, truncated).reason }, Reason::Truncated as u8);
    let v = classify_one(&engine, arp);
    assert_eq!((v.tenant, v.reason, v.action), (0, Reason::NotIp as u8, DROP));
    let red = &engine.counters()[&Some("red".to_string())];
    assert_eq!((red.packets, red.reasons[Reason::Truncated as usize], red.reasons[Reason::NotIp as usize]), ([2, 0], 1, 1));
}

#[test]
fn a_tenant_without_rules_takes_its_default_until_a_rule_is_added() {
    let mut tables = spec();
    tables.tenants.push(TenantSpec { default_action: ALLOW, default_class: 3, ..tenant("green", vec![]) });
    tables.vnis.push((300, 2));
    let engine = Engine::new(tables).unwrap();
    let mut ipv6 = packet(300, 80);
    (ipv6.ip_version, ipv6.dst) = (6, [0x20, 1, 0xd, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2]);
    for info in [packet(300, 80), ipv6] {
        let v = classify_one(&engine, info);
        assert_eq!((v.tenant, v.rule, v.cls, v.action, v.reason), (2, -1, 3, ALLOW, Reason::Default as u8));
    }
    let mut truncated = packet(300, 80);
    truncated.status = Status::Truncated as u8;
    let mut arp = packet(300, 0);
    (arp.status, arp.ip_version) = (Status::Unsupported as u8, 0);
    assert_eq!({ classify_one(&engine, truncated).reason }, Reason::Truncated as u8);
    assert_eq!({ classify_one(&engine, arp).reason }, Reason::NotIp as u8);
    engine.edit_tenant("green", RuleEdit::Insert { at: 0, rows: vec![RuleRow { rule: web_rule(80), action: DROP, class: 1 }] }).unwrap();
    let v = classify_one(&engine, packet(300, 80));
    assert_eq!((v.tenant, v.rule, v.cls, v.action, v.reason), (2, 0, 1, DROP, Reason::Rule as u8));
}

#[test]
fn frame_rules_match_by_ethertype_in_policy_order() {
    const ARP: u16 = 0x0806;
    let mut tables = spec();
    // red: 0 arp allow, 1 tcp/80 allow (class 1), 2 ipv4 drop, 3 tcp/443 allow: 443 is past the IPv4 rule.
    let rules = vec![frame_rule(ARP), web_rule(80), frame_rule(0x0800), web_rule(443)];
    tables.tenants[0] = TenantSpec { actions: vec![ALLOW, ALLOW, DROP, ALLOW], ..tenant("red", rules) };
    let engine = Engine::new(tables).unwrap();
    let arp = PacketInfo { status: Status::Unsupported as u8, ip_version: 0, ethertype: ARP, ..packet(100, 0) };
    let lldp = PacketInfo { ethertype: 0x88cc, ..arp };
    let verdicts = [arp, lldp, packet(100, 80), packet(100, 443), packet(100, 22)].map(|info| classify_one(&engine, info));
    let seen: Vec<(i32, u8, u8)> = verdicts.iter().map(|v| (v.rule, v.action, v.reason)).collect();
    let (rule, default, not_ip) = (Reason::Rule as u8, Reason::Default as u8, Reason::NotIp as u8);
    assert_eq!(seen, [(0, ALLOW, rule), (-1, DROP, not_ip), (1, ALLOW, rule), (2, DROP, rule), (2, DROP, rule)]);
    assert_eq!({ verdicts[0].cls }, 0, "the ARP rule's class");
    // IPv6 packets are not IPv4's: the IPv6 one takes the default; a rule removed renumbers the rest.
    let ipv6 = PacketInfo { ip_version: 6, dst: [0x20, 1, 0xd, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2], ..packet(100, 22) };
    assert_eq!({ classify_one(&engine, ipv6).reason }, default);
    engine.edit_tenant("red", RuleEdit::Remove { at: 0 }).unwrap();
    let v = classify_one(&engine, arp);
    assert_eq!((v.rule, v.action, v.reason), (-1, DROP, not_ip));
    assert_eq!({ classify_one(&engine, packet(100, 22)).rule }, 1);
}

#[test]
fn updates_keep_patch_or_rebuild_and_counters_run_on() {
    let engine = Engine::new(spec()).unwrap();
    classify_one(&engine, packet(100, 80));
    let mut next = spec();
    next.tenants[0].rules.insert(0, web_rule(8080));
    next.tenants[0].actions.insert(0, ALLOW);
    next.tenants[0].classes.insert(0, 9);
    next.tenants[0].policy_rules.push(2);
    let report = engine.update(next.clone()).unwrap();
    assert_eq!(report, UpdateReport { kept: 1, incremental: 1, rebuilt: 0 });
    let v = classify_one(&engine, packet(100, 8080));
    assert_eq!((v.rule, v.cls), (0, 9));
    assert_eq!({ classify_one(&engine, packet(100, 80)).rule }, 1);
    assert!(Arc::ptr_eq(&engine.tables().tenants[1], &engine.tables().tenants[1]));

    next.tenants[0] = tenant("red", vec![Rule::ANY; 3]);
    assert_eq!(engine.update(next).unwrap(), UpdateReport { kept: 1, incremental: 0, rebuilt: 1 });
    let red = &engine.counters()[&Some("red".to_string())];
    assert_eq!(red.packets[ALLOW as usize], 3, "counted before and after both updates");
}

#[test]
fn classifying_threads_see_whole_policies_while_updates_run() {
    let engine = Arc::new(Engine::new(spec()).unwrap());
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let reader = {
        let (engine, stop) = (Arc::clone(&engine), Arc::clone(&stop));
        std::thread::spawn(move || {
            let batch: Vec<PacketInfo> = (0..256).map(|i| packet(100, if i % 2 == 0 { 80 } else { 8080 })).collect();
            let mut out = vec![Verdict::zeroed(); batch.len()];
            let mut batches = 0u64;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) || batches == 0 {
                engine.classify(&batch, &mut out);
                // Either policy, never a mix within a batch: 8080 allowed iff rule 0 exists.
                let new_policy = out[1].reason == Reason::Rule as u8;
                for (i, v) in out.iter().enumerate() {
                    let expected_rule = match (i % 2 == 0, new_policy) {
                        (true, true) => 1,
                        (true, false) => 0,
                        (false, true) => 0,
                        (false, false) => -1,
                    };
                    assert_eq!({ v.rule }, expected_rule, "batch {batches}, packet {i}");
                }
                batches += 1;
            }
            batches
        })
    };
    let mut with = spec();
    with.tenants[0] = tenant("red", vec![web_rule(8080), web_rule(80), web_rule(443)]);
    for round in 0..200 {
        engine.update(if round % 2 == 0 { with.clone() } else { spec() }).unwrap();
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let batches = reader.join().unwrap();
    let red = &engine.counters()[&Some("red".to_string())];
    assert_eq!(red.packets.iter().sum::<u64>(), batches * 256, "every packet counted once");
}

#[test]
fn threads_classifying_at_once_are_each_counted_once() {
    let engine = Arc::new(Engine::new(spec()).unwrap());
    let threads: Vec<_> = (0..6)
        .map(|t| {
            let engine = Arc::clone(&engine);
            std::thread::spawn(move || {
                let batch: Vec<PacketInfo> = (0..100).map(|i| packet(if i % 3 == 0 { 200 } else { 100 + t }, 80)).collect();
                let mut out = vec![Verdict::zeroed(); batch.len()];
                for _ in 0..500 {
                    engine.classify(&batch, &mut out);
                }
            })
        })
        .collect();
    threads.into_iter().for_each(|t| t.join().unwrap());
    let counters = engine.counters();
    let packets = |name: Option<&str>| counters.get(&name.map(str::to_string)).map_or(0, |c| c.packets.iter().sum::<u64>());
    assert_eq!(packets(Some("blue")), 6 * 500 * 34);
    assert_eq!(packets(Some("red")), 500 * 66);
    assert_eq!(packets(None), 5 * 500 * 66, "threads 1-5 send to VNIs no tenant has");
}

#[test]
fn worn_trees_are_rebuilt_in_the_background_not_by_the_edit() {
    let rules: Vec<Rule> = (0..300).map(web_rule).collect();
    let engine = Engine::new(TablesSpec { tenants: vec![tenant("red", rules)], vnis: vec![(100, 0)], ..spec() }).unwrap();
    let due: i32 = 64; // REBUILD_EDITS: 300 rules are below 16 x 64
    for (n, port) in (1000..1000 + due as u16 * 3).enumerate() {
        let row = RuleRow { rule: web_rule(port), action: ALLOW, class: 7 };
        engine.edit_tenant("red", RuleEdit::Insert { at: 300 + n as i32, rows: vec![row] }).unwrap();
        let v = classify_one(&engine, packet(100, port));
        assert_eq!((v.rule, v.cls), (300 + n as i32, 7), "edit {n} reaches the data path at once");
    }
    engine.wait_for_rebuilds();
    let tables = engine.tables();
    assert!(!tables.tenants[0].table.is_worn(), "{} edits, rebuilt in the background", due * 3);
    let v = classify_one(&engine, packet(100, 1000 + due as u16 * 3 - 1));
    assert_eq!({ v.rule }, 300 + due * 3 - 1);
}

#[test]
fn a_tenant_is_kept_only_if_every_row_does_the_same() {
    let engine = Engine::new(spec()).unwrap();
    let changes: [fn(&mut TenantSpec); 4] = [
        |red| red.classes[1] = 7,
        |red| red.actions[1] = DROP,
        |red| red.policy_rules[1] = 0, // its two rows are one policy rule now
        |red| red.default_class = 3,
    ];
    for change in changes {
        let mut next = spec();
        change(&mut next.tenants[0]);
        assert_eq!(engine.update(next.clone()).unwrap(), UpdateReport { kept: 1, incremental: 1, rebuilt: 0 });
        assert_eq!(engine.tables().tenants[0].spec(), next.tenants[0]);
        assert_eq!(engine.update(spec()).unwrap().kept, 1);
    }
    assert_eq!(engine.update(spec()).unwrap().kept, 2);
}

#[test]
fn policy_rules_must_be_numbered_from_0_in_order() {
    let mut skipping = spec();
    skipping.tenants[0].policy_rules = vec![0, 2];
    let mut from_1 = spec();
    from_1.tenants[1].policy_rules = vec![1];
    for bad in [skipping, from_1] {
        assert!(Engine::new(bad).err().is_some_and(|why| why.to_string().contains("policy rules must be numbered from 0, in order")));
    }
    let mut two_rows = spec();
    two_rows.tenants[0].policy_rules = vec![0, 0];
    assert_eq!({ classify_one(&Engine::new(two_rows).unwrap(), packet(100, 443)).rule }, 0, "one policy rule of two rows");
}

#[test]
fn vni_map_covers_24_bits_and_nothing_else() {
    let map = VniMap::new([(0xff_ffff, 3), (0, 1)]);
    assert_eq!((map.get(0xff_ffff), map.get(0), map.get(5), map.get(-1), map.get(1 << 24)), (3, 1, -1, -1, -1));
}

#[test]
fn editing_one_policy_rule_shifts_later_ones_and_keeps_other_tenants() {
    let engine = Engine::new(spec()).unwrap();
    let (blue_before, vnis_before) = (Arc::clone(&engine.tables().tenants[1]), Arc::clone(&engine.tables().vnis.blocks));
    let two_rows = vec![RuleRow { rule: web_rule(8080), action: DROP, class: NO_CLASS }, RuleRow { rule: web_rule(8081), action: DROP, class: NO_CLASS }];
    engine.edit_tenant("red", RuleEdit::Insert { at: 1, rows: two_rows }).unwrap();
    let rule_of = |port| {
        let v = classify_one(&engine, packet(100, port));
        (v.rule, v.action)
    };
    assert_eq!((rule_of(80), rule_of(8080), rule_of(8081), rule_of(443)), ((0, ALLOW), (1, DROP), (1, DROP), (2, ALLOW)));
    assert!(Arc::ptr_eq(&blue_before, &engine.tables().tenants[1]));
    assert!(Arc::ptr_eq(&vnis_before, &engine.tables().vnis.blocks), "an edit shares the VNI map");
    engine.edit_tenant("red", RuleEdit::Replace { at: 1, rows: vec![RuleRow { rule: web_rule(9000), action: ALLOW, class: 4 }] }).unwrap();
    assert_eq!((rule_of(8080), rule_of(9000), rule_of(443)), ((-1, DROP), (1, ALLOW), (2, ALLOW)));
    engine.edit_tenant("red", RuleEdit::Remove { at: 0 }).unwrap();
    assert_eq!((rule_of(80), rule_of(9000), rule_of(443)), ((-1, DROP), (0, ALLOW), (1, ALLOW)));
    assert!(engine.edit_tenant("red", RuleEdit::Remove { at: 2 }).is_err());
    assert!(engine.edit_tenant("red", RuleEdit::Insert { at: 3, rows: vec![] }).is_err());
    assert!(engine.edit_tenant("green", RuleEdit::Remove { at: 0 }).is_err());
    let red = engine.tables();
    let red = red.tenants[0].spec();
    assert_eq!((red.policy_rules.clone(), red.rules.len(), red.actions.len(), red.classes.len()), (vec![0, 1], 2, 2, 2));
}

/// A tenant of up to SMALL_RULES rows is scanned in rows it shares with its tables; edited past
/// that it gets trees, and back down to it loses them. Policy rules of two rows each, so that
/// the scan numbers policy rules as the trees do; verdicts agree with a plain scan throughout.
#[test]
fn a_small_tenant_edited_past_small_rules_gets_trees_and_loses_them_again() {
    use crate::classify::SMALL_RULES;
    let engine = Engine::new(spec()).unwrap();
    let form = || {
        let tables = engine.tables();
        let (_, hot) = tables.parts_of(0).expect("tenant 0");
        match (hot.trees.tree_count(), &hot.small) {
            (0, Some(_)) => "small",
            (0, None) => "ruleless",
            _ => "trees",
        }
    };
    let check = |expected_form: &str| {
        let red = engine.tables().tenants[0].spec();
        assert_eq!(form(), expected_form, "{} rows", red.rules.len());
        for port in [22, 80, 443].into_iter().chain(1000..1030) {
            let info = packet(100, port);
            let key = Key { src: u128::from_be_bytes(info.src), dst: u128::from_be_bytes(info.dst), src_port: 999, dst_port: port, proto: 6, dscp: 0 };
            assert_eq!(classify_one(&engine, info), expected_verdict(0, &red, &key), "port {port}, {} rows", red.rules.len());
        }
    };
    check("small");
    let pair =
        |k: u16| vec![RuleRow { rule: web_rule(1000 + 2 * k), action: DROP, class: k }, RuleRow { rule: web_rule(1001 + 2 * k), action: ALLOW, class: k }];
    let mut rows = 2;
    for k in 0..5 {
        engine.edit_tenant("red", RuleEdit::Insert { at: 1, rows: pair(k) }).unwrap();
        rows += 2;
        check(if rows > SMALL_RULES { "trees" } else { "small" });
    }
    while rows > 2 {
        engine.edit_tenant("red", RuleEdit::Remove { at: 2 }).unwrap();
        rows -= 2;
        check(if rows > SMALL_RULES { "trees" } else { "small" });
    }
    engine.edit_tenant("red", RuleEdit::Remove { at: 0 }).unwrap();
    engine.edit_tenant("red", RuleEdit::Remove { at: 0 }).unwrap();
    check("ruleless");
}

/// A packet of the tenant with `vni` carrying `key`'s fields.
fn packet_with(vni: i32, key: &Key) -> PacketInfo {
    let ipv4 = key.src >> 32 == 0xffff && key.dst >> 32 == 0xffff;
    PacketInfo {
        src: key.src.to_be_bytes(),
        dst: key.dst.to_be_bytes(),
        src_port: key.src_port,
        dst_port: key.dst_port,
        proto: key.proto,
        dscp: key.dscp,
        ip_version: if ipv4 { 4 } else { 6 },
        ..packet(vni, 0)
    }
}

/// The verdict a plain first-match scan of the tenant's rules gives.
fn expected_verdict(tenant: i32, spec: &TenantSpec, key: &Key) -> Verdict {
    match spec.rules.iter().position(|rule| rule.matches(key)) {
        Some(i) => Verdict { tenant, rule: spec.policy_rules[i], cls: class_id(spec.classes[i]), action: spec.actions[i], reason: Reason::Rule as u8 },
        None => Verdict { tenant, rule: -1, cls: class_id(spec.default_class), action: spec.default_action, reason: Reason::Default as u8 },
    }
}

mod fuzz {
    use super::*;
    use crate::classify::tests::{key_for, rule_strategy};
    use proptest::prelude::*;

    fn tenant_of(name: &str, rules: Vec<Rule>) -> TenantSpec {
        let n = rules.len();
        TenantSpec {
            name: name.to_string(),
            rules,
            actions: (0..n).map(|i| (i % 2) as u8).collect(),
            classes: (0..n).map(|i| if i % 2 == 0 { NO_CLASS } else { (i % 3) as u16 }).collect(),
            policy_rules: (0..n as i32).collect(),
            default_action: ALLOW,
            default_class: 1,
        }
    }

    /// The tenants `specs` with the policy rules `policies`, each the rows it compiles to.
    fn specs_of(specs: &[TenantSpec], policies: &[Vec<Vec<RuleRow>>]) -> Vec<TenantSpec> {
        let spec_of = |(spec, policy): (&TenantSpec, &Vec<Vec<RuleRow>>)| {
            let rows = || policy.iter().enumerate().flat_map(|(p, rows)| rows.iter().map(move |row| (p as i32, row)));
            TenantSpec {
                rules: rows().map(|(_, row)| row.rule).collect(),
                actions: rows().map(|(_, row)| row.action).collect(),
                classes: rows().map(|(_, row)| row.class).collect(),
                policy_rules: rows().map(|(p, _)| p).collect(),
                ..spec.clone()
            }
        };
        specs.iter().zip(policies).map(spec_of).collect()
    }

    /// Every tenant's rules probed (and a stray key, and a packet of no tenant), several
    /// tenants interleaved in one batch, longer than the engine's walking groups.
    fn check(engine: &Engine, specs: &[TenantSpec], noise: u128) -> Result<(), TestCaseError> {
        let mut batch = Vec::new();
        let mut expected = Vec::new();
        let longest = specs.iter().map(|s| s.rules.len()).max().unwrap_or(0);
        for i in 0..=longest {
            for (t, spec) in specs.iter().enumerate() {
                let key = match spec.rules.get(i) {
                    Some(rule) => key_for(rule, noise.rotate_left((i + t) as u32), i as u16),
                    None => Key { src: noise, dst: !noise, src_port: i as u16, dst_port: 80, proto: 6, dscp: 0 },
                };
                batch.push(packet_with(100 + t as i32, &key));
                expected.push(expected_verdict(t as i32, spec, &key));
            }
            batch.push(packet(7, 80));
            expected.push(Verdict { tenant: -1, rule: -1, cls: -1, action: DROP, reason: Reason::UnknownTenant as u8 });
        }
        let mut out = vec![Verdict::zeroed(); batch.len()];
        engine.classify(&batch, &mut out);
        for (i, (got, want)) in out.iter().zip(&expected).enumerate() {
            prop_assert_eq!(got, want, "packet {}", i);
        }
        Ok(())
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(
            std::env::var("ISOLANE_FUZZ_CASES").ok().and_then(|n| n.parse::<u32>().ok()).map_or(64, |n| (n / 4).max(1))
        ))]

        /// The engine's own walk of the trees (by tree id, with the outcome of each tree rule
        /// beside them) against a first-match scan, through inserts, replacements and removals
        /// of policy rules of one to three rows that leave rules dead in the trees, fresh ones
        /// beside them, and rebuilds.
        #[test]
        fn fuzz_engine_verdicts_agree_with_first_match_through_edits(
            rules in proptest::collection::vec(proptest::collection::vec(rule_strategy(), 0..50), 1..4),
            edits in proptest::collection::vec((any::<prop::sample::Index>(), any::<prop::sample::Index>(), proptest::option::of(proptest::collection::vec(rule_strategy(), 1..4))), 0..240),
            noise in any::<u128>(),
        ) {
            let specs: Vec<TenantSpec> = rules.into_iter().enumerate().map(|(t, rules)| tenant_of(&format!("t{t}"), rules)).collect();
            let tables = TablesSpec {
                tenants: specs.clone(),
                vnis: (0..specs.len()).map(|t| (100 + t as u32, t as i32)).collect(),
                unknown_action: DROP,
                ..TablesSpec::default()
            };
            let engine = Engine::new(tables).unwrap();
            check(&engine, &specs, noise)?;
            // Each tenant's policy rules, each the rows it compiles to.
            let mut policies: Vec<Vec<Vec<RuleRow>>> = specs.iter().map(|spec| {
                (0..spec.rules.len()).map(|i| vec![RuleRow { rule: spec.rules[i], action: spec.actions[i], class: spec.classes[i] }]).collect()
            }).collect();
            for (step, (which, at, rules)) in edits.into_iter().enumerate() {
                let t = which.index(specs.len());
                let policy = &mut policies[t];
                let rows: Vec<RuleRow> = rules.iter().flatten().enumerate().map(|(i, &rule)| RuleRow { rule, action: ((step + i) % 2) as u8, class: (step % 5) as u16 }).collect();
                let edit = match rules {
                    Some(_) if step % 4 == 0 && !policy.is_empty() => {
                        let at = at.index(policy.len());
                        policy[at] = rows.clone();
                        RuleEdit::Replace { at: at as i32, rows }
                    }
                    Some(_) => {
                        let at = at.index(policy.len() + 1);
                        policy.insert(at, rows.clone());
                        RuleEdit::Insert { at: at as i32, rows }
                    }
                    None if policy.is_empty() => continue,
                    None => {
                        let at = at.index(policy.len());
                        policy.remove(at);
                        RuleEdit::Remove { at: at as i32 }
                    }
                };
                engine.edit_tenant(&specs[t].name, edit).unwrap();
                if step % 3 == 0 {
                    check(&engine, &specs_of(&specs, &policies), noise.rotate_right(step as u32))?;
                }
            }
            let specs = specs_of(&specs, &policies);
            prop_assert!(engine.tables().tenants.iter().zip(&specs).all(|(tables, spec)| tables.spec() == *spec));
            check(&engine, &specs, !noise)?;
        }
    }
}

/// The data path's chunks hold a head and hot state per tenant: what they cost a tenant.
#[test]
fn a_tenant_takes_120_bytes_of_the_data_path() {
    assert_eq!((std::mem::size_of::<TenantHead>(), std::mem::size_of::<Option<HotTenant>>()), (8, 112));
}

/// A tenant's tables, held by pointer: what they cost a tenant beside its rows and name.
#[test]
fn a_tenants_tables_take_72_bytes() {
    assert_eq!(std::mem::size_of::<TenantTables>(), 72);
}
