//! A `gpucap.problem/v1` file through parsing, validation and the size check (not the solver:
//! a valid problem may take its whole time limit, which is not a bug).
#![no_main]

use std::path::Path;

use libfuzzer_sys::fuzz_target;

fuzz_target!(|text: &str| {
    if let Ok(problem) = gpucap::problem::parse(text, Path::new("problem.json"))
        && let Ok(valid) = gpucap::problem::validate(problem)
    {
        let _ = gpucap::problem::size::check(&valid, None);
    }
});
