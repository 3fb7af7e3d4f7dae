//! The plan renderers on plan documents: the fixtures add up, the terminal summary and markdown
//! match their snapshots, the markdown parses into well-formed tables with no HTML from names,
//! charts are valid SVG with their legends, and hostile or empty plans render without panics.
//!
//! To snapshot another plan (e.g. one `gpucap plan -o` wrote), put it in
//! `tests/fixtures/plans/<name>.json` and add `<name>` to [`PLANS`].

use std::path::{Path, PathBuf};

use gpucap::plan::diff::{PlanDiff, diff};
use gpucap::plan::{ActionKind, PLAN_SCHEMA, Plan};
use gpucap::render::markdown::{markdown, markdown_with_changes};
use gpucap::render::plan_chart::{
    PlanChartError, write_capacity_chart, write_charts, write_cost_chart,
};
use gpucap::render::plan_summary::{summary, summary_in, summary_with_changes};
use gpucap::render::terminal::thousands;
use pulldown_cmark::{Event, Options, Parser, Tag, TagEnd};

const PLANS: &[&str] = &["render-sample"];

fn fixture(name: &str) -> PathBuf {
    std::path::PathBuf::from(
        std::env::var_os("CARGO_MANIFEST_DIR")
            .expect("CARGO_MANIFEST_DIR, which cargo sets when it runs the tests"),
    )
    .join("tests/fixtures/plans")
    .join(format!("{name}.json"))
}

fn load(name: &str) -> Plan {
    let text = std::fs::read_to_string(fixture(name)).unwrap();
    let de = &mut serde_json::Deserializer::from_str(&text);
    serde_path_to_error::deserialize(de)
        .unwrap_or_else(|e| panic!("{name}.json is not a gpucap::plan::Plan: {e}"))
}

fn close(a: f64, b: f64, what: &str, name: &str) {
    assert!(
        (a - b).abs() <= 1.0,
        "{name}: {what}: {a} vs {b} (off by {})",
        a - b
    );
}

#[test]
fn fixture_plans_deserialize_and_add_up() {
    for &name in PLANS {
        let plan = load(name);
        let c = &plan.cost;
        assert_eq!(plan.schema, PLAN_SCHEMA, "{name}");
        let k = &c.by_kind;
        let kinds = k.on_demand + k.spot + k.capacity_block + k.reservation + k.commitment;
        close(kinds, c.expected_total, "by_kind sum", name);
        close(
            k.capacity_block + k.reservation + k.commitment,
            c.irreversible,
            "term kinds vs irreversible",
            name,
        );
        let months: f64 = c.by_month.iter().map(|m| m.expected).sum();
        close(months, c.expected_total, "by_month sum", name);
        let pools: f64 = c.by_pool.iter().map(|p| p.expected).sum();
        close(pools, c.expected_total, "by_pool sum", name);
        let teams: f64 = c.by_team.iter().map(|t| t.expected).sum();
        close(teams, c.expected_total, "by_team sum", name);
        let p: f64 = c.by_scenario.iter().map(|s| s.probability).sum();
        assert!((p - 1.0).abs() < 1e-9, "{name}: probabilities sum to {p}");
        let weighted: f64 = c.by_scenario.iter().map(|s| s.probability * s.total).sum();
        close(
            weighted,
            c.expected_total,
            "probability-weighted scenarios",
            name,
        );
        let irreversible: f64 = plan
            .actions
            .iter()
            .filter(|a| a.irreversible)
            .map(|a| a.cost)
            .sum();
        close(irreversible, c.irreversible, "irreversible actions", name);
        let worst = c
            .by_scenario
            .iter()
            .max_by(|a, b| a.total.total_cmp(&b.total))
            .unwrap();
        assert_eq!(worst.name, plan.risk.worst_scenario, "{name}");
        close(worst.total, plan.risk.worst_total, "worst total", name);
        for b in &plan.baselines {
            if let Some(total) = b.expected_total {
                let saving = b.saving.unwrap();
                close(saving, total - c.expected_total, "baseline saving", name);
                assert!((b.saving_fraction.unwrap() - saving / total).abs() < 1e-3);
            }
        }
        let start = chrono::DateTime::parse_from_rfc3339(&plan.horizon.start).unwrap();
        for a in &plan.actions {
            let at = |h: u32| {
                (start + chrono::Duration::hours(h.into()))
                    .to_utc()
                    .to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
            };
            assert_eq!(at(a.start_hour), a.start, "{name}: {}", a.id);
            assert_eq!(at(a.end_hour), a.end, "{name}: {}", a.id);
        }
        // The planned capacity covers the demand in the scenario the runs follow.
        let hours = plan.horizon.hours as usize;
        let h = |s: &[gpucap::problem::Segment]| gpucap::demand::hourly(hours as u32, s);
        for pool in &plan.pools {
            let (firm, flex) = (h(&pool.demand_firm), h(&pool.demand_flex));
            let (e, t, o, s) = (
                h(&pool.existing),
                h(&pool.term),
                h(&pool.on_demand),
                h(&pool.spot),
            );
            for i in 0..hours {
                assert!(
                    e[i] + t[i] + o[i] + s[i] >= firm[i] + flex[i],
                    "{name}: pool {} short at hour {i}",
                    pool.id
                );
            }
        }
    }
}

