//! Metering a synthetic packet trace with the RFC 2697 and RFC 2698 markers.
//!
//! The trace: 1 000 flows over 2 simulated seconds on a nanosecond clock.
//! Half are Poisson sources (exponential gaps) with mean rates from 0.5× to
//! 2× the committed rate; half are on/off sources (exponential on and off
//! periods, sending back to back at 4× the committed rate while on, 1× on
//! average). Packet sizes follow a simple IMIX: 64 B (50 %), 576 B (25 %),
//! 1 500 B (25 %). A tiny xorshift generator makes it reproducible.
//!
//! Every flow shares one profile and has its own 16-byte state. The program
//! meters the trace three ways — per packet with its own timestamp; in
//! receive bursts of 32 that share one timestamp, per packet; and the same
//! bursts grouped by flow through `mark_batch_local` — checks that the last
//! two agree, and prints packets per second and the colour shares by class
//! next to the RFC ceilings (green ≤ CBS + CIR·t; green + yellow ≤
//! CBS + EBS + CIR·t for srTCM and ≤ PBS + PIR·t for trTCM, per flow).
//!
//! With 1 000 flows a receive burst of 32 holds about one packet per flow,
//! so grouping by flow costs more than `mark_batch_local` saves: batches pay
//! for bursts of one flow (a NIC queue per flow, or elephant flows), as
//! `benches/meter.rs` measures.
//!
//! Run with `cargo run --release --example packet_meter`.
use std::time::Instant;

use cellrate::meter::{Color, Flow, LocalFlow, Meter, SrTcm, TrTcm};

const HZ: u64 = 1_000_000_000;
const FLOWS: usize = 1_000;
const DURATION: u64 = 2 * HZ;
/// Committed rate per flow: 1 MB/s (8 Mb/s).
const CIR: u64 = 1_000_000;
const CBS: u64 = 16_384;
const EBS: u64 = 32_768;
const PIR: u64 = 1_500_000;
const PBS: u64 = 32_768;
const BURST: usize = 32;
/// On/off sources: sending rate while on (bytes per second), mean on and
/// off periods (seconds).
const ON_PEAK: f64 = 4.0 * CIR as f64;
const ON_MEAN_S: f64 = 0.050;
const OFF_MEAN_S: f64 = 0.150;

/// xorshift64* (Vigna, "An experimental exploration of Marsaglia's xorshift
/// generators, scrambled", 2016).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    /// Uniform in (0, 1].
    fn unit(&mut self) -> f64 {
        ((self.next() >> 11) + 1) as f64 / (1u64 << 53) as f64
    }
    /// Exponential with the given mean.
    fn exp(&mut self, mean: f64) -> f64 {
        -self.unit().ln() * mean
    }
    fn size(&mut self) -> u64 {
        match self.next() % 4 {
            0 | 1 => 64,
            2 => 576,
            _ => 1_500,
        }
    }
}

const MEAN_SIZE: f64 = (64.0 * 2.0 + 576.0 + 1_500.0) / 4.0;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Class {
    PoissonUnder,
    PoissonOver,
    OnOff,
}

struct Packet {
    time: u64,
    flow: u32,
    size: u64,
}

fn trace(rng: &mut Rng) -> (Vec<Packet>, Vec<Class>) {
    let mut packets = Vec::new();
    let mut classes = Vec::with_capacity(FLOWS);
    for flow in 0..FLOWS {
        if flow % 2 == 0 {
            // Poisson: mean rate between 0.5 and 2 × CIR.
            let rate = CIR as f64 * (0.5 + 1.5 * rng.unit());
            classes.push(if rate <= CIR as f64 {
                Class::PoissonUnder
            } else {
                Class::PoissonOver
            });
            let mean_gap = MEAN_SIZE / rate * HZ as f64;
            let mut t = rng.exp(mean_gap);
            while (t as u64) < DURATION {
                packets.push(Packet {
                    time: t as u64,
                    flow: flow as u32,
                    size: rng.size(),
                });
                t += rng.exp(mean_gap);
            }
        } else {
            // On/off: on 50 ms, off 150 ms on average; 4 × CIR while on.
            classes.push(Class::OnOff);
            let peak = ON_PEAK;
            let (on, off) = (ON_MEAN_S * HZ as f64, OFF_MEAN_S * HZ as f64);
            let mut t = rng.exp(off);
            while (t as u64) < DURATION {
                let end = t + rng.exp(on);
                while t < end && (t as u64) < DURATION {
                    let size = rng.size();
                    packets.push(Packet {
                        time: t as u64,
                        flow: flow as u32,
                        size,
                    });
                    t += size as f64 / peak * HZ as f64;
                }
                t += rng.exp(off);
            }
        }
    }
    packets.sort_unstable_by_key(|p| p.time);
    (packets, classes)
}

/// Bytes per flow and colour.
type Tally = Vec<[u64; 3]>;

