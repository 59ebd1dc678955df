//! Any text given as a profile gives a profile or an error, never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    if let Ok(profile) = ordo_cost::Profile::parse(text, "fuzz.json") {
        let _ = profile.comm().map(|c| c.time_us(1 << 20));
    }
});
