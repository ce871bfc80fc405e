//! The three-colour markers against the RFCs: worked examples with exact
//! colours, and property tests against reference models written for clarity
//! (token counters stepped tick by tick in integers), plus the RFC interval
//! bounds checked directly on the marks, and batches against packets.
use cellrate::meter::{BatchLenMismatch, Color, Flow, LocalFlow, Meter, SrTcm, TrTcm, TrTcm4115};
use proptest::prelude::*;

#[path = "support/origin.rs"]
mod origin;
use origin::{origins, with_zero};
use Color::{Green as G, Red as R, Yellow as Y};

// ---------------------------------------------------------------------------
// Reference models. Token counts are kept in units of 1/hz byte (bytes · hz),
// so one tick of a rate of `r` bytes per second adds exactly `r` units.
// Every tick is stepped one by one, exactly as the RFCs describe the buckets
// being topped up; nothing is shared with the implementation.

struct RefSrTcm {
    cir: u128,
    cbs: u128,
    ebs: u128,
    hz: u128,
    tc: u128,
    te: u128,
    t: u64,
}

impl RefSrTcm {
    fn new(cir: u64, cbs: u64, ebs: u64, hz: u64) -> Self {
        let hz = hz as u128;
        RefSrTcm {
            cir: cir as u128,
            cbs: cbs as u128 * hz,
            ebs: ebs as u128 * hz,
            hz,
            tc: cbs as u128 * hz,
            te: ebs as u128 * hz,
            t: 0,
        }
    }
    fn mark(&mut self, now: u64, bytes: u64, pre: Color) -> Color {
        while self.t < now {
            self.t += 1;
            // RFC 2697: Tc is filled first; what does not fit goes to Te.
            self.tc += self.cir;
            if self.tc > self.cbs {
                self.te = (self.te + (self.tc - self.cbs)).min(self.ebs);
                self.tc = self.cbs;
            }
        }
        let b = bytes as u128 * self.hz;
        if pre == G && self.tc >= b {
            self.tc -= b;
            G
        } else if pre != R && self.te >= b {
            self.te -= b;
            Y
        } else {
            R
        }
    }
}

struct RefTwoBuckets {
    rate: [u128; 2],
    size: [u128; 2],
    tokens: [u128; 2],
    hz: u128,
    t: u64,
}

impl RefTwoBuckets {
    fn new(rate: [u64; 2], size: [u64; 2], hz: u64) -> Self {
        let hz = hz as u128;
        let size = [size[0] as u128 * hz, size[1] as u128 * hz];
        RefTwoBuckets {
            rate: [rate[0] as u128, rate[1] as u128],
            size,
            tokens: size,
            hz,
            t: 0,
        }
    }
    fn advance(&mut self, now: u64) -> [u128; 2] {
        while self.t < now {
            self.t += 1;
            for i in 0..2 {
                self.tokens[i] = (self.tokens[i] + self.rate[i]).min(self.size[i]);
            }
        }
        self.tokens
    }
}

/// RFC 2698: buckets [P, C].
struct RefTrTcm(RefTwoBuckets);

impl RefTrTcm {
    fn mark(&mut self, now: u64, bytes: u64, pre: Color) -> Color {
        let [tp, tc] = self.0.advance(now);
        let b = bytes as u128 * self.0.hz;
        if pre == R || tp < b {
            R
        } else if pre == Y || tc < b {
            self.0.tokens[0] -= b;
            Y
        } else {
            self.0.tokens[0] -= b;
            self.0.tokens[1] -= b;
            G
        }
    }
}

/// RFC 4115: buckets [C, E].
struct Ref4115(RefTwoBuckets);

impl Ref4115 {
    fn mark(&mut self, now: u64, bytes: u64, pre: Color) -> Color {
        let [tc, te] = self.0.advance(now);
        let b = bytes as u128 * self.0.hz;
        if pre == G && tc >= b {
            self.0.tokens[0] -= b;
            G
        } else if pre != R && te >= b {
            self.0.tokens[1] -= b;
            Y
        } else {
            R
        }
    }
}

// ---------------------------------------------------------------------------
// Worked examples (computed by hand from the RFC text).

