//! Configuration: round trips of every valid config in both quota forms
//! and three formats, the human syntax against a model parser, and the
//! exact error messages, with their places, of bad configs.

use std::collections::BTreeMap;

use cellrate::compose::{AlgorithmKind, AnyLimiter, LimiterConfig};
use cellrate::config::{Per, QuotaSpec, Unit};
use cellrate::keyed::{Seed, WhenFull};
use cellrate::Quota;
use cellrate_config::{self as config, KeyedSpec, TierSpec};
use proptest::prelude::*;
use serde::{Deserialize, Serialize};

// ------------------------------------------------------------ strategies

fn unit() -> impl Strategy<Value = Unit> {
    prop::sample::select(Unit::ALL.to_vec())
}

/// Numbers spread over every magnitude, edges included.
fn number(max: u64) -> impl Strategy<Value = u64> {
    prop_oneof![
        1..=10u64,
        (0u32..64).prop_flat_map(move |bits| 1..=(1u64 << bits).min(max)),
        Just(max),
    ]
    .prop_map(move |n| n.min(max))
}

/// A spec that `check` accepts (no zeros), numbers below `max`.
fn spec(max: u64) -> impl Strategy<Value = QuotaSpec> {
    (
        number(max),
        number(max),
        unit(),
        prop::option::of(number(max)),
        prop::option::of(number(max)),
    )
        .prop_map(|(rate, count, unit, burst, hz)| {
            let mut spec = QuotaSpec::new(rate, Per::new(count, unit));
            (spec.burst, spec.hz) = (burst, hz);
            spec
        })
}

fn hz() -> impl Strategy<Value = u64> {
    prop_oneof![
        prop::sample::select(vec![
            1u64,
            1_000,
            32_768,
            1_000_000,
            1_000_000_000,
            3_000_000_000,
        ]),
        1..=u64::MAX,
    ]
}

// ------------------------------------------------------------ round trips

#[derive(Serialize, Deserialize, PartialEq, Debug)]
struct Human {
    quota: QuotaSpec,
}

#[derive(Serialize, Deserialize, PartialEq, Debug)]
struct Structured {
    #[serde(with = "cellrate::config::structured")]
    quota: QuotaSpec,
}

#[derive(Serialize, Deserialize, PartialEq, Debug)]
struct File {
    hz: u64,
    tiers: Vec<TierSpec>,
    table: KeyedSpec,
    limiter: LimiterConfig,
}

fn tier_name() -> impl Strategy<Value = String> {
    "[ -~]{1,32}"
}

fn keyed(max: u64) -> impl Strategy<Value = KeyedSpec> {
    (
        spec(max),
        1usize..=1 << 20,
        prop::sample::select(vec![WhenFull::Deny, WhenFull::Admit, WhenFull::Shared]),
        prop::collection::btree_map("[a-z0-9_]{1,12}", spec(max), 0..4),
    )
        .prop_map(|(quota, capacity, when_full, overrides)| {
            let mut spec = KeyedSpec::new(quota, capacity);
            (spec.when_full, spec.overrides) = (when_full, overrides);
            spec
        })
}

fn limiter(max: u64) -> impl Strategy<Value = LimiterConfig> {
    (
        prop::sample::select(AlgorithmKind::ALL.to_vec()),
        number(max),
        number(max),
        prop::option::of(number(max)),
        number(max),
        prop::option::of(1..=64u32),
    )
        .prop_map(|(algorithm, limit, window, burst, hz, buckets)| {
            let mut c = LimiterConfig::new(algorithm, limit, window, hz);
            c.burst = burst;
            c.buckets = buckets;
            c
        })
        .prop_filter("valid", |c| c.validate().is_ok())
}

fn file(max: u64) -> impl Strategy<Value = File> {
    (
        number(max),
        prop::collection::vec((tier_name(), spec(max)), 0..5),
        keyed(max),
        limiter(max),
    )
        .prop_map(|(hz, tiers, table, limiter)| File {
            hz,
            tiers: tiers
                .into_iter()
                .map(|(name, quota)| TierSpec::new(name, quota))
                .collect(),
            table,
            limiter,
        })
}

