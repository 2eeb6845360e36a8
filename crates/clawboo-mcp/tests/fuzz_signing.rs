//! Fuzzing the signed attach scope: the HMAC over a binding and the reading of a binding
//! back off an attach URL's query string.
//!
//! - an arbitrary query string (real parameter names, random values and signatures,
//!   repeated or foreign parameters, raw bytes) never binds a session;
//! - a URL the signer minted reads back exactly the scope it was minted for, whatever
//!   characters the ids hold, and is refused by every other server;
//! - flipping any bit of a valid signature, or changing, adding or dropping any bound
//!   field under it, refuses the URL (never serves it unbound);
//! - `verify` accepts exactly the signer's own signature (hex, in either case).
//!
//! `PROPTEST_CASES=20000 cargo test -p clawboo-mcp --test fuzz_signing` for a long run.

mod fuzz_support;

use clawboo_mcp::attach::{McpServerName, SignedScope, binding_from_query, mcp_http_url};
use clawboo_mcp::binding::Binding;
use clawboo_mcp::signing::ScopeSigner;
use fuzz_support::config;
use proptest::prelude::*;

fn signer() -> ScopeSigner {
    ScopeSigner::from_secret_hex(&"3c".repeat(32)).expect("a valid secret")
}

fn server() -> impl Strategy<Value = McpServerName> {
    proptest::sample::select(McpServerName::ALL.to_vec())
}

/// An id as a hostile operator or model might write one: URL metacharacters, separators
/// of the canonical string, Unicode, empty.
fn id() -> impl Strategy<Value = String> {
    prop_oneof![
        "[a-z0-9-]{1,12}",
        any::<String>(),
        Just(String::new()),
        Just("a&scopeSig=00".to_owned()),
        Just("t\nagent=1:a".to_owned()),
        Just("%41+%2B=?#".to_owned()),
    ]
}

/// A scope the server binds (so `check_for` accepts it), never empty.
fn scope_for(server: McpServerName) -> impl Strategy<Value = Binding> {
    (
        proptest::option::of(id()),
        proptest::option::of(id()),
        proptest::option::of(id()),
        any::<bool>(),
    )
        .prop_map(move |(team, agent, tenant, delegate)| {
            let mut scope = Binding {
                team_id: team,
                agent_id: agent,
                tenant_id: tenant.filter(|_| server == McpServerName::Memory),
                delegate: delegate && server == McpServerName::Teamchat,
            };
            if server == McpServerName::Teamchat {
                scope.team_id.get_or_insert_with(|| "room".to_owned());
                scope.agent_id.get_or_insert_with(|| "author".to_owned());
            } else if !scope.is_bound() {
                scope.team_id = Some("team".to_owned());
            }
            scope
        })
}

fn server_and_scope() -> impl Strategy<Value = (McpServerName, Binding)> {
    server().prop_flat_map(|s| (Just(s), scope_for(s)))
}

/// The query string of `server`'s attach URL for `signed`.
fn query_of(server: McpServerName, signed: &SignedScope) -> String {
    assert_eq!(server, signed.server);
    let url = mcp_http_url("http://127.0.0.1:1", signed);
    url.split_once('?')
        .map(|(_, q)| q.to_owned())
        .expect("a scoped URL has a query")
}

/// One `key=value` pair of a hand-made query.
fn query_pair() -> impl Strategy<Value = String> {
    let key = prop_oneof![
        Just("scopeTeamId"),
        Just("scopeAgentId"),
        Just("scopeTenantId"),
        Just("roomTeamId"),
        Just("postAuthorAgentId"),
        Just("delegate"),
        Just("scopeSig"),
        Just("scope%53ig"),
        Just("foo"),
        Just(""),
    ];
    let value = prop_oneof![
        "[0-9a-f]{64}",
        "[0-9A-F]{64}",
        "[0-9a-f]{0,130}",
        "[a-z0-9]{1,8}",
        Just("1".to_owned()),
        any::<String>(),
    ];
    (key, value, any::<bool>()).prop_map(|(k, v, encode)| {
        if encode {
            form_urlencoded::Serializer::new(String::new())
                .append_pair(k, &v)
                .finish()
        } else {
            format!("{k}={v}")
        }
    })
}

