//! The llama-architecture transformer of the local model: weights read from the
//! GGUF with candle, and a forward pass written for small models on few cores.
//!
//! [`Model::load`] reads the hyper-parameters and tensors (candle's GGUF reader),
//! keeps `Q4_1`/`Q8_0` matrices in their file layout (anything else is
//! requantised to `Q8_0`), fuses Q/K/V into one matrix and interleaves the gate
//! and up rows so one row range gives both halves of the SwiGLU, and precomputes
//! the rotary tables. [`Model::forward`] runs a chunk of tokens through the
//! network, writing keys and values into a caller-owned [`Session`] (the KV
//! cache and every scratch buffer, allocated once per generation) and returning
//! the logits of the chunk's last token.
//!
//! Threads: a forward pass runs on `threads` OS threads (scoped, so they borrow
//! the session) in lock-step: each thread computes its own range of output rows
//! of every matrix product, or its own attention heads, and a spin barrier
//! separates the phases. Within a phase a buffer is either only read by every
//! thread or written in disjoint ranges, each read back only by its writer; the
//! [`Shared`] views encode that rule. Small steps (RMS norm, quantising the
//! activation) are repeated by every thread on private copies: cheaper than one
//! more barrier. The weights are immutable and shared, so concurrent
//! generations each bring their own `Session` and never wait for each other
//! (they only compete for cores).

use std::fs::File;
use std::ops::Range;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use candle_core::Device;
use candle_core::quantized::gguf_file::{Content, Value};
use candle_core::quantized::{GgmlDType, QTensor};

use super::kernels::{self, BlockQ8, Isa, QK, QMatrix, WeightType};
use crate::llm::LlmError;

/// Prompt tokens processed per forward pass: bounds the scratch memory and keeps
/// each chunk's activations in cache.
pub const PROMPT_CHUNK: usize = 64;

/// Hyper-parameters read from the GGUF metadata.
#[derive(Debug, Clone)]
pub struct Config {
    pub n_layer: usize,
    pub dim: usize,
    pub n_head: usize,
    pub n_kv_head: usize,
    pub head_dim: usize,
    pub ffn_dim: usize,
    pub vocab: usize,
    /// The longest sequence (prompt + answer) the model handles.
    pub context: usize,
    pub eps: f32,
    pub rope_base: f32,
}

impl Config {
    fn kv_dim(&self) -> usize {
        self.n_kv_head * self.head_dim
    }
}

struct Layer {
    attn_norm: Vec<f32>,
    /// Q, K and V stacked: `dim + 2 * kv_dim` rows.
    wqkv: QMatrix,
    wo: QMatrix,
    ffn_norm: Vec<f32>,
    /// Gate and up interleaved: row `2i` is gate row `i`, row `2i + 1` up row `i`.
    w_gate_up: QMatrix,
    w_down: QMatrix,
}

pub struct Model {
    pub cfg: Config,
    layers: Vec<Layer>,
    embed: QMatrix,
    out_norm: Vec<f32>,
    /// `None` when the output projection is tied to the embedding.
    output: Option<QMatrix>,
    /// `cos`/`sin` of every (position, pair) of the rotary embedding.
    rope_cos: Vec<f32>,
    rope_sin: Vec<f32>,
    pub isa: Isa,
    pub threads: usize,
}

fn err(what: impl std::fmt::Display) -> LlmError {
    LlmError::new(format!("cannot load the local model: {what}"))
}

fn meta<'a>(content: &'a Content, key: &str) -> Result<&'a Value, LlmError> {
    content
        .metadata
        .get(key)
        .ok_or_else(|| err(format!("the model file has no `{key}`")))
}

fn meta_usize(content: &Content, key: &str) -> Result<usize, LlmError> {
    let v = meta(content, key)?;
    v.to_u64()
        .or_else(|_| v.to_u32().map(u64::from))
        .or_else(|_| v.to_i32().map(|x| x.max(0) as u64))
        .map(|x| x as usize)
        .map_err(|e| err(format!("`{key}`: {e}")))
}

fn meta_f32(content: &Content, key: &str) -> Result<f32, LlmError> {
    meta(content, key)?
        .to_f32()
        .map_err(|e| err(format!("`{key}`: {e}")))
}

