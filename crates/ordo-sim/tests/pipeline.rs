//! Pipeline-parallel schedules: plans that keep every dependency, a hand-worked case, memory,
//! errors, and (ignored, `--nocapture`) the BERT-base measurements.

use ordo_cost::{Cluster, CommModel, CostGraph, CostLink, CostNode, StepMode, TensorRef};
use ordo_ir::op::Optimizer;
use ordo_ir::{DType, Graph, GraphBuilder, OutletId, Role, TensorFact};
use ordo_place::{Devices, PlaceProblem};
use ordo_sched::{Pipeline, PipelinePlan, PipelineSchedule, pipeline_plan, validate};
use ordo_sim::{PipelineReport, Report, SimOptions, pipeline_report};
use proptest::prelude::*;

/// Plans `pipeline` for `problem` and simulates one step; the planner's or the simulator's
/// error as text.
fn simulate_pipeline(
    problem: &PlaceProblem,
    pipeline: &Pipeline,
    options: &SimOptions,
) -> Result<PipelineReport, String> {
    let planned = pipeline_plan(problem, pipeline).map_err(|e| e.to_string())?;
    pipeline_report(&planned, options).map_err(|e| e.to_string())
}

const CONCURRENT: SimOptions =
    SimOptions { concurrent_kernels: true, channel: ordo_sim::Channel::BaechiTf };

/// The training-graph problem of `forward` (Adam) costed for `cluster`, on `devices`.
fn training_problem(forward: &Graph, cluster: &Cluster, devices: Devices) -> PlaceProblem {
    let loss = OutletId::new(forward.find("loss").unwrap().id, 0);
    let graph = ordo_ir::training::training_graph(forward, loss, Optimizer::Adam).unwrap();
    let costed = ordo_cost::costgraph_for_cluster(&graph, cluster);
    PlaceProblem::new(&costed, devices, StepMode::TrainingGraph).unwrap()
}

/// Zoo BERT-base at `batch` (one micro-batch) on `cluster`'s devices, its links replaced by
/// `comm` when given.
fn bert(batch: usize, cluster: &str, comm: Option<CommModel>) -> PlaceProblem {
    let cluster = Cluster::builtin(cluster).unwrap();
    let forward = ordo_models::build("bert_base", Some(batch), None).unwrap();
    let devices = Devices {
        memory: cluster.memory_limits(),
        comm: comm.unwrap_or_else(|| cluster.comm(0, 1)),
    };
    training_problem(&forward, &cluster, devices)
}

/// An MLP of numbered blocks: `embed`, then per pick a block `block.{i}` (a linear layer, a
/// ReLU if `relu`, and a residual from an earlier block's output if `skip` is `Some`), then
/// `head` and the loss.
fn random_model(picks: &[(bool, Option<usize>)]) -> Graph {
    let mut b = GraphBuilder::new("random");
    let x = b.input("x", TensorFact::f32([4, 8])).unwrap();
    let mut h = b.linear("embed", x, 8).unwrap();
    let mut outs = vec![h];
    for (i, &(relu, skip)) in picks.iter().enumerate() {
        h = b.linear(&format!("block.{i}.fc"), h, 8).unwrap();
        if relu {
            h = b.relu(&format!("block.{i}.relu"), h).unwrap();
        }
        if let Some(k) = skip {
            h = b.add(&format!("block.{i}.residual"), h, outs[k % outs.len()]).unwrap();
        }
        outs.push(h);
    }
    let logits = b.linear("head", h, 3).unwrap();
    let labels = b.input("labels", TensorFact::new(DType::I64, [4])).unwrap();
    let loss = b.cross_entropy("loss", logits, labels).unwrap();
    b.output(loss);
    b.finish()
}

fn random_problem(picks: &[(bool, Option<usize>)], devices: usize) -> PlaceProblem {
    let cluster = Cluster::builtin("a100x4-nvlink").unwrap();
    let comm = CommModel { us_per_byte: 0.01, fixed_us: 3.0 };
    training_problem(
        &random_model(picks),
        &cluster,
        Devices { memory: vec![u64::MAX / 4; devices], comm },
    )
}

