//! Cost per packet of the EDT shaper and the egress port model:
//! `cargo run --release --example port_speed [PACKETS [QUEUES,... [per-tenant|shared-fifo]]]`
//! (default 5,000,000 packets, 1,000 and 10,000 queues, both modes).
//! Traffic: random queues, sizes 64-1500 B, offered at 1.2x a 100 Gbit/s line, so queues stay
//! backlogged, buckets bind and the buffer overflows.
use isolane::shaping::{Departure, Port, PortConfig, PortMode, QueueConfig, ShaperParams, ShaperState};
use std::time::Instant;

const LINE: u64 = 12_500_000_000; // 100 Gbit/s in bytes/s

#[path = "common/rng.rs"]
mod rng;
use rng::Rng;

/// (time ns, bytes, queue) at 1.2x the line rate.
fn traffic(packets: usize, queues: u64, seed: u64) -> Vec<(u64, u32, u32)> {
    let mut rng = Rng(seed);
    let mut now = 0u64;
    let mut carry = 0u64;
    (0..packets)
        .map(|_| {
            let bytes = rng.between(64, 1500) as u32;
            let gap = u64::from(bytes) * 1_000_000_000 * 10 / 12 + carry;
            now += gap / LINE;
            carry = gap % LINE;
            (now, bytes, rng.below(queues) as u32)
        })
        .collect()
}

fn queue_configs(count: u64, seed: u64) -> Vec<QueueConfig> {
    let mut rng = Rng(seed);
    (0..count)
        .map(|_| QueueConfig {
            priority: rng.below(4) as u8,
            weight: 1 + rng.below(8) as u32,
            guarantee: if rng.below(2) == 0 { LINE / count / 2 } else { 0 },
            ceil: if rng.below(4) == 0 { LINE / 100 } else { 0 },
            ..QueueConfig::BEST_EFFORT
        })
        .collect()
}

#[inline(never)] // a symbol of its own, for callgrind
fn port_run(mode: PortMode, queues: u64, packets: &[(u64, u32, u32)]) -> (f64, usize, usize) {
    let config = PortConfig { line_rate: LINE, buffer_bytes: 32 << 20, mode };
    let mut port = Port::new(config, queue_configs(queues, 9)).unwrap();
    let mut out: Vec<Departure> = Vec::with_capacity(1 << 16);
    let (mut departed, mut dropped) = (0, 0);
    let start = Instant::now();
    for (index, &(ns, bytes, queue)) in packets.iter().enumerate() {
        dropped += usize::from(port.arrive(ns, bytes, queue, index as u64).is_err());
        if out.len() + 64 > out.capacity() || index % 4096 == 0 {
            port.drain_departures_into(&mut out);
            departed += out.len();
            out.clear();
        }
    }
    port.finish();
    port.drain_departures_into(&mut out);
    departed += out.len();
    (start.elapsed().as_secs_f64() * 1e9 / packets.len() as f64, departed, dropped)
}

fn main() {
    let count: usize = std::env::args().nth(1).map_or(5_000_000, |a| a.parse().unwrap());
    let queue_counts: Vec<u64> = std::env::args().nth(2).map_or(vec![1_000, 10_000], |a| a.split(',').map(|q| q.parse().unwrap()).collect());
    let modes = match std::env::args().nth(3).as_deref() {
        Some("per-tenant") => vec![PortMode::PerTenant],
        Some("shared-fifo") => vec![PortMode::SharedFifo],
        _ => vec![PortMode::PerTenant, PortMode::SharedFifo],
    };
    for queues in queue_counts {
        let packets = traffic(count, queues, 7);
        for mode in modes.iter().copied() {
            let best = (0..3).map(|_| port_run(mode, queues, &packets)).min_by(|a, b| a.0.total_cmp(&b.0)).unwrap();
            println!("port {mode:?}, {queues} queues: {:.1} ns/packet ({} departed, {} dropped)", best.0, best.1, best.2);
        }
    }
    if std::env::args().nth(3).is_some() {
        return;
    }
    // The shaper: one flow per queue, 1000 flows at 1/1000 of the line each (offered 1.2x).
    let packets = traffic(count, 1000, 8);
    let params = ShaperParams { rate: LINE / 1000, burst: LINE / 1000 / 1000, max_queue_bytes: 1 << 20, max_delay_ns: 10_000_000 };
    let mut best = f64::MAX;
    for _ in 0..3 {
        let mut flows = vec![ShaperState::default(); 1000];
        let mut passed = 0u64;
        let start = Instant::now();
        for &(ns, bytes, flow) in &packets {
            passed += u64::from(flows[flow as usize].shape(&params, ns, bytes).is_ok());
        }
        best = best.min(start.elapsed().as_secs_f64() * 1e9 / packets.len() as f64);
        std::hint::black_box(passed);
    }
    println!("EDT shaper, 1000 flows: {best:.1} ns/packet");
}
