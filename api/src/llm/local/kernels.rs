//! Numeric kernels of the local model: quantised matrix × activation products,
//! activation quantisation, and the small f32 helpers attention needs.
//!
//! Weights stay in their GGUF block layout (`Q4_1`: f16 scale, f16 min, 16 bytes
//! of nibbles for 32 weights; `Q8_0`: f16 scale, 32 signed bytes). Activations are
//! quantised per call into [`BlockQ8`] (32 signed bytes, the scale and the scaled
//! sum of the bytes), so a row product is integer multiply-adds plus one float
//! fused multiply-add per block. Every kernel has a portable scalar version and an
//! AVX2/FMA/F16C version; [`Isa::detect`] picks one at run time (never at compile
//! time: the binary must run on any x86-64). This module knows nothing of the
//! model's shape; `model.rs` decides which rows each thread computes.

/// Weights per quantisation block.
pub const QK: usize = 32;

/// Which instruction set the kernels use, detected once at load.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Isa {
    Scalar,
    #[cfg(target_arch = "x86_64")]
    Avx2,
}

impl Isa {
    pub fn detect() -> Isa {
        #[cfg(target_arch = "x86_64")]
        {
            if std::is_x86_feature_detected!("avx2")
                && std::is_x86_feature_detected!("fma")
                && std::is_x86_feature_detected!("f16c")
            {
                return Isa::Avx2;
            }
        }
        Isa::Scalar
    }

    pub fn name(self) -> &'static str {
        match self {
            Isa::Scalar => "scalar",
            #[cfg(target_arch = "x86_64")]
            Isa::Avx2 => "avx2",
        }
    }
}

/// The weight block formats the kernels multiply directly.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WeightType {
    Q4_1,
    Q8_0,
}

impl WeightType {
    /// Bytes of one block of [`QK`] weights.
    pub fn block_bytes(self) -> usize {
        match self {
            WeightType::Q4_1 => 20,
            WeightType::Q8_0 => 34,
        }
    }
}

/// A quantised matrix, row-major, each row `cols / QK` blocks.
pub struct QMatrix {
    pub ty: WeightType,
    pub rows: usize,
    pub cols: usize,
    pub data: Vec<u8>,
}

impl QMatrix {
    pub fn row_bytes(&self) -> usize {
        self.cols / QK * self.ty.block_bytes()
    }

    pub fn row(&self, r: usize) -> &[u8] {
        let rb = self.row_bytes();
        &self.data[r * rb..(r + 1) * rb]
    }

    /// Row `r` as f32 (the embedding lookup).
    pub fn dequantize_row(&self, r: usize, out: &mut [f32]) {
        let row = self.row(r);
        let bb = self.ty.block_bytes();
        for (b, block) in row.chunks_exact(bb).enumerate() {
            let out = &mut out[b * QK..(b + 1) * QK];
            let d = f16_to_f32(u16::from_le_bytes([block[0], block[1]]));
            match self.ty {
                WeightType::Q8_0 => {
                    for (o, &q) in out.iter_mut().zip(&block[2..34]) {
                        *o = d * f32::from(q as i8);
                    }
                }
                WeightType::Q4_1 => {
                    let m = f16_to_f32(u16::from_le_bytes([block[2], block[3]]));
                    for (j, &q) in block[4..20].iter().enumerate() {
                        out[j] = d * f32::from(q & 0x0f) + m;
                        out[j + 16] = d * f32::from(q >> 4) + m;
                    }
                }
            }
        }
    }
}

/// One block of a quantised activation: `x[i] ≈ d * qs[i]`, and `s = d * Σ qs`
/// (what a `Q4_1` weight's offset multiplies).
#[derive(Debug, Clone, Copy, Default)]
#[repr(C)]
pub struct BlockQ8 {
    pub d: f32,
    pub s: f32,
    pub qs: [i8; QK],
}

