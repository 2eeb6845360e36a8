//! Text embedders for Clawboo's shared memory.
//!
//! One trait, [`Embedder`], and four implementations:
//! - [`HashedEmbedder`]: pure Rust, no file, no network; word and character n-grams with
//!   signed hashing. Lexical only (it finds shared words and word pieces, not meaning).
//! - `MiniLmEmbedder` (feature `minilm`): the all-MiniLM-L6-v2 sentence model run
//!   in-process and offline with candle, loaded from a folder (see [`select::MINILM_DIR_ENV`]).
//! - `OllamaEmbedder` and `OpenAiEmbedder` (feature `remote`): HTTP clients.
//!
//! [`select::select`] picks one from an [`select::EmbedConfig`] (usually read from the
//! environment with [`select::EmbedConfig::from_env`]) in the order SPEC §4 gives.
//! Every call is blocking; async callers run it on a blocking thread.

mod hashed;
#[cfg(feature = "minilm")]
mod minilm;
#[cfg(feature = "remote")]
mod remote;
pub mod select;

pub use hashed::HashedEmbedder;
#[cfg(feature = "minilm")]
pub use minilm::MiniLmEmbedder;
#[cfg(feature = "remote")]
pub use remote::{OllamaEmbedder, OpenAiEmbedder};

/// Why an embedding could not be made.
#[derive(Debug, thiserror::Error)]
pub enum EmbedError {
    /// A model file could not be read.
    #[error("cannot read model file {path}: {source}")]
    Io {
        /// The file that failed.
        path: String,
        /// The underlying error.
        source: std::io::Error,
    },
    /// The model files are present but unusable, or inference failed.
    #[error("embedding model error: {0}")]
    Model(String),
    /// The embedding service could not be reached or answered with an error.
    #[error("embedding service error: {0}")]
    Http(String),
    /// The embedding service answered with something that is not a list of vectors.
    #[error("embedding service sent an unexpected answer: {0}")]
    BadResponse(String),
    /// The configuration names something unusable (the text says what to set).
    #[error("embeddings are misconfigured: {0}")]
    Config(String),
}

/// Turns texts into fixed-length vectors. Vectors made by different models (or the same
/// model at a different dimension) are not comparable; [`Embedder::model_id`] names the
/// model so stored vectors can be matched to the embedder that made them.
pub trait Embedder: Send + Sync {
    /// A stable id of the model (and its settings) that makes the vectors.
    fn model_id(&self) -> &str;
    /// The length of every vector this embedder returns.
    fn dim(&self) -> usize;
    /// Embed each text; the answer has one L2-normalised vector per input, in order.
    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError>;
    /// Whether the vectors capture meaning (a sentence model) rather than shared words:
    /// a semantic embedder makes hybrid search the default.
    fn is_semantic(&self) -> bool {
        true
    }
    /// Whether one embedding costs microseconds (no model, no network), so it may run on an
    /// async thread instead of the blocking pool.
    fn is_cheap(&self) -> bool {
        false
    }
}

/// Scale `v` to unit length in place (a zero vector stays zero).
pub fn l2_normalize(v: &mut [f32]) {
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    if norm > 0.0 {
        v.iter_mut().for_each(|x| *x /= norm);
    }
}

/// The cosine similarity of two unit vectors (their dot product).
pub fn dot(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}
