//! ONNX models through the `ordo` binary: every command takes an `.onnx` file, training from an
//! imported forward graph, bad files, and `ordo conformance` on the repository's own cases
//! (whose expected outputs come from onnx's reference evaluator).

mod common;

use common::*;

use std::path::Path;

use ordo_ir::{DType, Graph, Node, Op, OutletId, TensorFact};

fn fixture(name: &str) -> String {
    format!("{}/../ordo-onnx/tests/fixtures/{name}", env!("CARGO_MANIFEST_DIR"))
}

/// The error of a command that must fail, checked to be a message and not a panic.
fn error(args: &[&str]) -> String {
    let out = ordo(args);
    assert!(!out.status.success(), "accepted: {args:?}");
    let err = stderr(&out);
    assert!(!err.contains("panicked"), "{err}");
    err
}

#[test]
fn every_model_command_takes_an_onnx_file() {
    let path = fixture("convnet.onnx");
    let import = ordo_onnx::import_file_with(&path, &Default::default()).unwrap();
    let v = json(&ordo(&["inspect", &path, "--json"]));
    assert_eq!(v["params"], import.report.params);
    assert_eq!(v["nodes"], import.graph.nodes.len());
    assert_eq!(v["flops"], ordo_ir::graph_stats(&import.graph).flops);

    let dir = tempfile::tempdir().unwrap();
    let costgraph = dir.path().join("convnet.json");
    let costgraph = costgraph.to_str().unwrap();
    assert!(ordo(&["export", &path, "--costgraph", costgraph]).status.success());
    assert_eq!(json(&ordo(&["inspect", costgraph, "--json"]))["nodes"], import.graph.nodes.len());

    let args = [path.as_str(), "--devices", "2", "--algo", "m-etf"];
    let placed = json(&ordo(&[&["place"][..], &args, &["--json"]].concat()));
    let placed_nodes = placed["device_of"].as_object().unwrap();
    assert_eq!(placed_nodes.len(), import.graph.nodes.len());
    for node in &import.graph.nodes {
        assert!(placed_nodes.contains_key(&node.name), "{} is placed", node.name);
    }
    let plan = json(&ordo(&[&["plan"][..], &args, &["--json"]].concat()));
    assert!(plan.is_object());
    let simulated = json(&ordo(&[&["simulate"][..], &args, &["--json"]].concat()));
    assert_eq!(simulated["step_time_us"].as_f64(), placed["makespan_us"].as_f64());
    let compared =
        json(&ordo(&["compare", &path, "--devices", "2", "--budget", "100ms", "--json"]));
    assert!(compared.to_string().contains("m-etf"), "{compared}");
}

#[test]
fn training_from_onnx_needs_a_loss_and_cross_entropy_adds_one() {
    let path = fixture("convnet.onnx");
    let err = error(&["place", &path, "--devices", "2", "--train", "--algo", "m-etf"]);
    assert!(err.contains("no loss") && err.contains("--loss cross-entropy"), "{err}");
    assert!(err.contains("`fc` f32[2,10]"), "the error names the output: {err}");

    let args = [&path, "--devices", "2", "--train", "--loss", "cross-entropy", "--algo", "m-etf"];
    let placed = json(&ordo(&[&["place"][..], &args[..], &["--json"]].concat()));
    assert_eq!(placed["mode"], "training-graph");
    let device_of = placed["device_of"].as_object().unwrap();
    for node in ["labels", "loss", "loss.grad", "fc.dx", "fc.dw", "conv2.dx", "bn1.dw"] {
        assert!(device_of.contains_key(node), "{node} is placed: {device_of:?}");
    }
    for node in ["conv1.weight.update", "bn2.bias.update", "fc.bias.update"] {
        assert!(device_of.contains_key(node), "{node} is placed");
    }
    assert!(!device_of.contains_key("conv1.dx"), "no gradient flows into the images");
    // The same training graph as the IR's builder makes from the import plus a loss.
    let expected = training_graph(&path);
    assert_eq!(device_of.len(), expected.nodes.len());
    for node in &expected.nodes {
        assert!(device_of.contains_key(&node.name), "{} is placed", node.name);
    }
    let simulated = json(&ordo(&[&["simulate"][..], &args[..], &["--json"]].concat()));
    assert_eq!(simulated["step_time_us"].as_f64(), placed["makespan_us"].as_f64());

    let err = error(&[
        "place",
        "resnet50",
        "--batch",
        "2",
        "--devices",
        "2",
        "--train",
        "--loss",
        "cross-entropy",
    ]);
    assert!(err.contains("already ends in a loss"), "{err}");
    let err = error(&["place", &path, "--devices", "2", "--loss", "cross-entropy"]);
    assert!(err.contains("--train"), "--loss needs --train: {err}");
}

