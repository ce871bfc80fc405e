//! The Lua scripts, composed from `lua/*.lua` with `include_str!`, and their
//! handles.
//!
//! Every script but the fixed, sliding and bucketed windows' one-tier
//! scripts starts with `lua/common.lua` (the clock, the one integer
//! formatter, the exact quotient). The GCRA scripts follow it with
//! `lua/gcra.lua`, the one GCRA step: reading a stored TAT, `TAT − now` in
//! sub-ticks, splitting sub-ticks into whole microseconds and a fraction,
//! the one write of a TAT with its expiry. So the scripts cannot drift: a
//! rule written once is the rule of every script (the redis tests replay
//! every script's decisions on a local [`Gcra`](cellrate::Gcra), and every
//! window script's on the in-process window, to check it).
//!
//! The batch scripts (check, tiers, and the one-tier window scripts'
//! second half) put `lua/batch.lua` before their own file: their
//! arguments, one read of every key and one write of every changed key.
//! The tiers script (policies of several tiers with a window among them)
//! adds `lua/window.lua` and one `lua/step_*.lua` per window algorithm; a
//! policy of one window tier runs that algorithm's one-tier script:
//! `common.lua`, `window.lua`, its `step_*.lua` and `lua/one.lua`, which
//! decides one request with nothing else defined, then, for several
//! requests, `gcra.lua`, `batch.lua` and `lua/one_batch.lua` (Lua runs a
//! script's definitions as statements, so a single check never pays for
//! the batch's). The fixed, sliding and bucketed windows put
//! `lua/flat_*.lua` first: their rule written out straight, with no
//! function or table made before the decision, for one request or a batch
//! whose keys hold what that limiter writes on its base parameters
//! (absent or untagged); anything else leaves it, before any write, for
//! the general code after it (the `flat_tests` module checks that both
//! answer the same, on stored states of every kind, at fixed times).
//!
//! The contract of each script (keys, arguments, reply) heads its own Lua
//! file; the math and the integer bounds are in the [crate docs](crate)
//! and, with their proofs, in docs/design/redis.md in the repository.
//! A script is sent by its SHA1 (`EVALSHA`) and loaded with `SCRIPT LOAD`
//! when the server answers `NOSCRIPT` (after a restart, a `SCRIPT FLUSH`, a
//! failover).

/// A function returning the script made of the `lua/` files `parts`,
/// hashed once for the process.
macro_rules! script {
    ($(#[$doc:meta])* $name:ident = [$($part:literal),+]) => {
        $(#[$doc])*
        pub(crate) fn $name() -> &'static ::redis::Script {
            static CELL: std::sync::OnceLock<::redis::Script> = std::sync::OnceLock::new();
            CELL.get_or_init(|| {
                ::redis::Script::new(concat!($(include_str!(concat!("lua/", $part))),+))
            })
        }
    };
}

script!(
    /// The single check script (`lua/single.lua`): one request of a
    /// one-tier GCRA policy, with no tables and no loops.
    single_script = ["common.lua", "gcra.lua", "single.lua"]
);
script!(
    /// The check script (`lua/check.lua`): any number of requests of a
    /// policy whose tiers are all GCRA, at one server time.
    check_script = ["common.lua", "gcra.lua", "batch.lua", "check.lua"]
);
script!(
    /// The tiers script (`lua/tiers.lua`): the check script for a policy
    /// with any window tier, each tier deciding by its algorithm's step.
    tiers_script = [
        "common.lua",
        "gcra.lua",
        "window.lua",
        "step_fixed.lua",
        "step_sliding.lua",
        "step_bucketed.lua",
        "step_log.lua",
        "batch.lua",
        "tiers.lua"
    ]
);
script!(
    /// The lease script (`lua/lease.lua`; [`lease`](crate::lease) only): a
    /// refund, then up to `cost` cells (a lease) or all or nothing.
    lease_script = ["common.lua", "gcra.lua", "lease.lua"]
);

/// A one-tier window script: `lua/$flat` when given (the common path,
/// written straight through), then `lua/one.lua` deciding by the step
/// table `$table` of `lua/$step` (bound to `alg`); `$source` is its text.
macro_rules! one_tier_script {
    ($(#[$doc:meta])* $name:ident, $source:ident = $step:literal, $table:literal $(, flat $flat:literal)?) => {
        const $source: &str = concat!(
            $(include_str!(concat!("lua/", $flat)),)?
            include_str!("lua/common.lua"),
            include_str!("lua/window.lua"),
            include_str!(concat!("lua/", $step)),
            "local alg = ",
            $table,
            "\n",
            include_str!("lua/one.lua"),
            include_str!("lua/gcra.lua"),
            include_str!("lua/batch.lua"),
            include_str!("lua/one_batch.lua")
        );
        $(#[$doc])*
        pub(crate) fn $name() -> &'static ::redis::Script {
            static CELL: std::sync::OnceLock<::redis::Script> = std::sync::OnceLock::new();
            CELL.get_or_init(|| ::redis::Script::new($source))
        }
    };
}

one_tier_script!(
    /// A policy of one fixed-window tier.
    fixed_script, FIXED = "step_fixed.lua", "fixed", flat "flat_fixed.lua"
);
one_tier_script!(
    /// A policy of one sliding-window tier.
    sliding_script, SLIDING = "step_sliding.lua", "sliding", flat "flat_sliding.lua"
);
one_tier_script!(
    /// A policy of one bucketed-window tier.
    bucketed_script, BUCKETED = "step_bucketed.lua", "bucketed", flat "flat_bucketed.lua"
);
one_tier_script!(
    /// A policy of one sliding-log tier.
    log_script, LOG = "step_log.lua", "log"
);

/// Whether a failed reply is the server saying it does not know the script.
pub(crate) fn is_noscript(e: &::redis::RedisError) -> bool {
    e.kind() == ::redis::ErrorKind::Server(::redis::ServerErrorKind::NoScript)
}

#[cfg(test)]
mod flat_tests;
