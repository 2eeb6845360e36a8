//! `/api/team-chat`: read a room (as evidence, wrapped like MCP delivers it) and post as
//! the operator.

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::get;
use clawboo_mcp::envelope::{PeerPost, format_peer_post};
use clawboo_store::chat::{MAX_READ_LIMIT, OPERATOR_AUTHOR, PostKind};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::AppState;
use crate::error::{ApiJson, ApiQuery, AppError};

/// The team-chat routes.
pub fn routes() -> Router<AppState> {
    Router::new().route("/api/team-chat", get(read).post(post))
}

/// `roomId`, else `team:<teamId>`.
fn room(room_id: Option<String>, team_id: Option<String>) -> Result<String, AppError> {
    match (room_id, team_id) {
        (Some(room), _) if !room.trim().is_empty() => Ok(room),
        (_, Some(team)) if !team.trim().is_empty() => Ok(format!("team:{team}")),
        _ => Err(AppError::bad_request(
            "pass teamId (room team:<teamId>) or roomId",
        )),
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ReadQuery {
    team_id: Option<String>,
    room_id: Option<String>,
    since_seq: Option<i64>,
    limit: Option<usize>,
}

async fn read(
    State(state): State<AppState>,
    ApiQuery(q): ApiQuery<ReadQuery>,
) -> Result<axum::Json<Value>, AppError> {
    let room_id = room(q.room_id, q.team_id)?;
    let since_seq = q.since_seq.unwrap_or(0);
    if since_seq < 0 {
        return Err(AppError::bad_request("sinceSeq must be 0 or more"));
    }
    let limit = q.limit.unwrap_or(100);
    if !(1..=MAX_READ_LIMIT).contains(&limit) {
        return Err(AppError::bad_request(format!(
            "limit must be 1..={MAX_READ_LIMIT}"
        )));
    }
    let page = state
        .store()
        .read_chat_async(room_id, since_seq, limit, None)
        .await??;
    let posts: Vec<Value> = page
        .posts
        .iter()
        .map(|p| {
            let wrapped = format_peer_post(&PeerPost {
                author: &p.author,
                kind: p.kind.as_str(),
                seq: p.seq,
                body: &p.body,
            });
            json!({"seq": p.seq, "roomId": p.room_id, "authorAgentId": p.author, "kind": p.kind,
                   "body": p.body, "bodyHtml": crate::markdown::to_html(&p.body),
                   "createdAt": p.created_at, "wrapped": wrapped})
        })
        .collect();
    Ok(axum::Json(
        json!({ "posts": posts, "nextSeq": page.next_seq }),
    ))
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct PostBody {
    text: String,
    team_id: Option<String>,
    room_id: Option<String>,
    /// Shown as the author (default `operator`).
    author: Option<String>,
}

async fn post(
    State(state): State<AppState>,
    ApiJson(body): ApiJson<PostBody>,
) -> Result<(StatusCode, axum::Json<Value>), AppError> {
    if body.text.trim().is_empty() {
        return Err(AppError::bad_request("a post requires non-empty text"));
    }
    let room_id = room(body.room_id, body.team_id)?;
    let author = body.author.unwrap_or_else(|| OPERATOR_AUTHOR.to_owned());
    let posted = state
        .store()
        .post_chat_async(room_id, author, PostKind::User, body.text)
        .await??;
    Ok((
        StatusCode::CREATED,
        axum::Json(
            json!({"posted": {"seq": posted.seq, "roomId": posted.room_id, "authorAgentId": posted.author}}),
        ),
    ))
}