#[test]
fn onnx_training_graphs_get_schedules_and_data_parallel_plans() {
    let path = fixture("weights_as_inputs.onnx");
    let train = ["--train", "--loss", "cross-entropy"];
    for schedule in ["inorder", "ooo"] {
        let args = [&path, "--devices", "1", "--schedule", schedule, "--json"];
        let v = json(&ordo(&[&["simulate"][..], &args[..], &train].concat()));
        assert!(v["step_time_us"].as_f64().unwrap() > 0.0, "{v}");
    }
    let args = [&path, "--devices", "1", "--schedules", "--json"];
    let v = json(&ordo(&[&["compare"][..], &args[..], &train].concat()));
    assert!(v.to_string().contains("ooo"), "{v}");
    let err = error(&[&["simulate", &path, "--pipeline", "2"][..], &train].concat());
    assert!(err.contains("--pipeline") && err.contains("fixes its batch"), "{err}");
    let args = [&path, "--data-parallel", "2", "--algo", "single", "--json"];
    let v = json(&ordo(&[&["simulate"][..], &args[..], &train].concat()));
    assert!(v["step_time_us"].as_f64().unwrap() > 0.0, "{v}");
}

/// The training graph of an imported model with a cross-entropy loss, built with the IR's own
/// functions (not the command's).
fn training_graph(path: &str) -> Graph {
    let mut graph = ordo_onnx::import_file(path).unwrap();
    let logits = graph.outputs[0];
    let fact = graph.fact(logits).unwrap().clone();
    let labels_fact = TensorFact::new(DType::I64, fact.shape[..fact.rank() - 1].to_vec());
    let mut push = |name: &str, op, inputs, out| {
        OutletId::new(graph.add_node(Node::new(name, op, inputs, Vec::new(), vec![out])), 0)
    };
    let labels = push("labels", Op::Input, Vec::new(), labels_fact);
    let loss = push(
        "loss",
        Op::CrossEntropyLoss,
        vec![logits, labels],
        TensorFact::new(DType::F32, Vec::new()),
    );
    graph.outputs = vec![loss];
    ordo_ir::training::training_graph(&graph, loss, ordo_ir::op::Optimizer::SgdMomentum).unwrap()
}

#[test]
fn cpu_kernels_support_every_op_the_importer_produces_forward_and_backward() {
    for name in ["convnet", "weights_as_inputs", "transformer_block", "lstm", "mlp"] {
        let path = fixture(&format!("{name}.onnx"));
        let forward = ordo_onnx::import_file(&path).unwrap();
        for node in &forward.nodes {
            let supported = ordo_exec::cpu::supports(&node.op);
            assert!(supported.is_ok(), "{name}: `{}`: {supported:?}", node.name);
        }
        if name == "transformer_block" || name == "lstm" {
            continue; // outputs without a class dimension to put a cross-entropy on
        }
        for node in &training_graph(&path).nodes {
            let supported = ordo_exec::cpu::supports(&node.op);
            assert!(supported.is_ok(), "{name} training: `{}`: {supported:?}", node.name);
        }
    }
}

#[test]
fn bad_onnx_files_are_clear_errors_that_name_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, bytes: &[u8]| {
        let path = dir.path().join(name);
        std::fs::write(&path, bytes).unwrap();
        path.to_str().unwrap().to_string()
    };
    let model = std::fs::read(fixture("convnet.onnx")).unwrap();
    let cases: Vec<(String, &str)> = vec![
        (write("truncated.onnx", &model[..model.len() / 2]), "not an ONNX model"),
        (write("garbage.onnx", b"\x08\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x12"), "not an ONNX"),
        (write("empty.onnx", b""), "has no graph"),
        (fixture("bad_opset.onnx"), "opset 99"),
        (fixture("bad_symbolic_dim.onnx"), "symbolic dimension `N`"),
        (fixture("bad_output_shape.onnx"), "declares f32[2,4]"),
        (fixture("bad_conv_weight.onnx"), "`conv`"),
        (fixture("cycle.onnx"), "cycle"),
        (fixture("unsupported.onnx"), "1 unsupported op(s)"),
        ("/no/such/model.onnx".into(), "cannot read"),
    ];
    for (path, message) in &cases {
        for command in
            [&["inspect"][..], &["place", "--devices", "2"], &["simulate", "--devices", "2"]]
        {
            let err = error(&[command, &[path.as_str()]].concat());
            assert!(err.contains(path.as_str()), "the error names the file: {err}");
            assert!(err.contains(message), "{path}: expected `{message}` in: {err}");
        }
    }
    let err = error(&["inspect", &fixture("unsupported.onnx")]);
    assert!(err.contains("`scaler` (ai.onnx.ml.Scaler)"), "{err}");
    assert!(!err.contains("`erf`"), "default-domain operators import (for planning): {err}");
    let baked = fixture("baked_batch.onnx");
    let err = error(&["place", &baked, "--batch", "2", "--devices", "2"]);
    for part in [baked.as_str(), "batch 2 (the file has 4)", "`/Reshape`", "`/fixed_shape`"] {
        assert!(err.contains(part), "a baked batch is refused naming {part}: {err}");
    }
    let err = error(&["inspect", &fixture("convnet.onnx"), "--seq-len", "4"]);
    assert!(err.contains("no token input"), "{err}");
}

