//! One vector store's chunks in memory, and the three ways to search them:
//!
//! - `similarity`: exact cosine over every chunk (vectors are normalised once,
//!   when the index is built, so a score is one dot product);
//! - `mmr`: maximal marginal relevance — `fetchK` nearest, then picked one by one
//!   trading relevance against likeness to the ones already picked (`lambda`);
//! - `hybrid` (weir's own): BM25 over the same chunks' words, fused with the
//!   vector ranking by reciprocal rank, so an exact identifier ("XJ-4471-B")
//!   that embeddings blur still ranks. Plain RRF is symmetric: a chunk that is
//!   first by words and second by vectors ties with one first by vectors and
//!   second by words, even when the second matched only the common half of a
//!   part number. So each keyword rank counts in proportion to its BM25 score
//!   over the best one's: a partial match counts for less than an exact one.
//!
//! A large index is not scanned on its exact vectors, which would stream 1.5 KB
//! a chunk (at 384 dimensions) per question. From `QUANTISED_FROM_ROWS` chunks
//! on, every row is scored on 8-bit codes (a quarter of the bytes) and the best
//! few rescored exactly. From `BINARY_FROM_ROWS` on even that is too much memory
//! traffic (384 MB a question at a million chunks, memory-bound at ~50 ms on two
//! busy cores), so a stage comes first: each row also keeps one bit a
//! dimension, whether it lies above or below the store's mean vector there (48
//! bytes at 384 dimensions, plus two floats). The question, at 4 bits a
//! dimension, is dotted with those signs (±1) from 16-entry tables, one per 4
//! dimensions, which AVX2's byte shuffle looks up for 32 rows at once; scaled by
//! the row's two floats that estimates its score (RaBitQ's estimator), far
//! better than counting differing bits would (on hard clustered data, recall@10
//! 0.99–1.0 where counting differing bits gave 0.79–0.97 from the same
//! shortlist). The best
//! few thousand rows by that estimate go on to the 8-bit scores, and the best
//! of those to the exact ones. Centering on the mean matters: embeddings share
//! a common direction and cluster by topic, and signs taken around zero would
//! be alike for every row.
//!
//! An index is immutable once built; a write builds a new one (the services
//! floor caches them per store and swaps them).

use std::collections::HashMap;

use super::Document;

/// Reciprocal rank fusion's constant (the usual 60: ranks deep in one list
/// still count, the top of either list dominates).
const RRF_K: f32 = 60.0;
/// BM25's term-frequency saturation and length normalisation.
const BM25_K1: f32 = 1.2;
const BM25_B: f32 = 0.75;
/// From this many chunks on, a scan is split across the cores.
const PARALLEL_SCAN_ROWS: usize = 32_768;
/// From this many chunks on, a scan reads the 8-bit codes first.
const QUANTISED_FROM_ROWS: usize = 16_384;
/// From this many chunks on, the index keeps 1-bit codes and a scan ranks every
/// row on them first. Below it they do not pay: at 100,000 chunks the 8-bit
/// scan (38 MB) takes about as long as rescoring the shortlist, whose rows are
/// each a few cache and TLB misses away, and the bits would only cost memory.
const BINARY_FROM_ROWS: usize = 200_000;
/// How many rows the 1-bit ranking passes on to the 8-bit scores (at least;
/// more for a large `k`). Generous: a bit a dimension ranks coarsely (1,024
/// were enough for the benchmark's clusters, harder ones needed 4,096 for
/// recall@10 >= 0.99), and rescoring them costs a millisecond or two.
const BINARY_CANDIDATES: usize = 4_096;

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum SearchType {
    Similarity,
    Mmr { fetch_k: usize, lambda: f32 },
    Hybrid,
}

/// One search.
pub struct Query<'a> {
    /// The question's embedding (any length-matching vector; normalised here).
    pub vector: &'a [f32],
    /// The question's words, for BM25.
    pub text: &'a str,
    pub top_k: usize,
    pub search: SearchType,
    /// Chunks attached to one chat are seen only from that chat.
    pub chat_id: Option<&'a str>,
}

/// A stored chunk as the index holds it.
pub struct Entry {
    pub document: Document,
    pub embedding: Vec<f32>,
    pub chat_id: Option<String>,
}

pub struct Index {
    dims: usize,
    documents: Vec<Document>,
    chat_ids: Vec<Option<String>>,
    /// Row-major, one normalised vector per document.
    vectors: Vec<f32>,
    /// The same rows quantised to 8 bits (`codes[i] * scales[row]`), a quarter of
    /// the memory to stream through: a large index is scanned on these first and
    /// the best candidates rescored on the exact vectors.
    codes: Vec<i8>,
    scales: Vec<f32>,
    /// The 1-bit codes, for an index large enough to need them.
    signs: Option<SignCodes>,
    /// How many rows the 1-bit codes shortlist (at least).
    binary_candidates: usize,
    /// Whether any chunk is attached to a chat (if none, every row is
    /// visible, and the 1-bit scan need not ask: asking costs a cache miss
    /// for each of the tens of thousands of rows it keeps along the way).
    any_chat: bool,
    words: Bm25,
}

/// One bit a dimension per row, and what turns a question's dot product with
/// those bits into an estimate of its score (see the module doc).
struct SignCodes {
    /// The mean of the normalised rows; a row's residual is row - centre.
    centre: Vec<f32>,
    /// `dims.div_ceil(8)` bytes a row, bit d set where the residual is above
    /// zero, stored for a byte shuffle: rows in blocks of 32 (the last padded
    /// with zero rows), and within a block byte p of its 32 rows side by side,
    /// so one 32-byte load holds the same byte of 32 rows.
    blocks: Vec<u64>,
    /// Per row, |residual|² / |residual|₁: the question's dot product with the
    /// residual's signs (±1), times this, estimates its dot product with the
    /// residual (RaBitQ's estimator for one bit a dimension).
    factor: Vec<f32>,
    /// Per row, the centre's dot product with the residual: the part of the
    /// row's score that does not depend on the question (exact).
    offset: Vec<f32>,
}

impl Index {
    /// Builds the index; every embedding must have the same length.
    pub fn new(entries: Vec<Entry>) -> Result<Index, String> {
        Index::build(entries, BINARY_FROM_ROWS, BINARY_CANDIDATES)
    }

