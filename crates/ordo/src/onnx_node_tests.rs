//! ONNX's backend node tests run on the CPU kernels: a case is a folder with a `model.onnx`
//! and `test_data_set_0/input_*.pb`, `output_*.pb`; it passes when the model imports, runs
//! and every output matches within a tolerance. The command line's `ordo conformance` prints
//! these outcomes; ONNX's own test data is read here, never written.

use std::collections::HashMap;
use std::fmt::Display;
use std::path::{Path, PathBuf};

use ordo_exec::cpu::{self, Tensor};
use ordo_onnx::{ImportOptions, ModelInfo, TensorValue, Values};

use crate::error::{Result, usage};
use crate::parameter::{Parameter, refuse};

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
    /// `pass`, `fail` or `unsupported`.
    pub fn label(&self) -> &'static str {
        match self {
            Outcome::Pass => "pass",
            Outcome::Fail(_) => "fail",
            Outcome::Unsupported(_) => "unsupported",
        }
    }

    /// Why a case failed or is unsupported; empty for a pass.
    pub fn reason(&self) -> &str {
        match self {
            Outcome::Pass => "",
            Outcome::Fail(r) | Outcome::Unsupported(r) => r,
        }
    }
}

/// How far an output may be from the expected one: an element passes when
/// `|got - want| <= atol + rtol * |want|` (NaN matches NaN, infinities must be equal).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Tolerance {
    rtol: f64,
    atol: f64,
}

impl Tolerance {
    /// A relative and an absolute tolerance.
    ///
    /// # Errors
    /// [`crate::Error::Parameter`] naming the tolerance that is not a finite number, 0 or more.
    pub fn new(rtol: f64, atol: f64) -> Result<Self> {
        for (parameter, value) in [(Parameter::Rtol, rtol), (Parameter::Atol, atol)] {
            if !(value.is_finite() && value >= 0.0) {
                refuse!(parameter => value, ": a tolerance is a finite number, 0 or more");
            }
        }
        Ok(Self { rtol, atol })
    }
}

/// `dir` itself when it holds `model.onnx`, else its sub-folders that do, sorted.
///
/// # Errors
/// [`crate::Error::Usage`] naming a folder that cannot be read.
pub fn find_cases(dir: &Path) -> Result<Vec<PathBuf>> {
    if dir.join("model.onnx").is_file() {
        return Ok(vec![dir.to_path_buf()]);
    }
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) => usage!("{}: cannot read the folder: {e}", dir.display()),
    };
    let mut cases: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.join("model.onnx").is_file())
        .collect();
    cases.sort();
    Ok(cases)
}

/// The op a case tests (its node's op type; `(several ops)` for multi-node models such as
/// function expansions) and its outcome. `shapes_only` checks the importer's shape inference
/// only: a case passes when every output has the expected output's shape (no kernel runs).
pub fn run_case(dir: &Path, tolerance: Tolerance, shapes_only: bool) -> (String, Outcome) {
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
    let outcome = check(&model, &info, dir, tolerance, shapes_only).unwrap_or_else(Outcome::Fail);
    (op, outcome)
}

/// A failure's message: `error` and each of its sources, joined by `: `.
fn chain(error: &dyn std::error::Error) -> String {
    let mut message = error.to_string();
    let mut source = error.source();
    while let Some(e) = source {
        message.push_str(&format!(": {e}"));
        source = e.source();
    }
    message
}

/// `error` as a message ([`chain`]), for `map_err`.
fn failed<E: std::error::Error>(error: E) -> String {
    chain(&error)
}

/// `result`'s error as a message after `context`.
fn why<T, E: std::error::Error>(result: Result<T, E>, context: impl Display) -> Result<T, String> {
    result.map_err(|e| format!("{context}: {}", chain(&e)))
}

