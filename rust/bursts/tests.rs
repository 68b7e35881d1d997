//! The detector on hand-made streams whose events are worked out by hand (docs/bursts.md).

use bytemuck::Zeroable;

use super::*;
use crate::verdict::ALLOW;

const W: u64 = 10_000;

/// A tenant watched with a 10 us window and a limit of 1,000 bytes (800 Mbit/s).
fn detector(queue: Option<QueueThresholds>, poll_ns: Vec<u64>) -> Detector {
    let config = BurstConfig { window_ns: W, threshold_bps: 800_000_000, queue };
    let spec = BurstSpec { port: None, tenants: vec![TenantBursts { name: "a".into(), tenant: Some(config), classes: vec![] }], poll_ns };
    let mut detector = Detector::default();
    detector.retarget(&spec, &["a".into()], &[(0, 0)], false, 0);
    detector
}

fn packet(src_port: u16) -> PacketInfo {
    PacketInfo { src_port, dst_port: 5001, proto: 17, ..PacketInfo::zeroed() }
}

fn send(detector: &mut Detector, now: u64, bytes: u32, src_port: u16) {
    let verdict = Verdict { tenant: 0, rule: -1, cls: -1, action: ALLOW, reason: 0 };
    detector.observe(now, bytes, &verdict, &packet(src_port), Outcome::Pass as u8);
}

#[test]
fn a_burst_starts_at_the_packet_over_the_limit_and_ends_when_its_window_falls_back() {
    let mut d = detector(None, vec![]);
    assert_eq!(d.hot[0].limit(), 1_000);
    for (t, bytes) in [(0, 400), (1_000, 400), (2_000, 400), (3_000, 400)] {
        send(&mut d, t, bytes, 1);
    }
    assert!(d.events().is_empty());
    // 1,600 B in the window at 3 us: open since the third packet (1,200 B > 1,000).
    send(&mut d, 25_000, 100, 2);
    let events = d.events();
    assert_eq!(events.len(), 1);
    let e = events[0];
    // After the second packet leaves at 11 us, 800 B remain: the event ends then.
    assert_eq!((e.start_ns, e.end_ns, e.packets, e.bytes), (2_000, 11_000, 2, 800));
    assert_eq!({ e.peak_bps }, window_bps(1_600, W));
    assert_eq!(d.monitors[0].totals(&d.hot[0]).time_in_burst_ns, 9_000);
}

#[test]
fn a_window_exactly_at_the_limit_is_no_burst_and_equal_times_count_in_order() {
    let mut d = detector(None, vec![]);
    send(&mut d, 0, 500, 1);
    send(&mut d, 0, 500, 1);
    assert!(!d.monitors[0].is_open(View::Rate), "1,000 B is at the limit, not above");
    send(&mut d, 0, 1, 1);
    assert!(d.monitors[0].is_open(View::Rate), "open at the third packet, at 0");
    d.drain();
    let e = d.events()[0];
    assert_eq!((e.start_ns, e.end_ns, e.packets, e.bytes), (0, W as i64, 1, 1));
}

#[test]
fn drain_ends_an_open_burst_when_its_window_would_fall_to_the_limit() {
    let mut d = detector(None, vec![]);
    for t in 0..10 {
        send(&mut d, t * 1_000, 200, 1); // 2,000 B over 10 us: open from the sixth packet
    }
    d.drain();
    let e = d.events()[0];
    // Leaving at t + 10 us each, the window holds 1,000 B once the fifth packet (4 us) left.
    assert_eq!((e.start_ns, e.end_ns, e.packets), (5_000, 14_000, 5));
    assert!(d.take_ended().len() == 1 && d.take_ended().is_empty());
}