    /// `new`, with 1-bit codes from `binary_from_rows` rows on, passing
    /// `binary_candidates` rows on to the 8-bit scores (tests force the codes
    /// on small indexes, and shortlists short enough to matter there).
    fn build(
        entries: Vec<Entry>,
        binary_from_rows: usize,
        binary_candidates: usize,
    ) -> Result<Index, String> {
        let dims = entries.first().map_or(0, |e| e.embedding.len());
        let mut vectors = Vec::with_capacity(dims * entries.len());
        let mut documents = Vec::with_capacity(entries.len());
        let mut chat_ids = Vec::with_capacity(entries.len());
        for entry in entries {
            if entry.embedding.len() != dims {
                return Err(format!(
                    "the store holds embeddings of {dims} and of {} dimensions: it was filled \
                     with two embedding models; upsert again with cleanup \"full\"",
                    entry.embedding.len()
                ));
            }
            let start = vectors.len();
            vectors.extend_from_slice(&entry.embedding);
            normalise(&mut vectors[start..]);
            documents.push(entry.document);
            chat_ids.push(entry.chat_id);
        }
        let words = Bm25::new(documents.iter().map(|d| d.page_content.as_str()));
        let mut codes = vec![0i8; vectors.len()];
        let mut scales = Vec::with_capacity(documents.len());
        if dims > 0 {
            for (row, out) in vectors.chunks_exact(dims).zip(codes.chunks_exact_mut(dims)) {
                scales.push(quantise(row, out));
            }
        }
        let signs = (dims > 0 && documents.len() >= binary_from_rows)
            .then(|| SignCodes::new(&vectors, dims));
        let any_chat = chat_ids.iter().any(Option::is_some);
        Ok(Index {
            dims,
            documents,
            chat_ids,
            vectors,
            codes,
            scales,
            signs,
            binary_candidates,
            any_chat,
            words,
        })
    }

    pub fn len(&self) -> usize {
        self.documents.len()
    }

    pub fn is_empty(&self) -> bool {
        self.documents.is_empty()
    }

    pub fn dims(&self) -> usize {
        self.dims
    }

    /// Bytes the vectors take, exact and quantised to 8 and 1 bits (the
    /// benchmark's memory figure).
    pub fn vector_bytes(&self) -> usize {
        self.vectors.len() * std::mem::size_of::<f32>()
            + self.codes.len()
            + self.scales.len() * std::mem::size_of::<f32>()
            + self.signs.as_ref().map_or(0, SignCodes::bytes)
    }

    /// The best `top_k` documents for the query, best first, with their scores
    /// (cosine for similarity and mmr, fused rank score for hybrid).
    pub fn search(&self, query: &Query<'_>) -> Result<Vec<(&Document, f32)>, String> {
        if self.is_empty() || query.top_k == 0 {
            return Ok(Vec::new());
        }
        if query.vector.len() != self.dims {
            return Err(format!(
                "the question's embedding has {} dimensions but the store's chunks have {}: \
                 the embeddings node changed since the upsert; upsert again",
                query.vector.len(),
                self.dims
            ));
        }
        let mut q = query.vector.to_vec();
        normalise(&mut q);
        let visible = |i: usize| match &self.chat_ids[i] {
            None => true,
            Some(chat) => query.chat_id == Some(chat.as_str()),
        };
        let hits = match query.search {
            SearchType::Similarity => self.nearest(&q, query.top_k, &visible),
            SearchType::Mmr { fetch_k, lambda } => {
                let candidates = self.nearest(&q, fetch_k.max(query.top_k), &visible);
                self.mmr(candidates, query.top_k, lambda)
            }
            SearchType::Hybrid => {
                let depth = (query.top_k * 10).max(50);
                let by_vector = self.nearest(&q, depth, &visible);
                let mut by_words = self.words.top(query.text, depth, &visible);
                let best = by_words
                    .first()
                    .map_or(1.0, |&(_, s)| s.max(f32::MIN_POSITIVE));
                for (_, score) in &mut by_words {
                    *score /= best;
                }
                let by_vector = by_vector.into_iter().map(|(i, _)| (i, 1.0)).collect();
                fuse(&[by_vector, by_words], query.top_k)
            }
        };
        Ok(hits
            .into_iter()
            .map(|(i, score)| (&self.documents[i], score))
            .collect())
    }

    fn row(&self, i: usize) -> &[f32] {
        &self.vectors[i * self.dims..(i + 1) * self.dims]
    }

    /// The `k` visible rows most like `q`, best first.
    fn nearest(
        &self,
        q: &[f32],
        k: usize,
        visible: &(dyn Fn(usize) -> bool + Sync),
    ) -> Vec<(usize, f32)> {
        let n = self.len();
        if n >= QUANTISED_FROM_ROWS || self.signs.is_some() {
            // Candidates by the 8-bit codes (of every row, or of the best by
            // the 1-bit codes), then their exact scores.
            let mut codes = vec![0i8; q.len()];
            let q_scale = quantise(q, &mut codes);
            let dot_i8 = dot_i8_kernel();
            let score_i8 = |i: usize| {
                let row = &self.codes[i * self.dims..(i + 1) * self.dims];
                dot_i8(&codes, row) as f32 * q_scale * self.scales[i]
            };
            let depth = k * 4 + 16;
            let candidates = match &self.signs {
                None => self.scan(n, depth, score_i8, visible),
                Some(signs) => {
                    let want = k.saturating_mul(16).max(self.binary_candidates).min(n);
                    let rows = signs.shortlist(q, want, self.any_chat.then_some(visible));
                    // On every core too: each row is a few cache (and TLB)
                    // misses away, which a second core overlaps.
                    let rows = &rows;
                    let parts = in_slices(rows.len(), n >= PARALLEL_SCAN_ROWS, |part| {
                        let mut best = TopK::new(depth);
                        for &i in &rows[part] {
                            best.offer(i, score_i8(i));
                        }
                        best
                    });
                    let mut best = TopK::new(depth);
                    for (i, score) in parts.into_iter().flat_map(TopK::into_sorted) {
                        best.offer(i, score);
                    }
                    best.into_sorted()
                }
            };
            let dot = dot_kernel();
            let mut best = TopK::new(k);
            for (i, _) in candidates {
                best.offer(i, dot(q, self.row(i)));
            }
            return best.into_sorted();
        }
        let dot = dot_kernel();
        self.scan(n, k, |i| dot(q, self.row(i)), visible)
    }

