//! The one secret scrubber. Memory runs it on every save (title, content, tags, procedure
//! content), the board on every task title, description and comment, and the tool broker
//! on every audit row and note, so a credential an agent pastes never reaches the database.
//!
//! What is redacted (each match becomes [`REDACTED`]):
//! - PEM private-key blocks (an unterminated block is redacted to the end of the text);
//! - provider tokens: `sk-…` (any of 20+ characters after the prefix, shorter ones only
//!   with a digit), `ghp_…` (and the other `gh?_` kinds), `github_pat_…`, `glpat-…`,
//!   `xox[baprs]-…`, `AKIA…`/`ASIA…`, `AIza…`, `Bearer …`, JWTs (`eyJ…`), Stripe
//!   `sk_live_`/`rk_live_`/`sk_test_`, Hugging Face `hf_`, npm `npm_`, SendGrid `SG.`, Slack
//!   webhook URLs, Twilio `SK…`;
//! - the password of a URL's `user:password@` (the user is kept) and `Basic <base64>`
//!   authorisation whose base64 decodes to `user:password`;
//! - assignments `NAME=value` / `NAME: value` (the name optionally quoted) whose name, in any
//!   case, ends in `TOKEN`, `SECRET`, `PASSWORD`, `PASSWD`, `CREDENTIAL(S)` or a separated or `api`-prefixed `KEY` (`API_KEY`, `access-key`, `apikey`; not
//!   `monkey`): a quoted value fully, an unquoted one up to the next whitespace.
//!
//! Matching runs on the [`normalized`] copy of the text (invisible characters removed, NFKC),
//! so a zero-width space, a variation selector or full-width letters cannot split a token
//! past it; when that copy
//! holds a secret, the scrubbed copy is what is kept.
//!
//! In JSON ([`scrub_json`]), the value of a key that names a credential is masked whole, and
//! every other string leaf goes through [`scrub_text`]. Token *counts* (`tokens`,
//! `max_tokens`, `tokenCount`, a number under a `token` key) are not credentials.

use std::sync::LazyLock;

use base64::Engine;
use base64::engine::DecodePaddingMode;
use base64::engine::general_purpose::{GeneralPurpose, GeneralPurposeConfig};
use regex::{Captures, Regex};
use serde_json::Value;

use crate::normalize::normalized;

/// The sentinel every redacted secret is replaced with.
pub const REDACTED: &str = "[REDACTED]";

/// PEM private-key blocks, including an unterminated one (redacted to the end).
static PEM_BLOCK: LazyLock<Regex> = LazyLock::new(|| {
    compile(
        r"(?s)-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----.*?(?:-----END [A-Z0-9 ]*PRIVATE KEY-----|\z)",
    )
});

