//! One-rule edits of a 10,000-rule tenant, natively (the workload of bench/test_update_bench.py):
//! `cargo run --release --example edit_speed [RULES]`. Times `Engine::edit_tenant` (insert and
//! remove in the middle, replace, inserts piling up at one place) and the same edits on the
//! tenant's `RuleTable` alone; prints median, p99 and max of each. Then classifies packets of the
//! edited tenant, which its whole table answers until the trees are rebuilt, and IPv6 packets.
use bytemuck::Zeroable;
use isolane::classify::{ipv4_mapped, Rule, RuleTable};
use isolane::engine::{Engine, RuleEdit, RuleRow, TablesSpec, TenantSpec, Verdict, ALLOW, DROP};
use isolane::parse::{PacketInfo, Status, Tunnel};
use std::time::Instant;

const EDITS: usize = 700;
const SAME_PLACE_INSERTS: usize = 300;

/// The bench's rule `i`: a /24 destination, one TCP port, no source.
fn rule(i: usize) -> Rule {
    let dst = ipv4_mapped(u32::from_be_bytes([10, (i / 250) as u8, (i % 250) as u8, 0]));
    let port = 1000 + (i % 5000) as u16;
    Rule { dst, dst_len: 120, dst_ports: (port, port), proto: 6, proto_mask: 0xff, ..Rule::ANY }
}

const EXTRA: Rule = Rule { dst_ports: (53, 53), proto: 17, proto_mask: 0xff, ..Rule::ANY };

fn tenant(name: &str, rules: usize) -> TenantSpec {
    TenantSpec {
        name: name.to_string(),
        rules: (0..rules).map(rule).collect(),
        actions: vec![ALLOW; rules],
        classes: vec![0; rules],
        policy_rules: (0..rules as i32).collect(),
        default_action: ALLOW,
        default_class: 0,
    }
}

fn report(what: &str, mut micros: Vec<f64>) {
    micros.sort_by(f64::total_cmp);
    let at = |q: f64| micros[((micros.len() - 1) as f64 * q).round() as usize];
    println!("{what:<44} median {:7.1} us  p99 {:7.1} us  max {:7.1} us  ({} edits)", at(0.5), at(0.99), at(1.0), micros.len());
}

fn timed(work: impl FnOnce()) -> f64 {
    let start = Instant::now();
    work();
    start.elapsed().as_secs_f64() * 1e6
}

fn main() {
    let rules: usize = std::env::args().nth(1).map_or(10_000, |n| n.parse().unwrap());
    let spec =
        TablesSpec { tenants: vec![tenant("big", rules), tenant("small", 0)], vnis: vec![(1, 0), (2, 1)], unknown_action: DROP, ..TablesSpec::default() };
    let middle = rules as i32 / 2;
    let row = RuleRow { rule: EXTRA, action: DROP, class: 0 };
    let insert = |at| RuleEdit::Insert { at, rows: vec![row] };

    let engine = Engine::new(spec.clone()).unwrap();
    let (mut inserts, mut removals, mut replacements) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..EDITS {
        inserts.push(timed(|| engine.edit_tenant("big", insert(middle)).unwrap()));
        replacements.push(timed(|| engine.edit_tenant("big", RuleEdit::Replace { at: middle, rows: vec![row] }).unwrap()));
        removals.push(timed(|| engine.edit_tenant("big", RuleEdit::Remove { at: middle }).unwrap()));
    }
    engine.wait_for_rebuilds();
    report("Engine: insert in the middle", inserts);
    report("Engine: replace in the middle", replacements);
    report("Engine: remove in the middle", removals);

    let engine = Engine::new(spec).unwrap();
    let piled: Vec<f64> = (0..SAME_PLACE_INSERTS).map(|_| timed(|| engine.edit_tenant("big", insert(middle)).unwrap())).collect();
    report("Engine: inserts piling up at one place", piled);
    classify_speed(&engine, rules);

    let mut table = RuleTable::new((0..rules).map(rule).collect()).unwrap();
    table.rebuild_elsewhere();
    let piled: Vec<f64> = (0..SAME_PLACE_INSERTS).map(|_| timed(|| table.insert(rules / 2, EXTRA).unwrap())).collect();
    report("RuleTable: inserts piling up at one place", piled);
    let mut copies = Vec::new();
    for _ in 0..EDITS {
        copies.push(timed(|| {
            let mut copy = table.clone();
            copy.insert(rules / 2, EXTRA).unwrap();
            table = copy;
        }));
    }
    report("RuleTable: clone and insert in the middle", copies);
}

/// Packets aimed at the bench tenant's rules (IPv4), and IPv6 ones, through an edited tenant.
fn classify_speed(engine: &Engine, rules: usize) {
    const PACKETS: usize = 200_000;
    let packet = |i: usize| PacketInfo {
        src: ipv4_mapped(0x0a64_0001).to_be_bytes(),
        dst: ipv4_mapped(u32::from_be_bytes([10, (i / 250) as u8, (i % 250) as u8, 9])).to_be_bytes(),
        dst_port: 1000 + (i % 5000) as u16,
        proto: 6,
        vni: 1,
        vlan: -1,
        wire_len: 100,
        status: Status::Ok as u8,
        tunnel: Tunnel::Vxlan as u8,
        ip_version: 4,
        ..PacketInfo::zeroed()
    };
    let ipv4: Vec<PacketInfo> = (0..PACKETS).map(|i| packet(i * 7919 % rules)).collect();
    let ipv6: Vec<PacketInfo> = ipv4
        .iter()
        .map(|p| PacketInfo { src: (0x2001_0db8u128 << 96 | 1).to_be_bytes(), dst: (0x2001_0db8u128 << 96 | 2).to_be_bytes(), ip_version: 6, ..*p })
        .collect();
    for (what, records) in [("IPv4, edited tenant (whole table)", &ipv4), ("IPv6", &ipv6)] {
        let mut out = vec![Verdict::zeroed(); records.len()];
        let mut best = f64::MAX;
        for _ in 0..10 {
            let start = Instant::now();
            for (records, out) in records.chunks(256).zip(out.chunks_mut(256)) {
                engine.classify(records, out);
            }
            best = best.min(start.elapsed().as_secs_f64());
        }
        let matched = out.iter().filter(|v| v.rule >= 0).count();
        println!("classify {what:<34} {:6.2} Mpps  ({matched} of {} matched a rule)", records.len() as f64 / best / 1e6, records.len());
    }
}