/// Panics unless every edge's target starts after its source finishes in `report`.
fn assert_dependencies_kept(label: &str, planned: &PipelinePlan, report: &Report) {
    let problem = &planned.split.problem;
    for e in &problem.edges {
        let (source, target) = (&report.tasks[e.source], &report.tasks[e.target]);
        assert_eq!(source.name, problem.names[e.source]);
        assert!(
            target.start_us >= source.finish_us - 1e-6,
            "{label}: {} starts at {} before {} ends at {}",
            target.name,
            target.start_us,
            source.name,
            source.finish_us
        );
    }
}

/// Plans and simulates `pipeline` (dW on the sub-stream with concurrent kernels too), checks
/// the plan and every dependency; returns the main-stream report.
fn check(label: &str, problem: &PlaceProblem, pipeline: Pipeline) -> Report {
    let mut main = None;
    for pipeline in [pipeline, pipeline.with_dw_on_sub_stream()] {
        let label = format!("{label} {pipeline:?}");
        let planned = pipeline_plan(problem, &pipeline).unwrap_or_else(|e| panic!("{label}: {e}"));
        validate(&planned.plan).unwrap();
        let options = if pipeline.dw_on_sub_stream { CONCURRENT } else { SimOptions::default() };
        let report = pipeline_report(&planned, &options).unwrap_or_else(|e| panic!("{label}: {e}"));
        assert_dependencies_kept(&label, &planned, &report.report);
        let copies = planned.split.provenance.micro_batch.iter().filter(|m| m.is_some()).count();
        let once = planned.split.problem.len() - copies;
        assert_eq!(copies + once * pipeline.micro_batches, problem.len() * pipeline.micro_batches);
        main.get_or_insert(report.report);
    }
    main.unwrap()
}

fn allocations() -> [Option<usize>; 3] {
    [None, Some(1), Some(2)]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(16))]

    #[test]
    fn every_schedule_keeps_every_dependency_of_random_training_graphs(
        picks in prop::collection::vec((any::<bool>(), prop::option::of(0usize..8)), 2..7),
        stages in 1usize..4,
        micro_batches in 1usize..5,
    ) {
        let problem = random_problem(&picks, 4);
        for schedule in PipelineSchedule::ALL {
            for modulo in allocations() {
                let mut pipeline = Pipeline::new(stages, micro_batches, schedule);
                pipeline.modulo = modulo;
                let units = picks.len();
                let fits = stages <= units
                    && modulo.is_none_or(|m| units.div_ceil(m) >= stages);
                if fits {
                    check("random", &problem, pipeline);
                } else {
                    prop_assert!(pipeline_plan(&problem, &pipeline).is_err());
                }
            }
        }
    }
}

#[test]
fn bert_units_are_its_encoder_layers_and_every_schedule_keeps_its_dependencies() {
    let problem = bert(2, "a100x8-nvlink", None);
    let units = ordo_sched::pipeline_units(&problem);
    let expected: Vec<String> = (0..12).map(|i| format!("encoder.layer.{i}")).collect();
    assert_eq!(units.names, expected);
    let unit = |name: &str| units.unit_of[problem.names.iter().position(|n| n == name).unwrap()];
    assert_eq!(unit("embeddings.word_embeddings"), 0);
    assert_eq!(unit("pooler.dense"), 11);
    assert_eq!(unit("loss"), 11);
    assert_eq!(unit("encoder.layer.5.output.dense.dw"), 5);
    for schedule in PipelineSchedule::ALL {
        for modulo in allocations() {
            let mut pipeline = Pipeline::new(4, 3, schedule);
            pipeline.modulo = modulo;
            check("bert", &problem, pipeline);
        }
    }
}

