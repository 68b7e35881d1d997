//! The token rules of each RFC, packet by packet; the meters against a plain transcription of
//! the RFCs in exact fractions and against the token-bucket arrival curve, on random traffic;
//! and the rate a tenant gets when it sends twice its CIR.

use super::*;
use crate::test_rng::Rng;
use proptest::prelude::*;
use Color::{Green, Red, Yellow};

/// Nanoseconds per second and per millisecond.
const S: u64 = 1_000_000_000;
const MS: u64 = 1_000_000;
/// 1 Gbit/s in bytes/s.
const GBIT: u64 = 125_000_000;

fn sr(cir: u64, cbs: u64, ebs: u64) -> MeterKind {
    MeterKind::SrTcm { cir, cbs, ebs }
}

fn tr(pir: u64, pbs: u64, cir: u64, cbs: u64) -> MeterKind {
    MeterKind::TrTcm { pir, pbs, cir, cbs }
}

fn rfc4115(cir: u64, cbs: u64, eir: u64, ebs: u64) -> MeterKind {
    MeterKind::Rfc4115 { cir, cbs, eir, ebs }
}

/// Tokens (C, E or P) in bytes; fails if either bucket holds a fraction of a byte.
fn whole(state: &MeterState) -> (u64, u64) {
    assert_eq!((state.committed % NANO, state.excess_or_peak % NANO), (0, 0), "fractional tokens in {state:?}");
    (state.committed_bytes(), state.excess_or_peak_bytes())
}

/// A meter whose C and E (or P) hold exactly these bytes at `now_ns`.
fn holding(now_ns: u64, committed: u64, excess_or_peak: u64) -> MeterState {
    MeterState { last_ns: now_ns, committed: committed * NANO, excess_or_peak: excess_or_peak * NANO }
}

/// Lets time pass with a packet that costs nothing in any mode.
fn advance(state: &mut MeterState, params: &MeterParams, now_ns: u64) {
    state.mark(params, now_ns, 0, Red);
}

/// Marks a packet on a copy of the meter, leaving the meter as it was.
fn probe(state: &MeterState, params: &MeterParams, now_ns: u64, bytes: u32, color_in: Color) -> Color {
    let mut copy = *state;
    copy.mark(params, now_ns, bytes, color_in)
}

#[test]
fn state_is_24_bytes_and_colours_are_0_1_2() {
    assert_eq!(std::mem::size_of::<MeterState>(), 24);
    assert_eq!((Green as u8, Yellow as u8, Red as u8), (0, 1, 2));
    assert_eq!([0u8, 1, 2].map(|v| Color::try_from(v).unwrap()), [Green, Yellow, Red]);
    assert!(Color::try_from(3).is_err());
    assert!(Green < Yellow && Yellow < Red);
}

#[test]
fn buckets_start_full() {
    for kind in [sr(1000, 3000, 2000), tr(2000, 2000, 1000, 3000), rfc4115(1000, 3000, 500, 2000)] {
        let params = MeterParams::blind(kind);
        let state = MeterState::new(&params, 7 * S);
        assert_eq!((whole(&state), state.last_ns()), ((3000, 2000), 7 * S), "{kind:?}");
    }
    // srTCM: a burst of CBS + EBS at once is CBS green, then EBS yellow, then red.
    let params = MeterParams::blind(sr(1000, 3000, 2000));
    let mut meter = MeterState::new(&params, 0);
    assert_eq!(meter.mark(&params, 0, 3000, Red), Green, "colour-blind ignores the colour in");
    assert_eq!(meter.mark(&params, 0, 2000, Green), Yellow);
    assert_eq!(meter.mark(&params, 0, 1, Green), Red);
    assert_eq!(whole(&meter), (0, 0));
}

#[test]
fn srtcm_tokens_fill_c_first_and_spill_into_e_up_to_ebs() {
    let params = MeterParams::blind(sr(1000, 1000, 500));
    let mut meter = MeterState::new(&params, 0);
    assert_eq!((meter.mark(&params, 0, 1000, Green), meter.mark(&params, 0, 500, Green)), (Green, Yellow));
    assert_eq!(whole(&meter), (0, 0));
    advance(&mut meter, &params, 600 * MS);
    assert_eq!(whole(&meter), (600, 0), "E gets nothing while C is not full");
    advance(&mut meter, &params, 1200 * MS);
    assert_eq!(whole(&meter), (1000, 200), "C tops up to CBS, the other 200 bytes spill into E");
    advance(&mut meter, &params, 100 * S);
    assert_eq!(whole(&meter), (1000, 500), "E stops at EBS");
    // A packet that fits in neither is red and takes nothing; one that fits E only is yellow.
    assert_eq!(meter.mark(&params, 100 * S, 1001, Green), Red);
    assert_eq!(whole(&meter), (1000, 500));
    assert_eq!(meter.mark(&params, 100 * S, 700, Green), Green);
    assert_eq!(meter.mark(&params, 100 * S, 400, Green), Yellow);
    assert_eq!(whole(&meter), (300, 100));
    assert_eq!(meter.mark(&params, 100 * S, 300, Green), Green);
    assert_eq!(whole(&meter), (0, 100));
}

