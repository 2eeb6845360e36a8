//! Signed attach scope: the per-install secret and the HMAC that proves Clawboo minted a
//! binding.
//!
//! An attach URL carries its binding (team, agent, tenant, delegate) in query parameters
//! plus `scopeSig`, a hex HMAC-SHA256 over a versioned canonical string of the server's
//! name and every binding field, so a URL signed for one server opens no other. An unbound
//! URL is signed too (over the name and an empty binding): with the access gate on, that
//! signature is what opens the endpoint. The key is a random per-install secret kept in
//! the store's `settings` table (created once, atomically), so a URL edited by hand, or
//! signed by another install, does not verify and is refused.

use clawboo_store::{Store, StoreError};
use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;

use crate::binding::Binding;
use crate::server_name::McpServerName;

/// The `settings` key holding the hex signing secret.
pub const SIGNING_SECRET_KEY: &str = "attach_signing_secret";

/// Version tag of the canonical string; bump it to invalidate every earlier signature
/// (v1 did not cover the server's name, so its URLs are refused).
const CANONICAL_VERSION: &str = "clawboo-scope-v2";

/// Why a signer could not be made.
#[derive(Debug, thiserror::Error)]
pub enum SigningError {
    /// Reading or creating the secret in the store failed.
    #[error("could not load the attach-signing secret: {0}")]
    Store(#[from] StoreError),
    /// The operating system's random source failed.
    #[error("could not generate an attach-signing secret: {0}")]
    Random(String),
    /// The stored secret is not hex or is too short.
    #[error(
        "the stored attach-signing secret is malformed; delete the `{SIGNING_SECRET_KEY}` setting to regenerate it"
    )]
    Malformed,
}

/// Signs and verifies attach scopes with one install's secret.
#[derive(Clone)]
pub struct ScopeSigner {
    key: Vec<u8>,
}

impl std::fmt::Debug for ScopeSigner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ScopeSigner { key: <redacted> }")
    }
}

/// 32 fresh random bytes, hex-encoded.
fn random_secret_hex() -> Result<String, SigningError> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).map_err(|e| SigningError::Random(e.to_string()))?;
    Ok(hex::encode(bytes))
}

/// One field of the canonical string: `-` when absent, else `<byte length>:<value>`, so
/// no value (whatever characters it holds) can be confused with another split.
fn push_field(out: &mut String, name: &str, value: Option<&str>) {
    out.push('\n');
    out.push_str(name);
    out.push('=');
    match value {
        None => out.push('-'),
        Some(v) => {
            out.push_str(&v.len().to_string());
            out.push(':');
            out.push_str(v);
        }
    }
}

/// The versioned canonical string a signature covers: the server, then every binding
/// field.
fn canonical(server: McpServerName, scope: &Binding) -> String {
    let mut out = String::from(CANONICAL_VERSION);
    push_field(&mut out, "server", Some(server.as_str()));
    push_field(&mut out, "team", scope.team_id.as_deref());
    push_field(&mut out, "agent", scope.agent_id.as_deref());
    push_field(&mut out, "tenant", scope.tenant_id.as_deref());
    push_field(
        &mut out,
        "delegate",
        Some(if scope.delegate { "1" } else { "0" }),
    );
    out
}

impl ScopeSigner {
    /// A signer over the given secret bytes (at least 16).
    pub fn from_secret_hex(secret_hex: &str) -> Result<ScopeSigner, SigningError> {
        let key = hex::decode(secret_hex.trim()).map_err(|_| SigningError::Malformed)?;
        if key.len() < 16 {
            return Err(SigningError::Malformed);
        }
        Ok(ScopeSigner { key })
    }

    /// The install's signer: reads the secret from `settings`, creating it (random 32
    /// bytes) on first use. Atomic across processes: every caller ends with the same key.
    /// Blocking (a store call).
    pub fn from_store(store: &Store) -> Result<ScopeSigner, SigningError> {
        let fresh = random_secret_hex()?;
        let secret = store.setting_or_insert_with(SIGNING_SECRET_KEY, || fresh)?;
        ScopeSigner::from_secret_hex(&secret)
    }

