//! Collective times: against the one-node ring ordo had before nodes, against NCCL's published
//! bus-bandwidth formulas (`nccl-tests`' `doc/PERFORMANCE.md`), and against a count of the
//! bytes every link of a multi-node ring carries; the shipped clusters of nodes.

use ordo_cost::{
    AllReduceAlgorithm, Cluster, Collectives, CommModel, InterNode, LinkSpec, NetworkSpec, Topology,
};

const GB: f64 = 1e9;

/// A link of `gbytes` GB/s and `latency_us`.
fn link(gbytes: f64, latency_us: f64) -> CommModel {
    LinkSpec { latency_us, bandwidth_bytes_per_s: gbytes * GB }.comm()
}

/// `per_node` ranks per node, NVLink-like inside, a card of `card` GB/s each.
fn nodes(per_node: usize, card: f64, latency_us: f64) -> Collectives {
    Collectives {
        inter: Some(InterNode { per_node, link: link(card, latency_us) }),
        ..Collectives::flat(link(300.0, latency_us))
    }
}

/// NCCL's bus bandwidth of an all-reduce of `bytes` taking `us`: `algbw * 2 (n - 1) / n`.
fn all_reduce_busbw(ranks: usize, bytes: u64, us: u64) -> f64 {
    let algbw = bytes as f64 / (us as f64 * 1e-6);
    algbw * 2.0 * (ranks - 1) as f64 / ranks as f64
}

#[test]
fn one_node_ring_is_the_ring_ordo_had() {
    for comm in [CommModel::baechi_default(), link(48.0, 7.0), link(1.25, 25.0)] {
        let group = Collectives::flat(comm);
        for ranks in [1, 2, 3, 8, 64, 1000] {
            for bytes in [0, 1, 4 << 10, 25 << 20, 7_000_000_001] {
                assert_eq!(
                    group.all_reduce_us(ranks, bytes),
                    comm.ring_all_reduce_us(ranks, bytes),
                    "{comm} {ranks} {bytes}"
                );
            }
        }
    }
}

#[test]
fn bus_bandwidth_is_the_bottleneck_link() {
    // Latency-free links, so that the bus bandwidth is the bandwidth term alone.
    let bytes = 1u64 << 36;
    let flat = Collectives::flat(link(300.0, 0.0));
    for ranks in [2, 4, 8] {
        let busbw = all_reduce_busbw(ranks, bytes, flat.all_reduce_us(ranks, bytes));
        assert!((busbw / (300.0 * GB) - 1.0).abs() < 1e-5, "{ranks}: {busbw}");
        // Reduce-scatter and all-gather: busbw = algbw * (n - 1) / n.
        for us in [flat.reduce_scatter_us(ranks, bytes), flat.all_gather_us(ranks, bytes)] {
            let busbw = bytes as f64 / (us as f64 * 1e-6) * (ranks - 1) as f64 / ranks as f64;
            assert!((busbw / (300.0 * GB) - 1.0).abs() < 1e-5, "{ranks}: {busbw}");
        }
    }
    // Across nodes: min(g / (g - 1) * intra, g * card).
    for (g, card) in [(8, 25.0), (8, 50.0), (4, 100.0), (1, 25.0), (2, 200.0)] {
        let group = nodes(g, card, 0.0);
        for m in [2, 16, 128] {
            let ranks = g * m;
            let busbw = all_reduce_busbw(ranks, bytes, group.all_reduce_us(ranks, bytes));
            let intra = if g > 1 { g as f64 / (g - 1) as f64 * 300.0 } else { f64::INFINITY };
            let expected = intra.min(g as f64 * card) * GB;
            assert!((busbw / expected - 1.0).abs() < 1e-5, "g {g} m {m}: {busbw} vs {expected}");
        }
    }
}

