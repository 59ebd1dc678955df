//! Transformers of any size, described by the fields of a Hugging Face `config.json`: GPT-2
//! and GPT-3 (pre-norm LayerNorm blocks, GELU MLP, learned positions), LLaMA (pre-norm
//! RMSNorm blocks, SwiGLU MLP, rotary positions, grouped-query attention) and BERT (post-norm
//! encoder with a pooler). [`TransformerConfig::build`] makes the IR graph of a training step
//! (with its loss); [`TransformerConfig::params`] counts the parameters from the sizes alone,
//! which the tests hold against the graph's count and against Hugging Face's.

use ordo_ir::{Graph, IrError};
use serde_json::Value;

use crate::{ModelConfig, bert, gpt2, llama};

/// The architecture a configuration describes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Family {
    /// GPT-2 and GPT-3 (Hugging Face `model_type` `gpt2`): pre-norm LayerNorm blocks with
    /// biases, a GELU MLP, learned positions, the LM head usually tied to the embedding.
    Gpt2,
    /// LLaMA (`llama`, `mistral`): pre-norm RMSNorm blocks without biases, a SwiGLU MLP,
    /// rotary positions, grouped-query attention (`kv_heads` <= `heads`).
    Llama,
    /// BERT (`bert`): a post-norm encoder with token types and a pooler, trained through a
    /// masked-LM decoder tied to the word embeddings.
    Bert,
}

impl Family {
    /// Hugging Face's `model_type` for it.
    pub fn name(self) -> &'static str {
        match self {
            Family::Gpt2 => "gpt2",
            Family::Llama => "llama",
            Family::Bert => "bert",
        }
    }
}

/// A transformer's sizes (see the module documentation).
#[derive(Clone, Debug, PartialEq)]
pub struct TransformerConfig {
    /// The graph's name.
    pub name: String,
    /// The architecture.
    pub family: Family,
    /// Blocks (layers).
    pub layers: usize,
    /// The model width.
    pub hidden: usize,
    /// Attention (query) heads; `hidden` is a multiple.
    pub heads: usize,
    /// Key and value heads (grouped-query attention); a divisor of `heads`, equal to it for
    /// multi-head attention.
    pub kv_heads: usize,
    /// The MLP's inner width.
    pub intermediate: usize,
    /// Vocabulary size.
    pub vocab: usize,
    /// The most positions the model takes (the learned position table's rows).
    pub max_positions: usize,
    /// BERT's token types (0 for the others).
    pub type_vocab: usize,
    /// Whether the output projection reuses the token embedding.
    pub tied_embeddings: bool,
    /// The normalisations' epsilon.
    pub norm_eps: f64,
    /// The ranks of the tensor-parallel group the graph is one rank of (Megatron-LM's split,
    /// [`TransformerConfig::with_tensor_parallel`]); 1 builds the whole model.
    pub tensor_parallel: usize,
}

/// A model configuration that cannot be built, in words naming the field.
pub type ConfigError = String;

impl TransformerConfig {
    /// GPT-2 small (`gpt2` on Hugging Face): 12 blocks of width 768, 12 heads, 1024
    /// positions, vocabulary 50257, tied.
    pub fn gpt2_small() -> Self {
        Self::gpt2("gpt2_small", 12, 768, 12, 1024)
    }

    /// GPT-3 175B as its paper configures it (96 blocks of width 12288, 96 heads, 2048
    /// positions, GPT-2's vocabulary and architecture; dense attention in every block).
    pub fn gpt3_175b() -> Self {
        Self::gpt2("gpt3_175b", 96, 12288, 96, 2048)
    }

    fn gpt2(name: &str, layers: usize, hidden: usize, heads: usize, positions: usize) -> Self {
        Self {
            name: name.into(),
            family: Family::Gpt2,
            layers,
            hidden,
            heads,
            kv_heads: heads,
            intermediate: 4 * hidden,
            vocab: 50257,
            max_positions: positions,
            type_vocab: 0,
            tied_embeddings: true,
            norm_eps: 1e-5,
            tensor_parallel: 1,
        }
    }

    /// BERT-base (`bert-base-uncased`): 12 layers of width 768, 12 heads, intermediate 3072,
    /// vocabulary 30522, 512 positions, 2 token types.
    pub fn bert_base() -> Self {
        Self {
            name: "bert_base".into(),
            family: Family::Bert,
            layers: 12,
            hidden: 768,
            heads: 12,
            kv_heads: 12,
            intermediate: 3072,
            vocab: 30522,
            max_positions: 512,
            type_vocab: 2,
            tied_embeddings: true,
            norm_eps: 1e-12,
            tensor_parallel: 1,
        }
    }

