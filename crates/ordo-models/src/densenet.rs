//! DenseNet-121 as torchvision's `densenet121`: growth rate 32, bottleneck size 4, blocks
//! `[6, 12, 24, 16]`, 64 initial features, 224x224 input. Every concatenation is its own node,
//! as in torchvision's (non memory-efficient) forward pass.

use ordo_ir::op::{Conv2d, Pool2d};
use ordo_ir::{Graph, GraphBuilder, IrError, OutletId};

use crate::ModelConfig;
use crate::common::{classification_loss, flatten, image_input};

const GROWTH_RATE: usize = 32;
const BN_SIZE: usize = 4;
const BLOCKS: [usize; 4] = [6, 12, 24, 16];
const INIT_FEATURES: usize = 64;

/// Builds torchvision's `densenet121` (7,978,856 parameters) with a cross-entropy loss.
///
/// # Errors
/// Only on a bug in the definition; every batch size builds.
pub fn densenet121(config: &ModelConfig) -> Result<Graph, IrError> {
    let mut b = GraphBuilder::new("densenet121");
    let x = image_input(&mut b, config.batch, 224)?;
    let stem = Conv2d::new(INIT_FEATURES, 7).stride(2).padding(3).no_bias();
    let x = b.conv2d("features.conv0", x, stem)?;
    let x = b.batch_norm("features.norm0", x)?;
    let x = b.relu("features.relu0", x)?;
    let mut x = b.max_pool("features.pool0", x, Pool2d::new(3, 2).padding(1))?;
    let mut features = INIT_FEATURES;
    for (i, &layers) in BLOCKS.iter().enumerate() {
        x = dense_block(&mut b, &format!("features.denseblock{}", i + 1), x, layers)?;
        features += layers * GROWTH_RATE;
        if i + 1 < BLOCKS.len() {
            features /= 2;
            x = transition(&mut b, &format!("features.transition{}", i + 1), x, features)?;
        }
    }
    let x = b.batch_norm("features.norm5", x)?;
    let x = b.relu("relu", x)?;
    let x = b.global_avg_pool("avgpool", x)?;
    let x = flatten(&mut b, "flatten", x)?;
    let logits = b.linear("classifier", x, 1000)?;
    classification_loss(&mut b, logits)?;
    Ok(b.finish())
}

/// `_DenseBlock`: layer `k` reads the concatenation `<layer>.cat` of the block input and the
/// `k - 1` earlier layers' outputs (the first layer reads the block input directly); the block
/// output is the concatenation `<block>.cat` of all of them.
fn dense_block(
    b: &mut GraphBuilder,
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
        let bottleneck = Conv2d::new(BN_SIZE * GROWTH_RATE, 1).no_bias();
        let h = b.conv2d(&format!("{layer}.conv1"), h, bottleneck)?;
        let h = b.batch_norm(&format!("{layer}.norm2"), h)?;
        let h = b.relu(&format!("{layer}.relu2"), h)?;
        let grow = Conv2d::new(GROWTH_RATE, 3).padding(1).no_bias();
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
