//! Runs a cellrate bench's paired-ratio pass several times and prints, per
//! ratio, the median over the runs and the lowest and highest run.
//!
//! ```text
//! bench-runner [--runs N] [--json] [--write DOC] [--name NAME] BENCH [CARGO_ARGS ...]
//! bench-runner --check [README DOC]
//! ```
//!
//! Run it from the repository root, e.g.
//! `cargo run --manifest-path tools/bench-runner/Cargo.toml -- --runs 5 family --features std`.
//! Each run is `cargo bench --quiet --bench BENCH CARGO_ARGS -- --paired-only`
//! (the bench's `ratio:` lines, criterion skipped); any bench that prints
//! `ratio:` lines and honours `--paired-only` works. Progress goes to
//! stderr, the result to stdout: a markdown table, or with `--json` one JSON
//! object. `--write DOC` also puts the table between DOC's
//! `<!-- generated:BENCH -->` and `<!-- end:BENCH -->` lines, or NAME's
//! with `--name NAME` (a second table of one bench, say built with other
//! `RUSTFLAGS`; the flags in the environment are written into the table's
//! command line).
//!
//! `--check` lists every figure README (default `README.md`) quotes that is
//! not a median in DOC's (default `docs/benchmarks.md`) generated tables,
//! and fails if there is one. See `doc.rs` for what counts as a figure.
//!
//! Why several runs: on a shared machine a whole run can land in a slow
//! phase (a neighbour on the same physical core moves every ratio of that
//! run); the median over runs outvotes it. docs/benchmarks.md has the
//! method.

mod doc;
mod ratios;

use std::io::{BufRead, BufReader};
use std::process::{Command, ExitCode, Stdio};

const USAGE: &str = "\
usage: bench-runner [--runs N] [--json] [--write DOC] [--name NAME] BENCH [CARGO_ARGS ...]
       bench-runner --check [README DOC]

Runs `cargo bench --quiet --bench BENCH CARGO_ARGS -- --paired-only` N times
(default 5) from the current directory (the repository root) and prints, per
`ratio:` line, the median over runs and the lowest and highest run: a markdown
table, or one JSON object with --json. --write DOC also replaces the text
between DOC's `<!-- generated:BENCH -->` and `<!-- end:BENCH -->` lines
(NAME's instead of BENCH's with --name NAME). RUSTFLAGS, if set, is
written into the table's command line.

--check lists the figures (`1.04×`) README (default README.md) quotes that
are not medians in DOC's (default docs/benchmarks.md) generated tables.";

/// What the command line asks for.
#[derive(Debug, PartialEq)]
enum Task {
    Run {
        runs: usize,
        json: bool,
        write: Option<String>,
        /// The region `--write` fills: the bench's name unless `--name`.
        name: String,
        bench: String,
        cargo_args: Vec<String>,
    },
    Check {
        readme: String,
        docs: String,
    },
}

fn parse_args(args: &[String]) -> Result<Task, String> {
    if args.first().map(String::as_str) == Some("--check") {
        return match &args[1..] {
            [] => Ok(Task::Check {
                readme: "README.md".into(),
                docs: "docs/benchmarks.md".into(),
            }),
            [readme, docs] => Ok(Task::Check {
                readme: readme.clone(),
                docs: docs.clone(),
            }),
            _ => Err("--check takes no paths or both README and DOC".into()),
        };
    }
    let (mut runs, mut json, mut write, mut name) = (5, false, None, None);
    let mut rest = args;
    while let Some((first, tail)) = rest.split_first() {
        match first.as_str() {
            "--runs" => {
                let n = tail.first().ok_or("--runs needs a number")?;
                runs = n
                    .parse()
                    .ok()
                    .filter(|n| *n > 0)
                    .ok_or_else(|| format!("--runs {n}: not a positive number"))?;
                rest = &tail[1..];
            }
            "--json" => {
                json = true;
                rest = tail;
            }
            "--write" => {
                write = Some(tail.first().ok_or("--write needs a file")?.clone());
                rest = &tail[1..];
            }
            "--name" => {
                let n = tail.first().ok_or("--name needs a table name")?;
                if n.is_empty()
                    || !n
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_'))
                {
                    return Err(format!("--name {n}: use letters, digits, `-` and `_`"));
                }
                name = Some(n.clone());
                rest = &tail[1..];
            }
            "-h" | "--help" => return Err(String::new()),
            flag if flag.starts_with('-') => return Err(format!("unknown option {flag}")),
            _ => break,
        }
    }
    let (bench, cargo_args) = rest.split_first().ok_or("which bench?")?;
    Ok(Task::Run {
        runs,
        json,
        write,
        name: name.unwrap_or_else(|| bench.clone()),
        bench: bench.clone(),
        cargo_args: cargo_args.to_vec(),
    })
}

