//! Tensor parallelism: one rank's graph holds its share of the split layers (the ranks' shares
//! and the replicated rest add up to the whole model), its collectives are where Megatron-LM
//! puts them under sequence parallelism and cost what the cluster's all-gather or
//! reduce-scatter over their group costs, the slices of the sequence hold less than the whole,
//! and what cannot be split is refused, named.

use ordo_ir::op::{TensorParallel, TensorParallelKind, TensorParallelPass};
use ordo_ir::{Graph, Op, Role};
use ordo_models::{ModelConfig, TransformerConfig};

const CONFIG: ModelConfig = ModelConfig { batch: 2, seq_len: 8 };

fn trainable_params(graph: &Graph) -> u64 {
    graph.params.iter().filter(|p| p.trainable).map(|p| p.fact.numel()).sum()
}

/// Forward collectives of `kind`.
fn collectives(graph: &Graph, kind: TensorParallelKind) -> usize {
    let is = |op: &Op| matches!(op, Op::TensorParallel(t) if t.kind == kind);
    graph.nodes.iter().filter(|n| is(&n.op)).count()
}

/// The parameters every rank holds whole: the norms (and GPT's position table and the biases
/// of its row-parallel products).
fn replicated(config: &TransformerConfig) -> u64 {
    let (h, layers) = (config.hidden as u64, config.layers as u64);
    match config.family {
        ordo_models::Family::Llama => layers * 2 * h + h,
        _ => layers * (4 * h + 2 * h) + 2 * h + config.max_positions as u64 * h,
    }
}

#[test]
fn the_ranks_shares_and_the_replicated_parameters_make_the_whole_model() {
    let llama = TransformerConfig::llama2(7).unwrap().small();
    let gpt = TransformerConfig::gpt3_175b().small();
    for config in [llama, gpt] {
        let whole = config.build(&CONFIG).unwrap();
        assert_eq!(trainable_params(&whole), config.params(), "{}", config.name);
        assert_eq!(config.with_tensor_parallel(1).unwrap().build(&CONFIG).unwrap(), whole);
        assert_eq!(collectives(&whole, TensorParallelKind::ScatterSequence), 0);
        assert_eq!(collectives(&whole, TensorParallelKind::GatherSequence), 0);
        for ranks in [2, 4] {
            let split = config.with_tensor_parallel(ranks).unwrap();
            let rank = split.build(&CONFIG).unwrap();
            let shared = replicated(&config);
            let share = trainable_params(&rank) - shared;
            assert_eq!(
                share * ranks as u64 + shared,
                config.params(),
                "{} on {ranks} ranks",
                config.name
            );
            // Megatron's g after the embedding and each block's two row-parallel products;
            // its f before each block's two column-parallel halves and the LM head; both in
            // their sequence-parallel form.
            let expected = 2 * config.layers + 1;
            assert_eq!(collectives(&rank, TensorParallelKind::ScatterSequence), expected);
            assert_eq!(collectives(&rank, TensorParallelKind::GatherSequence), expected);
            // The residual stream holds a slice of the sequence: the norms read 8 / ranks
            // positions.
            let norm = rank
                .nodes
                .iter()
                .find(|n| n.name.ends_with("ln_1") || n.name.ends_with("input_layernorm.square"))
                .unwrap();
            let x = rank.fact(norm.inputs[0]).unwrap();
            assert_eq!(x.shape[1], 8 / ranks, "{}", norm.name);
            let training =
                ordo_ir::training::training_graph(&rank, rank.outputs[0], Default::default())
                    .unwrap();
            let summed_backward = training.nodes.iter().filter(|n| {
                n.role == Role::Dx
                    && matches!(&n.op, Op::Grad(g) if matches!(*g.of,
                        Op::TensorParallel(TensorParallel { kind: TensorParallelKind::GatherSequence, .. })))
            });
            assert_eq!(summed_backward.count(), expected, "{} on {ranks} ranks", config.name);
        }
    }
}

