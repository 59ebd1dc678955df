//! m-SCT: Baechi's sample graphs, favorite children by hand, and properties on random graphs.

mod common;

use common::{BYTES_AS_US, check_order, graph, problem, problem_with, sample};
use ordo_cost::{CostGraph, CostLink, CostNode, StepMode, TensorRef};
use ordo_place::{
    PlaceError, PlaceProblem, Placement, m_etf, m_sct, m_sct_with_favorites, makespan_with_order,
    simulate,
};
use proptest::prelude::*;

/// The favorite children Baechi's LP (solved by GLPK, threshold 0.1) gives `synth_1k`, as
/// `parent>child` node indices.
const SYNTH_1K_GLPK_FAVORITES: &str = "\
2>14 3>17 13>28 15>37 20>25 21>33 23>44 26>43 30>41 34>47 39>49 41>62 45>70 47>54 50>82 \
58>85 62>78 65>87 68>76 72>120 73>94 74>111 82>104 84>112 85>97 86>110 88>106 89>98 91>102 \
92>113 97>130 98>132 100>133 102>134 103>136 105>128 108>135 111>123 114>117 115>131 116>127 \
118>138 119>144 124>147 127>140 128>156 129>145 136>142 137>167 138>151 140>157 142>161 \
144>153 146>158 153>164 154>165 157>173 159>175 160>180 162>188 164>189 167>185 178>200 \
182>233 184>191 185>209 188>211 189>208 203>218 205>222 211>224 212>229 216>237 217>234 \
232>235 235>246 236>252 239>262 240>261 247>271 253>270 256>268 260>265 264>285 265>287 \
269>283 271>293 272>294 273>292 276>282 279>288 280>295 289>304 295>323 298>320 299>314 \
300>319 303>321 307>330 316>327 317>331 321>324 323>325 324>338 328>337 329>339 335>346 \
337>340 343>351 346>349 347>348 349>375 351>373 355>368 356>377 361>389 363>378 370>383 \
374>388 376>397 378>407 379>391 380>390 381>399 384>396 387>398 388>392 389>405 392>416 \
400>418 401>413 405>414 406>415 408>440 409>417 412>420 415>427 418>439 419>444 420>443 \
425>445 429>453 431>448 433>457 434>462 440>454 441>456 443>470 445>478 447>461 448>465 \
451>467 452>471 453>477 456>464 457>475 458>483 463>492 464>493 468>498 469>499 471>497 \
472>484 474>501 478>485 480>509 482>513 488>514 490>517 492>510 497>505 498>504 503>528 \
506>520 507>530 508>531 509>522 510>521 512>535 515>532 518>549 519>543 520>544 524>546 \
525>545 532>551 542>560 543>555 544>561 546>562 548>554 552>588 553>582 554>581 560>585 \
565>570 570>597 576>602 578>590 582>601 587>598 593>611 594>609 599>607 602>610 604>608 \
606>632 607>626 608>614 609>625 610>628 611>623 612>630 615>644 617>635 623>636 626>640 \
627>639 628>642 632>637 638>650 640>648 641>652 642>657 643>655 644>651 646>666 649>674 \
657>721 658>665 664>685 666>678 669>680 676>701 677>703 678>688 680>690 682>698 683>696 \
684>692 686>699 691>706 697>713 699>727 700>711 701>715 702>728 706>729 708>738 711>740 \
718>748 719>745 720>734 725>741 727>749 729>756 732>751 734>770 735>772 737>773 741>771 \
742>761 745>769 746>758 747>759 754>776 760>787 763>783 768>780 770>775 773>778 774>794 \
777>859 780>789 781>791 784>792 786>799 788>805 790>818 791>807 795>819 796>815 797>808 \
799>811 801>816 802>820 804>813 805>833 814>828 817>835 827>856 833>866 835>862 836>864 \
838>855 840>851 843>846 844>854 850>878 853>869 858>872 867>886 869>894 871>897 872>891 \
879>895 886>892 889>910 890>920 891>909 893>901 894>906 895>916 897>911 898>922 906>929 \
908>924 909>932 911>931 916>930 923>945 925>943 929>953 931>947 932>937 933>938 935>982 \
939>976 940>963 941>969 943>965 944>961 955>972 956>989 962>980 965>978 971>983 972>979 \
974>981 987>992 988>991 989>997";