struct Reader<'a> {
    content: &'a Content,
    file: &'a mut File,
}

impl Reader<'_> {
    fn qtensor(&mut self, name: &str) -> Result<QTensor, LlmError> {
        self.content
            .tensor(self.file, name, &Device::Cpu)
            .map_err(|e| err(format!("tensor `{name}`: {e}")))
    }

    fn has(&self, name: &str) -> bool {
        self.content.tensor_infos.contains_key(name)
    }

    fn vector(&mut self, name: &str, len: usize) -> Result<Vec<f32>, LlmError> {
        let v = self
            .qtensor(name)?
            .dequantize(&Device::Cpu)
            .and_then(|t| t.flatten_all())
            .and_then(|t| t.to_vec1::<f32>())
            .map_err(|e| err(format!("tensor `{name}`: {e}")))?;
        if v.len() != len {
            return Err(err(format!(
                "tensor `{name}` has {} values, expected {len}",
                v.len()
            )));
        }
        Ok(v)
    }

    /// A `rows × cols` matrix in a layout the kernels multiply; `force_q8`
    /// requantises even the directly supported types.
    fn matrix(
        &mut self,
        name: &str,
        rows: usize,
        cols: usize,
        force_q8: bool,
    ) -> Result<QMatrix, LlmError> {
        let qt = self.qtensor(name)?;
        let dims = qt.shape().dims().to_vec();
        if dims != [rows, cols] {
            return Err(err(format!(
                "tensor `{name}` has shape {dims:?}, expected [{rows}, {cols}]"
            )));
        }
        if cols % QK != 0 {
            return Err(err(format!(
                "tensor `{name}`: rows of {cols} are not whole blocks"
            )));
        }
        let ty = match qt.dtype() {
            GgmlDType::Q4_1 if !force_q8 => WeightType::Q4_1,
            GgmlDType::Q8_0 => WeightType::Q8_0,
            _ => {
                let requantised = qt
                    .dequantize(&Device::Cpu)
                    .and_then(|t| QTensor::quantize(&t, GgmlDType::Q8_0))
                    .map_err(|e| err(format!("requantising `{name}`: {e}")))?;
                return to_qmatrix(&requantised, WeightType::Q8_0, rows, cols, name);
            }
        };
        to_qmatrix(&qt, ty, rows, cols, name)
    }

    /// Loads the named matrices in one weight type (the first one's, when all
    /// are directly supported and alike; else `Q8_0`).
    fn matrices(&mut self, specs: &[(&str, usize, usize)]) -> Result<Vec<QMatrix>, LlmError> {
        let types: Vec<Option<GgmlDType>> = specs
            .iter()
            .map(|(n, _, _)| self.content.tensor_infos.get(*n).map(|i| i.ggml_dtype))
            .collect();
        let alike = types.windows(2).all(|w| w[0] == w[1]);
        specs
            .iter()
            .map(|&(n, r, c)| self.matrix(n, r, c, !alike))
            .collect()
    }
}

fn to_qmatrix(
    qt: &QTensor,
    ty: WeightType,
    rows: usize,
    cols: usize,
    name: &str,
) -> Result<QMatrix, LlmError> {
    let data = qt
        .data()
        .map_err(|e| err(format!("tensor `{name}`: {e}")))?
        .into_owned();
    let m = QMatrix {
        ty,
        rows,
        cols,
        data,
    };
    if m.data.len() != rows * m.row_bytes() {
        return Err(err(format!(
            "tensor `{name}` has {} bytes, expected {}",
            m.data.len(),
            rows * m.row_bytes()
        )));
    }
    Ok(m)
}

/// Stacks matrices of one type and row length.
fn stack(parts: Vec<QMatrix>) -> QMatrix {
    let mut iter = parts.into_iter();
    let mut first = iter.next().unwrap_or(QMatrix {
        ty: WeightType::Q8_0,
        rows: 0,
        cols: QK,
        data: Vec::new(),
    });
    for m in iter {
        first.rows += m.rows;
        first.data.extend_from_slice(&m.data);
    }
    first
}

