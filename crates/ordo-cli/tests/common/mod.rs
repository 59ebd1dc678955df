//! What every end-to-end test of the `ordo` binary uses.

#![allow(dead_code)]

use std::process::{Command, Output};

/// Runs `ordo` with `args`.
pub fn ordo(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_ordo")).args(args).output().expect("ordo runs")
}

pub fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

pub fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Standard output of a successful run, parsed as one JSON value.
pub fn json(out: &Output) -> serde_json::Value {
    assert!(out.status.success(), "ordo failed: {}", stderr(out));
    serde_json::from_slice(&out.stdout).expect("stdout is one JSON object")
}
