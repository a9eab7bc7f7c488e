//! Embedding models behind one call, [`Embeddings::embed`]: texts in, one
//! vector per text out, in order.
//!
//! - OpenAI-compatible servers (`openAIEmbeddings`, `azureOpenAIEmbeddings`,
//!   `localAIEmbeddings`): `POST {base}/embeddings`, in batches of the node's
//!   `batchSize`.
//! - Ollama (`ollamaEmbedding`): `POST {base}/api/embed`.
//! - The embedded all-MiniLM-L6-v2 ([`local`], `localEmbeddings`): no key, no
//!   network; loaded once on first use and run on the blocking pool, one batch
//!   at a time (each batch already uses every core).
//!
//! A provider's 429 or 5xx is retried with backoff (three tries in all); any
//! other failure is an [`LlmError`] whose message says what to fix.

pub mod local;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::{OnceCell, Semaphore};

use crate::llm::LlmError;
use crate::llm::http::root_cause;
use crate::llm::openai::Auth;

/// Where `localEmbeddings`' files are, inside the models dir.
pub const MINILM_DIR: &str = "all-minilm-l6-v2";

/// Texts the embedded model embeds per turn.
const LOCAL_SLICE: usize = 128;

/// Tries of one provider call (the first and two retries).
const TRIES: u32 = 3;

/// Which embedding model a node uses, with its endpoint and key.
#[derive(Debug, Clone, PartialEq)]
pub enum EmbeddingsSpec {
    OpenAi {
        /// Up to and including the version segment (Azure: the deployment).
        base: String,
        auth: Auth,
        model: String,
        dimensions: Option<u32>,
        batch_size: usize,
        strip_newlines: bool,
        /// Who this is in error messages.
        label: &'static str,
    },
    Ollama {
        base: String,
        model: String,
        batch_size: usize,
    },
    /// Gemini's `batchEmbedContents`.
    Gemini {
        base: String,
        api_key: Option<String>,
        model: String,
        /// What the vectors are for (`RETRIEVAL_DOCUMENT`…), when the node says.
        task_type: Option<String>,
        dimensions: Option<u32>,
        batch_size: usize,
    },
    Local,
}

impl EmbeddingsSpec {
    /// What makes two vectors comparable: the server (an Azure deployment, a
    /// self-hosted model), the model and its dimensions. Part of each chunk's
    /// hash, so that switching models re-embeds.
    pub fn fingerprint(&self) -> String {
        match self {
            EmbeddingsSpec::OpenAi {
                base,
                model,
                dimensions,
                label,
                ..
            } => format!("{label}:{base}:{model}:{}", dimensions.unwrap_or(0)),
            EmbeddingsSpec::Ollama { base, model, .. } => format!("ollama:{base}:{model}"),
            EmbeddingsSpec::Gemini {
                base,
                model,
                dimensions,
                ..
            } => format!("gemini:{base}:{model}:{}", dimensions.unwrap_or(0)),
            EmbeddingsSpec::Local => "local:all-MiniLM-L6-v2".to_owned(),
        }
    }
}

/// The models every run and upsert embeds with: the shared HTTP client and the
/// embedded model.
#[derive(Clone)]
pub struct Embeddings {
    http: reqwest::Client,
    local: Arc<LocalModel>,
}

impl Embeddings {
    pub fn new(http: reqwest::Client, models_dir: PathBuf) -> Self {
        Embeddings {
            http,
            local: Arc::new(LocalModel {
                dir: models_dir.join(MINILM_DIR),
                model: OnceCell::new(),
                turns: Semaphore::new(1),
            }),
        }
    }