/// A query string as an attacker would write it.
fn hand_made_query() -> impl Strategy<Value = String> {
    prop_oneof![
        proptest::collection::vec(query_pair(), 0..8).prop_map(|pairs| pairs.join("&")),
        any::<String>(),
        proptest::collection::vec(any::<u8>(), 0..200)
            .prop_map(|b| String::from_utf8_lossy(&b).into_owned()),
    ]
}

/// `sig` with bit `bit` (modulo its length) flipped, re-encoded as hex.
fn flip_bit(sig: &str, bit: usize) -> String {
    let mut bytes = hex::decode(sig).expect("the signer writes hex");
    let bit = bit % (bytes.len() * 8);
    bytes[bit / 8] ^= 1 << (bit % 8);
    hex::encode(bytes)
}

/// A different value for one bound field of `scope` (or a field added or dropped).
fn mutate(scope: &Binding, which: u8, other: String) -> Binding {
    let mut changed = scope.clone();
    let replace = |field: &mut Option<String>| {
        *field = match field.take() {
            Some(old) if old == other => None,
            Some(old) if which & 0x10 != 0 => Some(format!("{old}x")),
            _ => Some(other.clone()),
        };
    };
    match which % 4 {
        0 => replace(&mut changed.team_id),
        1 => replace(&mut changed.agent_id),
        2 => replace(&mut changed.tenant_id),
        _ => changed.delegate = !changed.delegate,
    }
    changed
}

proptest! {
    #![proptest_config(config(512))]

    #[test]
    fn hand_made_queries_never_bind(server in server(), query in hand_made_query()) {
        let binding = binding_from_query(server, Some(&query), &signer());
        prop_assert!(
            !matches!(&binding, Ok(b) if *b != Binding::default()),
            "query {:?} bound a session: {:?}", query, binding
        );
    }

    #[test]
    fn minted_urls_read_back_their_scope((server, scope) in server_and_scope()) {
        prop_assert!(scope.check_for(server).is_ok());
        let signed = SignedScope::new(server, scope.clone(), &signer());
        let query = query_of(server, &signed);
        prop_assert_eq!(binding_from_query(server, Some(&query), &signer()), Ok(scope));
        for other in McpServerName::ALL.into_iter().filter(|o| *o != server) {
            prop_assert!(binding_from_query(other, Some(&query), &signer()).is_err(), "{}", other);
        }
    }

    #[test]
    fn any_flipped_signature_bit_refuses(
        (server, scope) in server_and_scope(),
        bit in 0usize..256,
    ) {
        let signed = SignedScope::new(server, scope.clone(), &signer());
        let forged = SignedScope { server, scope, sig: flip_bit(&signed.sig, bit) };
        let query = query_of(server, &forged);
        prop_assert!(binding_from_query(server, Some(&query), &signer()).is_err());
    }

    #[test]
    fn any_changed_field_under_a_valid_signature_refuses(
        (server, scope) in server_and_scope(),
        which in any::<u8>(),
        other in id(),
    ) {
        let signed = SignedScope::new(server, scope.clone(), &signer());
        // A tenant is not part of a non-memory URL, so changing it changes nothing there.
        prop_assume!(which % 4 != 2 || server == McpServerName::Memory);
        let changed = mutate(&scope, which, other);
        prop_assume!(changed != scope && (changed.is_bound() || changed.delegate));
        let forged = SignedScope { server, scope: changed.clone(), sig: signed.sig };
        let query = query_of(server, &forged);
        prop_assert!(binding_from_query(server, Some(&query), &signer()).is_err());
        prop_assert!(!signer().verify(server, &changed, &forged.sig));
    }

    #[test]
    fn verify_accepts_only_the_signers_own_signature(
        (server, scope) in server_and_scope(),
        candidate in prop_oneof!["[0-9a-f]{64}", "[0-9a-fA-F]{0,130}", any::<String>()],
    ) {
        let real = signer().sign(server, &scope);
        let verified = signer().verify(server, &scope, &candidate);
        prop_assert_eq!(verified, candidate.eq_ignore_ascii_case(&real));
        prop_assert!(signer().verify(server, &scope, &real.to_uppercase()));
        let other_install = ScopeSigner::from_secret_hex(&"c3".repeat(32)).expect("a valid secret");
        prop_assert!(!other_install.verify(server, &scope, &real));
    }
}
