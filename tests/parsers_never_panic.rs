//! Property tests: every input parser answers arbitrary, mangled and boundary input with `Ok`
//! or a located `InputError`, never a panic (issue 15). Numbers are drawn from the whole range
//! of their type, plus NaN and infinities where a float is read.

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
const PROBLEM: &str = include_str!("fixtures/problems/spec-example.json");
const PLAN: &str = include_str!("fixtures/plans/aws.json");
const REGO: &str = include_str!("../policies/budget_total.rego");

/// Any float, including NaN, the infinities, zero, subnormals and the extremes.
fn any_float() -> impl Strategy<Value = f64> {
    prop_oneof![
        Just(f64::NAN),
        Just(f64::INFINITY),
        Just(f64::NEG_INFINITY),
        Just(0.0),
        Just(-0.0),
        Just(f64::MAX),
        Just(f64::MIN_POSITIVE),
        Just(1e300),
        any::<f64>(),
        -1e6f64..1e6,
    ]
}

/// Integers near the edges of every width gpucap reads.
fn boundary_int() -> impl Strategy<Value = i128> {
    prop_oneof![
        Just(0i128),
        Just(1),
        Just(-1),
        Just(i128::from(u32::MAX)),
        Just(i128::from(u32::MAX) + 1),
        Just(i128::from(i64::MAX)),
        Just(i128::from(i64::MIN)),
        Just(i128::from(u64::MAX)),
        -1_000_000i128..1_000_000_000_000,
    ]
}

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

    #[test]
    fn durations_times_and_flags_never_panic(
        text in "\\PC{0,30}",
        n in boundary_int(),
        unit in prop_oneof![Just("h"), Just("d"), Just("w"), Just("y"), Just("")],
        year in -300_000i64..300_000,
        x in any_float(),
    ) {
        use gpucap::timespec::Span;
        let _ = Span::parse(&text);
        let _ = parse_timestamp(&text);
        let _ = gpucap::commands::common::parse_time_limit(&text);
        if let Ok(span) = Span::parse(&format!("{n}{unit}")) {
            prop_assert!(span.as_hours() <= gpucap::limits::MAX_SPAN_HOURS);
            let _ = span.as_duration();
        }
        let _ = parse_timestamp(&format!("{year}-01-01"));
        let _ = parse_timestamp(&format!("{year:+}-06-01T00:00:00Z"));
        let _ = gpucap::commands::common::parse_time_limit(&x.to_string());
    }

    #[test]
    fn calendar_numbers_at_their_edges_never_panic(
        gpus in boundary_int(),
        hours in boundary_int(),
        gpu_hours in any_float(),
        buffer in any_float(),
        days in boundary_int(),
    ) {
        let fixed = format!(
            "campaigns:\n  - name: a\n    accelerator: h100\n    gpus: {gpus}\n    start: 2027-01-01\n    duration: {hours}h\n    buffer: {buffer}\n"
        );
        let _ = calendar::parse(&fixed, Path::new("c.yaml"), until());
        let work = format!(
            "campaigns:\n  - name: w\n    accelerator: h100\n    gpu_hours: {gpu_hours}\n    window: {{start: 2027-01-01, end: 2027-01-01T01:00:00Z}}\n"
        );
        let _ = calendar::parse(&work, Path::new("c.yaml"), until());
        let ics = format!(
            "BEGIN:VCALENDAR\r\nVERSION:2.0\r\nBEGIN:VEVENT\r\nUID:x\r\nSUMMARY:e\r\nDTSTART:20270101T000000Z\r\nDURATION:P{days}D\r\nDESCRIPTION:accelerator: h100\\ngpus: {gpus}\r\nEND:VEVENT\r\nEND:VCALENDAR\r\n"
        );
        let _ = calendar::parse(&ics, Path::new("c.ics"), until());
    }

    #[test]
    fn demand_from_any_scenario_never_panics(
        scale in any_float(),
        slip in boundary_int(),
        gpus in 1i64..=1_000_000,
        value in any_float(),
    ) {
        let config = format!(
            "[planning]\nstart = 2027-01-01\nhorizon = \"4w\"\n[[scenarios]]\nname = \"x\"\nprobability = 1.0\nscale = {scale:?}\nslip = \"{slip}h\"\n"
        );
        let Ok(config) = Config::parse(&config, Path::new("gpucap.toml")) else {
            return Ok(());
        };
        let yaml = format!(
            "campaigns:\n  - name: a\n    accelerator: h100\n    gpus: {gpus}\n    start: 2027-01-02\n    duration: 1w\n  - name: b\n    accelerator: h100\n    gpus: {gpus}\n    start: 2027-01-03\n    duration: 1w\n"
        );
        let campaigns = calendar::parse(&yaml, Path::new("c.yaml"), until()).expect("valid");
        let csv = format!("ds,yhat\n2027-01-01,{value}\n2027-01-02,{value}\n");
        let forecasts: Vec<gpucap::demand::ForecastSource> =
            match forecast::parse(&csv, Path::new("f.csv"), Some("h100")) {
                Ok(series) => series
                    .into_iter()
                    .map(|series| gpucap::demand::ForecastSource { series, flex: false, team: None })
                    .collect(),
                Err(_) => Vec::new(),
            };
        let horizon = config.horizon(chrono::Utc::now());
        if let Ok(curve) = gpucap::demand::build(&config, horizon, &campaigns, &forecasts) {
            for s in &curve.scenarios {
                for p in &s.pools {
                    for seg in p.firm.iter().chain(&p.flex) {
                        prop_assert!(u64::from(seg.2) <= gpucap::limits::MAX_POOL_GPUS);
                    }
                }
            }
        }
    }

    #[test]
    fn problems_never_panic(text in mangled(PROBLEM), value in boundary_int()) {
        for t in [text, PROBLEM.replacen("64]", &format!("{value}]"), 1)] {
            if let Ok(problem) = gpucap::problem::parse(&t, Path::new("p.json"))
                && let Ok(valid) = gpucap::problem::validate(problem)
            {
                let _ = gpucap::problem::size::check(&valid, None);
            }
        }
    }

    #[test]
    fn plans_never_panic(text in mangled(PLAN), n in boundary_int(), x in any_float()) {
        let _ = gpucap::plan::read::parse(&text, Path::new("plan.json"));
        let edited = PLAN
            .replacen("\"instances\": 8", &format!("\"instances\": {n}"), 1)
            .replacen("\"cost\": 330000.0", &format!("\"cost\": {x:?}"), 1);
        let _ = gpucap::plan::read::parse(&edited, Path::new("plan.json"));
    }

    #[test]
    fn policies_never_panic(text in mangled(REGO)) {
        let text = text.replacen(
            "package gpucap.policies.budget_total",
            "package gpucap.policies.mangled",
            1,
        );
        let mut sources = gpucap::policy::builtin::policies();
        sources.push(gpucap::policy::PolicySource {
            path: "mangled.rego".into(),
            text,
            builtin: false,
        });
        let _ = gpucap::policy::PolicyEngine::from_sources(sources);
    }
}
