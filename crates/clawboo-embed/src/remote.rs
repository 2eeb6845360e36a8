//! HTTP embedding clients: Ollama (`POST /api/embed`) and OpenAI-compatible
//! (`POST {base}/embeddings`). Blocking; call them off the async executor.

use std::time::Duration;

use serde::Deserialize;
use serde_json::json;

use crate::{EmbedError, Embedder, l2_normalize};

/// How long one embedding request may take.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

fn client(timeout: Duration) -> Result<reqwest::blocking::Client, EmbedError> {
    // reqwest comes without a crypto provider (see the workspace manifest); a second
    // install is refused, harmlessly.
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::blocking::Client::builder()
        .timeout(timeout)
        .build()
        .map_err(|e| EmbedError::Http(format!("cannot build an HTTP client: {e}")))
}

fn http_err(what: &str, e: reqwest::Error) -> EmbedError {
    EmbedError::Http(format!("{what}: {e}"))
}

/// Check a response's status, turning an error status into a readable error.
fn ok_or_status(
    what: &str,
    resp: reqwest::blocking::Response,
) -> Result<reqwest::blocking::Response, EmbedError> {
    let status = resp.status();
    if status.is_success() {
        return Ok(resp);
    }
    let body: String = resp.text().unwrap_or_default().chars().take(300).collect();
    Err(EmbedError::Http(format!(
        "{what} answered {status}: {body}"
    )))
}

fn check_shape(
    vectors: Vec<Vec<f32>>,
    expected: usize,
    dim: Option<usize>,
) -> Result<Vec<Vec<f32>>, EmbedError> {
    if vectors.len() != expected {
        return Err(EmbedError::BadResponse(format!(
            "asked for {expected} vectors, got {}",
            vectors.len()
        )));
    }
    let first = vectors.first().map_or(0, Vec::len);
    let want = dim.unwrap_or(first);
    if want == 0 || vectors.iter().any(|v| v.len() != want) {
        return Err(EmbedError::BadResponse(format!(
            "vectors of unexpected length (want {want})"
        )));
    }
    Ok(vectors
        .into_iter()
        .map(|mut v| {
            l2_normalize(&mut v);
            v
        })
        .collect())
}

/// An Ollama server's `/api/embed` endpoint.
#[derive(Debug)]
pub struct OllamaEmbedder {
    client: reqwest::blocking::Client,
    url: String,
    model: String,
    model_id: String,
    dim: usize,
}

#[derive(Deserialize)]
struct OllamaAnswer {
    embeddings: Vec<Vec<f32>>,
}

impl OllamaEmbedder {
    /// Whether an Ollama server answers at `host` within `timeout`.
    pub fn is_reachable(host: &str, timeout: Duration) -> bool {
        let Ok(c) = client(timeout) else {
            return false;
        };
        c.get(format!("{}/api/version", host.trim_end_matches('/')))
            .send()
            .is_ok_and(|r| r.status().is_success())
    }

    /// Connect to `host` (e.g. `http://localhost:11434`) using `model`; one probe
    /// embedding learns the vector length.
    pub fn connect(host: &str, model: &str) -> Result<OllamaEmbedder, EmbedError> {
        let mut e = OllamaEmbedder {
            client: client(REQUEST_TIMEOUT)?,
            url: format!("{}/api/embed", host.trim_end_matches('/')),
            model: model.to_string(),
            model_id: format!("ollama:{model}"),
            dim: 0,
        };
        let probe = e.request(&["dimension probe"])?;
        e.dim = probe.first().map_or(0, Vec::len);
        Ok(e)
    }

    fn request(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let resp = self
            .client
            .post(&self.url)
            .json(&json!({"model": self.model, "input": texts}))
            .send()
            .map_err(|e| http_err("ollama", e))?;
        let answer: OllamaAnswer = ok_or_status("ollama", resp)?
            .json()
            .map_err(|e| EmbedError::BadResponse(format!("ollama: {e}")))?;
        check_shape(
            answer.embeddings,
            texts.len(),
            (self.dim > 0).then_some(self.dim),
        )
    }
}

impl Embedder for OllamaEmbedder {
    fn model_id(&self) -> &str {
        &self.model_id
    }

    fn dim(&self) -> usize {
        self.dim
    }

    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        if texts.is_empty() {
            return Ok(Vec::new());
        }
        self.request(texts)
    }
}

/// An OpenAI-compatible `/embeddings` endpoint.
#[derive(Debug)]
pub struct OpenAiEmbedder {
    client: reqwest::blocking::Client,
    url: String,
    api_key: String,
    model: String,
    model_id: String,
    dim: usize,
}

#[derive(Deserialize)]
struct OpenAiAnswer {
    data: Vec<OpenAiItem>,
}

#[derive(Deserialize)]
struct OpenAiItem {
    embedding: Vec<f32>,
    index: usize,
}

/// Vector lengths of the well-known OpenAI embedding models (others are probed).
fn known_openai_dim(model: &str) -> Option<usize> {
    match model {
        "text-embedding-3-small" | "text-embedding-ada-002" => Some(1536),
        "text-embedding-3-large" => Some(3072),
        _ => None,
    }
}

impl OpenAiEmbedder {
    /// A client for `base_url` (e.g. `https://api.openai.com/v1`) and `model`. A model
    /// whose vector length is not known is probed with one request.
    pub fn connect(base_url: &str, api_key: &str, model: &str) -> Result<Self, EmbedError> {
        let mut e = OpenAiEmbedder {
            client: client(REQUEST_TIMEOUT)?,
            url: format!("{}/embeddings", base_url.trim_end_matches('/')),
            api_key: api_key.to_string(),
            model: model.to_string(),
            model_id: format!("openai:{model}"),
            dim: known_openai_dim(model).unwrap_or(0),
        };
        if e.dim == 0 {
            let probe = e.request(&["dimension probe"])?;
            e.dim = probe.first().map_or(0, Vec::len);
        }
        Ok(e)
    }

    fn request(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let resp = self
            .client
            .post(&self.url)
            .bearer_auth(&self.api_key)
            .json(&json!({"model": self.model, "input": texts}))
            .send()
            .map_err(|e| http_err("openai", e))?;
        let mut answer: OpenAiAnswer = ok_or_status("openai", resp)?
            .json()
            .map_err(|e| EmbedError::BadResponse(format!("openai: {e}")))?;
        answer.data.sort_by_key(|item| item.index);
        let vectors = answer.data.into_iter().map(|item| item.embedding).collect();
        check_shape(vectors, texts.len(), (self.dim > 0).then_some(self.dim))
    }
}

impl Embedder for OpenAiEmbedder {
    fn model_id(&self) -> &str {
        &self.model_id
    }

    fn dim(&self) -> usize {
        self.dim
    }

    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        if texts.is_empty() {
            return Ok(Vec::new());
        }
        self.request(texts)
    }
}
