//! The Assigner's reordering criteria: the seed's two figures, and on random placed graphs a
//! simulation of the host and its threads that must never deadlock and must submit every
//! device's layers in the placement's order.

use std::sync::Arc;

use ordo_sched::{HostCriterion, HostWalk, LayerPlacement, PlacedLayers, threads};
use proptest::prelude::*;

/// Layer names `A`, `B`, ... to indices.
fn ids(names: &str) -> Vec<usize> {
    names.bytes().map(|b| (b - b'A') as usize).collect()
}

fn spawned(flags: &[bool]) -> String {
    flags.iter().enumerate().filter(|&(_, &s)| s).map(|(i, _)| (b'A' + i as u8) as char).collect()
}

/// Fig. 2: one device; code order A..F, the placer's order A, B, E, C, D, F. C waits for E,
/// which the host has not reached, and D for C: both wait on threads under either criterion.
#[test]
fn figure_2_spawns_c_and_d() {
    // A -> B -> E -> F, A -> C -> D -> F.
    let parents = vec![vec![], ids("A"), ids("A"), ids("C"), ids("B"), ids("DE")];
    let order = ids("ABECDF");
    let layers = LayerPlacement {
        code_order: &ids("ABCDEF"),
        parents: &parents,
        device_of: &[0; 6],
        device_order: std::slice::from_ref(&order),
    };
    for criterion in [HostCriterion::GlobalTopo, HostCriterion::GpuTopo] {
        assert_eq!(spawned(&threads(&layers, &order, criterion).unwrap()), "CD", "{criterion:?}");
    }
}

/// Fig. 3: two devices; G (the decoder's first layer, last in the code) comes first on device 1.
/// The global criterion makes B to F wait; the GPU-wise one only D (behind G on device 1), E
/// (its parent D waits) and F (the layer before it on device 0, E, waits).
#[test]
fn figure_3_spawns_d_e_f_gpu_wise_and_b_to_f_globally() {
    // A -> B -> C -> D -> E -> F; G alone.
    let parents = vec![vec![], ids("A"), ids("B"), ids("C"), ids("D"), ids("E"), vec![]];
    let device_of = [0, 0, 0, 1, 0, 0, 1];
    let layers = LayerPlacement {
        code_order: &ids("ABCDEFG"),
        parents: &parents,
        device_of: &device_of,
        device_order: &[ids("ABCEF"), ids("GD")],
    };
    let global = ids("AGBCDEF");
    let gpu = threads(&layers, &global, HostCriterion::GpuTopo).unwrap();
    assert_eq!(spawned(&gpu), "DEF");
    let everything = threads(&layers, &global, HostCriterion::GlobalTopo).unwrap();
    assert_eq!(spawned(&everything), "BCDEF");
    assert!(simulate(&layers, &gpu).is_ok());
    assert!(simulate(&layers, &everything).is_ok());
}

#[test]
fn orders_that_disagree_are_errors() {
    let parents = vec![vec![], vec![0]];
    let good = LayerPlacement {
        code_order: &[0, 1],
        parents: &parents,
        device_of: &[0, 1],
        device_order: &[vec![0], vec![1]],
    };
    assert!(threads(&good, &[0, 1], HostCriterion::GpuTopo).is_ok());
    let (both_on_0, one_missing) = ([vec![0, 1], vec![]], [vec![0], vec![]]);
    let cases: Vec<(LayerPlacement, &[usize])> = vec![
        (LayerPlacement { code_order: &[0, 0], ..good.clone() }, &[0, 1]),
        (LayerPlacement { code_order: &[0], ..good.clone() }, &[0, 1]),
        (LayerPlacement { device_of: &[1, 1], ..good.clone() }, &[0, 1]),
        (LayerPlacement { device_order: &both_on_0, ..good.clone() }, &[0, 1]),
        (LayerPlacement { device_order: &one_missing, ..good.clone() }, &[0, 1]),
        (good.clone(), &[0, 0]),
        (good.clone(), &[1]),
    ];
    for (k, (layers, global)) in cases.iter().enumerate() {
        for criterion in [HostCriterion::GlobalTopo, HostCriterion::GpuTopo] {
            let err = threads(layers, global, criterion).err();
            let global_only = k >= 5;
            if criterion == HostCriterion::GpuTopo && global_only {
                continue;
            }
            assert!(err.is_some(), "case {k} {criterion:?} accepted");
        }
    }
    let bad_parent = vec![vec![], vec![7]];
    let layers = LayerPlacement { parents: &bad_parent, ..good };
    assert!(threads(&layers, &[0, 1], HostCriterion::GpuTopo).is_err());
}

