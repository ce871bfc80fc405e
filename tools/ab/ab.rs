//! Two versions of cellrate in one binary, each check timed against its
//! other version with the paired harness (`benches/common/paired.rs`).
//!
//! Built and run by `tools/ab/run.sh`, which links `old` (a past commit)
//! and `new` (this working tree). Each case prints two `ratio:` lines,
//! `new ÷ old` (the old check as the baseline) and `old ÷ new` (the
//! reverse), so that an advantage of whichever side the harness times
//! first shows up as the two disagreeing. Below 1 in the first line: the
//! new code is faster.
//!
//! Why one binary: two bench binaries place the same code at other
//! addresses, and ratios between code that no change touched move by
//! several per cent between them (docs/design/gcra.md). Here both versions
//! sit in one binary; `run.sh --aligned` also aligns every function and
//! every branch target to 64 bytes, which takes where the loops land out
//! of the comparison.
//!
//! The cases use API that both versions must have; a case that stops
//! compiling against an older commit is removed or adapted here.

use std::hint::black_box;

#[path = "../../benches/common/paired.rs"]
#[allow(dead_code)]
mod paired;
use paired::{ratio, ratio_calls, Side};
#[path = "../../benches/common/traffic.rs"]
mod traffic;
use traffic::Traffic;

const HZ: u64 = 1_000_000_000;
/// `now` for the single-limiter cases.
const NOW: u64 = 1 << 20;
/// Cells per window and the window in ticks for the window cases (T = 1
/// tick for GCRA), as in `benches/family.rs`.
const LIMIT: u64 = 1 << 20;
const WINDOW: u64 = 1 << 20;

/// `new ÷ old` and `old ÷ new` for an admitting (`now` moving on a window
/// per chunk) or a denying (exhausted, frozen `now`) limiter.
macro_rules! limiter {
    ($name:expr, $old:expr, $new:expr, admitting) => {{
        use new::RateLimiter as _;
        use old::RateLimiter as _;
        let (o, n) = ($old, $new);
        both(
            concat!($name, " admitting"),
            &mut || Side::new(WINDOW, WINDOW, |t| o.check(t).is_ok()),
            &mut || Side::new(WINDOW, WINDOW, |t| n.check(t).is_ok()),
        );
    }};
    ($name:expr, $old:expr, $new:expr, denying) => {{
        use new::RateLimiter as _;
        use old::RateLimiter as _;
        let (o, n) = ($old, $new);
        while o.check(WINDOW).is_ok() {}
        while n.check(WINDOW).is_ok() {}
        both(
            concat!($name, " denying"),
            &mut || Side::new(WINDOW, 0, |t| o.check(t).is_ok()),
            &mut || Side::new(WINDOW, 0, |t| n.check(t).is_ok()),
        );
    }};
}

/// Times `new` against `old` and `old` against `new`.
fn both<O, N>(name: &str, old: &mut impl FnMut() -> Side<O>, new: &mut impl FnMut() -> Side<N>)
where
    O: FnMut(u64) -> bool,
    N: FnMut(u64) -> bool,
{
    ratio(&format!("{name}: new ÷ old"), &mut old(), &mut new());
    ratio(&format!("{name}: old ÷ new"), &mut new(), &mut old());
}

/// [`both`] for work that is not one `op(now)` (per-packet marking).
fn both_calls(name: &str, reps: u32, old: &mut impl FnMut(), new: &mut impl FnMut()) {
    ratio_calls(&format!("{name}: new ÷ old"), reps, old, new);
    ratio_calls(&format!("{name}: old ÷ new"), reps, new, old);
}

