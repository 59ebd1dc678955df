//! `ordo published`: training runs others measured at scale, each beside ordo's prediction.

use anyhow::Context;
use serde_json::json;

use crate::format::{Table, bytes};

/// Arguments of `ordo published`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Only the table of this name (`megatron-selective`).
    #[arg(long)]
    pub table: Option<String>,
    /// Only the runs of these models (`--model 22B --model 175B`); default: all.
    #[arg(long = "model", value_name = "MODEL")]
    pub models: Vec<String>,
    /// Print the runs and predictions as JSON.
    #[arg(long)]
    pub json: bool,
}

/// Prints each published run with ordo's prediction and the errors' median and largest.
pub fn run(args: &Args) -> anyhow::Result<()> {
    let tables = ordo::published_tables()?;
    if let Some(name) = &args.table
        && !tables.iter().any(|t| &t.name == name)
    {
        let known: Vec<&str> = tables.iter().map(|t| t.name.as_str()).collect();
        anyhow::bail!("--table {name}: no such table; shipped: {}", known.join(", "));
    }
    let chosen: Vec<_> =
        tables.iter().filter(|t| args.table.as_ref().is_none_or(|n| &t.name == n)).collect();
    if let Some(model) =
        args.models.iter().find(|m| !chosen.iter().any(|t| t.rows.iter().any(|r| &&r.model == m)))
    {
        anyhow::bail!("--model {model}: no such run in the tables");
    }
    let mut out = Vec::new();
    for table in chosen {
        let mut predicted = Vec::new();
        for run in
            table.rows.iter().filter(|r| args.models.is_empty() || args.models.contains(&r.model))
        {
            let prediction = ordo::predict_published(table, run)
                .with_context(|| format!("{}: predicting {}", table.name, run.model))?;
            predicted.push((run, prediction));
        }
        out.push((table, predicted));
    }
    if args.json {
        let tables: Vec<_> = out
            .iter()
            .map(|(table, predicted)| {
                let rows: Vec<_> = predicted
                    .iter()
                    .map(|(run, p)| {
                        json!({
                            "model": run.model, "gpus": run.gpus(), "tensor": run.tensor,
                            "stages": run.stages, "data": run.data,
                            "global_batch": run.global_batch, "micro_batch": run.micro_batch,
                            "published_mfu": run.published_mfu,
                            "published_step_time_us": run.published_step_us(table.peak_flops),
                            "predicted_step_time_us": p.step_time_us,
                            "predicted_mfu": p.mfu, "error": p.error,
                            "peak_memory_bytes": p.peak_memory_bytes,
                        })
                    })
                    .collect();
                json!({"name": table.name, "title": table.title, "source": table.source,
                       "cluster": table.cluster, "rows": rows})
            })
            .collect();
        println!("{:#}", json!({ "tables": tables }));
        return Ok(());
    }
    for (table, predicted) in &out {
        println!("{} ({}): {}", table.name, table.cluster, table.title);
        println!("source: {}", table.source);
        let mut t = Table::new(&[
            "model",
            "GPUs",
            "tp x pp x dp",
            "batch",
            "published MFU",
            "step s",
            "predicted s",
            "MFU",
            "error",
            "peak memory",
        ]);
        for (run, p) in predicted {
            t.row(vec![
                run.model.clone(),
                run.gpus().to_string(),
                format!("{} x {} x {}", run.tensor, run.stages, run.data),
                format!("{} ({} per micro-batch)", run.global_batch, run.micro_batch),
                format!("{:.1}%", run.published_mfu * 100.0),
                format!("{:.2}", run.published_step_us(table.peak_flops) / 1e6),
                format!("{:.2}", p.step_time_us / 1e6),
                format!("{:.1}%", p.mfu * 100.0),
                format!("{:+.1}%", p.error * 100.0),
                bytes(p.peak_memory_bytes.iter().copied().max().unwrap_or(0)),
            ]);
        }
        print!("{}", t.render());
        let mut errors: Vec<f64> = predicted.iter().map(|(_, p)| p.error.abs()).collect();
        errors.sort_by(f64::total_cmp);
        if let (Some(median), Some(largest)) = (median(&errors), errors.last()) {
            println!("|error|: median {:.1}%, largest {:.1}%", median * 100.0, largest * 100.0);
        }
    }
    Ok(())
}

/// The median of sorted `values`.
fn median(values: &[f64]) -> Option<f64> {
    let n = values.len();
    match n {
        0 => None,
        _ if n % 2 == 1 => Some(values[n / 2]),
        _ => Some((values[n / 2 - 1] + values[n / 2]) / 2.0),
    }
}