/// Quantises `x` (a multiple of [`QK`] long) into `out` (`x.len() / QK` blocks).
pub fn quantize_row(x: &[f32], out: &mut [BlockQ8]) {
    for (block, xs) in out.iter_mut().zip(x.chunks_exact(QK)) {
        let amax = xs.iter().fold(0f32, |m, v| m.max(v.abs()));
        let d = amax / 127.0;
        let id = if d > 0.0 { 1.0 / d } else { 0.0 };
        let mut sum = 0i32;
        for (q, &v) in block.qs.iter_mut().zip(xs) {
            let r = (v * id).round() as i32;
            *q = r as i8;
            sum += r;
        }
        block.d = d;
        block.s = d * sum as f32;
    }
}

/// `out[t * rows.len() + (r - rows.start)] = w[r] · acts[t]` for every row `r` in
/// `rows` and every token `t`; `acts` holds `n_tok` activations of `w.cols / QK`
/// blocks each.
pub fn matmul(
    isa: Isa,
    w: &QMatrix,
    rows: std::ops::Range<usize>,
    acts: &[BlockQ8],
    n_tok: usize,
    out: &mut [f32],
) {
    let nb = w.cols / QK;
    assert!(rows.end <= w.rows && acts.len() >= n_tok * nb && out.len() >= n_tok * rows.len());
    match isa {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: `Isa::Avx2` is only chosen when the CPU reports AVX2, FMA and
        // F16C; the bounds were checked above.
        Isa::Avx2 => unsafe { avx2::matmul(w, rows, acts, n_tok, out) },
        Isa::Scalar => {
            let len = rows.len();
            for (i, r) in rows.enumerate() {
                let row = w.row(r);
                for t in 0..n_tok {
                    let a = &acts[t * nb..(t + 1) * nb];
                    out[t * len + i] = match w.ty {
                        WeightType::Q4_1 => dot_q4_1_scalar(row, a),
                        WeightType::Q8_0 => dot_q8_0_scalar(row, a),
                    };
                }
            }
        }
    }
}

fn dot_q4_1_scalar(row: &[u8], acts: &[BlockQ8]) -> f32 {
    let mut sum = 0f32;
    for (block, a) in row.chunks_exact(20).zip(acts) {
        let d = f16_to_f32(u16::from_le_bytes([block[0], block[1]]));
        let m = f16_to_f32(u16::from_le_bytes([block[2], block[3]]));
        let mut isum = 0i32;
        for (j, &q) in block[4..20].iter().enumerate() {
            isum += i32::from(q & 0x0f) * i32::from(a.qs[j]);
            isum += i32::from(q >> 4) * i32::from(a.qs[j + 16]);
        }
        sum += d * a.d * isum as f32 + m * a.s;
    }
    sum
}

fn dot_q8_0_scalar(row: &[u8], acts: &[BlockQ8]) -> f32 {
    let mut sum = 0f32;
    for (block, a) in row.chunks_exact(34).zip(acts) {
        let d = f16_to_f32(u16::from_le_bytes([block[0], block[1]]));
        let isum: i32 = block[2..34]
            .iter()
            .zip(&a.qs)
            .map(|(&w, &x)| i32::from(w as i8) * i32::from(x))
            .sum();
        sum += d * a.d * isum as f32;
    }
    sum
}

/// `a · b`.
pub fn dot_f32(isa: Isa, a: &[f32], b: &[f32]) -> f32 {
    match isa {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: AVX2/FMA were detected for `Isa::Avx2`.
        Isa::Avx2 => unsafe { avx2::dot_f32(a, b) },
        Isa::Scalar => a.iter().zip(b).map(|(x, y)| x * y).sum(),
    }
}

/// `y += alpha * x`.
pub fn axpy_f32(isa: Isa, alpha: f32, x: &[f32], y: &mut [f32]) {
    match isa {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: AVX2/FMA were detected for `Isa::Avx2`.
        Isa::Avx2 => unsafe { avx2::axpy_f32(alpha, x, y) },
        Isa::Scalar => {
            for (y, x) in y.iter_mut().zip(x) {
                *y += alpha * x;
            }
        }
    }
}