/// Interleaves the rows of two matrices of one type and shape.
fn interleave(a: &QMatrix, b: &QMatrix) -> QMatrix {
    let mut data = Vec::with_capacity(a.data.len() + b.data.len());
    for r in 0..a.rows {
        data.extend_from_slice(a.row(r));
        data.extend_from_slice(b.row(r));
    }
    QMatrix {
        ty: a.ty,
        rows: a.rows * 2,
        cols: a.cols,
        data,
    }
}

impl Model {
    /// Reads hyper-parameters and weights of a llama-architecture GGUF.
    pub fn load(content: &Content, file: &mut File, threads: usize) -> Result<Self, LlmError> {
        let arch = meta(content, "general.architecture")?
            .to_string()
            .map_err(err)?
            .clone();
        if arch != "llama" {
            return Err(err(format!(
                "architecture `{arch}` is not supported (only llama)"
            )));
        }
        let dim = meta_usize(content, "llama.embedding_length")?;
        let n_head = meta_usize(content, "llama.attention.head_count")?;
        let n_kv_head = match meta_usize(content, "llama.attention.head_count_kv") {
            Ok(n) => n,
            Err(_) => n_head,
        };
        let head_dim = if n_head > 0 { dim / n_head } else { 0 };
        let cfg = Config {
            n_layer: meta_usize(content, "llama.block_count")?,
            dim,
            n_head,
            n_kv_head,
            head_dim,
            ffn_dim: meta_usize(content, "llama.feed_forward_length")?,
            vocab: 0,
            context: meta_usize(content, "llama.context_length")?,
            eps: meta_f32(content, "llama.attention.layer_norm_rms_epsilon")?,
            rope_base: meta_f32(content, "llama.rope.freq_base").unwrap_or(10_000.0),
        };
        if n_head == 0
            || n_kv_head == 0
            || n_head % n_kv_head != 0
            || dim % n_head != 0
            || head_dim % 2 != 0
            || dim % QK != 0
            || cfg.ffn_dim % QK != 0
            || cfg.context == 0
        {
            return Err(err(format!("unsupported shape {cfg:?}")));
        }
        if let Ok(rope_dims) = meta_usize(content, "llama.rope.dimension_count")
            && rope_dims != head_dim
        {
            return Err(err(format!(
                "partial rotary embedding ({rope_dims} of {head_dim}) is not supported"
            )));
        }
        let vocab = content
            .tensor_infos
            .get("token_embd.weight")
            .map(|i| i.shape.dims().first().copied().unwrap_or(0))
            .ok_or_else(|| err("the model file has no `token_embd.weight`"))?;
        let cfg = Config { vocab, ..cfg };
        let kv_dim = cfg.kv_dim();

        let mut rd = Reader { content, file };
        let embed = rd.matrix("token_embd.weight", vocab, dim, false)?;
        let out_norm = rd.vector("output_norm.weight", dim)?;
        let output = if rd.has("output.weight") {
            Some(rd.matrix("output.weight", vocab, dim, false)?)
        } else {
            None
        };
        let mut layers = Vec::with_capacity(cfg.n_layer);
        for l in 0..cfg.n_layer {
            let p = format!("blk.{l}");
            let (q, k, v, o) = (
                format!("{p}.attn_q.weight"),
                format!("{p}.attn_k.weight"),
                format!("{p}.attn_v.weight"),
                format!("{p}.attn_output.weight"),
            );
            let qkv = rd.matrices(&[(&q, dim, dim), (&k, kv_dim, dim), (&v, kv_dim, dim)])?;
            let (g, u, d) = (
                format!("{p}.ffn_gate.weight"),
                format!("{p}.ffn_up.weight"),
                format!("{p}.ffn_down.weight"),
            );
            let gu = rd.matrices(&[(&g, cfg.ffn_dim, dim), (&u, cfg.ffn_dim, dim)])?;
            layers.push(Layer {
                attn_norm: rd.vector(&format!("{p}.attn_norm.weight"), dim)?,
                wqkv: stack(qkv),
                wo: rd.matrix(&o, dim, dim, false)?,
                ffn_norm: rd.vector(&format!("{p}.ffn_norm.weight"), dim)?,
                w_gate_up: interleave(&gu[0], &gu[1]),
                w_down: rd.matrix(&d, dim, cfg.ffn_dim, false)?,
            });
        }

        let half = head_dim / 2;
        let mut rope_cos = Vec::with_capacity(cfg.context * half);
        let mut rope_sin = Vec::with_capacity(cfg.context * half);
        for pos in 0..cfg.context {
            for j in 0..half {
                let freq = f64::from(cfg.rope_base).powf(-2.0 * j as f64 / head_dim as f64);
                let (s, c) = (pos as f64 * freq).sin_cos();
                rope_cos.push(c as f32);
                rope_sin.push(s as f32);
            }
        }
        Ok(Model {
            cfg,
            layers,
            embed,
            out_norm,
            output,
            rope_cos,
            rope_sin,
            isa: Isa::detect(),
            threads: threads.max(1),
        })
    }