    fn mac(&self) -> Hmac<Sha256> {
        // HMAC accepts keys of any length, so this cannot fail.
        <Hmac<Sha256> as KeyInit>::new_from_slice(&self.key)
            .unwrap_or_else(|_| unreachable!("HMAC takes keys of any length"))
    }

    /// The hex signature of `scope` on `server` (deterministic: the same server and scope
    /// give the same value, so a config file written with it does not churn).
    pub fn sign(&self, server: McpServerName, scope: &Binding) -> String {
        let mut mac = self.mac();
        mac.update(canonical(server, scope).as_bytes());
        hex::encode(mac.finalize().into_bytes())
    }

    /// Whether `sig_hex` is this install's signature of `scope` on `server`, compared in
    /// constant time.
    pub fn verify(&self, server: McpServerName, scope: &Binding, sig_hex: &str) -> bool {
        let Ok(sig) = hex::decode(sig_hex) else {
            return false;
        };
        let mut mac = self.mac();
        mac.update(canonical(server, scope).as_bytes());
        mac.verify_slice(&sig).is_ok()
    }

    /// `payload` sealed for `purpose`: `<hex payload>.<hex HMAC>`, the HMAC over the
    /// purpose and the payload under a tag of its own, so a sealed value is never a scope
    /// signature and one purpose's value opens no other. For state a client must hand back
    /// unchanged (2026-07-28's `requestState`); the payload is readable, not secret.
    pub fn seal(&self, purpose: &str, payload: &str) -> String {
        let encoded = hex::encode(payload);
        let mut mac = self.mac();
        mac.update(sealed_canonical(purpose, &encoded).as_bytes());
        format!("{encoded}.{}", hex::encode(mac.finalize().into_bytes()))
    }

    /// The payload of `sealed`, when this install sealed it for `purpose` (checked in
    /// constant time); `None` for anything else.
    pub fn open(&self, purpose: &str, sealed: &str) -> Option<String> {
        let (encoded, sig_hex) = sealed.split_once('.')?;
        let sig = hex::decode(sig_hex).ok()?;
        let mut mac = self.mac();
        mac.update(sealed_canonical(purpose, encoded).as_bytes());
        mac.verify_slice(&sig).ok()?;
        String::from_utf8(hex::decode(encoded).ok()?).ok()
    }
}

/// Version tag of sealed values, distinct from [`CANONICAL_VERSION`].
const SEALED_VERSION: &str = "clawboo-sealed-v1";

