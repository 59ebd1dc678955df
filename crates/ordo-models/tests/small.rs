//! The small variants: every one builds, validates and has a checked training graph; it keeps
//! its model's structure (branches, residuals, dense concatenations, squeeze-excitation,
//! attention masks, the bidirectional LSTM, tied embeddings) and its naming scheme.

use std::collections::BTreeSet;

use ordo_ir::op::{Op, Optimizer, UnaryOp};
use ordo_ir::training::{check_gradients, training_graph};
use ordo_ir::{Graph, Node, OutletId, graph_stats, validate};
use ordo_models::{SMALL_BATCH, Variant, build_variant, zoo};

fn small(name: &str) -> Graph {
    build_variant(name, Variant::Small, None, None).unwrap_or_else(|e| panic!("{name}: {e}"))
}

fn node<'g>(g: &'g Graph, name: &str) -> &'g Node {
    g.find(name).unwrap_or_else(|| panic!("{}: no node `{name}`", g.name))
}

/// The most consumers any one wire has.
fn max_fan_out(g: &Graph) -> usize {
    g.consumers().iter().map(Vec::len).max().unwrap_or(0)
}

fn count(g: &Graph, pred: impl Fn(&Node) -> bool) -> usize {
    g.nodes.iter().filter(|n| pred(n)).count()
}

/// A name with every run of digits replaced by `#`: `layer1.0.conv1` -> `layer#.#.conv#`.
fn scheme(name: &str) -> String {
    let mut out = String::new();
    for c in name.chars() {
        if c.is_ascii_digit() {
            if !out.ends_with('#') {
                out.push('#');
            }
        } else {
            out.push(c);
        }
    }
    out
}

#[test]
fn every_small_variant_builds_validates_and_has_a_checked_training_graph() {
    for spec in zoo() {
        let name = spec.name;
        let g = small(name);
        validate(&g).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(g.name, format!("{name}-small"));
        let input = g.input_nodes().next().unwrap();
        let batch_axis = if name == "gnmt" { 1 } else { 0 };
        assert_eq!(input.outputs[0].shape[batch_axis], SMALL_BATCH, "{name}");

        let loss = OutletId::new(node(&g, "loss").id, 0);
        let t = training_graph(&g, loss, Optimizer::Adam).unwrap();
        let grads = t.nodes.iter().filter(|n| matches!(n.op, Op::Grad(_))).count();
        assert_eq!(check_gradients(&t).unwrap(), grads, "{name}");

        // Much smaller than the full model, in work and in parameters.
        let full = ordo_models::build(name, None, None).unwrap();
        let (s, f) = (graph_stats(&g), graph_stats(&full));
        assert!(s.flops * 1000 < f.flops, "{name}: {} vs {} FLOPs", s.flops, f.flops);
        assert!(s.params * 100 < f.params, "{name}: {} vs {} parameters", s.params, f.params);
        assert!(g.nodes.len() <= full.nodes.len(), "{name}");

        // Node and parameter names follow the full model's scheme.
        let schemes = |names: Vec<&String>| -> BTreeSet<String> {
            names.into_iter().map(|n| scheme(n)).collect()
        };
        let full_nodes = schemes(full.nodes.iter().map(|n| &n.name).collect());
        let full_params = schemes(full.params.iter().map(|p| &p.name).collect());
        for n in &g.nodes {
            assert!(full_nodes.contains(&scheme(&n.name)), "{name}: node `{}`", n.name);
        }
        for p in &g.params {
            assert!(full_params.contains(&scheme(&p.name)), "{name}: parameter `{}`", p.name);
        }
    }
}

#[test]
fn batch_and_sequence_length_still_override() {
    let g = build_variant("gpt2_small", Variant::Small, Some(3), Some(5)).unwrap();
    assert_eq!(node(&g, "input_ids").outputs[0].shape, [3, 5]);
    let g = build_variant("resnet50", Variant::Small, Some(1), None).unwrap();
    assert_eq!(node(&g, "input").outputs[0].shape, [1, 3, 32, 32]);
    let err = build_variant("bert_base", Variant::Small, None, Some(65)).unwrap_err();
    assert!(format!("{err:?}").contains("position_embeddings"), "{err:?}");
}