/// Two blocks of unit costs: forward `f`, dX, dW and the update take 1 µs each, nothing to
/// send (all transfers are free).
fn two_blocks() -> PlaceProblem {
    let free = CommModel { us_per_byte: 0.0, fixed_us: 0.0 };
    let mut g = CostGraph::default();
    let nodes = [
        ("block.0.f", Role::Forward, None),
        ("block.1.f", Role::Forward, None),
        ("block.1.f.dx", Role::Dx, Some(1)),
        ("block.1.f.dw", Role::Dw, Some(1)),
        ("block.0.f.dx", Role::Dx, Some(0)),
        ("block.0.f.dw", Role::Dw, Some(0)),
        ("block.0.w.update", Role::Update, Some(0)),
        ("block.1.w.update", Role::Update, Some(1)),
    ];
    for (i, &(name, role, layer)) in nodes.iter().enumerate() {
        let mut node = CostNode::new(i as u64, name, 1);
        node.role = role;
        node.layer = layer;
        node.output_memory = vec![100];
        g.nodes.push(node);
    }
    for (s, t) in [(0, 1), (1, 2), (1, 3), (0, 3), (2, 4), (2, 5), (0, 5), (5, 6), (3, 7)] {
        let tensor = TensorRef::new(format!("{}:0", nodes[s].0), 100, &free);
        g.links.push(CostLink::new(s as u64, t as u64, vec![tensor]));
    }
    let devices = Devices { memory: vec![u64::MAX / 4; 2], comm: free };
    PlaceProblem::new(&g, devices, StepMode::TrainingGraph).unwrap()
}

#[test]
fn two_stages_two_micro_batches_by_hand() {
    let problem = two_blocks();
    let order = |planned: &PipelinePlan, device: usize| -> Vec<String> {
        let names = &planned.split.problem.names;
        planned.placement.order[device].iter().map(|&v| names[v].clone()).collect()
    };
    // GPipe. Stage 0: f0 f1 (0-2). Stage 1: f0 (1-2), f1 (2-3), then (all forwards done)
    // backward 0 (dX 3-4, dW 4-5), backward 1 (dX 5-6, dW 6-7), update 7-8. Stage 0:
    // backward 0 (4-6, after stage 1's dX 0), backward 1 (6-8), update 8-9.
    let gpipe = Pipeline::new(2, 2, PipelineSchedule::Gpipe);
    let planned = pipeline_plan(&problem, &gpipe).unwrap();
    assert_eq!(
        order(&planned, 1),
        [
            "block.1.f/mb0",
            "block.1.f/mb1",
            "block.1.f.dx/mb0",
            "block.1.f.dw/mb0",
            "block.1.f.dx/mb1",
            "block.1.f.dw/mb1",
            "block.1.w.update"
        ]
    );
    let report = pipeline_report(&planned, &SimOptions::default()).unwrap();
    assert_eq!(report.step_time_us, 9.0);
    // 1F1B. Stage 1 (one micro-batch in flight): f0 1-2, backward 0 2-4, f1 4-5, backward 1
    // 5-7, update 7-8. Stage 0 (two in flight): f0 f1 0-2, backward 0 3-5 (after dX 0 at 3),
    // backward 1 6-8 (dX 1 at 6), update 8-9. The same makespan as GPipe, as theory says
    // (the same bubble), with less memory in flight on stage 1.
    let one_f_one_b = Pipeline::new(2, 2, PipelineSchedule::OneFOneB);
    let planned = pipeline_plan(&problem, &one_f_one_b).unwrap();
    assert_eq!(
        order(&planned, 1),
        [
            "block.1.f/mb0",
            "block.1.f.dx/mb0",
            "block.1.f.dw/mb0",
            "block.1.f/mb1",
            "block.1.f.dx/mb1",
            "block.1.f.dw/mb1",
            "block.1.w.update"
        ]
    );
    let report = pipeline_report(&planned, &SimOptions::default()).unwrap();
    assert_eq!(report.step_time_us, 9.0);
    // Fast-forward. Stage 1: f0 1-2, dX 0 2-3, f1 3-4 (dW 0 lags), dX 1 4-5, dW 0 5-6, dW 1
    // 6-7, update 7-8. Stage 0: dX 0 3-4, dW 0 4-5, dX 1 5-6, dW 1 6-7, update 7-8.
    let fast_forward = Pipeline::new(2, 2, PipelineSchedule::FastForward);
    let planned = pipeline_plan(&problem, &fast_forward).unwrap();
    assert_eq!(
        order(&planned, 1),
        [
            "block.1.f/mb0",
            "block.1.f.dx/mb0",
            "block.1.f/mb1",
            "block.1.f.dx/mb1",
            "block.1.f.dw/mb0",
            "block.1.f.dw/mb1",
            "block.1.w.update"
        ]
    );
    let report = pipeline_report(&planned, &SimOptions::default()).unwrap();
    assert_eq!(report.step_time_us, 8.0);
}

