//! Any text given as a cluster description gives a cluster or an error, never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    if let Ok(cluster) = ordo_cost::Cluster::parse(text, "fuzz.json") {
        let _ = cluster.memory_limits();
        for from in 0..cluster.device_count().min(4) {
            let _ = cluster.comm(from, 0).time_us(1 << 20);
        }
    }
});
