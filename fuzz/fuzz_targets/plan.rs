//! Any text given as a plan parses to a plan or an error, and validating any parsed plan never
//! panics or hangs (the same path as `ordo simulate PLAN.json`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(plan) = serde_json::from_slice::<ordo_sched::Plan>(data) {
        let _ = ordo_sched::validate(&plan);
    }
});
