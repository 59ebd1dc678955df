//! Plans as JSON: round trips, and file errors that name the file.

mod common;

use std::path::PathBuf;

use common::two_device_plan;
use ordo_sched::{Plan, SchedError, read_plan, write_plan};

/// A path in the temporary directory unique to this process and test.
fn temp_path(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("ordo-sched-{}-{name}.json", std::process::id()))
}

#[test]
fn a_plan_round_trips_through_serde_json() {
    let plan = two_device_plan();
    let text = serde_json::to_string(&plan).unwrap();
    assert_eq!(serde_json::from_str::<Plan>(&text).unwrap(), plan);
    let value: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(value["format"], "ordo.plan/1");
    assert_eq!(value["streams"][1]["kind"], serde_json::json!({"kind": "tx", "peer": 1}));
    assert_eq!(
        value["tasks"][7]["kind"],
        serde_json::json!({"kind": "transfer", "buffer": 0, "from": 0, "to": 1})
    );
    assert_eq!(value["tasks"][6]["waits"], serde_json::json!([1, 6]));
}

#[test]
fn a_plan_round_trips_through_a_file() {
    let path = temp_path("round-trip");
    let plan = two_device_plan();
    write_plan(&plan, &path).unwrap();
    let back = read_plan(&path);
    std::fs::remove_file(&path).unwrap();
    assert_eq!(back.unwrap(), plan);
}

#[test]
fn file_errors_name_the_file() {
    let missing = temp_path("missing");
    let err = read_plan(&missing).unwrap_err();
    assert!(matches!(err, SchedError::Read { .. }), "{err:?}");
    assert!(err.to_string().contains(&missing.display().to_string()), "{err}");

    let garbage = temp_path("garbage");
    std::fs::write(&garbage, "{\"format\": \"ordo.plan/1\"}").unwrap();
    let err = read_plan(&garbage).unwrap_err();
    std::fs::remove_file(&garbage).unwrap();
    assert!(matches!(err, SchedError::Parse { .. }), "{err:?}");
    assert!(err.to_string().contains(&garbage.display().to_string()), "{err}");

    let invalid = temp_path("invalid");
    let mut plan = two_device_plan();
    plan.tasks[0].waits.push(ordo_sched::EventId(0));
    write_plan(&plan, &invalid).unwrap();
    let err = read_plan(&invalid).unwrap_err();
    std::fs::remove_file(&invalid).unwrap();
    assert!(matches!(err, SchedError::Invalid { .. }), "{err:?}");
    let text = err.to_string();
    assert!(text.contains(&invalid.display().to_string()), "{text}");
    assert!(text.ends_with("dependency cycle across streams: a -> a"), "{text}");

    let unwritable = temp_path("no-such-dir").join("plan.json");
    let err = write_plan(&two_device_plan(), &unwritable).unwrap_err();
    assert!(matches!(err, SchedError::Write { .. }), "{err:?}");
    assert!(err.to_string().contains(&unwritable.display().to_string()), "{err}");
}
