//! Wire helpers shared by every server: plain JSON Schemas for tool inputs, argument
//! decoding into typed structs, compact JSON results and tool-errors with `_meta` codes.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use clawboo_store::board::Scope;
use clawboo_store::links::LinkKind;
use clawboo_store::{SettleWrite, Store, StoreError};
use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CallToolResult, ClientJsonRpcMessage, ClientRequest,
    ContentBlock, JsonObject, JsonRpcMessage, JsonRpcRequest, MetaObject, RequestId, Tool,
    ToolAnnotations,
};
use schemars::JsonSchema;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use tokio::sync::Notify;

/// What a tool does to the world, told to clients as MCP annotations (SPEC §15) so they
/// can decide what to run without asking and what to confirm.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Effect {
    /// Reads only.
    Read,
    /// Changes the store; a repeat changes it again.
    Write,
    /// Changes the store; a repeat with the same arguments changes nothing more.
    Idempotent,
    /// Destroys something.
    Destructive,
    /// Reaches outside this machine.
    External,
}

impl Effect {
    /// The annotations for this effect, every hint explicit (MCP's defaults assume the
    /// worst: destructive and open-world) and `title` set.
    pub fn annotations(self, title: &str) -> ToolAnnotations {
        let mut annotations = ToolAnnotations::new()
            .read_only(self == Effect::Read)
            .destructive(self == Effect::Destructive)
            .idempotent(matches!(self, Effect::Read | Effect::Idempotent))
            .open_world(self == Effect::External);
        annotations.title = Some(title.to_owned());
        annotations
    }
}

/// A tool whose input schema is derived from `Args` (field doc comments become property
/// descriptions, so a field gets one only where its name does not say it: every tool
/// definition is paid for on every model turn) and flattened to the plain shape every
/// client accepts; `title` and `effect` go outside the model-visible part.
pub fn tool<Args: JsonSchema>(
    name: &'static str,
    title: &'static str,
    effect: Effect,
    description: &'static str,
) -> Tool {
    described(
        Tool::new(name, description, Arc::new(input_schema::<Args>())),
        title,
        effect,
    )
}

/// `tool` with its display title and annotations set.
pub fn described(tool: Tool, title: &str, effect: Effect) -> Tool {
    tool.with_title(title)
        .with_annotations(effect.annotations(title))
}

/// `Args`' JSON Schema as `{type: "object", properties, required}` (`required` only when
/// something is): no `$schema`, no
/// `$defs`/`$ref` (inlined), no `null` unions for optional fields, and no
/// `additionalProperties: false` (unknown fields are still refused, by the decoder, as
/// `invalid args`; the model reads every schema on every turn, so the schema says only
/// what the model needs).
pub fn input_schema<Args: JsonSchema>() -> JsonObject {
    let generator = schemars::generate::SchemaSettings::draft2020_12()
        .with(|s| s.inline_subschemas = true)
        .into_generator();
    let mut schema = generator.into_root_schema_for::<Args>().to_value();
    simplify(&mut schema);
    let mut object = match schema {
        Value::Object(map) => map,
        _ => JsonObject::new(),
    };
    object.remove("$schema");
    object.remove("title");
    object.remove("additionalProperties");
    object.insert("type".into(), json!("object"));
    object.entry("properties").or_insert_with(|| json!({}));
    // An empty `required` says nothing a missing one does not (JSON Schema), and every
    // schema is read on every turn (SPEC §15).
    if object
        .get("required")
        .is_some_and(|r| r.as_array().is_some_and(Vec::is_empty))
    {
        object.remove("required");
    }
    object
}

/// Refuse a `taskId` (of `memory_save`, `team_chat_post`) the caller on `team` cannot
/// see, before anything is stored (SPEC §19).
pub(crate) async fn check_link_task(
    store: &Arc<Store>,
    task_id: Option<&str>,
    team: Option<String>,
) -> Result<(), CallToolResult> {
    let Some(task_id) = task_id.map(str::to_owned) else {
        return Ok(());
    };
    let found = blocking(store, move |s| {
        s.require_linkable(&task_id, Scope::team(team.as_deref()))
    })
    .await?;
    found.map_err(link_failure)
}

