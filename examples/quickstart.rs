//! A tour of the main job: one shared GCRA limiter admitting and denying
//! requests on a clock, with the numbers a server would put in its headers.
//!
//! Run with `cargo run --example quickstart`.
use cellrate::{Clock, Denied, Gcra, ManualClock, Quota};

fn main() {
    // 5 requests per second, bursts of up to 3, on a millisecond clock.
    const HZ: u64 = 1_000;
    static LIMITER: Gcra = Gcra::new(Quota::per_second(5).with_burst(3).at_hz(HZ));
    let clock = ManualClock::new(0);

    println!(
        "quota: 5/s, burst 3, T = {} ms",
        LIMITER.quota().emission_interval_ticks()
    );
    for step in 0..12 {
        let now = clock.now();
        match LIMITER.check(now) {
            Ok(d) => println!(
                "t={now:>5} ms  admitted   remaining={} reset_after={} ms",
                d.remaining(),
                d.reset_after()
            ),
            Err(Denied::Limited(l)) => {
                println!(
                    "t={now:>5} ms  DENIED     retry_after={} ms",
                    l.retry_after()
                )
            }
            Err(e) => println!("t={now:>5} ms  {e}"),
        }
        clock.advance(if step < 5 { 50 } else { 150 });
    }
    println!(
        "a cost of 4 can never fit a burst of 3: {}",
        LIMITER.check_n(clock.now(), 4).unwrap_err()
    );
}