    /// The `k` best visible rows by `score`; a large index in slices on every
    /// core (each keeps its own best `k`, merged at the end).
    fn scan(
        &self,
        n: usize,
        k: usize,
        score: impl Fn(usize) -> f32 + Sync,
        visible: &(dyn Fn(usize) -> bool + Sync),
    ) -> Vec<(usize, f32)> {
        let scan = |rows: std::ops::Range<usize>| {
            let mut best = TopK::new(k);
            for i in rows {
                if visible(i) {
                    best.offer(i, score(i));
                }
            }
            best
        };
        let mut best = TopK::new(k);
        for part in in_slices(n, n >= PARALLEL_SCAN_ROWS, scan) {
            for (i, score) in part.into_sorted() {
                best.offer(i, score);
            }
        }
        best.into_sorted()
    }

    /// Picks `k` of the candidates one by one: each time the one best by
    /// `lambda` x relevance - (1 - lambda) x its likeness to those already
    /// picked (each candidate's likeness updated against the newest pick only).
    fn mmr(&self, candidates: Vec<(usize, f32)>, k: usize, lambda: f32) -> Vec<(usize, f32)> {
        let mut left: Vec<(usize, f32, f32)> = candidates
            .into_iter()
            .map(|(i, relevance)| (i, relevance, f32::NEG_INFINITY))
            .collect();
        let mut picked: Vec<(usize, f32)> = Vec::with_capacity(k);
        while picked.len() < k && !left.is_empty() {
            let mut best = (0, f32::NEG_INFINITY);
            for (pos, &(_, relevance, likeness)) in left.iter().enumerate() {
                let likeness = if picked.is_empty() { 0.0 } else { likeness };
                let score = lambda * relevance - (1.0 - lambda) * likeness;
                if score > best.1 {
                    best = (pos, score);
                }
            }
            let (chosen, relevance, _) = left.remove(best.0);
            picked.push((chosen, relevance));
            for (i, _, likeness) in &mut left {
                *likeness = likeness.max(dot(self.row(*i), self.row(chosen)));
            }
        }
        picked
    }
}

/// `work` over `0..n`: in slices on every core if `parallel`, else at once; the
/// slices' results in order.
fn in_slices<T: Send>(
    n: usize,
    parallel: bool,
    work: impl Fn(std::ops::Range<usize>) -> T + Sync,
) -> Vec<T> {
    let threads = std::thread::available_parallelism().map_or(1, usize::from);
    if !parallel || threads < 2 {
        return vec![work(0..n)];
    }
    let slice = n.div_ceil(threads);
    let work = &work;
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let rows = (t * slice).min(n)..((t + 1) * slice).min(n);
                s.spawn(move || work(rows))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
            .collect()
    })
}

/// Reciprocal rank fusion of several rankings of `(row, weight)`: the `k` best
/// by Σ weight / (60 + rank).
fn fuse(rankings: &[Vec<(usize, f32)>], k: usize) -> Vec<(usize, f32)> {
    let mut scores: HashMap<usize, f32> = HashMap::new();
    for ranking in rankings {
        for (rank, &(i, weight)) in ranking.iter().enumerate() {
            *scores.entry(i).or_default() += weight / (RRF_K + rank as f32 + 1.0);
        }
    }
    let mut best = TopK::new(k);
    for (i, score) in scores {
        best.offer(i, score);
    }
    best.into_sorted()
}

/// A dot product of two rows: the AVX2/FMA version where the CPU has them
/// (chosen at run time; the build targets every x86-64), else the portable one.
fn dot(a: &[f32], b: &[f32]) -> f32 {
    dot_kernel()(a, b)
}

type DotFn = fn(&[f32], &[f32]) -> f32;

