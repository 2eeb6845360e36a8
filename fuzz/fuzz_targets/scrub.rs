//! Arbitrary text and JSON through the secret scrubber: no panic, and scrubbing is
//! idempotent.
#![no_main]

use clawboo_store::scrub::{is_only_redactions, scrub_json, scrub_text};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let once = scrub_text(&text);
    assert_eq!(scrub_text(&once), once, "not idempotent on {text:?}");
    let _ = is_only_redactions(&once);
    if let Ok(value) = serde_json::from_slice::<serde_json::Value>(data) {
        let once = scrub_json(&value);
        assert_eq!(scrub_json(&once), once, "not idempotent on {value}");
    }
});
