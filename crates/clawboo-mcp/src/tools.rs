//! The Tools server (`clawboo-tools`): the tool broker over MCP.
//!
//! The tool list is dynamic (only available builtins are listed) and every call runs the
//! broker's pipeline in `clawboo_store::broker`. This module maps the outcome to the wire:
//! a denial is a tool-error `denied: <reason> — <what to do>` with `_meta.denied` (the
//! reason) and `_meta.error` (its class); while a call waits for a human, progress
//! notifications flow when the client sent a progress token, and a client that declared
//! form elicitation is asked too (`elicit`).

use std::sync::{Arc, Mutex};

use clawboo_store::Store;
use clawboo_store::broker::{
    Broker, BrokerConfig, CallOutcome, Caller, Executor, MAX_MESSAGE_CHARS, MAX_NOTE_CHARS,
    MAX_PATH_CHARS, MAX_QUERY_CHARS, Risk, ToolSpec, WaitControl, WaitProgress,
};
use rmcp::RoleServer;
use rmcp::model::{CallToolResult, ContentBlock, JsonObject, ProgressNotificationParam, Tool};
use rmcp::service::RequestContext;
use serde_json::{Value, json};

use crate::binding::Binding;
use crate::elicit;
use crate::protocol::{Effect, denied, described, internal_error, tool_error};
use crate::server::ToolSet;

/// Settings of a Tools server.
#[derive(Debug, Clone)]
pub struct ToolsConfig {
    /// The caller: audit rows, blocklists and remembered approvals use its agent and team.
    pub binding: Binding,
    /// The broker's settings (approval wait, polling, environment).
    pub broker: BrokerConfig,
    /// Runs the builtins that act outside the store (web search, the filesystem).
    pub executor: Arc<dyn Executor>,
}

/// The Tools tool set over one store.
pub struct ToolsServer {
    broker: Broker,
    caller: Caller,
    /// The names this session last listed; a call that finds availability changed (an
    /// operator switched a tool, a key was configured) tells the client to list again.
    listed: Mutex<Option<Vec<String>>>,
}

impl ToolsServer {
    /// A Tools server over `store`.
    pub fn new(store: Arc<Store>, config: ToolsConfig) -> ToolsServer {
        ToolsServer {
            broker: Broker::new(store, config.broker, config.executor),
            caller: Caller {
                agent_id: config.binding.agent_id,
                team_id: config.binding.team_id,
                tenant_id: config.binding.tenant_id,
            },
            listed: Mutex::new(None),
        }
    }

    /// Remember `names` as available; `true` when they differ from an earlier list.
    fn remember_listed(&self, names: Vec<String>) -> bool {
        let mut listed = self.listed.lock().unwrap_or_else(|p| p.into_inner());
        let changed = listed.as_ref().is_some_and(|before| *before != names);
        *listed = Some(names);
        changed
    }
}

fn names(specs: &[ToolSpec]) -> Vec<String> {
    specs.iter().map(|s| s.name.to_string()).collect()
}

/// The input schema of a builtin, as the seeds give it (no property descriptions: every
/// name says what it holds, and the model reads every schema on every turn).
fn input_schema(name: &str) -> JsonObject {
    let schema = match name {
        "echo" => json!({
            "type": "object",
            "properties": {"message": {"type": "string", "maxLength": MAX_MESSAGE_CHARS}},
            "required": ["message"]
        }),
        "note" => json!({
            "type": "object",
            "properties": {"note": {"type": "string", "minLength": 1, "maxLength": MAX_NOTE_CHARS}},
            "required": ["note"]
        }),
        "web_search" => json!({
            "type": "object",
            "properties": {
                "query": {"type": "string", "minLength": 1, "maxLength": MAX_QUERY_CHARS},
                "limit": {"type": "integer", "minimum": 1, "description": "At most 20 are fetched."}
            },
            "required": ["query"]
        }),
        "delete_path" => json!({
            "type": "object",
            "properties": {"path": {"type": "string", "minLength": 1, "maxLength": MAX_PATH_CHARS}},
            "required": ["path"]
        }),
        _ => json!({"type": "object", "properties": {}, "required": []}),
    };
    match schema {
        Value::Object(map) => map,
        _ => JsonObject::new(),
    }
}

/// A builtin's display title and effect (its annotations).
fn title_and_effect(spec: &ToolSpec) -> (&'static str, Effect) {
    match (spec.name, spec.risk) {
        ("echo", _) => ("Echo", Effect::Read),
        ("note", _) => ("Record note", Effect::Write),
        ("web_search", _) => ("Web search", Effect::External),
        ("delete_path", _) => ("Delete path", Effect::Destructive),
        (_, Risk::Destructive) => (spec.name, Effect::Destructive),
        (_, Risk::External) => (spec.name, Effect::External),
        (_, _) => (spec.name, Effect::Write),
    }
}

fn to_tool(spec: &ToolSpec) -> Tool {
    let (title, effect) = title_and_effect(spec);
    described(
        Tool::new(
            spec.name,
            spec.description,
            Arc::new(input_schema(spec.name)),
        ),
        title,
        effect,
    )
}

fn with_meta(mut result: CallToolResult, key: &str, value: Value) -> CallToolResult {
    let meta = result.meta.get_or_insert_with(Default::default);
    meta.0.insert(key.to_string(), value);
    result
}