#[test]
fn srtcm_worked_example_blind() {
    // CIR 1 000 B/s, CBS 1 500, EBS 1 500, millisecond ticks.
    let m = SrTcm::new(1_000, 1_500, 1_500, 1_000).unwrap();
    let mut f = LocalFlow::new();
    let steps: &[(u64, u64, Color, [u64; 2])] = &[
        // (now ms, bytes, colour, [Tc, Te] after)
        (0, 1_000, G, [500, 1_500]),
        (0, 1_000, Y, [500, 500]),       // Tc 500 < 1 000, Te 1 500 ≥ 1 000
        (0, 600, R, [500, 500]),         // both short
        (0, 500, G, [0, 500]),           // exactly Tc
        (1_000, 1_500, R, [1_000, 500]), // one second refills Tc by 1 000 only
        (1_000, 1_000, G, [0, 500]),
        (3_000, 1_500, G, [0, 1_000]), // 2 000 B: 1 500 to Tc, 500 spill to Te
        (3_000, 1_000, Y, [0, 0]),
        (3_000, 1, R, [0, 0]),
        (3_001, 9_000, R, [1, 0]), // jumbo: larger than both buckets
        (10_000, 9_000, R, [1_500, 1_500]),
        (10_000, 1_500, G, [0, 1_500]),
    ];
    for &(now, bytes, color, tokens) in steps {
        assert_eq!(m.mark_local(&mut f, now, bytes), color, "t={now} B={bytes}");
        assert_eq!(m.tokens(f.words(), now), tokens, "t={now} B={bytes}");
    }
}

#[test]
fn srtcm_worked_example_aware() {
    let m = SrTcm::new(1_000, 1_500, 1_500, 1_000).unwrap();
    let mut f = LocalFlow::new();
    // A yellow packet never takes committed tokens; a red one nothing.
    assert_eq!(m.mark_aware_local(&mut f, 0, 1_000, Y), Y);
    assert_eq!(m.tokens(f.words(), 0), [1_500, 500]);
    assert_eq!(m.mark_aware_local(&mut f, 0, 1_000, Y), R); // Te 500
    assert_eq!(m.mark_aware_local(&mut f, 0, 100, R), R);
    assert_eq!(m.tokens(f.words(), 0), [1_500, 500]);
    assert_eq!(m.mark_aware_local(&mut f, 0, 1_500, G), G);
    assert_eq!(m.mark_aware_local(&mut f, 0, 500, G), Y); // Tc 0, Te 500
                                                          // Te refills only once Tc is full: 1.5 s to fill Tc, then 0.5 s more.
    assert_eq!(m.tokens(f.words(), 1_500), [1_500, 0]);
    assert_eq!(m.tokens(f.words(), 2_000), [1_500, 500]);
}

#[test]
fn srtcm_without_excess_is_a_two_colour_policer() {
    let m = SrTcm::new(1_000, 1_500, 0, 1_000).unwrap();
    let mut f = LocalFlow::new();
    let got: Vec<Color> = [1_000, 600, 500, 1]
        .iter()
        .map(|&b| m.mark_local(&mut f, 0, b))
        .collect();
    assert_eq!(got, [G, R, G, R]);
}

#[test]
fn trtcm_worked_example_blind_and_aware() {
    // CIR 1 000 B/s, CBS 1 000; PIR 2 000 B/s, PBS 2 000; millisecond ticks.
    let m = TrTcm::new(1_000, 1_000, 2_000, 2_000, 1_000).unwrap();
    let mut f = LocalFlow::new();
    let steps: &[(u64, u64, Color, Color, [u64; 2])] = &[
        // (now, bytes, arriving colour, result, [Tp, Tc] after)
        (0, 600, G, G, [1_400, 400]),
        (0, 600, G, Y, [800, 400]), // Tc 400 < 600: yellow, takes peak only
        (0, 900, G, R, [800, 400]), // Tp 800 < 900: red, takes nothing
        (0, 400, Y, Y, [400, 400]), // yellow stays yellow (Tp ok)
        (0, 100, R, R, [400, 400]),
        (0, 400, G, G, [0, 0]),
        (500, 1_000, G, Y, [0, 500]), // 0.5 s: +1 000 peak, +500 committed
        (500, 1, G, R, [0, 500]),
        (1_000, 3_000, G, R, [1_000, 1_000]), // larger than PBS: always red
        (1_000, 1_500, G, R, [1_000, 1_000]),
        (1_500, 1_500, G, Y, [500, 1_000]), // > CBS, ≤ PBS: yellow at best
    ];
    for &(now, bytes, pre, color, tokens) in steps {
        assert_eq!(
            m.mark_aware_local(&mut f, now, bytes, pre),
            color,
            "t={now} B={bytes}"
        );
        assert_eq!(m.tokens(f.words(), now), tokens, "t={now} B={bytes}");
    }
}

