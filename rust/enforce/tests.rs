//! The enforcement pipeline on hand-made verdicts: stage order, colour actions, shaping, the
//! port, statistics that add up, and state kept or reset across updates.

mod moves;
mod port_settings;

use super::*;
use crate::meter::{MeterKind, MeterParams};
use crate::shaping::ShaperParams;
use crate::shaping::{PortMode, QueueConfig};
use crate::verdict::{Reason, ALLOW};
use proptest::prelude::*;
use std::sync::Arc;

const MS: u64 = 1_000_000;

fn packet(timestamp_ns: i64, wire_len: u32) -> PacketInfo {
    PacketInfo { timestamp_ns, wire_len, inner_len: wire_len - 50, vni: -1, vlan: -1, dscp: 10, ..Zeroable::zeroed() }
}

fn verdict(tenant: i32, cls: i32, action: u8) -> Verdict {
    Verdict { tenant, rule: -1, cls, action, reason: Reason::Default as u8 }
}

fn srtcm(cir: u64, cbs: u64, ebs: u64, actions: [ColorAction; 3]) -> MeterSpec {
    MeterSpec { params: MeterParams::blind(MeterKind::SrTcm { cir, cbs, ebs }), count: Count::Outer, actions }
}

const POLICE: [ColorAction; 3] = [ColorAction::Pass, ColorAction::Pass, ColorAction::Drop];

fn tenant(name: &str, contract: Contract, classes: Vec<Contract>) -> TenantQos {
    let classes = classes.into_iter().map(|contract| ClassQos { contract, queue: QueueConfig::BEST_EFFORT, on_burst: None }).collect();
    TenantQos { name: name.into(), contract, classes, on_burst: None, on_overload: None }
}

fn spec(tenants: Vec<TenantQos>) -> QosSpec {
    QosSpec { tenants, ..QosSpec::default() }
}

fn names(spec: &QosSpec) -> Vec<Arc<str>> {
    spec.tenants.iter().map(|t| t.name.clone()).collect()
}

fn enforcer(spec: QosSpec) -> Enforcer {
    spec.check().unwrap();
    let mut enforcer = Enforcer::default();
    let names = names(&spec);
    enforcer.stage(Some(spec));
    enforcer.retarget(&names);
    enforcer
}

fn run(enforcer: &mut Enforcer, packets: &[(PacketInfo, Verdict)]) -> Vec<Processed> {
    let records: Vec<PacketInfo> = packets.iter().map(|p| p.0).collect();
    let verdicts: Vec<Verdict> = packets.iter().map(|p| p.1).collect();
    let mut out = Vec::new();
    enforcer.enforce(&records, &verdicts, &mut out);
    out
}

fn outcomes(out: &[Processed]) -> Vec<u8> {
    out.iter().map(|p| p.outcome).collect()
}

/// Every packet in is counted once: by its outcome, or as on its way to the port.
fn assert_stats_add_up(enforcer: &Enforcer, packets_in: u64) {
    let mut total = 0;
    for (key, stats) in enforcer.stats() {
        let c = &stats.counters;
        let counted: u64 = c.outcome_packets.iter().sum::<u64>() + stats.in_flight;
        assert_eq!(counted, c.packets, "{key:?}: outcomes + in flight = packets in");
        assert_eq!(c.outcome_packets[Outcome::Pending as usize], 0, "{key:?}: pending is never a final outcome");
        assert_eq!(c.color_packets.iter().sum::<u64>() + c.outcome_packets[Outcome::DropClassifier as usize], c.packets, "{key:?}");
        total += c.packets;
    }
    assert_eq!(total, packets_in);
}

#[test]
fn without_a_contract_packets_pass_green_at_their_arrival_time() {
    let mut e = enforcer(spec(vec![]));
    let out = run(&mut e, &[(packet(5, 100), verdict(-1, -1, ALLOW)), (packet(7, 100), verdict(-1, -1, DROP))]);
    assert_eq!(outcomes(&out), [Outcome::Pass as u8, Outcome::DropClassifier as u8]);
    assert_eq!((out[0].color, out[0].release_ns, out[0].dscp), (Color::Green as u8, 5, 10));
    assert_eq!((out[1].color, out[1].release_ns), (NO_COLOR, -1));
    assert_stats_add_up(&e, 2);
}

#[test]
fn a_policer_passes_the_burst_then_the_rate_and_drops_red() {
    // 1,000 B/s, CBS 300 B, no E: three 100 B packets at once, then one every 100 ms.
    let meter = srtcm(1000, 300, 0, POLICE);
    let mut e = enforcer(spec(vec![tenant("a", Contract { meter: Some(meter), shaper: None }, vec![Contract::default()])]));
    let at = |ms: u64| (packet((ms * MS) as i64, 100), verdict(0, 0, ALLOW));
    let out = run(&mut e, &[at(0), at(0), at(0), at(0), at(50), at(100), at(100)]);
    let (pass, drop) = (Outcome::Pass as u8, Outcome::DropMeter as u8);
    assert_eq!(outcomes(&out), [pass, pass, pass, drop, drop, pass, drop]);
    assert_eq!(out[3].color, Color::Red as u8);
    assert_eq!({ out[3].release_ns }, -1);
    assert_stats_add_up(&e, 7);
}

#[test]
fn a_packet_the_classifier_drops_spends_no_tokens() {
    let meter = srtcm(1000, 100, 0, POLICE);
    let mut e = enforcer(spec(vec![tenant("a", Contract { meter: Some(meter), shaper: None }, vec![Contract::default()])]));
    let out = run(&mut e, &[(packet(0, 100), verdict(0, -1, DROP)), (packet(0, 100), verdict(0, 0, ALLOW))]);
    assert_eq!(outcomes(&out), [Outcome::DropClassifier as u8, Outcome::Pass as u8]);
}

#[test]
fn a_tenant_drop_spends_no_class_tokens_and_a_colour_aware_class_meter_takes_the_tenant_colour() {
    // Tenant: CBS 100, EBS 100, yellow re-marked to 12. Class: colour-aware, large buckets.
    let tenant_meter = srtcm(1, 100, 100, [ColorAction::Pass, ColorAction::Remark(12), ColorAction::Drop]);
    let class_meter = MeterSpec { params: MeterParams::aware(MeterKind::SrTcm { cir: 1, cbs: 1000, ebs: 1000 }), ..srtcm(1, 1, 1, POLICE) };
    let contract = |meter| Contract { meter: Some(meter), shaper: None };
    let mut e = enforcer(spec(vec![tenant("a", contract(tenant_meter), vec![contract(class_meter)])]));
    let p = (packet(0, 100), verdict(0, 0, ALLOW));
    let out = run(&mut e, &[p, p, p, p]);
    // 1: green, green. 2: tenant yellow -> class aware keeps yellow though its C could pay
    // (re-marked). 3: tenant red, dropped: class buckets untouched. 4: red again.
    assert_eq!(outcomes(&out), [Outcome::Pass as u8, Outcome::Remarked as u8, Outcome::DropMeter as u8, Outcome::DropMeter as u8]);
    assert_eq!(out.iter().map(|p| p.color).collect::<Vec<_>>(), [0, 1, 2, 2]);
    assert_eq!((out[0].dscp, out[1].dscp), (10, 12));
    let class_state = &e.class_stages[0].meter;
    assert_eq!(class_state.committed_bytes(), 900, "only the first packet spent class C");
    assert_eq!(class_state.excess_or_peak_bytes(), 900, "the yellow one spent class E");
}

