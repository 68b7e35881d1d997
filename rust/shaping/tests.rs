//! The shaper against its closed form, the histogram against exact quantiles, and the port
//! against a naive reference model (packet by packet) and against the properties isolation is
//! for: fairness, priority, ceilings, guarantees, reclaiming an idle share, the line rate.

use std::num::NonZeroU64;

use super::edt::MIN_BURST;
use super::port::QUANTUM_BYTES;
use super::reference::{Arrival, RefPort};
use super::*;
use crate::test_rng::Rng;
use proptest::prelude::*;

const MS: u64 = 1_000_000;
const SECOND: u64 = 1_000_000_000;

// ---------------------------------------------------------------------------------------------
// EDT shaper

fn shaper(rate: u64, burst: u64) -> ShaperParams {
    ShaperParams { rate, burst, max_queue_bytes: u64::MAX / 4, max_delay_ns: u64::MAX }
}

/// `ceil(x / y)` for the closed forms below.
fn up(x: u128, y: u128) -> u128 {
    x.div_ceil(y)
}

#[test]
fn burst_passes_at_once_then_packets_are_spaced_by_bytes_over_rate() {
    let params = shaper(1_000_000, 3000); // 1 byte per microsecond
    let mut state = ShaperState::default();
    let releases: Vec<u64> = (0..6).map(|_| state.shape(&params, 0, 1000).unwrap()).collect();
    assert_eq!(releases, [0, 0, 0, MS, 2 * MS, 3 * MS]);
    // After a quiet spell the bucket is full again, but holds no more than the burst.
    let later = 100 * MS;
    let releases: Vec<u64> = (0..4).map(|_| state.shape(&params, later, 1000).unwrap()).collect();
    assert_eq!(releases, [later, later, later, later + MS]);
}

#[test]
fn spacing_with_a_rate_that_does_not_divide_a_second_has_no_drift() {
    // 7 B/s-odd rate: every release is a fraction of a ns away from its exact time, rounded up.
    let rate = 1_000_000_007;
    let (burst, bytes) = (4000u64, 1500u32);
    let params = shaper(rate, burst);
    let mut state = ShaperState::default();
    for n in 1..=2_000_000u128 {
        let release = state.shape(&params, 0, bytes).unwrap();
        let owed = (n * u128::from(bytes)).saturating_sub(u128::from(burst)) * 1_000_000_000;
        assert_eq!(u128::from(release), up(owed, u128::from(rate)), "packet {n}");
    }
}

#[test]
fn long_run_rate_is_within_a_thousandth_of_the_target() {
    let rate = 123_456_789; // ~1 Gbit/s, not a round number
    let params = ShaperParams { rate, burst: 125_000, max_queue_bytes: 2_000_000, max_delay_ns: 50 * MS };
    let mut state = ShaperState::default();
    let mut rng = Rng(7);
    let (mut now, mut sent, mut first, mut last) = (0u64, 0u64, None, 0u64);
    for _ in 0..3_000_000 {
        now += rng.below(8_000); // offered ~1.9x the rate: the shaper is the bottleneck
        let bytes = rng.between(64, 1500) as u32;
        if let Ok(release) = state.shape(&params, now, bytes) {
            assert!(release >= now && release - now <= params.max_delay_ns);
            first.get_or_insert(release);
            sent += u64::from(bytes);
            last = release;
        }
    }
    let seconds = (last - first.unwrap()) as f64 / 1e9;
    let achieved = (sent - params.burst) as f64 / seconds;
    let error = (achieved - rate as f64).abs() / rate as f64;
    assert!(error < 0.001, "achieved {achieved:.0} B/s for {rate} B/s: error {error:.5}");
}

#[test]
fn queue_limits_drop_at_the_tail_and_change_nothing() {
    let params = ShaperParams { rate: 1_000_000, burst: 2000, max_queue_bytes: 2500, max_delay_ns: u64::MAX };
    let mut state = ShaperState::default();
    assert_eq!(state.shape(&params, 0, 1000), Ok(0));
    assert_eq!(state.shape(&params, 0, 1000), Ok(0));
    assert_eq!(state.shape(&params, 0, 1000), Ok(MS)); // owes 1000 beyond the burst
    assert_eq!(state.shape(&params, 0, 1000), Ok(2 * MS)); // owes 2000
    assert_eq!(state.backlog_bytes(&params, 0), 2000);
    let before = state;
    assert_eq!(state.shape(&params, 0, 1000), Err(ShapeDrop::QueueBytes)); // would owe 3000
    assert_eq!(state.shape(&params, MS / 10, 9000), Err(ShapeDrop::QueueBytes)); // a later one
    assert_eq!(state, before);
    assert_eq!(state.shape(&params, 0, 500), Ok(2 * MS + MS / 2)); // a smaller one fits
    assert_eq!(state.backlog_bytes(&params, MS), 1500);

    let params = ShaperParams { rate: 1_000_000, burst: 2000, max_queue_bytes: u64::MAX, max_delay_ns: MS + 1 };
    let mut state = ShaperState::default();
    for expected in [0, 0, MS] {
        assert_eq!(state.shape(&params, 0, 1000), Ok(expected));
    }
    let before = state;
    assert_eq!(state.shape(&params, 0, 1000), Err(ShapeDrop::QueueTime)); // would wait 2 ms
    assert_eq!(state, before);
    assert_eq!(state.shape(&params, MS, 1000), Ok(2 * MS)); // 1 ms later it waits only 1 ms
}

#[test]
fn a_policer_is_a_shaper_without_a_queue() {
    let params = ShaperParams { rate: 1_000_000, burst: 1500, max_queue_bytes: 0, max_delay_ns: 0 };
    let mut state = ShaperState::default();
    assert_eq!(state.shape(&params, 0, 1500), Ok(0));
    assert!(state.shape(&params, 0, 64).is_err());
    assert!(state.shape(&params, MS / 2, 1000).is_err()); // 500 B of tokens back: not enough
    assert_eq!(state.shape(&params, MS, 1000), Ok(MS));
}

#[test]
fn time_going_backwards_is_read_as_the_last_time_seen() {
    let params = shaper(1_000_000, 1000);
    let mut state = ShaperState::default();
    assert_eq!(state.shape(&params, 10 * MS, 1000), Ok(10 * MS));
    let mut same = state;
    let back = state.shape(&params, 5 * MS, 1000).unwrap();
    assert_eq!(back, same.shape(&params, 10 * MS, 1000).unwrap());
    assert_eq!(back, 11 * MS);
    assert_eq!(state, same);
}

#[test]
fn frames_larger_than_the_burst_wait_for_the_excess() {
    let params = shaper(1_000_000, 1000);
    let mut state = ShaperState::default();
    assert_eq!(state.shape(&params, 0, 3000), Ok(2 * MS));
    assert_eq!(state.shape(&params, 0, 1000), Ok(3 * MS));
}

#[test]
fn shaper_state_is_small_and_params_are_checked() {
    assert!(std::mem::size_of::<ShaperState>() <= 32);
    assert!(shaper(1, MIN_BURST).check().is_ok());
    assert!(shaper(0, 1500).check().is_err());
    assert!(shaper(MAX_RATE + 1, 1500).check().is_err());
    assert!(shaper(1000, MIN_BURST - 1).check().is_err());
}

#[test]
fn extreme_times_and_rates_do_not_overflow() {
    let params = shaper(MAX_RATE, 1 << 30);
    let mut state = ShaperState::default();
    let late = 1 << 62; // 146 years of ns: beyond any capture's timestamps
    let wait = up((u128::from(u32::MAX) - (1 << 30)) * 1_000_000_000, u128::from(MAX_RATE)) as u64;
    assert_eq!(state.shape(&params, late, u32::MAX), Ok(late + wait));
    let slow = shaper(1, MIN_BURST);
    let mut state = ShaperState::default();
    assert_eq!(state.shape(&slow, late, 64), Ok(late));
    assert_eq!(state.shape(&slow, late, 1), Ok(late + SECOND));
}

/// GCRA as plainly as it reads: the TAT in 1/rate ns as one number, every step a division.
struct RefShaper {
    tat: u128,
    last_ns: u64,
}

impl RefShaper {
    fn shape(&mut self, p: &ShaperParams, now_ns: u64, bytes: u32) -> Result<u64, ShapeDrop> {
        let (rate, ns) = (u128::from(p.rate), 1_000_000_000u128);
        let now = now_ns.max(self.last_ns);
        let tat = self.tat.max(u128::from(now) * rate) + u128::from(bytes) * ns;
        let owed = tat.saturating_sub(u128::from(now) * rate + u128::from(p.burst) * ns);
        if owed > u128::from(p.max_queue_bytes) * ns {
            return Err(ShapeDrop::QueueBytes);
        }
        let wait = up(owed, rate);
        if wait > u128::from(p.max_delay_ns) {
            return Err(ShapeDrop::QueueTime);
        }
        // As the shaper keeps it: whole ns that saturate at u64::MAX, and the remainder.
        let whole_ns = (tat / rate).min(u128::from(u64::MAX));
        (self.tat, self.last_ns) = (whole_ns * rate + tat % rate, now);
        Ok(now.saturating_add(wait as u64))
    }

