//! Keyed limiting: one limiter state per client (or per endpoint, or per
//! `(client, endpoint)` pair) in a table of bounded size, lock-free, that a
//! flood of new keys cannot use to reset an abuser's limit.
//!
//! The design record (why one 128-bit compare-and-swap, the layouts measured
//! and rejected, the speed history) is in `docs/design/keyed.md`; the
//! current speed figures in `docs/benchmarks.md`.
//!
//! # Layout
//!
//! A table is `capacity` [`Slot`]s of 16 bytes. A slot holds a **key word**
//! and the limiter's **state word** (one [`Algorithm`] state, e.g. a GCRA
//! TAT), read and replaced together by one 128-bit compare-and-swap: a
//! `portable_atomic::AtomicU128` on aarch64 and on x86_64 (`cmpxchg16b`,
//! inline when enabled at compile time, otherwise detected once at run
//! time), and a `u128` inside a [`critical_section`] on every other target
//! (thumbv6m/7m/7em, riscv32, wasm32, bare-metal x86_64 built without
//! `cmpxchg16b`, …), which is safe against interrupt handlers and never
//! deadlocks ([`sync`](crate::sync) makes that choice). The key word is
//!
//! | value | meaning |
//! |---|---|
//! | `0` | EMPTY: never used |
//! | `1` | TOMB: a claim that lost a race; free |
//! | `10·id` (tag `0b10`, then the 62-bit [`KeyId`]) | LIVE: the slot of `id` |
//! | `11·id` | CLAIMING: `id` is being inserted; the state word holds a unique ticket |
//!
//! **Keys.** A key of at most 61 bits ([`Key::EXACT_BITS`]: `u32`,
//! `(u32, u16)`, …) is stored exactly: `id = 2⁶¹ | key`, and two keys never
//! share a slot. A wider key (`u64`, strings, [`Hashed`]) is stored as the
//! low 61 bits of a 128-bit SipHash-1-3 under the table's secret [`Seed`]:
//! two keys share a slot only if those fingerprints collide *and* their
//! windows overlap, about `16 / 2⁶¹` per pair of live keys, and a client
//! cannot search for a collision without the seed. The home hash of a wide
//! key is the other half of that SipHash output. The home hash of an exact
//! key is a cheaper keyed mix (two folded multiplies under keys derived
//! from the seed): exact keys cannot collide and eviction is lossless
//! whatever the hash, so placement only decides *which* window a key may
//! use. What that gives up: a client who could predict homes could fill one
//! window with `W` keys it keeps owing, so that other new keys homed there
//! meet the [`WhenFull`] policy. The mix is keyed and its outputs are never
//! shown, but it is not a proven pseudo-random function: tables whose exact
//! keys come from adversaries should use [`WhenFull::Shared`] or `Deny`
//! rather than `Admit`, or wrap the key in [`Hashed`] for SipHash-1-3
//! placement. SipHash: Aumasson and Bernstein, "SipHash: a fast short-input
//! PRF", INDOCRYPT 2012; written here from the paper.
//!
//! # Probe window
//!
//! A key's **probe window** is the `W = min(16, capacity)` slots from its
//! **home** on ([`PROBE_WINDOW`]), and its home is
//! `⌊h · (capacity − W + 1) / 2⁶⁴⌋` for its keyed hash `h` (no division), so a
//! window never passes the end of the table and never wraps: a lookup reads
//! one contiguous run of at most four cache lines, the home slot first.
//! (The first and last `W − 1` slots lie in fewer windows than the others,
//! which costs a little occupancy at the two ends of the table.) Every
//! operation reads at most `W` slots per pass; a pass is repeated only when
//! a compare-and-swap lost to another thread's successful one (so the table
//! is lock-free, like any CAS loop, and a thread alone finishes in at most
//! three passes).
//!
//! # Protocol
//!
//! * **check** of `id`: find `LIVE(id)` in the window, apply
//!   [`Algorithm::check`] to its state and CAS the slot from the value read to
//!   `(LIVE(id), new state)`. The CAS fails if the key *or* the state changed,
//!   so a check never writes into a slot that another key took over. A
//!   refund is the same loop with the GCRA refund as the step.
//! * **insert** of `id` (not found): take the first slot of the window that is
//!   EMPTY, TOMB, or LIVE with an idle state ([`Algorithm::is_idle`] under that
//!   key's own algorithm), by CAS to `CLAIMING(id)` with a fresh ticket. Then
//!   **resolve**: among the CLAIMING(id) slots seen, the first in window order
//!   wins; the others are CAS-ed to TOMB, and the winner is CAS-ed to
//!   `(LIVE(id), s)`, where `s` is [`Algorithm::NEW`] charged for the
//!   request of the thread that commits it (so a key is never idle, hence
//!   never evictable, between its insertion and its first charge, and
//!   [`KeyedStats::inserted`] counts it once). Anyone inserting `id`
//!   resolves the same way, so no thread waits for another; a thread whose
//!   claim another thread committed finds `LIVE(id)` and charges it as any
//!   check does.
//! * A pass stops at the first EMPTY slot: slots never become EMPTY again and
//!   a claim always takes the first eligible slot, so no copy of a key lies
//!   beyond it.
//!
//! # Invariants
//!
//! * **One copy**: at most one slot is `LIVE(id)` at any time (claims carry
//!   unique tickets, and a claim is committed only by a thread whose pass saw
//!   no LIVE copy and removed every other claim; the loom models check it).
//! * **Lossless eviction**: a LIVE slot is reused only when its state is idle
//!   at `now` — indistinguishable from a new client's now and later. A client
//!   that still owes keeps its slot, so a flood of new keys cannot reset it.
//!   There is no background sweeper: reuse happens on insert.
//! * **Isolation**: a key's state is only ever written by a CAS whose
//!   expected value carries its own key word; a new key starts at
//!   [`Algorithm::NEW`] (charged for its first request), never at another
//!   key's state. This is why key and state share one 16-byte
//!   compare-and-swap: with an 8-byte CAS on the state word alone, a stale
//!   check of an evicted key can land in the new key's state (the loom model
//!   `rejected_split_words_protocol_lets_a_stale_check_write_another_keys_state`
//!   finds that interleaving; `docs/design/keyed.md` has the argument).
//! * **Bounded**: no allocation after construction, no panic, at most `W`
//!   slots read per pass. When the window holds no free or idle slot the
//!   table's [`WhenFull`] policy decides.
//! * Clocks: any origin and a clock that wraps past `2⁶⁴` work (states are
//!   serial, see [`gcra`](crate::gcra#serial-time)); `now` should not go
//!   backwards by more than the quota's span between threads; idleness is
//!   judged at the evicting thread's `now`, and a key checked less often
//!   than the longest gap ([`Quota::horizon_ticks`](crate::Quota::horizon_ticks))
//!   may be kept (read as owing) rather than evicted.
//!
//! # Occupancy and memory
//!
//! A table of `capacity` slots takes `16 · capacity` bytes (plus under 200
//! bytes of header: algorithm, policy, seed, counters), allocated once, so
//! bytes per tracked key are `16 · capacity / tracked ≥ 16`. How many keys
//! fit depends on the load. With the 16-slot window, keys offered in steps
//! to 131 072 slots (`tests/keyed_occupancy.rs` computes this table and
//! fails if it changes; 0.76 keys per slot is 1.3 slots per key):
//!
//! | keys offered per slot | keys tracked | slots used | bytes per tracked key |
//! |---|---|---|---|
//! | 0.50 | 99.96 % | 50.0 % | 32.0 |
//! | 0.70 | 99.28 % | 69.5 % | 23.0 |
//! | 0.76 | 98.59 % | 74.9 % | 21.4 |
//! | 0.90 | 95.29 % | 85.8 % | 18.7 |
//! | 1.00 | 91.46 % | 91.5 % | 17.5 |
//! | 1.10 | 86.69 % | 95.4 % | 16.8 |
//!
//! Size a table at 1.3 slots per key when nearly every key must be tracked,
//! 2 slots per key when every key must be. Keys that do not fit meet the
//! [`WhenFull`] policy; size the table for the clients you expect to be
//! *owing* at once (idle clients' slots are reused).
//!
//! **Cost:** a check is one keyed hash, one to `W` 16-byte loads (most keys
//! sit in their home slot) and one 16-byte compare-and-swap. On x86_64 they
//! are inline instructions when `cmpxchg16b` is enabled at compile time
//! (`-C target-cpu=x86-64-v2`, or `-C target-feature=+cmpxchg16b`); in the
//! default build portable-atomic detects it once and calls each of them
//! through a function pointer. docs/benchmarks.md has the speed of both
//! builds against `governor` (its `keyed` and `keyed-v2` tables).
//!
//! # All or nothing over several tables
//!
//! [`KeyedTable::entry`] makes one key of a table a limiter of its own
//! ([`Entry`]), which [`compose`](crate::compose)'s tuples combine like any
//! other: `(global.entry(&client), per_route.entry(&(client, route)))`
//! admits only if both admit, and a request one tier denies consumes from
//! neither (see [`Entry`]).
//!
//! # Example: per client and per (client, endpoint)
//!
//! ```
//! use cellrate::keyed::{Keyed, Seed, WhenFull};
//! use cellrate::Quota;
//!
//! // 10 requests per second per client, 1 000 clients tracked, no heap.
//! static PER_CLIENT: Keyed<Quota, 1024> = Keyed::new(
//!     Quota::per_second(10).at_hz(1_000),
//!     WhenFull::Deny,
//!     Seed::new(0x1234, 0x5678),
//! );
//! let client: u32 = 7;
//! assert!(PER_CLIENT.check(&client, 0).is_ok());
//!
//! // The same for (client, endpoint) pairs, stored exactly in 48 bits.
//! static PER_ROUTE: Keyed<Quota, 256> = Keyed::new(
//!     Quota::per_second(2).at_hz(1_000),
//!     WhenFull::Deny,
//!     Seed::new(9, 10),
//! );
//! assert!(PER_ROUTE.check(&(client, 3u16), 0).is_ok());
//! assert!(PER_ROUTE.check(&(client, 3u16), 0).is_ok());
//! assert!(PER_ROUTE.check(&(client, 3u16), 0).is_err());
//! assert!(PER_ROUTE.check(&(client, 4u16), 0).is_ok()); // another endpoint
//! ```

mod entry;
mod hash;
mod key;
mod live;
mod policy;
mod probe;
mod slot;
mod stats;
mod storage;
mod table;

pub use entry::{Entry, EntryReceipt};
pub use hash::{KeyHasher, Seed};
pub use key::{Hashed, Key, KeyId};
pub use live::LiveQuota;
pub use policy::{NoOverrides, Overrides, WhenFull};
pub use probe::PROBE_WINDOW;
pub use slot::Slot;
pub use stats::{KeyedStats, Occupancy};
pub use storage::Storage;
#[cfg(feature = "alloc")]
pub use table::KeyedBox;
pub use table::{Keyed, KeyedTable};

#[cfg(doc)]
use crate::Algorithm;

#[cfg(all(test, not(feature = "loom")))]
mod tests;

#[cfg(all(test, feature = "loom"))]
mod loom_tests;
