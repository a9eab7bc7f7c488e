//! weir's embedded embedding model (`localEmbeddings`): all-MiniLM-L6-v2 run on the
//! CPU, no key and no network. This module owns everything between the model's
//! files and the vectors: reading `config.json`, `sentence_bert_config.json`,
//! `1_Pooling/config.json`, the safetensors weights and `tokenizer.json`;
//! tokenisation with sentence-transformers' truncation (`max_seq_length` word
//! pieces including `[CLS]` and `[SEP]`, no padding); the BERT forward pass; mean
//! pooling over the real tokens and L2 normalisation. Its vectors match
//! sentence-transformers' (api/tests/local_embeddings.rs checks them against a
//! reference fixture).
//!
//! The forward pass is the project's own rather than candle's: batches are packed
//! (every text's tokens one after another, no padding rows at all, so nothing needs
//! masking and no work is spent on padding), the dense layers are single matrix
//! products over the whole batch (the `gemm` crate, whose AVX2/AVX-512 kernels are
//! picked at run time, never at compile time), attention runs per text and head, and
//! layer norm, GELU and softmax are plain loops compiled for baseline x86-64, AVX2/FMA
//! and AVX-512, one chosen at run time. On this project's 2-core machine it embeds
//! about 1.3-1.4x as many tokens/s as sentence-transformers on PyTorch
//! (`scripts/bench/embeddings`). Texts are sorted by length and cut into batches that the
//! machine's cores take from a shared queue. Nothing here is async: [`LocalEmbedder::embed`]
//! is blocking CPU work that the caller puts on the blocking pool.

use std::path::Path;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::Value;
use tokenizers::{Tokenizer, TruncationDirection, TruncationParams, TruncationStrategy};

/// Dimensions of every vector.
pub const DIMS: usize = 384;

/// sentence-transformers' `max_seq_length` for this model, used when
/// `sentence_bert_config.json` is absent.
const DEFAULT_MAX_SEQ_LENGTH: usize = 256;

/// Tokens per packed batch: large enough for the matrix products to run near the
/// kernels' peak, small enough for one batch's activations (~15 KB a token) to stay
/// modest.
const BATCH_TOKENS: usize = 1024;

/// One encoder layer's weights. Dense weights are kept transposed from the
/// checkpoint's `[out][in]` to `[in][out]` (row-major), the layout the matrix
/// products read fastest.
struct Layer {
    /// Query, key and value projections side by side: `[DIMS][3 * DIMS]`.
    qkv_w: Vec<f32>,
    qkv_b: Vec<f32>,
    out_w: Vec<f32>,
    out_b: Vec<f32>,
    ln1_g: Vec<f32>,
    ln1_b: Vec<f32>,
    /// `[DIMS][intermediate]`.
    up_w: Vec<f32>,
    up_b: Vec<f32>,
    /// `[intermediate][DIMS]`.
    down_w: Vec<f32>,
    down_b: Vec<f32>,
    ln2_g: Vec<f32>,
    ln2_b: Vec<f32>,
}

/// The loaded model: weights, tokenizer and shape. Immutable after [`LocalEmbedder::load`],
/// so one instance is shared by every request.
pub struct LocalEmbedder {
    tokenizer: Tokenizer,
    max_seq_length: usize,
    heads: usize,
    intermediate: usize,
    eps: f32,
    vocab: usize,
    word: Vec<f32>,
    position: Vec<f32>,
    token_type0: Vec<f32>,
    emb_ln_g: Vec<f32>,
    emb_ln_b: Vec<f32>,
    layers: Vec<Layer>,
    threads: usize,
    isa: simd::Isa,
}

impl std::fmt::Debug for LocalEmbedder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalEmbedder")
            .field("layers", &self.layers.len())
            .field("max_seq_length", &self.max_seq_length)
            .field("threads", &self.threads)
            .field("isa", &self.isa)
            .finish_non_exhaustive()
    }
}