    fn output(&self) -> &QMatrix {
        self.output.as_ref().unwrap_or(&self.embed)
    }

    /// Runs `tokens` (at most [`PROMPT_CHUNK`]) at the session's next positions
    /// and returns the logits of the last one.
    pub fn forward<'s>(
        &self,
        session: &'s mut Session,
        tokens: &[u32],
    ) -> Result<&'s [f32], LlmError> {
        let cfg = &self.cfg;
        let n = tokens.len();
        if n == 0 || n > PROMPT_CHUNK {
            return Err(LlmError::new(format!(
                "internal: a forward pass takes 1..={PROMPT_CHUNK} tokens, got {n}"
            )));
        }
        if session.pos + n > session.capacity {
            return Err(LlmError::new(format!(
                "the conversation needs more than the {} tokens reserved for it",
                session.capacity
            )));
        }
        for (t, &tok) in tokens.iter().enumerate() {
            if tok as usize >= cfg.vocab {
                return Err(LlmError::new(format!(
                    "internal: token id {tok} is outside the vocabulary"
                )));
            }
            self.embed
                .dequantize_row(tok as usize, &mut session.x[t * cfg.dim..(t + 1) * cfg.dim]);
        }

        let barrier = SpinBarrier::new(self.threads);
        let ctx = Ctx {
            n,
            pos: session.pos,
            nth: self.threads,
            barrier: &barrier,
            x: Shared::new(&mut session.x),
            q: Shared::new(&mut session.q),
            attn: Shared::new(&mut session.attn),
            h: Shared::new(&mut session.h),
            logits: Shared::new(&mut session.logits),
            k: session.k_cache.iter_mut().map(|c| Shared::new(c)).collect(),
            v: session.v_cache.iter_mut().map(|c| Shared::new(c)).collect(),
        };
        let (first, rest) = session.locals.split_at_mut(1);
        std::thread::scope(|s| {
            for (i, local) in rest.iter_mut().enumerate() {
                let ctx = &ctx;
                s.spawn(move || self.run_thread(ctx, i + 1, local));
            }
            self.run_thread(&ctx, 0, &mut first[0]);
        });
        session.pos += n;
        Ok(&session.logits)
    }

    /// One thread's share of a forward pass (see the module doc).
    fn run_thread(&self, ctx: &Ctx<'_>, tid: usize, local: &mut Local) {
        let _poison = PoisonOnPanic(ctx.barrier);
        let cfg = &self.cfg;
        let (n, pos, dim, hd) = (ctx.n, ctx.pos, cfg.dim, cfg.head_dim);
        let kv_dim = cfg.kv_dim();
        let half = hd / 2;
        let isa = self.isa;
        let qkv_rows = part(dim + 2 * kv_dim, tid, ctx.nth, 16);
        let dim_rows = part(dim, tid, ctx.nth, 16);
        let ffn_rows = part(cfg.ffn_dim, tid, ctx.nth, 8);
        let heads = part(n * cfg.n_head, tid, ctx.nth, 1);
        let group = cfg.n_head / cfg.n_kv_head;
        let scale = 1.0 / (hd as f32).sqrt();
        let Local {
            acts,
            tmp,
            norm,
            scores,
        } = local;

        for (l, layer) in self.layers.iter().enumerate() {
            // A: normalise and quantise every token's input (private copy).
            {
                // SAFETY: nobody writes `x` in this phase.
                let x = unsafe { ctx.x.read() };
                self.norm_quantize(&x[..n * dim], &layer.attn_norm, norm, acts);
            }
            // B: this thread's Q/K/V rows, rotated; K and V go to the cache.
            kernels::matmul(isa, &layer.wqkv, qkv_rows.clone(), acts, n, tmp);
            let len = qkv_rows.len();
            let (q_part, k_part, v_part) = (
                clip(&qkv_rows, 0..dim),
                clip(&qkv_rows, dim..dim + kv_dim),
                clip(&qkv_rows, dim + kv_dim..dim + 2 * kv_dim),
            );
            for t in 0..n {
                let p = pos + t;
                let (cos, sin) = (
                    &self.rope_cos[p * half..(p + 1) * half],
                    &self.rope_sin[p * half..(p + 1) * half],
                );
                let src = &tmp[t * len..(t + 1) * len];
                let off = qkv_rows.start;
                if !q_part.is_empty() {
                    // SAFETY: rows `q_part` of token `t` are this thread's.
                    let q = unsafe { ctx.q.write(t * dim + q_part.start..t * dim + q_part.end) };
                    rope(
                        &src[q_part.start - off..q_part.end - off],
                        q,
                        q_part.start,
                        hd,
                        cos,
                        sin,
                    );
                }
                if !k_part.is_empty() {
                    let (ks, ke) = (k_part.start - dim, k_part.end - dim);
                    // SAFETY: this thread owns these K rows at position `p`.
                    let k = unsafe { ctx.k[l].write(p * kv_dim + ks..p * kv_dim + ke) };
                    rope(
                        &src[k_part.start - off..k_part.end - off],
                        k,
                        ks,
                        hd,
                        cos,
                        sin,
                    );
                }
                if !v_part.is_empty() {
                    let (vs, ve) = (v_part.start - dim - kv_dim, v_part.end - dim - kv_dim);
                    // SAFETY: this thread owns these V rows at position `p`.
                    let v = unsafe { ctx.v[l].write(p * kv_dim + vs..p * kv_dim + ve) };
                    v.copy_from_slice(&src[v_part.start - off..v_part.end - off]);
                }
            }
            ctx.barrier.wait();

            // C: attention for this thread's (token, head) pairs.
            if !heads.is_empty() {
                // SAFETY: `q` and the caches are only read in this phase; the
                // `attn` range of these heads is this thread's.
                let (q, kc, vc, out) = unsafe {
                    (
                        ctx.q.read(),
                        ctx.k[l].read(),
                        ctx.v[l].read(),
                        ctx.attn.write(heads.start * hd..heads.end * hd),
                    )
                };
                for (i, item) in heads.clone().enumerate() {
                    let (t, h) = (item / cfg.n_head, item % cfg.n_head);
                    let g = h / group;
                    let seen = pos + t + 1;
                    let qh = &q[t * dim + h * hd..t * dim + (h + 1) * hd];
                    let s = &mut scores[..seen];
                    for (j, sc) in s.iter_mut().enumerate() {
                        let kj = &kc[j * kv_dim + g * hd..j * kv_dim + (g + 1) * hd];
                        *sc = kernels::dot_f32(isa, qh, kj) * scale;
                    }
                    softmax(s);
                    let o = &mut out[i * hd..(i + 1) * hd];
                    o.fill(0.0);
                    for (j, &w) in s.iter().enumerate() {
                        let vj = &vc[j * kv_dim + g * hd..j * kv_dim + (g + 1) * hd];
                        kernels::axpy_f32(isa, w, vj, o);
                    }
                }
            }
            ctx.barrier.wait();

            // D: output projection, added to the residual stream.
            {
                // SAFETY: nobody writes `attn` in this phase.
                let attn = unsafe { ctx.attn.read() };
                kernels::quantize_row(&attn[..n * dim], &mut acts[..n * dim / QK]);
            }
            kernels::matmul(isa, &layer.wo, dim_rows.clone(), acts, n, tmp);
            self.add_rows(ctx, &dim_rows, tmp);
            ctx.barrier.wait();

            // E: feed-forward gate and up, fused into SiLU(gate) * up.
            {
                // SAFETY: nobody writes `x` in this phase.
                let x = unsafe { ctx.x.read() };
                self.norm_quantize(&x[..n * dim], &layer.ffn_norm, norm, acts);
            }
            let gu_rows = ffn_rows.start * 2..ffn_rows.end * 2;
            kernels::matmul(isa, &layer.w_gate_up, gu_rows.clone(), acts, n, tmp);
            let len = gu_rows.len();
            for t in 0..n {
                let ff = cfg.ffn_dim;
                // SAFETY: these `h` rows of token `t` are this thread's.
                let h = unsafe { ctx.h.write(t * ff + ffn_rows.start..t * ff + ffn_rows.end) };
                for (i, hv) in h.iter_mut().enumerate() {
                    let g = tmp[t * len + 2 * i];
                    let u = tmp[t * len + 2 * i + 1];
                    *hv = g / (1.0 + (-g).exp()) * u;
                }
            }
            ctx.barrier.wait();

            // F: down projection, added to the residual stream.
            {
                // SAFETY: nobody writes `h` in this phase.
                let h = unsafe { ctx.h.read() };
                let ff = cfg.ffn_dim;
                kernels::quantize_row(&h[..n * ff], &mut acts[..n * ff / QK]);
            }
            kernels::matmul(isa, &layer.w_down, dim_rows.clone(), acts, n, tmp);
            self.add_rows(ctx, &dim_rows, tmp);
            ctx.barrier.wait();
        }

        // Logits of the last token only.
        {
            // SAFETY: nobody writes `x` in this phase.
            let x = unsafe { ctx.x.read() };
            let last = &x[(n - 1) * dim..n * dim];
            self.norm_quantize(last, &self.out_norm, norm, acts);
        }
        let out = self.output();
        let vocab_rows = part(out.rows, tid, ctx.nth, 16);
        if !vocab_rows.is_empty() {
            // SAFETY: these logits are this thread's.
            let logits = unsafe { ctx.logits.write(vocab_rows.clone()) };
            kernels::matmul(isa, out, vocab_rows, acts, 1, logits);
        }
    }

    /// RMS-normalises each token of `x` with `weight` and quantises the result
    /// into `acts`.
    fn norm_quantize(&self, x: &[f32], weight: &[f32], norm: &mut [f32], acts: &mut [BlockQ8]) {
        let dim = self.cfg.dim;
        for (t, xt) in x.chunks_exact(dim).enumerate() {
            let ms = xt.iter().map(|v| v * v).sum::<f32>() / dim as f32;
            let inv = 1.0 / (ms + self.cfg.eps).sqrt();
            let nt = &mut norm[..dim];
            for ((o, &v), &w) in nt.iter_mut().zip(xt).zip(weight) {
                *o = v * inv * w;
            }
            kernels::quantize_row(nt, &mut acts[t * dim / QK..(t + 1) * dim / QK]);
        }
    }

    /// `x[t][rows] += tmp[t]` for every token.
    fn add_rows(&self, ctx: &Ctx<'_>, rows: &Range<usize>, tmp: &[f32]) {
        if rows.is_empty() {
            return;
        }
        let (dim, len) = (self.cfg.dim, rows.len());
        for t in 0..ctx.n {
            // SAFETY: rows `rows` of `x` are this thread's in this phase.
            let x = unsafe { ctx.x.write(t * dim + rows.start..t * dim + rows.end) };
            for (xv, &d) in x.iter_mut().zip(&tmp[t * len..(t + 1) * len]) {
                *xv += d;
            }
        }
    }
}

