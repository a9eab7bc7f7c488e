//! Picks the next token from the logits: greedy (arg-max) by default, or
//! temperature and nucleus (top-p) sampling from a seeded generator.
//!
//! The generator is a SplitMix64 implemented here, so a seed gives the same
//! tokens on every machine and every version of our dependencies.

use crate::llm::SamplingParams;

pub enum Sampler {
    Greedy,
    Random {
        temperature: f32,
        top_p: f32,
        rng: SplitMix64,
        /// Scratch: candidate (probability, id) pairs.
        candidates: Vec<(f32, u32)>,
    },
}

impl Sampler {
    pub fn new(params: &SamplingParams) -> Sampler {
        let temperature = params.temperature.unwrap_or(0.0);
        if !(temperature.is_finite() && temperature > 0.0) {
            return Sampler::Greedy;
        }
        let top_p = params
            .top_p
            .filter(|p| p.is_finite() && *p > 0.0 && *p < 1.0)
            .unwrap_or(1.0);
        let seed = params.seed.unwrap_or_else(|| {
            let nanos = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos() as u64)
                .unwrap_or(0);
            nanos ^ u64::from(std::process::id()).rotate_left(32)
        });
        Sampler::Random {
            temperature: temperature as f32,
            top_p: top_p as f32,
            rng: SplitMix64(seed),
            candidates: Vec::new(),
        }
    }

    pub fn sample(&mut self, logits: &[f32]) -> u32 {
        match self {
            Sampler::Greedy => argmax(logits),
            Sampler::Random {
                temperature,
                top_p,
                rng,
                candidates,
            } => sample_top_p(logits, *temperature, *top_p, rng.next_f32(), candidates),
        }
    }
}

fn argmax(logits: &[f32]) -> u32 {
    let mut best = 0;
    let mut best_v = f32::NEG_INFINITY;
    for (i, &v) in logits.iter().enumerate() {
        if v > best_v {
            best_v = v;
            best = i;
        }
    }
    best as u32
}

/// Samples with `u` in `[0, 1)` from the smallest set of most likely tokens whose
/// probabilities add up to `top_p`.
fn sample_top_p(
    logits: &[f32],
    temperature: f32,
    top_p: f32,
    u: f32,
    candidates: &mut Vec<(f32, u32)>,
) -> u32 {
    let max = logits.iter().fold(f32::NEG_INFINITY, |m, &v| m.max(v));
    if !max.is_finite() {
        return argmax(logits);
    }
    let inv_t = 1.0 / temperature;
    let mut sum = 0f32;
    candidates.clear();
    for (i, &v) in logits.iter().enumerate() {
        let p = ((v - max) * inv_t).exp();
        sum += p;
        candidates.push((p, i as u32));
    }
    if top_p < 1.0 {
        // The nucleus lies among the tokens above any threshold whose tokens
        // already hold `top_p` of the mass; find such a threshold to sort only a
        // few candidates instead of the whole vocabulary.
        let mut threshold = 0.1f32;
        loop {
            let mass: f32 = candidates
                .iter()
                .filter(|c| c.0 >= threshold)
                .map(|c| c.0)
                .sum();
            if mass >= top_p * sum || threshold < 1e-9 {
                candidates.retain(|c| c.0 >= threshold || threshold < 1e-9);
                break;
            }
            threshold *= 0.1;
        }
        candidates.sort_unstable_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
        let mut acc = 0f32;
        let mut keep = candidates.len();
        for (i, c) in candidates.iter().enumerate() {
            acc += c.0;
            if acc >= top_p * sum {
                keep = i + 1;
                break;
            }
        }
        candidates.truncate(keep);
        sum = acc.min(candidates.iter().map(|c| c.0).sum());
    }
    let target = u * sum;
    let mut acc = 0f32;
    for c in candidates.iter() {
        acc += c.0;
        if acc > target {
            return c.1;
        }
    }
    candidates
        .last()
        .map(|c| c.1)
        .unwrap_or_else(|| argmax(logits))
}

/// Sebastiano Vigna's SplitMix64: small, fast, and identical everywhere.
pub struct SplitMix64(pub u64);

impl SplitMix64 {
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `[0, 1)`.
    pub fn next_f32(&mut self) -> f32 {
        (self.next_u64() >> 40) as f32 / (1u64 << 24) as f32
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(t: Option<f64>, p: Option<f64>, seed: u64) -> SamplingParams {
        SamplingParams {
            temperature: t,
            top_p: p,
            seed: Some(seed),
            ..SamplingParams::default()
        }
    }

    #[test]
    fn zero_or_missing_temperature_is_greedy() {
        let logits = [0.1, 3.0, 2.9, -1.0];
        for t in [None, Some(0.0), Some(-1.0), Some(f64::NAN)] {
            assert_eq!(Sampler::new(&params(t, None, 1)).sample(&logits), 1);
        }
    }

    #[test]
    fn same_seed_same_tokens_and_top_p_excludes_the_tail() {
        let logits: Vec<f32> = (0..1000).map(|i| -(i as f32) * 0.01).collect();
        let run = |seed| {
            let mut s = Sampler::new(&params(Some(1.0), Some(0.5), seed));
            (0..50).map(|_| s.sample(&logits)).collect::<Vec<_>>()
        };
        assert_eq!(run(42), run(42));
        assert_ne!(run(42), run(43));
        // Probabilities fall as e^(-0.01 i): half the mass sits below i ≈ 69.
        assert!(run(7).iter().all(|&t| t < 80), "{:?}", run(7));
        // A tiny top_p keeps only the most likely token.
        let mut s = Sampler::new(&params(Some(1.0), Some(1e-6), 3));
        assert!((0..20).all(|_| s.sample(&logits) == 0));
    }

    #[test]
    fn uniform_draws_stay_in_range() {
        let mut r = SplitMix64(0);
        assert!(
            (0..10_000)
                .map(|_| r.next_f32())
                .all(|u| (0.0..1.0).contains(&u))
        );
    }
}