/// A chain of `n` blocks of unit costs (forward, dX, dW, update 1 µs each), nothing to send:
/// block `b`'s forward reads block `b - 1`'s output, its dX the next block's dX, its dW the
/// next block's dX and its own input.
fn unit_chain(n: usize, devices: usize) -> PlaceProblem {
    let free = CommModel { us_per_byte: 0.0, fixed_us: 0.0 };
    let mut g = CostGraph::default();
    let add = |g: &mut CostGraph, name: String, role: Role, layer: Option<u64>| {
        let id = g.nodes.len() as u64;
        let mut node = CostNode::new(id, &name, 1);
        node.role = role;
        node.layer = layer;
        node.output_memory = vec![100];
        g.nodes.push(node);
        id
    };
    let forward: Vec<u64> =
        (0..n).map(|b| add(&mut g, format!("block.{b}.f"), Role::Forward, None)).collect();
    let mut dx = vec![0; n];
    let mut dw = vec![0; n];
    for b in (0..n).rev() {
        dx[b] = add(&mut g, format!("block.{b}.f.dx"), Role::Dx, Some(forward[b]));
        dw[b] = add(&mut g, format!("block.{b}.f.dw"), Role::Dw, Some(forward[b]));
    }
    let updates: Vec<u64> = (0..n)
        .map(|b| add(&mut g, format!("block.{b}.w.update"), Role::Update, Some(forward[b])))
        .collect();
    let link = |g: &mut CostGraph, s: u64, t: u64| {
        let tensor = TensorRef::new(format!("{}:0", g.nodes[s as usize].name), 100, &free);
        g.links.push(CostLink::new(s, t, vec![tensor]));
    };
    for b in 0..n {
        if b > 0 {
            link(&mut g, forward[b - 1], forward[b]);
            link(&mut g, forward[b - 1], dw[b]);
        }
        let upstream = if b + 1 < n { dx[b + 1] } else { forward[b] };
        link(&mut g, upstream, dx[b]);
        link(&mut g, upstream, dw[b]);
        link(&mut g, dw[b], updates[b]);
    }
    let devices = Devices { memory: vec![u64::MAX / 4; devices], comm: free };
    PlaceProblem::new(&g, devices, StepMode::TrainingGraph).unwrap()
}

