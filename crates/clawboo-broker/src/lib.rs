//! The tool broker: a registry of builtin tools and the pipeline every call runs:
//! unknown / disabled / unavailable → argument validation → inspectors (security, scope,
//! clamp, risk) → approval when required → execute → compaction → audit.
//!
//! Domain logic only: the MCP server in `clawboo-mcp` turns [`CallOutcome`] into wire
//! shapes. The builtins that act outside the store (web search, the filesystem) run behind
//! the [`Executor`] the broker is built with, so the store itself touches neither network
//! nor filesystem. Every method blocks on the database (and the executor): run it off the
//! async executor. None waits for a human: a call that needs one comes back
//! [`Round::Pending`] with its approval opened, and the caller waits for the decision
//! (a future on [`Store::listen_to_approval`], never a parked thread) before
//! [`Broker::resume_call`].
//!
//! ```
//! use std::sync::Arc;
//! use clawboo_store::Store;
//! use clawboo_broker::{
//!     Broker, BrokerConfig, CallOutcome, Caller, Executor, Invocation, Output, Round,
//! };
//! #[derive(Debug)]
//! struct Offline;
//! impl Executor for Offline {
//!     fn execute(&self, _: &Invocation, _: &Caller) -> Output {
//!         Output::error("this broker runs nothing outside the store".into())
//!     }
//! }
//! let dir = tempfile::tempdir().unwrap();
//! let store = Arc::new(Store::open(&dir.path().join("clawboo.db")).unwrap());
//! let broker = Broker::new(store, BrokerConfig::default(), Arc::new(Offline));
//! let args = serde_json::json!({"message": "hi"});
//! let round = broker.call(&Caller::anonymous(), "echo", args.as_object().unwrap()).unwrap();
//! assert!(matches!(round, Round::Done(CallOutcome::Completed { ref text, .. }) if text == "hi"));
//! ```

mod approvals;
pub mod compact;
mod exec;
pub mod inspect;
pub mod registry;

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use clawboo_store::db::DbRow;
use clawboo_store::reads::{Query, RowsRead, StoreRead};
use serde::Serialize;
use serde_json::{Map, Value};

pub use approvals::{Approval, ApprovalError, ApprovalStatus, Decision};
pub use exec::{
    Executor, Invocation, MAX_MESSAGE_CHARS, MAX_NOTE_CHARS, MAX_PATH_CHARS, MAX_QUERY_CHARS,
    Output,
};
pub use registry::{Requirement, Risk, ToolSpec};

use approvals::{NewApproval, Standing};
use clawboo_store::scrub::{scrub_json, scrub_text};
use clawboo_store::{RunError, Store, StoreError, new_id};
use inspect::SecurityVerdict;

/// The environment variable setting the approval wait (and row expiry) in milliseconds.
pub const APPROVAL_WAIT_ENV: &str = "CLAWBOO_APPROVAL_WAIT_MS";
/// The default approval wait: under the 60 s after which common MCP clients give up.
pub const DEFAULT_APPROVAL_WAIT: Duration = Duration::from_secs(55);
/// Audit text columns keep at most this many characters.
pub const AUDIT_MAX_CHARS: usize = 4000;

/// How the broker behaves.
#[derive(Debug, Clone)]
pub struct BrokerConfig {
    /// How long a call waits for a decision; also the approval row's lifetime.
    pub approval_wait: Duration,
    /// How often a waiting call re-reads its row (decisions from other processes).
    pub poll_interval: Duration,
    /// How often a waiting call reports progress.
    pub progress_interval: Duration,
    /// Reads environment variables (availability, the Tavily key); injectable for tests.
    pub env: fn(&str) -> Option<String>,
}

fn process_env(name: &str) -> Option<String> {
    std::env::var(name).ok()
}

impl Default for BrokerConfig {
    fn default() -> Self {
        BrokerConfig {
            approval_wait: DEFAULT_APPROVAL_WAIT,
            poll_interval: Duration::from_millis(200),
            progress_interval: Duration::from_secs(1),
            env: process_env,
        }
    }
}

impl BrokerConfig {
    /// The defaults, with `CLAWBOO_APPROVAL_WAIT_MS` applied from the process environment
    /// (an unparsable wait is ignored with a warning).
    pub fn from_env() -> BrokerConfig {
        let mut config = BrokerConfig::default();
        if let Some(raw) = process_env(APPROVAL_WAIT_ENV) {
            match raw.trim().parse::<u64>() {
                Ok(ms) if ms > 0 => config.approval_wait = Duration::from_millis(ms),
                _ => tracing::warn!(
                    value = %raw,
                    "{APPROVAL_WAIT_ENV} is not a positive number of milliseconds; using 55000"
                ),
            }
        }
        config
    }
}

/// Who is calling: from the connection's binding, never from tool arguments.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Caller {
    /// The bound agent, if any.
    pub agent_id: Option<String>,
    /// The bound team, if any.
    pub team_id: Option<String>,
    /// The bound tenant, if any.
    pub tenant_id: Option<String>,
}