fn per_packet<M: Meter>(m: &M, packets: &[Packet]) -> (Tally, f64) {
    let mut flows = vec![LocalFlow::new(); FLOWS];
    let mut tally = vec![[0u64; 3]; FLOWS];
    let start = Instant::now();
    for p in packets {
        let color = m.mark_local(&mut flows[p.flow as usize], p.time, p.size);
        tally[p.flow as usize][color as usize] += p.size;
    }
    (tally, packets.len() as f64 / start.elapsed().as_secs_f64())
}

fn per_packet_shared<M: Meter>(m: &M, packets: &[Packet]) -> f64 {
    let flows: Vec<Flow> = (0..FLOWS).map(|_| Flow::new()).collect();
    let mut greens = 0u64;
    let start = Instant::now();
    for p in packets {
        greens += (m.mark(&flows[p.flow as usize], p.time, p.size) == Color::Green) as u64;
    }
    let pps = packets.len() as f64 / start.elapsed().as_secs_f64();
    std::hint::black_box(greens);
    pps
}

/// Receive bursts of 32 stamped with the burst's last arrival time (as a
/// poll-mode driver reads the clock once per burst), marked packet by packet.
fn bursts_per_packet<M: Meter>(m: &M, packets: &[Packet]) -> (Tally, f64) {
    let mut flows = vec![LocalFlow::new(); FLOWS];
    let mut tally = vec![[0u64; 3]; FLOWS];
    let start = Instant::now();
    for burst in packets.chunks(BURST) {
        let now = burst[burst.len() - 1].time;
        for p in burst {
            let color = m.mark_local(&mut flows[p.flow as usize], now, p.size);
            tally[p.flow as usize][color as usize] += p.size;
        }
    }
    (tally, packets.len() as f64 / start.elapsed().as_secs_f64())
}

/// The same bursts, grouped by flow (stable, so each flow's packets keep
/// their order) and marked with one `mark_batch_local` per flow and burst.
fn bursts_batched<M: Meter>(m: &M, packets: &[Packet]) -> (Tally, f64, u64) {
    let mut flows = vec![LocalFlow::new(); FLOWS];
    let mut tally = vec![[0u64; 3]; FLOWS];
    let mut order: Vec<usize> = Vec::with_capacity(BURST);
    let mut sizes = [0u64; BURST];
    let mut out = [Color::Red; BURST];
    let mut calls = 0u64;
    let start = Instant::now();
    for burst in packets.chunks(BURST) {
        let now = burst[burst.len() - 1].time;
        order.clear();
        order.extend(0..burst.len());
        order.sort_by_key(|&i| burst[i].flow);
        let mut i = 0;
        while i < order.len() {
            let flow = burst[order[i]].flow;
            let mut n = 0;
            while i + n < order.len() && burst[order[i + n]].flow == flow {
                sizes[n] = burst[order[i + n]].size;
                n += 1;
            }
            m.mark_batch_local(&mut flows[flow as usize], now, &sizes[..n], &mut out[..n])
                .expect("equal lengths");
            for (size, color) in sizes[..n].iter().zip(&out[..n]) {
                tally[flow as usize][*color as usize] += size;
            }
            i += n;
            calls += 1;
        }
    }
    let pps = packets.len() as f64 / start.elapsed().as_secs_f64();
    (tally, pps, calls)
}

/// The fluid prediction for one on/off source whose buckets are full when
/// an on period starts: a bucket of `size` bytes refilled at `rate` passes
/// `min(P·L, size + rate·L)` bytes of an on period of length `L` sent at
/// peak `P`. With `L` exponential of mean `m`, and `a = size / (P − rate)`
/// the length at which the bucket runs dry,
///
/// ```text
/// E[min(P·L, S + R·L)] = P·(m − (a + m)·e^(−a/m)) + (S + R·(a + m))·e^(−a/m)
/// ```
///
/// returned as a share of the offered `P·m`.
fn on_off_share(size: u64, rate: u64) -> f64 {
    let (p, m, s, r) = (ON_PEAK, ON_MEAN_S, size as f64, rate as f64);
    if r >= p {
        return 1.0;
    }
    let a = s / (p - r);
    let tail = (-a / m).exp();
    (p * (m - (a + m) * tail) + (s + r * (a + m)) * tail) / (p * m)
}