/// Zero Bubble (Qi et al., ICLR 2024) at `T_F = T_B = T_W = 1` on `p` stages and `m`
/// micro-batches. No schedule beats `3m + (p - 1) + 1`: the last stage gets its first input
/// after `p - 1` forwards, then has `3m` of work, then its update. ZB-H2 meets that bound (no
/// bubble), ZB-H1 is faster than 1F1B (here, where each dX is sent as soon as it is computed,
/// 1F1B's bubble is already smaller than the paper's `3(p - 1)`), with the same peak memory
/// (the first stage's `p` micro-batches), and ZB-H2 buys its bubble with memory.
#[test]
fn zero_bubble_schedules_meet_their_bubbles_on_a_uniform_chain() {
    let (p, m) = (4, 8);
    let problem = unit_chain(p, p);
    let run = |schedule| {
        let planned = pipeline_plan(&problem, &Pipeline::new(p, m, schedule)).unwrap();
        let report = pipeline_report(&planned, &SimOptions::default()).unwrap();
        assert_dependencies_kept(schedule.name(), &planned, &report.report);
        report
    };
    let one_f_one_b = run(PipelineSchedule::OneFOneB);
    let (h1, h2) = (run(PipelineSchedule::ZbH1), run(PipelineSchedule::ZbH2));
    let bound = (3 * m + (p - 1) + 1) as f64;
    let steps = [one_f_one_b.step_time_us, h1.step_time_us, h2.step_time_us];
    assert!(steps.iter().all(|&t| t >= bound), "{steps:?} below the bound {bound}");
    assert_eq!(h2.step_time_us, bound, "ZB-H2 has no bubble: {steps:?}");
    assert!(h1.step_time_us < one_f_one_b.step_time_us, "{steps:?}");
    let peak = |r: &ordo_sim::PipelineReport| r.peak_memory_bytes.iter().copied().max().unwrap();
    let gpipe = run(PipelineSchedule::Gpipe);
    assert!(peak(&h1) < peak(&gpipe), "ZB-H1 keeps fewer micro-batches alive than GPipe");
    assert!(peak(&h2) > peak(&h1), "ZB-H2 buys its bubble with memory");
    assert!(
        h2.bubble_fraction < h1.bubble_fraction && h1.bubble_fraction < one_f_one_b.bubble_fraction
    );
}

/// BERT-base on 4 A100s, 8 micro-batches: ZB-H1 is faster than 1F1B at the same peak memory
/// (the first stage's, whose micro-batches both keep alive `S` at most), ZB-H2 faster still
/// with more.
#[test]
fn zero_bubble_on_bert_beats_one_f_one_b_and_zb_h1_keeps_its_memory() {
    let problem = bert(2, "a100x8-nvlink", None);
    let options = SimOptions::default();
    let run =
        |schedule| simulate_pipeline(&problem, &Pipeline::new(4, 8, schedule), &options).unwrap();
    let one_f_one_b = run(PipelineSchedule::OneFOneB);
    let (h1, h2) = (run(PipelineSchedule::ZbH1), run(PipelineSchedule::ZbH2));
    let peak = |r: &ordo_sim::PipelineReport| r.peak_memory_bytes.iter().copied().max().unwrap();
    assert!(h1.step_time_us < one_f_one_b.step_time_us);
    assert!(h2.step_time_us < h1.step_time_us);
    assert_eq!(peak(&h1), peak(&one_f_one_b));
    assert!(peak(&h2) > peak(&h1));
}

#[test]
fn one_f_one_b_needs_no_more_memory_than_gpipe_on_bert() {
    let problem = bert(2, "a100x8-nvlink", None);
    let options = SimOptions::default();
    let run =
        |schedule| simulate_pipeline(&problem, &Pipeline::new(4, 8, schedule), &options).unwrap();
    let (gpipe, one_f_one_b) = (run(PipelineSchedule::Gpipe), run(PipelineSchedule::OneFOneB));
    for s in 0..4 {
        assert!(
            one_f_one_b.peak_memory_bytes[s] <= gpipe.peak_memory_bytes[s],
            "stage {s}: {:?} vs {:?}",
            one_f_one_b.peak_memory_bytes,
            gpipe.peak_memory_bytes
        );
    }
    // Stage 0 holds 4 micro-batches' activations under 1F1B, 8 under GPipe.
    assert!(one_f_one_b.peak_memory_bytes[0] < gpipe.peak_memory_bytes[0]);
    assert!((0.0..1.0).contains(&gpipe.bubble_fraction));
}

