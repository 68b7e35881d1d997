//! An engine on several threads gives what one thread gives, packet by packet and in every
//! statistic: random policies and traffic, updates that keep, reset, add and drop tenants,
//! batches of one tenant, packets out of time order, a port.

use bytemuck::Zeroable;

use crate::classify::{ipv4_mapped, Rule};
use crate::enforce::{ClassQos, ColorAction, Contract, Count, MeterSpec, Outcome, Processed, QosSpec, TenantQos, OUTCOMES};
use crate::engine::{Engine, TablesSpec, TenantSpec, ALLOW, DROP};
use crate::meter::{MeterKind, MeterParams};
use crate::parse::{PacketInfo, Status, Tunnel};
use crate::shaping::{PortConfig, PortMode, QueueConfig, ShaperParams};
use crate::test_rng::Rng;

/// A tenant of the random policies: its name, VNI and contract (None: no QoS at all).
#[derive(Clone)]
struct Tenant {
    name: String,
    vni: u32,
    classes: u16,
    qos: Option<TenantQos>,
}

fn random_meter(rng: &mut Rng) -> MeterSpec {
    let rate = |rng: &mut Rng| rng.between(2_000_000, 40_000_000);
    let burst = |rng: &mut Rng| rng.between(1_500, 100_000);
    let kind = match rng.below(3) {
        0 => MeterKind::SrTcm { cir: rate(rng), cbs: burst(rng), ebs: burst(rng) },
        1 => {
            let cir = rate(rng);
            MeterKind::TrTcm { pir: cir + rate(rng), pbs: burst(rng), cir, cbs: burst(rng) }
        }
        _ => MeterKind::Rfc4115 { cir: rate(rng), cbs: burst(rng), eir: rate(rng), ebs: burst(rng) },
    };
    let action = |rng: &mut Rng| match rng.below(3) {
        0 => ColorAction::Pass,
        1 => ColorAction::Remark(rng.below(64) as u8),
        _ => ColorAction::Drop,
    };
    let params = MeterParams { kind, color_aware: rng.below(2) == 0 };
    let count = [Count::Inner, Count::Outer, Count::Wire, Count::WireFcs][rng.below(4) as usize];
    MeterSpec { params, count, actions: [ColorAction::Pass, action(rng), action(rng)] }
}

fn random_contract(rng: &mut Rng) -> Contract {
    let meter = (rng.below(3) > 0).then(|| random_meter(rng));
    let shaper = (rng.below(2) == 0).then(|| ShaperParams {
        rate: rng.between(5_000_000, 50_000_000),
        burst: rng.between(1_500, 50_000),
        max_queue_bytes: rng.between(0, 1_000_000),
        max_delay_ns: rng.between(0, 10_000_000),
    });
    Contract { meter, shaper }
}

fn random_tenant(rng: &mut Rng, id: u32) -> Tenant {
    let classes = rng.between(1, 3) as u16;
    let name = format!("t{id}");
    let qos = (rng.below(5) > 0).then(|| TenantQos {
        name: name.as_str().into(),
        contract: random_contract(rng),
        classes: (0..classes)
            .map(|_| ClassQos {
                contract: if rng.below(2) == 0 { random_contract(rng) } else { Contract::default() },
                queue: QueueConfig::BEST_EFFORT,
                on_burst: None,
            })
            .collect(),
        on_burst: None,
        on_overload: None,
    });
    Tenant { name, vni: 1000 + id, classes, qos }
}

/// Rule `r` of every tenant matches destination port 1000 + r; it is class `r % classes`.
fn tables(tenants: &[Tenant]) -> TablesSpec {
    let spec = |t: &Tenant| {
        let rules: Vec<Rule> = (0..4).map(|r| Rule { dst_ports: (1000 + r, 1000 + r), ..Rule::ANY }).collect();
        TenantSpec {
            name: t.name.clone(),
            actions: vec![ALLOW, ALLOW, ALLOW, DROP],
            classes: (0..4).map(|r| r % t.classes).collect(),
            policy_rules: (0..4).collect(),
            rules,
            default_action: ALLOW,
            default_class: t.classes - 1,
        }
    };
    TablesSpec {
        tenants: tenants.iter().map(spec).collect(),
        vnis: tenants.iter().enumerate().map(|(index, t)| (t.vni, index as i32)).collect(),
        unknown_action: ALLOW,
        ..TablesSpec::default()
    }
}

