//! A hand-written BERT encoder forward pass for the compiled-in MiniLM, in safe Rust.
//!
//! The linear layers keep the embedded fp16 bits (copied once at load into contiguous
//! `Vec<u16>`, 21 MB, which fits a 32 MB L3 where 42 MB of fp32 did not) in PyTorch's
//! `[out][in]` layout. A product widens four weight rows at a time into an fp32 panel (exact,
//! vectorised integer operations), then computes their dot products with two or four input
//! rows at once in SIMD accumulators. The word-embedding table is read straight from the
//! embedded bytes, one row per token; the small tensors (biases, LayerNorm, positions) are
//! widened at load. SIMD code is dispatched by `pulp` to the widest instruction set the CPU
//! has (AVX-512 or AVX2 + FMA on x86-64, a scalar fallback elsewhere), chosen once at load.
//!
//! Everything runs on the calling thread, in a fixed order: the same text gives the same bits
//! on the same machine.

use pulp::{Arch, Simd, WithSimd};
use safetensors::{Dtype, SafeTensors};

/// The shape and constants read from `config.json`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct BertShape {
    pub(crate) vocab: usize,
    pub(crate) hidden: usize,
    pub(crate) heads: usize,
    pub(crate) layers: usize,
    pub(crate) intermediate: usize,
    pub(crate) max_positions: usize,
    pub(crate) type_vocab: usize,
    pub(crate) eps: f32,
}

impl BertShape {
    /// Reads the fields this forward pass needs, refusing activations it does not implement.
    pub(crate) fn from_config(config: &serde_json::Value) -> Result<Self, String> {
        let int = |key: &str| -> Result<usize, String> {
            config
                .get(key)
                .and_then(serde_json::Value::as_u64)
                .and_then(|v| usize::try_from(v).ok())
                .filter(|v| *v > 0)
                .ok_or_else(|| format!("config.json: {key} is missing or not a positive integer"))
        };
        let act = config.get("hidden_act").and_then(serde_json::Value::as_str);
        if act != Some("gelu") {
            return Err(format!("config.json: hidden_act {act:?} is not \"gelu\""));
        }
        let eps = config
            .get("layer_norm_eps")
            .and_then(serde_json::Value::as_f64)
            .ok_or("config.json: layer_norm_eps is missing")?;
        let shape = Self {
            vocab: int("vocab_size")?,
            hidden: int("hidden_size")?,
            heads: int("num_attention_heads")?,
            layers: int("num_hidden_layers")?,
            intermediate: int("intermediate_size")?,
            max_positions: int("max_position_embeddings")?,
            type_vocab: int("type_vocab_size")?,
            eps: eps as f32,
        };
        if !shape.hidden.is_multiple_of(shape.heads) {
            return Err("config.json: hidden_size is not a multiple of num_attention_heads".into());
        }
        Ok(shape)
    }
}

/// `y = x W^T + b` with `W` stored `[out][in]` as fp16 bits (widened a few rows at a time
/// while the product runs, so the weights stream through the cache at half the size).
struct Linear {
    weight: Vec<u16>,
    bias: Vec<f32>,
    inputs: usize,
    outputs: usize,
}

struct LayerNorm {
    gamma: Vec<f32>,
    beta: Vec<f32>,
}

struct Layer {
    /// Query, key and value projections stacked into one `[3 * hidden][hidden]` matrix.
    qkv: Linear,
    attention_out: Linear,
    attention_norm: LayerNorm,
    intermediate: Linear,
    output: Linear,
    output_norm: LayerNorm,
}

/// The loaded encoder.
pub(crate) struct Bert {
    shape: BertShape,
    arch: Arch,
    /// `[vocab][hidden]` fp16, little endian, straight from the embedded file.
    word_embeddings: &'static [u8],
    position_embeddings: Vec<f32>,
    token_type_embeddings: Vec<f32>,
    embedding_norm: LayerNorm,
    layers: Vec<Layer>,
}

fn tensor<'a>(tensors: &SafeTensors<'a>, name: &str, shape: &[usize]) -> Result<&'a [u8], String> {
    let view = tensors
        .tensor(name)
        .map_err(|e| format!("tensor {name}: {e}"))?;
    if view.dtype() != Dtype::F16 {
        return Err(format!("tensor {name}: {:?}, expected F16", view.dtype()));
    }
    if view.shape() != shape {
        return Err(format!(
            "tensor {name}: shape {:?}, expected {shape:?}",
            view.shape()
        ));
    }
    Ok(view.data())
}