/// Rotates adjacent pairs (GGUF llama layout) of `src` into `dst`; `first` is the
/// index of `src[0]` within its matrix (even), used to find each pair's
/// frequency within its head.
fn rope(src: &[f32], dst: &mut [f32], first: usize, hd: usize, cos: &[f32], sin: &[f32]) {
    for (i, (s, d)) in src.chunks_exact(2).zip(dst.chunks_exact_mut(2)).enumerate() {
        let j = ((first + 2 * i) % hd) / 2;
        let (c, sn) = (cos[j], sin[j]);
        d[0] = s[0] * c - s[1] * sn;
        d[1] = s[0] * sn + s[1] * c;
    }
}

fn softmax(s: &mut [f32]) {
    let max = s.iter().fold(f32::NEG_INFINITY, |m, &v| m.max(v));
    let mut sum = 0.0;
    for v in s.iter_mut() {
        *v = (*v - max).exp();
        sum += *v;
    }
    let inv = 1.0 / sum;
    for v in s.iter_mut() {
        *v *= inv;
    }
}

/// Thread `tid`'s share of `0..total`, split at multiples of `align`.
fn part(total: usize, tid: usize, nth: usize, align: usize) -> Range<usize> {
    let chunk = total.div_ceil(nth).div_ceil(align) * align;
    let start = (tid * chunk).min(total);
    start..(start + chunk).min(total)
}