const TOML_MAX: u64 = i64::MAX as u64; // TOML integers are 64-bit signed

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// Human form: text, JSON and TOML all give the spec back.
    #[test]
    fn spec_round_trips_human(s in spec(u64::MAX)) {
        let text = s.to_string();
        prop_assert_eq!(text.parse::<QuotaSpec>(), Ok(s));
        let json = serde_json::to_string(&Human { quota: s }).unwrap();
        prop_assert_eq!(serde_json::from_str::<Human>(&json).unwrap(), Human { quota: s });
        let toml = toml::to_string(&Human { quota: s }).unwrap();
        prop_assert_eq!(toml::from_str::<Human>(&toml).unwrap(), Human { quota: s });
    }

    /// Structured form, JSON (every u64) and TOML (what it can hold).
    #[test]
    fn spec_round_trips_structured(s in spec(u64::MAX), t in spec(TOML_MAX)) {
        let json = serde_json::to_string(&Structured { quota: s }).unwrap();
        prop_assert!(json.contains("\"rate\""), "{}", json);
        prop_assert_eq!(serde_json::from_str::<Structured>(&json).unwrap(), Structured { quota: s });
        // Each form reads the other's output too.
        prop_assert_eq!(serde_json::from_str::<Human>(&json).unwrap(), Human { quota: s });
        let toml = toml::to_string(&Structured { quota: t }).unwrap();
        prop_assert_eq!(toml::from_str::<Structured>(&toml).unwrap(), Structured { quota: t });
    }

    /// A whole file of tiers, a keyed table and a limiter, in both formats.
    #[test]
    fn file_round_trips(f in file(u64::MAX), g in file(TOML_MAX)) {
        let json = serde_json::to_string(&f).unwrap();
        prop_assert_eq!(&serde_json::from_str::<File>(&json).unwrap(), &f);
        let toml = toml::to_string(&g).unwrap();
        prop_assert_eq!(&toml::from_str::<File>(&toml).unwrap(), &g);
    }

    /// The same file through postcard, a binary format that does not
    /// describe itself (it has no `deserialize_any`): both quota forms,
    /// every integer.
    #[test]
    fn file_round_trips_in_a_binary_format(f in file(u64::MAX), s in spec(u64::MAX)) {
        let bytes = postcard::to_allocvec(&f).unwrap();
        prop_assert_eq!(&postcard::from_bytes::<File>(&bytes).unwrap(), &f);
        let bytes = postcard::to_allocvec(&Structured { quota: s }).unwrap();
        prop_assert_eq!(postcard::from_bytes::<Structured>(&bytes).unwrap(), Structured { quota: s });
        let q = s.quota(1_000_000);
        if let Ok(q) = q {
            let bytes = postcard::to_allocvec(&q).unwrap();
            let back: Quota = postcard::from_bytes(&bytes).unwrap();
            #[derive(Serialize, Deserialize)]
            struct H {
                #[serde(with = "cellrate::config::human")]
                q: Quota,
            }
            let bytes = postcard::to_allocvec(&H { q }).unwrap();
            prop_assert_eq!(postcard::from_bytes::<H>(&bytes).unwrap().q, back);
            prop_assert_eq!(back.emission_interval() as u128 * q.scale() as u128,
                q.emission_interval() as u128 * back.scale() as u128);
        }
    }

    /// Every quota a spec builds survives `Serialize` → `Deserialize`:
    /// equal if exact; if rounded, an exact quota of the same `T`, burst
    /// and frequency (module docs). Both forms, JSON.
    #[test]
    fn quota_round_trips(s in spec(u64::MAX), hz in hz()) {
        let Ok(q) = s.quota(hz) else { return Ok(()) };
        let json = serde_json::to_string(&q).unwrap();
        let back: Quota = serde_json::from_str(&json).unwrap();
        #[derive(Serialize, Deserialize)]
        struct H { #[serde(with = "cellrate::config::human")] q: Quota }
        let text = serde_json::to_string(&H { q }).unwrap();
        let back_h = serde_json::from_str::<H>(&text).unwrap().q;
        prop_assert_eq!(back, back_h);
        if q.is_exact() {
            prop_assert_eq!(back, q, "{}", json);
        } else {
            prop_assert!(back.is_exact());
            prop_assert_eq!((back.burst(), back.hz()), (q.burst(), q.hz()));
            prop_assert_eq!(
                back.emission_interval() as u128 * q.scale() as u128,
                q.emission_interval() as u128 * back.scale() as u128
            );
        }
    }
}

