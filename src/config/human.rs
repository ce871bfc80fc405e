//! The human quota syntax, `"100/min, burst 20"` (grammar in the
//! [module docs](super#the-human-form)), and the functions for
//! `#[serde(with = "cellrate::config::human")]` on a [`Quota`] field: it
//! is written in the human form (`"100/min, burst 20, hz 1000000"`) and
//! read in either (in a binary format, both ways in the structured form:
//! see [the two forms](super#quotas-two-forms)).
//!
//! ```
//! use cellrate::Quota;
//! use serde::{Deserialize, Serialize};
//! #[derive(Serialize, Deserialize, PartialEq, Debug)]
//! struct Limit {
//!     #[serde(with = "cellrate::config::human")]
//!     quota: Quota,
//! }
//! let l = Limit { quota: Quota::per_minute(100).with_burst(20).at_hz(1_000) };
//! let text = serde_json::to_string(&l).unwrap();
//! assert_eq!(text, r#"{"quota":"100/min, burst 20, hz 1000"}"#);
//! assert_eq!(serde_json::from_str::<Limit>(&text).unwrap(), l);
//! ```
//!
//! A hand-written recursive-descent parser over bytes: it never allocates,
//! never panics (every index is checked, every number is parsed with
//! overflow checks) and reports the first byte it could not read.

use core::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::{Per, QuotaSpec, Unit};
use crate::Quota;

/// Writes `quota` in the human form.
pub fn serialize<S: Serializer>(quota: &Quota, s: S) -> Result<S::Ok, S::Error> {
    // A binary format carries the structured form (see `QuotaSpec`).
    QuotaSpec::from_quota(quota).serialize(s)
}

/// Reads either form (as `Quota`'s own `Deserialize`).
pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Quota, D::Error> {
    Quota::deserialize(d)
}

/// Why a human quota string could not be read.
///
/// ```
/// use cellrate::config::{ParseError, QuotaSpec};
/// let Err(ParseError::Syntax(e)) = "100/fortnight".parse::<QuotaSpec>() else { panic!() };
/// assert_eq!(e.position(), 4);
/// assert_eq!(
///     e.to_string(),
///     "quota syntax: expected a unit (ms, s, min, h, d or ticks) at byte 4 \
///      (form: <rate>/[<count>]<unit>[, burst <n>][, hz <n>])"
/// );
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SyntaxError {
    at: usize,
    expected: &'static str,
}

impl SyntaxError {
    /// An error at byte `at`, where `expected` was expected.
    ///
    /// ```
    /// use cellrate::config::SyntaxError;
    /// assert_eq!(SyntaxError::at(3, "a number").position(), 3);
    /// ```
    pub const fn at(at: usize, expected: &'static str) -> Self {
        SyntaxError { at, expected }
    }
    /// The byte offset of the first byte that could not be read.
    pub const fn position(&self) -> usize {
        self.at
    }
    /// What was expected there.
    pub const fn expected(&self) -> &'static str {
        self.expected
    }
}

impl fmt::Display for SyntaxError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "quota syntax: expected {} at byte {} (form: <rate>/[<count>]<unit>[, burst <n>][, hz <n>])",
            self.expected, self.at
        )
    }
}

impl core::error::Error for SyntaxError {}

const UNIT: &str = "a unit (ms, s, min, h, d or ticks)";

