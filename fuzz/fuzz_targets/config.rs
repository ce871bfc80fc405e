//! The human quota syntax and the quota forms over any input: never a
//! panic (overflow checks are on); an accepted string reads back from its
//! canonical spelling; a quota it builds at any frequency, written back
//! with `QuotaSpec::from_quota`, builds the same `T`, burst and frequency
//! (the equal quota when exact).
#![no_main]

use cellrate::config::QuotaSpec;
use libfuzzer_sys::fuzz_target;

// The first 8 bytes are the frequency (little-endian), the rest the text:
// a kept input is a frequency and a quota as a user writes it.
fuzz_target!(|data: &[u8]| {
    let Some((hz, text)) = data.split_first_chunk::<8>() else {
        return;
    };
    let hz = u64::from_le_bytes(*hz);
    let Ok(text) = core::str::from_utf8(text) else {
        return;
    };
    let Ok(spec) = text.parse::<QuotaSpec>() else {
        return;
    };
    assert_eq!(spec.to_string().parse::<QuotaSpec>(), Ok(spec));
    let Ok(q) = spec.quota(hz) else {
        return;
    };
    let back = QuotaSpec::from_quota(&q).quota(0).expect("a quota's own spec builds");
    if q.is_exact() {
        assert_eq!(back, q);
    } else {
        assert!(back.is_exact());
        assert_eq!((back.burst(), back.hz()), (q.burst(), q.hz()));
        assert_eq!(
            back.emission_interval() as u128 * q.scale() as u128,
            q.emission_interval() as u128 * back.scale() as u128
        );
    }
});
