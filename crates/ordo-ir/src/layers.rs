//! Shorthands on [`GraphBuilder`] for the common layers, so that model code reads like the
//! reference module definitions.

use crate::builder::GraphBuilder;
use crate::error::IrResult;
use crate::ids::OutletId;
use crate::op::{BatchNorm, Conv2d, Embedding, LayerNorm, Linear, Lstm, Op, Pool2d, UnaryOp};

impl GraphBuilder {
    /// `Conv2d` layer.
    pub fn conv2d(&mut self, name: &str, x: OutletId, conv: Conv2d) -> IrResult<OutletId> {
        self.op(name, Op::Conv2d(conv), &[x])
    }

    /// `BatchNorm` layer with PyTorch's defaults.
    pub fn batch_norm(&mut self, name: &str, x: OutletId) -> IrResult<OutletId> {
        self.op(name, Op::BatchNorm(BatchNorm::new()), &[x])
    }

    /// `BatchNorm` layer with the given settings.
    pub fn batch_norm_with(
        &mut self,
        name: &str,
        x: OutletId,
        bn: BatchNorm,
    ) -> IrResult<OutletId> {
        self.op(name, Op::BatchNorm(bn), &[x])
    }

    /// `LayerNorm` over the last dimension, with the given epsilon.
    pub fn layer_norm(&mut self, name: &str, x: OutletId, eps: f64) -> IrResult<OutletId> {
        let dim = *self.fact(x).shape.last().unwrap_or(&0);
        self.op(name, Op::LayerNorm(LayerNorm::new(dim).eps(eps)), &[x])
    }

    /// Elementwise function.
    pub fn unary(&mut self, name: &str, func: UnaryOp, x: OutletId) -> IrResult<OutletId> {
        self.op(name, Op::Unary { func }, &[x])
    }

    /// ReLU.
    pub fn relu(&mut self, name: &str, x: OutletId) -> IrResult<OutletId> {
        self.unary(name, UnaryOp::Relu, x)
    }

    /// Multiplication by a constant.
    pub fn scale(&mut self, name: &str, x: OutletId, factor: f64) -> IrResult<OutletId> {
        self.op(name, Op::Scale { factor }, &[x])
    }

    /// Broadcasting sum.
    pub fn add(&mut self, name: &str, a: OutletId, b: OutletId) -> IrResult<OutletId> {
        self.op(name, Op::Add, &[a, b])
    }

    /// Broadcasting product.
    pub fn mul(&mut self, name: &str, a: OutletId, b: OutletId) -> IrResult<OutletId> {
        self.op(name, Op::Mul, &[a, b])
    }

    /// Max pooling.
    pub fn max_pool(&mut self, name: &str, x: OutletId, pool: Pool2d) -> IrResult<OutletId> {
        self.op(name, Op::MaxPool2d(pool), &[x])
    }

    /// Average pooling.
    pub fn avg_pool(&mut self, name: &str, x: OutletId, pool: Pool2d) -> IrResult<OutletId> {
        self.op(name, Op::AvgPool2d(pool), &[x])
    }

    /// Adaptive average pooling to 1x1.
    pub fn global_avg_pool(&mut self, name: &str, x: OutletId) -> IrResult<OutletId> {
        self.op(name, Op::GlobalAvgPool, &[x])
    }

    /// Concatenation along `axis`.
    pub fn concat(&mut self, name: &str, xs: &[OutletId], axis: i64) -> IrResult<OutletId> {
        self.op(name, Op::Concat { axis }, xs)
    }

    /// Dense layer with bias.
    pub fn linear(&mut self, name: &str, x: OutletId, out_features: usize) -> IrResult<OutletId> {
        self.op(name, Op::Linear(Linear::new(out_features)), &[x])
    }

    /// Dense layer without bias.
    pub fn linear_no_bias(&mut self, name: &str, x: OutletId, out: usize) -> IrResult<OutletId> {
        self.op(name, Op::Linear(Linear::new(out).no_bias()), &[x])
    }

    /// Batched matrix product.
    pub fn matmul(&mut self, name: &str, a: OutletId, b: OutletId) -> IrResult<OutletId> {
        self.op(name, Op::MatMul, &[a, b])
    }

    /// Softmax along `axis`.
    pub fn softmax(&mut self, name: &str, x: OutletId, axis: i64) -> IrResult<OutletId> {
        self.op(name, Op::Softmax { axis }, &[x])
    }

    /// Embedding table lookup.
    pub fn embedding(
        &mut self,
        name: &str,
        ids: OutletId,
        num: usize,
        dim: usize,
    ) -> IrResult<OutletId> {
        self.op(name, Op::Embedding(Embedding::new(num, dim)), &[ids])
    }

    /// One LSTM layer.
    pub fn lstm(&mut self, name: &str, x: OutletId, lstm: Lstm) -> IrResult<OutletId> {
        self.op(name, Op::Lstm(lstm), &[x])
    }

    /// Dropout with drop probability `p`.
    pub fn dropout(&mut self, name: &str, x: OutletId, p: f64) -> IrResult<OutletId> {
        self.op(name, Op::Dropout { p }, &[x])
    }

    /// Reshape (one entry may be -1).
    pub fn reshape(&mut self, name: &str, x: OutletId, shape: &[i64]) -> IrResult<OutletId> {
        self.op(name, Op::Reshape { shape: shape.to_vec() }, &[x])
    }

    /// Permutation of dimensions.
    pub fn transpose(&mut self, name: &str, x: OutletId, perm: &[usize]) -> IrResult<OutletId> {
        self.op(name, Op::Transpose { perm: perm.to_vec() }, &[x])
    }

    /// Python-style slice `start:end` (step 1) along `axis`.
    pub fn slice(
        &mut self,
        name: &str,
        x: OutletId,
        axis: i64,
        start: i64,
        end: i64,
    ) -> IrResult<OutletId> {
        self.op(name, Op::Slice { axis, start, end, step: 1 }, &[x])
    }

    /// Mean cross-entropy loss.
    pub fn cross_entropy(
        &mut self,
        name: &str,
        logits: OutletId,
        target: OutletId,
    ) -> IrResult<OutletId> {
        self.op(name, Op::CrossEntropyLoss, &[logits, target])
    }
}
