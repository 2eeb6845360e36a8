//! The access gate (`STUDIO_ACCESS_TOKEN`), signed attach URLs as the MCP endpoints' other
//! key, and the Host/Origin/Sec-Fetch-Site guard against DNS rebinding and cross-site
//! requests.
//!
//! With the gate on, `/api/mcp/<server>` opens with the token or with a URL whose
//! `scopeSig` verifies for that server (bound or unbound); being a loopback peer is not
//! enough, since any local process could otherwise reach every team unbound. Every path
//! is compared after percent-decoding and case-folding, so `/API/…` or `/api/%6Dcp/…`
//! cannot dodge the gate.

use std::net::{IpAddr, SocketAddr};

use axum::extract::Request;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use clawboo_mcp::attach::{McpServerName, verified_scope};
use subtle::ConstantTimeEq;

use crate::AppState;
use crate::error::json_error;
use crate::mcp_http::{INVALID_SCOPE, jsonrpc_error};

/// The cookie the gate sets and reads.
pub const ACCESS_COOKIE: &str = "clawboo_access";
/// The query parameter that exchanges a token for the cookie.
const ACCESS_PARAM: &str = "access_token";

/// Body of a 401 for a wrong token.
pub const INVALID_TOKEN: &str = "Invalid Clawboo access token.";
/// Body of a 401 for a missing token.
pub const TOKEN_REQUIRED: &str = "Clawboo access token required: open the board with ?access_token=<token> once (it sets the clawboo_access cookie) or send Authorization: Bearer <token>.";

/// Marks a request that presented valid operator credentials (cookie or bearer token).
#[derive(Debug, Clone, Copy)]
pub struct Operator;

/// The shortest `STUDIO_ACCESS_TOKEN` accepted: a shorter one is guessed too easily.
pub const MIN_TOKEN_LEN: usize = 16;

/// Whether `token` is written as `STUDIO_ACCESS_TOKEN` must be: non-empty,
/// `[A-Za-z0-9._~-]` only (it travels in a cookie and a query string unescaped). Its
/// length is checked separately ([`MIN_TOKEN_LEN`]).
pub fn valid_access_token(token: &str) -> bool {
    !token.is_empty()
        && token
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "._~-".contains(c))
}

/// Constant-time token comparison.
fn token_matches(given: &str, expected: &str) -> bool {
    given.as_bytes().ct_eq(expected.as_bytes()).into()
}

/// Whether `ip` is a loopback address (IPv4-mapped IPv6 included).
pub fn is_loopback(ip: IpAddr) -> bool {
    ip.to_canonical().is_loopback()
}

/// `path` percent-decoded (repeatedly, so double encodings unwrap too), with repeated
/// slashes collapsed and ASCII case folded. Used only to decide what a path *might* mean,
/// never to route.
pub fn fold_path(path: &str) -> String {
    let mut current = path.to_owned();
    for _ in 0..4 {
        let decoded = percent_encoding::percent_decode_str(&current)
            .decode_utf8_lossy()
            .into_owned();
        if decoded == current {
            break;
        }
        current = decoded;
    }
    let mut out = String::with_capacity(current.len());
    for c in current.chars() {
        if c == '/' && out.ends_with('/') {
            continue;
        }
        out.push(c.to_ascii_lowercase());
    }
    out
}

/// Whether a (folded) path is under `/api`.
fn is_api_path(folded: &str) -> bool {
    folded == "/api" || folded.starts_with("/api/")
}

/// The server whose MCP endpoint (`/api/mcp/<server>`) the raw path is, byte for byte:
/// only those open with a signed URL instead of the token.
fn mcp_endpoint(raw_path: &str) -> Option<McpServerName> {
    raw_path.strip_prefix("/api/mcp/")?.parse().ok()
}

/// The host part of a `Host` header or an origin's authority (no port, no brackets,
/// lowercase).
fn host_of_authority(authority: &str) -> Option<String> {
    let a = authority.trim();
    if a.is_empty() || a.contains('@') || a.contains('/') {
        return None;
    }
    let host = if let Some(rest) = a.strip_prefix('[') {
        let (inside, after) = rest.split_once(']')?;
        if !(after.is_empty() || after.starts_with(':')) {
            return None;
        }
        inside
    } else {
        match a.rsplit_once(':') {
            Some((h, port)) if port.chars().all(|c| c.is_ascii_digit()) => h,
            Some(_) => return None,
            None => a,
        }
    };
    Some(host.to_ascii_lowercase())
}

/// The port a URL of `scheme` means when it names none.
fn default_port(scheme: &str) -> u16 {
    if scheme == "https" { 443 } else { 80 }
}

