//! Configuration with serde (feature `serde`): quotas in a structured and a
//! human form, the algorithm kind, [`LimiterConfig`](crate::LimiterConfig), keyed tables with
//! their overrides, and named tiers (the HTTP layer's rules, built on
//! these, are `cellrate-tower`'s `config`).
//!
//! ```
//! use cellrate::config::{self, QuotaSpec, TierSpec};
//! use serde::Deserialize;
//!
//! #[derive(Deserialize)]
//! struct Limits {
//!     hz: u64,
//!     tiers: Vec<TierSpec>,
//! }
//!
//! let text = r#"
//! hz = 1_000_000
//! tiers = [
//!     { name = "second", quota = "10/s, burst 20" },
//!     { name = "hour", quota = { rate = 5000, per = "h", burst = 100 } },
//! ]
//! "#;
//! let limits: Limits = config::from_deserializer(toml::Deserializer::parse(text).unwrap()).unwrap();
//! let tiers = config::build_tiers(&limits.tiers, limits.hz).unwrap();
//! assert_eq!(tiers[1].1.quota().burst(), 100);
//! assert_eq!(limits.tiers[0].quota, "10/s, burst 20".parse::<QuotaSpec>().unwrap());
//! ```
//!
//! # Quotas: two forms
//!
//! A [`QuotaSpec`] is what a file says about a quota, before a tick
//! frequency is chosen; [`QuotaSpec::quota`] builds the [`Quota`]. Both
//! forms read into the same value, and either may appear wherever a quota
//! is expected (a string is read as the human form, a table/object as the
//! structured one). A binary format that does not describe itself
//! (`is_human_readable()` false, such as postcard) cannot tell a reader
//! which form follows, so there every quota is written and read in the
//! structured form, whatever the field asks for:
//!
//! | structured | human |
//! |---|---|
//! | `{ rate = 100, per = "min", burst = 20 }` | `"100/min, burst 20"` |
//! | `{ rate = 10, per = "s" }` | `"10/s"` |
//! | `{ rate = 3, per = "10s", hz = 1000 }` | `"3/10s, hz 1000"` |
//! | `{ rate = 1, per = "250 ticks" }` | `"1/250 ticks"` |
//!
//! Structured fields (no others are accepted):
//!
//! | field | type | meaning |
//! |---|---|---|
//! | `rate` | integer ≥ 1 | cells admitted per period |
//! | `per` | string, a *period* as below | the period |
//! | `burst` | integer ≥ 1, optional | cells admitted at once from full; default `rate` (as [`Quota::per_second`] and friends) |
//! | `hz` | integer ≥ 1, optional | ticks per second of the clock that supplies `now`; default: the context's |
//!
//! ## The human form
//!
//! ```text
//! quota   = blanks number blanks "/" blanks period [clause-b] [clause-h] blanks
//! clause-b = blanks "," blanks "burst" blanks1 number
//! clause-h = blanks "," blanks "hz" blanks1 number
//! period  = [number blanks] unit
//! unit    = "ms"                                   ; 10⁻³ s
//!         | "s" | "sec" | "second" | "seconds"     ; 1 s
//!         | "min" | "minute" | "minutes"           ; 60 s
//!         | "h" | "hour" | "hours"                 ; 3 600 s
//!         | "d" | "day" | "days"                   ; 86 400 s
//!         | "tick" | "ticks"                       ; one tick of the clock
//! number  = 1*("0"-"9")                            ; decimal, below 2⁶⁴
//! blanks  = *(" " | TAB)      blanks1 = 1*(" " | TAB)
//! ```
//!
//! Lower case only; the clauses come in this order, each at most once. A
//! unit word is read whole (`"10sec"` is 10 s, `"10secs"` is an error).
//! Written back ([`Display`](core::fmt::Display)), a spec takes its
//! canonical spelling: the short unit name, the count only when it is not
//! 1, the clauses it has: `"100/min, burst 20"`, `"3/10s, hz 1000"`,
//! `"1/250 ticks"`.
//!
//! ## Tick frequency
//!
//! A spec's own `hz` wins; without it the quota is built at the frequency
//! of its context: the `hz` argument of [`QuotaSpec::quota`],
//! [`build_tiers`] or [`KeyedSpec::build`], the layer's clock in
//! `cellrate-tower`. A bare [`Quota`] read on its own (its own
//! `Deserialize`) uses [`DEFAULT_HZ`], the nanosecond clock of
//! [`StdClock`](crate::time::StdClock).
//!
//! # From a spec to a quota
//!
//! The rate becomes a [`Rate`] and then a [`Quota`] through
//! [`Quota::from_rate`]: the emission interval is exact in sub-ticks where
//! the longest-gap bound allows and otherwise rounded toward admitting less,
//! as [`Quota`] does. A quota written back ([`QuotaSpec::from_quota`]) reads
//! back as the same emission interval, burst and frequency. The arithmetic
//! is in docs/design/quota.md in the repository.
//!
//! # Errors name the place
//!
//! [`from_deserializer`] reads any serde format and reports where a bad
//! value is, with the crate's own error texts: `tiers[1].quota: quota: the
//! burst is zero`. The checks that need the tick frequency run when the
//! limiters are built ([`build_tiers`], [`KeyedSpec::build`]) and name the
//! same places, from their own spec down ([`Error::within`] puts the
//! spec's own place in front: `tables[2].capacity`). Nothing here panics
//! on any input.
//!
//! ```
//! use cellrate::config::{self, TierSpec};
//! let json = r#"[{"name": "a", "quota": "10/s"}, {"name": "b", "quota": "10/s, burst 0"}]"#;
//! let err = config::from_deserializer::<Vec<TierSpec>, _>(
//!     &mut serde_json::Deserializer::from_str(json),
//! )
//! .unwrap_err();
//! // serde_json adds where the value ends in the text
//! assert_eq!(err.to_string(), "[1].quota: quota: the burst is zero at line 1 column 71");
//! assert_eq!(err.path(), "[1].quota");
//! ```

