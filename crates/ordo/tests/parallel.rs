//! The parallel planner: its pruned search finds what the exhaustive search of the same space
//! finds; its candidates (tensor-parallel or not) are what simulating them alone gives; what
//! does not fit is rejected, named; its export's process groups partition the GPUs.

use ordo::{Model, Optimizer, ParallelSearch, PipelineSchedule, Recompute, Size};

const SPEC: &str = "llama:layers=4,hidden=64,heads=4,intermediate=128,vocab=256";

fn model_at(micro: usize, tensor: usize) -> ordo::Result<Model> {
    let size = Size {
        batch: Some(micro),
        seq_len: Some(16),
        tensor_parallel: Some(tensor),
        ..Size::default()
    };
    Model::load(SPEC, size)?.training(Optimizer::Adam, None)
}

/// `config` simulated on its own on `problem` (one micro-batch of its pipeline on the cluster
/// its stages see), its copies reducing and its pipeline simulated as the planner's default
/// search does.
fn simulate_alone(problem: &ordo::Problem, config: &ordo::ParallelConfig) -> ordo::PipelineReport {
    let ParallelSearch { all_reduce, granularity, .. } = ParallelSearch::new(1, 1);
    let network = ordo::stage_network(problem, config.data, config.stages, None, all_reduce);
    let replicas =
        ordo::PipelineReplicas { replicas: config.data, network, bucket_bytes: 25 << 20 };
    let (_, report) = ordo::simulate_replicated_pipeline(
        problem,
        &config.pipeline().with_granularity(granularity),
        &replicas,
        &Default::default(),
    )
    .unwrap();
    report
}

/// One node of eight H100s and its network, as the shipped cluster has them.
fn cluster(nodes: usize) -> ordo::Cluster {
    ordo::with_nodes(ordo::cluster("h100x8-ib-ndr").unwrap(), nodes).unwrap()
}

#[test]
fn the_pruned_search_finds_the_exhaustive_searchs_best() {
    for (gpus, nodes, batch) in [(8, 1, 32), (16, 2, 64), (4, 1, 12)] {
        let search = ParallelSearch { max_micro_batches: 8, ..ParallelSearch::new(gpus, batch) };
        let cluster = cluster(nodes);
        let pruned = ordo::plan_parallel(&model_at, &cluster, &search, |_, _| {}).unwrap();
        let exhaustive = ParallelSearch { exhaustive: true, ..search.clone() };
        let all = ordo::plan_parallel(&model_at, &cluster, &exhaustive, |_, _| {}).unwrap();
        assert_eq!(all.pruned, 0);
        assert!(pruned.pruned > 0, "{gpus} GPUs: nothing pruned");
        assert!(pruned.simulated < all.simulated);
        let (best, truth) = (&pruned.candidates[0], &all.candidates[0]);
        assert_eq!(
            best.step_time_us, truth.step_time_us,
            "{gpus}: {} vs {}",
            best.config, truth.config
        );
        // Every candidate: dp x pp = GPUs, the batch split exactly, sorted, a sane MFU.
        for c in &all.candidates {
            assert_eq!(c.config.data * c.config.tensor * c.config.stages, gpus);
            assert_eq!(batch % (c.config.data * c.config.micro_batches), 0);
            assert!(c.mfu > 0.0 && c.mfu < 1.0, "{}: mfu {}", c.config, c.mfu);
            assert!((c.samples_per_s - batch as f64 / (c.step_time_us / 1e6)).abs() < 1e-6);
        }
        assert!(all.candidates.windows(2).all(|w| w[0].step_time_us <= w[1].step_time_us));
        // Four blocks (plus the embedding and head units) cannot fill eight stages.
        if gpus == 8 {
            let too_many = all.rejected.iter().find(|(c, _)| c.stages == 8).expect("8 stages");
            assert!(too_many.1.contains("units"), "{}", too_many.1);
            // Four heads do not split over eight tensor-parallel ranks.
            let eight = all.rejected.iter().find(|(c, _)| c.tensor == 8).expect("tp 8");
            assert!(eight.1.contains("do not divide heads 4"), "{}", eight.1);
        }
        // Tensor parallelism is searched: some candidate splits its stages two ways.
        assert!(all.candidates.iter().any(|c| c.config.tensor == 2), "{gpus}: no tp 2");
        if gpus == 4 {
            // 12 samples: 4 copies of 3, or 2 of 6; 3 copies do not divide 4 GPUs anyway.
            assert!(all.candidates.iter().all(|c| [1, 2, 4].contains(&c.config.data)));
        }
    }
}

