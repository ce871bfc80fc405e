//! The Lua scripts, composed from `lua/*.lua` with `include_str!`, and their
//! handles.
//!
//! Every script is `lua/common.lua` followed by its own file. `common.lua`
//! holds the one GCRA step and everything each script shares: reading a
//! stored TAT, `TAT − now` in sub-ticks, splitting sub-ticks into whole
//! microseconds and a fraction, the one integer formatter and the one
//! write of a TAT with its expiry. So the scripts cannot drift: a rule
//! written once is the rule of every script (the redis tests replay every
//! script's decisions on a local [`Gcra`](cellrate::Gcra) to check it).
//!
//! The two batch scripts (check and tiers) put `lua/batch.lua` before
//! their own file: their arguments, one read of every key and one write of
//! every changed key. The tiers script (policies with a window tier) also
//! adds `lua/window.lua` and one `lua/step_*.lua` per window algorithm.
//!
//! The contract of each script (keys, arguments, reply) is on its constant
//! below; the math and the integer bounds are in the [crate docs](crate)
//! and, with their proofs, in docs/design/redis.md in the repository.
//! A script is sent by its SHA1 (`EVALSHA`) and loaded with `SCRIPT LOAD`
//! when the server answers `NOSCRIPT` (after a restart, a `SCRIPT FLUSH`, a
//! failover).

/// The single check script: one request of a one-tier policy, the common
/// case of [`RedisGcra::check_n`](super::RedisGcra::check_n) and the async client, with no tables and no
/// loops. KEYS: the key. ARGV: cost, `T`, span, scale. Returns `[now, v]`,
/// `v` as in the check script, or `[now, 0, 1]` when the key holds no TAT.
pub(crate) const SINGLE_SCRIPT: &str = concat!(
    include_str!("lua/common.lua"),
    include_str!("lua/single.lua")
);

/// The check script: `n ≥ 1` requests of one policy decided in order at one
/// server time. KEYS: `m` per request (request `r`'s tier `i` is key
/// `(r − 1)·m + i`). ARGV: `m`, then `Tᵢ`, `spanᵢ`, `scaleᵢ` per tier, then
/// one cost per request, or a single cost for all of them. Returns
/// `[now, vᵣᵢ …, bad …]`, one value per key: `TAT − now` (sub-ticks) after
/// the request if it was admitted (or is a peek that fits), else
/// `−1 − (TAT − now)` before it; then the 1-based index of every key that
/// holds no TAT (see [`Error::CorruptKey`](crate::Error::CorruptKey)).
pub(crate) const CHECK_SCRIPT: &str = concat!(
    include_str!("lua/common.lua"),
    include_str!("lua/batch.lua"),
    include_str!("lua/check.lua")
);

/// The lease script (one request; [`lease`](crate::lease) only). KEYS: one per tier.
/// ARGV: cost, mode (0: all or nothing; 1: up to `cost`, at least 1 — a
/// lease), refund (cells given back to each tier first), then `Tᵢ`,
/// `spanᵢ`, `scaleᵢ` per tier. Returns `[granted, now, aheadᵢ, waitᵢ, …]`:
/// cells granted (0 = denied), server µs, and per tier `TAT − now`
/// (sub-ticks) after the call and, when nothing was granted, the wait for
/// the request (for a lease: for one cell); or `[−1, now, i]` when key `i`
/// holds no TAT (nothing is written then).
pub(crate) const LEASE_SCRIPT: &str = concat!(
    include_str!("lua/common.lua"),
    include_str!("lua/lease.lua")
);

/// The tiers script: the check script for a policy with any window tier,
/// each tier deciding by its own algorithm's step (one file per step,
/// after `lua/window.lua`, what they share). KEYS as the check script.
/// ARGV: `m`, then per tier its kind (0 GCRA, 1 fixed, 2 sliding,
/// 3 bucketed window, 4 sliding log) and three parameters, then the costs
/// as the check script. Returns `[now, (fits, x, y, z) per key …, bad …]`:
/// per key whether the request fits that tier and, for GCRA, `x = TAT −
/// now`; for a window, `x` = remaining, `y` = reset_after, `z` =
/// retry_after (µs): after the request if it was admitted, before it if
/// not. See `lua/tiers.lua`.
pub(crate) const TIERS_SCRIPT: &str = concat!(
    include_str!("lua/common.lua"),
    include_str!("lua/window.lua"),
    include_str!("lua/step_fixed.lua"),
    include_str!("lua/step_sliding.lua"),
    include_str!("lua/step_bucketed.lua"),
    include_str!("lua/step_log.lua"),
    include_str!("lua/batch.lua"),
    include_str!("lua/tiers.lua")
);

/// A function returning a script, hashed once for the process.
macro_rules! script {
    ($(#[$doc:meta])* $name:ident = $source:expr) => {
        $(#[$doc])*
        pub(crate) fn $name() -> &'static ::redis::Script {
            static CELL: std::sync::OnceLock<::redis::Script> = std::sync::OnceLock::new();
            CELL.get_or_init(|| ::redis::Script::new($source))
        }
    };
}

script!(
    /// The single check script.
    single_script = SINGLE_SCRIPT
);
script!(
    /// The check script.
    check_script = CHECK_SCRIPT
);
script!(
    /// The tiers script.
    tiers_script = TIERS_SCRIPT
);
script!(
    /// The lease script.
    lease_script = LEASE_SCRIPT
);

/// Whether a failed reply is the server saying it does not know the script.
pub(crate) fn is_noscript(e: &::redis::RedisError) -> bool {
    e.kind() == ::redis::ErrorKind::Server(::redis::ServerErrorKind::NoScript)
}