impl LocalEmbedder {
    /// Loads the model from a directory laid out as sentence-transformers saves it
    /// (`scripts/fetch-models` unpacks one). Every failure is one sentence naming the
    /// file and what is wrong with it.
    pub fn load(dir: &Path) -> Result<LocalEmbedder, String> {
        if !dir.is_dir() {
            return Err(format!(
                "embedding model directory {} does not exist",
                dir.display()
            ));
        }
        let config = read_json(&dir.join("config.json"))?;
        let cfg_path = dir.join("config.json");
        let field = |name: &str| -> Result<usize, String> {
            config
                .get(name)
                .and_then(Value::as_u64)
                .map(|v| v as usize)
                .ok_or_else(|| format!("{} has no positive integer \"{name}\"", cfg_path.display()))
        };
        let hidden = field("hidden_size")?;
        let heads = field("num_attention_heads")?;
        let n_layers = field("num_hidden_layers")?;
        let intermediate = field("intermediate_size")?;
        let max_positions = field("max_position_embeddings")?;
        let vocab = field("vocab_size")?;
        let type_vocab = config
            .get("type_vocab_size")
            .and_then(Value::as_u64)
            .map_or(2, |v| v as usize)
            .max(1);
        let eps = config
            .get("layer_norm_eps")
            .and_then(Value::as_f64)
            .unwrap_or(1e-12) as f32;
        if hidden != DIMS || heads == 0 || hidden % heads != 0 || intermediate == 0 {
            return Err(format!(
                "{} describes a model of hidden size {hidden} and {heads} heads; \
                 localEmbeddings runs only all-MiniLM-L6-v2 ({DIMS} dimensions)",
                cfg_path.display()
            ));
        }
        match config.get("hidden_act").and_then(Value::as_str) {
            None | Some("gelu") => {}
            Some(other) => {
                return Err(format!(
                    "{} asks for activation \"{other}\"; only \"gelu\" is supported",
                    cfg_path.display()
                ));
            }
        }

        let st_path = dir.join("sentence_bert_config.json");
        let max_seq_length = if st_path.is_file() {
            read_json(&st_path)?
                .get("max_seq_length")
                .and_then(Value::as_u64)
                .map_or(DEFAULT_MAX_SEQ_LENGTH, |v| v as usize)
        } else {
            DEFAULT_MAX_SEQ_LENGTH
        };
        if !(3..=max_positions).contains(&max_seq_length) {
            return Err(format!(
                "{} sets max_seq_length {max_seq_length}, outside 3..={max_positions}",
                st_path.display()
            ));
        }
        let pooling_path = dir.join("1_Pooling").join("config.json");
        if pooling_path.is_file() {
            let pooling = read_json(&pooling_path)?;
            if pooling
                .get("pooling_mode_mean_tokens")
                .and_then(Value::as_bool)
                != Some(true)
            {
                return Err(format!(
                    "{} does not ask for mean pooling, the only pooling localEmbeddings does",
                    pooling_path.display()
                ));
            }
        }

        let tok_path = dir.join("tokenizer.json");
        let mut tokenizer = Tokenizer::from_file(&tok_path)
            .map_err(|e| format!("cannot load tokenizer {}: {e}", tok_path.display()))?;
        tokenizer
            .with_truncation(Some(TruncationParams {
                max_length: max_seq_length,
                strategy: TruncationStrategy::LongestFirst,
                stride: 0,
                direction: TruncationDirection::Right,
            }))
            .map_err(|e| format!("cannot set truncation on {}: {e}", tok_path.display()))?;
        tokenizer.with_padding(None);

        let w_path = dir.join("model.safetensors");
        let bytes = std::fs::read(&w_path)
            .map_err(|e| format!("cannot read embedding weights {}: {e}", w_path.display()))?;
        let tensors = safetensors::SafeTensors::deserialize(&bytes).map_err(|e| {
            format!(
                "embedding weights {} are not a valid safetensors file: {e}",
                w_path.display()
            )
        })?;
        let prefix = if tensors.tensor("embeddings.word_embeddings.weight").is_ok() {
            ""
        } else {
            "bert."
        };
        let get = |name: &str, shape: &[usize]| -> Result<Vec<f32>, String> {
            let full = format!("{prefix}{name}");
            let view = tensors.tensor(&full).map_err(|_| {
                format!("embedding weights {} lack tensor {full}", w_path.display())
            })?;
            if view.dtype() != safetensors::Dtype::F32 || view.shape() != shape {
                return Err(format!(
                    "tensor {full} in {} is {:?} {:?}, expected F32 {shape:?}",
                    w_path.display(),
                    view.dtype(),
                    view.shape()
                ));
            }
            Ok(view
                .data()
                .chunks_exact(4)
                .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                .collect())
        };

        let word = get("embeddings.word_embeddings.weight", &[vocab, DIMS])?;
        let position = get(
            "embeddings.position_embeddings.weight",
            &[max_positions, DIMS],
        )?;
        let token_type = get(
            "embeddings.token_type_embeddings.weight",
            &[type_vocab, DIMS],
        )?;
        let token_type0 = token_type[..DIMS].to_vec();
        let emb_ln_g = get("embeddings.LayerNorm.weight", &[DIMS])?;
        let emb_ln_b = get("embeddings.LayerNorm.bias", &[DIMS])?;
        let mut layers = Vec::with_capacity(n_layers);
        for i in 0..n_layers {
            let p = format!("encoder.layer.{i}.");
            let mut qkv_w = get(&format!("{p}attention.self.query.weight"), &[DIMS, DIMS])?;
            qkv_w.extend(get(
                &format!("{p}attention.self.key.weight"),
                &[DIMS, DIMS],
            )?);
            qkv_w.extend(get(
                &format!("{p}attention.self.value.weight"),
                &[DIMS, DIMS],
            )?);
            let qkv_w = transpose(&qkv_w, 3 * DIMS, DIMS);
            let mut qkv_b = get(&format!("{p}attention.self.query.bias"), &[DIMS])?;
            qkv_b.extend(get(&format!("{p}attention.self.key.bias"), &[DIMS])?);
            qkv_b.extend(get(&format!("{p}attention.self.value.bias"), &[DIMS])?);
            layers.push(Layer {
                qkv_w,
                qkv_b,
                out_w: transpose(
                    &get(&format!("{p}attention.output.dense.weight"), &[DIMS, DIMS])?,
                    DIMS,
                    DIMS,
                ),
                out_b: get(&format!("{p}attention.output.dense.bias"), &[DIMS])?,
                ln1_g: get(&format!("{p}attention.output.LayerNorm.weight"), &[DIMS])?,
                ln1_b: get(&format!("{p}attention.output.LayerNorm.bias"), &[DIMS])?,
                up_w: transpose(
                    &get(
                        &format!("{p}intermediate.dense.weight"),
                        &[intermediate, DIMS],
                    )?,
                    intermediate,
                    DIMS,
                ),
                up_b: get(&format!("{p}intermediate.dense.bias"), &[intermediate])?,
                down_w: transpose(
                    &get(&format!("{p}output.dense.weight"), &[DIMS, intermediate])?,
                    DIMS,
                    intermediate,
                ),
                down_b: get(&format!("{p}output.dense.bias"), &[DIMS])?,
                ln2_g: get(&format!("{p}output.LayerNorm.weight"), &[DIMS])?,
                ln2_b: get(&format!("{p}output.LayerNorm.bias"), &[DIMS])?,
            });
        }

        let threads = std::thread::available_parallelism().map_or(1, |n| n.get().min(16));
        Ok(LocalEmbedder {
            tokenizer,
            max_seq_length,
            heads,
            intermediate,
            eps,
            vocab,
            word,
            position,
            token_type0,
            emb_ln_g,
            emb_ln_b,
            layers,
            threads,
            isa: simd::Isa::detect(),
        })
    }

