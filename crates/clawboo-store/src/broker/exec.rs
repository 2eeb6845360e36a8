//! The builtin executors and their validated inputs.

use std::path::Path;
use std::time::Duration;

use rusqlite::params;
use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::Caller;
use crate::scrub::scrub_text;
use crate::{Store, new_id};

/// The most results `web_search` asks Tavily for (Tavily's own ceiling).
pub const WEB_SEARCH_MAX_RESULTS: u64 = 20;
/// Results `web_search` asks for when the caller gives no `limit`.
pub const WEB_SEARCH_DEFAULT_RESULTS: u64 = 5;
/// Tavily's API base; `TAVILY_BASE_URL` overrides it (tests point it at a fake server).
pub const TAVILY_DEFAULT_BASE_URL: &str = "https://api.tavily.com";

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

/// A builtin call with validated arguments.
#[derive(Debug)]
pub(crate) enum Invocation {
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
pub(crate) fn validate(tool: &str, args: &Map<String, Value>) -> Result<Invocation, String> {
    match tool {
        super::registry::ECHO => {
            let a: EchoArgs = decode(args)?;
            at_most("message", &a.message, MAX_MESSAGE_CHARS)?;
            Ok(Invocation::Echo { message: a.message })
        }
        super::registry::NOTE => {
            let a: NoteArgs = decode(args)?;
            non_empty("note", &a.note)?;
            at_most("note", &a.note, MAX_NOTE_CHARS)?;
            Ok(Invocation::Note { note: a.note })
        }
        super::registry::WEB_SEARCH => {
            let a: WebSearchArgs = decode(args)?;
            non_empty("query", &a.query)?;
            at_most("query", &a.query, MAX_QUERY_CHARS)?;
            if a.limit == Some(0) {
                return Err("`limit` must be at least 1".to_string());
            }
            Ok(Invocation::WebSearch {
                query: a.query,
                limit: a.limit,
            })
        }
        super::registry::DELETE_PATH => {
            let a: DeletePathArgs = decode(args)?;
            non_empty("path", &a.path)?;
            at_most("path", &a.path, MAX_PATH_CHARS)?;
            Ok(Invocation::DeletePath { path: a.path })
        }
        other => Err(format!("no executor for `{other}`")),
    }
}

/// What an executor produced: text for the model, and whether it is an error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Output {
    pub text: String,
    pub is_error: bool,
}

impl Output {
    fn ok(text: String) -> Output {
        Output {
            text,
            is_error: false,
        }
    }

    fn error(text: String) -> Output {
        Output {
            text,
            is_error: true,
        }
    }
}

/// Where `web_search` finds Tavily.
#[derive(Debug, Clone)]
pub(crate) struct Tavily {
    pub base_url: String,
    pub api_key: Option<String>,
}

/// Run a validated invocation.
pub(crate) fn execute(
    store: &Store,
    caller: &Caller,
    invocation: &Invocation,
    tavily: &Tavily,
) -> Output {
    match invocation {
        Invocation::Echo { message } => Output::ok(message.clone()),
        Invocation::Note { note } => record_note(store, caller, note),
        Invocation::WebSearch { query, limit } => web_search(tavily, query, *limit),
        Invocation::DeletePath { path } => Output::ok(describe_deletion(Path::new(path))),
    }
}

fn record_note(store: &Store, caller: &Caller, note: &str) -> Output {
    let id = new_id();
    let now = store.now_ms();
    let stored = scrub_text(note);
    let written = store.write(|tx| {
        tx.execute(
            "INSERT INTO tool_notes(id, agent_id, team_id, note, created_at)
             VALUES (?1, ?2, ?3, ?4, ?5)",
            params![id, caller.agent_id, caller.team_id, stored, now],
        )?;
        Ok::<_, crate::StoreError>(())
    });
    match written {
        Ok(()) => Output::ok(json!({ "noted": true, "id": id, "note": stored }).to_string()),
        Err(error) => Output::error(format!(
            "note was not recorded: {error}; try again in a moment"
        )),
    }
}

fn web_search(tavily: &Tavily, query: &str, limit: Option<u64>) -> Output {
    let Some(api_key) = tavily.api_key.as_deref() else {
        return Output::error(
            "web_search is not configured: set TAVILY_API_KEY (or the `tools.tavily.api_key` setting)"
                .to_string(),
        );
    };
    let max_results = limit
        .unwrap_or(WEB_SEARCH_DEFAULT_RESULTS)
        .clamp(1, WEB_SEARCH_MAX_RESULTS);
    let url = format!("{}/search", tavily.base_url.trim_end_matches('/'));
    let client = match reqwest::blocking::Client::builder()
        .timeout(Duration::from_secs(30))
        .build()
    {
        Ok(client) => client,
        Err(error) => return Output::error(format!("web_search could not start: {error}")),
    };
    let response = client
        .post(&url)
        .json(&json!({ "api_key": api_key, "query": query, "max_results": max_results }))
        .send();
    let response = match response {
        Ok(r) => r,
        Err(error) => {
            return Output::error(format!(
                "web_search failed: Tavily did not answer ({error}); try again later"
            ));
        }
    };
    let status = response.status();
    let body = response.text().unwrap_or_default();
    if !status.is_success() {
        let hint = if status.as_u16() == 401 || status.as_u16() == 403 {
            "; check TAVILY_API_KEY"
        } else {
            ""
        };
        return Output::error(format!(
            "web_search failed: Tavily answered HTTP {}{hint}: {}",
            status.as_u16(),
            scrub_text(&body.chars().take(300).collect::<String>())
        ));
    }
    match serde_json::from_str::<Value>(&body) {
        Ok(answer) => Output::ok(format_results(query, &answer)),
        Err(error) => Output::error(format!(
            "web_search failed: Tavily's answer is not JSON ({error})"
        )),
    }
}

