//! `ordo published`: each published run beside its prediction, in the table and in JSON, the
//! two agreeing.

mod common;

use common::*;

#[test]
fn a_published_run_prints_beside_its_prediction() {
    let v = json(&ordo(&["published", "--model", "22B", "--json"]));
    let table = &v["tables"][0];
    assert_eq!(table["name"], "megatron-selective");
    assert!(table["source"].as_str().unwrap().contains("2205.05198"));
    let rows = table["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 1);
    let row = &rows[0];
    assert_eq!((row["model"].as_str(), row["gpus"].as_u64()), (Some("22B"), Some(8)));
    let (predicted, published) = (
        row["predicted_step_time_us"].as_f64().unwrap(),
        row["published_step_time_us"].as_f64().unwrap(),
    );
    let error = row["error"].as_f64().unwrap();
    assert!((error - (predicted / published - 1.0)).abs() < 1e-12);
    // The table says the same.
    let text = stdout(&ordo(&["published", "--model", "22B"]));
    assert!(text.contains(&format!("{:+.1}%", error * 100.0)), "{text}");
    assert!(text.contains("41.5%") && text.contains("|error|: median"), "{text}");
}