    /// LLaMA-2 (`meta-llama/Llama-2-{7,13,70}b-hf`) with `billions` 7, 13 or 70: 4096
    /// positions, vocabulary 32000, RMSNorm eps 1e-5, untied; 70B has 8 key/value heads.
    pub fn llama2(billions: usize) -> Option<Self> {
        let (layers, hidden, heads, kv_heads, intermediate) = match billions {
            7 => (32, 4096, 32, 32, 11008),
            13 => (40, 5120, 40, 40, 13824),
            70 => (80, 8192, 64, 8, 28672),
            _ => return None,
        };
        Some(Self {
            name: format!("llama2_{billions}b"),
            family: Family::Llama,
            layers,
            hidden,
            heads,
            kv_heads,
            intermediate,
            vocab: 32000,
            max_positions: 4096,
            type_vocab: 0,
            tied_embeddings: false,
            norm_eps: 1e-5,
            tensor_parallel: 1,
        })
    }

    /// The small variant: the same family and structure (grouped-query attention and tied or
    /// untied embeddings kept) with 2 blocks of width 32, 4 heads, inner width 128 (GPT-2's
    /// four times the width) or 64, vocabulary 100 and 64 positions, named `<name>-small`.
    pub fn small(&self) -> Self {
        let kv_heads = (4 * self.kv_heads / self.heads.max(1)).clamp(1, 4);
        Self {
            name: format!("{}-small", self.name),
            layers: 2,
            hidden: 32,
            heads: 4,
            kv_heads,
            intermediate: if self.family == Family::Gpt2 { 128 } else { 64 },
            vocab: 100,
            max_positions: 64,
            type_vocab: self.type_vocab.min(2),
            ..self.clone()
        }
    }

    /// Width of one head.
    pub fn head_dim(&self) -> usize {
        self.hidden / self.heads.max(1)
    }

    /// The graph of one rank of `ranks` in a tensor-parallel group, as Megatron-LM splits a
    /// GPT or LLaMA decoder: each rank holds `1 / ranks` of the attention heads (query and
    /// key/value) and of the MLP's inner width (the column-parallel products before, the
    /// row-parallel after), and of the vocabulary (the token embedding and the LM head, rows
    /// rounded up); norms, position embeddings and the residual stream are whole on every
    /// rank, with sequence parallelism: between the split products (norms, dropouts,
    /// residual additions) each rank holds `1 / ranks` of the sequence. Tensor-parallel
    /// collectives join the shards over the group's links: before each block's
    /// column-parallel half and the LM head the slices of the sequence are all-gathered
    /// (the gradients reduce-scattered backward), and after each row-parallel product and the
    /// vocabulary-parallel embedding the partial sums are reduce-scattered into slices (the
    /// gradient all-gathered backward): the bytes of Megatron's all-reduces without sequence
    /// parallelism. The sequence must split over the ranks. Two approximations: the
    /// row-parallel products keep their bias on every rank (Megatron adds it once: `hidden`
    /// elements per block), and the cross-entropy over the vocabulary's shards is costed on
    /// the rank's shard without its two small all-reduces (of one number per token).
    ///
    /// # Errors
    /// A message naming the field that `ranks` does not divide (`heads`, `kv_heads`,
    /// `intermediate`), BERT (not split), or 0 ranks.
    pub fn with_tensor_parallel(&self, ranks: usize) -> Result<Self, ConfigError> {
        let split = Self { tensor_parallel: ranks, ..self.clone() };
        split.check()?;
        Ok(split)
    }

    /// Query heads on one tensor-parallel rank.
    pub(crate) fn heads_per_rank(&self) -> usize {
        self.heads / self.tensor_parallel
    }

    /// Key/value heads on one tensor-parallel rank.
    pub(crate) fn kv_heads_per_rank(&self) -> usize {
        self.kv_heads / self.tensor_parallel
    }

    /// The MLP's inner width on one tensor-parallel rank.
    pub(crate) fn intermediate_per_rank(&self) -> usize {
        self.intermediate / self.tensor_parallel
    }

