//! The port's own settings taken in place ([`Enforcer::set_port`]) against a full retarget.

use super::*;
use crate::bursts::{BurstConfig, BurstSpec, TenantBursts};

/// Tenants `a`, `b` and `c` with a port of `buffer` bytes.
fn with_buffer(buffer_bytes: u64) -> QosSpec {
    let (tenants, port) = tenants_a_b_c();
    QosSpec { port: Some(PortConfig { buffer_bytes, ..port }), ..spec(tenants) }
}

/// Tenants `a`, `b` and `c` with guarantees and ceilings at a port of `line_rate` B/s: `a`'s
/// ceiling of 1,500 caps only a line above it (and nothing else holds `a` back), `b`'s
/// classes' of 300 any line of 1,000 or more.
fn with_line(line_rate: u64, microburst: Option<BurstConfig>) -> QosSpec {
    let (mut tenants, port) = tenants_a_b_c();
    tenants[0] = tenant("a", Contract::default(), vec![Contract::default()]);
    let queue = |guarantee: u64, ceil: u64| QueueConfig { guarantee, ceil, share: guarantee, ..QueueConfig::BEST_EFFORT };
    let queues = [vec![queue(200, 1_500)], vec![queue(100, 300), queue(100, 300)], vec![queue(0, 0)]];
    for (tenant, queues) in tenants.iter_mut().zip(queues) {
        for (class, queue) in tenant.classes.iter_mut().zip(queues) {
            class.queue = queue;
        }
    }
    let port = PortConfig { line_rate, buffer_bytes: 1_000, ..port };
    QosSpec { port: Some(port), bursts: BurstSpec { port: microburst, ..BurstSpec::default() }, ..spec(tenants) }
}

/// `per_class` packets of 100 bytes for each class of `a`, `b` and `c`, all at `at_ns`: more
/// than the line sends at once, so that they wait at the port.
fn flood(at_ns: u64, per_class: usize) -> Vec<(PacketInfo, Verdict)> {
    let classes = [(0, 0), (1, 0), (1, 1), (2, 0)];
    let each = classes.iter().cycle().take(classes.len() * per_class);
    each.map(|&(t, c)| (packet(at_ns as i64, 100), verdict(t, c, ALLOW))).collect()
}

/// Packets of `a` alone, 100 bytes every `gap_ns` from `from_ns`: it sends at its ceiling or the line's.
fn stream_of_a(from_ns: u64, gap_ns: u64, count: u64) -> Vec<(PacketInfo, Verdict)> {
    (0..count).map(|k| (packet((from_ns + k * gap_ns) as i64, 100), verdict(0, 0, ALLOW))).collect()
}

fn stages(e: &Enforcer) -> String {
    format!("{:?} {:?}", e.tenants, e.class_stages)
}

#[test]
fn a_new_buffer_drains_the_port_keeps_every_tenant_and_gives_what_a_full_retarget_gives() {
    let (mut e, mut full, mut kept) = (enforcer(with_buffer(350)), enforcer(with_buffer(350)), enforcer(with_buffer(350)));
    let first = flood(MS, 2);
    for enforcer in [&mut e, &mut full, &mut kept] {
        run(enforcer, &first);
    }
    assert!(e.port.as_ref().unwrap().port.queued_bytes() > 0 || !e.in_flight.is_empty(), "packets at the port");
    let before = stages(&e);
    let larger = PortConfig { buffer_bytes: 2_000, ..with_buffer(0).port.unwrap() };
    assert!(e.set_port(larger, None, None));
    full.stage(Some(with_buffer(2_000)));
    full.retarget(&names(&with_buffer(2_000)));
    kept.restart_port(); // drained as the others, the old buffer kept
    assert!(e.in_flight.is_empty() && e.port.as_ref().unwrap().port.queued_bytes() == 0, "the port drained");
    assert_eq!(stages(&e), before, "every stage as it was");
    assert_eq!(stages(&e), stages(&full), "as a retarget keeps them");
    assert_eq!((e.port.as_ref().unwrap().config, e.spec.port), (larger, Some(larger)));
    let later = flood(50 * MS, 6);
    let (ours, theirs) = (run(&mut e, &later), run(&mut full, &later));
    run(&mut kept, &later);
    assert_eq!(ours, theirs);
    for enforcer in [&mut e, &mut full, &mut kept] {
        enforcer.drain();
    }
    assert_eq!(e.stats(), full.stats());
    let buffer_drops = |e: &Enforcer| e.stats().iter().map(|(_, s)| s.counters.outcome_packets[Outcome::DropPortBuffer as usize]).sum::<u64>();
    assert!(buffer_drops(&kept) > buffer_drops(&e), "the old buffer drops what the new one holds");
    assert_stats_add_up(&e, (first.len() + later.len()) as u64);
}

#[test]
fn a_new_line_rate_and_mode_make_the_buckets_again_and_give_what_a_full_retarget_gives() {
    for mode in [PortMode::PerTenant, PortMode::SharedFifo] {
        let (mut e, mut full, mut kept) = (enforcer(with_line(1_000, None)), enforcer(with_line(1_000, None)), enforcer(with_line(1_000, None)));
        let first = flood(MS, 3);
        for enforcer in [&mut e, &mut full, &mut kept] {
            run(enforcer, &first);
        }
        let before = stages(&e);
        let faster = PortConfig { line_rate: 2_000, mode, ..with_line(2_000, None).port.unwrap() };
        assert!(e.set_port(faster, None, None), "{mode:?}");
        let target = QosSpec { port: Some(faster), ..with_line(2_000, None) };
        full.stage(Some(target.clone()));
        full.retarget(&names(&target));
        kept.restart_port();
        assert_eq!(stages(&e), before, "every stage as it was");
        assert_eq!((e.port.as_ref().unwrap().config, e.spec.port), (faster, Some(faster)));
        // `a` alone at 2,000 B/s for 40 s: past its ceiling's bucket (9,216 B), capped at
        // 1,500 on the new line in per-tenant mode; then every class at once.
        let later: Vec<_> = stream_of_a(50 * MS, 50 * MS, 800).into_iter().chain(flood(60_000 * MS, 4)).collect();
        let (ours, theirs) = (run(&mut e, &later), run(&mut full, &later));
        run(&mut kept, &later);
        assert_eq!(ours, theirs, "{mode:?}");
        for enforcer in [&mut e, &mut full, &mut kept] {
            enforcer.drain();
        }
        assert_eq!(e.stats(), full.stats(), "{mode:?}");
        assert_ne!(e.stats(), kept.stats(), "{mode:?}: the old line sends later");
        assert_stats_add_up(&e, (first.len() + later.len()) as u64);
    }
}

