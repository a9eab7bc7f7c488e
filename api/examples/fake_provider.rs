//! A fast fake OpenAI-compatible provider for the benchmarks: `POST
//! /v1/chat/completions` streams `Echo: <last user message>` word by word as
//! Server-Sent Events (what weir's `chatOpenAI` node reads), with no delay and no
//! key check; `POST /v1/embeddings` answers each input with a bag-of-words vector
//! of 384 dimensions (each word hashed to a dimension, L2-normalised), so texts
//! sharing words are near. Prints its address on stdout, then serves until
//! killed. `POST /v1beta/models/<model>:streamGenerateContent` streams the same
//! echo in Gemini's SSE chunks (the Generative Language API). Loopback only.
//!
//! `cargo run --release -p weir-api --example fake_provider [-- PORT]`

use axum::Router;
use axum::body::Body;
use axum::http::header;
use axum::response::Response;
use axum::routing::post;
use serde_json::{Value, json};

async fn completions(axum::Json(body): axum::Json<Value>) -> Response {
    let question = body["messages"]
        .as_array()
        .and_then(|m| m.iter().rev().find(|m| m["role"] == "user"))
        .and_then(|m| m["content"].as_str())
        .unwrap_or("");
    let answer = format!("Echo: {question}");
    let mut out =
        String::from("data: {\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\"}}]}\n\n");
    for (i, word) in answer.split(' ').enumerate() {
        let piece = if i == 0 {
            word.to_owned()
        } else {
            format!(" {word}")
        };
        let chunk = json!({"choices": [{"index": 0, "delta": {"content": piece}}]});
        out.push_str(&format!("data: {chunk}\n\n"));
    }
    out.push_str("data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n");
    Response::builder()
        .header(header::CONTENT_TYPE, "text/event-stream")
        .body(Body::from(out))
        .unwrap_or_default()
}

/// Gemini's `streamGenerateContent?alt=sse`: the echo of the last user turn's
/// text, a word a chunk, the last with `finishReason` and usage.
async fn gemini(axum::Json(body): axum::Json<Value>) -> Response {
    let question = body["contents"]
        .as_array()
        .and_then(|c| c.iter().rev().find(|c| c["role"] == "user"))
        .and_then(|c| c["parts"].as_array())
        .map(|parts| {
            parts
                .iter()
                .filter_map(|p| p["text"].as_str())
                .collect::<String>()
        })
        .unwrap_or_default();
    let answer = format!("Echo: {question}");
    let words: Vec<&str> = answer.split(' ').collect();
    let mut out = String::new();
    for (i, word) in words.iter().enumerate() {
        let text = if i == 0 {
            (*word).to_owned()
        } else {
            format!(" {word}")
        };
        let mut candidate =
            json!({"content": {"role": "model", "parts": [{"text": text}]}, "index": 0});
        let mut chunk = json!({"modelVersion": "fake"});
        if i + 1 == words.len() {
            candidate["finishReason"] = json!("STOP");
            chunk["usageMetadata"] = json!({"promptTokenCount": 1, "candidatesTokenCount": words.len(),
                                            "totalTokenCount": 1 + words.len()});
        }
        chunk["candidates"] = json!([candidate]);
        out.push_str(&format!("data: {chunk}\r\n\r\n"));
    }
    Response::builder()
        .header(header::CONTENT_TYPE, "text/event-stream")
        .body(Body::from(out))
        .unwrap_or_default()
}

const DIMS: usize = 384;

fn embed(text: &str) -> Vec<f32> {
    let mut v = vec![0f32; DIMS];
    for word in text
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
    {
        // FNV-1a of the lowercased word: stable across runs.
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for b in word.to_lowercase().bytes() {
            h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
        }
        v[(h % DIMS as u64) as usize] += 1.0;
    }
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt().max(1e-6);
    v.iter_mut().for_each(|x| *x /= norm);
    v
}

async fn embeddings(axum::Json(body): axum::Json<Value>) -> axum::Json<Value> {
    let texts: Vec<&str> = match &body["input"] {
        Value::String(s) => vec![s.as_str()],
        Value::Array(items) => items.iter().map(|t| t.as_str().unwrap_or("")).collect(),
        _ => Vec::new(),
    };
    let data: Vec<Value> = texts
        .iter()
        .enumerate()
        .map(|(i, t)| json!({"object": "embedding", "index": i, "embedding": embed(t)}))
        .collect();
    axum::Json(
        json!({"object": "list", "data": data, "model": body["model"],
                      "usage": {"prompt_tokens": 0, "total_tokens": 0}}),
    )
}

#[tokio::main]
async fn main() -> std::io::Result<()> {
    let port: u16 = std::env::args()
        .nth(1)
        .and_then(|p| p.parse().ok())
        .unwrap_or(0);
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", port)).await?;
    println!("http://{}", listener.local_addr()?);
    let app = Router::new()
        .route("/v1/chat/completions", post(completions))
        .route("/v1/embeddings", post(embeddings))
        .route("/v1beta/models/{model_and_method}", post(gemini));
    axum::serve(listener, app).await
}