pub mod human;

use alloc::collections::BTreeMap;
use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec::Vec;
use core::fmt;
use core::str::FromStr;
use core::time::Duration;

use serde::de::{self, Deserializer, MapAccess, Visitor};
use serde::ser::Serializer;
use serde::{Deserialize, Serialize};

use crate::keyed::{KeyId, KeyedBox, LiveQuota, Seed, WhenFull};
use crate::{Gcra, Quota, QuotaError, Rate};

pub use human::SyntaxError;

/// The tick frequency of a [`Quota`] read without context: 10⁹ Hz, the
/// nanosecond clock of [`StdClock`](crate::time::StdClock).
pub const DEFAULT_HZ: u64 = crate::compose::any::DEFAULT_HZ;

/// The unit of a [`Per`].
///
/// ```
/// use cellrate::config::Unit;
/// assert_eq!(Unit::Minute.as_str(), "min");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Unit {
    /// 10⁻³ s (`ms`).
    Millisecond,
    /// 1 s (`s`, `sec`, `second`, `seconds`).
    Second,
    /// 60 s (`min`, `minute`, `minutes`).
    Minute,
    /// 3 600 s (`h`, `hour`, `hours`).
    Hour,
    /// 86 400 s (`d`, `day`, `days`).
    Day,
    /// One tick of the limiter's clock (`tick`, `ticks`).
    Tick,
}

impl Unit {
    /// Every unit, shortest first.
    pub const ALL: [Unit; 6] = [
        Unit::Millisecond,
        Unit::Second,
        Unit::Minute,
        Unit::Hour,
        Unit::Day,
        Unit::Tick,
    ];
    /// The canonical (shortest) name.
    pub const fn as_str(&self) -> &'static str {
        match self {
            Unit::Millisecond => "ms",
            Unit::Second => "s",
            Unit::Minute => "min",
            Unit::Hour => "h",
            Unit::Day => "d",
            Unit::Tick => "ticks",
        }
    }
    fn from_word(word: &str) -> Option<Unit> {
        Some(match word {
            "ms" => Unit::Millisecond,
            "s" | "sec" | "second" | "seconds" => Unit::Second,
            "min" | "minute" | "minutes" => Unit::Minute,
            "h" | "hour" | "hours" => Unit::Hour,
            "d" | "day" | "days" => Unit::Day,
            "tick" | "ticks" => Unit::Tick,
            _ => return None,
        })
    }
    /// Seconds per unit for the time units.
    const fn secs(&self) -> Option<u64> {
        match self {
            Unit::Second => Some(1),
            Unit::Minute => Some(60),
            Unit::Hour => Some(3_600),
            Unit::Day => Some(86_400),
            Unit::Millisecond | Unit::Tick => None,
        }
    }
}

/// A period: `count` units (`"min"`, `"10s"`, `"250ms"`, `"1000 ticks"`).
///
/// ```
/// use cellrate::config::{Per, Unit};
/// assert_eq!(Per::new(10, Unit::Second).to_string(), "10s");
/// assert_eq!(Per::new(1, Unit::Minute).to_string(), "min");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Per {
    count: u64,
    unit: Unit,
}

