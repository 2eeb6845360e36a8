//! Choosing the embedder: an explicit `CLAWBOO_EMBEDDINGS`, else the first available of
//! MiniLM (its files present), Ollama (answering quickly), OpenAI (`OPENAI_API_KEY` set),
//! and finally the built-in hashed embedder.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use crate::{EmbedError, Embedder, HashedEmbedder};

/// `none|builtin|minilm|ollama|openai`; unset means "the first available".
pub const EMBEDDINGS_ENV: &str = "CLAWBOO_EMBEDDINGS";
/// The folder holding the MiniLM files.
pub const MINILM_DIR_ENV: &str = "CLAWBOO_MINILM_DIR";
/// The Ollama base URL.
pub const OLLAMA_HOST_ENV: &str = "OLLAMA_HOST";
/// The Ollama embedding model.
pub const OLLAMA_MODEL_ENV: &str = "CLAWBOO_OLLAMA_MODEL";
/// The OpenAI API key.
pub const OPENAI_KEY_ENV: &str = "OPENAI_API_KEY";
/// The OpenAI-compatible base URL.
pub const OPENAI_BASE_URL_ENV: &str = "OPENAI_BASE_URL";
/// The OpenAI embedding model.
pub const OPENAI_MODEL_ENV: &str = "CLAWBOO_OPENAI_EMBED_MODEL";

/// The files a MiniLM folder must hold.
pub const MINILM_FILES: [&str; 3] = ["model.safetensors", "tokenizer.json", "config.json"];

/// Whether this build can run MiniLM (the `minilm` feature).
pub const MINILM_BUILT: bool = cfg!(feature = "minilm");

/// What a build without the `minilm` feature tells whoever asks for MiniLM.
pub const MINILM_NOT_BUILT: &str = "this build has no MiniLM support: rebuild with \
     `--features minilm` (`cargo run --release --features minilm -- serve`)";

/// Whether `dir` holds every file MiniLM needs (in any build, so a build without the model
/// can say it is installed but unused).
pub fn minilm_files_present(dir: &Path) -> bool {
    MINILM_FILES.iter().all(|f| dir.join(f).is_file())
}

/// Default Ollama base URL.
pub const DEFAULT_OLLAMA_HOST: &str = "http://localhost:11434";
/// Default Ollama embedding model.
pub const DEFAULT_OLLAMA_MODEL: &str = "nomic-embed-text";
/// Default OpenAI-compatible base URL.
pub const DEFAULT_OPENAI_BASE_URL: &str = "https://api.openai.com/v1";
/// Default OpenAI embedding model.
pub const DEFAULT_OPENAI_MODEL: &str = "text-embedding-3-small";

/// Which embedder an explicit configuration asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Choice {
    /// No embedder: vector and hybrid search fall back to full text.
    None,
    /// The built-in hashed embedder.
    Builtin,
    /// The local all-MiniLM-L6-v2 model.
    MiniLm,
    /// An Ollama server.
    Ollama,
    /// An OpenAI-compatible service.
    OpenAi,
}

impl std::str::FromStr for Choice {
    type Err = EmbedError;

    fn from_str(s: &str) -> Result<Choice, EmbedError> {
        match s.trim().to_ascii_lowercase().as_str() {
            "none" | "off" => Ok(Choice::None),
            "builtin" => Ok(Choice::Builtin),
            "minilm" => Ok(Choice::MiniLm),
            "ollama" => Ok(Choice::Ollama),
            "openai" => Ok(Choice::OpenAi),
            other => Err(EmbedError::Config(format!(
                "{EMBEDDINGS_ENV}={other:?} is not one of none, builtin, minilm, ollama, openai"
            ))),
        }
    }
}

/// Everything the choice depends on (normally read from the environment).
#[derive(Debug, Clone)]
pub struct EmbedConfig {
    /// An explicit choice; `None` means "the first available".
    pub choice: Option<Choice>,
    /// The MiniLM folder.
    pub minilm_dir: PathBuf,
    /// The Ollama base URL.
    pub ollama_host: String,
    /// The Ollama model.
    pub ollama_model: String,
    /// The OpenAI API key, when set.
    pub openai_api_key: Option<String>,
    /// The OpenAI-compatible base URL.
    pub openai_base_url: String,
    /// The OpenAI model.
    pub openai_model: String,
    /// How long the automatic choice waits for Ollama to answer.
    pub ollama_probe_timeout: Duration,
}

