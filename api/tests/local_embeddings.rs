//! The embedded embedding model (`localEmbeddings`, all-MiniLM-L6-v2) on the real
//! files: its vectors against sentence-transformers' reference vectors
//! (tests/fixtures/minilm_reference.json, made by scripts/make-embedding-fixture),
//! unit length, 384 dimensions, truncation, batch = single, determinism, and load
//! errors.
//!
//! The model comes from `$WEIR_TEST_EMBEDDINGS_DIR`, else
//! `$WEIR_MODELS_DIR/all-minilm-l6-v2`, else `$WEIR_DATA_DIR/models/all-minilm-l6-v2`,
//! else `./data/models/all-minilm-l6-v2` at the repository root
//! (`scripts/fetch-models` puts it there). Without it every test that needs it
//! prints why it skipped and passes.

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use weir_api::retrieval::embed::local::{DIMS, LocalEmbedder};

const MODEL: &str = "all-minilm-l6-v2";

fn model_dir() -> PathBuf {
    std::env::var_os("WEIR_TEST_EMBEDDINGS_DIR")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("WEIR_MODELS_DIR").map(|d| PathBuf::from(d).join(MODEL)))
        .or_else(|| {
            std::env::var_os("WEIR_DATA_DIR").map(|d| PathBuf::from(d).join("models").join(MODEL))
        })
        .unwrap_or_else(|| {
            PathBuf::from(env!("CARGO_MANIFEST_DIR"))
                .join("../data/models")
                .join(MODEL)
        })
}

fn model() -> Option<Arc<LocalEmbedder>> {
    static EMBEDDER: OnceLock<Option<Arc<LocalEmbedder>>> = OnceLock::new();
    EMBEDDER
        .get_or_init(|| {
            let dir = model_dir();
            if !dir.join("model.safetensors").is_file() {
                return None;
            }
            Some(Arc::new(LocalEmbedder::load(&dir).unwrap_or_else(|e| {
                panic!(
                    "the embedding model in {} does not load: {e}",
                    dir.display()
                )
            })))
        })
        .clone()
}

macro_rules! model_or_skip {
    () => {
        match model() {
            Some(m) => m,
            None => {
                eprintln!(
                    "skipped: no embedding model in {}; run scripts/fetch-models",
                    model_dir().display()
                );
                return;
            }
        }
    };
}

struct Reference {
    version: String,
    sentences: Vec<String>,
    token_counts: Vec<usize>,
    vectors: Vec<Vec<f64>>,
}

fn reference() -> Reference {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/minilm_reference.json");
    let text = std::fs::read_to_string(&path).expect("the reference fixture is committed");
    let v: serde_json::Value = serde_json::from_str(&text).expect("the fixture is JSON");
    let strings = |key: &str| -> Vec<String> {
        v[key]
            .as_array()
            .expect("array")
            .iter()
            .map(|s| s.as_str().expect("string").to_string())
            .collect()
    };
    Reference {
        version: v["sentence_transformers_version"]
            .as_str()
            .unwrap_or("?")
            .to_string(),
        sentences: strings("sentences"),
        token_counts: v["token_counts"]
            .as_array()
            .expect("token_counts")
            .iter()
            .map(|n| n.as_u64().expect("count") as usize)
            .collect(),
        vectors: v["vectors"]
            .as_array()
            .expect("vectors")
            .iter()
            .map(|row| {
                row.as_array()
                    .expect("vector")
                    .iter()
                    .map(|x| x.as_f64().expect("number"))
                    .collect()
            })
            .collect(),
    }
}

fn cosine(a: &[f32], b: &[f64]) -> f64 {
    let dot: f64 = a.iter().zip(b).map(|(&x, &y)| x as f64 * y).sum();
    let na: f64 = a.iter().map(|&x| (x as f64).powi(2)).sum::<f64>().sqrt();
    let nb: f64 = b.iter().map(|y| y * y).sum::<f64>().sqrt();
    dot / (na * nb)
}

fn norm(a: &[f32]) -> f64 {
    a.iter().map(|&x| (x as f64).powi(2)).sum::<f64>().sqrt()
}

#[test]
fn vectors_match_sentence_transformers() {
    let model = model_or_skip!();
    let r = reference();
    assert!(r.sentences.len() >= 20 && r.sentences.len() == r.vectors.len());
    let texts: Vec<&str> = r.sentences.iter().map(String::as_str).collect();
    let got = model.embed(&texts).expect("embedding succeeds");
    assert_eq!(got.len(), texts.len());
    let mut worst = (f64::INFINITY, 0);
    let mut worst_norm = 0.0f64;
    for (i, (v, want)) in got.iter().zip(&r.vectors).enumerate() {
        assert_eq!(v.len(), DIMS, "sentence {i}");
        assert_eq!(want.len(), DIMS, "fixture vector {i}");
        assert!(
            (norm(v) - 1.0).abs() < 1e-5,
            "sentence {i}: norm {}",
            norm(v)
        );
        worst_norm = worst_norm.max((norm(v) - 1.0).abs());
        let c = cosine(v, want);
        assert!(
            c >= 0.999,
            "sentence {i} {:?}: cosine {c} with sentence-transformers {}",
            texts[i],
            r.version
        );
        if c < worst.0 {
            worst = (c, i);
        }
    }
    eprintln!(
        "lowest cosine with sentence-transformers {}: 1 - {:.1e} (sentence {}); largest |norm - 1|: {:.1e}",
        r.version,
        1.0 - worst.0,
        worst.1,
        worst_norm
    );
}

