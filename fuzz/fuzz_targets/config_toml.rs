//! `gpucap.toml`: any text is a config or an error naming the file.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|text: &str| {
    let _ = gpucap::config::Config::parse(text, std::path::Path::new("gpucap.toml"));
});
