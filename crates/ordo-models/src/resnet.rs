//! ResNet-50 as torchvision's `resnet50`: Bottleneck blocks `[3, 4, 6, 3]` with the stride on
//! the 3x3 convolution (ResNet v1.5), 224x224 input; and its small variant.

use ordo_ir::op::{Conv2d, Pool2d};
use ordo_ir::{Graph, GraphBuilder, IrError, OutletId};

use crate::ModelConfig;
use crate::common::{classification_loss, flatten, image_input};

/// Bottleneck output channels are `planes * EXPANSION`.
const EXPANSION: usize = 4;

/// The sizes a ResNet is built from.
struct Dims {
    name: &'static str,
    image: usize,
    stem: usize,
    /// `(planes, blocks, stride)` of each of the four layers.
    layers: [(usize, usize, usize); 4],
    classes: usize,
}

const RESNET50: Dims = Dims {
    name: "resnet50",
    image: 224,
    stem: 64,
    layers: [(64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)],
    classes: 1000,
};

/// Small: 32x32 images, 8 stem channels, blocks `[2, 1, 1, 1]` (an identity residual in
/// `layer1.1`, a downsampling one at the head of every layer), 10 classes.
const SMALL: Dims = Dims {
    name: "resnet50-small",
    image: 32,
    stem: 8,
    layers: [(4, 2, 1), (8, 1, 2), (16, 1, 2), (32, 1, 2)],
    classes: 10,
};

/// Builds torchvision's `resnet50` (25,557,032 parameters) with a cross-entropy loss.
///
/// # Errors
/// Only on a bug in the definition; every batch size builds.
pub fn resnet50(config: &ModelConfig) -> Result<Graph, IrError> {
    resnet(config, &RESNET50)
}

/// The small variant of [`resnet50`]: 32x32 images, blocks `[2, 1, 1, 1]`, 10 classes.
///
/// # Errors
/// Only on a bug in the definition; every batch size builds.
pub fn resnet50_small(config: &ModelConfig) -> Result<Graph, IrError> {
    resnet(config, &SMALL)
}

fn resnet(config: &ModelConfig, dims: &Dims) -> Result<Graph, IrError> {
    let mut b = GraphBuilder::new(dims.name);
    let x = image_input(&mut b, config.batch, dims.image)?;
    let x = b.conv2d("conv1", x, Conv2d::new(dims.stem, 7).stride(2).padding(3).no_bias())?;
    let x = b.batch_norm("bn1", x)?;
    let x = b.relu("relu", x)?;
    let mut x = b.max_pool("maxpool", x, Pool2d::new(3, 2).padding(1))?;
    let mut in_planes = dims.stem;
    for (layer, &(planes, blocks, stride)) in dims.layers.iter().enumerate() {
        for i in 0..blocks {
            let prefix = format!("layer{}.{i}", layer + 1);
            let s = if i == 0 { stride } else { 1 };
            x = bottleneck(&mut b, &prefix, x, in_planes, planes, s)?;
            in_planes = planes * EXPANSION;
        }
    }
    let x = b.global_avg_pool("avgpool", x)?;
    let x = flatten(&mut b, "flatten", x)?;
    let logits = b.linear("fc", x, dims.classes)?;
    classification_loss(&mut b, logits)?;
    Ok(b.finish())
}
/// torchvision's `Bottleneck`; the shared `relu` module gets one node per use.
fn bottleneck(
    b: &mut GraphBuilder,
    prefix: &str,
    x: OutletId,
    in_planes: usize,
    planes: usize,
    stride: usize,
) -> Result<OutletId, IrError> {
    let out_planes = planes * EXPANSION;
    let n = |s: &str| format!("{prefix}.{s}");
    let h = b.conv2d(&n("conv1"), x, Conv2d::new(planes, 1).no_bias())?;
    let h = b.batch_norm(&n("bn1"), h)?;
    let h = b.relu(&n("relu"), h)?;
    let conv2 = Conv2d::new(planes, 3).stride(stride).padding(1).no_bias();
    let h = b.conv2d(&n("conv2"), h, conv2)?;
    let h = b.batch_norm(&n("bn2"), h)?;
    let h = b.relu(&n("relu_1"), h)?;
    let h = b.conv2d(&n("conv3"), h, Conv2d::new(out_planes, 1).no_bias())?;
    let h = b.batch_norm(&n("bn3"), h)?;
    let identity = if stride != 1 || in_planes != out_planes {
        let down = Conv2d::new(out_planes, 1).stride(stride).no_bias();
        let d = b.conv2d(&n("downsample.0"), x, down)?;
        b.batch_norm(&n("downsample.1"), d)?
    } else {
        x
    };
    let h = b.add(&n("add"), h, identity)?;
    b.relu(&n("relu_2"), h)
}