#[test]
fn the_release_is_the_later_shaper_and_a_drop_leaves_both_shapers_untouched() {
    // Tenant: 1,000 B/s, burst 100, a large queue. Class: 500 B/s, burst 100, queue 150 B.
    let shaper = |rate, queue| ShaperParams { rate, burst: 100, max_queue_bytes: queue, max_delay_ns: u64::MAX };
    let tenant_contract = Contract { meter: None, shaper: Some(shaper(1000, 10_000)) };
    let class_contract = Contract { meter: None, shaper: Some(shaper(500, 150)) };
    let mut e = enforcer(spec(vec![tenant("a", tenant_contract, vec![class_contract])]));
    let p = (packet(0, 100), verdict(0, 0, ALLOW));
    let out = run(&mut e, &[p, p, p, p]);
    let releases: Vec<i64> = out.iter().map(|p| p.release_ns).collect();
    // The second packet: the tenant would release it at 100 ms, the class at 200 ms. The third
    // would leave the class owing 200 B (> 150): dropped, and the tenant did not charge it.
    assert_eq!(releases, [0, 200 * MS as i64, -1, -1]);
    assert_eq!(out[2].outcome, Outcome::DropShaperBytes as u8);
    let tenant_shaper = e.tenants[0].stage.shaper;
    assert_eq!(tenant_shaper.backlog_bytes(&shaper(1000, 10_000), 0), 100, "the tenant shaper charged only the two passed");
}

#[test]
fn the_port_sees_packets_at_their_release_and_its_verdicts_reach_the_batch_or_the_statistics() {
    // 1,000 B/s line, 350 B buffer. Class shaper 500 B/s, burst 100.
    let shaper = ShaperParams { rate: 500, burst: 100, max_queue_bytes: 10_000, max_delay_ns: u64::MAX };
    let mut s = spec(vec![
        tenant("a", Contract::default(), vec![Contract { meter: None, shaper: Some(shaper) }]),
        tenant("b", Contract::default(), vec![Contract::default()]),
    ]);
    s.port = Some(PortConfig { line_rate: 1000, buffer_bytes: 350, mode: PortMode::PerTenant });
    let mut e = enforcer(s);
    let a = (packet(0, 100), verdict(0, 0, ALLOW));
    let b = |ms: u64| (packet((ms * MS) as i64, 100), verdict(1, 0, ALLOW));
    // a, a at 0: released at 0 and 200 ms. b x4 at 0: every arrival at 0 waits in the buffer
    // until the decision at 0, so a + b + b fill 300 of its 350 B and the last two b drop.
    let out = run(&mut e, &[a, a, b(0), b(0), b(0), b(0)]);
    assert_eq!({ out[1].release_ns }, 200 * MS as i64);
    assert_eq!(outcomes(&out), [0, Outcome::Pending as u8, 0, 0, Outcome::DropPortBuffer as u8, Outcome::DropPortBuffer as u8]);
    assert_stats_add_up(&e, 6);
    let in_flight: u64 = e.stats().iter().map(|s| s.1.in_flight).sum();
    assert_eq!(in_flight, 1);
    // A later batch passes its release: it reaches the port and is counted there.
    let out = run(&mut e, &[b(400)]);
    assert_eq!(outcomes(&out), [0]);
    assert_stats_add_up(&e, 7);
    let a_stats = &e.stats().into_iter().find(|(k, _)| k == &(Some("a".to_string()), Some(0))).unwrap().1;
    assert_eq!((a_stats.in_flight, a_stats.counters.outcome_packets[0]), (0, 2));
    assert_eq!(a_stats.delay_ns.count(), 2, "both of a's packets have started sending");
}

/// Statistics rows are [`Enforcer::stats`] in its order, a tenant named by an index that
/// updates do not change (a removed tenant's rows stay, under their name).
#[test]
fn statistics_rows_follow_stats_and_tenants_keep_their_index() {
    let classes = || vec![Contract::default(), Contract::default()];
    let mut s = spec(vec![tenant("a", Contract::default(), classes()), tenant("b", Contract::default(), classes())]);
    s.port = Some(PortConfig { line_rate: 1000, buffer_bytes: 350, mode: PortMode::PerTenant });
    let mut e = enforcer(s.clone());
    let p = |tenant, cls, action| (packet(0, 100), verdict(tenant, cls, action));
    run(&mut e, &[p(0, 0, ALLOW), p(0, 1, ALLOW), p(1, 0, ALLOW), p(1, 0, ALLOW), p(1, 0, ALLOW), p(1, -1, DROP), p(-1, -1, ALLOW)]);
    assert_rows_match_stats(&mut e);
    let first = e.stats_tenants();
    assert_eq!(first, ["a", "b"]);
    s.tenants = vec![tenant("c", Contract::default(), classes()), s.tenants[1].clone()];
    let names = names(&s);
    e.stage(Some(s));
    e.retarget(&names);
    run(&mut e, &[p(0, 0, ALLOW), p(1, 1, ALLOW)]);
    e.drain();
    let rows = assert_rows_match_stats(&mut e);
    assert_eq!(e.stats_tenants(), ["a", "b", "c"], "names only grow: a's rows are archived, c is new");
    assert!(rows.iter().any(|row| row.delay_count > 0 && row.delay_max_ns > 0), "{rows:?}");
    assert!(rows.iter().any(|row| row.outcome_packets[Outcome::DropPortBuffer as usize] > 0), "{rows:?}");
}

fn assert_rows_match_stats(e: &mut Enforcer) -> Vec<StatsRow> {
    let rows = e.stats_rows();
    let (stats, tenants) = (e.stats(), e.stats_tenants());
    assert_eq!(rows.len(), stats.len());
    for (row, (key, stats)) in rows.iter().zip(stats) {
        let tenant = usize::try_from(row.tenant).ok().map(|index| tenants[index].clone());
        assert_eq!((tenant, u16::try_from(row.cls).ok()), key);
        let c = &stats.counters;
        assert_eq!((row.packets, row.bytes, row.color_packets, row.color_bytes), (c.packets, c.bytes, c.color_packets, c.color_bytes), "{key:?}");
        assert_eq!((row.outcome_packets, row.outcome_bytes, row.in_flight), (c.outcome_packets, c.outcome_bytes, stats.in_flight), "{key:?}");
        let d = &stats.delay_ns;
        let quantiles = [d.p50(), d.p99(), d.p999()].map(|q| q.unwrap_or(0));
        assert_eq!(
            [row.delay_count, row.delay_p50_ns, row.delay_p99_ns, row.delay_p999_ns, row.delay_max_ns],
            [d.count(), quantiles[0], quantiles[1], quantiles[2], d.max()]
        );
        assert_eq!(row.outcome_packets.iter().sum::<u64>() + row.in_flight, row.packets, "{key:?}: outcomes + in flight = packets in");
    }
    assert_delay_histograms_follow_rows(e, &rows);
    rows
}