impl Per {
    /// `count` units.
    pub const fn new(count: u64, unit: Unit) -> Self {
        Per { count, unit }
    }
    /// How many units.
    pub const fn count(&self) -> u64 {
        self.count
    }
    /// The unit.
    pub const fn unit(&self) -> Unit {
        self.unit
    }
    /// `rate` cells per this period as a [`Rate`].
    fn rate(&self, cells: u64) -> Result<Rate, QuotaError> {
        if self.count == 0 {
            return Err(QuotaError::ZeroPeriod);
        }
        Ok(match self.unit {
            Unit::Tick => Rate::per_ticks(cells, self.count),
            Unit::Millisecond => Rate::per_duration(cells, Duration::from_millis(self.count)),
            unit => {
                let secs = unit.secs().unwrap_or(1);
                let secs = self.count.checked_mul(secs).ok_or(QuotaError::Overflow)?;
                Rate::per_duration(cells, Duration::from_secs(secs))
            }
        })
    }
}

impl FromStr for Per {
    type Err = SyntaxError;
    fn from_str(s: &str) -> Result<Self, SyntaxError> {
        human::parse_per(s)
    }
}

/// A quota as a configuration states it: `rate` cells per period, an
/// optional burst and an optional tick frequency (see the
/// [module docs](self) for both forms and the arithmetic).
///
/// ```
/// use cellrate::config::{Per, QuotaSpec, Unit};
/// let spec: QuotaSpec = "100/min, burst 20".parse().unwrap();
/// assert_eq!(spec, QuotaSpec::new(100, Per::new(1, Unit::Minute)).with_burst(20));
/// let q = spec.quota(1_000_000).unwrap();
/// assert_eq!((q.burst(), q.emission_interval_ticks()), (20, 600_000));
/// assert_eq!(spec.to_string(), "100/min, burst 20");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct QuotaSpec {
    /// Cells per period (at least 1).
    pub rate: u64,
    /// The period.
    pub per: Per,
    /// Cells admitted at once from full; `None`: `rate`.
    pub burst: Option<u64>,
    /// Ticks per second of the clock; `None`: the context's.
    pub hz: Option<u64>,
}

impl QuotaSpec {
    /// `rate` cells per `per`, burst and frequency from defaults.
    pub const fn new(rate: u64, per: Per) -> Self {
        QuotaSpec {
            rate,
            per,
            burst: None,
            hz: None,
        }
    }
    /// The same with a burst.
    pub const fn with_burst(self, burst: u64) -> Self {
        QuotaSpec {
            burst: Some(burst),
            ..self
        }
    }
    /// The same with its own tick frequency.
    pub const fn with_hz(self, hz: u64) -> Self {
        QuotaSpec {
            hz: Some(hz),
            ..self
        }
    }

    /// The checks that need no tick frequency: a zero rate, period, burst
    /// or frequency (what deserialization refuses at once).
    ///
    /// ```
    /// use cellrate::config::QuotaSpec;
    /// use cellrate::QuotaError;
    /// assert_eq!(QuotaSpec::new(0, "s".parse().unwrap()).check(), Err(QuotaError::ZeroRate));
    /// assert_eq!("1/s, burst 0".parse::<QuotaSpec>().map_err(|e| e.to_string()),
    ///            Err("quota: the burst is zero".into()));
    /// ```
    pub fn check(&self) -> Result<(), QuotaError> {
        if self.rate == 0 {
            return Err(QuotaError::ZeroRate);
        }
        if self.per.count == 0 {
            return Err(QuotaError::ZeroPeriod);
        }
        if self.burst == Some(0) {
            return Err(QuotaError::ZeroBurst);
        }
        if self.hz == Some(0) {
            return Err(QuotaError::ZeroHz);
        }
        Ok(())
    }

    /// The quota at the spec's own `hz`, or at `default_hz` if it has none.
    ///
    /// ```
    /// use cellrate::config::QuotaSpec;
    /// let spec: QuotaSpec = "3/10s".parse().unwrap();
    /// let q = spec.quota(1_000_000).unwrap();
    /// assert_eq!((q.scale(), q.emission_interval()), (3, 10_000_000)); // exactly 10/3 s
    /// let own: QuotaSpec = "3/10s, hz 1000".parse().unwrap();
    /// assert_eq!(own.quota(1_000_000).unwrap().hz(), 1_000);
    /// ```
    pub fn quota(&self, default_hz: u64) -> Result<Quota, QuotaError> {
        self.check()?;
        let hz = self.hz.unwrap_or(default_hz);
        let rate = self.per.rate(self.rate)?;
        Quota::from_rate(rate, self.burst.unwrap_or(self.rate), hz)
    }

