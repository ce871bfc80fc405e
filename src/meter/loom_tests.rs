//! Loom models: concurrent marking of one flow never gives a colour more
//! bytes than the RFC bounds in the module docs, in any interleaving, and
//! (for the independent-bucket meters) every bucket holds exactly what its
//! takes left.
//!
//! Run with `cargo test --release --features loom --lib meter`.

use super::*;
use loom::sync::Arc;
use loom::thread;

/// 1 000 B/s on a 1 kHz clock: `T` = 1 tick per byte, scale 1, so a TAT at
/// `now = 0` is the bucket's deficit in bytes.
const HZ: u64 = 1_000;
const RATE: u64 = 1_000;

fn model(f: impl Fn() + Sync + Send + 'static) {
    let mut builder = loom::model::Builder::new();
    builder.preemption_bound = Some(2);
    builder.check(f);
}

/// The flow's two TATs, decoded from its state words (`2·TAT + 1`, 0 for a
/// bucket never taken from); at 1 byte per tick these are bytes of debt
/// at 0.
fn tats(flow: &Flow) -> [u64; 2] {
    flow.words().map(|w| w >> 1)
}

/// Bytes per colour.
fn tally(marks: &[(u64, Color)]) -> [u64; 3] {
    let mut sums = [0; 3];
    for &(bytes, color) in marks {
        sums[color as usize] += bytes;
    }
    sums
}

/// Runs `packets[k]` (size, now) on thread `k` (each thread marks its
/// packets in order) and returns every (size, colour).
fn run_threads<M: Meter + Copy + Send + 'static>(
    meter: M,
    flow: &Arc<Flow>,
    packets: [&'static [(u64, u64)]; 2],
    aware: Color,
) -> std::vec::Vec<(u64, Color)> {
    let handles: std::vec::Vec<_> = packets
        .into_iter()
        .map(|mine| {
            let flow = flow.clone();
            thread::spawn(move || {
                mine.iter()
                    .map(|&(bytes, now)| (bytes, meter.mark_aware(&flow, now, bytes, aware)))
                    .collect::<std::vec::Vec<_>>()
            })
        })
        .collect();
    handles
        .into_iter()
        .flat_map(|h| h.join().unwrap())
        .collect()
}

/// One thread marks a batch of `sizes` (colour-aware if `pre` is given),
/// the other one packet of `single` bytes, all at `now = 0`; returns the
/// flow and every (size, colour).
fn batch_against_packet<M: Meter + Copy + Send + 'static>(
    meter: M,
    sizes: [u64; 2],
    pre: Option<[Color; 2]>,
    single: u64,
) -> (Arc<Flow>, [(u64, Color); 3]) {
    let flow = Arc::new(Flow::new());
    let f = flow.clone();
    let batch = thread::spawn(move || {
        let mut out = [Color::Red; 2];
        match pre {
            Some(pre) => meter.mark_batch_aware(&f, 0, &sizes, &pre, &mut out),
            None => meter.mark_batch(&f, 0, &sizes, &mut out),
        }
        .unwrap();
        out
    });
    let single_color = meter.mark(&flow, 0, single);
    let out = batch.join().unwrap();
    let marks = [
        (sizes[0], out[0]),
        (sizes[1], out[1]),
        (single, single_color),
    ];
    (flow, marks)
}

extern crate std;

#[test]
fn srtcm_one_instant_never_exceeds_cbs_or_ebs() {
    // CBS 100, EBS 100; three 60-byte packets at once: sequentially G, Y, R.
    model(|| {
        let meter = SrTcm::new(RATE, 100, 100, HZ).unwrap();
        let flow = Arc::new(Flow::new());
        let marks = run_threads(
            meter,
            &flow,
            [&[(60, 0), (60, 0)], &[(60, 0)]],
            Color::Green,
        );
        let [green, yellow, red] = tally(&marks);
        assert!(green <= 100, "green {green} > CBS");
        assert!(yellow <= 100, "yellow {yellow} > EBS");
        assert_eq!(green + yellow + red, 180);
        // The committed bucket holds exactly what greens took; the total
        // holds at least green + yellow (a kept reservation may add more)
        // and never more than CBS + EBS.
        let [c, a] = tats(&flow);
        assert_eq!(c, green);
        assert!(
            a >= green + yellow && a <= 200,
            "a = {a}, g+y = {}",
            green + yellow
        );
        assert!(a >= c);
    });
}

#[test]
fn srtcm_race_for_committed_tokens_with_small_excess() {
    // CBS 100, EBS 70, of which a yellow packet already took 30. Two 60-byte
    // packets at once both see green possible: one wins the committed
    // bucket; the other must not turn yellow (40 excess bytes left < 60), and
    // must give its reservation back or keep it within CBS + EBS.
    model(|| {
        let meter = SrTcm::new(RATE, 100, 70, HZ).unwrap();
        let flow = Arc::new(Flow::new());
        assert_eq!(meter.mark_aware(&flow, 0, 30, Color::Yellow), Color::Yellow);
        let marks = run_threads(meter, &flow, [&[(60, 0)], &[(60, 0)]], Color::Green);
        let [green, yellow, _] = tally(&marks);
        assert_eq!(green, 60);
        assert_eq!(yellow, 0);
        let [c, a] = tats(&flow);
        assert_eq!(c, 60);
        assert!((90..=170).contains(&a), "a = {a}");
    });
}