#[test]
fn srtcm_colour_aware_rules() {
    let params = MeterParams::aware(sr(1000, 1000, 500));
    let full = MeterState::new(&params, 0);
    let mut meter = full;
    assert_eq!(meter.mark(&params, 0, 400, Yellow), Yellow, "yellow in is never green");
    assert_eq!(whole(&meter), (1000, 100), "a yellow packet spends E only");
    assert_eq!(meter.mark(&params, 0, 200, Yellow), Red, "yellow in with E short is red, however full C is");
    assert_eq!(meter.mark(&params, 0, 1, Red), Red, "red in is red");
    assert_eq!(whole(&meter), (1000, 100), "red packets spend nothing");
    assert_eq!(meter.mark(&params, 0, 900, Green), Green);
    assert_eq!(meter.mark(&params, 0, 150, Green), Red, "green in: C (100) and E (100) both short");
    assert_eq!(meter.mark(&params, 0, 100, Green), Green);
    assert_eq!(meter.mark(&params, 0, 100, Green), Yellow, "green in with C empty falls to E");
    assert_eq!(whole(&meter), (0, 0));
    assert_eq!(probe(&full, &params, 0, 1, Red), Red);
}

#[test]
fn trtcm_colour_blind_rules() {
    let params = MeterParams::blind(tr(2000, 2000, 1000, 1000));
    let mut meter = MeterState::new(&params, 0);
    assert_eq!(meter.mark(&params, 0, 1500, Green), Yellow, "within P, over C");
    assert_eq!(whole(&meter), (1000, 500), "a yellow packet takes only Tp");
    assert_eq!(meter.mark(&params, 0, 600, Green), Red, "over P");
    assert_eq!(whole(&meter), (1000, 500), "a red packet takes no tokens");
    assert_eq!(meter.mark(&params, 0, 500, Green), Green);
    assert_eq!(whole(&meter), (500, 0), "a green packet takes from both");
    // P refills at PIR, C at CIR, each up to its own size.
    advance(&mut meter, &params, 250 * MS);
    assert_eq!(whole(&meter), (750, 500));
    advance(&mut meter, &params, 10 * S);
    assert_eq!(whole(&meter), (1000, 2000));
}

#[test]
fn trtcm_colour_aware_rules() {
    let params = MeterParams::aware(tr(2000, 2000, 1000, 1000));
    let full = MeterState::new(&params, 0);
    let mut meter = full;
    assert_eq!(meter.mark(&params, 0, 100, Red), Red, "red in is red");
    assert_eq!(whole(&meter), (1000, 2000), "and takes no tokens");
    assert_eq!(meter.mark(&params, 0, 800, Yellow), Yellow, "yellow in is never green");
    assert_eq!(whole(&meter), (1000, 1200), "and takes only Tp");
    assert_eq!(meter.mark(&params, 0, 900, Green), Green);
    assert_eq!(whole(&meter), (100, 300));
    assert_eq!(meter.mark(&params, 0, 200, Green), Yellow, "green in, over C");
    assert_eq!(meter.mark(&params, 0, 101, Yellow), Red, "over P");
    assert_eq!(whole(&meter), (100, 100));
    assert_eq!(probe(&full, &params, 0, 1, Red), Red);
}

#[test]
fn rfc4115_colour_blind_rules() {
    let params = MeterParams::blind(rfc4115(1000, 1000, 500, 2000));
    let mut meter = MeterState::new(&params, 0);
    assert_eq!(meter.mark(&params, 0, 800, Green), Green);
    assert_eq!(whole(&meter), (200, 2000), "a green packet takes only Tc (unlike trTCM)");
    assert_eq!(meter.mark(&params, 0, 500, Green), Yellow);
    assert_eq!(whole(&meter), (200, 1500), "a yellow packet takes only Te");
    assert_eq!(meter.mark(&params, 0, 1501, Green), Red);
    assert_eq!(meter.mark(&params, 0, 1500, Green), Red, "a packet that would empty E is red: Te(t)- B > 0 is strict");
    assert_eq!(whole(&meter), (200, 1500), "a red packet takes nothing");
    assert_eq!(meter.mark(&params, 0, 1499, Green), Yellow);
    assert_eq!(whole(&meter), (200, 1));
    // C and E refill independently: a full C does not spill into E.
    advance(&mut meter, &params, 2 * S);
    assert_eq!(whole(&meter), (1000, 1001), "E gets EIR x 2 s only");
    advance(&mut meter, &params, 60 * S);
    assert_eq!(whole(&meter), (1000, 2000));
}

#[test]
fn rfc4115_colour_aware_rules() {
    let params = MeterParams::aware(rfc4115(1000, 1000, 500, 2000));
    let full = MeterState::new(&params, 0);
    let mut meter = full;
    assert_eq!(meter.mark(&params, 0, 300, Yellow), Yellow, "yellow in is never green");
    assert_eq!(whole(&meter), (1000, 1700), "and takes only Te");
    assert_eq!(meter.mark(&params, 0, 1800, Yellow), Red, "yellow in over E is red, C does not help");
    assert_eq!(meter.mark(&params, 0, 10, Red), Red, "red in is red");
    assert_eq!(whole(&meter), (1000, 1700));
    assert_eq!(meter.mark(&params, 0, 999, Green), Green);
    assert_eq!(meter.mark(&params, 0, 1000, Green), Yellow, "green in that C cannot take falls to E");
    assert_eq!(whole(&meter), (1, 700));
    assert_eq!(meter.mark(&params, 0, 700, Yellow), Red, "yellow in that would empty E is red");
    assert_eq!(whole(&meter), (1, 700));
    assert_eq!(probe(&full, &params, 0, 1, Red), Red);
}

/// The bytes a bucket holds in the boundary tests below.
const TIE: u64 = 1500;

/// The ways a bucket comes to hold exactly [`TIE`] bytes.
#[derive(Debug, Clone, Copy)]
enum Reached {
    /// Full at its size, at the start.
    Full,
    /// Spent down to it by an earlier packet.
    Spent,
    /// Refilled up to it from empty, at 1000 B/s for 1.5 s.
    Refilled,
}