/// The histograms' rows are the statistics rows; their counts are the rows' delays at each edge.
fn assert_delay_histograms_follow_rows(e: &mut Enforcer, rows: &[StatsRow]) {
    let edges = [0, 127, 1023, (1 << 20) - 1, u64::MAX];
    let histograms = e.delay_histograms(&edges);
    assert_eq!(histograms.rows, rows);
    for ((row, (_, stats)), at_or_below) in rows.iter().zip(e.stats()).zip(histograms.at_or_below.chunks(edges.len())) {
        assert_eq!(at_or_below, edges.map(|edge| stats.delay_ns.count_at_or_below(edge)));
        assert_eq!(at_or_below[edges.len() - 1], row.delay_count, "every delay is at or below u64::MAX");
    }
    let sums: Vec<u128> = e.stats().iter().map(|(_, stats)| stats.delay_ns.sum()).collect();
    assert_eq!(histograms.sum_ns, sums);
}

/// `isolane.STATS_DTYPE` is read from these fields: they must tile the row, no byte unnamed.
#[test]
fn the_statistics_fields_cover_the_row_once() {
    let mut fields = stats_fields();
    fields.sort_by_key(|field| field.2);
    let mut end = 0;
    for (name, format, offset) in fields {
        assert_eq!(offset, end, "{name} starts where the field before it ends");
        let count: usize = format.strip_prefix('(').map_or(1, |rest| rest.split(',').next().unwrap().parse().unwrap());
        let size = format.chars().last().unwrap().to_digit(10).unwrap() as usize;
        end += count * size;
    }
    assert_eq!(end, std::mem::size_of::<StatsRow>());
}

#[test]
fn an_update_keeps_unchanged_contracts_and_resets_changed_ones() {
    let meter = |cbs| Contract { meter: Some(srtcm(1, cbs, 0, POLICE)), shaper: None };
    let mut e = enforcer(spec(vec![tenant("a", meter(100), vec![Contract::default()]), tenant("b", meter(100), vec![Contract::default()])]));
    let p = |t| (packet(0, 100), verdict(t, 0, ALLOW));
    assert_eq!(outcomes(&run(&mut e, &[p(0), p(1)])), [0, 0]);
    // b's burst changes; the tenants also swap places.
    let next = spec(vec![tenant("b", meter(101), vec![Contract::default()]), tenant("a", meter(100), vec![Contract::default()])]);
    let names = names(&next);
    e.stage(Some(next));
    e.retarget(&names);
    // a (now index 1) kept its empty bucket; b (index 0) starts full.
    assert_eq!(outcomes(&run(&mut e, &[p(1), p(0)])), [Outcome::DropMeter as u8, 0]);
    assert_stats_add_up(&e, 4);
    let a = e.stats().into_iter().find(|(k, _)| k.0.as_deref() == Some("a")).unwrap().1;
    assert_eq!(a.counters.packets, 2, "statistics run on by name");
}

/// A full update in which only port queues change (every tenant re-weighed) keeps the meters
/// and the port's packets; a change of port setting starts a new port.
#[test]
fn an_update_that_only_re_weighs_the_queues_keeps_meters_and_the_port() {
    let meter = Contract { meter: Some(srtcm(1, 100, 0, POLICE)), shaper: None };
    let weighed = |name: &str, weight: u32| TenantQos {
        classes: vec![ClassQos { contract: Contract::default(), queue: QueueConfig { weight, ..QueueConfig::BEST_EFFORT }, on_burst: None }],
        ..tenant(name, meter, vec![])
    };
    let port = PortConfig { line_rate: 1000, buffer_bytes: 1000, mode: PortMode::PerTenant };
    let with_port = |tenants, port| QosSpec { port: Some(port), ..spec(tenants) };
    let mut e = enforcer(with_port(vec![weighed("a", 1), weighed("b", 1)], port));
    let p = |t| (packet(0, 100), verdict(t, 0, ALLOW));
    run(&mut e, &[p(0), p(1)]); // each bucket empties; both wait at the port at packet time 0
    let sent = |e: &Enforcer| e.stats().iter().map(|(_, s)| s.delay_ns.count()).sum::<u64>();
    assert_eq!(sent(&e), 0);
    let update = |e: &mut Enforcer, next: QosSpec| {
        let names = names(&next);
        e.stage(Some(next));
        e.retarget(&names);
    };
    update(&mut e, with_port(vec![weighed("a", 2), weighed("b", 3)], port));
    assert_eq!(sent(&e), 0, "the port kept its packets");
    assert_eq!(e.contract_of(1).map(|q| q.classes[0].queue.weight), Some(3));
    assert_eq!(outcomes(&run(&mut e, &[p(0), p(1)])), [Outcome::DropMeter as u8; 2], "the buckets stayed empty");
    update(&mut e, with_port(vec![weighed("a", 2), weighed("b", 3)], PortConfig { buffer_bytes: 2000, ..port }));
    assert_eq!(sent(&e), 2, "a new port: the old one sent what it had");
    assert_stats_add_up(&e, 4);
}

/// An engine whose tenants' contracts change one by one, each to one never seen before, keeps
/// the profiles its stages read and not every one it ever made; the state carries on.
#[test]
fn profiles_left_behind_by_replaced_contracts_go() {
    let meter = |cir| Contract { meter: Some(srtcm(cir, 100, 0, POLICE)), shaper: None };
    // Every other contract with a shaper: profiles of the two kinds are kept apart.
    let shaper = ShaperParams { rate: 1 << 40, burst: 100, max_queue_bytes: 10_000, max_delay_ns: u64::MAX };
    let changed = |change: u64| Contract { shaper: (change % 2 == 1).then_some(shaper), ..meter(10 + change) };
    let mut e = enforcer(spec((0..4).map(|t| tenant(&format!("t{t}"), meter(1), vec![meter(2)])).collect()));
    let p = |t| (packet(0, 100), verdict(t, 0, ALLOW));
    run(&mut e, &[p(3)]); // t3's bucket empties
    for change in 0..10_000 {
        let index = change % 3;
        assert!(e.replace_contracts(&[(index, tenant(&format!("t{index}"), changed(change as u64), vec![meter(2)]))]));
    }
    assert!(e.profiles.len() < 100, "{} profiles for 5 contracts", e.profiles.len());
    assert_eq!(outcomes(&run(&mut e, &[p(3), p(0)])), [Outcome::DropMeter as u8, 0], "t3 kept its empty bucket");
    assert_eq!(e.contract_of(2), Some(tenant("t2", changed(9_998), vec![meter(2)])));
    assert_eq!(e.contract_of(0), Some(tenant("t0", changed(9_999), vec![meter(2)])));
    assert_eq!(e.contract_of(3), Some(tenant("t3", meter(1), vec![meter(2)])));
}

