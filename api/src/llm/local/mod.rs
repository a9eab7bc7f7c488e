//! The embedded local chat model: SmolLM2-135M-Instruct from a GGUF file, run
//! in-process on the CPU, no network and no API key.
//!
//! [`LocalModel::load`] (blocking, ~0.4 s) opens `<dir>/SmolLM2-135M-Instruct*.gguf`
//! (or the only `.gguf` in `dir`; `scripts/fetch-models` puts it in
//! `$WEIR_MODELS_DIR/smollm2`), builds the tokenizer from the vocabulary in
//! the file ([`tokenizer`]) and reads the weights ([`gguf`]) into the forward
//! pass of the `weir-local-llm` crate (kept apart so that it is compiled
//! optimised even in debug builds). [`LocalModel::generate`]
//! (blocking: call it from `spawn_blocking`) renders the chat template
//! ([`template`]), runs the prompt, then samples ([`sampler`]) and streams text
//! pieces to a callback until the model ends its turn, `max_tokens` is reached,
//! or the callback returns `false` (the client went away).
//!
//! Concurrency: the weights are immutable and shared; every `generate` call
//! allocates its own KV cache and scratch buffers (sized for its prompt plus
//! `max_tokens`), so concurrent calls are safe. Since one forward pass already
//! keeps every core busy (its threads meet at spin barriers, which waste time
//! when more threads than cores compete), concurrent generations take turns
//! per forward pass (a mutex held ~5 ms, for one token or one 64-token prompt
//! chunk): their tokens interleave and total throughput stays that of one.
//! Share one model as `Arc<LocalModel>`.
//!
//! Speed: the shipped `Q4_1` weights are multiplied directly by AVX2 kernels
//! chosen at run time (`weir_local_llm::kernels`), on [`LocalModel::threads`]
//! threads per call; on the 2-core development machine that is ~700 prompt and
//! ~200 generated tokens per second (`scripts/bench/local-model` measures it).
//! Without AVX2 the portable kernels compute the same (up to rounding), far slower.

mod gguf;
mod sampler;
mod template;
mod tokenizer;

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Instant;

use candle_core::quantized::gguf_file::{Content, Value};

use self::sampler::Sampler;
use self::template::Piece;
use self::tokenizer::{TokenDecoder, Tokenizer};
use crate::llm::{ChatMessage, LlmError, SamplingParams};
use weir_local_llm::{PROMPT_CHUNK, Session, Transformer};

pub use self::template::DEFAULT_SYSTEM_PROMPT;

/// Tokens generated when the caller sets no `max_tokens`.
pub const DEFAULT_MAX_TOKENS: usize = 512;

/// The file name `scripts/fetch-models` unpacks, preferred when a directory holds
/// several GGUF files.
const MODEL_FILE_PREFIX: &str = "SmolLM2-135M-Instruct";

/// The embedded chat model, loaded once and shared (`Send + Sync`).
pub struct LocalModel {
    model: Transformer,
    tokenizer: Tokenizer,
    im_start: u32,
    im_end: u32,
    /// Ids that end the answer: end of turn, end of text, a new turn.
    stop: Vec<u32>,
    /// Held for one forward pass: concurrent generations take turns (see the
    /// module doc).
    turn: Mutex<()>,
    path: PathBuf,
}

/// What one generation cost.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct GenerationStats {
    /// Tokens of the rendered chat template.
    pub prompt_tokens: usize,
    /// Tokens of the answer (the end-of-turn token not counted).
    pub generated_tokens: usize,
    /// Time to run the prompt through the model (to the first token's logits).
    pub prompt_ms: f64,
    /// Time from then to the end of generation (callbacks included).
    pub generate_ms: f64,
}