#[test]
fn conformance_runs_cases_and_tells_pass_fail_and_unsupported_apart() {
    let cases = fixture("cases");
    let v = json(&ordo(&["conformance", &cases, "--json"]));
    let outcome = |case: &str| outcome_of(&v, case);
    // The forward pass of each imported model on ordo's CPU kernels agrees with onnx's
    // reference evaluator.
    for case in [
        "convnet",
        "mlp",
        "transformer_block",
        "lstm",
        "weights_as_inputs",
        "relu",
        "masks",
        "einsum",
        "folds",
        "control_flow",
        "conv3d",
        "upsample_opset7",
        "upsample_opset9",
        // MaxPool's indices: 1-D dilated with ceil_mode, 3-D column-major, int8 with ties.
        "maxpool_indices",
        // ConvInteger and QLinearConv: 1-D to 3-D, groups, strides, dilations, uneven and
        // SAME padding, per-channel zero points and scales, a bias.
        "integer_conv",
        // DeformConv: groups, offset groups, stride, dilation, uneven padding, mask, bias.
        "deform_conv",
        // DeformConv 1-D and 3-D with zero offsets, against the reference's Conv.
        "deform_conv_nd",
        // RoiAlign: boxes on two images, partly and wholly outside, both modes.
        "roi_align",
        // Det: batches, 12 x 12, 1 x 1, pivoting, singular matrices.
        "det",
    ] {
        assert_eq!(outcome(case), "pass", "{v:#}");
    }
    assert_eq!(outcome("relu_wrong"), "fail");
    // (`sin` was the unsupported example until Sin got a kernel: it now runs to onnx's
    // reference output; `node_tests` holds unsupported cases.)
    assert_eq!(outcome("sin"), "pass");
    // String operators are planned, not run (`string_operators_are_planned_and_named_by_run`).
    assert_eq!(outcome("strings"), "unsupported");
    assert_eq!(
        (v["pass"].as_u64(), v["fail"].as_u64(), v["unsupported"].as_u64()),
        (Some(20), Some(1), Some(1))
    );
    let relu = v["per_op"].as_array().unwrap().iter().find(|o| o["op"] == "Relu").unwrap();
    assert_eq!((relu["pass"].as_u64(), relu["fail"].as_u64()), (Some(1), Some(1)));

    // Integer outputs are exact: ConvInteger's sums pass 2^24, beyond f32's exact integers.
    let integer_conv = format!("{cases}/integer_conv");
    let v = json(&ordo(&["conformance", &integer_conv, "--rtol", "0", "--atol", "0", "--json"]));
    assert_eq!(v["pass"], 1, "{v:#}");

    // The wrong expected output is 0.1 off everywhere: a looser tolerance lets it pass.
    let wrong = format!("{cases}/relu_wrong");
    let v = json(&ordo(&["conformance", &wrong, "--atol", "0.11", "--json"]));
    assert_eq!(v["pass"], 1);

    let out = ordo(&["conformance", &cases]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("total: 22 cases, 20 pass, 1 fail, 1 unsupported"), "{text}");
    assert!(error(&["conformance", "/no/such/folder"]).contains("/no/such/folder"));
    let empty = tempfile::tempdir().unwrap();
    assert!(error(&["conformance", empty.path().to_str().unwrap()]).contains("no test case"));
}

#[test]
fn a_perturbed_parameter_makes_a_case_fail() {
    // Independent check that the comparison sees the parameters: the convnet case with one
    // weight changed no longer matches onnx's reference outputs.
    let dir = tempfile::tempdir().unwrap();
    let src = Path::new(&fixture("cases/convnet")).to_path_buf();
    let dst = dir.path().join("convnet");
    std::fs::create_dir_all(dst.join("test_data_set_0")).unwrap();
    for entry in std::fs::read_dir(src.join("test_data_set_0")).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), dst.join("test_data_set_0").join(entry.file_name())).unwrap();
    }
    let mut model = std::fs::read(src.join("model.onnx")).unwrap();
    // fc.bias is the last initializer: its raw f32 data ends the file's initializer section.
    let init = ordo_onnx::initializers(&model).unwrap();
    let Some(ordo_onnx::Values::F32(bias)) = init.get("fc.bias").map(|t| &t.values) else {
        panic!("fc.bias is a float initializer");
    };
    let needle: Vec<u8> = bias.iter().flat_map(|x| x.to_le_bytes()).collect();
    let at = model.windows(needle.len()).position(|w| w == needle.as_slice()).unwrap();
    model[at..at + 4].copy_from_slice(&(bias[0] + 1.0).to_le_bytes());
    std::fs::write(dst.join("model.onnx"), &model).unwrap();
    let v = json(&ordo(&["conformance", dst.to_str().unwrap(), "--json"]));
    assert_eq!(v["fail"], 1, "{v:#}");
    let reason = v["cases"][0]["reason"].as_str().unwrap();
    assert!(reason.contains("output `logits`"), "{reason}");
}

/// An export with `dynamic_axes`: `--batch` binds a data input's symbolic dimension 0 and
/// `--dim NAME=SIZE` any by name; without them the error lists each and its option.
#[test]
fn symbolic_dimensions_take_batch_or_dim() {
    let file = fixture("bad_symbolic_dim.onnx");
    let err = error(&["inspect", &file]);
    assert!(err.contains("`N` (input `x`, axis 0: --batch)"), "{err}");
    for size in [&["--batch", "4"][..], &["--dim", "N=4"]] {
        let out = ordo(&[&["inspect", file.as_str()][..], size].concat());
        assert!(out.status.success(), "{size:?}: {}", stderr(&out));
        assert!(stdout(&out).contains("input        x f32[4,3]"), "{}", stdout(&out));
    }
    let err = error(&["inspect", &file, "--dim", "M=4"]);
    assert!(err.contains("`N` has no size"), "{err}");
    let err = error(&["inspect", "resnet50", "--small", "--dim", "N=4"]);
    assert!(err.contains("symbolic dimensions of ONNX files"), "{err}");
}

