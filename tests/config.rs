//! Assertions of the `config` module kept out of its item docs:
//! error text, a spec's own `hz` and the human form of a bare `Quota`.
#![cfg(feature = "serde")]

use cellrate::config::QuotaSpec;
use cellrate::Quota;

#[test]
fn zero_burst_is_named_in_the_error() {
    assert_eq!(
        "1/s, burst 0"
            .parse::<QuotaSpec>()
            .map_err(|e| e.to_string()),
        Err("quota: the burst is zero".into())
    );
}

#[test]
fn own_hz_wins_over_the_context() {
    let own: QuotaSpec = "3/10s, hz 1000".parse().unwrap();
    assert_eq!(own.quota(1_000_000).unwrap().hz(), 1_000);
}

#[test]
fn quota_reads_the_human_form() {
    let q: Quota = serde_json::from_str(r#""10/s, burst 5, hz 1000""#).unwrap();
    assert_eq!(q, Quota::per_second(10).with_burst(5).at_hz(1_000));
}