#[test]
fn the_engine_classifies_and_enforces_with_one_policy_and_keeps_state_across_updates() {
    use crate::engine::{Engine, TablesSpec, TenantSpec};
    let tables = |names: &[&str]| TablesSpec {
        tenants: names
            .iter()
            .map(|name| TenantSpec {
                name: name.to_string(),
                rules: vec![],
                actions: vec![],
                classes: vec![],
                policy_rules: vec![],
                default_action: ALLOW,
                default_class: 0,
            })
            .collect(),
        vnis: names.iter().enumerate().map(|(t, name)| (if *name == "a" { 100 } else { 200 }, t as i32)).collect(),
        ..TablesSpec::default()
    };
    let policed = |cbs| tenant("a", Contract { meter: Some(srtcm(1, cbs, 0, POLICE)), shaper: None }, vec![Contract::default()]);
    let engine = Engine::new(TablesSpec::default()).unwrap();
    engine.update_with_qos(tables(&["a"]), spec(vec![policed(100)])).unwrap();
    let a = PacketInfo { vni: 100, tunnel: crate::parse::Tunnel::Vxlan as u8, ..packet(0, 100) };
    let process = |records: &[PacketInfo]| {
        let mut out = Vec::new();
        engine.process(records, &mut out);
        outcomes(&out)
    };
    assert_eq!(process(&[a, a]), [Outcome::Pass as u8, Outcome::DropMeter as u8]);
    // Another tenant arrives by a plain update: a keeps its empty bucket.
    engine.update(tables(&["b", "a"])).unwrap();
    assert_eq!(process(&[a]), [Outcome::DropMeter as u8]);
    // a's contract changes: a fresh, full bucket.
    engine.update_with_qos(tables(&["b", "a"]), spec(vec![policed(200)])).unwrap();
    assert_eq!(process(&[a, a, a]), [0, 0, Outcome::DropMeter as u8]);
    let bad = spec(vec![policed(0)]);
    assert!(engine.update_with_qos(tables(&["a"]), bad).unwrap_err().to_string().contains("srTCM CBS and EBS are both 0"));
    assert_eq!(engine.tables().tenant_names(), ["b", "a"], "a refused contract installs no tables");
    // Refused tables take their contracts with them: a later plain update keeps a's.
    let mut broken = tables(&["b", "a"]);
    broken.tenants[0].actions.push(ALLOW);
    assert!(engine.update_with_qos(broken, spec(vec![policed(300)])).is_err());
    engine.update(tables(&["b", "a"])).unwrap();
    assert_eq!(process(&[a]), [Outcome::DropMeter as u8], "a's bucket (CBS 200) is still empty");
}

// ---------------------------------------------------------------------------------------------
// The fast lane against the general path

/// A class shaper that never delays nor drops (~256 s of burst at 2^42 B/s): with it on every
/// class, a tenant takes the general path, with the same results as on the fast lane.
fn no_op_class_shaper() -> Contract {
    Contract { meter: None, shaper: Some(ShaperParams { rate: crate::shaping::MAX_RATE, burst: 1 << 50, max_queue_bytes: 0, max_delay_ns: 0 }) }
}

fn any_meter() -> impl Strategy<Value = MeterSpec> {
    let rate = prop_oneof![1u64..5_000, 1u64..=1 << 40];
    let burst = prop_oneof![1u64..3_000, 1u64..=crate::meter::MAX_BURST_BYTES];
    let kind = prop_oneof![
        (rate.clone(), burst.clone(), burst.clone()).prop_map(|(cir, cbs, ebs)| MeterKind::SrTcm { cir, cbs, ebs }),
        (rate.clone(), rate.clone(), burst.clone(), burst.clone()).prop_map(|(a, b, pbs, cbs)| MeterKind::TrTcm { pir: a.max(b), pbs, cir: a.min(b), cbs }),
        (rate.clone(), burst.clone(), rate, burst).prop_map(|(cir, cbs, eir, ebs)| MeterKind::Rfc4115 { cir, cbs, eir, ebs }),
    ];
    let action = prop_oneof![Just(ColorAction::Pass), Just(ColorAction::Drop), (0u8..64).prop_map(ColorAction::Remark)];
    let count = prop_oneof![Just(Count::Outer), Just(Count::Inner), Just(Count::Wire)];
    (kind, any::<bool>(), count, [action.clone(), action.clone(), action])
        .prop_map(|(kind, color_aware, count, actions)| MeterSpec { params: MeterParams { kind, color_aware }, count, actions })
        .prop_filter("the meter must be valid", |m| m.params.check().is_ok())
}

fn any_shaper() -> impl Strategy<Value = ShaperParams> {
    let rate = prop_oneof![1u64..5_000, 1u64..=crate::shaping::MAX_RATE];
    let amount = prop_oneof![Just(0u64), 0u64..20_000, any::<u64>()];
    (rate, 64u64..20_000, amount.clone(), amount).prop_map(|(rate, burst, max_queue_bytes, max_delay_ns)| ShaperParams {
        rate,
        burst,
        max_queue_bytes,
        max_delay_ns,
    })
}

/// (time step in ns, back in time?, wire length, tenant, class, classifier drop?, DSCP)
fn any_packets() -> impl Strategy<Value = Vec<(u64, bool, u32, i32, i32, bool, u8)>> {
    let step = prop_oneof![Just(0u64), 0u64..2_000_000, 0u64..2_000_000_000];
    let length = prop_oneof![Just(64u32), 64u32..1600, Just(9000)];
    proptest::collection::vec((step, prop::bool::weighted(0.05), length, -1i32..4, -1i32..3, prop::bool::weighted(0.1), 0u8..64), 1..300)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn the_fast_lane_gives_what_the_general_path_gives(
        contracts in proptest::collection::vec((any_meter(), any_shaper()), 3),
        policy_count in prop_oneof![Just(Count::Outer), Just(Count::Inner), Just(Count::Wire)],
        aware_map in proptest::collection::vec(0u8..3, 64),
        packets in any_packets(),
    ) {
        let contract = |(meter, shaper): &(MeterSpec, ShaperParams)| Contract { meter: Some(*meter), shaper: Some(*shaper) };
        let with_classes = |class: Contract| {
            let tenants = contracts.iter().enumerate().map(|(t, c)| tenant(&format!("t{t}"), contract(c), vec![class, class])).collect();
            let mut spec = spec(tenants);
            spec.count = policy_count;
            spec.color_map = std::array::from_fn(|dscp| Color::try_from(aware_map[dscp]).unwrap());
            enforcer(spec)
        };
        let (mut fast, mut general) = (with_classes(Contract::default()), with_classes(no_op_class_shaper()));
        prop_assert!(general.tenants.iter().all(|t| t.stage.lane == Lane::General));
        let mut time = 1i64 << 40;
        let packets: Vec<(PacketInfo, Verdict)> = packets
            .into_iter()
            .map(|(step, back, wire_len, tenant, cls, dropped, dscp)| {
                time = if back { time - step as i64 } else { time + step as i64 };
                let info = PacketInfo { dscp, ..packet(time, wire_len) };
                (info, verdict(tenant, cls, if dropped { DROP } else { ALLOW }))
            })
            .collect();
        // Two batches, so that state carries over between them.
        let (first, second) = packets.split_at(packets.len() / 2);
        for batch in [first, second] {
            prop_assert_eq!(run(&mut fast, batch), run(&mut general, batch));
        }
        prop_assert_eq!(fast.stats(), general.stats());
    }
}

