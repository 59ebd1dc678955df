//! The plan's streams: per device its compute stream, its sub-compute stream if used, then a
//! tx and an rx stream per peer, with their tasks.

use std::collections::{BTreeSet, HashMap};

use ordo_problem::Placement;

use super::transfers::Send;
use crate::plan::{Stream, StreamKind, TaskId};

/// The compute stream of a node on the sub-stream or not.
pub(super) fn compute_kind(on_sub_stream: bool) -> StreamKind {
    if on_sub_stream { StreamKind::SubCompute } else { StreamKind::Compute }
}

/// Per device: compute stream, sub-stream if used, tx streams, rx streams (peers ascending),
/// with their tasks.
pub(super) fn make_streams(
    placement: &Placement,
    sub: &[bool],
    sends: &[Send],
    devices: usize,
) -> Vec<Stream> {
    let n = placement.device_of.len();
    let mut tx: Vec<BTreeSet<usize>> = vec![BTreeSet::new(); devices];
    let mut rx: Vec<BTreeSet<usize>> = vec![BTreeSet::new(); devices];
    for send in sends {
        tx[send.from].insert(send.to);
        rx[send.to].insert(send.from);
    }
    let mut streams = Vec::new();
    let mut link_index = HashMap::new();
    for d in 0..devices {
        let on = |side: bool| -> Vec<TaskId> {
            placement.order[d]
                .iter()
                .filter(|&&v| sub[v] == side)
                .map(|&v| TaskId(v as u32))
                .collect()
        };
        streams.push(Stream { device: d, kind: StreamKind::Compute, tasks: on(false) });
        let sub_tasks = on(true);
        if !sub_tasks.is_empty() {
            streams.push(Stream { device: d, kind: StreamKind::SubCompute, tasks: sub_tasks });
        }
        let links = tx[d].iter().map(|&peer| StreamKind::Tx { peer });
        for kind in links.chain(rx[d].iter().map(|&peer| StreamKind::Rx { peer })) {
            link_index.insert((d, kind), streams.len());
            streams.push(Stream { device: d, kind, tasks: Vec::new() });
        }
    }
    for (k, send) in sends.iter().enumerate() {
        let task = TaskId((n + k) as u32);
        streams[link_index[&(send.from, StreamKind::Tx { peer: send.to })]].tasks.push(task);
        streams[link_index[&(send.to, StreamKind::Rx { peer: send.from })]].tasks.push(task);
    }
    streams
}
