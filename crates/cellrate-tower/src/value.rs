//! Header values written once and shared: the buffer a value is written
//! into and then owns (one allocation, no copy), the values of small
//! integers (made once per process), and the `RateLimit` values of a
//! one-tier layer (made once per state).

use core::fmt::{self, Write};

use cellrate_headers as headers;
use http::header::{HeaderName, HeaderValue};

use crate::TierInfo;

/// One header value, written straight into the buffer the value will own
/// (one allocation, no copy).
pub(crate) struct ValueBuf {
    pub(crate) buf: bytes::BytesMut,
}

impl ValueBuf {
    pub(crate) fn with_capacity(capacity: usize) -> Self {
        ValueBuf {
            buf: bytes::BytesMut::with_capacity(capacity),
        }
    }
    pub(crate) fn value(self) -> Option<HeaderValue> {
        HeaderValue::from_maybe_shared(self.buf.freeze()).ok()
    }
}

impl Write for ValueBuf {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        self.buf.extend_from_slice(s.as_bytes());
        Ok(())
    }
}

/// Header values for the integers `0..SMALL`, made once per process: the
/// `X-RateLimit-*` and `Retry-After` values are almost always small, and a
/// value from this table is a shared static, not an allocation.
pub(crate) const SMALL: u64 = 4_096;

pub(crate) fn number(n: u64) -> HeaderValue {
    static TABLE: std::sync::OnceLock<Vec<HeaderValue>> = std::sync::OnceLock::new();
    let table = TABLE.get_or_init(|| {
        let mut text = String::new();
        let mut ends = Vec::with_capacity(SMALL as usize);
        for i in 0..SMALL {
            let _ = write!(text, "{i}");
            ends.push(text.len());
        }
        let text: &'static str = Box::leak(text.into_boxed_str());
        let mut start = 0;
        ends.into_iter()
            .map(|end| {
                let v = HeaderValue::from_static(&text[start..end]);
                start = end;
                v
            })
            .collect()
    });
    match table.get(n as usize) {
        Some(v) if n < SMALL => v.clone(),
        _ => HeaderValue::from(n),
    }
}

pub(crate) const RATELIMIT_POLICY: HeaderName = HeaderName::from_static("ratelimit-policy");
pub(crate) const RATELIMIT: HeaderName = HeaderName::from_static("ratelimit");
pub(crate) const X_LIMIT: HeaderName = HeaderName::from_static("x-ratelimit-limit");
pub(crate) const X_REMAINING: HeaderName = HeaderName::from_static("x-ratelimit-remaining");
pub(crate) const X_RESET: HeaderName = HeaderName::from_static("x-ratelimit-reset");

/// The `RateLimit` values of a one-tier layer, made once per `(r, t)`:
/// `r ≤ q` and `t ≤ w` (whole seconds) take at most `(q + 1)(w + 1)`
/// values, and when that is at most [`RateTable::MAX`] a response shares
/// the value made for the first response with the same state instead of
/// formatting and allocating its own.
pub(crate) struct RateTable {
    pub(crate) limit: u64,
    pub(crate) window: u64,
    pub(crate) values: Box<[std::sync::OnceLock<Option<HeaderValue>>]>,
}

impl RateTable {
    /// The most values a table holds (each a few dozen bytes once made).
    pub(crate) const MAX: u64 = 4_096;

    pub(crate) fn new(tiers: &[TierInfo]) -> Option<Self> {
        let [tier] = tiers else { return None };
        let window = headers::seconds_ceil(tier.window_ticks, tier.hz).ok()?;
        let size = tier
            .limit
            .checked_add(1)?
            .checked_mul(window.checked_add(1)?)?;
        if size > Self::MAX {
            return None;
        }
        Some(RateTable {
            limit: tier.limit,
            window,
            values: (0..size).map(|_| std::sync::OnceLock::new()).collect(),
        })
    }

    /// The value for the state `(remaining, t)` (`t` in whole seconds),
    /// made by `make` the first time.
    pub(crate) fn get(
        &self,
        remaining: u64,
        t: u64,
        make: impl FnOnce() -> Option<HeaderValue>,
    ) -> Option<HeaderValue> {
        if remaining > self.limit || t > self.window {
            return make();
        }
        let slot = self
            .values
            .get((remaining * (self.window + 1) + t) as usize);
        match slot {
            Some(slot) => slot.get_or_init(make).clone(),
            None => make(),
        }
    }
}
