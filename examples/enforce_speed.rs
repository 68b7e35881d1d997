//! Nanoseconds per packet of QoS enforcement, for 1,000 and 1,000,000 tenants, each with an
//! srTCM meter and an EDT shaper: `cargo run --release --example enforce_speed [PACKETS
//! [TENANTS...]] [--distinct]` (default 10 million packets, 1,000 and 1,000,000 tenants; best of
//! 5 runs). `--distinct`: every tenant's shaper holds its own queue limit, so that no two
//! tenants share a contract (each packet then reads a profile of its own).
//! Two numbers per tenant count:
//!
//! - alone: `Enforcer::enforce` on already classified packets, records read from memory;
//! - over classification: `Enforcer::classify_and_enforce` with a stand-in classifier (it reads
//!   each record's VNI as its tenant), minus that classifier alone over the same chunks: what
//!   enforcement adds in the engine, where a chunk is enforced while the classifier's reads
//!   keep its records in cache.
//!
//! Packets go to tenants at random, 114 bytes each, over one second of packet time, so that
//! each tenant offers 1.5x its CIR (the shaper runs at 1.25x CIR).
use bytemuck::Zeroable;
use isolane::enforce::Processed;
use isolane::parse::PacketInfo;
use isolane::verdict::Verdict;
use std::time::Instant;

#[path = "common/enforcer.rs"]
mod common;
use common::{enforcer, stand_in_classifier, verdict};
#[path = "common/qos.rs"]
mod qos;
use qos::metered_and_shaped;

const RUNS: usize = 5;
const SIZE: u32 = 114;
const SECOND_NS: u64 = 1_000_000_000;
/// The engine's chunk with the state in cache (`enforce.rs`): the stand-in classifier alone
/// runs over chunks of this many (its cost hardly depends on it).
const CHUNK: usize = 256;

fn main() {
    let packets: usize = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(10_000_000);
    let mut tenant_counts: Vec<usize> = std::env::args().skip(2).filter_map(|a| a.parse().ok()).collect();
    let distinct = std::env::args().any(|a| a == "--distinct");
    if tenant_counts.is_empty() {
        tenant_counts = vec![1_000, 1_000_000];
    }
    for tenants in tenant_counts {
        // Tenants in a scattered order (a multiplicative hash of the packet index), as VNIs.
        let tenant_of = |i: usize| ((i as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 17) % tenants as u64;
        let records: Vec<PacketInfo> = (0..packets)
            .map(|i| PacketInfo {
                wire_len: SIZE,
                inner_len: SIZE - 50,
                timestamp_ns: (i as u64 * SECOND_NS / packets as u64) as i64,
                vni: tenant_of(i) as i32,
                ..PacketInfo::zeroed()
            })
            .collect();
        let verdicts: Vec<Verdict> = records.iter().map(|r| verdict(r.vni)).collect();
        let offered = packets as u64 * u64::from(SIZE) / tenants as u64; // bytes/s per tenant
        let mut spec = metered_and_shaped(tenants, (offered * 2 / 3).max(1));
        if distinct {
            for (t, tenant) in spec.tenants.iter_mut().enumerate() {
                tenant.contract.shaper.as_mut().expect("a shaper").max_queue_bytes += t as u64;
            }
        }
        spec.check().unwrap();
        let mut out: Vec<Processed> = Vec::with_capacity(packets);
        let alone = best_of(|| {
            let mut enforcer = enforcer(&spec);
            out.clear();
            let start = Instant::now();
            enforcer.enforce(&records, &verdicts, &mut out);
            start.elapsed().as_secs_f64()
        });
        let summary = summary(&out);
        let both = best_of(|| {
            let mut enforcer = enforcer(&spec);
            out.clear();
            let start = Instant::now();
            enforcer.classify_and_enforce(&records, &mut out, stand_in_classifier);
            start.elapsed().as_secs_f64()
        });
        assert_eq!(summary, self::summary(&out), "both ways give the same results");
        let mut chunk_verdicts = vec![Verdict::zeroed(); CHUNK];
        let classify_only = best_of(|| {
            let start = Instant::now();
            for chunk in records.chunks(CHUNK) {
                stand_in_classifier(chunk, &mut chunk_verdicts[..chunk.len()]);
                std::hint::black_box(&mut chunk_verdicts);
            }
            start.elapsed().as_secs_f64()
        });
        let per_packet = |seconds: f64| seconds * 1e9 / packets as f64;
        println!(
            "{tenants:>9} tenants (meter + shaper each{}): alone {:5.1} ns/packet, over classification {:5.1} ({:.0}% passed, {:.0}% dropped by the meter, {:.0}% by the shaper)",
            if distinct { ", distinct" } else { "" },
            per_packet(alone),
            per_packet(both - classify_only),
            summary[0],
            summary[1],
            summary[2]
        );
    }
}

fn best_of(mut run: impl FnMut() -> f64) -> f64 {
    (0..RUNS).map(|_| run()).fold(f64::MAX, f64::min)
}

/// Percentages passed, dropped by the meter, dropped by a shaper.
fn summary(out: &[Processed]) -> [u64; 3] {
    let mut outcomes = [0u64; isolane::enforce::OUTCOMES];
    for row in out {
        outcomes[usize::from(row.outcome)] += 1;
    }
    let share = |count: u64| 100 * count / out.len() as u64;
    [share(outcomes[0]), share(outcomes[4]), share(outcomes[5] + outcomes[6])]
}
