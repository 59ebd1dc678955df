//! The parallel planner: its pruned search finds what the exhaustive search of the same space
//! finds; its candidates are what simulating them alone gives; what does not fit is rejected,
//! named.

use ordo::{Model, Optimizer, ParallelSearch, PipelineSchedule, Size};

const SPEC: &str = "llama:layers=4,hidden=64,heads=4,intermediate=128,vocab=256";

fn model_at(micro: usize) -> ordo::Result<Model> {
    let size = Size { batch: Some(micro), seq_len: Some(16), ..Size::default() };
    Model::load(SPEC, size)?.training(Optimizer::Adam, None)
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
            assert_eq!(c.config.data * c.config.stages, gpus);
            assert_eq!(batch % (c.config.data * c.config.micro_batches), 0);
            assert!(c.mfu > 0.0 && c.mfu < 1.0, "{}: mfu {}", c.config, c.mfu);
            assert!((c.samples_per_s - batch as f64 / (c.step_time_us / 1e6)).abs() < 1e-6);
        }
        assert!(all.candidates.windows(2).all(|w| w[0].step_time_us <= w[1].step_time_us));
        // Four blocks (plus the embedding and head units) cannot fill eight stages.
        if gpus == 8 {
            let too_many = all.rejected.iter().find(|(c, _)| c.stages == 8).expect("8 stages");
            assert!(too_many.1.contains("units"), "{}", too_many.1);
        }
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
        ..ParallelSearch::new(8, 32)
    };
    let cluster = cluster(1);
    let plans = ordo::plan_parallel(&model_at, &cluster, &search, |_, _| {}).unwrap();
    let best = &plans.candidates[0];
    let config = best.config;
    let micro = 32 / (config.data * config.micro_batches);
    let target = ordo::Target::cluster(cluster.clone(), Some(config.stages)).unwrap();
    let problem =
        ordo::Problem::new(&model_at(micro).unwrap(), &target, ordo::StepMode::TrainingGraph)
            .unwrap();
    let network =
        ordo::stage_network(&problem, config.data, config.stages, None, search.all_reduce);
    let replicas =
        ordo::PipelineReplicas { replicas: config.data, network, bucket_bytes: 25 << 20 };
    let pipeline = ordo::Pipeline::new(config.stages, config.micro_batches, config.schedule);
    let (_, report) =
        ordo::simulate_replicated_pipeline(&problem, &pipeline, &replicas, &Default::default())
            .unwrap();
    assert_eq!(report.step_time_us, best.step_time_us);
    assert_eq!(report.peak_memory_bytes, best.peak_memory_bytes);
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
    assert!(plans.rejected.iter().all(|(_, why)| why.contains(stated) || why.contains("units")));
    assert_eq!(plans.simulated, 0);
    // 3 MiB holds the parameters of a few stages, but not every split's activations.
    let small = cluster(1).with_memory(3 << 20);
    let plans =
        ordo::plan_parallel(&model_at, &small, &ParallelSearch::new(8, 32), |_, _| {}).unwrap();
    assert!(plans.rejected.iter().any(|(_, why)| why.contains("at its peak, more than")));
    assert!(!plans.candidates.is_empty());
    for c in &plans.candidates {
        assert!(c.peak_memory_bytes.iter().all(|&peak| peak <= 3 << 20), "{}", c.config);
    }
    let message = |search: ParallelSearch| {
        ordo::plan_parallel(&model_at, &cluster(1), &search, |_, _| {}).unwrap_err().to_string()
    };
    assert!(message(ParallelSearch::new(0, 8)).contains("gpus must be at least 1"));
    assert!(message(ParallelSearch::new(9, 8)).contains("has 8 devices"));
    assert!(message(ParallelSearch::new(8, 0)).contains("batch"));
}
