//! MobileNetV3-Large as torchvision's `mobilenet_v3_large`: inverted residual blocks with
//! squeeze-and-excitation, BatchNorm eps 0.001 and momentum 0.01, 224x224 input; and its
//! small variant.

use ordo_ir::op::{BatchNorm, Conv2d, UnaryOp};
use ordo_ir::{Graph, GraphBuilder, IrError, OutletId};

use crate::ModelConfig;
use crate::common::{classification_loss, conv_bn_act, flatten, image_input};

/// One row of torchvision's `inverted_residual_setting` (width multiplier 1, dilation 1).
struct Bneck {
    input: usize,
    kernel: usize,
    expanded: usize,
    out: usize,
    se: bool,
    hardswish: bool,
    stride: usize,
}

/// Activation column of the setting: ReLU.
const RE: bool = false;
/// Activation column of the setting: Hardswish.
const HS: bool = true;

const fn bneck(
    input: usize,
    kernel: usize,
    expanded: usize,
    out: usize,
    se: bool,
    hardswish: bool,
    stride: usize,
) -> Bneck {
    Bneck { input, kernel, expanded, out, se, hardswish, stride }
}

/// `_mobilenet_v3_conf("mobilenet_v3_large")`.
const LARGE: [Bneck; 15] = [
    bneck(16, 3, 16, 16, false, RE, 1),
    bneck(16, 3, 64, 24, false, RE, 2),
    bneck(24, 3, 72, 24, false, RE, 1),
    bneck(24, 5, 72, 40, true, RE, 2),
    bneck(40, 5, 120, 40, true, RE, 1),
    bneck(40, 5, 120, 40, true, RE, 1),
    bneck(40, 3, 240, 80, false, HS, 2),
    bneck(80, 3, 200, 80, false, HS, 1),
    bneck(80, 3, 184, 80, false, HS, 1),
    bneck(80, 3, 184, 80, false, HS, 1),
    bneck(80, 3, 480, 112, true, HS, 1),
    bneck(112, 3, 672, 112, true, HS, 1),
    bneck(112, 5, 672, 160, true, HS, 2),
    bneck(160, 5, 960, 160, true, HS, 1),
    bneck(160, 5, 960, 160, true, HS, 1),
];

/// Small: six rows that keep every kind of block of the large table (no expansion, squeeze-
/// excitation, ReLU and Hardswish, residual and strided).
const SMALL_SETTING: [Bneck; 6] = [
    bneck(8, 3, 8, 8, false, RE, 1),
    bneck(8, 3, 16, 12, false, RE, 2),
    bneck(12, 5, 24, 12, true, RE, 1),
    bneck(12, 3, 32, 16, false, HS, 2),
    bneck(16, 5, 48, 16, true, HS, 1),
    bneck(16, 5, 48, 24, true, HS, 2),
];

/// The sizes a MobileNetV3 is built from.
struct Dims {
    name: &'static str,
    image: usize,
    setting: &'static [Bneck],
    last_channel: usize,
    classes: usize,
}

const LARGE_DIMS: Dims = Dims {
    name: "mobilenet_v3_large",
    image: 224,
    setting: &LARGE,
    last_channel: 1280,
    classes: 1000,
};

const SMALL: Dims = Dims {
    name: "mobilenet_v3_large-small",
    image: 32,
    setting: &SMALL_SETTING,
    last_channel: 64,
    classes: 10,
};

/// Builds torchvision's `mobilenet_v3_large` (5,483,032 parameters) with a cross-entropy loss.
///
/// # Errors
/// Only on a bug in the definition; every batch size builds.
pub fn mobilenet_v3_large(config: &ModelConfig) -> Result<Graph, IrError> {
    mobilenet(config, &LARGE_DIMS)
}

/// The small variant of [`mobilenet_v3_large`]: 32x32 images, six inverted residual blocks of
/// at most 48 expanded channels (three with squeeze-excitation, three with a residual add),
/// classifier width 64, 10 classes.
///
/// # Errors
/// Only on a bug in the definition; every batch size builds.
pub fn mobilenet_v3_large_small(config: &ModelConfig) -> Result<Graph, IrError> {
    mobilenet(config, &SMALL)
}