#[test]
fn flows_are_exact_up_to_the_counters_and_bounded_beyond() {
    let mut d = detector(None, vec![]);
    send(&mut d, 0, 2_000, 7); // opens the event at once
    for i in 0..10u16 {
        send(&mut d, 1 + u64::from(i), 100 + u32::from(i), 100 + i);
    }
    d.drain();
    let flows = d.flows_of(&[0]);
    assert_eq!(flows.len(), REPORTED);
    let top: Vec<(u16, u64, u64)> = flows.iter().map(|f| (f.src_port, f.bytes, f.error_bytes)).collect();
    assert_eq!(top[0], (7, 2_000, 0));
    assert_eq!(top[1], (109, 109, 0));
    assert_eq!(top[7], (103, 103, 0));

    // Many flows of one packet each and one big flow: the big one is counted at most
    // bytes / COUNTERS over, and reported first.
    let mut d = detector(None, vec![]);
    for i in 0..500u64 {
        let (port, bytes) = if i % 5 == 0 { (1, 300) } else { (1_000 + i as u16, 100) };
        send(&mut d, i, bytes, port);
    }
    d.drain();
    // The event opens at the seventh packet (1,100 B): the big flow's first two came before.
    let (event, flows) = (d.events()[0], d.flows_of(&[0]));
    assert_eq!({ event.start_ns }, 6);
    let total = event.bytes;
    let big = flows[0];
    assert_eq!({ big.src_port }, 1);
    let true_bytes = 98 * 300;
    assert!(big.bytes >= true_bytes && big.bytes - big.error_bytes <= true_bytes);
    assert!(big.error_bytes <= total / COUNTERS as u64, "{} > {}", { big.error_bytes }, total / 32);
}

#[test]
fn the_queue_view_rises_and_falls_with_hysteresis() {
    let mut d = detector(Some(QueueThresholds { rise_bytes: 3_000, fall_bytes: 1_000 }), vec![1_000]);
    for (t, bytes) in [(100, 1_500), (200, 1_500), (300, 1_500)] {
        d.port_arrival(0, t, bytes, Outcome::Pass);
    }
    assert!(d.monitors[0].is_open(View::Queue), "4,500 B > 3,000 B");
    d.port_arrival(0, 400, 1_500, Outcome::DropPortQueue);
    d.departed(0, 1_500, 1_500); // 3,000 B: still open (fall at 1,000 B)
    d.departed(0, 2_500, 1_500); // 1,500 B
    assert!(d.events().is_empty());
    d.departed(0, 3_500, 1_500); // 0 B
    let e = d.events()[0];
    assert_eq!((e.view, e.start_ns, e.end_ns, e.max_queue_bytes, e.drop_port_queue, e.dropped), (View::Queue as u8, 300, 3_500, 4_500, 1, 1));
    // Polls at 1, 2 and 3 us read 4,500, 3,000 and 1,500 bytes.
    let polls = d.stats()[0].polls[0];
    assert_eq!((polls.queue_polls, polls.queue_nonzero_polls, polls.queue_max_at_polls), (3, 3, 4_500));
}

#[test]
fn polls_average_each_interval() {
    let mut d = detector(None, vec![1_000_000, 100_000]);
    send(&mut d, 10, 1_000, 1);
    send(&mut d, 150_000, 500, 1);
    send(&mut d, 2_500_000, 250, 1);
    let views = d.stats()[0].polls.clone();
    // 1 ms polls: intervals 0..=2, 1,500 B in the first; 100 us polls: 0..=25, 1,000 B in one.
    assert_eq!((views[0].polls, views[0].peak_bps, views[0].mean_bps), (3, 12_000_000, 1_750 * 8_000 / 3));
    assert_eq!((views[1].polls, views[1].peak_bps), (26, 80_000_000));
}

#[test]
fn an_update_keeps_an_unchanged_scope_and_ends_a_changed_one() {
    let mut d = detector(None, vec![]);
    send(&mut d, 0, 2_000, 1);
    let names: [Arc<str>; 1] = ["a".into()];
    let config = d.monitors[0].config;
    let spec = |config| BurstSpec { port: None, tenants: vec![TenantBursts { name: "a".into(), tenant: Some(config), classes: vec![] }], poll_ns: vec![] };
    d.retarget(&spec(config), &names, &[], false, 5);
    assert!(d.monitors[0].is_open(View::Rate) && d.events().is_empty(), "kept, still open");
    d.retarget(&spec(BurstConfig { window_ns: 2 * W, ..config }), &names, &[], false, 6);
    assert_eq!((d.events()[0].start_ns, d.events()[0].end_ns), (0, 6));
    assert!(!d.monitors[0].is_open(View::Rate) && d.hot[0].window_len() == 0);
    assert_eq!(d.stats()[0].totals.rate_events, 1, "the ended event's totals stay");
}