// ------------------------------------------------------------ human syntax

/// A model of the grammar in the module docs, written for clarity: split
/// at commas, then at the slash, then trim blanks; no cursor.
fn model(text: &str) -> Option<QuotaSpec> {
    const BLANKS: &[char] = &[' ', '\t'];
    fn number(s: &str) -> Option<u64> {
        if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        s.parse().ok()
    }
    fn unit(word: &str) -> Option<Unit> {
        let table: [(&[&str], Unit); 6] = [
            (&["ms"], Unit::Millisecond),
            (&["s", "sec", "second", "seconds"], Unit::Second),
            (&["min", "minute", "minutes"], Unit::Minute),
            (&["h", "hour", "hours"], Unit::Hour),
            (&["d", "day", "days"], Unit::Day),
            (&["tick", "ticks"], Unit::Tick),
        ];
        table
            .iter()
            .find(|(words, _)| words.contains(&word))
            .map(|(_, u)| *u)
    }
    let mut parts = text.split(',');
    let (rate, per) = parts.next()?.split_once('/')?;
    let rate = number(rate.trim_matches(BLANKS))?;
    let per = per.trim_matches(BLANKS);
    let digits = per.len() - per.trim_start_matches(|c: char| c.is_ascii_digit()).len();
    let count = if digits == 0 {
        1
    } else {
        number(&per[..digits])?
    };
    let unit = unit(per[digits..].trim_start_matches(BLANKS))?;
    let mut spec = QuotaSpec::new(rate, Per::new(count, unit));
    let mut clauses: Vec<(&str, u64)> = Vec::new();
    for part in parts {
        let part = part.trim_matches(BLANKS);
        let split = part.find(BLANKS)?;
        let (keyword, value) = part.split_at(split);
        clauses.push((keyword, number(value.trim_start_matches(BLANKS))?));
    }
    match clauses.as_slice() {
        [] => {}
        [("burst", b)] => spec.burst = Some(*b),
        [("hz", h)] => spec.hz = Some(*h),
        [("burst", b), ("hz", h)] => {
            spec.burst = Some(*b);
            spec.hz = Some(*h);
        }
        _ => return None,
    }
    // The values `check` refuses.
    if rate == 0 || count == 0 || spec.burst == Some(0) || spec.hz == Some(0) {
        return None;
    }
    Some(spec)
}

/// Strings from the grammar's own tokens and a few strangers.
fn soup() -> impl Strategy<Value = String> {
    let tokens = vec![
        "0",
        "1",
        "7",
        "10",
        "007",
        "18446744073709551615",
        "18446744073709551616",
        "/",
        ",",
        " ",
        "\t",
        "s",
        "ms",
        "min",
        "minute",
        "minutes",
        "h",
        "hours",
        "d",
        "day",
        "sec",
        "seconds",
        "tick",
        "ticks",
        "burst",
        "hz",
        "x",
        "S",
        "é",
        "\n",
        "secs",
    ];
    prop::collection::vec(prop::sample::select(tokens), 0..14).prop_map(|t| t.concat())
}

