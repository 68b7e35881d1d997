//! The series against sums and maxima taken straight from the samples, at the bin width the
//! timeline ended with; bins merging as time runs on; series kept across a rebinding.

use super::*;
use crate::test_rng::Rng;

const WINDOW: u64 = 1_000;

fn keys(names: &[&str]) -> Vec<ClassKey> {
    names.iter().map(|name| (Some(name.to_string()), Some(0))).collect()
}

/// (row, time, bytes) samples in time order, in bursts and gaps.
fn stream(rng: &mut Rng, rows: usize, packets: usize) -> Vec<(usize, u64, u32)> {
    let mut now = 1_000_000_123;
    (0..packets)
        .map(|_| {
            now += if rng.below(50) == 0 { rng.below(2_000_000) } else { rng.below(300) };
            (rng.below(rows as u64) as usize, now, rng.between(64, 1500) as u32)
        })
        .collect()
}

fn series_of<'a>(tenants: &'a [(Option<String>, Series)], name: &str) -> &'a Series {
    &tenants.iter().find(|(n, _)| n.as_deref() == Some(name)).expect("a series").1
}

#[test]
fn bins_hold_the_sums_and_the_peak_windows_of_the_samples() {
    let mut rng = Rng(7);
    for packets in [1, 10, 5_000, 40_000] {
        let samples = stream(&mut rng, 3, packets);
        let mut timeline = Timeline::new(WINDOW, &keys(&["a", "b", "c"]));
        for &(row, now, bytes) in &samples {
            timeline.arrive(row, now, bytes);
        }
        let (start, bin_ns, bins) = (timeline.start_ns().unwrap(), timeline.bin_ns(), timeline.bins());
        assert!(bins <= MAX_BINS && bin_ns % WINDOW == 0 && (bin_ns / WINDOW).is_power_of_two() && start == samples[0].1);
        let (tenants, _) = timeline.snapshot();
        for (row, name) in ["a", "b", "c"].iter().enumerate() {
            let mine: Vec<(u64, u64)> = samples.iter().filter(|s| s.0 == row).map(|&(_, now, size)| (now, u64::from(size))).collect();
            let mut bytes = vec![0u64; bins];
            let mut peaks = vec![0u64; bins];
            for (i, &(now, size)) in mine.iter().enumerate() {
                let bin = ((now - start) / bin_ns) as usize;
                bytes[bin] += size;
                let in_window: u64 = mine[..=i].iter().filter(|&&(time, _)| time + WINDOW > now).map(|&(_, size)| size).sum();
                peaks[bin] = peaks[bin].max(in_window);
            }
            let series = series_of(&tenants, name);
            if bytes.iter().all(|&b| b == 0) {
                assert!(series.column(|x| x.bytes).iter().all(|&b| b == 0));
                continue;
            }
            assert_eq!(series.column(|x| x.bytes), bytes, "{name} at {packets} packets");
            assert_eq!(series.column(|x| x.peak_bytes), peaks, "{name} at {packets} packets");
        }
    }
}

#[test]
fn bins_double_in_width_when_time_runs_past_the_last() {
    let mut timeline = Timeline::new(WINDOW, &keys(&["a"]));
    let start = 5 * WINDOW + 3;
    timeline.arrive(0, start, 100);
    assert_eq!((timeline.start_ns(), timeline.bin_ns(), timeline.bins()), (Some(start), WINDOW, 1));
    timeline.arrive(0, start + (MAX_BINS as u64) * WINDOW - 1, 200);
    assert_eq!(timeline.bin_ns(), WINDOW, "the last bin");
    timeline.arrive(0, start + (MAX_BINS as u64) * WINDOW, 300);
    assert_eq!(timeline.bin_ns(), 2 * WINDOW, "one bin too far: the width doubles");
    timeline.arrive(0, start + 10 * (MAX_BINS as u64) * WINDOW, 400);
    assert_eq!(timeline.bin_ns(), 16 * WINDOW);
    let (tenants, _) = timeline.snapshot();
    let a = series_of(&tenants, "a");
    assert_eq!(a.column(|x| x.bytes).iter().sum::<u64>(), 1_000);
    assert_eq!(a.column(|x| x.packets).iter().sum::<u64>(), 4);
    assert_eq!((a.first_ns, a.last_ns), (Some(start), start + 10 * (MAX_BINS as u64) * WINDOW));
    assert_eq!(a.column(|x| x.peak_bytes).iter().max(), Some(&500), "the 200 B and 300 B packets 1 ns apart share a window");
}

#[test]
fn delays_drops_and_holds_go_to_the_class_of_their_row() {
    let mut timeline = Timeline::new(WINDOW, &keys(&["a", "b"]));
    timeline.arrive(1, 10_000, 100);
    timeline.departed(1, 10_500, 700);
    timeline.departed(1, 10_900, 300);
    timeline.dropped(1, 12_000, true);
    timeline.dropped(1, 13_000, false);
    timeline.held(1, 0);
    timeline.held(1, 5_000);
    let (tenants, classes) = timeline.snapshot();
    let b = &classes.iter().find(|(key, _)| key.0.as_deref() == Some("b")).unwrap().1;
    assert_eq!((b.column(|x| x.delay_count).iter().sum::<u64>(), b.column(|x| x.delay_sum_ns).iter().sum::<u64>()), (2, 1_000));
    assert_eq!(b.column(|x| x.delay_max_ns).iter().max(), Some(&700));
    assert_eq!((b.column(|x| x.dropped).iter().sum::<u64>(), b.column(|x| x.conforming_dropped).iter().sum::<u64>()), (2, 1));
    assert_eq!((b.hold_ns.count(), b.hold_ns.max()), (2, 5_000));
    assert_eq!(series_of(&tenants, "b").column(|x| x.dropped).iter().sum::<u64>(), 2, "the tenant counts its classes' drops");
    assert!(series_of(&tenants, "a").column(|x| x.bytes).iter().all(|&x| x == 0));
}

#[test]
fn a_rebinding_keeps_the_series_of_the_same_tenant_and_class() {
    let mut timeline = Timeline::new(WINDOW, &keys(&["a", "b"]));
    timeline.arrive(1, 10_000, 100);
    timeline.bind(&keys(&["c", "b"]).into_iter().rev().collect::<Vec<_>>()); // b is row 0 now
    timeline.arrive(0, 20_000, 50);
    let (tenants, _) = timeline.snapshot();
    assert_eq!(series_of(&tenants, "b").column(|x| x.bytes).iter().sum::<u64>(), 150);
    assert_eq!(series_of(&tenants, "b").column(|x| x.packets).iter().sum::<u64>(), 2);
    assert_eq!(tenants.len(), 3, "a, b and c");
}