#[test]
fn configurations_that_do_not_fit_are_refused_with_a_reason() {
    let problem = random_problem(&[(true, None), (false, Some(0)), (true, None)], 3);
    let message = |pipeline: Pipeline| pipeline_plan(&problem, &pipeline).unwrap_err().to_string();
    let gpipe = PipelineSchedule::Gpipe;
    assert!(message(Pipeline::new(0, 2, gpipe)).contains("zero stages"));
    assert!(message(Pipeline::new(2, 0, gpipe)).contains("zero micro-batches"));
    assert!(message(Pipeline::new(4, 2, gpipe)).contains("4 stages need 4 devices"));
    let too_many = random_problem(&[(true, None), (false, None)], 3);
    let err = pipeline_plan(&too_many, &Pipeline::new(3, 2, gpipe)).unwrap_err().to_string();
    assert!(err.contains("only 2 units"), "{err}");
    assert!(message(Pipeline::new(2, 2, gpipe).with_modulo(0)).contains("groups of 0"));
    let err = message(Pipeline::new(3, 2, gpipe).with_modulo(2));
    assert!(err.contains("fills only 2 of the 3 stages"), "{err}");
    let err = simulate_pipeline(&problem, &Pipeline::new(0, 1, gpipe), &SimOptions::default());
    assert!(err.unwrap_err().to_string().contains("zero stages"));
}

/// BERT-base, global batch 32 in 8 micro-batches of 4 (sequence: the zoo's default), on 4 and
/// 8 A100s over NVLink and over 25 and 10 Gb/s Ethernet: step time, speedup over contiguous
/// GPipe, bubble and peak memory of every schedule and allocation.
/// `cargo test --release -p ordo-sim --test pipeline -- --ignored --nocapture`
#[test]
#[ignore = "a measurement: prints a table"]
fn measure_bert_base_pipelines() {
    const GIB: f64 = (1u64 << 30) as f64;
    let ethernet = |gbit: f64| CommModel { us_per_byte: 8.0 / (gbit * 1e3), fixed_us: 30.0 };
    let networks =
        [("nvlink", None), ("25Gb/s", Some(ethernet(25.0))), ("10Gb/s", Some(ethernet(10.0)))];
    println!(
        "network | S | schedule | allocation | step ms | vs gpipe | bubble | peak GiB per stage"
    );
    for (network, comm) in networks {
        let problem = bert(4, "a100x8-nvlink", comm);
        for stages in [4, 8] {
            let mut baseline = None;
            for schedule in PipelineSchedule::ALL {
                for modulo in allocations() {
                    let mut variants = vec![(Pipeline::new(stages, 8, schedule), "")];
                    if schedule == PipelineSchedule::FastForward {
                        let sub = Pipeline::new(stages, 8, schedule).with_dw_on_sub_stream();
                        variants.push((sub, " dW sub-stream"));
                    }
                    for (mut pipeline, note) in variants {
                        pipeline.modulo = modulo;
                        let options = if pipeline.dw_on_sub_stream {
                            CONCURRENT
                        } else {
                            SimOptions::default()
                        };
                        let allocation = match modulo {
                            None => "contiguous".to_string(),
                            Some(m) => format!("modulo {m}"),
                        };
                        let name = format!("{}{note}", schedule.name());
                        if schedule == PipelineSchedule::Gpipe {
                            print_stage_work(&problem, &pipeline);
                        }
                        let report = match simulate_pipeline(&problem, &pipeline, &options) {
                            Ok(report) => report,
                            Err(e) => {
                                println!("{network} | {stages} | {name} | {allocation} | {e}");
                                continue;
                            }
                        };
                        let step = report.step_time_us;
                        let base = *baseline.get_or_insert(step);
                        let peaks: Vec<String> = report
                            .peak_memory_bytes
                            .iter()
                            .map(|&b| format!("{:.1}", b as f64 / GIB))
                            .collect();
                        println!(
                            "{network} | {stages} | {name} | {allocation} | {:.1} | {:.2}x | {:.0}% | {}",
                            step / 1e3,
                            base / step,
                            100.0 * report.bubble_fraction,
                            peaks.join(" ")
                        );
                    }
                }
            }
        }
    }
}