/// Strings in the grammar, with random spellings and blanks.
fn grammatical() -> impl Strategy<Value = (String, QuotaSpec)> {
    let blanks = || prop::sample::select(vec!["", " ", "\t", "  ", " \t "]);
    let blanks1 = || prop::sample::select(vec![" ", "\t", "   "]);
    let spelling = |u: Unit| -> Vec<&'static str> {
        match u {
            Unit::Millisecond => vec!["ms"],
            Unit::Second => vec!["s", "sec", "second", "seconds"],
            Unit::Minute => vec!["min", "minute", "minutes"],
            Unit::Hour => vec!["h", "hour", "hours"],
            Unit::Day => vec!["d", "day", "days"],
            Unit::Tick => vec!["tick", "ticks"],
        }
    };
    (
        spec(u64::MAX),
        unit().prop_flat_map(move |u| (Just(u), prop::sample::select(spelling(u)))),
        prop::array::uniform8(blanks()),
        prop::array::uniform2(blanks1()),
        any::<bool>(),
    )
        .prop_map(|(mut s, (u, word), b, b1, show_count)| {
            s.per = Per::new(s.per.count(), u);
            let count = if s.per.count() == 1 && !show_count {
                String::new()
            } else {
                format!("{}{}", s.per.count(), b[3])
            };
            let mut text = format!("{}{}{}/{}{}{}", b[0], s.rate, b[1], b[2], count, word);
            if let Some(burst) = s.burst {
                text += &format!("{},{}burst{}{}", b[4], b[5], b1[0], burst);
            }
            if let Some(hz) = s.hz {
                text += &format!("{},{}hz{}{}", b[6], b[7], b1[1], hz);
            }
            text += b[0];
            (text, s)
        })
}

/// Strings shaped like the grammar, each slot filled from a few right and
/// a few wrong choices (unknown or misspelt words, zeros, overflowing or
/// signed numbers, clauses repeated or out of order).
fn shaped() -> impl Strategy<Value = String> {
    let sel = |v: Vec<&'static str>| prop::sample::select(v);
    let numbers = || {
        sel(vec![
            "1",
            "0",
            "10",
            "007",
            "18446744073709551615",
            "18446744073709551616",
            "-1",
            "1.5",
            "",
            "1_000",
        ])
    };
    let blanks = || sel(vec!["", " ", "\t", "  ", "\n", "\u{a0}"]);
    let words = sel(vec![
        "s", "sec", "secs", "second", "seconds", "S", "ms", "msec", "min", "mins", "minute",
        "minutes", "h", "hr", "hour", "hours", "d", "day", "days", "tick", "ticks", "w", "",
    ]);
    let keywords = || sel(vec!["burst", "hz", "bursts", "Hz", "burst:", ""]);
    let clause = (
        blanks(),
        sel(vec![",", ";", ""]),
        blanks(),
        keywords(),
        blanks(),
        numbers(),
    )
        .prop_map(|(a, comma, b, k, c, n)| format!("{a}{comma}{b}{k}{c}{n}"));
    (
        (
            blanks(),
            numbers(),
            blanks(),
            sel(vec!["/", "per", "//", ""]),
            blanks(),
        ),
        (sel(vec!["", "1", "10", "0", "1 "]), words),
        prop::collection::vec(clause, 0..4),
        blanks(),
    )
        .prop_map(|((b0, rate, b1, slash, b2), (count, word), clauses, end)| {
            format!(
                "{b0}{rate}{b1}{slash}{b2}{count}{word}{}{end}",
                clauses.concat()
            )
        })
}