/// The ring all-reduce across `m` nodes of `g` ranks, link by link: NCCL's `g` channels, each
/// a ring over all ranks entering and leaving every node through a different rank's card.
/// Every step, each rank sends `bytes / (R g)` per channel to its successor in that channel;
/// a step lasts as long as the busiest link's bytes take, plus the slowest hop's latency.
fn ring_by_links(g: usize, m: usize, intra: CommModel, card: CommModel, bytes: u64) -> f64 {
    let ranks = g * m;
    let chunk = bytes as f64 / ranks as f64 / g as f64;
    let (mut nvlink, mut nic) = (vec![0.0; ranks], vec![0.0; ranks]);
    for channel in 0..g {
        // The channel's order inside a node starts after the rank whose card it leaves by.
        let order: Vec<usize> =
            (0..m).flat_map(|node| (1..=g).map(move |k| node * g + (channel + k) % g)).collect();
        for (i, &from) in order.iter().enumerate() {
            let to = order[(i + 1) % ranks];
            if from / g == to / g { nvlink[from] += chunk } else { nic[from] += chunk }
        }
    }
    let busiest = (0..ranks)
        .map(|r| (nvlink[r] * intra.us_per_byte).max(nic[r] * card.us_per_byte))
        .fold(0.0, f64::max);
    let latency = if m > 1 { card.fixed_us.max(intra.fixed_us) } else { intra.fixed_us };
    2.0 * (ranks - 1) as f64 * (busiest + latency)
}

#[test]
fn multi_node_ring_matches_a_count_of_each_links_bytes() {
    for (g, m, card, latency) in [(8, 2, 25.0, 5.0), (8, 16, 50.0, 5.0), (4, 3, 12.5, 10.0)] {
        let group = nodes(g, card, latency);
        for bytes in [1 << 20, 100 << 20, 1 << 33] {
            let counted = ring_by_links(g, m, group.intra, link(card, latency), bytes);
            let modelled = group.all_reduce_us(g * m, bytes) as f64;
            assert!((modelled - counted).abs() <= 1.0, "g {g} m {m} {bytes}: {modelled} {counted}");
        }
    }
}

#[test]
fn tree_wins_small_messages_across_many_nodes_and_nccl_takes_the_faster() {
    let group = nodes(8, 25.0, 5.0);
    let ranks = 8 * 128;
    let time = |algorithm, bytes| group.with_algorithm(algorithm).all_reduce_us(ranks, bytes);
    let small = 64 << 10;
    assert!(time(AllReduceAlgorithm::Tree, small) * 10 < time(AllReduceAlgorithm::Ring, small));
    // Large messages on two nodes: both move the same bytes over the cards; within 15%. On
    // 128 nodes the ring's 2 (R - 1) latencies weigh even at 1 GiB (why NCCL added trees).
    let large = 1 << 30;
    let two = |algorithm| group.with_algorithm(algorithm).all_reduce_us(16, large);
    let (ring, tree) = (two(AllReduceAlgorithm::Ring), two(AllReduceAlgorithm::Tree));
    assert!((ring as f64 / tree as f64 - 1.0).abs() < 0.15, "{ring} {tree}");
    assert!(time(AllReduceAlgorithm::Tree, large) < time(AllReduceAlgorithm::Ring, large));
    for bytes in [small, 1 << 20, 16 << 20, large] {
        let nccl = time(AllReduceAlgorithm::Nccl, bytes);
        let best = time(AllReduceAlgorithm::Ring, bytes).min(time(AllReduceAlgorithm::Tree, bytes));
        assert_eq!(nccl, best, "{bytes}");
    }
    // Tree latency: 2 (g - 1) node hops and 2 ceil(log2 m) network hops; 0 bytes.
    assert_eq!(time(AllReduceAlgorithm::Tree, 0), (2 * 7 * 5 + 2 * 7 * 5) as u64);
}

#[test]
fn hierarchical_is_reduce_scatter_all_reduce_all_gather() {
    let group = nodes(8, 25.0, 5.0).with_algorithm(AllReduceAlgorithm::Hierarchical);
    let bytes = 800 << 20;
    let inside = Collectives::flat(group.intra).all_reduce_us(8, bytes);
    let across = Collectives::flat(link(25.0, 5.0)).all_reduce_us(16, bytes / 8);
    assert_eq!(group.all_reduce_us(128, bytes), inside + across);
    // Within a node it is the ring.
    assert_eq!(
        group.all_reduce_us(8, bytes),
        Collectives::flat(group.intra).all_reduce_us(8, bytes)
    );
    for algorithm in AllReduceAlgorithm::ALL {
        assert_eq!(AllReduceAlgorithm::from_name(algorithm.as_str()), Some(algorithm));
        assert_eq!(group.with_algorithm(algorithm).all_reduce_us(1, bytes), 0);
    }
}