    /// The spec that states `quota`'s enforced rate, burst and frequency
    /// (see [the arithmetic](self#from-a-spec-to-a-quota)).
    ///
    /// ```
    /// use cellrate::config::QuotaSpec;
    /// use cellrate::Quota;
    /// let q = Quota::per_minute(100).with_burst(20).at_hz(1_000_000);
    /// let spec = QuotaSpec::from_quota(&q);
    /// assert_eq!(spec.to_string(), "100/min, burst 20, hz 1000000");
    /// assert_eq!(spec.quota(0), Ok(q));
    /// ```
    pub fn from_quota(quota: &Quota) -> QuotaSpec {
        let scale = quota.scale() as u128;
        let interval = quota.emission_interval() as u128;
        let hz = quota.hz();
        let finish = |rate: u64, per: Per| QuotaSpec {
            rate,
            per,
            burst: Some(quota.burst()),
            hz: Some(hz),
        };
        // Same T (interval/scale ticks), burst and frequency.
        let same = |spec: &QuotaSpec| match spec.quota(hz) {
            Ok(q) => {
                q.burst() == quota.burst()
                    && q.emission_interval() as u128 * scale == interval * q.scale() as u128
            }
            Err(_) => false,
        };
        // Cells per unit u = num/den seconds: scale·hz·num / (interval·den).
        let per_unit = |num: u128, den: u128| -> Option<(u64, u64)> {
            let a = scale.checked_mul(hz as u128)?.checked_mul(num)?;
            let b = interval.checked_mul(den)?;
            let g = gcd(a, b);
            Some((u64::try_from(a / g).ok()?, u64::try_from(b / g).ok()?))
        };
        let units = [
            (Unit::Second, 1, 1),
            (Unit::Minute, 60, 1),
            (Unit::Hour, 3_600, 1),
            (Unit::Day, 86_400, 1),
            (Unit::Millisecond, 1, 1_000),
        ];
        for (unit, num, den) in units {
            if let Some((a, 1)) = per_unit(num, den) {
                let spec = finish(a, Per::new(1, unit));
                if same(&spec) {
                    return spec;
                }
            }
        }
        if let Some((a, b)) = per_unit(1, 1) {
            let spec = finish(a, Per::new(b, Unit::Second));
            if same(&spec) {
                return spec;
            }
        }
        // T = interval/scale ticks, in lowest terms: always fits and
        // always rebuilds (its scale is at most the quota's).
        let g = gcd(interval, scale);
        finish(
            (scale / g) as u64,
            Per::new((interval / g) as u64, Unit::Tick),
        )
    }
}

fn gcd(mut a: u128, mut b: u128) -> u128 {
    while b != 0 {
        let r = a % b;
        a = b;
        b = r;
    }
    a
}

/// Why a human quota string is not a quota: its syntax, or a value
/// [`QuotaSpec::check`] refuses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ParseError {
    /// Not in the grammar.
    Syntax(SyntaxError),
    /// In the grammar, but zero where a positive number is needed.
    Invalid(QuotaError),
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ParseError::Syntax(e) => e.fmt(f),
            ParseError::Invalid(e) => e.fmt(f),
        }
    }
}

impl core::error::Error for ParseError {}

impl FromStr for QuotaSpec {
    type Err = ParseError;
    /// Reads the human form and applies [`QuotaSpec::check`].
    ///
    /// ```
    /// use cellrate::config::{ParseError, QuotaSpec};
    /// use cellrate::QuotaError;
    /// assert!("5000/h, burst 100".parse::<QuotaSpec>().is_ok());
    /// assert_eq!("5/s, burst 0".parse::<QuotaSpec>(), Err(ParseError::Invalid(QuotaError::ZeroBurst)));
    /// ```
    fn from_str(s: &str) -> Result<Self, ParseError> {
        let spec = human::parse(s).map_err(ParseError::Syntax)?;
        spec.check().map_err(ParseError::Invalid)?;
        Ok(spec)
    }
}

// ---------------------------------------------------------------- serde

impl Serialize for Per {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Per {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Per;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a period such as \"min\", \"10s\" or \"1000 ticks\"")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Per, E> {
                v.parse().map_err(E::custom)
            }
        }
        d.deserialize_str(V)
    }
}

/// The structured form's fields.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Structured {
    rate: u64,
    per: Per,
    #[serde(default)]
    burst: Option<u64>,
    #[serde(default)]
    hz: Option<u64>,
}

impl Serialize for Structured {
    /// An absent `burst` or `hz` is left out where a reader finds fields
    /// by name, and written as none in a binary format, where fields are
    /// found by position.
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let by_name = s.is_human_readable();
        let mut st = s.serialize_struct("Structured", 4)?;
        st.serialize_field("rate", &self.rate)?;
        st.serialize_field("per", &self.per)?;
        for (name, value) in [("burst", &self.burst), ("hz", &self.hz)] {
            if value.is_none() && by_name {
                st.skip_field(name)?;
            } else {
                st.serialize_field(name, value)?;
            }
        }
        st.end()
    }
}

impl From<QuotaSpec> for Structured {
    fn from(s: QuotaSpec) -> Self {
        Structured {
            rate: s.rate,
            per: s.per,
            burst: s.burst,
            hz: s.hz,
        }
    }
}