/// Provider token shapes. Candidates are checked by [`looks_random`] where a prefix alone
/// is too weak a signal (`sk-learn-tutorial` is prose, `sk-proj-4f9a…` is a key).
static PROVIDER_TOKENS: LazyLock<Vec<(Regex, bool)>> = LazyLock::new(|| {
    vec![
        (compile(r"\bsk-[A-Za-z0-9_\-]{20,}"), false),
        (compile(r"\bsk-[A-Za-z0-9_\-]{16,}"), true),
        (
            compile(r"\b(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{10,}"),
            false,
        ),
        (compile(r"\bhf_[A-Za-z0-9]{20,}"), false),
        (compile(r"\bnpm_[A-Za-z0-9]{20,}"), false),
        (
            compile(r"\bSG\.[A-Za-z0-9_\-]{16,}\.[A-Za-z0-9_\-]{16,}"),
            false,
        ),
        (
            compile(
                r"(?i)\bhttps?://hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9_/\-]+",
            ),
            false,
        ),
        (compile(r"\bSK[0-9a-fA-F]{32}\b"), false),
        (compile(r"\bgh[pousr]_[A-Za-z0-9]{20,}"), false),
        (compile(r"\bgithub_pat_[A-Za-z0-9_]{20,}"), false),
        (compile(r"\bglpat-[A-Za-z0-9_\-]{20,}"), false),
        (compile(r"\bxox[baprs]-[A-Za-z0-9\-]{10,}"), true),
        (compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"), false),
        (compile(r"\bAIza[0-9A-Za-z_\-]{35}"), false),
        (
            compile(r"\beyJ[A-Za-z0-9_\-]{8,}(?:\.[A-Za-z0-9_\-]+){0,2}"),
            false,
        ),
    ]
});

/// `Bearer <credential>`; the word is kept, the credential redacted.
static BEARER: LazyLock<Regex> =
    LazyLock::new(|| compile(r"(?i)\b(bearer)([ \t]+)([A-Za-z0-9._~+/\-]{12,}=*)"));

/// The password of a URL's userinfo (`scheme://user:password@`), up to the last `@` before
/// the host: RFC 3986 keeps `/`, `?`, `#` and `@` out of an unencoded password, but a
/// password pasted with a raw `@` in it must go whole.
static URL_PASSWORD: LazyLock<Regex> =
    LazyLock::new(|| compile(r"(?i)\b([a-z][a-z0-9+.\-]*://[^\s:/?#@]*:)([^\s/?#]+)@"));

/// `Basic <base64>`; redacted when the base64 decodes to `user:password` (prose such as
/// "Basic authentication" does not).
static BASIC: LazyLock<Regex> =
    LazyLock::new(|| compile(r"(?i)\b(basic)([ \t]+)([A-Za-z0-9+/]{4,}={0,2})"));

/// Standard base64 with or without padding, as `Basic` credentials are written.
const BASE64_ANY_PADDING: GeneralPurpose = GeneralPurpose::new(
    &base64::alphabet::STANDARD,
    GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent),
);

/// Whether `candidate` is base64 of `user:password`.
fn is_basic_credential(candidate: &str) -> bool {
    BASE64_ANY_PADDING
        .decode(candidate)
        .ok()
        .and_then(|bytes| String::from_utf8(bytes).ok())
        .is_some_and(|plain| plain.contains(':') && !plain.chars().any(char::is_control))
}

/// A credential-like name, as [`ASSIGNMENT`] matches it.
const CREDENTIAL_NAME: &str =
    r"[A-Za-z0-9_.\-]*?(?:token|secret|password|passwd|credentials?|[_.\-]key|apikey)";

/// `NAME=value` / `NAME: value` with a credential-like name. A chain of such names (each
/// optionally quoted) before the value (`password: API_KEY: value`) is part of the value,
/// so the last one's value is redacted too.
static ASSIGNMENT: LazyLock<Regex> = LazyLock::new(|| {
    compile(&format!(
        r#"(?i)\b({CREDENTIAL_NAME})(["']?)([ \t]*[:=][ \t]*)((?:["']?{CREDENTIAL_NAME}["']?[ \t]*[:=][ \t]*)*)(?:"((?:[^"\\\n]|\\.)*)"|'([^'\n]*)'|([^\s"']\S*))"#
    ))
});

fn compile(pattern: &str) -> Regex {
    // The patterns are constants exercised by the tests below; a failure is a bug here.
    Regex::new(pattern).expect("scrubber pattern compiles")
}

/// Whether a token-shaped candidate looks machine-generated (has a digit) rather than
/// a hyphenated word.
fn looks_random(candidate: &str) -> bool {
    candidate.bytes().any(|b| b.is_ascii_digit())
}

/// Replace every secret in `text` with [`REDACTED`]. Matching runs on the normalised copy
/// first; when it holds a secret, that copy (scrubbed) is returned, otherwise `text`
/// scrubbed as written.
pub fn scrub_text(text: &str) -> String {
    let normal = normalized(text);
    if normal != text {
        let scrubbed = scrub_exact(&normal);
        if scrubbed != normal {
            return scrubbed;
        }
    }
    scrub_exact(text)
}

