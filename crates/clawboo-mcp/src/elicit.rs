//! Approvals in the agent's own client (SPEC §14): while a tool call waits for a human, a
//! session whose client declared form elicitation is also asked there (allow once, allow
//! always, deny), racing the board, the CLI and REST. The store settles an approval once,
//! so the first decision wins; this one is recorded as decided by [`DECIDED_BY`]. A
//! declined or cancelled form decides nothing: the approval stays pending for the other
//! surfaces until it expires.

use std::sync::Arc;

use clawboo_store::Store;
use clawboo_store::broker::Decision;
use rmcp::RoleServer;
use rmcp::model::{ElicitRequestParams, ElicitationAction, ElicitationSchema};
use rmcp::service::{ElicitationMode, Peer};
use serde_json::{Value, json};
use tokio::task::JoinHandle;

/// `decided_by` of an approval answered in the agent's client.
pub(crate) const DECIDED_BY: &str = "elicitation";

/// The form's one field.
const FIELD: &str = "decision";

/// Ask the human behind `peer` to decide approval `approval_id` of `tool`, when its client
/// declared form elicitation; `None` when it did not. The task ends with the answer; abort
/// it when the call is decided elsewhere.
pub(crate) fn ask(
    peer: &Peer<RoleServer>,
    store: &Arc<Store>,
    approval_id: &str,
    tool: &str,
) -> Option<JoinHandle<()>> {
    if !peer
        .supported_elicitation_modes()
        .contains(&ElicitationMode::Form)
    {
        return None;
    }
    let requested_schema = match decision_schema() {
        Ok(schema) => schema,
        Err(error) => {
            tracing::error!(%error, "the approval form does not build; not asking in the client");
            return None;
        }
    };
    let params = ElicitRequestParams::FormElicitationParams {
        meta: None,
        message: format!(
            "An agent wants to run {tool}, which needs approval ({approval_id}). Allow it once, always for this agent, or deny it."
        ),
        requested_schema,
    };
    let peer = peer.clone();
    let store = store.clone();
    let approval_id = approval_id.to_owned();
    Some(tokio::spawn(async move {
        let answer = match peer.create_elicitation(params).await {
            Ok(answer) => answer,
            Err(error) => {
                tracing::debug!(%error, approval = %approval_id, "the client did not answer the approval form");
                return;
            }
        };
        let decision = match (answer.action, answer.content.as_ref().and_then(decision_of)) {
            (ElicitationAction::Accept, Some(decision)) => decision,
            (action, _) => {
                tracing::debug!(?action, approval = %approval_id, "approval form left undecided");
                return;
            }
        };
        let settled = tokio::task::spawn_blocking(move || {
            store.resolve_approval(&approval_id, decision, DECIDED_BY)
        })
        .await;
        match settled {
            Ok(Ok(_)) => {}
            // Decided elsewhere first, or expired: the other answer stands.
            Ok(Err(error)) => tracing::debug!(%error, "approval form answered too late"),
            Err(error) => tracing::error!(%error, "recording the approval form's answer failed"),
        }
    }))
}

/// The form: one required choice, titled for a person.
fn decision_schema() -> Result<ElicitationSchema, serde_json::Error> {
    serde_json::from_value(json!({
        "type": "object",
        "properties": {
            FIELD: {
                "type": "string",
                "title": "Decision",
                "oneOf": [
                    {"const": Decision::AllowOnce.as_str(), "title": "Allow once"},
                    {"const": Decision::AllowAlways.as_str(), "title": "Allow always"},
                    {"const": Decision::Deny.as_str(), "title": "Deny"},
                ],
            },
        },
        "required": [FIELD],
    }))
}

/// The decision an accepted form carries, if it is one of the three.
fn decision_of(content: &Value) -> Option<Decision> {
    let chosen = content.get(FIELD)?.as_str()?;
    [Decision::AllowOnce, Decision::AllowAlways, Decision::Deny]
        .into_iter()
        .find(|d| d.as_str() == chosen)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_form_offers_exactly_the_three_decisions() {
        let schema = serde_json::to_value(decision_schema().unwrap()).unwrap();
        let options: Vec<&str> = schema["properties"][FIELD]["oneOf"]
            .as_array()
            .unwrap()
            .iter()
            .map(|o| o["const"].as_str().unwrap())
            .collect();
        assert_eq!(options, ["allow_once", "allow_always", "deny"]);
        assert_eq!(schema["required"], json!([FIELD]));
        assert_eq!(
            decision_of(&json!({FIELD: "allow_always"})),
            Some(Decision::AllowAlways)
        );
        assert_eq!(decision_of(&json!({FIELD: "allow_forever"})), None);
        assert_eq!(decision_of(&json!({"other": "deny"})), None);
    }
}