impl Serialize for QuotaSpec {
    /// The human form, e.g. `"100/min, burst 20"`, in a format a person
    /// reads; the structured form in a binary format (in every format
    /// with `#[serde(with = "cellrate::config::structured")]`).
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        if !s.is_human_readable() {
            return Structured::from(*self).serialize(s);
        }
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for QuotaSpec {
    /// Either form; refuses what [`QuotaSpec::check`] refuses.
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        if !d.is_human_readable() {
            // A binary format cannot say which form follows: it carries
            // the structured one.
            let s = Structured::deserialize(d)?;
            let spec = QuotaSpec {
                rate: s.rate,
                per: s.per,
                burst: s.burst,
                hz: s.hz,
            };
            spec.check().map_err(de::Error::custom)?;
            return Ok(spec);
        }
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = QuotaSpec;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(
                    "a quota: \"100/min, burst 20\" or { rate = 100, per = \"min\", burst = 20 }",
                )
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<QuotaSpec, E> {
                v.parse().map_err(E::custom)
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<QuotaSpec, A::Error> {
                let s = Structured::deserialize(de::value::MapAccessDeserializer::new(map))?;
                let spec = QuotaSpec {
                    rate: s.rate,
                    per: s.per,
                    burst: s.burst,
                    hz: s.hz,
                };
                spec.check().map_err(de::Error::custom)?;
                Ok(spec)
            }
        }
        d.deserialize_any(V)
    }
}

impl Serialize for Quota {
    /// The structured form of [`QuotaSpec::from_quota`], frequency included
    /// (for the human one, `#[serde(with = "cellrate::config::human")]`).
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        Structured::from(QuotaSpec::from_quota(self)).serialize(s)
    }
}

impl<'de> Deserialize<'de> for Quota {
    /// Either form, built at the spec's `hz` or [`DEFAULT_HZ`].
    ///
    /// ```
    /// use cellrate::Quota;
    /// let q: Quota = serde_json::from_str(r#""10/s, burst 5, hz 1000""#).unwrap();
    /// assert_eq!(q, Quota::per_second(10).with_burst(5).at_hz(1_000));
    /// let q: Quota = serde_json::from_str(r#"{"rate": 10, "per": "s"}"#).unwrap();
    /// assert_eq!(q, Quota::per_second(10).at_hz(cellrate::config::DEFAULT_HZ));
    /// ```
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        QuotaSpec::deserialize(d)?
            .quota(DEFAULT_HZ)
            .map_err(de::Error::custom)
    }
}

/// `#[serde(with = "cellrate::config::structured")]` on a [`QuotaSpec`]
/// field: writes the structured form, reads either.
///
/// ```
/// use cellrate::config::QuotaSpec;
/// use serde::{Deserialize, Serialize};
/// #[derive(Serialize, Deserialize)]
/// struct Limit {
///     #[serde(with = "cellrate::config::structured")]
///     quota: QuotaSpec,
/// }
/// let l = Limit { quota: "100/min, burst 20".parse().unwrap() };
/// assert_eq!(toml::to_string(&l).unwrap(), "[quota]\nrate = 100\nper = \"min\"\nburst = 20\n");
/// ```
pub mod structured {
    use super::*;

    /// Writes `spec` in the structured form.
    pub fn serialize<S: Serializer>(spec: &QuotaSpec, s: S) -> Result<S::Ok, S::Error> {
        Structured::from(*spec).serialize(s)
    }
    /// Reads either form (as `QuotaSpec`'s own `Deserialize`).
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<QuotaSpec, D::Error> {
        QuotaSpec::deserialize(d)
    }
}

// ---------------------------------------------------------------- errors

/// A configuration error and where it is: `tiers[2].quota: quota: the
/// burst is zero`.
///
/// ```
/// use cellrate::config::Error;
/// let e = Error::new("tiers[2].quota", "quota: the burst is zero");
/// assert_eq!(e.path(), "tiers[2].quota");
/// assert_eq!(e.to_string(), "tiers[2].quota: quota: the burst is zero");
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Error {
    path: String,
    message: String,
}

