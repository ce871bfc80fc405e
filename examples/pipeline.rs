//! A multi-worker packet pipeline policing one aggregate limit.
//!
//! Four worker threads receive packets as fast as they can (sizes 64 to
//! 1 500 bytes) and police them against **one** shared byte rate: each
//! holds a `Leased` handle on the shared `Gcra`, so it touches the shared
//! word once per lease instead of once per packet. A second pass colours
//! the same traffic with an RFC 4115 meter through `LeasedMeter`.
//!
//! Printed: per worker and in total, the bytes admitted, and the total
//! against the exact limit `b + ⌊Δ/T⌋` and the bound `b + ⌊Δ/T⌋ + n·k` of
//! `cellrate::lease`.
//!
//! Run with `cargo run --release --example pipeline`.
use std::time::{Duration, Instant};

use cellrate::lease::{LeasePolicy, Leased, LeasedMeter};
use cellrate::meter::{Color, Flow, TrTcm4115};
use cellrate::{Gcra, Quota};

const WORKERS: usize = 4;
const HZ: u64 = 1_000_000_000; // nanosecond ticks
const RATE: u64 = 20_000_000; // bytes per second, aggregate
const BURST: u64 = 65_536; // bytes
const RUN: Duration = Duration::from_millis(300);
const BURST_OF_PACKETS: usize = 32; // packets per clock read

/// A small deterministic generator of packet sizes (64..=1 500 bytes).
struct Sizes(u64);
impl Sizes {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        64 + (self.0 >> 33) % 1_437
    }
}

/// What one worker saw.
#[derive(Default, Clone, Copy)]
struct Tally {
    admitted: u64,
    dropped: u64,
    packets: u64,
    first: u64,
    last: u64,
}

/// Runs `WORKERS` threads for `RUN`, each policing its packets with the
/// check `make(worker)` builds (in the worker's thread), reading the clock
/// once per `BURST_OF_PACKETS` packets.
fn run_pass<F: FnMut(u64, u64) -> bool>(
    clock: &(impl Fn() -> u64 + Sync),
    make: &(impl Fn(usize) -> F + Sync),
) -> Vec<Tally> {
    std::thread::scope(|s| {
        let workers: Vec<_> = (0..WORKERS)
            .map(|w| {
                s.spawn(move || {
                    let mut check = make(w);
                    let mut sizes = Sizes(w as u64 + 1);
                    let mut t = Tally {
                        first: clock(),
                        ..Tally::default()
                    };
                    let end = t.first + RUN.as_nanos() as u64;
                    let mut now = t.first;
                    while now < end {
                        for _ in 0..BURST_OF_PACKETS {
                            let bytes = sizes.next();
                            t.packets += 1;
                            if check(now, bytes) {
                                t.admitted += bytes;
                            } else {
                                t.dropped += bytes;
                            }
                        }
                        now = clock();
                    }
                    t.last = now;
                    t
                })
            })
            .collect();
        workers.into_iter().map(|w| w.join().unwrap()).collect()
    })
}

/// Prints a pass's per-worker and total figures against the exact limit
/// and the bound `b + ⌊Δ/T⌋ + n·k` (`k = 0` for the plain shared check).
fn report(title: &str, tallies: &[Tally], k: u64) {
    let t0 = tallies.iter().map(|t| t.first).min().unwrap();
    let t1 = tallies.iter().map(|t| t.last).max().unwrap();
    let delta = t1 - t0;
    let exact = BURST + delta * RATE / HZ; // b + ⌊Δ/T⌋, T = 50 ns per byte
    let bound = exact + WORKERS as u64 * k;
    println!("\n{title}");
    println!("worker     packets    admitted B       dropped B");
    for (w, t) in tallies.iter().enumerate() {
        println!(
            "{w:>6} {:>11} {:>13} {:>15}",
            t.packets, t.admitted, t.dropped
        );
    }
    let total: u64 = tallies.iter().map(|t| t.admitted).sum();
    let packets: u64 = tallies.iter().map(|t| t.packets).sum();
    println!(
        " total {packets:>11} {total:>13}   over Δ = {:.1} ms",
        delta as f64 / 1e6
    );
    println!("  exact limit b + ⌊Δ/T⌋       {exact:>12} B");
    println!("  bound b + ⌊Δ/T⌋ + n·k       {bound:>12} B");
    println!(
        "  admitted − exact limit      {:>12} B   (at most n·k = {} B)",
        total as i64 - exact as i64,
        WORKERS as u64 * k
    );
    assert!(total <= bound, "the bound of cellrate::lease was broken");
}

