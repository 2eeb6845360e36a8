//! How many waits one caller may hold at once (SPEC §16). A wait (a long-poll on a room, a
//! call waiting for a human's approval) is a future, so it costs the server little; still,
//! one agent opening hundreds of them (each through a request of its own, no session
//! needed on 2026-07-28) would hold that many requests, reads and wake-ups. Each caller
//! holds at most `CLAWBOO_MAX_WAITS` at once; one more is refused at once with
//! `too_many_waits`.
//!
//! The caller is its bound identity (team and agent together), or for an unbound caller
//! the peer address the HTTP server saw ([`Peer`]); a stdio process serves one client.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};

use rmcp::RoleServer;
use rmcp::model::CallToolResult;
use rmcp::service::RequestContext;

use crate::binding::Binding;
use crate::metrics::{self, ProtocolFamily, WaitGauge};
use crate::protocol::tool_error;

/// The environment variable that sets the most waits one caller holds at once.
pub const MAX_WAITS_ENV: &str = "CLAWBOO_MAX_WAITS";

/// The most waits one caller holds at once when `CLAWBOO_MAX_WAITS` does not say.
pub const DEFAULT_MAX_WAITS: usize = 16;

/// The peer address of an HTTP request, which the HTTP server puts in the request's
/// extensions so an unbound caller's waits are counted per address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Peer(pub IpAddr);

/// Whose waits are counted together.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum WaitOwner {
    /// A bound agent, on its team (none when bound without one).
    Agent { team: Option<String>, agent: String },
    /// An unbound caller, by the address it connected from.
    Peer(IpAddr),
    /// An unbound caller of a transport with no address (stdio: one client a process).
    Local,
}

impl WaitOwner {
    /// The owner of a call made under `binding`, with the request's peer for unbound ones.
    pub fn of(binding: &Binding, request: &RequestContext<RoleServer>) -> WaitOwner {
        if let Some(agent) = &binding.agent_id {
            return WaitOwner::Agent {
                team: binding.team_id.clone(),
                agent: agent.clone(),
            };
        }
        let peer = request
            .extensions
            .get::<http::request::Parts>()
            .and_then(|parts| parts.extensions.get::<Peer>());
        match peer {
            Some(Peer(address)) => WaitOwner::Peer(*address),
            None => WaitOwner::Local,
        }
    }
}

/// The count of waits each owner holds, shared by every server of a process.
#[derive(Debug, Clone)]
pub struct WaitLimit {
    shared: Arc<Held>,
}

#[derive(Debug)]
struct Held {
    max: usize,
    by_owner: Mutex<HashMap<WaitOwner, usize>>,
}

impl Default for WaitLimit {
    fn default() -> Self {
        WaitLimit::new(DEFAULT_MAX_WAITS)
    }
}

impl WaitLimit {
    /// At most `max` waits an owner (at least one).
    pub fn new(max: usize) -> WaitLimit {
        WaitLimit {
            shared: Arc::new(Held {
                max: max.max(1),
                by_owner: Mutex::new(HashMap::new()),
            }),
        }
    }

    /// The limit `CLAWBOO_MAX_WAITS` sets, else [`DEFAULT_MAX_WAITS`]; a value that is not
    /// a positive whole number is refused with what to write instead.
    pub fn from_env() -> Result<WaitLimit, String> {
        match std::env::var(MAX_WAITS_ENV) {
            Err(_) => Ok(WaitLimit::default()),
            Ok(text) => match text.trim().parse::<usize>() {
                Ok(max) if max > 0 => Ok(WaitLimit::new(max)),
                _ => Err(format!(
                    "{MAX_WAITS_ENV} must be a positive whole number of waits, not {text:?}: fix or unset it (default {DEFAULT_MAX_WAITS})"
                )),
            },
        }
    }

    /// The most waits an owner holds at once.
    pub fn max(&self) -> usize {
        self.shared.max
    }

    /// Begin a wait for `owner`, a caller speaking `family`: a permit that ends it when
    /// dropped (counted in `clawboo_mcp_waits` meanwhile), or the refusal of a wait past
    /// the limit.
    pub fn begin(
        &self,
        owner: WaitOwner,
        family: ProtocolFamily,
    ) -> Result<WaitPermit, CallToolResult> {
        let mut held = self
            .shared
            .by_owner
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let count = held.entry(owner.clone()).or_insert(0);
        if *count >= self.shared.max {
            return Err(tool_error(
                "too_many_waits",
                format!(
                    "too many waits: you already hold {} waits (long-polls or calls waiting for approval) at once, the most one caller may; finish or cancel one of them, then call again",
                    self.shared.max
                ),
            ));
        }
        *count += 1;
        Ok(WaitPermit {
            shared: Arc::clone(&self.shared),
            owner,
            _counted: metrics::enabled().then(|| WaitGauge::hold(family)),
        })
    }
}

/// One wait in progress; ends when dropped (the call answered, or was abandoned).
#[derive(Debug)]
pub struct WaitPermit {
    shared: Arc<Held>,
    owner: WaitOwner,
    _counted: Option<WaitGauge>,
}

impl Drop for WaitPermit {
    fn drop(&mut self) {
        let mut held = self
            .shared
            .by_owner
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some(count) = held.get_mut(&self.owner) {
            *count -= 1;
            if *count == 0 {
                held.remove(&self.owner);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SESSION: ProtocolFamily = ProtocolFamily::Session;

    fn agent(team: &str, agent: &str) -> WaitOwner {
        WaitOwner::Agent {
            team: Some(team.into()),
            agent: agent.into(),
        }
    }

    #[test]
    fn an_owner_holds_at_most_the_limit_and_a_finished_wait_frees_its_place() {
        let limit = WaitLimit::new(2);
        let first = limit.begin(agent("red", "alice"), SESSION).expect("first");
        let _second = limit.begin(agent("red", "alice"), SESSION).expect("second");
        let refused = limit
            .begin(agent("red", "alice"), SESSION)
            .expect_err("third");
        assert_eq!(
            refused.meta.as_ref().and_then(|m| m.0.get("error")),
            Some(&serde_json::json!("too_many_waits"))
        );
        // Another team's alice, and another address, count apart.
        let _blue = limit
            .begin(agent("blue", "alice"), SESSION)
            .expect("other team");
        let _peer = limit
            .begin(WaitOwner::Peer(IpAddr::from([127, 0, 0, 1])), SESSION)
            .expect("peer");
        drop(first);
        let _again = limit.begin(agent("red", "alice"), SESSION).expect("freed");
    }
}