fn clip(r: &Range<usize>, to: Range<usize>) -> Range<usize> {
    let start = r.start.max(to.start);
    let end = r.end.min(to.end);
    if start < end {
        start..end
    } else {
        start..start
    }
}

/// Everything one generation owns: the KV cache and the scratch buffers, sized
/// once for the tokens it will hold.
pub struct Session {
    /// Per layer, `capacity × kv_dim` keys (rotated) and values.
    k_cache: Vec<Vec<f32>>,
    v_cache: Vec<Vec<f32>>,
    capacity: usize,
    /// Tokens already in the cache (the next token's position).
    pub pos: usize,
    x: Vec<f32>,
    q: Vec<f32>,
    attn: Vec<f32>,
    h: Vec<f32>,
    logits: Vec<f32>,
    locals: Vec<Local>,
}

/// One thread's private scratch.
struct Local {
    acts: Vec<BlockQ8>,
    tmp: Vec<f32>,
    norm: Vec<f32>,
    scores: Vec<f32>,
}

impl Session {
    /// A session for up to `capacity` tokens (clamped to the model's context).
    pub fn new(model: &Model, capacity: usize) -> Session {
        let cfg = &model.cfg;
        let capacity = capacity.clamp(1, cfg.context);
        let kv = capacity * cfg.kv_dim();
        let c = PROMPT_CHUNK;
        let widest = (cfg.dim + 2 * cfg.kv_dim()).max(2 * cfg.ffn_dim);
        Session {
            k_cache: (0..cfg.n_layer).map(|_| vec![0.0; kv]).collect(),
            v_cache: (0..cfg.n_layer).map(|_| vec![0.0; kv]).collect(),
            capacity,
            pos: 0,
            x: vec![0.0; c * cfg.dim],
            q: vec![0.0; c * cfg.dim],
            attn: vec![0.0; c * cfg.dim],
            h: vec![0.0; c * cfg.ffn_dim],
            logits: vec![0.0; model.output().rows],
            locals: (0..model.threads)
                .map(|_| Local {
                    acts: vec![BlockQ8::default(); c * cfg.ffn_dim.max(cfg.dim) / QK],
                    tmp: vec![0.0; (c * widest).max(model.output().rows)],
                    norm: vec![0.0; cfg.dim],
                    scores: vec![0.0; capacity],
                })
                .collect(),
        }
    }