#[test]
fn truncation_counts_word_pieces_like_sentence_transformers() {
    let model = model_or_skip!();
    let r = reference();
    for (text, &want) in r.sentences.iter().zip(&r.token_counts) {
        assert_eq!(model.tokens(text), want, "{text:?}");
    }
    // The fixture exercises truncation: some sentences are cut at 256.
    assert!(r.token_counts.iter().filter(|&&n| n == 256).count() >= 2);
    assert_eq!(model.tokens(""), 2, "[CLS] [SEP]");
    assert_eq!(model.tokens(&"word ".repeat(5000)), 256);
    // Past the cut, the text no longer changes the vector.
    let base = "alpha beta gamma ".repeat(200);
    let a = model.embed(&[&format!("{base} tail one")]).expect("embed");
    let b = model
        .embed(&[&format!("{base} something else entirely")])
        .expect("embed");
    assert_eq!(a, b);
}

#[test]
fn a_batch_gives_each_text_its_single_vector() {
    let model = model_or_skip!();
    let r = reference();
    // Mixed lengths (2 to 256 tokens) in one call, in an order unlike the sorted one.
    let mut texts: Vec<&str> = r.sentences.iter().map(String::as_str).collect();
    texts.push("");
    texts.reverse();
    let batch = model.embed(&texts).expect("batch");
    for (i, text) in texts.iter().enumerate() {
        let single = model.embed(&[text]).expect("single");
        assert_eq!(single.len(), 1);
        let diff = single[0]
            .iter()
            .zip(&batch[i])
            .map(|(a, b)| (a - b).abs())
            .fold(0.0f32, f32::max);
        assert!(diff < 1e-5, "text {i} {text:?}: batch differs by {diff}");
    }
    // Duplicates in one batch get the same vector.
    let dup = model
        .embed(&["same text", "other", "same text"])
        .expect("dup");
    assert_eq!(dup[0], dup[2]);
    assert_ne!(dup[0], dup[1]);
}

#[test]
fn output_is_deterministic() {
    let model = model_or_skip!();
    let r = reference();
    let texts: Vec<&str> = r.sentences.iter().map(String::as_str).collect();
    let first = model.embed(&texts).expect("first");
    let second = model.embed(&texts).expect("second");
    assert_eq!(first, second);
    assert!(model.embed(&[]).expect("no texts").is_empty());
}

#[test]
fn similar_texts_are_closer_than_unrelated_ones() {
    let model = model_or_skip!();
    let v = model
        .embed(&[
            "How do I reset my password?",
            "I forgot my password and need to change it.",
            "The cathedral was built in the twelfth century.",
        ])
        .expect("embed");
    let dot = |a: &[f32], b: &[f32]| a.iter().zip(b).map(|(x, y)| x * y).sum::<f32>();
    assert!(dot(&v[0], &v[1]) > dot(&v[0], &v[2]) + 0.3);
}

#[test]
fn load_errors_name_the_file() {
    let err = LocalEmbedder::load(Path::new("/nonexistent/weir-embeddings")).unwrap_err();
    assert!(err.contains("/nonexistent/weir-embeddings"), "{err}");

    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("config.json"), "{not json").expect("write");
    let err = LocalEmbedder::load(dir.path()).unwrap_err();
    assert!(err.contains("config.json"), "{err}");

    // A complete directory whose weights are cut short or garbage.
    let Some(_) = model() else {
        eprintln!("skipped the corrupt-weights half: no embedding model");
        return;
    };
    let src = model_dir();
    for name in ["config.json", "tokenizer.json", "sentence_bert_config.json"] {
        std::fs::copy(src.join(name), dir.path().join(name)).expect("copy");
    }
    let err = LocalEmbedder::load(dir.path()).unwrap_err();
    assert!(err.contains("model.safetensors"), "missing weights: {err}");
    std::fs::write(
        dir.path().join("model.safetensors"),
        b"\x10\x00\x00\x00garbage",
    )
    .expect("write");
    let err = LocalEmbedder::load(dir.path()).unwrap_err();
    assert!(err.contains("model.safetensors"), "garbage weights: {err}");
    std::fs::write(dir.path().join("tokenizer.json"), "[]").expect("write");
    let err = LocalEmbedder::load(dir.path()).unwrap_err();
    assert!(err.contains("tokenizer.json"), "bad tokenizer: {err}");
}