/// Link what was just stored (`ref_id` of `kind`, saying `text`) to its `taskId`.
pub(crate) async fn link_stored(
    store: &Arc<Store>,
    task_id: Option<String>,
    team: Option<String>,
    kind: LinkKind,
    ref_id: String,
    text: String,
) -> Result<(), CallToolResult> {
    let Some(task_id) = task_id else {
        return Ok(());
    };
    let linked = blocking_write(store, move |s| {
        s.link_to_task(&task_id, Scope::team(team.as_deref()), kind, &ref_id, &text)
    })
    .await?;
    linked.map_err(link_failure)
}

fn link_failure(e: StoreError) -> CallToolResult {
    match e {
        StoreError::NotFound(id) => tool_error(
            "not_found",
            format!(
                "taskId {id} is not a task on your board: pass the id of one (list_tasks), or leave taskId out"
            ),
        ),
        other => store_failure(other),
    }
}

/// The schema of a list of glob patterns (`paths`): `{"type": "array"}`, whose items a
/// tool's description names (the decoder still refuses anything but strings), since the
/// model reads every schema on every turn (SPEC §15).
pub(crate) fn globs_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({"type": "array"})
}

/// Drop null unions and nullable noise that schemars emits for `Option` fields.
fn simplify(value: &mut Value) {
    match value {
        Value::Object(map) => {
            if let Some(Value::Array(types)) = map.get("type") {
                let non_null: Vec<Value> = types.iter().filter(|t| *t != "null").cloned().collect();
                if non_null.len() == 1 {
                    map.insert("type".into(), non_null[0].clone());
                } else {
                    map.insert("type".into(), Value::Array(non_null));
                }
            }
            if let Some(Value::Array(variants)) = map.get("anyOf").or_else(|| map.get("oneOf")) {
                let non_null: Vec<Value> = variants
                    .iter()
                    .filter(|v| v.get("type") != Some(&json!("null")))
                    .cloned()
                    .collect();
                if non_null.len() == 1
                    && let Value::Object(inner) = non_null[0].clone()
                {
                    map.remove("anyOf");
                    map.remove("oneOf");
                    for (k, v) in inner {
                        map.entry(k).or_insert(v);
                    }
                }
            }
            if let Some(Value::Array(variants)) = map.get_mut("enum") {
                variants.retain(|v| !v.is_null());
            }
            if map.get("default") == Some(&Value::Null) {
                map.remove("default");
            }
            map.remove("format");
            map.remove("$defs");
            for v in map.values_mut() {
                simplify(v);
            }
        }
        Value::Array(items) => items.iter_mut().for_each(simplify),
        _ => {}
    }
}

/// The id of a `tools/call` of the plain shape (`jsonrpc`, an integer or string `id`,
/// `method`, and `params` holding `name` and an optional `arguments` object, nothing else),
/// else `None`. Such a message is always a valid request that rmcp decodes the same way,
/// so the transports build or pass it without serde's slow path through rmcp's flattened,
/// untagged message enums (which buffers the whole message twice over).
fn plain_tools_call_id(object: &JsonObject) -> Option<RequestId> {
    let Some(Value::Object(params)) = object.get("params") else {
        return None;
    };
    let plain = object.len() == 4
        && object.get("jsonrpc").and_then(Value::as_str) == Some("2.0")
        && object.get("method").and_then(Value::as_str) == Some("tools/call")
        && params.get("name").is_some_and(Value::is_string)
        && params.get("arguments").is_none_or(Value::is_object)
        && params.len() == 1 + usize::from(params.contains_key("arguments"));
    match object.get("id") {
        Some(Value::Number(n)) if plain => n.as_i64().map(RequestId::Number),
        Some(Value::String(s)) if plain => Some(RequestId::String(s.as_str().into())),
        _ => None,
    }
}

