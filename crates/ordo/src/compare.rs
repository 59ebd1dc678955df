//! Every placer on one problem, side by side: each placement and the simulated step of its
//! plan, for a shell to tabulate or draw.

use ordo_place::{Algorithm, AutoOptions, AutoProgress};
use ordo_sim::SimOptions;

use crate::error::Result;
use crate::{Placed, Placer, Problem, Strategy};

/// One placer's result in a comparison.
#[derive(Debug)]
pub struct PlacerResult {
    /// The placer's name.
    pub placer: String,
    /// Its placement (and, for `auto`, its search) with the simulated step time of the
    /// placement's plan in µs (or why there is none), or why it found no placement.
    pub outcome: Result<(Placed, Result<f64>)>,
}

/// How far a comparison has got.
#[derive(Clone, Copy, Debug)]
pub enum CompareProgress<'a> {
    /// Algorithm `index` of `of` (the fast placers) is placing.
    Placing {
        /// The algorithm's name.
        algo: &'static str,
        /// Its position among the fast placers.
        index: usize,
        /// How many fast placers there are.
        of: usize,
    },
    /// `auto` is searching.
    Auto(&'a AutoProgress),
}

/// Places `problem` with every algorithm ([`Algorithm::all`]) and then `auto` (with
/// `auto_options`), and simulates each placement's plan with `options`; `progress` hears
/// which placer runs. A placer that fails is a row with its error, not the end of the
/// comparison.
pub fn compare_placers(
    problem: &Problem,
    auto_options: &AutoOptions,
    options: &SimOptions,
    progress: &mut dyn FnMut(CompareProgress<'_>),
) -> Vec<PlacerResult> {
    let all = Algorithm::all();
    let mut results: Vec<PlacerResult> = all
        .iter()
        .enumerate()
        .map(|(index, &algo)| {
            progress(CompareProgress::Placing { algo: algo.name(), index, of: all.len() });
            let placer = Placer::Algorithm(algo, auto_options.place.clone());
            result(problem, &placer, options, &mut |_| {})
        })
        .collect();
    let auto = Placer::Auto(auto_options.clone());
    results.push(result(problem, &auto, options, &mut |p| progress(CompareProgress::Auto(p))));
    results
}

/// `placer`'s placement of `problem` and its simulated step.
fn result(
    problem: &Problem,
    placer: &Placer,
    options: &SimOptions,
    report: &mut dyn FnMut(&AutoProgress),
) -> PlacerResult {
    let outcome = crate::place_reporting(problem, placer, report).map(|placed| {
        let simulated = simulated_us(problem, &placed, options);
        (placed, simulated)
    });
    PlacerResult { placer: placer.name().to_string(), outcome }
}

/// The simulated step of the plan of `placed`.
fn simulated_us(problem: &Problem, placed: &Placed, options: &SimOptions) -> Result<f64> {
    let planned = crate::plan(problem, &Strategy::Given(placed.placement.clone()))?;
    Ok(crate::simulate(&planned, options)?.step_time_us)
}
