//! The sequence models of the zoo: parameter counts, shapes, names, tied weights and FLOPs
//! against formulas written here independently of the model code.

use ordo_ir::op::{LayerNorm, Lstm, Op, UnaryOp};
use ordo_ir::{DType, Graph, IrError, Node, TensorFact, graph_stats, validate};
use ordo_models::{ModelError, build};

fn graph(name: &str, batch: Option<usize>, seq_len: Option<usize>) -> Graph {
    let g = build(name, batch, seq_len).unwrap_or_else(|e| panic!("{name}: {e}"));
    validate(&g).unwrap_or_else(|e| panic!("{name} does not validate: {e}"));
    g
}

fn node<'g>(g: &'g Graph, name: &str) -> &'g Node {
    g.find(name).unwrap_or_else(|| panic!("{}: no node `{name}`", g.name))
}

fn shape<'g>(g: &'g Graph, node_name: &str) -> &'g [usize] {
    &node(g, node_name).outputs[0].shape
}

fn param_shape<'g>(g: &'g Graph, param: &str) -> &'g [usize] {
    let p = g.params.iter().find(|p| p.name == param);
    &p.unwrap_or_else(|| panic!("{}: no parameter `{param}`", g.name)).fact.shape
}

fn has_param(g: &Graph, param: &str) -> bool {
    g.params.iter().any(|p| p.name == param)
}

/// Trainable elements summed over the parameter table, each parameter once.
fn table_params(g: &Graph) -> u64 {
    g.params.iter().filter(|p| p.trainable).map(|p| p.fact.numel()).sum()
}

fn count_ops(g: &Graph, pred: impl Fn(&Op) -> bool) -> usize {
    g.nodes.iter().filter(|n| pred(&n.op)).count()
}

fn output_names(g: &Graph) -> Vec<&str> {
    g.outputs.iter().map(|o| g.node(o.node).name.as_str()).collect()
}

fn i64_input(g: &Graph, name: &str, dims: &[usize]) {
    let n = node(g, name);
    assert_eq!(n.op, Op::Input, "{name}");
    assert_eq!(n.outputs[0], TensorFact::new(DType::I64, dims), "{name}");
}

/// Asserts that the graph's forward FLOPs are within `tol` (relative) of `expected`.
fn assert_flops_close(g: &Graph, expected: f64, tol: f64) {
    let flops = graph_stats(g).flops as f64;
    let rel = (flops - expected).abs() / expected;
    assert!(rel < tol, "{}: {flops:e} FLOPs vs formula {expected:e} ({rel:.4} apart)", g.name);
}

/// Parameters of one `torch.nn.LSTM` direction from `i` inputs to `h` units.
fn lstm_params(i: u64, h: u64) -> u64 {
    4 * h * (i + h) + 2 * 4 * h
}

// The FLOP formulas count two FLOPs per weight per token for every weight matrix applied to
// every token, plus the two attention products (scores and context, 2 x T^2 x d each per
// layer and sequence). The IR also counts elementwise work (norms, softmax, activations,
// dropout, bias adds, the loss), worth 0.2-0.8 % here, so a 2 % band passes the real models
// while a missing or duplicated layer (over 3 % of the total in every model) fails.
const FLOP_TOLERANCE: f64 = 0.02;