fn widen(bytes: &[u8]) -> Vec<f32> {
    bytes
        .chunks_exact(2)
        .map(|pair| half::f16::from_le_bytes([pair[0], pair[1]]).to_f32())
        .collect()
}

/// The fp16 bits of a tensor, refusing infinities and NaNs (the fast widening below does
/// not handle them, and a finite checkpoint has none).
fn load_f16(tensors: &SafeTensors<'_>, name: &str, shape: &[usize]) -> Result<Vec<u16>, String> {
    let bits: Vec<u16> = tensor(tensors, name, shape)?
        .chunks_exact(2)
        .map(|pair| u16::from_le_bytes([pair[0], pair[1]]))
        .collect();
    if bits.iter().any(|h| h & 0x7c00 == 0x7c00) {
        return Err(format!("tensor {name}: not finite"));
    }
    Ok(bits)
}

/// `2^112`: rebiases an fp16 exponent placed in an f32 (`15` to `127`).
const FP16_REBIAS: f32 = f32::from_bits(0x7780_0000);

/// Widens finite fp16 bits to f32, exactly (normals, subnormals and signed zeros alike),
/// with integer operations the compiler vectorises.
#[inline(always)]
fn widen_fp16(src: &[u16], dst: &mut [f32]) {
    for (d, &h) in dst.iter_mut().zip(src) {
        // Sign to bit 31, exponent and mantissa to bits 13..=27; the arithmetic shift's
        // copies of the sign in bits 28..=30 are masked off.
        let bits = (((u32::from(h) << 16) as i32) >> 3) as u32 & 0x8fff_e000;
        *d = f32::from_bits(bits) * FP16_REBIAS;
    }
}

fn load_f32(tensors: &SafeTensors<'_>, name: &str, shape: &[usize]) -> Result<Vec<f32>, String> {
    tensor(tensors, name, shape).map(widen)
}

fn load_linear(
    tensors: &SafeTensors<'_>,
    prefix: &str,
    inputs: usize,
    outputs: usize,
) -> Result<Linear, String> {
    Ok(Linear {
        weight: load_f16(tensors, &format!("{prefix}.weight"), &[outputs, inputs])?,
        bias: load_f32(tensors, &format!("{prefix}.bias"), &[outputs])?,
        inputs,
        outputs,
    })
}

fn load_norm(tensors: &SafeTensors<'_>, prefix: &str, size: usize) -> Result<LayerNorm, String> {
    Ok(LayerNorm {
        gamma: load_f32(tensors, &format!("{prefix}.weight"), &[size])?,
        beta: load_f32(tensors, &format!("{prefix}.bias"), &[size])?,
    })
}

impl Bert {
    /// Widens the encoder's weights from the embedded fp16 safetensors.
    pub(crate) fn load(weights: &'static [u8], shape: BertShape) -> Result<Self, String> {
        let tensors = SafeTensors::deserialize(weights).map_err(|e| e.to_string())?;
        let h = shape.hidden;
        let word_embeddings = tensor(
            &tensors,
            "embeddings.word_embeddings.weight",
            &[shape.vocab, h],
        )?;
        let position_embeddings = load_f32(
            &tensors,
            "embeddings.position_embeddings.weight",
            &[shape.max_positions, h],
        )?;
        let token_type_embeddings = load_f32(
            &tensors,
            "embeddings.token_type_embeddings.weight",
            &[shape.type_vocab, h],
        )?;
        let embedding_norm = load_norm(&tensors, "embeddings.LayerNorm", h)?;
        let mut layers = Vec::with_capacity(shape.layers);
        for index in 0..shape.layers {
            let p = format!("encoder.layer.{index}");
            let query = load_linear(&tensors, &format!("{p}.attention.self.query"), h, h)?;
            let key = load_linear(&tensors, &format!("{p}.attention.self.key"), h, h)?;
            let value = load_linear(&tensors, &format!("{p}.attention.self.value"), h, h)?;
            let qkv = Linear {
                weight: [query.weight, key.weight, value.weight].concat(),
                bias: [query.bias, key.bias, value.bias].concat(),
                inputs: h,
                outputs: 3 * h,
            };
            layers.push(Layer {
                qkv,
                attention_out: load_linear(&tensors, &format!("{p}.attention.output.dense"), h, h)?,
                attention_norm: load_norm(&tensors, &format!("{p}.attention.output.LayerNorm"), h)?,
                intermediate: load_linear(
                    &tensors,
                    &format!("{p}.intermediate.dense"),
                    h,
                    shape.intermediate,
                )?,
                output: load_linear(
                    &tensors,
                    &format!("{p}.output.dense"),
                    shape.intermediate,
                    h,
                )?,
                output_norm: load_norm(&tensors, &format!("{p}.output.LayerNorm"), h)?,
            });
        }
        Ok(Self {
            shape,
            arch: Arch::new(),
            word_embeddings,
            position_embeddings,
            token_type_embeddings,
            embedding_norm,
            layers,
        })
    }