impl Caller {
    /// An unbound caller.
    pub fn anonymous() -> Caller {
        Caller::default()
    }
}

/// A caller a blocklist entry names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Subject {
    /// One agent.
    Agent(String),
    /// Every agent bound to a team.
    Team(String),
}

impl Subject {
    fn kind(&self) -> &'static str {
        match self {
            Subject::Agent(_) => "agent",
            Subject::Team(_) => "team",
        }
    }

    fn id(&self) -> &str {
        match self {
            Subject::Agent(id) | Subject::Team(id) => id,
        }
    }
}

/// The class of a denial (`_meta.error` on the wire).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DenialClass {
    /// No tool has that name.
    UnknownTool,
    /// Disabled by an operator or a requirement is unmet.
    Unavailable,
    /// The arguments do not match the tool's input.
    InvalidArgs,
    /// The security inspector matched a blocked pattern.
    Security,
    /// The tool is on the caller's blocklist.
    Scope,
    /// A human denied the call, or nobody answered in time.
    Approval,
}

impl DenialClass {
    /// `unknown_tool`, `unavailable`, `invalid_args`, `security`, `scope`, `approval`.
    pub fn code(self) -> &'static str {
        match self {
            DenialClass::UnknownTool => "unknown_tool",
            DenialClass::Unavailable => "unavailable",
            DenialClass::InvalidArgs => "invalid_args",
            DenialClass::Security => "security",
            DenialClass::Scope => "scope",
            DenialClass::Approval => "approval",
        }
    }
}

/// A refused call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Denial {
    /// The class.
    pub class: DenialClass,
    /// The machine-readable reason (`security:high:rm-rf-root`, `approval:deny`, …).
    pub reason: String,
    /// What happened and what to do next, for the agent.
    pub hint: String,
    /// The approval row involved, if any.
    pub approval_id: Option<String>,
}

impl Denial {
    fn new(class: DenialClass, reason: String, hint: impl Into<String>) -> Denial {
        Denial {
            class,
            reason,
            hint: hint.into(),
            approval_id: None,
        }
    }

    /// The agent-facing text: `denied: <reason> — <hint>`.
    pub fn message(&self) -> String {
        format!("denied: {} — {}", self.reason, self.hint)
    }
}

/// The approval a call waits for ([`Round::Pending`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpenedApproval {
    /// The pending approval: the client's human, the board, the CLI or REST decides it.
    pub approval_id: String,
    /// When it expires unanswered (store-clock epoch ms).
    pub expires_at: i64,
}

/// Where a round of a call ([`Broker::call`], [`Broker::resume_call`]) left it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Round {
    /// No human was needed, one decided, or the pipeline refused it: the call is over.
    Done(CallOutcome),
    /// The call needs a human's decision, not made yet: ask the client's human or wait for
    /// the board, the CLI or REST, then [`Broker::resume_call`]. Nothing is audited until
    /// the call ends.
    Pending(OpenedApproval),
}

/// How the approval step of a call gets its decision.
enum Asking<'a> {
    /// Open a pending approval (or find a remembered grant).
    Open,
    /// Read the decision on the approval an earlier round of this call opened.
    Resume(&'a str),
}

/// How the approval step ended.
enum Gate {
    Pass,
    Refuse(Denial),
    Opened(OpenedApproval),
}

/// What the pipeline decided before execution.
enum Admission {
    Run(exec::Validated),
    Refuse(Denial),
    Opened(OpenedApproval),
}

/// The refusal of a round whose call already ended (its approval was used).
fn used(approval_id: &str, tool: &str) -> Denial {
    Denial::new(
        DenialClass::Approval,
        "approval:used".to_string(),
        format!(
            "approval {approval_id} already ended its {tool} call; call the tool again without requestState to be asked anew"
        ),
    )
}

/// A round that lost the race to end its call to another round of the same call.
fn replayed(record: &CallRecord<'_>) -> CallOutcome {
    let approval_id = record.approval_id.as_deref().unwrap_or_default();
    CallOutcome::Denied(Denial {
        approval_id: record.approval_id.clone(),
        ..used(approval_id, record.tool)
    })
}

/// `decided_by` of an audit row whose call no human decided: the pipeline's own checks.
pub const DECIDED_BY_POLICY: &str = "policy";
/// `decided_by` of an audit row whose call a remembered `allow_always` let through.
pub const DECIDED_BY_GRANT: &str = "allow_always";
/// `decided_by` of an audit row whose approval nobody answered in time.
pub const DECIDED_BY_EXPIRY: &str = "expired";

/// How a call ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CallOutcome {
    /// The tool ran; `text` is its compacted output.
    Completed {
        /// The compacted output.
        text: String,
        /// Whether the tool itself failed.
        is_error: bool,
        /// The approval that released it, if one was asked for.
        approval_id: Option<String>,
    },
    /// The pipeline refused it.
    Denied(Denial),
}

