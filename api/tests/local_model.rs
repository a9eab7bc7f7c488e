//! The embedded local model, end to end on the real SmolLM2 file: answers,
//! determinism, limits, cancellation and seeded sampling.
//!
//! The model comes from `$WEIR_TEST_MODEL_DIR`, else `$WEIR_MODELS_DIR/smollm2`, else
//! `$WEIR_DATA_DIR/models/smollm2`, else `./data/models/smollm2` at the repository root (`scripts/fetch-models`
//! puts it there). Without it every test prints why it skipped and passes.

use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

use weir_api::llm::local::LocalModel;
use weir_api::llm::{ChatMessage, Role, SamplingParams};

fn model() -> Option<Arc<LocalModel>> {
    static MODEL: OnceLock<Option<Arc<LocalModel>>> = OnceLock::new();
    MODEL
        .get_or_init(|| {
            let dir = std::env::var_os("WEIR_TEST_MODEL_DIR")
                .map(PathBuf::from)
                .or_else(|| {
                    std::env::var_os("WEIR_MODELS_DIR").map(|d| PathBuf::from(d).join("smollm2"))
                })
                .or_else(|| {
                    std::env::var_os("WEIR_DATA_DIR")
                        .map(|d| PathBuf::from(d).join("models/smollm2"))
                })
                .unwrap_or_else(|| {
                    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../data/models/smollm2")
                });
            if !dir.is_dir() {
                return None;
            }
            Some(Arc::new(
                LocalModel::load(&dir).expect("the model directory exists but does not load"),
            ))
        })
        .clone()
}

macro_rules! model_or_skip {
    () => {
        match model() {
            Some(m) => m,
            None => {
                eprintln!("skipped: no local model found; run scripts/fetch-models");
                return;
            }
        }
    };
}

fn ask(model: &LocalModel, question: &str, params: &SamplingParams) -> (String, usize) {
    let messages = [ChatMessage::new(Role::User, question)];
    let mut text = String::new();
    let stats = model
        .generate(&messages, params, &mut |piece| {
            text.push_str(piece);
            true
        })
        .expect("generation succeeds");
    (text, stats.generated_tokens)
}

fn greedy(max_tokens: u32) -> SamplingParams {
    SamplingParams {
        max_tokens: Some(max_tokens),
        ..SamplingParams::default()
    }
}

const QUESTION: &str = "What is the capital of France? Answer in one sentence.";

#[test]
fn greedy_answer_is_correct_and_deterministic() {
    let model = model_or_skip!();
    let (first, n) = ask(&model, QUESTION, &greedy(24));
    assert!(first.contains("Paris"), "answer: {first:?}");
    assert!(n > 0 && n <= 24);
    let (second, _) = ask(&model, QUESTION, &greedy(24));
    assert_eq!(first, second);
}

#[test]
fn max_tokens_is_respected() {
    let model = model_or_skip!();
    let (text, n) = ask(&model, "Write a long poem about the sea.", &greedy(5));
    assert_eq!(n, 5, "text: {text:?}");
    assert!(!text.is_empty());
}

#[test]
fn returning_false_stops_generation() {
    let model = model_or_skip!();
    let messages = [ChatMessage::new(
        Role::User,
        "Count from one to fifty in words.",
    )];
    let mut calls = 0;
    let stats = model
        .generate(&messages, &greedy(40), &mut |_| {
            calls += 1;
            calls < 3
        })
        .expect("generation succeeds");
    assert_eq!(calls, 3);
    assert!(stats.generated_tokens <= 5, "{stats:?}");
}

#[test]
fn seeded_sampling_is_reproducible() {
    let model = model_or_skip!();
    let params = |seed| SamplingParams {
        temperature: Some(0.9),
        top_p: Some(0.95),
        max_tokens: Some(16),
        seed: Some(seed),
        ..SamplingParams::default()
    };
    let (a, _) = ask(&model, "Tell me a fun fact.", &params(7));
    let (b, _) = ask(&model, "Tell me a fun fact.", &params(7));
    assert_eq!(a, b);
    assert!(!a.is_empty());
}

#[test]
fn concurrent_generations_do_not_interfere() {
    let model = model_or_skip!();
    let (expected, _) = ask(&model, QUESTION, &greedy(12));
    let handles: Vec<_> = (0..2)
        .map(|_| {
            let model = model.clone();
            std::thread::spawn(move || ask(&model, QUESTION, &greedy(12)).0)
        })
        .collect();
    for h in handles {
        assert_eq!(h.join().expect("no panic"), expected);
    }
}

#[test]
fn long_conversations_span_several_prompt_chunks() {
    let model = model_or_skip!();
    let system = "You are a patient geography teacher. You answer questions about \
                  countries, their capitals, rivers and mountains. You always answer \
                  in one short, correct sentence, and you never invent facts.";
    let messages = [
        ChatMessage::new(Role::System, system),
        ChatMessage::new(Role::User, "What is the capital of Italy?"),
        ChatMessage::new(Role::Assistant, "The capital of Italy is Rome."),
        ChatMessage::new(Role::User, QUESTION),
    ];
    let mut text = String::new();
    let stats = model
        .generate(&messages, &greedy(20), &mut |piece| {
            text.push_str(piece);
            true
        })
        .expect("generation succeeds");
    assert!(stats.prompt_tokens > 64, "{stats:?}");
    assert!(text.contains("Paris"), "answer: {text:?}");
}

#[test]
fn a_missing_model_is_a_clear_error() {
    let err = match LocalModel::load(std::path::Path::new("/nonexistent/models/smollm2")) {
        Err(e) => e,
        Ok(_) => panic!("loading from a missing directory succeeded"),
    };
    assert!(err.message.contains("scripts/fetch-models"), "{err}");
}