fn check(
    model: &[u8],
    info: &ModelInfo,
    dir: &Path,
    tolerance: Tolerance,
    shapes_only: bool,
) -> Result<Outcome, String> {
    // Node tests feed every operand as a graph input: when guessing which inputs are
    // parameters fails, try them all as data.
    let all_data = ImportOptions { data_inputs: Some(info.inputs.clone()), ..Default::default() };
    let data = dir.join("test_data_set_0");
    // The node tests feed shapes, axes and sizes as inputs, which an export writes as
    // constants: the retries bind integer inputs to their test values, first those that no
    // node reads as its data (its first operand), then all.
    let operands = || with_integer_inputs_constant(all_data.clone(), info, &data, false);
    let constants = || with_integer_inputs_constant(all_data.clone(), info, &data, true);
    let mut bound = false;
    let mut import = match ordo_onnx::import(model, &ImportOptions::default()) {
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
        let runs = |options: ImportOptions| {
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
    let inputs = read_each(&data, "input", |bytes| ids.read(bytes))?;
    let expected = read_each(&data, "output", |bytes| ids.read(bytes))?;
    if inputs.len() != info.inputs.len() {
        return Err(format!("{} input files for {} graph inputs", inputs.len(), info.inputs.len()));
    }
    let mut tensors: HashMap<String, TensorValue> =
        ordo_onnx::initializers(model).map_err(failed)?;
    for (name, value) in info.inputs.iter().zip(inputs) {
        tensors.insert(name.clone(), value);
    }
    let shapes: Vec<Vec<usize>> =
        import.graph.params.iter().map(|p| p.fact.shape.clone()).collect();
    let params = ordo_onnx::param_values(&import.sources, &shapes, &tensors).map_err(failed)?;
    let params: Vec<Tensor> = params.iter().map(tensor).collect::<Result<_, _>>()?;
    let mut feeds = HashMap::new();
    for node in import.graph.input_nodes() {
        let value = tensors
            .get(&node.name)
            .ok_or_else(|| format!("no test data for input `{}`", node.name))?;
        feeds.insert(node.name.clone(), tensor(value)?);
    }
    let outputs = ordo_exec::sequential::infer(import.graph, params, &feeds).map_err(failed)?;
    if outputs.len() != expected.len() {
        return Err(format!("{} outputs, the test expects {}", outputs.len(), expected.len()));
    }
    for ((got, want), name) in outputs.iter().zip(&expected).zip(&info.outputs) {
        if let Some(diff) = mismatch(&as_f64(got), got.shape(), want, tolerance) {
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
    mut options: ImportOptions,
    info: &ModelInfo,
    data: &Path,
    operands_too: bool,
) -> ImportOptions {
    for (k, name) in info.inputs.iter().enumerate() {
        if !operands_too && info.first_operands.contains(name) && !info.shape_inputs.contains(name)
        {
            continue;
        }
        // An input of a type that cannot be read (strings, 4-bit) is not an integer constant.
        let Ok(bytes) = std::fs::read(data.join(format!("input_{k}.pb"))) else { continue };
        let Ok(value) = ordo_onnx::read_tensor(&bytes) else { continue };
        let (values, floats) = match value.values {
            Values::I64(values) => (values, None),
            Values::Bool(values) => (values.into_iter().map(i64::from).collect(), None),
            // Floats only where an export writes a constant (`Resize`'s scales, `Pad`'s value):
            // float data stays data.
            Values::F32(v) if info.shape_inputs.contains(name) => {
                (Vec::new(), Some(v.into_iter().map(f64::from).collect()))
            }
            Values::F32(_) => continue,
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
) -> Result<Outcome, String> {
    if graph.outputs.len() != expected.len() {
        return Err(format!(
            "{} outputs, the test expects {}",
            graph.outputs.len(),
            expected.len()
        ));
    }
    for ((&outlet, want), name) in graph.outputs.iter().zip(expected).zip(names) {
        let got = graph.fact(outlet).ok_or_else(|| format!("output `{name}` has no fact"))?;
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
fn read_shapes(dir: &Path) -> Result<Vec<Vec<usize>>, String> {
    read_each(dir, "output", |bytes| ordo_onnx::read_tensor_shape(bytes).map_err(failed))
}

/// The ids of the strings one case feeds and expects, one per distinct string: the runtime
/// computes strings as ids (`ordo_exec::cpu::reads_strings`), so the inputs and the expected
/// outputs take theirs from this one table.
#[derive(Default)]
struct StringIds(HashMap<Vec<u8>, i64>);

impl StringIds {
    /// A serialized tensor; one of strings as their ids.
    fn read(&mut self, bytes: &[u8]) -> Result<TensorValue, String> {
        let Some(t) = ordo_onnx::read_string_tensor(bytes).map_err(failed)? else {
            return ordo_onnx::read_tensor(bytes).map_err(failed);
        };
        let ids = t.strings.into_iter().map(|s| {
            let next = self.0.len() as i64;
            *self.0.entry(s).or_insert(next)
        });
        let values = Values::I64(ids.collect());
        Ok(TensorValue { name: t.name, shape: t.shape, values })
    }
}

/// `read` of each of `<prefix>_0.pb`, `<prefix>_1.pb`, ... in `dir`, until one is missing.
fn read_each<T>(
    dir: &Path,
    prefix: &str,
    mut read: impl FnMut(&[u8]) -> Result<T, String>,
) -> Result<Vec<T>, String> {
    let mut values = Vec::new();
    for k in 0.. {
        let path = dir.join(format!("{prefix}_{k}.pb"));
        if !path.is_file() {
            break;
        }
        let bytes = why(std::fs::read(&path), format!("reading {}", path.display()))?;
        values.push(read(&bytes).map_err(|e| format!("{}: {e}", path.display()))?);
    }
    Ok(values)
}

/// A kernel tensor from an ONNX tensor value.
fn tensor(value: &TensorValue) -> Result<Tensor, String> {
    let t = match &value.values {
        Values::F32(v) => Tensor::from_f32(&value.shape, v.clone()),
        Values::I64(v) => Tensor::from_i64(&value.shape, v.clone()),
        Values::Bool(v) => Tensor::from_bool(&value.shape, v.clone()),
    };
    why(t, format!("tensor `{}`", value.name))
}

/// Elements of a kernel tensor as `f64`, for comparisons.
fn as_f64(t: &Tensor) -> Vec<f64> {
    match t.data() {
        cpu::Data::F32(v) => v.iter().map(|&x| f64::from(x)).collect(),
        cpu::Data::I64(v) => v.iter().map(|&x| x as f64).collect(),
        cpu::Data::Bool(v) => v.iter().map(|&x| f64::from(u8::from(x))).collect(),
    }
}

/// Elements of an ONNX tensor value as `f64`.
fn value_f64(v: &TensorValue) -> Vec<f64> {
    match &v.values {
        Values::F32(v) => v.iter().map(|&x| f64::from(x)).collect(),
        Values::I64(v) => v.iter().map(|&x| x as f64).collect(),
        Values::Bool(v) => v.iter().map(|&x| f64::from(u8::from(x))).collect(),
    }
}

/// How two tensors differ beyond the tolerance, or `None` when they agree.
fn mismatch(
    got: &[f64],
    got_shape: &[usize],
    want: &TensorValue,
    tolerance: Tolerance,
) -> Option<String> {
    if got_shape != want.shape.as_slice() {
        return Some(format!("shape {got_shape:?}, expected {:?}", want.shape));
    }
    let Tolerance { rtol, atol } = tolerance;
    let want_v = value_f64(want);
    let mut worst: Option<(usize, f64)> = None;
    let mut bad = 0usize;
    for (i, (&g, &w)) in got.iter().zip(&want_v).enumerate() {
        let ok = (g.is_nan() && w.is_nan())
            || g == w
            || (g.is_finite() && w.is_finite() && (g - w).abs() <= atol + rtol * w.abs());
        if !ok {
            bad += 1;
            let err = if (g - w).is_nan() { f64::INFINITY } else { (g - w).abs() };
            if worst.is_none_or(|(_, e)| err > e) {
                worst = Some((i, err));
            }
        }
    }
    worst.map(|(i, _)| {
        format!(
            "{bad} of {} elements differ (e.g. element {i}: {}, expected {})",
            want_v.len(),
            got[i],
            want_v[i]
        )
    })
}