    pub fn capacity(&self) -> usize {
        self.capacity
    }
}

/// Per-forward views of the shared buffers.
struct Ctx<'a> {
    n: usize,
    pos: usize,
    nth: usize,
    barrier: &'a SpinBarrier,
    x: Shared<'a>,
    q: Shared<'a>,
    attn: Shared<'a>,
    h: Shared<'a>,
    logits: Shared<'a>,
    k: Vec<Shared<'a>>,
    v: Vec<Shared<'a>>,
}

/// A buffer several threads use between barriers under the rule of the module
/// doc: in one phase, either everybody reads it, or each thread writes (and
/// reads) only its own ranges.
struct Shared<'a> {
    ptr: *mut f32,
    len: usize,
    _borrow: std::marker::PhantomData<&'a mut [f32]>,
}

// SAFETY: access is coordinated by the phase rule above and the barrier's
// acquire/release ordering.
unsafe impl Send for Shared<'_> {}
unsafe impl Sync for Shared<'_> {}

impl<'a> Shared<'a> {
    fn new(buf: &'a mut [f32]) -> Self {
        Shared {
            ptr: buf.as_mut_ptr(),
            len: buf.len(),
            _borrow: std::marker::PhantomData,
        }
    }

    /// # Safety
    /// No thread writes this buffer in the current phase.
    unsafe fn read(&self) -> &[f32] {
        // SAFETY: see the function's contract.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }

    /// # Safety
    /// `range` is written and read by this thread only in the current phase.
    #[allow(clippy::mut_from_ref)]
    unsafe fn write(&self, range: Range<usize>) -> &mut [f32] {
        assert!(range.start <= range.end && range.end <= self.len);
        // SAFETY: in bounds (checked) and exclusive by the function's contract.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.add(range.start), range.len()) }
    }
}

/// A reusable barrier that spins briefly, then yields (the phases are a few
/// microseconds long, far below a futex round trip). A thread that panics
/// poisons it so the others panic too instead of waiting forever.
struct SpinBarrier {
    n: usize,
    count: AtomicUsize,
    generation: AtomicUsize,
    poisoned: AtomicBool,
}

impl SpinBarrier {
    fn new(n: usize) -> Self {
        SpinBarrier {
            n,
            count: AtomicUsize::new(0),
            generation: AtomicUsize::new(0),
            poisoned: AtomicBool::new(false),
        }
    }