fn qos(tenants: &[Tenant]) -> QosSpec {
    QosSpec { tenants: tenants.iter().filter_map(|t| t.qos.clone()).collect(), ..QosSpec::default() }
}

/// `count` packets from `vnis` (and some of no tenant), about a microsecond apart from
/// `start_ns`, some out of order, some truncated, some with negative times.
fn traffic(rng: &mut Rng, vnis: &[u32], count: usize, start_ns: i64) -> Vec<PacketInfo> {
    let mut time = start_ns;
    (0..count)
        .map(|_| {
            time += rng.below(2_000) as i64;
            let timestamp_ns = match rng.below(50) {
                0 => time - rng.below(50_000) as i64,
                1 => -1,
                _ => time,
            };
            let vni = if rng.below(20) == 0 { 99 } else { vnis[rng.below(vnis.len() as u64) as usize] };
            let wire_len = rng.between(64, 1500) as u32;
            let status = if rng.below(40) == 0 { Status::Truncated } else { Status::Ok };
            PacketInfo {
                src: ipv4_mapped(0x0a00_0001).to_be_bytes(),
                dst: ipv4_mapped(0x0a00_0002).to_be_bytes(),
                wire_len,
                inner_len: wire_len - 50,
                vni: vni as i32,
                vlan: -1,
                dst_port: 1000 + rng.below(5) as u16,
                status: status as u8,
                tunnel: Tunnel::Vxlan as u8,
                ip_version: 4,
                proto: 17,
                dscp: rng.below(64) as u8,
                timestamp_ns,
                ..PacketInfo::zeroed()
            }
        })
        .collect()
}

fn engine(tenants: &[Tenant], threads: usize) -> Engine {
    let engine = Engine::with_threads(TablesSpec::default(), threads).unwrap();
    engine.update_with_qos(tables(tenants), qos(tenants)).unwrap();
    engine
}

fn process(engine: &Engine, records: &[PacketInfo]) -> Vec<Processed> {
    let mut out = Vec::new();
    engine.process(records, &mut out);
    out
}

/// Runs every engine on `records` and checks that each agrees with the first (one thread),
/// whose results it returns.
fn assert_same(engines: &[Engine], records: &[PacketInfo], what: &str) -> Vec<Processed> {
    let expected = process(&engines[0], records);
    for engine in &engines[1..] {
        let threads = engine.threads();
        let out = process(engine, records);
        if let Some(i) = (0..records.len()).find(|&i| out[i] != expected[i]) {
            panic!("{what}, {threads} threads, packet {i} of {}: {:?}, one thread: {:?}", records.len(), out[i], expected[i]);
        }
        assert_eq!(engine.qos_stats(), engines[0].qos_stats(), "{what}, {threads} threads: statistics");
        assert_eq!(engine.counters(), engines[0].counters(), "{what}, {threads} threads: counters");
    }
    expected
}

fn vnis(tenants: &[Tenant]) -> Vec<u32> {
    tenants.iter().map(|t| t.vni).collect()
}

/// The next policy: some tenants dropped, some contracts changed, some new tenants, the order
/// shuffled (tenant indices move; state follows names).
fn next_policy(rng: &mut Rng, tenants: &[Tenant], next_id: &mut u32) -> Vec<Tenant> {
    let mut next: Vec<Tenant> = tenants.iter().filter(|_| rng.below(6) > 0).cloned().collect();
    for tenant in &mut next {
        if rng.below(4) == 0 {
            let changed = random_tenant(rng, 0);
            tenant.classes = changed.classes;
            tenant.qos = changed.qos.map(|q| TenantQos { name: tenant.name.as_str().into(), ..q });
        }
    }
    for _ in 0..rng.between(0, 3) {
        next.push(random_tenant(rng, *next_id));
        *next_id += 1;
    }
    for i in (1..next.len()).rev() {
        next.swap(i, rng.below(i as u64 + 1) as usize);
    }
    next
}