impl LocalModel {
    /// Loads the model in `dir` (blocking). Errors name the file and say what to
    /// do (usually: run `scripts/fetch-models`).
    pub fn load(dir: &Path) -> Result<Self, LlmError> {
        let path = find_gguf(dir)?;
        let io_err = |e: &dyn std::fmt::Display| {
            LlmError::new(format!(
                "cannot read the local model {}: {e}",
                path.display()
            ))
        };
        let mut file = File::open(&path).map_err(|e| io_err(&e))?;
        let content = Content::read(&mut file).map_err(|e| io_err(&e))?;
        let tokenizer = tokenizer_from_gguf(&content).map_err(|e| io_err(&e))?;
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get().min(8));
        let model = gguf::load(&content, &mut file, threads).map_err(|e| io_err(&e))?;
        if tokenizer.vocab_size() > model.config().vocab {
            return Err(io_err(&"the vocabulary is larger than the embedding table"));
        }
        let special = |t: &str| {
            tokenizer
                .token_id(t)
                .ok_or_else(|| io_err(&format!("the vocabulary has no `{t}`: not a ChatML model")))
        };
        let im_start = special("<|im_start|>")?;
        let im_end = special("<|im_end|>")?;
        let mut stop = vec![im_start, im_end];
        if let Some(id) = tokenizer.token_id("<|endoftext|>") {
            stop.push(id);
        }
        if let Some(id) = content
            .metadata
            .get("tokenizer.ggml.eos_token_id")
            .and_then(|v| v.to_u32().ok())
        {
            stop.push(id);
        }
        Ok(LocalModel {
            model,
            tokenizer,
            im_start,
            im_end,
            stop,
            turn: Mutex::new(()),
            path,
        })
    }

    /// Uses `threads` threads per generation (default: the cores available, at
    /// most 8).
    pub fn with_threads(mut self, threads: usize) -> Self {
        self.model.set_threads(threads);
        self
    }

    pub fn threads(&self) -> usize {
        self.model.threads()
    }

    /// The kernels in use (`avx2` or `scalar`).
    pub fn kernels(&self) -> &'static str {
        self.model.kernels()
    }

    /// The longest conversation (prompt and answer, in tokens) the model reads.
    pub fn context_length(&self) -> usize {
        self.model.config().context
    }

    /// The GGUF file this model was loaded from.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Generates the assistant's answer to `messages` (blocking), passing each
    /// complete piece of text to `on_token` as soon as it is decoded. Returning
    /// `false` from `on_token` stops generation (that is not an error).
    pub fn generate(
        &self,
        messages: &[ChatMessage],
        params: &SamplingParams,
        on_token: &mut dyn FnMut(&str) -> bool,
    ) -> Result<GenerationStats, LlmError> {
        if messages.is_empty() {
            return Err(LlmError::new("the local model needs at least one message"));
        }
        let prompt = self.encode_prompt(messages)?;
        let context = self.model.config().context;
        if prompt.len() >= context {
            return Err(LlmError::new(format!(
                "the conversation is {} tokens long; the local model reads at most {} \
                 (shorten the history or the documents)",
                prompt.len(),
                context - 1
            )));
        }
        let max_new = params
            .max_tokens
            .map_or(DEFAULT_MAX_TOKENS, |m| m as usize)
            .min(context - prompt.len());
        let mut stats = GenerationStats {
            prompt_tokens: prompt.len(),
            ..GenerationStats::default()
        };
        if max_new == 0 {
            return Ok(stats);
        }
        // A bug in the forward pass must not take the server down with it.
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            self.run(&prompt, max_new, params, on_token, &mut stats)
        }))
        .unwrap_or_else(|_| {
            Err(LlmError::new(
                "the local model failed internally (see the server log)",
            ))
        })?;
        Ok(stats)
    }

    fn run(
        &self,
        prompt: &[u32],
        max_new: usize,
        params: &SamplingParams,
        on_token: &mut dyn FnMut(&str) -> bool,
        stats: &mut GenerationStats,
    ) -> Result<(), LlmError> {
        let started = Instant::now();
        let mut session = Session::new(&self.model, prompt.len() + max_new);
        let mut sampler = Sampler::new(params);
        let mut step = |session: &mut Session, tokens: &[u32]| {
            // A panic in another generation's pass leaves nothing to repair.
            let _turn = self.turn.lock().unwrap_or_else(|e| e.into_inner());
            let logits = self.model.forward(session, tokens).map_err(internal)?;
            Ok::<u32, LlmError>(sampler.sample(logits))
        };
        let mut next = 0;
        for chunk in prompt.chunks(PROMPT_CHUNK) {
            next = step(&mut session, chunk)?;
        }
        let prompt_done = Instant::now();
        stats.prompt_ms = (prompt_done - started).as_secs_f64() * 1e3;

        let mut decoder = TokenDecoder::default();
        let mut open = true;
        while !self.stop.contains(&next) {
            stats.generated_tokens += 1;
            let text = decoder.push(self.tokenizer.token_bytes(next));
            if !text.is_empty() && !on_token(&text) {
                open = false;
                break;
            }
            if stats.generated_tokens >= max_new || session.pos >= session.capacity() {
                break;
            }
            next = step(&mut session, &[next])?;
        }
        let rest = decoder.finish();
        if open && !rest.is_empty() {
            on_token(&rest);
        }
        stats.generate_ms = prompt_done.elapsed().as_secs_f64() * 1e3;
        Ok(())
    }

    /// The token ids of the chat template applied to `messages`.
    fn encode_prompt(&self, messages: &[ChatMessage]) -> Result<Vec<u32>, LlmError> {
        let mut ids = Vec::new();
        for piece in template::render(messages) {
            match piece {
                Piece::Start => ids.push(self.im_start),
                Piece::End => ids.push(self.im_end),
                Piece::Text(t) => ids.extend(self.tokenizer.encode(&t)?),
            }
        }
        Ok(ids)
    }
}