/// A meter (every rate 1000 B/s) whose tested bucket holds exactly [`TIE`] bytes at a time `now`:
/// C, with more than any packet tested in E or P; or E or P, with 1 byte in C, too little for
/// any. Returns the meter, its state before `now`, `now`, and its tokens (C, E or P) at `now`.
fn holding_the_tie(kind_with: fn(u64, u64) -> MeterKind, tests_committed: bool, reached: Reached, aware: bool) -> (MeterParams, MeterState, u64, (u64, u64)) {
    let size = if matches!(reached, Reached::Full) { TIE } else { 4000 };
    let (committed_size, other_size) = if tests_committed { (size, 8000) } else { (1, size) };
    let kind = kind_with(committed_size, other_size);
    let params = MeterParams { kind, color_aware: aware };
    let full = MeterState::new(&params, 0);
    let (state, now) = match reached {
        Reached::Full => (full, 0),
        Reached::Spent => {
            let mut spent = full;
            let expected = if tests_committed { Green } else { Yellow };
            assert_eq!(spent.mark(&params, 0, 2500, Green), expected, "{kind:?}");
            (spent, 0)
        }
        Reached::Refilled if tests_committed => (holding(0, 0, 8000), 1500 * MS),
        // srTCM's E fills with what a full C cannot hold.
        Reached::Refilled => (holding(0, 1, 0), 1500 * MS),
    };
    let mut at_now = state;
    advance(&mut at_now, &params, now);
    let tokens = whole(&at_now);
    let tie_in_place = if tests_committed { tokens.0 == TIE && tokens.1 > TIE + 1 } else { tokens == (1, TIE) };
    assert!(tie_in_place, "{kind:?} {reached:?}: {tokens:?}");
    (params, state, now, tokens)
}

/// The colours of packets of TIE - 1, TIE and TIE + 1 bytes, by each RFC's own test: RFC 2697
/// takes a packet "if Tc(t)-B >= 0" (then "if Te(t)-B >= 0"); RFC 2698 makes it red "if
/// Tp(t)-B < 0" and yellow "if Tc(t)-B < 0"; RFC 4115 takes it only "if Tc(t)- B > 0" (then "if
/// Te(t)- B > 0"). A yellow packet in a colour-aware meter skips C; a red one stays red.
fn rfc_colours(kind: MeterKind, tests_committed: bool, aware: bool, color_in: Color) -> [Color; 3] {
    let color_in = if aware { color_in } else { Green };
    let strict = matches!(kind, MeterKind::Rfc4115 { .. });
    match (color_in, tests_committed, strict) {
        (Red, _, _) => [Red; 3],
        (Yellow, true, _) => [Yellow; 3],
        (_, true, false) => [Green, Green, Yellow],
        (_, true, true) => [Green, Yellow, Yellow],
        (_, false, false) => [Yellow, Yellow, Red],
        (_, false, true) => [Yellow, Red, Red],
    }
}

#[test]
fn a_packet_that_exactly_empties_a_bucket_gets_each_rfcs_colour() {
    let kinds: [fn(u64, u64) -> MeterKind; 3] = [|c, e| sr(1000, c, e), |c, p| tr(1000, p, 1000, c), |c, e| rfc4115(1000, c, 1000, e)];
    for kind_with in kinds {
        for tests_committed in [true, false] {
            for reached in [Reached::Full, Reached::Spent, Reached::Refilled] {
                for aware in [false, true] {
                    let (params, state, now, (c, e_or_p)) = holding_the_tie(kind_with, tests_committed, reached, aware);
                    for color_in in [Green, Yellow, Red] {
                        let expected = rfc_colours(params.kind, tests_committed, aware, color_in);
                        for (bytes, expected) in [TIE - 1, TIE, TIE + 1].into_iter().zip(expected) {
                            let mut meter = state;
                            let got = meter.mark(&params, now, bytes as u32, color_in);
                            let case = format!("{bytes} bytes, {color_in:?} in, {reached:?}, {params:?}");
                            assert_eq!(got, expected, "{case}");
                            // Green spends C (and P in trTCM), yellow E or P, red nothing.
                            let spends_peak = matches!(params.kind, MeterKind::TrTcm { .. }) && got != Red;
                            let after = match got {
                                Green => (c - bytes, if spends_peak { e_or_p - bytes } else { e_or_p }),
                                Yellow => (c, e_or_p - bytes),
                                Red => (c, e_or_p),
                            };
                            assert_eq!(whole(&meter), after, "tokens after {case}");
                        }
                    }
                }
            }
        }
    }
}

#[test]
fn a_tie_reached_by_refilling_is_decided_to_the_nanosecond() {
    // C refills at 1000 B/s from empty: 1500 bytes at 1.5 s, 1000 nano-bytes less 1 ns before.
    for (kind, takes_at_the_tie) in [(sr(1000, 4000, 0), true), (tr(1000, 4000, 1000, 4000), true), (rfc4115(1000, 4000, 0, 0), false)] {
        let params = MeterParams::blind(kind);
        let empty = holding(0, 0, 0);
        assert_ne!(probe(&empty, &params, 1500 * MS - 1, 1500, Green), Green, "{kind:?}");
        assert_eq!(probe(&empty, &params, 1500 * MS, 1500, Green) == Green, takes_at_the_tie, "{kind:?}");
        assert_eq!(probe(&empty, &params, 1500 * MS + 1, 1500, Green), Green, "{kind:?}");
    }
}