fn dot_kernel() -> DotFn {
    static KERNEL: std::sync::OnceLock<DotFn> = std::sync::OnceLock::new();
    *KERNEL.get_or_init(|| {
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma")
        {
            // SAFETY: the CPU has AVX2 and FMA (checked just above).
            return |a, b| unsafe { dot_avx2(a, b) };
        }
        dot_portable
    })
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
fn dot_avx2(a: &[f32], b: &[f32]) -> f32 {
    // Sixteen running sums (two vector registers), fused multiply-adds.
    let mut sums = [0.0f32; 16];
    let (a16, a_rest) = a.split_at(a.len() - a.len() % 16);
    let (b16, b_rest) = b.split_at(b.len() - b.len() % 16);
    for (x, y) in a16.chunks_exact(16).zip(b16.chunks_exact(16)) {
        for l in 0..16 {
            sums[l] = x[l].mul_add(y[l], sums[l]);
        }
    }
    let tail: f32 = a_rest.iter().zip(b_rest).map(|(x, y)| x * y).sum();
    sums.iter().sum::<f32>() + tail
}

fn dot_portable(a: &[f32], b: &[f32]) -> f32 {
    // Eight running sums: the compiler turns this into vector instructions.
    let mut sums = [0.0f32; 8];
    let (a8, a_rest) = a.split_at(a.len() - a.len() % 8);
    let (b8, b_rest) = b.split_at(b.len() - b.len() % 8);
    for (x, y) in a8.chunks_exact(8).zip(b8.chunks_exact(8)) {
        for l in 0..8 {
            sums[l] += x[l] * y[l];
        }
    }
    let tail: f32 = a_rest.iter().zip(b_rest).map(|(x, y)| x * y).sum();
    sums.iter().sum::<f32>() + tail
}

/// Symmetric 8-bit codes of `x` into `out`; returns the scale (code x scale ~ value).
fn quantise(x: &[f32], out: &mut [i8]) -> f32 {
    let max = x.iter().fold(0.0f32, |m, v| m.max(v.abs()));
    if max == 0.0 {
        out.fill(0);
        return 0.0;
    }
    let scale = max / 127.0;
    for (o, v) in out.iter_mut().zip(x) {
        *o = (v / scale).round().clamp(-127.0, 127.0) as i8;
    }
    scale
}

impl SignCodes {
    /// The codes of `vectors` (normalised rows of `dims` floats, `dims` > 0).
    fn new(vectors: &[f32], dims: usize) -> SignCodes {
        let rows = vectors.len() / dims;
        // Summed in f64: over a million rows, f32 sums would round away the
        // small means that matter.
        let mut sum = vec![0.0f64; dims];
        for row in vectors.chunks_exact(dims) {
            for (s, v) in sum.iter_mut().zip(row) {
                *s += f64::from(*v);
            }
        }
        let centre: Vec<f32> = sum.iter().map(|s| (s / rows as f64) as f32).collect();
        let row_bytes = dims.div_ceil(8);
        let mut blocks = vec![0u64; rows.div_ceil(BLOCK_ROWS) * row_bytes * BLOCK_ROWS / 8];
        let mut factor = Vec::with_capacity(rows);
        let mut offset = Vec::with_capacity(rows);
        let mut residual = vec![0.0f32; dims];
        let mut bytes = vec![0u8; row_bytes];
        // Branch-free, and the sums in vector lanes: the signs are random, and
        // a million rows x 384 mispredicted branches and serial additions
        // took seconds.
        for (i, row) in vectors.chunks_exact(dims).enumerate() {
            for ((r, v), c) in residual.iter_mut().zip(row).zip(&centre) {
                *r = v - c;
            }
            for (byte, eight) in bytes.iter_mut().zip(residual.chunks(8)) {
                *byte = eight
                    .iter()
                    .enumerate()
                    .fold(0, |b, (j, r)| b | u8::from(*r > 0.0) << j);
            }
            let l1 = abs_sum(&residual);
            factor.push(if l1 > 0.0 {
                dot(&residual, &residual) / l1
            } else {
                0.0
            });
            offset.push(dot(&centre, &residual));
            let block = i / BLOCK_ROWS * row_bytes * BLOCK_ROWS;
            for (p, &byte) in bytes.iter().enumerate() {
                let at = block + p * BLOCK_ROWS + i % BLOCK_ROWS;
                blocks[at / 8] |= u64::from(byte) << (at % 8 * 8);
            }
        }
        SignCodes {
            centre,
            blocks,
            factor,
            offset,
        }
    }

    fn bytes(&self) -> usize {
        self.blocks.len() * std::mem::size_of::<u64>()
            + (self.centre.len() + self.factor.len() + self.offset.len())
                * std::mem::size_of::<f32>()
    }

    /// About `want` visible rows (fewer only if fewer are visible; every row
    /// is if `visible` is None) whose estimated scores for `q` are the highest,
    /// in no particular order.
    fn shortlist(
        &self,
        q: &[f32],
        want: usize,
        visible: Option<&(dyn Fn(usize) -> bool + Sync)>,
    ) -> Vec<usize> {
        let dims = self.centre.len();
        let row_bytes = dims.div_ceil(8);
        // The question's residual at 4 bits a dimension: level u in 0..=15
        // stands for (u - 7.5) x step. Its dot product with a row's signs is
        // step x (Σ (2u - 15) over the row's set bits - Σ (u - 7.5)); the
        // first sum is looked up 4 dimensions at a time, in a 16-entry table
        // per 4 dimensions (entries within ±60: bytes).
        let max = q
            .iter()
            .zip(&self.centre)
            .fold(0.0f32, |m, (v, c)| m.max((v - c).abs()));
        let step = if max > 0.0 { max / 7.5 } else { 1.0 };
        let mut weights = vec![0i8; row_bytes * 8];
        let mut level_sum = 0.0f32;
        for (w, (v, c)) in weights.iter_mut().zip(q.iter().zip(&self.centre)) {
            let level = ((v - c) / step + 7.5).round().clamp(0.0, 15.0);
            level_sum += level;
            *w = 2 * level as i8 - 15;
        }
        let bias = level_sum - 7.5 * dims as f32;
        let tables: Vec<[i8; 16]> = weights
            .chunks_exact(4)
            .map(|w| {
                std::array::from_fn(|x| (0..4).filter(|t| x >> t & 1 == 1).map(|t| w[t]).sum())
            })
            .collect();
        let dot_signs = sign_dot_kernel();
        let tables = &tables;
        let block_words = row_bytes * BLOCK_ROWS / 8;
        let n = self.factor.len();
        let slices = in_slices(n.div_ceil(BLOCK_ROWS), n >= PARALLEL_SCAN_ROWS, |blocks| {
            let mut best = Shortlist::new(want);
            // A few thousand rows at a time: the kernel's tables are set up
            // once per run, and the scores stay in the first-level cache.
            let mut dots = [0i32; 64 * BLOCK_ROWS];
            let mut estimates = [0.0f32; 64 * BLOCK_ROWS];
            let mut block = blocks.start;
            while block < blocks.end {
                let end = (block + 64).min(blocks.end);
                let rows = block * BLOCK_ROWS..(end * BLOCK_ROWS).min(n);
                let dots = &mut dots[..(end - block) * BLOCK_ROWS];
                dot_signs(
                    tables,
                    &self.blocks[block * block_words..end * block_words],
                    dots,
                );
                let estimates = &mut estimates[..rows.len()];
                for (((e, &dot), f), o) in estimates
                    .iter_mut()
                    .zip(dots.iter())
                    .zip(&self.factor[rows.clone()])
                    .zip(&self.offset[rows.clone()])
                {
                    *e = f * (step * (dot as f32 - bias)) + o;
                }
                for (i, &estimate) in rows.zip(estimates.iter()) {
                    if estimate >= best.cut && visible.is_none_or(|visible| visible(i)) {
                        best.push(i, estimate);
                    }
                }
                block = end;
            }
            best
        });
        let mut best = Shortlist::new(want);
        for slice in slices {
            for (i, estimate) in slice.items {
                best.push(i, estimate);
            }
        }
        best.finish()
    }
}

/// Σ |x|, in eight running sums (the compiler turns them into vector lanes).
fn abs_sum(x: &[f32]) -> f32 {
    let mut sums = [0.0f32; 8];
    let (x8, rest) = x.split_at(x.len() - x.len() % 8);
    for eight in x8.chunks_exact(8) {
        for l in 0..8 {
            sums[l] += eight[l].abs();
        }
    }
    sums.iter().sum::<f32>() + rest.iter().map(|v| v.abs()).sum::<f32>()
}

/// The best `want` of many scored rows, kept cheaply: rows are appended while
/// they reach `cut`, and when twice `want` have piled up the best `want` are
/// selected (linear time) and `cut` rises to the worst of them. Most rows of a
/// large scan then fail one comparison; a sorted buffer of thousands would
/// cost more than the scan.
struct Shortlist {
    want: usize,
    cut: f32,
    items: Vec<(usize, f32)>,
}

impl Shortlist {
    fn new(want: usize) -> Shortlist {
        Shortlist {
            want,
            cut: f32::NEG_INFINITY,
            items: Vec::new(),
        }
    }

    fn push(&mut self, i: usize, estimate: f32) {
        if estimate.is_nan() {
            return;
        }
        self.items.push((i, estimate));
        if self.items.len() >= self.want.saturating_mul(2) {
            self.shrink();
        }
    }

    fn shrink(&mut self) {
        if self.want == 0 {
            self.items.clear();
            self.cut = f32::INFINITY;
            return;
        }
        if self.items.len() > self.want {
            self.items
                .select_nth_unstable_by(self.want - 1, |a, b| b.1.total_cmp(&a.1));
            self.items.truncate(self.want);
        }
        if self.items.len() == self.want {
            self.cut = self.items[self.want - 1].1;
        }
    }

    fn finish(mut self) -> Vec<usize> {
        self.shrink();
        self.items.into_iter().map(|(i, _)| i).collect()
    }
}

/// Rows per block of the 1-bit codes: one AVX2 register holds a byte of each.
const BLOCK_ROWS: usize = 32;

/// For each row of whole `blocks` (laid out as in `SignCodes`), the sum of
/// `tables[g][x]` over its nibbles x (g counting nibbles, low one first).
/// Table entries lie within ±60 (4 dimensions' weights of at most 15), which
/// the AVX2 kernel relies on: a byte's two lookups then sum within a byte.
type SignDotFn = fn(&[[i8; 16]], &[u64], &mut [i32]);

/// The 1-bit kernel: AVX2's byte shuffle looks a nibble of 32 rows up at once
/// where the CPU has it (chosen at run time), else one at a time.
fn sign_dot_kernel() -> SignDotFn {
    static KERNEL: std::sync::OnceLock<SignDotFn> = std::sync::OnceLock::new();
    *KERNEL.get_or_init(|| {
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU has AVX2 (checked just above).
            return |tables, blocks, out| unsafe { sign_dot_avx2(tables, blocks, out) };
        }
        sign_dot_portable
    })
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn sign_dot_avx2(tables: &[[i8; 16]], blocks: &[u64], out: &mut [i32]) {
    use std::arch::x86_64::*;
    let block_words = tables.len() / 2 * BLOCK_ROWS / 8;
    if block_words == 0 {
        out.fill(0);
        return;
    }
    // Each table in both 128-bit lanes (the shuffle looks up within a lane).
    let half =
        |t: &[i8; 16], from: usize| i64::from_le_bytes(std::array::from_fn(|j| t[from + j] as u8));
    let luts: Vec<__m256i> = tables
        .iter()
        .map(|t| _mm256_broadcastsi128_si256(_mm_set_epi64x(half(t, 8), half(t, 0))))
        .collect();
    let nibble = _mm256_set1_epi8(0x0f);
    for (block, dots) in blocks
        .chunks_exact(block_words)
        .zip(out.chunks_exact_mut(BLOCK_ROWS))
    {
        // 32-bit sums of rows 0-7, 8-15, 16-23, 24-31.
        let mut sums = [_mm256_setzero_si256(); 4];
        // Summed in 16 bits for up to 256 bytes a row (each adds at most 120
        // either way), then widened.
        for (run, run_luts) in block.chunks(256 * 4).zip(luts.chunks(512)) {
            let mut low = _mm256_setzero_si256();
            let mut high = _mm256_setzero_si256();
            for (w, pair) in run.chunks_exact(4).zip(run_luts.chunks_exact(2)) {
                let bytes = _mm256_set_epi64x(w[3] as i64, w[2] as i64, w[1] as i64, w[0] as i64);
                let lo = _mm256_and_si256(bytes, nibble);
                let hi = _mm256_and_si256(_mm256_srli_epi16::<4>(bytes), nibble);
                let both = _mm256_add_epi8(
                    _mm256_shuffle_epi8(pair[0], lo),
                    _mm256_shuffle_epi8(pair[1], hi),
                );
                low = _mm256_add_epi16(low, _mm256_cvtepi8_epi16(_mm256_castsi256_si128(both)));
                high = _mm256_add_epi16(
                    high,
                    _mm256_cvtepi8_epi16(_mm256_extracti128_si256::<1>(both)),
                );
            }
            let widen = |v: __m128i| _mm256_cvtepi16_epi32(v);
            sums[0] = _mm256_add_epi32(sums[0], widen(_mm256_castsi256_si128(low)));
            sums[1] = _mm256_add_epi32(sums[1], widen(_mm256_extracti128_si256::<1>(low)));
            sums[2] = _mm256_add_epi32(sums[2], widen(_mm256_castsi256_si128(high)));
            sums[3] = _mm256_add_epi32(sums[3], widen(_mm256_extracti128_si256::<1>(high)));
        }
        for (sum, eight) in sums.iter().zip(dots.chunks_exact_mut(8)) {
            // SAFETY: `eight` is 8 i32s (32 writable bytes), and the store is
            // unaligned.
            unsafe { _mm256_storeu_si256(eight.as_mut_ptr().cast(), *sum) };
        }
    }
}

fn sign_dot_portable(tables: &[[i8; 16]], blocks: &[u64], out: &mut [i32]) {
    let block_words = tables.len() / 2 * BLOCK_ROWS / 8;
    if block_words == 0 {
        out.fill(0);
        return;
    }
    for (block, dots) in blocks
        .chunks_exact(block_words)
        .zip(out.chunks_exact_mut(BLOCK_ROWS))
    {
        dots.fill(0);
        // Byte p of the 32 rows is in the 4 words from 4p on.
        for (words, pair) in block.chunks_exact(4).zip(tables.chunks_exact(2)) {
            let bytes = words.iter().flat_map(|w| w.to_le_bytes());
            for (dot, byte) in dots.iter_mut().zip(bytes) {
                *dot += i32::from(pair[0][usize::from(byte & 15)])
                    + i32::from(pair[1][usize::from(byte >> 4)]);
            }
        }
    }
}

/// The integer dot product of two code rows.
#[cfg(test)]
fn dot_i8(a: &[i8], b: &[i8]) -> i32 {
    dot_i8_kernel()(a, b)
}

type DotI8Fn = fn(&[i8], &[i8]) -> i32;

/// The integer dot product: AVX2 where the CPU has it, chosen once.
fn dot_i8_kernel() -> DotI8Fn {
    static KERNEL: std::sync::OnceLock<DotI8Fn> = std::sync::OnceLock::new();
    *KERNEL.get_or_init(|| {
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU has AVX2 (checked just above).
            return |a, b| unsafe { dot_i8_avx2(a, b) };
        }
        dot_i8_portable
    })
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn dot_i8_avx2(a: &[i8], b: &[i8]) -> i32 {
    dot_i8_portable(a, b)
}

#[inline(always)]
fn dot_i8_portable(a: &[i8], b: &[i8]) -> i32 {
    // 16-bit products summed in 32-bit lanes: what pmaddwd does.
    let mut sums = [0i32; 16];
    let (a16, a_rest) = a.split_at(a.len() - a.len() % 16);
    let (b16, b_rest) = b.split_at(b.len() - b.len() % 16);
    for (x, y) in a16.chunks_exact(16).zip(b16.chunks_exact(16)) {
        for l in 0..16 {
            sums[l] += i32::from(i16::from(x[l]) * i16::from(y[l]));
        }
    }
    let tail: i32 = a_rest
        .iter()
        .zip(b_rest)
        .map(|(x, y)| i32::from(*x) * i32::from(*y))
        .sum();
    sums.iter().sum::<i32>() + tail
}

fn normalise(v: &mut [f32]) {
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    if norm > 0.0 {
        for x in v {
            *x /= norm;
        }
    }
}

/// The `k` highest scores seen, kept in a small sorted buffer (k is small).
struct TopK {
    k: usize,
    items: Vec<(usize, f32)>,
}

impl TopK {
    fn new(k: usize) -> Self {
        TopK {
            k,
            items: Vec::with_capacity(k + 1),
        }
    }

    fn offer(&mut self, i: usize, score: f32) {
        if self.k == 0 || score.is_nan() {
            return;
        }
        if self.items.len() == self.k && self.items.last().is_some_and(|l| score <= l.1) {
            return;
        }
        let at = self
            .items
            .partition_point(|&(j, s)| s > score || (s == score && j < i));
        self.items.insert(at, (i, score));
        self.items.truncate(self.k);
    }

    fn into_sorted(self) -> Vec<(usize, f32)> {
        self.items
    }
}

/// BM25 over the chunks' words.
struct Bm25 {
    postings: HashMap<String, Vec<(usize, u32)>>,
    lengths: Vec<u32>,
    average: f32,
}

impl Bm25 {
    fn new<'a>(texts: impl Iterator<Item = &'a str>) -> Bm25 {
        let mut postings: HashMap<String, Vec<(usize, u32)>> = HashMap::new();
        let mut lengths = Vec::new();
        for (i, text) in texts.enumerate() {
            let mut counts: HashMap<String, u32> = HashMap::new();
            let mut length = 0u32;
            for term in terms(text) {
                *counts.entry(term).or_default() += 1;
                length += 1;
            }
            for (term, n) in counts {
                postings.entry(term).or_default().push((i, n));
            }
            lengths.push(length);
        }
        let average = if lengths.is_empty() {
            0.0
        } else {
            lengths.iter().map(|&l| l as f32).sum::<f32>() / lengths.len() as f32
        };
        Bm25 {
            postings,
            lengths,
            average,
        }
    }

    fn top(
        &self,
        query: &str,
        k: usize,
        visible: &(dyn Fn(usize) -> bool + Sync),
    ) -> Vec<(usize, f32)> {
        let n = self.lengths.len() as f32;
        let mut scores: HashMap<usize, f32> = HashMap::new();
        let mut seen = std::collections::HashSet::new();
        for term in terms(query) {
            if seen.contains(&term) {
                continue;
            }
            let Some(list) = self.postings.get(&term) else {
                seen.insert(term);
                continue;
            };
            let df = list.len() as f32;
            let idf = ((n - df + 0.5) / (df + 0.5) + 1.0).ln();
            for &(i, tf) in list {
                let tf = tf as f32;
                let length = self.lengths[i] as f32 / self.average.max(1.0);
                let score =
                    idf * tf * (BM25_K1 + 1.0) / (tf + BM25_K1 * (1.0 - BM25_B + BM25_B * length));
                *scores.entry(i).or_default() += score;
            }
            seen.insert(term);
        }
        let mut best = TopK::new(k);
        for (i, score) in scores {
            if visible(i) {
                best.offer(i, score);
            }
        }
        best.into_sorted()
    }
}