#[test]
fn srtcm_skewed_clocks_respect_interval_bounds() {
    // Packets at now 0 and now 50 (1 kHz ticks: 50 bytes of refill between).
    model(|| {
        let meter = SrTcm::new(RATE, 100, 60, HZ).unwrap();
        let flow = Arc::new(Flow::new());
        let marks = run_threads(
            meter,
            &flow,
            [&[(70, 50), (70, 50)], &[(70, 0), (40, 0)]],
            Color::Green,
        );
        let [green, yellow, _] = tally(&marks);
        // Over [0, 50]: green ≤ CBS + 50, green + yellow ≤ CBS + EBS + 50.
        assert!(green <= 150, "green {green}");
        assert!(green + yellow <= 210, "green + yellow {}", green + yellow);
    });
}

#[test]
fn trtcm_buckets_hold_exactly_what_was_taken() {
    // CBS 100, PBS 150: three 60-byte packets at once; sequentially G, Y, R.
    model(|| {
        let meter = TrTcm::new(RATE, 100, RATE, 150, HZ).unwrap();
        let flow = Arc::new(Flow::new());
        let marks = run_threads(
            meter,
            &flow,
            [&[(60, 0), (60, 0)], &[(60, 0)]],
            Color::Green,
        );
        let [green, yellow, red] = tally(&marks);
        assert!(green <= 100);
        assert!(green + yellow <= 150);
        // Each bucket is linearizable: the same counts as sequential.
        assert_eq!((green, yellow, red), (60, 60, 60));
        assert_eq!(tats(&flow), [green + yellow, green]);
    });
}

#[test]
fn rfc4115_buckets_hold_exactly_what_was_taken() {
    model(|| {
        let meter = TrTcm4115::new(RATE, 100, RATE, 100, HZ).unwrap();
        let flow = Arc::new(Flow::new());
        let marks = run_threads(
            meter,
            &flow,
            [&[(60, 0), (60, 0)], &[(60, 0)]],
            Color::Green,
        );
        let [green, yellow, red] = tally(&marks);
        assert_eq!((green, yellow, red), (60, 60, 60));
        assert_eq!(tats(&flow), [green, yellow]);
    });
}

#[test]
fn trtcm_batches_against_packets() {
    // One thread marks a batch of two, the other one packet; 50-byte packets,
    // CBS 100, PBS 120: sequentially two greens and one red in some order.
    model(|| {
        let meter = TrTcm::new(RATE, 100, RATE, 120, HZ).unwrap();
        let (flow, marks) = batch_against_packet(meter, [50, 50], None, 50);
        let [green, yellow, red] = tally(&marks);
        assert!(green <= 100 && green + yellow <= 120);
        assert_eq!((green, yellow, red), (100, 0, 50));
        assert_eq!(tats(&flow), [green + yellow, green]);
    });
}

#[test]
fn rfc4115_aware_batches_against_packets() {
    model(|| {
        let meter = TrTcm4115::new(RATE, 100, RATE, 60, HZ).unwrap();
        let (flow, marks) =
            batch_against_packet(meter, [70, 50], Some([Color::Green, Color::Yellow]), 50);
        let [green, yellow, _] = tally(&marks);
        assert!(green <= 100 && yellow <= 60);
        assert_eq!(tats(&flow), [green, yellow]);
    });
}

#[test]
fn srtcm_batches_against_packets() {
    // CBS 100, EBS 50: a batch of two 40-byte packets races one 40-byte
    // packet. Sequentially: two greens then a yellow, in any order.
    model(|| {
        let meter = SrTcm::new(RATE, 100, 50, HZ).unwrap();
        let (flow, marks) = batch_against_packet(meter, [40, 40], None, 40);
        let [green, yellow, _] = tally(&marks);
        assert!(
            green <= 100 && yellow <= 50,
            "green {green} yellow {yellow}"
        );
        let [c, a] = tats(&flow);
        assert_eq!(c, green);
        assert!(a >= green + yellow && a <= 150, "a = {a}");
    });
}

#[test]
fn srtcm_batch_losing_the_committed_bucket_never_overgrants() {
    // CBS 120, EBS 60: a batch of 80 + 40 bytes races a 60-byte packet. If
    // the packet takes the committed bucket between the batch's reservation
    // in A and its take from C, the batch's 80 bytes no longer fit C and
    // must not turn yellow (more than EBS); the 40 still fit.
    model(|| {
        let meter = SrTcm::new(RATE, 120, 60, HZ).unwrap();
        let (flow, marks) = batch_against_packet(meter, [80, 40], None, 60);
        let [green, yellow, _] = tally(&marks);
        assert!(green <= 120, "green {green}");
        assert!(yellow <= 60, "yellow {yellow} > EBS");
        let [c, a] = tats(&flow);
        assert_eq!(c, green);
        assert!(a >= green + yellow && a <= 180, "a = {a}");
    });
}