/// A tool as operators see it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolStatus {
    /// The tool's name.
    pub name: String,
    /// Its one-line description.
    pub description: String,
    /// `safe`, `external` or `destructive`.
    pub risk: String,
    /// Not switched off by an operator.
    pub enabled: bool,
    /// Enabled and every requirement met: listed and callable.
    pub available: bool,
    /// Why it is not available (empty when it is).
    pub diagnostics: Vec<String>,
}

/// One audit row.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AuditRow {
    /// The row id.
    pub id: String,
    /// The call both rows of one call share.
    pub call_id: String,
    /// `before` (the decision) or `after` (the result).
    pub phase: String,
    /// The tool named by the call (scrubbed, at most 200 characters).
    pub tool_name: String,
    /// The calling agent, where known.
    pub agent_id: Option<String>,
    /// The calling team, where known.
    pub team_id: Option<String>,
    /// `allow` or `deny` (before rows), `executed` (after rows).
    pub decision: String,
    /// Why (`security:high:…`, `approval:allow`, …), when there is a reason to give.
    pub reason: Option<String>,
    /// Things noticed but not refused (`mention:<label>`, `clamp:<arg>`, `approval:remembered`).
    pub observations: Vec<String>,
    /// Scrubbed, truncated arguments (JSON text).
    pub args_json: Option<String>,
    /// Scrubbed, compacted, truncated result.
    pub result_text: Option<String>,
    /// Whether the tool failed (after rows).
    pub is_error: Option<bool>,
    /// The approval the call asked for, if any.
    pub approval_id: Option<String>,
    /// When (epoch ms).
    pub created_at: i64,
    /// Who decided the call: `policy` (the pipeline's checks), `allow_always` (a
    /// remembered grant), the approval's own `decided_by` (`elicitation`, `cli`, `api`), or
    /// `expired`. `None` on rows written before it was recorded.
    pub decided_by: Option<String>,
}

fn audit_from_row(row: &dyn DbRow) -> Result<AuditRow, StoreError> {
    let observations: String = row.get(8)?;
    Ok(AuditRow {
        id: row.get(0)?,
        call_id: row.get(1)?,
        phase: row.get(2)?,
        tool_name: row.get(3)?,
        agent_id: row.get(4)?,
        team_id: row.get(5)?,
        decision: row.get(6)?,
        reason: row.get(7)?,
        observations: serde_json::from_str(&observations).unwrap_or_default(),
        args_json: row.get(9)?,
        result_text: row.get(10)?,
        is_error: row.get::<Option<i64>>(11)?.map(|v| v != 0),
        approval_id: row.get(12)?,
        created_at: row.get(13)?,
        decided_by: row.get(14)?,
    })
}

/// A page of audit rows, newest first, optionally of one tool, for
/// `Store::run_read_committed`.
fn audit_read(tool_name: Option<&str>, limit: usize) -> RowsRead<AuditRow> {
    let limit = i64::try_from(limit).unwrap_or(i64::MAX);
    RowsRead {
        query: Query::new(
            "SELECT id, call_id, phase, tool_name, agent_id, team_id, decision, reason,
                    observations, args_json, result_text, is_error, approval_id, created_at,
                    decided_by
             FROM tool_call_audit WHERE (CAST(?1 AS TEXT) IS NULL OR tool_name = ?1)
             ORDER BY created_at DESC, id DESC LIMIT ?2",
            &[&tool_name, &limit],
        ),
        decode: audit_from_row,
    }
}

/// Cut `text` to [`AUDIT_MAX_CHARS`] characters, saying how much was cut.
fn truncate_for_audit(text: &str) -> String {
    match text.char_indices().nth(AUDIT_MAX_CHARS) {
        None => text.to_string(),
        Some((cut, _)) => format!("{}…[truncated {} bytes]", &text[..cut], text.len() - cut),
    }
}

/// One call's facts, gathered as the pipeline runs, written as audit rows.
struct CallRecord<'a> {
    call_id: String,
    tool: &'a str,
    caller: &'a Caller,
    args: Map<String, Value>,
    observations: Vec<String>,
    approval_id: Option<String>,
    /// Who decided: [`DECIDED_BY_POLICY`] until an approval step says otherwise.
    decided_by: String,
}

/// The tool broker over one store.
#[derive(Debug, Clone)]
pub struct Broker {
    store: Arc<Store>,
    config: BrokerConfig,
    executor: Arc<dyn Executor>,
}

impl Broker {
    /// A broker over `store`, running the builtins that act outside it through `executor`.
    pub fn new(store: Arc<Store>, config: BrokerConfig, executor: Arc<dyn Executor>) -> Broker {
        Broker {
            store,
            config,
            executor,
        }
    }

    /// The store it writes.
    pub fn store(&self) -> &Arc<Store> {
        &self.store
    }

    /// Its settings (a waiting caller paces its reads and progress by them).
    pub fn config(&self) -> &BrokerConfig {
        &self.config
    }

