//! Approvals in the agent's own client (SPEC §14): while a tool call waits for a human, a
//! client that declared form elicitation is also asked there (allow once, allow always,
//! deny), racing the board, the CLI and REST. The store settles an approval once, so the
//! first decision wins; this one is recorded as decided by [`DECIDED_BY`]. A declined or
//! cancelled form decides nothing: the approval stays pending for the other surfaces until
//! it expires.
//!
//! A session (2025-11-25 and earlier) is asked with an `elicitation/create` request while
//! the call waits ([`ask`]). On 2026-07-28 a server sends no requests: the call's first
//! round answers with an input-required result carrying the form and a sealed
//! `requestState` naming the approval ([`first_round`]); the client retries the call with
//! the answer, which is settled ([`settle`]) before the call waits for the approval's
//! decision. The state is sealed with the install's secret over the approval, the tool,
//! the caller's binding and the arguments, so a retry cannot steer another call's approval.

use std::sync::Arc;

use clawboo_broker::{BrokerStore, Caller, Decision, OpenedApproval};
use clawboo_store::Store;
use rmcp::RoleServer;
use rmcp::model::{
    CallToolResponse, ElicitRequest, ElicitRequestParams, ElicitResult, ElicitationAction,
    ElicitationSchema, InputRequest, InputRequests, InputRequiredResult, InputResponses,
    JsonObject, ProtocolVersion,
};
use rmcp::service::RequestContext;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use tokio::task::JoinHandle;

use crate::signing::ScopeSigner;

/// `decided_by` of an approval answered in the agent's client.
pub(crate) const DECIDED_BY: &str = "elicitation";

/// The form's one field.
const FIELD: &str = "decision";

/// The form's key among a round's input requests (and the answer's among the responses).
const INPUT_KEY: &str = "approval";

/// What a round's `requestState` is sealed for.
const STATE_PURPOSE: &str = "tools-call-approval";

/// Whether the client behind this request declared form elicitation: in the request's own
/// `_meta` on 2026-07-28, at `initialize` on a session (declaring neither mode means form).
pub(crate) fn declares_form(ctx: &RequestContext<RoleServer>) -> bool {
    ctx.client_capabilities()
        .and_then(|caps| caps.elicitation)
        .is_some_and(|modes| modes.form.is_some() || modes.url.is_none())
}

/// Whether this request speaks 2026-07-28 or later, where the server sends no requests and
/// asks through the call's rounds instead.
pub(crate) fn in_rounds(ctx: &RequestContext<RoleServer>) -> bool {
    ctx.protocol_version()
        .is_some_and(|version| version >= ProtocolVersion::V_2026_07_28)
}

/// The form asking about approval `approval_id` of `tool`; `None` (logged) if it does not
/// build.
fn form(approval_id: &str, tool: &str) -> Option<ElicitRequestParams> {
    let requested_schema = match decision_schema() {
        Ok(schema) => schema,
        Err(error) => {
            tracing::error!(%error, "the approval form does not build; not asking in the client");
            return None;
        }
    };
    Some(ElicitRequestParams::FormElicitationParams {
        meta: None,
        message: format!(
            "An agent wants to run {tool}, which needs approval ({approval_id}). Allow it once, always for this agent, or deny it."
        ),
        requested_schema,
    })
}

/// Ask the human behind a session's client to decide approval `approval_id` of `tool`,
/// when it declared form elicitation; `None` when it did not. The task ends with the
/// answer; abort it when the call is decided elsewhere.
pub(crate) fn ask(
    ctx: &RequestContext<RoleServer>,
    store: &Arc<Store>,
    approval_id: &str,
    tool: &str,
) -> Option<JoinHandle<()>> {
    if !declares_form(ctx) || in_rounds(ctx) {
        return None;
    }
    let params = form(approval_id, tool)?;
    let peer = ctx.peer.clone();
    let store = store.clone();
    let approval_id = approval_id.to_owned();
    Some(tokio::spawn(async move {
        match peer.create_elicitation(params).await {
            Ok(answer) => settle(&store, &approval_id, &answer).await,
            Err(error) => {
                tracing::debug!(%error, approval = %approval_id, "the client did not answer the approval form");
            }
        }
    }))
}

