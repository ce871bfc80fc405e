//! `ratio:` lines, and their medians over several runs of a bench.
//!
//! A bench's paired pass prints one line per ratio, in one of two shapes:
//!
//! ```text
//! ratio: <name>: <median> (quartiles <q1>–<q3>)                 benches/common/paired.rs
//! ratio: <case>: governor ÷ contender <median> (quartiles <q1>–<q3>)   benches/keyed.rs
//! ```
//!
//! The figure is the last word before ` (quartiles` (or the line's last word
//! when there are no quartiles); the name is everything between `ratio: ` and
//! the figure, without a trailing colon. A name may itself hold parentheses
//! (`… ÷ CAS floor (std: sequence lock)`), so the quartiles are found from
//! the right.
//!
//! Over runs, a ratio's summary is the median of the runs' figures (the
//! mean of the two middle ones for an even count) and the lowest and
//! highest run. Every run must print the same names in the same order: a
//! table whose rows come from different sets of runs would mislead.

use std::fmt::Write as _;

/// One `ratio:` line: what the bench named it and the figure it printed.
#[derive(Debug, Clone, PartialEq)]
pub struct Ratio {
    pub name: String,
    pub value: f64,
}

/// Reads one line of a bench's output: `None` if it is not a `ratio:` line,
/// an error if it is one without a finite figure.
pub fn parse_line(line: &str) -> Option<Result<Ratio, String>> {
    let rest = line.trim_end().strip_prefix("ratio: ")?;
    let head = match rest.rfind(" (quartiles") {
        Some(at) => &rest[..at],
        None => rest,
    };
    let Some((name, figure)) = head.rsplit_once(' ') else {
        return Some(Err(format!("`ratio:` line without a name: {line:?}")));
    };
    let name = name.trim_end().trim_end_matches(':').trim();
    if name.is_empty() {
        return Some(Err(format!("`ratio:` line without a name: {line:?}")));
    }
    match figure.parse::<f64>() {
        Ok(value) if value.is_finite() && value >= 0.0 => Some(Ok(Ratio {
            name: name.to_string(),
            value,
        })),
        _ => Some(Err(format!(
            "`ratio:` line whose figure {figure:?} is not a finite non-negative number: {line:?}"
        ))),
    }
}

/// One ratio over all runs.
#[derive(Debug, Clone, PartialEq)]
pub struct Summary {
    pub name: String,
    /// The figure of each run, in run order.
    pub per_run: Vec<f64>,
}

impl Summary {
    /// The median over runs (mean of the two middle figures for an even
    /// number of runs).
    pub fn median(&self) -> f64 {
        let sorted = self.sorted();
        let n = sorted.len();
        if n % 2 == 1 {
            sorted[n / 2]
        } else {
            (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0
        }
    }

    pub fn lowest(&self) -> f64 {
        self.sorted()[0]
    }

    pub fn highest(&self) -> f64 {
        *self
            .sorted()
            .last()
            .expect("a summary has at least one run")
    }

    fn sorted(&self) -> Vec<f64> {
        let mut v = self.per_run.clone();
        v.sort_by(f64::total_cmp);
        v
    }
}

/// Summaries of `runs` (each the ratios of one run, in printed order).
/// Errors if there are no runs, a run prints no ratio, a name repeats
/// within a run, or two runs print different names.
pub fn summarise(runs: &[Vec<Ratio>]) -> Result<Vec<Summary>, String> {
    let Some(first) = runs.first() else {
        return Err("no runs".into());
    };
    if first.is_empty() {
        return Err(
            "the bench printed no `ratio:` lines (does it run a paired pass, \
                    and honour `-- --paired-only`?)"
                .into(),
        );
    }
    for (i, r) in first.iter().enumerate() {
        if first[..i].iter().any(|earlier| earlier.name == r.name) {
            return Err(format!(
                "the ratio {:?} is printed twice in one run",
                r.name
            ));
        }
    }
    for (run, ratios) in runs.iter().enumerate().skip(1) {
        let names = |rs: &[Ratio]| rs.iter().map(|r| r.name.clone()).collect::<Vec<_>>();
        if names(ratios) != names(first) {
            return Err(format!(
                "run {} printed other ratios than run 1:\n  run 1: {:?}\n  run {}: {:?}",
                run + 1,
                names(first),
                run + 1,
                names(ratios)
            ));
        }
    }
    Ok(first
        .iter()
        .enumerate()
        .map(|(i, r)| Summary {
            name: r.name.clone(),
            per_run: runs.iter().map(|run| run[i].value).collect(),
        })
        .collect())
}

/// The summaries as one JSON object:
/// `{"bench": …, "runs": N, "cargo_args": […], "ratios": [{"name", "median",
/// "lowest", "highest", "per_run": […]}, …]}`.
pub fn to_json(bench: &str, cargo_args: &[String], summaries: &[Summary]) -> String {
    let runs = summaries.first().map_or(0, |s| s.per_run.len());
    let mut out = format!(
        "{{\"bench\":{},\"runs\":{runs},\"cargo_args\":[",
        json_string(bench)
    );
    for (i, a) in cargo_args.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str(&json_string(a));
    }
    out.push_str("],\"ratios\":[");
    for (i, s) in summaries.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        let per_run: Vec<String> = s.per_run.iter().map(|v| json_number(*v)).collect();
        let _ = write!(
            out,
            "{{\"name\":{},\"median\":{},\"lowest\":{},\"highest\":{},\"per_run\":[{}]}}",
            json_string(&s.name),
            json_number(s.median()),
            json_number(s.lowest()),
            json_number(s.highest()),
            per_run.join(",")
        );
    }
    out.push_str("]}");
    out
}