    /// Blocking CPU work (the caller runs it on the blocking pool). One vector per
    /// text, [`DIMS`] dimensions, mean pooling over the text's real tokens,
    /// L2-normalised; texts are truncated at `max_seq_length` word pieces (256,
    /// `[CLS]` and `[SEP]` included) as sentence-transformers does.
    pub fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, String> {
        let mut ids: Vec<Vec<u32>> = Vec::with_capacity(texts.len());
        for text in texts {
            ids.push(self.encode(text)?);
        }
        // Longest first: the big batches start early and the queue ends on small ones.
        let mut order: Vec<usize> = (0..ids.len()).collect();
        order.sort_by_key(|&i| std::cmp::Reverse(ids[i].len()));
        let total: usize = ids.iter().map(Vec::len).sum();
        // Enough batches for every core to have one, none larger than BATCH_TOKENS.
        let budget = total.div_ceil(self.threads).clamp(1, BATCH_TOKENS);
        let mut batches: Vec<Vec<usize>> = Vec::new();
        let mut current: Vec<usize> = Vec::new();
        let mut tokens = 0;
        for i in order {
            if !current.is_empty() && tokens + ids[i].len() > budget {
                batches.push(std::mem::take(&mut current));
                tokens = 0;
            }
            tokens += ids[i].len();
            current.push(i);
        }
        if !current.is_empty() {
            batches.push(current);
        }

        let results: Mutex<Vec<Option<Vec<f32>>>> = Mutex::new(vec![None; ids.len()]);
        let next = AtomicUsize::new(0);
        let work = || -> Result<(), String> {
            let mut scratch = Scratch::default();
            loop {
                let b = next.fetch_add(1, Ordering::Relaxed);
                let Some(batch) = batches.get(b) else {
                    return Ok(());
                };
                let seqs: Vec<&[u32]> = batch.iter().map(|&i| ids[i].as_slice()).collect();
                let vectors = self.forward(&seqs, &mut scratch)?;
                let mut out = results
                    .lock()
                    .map_err(|_| "an embedding worker panicked".to_string())?;
                for (&i, v) in batch.iter().zip(vectors) {
                    out[i] = Some(v);
                }
            }
        };
        let workers = self.threads.min(batches.len());
        if workers <= 1 {
            work()?;
        } else {
            std::thread::scope(|s| -> Result<(), String> {
                let handles: Vec<_> = (0..workers).map(|_| s.spawn(work)).collect();
                let mut first_err = Ok(());
                for h in handles {
                    let r = h
                        .join()
                        .unwrap_or_else(|_| Err("an embedding worker panicked".to_string()));
                    if first_err.is_ok() {
                        first_err = r;
                    }
                }
                first_err
            })?;
        }
        results
            .into_inner()
            .map_err(|_| "an embedding worker panicked".to_string())?
            .into_iter()
            .map(|v| v.ok_or_else(|| "an embedding batch produced no vector".to_string()))
            .collect()
    }