impl EmbedConfig {
    /// Read the configuration from the process environment.
    pub fn from_env() -> Result<EmbedConfig, EmbedError> {
        EmbedConfig::from_lookup(|name| std::env::var(name).ok())
    }

    /// Read the configuration through `lookup` (a variable's value, or `None` when unset
    /// or empty).
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Self, EmbedError> {
        let get = |name: &str| lookup(name).filter(|v| !v.trim().is_empty());
        let choice = get(EMBEDDINGS_ENV).map(|v| v.parse()).transpose()?;
        let minilm_dir = match get(MINILM_DIR_ENV) {
            Some(dir) => PathBuf::from(dir),
            None => default_minilm_dir(get("HOME")),
        };
        Ok(EmbedConfig {
            choice,
            minilm_dir,
            ollama_host: get(OLLAMA_HOST_ENV)
                .map(|h| normalize_ollama_host(&h))
                .unwrap_or_else(|| DEFAULT_OLLAMA_HOST.to_string()),
            ollama_model: get(OLLAMA_MODEL_ENV).unwrap_or_else(|| DEFAULT_OLLAMA_MODEL.into()),
            openai_api_key: get(OPENAI_KEY_ENV),
            openai_base_url: get(OPENAI_BASE_URL_ENV)
                .unwrap_or_else(|| DEFAULT_OPENAI_BASE_URL.into()),
            openai_model: get(OPENAI_MODEL_ENV).unwrap_or_else(|| DEFAULT_OPENAI_MODEL.into()),
            ollama_probe_timeout: Duration::from_millis(300),
        })
    }
}

/// `~/.clawboo/models/all-MiniLM-L6-v2` (relative to the working directory without HOME).
fn default_minilm_dir(home: Option<String>) -> PathBuf {
    let base = home.map(PathBuf::from).unwrap_or_default();
    base.join(".clawboo")
        .join("models")
        .join("all-MiniLM-L6-v2")
}

/// Ollama's own `OLLAMA_HOST` may be `host:port` without a scheme.
fn normalize_ollama_host(host: &str) -> String {
    let host = host.trim().trim_end_matches('/');
    if host.starts_with("http://") || host.starts_with("https://") {
        host.to_string()
    } else {
        format!("http://{host}")
    }
}

/// The embedder `config` selects; `Ok(None)` when it selects none. An explicit choice
/// that cannot be honoured is an error; the automatic order skips what is unavailable.
pub fn select(config: &EmbedConfig) -> Result<Option<Arc<dyn Embedder>>, EmbedError> {
    match config.choice {
        Some(Choice::None) => Ok(None),
        Some(Choice::Builtin) => Ok(Some(Arc::new(HashedEmbedder::default()))),
        Some(Choice::MiniLm) => minilm(config).map(Some),
        Some(Choice::Ollama) => ollama(config).map(Some),
        Some(Choice::OpenAi) => openai(config).map(Some),
        None => Ok(Some(automatic(config))),
    }
}

fn automatic(config: &EmbedConfig) -> Arc<dyn Embedder> {
    if minilm_files_present(&config.minilm_dir) {
        if !MINILM_BUILT {
            tracing::warn!("MiniLM's files are installed, but {MINILM_NOT_BUILT}");
        } else {
            match minilm(config) {
                Ok(e) => return e,
                Err(e) => tracing::warn!(error = %e, "MiniLM files present but unusable"),
            }
        }
    }
    if cfg!(feature = "remote") && ollama_reachable(config) {
        match ollama(config) {
            Ok(e) => return e,
            Err(e) => tracing::warn!(error = %e, "Ollama answered but cannot embed"),
        }
    }
    if cfg!(feature = "remote") && config.openai_api_key.is_some() {
        match openai(config) {
            Ok(e) => return e,
            Err(e) => tracing::warn!(error = %e, "OpenAI embeddings unusable"),
        }
    }
    Arc::new(HashedEmbedder::default())
}

#[cfg(feature = "minilm")]
fn minilm(config: &EmbedConfig) -> Result<Arc<dyn Embedder>, EmbedError> {
    Ok(Arc::new(crate::MiniLmEmbedder::open(&config.minilm_dir)?))
}

#[cfg(not(feature = "minilm"))]
fn minilm(_config: &EmbedConfig) -> Result<Arc<dyn Embedder>, EmbedError> {
    Err(EmbedError::Config(MINILM_NOT_BUILT.into()))
}