/// [`scrub_text`] on the text exactly as given.
fn scrub_exact(text: &str) -> String {
    let mut out = PEM_BLOCK.replace_all(text, REDACTED).into_owned();
    for (pattern, needs_digit) in PROVIDER_TOKENS.iter() {
        if !pattern.is_match(&out) {
            continue;
        }
        out = pattern
            .replace_all(&out, |caps: &Captures| {
                let found = &caps[0];
                if *needs_digit && !looks_random(found) {
                    found.to_string()
                } else {
                    REDACTED.to_string()
                }
            })
            .into_owned();
    }
    out = URL_PASSWORD
        .replace_all(&out, |caps: &Captures| format!("{}{REDACTED}@", &caps[1]))
        .into_owned();
    out = BASIC
        .replace_all(&out, |caps: &Captures| {
            if is_basic_credential(&caps[3]) {
                format!("{}{}{REDACTED}", &caps[1], &caps[2])
            } else {
                caps[0].to_string()
            }
        })
        .into_owned();
    out = BEARER
        .replace_all(&out, |caps: &Captures| {
            let credential = &caps[3];
            if looks_random(credential) || credential.len() >= 20 {
                format!("{}{}{REDACTED}", &caps[1], &caps[2])
            } else {
                caps[0].to_string()
            }
        })
        .into_owned();
    ASSIGNMENT
        .replace_all(&out, |caps: &Captures| {
            let head = format!("{}{}{}", &caps[1], &caps[2], &caps[3]);
            if caps.get(5).is_some() {
                format!("{head}\"{REDACTED}\"")
            } else if caps.get(6).is_some() {
                format!("{head}'{REDACTED}'")
            } else {
                format!("{head}{REDACTED}")
            }
        })
        .into_owned()
}

/// Scrub a JSON value: credential-named keys have their value masked whole, every other
/// string leaf goes through [`scrub_text`].
pub fn scrub_json(value: &Value) -> Value {
    match value {
        Value::String(s) => Value::String(scrub_text(s)),
        Value::Array(items) => Value::Array(items.iter().map(scrub_json).collect()),
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(key, v)| {
                    let masked = match credential_key(key) {
                        KeyKind::Plain => scrub_json(v),
                        KeyKind::Token if v.is_number() || v.is_boolean() || v.is_null() => {
                            v.clone()
                        }
                        KeyKind::Token | KeyKind::Credential => Value::String(REDACTED.to_string()),
                    };
                    (key.clone(), masked)
                })
                .collect(),
        ),
        other => other.clone(),
    }
}

/// Whether `text` holds at least one sentinel and nothing else of substance (only
/// sentinels, whitespace and punctuation): such content is declined rather than saved.
pub fn is_only_redactions(text: &str) -> bool {
    text.contains(REDACTED)
        && !text
            .replace(REDACTED, "")
            .chars()
            .any(char::is_alphanumeric)
}

/// How a JSON key relates to credentials.
#[derive(Debug, PartialEq, Eq)]
enum KeyKind {
    /// Not a credential name.
    Plain,
    /// Ends in the word `token` (`accessToken`, `id_token`): a credential unless the value
    /// is a number (a count).
    Token,
    /// Names a credential outright (`password`, `apiKey`, `authorization`, …).
    Credential,
}

/// Classify a JSON key by its words (split on separators and camelCase).
fn credential_key(key: &str) -> KeyKind {
    let words = key_words(&normalized(key));
    let pair = |a: &str, b: &str| words.windows(2).any(|p| p[0] == a && p[1] == b);
    let credential_word = words.iter().any(|w| {
        matches!(
            w.as_str(),
            "secret"
                | "secrets"
                | "password"
                | "passwd"
                | "passphrase"
                | "authorization"
                | "bearer"
                | "credential"
                | "credentials"
                | "apikey"
                | "privatekey"
                | "accesskey"
        )
    });
    if credential_word
        || pair("api", "key")
        || pair("private", "key")
        || pair("access", "key")
        || pair("secret", "key")
    {
        KeyKind::Credential
    } else if words.last().is_some_and(|w| w == "token") {
        KeyKind::Token
    } else {
        KeyKind::Plain
    }
}