    fn wait(&self) {
        if self.n == 1 {
            return;
        }
        let generation = self.generation.load(Ordering::Acquire);
        if self.count.fetch_add(1, Ordering::AcqRel) + 1 == self.n {
            self.count.store(0, Ordering::Relaxed);
            self.generation.fetch_add(1, Ordering::AcqRel);
            return;
        }
        let mut spins = 0u32;
        while self.generation.load(Ordering::Acquire) == generation {
            if self.poisoned.load(Ordering::Relaxed) {
                panic!("another thread of the forward pass panicked");
            }
            if spins < 4_000 {
                std::hint::spin_loop();
                spins += 1;
            } else {
                std::thread::yield_now();
            }
        }
    }
}

struct PoisonOnPanic<'a>(&'a SpinBarrier);

impl Drop for PoisonOnPanic<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.0.poisoned.store(true, Ordering::Relaxed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parts_cover_the_range_at_aligned_boundaries() {
        for (total, nth, align) in [
            (960, 2, 16),
            (49152, 3, 16),
            (9, 2, 1),
            (5, 8, 1),
            (1536, 2, 8),
        ] {
            let mut next = 0;
            for tid in 0..nth {
                let r = part(total, tid, nth, align);
                assert_eq!(r.start, next);
                assert!(r.start % align == 0 || r.start == total);
                next = r.end;
            }
            assert_eq!(next, total);
        }
    }

    #[test]
    fn rope_at_position_zero_is_identity_and_preserves_norm() {
        let src = [1.0, 2.0, 3.0, 4.0];
        let mut dst = [0.0; 4];
        rope(&src, &mut dst, 0, 4, &[1.0, 1.0], &[0.0, 0.0]);
        assert_eq!(dst, src);
        let (c, s) = (0.6f32, 0.8f32);
        rope(&src, &mut dst, 0, 4, &[c, 1.0], &[s, 0.0]);
        let n0 = src[0] * src[0] + src[1] * src[1];
        let n1 = dst[0] * dst[0] + dst[1] * dst[1];
        assert!((n0 - n1).abs() < 1e-5);
    }

    #[test]
    fn barrier_synchronises_threads_repeatedly() {
        let b = SpinBarrier::new(3);
        let counter = AtomicUsize::new(0);
        std::thread::scope(|s| {
            for _ in 0..3 {
                s.spawn(|| {
                    for round in 0..100 {
                        counter.fetch_add(1, Ordering::SeqCst);
                        b.wait();
                        assert!(counter.load(Ordering::SeqCst) >= 3 * (round + 1));
                        b.wait();
                    }
                });
            }
        });
        assert_eq!(counter.load(Ordering::SeqCst), 300);
    }
}
