//! Wire helpers shared by every server: plain JSON Schemas for tool inputs, argument
//! decoding into typed structs, compact JSON results and tool-errors with `_meta` codes.

use std::sync::Arc;

use clawboo_store::links::LinkKind;
use clawboo_store::{Store, StoreError};
use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CallToolResult, ClientJsonRpcMessage, ClientRequest,
    ContentBlock, JsonObject, JsonRpcMessage, JsonRpcRequest, MetaObject, RequestId, Tool,
    ToolAnnotations,
};
use schemars::JsonSchema;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

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
    let found = store
        .require_linkable_async(task_id, team)
        .await
        .map_err(internal_error)?;
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
    let linked = store
        .link_to_task_async(&task_id, team.as_deref(), kind, &ref_id, &text)
        .await
        .map_err(internal_error)?;
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
/// enums buffers the whole message twice over, a cost every call paid (measured:
/// docs/BENCHMARKS.md's git history).
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