/// The losses of `ordo run MODEL --train --steps 3` on `devices` with `extra` options.
fn train_losses(model: &str, devices: &str, extra: &[&str]) -> Vec<f64> {
    let args = [
        &["run", model, "--train", "--steps", "3", "--devices", devices][..],
        &["--json", "--warmup-seconds", "0"],
        extra,
    ]
    .concat();
    let v = json(&ordo(&args));
    v["losses"].as_array().unwrap().iter().map(|l| l.as_f64().unwrap()).collect()
}

/// Trains `file` (a fixture) for three steps on one and on three CPU devices: bitwise the same
/// losses, and they fall.
fn trains_the_same_on_one_and_three_devices(file: &str) {
    let model = fixture(file);
    let one = train_losses(&model, "cpu:1", &[]);
    assert_eq!(one.len(), 3);
    assert_eq!(one, train_losses(&model, "cpu:3", &[]), "{file}: the same on 1 and 3 devices");
    assert!(one[2] < one[0], "{file}: {one:?}");
}

/// Training through the mask and reduction kernels (`fixtures/gen_masks.py`: comparisons,
/// `Not`, `Where`, `Clip`, `Pow` with a run-time exponent, `Min`, `ReduceMax`, `ReduceL2`,
/// `ReduceLogSumExp`).
#[test]
fn training_runs_through_masks_and_reductions_on_any_placement() {
    trains_the_same_on_one_and_three_devices("masks.onnx");
}

/// Operators written as many IR ops train through them: a DeformConv v2 layer whose offsets
/// and mask are convolutions of its input (`fixtures/gen_deform_conv.py`), RoiAlign of a
/// convolution's output at fixed boxes (`gen_roi_align.py`), Det of a product with a weight
/// (`gen_det.py`). Their gradients against finite differences: `tests/onnx_gradients.rs`.
#[test]
fn deform_conv_roi_align_and_det_train_the_same_on_any_placement() {
    for file in ["deform_conv_train.onnx", "roi_align_train.onnx", "det_train.onnx"] {
        trains_the_same_on_one_and_three_devices(file);
    }
}

/// Control flow, sequences and optionals resolved at import (`fixtures/gen_control_flow.py`):
/// a `Loop` with an `If` nested in its body, a `Scan`, an `If` whose condition folds and one
/// known only at run time, sequence and optional ops. Training gives bitwise the losses of
/// the same model written out by hand without them, on one and on three devices, and they
/// fall; the run-time `If` is named in a note (both branches are computed).
#[test]
fn control_flow_trains_as_the_same_model_written_out() {
    let model = fixture("control_flow.onnx");
    // Roofline costs: a profile (thousands of steps of a debug build) is not what is tested.
    let roofline = ["--roofline"];
    let one = train_losses(&model, "cpu:1", &roofline);
    assert_eq!(one.len(), 3);
    assert_eq!(one, train_losses(&fixture("control_flow_unrolled.onnx"), "cpu:1", &roofline));
    assert_eq!(
        one,
        train_losses(&model, "cpu:3", &roofline),
        "bitwise the same on 1 and 3 devices"
    );
    assert!(one[2] < one[0], "{one:?}");
    let out = ordo(&["inspect", &model]);
    assert!(out.status.success(), "{}", stderr(&out));
    let note = "node `if_runtime`: an If whose condition is known only at run time";
    assert!(stderr(&out).contains(note), "{}", stderr(&out));
    // Three iterations of the body, the nested If taking its `then` branch in the second.
    for name in ["loop/2/tanh", "loop/1/if_second/then/neg", "scan/2/running_sum"] {
        assert!(stdout(&out).contains(name), "{name}: {}", stdout(&out));
    }
    assert!(!stdout(&out).contains("loop/3/"), "{}", stdout(&out));
}

/// 3-D convolutions and a 3-D transposed one (`fixtures/gen_conv3d.py`), imported as 2-D ones
/// per tap of the kernel's depth with the weight's slices as parameters: the file's parameter
/// count, and training gives the same losses on one and on three devices, falling.
#[test]
fn convolutions_in_3d_train_on_any_placement() {
    let model = fixture("conv3d.onnx");
    // Roofline costs: a profile (thousands of steps of a debug build) is not what is tested.
    let roofline = ["--roofline"];
    let v = json(&ordo(&["inspect", &model, "--json"]));
    assert_eq!(v["params"], 6 * 4 * 27 + 6 + 6 * 3 * 2 + 6 * 4 * 18 + 4, "{v:#}");
    let one = train_losses(&model, "cpu:1", &roofline);
    assert_eq!(
        one,
        train_losses(&model, "cpu:3", &roofline),
        "bitwise the same on 1 and 3 devices"
    );
    assert!(one[2] < one[0], "{one:?}");
}

/// f64 tensors are computed in f32: the import says so, naming them.
#[test]
fn f64_models_are_noted_as_computed_in_f32() {
    let model = fixture("node_tests/test_einsum_batch_matmul/model.onnx");
    let out = ordo(&["inspect", &model]);
    assert!(out.status.success(), "{}", stderr(&out));
    let note = "note: f64 tensors (x, y, Einsum_0) are computed in f32";
    assert!(stderr(&out).contains(note), "{}", stderr(&out));
    let out = ordo(&["inspect", &fixture("convnet.onnx")]);
    assert!(!stderr(&out).contains("f64"), "{}", stderr(&out));
}