/// Prints each stage's work for one micro-batch (forward, backward and update), in ms.
fn print_stage_work(problem: &PlaceProblem, pipeline: &Pipeline) {
    let units = ordo_sched::pipeline_units(problem);
    let Ok((chunk_of_unit, device_of_chunk)) =
        ordo_sched::allocate_units(problem, &units, pipeline)
    else {
        return;
    };
    let mut work = vec![0u64; pipeline.stages];
    for (u, cost) in units.costs(problem).into_iter().enumerate() {
        work[device_of_chunk[chunk_of_unit[u]]] += cost;
    }
    let work: Vec<String> = work.iter().map(|&w| format!("{:.1}", w as f64 / 1e3)).collect();
    println!("  stage work per micro-batch, ms: {}", work.join(" "));
}

/// A runtime's per-action overhead lengthens each device's compute by exactly its actions
/// times the overhead (PyTorch's actions: `pytorch_actions`), and never shortens the step;
/// the action orders stay the same.
#[test]
fn action_overhead_is_charged_once_per_action() {
    let problem = bert(8, "v100x4-nvlink", None);
    for schedule in PipelineSchedule::ALL {
        for modulo in [None, Some(2)] {
            let base = Pipeline::new(2, 4, schedule);
            let base = match modulo {
                Some(m) => base.with_modulo(m),
                None => base,
            };
            let plain = pipeline_plan(&problem, &base).unwrap();
            let charged = pipeline_plan(&problem, &base.with_action_overhead(500)).unwrap();
            let actions = ordo_sched::pytorch_actions(&plain, schedule).unwrap();
            assert_eq!(actions, ordo_sched::pytorch_actions(&charged, schedule).unwrap());
            let busy = |planned: &PipelinePlan, device: usize| -> u64 {
                planned
                    .plan
                    .tasks
                    .iter()
                    .enumerate()
                    .filter(|(t, _)| *t < planned.split.problem.len())
                    .filter(|(t, _)| planned.placement.device_of[*t] == device)
                    .map(|(_, task)| task.duration_us)
                    .sum()
            };
            for (device, rank_actions) in actions.iter().enumerate() {
                assert_eq!(
                    busy(&charged, device) - busy(&plain, device),
                    500 * rank_actions.len() as u64,
                    "{} modulo {modulo:?}, device {device}",
                    schedule.name()
                );
            }
            let options = SimOptions::default();
            let step = |p: &PipelinePlan| pipeline_report(p, &options).unwrap().step_time_us;
            assert!(step(&charged) >= step(&plain) + 500.0 * actions[0].len() as f64 / 2.0);
        }
    }
}

/// Interleaved 1F1B (modulo allocation, Megatron's order) on a uniform chain of 8 blocks over
/// 4 stages, two chunks each: it shrinks 1F1B's bubble, as the interleaving is meant to, and
/// a target with more devices than the pipeline's stages schedules it the same way.
#[test]
fn interleaved_one_f_one_b_shrinks_the_bubble_on_any_target() {
    let (p, m) = (4, 8);
    let run = |devices: usize, modulo: Option<usize>| {
        let problem = unit_chain(2 * p, devices);
        let mut pipeline = Pipeline::new(p, m, PipelineSchedule::OneFOneB);
        pipeline.modulo = modulo;
        let planned = pipeline_plan(&problem, &pipeline).unwrap();
        let report = pipeline_report(&planned, &SimOptions::default()).unwrap();
        assert_dependencies_kept("1f1b", &planned, &report.report);
        report.step_time_us
    };
    let (contiguous, interleaved) = (run(p, None), run(p, Some(1)));
    assert!(interleaved < contiguous, "interleaved {interleaved}, contiguous {contiguous}");
    assert_eq!(run(p + 2, Some(1)), interleaved, "the devices past the stages change nothing");
}
