//! Arbitrary attach-URL query strings and signatures: nothing binds a session unless the
//! install's signer produced it.
#![no_main]

use clawboo_mcp::attach::{McpServerName, binding_from_query};
use clawboo_mcp::binding::Binding;
use clawboo_mcp::signing::ScopeSigner;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let signer = ScopeSigner::from_secret_hex(&"5e".repeat(32)).expect("a valid secret");
    let query = String::from_utf8_lossy(data);
    for server in McpServerName::ALL {
        assert_eq!(
            binding_from_query(server, Some(&query), &signer),
            Binding::default(),
            "{query:?} bound a {server} session"
        );
    }
    let scope = Binding {
        team_id: Some("t".into()),
        agent_id: Some("a".into()),
        ..Binding::default()
    };
    let real = signer.sign(&scope);
    assert_eq!(signer.verify(&scope, &query), query.eq_ignore_ascii_case(&real));
});