/// Per-packet marking of one flow, local (`&mut`) and shared, old against
/// new; `$meter` names the meter type, `$args` its constructor's.
macro_rules! meter {
    ($name:expr, $meter:ident, $($args:expr),+) => {{
        use new::meter::Meter as _;
        use old::meter::Meter as _;
        let o = old::meter::$meter::new($($args),+).unwrap();
        let n = new::meter::$meter::new($($args),+).unwrap();
        let (mut of, mut ot) = (old::meter::LocalFlow::new(), Traffic::new());
        let (mut nf, mut nt) = (new::meter::LocalFlow::new(), Traffic::new());
        both_calls(
            concat!($name, " mark_local, per packet"),
            1_024,
            &mut || {
                let (now, bytes) = ot.next();
                black_box(o.mark_local(&mut of, black_box(now), black_box(bytes)));
            },
            &mut || {
                let (now, bytes) = nt.next();
                black_box(n.mark_local(&mut nf, black_box(now), black_box(bytes)));
            },
        );
        let (of, mut ot) = (old::meter::Flow::new(), Traffic::new());
        let (nf, mut nt) = (new::meter::Flow::new(), Traffic::new());
        both_calls(
            concat!($name, " mark (shared flow), per packet"),
            1_024,
            &mut || {
                let (now, bytes) = ot.next();
                black_box(o.mark(&of, black_box(now), black_box(bytes)));
            },
            &mut || {
                let (now, bytes) = nt.next();
                black_box(n.mark(&nf, black_box(now), black_box(bytes)));
            },
        );
    }};
}