/// Lower-cased words; a word joined by `-`, `_`, `.` or `/` (a part number, a
/// file name) counts whole and by its parts.
fn terms(text: &str) -> impl Iterator<Item = String> + '_ {
    text.split(|c: char| !(c.is_alphanumeric() || matches!(c, '-' | '_' | '.' | '/')))
        .map(|w| w.trim_matches(|c: char| matches!(c, '-' | '_' | '.' | '/')))
        .filter(|w| !w.is_empty())
        .flat_map(|word| {
            let whole = word.to_lowercase();
            let parts: Vec<String> = if word.contains(['-', '_', '.', '/']) {
                word.split(['-', '_', '.', '/'])
                    .filter(|p| !p.is_empty())
                    .map(str::to_lowercase)
                    .collect()
            } else {
                Vec::new()
            };
            std::iter::once(whole).chain(parts)
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Map;

    fn entry(text: &str, v: &[f32], chat: Option<&str>) -> Entry {
        Entry {
            document: Document::new(text, Map::new()),
            embedding: v.to_vec(),
            chat_id: chat.map(str::to_owned),
        }
    }

    fn texts(hits: &[(&Document, f32)]) -> Vec<String> {
        hits.iter().map(|(d, _)| d.page_content.clone()).collect()
    }

    fn query<'a>(v: &'a [f32], text: &'a str, k: usize, search: SearchType) -> Query<'a> {
        Query {
            vector: v,
            text,
            top_k: k,
            search,
            chat_id: None,
        }
    }

    #[test]
    fn similarity_ranks_by_cosine() -> Result<(), String> {
        let index = Index::new(vec![
            entry("east", &[1.0, 0.0], None),
            entry("north", &[0.0, 3.0], None),
            entry("north-east", &[1.0, 1.0], None),
        ])?;
        let hits = index.search(&query(&[0.1, 1.0], "", 2, SearchType::Similarity))?;
        assert_eq!(texts(&hits), ["north", "north-east"]);
        assert!(
            index
                .search(&query(&[1.0], "", 2, SearchType::Similarity))
                .is_err()
        );
        Ok(())
    }

    #[test]
    fn mixed_dimensions_are_refused() {
        assert!(
            Index::new(vec![
                entry("a", &[1.0], None),
                entry("b", &[1.0, 0.0], None)
            ])
            .is_err()
        );
    }

    #[test]
    fn mmr_skips_near_duplicates() -> Result<(), String> {
        let index = Index::new(vec![
            entry("a", &[1.0, 0.0, 0.0], None),
            entry("a again", &[0.99, 0.01, 0.0], None),
            entry("b", &[0.7, 0.7, 0.0], None),
        ])?;
        let plain = index.search(&query(&[1.0, 0.0, 0.0], "", 2, SearchType::Similarity))?;
        assert_eq!(texts(&plain), ["a", "a again"]);
        let mmr = SearchType::Mmr {
            fetch_k: 3,
            lambda: 0.3,
        };
        let diverse = index.search(&query(&[1.0, 0.0, 0.0], "", 2, mmr))?;
        assert_eq!(texts(&diverse), ["a", "b"]);
        Ok(())
    }

    #[test]
    fn hybrid_finds_an_exact_identifier() -> Result<(), String> {
        let index = Index::new(vec![
            entry("Part XJ-4471-A is a valve", &[1.0, 0.0], None),
            entry("Part XJ-4471-B is a pump", &[0.0, 1.0], None),
            entry("Part XJ-4417-B is a hose", &[0.9, 0.1], None),
        ])?;
        let v = [1.0, 0.05];
        let plain = index.search(&query(&v, "what is XJ-4471-B", 1, SearchType::Similarity))?;
        assert_eq!(texts(&plain), ["Part XJ-4471-A is a valve"]);
        let hybrid = index.search(&query(&v, "what is XJ-4471-B", 1, SearchType::Hybrid))?;
        assert_eq!(texts(&hybrid), ["Part XJ-4471-B is a pump"]);
        Ok(())
    }

    #[test]
    fn chat_chunks_are_seen_only_from_their_chat() -> Result<(), String> {
        let index = Index::new(vec![
            entry("shared", &[1.0, 0.0], None),
            entry("mine", &[1.0, 0.0], Some("c1")),
        ])?;
        let mut q = query(&[1.0, 0.0], "", 5, SearchType::Similarity);
        assert_eq!(texts(&index.search(&q)?), ["shared"]);
        q.chat_id = Some("c1");
        assert_eq!(index.search(&q)?.len(), 2);
        Ok(())
    }

    #[test]
    fn a_large_index_finds_the_same_rows_through_its_codes() -> Result<(), String> {
        // Enough rows for the quantised scan; each row its own direction.
        let n = QUANTISED_FROM_ROWS + 100;
        let row = |i: usize| -> Vec<f32> {
            let mut state = (i as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15);
            (0..16)
                .map(|_| {
                    state ^= state << 13;
                    state ^= state >> 7;
                    state ^= state << 17;
                    (state >> 40) as f32 / (1u64 << 24) as f32 - 0.5
                })
                .collect()
        };
        let index = Index::new(
            (0..n)
                .map(|i| entry(&format!("{i}"), &row(i), None))
                .collect(),
        )?;
        for probe in [0, 77, n - 1] {
            let q = row(probe);
            let hits = index.search(&query(&q, "", 3, SearchType::Similarity))?;
            assert_eq!(hits[0].0.page_content, probe.to_string());
            assert!(
                (hits[0].1 - 1.0).abs() < 1e-4,
                "rescored exactly: {}",
                hits[0].1
            );
        }
        assert_eq!(dot_i8(&[1, -2, 3], &[4, 5, -6]), 4 - 10 - 18);
        Ok(())
    }

    #[test]
    fn both_dot_kernels_agree() {
        let a: Vec<f32> = (0..389)
            .map(|i| ((i * 37 % 101) as f32 - 50.0) / 50.0)
            .collect();
        let b: Vec<f32> = (0..389)
            .map(|i| ((i * 53 % 97) as f32 - 48.0) / 48.0)
            .collect();
        let exact: f64 = a
            .iter()
            .zip(&b)
            .map(|(x, y)| f64::from(*x) * f64::from(*y))
            .sum();
        assert!((f64::from(dot_portable(&a, &b)) - exact).abs() < 1e-3);
        assert!((f64::from(dot(&a, &b)) - exact).abs() < 1e-3);
    }

    /// A number in [-1, 1) from a xorshift state (no dependency, the same
    /// every run).
    fn next(state: &mut u64) -> f32 {
        *state ^= *state << 13;
        *state ^= *state >> 7;
        *state ^= *state << 17;
        (*state >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0
    }

    /// `n` rows of `dims` around `clusters` random centres that all share a
    /// common direction (as embeddings do: signs around zero would not tell
    /// them apart).
    fn clustered(n: usize, dims: usize, clusters: usize) -> Vec<Vec<f32>> {
        let mut state = 0x2545_f491_4f6c_dd1d;
        let common: Vec<f32> = (0..dims).map(|_| next(&mut state).abs()).collect();
        let centres: Vec<Vec<f32>> = (0..clusters)
            .map(|_| common.iter().map(|c| c + next(&mut state)).collect())
            .collect();
        (0..n)
            .map(|i| {
                centres[i % clusters]
                    .iter()
                    .map(|c| c + 0.4 * next(&mut state))
                    .collect()
            })
            .collect()
    }

    /// The `k` visible rows most like `q`, by an exact f64 scan.
    fn exact(
        rows: &[Vec<f32>],
        q: &[f32],
        k: usize,
        visible: impl Fn(usize) -> bool,
    ) -> Vec<String> {
        let norm = |v: &[f32]| v.iter().map(|x| f64::from(*x).powi(2)).sum::<f64>().sqrt();
        let mut scored: Vec<(usize, f64)> = rows
            .iter()
            .enumerate()
            .filter(|(i, _)| visible(*i))
            .map(|(i, v)| {
                let dot: f64 = v
                    .iter()
                    .zip(q)
                    .map(|(a, b)| f64::from(*a) * f64::from(*b))
                    .sum();
                (i, dot / norm(v))
            })
            .collect();
        scored.sort_by(|a, b| b.1.total_cmp(&a.1));
        scored.iter().take(k).map(|(i, _)| i.to_string()).collect()
    }

    #[test]
    fn the_one_bit_shortlist_keeps_the_exact_nearest() -> Result<(), String> {
        // 100 dimensions: 13 bytes a row, part of the last one padding; 3,000
        // rows: the last block of 32 part padding too.
        let rows = clustered(3000, 100, 30);
        let entries = || {
            rows.iter()
                .enumerate()
                .map(|(i, v)| entry(&i.to_string(), v, None))
                .collect()
        };
        // A shortlist of 200, when the probe's cluster alone has 100 rows: a
        // poor estimate would lose some of the nearest.
        let shortlisted = Index::build(entries(), 0, 200)?;
        let plain = Index::new(entries())?;
        let Some(signs) = &shortlisted.signs else {
            return Err("the 1-bit codes were not built".into());
        };
        let mut state = 7;
        for probe in [0, 41, 1234, 2999] {
            let q: Vec<f32> = rows[probe]
                .iter()
                .map(|x| x + 0.1 * next(&mut state))
                .collect();
            let want = exact(&rows, &q, 10, |_| true);
            let hits = shortlisted.search(&query(&q, "", 10, SearchType::Similarity))?;
            assert_eq!(texts(&hits), want, "probe {probe}");
            let hits = plain.search(&query(&q, "", 10, SearchType::Similarity))?;
            assert_eq!(texts(&hits), want, "probe {probe}");
            let mut normalised = q.clone();
            normalise(&mut normalised);
            assert_eq!(signs.shortlist(&normalised, 200, None).len(), 200);
        }
        assert_eq!(
            shortlisted.vector_bytes() - plain.vector_bytes(),
            // 94 blocks of 32 rows x 13 bytes, two floats a row, the centre.
            94 * 32 * 13 + 3000 * 8 + 100 * 4
        );
        Ok(())
    }

    #[test]
    fn chat_chunks_stay_hidden_through_the_one_bit_shortlist() -> Result<(), String> {
        let rows = clustered(2000, 48, 20);
        // Every other row of the probe's cluster (row 3's) belongs to chat c1.
        let chat = |i: usize| i % 40 == 3;
        let index = Index::build(
            rows.iter()
                .enumerate()
                .map(|(i, v)| entry(&i.to_string(), v, chat(i).then_some("c1")))
                .collect(),
            0,
            100,
        )?;
        let q = rows[3].clone();
        let mut search = query(&q, "", 10, SearchType::Similarity);
        let hidden = index.search(&search)?;
        assert_eq!(texts(&hidden), exact(&rows, &q, 10, |i| !chat(i)));
        search.chat_id = Some("c1");
        let seen = index.search(&search)?;
        assert_eq!(texts(&seen), exact(&rows, &q, 10, |_| true));
        assert_eq!(seen[0].0.page_content, "3");
        Ok(())
    }

    #[test]
    fn a_large_index_finds_its_rows_through_the_one_bit_shortlist_on_every_core()
    -> Result<(), String> {
        // Enough rows for the scan in slices; each row its own direction.
        let n = PARALLEL_SCAN_ROWS + 100;
        let mut state = 11;
        let rows: Vec<Vec<f32>> = (0..n)
            .map(|_| (0..24).map(|_| next(&mut state)).collect())
            .collect();
        let index = Index::build(
            rows.iter()
                .enumerate()
                .map(|(i, v)| entry(&i.to_string(), v, None))
                .collect(),
            0,
            64,
        )?;
        for probe in [0, 77, n / 2 + 3, n - 1] {
            let hits = index.search(&query(&rows[probe], "", 3, SearchType::Similarity))?;
            assert_eq!(hits[0].0.page_content, probe.to_string());
            assert!(
                (hits[0].1 - 1.0).abs() < 1e-4,
                "rescored exactly: {}",
                hits[0].1
            );
        }
        Ok(())
    }

    #[test]
    fn small_answers_are_the_same_with_the_one_bit_codes() -> Result<(), String> {
        let fixture = || {
            vec![
                entry("Part XJ-4471-A is a valve", &[1.0, 0.0, 0.0], None),
                entry("Part XJ-4471-B is a pump", &[0.0, 1.0, 0.1], None),
                entry("Part XJ-4417-B is a hose", &[0.9, 0.1, 0.0], None),
                entry("Part XJ-4417-C is a hose", &[0.89, 0.11, 0.0], Some("c1")),
            ]
        };
        let plain = Index::new(fixture())?;
        let shortlisted = Index::build(fixture(), 0, 1)?;
        assert!(shortlisted.signs.is_some());
        let mmr = SearchType::Mmr {
            fetch_k: 3,
            lambda: 0.3,
        };
        for search in [SearchType::Similarity, mmr, SearchType::Hybrid] {
            for chat in [None, Some("c1")] {
                let mut q = query(&[1.0, 0.05, 0.0], "what is XJ-4471-B", 2, search);
                q.chat_id = chat;
                assert_eq!(texts(&shortlisted.search(&q)?), texts(&plain.search(&q)?));
            }
        }
        Ok(())
    }

    #[test]
    fn both_sign_kernels_agree() {
        // 300 bytes a row: past the 256 the AVX2 kernel sums in 16 bits, with
        // a third of the tables at the extreme (60) where it would overflow
        // without widening in between.
        let row_bytes = 300;
        let mut state = 5;
        let tables: Vec<[i8; 16]> = (0..row_bytes * 2)
            .map(|g| {
                std::array::from_fn(|x| match (x, g % 3) {
                    (0, _) => 0,
                    (_, 0) => 60,
                    _ => (next(&mut state) * 60.0) as i8,
                })
            })
            .collect();
        let blocks: Vec<u64> = (0..3 * row_bytes * BLOCK_ROWS / 8)
            .map(|w| {
                if w % 7 == 0 {
                    u64::MAX
                } else {
                    u64::from(next(&mut state).to_bits()) << 32
                        | u64::from(next(&mut state).to_bits())
                }
            })
            .collect();
        let mut expected = vec![0i32; 3 * BLOCK_ROWS];
        for (r, dot) in expected.iter_mut().enumerate() {
            let block = &blocks[r / BLOCK_ROWS * row_bytes * BLOCK_ROWS / 8..];
            for p in 0..row_bytes {
                let at = p * BLOCK_ROWS + r % BLOCK_ROWS;
                let byte = (block[at / 8] >> (at % 8 * 8)) as u8;
                *dot += i32::from(tables[2 * p][usize::from(byte & 15)])
                    + i32::from(tables[2 * p + 1][usize::from(byte >> 4)]);
            }
        }
        let mut portable = vec![0i32; expected.len()];
        sign_dot_portable(&tables, &blocks, &mut portable);
        assert_eq!(portable, expected);
        let mut dispatched = vec![0i32; expected.len()];
        sign_dot_kernel()(&tables, &blocks, &mut dispatched);
        assert_eq!(dispatched, expected);
    }

    #[test]
    fn a_shortlist_keeps_the_best() {
        let mut list = Shortlist::new(5);
        for i in 0..100 {
            list.push(i, ((i * 37) % 100) as f32);
        }
        list.push(100, f32::NAN);
        let mut kept = list.finish();
        kept.sort_unstable();
        // Scores 95..=99 (37 i mod 100) are rows 35, 8, 81, 54 and 27.
        assert_eq!(kept, [8, 27, 35, 54, 81]);
    }

    #[test]
    fn terms_keep_identifiers_whole_and_in_parts() {
        let t: Vec<String> = terms("Order XJ-4471-B, now.").collect();
        assert_eq!(t, ["order", "xj-4471-b", "xj", "4471", "b", "now"]);
    }
}