/// A finite figure as a JSON number (the benches print two decimals; a
/// median of two runs may need a third).
fn json_number(v: f64) -> String {
    let s = format!("{v:.3}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    s.to_string()
}

/// `s` as a JSON string literal.
fn json_string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ratio(name: &str, value: f64) -> Ratio {
        Ratio {
            name: name.into(),
            value,
        }
    }

    #[test]
    fn reads_the_paired_rs_shape() {
        let r = parse_line("ratio: Gcra::check admitting ÷ CAS floor: 1.12 (quartiles 1.10–1.15)");
        assert_eq!(
            r,
            Some(Ok(ratio("Gcra::check admitting ÷ CAS floor", 1.12)))
        );
    }

    #[test]
    fn reads_a_name_that_holds_parentheses() {
        let r = parse_line(
            "ratio: SlidingLog<64> denying ÷ CAS floor (std: sequence lock): 0.57 (quartiles 0.55–0.60)",
        );
        assert_eq!(
            r,
            Some(Ok(ratio(
                "SlidingLog<64> denying ÷ CAS floor (std: sequence lock)",
                0.57
            )))
        );
    }

    #[test]
    fn reads_the_keyed_rs_shape() {
        let r = parse_line("ratio: cellrate rr_1k: governor ÷ contender 2.27 (quartiles 2.1–2.4)");
        assert_eq!(
            r,
            Some(Ok(ratio("cellrate rr_1k: governor ÷ contender", 2.27)))
        );
    }

    #[test]
    fn reads_a_line_without_quartiles() {
        let r = parse_line("ratio: gcra_script ÷ incr_expire, single: 0.91");
        assert_eq!(
            r,
            Some(Ok(ratio("gcra_script ÷ incr_expire, single", 0.91)))
        );
    }

    #[test]
    fn ignores_other_lines_and_rejects_bad_figures() {
        assert_eq!(parse_line("Benchmarking gcra/check_admit"), None);
        assert_eq!(parse_line("memory: governor 31.6 B per key"), None);
        assert!(matches!(
            parse_line("ratio: x: NaN (quartiles 1–2)"),
            Some(Err(_))
        ));
        assert!(matches!(parse_line("ratio: x: inf"), Some(Err(_))));
        assert!(matches!(parse_line("ratio: x: -1.0"), Some(Err(_))));
        assert!(matches!(parse_line("ratio: 1.0"), Some(Err(_))));
        assert!(matches!(parse_line("ratio: x: fast"), Some(Err(_))));
    }

    #[test]
    fn a_run_keeps_its_ratios_in_order() {
        let out = "Gnuplot not found\nratio: b: 2.00 (quartiles 1.9–2.1)\nnoise\nratio: a: 1.00\n";
        assert_eq!(
            out.lines()
                .filter_map(parse_line)
                .collect::<Result<Vec<_>, _>>()
                .unwrap(),
            vec![ratio("b", 2.0), ratio("a", 1.0)]
        );
    }

    #[test]
    fn medians_over_odd_and_even_runs() {
        let s = |v: &[f64]| Summary {
            name: "x".into(),
            per_run: v.to_vec(),
        };
        assert_eq!(s(&[3.0, 1.0, 2.0]).median(), 2.0);
        assert_eq!(s(&[1.0, 9.0, 2.0, 3.0]).median(), 2.5);
        assert_eq!(s(&[1.2]).median(), 1.2);
        let t = s(&[1.5, 1.1, 1.3]);
        assert_eq!((t.lowest(), t.highest()), (1.1, 1.5));
    }

    #[test]
    fn summaries_follow_the_printed_order() {
        let runs = vec![
            vec![ratio("b", 2.0), ratio("a", 1.0)],
            vec![ratio("b", 4.0), ratio("a", 1.5)],
            vec![ratio("b", 3.0), ratio("a", 0.5)],
        ];
        let s = summarise(&runs).unwrap();
        assert_eq!(s.len(), 2);
        assert_eq!((s[0].name.as_str(), s[0].median()), ("b", 3.0));
        assert_eq!(s[0].per_run, vec![2.0, 4.0, 3.0]);
        assert_eq!((s[1].name.as_str(), s[1].median()), ("a", 1.0));
    }

    #[test]
    fn runs_that_disagree_are_an_error() {
        assert!(summarise(&[]).is_err());
        assert!(summarise(&[vec![]]).is_err());
        assert!(summarise(&[vec![ratio("a", 1.0), ratio("a", 2.0)]]).is_err());
        assert!(summarise(&[vec![ratio("a", 1.0)], vec![ratio("b", 1.0)]]).is_err());
        assert!(summarise(&[vec![ratio("a", 1.0)], vec![]]).is_err());
    }

    #[test]
    fn json_escapes_and_lists_every_run() {
        let s = summarise(&[
            vec![ratio("a \"q\" ÷ b\\c", 1.25)],
            vec![ratio("a \"q\" ÷ b\\c", 1.5)],
        ])
        .unwrap();
        let json = to_json("gcra", &["--features".into(), "std".into()], &s);
        assert_eq!(
            json,
            "{\"bench\":\"gcra\",\"runs\":2,\"cargo_args\":[\"--features\",\"std\"],\"ratios\":[\
             {\"name\":\"a \\\"q\\\" ÷ b\\\\c\",\"median\":1.375,\"lowest\":1.25,\"highest\":1.5,\
             \"per_run\":[1.25,1.5]}]}"
        );
    }
}