#[test]
fn a_candidate_is_what_simulating_it_alone_gives() {
    let search = ParallelSearch {
        max_micro_batches: 4,
        schedules: vec![PipelineSchedule::OneFOneB, PipelineSchedule::ZbH1],
        exhaustive: true,
        ..ParallelSearch::new(8, 32)
    };
    let cluster = cluster(1);
    let plans = ordo::plan_parallel(&model_at, &cluster, &search, |_, _| {}).unwrap();
    // The best of each tensor-parallel degree, pipelined: one rank of each stage simulated on
    // the cluster seen by the groups, the copies reducing across groups P T GPUs apart.
    for tensor in [1, 2, 4] {
        let best = plans
            .candidates
            .iter()
            .find(|c| c.config.tensor == tensor && c.config.stages > 1)
            .unwrap_or_else(|| panic!("a pipelined candidate of tp {tensor}"));
        let config = best.config;
        let micro = 32 / (config.data * config.micro_batches);
        let groups = cluster.tensor_parallel_groups(tensor).unwrap();
        assert_eq!(groups.devices_per_node(), 8 / tensor);
        let target = ordo::Target::cluster(groups, Some(config.stages)).unwrap();
        let model = model_at(micro, tensor).unwrap();
        let problem = ordo::Problem::new(&model, &target, ordo::StepMode::TrainingGraph).unwrap();
        let report = simulate_alone(&problem, &config);
        assert_eq!(report.step_time_us, best.step_time_us, "{}", config);
        assert_eq!(report.peak_memory_bytes, best.peak_memory_bytes, "{}", config);
    }
}

#[test]
fn the_exported_process_groups_partition_the_gpus() {
    let cluster = cluster(2);
    for (data, tensor, stages) in [(2, 2, 4), (4, 1, 4), (2, 4, 2), (16, 1, 1)] {
        let config = ordo::ParallelConfig {
            data,
            tensor,
            stages,
            micro_batches: 4,
            schedule: PipelineSchedule::OneFOneB,
            interleaved: false,
        };
        let export = ordo::export_parallel(&model_at, &cluster, 64, &config).unwrap();
        assert_eq!(export.micro_batch_size, 64 / (data * 4));
        let families = [
            ("tensor", &export.tensor_groups, data * stages, tensor),
            ("pipeline", &export.pipeline_groups, data * tensor, stages),
            ("data", &export.data_groups, stages * tensor, data),
        ];
        for (what, groups, count, size) in families {
            assert_eq!(groups.len(), count, "{what} groups of {config}");
            assert!(groups.iter().all(|g| g.len() == size), "{what} groups of {config}");
            let mut ranks: Vec<usize> = groups.iter().flatten().copied().collect();
            ranks.sort_unstable();
            assert_eq!(ranks, (0..16).collect::<Vec<_>>(), "{what} groups of {config}");
        }
        // A tensor-parallel group is consecutive GPUs of one node; a pipeline's stages are
        // T GPUs apart; a stage's copies P T apart.
        for group in &export.tensor_groups {
            assert!(group.windows(2).all(|w| w[1] == w[0] + 1));
            assert_eq!(group[0] / 8, group[tensor - 1] / 8);
        }
        for group in &export.pipeline_groups {
            assert!(group.windows(2).all(|w| w[1] == w[0] + tensor));
        }
        for group in &export.data_groups {
            assert!(group.windows(2).all(|w| w[1] == w[0] + tensor * stages));
        }
    }
}

