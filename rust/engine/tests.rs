//! Tenants by VNI, VLAN and source; the fallbacks; updates that keep, patch or rebuild
//! tenants; counters across updates; classifying while another thread updates.

use super::*;
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
                    let expected_rule = match (i % 2 == 0, new_policy) { (true, true) => 1, (true, false) => 0, (false, true) => 0, (false, false) => -1 };
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
fn vni_map_covers_24_bits_and_nothing_else() {
    let mut map = VniMap::default();
    map.insert(0xff_ffff, 3);
    map.insert(0, 1);
    assert_eq!((map.get(0xff_ffff), map.get(0), map.get(5), map.get(-1), map.get(1 << 24)), (3, 1, -1, -1, -1));
}

#[test]
fn editing_one_policy_rule_shifts_later_ones_and_keeps_other_tenants() {
    let engine = Engine::new(spec()).unwrap();
    let blue_before = Arc::clone(&engine.tables().tenants[1]);
    let two_rows = vec![RuleRow { rule: web_rule(8080), action: DROP, class: NO_CLASS }, RuleRow { rule: web_rule(8081), action: DROP, class: NO_CLASS }];
    engine.edit_tenant("red", RuleEdit::Insert { at: 1, rows: two_rows }).unwrap();
    let rule_of = |port| { let v = classify_one(&engine, packet(100, port)); (v.rule, v.action) };
    assert_eq!((rule_of(80), rule_of(8080), rule_of(8081), rule_of(443)), ((0, ALLOW), (1, DROP), (1, DROP), (2, ALLOW)));
    assert!(Arc::ptr_eq(&blue_before, &engine.tables().tenants[1]));
    engine.edit_tenant("red", RuleEdit::Replace { at: 1, rows: vec![RuleRow { rule: web_rule(9000), action: ALLOW, class: 4 }] }).unwrap();
    assert_eq!((rule_of(8080), rule_of(9000), rule_of(443)), ((-1, DROP), (1, ALLOW), (2, ALLOW)));
    engine.edit_tenant("red", RuleEdit::Remove { at: 0 }).unwrap();
    assert_eq!((rule_of(80), rule_of(9000), rule_of(443)), ((-1, DROP), (0, ALLOW), (1, ALLOW)));
    assert!(engine.edit_tenant("red", RuleEdit::Remove { at: 2 }).is_err());
    assert!(engine.edit_tenant("red", RuleEdit::Insert { at: 3, rows: vec![] }).is_err());
    assert!(engine.edit_tenant("green", RuleEdit::Remove { at: 0 }).is_err());
    let red = engine.tables();
    let red = &red.tenants[0].spec;
    assert_eq!((red.policy_rules.clone(), red.rules.len(), red.actions.len(), red.classes.len()), (vec![0, 1], 2, 2, 2));
}
