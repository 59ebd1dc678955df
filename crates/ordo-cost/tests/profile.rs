//! Profiles: the file round-trips, applying one puts its times into a cost graph, and a profile
//! of another graph or another size, or a broken file, is refused with the offending names.

use ordo_cost::{
    PROFILE_FORMAT, Profile, ProfileError, ProfileNode, apply_profile, costgraph_from_graph,
};
use ordo_ir::op::Optimizer;
use ordo_ir::training::training_graph;
use ordo_ir::{Graph, Role};

fn mlp_training_graph() -> Graph {
    let (forward, loss) = ordo_ir::samples::mlp();
    training_graph(&forward, loss, Optimizer::SgdMomentum).unwrap()
}

/// A profile of `graph` whose node `i` took `i * 1.25 + 0.3` µs and `7 * i` temporary bytes.
fn profile_of(graph: &Graph) -> Profile {
    Profile {
        format: PROFILE_FORMAT.into(),
        model: graph.name.clone(),
        batch: 4,
        device: "test".into(),
        reps: 3,
        warmup: 1,
        calls: "in-step".into(),
        temporary_measured: true,
        spread: Some(0.05),
        nodes: graph
            .nodes
            .iter()
            .enumerate()
            .map(|(i, n)| ProfileNode {
                name: n.name.clone(),
                time_us: i as f64 * 1.25 + 0.3,
                output_bytes: n.outputs.iter().map(|f| f.bytes()).collect(),
                temporary_bytes: 7 * i as u64,
            })
            .collect(),
        link: None,
        step_overhead_us: None,
        concurrency_slowdown: None,
    }
}

#[test]
fn a_profile_round_trips_through_its_file() {
    let profile = profile_of(&mlp_training_graph());
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("p.json");
    profile.write(&path).unwrap();
    assert_eq!(Profile::read(&path).unwrap(), profile);
}

#[test]
fn applying_a_profile_puts_the_measured_times_and_memory_in() {
    let graph = mlp_training_graph();
    let profile = profile_of(&graph);
    let roofline = costgraph_from_graph(&graph);
    let mut costed = roofline.clone();
    apply_profile(&mut costed, &profile).unwrap();
    costed.validate("profiled").unwrap();
    let (mut sum_weights, mut sum_measured) = (0.0, 0.0);
    for (i, (node, before)) in costed.nodes.iter().zip(&roofline.nodes).enumerate() {
        let measured = &profile.nodes[i];
        assert_eq!(node.name, measured.name);
        // Whole µs, at least 1, within a µs of the measured time, and the running sums stay
        // within a µs of each other (the rounding errors do not add up).
        assert!(node.weight >= 1);
        assert!((node.weight as f64 - measured.time_us).abs() <= 1.0, "{}", node.name);
        (sum_weights, sum_measured) =
            (sum_weights + node.weight as f64, sum_measured + measured.time_us);
        assert!((sum_weights - sum_measured).abs() <= 1.0, "{}", node.name);
        assert_eq!(node.temporary_memory, 7 * i as u64);
        assert_eq!(node.output_memory, before.output_memory);
        assert_eq!(node.persistent_memory, before.persistent_memory);
    }
    assert_eq!(costed.links, roofline.links);
    assert!(costed.graph["cost_model"].as_str().unwrap().contains("profile"));
    // The roofline's weights were not these.
    assert_ne!(
        roofline.nodes.iter().map(|n| n.weight).collect::<Vec<_>>(),
        costed.nodes.iter().map(|n| n.weight).collect::<Vec<_>>()
    );
}

#[test]
fn a_profile_missing_nodes_is_refused_with_their_names_and_count() {
    let graph = mlp_training_graph();
    let mut profile = profile_of(&graph);
    let dropped: Vec<String> = profile.nodes.drain(2..10).map(|n| n.name).collect();
    let mut costed = costgraph_from_graph(&graph);
    let before = costed.clone();
    let err = apply_profile(&mut costed, &profile).unwrap_err();
    let text = err.to_string();
    assert!(matches!(err, ProfileError::OtherGraph { .. }), "{text}");
    assert!(text.contains("not in the profile") && text.contains("(8 in all)"), "{text}");
    for name in &dropped[..5] {
        assert!(text.contains(&format!("`{name}`")), "{name} not named: {text}");
    }
    assert!(!text.contains(&format!("`{}`", dropped[7])), "only the first few: {text}");
    assert_eq!(costed, before, "nothing changes on error");
}

#[test]
fn a_profile_of_another_graph_or_size_is_refused() {
    let training = mlp_training_graph();
    let (forward, _) = ordo_ir::samples::mlp();
    // The forward graph's profile lacks the backward nodes; the training graph's has extra.
    let mut costed = costgraph_from_graph(&training);
    let err = apply_profile(&mut costed, &profile_of(&forward)).unwrap_err().to_string();
    assert!(err.contains("not in the profile"), "{err}");
    let mut costed = costgraph_from_graph(&forward);
    let err = apply_profile(&mut costed, &profile_of(&training)).unwrap_err().to_string();
    assert!(err.contains("not in the graph") && !err.contains("not in the profile"), "{err}");
    let first_extra = training.nodes.iter().find(|n| forward.find(&n.name).is_none()).unwrap();
    assert_ne!(first_extra.role, Role::Forward);
    assert!(err.contains(&format!("`{}`", first_extra.name)), "{err}");

    // Same names, other output sizes: measured at another batch.
    let mut profile = profile_of(&training);
    let node = &mut profile.nodes[1];
    node.output_bytes = node.output_bytes.iter().map(|b| 2 * b).collect();
    let name = node.name.clone();
    let mut costed = costgraph_from_graph(&training);
    let err = apply_profile(&mut costed, &profile).unwrap_err();
    assert!(matches!(err, ProfileError::OtherSize { .. }), "{err}");
    assert!(err.to_string().contains(&name), "{err}");
}

#[test]
fn broken_files_are_refused_clearly() {
    let good = profile_of(&mlp_training_graph()).to_json_string();
    let cases: Vec<(String, &str)> = vec![
        ("{".into(), "not valid JSON"),
        ("[]".into(), "not a profile"),
        (good.replace(PROFILE_FORMAT, "ordo.profile/9"), "ordo.profile/9` is not supported"),
        (good.replace(PROFILE_FORMAT, "ordo.plan/1"), "is not a profile"),
        (good.replacen("\"time_us\": 0.3", "\"time_us\": -0.3", 1), "time_us is -0.3; it must be"),
        (
            good.replacen("\"time_us\": 0.3", "\"time_us\": 1e300", 1),
            "time_us is 1e300 µs, more than",
        ),
        (good.replacen("\"batch\": 4", "\"batch\": \"four\"", 1), "bad profile"),
    ];
    for (text, expected) in cases {
        let err = Profile::parse(&text, "p.json").unwrap_err().to_string();
        assert!(err.starts_with("p.json: ") && err.contains(expected), "{expected}: {err}");
    }
    let mut twice = profile_of(&mlp_training_graph());
    twice.nodes[3].name = twice.nodes[2].name.clone();
    let err = Profile::parse(&twice.to_json_string(), "p.json").unwrap_err().to_string();
    assert!(err.contains("appears twice"), "{err}");
    let err = Profile::read("/nonexistent/p.json").unwrap_err().to_string();
    assert!(err.contains("cannot read"), "{err}");
}
