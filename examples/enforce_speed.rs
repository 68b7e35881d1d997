//! Nanoseconds per packet of QoS enforcement alone (no classification): `Enforcer::enforce` on
//! already classified packets, for 1,000 and 1,000,000 tenants, each with an srTCM meter and an
//! EDT shaper: `cargo run --release --example enforce_speed [PACKETS [TENANTS...]]` (default 10
//! million packets, 1,000 and 1,000,000 tenants; best of 5 runs).
//!
//! Packets go to tenants at random, 114 bytes each, over one second of packet time, so that
//! each tenant offers 1.5x its CIR (the shaper runs at 1.25x CIR).
use bytemuck::Zeroable;
use isolane::engine::{Reason, Verdict, ALLOW};
use isolane::enforce::{Enforcer, Processed};
use isolane::parse::PacketInfo;
use std::time::Instant;

#[path = "common/qos.rs"]
mod qos;
use qos::metered_and_shaped;

const RUNS: usize = 5;
const SIZE: u32 = 114;
const SECOND_NS: u64 = 1_000_000_000;

fn main() {
    let packets: usize = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(10_000_000);
    let mut tenant_counts: Vec<usize> = std::env::args().skip(2).filter_map(|a| a.parse().ok()).collect();
    if tenant_counts.is_empty() {
        tenant_counts = vec![1_000, 1_000_000];
    }
    for tenants in tenant_counts {
        let records: Vec<PacketInfo> = (0..packets)
            .map(|i| PacketInfo { wire_len: SIZE, inner_len: SIZE - 50, timestamp_ns: (i as u64 * SECOND_NS / packets as u64) as i64, ..PacketInfo::zeroed() })
            .collect();
        // Tenants in a scattered order (a multiplicative hash of the packet index).
        let tenant_of = |i: usize| ((i as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 17) % tenants as u64;
        let verdicts: Vec<Verdict> =
            (0..packets).map(|i| Verdict { tenant: tenant_of(i) as i32, rule: 0, cls: 0, action: ALLOW, reason: Reason::Rule as u8 }).collect();
        let offered = packets as u64 * u64::from(SIZE) / tenants as u64; // bytes/s per tenant
        let spec = metered_and_shaped(tenants, (offered * 2 / 3).max(1));
        spec.check().unwrap();
        let names: Vec<String> = spec.tenants.iter().map(|t| t.name.clone()).collect();
        let mut out = vec![Processed::zeroed(); packets];
        let mut best = f64::MAX;
        for _ in 0..RUNS {
            let mut enforcer = Enforcer::default();
            enforcer.stage(Some(spec.clone()));
            enforcer.retarget(&names);
            let start = Instant::now();
            enforcer.enforce(&records, &verdicts, &mut out);
            best = best.min(start.elapsed().as_secs_f64());
        }
        let mut outcomes = [0u64; isolane::enforce::OUTCOMES];
        for row in &out {
            outcomes[usize::from(row.outcome)] += 1;
        }
        let share = |o: usize| 100.0 * outcomes[o] as f64 / packets as f64;
        println!(
            "{tenants:>9} tenants (meter + shaper each): {:5.1} ns/packet ({:.0}% passed, {:.0}% dropped by the meter, {:.0}% by the shaper)",
            best * 1e9 / packets as f64,
            share(0),
            share(4),
            share(5) + share(6)
        );
    }
}