    /// Runs the encoder over one unpadded text and mean-pools the last hidden states over
    /// the attention mask (not normalised).
    pub(crate) fn embed_pooled(
        &self,
        ids: &[u32],
        type_ids: &[u32],
        mask: &[u32],
    ) -> Result<Vec<f32>, String> {
        let tokens = ids.len();
        if type_ids.len() != tokens || mask.len() != tokens {
            return Err("ids, type ids and mask differ in length".into());
        }
        if tokens == 0 {
            return Err("no tokens".into());
        }
        if tokens > self.shape.max_positions {
            return Err(format!(
                "{tokens} tokens, at most {} positions",
                self.shape.max_positions
            ));
        }
        let h = self.shape.hidden;

        // Embeddings: word + token type + position, then LayerNorm.
        let mut hidden = vec![0.0_f32; tokens * h];
        for (t, row) in hidden.chunks_exact_mut(h).enumerate() {
            let id = ids[t] as usize;
            let type_id = type_ids[t] as usize;
            if id >= self.shape.vocab {
                return Err(format!("token id {id} is outside the vocabulary"));
            }
            if type_id >= self.shape.type_vocab {
                return Err(format!("token type {type_id} is outside the model's range"));
            }
            let word = &self.word_embeddings[id * h * 2..(id + 1) * h * 2];
            let token_type = &self.token_type_embeddings[type_id * h..(type_id + 1) * h];
            let position = &self.position_embeddings[t * h..(t + 1) * h];
            for (((out, w), tt), p) in row
                .iter_mut()
                .zip(word.chunks_exact(2))
                .zip(token_type)
                .zip(position)
            {
                *out = (half::f16::from_le_bytes([w[0], w[1]]).to_f32() + tt) + p;
            }
        }
        layer_norm(&mut hidden, h, &self.embedding_norm, self.shape.eps);

        // Additive attention mask: 0 for kept tokens, f32::MIN for masked ones.
        let mask_add: Vec<f32> = mask
            .iter()
            .map(|&m| if m == 0 { f32::MIN } else { 0.0 })
            .collect();

        let mut qkv = vec![0.0_f32; tokens * 3 * h];
        let mut context = vec![0.0_f32; tokens * h];
        let mut projected = vec![0.0_f32; tokens * h];
        let mut intermediate = vec![0.0_f32; tokens * self.shape.intermediate];
        let mut scores = vec![0.0_f32; tokens];
        let mut panel = Vec::new();
        for layer in &self.layers {
            self.linear(&layer.qkv, &hidden, &mut qkv, &mut panel);
            attention(
                &qkv,
                tokens,
                h,
                self.shape.heads,
                &mask_add,
                &mut scores,
                &mut context,
            );
            self.linear(&layer.attention_out, &context, &mut projected, &mut panel);
            for (p, x) in projected.iter_mut().zip(&hidden) {
                *p += x;
            }
            layer_norm(&mut projected, h, &layer.attention_norm, self.shape.eps);
            std::mem::swap(&mut hidden, &mut projected);

            self.linear(&layer.intermediate, &hidden, &mut intermediate, &mut panel);
            self.arch.dispatch(GeluOp(&mut intermediate));
            self.linear(&layer.output, &intermediate, &mut projected, &mut panel);
            for (p, x) in projected.iter_mut().zip(&hidden) {
                *p += x;
            }
            layer_norm(&mut projected, h, &layer.output_norm, self.shape.eps);
            std::mem::swap(&mut hidden, &mut projected);
        }

        // Mean over the tokens the mask keeps.
        let mut pooled = vec![0.0_f32; h];
        let mut count = 0.0_f32;
        for (row, &m) in hidden.chunks_exact(h).zip(mask) {
            if m != 0 {
                count += 1.0;
                for (acc, x) in pooled.iter_mut().zip(row) {
                    *acc += x;
                }
            }
        }
        for x in &mut pooled {
            *x /= count;
        }
        Ok(pooled)
    }