    /// Every builtin with its availability and, when unavailable, why.
    pub fn tools(&self) -> Result<Vec<ToolStatus>, StoreError> {
        let disabled = self.disabled_tools()?;
        let config_values = self.settings_snapshot()?;
        let env = self.config.env;
        let config = |key: &str| config_values.get(key).cloned();
        let lookup = registry::Lookup {
            env: &env,
            config: &config,
        };
        Ok(registry::builtins()
            .into_iter()
            .map(|spec| {
                let enabled = !disabled.iter().any(|d| d == spec.name);
                let mut diagnostics = Vec::new();
                if !enabled {
                    diagnostics.push("disabled by an operator".to_string());
                }
                if let Err(missing) = spec.requires.check(&lookup) {
                    diagnostics.extend(missing);
                }
                ToolStatus {
                    name: spec.name.to_string(),
                    description: spec.description.to_string(),
                    risk: spec.risk.as_str().to_string(),
                    enabled,
                    available: diagnostics.is_empty(),
                    diagnostics,
                }
            })
            .collect())
    }

    /// The builtins a caller may see in `tools/list` right now.
    pub fn available_tools(&self) -> Result<Vec<ToolSpec>, StoreError> {
        let statuses = self.tools()?;
        Ok(registry::builtins()
            .into_iter()
            .filter(|spec| statuses.iter().any(|s| s.name == spec.name && s.available))
            .collect())
    }

    fn disabled_tools(&self) -> Result<Vec<String>, StoreError> {
        self.store.read(|tx| {
            tx.query_map(
                "SELECT name FROM tool_registry WHERE enabled = 0",
                &[],
                |r| r.get(0),
            )
        })
    }

    fn settings_snapshot(&self) -> Result<std::collections::HashMap<String, String>, StoreError> {
        let mut values = std::collections::HashMap::new();
        for key in [registry::TAVILY_API_KEY_SETTING] {
            if let Some(value) = self.store.setting(key)? {
                values.insert(key.to_string(), value);
            }
        }
        Ok(values)
    }

    /// The Tavily key: the environment first, then the setting, as availability checks.
    fn tavily_api_key(&self) -> Result<Option<String>, StoreError> {
        let from_env =
            (self.config.env)(registry::TAVILY_API_KEY_ENV).filter(|k| !k.trim().is_empty());
        match from_env {
            Some(key) => Ok(Some(key)),
            None => Ok(self
                .store
                .setting(registry::TAVILY_API_KEY_SETTING)?
                .filter(|k| !k.trim().is_empty())),
        }
    }

    /// Run a call that passed every check: `echo` and `note` here, the rest through the
    /// executor.
    fn run(&self, caller: &Caller, call: exec::Validated) -> Result<Output, StoreError> {
        let invocation = match call {
            exec::Validated::Echo { message } => return Ok(Output::ok(message)),
            exec::Validated::Note { note } => {
                return Ok(exec::record_note(&self.store, caller, &note));
            }
            exec::Validated::WebSearch { query, limit } => Invocation::WebSearch {
                query,
                limit,
                api_key: self.tavily_api_key()?,
            },
            exec::Validated::DeletePath { path } => Invocation::DeletePath { path },
        };
        Ok(self.executor.execute(&invocation, caller))
    }

    /// Run one call through the whole pipeline. A call that needs a human's approval, and
    /// has no remembered grant, comes back [`Round::Pending`] with the approval opened: wait
    /// for it to be decided (or to expire), then [`Broker::resume_call`].
    pub fn call(
        &self,
        caller: &Caller,
        tool: &str,
        args: &Map<String, Value>,
    ) -> Result<Round, StoreError> {
        self.call_with(caller, tool, args, Asking::Open)
    }

    /// The call again, naming approval `approval_id` (which [`Broker::call`] opened for
    /// this caller and tool): every check runs again, then the approval's decision is read.
    /// Still undecided (and not expired): [`Round::Pending`] again. A round after the call
    /// ended (a replayed retry) is refused with `approval:used` and runs nothing.
    pub fn resume_call(
        &self,
        caller: &Caller,
        tool: &str,
        args: &Map<String, Value>,
        approval_id: &str,
    ) -> Result<Round, StoreError> {
        self.call_with(caller, tool, args, Asking::Resume(approval_id))
    }

    fn call_with(
        &self,
        caller: &Caller,
        tool: &str,
        args: &Map<String, Value>,
        asking: Asking<'_>,
    ) -> Result<Round, StoreError> {
        let mut record = CallRecord {
            call_id: new_id(),
            tool,
            caller,
            args: args.clone(),
            observations: Vec::new(),
            approval_id: None,
            decided_by: DECIDED_BY_POLICY.to_string(),
        };
        let outcome = match self.admit(&mut record, asking)? {
            Admission::Opened(opened) => return Ok(Round::Pending(opened)),
            Admission::Refuse(denial) => {
                if !self.audit_before(&record, "deny", Some(&denial.reason))? {
                    return Ok(Round::Done(replayed(&record)));
                }
                CallOutcome::Denied(Denial {
                    approval_id: record.approval_id.clone(),
                    ..denial
                })
            }
            Admission::Run(invocation) => {
                let reason = record
                    .approval_id
                    .as_ref()
                    .map(|_| "approval:allow".to_string());
                if !self.audit_before(&record, "allow", reason.as_deref())? {
                    return Ok(Round::Done(replayed(&record)));
                }
                let output = self.run(caller, invocation)?;
                let text = compact::compact(&output.text);
                self.audit_after(&record, &text, output.is_error)?;
                CallOutcome::Completed {
                    text,
                    is_error: output.is_error,
                    approval_id: record.approval_id,
                }
            }
        };
        Ok(Round::Done(outcome))
    }