#[test]
fn a_packet_leaves_the_window_exactly_one_window_after_it_came() {
    // (t - W, t]: at t = W the packet of time 0 is out, 1 ns earlier it is in.
    let mut apart = detector(None, vec![]);
    send(&mut apart, 0, 600, 1);
    send(&mut apart, W, 600, 1);
    apart.drain();
    assert!(apart.events().is_empty(), "1,200 B, but never in one window");
    let mut within = detector(None, vec![]);
    send(&mut within, 0, 600, 1);
    send(&mut within, W - 1, 600, 1);
    within.drain();
    let e = within.events()[0];
    assert_eq!((e.start_ns, e.end_ns), ((W - 1) as i64, W as i64), "ends as the first packet leaves, at 0 + W");
}

/// Tenants a and c, each watched with two classes, and b (watched, one class watched) between
/// them; each class has a port queue, in tenant order.
fn watched(names: &[&str]) -> (BurstSpec, Vec<Arc<str>>, Vec<(usize, u16)>) {
    let config = BurstConfig { window_ns: W, threshold_bps: 800_000_000, queue: Some(QueueThresholds { rise_bytes: 1_500, fall_bytes: 500 }) };
    let settings = |name: &str| match name {
        "b" => TenantBursts { name: "b".into(), tenant: Some(config), classes: vec![(1, config)] },
        _ => TenantBursts { name: name.into(), tenant: Some(config), classes: vec![(0, config), (1, config)] },
    };
    let spec = BurstSpec { port: Some(config), tenants: names.iter().map(|&name| settings(name)).collect(), poll_ns: vec![4 * W] };
    let queues = (0..names.len()).flat_map(|t| [(t, 0), (t, 1)]).collect();
    (spec, names.iter().map(|&name| name.into()).collect(), queues)
}

fn watched_detector(names: &[&str]) -> Detector {
    let (spec, names, queues) = watched(names);
    let mut detector = Detector::default();
    detector.retarget(&spec, &names, &queues, false, 0);
    detector
}

/// Two detectors watching `names` (see [`watched`]), through the same `packets` from time 0.
fn twins(names: &[&str], packets: &[(i32, i32)]) -> (Detector, Detector) {
    let (mut one, mut other) = (watched_detector(names), watched_detector(names));
    for d in [&mut one, &mut other] {
        traffic(d, 0, packets);
    }
    (one, other)
}

/// `packets` from time 2,000 through both, then the end of the stream.
fn finish_both(one: &mut Detector, other: &mut Detector, packets: &[(i32, i32)]) {
    for d in [one, other] {
        traffic(d, 2_000, packets);
        d.drain();
    }
}

/// Each class's port queue, in tenant order (two classes a tenant).
fn queue_of(tenant: i32, cls: i32) -> u32 {
    (2 * tenant + cls) as u32
}

/// Packets of tenants (by index) and classes at `start`, each also through its port queue
/// ([`queue_of`]), enough to open rate and queue events; the queues then empty.
fn traffic(d: &mut Detector, start: u64, packets: &[(i32, i32)]) {
    for (k, &(tenant, cls)) in packets.iter().enumerate() {
        let now = start + k as u64 * 100;
        let verdict = Verdict { tenant, rule: -1, cls, action: ALLOW, reason: 0 };
        d.observe(now, 700, &verdict, &packet(k as u16), Outcome::Pending as u8);
        d.port_arrival(queue_of(tenant, cls), now, 700, Outcome::Pass);
    }
    let end = start + packets.len() as u64 * 100;
    for &(tenant, cls) in packets {
        d.departed(queue_of(tenant, cls), end, 700);
    }
}

/// Events and totals by scope name, not by the detector's name ids or monitor order (which
/// orders the events that end at one time).
fn seen(d: &Detector) -> (Vec<String>, Vec<ScopeStats>) {
    let name = |id: i32| if id < 0 { "port".to_string() } else { d.names()[id as usize].clone() };
    let mut events: Vec<_> = d.events().iter().map(|e| format!("{} {} {:?}", { e.end_ns }, name(e.tenant), BurstEvent { id: 0, tenant: 0, ..*e })).collect();
    events.sort();
    (events, d.stats())
}