    /// Word pieces the model sees for `text` after truncation, `[CLS]` and `[SEP]`
    /// included (0 if the tokenizer refuses the text).
    pub fn tokens(&self, text: &str) -> usize {
        self.encode(text).map_or(0, |ids| ids.len())
    }

    fn encode(&self, text: &str) -> Result<Vec<u32>, String> {
        let enc = self
            .tokenizer
            .encode(text, true)
            .map_err(|e| format!("cannot tokenize a text for embedding: {e}"))?;
        let ids = enc.get_ids();
        if let Some(bad) = ids.iter().find(|&&id| id as usize >= self.vocab) {
            return Err(format!(
                "the tokenizer produced id {bad}, outside the model's vocabulary"
            ));
        }
        Ok(ids[..ids.len().min(self.max_seq_length)].to_vec())
    }

    /// Runs the encoder on one packed batch and returns one pooled, normalised vector
    /// per sequence.
    fn forward(&self, seqs: &[&[u32]], s: &mut Scratch) -> Result<Vec<Vec<f32>>, String> {
        let n: usize = seqs.iter().map(|q| q.len()).sum();
        let d = DIMS;
        let inter = self.intermediate;
        let head_dim = d / self.heads;
        let scale = 1.0 / (head_dim as f32).sqrt();
        s.resize(n, inter, self.max_seq_length);
        let isa = self.isa;

        // Embeddings: word + position + token type 0, then layer norm.
        let mut row = 0;
        for seq in seqs {
            for (p, &id) in seq.iter().enumerate() {
                let id = id as usize;
                let dst = &mut s.hidden[row * d..(row + 1) * d];
                let w = &self.word[id * d..(id + 1) * d];
                let pe = &self.position[p * d..(p + 1) * d];
                for (((o, &a), &b), &c) in dst.iter_mut().zip(w).zip(pe).zip(&self.token_type0) {
                    *o = a + b + c;
                }
                row += 1;
            }
        }
        simd::layer_norm(isa, &mut s.hidden, &self.emb_ln_g, &self.emb_ln_b, self.eps);

        for layer in &self.layers {
            // Q, K, V for every token at once.
            fill_rows(&mut s.qkv, &layer.qkv_b);
            matmul(
                n,
                3 * d,
                d,
                &mut s.qkv,
                3 * d,
                true,
                (&s.hidden, d, 1),
                (&layer.qkv_w, 3 * d, 1),
                1.0,
            );
            // Attention, per sequence and head (no padding anywhere).
            let mut offset = 0;
            for seq in seqs {
                let t = seq.len();
                for h in 0..self.heads {
                    let q0 = offset * 3 * d + h * head_dim;
                    let k0 = q0 + d;
                    let v0 = q0 + 2 * d;
                    let scores = &mut s.scores[..t * t];
                    matmul(
                        t,
                        t,
                        head_dim,
                        scores,
                        t,
                        false,
                        (&s.qkv[q0..], 3 * d, 1),
                        (&s.qkv[k0..], 1, 3 * d),
                        scale,
                    );
                    for r in scores.chunks_exact_mut(t) {
                        simd::softmax(isa, r);
                    }
                    matmul(
                        t,
                        head_dim,
                        t,
                        &mut s.ctx[offset * d + h * head_dim..],
                        d,
                        false,
                        (scores, t, 1),
                        (&s.qkv[v0..], 3 * d, 1),
                        1.0,
                    );
                }
                offset += t;
            }
            // Output projection + residual, layer norm.
            add_rows(&mut s.tmp, &s.hidden, &layer.out_b);
            matmul(
                n,
                d,
                d,
                &mut s.tmp,
                d,
                true,
                (&s.ctx, d, 1),
                (&layer.out_w, d, 1),
                1.0,
            );
            simd::layer_norm(isa, &mut s.tmp, &layer.ln1_g, &layer.ln1_b, self.eps);
            // Feed-forward + residual, layer norm.
            fill_rows(&mut s.up, &layer.up_b);
            matmul(
                n,
                inter,
                d,
                &mut s.up,
                inter,
                true,
                (&s.tmp, d, 1),
                (&layer.up_w, inter, 1),
                1.0,
            );
            simd::gelu(isa, &mut s.up);
            add_rows(&mut s.hidden, &s.tmp, &layer.down_b);
            matmul(
                n,
                d,
                inter,
                &mut s.hidden,
                d,
                true,
                (&s.up, inter, 1),
                (&layer.down_w, d, 1),
                1.0,
            );
            simd::layer_norm(isa, &mut s.hidden, &layer.ln2_g, &layer.ln2_b, self.eps);
        }

        // Mean pooling over each sequence's tokens, then L2 normalisation.
        let mut out = Vec::with_capacity(seqs.len());
        let mut offset = 0;
        for seq in seqs {
            let t = seq.len();
            let mut v = vec![0.0f32; d];
            for r in s.hidden[offset * d..(offset + t) * d].chunks_exact(d) {
                for (a, &b) in v.iter_mut().zip(r) {
                    *a += b;
                }
            }
            // The mean's 1/t cancels in the normalisation (sentence-transformers'
            // eps of 1e-12 never matters for a real vector); the norm is summed in
            // f64 so that the result is of unit length to f32 precision.
            let norm = v.iter().map(|&a| f64::from(a).powi(2)).sum::<f64>().sqrt();
            let inv = if norm > 0.0 { (1.0 / norm) as f32 } else { 0.0 };
            v.iter_mut().for_each(|a| *a *= inv);
            out.push(v);
            offset += t;
        }
        Ok(out)
    }
}