#[test]
fn transformer_matches_the_reference() {
    let g = graph("transformer", None, None);
    let (d, ff, v, l) = (512u64, 2048u64, 32000u64, 6u64);
    let attention = 4 * (d * d + d);
    let norm = 2 * d;
    let ffn = d * ff + ff + ff * d + d;
    let (enc_layer, dec_layer) = (attention + ffn + 2 * norm, 2 * attention + ffn + 3 * norm);
    let expected = 2 * v * d + l * enc_layer + l * dec_layer + d * v + v;
    assert_eq!(expected, 93_322_496);
    assert_eq!(graph_stats(&g).params, expected);
    assert_eq!(table_params(&g), expected);
    assert!(g.params.iter().all(|p| p.trainable), "no positional buffer in the reference");

    i64_input(&g, "src", &[64, 128]);
    i64_input(&g, "tgt", &[64, 128]);
    i64_input(&g, "labels", &[64, 128]);
    assert_eq!(shape(&g, "out"), [64, 128, 32000]);
    assert_eq!(output_names(&g), ["loss"]);
    assert_eq!(shape(&g, "loss"), [] as [usize; 0]);

    assert_eq!(param_shape(&g, "se.weight"), [32000, 512]);
    assert_eq!(param_shape(&g, "te.weight"), [32000, 512]);
    assert_eq!(param_shape(&g, "enc.5.ff.0.weight"), [2048, 512]);
    assert_eq!(param_shape(&g, "dec.5.cross.k.weight"), [512, 512]);
    assert_eq!(param_shape(&g, "dec.0.n3.bias"), [512]);
    assert_eq!(param_shape(&g, "out.bias"), [32000]);

    // The embeddings feed the first layers directly: no scaling, no positional encoding.
    assert_eq!(g.node(node(&g, "enc.0.att.q").inputs[0].node).name, "se");
    assert_eq!(g.node(node(&g, "dec.0.att.v").inputs[0].node).name, "te");
    // Cross-attention keys and values come from the last encoder layer.
    for kv in ["k", "v"] {
        let from = node(&g, &format!("dec.3.cross.{kv}")).inputs[0].node;
        assert_eq!(g.node(from).name, "enc.5.n2");
    }
    // Post-norm: n1 normalises the residual sum of the attention branch.
    assert_eq!(g.node(node(&g, "enc.0.n1").inputs[0].node).name, "enc.0.add");
    assert_eq!(count_ops(&g, |op| *op == Op::CausalMask), 6);
    assert!(g.find("dec.0.att.causal_mask").is_some());
    assert!(g.find("dec.0.cross.causal_mask").is_none());
    assert!(g.find("enc.0.att.causal_mask").is_none());
    assert_eq!(count_ops(&g, |op| matches!(op, Op::Dropout { p } if *p == 0.1)), 30);
    assert_eq!(count_ops(&g, |op| matches!(op, Op::Softmax { .. })), 18);
    assert_eq!(count_ops(&g, |op| matches!(op, Op::LayerNorm(_))), 30);
    assert_eq!(node(&g, "enc.0.att.scale").op, Op::Scale { factor: 0.125 });
    assert_eq!(shape(&g, "enc.0.att.k_transpose"), [64, 8, 64, 128]);

    let (b, t) = (64.0, 128.0);
    let matmul_weights = (l * enc_layer + l * dec_layer + d * v + v) as f64;
    let attention_products = 18.0 * 4.0 * b * t * t * d as f64;
    assert_flops_close(&g, 2.0 * matmul_weights * b * t + attention_products, FLOP_TOLERANCE);
}

#[test]
fn transformer_other_sizes() {
    let g = graph("transformer", Some(3), Some(17));
    i64_input(&g, "src", &[3, 17]);
    i64_input(&g, "labels", &[3, 17]);
    assert_eq!(shape(&g, "out"), [3, 17, 32000]);
    assert_eq!(shape(&g, "dec.2.att.softmax"), [3, 8, 17, 17]);
    assert_eq!(graph_stats(&g).params, 93_322_496);
}

