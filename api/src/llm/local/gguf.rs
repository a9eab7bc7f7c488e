//! Reads a llama-architecture GGUF file (with candle's GGUF reader) into the
//! [`Transformer`] of `weir-local-llm`.
//!
//! [`load`] takes the hyper-parameters from the metadata and the weight
//! matrices as stored; `Q4_1` and `Q8_0` keep their blocks, any other type is
//! requantised to `Q8_0` (and so are Q/K/V or gate/up when their types differ,
//! since they are fused). Every failure names the tensor or key and becomes an
//! [`LlmError`].

use std::fs::File;

use candle_core::Device;
use candle_core::quantized::gguf_file::{Content, Value};
use candle_core::quantized::{GgmlDType, QTensor};
use weir_local_llm::kernels::{QK, QMatrix, WeightType};
use weir_local_llm::{Config, LayerWeights, Transformer};

use crate::llm::LlmError;

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
        if !cols.is_multiple_of(QK) {
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

/// Reads hyper-parameters and weights of a llama-architecture GGUF.
pub fn load(content: &Content, file: &mut File, threads: usize) -> Result<Transformer, LlmError> {
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
    let head_dim = dim.checked_div(n_head).unwrap_or(0);
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
    if n_head == 0 || dim % n_head != 0 {
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
        let mut qkv = rd
            .matrices(&[(&q, dim, dim), (&k, kv_dim, dim), (&v, kv_dim, dim)])?
            .into_iter();
        let (g, u, d) = (
            format!("{p}.ffn_gate.weight"),
            format!("{p}.ffn_up.weight"),
            format!("{p}.ffn_down.weight"),
        );
        let mut gu = rd
            .matrices(&[(&g, cfg.ffn_dim, dim), (&u, cfg.ffn_dim, dim)])?
            .into_iter();
        let next = |it: &mut std::vec::IntoIter<QMatrix>| {
            it.next()
                .ok_or_else(|| err("internal: a matrix went missing"))
        };
        layers.push(LayerWeights {
            attn_norm: rd.vector(&format!("{p}.attn_norm.weight"), dim)?,
            wq: next(&mut qkv)?,
            wk: next(&mut qkv)?,
            wv: next(&mut qkv)?,
            wo: rd.matrix(&o, dim, dim, false)?,
            ffn_norm: rd.vector(&format!("{p}.ffn_norm.weight"), dim)?,
            w_gate: next(&mut gu)?,
            w_up: next(&mut gu)?,
            w_down: rd.matrix(&d, dim, cfg.ffn_dim, false)?,
        });
    }
    Transformer::new(cfg, embed, layers, out_norm, output, threads).map_err(|e| err(e.0))
}
