//! Quotas in configuration (feature `serde`): a [`QuotaSpec`] in a
//! structured or a human form, and the serde form of [`Quota`] itself.
//! Files of named tiers and keyed tables are the `cellrate-config` crate's,
//! built on these; the HTTP layer's rules are `cellrate-tower`'s.
//!
//! ```
//! use cellrate::config::QuotaSpec;
//! let spec: QuotaSpec = "5000/h, burst 100".parse().unwrap();
//! let quota = spec.quota(1_000_000).unwrap();
//! assert_eq!(quota.burst(), 100);
//! assert_eq!(spec, toml::from_str::<QuotaSpec>("rate = 5000\nper = \"h\"\nburst = 100").unwrap());
//! ```
//!
//! # Quotas: two forms
//!
//! Both forms read into the same [`QuotaSpec`] wherever a quota is expected
//! (a string is the human form, a table/object the structured one). A
//! binary format (`is_human_readable()` false, such as postcard) always
//! writes and reads the structured form:
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
//! Lower case only; clauses in this order, each at most once; a unit word
//! is read whole (`"10sec"` is 10 s, `"10secs"` an error).
//! [`Display`](core::fmt::Display) writes the canonical spelling (`"3/10s, hz 1000"`).
//!
//! A spec's own `hz` wins; else the context's (the `hz` argument of
//! [`QuotaSpec::quota`]); a bare [`Quota`] read on its own uses
//! [`DEFAULT_HZ`]. A spec becomes a quota through [`Rate`] and
//! [`Quota::from_rate`], rounded as [`Quota`] rounds (docs/design/quota.md);
//! [`QuotaSpec::from_quota`] reads back as the same emission interval,
//! burst and frequency.
pub mod human;

use core::fmt;
use core::str::FromStr;
use core::time::Duration;

use serde::de::{self, Deserializer, MapAccess, Visitor};
use serde::ser::Serializer;
use serde::{Deserialize, Serialize};

use crate::{Quota, QuotaError, Rate};

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
#[non_exhaustive]
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
    /// let q = "3/10s".parse::<QuotaSpec>().unwrap().quota(1_000_000).unwrap();
    /// assert_eq!((q.scale(), q.emission_interval()), (3, 10_000_000)); // exactly 10/3 s
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
#[non_exhaustive]
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

impl Structured {
    fn checked<E: de::Error>(self) -> Result<QuotaSpec, E> {
        let spec = QuotaSpec {
            rate: self.rate,
            per: self.per,
            burst: self.burst,
            hz: self.hz,
        };
        spec.check().map_err(E::custom)?;
        Ok(spec)
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
            return Structured::deserialize(d)?.checked();
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
                Structured::deserialize(de::value::MapAccessDeserializer::new(map))?.checked()
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
