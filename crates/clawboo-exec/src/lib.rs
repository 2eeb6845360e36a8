//! The tool broker's builtins that act outside the store: `web_search` (Tavily's search
//! API over HTTP) and `delete_path` (reads the filesystem; a demo that deletes nothing).
//!
//! The broker in `clawboo-store` decides everything before and after (validation,
//! inspectors, approval, compaction, audit) and hands [`Builtins`] only a call that passed;
//! the binaries inject it where they build a broker.
//!
//! ```
//! use clawboo_exec::Builtins;
//! use clawboo_broker::{Caller, Executor, Invocation};
//! let dir = tempfile::tempdir().unwrap();
//! let path = dir.path().display().to_string();
//! let output = Builtins::default().execute(&Invocation::DeletePath { path }, &Caller::anonymous());
//! assert!(output.text.ends_with("(demo executor: nothing was deleted)"));
//! ```

use std::path::{Component, Path, PathBuf};
use std::time::Duration;

use clawboo_broker::{Caller, Executor, Invocation, Output};
use clawboo_store::scrub::scrub_text;
use serde_json::{Value, json};

/// The most results `web_search` asks Tavily for (Tavily's own ceiling).
pub const WEB_SEARCH_MAX_RESULTS: u64 = 20;
/// Results `web_search` asks for when the caller gives no `limit`.
pub const WEB_SEARCH_DEFAULT_RESULTS: u64 = 5;
/// Tavily's API base; `TAVILY_BASE_URL` overrides it (tests point it at a fake server).
pub const TAVILY_DEFAULT_BASE_URL: &str = "https://api.tavily.com";
/// The environment variable overriding Tavily's base URL.
pub const TAVILY_BASE_URL_ENV: &str = "TAVILY_BASE_URL";

/// The environment variable listing the folders `delete_path` may inspect (separated as
/// `PATH` is); the process's working folder when unset.
pub const WORKSPACE_ROOTS_ENV: &str = "CLAWBOO_WORKSPACE_ROOTS";

/// The builtin executors.
#[derive(Debug, Clone)]
pub struct Builtins {
    /// Tavily's API base URL.
    pub tavily_base_url: String,
    /// The folders `delete_path` inspects paths under; about any other path it says
    /// nothing (not even whether it exists), so an approved call is no filesystem probe.
    pub workspace_roots: Vec<PathBuf>,
}

impl Default for Builtins {
    fn default() -> Self {
        Builtins {
            tavily_base_url: TAVILY_DEFAULT_BASE_URL.to_string(),
            workspace_roots: std::env::current_dir().into_iter().collect(),
        }
    }
}

impl Builtins {
    /// The defaults, with a non-blank `TAVILY_BASE_URL` and `CLAWBOO_WORKSPACE_ROOTS` from
    /// the process environment.
    pub fn from_env() -> Builtins {
        let mut builtins = Builtins::default();
        if let Ok(base) = std::env::var(TAVILY_BASE_URL_ENV)
            && !base.trim().is_empty()
        {
            builtins.tavily_base_url = base;
        }
        if let Some(roots) = std::env::var_os(WORKSPACE_ROOTS_ENV) {
            builtins.workspace_roots = std::env::split_paths(&roots)
                .filter(|root| !root.as_os_str().is_empty())
                .collect();
        }
        builtins
    }

    /// Whether `path`, as the filesystem resolves it (symlinks followed, `..` applied), lies
    /// under one of the workspace roots.
    fn in_workspace(&self, path: &Path) -> bool {
        let Some(resolved) = resolved(path) else {
            return false;
        };
        self.workspace_roots
            .iter()
            .filter_map(|root| root.canonicalize().ok())
            .any(|root| resolved.starts_with(root))
    }
}

/// `path` made absolute and resolved component by component: each part that exists
/// through the filesystem (following symlinks), the rest as written, `..` going up.
fn resolved(path: &Path) -> Option<PathBuf> {
    let absolute = std::path::absolute(path).ok()?;
    let mut out = PathBuf::new();
    for component in absolute.components() {
        match component {
            Component::Prefix(_) | Component::RootDir => out.push(component.as_os_str()),
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            Component::Normal(name) => {
                out.push(name);
                if let Ok(real) = out.canonicalize() {
                    out = real;
                }
            }
        }
    }
    Some(out)
}

impl Executor for Builtins {
    fn execute(&self, invocation: &Invocation, _caller: &Caller) -> Output {
        match invocation {
            Invocation::WebSearch {
                query,
                limit,
                api_key,
            } => web_search(&self.tavily_base_url, api_key.as_deref(), query, *limit),
            Invocation::DeletePath { path } => {
                let path = Path::new(path);
                if self.in_workspace(path) {
                    Output::ok(describe_deletion(path))
                } else {
                    Output::ok(format!(
                        "would delete {} if it exists; it lies outside the workspace roots, \
                         which are all this executor inspects (demo executor: nothing was deleted)",
                        path.display()
                    ))
                }
            }
        }
    }
}

fn web_search(base_url: &str, api_key: Option<&str>, query: &str, limit: Option<u64>) -> Output {
    let Some(api_key) = api_key else {
        return Output::error(
            "web_search is not configured: set TAVILY_API_KEY (or the `tools.tavily.api_key` setting)"
                .to_string(),
        );
    };
    let max_results = limit
        .unwrap_or(WEB_SEARCH_DEFAULT_RESULTS)
        .clamp(1, WEB_SEARCH_MAX_RESULTS);
    let url = format!("{}/search", base_url.trim_end_matches('/'));
    // reqwest comes without a crypto provider (see the workspace manifest); a second
    // install is refused, harmlessly.
    let _ = rustls::crypto::ring::default_provider().install_default();
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
mod tests;
