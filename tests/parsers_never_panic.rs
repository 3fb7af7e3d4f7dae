//! Property tests: every input parser answers arbitrary and mangled input with `Ok` or a
//! located `InputError`, never a panic.

use std::path::Path;

use gpucap::calendar;
use gpucap::config::Config;
use gpucap::forecast;
use gpucap::timespec::parse_timestamp;
use proptest::prelude::*;

const YAML: &str = include_str!("../examples/quickstart/calendars/llm-team-q1.yaml");
const ICS: &str = include_str!("../examples/quickstart/calendars/evals.ics");
const CONFIG: &str = include_str!("../examples/quickstart/gpucap.toml");
const PROPHET: &str = include_str!("../examples/quickstart/forecasts/inference-h100.csv");

fn until() -> chrono::DateTime<chrono::Utc> {
    parse_timestamp("2027-06-01").unwrap()
}

/// A valid document with one span of bytes replaced: mangled input near the valid grammar
/// reaches much deeper into a parser than random bytes do.
fn mangled(base: &'static str) -> impl Strategy<Value = String> {
    (
        0..base.len(),
        0usize..40,
        "[ -~\n\t:;,\\-\\[\\]{}\"'#]{0,12}",
    )
        .prop_map(move |(at, len, with)| {
            let mut at = at;
            while !base.is_char_boundary(at) {
                at -= 1;
            }
            let mut end = (at + len).min(base.len());
            while !base.is_char_boundary(end) {
                end -= 1;
            }
            format!("{}{}{}", &base[..at], with, &base[end..])
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    #[test]
    fn calendars_never_panic(text in mangled(YAML), ics in mangled(ICS), toml in "\\PC{0,200}") {
        let _ = calendar::parse(&text, Path::new("c.yaml"), until());
        let _ = calendar::parse(&ics, Path::new("c.ics"), until());
        let _ = calendar::parse(&toml, Path::new("c.toml"), until());
        let _ = calendar::parse(&toml, Path::new("c.ics"), until());
    }

    #[test]
    fn configs_never_panic(text in mangled(CONFIG), random in "\\PC{0,200}") {
        let _ = Config::parse(&text, Path::new("gpucap.toml"));
        let _ = Config::parse(&random, Path::new("gpucap.toml"));
    }

    #[test]
    fn forecasts_never_panic(text in mangled(PROPHET), random in "[a-z0-9,:\\-\\n. ]{0,200}") {
        let _ = forecast::parse(&text, Path::new("f.csv"), Some("h100"));
        let _ = forecast::parse(&random, Path::new("f.csv"), None);
    }

    #[test]
    fn errors_always_name_the_file(text in mangled(YAML)) {
        if let Err(e) = calendar::parse(&text, Path::new("c.yaml"), until()) {
            prop_assert!(e.to_string().starts_with("c.yaml"), "{}", e);
        }
    }
}