fn parse_favorites(text: &str, nodes: usize) -> Vec<Option<usize>> {
    let mut favorite = vec![None; nodes];
    for pair in text.split_whitespace() {
        let (parent, child) = pair.split_once('>').unwrap();
        favorite[parent.parse::<usize>().unwrap()] = Some(child.parse().unwrap());
    }
    favorite
}

#[test]
fn baechi_sample_graphs() {
    // Baechi's m-SCT makespans (its simulator on the placement, ms to 0.01; GLPK solved its LP).
    // Ours match on the four models. On synth_1k the LP's optimum is not unique: GLPK returns a
    // vertex with 342 favorites, our interior-point solver a point inside the optimal face with
    // fewer, and the placement differs (with GLPK's favorites it is Baechi's exactly, below).
    let expected =
        [("resnet50", 25.94), ("inception_v3", 33.59), ("transformer", 94.69), ("gnmt", 150.71)];
    for (name, baechi_ms) in expected {
        let p = sample(name);
        let placement = m_sct(&p, 0.1).unwrap();
        assert_eq!(placement.algo, "m-sct");
        let makespan = simulate(&p, &placement.device_of).makespan_us as f64;
        assert!((makespan - baechi_ms * 1000.0).abs() <= 5.0, "{name}: {makespan} µs");
    }
    let p = sample("synth_1k");
    let makespan = simulate(&p, &m_sct(&p, 0.1).unwrap().device_of).makespan_us as f64;
    assert!((makespan / 344_890.0 - 1.0).abs() < 0.05, "synth_1k: {makespan} µs");
}

#[test]
fn with_baechis_favorites_m_sct_is_baechis() {
    let p = sample("synth_1k");
    let favorite = parse_favorites(SYNTH_1K_GLPK_FAVORITES, p.len());
    assert_eq!(favorite.iter().flatten().count(), 342);
    let placement = m_sct_with_favorites(&p, &favorite).unwrap();
    assert_eq!(simulate(&p, &placement.device_of).makespan_us, 344_890);
    // m-SCT's own schedule, AWAKE devices' waits included, ends at 369,414 µs; the makespan
    // reported is that of the device orders run without those waits.
    let orders = makespan_with_order(&p, &placement.device_of, &placement.order).unwrap();
    assert_eq!(placement.makespan_us, orders);
    assert!(orders < 369_414, "{orders}");
}

#[test]
fn without_favorites_m_sct_is_m_etf() {
    for name in ["inception_v3", "gnmt"] {
        let p = sample(name);
        let (sct, etf) = (m_sct(&p, 0.0).unwrap(), m_etf(&p).unwrap());
        assert_eq!((sct.device_of, sct.order), (etf.device_of, etf.order), "{name}");
        assert_eq!(sct.makespan_us, etf.makespan_us, "{name}");
    }
}

/// a (device 0) and z (device 1) feed b; a also feeds q. With b as a's favorite child, device
/// 0 stays AWAKE after a: b can start there first (at 10 + 50, z's tensor) rather than on
/// device 1 (10 + 100, a's tensor), so device 0 waits for it instead of starting q at 10.
fn awake() -> CostGraph {
    graph(
        &[("a", 10), ("z", 10), ("b", 10), ("q", 100)],
        &[(0, 2, &[(0, 100)]), (0, 3, &[(1, 1000)]), (1, 2, &[(0, 50)])],
    )
}

