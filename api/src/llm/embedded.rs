//! The embedded default model (SmolLM2-135M-Instruct, [`super::local`]) as a
//! [`ChatModel`]: loaded once, on first use, from `$WEIR_DATA_DIR/models/smollm2`,
//! shared by every request, and run on the blocking pool so async threads never
//! compute.
//!
//! Generations are queued rather than run all at once: each already uses every
//! core it is given, so running more at a time than the machine has cores for
//! only makes all of them slower.

use std::path::PathBuf;
use std::sync::Arc;

use async_trait::async_trait;
use futures_util::StreamExt;
use tokio::sync::{OnceCell, Semaphore, mpsc};

use super::connect::LocalModels;
use super::local::LocalModel;
use super::{ChatModel, ChatRequest, Delta, DeltaStream, LlmError, Usage};

/// The directory `scripts/fetch-models` fills, inside the models dir.
pub const SMOLLM2_DIR: &str = "smollm2";

pub struct Embedded {
    models_dir: PathBuf,
    model: OnceCell<Arc<LocalChat>>,
}

impl Embedded {
    pub fn new(models_dir: PathBuf) -> Self {
        Embedded {
            models_dir,
            model: OnceCell::new(),
        }
    }
}

#[async_trait]
impl LocalModels for Embedded {
    async fn chat(&self) -> Result<Arc<dyn ChatModel>, LlmError> {
        // A failed load is not cached: fetching the model later makes it work.
        let chat = self
            .model
            .get_or_try_init(|| async {
                let dir = self.models_dir.join(SMOLLM2_DIR);
                let model = tokio::task::spawn_blocking(move || LocalModel::load(&dir))
                    .await
                    .map_err(|e| LlmError::new(format!("loading the local model failed: {e}")))??;
                let cores = std::thread::available_parallelism().map_or(1, usize::from);
                let at_once = (cores / model.threads().max(1)).max(1);
                tracing::info!(
                    path = %model.path().display(),
                    kernels = model.kernels(),
                    threads = model.threads(),
                    at_once,
                    "embedded model loaded"
                );
                Ok::<_, LlmError>(Arc::new(LocalChat {
                    model: Arc::new(model),
                    turns: Arc::new(Semaphore::new(at_once)),
                }))
            })
            .await?;
        Ok(Arc::clone(chat) as Arc<dyn ChatModel>)
    }
}

struct LocalChat {
    model: Arc<LocalModel>,
    /// Generations allowed to run at once; the others wait their turn.
    turns: Arc<Semaphore>,
}

/// Pieces buffered between the generating thread and the answer.
const PIECE_BUFFER: usize = 64;

#[async_trait]
impl ChatModel for LocalChat {
    async fn stream(&self, request: ChatRequest) -> Result<DeltaStream, LlmError> {
        if !request.tools.is_empty() {
            return Err(LlmError::new(
                "the embedded local model cannot call tools; use a provider model for agents",
            ));
        }
        let turn = Arc::clone(&self.turns)
            .acquire_owned()
            .await
            .map_err(|_| LlmError::new("the local model is shutting down"))?;
        let (tx, rx) = mpsc::channel::<Result<Delta, LlmError>>(PIECE_BUFFER);
        let model = Arc::clone(&self.model);
        let ChatRequest {
            messages, params, ..
        } = request;
        tokio::task::spawn_blocking(move || {
            let _turn = turn;
            let mut on_token =
                |piece: &str| tx.blocking_send(Ok(Delta::Text(piece.to_owned()))).is_ok();
            match model.generate(&messages, &params, &mut on_token) {
                // The embedded model counts its own tokens.
                Ok(stats) => {
                    let _ = tx.blocking_send(Ok(Delta::Usage(Usage {
                        input_tokens: stats.prompt_tokens as u64,
                        output_tokens: stats.generated_tokens as u64,
                    })));
                }
                Err(e) => {
                    let _ = tx.blocking_send(Err(LlmError::new(format!("local model: {e}"))));
                }
            }
        });
        Ok(futures_util::stream::unfold(rx, |mut rx| async move {
            rx.recv().await.map(|item| (item, rx))
        })
        .boxed())
    }

    fn calls_tools(&self) -> bool {
        false
    }
}