    /// Vocabulary rows on one tensor-parallel rank (rounded up).
    pub(crate) fn vocab_per_rank(&self) -> usize {
        self.vocab.div_ceil(self.tensor_parallel)
    }

    /// Checks that the sizes make a model.
    ///
    /// # Errors
    /// A message naming the field: a size of 0, a width that is not a multiple of the heads,
    /// key/value heads that do not divide the heads, an odd head width under rotary positions,
    /// multi-query heads outside LLaMA, or BERT without token types.
    pub fn check(&self) -> Result<(), ConfigError> {
        let sizes = [
            ("layers", self.layers),
            ("hidden", self.hidden),
            ("heads", self.heads),
            ("kv_heads", self.kv_heads),
            ("intermediate", self.intermediate),
            ("vocab", self.vocab),
            ("max_positions", self.max_positions),
        ];
        if let Some((field, _)) = sizes.iter().find(|(_, size)| *size == 0) {
            return Err(format!("{}: {field} must be at least 1", self.name));
        }
        if !self.hidden.is_multiple_of(self.heads) {
            return Err(format!(
                "{}: hidden {} is not a multiple of heads {}",
                self.name, self.hidden, self.heads
            ));
        }
        if !self.heads.is_multiple_of(self.kv_heads) {
            return Err(format!(
                "{}: kv_heads {} does not divide heads {}",
                self.name, self.kv_heads, self.heads
            ));
        }
        if self.family != Family::Llama && self.kv_heads != self.heads {
            return Err(format!(
                "{}: kv_heads {} differs from heads {}: grouped-query attention is LLaMA's",
                self.name, self.kv_heads, self.heads
            ));
        }
        if self.family == Family::Llama && !self.head_dim().is_multiple_of(2) {
            return Err(format!(
                "{}: rotary positions need an even head width, not {}",
                self.name,
                self.head_dim()
            ));
        }
        if self.family == Family::Bert && self.type_vocab == 0 {
            return Err(format!("{}: BERT needs type_vocab of at least 1", self.name));
        }
        if !(self.norm_eps.is_finite() && self.norm_eps > 0.0) {
            return Err(format!("{}: norm_eps {} must be positive", self.name, self.norm_eps));
        }
        self.check_tensor_parallel()
    }

    /// Checks that the tensor-parallel ranks split the heads and the MLP.
    fn check_tensor_parallel(&self) -> Result<(), ConfigError> {
        let ranks = self.tensor_parallel;
        if ranks == 0 {
            return Err(format!("{}: tensor parallelism needs at least 1 rank", self.name));
        }
        if ranks == 1 {
            return Ok(());
        }
        if self.family == Family::Bert {
            return Err(format!(
                "{}: tensor parallelism splits GPT and LLaMA decoders, not BERT",
                self.name
            ));
        }
        let split = [
            ("heads", self.heads),
            ("kv_heads", self.kv_heads),
            ("intermediate", self.intermediate),
        ];
        if let Some((field, size)) = split.iter().find(|(_, size)| !size.is_multiple_of(ranks)) {
            return Err(format!(
                "{}: {ranks} tensor-parallel ranks do not divide {field} {size}",
                self.name
            ));
        }
        Ok(())
    }

    /// The trainable parameters, from the sizes alone (the graph [`TransformerConfig::build`]
    /// makes has exactly these).
    pub fn params(&self) -> u64 {
        let (h, i, v) = (self.hidden as u64, self.intermediate as u64, self.vocab as u64);
        let layers = self.layers as u64;
        let output = if self.tied_embeddings { 0 } else { v * h };
        match self.family {
            Family::Gpt2 => {
                let block =
                    2 * 2 * h + (h * 3 * h + 3 * h) + (h * h + h) + (h * i + i) + (i * h + h);
                v * h + self.max_positions as u64 * h + layers * block + 2 * h + output
            }
            Family::Llama => {
                let kv = (self.kv_heads * self.head_dim()) as u64;
                let block = 2 * h + 2 * h * h + 2 * h * kv + 3 * h * i;
                v * h + layers * block + h + output
            }
            Family::Bert => {
                let embeddings = (v + self.max_positions as u64 + self.type_vocab as u64) * h;
                let block = 4 * (h * h + h) + 2 * h + (h * i + i) + (i * h + h) + 2 * h;
                embeddings + 2 * h + layers * block + (h * h + h) + output
            }
        }
    }