/// A worker's activations, reused from batch to batch.
#[derive(Default)]
struct Scratch {
    hidden: Vec<f32>,
    qkv: Vec<f32>,
    ctx: Vec<f32>,
    tmp: Vec<f32>,
    up: Vec<f32>,
    scores: Vec<f32>,
}

impl Scratch {
    fn resize(&mut self, n: usize, inter: usize, max_t: usize) {
        self.hidden.resize(n * DIMS, 0.0);
        self.qkv.resize(n * 3 * DIMS, 0.0);
        self.ctx.resize(n * DIMS, 0.0);
        self.tmp.resize(n * DIMS, 0.0);
        self.up.resize(n * inter, 0.0);
        self.scores.resize(max_t * max_t, 0.0);
        // Callers index exactly n rows: drop what a larger batch left behind.
        self.hidden.truncate(n * DIMS);
        self.qkv.truncate(n * 3 * DIMS);
        self.ctx.truncate(n * DIMS);
        self.tmp.truncate(n * DIMS);
        self.up.truncate(n * inter);
    }
}

/// `m[rows][cols]` (row-major) transposed to `[cols][rows]`.
fn transpose(m: &[f32], rows: usize, cols: usize) -> Vec<f32> {
    let mut t = vec![0.0; rows * cols];
    for (r, row) in m.chunks_exact(cols).enumerate() {
        for (c, &v) in row.iter().enumerate() {
            t[c * rows + r] = v;
        }
    }
    t
}

