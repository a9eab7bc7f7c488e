//! Runs a chatflow for another's `executeFlowAgentflow` node: the engine's
//! [`FlowCaller`], over the same prediction path a client's request takes (the
//! called flow's own override rules, memory on the caller's chat, its messages
//! stored), one level deeper each time, refused past `AGENTFLOW_MAX_FLOW_DEPTH`.

use uuid::Uuid;

use futures_util::future::BoxFuture;

use super::answer::Prediction;
use super::request::PredictionRequest;
use crate::domain::Chatflow;
use crate::flow::runtime::nested::{FlowAnswer, FlowCall, FlowCaller};
use crate::retrieval::Document;
use crate::services::{ServiceError, ServiceResult, Services};

/// Starts a prediction (the prediction floor's `start`, handed in so that
/// this module need not import what imports it).
pub type Start = for<'a> fn(
    &'a Services,
    &'a Chatflow,
    PredictionRequest,
) -> BoxFuture<'a, ServiceResult<Prediction>>;

pub struct SubflowCaller {
    pub start: Start,
    pub state: Services,
    /// The calling flow's workspace: only its chatflows can be called.
    pub workspace: Uuid,
    /// How many flows deep the caller already runs (0: a client's request).
    pub depth: u32,
}

#[async_trait::async_trait]
impl FlowCaller for SubflowCaller {
    async fn call_flow(&self, call: FlowCall) -> Result<FlowAnswer, String> {
        let most = self.state.config.agentflow_max_flow_depth;
        if self.depth >= most {
            return Err(format!(
                "flows may run flows at most {most} deep, and this call would be deeper \
                 (does a flow call itself through another?)"
            ));
        }
        let flow = self
            .state
            .store
            .get_chatflow(self.workspace, call.flow)
            .await
            .map_err(|e| {
                tracing::error!(error = %e, "cannot read a chatflow an agentflow runs");
                "the chatflow it runs could not be read".to_owned()
            })?
            .ok_or_else(|| format!("there is no chatflow {} in this workspace", call.flow))?;
        let request = PredictionRequest {
            question: call.question,
            chat_id: Some(call.chat_id),
            override_config: call.override_config,
            depth: self.depth + 1,
            ..PredictionRequest::default()
        };
        // What a client would be told, never a store's or the server's own words.
        let called = |e: ServiceError| match e {
            ServiceError::Store(_) | ServiceError::Internal(_) => {
                tracing::error!(chatflow = %flow.id, error = %e, "a chatflow an agentflow runs failed");
                format!("chatflow '{}' failed inside the server", flow.name)
            }
            e => format!("chatflow '{}' failed: {e}", flow.name),
        };
        let prediction = (self.start)(&self.state, &flow, request)
            .await
            .map_err(called)?;
        // The called run is part of the caller's: when the caller stops (its time
        // limit, its client gone), so does it, model calls and all.
        let _stop_with_caller = StopOnDrop(prediction.task.clone());
        let answer = prediction.answer().await.map_err(called)?;
        Ok(FlowAnswer {
            text: answer.text,
            used_tools: answer.used_tools,
            artifacts: answer.artifacts,
            sources: answer
                .source_documents
                .into_iter()
                .filter_map(|d| serde_json::from_value::<Document>(d).ok())
                .collect(),
        })
    }
}

/// Aborts a run's task when dropped (a finished task is left as it is).
struct StopOnDrop(tokio::task::AbortHandle);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}
