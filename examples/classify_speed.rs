//! Build time, size and lookup rate on the ClassBench sets:
//! `cargo run --release --example classify_speed [DIR [SET]]` (default ../shared/classbench,
//! every set; SET names one, e.g. acl1_10k).
use isolane::classify::{ipv4_mapped, parse_classbench, Key, RuleTable};
use std::time::Instant;

fn main() {
    let dir = std::env::args().nth(1).unwrap_or_else(|| "../shared/classbench".to_string());
    let only = std::env::args().nth(2);
    for size in ["10k", "100k"] {
        for family in ["acl1", "fw1", "ipc1"] {
            let name = format!("{family}_{size}");
            if only.as_ref().is_some_and(|only| *only != name) {
                continue;
            }
            let rules = parse_classbench(&std::fs::read_to_string(format!("{dir}/{name}")).unwrap()).unwrap();
            let count = rules.len();
            let start = Instant::now();
            let table = RuleTable::new(rules).unwrap();
            let build = start.elapsed();
            let keys: Vec<Key> = std::fs::read_to_string(format!("{dir}/{name}_trace"))
                .unwrap()
                .lines()
                .map(|line| {
                    let f: Vec<i64> = line.split_whitespace().map(|v| v.parse().unwrap()).collect();
                    Key {
                        src: ipv4_mapped(f[0] as u32),
                        dst: ipv4_mapped(f[1] as u32),
                        src_port: f[2] as u16,
                        dst_port: f[3] as u16,
                        proto: f[4] as u8,
                        dscp: 0,
                    }
                })
                .collect();
            let mut out = vec![0i32; keys.len()];
            let mut best = f64::MAX;
            for _ in 0..std::env::var("ROUNDS").ok().and_then(|r| r.parse().ok()).unwrap_or(20) {
                let start = Instant::now();
                table.lookup_all(&keys, &mut out);
                best = best.min(start.elapsed().as_secs_f64());
            }
            println!(
                "{name}: {count} rules, {} tables, build {:.1} ms, {:.1} MB, lookup {:.2} Mpps",
                table.table_count(),
                build.as_secs_f64() * 1e3,
                table.memory_bytes() as f64 / 1e6,
                keys.len() as f64 / best / 1e6
            );
        }
    }
}
