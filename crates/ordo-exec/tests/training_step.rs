//! Whole training steps of small graphs, run node by node with the CPU kernels in the
//! training builder's order and argument conventions: the loss must fall.

use std::collections::HashMap;

use ordo_exec::cpu::{KernelContext, Tensor, init_state, node_seed, run};
use ordo_ir::op::{Conv2d, Lstm, Optimizer, Pool2d, UnaryOp, Wrt};
use ordo_ir::training::training_graph;
use ordo_ir::{Graph, GraphBuilder, Op, OutletId, TensorFact};

/// Runs `steps` training steps of `forward` on fixed `feeds`; returns the loss of each step.
fn train(
    forward: &Graph,
    feeds: &HashMap<&str, Tensor>,
    optimizer: Optimizer,
    lr: f32,
) -> Vec<f32> {
    let loss = OutletId::new(forward.find("loss").unwrap().id, 0);
    let g = training_graph(forward, loss, optimizer).unwrap();
    let mut params: Vec<Tensor> = g
        .params
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let t = Tensor::random(&p.fact, 1000 + i as u64).unwrap();
            let scale = if p.name.ends_with("running_var") { 0.0 } else { 0.5 };
            let v = t.as_f32().unwrap().iter().map(|x| x * scale + 1.0 - scale * 2.0).collect();
            Tensor::from_f32(t.shape(), v).unwrap()
        })
        .collect();
    let mut state: HashMap<usize, Vec<Tensor>> = HashMap::new();
    let order = g.topo_order().unwrap();
    let mut losses = Vec::new();
    for step in 1..=12u64 {
        let mut values: HashMap<OutletId, Tensor> = HashMap::new();
        let mut updated = Vec::new();
        for &id in &order {
            let node = g.node(id);
            let fed;
            let mut inputs: Vec<&Tensor> = node.inputs.iter().map(|o| &values[o]).collect();
            if node.op == Op::Input {
                fed = feeds[node.name.as_str()].clone();
                inputs = vec![&fed];
            }
            let layer = node.layer.map(|l| g.node(l));
            // Lstm's parameter gradient reads the forward weights, which the IR does not list.
            let param_ids = match (&node.op, layer) {
                (Op::Grad(gr), Some(l))
                    if gr.wrt == Wrt::Params && matches!(*gr.of, Op::Lstm(_)) =>
                {
                    &l.params
                }
                _ => &node.params,
            };
            let ps: Vec<&Tensor> = param_ids.iter().map(|p| &params[p.index()]).collect();
            let forward_inputs: Vec<TensorFact> = layer
                .map(|l| g.input_facts(l).unwrap().into_iter().cloned().collect())
                .unwrap_or_default();
            let ctx = KernelContext {
                outputs: &node.outputs,
                forward_inputs: &forward_inputs,
                step,
                seed: node_seed(7, node.layer.unwrap_or(id).0, step),
                hyper: ordo_exec::cpu::Hyper { lr, ..Default::default() },
                ..KernelContext::default()
            };
            let slots = state.entry(id.index()).or_insert_with(|| match &node.op {
                Op::Update(u) => init_state(u.optimizer, &g.param(node.params[0]).fact).unwrap(),
                _ => Vec::new(),
            });
            let outs = run(&node.op, &inputs, &ps, slots, &ctx)
                .unwrap_or_else(|e| panic!("node `{}`: {e}", node.name));
            assert_eq!(
                outs.iter().map(Tensor::fact).collect::<Vec<_>>(),
                node.outputs,
                "{}",
                node.name
            );
            if let Op::Update(_) = node.op {
                updated.push((node.params[0].index(), outs[0].clone()));
            }
            for (slot, t) in outs.into_iter().enumerate() {
                values.insert(OutletId::new(id, slot as u32), t);
            }
        }
        losses.push(values[&loss].as_f32().unwrap()[0]);
        for (p, t) in updated {
            params[p] = t;
        }
    }
    losses
}

fn falls(losses: &[f32]) {
    let (first, last) = (losses[0], *losses.last().unwrap());
    assert!(losses.iter().all(|l| l.is_finite()), "{losses:?}");
    assert!(last < 0.8 * first, "the loss does not fall: {losses:?}");
}