#[test]
fn several_threads_give_what_one_gives_across_updates() {
    let mut rng = Rng(0x5eed_0001);
    let mut outcomes = [0u64; OUTCOMES];
    for case in 0..12 {
        let mut next_id = rng.between(1, 40) as u32;
        let mut tenants: Vec<Tenant> = (0..next_id).map(|id| random_tenant(&mut rng, id)).collect();
        let engines: Vec<Engine> = [1, 2, 3].iter().map(|&threads| engine(&tenants, threads)).collect();
        let mut time = 0;
        for step in 0..4 {
            // Small batches run inline, large ones on the pool, the largest in several chunks.
            for count in [1, 100, 5_000, 40_000] {
                let records = traffic(&mut rng, &vnis(&tenants), count, time);
                time = records.iter().map(|r| r.timestamp_ns).max().unwrap_or(time);
                for row in assert_same(&engines, &records, &format!("case {case}, policy {step}, batch of {count}")) {
                    outcomes[row.outcome as usize] += 1;
                }
            }
            tenants = next_policy(&mut rng, &tenants, &mut next_id);
            for engine in &engines {
                engine.update_with_qos(tables(&tenants), qos(&tenants)).unwrap();
            }
        }
    }
    // The traffic tries every stage: without a port, every outcome but the port's and pending.
    for outcome in [Outcome::Pass, Outcome::Remarked, Outcome::DropClassifier, Outcome::DropMeter, Outcome::DropShaperBytes, Outcome::DropShaperTime] {
        assert!(outcomes[outcome as usize] > 100, "{outcome:?}: {outcomes:?}");
    }
}

#[test]
fn one_tenant_with_every_packet() {
    let mut rng = Rng(0x5eed_0002);
    let tenants: Vec<Tenant> = (0..8).map(|id| random_tenant(&mut rng, id)).collect();
    let busy = tenants.iter().find(|t| t.qos.is_some()).expect("a tenant with a contract");
    let engines: Vec<Engine> = [1, 2, 4].iter().map(|&threads| engine(&tenants, threads)).collect();
    let records = traffic(&mut rng, &[busy.vni], 30_000, 0);
    assert_same(&engines, &records, "one tenant");
    let packets: u64 = engines[1].qos_stats().iter().map(|(_, stats)| stats.counters.packets).sum();
    assert_eq!(packets, 30_000, "every packet is counted once");
}

#[test]
fn a_port_on_several_threads_gives_what_one_gives() {
    let mut rng = Rng(0x5eed_0003);
    let tenants: Vec<Tenant> = (0..6).map(|id| random_tenant(&mut rng, id)).collect();
    let engines: Vec<Engine> = [1, 2, 3].iter().map(|&threads| engine(&tenants, threads)).collect();
    let port = QosSpec { port: Some(PortConfig { line_rate: 100_000_000, buffer_bytes: 64 << 10, mode: PortMode::PerTenant }), ..qos(&tenants) };
    for engine in &engines {
        engine.update_with_qos(tables(&tenants), port.clone()).unwrap();
    }
    let mut outcomes = [0u64; OUTCOMES];
    let mut time = 0;
    for count in [100, 20_000, 50_000] {
        let records = traffic(&mut rng, &vnis(&tenants), count, time);
        time = records.iter().map(|r| r.timestamp_ns).max().unwrap_or(time);
        for row in assert_same(&engines, &records, &format!("a port, batch of {count}")) {
            outcomes[row.outcome as usize] += 1;
        }
    }
    // The port queued, sent and dropped packets, and some were still on their way to it.
    for outcome in [Outcome::Pass, Outcome::DropPortBuffer, Outcome::Pending] {
        assert!(outcomes[outcome as usize] > 100, "{outcome:?}: {outcomes:?}");
    }
    assert!(Engine::with_threads(TablesSpec::default(), 0).is_err(), "no threads");
}