#[test]
fn gnmt_matches_the_reference() {
    let g = graph("gnmt", None, None);
    let (h, v) = (512u64, 30000u64);
    let embedding = v * h;
    let encoder = 2 * lstm_params(h, h) + lstm_params(2 * h, h) + 2 * lstm_params(h, h);
    let attention = 2 * h * h + h + 1 + h;
    let decoder = lstm_params(h, h) + attention + 3 * lstm_params(2 * h, h) + h * v + v;
    let expected = embedding + encoder + decoder;
    assert_eq!(expected, 54_380_849);
    assert_eq!(graph_stats(&g).params, expected);
    assert_eq!(table_params(&g), expected);

    // Sequence-first, like the reference.
    i64_input(&g, "src", &[40, 128]);
    i64_input(&g, "tgt", &[40, 128]);
    i64_input(&g, "labels", &[40, 128]);
    assert_eq!(shape(&g, "decoder.classifier.classifier"), [40, 128, 30000]);
    assert_eq!(output_names(&g), ["loss"]);

    // One shared embedding.
    let enc = node(&g, "encoder.embedder");
    let dec = node(&g, "decoder.embedder");
    assert_eq!(enc.params, dec.params);
    assert!(!has_param(&g, "decoder.embedder.weight"));

    assert_eq!(node(&g, "encoder.rnn_layers.0").op, Op::Lstm(Lstm::bidirectional(512)));
    assert_eq!(shape(&g, "encoder.rnn_layers.0"), [40, 128, 1024]);
    assert_eq!(param_shape(&g, "encoder.rnn_layers.0.weight_ih_l0_reverse"), [2048, 512]);
    assert_eq!(param_shape(&g, "encoder.rnn_layers.1.weight_ih_l0"), [2048, 1024]);
    assert_eq!(param_shape(&g, "encoder.rnn_layers.3.weight_ih_l0"), [2048, 512]);
    assert_eq!(param_shape(&g, "decoder.rnn_layers.2.weight_ih_l0"), [2048, 1024]);
    assert_eq!(param_shape(&g, "decoder.att_rnn.attn.linear_q.weight"), [512, 512]);
    assert!(!has_param(&g, "decoder.att_rnn.attn.linear_k.bias"));
    assert_eq!(param_shape(&g, "decoder.att_rnn.attn.linear_att"), [512]);
    assert_eq!(param_shape(&g, "decoder.att_rnn.attn.normalize_scalar"), [1]);
    assert_eq!(param_shape(&g, "decoder.att_rnn.attn.normalize_bias"), [512]);
    assert_eq!(count_ops(&g, |op| matches!(op, Op::Lstm(_))), 8);
    assert_eq!(count_ops(&g, |op| matches!(op, Op::Dropout { p } if *p == 0.2)), 8);
    assert_eq!(count_ops(&g, |op| *op == Op::Parameter), 3);
    assert_eq!(shape(&g, "decoder.att_rnn.attn.tanh"), [128, 40, 40, 512]);
    assert_eq!(shape(&g, "decoder.att_rnn.attn.softmax"), [128, 40, 40]);
    assert_eq!(shape(&g, "decoder.cat_2"), [40, 128, 1024]);
    // Residuals: encoder layers 2 and 3, decoder layers 1 and 2.
    assert_eq!(count_ops(&g, |op| *op == Op::Add), 4 + 2);
    let residual = node(&g, "decoder.add");
    assert_eq!(g.node(residual.inputs[1].node).name, "decoder.rnn_layers.0");

    let (b, t) = (128.0, 40.0);
    let matmul_weights = (encoder + decoder - 2 * h - 1) as f64;
    let attention_products = 2.0 * 2.0 * b * t * t * h as f64;
    assert_flops_close(&g, 2.0 * matmul_weights * b * t + attention_products, FLOP_TOLERANCE);
}

#[test]
fn gnmt_other_sizes() {
    let g = graph("gnmt", Some(4), Some(9));
    i64_input(&g, "tgt", &[9, 4]);
    assert_eq!(shape(&g, "decoder.classifier.classifier"), [9, 4, 30000]);
    assert_eq!(shape(&g, "decoder.att_rnn.attn.context_transpose"), [9, 4, 512]);
    assert_eq!(graph_stats(&g).params, 54_380_849);
}