/// A grammatical string with one token inserted, one byte range removed,
/// or one byte replaced: the near misses a parser gets wrong.
fn near_miss() -> impl Strategy<Value = String> {
    let tokens = vec![
        "s",
        "secs",
        "0",
        "1",
        ",",
        "/",
        " ",
        "burst 1",
        "hz 1",
        ", burst 2",
        ", hz 3",
        "x",
        "é",
    ];
    (
        grammatical(),
        0..3u8,
        any::<prop::sample::Index>(),
        0usize..4,
        prop::sample::select(tokens),
    )
        .prop_map(|((text, _), edit, at, len, token)| {
            // Grammatical strings are ASCII: every index is a boundary.
            let i = at.index(text.len() + 1);
            let j = (i + len).min(text.len());
            match edit {
                0 => format!("{}{}{}", &text[..i], token, &text[i..]),
                1 => format!("{}{}", &text[..i], &text[j..]),
                _ => format!("{}{}{}", &text[..i], token, &text[j..]),
            }
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(4096))]

    /// Never panics; agrees with the model on accept/reject and value;
    /// whatever it accepts reads back from its canonical spelling.
    #[test]
    fn human_syntax_matches_model(
        text in prop_oneof![soup(), shaped(), near_miss(), grammatical().prop_map(|(t, _)| t)]
    ) {
        let parsed = text.parse::<QuotaSpec>().ok();
        prop_assert_eq!(parsed, model(&text), "{:?}", text);
        if let Some(spec) = parsed {
            prop_assert_eq!(spec.to_string().parse::<QuotaSpec>(), Ok(spec));
        }
    }

    /// Every grammatical string is accepted, with the value it spells.
    #[test]
    fn grammatical_strings_are_read((text, spec) in grammatical()) {
        prop_assert_eq!(text.parse::<QuotaSpec>(), Ok(spec), "{:?}", text);
    }
}

#[test]
fn the_briefs_examples() {
    let q = |s: &str| s.parse::<QuotaSpec>().unwrap().quota(1_000_000).unwrap();
    assert_eq!(
        q("100/min, burst 20"),
        Quota::per_minute(100).with_burst(20).at_hz(1_000_000)
    );
    assert_eq!(q("10/s"), Quota::per_second(10).at_hz(1_000_000));
    assert_eq!(
        q("5000/h, burst 100"),
        Quota::per_hour(5000).with_burst(100).at_hz(1_000_000)
    );
    assert_eq!(q("1/d"), Quota::per_day(1).at_hz(1_000_000));
    assert_eq!(
        q("1/250ms"),
        Quota::per_second(4).with_burst(1).at_hz(1_000_000)
    );
    assert_eq!(q("1/250 ticks"), Quota::per_ticks(1, 250).at_hz(1_000_000));
}

// ------------------------------------------------------------ bad configs

#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct Doc {
    #[serde(default)]
    tiers: Vec<TierSpec>,
    table: Option<KeyedSpec>,
    limiter: Option<LimiterConfig>,
}

/// The place and the crate's message (the last line: TOML puts the line,
/// column and a picture of the bad value before it).
fn toml_error(text: &str) -> String {
    let d = toml::Deserializer::parse(text).unwrap();
    let e = config::from_deserializer::<Doc, _>(d).unwrap_err();
    let message = e.message().lines().last().unwrap_or("");
    if e.path().is_empty() {
        message.to_string()
    } else {
        format!("{}: {}", e.path(), message)
    }
}

fn json_error(text: &str) -> String {
    let mut d = serde_json::Deserializer::from_str(text);
    config::from_deserializer::<Doc, _>(&mut d)
        .unwrap_err()
        .to_string()
}

const TIERS: &str = r#"
tiers = [
    { name = "a", quota = "10/s" },
    { name = "b", quota = { rate = 100, per = "min" } },
    { name = "c", quota = "5000/h, burst 0" },
]
"#;