fn main() {
    // The shared GCRA, as `benches/gcra.rs` times it: a frozen `now`, a
    // burst that admits throughout, and an exhausted limiter.
    let (oa, na) = (
        old::Gcra::new(old::Quota::per_ticks(1, 1).with_burst(1 << 40).at_hz(HZ)),
        new::Gcra::new(new::Quota::per_ticks(1, 1).with_burst(1 << 40).at_hz(HZ)),
    );
    both(
        "Gcra::check admitting",
        &mut || Side::new(NOW, 0, |t| oa.check(t).is_ok()),
        &mut || Side::new(NOW, 0, |t| na.check(t).is_ok()),
    );
    let (od, nd) = (
        old::Gcra::new(old::Quota::per_second(10).at_hz(HZ)),
        new::Gcra::new(new::Quota::per_second(10).at_hz(HZ)),
    );
    while od.check(NOW).is_ok() {}
    while nd.check(NOW).is_ok() {}
    both(
        "Gcra::check denying",
        &mut || Side::new(NOW, 0, |t| od.check(t).is_ok()),
        &mut || Side::new(NOW, 0, |t| nd.check(t).is_ok()),
    );

    // The window family and the compositions, as `benches/family.rs`.
    use new::window as nw;
    use old::window as ow;
    limiter!(
        "FixedWindow",
        ow::FixedWindow::new(LIMIT, WINDOW),
        nw::FixedWindow::new(LIMIT, WINDOW),
        admitting
    );
    limiter!(
        "FixedWindow",
        ow::FixedWindow::new(100, WINDOW),
        nw::FixedWindow::new(100, WINDOW),
        denying
    );
    limiter!(
        "SlidingWindow",
        ow::SlidingWindow::new(LIMIT, WINDOW),
        nw::SlidingWindow::new(LIMIT, WINDOW),
        admitting
    );
    limiter!(
        "SlidingWindow",
        ow::SlidingWindow::new(100, WINDOW),
        nw::SlidingWindow::new(100, WINDOW),
        denying
    );
    limiter!(
        "SlidingLog<1024>",
        ow::SlidingLog::<1_024>::new(1_024, WINDOW),
        nw::SlidingLog::<1_024>::new(1_024, WINDOW),
        admitting
    );
    limiter!(
        "SlidingLog<64>",
        ow::SlidingLog::<64>::new(64, WINDOW),
        nw::SlidingLog::<64>::new(64, WINDOW),
        denying
    );
    limiter!(
        "WideBucketedWindow<8>",
        ow::WideBucketedWindow::<8>::new(LIMIT, WINDOW),
        nw::WideBucketedWindow::<8>::new(LIMIT, WINDOW),
        admitting
    );
    limiter!(
        "WideBucketedWindow<8>",
        ow::WideBucketedWindow::<8>::new(100, WINDOW),
        nw::WideBucketedWindow::<8>::new(100, WINDOW),
        denying
    );
    limiter!(
        "(Gcra, FixedWindow)",
        (
            old::Gcra::new(old::Quota::per_ticks(LIMIT, WINDOW).at_hz(HZ)),
            ow::FixedWindow::new(LIMIT, WINDOW)
        ),
        (
            new::Gcra::new(new::Quota::per_ticks(LIMIT, WINDOW).at_hz(HZ)),
            nw::FixedWindow::new(LIMIT, WINDOW)
        ),
        admitting
    );
    {
        use new::compose as nc;
        use old::compose as oc;
        limiter!(
            "AnyLimiter of a FixedWindow",
            oc::AnyLimiter::<1>::from_config(oc::LimiterConfig::new(
                oc::AlgorithmKind::FixedWindow,
                LIMIT,
                WINDOW,
                HZ
            ))
            .unwrap(),
            nc::AnyLimiter::<1>::from_config(nc::LimiterConfig::new(
                nc::AlgorithmKind::FixedWindow,
                LIMIT,
                WINDOW,
                HZ
            ))
            .unwrap(),
            admitting
        );
        limiter!(
            "AnyLimiter of a Gcra",
            oc::AnyLimiter::<1>::from_config(oc::LimiterConfig::new(
                oc::AlgorithmKind::Gcra,
                LIMIT,
                WINDOW,
                HZ
            ))
            .unwrap(),
            nc::AnyLimiter::<1>::from_config(nc::LimiterConfig::new(
                nc::AlgorithmKind::Gcra,
                LIMIT,
                WINDOW,
                HZ
            ))
            .unwrap(),
            admitting
        );
    }

    // Keyed tables, as `benches/keyed.rs`: a hot key in a table of 4 096
    // slots, exact (`u32`) and fingerprinted (`&str`, SipHash), admitting
    // (a burst that admits throughout) and denying (an exhausted key).
    {
        use new::keyed as nk;
        use old::keyed as ok;
        let admit_q = |b: u64| {
            (
                old::Quota::per_ticks(1, 1).with_burst(b).at_hz(HZ),
                new::Quota::per_ticks(1, 1).with_burst(b).at_hz(HZ),
            )
        };
        let (oq, nq) = admit_q(1 << 40);
        let ot = ok::KeyedBox::with_capacity(4_096, oq, ok::WhenFull::Deny, ok::Seed::new(1, 2));
        let nt = nk::KeyedBox::with_capacity(4_096, nq, nk::WhenFull::Deny, nk::Seed::new(1, 2));
        both(
            "Keyed check, u32 key, admitting",
            &mut || Side::new(NOW, 0, |t| ot.check(&7u32, t).is_ok()),
            &mut || Side::new(NOW, 0, |t| nt.check(&7u32, t).is_ok()),
        );
        both(
            "Keyed check, &str key, admitting",
            &mut || Side::new(NOW, 0, |t| ot.check("client-42", t).is_ok()),
            &mut || Side::new(NOW, 0, |t| nt.check("client-42", t).is_ok()),
        );
        let (oq, nq) = admit_q(1);
        let ot = ok::KeyedBox::with_capacity(4_096, oq, ok::WhenFull::Deny, ok::Seed::new(1, 2));
        let nt = nk::KeyedBox::with_capacity(4_096, nq, nk::WhenFull::Deny, nk::Seed::new(1, 2));
        while ot.check(&7u32, NOW).is_ok() {}
        while nt.check(&7u32, NOW).is_ok() {}
        while ot.check("client-42", NOW).is_ok() {}
        while nt.check("client-42", NOW).is_ok() {}
        both(
            "Keyed check, u32 key, denying",
            &mut || Side::new(NOW, 0, |t| ot.check(&7u32, t).is_ok()),
            &mut || Side::new(NOW, 0, |t| nt.check(&7u32, t).is_ok()),
        );
        both(
            "Keyed check, &str key, denying",
            &mut || Side::new(NOW, 0, |t| ot.check("client-42", t).is_ok()),
            &mut || Side::new(NOW, 0, |t| nt.check("client-42", t).is_ok()),
        );
    }

    // The meters, as `benches/meter.rs`: 10 Gbit/s committed, 20 peak.
    const CIR: u64 = 1_250_000_000;
    const PIR: u64 = 2_500_000_000;
    const CBS: u64 = 65_536;
    const EBS: u64 = 65_536;
    const PBS: u64 = 131_072;
    meter!("srTCM", SrTcm, CIR, CBS, EBS, HZ);
    meter!("trTCM", TrTcm, CIR, CBS, PIR, PBS, HZ);
    meter!("RFC 4115", TrTcm4115, CIR, CBS, PIR - CIR, EBS, HZ);
}