/// Lowercase words of a key: split on non-alphanumerics and camelCase boundaries
/// (`APIKey` → `api`, `key`; `max_tokens` → `max`, `tokens`).
fn key_words(key: &str) -> Vec<String> {
    let mut words = Vec::new();
    for part in key.split(|c: char| !c.is_alphanumeric()) {
        let chars: Vec<char> = part.chars().collect();
        let mut current = String::new();
        for (i, &c) in chars.iter().enumerate() {
            let boundary = i > 0
                && c.is_uppercase()
                && (chars[i - 1].is_lowercase()
                    || chars[i - 1].is_ascii_digit()
                    || (chars[i - 1].is_uppercase()
                        && chars.get(i + 1).is_some_and(|n| n.is_lowercase())));
            if boundary && !current.is_empty() {
                words.push(std::mem::take(&mut current));
            }
            current.extend(c.to_lowercase());
        }
        if !current.is_empty() {
            words.push(current);
        }
    }
    words
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const OPENAI: &str = "sk-proj-4f9aB7cD2eF1gH8iJ3kL6mN0pQ5rS";
    const GITHUB: &str = "ghp_a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8";
    const GITHUB_PAT: &str = "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz";
    const GITLAB: &str = "glpat-xY7zK9mN2pQ4rS6tU8vW";
    const SLACK: &str = "xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx";
    const AWS: &str = "AKIAIOSFODNN7EXAMPLE";
    const GOOGLE: &str = "AIzaSyA1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q";
    const JWT: &str = "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U";
    const PEM: &str = "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA0Z3VS5JJcds3xfn/ygWyF8PbnGy0AHB7MhgHcTz6sE2I2yPB\naFDrBz9vFqU4yQ7wq2d3Zb9y8L9sYpZfW4Lr2Q==\n-----END RSA PRIVATE KEY-----";

    fn assert_gone(input: &str, secret: &str) {
        let out = scrub_text(input);
        assert!(!out.contains(secret), "secret survived in {out:?}");
        assert!(out.contains(REDACTED), "no sentinel in {out:?}");
    }

    #[test]
    fn provider_tokens_in_prose_are_redacted() {
        for secret in [OPENAI, GITHUB, GITHUB_PAT, GITLAB, SLACK, AWS, GOOGLE, JWT] {
            let prose = format!("I used {secret} to call the service yesterday.");
            assert_gone(&prose, secret);
            let out = scrub_text(&prose);
            assert!(out.starts_with("I used [REDACTED]"), "{out}");
            assert!(out.ends_with(" to call the service yesterday."), "{out}");
        }
    }

    #[test]
    fn provider_tokens_quoted_and_in_env_lines_are_redacted() {
        for secret in [OPENAI, GITHUB, GITHUB_PAT, GITLAB, SLACK, AWS, GOOGLE, JWT] {
            assert_gone(&format!("export SERVICE_CRED=\"{secret}\""), secret);
            assert_gone(&format!("value='{secret}'"), secret);
            assert_gone(&format!("({secret})"), secret);
        }
    }

    #[test]
    fn pem_private_key_blocks_are_redacted_whole() {
        let text = format!("here is the deploy key:\n{PEM}\nkeep it safe");
        let out = scrub_text(&text);
        assert_eq!(out, "here is the deploy key:\n[REDACTED]\nkeep it safe");
        let openssh = "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n-----END OPENSSH PRIVATE KEY-----";
        assert_eq!(scrub_text(openssh), REDACTED);
        let cut = "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC";
        assert_eq!(scrub_text(&format!("x {cut}")), "x [REDACTED]");
        // A public key or certificate is not a secret.
        let public = "-----BEGIN PUBLIC KEY-----\nMFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAE\n-----END PUBLIC KEY-----";
        assert_eq!(scrub_text(public), public);
    }

    #[test]
    fn bearer_credentials_are_redacted_keeping_the_scheme() {
        assert_eq!(
            scrub_text("curl -H 'Authorization: Bearer abc123def456ghi789' https://x"),
            "curl -H 'Authorization: Bearer [REDACTED]' https://x"
        );
        assert_eq!(
            scrub_text("bearer   tok3nValue99xyz=="),
            "bearer   [REDACTED]"
        );
        // Prose about bearer tokens stays.
        let prose = "Bearer tokens and bearer authentication are explained here.";
        assert_eq!(scrub_text(prose), prose);
    }

    #[test]
    fn env_assignments_are_redacted_quoted_fully_unquoted_to_whitespace() {
        let cases = [
            ("GITHUB_TOKEN=abc123 next", "GITHUB_TOKEN=[REDACTED] next"),
            (
                "export DB_PASSWORD=hunter2",
                "export DB_PASSWORD=[REDACTED]",
            ),
            ("DB_PASSWD: s3cr3t!", "DB_PASSWD: [REDACTED]"),
            (
                "CLIENT_SECRET=\"two words here\" tail",
                "CLIENT_SECRET=\"[REDACTED]\" tail",
            ),
            ("client_secret='a b c'", "client_secret='[REDACTED]'"),
            ("OPENAI_API_KEY=whatever", "OPENAI_API_KEY=[REDACTED]"),
            ("api_key: plainvalue", "api_key: [REDACTED]"),
            ("apikey=plainvalue", "apikey=[REDACTED]"),
            ("access-key = AbCd1234", "access-key = [REDACTED]"),
            ("aws.secret.key=xyz", "aws.secret.key=[REDACTED]"),
            (
                "Password: hunter2 is the one",
                "Password: [REDACTED] is the one",
            ),
            ("password=", "password="),
            ("my_token: \"\"", "my_token: \"[REDACTED]\""),
            // A name chained before the value does not shield the value (found by fuzzing).
            ("password: \tAPI_KEY: aa;#A*!^", "password: \t[REDACTED]"),
            ("token=secret_key=\"a b\" x", "token=\"[REDACTED]\" x"),
        ];
        for (input, expected) in cases {
            assert_eq!(scrub_text(input), expected, "input {input:?}");
        }
    }

    #[test]
    fn multi_line_env_file_is_scrubbed_line_by_line() {
        let env = "HOST=localhost\nAPI_KEY=k-77aa\nPASSWORD=\nPORT=8080\nSLACK_TOKEN=xoxb-1234567890-abc\n";
        assert_eq!(
            scrub_text(env),
            "HOST=localhost\nAPI_KEY=[REDACTED]\nPASSWORD=\nPORT=8080\nSLACK_TOKEN=[REDACTED]\n"
        );
    }

    #[test]
    fn json_text_inside_a_string_is_scrubbed() {
        let text =
            r#"config: {"api_key": "abc 123", "password":"p@ss", "tokens": 1234, "name": "x"}"#;
        assert_eq!(
            scrub_text(text),
            r#"config: {"api_key": "[REDACTED]", "password":"[REDACTED]", "tokens": 1234, "name": "x"}"#
        );
    }

    #[test]
    fn near_misses_stay_untouched() {
        let keep = [
            r#"{"tokens": 1234, "max_tokens": 500}"#,
            "max_tokens=500",
            "prompt_tokens: 12, completion_tokens: 30",
            "The token limit matters; each token costs money.",
            "monkey=1",
            "monkey: banana",
            "keyboard=qwerty",
            "the key insight is caching",
            "sk-learn-tutorial is a library name",
            "Ask about AKIA in the docs",
            "secretary=alice",
            "eyJ",
            "tokenizer=bert",
        ];
        for text in keep {
            assert_eq!(scrub_text(text), text, "near-miss changed: {text:?}");
        }
    }

    #[test]
    fn json_credential_keys_are_masked_whole_and_counts_kept() {
        let input = json!({
            "apiKey": "abc",
            "x-api-key": "abc",
            "Authorization": "Basic dXNlcjpwYXNz",
            "credentials": {"user": "u", "pass": "p"},
            "privateKey": ["a", "b"],
            "AWS_ACCESS_KEY": "x",
            "refresh_token": "r-1",
            "idToken": "i-2",
            "client_secret": "c",
            "password": 1234,
            "tokens": 1234,
            "max_tokens": 500,
            "tokenCount": 7,
            "token": 42,
            "usage": {"total_tokens": 99, "note": "used sk-proj-4f9aB7cD2eF1gH8iJ3kL6mN0pQ5rS"},
            "monkey": 1,
            "list": ["Bearer abcdef1234567890", "plain"],
        });
        let out = scrub_json(&input);
        for key in [
            "apiKey",
            "x-api-key",
            "Authorization",
            "credentials",
            "privateKey",
            "AWS_ACCESS_KEY",
            "refresh_token",
            "idToken",
            "client_secret",
            "password",
        ] {
            assert_eq!(out[key], json!(REDACTED), "key {key}");
        }
        assert_eq!(out["tokens"], json!(1234));
        assert_eq!(out["max_tokens"], json!(500));
        assert_eq!(out["tokenCount"], json!(7));
        assert_eq!(out["token"], json!(42));
        assert_eq!(out["monkey"], json!(1));
        assert_eq!(out["usage"]["total_tokens"], json!(99));
        assert_eq!(out["usage"]["note"], json!("used [REDACTED]"));
        assert_eq!(out["list"], json!(["Bearer [REDACTED]", "plain"]));
    }

    #[test]
    fn key_words_split_separators_and_camel_case() {
        assert_eq!(key_words("APIKey"), ["api", "key"]);
        assert_eq!(key_words("x-api-key"), ["x", "api", "key"]);
        assert_eq!(key_words("maxTokens"), ["max", "tokens"]);
        assert_eq!(key_words("OPENAI_API_KEY"), ["openai", "api", "key"]);
        assert_eq!(credential_key("secretary"), KeyKind::Plain);
        assert_eq!(credential_key("monkey"), KeyKind::Plain);
    }

    #[test]
    fn only_redactions_is_detected() {
        assert!(is_only_redactions(&scrub_text(OPENAI)));
        assert!(is_only_redactions(&scrub_text(&format!(
            "{GITHUB}\n{AWS}, "
        ))));
        assert!(!is_only_redactions(&scrub_text(&format!(
            "the key is {GITHUB}"
        ))));
        assert!(!is_only_redactions("plain text"));
        assert!(!is_only_redactions(""));
    }

    /// Vendor token shapes, each fake but of the real shape.
    const VENDOR: &[&str] = &[
        "sk_live_4eC39HqLyjWDarjtT1zdp7dc",
        "rk_live_51H8abcdEFGH1234ijklMNOP",
        "sk_test_4eC39HqLyjWDarjtT1zdp7dc",
        "hf_aBcDeFgHiJkLmNoPqRsTuVwXyZ012345",
        "npm_a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8",
        "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",
        "https://hooks.slack.com/services/T00000000/B00000000/XXXXXXXXXXXXXXXXXXXXXXXX",
        "SK0123456789abcdef0123456789abcdef",
        "sk-ant-api03-abcdefghijklmnopqrstuvwxyzABCDEF",
        // An OpenAI key whose letters happen to look regular (no digit).
        "sk-abcdefghijklmnopqrstuvwxyzABCD",
    ];

    #[test]
    fn vendor_tokens_are_redacted() {
        for secret in VENDOR {
            let out = scrub_text(&format!("deploy with {secret} today"));
            assert_eq!(out, "deploy with [REDACTED] today", "{secret}");
        }
    }

    #[test]
    fn url_passwords_are_redacted_keeping_the_user() {
        let cases = [
            (
                "DATABASE_URL is postgres://admin:hunter2pass@db.internal:5432/app",
                "DATABASE_URL is postgres://admin:[REDACTED]@db.internal:5432/app",
            ),
            (
                "clone https://bob:s3cret@git.example.com/x.git",
                "clone https://bob:[REDACTED]@git.example.com/x.git",
            ),
            (
                "mongodb+srv://u:pw123@cluster0.example.net/db",
                "mongodb+srv://u:[REDACTED]@cluster0.example.net/db",
            ),
            (
                "https://user:pa@ss2word@host/ and mail me@example.com",
                "https://user:[REDACTED]@host/ and mail me@example.com",
            ),
            (
                "redis://:redispass@cache:6379",
                "redis://:[REDACTED]@cache:6379",
            ),
            ("mysql://root:p%40ss@h/db", "mysql://root:[REDACTED]@h/db"),
        ];
        for (input, expected) in cases {
            assert_eq!(scrub_text(input), expected, "input {input:?}");
        }
    }

    #[test]
    fn basic_authorisation_is_redacted_when_it_decodes_to_user_and_password() {
        assert_eq!(
            scrub_text("curl -H 'Authorization: Basic dXNlcjpwYXNzd29yZA==' x"),
            "curl -H 'Authorization: Basic [REDACTED]' x"
        );
        assert_eq!(scrub_text("basic YWxpY2U6czNjcjN0"), "basic [REDACTED]");
    }

    #[test]
    fn secrets_split_by_format_characters_or_written_full_width_are_redacted() {
        let split = "ghp_a1B2c3D4e5\u{200b}F6g7H8i9J0k1L2m3N4o5P6q7R8";
        let out = scrub_text(&format!("token {split} here"));
        assert_eq!(out, "token [REDACTED] here");
        let joined = "sk-proj-4f9a\u{2060}B7cD2eF1\u{feff}gH8iJ3kL6mN0pQ5rS";
        assert_eq!(scrub_text(joined), REDACTED);
        let full_width: String = GITHUB
            .chars()
            .map(|c| char::from_u32(c as u32 - 0x21 + 0xff01).unwrap())
            .collect();
        assert_eq!(scrub_text(&format!("key {full_width}")), "key [REDACTED]");
        assert_eq!(
            scrub_text("pass\u{200b}word=hunter2 ok"),
            "password=[REDACTED] ok"
        );
        assert_eq!(
            scrub_json(&json!({"pass\u{200b}word": "hunter2"})),
            json!({"pass\u{200b}word": REDACTED})
        );
    }

    #[test]
    fn text_without_secrets_keeps_its_exact_characters() {
        let text = "caf\u{e9} \u{ff21}\u{200b}B: the \u{fb01}le is fine";
        assert_eq!(scrub_text(text), text);
    }

    #[test]
    fn new_near_misses_stay_untouched() {
        for text in [
            "Basic authentication is weak",
            "basic auth, basic setup",
            "https://example.com:8080/path",
            "see https://user@example.com/x",
            "hf_hub_download fetches files",
            "npm_config_cache is a setting",
            "SG.short.word",
            "SKU 12 in stock",
        ] {
            assert_eq!(scrub_text(text), text, "near-miss changed: {text:?}");
        }
    }

    #[test]
    fn scrubbing_is_idempotent() {
        let text = format!("API_KEY={OPENAI} and Bearer {JWT} then {PEM}");
        let once = scrub_text(&text);
        assert_eq!(scrub_text(&once), once);
    }
}
