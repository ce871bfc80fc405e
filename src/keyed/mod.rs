//! Keyed limiting: one limiter state per client (or per endpoint, or per
//! `(client, endpoint)` pair) in a table of bounded size, lock-free, that a
//! flood of new keys cannot use to reset an abuser's limit.
//!
//! A table is `capacity` [`Slot`]s of 16 bytes: a key word and one
//! [`Algorithm`] state word, read and replaced together by one 128-bit
//! compare-and-swap (native where the target has it, a [`critical_section`]
//! otherwise; [`sync`](crate::sync) chooses). A key of at most
//! [`Key::EXACT_BITS`] bits is stored exactly; a wider one ([`Hashed`],
//! strings, `u64`) as a SipHash-1-3 fingerprint under the table's secret
//! [`Seed`]. A key lives in the [`PROBE_WINDOW`] slots from its keyed home.
//! The layout, the probe and insert protocol and why the slot is one 16-byte
//! compare-and-swap are in docs/design/keyed.md in the repository.
//!
//! # Invariants
//!
//! * **One copy**: at most one slot holds a given key at any time.
//! * **Lossless eviction**: a slot is reused only when its state is idle at
//!   `now`; a client that still owes keeps its slot, so a flood of new keys
//!   cannot reset it. Reuse happens on insert; there is no sweeper.
//! * **Isolation**: a key's state is only written by a compare-and-swap that
//!   expects its own key word; a new key starts at [`Algorithm::NEW`],
//!   charged for its first request.
//! * **Bounded**: no allocation after construction, no panic, at most
//!   [`PROBE_WINDOW`] slots read per pass. When no slot is free or idle the
//!   table's [`WhenFull`] policy decides.
//! * Clocks: any origin, and a clock that wraps past `2⁶⁴` (states are
//!   serial, see [serial time](crate::Gcra#serial-time)). A key checked less often
//!   than [`Quota::horizon_ticks`](crate::Quota::horizon_ticks) may be kept
//!   rather than evicted. Exact keys from adversaries: prefer
//!   [`WhenFull::Shared`] or `Deny` to `Admit`, or wrap them in [`Hashed`].
//!
//! # Occupancy and memory
//!
//! `16 · capacity` bytes plus a small header, allocated once. Size it at 1.3
//! slots per key owing at once when nearly every key must be tracked, 2 when
//! every key must be (docs/design/keyed.md). [`KeyedTable::entry`] makes one
//! key a limiter of its own ([`Entry`]) for [`compose`](crate::compose).
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
//! // (client, endpoint) pairs, stored exactly in 48 bits.
//! static PER_ROUTE: Keyed<Quota, 256> =
//!     Keyed::new(Quota::per_second(2).at_hz(1_000), WhenFull::Deny, Seed::new(9, 10));
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
mod rewrite;
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