    /// Every step before execution.
    fn admit(
        &self,
        record: &mut CallRecord<'_>,
        asking: Asking<'_>,
    ) -> Result<Admission, StoreError> {
        let tool = record.tool;
        // 1. unknown / disabled / unavailable
        let Some(spec) = registry::builtin(tool) else {
            let shown: String = tool.chars().take(64).collect();
            return Ok(Admission::Refuse(Denial::new(
                DenialClass::UnknownTool,
                format!("unknown-tool:{shown}"),
                "no such tool; call tools/list to see the tools available to you",
            )));
        };
        let status = self
            .tools()?
            .into_iter()
            .find(|s| s.name == spec.name)
            .filter(|s| !s.available);
        if let Some(status) = status {
            return Ok(Admission::Refuse(Denial::new(
                DenialClass::Unavailable,
                format!("unavailable:{tool}"),
                format!(
                    "{tool} is not available here ({}); use another tool or ask an operator",
                    status.diagnostics.join("; ")
                ),
            )));
        }
        // 2. argument validation
        if let Err(problem) = exec::validate(tool, &record.args) {
            return Ok(Admission::Refuse(Denial::new(
                DenialClass::InvalidArgs,
                format!("invalid-args:{tool}"),
                format!(
                    "{problem}; fix the arguments to match the tool's input schema and call again"
                ),
            )));
        }
        // 3a. security
        match inspect::security(spec.risk, &record.args) {
            SecurityVerdict::Deny { reason } => {
                return Ok(Admission::Refuse(Denial::new(
                    DenialClass::Security,
                    reason,
                    "the arguments match a blocked pattern; do not retry this call, rephrase the request without it",
                )));
            }
            SecurityVerdict::Pass { observations } => record.observations.extend(observations),
        }
        // 3b. scope
        if self.is_blocked(record.caller, tool)? {
            return Ok(Admission::Refuse(Denial::new(
                DenialClass::Scope,
                format!("scope:blocked-for-caller:{tool}"),
                format!("{tool} is blocked for you by an operator; do not retry it"),
            )));
        }
        // 3c. clamp
        for key in inspect::clamp(&mut record.args) {
            record.observations.push(format!("clamp:{key}"));
        }
        let invocation = match exec::validate(tool, &record.args) {
            Ok(invocation) => invocation,
            Err(problem) => {
                return Ok(Admission::Refuse(Denial::new(
                    DenialClass::InvalidArgs,
                    format!("invalid-args:{tool}"),
                    format!("{problem}; fix the arguments and call again"),
                )));
            }
        };
        // 3d. risk → 4. approval
        if !spec.risk.needs_approval() {
            return Ok(Admission::Run(invocation));
        }
        Ok(match self.approve(&spec, record, asking)? {
            Gate::Pass => Admission::Run(invocation),
            Gate::Refuse(denial) => Admission::Refuse(denial),
            Gate::Opened(opened) => Admission::Opened(opened),
        })
    }

