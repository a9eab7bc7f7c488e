//! The llama-architecture transformer: its weights in memory and a forward
//! pass written for small models on few cores.
//!
//! [`Transformer::new`] takes the hyper-parameters and the weight matrices (in
//! their GGUF blocks: `Q4_1` or `Q8_0`), fuses Q/K/V into one matrix,
//! interleaves the gate and up rows so one row range gives both halves of the
//! SwiGLU, regroups matrices by four rows for the AVX2 kernels, and precomputes
//! the rotary tables. [`Transformer::forward`] runs a chunk of tokens through
//! the network, writing keys and values into a caller-owned [`Session`] (the KV
//! cache and every scratch buffer, allocated once per generation) and returning
//! the logits of the chunk's last token.
//!
//! Threads: a forward pass runs on `threads` OS threads (scoped, so they borrow
//! the session) in lock-step: in each phase the threads claim units of work
//! (64 output rows of a matrix product, one attention head) from an atomic
//! counter until none is left, and a spin barrier separates the phases. Claiming
//! instead of a fixed split keeps both cores busy when one thread is preempted
//! by another process or a phase does not divide evenly (9 heads on 2 cores).
//! Within a phase a buffer is either only read by every thread or written in
//! disjoint ranges, each read back only by its writer; the [`Shared`] views
//! encode that rule. Small steps (RMS norm, quantising the activation) are
//! repeated by every thread on private copies: cheaper than one more barrier.
//! The weights are immutable and shared, so concurrent generations each bring
//! their own `Session` (a forward pass takes `&self`).

use std::ops::Range;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use crate::Error;
use crate::kernels::{self, BlockQ8, Isa, QK, QMatrix, WeightType};

/// Prompt tokens processed per forward pass: bounds the scratch memory and keeps
/// each chunk's activations in cache.
pub const PROMPT_CHUNK: usize = 64;

