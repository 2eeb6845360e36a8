//! The Ollama and OpenAI-compatible clients against a fake HTTP server on 127.0.0.1:0.
#![allow(clippy::unwrap_used)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};

use clawboo_embed::select::{Choice, EmbedConfig, select};
use clawboo_embed::{Embedder, OllamaEmbedder, OpenAiEmbedder};
use serde_json::{Value, json};

/// One request the fake server saw.
#[derive(Debug, Clone)]
struct Seen {
    method: String,
    path: String,
    authorization: Option<String>,
    body: Value,
}

/// A fake embedding service: answers `/api/version`, `/api/embed` (Ollama) and
/// `/v1/embeddings` (OpenAI, items deliberately out of order) with 3-dimensional vectors
/// derived from each input's length; `/broken/v1/embeddings` answers 500.
struct FakeServer {
    base: String,
    seen: Arc<Mutex<Vec<Seen>>>,
}

fn vector_for(text: &str) -> Vec<f32> {
    vec![text.len() as f32, 1.0, 0.0]
}

impl FakeServer {
    fn start() -> FakeServer {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let seen = Arc::new(Mutex::new(Vec::new()));
        let log = seen.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { continue };
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let mut request_line = String::new();
                if reader.read_line(&mut request_line).is_err() {
                    continue;
                }
                let mut parts = request_line.split_whitespace();
                let method = parts.next().unwrap_or("").to_string();
                let path = parts.next().unwrap_or("").to_string();
                let mut length = 0usize;
                let mut authorization = None;
                loop {
                    let mut line = String::new();
                    reader.read_line(&mut line).unwrap();
                    let line = line.trim_end();
                    if line.is_empty() {
                        break;
                    }
                    let (name, value) = line.split_once(':').unwrap();
                    match name.to_ascii_lowercase().as_str() {
                        "content-length" => length = value.trim().parse().unwrap(),
                        "authorization" => authorization = Some(value.trim().to_string()),
                        _ => {}
                    }
                }
                let mut body = vec![0u8; length];
                reader.read_exact(&mut body).unwrap();
                let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
                log.lock().unwrap().push(Seen {
                    method: method.clone(),
                    path: path.clone(),
                    authorization,
                    body: body.clone(),
                });
                let inputs: Vec<String> = body["input"]
                    .as_array()
                    .map(|a| a.iter().map(|v| v.as_str().unwrap().to_string()).collect())
                    .unwrap_or_default();
                let (status, answer) = match path.as_str() {
                    "/api/version" => ("200 OK", json!({"version": "0.0.0-fake"})),
                    "/api/embed" => (
                        "200 OK",
                        json!({"embeddings": inputs.iter().map(|t| vector_for(t)).collect::<Vec<_>>()}),
                    ),
                    "/v1/embeddings" => {
                        let mut data: Vec<Value> = inputs
                            .iter()
                            .enumerate()
                            .map(|(i, t)| json!({"object": "embedding", "index": i, "embedding": vector_for(t)}))
                            .collect();
                        data.reverse();
                        ("200 OK", json!({"object": "list", "data": data}))
                    }
                    _ => (
                        "500 Internal Server Error",
                        json!({"error": "model exploded"}),
                    ),
                };
                let text = answer.to_string();
                let _ = write!(
                    stream,
                    "HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{text}",
                    text.len()
                );
            }
        });
        FakeServer { base, seen }
    }

    fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }
}

fn unit(v: Vec<f32>) -> Vec<f32> {
    let n = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    v.into_iter().map(|x| x / n).collect()
}

#[test]
fn ollama_client_posts_model_and_inputs_and_normalises() {
    let server = FakeServer::start();
    assert!(OllamaEmbedder::is_reachable(
        &server.base,
        std::time::Duration::from_secs(5)
    ));
    let e = OllamaEmbedder::connect(&server.base, "nomic-embed-text").unwrap();
    assert_eq!(e.model_id(), "ollama:nomic-embed-text");
    assert_eq!(e.dim(), 3);
    let v = e.embed(&["ab", "abcd"]).unwrap();
    assert_eq!(v, vec![unit(vector_for("ab")), unit(vector_for("abcd"))]);
    let last = server.seen().pop().unwrap();
    assert_eq!(last.method, "POST");
    assert_eq!(last.path, "/api/embed");
    assert_eq!(
        last.body,
        json!({"model": "nomic-embed-text", "input": ["ab", "abcd"]})
    );
}

#[test]
fn openai_client_sends_the_key_and_sorts_by_index() {
    let server = FakeServer::start();
    let base = format!("{}/v1", server.base);
    // An unknown model is probed once for its dimension.
    let e = OpenAiEmbedder::connect(&base, "test-key", "local-embedder").unwrap();
    assert_eq!(e.dim(), 3);
    assert_eq!(e.model_id(), "openai:local-embedder");
    let v = e.embed(&["a", "abc", "abcdefg"]).unwrap();
    assert_eq!(
        v,
        vec![
            unit(vector_for("a")),
            unit(vector_for("abc")),
            unit(vector_for("abcdefg"))
        ]
    );
    let last = server.seen().pop().unwrap();
    assert_eq!(last.path, "/v1/embeddings");
    assert_eq!(last.authorization.as_deref(), Some("Bearer test-key"));
    assert_eq!(last.body["model"], "local-embedder");
}

#[test]
fn service_errors_are_reported_with_their_status() {
    let server = FakeServer::start();
    let err = OpenAiEmbedder::connect(&format!("{}/broken/v1", server.base), "k", "m")
        .err()
        .unwrap();
    let text = err.to_string();
    assert!(
        text.contains("500") && text.contains("model exploded"),
        "{text}"
    );
    // A known model needs no probe, so the failure shows on the first embed.
    let e = OpenAiEmbedder::connect(
        &format!("{}/broken/v1", server.base),
        "k",
        "text-embedding-3-small",
    )
    .unwrap();
    assert_eq!(e.dim(), 1536);
    assert!(e.embed(&["x"]).is_err());
}

#[test]
fn selection_reaches_both_clients_by_configuration() {
    let server = FakeServer::start();
    let mut config = EmbedConfig::from_lookup(|_| None).unwrap();
    config.choice = Some(Choice::Ollama);
    config.ollama_host = server.base.clone();
    assert_eq!(
        select(&config).unwrap().unwrap().model_id(),
        "ollama:nomic-embed-text"
    );

    config.choice = Some(Choice::OpenAi);
    assert!(
        select(&config).is_err(),
        "openai without a key must be refused"
    );
    config.openai_api_key = Some("k".into());
    config.openai_base_url = format!("{}/v1", server.base);
    config.openai_model = "custom".into();
    assert_eq!(
        select(&config).unwrap().unwrap().model_id(),
        "openai:custom"
    );

    // Automatic order: no MiniLM files, Ollama answering → Ollama.
    config.choice = None;
    config.minilm_dir = std::path::PathBuf::from("/nonexistent/clawboo-minilm");
    assert_eq!(
        select(&config).unwrap().unwrap().model_id(),
        "ollama:nomic-embed-text"
    );
}
