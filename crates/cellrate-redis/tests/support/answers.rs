//! What the replay tests compare: a result as numbers, and their
//! deterministic pseudo-random stream.

use cellrate::{Decision, Denied};

/// What a result says, as numbers: admitted, limit, remaining,
/// reset_after, retry_after (`None` when admitted or never).
pub fn seen(r: &Result<Decision, Denied>) -> (bool, u64, u64, u64, Option<u64>) {
    match r {
        Ok(d) => (true, d.limit(), d.remaining(), d.reset_after(), None),
        Err(Denied::Limited(l)) => (
            false,
            l.limit(),
            l.remaining(),
            l.reset_after(),
            Some(l.retry_after()),
        ),
        Err(d) => (false, d.limit(), 0, 0, d.retry_after()),
    }
}

/// A deterministic pseudo-random stream (xorshift64).
pub fn rng(mut seed: u64) -> impl FnMut() -> u64 {
    move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    }
}