/// A `tools/call` of the plain shape (`id` an integer or string; `params` holding `name`
/// and an optional `arguments` object, nothing else) built as rmcp's type directly; any
/// other message comes back untouched for rmcp's decoder. Nearly every message of a busy
/// session is such a call, and serde's path through rmcp's flattened, untagged message
/// enums buffers the whole message twice over, a cost every call paid (docs/BENCHMARKS.md).
pub fn plain_tools_call(message: Value) -> Result<ClientJsonRpcMessage, Value> {
    let Value::Object(mut object) = message else {
        return Err(message);
    };
    let Some(id) = plain_tools_call_id(&object) else {
        return Err(Value::Object(object));
    };
    // The shape was checked: these matches always take their first arm.
    let mut params = match object.remove("params") {
        Some(Value::Object(params)) => params,
        _ => JsonObject::new(),
    };
    let name = match params.remove("name") {
        Some(Value::String(name)) => name,
        _ => String::new(),
    };
    let mut call = CallToolRequestParams::new(name);
    call.arguments = match params.remove("arguments") {
        Some(Value::Object(arguments)) => Some(arguments),
        _ => None,
    };
    Ok(JsonRpcMessage::Request(JsonRpcRequest::new(
        id,
        ClientRequest::CallToolRequest(CallToolRequest::new(call)),
    )))
}

/// Decode tool arguments into `Args`; a mismatch, or a NUL in any string
/// ([`nul_refusal`]), becomes an `invalid args: …` tool-error.
pub fn parse_args<Args: DeserializeOwned>(args: JsonObject) -> Result<Args, CallToolResult> {
    if let Some(refusal) = nul_refusal(&args) {
        return Err(refusal);
    }
    serde_json::from_value(Value::Object(args)).map_err(|e| invalid_args(e.to_string()))
}

/// The `invalid_args` refusal of arguments holding a NUL character (U+0000) in any string
/// or key, naming where: PostgreSQL cannot store one and SQLite would, so neither is given
/// one and both answer alike.
pub fn nul_refusal(args: &JsonObject) -> Option<CallToolResult> {
    clawboo_store::normalize::nul_in_fields(args).map(|path| {
        invalid_args(format!(
            "{path} holds a NUL character (U+0000), which cannot be stored; remove it and call again"
        ))
    })
}

/// An `invalid args: <what>` tool-error (`_meta.error = invalid_args`).
pub fn invalid_args(what: impl std::fmt::Display) -> CallToolResult {
    tool_error("invalid_args", format!("invalid args: {what}"))
}

/// A successful result whose one text block is `value` as compact JSON.
pub fn json_result(value: &impl Serialize) -> CallToolResult {
    match serde_json::to_string(value) {
        Ok(text) => CallToolResult::success(vec![ContentBlock::text(text)]),
        Err(e) => internal_error(e),
    }
}

/// A tool-error (`isError: true`) with `text` and `_meta.error = code`.
pub fn tool_error(code: &str, text: impl Into<String>) -> CallToolResult {
    let mut result = CallToolResult::error(vec![ContentBlock::text(text.into())]);
    let mut meta = JsonObject::new();
    meta.insert("error".into(), json!(code));
    result.meta = Some(MetaObject(meta));
    result
}

/// A policy refusal: a tool-error that also carries `_meta.denied = reason`, which executors
/// treat as a policy denial (and count toward circuit breakers). Ordinary failures must not
/// use it.
pub fn denied(code: &str, reason: &str, text: impl Into<String>) -> CallToolResult {
    let mut result = tool_error(code, text);
    if let Some(meta) = result.meta.as_mut() {
        meta.0.insert("denied".into(), json!(reason));
    }
    result
}

/// `unknown tool: <name>` (`_meta.error = unknown_tool`).
pub fn unknown_tool(name: &str) -> CallToolResult {
    tool_error("unknown_tool", format!("unknown tool: {name}"))
}

/// An internal failure, reported to the model as a retryable tool-error.
pub fn internal_error(e: impl std::fmt::Display) -> CallToolResult {
    // What failed (SQL, constraint names, driver messages) goes to the log only; the
    // caller gets the reference that finds it there (SPEC §16).
    let reference = clawboo_store::new_id();
    tracing::error!(%reference, error = %e, "tool call failed internally");
    tool_error(
        "internal",
        format!(
            "internal error (reference {reference}): the call changed nothing; retry it once, and if it fails again an operator finds the cause in the server's log under that reference"
        ),
    )
}