impl Error {
    /// `message` at `path` (`"."`-separated fields, `[i]` for elements;
    /// empty for the whole document).
    pub fn new(path: impl Into<String>, message: impl fmt::Display) -> Self {
        let mut message = message.to_string();
        message.truncate(message.trim_end().len());
        Error {
            path: path.into(),
            message,
        }
    }
    /// Where: `tiers[2].quota`, or empty for the whole document.
    pub fn path(&self) -> &str {
        &self.path
    }
    /// What.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The same error placed inside `outer`, the field (or element) that
    /// holds the spec it came from: the builders name places from their own
    /// spec (`capacity`, `overrides.acct_123`, `tiers[1].quota`), and the
    /// caller that knows where that spec sits in its file adds the rest.
    ///
    /// ```
    /// use cellrate::config::KeyedSpec;
    /// use cellrate::keyed::Seed;
    /// let spec: KeyedSpec = toml::from_str("quota = \"10/s\"\ncapacity = 0").unwrap();
    /// let err = spec.build(1_000, Seed::new(1, 2)).err().unwrap().within("tables[2]");
    /// assert_eq!(err.to_string(), "tables[2].capacity: a keyed table needs a capacity of at least 1");
    /// // An element path joins without a dot; an empty path takes `outer`.
    /// assert_eq!(cellrate::config::Error::new("[0].name", "bad").within("tiers").path(), "tiers[0].name");
    /// assert_eq!(cellrate::config::Error::new("", "bad").within("limits").path(), "limits");
    /// ```
    pub fn within(self, outer: &str) -> Error {
        let path = if outer.is_empty() || outer == "." {
            self.path
        } else if self.path.is_empty() || self.path == "." {
            String::from(outer)
        } else if self.path.starts_with('[') {
            format!("{outer}{}", self.path)
        } else {
            format!("{outer}.{}", self.path)
        };
        Error {
            path,
            message: self.message,
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.path.is_empty() || self.path == "." {
            f.write_str(&self.message)
        } else {
            write!(f, "{}: {}", self.path, self.message)
        }
    }
}

impl core::error::Error for Error {}

/// Deserializes a `T` from any serde format, naming the place of the first
/// bad value in the error.
///
/// ```
/// use cellrate::compose::LimiterConfig;
/// use cellrate::config;
/// let text = "algorithm = \"token_bucket\"\nlimit = 10\nwindow = 1000\nburst = 0\nhz = 1000\n";
/// let err = config::from_deserializer::<LimiterConfig, _>(toml::Deserializer::parse(text).unwrap())
///     .unwrap_err();
/// assert_eq!(err.to_string(), "invalid bucket quota: quota: the burst is zero");
/// ```
pub fn from_deserializer<'de, T, D>(d: D) -> Result<T, Error>
where
    T: Deserialize<'de>,
    D: Deserializer<'de>,
{
    serde_path_to_error::deserialize(d).map_err(|e| {
        let path = e.path().to_string();
        Error::new(path, e.into_inner())
    })
}

// ---------------------------------------------------------------- limiter

// ---------------------------------------------------------------- tiers

/// One named tier: `{ name = "hour", quota = "5000/h, burst 100" }`.
///
/// ```
/// use cellrate::config::TierSpec;
/// let t: TierSpec = toml::from_str("name = \"hour\"\nquota = \"5000/h, burst 100\"").unwrap();
/// assert_eq!(t.quota.burst, Some(100));
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TierSpec {
    /// The tier's name: 1 to 32 printable ASCII characters, unique among
    /// its tiers (it names the tier in headers and logs).
    pub name: String,
    /// Its quota.
    pub quota: QuotaSpec,
}

/// Checks a tier name (the rule of the HTTP layer's `RateLimit-Policy`).
fn check_name(name: &str) -> Result<(), &'static str> {
    if crate::headers::valid_tier_name(name) {
        Ok(())
    } else {
        Err("tier names are 1 to 32 printable ASCII characters")
    }
}

/// Checks names and quotas of `tiers` at `hz` (each spec's own `hz` wins),
/// with errors at `prefix[i].name` / `prefix[i].quota`.
pub(crate) fn tier_quotas(tiers: &[TierSpec], hz: u64, prefix: &str) -> Result<Vec<Quota>, Error> {
    let mut out = Vec::with_capacity(tiers.len());
    for (i, t) in tiers.iter().enumerate() {
        check_name(&t.name).map_err(|m| Error::new(format!("{prefix}[{i}].name"), m))?;
        if tiers[..i].iter().any(|u| u.name == t.name) {
            return Err(Error::new(
                format!("{prefix}[{i}].name"),
                format_args!("tier name {:?} is used twice", t.name),
            ));
        }
        let q = t
            .quota
            .quota(hz)
            .map_err(|e| Error::new(format!("{prefix}[{i}].quota"), e))?;
        out.push(q);
    }
    Ok(out)
}

/// Builds one [`Gcra`] per tier at `hz`, in order, with their names: the
/// tiers of an all-or-nothing check ([`crate::compose::check_all`]).
/// Errors name the tier: `tiers[1].quota: …`.
///
/// ```
/// use cellrate::config::{build_tiers, TierSpec};
/// let tiers: Vec<TierSpec> = serde_json::from_str(
///     r#"[{"name": "s", "quota": "10/s"}, {"name": "s", "quota": "100/min"}]"#,
/// ).unwrap();
/// assert_eq!(
///     build_tiers(&tiers, 1_000).unwrap_err().to_string(),
///     "tiers[1].name: tier name \"s\" is used twice"
/// );
/// ```
pub fn build_tiers(tiers: &[TierSpec], hz: u64) -> Result<Vec<(String, Gcra)>, Error> {
    let quotas = tier_quotas(tiers, hz, "tiers")?;
    Ok(tiers
        .iter()
        .zip(quotas)
        .map(|(t, q)| (t.name.clone(), Gcra::new(q)))
        .collect())
}

