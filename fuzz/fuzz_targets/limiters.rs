//! Every limiter's check path with arbitrary parameters, state words and
//! times drawn from the whole `u64` range (forward, backward, wrapping past
//! `2⁶⁴`, jumps anywhere): never a panic, and differential checks where two
//! types promise the same answer.
//!
//! * `Gcra`, `LocalGcra` and the `Quota` step on a bare word decide alike
//!   and report the same numbers.
//! * Time is serial: the same operations with every `now` shifted by an
//!   arbitrary origin give exactly the same answers (GCRA, the keyed
//!   table, the sliding log, the meter), whatever the gaps between them.
//! * Any state word fed to any `Algorithm` admits at most its limit at one `now`.
//! * Windows (the bucketed ones included), the sliding log, the keyed
//!   table and the meters never panic; the bucketed windows never report
//!   more than their limit.
#![no_main]

use arbitrary::Arbitrary;
use cellrate::keyed::{Keyed, Seed, WhenFull};
use cellrate::meter::{LocalFlow, Meter, SrTcm};
use cellrate::window::{
    BucketedWindow, BucketedWindowQuota, FixedWindow, FixedWindowQuota, SlidingLog,
    SlidingWindow, SlidingWindowQuota, WideBucketedWindow,
};
use cellrate::{Algorithm, Gcra, LocalGcra, Quota, RateLimiter};
use libfuzzer_sys::fuzz_target;

#[derive(Arbitrary, Debug)]
enum Step {
    Forward(u32),
    Back(u32),
    Jump(u64),
}

#[derive(Arbitrary, Debug)]
struct Op {
    step: Step,
    cost: u8,
    key: u8,
}

#[derive(Arbitrary, Debug)]
struct Input {
    cells: u32,
    ticks: u64,
    burst: u16,
    hz: u64,
    limit: u16,
    window: u32,
    /// The bucketed windows' bucket count, less one (mod 8).
    buckets: u8,
    state: u64,
    start: u64,
    /// The shift of the second copy of each limiter.
    origin: u64,
    ops: Vec<Op>,
}

fn at_once<A: Algorithm>(a: &A, mut state: u64, now: u64, cost: u64, limit: u64) {
    let mut total = 0u64;
    for _ in 0..64 {
        match a.check(state, now, cost) {
            Ok((next, d)) if cost > 0 => {
                assert!(d.remaining() <= limit);
                total += cost;
                state = next;
            }
            _ => break,
        }
    }
    assert!(total <= limit, "{total} admitted from one word against {limit}");
    let _ = a.peek(state, now);
    let _ = a.is_idle(state, now);
}

fuzz_target!(|input: Input| {
    if input.ops.len() > 256 {
        return;
    }
    let burst = u64::from(input.burst).max(1);
    let Ok(quota) = Quota::per_ticks(u64::from(input.cells), input.ticks)
        .with_burst(burst)
        .try_at_hz(input.hz.max(1))
    else {
        return;
    };
    let limit = u64::from(input.limit).max(1);
    let window = u64::from(input.window).max(1);
    let fixed_q = FixedWindowQuota::new(limit, window);
    let sliding_q = SlidingWindowQuota::try_new(limit, window).ok();
    // `n` buckets dividing the window (the one-word form refuses a limit
    // too large for `n`); the wide form has 4 buckets.
    let n = u32::from(input.buckets % 8) + 1;
    let bucketed_window = (window / u64::from(n)).max(1) * u64::from(n);
    let bucketed_q = BucketedWindowQuota::try_new(limit, bucketed_window, n).ok();
    let bucketed = bucketed_q.map(BucketedWindow::with_quota);
    let wide = WideBucketedWindow::<4>::try_new(limit, (window / 4).max(1) * 4).ok();

    let shared = Gcra::new(quota);
    let local = LocalGcra::new(quota);
    let mut word = Quota::NEW;
    let fixed = FixedWindow::new(limit, window);
    let sliding = SlidingWindow::try_new(limit, window).ok();
    let log: Option<SlidingLog<8>> = SlidingLog::try_new(limit.min(8), window).ok();
    let keyed: Keyed<Quota, 8> = Keyed::new(quota, WhenFull::Deny, Seed::new(3, 4));
    let meter = SrTcm::new(u64::from(input.cells).max(1), burst, burst, input.hz.max(1)).ok();
    let mut flow = LocalFlow::new();
    // The shifted copies.
    let shifted = Gcra::new(quota);
    let shifted_keyed: Keyed<Quota, 8> = Keyed::new(quota, WhenFull::Deny, Seed::new(3, 4));
    let shifted_log: Option<SlidingLog<8>> = SlidingLog::try_new(limit.min(8), window).ok();
    let mut shifted_flow = LocalFlow::new();

    let mut now = input.start;
    for op in &input.ops {
        now = match op.step {
            Step::Forward(d) => now.wrapping_add(u64::from(d)),
            Step::Back(d) => now.wrapping_sub(u64::from(d)),
            Step::Jump(t) => t,
        };
        let later = now.wrapping_add(input.origin);
        let cost = u64::from(op.cost);
        let a = shared.check_n(now, cost);
        let b = local.check_n(now, cost);
        let c = quota.check(word, now, cost);
        assert_eq!(a, b, "Gcra and LocalGcra at now={now} cost={cost}");
        match c {
            Ok((next, d)) => {
                assert_eq!(a, Ok(d));
                word = next;
            }
            Err(e) => assert_eq!(a, Err(e)),
        }
        assert_eq!(shared.peek(now), local.peek(now));
        assert_eq!(shifted.check_n(later, cost), a, "shifted by {}", input.origin);
        assert_eq!(shifted.peek(later), shared.peek(now));
        assert_eq!(
            shifted_keyed.check_n(&op.key, later, cost),
            keyed.check_n(&op.key, now, cost)
        );
        assert_eq!(shifted_keyed.peek(&op.key, later), keyed.peek(&op.key, now));
        let _ = fixed.check_n(now, cost);
        if let Some(s) = &sliding {
            let _ = s.check_n(now, cost);
        }
        if let Some(b) = &bucketed {
            if let Ok(d) = b.check_n(now, cost) {
                assert!(d.remaining() <= limit);
            }
            assert!(b.peek(now).remaining() <= limit);
            let _ = b.refund_n(now, cost);
        }
        if let Some(w) = &wide {
            if let Ok(d) = w.check_n(now, cost) {
                assert!(d.remaining() <= limit);
            }
            assert!(w.peek(now).remaining() <= limit);
            let _ = w.refund_n(now, cost);
        }
        if let (Some(l), Some(s)) = (&log, &shifted_log) {
            assert_eq!(s.check_n(later, cost), l.check_n(now, cost));
            assert_eq!(s.peek(later), l.peek(now));
        }
        if let Some(m) = &meter {
            assert_eq!(
                m.mark_local(&mut shifted_flow, later, cost * 100),
                m.mark_local(&mut flow, now, cost * 100)
            );
        }
        // Foreign words: the input's state, as is and shifted into now's window.
        at_once(&quota, input.state, now, cost.max(1), burst);
        at_once(&fixed_q, input.state, now, cost.max(1), limit);
        if let Some(q) = &sliding_q {
            at_once(q, input.state, now, cost.max(1), limit);
        }
        if let Some(q) = &bucketed_q {
            at_once(q, input.state, now, cost.max(1), limit);
        }
    }
});