/// The tool-error for a store failure that is no refusal (the database backend, the
/// filesystem, a newer schema): `backend_unavailable` when the database cannot be
/// reached (retrying once it is back will do), `internal` otherwise.
pub fn store_failure(e: StoreError) -> CallToolResult {
    if e.code() == "backend_unavailable" {
        let reference = clawboo_store::new_id();
        tracing::warn!(%reference, error = %e, "the database is unavailable");
        return tool_error(
            "backend_unavailable",
            format!(
                "the database is unavailable (reference {reference}); the call changed nothing, retry it once the database is back"
            ),
        );
    }
    internal_error(e)
}

/// Run one quick store read; a panic inside becomes an internal tool-error instead of
/// taking the process down.
///
/// On a single-threaded runtime (a stdio server: one client, one connection, whose store
/// calls serialize on the connection anyway) the read runs inline, which saves two thread
/// hand-offs (wake-ups) per call, a large share of a short read's cost
/// (docs/BENCHMARKS.md); on a multi-threaded one (`clawboo serve`) it runs inline when the
/// connection is free and on the blocking pool otherwise. Writes go through
/// [`blocking_write`]. Nothing here waits for a post or a human: those waits are futures
/// between such reads (the chat and approval bells).
pub async fn blocking<T, F>(store: &Arc<Store>, f: F) -> Result<T, CallToolResult>
where
    T: Send + 'static,
    F: FnOnce(&Store) -> T + Send + 'static,
{
    use tokio::runtime::{Handle, RuntimeFlavor};
    if Handle::current().runtime_flavor() == RuntimeFlavor::CurrentThread {
        return std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(store)))
            .map_err(|_| internal_error("the store operation panicked"));
    }
    // Multi-threaded: a short read runs right here when the connection is free, else on
    // the blocking pool (never waiting for the lock on an async thread). Reads serialize on
    // the connection anyway, so only a few wait there at once; more would only be more
    // threads (each with its stack and malloc arena) queued on the same lock.
    static READERS_OFF_THREAD: tokio::sync::Semaphore = tokio::sync::Semaphore::const_new(2);
    let inline =
        |f: F| std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| store.run_if_idle(f)));
    let f = match inline(f) {
        Ok(Ok(value)) => return Ok(value),
        Ok(Err(f)) => f,
        Err(_) => return Err(internal_error("the store operation panicked")),
    };
    let _permit = READERS_OFF_THREAD.acquire().await.map_err(internal_error)?;
    match inline(f) {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(f)) => on_blocking_pool(store, f).await,
        Err(_) => Err(internal_error("the store operation panicked")),
    }
}

/// How many times a single-threaded drainer yields to gather more writes into its group.
const MAX_GATHER_ROUNDS: usize = 8;

/// How long a multi-threaded drainer waits at most for the writes it expects (Tokio's
/// timer rounds it up to its next tick).
const GATHER_WAIT: Duration = Duration::from_micros(500);

/// The group a multi-threaded drainer waits for: the most writes that were queued at once
/// during the previous drain. HTTP sessions have one call in flight each, so their writes
/// arrive spread over the time their clients take to send the next one; committing each
/// as it comes would cost a commit a write. Once the previous drain has shown N writers
/// at once, the next waits (at most [`GATHER_WAIT`]) for N, which the writers that then
/// answer soon bring. A lone writer sees 1 and commits at once; after a wait that timed
/// out, the next group expects only what came. One estimate a process (`clawboo serve`
/// has one store; stores sharing it only wait less or longer, never past the bound), and
/// only for a store whose writes share a commit ([`Store::groups_writes`]).
static GROUP_TARGET: AtomicUsize = AtomicUsize::new(1);
/// The most writes queued at once since the current drain began.
static QUEUE_PEAK: AtomicUsize = AtomicUsize::new(0);
/// Woken when the queue reaches [`GROUP_TARGET`].
static GROUP_FILLED: Notify = Notify::const_new();
/// When drains began lately, for [`group_to_wait_for`]'s probe.
static DRAIN_TIMES: std::sync::Mutex<DrainTimes> = std::sync::Mutex::new(DrainTimes {
    last_began: None,
    no_probe_before: None,
});

/// Drains closer together than this mean writes arrive back to back: worth a probe.
const PROBE_WHEN_DRAINS_WITHIN: Duration = Duration::from_millis(1);
/// How long a probe that found no second writer holds off the next one.
const PROBE_BACKOFF: Duration = Duration::from_millis(50);

