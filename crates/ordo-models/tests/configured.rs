//! Transformers from Hugging Face configurations (`tests/configs`, the `config.json` of each
//! model as published): parameter counts against Hugging Face's own (`num_parameters()`),
//! the graph's count against the count from the sizes alone, and configurations that cannot
//! be built refused with the field named.

use ordo_ir::graph_stats;
use ordo_models::{Family, ModelConfig, TransformerConfig};

fn config(file: &str) -> TransformerConfig {
    let path = format!("{}/tests/configs/{file}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap();
    TransformerConfig::from_hugging_face(&text, file).unwrap()
}

/// Hugging Face's parameter counts: `GPT2LMHeadModel`, `BertModel` (with its pooler; ordo's
/// masked-LM decoder is tied and adds none), `LlamaForCausalLM` and `MistralForCausalLM`.
const PUBLISHED: [(&str, Family, u64); 6] = [
    ("gpt2.json", Family::Gpt2, 124_439_808),
    ("bert-base-uncased.json", Family::Bert, 109_482_240),
    ("llama-2-7b-hf.json", Family::Llama, 6_738_415_616),
    ("llama-2-13b-hf.json", Family::Llama, 13_015_864_320),
    ("llama-2-70b-hf.json", Family::Llama, 68_976_648_192),
    ("mistral-7b-v0.1.json", Family::Llama, 7_241_732_096),
];

#[test]
fn parameter_counts_equal_hugging_faces_and_the_graphs() {
    for (file, family, published) in PUBLISHED {
        let config = config(file);
        assert_eq!(config.family, family, "{file}");
        assert_eq!(config.params(), published, "{file}: counted from the sizes");
        let graph = config.build(&ModelConfig { batch: 1, seq_len: 16 }).unwrap();
        assert_eq!(graph_stats(&graph).params, published, "{file}: the graph's parameters");
    }
}

#[test]
fn built_in_configurations_match_their_files_and_the_gpt3_paper() {
    assert_eq!(
        config("gpt2.json"),
        TransformerConfig { name: "gpt2.json".into(), ..TransformerConfig::gpt2_small() }
    );
    for (billions, file) in
        [(7, "llama-2-7b-hf.json"), (13, "llama-2-13b-hf.json"), (70, "llama-2-70b-hf.json")]
    {
        let built_in = TransformerConfig::llama2(billions).unwrap();
        assert_eq!(config(file), TransformerConfig { name: file.into(), ..built_in });
    }
    // GPT-3's paper: 96 layers, d_model 12288, 96 heads, context 2048, GPT-2's vocabulary;
    // "175B" is 174,604,259,328 with tied embeddings and biases.
    let gpt3 = TransformerConfig::gpt3_175b();
    assert_eq!(gpt3.params(), 174_604_259_328);
    let graph = gpt3.build(&ModelConfig { batch: 1, seq_len: 8 }).unwrap();
    assert_eq!(graph_stats(&graph).params, gpt3.params());
}

#[test]
fn small_variants_keep_the_structure() {
    let small = config("llama-2-70b-hf.json").small();
    assert_eq!((small.heads, small.kv_heads, small.layers), (4, 1, 2));
    let graph = small.build(&ModelConfig { batch: 2, seq_len: 8 }).unwrap();
    assert_eq!(graph_stats(&graph).params, small.params());
    assert!(graph.find("model.layers.1.self_attn.k_repeat.expand").is_some());
    // LLaMA's LM head is a weight of its own; GPT-2's reuses the token embedding.
    assert!(graph.params.iter().any(|p| p.name == "lm_head.weight"));
    let gpt2 = config("gpt2.json").small().build(&ModelConfig { batch: 2, seq_len: 8 }).unwrap();
    assert!(!gpt2.params.iter().any(|p| p.name == "lm_head.weight"));
}

#[test]
fn configurations_that_cannot_be_built_name_the_field() {
    let base = std::fs::read_to_string(format!(
        "{}/tests/configs/llama-2-70b-hf.json",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap();
    let cases = [
        (
            base.replace("\"num_key_value_heads\": 8", "\"num_key_value_heads\": 7"),
            "kv_heads 7 does not divide heads 64",
        ),
        (
            base.replace("\"hidden_size\": 8192", "\"hidden_size\": 8190"),
            "hidden 8190 is not a multiple of heads 64",
        ),
        (base.replace("\"hidden_size\": 8192,", ""), "`hidden_size` is missing"),
        (
            base.replace("\"num_hidden_layers\": 80", "\"num_hidden_layers\": -1"),
            "`num_hidden_layers` is -1, not a whole number",
        ),
        (
            base.replace("\"num_hidden_layers\": 80", "\"num_hidden_layers\": 0"),
            "layers must be at least 1",
        ),
        (
            base.replace("\"tie_word_embeddings\": false", "\"tie_word_embeddings\": 3"),
            "`tie_word_embeddings` is 3, not true or false",
        ),
        (base.replace("\"llama\"", "\"t5\""), "model_type `t5`"),
        ("{".to_string(), "not a JSON config"),
    ];
    for (text, message) in cases {
        let err = TransformerConfig::from_hugging_face(&text, "bad").unwrap_err();
        assert!(err.starts_with("bad: ") && err.contains(message), "{err}");
    }
    let mut long = config("gpt2.json");
    long.max_positions = 8;
    let err = long.build(&ModelConfig { batch: 1, seq_len: 16 }).unwrap_err().to_string();
    assert!(err.contains("transformer.wpe") && err.contains("exceeds the 8"), "{err}");
}