#[test]
fn a_small_cnn_learns_its_batch() {
    let mut b = GraphBuilder::new("cnn");
    let x = b.input("x", TensorFact::f32([2, 3, 6, 6])).unwrap();
    let labels = b.input("labels", TensorFact::new(ordo_ir::DType::I64, [2])).unwrap();
    let h = b.conv2d("conv", x, Conv2d::new(4, 3).padding(1)).unwrap();
    let h = b.batch_norm("bn", h).unwrap();
    let h = b.relu("relu", h).unwrap();
    let dw = b.conv2d("dw", h, Conv2d::new(4, 3).padding(1).groups(4).no_bias()).unwrap();
    let h = b.add("res", h, dw).unwrap();
    let p = b.max_pool("max", h, Pool2d::new(2, 2)).unwrap();
    let a = b.avg_pool("avg", h, Pool2d::new(3, 2).padding(1)).unwrap();
    let h = b.concat("cat", &[p, a], 1).unwrap();
    let h = b.global_avg_pool("gap", h).unwrap();
    let h = b.reshape("flat", h, &[2, 8]).unwrap();
    let h = b.dropout("drop", h, 0.1).unwrap();
    let h = b.linear("fc1", h, 6).unwrap();
    let h = b.layer_norm("ln", h, 1e-5).unwrap();
    let h = b.unary("act", UnaryOp::HardSwish, h).unwrap();
    let logits = b.linear("fc2", h, 5).unwrap();
    b.cross_entropy("loss", logits, labels).unwrap();
    let g = b.finish();
    let feeds = HashMap::from([
        ("x", Tensor::random(&TensorFact::f32([2, 3, 6, 6]), 1).unwrap()),
        ("labels", Tensor::from_i64(&[2], vec![1, 3]).unwrap()),
    ]);
    falls(&train(&g, &feeds, Optimizer::SgdMomentum, 0.1));
    falls(&train(&g, &feeds, Optimizer::Adam, 0.05));
}

#[test]
fn a_small_recurrent_attention_model_learns_its_batch() {
    let (t, batch, vocab) = (4, 2, 7);
    let mut b = GraphBuilder::new("seq");
    let ids = b.input("ids", TensorFact::new(ordo_ir::DType::I64, [t, batch])).unwrap();
    let labels = b.input("labels", TensorFact::new(ordo_ir::DType::I64, [batch, t])).unwrap();
    let e = b.embedding("emb", ids, vocab, 6).unwrap();
    let h = b.lstm("rnn", e, Lstm::bidirectional(4)).unwrap();
    let h = b.transpose("bt", h, &[1, 0, 2]).unwrap();
    let pos = b.parameter("pos", TensorFact::f32([t, 8])).unwrap();
    let h = b.add("with_pos", h, pos).unwrap();
    let kt = b.transpose("kt", h, &[0, 2, 1]).unwrap();
    let s = b.matmul("scores", h, kt).unwrap();
    let s = b.scale("scaled", s, 0.35).unwrap();
    let s = b.op("mask", Op::CausalMask, &[s]).unwrap();
    let s = b.softmax("probs", s, -1).unwrap();
    let ctx = b.matmul("ctx", s, h).unwrap();
    let gate = b.unary("gate", UnaryOp::Sigmoid, ctx).unwrap();
    let h = b.mul("gated", ctx, gate).unwrap();
    let h = b.slice("cut", h, -1, 0, 6).unwrap();
    let h = b.unary("tanh", UnaryOp::Tanh, h).unwrap();
    let logits = b.linear("out", h, vocab).unwrap();
    b.cross_entropy("loss", logits, labels).unwrap();
    let g = b.finish();
    let feeds = HashMap::from([
        ("ids", Tensor::random_ids(&[t, batch], vocab, 2).unwrap()),
        ("labels", Tensor::random_ids(&[batch, t], vocab, 3).unwrap()),
    ]);
    falls(&train(&g, &feeds, Optimizer::Adam, 0.05));
    falls(&train(&g, &feeds, Optimizer::Sgd, 0.5));
}