#[test]
fn terminal_summaries_match_snapshots() {
    for &name in PLANS {
        let plan = load(name);
        let text = summary(&plan, false);
        assert!(
            text.contains(&plan.gates.report()),
            "gate wording follows Decisions::report"
        );
        insta::assert_snapshot!(format!("summary-{name}"), text);
    }
}

#[test]
fn markdown_matches_snapshots_and_parses() {
    for &name in PLANS {
        let plan = load(name);
        let md = markdown(&plan);
        check_markdown(&md);
        insta::assert_snapshot!(format!("markdown-{name}"), md);
    }
}

/// Everything a pull-request comment needs to render as meant.
fn check_markdown(md: &str) {
    assert!(md.ends_with('\n') && !md.ends_with("\n\n"));
    for (i, line) in md.lines().enumerate() {
        assert_eq!(
            line,
            line.trim_end(),
            "trailing whitespace on line {}",
            i + 1
        );
    }
    // Every table row has the header's cells, counting unescaped pipes as GFM splits rows.
    let lines: Vec<&str> = md.lines().collect();
    let cells = |l: &str| {
        let mut n = 0;
        let mut chars = l.chars();
        while let Some(c) = chars.next() {
            match c {
                '\\' => {
                    chars.next();
                }
                '|' => n += 1,
                _ => {}
            }
        }
        n
    };
    let mut i = 0;
    while i < lines.len() {
        if lines[i].starts_with('|') {
            assert!(
                i == 0 || lines[i - 1].is_empty(),
                "no blank line before the table at line {}",
                i + 1
            );
            let width = cells(lines[i]);
            while i < lines.len() && lines[i].starts_with('|') {
                assert_eq!(cells(lines[i]), width, "line {}: {}", i + 1, lines[i]);
                i += 1;
            }
            assert!(
                i == lines.len() || lines[i].is_empty(),
                "no blank line after the table ending at line {i}"
            );
        }
        i += 1;
    }
    // The parser sees the same tables, and the only HTML is the details blocks.
    let mut in_cell = false;
    let (mut header, mut row) = (0usize, 0usize);
    let mut html = String::new();
    for event in Parser::new_ext(md, Options::ENABLE_TABLES) {
        match event {
            Event::Start(Tag::Table(align)) => header = align.len(),
            Event::Start(Tag::TableRow) | Event::Start(Tag::TableHead) => row = 0,
            Event::Start(Tag::TableCell) => {
                in_cell = true;
                row += 1;
            }
            Event::End(TagEnd::TableCell) => in_cell = false,
            Event::End(TagEnd::TableRow) | Event::End(TagEnd::TableHead) => {
                assert_eq!(row, header, "a row with {row} cells under {header} columns")
            }
            Event::InlineHtml(h) => panic!("inline HTML {h:?} in the markdown"),
            Event::Html(h) => {
                assert!(!in_cell);
                html.push_str(&h);
            }
            _ => {}
        }
    }
    let rest = regex_free_strip(&html);
    assert!(!rest.contains('<'), "unexpected HTML: {rest}");
}

/// The HTML blocks less the `<details>` and `<summary>` tags gpucap writes.
fn regex_free_strip(html: &str) -> String {
    html.replace("<details>", "")
        .replace("</details>", "")
        .replace("<summary>", "")
        .replace("</summary>", "")
}

