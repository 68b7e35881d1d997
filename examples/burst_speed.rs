//! What microburst detection adds to enforcement, natively: `cargo run --release --example
//! burst_speed [PACKETS [TENANTS]]` (default 10 million packets, 1,000 tenants; best of 5
//! rounds, alternating). Every tenant has an srTCM meter and an EDT shaper (as
//! `enforce_speed`) and, when watched, a 1 us or 10 us window at a threshold two 114-byte
//! packets per microsecond would pass (1.9 Gbit/s), so that bursts are rare: the cost measured
//! is that of watching, per packet. `THRESHOLD=<bit/s>` sets another threshold (e.g. 100000000,
//! where many packets open a burst).
use bytemuck::Zeroable;
use isolane::bursts::{BurstConfig, BurstSpec, TenantBursts};
use isolane::enforce::{Processed, QosSpec};
use isolane::parse::PacketInfo;
use std::time::Instant;

#[path = "common/enforcer.rs"]
mod common;
use common::{enforcer, stand_in_classifier};
#[path = "common/qos.rs"]
mod qos;
use qos::metered_and_shaped;

const ROUNDS: usize = 5;
const SIZE: u32 = 114;
const SECOND_NS: u64 = 1_000_000_000;

fn main() {
    let packets: usize = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(10_000_000);
    let tenants: usize = std::env::args().nth(2).and_then(|a| a.parse().ok()).unwrap_or(1_000);
    // Tenants at random (splitmix64 of the packet index), so that no tenant sends in runs.
    let tenant_of = |i: usize| {
        let mut z = (i as u64).wrapping_add(1).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        (z ^ (z >> 31)) % tenants as u64
    };
    let records: Vec<PacketInfo> = (0..packets)
        .map(|i| PacketInfo {
            wire_len: SIZE,
            inner_len: SIZE - 50,
            timestamp_ns: (i as u64 * SECOND_NS / packets as u64) as i64,
            vni: tenant_of(i) as i32,
            src_port: (i % 7) as u16,
            ..PacketInfo::zeroed()
        })
        .collect();
    let offered = packets as u64 * u64::from(SIZE) / tenants as u64;
    let plain = metered_and_shaped(tenants, (offered * 2 / 3).max(1));
    let watched = |window_ns: u64| {
        let config = BurstConfig {
            window_ns,
            threshold_bps: std::env::var("THRESHOLD").ok().and_then(|t| t.parse().ok()).unwrap_or(1_900_000_000 * window_ns / 1_000),
            queue: None,
        };
        let bursts = plain.tenants.iter().map(|t| TenantBursts { name: t.name.to_string(), tenant: Some(config), classes: vec![] }).collect();
        QosSpec { bursts: BurstSpec { port: None, tenants: bursts, poll_ns: vec![1_000_000_000, 100_000_000, 10_000_000, 1_000_000] }, ..plain.clone() }
    };
    let specs = [("off", plain.clone()), ("1us", watched(1_000)), ("10us", watched(10_000))];
    let mut best = [f64::MAX; 3];
    let mut events = [0usize; 3];
    let mut out: Vec<Processed> = Vec::with_capacity(packets);
    for _ in 0..ROUNDS {
        for (slot, (_, spec)) in specs.iter().enumerate() {
            let mut enforcer = enforcer(spec);
            out.clear();
            let start = Instant::now();
            enforcer.classify_and_enforce(&records, &mut out, stand_in_classifier);
            best[slot] = best[slot].min(start.elapsed().as_secs_f64());
            enforcer.drain();
            events[slot] = enforcer.bursts().len();
        }
    }
    let per_packet = |seconds: f64| seconds * 1e9 / packets as f64;
    for (slot, (name, _)) in specs.iter().enumerate() {
        println!(
            "{tenants} tenants, bursts {name:>4}: {:5.1} ns/packet ({:+.1} over off), {} bursts",
            per_packet(best[slot]),
            per_packet(best[slot] - best[0]),
            events[slot]
        );
    }
}