/// Every row of `dst` (rows of `bias.len()`) set to `bias`.
fn fill_rows(dst: &mut [f32], bias: &[f32]) {
    for r in dst.chunks_exact_mut(bias.len()) {
        r.copy_from_slice(bias);
    }
}

/// Every row of `dst` set to the same row of `src` plus `bias`.
fn add_rows(dst: &mut [f32], src: &[f32], bias: &[f32]) {
    for (r, s) in dst
        .chunks_exact_mut(bias.len())
        .zip(src.chunks_exact(bias.len()))
    {
        for ((o, &a), &b) in r.iter_mut().zip(s).zip(bias) {
            *o = a + b;
        }
    }
}

/// `dst[m×n] (+)= scale · lhs[m×k] · rhs[k×n]`: `dst` is row-major with row stride
/// `dst_rs`; each operand is `(slice, row stride, column stride)` starting at its
/// element (0, 0). With `accumulate` the product is added to `dst`, else it replaces it.
#[allow(clippy::too_many_arguments)]
fn matmul(
    m: usize,
    n: usize,
    k: usize,
    dst: &mut [f32],
    dst_rs: usize,
    accumulate: bool,
    lhs: (&[f32], usize, usize),
    rhs: (&[f32], usize, usize),
    scale: f32,
) {
    if m == 0 || n == 0 || k == 0 {
        return;
    }
    // The last element each operand is read or written at: the bounds that make the
    // raw-pointer product below stay inside the slices.
    let last = |rows: usize, cols: usize, rs: usize, cs: usize| (rows - 1) * rs + (cols - 1) * cs;
    assert!(
        last(m, n, dst_rs, 1) < dst.len()
            && last(m, k, lhs.1, lhs.2) < lhs.0.len()
            && last(k, n, rhs.1, rhs.2) < rhs.0.len(),
        "matmul operands out of bounds"
    );
    // SAFETY: the assertion above keeps every index gemm computes from these
    // strides and sizes inside its slice; `dst` is a unique borrow, so it does not
    // alias the operands.
    unsafe {
        gemm::gemm(
            m,
            n,
            k,
            dst.as_mut_ptr(),
            1,
            dst_rs as isize,
            accumulate,
            lhs.0.as_ptr(),
            lhs.2 as isize,
            lhs.1 as isize,
            rhs.0.as_ptr(),
            rhs.2 as isize,
            rhs.1 as isize,
            1.0,
            scale,
            false,
            false,
            false,
            gemm::Parallelism::None,
        );
    }
}

fn read_json(path: &Path) -> Result<Value, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    serde_json::from_str(&text).map_err(|e| format!("{} is not valid JSON: {e}", path.display()))
}

