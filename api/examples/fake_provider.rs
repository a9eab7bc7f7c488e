//! A fast fake OpenAI-compatible provider for the benchmarks: `POST
//! /v1/chat/completions` streams `Echo: <last user message>` word by word as
//! Server-Sent Events (what weir's `chatOpenAI` node reads), with no delay and no
//! key check. Prints its address on stdout, then serves until killed. Loopback only.
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

#[tokio::main]
async fn main() -> std::io::Result<()> {
    let port: u16 = std::env::args()
        .nth(1)
        .and_then(|p| p.parse().ok())
        .unwrap_or(0);
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", port)).await?;
    println!("http://{}", listener.local_addr()?);
    let app = Router::new().route("/v1/chat/completions", post(completions));
    axum::serve(listener, app).await
}