/// When the previous drain began, and when a probe may next run.
struct DrainTimes {
    last_began: Option<Instant>,
    no_probe_before: Option<Instant>,
}

/// How many writes a drainer about to begin waits for: [`GROUP_TARGET`], or 2 to probe.
///
/// A target of 1 cannot grow by itself when the drain runs on the only worker thread
/// (`clawboo serve` on SQLite has one): while the drain runs nothing else is read off the
/// wire, so it never sees a second writer, and every write pays a commit of its own. So
/// when the target is 1 yet drains follow each other within [`PROBE_WHEN_DRAINS_WITHIN`],
/// the drainer waits (at most [`GATHER_WAIT`]) for a second write; when one comes the
/// peak shows the writers and the target follows them. A probe that times out (one agent
/// writing back to back) holds off the next for [`PROBE_BACKOFF`], so such an agent waits
/// once in that while.
fn group_to_wait_for(now: Instant) -> usize {
    let target = GROUP_TARGET.load(Ordering::Relaxed);
    let mut times = DRAIN_TIMES
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let expected = writes_to_wait_for(target, &times, now);
    times.last_began = Some(now);
    expected
}

/// [`group_to_wait_for`]'s rule, given the target and the times before this drain.
fn writes_to_wait_for(target: usize, before: &DrainTimes, now: Instant) -> usize {
    if target > 1 {
        return target;
    }
    let back_to_back = before
        .last_began
        .is_some_and(|began| now.duration_since(began) < PROBE_WHEN_DRAINS_WITHIN);
    let backed_off = before.no_probe_before.is_some_and(|until| now < until);
    if back_to_back && !backed_off { 2 } else { 1 }
}

/// After a probe for a second write that did not come: no probe for [`PROBE_BACKOFF`].
fn probe_found_none(now: Instant) {
    let mut times = DRAIN_TIMES
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    times.no_probe_before = Some(now + PROBE_BACKOFF);
}

/// Run a store write. On PostgreSQL it runs on the blocking pool beside the others, in a
/// transaction of its own. On SQLite it goes through the store's group commit: queued
/// writes of every session of this process share one transaction (each in its own
/// savepoint) and one commit, and each call is answered only after its group committed.
/// One caller at a time drains the queue ([`Store::queue_write`] says who); the others only
/// wait for their answer. On a single-threaded runtime the drainer first yields until no
/// more calls join, so the calls already read off the wire queue theirs and share its
/// group; on a multi-threaded one it first waits for as many writes as the previous drain
/// saw at once (see [`GROUP_TARGET`]), then drains right here when the writer's connection
/// is free (never waiting for its lock) and on the blocking pool otherwise; writers
/// arriving meanwhile join its next group.
pub async fn blocking_write<T, F>(store: &Arc<Store>, f: F) -> Result<T, CallToolResult>
where
    T: Send + 'static,
    F: FnOnce(&Store) -> T + Send + 'static,
{
    use tokio::runtime::{Handle, RuntimeFlavor};
    if !store.groups_writes() {
        // PostgreSQL: each write is a transaction of its own on a pooled connection, so the
        // writes in flight run side by side on the blocking pool, each on its connection,
        // instead of one after another behind a drainer.
        return on_blocking_pool(store, f).await;
    }
    let (answer, answered) = tokio::sync::oneshot::channel();
    let must_drain = store.queue_write(Box::new(move |store: &Store| -> SettleWrite {
        let value = f(store);
        Box::new(move |group: Result<(), &StoreError>| {
            let _ = answer.send(group.map(|()| value).map_err(internal_error));
        })
    }));
    let single_threaded = Handle::current().runtime_flavor() == RuntimeFlavor::CurrentThread;
    if single_threaded {
        if must_drain {
            // Yield until a round adds no write: each round lets the session read the
            // requests already on the wire and queue theirs, so a pipelining client's
            // whole window shares one commit (a single yield let only part of it join).
            let mut queued = store.queued_writes();
            for _ in 0..MAX_GATHER_ROUNDS {
                tokio::task::yield_now().await;
                let now = store.queued_writes();
                if now == queued {
                    break;
                }
                queued = now;
            }
            store.run_queued_writes();
        }
    } else if must_drain {
        let now = Instant::now();
        let expected = group_to_wait_for(now);
        if !gather_group(store, expected).await && expected == 2 {
            probe_found_none(now);
        }
        QUEUE_PEAK.store(store.queued_writes(), Ordering::Relaxed);
        if store.try_run_queued_writes() {
            next_group_target();
        } else {
            // The writer's connection is busy: drain on the blocking pool rather than wait
            // for it here. Not awaited: this call's answer comes through `answered` like
            // everyone's.
            let store = Arc::clone(store);
            drop(tokio::task::spawn_blocking(move || {
                store.run_queued_writes();
                next_group_target();
            }));
        }
    } else {
        let queued = store.queued_writes();
        QUEUE_PEAK.fetch_max(queued, Ordering::Relaxed);
        if queued >= GROUP_TARGET.load(Ordering::Relaxed) {
            GROUP_FILLED.notify_waiters();
        }
    }
    answered
        .await
        .map_err(|_| internal_error("the store operation panicked"))?
}

