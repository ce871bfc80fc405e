//! The header fields against their models: seconds rounded up, names
//! escaped or refused, every number non-negative, and a full writer an
//! error, never a panic.

/// The names a structured-field string can carry: printable ASCII.
fn printable(name: &str) -> bool {
    name.bytes().all(|b| (0x20..=0x7e).contains(&b))
}

use std::string::String;

use proptest::prelude::*;

use cellrate::{Decision, Denied, Gcra, Limited, Quota};
use cellrate_headers::*;
use core::fmt::{self, Write};

/// A fixed 8-byte buffer, to show a full writer is an error, not a panic.
struct Tiny {
    buf: [u8; 8],
    len: usize,
}
impl Write for Tiny {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        let end = self.len + s.len();
        if end > self.buf.len() {
            return Err(fmt::Error);
        }
        self.buf[self.len..end].copy_from_slice(s.as_bytes());
        self.len = end;
        Ok(())
    }
}

#[test]
fn exact_strings_for_a_two_tier_client() {
    let hz = 1_000_000;
    let burst = Quota::per_second(10).with_burst(20).at_hz(hz);
    let day = Quota::per_day(1_000).at_hz(hz);
    let (b, d) = (Gcra::new(burst), Gcra::new(day));
    let mut s = String::new();
    write_ratelimit_policy(
        &mut s,
        &[
            Policy::from_quota("burst", &burst),
            Policy::from_quota("day", &day),
        ],
        hz,
    )
    .unwrap();
    assert_eq!(s, r#""burst";q=20;w=2, "day";q=1000;w=86400"#);

    // 7 cells at t = 0.25 s.
    let now = 250_000;
    let states = [
        PolicyState::new("burst", b.check_n(now, 7)),
        PolicyState::new("day", d.check_n(now, 7)),
    ];
    s.clear();
    write_ratelimit(&mut s, &states, hz).unwrap();
    // burst: 7·0.1 s of debt → r = 13, t = ⌈0.7⌉ = 1;
    // day: 7·86.4 s = 604.8 s → r = 993, t = 605.
    assert_eq!(s, r#""burst";r=13;t=1, "day";r=993;t=605"#);
}

#[test]
fn exact_strings_for_a_denial() {
    let hz = 1_000;
    let g = Gcra::new(Quota::per_minute(2).at_hz(hz));
    g.check_n(0, 2).unwrap();
    let denied = g.check(10_000).unwrap_err(); // next cell at 30 s: 20 s to wait
    let result = Err(denied);
    let mut s = String::new();
    write_retry_after(&mut s, &denied, hz).unwrap();
    assert_eq!(s, "20");
    s.clear();
    write_ratelimit(&mut s, &[PolicyState::new("m", result)], hz).unwrap();
    assert_eq!(s, r#""m";r=0;t=50"#);
    s.clear();
    write_x_ratelimit_limit(&mut s, &result).unwrap();
    s.push(' ');
    write_x_ratelimit_remaining(&mut s, &result).unwrap();
    s.push(' ');
    write_x_ratelimit_reset(&mut s, &result, hz).unwrap();
    assert_eq!(s, "2 0 50");
}

#[test]
fn retry_after_is_never_zero_for_a_denial() {
    let mut s = String::new();
    write_retry_after(&mut s, &Denied::Limited(Limited::new(1, 0, 0)), 1_000).unwrap();
    assert_eq!(s, "1");
    s.clear();
    write_retry_after(&mut s, &Denied::Limited(Limited::new(1, 1, 1)), 1_000_000).unwrap();
    assert_eq!(s, "1");
}

#[test]
fn one_name_rule_for_the_writers_and_the_layer() {
    // The writers refuse exactly what the model refuses: printable ASCII
    // only (RFC 8941 sf-string).
    for name in [
        "api",
        "a b",
        r#"q"uote"#,
        r"back\slash",
        "~",
        "",
        "tab\t",
        "é",
        "\x7f",
    ] {
        let mut s = String::new();
        let wrote = write_ratelimit_policy(&mut s, &[Policy::new(name, 1, 1)], 1);
        assert_eq!(wrote.is_ok(), printable(name), "{name:?}");
    }
    assert!(printable(" ~") && !printable("\u{1f}"));
}

#[test]
fn names_are_escaped_or_refused() {
    let mut s = String::new();
    write_ratelimit_policy(&mut s, &[Policy::new(r#"a"b\c"#, 1, 1_000)], 1_000).unwrap();
    assert_eq!(s, r#""a\"b\\c";q=1;w=1"#);
    s.clear();
    let bad = [Policy::new("ok", 1, 1), Policy::new("tab\there", 1, 1)];
    assert_eq!(
        write_ratelimit_policy(&mut s, &bad, 1_000),
        Err(HeaderError::InvalidName)
    );
    assert!(s.is_empty(), "nothing written before the error: {s:?}");
    assert_eq!(
        write_ratelimit_policy(&mut s, &[Policy::new("é", 1, 1)], 1),
        Err(HeaderError::InvalidName)
    );
}

#[test]
fn errors_not_panics() {
    let mut s = String::new();
    let ok: Result<Decision, Denied> = Ok(Decision::new(1, 1, 1));
    assert_eq!(
        write_x_ratelimit_reset(&mut s, &ok, 0),
        Err(HeaderError::ZeroHz)
    );
    let never = Err(Denied::CostTooLarge { cost: 3, limit: 2 });
    assert_eq!(
        write_ratelimit(
            &mut s,
            &[PolicyState::new("a", ok), PolicyState::new("b", never)],
            1
        ),
        Err(HeaderError::NoRetry)
    );
    assert!(s.is_empty());
    let mut tiny = Tiny {
        buf: [0; 8],
        len: 0,
    };
    assert_eq!(
        write_ratelimit_policy(&mut tiny, &[Policy::new("long-name", 1, 1)], 1),
        Err(HeaderError::Fmt)
    );
    let mut tiny = Tiny {
        buf: [0; 8],
        len: 0,
    };
    write_x_ratelimit_limit(&mut tiny, &ok).unwrap();
    assert_eq!(&tiny.buf[..tiny.len], b"1");
}

/// Reference: the smallest whole number of seconds `s ≥ 1` with
/// `s · hz ≥ ticks`, found by counting up (obviously right, slow).
fn naive_retry_secs(ticks: u64, hz: u64) -> u64 {
    let mut s = 1u64;
    while (s as u128) * (hz as u128) < ticks as u128 {
        s += 1;
    }
    s
}

fn parse_params(s: &str) -> std::vec::Vec<(String, i128)> {
    // `"name";k=v;k=v, …` → every (k, v), parsed as signed to catch a '-'.
    let mut out = std::vec::Vec::new();
    for item in s.split(", ") {
        for param in item.split(';').skip(1) {
            let (k, v) = param.split_once('=').unwrap();
            out.push((k.into(), v.parse::<i128>().unwrap()));
        }
    }
    out
}

proptest! {
    #[test]
    fn retry_after_matches_the_naive_ceiling(ticks in 0u64..5_000_000, hz in 1u64..10_000) {
        let denied = Denied::Limited(Limited::new(1, ticks, ticks));
        let secs = retry_after_secs(&denied, hz).unwrap();
        prop_assert_eq!(secs, naive_retry_secs(ticks, hz));
    }

    /// Waiting `Retry-After` seconds is enough: the same cost is then
    /// admitted by the limiter that denied it.
    #[test]
    fn retry_after_never_understates_the_wait(
        per in 1u64..50, secs in 1u64..100, burst in 1u64..20,
        hz in prop::sample::select(std::vec![1u64, 10, 1_000, 32_768, 1_000_000]),
        fills in prop::collection::vec((0u64..5_000_000, 1u64..20), 1..20),
        cost in 1u64..20,
    ) {
        let quota = Quota::per_duration(per, core::time::Duration::from_secs(secs))
            .with_burst(burst)
            .at_hz(hz);
        let g = Gcra::new(quota);
        let mut now = 0u64;
        for (dt, c) in fills {
            now += dt % (hz * secs + 1);
            let _ = g.check_n(now, c.min(burst));
        }
        let cost = cost.min(burst);
        if let Err(denied) = g.check_n(now, cost) {
            let wait = retry_after_secs(&denied, hz).unwrap();
            prop_assert!(wait >= 1);
            prop_assert!(g.check_n(now + wait * hz, cost).is_ok(),
                "denied again after Retry-After = {} s", wait);
            // And the RateLimit `t` is no earlier than Retry-After.
            let (_, _, reset) = x_ratelimit(&Err(denied), hz).unwrap();
            prop_assert!(reset >= wait);
        }
    }

    #[test]
    fn values_are_never_negative(
        limit in 0u64..=u64::MAX, remaining in 0u64..=u64::MAX,
        reset in 0u64..=u64::MAX, retry in 0u64..=u64::MAX,
        hz in 1u64..=u64::MAX, admitted in any::<bool>(),
    ) {
        let result = if admitted {
            Ok(Decision::new(limit, remaining, reset))
        } else {
            Err(Denied::Limited(Limited::with_remaining(limit, remaining, retry, reset)))
        };
        let mut s = String::new();
        write_ratelimit(&mut s, &[PolicyState::new("p", result), PolicyState::new("q", result)], hz).unwrap();
        for (_, v) in parse_params(&s) {
            prop_assert!(v >= 0);
        }
        s.clear();
        write_ratelimit_policy(&mut s, &[Policy::new("p", limit, reset)], hz).unwrap();
        for (_, v) in parse_params(&s) {
            prop_assert!(v >= 0);
        }
        let (l, r, t) = x_ratelimit(&result, hz).unwrap();
        prop_assert_eq!(l, limit);
        prop_assert!(r <= limit);
        prop_assert!((t as u128) * (hz as u128) >= reset as u128);
        if let Err(denied) = result {
            let secs = retry_after_secs(&denied, hz).unwrap();
            prop_assert!(secs >= 1);
            prop_assert!((secs as u128) * (hz as u128) >= retry as u128);
        }
    }
}
