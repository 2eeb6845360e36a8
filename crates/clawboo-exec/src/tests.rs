//! The executors against a real temp folder and a fake Tavily on a loopback port.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;

use super::*;

fn run(builtins: &Builtins, invocation: Invocation) -> Output {
    builtins.execute(&invocation, &Caller::anonymous())
}

/// What `delete_path` says of `path` with `root` as the only workspace root.
fn delete_path(root: &Path, path: &Path) -> String {
    let builtins = Builtins {
        workspace_roots: vec![root.to_owned()],
        ..Builtins::default()
    };
    let path = path.display().to_string();
    let output = run(&builtins, Invocation::DeletePath { path });
    assert!(!output.is_error, "{}", output.text);
    output.text
}

#[test]
fn delete_path_deletes_nothing_and_says_what_it_would_delete() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("keep.txt");
    std::fs::write(&file, b"12345").unwrap();
    let said = delete_path(dir.path(), dir.path());
    assert!(said.starts_with("would delete directory"), "{said}");
    assert!(said.contains("its 1 entries"));
    assert!(delete_path(dir.path(), &file).contains("(5 bytes)"));
    let none = delete_path(dir.path(), &dir.path().join("none"));
    assert!(none.starts_with("nothing to delete"), "{none}");
    assert_eq!(std::fs::read(&file).unwrap(), b"12345");
}

/// Outside the workspace roots nothing is inspected: an existing file and a missing one
/// get the same answer, with no size or entry count, however the path gets there (`..`,
/// a symlink).
#[test]
fn delete_path_says_nothing_about_paths_outside_the_workspace() {
    let root = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    let secret = outside.path().join("secret.txt");
    std::fs::write(&secret, b"12345").unwrap();
    let missing = outside.path().join("missing.txt");
    let escaped = root.path().join("..").join(
        outside
            .path()
            .strip_prefix(root.path().parent().unwrap())
            .unwrap_or(outside.path()),
    );
    #[cfg(unix)]
    std::os::unix::fs::symlink(outside.path(), root.path().join("link")).unwrap();
    let mut probes = vec![secret.clone(), missing.clone(), escaped.join("secret.txt")];
    #[cfg(unix)]
    probes.push(root.path().join("link").join("secret.txt"));
    for probe in probes {
        let said = delete_path(root.path(), &probe);
        assert!(said.contains("outside the workspace roots"), "{said}");
        assert!(
            !said.contains("bytes") && !said.contains("entries"),
            "{said}"
        );
        assert!(!said.starts_with("nothing to delete"), "{said}");
    }
    assert_eq!(std::fs::read(&secret).unwrap(), b"12345");
}

/// A one-shot fake Tavily: answers one request with `status` and `body`, and hands the
/// request body it saw back through the returned channel.
fn fake_tavily(status: u16, body: &'static str) -> (Builtins, std::sync::mpsc::Receiver<Value>) {
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
    let builtins = Builtins {
        tavily_base_url: base,
        ..Builtins::default()
    };
    (builtins, rx)
}

fn search(query: &str, limit: Option<u64>, api_key: &str) -> Invocation {
    Invocation::WebSearch {
        query: query.into(),
        limit,
        api_key: Some(api_key.into()),
    }
}

#[test]
fn web_search_posts_to_tavily_and_formats_results() {
    let (builtins, seen) = fake_tavily(
        200,
        r#"{"results":[{"title":"Rust","url":"https://rust-lang.org","content":"A language\nfor all"}]}"#,
    );
    let out = run(&builtins, search("rust lang", Some(1000), "tvly-test"));
    assert_eq!(
        out,
        Output::ok(
            "1 results for \"rust lang\":\n1. Rust\n   https://rust-lang.org\n   A language for all"
                .into()
        )
    );
    assert_eq!(
        seen.recv().unwrap(),
        json!({"api_key": "tvly-test", "query": "rust lang", "max_results": 20})
    );
}

#[test]
fn web_search_reports_a_rejected_key() {
    let (builtins, _seen) = fake_tavily(401, r#"{"detail":"bad key"}"#);
    let out = run(&builtins, search("q", None, "tvly-wrong"));
    assert!(out.is_error);
    assert!(
        out.text.contains("HTTP 401; check TAVILY_API_KEY"),
        "{}",
        out.text
    );
}

#[test]
fn web_search_without_a_key_says_how_to_configure_one() {
    let invocation = Invocation::WebSearch {
        query: "q".into(),
        limit: None,
        api_key: None,
    };
    let out = run(&Builtins::default(), invocation);
    assert_eq!(
        out,
        Output::error(
            "web_search is not configured: set TAVILY_API_KEY (or the `tools.tavily.api_key` setting)"
                .into()
        )
    );
}
