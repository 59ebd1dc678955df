//! `ordo conformance DIR...`: runs ONNX backend node tests (a `model.onnx` and
//! `test_data_set_*/input_*.pb`, `output_*.pb`) on the CPU kernels and prints pass, fail and
//! unsupported per op.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use ordo_exec::cpu::Tensor;
use ordo_onnx::TensorValue;
use serde_json::json;

use crate::format::Table;
use crate::onnx::run;

/// Arguments of `ordo conformance`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Test case folders (holding `model.onnx`), or folders of them (e.g. onnx's
    /// `backend/test/data/node`).
    #[arg(required = true)]
    pub dirs: Vec<PathBuf>,
    /// Relative tolerance: an output element passes when `|got - want| <= atol + rtol * |want|`.
    #[arg(allow_negative_numbers = true, long, default_value_t = 1e-3)]
    pub rtol: f64,
    /// Absolute tolerance.
    #[arg(allow_negative_numbers = true, long, default_value_t = 1e-5)]
    pub atol: f64,
    /// Print every case with its outcome and reason, not only the table.
    #[arg(long)]
    pub cases: bool,
    /// Print one JSON object (every case and the totals) instead of text.
    #[arg(long)]
    pub json: bool,
    /// Check the importer's shape inference only: a case passes when every output the model
    /// imports to has the shape of the expected output (no kernel runs; what `inspect`,
    /// `place`, `plan` and `simulate` need).
    #[arg(long)]
    pub shapes: bool,
}

/// What happened to one test case.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Outcome {
    /// Imported, ran, and every output matched.
    Pass,
    /// Imported, but running failed or an output differs.
    Fail(String),
    /// The importer refused the model (an op, attribute, type or dynamic shape it lacks).
    Unsupported(String),
}

impl Outcome {
    fn label(&self) -> &'static str {
        match self {
            Outcome::Pass => "pass",
            Outcome::Fail(_) => "fail",
            Outcome::Unsupported(_) => "unsupported",
        }
    }

    fn reason(&self) -> &str {
        match self {
            Outcome::Pass => "",
            Outcome::Fail(r) | Outcome::Unsupported(r) => r,
        }
    }
}

/// Runs every case and prints the table.
pub fn run(args: &Args) -> anyhow::Result<()> {
    for (option, value) in [("--rtol", args.rtol), ("--atol", args.atol)] {
        if !(value.is_finite() && value >= 0.0) {
            bail!("{option} {value}: a tolerance is a finite number, 0 or more");
        }
    }
    let mut cases = Vec::new();
    for dir in &args.dirs {
        cases.extend(find_cases(dir)?);
    }
    if cases.is_empty() {
        bail!("no test case (a folder with model.onnx) under the given folders");
    }
    let results: Vec<(String, String, Outcome)> = cases
        .iter()
        .map(|dir| {
            let name = dir.file_name().map_or_else(String::new, |n| n.to_string_lossy().into());
            let (op, outcome) = run_case(dir, args.rtol, args.atol, args.shapes);
            (name, op, outcome)
        })
        .collect();
    let mut per_op: BTreeMap<&str, [usize; 3]> = BTreeMap::new();
    let mut totals = [0usize; 3];
    for (_, op, outcome) in &results {
        let k = match outcome {
            Outcome::Pass => 0,
            Outcome::Fail(_) => 1,
            Outcome::Unsupported(_) => 2,
        };
        per_op.entry(op).or_default()[k] += 1;
        totals[k] += 1;
    }
    if args.json {
        let out = json!({
            "cases": results.iter().map(|(name, op, o)| json!({
                "case": name, "op": op, "outcome": o.label(), "reason": o.reason(),
            })).collect::<Vec<_>>(),
            "per_op": per_op.iter().map(|(op, c)| json!({
                "op": op, "pass": c[0], "fail": c[1], "unsupported": c[2],
            })).collect::<Vec<_>>(),
            "pass": totals[0], "fail": totals[1], "unsupported": totals[2],
            "rtol": args.rtol, "atol": args.atol,
        });
        println!("{out:#}");
        return Ok(());
    }
    if args.cases {
        let mut table = Table::new(&["case", "op", "outcome", "reason"]);
        for (name, op, o) in &results {
            table.row(vec![name.clone(), op.clone(), o.label().into(), o.reason().into()]);
        }
        println!("{}", table.render());
    }
    let mut table = Table::new(&["op", "cases", "pass", "fail", "unsupported"]);
    for (op, c) in &per_op {
        table.row(vec![
            op.to_string(),
            (c[0] + c[1] + c[2]).to_string(),
            c[0].to_string(),
            c[1].to_string(),
            c[2].to_string(),
        ]);
    }
    print!("{}", table.render());
    let ops_passing = per_op.values().filter(|c| c[0] > 0).count();
    println!(
        "total: {} cases, {} pass, {} fail, {} unsupported ({} of {} ops pass at least one case; \
         rtol {}, atol {})",
        results.len(),
        totals[0],
        totals[1],
        totals[2],
        ops_passing,
        per_op.len(),
        args.rtol,
        args.atol
    );
    Ok(())
}