#[test]
fn golden_errors_while_reading() {
    let cases: &[(&str, &str)] = &[
        (TIERS, "tiers[2].quota: quota: the burst is zero"),
        (
            "tiers = [{ name = \"a\", quota = \"100/fortnight\" }]",
            "tiers[0].quota: quota syntax: expected a unit (ms, s, min, h, d or ticks) at byte 4 \
             (form: <rate>/[<count>]<unit>[, burst <n>][, hz <n>])",
        ),
        (
            "tiers = [{ name = \"a\", quota = \"100/min burst 20\" }]",
            "tiers[0].quota: quota syntax: expected ',' or the end at byte 8 \
             (form: <rate>/[<count>]<unit>[, burst <n>][, hz <n>])",
        ),
        (
            "tiers = [{ name = \"a\", quota = { rate = 1, per = \"s\", brust = 2 } }]",
            "tiers[0].quota.brust: unknown field `brust`, expected one of `rate`, `per`, `burst`, `hz`",
        ),
        (
            "tiers = [{ name = \"a\", quota = { rate = 1, per = \"0s\" } }]",
            "tiers[0].quota: quota: the period is zero",
        ),
        (
            "tiers = [{ name = \"a\", quota = { rate = 1, per = \"second s\" } }]",
            "tiers[0].quota.per: quota syntax: expected the end at byte 7 \
             (form: <rate>/[<count>]<unit>[, burst <n>][, hz <n>])",
        ),
        (
            "tiers = [{ name = \"a\", quota = { rate = 1 } }]",
            "tiers[0].quota: missing field `per`",
        ),
        (
            "tiers = [{ name = \"a\", quota = 5 }]",
            "tiers[0].quota: invalid type: integer `5`, expected a quota: \
             \"100/min, burst 20\" or { rate = 100, per = \"min\", burst = 20 }",
        ),
        (
            "[table]\nquota = \"10/s\"\ncapacity = 10\n[table.overrides]\nacct_123 = \"0/min\"",
            "table.overrides.acct_123: quota: the rate has zero cells per period",
        ),
        (
            "[table]\nquota = \"10/s\"\ncapacity = 10\nwhen_full = \"panic\"",
            "table.when_full: unknown variant `panic`, expected one of `deny`, `admit`, `shared`",
        ),
        (
            "[limiter]\nalgorithm = \"gcrb\"\nlimit = 1\nwindow = 1",
            "limiter.algorithm: unknown variant `gcrb`, expected one of `fixed_window`, \
             `sliding_window`, `sliding_log`, `bucketed_window`, `token_bucket`, `leaky_bucket`, `gcra`",
        ),
        (
            "[limiter]\nalgorithm = \"leaky_bucket\"\nlimit = 10\nwindow = 1000\nburst = 5",
            "limiter: leaky_bucket takes no separate burst",
        ),
        (
            "[limiter]\nalgorithm = \"fixed_window\"\nlimit = 10\nwindow = 0",
            "limiter: invalid window limiter: window: the window is zero ticks long",
        ),
        (
            "[limiter]\nalgorithm = \"bucketed_window\"\nlimit = 10\nwindow = 60",
            "limiter: bucketed_window needs a bucket count (buckets)",
        ),
        (
            "[limiter]\nalgorithm = \"gcra\"\nlimit = 10\nwindow = 60\nbuckets = 6",
            "limiter: gcra takes no bucket count",
        ),
    ];
    for (text, expected) in cases {
        assert_eq!(&toml_error(text), expected, "{text}");
    }
    // In full: TOML shows the line and the value.
    let d = toml::Deserializer::parse(TIERS).unwrap();
    assert_eq!(
        config::from_deserializer::<Doc, _>(d)
            .unwrap_err()
            .to_string(),
        "tiers[2].quota: TOML parse error at line 5, column 27\n  |\n\
         5 |     { name = \"c\", quota = \"5000/h, burst 0\" },\n  \
         |                           ^^^^^^^^^^^^^^^^^\nquota: the burst is zero"
    );
    // JSON names the same places (and adds where the value ends).
    assert_eq!(
        json_error(
            r#"{"tiers": [{"name": "a", "quota": "10/s"}, {"name": "b", "quota": "10/s, burst 0"}]}"#
        ),
        "tiers[1].quota: quota: the burst is zero at line 1 column 81"
    );
}

