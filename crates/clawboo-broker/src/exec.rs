//! What a call runs once the broker has let it through: the builtins' validated inputs,
//! the store's own builtins (`echo`, `note`), and the [`Executor`] trait behind which the
//! builtins that act outside the store (web search, the filesystem) run.

use std::fmt;

use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::Caller;
use clawboo_store::scrub::scrub_text;
use clawboo_store::{Store, new_id};

/// `echo` arguments.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct EchoArgs {
    message: String,
}

/// `note` arguments.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct NoteArgs {
    note: String,
}

/// `web_search` arguments.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct WebSearchArgs {
    query: String,
    limit: Option<u64>,
}

/// `delete_path` arguments.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct DeletePathArgs {
    path: String,
}

/// A validated call of a builtin that acts outside the store: what an [`Executor`] runs.
#[derive(Clone, PartialEq, Eq)]
pub enum Invocation {
    /// Search the web.
    WebSearch {
        /// The query, non-empty.
        query: String,
        /// How many results the caller asked for (at least 1, clamped to 1000).
        limit: Option<u64>,
        /// The Tavily key the broker found (environment, then the `tools.tavily.api_key`
        /// setting): the same lookup that decides whether `web_search` is available.
        api_key: Option<String>,
    },
    /// Say what deleting a path would remove (a demo: nothing is deleted).
    DeletePath {
        /// The path, non-empty.
        path: String,
    },
}

/// Hand-written so the Tavily key never reaches a log.
impl fmt::Debug for Invocation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Invocation::WebSearch {
                query,
                limit,
                api_key,
            } => f
                .debug_struct("WebSearch")
                .field("query", query)
                .field("limit", limit)
                .field("api_key", &api_key.as_ref().map(|_| "[hidden]"))
                .finish(),
            Invocation::DeletePath { path } => {
                f.debug_struct("DeletePath").field("path", path).finish()
            }
        }
    }
}

/// What a call produced: text for the model, and whether it is an error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Output {
    /// The text, before compaction.
    pub text: String,
    /// Whether the tool itself failed.
    pub is_error: bool,
}

impl Output {
    /// A result.
    pub fn ok(text: String) -> Output {
        Output {
            text,
            is_error: false,
        }
    }

    /// A failure; `text` says what happened and what to do next.
    pub fn error(text: String) -> Output {
        Output {
            text,
            is_error: true,
        }
    }
}

/// Runs the builtins whose effects reach outside the store. The broker defines it so the
/// store decides every rule (validation, inspection, approval, compaction, audit) and
/// knows no network or filesystem; the binaries inject the implementation when they build
/// a [`Broker`](super::Broker). It is called only after every check passed, off the async
/// executor, and may block.
pub trait Executor: fmt::Debug + Send + Sync {
    /// Run `invocation` for `caller`; failures are an error [`Output`], never a panic.
    fn execute(&self, invocation: &Invocation, caller: &Caller) -> Output;
}

/// A builtin call with validated arguments.
#[derive(Debug)]
pub(crate) enum Validated {
    Echo { message: String },
    Note { note: String },
    WebSearch { query: String, limit: Option<u64> },
    DeletePath { path: String },
}

fn decode<T: for<'de> Deserialize<'de>>(args: &Map<String, Value>) -> Result<T, String> {
    serde_json::from_value(Value::Object(args.clone())).map_err(|e| e.to_string())
}

/// The longest `echo` message, in characters.
pub const MAX_MESSAGE_CHARS: usize = 100_000;
/// The longest `note`, in characters.
pub const MAX_NOTE_CHARS: usize = 10_000;
/// The longest `web_search` query, in characters.
pub const MAX_QUERY_CHARS: usize = 2_000;
/// The longest `delete_path` path, in characters.
pub const MAX_PATH_CHARS: usize = 4_096;

fn at_most(field: &str, value: &str, max: usize) -> Result<(), String> {
    let count = value.chars().count();
    if count > max {
        Err(format!(
            "`{field}` is {count} characters long; the limit is {max}"
        ))
    } else {
        Ok(())
    }
}

