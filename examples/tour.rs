//! The main job: the same traffic through every algorithm, side by side.
//!
//! Run with `cargo run --example tour` (optionally followed by the path of
//! the SVG to write; default `tour.svg`). It prints, per traffic pattern and
//! algorithm, the requests admitted and denied, the largest number admitted
//! in any 1 s sliding window, and for the shaper the mean delay it imposed;
//! then it draws one timeline per algorithm (admitted and denied requests
//! over time) into the SVG.
//!
//! Every limiter allows 10 requests per second on a millisecond clock.
use std::collections::VecDeque;

use cellrate::compose::{AlgorithmKind, AnyLimiter, LimiterConfig};
use cellrate::{Gcra, Quota, RateLimiter};
use plotters::prelude::*;

const HZ: u64 = 1_000;
const LIMIT: u64 = 10;
const WINDOW: u64 = 1_000;

/// One traffic pattern: request times in ms.
struct Pattern {
    name: &'static str,
    times: Vec<u64>,
}

fn every(start: u64, end: u64, gap: u64) -> impl Iterator<Item = u64> {
    (start..end).step_by(gap as usize)
}

fn patterns() -> Vec<Pattern> {
    vec![
        Pattern {
            name: "steady (12.5/s)",
            times: every(0, 3_000, 80).collect(),
        },
        Pattern {
            name: "burst then idle",
            // 20 requests in one second, then silence.
            times: every(0, 1_000, 50).collect(),
        },
        Pattern {
            name: "window-boundary burst",
            // 10 in the last ms of a window, 10 in the first ms of the next.
            times: [999; 10].into_iter().chain([1_000; 10]).collect(),
        },
        Pattern {
            name: "sustained overload (40/s)",
            times: every(0, 3_000, 25).collect(),
        },
    ]
}

/// The algorithms, as configurations (the shaper is handled apart).
fn configs() -> Vec<(&'static str, LimiterConfig)> {
    let cfg = |k| LimiterConfig::new(k, LIMIT, WINDOW, HZ);
    vec![
        ("fixed window", cfg(AlgorithmKind::FixedWindow)),
        ("sliding window", cfg(AlgorithmKind::SlidingWindow)),
        ("sliding log", cfg(AlgorithmKind::SlidingLog)),
        ("token bucket (cap. 10)", cfg(AlgorithmKind::TokenBucket)),
        ("leaky bucket (meter)", cfg(AlgorithmKind::LeakyBucket)),
        ("GCRA (burst 5)", cfg(AlgorithmKind::Gcra).with_burst(5)),
    ]
}

/// What one algorithm did to one pattern.
#[derive(Default)]
struct Outcome {
    admitted: Vec<u64>,
    denied: Vec<u64>,
    /// Total delay imposed (shaper only), in ms.
    delay: u64,
}

impl Outcome {
    /// The most admissions in any window `(t − W, t]`.
    fn largest_burst(&self) -> usize {
        let mut window = VecDeque::new();
        let mut best = 0;
        for &t in &self.admitted {
            window.push_back(t);
            while window.front().is_some_and(|&f| f + WINDOW <= t) {
                window.pop_front();
            }
            best = best.max(window.len());
        }
        best
    }
}

fn run(config: LimiterConfig, times: &[u64]) -> Outcome {
    let limiter: AnyLimiter<16> = AnyLimiter::from_config(config).expect("valid configuration");
    let mut out = Outcome::default();
    for &t in times {
        match limiter.check(t) {
            Ok(_) => out.admitted.push(t),
            Err(_) => out.denied.push(t),
        }
    }
    out
}

/// The leaky bucket as a queue: each request gets its departure time, if it
/// is at most 2 s away; `admitted` holds the departure times.
fn shape(times: &[u64]) -> Outcome {
    let shaper = Gcra::new(Quota::per_ticks(LIMIT, WINDOW).with_burst(1).at_hz(HZ));
    let mut out = Outcome::default();
    for &t in times {
        match shaper.reserve_n(t, 1, 2_000) {
            Ok(r) => {
                out.admitted.push(t + r.send_after());
                out.delay += r.send_after();
            }
            Err(_) => out.denied.push(t),
        }
    }
    out
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let svg_path = std::env::args().nth(1).unwrap_or_else(|| "tour.svg".into());
    let patterns = patterns();
    println!(
        "{:<27} {:<24} {:>8} {:>7} {:>13} {:>15}",
        "pattern", "algorithm", "admitted", "denied", "largest burst", "mean delay (ms)"
    );
    for p in &patterns {
        let mut rows: Vec<(&str, Outcome)> = configs()
            .into_iter()
            .map(|(name, c)| (name, run(c, &p.times)))
            .collect();
        rows.push(("leaky bucket (shaper)", shape(&p.times)));
        for (name, o) in &rows {
            let delay = if *name == "leaky bucket (shaper)" && !o.admitted.is_empty() {
                format!("{:.1}", o.delay as f64 / o.admitted.len() as f64)
            } else {
                "-".into()
            };
            println!(
                "{:<27} {:<24} {:>8} {:>7} {:>13} {:>15}",
                p.name,
                name,
                o.admitted.len(),
                o.denied.len(),
                o.largest_burst(),
                delay
            );
        }
        println!();
    }

    // The picture: the four patterns one after another, 4 s apart.
    let mut timeline = Vec::new();
    for (i, p) in patterns.iter().enumerate() {
        timeline.extend(p.times.iter().map(|t| t + 4_000 * i as u64));
    }
    let mut rows: Vec<(&str, Outcome)> = configs()
        .into_iter()
        .map(|(name, c)| (name, run(c, &timeline)))
        .collect();
    rows.push(("leaky bucket (shaper)", shape(&timeline)));
    draw(&svg_path, &patterns, &rows)?;
    println!("timelines written to {svg_path}");
    Ok(())
}

fn draw(
    path: &str,
    patterns: &[Pattern],
    rows: &[(&str, Outcome)],
) -> Result<(), Box<dyn std::error::Error>> {
    let root = SVGBackend::new(path, (1_200, 80 + 60 * rows.len() as u32)).into_drawing_area();
    root.fill(&WHITE)?;
    let end = 4_000 * patterns.len() as u64;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            "cellrate tour: 10 requests/s, admitted (green) and denied (red)",
            ("sans-serif", 20),
        )
        .margin(10)
        .x_label_area_size(30)
        .y_label_area_size(180)
        .build_cartesian_2d(0u64..end, -0.5f64..(rows.len() as f64 - 0.5))?;
    let names: Vec<&str> = rows.iter().map(|(n, _)| *n).collect();
    chart
        .configure_mesh()
        .disable_y_mesh()
        .y_labels(rows.len())
        .y_label_formatter(&|y| {
            let i = y.round();
            if (y - i).abs() < 1e-6 && i >= 0.0 && (i as usize) < names.len() {
                names[names.len() - 1 - i as usize].to_string()
            } else {
                String::new()
            }
        })
        .x_desc("time (ms); patterns: steady | burst then idle | window-boundary burst | overload")
        .draw()?;
    for (i, (_, o)) in rows.iter().enumerate() {
        let y = (rows.len() - 1 - i) as f64;
        chart.draw_series(
            o.admitted
                .iter()
                .map(|&t| Circle::new((t, y + 0.12), 3, GREEN.filled())),
        )?;
        chart.draw_series(
            o.denied
                .iter()
                .map(|&t| Cross::new((t, y - 0.12), 3, RED.stroke_width(1))),
        )?;
    }
    root.present()?;
    Ok(())
}