#[test]
fn golden_errors_while_building() {
    let tiers = |text: &str| -> Vec<TierSpec> {
        #[derive(Deserialize)]
        struct T {
            tiers: Vec<TierSpec>,
        }
        toml::from_str::<T>(text).unwrap().tiers
    };
    let err = |t: &[TierSpec], hz| config::build_tiers(t, hz).unwrap_err().to_string();
    // 999 999 937/s cannot be within 1 % at 1 GHz.
    assert_eq!(
        err(
            &tiers("tiers = [{ name = \"a\", quota = \"1/s\" }, { name = \"b\", quota = \"999999937/s\" }]"),
            1_000_000_000
        ),
        "tiers[1].quota: quota: the rate cannot be represented within 1 % at this tick frequency"
    );
    assert_eq!(
        err(&tiers("tiers = [{ name = \"\", quota = \"1/s\" }]"), 1_000),
        "tiers[0].name: tier names are 1 to 32 printable ASCII characters"
    );
    assert_eq!(
        err(&tiers("tiers = [{ name = \"a\", quota = \"1/s\" }]"), 0),
        "tiers[0].quota: quota: the tick frequency is zero"
    );
    let keyed = |text: &str| toml::from_str::<KeyedSpec>(text).unwrap();
    let kerr = |k: &KeyedSpec, hz| k.build(hz, Seed::new(1, 2)).err().unwrap().to_string();
    assert_eq!(
        kerr(&keyed("quota = \"10/s\"\ncapacity = 0"), 1_000),
        "capacity: a keyed table needs a capacity of at least 1"
    );
    assert_eq!(
        kerr(
            &keyed("quota = \"10/s\"\ncapacity = 4\n[overrides]\nacct_123 = \"500/min, hz 1000\""),
            1_000_000
        ),
        "overrides.acct_123: an override must count ticks at the table's frequency"
    );
    assert_eq!(
        kerr(
            &keyed("quota = \"10/s\"\ncapacity = 4\n[overrides]\nbig = \"1/1000000000000d\""),
            1_000_000_000
        ),
        "overrides.big: quota: the emission interval or burst times it overflows 64 bits"
    );
}

/// A capacity no allocator can grant (a typo of a few digits) is an error
/// at `capacity`, not an abort of the process: 2⁴⁰ slots are 16 TiB, and
/// 10¹⁸ slots overflow the size of an allocation.
#[test]
fn a_capacity_past_memory_is_an_error() {
    let build = |capacity: &str| {
        let text = format!("quota = \"10/s\"\ncapacity = {capacity}");
        let spec: KeyedSpec = toml::from_str(&text).unwrap();
        spec.build(1_000, Seed::new(1, 2))
            .err()
            .unwrap()
            .to_string()
    };
    assert_eq!(
        build("1_099_511_627_776"),
        "capacity: a keyed table of 1099511627776 slots (17592186044416 bytes) cannot be allocated"
    );
    assert_eq!(
        build("1_000_000_000_000_000_000"),
        "capacity: a keyed table of 1000000000000000000 slots (16000000000000000000 bytes) \
         cannot be allocated"
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2048))]

    /// What a file's `LimiterConfig` is checked by on read
    /// (`LimiterConfig::validate`) is what building its limiter checks: for
    /// every config a 64-cell sliding log can hold, the same success or the
    /// same error (so a config that was read always builds).
    #[test]
    fn a_config_that_reads_builds(
        algorithm in prop::sample::select(AlgorithmKind::ALL.to_vec()),
        limit in prop_oneof![Just(0u64), 1..=64u64, number(u64::MAX)],
        window in prop_oneof![Just(0u64), number(u64::MAX)],
        burst in prop::option::of(prop_oneof![Just(0u64), number(u64::MAX)]),
        same_burst in any::<bool>(),
        hz in prop_oneof![Just(0u64), number(u64::MAX)],
        buckets in prop::option::of(prop_oneof![Just(0u32), 1..=64u32, any::<u32>()]),
    ) {
        let mut c = LimiterConfig::new(algorithm, limit, window, hz);
        c.burst = if same_burst { burst.map(|_| limit) } else { burst };
        c.buckets = buckets;
        let built = AnyLimiter::<64>::from_config(c).map(|_| ());
        // (validate checks a log against the largest, 2³² − 1 cells.)
        if algorithm != AlgorithmKind::SlidingLog || limit <= 64 {
            prop_assert_eq!(c.validate(), built, "{:?}", c);
        }
    }
}

