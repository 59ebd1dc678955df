//! ordo's built-in model zoo, written with the IR's [`GraphBuilder`](ordo_ir::GraphBuilder).
//!
//! Every model is one node per layer, named after the reference implementation's module paths
//! (`layer1.0.conv1`), with parameters named as in its state dict. Every model ends with a
//! training loss: an integer `labels` input and a `loss` node (mean cross-entropy), so that the
//! training-graph builder has a scalar to differentiate. Parameter counts equal the reference
//! implementations exactly; the tests check them.

mod bert;
mod common;
mod densenet;
mod gnmt;
mod gpt2;
mod inception;
mod mobilenet;
mod resnet;
mod sequence;
mod transformer;

use ordo_ir::{Graph, IrError};

/// Size parameters of a zoo model.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ModelConfig {
    /// Batch size.
    pub batch: usize,
    /// Sequence length (sequence models only; ignored by image models).
    pub seq_len: usize,
}

/// One entry of the zoo.
#[derive(Clone, Copy, Debug)]
pub struct ModelSpec {
    /// Name used on the command line, e.g. `resnet50`.
    pub name: &'static str,
    /// One line: what the model is and which reference it matches.
    pub description: &'static str,
    /// Default batch size (the papers' where they give one).
    pub default_batch: usize,
    /// Default sequence length; `None` for image models.
    pub default_seq_len: Option<usize>,
    /// Builds the graph.
    pub build: fn(&ModelConfig) -> Result<Graph, IrError>,
}

impl ModelSpec {
    /// The default configuration.
    pub fn default_config(&self) -> ModelConfig {
        ModelConfig { batch: self.default_batch, seq_len: self.default_seq_len.unwrap_or(1) }
    }
}

/// Errors of the zoo.
#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    /// No zoo model has this name.
    #[error("unknown model `{name}`; the zoo has: {known}")]
    Unknown {
        /// The name asked for.
        name: String,
        /// The names available, comma separated.
        known: String,
    },
    /// A batch size or sequence length of zero.
    #[error("model `{name}`: {what} must be at least 1")]
    BadSize {
        /// The model.
        name: String,
        /// `"batch size"` or `"sequence length"`.
        what: &'static str,
    },
    /// The builder rejected the graph: a bug in the model definition or an unsupported size.
    #[error("model `{name}` could not be built")]
    Build {
        /// The model.
        name: String,
        /// What went wrong.
        source: IrError,
    },
}

/// All zoo models, in display order.
pub fn zoo() -> &'static [ModelSpec] {
    ZOO
}

/// The zoo entry called `name`.
///
/// # Errors
/// [`ModelError::Unknown`] listing the known names.
pub fn spec(name: &str) -> Result<&'static ModelSpec, ModelError> {
    ZOO.iter().find(|m| m.name == name).ok_or_else(|| ModelError::Unknown {
        name: name.to_string(),
        known: ZOO.iter().map(|m| m.name).collect::<Vec<_>>().join(", "),
    })
}

/// Builds zoo model `name`, with the default batch size and sequence length where `None`.
///
/// # Errors
/// An unknown name, a zero size, or a size the model cannot take (e.g. an image too small for
/// its pooling layers).
pub fn build(
    name: &str,
    batch: Option<usize>,
    seq_len: Option<usize>,
) -> Result<Graph, ModelError> {
    let spec = spec(name)?;
    let mut config = spec.default_config();
    if let Some(b) = batch {
        config.batch = b;
    }
    if let Some(s) = seq_len {
        config.seq_len = s;
    }
    if config.batch == 0 {
        return Err(ModelError::BadSize { name: name.to_string(), what: "batch size" });
    }
    if config.seq_len == 0 {
        return Err(ModelError::BadSize { name: name.to_string(), what: "sequence length" });
    }
    (spec.build)(&config).map_err(|source| ModelError::Build { name: name.to_string(), source })
}

static ZOO: &[ModelSpec] = &[
    ModelSpec {
        name: "resnet50",
        description: "ResNet-50 (torchvision resnet50)",
        default_batch: 32,
        default_seq_len: None,
        build: resnet::resnet50,
    },
    ModelSpec {
        name: "inception_v3",
        description: "Inception-V3 without aux head (torchvision inception_v3, aux_logits=False)",
        default_batch: 64,
        default_seq_len: None,
        build: inception::inception_v3,
    },
    ModelSpec {
        name: "densenet121",
        description: "DenseNet-121 (torchvision densenet121)",
        default_batch: 32,
        default_seq_len: None,
        build: densenet::densenet121,
    },
    ModelSpec {
        name: "mobilenet_v3_large",
        description: "MobileNetV3-Large (torchvision mobilenet_v3_large)",
        default_batch: 32,
        default_seq_len: None,
        build: mobilenet::mobilenet_v3_large,
    },
    ModelSpec {
        name: "transformer",
        description: "Transformer base, 6+6 layers, d=512, 8 heads, ff=2048, vocab 32000",
        default_batch: 64,
        default_seq_len: Some(128),
        build: transformer::transformer,
    },
    ModelSpec {
        name: "gnmt",
        description: "GNMT v2: 4+4 LSTM layers of 512, bidirectional first layer, attention, vocab 30000",
        default_batch: 128,
        default_seq_len: Some(40),
        build: gnmt::gnmt,
    },
    ModelSpec {
        name: "bert_base",
        description: "BERT-base (HF BertModel with pooler), MLM loss through the tied word embeddings",
        default_batch: 32,
        default_seq_len: Some(128),
        build: bert::bert_base,
    },
    ModelSpec {
        name: "gpt2_small",
        description: "GPT-2 small (HF GPT2LMHeadModel, tied embeddings)",
        default_batch: 8,
        default_seq_len: Some(1024),
        build: gpt2::gpt2_small,
    },
];
