//! The Tools server (`clawboo-tools`): the tool broker over MCP.
//!
//! The tool list is dynamic (only available builtins are listed) and every call runs the
//! broker's pipeline in `clawboo_store::broker`. This module maps the outcome to the wire:
//! a denial is a tool-error `denied: <reason> — <what to do>` with `_meta.denied` (the
//! reason) and `_meta.error` (its class); while a call waits for a human, progress
//! notifications flow when the client sent a progress token, and a client that declared
//! form elicitation is asked too (`elicit`): on a session while the call waits, on
//! 2026-07-28 through the call's rounds (the first opens the approval and returns the form,
//! the retry settles the answer and waits for the decision).

use std::sync::{Arc, Mutex, OnceLock};

use clawboo_store::broker::{
    Broker, BrokerConfig, CallOutcome, Caller, Denial, DenialClass, Executor, FirstRound,
    MAX_MESSAGE_CHARS, MAX_NOTE_CHARS, MAX_PATH_CHARS, MAX_QUERY_CHARS, Risk, ToolSpec,
    WaitControl, WaitProgress,
};
use clawboo_store::{Store, StoreError};
use rmcp::RoleServer;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, JsonObject,
    ProgressNotificationParam, Tool,
};
use rmcp::service::RequestContext;
use serde_json::{Value, json};

