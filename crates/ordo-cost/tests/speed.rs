//! Reading speed of a large cost graph. Ignored by default; run with
//! `cargo test --release -p ordo-cost --test speed -- --ignored --nocapture`.

use std::time::Instant;

use ordo_cost::{read_costgraph, synth, write_costgraph};

#[test]
#[ignore = "timing; run in release mode"]
fn read_100k_nodes() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("synth_100k.json");
    let graph = synth(100_000, 1);
    let start = Instant::now();
    write_costgraph(&graph, &path).unwrap();
    let write_s = start.elapsed().as_secs_f64();
    let size = std::fs::metadata(&path).unwrap().len();
    let mut best = f64::INFINITY;
    for _ in 0..5 {
        let start = Instant::now();
        let back = read_costgraph(&path).unwrap();
        best = best.min(start.elapsed().as_secs_f64());
        assert_eq!(back.nodes.len(), 100_000);
    }
    println!(
        "100k nodes, {} links, {:.1} MB: write {:.0} ms, read {:.0} ms (best of 5)",
        graph.links.len(),
        size as f64 / 1e6,
        write_s * 1e3,
        best * 1e3
    );
}
