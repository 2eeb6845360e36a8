//! The Tools server (`clawboo-tools`): the tool broker over MCP.
//!
//! The tool list is dynamic (only available builtins are listed) and every call runs the
//! broker's pipeline in `clawboo_broker`. This module maps the outcome to the wire:
//! a denial is a tool-error `denied: <reason> — <what to do>` with `_meta.denied` (the
//! reason) and `_meta.error` (its class); while a call waits for a human, progress
//! notifications flow when the client sent a progress token, and a client that declared
//! form elicitation is asked too (`elicit`): on a session while the call waits, on
//! 2026-07-28 through the call's rounds (the first opens the approval and returns the form,
//! the retry settles the answer and waits for the decision).

use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use clawboo_broker::{
    ApprovalStatus, Broker, BrokerConfig, BrokerStore, CallOutcome, Caller, Denial, DenialClass,
    Executor, MAX_MESSAGE_CHARS, MAX_NOTE_CHARS, MAX_PATH_CHARS, MAX_QUERY_CHARS, OpenedApproval,
    Risk, Round, ToolSpec,
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
use crate::metrics::ProtocolFamily;
use crate::protocol::{Effect, denied, described, internal_error, tool_error};
use crate::server::ToolSet;
use crate::signing::ScopeSigner;
use crate::waits::{WaitLimit, WaitOwner, WaitPermit};

/// Settings of a Tools server.
#[derive(Debug, Clone)]
pub struct ToolsConfig {
    /// The caller: audit rows, blocklists and remembered approvals use its agent and team.
    pub binding: Binding,
    /// The broker's settings (approval wait, polling, environment).
    pub broker: BrokerConfig,
    /// Runs the builtins that act outside the store (web search, the filesystem).
    pub executor: Arc<dyn Executor>,
    /// The process's count of waits by caller: a call waiting for approval holds one.
    pub waits: WaitLimit,
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
    binding: Binding,
    waits: WaitLimit,
}

impl ToolsServer {
    /// A Tools server over `store`.
    pub fn new(store: Arc<Store>, config: ToolsConfig) -> ToolsServer {
        ToolsServer {
            broker: Broker::new(store, config.broker, config.executor),
            caller: Caller {
                agent_id: config.binding.agent_id.clone(),
                team_id: config.binding.team_id.clone(),
                tenant_id: config.binding.tenant_id.clone(),
            },
            listed: Mutex::new(None),
            signer: OnceLock::new(),
            binding: config.binding,
            waits: config.waits,
        }
    }

    /// The install's signer (a store read, and a write the first time on a new install).
    async fn signer(&self) -> Result<ScopeSigner, CallToolResult> {
        if let Some(signer) = self.signer.get() {
            return Ok(signer.clone());
        }
        let signer = match self
            .broker
            .store()
            .run_off_thread(ScopeSigner::from_store)
            .await
        {
            Ok(Ok(signer)) => signer,
            Ok(Err(error)) => return Err(internal_error(error)),
            Err(error) => return Err(internal_error(error)),
        };
        Ok(self.signer.get_or_init(|| signer).clone())
    }

    /// One round of the call (`resume`: the one naming that approval) on the blocking
    /// pool: the pipeline's checks, reads and writes, and the executor. It never waits for
    /// a human. Also reads which tools are available now.
    async fn round(
        &self,
        name: &str,
        args: &JsonObject,
        resume: Option<&str>,
    ) -> Result<RoundAnswer, CallToolResult> {
        let broker = self.broker.clone();
        let caller = self.caller.clone();
        let (tool, call_args) = (name.to_owned(), args.clone());
        let resume = resume.map(str::to_owned);
        let store = Arc::clone(self.broker.store());
        store
            .run_off_thread(move |_| {
                let round = match resume {
                    None => broker.call(&caller, &tool, &call_args),
                    Some(id) => broker.resume_call(&caller, &tool, &call_args, &id),
                };
                (round, broker.available_tools().map(|specs| names(&specs)))
            })
            .await
            .map_err(internal_error)
    }

    /// Run the call's rounds to its end, starting with a fresh call (`resume: None`) or the
    /// round naming an approval an earlier round opened. While its approval is pending the
    /// call waits as a future ([`ToolsServer::await_decision`]), holding one of the
    /// caller's waits; past the caller's limit it is refused and its approval abandoned.
    async fn drive(
        &self,
        name: &str,
        args: &JsonObject,
        ctx: &RequestContext<RoleServer>,
        mut resume: Option<String>,
    ) -> CallToolResult {
        let mut permit: Option<WaitPermit> = None;
        loop {
            let (round, available) = match self.round(name, args, resume.as_deref()).await {
                Ok(done) => done,
                Err(refusal) => return refusal,
            };
            let opened = match round {
                Ok(Round::Pending(opened)) => opened,
                Ok(Round::Done(outcome)) => {
                    return self.finish(Ok(outcome), available, args, ctx).await;
                }
                Err(error) => return self.finish(Err(error), available, args, ctx).await,
            };
            if permit.is_none() {
                match self
                    .waits
                    .begin(WaitOwner::of(&self.binding, ctx), ProtocolFamily::of(ctx))
                {
                    Ok(held) => permit = Some(held),
                    Err(refusal) => {
                        abandon(self.broker.store(), &opened.approval_id).await;
                        return refusal;
                    }
                }
            }
            self.await_decision(&opened, name, ctx).await;
            resume = Some(opened.approval_id);
        }
    }

    /// Wait, as a future, until approval `opened` is decided or its time is up: between
    /// reads of its row it awaits the approval bell (a decision in this process, or one
    /// another host announced) or the poll interval (other SQLite processes). Meanwhile it
    /// reports progress when the client sent a token and asks a session's client in a form
    /// when it declared one. A client that goes away (cancels, or drops the request)
    /// abandons the approval.
    async fn await_decision(
        &self,
        opened: &OpenedApproval,
        name: &str,
        ctx: &RequestContext<RoleServer>,
    ) {
        let store = self.broker.store();
        let config = self.broker.config();
        let id = &opened.approval_id;
        let mut unless_decided = AbandonOnDrop {
            store: Some(Arc::clone(store)),
            approval_id: id.clone(),
        };
        let progress_token = ctx.meta.get_progress_token();
        let mut bell = store.listen_to_approval(id);
        let mut asking = None;
        let mut reported: Option<Instant> = None;
        loop {
            bell.mark();
            let row = match store.approval_async(id).await {
                Ok(Ok(row)) => row,
                // The round that follows reads it again and says what went wrong.
                Ok(Err(_)) | Err(_) => break,
            };
            let now = store.now_ms();
            if row.status != ApprovalStatus::Pending || now >= row.expires_at {
                break;
            }
            if reported.is_none_or(|at| at.elapsed() >= config.progress_interval) {
                reported = Some(Instant::now());
                tracing::debug!(tool = name, approval = %id, "waiting for approval");
                if asking.is_none() {
                    asking = elicit::ask(ctx, store, id, name);
                }
                if let Some(token) = &progress_token {
                    let waited = (now - row.created_at).max(0) as f64;
                    let total = (row.expires_at - row.created_at).max(0) as f64;
                    let param = ProgressNotificationParam::new(token.clone(), waited)
                        .with_total(total)
                        .with_message(progress_message(name, id));
                    if let Err(error) = ctx.peer.notify_progress(param).await {
                        tracing::debug!(%error, "progress notification not delivered");
                    }
                }
            }
            let left = Duration::from_millis((row.expires_at - now).max(1).unsigned_abs());
            tokio::select! {
                () = bell.heard(left.min(store.wait_poll(config.poll_interval))) => {}
                () = ctx.ct.cancelled() => {
                    abandon(store, id).await;
                    break;
                }
            }
        }
        unless_decided.store = None;
        // Decided (or expired) elsewhere: the form's answer no longer matters.
        if let Some(form) = asking {
            form.abort();
        }
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
        let (round, available) = match self.round(&name, &args, None).await {
            Ok(done) => done,
            Err(refusal) => return refusal.into(),
        };
        match round {
            Ok(Round::Pending(opened)) => {
                match elicit::first_round(&signer, &opened, &name, &self.caller, &args) {
                    Some(asked) => asked,
                    // No form to send: wait for the other surfaces as a plain client would.
                    None => self
                        .resume(name, args, opened.approval_id, ctx)
                        .await
                        .into(),
                }
            }
            Ok(Round::Done(outcome)) => self
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
        self.drive(&name, &args, &ctx, Some(approval_id)).await
    }

    /// Remember `names` as available; `true` when they differ from an earlier list.
    fn remember_listed(&self, names: Vec<String>) -> bool {
        let mut listed = self.listed.lock().unwrap_or_else(|p| p.into_inner());
        let changed = listed.as_ref().is_some_and(|before| *before != names);
        *listed = Some(names);
        changed
    }
}

/// Where a round left the call, and the tools available after it.
type RoundAnswer = (Result<Round, StoreError>, Result<Vec<String>, StoreError>);

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

/// Expire approval `approval_id`: its caller went away.
async fn abandon(store: &Arc<Store>, approval_id: &str) {
    match store.abandon_approval_async(approval_id).await {
        Ok(Ok(_)) => {}
        Ok(Err(error)) => {
            tracing::warn!(%error, approval = %approval_id, "could not abandon an approval")
        }
        Err(_) => tracing::warn!(approval = %approval_id, "could not abandon an approval"),
    }
}

/// Abandons its approval when the wait it guards is dropped before it ended (the client
/// closed the request): the board then stops offering a call nobody waits for.
struct AbandonOnDrop {
    /// `None` once the wait ended by itself.
    store: Option<Arc<Store>>,
    approval_id: String,
}

impl Drop for AbandonOnDrop {
    fn drop(&mut self) {
        use tokio::runtime::{Handle, RuntimeFlavor};
        let Some(store) = self.store.take() else {
            return;
        };
        let id = std::mem::take(&mut self.approval_id);
        match Handle::try_current() {
            // `clawboo serve`: its runtime lives on, so the write runs as any other.
            Ok(runtime) if runtime.runtime_flavor() == RuntimeFlavor::MultiThread => {
                runtime.spawn(async move { abandon(&store, &id).await });
            }
            // A stdio server drops its waits as it exits, its one client gone, with no
            // runtime left to run a task: one short write here, on its only thread.
            _ => {
                if let Err(error) = store.abandon_approval(&id) {
                    tracing::warn!(%error, approval = %id, "could not abandon an approval");
                }
            }
        }
    }
}

fn progress_message(tool: &str, id: &str) -> String {
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

    fn binding(&self) -> Option<&Binding> {
        Some(&self.binding)
    }

    async fn call<'a>(
        &'a self,
        name: &'a str,
        args: JsonObject,
        ctx: RequestContext<RoleServer>,
    ) -> CallToolResult {
        self.drive(name, &args, &ctx, None).await
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
    use clawboo_broker::{Denial, DenialClass};

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
