//! The state of one flow: two words, each a bucket's TAT in its sub-ticks
//! as `2·TAT + 1` (mod 2⁶⁴, serial time; 0 is a full bucket at every `now`).
//!
//! * The words mean what the profile that marks the flow says: one profile
//!   per flow.
//! * Every change of a shared word is a compare-and-swap against a value on
//!   which the bucket's inequality was checked, leases included (`taken ≤
//!   room`; a give-back never moves a TAT before `now`).

use core::fmt;

use super::Bucket;
use crate::gcra::step;
use crate::quota::Quota;
use crate::sync::{loom_const_fn, StateWord};

loom_const_fn! {
    #[inline(always)]
    fn state_word(value: u64) -> StateWord {
        StateWord::new(value)
    }
}

/// The state of one flow, shared by `&self`: two words (16 bytes where the
/// target has 64-bit atomics), lock-free where it has a 64-bit
/// compare-and-swap, else a short critical section per word (see
/// [`sync`](crate::sync)). Both buckets full when new; one profile per flow.
///
/// ```
/// use cellrate::meter::{Color, Flow, Meter, TrTcm};
/// static FLOW: Flow = Flow::new();
/// let meter = TrTcm::new(1_000, 1_500, 2_000, 3_000, 1_000).unwrap();
/// assert_eq!(meter.mark(&FLOW, 0, 1_500), Color::Green);
/// assert_eq!(meter.mark(&FLOW, 0, 1_500), Color::Yellow);
/// assert_eq!(meter.mark(&FLOW, 0, 1_500), Color::Red);
/// ```
pub struct Flow {
    pub(super) words: [StateWord; 2],
}

impl Flow {
    loom_const_fn! {
        /// A flow with full buckets.
        ///
        /// ```
        /// use cellrate::meter::Flow;
        /// static FLOW: Flow = Flow::new();
        /// assert_eq!(FLOW.words(), [0, 0]);
        /// ```
        pub fn new() -> Self {
            Flow { words: [state_word(0), state_word(0)] }
        }
    }

    /// Makes both buckets full, each word on its own.
    ///
    /// ```
    /// use cellrate::meter::{Color, Flow, Meter, SrTcm};
    /// let meter = SrTcm::new(1_000, 1_000, 0, 1_000).unwrap();
    /// let flow = Flow::new();
    /// assert_eq!(meter.mark(&flow, 0, 1_000), Color::Green);
    /// flow.reset();
    /// assert_eq!(meter.mark(&flow, 0, 1_000), Color::Green);
    /// ```
    pub fn reset(&self) {
        self.words[0].store(0);
        self.words[1].store(0);
    }

    /// The two state words (`2·TAT + 1`, 0 for a full bucket never taken
    /// from), for inspection.
    ///
    /// ```
    /// use cellrate::meter::{Flow, Meter, TrTcm};
    /// let meter = TrTcm::new(1_000, 1_000, 1_000, 1_000, 1_000).unwrap();
    /// let flow = Flow::new();
    /// meter.mark(&flow, 0, 10);
    /// assert_eq!(flow.words(), [2 * 10 + 1, 2 * 10 + 1]); // TAT 10: 10 bytes of debt, 1 ms each
    /// ```
    pub fn words(&self) -> [u64; 2] {
        [self.words[0].load(), self.words[1].load()]
    }
}

/// Leases of bytes ([`lease::LeasedMeter`](crate::lease::LeasedMeter)).
impl Flow {
    /// Takes from `bucket` (word `which`) at `now` the largest `g ≤ most`
    /// with `g ≤ max(least, ⌊room / share⌋)`; if `room < least`, nothing,
    /// and the ticks until it holds `least` (`u64::MAX`: never).
    pub(crate) fn take_bytes(
        &self,
        bucket: &Bucket,
        which: usize,
        now: u64,
        (least, most, share): (u64, u64, u64),
    ) -> Result<u64, u64> {
        let now = bucket.now(now);
        let t = bucket.quota.emission_interval();
        let scale = bucket.quota.scale();
        self.words[which & 1].update(|tat| {
            let debt = step::debt(tat, now);
            let Some(want) = least.checked_mul(t).filter(|&w| w <= bucket.span) else {
                return Err(u64::MAX);
            };
            if debt > bucket.span - want {
                let short = debt - (bucket.span - want);
                return Err(Quota::ticks_ceil(short, scale));
            }
            let room = bucket.whole_bytes(bucket.span - debt);
            let taken = (room / share.max(1)).max(least).min(most.max(least));
            // taken ≤ room: the new TAT is at most now + S·T, within reach.
            Ok((step::later(now, debt + taken * t), taken))
        })
    }