/// The port an authority (`host[:port]`, `[v6][:port]`) names: `Some(None)` for none,
/// `None` when malformed.
fn authority_port(authority: &str) -> Option<Option<u16>> {
    let a = authority.trim();
    let port = match a.strip_prefix('[') {
        Some(rest) => rest.split_once(']')?.1.strip_prefix(':'),
        None => a.rsplit_once(':').map(|(_, p)| p),
    };
    match port {
        None => Some(None),
        Some(p) => p.parse().ok().map(Some),
    }
}

/// An origin's scheme, host (as [`host_of_authority`] writes it) and port (the scheme's
/// default when absent).
fn parse_origin(origin: &str) -> Option<(String, String, u16)> {
    let (scheme, authority) = origin.split_once("://")?;
    let scheme = scheme.to_ascii_lowercase();
    if !matches!(scheme.as_str(), "http" | "https") {
        return None;
    }
    let host = host_of_authority(authority)?;
    let port = authority_port(authority)?.unwrap_or(default_port(&scheme));
    Some((scheme, host, port))
}

/// Which `Host` names and which `Origin`s the API answers to.
#[derive(Debug, Clone)]
pub struct HostPolicy {
    allowed: Vec<String>,
    /// Exact (scheme, host, port) triples: another port on the same host is another site.
    origins: Vec<(String, String, u16)>,
}

impl HostPolicy {
    /// Loopback names, the bind address (unless unspecified) and `extra` (`host[:port]`).
    /// Origins: those names over http on the bound port, and each extra host over https
    /// when `public_https` (else http) on its own port or, naming none, the scheme's
    /// default or the bound port.
    pub fn new(bind: SocketAddr, extra: &[String], public_https: bool) -> HostPolicy {
        let mut allowed: Vec<String> = ["localhost", "127.0.0.1", "::1"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        if !bind.ip().is_unspecified() {
            allowed.push(bind.ip().to_string().to_ascii_lowercase());
        }
        let mut origins: Vec<(String, String, u16)> = allowed
            .iter()
            .map(|h| ("http".to_owned(), h.clone(), bind.port()))
            .collect();
        let extra_scheme = if public_https { "https" } else { "http" };
        for e in extra {
            let Some(h) = host_of_authority(e) else {
                continue;
            };
            let ports = match authority_port(e).flatten() {
                Some(p) => vec![p],
                None => vec![default_port(extra_scheme), bind.port()],
            };
            for port in ports {
                origins.push((extra_scheme.to_owned(), h.clone(), port));
            }
            allowed.push(h);
        }
        HostPolicy { allowed, origins }
    }

    fn allows(&self, host: &str) -> bool {
        self.allowed.iter().any(|a| a == host)
    }

    fn allows_origin(&self, origin: &str) -> bool {
        parse_origin(origin).is_some_and(|o| self.origins.contains(&o))
    }

    /// Refuse a foreign `Host`, a foreign or opaque `Origin`, or a cross-site fetch.
    pub fn check(&self, headers: &HeaderMap) -> Result<(), &'static str> {
        if let Some(host) = headers.get(header::HOST) {
            let host = host
                .to_str()
                .ok()
                .and_then(host_of_authority)
                .ok_or("Forbidden: malformed Host header")?;
            if !self.allows(&host) {
                return Err(
                    "Forbidden: Host header is not allowed (possible DNS rebinding); use http://127.0.0.1 or a configured host",
                );
            }
        }
        if let Some(origin) = headers.get(header::ORIGIN) {
            let origin = origin
                .to_str()
                .map_err(|_| "Forbidden: malformed Origin header")?;
            if !self.allows_origin(origin) {
                return Err(
                    "Forbidden: Origin is not allowed (cross-origin request; only this server's own scheme, host and port are)",
                );
            }
        }
        if headers
            .get("sec-fetch-site")
            .is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"cross-site"))
        {
            return Err("Forbidden: cross-site requests are not allowed");
        }
        Ok(())
    }
}

/// What credentials a request carries.
enum Credentials {
    None,
    Valid,
    Invalid,
}

fn cookie_value<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v)
}

fn credentials(headers: &HeaderMap, token: &str) -> Credentials {
    let bearer = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| {
            let (scheme, rest) = v.trim().split_once(' ')?;
            scheme.eq_ignore_ascii_case("bearer").then(|| rest.trim())
        });
    let given = bearer.or_else(|| cookie_value(headers, ACCESS_COOKIE));
    match given {
        None => Credentials::None,
        Some(g) if token_matches(g, token) => Credentials::Valid,
        Some(_) => Credentials::Invalid,
    }
}

/// `?access_token=…` handling: the token when present, plus the query without it.
fn take_access_param(query: Option<&str>) -> Option<(String, String)> {
    let query = query?;
    let mut token = None;
    let mut rest = form_urlencoded::Serializer::new(String::new());
    for (k, v) in form_urlencoded::parse(query.as_bytes()) {
        if k == ACCESS_PARAM {
            token = Some(v.into_owned());
        } else {
            rest.append_pair(&k, &v);
        }
    }
    token.map(|t| (t, rest.finish()))
}