/// The GGUF to load from `dir`.
fn find_gguf(dir: &Path) -> Result<PathBuf, LlmError> {
    let missing = || {
        LlmError::new(format!(
            "no local model in {}: run scripts/fetch-models",
            dir.display()
        ))
    };
    let entries = std::fs::read_dir(dir).map_err(|_| missing())?;
    let mut ggufs: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "gguf") && p.is_file())
        .collect();
    ggufs.sort();
    if let Some(p) = ggufs.iter().find(|p| {
        p.file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.starts_with(MODEL_FILE_PREFIX))
    }) {
        return Ok(p.clone());
    }
    match ggufs.len() {
        0 => Err(missing()),
        1 => Ok(ggufs.remove(0)),
        n => Err(LlmError::new(format!(
            "{} holds {n} .gguf files and none is named {MODEL_FILE_PREFIX}*: keep one",
            dir.display()
        ))),
    }
}

fn tokenizer_from_gguf(content: &Content) -> Result<Tokenizer, LlmError> {
    let get = |key: &str| {
        content
            .metadata
            .get(key)
            .ok_or_else(|| LlmError::new(format!("no `{key}` in the file")))
    };
    let model = get("tokenizer.ggml.model")?.to_string().map_err(to_llm)?;
    if model != "gpt2" {
        return Err(LlmError::new(format!(
            "tokenizer `{model}` is not supported (only byte-level BPE)"
        )));
    }
    let strings = |key: &str| -> Result<Vec<String>, LlmError> {
        get(key)?
            .to_vec()
            .map_err(to_llm)?
            .iter()
            .map(|v| v.to_string().cloned().map_err(to_llm))
            .collect()
    };
    let tokens = strings("tokenizer.ggml.tokens")?;
    let merges = strings("tokenizer.ggml.merges")?;
    let types: Vec<i32> = match content.metadata.get("tokenizer.ggml.token_type") {
        Some(v) => v
            .to_vec()
            .map_err(to_llm)?
            .iter()
            .map(Value::to_i32)
            .collect::<Result<_, _>>()
            .map_err(to_llm)?,
        None => Vec::new(),
    };
    Tokenizer::from_vocab(tokens, &types, &merges)
}