/// `dir` itself when it holds `model.onnx`, else its sub-folders that do, sorted.
fn find_cases(dir: &Path) -> anyhow::Result<Vec<PathBuf>> {
    if dir.join("model.onnx").is_file() {
        return Ok(vec![dir.to_path_buf()]);
    }
    let entries = std::fs::read_dir(dir)
        .with_context(|| format!("{}: cannot read the folder", dir.display()))?;
    let mut cases: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.join("model.onnx").is_file())
        .collect();
    cases.sort();
    Ok(cases)
}

/// The op a case tests (its node's op type; `(several ops)` for multi-node models such as
/// function expansions) and its outcome.
pub fn run_case(dir: &Path, rtol: f64, atol: f64, shapes_only: bool) -> (String, Outcome) {
    let model = match std::fs::read(dir.join("model.onnx")) {
        Ok(bytes) => bytes,
        Err(e) => return ("?".into(), Outcome::Fail(format!("cannot read model.onnx: {e}"))),
    };
    let info = match ordo_onnx::model_info(&model) {
        Ok(info) => info,
        Err(e) => return ("?".into(), Outcome::Unsupported(e.to_string())),
    };
    let mut ops = info.op_types.clone();
    ops.dedup();
    let op = match ops.as_slice() {
        [one] => one.clone(),
        [] => "(no node)".into(),
        _ => "(several ops)".into(),
    };
    let outcome = match check(&model, &info, dir, rtol, atol, shapes_only) {
        Ok(outcome) => outcome,
        Err(e) => Outcome::Fail(format!("{e:#}")),
    };
    (op, outcome)
}