fn redirect_with_cookie(location: &str, token: &str, secure: bool) -> Response {
    let mut cookie = format!("{ACCESS_COOKIE}={token}; Path=/; HttpOnly; SameSite=Lax");
    if secure {
        cookie.push_str("; Secure");
    }
    let mut response = StatusCode::FOUND.into_response();
    let headers = response.headers_mut();
    if let Ok(v) = HeaderValue::from_str(location) {
        headers.insert(header::LOCATION, v);
    }
    if let Ok(v) = HeaderValue::from_str(&cookie) {
        headers.insert(header::SET_COOKIE, v);
    }
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

/// Where to send the browser after `?access_token=`: `path` with leading slashes (and
/// backslashes, which browsers read as slashes) collapsed to one, so `//host/…` cannot
/// become a protocol-relative redirect off this server.
fn local_location(path: &str, rest: &str) -> String {
    let path = format!("/{}", path.trim_start_matches(['/', '\\']));
    if rest.is_empty() {
        path
    } else {
        format!("{path}?{rest}")
    }
}

/// The gate of [`crate::at_the_edge`]: token exchange, Host/Origin guard and credentials for
/// `/api/*`. `Some` is the answer that stops the request (a refusal, or the token exchange's
/// redirect).
pub(crate) fn access_refusal(state: &AppState, req: &mut Request) -> Option<Response> {
    let options = &state.shared.options;
    let token = options.access_token.as_deref();

    if let Some(token) = token
        && let Some((given, rest)) = take_access_param(req.uri().query())
    {
        if !token_matches(&given, token) {
            return Some(json_error(StatusCode::UNAUTHORIZED, INVALID_TOKEN));
        }
        let location = local_location(req.uri().path(), &rest);
        let secure = options.public_https
            || req
                .headers()
                .get("x-forwarded-proto")
                .is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"https"));
        return Some(redirect_with_cookie(&location, token, secure));
    }

    let folded = fold_path(req.uri().path());
    // `/metrics` is held to the API's checks: it tells who works on what, and how much.
    if is_api_path(&folded) || folded == "/metrics" {
        if let Err(why) = state.shared.host_policy.check(req.headers()) {
            tracing::warn!(path = req.uri().path(), "refused by origin guard: {why}");
            return Some(json_error(StatusCode::FORBIDDEN, why));
        }
        if let Some(token) = token {
            match credentials(req.headers(), token) {
                Credentials::Valid => {
                    req.extensions_mut().insert(Operator);
                }
                Credentials::Invalid => {
                    return Some(json_error(StatusCode::UNAUTHORIZED, INVALID_TOKEN));
                }
                Credentials::None => {
                    let Some(server) = mcp_endpoint(req.uri().path()) else {
                        return Some(json_error(StatusCode::UNAUTHORIZED, TOKEN_REQUIRED));
                    };
                    match verified_scope(server, req.uri().query(), &state.shared.signer) {
                        Ok(Some(_)) => {}
                        Ok(None) => {
                            return Some(json_error(StatusCode::UNAUTHORIZED, TOKEN_REQUIRED));
                        }
                        Err(refused) => {
                            return Some(jsonrpc_error(
                                StatusCode::FORBIDDEN,
                                INVALID_SCOPE,
                                &refused.to_string(),
                            ));
                        }
                    }
                }
            }
        }
    }
    None
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn folding_unwraps_case_and_encodings() {
        assert_eq!(fold_path("/API/Mcp/tasks"), "/api/mcp/tasks");
        assert_eq!(fold_path("/api/%6Dcp/tasks"), "/api/mcp/tasks");
        assert_eq!(fold_path("/%61pi/board"), "/api/board");
        assert_eq!(fold_path("/%2561pi/board"), "/api/board");
        assert_eq!(fold_path("//api//board"), "/api/board");
        assert!(is_api_path(&fold_path("/%41PI")));
        assert!(!is_api_path(&fold_path("/apix")));
    }

    #[test]
    fn only_exact_mcp_endpoints_open_with_a_signed_url() {
        assert_eq!(mcp_endpoint("/api/mcp/tasks"), Some(McpServerName::Tasks));
        assert_eq!(
            mcp_endpoint("/api/mcp/teamchat"),
            Some(McpServerName::Teamchat)
        );
        for path in [
            "/api/mcp/config",
            "/api/mcp/status",
            "/API/mcp/tasks",
            "/api/%6Dcp/tasks",
            "/api/mcp/tasks/../../board",
            "/api/mcp/tasks/",
        ] {
            assert_eq!(mcp_endpoint(path), None, "{path}");
        }
    }

    #[test]
    fn the_redirect_never_leaves_the_server() {
        assert_eq!(local_location("/", ""), "/");
        assert_eq!(local_location("//evil.example/x", ""), "/evil.example/x");
        assert_eq!(
            local_location("///evil.example", "a=1"),
            "/evil.example?a=1"
        );
        assert_eq!(local_location("/\\evil.example", ""), "/evil.example");
        assert_eq!(
            local_location("/api/board", "status=todo"),
            "/api/board?status=todo"
        );
    }

    #[test]
    fn loopback_includes_mapped_v4() {
        assert!(is_loopback("127.0.0.1".parse().unwrap()));
        assert!(is_loopback("::1".parse().unwrap()));
        assert!(is_loopback("::ffff:127.0.0.1".parse().unwrap()));
        assert!(!is_loopback("10.0.0.1".parse().unwrap()));
        assert!(!is_loopback("::ffff:10.0.0.1".parse().unwrap()));
    }

    #[test]
    fn tokens_are_validated() {
        assert!(valid_access_token("abc.DEF_~-9"));
        assert!(!valid_access_token(""));
        assert!(!valid_access_token("has space"));
        assert!(!valid_access_token("semi;colon"));
    }

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(*k, HeaderValue::from_str(v).unwrap());
        }
        h
    }

    #[test]
    fn host_policy() {
        let p = HostPolicy::new(
            "127.0.0.1:18790".parse().unwrap(),
            &["board.example:443".into()],
            false,
        );
        assert!(p.check(&headers(&[("host", "127.0.0.1:18790")])).is_ok());
        assert!(p.check(&headers(&[("host", "localhost")])).is_ok());
        assert!(p.check(&headers(&[("host", "[::1]:5")])).is_ok());
        assert!(p.check(&headers(&[("host", "board.example")])).is_ok());
        assert!(p.check(&headers(&[("host", "evil.com")])).is_err());
        assert!(
            p.check(&headers(&[("host", "localhost.evil.com")]))
                .is_err()
        );
        assert!(
            p.check(&headers(&[("host", "127.0.0.1@evil.com")]))
                .is_err()
        );
        for same in [
            "http://localhost:18790",
            "http://127.0.0.1:18790",
            "http://[::1]:18790",
            "HTTP://LOCALHOST:18790",
            "http://board.example:443",
        ] {
            assert!(p.check(&headers(&[("origin", same)])).is_ok(), "{same}");
        }
        // Another port or scheme on the same host is another site.
        for other in [
            "http://localhost:3000",
            "http://localhost",
            "https://localhost:18790",
            "http://127.0.0.1:18791",
            "http://board.example",
            "http://localhost:18790x",
        ] {
            assert!(p.check(&headers(&[("origin", other)])).is_err(), "{other}");
        }
        assert!(
            p.check(&headers(&[("origin", "https://evil.com")]))
                .is_err()
        );
        assert!(p.check(&headers(&[("origin", "null")])).is_err());
        assert!(
            p.check(&headers(&[("sec-fetch-site", "cross-site")]))
                .is_err()
        );
        assert!(
            p.check(&headers(&[("sec-fetch-site", "same-origin")]))
                .is_ok()
        );
    }

    #[test]
    fn extra_hosts_without_a_port_match_the_default_or_bound_port() {
        let p = HostPolicy::new(
            "0.0.0.0:18790".parse().unwrap(),
            &["board.example".into()],
            true,
        );
        let origin = |o: &str| p.check(&headers(&[("origin", o)])).is_ok();
        assert!(origin("https://board.example"));
        assert!(origin("https://board.example:443"));
        assert!(origin("https://board.example:18790"));
        assert!(!origin("http://board.example"));
        assert!(!origin("https://board.example:8443"));
        assert!(origin("http://127.0.0.1:18790"));
    }

    #[test]
    fn credentials_from_cookie_or_bearer() {
        let t = "s3cret";
        assert!(matches!(credentials(&headers(&[]), t), Credentials::None));
        assert!(matches!(
            credentials(&headers(&[("cookie", "a=b; clawboo_access=s3cret")]), t),
            Credentials::Valid
        ));
        assert!(matches!(
            credentials(&headers(&[("authorization", "Bearer s3cret")]), t),
            Credentials::Valid
        ));
        assert!(matches!(
            credentials(&headers(&[("authorization", "Bearer nope")]), t),
            Credentials::Invalid
        ));
    }

    #[test]
    fn access_param_is_removed_from_the_query() {
        assert_eq!(
            take_access_param(Some("a=1&access_token=x&b=2")),
            Some(("x".into(), "a=1&b=2".into()))
        );
        assert_eq!(take_access_param(Some("a=1")), None);
    }
}