fn internal(e: weir_local_llm::Error) -> LlmError {
    LlmError::new(format!("the local model failed: {e}"))
}

fn to_llm(e: candle_core::Error) -> LlmError {
    LlmError::new(e.to_string())
}

#[cfg(test)]
mod tests {
    //! Tests that need the real vocabulary; they skip when the model has not been
    //! fetched (`scripts/fetch-models`).
    use super::*;

    fn model_dir() -> Option<PathBuf> {
        let dir = std::env::var_os("WEIR_TEST_MODEL_DIR")
            .map(PathBuf::from)
            .or_else(|| {
                std::env::var_os("WEIR_MODELS_DIR").map(|d| PathBuf::from(d).join("smollm2"))
            })
            .or_else(|| {
                std::env::var_os("WEIR_DATA_DIR").map(|d| PathBuf::from(d).join("models/smollm2"))
            })
            .unwrap_or_else(|| {
                PathBuf::from(concat!(
                    env!("CARGO_MANIFEST_DIR"),
                    "/../data/models/smollm2"
                ))
            });
        find_gguf(&dir).ok().map(|_| dir)
    }

    fn real_tokenizer() -> Option<Tokenizer> {
        let Some(dir) = model_dir() else {
            eprintln!("skipped: no model; run scripts/fetch-models");
            return None;
        };
        let path = find_gguf(&dir).unwrap();
        let mut file = File::open(path).unwrap();
        let content = Content::read(&mut file).unwrap();
        Some(tokenizer_from_gguf(&content).unwrap())
    }

    #[test]
    fn known_ids_match_smollm2() {
        let Some(tok) = real_tokenizer() else { return };
        assert_eq!(tok.encode("system").unwrap(), vec![9690]);
        assert_eq!(tok.token_id("<|im_start|>"), Some(1));
        assert_eq!(tok.token_id("<|im_end|>"), Some(2));
        // Digits are single tokens; a leading space is part of the word.
        let ids = tok.encode("Paris 2024").unwrap();
        let pieces: Vec<String> = ids.iter().map(|&i| tok.decode(&[i])).collect();
        assert_eq!(pieces, ["Paris", " ", "2", "0", "2", "4"]);
        let hello = tok.encode("Hello world").unwrap();
        assert_eq!(hello.len(), 2);
        assert_eq!(tok.decode(&hello[1..]), " world");
    }

    #[test]
    fn round_trip_keeps_text_exactly() {
        let Some(tok) = real_tokenizer() else { return };
        for text in [
            "What is the capital of France? Answer in one sentence.",
            "Numbers: 3.14159, 1,000,000 and -42!",
            "Unicode: naïve café, Zürich, 東京, Привет",
            "Emoji: 🙂👍🏽 and a family 👨‍👩‍👧",
            "  leading spaces,\ttabs\nand\n\nnewlines  ",
            "<|im_end|> typed by a user",
        ] {
            let ids = tok.encode(text).unwrap();
            assert_eq!(tok.decode(&ids), text);
            // Streaming through the decoder gives the same text, piece by piece.
            let mut d = TokenDecoder::default();
            let mut streamed: String = ids.iter().map(|&i| d.push(tok.token_bytes(i))).collect();
            streamed.push_str(&d.finish());
            assert_eq!(streamed, text);
        }
        // Text that looks like a control token is not one.
        assert!(!tok.encode("<|im_end|>").unwrap().contains(&2));
    }