/// Record the form's answer on approval `approval_id`: an accepted decision is settled as
/// [`DECIDED_BY`] unless another surface decided first; a declined or cancelled form
/// decides nothing.
pub(crate) async fn settle(store: &Arc<Store>, approval_id: &str, answer: &ElicitResult) {
    let decision = match (
        &answer.action,
        answer.content.as_ref().and_then(decision_of),
    ) {
        (ElicitationAction::Accept, Some(decision)) => decision,
        (action, _) => {
            tracing::debug!(?action, approval = %approval_id, "approval form left undecided");
            return;
        }
    };
    let settled = store
        .resolve_approval_async(approval_id, decision, DECIDED_BY)
        .await;
    match settled {
        Ok(Ok(_)) => {}
        // Decided elsewhere first, or expired: the other answer stands.
        Ok(Err(error)) => tracing::debug!(%error, "approval form answered too late"),
        Err(error) => tracing::error!(%error, "recording the approval form's answer failed"),
    }
}

/// What a round's `requestState` carries: which approval, for which call.
#[derive(Debug, Serialize, Deserialize, PartialEq, Eq)]
struct RoundState {
    approval: String,
    tool: String,
    agent: Option<String>,
    team: Option<String>,
    tenant: Option<String>,
    /// SHA-256 of the arguments in canonical JSON: the retry must carry the same ones.
    args: String,
}

impl RoundState {
    fn of(approval_id: &str, tool: &str, caller: &Caller, args: &JsonObject) -> RoundState {
        RoundState {
            approval: approval_id.to_owned(),
            tool: tool.to_owned(),
            agent: caller.agent_id.clone(),
            team: caller.team_id.clone(),
            tenant: caller.tenant_id.clone(),
            args: args_digest(args),
        }
    }
}

/// The first round's answer for a call that opened approval `opened`: the form, and the
/// sealed state naming the approval. `None` when the form does not build (the caller then
/// waits for the other surfaces).
pub(crate) fn first_round(
    signer: &ScopeSigner,
    opened: &OpenedApproval,
    tool: &str,
    caller: &Caller,
    args: &JsonObject,
) -> Option<CallToolResponse> {
    let params = form(&opened.approval_id, tool)?;
    let state = RoundState::of(&opened.approval_id, tool, caller, args);
    let payload = match serde_json::to_string(&state) {
        Ok(payload) => payload,
        Err(error) => {
            tracing::error!(%error, "the approval round's state does not serialise");
            return None;
        }
    };
    let mut requests = InputRequests::new();
    requests.insert(
        INPUT_KEY.to_owned(),
        InputRequest::Elicitation(ElicitRequest::new(params)),
    );
    let result =
        InputRequiredResult::new(Some(requests), Some(signer.seal(STATE_PURPOSE, &payload)));
    Some(CallToolResponse::InputRequired(result))
}

/// The approval a retried call's `request_state` names, when this install sealed it for
/// exactly this tool, caller and arguments; `None` for anything else.
pub(crate) fn resumed_approval(
    signer: &ScopeSigner,
    request_state: &str,
    tool: &str,
    caller: &Caller,
    args: &JsonObject,
) -> Option<String> {
    let payload = signer.open(STATE_PURPOSE, request_state)?;
    let state: RoundState = serde_json::from_str(&payload).ok()?;
    let expected = RoundState::of(&state.approval, tool, caller, args);
    (state == expected).then_some(state.approval)
}

/// The client's answer to the form, from a retried call's input responses.
pub(crate) fn answer_in(responses: Option<&InputResponses>) -> Option<ElicitResult> {
    let answer = responses?.get(INPUT_KEY)?;
    serde_json::from_value(answer.clone()).ok()
}

/// SHA-256 (hex) of `args` as canonical JSON (keys sorted at every level), so a retry
/// that sends the same arguments in another key order still matches.
fn args_digest(args: &JsonObject) -> String {
    let mut text = String::new();
    canonical_json(&Value::Object(args.clone()), &mut text);
    hex::encode(Sha256::digest(text.as_bytes()))
}

fn canonical_json(value: &Value, out: &mut String) {
    match value {
        Value::Object(map) => {
            let mut entries: Vec<(&String, &Value)> = map.iter().collect();
            entries.sort_by(|a, b| a.0.cmp(b.0));
            out.push('{');
            for (i, (key, item)) in entries.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(key.clone()).to_string());
                out.push(':');
                canonical_json(item, out);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                canonical_json(item, out);
            }
            out.push(']');
        }
        scalar => out.push_str(&scalar.to_string()),
    }
}

