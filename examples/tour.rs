//! The main job: the same traffic through every algorithm, side by side.
//!
//! Run with `cargo run --example tour` (optionally followed by the path of
//! the SVG to write; default `tour.svg`). It prints, per traffic pattern and
//! algorithm, the requests admitted and denied, the largest number admitted
//! in any 1 s sliding window, and for the shaper the mean delay it imposed;
//! then it draws one panel per traffic pattern into the SVG: a row per
//! algorithm, each request a mark at its time (admitted above the row's line,
//! denied below it; for the shaper, the time the request is sent).
//!
//! Every limiter allows 10 requests per second on a millisecond clock, and
//! each pattern starts from fresh limiters, as in the printed table.
//!
//! `docs/tour.svg` is this program's output; CI regenerates it, checks that
//! the committed copy matches, and renders it to PNG.
use std::collections::VecDeque;

use cellrate::compose::{AlgorithmKind, AnyLimiter, LimiterConfig};
use cellrate::{Gcra, Quota, RateLimiter};
use plotters::coord::Shift;
use plotters::element::DashedPathElement;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

const HZ: u64 = 1_000;
const LIMIT: u64 = 10;
const WINDOW: u64 = 1_000;
/// The shaper refuses a request it would have to hold longer than this (ms).
const MAX_DELAY: u64 = 2_000;
const SHAPER: &str = "leaky bucket (shaper)";