    /// One vector per text, in order.
    pub async fn embed(
        &self,
        spec: &EmbeddingsSpec,
        texts: &[String],
    ) -> Result<Vec<Vec<f32>>, LlmError> {
        if texts.is_empty() {
            return Ok(Vec::new());
        }
        let mut out = Vec::with_capacity(texts.len());
        match spec {
            EmbeddingsSpec::OpenAi {
                base,
                auth,
                model,
                dimensions,
                batch_size,
                strip_newlines,
                label,
            } => {
                for batch in texts.chunks((*batch_size).max(1)) {
                    let input: Vec<String> = if *strip_newlines {
                        batch.iter().map(|t| t.replace('\n', " ")).collect()
                    } else {
                        batch.to_vec()
                    };
                    let mut body = json!({"model": model, "input": input});
                    if let Some(d) = dimensions {
                        body["dimensions"] = json!(d);
                    }
                    let (url, key_header) = match auth {
                        Auth::Bearer(key) => (
                            format!("{base}/embeddings"),
                            key.as_ref()
                                .map(|k| ("authorization", format!("Bearer {k}"))),
                        ),
                        Auth::Azure { key, version } => (
                            format!("{base}/embeddings?api-version={version}"),
                            key.as_ref().map(|k| ("api-key", k.clone())),
                        ),
                    };
                    let answer = self.post(label, &url, key_header, &body).await?;
                    out.extend(openai_vectors(label, &answer, batch.len())?);
                }
            }
            EmbeddingsSpec::Ollama {
                base,
                model,
                batch_size,
            } => {
                for batch in texts.chunks((*batch_size).max(1)) {
                    let body = json!({"model": model, "input": batch});
                    let url = format!("{base}/api/embed");
                    let answer = self.post("Ollama", &url, None, &body).await?;
                    out.extend(ollama_vectors(&answer, batch.len())?);
                }
            }
            EmbeddingsSpec::Gemini {
                base,
                api_key,
                model,
                task_type,
                dimensions,
                batch_size,
            } => {
                let url = format!("{base}/v1beta/models/{model}:batchEmbedContents");
                let key = api_key.as_ref().map(|k| ("x-goog-api-key", k.clone()));
                for batch in texts.chunks((*batch_size).max(1)) {
                    let requests: Vec<Value> = batch
                        .iter()
                        .map(|text| {
                            let mut one = json!({"model": format!("models/{model}"),
                                                 "content": {"parts": [{"text": text}]}});
                            if let Some(task) = task_type {
                                one["taskType"] = json!(task);
                            }
                            if let Some(d) = dimensions {
                                one["outputDimensionality"] = json!(d);
                            }
                            one
                        })
                        .collect();
                    let body = json!({ "requests": requests });
                    let answer = self.post(GEMINI, &url, key.clone(), &body).await?;
                    out.extend(gemini_vectors(&answer, batch.len())?);
                }
            }
            EmbeddingsSpec::Local => {
                let model = self.local.get().await?;
                // In slices, each taking its turn: a large upsert does not hold
                // the model while questions wait, and a caller that went away
                // stops after the current slice.
                for slice in texts.chunks(LOCAL_SLICE) {
                    let turn = self.local.turns.acquire().await.map_err(|_| {
                        LlmError::new("the embedded embedding model is shutting down")
                    })?;
                    let (model, slice) = (Arc::clone(&model), slice.to_vec());
                    let vectors = tokio::task::spawn_blocking(move || {
                        let refs: Vec<&str> = slice.iter().map(String::as_str).collect();
                        model.embed(&refs)
                    })
                    .await
                    .map_err(|e| LlmError::new(format!("the embedding task failed: {e}")))?
                    .map_err(LlmError::new)?;
                    drop(turn);
                    out.extend(vectors);
                }
            }
        }
        Ok(out)
    }

