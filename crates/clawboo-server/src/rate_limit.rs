//! A per-peer-IP rate limit for the API (token bucket via the `governor` crate).

use std::net::{IpAddr, SocketAddr};
use std::num::NonZeroU32;
use std::sync::Arc;

use axum::extract::{ConnectInfo, Request};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::Response;
use governor::{DefaultKeyedRateLimiter, Quota, RateLimiter};

use crate::AppState;
use crate::error::json_error;
use crate::guard::is_loopback;

/// How fast one peer may call the API.
#[derive(Debug, Clone, Copy)]
pub struct RateLimitConfig {
    /// Sustained requests per second per peer IP.
    pub per_second: NonZeroU32,
    /// Requests a peer may send in a burst above the sustained rate.
    pub burst: NonZeroU32,
    /// Loopback peers are local processes, already trusted with the whole API (see the
    /// threat model in the README); exempting them keeps local agents and benchmarks fast.
    pub exempt_loopback: bool,
}

impl Default for RateLimitConfig {
    fn default() -> Self {
        RateLimitConfig {
            per_second: NonZeroU32::new(100).unwrap_or(NonZeroU32::MIN),
            burst: NonZeroU32::new(400).unwrap_or(NonZeroU32::MIN),
            exempt_loopback: true,
        }
    }
}

/// The shared limiter state.
#[derive(Clone)]
pub struct PeerRateLimiter {
    limiter: Arc<DefaultKeyedRateLimiter<IpAddr>>,
    config: RateLimitConfig,
}

impl PeerRateLimiter {
    /// A limiter with `config`.
    pub fn new(config: RateLimitConfig) -> PeerRateLimiter {
        let quota = Quota::per_second(config.per_second).allow_burst(config.burst);
        PeerRateLimiter {
            limiter: Arc::new(RateLimiter::keyed(quota)),
            config,
        }
    }

    /// Whether `peer` may make one more request now.
    fn admit(&self, peer: IpAddr) -> bool {
        if self.config.exempt_loopback && is_loopback(peer) {
            return true;
        }
        self.limiter.check_key(&peer.to_canonical()).is_ok()
    }

    /// Forget peers whose buckets are full again (keeps memory bounded).
    pub fn prune(&self) {
        self.limiter.retain_recent();
        self.limiter.shrink_to_fit();
    }
}

/// The rate check of [`crate::at_the_edge`]: a 429 with a JSON `{error}` and `Retry-After` when the
/// request's peer is over its rate.
pub(crate) fn rate_refusal(state: &AppState, req: &Request) -> Option<Response> {
    let peer = req
        .extensions()
        .get::<ConnectInfo<SocketAddr>>()
        .map(|c| c.0.ip());
    if let Some(peer) = peer
        && !state.shared.rate_limiter.admit(peer)
    {
        let mut response = json_error(
            StatusCode::TOO_MANY_REQUESTS,
            "rate limit exceeded for this address; slow down and retry in a second",
        );
        response
            .headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
        return Some(response);
    }
    None
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn bursts_are_bounded_per_peer_and_loopback_can_be_exempt() {
        let config = RateLimitConfig {
            per_second: NonZeroU32::new(1).unwrap(),
            burst: NonZeroU32::new(3).unwrap(),
            exempt_loopback: true,
        };
        let l = PeerRateLimiter::new(config);
        let a: IpAddr = "10.0.0.1".parse().unwrap();
        let b: IpAddr = "10.0.0.2".parse().unwrap();
        let admitted = (0..10).filter(|_| l.admit(a)).count();
        assert_eq!(admitted, 3);
        assert!(l.admit(b));
        let lo: IpAddr = "127.0.0.1".parse().unwrap();
        assert!((0..10).all(|_| l.admit(lo)));
        let strict = PeerRateLimiter::new(RateLimitConfig {
            exempt_loopback: false,
            ..config
        });
        assert_eq!((0..10).filter(|_| strict.admit(lo)).count(), 3);
        l.prune();
    }
}