/// The largest group a drainer waits for.
const MAX_GROUP_TARGET: usize = 64;

/// After a drain: the next drainer waits for as many writes as this one saw at once.
fn next_group_target() {
    let peak = QUEUE_PEAK.load(Ordering::Relaxed);
    GROUP_TARGET.store(peak.clamp(1, MAX_GROUP_TARGET), Ordering::Relaxed);
}

/// Wait until `expected` writes are queued, or [`GATHER_WAIT`] passed; `true` when they
/// were.
async fn gather_group(store: &Store, expected: usize) -> bool {
    if expected <= 1 {
        return true;
    }
    let deadline = tokio::time::sleep(GATHER_WAIT);
    tokio::pin!(deadline);
    loop {
        let filled = GROUP_FILLED.notified();
        tokio::pin!(filled);
        filled.as_mut().enable();
        if store.queued_writes() >= expected {
            return true;
        }
        tokio::select! {
            () = filled => {}
            () = &mut deadline => return store.queued_writes() >= expected,
        }
    }
}

/// Run store work on the blocking pool: a read whose connection is busy, a PostgreSQL write.
pub async fn on_blocking_pool<T, F>(store: &Arc<Store>, f: F) -> Result<T, CallToolResult>
where
    T: Send + 'static,
    F: FnOnce(&Store) -> T + Send + 'static,
{
    let store = Arc::clone(store);
    tokio::task::spawn_blocking(move || f(&store))
        .await
        .map_err(internal_error)
}