#[test]
fn a_new_port_microburst_setting_starts_the_port_scope_anew_as_a_full_retarget_does() {
    let watch = |window_ns: u64| Some(BurstConfig { window_ns, threshold_bps: 4_000, queue: None });
    let (mut e, mut full) = (enforcer(with_line(1_000, watch(MS))), enforcer(with_line(1_000, watch(MS))));
    let first = flood(MS, 3);
    for enforcer in [&mut e, &mut full] {
        run(enforcer, &first);
    }
    let config = with_line(1_000, None).port.unwrap();
    assert!(e.set_port(config, None, watch(2 * MS)));
    full.stage(Some(with_line(1_000, watch(2 * MS))));
    full.retarget(&names(&with_line(1_000, watch(2 * MS))));
    assert_eq!(e.spec.bursts.port, watch(2 * MS));
    let later = flood(50 * MS, 3);
    assert_eq!(run(&mut e, &later), run(&mut full, &later));
    for enforcer in [&mut e, &mut full] {
        enforcer.drain();
    }
    assert!(!e.bursts().is_empty(), "the port burst");
    assert_eq!(e.bursts(), full.bursts());
    assert_eq!(e.burst_stats(), full.burst_stats());
}

#[test]
fn port_settings_the_enforcer_cannot_take_in_place_change_nothing() {
    let mut e = enforcer(with_line(1_000, None));
    run(&mut e, &flood(MS, 2));
    let before = (format!("{:?} {:?} {:?}", e.tenants, e.class_stages, e.rows), port_of(&e), e.stats());
    let port = with_line(1_000, None).port.unwrap();
    let overload = Overload { above_bytes: 200, below_bytes: 100, stagger_ns: 0 };
    let watched = Some(BurstConfig { window_ns: MS, threshold_bps: 1, queue: None });
    let refused = [
        (PortConfig { buffer_bytes: 0, ..port }, None, None),
        (PortConfig { line_rate: 0, ..port }, None, None),
        (PortConfig { line_rate: 300, ..port }, None, None),              // under the guarantees
        (PortConfig { buffer_bytes: 500, ..port }, Some(overload), None), // an overload setting that was not there
        (port, None, watched),                                            // a microburst setting that was not there
    ];
    for (config, overload, microburst) in refused {
        assert!(!e.set_port(config, overload, microburst), "{config:?} {overload:?} {microburst:?}");
        assert_eq!((format!("{:?} {:?} {:?}", e.tenants, e.class_stages, e.rows), port_of(&e), e.stats()), before);
    }
}

#[test]
fn a_tenant_in_a_profile_keeps_the_profile_queues_at_a_new_line_rate() {
    // `a`: a guarantee of 200 B/s and no ceiling; in its burst profile (held 100 s) its queue is capped at 200.
    let normal = QueueConfig { guarantee: 200, share: 200, ..QueueConfig::BEST_EFFORT };
    let class = ClassQos { contract: Contract::default(), queue: normal, on_burst: None };
    let profile = ProfileQos { contract: Contract::default(), queues: vec![QueueConfig { ceil: 200, ..normal }] };
    let on_burst = BurstProfile { profile, hold_ns: 100_000 * MS, max_switches_per_s: 0 };
    let a = TenantQos { name: "a".into(), contract: Contract::default(), classes: vec![class], on_burst: Some(Box::new(on_burst)), on_overload: None };
    let watch = BurstConfig { window_ns: MS, threshold_bps: 8_000, queue: None }; // two packets in a millisecond burst
    let bursts = BurstSpec { tenants: vec![TenantBursts { name: "a".to_string(), tenant: Some(watch), classes: Vec::new() }], ..BurstSpec::default() };
    let port = PortConfig { line_rate: 1_000, buffer_bytes: 1_000, mode: PortMode::PerTenant };
    let mut e = enforcer(QosSpec { tenants: vec![a], bursts, port: Some(port), ..QosSpec::default() });
    run(&mut e, &stream_of_a(MS, MS / 5, 3));
    assert_eq!(e.profile_events().last().map(|event| event.to), Some(ProfileId::Burst as u8), "in its burst profile");
    assert!(e.set_port(PortConfig { line_rate: 2_000, ..port }, None, None));
    // 1,000 B/s for 30 s: past the ceiling's bucket (9,216 B) and the buffer, the port drops.
    run(&mut e, &stream_of_a(1_000 * MS, 100 * MS, 300));
    e.drain();
    let drops = |s: &QosStats| s.counters.outcome_packets[Outcome::DropPortBuffer as usize] + s.counters.outcome_packets[Outcome::DropPortQueue as usize];
    let port_drops = |e: &Enforcer| e.stats().iter().map(|(_, s)| drops(s)).sum::<u64>();
    assert!(port_drops(&e) > 0, "the profile's ceiling of 200 B/s holds on the new line");
}