/// Text and code as a reader sees them, one string.
fn visible_text(md: &str) -> String {
    Parser::new_ext(md, Options::ENABLE_TABLES)
        .filter_map(|e| match e {
            Event::Text(t) | Event::Code(t) => Some(t.to_string()),
            _ => None,
        })
        .collect::<Vec<_>>()
        .join("")
}

const HOSTILE: &str = "h100|<img src=x onerror=alert(1)>\n| a | b |`tick` **bold** [x](javascript:y) </details> \\| $1 and $2 \u{1b}[31m";

fn hostile_plan() -> Plan {
    let mut plan = load("render-sample");
    let old = plan.pools[0].id.clone();
    plan.pools[0].id = HOSTILE.to_string();
    for a in plan.actions.iter_mut().filter(|a| a.pool == old) {
        a.pool = HOSTILE.to_string();
        a.campaigns.push(format!("<script>{HOSTILE}"));
    }
    plan.cost.by_pool[0].pool = HOSTILE.to_string();
    plan.cost.by_team[0].team = Some("@org/team-\n# heading".into());
    plan.actions_scenario = "base`|".into();
    plan.baselines[0].name = "- [ ] item".into();
    plan.assumptions
        .push("# not a heading\n- nor a list | nor a cell".into());
    plan.assumptions.push("2027. not an ordered list".into());
    plan.gates.deny[0].message = format!("over budget in {HOSTILE}");
    plan.gates.deny[0].fix = "</details><details open>".into();
    plan.quotes[0].origin = "<a href=x>click</a>".into();
    plan.fingerprint.inputs[0].name = "../../etc/passwd``".into();
    plan
}

#[test]
fn hostile_names_do_not_break_the_markdown() {
    let plan = hostile_plan();
    let md = markdown(&plan);
    check_markdown(&md);
    let seen = visible_text(&md);
    let flat = HOSTILE.replace('\n', " ").replace('\u{1b}', "");
    assert!(seen.contains(&flat), "the name reads as written:\n{seen}");
    assert!(seen.contains("# not a heading - nor a list | nor a cell"));
    assert!(seen.contains("2027. not an ordered list"));
    assert!(seen.contains("</details><details open>"));
}

#[test]
fn hostile_names_do_not_reach_the_terminal_raw() {
    let text = summary(&hostile_plan(), false);
    assert!(
        !text.contains('\u{1b}'),
        "escape sequences are shown escaped"
    );
    assert!(text.contains("\\u{1b}[31m"));
    let colored = summary(&hostile_plan(), true);
    assert!(colored.contains("\u{1b}[1m"), "colour when asked");
}

fn minimal_plan() -> Plan {
    serde_json::from_value(serde_json::json!({
        "schema": "gpucap.plan/v1",
        "created_at": "not a time",
        "horizon": {"start": "?", "end": "?", "hours": 0},
        "fingerprint": {"digest": "", "inputs": []},
        "solution": {"status": "optimal", "expected_cost": 0.0, "bound": 0.0, "term_cost": 0.0},
        "cost": {"expected_total": 0.0, "irreversible": 0.0, "by_scenario": [],
                 "by_month": [{"month": "2027-01", "expected": 0.0}], "by_pool": [], "by_team": [],
                 "by_kind": {"on_demand": 0.0, "spot": 0.0, "capacity_block": 0.0,
                             "reservation": 0.0, "commitment": 0.0}},
        "baselines": [{"name": "all-on-demand", "description": "", "expected_total": 0.0,
                       "saving": null, "saving_fraction": null}],
        "risk": {"worst_scenario": "", "worst_total": 0.0, "stranded": []},
        "actions_scenario": "",
        "actions": [],
        "pools": [{"id": "", "accelerator": "", "clouds": [], "regions": [],
                   "demand_firm": [[5, 2, 1]], "demand_flex": [], "term": [],
                   "on_demand": [[0, 4000000000u32, 4000000000u32]], "spot": [], "existing": []}],
        "campaigns": [],
        "quotes": [],
        "assumptions": []
    }))
    .unwrap()
}

