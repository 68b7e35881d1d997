//! Engine throughput with many tenants, natively (the workload of bench/test_engine_bench.py):
//! `cargo run --release --example engine_speed [TENANTS [BATCH]]` (default 1000 tenants of 100
//! rules, 1M packets, classified in batches of BATCH packets, default all at once).
use bytemuck::Zeroable;
use isolane::classify::{ipv4_mapped, Rule};
use isolane::engine::{Engine, TablesSpec, TenantSpec, Verdict, ALLOW, DROP};
use isolane::parse::{PacketInfo, Status, Tunnel};
use std::time::Instant;

const RULES: usize = 100;
const PACKETS: usize = 1_000_000;

#[path = "common/rng.rs"]
mod rng;
use rng::Rng;

fn rule(tenant: usize, r: usize, port: u16) -> Rule {
    let dst = ipv4_mapped(u32::from_be_bytes([10, (tenant % 250) as u8, r as u8, 0]));
    let proto = if r % 2 == 1 { 6 } else { 17 };
    Rule { dst, dst_len: 120, dst_ports: (port, port), proto, proto_mask: 0xff, ..Rule::ANY }
}

fn main() {
    let tenants: usize = std::env::args().nth(1).map_or(1000, |t| t.parse().unwrap());
    let batch: usize = std::env::args().nth(2).map_or(PACKETS, |b| b.parse().unwrap());
    let mut random = Rng(0x9e37_79b9_7f4a_7c15);
    let ports: Vec<Vec<u16>> = (0..tenants).map(|_| (0..RULES).map(|_| random.between(1000, 50_999) as u16).collect()).collect();
    let spec = TablesSpec {
        tenants: (0..tenants)
            .map(|t| TenantSpec {
                name: format!("t{t}"),
                rules: (0..RULES).map(|r| rule(t, r, ports[t][r])).collect(),
                actions: vec![ALLOW; RULES],
                classes: vec![0; RULES],
                policy_rules: (0..RULES as i32).collect(),
                default_action: DROP,
                default_class: 0,
            })
            .collect(),
        vnis: (0..tenants).map(|t| (t as u32 + 1, t as i32)).collect(),
        unknown_action: DROP,
        ..TablesSpec::default()
    };
    let start = Instant::now();
    let engine = Engine::new(spec).unwrap();
    let build = start.elapsed();
    let records: Vec<PacketInfo> = (0..PACKETS)
        .map(|_| {
            let (t, r) = (random.below(tenants as u64) as usize, random.below(RULES as u64) as usize);
            PacketInfo {
                dst: ipv4_mapped(u32::from_be_bytes([10, (t % 250) as u8, r as u8, 1])).to_be_bytes(),
                src: ipv4_mapped(0x0a00_0001).to_be_bytes(),
                wire_len: 114,
                vni: t as i32 + 1,
                vlan: -1,
                dst_port: ports[t][r],
                status: Status::Ok as u8,
                tunnel: Tunnel::Vxlan as u8,
                ip_version: 4,
                proto: if r % 2 == 1 { 6 } else { 17 },
                ..PacketInfo::zeroed()
            }
        })
        .collect();
    let mut out = vec![Verdict::zeroed(); PACKETS];
    let mut best = f64::MAX;
    for _ in 0..std::env::var("ROUNDS").ok().and_then(|r| r.parse().ok()).unwrap_or(10) {
        let start = Instant::now();
        for (records, out) in records.chunks(batch).zip(out.chunks_mut(batch)) {
            engine.classify(records, out);
        }
        best = best.min(start.elapsed().as_secs_f64());
    }
    let matched = out.iter().filter(|v| v.rule >= 0).count();
    assert_eq!(matched, PACKETS, "every packet is aimed at a rule");
    println!("{tenants} tenants x {RULES} rules: build {:.0} ms, batches of {batch}: {:.2} Mpps", build.as_secs_f64() * 1e3, PACKETS as f64 / best / 1e6);
}