#[test]
fn a_watched_tenant_put_in_the_middle_is_watched_as_after_a_retarget_and_the_others_carry_on() {
    let (mut inserted, mut retargeted) = twins(&["a", "c"], &[(0, 0), (0, 1), (1, 0), (0, 0), (1, 1), (1, 1)]);
    let (spec, names, queues) = watched(&["a", "b", "c"]);
    inserted.open_tenant(1);
    inserted.occupy_tenant(1, 4..6, spec.tenants.iter().find(|t| t.name == "b")); // c's queues stay 2..4
    retargeted.retarget(&spec, &names, &queues, false, 1_000); // the queues are empty
    assert!(inserted.monitors.iter().any(|m| m.is_open(View::Rate)), "the others' events stay open");
    inserted.reorder_queues(&[0, 1, 4, 5, 2, 3]); // in tenant order, as the traffic numbers them
    finish_both(&mut inserted, &mut retargeted, &[(1, 1), (1, 1), (0, 0), (2, 0), (1, 0), (1, 1), (2, 1), (1, 1)]);
    let (events, stats) = seen(&inserted);
    assert!(events.iter().any(|e| e.contains(" b BurstEvent")) && stats.iter().any(|s| s.key == ScopeKey::Class("b".into(), 1)), "b is watched");
    assert_eq!((events, stats), seen(&retargeted));
}

#[test]
fn a_watched_tenant_taken_out_ends_its_events_keeps_its_totals_and_the_others_carry_on() {
    let (mut removed, mut retargeted) = twins(&["a", "b", "c"], &[(1, 1), (1, 1), (0, 0), (1, 1), (2, 0), (1, 1)]);
    assert!(removed.tenant_open(1) && removed.removable(1, 2..4) && !removed.removable(3, 6..8));
    assert!(removed.vacate_tenant(1, 2..4, 1_000));
    removed.close_tenant(1);
    removed.reorder_queues(&[0, 1, 4, 5]); // b's vacant queues go, as the traffic numbers them
    let (spec, names, queues) = watched(&["a", "c"]);
    retargeted.retarget(&spec, &names, &queues, false, 1_000); // the queues are empty
    assert_eq!(seen(&removed), seen(&retargeted), "b's events ended at the removal, its totals kept");
    finish_both(&mut removed, &mut retargeted, &[(0, 0), (1, 0), (0, 1), (1, 1), (1, 1), (0, 0), (1, 0)]);
    assert_eq!(seen(&removed), seen(&retargeted));
    assert!(removed.tenants.iter().all(|t| t.tenant != NONE) && removed.monitors.len() == 1 + 2 * 3, "the port's, a's and c's");
}

#[test]
fn a_tenant_whose_settings_changed_keeps_its_unchanged_scopes_and_ends_the_others_as_a_retarget_does() {
    let (mut rescoped, mut retargeted) = twins(&["a", "b", "c"], &[(1, 1), (1, 1), (0, 0), (1, 0), (2, 0), (1, 1)]);
    // b keeps its own setting, its class 1's changes and its class 0 gets one.
    let (mut spec, names, queues) = watched(&["a", "b", "c"]);
    let config = spec.tenants[1].classes[0].1;
    spec.tenants[1].classes = vec![(0, config), (1, BurstConfig { window_ns: 2 * W, ..config })];
    assert!(rescoped.tenant_open(1) && rescoped.class_open(1, 1));
    rescoped.rescope_tenant(1, 2..4, Some(&spec.tenants[1]), 1_000);
    retargeted.retarget(&spec, &names, &queues, false, 1_000); // the queues are empty
    assert!(rescoped.tenant_open(1) && !rescoped.class_open(1, 1), "b's own event goes on, its class 1's ended");
    assert_eq!(seen(&rescoped), seen(&retargeted));
    finish_both(&mut rescoped, &mut retargeted, &[(1, 0), (1, 0), (0, 1), (1, 1), (2, 1), (1, 0), (1, 1)]);
    assert_eq!(seen(&rescoped), seen(&retargeted));
    // And none at all: b's scopes go, its totals stay.
    spec.tenants.remove(1);
    rescoped.rescope_tenant(1, 2..4, None, 20_000);
    retargeted.retarget(&spec, &names, &queues, false, 20_000);
    assert_eq!(seen(&rescoped), seen(&retargeted));
    assert_eq!(rescoped.monitors.len(), 1 + 2 * 3, "the port's, a's and c's, each its own and two classes'");
}
