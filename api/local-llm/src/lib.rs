//! The numeric core of weir's embedded local chat model: quantised matrix
//! kernels and a llama-architecture forward pass for the CPU, in plain Rust
//! with no dependencies and no I/O.
//!
//! # Layout
//!
//! - [`kernels`]: quantised row products (`Q4_1`, `Q8_0`), activation
//!   quantisation and f32 helpers, each with a scalar and an AVX2 version
//!   chosen at run time.
//! - [`Transformer`]: the weights, prepared for the kernels, and
//!   [`Transformer::forward`] over a caller-owned [`Session`] (KV cache).
//!
//! Reading model files, tokenizing and sampling live in `weir-api`
//! (`llm::local`). This is a crate of its own so that it is compiled with
//! optimisations even in debug and test builds (see the workspace
//! `Cargo.toml`): an unoptimised forward pass is a hundred times slower, which
//! would make every test that asks the model a question take minutes.

pub mod kernels;
mod transformer;

pub use transformer::{Config, LayerWeights, PROMPT_CHUNK, Session, Transformer};

/// A weight or input the forward pass cannot work with, in words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error(pub String);

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Error {}