/// The wire form of a broker outcome.
fn to_result(outcome: CallOutcome) -> CallToolResult {
    match outcome {
        CallOutcome::Completed {
            text,
            is_error,
            approval_id,
        } => {
            let result = if is_error {
                tool_error("tool_failed", text)
            } else {
                CallToolResult::success(vec![ContentBlock::text(text)])
            };
            match approval_id {
                Some(id) => with_meta(result, "approvalId", json!(id)),
                None => result,
            }
        }
        CallOutcome::Denied(denial) => {
            let result = denied(denial.class.code(), &denial.reason, denial.message());
            match denial.approval_id {
                Some(id) => with_meta(result, "approvalId", json!(id)),
                None => result,
            }
        }
    }
}

fn progress_message(tool: &str, progress: &WaitProgress) -> String {
    let id = &progress.approval_id;
    format!(
        "waiting for a human to approve {tool} (approval {id}): `clawboo approvals allow {id}`, `always {id}` or `deny {id}`"
    )
}

impl ToolSet for ToolsServer {
    fn server_name(&self) -> &'static str {
        "clawboo-tools"
    }

    fn tools(&self) -> Vec<Tool> {
        // A two-table read; short enough to run inline, where the trait wants a list.
        match self.broker.available_tools() {
            Ok(specs) => {
                self.remember_listed(names(&specs));
                specs.iter().map(to_tool).collect()
            }
            Err(error) => {
                tracing::error!(%error, "cannot read tool availability; listing no tools");
                Vec::new()
            }
        }
    }

    fn tool_list_changes(&self) -> bool {
        true
    }

    async fn call<'a>(
        &'a self,
        name: &'a str,
        args: JsonObject,
        ctx: RequestContext<RoleServer>,
    ) -> CallToolResult {
        let agent = crate::handlers::calling_agent(self.caller.agent_id.as_deref(), &args);
        let progress_token = ctx.meta.get_progress_token();
        let cancelled = ctx.ct.clone();
        let broker = self.broker.clone();
        let caller = self.caller.clone();
        let tool = name.to_string();
        let (progress_tx, mut progress_rx) = tokio::sync::mpsc::unbounded_channel();
        let run = tokio::task::spawn_blocking(move || {
            let outcome = broker.call(&caller, &tool, &args, &mut |progress| {
                if progress.report {
                    // The receiver lives until this call ends; a send cannot outlive it.
                    let _sent = progress_tx.send(progress.clone());
                }
                if cancelled.is_cancelled() {
                    WaitControl::Abandon
                } else {
                    WaitControl::Continue
                }
            });
            let available = broker.available_tools().map(|specs| names(&specs));
            (outcome, available)
        });
        // The sender is dropped when the blocking call returns, which ends this loop.
        let mut asking = None;
        while let Some(progress) = progress_rx.recv().await {
            tracing::debug!(tool = name, approval = %progress.approval_id, "waiting for approval");
            if asking.is_none() {
                asking = elicit::ask(&ctx.peer, self.broker.store(), &progress.approval_id, name);
            }
            if let Some(token) = &progress_token {
                let param =
                    ProgressNotificationParam::new(token.clone(), progress.waited_ms as f64)
                        .with_total(progress.total_ms as f64)
                        .with_message(progress_message(name, &progress));
                if let Err(error) = ctx.peer.notify_progress(param).await {
                    tracing::debug!(%error, "progress notification not delivered");
                }
            }
        }
        // Decided (or expired) elsewhere: the form's answer no longer matters.
        if let Some(form) = asking {
            form.abort();
        }
        let (outcome, available) = match run.await {
            Ok(done) => done,
            Err(error) => return internal_error(error),
        };
        if let Ok(available) = available
            && self.remember_listed(available)
            && let Err(error) = ctx.peer.notify_tool_list_changed().await
        {
            tracing::debug!(%error, "tool list change not delivered");
        }
        let result = match outcome {
            Ok(outcome) => to_result(outcome),
            Err(error) => internal_error(error),
        };
        if result.is_error != Some(true) {
            let team = self.caller.team_id.as_deref();
            crate::handlers::record_call(self.broker.store(), agent, team).await;
        }
        result
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::result_text;
    use clawboo_store::broker::{Denial, DenialClass};

    #[test]
    fn denials_carry_reason_and_class_in_meta() {
        let result = to_result(CallOutcome::Denied(Denial {
            class: DenialClass::Approval,
            reason: "approval:deny".into(),
            hint: "a human denied it".into(),
            approval_id: Some("ap-1".into()),
        }));
        assert_eq!(result.is_error, Some(true));
        assert_eq!(
            result_text(&result),
            Some("denied: approval:deny — a human denied it")
        );
        let meta = &result.meta.as_ref().unwrap().0;
        assert_eq!(meta["denied"], "approval:deny");
        assert_eq!(meta["error"], "approval");
        assert_eq!(meta["approvalId"], "ap-1");
    }

    #[test]
    fn tool_failures_are_errors_without_a_denial() {
        let result = to_result(CallOutcome::Completed {
            text: "web_search failed".into(),
            is_error: true,
            approval_id: None,
        });
        assert_eq!(result.is_error, Some(true));
        let meta = &result.meta.as_ref().unwrap().0;
        assert_eq!(meta["error"], "tool_failed");
        assert!(meta.get("denied").is_none());
    }

    #[test]
    fn schemas_match_the_seed_descriptors() {
        let required = |name: &str| input_schema(name)["required"].clone();
        assert_eq!(required("echo"), json!(["message"]));
        assert_eq!(required("note"), json!(["note"]));
        assert_eq!(required("web_search"), json!(["query"]));
        assert_eq!(required("delete_path"), json!(["path"]));
        assert_eq!(input_schema("note")["properties"]["note"]["minLength"], 1);
        assert_eq!(
            input_schema("note")["properties"]["note"]["maxLength"],
            10_000
        );
        assert_eq!(
            input_schema("delete_path")["properties"]["path"]["minLength"],
            1
        );
    }
}