#[test]
fn clusters_of_nodes() {
    let cluster = Cluster::builtin("h100x8-ib-ndr").unwrap();
    assert_eq!((cluster.node_count(), cluster.devices_per_node()), (16, 8));
    assert_eq!(cluster.device_count(), 128);
    let nvlink = LinkSpec { latency_us: 7.0, bandwidth_bytes_per_s: 375e9 };
    let card = LinkSpec { latency_us: 10.0, bandwidth_bytes_per_s: 45e9 };
    assert_eq!(cluster.link(8, 15), nvlink);
    assert_eq!(cluster.link(7, 8), card);
    assert_eq!(cluster.link(127, 0), card);
    assert_eq!(cluster.link(9, 9), LinkSpec::LOCAL);
    assert_eq!(cluster.device(9).name, "node1.gpu1");
    assert_eq!(cluster.device_index("node15.gpu7"), Some(127));
    assert_eq!(cluster.device_index("node16.gpu0"), None);
    assert_eq!(cluster.device_index("gpu0"), None);
    assert_eq!(cluster.roofline(127), cluster.roofline(0));
    assert_eq!(cluster.memory_limits(), vec![80 << 30; 128]);

    // Resized, and a 2:1 oversubscribed tree halves the cards' share.
    let network = NetworkSpec {
        topology: Topology::FatTree { oversubscription: 2.0 },
        ..*cluster.network().unwrap()
    };
    let big = cluster.clone().with_nodes(1024, Some(network)).unwrap();
    assert_eq!(big.device_count(), 8192);
    assert_eq!(big.link(0, 8).bandwidth_bytes_per_s, 22.5e9);
    let text = big.to_json_string();
    assert!(text.contains("\"nodes\": 1024") && text.contains("\"oversubscription\": 2"), "{text}");
    assert_eq!(Cluster::parse(&text, "big.json").unwrap(), big);

    // The collectives of a group with one rank per node (ranks a node apart) or eight.
    let one = cluster.collectives(16, 8);
    assert_eq!(one.inter.unwrap().per_node, 1);
    assert_eq!(one.layout(16), (1, 16));
    let eight = cluster.collectives(128, 1);
    assert_eq!(eight.layout(128), (8, 16));
    assert_eq!(eight.layout(8), (8, 1));
    assert!(eight.all_reduce_us(128, 1 << 30) < one.all_reduce_us(128, 1 << 30));
    // A group that fits on one node never touches the network; a stride longer than a node
    // puts every rank on a node of its own.
    assert!(cluster.collectives(8, 1).inter.is_none());
    assert!(cluster.collectives(2, 4).inter.is_none());
    assert_eq!(cluster.collectives(3, 4).inter.unwrap().per_node, 2);
    assert_eq!(cluster.collectives(2, 16).inter.unwrap().per_node, 1);

    // Refused: no nodes, nodes without a network, too many devices, bad oversubscription.
    let bare = Cluster::builtin("h100x8-nvlink").unwrap();
    let message = |r: Result<Cluster, ordo_cost::ClusterError>| r.unwrap_err().to_string();
    assert!(message(bare.clone().with_nodes(2, None)).contains("2 nodes but no \"network\""));
    assert!(message(bare.clone().with_nodes(0, None)).contains("\"nodes\" is 0"));
    let too_many = message(cluster.clone().with_nodes(200_000, None));
    assert!(too_many.contains("1600000 devices; at most 1048576"), "{too_many}");
    let blocked = NetworkSpec { topology: Topology::FatTree { oversubscription: 0.5 }, ..network };
    let text = message(bare.with_nodes(2, Some(blocked)));
    assert!(text.contains("\"network\": \"oversubscription\" is 0.5"), "{text}");
}