/// An output whose size depends on the data (`NonZero`) is planned at its largest: `inspect`,
/// `place` and `simulate` work and say so on stderr; `run` names the operator as lacking a
/// kernel.
#[test]
fn data_dependent_sizes_are_planned_at_their_largest_and_said_so() {
    let model = fixture("bad_data_dependent.onnx");
    let out = ordo(&["inspect", &model]);
    assert!(out.status.success(), "{}", stderr(&out));
    // Every one of the 4 x 8 elements nonzero: 2 coordinates of 32.
    assert!(stdout(&out).contains("i64[2,32]"), "{}", stdout(&out));
    let note = "node `nonzero`: its output's size depends on the data; planned at its largest";
    assert!(stderr(&out).contains(note), "{}", stderr(&out));
    places_and_simulates(&model, &[]);
    let err = error(&["run", &model, "--devices", "cpu:1"]);
    assert!(err.contains("NonZero (`nonzero`)"), "{err}");
}

/// A text pipeline of ONNX's string operators (`fixtures/gen_strings.py`): string tensors are
/// planned as 8-byte handles, the sizes that depend on the text are those the file declares
/// (and onnx's reference evaluator computed: `cases/strings`), inspect, place and simulate
/// work, and `run` names every string operator and string tensor it cannot compute.
#[test]
fn string_operators_are_planned_and_named_by_run() {
    let model = fixture("strings.onnx");
    let (table, notes) = inspected(&model);
    for row in ["string[4]", "StringNormalizer", "string[3]", "string[3,3]", "TfIdfVectorizer"] {
        assert!(table.contains(row), "`{row}` in: {table}");
    }
    // The handles: 4 strings of input, 8 bytes each.
    let input = table.lines().find(|l| l.trim_start().starts_with("0  text")).unwrap();
    assert!(input.ends_with("32 B"), "{input}");
    for node in ["normalize", "split"] {
        let note = format!(
            "node `{node}`: its output's size depends on the data; planned at the size the file declares"
        );
        assert!(notes.contains(&note), "{notes}");
    }
    places_and_simulates(&model, &[]);
    let v = json(&ordo(&["conformance", &fixture("cases/strings"), "--shapes", "--json"]));
    assert_eq!((v["pass"].as_u64(), v["fail"].as_u64()), (Some(1), Some(0)), "{v:#}");
    let err = error(&["run", &model, "--devices", "cpu:1"]);
    for op in [
        "RegexFullMatch (`regex`)",
        "StringConcat (`concat`)",
        "StringNormalizer (`normalize`)",
        "StringSplit (`split:0`, `split:1`)",
        "TfIdfVectorizer (`tfidf`)",
    ] {
        assert!(err.contains(op), "{op}: {err}");
    }
    // The input and the Equal of strings would run (strings as ids); the string initializer
    // and the string constant cannot (their ids would need the feeder's table).
    assert!(err.contains("no CPU kernel: string tensors (`keyword`, `bang`)"), "{err}");
}

/// Operators the IR lacks import for planning (`fixtures/gen_planning_only.py`): the shapes
/// agree with those onnx's shape inference declared in the file, placing and simulating the
/// training step work, and `run` names every operator without a kernel in one error.
#[test]
fn operators_without_kernels_are_planned_and_named_by_run() {
    let model = fixture("planning_only.onnx");
    let (table, _) = inspected(&model);
    for row in ["Erf", "f32[4,18]", "TopK", "i64[4,3]", "Einsum", "bool[4,16]", "ScatterElements"] {
        assert!(table.contains(row), "`{row}` in: {table}");
    }
    places_and_simulates(&model, &["--train"]);
    let err = error(&["run", &model, "--train", "--devices", "cpu:2", "--steps", "1"]);
    // Range, Mod and Cast of constants fold at import: no node, nothing to run; every other
    // operator of the file has a kernel (ops/generic no longer imports them for planning) but
    // for a use it cannot express, a RoiAlign of sampling ratio 0, whose reason the error
    // gives; the multiplying ScatterElements has no gradient kernel.
    assert!(err.contains("1 operator(s) imported for planning only"), "{err}");
    assert!(err.contains("imported for planning only: RoiAlign (`roi`);"), "{err}");
    assert!(err.contains("(why: `roi` (RoiAlign): sampling_ratio 0: a grid sized"), "{err}");
    for k in [0, 2] {
        let grad = format!(
            "GradInput({k}) of ScatterElements: no gradient kernel for a scatter's reduction Mul \
             (`scatter.dx{k}`)"
        );
        assert!(err.contains(&grad), "{err}");
    }
    let runnable = [
        "Det",
        "Range",
        "Mod",
        "Cast",
        "Erf",
        "ReduceMean",
        "ReduceSum",
        "Less",
        "Where",
        "Split",
        "Pad",
        "Tile",
        "Einsum",
        "TopK",
    ];
    for runnable in runnable {
        assert!(!err.contains(&format!("{runnable} (")), "{runnable}: {err}");
    }
}

