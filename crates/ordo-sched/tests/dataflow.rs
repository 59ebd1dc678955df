//! Dataflow validation: a plan whose task may read a buffer before it is written is refused.
//! The fast check of `validate` is compared with a naive one (the transitive closure of the
//! task graph) on plans with one wait removed or one stream reversed.

use ordo_cost::{Optimizer, StepMode, synth};
use ordo_place::{Algorithm, Devices, PlaceOptions, PlaceProblem, place};
use ordo_sched::{Plan, SchedError, build_plan, task_graph, task_order, validate};

/// Whether every reader of every buffer comes after its producer, by the transitive closure
/// of the task graph (quadratic: small plans only).
fn naive_dataflow_ok(plan: &Plan) -> bool {
    let n = plan.tasks.len();
    let preds = task_graph(plan);
    let Ok(order) = task_order(plan) else { return false };
    // before[t]: every task t transitively waits for.
    let mut before: Vec<Vec<bool>> = vec![vec![false; n]; n];
    for t in order {
        let t = t.0 as usize;
        for p in &preds[t] {
            let p = p.0 as usize;
            before[t][p] = true;
            let (lo, hi) = if p < t { before.split_at_mut(t) } else { before.split_at_mut(p) };
            let (row_t, row_p) = if p < t { (&mut hi[0], &lo[p]) } else { (&mut lo[t], &hi[0]) };
            for (x, &y) in row_t.iter_mut().zip(row_p) {
                *x |= y;
            }
        }
    }
    plan.buffers.iter().all(|b| {
        b.readers.iter().all(|r| *r == b.producer || before[r.0 as usize][b.producer.0 as usize])
    })
}

fn plans() -> Vec<Plan> {
    let mut plans = Vec::new();
    for (seed, nodes, devices) in [(1, 30, 2), (2, 50, 3)] {
        let graph = synth(nodes, seed);
        for mode in [StepMode::ForwardOnly, StepMode::Training { optimizer: Optimizer::Adam }] {
            let problem =
                PlaceProblem::new(&graph, Devices::uniform(devices, u64::MAX / 8), mode).unwrap();
            for algo in [Algorithm::MTopo, Algorithm::MEtf] {
                let placement = place(&problem, algo, &PlaceOptions::default()).unwrap();
                plans.push(build_plan(&problem, &placement).unwrap());
            }
        }
    }
    plans
}

fn is_dataflow_error(e: &SchedError) -> bool {
    matches!(e, SchedError::Buffer { problem, .. } if problem.contains("may run before its producer"))
}

#[test]
fn removing_a_wait_is_refused_exactly_when_a_read_may_come_before_its_write() {
    let mut refused = 0;
    for plan in plans() {
        assert!(validate(&plan).is_ok() && naive_dataflow_ok(&plan));
        for t in 0..plan.tasks.len() {
            for w in 0..plan.tasks[t].waits.len() {
                let mut broken = plan.clone();
                broken.tasks[t].waits.remove(w);
                let naive = naive_dataflow_ok(&broken);
                match validate(&broken) {
                    Ok(()) => assert!(naive, "a read before its write was accepted"),
                    Err(e) => {
                        assert!(is_dataflow_error(&e), "{e}");
                        assert!(!naive, "refused a plan whose reads all follow their writes: {e}");
                        refused += 1;
                    }
                }
            }
        }
    }
    assert!(refused > 20, "only {refused} removals were refused");
}

#[test]
fn a_reversed_stream_is_a_cycle_or_a_read_before_its_write() {
    let mut refused = 0;
    for plan in plans() {
        for s in 0..plan.streams.len() {
            if plan.streams[s].tasks.len() < 2 {
                continue;
            }
            let mut broken = plan.clone();
            broken.streams[s].tasks.reverse();
            let naive = naive_dataflow_ok(&broken);
            match validate(&broken) {
                Ok(()) => assert!(naive, "stream {s} reversed was accepted with a bad read"),
                Err(SchedError::Cycle { .. }) => refused += 1,
                Err(e) => {
                    assert!(is_dataflow_error(&e) && !naive, "{e}");
                    refused += 1;
                }
            }
        }
    }
    assert!(refused > 0);
}
