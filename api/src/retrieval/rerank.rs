//! Rerankers: a store's best chunks put in the order a rerank model gives them,
//! each with its `metadata.relevance_score`. One wire shape, three dialects:
//! Cohere's `POST {base}/v2/rerank` (also vLLM's and Infinity's, reached by
//! their base URL), Jina's `POST {base}/v1/rerank`, Voyage's `POST
//! {base}/v1/rerank` — `{model, query, documents: [text]}` in, `[{index,
//! relevance_score}]` out.

use std::time::Duration;

use serde_json::{Value, json};

use super::Document;
use crate::llm::LlmError;
use crate::llm::http::root_cause;

/// Which rerank service, with its endpoint and key.
#[derive(Debug, Clone, PartialEq)]
pub struct RerankSpec {
    pub service: RerankService,
    pub base: String,
    pub api_key: Option<String>,
    pub model: String,
    /// Chunks kept after reranking (`None`: as many as the store found).
    pub top_n: Option<usize>,
    /// A fixed query to rerank by, instead of the question.
    pub query: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RerankService {
    Cohere,
    Jina,
    Voyage,
}

impl RerankService {
    pub fn label(self) -> &'static str {
        match self {
            RerankService::Cohere => "Cohere rerank",
            RerankService::Jina => "Jina rerank",
            RerankService::Voyage => "Voyage AI rerank",
        }
    }

    fn path(self) -> &'static str {
        match self {
            RerankService::Cohere => "/v2/rerank",
            RerankService::Jina | RerankService::Voyage => "/v1/rerank",
        }
    }
}

/// A rerank call waits at most this long.
const TIMEOUT: Duration = Duration::from_secs(30);

/// `documents` in the rerank model's order, each with its
/// `metadata.relevance_score`, at most `top_n` of them.
pub async fn rerank(
    http: &reqwest::Client,
    spec: &RerankSpec,
    question: &str,
    documents: Vec<Document>,
) -> Result<Vec<Document>, LlmError> {
    if documents.is_empty() {
        return Ok(documents);
    }
    let label = spec.service.label();
    let top = spec.top_n.unwrap_or(documents.len()).min(documents.len());
    let texts: Vec<&str> = documents.iter().map(|d| d.page_content.as_str()).collect();
    let mut body = json!({
        "model": spec.model,
        "query": spec.query.as_deref().unwrap_or(question),
        "documents": texts,
    });
    match spec.service {
        RerankService::Voyage => body["top_k"] = json!(top),
        RerankService::Cohere | RerankService::Jina => body["top_n"] = json!(top),
    }
    let url = format!("{}{}", spec.base.trim_end_matches('/'), spec.service.path());
    let mut request = http.post(&url).timeout(TIMEOUT).json(&body);
    if let Some(key) = &spec.api_key {
        request = request.bearer_auth(key);
    }
    let started = std::time::Instant::now();
    let sent = request.send().await;
    crate::metrics::metrics().provider_call(
        label,
        sent.as_ref().is_ok_and(|r| r.status().is_success()),
        started.elapsed(),
    );
    let response = sent.map_err(|e| {
        LlmError::new(format!(
            "cannot reach {label} at {}: {}",
            spec.base,
            root_cause(&e)
        ))
    })?;
    let status = response.status();
    if !status.is_success() {
        let detail: String = response
            .text()
            .await
            .unwrap_or_default()
            .trim()
            .chars()
            .take(300)
            .collect();
        return Err(LlmError::new(match status.as_u16() {
            401 | 403 => format!("{label} rejected the API key configured for it (HTTP {status})"),
            s => format!("{label} failed (HTTP {s}): {detail}"),
        }));
    }
    let answer: Value = response
        .json()
        .await
        .map_err(|e| LlmError::new(format!("{label} answered something not JSON: {e}")))?;
    ranked(&answer, documents, top)
        .ok_or_else(|| LlmError::new(format!("{label} answered without a ranking of the chunks")))
}

/// The documents in the answer's order (`results`, or Voyage's `data`), each
/// once, with their scores.
fn ranked(answer: &Value, documents: Vec<Document>, top: usize) -> Option<Vec<Document>> {
    let items = answer
        .get("results")
        .or_else(|| answer.get("data"))?
        .as_array()?;
    let mut slots: Vec<Option<Document>> = documents.into_iter().map(Some).collect();
    let mut out = Vec::with_capacity(top);
    for item in items {
        let index = usize::try_from(item.get("index")?.as_u64()?).ok()?;
        let score = item.get("relevance_score")?.as_f64()?;
        let Some(mut document) = slots.get_mut(index)?.take() else {
            continue;
        };
        document
            .metadata
            .insert("relevance_score".into(), json!(score));
        out.push(document);
        if out.len() == top {
            break;
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_reorder_and_score_the_chunks() {
        let docs = || {
            ["a", "b", "c"]
                .iter()
                .map(|t| Document::new(*t, Default::default()))
                .collect::<Vec<_>>()
        };
        let cohere = json!({"results": [{"index": 2, "relevance_score": 0.9},
                                        {"index": 0, "relevance_score": 0.5},
                                        {"index": 2, "relevance_score": 0.1}]});
        let out = ranked(&cohere, docs(), 3).unwrap();
        assert_eq!(
            out.iter()
                .map(|d| d.page_content.as_str())
                .collect::<Vec<_>>(),
            ["c", "a"]
        );
        assert_eq!(out[0].metadata["relevance_score"], json!(0.9));
        let voyage = json!({"data": [{"index": 1, "relevance_score": 0.7}]});
        assert_eq!(ranked(&voyage, docs(), 1).unwrap()[0].page_content, "b");
        assert!(
            ranked(
                &json!({"results": [{"index": 9, "relevance_score": 1}]}),
                docs(),
                1
            )
            .is_none()
        );
    }
}