// ---------------------------------------------------------------- keyed

/// A keyed table and its per-key overrides:
///
/// ```toml
/// quota = "100/min"
/// capacity = 100000
/// when_full = "deny"          # or "admit", "shared"
/// [overrides]
/// acct_123 = "500/min"
/// ```
///
/// Overrides are keyed by the string a client presents (as the HTTP
/// layer's key extractors produce it) and must share the table's tick
/// frequency; each is re-expressed at the table's scale
/// ([`KeyedTable::compatible_quota`](crate::keyed::KeyedTable::compatible_quota),
/// rounded toward admitting less).
///
/// ```
/// use cellrate::config::KeyedSpec;
/// use cellrate::keyed::Seed;
/// let spec: KeyedSpec = toml::from_str(r#"
///     quota = "100/min"
///     capacity = 1000
///     [overrides]
///     acct_123 = "500/min"
/// "#).unwrap();
/// let table = spec.build(1_000_000, Seed::new(1, 2)).unwrap();
/// assert_eq!(table.check("acct_123", 0).unwrap().limit(), 500);
/// assert_eq!(table.check("acct_9", 0).unwrap().limit(), 100);
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KeyedSpec {
    /// Every key's quota unless overridden.
    pub quota: QuotaSpec,
    /// The most live keys (at least 1; 16 bytes each, asked of the
    /// allocator when the table is built: one it refuses is an error here).
    pub capacity: usize,
    /// What a full table does with a new key (default `deny`).
    #[serde(default = "deny")]
    pub when_full: WhenFull,
    /// Per-key quotas, by key.
    /// (Written even when empty: a binary format finds fields by position.)
    #[serde(default)]
    pub overrides: BTreeMap<String, QuotaSpec>,
}

fn deny() -> WhenFull {
    WhenFull::Deny
}

/// A capacity of at least 1 whose slots the allocator grants: a table of
/// `capacity` × 16 bytes is asked for (and given back) before the table is
/// built, so a size no allocator can grant (a typo of a few digits) is an
/// error at `capacity` instead of an abort of the process. (A size the
/// allocator grants but the system cannot back when the slots are written
/// is the system's to refuse, as for any allocation.)
/// For every builder that sizes a table from a file (its message,
/// [`Error::message`], placed at that builder's own field).
///
/// ```
/// use cellrate::config::check_capacity;
/// assert!(check_capacity(1_024).is_ok());
/// assert!(check_capacity(0).is_err());
/// assert!(check_capacity(usize::MAX / 2).is_err()); // no allocator grants it
/// ```
pub fn check_capacity(capacity: usize) -> Result<(), Error> {
    if capacity == 0 {
        return Err(Error::new(
            "capacity",
            "a keyed table needs a capacity of at least 1",
        ));
    }
    let mut slots: Vec<crate::keyed::Slot> = Vec::new();
    slots.try_reserve_exact(capacity).map_err(|_| {
        let bytes = (capacity as u128) * core::mem::size_of::<crate::keyed::Slot>() as u128;
        Error::new(
            "capacity",
            format_args!("a keyed table of {capacity} slots ({bytes} bytes) cannot be allocated"),
        )
    })
}

/// A table built from a [`KeyedSpec`]: heap slots, overrides by [`KeyId`].
pub type ConfiguredTable = KeyedBox<Quota, Vec<(KeyId, Quota)>>;

/// A table built from a [`KeyedSpec`] whose quotas change at run time
/// ([`KeyedSpec::reload`]).
pub type LiveTable = KeyedBox<LiveQuota, Vec<(KeyId, LiveQuota)>>;

impl KeyedSpec {
    /// The table at `hz` with hash `seed`. Errors name the field
    /// (`capacity`, `quota`, `overrides.acct_123`).
    pub fn build(&self, hz: u64, seed: Seed) -> Result<ConfiguredTable, Error> {
        let (quota, overrides) = self.quotas(hz, seed)?;
        Ok(KeyedBox::with_capacity_and_overrides(
            self.capacity,
            quota,
            overrides,
            self.when_full,
            seed,
        ))
    }

    /// Like [`build`](Self::build), with [`LiveQuota`]s that
    /// [`reload`](Self::reload) changes at run time.
    pub fn build_live(&self, hz: u64, seed: Seed) -> Result<LiveTable, Error> {
        let (quota, overrides) = self.quotas(hz, seed)?;
        Ok(KeyedBox::with_capacity_and_overrides(
            self.capacity,
            LiveQuota::new(quota),
            overrides
                .into_iter()
                .map(|(id, q)| (id, LiveQuota::new(q)))
                .collect(),
            self.when_full,
            seed,
        ))
    }

