//! The compiled-in sentence embedder: `sentence-transformers/all-MiniLM-L6-v2` as fp16
//! weights inside the library, run on the CPU by a hand-written forward pass (`crate::bert`).

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};

use tokenizers::{Tokenizer, TruncationParams};

use crate::bert::{Bert, BertShape};
use crate::error::{ModelLoadError, ModelLoadErrorKind, QueryError, QueryErrorKind};

/// fp16 weights written by the build script, with provenance in the safetensors metadata.
static WEIGHTS: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/model.fp16.safetensors"));
static TOKENIZER: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/tokenizer.json"));
static BERT_CONFIG: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/config.json"));
static PROVENANCE_RECORD: &str = include_str!(concat!(env!("OUT_DIR"), "/provenance.json"));

/// The pinned repository.
pub const MODEL_REPOSITORY: &str = "sentence-transformers/all-MiniLM-L6-v2";
/// The pinned Hub commit.
pub const MODEL_REVISION: &str = "c9745ed1d9f207416be6d2e6f8de32d1f16199bf";
/// SHA-256 of the pinned fp32 `model.safetensors` the embedded weights were converted from.
pub const MODEL_SHA256: &str = "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db";
/// The embedding width.
pub const EMBEDDING_DIM: usize = 384;
/// Longest input in tokens (the model's own `max_seq_length`); longer text is truncated.
pub const MAX_TOKENS: usize = 256;

/// Where the embedded weights came from, as checked at load.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Provenance {
    repository: String,
    revision: String,
    source_sha256: String,
}

impl Provenance {
    /// The Hugging Face repository.
    pub fn repository(&self) -> &str {
        &self.repository
    }

    /// The Hub commit.
    pub fn revision(&self) -> &str {
        &self.revision
    }

    /// SHA-256 of the fp32 checkpoint the fp16 weights were converted from.
    pub fn source_sha256(&self) -> &str {
        &self.source_sha256
    }

    /// The build script's provenance record (JSON: repository, revision, every file's digest).
    pub fn record() -> &'static str {
        PROVENANCE_RECORD
    }
}

/// Checks the embedded weights' metadata against the pinned identity.
pub(crate) fn check_provenance(
    metadata: Option<&HashMap<String, String>>,
) -> Result<Provenance, ModelLoadError> {
    let empty = HashMap::new();
    let metadata = metadata.unwrap_or(&empty);
    let field = |key: &str, expected: &str| -> Result<String, ModelLoadError> {
        match metadata.get(key) {
            Some(found) if found == expected => Ok(found.clone()),
            Some(found) => Err(ModelLoadError::new(
                ModelLoadErrorKind::Provenance,
                format!(
                    "embedded weights are not the pinned checkpoint: {key} is {found:?}, \
                     expected {expected:?}"
                ),
            )),
            None => Err(ModelLoadError::new(
                ModelLoadErrorKind::Provenance,
                format!("embedded weights carry no {key}; expected {expected:?}"),
            )),
        }
    };
    Ok(Provenance {
        repository: field("promptforge.repository", MODEL_REPOSITORY)?,
        revision: field("promptforge.revision", MODEL_REVISION)?,
        source_sha256: field("promptforge.source_sha256", MODEL_SHA256)?,
    })
}

struct Inner {
    bert: Bert,
    tokenizer: Tokenizer,
    provenance: Provenance,
    /// Embeddings already computed by this model, by text (see [`Model::embed`]).
    cache: Mutex<HashMap<String, Arc<[f32]>>>,
}

/// Most texts whose embeddings a model keeps (about 1.5 KB each: 12 MB at most, plus the
/// texts). Once full, new texts are embedded every time and not kept.
pub const EMBEDDING_CACHE_ENTRIES: usize = 8192;

/// Longest text, in bytes, whose embedding is kept; longer ones are embedded every time.
/// (The model reads at most [`MAX_TOKENS`] tokens anyway.)
pub const EMBEDDING_CACHE_TEXT_BYTES: usize = 4096;

/// The loaded embedding model.
///
/// Loading materialises the compiled-in weights (the expensive step); cloning shares them
/// through an `Arc`. `Model` is `Send + Sync + 'static`.
#[derive(Clone)]
pub struct Model {
    inner: Arc<Inner>,
}

