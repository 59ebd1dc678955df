//! Inception-V3 as torchvision's `inception_v3` with `aux_logits=False` and
//! `transform_input=False`, 299x299 input.

use ordo_ir::op::{BatchNorm, Conv2d, Pool2d, UnaryOp};
use ordo_ir::{Graph, GraphBuilder, IrError, OutletId};

use crate::ModelConfig;
use crate::common::{classification_loss, conv_bn_act, flatten, image_input};

/// The sizes an Inception-V3 is built from.
struct Dims {
    name: &'static str,
    image: usize,
    /// Every channel count of the reference is divided by this.
    div: usize,
    /// The Mixed blocks, in order.
    blocks: &'static [Mixed],
    classes: usize,
}

/// One Mixed block: its name and kind, with the reference's argument where it has one.
#[derive(Clone, Copy)]
enum Mixed {
    /// `InceptionA` with `pool_features`.
    A(&'static str, usize),
    /// `InceptionB`.
    B(&'static str),
    /// `InceptionC` with `channels_7x7`.
    C(&'static str, usize),
    /// `InceptionD`.
    D(&'static str),
    /// `InceptionE`.
    E(&'static str),
}

const INCEPTION_V3: Dims = Dims {
    name: "inception_v3",
    image: 299,
    div: 1,
    blocks: &[
        Mixed::A("Mixed_5b", 32),
        Mixed::A("Mixed_5c", 64),
        Mixed::A("Mixed_5d", 64),
        Mixed::B("Mixed_6a"),
        Mixed::C("Mixed_6b", 128),
        Mixed::C("Mixed_6c", 160),
        Mixed::C("Mixed_6d", 160),
        Mixed::C("Mixed_6e", 192),
        Mixed::D("Mixed_7a"),
        Mixed::E("Mixed_7b"),
        Mixed::E("Mixed_7c"),
    ],
    classes: 1000,
};

/// Small: 75x75 images (the least the stem and the two grid reductions take: the last
/// blocks are 1x1), channels divided by 8, one block of each kind, 10 classes.
const SMALL: Dims = Dims {
    name: "inception_v3-small",
    image: 75,
    div: 8,
    blocks: &[
        Mixed::A("Mixed_5b", 32),
        Mixed::B("Mixed_6a"),
        Mixed::C("Mixed_6b", 128),
        Mixed::D("Mixed_7a"),
        Mixed::E("Mixed_7b"),
    ],
    classes: 10,
};

/// Builds torchvision's `inception_v3` without the auxiliary head (23,834,568 parameters) with a
/// cross-entropy loss.
///
/// # Errors
/// Only on a bug in the definition; every batch size builds.
pub fn inception_v3(config: &ModelConfig) -> Result<Graph, IrError> {
    inception(config, &INCEPTION_V3)
}

/// The small variant of [`inception_v3`]: 75x75 images, an eighth of the channels, one Mixed
/// block of each kind (`Mixed_5b`, `6a`, `6b`, `7a`, `7b`), 10 classes.
///
/// # Errors
/// Only on a bug in the definition; every batch size builds.
pub fn inception_v3_small(config: &ModelConfig) -> Result<Graph, IrError> {
    inception(config, &SMALL)
}

fn inception(config: &ModelConfig, dims: &Dims) -> Result<Graph, IrError> {
    let mut b = Inception { b: GraphBuilder::new(dims.name), div: dims.div };
    let x = image_input(&mut b.b, config.batch, dims.image)?;
    let x = b.basic_conv("Conv2d_1a_3x3", x, b.conv(32, 3).stride(2))?;
    let x = b.basic_conv("Conv2d_2a_3x3", x, b.conv(32, 3))?;
    let x = b.basic_conv("Conv2d_2b_3x3", x, b.conv(64, 3).padding(1))?;
    let mut x = b.b.max_pool("maxpool1", x, Pool2d::new(3, 2))?;
    x = b.basic_conv("Conv2d_3b_1x1", x, b.conv(80, 1))?;
    x = b.basic_conv("Conv2d_4a_3x3", x, b.conv(192, 3))?;
    x = b.b.max_pool("maxpool2", x, Pool2d::new(3, 2))?;
    for block in dims.blocks {
        x = match *block {
            Mixed::A(name, pool_features) => b.inception_a(name, x, pool_features)?,
            Mixed::B(name) => b.inception_b(name, x)?,
            Mixed::C(name, c7) => b.inception_c(name, x, c7)?,
            Mixed::D(name) => b.inception_d(name, x)?,
            Mixed::E(name) => b.inception_e(name, x)?,
        };
    }
    let mut b = b.b;
    let x = b.global_avg_pool("avgpool", x)?;
    let x = b.dropout("dropout", x, 0.5)?;
    let x = flatten(&mut b, "flatten", x)?;
    let logits = b.linear("fc", x, dims.classes)?;
    classification_loss(&mut b, logits)?;
    Ok(b.finish())
}

/// The builder, and the divisor of every channel count.
struct Inception {
    b: GraphBuilder,
    div: usize,
}

impl Inception {
    /// A square convolution with the reference's `out` channels, divided.
    fn conv(&self, out: usize, kernel: usize) -> Conv2d {
        Conv2d::new(out / self.div, kernel)
    }

    /// A 1x7 (`wide`) or 7x1 convolution with "same" padding.
    fn conv7(&self, out: usize, wide: bool) -> Conv2d {
        let out = out / self.div;
        if wide {
            Conv2d::rect(out, 1, 7).padding_hw(0, 3)
        } else {
            Conv2d::rect(out, 7, 1).padding_hw(3, 0)
        }
    }

    /// A 1x3 (`wide`) or 3x1 convolution with "same" padding.
    fn conv3(&self, out: usize, wide: bool) -> Conv2d {
        let out = out / self.div;
        if wide {
            Conv2d::rect(out, 1, 3).padding_hw(0, 1)
        } else {
            Conv2d::rect(out, 3, 1).padding_hw(1, 0)
        }
    }

    fn basic_conv(&mut self, name: &str, x: OutletId, conv: Conv2d) -> Result<OutletId, IrError> {
        basic_conv(&mut self.b, name, x, conv)
    }

    fn chain(
        &mut self,
        block: &str,
        x: OutletId,
        convs: Vec<(&str, Conv2d)>,
    ) -> Result<OutletId, IrError> {
        chain(&mut self.b, block, x, convs)
    }

    fn pool_branch(&mut self, block: &str, x: OutletId, out: usize) -> Result<OutletId, IrError> {
        pool_branch(&mut self.b, block, x, out / self.div)
    }

    /// `InceptionA`: 35x35 blocks.
    fn inception_a(&mut self, p: &str, x: OutletId, pool: usize) -> Result<OutletId, IrError> {
        let b1 = self.chain(p, x, vec![("branch1x1", self.conv(64, 1))])?;
        let b5 = self.chain(
            p,
            x,
            vec![("branch5x5_1", self.conv(48, 1)), ("branch5x5_2", self.conv(64, 5).padding(2))],
        )?;
        let b3 = self.chain(
            p,
            x,
            vec![
                ("branch3x3dbl_1", self.conv(64, 1)),
                ("branch3x3dbl_2", self.conv(96, 3).padding(1)),
                ("branch3x3dbl_3", self.conv(96, 3).padding(1)),
            ],
        )?;
        let bp = self.pool_branch(p, x, pool)?;
        self.b.concat(&format!("{p}.cat"), &[b1, b5, b3, bp], 1)
    }

    /// `InceptionB`: grid reduction 35x35 -> 17x17.
    fn inception_b(&mut self, p: &str, x: OutletId) -> Result<OutletId, IrError> {
        let b3 = self.chain(p, x, vec![("branch3x3", self.conv(384, 3).stride(2))])?;
        let bd = self.chain(
            p,
            x,
            vec![
                ("branch3x3dbl_1", self.conv(64, 1)),
                ("branch3x3dbl_2", self.conv(96, 3).padding(1)),
                ("branch3x3dbl_3", self.conv(96, 3).stride(2)),
            ],
        )?;
        let bp = self.b.max_pool(&format!("{p}.max_pool"), x, Pool2d::new(3, 2))?;
        self.b.concat(&format!("{p}.cat"), &[b3, bd, bp], 1)
    }

    /// `InceptionC`: 17x17 blocks with factorised 7x7 convolutions.
    fn inception_c(&mut self, p: &str, x: OutletId, c7: usize) -> Result<OutletId, IrError> {
        let b1 = self.chain(p, x, vec![("branch1x1", self.conv(192, 1))])?;
        let b7 = self.chain(
            p,
            x,
            vec![
                ("branch7x7_1", self.conv(c7, 1)),
                ("branch7x7_2", self.conv7(c7, true)),
                ("branch7x7_3", self.conv7(192, false)),
            ],
        )?;
        let bd = self.chain(
            p,
            x,
            vec![
                ("branch7x7dbl_1", self.conv(c7, 1)),
                ("branch7x7dbl_2", self.conv7(c7, false)),
                ("branch7x7dbl_3", self.conv7(c7, true)),
                ("branch7x7dbl_4", self.conv7(c7, false)),
                ("branch7x7dbl_5", self.conv7(192, true)),
            ],
        )?;
        let bp = self.pool_branch(p, x, 192)?;
        self.b.concat(&format!("{p}.cat"), &[b1, b7, bd, bp], 1)
    }

    /// `InceptionD`: grid reduction 17x17 -> 8x8.
    fn inception_d(&mut self, p: &str, x: OutletId) -> Result<OutletId, IrError> {
        let b3 = self.chain(
            p,
            x,
            vec![("branch3x3_1", self.conv(192, 1)), ("branch3x3_2", self.conv(320, 3).stride(2))],
        )?;
        let b7 = self.chain(
            p,
            x,
            vec![
                ("branch7x7x3_1", self.conv(192, 1)),
                ("branch7x7x3_2", self.conv7(192, true)),
                ("branch7x7x3_3", self.conv7(192, false)),
                ("branch7x7x3_4", self.conv(192, 3).stride(2)),
            ],
        )?;
        let bp = self.b.max_pool(&format!("{p}.max_pool"), x, Pool2d::new(3, 2))?;
        self.b.concat(&format!("{p}.cat"), &[b3, b7, bp], 1)
    }

    /// `InceptionE`: 8x8 blocks with split 1x3/3x1 branches.
    fn inception_e(&mut self, p: &str, x: OutletId) -> Result<OutletId, IrError> {
        let b1 = self.chain(p, x, vec![("branch1x1", self.conv(320, 1))])?;
        let b3 = self.chain(p, x, vec![("branch3x3_1", self.conv(384, 1))])?;
        let b3a = self.chain(p, b3, vec![("branch3x3_2a", self.conv3(384, true))])?;
        let b3b = self.chain(p, b3, vec![("branch3x3_2b", self.conv3(384, false))])?;
        let b3 = self.b.concat(&format!("{p}.branch3x3_cat"), &[b3a, b3b], 1)?;
        let bd = self.chain(
            p,
            x,
            vec![
                ("branch3x3dbl_1", self.conv(448, 1)),
                ("branch3x3dbl_2", self.conv(384, 3).padding(1)),
            ],
        )?;
        let bda = self.chain(p, bd, vec![("branch3x3dbl_3a", self.conv3(384, true))])?;
        let bdb = self.chain(p, bd, vec![("branch3x3dbl_3b", self.conv3(384, false))])?;
        let bd = self.b.concat(&format!("{p}.branch3x3dbl_cat"), &[bda, bdb], 1)?;
        let bp = self.pool_branch(p, x, 192)?;
        self.b.concat(&format!("{p}.cat"), &[b1, b3, bd, bp], 1)
    }
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