#[test]
fn rfc4115_worked_example_blind_and_aware() {
    // CIR 1 000 B/s, CBS 1 000; EIR 500 B/s, EBS 1 000; millisecond ticks.
    let m = TrTcm4115::new(1_000, 1_000, 500, 1_000, 1_000).unwrap();
    let mut f = LocalFlow::new();
    let steps: &[(u64, u64, Color, Color, [u64; 2])] = &[
        // (now, bytes, arriving colour, result, [Tc, Te] after)
        (0, 800, G, G, [200, 1_000]), // green takes committed tokens only
        (0, 800, G, Y, [200, 200]),
        (0, 200, Y, Y, [200, 0]), // a yellow packet may not use Tc
        (0, 200, G, G, [0, 0]),
        (0, 1, G, R, [0, 0]),
        (1_000, 1_000, G, G, [0, 500]), // 1 s: +1 000 committed, +500 excess
        (1_000, 500, R, R, [0, 500]),
        (1_000, 500, G, Y, [0, 0]),
        (3_000, 1_200, G, R, [1_000, 1_000]), // larger than both buckets
    ];
    for &(now, bytes, pre, color, tokens) in steps {
        assert_eq!(
            m.mark_aware_local(&mut f, now, bytes, pre),
            color,
            "t={now} B={bytes}"
        );
        assert_eq!(m.tokens(f.words(), now), tokens, "t={now} B={bytes}");
    }
}

#[test]
fn shared_flows_mark_like_local_ones_and_zero_bytes_keep_their_colour() {
    let m = TrTcm::new(1_000, 1_000, 2_000, 2_000, 1_000).unwrap();
    let (shared, mut local) = (Flow::new(), LocalFlow::new());
    for (now, bytes) in [(0, 700), (0, 700), (0, 700), (300, 700), (900, 0)] {
        assert_eq!(
            m.mark(&shared, now, bytes),
            m.mark_local(&mut local, now, bytes)
        );
        assert_eq!(shared.words(), local.words());
    }
    for pre in [G, Y, R] {
        assert_eq!(m.mark_aware(&shared, 900, 0, pre), pre);
    }
}

#[test]
fn batch_slices_must_match() {
    let m = TrTcm4115::new(1_000, 1_000, 500, 1_000, 1_000).unwrap();
    let flow = Flow::new();
    let mut out = [G; 3];
    assert_eq!(
        m.mark_batch(&flow, 0, &[1, 2], &mut out),
        Err(BatchLenMismatch)
    );
    assert_eq!(
        m.mark_batch_aware(&flow, 0, &[1, 2, 3], &[G, G], &mut out),
        Err(BatchLenMismatch)
    );
    assert_eq!(flow.words(), [0, 0]); // nothing marked
}

#[test]
fn profiles_are_exact_for_line_rates() {
    // 10 and 40 Gb/s in bytes per second on a 1 GHz (nanosecond) clock.
    for cir in [1_250_000_000, 5_000_000_000] {
        assert!(SrTcm::new(cir, 10_000, 20_000, 1_000_000_000)
            .unwrap()
            .is_exact());
        assert!(TrTcm::new(cir / 2, 10_000, cir, 20_000, 1_000_000_000)
            .unwrap()
            .is_exact());
    }
}

// ---------------------------------------------------------------------------
// Property tests.

#[derive(Clone, Debug)]
struct Packet {
    dt: u64,
    bytes: u64,
    pre: Color,
}

