//! `ordo conformance DIR...`: runs ONNX backend node tests (a `model.onnx` and
//! `test_data_set_*/input_*.pb`, `output_*.pb`) on the CPU kernels and prints pass, fail and
//! unsupported per op.

use std::collections::BTreeMap;
use std::path::PathBuf;

use anyhow::bail;
use ordo::onnx_node_tests::{Outcome, Tolerance, find_cases, run_case};
use serde_json::json;

use crate::format::Table;

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

/// Runs every case and prints the table.
pub fn run(args: &Args) -> anyhow::Result<()> {
    let tolerance = Tolerance::new(args.rtol, args.atol)?;
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
            let (op, outcome) = run_case(dir, tolerance, args.shapes);
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