#[test]
fn a_queue_changed_in_place_keeps_the_port_within_its_line_rate_and_buffer() {
    let queue = |guarantee: u64, reserved_bytes: u64| QueueConfig { guarantee, reserved_bytes, ..QueueConfig::BEST_EFFORT };
    let with_queue = |name: &str, q: QueueConfig| TenantQos {
        classes: vec![ClassQos { contract: Contract::default(), queue: q, on_burst: None }],
        ..tenant(name, Contract::default(), vec![])
    };
    let mut s = spec(vec![with_queue("a", queue(400, 100)), with_queue("b", queue(400, 100))]);
    s.port = Some(PortConfig { line_rate: 1000, buffer_bytes: 350, mode: PortMode::PerTenant });
    let mut e = enforcer(s);
    assert!(!e.replace_contracts(&[(1, with_queue("b", queue(700, 100)))]), "guarantees 1,100 B/s over the 1,000 B/s line");
    assert!(!e.replace_contracts(&[(1, with_queue("b", queue(400, 300)))]), "reserves 400 B over the 350 B buffer");
    assert!(e.replace_contracts(&[(1, with_queue("b", queue(600, 250)))]), "exactly the line and the buffer");
    assert_eq!(e.contract_of(1).map(|q| q.classes[0].queue.guarantee), Some(600));
    assert!(!e.replace_contracts(&[(0, with_queue("a", queue(401, 100)))]), "the sums follow the change before");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(100))]

    /// A timeline changes no outcome, and its series add up to the statistics: bytes, packets,
    /// drops at every stage, and the port's delays.
    #[test]
    fn the_timeline_adds_up_to_the_statistics(
        meter in any_meter(),
        shaper in any_shaper(),
        packets in any_packets(),
        buffer_bytes in 3_000u64..100_000,
    ) {
        let with_port = || {
            let classes = vec![Contract::default(), Contract { meter: Some(meter), shaper: Some(shaper) }];
            let tenants = (0..3).map(|t| tenant(&format!("t{t}"), Contract { meter: Some(meter), shaper: None }, classes.clone())).collect();
            let mut s = spec(tenants);
            s.port = Some(PortConfig { line_rate: 1_000_000, buffer_bytes, mode: PortMode::SharedFifo });
            enforcer(s)
        };
        let (mut plain, mut observed) = (with_port(), with_port());
        observed.keep_timeline(10_000);
        let mut time = 1i64 << 40;
        let packets: Vec<(PacketInfo, Verdict)> = packets
            .into_iter()
            .map(|(step, back, wire_len, tenant, cls, dropped, _)| {
                time = if back { time - step as i64 } else { time + step as i64 };
                (packet(time, wire_len), verdict(tenant, cls, if dropped { DROP } else { ALLOW }))
            })
            .collect();
        for batch in packets.chunks(packets.len().div_ceil(3)) {
            prop_assert_eq!(run(&mut plain, batch), run(&mut observed, batch));
        }
        observed.drain();
        let (tenants, classes) = observed.timeline().unwrap().snapshot();
        let sum = |values: &[u64]| values.iter().sum::<u64>();
        let mut tenant_bytes: FxHashMap<Option<String>, u64> = FxHashMap::default();
        for (key, stats) in observed.stats() {
            let series = &classes.iter().find(|(k, _)| *k == key).expect("a series for every row").1;
            let c = &stats.counters;
            let dropped = c.outcome_packets[Outcome::DropClassifier as usize..].iter().sum::<u64>();
            prop_assert_eq!((sum(&series.column(|x| x.bytes)), sum(&series.column(|x| x.packets)), sum(&series.column(|x| x.dropped))), (c.bytes, c.packets, dropped), "{:?} {:?}", key, c.outcome_packets);
            prop_assert_eq!(sum(&series.column(|x| x.delay_count)), stats.delay_ns.count());
            prop_assert_eq!(series.column(|x| x.delay_max_ns).iter().max().copied().unwrap_or(0), stats.delay_ns.max());
            *tenant_bytes.entry(key.0).or_default() += c.bytes;
        }
        for (name, series) in &tenants {
            prop_assert_eq!(sum(&series.column(|x| x.bytes)), tenant_bytes.get(name).copied().unwrap_or(0));
        }
    }
}

/// A packet the meters coloured green and the port then dropped is a conforming packet lost;
/// one coloured red and dropped there is not.
#[test]
fn the_timeline_counts_the_green_packets_lost_at_the_port_as_conforming() {
    let passing_red = srtcm(1, 150, 0, [ColorAction::Pass; 3]);
    let mut s = spec(vec![
        tenant("metered", Contract { meter: Some(passing_red), shaper: None }, vec![Contract::default()]),
        tenant("open", Contract::default(), vec![Contract::default()]),
    ]);
    s.port = Some(PortConfig { line_rate: 1000, buffer_bytes: 350, mode: PortMode::SharedFifo });
    let mut e = enforcer(s);
    e.keep_timeline(1_000);
    // At 0: metered's first packet is green (its bucket holds 150 B), its next three red; then
    // open's three, green. The buffer holds 350 B: three of the seven.
    let packets: Vec<_> = (0..4).map(|_| (packet(0, 100), verdict(0, 0, ALLOW))).chain((0..3).map(|_| (packet(0, 100), verdict(1, 0, ALLOW)))).collect();
    run(&mut e, &packets);
    e.drain();
    let (tenants, _) = e.timeline().unwrap().snapshot();
    let of = |name: &str| {
        let series = &tenants.iter().find(|(n, _)| n.as_deref() == Some(name)).unwrap().1;
        (series.column(|x| x.dropped).iter().sum::<u64>(), series.column(|x| x.conforming_dropped).iter().sum::<u64>())
    };
    assert_eq!(of("metered"), (1, 0), "a red packet lost at the port");
    assert_eq!(of("open"), (3, 3), "green packets lost at the port");
}

/// Tenants `a` and `b` with a meter, class shapers and a port, part-way through traffic (a
/// packet still on its way to the port), and a tenant `c` as a policy would add it.
fn enforcer_in_traffic() -> (Enforcer, TenantQos) {
    let (tenants, port) = tenants_a_b_c();
    let mut s = spec(tenants[..2].to_vec());
    s.port = Some(port);
    let mut e = enforcer(s);
    run(&mut e, &early_traffic());
    (e, tenants[2].clone())
}

fn tenants_a_b_c() -> (Vec<TenantQos>, PortConfig) {
    let meter = srtcm(1000, 300, 300, POLICE);
    let shaper = ShaperParams { rate: 500, burst: 100, max_queue_bytes: 10_000, max_delay_ns: u64::MAX };
    let shaped = Contract { meter: None, shaper: Some(shaper) };
    let metered = Contract { meter: Some(meter), shaper: None };
    let tenants = vec![tenant("a", metered, vec![shaped]), tenant("b", Contract::default(), vec![shaped, shaped]), tenant("c", metered, vec![shaped])];
    (tenants, PortConfig { line_rate: 1000, buffer_bytes: 350, mode: PortMode::PerTenant })
}

fn early_traffic() -> Vec<(PacketInfo, Verdict)> {
    [(0, 0), (0, 0), (1, 1), (1, 0), (-1, -1)].into_iter().map(|(t, c)| (packet(MS as i64, 100), verdict(t, c, ALLOW))).collect()
}