/// IEEE half → single precision (exact).
pub fn f16_to_f32(h: u16) -> f32 {
    let sign = u32::from(h >> 15) << 31;
    let exp = u32::from((h >> 10) & 0x1f);
    let man = u32::from(h & 0x3ff);
    let bits = if exp == 0 {
        if man == 0 {
            sign
        } else {
            // Subnormal: normalise the mantissa.
            let shift = man.leading_zeros() - 21;
            let man = (man << shift) & 0x3ff;
            let exp = 127 - 15 + 1 - shift;
            sign | (exp << 23) | (man << 13)
        }
    } else if exp == 0x1f {
        sign | 0x7f80_0000 | (man << 13)
    } else {
        sign | ((exp + 127 - 15) << 23) | (man << 13)
    };
    f32::from_bits(bits)
}

#[cfg(target_arch = "x86_64")]
mod avx2 {
    use super::{BlockQ8, QK, QMatrix, WeightType};
    use std::arch::x86_64::*;

    #[inline]
    #[target_feature(enable = "avx2,fma,f16c")]
    fn hsum(v: __m256) -> f32 {
        let lo = _mm256_castps256_ps128(v);
        let hi = _mm256_extractf128_ps(v, 1);
        let s = _mm_add_ps(lo, hi);
        let s = _mm_add_ps(s, _mm_movehl_ps(s, s));
        let s = _mm_add_ss(s, _mm_shuffle_ps(s, s, 1));
        _mm_cvtss_f32(s)
    }

    /// Σ over blocks of `d_w·d_a·Σ(q_w·q_a) + m_w·s_a` for one `Q4_1` row.
    #[inline]
    #[target_feature(enable = "avx2,fma,f16c")]
    unsafe fn dot_q4_1(row: *const u8, acts: *const BlockQ8, nb: usize) -> f32 {
        unsafe {
            let mask = _mm_set1_epi8(0x0f);
            let ones = _mm256_set1_epi16(1);
            let mut acc = _mm256_setzero_ps();
            let mut mins = _mm_setzero_ps();
            for b in 0..nb {
                let block = row.add(b * 20);
                let a = &*acts.add(b);
                // [d, m] as f32 from the two leading halves.
                let dm = _mm_cvtph_ps(_mm_cvtsi32_si128((block as *const i32).read_unaligned()));
                let ad = _mm_set_ps(0.0, 0.0, a.s, a.d);
                let prod = _mm_mul_ps(dm, ad); // [d*ad, m*as, 0, 0]
                mins = _mm_add_ps(mins, prod);
                let q = _mm_loadu_si128(block.add(4) as *const __m128i);
                let lo = _mm_and_si128(q, mask);
                let hi = _mm_and_si128(_mm_srli_epi16(q, 4), mask);
                let qw = _mm256_set_m128i(hi, lo);
                let qa = _mm256_loadu_si256(a.qs.as_ptr() as *const __m256i);
                let p16 = _mm256_maddubs_epi16(qw, qa);
                let p32 = _mm256_madd_epi16(p16, ones);
                let scale = _mm256_set1_ps(_mm_cvtss_f32(prod));
                acc = _mm256_fmadd_ps(scale, _mm256_cvtepi32_ps(p32), acc);
            }
            // Lane 1 of `mins` accumulated the offsets; lane 0 the (unused) scales.
            hsum(acc) + _mm_cvtss_f32(_mm_shuffle_ps(mins, mins, 1))
        }
    }