    /// Applies this spec to a table [`build_live`](Self::build_live) made
    /// (at the same `hz`), keeping every client's state: the default
    /// quota and each override change with
    /// [`LiveQuota::set_quota`] semantics (the debt kept as time); an
    /// override the spec no longer names falls back to the default quota.
    /// Everything is checked before anything changes; then each quota
    /// switches on its own (a check sees each one old or new, never a mix).
    /// What is fixed when a table is made is refused, with its place:
    /// `capacity`, `when_full`, and a key that had no override.
    ///
    /// ```
    /// use cellrate::config::KeyedSpec;
    /// use cellrate::keyed::Seed;
    /// let spec: KeyedSpec = toml::from_str(
    ///     "quota = \"100/min\"\ncapacity = 64\n[overrides]\nacct_123 = \"100/min\"",
    /// ).unwrap();
    /// let table = spec.build_live(1_000, Seed::new(1, 2)).unwrap();
    /// assert!(table.check_n("acct_123", 0, 100).is_ok());
    /// assert!(table.check("acct_123", 0).is_err());
    /// // The operator raises acct_123 to 500/min; 12 s later it has what
    /// // 12 s earn at 500/min (100 cells), the others what 100/min gives.
    /// let raised: KeyedSpec = toml::from_str(
    ///     "quota = \"100/min\"\ncapacity = 64\n[overrides]\nacct_123 = \"500/min\"",
    /// ).unwrap();
    /// raised.reload(&table, 1_000).unwrap();
    /// assert_eq!(table.check_n("acct_123", 12_000, 100).unwrap().remaining(), 0);
    /// assert_eq!(table.check("acct_9", 12_000).unwrap().limit(), 100);
    /// ```
    pub fn reload(&self, table: &LiveTable, hz: u64) -> Result<(), Error> {
        if self.capacity != table.capacity() {
            return Err(Error::new(
                "capacity",
                "fixed when the table is made: build a new table to change it",
            ));
        }
        if self.when_full != table.when_full() {
            return Err(Error::new(
                "when_full",
                "fixed when the table is made: build a new table to change it",
            ));
        }
        let fixed = table.algorithm().quota();
        let rescale = |q: Quota, place: &dyn Fn() -> String| -> Result<Quota, Error> {
            if q.hz() != fixed.hz() {
                return Err(Error::new(
                    place(),
                    "a quota must count ticks at the table's frequency",
                ));
            }
            q.rescaled(fixed.scale(), fixed.hz())
                .map_err(|e| Error::new(place(), e))
        };
        let default = self.quota.quota(hz).map_err(|e| Error::new("quota", e))?;
        let default = rescale(default, &|| "quota".into())?;
        // One new quota per override slot of the table, all checked first.
        let slots = table.overrides();
        let mut next: Vec<Quota> = slots.iter().map(|_| default).collect();
        for (key, spec) in &self.overrides {
            let place = || format!("overrides.{key}");
            let id = table.key_id(key.as_str());
            let Some(i) = slots.iter().position(|(k, _)| *k == id) else {
                return Err(Error::new(
                    place(),
                    "this key had no override when the table was made: build a new table to add one",
                ));
            };
            let q = spec.quota(hz).map_err(|e| Error::new(place(), e))?;
            next[i] = rescale(q, &place)?;
        }
        let busy = |place: String| move |e| Error::new(place, e);
        table
            .algorithm()
            .set_quota(default)
            .map_err(busy("quota".into()))?;
        for ((_, live), q) in slots.iter().zip(next) {
            live.set_quota(q).map_err(busy("overrides".into()))?;
        }
        Ok(())
    }

    /// The default quota and the overrides by [`KeyId`] (at the table's
    /// scale) for a table with hash `seed`.
    pub(crate) fn quotas(
        &self,
        hz: u64,
        seed: Seed,
    ) -> Result<(Quota, Vec<(KeyId, Quota)>), Error> {
        check_capacity(self.capacity)?;
        let quota = self.quota.quota(hz).map_err(|e| Error::new("quota", e))?;
        // KeyIds of string keys depend on the seed: a one-slot table with
        // the same seed names them.
        let probe = KeyedBox::with_capacity(1, quota, self.when_full, seed);
        let mut overrides = Vec::with_capacity(self.overrides.len());
        for (key, spec) in &self.overrides {
            let place = || format!("overrides.{key}");
            let q = spec.quota(hz).map_err(|e| Error::new(place(), e))?;
            if q.hz() != quota.hz() {
                return Err(Error::new(
                    place(),
                    "an override must count ticks at the table's frequency",
                ));
            }
            let q = probe
                .compatible_quota(q)
                .map_err(|e| Error::new(place(), e))?;
            overrides.push((probe.key_id(key.as_str()), q));
        }
        Ok((quota, overrides))
    }
}