#[test]
fn tokens_for_n_bytes_arrive_after_exactly_n_over_the_rate() {
    // 3 B/s: one byte every 333,333,333 1/3 ns, which no whole number of ns matches.
    for kind in [sr(3, 100, 0), tr(3000, 100, 3, 100), rfc4115(3, 100, 0, 0)] {
        let params = MeterParams::blind(kind);
        let mut meter = holding(0, 0, 0);
        assert_ne!(probe(&meter, &params, 333_333_333, 1, Green), Green, "{kind:?}: 0.999999999 bytes");
        assert_eq!(probe(&meter, &params, 333_333_334, 1, Green), Green, "{kind:?}: 1.000000002 bytes");
        assert_ne!(probe(&meter, &params, 2_333_333_333, 7, Green), Green, "{kind:?}");
        assert_eq!(probe(&meter, &params, 2_333_333_334, 7, Green), Green, "{kind:?}");
        // Splitting the time into many small steps adds exactly the same tokens as one step.
        let mut stepped = meter;
        for step in 1..=1000 {
            advance(&mut stepped, &params, step * 333);
        }
        advance(&mut meter, &params, 333_000);
        assert_eq!(stepped.committed, 3 * 333_000, "{kind:?}");
        assert_eq!(stepped, meter);
    }
    // E in RFC 4115 refills at EIR on its own: 7 B/s, so 14 bytes at 2 s, which a packet of 14
    // bytes would empty: it takes one more nanosecond.
    let params = MeterParams::blind(rfc4115(1, 1, 7, 100));
    let meter = holding(0, 0, 0);
    assert_eq!(probe(&meter, &params, 2 * S, 13, Green), Yellow);
    assert_eq!(probe(&meter, &params, 2 * S, 14, Green), Red);
    assert_eq!(probe(&meter, &params, 2 * S + 1, 14, Green), Yellow);
}

#[test]
fn a_timestamp_going_back_adds_no_tokens_and_does_not_move_the_clock() {
    for kind in [sr(1000, 1000, 0), tr(1000, 1000, 1000, 1000), rfc4115(1000, 1000, 0, 0)] {
        let params = MeterParams::blind(kind);
        let mut meter = holding(10 * S, 0, 0);
        assert_eq!(meter.mark(&params, 5 * S, 1, Green), Red, "{kind:?}: no tokens from going back");
        assert_eq!(meter.last_ns(), 10 * S);
        advance(&mut meter, &params, 10 * S + 500 * MS);
        assert_eq!(whole(&meter).0, 500, "{kind:?}: 0.5 s of tokens, not 5.5 s");
        assert_eq!(meter.mark(&params, 9 * S, 300, Green), Green, "{kind:?}: a late packet still spends what is there");
        assert_eq!((whole(&meter).0, meter.last_ns()), (200, 10 * S + 500 * MS));
    }
}

#[test]
fn a_very_long_idle_time_just_fills_the_buckets() {
    let terabit = 200_000_000_000; // 1.6 Tbit/s
    for rate in [terabit, u64::MAX] {
        for kind in [
            sr(rate, MAX_BURST_BYTES, MAX_BURST_BYTES),
            tr(rate, MAX_BURST_BYTES, rate, MAX_BURST_BYTES),
            rfc4115(rate, MAX_BURST_BYTES, rate, MAX_BURST_BYTES),
        ] {
            let params = MeterParams::blind(kind);
            assert_eq!(params.check().map_err(|e| e.to_string()), Ok(()));
            for now in [1, S, u64::MAX] {
                let mut empty = holding(0, 0, 0);
                advance(&mut empty, &params, now);
                let expected = u128::from(rate) * u128::from(now);
                let nano_max = MAX_BURST_BYTES * NANO;
                let c = expected.min(u128::from(nano_max)) as u64;
                let e_or_p = match kind {
                    MeterKind::SrTcm { .. } => (expected - u128::from(c)).min(u128::from(nano_max)) as u64,
                    _ => c,
                };
                assert_eq!((empty.committed, empty.excess_or_peak), (c, e_or_p), "{kind:?} after {now} ns");
            }
        }
    }
    // 1 GiB bursts at 1.6 Tbit/s, and the largest packet.
    let params = MeterParams::blind(tr(terabit, 1 << 30, terabit, 1 << 30));
    let mut meter = MeterState::new(&params, 0);
    assert_eq!(meter.mark(&params, u64::MAX, u32::MAX, Green), Red, "4 GiB does not fit in 1 GiB");
    assert_eq!(meter.mark(&params, u64::MAX, 1 << 30, Green), Green);
}

#[test]
fn a_smaller_burst_drops_the_tokens_above_it() {
    let meter = MeterState::new(&MeterParams::blind(sr(1000, 3000, 3000)), 0);
    let smaller = MeterParams::blind(sr(1000, 1000, 500));
    assert_eq!(probe(&meter, &smaller, 0, 1001, Green), Red, "C and E hold no more than the new sizes");
    assert_eq!(probe(&meter, &smaller, 0, 1000, Green), Green);
    let mut clamped = meter;
    advance(&mut clamped, &smaller, 1);
    assert_eq!(whole(&clamped), (1000, 500));
}