fn packets() -> impl Strategy<Value = Vec<Packet>> {
    let color = prop_oneof![4 => Just(G), 1 => Just(Y), 1 => Just(R)];
    // Half the packets arrive with the previous one (bursts, and batches).
    let dt = prop_oneof![1 => Just(0u64), 1 => 0u64..40];
    let bytes = prop_oneof![6 => 0u64..1_600, 1 => 1_600u64..9_100];
    prop::collection::vec(
        (dt, bytes, color).prop_map(|(dt, bytes, pre)| Packet { dt, bytes, pre }),
        1..60,
    )
}

/// Tick frequencies that give the quotas non-trivial sub-tick scales.
fn hz() -> impl Strategy<Value = u64> {
    prop_oneof![Just(1_000u64), Just(1_024), Just(7), Just(9_973)]
}

fn times(ps: &[Packet]) -> Vec<u64> {
    ps.iter()
        .scan(0, |t, p| {
            *t += p.dt;
            Some(*t)
        })
        .collect()
}

/// Colours of `ps` through every entry point of `m` (local and shared, per
/// packet and in batches of equal `now`), with every `now` shifted by
/// `origin`; all must agree.
fn mark_all_ways<M: Meter>(m: &M, ps: &[Packet], aware: bool, origin: u64) -> Vec<Color> {
    let ts: Vec<u64> = times(ps).iter().map(|t| origin.wrapping_add(*t)).collect();
    let pre = |p: &Packet| if aware { p.pre } else { G };
    let mut local = LocalFlow::new();
    let shared = Flow::new();
    let per_packet: Vec<Color> = ps
        .iter()
        .zip(&ts)
        .map(|(p, &t)| {
            let a = m.mark_aware_local(&mut local, t, p.bytes, pre(p));
            let b = if aware {
                m.mark_aware(&shared, t, p.bytes, p.pre)
            } else {
                m.mark(&shared, t, p.bytes)
            };
            assert_eq!(a, b, "shared and local differ");
            a
        })
        .collect();
    assert_eq!(local.words(), shared.words());

    // Batches: runs of packets sharing a `now`.
    let (mut lb, sb) = (LocalFlow::new(), Flow::new());
    let mut batched = Vec::new();
    let mut start = 0;
    while start < ps.len() {
        let end = (start..ps.len())
            .find(|&i| ts[i] != ts[start])
            .unwrap_or(ps.len());
        let sizes: Vec<u64> = ps[start..end].iter().map(|p| p.bytes).collect();
        let pres: Vec<Color> = ps[start..end].iter().map(pre).collect();
        let mut out_l = vec![R; sizes.len()];
        let mut out_s = vec![R; sizes.len()];
        if aware {
            m.mark_batch_aware_local(&mut lb, ts[start], &sizes, &pres, &mut out_l)
                .unwrap();
            m.mark_batch_aware(&sb, ts[start], &sizes, &pres, &mut out_s)
                .unwrap();
        } else {
            m.mark_batch_local(&mut lb, ts[start], &sizes, &mut out_l)
                .unwrap();
            m.mark_batch(&sb, ts[start], &sizes, &mut out_s).unwrap();
        }
        assert_eq!(out_l, out_s, "local and shared batches differ");
        batched.extend(out_l);
        start = end;
    }
    assert_eq!(batched, per_packet, "batches differ from packets");
    assert_eq!(lb.words(), local.words());
    assert_eq!(sb.words(), local.words());
    per_packet
}

