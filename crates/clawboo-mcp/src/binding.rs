//! The identity a session is bound to by whoever spawned or attached it (stdio flags or a
//! signed URL), never by the model's tool arguments.

/// A session's binding. An empty binding (the default) is an unbound session, where the
/// model supplies scope and identity in arguments.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Binding {
    /// The team whose board, memory and room the session sees.
    pub team_id: Option<String>,
    /// The agent the session acts as (claims, comments, posts, inbox).
    pub agent_id: Option<String>,
    /// The tenant (memory scope).
    pub tenant_id: Option<String>,
    /// Orchestrator-driven team run: teamchat lists `team_delegate`.
    pub delegate: bool,
}

impl Binding {
    /// Whether any binding field is set.
    pub fn is_bound(&self) -> bool {
        self.team_id.is_some() || self.agent_id.is_some() || self.tenant_id.is_some()
    }
}