#[test]
fn impossible_parameters_are_refused_with_a_reason() {
    let refused = |kind: MeterKind, why: &str| {
        let error = MeterParams::aware(kind).check().unwrap_err().to_string();
        assert!(error.contains(why), "{kind:?}: {error:?} does not say {why:?}");
    };
    refused(sr(0, 1000, 1000), "CIR is 0");
    refused(sr(1000, 0, 0), "both 0");
    refused(sr(1000, MAX_BURST_BYTES + 1, 0), "limit");
    refused(tr(999, 1000, 1000, 1000), "PIR (999 B/s) is below CIR (1000 B/s)");
    refused(tr(1000, 0, 1000, 1000), "must both be above 0");
    refused(tr(1000, 1000, 1000, 0), "must both be above 0");
    refused(tr(1000, 1000, 0, 1000), "CIR is 0");
    refused(tr(1000, MAX_BURST_BYTES + 1, 1000, 1000), "PBS");
    refused(rfc4115(0, 1000, 1000, 1000), "never refill");
    refused(rfc4115(1000, 0, 1000, 1000), "never hold a token");
    refused(rfc4115(1000, 1000, 0, 1000), "never refill");
    refused(rfc4115(1000, 1000, 1000, 0), "never hold a token");
    refused(rfc4115(0, 0, 0, 0), "every packet would be red");
    refused(rfc4115(1000, 1000, 1000, MAX_BURST_BYTES + 1), "EBS");
    for kind in [
        sr(1, 0, 1),
        sr(1, 1, 0),
        sr(u64::MAX, MAX_BURST_BYTES, MAX_BURST_BYTES),
        tr(1000, 1, 1000, 1),
        rfc4115(1000, 1000, 0, 0),
        rfc4115(0, 0, 1000, 1000),
        tr(200_000_000_000, 1 << 30, 200_000_000_000, 1 << 30),
    ] {
        assert_eq!(MeterParams::blind(kind).check().map_err(|e| e.to_string()), Ok(()), "{kind:?}");
    }
}

#[test]
fn the_default_burst_is_a_millisecond_but_at_least_a_frame() {
    assert_eq!(default_burst(GBIT, 1514), 125_000);
    assert_eq!(default_burst(100 * GBIT, 9000), 12_500_000);
    assert_eq!(default_burst(125_000, 1514), 1514, "1 Mbit/s: a millisecond is 125 bytes, less than a frame");
    assert_eq!(default_burst(u64::MAX, 1514), MAX_BURST_BYTES);
}

/// Packets of `bytes` every `gap_ns` for `duration_ns`: the bytes each colour got.
fn offered_load(params: &MeterParams, bytes: u32, gap_ns: u64, duration_ns: u64) -> [u64; 3] {
    let mut meter = MeterState::new(params, 0);
    let mut got = [0u64; 3];
    for now in (0..duration_ns).step_by(gap_ns as usize) {
        got[meter.mark(params, now, bytes, Green) as usize] += u64::from(bytes);
    }
    got
}

#[test]
fn a_tenant_sending_twice_its_cir_gets_cir_plus_cbs_in_green() {
    let (cir, burst) = (GBIT, default_burst(GBIT, 1514));
    // CIR x 1 s + CBS, for 1500-byte packets at 2 Gbit/s: one every 6 us for 1 s.
    let expected_green = cir + burst;
    for kind in [sr(cir, burst, burst), tr(3 * cir / 2, burst, cir, burst), rfc4115(cir, burst, cir / 2, burst)] {
        let params = MeterParams::blind(kind);
        let [green, yellow, red] = offered_load(&params, 1500, 6_000, S);
        assert!(green <= expected_green, "{kind:?}: {green} green bytes, over CIR x 1 s + CBS");
        assert!(green as f64 >= expected_green as f64 * 0.995, "{kind:?}: {green} green bytes, expected {expected_green}");
        assert_eq!(green + yellow + red, S.div_ceil(6_000) * 1500);
        match kind {
            MeterKind::SrTcm { .. } => assert!(yellow <= burst && yellow + 1500 > burst, "{yellow}: E only gets what C cannot hold, nothing once C is busy"),
            MeterKind::TrTcm { pir, pbs, .. } => {
                let within_peak = (green + yellow) as f64;
                assert!(within_peak <= (pir + pbs) as f64 && within_peak >= (pir + pbs) as f64 * 0.995, "{kind:?}: {yellow} yellow");
            }
            MeterKind::Rfc4115 { eir, ebs, .. } => {
                assert!(yellow <= eir + ebs && yellow as f64 >= (eir + ebs) as f64 * 0.995, "{kind:?}: {yellow} yellow");
            }
        }
    }
}

#[test]
fn conforming_traffic_is_always_green() {
    let (cir, burst) = (GBIT, default_burst(GBIT, 1514));
    for kind in [sr(cir, burst, burst), tr(2 * cir, burst, cir, burst), rfc4115(cir, burst, cir, burst)] {
        for params in [MeterParams::blind(kind), MeterParams::aware(kind)] {
            // Exactly CIR: 1500 bytes every 12 us.
            assert_eq!(offered_load(&params, 1500, 12_000, S), [S.div_ceil(12_000) * 1500, 0, 0], "{params:?}");
            // Bursts of 83 x 1500 bytes (124,500 <= CBS) back to back, then as long a pause as
            // the burst takes at CIR (996 us): CIR on average, never more than CBS ahead.
            let mut meter = MeterState::new(&params, 0);
            for burst_start in (0..S).step_by(996_000) {
                for _ in 0..83 {
                    assert_eq!(meter.mark(&params, burst_start, 1500, Green), Green, "{params:?} at {burst_start}");
                }
            }
        }
    }
}

/// Exact non-negative fractions, for the reference meter.
#[derive(Debug, Clone, Copy)]
struct Fraction {
    num: u128,
    den: u128,
}

fn gcd(a: u128, b: u128) -> u128 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