/// The protocol run: the host walks the code order, calling a layer itself when it is not
/// spawned (it waits there until the layer's device predecessor and graph parents have
/// submitted) and spawning a waiting thread otherwise; a thread submits once those have. Returns
/// each device's submission order, or the layer the host deadlocked on.
fn simulate(layers: &LayerPlacement<'_>, spawned: &[bool]) -> Result<Vec<Vec<usize>>, usize> {
    let n = layers.code_order.len();
    let mut position = vec![0; n];
    for order in layers.device_order {
        for (p, &l) in order.iter().enumerate() {
            position[l] = p;
        }
    }
    let before = |l: usize| {
        let (d, p) = (layers.device_of[l], position[l]);
        (p > 0).then(|| layers.device_order[d][p - 1])
    };
    let mut submitted = vec![false; n];
    let mut submissions = vec![Vec::new(); layers.device_order.len()];
    let ready = |l: usize, submitted: &[bool]| {
        before(l).is_none_or(|b| submitted[b]) && layers.parents[l].iter().all(|&p| submitted[p])
    };
    let mut waiting: Vec<usize> = Vec::new();
    let mut submit = |l: usize, submitted: &mut Vec<bool>| {
        submitted[l] = true;
        submissions[layers.device_of[l]].push(l);
    };
    let drain = |waiting: &mut Vec<usize>,
                 submitted: &mut Vec<bool>,
                 submit: &mut dyn FnMut(usize, &mut Vec<bool>)| {
        while let Some(i) = waiting.iter().position(|&l| ready(l, submitted)) {
            let l = waiting.remove(i);
            submit(l, submitted);
        }
    };
    for &layer in layers.code_order {
        drain(&mut waiting, &mut submitted, &mut submit);
        if spawned[layer] {
            waiting.push(layer);
            continue;
        }
        // The host blocks on this layer until the threads it waits for have submitted.
        drain(&mut waiting, &mut submitted, &mut submit);
        if !ready(layer, &submitted) {
            return Err(layer);
        }
        submit(layer, &mut submitted);
    }
    drain(&mut waiting, &mut submitted, &mut submit);
    match waiting.first() {
        Some(&stuck) => Err(stuck),
        None => Ok(submissions),
    }
}

/// A random DAG of `n` layers (edges from lower to higher index), a random placement on
/// `devices` devices whose per-device orders follow one random topological order, and a code
/// order that is another random topological order.
fn placed_graph() -> impl Strategy<Value = (Vec<Vec<usize>>, Vec<usize>, Vec<usize>, Vec<usize>)> {
    (2usize..14, 1usize..4).prop_flat_map(|(n, devices)| {
        (
            proptest::collection::vec(proptest::collection::vec(any::<bool>(), n), n),
            proptest::collection::vec(0..devices, n),
            proptest::collection::vec(any::<u32>(), n),
            proptest::collection::vec(any::<u32>(), n),
        )
            .prop_map(move |(edges, device_of, keys_a, keys_b)| {
                let parents: Vec<Vec<usize>> = (0..n)
                    .map(|v| (0..v).filter(|&u| edges[v][u] && (v - u) < 5).collect())
                    .collect();
                // Random topological orders: repeatedly take the ready layer of least key.
                let order = |keys: &[u32]| {
                    let mut done = vec![false; n];
                    let mut out = Vec::with_capacity(n);
                    while out.len() < n {
                        let next = (0..n)
                            .filter(|&v| !done[v] && parents[v].iter().all(|&p| done[p]))
                            .min_by_key(|&v| keys[v])
                            .unwrap();
                        done[next] = true;
                        out.push(next);
                    }
                    out
                };
                (parents.clone(), device_of, order(&keys_a), order(&keys_b))
            })
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(500))]
    /// Either criterion, any code order and placement: the host never deadlocks, every device
    /// receives its layers in the placement's order, every layer after its graph parents.
    #[test]
    fn the_protocol_never_deadlocks_and_keeps_every_device_order(
        (parents, device_of, global, code) in placed_graph()
    ) {
        let devices = device_of.iter().max().map_or(1, |d| d + 1);
        let mut device_order = vec![Vec::new(); devices];
        for &l in &global {
            device_order[device_of[l]].push(l);
        }
        let layers = LayerPlacement {
            code_order: &code,
            parents: &parents,
            device_of: &device_of,
            device_order: &device_order,
        };
        for criterion in [HostCriterion::GlobalTopo, HostCriterion::GpuTopo] {
            let spawned = threads(&layers, &global, criterion).unwrap();
            let submissions = simulate(&layers, &spawned);
            prop_assert!(submissions.is_ok(), "{criterion:?} deadlocks at {:?}", submissions);
            prop_assert_eq!(submissions.unwrap(), device_order.clone());
        }
        // Code written in the placement's order needs no thread at all.
        let in_order = LayerPlacement { code_order: &global, ..layers.clone() };
        for criterion in [HostCriterion::GlobalTopo, HostCriterion::GpuTopo] {
            let spawned = threads(&in_order, &global, criterion).unwrap();
            prop_assert!(spawned.iter().all(|&s| !s), "{criterion:?}");
        }
    }
}

