//! `LeasedMeter` on the two-bucket meters: per bucket, every byte coloured
//! from it was taken from the shared bucket, the colours at one instant
//! stay within the bucket sizes, and over time within `S + ⌊Δ·R⌋ + H(t₀)`.

use cellrate::lease::{LeasePolicy, LeasedMeter};
use cellrate::meter::{Color, Flow, Meter, TrTcm, TrTcm4115};

#[path = "support/origin.rs"]
mod origin;

/// Deterministic packet sizes, 40..=1 500 bytes.
fn sizes(seed: u64) -> impl Iterator<Item = u64> {
    let mut x = seed;
    std::iter::repeat_with(move || {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        40 + (x >> 33) % 1_461
    })
}

#[test]
fn trtcm_colours_from_leases_stay_within_the_buckets() {
    let (by, spent, full) = trtcm_leased_run(0);
    // One instant: green ≤ CBS, green + yellow ≤ PBS (checked in the run);
    // 2 seconds at 1 ms steps: committed ≤ CBS + CIR·Δ + H, peak ≤ PBS + PIR·Δ + H.
    let nk = 3 * 1_000;
    assert!(by[0] <= 3_000 + 2_000 + nk, "{by:?}");
    assert!(by[0] + by[1] <= 4_000 + 4_000 + nk, "{by:?}");
    // trTCM words are [peak, committed]: peak bytes = green + yellow.
    assert_eq!(spent, [by[0] + by[1], by[0]]);
    // Everything held goes back on drop: once refilled, the flow is full.
    assert_eq!(full, [4_000, 3_000]);
    // The same run at any origin of the clock gives the same colours.
    for origin in origin::FIXED {
        assert_eq!(
            trtcm_leased_run(origin),
            (by, spent, full),
            "origin {origin}"
        );
    }
}

/// The leased trTCM run, every `now` shifted by `origin`: bytes per colour,
/// bytes spent per bucket, and the tokens once refilled after the drop.
fn trtcm_leased_run(origin: u64) -> ([u64; 3], [u64; 2], [u64; 2]) {
    let at = |now: u64| origin.wrapping_add(now);
    // PIR 2 000 B/s, PBS 4 000; CIR 1 000 B/s, CBS 3 000; 1 kHz clock.
    let profile = TrTcm::new(1_000, 3_000, 2_000, 4_000, 1_000).unwrap();
    let flow = Flow::new();
    let policy = LeasePolicy::new(1_000, 50).with_min(200).with_share(3);
    let mut workers: Vec<_> = (0..3)
        .map(|_| LeasedMeter::new(&profile, &flow, policy))
        .collect();
    let mut by = [0u64; 3];
    let mut packets = sizes(7);
    for i in 0..60 {
        let bytes = packets.next().unwrap();
        by[workers[i % 3].mark(at(0), bytes) as usize] += bytes;
    }
    assert!(by[0] <= 3_000, "{by:?}");
    assert!(by[0] + by[1] <= 4_000, "{by:?}");
    assert!(by[2] > 0);
    for now in 1..=2_000u64 {
        for w in workers.iter_mut() {
            let bytes = packets.next().unwrap();
            by[w.mark(at(now), bytes) as usize] += bytes;
        }
    }
    let spent = workers.iter().fold([0u64; 2], |acc, w| {
        let s = w.spent();
        [acc[0] + s[0], acc[1] + s[1]]
    });
    drop(workers);
    (by, spent, profile.tokens(flow.words(), at(10_000)))
}

#[test]
fn rfc4115_colour_aware_and_conservation() {
    let profile = TrTcm4115::new(1_000, 1_500, 1_000, 1_500, 1_000).unwrap();
    let flow = Flow::new();
    let policy = LeasePolicy::new(1_500, 100).with_min(500).with_share(2);
    let mut a = LeasedMeter::new(&profile, &flow, policy);
    let mut b = LeasedMeter::new(&profile, &flow, policy);
    // Pre-coloured yellow never takes committed bytes; red stays red.
    assert_eq!(a.mark_aware(0, 500, Color::Yellow), Color::Yellow);
    assert_eq!(a.mark_aware(0, 10, Color::Red), Color::Red);
    assert_eq!(a.spent(), [0, 500]);
    assert_eq!(b.mark(0, 1_000), Color::Green);
    assert_eq!(a.mark(0, 500), Color::Green);
    assert_eq!(a.mark(0, 1), Color::Yellow); // committed 1 500 all coloured
    assert_eq!(a.spent()[0] + b.spent()[0], 1_500);
    a.release(0);
    b.release(0);
    // What is left in the shared buckets is exactly what was not coloured.
    assert_eq!(profile.tokens(flow.words(), 0), [0, 1_500 - 501]);
}
