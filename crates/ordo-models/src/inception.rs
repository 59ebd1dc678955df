//! Inception-V3 as torchvision's `inception_v3` with `aux_logits=False` and
//! `transform_input=False`, 299x299 input.

use ordo_ir::op::{BatchNorm, Conv2d, Pool2d, UnaryOp};
use ordo_ir::{Graph, GraphBuilder, IrError, OutletId};

use crate::ModelConfig;
use crate::common::{classification_loss, conv_bn_act, flatten, image_input};

/// Builds torchvision's `inception_v3` without the auxiliary head (23,834,568 parameters) with a
/// cross-entropy loss.
///
/// # Errors
/// Only on a bug in the definition; every batch size builds.
pub fn inception_v3(config: &ModelConfig) -> Result<Graph, IrError> {
    let mut b = GraphBuilder::new("inception_v3");
    let x = image_input(&mut b, config.batch, 299)?;
    let x = basic_conv(&mut b, "Conv2d_1a_3x3", x, Conv2d::new(32, 3).stride(2))?;
    let x = basic_conv(&mut b, "Conv2d_2a_3x3", x, Conv2d::new(32, 3))?;
    let x = basic_conv(&mut b, "Conv2d_2b_3x3", x, Conv2d::new(64, 3).padding(1))?;
    let x = b.max_pool("maxpool1", x, Pool2d::new(3, 2))?;
    let x = basic_conv(&mut b, "Conv2d_3b_1x1", x, Conv2d::new(80, 1))?;
    let x = basic_conv(&mut b, "Conv2d_4a_3x3", x, Conv2d::new(192, 3))?;
    let x = b.max_pool("maxpool2", x, Pool2d::new(3, 2))?;
    let x = inception_a(&mut b, "Mixed_5b", x, 32)?;
    let x = inception_a(&mut b, "Mixed_5c", x, 64)?;
    let x = inception_a(&mut b, "Mixed_5d", x, 64)?;
    let x = inception_b(&mut b, "Mixed_6a", x)?;
    let x = inception_c(&mut b, "Mixed_6b", x, 128)?;
    let x = inception_c(&mut b, "Mixed_6c", x, 160)?;
    let x = inception_c(&mut b, "Mixed_6d", x, 160)?;
    let x = inception_c(&mut b, "Mixed_6e", x, 192)?;
    let x = inception_d(&mut b, "Mixed_7a", x)?;
    let x = inception_e(&mut b, "Mixed_7b", x)?;
    let x = inception_e(&mut b, "Mixed_7c", x)?;
    let x = b.global_avg_pool("avgpool", x)?;
    let x = b.dropout("dropout", x, 0.5)?;
    let x = flatten(&mut b, "flatten", x)?;
    let logits = b.linear("fc", x, 1000)?;
    classification_loss(&mut b, logits)?;
    Ok(b.finish())
}

/// `BasicConv2d`: `<name>.conv` without bias, `<name>.bn` (eps 0.001) and a functional relu
/// `<name>.relu`.
fn basic_conv(
    b: &mut GraphBuilder,
    name: &str,
    x: OutletId,
    conv: Conv2d,
) -> Result<OutletId, IrError> {
    let bn = BatchNorm::new().eps(1e-3);
    conv_bn_act(b, name, ["conv", "bn", "relu"], x, conv.no_bias(), bn, Some(UnaryOp::Relu))
}

/// A chain of `BasicConv2d`s `<block>.<name>`, each with its conv.
fn chain(
    b: &mut GraphBuilder,
    block: &str,
    mut x: OutletId,
    convs: Vec<(&str, Conv2d)>,
) -> Result<OutletId, IrError> {
    for (name, conv) in convs {
        x = basic_conv(b, &format!("{block}.{name}"), x, conv)?;
    }
    Ok(x)
}

/// The functional 3x3 stride-1 average pool before the `branch_pool` convolution.
fn pool_branch(
    b: &mut GraphBuilder,
    block: &str,
    x: OutletId,
    out: usize,
) -> Result<OutletId, IrError> {
    let p = b.avg_pool(&format!("{block}.avg_pool"), x, Pool2d::new(3, 1).padding(1))?;
    basic_conv(b, &format!("{block}.branch_pool"), p, Conv2d::new(out, 1))
}

/// A 1x7 (`wide`) or 7x1 convolution with "same" padding.
fn conv7(out: usize, wide: bool) -> Conv2d {
    if wide {
        Conv2d::rect(out, 1, 7).padding_hw(0, 3)
    } else {
        Conv2d::rect(out, 7, 1).padding_hw(3, 0)
    }
}

/// A 1x3 (`wide`) or 3x1 convolution with "same" padding.
fn conv3(out: usize, wide: bool) -> Conv2d {
    if wide {
        Conv2d::rect(out, 1, 3).padding_hw(0, 1)
    } else {
        Conv2d::rect(out, 3, 1).padding_hw(1, 0)
    }
}