struct Cursor<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl Cursor<'_> {
    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.pos).copied()
    }
    /// Skips spaces and tabs; returns how many.
    fn blanks(&mut self) -> usize {
        let start = self.pos;
        while matches!(self.peek(), Some(b' ' | b'\t')) {
            self.pos += 1;
        }
        self.pos - start
    }
    fn number(&mut self, what: &'static str) -> Result<u64, SyntaxError> {
        let start = self.pos;
        let mut value: u64 = 0;
        while let Some(b @ b'0'..=b'9') = self.peek() {
            value = value
                .checked_mul(10)
                .and_then(|v| v.checked_add(u64::from(b - b'0')))
                .ok_or(SyntaxError::at(start, "a number below 2^64"))?;
            self.pos += 1;
        }
        if self.pos == start {
            return Err(SyntaxError::at(start, what));
        }
        Ok(value)
    }
    fn word(&mut self) -> &str {
        let start = self.pos;
        while matches!(self.peek(), Some(b'a'..=b'z')) {
            self.pos += 1;
        }
        // Only ASCII letters were taken, so this is valid UTF-8.
        core::str::from_utf8(&self.bytes[start..self.pos]).unwrap_or("")
    }
    fn eat(&mut self, byte: u8, what: &'static str) -> Result<(), SyntaxError> {
        if self.peek() == Some(byte) {
            self.pos += 1;
            Ok(())
        } else {
            Err(SyntaxError::at(self.pos, what))
        }
    }
    /// `period = [count blanks] unit`
    fn period(&mut self) -> Result<Per, SyntaxError> {
        let count = if matches!(self.peek(), Some(b'0'..=b'9')) {
            let n = self.number("a number")?;
            self.blanks();
            n
        } else {
            1
        };
        let at = self.pos;
        let unit = Unit::from_word(self.word()).ok_or(SyntaxError::at(at, UNIT))?;
        Ok(Per::new(count, unit))
    }
    /// `blanks1 number` after a keyword.
    fn keyword_value(&mut self) -> Result<u64, SyntaxError> {
        if self.blanks() == 0 {
            return Err(SyntaxError::at(self.pos, "a space"));
        }
        self.number("a number")
    }
}

/// Parses the human form (syntax only: the values are checked by
/// [`QuotaSpec::check`]).
pub(crate) fn parse(text: &str) -> Result<QuotaSpec, SyntaxError> {
    let mut c = Cursor {
        bytes: text.as_bytes(),
        pos: 0,
    };
    c.blanks();
    let rate = c.number("a number of cells")?;
    c.blanks();
    c.eat(b'/', "'/'")?;
    c.blanks();
    let per = c.period()?;
    let mut spec = QuotaSpec::new(rate, per);
    // Clauses in order: burst, then hz; each at most once.
    let mut next = 0;
    loop {
        c.blanks();
        match c.peek() {
            None => return Ok(spec),
            Some(b',') => c.pos += 1,
            Some(_) => return Err(SyntaxError::at(c.pos, "',' or the end")),
        }
        c.blanks();
        let at = c.pos;
        match c.word() {
            "burst" if next == 0 => {
                spec.burst = Some(c.keyword_value()?);
                next = 1;
            }
            "hz" if next <= 1 => {
                spec.hz = Some(c.keyword_value()?);
                next = 2;
            }
            _ => {
                let expected = match next {
                    0 => "'burst' or 'hz'",
                    1 => "'hz'",
                    _ => "the end",
                };
                return Err(SyntaxError::at(at, expected));
            }
        }
    }
}

/// Parses a period alone (`"min"`, `"10s"`, `"1000 ticks"`), as the
/// structured form's `per` field holds it.
pub(crate) fn parse_per(text: &str) -> Result<Per, SyntaxError> {
    let mut c = Cursor {
        bytes: text.as_bytes(),
        pos: 0,
    };
    c.blanks();
    let per = c.period()?;
    c.blanks();
    match c.peek() {
        None => Ok(per),
        Some(_) => Err(SyntaxError::at(c.pos, "the end")),
    }
}

impl fmt::Display for Per {
    /// The canonical spelling: `min`, `10s`, `250ms`, `ticks`, `1000 ticks`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let unit = self.unit().as_str();
        match (self.count(), self.unit()) {
            (1, _) => f.write_str(unit),
            (n, Unit::Tick) => write!(f, "{n} {unit}"),
            (n, _) => write!(f, "{n}{unit}"),
        }
    }
}

impl fmt::Display for QuotaSpec {
    /// The canonical human form: `100/min`, `100/min, burst 20`,
    /// `3/10s, hz 1000`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.rate, self.per)?;
        if let Some(b) = self.burst {
            write!(f, ", burst {b}")?;
        }
        if let Some(hz) = self.hz {
            write!(f, ", hz {hz}")?;
        }
        Ok(())
    }
}