/// Over every interval [tᵢ, tⱼ] of packet times, the bytes of packets whose
/// colour is in `colors` are at most `size + rate·(tⱼ − tᵢ)/hz`.
fn assert_interval_bound(
    ps: &[Packet],
    marks: &[Color],
    colors: &[Color],
    rate: u64,
    size: u64,
    hz: u64,
) {
    let ts = times(ps);
    for i in 0..ps.len() {
        let mut sum: u128 = 0;
        for j in i..ps.len() {
            if colors.contains(&marks[j]) {
                sum += ps[j].bytes as u128;
            }
            let allowed = size as u128 * hz as u128 + rate as u128 * (ts[j] - ts[i]) as u128;
            assert!(
                sum * hz as u128 <= allowed,
                "{colors:?}: {sum} bytes in [{}, {}] > {size} + {rate}·t",
                ts[i],
                ts[j]
            );
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn srtcm_matches_reference(
        cir in 1u64..5_000, cbs in 0u64..3_000, ebs in 0u64..3_000,
        hz in hz(), ps in packets(), aware: bool, drawn in origins(),
    ) {
        prop_assume!(cbs + ebs > 0);
        let m = SrTcm::new(cir, cbs, ebs, hz).unwrap();
        prop_assert!(m.is_exact());
        let mut reference = RefSrTcm::new(cir, cbs, ebs, hz);
        let expected: Vec<Color> = times(&ps)
            .iter()
            .zip(&ps)
            .map(|(&t, p)| reference.mark(t, p.bytes, if aware { p.pre } else { G }))
            .collect();
        for origin in with_zero(drawn) {
            let marks = mark_all_ways(&m, &ps, aware, origin);
            prop_assert_eq!(&marks, &expected, "origin {}", origin);
        }
        let marks = expected;
        assert_interval_bound(&ps, &marks, &[G], cir, cbs, hz);
        assert_interval_bound(&ps, &marks, &[G, Y], cir, cbs + ebs, hz);
    }

    #[test]
    fn trtcm_matches_reference(
        cir in 1u64..5_000, extra in 0u64..5_000, cbs in 1u64..3_000, pbs in 1u64..3_000,
        hz in hz(), ps in packets(), aware: bool, drawn in origins(),
    ) {
        let pir = cir + extra;
        let m = TrTcm::new(cir, cbs, pir, pbs, hz).unwrap();
        prop_assert!(m.is_exact());
        let mut reference = RefTrTcm(RefTwoBuckets::new([pir, cir], [pbs, cbs], hz));
        let expected: Vec<Color> = times(&ps)
            .iter()
            .zip(&ps)
            .map(|(&t, p)| reference.mark(t, p.bytes, if aware { p.pre } else { G }))
            .collect();
        for origin in with_zero(drawn) {
            let marks = mark_all_ways(&m, &ps, aware, origin);
            prop_assert_eq!(&marks, &expected, "origin {}", origin);
        }
        let marks = expected;
        assert_interval_bound(&ps, &marks, &[G], cir, cbs, hz);
        assert_interval_bound(&ps, &marks, &[G, Y], pir, pbs, hz);
    }

    #[test]
    fn rfc4115_matches_reference(
        cir in 0u64..5_000, eir in 0u64..5_000, cbs in 0u64..3_000, ebs in 0u64..3_000,
        hz in hz(), ps in packets(), aware: bool, drawn in origins(),
    ) {
        // A bucket is either off (rate and size 0) or has a rate.
        let (cir, cbs) = if cir == 0 { (0, 0) } else { (cir, cbs) };
        let (eir, ebs) = if eir == 0 { (0, 0) } else { (eir, ebs) };
        prop_assume!(cbs + ebs > 0);
        let m = TrTcm4115::new(cir, cbs, eir, ebs, hz).unwrap();
        prop_assert!(m.is_exact());
        let mut reference = Ref4115(RefTwoBuckets::new([cir, eir], [cbs, ebs], hz));
        let expected: Vec<Color> = times(&ps)
            .iter()
            .zip(&ps)
            .map(|(&t, p)| reference.mark(t, p.bytes, if aware { p.pre } else { G }))
            .collect();
        for origin in with_zero(drawn) {
            let marks = mark_all_ways(&m, &ps, aware, origin);
            prop_assert_eq!(&marks, &expected, "origin {}", origin);
        }
        let marks = expected;
        assert_interval_bound(&ps, &marks, &[G], cir, cbs, hz);
        assert_interval_bound(&ps, &marks, &[Y], eir, ebs, hz);
    }
}

/// A clock that steps back (or packets from another core's older timestamp)
/// leaves a bucket's debt beyond its span: nothing may pass, not even a
/// 0-byte packet, and batches must agree with packets there too.
#[test]
fn batches_agree_with_packets_when_the_clock_steps_back() {
    fn check<M: Meter>(m: &M) {
        let sizes = [0, 0, 64, 0, 1_500, 64];
        let (mut per_packet, mut batched, shared) =
            (LocalFlow::new(), LocalFlow::new(), Flow::new());
        for f in [&mut per_packet, &mut batched] {
            for _ in 0..3 {
                m.mark_local(f, 1_000, 1_000);
            }
        }
        for _ in 0..3 {
            m.mark(&shared, 1_000, 1_000);
        }
        let expected: Vec<Color> = sizes
            .iter()
            .map(|&b| m.mark_local(&mut per_packet, 0, b))
            .collect();
        let mut out = [G; 6];
        m.mark_batch_local(&mut batched, 0, &sizes, &mut out)
            .unwrap();
        assert_eq!(out.to_vec(), expected);
        assert_eq!(batched.words(), per_packet.words());
        m.mark_batch(&shared, 0, &sizes, &mut out).unwrap();
        assert_eq!(out.to_vec(), expected);
        assert_eq!(shared.words(), per_packet.words());
    }
    check(&SrTcm::new(1_000, 1_000, 1_000, 1_000).unwrap());
    check(&TrTcm::new(1_000, 1_000, 2_000, 2_000, 1_000).unwrap());
    check(&TrTcm4115::new(1_000, 1_000, 1_000, 1_000, 1_000).unwrap());
}

// ---------------------------------------------------------------------------
// Batches against packets: long bursts at one `now` that cross the buckets'
// edges, from states left by earlier bursts.

/// A burst: `dt` ticks after the previous one, packets (size, arrival
/// colour) all at one `now`.
#[derive(Clone, Debug)]
struct Burst {
    dt: u64,
    packets: Vec<(u64, Color)>,
}

/// Bursts of packets below `frame` bytes (and some larger): with small
/// frames and buckets, bursts often end exactly on a bucket's edge.
fn bursts(frame: u64) -> impl Strategy<Value = Vec<Burst>> {
    let color = prop_oneof![4 => Just(G), 1 => Just(Y), 1 => Just(R)];
    // Mostly frames, some jumbo, some empty, a few around and above 2³²
    // (the batch's sums switch to packet by packet there) and u64::MAX.
    let bytes = prop_oneof![
        12 => 0u64..frame,
        3 => frame..9_100,
        1 => Just(0u64),
        1 => (u32::MAX as u64 - 2)..(u32::MAX as u64 + 3),
        1 => Just(u64::MAX),
    ];
    let burst = (
        prop_oneof![1 => Just(0u64), 3 => 1u64..300],
        prop::collection::vec((bytes, color), 0..70),
    )
        .prop_map(|(dt, packets)| Burst { dt, packets });
    prop::collection::vec(burst, 1..10)
}

/// Frames of 40 bytes (bucket sizes taken below 480) or of 1 600 (below
/// 19 200), and bursts of them.
fn frames_and_bursts() -> impl Strategy<Value = (u64, Vec<Burst>)> {
    prop_oneof![Just(40u64), Just(1_600u64)].prop_flat_map(|frame| (Just(frame), bursts(frame)))
}

/// Marks `bursts` four ways (per packet and in one batch per burst, local
/// and shared), every `now` shifted by `origin`, and against `reference`
/// (from 0); all colours and states must agree burst after burst.
fn batches_match_packets<M: Meter>(
    m: &M,
    mut reference: impl FnMut(u64, u64, Color) -> Color,
    bursts: &[Burst],
    aware: bool,
    origin: u64,
) -> Result<(), TestCaseError> {
    let (mut local, mut local_batch) = (LocalFlow::new(), LocalFlow::new());
    let (shared, shared_batch) = (Flow::new(), Flow::new());
    let mut now = 0;
    for burst in bursts {
        now += burst.dt;
        let at = origin.wrapping_add(now);
        let sizes: Vec<u64> = burst.packets.iter().map(|p| p.0).collect();
        let pre: Vec<Color> = burst
            .packets
            .iter()
            .map(|p| if aware { p.1 } else { G })
            .collect();
        let expected: Vec<Color> = sizes
            .iter()
            .zip(&pre)
            .map(|(&bytes, &color)| reference(now, bytes, color))
            .collect();
        let per_packet: Vec<Color> = sizes
            .iter()
            .zip(&pre)
            .map(|(&bytes, &color)| m.mark_aware_local(&mut local, at, bytes, color))
            .collect();
        let per_packet_shared: Vec<Color> = sizes
            .iter()
            .zip(&pre)
            .map(|(&bytes, &color)| m.mark_aware(&shared, at, bytes, color))
            .collect();
        let (mut out_local, mut out_shared) = (vec![R; sizes.len()], vec![Y; sizes.len()]);
        if aware {
            m.mark_batch_aware_local(&mut local_batch, at, &sizes, &pre, &mut out_local)
                .unwrap();
            m.mark_batch_aware(&shared_batch, at, &sizes, &pre, &mut out_shared)
                .unwrap();
        } else {
            m.mark_batch_local(&mut local_batch, at, &sizes, &mut out_local)
                .unwrap();
            m.mark_batch(&shared_batch, at, &sizes, &mut out_shared)
                .unwrap();
        }
        prop_assert_eq!(
            &per_packet,
            &expected,
            "per packet vs reference at {} origin {}",
            now,
            origin
        );
        prop_assert_eq!(&per_packet_shared, &expected);
        prop_assert_eq!(&out_local, &expected, "local batch vs packets at {}", now);
        prop_assert_eq!(&out_shared, &expected, "shared batch vs packets at {}", now);
        prop_assert_eq!(local_batch.words(), local.words());
        prop_assert_eq!(shared.words(), local.words());
        prop_assert_eq!(shared_batch.words(), local.words());
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(384))]

    #[test]
    fn srtcm_batches_match_packets(
        cir in 1u64..5_000, cbs in 0u64..20_000, ebs in 0u64..20_000,
        (frame, bursts) in frames_and_bursts(), hz in hz(), aware: bool, drawn in origins(),
    ) {
        let (cbs, ebs) = (cbs % (frame * 12), ebs % (frame * 12));
        prop_assume!(cbs + ebs > 0);
        let m = SrTcm::new(cir, cbs, ebs, hz).unwrap();
        for origin in with_zero(drawn) {
            let mut reference = RefSrTcm::new(cir, cbs, ebs, hz);
            batches_match_packets(&m, |t, b, c| reference.mark(t, b, c), &bursts, aware, origin)?;
        }
    }

    #[test]
    fn trtcm_batches_match_packets(
        cir in 1u64..5_000, extra in 0u64..5_000, cbs in 1u64..20_000, pbs in 1u64..20_000,
        (frame, bursts) in frames_and_bursts(), hz in hz(), aware: bool, drawn in origins(),
    ) {
        let (cbs, pbs) = (1 + cbs % (frame * 12), 1 + pbs % (frame * 12));
        let pir = cir + extra;
        let m = TrTcm::new(cir, cbs, pir, pbs, hz).unwrap();
        for origin in with_zero(drawn) {
            let mut reference = RefTrTcm(RefTwoBuckets::new([pir, cir], [pbs, cbs], hz));
            batches_match_packets(&m, |t, b, c| reference.mark(t, b, c), &bursts, aware, origin)?;
        }
    }

    #[test]
    fn rfc4115_batches_match_packets(
        cir in 0u64..5_000, eir in 0u64..5_000, cbs in 0u64..20_000, ebs in 0u64..20_000,
        (frame, bursts) in frames_and_bursts(), hz in hz(), aware: bool, drawn in origins(),
    ) {
        let (cbs, ebs) = (cbs % (frame * 12), ebs % (frame * 12));
        let (cir, cbs) = if cir == 0 { (0, 0) } else { (cir, cbs) };
        let (eir, ebs) = if eir == 0 { (0, 0) } else { (eir, ebs) };
        prop_assume!(cbs + ebs > 0);
        let m = TrTcm4115::new(cir, cbs, eir, ebs, hz).unwrap();
        for origin in with_zero(drawn) {
            let mut reference = Ref4115(RefTwoBuckets::new([cir, eir], [cbs, ebs], hz));
            batches_match_packets(&m, |t, b, c| reference.mark(t, b, c), &bursts, aware, origin)?;
        }
    }
}
