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
    /// `Q4_1` repacked by groups of four rows (see [`QMatrix::repack4`]).
    Q4_1x4,
    /// `Q8_0` repacked by groups of four rows (see [`QMatrix::repack4`]).
    Q8_0x4,
}

impl WeightType {
    /// Bytes of one block of [`QK`] weights.
    pub fn block_bytes(self) -> usize {
        match self {
            WeightType::Q4_1 | WeightType::Q4_1x4 => 20,
            WeightType::Q8_0 | WeightType::Q8_0x4 => 34,
        }
    }
}

/// Bytes of one block of a `Q4_1x4` four-row group: four f16 scales, four f16
/// minimums, then the 16 nibble bytes of each row.
const Q4X4_BYTES: usize = 80;
/// Bytes of one block of a `Q8_0x4` four-row group: four f16 scales, then the
/// 32 bytes of each row.
const Q8X4_BYTES: usize = 136;

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

    /// Row `r`'s bytes (plain layouts only).
    pub fn row(&self, r: usize) -> &[u8] {
        let rb = self.row_bytes();
        &self.data[r * rb..(r + 1) * rb]
    }

    /// Interleaves a matrix by groups of four rows so that one block column of
    /// four rows is contiguous: for `Q4_1`, `[d0..d3, m0..m3]` (f16) then the
    /// nibbles of rows 0..3 (80 bytes); for `Q8_0`, `[d0..d3]` then the bytes of
    /// rows 0..3 (136 bytes). The AVX2 kernels then load four scales at once,
    /// read one linear stream, and (`Q4_1`) take two rows' nibbles in one
    /// 32-byte load. Row counts that are not a multiple of four stay as they are.
    pub fn repack4(self) -> QMatrix {
        if !self.rows.is_multiple_of(4) {
            return self;
        }
        let (ty, parts): (WeightType, &[std::ops::Range<usize>]) = match self.ty {
            WeightType::Q4_1 => (WeightType::Q4_1x4, &[0..2, 2..4, 4..20]),
            WeightType::Q8_0 => (WeightType::Q8_0x4, &[0..2, 2..34]),
            WeightType::Q4_1x4 | WeightType::Q8_0x4 => return self,
        };
        let bb = self.ty.block_bytes();
        let nb = self.cols / QK;
        let mut data = Vec::with_capacity(self.data.len());
        for g in 0..self.rows / 4 {
            let rows: Vec<&[u8]> = (0..4).map(|k| self.row(4 * g + k)).collect();
            for b in 0..nb {
                for part in parts {
                    for row in &rows {
                        data.extend_from_slice(&row[b * bb..(b + 1) * bb][part.clone()]);
                    }
                }
            }
        }
        QMatrix { ty, data, ..self }
    }

    /// Scale and bytes of block `b` of row `r` of a `Q8_0x4` matrix.
    fn q8x4_block(&self, r: usize, b: usize) -> (f32, &[u8]) {
        let nb = self.cols / QK;
        let base = ((r / 4) * nb + b) * Q8X4_BYTES;
        let k = r % 4;
        let d = f16_to_f32(u16::from_le_bytes([
            self.data[base + 2 * k],
            self.data[base + 2 * k + 1],
        ]));
        (d, &self.data[base + 8 + 32 * k..base + 40 + 32 * k])
    }

    /// Scale, minimum and nibbles of block `b` of row `r` of a `Q4_1x4` matrix.
    fn x4_block(&self, r: usize, b: usize) -> (f32, f32, &[u8]) {
        let nb = self.cols / QK;
        let base = ((r / 4) * nb + b) * Q4X4_BYTES;
        let k = r % 4;
        let half = |at: usize| f16_to_f32(u16::from_le_bytes([self.data[at], self.data[at + 1]]));
        (
            half(base + 2 * k),
            half(base + 8 + 2 * k),
            &self.data[base + 16 + 16 * k..base + 32 + 16 * k],
        )
    }

    /// Row `r` as f32 (the embedding lookup).
    pub fn dequantize_row(&self, r: usize, out: &mut [f32]) {
        if self.ty == WeightType::Q8_0x4 {
            for b in 0..self.cols / QK {
                let (d, qs) = self.q8x4_block(r, b);
                for (o, &q) in out[b * QK..(b + 1) * QK].iter_mut().zip(qs) {
                    *o = d * f32::from(q as i8);
                }
            }
            return;
        }
        if self.ty == WeightType::Q4_1x4 {
            for b in 0..self.cols / QK {
                let (d, m, qs) = self.x4_block(r, b);
                for (j, &q) in qs.iter().enumerate() {
                    out[b * QK + j] = d * f32::from(q & 0x0f) + m;
                    out[b * QK + j + 16] = d * f32::from(q >> 4) + m;
                }
            }
            return;
        }
        let row = self.row(r);
        let bb = self.ty.block_bytes();
        for (b, block) in row.chunks_exact(bb).enumerate() {
            let out = &mut out[b * QK..(b + 1) * QK];
            let d = f16_to_f32(u16::from_le_bytes([block[0], block[1]]));
            match self.ty {
                WeightType::Q8_0 | WeightType::Q8_0x4 => {
                    for (o, &q) in out.iter_mut().zip(&block[2..34]) {
                        *o = d * f32::from(q as i8);
                    }
                }
                WeightType::Q4_1 | WeightType::Q4_1x4 => {
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

/// Quantises `x` (a multiple of [`QK`] long) into `out` (`x.len() / QK` blocks),
/// rounding halves to even.
pub fn quantize_row(isa: Isa, x: &[f32], out: &mut [BlockQ8]) {
    let n = (x.len() / QK).min(out.len());
    match isa {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: AVX2/FMA were detected for `Isa::Avx2`; `n` bounds both slices.
        Isa::Avx2 => unsafe { avx2::quantize_row(&x[..n * QK], &mut out[..n]) },
        Isa::Scalar => {
            for (block, xs) in out.iter_mut().zip(x.chunks_exact(QK)) {
                let amax = xs.iter().fold(0f32, |m, v| m.max(v.abs()));
                let d = amax / 127.0;
                let id = if d > 0.0 { 1.0 / d } else { 0.0 };
                let mut sum = 0i32;
                for (q, &v) in block.qs.iter_mut().zip(xs) {
                    let r = (v * id).round_ties_even() as i32;
                    *q = r as i8;
                    sum += r;
                }
                block.d = d;
                block.s = d * sum as f32;
            }
        }
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
    if w.ty == WeightType::Q4_1x4 {
        assert!(
            rows.start.is_multiple_of(4) && rows.end.is_multiple_of(4),
            "Q4_1x4 rows come in fours"
        );
    }
    match isa {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: `Isa::Avx2` is only chosen when the CPU reports AVX2, FMA and
        // F16C; the bounds were checked above.
        Isa::Avx2 => unsafe { avx2::matmul(w, rows, acts, n_tok, out) },
        Isa::Scalar => {
            let len = rows.len();
            for (i, r) in rows.enumerate() {
                let row = if w.ty == WeightType::Q4_1x4 {
                    &[][..]
                } else {
                    w.row(r)
                };
                for t in 0..n_tok {
                    let a = &acts[t * nb..(t + 1) * nb];
                    out[t * len + i] = match w.ty {
                        WeightType::Q4_1 => dot_q4_1_scalar(row, a),
                        WeightType::Q8_0 => dot_q8_0_scalar(row, a),
                        WeightType::Q4_1x4 => dot_q4_1x4_scalar(w, r, a),
                        WeightType::Q8_0x4 => dot_q8_0x4_scalar(w, r, a),
                    };
                }
            }
        }
    }
}

/// Integer dot product of one block's 16 packed nibbles (low nibbles are elements
/// 0–15, high nibbles 16–31) with a quantised activation block.
fn q4_1_isum(qs: &[u8], a: &BlockQ8) -> i32 {
    let mut isum = 0i32;
    for (j, &q) in qs.iter().enumerate() {
        isum += i32::from(q & 0x0f) * i32::from(a.qs[j]);
        isum += i32::from(q >> 4) * i32::from(a.qs[j + 16]);
    }
    isum
}

fn dot_q4_1_scalar(row: &[u8], acts: &[BlockQ8]) -> f32 {
    let mut sum = 0f32;
    for (block, a) in row.chunks_exact(20).zip(acts) {
        let d = f16_to_f32(u16::from_le_bytes([block[0], block[1]]));
        let m = f16_to_f32(u16::from_le_bytes([block[2], block[3]]));
        sum += d * a.d * q4_1_isum(&block[4..20], a) as f32 + m * a.s;
    }
    sum
}

fn dot_q4_1x4_scalar(w: &QMatrix, r: usize, acts: &[BlockQ8]) -> f32 {
    let mut sum = 0f32;
    for (b, a) in acts.iter().enumerate().take(w.cols / QK) {
        let (d, m, qs) = w.x4_block(r, b);
        sum += d * a.d * q4_1_isum(qs, a) as f32 + m * a.s;
    }
    sum
}

fn dot_q8_0x4_scalar(w: &QMatrix, r: usize, acts: &[BlockQ8]) -> f32 {
    let mut sum = 0f32;
    for (b, a) in acts.iter().enumerate().take(w.cols / QK) {
        let (d, qs) = w.q8x4_block(r, b);
        let isum: i32 = qs
            .iter()
            .zip(&a.qs)
            .map(|(&w, &x)| i32::from(w as i8) * i32::from(x))
            .sum();
        sum += d * a.d * isum as f32;
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

/// One attention head for one query: `scores[p] = scale · q · k_p` over the
/// `n_pos` cached positions, softmax, then `out = Σ scores[p] · v_p`. Key and
/// value `p` start at `p * stride` in `keys` and `values` and are `q.len()` long.
#[allow(clippy::too_many_arguments)]
pub fn attend(
    isa: Isa,
    q: &[f32],
    keys: &[f32],
    values: &[f32],
    stride: usize,
    n_pos: usize,
    scale: f32,
    scores: &mut [f32],
    out: &mut [f32],
) {
    let hd = q.len();
    assert!(n_pos > 0 && scores.len() >= n_pos && out.len() == hd);
    let need = (n_pos - 1) * stride + hd;
    assert!(keys.len() >= need && values.len() >= need);
    let scores = &mut scores[..n_pos];
    match isa {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: AVX2/FMA were detected for `Isa::Avx2`; bounds checked above.
        Isa::Avx2 => unsafe { avx2::attend(q, keys, values, stride, scale, scores, out) },
        Isa::Scalar => {
            for (p, s) in scores.iter_mut().enumerate() {
                let k = &keys[p * stride..p * stride + hd];
                *s = q.iter().zip(k).map(|(a, b)| a * b).sum::<f32>() * scale;
            }
            softmax(scores);
            out.fill(0.0);
            for (p, &w) in scores.iter().enumerate() {
                for (o, v) in out.iter_mut().zip(&values[p * stride..p * stride + hd]) {
                    *o += w * v;
                }
            }
        }
    }
}

/// In-place softmax.
#[inline]
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

    /// The four row sums of `acc` as one vector.
    #[inline]
    #[target_feature(enable = "avx2,fma,f16c")]
    fn hsum4(acc: [__m256; 4]) -> __m128 {
        let s01 = _mm256_hadd_ps(acc[0], acc[1]);
        let s23 = _mm256_hadd_ps(acc[2], acc[3]);
        let s = _mm256_hadd_ps(s01, s23);
        _mm_add_ps(_mm256_castps256_ps128(s), _mm256_extractf128_ps(s, 1))
    }

    /// Four consecutive `Q4_1` rows (`rb` bytes apart) times one activation.
    #[inline]
    #[target_feature(enable = "avx2,fma,f16c")]
    unsafe fn dot4_q4_1(row: *const u8, rb: usize, acts: *const BlockQ8, nb: usize) -> __m128 {
        unsafe {
            let mask = _mm_set1_epi8(0x0f);
            let ones = _mm256_set1_epi16(1);
            let mut acc = [_mm256_setzero_ps(); 4];
            // Lanes 2r + 1 collect row r's offsets times the activation sums.
            let mut mins = _mm256_setzero_ps();
            for b in 0..nb {
                let a = acts.add(b);
                let qa = _mm256_loadu_si256((*a).qs.as_ptr() as *const __m256i);
                // [d_a, s_a] four times.
                let ds = _mm256_castpd_ps(_mm256_set1_pd((a as *const f64).read_unaligned()));
                let blk = row.add(b * 20);
                let dm = _mm256_cvtph_ps(_mm_setr_epi32(
                    (blk as *const i32).read_unaligned(),
                    (blk.add(rb) as *const i32).read_unaligned(),
                    (blk.add(2 * rb) as *const i32).read_unaligned(),
                    (blk.add(3 * rb) as *const i32).read_unaligned(),
                ));
                let prod = _mm256_mul_ps(dm, ds); // [d0·d_a, m0·s_a, d1·d_a, m1·s_a, …]
                mins = _mm256_add_ps(mins, prod);
                for (r, acc) in acc.iter_mut().enumerate() {
                    let q = _mm_loadu_si128(blk.add(r * rb + 4) as *const __m128i);
                    let lo = _mm_and_si128(q, mask);
                    let hi = _mm_and_si128(_mm_srli_epi16(q, 4), mask);
                    let p16 = _mm256_maddubs_epi16(_mm256_set_m128i(hi, lo), qa);
                    let p32 = _mm256_cvtepi32_ps(_mm256_madd_epi16(p16, ones));
                    let scale = _mm256_permutevar8x32_ps(prod, _mm256_set1_epi32(2 * r as i32));
                    *acc = _mm256_fmadd_ps(scale, p32, *acc);
                }
            }
            let odd = _mm256_permutevar8x32_ps(mins, _mm256_setr_epi32(1, 3, 5, 7, 1, 3, 5, 7));
            _mm_add_ps(hsum4(acc), _mm256_castps256_ps128(odd))
        }
    }

    /// A four-row group of a `Q4_1x4` matrix times one activation: two rows
    /// share each 32-byte load, multiply-add and float conversion.
    #[inline]
    #[target_feature(enable = "avx2,fma,f16c")]
    unsafe fn dot_q4_1x4(group: *const u8, acts: *const BlockQ8, nb: usize) -> __m128 {
        unsafe {
            let mask = _mm256_set1_epi8(0x0f);
            let ones = _mm256_set1_epi16(1);
            let pick01 = _mm256_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1);
            let pick23 = _mm256_setr_epi32(2, 2, 2, 2, 3, 3, 3, 3);
            let mut acc01 = _mm256_setzero_ps();
            let mut acc23 = _mm256_setzero_ps();
            // Lanes 4..8 collect row r's minimum times the activation sums.
            let mut mins = _mm256_setzero_ps();
            for b in 0..nb {
                let a = acts.add(b);
                let blk = group.add(b * super::Q4X4_BYTES);
                let qs = (*a).qs.as_ptr();
                // Activation halves, each in both 128-bit lanes.
                let alo = _mm256_broadcastsi128_si256(_mm_loadu_si128(qs as *const __m128i));
                let ahi =
                    _mm256_broadcastsi128_si256(_mm_loadu_si128(qs.add(16) as *const __m128i));
                let sc = _mm256_cvtph_ps(_mm_loadu_si128(blk as *const __m128i)); // [d0..d3, m0..m3]
                let prod = _mm256_mul_ps(sc, _mm256_set1_ps((*a).d));
                mins = _mm256_fmadd_ps(sc, _mm256_set1_ps((*a).s), mins);
                let pair = |off: usize, pick: __m256i, acc: __m256| {
                    let v = _mm256_loadu_si256(blk.add(off) as *const __m256i);
                    let lo = _mm256_and_si256(v, mask);
                    let hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), mask);
                    let p16 = _mm256_add_epi16(
                        _mm256_maddubs_epi16(lo, alo),
                        _mm256_maddubs_epi16(hi, ahi),
                    );
                    let p32 = _mm256_cvtepi32_ps(_mm256_madd_epi16(p16, ones));
                    _mm256_fmadd_ps(_mm256_permutevar8x32_ps(prod, pick), p32, acc)
                };
                acc01 = pair(16, pick01, acc01);
                acc23 = pair(48, pick23, acc23);
            }
            // acc01 = [row 0 × 4 | row 1 × 4], acc23 likewise: fold to [r0, r1, r2, r3].
            let h = _mm256_hadd_ps(acc01, acc23);
            let h = _mm256_hadd_ps(h, h);
            let sums = _mm_unpacklo_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
            _mm_add_ps(sums, _mm256_extractf128_ps(mins, 1))
        }
    }

    /// A four-row group of a `Q8_0x4` matrix times one activation.
    #[inline]
    #[target_feature(enable = "avx2,fma,f16c")]
    unsafe fn dot_q8_0x4(group: *const u8, acts: *const BlockQ8, nb: usize) -> __m128 {
        unsafe {
            let ones = _mm256_set1_epi16(1);
            let mut acc = [_mm256_setzero_ps(); 4];
            for b in 0..nb {
                let a = acts.add(b);
                let blk = group.add(b * super::Q8X4_BYTES);
                let qa = _mm256_loadu_si256((*a).qs.as_ptr() as *const __m256i);
                let d = _mm_cvtph_ps(_mm_loadl_epi64(blk as *const __m128i));
                let scales = _mm_mul_ps(d, _mm_set1_ps((*a).d));
                let scales = _mm256_set_m128(scales, scales);
                for (r, acc) in acc.iter_mut().enumerate() {
                    let qw = _mm256_loadu_si256(blk.add(8 + 32 * r) as *const __m256i);
                    // maddubs needs an unsigned operand: |w| and a carrying w's sign.
                    let p16 =
                        _mm256_maddubs_epi16(_mm256_sign_epi8(qw, qw), _mm256_sign_epi8(qa, qw));
                    let p32 = _mm256_cvtepi32_ps(_mm256_madd_epi16(p16, ones));
                    let scale = _mm256_permutevar8x32_ps(scales, _mm256_set1_epi32(r as i32));
                    *acc = _mm256_fmadd_ps(scale, p32, *acc);
                }
            }
            hsum4(acc)
        }
    }

    /// Four consecutive `Q8_0` rows (`rb` bytes apart) times one activation.
    #[inline]
    #[target_feature(enable = "avx2,fma,f16c")]
    unsafe fn dot4_q8_0(row: *const u8, rb: usize, acts: *const BlockQ8, nb: usize) -> __m128 {
        unsafe {
            let ones = _mm256_set1_epi16(1);
            let mut acc = [_mm256_setzero_ps(); 4];
            for b in 0..nb {
                let a = acts.add(b);
                let qa = _mm256_loadu_si256((*a).qs.as_ptr() as *const __m256i);
                let blk = row.add(b * 34);
                let half = |r: usize| i16::from_le_bytes([*blk.add(r * rb), *blk.add(r * rb + 1)]);
                let d = _mm_cvtph_ps(_mm_setr_epi16(
                    half(0),
                    half(1),
                    half(2),
                    half(3),
                    0,
                    0,
                    0,
                    0,
                ));
                let scales = _mm_mul_ps(d, _mm_set1_ps((*a).d));
                let scales = _mm256_set_m128(scales, scales);
                for (r, acc) in acc.iter_mut().enumerate() {
                    let qw = _mm256_loadu_si256(blk.add(r * rb + 2) as *const __m256i);
                    // maddubs needs an unsigned operand: |w| and a carrying w's sign.
                    let p16 =
                        _mm256_maddubs_epi16(_mm256_sign_epi8(qw, qw), _mm256_sign_epi8(qa, qw));
                    let p32 = _mm256_cvtepi32_ps(_mm256_madd_epi16(p16, ones));
                    let scale = _mm256_permutevar8x32_ps(scales, _mm256_set1_epi32(r as i32));
                    *acc = _mm256_fmadd_ps(scale, p32, *acc);
                }
            }
            hsum4(acc)
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
        let op = out.as_mut_ptr();
        // SAFETY (whole body): the caller checked `rows.end <= w.rows`,
        // `acts.len() >= n_tok * nb` and `out.len() >= n_tok * len`.
        unsafe {
            // Four rows at a time: one activation load feeds four independent
            // accumulators, and the rows' blocks stay in L1 across tokens.
            let mut i = 0;
            while i + 4 <= len {
                let row = base.add((rows.start + i) * rb);
                for t in 0..n_tok {
                    let v = match w.ty {
                        WeightType::Q4_1 => dot4_q4_1(row, rb, ap.add(t * nb), nb),
                        WeightType::Q8_0 => dot4_q8_0(row, rb, ap.add(t * nb), nb),
                        // A group is four rows' worth of bytes, like four plain rows.
                        WeightType::Q4_1x4 => dot_q4_1x4(row, ap.add(t * nb), nb),
                        WeightType::Q8_0x4 => dot_q8_0x4(row, ap.add(t * nb), nb),
                    };
                    _mm_storeu_ps(op.add(t * len + i), v);
                }
                i += 4;
            }
            while i < len {
                let row = base.add((rows.start + i) * rb);
                for t in 0..n_tok {
                    let v = match w.ty {
                        WeightType::Q4_1 => dot_q4_1(row, ap.add(t * nb), nb),
                        WeightType::Q8_0 => dot_q8_0(row, ap.add(t * nb), nb),
                        // Unreachable: `matmul` asserts whole groups of four.
                        WeightType::Q4_1x4 | WeightType::Q8_0x4 => 0.0,
                    };
                    *op.add(t * len + i) = v;
                }
                i += 1;
            }
        }
    }

    /// `a · b` over the first `n` floats.
    #[inline]
    #[target_feature(enable = "avx2,fma,f16c")]
    unsafe fn dot(a: *const f32, b: *const f32, n: usize) -> f32 {
        unsafe {
            let mut acc0 = _mm256_setzero_ps();
            let mut acc1 = _mm256_setzero_ps();
            let mut i = 0;
            while i + 16 <= n {
                acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(a.add(i)), _mm256_loadu_ps(b.add(i)), acc0);
                acc1 = _mm256_fmadd_ps(
                    _mm256_loadu_ps(a.add(i + 8)),
                    _mm256_loadu_ps(b.add(i + 8)),
                    acc1,
                );
                i += 16;
            }
            let mut s = hsum(_mm256_add_ps(acc0, acc1));
            while i < n {
                s += *a.add(i) * *b.add(i);
                i += 1;
            }
            s
        }
    }

    /// `y += alpha · x` over the first `n` floats.
    #[inline]
    #[target_feature(enable = "avx2,fma,f16c")]
    unsafe fn axpy(alpha: f32, x: *const f32, y: *mut f32, n: usize) {
        unsafe {
            let va = _mm256_set1_ps(alpha);
            let mut i = 0;
            while i + 8 <= n {
                let r = _mm256_fmadd_ps(va, _mm256_loadu_ps(x.add(i)), _mm256_loadu_ps(y.add(i)));
                _mm256_storeu_ps(y.add(i), r);
                i += 8;
            }
            while i < n {
                *y.add(i) += alpha * *x.add(i);
                i += 1;
            }
        }
    }

    /// See [`super::attend`]; the caller checked every bound.
    #[target_feature(enable = "avx2,fma,f16c")]
    pub unsafe fn attend(
        q: &[f32],
        keys: &[f32],
        values: &[f32],
        stride: usize,
        scale: f32,
        scores: &mut [f32],
        out: &mut [f32],
    ) {
        let hd = q.len();
        // SAFETY: position `p < scores.len()` reads `p * stride .. p * stride + hd`,
        // within `keys` and `values` as the caller checked.
        unsafe {
            for (p, s) in scores.iter_mut().enumerate() {
                *s = dot(q.as_ptr(), keys.as_ptr().add(p * stride), hd) * scale;
            }
            super::softmax(scores);
            out.fill(0.0);
            for (p, &w) in scores.iter().enumerate() {
                axpy(w, values.as_ptr().add(p * stride), out.as_mut_ptr(), hd);
            }
        }
    }

    /// See [`super::quantize_row`]: `x.len() == QK * out.len()`.
    #[target_feature(enable = "avx2,fma,f16c")]
    pub unsafe fn quantize_row(x: &[f32], out: &mut [BlockQ8]) {
        let sign = _mm256_set1_ps(-0.0);
        for (block, xs) in out.iter_mut().zip(x.chunks_exact(QK)) {
            // SAFETY: `xs` holds 32 floats; `block.qs` 32 bytes.
            unsafe {
                let p = xs.as_ptr();
                let v = [
                    _mm256_loadu_ps(p),
                    _mm256_loadu_ps(p.add(8)),
                    _mm256_loadu_ps(p.add(16)),
                    _mm256_loadu_ps(p.add(24)),
                ];
                let abs = |x: __m256| _mm256_andnot_ps(sign, x);
                let m = _mm256_max_ps(
                    _mm256_max_ps(abs(v[0]), abs(v[1])),
                    _mm256_max_ps(abs(v[2]), abs(v[3])),
                );
                let m = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
                let m = _mm_max_ps(m, _mm_movehl_ps(m, m));
                let m = _mm_max_ss(m, _mm_movehdup_ps(m));
                let amax = _mm_cvtss_f32(m);
                let d = amax / 127.0;
                let id = _mm256_set1_ps(if d > 0.0 { 1.0 / d } else { 0.0 });
                // Round half to even (the MXCSR default), like the scalar path.
                let r = v.map(|x| _mm256_cvtps_epi32(_mm256_mul_ps(x, id)));
                let sum =
                    _mm256_add_epi32(_mm256_add_epi32(r[0], r[1]), _mm256_add_epi32(r[2], r[3]));
                let sum = _mm_add_epi32(
                    _mm256_castsi256_si128(sum),
                    _mm256_extracti128_si256(sum, 1),
                );
                let sum = _mm_add_epi32(sum, _mm_shuffle_epi32(sum, 0b01_00_11_10));
                let sum = _mm_add_epi32(sum, _mm_shuffle_epi32(sum, 0b10_11_00_01));
                // Pack to bytes; packs interleave the 128-bit lanes, so restore order.
                let w01 = _mm256_packs_epi32(r[0], r[1]);
                let w23 = _mm256_packs_epi32(r[2], r[3]);
                let b = _mm256_packs_epi16(w01, w23);
                let b = _mm256_permutevar8x32_epi32(b, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
                _mm256_storeu_si256(block.qs.as_mut_ptr() as *mut __m256i, b);
                block.d = d;
                block.s = d * _mm_cvtsi128_si32(sum) as f32;
            }
        }
    }
}

#[cfg(test)]
pub(crate) mod testutil {
    use super::*;

    pub fn f32_to_f16_bits(v: f32) -> u16 {
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

    pub fn lcg(seed: &mut u64) -> u32 {
        *seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (*seed >> 33) as u32
    }

    pub fn random_matrix(ty: WeightType, rows: usize, cols: usize, seed: &mut u64) -> QMatrix {
        let mut data = Vec::new();
        for _ in 0..rows * cols / QK {
            let d = f32_to_f16_bits(0.0078125 * (1 + lcg(seed) % 8) as f32);
            data.extend_from_slice(&d.to_le_bytes());
            match ty {
                WeightType::Q4_1 | WeightType::Q4_1x4 => {
                    let m = f32_to_f16_bits(-0.0625 * (lcg(seed) % 4) as f32);
                    data.extend_from_slice(&m.to_le_bytes());
                    data.extend((0..16).map(|_| lcg(seed) as u8));
                }
                WeightType::Q8_0 | WeightType::Q8_0x4 => {
                    data.extend((0..32).map(|_| lcg(seed) as u8))
                }
            }
        }
        QMatrix {
            ty,
            rows,
            cols,
            data,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::testutil::*;
    use super::*;

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
        quantize_row(Isa::Scalar, &x, &mut acts);
        // The reference multiplies the dequantised weights by the dequantised
        // activations, so only float rounding separates it from the kernels.
        let xq: Vec<f32> = acts
            .iter()
            .flat_map(|b| b.qs.iter().map(move |&q| b.d * f32::from(q)))
            .collect();
        for ty in [WeightType::Q4_1, WeightType::Q8_0, WeightType::Q4_1x4] {
            let (rows, sub) = if ty == WeightType::Q4_1x4 {
                (12, 4..8)
            } else {
                (rows, 5..9)
            };
            let w = if ty == WeightType::Q4_1x4 {
                let plain = random_matrix(WeightType::Q4_1, rows, cols, &mut seed);
                let mut before = vec![0f32; cols];
                plain.dequantize_row(6, &mut before);
                let repacked = plain.repack4();
                assert_eq!(repacked.ty, ty);
                let mut after = vec![0f32; cols];
                repacked.dequantize_row(6, &mut after);
                assert_eq!(before, after, "repacking keeps every weight");
                repacked
            } else {
                random_matrix(ty, rows, cols, &mut seed)
            };
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
                matmul(isa, &w, sub.clone(), &acts, n_tok, &mut part);
                for t in 0..n_tok {
                    for i in 0..4 {
                        let e = expected[t * rows + sub.start + i];
                        assert!((part[t * 4 + i] - e).abs() < 1e-3 * (1.0 + e.abs()));
                    }
                }
            }
        }
    }

    #[test]
    fn attention_agrees_across_isas() {
        let (hd, stride, n_pos) = (24, 40, 9);
        let q: Vec<f32> = (0..hd).map(|i| (i as f32 * 0.37).sin()).collect();
        let keys: Vec<f32> = (0..stride * n_pos)
            .map(|i| (i as f32 * 0.11).cos())
            .collect();
        let values: Vec<f32> = (0..stride * n_pos)
            .map(|i| (i as f32 * 0.23).sin())
            .collect();
        let run = |isa| {
            let (mut scores, mut out) = (vec![0f32; n_pos], vec![0f32; hd]);
            attend(
                isa,
                &q,
                &keys[4..],
                &values[4..],
                stride,
                n_pos,
                0.5,
                &mut scores,
                &mut out,
            );
            (scores, out)
        };
        let (s1, o1) = run(Isa::Scalar);
        let (s2, o2) = run(Isa::detect());
        assert!(
            (s1.iter().sum::<f32>() - 1.0).abs() < 1e-5,
            "softmax sums to one"
        );
        for (a, b) in s1.iter().zip(&s2).chain(o1.iter().zip(&o2)) {
            assert!((a - b).abs() < 1e-5, "{a} vs {b}");
        }
    }

    #[test]
    fn quantisation_agrees_across_isas_and_rounds_half_to_even() {
        let mut x: Vec<f32> = (0..96)
            .map(|i| ((i * 7919) % 257) as f32 / 64.0 - 2.0)
            .collect();
        // Block 2 has amax 127, so 2.5 and -0.5 are exact halves.
        x[64..96]
            .iter_mut()
            .enumerate()
            .for_each(|(i, v)| *v = [127.0, 2.5, -0.5, 1.0][i % 4]);
        let mut a = vec![BlockQ8::default(); 3];
        let mut b = vec![BlockQ8::default(); 3];
        quantize_row(Isa::Scalar, &x, &mut a);
        quantize_row(Isa::detect(), &x, &mut b);
        for (p, q) in a.iter().zip(&b) {
            assert_eq!(p.qs, q.qs);
            assert_eq!(p.d, q.d);
            assert!((p.s - q.s).abs() < 1e-6);
        }
        assert_eq!(&a[2].qs[..4], &[127, 2, 0, 1]);
    }
}