/// What a sealed value's HMAC covers.
fn sealed_canonical(purpose: &str, encoded_payload: &str) -> String {
    let mut out = String::from(SEALED_VERSION);
    push_field(&mut out, "purpose", Some(purpose));
    push_field(&mut out, "payload", Some(encoded_payload));
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    const T: McpServerName = McpServerName::Tasks;

    fn signer() -> ScopeSigner {
        ScopeSigner::from_secret_hex(&"ab".repeat(32)).unwrap()
    }

    fn scope(team: &str, agent: &str) -> Binding {
        Binding {
            team_id: Some(team.into()),
            agent_id: Some(agent.into()),
            ..Binding::default()
        }
    }

    #[test]
    fn signature_is_deterministic_and_verifies() {
        let s = signer();
        let a = s.sign(T, &scope("t1", "a1"));
        assert_eq!(a, s.sign(T, &scope("t1", "a1")));
        assert_eq!(a.len(), 64);
        assert!(s.verify(T, &scope("t1", "a1"), &a));
    }

    #[test]
    fn any_changed_field_breaks_the_signature() {
        let s = signer();
        let base = scope("t1", "a1");
        let sig = s.sign(T, &base);
        assert!(!s.verify(T, &scope("t2", "a1"), &sig));
        assert!(!s.verify(T, &scope("t1", "a2"), &sig));
        let mut delegate = base.clone();
        delegate.delegate = true;
        assert!(!s.verify(T, &delegate, &sig));
        let mut tenant = base.clone();
        tenant.tenant_id = Some("x".into());
        assert!(!s.verify(T, &tenant, &sig));
    }

    #[test]
    fn field_boundaries_cannot_be_shifted() {
        let s = signer();
        // A separator smuggled into a value must not reproduce another split.
        let a = Binding {
            team_id: Some("t\nagent=1:a".into()),
            agent_id: None,
            ..Binding::default()
        };
        let b = Binding {
            team_id: Some("t".into()),
            agent_id: Some("a".into()),
            ..Binding::default()
        };
        assert_ne!(canonical(T, &a), canonical(T, &b));
        assert!(!s.verify(T, &b, &s.sign(T, &a)));
        // Absent and empty are different too.
        let empty = Binding {
            team_id: Some(String::new()),
            ..Binding::default()
        };
        assert_ne!(canonical(T, &empty), canonical(T, &Binding::default()));
    }

    #[test]
    fn a_signature_opens_only_the_server_it_was_made_for() {
        let s = signer();
        for binding in [scope("t1", "a1"), Binding::default()] {
            let sig = s.sign(T, &binding);
            for other in McpServerName::ALL.into_iter().filter(|n| *n != T) {
                assert!(!s.verify(other, &binding, &sig), "{other}");
                assert_ne!(canonical(T, &binding), canonical(other, &binding));
            }
            assert!(s.verify(T, &binding, &sig));
        }
        // The empty binding is signed too, and differs from every bound one.
        let empty = s.sign(T, &Binding::default());
        assert!(!s.verify(T, &scope("t1", "a1"), &empty));
    }

    #[test]
    fn another_install_secret_does_not_verify() {
        let other = ScopeSigner::from_secret_hex(&"cd".repeat(32)).unwrap();
        let sig = other.sign(T, &scope("t1", "a1"));
        assert!(!signer().verify(T, &scope("t1", "a1"), &sig));
    }

    #[test]
    fn sealed_values_open_only_unchanged_for_their_purpose_and_install() {
        let sealed = signer().seal("approval", "{\"a\":1}");
        assert_eq!(
            signer().open("approval", &sealed).as_deref(),
            Some("{\"a\":1}")
        );
        assert_eq!(signer().open("other", &sealed), None);
        let other = ScopeSigner::from_secret_hex(&"cd".repeat(32)).unwrap();
        assert_eq!(other.open("approval", &sealed), None);
        let (payload, sig) = sealed.split_once('.').unwrap();
        let forged = format!("{}.{sig}", hex::encode("{\"a\":2}"));
        assert_ne!(payload, hex::encode("{\"a\":2}"));
        assert_eq!(signer().open("approval", &forged), None);
        for bad in ["", ".", "zz.zz", &format!("{payload}.")] {
            assert_eq!(signer().open("approval", bad), None, "{bad}");
        }
    }

    #[test]
    fn malformed_signatures_are_refused() {
        let s = signer();
        let sc = scope("t1", "a1");
        let sig = s.sign(T, &sc);
        assert!(!s.verify(T, &sc, ""));
        assert!(!s.verify(T, &sc, "zz"));
        assert!(!s.verify(T, &sc, &sig[..62]));
        assert!(!s.verify(T, &sc, &format!("{sig}00")));
        assert!(s.verify(T, &sc, &sig.to_uppercase()));
    }

    #[test]
    fn secret_is_created_once_per_store() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("c.db")).unwrap();
        let a = ScopeSigner::from_store(&store).unwrap();
        let b = ScopeSigner::from_store(&store).unwrap();
        assert_eq!(a.sign(T, &scope("t", "a")), b.sign(T, &scope("t", "a")));
        let secret = store.setting(SIGNING_SECRET_KEY).unwrap().unwrap();
        assert_eq!(secret.len(), 64);
        let other_dir = tempfile::tempdir().unwrap();
        let other = Store::open(&other_dir.path().join("c.db")).unwrap();
        let c = ScopeSigner::from_store(&other).unwrap();
        assert_ne!(a.sign(T, &scope("t", "a")), c.sign(T, &scope("t", "a")));
    }

    #[test]
    fn malformed_secret_is_reported() {
        assert!(matches!(
            ScopeSigner::from_secret_hex("nothex"),
            Err(SigningError::Malformed)
        ));
        assert!(matches!(
            ScopeSigner::from_secret_hex("abcd"),
            Err(SigningError::Malformed)
        ));
    }
}