#[test]
fn a_collective_costs_its_pass_over_the_node() {
    let cluster = ordo::cluster("h100x8-ib-ndr").unwrap();
    let split = TransformerConfig::llama2(7).unwrap().small().with_tensor_parallel(4).unwrap();
    let rank = split.build(&CONFIG).unwrap();
    let training =
        ordo_ir::training::training_graph(&rank, rank.outputs[0], Default::default()).unwrap();
    let costed = ordo_cost::costgraph_for_cluster(&training, &cluster);
    let node_links = cluster.collectives(8, 1);
    let mut passes = std::collections::BTreeMap::new();
    for (node, cost) in training.nodes.iter().zip(&costed.nodes) {
        let pass = match &node.op {
            Op::TensorParallel(t) => t.forward(),
            Op::Grad(g) => match *g.of {
                Op::TensorParallel(t) => t.backward(),
                _ => continue,
            },
            _ => continue,
        };
        // The whole [batch, seq, hidden] activation (or its gradient) of fp32 goes out of a
        // gather and into a scatter; a rank's slice is a quarter of it.
        let whole = (2 * 8 * split.hidden * 4) as u64;
        let out: u64 = node.outputs.iter().map(|f| f.bytes()).sum();
        let expected = match pass {
            TensorParallelPass::AllGather => {
                assert_eq!(out, whole, "{}", node.name);
                node_links.all_gather_us(4, whole)
            }
            TensorParallelPass::ReduceScatter => {
                assert_eq!(out, whole / 4, "{}", node.name);
                node_links.reduce_scatter_us(4, whole)
            }
        };
        assert_eq!(cost.weight, expected.max(1), "{}", node.name);
        *passes.entry(format!("{pass:?}")).or_insert(0) += 1;
    }
    // Forward and backward, gathers and scatters alike.
    let each = 2 * (2 * split.layers + 1);
    assert_eq!(passes.get("AllGather"), Some(&each));
    assert_eq!(passes.get("ReduceScatter"), Some(&each));
    // The cluster the groups see (one device of each group per node) costs every node alike:
    // its collectives still run over the node's links, not the network.
    let eight = TransformerConfig::from_fields("llama:layers=2,hidden=64,heads=8,intermediate=128")
        .unwrap()
        .unwrap()
        .with_tensor_parallel(8)
        .unwrap()
        .build(&CONFIG)
        .unwrap();
    let training =
        ordo_ir::training::training_graph(&eight, eight.outputs[0], Default::default()).unwrap();
    let weights = |c: &ordo_cost::CostGraph| c.nodes.iter().map(|n| n.weight).collect::<Vec<_>>();
    let whole = weights(&ordo_cost::costgraph_for_cluster(&training, &cluster));
    for (ranks, nodes) in [(8, 1), (8, 2), (4, 2)] {
        let cluster = ordo::with_nodes(cluster.clone(), nodes).unwrap();
        let groups = cluster.tensor_parallel_groups(ranks).unwrap();
        assert_eq!(groups.devices_per_node(), 8 / ranks);
        let seen = ordo_cost::costgraph_for_cluster(&training, &groups);
        assert_eq!(weights(&seen), whole, "{ranks} ranks, {nodes} nodes");
    }
}

#[test]
fn what_does_not_split_is_refused_named() {
    let llama = TransformerConfig::llama2(70).unwrap().small();
    let message =
        |config: &TransformerConfig, ranks| config.with_tensor_parallel(ranks).unwrap_err();
    assert!(message(&llama, 3).contains("3 tensor-parallel ranks do not divide heads 4"));
    // LLaMA-2 70B's small variant keeps one key/value head for its four query heads.
    assert!(message(&llama, 2).contains("do not divide kv_heads 1"));
    assert!(message(&llama, 0).contains("at least 1 rank"));
    assert!(message(&TransformerConfig::bert_base(), 2).contains("not BERT"));
    let size = |ranks| ordo::Size { tensor_parallel: Some(ranks), ..ordo::Size::small() };
    for (model, ranks, expected) in [
        ("resnet50", 2, "tensor_parallel=2: `resnet50` is not a transformer ordo splits"),
        ("llama2_7b", 3, "tensor_parallel=3: llama2_7b-small: 3 tensor-parallel ranks"),
        ("llama:layers=2,hidden=64,heads=4", 8, "8 tensor-parallel ranks do not divide heads 4"),
    ] {
        let error = ordo::Model::load(model, size(ranks)).unwrap_err().to_string();
        assert!(error.contains(expected), "{model}: {error}");
    }
    // A rank's graph plans; it does not run on a CPU, and says why.
    let model = ordo::Model::load("llama2_7b", size(2)).unwrap();
    let trained = model.training(ordo::Optimizer::Adam, None).unwrap();
    let target = ordo::Target::uniform(1, u64::MAX).unwrap();
    let problem = ordo::Problem::new(&trained, &target, ordo::StepMode::TrainingGraph).unwrap();
    let planned =
        ordo::plan(&problem, &ordo::Strategy::OneDevice(ordo::OneDeviceSchedule::InOrder)).unwrap();
    let error = ordo::Runner::new(&problem, &planned, Default::default())
        .err()
        .expect("no kernel")
        .to_string();
    assert!(error.contains("tensor-parallel"), "{error}");
}
