//! The header writers over any decision, denial, policy name and
//! frequency: never a panic; what they write is well formed (digits, or a
//! printable-ASCII sf-string followed by its parameters), and a refusal
//! writes nothing.
#![no_main]

use arbitrary::Arbitrary;
use cellrate_headers::{
    write_ratelimit, write_ratelimit_policy, write_retry_after, write_x_ratelimit_limit,
    write_x_ratelimit_remaining, write_x_ratelimit_reset, x_ratelimit, Policy, PolicyState,
};
use cellrate::{Decision, Denied, Limited};
use libfuzzer_sys::fuzz_target;

#[derive(Arbitrary, Debug)]
enum Outcome {
    Admitted(u64, u64, u64),
    Limited(u64, u64, u64),
    TooLarge(u64, u64),
}

#[derive(Arbitrary, Debug)]
struct Input {
    hz: u64,
    names: Vec<String>,
    outcomes: Vec<Outcome>,
    windows: Vec<u64>,
}

fn result(o: &Outcome) -> Result<Decision, Denied> {
    match *o {
        Outcome::Admitted(limit, remaining, reset) => Ok(Decision::new(limit, remaining, reset)),
        Outcome::Limited(limit, retry, reset) => Err(Denied::Limited(Limited::new(limit, retry, reset))),
        Outcome::TooLarge(cost, limit) => Err(Denied::CostTooLarge { cost, limit }),
    }
}

fn digits(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit())
}

fuzz_target!(|input: Input| {
    let n = input.names.len().min(input.outcomes.len()).min(8);
    let results: Vec<_> = input.outcomes[..n].iter().map(result).collect();
    for r in &results {
        let mut s = String::new();
        if write_x_ratelimit_limit(&mut s, r).is_ok() {
            assert!(digits(&s));
        }
        let mut s = String::new();
        match write_x_ratelimit_remaining(&mut s, r) {
            Ok(()) => assert!(digits(&s)),
            Err(_) => assert!(s.is_empty()),
        }
        let mut s = String::new();
        match write_x_ratelimit_reset(&mut s, r, input.hz) {
            Ok(()) => assert!(digits(&s)),
            Err(_) => assert!(s.is_empty()),
        }
        if let Ok((_, remaining, _)) = x_ratelimit(r, input.hz) {
            let limit = match r {
                Ok(d) => d.limit(),
                Err(d) => d.limit(),
            };
            let _ = (remaining, limit);
        }
        if let Err(d) = r {
            let mut s = String::new();
            match write_retry_after(&mut s, d, input.hz) {
                Ok(()) => assert!(digits(&s) && s != "0"),
                Err(_) => assert!(s.is_empty()),
            }
        }
    }
    let states: Vec<_> = input.names[..n]
        .iter()
        .zip(&results)
        .map(|(name, r)| PolicyState::new(name, *r))
        .collect();
    let mut s = String::new();
    match write_ratelimit(&mut s, &states, input.hz) {
        Ok(()) => assert!(s.bytes().all(|b| (0x20..=0x7e).contains(&b))),
        Err(_) => assert!(s.is_empty()),
    }
    let policies: Vec<_> = input.names[..n]
        .iter()
        .zip(input.windows.iter().chain(core::iter::repeat(&0)))
        .zip(&results)
        .map(|((name, w), r)| {
            let limit = match r {
                Ok(d) => d.limit(),
                Err(d) => d.limit(),
            };
            Policy::new(name, limit, *w)
        })
        .collect();
    let mut s = String::new();
    match write_ratelimit_policy(&mut s, &policies, input.hz) {
        Ok(()) => assert!(s.bytes().all(|b| (0x20..=0x7e).contains(&b))),
        Err(_) => assert!(s.is_empty()),
    }
});