fn check(
    model: &[u8],
    info: &ordo_onnx::ModelInfo,
    dir: &Path,
    rtol: f64,
    atol: f64,
    shapes_only: bool,
) -> anyhow::Result<Outcome> {
    // Node tests feed every operand as a graph input: when guessing which inputs are
    // parameters fails, try them all as data.
    let all_data =
        ordo_onnx::ImportOptions { data_inputs: Some(info.inputs.clone()), ..Default::default() };
    let data = dir.join("test_data_set_0");
    // The node tests feed shapes, axes and sizes as inputs, which an export writes as
    // constants: the retries bind integer inputs to their test values, first those that no
    // node reads as its data (its first operand), then all.
    let operands = || with_integer_inputs_constant(all_data.clone(), info, &data, false);
    let constants = || with_integer_inputs_constant(all_data.clone(), info, &data, true);
    let mut bound = false;
    let mut import = match ordo_onnx::import(model, &ordo_onnx::ImportOptions::default()) {
        Ok(import) => import,
        Err(e) => match ordo_onnx::import(model, &all_data) {
            Ok(import) => import,
            Err(_) => match ordo_onnx::import(model, &operands())
                .or_else(|_| ordo_onnx::import(model, &constants()))
            {
                Ok(import) => {
                    bound = true;
                    import
                }
                Err(_) => return Ok(Outcome::Unsupported(e.to_string())),
            },
        },
    };
    // A data-dependent size is planned at its largest, which is not the case's size.
    if !import.report.bounded.is_empty() {
        return Ok(Outcome::Unsupported(format!(
            "planned at the largest size (the output's size depends on the data): {}",
            import.report.bounded.join(", ")
        )));
    }
    if shapes_only {
        return compare_shapes(&import.graph, &read_shapes(&data)?, &info.outputs);
    }
    // Ops and element types the CPU kernels lack (imported for planning only): the
    // runtime's own check, before any test data is read. An op may need its integer inputs
    // as the constants an export writes to have a kernel (`Trilu`'s `k`): retry so.
    if let Some(missing) = ordo_exec::missing_kernels(&import.graph) {
        let runs = |options: ordo_onnx::ImportOptions| {
            ordo_onnx::import(model, &options)
                .ok()
                .filter(|retried| ordo_exec::missing_kernels(&retried.graph).is_none())
        };
        match runs(operands()).or_else(|| runs(constants())) {
            Some(retried) => {
                import = retried;
                bound = true;
            }
            None => {
                let reasons = import.report.planned_only_reasons();
                let why = ordo_onnx::explain_missing_kernels(&missing, &reasons);
                return Ok(Outcome::Unsupported(why));
            }
        }
    }
    // Random ops draw from ordo's counter-based generator, not the test's NumPy one: their
    // values are checked by the kernel tests' statistics instead.
    let random = |op: &ordo_ir::Op| {
        use ordo_ir::Op;
        matches!(op, Op::RandomLike(_) | Op::Bernoulli | Op::Dropout { .. })
    };
    if import.graph.nodes.iter().any(|n| random(&n.op)) {
        return Ok(Outcome::Unsupported(
            "random: ordo draws from its own counter-based generator, not NumPy's".into(),
        ));
    }
    // With every input bound, the import folded the whole case: no kernel runs, so it is not
    // counted as a pass, but its folded outputs are still compared (a wrong fold fails).
    let folded = bound && import.graph.input_nodes().next().is_none();
    let mut ids = StringIds::default();
    let inputs = read_numbered(&data, "input", &mut ids)?;
    let expected = read_numbered(&data, "output", &mut ids)?;
    if inputs.len() != info.inputs.len() {
        bail!("{} input files for {} graph inputs", inputs.len(), info.inputs.len());
    }
    let mut tensors: HashMap<String, TensorValue> = ordo_onnx::initializers(model)?;
    for (name, value) in info.inputs.iter().zip(inputs) {
        tensors.insert(name.clone(), value);
    }
    let shapes: Vec<Vec<usize>> =
        import.graph.params.iter().map(|p| p.fact.shape.clone()).collect();
    let params = ordo_onnx::param_values(&import.sources, &shapes, &tensors)?;
    let params: Vec<Tensor> = params.iter().map(run::tensor).collect::<anyhow::Result<_>>()?;
    let mut feeds = HashMap::new();
    for node in import.graph.input_nodes() {
        let value = tensors
            .get(&node.name)
            .with_context(|| format!("no test data for input `{}`", node.name))?;
        feeds.insert(node.name.clone(), run::tensor(value)?);
    }
    let outputs = ordo_exec::sequential::infer(import.graph, params, &feeds)?;
    if outputs.len() != expected.len() {
        bail!("{} outputs, the test expects {}", outputs.len(), expected.len());
    }
    for ((got, want), name) in outputs.iter().zip(&expected).zip(&info.outputs) {
        if let Some(diff) = run::mismatch(&run::as_f64(got), got.shape(), want, rtol, atol) {
            return Ok(Outcome::Fail(format!("output `{name}`: {diff}")));
        }
    }
    if folded {
        return Ok(Outcome::Unsupported(
            "every input is an integer bound as a constant: the case folds at import (to the \
             expected outputs)"
                .into(),
        ));
    }
    Ok(Outcome::Pass)
}