/// `isNotWaiting` as the seed defines it, evaluated afresh (no cache, plain recursion): `v` is
/// reached, every layer before it on its device is reached, and nothing it waits for is
/// waiting. A layer met again on the current path (a cycle) is waiting.
fn naive_not_waiting(
    v: usize,
    reached: &[bool],
    waits: &[Vec<usize>],
    device_order: &[Vec<usize>],
    device_of: &[usize],
    path: &mut Vec<usize>,
) -> bool {
    let order = &device_order[device_of[v]];
    let before = &order[..order.iter().position(|&l| l == v).unwrap()];
    if !reached[v] || path.contains(&v) || before.iter().any(|&l| !reached[l]) {
        return false;
    }
    path.push(v);
    let ok = waits[v]
        .iter()
        .all(|&w| naive_not_waiting(w, reached, waits, device_order, device_of, path));
    path.pop();
    ok
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]
    /// The walk one layer at a time, with its cache, against the definitions evaluated afresh
    /// at each layer: `isNotWaiting` (above), and the global criterion (every layer before it
    /// in the global order reached, and everything it waits for). Each layer's arguments may
    /// also come from an earlier-reached layer the profile did not list (`came_from`), and
    /// half the cases reach the layers in any order at all (a profile whose graph is wrong).
    #[test]
    fn the_walk_agrees_with_the_definitions_evaluated_afresh(
        (parents, device_of, global, code) in placed_graph(),
        extra in proptest::collection::vec(any::<u8>(), 14),
        any_order in any::<bool>(),
    ) {
        let mut code = code;
        if any_order {
            code.sort_by_key(|&l| (extra[l], l));
        }
        let devices = device_of.iter().max().map_or(1, |d| d + 1);
        let mut device_order = vec![Vec::new(); devices];
        for &l in &global {
            device_order[device_of[l]].push(l);
        }
        let n = parents.len();
        let placed = Arc::new(
            PlacedLayers::new(parents.clone(), device_of.clone(), device_order.clone(), global.clone())
                .unwrap(),
        );
        for criterion in [HostCriterion::GlobalTopo, HostCriterion::GpuTopo] {
            let mut walk = HostWalk::new(placed.clone(), Some(criterion));
            let mut reached = vec![false; n];
            let mut waits = vec![Vec::new(); n];
            for (i, &layer) in code.iter().enumerate() {
                // Every third layer also reads an output of an earlier-reached layer.
                let came_from: Vec<usize> =
                    if i > 0 && extra[i] % 3 == 0 { vec![code[extra[i] as usize % i]] } else { vec![] };
                let on_host = walk.reach(layer, &came_from).unwrap();
                reached[layer] = true;
                let mut expected_waits = parents[layer].clone();
                let p = device_order[device_of[layer]].iter().position(|&l| l == layer).unwrap();
                if p > 0 {
                    expected_waits.push(device_order[device_of[layer]][p - 1]);
                }
                let g = global.iter().position(|&l| l == layer).unwrap();
                if criterion == HostCriterion::GlobalTopo && g > 0 {
                    expected_waits.push(global[g - 1]);
                }
                expected_waits.extend(came_from);
                expected_waits.sort_unstable();
                expected_waits.dedup();
                prop_assert_eq!(walk.waits(layer), &expected_waits[..]);
                waits[layer] = expected_waits;
                let expected = match criterion {
                    HostCriterion::GpuTopo => naive_not_waiting(
                        layer, &reached, &waits, &device_order, &device_of, &mut Vec::new(),
                    ),
                    HostCriterion::GlobalTopo => {
                        let prefix = global.iter().take_while(|&&l| reached[l]).count();
                        let inside = |l: usize| global.iter().position(|&x| x == l).unwrap() < prefix;
                        inside(layer) && waits[layer].iter().all(|&w| inside(w))
                    }
                };
                prop_assert_eq!(on_host, expected, "{:?} at layer {}", criterion, layer);
            }
            prop_assert_eq!(walk.code_order(), &code[..]);
            prop_assert!(walk.reach(code[0], &[]).is_err(), "reached twice");
        }
    }
}

/// Without reordering every layer runs on the host and waits for its graph parents only; a
/// layer waiting for one the host has not reached is found by `unreached_dependency`.
#[test]
fn without_reordering_the_host_runs_everything_and_waits_for_parents() {
    // A -> C, B -> C; device 0 runs C before A (a placement the code order does not follow).
    let placed = PlacedLayers::new(
        vec![vec![], vec![], vec![0, 1]],
        vec![0, 1, 0],
        vec![vec![2, 0], vec![1]],
        vec![1, 2, 0],
    );
    // C before A on device 0 although C reads A: the placement check does not judge orders.
    let placed = Arc::new(placed.unwrap());
    let mut walk = HostWalk::new(placed.clone(), None);
    assert!(walk.reach(0, &[]).unwrap());
    assert_eq!(walk.waits(0), &[] as &[usize]);
    assert!(walk.reach(2, &[]).unwrap());
    assert_eq!(walk.waits(2), &[0, 1]);
    // C waits for B, not reached: that is C's stuck dependency; A has submitted.
    assert_eq!(walk.unreached_dependency(&[2], |l| l == 0), Some((2, 1)));
    assert_eq!(walk.unreached_dependency(&[0], |_| false), None);
    let mut reordered = HostWalk::new(placed, Some(HostCriterion::GpuTopo));
    assert!(!reordered.reach(0, &[]).unwrap(), "A waits: C, before it on device 0, is not reached");
    assert!(reordered.reach(7, &[]).is_err(), "out of range");
}