#[test]
fn bert_matches_hugging_face() {
    let g = graph("bert_base", None, None);
    assert_eq!(graph_stats(&g).params, 109_482_240);
    assert_eq!(table_params(&g), 109_482_240);

    i64_input(&g, "input_ids", &[32, 128]);
    i64_input(&g, "token_type_ids", &[32, 128]);
    i64_input(&g, "position_ids", &[1, 128]);
    i64_input(&g, "labels", &[32, 128]);
    assert_eq!(output_names(&g), ["loss", "pooler.activation"]);
    assert_eq!(shape(&g, "pooler.activation"), [32, 768]);
    assert_eq!(shape(&g, "cls.predictions.decoder"), [32, 128, 30522]);

    assert_eq!(param_shape(&g, "embeddings.word_embeddings.weight"), [30522, 768]);
    assert_eq!(param_shape(&g, "embeddings.position_embeddings.weight"), [512, 768]);
    assert_eq!(param_shape(&g, "embeddings.token_type_embeddings.weight"), [2, 768]);
    assert_eq!(param_shape(&g, "encoder.layer.0.attention.self.query.weight"), [768, 768]);
    assert_eq!(param_shape(&g, "encoder.layer.5.attention.output.LayerNorm.bias"), [768]);
    assert_eq!(param_shape(&g, "encoder.layer.11.intermediate.dense.weight"), [3072, 768]);
    assert_eq!(param_shape(&g, "encoder.layer.11.output.dense.weight"), [768, 3072]);
    assert_eq!(param_shape(&g, "pooler.dense.weight"), [768, 768]);

    // The MLM decoder reads the word embeddings and owns nothing.
    let words = node(&g, "embeddings.word_embeddings");
    let decoder = node(&g, "cls.predictions.decoder");
    assert_eq!(decoder.params, words.params);
    assert!(!has_param(&g, "cls.predictions.decoder.weight"));
    assert!(!has_param(&g, "cls.predictions.decoder.bias"));

    assert_eq!(node(&g, "embeddings.LayerNorm").op, Op::LayerNorm(LayerNorm::new(768).eps(1e-12)));
    assert_eq!(
        node(&g, "encoder.layer.3.intermediate.intermediate_act_fn").op,
        Op::Unary { func: UnaryOp::Gelu }
    );
    assert_eq!(node(&g, "pooler.activation").op, Op::Unary { func: UnaryOp::Tanh });
    assert_eq!(count_ops(&g, |op| *op == Op::CausalMask), 0);
    assert_eq!(
        node(&g, "encoder.layer.0.attention.self.dropout").op,
        Op::Dropout { p: 0.1 },
        "dropout on the attention probabilities"
    );
    assert_eq!(node(&g, "encoder.layer.0.attention.self.scale").op, Op::Scale { factor: 0.125 });

    let (b, t, d, l) = (32.0, 128.0, 768.0, 12.0);
    let pooler = d * d + d;
    let per_token = 109_482_240.0 - 512.0 * d - 2.0 * d - pooler;
    let attention_products = l * 4.0 * b * t * t * d;
    let expected = 2.0 * per_token * b * t + 2.0 * pooler * b + attention_products;
    assert_flops_close(&g, expected, FLOP_TOLERANCE);
}

#[test]
fn bert_other_sizes_and_limit() {
    let g = graph("bert_base", Some(2), Some(512));
    i64_input(&g, "position_ids", &[1, 512]);
    assert_eq!(shape(&g, "embeddings.add_position"), [2, 512, 768]);
    assert_eq!(shape(&g, "pooler.activation"), [2, 768]);
    assert_eq!(shape(&g, "cls.predictions.decoder"), [2, 512, 30522]);
    match build("bert_base", None, Some(513)) {
        Err(ModelError::Build { source: IrError::Shape { node, .. }, .. }) => {
            assert_eq!(node, "embeddings.position_embeddings");
        }
        other => panic!("expected a position-limit error, got {other:?}"),
    }
}

