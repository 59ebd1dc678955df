//! Mixed precision in the cost and memory models: 16-bit weights and activations halve the
//! bytes, matrix products run at the tensor cores' rate, and the optimizer keeps fp32 master
//! weights and states (ZeRO's 16 bytes per parameter with Adam).

use ordo::{Model, Optimizer, Precision, Problem, Size, StepMode, Target};

fn problem(model: &Model, precision: Precision) -> Problem {
    let model = model.in_precision(precision).unwrap();
    let target = Target::cluster(ordo::cluster("a100x8-nvlink").unwrap(), Some(1)).unwrap();
    Problem::new(&model, &target, StepMode::TrainingGraph).unwrap()
}

#[test]
fn adam_in_bf16_costs_sixteen_bytes_per_parameter_and_matrix_products_use_tensor_cores() {
    let model = Model::zoo("llama2_7b", Size::small()).unwrap().training(Optimizer::Adam, None);
    let model = model.unwrap();
    let graph = model.graph().unwrap();
    let trainable: u64 = graph.params.iter().filter(|p| p.trainable).map(|p| p.fact.numel()).sum();
    let buffers: u64 = graph.params.iter().filter(|p| !p.trainable).map(|p| p.fact.numel()).sum();
    let persistent = |p: &Problem| p.place.memory.iter().map(|m| m.persistent).sum::<u64>();

    // fp32: weights (4), Adam's two states (8); gradients are dW outputs, not resident.
    let fp32 = problem(&model, Precision::Fp32);
    assert_eq!(persistent(&fp32), 12 * trainable + 4 * buffers);
    // bf16: weights and buffers (2), fp32 master weights and states (12).
    let bf16 = problem(&model, Precision::Bf16);
    assert_eq!(persistent(&bf16), 14 * trainable + 2 * buffers);
    // With the bf16 gradients (2) that is ZeRO's 16 bytes per parameter.
    let dw_bytes: u64 = bf16
        .place
        .names
        .iter()
        .zip(&bf16.place.memory)
        .filter(|(name, _)| name.contains(".dw"))
        .map(|(_, m)| m.outputs)
        .sum();
    assert!(dw_bytes >= 2 * trainable, "{dw_bytes} bytes of gradients for {trainable}");

    // A large projection is compute-bound: 312 / 19.5 = 16x faster on the tensor cores; the
    // bandwidth-bound activation moves half the bytes.
    let size = Size { batch: Some(1), seq_len: Some(2048), ..Size::default() };
    let big = Model::load("llama:layers=1", size).unwrap();
    let forward = |precision| {
        let model = big.in_precision(precision).unwrap();
        let target = Target::cluster(ordo::cluster("a100x8-nvlink").unwrap(), Some(1)).unwrap();
        Problem::new(&model, &target, StepMode::ForwardOnly).unwrap()
    };
    let (fp32, bf16) = (forward(Precision::Fp32), forward(Precision::Bf16));
    let time = |p: &Problem, name: &str| {
        let v = p.place.names.iter().position(|n| n == name).unwrap();
        p.place.weights[v] as f64
    };
    let gate = "model.layers.0.mlp.gate_proj";
    let speedup = time(&fp32, gate) / time(&bf16, gate);
    assert!((15.0..16.5).contains(&speedup), "{gate}: {speedup}x");
    let act = "model.layers.0.mlp.act_fn";
    let speedup = time(&fp32, act) / time(&bf16, act);
    assert!((1.8..2.1).contains(&speedup), "{act}: {speedup}x");
}

#[test]
fn precisions_are_refused_where_they_cannot_hold() {
    let model = Model::zoo("gpt2_small", Size::small()).unwrap();
    let target = Target::uniform(1, u64::MAX).unwrap();
    let mode = StepMode::Training { optimizer: Optimizer::Adam };
    let err = Problem::new(&model.in_precision(Precision::Bf16).unwrap(), &target, mode);
    assert!(err.unwrap_err().to_string().contains("plan the training graph"));
    assert!("fp8".parse::<Precision>().unwrap_err().to_string().contains("fp32, bf16 or fp16"));
    let fp16 = model.in_precision(Precision::Fp16).unwrap();
    assert!(fp16.is_mixed_precision() && fp16.name().ends_with("(fp16)"));
}