#[cfg(feature = "remote")]
fn ollama_reachable(config: &EmbedConfig) -> bool {
    crate::OllamaEmbedder::is_reachable(&config.ollama_host, config.ollama_probe_timeout)
}

#[cfg(not(feature = "remote"))]
fn ollama_reachable(_config: &EmbedConfig) -> bool {
    false
}

#[cfg(feature = "remote")]
fn ollama(config: &EmbedConfig) -> Result<Arc<dyn Embedder>, EmbedError> {
    Ok(Arc::new(crate::OllamaEmbedder::connect(
        &config.ollama_host,
        &config.ollama_model,
    )?))
}

#[cfg(feature = "remote")]
fn openai(config: &EmbedConfig) -> Result<Arc<dyn Embedder>, EmbedError> {
    let key = config.openai_api_key.as_deref().ok_or_else(|| {
        EmbedError::Config(format!("{OPENAI_KEY_ENV} is not set; set it to use OpenAI"))
    })?;
    Ok(Arc::new(crate::OpenAiEmbedder::connect(
        &config.openai_base_url,
        key,
        &config.openai_model,
    )?))
}

#[cfg(not(feature = "remote"))]
fn ollama(_config: &EmbedConfig) -> Result<Arc<dyn Embedder>, EmbedError> {
    Err(EmbedError::Config(
        "this build has no HTTP embedders (feature `remote`)".into(),
    ))
}

#[cfg(not(feature = "remote"))]
fn openai(config: &EmbedConfig) -> Result<Arc<dyn Embedder>, EmbedError> {
    ollama(config)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use std::collections::HashMap;

    fn config(vars: &[(&str, &str)]) -> Result<EmbedConfig, EmbedError> {
        let map: HashMap<String, String> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        EmbedConfig::from_lookup(|name| map.get(name).cloned())
    }

    #[test]
    fn defaults_and_overrides_are_read() {
        let c = config(&[("HOME", "/home/u")]).unwrap();
        assert_eq!(c.choice, None);
        assert_eq!(
            c.minilm_dir,
            PathBuf::from("/home/u/.clawboo/models/all-MiniLM-L6-v2")
        );
        assert_eq!(c.ollama_host, DEFAULT_OLLAMA_HOST);
        assert_eq!(c.openai_model, DEFAULT_OPENAI_MODEL);
        let c = config(&[
            (EMBEDDINGS_ENV, "Builtin"),
            (OLLAMA_HOST_ENV, "0.0.0.0:9999"),
            (MINILM_DIR_ENV, "/m"),
        ])
        .unwrap();
        assert_eq!(c.choice, Some(Choice::Builtin));
        assert_eq!(c.ollama_host, "http://0.0.0.0:9999");
        assert_eq!(c.minilm_dir, PathBuf::from("/m"));
    }

    #[test]
    fn unknown_choice_is_a_clear_error() {
        let err = config(&[(EMBEDDINGS_ENV, "bert")]).unwrap_err();
        assert!(err.to_string().contains("none, builtin, minilm"), "{err}");
    }

    #[test]
    fn explicit_none_and_builtin_are_honoured() {
        assert!(
            select(&config(&[(EMBEDDINGS_ENV, "none")]).unwrap())
                .unwrap()
                .is_none()
        );
        let e = select(&config(&[(EMBEDDINGS_ENV, "builtin")]).unwrap())
            .unwrap()
            .unwrap();
        assert!(!e.is_semantic());
    }

    #[test]
    fn explicit_minilm_without_files_says_how_to_install() {
        let dir = tempfile::tempdir().unwrap();
        let c = config(&[
            (EMBEDDINGS_ENV, "minilm"),
            (MINILM_DIR_ENV, dir.path().to_str().unwrap()),
        ])
        .unwrap();
        let err = select(&c).err().unwrap();
        assert!(err.to_string().contains("install-minilm"), "{err}");
    }

    #[test]
    fn automatic_choice_with_nothing_available_is_builtin() {
        let dir = tempfile::tempdir().unwrap();
        let mut c = config(&[(MINILM_DIR_ENV, dir.path().to_str().unwrap())]).unwrap();
        // A port nothing listens on: bind one, learn it, close it.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        c.ollama_host = format!("http://127.0.0.1:{port}");
        let e = select(&c).unwrap().unwrap();
        assert_eq!(e.model_id(), HashedEmbedder::default().model_id());
    }
}