/// One traffic pattern: request times in ms.
struct Pattern {
    name: &'static str,
    /// What the panel shows, in a sentence or two.
    note: [&'static str; 2],
    times: Vec<u64>,
    /// A span of milliseconds to draw wide, one slot per millisecond, for
    /// requests that share a millisecond; the rest of the axis is compressed.
    zoom: Option<(u64, u64)>,
}

fn every(start: u64, end: u64, gap: u64) -> impl Iterator<Item = u64> {
    (start..end).step_by(gap as usize)
}

fn patterns() -> Vec<Pattern> {
    vec![
        Pattern {
            name: "steady (12.5/s)",
            note: [
                "A request every 80 ms, 25 % over the limit. The fixed window and the log admit 10, then deny until a second has passed;",
                "the token bucket's 10 spare tokens absorb the excess; the meter (no burst) denies every other one; the shaper delays.",
            ],
            times: every(0, 3_000, 80).collect(),
            zoom: None,
        },
        Pattern {
            name: "burst then idle",
            // 20 requests in one second, then silence.
            note: [
                "20 requests in the first second, one every 50 ms. Windows and the meter admit 10; the token bucket spends its",
                "10 tokens and what refills meanwhile; GCRA admits its burst of 5 and more as it refills; the shaper sends all 20.",
            ],
            times: every(0, 1_000, 50).collect(),
            zoom: None,
        },
        Pattern {
            name: "window-boundary burst",
            // 10 in the last ms of a window, 10 in the first ms of the next.
            note: [
                "10 requests at 999 ms and 10 at 1000 ms, across the fixed window's edge. The fixed window counts each window",
                "on its own and admits all 20 within 2 ms, twice the limit; every other algorithm admits at most 10 in any 1 s.",
            ],
            times: [999; 10].into_iter().chain([1_000; 10]).collect(),
            zoom: Some((999, 1_001)),
        },
        Pattern {
            name: "sustained overload (40/s)",
            note: [
                "A request every 25 ms for 3 s, four times the limit. Every limiter settles at 10 per second after its burst;",
                "the shaper sends at 10 per second and refuses what it would have to hold more than 2 s.",
            ],
            times: every(0, 3_000, 25).collect(),
            zoom: None,
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
        (
            "bucketed (10 × 100 ms)",
            cfg(AlgorithmKind::BucketedWindow).with_buckets(10),
        ),
        ("token bucket (cap. 10)", cfg(AlgorithmKind::TokenBucket)),
        ("leaky bucket (meter)", cfg(AlgorithmKind::LeakyBucket)),
        ("GCRA (burst 5)", cfg(AlgorithmKind::Gcra).with_burst(5)),
    ]
}

/// One request's fate: admitted at `time` (for the shaper: sent at `time`)
/// or denied at `time`.
#[derive(Clone, Copy)]
struct Mark {
    time: u64,
    admitted: bool,
}

/// What one algorithm did to one pattern, in arrival order.
#[derive(Default)]
struct Outcome {
    marks: Vec<Mark>,
    /// Total delay imposed (shaper only), in ms.
    delay: u64,
}

impl Outcome {
    fn admitted(&self) -> impl Iterator<Item = u64> + '_ {
        self.marks.iter().filter(|m| m.admitted).map(|m| m.time)
    }

    fn denied(&self) -> usize {
        self.marks.iter().filter(|m| !m.admitted).count()
    }

    /// The most admissions in any window `(t − W, t]`.
    fn largest_burst(&self) -> usize {
        let mut times: Vec<u64> = self.admitted().collect();
        times.sort_unstable();
        let mut window = VecDeque::new();
        let mut best = 0;
        for t in times {
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
    let marks = times
        .iter()
        .map(|&time| Mark {
            time,
            admitted: limiter.check(time).is_ok(),
        })
        .collect();
    Outcome { marks, delay: 0 }
}

/// The leaky bucket as a queue: each request gets its departure time, if it
/// is at most `MAX_DELAY` away; admitted marks hold the departure times.
fn shape(times: &[u64]) -> Outcome {
    let shaper = Gcra::new(Quota::per_ticks(LIMIT, WINDOW).with_burst(1).at_hz(HZ));
    let mut out = Outcome::default();
    for &t in times {
        match shaper.reserve_n(t, 1, MAX_DELAY) {
            Ok(r) => {
                out.marks.push(Mark {
                    time: t + r.send_after(),
                    admitted: true,
                });
                out.delay += r.send_after();
            }
            Err(_) => out.marks.push(Mark {
                time: t,
                admitted: false,
            }),
        }
    }
    out
}

/// Every algorithm on one pattern, the shaper last.
fn outcomes(p: &Pattern) -> Vec<(&'static str, Outcome)> {
    let mut rows: Vec<(&str, Outcome)> = configs()
        .into_iter()
        .map(|(name, c)| (name, run(c, &p.times)))
        .collect();
    rows.push((SHAPER, shape(&p.times)));
    rows
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let svg_path = std::env::args().nth(1).unwrap_or_else(|| "tour.svg".into());
    let patterns = patterns();
    println!(
        "{:<27} {:<24} {:>8} {:>7} {:>13} {:>15}",
        "pattern", "algorithm", "admitted", "denied", "largest burst", "mean delay (ms)"
    );
    let mut panels = Vec::new();
    for p in &patterns {
        let rows = outcomes(p);
        for (name, o) in &rows {
            let admitted = o.admitted().count();
            let delay = if *name == SHAPER && admitted > 0 {
                format!("{:.1}", o.delay as f64 / admitted as f64)
            } else {
                "-".into()
            };
            println!(
                "{:<27} {:<24} {:>8} {:>7} {:>13} {:>15}",
                p.name,
                name,
                admitted,
                o.denied(),
                o.largest_burst(),
                delay
            );
        }
        println!();
        panels.push((p, rows));
    }
    draw(&svg_path, &panels)?;
    println!("panels written to {svg_path}");
    Ok(())
}

// ---------------------------------------------------------------------------
// The picture. Everything is placed in pixels; text sizes are in SVG pixels.

const WIDTH: i32 = 1_280;
/// Right edge of the algorithm names.
const NAMES_RIGHT: i32 = 205;
/// The plot area of every panel, left to right.
const PLOT_LEFT: i32 = 225;
const PLOT_RIGHT: i32 = 1_000;
/// Right edges of the three number columns.
const COLUMNS: [(i32, &str); 3] = [
    (1_085, "admitted"),
    (1_155, "denied"),
    (1_265, "most in 1 s"),
];
const ROW_HEIGHT: i32 = 30;
const MARGIN: i32 = 15;

const ADMIT: RGBColor = RGBColor(0, 140, 60);
const DENY: RGBColor = RGBColor(215, 30, 30);
const INK: RGBColor = RGBColor(30, 30, 30);
const MUTED: RGBColor = RGBColor(90, 90, 90);
const RULE: RGBColor = RGBColor(215, 215, 215);
const EDGE: RGBColor = RGBColor(150, 150, 150);

/// A text style `px` SVG pixels high (plotters writes `size / 1.24` into
/// the SVG, so the size given to it is scaled up by that factor).
fn text(px: f64, color: &RGBColor, h: HPos, v: VPos) -> TextStyle<'static> {
    ("sans-serif", px * 1.24)
        .into_font()
        .color(color)
        .pos(Pos::new(h, v))
}

fn bold(px: f64, color: &RGBColor, h: HPos, v: VPos) -> TextStyle<'static> {
    ("sans-serif", px * 1.24)
        .into_font()
        .style(FontStyle::Bold)
        .color(color)
        .pos(Pos::new(h, v))
}

/// A piece of a time axis: milliseconds `from..to` drawn over pixels
/// `left..right`. A zoomed piece gives each millisecond its own slot and
/// labels the slots; a plain piece labels every `step` ms.
struct Piece {
    from: f64,
    to: f64,
    left: f64,
    right: f64,
    zoomed: bool,
    step: u64,
}

impl Piece {
    fn x(&self, ms: f64) -> i32 {
        (self.left + (ms - self.from) / (self.to - self.from) * (self.right - self.left)).round()
            as i32
    }
}

/// A panel's time axis: one plain piece, or a zoomed piece, a break, and a
/// compressed piece for the rest.
struct Axis {
    pieces: Vec<Piece>,
}

impl Axis {
    /// An axis from 0 (or the zoomed span) to past the last mark, in whole
    /// half seconds.
    fn new(zoom: Option<(u64, u64)>, last: u64) -> Self {
        let end = (last / 500 + 1) * 500;
        let (left, right) = (f64::from(PLOT_LEFT), f64::from(PLOT_RIGHT));
        let pieces = match zoom {
            None => vec![Piece {
                from: 0.0,
                to: end as f64,
                left,
                right,
                zoomed: false,
                step: 500,
            }],
            Some((from, to)) => {
                let split = left + 0.5 * (right - left);
                vec![
                    Piece {
                        from: from as f64,
                        to: to as f64,
                        left,
                        right: split,
                        zoomed: true,
                        step: 1,
                    },
                    Piece {
                        from: to as f64,
                        to: end as f64,
                        left: split + 40.0,
                        right,
                        zoomed: false,
                        step: 500,
                    },
                ]
            }
        };
        Axis { pieces }
    }