fn mobilenet(config: &ModelConfig, dims: &Dims) -> Result<Graph, IrError> {
    let setting = dims.setting;
    let mut b = GraphBuilder::new(dims.name);
    let x = image_input(&mut b, config.batch, dims.image)?;
    let stem = Conv2d::new(setting[0].input, 3).stride(2).padding(1);
    let mut x = conv_norm_act(&mut b, "features.0", x, stem, Some(UnaryOp::HardSwish))?;
    for (i, cnf) in setting.iter().enumerate() {
        x = inverted_residual(&mut b, &format!("features.{}", i + 1), x, cnf)?;
    }
    let last_in = setting[setting.len() - 1].out;
    let last = Conv2d::new(6 * last_in, 1);
    let name = format!("features.{}", setting.len() + 1);
    let x = conv_norm_act(&mut b, &name, x, last, Some(UnaryOp::HardSwish))?;
    let x = b.global_avg_pool("avgpool", x)?;
    let x = flatten(&mut b, "flatten", x)?;
    let x = b.linear("classifier.0", x, dims.last_channel)?;
    let x = b.unary("classifier.1", UnaryOp::HardSwish, x)?;
    let x = b.dropout("classifier.2", x, 0.2)?;
    let logits = b.linear("classifier.3", x, dims.classes)?;
    classification_loss(&mut b, logits)?;
    Ok(b.finish())
}

/// torchvision's `_make_divisible`: rounds to the nearest multiple of `divisor` (at least
/// `divisor`), without going more than 10% below `v`.
fn make_divisible(v: usize, divisor: usize) -> usize {
    let rounded = ((v + divisor / 2) / divisor * divisor).max(divisor);
    if 10 * rounded < 9 * v { rounded + divisor } else { rounded }
}

/// `Conv2dNormActivation`: `<name>.0` conv without bias and "same" padding, `<name>.1` norm,
/// `<name>.2` activation when there is one.
fn conv_norm_act(
    b: &mut GraphBuilder,
    name: &str,
    x: OutletId,
    conv: Conv2d,
    act: Option<UnaryOp>,
) -> Result<OutletId, IrError> {
    let pad = (conv.kernel[0] - 1) / 2;
    let conv = conv.padding(pad).no_bias();
    let bn = BatchNorm::new().eps(1e-3).momentum(0.01);
    conv_bn_act(b, name, ["0", "1", "2"], x, conv, bn, act)
}

/// `InvertedResidual`: optional 1x1 expansion, depthwise conv, optional squeeze-excitation,
/// linear 1x1 projection, and a residual `<name>.add` when shapes allow.
fn inverted_residual(
    b: &mut GraphBuilder,
    name: &str,
    x: OutletId,
    cnf: &Bneck,
) -> Result<OutletId, IrError> {
    let act = Some(if cnf.hardswish { UnaryOp::HardSwish } else { UnaryOp::Relu });
    let mut index = 0;
    let mut next = || {
        index += 1;
        format!("{name}.block.{}", index - 1)
    };
    let mut h = x;
    if cnf.expanded != cnf.input {
        h = conv_norm_act(b, &next(), h, Conv2d::new(cnf.expanded, 1), act)?;
    }
    let depthwise = Conv2d::new(cnf.expanded, cnf.kernel).stride(cnf.stride).groups(cnf.expanded);
    h = conv_norm_act(b, &next(), h, depthwise, act)?;
    if cnf.se {
        h = squeeze_excitation(b, &next(), h, make_divisible(cnf.expanded / 4, 8))?;
    }
    h = conv_norm_act(b, &next(), h, Conv2d::new(cnf.out, 1), None)?;
    if cnf.stride == 1 && cnf.input == cnf.out {
        b.add(&format!("{name}.add"), h, x)
    } else {
        Ok(h)
    }
}

/// `SqueezeExcitation` with ReLU and a hardsigmoid scale; `<name>.mul` applies the scale.
fn squeeze_excitation(
    b: &mut GraphBuilder,
    name: &str,
    x: OutletId,
    squeeze: usize,
) -> Result<OutletId, IrError> {
    let channels = b.fact(x).shape[1];
    let s = b.global_avg_pool(&format!("{name}.avgpool"), x)?;
    let s = b.conv2d(&format!("{name}.fc1"), s, Conv2d::new(squeeze, 1))?;
    let s = b.relu(&format!("{name}.activation"), s)?;
    let s = b.conv2d(&format!("{name}.fc2"), s, Conv2d::new(channels, 1))?;
    let s = b.unary(&format!("{name}.scale_activation"), UnaryOp::HardSigmoid, s)?;
    b.mul(&format!("{name}.mul"), s, x)
}
