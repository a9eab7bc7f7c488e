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
    words: Bm25,
}

impl Index {
    /// Builds the index; every embedding must have the same length.
    pub fn new(entries: Vec<Entry>) -> Result<Index, String> {
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
        Ok(Index {
            dims,
            documents,
            chat_ids,
            vectors,
            codes,
            scales,
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

    /// Bytes the vectors take, exact and quantised (the benchmark's memory figure).
    pub fn vector_bytes(&self) -> usize {
        self.vectors.len() * std::mem::size_of::<f32>()
            + self.codes.len()
            + self.scales.len() * std::mem::size_of::<f32>()
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
        if n >= QUANTISED_FROM_ROWS {
            // Candidates by the 8-bit codes, then their exact scores.
            let mut codes = vec![0i8; q.len()];
            let q_scale = quantise(q, &mut codes);
            let dot_i8 = dot_i8_kernel();
            let candidates = self.scan(
                n,
                k * 4 + 16,
                |i| {
                    let row = &self.codes[i * self.dims..(i + 1) * self.dims];
                    dot_i8(&codes, row) as f32 * q_scale * self.scales[i]
                },
                visible,
            );
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
        let threads = std::thread::available_parallelism().map_or(1, usize::from);
        if n < PARALLEL_SCAN_ROWS || threads < 2 {
            return scan(0..n).into_sorted();
        }
        let slice = n.div_ceil(threads);
        let parts: Vec<TopK> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..threads)
                .map(|t| {
                    let rows = (t * slice).min(n)..((t + 1) * slice).min(n);
                    s.spawn(move || scan(rows))
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
                .collect()
        });
        let mut best = TopK::new(k);
        for part in parts {
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

    #[test]
    fn terms_keep_identifiers_whole_and_in_parts() {
        let t: Vec<String> = terms("Order XJ-4471-B, now.").collect();
        assert_eq!(t, ["order", "xj-4471-b", "xj", "4471", "b", "now"]);
    }
}