#[test]
fn a_device_waits_for_its_favorite_child() {
    let p = problem(&awake(), 2);
    assert_eq!(p.topo_rank, [0, 1, 3, 2]);
    let favorite = [Some(2), None, None, None];
    let sct = m_sct_with_favorites(&p, &favorite).unwrap();
    assert_eq!(sct.device_of, [0, 1, 0, 0]);
    assert_eq!(sct.order, [vec![0, 2, 3], vec![1]]);
    assert_eq!(sct.makespan_us, 10 + 50 + 10 + 100);
    // m-ETF starts q (smaller rank) at 10 and b when device 0 is free again.
    let etf = m_etf(&p).unwrap();
    assert_eq!(etf.order, [vec![0, 3, 2], vec![1]]);
    assert_eq!(etf.makespan_us, 10 + 100 + 10);
    assert_eq!(m_sct_with_favorites(&p, &[None; 4]).unwrap().order, etf.order);
}

#[test]
fn an_urgent_op_goes_before_the_favorite_child() {
    // With q's input free to move, q could start anywhere at 10: it is urgent, and the AWAKE
    // device 0 runs it rather than wait for b.
    let mut g = awake();
    g.links[1] = CostLink::new(0, 3, vec![TensorRef::new("a:1", 0, &BYTES_AS_US)]);
    let p = problem(&g, 2);
    let sct = m_sct_with_favorites(&p, &[Some(2), None, None, None]).unwrap();
    assert_eq!(sct.order, [vec![0, 3, 2], vec![1]]);
    assert_eq!(sct.makespan_us, 120);
}

#[test]
fn bad_thresholds_and_favorites_are_errors() {
    let p = problem(&awake(), 2);
    assert!(matches!(m_sct(&p, f64::NAN), Err(PlaceError::Lp(message)) if message.contains("NaN")));
    let invalid = |favorite: &[Option<usize>]| match m_sct_with_favorites(&p, favorite) {
        Err(PlaceError::Invalid(message)) => message,
        other => panic!("expected Invalid, got {other:?}"),
    };
    assert!(invalid(&[None; 3]).contains("3 favorite children given for 4 nodes"));
    assert!(invalid(&[Some(1), None, None, None]).contains("not one of its successors"));
}

fn random_problem(seed: u64) -> PlaceProblem {
    let mut rng = fastrand::Rng::with_seed(seed);
    let n = rng.usize(1..=25);
    let mut g = CostGraph::default();
    for i in 0..n {
        let mut node = CostNode::new(i as u64, format!("n{i}"), rng.u64(1..200));
        node.output_memory = vec![rng.u64(0..300)];
        node.persistent_memory = rng.u64(0..100);
        g.nodes.push(node);
    }
    let density = 0.05 + 0.4 * rng.f64();
    for j in 0..n {
        for i in 0..j {
            if rng.f64() < density {
                let bytes = g.nodes[i].output_memory[0];
                let tensor = TensorRef::new(format!("n{i}:0"), bytes, &BYTES_AS_US);
                g.links.push(CostLink::new(i as u64, j as u64, vec![tensor]));
            }
        }
    }
    let m = rng.usize(1..=4);
    let limit = if rng.bool() { u64::MAX / 4 } else { 400 + rng.u64(0..2000) };
    problem_with(&g, &vec![limit; m], StepMode::ForwardOnly)
}

fn check(p: &PlaceProblem, placement: &Placement) -> Result<(), TestCaseError> {
    let m = p.devices.count();
    prop_assert!(placement.device_of.iter().all(|&d| d < m));
    check_order(p, placement)?;
    for d in 0..m {
        prop_assert!(placement.peak_memory_bytes[d] <= p.devices.memory[d]);
    }
    prop_assert!(placement.makespan_us >= ordo_place::lower_bounds(p).best_us());
    prop_assert!(
        simulate(p, &placement.device_of).makespan_us >= ordo_place::lower_bounds(p).best_us()
    );
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(100))]

    /// m-SCT places every node within the memory limits, or says that memory ran out.
    #[test]
    fn m_sct_places_everything_or_runs_out_of_memory(seed in any::<u64>()) {
        let p = random_problem(seed);
        match m_sct(&p, 0.1) {
            Ok(placement) => check(&p, &placement)?,
            Err(PlaceError::OutOfMemory { algo, .. }) => prop_assert_eq!(algo, "m-sct"),
            Err(PlaceError::NodeTooLarge { .. }) => {}
            Err(other) => prop_assert!(false, "unexpected error {other}"),
        }
    }
}