/// Layer norm, softmax and GELU: plain loops written so the compiler vectorises
/// them, compiled three times (baseline x86-64, AVX2/FMA, AVX-512) and picked at run
/// time by [`Isa::detect`].
mod simd {
    /// The instruction set the element-wise loops run with.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum Isa {
        Baseline,
        #[cfg(target_arch = "x86_64")]
        Avx2,
        #[cfg(target_arch = "x86_64")]
        Avx512,
    }

    impl Isa {
        pub fn detect() -> Isa {
            #[cfg(target_arch = "x86_64")]
            {
                let avx2 =
                    std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("fma");
                if avx2 && std::is_x86_feature_detected!("avx512f") {
                    return Isa::Avx512;
                }
                if avx2 {
                    return Isa::Avx2;
                }
            }
            Isa::Baseline
        }
    }

    macro_rules! dispatch {
        ($name:ident, $avx2:ident, $avx512:ident, $body:ident, ($($arg:ident: $ty:ty),*)) => {
            pub fn $name(isa: Isa, $($arg: $ty),*) {
                match isa {
                    Isa::Baseline => $body::<false>($($arg),*),
                    // SAFETY: `Isa::detect` picks these only on CPUs that report the
                    // features the functions are compiled for.
                    #[cfg(target_arch = "x86_64")]
                    Isa::Avx2 => unsafe { $avx2($($arg),*) },
                    #[cfg(target_arch = "x86_64")]
                    Isa::Avx512 => unsafe { $avx512($($arg),*) },
                }
            }

            #[cfg(target_arch = "x86_64")]
            #[target_feature(enable = "avx2,fma")]
            unsafe fn $avx2($($arg: $ty),*) {
                $body::<true>($($arg),*)
            }

            #[cfg(target_arch = "x86_64")]
            #[target_feature(enable = "avx512f,avx2,fma")]
            unsafe fn $avx512($($arg: $ty),*) {
                $body::<true>($($arg),*)
            }
        };
    }

    dispatch!(layer_norm, layer_norm_avx2, layer_norm_avx512, layer_norm_rows,
        (x: &mut [f32], g: &[f32], b: &[f32], eps: f32));
    dispatch!(softmax, softmax_avx2, softmax_avx512, softmax_row, (x: &mut [f32]));
    dispatch!(gelu, gelu_avx2, gelu_avx512, gelu_slice, (x: &mut [f32]));

    const LANES: usize = 16;

    /// `a * b + c`, fused where the CPU has FMA (without it `mul_add` would be a
    /// slow library call).
    #[inline(always)]
    fn madd<const FMA: bool>(a: f32, b: f32, c: f32) -> f32 {
        if FMA { a.mul_add(b, c) } else { a * b + c }
    }

    /// Sum with independent accumulators (vectorisable without reassociation
    /// licence).
    #[inline(always)]
    fn sum(x: &[f32]) -> f32 {
        let mut acc = [0.0f32; LANES];
        let chunks = x.chunks_exact(LANES);
        let rest = chunks.remainder();
        for c in chunks {
            for i in 0..LANES {
                acc[i] += c[i];
            }
        }
        acc.iter().sum::<f32>() + rest.iter().sum::<f32>()
    }

    #[inline(always)]
    fn layer_norm_rows<const FMA: bool>(x: &mut [f32], g: &[f32], b: &[f32], eps: f32) {
        let d = g.len();
        let inv_d = 1.0 / d as f32;
        for row in x.chunks_exact_mut(d) {
            let mean = sum(row) * inv_d;
            let mut acc = [0.0f32; LANES];
            let chunks = row.chunks_exact(LANES);
            let mut rest = 0.0;
            for &v in chunks.remainder() {
                rest += (v - mean) * (v - mean);
            }
            for c in chunks {
                for i in 0..LANES {
                    let t = c[i] - mean;
                    acc[i] = madd::<FMA>(t, t, acc[i]);
                }
            }
            let var = (acc.iter().sum::<f32>() + rest) * inv_d;
            let rstd = 1.0 / (var + eps).sqrt();
            for ((v, &gi), &bi) in row.iter_mut().zip(g).zip(b) {
                *v = madd::<FMA>((*v - mean) * rstd, gi, bi);
            }
        }
    }

    #[inline(always)]
    fn softmax_row<const FMA: bool>(x: &mut [f32]) {
        let mut acc = [f32::NEG_INFINITY; LANES];
        let chunks = x.chunks_exact(LANES);
        let mut max = chunks
            .remainder()
            .iter()
            .fold(f32::NEG_INFINITY, |m, &v| m.max(v));
        for c in chunks {
            for i in 0..LANES {
                acc[i] = if c[i] > acc[i] { c[i] } else { acc[i] };
            }
        }
        max = acc.iter().fold(max, |m, &v| m.max(v));
        for v in x.iter_mut() {
            *v = exp::<FMA>(*v - max);
        }
        let inv = 1.0 / sum(x);
        for v in x.iter_mut() {
            *v *= inv;
        }
    }

    /// GELU with the exact (erf) form BERT uses; erf by Abramowitz & Stegun 7.1.26
    /// (absolute error below 1.5e-7), as PyTorch's vectorised erf.
    #[inline(always)]
    fn gelu_slice<const FMA: bool>(x: &mut [f32]) {
        for v in x.iter_mut() {
            let z = *v * std::f32::consts::FRAC_1_SQRT_2;
            let a = z.abs();
            let t = 1.0 / madd::<FMA>(0.327_591_1, a, 1.0);
            let mut p = 1.061_405_4f32;
            p = madd::<FMA>(p, t, -1.453_152);
            p = madd::<FMA>(p, t, 1.421_413_7);
            p = madd::<FMA>(p, t, -0.284_496_74);
            p = madd::<FMA>(p, t, 0.254_829_6);
            let erf_abs = 1.0 - p * t * exp::<FMA>(-a * a);
            let erf = if z < 0.0 { -erf_abs } else { erf_abs };
            *v = 0.5 * *v * (1.0 + erf);
        }
    }

    /// e^x for x in the f32 range (Cephes' polynomial, ~1 ulp), vectorisable.
    #[inline(always)]
    fn exp<const FMA: bool>(x: f32) -> f32 {
        let x = if x > 88.0 { 88.0 } else { x };
        let x = if x < -87.0 { -87.0 } else { x };
        let n = madd::<FMA>(x, std::f32::consts::LOG2_E, 0.5).floor();
        let r = madd::<FMA>(n, 2.121_944_4e-4, madd::<FMA>(n, -0.693_359_4, x));
        let mut p = 1.987_569_1e-4f32;
        p = madd::<FMA>(p, r, 1.398_199_9e-3);
        p = madd::<FMA>(p, r, 8.333_452e-3);
        p = madd::<FMA>(p, r, 4.166_579_6e-2);
        p = madd::<FMA>(p, r, 0.166_666_65);
        p = madd::<FMA>(p, r, 0.5);
        let y = madd::<FMA>(p, r * r, r) + 1.0;
        // 2^n from the bits of n + 127 + 2^23 (an exact integer in the mantissa's
        // low bits): a plain bit cast, where `as i32` would not vectorise.
        y * f32::from_bits((n + (127.0 + 8_388_608.0)).to_bits() << 23)
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        #[test]
        fn exp_matches_std() {
            let mut x = -80.0f32;
            while x < 80.0 {
                let b = x.exp();
                for a in [exp::<false>(x), exp::<true>(x)] {
                    assert!(((a - b) / b).abs() < 3e-7, "{x}: {a} vs {b}");
                }
                x += 0.0137;
            }
            assert_eq!(exp::<false>(f32::NEG_INFINITY), exp::<false>(-87.0));
        }

        #[test]
        fn every_isa_agrees() {
            let isa = Isa::detect();
            let mut xs: Vec<f32> = (0..301).map(|i| (i as f32 - 150.0) * 0.041).collect();
            let mut ys = xs.clone();
            gelu(Isa::Baseline, &mut xs);
            gelu(isa, &mut ys);
            for (x, y) in xs.iter().zip(&ys) {
                assert!((x - y).abs() < 1e-6, "{x} vs {y}");
            }
            // gelu(1) = 0.8413447
            let mut one = [1.0f32];
            gelu(isa, &mut one);
            assert!((one[0] - 0.841_344_7).abs() < 1e-6, "{}", one[0]);
            let mut row: Vec<f32> = (0..37).map(|i| i as f32 * 0.3).collect();
            softmax(isa, &mut row);
            assert!((row.iter().sum::<f32>() - 1.0).abs() < 1e-6);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn embedder_is_send_and_sync() {
        fn check<T: Send + Sync>() {}
        check::<LocalEmbedder>();
    }

    #[test]
    fn missing_directory_is_one_sentence() {
        let err = LocalEmbedder::load(Path::new("/nonexistent/weir-model")).unwrap_err();
        assert!(err.contains("/nonexistent/weir-model"), "{err}");
    }

    #[test]
    fn matmul_strides() {
        // [1 2; 3 4] · [5 6; 7 8]ᵀ with the right operand read transposed.
        let a = [1.0, 2.0, 3.0, 4.0];
        let b = [5.0, 6.0, 7.0, 8.0];
        let mut c = [0.0; 4];
        matmul(2, 2, 2, &mut c, 2, false, (&a, 2, 1), (&b, 1, 2), 1.0);
        assert_eq!(c, [17.0, 23.0, 39.0, 53.0]);
        matmul(2, 2, 2, &mut c, 2, true, (&a, 2, 1), (&b, 2, 1), 0.5);
        assert_eq!(c, [17.0 + 9.5, 23.0 + 11.0, 39.0 + 21.5, 53.0 + 25.0]);
    }
}