    fn linear(&self, linear: &Linear, x: &[f32], y: &mut [f32], panel: &mut Vec<f32>) {
        panel.resize(ROWS * linear.inputs, 0.0);
        self.arch.dispatch(LinearOp {
            x,
            panel,
            weight: &linear.weight,
            bias: &linear.bias,
            inputs: linear.inputs,
            outputs: linear.outputs,
            y,
        });
    }
}

/// Output rows widened and computed together.
const ROWS: usize = 4;

/// `y[t][j] = bias[j] + x[t] . weight[j]` for every token `t` and output `j`.
struct LinearOp<'a> {
    x: &'a [f32],
    /// Scratch for `ROWS` widened weight rows.
    panel: &'a mut [f32],
    weight: &'a [u16],
    bias: &'a [f32],
    inputs: usize,
    outputs: usize,
    y: &'a mut [f32],
}

impl WithSimd for LinearOp<'_> {
    type Output = ();

    #[inline(always)]
    fn with_simd<S: Simd>(self, simd: S) {
        let Self {
            x,
            panel,
            weight,
            bias,
            inputs,
            outputs,
            y,
        } = self;
        let tokens = x.len() / inputs;
        let wide = std::mem::size_of::<S::f32s>() >= 64;
        let row = |t: usize| &x[t * inputs..(t + 1) * inputs];
        let mut j = 0;
        while j + ROWS <= outputs {
            widen_fp16(&weight[j * inputs..(j + ROWS) * inputs], panel);
            let w = [
                &panel[..inputs],
                &panel[inputs..2 * inputs],
                &panel[2 * inputs..3 * inputs],
                &panel[3 * inputs..4 * inputs],
            ];
            let bias = &bias[j..j + ROWS];
            let mut store = |t: usize, sums: &[f32; ROWS]| {
                let out = &mut y[t * outputs + j..t * outputs + j + ROWS];
                for ((o, s), b) in out.iter_mut().zip(sums).zip(bias) {
                    *o = s + b;
                }
            };
            let mut t = 0;
            // Four tokens at a time where the registers hold 16 accumulators (AVX-512),
            // two at a time otherwise.
            if wide {
                while t + 4 <= tokens {
                    let sums = dot_tile(simd, [row(t), row(t + 1), row(t + 2), row(t + 3)], w);
                    for (r, token_sums) in sums.iter().enumerate() {
                        store(t + r, token_sums);
                    }
                    t += 4;
                }
            }
            while t + 2 <= tokens {
                let sums = dot_tile(simd, [row(t), row(t + 1)], w);
                for (r, token_sums) in sums.iter().enumerate() {
                    store(t + r, token_sums);
                }
                t += 2;
            }
            if t < tokens {
                let [sums] = dot_tile(simd, [row(t)], w);
                store(t, &sums);
            }
            j += ROWS;
        }
        while j < outputs {
            let w = &mut panel[..inputs];
            widen_fp16(&weight[j * inputs..(j + 1) * inputs], w);
            let w = &*w;
            for t in 0..tokens {
                y[t * outputs + j] = bias[j] + dot_1x1(simd, row(t), w);
            }
            j += 1;
        }
    }
}

/// Dot products of `N` input rows with `ROWS` weight rows, `N x ROWS` SIMD accumulators.
#[inline(always)]
fn dot_tile<S: Simd, const N: usize>(
    simd: S,
    x: [&[f32]; N],
    w: [&[f32]; ROWS],
) -> [[f32; ROWS]; N] {
    let split_w = w.map(S::as_simd_f32s);
    let split_x = x.map(S::as_simd_f32s);
    let len = split_w[0].0.len();
    let wv = split_w.map(|(head, _)| &head[..len]);
    let xv = split_x.map(|(head, _)| &head[..len]);
    let zero = simd.splat_f32s(0.0);
    let mut acc = [[zero; ROWS]; N];
    for i in 0..len {
        let b = [wv[0][i], wv[1][i], wv[2][i], wv[3][i]];
        for (acc_row, x_row) in acc.iter_mut().zip(&xv) {
            let a = x_row[i];
            for (acc, &b) in acc_row.iter_mut().zip(&b) {
                *acc = simd.mul_add_e_f32s(a, b, *acc);
            }
        }
    }
    let mut out = [[0.0_f32; ROWS]; N];
    for ((out_row, acc_row), (_, x_tail)) in out.iter_mut().zip(&acc).zip(&split_x) {
        for ((o, &acc), (_, w_tail)) in out_row.iter_mut().zip(acc_row).zip(&split_w) {
            let mut sum = simd.reduce_sum_f32s(acc);
            for (a, b) in x_tail.iter().zip(*w_tail) {
                sum += a * b;
            }
            *o = sum;
        }
    }
    out
}