    /// The graph of a training step on `config.batch` sequences of `config.seq_len` tokens,
    /// ending in the token-level cross-entropy `loss`.
    ///
    /// # Errors
    /// [`IrError::Shape`] for a configuration [`TransformerConfig::check`] refuses (naming
    /// the model), or a sequence longer than `max_positions` (naming the position table).
    pub fn build(&self, config: &ModelConfig) -> Result<Graph, IrError> {
        self.check().map_err(|message| IrError::Shape {
            node: self.name.clone(),
            op: "Transformer",
            message,
        })?;
        match self.family {
            Family::Gpt2 => gpt2::build(config, self),
            Family::Llama => llama::build(config, self),
            Family::Bert => bert::build(config, self),
        }
    }

    /// The configuration `FAMILY:FIELD=VALUE,...` describes (`llama:layers=16,kv_heads=8`):
    /// the family's base model (`gpt2`: GPT-2 small, `llama`: LLaMA-2 7B, `bert`: BERT-base)
    /// with the fields given changed (`layers`, `hidden`, `heads`, `kv_heads`,
    /// `intermediate`, `vocab`, `positions`, `type_vocab`, `tied`, `eps`), named as written.
    /// As in Hugging Face's configurations, GPT-2's and BERT's MLP width follows a new
    /// `hidden` (four times it) and key/value heads follow new `heads`, unless given.
    /// `None` when `text` does not start with a family and a colon.
    ///
    /// # Errors
    /// A message naming an unknown field, a value that is not a number (or `true`/`false`
    /// for `tied`), a field given twice, or sizes [`TransformerConfig::check`] refuses.
    pub fn from_fields(text: &str) -> Option<Result<Self, ConfigError>> {
        let (family, fields) = text.split_once(':')?;
        let mut config = match family {
            "gpt2" => Self::gpt2_small(),
            "llama" => Self::llama2(7).expect("a LLaMA-2 size"),
            "bert" => Self::bert_base(),
            _ => return None,
        };
        config.name = text.to_string();
        Some(config.with_fields(fields).map(|()| config))
    }

    /// Sets each `FIELD=VALUE` of the comma-separated `fields`, then checks the result.
    fn with_fields(&mut self, fields: &str) -> Result<(), ConfigError> {
        let mut seen = Vec::new();
        for item in fields.split(',').filter(|item| !item.is_empty()) {
            let fail = |why: &str| format!("{}: `{item}`: {why}", self.name);
            let (key, value) = item.split_once('=').ok_or_else(|| fail("expected FIELD=VALUE"))?;
            if seen.contains(&key) {
                return Err(fail("the field is given twice"));
            }
            seen.push(key);
            let size = || value.parse::<usize>().map_err(|_| fail("not a whole number"));
            match key {
                "layers" => self.layers = size()?,
                "hidden" => self.hidden = size()?,
                "heads" => self.heads = size()?,
                "kv_heads" => self.kv_heads = size()?,
                "intermediate" => self.intermediate = size()?,
                "vocab" => self.vocab = size()?,
                "positions" => self.max_positions = size()?,
                "type_vocab" => self.type_vocab = size()?,
                "tied" => {
                    self.tied_embeddings =
                        value.parse().map_err(|_| fail("expected true or false"))?;
                }
                "eps" => self.norm_eps = value.parse().map_err(|_| fail("not a number"))?,
                _ => {
                    return Err(fail(
                        "unknown field; expected layers, hidden, heads, kv_heads, intermediate, \
                         vocab, positions, type_vocab, tied or eps",
                    ));
                }
            }
        }
        // GPT-2's and BERT's MLP is four times the width unless given.
        if self.family != Family::Llama
            && seen.contains(&"hidden")
            && !seen.contains(&"intermediate")
        {
            self.intermediate = 4 * self.hidden;
        }
        // Multi-head attention unless key/value heads are given.
        if !seen.contains(&"kv_heads") && self.family != Family::Llama
            || seen.contains(&"heads") && !seen.contains(&"kv_heads")
        {
            self.kv_heads = self.heads;
        }
        self.check()
    }

    /// The configuration a Hugging Face `config.json` describes (its `model_type` `gpt2`,
    /// `llama`, `mistral` or `bert`, with that family's field names), named `name`.
    ///
    /// # Errors
    /// A message naming what is wrong: text that is not JSON, an unknown `model_type`, a
    /// missing or malformed field, or sizes [`TransformerConfig::check`] refuses.
    pub fn from_hugging_face(text: &str, name: &str) -> Result<Self, ConfigError> {
        let json: Value =
            serde_json::from_str(text).map_err(|e| format!("{name}: not a JSON config: {e}"))?;
        Self::from_hugging_face_json(&json, name)
    }