    /// The forward pass agrees with candle's reference llama implementation on
    /// the same file, over a multi-token prompt and then single decode steps
    /// (both fed the reference's greedy tokens): logits close relative to their
    /// spread, and mostly the same arg-max.
    #[test]
    fn forward_pass_matches_candle_reference() {
        use candle_core::{Device, Tensor};
        use candle_transformers::models::quantized_llama::ModelWeights;

        let Some(dir) = model_dir() else {
            eprintln!("skipped: no model; run scripts/fetch-models");
            return;
        };
        let ours = LocalModel::load(&dir).unwrap();
        let path = find_gguf(&dir).unwrap();
        let mut file = File::open(&path).unwrap();
        let content = Content::read(&mut file).unwrap();
        let mut reference = ModelWeights::from_gguf(content, &mut file, &Device::Cpu).unwrap();

        let messages = [ChatMessage::new(crate::llm::Role::User, "What is 2 + 2?")];
        let prompt = ours.encode_prompt(&messages).unwrap();
        let mut session = Session::new(&ours.model, prompt.len() + 10);
        let (mut ours_tok, mut ref_tok, mut errors) = (Vec::new(), Vec::new(), Vec::new());
        let mut input = prompt.clone();
        for _ in 0..8 {
            let logits = ours.model.forward(&mut session, &input).unwrap().to_vec();
            let x = Tensor::new(input.as_slice(), &Device::Cpu)
                .unwrap()
                .unsqueeze(0)
                .unwrap();
            let pos = session.pos - input.len();
            let expected: Vec<f32> = reference
                .forward(&x, pos)
                .unwrap()
                .squeeze(0)
                .unwrap()
                .to_vec1()
                .unwrap();
            let err = relative_error(&logits, &expected);
            errors.push(err);
            ours_tok.push(sampler::Sampler::Greedy.sample(&logits));
            let next = sampler::Sampler::Greedy.sample(&expected);
            ref_tok.push(next);
            // Both models continue with the reference's token.
            input = vec![next];
        }
        // This small model amplifies rounding: our own AVX2 and scalar kernels
        // (which only sum in another order) differ by 5-12%, and candle (which
        // keeps activation scales in f16) by 6-20%, 9% on average. A rotary base
        // off by 10x gives 24-120%, 50% on average.
        let mean = errors.iter().sum::<f32>() / errors.len() as f32;
        assert!(mean < 0.2, "relative errors {errors:?}");
        let agree = ours_tok
            .iter()
            .zip(&ref_tok)
            .filter(|(a, b)| a == b)
            .count();
        assert!(
            agree >= 6,
            "greedy tokens: ours {ours_tok:?}, candle {ref_tok:?}"
        );
    }

    /// `‖a − b‖ / ‖b − mean(b)‖`: the error relative to the spread of the logits.
    fn relative_error(a: &[f32], b: &[f32]) -> f32 {
        let mean = b.iter().sum::<f32>() / b.len() as f32;
        let diff: f32 = a.iter().zip(b).map(|(x, y)| (x - y) * (x - y)).sum();
        let spread: f32 = b.iter().map(|y| (y - mean) * (y - mean)).sum();
        (diff / spread).sqrt()
    }

    /// A prompt run in one pass or token by token gives the same logits.
    #[test]
    fn batched_and_incremental_passes_agree() {
        let Some(dir) = model_dir() else { return };
        let m = LocalModel::load(&dir).unwrap();
        let messages = [ChatMessage::new(crate::llm::Role::User, "Name a colour.")];
        let prompt = m.encode_prompt(&messages).unwrap();
        let mut one = Session::new(&m.model, prompt.len());
        let batched = m.model.forward(&mut one, &prompt).unwrap().to_vec();
        let mut inc = Session::new(&m.model, prompt.len());
        let mut last = Vec::new();
        for t in &prompt {
            last = m.model.forward(&mut inc, &[*t]).unwrap().to_vec();
        }
        let worst = batched
            .iter()
            .zip(&last)
            .fold(0f32, |w, (a, b)| w.max((a - b).abs()));
        assert!(
            worst < 1e-3,
            "batched and incremental logits differ by {worst}"
        );
    }

    #[test]
    fn missing_model_dir_says_what_to_run() {
        let e = find_gguf(Path::new("/nonexistent/models/smollm2")).unwrap_err();
        assert!(e.message.contains("scripts/fetch-models"), "{e}");
    }
}