#[test]
fn a_limiter_config_file_builds_its_limiter() {
    let text = "algorithm = \"sliding_window\"\nlimit = 10\nwindow = 1000\nhz = 1000\n";
    let c: LimiterConfig = toml::from_str(text).unwrap();
    assert_eq!(
        c,
        LimiterConfig::new(AlgorithmKind::SlidingWindow, 10, 1_000, 1_000)
    );
    let l: AnyLimiter = AnyLimiter::from_config(c).unwrap();
    use cellrate::RateLimiter;
    assert_eq!(l.check(0).unwrap().remaining(), 9);
    assert_eq!(toml::to_string(&c).unwrap(), text);
}

#[test]
fn keyed_overrides_apply_to_their_key_only() {
    let mut spec = KeyedSpec::new("100/min".parse().unwrap(), 16);
    spec.overrides = BTreeMap::from([("acct_123".to_string(), "500/min".parse().unwrap())]);
    let t = spec.build(1_000_000, Seed::new(7, 9)).unwrap();
    assert_eq!(t.check_n("acct_123", 0, 500).unwrap().remaining(), 0);
    assert!(t.check_n("acct_124", 0, 101).is_err());
    assert_eq!(t.check_n("acct_124", 0, 100).unwrap().remaining(), 0);
}

#[test]
fn a_reload_changes_quotas_and_keeps_every_clients_state() {
    let spec = |text: &str| toml::from_str::<KeyedSpec>(text).unwrap();
    let base = "capacity = 64\n";
    let table = spec(&format!(
        "quota = \"10/s\"\n{base}[overrides]\nacct_123 = \"100/min\"\nacct_7 = \"1/s\""
    ))
    .build_live(1_000, Seed::new(5, 6))
    .unwrap();
    assert!(table.check_n("acct_123", 0, 100).is_ok());
    assert!(table.check_n("acct_7", 0, 1).is_ok());
    assert!(table.check_n("guest", 0, 10).is_ok());
    // Raise acct_123, drop acct_7's override, halve the default.
    spec(&format!(
        "quota = \"5/s\"\n{base}[overrides]\nacct_123 = \"500/min\""
    ))
    .reload(&table, 1_000, 0)
    .unwrap();
    // acct_123's 100 cells used stay used: 400 of its new 500 are left.
    assert!(table.check_n("acct_123", 0, 401).is_err());
    assert_eq!(table.check_n("acct_123", 0, 400).unwrap().remaining(), 0);
    // guest's 10 cells used are kept up to the new burst (5 at 5/s: 1 s),
    // so it is full again at 1 s, now with burst 5, not 10.
    assert!(table.check_n("guest", 1_000, 6).is_err());
    assert!(table.check_n("guest", 1_000, 5).is_ok());
    // acct_7 now has the default 5/s.
    assert_eq!(table.check("acct_7", 1_000).unwrap().limit(), 5);

    let err = |text: &str| spec(text).reload(&table, 1_000, 0).unwrap_err().to_string();
    assert_eq!(
        err("quota = \"5/s\"\ncapacity = 65"),
        "capacity: fixed when the table is made: build a new table to change it"
    );
    assert_eq!(
        err("quota = \"5/s\"\ncapacity = 64\nwhen_full = \"admit\""),
        "when_full: fixed when the table is made: build a new table to change it"
    );
    assert_eq!(
        err("quota = \"5/s\"\ncapacity = 64\n[overrides]\nnew_key = \"1/s\""),
        "overrides.new_key: this key had no override when the table was made: build a new table to add one"
    );
    assert_eq!(
        err("quota = \"5/s\"\ncapacity = 64\n[overrides]\nacct_123 = \"1/s, hz 10\""),
        "overrides.acct_123: a quota must count ticks at the table's frequency"
    );
    // A refused reload changed nothing: acct_123 still has 500/min.
    assert_eq!(table.check("acct_123", 60_000).unwrap().limit(), 500);
}