#[inline(always)]
fn dot_1x1<S: Simd>(simd: S, x: &[f32], w: &[f32]) -> f32 {
    let (x0, x_tail) = S::as_simd_f32s(x);
    let (w0, w_tail) = S::as_simd_f32s(w);
    let mut acc = simd.splat_f32s(0.0);
    for (&a, &b) in x0.iter().zip(w0) {
        acc = simd.mul_add_e_f32s(a, b, acc);
    }
    let mut sum = simd.reduce_sum_f32s(acc);
    for (a, b) in x_tail.iter().zip(w_tail) {
        sum += a * b;
    }
    sum
}

/// Multi-head scaled dot-product attention over the stacked `[tokens][q | k | v]` rows.
fn attention(
    qkv: &[f32],
    tokens: usize,
    hidden: usize,
    heads: usize,
    mask_add: &[f32],
    scores: &mut [f32],
    context: &mut [f32],
) {
    let head_dim = hidden / heads;
    let scale = 1.0 / (head_dim as f32).sqrt();
    let stride = 3 * hidden;
    for head in 0..heads {
        let q_off = head * head_dim;
        let k_off = hidden + head * head_dim;
        let v_off = 2 * hidden + head * head_dim;
        for i in 0..tokens {
            let q = &qkv[i * stride + q_off..i * stride + q_off + head_dim];
            let mut max = f32::NEG_INFINITY;
            for (j, score) in scores.iter_mut().enumerate() {
                let k = &qkv[j * stride + k_off..j * stride + k_off + head_dim];
                let s = dot_lanes(q, k) * scale + mask_add[j];
                *score = s;
                max = max.max(s);
            }
            let mut sum = 0.0_f32;
            for score in scores.iter_mut() {
                *score = (*score - max).exp();
                sum += *score;
            }
            let out = &mut context[i * hidden + q_off..i * hidden + q_off + head_dim];
            out.fill(0.0);
            for (j, score) in scores.iter().enumerate() {
                let p = score / sum;
                let v = &qkv[j * stride + v_off..j * stride + v_off + head_dim];
                for (o, x) in out.iter_mut().zip(v) {
                    *o += p * x;
                }
            }
        }
    }
}

/// A dot product with eight independent partial sums, which the compiler vectorises.
fn dot_lanes(a: &[f32], b: &[f32]) -> f32 {
    let mut lanes = [0.0_f32; 8];
    let chunks = a.chunks_exact(8).zip(b.chunks_exact(8));
    for (ca, cb) in chunks {
        for l in 0..8 {
            lanes[l] += ca[l] * cb[l];
        }
    }
    let mut sum = lanes.iter().sum::<f32>();
    let done = a.len() / 8 * 8;
    for (x, y) in a[done..].iter().zip(&b[done..]) {
        sum += x * y;
    }
    sum
}

/// LayerNorm over each `width`-wide row, in place.
fn layer_norm(rows: &mut [f32], width: usize, norm: &LayerNorm, eps: f32) {
    let n = width as f32;
    for row in rows.chunks_exact_mut(width) {
        let mean = row.iter().sum::<f32>() / n;
        let var = row.iter().map(|x| (x - mean) * (x - mean)).sum::<f32>() / n;
        let inv = 1.0 / (var + eps).sqrt();
        for ((x, g), b) in row.iter_mut().zip(&norm.gamma).zip(&norm.beta) {
            *x = (*x - mean) * inv * g + b;
        }
    }
}

/// GELU over a slice, in place, inside the SIMD dispatch so that the loop is vectorised.
struct GeluOp<'a>(&'a mut [f32]);

impl WithSimd for GeluOp<'_> {
    type Output = ();

    #[inline(always)]
    fn with_simd<S: Simd>(self, _simd: S) {
        for x in self.0.iter_mut() {
            *x = gelu(*x);
        }
    }
}