/// ONNX's own node tests (`fixtures/node_tests`, copied from the onnx package): the shapes of
/// the operators imported for planning are those onnx expects; an attention expansion whose
/// mask arithmetic (`Range`, comparisons, `Where`) folds at import runs on the CPU kernels to
/// onnx's reference outputs, and so does a `Where` of a run-time bool condition; a
/// data-dependent `NonZero` and an `ImageDecoder` are planned at the size the file declares.
#[test]
fn onnx_node_tests_agree_on_shapes_and_the_folded_attention_runs() {
    let cases = fixture("node_tests");
    let v = json(&ordo(&["conformance", &cases, "--shapes", "--json"]));
    for case in [
        "test_attention_4d_causal_expanded",
        "test_constant_pad",
        "test_einsum_batch_matmul",
        "test_erf",
        "test_reduce_mean_default_axes_keepdims_example",
        "test_split_equal_parts_1d_opset18",
        "test_top_k",
        "test_where_example",
        // String operators, planned with string tensors; sizes that depend on the text (and
        // NonZero's) at the size the file declares; an inverse one-sided DFT.
        "test_equal_string",
        "test_regex_full_match_basic",
        "test_string_concat_broadcasting",
        "test_string_split_basic",
        "test_strnormalizer_export_monday_casesensintive_lower",
        "test_tfidfvectorizer_tf_batch_uniandbigrams_skip5",
        "test_nonzero_example",
        "test_dft_irfft_opset19",
        // An image's size is in its encoded bytes: the size the file declares.
        "test_image_decoder_decode_png_rgb",
    ] {
        assert_eq!(outcome_of(&v, case), "pass", "{case}: {v:#}");
    }
    assert_eq!(v["fail"], 0);
    let v = json(&ordo(&["conformance", &cases, "--json"]));
    assert_eq!(outcome_of(&v, "test_attention_4d_causal_expanded"), "pass", "{v:#}");
    assert_eq!(outcome_of(&v, "test_erf"), "pass", "{v:#}");
    // Its axes are an input: run with them as the constant an export writes.
    assert_eq!(outcome_of(&v, "test_reduce_mean_default_axes_keepdims_example"), "pass", "{v:#}");
    // Its condition is a bool input: the runtime's bool tensors.
    assert_eq!(outcome_of(&v, "test_where_example"), "pass", "{v:#}");
    // Split's outputs are slices of its input.
    assert_eq!(outcome_of(&v, "test_split_equal_parts_1d_opset18"), "pass", "{v:#}");
    assert_eq!(outcome_of(&v, "test_top_k"), "pass", "{v:#}");
    // Its pad value is a float input: bound as the constant an export writes.
    assert_eq!(outcome_of(&v, "test_constant_pad"), "pass", "{v:#}");
    // Of f64 tensors: held in f32.
    assert_eq!(outcome_of(&v, "test_einsum_batch_matmul"), "pass", "{v:#}");
    // Element types held in a wider storage, against onnx's reference outputs.
    for case in [
        "test_cast_FLOAT_to_FLOAT16",
        "test_castlike_FLOAT_to_BFLOAT16",
        "test_cumsum_2d_int32",
        "test_div_int32_trunc",
        "test_edge_pad",
        "test_max_uint64",
        "test_mod_mixed_sign_int8",
        "test_pow_types_int32_float32",
        "test_reduce_max_bool_inputs",
        "test_sub_uint64",
        // The float8, float4, 4- and 2-bit types: read from their packed bytes, rounded
        // (saturating or not) and wrapped as onnx's reference (ml_dtypes) does.
        "test_cast_FLOAT_to_FLOAT8E4M3FN",
        "test_cast_no_saturate_FLOAT_to_FLOAT8E5M2",
        "test_cast_FLOAT8E5M2FNUZ_to_FLOAT",
        "test_cast_INT4_to_FLOAT",
        "test_cast_FLOAT_to_UINT2",
        "test_cast_FLOAT_to_FLOAT4E2M1",
        "test_cast_e8m0_FLOAT_to_FLOAT8E8M0",
        // OneHot as an Equal and a Where; scatters that multiply and take maxima.
        "test_onehot_without_axis",
        "test_onehot_negative_indices",
        "test_scatternd_max",
        "test_scatter_elements_with_reduction_mul",
        // Batch dims, vectors, transposed convolutions cut or extended to a size.
        "test_gathernd_example_int32_batch_dim1",
        "test_matmul_1d_3d",
        "test_convtranspose_autopad_same",
        "test_convtranspose_output_shape",
        // f16 attention computed in f32, u8 max pooling, Swish, f16 IsInf.
        "test_attention_4d_fp16",
        "test_maxpool_2d_uint8",
        "test_swish",
        "test_isinf_float16",
        // Rotary position embeddings: interleaved pairs on part of each head, 3-D input.
        "test_rotary_embedding_with_interleaved_rotary_dim",
        "test_rotary_embedding_3d_input",
        // Bit operations of signed and unsigned integers, broadcast; shifts of u8 and u64.
        "test_bitshift_left_uint8",
        "test_bitshift_right_uint64",
        "test_bitwise_and_ui8_bcast_4v3d",
        "test_bitwise_not_3d",
        "test_bitwise_xor_i16_3d",
        // Written as IR ops: a centred crop and pad as one Pad; p-norm pooling (p = 3 with
        // padding, p = 2 dilated) as an average pool of |x|^p.
        "test_center_crop_pad_crop_and_pad",
        "test_lppool_2d_pads",
        "test_lppool_2d_dilations",
        // Quantization as f32 arithmetic: per block to u8, per axis from u8, to int4, from
        // float8, and by the input's own range.
        "test_quantizelinear_blocked_asymmetric",
        "test_dequantizelinear_axis",
        "test_quantizelinear_int4",
        "test_dequantizelinear_e4m3fn",
        "test_dynamicquantizelinear",
        // TopK of integers: u64 ordered as unsigned, ties by the lower index.
        "test_top_k_uint64",
        "test_top_k_same_values_2d",
        // Opset 26: bits read as another type, running products.
        "test_bitcast_float32_to_int32",
        "test_bitcast_uint16_to_int16",
        "test_cumprod_2d_int32",
        "test_cumprod_1d_reverse_exclusive",
        // Control flow resolved at import: the branch a constant condition takes, a loop
        // unrolled with its scan output stacked, scans carrying one and several states,
        // optionals read back.
        "test_if",
        "test_loop11",
        "test_scan9_sum",
        "test_scan9_multi_state",
        "test_optional_get_element_tensor",
        "test_optional_has_element_empty_no_input_optional_input",
        // Opset 9's Upsample as a Resize; a training Dropout of ratio 0 (nothing drawn).
        "test_upsample_nearest",
        "test_training_dropout_zero_ratio_mask",
        // Sampling grids as gathers: bicubic, reflected, 3-D nearest; an affine grid as a
        // product with a constant grid.
        "test_gridsample_bicubic",
        "test_gridsample_reflection_padding",
        "test_gridsample_volumetric_nearest_align_corners_1",
        "test_affine_grid_3d_align_corners",
        // AffineGrid's function body: the size input split into its dims (a Split of a
        // constant, folded) sizes an Expand inside an If.
        "test_affine_grid_2d_expanded",
        // A model of opset 1 whose operator (`Not`) is unchanged up to opset 7.
        "test_not_2d",
        // Strings computed as ids, one per distinct string: equality, broadcast.
        "test_equal_string",
        // MaxPool's indices output as gathers of tables computed at import (row-major, and
        // column-major with storage_order 1).
        "test_maxpool_with_argmax_2d_precomputed_pads",
        "test_maxpool_with_argmax_2d_precomputed_strides",
        // Sizes from the data, at the sizes the file declares (checked as they run): the
        // nonzero elements, boxes kept by non-maximum suppression, distinct slices.
        "test_nonzero_example",
        "test_nonmaxsuppression_suppress_by_IOU_and_scores",
        "test_nonmaxsuppression_center_point_box_format",
        "test_nonmaxsuppression_two_batches",
        "test_unique_sorted_with_axis_3d",
        "test_unique_not_sorted_without_axis",
        // A Range of run-time bounds, at the length the file declares (checked as it runs).
        "test_range_int32_type_negative_delta",
        "test_range_float_type_positive_delta",
        // Recurrent layers unrolled: GRU, batch-first RNN, LSTM with peepholes and states.
        "test_gru_defaults",
        "test_simple_rnn_batchwise",
        "test_lstm_with_peepholes",
        // Integer products exact in f32 chunks; quantized rescaling in f64.
        "test_qlinearmatmul_3D_int8_float16",
        "test_matmulinteger",
        // Fourier transforms as products with constant matrices, the real inverse too; a
        // short-time one of windowed frames.
        "test_dft_irfft",
        "test_dft_inverse",
        "test_stft_with_window",
        // Gathers and scatters of constant indices.
        "test_col2im_pads",
        "test_maxunpool_export_with_output_shape",
        "test_compress_negative_axis",
        "test_reversesequence_batch",
        // Normalisations as IR ops: training batch norm with its running statistics, LRN, MVN.
        "test_batchnorm_example_training_mode",
        "test_lrn",
        "test_mvn",
    ] {
        assert_eq!(outcome_of(&v, case), "pass", "{case}: {v:#}");
    }
    assert_eq!((v["pass"].as_u64(), v["fail"].as_u64()), (Some(99), Some(0)), "{v:#}");
    // Random bounds (what `run` feeds) give another length than the file's: an error naming
    // the node and the values, not a wrong tensor.
    let range = fixture("node_tests/test_range_float_type_positive_delta/model.onnx");
    let err = error(&["run", &range, "--devices", "cpu:1"]);
    assert!(err.contains("node `Range_0`") && err.contains("elements; the plan holds 2"), "{err}");
}

