//! Arbitrary bytes as a stdio stream, before and after a valid `initialize`: the front
//! never panics, writes only well-formed JSON-RPC and ends cleanly at EOF.
#![no_main]

use clawboo_fuzz::{INITIALIZE, run_session};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&selector, rest)) = data.split_first() else {
        return;
    };
    let mut input = Vec::with_capacity(rest.len() + INITIALIZE.len() + 1);
    if selector & 1 == 1 {
        input.extend_from_slice(INITIALIZE.as_bytes());
        input.push(b'\n');
    }
    input.extend_from_slice(rest);
    run_session(usize::from(selector >> 1), &input);
});