    fn is_blocked(&self, caller: &Caller, tool: &str) -> Result<bool, StoreError> {
        self.store.read(|tx| {
            let found = tx.query_opt(
                "SELECT 1 FROM tool_blocklist WHERE tool_name = ?1 AND (
                    (subject_kind = 'agent' AND subject_id = ?2) OR
                    (subject_kind = 'team' AND subject_id = ?3))",
                &[&tool, &caller.agent_id, &caller.team_id],
                |_| Ok(()),
            )?;
            Ok(found.is_some())
        })
    }

    /// Ask for (or find a remembered) approval, as `asking` says.
    fn approve(
        &self,
        spec: &ToolSpec,
        record: &mut CallRecord<'_>,
        asking: Asking<'_>,
    ) -> Result<Gate, StoreError> {
        let (approval_id, expires_at) = match asking {
            Asking::Resume(id) => {
                let Some(row) = self.approval_of(id, spec, record.caller)? else {
                    return Ok(Gate::Refuse(Denial::new(
                        DenialClass::Approval,
                        "approval:unknown".to_string(),
                        format!(
                            "approval {id} is not one this caller opened for {}; call the tool again without requestState to be asked anew",
                            spec.name
                        ),
                    )));
                };
                // A round after the call ended (a replayed retry) must not run it again.
                if self.call_audited(&row.call_id)? {
                    return Ok(Gate::Refuse(used(id, spec.name)));
                }
                // The rounds are one call: its audit rows share the approval's call id.
                record.call_id = row.call_id;
                (row.id, row.expires_at)
            }
            Asking::Open => {
                return Ok(match self.open_approval(spec, record)? {
                    None => Gate::Pass,
                    Some(opened) => Gate::Opened(opened),
                });
            }
        };
        record.approval_id = Some(approval_id.clone());
        let end = approvals::standing(&self.store, &approval_id, expires_at)?;
        record.decided_by = match end {
            Standing::Pending => {
                return Ok(Gate::Opened(OpenedApproval {
                    approval_id,
                    expires_at,
                }));
            }
            Standing::Expired => DECIDED_BY_EXPIRY.to_string(),
            Standing::Allowed(_) | Standing::Denied => self
                .store
                .approval(&approval_id)?
                .decided_by
                .unwrap_or_else(|| DECIDED_BY_EXPIRY.to_string()),
        };
        Ok(match end {
            Standing::Allowed(decision) => {
                record
                    .observations
                    .push(format!("approval:{}", decision.as_str()));
                Gate::Pass
            }
            Standing::Denied => Gate::Refuse(Denial::new(
                DenialClass::Approval,
                "approval:deny".to_string(),
                format!(
                    "a human denied this {} call (approval {approval_id}); do not retry it unchanged",
                    spec.name
                ),
            )),
            Standing::Expired | Standing::Pending => Gate::Refuse(Denial::new(
                DenialClass::Approval,
                "approval:expired".to_string(),
                format!(
                    "nobody approved this {} call in time (approval {approval_id}); ask the operator to watch for it, then retry",
                    spec.name
                ),
            )),
        })
    }

    /// Write a pending approval for this call, expiring after the configured wait; `None`
    /// when a remembered `allow_always` lets the caller through without one.
    fn open_approval(
        &self,
        spec: &ToolSpec,
        record: &mut CallRecord<'_>,
    ) -> Result<Option<OpenedApproval>, StoreError> {
        let approval_id = new_id();
        let now = self.store.now_ms();
        let wait_ms = i64::try_from(self.config.approval_wait.as_millis()).unwrap_or(i64::MAX);
        let expires_at = now.saturating_add(wait_ms);
        let message = match spec.risk {
            Risk::Destructive => format!("\"{}\" is destructive and needs approval.", spec.name),
            _ => format!(
                "\"{}\" has external side effects and needs approval.",
                spec.name
            ),
        };
        let args_json =
            truncate_for_audit(&scrub_json(&Value::Object(record.args.clone())).to_string());
        let caller = record.caller;
        let remembered = self.store.write(|tx| {
            if approvals::has_grant(tx, spec.name, caller)? {
                return Ok::<_, StoreError>(true);
            }
            approvals::insert_pending(
                tx,
                now,
                &NewApproval {
                    id: &approval_id,
                    call_id: &record.call_id,
                    tool_name: spec.name,
                    caller,
                    risk: spec.risk.as_str(),
                    message: &message,
                    args_json: &args_json,
                    expires_at,
                },
            )?;
            Ok(false)
        })?;
        if remembered {
            record.observations.push("approval:remembered".to_string());
            record.decided_by = DECIDED_BY_GRANT.to_string();
            return Ok(None);
        }
        Ok(Some(OpenedApproval {
            approval_id,
            expires_at,
        }))
    }

    /// Whether call `call_id` has its decision audited (it ended). Rounds that race past
    /// this check meet again at the decision row ([`Broker::audit_before`]).
    fn call_audited(&self, call_id: &str) -> Result<bool, StoreError> {
        self.store.read(|tx| {
            let found = tx.query_opt(
                "SELECT 1 FROM tool_call_audit WHERE call_id = ?1 AND phase = 'before'",
                &[&call_id],
                |_| Ok(()),
            )?;
            Ok(found.is_some())
        })
    }

    /// Approval `id`, when it was opened for `spec` and exactly this caller's binding.
    fn approval_of(
        &self,
        id: &str,
        spec: &ToolSpec,
        caller: &Caller,
    ) -> Result<Option<Approval>, StoreError> {
        let row = match self.store.approval(id) {
            Ok(row) => row,
            Err(StoreError::NotFound(_)) => return Ok(None),
            Err(error) => return Err(error),
        };
        let same = row.tool_name == spec.name
            && row.agent_id == caller.agent_id
            && row.team_id == caller.team_id
            && row.tenant_id == caller.tenant_id;
        Ok(same.then_some(row))
    }

    /// Write the call's decision row; `false` when another round of the same call wrote it
    /// first (replays of one `requestState` racing each other): that round ended the call,
    /// so this one must not run it (the unique index on `(call_id, phase)` decides).
    fn audit_before(
        &self,
        record: &CallRecord<'_>,
        decision: &str,
        reason: Option<&str>,
    ) -> Result<bool, StoreError> {
        let args = truncate_for_audit(&scrub_json(&Value::Object(record.args.clone())).to_string());
        self.insert_audit(record, "before", decision, reason, Some(&args), None, None)
    }

    fn audit_after(
        &self,
        record: &CallRecord<'_>,
        text: &str,
        is_error: bool,
    ) -> Result<(), StoreError> {
        let result = truncate_for_audit(&scrub_text(text));
        self.insert_audit(
            record,
            "after",
            "executed",
            None,
            None,
            Some(&result),
            Some(is_error),
        )
        .map(drop)
    }

    /// One audit row; `false` when the call already has its row of `phase`.
    #[allow(clippy::too_many_arguments)]
    fn insert_audit(
        &self,
        record: &CallRecord<'_>,
        phase: &str,
        decision: &str,
        reason: Option<&str>,
        args_json: Option<&str>,
        result_text: Option<&str>,
        is_error: Option<bool>,
    ) -> Result<bool, StoreError> {
        let now = self.store.now_ms();
        let tool: String = scrub_text(&record.tool.chars().take(200).collect::<String>());
        let reason = reason.map(scrub_text);
        let observations =
            serde_json::to_string(&record.observations).unwrap_or_else(|_| "[]".into());
        self.store.write(|tx| {
            let id = new_id();
            let inserted = tx.execute(
                "INSERT INTO tool_call_audit(id, call_id, phase, tool_name, agent_id, team_id, decision,
                     reason, observations, args_json, result_text, is_error, approval_id, created_at,
                     decided_by)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15)
                 ON CONFLICT (call_id, phase) DO NOTHING",
                &[
                    &id,
                    &record.call_id,
                    &phase,
                    &tool,
                    &record.caller.agent_id,
                    &record.caller.team_id,
                    &decision,
                    &reason,
                    &observations,
                    &args_json,
                    &result_text,
                    &is_error,
                    &record.approval_id,
                    &now,
                    &record.decided_by,
                ],
            )?;
            // The row is about the task its caller holds (SPEC §19).
            if inserted == 1
                && let Some(agent) = record.caller.agent_id.as_deref()
            {
                let line = format!("{tool} {phase}: {decision}");
                let team = record.caller.team_id.as_deref();
                use clawboo_store::links::{LinkKind, link_held_in};
                link_held_in(tx, now, agent, team, LinkKind::Audit, &id, &line)?;
            }
            Ok(inserted == 1)
        })
    }
}