    #[inline]
    #[target_feature(enable = "avx2,fma,f16c")]
    unsafe fn dot_q8_0(row: *const u8, acts: *const BlockQ8, nb: usize) -> f32 {
        unsafe {
            let ones = _mm256_set1_epi16(1);
            let mut acc = _mm256_setzero_ps();
            for b in 0..nb {
                let block = row.add(b * 34);
                let a = &*acts.add(b);
                let d = _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(i32::from(
                    (block as *const u16).read_unaligned(),
                ))));
                let qw = _mm256_loadu_si256(block.add(2) as *const __m256i);
                let qa = _mm256_loadu_si256(a.qs.as_ptr() as *const __m256i);
                // maddubs needs an unsigned operand: |w| and a carrying w's sign.
                let aw = _mm256_sign_epi8(qw, qw);
                let sa = _mm256_sign_epi8(qa, qw);
                let p32 = _mm256_madd_epi16(_mm256_maddubs_epi16(aw, sa), ones);
                acc = _mm256_fmadd_ps(_mm256_set1_ps(d * a.d), _mm256_cvtepi32_ps(p32), acc);
            }
            hsum(acc)
        }
    }

    #[target_feature(enable = "avx2,fma,f16c")]
    pub unsafe fn matmul(
        w: &QMatrix,
        rows: std::ops::Range<usize>,
        acts: &[BlockQ8],
        n_tok: usize,
        out: &mut [f32],
    ) {
        let nb = w.cols / QK;
        let rb = w.row_bytes();
        let len = rows.len();
        let base = w.data.as_ptr();
        let ap = acts.as_ptr();
        for (i, r) in rows.enumerate() {
            // SAFETY (whole loop): the caller checked `rows.end <= w.rows`,
            // `acts.len() >= n_tok * nb` and `out.len() >= n_tok * len`.
            unsafe {
                let row = base.add(r * rb);
                for t in 0..n_tok {
                    let v = match w.ty {
                        WeightType::Q4_1 => dot_q4_1(row, ap.add(t * nb), nb),
                        WeightType::Q8_0 => dot_q8_0(row, ap.add(t * nb), nb),
                    };
                    *out.get_unchecked_mut(t * len + i) = v;
                }
            }
        }
    }

    #[target_feature(enable = "avx2,fma,f16c")]
    pub unsafe fn dot_f32(a: &[f32], b: &[f32]) -> f32 {
        let n = a.len().min(b.len());
        let mut acc0 = _mm256_setzero_ps();
        let mut acc1 = _mm256_setzero_ps();
        let mut i = 0;
        // SAFETY: every load stays below `n`.
        unsafe {
            while i + 16 <= n {
                acc0 = _mm256_fmadd_ps(
                    _mm256_loadu_ps(a.as_ptr().add(i)),
                    _mm256_loadu_ps(b.as_ptr().add(i)),
                    acc0,
                );
                acc1 = _mm256_fmadd_ps(
                    _mm256_loadu_ps(a.as_ptr().add(i + 8)),
                    _mm256_loadu_ps(b.as_ptr().add(i + 8)),
                    acc1,
                );
                i += 16;
            }
            let mut s = hsum(_mm256_add_ps(acc0, acc1));
            while i < n {
                s += a[i] * b[i];
                i += 1;
            }
            s
        }
    }

    #[target_feature(enable = "avx2,fma,f16c")]
    pub unsafe fn axpy_f32(alpha: f32, x: &[f32], y: &mut [f32]) {
        let n = x.len().min(y.len());
        let va = _mm256_set1_ps(alpha);
        let mut i = 0;
        // SAFETY: every load and store stays below `n`.
        unsafe {
            while i + 8 <= n {
                let yv = _mm256_loadu_ps(y.as_ptr().add(i));
                let r = _mm256_fmadd_ps(va, _mm256_loadu_ps(x.as_ptr().add(i)), yv);
                _mm256_storeu_ps(y.as_mut_ptr().add(i), r);
                i += 8;
            }
        }
        while i < n {
            y[i] += alpha * x[i];
            i += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f32_to_f16_bits(v: f32) -> u16 {
        // Exact for the small values the tests use (normal range, 10-bit mantissa).
        let b = v.to_bits();
        let sign = ((b >> 16) & 0x8000) as u16;
        if v == 0.0 {
            return sign;
        }
        let exp = ((b >> 23) & 0xff) as i32 - 127 + 15;
        let man = ((b >> 13) & 0x3ff) as u16;
        sign | ((exp as u16) << 10) | man
    }

    fn lcg(seed: &mut u64) -> u32 {
        *seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (*seed >> 33) as u32
    }

    fn random_matrix(ty: WeightType, rows: usize, cols: usize, seed: &mut u64) -> QMatrix {
        let mut data = Vec::new();
        for _ in 0..rows * cols / QK {
            let d = f32_to_f16_bits(0.0078125 * (1 + lcg(seed) % 8) as f32);
            data.extend_from_slice(&d.to_le_bytes());
            match ty {
                WeightType::Q4_1 => {
                    let m = f32_to_f16_bits(-0.0625 * (lcg(seed) % 4) as f32);
                    data.extend_from_slice(&m.to_le_bytes());
                    data.extend((0..16).map(|_| lcg(seed) as u8));
                }
                WeightType::Q8_0 => data.extend((0..32).map(|_| lcg(seed) as u8)),
            }
        }
        QMatrix {
            ty,
            rows,
            cols,
            data,
        }
    }

    #[test]
    fn f16_conversion_is_exact() {
        assert_eq!(f16_to_f32(0x3c00), 1.0);
        assert_eq!(f16_to_f32(0xc000), -2.0);
        assert_eq!(f16_to_f32(0x0000), 0.0);
        assert_eq!(f16_to_f32(0x0001), 2f32.powi(-24));
        assert_eq!(f16_to_f32(0x7bff), 65504.0);
        assert!(f16_to_f32(0x7c00).is_infinite());
    }

    #[test]
    fn quantised_products_match_dequantised_reference() {
        let mut seed = 7u64;
        let (rows, cols, n_tok) = (13, 96, 3);
        let x: Vec<f32> = (0..n_tok * cols)
            .map(|_| (lcg(&mut seed) % 2000) as f32 / 1000.0 - 1.0)
            .collect();
        let mut acts = vec![BlockQ8::default(); n_tok * cols / QK];
        quantize_row(&x, &mut acts);
        // The reference multiplies the dequantised weights by the dequantised
        // activations, so only float rounding separates it from the kernels.
        let xq: Vec<f32> = acts
            .iter()
            .flat_map(|b| b.qs.iter().map(move |&q| b.d * f32::from(q)))
            .collect();
        for ty in [WeightType::Q4_1, WeightType::Q8_0] {
            let w = random_matrix(ty, rows, cols, &mut seed);
            let mut expected = vec![0f32; n_tok * rows];
            let mut row = vec![0f32; cols];
            for r in 0..rows {
                w.dequantize_row(r, &mut row);
                for t in 0..n_tok {
                    expected[t * rows + r] =
                        row.iter().zip(&xq[t * cols..]).map(|(a, b)| a * b).sum();
                }
            }
            let mut isas = vec![Isa::Scalar];
            if Isa::detect() != Isa::Scalar {
                isas.push(Isa::detect());
            }
            for isa in isas {
                let mut out = vec![0f32; n_tok * rows];
                matmul(isa, &w, 0..rows, &acts, n_tok, &mut out);
                for (o, e) in out.iter().zip(&expected) {
                    assert!(
                        (o - e).abs() < 1e-3 * (1.0 + e.abs()),
                        "{ty:?} {isa:?}: {o} vs {e}"
                    );
                }
                // A sub-range lands at the start of `out`.
                let mut part = vec![0f32; n_tok * 4];
                matmul(isa, &w, 5..9, &acts, n_tok, &mut part);
                for t in 0..n_tok {
                    for i in 0..4 {
                        let e = expected[t * rows + 5 + i];
                        assert!((part[t * 4 + i] - e).abs() < 1e-3 * (1.0 + e.abs()));
                    }
                }
            }
        }
    }

    #[test]
    fn f32_helpers_agree_across_isas() {
        let a: Vec<f32> = (0..70).map(|i| i as f32 * 0.5 - 3.0).collect();
        let b: Vec<f32> = (0..70).map(|i| 1.0 - i as f32 * 0.25).collect();
        let expected: f32 = a.iter().zip(&b).map(|(x, y)| x * y).sum();
        let isa = Isa::detect();
        assert!((dot_f32(isa, &a, &b) - expected).abs() < 1e-2);
        let mut y1 = b.clone();
        let mut y2 = b.clone();
        axpy_f32(isa, 0.5, &a, &mut y1);
        axpy_f32(Isa::Scalar, 0.5, &a, &mut y2);
        assert_eq!(y1, y2);
    }
}
