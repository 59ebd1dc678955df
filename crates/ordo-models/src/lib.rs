//! ordo's built-in model zoo, written with the IR's [`GraphBuilder`](ordo_ir::GraphBuilder).
//!
//! Every model is one node per layer, named after the reference implementation's module paths
//! (`layer1.0.conv1`), with parameters named as in its state dict. Every model ends with a
//! training loss: an integer `labels` input and a `loss` node (mean cross-entropy), so that the
//! training-graph builder has a scalar to differentiate. Parameter counts equal the reference
//! implementations exactly; the tests check them.
//!
//! Every model also has a small variant ([`Variant::Small`], `--small` on the command line): the
//! same architecture and node names, with batch 2, small images, few channels or hidden
//! units, fewer repeated blocks, small vocabularies and short sequences, so that a whole
//! training step runs in milliseconds on a CPU. Everything whose structure matters to
//! placement and scheduling is kept: parallel branches, residual adds, dense concatenations,
//! squeeze-excitation, causal and cross attention, the bidirectional LSTM, tied embeddings.
//!
//! | model | small variant |
//! |---|---|
//! | `resnet50` | 32x32 images, stem 8 channels, bottleneck planes 4/8/16/32, blocks `[2, 1, 1, 1]`, 10 classes |
//! | `inception_v3` | 75x75 images (the least its reductions take), channels / 8, one Mixed block of each kind (5b, 6a, 6b, 7a, 7b), 10 classes |
//! | `densenet121` | 32x32 images, growth 4, 8 initial features, blocks `[3, 3, 3, 3]`, 10 classes |
//! | `mobilenet_v3_large` | 32x32 images, 6 inverted residual blocks (3 with squeeze-excitation, 3 residual), expanded width <= 48, classifier 64, 10 classes |
//! | `transformer` | 2+2 layers, d=32, 4 heads, ff=64, vocab 64, sequence 8 |
//! | `gnmt` | hidden 16, 3+3 LSTM layers (bidirectional first, residual adds), vocab 64, sequence 6 |
//! | `bert_base` | 2 layers, width 32, 4 heads, intermediate 64, vocab 100, 64 positions, sequence 8 |
//! | `gpt2_small` | 2 blocks, width 32, 4 heads, vocab 100, 64 positions, sequence 8 |
//! | `gpt3_175b` | as `gpt2_small`'s |
//! | `llama2_7b`, `llama2_13b` | 2 layers, width 32, 4 heads, intermediate 64, vocab 100, 64 positions, sequence 8 |
//! | `llama2_70b` | as `llama2_7b`'s, with 4 query heads sharing 1 key/value head |
//!
//! Transformers of any other size come from [`TransformerConfig`] (a Hugging Face
//! `config.json`'s fields).
//!
//! The small graphs are named `<model>-small`; every small variant has batch 2 by default.

mod bert;
mod common;
mod configured;
mod densenet;
mod gnmt;
mod gpt2;
mod inception;
mod llama;
mod mobilenet;
mod resnet;
mod sequence;
mod transformer;

use ordo_ir::{Graph, IrError};

pub use configured::{ConfigError, Family, TransformerConfig};

/// Batch size of every small variant.
pub const SMALL_BATCH: usize = 2;

/// Which size of a zoo model to build.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Variant {
    /// The reference model.
    #[default]
    Full,
    /// The small variant: same structure, small sizes (see the crate documentation).
    Small,
}

/// Size parameters of a zoo model.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ModelConfig {
    /// Batch size.
    pub batch: usize,
    /// Sequence length (sequence models only; ignored by image models).
    pub seq_len: usize,
}

/// The configuration of zoo model `name` where it is a transformer built from one
/// ([`TransformerConfig`]: GPT-2, GPT-3, BERT, LLaMA-2), at `variant`; `None` for the others.
pub fn zoo_transformer(name: &str, variant: Variant) -> Option<TransformerConfig> {
    let config = match name {
        "bert_base" => TransformerConfig::bert_base(),
        "gpt2_small" => TransformerConfig::gpt2_small(),
        "gpt3_175b" => TransformerConfig::gpt3_175b(),
        "llama2_7b" => TransformerConfig::llama2(7)?,
        "llama2_13b" => TransformerConfig::llama2(13)?,
        "llama2_70b" => TransformerConfig::llama2(70)?,
        _ => return None,
    };
    Some(match variant {
        Variant::Full => config,
        Variant::Small => config.small(),
    })
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
    /// Default sequence length of the small variant; `None` for image models.
    pub small_seq_len: Option<usize>,
    /// Builds the small variant's graph.
    pub build_small: fn(&ModelConfig) -> Result<Graph, IrError>,
}

impl ModelSpec {
    /// The default configuration.
    pub fn default_config(&self) -> ModelConfig {
        ModelConfig { batch: self.default_batch, seq_len: self.default_seq_len.unwrap_or(1) }
    }