fn non_empty(field: &str, value: &str) -> Result<(), String> {
    if value.trim().is_empty() {
        Err(format!("`{field}` must be a non-empty string"))
    } else {
        Ok(())
    }
}

/// Validate `args` for the builtin `tool`; the error says what is wrong.
pub(crate) fn validate(tool: &str, args: &Map<String, Value>) -> Result<Validated, String> {
    match tool {
        super::registry::ECHO => {
            let a: EchoArgs = decode(args)?;
            at_most("message", &a.message, MAX_MESSAGE_CHARS)?;
            Ok(Validated::Echo { message: a.message })
        }
        super::registry::NOTE => {
            let a: NoteArgs = decode(args)?;
            non_empty("note", &a.note)?;
            at_most("note", &a.note, MAX_NOTE_CHARS)?;
            Ok(Validated::Note { note: a.note })
        }
        super::registry::WEB_SEARCH => {
            let a: WebSearchArgs = decode(args)?;
            non_empty("query", &a.query)?;
            at_most("query", &a.query, MAX_QUERY_CHARS)?;
            if a.limit == Some(0) {
                return Err("`limit` must be at least 1".to_string());
            }
            Ok(Validated::WebSearch {
                query: a.query,
                limit: a.limit,
            })
        }
        super::registry::DELETE_PATH => {
            let a: DeletePathArgs = decode(args)?;
            non_empty("path", &a.path)?;
            at_most("path", &a.path, MAX_PATH_CHARS)?;
            Ok(Validated::DeletePath { path: a.path })
        }
        other => Err(format!("no executor for `{other}`")),
    }
}

/// Record a `note` row for `caller` (scrubbed); the store's own builtin.
pub(crate) fn record_note(store: &Store, caller: &Caller, note: &str) -> Output {
    let id = new_id();
    let now = store.now_ms();
    let stored = scrub_text(note);
    let written = store.write(|tx| {
        tx.execute(
            "INSERT INTO tool_notes(id, agent_id, team_id, note, created_at)
             VALUES (?1, ?2, ?3, ?4, ?5)",
            &[&id, &caller.agent_id, &caller.team_id, &stored, &now],
        )?;
        Ok::<_, clawboo_store::StoreError>(())
    });
    match written {
        Ok(()) => Output::ok(json!({ "noted": true, "id": id, "note": stored }).to_string()),
        Err(error) => Output::error(format!(
            "note was not recorded: {error}; try again in a moment"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(v: Value) -> Map<String, Value> {
        v.as_object().unwrap().clone()
    }

    fn check(tool: &str, v: Value) -> Result<Validated, String> {
        validate(tool, &args(v))
    }

    #[test]
    fn validation_rejects_missing_empty_and_unknown_fields() {
        assert!(check("echo", json!({"message": "hi"})).is_ok());
        assert!(
            check("echo", json!({}))
                .unwrap_err()
                .contains("missing field `message`")
        );
        assert!(
            check("echo", json!({"message": "hi", "x": 1}))
                .unwrap_err()
                .contains("unknown field `x`")
        );
        assert!(
            check("note", json!({"note": " "}))
                .unwrap_err()
                .contains("`note` must be a non-empty string")
        );
        assert!(check("delete_path", json!({"path": ""})).is_err());
        assert!(check("web_search", json!({"query": "q", "limit": "3"})).is_err());
        assert!(check("web_search", json!({"query": "q", "limit": 0})).is_err());
        let long_note = "n".repeat(MAX_NOTE_CHARS + 1);
        assert!(
            check("note", json!({ "note": long_note }))
                .unwrap_err()
                .contains("the limit is 10000")
        );
        assert!(check("delete_path", json!({"path": "p".repeat(5000)})).is_err());
    }

    #[test]
    fn an_invocation_never_shows_its_key() {
        let invocation = Invocation::WebSearch {
            query: "q".into(),
            limit: None,
            api_key: Some("tvly-secret".into()),
        };
        let shown = format!("{invocation:?}");
        assert!(
            !shown.contains("tvly-secret") && shown.contains("[hidden]"),
            "{shown}"
        );
    }
}
