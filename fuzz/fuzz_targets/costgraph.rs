//! Any text given to the cost-graph reader gives a graph or an error, never a panic or a hang;
//! a graph it accepts writes back and reads again to the same graph.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    if let Ok(graph) = ordo_cost::parse_costgraph(text, "fuzz.json") {
        let again = ordo_cost::to_json_string(&graph);
        let back =
            ordo_cost::parse_costgraph(&again, "again.json").expect("what was written reads");
        assert_eq!(back.nodes.len(), graph.nodes.len());
    }
});