    /// The default configuration of `variant`.
    pub fn config(&self, variant: Variant) -> ModelConfig {
        match variant {
            Variant::Full => self.default_config(),
            Variant::Small => {
                ModelConfig { batch: SMALL_BATCH, seq_len: self.small_seq_len.unwrap_or(1) }
            }
        }
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
    /// A sequence length given for a model without sequences (an image model).
    #[error("model `{name}` has no sequence length: --seq-len applies to sequence models")]
    NoSequence {
        /// The model.
        name: String,
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
    build_variant(name, Variant::Full, batch, seq_len)
}

/// Builds the `variant` of zoo model `name`, with that variant's default batch size and
/// sequence length where `None`.
///
/// # Errors
/// As [`build`].
pub fn build_variant(
    name: &str,
    variant: Variant,
    batch: Option<usize>,
    seq_len: Option<usize>,
) -> Result<Graph, ModelError> {
    let spec = spec(name)?;
    let mut config = spec.config(variant);
    if let Some(b) = batch {
        config.batch = b;
    }
    if let Some(s) = seq_len {
        if spec.default_seq_len.is_none() {
            return Err(ModelError::NoSequence { name: name.to_string() });
        }
        config.seq_len = s;
    }
    if config.batch == 0 {
        return Err(ModelError::BadSize { name: name.to_string(), what: "batch size" });
    }
    if config.seq_len == 0 {
        return Err(ModelError::BadSize { name: name.to_string(), what: "sequence length" });
    }
    let build = match variant {
        Variant::Full => spec.build,
        Variant::Small => spec.build_small,
    };
    build(&config).map_err(|source| ModelError::Build { name: name.to_string(), source })
}

static ZOO: &[ModelSpec] = &[
    ModelSpec {
        name: "resnet50",
        description: "ResNet-50 (torchvision resnet50)",
        default_batch: 32,
        default_seq_len: None,
        build: resnet::resnet50,
        small_seq_len: None,
        build_small: resnet::resnet50_small,
    },
    ModelSpec {
        name: "inception_v3",
        description: "Inception-V3 without aux head (torchvision inception_v3, aux_logits=False)",
        default_batch: 64,
        default_seq_len: None,
        build: inception::inception_v3,
        small_seq_len: None,
        build_small: inception::inception_v3_small,
    },
    ModelSpec {
        name: "densenet121",
        description: "DenseNet-121 (torchvision densenet121)",
        default_batch: 32,
        default_seq_len: None,
        build: densenet::densenet121,
        small_seq_len: None,
        build_small: densenet::densenet121_small,
    },
    ModelSpec {
        name: "mobilenet_v3_large",
        description: "MobileNetV3-Large (torchvision mobilenet_v3_large)",
        default_batch: 32,
        default_seq_len: None,
        build: mobilenet::mobilenet_v3_large,
        small_seq_len: None,
        build_small: mobilenet::mobilenet_v3_large_small,
    },
    ModelSpec {
        name: "transformer",
        description: "Transformer base, 6+6 layers, d=512, 8 heads, ff=2048, vocab 32000",
        default_batch: 64,
        default_seq_len: Some(128),
        build: transformer::transformer,
        small_seq_len: Some(8),
        build_small: transformer::transformer_small,
    },
    ModelSpec {
        name: "gnmt",
        description: "GNMT v2: 4+4 LSTM layers of 512, bidirectional first layer, attention, vocab 30000",
        default_batch: 128,
        default_seq_len: Some(40),
        build: gnmt::gnmt,
        small_seq_len: Some(6),
        build_small: gnmt::gnmt_small,
    },
    ModelSpec {
        name: "bert_base",
        description: "BERT-base (HF BertModel with pooler), MLM loss through the tied word embeddings",
        default_batch: 32,
        default_seq_len: Some(128),
        build: bert::bert_base,
        small_seq_len: Some(8),
        build_small: bert::bert_base_small,
    },
    ModelSpec {
        name: "gpt2_small",
        description: "GPT-2 small (HF GPT2LMHeadModel, tied embeddings)",
        default_batch: 8,
        default_seq_len: Some(1024),
        build: gpt2::gpt2_small,
        small_seq_len: Some(8),
        build_small: gpt2::gpt2_small_small,
    },
    ModelSpec {
        name: "gpt3_175b",
        description: "GPT-3 175B (the paper's configuration on GPT-2's architecture, dense attention)",
        default_batch: 8,
        default_seq_len: Some(2048),
        build: gpt2::gpt3_175b,
        small_seq_len: Some(8),
        build_small: gpt2::gpt3_175b_small,
    },
    ModelSpec {
        name: "llama2_7b",
        description: "LLaMA-2 7B (HF LlamaForCausalLM: RMSNorm, SwiGLU, rotary positions)",
        default_batch: 8,
        default_seq_len: Some(4096),
        build: |config| llama::llama2(7, false, config),
        small_seq_len: Some(8),
        build_small: |config| llama::llama2(7, true, config),
    },
    ModelSpec {
        name: "llama2_13b",
        description: "LLaMA-2 13B (HF LlamaForCausalLM)",
        default_batch: 8,
        default_seq_len: Some(4096),
        build: |config| llama::llama2(13, false, config),
        small_seq_len: Some(8),
        build_small: |config| llama::llama2(13, true, config),
    },
    ModelSpec {
        name: "llama2_70b",
        description: "LLaMA-2 70B (HF LlamaForCausalLM, grouped-query attention: 8 key/value heads)",
        default_batch: 8,
        default_seq_len: Some(4096),
        build: |config| llama::llama2(70, false, config),
        small_seq_len: Some(8),
        build_small: |config| llama::llama2(70, true, config),
    },
];
