//! all-MiniLM-L6-v2 run in-process with candle: BERT, mean pooling over the attention
//! mask, L2 normalisation (what sentence-transformers does for this model). Loaded from a
//! folder holding `model.safetensors`, `tokenizer.json` and `config.json`.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use candle_core::{DType, Device, Tensor};
use candle_nn::VarBuilder;
use candle_transformers::models::bert::{BertModel, Config};
use tokenizers::{PaddingParams, PaddingStrategy, Tokenizer, TruncationParams};

use crate::select::{MINILM_FILES, minilm_files_present};
use crate::{EmbedError, Embedder, l2_normalize};

/// The model id MiniLM vectors are stored under.
pub const MINILM_MODEL_ID: &str = "all-MiniLM-L6-v2";
/// Longest input in word pieces; longer texts are truncated (the model's own limit).
const MAX_TOKENS: usize = 256;
/// Texts embedded per forward pass.
const BATCH: usize = 16;

/// The all-MiniLM-L6-v2 sentence embedder. [`MiniLmEmbedder::open`] reads only the config
/// (so a server starts at once); the weights load on the first embedding.
pub struct MiniLmEmbedder {
    dir: PathBuf,
    dim: usize,
    loaded: OnceLock<Result<Loaded, String>>,
}

/// The model in memory.
struct Loaded {
    model: BertModel,
    tokenizer: Tokenizer,
    device: Device,
}

impl std::fmt::Debug for MiniLmEmbedder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MiniLmEmbedder")
            .field("dir", &self.dir)
            .field("dim", &self.dim)
            .finish_non_exhaustive()
    }
}

fn model_err(e: impl std::fmt::Display) -> EmbedError {
    EmbedError::Model(e.to_string())
}

fn read(path: &Path) -> Result<Vec<u8>, EmbedError> {
    std::fs::read(path).map_err(|source| EmbedError::Io {
        path: path.display().to_string(),
        source,
    })
}

impl MiniLmEmbedder {
    /// Check the files in `dir` and read the config; the weights load on first use.
    pub fn open(dir: &Path) -> Result<MiniLmEmbedder, EmbedError> {
        if !minilm_files_present(dir) {
            return Err(EmbedError::Config(format!(
                "MiniLM files ({}) are missing from {}; run scripts/install-minilm.sh or `clawboo models install`",
                MINILM_FILES.join(", "),
                dir.display()
            )));
        }
        let raw: serde_json::Value = serde_json::from_slice(&read(&dir.join("config.json"))?)
            .map_err(|e| EmbedError::Model(format!("config.json: {e}")))?;
        let dim = raw
            .get("hidden_size")
            .and_then(serde_json::Value::as_u64)
            .ok_or_else(|| EmbedError::Model("config.json has no hidden_size".into()))?
            as usize;
        Ok(MiniLmEmbedder {
            dir: dir.to_path_buf(),
            dim,
            loaded: OnceLock::new(),
        })
    }

    /// Open the model in `dir` and load its weights now (CPU).
    pub fn load(dir: &Path) -> Result<MiniLmEmbedder, EmbedError> {
        let e = MiniLmEmbedder::open(dir)?;
        e.loaded()?;
        Ok(e)
    }

    /// The loaded model, loading it on first use (a failure is remembered).
    fn loaded(&self) -> Result<&Loaded, EmbedError> {
        self.loaded
            .get_or_init(|| Loaded::load(&self.dir).map_err(|e| e.to_string()))
            .as_ref()
            .map_err(|message| EmbedError::Model(message.clone()))
    }
}

impl Loaded {
    fn load(dir: &Path) -> Result<Loaded, EmbedError> {
        let config: Config = serde_json::from_slice(&read(&dir.join("config.json"))?)
            .map_err(|e| EmbedError::Model(format!("config.json: {e}")))?;
        let mut tokenizer = Tokenizer::from_bytes(read(&dir.join("tokenizer.json"))?)
            .map_err(|e| EmbedError::Model(format!("tokenizer.json: {e}")))?;
        tokenizer.with_padding(Some(PaddingParams {
            strategy: PaddingStrategy::BatchLongest,
            ..PaddingParams::default()
        }));
        tokenizer
            .with_truncation(Some(TruncationParams {
                max_length: MAX_TOKENS,
                ..TruncationParams::default()
            }))
            .map_err(|e| EmbedError::Model(format!("tokenizer truncation: {e}")))?;
        let device = Device::Cpu;
        let weights = read(&dir.join("model.safetensors"))?;
        let vb = VarBuilder::from_buffered_safetensors(weights, DType::F32, &device)
            .map_err(model_err)?;
        let model = BertModel::load(vb, &config).map_err(model_err)?;
        Ok(Loaded {
            model,
            tokenizer,
            device,
        })
    }

    fn embed_batch(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let encodings = self
            .tokenizer
            .encode_batch(texts.to_vec(), true)
            .map_err(|e| EmbedError::Model(format!("tokenize: {e}")))?;
        let ids = encodings
            .iter()
            .map(|e| Tensor::new(e.get_ids(), &self.device))
            .collect::<Result<Vec<_>, _>>()
            .map_err(model_err)?;
        let masks = encodings
            .iter()
            .map(|e| Tensor::new(e.get_attention_mask(), &self.device))
            .collect::<Result<Vec<_>, _>>()
            .map_err(model_err)?;
        let ids = Tensor::stack(&ids, 0).map_err(model_err)?;
        let mask = Tensor::stack(&masks, 0).map_err(model_err)?;
        let type_ids = ids.zeros_like().map_err(model_err)?;
        let hidden = self
            .model
            .forward(&ids, &type_ids, Some(&mask))
            .map_err(model_err)?;
        let pooled = mean_pool(&hidden, &mask).map_err(model_err)?;
        let mut rows: Vec<Vec<f32>> = pooled.to_vec2().map_err(model_err)?;
        rows.iter_mut().for_each(|r| l2_normalize(r));
        Ok(rows)
    }
}

/// Average the token vectors of each row, counting only real (unpadded) tokens.
fn mean_pool(hidden: &Tensor, mask: &Tensor) -> candle_core::Result<Tensor> {
    let mask = mask.to_dtype(DType::F32)?.unsqueeze(2)?;
    let summed = hidden.broadcast_mul(&mask)?.sum(1)?;
    let counts = mask.sum(1)?.clamp(1e-9f32, f32::MAX)?;
    summed.broadcast_div(&counts)
}

impl Embedder for MiniLmEmbedder {
    fn model_id(&self) -> &str {
        MINILM_MODEL_ID
    }

    fn dim(&self) -> usize {
        self.dim
    }

    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let loaded = self.loaded()?;
        let mut out = Vec::with_capacity(texts.len());
        for chunk in texts.chunks(BATCH) {
            out.extend(loaded.embed_batch(chunk)?);
        }
        Ok(out)
    }
}