/// `options` with the case's integer and bool inputs (`operands_too`: also those some node
/// reads as its first operand), and its float inputs that an export writes as constants,
/// given their test values as constants.
fn with_integer_inputs_constant(
    mut options: ordo_onnx::ImportOptions,
    info: &ordo_onnx::ModelInfo,
    data: &Path,
    operands_too: bool,
) -> ordo_onnx::ImportOptions {
    for (k, name) in info.inputs.iter().enumerate() {
        if !operands_too && info.first_operands.contains(name) && !info.shape_inputs.contains(name)
        {
            continue;
        }
        // An input of a type that cannot be read (strings, 4-bit) is not an integer constant.
        let Ok(bytes) = std::fs::read(data.join(format!("input_{k}.pb"))) else { continue };
        let Ok(value) = ordo_onnx::read_tensor(&bytes) else { continue };
        let (values, floats) = match value.values {
            ordo_onnx::Values::I64(values) => (values, None),
            ordo_onnx::Values::Bool(values) => (values.into_iter().map(i64::from).collect(), None),
            // Floats only where an export writes a constant (`Resize`'s scales, `Pad`'s value):
            // float data stays data.
            ordo_onnx::Values::F32(v) if info.shape_inputs.contains(name) => {
                (Vec::new(), Some(v.into_iter().map(f64::from).collect()))
            }
            ordo_onnx::Values::F32(_) => continue,
        };
        let constant = ordo_onnx::ConstantInput { shape: value.shape, values, floats };
        options.constant_inputs.insert(name.clone(), constant);
        if let Some(data_inputs) = options.data_inputs.as_mut() {
            data_inputs.retain(|d| d != name);
        }
    }
    options
}

/// Whether each output of `graph` has the expected output's shape.
fn compare_shapes(
    graph: &ordo_ir::Graph,
    expected: &[Vec<usize>],
    names: &[String],
) -> anyhow::Result<Outcome> {
    if graph.outputs.len() != expected.len() {
        bail!("{} outputs, the test expects {}", graph.outputs.len(), expected.len());
    }
    for ((&outlet, want), name) in graph.outputs.iter().zip(expected).zip(names) {
        let got = graph.fact(outlet).with_context(|| format!("output `{name}` has no fact"))?;
        if got.shape != *want {
            return Ok(Outcome::Fail(format!(
                "output `{name}`: shape {:?}, the test expects {want:?}",
                got.shape
            )));
        }
    }
    Ok(Outcome::Pass)
}

/// The shapes of `output_0.pb`, `output_1.pb`, ... in `dir`.
fn read_shapes(dir: &Path) -> anyhow::Result<Vec<Vec<usize>>> {
    read_each(dir, "output", |bytes| Ok(ordo_onnx::read_tensor_shape(bytes)?))
}

/// `<prefix>_0.pb`, `<prefix>_1.pb`, ... in `dir`, in index order.
fn read_numbered(
    dir: &Path,
    prefix: &str,
    ids: &mut StringIds,
) -> anyhow::Result<Vec<TensorValue>> {
    read_each(dir, prefix, |bytes| ids.read(bytes))
}

/// The ids of the strings one case feeds and expects, one per distinct string: the runtime
/// computes strings as ids (`ordo_exec::cpu::reads_strings`), so the inputs and the expected
/// outputs take theirs from this one table.
#[derive(Default)]
struct StringIds(HashMap<Vec<u8>, i64>);

impl StringIds {
    /// A serialized tensor; one of strings as their ids.
    fn read(&mut self, bytes: &[u8]) -> anyhow::Result<TensorValue> {
        let Some(t) = ordo_onnx::read_string_tensor(bytes)? else {
            return Ok(ordo_onnx::read_tensor(bytes)?);
        };
        let ids = t.strings.into_iter().map(|s| {
            let next = self.0.len() as i64;
            *self.0.entry(s).or_insert(next)
        });
        let values = ordo_onnx::Values::I64(ids.collect());
        Ok(TensorValue { name: t.name, shape: t.shape, values })
    }
}

/// `read` of each of `<prefix>_0.pb`, `<prefix>_1.pb`, ... in `dir`, until one is missing.
fn read_each<T>(
    dir: &Path,
    prefix: &str,
    mut read: impl FnMut(&[u8]) -> anyhow::Result<T>,
) -> anyhow::Result<Vec<T>> {
    let mut values = Vec::new();
    for k in 0.. {
        let path = dir.join(format!("{prefix}_{k}.pb"));
        if !path.is_file() {
            break;
        }
        let bytes = std::fs::read(&path).with_context(|| format!("reading {}", path.display()))?;
        values.push(read(&bytes).with_context(|| path.display().to_string())?);
    }
    Ok(values)
}