#[test]
fn a_tenant_appended_leaves_every_other_tenants_state_in_place_and_starts_as_in_a_fresh_enforcer() {
    let (mut e, c) = enforcer_in_traffic();
    let stats_before = e.stats();
    assert!(stats_before.iter().any(|(_, s)| s.in_flight > 0), "a packet on its way to the port");
    let before = format!("{:?} {:?} {:?}", e.tenants, e.class_stages, e.rows.counters_of(0..e.class_rows));
    let tenant_rows_before = format!("{:?} {:?}", e.rows.counters_of(e.no_tenant_row..e.rows.len()), e.own_rows);
    let queue_stats = |e: &Enforcer| (0..3).map(|q| e.port.as_ref().unwrap().port.stats(q).clone()).collect::<Vec<_>>();
    let queues_before = queue_stats(&e);
    assert!(e.append(vec![c]));
    // By value: stages with their buckets, class rows, the tenants' own rows (none yet for the
    // new one), port queues, statistics.
    assert_eq!(format!("{:?} {:?} {:?}", &e.tenants[..2], &e.class_stages[..3], e.rows.counters_of(0..3)), before);
    assert_eq!(e.own_rows[2], NO_ROW);
    assert_eq!(format!("{:?} {:?}", e.rows.counters_of(e.no_tenant_row..e.rows.len()), &e.own_rows[..2]), tenant_rows_before);
    assert_eq!(queue_stats(&e), queues_before);
    assert_eq!(e.stats(), stats_before, "nothing counted for the new tenant yet");
    // The same as an enforcer of the final policy that saw the same packets: the new tenant's
    // stages, then every outcome and statistic for more packets.
    let (tenants, port) = tenants_a_b_c();
    let mut fresh = enforcer(QosSpec { port: Some(port), ..spec(tenants) });
    run(&mut fresh, &early_traffic());
    assert_eq!(format!("{:?} {:?}", e.tenants[2], &e.class_stages[3..]), format!("{:?} {:?}", fresh.tenants[2], &fresh.class_stages[3..]));
    let later: Vec<_> = (0..9).map(|i| (packet((2 * MS + i * 100) as i64, 100), verdict((i % 3) as i32, (i % 2) as i32, ALLOW))).collect();
    assert_eq!(run(&mut e, &later), run(&mut fresh, &later));
    e.drain();
    fresh.drain();
    assert_eq!(e.stats(), fresh.stats());
    assert_stats_add_up(&e, 14);
}

#[test]
fn an_append_the_enforcer_cannot_take_alone_changes_nothing() {
    let (mut e, c) = enforcer_in_traffic();
    let before = (format!("{:?} {:?} {:?}", e.tenants, e.class_stages, e.rows), e.stats());
    let over_the_line =
        TenantQos { classes: vec![ClassQos { queue: QueueConfig { guarantee: 1001, ..QueueConfig::BEST_EFFORT }, ..c.classes[0].clone() }], ..c.clone() };
    let room = e.no_tenant_row - e.class_rows;
    let too_many_classes = TenantQos { classes: vec![c.classes[0].clone(); room + 1], ..c.clone() };
    let refused = [vec![tenant("a", Contract::default(), vec![])], vec![c.clone(), c.clone()], vec![over_the_line], vec![too_many_classes]];
    for added in refused {
        assert!(!e.append(added.clone()), "{added:?}");
        assert_eq!((format!("{:?} {:?} {:?}", e.tenants, e.class_stages, e.rows), e.stats()), before);
    }
}

/// Tenants `a`, `b`, `c` with a port (`b` in the middle, of two classes), and `a` and `c` alone.
fn with_and_without_b() -> (Enforcer, Enforcer) {
    let (tenants, port) = tenants_a_b_c();
    let all = enforcer(QosSpec { port: Some(port), ..spec(tenants.clone()) });
    let without = enforcer(QosSpec { port: Some(port), ..spec(vec![tenants[0].clone(), tenants[2].clone()]) });
    (all, without)
}

/// `packets` of tenants `a`, `b`, `c` as an enforcer without `b` sees them: `b`'s left out, `c` is tenant 1.
fn without_b(packets: &[(PacketInfo, Verdict)]) -> Vec<(PacketInfo, Verdict)> {
    let moved = |(info, v): &(PacketInfo, Verdict)| (*info, Verdict { tenant: if v.tenant == 2 { 1 } else { v.tenant }, ..*v });
    packets.iter().filter(|(_, v)| v.tenant != 1).map(moved).collect()
}

/// Packets of `a` and `c` at `at_ns` (two each, so that the second waits at the port), of `b`
/// dropped by the classifier (counted, but no meter, shaper or queue sees them), and of no tenant.
fn traffic_around_b(at_ns: u64) -> Vec<(PacketInfo, Verdict)> {
    let of = [(0, 0, ALLOW), (2, 0, ALLOW), (1, 0, DROP), (1, 1, DROP), (0, 0, ALLOW), (2, 0, ALLOW), (-1, -1, ALLOW)];
    of.into_iter().enumerate().map(|(i, (t, c, action))| (packet((at_ns + i as u64) as i64, 100), verdict(t, c, action))).collect()
}

/// The state of every tenant of `e` and its port, by value (packets in flight in order), with
/// the class rows in tenant order: which rows a tenant put in takes (vacant ones, or the
/// room's) is the enforcer's business, as long as no other tenant's move.
fn state_of(e: &Enforcer) -> String {
    let order = rows_in_tenant_order(e);
    let mut first_row = 0;
    let tenants: Vec<TenantState> = e.tenants.iter().map(|t| (TenantState { first_row, ..*t }, first_row += t.classes).0).collect();
    let class_stages: Vec<Stage> = order.iter().filter_map(|&row| e.class_stages.get(row as usize).copied()).collect();
    let class_rows: Vec<_> = order.iter().map(|&row| e.rows.counters(row as usize)).collect();
    let own_rows: Vec<_> = e.own_rows.iter().map(|&row| (row != NO_ROW).then(|| e.rows.counters(row as usize))).collect();
    let tenant_rows = (e.rows.counters(e.no_tenant_row), own_rows);
    format!("{tenants:?} {class_stages:?} {class_rows:?} {tenant_rows:?} {} {:?}", port_of(e), e.burst_stats())
}

/// Every tenant's class rows, tenant by tenant.
fn rows_in_tenant_order(e: &Enforcer) -> Vec<u32> {
    e.tenants.iter().flat_map(|t| t.first_row..t.first_row + t.classes).collect()
}

/// The port and the packets in flight to it, by value, their queues and rows in tenant order.
fn port_of(e: &Enforcer) -> String {
    let order = rows_in_tenant_order(e);
    let in_order = |row: u32| order.iter().position(|&r| r == row).expect("a row of a tenant") as u32;
    let port = e.port.as_ref().map(|state| {
        let mut port = state.port.clone();
        port.reorder(&order);
        format!("{port:?} {} {}", state.guaranteed, state.reserved)
    });
    // Their index in the batch they came in differs: b's packets were in it.
    let in_flight: Vec<_> = e.in_flight.clone().into_sorted_vec().into_iter().map(|Reverse(p)| InFlight { index: 0, row: in_order(p.row), ..p }).collect();
    format!("{port:?} {in_flight:?}")
}

