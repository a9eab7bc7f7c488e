//! Benchmark of the embedded embedding model (`localEmbeddings`,
//! all-MiniLM-L6-v2): embeds a corpus of texts in one call per round and prints
//! tokens/s. `scripts/bench/embeddings` runs it beside sentence-transformers on the
//! same corpora; by hand:
//!
//! `cargo run --release -p weir-api --example embed_bench -- CORPUS.json [MODEL_DIR]
//! [--rounds N]`
//!
//! CORPUS.json is a JSON array of strings. MODEL_DIR defaults to
//! `$WEIR_MODELS_DIR/all-minilm-l6-v2`, else `$WEIR_DATA_DIR/models/all-minilm-l6-v2`
//! (`./data/models/all-minilm-l6-v2`). The last line is one JSON object:
//! `{"texts", "tokens", "best_tokens_per_s", "cpu_tokens_per_s", "load_ms", "threads"}`
//! (`tokens` counts word pieces after truncation, `[CLS]` and `[SEP]` included).

use std::path::PathBuf;
use std::time::Instant;

use weir_api::retrieval::embed::local::LocalEmbedder;

#[path = "support/cpu.rs"]
mod cpu;
use cpu::cpu_seconds;

fn fail(msg: impl std::fmt::Display) -> ! {
    eprintln!("embed_bench: {msg}");
    std::process::exit(1)
}

fn main() {
    let mut positional: Vec<String> = Vec::new();
    let mut rounds = 3usize;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--rounds" => {
                rounds = args
                    .next()
                    .and_then(|v| v.parse::<usize>().ok())
                    .unwrap_or_else(|| fail("--rounds needs a number"))
                    .max(1)
            }
            "-h" | "--help" => {
                println!("embed_bench CORPUS.json [MODEL_DIR] [--rounds N]");
                return;
            }
            _ => positional.push(a),
        }
    }
    let Some(corpus) = positional.first() else {
        fail("usage: embed_bench CORPUS.json [MODEL_DIR] [--rounds N]")
    };
    let dir = positional.get(1).map(PathBuf::from).unwrap_or_else(|| {
        std::env::var_os("WEIR_MODELS_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| {
                std::env::var_os("WEIR_DATA_DIR")
                    .map(PathBuf::from)
                    .unwrap_or_else(|| PathBuf::from("data"))
                    .join("models")
            })
            .join("all-minilm-l6-v2")
    });
    let text = std::fs::read_to_string(corpus).unwrap_or_else(|e| fail(format!("{corpus}: {e}")));
    let texts: Vec<String> =
        serde_json::from_str(&text).unwrap_or_else(|e| fail(format!("{corpus}: {e}")));
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();

    let t = Instant::now();
    let model = LocalEmbedder::load(&dir).unwrap_or_else(|e| fail(e));
    let load_ms = t.elapsed().as_secs_f64() * 1e3;
    let tokens: usize = refs.iter().map(|t| model.tokens(t)).sum();
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());

    // One untimed warm-up so page faults and CPU frequency do not count.
    if let Err(e) = model.embed(&refs[..refs.len().min(64)]) {
        fail(e)
    }
    let mut best = 0.0f64;
    let (mut cpu_total, mut tok_total) = (0.0f64, 0usize);
    for round in 0..rounds {
        let cpu = cpu_seconds();
        let t = Instant::now();
        let out = model.embed(&refs).unwrap_or_else(|e| fail(e));
        let secs = t.elapsed().as_secs_f64();
        let cpu = cpu_seconds() - cpu;
        assert_eq!(out.len(), refs.len());
        let rate = tokens as f64 / secs;
        println!(
            "round {}: {} texts, {tokens} tokens in {secs:.3} s = {rate:.0} tokens/s ({:.0}% of one core)",
            round + 1,
            refs.len(),
            cpu / secs * 100.0
        );
        best = best.max(rate);
        cpu_total += cpu;
        tok_total += tokens;
    }
    println!(
        "{}",
        serde_json::json!({
            "texts": refs.len(),
            "tokens": tokens,
            "best_tokens_per_s": best,
            "cpu_tokens_per_s": if cpu_total > 0.0 { tok_total as f64 / cpu_total } else { 0.0 },
            "load_ms": load_ms,
            "threads": threads,
        })
    );
}
