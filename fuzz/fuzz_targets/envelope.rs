//! Arbitrary author, kind and body through the peer-post envelope: one header line saying
//! `isUser=false`, and every other line a quoted body line.
#![no_main]

use clawboo_mcp::envelope::{PeerPost, format_peer_post};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let mut parts = text.splitn(3, '\u{0}');
    let author = parts.next().unwrap_or_default();
    let kind = parts.next().unwrap_or_default();
    let body = parts.next().unwrap_or_default();
    let wrapped = format_peer_post(&PeerPost {
        author,
        kind,
        seq: i64::try_from(data.len()).unwrap_or(0),
        body,
    });
    let mut lines = wrapped.split('\n');
    let header = lines.next().unwrap_or_default();
    assert!(header.starts_with("[Inter-session message \u{b7} from="), "{header:?}");
    assert!(header.ends_with(" \u{b7} isUser=false]"), "{header:?}");
    assert_eq!(header.matches("isUser=").count(), 1, "{header:?}");
    for line in lines {
        assert!(line.starts_with("| "), "unquoted line {line:?}");
        assert!(
            !line.to_lowercase().contains("[inter-session message"),
            "forged header left in {line:?}"
        );
        assert!(!line.contains(['\r', '\u{85}', '\u{2028}', '\u{2029}']), "{line:?}");
    }
});
