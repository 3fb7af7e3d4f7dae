//! A structured calendar (YAML; JSON and TOML go through the same reader by extension).
#![no_main]

use std::path::Path;

use libfuzzer_sys::fuzz_target;

fuzz_target!(|text: &str| {
    let until = chrono::DateTime::parse_from_rfc3339("2027-06-01T00:00:00Z")
        .expect("a time")
        .to_utc();
    let _ = gpucap::calendar::parse(text, Path::new("calendar.yaml"), until);
    let _ = gpucap::calendar::parse(text, Path::new("calendar.toml"), until);
});