#[test]
fn resnet_small_has_identity_and_projection_residuals() {
    let g = small("resnet50");
    let adds: Vec<&Node> = g.nodes.iter().filter(|n| n.op == Op::Add).collect();
    assert_eq!(adds.len(), 5);
    // layer1.1 adds its input itself; layer1.0 adds a projected shortcut.
    let identity = node(&g, "layer1.1.add");
    assert!(identity.inputs.iter().any(|o| g.node(o.node).name == "layer1.0.relu_2"));
    let projected = node(&g, "layer1.0.add");
    assert!(projected.inputs.iter().any(|o| g.node(o.node).name == "layer1.0.downsample.1"));
    assert_eq!(node(&g, "layer4.0.add").outputs[0].shape, [2, 128, 1, 1]);
}

#[test]
fn inception_small_keeps_parallel_branches_of_every_block_kind() {
    let g = small("inception_v3");
    assert!(max_fan_out(&g) >= 4, "fan-out {}", max_fan_out(&g));
    for (cat, inputs) in [
        ("Mixed_5b.cat", 4),
        ("Mixed_6a.cat", 3),
        ("Mixed_6b.cat", 4),
        ("Mixed_7a.cat", 3),
        ("Mixed_7b.cat", 4),
        ("Mixed_7b.branch3x3_cat", 2),
    ] {
        assert_eq!(node(&g, cat).inputs.len(), inputs, "{cat}");
    }
    assert!(node(&g, "Mixed_6b.branch7x7_2.conv").op.name().contains("Conv"));
    assert_eq!(node(&g, "Mixed_7b.cat").outputs[0].shape[2..], [1, 1]);
}

#[test]
fn densenet_small_concatenates_every_earlier_layer() {
    let g = small("densenet121");
    for block in 1..=4 {
        let p = format!("features.denseblock{block}");
        assert_eq!(node(&g, &format!("{p}.denselayer2.cat")).inputs.len(), 2);
        assert_eq!(node(&g, &format!("{p}.denselayer3.cat")).inputs.len(), 3);
        assert_eq!(node(&g, &format!("{p}.cat")).inputs.len(), 4);
    }
    // The block input feeds its first layer and every concatenation after it.
    assert!(max_fan_out(&g) >= 4);
}

#[test]
fn mobilenet_small_keeps_squeeze_excitation_residuals_and_hardswish() {
    let g = small("mobilenet_v3_large");
    let se = count(&g, |n| n.op == Op::Unary { func: UnaryOp::HardSigmoid });
    let adds = count(&g, |n| n.op == Op::Add);
    let hardswish = count(&g, |n| n.op == Op::Unary { func: UnaryOp::HardSwish });
    assert_eq!((se, adds), (3, 3));
    assert!(hardswish >= 3, "{hardswish}");
    // Squeeze-excitation multiplies the block's activation by its own pooled scale.
    let mul = node(&g, "features.3.block.2.mul");
    assert_eq!(mul.inputs.len(), 2);
    assert!(g.nodes.iter().any(|n| n.name == "features.1.block.0.0"), "no expansion in block 1");
}

#[test]
fn sequence_small_variants_keep_masks_cross_attention_lstms_and_tied_weights() {
    let t = small("transformer");
    assert_eq!(count(&t, |n| n.op == Op::CausalMask), 2);
    let memory = node(&t, "enc.1.n2").id;
    assert!(node(&t, "dec.0.cross.k").inputs.iter().any(|o| o.node == memory));
    assert!(node(&t, "dec.1.cross.v").inputs.iter().any(|o| o.node == memory));

    let g = small("gnmt");
    let Op::Lstm(first) = &node(&g, "encoder.rnn_layers.0").op else { panic!("not an LSTM") };
    assert_eq!(first.directions(), 2);
    assert_eq!(node(&g, "encoder.embedder").params, node(&g, "decoder.embedder").params);
    assert!(g.find("encoder.add").is_some() && g.find("decoder.add").is_some());
    assert!(g.find("decoder.att_rnn.attn.softmax").is_some());

    let b = small("bert_base");
    let words = node(&b, "embeddings.word_embeddings").params.clone();
    assert_eq!(node(&b, "cls.predictions.decoder").params, words);
    assert_eq!(b.outputs.len(), 2);

    let g = small("gpt2_small");
    assert_eq!(node(&g, "lm_head").params, node(&g, "transformer.wte").params);
    assert_eq!(count(&g, |n| n.op == Op::CausalMask), 2);
}

#[test]
fn a_sequence_length_for_an_image_model_is_an_error() {
    let err = build_variant("resnet50", Variant::Small, None, Some(8)).unwrap_err();
    assert_eq!(
        err.to_string(),
        "model `resnet50` has no sequence length: --seq-len applies to sequence models"
    );
}