#[test]
fn a_tenant_reshaped_in_place_moves_no_other_tenant_and_starts_as_in_a_fresh_enforcer() {
    let (tenants, port) = tenants_a_b_c();
    let one_class = TenantQos { classes: tenants[1].classes[..1].to_vec(), ..tenants[1].clone() };
    let (mut e, _) = with_and_without_b();
    let mut fresh = enforcer(QosSpec { port: Some(port), ..spec(vec![tenants[0].clone(), one_class.clone(), tenants[2].clone()]) });
    let first: Vec<_> = traffic_around_b(MS).into_iter().filter(|(_, v)| v.tenant != 1).collect();
    run(&mut e, &first);
    run(&mut fresh, &first);
    assert!(!e.in_flight.is_empty() && e.port.as_ref().unwrap().port.queued_bytes() > 0, "packets on their way and queued at the port");
    let first_rows = |e: &Enforcer| e.tenants.iter().map(|t| t.first_row).collect::<Vec<_>>();
    assert_eq!(first_rows(&e), [0, 1, 3]);
    assert!(e.reshape(1, one_class, Vec::new()));
    assert_eq!((first_rows(&e), e.class_rows, e.vacant.count(2)), (vec![0, 4, 3], 5, 1), "b takes the room's first row; a's and c's stay");
    alike_from_now_on(&mut e, &mut fresh);
}

/// By value: b as in a fresh enforcer, a and c, their counters, queues, rings and packets in
/// flight as they were; then the same outcomes, state and statistics after more traffic.
fn alike_from_now_on(e: &mut Enforcer, other: &mut Enforcer) {
    assert_eq!(state_of(e), state_of(other));
    let later = traffic_around_b(2 * MS);
    assert_eq!(run(e, &later), run(other, &later));
    e.drain();
    other.drain();
    assert_eq!((state_of(e), e.stats()), (state_of(other), other.stats()));
}

#[test]
fn vacant_rows_go_to_tenants_put_in_later_and_a_full_retarget_orders_the_rows_keeping_the_port() {
    let (tenants, _) = tenants_a_b_c();
    let (mut e, _) = with_and_without_b();
    assert!(e.remove(1));
    assert!(e.insert(1, vec![tenants[1].clone()]));
    assert_eq!((e.tenants[1].first_row, e.class_rows, e.vacant.count(2)), (1, 4, 0), "b takes its old rows again");
    assert!(e.insert(0, vec![TenantQos { name: "d".into(), ..tenants[2].clone() }]));
    assert_eq!((e.tenants[0].first_row, e.class_rows), (4, 5), "d takes the room's first row");
    // A packet of every tenant, and a second of a and c: some wait at the port, some are on their way.
    let packets: Vec<_> = [0, 1, 2, 3, 1, 3].into_iter().enumerate().map(|(i, t)| (packet((MS + i as u64) as i64, 100), verdict(t, 0, ALLOW))).collect();
    run(&mut e, &packets);
    assert!(!e.in_flight.is_empty() && e.port.as_ref().unwrap().port.queued_bytes() > 0, "packets on their way and queued at the port");
    let (port, stats) = (port_of(&e), e.stats());
    e.retarget(&["d", "a", "b", "c"].map(Arc::from));
    assert_eq!(e.tenants.iter().map(|t| t.first_row).collect::<Vec<_>>(), [0, 1, 2, 4], "rows in tenant order");
    assert_eq!(rows_in_tenant_order(&e), (0..5).collect::<Vec<_>>());
    assert_eq!((port_of(&e), e.stats()), (port, stats), "the port kept, its packets, buckets and timers with their queues");
}

#[test]
fn a_tenant_removed_from_the_middle_leaves_the_others_state_as_if_it_had_never_been_there() {
    let (mut e, mut never) = with_and_without_b();
    let first = traffic_around_b(MS);
    run(&mut e, &first);
    run(&mut never, &without_b(&first));
    assert!(!e.in_flight.is_empty() && e.port.as_ref().unwrap().port.queued_bytes() > 0, "packets on their way and queued at the port");
    let rows_before = e.no_tenant_row;
    assert!(e.remove(1));
    assert_eq!((e.no_tenant_row, e.class_rows, e.tenants.len(), e.vacant.count(2)), (rows_before, 4, 2, 1), "b's two rows vacant, c's in place");
    assert_eq!(e.tenants[1].first_row, 3);
    // In place, by value: stages, counters, the port's queues, rings, timers and packets in flight.
    assert_eq!(state_of(&e), state_of(&never));
    // b's counters are in the archive, and packets after the removal go to the right rows and queues.
    let b_counted: u64 = e.stats().iter().filter(|((name, _), _)| name.as_deref() == Some("b")).map(|(_, s)| s.counters.packets).sum();
    assert_eq!(b_counted, 2);
    let later: Vec<_> =
        traffic_around_b(2 * MS).into_iter().filter(|(_, v)| v.tenant != 1).map(|(info, v)| (info, Verdict { tenant: v.tenant.min(1), ..v })).collect();
    assert_eq!(run(&mut e, &later), run(&mut never, &later));
    e.drain();
    never.drain();
    assert_eq!(state_of(&e), state_of(&never));
    let others = |e: &Enforcer| e.stats().into_iter().filter(|((name, _), _)| name.as_deref() != Some("b")).collect::<Vec<_>>();
    assert_eq!(others(&e), others(&never));
    assert_stats_add_up(&e, 12);
}

#[test]
fn a_removal_keeps_every_counter_and_delay_of_the_tenant_and_a_later_append_takes_its_name_again() {
    let (mut e, _) = with_and_without_b();
    let through_b: Vec<_> = [(1, 0), (1, 1), (0, 0), (1, 1)].into_iter().map(|(t, c)| (packet(MS as i64, 100), verdict(t, c, ALLOW))).collect();
    run(&mut e, &through_b);
    e.drain();
    let before = e.stats();
    assert!(before.iter().any(|((name, _), s)| name.as_deref() == Some("b") && s.delay_ns.count() > 0), "b's packets waited at the port");
    assert!(e.remove(1));
    assert_eq!(e.stats(), before, "the archive keeps what b's rows and queues counted");
    let (tenants, _) = tenants_a_b_c();
    assert!(e.append(vec![tenants[1].clone()]), "b's name is free again");
    assert!(!e.append(vec![tenants[2].clone()]), "c's is not");
    assert_eq!(e.contract_of(2), Some(tenants[1].clone()));
}

#[test]
fn a_removal_the_enforcer_cannot_take_alone_changes_nothing() {
    let (mut e, _) = with_and_without_b();
    run(&mut e, &[(packet(MS as i64, 100), verdict(1, 0, ALLOW)), (packet(MS as i64, 100), verdict(1, 0, ALLOW))]);
    let before = (state_of(&e), e.stats());
    assert!(!e.remove(3), "no tenant 3");
    assert_eq!((state_of(&e), e.stats()), before);
    e.drain();
    let (tenants, port) = tenants_a_b_c();
    e.stage(Some(QosSpec { port: Some(port), ..spec(tenants) }));
    assert!(!e.remove(1), "a spec waits for the tables");
}