/// The first text block of a result (tests and in-process callers).
pub fn result_text(result: &CallToolResult) -> Option<&str> {
    result.content.iter().find_map(|c| match c {
        ContentBlock::Text(t) => Some(t.text.as_str()),
        _ => None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_store_failure_tells_the_caller_a_reference_not_the_drivers_words() {
        let driver = "UNIQUE constraint failed: tool_call_audit.call_id, tool_call_audit.phase";
        for kind in [
            clawboo_store::BackendErrorKind::Other,
            clawboo_store::BackendErrorKind::Unavailable,
        ] {
            let failure = store_failure(StoreError::Backend(clawboo_store::BackendError {
                kind,
                message: driver.into(),
            }));
            let text = result_text(&failure).unwrap_or_default();
            assert!(text.contains("(reference "), "{text}");
            for word in ["UNIQUE", "constraint", "tool_call_audit"] {
                assert!(!text.contains(word), "{text}");
            }
        }
    }

    #[derive(serde::Deserialize, JsonSchema)]
    #[serde(deny_unknown_fields, rename_all = "camelCase")]
    #[allow(dead_code)]
    struct Example {
        /// The task.
        task_id: String,
        limit: Option<u32>,
        mode: Option<Mode>,
    }

    #[derive(serde::Deserialize, JsonSchema)]
    #[serde(rename_all = "snake_case")]
    enum Mode {
        Fts,
        Vector,
    }

    #[test]
    fn a_drain_probes_for_a_second_writer_only_when_drains_come_back_to_back() {
        let now = Instant::now();
        let times = |last_began: Option<Instant>, no_probe_before: Option<Instant>| DrainTimes {
            last_began,
            no_probe_before,
        };
        let just_before = now - Duration::from_micros(200);
        let long_before = now - Duration::from_millis(20);
        // A target the previous drain showed is kept, whatever the times.
        assert_eq!(writes_to_wait_for(6, &times(None, None), now), 6);
        assert_eq!(
            writes_to_wait_for(6, &times(Some(just_before), Some(now + PROBE_BACKOFF)), now),
            6
        );
        // The first drain, and one after a quiet while, commit at once.
        assert_eq!(writes_to_wait_for(1, &times(None, None), now), 1);
        assert_eq!(
            writes_to_wait_for(1, &times(Some(long_before), None), now),
            1
        );
        // Back-to-back drains of one write each probe for a second...
        assert_eq!(
            writes_to_wait_for(1, &times(Some(just_before), None), now),
            2
        );
        assert_eq!(
            writes_to_wait_for(1, &times(Some(just_before), Some(long_before)), now),
            2
        );
        // ...unless a probe found none within the back-off.
        let backed_off = times(Some(just_before), Some(now + PROBE_BACKOFF));
        assert_eq!(writes_to_wait_for(1, &backed_off, now), 1);
    }

    #[test]
    fn schemas_are_plain_objects() {
        let s = Value::Object(input_schema::<Example>());
        assert_eq!(s["type"], "object");
        assert_eq!(s["required"], json!(["taskId"]));
        assert_eq!(s["properties"]["taskId"]["description"], "The task.");
        assert_eq!(s["properties"]["limit"]["type"], "integer");
        assert_eq!(s["properties"]["mode"]["enum"], json!(["fts", "vector"]));
        let text = s.to_string();
        assert!(
            !text.contains("$schema") && !text.contains("$ref") && !text.contains("null"),
            "{text}"
        );
    }

    #[test]
    fn bad_arguments_are_invalid_args_tool_errors() {
        let args = json!({"taskId": 5}).as_object().cloned().unwrap();
        let err = parse_args::<Example>(args).err().unwrap();
        assert_eq!(err.is_error, Some(true));
        assert!(result_text(&err).unwrap().starts_with("invalid args: "));
        let args = json!({"taskId": "a", "bogus": 1})
            .as_object()
            .cloned()
            .unwrap();
        assert!(parse_args::<Example>(args).is_err());
    }

    #[test]
    fn plain_tools_calls_decode_as_rmcp_decodes_them() {
        let calls = [
            json!({"jsonrpc":"2.0","id":7,"method":"tools/call",
                   "params":{"name":"claim_task","arguments":{"taskId":"t","n":[1,{"a":null}]}}}),
            json!({"params":{"name":"list_tasks"},"id":"req-1","method":"tools/call","jsonrpc":"2.0"}),
            json!({"jsonrpc":"2.0","id":-3,"method":"tools/call","params":{"name":"x","arguments":{}}}),
        ];
        for call in calls {
            let fast = plain_tools_call(call.clone()).expect("a plain tools/call");
            let decoded: ClientJsonRpcMessage = serde_json::from_value(call.clone()).unwrap();
            assert_eq!(
                serde_json::to_value(&fast).unwrap(),
                serde_json::to_value(&decoded).unwrap()
            );
            assert_eq!(serde_json::to_value(&fast).unwrap(), call);
        }
        // Everything else goes to rmcp's decoder unchanged.
        let others = [
            json!({"jsonrpc":"2.0","id":1,"method":"tools/call",
                   "params":{"name":"x","_meta":{"progressToken":1}}}),
            json!({"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","arguments":null}}),
            json!({"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":5}}),
            json!({"jsonrpc":"2.0","id":1.5,"method":"tools/call","params":{"name":"x"}}),
            json!({"jsonrpc":"2.0","id":u64::MAX,"method":"tools/call","params":{"name":"x"}}),
            json!({"jsonrpc":"2.0","method":"tools/call","params":{"name":"x"}}),
            json!({"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"name":"x"}}),
            json!({"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x"},"extra":1}),
            json!([1]),
        ];
        for other in others {
            assert_eq!(plain_tools_call(other.clone()).err(), Some(other));
        }
    }
}