fn format_results(query: &str, answer: &Value) -> String {
    let results = answer
        .get("results")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    if results.is_empty() {
        return format!("No results for \"{query}\".");
    }
    let mut out = format!("{} results for \"{query}\":", results.len());
    for (index, result) in results.iter().enumerate() {
        let field = |name: &str| result.get(name).and_then(Value::as_str).unwrap_or("");
        out.push_str(&format!(
            "\n{}. {}\n   {}\n   {}",
            index + 1,
            field("title"),
            field("url"),
            field("content").replace('\n', " ")
        ));
    }
    out
}

/// What deleting `path` would remove; nothing is deleted.
fn describe_deletion(path: &Path) -> String {
    let shown = path.display();
    let what = match std::fs::symlink_metadata(path) {
        Err(_) => {
            return format!(
                "nothing to delete: {shown} does not exist (demo executor: nothing was deleted)"
            );
        }
        Ok(meta) if meta.is_dir() => {
            let entries = std::fs::read_dir(path).map(|d| d.count()).unwrap_or(0);
            format!("directory {shown} and its {entries} entries")
        }
        Ok(meta) if meta.file_type().is_symlink() => format!("symlink {shown}"),
        Ok(meta) => format!("file {shown} ({} bytes)", meta.len()),
    };
    format!("would delete {what} (demo executor: nothing was deleted)")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{BufRead, BufReader, Read, Write};
    use std::net::TcpListener;

    fn args(v: Value) -> Map<String, Value> {
        v.as_object().unwrap().clone()
    }

    #[test]
    fn validation_rejects_missing_empty_and_unknown_fields() {
        assert!(validate("echo", &args(json!({"message": "hi"}))).is_ok());
        assert!(
            validate("echo", &args(json!({})))
                .unwrap_err()
                .contains("missing field `message`")
        );
        assert!(
            validate("echo", &args(json!({"message": "hi", "x": 1})))
                .unwrap_err()
                .contains("unknown field `x`")
        );
        assert!(
            validate("note", &args(json!({"note": " "})))
                .unwrap_err()
                .contains("`note` must be a non-empty string")
        );
        assert!(validate("delete_path", &args(json!({"path": ""}))).is_err());
        assert!(validate("web_search", &args(json!({"query": "q", "limit": "3"}))).is_err());
        assert!(validate("web_search", &args(json!({"query": "q", "limit": 0}))).is_err());
        let long_note = "n".repeat(MAX_NOTE_CHARS + 1);
        assert!(
            validate("note", &args(json!({ "note": long_note })))
                .unwrap_err()
                .contains("the limit is 10000")
        );
        assert!(validate("delete_path", &args(json!({"path": "p".repeat(5000)}))).is_err());
    }

    #[test]
    fn delete_path_deletes_nothing_and_says_what_it_would_delete() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("keep.txt");
        std::fs::write(&file, b"12345").unwrap();
        let said = describe_deletion(dir.path());
        assert!(said.starts_with("would delete directory"), "{said}");
        assert!(said.contains("its 1 entries"));
        assert!(describe_deletion(&file).contains("(5 bytes)"));
        assert!(describe_deletion(&dir.path().join("none")).starts_with("nothing to delete"));
        assert_eq!(std::fs::read(&file).unwrap(), b"12345");
    }

    /// A one-shot fake Tavily: answers one request with `status` and `body`, and hands the
    /// request body it saw back through the returned channel.
    fn fake_tavily(status: u16, body: &'static str) -> (String, std::sync::mpsc::Receiver<Value>) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let (stream, _) = listener.accept().unwrap();
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut request_line = String::new();
            reader.read_line(&mut request_line).unwrap();
            assert!(request_line.starts_with("POST /search "), "{request_line}");
            let mut length = 0usize;
            loop {
                let mut line = String::new();
                reader.read_line(&mut line).unwrap();
                if line == "\r\n" {
                    break;
                }
                if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                    length = v.trim().parse().unwrap();
                }
            }
            let mut request_body = vec![0; length];
            reader.read_exact(&mut request_body).unwrap();
            tx.send(serde_json::from_slice(&request_body).unwrap())
                .unwrap();
            let mut stream = stream;
            write!(
                stream,
                "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            )
            .unwrap();
        });
        (base, rx)
    }

    #[test]
    fn web_search_posts_to_tavily_and_formats_results() {
        let (base, seen) = fake_tavily(
            200,
            r#"{"results":[{"title":"Rust","url":"https://rust-lang.org","content":"A language\nfor all"}]}"#,
        );
        let tavily = Tavily {
            base_url: base,
            api_key: Some("tvly-test".into()),
        };
        let out = web_search(&tavily, "rust lang", Some(1000));
        assert_eq!(
            out,
            Output::ok("1 results for \"rust lang\":\n1. Rust\n   https://rust-lang.org\n   A language for all".into())
        );
        assert_eq!(
            seen.recv().unwrap(),
            json!({"api_key": "tvly-test", "query": "rust lang", "max_results": 20})
        );
    }

    #[test]
    fn web_search_reports_a_rejected_key() {
        let (base, _seen) = fake_tavily(401, r#"{"detail":"bad key"}"#);
        let tavily = Tavily {
            base_url: base,
            api_key: Some("tvly-wrong".into()),
        };
        let out = web_search(&tavily, "q", None);
        assert!(out.is_error);
        assert!(
            out.text.contains("HTTP 401; check TAVILY_API_KEY"),
            "{}",
            out.text
        );
    }
}