/// Training-mode randomness as PyTorch exports it (`fixtures/gen_stochastic_depth.py`:
/// torchvision's StochasticDepth is `RandomUniformLike`, `Less`, `Cast`; and a training
/// `Dropout`; and GroupNorm and InstanceNorm through `InstanceNormalization`): imported as
/// runnable ops, the same losses on one and on three CPU devices (the
/// draws depend on node, step and element only), and not the losses of the same weights
/// exported without randomness (so the draws act).
#[test]
fn stochastic_depth_trains_the_same_on_any_placement() {
    let cross_entropy = ["--loss", "cross-entropy"];
    let losses = |file: &str, devices| train_losses(&fixture(file), devices, &cross_entropy);
    let one = losses("stochastic_depth.onnx", "cpu:1");
    assert_eq!(one, losses("stochastic_depth.onnx", "cpu:3"), "the same on 1 and 3 devices");
    let eval = losses("stochastic_depth_eval.onnx", "cpu:1");
    assert!(one.iter().chain(&eval).all(|l| l.is_finite()), "{one:?} {eval:?}");
    assert_ne!(one[0], eval[0], "the random ops change the first loss");
}

/// A training `Dropout` whose mask is read (`fixtures/gen_dropout_mask.py`, ratio 0.25) runs on
/// the CPU kernels as ONNX defines it: a kept element is the input scaled by 1 / (1 - ratio), a
/// dropped one is 0, the mask keeps about three quarters of the elements, and a second run
/// draws the same (the draws depend on node, step and element only).
#[test]
fn a_training_dropout_gives_its_mask() {
    let path = fixture("dropout_mask.onnx");
    let import = ordo_onnx::import_file_with(&path, &Default::default()).unwrap();
    // The mapping's scalar constants are buffers of the graph, their values from the import.
    let model = std::fs::read(&path).unwrap();
    let shapes: Vec<Vec<usize>> =
        import.graph.params.iter().map(|p| p.fact.shape.clone()).collect();
    let values = ordo_onnx::initializers(&model).unwrap();
    let params: Vec<ordo_exec::cpu::Tensor> =
        ordo_onnx::param_values(&import.sources, &shapes, &values)
            .unwrap()
            .into_iter()
            .map(|t| match t.values {
                ordo_onnx::Values::F32(v) => ordo_exec::cpu::Tensor::from_f32(&t.shape, v).unwrap(),
                other => panic!("a float constant, not {other:?}"),
            })
            .collect();
    let x: Vec<f32> = (0..16 * 64).map(|i| 1.0 + i as f32 / 64.0).collect();
    let input = ordo_exec::cpu::Tensor::from_f32(&[16, 64], x.clone()).unwrap();
    let feeds = std::collections::HashMap::from([("x".to_string(), input)]);
    let run =
        || ordo_exec::sequential::infer(import.graph.clone(), params.clone(), &feeds).unwrap();
    let outputs = run();
    let (y, mask) = (outputs[0].as_f32().unwrap(), outputs[1].as_bool().unwrap());
    for (i, (&y, &kept)) in y.iter().zip(mask).enumerate() {
        let want = if kept { x[i] / 0.75 } else { 0.0 };
        assert!((y - want).abs() <= 1e-6 * want.abs(), "element {i}: {y}, expected {want}");
    }
    let kept = mask.iter().filter(|&&m| m).count() as f64 / x.len() as f64;
    assert!((kept - 0.75).abs() < 0.05, "kept {kept} of the elements");
    assert_eq!(run(), outputs, "the same draws in a second run");
}

