//! `Engine::process` (classify + meter + shape) on one thread and on several, natively:
//! `cargo run --release --example process_speed [BATCH [THREADS...]]` (default batches of
//! 1,000,000 packets, threads 1 and 2; best of 5 rounds, the thread counts alternating). 1,000
//! tenants by VNI, each with one allow-all rule, an srTCM meter and an EDT shaper; 114-byte
//! packets spread over the tenants and one second of packet time, each tenant offering 1.5x
//! its CIR (the shaper runs at 1.25x CIR).
use bytemuck::Zeroable;
use isolane::classify::{ipv4_mapped, Rule};
use isolane::enforce::Processed;
use isolane::engine::{Engine, TablesSpec, TenantSpec, ALLOW, DROP};
use isolane::parse::{PacketInfo, Status, Tunnel};
use std::time::Instant;

#[path = "common/rng.rs"]
mod rng;
use rng::Rng;
#[path = "common/qos.rs"]
mod qos;
use qos::metered_and_shaped;

const TENANTS: usize = 1000;
const PACKETS: usize = 1_000_000;
const SIZE: u32 = 114;
const SECOND_NS: u64 = 1_000_000_000;
const ROUNDS: usize = 5;

fn tables() -> TablesSpec {
    let tenant = |t: usize| TenantSpec {
        name: format!("t{t}"),
        rules: vec![Rule::ANY],
        actions: vec![ALLOW],
        classes: vec![0],
        policy_rules: vec![0],
        default_action: DROP,
        default_class: 0,
    };
    TablesSpec { tenants: (0..TENANTS).map(tenant).collect(), vnis: (0..TENANTS).map(|t| (t as u32 + 1, t as i32)).collect(), ..TablesSpec::default() }
}

fn main() {
    let batch: usize = std::env::args().nth(1).and_then(|b| b.parse().ok()).unwrap_or(PACKETS);
    let mut thread_counts: Vec<usize> = std::env::args().skip(2).filter_map(|t| t.parse().ok()).collect();
    if thread_counts.is_empty() {
        thread_counts = vec![1, 2];
    }
    let mut random = Rng(0x9e37_79b9_7f4a_7c15);
    let records: Vec<PacketInfo> = (0..PACKETS)
        .map(|i| PacketInfo {
            src: ipv4_mapped(0x0a00_0001).to_be_bytes(),
            dst: ipv4_mapped(0x0a00_0002).to_be_bytes(),
            wire_len: SIZE,
            inner_len: SIZE - 50,
            vni: random.between(1, TENANTS as u64) as i32,
            vlan: -1,
            status: Status::Ok as u8,
            tunnel: Tunnel::Vxlan as u8,
            ip_version: 4,
            proto: 17,
            timestamp_ns: (i as u64 * SECOND_NS / PACKETS as u64) as i64,
            ..PacketInfo::zeroed()
        })
        .collect();
    let cir = PACKETS as u64 * u64::from(SIZE) / TENANTS as u64 * 2 / 3;
    let mut out: Vec<Processed> = Vec::with_capacity(PACKETS);
    let mut best = vec![f64::MAX; thread_counts.len()];
    for _ in 0..ROUNDS {
        for (best, &threads) in best.iter_mut().zip(&thread_counts) {
            let engine = Engine::with_threads(tables(), threads).unwrap();
            engine.update_with_qos(tables(), metered_and_shaped(TENANTS, cir)).unwrap();
            out.clear();
            let start = Instant::now();
            for records in records.chunks(batch) {
                engine.process(records, &mut out);
            }
            *best = best.min(start.elapsed().as_secs_f64());
        }
    }
    for (best, threads) in best.iter().zip(&thread_counts) {
        println!(
            "{TENANTS} tenants, batches of {batch}, {threads} threads: {:.1} Mpps ({:.1} ns/packet)",
            PACKETS as f64 / best / 1e6,
            best * 1e9 / PACKETS as f64
        );
    }
}