#[test]
fn a_tenant_removed_with_packets_at_the_port_drains_it_and_the_port_starts_again_at_packet_times() {
    let (mut e, mut without) = with_and_without_b();
    // Two packets of each tenant at once: the second of each waits at the port.
    let first: Vec<_> = [0, 1, 2, 0, 1, 2].into_iter().enumerate().map(|(i, t)| (packet((MS + i as u64) as i64, 100), verdict(t, 0, ALLOW))).collect();
    run(&mut e, &first);
    assert!(e.packets_at_port(1), "b's packets are on their way to the port or queued there");
    assert!(e.remove(1), "b goes alone, its packets at the port too");
    assert!(e.in_flight.is_empty() && e.port.as_ref().unwrap().port.queued_bytes() == 0, "the port drained");
    let counted: u64 = e.stats().iter().map(|(_, s)| s.counters.packets).sum();
    assert_eq!(counted, first.len() as u64, "every packet counted, b's under its name");
    // Later traffic meets a port as a fresh one would: the restarted port sends a's and c's as
    // the port of an enforcer made without b, drained after the same traffic, does.
    run(&mut without, &without_b(&first));
    without.drain();
    let later = without_b(&traffic_around_b(50 * MS));
    assert_eq!(outcomes(&run(&mut e, &later)), outcomes(&run(&mut without, &later)));
    e.drain();
    without.drain();
    let delays =
        |e: &Enforcer| e.stats().into_iter().filter(|(key, _)| key.0.as_deref() != Some("b")).map(|(key, s)| (key, s.delay_ns.count())).collect::<Vec<_>>();
    assert_eq!(delays(&e), delays(&without), "every packet of a and c sent, as many as without b");
}

#[test]
fn a_tenant_inserted_in_the_middle_leaves_the_others_state_in_place_and_starts_as_in_a_fresh_enforcer() {
    let (mut all, mut e) = with_and_without_b();
    let first: Vec<_> = traffic_around_b(MS).into_iter().filter(|(_, v)| v.tenant != 1).collect();
    run(&mut all, &first);
    run(&mut e, &without_b(&first));
    assert!(!e.in_flight.is_empty() && e.port.as_ref().unwrap().port.queued_bytes() > 0, "packets on their way and queued at the port");
    let (tenants, _) = tenants_a_b_c();
    assert!(e.insert(1, vec![tenants[1].clone()]));
    alike_from_now_on(&mut e, &mut all);
    assert!(!e.insert(1, vec![tenants[2].clone()]), "c's name is taken");
}

/// A tenant's own row (packets in no class) is made at its first such packet, not before; a
/// removed tenant's is archived and goes, zero, to the next tenant that needs one.
#[test]
fn own_rows_are_made_when_first_needed_and_reused_after_a_removal() {
    let (tenants, _) = tenants_a_b_c();
    let mut e = Enforcer::default();
    e.stage(Some(spec(tenants)));
    e.retarget(&["a", "b", "c", "bare"].map(Arc::from));
    let rows = e.rows.len() as u32;
    let at = |t: i32, c: i32, action: u8| (packet(MS as i64, 100), verdict(t, c, action));
    run(&mut e, &[at(0, 0, ALLOW), at(1, 1, ALLOW)]);
    assert_eq!((e.rows.len() as u32, e.own_rows.clone()), (rows, vec![NO_ROW; 4]), "packets in classes need no own row");
    run(&mut e, &[at(1, -1, DROP), at(3, -1, ALLOW), at(1, -1, DROP)]);
    assert_eq!(e.own_rows, [NO_ROW, rows, NO_ROW, rows + 1]);
    assert!(e.remove(1));
    assert_eq!(e.free_rows, [rows]);
    run(&mut e, &[at(0, -1, DROP)]);
    assert_eq!((e.rows.len() as u32, e.own_rows.clone()), (rows + 2, vec![rows, NO_ROW, rows + 1]));
    let no_class = |name: &str| e.stats().into_iter().find(|(key, _)| *key == (Some(name.to_string()), None)).map(|(_, s)| s.counters.outcome_packets);
    let counted = |outcome: Outcome| Some(std::array::from_fn(|o| u64::from(o == outcome as usize)));
    assert_eq!(no_class("a"), counted(Outcome::DropClassifier), "a's row starts at zero");
    assert_eq!(no_class("b"), counted(Outcome::DropClassifier).map(|c: [u64; OUTCOMES]| c.map(|n| 2 * n)), "archived");
    assert_eq!(no_class("bare"), counted(Outcome::Pass));
    assert_stats_add_up(&e, 6);
}

/// While a timeline is kept every tenant has its own row, bound to its series, a tenant added too.
#[test]
fn a_timeline_gives_every_tenant_its_own_row() {
    let (mut e, c) = enforcer_in_traffic();
    e.keep_timeline(1_000);
    assert!(e.own_rows.iter().all(|&row| row != NO_ROW), "{:?}", e.own_rows);
    assert!(e.append(vec![c]));
    assert!(e.own_rows.iter().all(|&row| row != NO_ROW), "{:?}", e.own_rows);
    let keys = e.row_keys();
    let names: Vec<_> = e.own_rows.iter().map(|&row| keys[row as usize].clone()).collect();
    assert_eq!(names, ["a", "b", "c"].map(|name| (Some(name.to_string()), None)));
}

/// Tenants whose classes have no contract keep no class stages; a tenant added or changed with
/// a class contract makes them all, and the enforcer goes on as one that had them all along.
#[test]
fn class_stages_are_made_when_a_class_contract_first_needs_them() {
    let (tenants, port) = tenants_a_b_c();
    let plain = |t: &TenantQos| tenant(&t.name, t.contract, vec![Contract::default(); t.classes.len()]);
    let mut s = spec(vec![plain(&tenants[0]), plain(&tenants[1])]);
    s.port = Some(port);
    let mut e = enforcer(s);
    run(&mut e, &early_traffic());
    assert!(e.class_stages.is_empty() && e.class_rows == 3);
    assert!(e.append(vec![tenants[2].clone()]));
    assert_eq!(e.class_stages.len(), 4);
    let mut fresh = enforcer(QosSpec { port: Some(port), ..spec(vec![plain(&tenants[0]), plain(&tenants[1]), tenants[2].clone()]) });
    run(&mut fresh, &early_traffic());
    let later: Vec<_> = (0..12).map(|i| (packet((2 * MS + i * 100) as i64, 100), verdict((i % 3) as i32, (i % 2) as i32, ALLOW))).collect();
    assert_eq!(run(&mut e, &later), run(&mut fresh, &later));
    let mut changed = plain(&tenants[1]);
    changed.classes[1].contract = tenants[1].classes[1].contract;
    let mut e = enforcer(QosSpec { port: Some(port), ..spec(vec![plain(&tenants[0]), plain(&tenants[1])]) });
    assert!(e.class_stages.is_empty() && e.replace_contracts(&[(1, changed.clone())]));
    let mut fresh = enforcer(QosSpec { port: Some(port), ..spec(vec![plain(&tenants[0]), changed]) });
    assert_eq!(run(&mut e, &later), run(&mut fresh, &later));
    e.drain();
    fresh.drain();
    assert_eq!(e.stats(), fresh.stats());
}