/// One run of the bench's paired pass: its `ratio:` lines, echoed to
/// stderr as they come.
fn run_once(bench: &str, cargo_args: &[String], label: &str) -> Result<Vec<ratios::Ratio>, String> {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut child = Command::new(cargo)
        .args(["bench", "--quiet", "--bench", bench])
        .args(cargo_args)
        .args(["--", "--paired-only"])
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .map_err(|e| format!("cannot start cargo: {e}"))?;
    let stdout = child.stdout.take().expect("stdout is piped");
    let mut found = Vec::new();
    for line in BufReader::new(stdout).lines() {
        let line = line.map_err(|e| format!("reading the bench's output: {e}"))?;
        if let Some(ratio) = ratios::parse_line(&line) {
            eprintln!("{label}: {line}");
            found.push(ratio?);
        }
    }
    let status = child
        .wait()
        .map_err(|e| format!("waiting for cargo: {e}"))?;
    if !status.success() {
        return Err(format!("`cargo bench --bench {bench}` failed ({status})"));
    }
    Ok(found)
}

/// When and where the figures were measured: UTC date, CPU model, CPUs,
/// and the load average when the runs started (how busy the neighbours were).
fn provenance() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let (y, m, d) = civil_date(secs / 86_400);
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|info| {
            info.lines()
                .find_map(|l| l.strip_prefix("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, model)| model.trim().to_string())
        })
        .unwrap_or_else(|| "unknown CPU".into());
    let cpus = std::thread::available_parallelism().map_or(0, |n| n.get());
    let load = std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|l| {
            l.split_whitespace()
                .next()
                .map(|one_minute| format!(", load average {one_minute} at the start"))
        })
        .unwrap_or_default();
    format!("{y:04}-{m:02}-{d:02}, {cpu}, {cpus} CPUs{load}")
}

/// The proleptic Gregorian (year, month, day) of `days` after 1970-01-01.
fn civil_date(days: u64) -> (u64, u64, u64) {
    // Count from 0000-03-01 so that the leap day ends each 4-year cycle
    // and each 400-year era (146 097 days) repeats exactly.
    let from_era_start = days + 719_468; // days from 0000-03-01 to 1970-01-01
    let era = from_era_start / 146_097;
    let day_of_era = from_era_start % 146_097;
    // Years into the era: 365 days a year, less a day back every 4 years
    // (1 460 days), one more every 100 (36 524), one less every 400.
    let year_of_era =
        (day_of_era - day_of_era / 1_460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    // Months from March: 31, 30, 31, 30, 31, 31, 30, 31, 30, 31, 31, 29/28,
    // a 153-day pattern every five months.
    let month_from_march = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * month_from_march + 2) / 5 + 1;
    let month = if month_from_march < 10 {
        month_from_march + 3
    } else {
        month_from_march - 9
    };
    let year = era * 400 + year_of_era + u64::from(month <= 2);
    (year, month, day)
}

fn run(task: Task) -> Result<(), String> {
    match task {
        Task::Check { readme, docs } => {
            let read = |p: &str| std::fs::read_to_string(p).map_err(|e| format!("{p}: {e}"));
            let problems = doc::check(&read(&readme)?, &read(&docs)?)?;
            if problems.is_empty() {
                eprintln!("every figure in {readme} is a median in {docs}'s generated tables");
                return Ok(());
            }
            for p in &problems {
                println!("{readme}: {p}");
            }
            Err(format!(
                "{} figure(s) in {readme} are not in {docs}'s generated tables",
                problems.len()
            ))
        }
        Task::Run {
            runs,
            json,
            write,
            name,
            bench,
            cargo_args,
        } => {
            // Refuse a missing region before spending minutes on the runs.
            let doc_text = match &write {
                Some(path) => {
                    let text = std::fs::read_to_string(path).map_err(|e| format!("{path}: {e}"))?;
                    doc::replace_region(&text, &name, "").map_err(|e| format!("{path}: {e}"))?;
                    Some(text)
                }
                None => None,
            };
            let provenance = provenance();
            let mut all = Vec::with_capacity(runs);
            for i in 1..=runs {
                all.push(run_once(&bench, &cargo_args, &format!("run {i}/{runs}"))?);
            }
            let summaries = ratios::summarise(&all).map_err(|e| format!("{bench}: {e}"))?;
            let command = command_line(
                std::env::var("RUSTFLAGS").ok().as_deref(),
                runs,
                &name,
                &bench,
                &cargo_args,
            );
            let table = doc::render(&command, &provenance, &summaries);
            if json {
                println!("{}", ratios::to_json(&bench, &cargo_args, &summaries));
            } else {
                print!("{table}");
            }
            if let (Some(path), Some(text)) = (write, doc_text) {
                let new = doc::replace_region(&text, &name, &table)?;
                std::fs::write(&path, new).map_err(|e| format!("{path}: {e}"))?;
                eprintln!("wrote the `{name}` table into {path}");
            }
            Ok(())
        }
    }
}

