//! What `Engine::apply` costs as the tenants grow (the workload of bench/control_path.py, natively):
//! `cargo run --release --example apply_cost [TENANTS...]`. Installs TENANTS simple tenants (one
//! VNI, one rule, an srTCM meter, a guarantee and a ceiling, one class, a port), prints the heap
//! the engine holds per tenant (counted by the allocator), then the median and p90 of one-tenant
//! replacements, inserts at the end, removals of the last tenant, then inserts and removals in the middle. `--heap`: only the heap,
//! then exit with the engine held (for `heaptrack`, whose leaks are then the engine's heap).
//! `--distinct`: every tenant's meter at its own rate, so that no two tenants share a contract.
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use isolane::classify::{ipv4_mapped, Rule};
use isolane::enforce::{BurstRow, ClassInput, MeterRow, PortInput, QosSettings, TenantInput};
use isolane::engine::{Delta, Engine, Route, TablesSpec, TenantEntry, TenantOp, TenantSpec, ALLOW};

/// The system allocator, counting the bytes it holds.
struct Counting;

static HELD: AtomicUsize = AtomicUsize::new(0);
static BLOCKS: AtomicUsize = AtomicUsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        HELD.fetch_add(layout.size(), Ordering::Relaxed);
        BLOCKS.fetch_add(1, Ordering::Relaxed);
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        HELD.fetch_sub(layout.size(), Ordering::Relaxed);
        BLOCKS.fetch_sub(1, Ordering::Relaxed);
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// Replacements timed; and inserts and removals, each undoing an insert, at the end and in the middle.
const RUNS: usize = 200;
const INSERTS: usize = 20;

/// Tenant `i` as bench/control_path.py writes it, as the policy compiler hands it over.
fn tenant(i: usize, rate_mbps: u64, distinct: bool) -> Box<TenantEntry> {
    let name = format!("t{i}");
    let dst = ipv4_mapped(u32::from_be_bytes([10, (i / 250 % 256) as u8, (i % 250) as u8, 0]));
    let rule = Rule { dst, dst_len: 120, dst_ports: (443, 443), proto: 6, proto_mask: 0xff, ..Rule::ANY };
    let tables = TenantSpec {
        name: name.clone(),
        rules: vec![rule],
        actions: vec![ALLOW],
        classes: vec![0],
        policy_rules: vec![0],
        default_action: ALLOW,
        default_class: 0,
    };
    let rate = rate_mbps * 125_000;
    let cir = if distinct { 1_250_000 + i as u64 * 125 } else { rate };
    let meter = MeterRow { kind: 1, byte_count: 1, cir, cbs: 9216, ebs: 9216, actions: [0, 0, 2], ..MeterRow::default() };
    let class = ClassInput { priority: 7, weight: 1, ceil: 125_000_000, ..ClassInput::default() };
    let qos = TenantInput { rate, burst: 9216, ceil: 125_000_000, meter: Some(meter), classes: [class].into(), ..TenantInput::default() };
    Box::new(TenantEntry { tables, route: Route { vnis: vec![1000 + i as u32], ..Route::default() }, qos })
}

fn settings() -> QosSettings {
    let microburst = BurstRow { window_ns: 10_000, threshold_bps: 4_000_000_000_000, queue: None };
    let port = PortInput { rate: 500_000_000_000, buffer: 64_000_000, microburst, ..PortInput::default() };
    QosSettings { port: Some(port), poll_ns: vec![1_000_000_000], ..QosSettings::default() }
}

/// Median and p90 of `runs` applies of `delta(k)`, in microseconds.
fn time(engine: &Engine, runs: usize, delta: impl Fn(usize) -> Delta) -> (f64, f64) {
    let mut micros: Vec<f64> = (0..runs)
        .map(|k| {
            let delta = delta(k);
            let start = Instant::now();
            engine.apply(delta).expect("the bench's update");
            start.elapsed().as_secs_f64() * 1e6
        })
        .collect();
    micros.sort_by(f64::total_cmp);
    (micros[runs / 2], micros[runs * 9 / 10])
}

fn run(count: usize, heap_only: bool, distinct: bool) {
    let (before, blocks_before) = (HELD.load(Ordering::Relaxed), BLOCKS.load(Ordering::Relaxed));
    let engine = Engine::new(TablesSpec::default()).expect("an empty engine");
    let ops = (0..count).map(|i| TenantOp::Insert { at: i, tenant: tenant(i, 10, distinct) }).collect();
    engine.apply(Delta { ops, settings: Some(settings()), ..Delta::default() }).expect("the bench's policy");
    let (held, blocks) = (HELD.load(Ordering::Relaxed) - before, BLOCKS.load(Ordering::Relaxed) - blocks_before);
    println!("{count} tenants: {:.0} B of heap per tenant, in {:.1} blocks", held as f64 / count as f64, blocks as f64 / count as f64);
    if heap_only {
        std::process::exit(0);
    }
    let replace = time(&engine, RUNS, |k| Delta {
        ops: vec![TenantOp::Replace { at: k * 97 % count, tenant: tenant(k * 97 % count, 20 + k as u64 % 2, distinct) }],
        ..Delta::default()
    });
    let insert =
        time(&engine, INSERTS, |k| Delta { ops: vec![TenantOp::Insert { at: count + k, tenant: tenant(count + k, 10, distinct) }], ..Delta::default() });
    let remove = time(&engine, INSERTS, |k| Delta { ops: vec![TenantOp::Remove { at: count + INSERTS - 1 - k }], ..Delta::default() });
    let middle = count / 2;
    let insert_middle =
        time(&engine, INSERTS, |k| Delta { ops: vec![TenantOp::Insert { at: middle, tenant: tenant(count + INSERTS + k, 10, distinct) }], ..Delta::default() });
    let remove_middle = time(&engine, INSERTS, |k| Delta { ops: vec![TenantOp::Remove { at: middle + INSERTS - 1 - k }], ..Delta::default() });
    let timed = [
        ("replace", replace),
        ("insert at the end", insert),
        ("remove the last", remove),
        ("insert in the middle", insert_middle),
        ("remove from the middle", remove_middle),
    ];
    for (what, (median, p90)) in timed {
        println!("  {what:<22} median {median:8.1} us  p90 {p90:8.1} us");
    }
}

fn main() {
    let heap_only = std::env::args().any(|a| a == "--heap");
    let distinct = std::env::args().any(|a| a == "--distinct");
    let counts: Vec<usize> = std::env::args().skip(1).filter(|a| !a.starts_with("--")).map(|a| a.parse().expect("a tenant count")).collect();
    for count in if counts.is_empty() { vec![1000, 10_000, 100_000] } else { counts } {
        run(count, heap_only, distinct);
    }
}