impl Fraction {
    fn new(num: u128, den: u128) -> Self {
        let divisor = gcd(num, den).max(1);
        Fraction { num: num / divisor, den: den / divisor }
    }
    fn int(value: u64) -> Self {
        Fraction::new(u128::from(value), 1)
    }
    fn plus(self, other: Self) -> Self {
        Fraction::new(self.num * other.den + other.num * self.den, self.den * other.den)
    }
    fn minus(self, other: Self) -> Self {
        assert!(self.at_least(other), "{self:?} - {other:?} is negative");
        Fraction::new(self.num * other.den - other.num * self.den, self.den * other.den)
    }
    fn at_least(self, other: Self) -> bool {
        self.num * other.den >= other.num * self.den
    }
    fn more_than(self, other: Self) -> bool {
        self.num * other.den > other.num * self.den
    }
    fn min(self, other: Self) -> Self {
        if self.at_least(other) {
            other
        } else {
            self
        }
    }
    /// Exactly `self` as nano-bytes, when it is a whole number of them.
    fn as_nano(self) -> Option<u64> {
        (u128::from(NANO) % self.den == 0).then(|| (self.num * (u128::from(NANO) / self.den)) as u64)
    }
}

/// The RFCs' text, transcribed: token counts in bytes as exact fractions, each mode written out
/// as its RFC states it.
#[derive(Debug)]
struct Reference {
    params: MeterParams,
    clock_ns: u64,
    tc: Fraction,
    te: Fraction,
    tp: Fraction,
}

impl Reference {
    fn new(params: MeterParams, now_ns: u64) -> Self {
        let zero = Fraction::int(0);
        let (tc, te, tp) = match params.kind {
            MeterKind::SrTcm { cbs, ebs, .. } => (Fraction::int(cbs), Fraction::int(ebs), zero),
            MeterKind::TrTcm { pbs, cbs, .. } => (Fraction::int(cbs), zero, Fraction::int(pbs)),
            MeterKind::Rfc4115 { cbs, ebs, .. } => (Fraction::int(cbs), Fraction::int(ebs), zero),
        };
        Reference { params, clock_ns: now_ns, tc, te, tp }
    }

    fn mark(&mut self, now_ns: u64, bytes: u32, precolour: Color) -> Color {
        let seconds = if now_ns > self.clock_ns { Fraction::new(u128::from(now_ns - self.clock_ns), u128::from(S)) } else { Fraction::int(0) };
        self.clock_ns = self.clock_ns.max(now_ns);
        let tokens_at = |rate: u64| Fraction::new(seconds.num * u128::from(rate), seconds.den);
        let b = Fraction::int(u64::from(bytes));
        let aware = self.params.color_aware;
        match self.params.kind {
            MeterKind::SrTcm { cir, cbs, ebs } => {
                // "If Tc is less than CBS, Tc is incremented by one, else if Te is less than
                // EBS, Te is incremented by one, else neither Tc nor Te is incremented."
                let arriving = tokens_at(cir);
                let into_c = arriving.min(Fraction::int(cbs).minus(self.tc));
                self.tc = self.tc.plus(into_c);
                self.te = self.te.plus(arriving.minus(into_c)).min(Fraction::int(ebs));
                // "If Tc(t)-B >= 0, the packet is green ... else if Te(t)-B >= 0, the packets is yellow"
                self.committed_then_excess(aware, precolour, b, Fraction::at_least)
            }
            MeterKind::Rfc4115 { cir, cbs, eir, ebs } => {
                self.tc = self.tc.plus(tokens_at(cir)).min(Fraction::int(cbs));
                self.te = self.te.plus(tokens_at(eir)).min(Fraction::int(ebs));
                // "if Tc(t)- B > 0, the packet is green ... if Te(t)- B > 0, the packet is yellow"
                self.committed_then_excess(aware, precolour, b, Fraction::more_than)
            }
            MeterKind::TrTcm { pir, pbs, cir, cbs } => {
                self.tp = self.tp.plus(tokens_at(pir)).min(Fraction::int(pbs));
                self.tc = self.tc.plus(tokens_at(cir)).min(Fraction::int(cbs));
                if !aware {
                    if !self.tp.at_least(b) {
                        Red
                    } else if !self.tc.at_least(b) {
                        self.tp = self.tp.minus(b);
                        Yellow
                    } else {
                        self.tp = self.tp.minus(b);
                        self.tc = self.tc.minus(b);
                        Green
                    }
                } else if precolour == Red || !self.tp.at_least(b) {
                    Red
                } else if precolour == Yellow || !self.tc.at_least(b) {
                    self.tp = self.tp.minus(b);
                    Yellow
                } else {
                    self.tp = self.tp.minus(b);
                    self.tc = self.tc.minus(b);
                    Green
                }
            }
        }
    }

    /// RFC 2697 section 3 and RFC 4115 section 3, blind and aware; `holds(tokens, b)` is the
    /// RFC's test of a bucket (RFC 2697: Tc(t)-B >= 0, RFC 4115: Tc(t)- B > 0).
    fn committed_then_excess(&mut self, aware: bool, precolour: Color, b: Fraction, holds: fn(Fraction, Fraction) -> bool) -> Color {
        if !aware {
            if holds(self.tc, b) {
                self.tc = self.tc.minus(b);
                Green
            } else if holds(self.te, b) {
                self.te = self.te.minus(b);
                Yellow
            } else {
                Red
            }
        } else if precolour == Green && holds(self.tc, b) {
            self.tc = self.tc.minus(b);
            Green
        } else if (precolour == Green || precolour == Yellow) && holds(self.te, b) {
            self.te = self.te.minus(b);
            Yellow
        } else {
            Red
        }
    }