impl fmt::Debug for Model {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Model")
            .field("repository", &self.inner.provenance.repository)
            .field("revision", &self.inner.provenance.revision)
            .finish_non_exhaustive()
    }
}

impl Model {
    /// Loads the compiled-in model after checking its provenance metadata.
    pub fn load() -> Result<Self, ModelLoadError> {
        let (_, header) = safetensors::SafeTensors::read_metadata(WEIGHTS).map_err(|e| {
            ModelLoadError::new(
                ModelLoadErrorKind::Weights,
                format!("embedded weights: {e}"),
            )
        })?;
        let provenance = check_provenance(header.metadata().as_ref())?;

        let config: serde_json::Value = serde_json::from_slice(BERT_CONFIG).map_err(|e| {
            ModelLoadError::new(ModelLoadErrorKind::Weights, format!("config.json: {e}"))
        })?;
        let shape = BertShape::from_config(&config)
            .map_err(|e| ModelLoadError::new(ModelLoadErrorKind::Weights, e))?;
        if shape.hidden != EMBEDDING_DIM {
            return Err(ModelLoadError::new(
                ModelLoadErrorKind::Weights,
                format!("hidden_size {}, expected {EMBEDDING_DIM}", shape.hidden),
            ));
        }
        let bert = Bert::load(WEIGHTS, shape)
            .map_err(|e| ModelLoadError::new(ModelLoadErrorKind::Weights, e))?;

        let mut tokenizer = Tokenizer::from_bytes(TOKENIZER)
            .map_err(|e| ModelLoadError::new(ModelLoadErrorKind::Tokenizer, e.to_string()))?;
        // The shipped tokenizer pads every input to 128 tokens; embed one text at a time
        // instead, unpadded, so that a text's vector never depends on its neighbours.
        tokenizer.with_padding(None);
        tokenizer
            .with_truncation(Some(TruncationParams {
                max_length: MAX_TOKENS,
                ..TruncationParams::default()
            }))
            .map_err(|e| ModelLoadError::new(ModelLoadErrorKind::Tokenizer, e.to_string()))?;

        Ok(Self {
            inner: Arc::new(Inner {
                bert,
                tokenizer,
                provenance,
                cache: Mutex::new(HashMap::new()),
            }),
        })
    }

    /// The checked provenance of the embedded weights.
    pub fn provenance(&self) -> &Provenance {
        &self.inner.provenance
    }

    /// Embeds one text: mean pooling over the attention mask, then L2 normalisation.
    ///
    /// The result has [`EMBEDDING_DIM`] components and unit length. The same text always
    /// yields the same bits on the same build and machine. This always runs the forward
    /// pass; the texts a picker indexes go through the model's cache instead (see
    /// [`Model::cached_embeddings`]).
    pub fn embed(&self, text: &str) -> Result<Vec<f32>, QueryError> {
        self.embed_uncached(text)
    }

    /// Embeds a text a picker indexes (a tool's or a model's description), through the
    /// per-text cache kept for the life of the model (shared by its clones and every
    /// picker built from it): a text seen before is not embedded again, so re-indexing a
    /// filtered catalog re-embeds nothing it has seen. The cache holds at most
    /// [`EMBEDDING_CACHE_ENTRIES`] texts of at most [`EMBEDDING_CACHE_TEXT_BYTES`] bytes;
    /// the forward pass never runs under its lock. Cached and fresh vectors are the same
    /// bits.
    pub(crate) fn embed_cached(&self, text: &str) -> Result<Arc<[f32]>, QueryError> {
        let cacheable = text.len() <= EMBEDDING_CACHE_TEXT_BYTES;
        if cacheable && let Some(hit) = self.cache().get(text) {
            return Ok(Arc::clone(hit));
        }
        let vector: Arc<[f32]> = Arc::from(self.embed_uncached(text)?);
        if cacheable {
            let mut cache = self.cache();
            if cache.len() < EMBEDDING_CACHE_ENTRIES {
                cache.insert(text.to_owned(), Arc::clone(&vector));
            }
        }
        Ok(vector)
    }

