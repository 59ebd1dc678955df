//! The copies a device receives of tensors produced elsewhere, for the placers that fill
//! devices by a memory budget (m-TOPO in training, round-robin, balanced).
//!
//! A consumer's device keeps a copy of each input tensor produced on another device: until the
//! last consumer there finishes, or, in training, to the end of the step (backward reads it).
//! The budget placers count each copy as resident on its receiver, which bounds both cases.

use std::collections::HashSet;

use ordo_problem::PlaceProblem;

/// Marks a node not placed yet.
const UNPLACED: usize = usize::MAX;

/// The copies received so far, as `(tensor, device)` pairs.
#[derive(Default)]
pub(crate) struct Received {
    held: HashSet<(usize, usize)>,
}

impl Received {
    /// Bytes of the tensors that colocation group `g` would receive on `device`: those its
    /// members consume from placed producers on other devices, each counted once and not
    /// already on `device`. Time `O(in-edges of the group + their tensors)`.
    pub(crate) fn incoming(
        &self,
        problem: &PlaceProblem,
        g: usize,
        device: usize,
        device_of: &[usize],
    ) -> u64 {
        let new = self.new_tensors(problem, g, device, device_of);
        new.iter().fold(0u64, |sum, &t| sum.saturating_add(problem.tensors[t].bytes))
    }

    /// Records the copies of [`Received::incoming`] as received on `device`.
    pub(crate) fn receive(
        &mut self,
        problem: &PlaceProblem,
        g: usize,
        device: usize,
        device_of: &[usize],
    ) {
        let new = self.new_tensors(problem, g, device, device_of);
        self.held.extend(new.into_iter().map(|t| (t, device)));
    }

    /// The tensors group `g` would receive on `device` that are not there yet, each once.
    fn new_tensors(
        &self,
        problem: &PlaceProblem,
        g: usize,
        device: usize,
        device_of: &[usize],
    ) -> HashSet<usize> {
        let mut new = HashSet::new();
        for &v in &problem.groups[g] {
            for &e in &problem.in_edges[v] {
                for &t in &problem.edges[e].tensors {
                    let from = device_of[problem.tensors[t].producer];
                    if from != UNPLACED && from != device && !self.held.contains(&(t, device)) {
                        new.insert(t);
                    }
                }
            }
        }
        new
    }
}