    /// C, and E or P, in nano-bytes.
    fn tokens(&self) -> (Option<u64>, Option<u64>) {
        let second = match self.params.kind {
            MeterKind::TrTcm { .. } => self.tp,
            _ => self.te,
        };
        (self.tc.as_nano(), second.as_nano())
    }
}

/// One packet of a random run: time step (backwards when `back`), size, colour in.
type Step = (u64, bool, u32, Color);

/// Runs both meters over `steps` and checks every colour (and the aware meters' promise never
/// to improve a colour); returns how many packets got each colour, and how many found exactly
/// their bytes in a bucket.
fn compare_with_reference(params: MeterParams, start_ns: u64, steps: &[Step]) -> ([usize; 3], usize) {
    let mut meter = MeterState::new(&params, start_ns);
    let mut reference = Reference::new(params, start_ns);
    let mut now = start_ns;
    let (mut counts, mut ties) = ([0; 3], 0);
    for (i, &(step, back, bytes, color_in)) in steps.iter().enumerate() {
        now = if back { now.saturating_sub(step) } else { now + step };
        let mut at_now = meter;
        advance(&mut at_now, &params, now);
        let cost = u64::from(bytes) * NANO;
        ties += usize::from(at_now.committed == cost || at_now.excess_or_peak == cost);
        let got = meter.mark(&params, now, bytes, color_in);
        let expected = reference.mark(now, bytes, color_in);
        assert_eq!(got, expected, "packet {i} ({bytes} bytes at {now} ns, {color_in:?}) with {params:?}");
        assert_eq!((Some(meter.committed), Some(meter.excess_or_peak)), reference.tokens(), "tokens after packet {i}");
        if params.color_aware {
            assert!(got >= color_in, "{color_in:?} promoted to {got:?}");
        }
        counts[got as usize] += 1;
    }
    (counts, ties)
}

/// The proptest below could pass by seeing one colour only; these long runs show each meter
/// and mode giving every colour while agreeing with the reference.
#[test]
fn long_random_runs_agree_with_the_reference_and_see_every_colour() {
    let mut random = Rng(0x9e37_79b9_7f4a_7c15);
    for kind in [sr(1_000_003, 3000, 200_000), tr(1_700_011, 4000, 1_000_003, 3000), rfc4115(1_000_003, 3000, 700_001, 5000)] {
        for params in [MeterParams::blind(kind), MeterParams::aware(kind)] {
            // Phases of 1,000 packets, alternately over and under the rates (~1 MB/s).
            let steps: Vec<Step> = (0..20_000)
                .map(|i| {
                    let colour = [Green, Green, Yellow, Red][random.below(4) as usize];
                    let gap = random.below(if i / 1000 % 2 == 0 { 1_000_000 } else { 4_000_000 });
                    (gap, random.below(50) == 0, random.below(2000) as u32, colour)
                })
                .collect();
            let (counts, _) = compare_with_reference(params, 1 << 40, &steps);
            assert!(counts.iter().all(|&count| count > 1000), "{params:?}: colours {counts:?}");
        }
    }
}

/// The runs above almost never meet a tie, a packet that finds exactly its bytes in a bucket,
/// where RFC 4115 parts from RFCs 2697 and 2698. Here rates are in thousands of bytes a second,
/// packets whole milliseconds apart and sizes in hundreds of bytes, so buckets hold multiples
/// of 50 bytes and ties are common.
#[test]
fn random_runs_full_of_ties_agree_with_the_reference() {
    let mut random = Rng(0x2545_f491_4f6c_dd1d);
    for kind in [sr(100_000, 1000, 600), tr(200_000, 1000, 100_000, 600), rfc4115(100_000, 1000, 50_000, 600)] {
        for params in [MeterParams::blind(kind), MeterParams::aware(kind)] {
            let steps: Vec<Step> = (0..20_000)
                .map(|_| {
                    let gap = [0, 0, 1, 2, 5][random.below(5) as usize] * MS;
                    let bytes = [100, 200, 300, 500, 600, 1000][random.below(6) as usize];
                    (gap, false, bytes, [Green, Green, Yellow, Red][random.below(4) as usize])
                })
                .collect();
            let (counts, ties) = compare_with_reference(params, 0, &steps);
            assert!(ties > 1000 && counts.iter().all(|&count| count > 100), "{params:?}: {ties} ties, colours {counts:?}");
        }
    }
}

/// Rates from 1 B/s to about 0.9e12 B/s (7 Tbit/s), with odd values.
fn rate() -> impl Strategy<Value = u64> {
    (1u64..=9, 0u32..=11, 0u64..1000).prop_map(|(digit, exponent, odd)| digit * 10u64.pow(exponent) + odd)
}

fn burst() -> impl Strategy<Value = u64> {
    prop_oneof![4 => 1u64..=5000, 2 => 1u64..=1_000_000, 1 => Just(MAX_BURST_BYTES)]
}

fn meter_params() -> impl Strategy<Value = MeterParams> {
    let maybe_zero = || prop_oneof![1 => Just(0u64), 4 => burst()];
    let srtcm_kinds = (rate(), maybe_zero(), maybe_zero()).prop_filter("a bucket", |(_, cbs, ebs)| cbs + ebs > 0).prop_map(|(cir, cbs, ebs)| sr(cir, cbs, ebs));
    let trtcm_kinds =
        (rate(), prop_oneof![Just(0u64), rate()], burst(), burst()).prop_map(|(cir, above, pbs, cbs)| tr(cir.saturating_add(above), pbs, cir, cbs));
    let bucket = || prop_oneof![1 => Just((0u64, 0u64)), 4 => (rate(), burst())];
    let rfc4115_kinds = (bucket(), bucket()).prop_filter("a bucket", |(c, e)| c.0 + e.0 > 0).prop_map(|((cir, cbs), (eir, ebs))| rfc4115(cir, cbs, eir, ebs));
    (prop_oneof![srtcm_kinds, trtcm_kinds, rfc4115_kinds], any::<bool>()).prop_map(|(kind, color_aware)| MeterParams { kind, color_aware })
}

