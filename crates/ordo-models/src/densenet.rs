//! DenseNet-121 as torchvision's `densenet121`: growth rate 32, bottleneck size 4, blocks
//! `[6, 12, 24, 16]`, 64 initial features, 224x224 input. Every concatenation is its own node,
//! as in torchvision's (non memory-efficient) forward pass. Also its small variant.

use ordo_ir::op::{Conv2d, Pool2d};
use ordo_ir::{Graph, GraphBuilder, IrError, OutletId};

use crate::ModelConfig;
use crate::common::{classification_loss, flatten, image_input};

/// The sizes a DenseNet is built from.
struct Dims {
    name: &'static str,
    image: usize,
    growth_rate: usize,
    bn_size: usize,
    blocks: [usize; 4],
    init_features: usize,
    classes: usize,
}

const DENSENET121: Dims = Dims {
    name: "densenet121",
    image: 224,
    growth_rate: 32,
    bn_size: 4,
    blocks: [6, 12, 24, 16],
    init_features: 64,
    classes: 1000,
};

/// Small: 32x32 images, growth rate 4, 8 initial features, three layers per block (so a
/// layer reads the concatenation of the block input and two earlier layers), 10 classes.
const SMALL: Dims = Dims {
    name: "densenet121-small",
    image: 32,
    growth_rate: 4,
    bn_size: 4,
    blocks: [3, 3, 3, 3],
    init_features: 8,
    classes: 10,
};

/// Builds torchvision's `densenet121` (7,978,856 parameters) with a cross-entropy loss.
///
/// # Errors
/// Only on a bug in the definition; every batch size builds.
pub fn densenet121(config: &ModelConfig) -> Result<Graph, IrError> {
    densenet(config, &DENSENET121)
}

/// The small variant of [`densenet121`]: 32x32 images, growth rate 4, blocks `[3, 3, 3, 3]`,
/// 10 classes.
///
/// # Errors
/// Only on a bug in the definition; every batch size builds.
pub fn densenet121_small(config: &ModelConfig) -> Result<Graph, IrError> {
    densenet(config, &SMALL)
}

fn densenet(config: &ModelConfig, dims: &Dims) -> Result<Graph, IrError> {
    let mut b = GraphBuilder::new(dims.name);
    let x = image_input(&mut b, config.batch, dims.image)?;
    let stem = Conv2d::new(dims.init_features, 7).stride(2).padding(3).no_bias();
    let x = b.conv2d("features.conv0", x, stem)?;
    let x = b.batch_norm("features.norm0", x)?;
    let x = b.relu("features.relu0", x)?;
    let mut x = b.max_pool("features.pool0", x, Pool2d::new(3, 2).padding(1))?;
    let mut features = dims.init_features;
    for (i, &layers) in dims.blocks.iter().enumerate() {
        x = dense_block(&mut b, dims, &format!("features.denseblock{}", i + 1), x, layers)?;
        features += layers * dims.growth_rate;
        if i + 1 < dims.blocks.len() {
            features /= 2;
            x = transition(&mut b, &format!("features.transition{}", i + 1), x, features)?;
        }
    }
    let x = b.batch_norm("features.norm5", x)?;
    let x = b.relu("relu", x)?;
    let x = b.global_avg_pool("avgpool", x)?;
    let x = flatten(&mut b, "flatten", x)?;
    let logits = b.linear("classifier", x, dims.classes)?;
    classification_loss(&mut b, logits)?;
    Ok(b.finish())
}

/// `_DenseBlock`: layer `k` reads the concatenation `<layer>.cat` of the block input and the
/// `k - 1` earlier layers' outputs (the first layer reads the block input directly); the block
/// output is the concatenation `<block>.cat` of all of them.
fn dense_block(
    b: &mut GraphBuilder,
    dims: &Dims,
    block: &str,
    x: OutletId,
    layers: usize,
) -> Result<OutletId, IrError> {
    let mut parts = vec![x];
    for k in 1..=layers {
        let layer = format!("{block}.denselayer{k}");
        let input =
            if parts.len() == 1 { x } else { b.concat(&format!("{layer}.cat"), &parts, 1)? };
        let h = b.batch_norm(&format!("{layer}.norm1"), input)?;
        let h = b.relu(&format!("{layer}.relu1"), h)?;
        let bottleneck = Conv2d::new(dims.bn_size * dims.growth_rate, 1).no_bias();
        let h = b.conv2d(&format!("{layer}.conv1"), h, bottleneck)?;
        let h = b.batch_norm(&format!("{layer}.norm2"), h)?;
        let h = b.relu(&format!("{layer}.relu2"), h)?;
        let grow = Conv2d::new(dims.growth_rate, 3).padding(1).no_bias();
        parts.push(b.conv2d(&format!("{layer}.conv2"), h, grow)?);
    }
    b.concat(&format!("{block}.cat"), &parts, 1)
}

/// `_Transition`: norm, relu, 1x1 conv to `out` channels, 2x2 average pool.
fn transition(
    b: &mut GraphBuilder,
    name: &str,
    x: OutletId,
    out: usize,
) -> Result<OutletId, IrError> {
    let x = b.batch_norm(&format!("{name}.norm"), x)?;
    let x = b.relu(&format!("{name}.relu"), x)?;
    let x = b.conv2d(&format!("{name}.conv"), x, Conv2d::new(out, 1).no_bias())?;
    b.avg_pool(&format!("{name}.pool"), x, Pool2d::new(2, 2))
}
