//! A hand-written BERT encoder forward pass for the compiled-in MiniLM, in safe Rust.
//!
//! The weights are widened once from the embedded fp16 safetensors into contiguous `Vec<f32>`
//! (the word-embedding table stays fp16 in the binary and only the rows a text uses are
//! widened). Every linear layer keeps PyTorch's `[out][in]` layout, so each output is a
//! contiguous dot product of an input row with a weight row; the kernel computes four outputs
//! for two tokens at a time with SIMD accumulators, dispatched once at load to the widest
//! instruction set `pulp` finds (AVX2 + FMA on current x86-64, scalar otherwise).
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
            #[allow(clippy::cast_possible_truncation)]
            eps: eps as f32,
        };
        if !shape.hidden.is_multiple_of(shape.heads) {
            return Err("config.json: hidden_size is not a multiple of num_attention_heads".into());
        }
        Ok(shape)
    }
}

/// `y = x W^T + b` with `W` stored `[out][in]`.
struct Linear {
    weight: Vec<f32>,
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
        weight: load_f32(tensors, &format!("{prefix}.weight"), &[outputs, inputs])?,
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
        for layer in &self.layers {
            self.linear(&layer.qkv, &hidden, &mut qkv);
            attention(
                &qkv,
                tokens,
                h,
                self.shape.heads,
                &mask_add,
                &mut scores,
                &mut context,
            );
            self.linear(&layer.attention_out, &context, &mut projected);
            for (p, x) in projected.iter_mut().zip(&hidden) {
                *p += x;
            }
            layer_norm(&mut projected, h, &layer.attention_norm, self.shape.eps);
            std::mem::swap(&mut hidden, &mut projected);

            self.linear(&layer.intermediate, &hidden, &mut intermediate);
            for x in &mut intermediate {
                *x = gelu(*x);
            }
            self.linear(&layer.output, &intermediate, &mut projected);
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

    fn linear(&self, linear: &Linear, x: &[f32], y: &mut [f32]) {
        self.arch.dispatch(LinearOp {
            x,
            weight: &linear.weight,
            bias: &linear.bias,
            inputs: linear.inputs,
            outputs: linear.outputs,
            y,
        });
    }
}

/// `y[t][j] = bias[j] + x[t] . weight[j]` for every token `t` and output `j`.
struct LinearOp<'a> {
    x: &'a [f32],
    weight: &'a [f32],
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
            weight,
            bias,
            inputs,
            outputs,
            y,
        } = self;
        let tokens = x.len() / inputs;
        let row = |t: usize| &x[t * inputs..(t + 1) * inputs];
        let mut j = 0;
        while j + 4 <= outputs {
            let w = [
                &weight[j * inputs..(j + 1) * inputs],
                &weight[(j + 1) * inputs..(j + 2) * inputs],
                &weight[(j + 2) * inputs..(j + 3) * inputs],
                &weight[(j + 3) * inputs..(j + 4) * inputs],
            ];
            let mut t = 0;
            while t + 2 <= tokens {
                let sums = dot_4x2(simd, [row(t), row(t + 1)], w);
                for (r, token_sums) in sums.iter().enumerate() {
                    let out = &mut y[(t + r) * outputs + j..(t + r) * outputs + j + 4];
                    for ((o, s), b) in out.iter_mut().zip(token_sums).zip(&bias[j..j + 4]) {
                        *o = s + b;
                    }
                }
                t += 2;
            }
            if t < tokens {
                let sums = dot_4x1(simd, row(t), w);
                let out = &mut y[t * outputs + j..t * outputs + j + 4];
                for ((o, s), b) in out.iter_mut().zip(&sums).zip(&bias[j..j + 4]) {
                    *o = s + b;
                }
            }
            j += 4;
        }
        while j < outputs {
            let w = &weight[j * inputs..(j + 1) * inputs];
            for t in 0..tokens {
                y[t * outputs + j] = bias[j] + dot_1x1(simd, row(t), w);
            }
            j += 1;
        }
    }
}

#[inline(always)]
fn dot_4x2<S: Simd>(simd: S, x: [&[f32]; 2], w: [&[f32]; 4]) -> [[f32; 4]; 2] {
    let (x0, x0_tail) = S::as_simd_f32s(x[0]);
    let (x1, x1_tail) = S::as_simd_f32s(x[1]);
    let (w0, w0_tail) = S::as_simd_f32s(w[0]);
    let (w1, w1_tail) = S::as_simd_f32s(w[1]);
    let (w2, w2_tail) = S::as_simd_f32s(w[2]);
    let (w3, w3_tail) = S::as_simd_f32s(w[3]);
    let zero = simd.splat_f32s(0.0);
    let mut acc = [[zero; 4]; 2];
    for (((((&a0, &a1), &b0), &b1), &b2), &b3) in x0.iter().zip(x1).zip(w0).zip(w1).zip(w2).zip(w3)
    {
        acc[0][0] = simd.mul_add_e_f32s(a0, b0, acc[0][0]);
        acc[0][1] = simd.mul_add_e_f32s(a0, b1, acc[0][1]);
        acc[0][2] = simd.mul_add_e_f32s(a0, b2, acc[0][2]);
        acc[0][3] = simd.mul_add_e_f32s(a0, b3, acc[0][3]);
        acc[1][0] = simd.mul_add_e_f32s(a1, b0, acc[1][0]);
        acc[1][1] = simd.mul_add_e_f32s(a1, b1, acc[1][1]);
        acc[1][2] = simd.mul_add_e_f32s(a1, b2, acc[1][2]);
        acc[1][3] = simd.mul_add_e_f32s(a1, b3, acc[1][3]);
    }
    let tails = [w0_tail, w1_tail, w2_tail, w3_tail];
    let mut out = [[0.0_f32; 4]; 2];
    for (r, x_tail) in [x0_tail, x1_tail].into_iter().enumerate() {
        for (c, w_tail) in tails.iter().enumerate() {
            let mut sum = simd.reduce_sum_f32s(acc[r][c]);
            for (a, b) in x_tail.iter().zip(*w_tail) {
                sum += a * b;
            }
            out[r][c] = sum;
        }
    }
    out
}

