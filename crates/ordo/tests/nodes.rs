//! A pipeline on a cluster of nodes: its transfers between stages on different nodes cost the
//! network's time, those within a node the node's link's.

use ordo::{Model, Pipeline, PipelineSchedule, Problem, Size, StepMode, Target, TaskKind};

#[test]
fn a_pipeline_longer_than_a_node_sends_over_the_network_where_it_crosses_nodes() {
    let model = Model::load(
        "llama:layers=8,hidden=64,heads=4,intermediate=128,vocab=256",
        Size { batch: Some(2), seq_len: Some(16), ..Size::default() },
    )
    .unwrap()
    .training(ordo::Optimizer::Adam, None)
    .unwrap();
    // Nodes of 4 devices: an 8-stage pipeline crosses from node 0 to node 1 between stages 3
    // and 4.
    let mut cluster = ordo::cluster("h100x8-ib-ndr").unwrap();
    let text = cluster.to_json_string().replace("\"count\": 8", "\"count\": 4");
    cluster = ordo::Cluster::parse(&text, "h100x4-ib-ndr").unwrap();
    let target = Target::cluster(cluster.clone(), Some(8)).unwrap();
    let problem = Problem::new(&model, &target, StepMode::TrainingGraph).unwrap();
    let pipeline = Pipeline::new(8, 2, PipelineSchedule::OneFOneB);
    let (planned, _) =
        ordo::simulate_pipeline(&problem, &pipeline, &ordo::SimOptions::default()).unwrap();
    let (mut within, mut across) = (0, 0);
    for task in &planned.plan.tasks {
        let TaskKind::Transfer { buffer, from, to } = task.kind else { continue };
        let bytes = planned.plan.buffers[buffer.0 as usize].bytes;
        let link = cluster.comm(from, to);
        assert_eq!(task.duration_us, link.time_us(bytes), "{}", task.name);
        if from / 4 == to / 4 {
            within += 1;
        } else {
            across += 1;
            assert!(link.time_us(bytes) > cluster.comm(0, 1).time_us(bytes), "{}", task.name);
        }
    }
    assert!(within > 0 && across > 0, "{within} {across}");
    // The same plan through the facade's plan().
    let planned_again = ordo::plan(&problem, &ordo::Strategy::Pipeline(pipeline)).unwrap();
    assert_eq!(planned_again.plan, planned.plan);
}
