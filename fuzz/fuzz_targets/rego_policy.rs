//! A user policy loaded beside the built-in gates: parsed, checked for recursion and
//! compiled on an empty plan, each step bounded in time and memory.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|text: &str| {
    let mut sources = gpucap::policy::builtin::policies();
    sources.push(gpucap::policy::PolicySource {
        path: "fuzzed.rego".into(),
        text: text.to_string(),
        builtin: false,
    });
    let _ = gpucap::policy::PolicyEngine::from_sources(sources);
});
