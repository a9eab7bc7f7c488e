//! Benchmark of the embedded local model: load time, prompt tokens/s and
//! generated tokens/s over a few fixed prompts (greedy decoding).
//!
//! Run it through `scripts/bench/local-model` (a release build), or:
//! `cargo run --release -p weir-api --example local_model_bench -- [MODEL_DIR]
//! [--threads N] [--max-tokens N] [--rounds N]`. MODEL_DIR defaults to
//! `$WEIR_MODELS_DIR/smollm2`, else `$WEIR_DATA_DIR/models/smollm2`
//! (`./data/models/smollm2`).

use std::path::PathBuf;
use std::time::Instant;

use weir_api::llm::local::LocalModel;
use weir_api::llm::{ChatMessage, Role, SamplingParams};

#[path = "support/cpu.rs"]
mod cpu;
use cpu::cpu_seconds;

const PROMPTS: &[&str] = &[
    "Write a short story about a lighthouse keeper who finds a message in a bottle.",
    "Explain how a bicycle works, step by step, for a ten-year-old.",
    "List ten ideas for a weekend trip and say why each one is fun.",
];

fn main() {
    let mut dir: Option<PathBuf> = None;
    let mut threads: Option<usize> = None;
    let mut max_tokens = 200u32;
    let mut rounds = 2usize;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut num = |name: &str| -> usize {
            match args.next().and_then(|v| v.parse().ok()) {
                Some(n) => n,
                None => {
                    eprintln!("{name} needs a number");
                    std::process::exit(2);
                }
            }
        };
        match a.as_str() {
            "--threads" => threads = Some(num("--threads")),
            "--max-tokens" => max_tokens = num("--max-tokens") as u32,
            "--rounds" => rounds = num("--rounds").max(1),
            "-h" | "--help" => {
                println!(
                    "local_model_bench [MODEL_DIR] [--threads N] [--max-tokens N] [--rounds N]"
                );
                return;
            }
            other => dir = Some(PathBuf::from(other)),
        }
    }
    let dir = dir.unwrap_or_else(|| {
        std::env::var_os("WEIR_MODELS_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| {
                std::env::var_os("WEIR_DATA_DIR")
                    .map(PathBuf::from)
                    .unwrap_or_else(|| PathBuf::from("data"))
                    .join("models")
            })
            .join("smollm2")
    });

    let t = Instant::now();
    let model = match LocalModel::load(&dir) {
        Ok(m) => m,
        Err(e) => {
            eprintln!("local_model_bench: {e}");
            std::process::exit(1);
        }
    };
    let model = match threads {
        Some(n) => model.with_threads(n),
        None => model,
    };
    println!(
        "loaded {} in {:.0} ms ({} kernels, {} threads)",
        model.path().display(),
        t.elapsed().as_secs_f64() * 1e3,
        model.kernels(),
        model.threads()
    );

    let params = SamplingParams {
        max_tokens: Some(max_tokens),
        ..SamplingParams::default()
    };
    // One untimed warm-up so page faults and CPU frequency do not count.
    let warm = [ChatMessage::new(Role::User, "Hi")];
    if let Err(e) = model.generate(&warm, &params, &mut |_| true) {
        eprintln!("local_model_bench: {e}");
        std::process::exit(1);
    }

    let (mut p_tok, mut p_ms, mut g_tok, mut g_ms) = (0usize, 0f64, 0usize, 0f64);
    let cpu_start = cpu_seconds();
    let wall_start = Instant::now();
    for round in 0..rounds {
        for prompt in PROMPTS {
            let messages = [ChatMessage::new(Role::User, *prompt)];
            let mut text = String::new();
            let stats = match model.generate(&messages, &params, &mut |piece| {
                text.push_str(piece);
                true
            }) {
                Ok(s) => s,
                Err(e) => {
                    eprintln!("local_model_bench: {e}");
                    std::process::exit(1);
                }
            };
            println!(
                "round {} | prompt {:>3} tok {:>7.1} tok/s | generated {:>3} tok {:>6.1} tok/s | {:?}",
                round + 1,
                stats.prompt_tokens,
                stats.prompt_tokens as f64 / stats.prompt_ms * 1e3,
                stats.generated_tokens,
                stats.generated_tokens as f64 / stats.generate_ms * 1e3,
                text.chars().take(60).collect::<String>()
            );
            p_tok += stats.prompt_tokens;
            p_ms += stats.prompt_ms;
            // The first generated token comes from the prompt pass.
            g_tok += stats.generated_tokens.saturating_sub(1);
            g_ms += stats.generate_ms;
        }
    }
    // CPU time per token is what other processes on the machine cannot disturb
    // much; wall-clock tokens/s is what a user sees.
    let (cpu, wall) = (
        cpu_seconds() - cpu_start,
        wall_start.elapsed().as_secs_f64(),
    );
    println!(
        "CPU {cpu:.2} s over {wall:.2} s wall ({:.0}% of one core) = {:.2} ms CPU per token (prompt and generated)",
        cpu / wall * 100.0,
        cpu * 1e3 / (p_tok + g_tok) as f64
    );
    println!(
        "TOTAL prompt {:.1} tok/s ({} tokens) | generation {:.1} tok/s ({} tokens)",
        p_tok as f64 / p_ms * 1e3,
        p_tok,
        g_tok as f64 / g_ms * 1e3,
        g_tok
    );
}