/// The form: one required choice, titled for a person. It offers allowing once or
/// denying, never allowing always: the form is answered by whatever runs the client, which
/// may be the agent itself, so lasting trust is granted only from the operator's surfaces
/// (board, REST, CLI).
fn decision_schema() -> Result<ElicitationSchema, serde_json::Error> {
    serde_json::from_value(json!({
        "type": "object",
        "properties": {
            FIELD: {
                "type": "string",
                "title": "Decision",
                "oneOf": [
                    {"const": Decision::AllowOnce.as_str(), "title": "Allow once"},
                    {"const": Decision::Deny.as_str(), "title": "Deny"},
                ],
            },
        },
        "required": [FIELD],
    }))
}

/// The decision an accepted form carries: allow once or deny. An answer of
/// `allow_always`, which the form does not offer, allows this call once and remembers
/// nothing.
fn decision_of(content: &Value) -> Option<Decision> {
    match content.get(FIELD)?.as_str()? {
        "allow_once" | "allow_always" => Some(Decision::AllowOnce),
        "deny" => Some(Decision::Deny),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_form_offers_allow_once_and_deny_only() {
        let schema = serde_json::to_value(decision_schema().unwrap()).unwrap();
        let options: Vec<&str> = schema["properties"][FIELD]["oneOf"]
            .as_array()
            .unwrap()
            .iter()
            .map(|o| o["const"].as_str().unwrap())
            .collect();
        assert_eq!(options, ["allow_once", "deny"]);
        assert_eq!(schema["required"], json!([FIELD]));
        assert_eq!(
            decision_of(&json!({FIELD: "allow_always"})),
            Some(Decision::AllowOnce)
        );
        assert_eq!(decision_of(&json!({FIELD: "allow_forever"})), None);
        assert_eq!(decision_of(&json!({"other": "deny"})), None);
    }

    #[test]
    fn a_round_state_opens_only_for_the_same_call() {
        let signer = ScopeSigner::from_secret_hex(&"ab".repeat(32)).unwrap();
        let caller = Caller {
            agent_id: Some("a1".into()),
            team_id: Some("t1".into()),
            tenant_id: None,
        };
        let args = json!({"path": "/srv/x", "opts": {"b": 1, "a": [2, {"d": 3, "c": 4}]}});
        let args = args.as_object().unwrap().clone();
        let opened = OpenedApproval {
            approval_id: "ap-1".into(),
            expires_at: 0,
        };
        let Some(CallToolResponse::InputRequired(round)) =
            first_round(&signer, &opened, "delete_path", &caller, &args)
        else {
            panic!("an input-required round");
        };
        let wire = serde_json::to_value(&round).unwrap();
        assert_eq!(wire["resultType"], "input_required");
        assert_eq!(
            wire["inputRequests"][INPUT_KEY]["method"],
            "elicitation/create"
        );
        let state = round.request_state.unwrap();
        let resumed = |tool: &str, caller: &Caller, args: &JsonObject| {
            resumed_approval(&signer, &state, tool, caller, args)
        };
        assert_eq!(
            resumed("delete_path", &caller, &args).as_deref(),
            Some("ap-1")
        );
        // The same arguments in another key order still match.
        let reordered = json!({"opts": {"a": [2, {"c": 4, "d": 3}], "b": 1}, "path": "/srv/x"});
        assert_eq!(
            resumed("delete_path", &caller, reordered.as_object().unwrap()).as_deref(),
            Some("ap-1")
        );
        let changed = json!({"path": "/", "opts": {"b": 1, "a": [2, {"d": 3, "c": 4}]}});
        assert_eq!(
            resumed("delete_path", &caller, changed.as_object().unwrap()),
            None
        );
        assert_eq!(resumed("web_search", &caller, &args), None);
        let other = Caller {
            agent_id: Some("a2".into()),
            ..caller.clone()
        };
        assert_eq!(resumed("delete_path", &other, &args), None);
        assert_eq!(
            resumed_approval(&signer, "ap-1", "delete_path", &caller, &args),
            None
        );
    }

    #[test]
    fn the_answer_is_read_from_the_forms_key() {
        let mut responses = InputResponses::new();
        responses.insert(
            INPUT_KEY.into(),
            json!({"action": "accept", "content": {FIELD: "deny"}}),
        );
        let answer = answer_in(Some(&responses)).unwrap();
        assert_eq!(answer.action, ElicitationAction::Accept);
        assert_eq!(
            answer.content.as_ref().and_then(decision_of),
            Some(Decision::Deny)
        );
        responses.clear();
        responses.insert("other".into(), json!({"action": "accept"}));
        assert!(answer_in(Some(&responses)).is_none());
        assert!(answer_in(None).is_none());
    }
}
