//! A forecast CSV (Prophet's `ds,yhat` and the wide format), with and without a pool.
#![no_main]

use std::path::Path;

use libfuzzer_sys::fuzz_target;

fuzz_target!(|text: &str| {
    let _ = gpucap::forecast::parse(text, Path::new("forecast.csv"), Some("h100"));
    let _ = gpucap::forecast::parse(text, Path::new("forecast.csv"), None);
});