#[test]
fn empty_and_odd_plans_render_without_panics() {
    let plan = minimal_plan();
    let text = summary(&plan, true);
    assert!(text.contains("nothing to buy"), "{text}");
    let md = markdown(&plan);
    check_markdown(&md);
    assert!(md.starts_with("## gpucap plan: **Allowed**"), "{md}");
    let dir = tempfile::tempdir().unwrap();
    let files = write_charts(&plan, dir.path()).unwrap();
    assert_eq!(files.len(), 2);
    for f in files {
        roxmltree::Document::parse(&std::fs::read_to_string(f).unwrap()).unwrap();
    }
    write_capacity_chart(&plan, None, &dir.path().join("all.png")).unwrap();
}

fn svg_texts(path: &Path) -> Vec<String> {
    let svg = std::fs::read_to_string(path).unwrap();
    let doc = roxmltree::Document::parse(&svg)
        .unwrap_or_else(|e| panic!("{} is not XML: {e}", path.display()));
    assert_eq!(doc.root_element().tag_name().name(), "svg");
    doc.descendants()
        .filter(|n| n.has_tag_name("text"))
        .filter_map(|n| n.text().map(|t| t.trim().to_string()))
        .collect()
}

#[test]
fn charts_are_valid_svg_with_legends() {
    let plan = load("render-sample");
    let dir = tempfile::tempdir().unwrap();
    // GPUCAP_CHART_DIR=... keeps the charts for looking at.
    let keep = std::env::var_os("GPUCAP_CHART_DIR").map(PathBuf::from);
    let out = keep.as_deref().unwrap_or(dir.path());
    let files = write_charts(&plan, out).unwrap();
    let names: Vec<String> = files
        .iter()
        .map(|f| f.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    assert_eq!(
        names,
        [
            "capacity-h100-us.svg",
            "capacity-a100-us.svg",
            "cost-by-month.svg"
        ]
    );
    let h100 = svg_texts(&files[0]);
    for label in [
        "existing",
        "term (blocks, reservations, commitments)",
        "on-demand",
        "spot",
        "demand (firm + flex)",
        "firm demand",
        "GPUs",
        "date (UTC)",
        "Jan 04",
        "Mar 28",
    ] {
        assert!(h100.iter().any(|t| t == label), "{label} in {h100:?}");
    }
    let cost = svg_texts(&files[2]);
    for label in [
        "capacity block",
        "commitment",
        "on-demand",
        "spot",
        "2027-02",
        "$398,616",
    ] {
        assert!(cost.iter().any(|t| t == label), "{label} in {cost:?}");
    }
    let png = out.join("capacity-all.png");
    write_capacity_chart(&plan, None, &png).unwrap();
    assert!(std::fs::read(&png).unwrap().starts_with(b"\x89PNG"));
    write_cost_chart(&plan, &out.join("cost-by-month.png")).unwrap();
    assert!(matches!(
        write_capacity_chart(&plan, Some("nope"), &dir.path().join("x.svg")),
        Err(PlanChartError::UnknownPool(_))
    ));
    assert!(matches!(
        write_cost_chart(&plan, &dir.path().join("x.pdf")),
        Err(PlanChartError::Format(_))
    ));
}

#[test]
fn hostile_pool_ids_make_safe_file_names_and_valid_svg() {
    let mut plan = hostile_plan();
    plan.pools[1].id = "../../escape".into();
    let dir = tempfile::tempdir().unwrap();
    let files = write_charts(&plan, dir.path()).unwrap();
    for f in &files {
        assert_eq!(f.parent(), Some(dir.path()), "{}", f.display());
        svg_texts(f);
    }
}

/// The planner's own plan for the quickstart (made by the binary, as a user would), not a
/// hand-written fixture: its summary is a snapshot and its markdown renders cleanly.
#[test]
fn the_quickstart_plan_renders() {
    let config = std::path::PathBuf::from(
        std::env::var_os("CARGO_MANIFEST_DIR")
            .expect("CARGO_MANIFEST_DIR, which cargo sets when it runs the tests"),
    )
    .join("examples/quickstart/gpucap.toml");
    let out = assert_cmd::Command::cargo_bin("gpucap")
        .unwrap()
        .env("NO_COLOR", "1")
        .arg("--config")
        .arg(&config)
        .args([
            "plan",
            "--now",
            "2027-01-02T00:00:00Z",
            "-q",
            "--format",
            "json",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let plan: Plan = serde_json::from_slice(&out.stdout).unwrap();
    let md = markdown(&plan);
    check_markdown(&md);
    assert!(
        md.len() < 65_536,
        "GitHub's comment limit: {} bytes",
        md.len()
    );
    // The table shows at most 40 purchases and says how many more there are.
    let purchases = |p: &Plan| {
        p.actions
            .iter()
            .filter(|a| a.kind.is_term() || a.kind == ActionKind::Release)
            .count()
    };
    assert_eq!(
        md.contains("more purchases"),
        purchases(&plan) > 40,
        "{} purchases",
        purchases(&plan)
    );
    // The quickstart buys fewer than that: its purchases, copied to more than 40, are cut.
    let mut long = plan.clone();
    let terms: Vec<_> = plan
        .actions
        .iter()
        .filter(|a| a.kind.is_term())
        .cloned()
        .collect();
    assert!(!terms.is_empty(), "the quickstart buys terms");
    for (i, mut a) in terms.into_iter().cycle().take(41).enumerate() {
        a.id = format!("{}-copy-{i}", a.id);
        long.actions.push(a);
    }
    let long_md = markdown(&long);
    check_markdown(&long_md);
    assert!(
        long_md.contains("more purchases"),
        "the long purchase list is cut"
    );
    insta::assert_snapshot!("summary-quickstart", summary(&plan, false));

    // Fitted to a terminal: no line wider than it, at 80, 100 and 120 columns, coloured or
    // not; the 100-column layout (a pipe's) is kept as a snapshot.
    for width in [80, 100, 120] {
        for color in [false, true] {
            let text = summary_in(&plan, None, color, Some(width));
            for line in text.lines() {
                let shown = strip_ansi(line);
                assert!(
                    shown.chars().count() <= width,
                    "{} columns at {width} ({}):\n{shown}",
                    shown.chars().count(),
                    if color { "coloured" } else { "plain" }
                );
            }
            // Nothing is lost: every purchase's cost is there.
            for a in plan.actions.iter().filter(|a| a.kind.is_term()) {
                let cost = format!("${}", thousands(a.cost.round() as u64));
                assert!(text.contains(&cost), "{cost} at {width}");
            }
        }
    }
    insta::assert_snapshot!(
        "summary-quickstart-100-columns",
        summary_in(&plan, None, false, Some(100))
    );
}

/// `text` without ANSI escape sequences (`ESC [ … letter`).
fn strip_ansi(text: &str) -> String {
    let mut out = String::new();
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            for d in chars.by_ref() {
                if d.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// The render sample as it was the night before: a smaller capacity block (the same purchase,
/// resized), an on-demand run at a lower price, a spot run since dropped, no A100 run yet, the
/// AWS prices from the snapshot, and another calendar.
fn night_before(current: &Plan) -> Plan {
    let mut plan = current.clone();
    plan.created_at = "2027-01-02T06:00:00Z".into();
    plan.actions
        .retain(|a| a.id != "od-a100-us-gcp-us-central1-a2-ultragpu-8g-1344");
    for a in &mut plan.actions {
        match a.kind {
            ActionKind::PurchaseCapacityBlock => {
                a.id = a.id.replace("-0336", "-0336-6x");
                a.instances = 6;
                a.gpus = 48;
                a.cost = 63_423.36;
                a.campaigns.push("warmup".into());
            }
            ActionKind::RunOnDemand => a.cost = 30_000.0,
            _ => {}
        }
    }
    let mut dropped = plan
        .actions
        .iter()
        .find(|a| a.kind == ActionKind::RunSpot)
        .unwrap()
        .clone();
    dropped.id = "spot-h100-us-aws-us-west-2-p5-48xlarge-2x-20270120-7d".into();
    dropped.instances = 2;
    dropped.gpus = 16;
    dropped.start = "2027-01-20T00:00:00Z".into();
    dropped.end = "2027-01-27T00:00:00Z".into();
    dropped.cost = 14_162.40;
    plan.actions.push(dropped);
    for q in plan.quotes.iter_mut().filter(|q| q.source == "live") {
        q.source = "snapshot".into();
        q.fetched_at = "2026-12-01T00:00:00Z".into();
        if q.offer.ends_with("/on-demand") {
            q.price_per_instance_hour = 89.29;
        }
    }
    plan.fingerprint.inputs[0].sha256 = format!("sha256:{}", "0".repeat(64));
    plan.fingerprint.digest = gpucap::plan::fingerprint::recompute(&plan.fingerprint.inputs);
    plan.cost.expected_total -= 25_000.0;
    plan.cost.irreversible -= 21_141.12;
    plan
}

fn sample_changes() -> (Plan, PlanDiff) {
    let current = load("render-sample");
    let d = diff(&night_before(&current), &current).against_file("plans/last-applied.json");
    (current, d)
}

#[test]
fn changes_since_the_previous_plan_render_and_match_snapshots() {
    let (plan, d) = sample_changes();
    assert_eq!(
        (d.added.len(), d.removed.len(), d.changed.len()),
        (1, 1, 3),
        "{d:#?}"
    );
    let md = markdown_with_changes(&plan, Some(&d));
    check_markdown(&md);
    assert!(
        md.contains(
            "**\\+1 action, −1, \\~3 changed · expected cost +\\$25,000 (+3.1 %) · irreversible +\\$21,141**"
        ),
        "{md}"
    );
    assert!(
        md.contains("- calendar `calendars/training.ics` changed\n"),
        "{md}"
    );
    assert!(
        md.contains("- prices from live (3), snapshot (2) now, from snapshot (5) before\n"),
        "{md}"
    );
    // Without a previous plan, the same document as before.
    assert_eq!(markdown_with_changes(&plan, None), markdown(&plan));
    insta::assert_snapshot!("markdown-changes-render-sample", md);

    let text = summary_with_changes(&plan, Some(&d), false);
    assert!(
        text.contains("changes since plans/last-applied.json"),
        "{text}"
    );
    assert!(text.contains("6 → 8 instances (48 → 64 GPUs)"), "{text}");
    assert_eq!(
        summary_with_changes(&plan, None, false),
        summary(&plan, false)
    );
    insta::assert_snapshot!("summary-changes-render-sample", text);
}

#[test]
fn hostile_names_do_not_break_the_changes_section() {
    let current = hostile_plan();
    let mut previous = night_before(&current);
    previous.fingerprint.inputs[0].name = format!("{HOSTILE}.ics");
    for a in previous.actions.iter_mut() {
        a.campaigns.retain(|c| !c.starts_with("<script>"));
    }
    let d = diff(&previous, &current).against_file(format!("{HOSTILE}.json"));
    let md = markdown_with_changes(&current, Some(&d));
    check_markdown(&md);
    let seen = visible_text(&md);
    let flat = HOSTILE.replace('\n', " ").replace('\u{1b}', "");
    assert!(
        seen.contains(&format!("{flat}.json")),
        "the file name reads as written:\n{seen}"
    );
    assert!(seen.contains(&format!("<script>{flat}")), "{seen}");
    let text = summary_with_changes(&current, Some(&d), false);
    assert!(
        !text.contains('\u{1b}'),
        "escape sequences are shown escaped"
    );
    assert!(text.contains("\\u{1b}[31m"));
}

#[test]
fn a_long_list_of_changes_is_cut_and_the_comment_fits() {
    // Every action of a big plan bought again a little dearer under another id: each is a
    // resized or moved purchase, listed as a change.
    let config = std::path::PathBuf::from(
        std::env::var_os("CARGO_MANIFEST_DIR")
            .expect("CARGO_MANIFEST_DIR, which cargo sets when it runs the tests"),
    )
    .join("examples/quickstart/gpucap.toml");
    let out = assert_cmd::Command::cargo_bin("gpucap")
        .unwrap()
        .env("NO_COLOR", "1")
        .arg("--config")
        .arg(&config)
        .args([
            "plan",
            "--now",
            "2027-01-02T00:00:00Z",
            "-q",
            "--format",
            "json",
        ])
        .output()
        .unwrap();
    let plan: Plan = serde_json::from_slice(&out.stdout).unwrap();
    let mut previous = plan.clone();
    for a in &mut previous.actions {
        a.id.push_str("-then");
        a.cost *= 0.9;
    }
    let d = diff(&previous, &plan);
    assert_eq!(d.changed.len(), plan.actions.len(), "every action paired");
    assert!(d.changed.len() > 100);
    let md = markdown_with_changes(&plan, Some(&d));
    check_markdown(&md);
    assert!(
        md.len() < 65_536,
        "GitHub's comment limit: {} bytes",
        md.len()
    );
    assert!(
        md.contains(&format!("… and {} more changes", d.changed.len() - 30)),
        "{md}"
    );
}