fn main() {
    let start = Instant::now();
    let clock = move || start.elapsed().as_nanos() as u64;
    let policy = LeasePolicy::new(16_384, 1_000_000) // k = 16 KiB, lifetime 1 ms
        .with_min(1_500)
        .with_idle(100_000) // a lease unused for 100 µs lapses
        .with_share(WORKERS as u64);
    let k = policy.max_cells();
    let quota = Quota::per_second(RATE).with_burst(BURST).at_hz(HZ);
    println!("{WORKERS} workers, one aggregate limit of {RATE} B/s (burst {BURST} B); packets of 64-1 500 B");

    // Pass 0, the baseline: every packet checks the shared limiter.
    let shared = Gcra::new(quota);
    let plain = run_pass(&clock, &|_| |now, bytes| shared.check_n(now, bytes).is_ok());
    report("shared Gcra::check_n on every packet", &plain, 0);

    // Pass 1: each worker leases bytes from the shared limiter.
    let shared = Gcra::new(quota);
    let leased = run_pass(&clock, &|_| {
        let mut handle = Leased::new(&shared, policy);
        move |now, bytes| handle.check_n(now, bytes).is_ok()
    });
    report(
        &format!("Leased handles (leases of up to k = {k} B)"),
        &leased,
        k,
    );

    // Pass 2: colours from one shared RFC 4115 meter (committed 10 MB/s,
    // excess 5 MB/s, 64 KiB buckets).
    let profile = TrTcm4115::new(RATE / 2, BURST, RATE / 4, BURST, HZ).unwrap();
    let flow = Flow::new();
    let start2 = clock();
    let colours: Vec<[u64; 3]> = std::thread::scope(|s| {
        let workers: Vec<_> = (0..WORKERS)
            .map(|w| {
                let (profile, flow) = (&profile, &flow);
                s.spawn(move || {
                    let mut handle = LeasedMeter::new(profile, flow, policy);
                    let mut sizes = Sizes(w as u64 + 100);
                    let mut bytes_by = [0u64; 3];
                    let end = start2 + RUN.as_nanos() as u64;
                    let mut now = clock();
                    while now < end {
                        for _ in 0..BURST_OF_PACKETS {
                            let bytes = sizes.next();
                            bytes_by[handle.mark(now, bytes) as usize] += bytes;
                        }
                        now = clock();
                    }
                    bytes_by
                })
            })
            .collect();
        workers.into_iter().map(|w| w.join().unwrap()).collect()
    });
    let delta2 = clock() - start2;
    println!(
        "\nRFC 4115 colours from one shared flow (CIR {} B/s, EIR {} B/s):",
        RATE / 2,
        RATE / 4
    );
    println!("worker        green B       yellow B          red B");
    let mut sum = [0u64; 3];
    for (w, c) in colours.iter().enumerate() {
        println!("{w:>6} {:>14} {:>14} {:>14}", c[0], c[1], c[2]);
        for i in 0..3 {
            sum[i] += c[i];
        }
    }
    let green_exact = BURST + delta2 * (RATE / 2) / HZ;
    let yellow_exact = BURST + delta2 * (RATE / 4) / HZ;
    let nk = WORKERS as u64 * k;
    println!(
        " total {:>14} {:>14} {:>14}",
        sum[Color::Green as usize],
        sum[Color::Yellow as usize],
        sum[Color::Red as usize]
    );
    println!(
        " exact {green_exact:>14} {yellow_exact:>14}   (CBS + CIR·Δ, EBS + EIR·Δ; the bound adds n·k = {nk} B to each)"
    );
    assert!(sum[0] <= green_exact + nk && sum[1] <= yellow_exact + nk);
}