/// GELU in BERT's exact form, `x / 2 * (1 + erf(x / sqrt 2))`, computed in f64.
#[inline(always)]
fn gelu(x: f32) -> f32 {
    let x = f64::from(x);
    (0.5 * x * (1.0 + erf(x * std::f64::consts::FRAC_1_SQRT_2))) as f32
}

/// The error function to within 3e-7 (Abramowitz and Stegun 7.1.28), without branches or
/// calls so that it vectorises: `1 - (1 + a1 z + ... + a6 z^6)^-16` for `z = |x|`, signed.
#[inline(always)]
fn erf(x: f64) -> f64 {
    let z = x.abs();
    let p = 1.0
        + z * (0.070_523_078_4
            + z * (0.042_282_012_3
                + z * (0.009_270_527_2
                    + z * (0.000_152_014_3 + z * (0.000_276_567_2 + z * 0.000_043_063_8)))));
    let p2 = p * p;
    let p4 = p2 * p2;
    let p8 = p4 * p4;
    let p16 = p8 * p8;
    (1.0 - 1.0 / p16).copysign(x)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn erf_matches_known_values() {
        for (x, expected) in [
            (0.0, 0.0),
            (0.5, 0.520_499_877_813_046_5),
            (1.0, 0.842_700_792_949_714_9),
            (2.0, 0.995_322_265_018_952_7),
            (-1.0, -0.842_700_792_949_714_9),
            (4.0, 0.999_999_984_582_742_1),
            (-0.1, -0.112_462_916_018_284_9),
            (30.0, 1.0),
        ] {
            assert!((erf(x) - expected).abs() < 3e-7, "erf({x}) = {}", erf(x));
        }
    }

    #[test]
    fn fp16_widening_is_exact_for_every_finite_value() {
        let finite: Vec<u16> = (0..=u16::MAX).filter(|h| h & 0x7c00 != 0x7c00).collect();
        let mut widened = vec![0.0_f32; finite.len()];
        widen_fp16(&finite, &mut widened);
        for (h, w) in finite.iter().zip(&widened) {
            assert_eq!(
                w.to_bits(),
                half::f16::from_bits(*h).to_f32().to_bits(),
                "{h:#06x}"
            );
        }
    }

    #[test]
    fn the_simd_kernel_matches_a_plain_matmul() {
        // Odd sizes exercise every tile and tail: 7 tokens (4 + 2 + 1), 7 outputs (4 + 3),
        // 21 inputs (SIMD vectors and a scalar remainder).
        let (tokens, inputs, outputs) = (7, 21, 7);
        let value = |i: usize| ((i * 37 % 101) as f32 - 50.0) / 25.0;
        let x: Vec<f32> = (0..tokens * inputs).map(value).collect();
        let weight: Vec<u16> = (0..outputs * inputs)
            .map(|i| half::f16::from_f32(value(i + 7)).to_bits())
            .collect();
        let widened = |i: usize| half::f16::from_bits(weight[i]).to_f32();
        let bias: Vec<f32> = (0..outputs).map(|i| value(i + 3)).collect();
        let run = |f: &dyn Fn(LinearOp<'_>)| -> Vec<f32> {
            let mut panel = vec![0.0; ROWS * inputs];
            let mut y = vec![0.0; tokens * outputs];
            f(LinearOp {
                x: &x,
                panel: &mut panel,
                weight: &weight,
                bias: &bias,
                inputs,
                outputs,
                y: &mut y,
            });
            y
        };
        let y = run(&|op| Arch::new().dispatch(op));
        // The scalar fallback and, where the CPU has them, AVX2 and AVX-512 directly.
        let mut others = vec![run(&|op| op.with_simd(pulp::Scalar::new()))];
        #[cfg(target_arch = "x86_64")]
        {
            if let Some(simd) = pulp::x86::V3::try_new() {
                others.push(run(&|op| op.with_simd(simd)));
            }
            if let Some(simd) = pulp::x86::V4::try_new() {
                others.push(run(&|op| op.with_simd(simd)));
            }
        }
        for other in &others {
            for (a, b) in y.iter().zip(other) {
                assert!((a - b).abs() < 1e-4);
            }
        }
        for t in 0..tokens {
            for j in 0..outputs {
                let expected: f32 = bias[j]
                    + (0..inputs)
                        .map(|k| x[t * inputs + k] * widened(j * inputs + k))
                        .sum::<f32>();
                assert!((y[t * outputs + j] - expected).abs() < 1e-4);
            }
        }
    }
}