/// The operator's side of the broker on a store: deciding approvals, remembered grants,
/// the audit trail and tool switches, for the CLI, REST and the board. A trait because the
/// store knows nothing of the broker: import it to call these on a [`Store`].
pub trait BrokerStore {
    /// Record a human's decision on a pending approval and wake its waiting call.
    /// `allow_always` is remembered for the tool and the call's bound identity (agent, team
    /// and tenant; never for a call bound to no agent, which it allows once).
    fn resolve_approval(
        &self,
        id: &str,
        decision: Decision,
        decided_by: &str,
    ) -> Result<Approval, ApprovalError>;

    /// Approvals, newest first (only `pending` ones when `pending_only`). Pending rows whose
    /// time ran out (their caller is gone) are marked `expired` first.
    fn list_approvals(&self, pending_only: bool, limit: usize)
    -> Result<Vec<Approval>, StoreError>;

    /// The caller of pending approval `id` went away: expire it, so the board stops
    /// offering it and the call's next round ends as `approval:expired`. `false` when it
    /// was already settled.
    fn abandon_approval(&self, id: &str) -> Result<bool, StoreError>;

    /// One approval by id.
    fn approval(&self, id: &str) -> Result<Approval, StoreError>;

    /// [`BrokerStore::resolve_approval`] for an async caller, run the way the engine runs
    /// writes best (`Store::run_transaction`).
    fn resolve_approval_async(
        self: &Arc<Self>,
        id: &str,
        decision: Decision,
        decided_by: &str,
    ) -> impl Future<Output = Result<Result<Approval, ApprovalError>, RunError>> + Send;

    /// [`BrokerStore::abandon_approval`] for an async caller.
    fn abandon_approval_async(
        self: &Arc<Self>,
        id: &str,
    ) -> impl Future<Output = Result<Result<bool, StoreError>, RunError>> + Send;

    /// [`BrokerStore::approval`] for an async caller, run the way the engine runs reads
    /// best (`Store::run_read_committed`): each round of an approval wait reads it so.
    fn approval_async(
        self: &Arc<Self>,
        id: &str,
    ) -> impl Future<Output = Result<Result<Approval, StoreError>, RunError>> + Send;

    /// Forget a remembered `allow_always` for `tool` and exactly `caller`'s identity; `true`
    /// if one existed.
    fn revoke_approval_grant(&self, tool: &str, caller: &Caller) -> Result<bool, StoreError>;

    /// Audit rows, newest first, optionally of one tool.
    fn tool_audit(
        &self,
        tool_name: Option<&str>,
        limit: usize,
    ) -> Result<Vec<AuditRow>, StoreError>;

    /// [`BrokerStore::tool_audit`] for an async caller, run the way the engine runs reads
    /// best (`Store::run_read_committed`).
    fn tool_audit_async(
        self: &Arc<Self>,
        tool_name: Option<&str>,
        limit: usize,
    ) -> impl Future<Output = Result<Result<Vec<AuditRow>, StoreError>, RunError>> + Send;