#[test]
fn gpt2_matches_hugging_face() {
    let g = graph("gpt2_small", None, None);
    let (d, v, n_pos, l) = (768u64, 50257u64, 1024u64, 12u64);
    let block =
        2 * (2 * d) + (d * 3 * d + 3 * d) + (d * d + d) + (d * 4 * d + 4 * d) + (4 * d * d + d);
    let expected = v * d + n_pos * d + l * block + 2 * d;
    assert_eq!(expected, 124_439_808);
    assert_eq!(graph_stats(&g).params, expected);
    assert_eq!(table_params(&g), expected);

    i64_input(&g, "input_ids", &[8, 1024]);
    i64_input(&g, "position_ids", &[1, 1024]);
    i64_input(&g, "labels", &[8, 1024]);
    assert_eq!(shape(&g, "lm_head"), [8, 1024, 50257]);
    assert_eq!(output_names(&g), ["loss"]);

    let wte = node(&g, "transformer.wte");
    let lm_head = node(&g, "lm_head");
    assert_eq!(lm_head.params.len(), 1);
    assert_eq!(lm_head.params[0], wte.params[0], "lm_head is tied to transformer.wte.weight");
    assert!(!has_param(&g, "lm_head.weight"));

    assert_eq!(param_shape(&g, "transformer.wpe.weight"), [1024, 768]);
    assert_eq!(param_shape(&g, "transformer.h.0.attn.c_attn.weight"), [2304, 768]);
    assert_eq!(param_shape(&g, "transformer.h.11.mlp.c_fc.weight"), [3072, 768]);
    assert_eq!(param_shape(&g, "transformer.h.11.mlp.c_proj.weight"), [768, 3072]);
    assert_eq!(param_shape(&g, "transformer.ln_f.weight"), [768]);
    assert_eq!(shape(&g, "transformer.h.4.attn.value"), [8, 1024, 768]);
    assert_eq!(node(&g, "transformer.h.0.ln_1").op, Op::LayerNorm(LayerNorm::new(768)));
    assert_eq!(node(&g, "transformer.h.7.mlp.act").op, Op::Unary { func: UnaryOp::GeluTanh });
    assert_eq!(count_ops(&g, |op| *op == Op::CausalMask), 12);
    assert_eq!(count_ops(&g, |op| matches!(op, Op::Dropout { p } if *p == 0.1)), 1 + 12 * 3);
    // Pre-norm: the attention reads ln_1, the residual adds the block input.
    let c_attn = node(&g, "transformer.h.1.attn.c_attn");
    assert_eq!(g.node(c_attn.inputs[0].node).name, "transformer.h.1.ln_1");
    let residual = node(&g, "transformer.h.1.attn_residual");
    assert_eq!(g.node(residual.inputs[0].node).name, "transformer.h.0.mlp_residual");

    let (b, t) = (8.0, 1024.0);
    let per_token = (expected - n_pos * d) as f64;
    let attention_products = l as f64 * 4.0 * b * t * t * d as f64;
    assert_flops_close(&g, 2.0 * per_token * b * t + attention_products, FLOP_TOLERANCE);
}

#[test]
fn gpt2_other_sizes_and_limit() {
    let g = graph("gpt2_small", Some(2), Some(64));
    i64_input(&g, "input_ids", &[2, 64]);
    assert_eq!(shape(&g, "lm_head"), [2, 64, 50257]);
    assert_eq!(shape(&g, "transformer.h.0.attn.softmax"), [2, 12, 64, 64]);
    assert_eq!(graph_stats(&g).params, 124_439_808);
    match build("gpt2_small", None, Some(2048)) {
        Err(ModelError::Build { source: IrError::Shape { node, .. }, .. }) => {
            assert_eq!(node, "transformer.wpe");
        }
        other => panic!("expected a position-limit error, got {other:?}"),
    }
}

#[test]
fn attention_is_one_node_per_step() {
    let g = graph("gpt2_small", Some(1), Some(16));
    let p = "transformer.h.0.attn";
    let steps = [
        ("c_attn", "Linear"),
        ("query", "Slice"),
        ("q_reshape", "Reshape"),
        ("q_transpose", "Transpose"),
        ("k_transpose", "Transpose"),
        ("v_transpose", "Transpose"),
        ("scores", "MatMul"),
        ("scale", "Scale"),
        ("causal_mask", "CausalMask"),
        ("softmax", "Softmax"),
        ("attn_dropout", "Dropout"),
        ("context", "MatMul"),
        ("context_transpose", "Transpose"),
        ("context_reshape", "Reshape"),
        ("c_proj", "Linear"),
        ("resid_dropout", "Dropout"),
    ];
    for (step, op) in steps {
        assert_eq!(node(&g, &format!("{p}.{step}")).op.name(), op, "{step}");
    }
    let [scores, scale, mask, softmax] =
        ["scores", "scale", "causal_mask", "softmax"].map(|s| node(&g, &format!("{p}.{s}")));
    assert_eq!(scale.inputs[0].node, scores.id);
    assert_eq!(mask.inputs[0].node, scale.id);
    assert_eq!(softmax.inputs[0].node, mask.id);
    assert_eq!(shape(&g, &format!("{p}.k_transpose")), [1, 12, 64, 16]);
    assert_eq!(shape(&g, &format!("{p}.context_reshape")), [1, 16, 768]);
}