use crate::binding::Binding;
use crate::elicit;
use crate::protocol::{Effect, denied, described, internal_error, tool_error};
use crate::server::ToolSet;
use crate::signing::ScopeSigner;

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
    /// Seals and opens the `requestState` of 2026-07-28 approval rounds; loaded on first use.
    signer: OnceLock<ScopeSigner>,
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
            signer: OnceLock::new(),
        }
    }

    /// The install's signer (a store read, and a write the first time on a new install).
    async fn signer(&self) -> Result<ScopeSigner, CallToolResult> {
        if let Some(signer) = self.signer.get() {
            return Ok(signer.clone());
        }
        let store = self.broker.store().clone();
        let signer =
            match tokio::task::spawn_blocking(move || ScopeSigner::from_store(&store)).await {
                Ok(Ok(signer)) => signer,
                Ok(Err(error)) => return Err(internal_error(error)),
                Err(error) => return Err(internal_error(error)),
            };
        Ok(self.signer.get_or_init(|| signer).clone())
    }

    /// Run `work` (the broker's blocking call) off the executor: while it waits for a
    /// human, report progress when the client sent a token, ask a session's client in a form
    /// when it declared one, and abandon the wait when the client goes away. Then tell the
    /// client when the tool list changed, and map the outcome to the wire.
    async fn run_waiting<W>(
        &self,
        name: &str,
        args: &JsonObject,
        ctx: &RequestContext<RoleServer>,
        work: W,
    ) -> CallToolResult
    where
        W: FnOnce(
                &Broker,
                &Caller,
                &mut dyn FnMut(&WaitProgress) -> WaitControl,
            ) -> Result<CallOutcome, StoreError>
            + Send
            + 'static,
    {
        let progress_token = ctx.meta.get_progress_token();
        let cancelled = ctx.ct.clone();
        let broker = self.broker.clone();
        let caller = self.caller.clone();
        let (progress_tx, mut progress_rx) = tokio::sync::mpsc::unbounded_channel();
        let run = tokio::task::spawn_blocking(move || {
            let outcome = work(&broker, &caller, &mut |progress| {
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
                asking = elicit::ask(ctx, self.broker.store(), &progress.approval_id, name);
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
        self.finish(outcome, available, args, ctx).await
    }

    /// The wire answer of a finished call; tells the client when availability changed and
    /// records the call of an agent that was served.
    async fn finish(
        &self,
        outcome: Result<CallOutcome, StoreError>,
        available: Result<Vec<String>, StoreError>,
        args: &JsonObject,
        ctx: &RequestContext<RoleServer>,
    ) -> CallToolResult {
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
            let agent = crate::handlers::calling_agent(self.caller.agent_id.as_deref(), args);
            let team = self.caller.team_id.as_deref();
            crate::handlers::record_call(self.broker.store(), agent, team).await;
        }
        result
    }

    /// A 2026-07-28 call from a client that answers approvals in a form, without
    /// `requestState`: the pipeline runs up to the approval, which is opened and returned
    /// with the form rather than waited for.
    async fn first_round(
        &self,
        name: String,
        args: JsonObject,
        ctx: RequestContext<RoleServer>,
    ) -> CallToolResponse {
        let signer = match self.signer().await {
            Ok(signer) => signer,
            Err(refusal) => return refusal.into(),
        };
        let broker = self.broker.clone();
        let caller = self.caller.clone();
        let (tool, call_args) = (name.clone(), args.clone());
        let opened = tokio::task::spawn_blocking(move || {
            let round = broker.open_call(&caller, &tool, &call_args);
            let available = broker.available_tools().map(|specs| names(&specs));
            (round, available)
        })
        .await;
        let (round, available) = match opened {
            Ok(done) => done,
            Err(error) => return internal_error(error).into(),
        };
        match round {
            Ok(FirstRound::Asking(opened)) => {
                match elicit::first_round(&signer, &opened, &name, &self.caller, &args) {
                    Some(asked) => asked,
                    // No form to send: wait for the other surfaces as a plain client would.
                    None => self
                        .resume(name, args, opened.approval_id, ctx)
                        .await
                        .into(),
                }
            }
            Ok(FirstRound::Done(outcome)) => self
                .finish(Ok(outcome), available, &args, &ctx)
                .await
                .into(),
            Err(error) => self.finish(Err(error), available, &args, &ctx).await.into(),
        }
    }

    /// The call's retry naming approval `approval_id`: wait for its decision (the form's
    /// answer, already settled, or another surface's) and run or deny the call.
    async fn resume(
        &self,
        name: String,
        args: JsonObject,
        approval_id: String,
        ctx: RequestContext<RoleServer>,
    ) -> CallToolResult {
        let (tool, call_args) = (name.clone(), args.clone());
        self.run_waiting(&name, &args, &ctx, move |broker, caller, observer| {
            broker.resume_call(caller, &tool, &call_args, &approval_id, observer)
        })
        .await
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
        let tool = name.to_string();
        let call_args = args.clone();
        self.run_waiting(name, &args, &ctx, move |broker, caller, observer| {
            broker.call(caller, &tool, &call_args, observer)
        })
        .await
    }

    async fn respond(
        &self,
        request: CallToolRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> CallToolResponse {
        let name = request.name.into_owned();
        let args = request.arguments.unwrap_or_default();
        if let Some(refusal) = crate::protocol::nul_refusal(&args) {
            return refusal.into();
        }
        if !(elicit::in_rounds(&ctx) && elicit::declares_form(&ctx)) {
            return self.call(&name, args, ctx).await.into();
        }
        let Some(state) = request.request_state else {
            return self.first_round(name, args, ctx).await;
        };
        let signer = match self.signer().await {
            Ok(signer) => signer,
            Err(refusal) => return refusal.into(),
        };
        let Some(approval_id) =
            elicit::resumed_approval(&signer, &state, &name, &self.caller, &args)
        else {
            return to_result(CallOutcome::Denied(Denial {
                class: DenialClass::Approval,
                reason: "approval:unknown".into(),
                hint: format!(
                    "this requestState was not issued for this {name} call (other arguments, another caller, or another install); call the tool again without requestState to be asked anew"
                ),
                approval_id: None,
            }))
            .into();
        };
        if let Some(answer) = elicit::answer_in(request.input_responses.as_ref()) {
            elicit::settle(self.broker.store(), &approval_id, &answer).await;
        }
        self.resume(name, args, approval_id, ctx).await.into()
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