    /// [`TransformerConfig::from_hugging_face`] of a configuration already parsed.
    ///
    /// # Errors
    /// As [`TransformerConfig::from_hugging_face`], but for the text.
    pub fn from_hugging_face_json(json: &Value, name: &str) -> Result<Self, ConfigError> {
        let field = |key: &str| -> Result<Option<usize>, ConfigError> {
            match json.get(key) {
                None | Some(Value::Null) => Ok(None),
                Some(value) => value
                    .as_u64()
                    .and_then(|n| usize::try_from(n).ok())
                    .map(Some)
                    .ok_or_else(|| format!("{name}: `{key}` is {value}, not a whole number")),
            }
        };
        let required = |key: &str| field(key)?.ok_or_else(|| format!("{name}: `{key}` is missing"));
        let flag = |key: &str, default: bool| match json.get(key) {
            None | Some(Value::Null) => Ok(default),
            Some(Value::Bool(b)) => Ok(*b),
            Some(value) => Err(format!("{name}: `{key}` is {value}, not true or false")),
        };
        let float = |key: &str, default: f64| match json.get(key) {
            None | Some(Value::Null) => Ok(default),
            Some(value) => {
                value.as_f64().ok_or_else(|| format!("{name}: `{key}` is {value}, not a number"))
            }
        };
        let model_type = json.get("model_type").and_then(Value::as_str).unwrap_or("");
        let config = match model_type {
            "gpt2" => {
                let hidden = required("n_embd")?;
                let heads = required("n_head")?;
                Self {
                    name: name.into(),
                    family: Family::Gpt2,
                    layers: required("n_layer")?,
                    hidden,
                    heads,
                    kv_heads: heads,
                    intermediate: field("n_inner")?.unwrap_or(4 * hidden),
                    vocab: required("vocab_size")?,
                    max_positions: required("n_positions")?,
                    type_vocab: 0,
                    tied_embeddings: flag("tie_word_embeddings", true)?,
                    norm_eps: float("layer_norm_epsilon", 1e-5)?,
                    tensor_parallel: 1,
                }
            }
            "llama" | "mistral" => {
                let heads = required("num_attention_heads")?;
                Self {
                    name: name.into(),
                    family: Family::Llama,
                    layers: required("num_hidden_layers")?,
                    hidden: required("hidden_size")?,
                    heads,
                    kv_heads: field("num_key_value_heads")?.unwrap_or(heads),
                    intermediate: required("intermediate_size")?,
                    vocab: required("vocab_size")?,
                    max_positions: required("max_position_embeddings")?,
                    type_vocab: 0,
                    tied_embeddings: flag("tie_word_embeddings", false)?,
                    norm_eps: float("rms_norm_eps", 1e-6)?,
                    tensor_parallel: 1,
                }
            }
            "bert" => {
                let heads = required("num_attention_heads")?;
                Self {
                    name: name.into(),
                    family: Family::Bert,
                    layers: required("num_hidden_layers")?,
                    hidden: required("hidden_size")?,
                    heads,
                    kv_heads: heads,
                    intermediate: required("intermediate_size")?,
                    vocab: required("vocab_size")?,
                    max_positions: required("max_position_embeddings")?,
                    type_vocab: field("type_vocab_size")?.unwrap_or(2),
                    tied_embeddings: true,
                    norm_eps: float("layer_norm_eps", 1e-12)?,
                    tensor_parallel: 1,
                }
            }
            other => {
                return Err(format!(
                    "{name}: model_type `{other}`: ordo builds gpt2, llama, mistral and bert"
                ));
            }
        };
        config.check()?;
        Ok(config)
    }
}

/// The error of a sequence of `seq` tokens longer than `dims`' positions, naming `node` (an
/// `op`) and `what` its positions are.
pub(crate) fn check_positions(
    seq: usize,
    dims: &TransformerConfig,
    (node, op): (&str, &'static str),
    what: &str,
) -> Result<(), IrError> {
    if seq > dims.max_positions {
        return Err(IrError::Shape {
            node: node.into(),
            op,
            message: format!("sequence length {seq} exceeds the {} {what}", dims.max_positions),
        });
    }
    Ok(())
}