/// `InceptionA`: 35x35 blocks.
fn inception_a(
    b: &mut GraphBuilder,
    p: &str,
    x: OutletId,
    pool_features: usize,
) -> Result<OutletId, IrError> {
    let b1 = chain(b, p, x, vec![("branch1x1", Conv2d::new(64, 1))])?;
    let b5 = chain(
        b,
        p,
        x,
        vec![("branch5x5_1", Conv2d::new(48, 1)), ("branch5x5_2", Conv2d::new(64, 5).padding(2))],
    )?;
    let b3 = chain(
        b,
        p,
        x,
        vec![
            ("branch3x3dbl_1", Conv2d::new(64, 1)),
            ("branch3x3dbl_2", Conv2d::new(96, 3).padding(1)),
            ("branch3x3dbl_3", Conv2d::new(96, 3).padding(1)),
        ],
    )?;
    let bp = pool_branch(b, p, x, pool_features)?;
    b.concat(&format!("{p}.cat"), &[b1, b5, b3, bp], 1)
}

/// `InceptionB`: grid reduction 35x35 -> 17x17.
fn inception_b(b: &mut GraphBuilder, p: &str, x: OutletId) -> Result<OutletId, IrError> {
    let b3 = chain(b, p, x, vec![("branch3x3", Conv2d::new(384, 3).stride(2))])?;
    let bd = chain(
        b,
        p,
        x,
        vec![
            ("branch3x3dbl_1", Conv2d::new(64, 1)),
            ("branch3x3dbl_2", Conv2d::new(96, 3).padding(1)),
            ("branch3x3dbl_3", Conv2d::new(96, 3).stride(2)),
        ],
    )?;
    let bp = b.max_pool(&format!("{p}.max_pool"), x, Pool2d::new(3, 2))?;
    b.concat(&format!("{p}.cat"), &[b3, bd, bp], 1)
}

/// `InceptionC`: 17x17 blocks with factorised 7x7 convolutions.
fn inception_c(b: &mut GraphBuilder, p: &str, x: OutletId, c7: usize) -> Result<OutletId, IrError> {
    let b1 = chain(b, p, x, vec![("branch1x1", Conv2d::new(192, 1))])?;
    let b7 = chain(
        b,
        p,
        x,
        vec![
            ("branch7x7_1", Conv2d::new(c7, 1)),
            ("branch7x7_2", conv7(c7, true)),
            ("branch7x7_3", conv7(192, false)),
        ],
    )?;
    let bd = chain(
        b,
        p,
        x,
        vec![
            ("branch7x7dbl_1", Conv2d::new(c7, 1)),
            ("branch7x7dbl_2", conv7(c7, false)),
            ("branch7x7dbl_3", conv7(c7, true)),
            ("branch7x7dbl_4", conv7(c7, false)),
            ("branch7x7dbl_5", conv7(192, true)),
        ],
    )?;
    let bp = pool_branch(b, p, x, 192)?;
    b.concat(&format!("{p}.cat"), &[b1, b7, bd, bp], 1)
}

/// `InceptionD`: grid reduction 17x17 -> 8x8.
fn inception_d(b: &mut GraphBuilder, p: &str, x: OutletId) -> Result<OutletId, IrError> {
    let b3 = chain(
        b,
        p,
        x,
        vec![("branch3x3_1", Conv2d::new(192, 1)), ("branch3x3_2", Conv2d::new(320, 3).stride(2))],
    )?;
    let b7 = chain(
        b,
        p,
        x,
        vec![
            ("branch7x7x3_1", Conv2d::new(192, 1)),
            ("branch7x7x3_2", conv7(192, true)),
            ("branch7x7x3_3", conv7(192, false)),
            ("branch7x7x3_4", Conv2d::new(192, 3).stride(2)),
        ],
    )?;
    let bp = b.max_pool(&format!("{p}.max_pool"), x, Pool2d::new(3, 2))?;
    b.concat(&format!("{p}.cat"), &[b3, b7, bp], 1)
}

/// `InceptionE`: 8x8 blocks with split 1x3/3x1 branches.
fn inception_e(b: &mut GraphBuilder, p: &str, x: OutletId) -> Result<OutletId, IrError> {
    let b1 = chain(b, p, x, vec![("branch1x1", Conv2d::new(320, 1))])?;
    let b3 = chain(b, p, x, vec![("branch3x3_1", Conv2d::new(384, 1))])?;
    let b3a = chain(b, p, b3, vec![("branch3x3_2a", conv3(384, true))])?;
    let b3b = chain(b, p, b3, vec![("branch3x3_2b", conv3(384, false))])?;
    let b3 = b.concat(&format!("{p}.branch3x3_cat"), &[b3a, b3b], 1)?;
    let bd = chain(
        b,
        p,
        x,
        vec![
            ("branch3x3dbl_1", Conv2d::new(448, 1)),
            ("branch3x3dbl_2", Conv2d::new(384, 3).padding(1)),
        ],
    )?;
    let bda = chain(b, p, bd, vec![("branch3x3dbl_3a", conv3(384, true))])?;
    let bdb = chain(b, p, bd, vec![("branch3x3dbl_3b", conv3(384, false))])?;
    let bd = b.concat(&format!("{p}.branch3x3dbl_cat"), &[bda, bdb], 1)?;
    let bp = pool_branch(b, p, x, 192)?;
    b.concat(&format!("{p}.cat"), &[b1, b3, bd, bp], 1)
}