    /// The x of a time; requests sharing a millisecond are spread across
    /// the middle 80 % of it (`slot` of `slots`, in arrival order), so two
    /// neighbouring milliseconds stay apart. None if the time is off the axis.
    fn x(&self, ms: u64, slot: usize, slots: usize) -> Option<i32> {
        let t = ms as f64 + 0.1 + 0.8 * (slot as f64 + 0.5) / slots as f64;
        self.pieces
            .iter()
            .find(|p| p.from <= t && t <= p.to)
            .map(|p| p.x(t))
    }

    /// Multiples of the window (the fixed window's edges) on the axis.
    fn edges(&self) -> Vec<(i32, bool)> {
        let mut out = Vec::new();
        for p in &self.pieces {
            let first = (p.from / WINDOW as f64).ceil() as u64;
            let last = (p.to / WINDOW as f64).floor() as u64;
            out.extend((first..=last).map(|k| (p.x((k * WINDOW) as f64), p.zoomed)));
        }
        out
    }
}

type Area<'a> = DrawingArea<SVGBackend<'a>, Shift>;
type DrawResult = Result<(), Box<dyn std::error::Error>>;

fn line(area: &Area, from: (i32, i32), to: (i32, i32), color: &RGBColor, width: u32) -> DrawResult {
    area.draw(&PathElement::new(vec![from, to], color.stroke_width(width)))?;
    Ok(())
}

/// One mark: a filled dot above the row's line when admitted, a cross below
/// it when denied.
fn mark(area: &Area, x: i32, row_y: i32, admitted: bool) -> DrawResult {
    if admitted {
        area.draw(&Circle::new((x, row_y - 5), 3, ADMIT.filled()))?;
    } else {
        area.draw(&Cross::new((x, row_y + 5), 3, DENY.stroke_width(2)))?;
    }
    Ok(())
}

const HEADER_HEIGHT: i32 = 125;
/// Title, two note lines and the column headers above the rows.
const PANEL_TOP: i32 = 90;
/// The axis below the rows.
const PANEL_BOTTOM: i32 = 62;

fn panel_height(rows: usize) -> i32 {
    PANEL_TOP + ROW_HEIGHT * rows as i32 + PANEL_BOTTOM
}

fn draw(path: &str, panels: &[(&Pattern, Vec<(&str, Outcome)>)]) -> DrawResult {
    let height = HEADER_HEIGHT
        + panels
            .iter()
            .map(|(_, rows)| panel_height(rows.len()))
            .sum::<i32>()
        + MARGIN;
    let root = SVGBackend::new(path, (WIDTH as u32, height as u32)).into_drawing_area();
    root.fill(&WHITE)?;
    draw_header(&root)?;
    let mut top = HEADER_HEIGHT;
    for (i, (pattern, rows)) in panels.iter().enumerate() {
        draw_panel(&root, top, i + 1, pattern, rows)?;
        top += panel_height(rows.len());
    }
    root.present()?;
    Ok(())
}

fn draw_header(root: &Area) -> DrawResult {
    root.draw(&Text::new(
        "cellrate tour: every algorithm on the same traffic, 10 requests per second each",
        (MARGIN, MARGIN),
        bold(20.0, &INK, HPos::Left, VPos::Top),
    ))?;
    // The legend.
    let y = 62;
    let legend = text(14.0, &INK, HPos::Left, VPos::Center);
    let mut x = MARGIN + 5;
    root.draw(&Circle::new((x, y), 4, ADMIT.filled()))?;
    root.draw(&Text::new(
        "admitted (shaper row: sent at)",
        (x + 12, y),
        legend.clone(),
    ))?;
    x += 270;
    root.draw(&Cross::new((x, y), 4, DENY.stroke_width(2)))?;
    root.draw(&Text::new(
        "denied (shaper row: refused, it would wait over 2 s)",
        (x + 12, y),
        legend.clone(),
    ))?;
    x += 415;
    root.draw(&DashedPathElement::new(
        vec![(x, y - 10), (x, y + 10)],
        5,
        3,
        EDGE.stroke_width(1),
    ))?;
    root.draw(&Text::new(
        "fixed-window edge (every 1 s)",
        (x + 10, y),
        legend.clone(),
    ))?;
    let lines = [
        "Where an axis is zoomed to 1 ms slots, requests that share a millisecond sit side by side in arrival order.",
        "On the right: admitted and denied per algorithm, and the most admitted within any 1 s (red: over the limit of 10).",
    ];
    for (i, l) in lines.iter().enumerate() {
        root.draw(&Text::new(
            *l,
            (MARGIN, y + 24 + 19 * i as i32),
            text(14.0, &MUTED, HPos::Left, VPos::Center),
        ))?;
    }
    Ok(())
}

fn draw_panel(
    root: &Area,
    top: i32,
    number: usize,
    pattern: &Pattern,
    rows: &[(&str, Outcome)],
) -> DrawResult {
    let last = rows
        .iter()
        .flat_map(|(_, o)| o.marks.iter().map(|m| m.time))
        .max()
        .unwrap_or(0);
    let axis = Axis::new(pattern.zoom, last);

    // Separator, title and note.
    line(root, (MARGIN, top), (WIDTH - MARGIN, top), &RULE, 1)?;
    root.draw(&Text::new(
        format!("{number}. {}", pattern.name),
        (MARGIN, top + 10),
        bold(17.0, &INK, HPos::Left, VPos::Top),
    ))?;
    for (i, note) in pattern.note.iter().enumerate() {
        root.draw(&Text::new(
            *note,
            (MARGIN, top + 33 + 17 * i as i32),
            text(14.0, &MUTED, HPos::Left, VPos::Top),
        ))?;
    }

    let rows_top = top + PANEL_TOP;
    let rows_bottom = rows_top + ROW_HEIGHT * rows.len() as i32;
    // Column headers, right-aligned over their numbers.
    for (x, title) in COLUMNS {
        root.draw(&Text::new(
            title,
            (x, rows_top - 4),
            bold(12.5, &MUTED, HPos::Right, VPos::Bottom),
        ))?;
    }

    // Window edges behind the marks.
    for (x, zoomed) in axis.edges() {
        let (color, width) = if zoomed { (&INK, 2) } else { (&EDGE, 1) };
        root.draw(&DashedPathElement::new(
            vec![(x, rows_top - 2), (x, rows_bottom)],
            5,
            3,
            color.stroke_width(width),
        ))?;
        if zoomed {
            root.draw(&Text::new(
                "window edge",
                (x + 5, rows_top - 4),
                text(14.0, &INK, HPos::Left, VPos::Bottom),
            ))?;
        }
    }

    for (i, (name, outcome)) in rows.iter().enumerate() {
        let y = rows_top + ROW_HEIGHT * i as i32 + ROW_HEIGHT / 2;
        root.draw(&Text::new(
            *name,
            (NAMES_RIGHT, y),
            text(14.0, &INK, HPos::Right, VPos::Center),
        ))?;
        for piece in &axis.pieces {
            line(
                root,
                (piece.left.round() as i32, y),
                (piece.right.round() as i32, y),
                &RULE,
                1,
            )?;
        }
        // Spread requests that share a millisecond across it.
        let mut same_ms: Vec<Mark> = Vec::new();
        let flush = |group: &mut Vec<Mark>| -> DrawResult {
            for (slot, m) in group.iter().enumerate() {
                let x = axis.x(m.time, slot, group.len()).ok_or_else(|| {
                    format!("{name}: a mark at {} ms is off the time axis", m.time)
                })?;
                mark(root, x, y, m.admitted)?;
            }
            group.clear();
            Ok(())
        };
        let mut sorted = outcome.marks.clone();
        sorted.sort_by_key(|m| m.time); // stable: arrival order within a ms
        for m in sorted {
            if same_ms.last().is_some_and(|l| l.time != m.time) {
                flush(&mut same_ms)?;
            }
            same_ms.push(m);
        }
        flush(&mut same_ms)?;

        let numbers = [
            outcome.admitted().count(),
            outcome.denied(),
            outcome.largest_burst(),
        ];
        for (column, ((x, _), n)) in COLUMNS.iter().zip(numbers).enumerate() {
            // The last column is the most admitted in any 1 s: over the
            // limit, it shows in red.
            let style = if column == 2 && n > LIMIT as usize {
                bold(14.0, &DENY, HPos::Right, VPos::Center)
            } else {
                text(14.0, &INK, HPos::Right, VPos::Center)
            };
            root.draw(&Text::new(n.to_string(), (*x, y), style))?;
        }
    }

    draw_axis(root, &axis, rows_bottom)
}

fn draw_axis(root: &Area, axis: &Axis, y: i32) -> DrawResult {
    let label = text(14.0, &INK, HPos::Center, VPos::Top);
    for piece in &axis.pieces {
        let (left, right) = (piece.left.round() as i32, piece.right.round() as i32);
        line(root, (left, y), (right, y), &INK, 1)?;
        let first = (piece.from as u64).div_ceil(piece.step) * piece.step;
        let mut ms = first;
        while ms as f64 <= piece.to {
            let x = piece.x(ms as f64);
            line(root, (x, y), (x, y + 5), &INK, 1)?;
            if !piece.zoomed {
                root.draw(&Text::new(ms.to_string(), (x, y + 8), label.clone()))?;
            } else if (ms as f64) < piece.to {
                // A zoomed slot is labelled at its middle: the requests of
                // millisecond `ms` sit between its two ticks.
                let mid = piece.x(ms as f64 + 0.5);
                root.draw(&Text::new(ms.to_string(), (mid, y + 8), label.clone()))?;
            }
            ms += piece.step;
        }
    }
    // The break between a zoomed piece and the rest.
    for pair in axis.pieces.windows(2) {
        let x = ((pair[0].right + pair[1].left) / 2.0).round() as i32;
        for dx in [-4, 4] {
            line(root, (x + dx - 4, y + 6), (x + dx + 4, y - 6), &INK, 2)?;
        }
    }
    let title = if axis.pieces.len() > 1 {
        "time (ms): 1 ms slots, then compressed"
    } else {
        "time (ms)"
    };
    root.draw(&Text::new(
        title,
        ((PLOT_LEFT + PLOT_RIGHT) / 2, y + 28),
        text(14.0, &MUTED, HPos::Center, VPos::Top),
    ))?;
    Ok(())
}
