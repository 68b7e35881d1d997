//! Nanoseconds per packet for 1,000 and 1,000,000 meters hit in random order, one profile shared:
//! `cargo run --release --example meter_speed [PACKETS]` (default 10 million; best of 5 runs).
//!
//! Each meter is offered, on average, half its CIR and then 1.5x its CIR; packets go to meters
//! at random, so each meter's traffic is bursty and the colours cannot be predicted. One packet
//! in 8 comes in yellow (it matters to colour-aware meters only).
use isolane::meter::{default_burst, Color, MeterKind, MeterParams, MeterState};
use std::time::Instant;

#[path = "common/rng.rs"]
mod rng;
use rng::Rng;

/// Packet time advances this much per packet: 100 Mpps over all meters.
const STEP_NS: u64 = 10;
const RUNS: usize = 5;

fn main() {
    let packets: usize = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(10_000_000);
    for meters in [1_000usize, 1_000_000] {
        let mut rng = Rng(0x2545_f491_4f6c_dd1d);
        // Drawn before timing: which meter each packet goes to, and its size (64-1518 bytes).
        let work: Vec<(u32, u32)> = (0..packets).map(|_| (rng.below(meters as u64) as u32, rng.between(64, 1518) as u32)).collect();
        let mean_bytes = work.iter().map(|&(_, bytes)| u64::from(bytes)).sum::<u64>() / packets as u64;
        let offered = mean_bytes * (1_000_000_000 / STEP_NS) / meters as u64; // bytes/s per meter
        for (load, cir) in [("0.5x CIR", offered * 2), ("1.5x CIR", offered * 2 / 3)] {
            let burst = default_burst(cir, 1518);
            let kinds = [
                ("srTCM", MeterKind::SrTcm { cir, cbs: burst, ebs: burst }),
                ("trTCM", MeterKind::TrTcm { pir: cir * 5 / 4, pbs: burst, cir, cbs: burst }),
                ("RFC 4115", MeterKind::Rfc4115 { cir, cbs: burst, eir: cir / 4, ebs: burst }),
            ];
            for (name, kind) in kinds {
                for params in [MeterParams::blind(kind), MeterParams::aware(kind)] {
                    params.check().unwrap();
                    let (mut best, mut colours) = (f64::MAX, [0u64; 3]);
                    for _ in 0..RUNS {
                        let mut states = vec![MeterState::new(&params, 0); meters];
                        colours = [0u64; 3];
                        let start = Instant::now();
                        for (i, &(meter, bytes)) in work.iter().enumerate() {
                            let colour_in = if bytes & 7 == 0 { Color::Yellow } else { Color::Green };
                            let colour = states[meter as usize].mark(&params, i as u64 * STEP_NS, bytes, colour_in);
                            colours[colour as usize] += 1;
                        }
                        best = best.min(start.elapsed().as_secs_f64());
                    }
                    let share = |c: usize| 100.0 * colours[c] as f64 / packets as f64;
                    println!(
                        "{meters:>9} meters at {load}, {name:<8} {:<5}: {:5.1} ns/packet ({:.0}% green, {:.0}% yellow, {:.0}% red)",
                        if params.color_aware { "aware" } else { "blind" },
                        best * 1e9 / packets as f64,
                        share(0),
                        share(1),
                        share(2)
                    );
                }
            }
        }
    }
}