    /// How many indexed texts' embeddings this model holds in its cache (see
    /// [`EMBEDDING_CACHE_ENTRIES`]).
    pub fn cached_embeddings(&self) -> usize {
        self.cache().len()
    }

    fn cache(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<[f32]>>> {
        self.inner
            .cache
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    fn embed_uncached(&self, text: &str) -> Result<Vec<f32>, QueryError> {
        let encoding = self
            .inner
            .tokenizer
            .encode(text, true)
            .map_err(|e| QueryError::new(QueryErrorKind::Tokenization, e.to_string()))?;
        let pooled = self
            .inner
            .bert
            .embed_pooled(
                encoding.get_ids(),
                encoding.get_type_ids(),
                encoding.get_attention_mask(),
            )
            .map_err(|e| QueryError::new(QueryErrorKind::Inference, e))?;
        normalise(pooled)
    }
}

/// Scales a vector to unit length, refusing one that cannot be.
pub(crate) fn normalise(mut vector: Vec<f32>) -> Result<Vec<f32>, QueryError> {
    if vector.len() != EMBEDDING_DIM {
        return Err(QueryError::new(
            QueryErrorKind::InvalidEmbedding,
            format!("{} components, expected {EMBEDDING_DIM}", vector.len()),
        ));
    }
    let norm = vector.iter().map(|x| x * x).sum::<f32>().sqrt();
    if !norm.is_finite() || norm <= f32::MIN_POSITIVE {
        return Err(QueryError::new(
            QueryErrorKind::InvalidEmbedding,
            format!("the vector's norm is {norm}"),
        ));
    }
    for x in &mut vector {
        *x /= norm;
    }
    Ok(vector)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pinned() -> HashMap<String, String> {
        [
            ("promptforge.repository", MODEL_REPOSITORY),
            ("promptforge.revision", MODEL_REVISION),
            ("promptforge.source_sha256", MODEL_SHA256),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect()
    }

    #[test]
    fn provenance_accepts_the_pinned_identity() {
        let p = check_provenance(Some(&pinned())).unwrap();
        assert_eq!(p.repository(), MODEL_REPOSITORY);
        assert_eq!(p.revision(), MODEL_REVISION);
        assert_eq!(p.source_sha256(), MODEL_SHA256);
    }

    #[test]
    fn provenance_mismatch_fails_loudly() {
        for key in [
            "promptforge.repository",
            "promptforge.revision",
            "promptforge.source_sha256",
        ] {
            let mut tampered = pinned();
            tampered.insert(key.to_owned(), "BAAI/bge-small-en-v1.5".to_owned());
            let error = check_provenance(Some(&tampered)).unwrap_err();
            assert_eq!(error.kind(), ModelLoadErrorKind::Provenance);
            assert!(error.to_string().contains(key), "{error}");

            let mut missing = pinned();
            missing.remove(key);
            let error = check_provenance(Some(&missing)).unwrap_err();
            assert!(error.to_string().contains(key), "{error}");
        }
        assert!(check_provenance(None).is_err());
    }

    #[test]
    fn embedded_weights_carry_the_pinned_provenance() {
        let (_, header) = safetensors::SafeTensors::read_metadata(WEIGHTS).unwrap();
        check_provenance(header.metadata().as_ref()).unwrap();
        assert!(Provenance::record().contains(MODEL_REVISION));
        assert!(Provenance::record().contains(MODEL_SHA256));
    }

    #[test]
    fn normalise_refuses_degenerate_vectors() {
        let zero = normalise(vec![0.0; EMBEDDING_DIM]).unwrap_err();
        assert_eq!(zero.kind(), QueryErrorKind::InvalidEmbedding);
        let mut nan = vec![1.0; EMBEDDING_DIM];
        nan[7] = f32::NAN;
        assert_eq!(
            normalise(nan).unwrap_err().kind(),
            QueryErrorKind::InvalidEmbedding
        );
        assert!(normalise(vec![1.0; 3]).is_err());
        let unit = normalise(vec![2.0; EMBEDDING_DIM]).unwrap();
        let norm: f32 = unit.iter().map(|x| x * x).sum::<f32>().sqrt();
        assert!((norm - 1.0).abs() < 1e-5);
    }
}