    /// POSTs JSON, retrying 429s, 5xx and connection failures with backoff.
    async fn post(
        &self,
        provider: &str,
        url: &str,
        key: Option<(&'static str, String)>,
        body: &Value,
    ) -> Result<Value, LlmError> {
        let endpoint = url.split('?').next().unwrap_or(url);
        let mut last = LlmError::new(format!("cannot reach {provider} at {endpoint}"));
        for attempt in 0..TRIES {
            if attempt > 0 {
                tokio::time::sleep(Duration::from_millis(250 << (attempt - 1))).await;
            }
            let mut request = self.http.post(url).json(body);
            if let Some((name, value)) = &key {
                request = request.header(*name, value);
            }
            let started = std::time::Instant::now();
            let sent = request.send().await;
            crate::metrics::metrics().provider_call(
                provider,
                sent.as_ref().is_ok_and(|r| r.status().is_success()),
                started.elapsed(),
            );
            let response = match sent {
                Ok(r) => r,
                Err(e) => {
                    last = LlmError::new(format!(
                        "cannot reach {provider} at {endpoint}: {}",
                        root_cause(&e)
                    ));
                    continue;
                }
            };
            let status = response.status();
            if status.is_success() {
                return response.json().await.map_err(|e| {
                    LlmError::new(format!("{provider} sent an answer that is not JSON: {e}"))
                });
            }
            let text = response.text().await.unwrap_or_default();
            let detail: String = text.trim().chars().take(300).collect();
            let retry = status.as_u16() == 429 || status.is_server_error();
            last = LlmError::new(match status.as_u16() {
                401 | 403 => format!(
                    "{provider} rejected the API key configured for it (HTTP {})",
                    status.as_u16()
                ),
                429 => format!("{provider} is rate limiting or out of quota (HTTP 429): {detail}"),
                s => format!("{provider} failed to embed (HTTP {s}): {detail}"),
            });
            if !retry {
                break;
            }
        }
        Err(last)
    }
}

/// `{"data": [{"embedding": [...], "index": i}]}`, put back in input order.
fn openai_vectors(provider: &str, answer: &Value, n: usize) -> Result<Vec<Vec<f32>>, LlmError> {
    let bad = || LlmError::new(format!("{provider} sent embeddings weir cannot read"));
    let data = answer
        .get("data")
        .and_then(Value::as_array)
        .ok_or_else(bad)?;
    let mut out = vec![Vec::new(); n];
    for (position, item) in data.iter().enumerate() {
        let index = item
            .get("index")
            .and_then(Value::as_u64)
            .map_or(position, |i| i as usize);
        let slot = out.get_mut(index).ok_or_else(bad)?;
        *slot = vector(item.get("embedding")).ok_or_else(bad)?;
    }
    if out.iter().any(Vec::is_empty) {
        return Err(LlmError::new(format!(
            "{provider} sent fewer embeddings than texts"
        )));
    }
    Ok(out)
}

/// `{"embeddings": [[...], ...]}`
/// Who Gemini's embeddings are, in error messages.
const GEMINI: &str = "Google Gemini";

/// `{"embeddings": [{"values": [...]}]}`, one per text in order.
fn gemini_vectors(answer: &Value, n: usize) -> Result<Vec<Vec<f32>>, LlmError> {
    let vectors: Option<Vec<Vec<f32>>> = answer
        .get("embeddings")
        .and_then(Value::as_array)
        .map(|items| items.iter().map(|i| vector(i.get("values"))).collect())
        .unwrap_or(None);
    match vectors {
        Some(v) if v.len() == n => Ok(v),
        _ => Err(LlmError::new(format!(
            "{GEMINI} answered without {n} embeddings"
        ))),
    }
}

fn ollama_vectors(answer: &Value, n: usize) -> Result<Vec<Vec<f32>>, LlmError> {
    let bad = || LlmError::new("Ollama sent embeddings weir cannot read");
    let out = answer
        .get("embeddings")
        .and_then(Value::as_array)
        .ok_or_else(bad)?
        .iter()
        .map(|v| vector(Some(v)).ok_or_else(bad))
        .collect::<Result<Vec<_>, _>>()?;
    if out.len() != n {
        return Err(LlmError::new("Ollama sent fewer embeddings than texts"));
    }
    Ok(out)
}

fn vector(value: Option<&Value>) -> Option<Vec<f32>> {
    let items = value?.as_array()?;
    if items.is_empty() {
        return None;
    }
    items.iter().map(|x| x.as_f64().map(|f| f as f32)).collect()
}

/// The embedded model, loaded on first use (a failed load is retried next time).
struct LocalModel {
    dir: PathBuf,
    model: OnceCell<Arc<local::LocalEmbedder>>,
    turns: Semaphore,
}

impl LocalModel {
    async fn get(&self) -> Result<Arc<local::LocalEmbedder>, LlmError> {
        self.model
            .get_or_try_init(|| async {
                let dir = self.dir.clone();
                let model = tokio::task::spawn_blocking(move || local::LocalEmbedder::load(&dir))
                    .await
                    .map_err(|e| LlmError::new(format!("loading the embedding model failed: {e}")))?
                    .map_err(|e| {
                        LlmError::new(format!(
                            "the embedded embedding model is not available ({e}); run scripts/fetch-models"
                        ))
                    })?;
                tracing::info!(path = %self.dir.display(), "embedded embedding model loaded");
                Ok(Arc::new(model))
            })
            .await
            .cloned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn openai_vectors_follow_their_index() {
        let answer = json!({"data": [
            {"index": 1, "embedding": [0.0, 1.0]},
            {"index": 0, "embedding": [1.0, 0.0]},
        ]});
        let v = openai_vectors("x", &answer, 2).unwrap_or_default();
        assert_eq!(v, vec![vec![1.0, 0.0], vec![0.0, 1.0]]);
        assert!(openai_vectors("x", &json!({"data": []}), 1).is_err());
        assert!(
            openai_vectors("x", &json!({"data": [{"index": 5, "embedding": [1.0]}]}), 1).is_err()
        );
    }

    #[test]
    fn ollama_vectors_count_must_match() {
        assert!(ollama_vectors(&json!({"embeddings": [[1.0]]}), 2).is_err());
        assert_eq!(
            ollama_vectors(&json!({"embeddings": [[1.0], [2.0]]}), 2).unwrap_or_default(),
            vec![vec![1.0], vec![2.0]]
        );
    }
}