#[test]
fn what_does_not_fit_is_rejected_and_bad_requests_refused() {
    // 64 KiB per GPU holds nothing: not even the parameters, whatever the split (no
    // simulation needed to tell).
    let tiny = cluster(1).with_memory(64 << 10);
    let plans =
        ordo::plan_parallel(&model_at, &tiny, &ParallelSearch::new(8, 32), |_, _| {}).unwrap();
    assert!(plans.candidates.is_empty());
    let stated = "the parameters, gradients and optimizer state need";
    let named = |why: &str| {
        why.contains(stated) || why.contains("units") || why.contains("do not divide heads")
    };
    assert!(plans.rejected.iter().all(|(_, why)| named(why)));
    assert_eq!(plans.simulated, 0);
    // 2 MiB holds the parameters of a few stages, but not every split's activations, even
    // recomputed.
    let limit = 2 << 20;
    let small = cluster(1).with_memory(limit);
    let plans =
        ordo::plan_parallel(&model_at, &small, &ParallelSearch::new(8, 32), |_, _| {}).unwrap();
    assert!(plans.rejected.iter().any(|(_, why)| why.contains("at its peak, more than")));
    assert!(!plans.candidates.is_empty());
    for c in &plans.candidates {
        assert!(c.peak_memory_bytes.iter().all(|&peak| peak <= limit), "{}", c.config);
    }
    let message = |search: ParallelSearch| {
        ordo::plan_parallel(&model_at, &cluster(1), &search, |_, _| {}).unwrap_err().to_string()
    };
    assert!(message(ParallelSearch::new(0, 8)).contains("gpus must be at least 1"));
    assert!(message(ParallelSearch::new(9, 8)).contains("has 8 devices"));
    assert!(message(ParallelSearch::new(8, 0)).contains("batch"));
    let no_ranks = ParallelSearch { max_tensor_parallel: 0, ..ParallelSearch::new(8, 8) };
    assert!(message(no_ranks).contains("tensor_parallel must be at least 1"));
}

#[test]
fn sharding_the_optimizer_state_lowers_each_stage_by_the_share_it_no_longer_holds() {
    // Find a memory where some split fits only with its optimizer state sharded.
    let whole = ParallelSearch {
        max_micro_batches: 2,
        max_tensor_parallel: 1,
        recompute: vec![Recompute::None],
        schedules: vec![PipelineSchedule::OneFOneB],
        interleaved: false,
        exhaustive: true,
        ..ParallelSearch::new(8, 32)
    };
    let roomy = ordo::plan_parallel(&model_at, &cluster(1), &whole, |_, _| {}).unwrap();
    assert!(roomy.candidates.iter().all(|c| !c.sharded_optimizer), "sharded with room to spare");
    let c = roomy.candidates.iter().find(|c| c.config.data > 1).unwrap();
    let peak = *c.peak_memory_bytes.iter().max().unwrap();
    // The same configuration simulated with each update's state cut to 1 / D: the independent
    // way to the sharded peak.
    let config = c.config;
    let micro = 32 / (config.data * config.micro_batches);
    let target = ordo::Target::cluster(cluster(1), Some(config.stages)).unwrap();
    let model = model_at(micro, 1).unwrap();
    let mut problem = ordo::Problem::new(&model, &target, ordo::StepMode::TrainingGraph).unwrap();
    let p = &mut problem.place;
    for v in 0..p.len() {
        if p.roles[v] == ordo_ir::Role::Update {
            p.memory[v].persistent = p.memory[v].persistent.div_ceil(config.data as u64);
        }
    }
    let cut = simulate_alone(&problem, &config);
    let sharded_peak = *cut.peak_memory_bytes.iter().max().unwrap();
    assert!(sharded_peak < peak);
    // Between the two: it fits only sharded.
    let limit = (sharded_peak + peak) / 2;
    let tight = cluster(1).with_memory(limit);
    let plans = ordo::plan_parallel(&model_at, &tight, &whole, |_, _| {}).unwrap();
    let same = plans.candidates.iter().find(|s| s.config == config).expect("fits sharded");
    assert!(same.sharded_optimizer);
    assert_eq!(same.peak_memory_bytes, cut.peak_memory_bytes);
    assert_eq!(same.step_time_us, c.step_time_us);
    let off = ParallelSearch { shard_optimizer: false, ..whole };
    let plans = ordo::plan_parallel(&model_at, &tight, &off, |_, _| {}).unwrap();
    let (_, why) = plans.rejected.iter().find(|(r, _)| *r == config).expect("rejected unsharded");
    assert!(why.contains("at its peak, more than"), "{why}");
}

