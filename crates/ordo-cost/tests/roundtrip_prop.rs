//! Random synthetic graphs survive write -> read unchanged.

use ordo_cost::{parse_costgraph, synth, to_json_string};
use proptest::prelude::*;

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn synth_graphs_round_trip(nodes in 0usize..400, seed in any::<u64>()) {
        let graph = synth(nodes, seed);
        let text = to_json_string(&graph);
        let back = parse_costgraph(&text, "synth.json").unwrap();
        prop_assert_eq!(&back, &graph);
        prop_assert_eq!(to_json_string(&back), text);
    }
}
