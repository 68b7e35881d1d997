//! Switching on hand-made packets: a burst profile taken at the packet after the one that starts
//! a burst and left a hold after it ends, its own meter state, and counts closed by an update.

use super::*;
use crate::bursts::{BurstConfig, BurstSpec, TenantBursts};
use crate::enforce::{BurstProfile, ClassQos, ColorAction, Contract, Count, MeterSpec, Outcome, Processed, ProfileQos};
use crate::meter::{MeterKind, MeterParams};
use crate::parse::PacketInfo;
use crate::shaping::QueueConfig;
use crate::verdict::{Reason, Verdict, ALLOW};
use bytemuck::Zeroable;

const WINDOW_NS: u64 = 10_000;
const HOLD_NS: u64 = 50_000;

/// Tenant "a": no contract of its own, a burst profile whose meter drops every 1,000-byte packet,
/// a microburst scope of 10 us over 1 Gbit/s (1,250 bytes a window: two packets 1 us apart burst).
fn spec() -> QosSpec {
    let drop_all = MeterSpec { params: MeterParams::blind(MeterKind::SrTcm { cir: 1, cbs: 64, ebs: 0 }), count: Count::Outer, actions: [ColorAction::Drop; 3] };
    let class = ClassQos { contract: Contract::default(), queue: QueueConfig::BEST_EFFORT, on_burst: None };
    let on_burst = BurstProfile {
        profile: ProfileQos { contract: Contract { meter: Some(drop_all), shaper: None }, queues: vec![class.queue] },
        hold_ns: HOLD_NS,
        max_switches_per_s: 0,
    };
    let tenant = TenantQos { name: "a".into(), contract: Contract::default(), classes: vec![class], on_burst: Some(Box::new(on_burst)), on_overload: None };
    let config = BurstConfig { window_ns: WINDOW_NS, threshold_bps: 1_000_000_000, queue: None };
    let bursts = BurstSpec { tenants: vec![TenantBursts { name: "a".to_string(), tenant: Some(config), classes: Vec::new() }], ..BurstSpec::default() };
    QosSpec { tenants: vec![tenant], bursts, ..QosSpec::default() }
}

fn enforcer() -> Enforcer {
    let mut enforcer = Enforcer::default();
    enforcer.stage(Some(spec()));
    enforcer.retarget(&["a".into()]);
    enforcer
}

fn run(enforcer: &mut Enforcer, times: &[i64]) -> Vec<Processed> {
    let records: Vec<PacketInfo> =
        times.iter().map(|&t| PacketInfo { timestamp_ns: t, wire_len: 1000, inner_len: 950, vni: -1, vlan: -1, ..Zeroable::zeroed() }).collect();
    let verdicts = vec![Verdict { tenant: 0, rule: -1, cls: 0, action: ALLOW, reason: Reason::Default as u8 }; times.len()];
    let mut out = Vec::new();
    enforcer.enforce(&records, &verdicts, &mut out);
    out
}

fn dropped(out: &[Processed]) -> Vec<bool> {
    out.iter().map(|p| p.outcome == Outcome::DropMeter as u8).collect()
}

#[test]
fn the_packet_after_the_one_that_starts_a_burst_takes_the_profile_until_the_hold_after_it_ends() {
    let mut e = enforcer();
    // 0: alone. 100 us on, a burst: 101 us starts it (1,000 + 1,000 bytes in 10 us), the rest
    // are under the profile. The event ends at 112 us (the window falls to one packet, 1,000 B),
    // the hold at 162 us: 150 us is still held, 170 us is not.
    let out = run(&mut e, &[0, 100_000, 101_000, 102_000, 103_000, 150_000, 170_000]);
    assert_eq!(dropped(&out), [false, false, false, true, true, true, false]);
    let events: Vec<(u64, u8, u8, u8)> = e.profile_events().iter().map(|ev| (ev.time_ns, ev.from, ev.to, ev.cause)).collect();
    assert_eq!(events, [(101_000, 0, 1, SwitchCause::BurstStarted as u8), (112_000 + HOLD_NS, 1, 0, SwitchCause::BurstEnded as u8)]);
    assert_eq!(e.profile_counts()[0].2, ProfileCounts { packets: [4, 3, 0], switches: 2 });
}

#[test]
fn an_update_puts_a_tenant_back_in_its_normal_profile_and_its_counts_run_on() {
    let mut e = enforcer();
    run(&mut e, &[0, 1_000, 2_000]); // in a burst from the second packet
    e.stage(Some(spec()));
    e.retarget(&["a".into()]);
    let events = e.profile_events();
    assert_eq!((events[events.len() - 1].to, events[events.len() - 1].cause), (ProfileId::Normal as u8, SwitchCause::Update as u8));
    let out = run(&mut e, &[3_000]); // the detector's window kept its packets: the burst goes on, and switches the tenant again
    assert!(!dropped(&out)[0], "the first packet after the update finds the normal profile");
    let counts = e.profile_counts()[0].2;
    assert_eq!((counts.packets.iter().sum::<u64>(), counts.packets[ProfileId::Burst as usize]), (4, 1));
}

#[test]
fn a_tenant_removed_before_one_with_a_profile_leaves_it_switching_as_before() {
    let mut with_x = spec();
    let plain = ClassQos { contract: Contract::default(), queue: QueueConfig::BEST_EFFORT, on_burst: None };
    with_x.tenants.insert(0, TenantQos { name: "x".into(), contract: Contract::default(), classes: vec![plain], on_burst: None, on_overload: None });
    let mut e = Enforcer::default();
    e.stage(Some(with_x));
    e.retarget(&["x".into(), "a".into()]);
    assert!(e.remove(0));
    // As in the first test, "a" now tenant 0: its profile slot, watch and burst scope followed it.
    let out = run(&mut e, &[0, 100_000, 101_000, 102_000, 103_000, 150_000, 170_000]);
    assert_eq!(dropped(&out), [false, false, false, true, true, true, false]);
    let counts = e.profile_counts();
    assert!(e.remove(0), "a's burst profile goes with it, alone");
    assert_eq!(e.profile_counts(), counts, "its counts, archived");
}