#[test]
fn a_configuration_too_big_recomputes_the_least_that_fits() {
    let search = ParallelSearch {
        max_micro_batches: 1,
        max_tensor_parallel: 1,
        shard_optimizer: false,
        schedules: vec![PipelineSchedule::OneFOneB],
        interleaved: false,
        exhaustive: true,
        recompute: vec![Recompute::None],
        ..ParallelSearch::new(2, 8)
    };
    let roomy = ordo::plan_parallel(&model_at, &cluster(1), &search, |_, _| {}).unwrap();
    let kept = roomy.candidates.iter().find(|c| c.config.stages == 2).unwrap();
    let config = kept.config;
    // The same pipeline with full recomputation, simulated on its own.
    let target = ordo::Target::cluster(cluster(1), Some(2)).unwrap();
    let model = model_at(8, 1).unwrap().with_recompute(Recompute::Full).unwrap();
    let problem = ordo::Problem::new(&model, &target, ordo::StepMode::TrainingGraph).unwrap();
    let full = simulate_alone(&problem, &config);
    let (kept_peak, full_peak) = (
        *kept.peak_memory_bytes.iter().max().unwrap(),
        *full.peak_memory_bytes.iter().max().unwrap(),
    );
    assert!(full_peak < kept_peak && full.step_time_us > kept.step_time_us);
    // A memory between the two: the pipeline fits only recomputing.
    let tight = cluster(1).with_memory((full_peak + kept_peak) / 2);
    let only_none = ordo::plan_parallel(&model_at, &tight, &search, |_, _| {}).unwrap();
    assert!(only_none.candidates.iter().all(|c| c.config != config));
    let full_only = ParallelSearch { recompute: vec![Recompute::None, Recompute::Full], ..search };
    let plans = ordo::plan_parallel(&model_at, &tight, &full_only, |_, _| {}).unwrap();
    let found = plans.candidates.iter().find(|c| c.config == config).expect("fits recomputing");
    assert_eq!(found.recompute, Recompute::Full);
    assert_eq!(found.step_time_us, full.step_time_us);
    assert_eq!(found.peak_memory_bytes, full.peak_memory_bytes);
    // MFU counts the model's FLOPs: the recomputed step does the same useful work, slower.
    assert!(found.mfu < kept.mfu);
    let ratio = found.mfu / kept.mfu;
    assert!((ratio - kept.step_time_us / found.step_time_us).abs() < 1e-9, "{ratio}");
    let none = ParallelSearch { recompute: Vec::new(), ..ParallelSearch::new(2, 8) };
    let error = ordo::plan_parallel(&model_at, &tight, &none, |_, _| {}).unwrap_err();
    assert!(error.to_string().contains("recompute"), "{error}");
    assert!(
        ordo::recompute_choices("sometimes")
            .unwrap_err()
            .to_string()
            .contains("recompute=sometimes")
    );
    assert_eq!(ordo::recompute_choices("auto").unwrap(), Recompute::ALL.to_vec());
}