/// Hyper-parameters of a llama-architecture model.
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
    pub fn kv_dim(&self) -> usize {
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

pub struct Transformer {
    pub cfg: Config,
    layers: Vec<Layer>,
    embed: QMatrix,
    out_norm: Vec<f32>,
    /// `None` when the output projection is tied to the embedding.
    output: Option<QMatrix>,
    /// `cos`/`sin` of every (position, pair) of the rotary embedding.
    rope_cos: Vec<f32>,
    rope_sin: Vec<f32>,
    isa: Isa,
    threads: usize,
}

/// One block's weights as read from the file, before fusing and regrouping.
pub struct LayerWeights {
    pub attn_norm: Vec<f32>,
    pub wq: QMatrix,
    pub wk: QMatrix,
    pub wv: QMatrix,
    pub wo: QMatrix,
    pub ffn_norm: Vec<f32>,
    pub w_gate: QMatrix,
    pub w_up: QMatrix,
    pub w_down: QMatrix,
}

/// Stacks `b` and `c` under `a` (one type and row length, checked by the caller).
fn stack(mut a: QMatrix, b: QMatrix, c: QMatrix) -> QMatrix {
    for m in [b, c] {
        a.rows += m.rows;
        a.data.extend_from_slice(&m.data);
    }
    a
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

/// Checks that `m` is a plain `rows × cols` matrix the kernels multiply.
fn check(m: &QMatrix, rows: usize, cols: usize, what: &str) -> Result<(), Error> {
    let plain = matches!(m.ty, WeightType::Q4_1 | WeightType::Q8_0);
    if !plain
        || m.rows != rows
        || m.cols != cols
        || !cols.is_multiple_of(QK)
        || m.data.len() != rows * m.row_bytes()
    {
        return Err(Error(format!(
            "{what}: expected a {rows}×{cols} Q4_1 or Q8_0 matrix, got {}×{} {:?} ({} bytes)",
            m.rows,
            m.cols,
            m.ty,
            m.data.len()
        )));
    }
    Ok(())
}

fn check_vec(v: &[f32], len: usize, what: &str) -> Result<(), Error> {
    if v.len() != len {
        return Err(Error(format!(
            "{what}: expected {len} values, got {}",
            v.len()
        )));
    }
    Ok(())
}

impl Transformer {
    /// Validates the shapes against `cfg` and prepares the weights (see the
    /// module doc). `output` is `None` when the output projection is tied to the
    /// embedding. Runs forward passes on `threads` threads.
    pub fn new(
        cfg: Config,
        embed: QMatrix,
        layers: Vec<LayerWeights>,
        out_norm: Vec<f32>,
        output: Option<QMatrix>,
        threads: usize,
    ) -> Result<Self, Error> {
        let (dim, head_dim) = (cfg.dim, cfg.head_dim);
        if cfg.n_head == 0
            || cfg.n_kv_head == 0
            || !cfg.n_head.is_multiple_of(cfg.n_kv_head)
            || cfg.n_head * head_dim != dim
            || head_dim % 2 != 0
            || dim % QK != 0
            || !cfg.ffn_dim.is_multiple_of(QK)
            || cfg.context == 0
            || cfg.vocab == 0
            || layers.len() != cfg.n_layer
        {
            return Err(Error(format!(
                "unsupported shape {cfg:?} with {} layers",
                layers.len()
            )));
        }
        let (kv_dim, ff) = (cfg.kv_dim(), cfg.ffn_dim);
        check(&embed, cfg.vocab, dim, "token embedding")?;
        check_vec(&out_norm, dim, "output norm")?;
        if let Some(o) = &output {
            check(o, cfg.vocab, dim, "output projection")?;
        }
        let mut prepared = Vec::with_capacity(layers.len());
        for (l, w) in layers.into_iter().enumerate() {
            let name = |m: &str| format!("layer {l} {m}");
            check_vec(&w.attn_norm, dim, &name("attention norm"))?;
            check_vec(&w.ffn_norm, dim, &name("feed-forward norm"))?;
            check(&w.wq, dim, dim, &name("Q"))?;
            check(&w.wk, kv_dim, dim, &name("K"))?;
            check(&w.wv, kv_dim, dim, &name("V"))?;
            check(&w.wo, dim, dim, &name("attention output"))?;
            check(&w.w_gate, ff, dim, &name("gate"))?;
            check(&w.w_up, ff, dim, &name("up"))?;
            check(&w.w_down, dim, ff, &name("down"))?;
            if w.wq.ty != w.wk.ty || w.wq.ty != w.wv.ty || w.w_gate.ty != w.w_up.ty {
                return Err(Error(name("Q/K/V or gate/up are not of one type")));
            }
            prepared.push(Layer {
                attn_norm: w.attn_norm,
                wqkv: stack(w.wq, w.wk, w.wv).repack4(),
                wo: w.wo.repack4(),
                ffn_norm: w.ffn_norm,
                w_gate_up: interleave(&w.w_gate, &w.w_up).repack4(),
                w_down: w.w_down.repack4(),
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
        Ok(Transformer {
            cfg,
            layers: prepared,
            embed: embed.repack4(),
            out_norm,
            output: output.map(QMatrix::repack4),
            rope_cos,
            rope_sin,
            isa: Isa::detect(),
            threads: threads.clamp(1, 64),
        })
    }

    pub fn config(&self) -> &Config {
        &self.cfg
    }

    /// Threads per forward pass.
    pub fn threads(&self) -> usize {
        self.threads
    }

    pub fn set_threads(&mut self, threads: usize) {
        self.threads = threads.clamp(1, 64);
    }

    /// The kernels in use (`avx2` or `scalar`).
    pub fn kernels(&self) -> &'static str {
        self.isa.name()
    }

    /// Uses the portable kernels even where AVX2 is available (to compare the
    /// two).
    pub fn use_scalar_kernels(&mut self) {
        self.isa = Isa::Scalar;
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
    ) -> Result<&'s [f32], Error> {
        let cfg = &self.cfg;
        let n = tokens.len();
        if n == 0 || n > PROMPT_CHUNK {
            return Err(Error(format!(
                "internal: a forward pass takes 1..={PROMPT_CHUNK} tokens, got {n}"
            )));
        }
        if session.pos + n > session.capacity {
            return Err(Error(format!(
                "the conversation needs more than the {} tokens reserved for it",
                session.capacity
            )));
        }
        for (t, &tok) in tokens.iter().enumerate() {
            if tok as usize >= cfg.vocab {
                return Err(Error(format!(
                    "internal: token id {tok} is outside the vocabulary"
                )));
            }
            self.embed
                .dequantize_row(tok as usize, &mut session.x[t * cfg.dim..(t + 1) * cfg.dim]);
        }

        // The session brought one scratch area per thread it was made for.
        let Some((first, rest)) = session.locals.split_first_mut() else {
            return Err(Error("internal: a session without scratch space".into()));
        };
        let barrier = SpinBarrier::new(1 + rest.len());
        for c in &session.counters {
            c.store(0, Ordering::Relaxed);
        }
        let ctx = Ctx {
            n,
            pos: session.pos,
            barrier: &barrier,
            counters: &session.counters,
            x: Shared::new(&mut session.x),
            q: Shared::new(&mut session.q),
            attn: Shared::new(&mut session.attn),
            h: Shared::new(&mut session.h),
            logits: Shared::new(&mut session.logits),
            k: session.k_cache.iter_mut().map(|c| Shared::new(c)).collect(),
            v: session.v_cache.iter_mut().map(|c| Shared::new(c)).collect(),
        };
        std::thread::scope(|s| {
            for local in rest.iter_mut() {
                let ctx = &ctx;
                s.spawn(move || self.run_thread(ctx, local));
            }
            self.run_thread(&ctx, first);
        });
        session.pos += n;
        Ok(&session.logits)
    }

    /// One thread's share of a forward pass (see the module doc).
    fn run_thread(&self, ctx: &Ctx<'_>, local: &mut Local) {
        let _poison = PoisonOnPanic(ctx.barrier);
        let cfg = &self.cfg;
        let (n, pos, dim, hd) = (ctx.n, ctx.pos, cfg.dim, cfg.head_dim);
        let (kv_dim, ff) = (cfg.kv_dim(), cfg.ffn_dim);
        let half = hd / 2;
        let isa = self.isa;
        let group = cfg.n_head / cfg.n_kv_head;
        let scale = 1.0 / (hd as f32).sqrt();
        let Local {
            acts,
            tmp,
            norm,
            scores,
        } = local;
        // Counter of phase `ph` (0..PHASES) of layer `l`; the logits use the last.
        let counter = |l: usize, ph: usize| &ctx.counters[l * PHASES + ph];

        for (l, layer) in self.layers.iter().enumerate() {
            // A: normalise and quantise every token's input (private copy).
            {
                // SAFETY: nobody writes `x` in this phase.
                let x = unsafe { ctx.x.read() };
                self.norm_quantize(&x[..n * dim], &layer.attn_norm, norm, acts);
            }
            // B: Q/K/V rows, rotated; K and V go to the cache.
            for rows in claim(counter(l, 0), dim + 2 * kv_dim, ROWS_PER_CHUNK) {
                kernels::matmul(isa, &layer.wqkv, rows.clone(), acts, n, tmp);
                let len = rows.len();
                let (q_part, k_part, v_part) = (
                    clip(&rows, 0..dim),
                    clip(&rows, dim..dim + kv_dim),
                    clip(&rows, dim + kv_dim..dim + 2 * kv_dim),
                );
                for t in 0..n {
                    let p = pos + t;
                    let (cos, sin) = (
                        &self.rope_cos[p * half..(p + 1) * half],
                        &self.rope_sin[p * half..(p + 1) * half],
                    );
                    let src = &tmp[t * len..(t + 1) * len];
                    let off = rows.start;
                    if !q_part.is_empty() {
                        // SAFETY: rows `q_part` of token `t` are this thread's.
                        let q =
                            unsafe { ctx.q.write(t * dim + q_part.start..t * dim + q_part.end) };
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
            }
            ctx.barrier.wait();

            // C: attention, one (token, head) pair at a time.
            for items in claim(counter(l, 1), n * cfg.n_head, 1) {
                // SAFETY: `q` and the caches are only read in this phase; the
                // `attn` range of these heads is this thread's.
                let (q, kc, vc, out) = unsafe {
                    (
                        ctx.q.read(),
                        ctx.k[l].read(),
                        ctx.v[l].read(),
                        ctx.attn.write(items.start * hd..items.end * hd),
                    )
                };
                for (i, item) in items.enumerate() {
                    let (t, h) = (item / cfg.n_head, item % cfg.n_head);
                    let g = h / group;
                    let seen = pos + t + 1;
                    let qh = &q[t * dim + h * hd..t * dim + (h + 1) * hd];
                    let o = &mut out[i * hd..(i + 1) * hd];
                    // Key and value `j` of KV head `g` start at `j * kv_dim + g * hd`.
                    let (keys, values) = (&kc[g * hd..], &vc[g * hd..]);
                    kernels::attend(isa, qh, keys, values, kv_dim, seen, scale, scores, o);
                }
            }
            ctx.barrier.wait();

            // D: output projection, added to the residual stream.
            {
                // SAFETY: nobody writes `attn` in this phase.
                let attn = unsafe { ctx.attn.read() };
                kernels::quantize_row(isa, &attn[..n * dim], &mut acts[..n * dim / QK]);
            }
            for rows in claim(counter(l, 2), dim, ROWS_PER_CHUNK) {
                kernels::matmul(isa, &layer.wo, rows.clone(), acts, n, tmp);
                self.add_rows(ctx, &rows, tmp);
            }
            ctx.barrier.wait();

            // E: feed-forward gate and up, fused into SiLU(gate) * up.
            {
                // SAFETY: nobody writes `x` in this phase.
                let x = unsafe { ctx.x.read() };
                self.norm_quantize(&x[..n * dim], &layer.ffn_norm, norm, acts);
            }
            for units in claim(counter(l, 3), ff, ROWS_PER_CHUNK) {
                let rows = units.start * 2..units.end * 2;
                kernels::matmul(isa, &layer.w_gate_up, rows.clone(), acts, n, tmp);
                let len = rows.len();
                for t in 0..n {
                    // SAFETY: these `h` entries of token `t` are this thread's.
                    let h = unsafe { ctx.h.write(t * ff + units.start..t * ff + units.end) };
                    let gu = &tmp[t * len..(t + 1) * len];
                    for (hv, pair) in h.iter_mut().zip(gu.chunks_exact(2)) {
                        let (g, u) = (pair[0], pair[1]);
                        *hv = g / (1.0 + (-g).exp()) * u;
                    }
                }
            }
            ctx.barrier.wait();

            // F: down projection, added to the residual stream.
            {
                // SAFETY: nobody writes `h` in this phase.
                let h = unsafe { ctx.h.read() };
                kernels::quantize_row(isa, &h[..n * ff], &mut acts[..n * ff / QK]);
            }
            for rows in claim(counter(l, 4), dim, ROWS_PER_CHUNK) {
                kernels::matmul(isa, &layer.w_down, rows.clone(), acts, n, tmp);
                self.add_rows(ctx, &rows, tmp);
            }
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
        for rows in claim(counter(self.layers.len(), 0), out.rows, LOGITS_PER_CHUNK) {
            // SAFETY: these logits are this thread's.
            let logits = unsafe { ctx.logits.write(rows.clone()) };
            kernels::matmul(isa, out, rows, acts, 1, logits);
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
            kernels::quantize_row(self.isa, nt, &mut acts[t * dim / QK..(t + 1) * dim / QK]);
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

/// Matrix rows per unit of work (a multiple of 16: rotary pairs and the
/// four-row weight groups never straddle two units).
const ROWS_PER_CHUNK: usize = 64;
/// Output-projection rows per unit of work.
const LOGITS_PER_CHUNK: usize = 1024;
/// Phases with a work counter in each layer (B to F in `run_thread`).
const PHASES: usize = 5;

/// Units of `0..total`, `size` at a time, handed out to whichever thread asks
/// first: a thread that falls behind (preempted by another process, say) has
/// its remaining work taken over instead of being waited for.
fn claim(
    counter: &AtomicUsize,
    total: usize,
    size: usize,
) -> impl Iterator<Item = Range<usize>> + '_ {
    std::iter::from_fn(move || {
        let start = counter.fetch_add(1, Ordering::Relaxed).saturating_mul(size);
        (start < total).then(|| start..(start + size).min(total))
    })
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
    /// Work counters of the phases of one pass (see `claim`).
    counters: Vec<AtomicUsize>,
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
    pub fn new(model: &Transformer, capacity: usize) -> Session {
        let cfg = &model.cfg;
        let capacity = capacity.clamp(1, cfg.context);
        let kv = capacity * cfg.kv_dim();
        let c = PROMPT_CHUNK;
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
            counters: (0..cfg.n_layer * PHASES + 1)
                .map(|_| AtomicUsize::new(0))
                .collect(),
            locals: (0..model.threads)
                .map(|_| Local {
                    acts: vec![BlockQ8::default(); c * cfg.ffn_dim.max(cfg.dim) / QK],
                    tmp: vec![0.0; (c * 2 * ROWS_PER_CHUNK).max(LOGITS_PER_CHUNK)],
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
    barrier: &'a SpinBarrier,
    /// One work counter per phase of the pass, zeroed before it starts.
    counters: &'a [AtomicUsize],
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
    use crate::kernels::testutil::{lcg, random_matrix};

    /// A two-layer model with random weights: 4 heads of 16, 2 KV heads.
    fn tiny(threads: usize) -> Transformer {
        let mut seed = 11u64;
        let cfg = Config {
            n_layer: 2,
            dim: 64,
            n_head: 4,
            n_kv_head: 2,
            head_dim: 16,
            ffn_dim: 96,
            vocab: 100,
            context: 256,
            eps: 1e-5,
            rope_base: 10_000.0,
        };
        let mut m = |ty, rows, cols| random_matrix(ty, rows, cols, &mut seed);
        let layers = (0..cfg.n_layer)
            .map(|_| LayerWeights {
                attn_norm: vec![1.0; 64],
                wq: m(WeightType::Q4_1, 64, 64),
                wk: m(WeightType::Q4_1, 32, 64),
                wv: m(WeightType::Q4_1, 32, 64),
                wo: m(WeightType::Q4_1, 64, 64),
                ffn_norm: vec![1.0; 64],
                w_gate: m(WeightType::Q4_1, 96, 64),
                w_up: m(WeightType::Q4_1, 96, 64),
                w_down: m(WeightType::Q8_0, 64, 96),
            })
            .collect();
        let embed = m(WeightType::Q8_0, 100, 64);
        Transformer::new(cfg, embed, layers, vec![1.0; 64], None, threads).unwrap()
    }

    fn tokens(n: usize) -> Vec<u32> {
        let mut seed = 5u64;
        (0..n).map(|_| lcg(&mut seed) % 100).collect()
    }

    /// Runs `toks` in chunks of `chunk` and returns the last logits.
    fn run(model: &Transformer, toks: &[u32], chunk: usize) -> Vec<f32> {
        let mut s = Session::new(model, toks.len());
        let mut last = Vec::new();
        for c in toks.chunks(chunk) {
            last = model.forward(&mut s, c).unwrap().to_vec();
        }
        last
    }

    #[test]
    fn chunking_and_thread_count_do_not_change_the_result() {
        // Every output row is computed by the same instructions whichever
        // thread claims it, and every token likewise in a batch or alone: the
        // logits are bit-identical.
        let toks = tokens(150);
        let one = tiny(1);
        let reference = run(&one, &toks, PROMPT_CHUNK);
        assert_eq!(run(&one, &toks, 1), reference);
        assert_eq!(run(&one, &toks, 7), reference);
        assert_eq!(run(&tiny(3), &toks, PROMPT_CHUNK), reference);
        assert!(reference.iter().all(|v| v.is_finite()));
    }

    #[test]
    fn simd_and_scalar_kernels_agree() {
        let toks = tokens(40);
        let fast = tiny(2);
        let mut slow = tiny(2);
        slow.use_scalar_kernels();
        let (a, b) = (
            run(&fast, &toks, PROMPT_CHUNK),
            run(&slow, &toks, PROMPT_CHUNK),
        );
        let diff: f32 = a.iter().zip(&b).map(|(x, y)| (x - y) * (x - y)).sum();
        let norm: f32 = b.iter().map(|y| y * y).sum();
        assert!(
            (diff / norm).sqrt() < 0.05,
            "relative error {}",
            (diff / norm).sqrt()
        );
    }

    #[test]
    fn bad_shapes_and_full_sessions_are_errors() {
        let model = tiny(1);
        let mut s = Session::new(&model, 2);
        assert!(model.forward(&mut s, &[1, 2, 3]).is_err(), "over capacity");
        assert!(
            model.forward(&mut s, &[1000]).is_err(),
            "outside the vocabulary"
        );
        assert!(model.forward(&mut s, &[]).is_err(), "empty");
        assert!(model.forward(&mut s, &[1, 2]).is_ok());
        let mut seed = 1;
        let cfg = model.config().clone();
        let bad = Transformer::new(
            cfg,
            random_matrix(WeightType::Q8_0, 99, 64, &mut seed),
            Vec::new(),
            vec![1.0; 64],
            None,
            1,
        );
        assert!(bad.is_err());
    }

    #[test]
    fn claimed_units_cover_the_range_once() {
        let counter = AtomicUsize::new(0);
        let units: Vec<_> = claim(&counter, 150, 64).collect();
        assert_eq!(units, vec![0..64, 64..128, 128..150]);
        assert_eq!(claim(&counter, 150, 64).count(), 0, "all handed out");
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
