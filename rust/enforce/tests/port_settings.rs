//! A new port buffer taken in place ([`Enforcer::set_buffer`]) against a full retarget.

use super::*;

/// Tenants `a`, `b` and `c` with a port of `buffer` bytes.
fn with_buffer(buffer_bytes: u64) -> QosSpec {
    let (tenants, port) = tenants_a_b_c();
    QosSpec { port: Some(PortConfig { buffer_bytes, ..port }), ..spec(tenants) }
}

/// `per_class` packets of 100 bytes for each class of `a`, `b` and `c`, all at `at_ns`: more
/// than the line sends at once, so that they wait at the port.
fn flood(at_ns: u64, per_class: usize) -> Vec<(PacketInfo, Verdict)> {
    let classes = [(0, 0), (1, 0), (1, 1), (2, 0)];
    let each = classes.iter().cycle().take(classes.len() * per_class);
    each.map(|&(t, c)| (packet(at_ns as i64, 100), verdict(t, c, ALLOW))).collect()
}

#[test]
fn a_new_buffer_drains_the_port_keeps_every_tenant_and_gives_what_a_full_retarget_gives() {
    let (mut e, mut full, mut kept) = (enforcer(with_buffer(350)), enforcer(with_buffer(350)), enforcer(with_buffer(350)));
    let first = flood(MS, 2);
    for enforcer in [&mut e, &mut full, &mut kept] {
        run(enforcer, &first);
    }
    assert!(e.port.as_ref().unwrap().port.queued_bytes() > 0 || !e.in_flight.is_empty(), "packets at the port");
    let stages = |e: &Enforcer| format!("{:?} {:?}", e.tenants, e.class_stages);
    let before = stages(&e);
    let larger = PortConfig { buffer_bytes: 2_000, ..with_buffer(0).port.unwrap() };
    assert!(e.set_buffer(larger, None));
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
fn a_new_buffer_the_enforcer_cannot_take_in_place_changes_nothing() {
    let mut e = enforcer(with_buffer(350));
    run(&mut e, &flood(MS, 2));
    let before = (format!("{:?} {:?} {:?}", e.tenants, e.class_stages, e.rows), port_of(&e), e.stats());
    let port = with_buffer(350).port.unwrap();
    let overload = Overload { above_bytes: 200, below_bytes: 100, stagger_ns: 0 };
    let refused = [
        (PortConfig { line_rate: 2_000, ..port }, None),
        (PortConfig { mode: PortMode::SharedFifo, ..port }, None),
        (PortConfig { buffer_bytes: 0, ..port }, None),
        (PortConfig { buffer_bytes: 500, ..port }, Some(overload)), // an overload setting that was not there
    ];
    for (config, overload) in refused {
        assert!(!e.set_buffer(config, overload), "{config:?} {overload:?}");
        assert_eq!((format!("{:?} {:?} {:?}", e.tenants, e.class_stages, e.rows), port_of(&e), e.stats()), before);
    }
}
