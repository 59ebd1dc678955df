//! The published runs: the shipped data reads, its FLOP count agrees with the training graph's
//! own, and a prediction is the simulation of the run's configuration.

#[test]
fn the_published_runs_read_and_their_flops_are_the_graphs() {
    let tables = ordo::published_tables().unwrap();
    let table = tables.iter().find(|t| t.name == "megatron-selective").unwrap();
    assert_eq!(table.rows.len(), 4);
    for run in &table.rows {
        assert_eq!(run.global_batch % (run.micro_batch * run.data), 0, "{}", run.model);
        assert!(run.published_mfu > 0.0 && run.published_mfu < 1.0);
        assert!(table.source.contains(&format!("{} {:.1}%", run.model, run.published_mfu * 100.0)));
    }
    // Megatron-LM's count of a step's FLOPs against the training graph's, for the 22B model
    // (one tensor rank of eight, at one micro-batch of four sequences): the graph counts the
    // elementwise work too, and its attention matrices' products per head.
    let run = &table.rows[0];
    let config = ordo::TransformerConfig::from_fields(&format!(
        "gpt2:layers={},hidden={},heads={},vocab={},positions={}",
        run.layers, run.hidden, run.heads, run.vocab, run.seq
    ))
    .unwrap()
    .unwrap();
    let size = ordo::Size {
        batch: Some(run.micro_batch),
        seq_len: Some(run.seq),
        tensor_parallel: Some(run.tensor),
        ..Default::default()
    };
    let model = ordo::Model::transformer(&config, size)
        .unwrap()
        .training(ordo::Optimizer::Adam, None)
        .unwrap();
    let graph_flops = ordo::graph_stats(model.graph().unwrap()).flops as f64 * run.tensor as f64;
    let steps = run.micro_batches() as f64;
    let ratio = graph_flops * steps / run.model_flops();
    assert!((1.0..1.02).contains(&ratio), "graph / Megatron-LM FLOPs: {ratio}");
}

#[test]
fn a_prediction_is_the_simulated_step_of_the_run() {
    let tables = ordo::published_tables().unwrap();
    let table = &tables[0];
    let run = &table.rows[0];
    let predicted = ordo::predict_published(table, run).unwrap();
    let published = run.published_step_us(table.peak_flops);
    assert!((predicted.error - (predicted.step_time_us / published - 1.0)).abs() < 1e-12);
    let mfu = run.model_flops() / (predicted.step_time_us / 1e6 * 8.0 * table.peak_flops);
    assert!((predicted.mfu - mfu).abs() < 1e-12);
    // Within the bound on any row; the roofline's matrix products at the tensor
    // cores' peak make it optimistic.
    assert!(predicted.error.abs() < 0.25, "error {}", predicted.error);
}