/// The command a table says it was made by: the flags it was built with
/// (non-empty `RUSTFLAGS`), the runs, the table's name when it is not the
/// bench's, the bench and cargo's arguments.
fn command_line(
    rustflags: Option<&str>,
    runs: usize,
    name: &str,
    bench: &str,
    cargo_args: &[String],
) -> String {
    let mut words = Vec::new();
    if let Some(flags) = rustflags.map(str::trim).filter(|f| !f.is_empty()) {
        words.push(format!("RUSTFLAGS='{flags}'"));
    }
    words.push(format!("bench-runner --runs {runs}"));
    if name != bench {
        words.push(format!("--name {name}"));
    }
    words.push(bench.to_string());
    words.extend(cargo_args.iter().cloned());
    words.join(" ")
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let task = match parse_args(&args) {
        Ok(task) => task,
        Err(e) => {
            if !e.is_empty() {
                eprintln!("bench-runner: {e}\n");
            }
            eprintln!("{USAGE}");
            return ExitCode::from(2);
        }
    };
    match run(task) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("bench-runner: {e}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn options_come_before_the_bench_and_the_rest_goes_to_cargo() {
        assert_eq!(
            parse_args(&args(
                "--runs 3 --json --write docs/b.md family --features std"
            )),
            Ok(Task::Run {
                runs: 3,
                json: true,
                write: Some("docs/b.md".into()),
                name: "family".into(),
                bench: "family".into(),
                cargo_args: args("--features std"),
            })
        );
        assert_eq!(
            parse_args(&args("gcra --runs 3")),
            Ok(Task::Run {
                runs: 5,
                json: false,
                write: None,
                name: "gcra".into(),
                bench: "gcra".into(),
                cargo_args: args("--runs 3"),
            })
        );
        assert_eq!(
            parse_args(&args("--name keyed-v2 --write d.md keyed")),
            Ok(Task::Run {
                runs: 5,
                json: false,
                write: Some("d.md".into()),
                name: "keyed-v2".into(),
                bench: "keyed".into(),
                cargo_args: vec![],
            })
        );
    }

    #[test]
    fn the_command_line_names_the_flags_and_the_table() {
        assert_eq!(
            command_line(
                Some(" -C target-cpu=x86-64-v2 "),
                5,
                "keyed-v2",
                "keyed",
                &[]
            ),
            "RUSTFLAGS='-C target-cpu=x86-64-v2' bench-runner --runs 5 --name keyed-v2 keyed"
        );
        assert_eq!(
            command_line(Some(""), 3, "family", "family", &args("--features std")),
            "bench-runner --runs 3 family --features std"
        );
        assert_eq!(
            command_line(None, 5, "gcra", "gcra", &[]),
            "bench-runner --runs 5 gcra"
        );
    }

    #[test]
    fn check_takes_no_paths_or_both() {
        assert_eq!(
            parse_args(&args("--check")),
            Ok(Task::Check {
                readme: "README.md".into(),
                docs: "docs/benchmarks.md".into()
            })
        );
        assert_eq!(
            parse_args(&args("--check R.md D.md")),
            Ok(Task::Check {
                readme: "R.md".into(),
                docs: "D.md".into()
            })
        );
        assert!(parse_args(&args("--check R.md")).is_err());
    }

    #[test]
    fn bad_command_lines_are_errors() {
        for bad in [
            "",
            "--runs",
            "--runs 0 gcra",
            "--runs x gcra",
            "--write",
            "--fast gcra",
            "--name",
            "--name a<b gcra",
        ] {
            assert!(parse_args(&args(bad)).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn civil_dates() {
        // Day numbers from `date -u -d DATE +%s` ÷ 86 400.
        assert_eq!(civil_date(0), (1970, 1, 1));
        assert_eq!(civil_date(11_016), (2000, 2, 29));
        assert_eq!(civil_date(11_017), (2000, 3, 1));
        assert_eq!(civil_date(20_788), (2026, 12, 1));
        assert_eq!(civil_date(47_541), (2100, 3, 1));
        assert_eq!(civil_date(47_540), (2100, 2, 28));
    }
}