    /// Gives `bytes` back to `bucket` (word `which`) at `now`, as
    /// [`Gcra::refund_n`](crate::Gcra::refund_n) does.
    pub(crate) fn give_back_bytes(&self, bucket: &Bucket, which: usize, now: u64, bytes: u64) {
        let now = bucket.now(now);
        let _ = self.words[which & 1].update(|tat| -> Result<(u64, ()), ()> {
            Ok((crate::gcra::refund(&bucket.quota, tat, now, bytes), ()))
        });
    }
}

impl Default for Flow {
    fn default() -> Self {
        Self::new()
    }
}

impl fmt::Debug for Flow {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Flow")
            .field("words", &self.words())
            .finish()
    }
}

#[cfg(feature = "defmt")]
impl defmt::Format for Flow {
    fn format(&self, f: defmt::Formatter) {
        let [a, b] = self.words();
        defmt::write!(f, "Flow {{ words: [{=u64}, {=u64}] }}", a, b)
    }
}

/// The state of one flow for a single owner (`&mut`, no atomics): two
/// `u64`, 16 bytes, both buckets full when new. For per-core flow tables.
///
/// ```
/// use cellrate::meter::{Color, LocalFlow, Meter, SrTcm};
/// let meter = SrTcm::new(1_000, 1_500, 1_500, 1_000).unwrap();
/// let mut flow = LocalFlow::new();
/// assert_eq!(meter.mark_local(&mut flow, 0, 1_000), Color::Green);
/// assert_eq!(meter.mark_local(&mut flow, 0, 1_000), Color::Yellow);
/// assert_eq!(meter.mark_local(&mut flow, 0, 1_000), Color::Red);
/// assert_eq!(core::mem::size_of::<LocalFlow>(), 16);
/// ```
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct LocalFlow {
    pub(super) words: [u64; 2],
}

impl LocalFlow {
    /// A flow with full buckets.
    ///
    /// ```
    /// use cellrate::meter::LocalFlow;
    /// let table = [LocalFlow::new(); 1_024]; // 16 KiB of per-core flow state
    /// assert_eq!(core::mem::size_of_val(&table), 16 * 1_024);
    /// ```
    pub const fn new() -> Self {
        LocalFlow { words: [0, 0] }
    }

    /// Makes both buckets full.
    ///
    /// ```
    /// use cellrate::meter::{LocalFlow, Meter, SrTcm};
    /// let meter = SrTcm::new(1_000, 1_000, 0, 1_000).unwrap();
    /// let mut flow = LocalFlow::new();
    /// meter.mark_local(&mut flow, 0, 500);
    /// flow.reset();
    /// assert_eq!(flow, LocalFlow::new());
    /// ```
    pub fn reset(&mut self) {
        self.words = [0, 0];
    }

    /// The two state words, as [`Flow::words`].
    ///
    /// ```
    /// use cellrate::meter::{LocalFlow, Meter, SrTcm};
    /// let meter = SrTcm::new(1_000, 1_000, 1_000, 1_000).unwrap();
    /// let mut flow = LocalFlow::new();
    /// meter.mark_local(&mut flow, 0, 10);
    /// assert_eq!(flow.words(), [21, 21]); // [C, A], TAT 10: a green takes from both
    /// ```
    pub const fn words(&self) -> [u64; 2] {
        self.words
    }
}
