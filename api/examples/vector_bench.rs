//! Vector search figures for BENCHMARKS.md: builds an index of N random
//! clustered 384-dimension chunks (as MiniLM's vectors cluster by topic), then
//! times `similarity` searches (top 10) for queries near stored chunks, and
//! checks their recall@10 against an exact f64 scan of the same data.
//!
//!     cargo run --release -p weir-api --example vector_bench -- 100000 1000000
//!
//! Prints one JSON object per size: build time, search p50/p99 (ms), recall@10,
//! and the vectors' memory per 100,000 chunks.

use std::time::Instant;

use serde_json::{Map, json};
use weir_api::retrieval::Document;
use weir_api::retrieval::index::{Entry, Index, Query, SearchType};

const DIMS: usize = 384;
const QUERIES: usize = 200;
const RECALL_QUERIES: usize = 20;

/// A small deterministic generator (xorshift): no dependency, same data every run.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> f32 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        ((self.0 >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
    }

    fn vector(&mut self, around: Option<&[f32]>, spread: f32) -> Vec<f32> {
        let mut v: Vec<f32> = (0..DIMS)
            .map(|d| around.map_or(0.0, |c| c[d]) + spread * self.next())
            .collect();
        let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
        v.iter_mut().for_each(|x| *x /= norm);
        v
    }
}

fn main() {
    let sizes: Vec<usize> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let sizes = if sizes.is_empty() {
        vec![100_000]
    } else {
        sizes
    };
    for n in sizes {
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15 ^ n as u64);
        let centroids: Vec<Vec<f32>> = (0..1000).map(|_| rng.vector(None, 1.0)).collect();
        let vectors: Vec<Vec<f32>> = (0..n)
            .map(|i| rng.vector(Some(&centroids[i % centroids.len()]), 0.08))
            .collect();
        let queries: Vec<Vec<f32>> = (0..QUERIES)
            .map(|q| rng.vector(Some(&vectors[(q * 7919) % n]), 0.02))
            .collect();
        let started = Instant::now();
        let entries = vectors
            .iter()
            .enumerate()
            .map(|(i, v)| Entry {
                document: Document::new(format!("chunk {i}"), Map::new()),
                embedding: v.clone(),
                chat_id: None,
            })
            .collect();
        let index = match Index::new(entries) {
            Ok(index) => index,
            Err(e) => {
                eprintln!("cannot build the index: {e}");
                std::process::exit(1);
            }
        };
        let build_ms = started.elapsed().as_secs_f64() * 1e3;
        let search = |q: &[f32]| {
            index
                .search(&Query {
                    vector: q,
                    text: "",
                    top_k: 10,
                    search: SearchType::Similarity,
                    chat_id: None,
                })
                .unwrap_or_default()
                .into_iter()
                .map(|(d, _)| d.page_content.clone())
                .collect::<Vec<_>>()
        };
        let mut times: Vec<f64> = queries
            .iter()
            .map(|q| {
                let t = Instant::now();
                std::hint::black_box(search(q));
                t.elapsed().as_secs_f64() * 1e3
            })
            .collect();
        times.sort_by(f64::total_cmp);
        let mut found = 0usize;
        for q in queries.iter().take(RECALL_QUERIES) {
            let mut exact: Vec<(usize, f64)> = vectors
                .iter()
                .enumerate()
                .map(|(i, v)| {
                    (
                        i,
                        v.iter()
                            .zip(q)
                            .map(|(a, b)| f64::from(*a) * f64::from(*b))
                            .sum(),
                    )
                })
                .collect();
            exact.sort_by(|a, b| b.1.total_cmp(&a.1));
            let got = search(q);
            found += exact[..10]
                .iter()
                .filter(|(i, _)| got.contains(&format!("chunk {i}")))
                .count();
        }
        println!(
            "{}",
            json!({
                "chunks": n,
                "dims": DIMS,
                "build_ms": build_ms,
                "search_p50_ms": times[times.len() / 2],
                "search_p99_ms": times[times.len() * 99 / 100],
                "recall_at_10": found as f64 / (RECALL_QUERIES * 10) as f64,
                "vector_mib_per_100k": index.vector_bytes() as f64 / (1024.0 * 1024.0) * 100_000.0 / n as f64,
            })
        );
    }
}
