//! A plan file as `apply`, `render` and `diff` read it (parse, then every field checked).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|text: &str| {
    let _ = gpucap::plan::read::parse(text, std::path::Path::new("plan.json"));
});