/// Prints the colour shares of each class next to the RFC's fluid
/// prediction: per Poisson flow, green = min(offered, CBS + CIR·t) and
/// green + yellow = min(offered, the outer bucket + its rate·t); for on/off
/// flows, [`on_off_share`] of each bucket.
fn report(tally: &Tally, classes: &[Class], caps: [u64; 2], on_off: [f64; 2]) {
    println!(
        "  {:<16} {:>5} {:>10} {:>7} {:>7} {:>7} | {:>16} {:>17}",
        "class", "flows", "offered", "green", "yellow", "red", "predicted green", "predicted g+y"
    );
    for (name, class) in [
        ("Poisson < CIR", Class::PoissonUnder),
        ("Poisson > CIR", Class::PoissonOver),
        ("on/off (4×CIR)", Class::OnOff),
    ] {
        let (mut bytes, mut predicted, mut n) = ([0u64; 3], [0f64; 2], 0);
        for (t, _) in tally.iter().zip(classes).filter(|(_, c)| **c == class) {
            let offered: u64 = t.iter().sum();
            for k in 0..3 {
                bytes[k] += t[k];
            }
            for k in 0..2 {
                predicted[k] += match class {
                    Class::OnOff => offered as f64 * on_off[k],
                    _ => offered.min(caps[k]) as f64,
                };
            }
            n += 1;
        }
        let offered: u64 = bytes.iter().sum();
        let pct = |x: f64| 100.0 * x / offered.max(1) as f64;
        let rate = offered as f64 / n as f64 / (DURATION as f64 / HZ as f64) / CIR as f64;
        println!(
            "  {:<16} {:>5} {:>6.2}×CIR {:>6.1}% {:>6.1}% {:>6.1}% | {:>15.1}% {:>16.1}%",
            name,
            n,
            rate,
            pct(bytes[0] as f64),
            pct(bytes[1] as f64),
            pct(bytes[2] as f64),
            pct(predicted[0]),
            pct(predicted[1])
        );
    }
}

fn main() {
    let mut rng = Rng(0x5EED_CE11_4A7E_0001);
    let (packets, classes) = trace(&mut rng);
    let bytes: u64 = packets.iter().map(|p| p.size).sum();
    println!(
        "trace: {} packets, {} flows ({} Poisson, {} on/off), {} s, {:.1} MB/s offered",
        packets.len(),
        FLOWS,
        classes.iter().filter(|c| **c != Class::OnOff).count(),
        classes.iter().filter(|c| **c == Class::OnOff).count(),
        DURATION / HZ,
        bytes as f64 / 1e6 / (DURATION / HZ) as f64
    );
    let secs = DURATION / HZ;

    let sr = SrTcm::new(CIR, CBS, EBS, HZ).expect("valid srTCM");
    let tr = TrTcm::new(CIR, CBS, PIR, PBS, HZ).expect("valid trTCM");
    let runs: [Config; 2] = [
        (
            "srTCM (RFC 2697): CIR 1 MB/s, CBS 16 KiB, EBS 32 KiB",
            &|| run(&sr, &packets),
            [CBS + CIR * secs, CBS + EBS + CIR * secs],
            [on_off_share(CBS, CIR), on_off_share(CBS + EBS, CIR)],
        ),
        (
            "trTCM (RFC 2698): CIR 1 MB/s, CBS 16 KiB, PIR 1.5 MB/s, PBS 32 KiB",
            &|| run(&tr, &packets),
            [CBS + CIR * secs, PBS + PIR * secs],
            [on_off_share(CBS, CIR), on_off_share(PBS, PIR)],
        ),
    ];
    for (title, go, caps, on_off) in runs {
        println!("\n{title}");
        let r = go();
        println!(
            "  per packet, own timestamps:      {:>6.1} Mpps (LocalFlow), {:>6.1} Mpps (shared Flow)",
            r.pps_local / 1e6,
            r.pps_shared / 1e6
        );
        println!(
            "  rx bursts of {BURST}, one timestamp: {:>6.1} Mpps per packet, {:>6.1} Mpps grouped by flow \
             into mark_batch_local ({:.2} packets per call)",
            r.pps_bursts / 1e6,
            r.pps_batched / 1e6,
            r.per_call
        );
        println!("  colour shares of offered bytes (per-packet timestamps):");
        report(&r.tally, &classes, caps, on_off);
    }
}

/// A title, the metering run, and the per-flow and on/off predictions.
type Config<'a> = (&'a str, &'a dyn Fn() -> Run, [u64; 2], [f64; 2]);

struct Run {
    tally: Tally,
    pps_local: f64,
    pps_shared: f64,
    pps_bursts: f64,
    pps_batched: f64,
    per_call: f64,
}

fn run<M: Meter>(m: &M, packets: &[Packet]) -> Run {
    let (tally, pps_local) = per_packet(m, packets);
    let pps_shared = per_packet_shared(m, packets);
    let (burst_tally, pps_bursts) = bursts_per_packet(m, packets);
    let (batch_tally, pps_batched, calls) = bursts_batched(m, packets);
    assert!(
        burst_tally == batch_tally,
        "batches must colour exactly like packets at the same timestamp"
    );
    Run {
        tally,
        pps_local,
        pps_shared,
        pps_bursts,
        pps_batched,
        per_call: packets.len() as f64 / calls as f64,
    }
}