    /// [`BrokerStore::list_approvals`] for an async caller, run the way the engine runs
    /// writes best (`Store::run_transaction`: the expiry of stale rows is a write).
    fn list_approvals_async(
        self: &Arc<Self>,
        pending_only: bool,
        limit: usize,
    ) -> impl Future<Output = Result<Result<Vec<Approval>, StoreError>, RunError>> + Send;

    /// Switch a builtin on or off for every caller.
    fn set_tool_enabled(&self, tool: &str, enabled: bool) -> Result<(), StoreError>;

    /// Put `tool` on `subject`'s blocklist (idempotent).
    fn block_tool(&self, subject: &Subject, tool: &str) -> Result<(), StoreError>;

    /// Take `tool` off `subject`'s blocklist; `true` if it was there.
    fn unblock_tool(&self, subject: &Subject, tool: &str) -> Result<bool, StoreError>;
}

impl BrokerStore for Store {
    fn resolve_approval(
        &self,
        id: &str,
        decision: Decision,
        decided_by: &str,
    ) -> Result<Approval, ApprovalError> {
        approvals::resolve(self, id, decision, decided_by)
    }

    fn list_approvals(
        &self,
        pending_only: bool,
        limit: usize,
    ) -> Result<Vec<Approval>, StoreError> {
        approvals::list(self, pending_only, limit)
    }

    fn abandon_approval(&self, id: &str) -> Result<bool, StoreError> {
        approvals::abandon(self, id)
    }

    fn approval(&self, id: &str) -> Result<Approval, StoreError> {
        approvals::get(self, id)
    }

    fn resolve_approval_async(
        self: &Arc<Self>,
        id: &str,
        decision: Decision,
        decided_by: &str,
    ) -> impl Future<Output = Result<Result<Approval, ApprovalError>, RunError>> + Send {
        approvals::resolve_async(self, id, decision, decided_by)
    }

    fn abandon_approval_async(
        self: &Arc<Self>,
        id: &str,
    ) -> impl Future<Output = Result<Result<bool, StoreError>, RunError>> + Send {
        approvals::abandon_async(self, id)
    }

    fn approval_async(
        self: &Arc<Self>,
        id: &str,
    ) -> impl Future<Output = Result<Result<Approval, StoreError>, RunError>> + Send {
        approvals::get_async(self, id)
    }

    fn revoke_approval_grant(&self, tool: &str, caller: &Caller) -> Result<bool, StoreError> {
        approvals::revoke_grant(self, tool, caller)
    }

    fn tool_audit(
        &self,
        tool_name: Option<&str>,
        limit: usize,
    ) -> Result<Vec<AuditRow>, StoreError> {
        let read = audit_read(tool_name, limit);
        self.read(|tx| read.run(tx))
    }

    fn tool_audit_async(
        self: &Arc<Self>,
        tool_name: Option<&str>,
        limit: usize,
    ) -> impl Future<Output = Result<Result<Vec<AuditRow>, StoreError>, RunError>> + Send {
        self.run_read_committed(audit_read(tool_name, limit))
    }

    fn list_approvals_async(
        self: &Arc<Self>,
        pending_only: bool,
        limit: usize,
    ) -> impl Future<Output = Result<Result<Vec<Approval>, StoreError>, RunError>> + Send {
        approvals::list_async(self, pending_only, limit)
    }

    fn set_tool_enabled(&self, tool: &str, enabled: bool) -> Result<(), StoreError> {
        if registry::builtin(tool).is_none() {
            return Err(StoreError::NotFound(format!("tool {tool}")));
        }
        let now = self.now_ms();
        self.write(|tx| {
            tx.execute(
                "INSERT INTO tool_registry(name, enabled, updated_at) VALUES (?1, ?2, ?3)
                 ON CONFLICT(name) DO UPDATE SET enabled = excluded.enabled,
                                                 updated_at = excluded.updated_at",
                &[&tool, &enabled, &now],
            )?;
            Ok(())
        })
    }

    fn block_tool(&self, subject: &Subject, tool: &str) -> Result<(), StoreError> {
        let now = self.now_ms();
        self.write(|tx| {
            tx.execute(
                "INSERT INTO tool_blocklist(subject_kind, subject_id, tool_name, created_at)
                 VALUES (?1, ?2, ?3, ?4) ON CONFLICT DO NOTHING",
                &[&subject.kind(), &subject.id(), &tool, &now],
            )?;
            Ok(())
        })
    }

    fn unblock_tool(&self, subject: &Subject, tool: &str) -> Result<bool, StoreError> {
        self.write(|tx| {
            Ok(tx.execute(
                "DELETE FROM tool_blocklist WHERE subject_kind = ?1 AND subject_id = ?2 AND tool_name = ?3",
                &[&subject.kind(), &subject.id(), &tool],
            )? == 1)
        })
    }
}

#[cfg(test)]
mod tests;