#[inline(always)]
fn dot_4x1<S: Simd>(simd: S, x: &[f32], w: [&[f32]; 4]) -> [f32; 4] {
    let (x0, x_tail) = S::as_simd_f32s(x);
    let (w0, w0_tail) = S::as_simd_f32s(w[0]);
    let (w1, w1_tail) = S::as_simd_f32s(w[1]);
    let (w2, w2_tail) = S::as_simd_f32s(w[2]);
    let (w3, w3_tail) = S::as_simd_f32s(w[3]);
    let zero = simd.splat_f32s(0.0);
    let mut acc = [zero; 4];
    for ((((&a, &b0), &b1), &b2), &b3) in x0.iter().zip(w0).zip(w1).zip(w2).zip(w3) {
        acc[0] = simd.mul_add_e_f32s(a, b0, acc[0]);
        acc[1] = simd.mul_add_e_f32s(a, b1, acc[1]);
        acc[2] = simd.mul_add_e_f32s(a, b2, acc[2]);
        acc[3] = simd.mul_add_e_f32s(a, b3, acc[3]);
    }
    let tails = [w0_tail, w1_tail, w2_tail, w3_tail];
    let mut out = [0.0_f32; 4];
    for (c, w_tail) in tails.iter().enumerate() {
        let mut sum = simd.reduce_sum_f32s(acc[c]);
        for (a, b) in x_tail.iter().zip(*w_tail) {
            sum += a * b;
        }
        out[c] = sum;
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
    #[allow(clippy::cast_precision_loss)]
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
    #[allow(clippy::cast_precision_loss)]
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

/// GELU in BERT's exact form, `x / 2 * (1 + erf(x / sqrt 2))`.
fn gelu(x: f32) -> f32 {
    let x = f64::from(x);
    #[allow(clippy::cast_possible_truncation)]
    let y = (0.5 * x * (1.0 + erf(x * std::f64::consts::FRAC_1_SQRT_2))) as f32;
    y
}

/// The error function, to about 1.2e-7 relative accuracy (Numerical Recipes' `erfc`
/// Chebyshev fit), well below the fp32 resolution of the activations.
fn erf(x: f64) -> f64 {
    let z = x.abs();
    let t = 1.0 / (1.0 + 0.5 * z);
    let poly = -z * z - 1.265_512_23
        + t * (1.000_023_68
            + t * (0.374_091_96
                + t * (0.096_784_18
                    + t * (-0.186_288_06
                        + t * (0.278_868_07
                            + t * (-1.135_203_98
                                + t * (1.488_515_87 + t * (-0.822_152_23 + t * 0.170_872_77))))))));
    let erfc = t * poly.exp();
    if x >= 0.0 { 1.0 - erfc } else { erfc - 1.0 }
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
        ] {
            assert!((erf(x) - expected).abs() < 2e-7, "erf({x}) = {}", erf(x));
        }
    }

    #[test]
    fn the_simd_kernel_matches_a_plain_matmul() {
        // Odd sizes exercise every tail: 3 tokens, 7 outputs, 21 inputs.
        let (tokens, inputs, outputs) = (3, 21, 7);
        #[allow(clippy::cast_precision_loss)]
        let value = |i: usize| ((i * 37 % 101) as f32 - 50.0) / 25.0;
        let x: Vec<f32> = (0..tokens * inputs).map(value).collect();
        let weight: Vec<f32> = (0..outputs * inputs).map(|i| value(i + 7)).collect();
        let bias: Vec<f32> = (0..outputs).map(|i| value(i + 3)).collect();
        let mut y = vec![0.0; tokens * outputs];
        Arch::new().dispatch(LinearOp {
            x: &x,
            weight: &weight,
            bias: &bias,
            inputs,
            outputs,
            y: &mut y,
        });
        for t in 0..tokens {
            for j in 0..outputs {
                let expected: f32 = bias[j]
                    + (0..inputs)
                        .map(|k| x[t * inputs + k] * weight[j * inputs + k])
                        .sum::<f32>();
                assert!((y[t * outputs + j] - expected).abs() < 1e-4);
            }
        }
    }
}