    fn backlog_bytes(&self, p: &ShaperParams, now_ns: u64) -> u64 {
        let (rate, ns) = (u128::from(p.rate), 1_000_000_000u128);
        let owed = self.tat.saturating_sub(u128::from(now_ns.max(self.last_ns)) * rate + u128::from(p.burst) * ns);
        u64::try_from(up(owed, ns)).unwrap_or(u64::MAX)
    }
}

/// Rates that do and do not divide a second, from 1 B/s to the largest.
fn any_rate() -> impl Strategy<Value = u64> {
    prop_oneof![Just(1u64), Just(3), Just(999_999_937), Just(MAX_RATE), 1u64..2000, 1u64..=MAX_RATE]
}

/// From nothing to `u64::MAX`, with the ends weighted in.
fn any_amount(small: u64) -> impl Strategy<Value = u64> {
    prop_oneof![Just(0u64), 0..small, any::<u64>(), Just(u64::MAX)]
}

proptest! {
    #[test]
    fn the_shaper_agrees_with_plain_division_packet_by_packet(
        rate in prop_oneof![1u64..2000, 1u64..=MAX_RATE],
        burst in MIN_BURST..2_000_000,
        queue in prop_oneof![Just(0u64), 0u64..4_000_000, Just(u64::MAX / 4)],
        max_delay_ns in prop_oneof![Just(u64::MAX), 0u64..10 * SECOND],
        steps in proptest::collection::vec((0u64..5 * MS, prop_oneof![64u32..9216, Just(u32::MAX)]), 1..200),
    ) {
        let params = ShaperParams { rate, burst, max_queue_bytes: queue, max_delay_ns };
        let (mut fast, mut plain) = (ShaperState::default(), RefShaper { tat: 0, last_ns: 0 });
        let mut now = 1 << 40;
        for (gap, bytes) in steps {
            now += gap;
            prop_assert_eq!(fast.shape(&params, now, bytes), plain.shape(&params, now, bytes));
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    /// The ends of every range: rates of 1 B/s and 2^42, bursts and queues up to `u64::MAX`
    /// bytes, packets of 0 bytes and of `u32::MAX`, times near 0 and near `u64::MAX`, gaps of
    /// nothing and of centuries, time going back.
    #[test]
    fn the_shaper_agrees_with_plain_division_at_the_ends_of_its_ranges(
        rate in any_rate(),
        burst in prop_oneof![Just(MIN_BURST), MIN_BURST..100_000, MIN_BURST..=u64::MAX],
        queue in any_amount(100_000),
        max_delay_ns in any_amount(10 * SECOND),
        start in prop_oneof![0u64..1000, u64::MAX - (1 << 40)..=u64::MAX, any::<u64>()],
        steps in proptest::collection::vec((any::<bool>(), any_amount(10 * MS), prop_oneof![Just(0u32), 1u32..64, 64u32..9216, Just(u32::MAX)]), 1..100),
    ) {
        let params = ShaperParams { rate, burst, max_queue_bytes: queue, max_delay_ns };
        let (mut fast, mut plain) = (ShaperState::default(), RefShaper { tat: 0, last_ns: 0 });
        let mut now = start;
        for (back, gap, bytes) in steps {
            now = if back { now.saturating_sub(gap) } else { now.saturating_add(gap) };
            prop_assert_eq!(fast.shape(&params, now, bytes), plain.shape(&params, now, bytes));
            prop_assert_eq!(fast.backlog_bytes(&params, now), plain.backlog_bytes(&params, now));
        }
    }
}

/// The shaper and the plain reference, packet by packet: the releases.
fn agree(params: &ShaperParams, packets: &[(u64, u32)]) -> Vec<Result<u64, ShapeDrop>> {
    let (mut fast, mut plain) = (ShaperState::default(), RefShaper { tat: 0, last_ns: 0 });
    let mut releases = Vec::new();
    for (index, &(now, bytes)) in packets.iter().enumerate() {
        let release = plain.shape(params, now, bytes);
        assert_eq!(fast.shape(params, now, bytes), release, "{params:?}, packet {index}");
        assert_eq!(fast.backlog_bytes(params, now), plain.backlog_bytes(params, now), "{params:?}, packet {index}");
        releases.push(release);
    }
    releases
}

#[test]
fn a_tat_more_than_2_64_ns_ahead_is_still_exact() {
    // At 1 B/s a packet of u32::MAX bytes moves the TAT ~4.3e18 ns: four of them and a few of a
    // billion bytes take it past 2^64 ns ahead, where only a queue of ~2e10 bytes or more lets
    // it get, and where a burst of 1e10 bytes still lets a packet leave within u64 ns.
    let sizes = [u32::MAX, u32::MAX, u32::MAX, u32::MAX, 1_000_000_000, 1_000_000_000, 1_000_000_000, 1_000_000_000];
    let packets: Vec<(u64, u32)> = sizes.into_iter().enumerate().map(|(step, bytes)| (step as u64 * 1000, bytes)).collect();
    for (burst, queue) in [(10_000_000_000, 10_000_000_000), (10_000_000_000, 30_000_000_000), (MIN_BURST, u64::MAX), (MIN_BURST, u64::MAX / 2)] {
        let params = ShaperParams { rate: 1, burst, max_queue_bytes: queue, max_delay_ns: u64::MAX };
        let releases = agree(&params, &packets);
        // Each wait as the longest allowed, and one ns short of it.
        for (release, (now, _)) in releases.into_iter().zip(&packets) {
            if let Ok(wait) = release.map(|r| r - now) {
                agree(&ShaperParams { max_delay_ns: wait, ..params }, &packets);
                agree(&ShaperParams { max_delay_ns: wait.saturating_sub(1), ..params }, &packets);
            }
        }
    }
}

/// A billion packets: `cargo test --release --lib shaping -- --ignored`.
#[test]
#[ignore]
fn a_billion_packets_land_exactly_on_their_closed_form() {
    let rate = 1_234_567_891;
    let params = shaper(rate, 9000);
    let mut state = ShaperState::default();
    let mut release = 0;
    for _ in 0..1_000_000_000u64 {
        release = state.shape(&params, release, 1500).unwrap();
    }
    let owed = (1_000_000_000u128 * 1500 - 9000) * 1_000_000_000;
    assert_eq!(u128::from(release), up(owed, u128::from(rate)));
}

// ---------------------------------------------------------------------------------------------
// Histogram

fn exact_quantile(sorted: &[u64], numerator: u64, denominator: u64) -> u64 {
    let rank = (sorted.len() as u64 * numerator).div_ceil(denominator).max(1);
    sorted[rank as usize - 1]
}

#[test]
fn small_values_are_exact_and_buckets_are_narrow() {
    let mut histogram = LogHistogram::new();
    for value in [0, 1, 5, 63, 63] {
        histogram.record(value);
    }
    assert_eq!((histogram.p50(), histogram.p99(), histogram.max(), histogram.count()), (Some(5), Some(63), 63, 5));
    assert_eq!(LogHistogram::new().p99(), None);
    let mut rng = Rng(3);
    for _ in 0..100_000 {
        let value = rng.next() >> rng.below(64);
        let (low, width) = histogram::bounds_of(value);
        assert!(low <= value && value - low < width, "{value} in [{low}, +{width})");
        assert!(width == 1 || width * 64 <= low, "{value}: bucket of {width} at {low}");
    }
}

proptest! {
    #[test]
    fn quantiles_are_within_one_128th_of_the_exact_ones(
        seed in any::<u64>(), count in 1usize..3000, top in 1u32..60, spread in 1u32..40,
    ) {
        let mut rng = Rng(seed | 1);
        let mut samples: Vec<u64> = (0..count).map(|_| (rng.next() >> (64 - top)) >> rng.below(u64::from(spread))).collect();
        let mut histogram = LogHistogram::new();
        for &sample in &samples {
            histogram.record(sample);
        }
        samples.sort_unstable();
        prop_assert_eq!(histogram.max(), *samples.last().unwrap());
        prop_assert_eq!(histogram.min(), samples[0]);
        for (numerator, denominator) in [(1, 2), (99, 100), (999, 1000), (1, 1), (1, 1000)] {
            let exact = exact_quantile(&samples, numerator, denominator);
            let estimate = histogram.quantile(numerator, denominator).unwrap();
            prop_assert!(estimate.abs_diff(exact) * 128 <= exact, "q{}/{}: {} for {}", numerator, denominator, estimate, exact);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Port: helpers

const GBIT: u64 = 125_000_000;

fn per_queue(line_rate: u64, buffer_bytes: u64) -> PortConfig {
    PortConfig { line_rate, buffer_bytes, mode: PortMode::PerTenant }
}

fn queue(priority: u8, weight: u32, guarantee: u64, ceil: u64) -> QueueConfig {
    QueueConfig { priority, weight, guarantee, ceil, ..QueueConfig::BEST_EFFORT }
}

/// Feeds arrivals (sorted by time) and finishes: the departures and each arrival's verdict.
fn run(config: PortConfig, queues: &[QueueConfig], arrivals: &[Arrival]) -> (Port, Vec<Departure>, Vec<Result<(), PortDrop>>) {
    let mut port = Port::new(config, queues.to_vec()).unwrap();
    let verdicts = arrivals.iter().map(|a| port.arrive(a.ns, a.bytes, a.queue, a.packet)).collect();
    port.finish();
    let departures = port.take_departures();
    (port, departures, verdicts)
}

/// Traffic for one queue offered at `rate` B/s from `from` to `until` ns, sizes 64..=1500.
fn offered(rng: &mut Rng, queue: u32, rate: u64, from: u64, until: u64) -> Vec<Arrival> {
    let mut arrivals = Vec::new();
    let mut now = from;
    while now < until {
        let bytes = rng.between(64, 1500) as u32;
        arrivals.push(Arrival { ns: now, bytes, queue, packet: 0 });
        now += u64::from(bytes) * SECOND / rate;
    }
    arrivals
}

/// Merges per-queue traffic into one time-ordered list and numbers the packets in that order.
fn merged(parts: Vec<Vec<Arrival>>) -> Vec<Arrival> {
    let mut all: Vec<Arrival> = parts.into_iter().flatten().collect();
    all.sort_by_key(|a| (a.ns, a.queue));
    for (index, arrival) in all.iter_mut().enumerate() {
        arrival.packet = index as u64;
    }
    all
}

/// Bytes each queue started sending in [from, until).
fn bytes_sent(departures: &[Departure], queues: usize, from: u64, until: u64, arrivals: &[Arrival]) -> Vec<u64> {
    let mut sent = vec![0; queues];
    for d in departures.iter().filter(|d| d.start_ns >= from && d.start_ns < until) {
        sent[d.queue as usize] += u64::from(arrivals[d.packet as usize].bytes);
    }
    sent
}

fn jain(values: &[f64]) -> f64 {
    let sum: f64 = values.iter().sum();
    let squares: f64 = values.iter().map(|v| v * v).sum();
    sum * sum / (values.len() as f64 * squares)
}

// ---------------------------------------------------------------------------------------------
// Port: unit tests

#[test]
fn a_port_restarted_after_it_finished_sends_as_a_new_one_and_keeps_its_statistics() {
    let queues = [queue(0, 1, GBIT / 4, 0), queue(1, 3, GBIT / 8, GBIT / 2), queue(1, 1, 0, 0)];
    let mut rng = Rng(17);
    let traffic = |rng: &mut Rng, from: u64| merged((0..3).map(|q| offered(rng, q, GBIT / 2, from, from + SECOND / 100)).collect());
    let (first, later) = (traffic(&mut rng, SECOND), traffic(&mut rng, SECOND / 2)); // later starts earlier than the first ends
    let (mut used, _, _) = run(per_queue(GBIT, 1 << 20), &queues, &first);
    let sent_before: Vec<u64> = (0..3).map(|q| used.stats(q).sent_packets).collect();
    used.restart();
    let verdicts: Vec<_> = later.iter().map(|a| used.arrive(a.ns, a.bytes, a.queue, a.packet)).collect();
    used.finish();
    let (fresh, departures, fresh_verdicts) = run(per_queue(GBIT, 1 << 20), &queues, &later);
    assert_eq!((used.take_departures(), verdicts), (departures, fresh_verdicts));
    for q in 0..3 {
        assert_eq!(used.stats(q).sent_packets, sent_before[q as usize] + fresh.stats(q).sent_packets);
    }
}

#[test]
fn shares_through_a_weight_scale_weigh_as_their_units_and_a_new_scale_reweighs_every_queue() {
    // Shares 10, 20, 30 over 10 are units 1, 2, 3; with the class weights, weights 2, 2, 3.
    let weighed = [queue(1, 2, 0, 0), queue(1, 1, 0, 0), queue(1, 1, 0, 0)];
    let shared: Vec<QueueConfig> = weighed.iter().zip([10, 20, 30]).map(|(q, share)| QueueConfig { weight: q.weight, share, ..*q }).collect();
    let as_weighed = [queue(1, 2, 0, 0), queue(1, 2, 0, 0), queue(1, 3, 0, 0)];
    let mut rng = Rng(29);
    let traffic = merged((0..3).map(|q| offered(&mut rng, q, GBIT, 0, SECOND / 200)).collect());
    let scale = WeightScale { times: 1, per: NonZeroU64::new(10).unwrap() };
    let mut port = Port::new(per_queue(GBIT, 1 << 30), shared.clone()).unwrap();
    port.set_weight_scale(scale);
    let verdicts: Vec<_> = traffic.iter().map(|a| port.arrive(a.ns, a.bytes, a.queue, a.packet)).collect();
    port.finish();
    let (_, departures, expected) = run(per_queue(GBIT, 1 << 30), &as_weighed, &traffic);
    let sent = bytes_sent(&departures, 3, 0, SECOND / 400, &traffic);
    assert_eq!((port.take_departures(), verdicts), (departures, expected));
    assert!(sent[2] > sent[1] && sent[1] > sent[0] / 2, "shares weigh: {sent:?}");
    // Scaled to units of 1 (1/1: 10, 20, 30) the same arrivals go as weights 20, 20, 30.
    let mut rescaled = Port::new(per_queue(GBIT, 1 << 30), shared).unwrap();
    rescaled.set_weight_scale(scale);
    rescaled.set_weight_scale(WeightScale::default());
    let verdicts: Vec<_> = traffic.iter().map(|a| rescaled.arrive(a.ns, a.bytes, a.queue, a.packet)).collect();
    rescaled.finish();
    let tens = [queue(1, 20, 0, 0), queue(1, 20, 0, 0), queue(1, 30, 0, 0)];
    let (_, departures, expected) = run(per_queue(GBIT, 1 << 30), &tens, &traffic);
    assert_eq!((rescaled.take_departures(), verdicts), (departures, expected));
    // Quanta are made again lazily, scales counted in 16 bits: the 65,536th scale since the
    // quanta were made (per 20: units 1, 1, 1) is not taken for the one they were made under.
    let mut port = Port::new(per_queue(GBIT, 1 << 30), weighed.iter().zip([10, 20, 30]).map(|(q, share)| QueueConfig { share, ..*q }).collect()).unwrap();
    for k in 0..(1 << 16) - 1 {
        port.set_weight_scale(if k % 2 == 0 { scale } else { WeightScale::default() });
    }
    port.set_weight_scale(WeightScale { times: 1, per: NonZeroU64::new(20).unwrap() });
    let verdicts: Vec<_> = traffic.iter().map(|a| port.arrive(a.ns, a.bytes, a.queue, a.packet)).collect();
    port.finish();
    let (_, departures, expected) = run(per_queue(GBIT, 1 << 30), &weighed, &traffic);
    assert_eq!((port.take_departures(), verdicts), (departures, expected));
}

#[test]
fn a_weight_scale_gives_at_least_one_unit_and_at_most_32_bits() {
    let scale = WeightScale { times: u32::MAX, per: NonZeroU64::new(1 << 40).unwrap() };
    assert_eq!((scale.units(0), scale.units(1), scale.units(1 << 40), scale.units(u64::MAX)), (1, 1, u64::from(u32::MAX), u64::from(u32::MAX)));
    let heavy = QueueConfig { weight: u32::MAX, share: u64::MAX, ..QueueConfig::BEST_EFFORT };
    let mut port = Port::new(per_queue(GBIT, 1 << 20), vec![heavy, QueueConfig::BEST_EFFORT]).unwrap();
    port.set_weight_scale(scale);
    for (packet, queue) in [(0, 0), (1, 1), (2, 0)] {
        port.arrive(0, 1500, queue, packet).unwrap();
    }
    port.finish();
    assert_eq!(port.take_departures().len(), 3, "the heaviest quantum does not overflow the deficit");
}

#[test]
fn an_idle_port_sends_at_once_and_back_to_back_at_line_rate() {
    let line = 999_999_937; // a prime: transmission times are fractions of a ns
    let mut port = Port::new(per_queue(line, 1 << 20), vec![QueueConfig::BEST_EFFORT]).unwrap();
    port.arrive(1000, 1500, 0, 7).unwrap();
    port.arrive(1000, 1500, 0, 8).unwrap();
    port.arrive(1000, 64, 0, 9).unwrap();
    port.advance_to(1001);
    let tx = |bytes: u128| up(bytes * 1_000_000_000, u128::from(line)) as u64;
    let first = port.take_departures();
    assert_eq!(first, [Departure { packet: 7, queue: 0, arrival_ns: 1000, start_ns: 1000, depart_ns: 1000 + tx(1500), bytes: 1500 }]);
    port.advance_to(first[0].depart_ns + 1);
    let second = port.take_departures();
    assert_eq!(second.len(), 1, "the third starts after that: not decided yet");
    assert_eq!((second[0].start_ns, second[0].depart_ns), (first[0].depart_ns, 1000 + tx(3000)));
    port.finish();
    let last = port.take_departures()[0];
    assert_eq!((last.packet, last.depart_ns), (9, 1000 + tx(1500 * 2 + 64)));
    let stats = port.stats(0);
    assert_eq!((stats.sent_packets, stats.sent_bytes, stats.delay_ns.max()), (3, 3064, last.start_ns - 1000));
}

#[test]
fn drops_are_counted_per_queue_with_their_reason() {
    let limited = QueueConfig { limit_bytes: 3000, ..QueueConfig::BEST_EFFORT };
    let mut port = Port::new(per_queue(GBIT, 5000), vec![limited, QueueConfig::BEST_EFFORT]).unwrap();
    assert_eq!(port.arrive(0, 1500, 0, 0), Ok(()));
    assert_eq!(port.arrive(0, 1500, 0, 1), Ok(()));
    assert_eq!(port.arrive(0, 1500, 0, 2), Err(PortDrop::QueueLimit));
    assert_eq!(port.arrive(0, 1500, 1, 3), Ok(()));
    assert_eq!(port.arrive(0, 1500, 1, 4), Err(PortDrop::BufferFull));
    assert_eq!(port.arrive(0, 1500, 9, 5), Err(PortDrop::UnknownQueue));
    assert_eq!(port.queued_bytes(), 4500);
    assert_eq!((port.stats(0).drops(PortDrop::QueueLimit), port.stats(1).drops(PortDrop::BufferFull)), (1, 1));
    assert_eq!((port.stats(1).dropped_bytes[PortDrop::BufferFull as usize], port.unknown_queue_drops()), (1500, 1));
    // Once transmission starts, a packet's bytes leave the buffer.
    port.advance_to(1);
    assert_eq!(port.queued_bytes(), 3000);
    assert_eq!(port.arrive(1, 1500, 1, 6), Ok(()));
}

#[test]
fn bad_configurations_are_refused() {
    let q = QueueConfig::BEST_EFFORT;
    assert!(Port::new(per_queue(0, 1000), vec![q]).is_err());
    assert!(Port::new(per_queue(MAX_RATE + 1, 1000), vec![q]).is_err());
    assert!(Port::new(per_queue(GBIT, 0), vec![q]).is_err());
    assert!(Port::new(per_queue(GBIT, 1000), vec![QueueConfig { weight: 0, ..q }]).is_err());
    assert!(Port::new(per_queue(GBIT, 1000), vec![queue(0, 1, GBIT / 2, GBIT / 4)]).is_err());
    assert!(Port::new(per_queue(GBIT, 1000), vec![queue(0, 1, GBIT / 2, 0), queue(0, 1, GBIT / 2 + 1, 0)]).is_err());
    assert!(Port::new(per_queue(GBIT, 1000), vec![queue(0, 1, GBIT / 2, GBIT * 2), queue(0, 1, GBIT / 2, 0)]).is_ok());
    let reserving = |reserved_bytes| QueueConfig { reserved_bytes, ..q };
    assert!(Port::new(per_queue(GBIT, 1000), vec![reserving(600), reserving(400)]).is_ok());
    assert!(Port::new(per_queue(GBIT, 1000), vec![reserving(600), reserving(401)]).is_err());
    assert!(Port::new(per_queue(GBIT, 1000), vec![reserving(u64::MAX), reserving(u64::MAX)]).is_err());
    for (alpha_log2, ok) in [(-16, true), (16, true), (-17, false), (17, false), (i8::MIN, false)] {
        assert_eq!(Port::new(per_queue(GBIT, 1000), vec![QueueConfig { alpha_log2: Some(alpha_log2), ..q }]).is_ok(), ok, "{alpha_log2}");
    }
    let burst = |burst_bytes| QueueConfig { burst_bytes, ..queue(0, 1, GBIT / 2, 0) };
    assert!(Port::new(per_queue(GBIT, 1000), vec![burst(port::MAX_BURST_BYTES)]).is_ok());
    assert!(Port::new(per_queue(GBIT, 1000), vec![burst(port::MAX_BURST_BYTES + 1)]).is_err());
}

#[test]
fn a_flooding_queue_holds_at_most_alpha_times_the_free_buffer() {
    // 1000 B arrivals at one instant (nothing leaves before the decision): a queue is admitted
    // while its bytes after the arrival are at most alpha x (buffer - bytes before), so it
    // stops at about alpha / (1 + alpha) of the buffer and the rest stays free for others. With
    // 101,000 B the last admitted arrival meets the threshold exactly (after = alpha x 102,000 /
    // (1 + alpha)) for alpha 1/2, 1 and 2.
    let buffer = 101_000;
    for (alpha_log2, admitted) in [(-1i8, 34), (0, 51), (1, 68), (3, 90)] {
        let flooding = QueueConfig { alpha_log2: Some(alpha_log2), ..QueueConfig::BEST_EFFORT };
        let mut port = Port::new(per_queue(GBIT, buffer), vec![flooding, flooding]).unwrap();
        let verdicts: Vec<_> = (0..200).map(|packet| port.arrive(0, 1000, 0, packet)).collect();
        let accepted = verdicts.iter().take_while(|v| v.is_ok()).count();
        assert_eq!(accepted, admitted, "alpha 2^{alpha_log2}");
        assert!(verdicts[accepted..].iter().all(|v| *v == Err(PortDrop::QueueLimit)));
        assert_eq!(port.stats(0).drops(PortDrop::QueueLimit), 200 - admitted as u64);
        // The other queue finds room, and is itself held to alpha x what is left.
        let free = buffer - 1000 * admitted as u64;
        assert_eq!(port.arrive(0, 1000, 1, 200), Ok(()), "alpha 2^{alpha_log2}, {free} B free");
    }
    // Without a threshold the same flood takes the whole buffer.
    let mut port = Port::new(per_queue(GBIT, buffer), vec![QueueConfig::BEST_EFFORT; 2]).unwrap();
    let accepted = (0..200).filter(|&packet| port.arrive(0, 1000, 0, packet).is_ok()).count();
    assert_eq!((accepted, port.arrive(0, 1000, 1, 200)), (101, Err(PortDrop::BufferFull)));
}

#[test]
fn a_reserve_is_the_queues_own_and_the_rest_of_the_buffer_is_shared() {
    let reserving = QueueConfig { reserved_bytes: 4000, alpha_log2: Some(0), ..QueueConfig::BEST_EFFORT };
    let mut port = Port::new(per_queue(GBIT, 10_000), vec![reserving, QueueConfig::BEST_EFFORT]).unwrap();
    // Queue 1 (no reserve, no threshold) fills the shared pool: 10,000 - 4,000 B.
    let flood: Vec<_> = (0..8).map(|packet| port.arrive(0, 1000, 1, packet)).collect();
    assert_eq!(flood.iter().filter(|v| v.is_ok()).count(), 6);
    assert_eq!(flood[6..], [Err(PortDrop::BufferFull); 2]);
    // Queue 0 still has its reserve, but nothing beyond it: the pool is full.
    let own: Vec<_> = (8..13).map(|packet| port.arrive(0, 1000, 0, packet)).collect();
    assert_eq!(own, [Ok(()), Ok(()), Ok(()), Ok(()), Err(PortDrop::QueueLimit)]);
    assert_eq!(port.queued_bytes(), 10_000);
    // A packet leaves queue 1: the pool has 1000 B free, and queue 0 may take them (alpha 1).
    port.advance_to(1);
    assert_eq!(port.take_departures().len(), 1);
    assert_eq!(port.arrive(1, 1000, 0, 13), Ok(()));
    assert_eq!(port.arrive(1, 1, 0, 14), Err(PortDrop::QueueLimit));
}

#[test]
fn a_guarantee_burst_lets_a_queue_run_that_far_ahead_of_better_priorities() {
    // Queue 0 (priority 1) is guaranteed a tenth of the line; queue 1 (priority 0) has no
    // guarantee. A backlog for both at one instant: queue 0 sends within its guarantee first,
    // while its bucket holds a packet. After k packets of 1500 B it holds depth - 1350 k B
    // (it refills at a tenth of the sending rate).
    let line = GBIT;
    let first_of_queue_1 = |burst_bytes: u64, ceil: u64| {
        let queues = [QueueConfig { burst_bytes, ..queue(1, 1, line / 10, ceil) }, queue(0, 1, 0, 0)];
        let mut arrivals: Vec<Arrival> = (0..200).map(|packet| Arrival { ns: 0, bytes: 1500, queue: 0, packet }).collect();
        arrivals.push(Arrival { ns: 0, bytes: 1500, queue: 1, packet: 200 });
        let (_, departures, _) = run(per_queue(line, u64::MAX / 2), &queues, &arrivals);
        departures.iter().position(|d| d.queue == 1).unwrap() as u64
    };
    let sent_ahead = |depth: u64| (depth - 1500) / 1350 + 1;
    assert_eq!(first_of_queue_1(100_000, 0), sent_ahead(100_000));
    assert_eq!(first_of_queue_1(0, 0), sent_ahead(bucket_bytes(line / 10)), "default: 1 ms at the rate");
    assert_eq!(first_of_queue_1(20_000, 0), sent_ahead(20_000));
    // A ceiling whose own bucket is shallower (1 ms of a fifth of the line) does not cut it short.
    assert!(bucket_bytes(line / 5) < 100_000);
    assert_eq!(first_of_queue_1(100_000, line / 5), sent_ahead(100_000));
    let capped = QueueConfig { burst_bytes: 100_000, ..queue(1, 1, line / 10, line / 5) };
    assert_eq!((capped.guarantee_depth(), capped.ceil_depth()), (100_000, 100_000));
}

/// Queues A and B of 500 B/s guarantees on a 1,000 B/s line: A sends 100 B at 0, B 100 B at
/// 0.1 s, and both guarantees hold their next head packets (A's 100 B, B's 50 B) at 0.2 s. They
/// join the guaranteed ring at that instant in rank order: A first in a port made with A
/// before B, and in a port where A was placed later, in a vacant slot, before B.
#[test]
fn queues_whose_buckets_fill_at_one_instant_join_in_the_order_of_a_port_made_afresh() {
    let config = per_queue(1000, 100_000);
    let guaranteed = QueueConfig { guarantee: 500, burst_bytes: 100, ..QueueConfig::BEST_EFFORT };
    let send = |port: &mut Port, a: u32, b: u32| {
        for (packet, (queue, bytes)) in [(a, 100), (b, 100), (a, 100), (b, 50)].into_iter().enumerate() {
            port.arrive(0, bytes, queue, packet as u64).unwrap();
        }
        port.finish();
        port.take_departures().into_iter().map(|d| (d.packet, d.start_ns)).collect::<Vec<_>>()
    };
    let fresh = send(&mut Port::new(config, vec![guaranteed; 2]).unwrap(), 0, 1);
    assert_eq!(fresh, [(0, 0), (1, 100 * MS), (2, 200 * MS), (3, 300 * MS)], "A's second packet first at the tie");
    let placed = |before: Option<u32>| {
        let mut port = Port::new(config, vec![QueueConfig::BEST_EFFORT, guaranteed]).unwrap();
        port.vacate_queues(0..1);
        port.place_queues(0, &[guaranteed], before);
        send(&mut port, 0, 1)
    };
    assert_eq!(placed(Some(1)), fresh);
    assert_eq!(placed(None), [(0, 0), (1, 100 * MS), (3, 200 * MS), (2, 250 * MS)], "placed after B, A joins after it");
}

#[test]
fn an_earlier_arrival_time_is_read_as_the_latest_seen() {
    let mut port = Port::new(per_queue(GBIT, 1 << 20), vec![QueueConfig::BEST_EFFORT]).unwrap();
    port.advance_to(50_000);
    port.arrive(10_000, 1000, 0, 0).unwrap();
    port.finish();
    assert_eq!(port.take_departures()[0].start_ns, 50_000);
    assert_eq!(port.stats(0).delay_ns.max(), 0);
}

#[test]
fn packets_arriving_at_one_instant_compete_for_the_line_at_that_instant() {
    let queues = [queue(1, 1, 0, 0), queue(0, 1, 0, 0)];
    let mut port = Port::new(per_queue(GBIT, 1 << 20), queues.to_vec()).unwrap();
    port.arrive(100, 1000, 0, 0).unwrap(); // the line is idle, but the decision waits ...
    port.arrive(100, 1000, 1, 1).unwrap(); // ... for this better-priority packet
    port.finish();
    let order: Vec<u64> = port.take_departures().iter().map(|d| d.packet).collect();
    assert_eq!(order, [1, 0]);
}

#[test]
fn a_bucket_filling_at_the_instant_the_line_frees_counts_before_the_decision() {
    // Line 1e8 B/s, queue 0 capped at 1e6 B/s (bucket 9216 B). Queue 0 empties its bucket with
    // a 9216 B frame; its next 100 B are covered 100 x 100 = 10,000 byte-times later, exactly
    // when queue 1's 784 B frame ends: the bucket fills first, so priority 0 goes next.
    let line = 100_000_000;
    let queues = [queue(0, 1, 0, line / 100), queue(1, 1, 0, 0)];
    let arrivals = [(9216, 0), (100, 0), (784, 1), (784, 1)].iter().enumerate();
    let arrivals: Vec<Arrival> = arrivals.map(|(packet, &(bytes, queue))| Arrival { ns: 0, bytes, queue, packet: packet as u64 }).collect();
    let (_, departures, _) = run(per_queue(line, 1 << 20), &queues, &arrivals);
    let order: Vec<u64> = departures.iter().map(|d| d.packet).collect();
    assert_eq!(order, [0, 2, 1, 3]);
    assert_eq!(departures[2].start_ns, 100_000);
}

#[test]
fn a_packet_holds_the_buffer_until_its_transmission_starts() {
    // 1 B/ns. Packet 1 starts at 1500 ns; a packet arriving at that instant still finds it in
    // the buffer (arrivals come before the decision), one arriving a nanosecond later does not.
    let mut port = Port::new(per_queue(1_000_000_000, 3000), vec![QueueConfig::BEST_EFFORT]).unwrap();
    port.arrive(0, 1500, 0, 0).unwrap();
    port.arrive(0, 1500, 0, 1).unwrap();
    assert_eq!(port.arrive(1500, 1501, 0, 2), Err(PortDrop::BufferFull));
    assert_eq!(port.arrive(1501, 1501, 0, 3), Ok(()));
}

#[test]
fn a_backlogged_line_has_no_drift() {
    let line = 999_999_937;
    let mut port = Port::new(per_queue(line, u64::MAX), vec![QueueConfig::BEST_EFFORT; 3]).unwrap();
    let mut rng = Rng(5);
    let mut total = 0u128;
    for packet in 0..1_000_000u64 {
        let bytes = rng.between(64, 9000) as u32;
        total += u128::from(bytes);
        port.arrive(0, bytes, (packet % 3) as u32, packet).unwrap();
    }
    port.finish();
    let last = *port.take_departures().last().unwrap();
    assert_eq!(u128::from(last.depart_ns), up(total * 1_000_000_000, u128::from(line)));
}

#[test]
fn a_frame_larger_than_the_quantum_takes_several_turns_and_still_leaves() {
    let queues = [QueueConfig::BEST_EFFORT, QueueConfig::BEST_EFFORT];
    let mut arrivals = vec![Arrival { ns: 0, bytes: 65_000, queue: 0, packet: 0 }];
    arrivals.extend((1..100).map(|packet| Arrival { ns: 0, bytes: 1500, queue: 1, packet }));
    let (_, departures, _) = run(per_queue(GBIT, 1 << 20), &queues, &arrivals);
    let sent_before = departures.iter().position(|d| d.packet == 0).unwrap();
    // Queue 0 gets a quantum per round until its deficit covers the frame (its 8th turn);
    // queue 1 sends what its deficit allows in each of the 7 rounds before, carrying the rest.
    let quanta = 65_000u64.div_ceil(QUANTUM_BYTES);
    let (mut deficit, mut expected) = (0, 0);
    for _ in 1..quanta {
        deficit += QUANTUM_BYTES;
        expected += deficit / 1500;
        deficit %= 1500;
    }
    assert_eq!((quanta, sent_before), (8, expected as usize));
}

// ---------------------------------------------------------------------------------------------
// Port: properties

#[test]
fn equal_queues_share_the_line_fairly() {
    let n = 10;
    let mut rng = Rng(11);
    let parts = (0..n).map(|q| offered(&mut rng, q, GBIT * 3 / 2 / u64::from(n), 0, SECOND)).collect();
    let arrivals = merged(parts);
    let queues = vec![QueueConfig::BEST_EFFORT; n as usize];
    let (_, departures, _) = run(per_queue(GBIT, u64::MAX / 2), &queues, &arrivals);
    let sent = bytes_sent(&departures, n as usize, 0, SECOND, &arrivals);
    let index = jain(&sent.iter().map(|&b| b as f64).collect::<Vec<_>>());
    assert!(index >= 0.99, "Jain {index}: {sent:?}");
    assert!(index >= 0.9999, "DRR should be much fairer than the bar: Jain {index}");
    let total: u64 = sent.iter().sum();
    assert!((GBIT - 1500..=GBIT + 1500).contains(&total), "work conserving: {total} B in 1 s");
}

/// Bytes each of 8 equal queues sends in [0.1 s, 1 s) when they offer 1.2 to 8 times their
/// share into a buffer of 1 MB that fills.
fn sent_by_equal_queues_into_a_full_buffer(alpha_log2: Option<i8>) -> Vec<f64> {
    let loads = [12, 15, 20, 25, 30, 40, 60, 80]; // tenths of a share
    let mut rng = Rng(18);
    let parts = loads.iter().enumerate().map(|(q, &load)| offered(&mut rng, q as u32, GBIT / 8 * load / 10, 0, SECOND)).collect();
    let arrivals = merged(parts);
    let queues = vec![QueueConfig { alpha_log2, ..QueueConfig::BEST_EFFORT }; loads.len()];
    let (_, departures, _) = run(per_queue(GBIT, 1_000_000), &queues, &arrivals);
    bytes_sent(&departures, loads.len(), SECOND / 10, SECOND, &arrivals).iter().map(|&b| b as f64).collect()
}

#[test]
fn a_dynamic_threshold_keeps_equal_queues_fair_when_the_buffer_fills() {
    let isolated = sent_by_equal_queues_into_a_full_buffer(Some(0));
    assert!(jain(&isolated) >= 0.99, "Jain {}: {isolated:?}", jain(&isolated));
    let total: f64 = isolated.iter().sum();
    assert!((total / (GBIT as f64 * 0.9) - 1.0).abs() < 0.01, "work conserving: {total} B");
    // One tail-drop pool: the heaviest senders take the buffer, and with it the line.
    let pooled = sent_by_equal_queues_into_a_full_buffer(None);
    assert!(jain(&pooled) < 0.9, "Jain {}: {pooled:?}", jain(&pooled));
}

#[test]
fn unequal_weights_share_in_proportion() {
    let weights = [1u32, 2, 3, 4, 10];
    let total_weight: u32 = weights.iter().sum();
    let mut rng = Rng(12);
    let parts =
        weights.iter().enumerate().map(|(q, &w)| offered(&mut rng, q as u32, GBIT * 3 / 2 * u64::from(w) / u64::from(total_weight), 0, SECOND)).collect();
    let arrivals = merged(parts);
    let queues: Vec<QueueConfig> = weights.iter().map(|&w| queue(0, w, 0, 0)).collect();
    let (_, departures, _) = run(per_queue(GBIT, u64::MAX / 2), &queues, &arrivals);
    let sent = bytes_sent(&departures, weights.len(), 0, SECOND, &arrivals);
    let total: u64 = sent.iter().sum();
    for (q, &w) in weights.iter().enumerate() {
        let share = sent[q] as f64 / total as f64;
        let entitled = f64::from(w) / f64::from(total_weight);
        assert!((share / entitled - 1.0).abs() <= 0.01, "queue {q}: share {share:.5}, entitled {entitled:.5}");
    }
}

/// Runs `arrivals` (sorted) on `port` up to `until` ns, without finishing it.
fn feed(port: &mut Port, arrivals: &[Arrival], until: u64) {
    for a in arrivals {
        let _ = port.arrive(a.ns, a.bytes, a.queue, a.packet);
    }
    port.advance_to(until);
}

#[test]
fn a_queue_set_in_place_on_an_idle_port_sends_as_a_port_built_with_it() {
    let mut rng = Rng(21);
    let before = [queue(0, 1, GBIT / 4, 0), queue(0, 1, 0, GBIT / 2), QueueConfig { reserved_bytes: 1 << 20, ..queue(0, 3, 0, 0) }];
    let after = [queue(0, 5, GBIT / 2, 0), queue(1, 1, GBIT / 8, GBIT / 4), QueueConfig { reserved_bytes: 1 << 10, ..queue(0, 1, 0, 0) }];
    let offer = |rng: &mut Rng, from: u64| merged((0..3).map(|q| offered(rng, q, GBIT / 2, from, from + SECOND / 10)).collect());
    let first = offer(&mut rng, 0);
    let second: Vec<Arrival> = offer(&mut rng, SECOND).into_iter().map(|a| Arrival { packet: a.packet + 1_000_000, ..a }).collect();
    let mut port = Port::new(per_queue(GBIT, 4 << 20), before.to_vec()).unwrap();
    feed(&mut port, &first, SECOND); // idle long enough for every bucket to fill
    port.take_departures();
    for (q, config) in after.iter().enumerate() {
        port.set_queue(q as u32, config);
    }
    feed(&mut port, &second, 2 * SECOND);
    let (_, fresh, _) = run(per_queue(GBIT, 4 << 20), &after, &second);
    assert_eq!(port.take_departures(), fresh);
}

#[test]
fn a_queue_set_in_place_keeps_its_packets_and_takes_its_new_priority_and_share_at_once() {
    // Two backlogged queues of one priority and weight: queue 1 then goes first, then shares 3:1.
    let arrivals = merged((0..2).map(|q| (0..2000).map(|_| Arrival { ns: 0, bytes: 1000, queue: q, packet: 0 }).collect()).collect());
    let mut port = Port::new(per_queue(GBIT, u64::MAX / 2), vec![queue(1, 1, 0, 0); 2]).unwrap();
    let change = 1_000_000; // 1 ms: 125 packets sent, alternating
    feed(&mut port, &arrivals, change);
    let before = port.take_departures();
    let turn = (QUANTUM_BYTES / 1000) as usize; // packets a turn of weight 1 sends
    assert!(before.iter().filter(|d| d.queue == 0).count().abs_diff(before.len() / 2) <= turn);
    port.set_queue(1, &queue(0, 1, 0, 0));
    port.advance_to(change + 2_000_000);
    let promoted = port.take_departures();
    assert!(promoted.iter().skip(1).all(|d| d.queue == 1), "queue 1 alone once its priority is better");
    port.set_queue(1, &queue(1, 3, 0, 0));
    port.finish();
    let shared = port.take_departures();
    let ones = shared.iter().take(80 * turn).filter(|d| d.queue == 1).count();
    assert!(ones.abs_diff(60 * turn) <= turn, "weights 1:3 share 1:3 (within a turn), got {ones} of {}", 80 * turn);
    assert_eq!(before.len() + promoted.len() + shared.len(), 4000, "every packet queued before the changes is sent");
    assert_eq!(port.queued_bytes(), 0);
}

#[test]
fn a_reserve_shrunk_below_what_a_queue_holds_borrows_from_the_pool_without_overflow() {
    let mut port = Port::new(per_queue(GBIT, 100_000), vec![QueueConfig { reserved_bytes: 60_000, ..queue(0, 1, 0, 0) }, queue(0, 1, 0, 0)]).unwrap();
    for packet in 0..50 {
        port.arrive(0, 1000, 0, packet).unwrap(); // 50 KB, all of it in queue 0's reserve
    }
    port.set_queue(0, &queue(0, 1, 0, 0)); // no reserve: 50 KB now in the 100 KB pool
    let admitted = (50..120).filter(|&packet| port.arrive(0, 1000, 1, packet).is_ok()).count();
    assert_eq!(admitted, 50, "the pool had 50 KB left");
    port.finish();
    assert_eq!((port.take_departures().len(), port.queued_bytes()), (100, 0));
}

#[test]
fn strict_priority_and_guarantees_come_first() {
    let line = GBIT;
    // 0: prio 0, no guarantee. 1: prio 1, guaranteed. 2: prio 0, guaranteed. 3: prio 2.
    let queues = [queue(0, 1, 0, 0), queue(1, 1, line / 4, 0), queue(0, 1, line / 4, 0), queue(2, 1, 0, 0)];
    let depth = bucket_bytes(line / 4);
    let arrivals = merged((0..4).map(|q| (0..400).map(|_| Arrival { ns: 0, bytes: 1000, queue: q, packet: 0 }).collect()).collect());
    let (_, departures, _) = run(per_queue(line, u64::MAX / 2), &queues, &arrivals);
    let order: Vec<u32> = departures.iter().map(|d| d.queue).collect();
    let burst = depth as usize / 1000; // packets a full guarantee bucket holds at once
                                       // Within their guarantees, priority 0 (queue 2) before priority 1 (queue 1) ...
    let first_run = order.iter().take_while(|&&q| q == 2).count();
    assert!(first_run >= burst && order[first_run] == 1, "{:?}", &order[..first_run + 2]);
    // ... and both before any borrowing, even by the better priority (queue 0).
    let first_borrowed = order.iter().position(|&q| q == 0).unwrap();
    let guaranteed = &order[..first_borrowed];
    assert!(guaranteed.iter().all(|&q| q == 1 || q == 2));
    assert!(guaranteed.iter().filter(|&&q| q == 1).count() >= burst);
    // Priority 2 gets nothing while anything better waits.
    let first_low = order.iter().position(|&q| q == 3).unwrap();
    assert!(order[first_low..].iter().all(|&q| q == 3));
}

#[test]
fn a_ceiling_is_never_exceeded_over_any_window() {
    let ceil = GBIT / 10;
    let depth = bucket_bytes(ceil);
    let mut rng = Rng(13);
    let capped = offered(&mut rng, 0, ceil * 3, 0, SECOND / 5);
    let other = offered(&mut rng, 1, GBIT / 2, 0, SECOND / 5);
    let arrivals = merged(vec![capped, other]);
    let queues = [queue(0, 10, 0, ceil), QueueConfig::BEST_EFFORT];
    let (_, departures, _) = run(per_queue(GBIT, u64::MAX / 2), &queues, &arrivals);
    let mine: Vec<(u64, u64)> = departures.iter().filter(|d| d.queue == 0).map(|d| (d.start_ns, u64::from(arrivals[d.packet as usize].bytes))).collect();
    let mut prefix = vec![0u64];
    for (_, bytes) in &mine {
        prefix.push(prefix.last().unwrap() + bytes);
    }
    let mut worst = 0f64;
    for i in 0..mine.len() {
        for j in i..mine.len() {
            let bytes = u128::from(prefix[j + 1] - prefix[i]);
            let allowed = u128::from(ceil) * u128::from(mine[j].0 - mine[i].0 + 1) / 1_000_000_000 + u128::from(depth);
            assert!(bytes <= allowed, "window {}..{} ns: {bytes} B, allowed {allowed}", mine[i].0, mine[j].0);
            worst = worst.max(bytes as f64 / allowed as f64);
        }
    }
    assert!(worst > 0.99, "the test should push the ceiling: worst window at {worst:.3} of it");
    // Alone, a capped queue leaves the line idle rather than exceed its ceiling.
    let alone = merged(vec![offered(&mut Rng(14), 0, GBIT, 0, SECOND / 5)]);
    let (_, departures, _) = run(per_queue(GBIT, u64::MAX / 2), &[queue(0, 1, 0, ceil)], &alone);
    let sent: u64 = bytes_sent(&departures, 1, 0, SECOND / 5, &alone)[0];
    let expected = ceil / 5 + depth;
    assert!(sent <= expected && sent + 1500 >= expected, "{sent} B in 200 ms at a ceiling of {ceil} B/s");
}

#[test]
fn a_guaranteed_queue_gets_its_guarantee_against_better_priorities() {
    let guarantee = GBIT * 3 / 10;
    let mut rng = Rng(15);
    let mut parts = vec![offered(&mut rng, 0, guarantee * 2, 0, SECOND)];
    parts.extend((1..4).map(|q| offered(&mut rng, q, GBIT, 0, SECOND)));
    let arrivals = merged(parts);
    let queues = [queue(3, 1, guarantee, 0), queue(0, 10, 0, 0), queue(0, 10, 0, 0), queue(1, 10, 0, 0)];
    let (_, departures, _) = run(per_queue(GBIT, u64::MAX / 2), &queues, &arrivals);
    let sent = bytes_sent(&departures, 4, 0, SECOND, &arrivals);
    assert!(sent[0] as f64 >= guarantee as f64 * 0.99, "{} B/s for a guarantee of {guarantee}", sent[0]);
    assert!(sent[0] <= guarantee + bucket_bytes(guarantee) + 1500, "borrowing while better priorities wait: {}", sent[0]);

    // Offered less than its guarantee, a queue keeps low delay however loaded the port is.
    let mut parts = vec![offered(&mut rng, 0, guarantee / 2, 0, SECOND / 2)];
    parts.extend((1..4).map(|q| offered(&mut rng, q, GBIT, 0, SECOND / 2)));
    let arrivals = merged(parts);
    let limited = QueueConfig { limit_bytes: 1 << 20, ..queue(0, 10, 0, 0) };
    let queues = [queue(3, 1, guarantee, 0), limited, limited, limited];
    let (port, _, verdicts) = run(per_queue(GBIT, 4 << 20), &queues, &arrivals);
    let victim = port.stats(0);
    assert!(verdicts.iter().zip(&arrivals).all(|(v, a)| a.queue != 0 || v.is_ok()), "conforming packets dropped");
    assert!(victim.delay_ns.max() < 50_000, "max delay {} ns behind 3 Gbit/s of noise", victim.delay_ns.max());
    assert!(port.stats(1).drops(PortDrop::QueueLimit) > 0, "the noisy neighbours should be over their limits");
}

#[test]
fn an_idle_share_is_redistributed_and_reclaimed_within_a_round() {
    let mut rng = Rng(16);
    let a = offered(&mut rng, 0, GBIT, 0, SECOND);
    let b = offered(&mut rng, 1, GBIT, 0, SECOND);
    let mut c = offered(&mut rng, 2, GBIT, 0, SECOND * 3 / 10);
    let back = SECOND * 6 / 10;
    c.extend(offered(&mut rng, 2, GBIT, back, SECOND));
    let arrivals = merged(vec![a, b, c]);
    // Per-queue limits keep every queue backlogged without a deep backlog: C empties soon after 0.3 s.
    let queues = vec![QueueConfig { limit_bytes: 100_000, ..QueueConfig::BEST_EFFORT }; 3];
    let (_, departures, _) = run(per_queue(GBIT, u64::MAX / 2), &queues, &arrivals);
    // While C is away, A and B split the whole line.
    let away = bytes_sent(&departures, 3, SECOND * 4 / 10, back, &arrivals);
    assert_eq!(away[2], 0);
    let line_bytes = GBIT / 5;
    for &share in &away[..2] {
        assert!((share as f64 / (line_bytes / 2) as f64 - 1.0).abs() < 0.01, "{away:?}");
    }
    // When C returns it waits at most one round (the current turn plus the other queue's), then
    // sends a whole quantum's worth in its own turn.
    let after: Vec<&Departure> = departures.iter().filter(|d| d.start_ns >= back).collect();
    let first_c = after.iter().position(|d| d.queue == 2).unwrap();
    let others_before: u64 = after[..first_c].iter().map(|d| u64::from(arrivals[d.packet as usize].bytes)).sum();
    assert!(others_before <= 2 * QUANTUM_BYTES + 1500, "C waited behind {others_before} B");
    let c_turn: u64 = after[first_c..].iter().take_while(|d| d.queue == 2).map(|d| u64::from(arrivals[d.packet as usize].bytes)).sum();
    assert!(c_turn + 1500 > QUANTUM_BYTES, "C's first turn sent {c_turn} B");
    let settled = bytes_sent(&departures, 3, back + MS, SECOND, &arrivals);
    let total: u64 = settled.iter().sum();
    assert!(settled.iter().all(|&s| (s as f64 * 3.0 / total as f64 - 1.0).abs() < 0.01), "{settled:?}");
}

#[test]
fn a_shared_fifo_serves_in_arrival_order_without_idling() {
    let mut rng = Rng(17);
    let parts = (0..4).map(|q| offered(&mut rng, q, GBIT / 3, 0, SECOND / 20)).collect();
    let arrivals = merged(parts);
    let config = PortConfig { line_rate: GBIT, buffer_bytes: 200_000, mode: PortMode::SharedFifo };
    let queues = [queue(0, 1, GBIT / 2, 0), queue(3, 9, 0, GBIT / 100), QueueConfig::BEST_EFFORT, QueueConfig::BEST_EFFORT];
    let (_, departures, verdicts) = run(config, &queues, &arrivals);
    let accepted: Vec<u64> = arrivals.iter().zip(&verdicts).filter(|(_, v)| v.is_ok()).map(|(a, _)| a.packet).collect();
    assert!(accepted.len() < arrivals.len(), "the buffer should overflow");
    assert_eq!(departures.iter().map(|d| d.packet).collect::<Vec<_>>(), accepted);
    let mut line_free = 0;
    for d in &departures {
        assert_eq!(d.start_ns, arrivals[d.packet as usize].ns.max(line_free));
        line_free = d.depart_ns;
    }
}

// ---------------------------------------------------------------------------------------------
// Port: against the reference model

/// A random port: a few queues with random priority, weight, guarantee (and burst), ceiling,
/// limit, reserve and dynamic threshold.
fn port_setup() -> impl Strategy<Value = (PortConfig, Vec<QueueConfig>)> {
    let line = prop_oneof![Just(GBIT), Just(999_999_937u64), 1_000_000u64..20_000_000_000];
    let mode = prop_oneof![3 => Just(PortMode::PerTenant), 1 => Just(PortMode::SharedFifo)];
    (line, 9_000u64..120_000, mode, 1usize..7).prop_flat_map(|(line_rate, buffer_bytes, mode, n)| {
        let queue = (0u8..3, 1u32..5, 0u64..=100, 0u64..=100, prop_oneof![Just(0u64), 9_000u64..60_000], any::<bool>(), any::<bool>());
        let burst = prop_oneof![Just(0u64), 1u64..200_000];
        let alpha_log2 = prop_oneof![Just(None), (-3i8..=3).prop_map(Some)];
        let buffer = (burst, 0u64..=100, alpha_log2);
        prop::collection::vec((queue, buffer), n).prop_map(move |raw| {
            let mut budget = line_rate;
            let queues = raw
                .into_iter()
                .map(|((priority, weight, g, c, limit_bytes, has_g, has_c), (burst_bytes, r, alpha_log2))| {
                    let guarantee = if has_g { (line_rate / 4 * g / 100).min(budget) } else { 0 };
                    budget -= guarantee;
                    let ceil = if has_c { (line_rate / 2 * c / 100).max(guarantee).max(1) } else { 0 };
                    // Reserves of up to half the buffer between them, often none.
                    let reserved_bytes = if r < 50 { 0 } else { buffer_bytes / 2 / n as u64 * (r - 50) / 50 };
                    QueueConfig { priority, weight, share: 0, guarantee, burst_bytes, ceil, limit_bytes, reserved_bytes, alpha_log2 }
                })
                .collect();
            (PortConfig { line_rate, buffer_bytes, mode }, queues)
        })
    })
}

/// An arrival, an `advance_to` time to call before it (if any), whether to drain departures after.
type Step = (Arrival, Option<u64>, bool);

/// Arrivals at roughly `load` times the line rate (gaps drawn around the mean), sizes 64..=9000
/// with a few up to 64 KB (unsegmented TSO captures: larger than a quantum or a bucket); some
/// packets address a queue that does not exist. Each arrival may be preceded by an
/// `advance_to` at a time before it and followed by draining the departures.
fn traffic(line_rate: u64, queues: usize) -> impl Strategy<Value = Vec<Step>> {
    let size = prop_oneof![30 => 64u32..=9000, 1 => 9001u32..=65_535];
    let one = (size, 0..queues as u32 + 1, 0u64..1000, prop::option::weighted(0.2, 0u64..1000), any::<bool>());
    (prop::collection::vec(one, 1..250), 1u64..40).prop_map(move |(raw, load_tenths)| {
        let mut now = 0u64;
        let mut out = Vec::new();
        for (index, (bytes, q, gap, advance, drain)) in raw.into_iter().enumerate() {
            // Mean gap ~ 1000-byte packets at load/10 x line rate; 0 often gives simultaneous arrivals.
            let mean = 1000 * SECOND * 10 / load_tenths / line_rate;
            let step = if gap < 200 { 0 } else { mean * gap / 500 };
            let advance = advance.map(|a| now + step * a / 1000);
            now += step;
            let queue = if q == queues as u32 { 99 } else { q };
            out.push((Arrival { ns: now, bytes, queue, packet: index as u64 }, advance, drain));
        }
        out
    })
}

fn scenario() -> impl Strategy<Value = (PortConfig, Vec<QueueConfig>, Vec<Step>)> {
    port_setup().prop_flat_map(|(config, queues)| {
        let n = queues.len();
        (Just(config), Just(queues), traffic(config.line_rate, n))
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, ..ProptestConfig::default() })]

    /// A queue put in later, in the slot a queue taken out left, just before the queue after it
    /// (as an engine puts in a tenant's class): its buckets fill at one instant in the order of
    /// a port made with the queues in order, so the port still matches the reference model.
    #[test]
    fn a_queue_placed_in_a_vacant_slot_matches_the_reference_model((config, queues, steps) in scenario(), pick in any::<prop::sample::Index>()) {
        let k = pick.index(queues.len());
        let arrivals: Vec<Arrival> = steps.iter().map(|s| s.0).collect();
        let reference = RefPort::new(config, &queues).run(&arrivals);

        // Slot 0 is left vacant and given to queue k; the others follow in order.
        let slot = |q: u32| match q as usize {
            q if q == k => 0,
            q if q < k => q as u32 + 1,
            _ => q, // the queues after k, and the one that does not exist, keep theirs
        };
        let others: Vec<QueueConfig> = queues.iter().enumerate().filter(|&(q, _)| q != k).map(|(_, queue)| *queue).collect();
        let mut port = Port::new(config, [vec![QueueConfig::BEST_EFFORT], others].concat()).unwrap();
        prop_assert_eq!(port.vacate_queues(0..1), vec![QueueStats::default()]);
        port.place_queues(0, &queues[k..=k], (k + 1 < queues.len()).then(|| slot(k as u32 + 1)));
        let mut departures = Vec::new();
        for (arrival, advance, drain) in &steps {
            if let Some(t) = advance {
                port.advance_to(*t);
            }
            let verdict = port.arrive(arrival.ns, arrival.bytes, slot(arrival.queue), arrival.packet);
            prop_assert_eq!(verdict, reference.verdicts[arrival.packet as usize]);
            if *drain {
                port.drain_departures_into(&mut departures);
            }
        }
        port.finish();
        departures.extend(port.take_departures());
        let queue_of_slot = |s: u32| (0..queues.len() as u32).find(|&q| slot(q) == s).expect("a queue's slot");
        let departures: Vec<Departure> = departures.into_iter().map(|d| Departure { queue: queue_of_slot(d.queue), ..d }).collect();
        prop_assert_eq!(&departures, &reference.departures);
    }

    #[test]
    fn port_matches_the_reference_model_packet_by_packet((config, queues, steps) in scenario()) {
        let arrivals: Vec<Arrival> = steps.iter().map(|s| s.0).collect();
        let reference = RefPort::new(config, &queues).run(&arrivals);

        let mut port = Port::new(config, queues.clone()).unwrap();
        let mut departures = Vec::new();
        let mut verdicts = Vec::new();
        for (arrival, advance, drain) in &steps {
            if let Some(t) = advance {
                port.advance_to(*t);
            }
            verdicts.push(port.arrive(arrival.ns, arrival.bytes, arrival.queue, arrival.packet));
            if *drain {
                port.drain_departures_into(&mut departures);
            }
        }
        port.finish();
        departures.extend(port.take_departures());

        prop_assert_eq!(&verdicts, &reference.verdicts);
        prop_assert_eq!(&departures, &reference.departures);

        // Every arrival departed or was dropped, and the counters agree.
        let dropped = verdicts.iter().filter(|v| v.is_err()).count();
        prop_assert_eq!(departures.len() + dropped, arrivals.len());
        prop_assert_eq!(port.queued_bytes(), 0);
        for q in 0..queues.len() as u32 {
            let mine = || arrivals.iter().zip(&verdicts).filter(move |(a, _)| a.queue == q);
            let stats = port.stats(q);
            let drops: u64 = stats.dropped_packets.iter().sum();
            prop_assert_eq!(stats.sent_packets + drops, mine().count() as u64);
            prop_assert_eq!(stats.sent_packets, mine().filter(|(_, v)| v.is_ok()).count() as u64);
            prop_assert_eq!(stats.sent_bytes, mine().filter(|(_, v)| v.is_ok()).map(|(a, _)| u64::from(a.bytes)).sum::<u64>());
            prop_assert_eq!(stats.delay_ns.count(), stats.sent_packets);
            let worst = departures.iter().filter(|d| d.queue == q).map(|d| d.start_ns - arrivals[d.packet as usize].ns).max();
            prop_assert_eq!(stats.delay_ns.max(), worst.unwrap_or(0));
        }
        prop_assert_eq!(port.unknown_queue_drops() as usize, verdicts.iter().filter(|v| **v == Err(PortDrop::UnknownQueue)).count());

        // The line never runs faster than its rate, and nothing leaves before it arrives.
        let line = u128::from(config.line_rate);
        for pair in departures.windows(2) {
            prop_assert!(pair[1].start_ns >= pair[0].depart_ns);
        }
        for d in &departures {
            let bytes = u128::from(arrivals[d.packet as usize].bytes);
            prop_assert!(d.start_ns >= arrivals[d.packet as usize].ns);
            prop_assert!(u128::from(d.depart_ns - d.start_ns) * line + line >= bytes * 1_000_000_000);
            prop_assert!(u128::from(d.depart_ns - d.start_ns) * line <= bytes * 1_000_000_000 + line);
        }
    }
}

#[test]
fn a_thousand_queues_match_the_reference_model() {
    let mut rng = Rng(21);
    let line = 10 * GBIT;
    let mut budget = line;
    let queues: Vec<QueueConfig> = (0..1000)
        .map(|_| {
            let guarantee = if rng.below(4) == 0 { (rng.below(line / 500)).min(budget) } else { 0 };
            budget -= guarantee;
            let ceil = if rng.below(3) == 0 { guarantee.max(rng.between(1, line / 20)) } else { 0 };
            let limit_bytes = if rng.below(2) == 0 { rng.between(9000, 100_000) } else { 0 };
            let burst_bytes = if rng.below(3) == 0 { rng.between(1, 100_000) } else { 0 };
            let reserved_bytes = if rng.below(3) == 0 { rng.between(0, 1000) } else { 0 };
            let alpha_log2 = if rng.below(3) == 0 { None } else { Some(rng.below(5) as i8 - 2) };
            let (priority, weight) = (rng.below(4) as u8, rng.between(1, 8) as u32);
            QueueConfig { priority, weight, share: 0, guarantee, burst_bytes, ceil, limit_bytes, reserved_bytes, alpha_log2 }
        })
        .collect();
    let mut now = 0;
    let arrivals: Vec<Arrival> = (0..20_000)
        .map(|packet| {
            now += rng.below(5600); // ~1.3x the line rate
            Arrival { ns: now, bytes: rng.between(64, 9000) as u32, queue: rng.below(1000) as u32, packet }
        })
        .collect();
    let config = per_queue(line, 2 << 20);
    let (_, departures, verdicts) = run(config, &queues, &arrivals);
    let reference = RefPort::new(config, &queues).run(&arrivals);
    assert!(verdicts.iter().any(|v| v.is_err()) && verdicts.iter().filter(|v| v.is_ok()).count() > 10_000);
    assert_eq!(verdicts, reference.verdicts);
    assert_eq!(departures, reference.departures);
}

#[test]
fn a_port_queue_without_a_bucket_or_timer_pays_no_room_for_the_option() {
    use std::mem::size_of;
    use std::num::NonZeroU128;
    // Every port queue holds two optional buckets and an optional timer: 48 bytes a queue at 10,000 tenants.
    assert_eq!(size_of::<Option<super::bucket::Bucket>>(), size_of::<super::bucket::Bucket>());
    assert_eq!(size_of::<Option<NonZeroU128>>(), size_of::<u128>());
}