/// `--freeze NAME` imports a float initializer as a frozen parameter (an ONNX file does not
/// record which weights train): the trainable count drops by its size, training leaves it
/// alone (the first loss is the same, the next ones differ), and a name that is no float
/// initializer is refused with the closest one.
#[test]
fn frozen_initializers_do_not_train() {
    let model = fixture("convnet.onnx");
    let params = |extra: &[&str]| {
        json(&ordo(&[&["inspect", model.as_str(), "--json"], extra].concat()))["params"]
            .as_u64()
            .unwrap()
    };
    assert_eq!(params(&[]) - params(&["--freeze", "conv2.weight"]), 16 * 8 * 3 * 3);
    let losses = |extra: &[&str]| {
        train_losses(&model, "cpu:1", &[&["--loss", "cross-entropy"], extra].concat())
    };
    let (all, frozen) = (losses(&[]), losses(&["--freeze", "conv2.weight", "--freeze", "fc.bias"]));
    assert_eq!(all[0], frozen[0], "the same first step");
    assert_ne!(all[1..], frozen[1..], "later steps differ: {all:?} {frozen:?}");
    let err = error(&["inspect", &model, "--freeze", "conv2.weigth"]);
    assert!(err.contains("`conv2.weigth`") && err.contains("did you mean `conv2.weight`"), "{err}");
    let err = error(&["inspect", "resnet50", "--freeze", "fc.weight"]);
    assert!(err.contains("--freeze fc.weight") && err.contains("not one"), "{err}");
}

/// `ordo inspect MODEL`, which must succeed: its table and its notes.
fn inspected(model: &str) -> (String, String) {
    let out = ordo(&["inspect", model]);
    assert!(out.status.success(), "{}", stderr(&out));
    (stdout(&out), stderr(&out))
}

/// `place` and `simulate` of `model` on two devices, with `extra` flags, succeed.
fn places_and_simulates(model: &str, extra: &[&str]) {
    for command in [&["place", "--devices", "2"][..], &["simulate", "--devices", "2"]] {
        let out = ordo(&[command, &[model], extra].concat());
        assert!(out.status.success(), "{command:?}: {}", stderr(&out));
    }
}

/// The outcome (`pass`, `fail`, `unsupported`) of `case` in `ordo conformance --json`'s `v`.
fn outcome_of(v: &serde_json::Value, case: &str) -> String {
    let found = v["cases"].as_array().unwrap().iter().find(|c| c["case"] == case);
    found.unwrap_or_else(|| panic!("{case} missing: {v}"))["outcome"].as_str().unwrap().to_string()
}