fn color() -> impl Strategy<Value = Color> {
    prop_oneof![Just(Green), Just(Yellow), Just(Red)]
}

fn steps() -> impl Strategy<Value = Vec<Step>> {
    let gap = prop_oneof![4 => 0u64..=2_000, 4 => 0u64..=2_000_000, 2 => 0u64..=2_000_000_000, 1 => 0u64..=1_000_000_000_000];
    let bytes = prop_oneof![4 => 0u32..=3000, 1 => 0u32..=1_000_000, 1 => Just(u32::MAX)];
    prop::collection::vec((gap, prop::bool::weighted(0.1), bytes, color()), 1..100)
}

/// Network calculus, an independent formulation of a token bucket that starts full: packet `k`
/// and the earlier packets `chosen` fit a bucket of `rate` and `size` iff, for every packet i
/// among them, their bytes from i to k are at most size + rate x (t_k - t_i); `strictly`
/// (RFC 4115), iff they are less.
fn fits_bucket(times: &[u64], sizes: &[u32], chosen: &[usize], k: usize, rate: u64, size: u64, strictly: bool) -> bool {
    let budget = |i: usize| u128::from(size) * u128::from(NANO) + u128::from(rate) * u128::from(times[k] - times[i]);
    let within = |bytes: u128, i: usize| if strictly { bytes < budget(i) } else { bytes <= budget(i) };
    let mut bytes = u128::from(sizes[k]) * u128::from(NANO);
    within(bytes, k)
        && chosen.iter().rev().all(|&i| {
            bytes += u128::from(sizes[i]) * u128::from(NANO);
            within(bytes, i)
        })
}

/// The colour-blind colour of packet `k` by the arrival curves, given the earlier packets by
/// colour: green iff it fits C with the green ones (all kinds); for RFC 4115, else yellow iff it
/// fits E with the yellow ones; for trTCM, red unless it fits P with the non-red ones. `None`
/// means only "not green": srTCM's E is fed by C's overflow, not by a rate of its own.
fn arrival_curve_colour(kind: MeterKind, times: &[u64], sizes: &[u32], by_colour: &[Vec<usize>; 3], k: usize) -> Option<Color> {
    let [green, yellow, _] = by_colour;
    let strictly = matches!(kind, MeterKind::Rfc4115 { .. });
    let fits = |chosen: &[usize], rate: u64, size: u64| fits_bucket(times, sizes, chosen, k, rate, size, strictly);
    match kind {
        MeterKind::SrTcm { cir, cbs, .. } => fits(green, cir, cbs).then_some(Green),
        MeterKind::Rfc4115 { cir, cbs, eir, ebs } => Some(if fits(green, cir, cbs) {
            Green
        } else if fits(yellow, eir, ebs) {
            Yellow
        } else {
            Red
        }),
        MeterKind::TrTcm { pir, pbs, cir, cbs } => {
            let mut non_red = [green.as_slice(), yellow.as_slice()].concat();
            non_red.sort_unstable();
            Some(if !fits(&non_red, pir, pbs) {
                Red
            } else if fits(green, cir, cbs) {
                Green
            } else {
                Yellow
            })
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn random_traffic_gets_the_reference_colours(params in meter_params(), start_ns in 0u64..=1 << 60, steps in steps()) {
        prop_assert_eq!(params.check().map_err(|e| e.to_string()), Ok(()));
        compare_with_reference(params, start_ns, &steps);
    }

    #[test]
    fn consts_give_back_the_params_they_were_made_from(params in meter_params()) {
        prop_assert_eq!(MeterConsts::new(&params).params(), params);
    }

    #[test]
    fn colour_blind_colours_follow_the_arrival_curves(params in meter_params(), packets in prop::collection::vec((0u64..=3_000_000, 0u32..=3000), 1..60)) {
        let params = MeterParams::blind(params.kind);
        let mut meter = MeterState::new(&params, 0);
        let (mut times, mut sizes, mut now) = (Vec::new(), Vec::new(), 0);
        let mut by_colour: [Vec<usize>; 3] = Default::default();
        for (k, &(gap, bytes)) in packets.iter().enumerate() {
            now += gap;
            times.push(now);
            sizes.push(bytes);
            let expected = arrival_curve_colour(params.kind, &times, &sizes, &by_colour, k);
            let got = meter.mark(&params, now, bytes, Green);
            match expected {
                Some(colour) => prop_assert_eq!(got, colour, "packet {} of {:?}", k, params),
                None => prop_assert_ne!(got, Green, "packet {} of {:?}", k, params),
            }
            by_colour[got as usize].push(k);
        }
    }
}

#[test]
fn consts_give_back_the_largest_bursts_the_check_takes() {
    let most = MAX_BURST_BYTES;
    for kind in [
        MeterKind::SrTcm { cir: u64::MAX, cbs: most, ebs: most },
        MeterKind::TrTcm { pir: u64::MAX, pbs: most, cir: 1, cbs: most },
        MeterKind::Rfc4115 { cir: 1, cbs: most, eir: 0, ebs: 0 },
    ] {
        let params = MeterParams::aware(kind);
        assert_eq!(params.check().map_err(|e| e.to_string()), Ok(()));
        assert_eq!(MeterConsts::new(&params).params(), params);
    }
}
