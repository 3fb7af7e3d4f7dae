//! The plan as GitHub-flavoured markdown for a pull-request comment (`gpucap plan --format
//! markdown`): verdict, summary, what changed since the last applied plan (`--compare-to`),
//! gates, what to buy, cost, baselines and risk up front; every action, quote, assumption and
//! input collapsed below.
//!
//! Names in a plan come from users' calendars and configs, so every string from the plan is
//! escaped: identifiers go in code spans, prose is backslash-escaped with `<`, `>` and `&` as
//! entities, and line breaks become spaces. A hostile campaign name can neither break a table
//! nor inject HTML.

use std::fmt::Write;

use super::diff_view::{self, Part, Phrase, Sign, signed_money};
use super::plan_view::{
    self, KINDS, Verdict, age, best_baseline, gate_counts, kind_label, money, percent, purchases,
    runs_by_pool, saving, share, short_time,
};
use super::terminal::thousands;
use crate::plan::Plan;
use crate::plan::diff::PlanDiff;
use crate::policy::Decision;

/// GitHub rejects comments over 65,536 characters; long plans list the first purchases and
/// actions by start and point to the plan file for the rest.
const MAX_PURCHASE_ROWS: usize = 40;
const MAX_ACTION_ROWS: usize = 60;
const MAX_CHANGE_ROWS: usize = 30;

/// The markdown document, ending in one newline, no trailing whitespace on any line.
pub fn markdown(plan: &Plan) -> String {
    markdown_with_changes(plan, None)
}

/// The markdown document with, after its summary, what changed since a previous plan.
pub fn markdown_with_changes(plan: &Plan, changes: Option<&PlanDiff>) -> String {
    let mut md = String::new();
    headline(&mut md, plan);
    if let Some(d) = changes {
        changes_since(&mut md, plan, d);
    }
    gates(&mut md, plan);
    buy(&mut md, plan);
    campaigns(&mut md, plan);
    quota_increases(&mut md, plan);
    cost(&mut md, plan);
    baselines(&mut md, plan);
    risk(&mut md, plan);
    all_actions(&mut md, plan);
    pools_and_teams(&mut md, plan);
    quotes(&mut md, plan);
    assumptions(&mut md, plan);
    inputs(&mut md, plan);
    tidy(&md)
}

/// Prose from the plan, safe anywhere inline (table cells included).
pub fn text(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for (i, c) in s.chars().enumerate() {
        match c {
            '\n' | '\r' | '\t' => out.push(' '),
            c if crate::text::is_hidden(c) => {}
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            // `$` too: GitHub renders `$…$` as math.
            '\\' | '`' | '*' | '_' | '[' | ']' | '|' | '~' | '#' | '$' | '!' => {
                out.push('\\');
                out.push(c);
            }
            // Would start a list item or a setext underline at the start of a line.
            '-' | '+' | '=' if i == 0 => {
                out.push('\\');
                out.push(c);
            }
            c => out.push(c),
        }
    }
    // `2027. ` or `1) ` at the start would open an ordered list.
    let digits = out.chars().take_while(char::is_ascii_digit).count();
    if digits > 0 && matches!(out[digits..].chars().next(), Some('.' | ')')) {
        out.insert(digits, '\\');
    }
    out
}

/// An identifier in a code span, for a table cell (`|` escaped, which GFM tables require even
/// inside code). Empty strings show as an em dash.
fn code_cell(s: &str) -> String {
    code_span(s, true)
}

/// An identifier in a code span, outside tables.
fn code(s: &str) -> String {
    code_span(s, false)
}

fn code_span(s: &str, in_table: bool) -> String {
    // A table cell needs `|` escaped even inside a code span, where a backslash cannot be
    // escaped: a name with a backslash before a pipe would end the cell. Such names are text.
    if in_table && s.contains('\\') {
        return text(s);
    }
    let s: String = s
        .chars()
        .filter_map(|c| match c {
            '\n' | '\r' | '\t' => Some(' '),
            c if crate::text::is_hidden(c) => None,
            c => Some(c),
        })
        .collect();
    if s.is_empty() {
        return "—".into();
    }
    let longest_run = s.split(|c| c != '`').map(str::len).max().unwrap_or(0);
    let fence = "`".repeat(longest_run + 1);
    let pad = if s.starts_with('`') || s.ends_with('`') || (s.starts_with(' ') && s.ends_with(' '))
    {
        " "
    } else {
        ""
    };
    let body = if in_table { s.replace('|', "\\|") } else { s };
    format!("{fence}{pad}{body}{pad}{fence}")
}

fn dollars(x: f64) -> String {
    text(&money(x))
}

fn dollars_or_dash(x: f64) -> String {
    text(&plan_view::money_or_dash(x))
}

/// `$98.32`: unit prices keep their cents.
fn price(x: f64) -> String {
    text(&plan_view::unit_price(x))
}

#[derive(Clone, Copy, PartialEq)]
enum Align {
    Left,
    Right,
}

use Align::{Left as L, Right as R};

/// A GFM table; every row is cut or padded to the header's width.
struct MdTable {
    header: Vec<(String, Align)>,
    rows: Vec<Vec<String>>,
}

impl MdTable {
    fn new(header: &[(&str, Align)]) -> Self {
        MdTable {
            header: header.iter().map(|(h, a)| (h.to_string(), *a)).collect(),
            rows: Vec::new(),
        }
    }

    fn row(&mut self, mut cells: Vec<String>) {
        cells.resize(self.header.len(), String::new());
        self.rows.push(cells);
    }

    /// The table with a blank line before and after.
    fn write(&self, md: &mut String) {
        let line = |cells: &mut dyn Iterator<Item = &str>| {
            let mut l = String::from("|");
            for c in cells {
                l.push(' ');
                l.push_str(c);
                l.push_str(" |");
            }
            l
        };
        md.push('\n');
        md.push_str(&line(&mut self.header.iter().map(|(h, _)| h.as_str())));
        md.push('\n');
        md.push_str(&line(&mut self.header.iter().map(|(_, a)| match a {
            Align::Left => "---",
            Align::Right => "---:",
        })));
        md.push('\n');
        for r in &self.rows {
            md.push_str(&line(&mut r.iter().map(String::as_str)));
            md.push('\n');
        }
        md.push('\n');
    }
}

/// `capacity block` → `Capacity block`.
fn capitalized(s: &str) -> String {
    let mut chars = s.chars();
    chars
        .next()
        .map(|c| c.to_uppercase().chain(chars).collect())
        .unwrap_or_default()
}

fn heading(md: &mut String, title: &str) {
    let _ = write!(md, "\n### {title}\n\n");
}

/// A collapsed section; `body` writes its markdown. Blank lines around the body let GitHub
/// render the markdown inside the HTML block.
fn details(md: &mut String, summary: &str, body: impl FnOnce(&mut String)) {
    let _ = write!(md, "\n<details>\n<summary>{summary}</summary>\n\n");
    body(md);
    md.push_str("\n</details>\n");
}

/// No trailing whitespace, at most one blank line in a row, one newline at the end.
fn tidy(md: &str) -> String {
    let mut out = String::with_capacity(md.len());
    let mut blank = true;
    for line in md.lines().map(str::trim_end) {
        if line.is_empty() {
            if !blank {
                out.push('\n');
            }
            blank = true;
        } else {
            out.push_str(line);
            out.push('\n');
            blank = false;
        }
    }
    while out.ends_with("\n\n") {
        out.pop();
    }
    out
}

fn headline(md: &mut String, plan: &Plan) {
    let verdict = Verdict::of(&plan.gates);
    let _ = writeln!(md, "## gpucap plan: **{}**\n", verdict.title());
    let _ = writeln!(
        md,
        "Horizon {} → {} ({} h), made {} UTC, solver {}.",
        text(&short_time(&plan.horizon.start)),
        text(&short_time(&plan.horizon.end)),
        thousands(plan.horizon.hours.into()),
        text(&short_time(&plan.created_at)),
        text(plan_view::solver_word(&plan.solution)),
    );
    let mut t = MdTable::new(&[("Summary", L), ("", R)]);
    t.row(vec![
        "Expected total".into(),
        format!("**{}**", dollars(plan.cost.expected_total)),
    ]);
    t.row(vec![
        "Irreversible (capacity blocks, commitments)".into(),
        dollars(plan.cost.irreversible),
    ]);
    if let Some(f) = &plan.cost.fluid {
        t.row(vec![
            "Being runnable (campaigns placed whole)".into(),
            text(&plan_view::runnable_phrase(f)),
        ]);
    }
    match best_baseline(plan).and_then(|b| Some((b, saving(plan, b)?))) {
        Some((b, (amount, fraction))) => {
            let pct = fraction
                .map(|f| format!(" ({})", percent(f)))
                .unwrap_or_default();
            let what = if amount >= 0.0 {
                "Saving"
            } else {
                "Extra cost"
            };
            t.row(vec![
                format!("{what} vs {} (cheapest baseline)", code_cell(&b.name)),
                format!("{}{pct}", dollars(amount.abs())),
            ]);
        }
        None => t.row(vec!["Baselines".into(), "none covers the demand".into()]),
    }
    if !plan.risk.worst_scenario.is_empty() {
        t.row(vec![
            format!("Worst scenario ({})", code_cell(&plan.risk.worst_scenario)),
            dollars(plan.risk.worst_total),
        ]);
    }
    t.row(vec![
        "Budget gates".into(),
        format!("{}: {}", verdict.sentence(), gate_counts(&plan.gates)),
    ]);
    t.write(md);
}

/// A phrase: prose escaped, names in code spans (escaped for a table cell when `in_table`).
fn phrase(p: &Phrase, in_table: bool) -> String {
    p.0.iter()
        .map(|part| match part {
            Part::Text(s) => text(s),
            Part::Name(s) => code_span(s, in_table),
        })
        .collect()
}

/// What changed since the previous plan: a summary line, `+ / - / ~` rows with cost changes,
/// the totals before and now, and why the plan moved.
fn changes_since(md: &mut String, plan: &Plan, d: &PlanDiff) {
    heading(md, "Changes since the last applied plan");
    let previous = format!(
        "{}, made {} UTC",
        code(diff_view::previous_name(d)),
        text(&short_time(&d.previous.created_at))
    );
    let unchanged = format!(
        "{} action{}",
        thousands(d.unchanged as u64),
        if d.unchanged == 1 { "" } else { "s" }
    );
    if d.is_empty() {
        let _ = writeln!(
            md,
            "No changes since {previous}: the plan buys and runs the same ({unchanged})."
        );
    } else {
        let _ = writeln!(
            md,
            "**{}**
",
            text(&diff_view::headline(d))
        );
        let _ = writeln!(md, "Compared with {previous}; {unchanged} unchanged.");
        let mut t = MdTable::new(&[
            ("", L),
            ("Action", L),
            ("Id", L),
            ("Instances", L),
            ("When", L),
            ("Cost", R),
            ("Change", R),
            ("What changed", L),
        ]);
        let rows = diff_view::rows(d);
        let shown = rows.len().min(MAX_CHANGE_ROWS);
        for row in &rows[..shown] {
            let a = row.action;
            let what = match (row.sign, row.changed) {
                (_, Some(c)) => {
                    let what = diff_view::change_phrases(c)
                        .iter()
                        .map(|p| phrase(p, true))
                        .collect::<Vec<_>>()
                        .join("; ");
                    if c.id == c.previous_id {
                        what
                    } else {
                        format!("{what} (was {})", code_cell(&c.previous_id))
                    }
                }
                (Sign::Added, None) => "new".into(),
                _ => "removed".into(),
            };
            t.row(vec![
                text(row.sign.symbol()),
                kind_label(a.kind).into(),
                code_cell(&a.id),
                text(&plan_view::size(a)),
                text(&plan_view::window(a)),
                dollars(row.cost),
                text(&signed_money(row.change)),
                what,
            ]);
        }
        t.write(md);
        if shown < rows.len() {
            let _ = writeln!(
                md,
                "\n… and {} more changes, runs last (all are in the JSON: `gpucap plan --format json --compare-to …`).\n",
                rows.len() - shown
            );
        }
        let mut t = MdTable::new(&[("Total", L), ("Before", R), ("Now", R), ("Change", R)]);
        for (label, x) in [
            ("Expected cost", &d.totals.expected),
            (
                "Irreversible (capacity blocks, commitments)",
                &d.totals.irreversible,
            ),
        ] {
            t.row(vec![
                label.into(),
                dollars(x.old),
                dollars(x.new),
                text(&diff_view::delta(x)),
            ]);
        }
        t.write(md);
        let _ = writeln!(
            md,
            "Run costs are for scenario {}; the totals are expected over every scenario.",
            code(&plan.actions_scenario)
        );
    }
    if d.is_empty() && d.why.is_empty() {
        md.push_str("No input changed either (the same fingerprint).\n");
        return;
    }
    let _ = writeln!(
        md,
        "\n{}\n",
        if d.is_empty() {
            "What moved without changing the plan:"
        } else {
            "Why the plan moved:"
        }
    );
    for p in diff_view::why_phrases(d) {
        let _ = writeln!(md, "- {}", phrase(&p, false));
    }
}

fn gates(md: &mut String, plan: &Plan) {
    heading(md, "Budget gates");
    let g = &plan.gates;
    if g.deny.is_empty() && g.approval.is_empty() && g.warn.is_empty() {
        md.push_str("No gate denied, warned or asked for approval.\n");
        return;
    }
    let mut t = MdTable::new(&[("Result", L), ("Rule", L), ("Finding", L), ("Fix", L)]);
    let mut add = |label: &str, set: &[Decision]| {
        for d in set {
            t.row(vec![
                label.into(),
                code_cell(&d.rule),
                text(&d.message),
                text(&d.fix),
            ]);
        }
    };
    add("**deny**", &g.deny);
    add("**approval**", &g.approval);
    add("warn", &g.warn);
    t.write(md);
}

/// Where the campaigns placed whole run (`[planning] placement = "gangs"`); nothing for fluid
/// plans.
fn campaigns(md: &mut String, plan: &Plan) {
    let placed = plan_view::placed_campaigns(plan);
    if placed.is_empty() {
        return;
    }
    heading(
        md,
        "Where campaigns run (whole, in one place, start to end)",
    );
    let mut t = MdTable::new(&[
        ("Campaign", L),
        ("Pool", L),
        ("When", L),
        ("Where", L),
        ("On", L),
        ("Runs on", L),
        ("Restarts", R),
    ]);
    for (c, p) in placed {
        t.row(vec![
            text(&c.name),
            text(&c.pool),
            text(&plan_view::campaign_window(c)),
            text(&plan_view::placement_place(p)),
            text(&plan_view::placement_size(p)),
            text(&plan_view::campaign_carriers(plan, c)),
            text(&plan_view::restarts(p)),
        ]);
    }
    t.write(md);
}

fn quota_increases(md: &mut String, plan: &Plan) {
    if plan.quota_increases.is_empty() {
        return;
    }
    heading(md, "Quota increases to request");
    let mut t = MdTable::new(&[("Quota", L), ("Ask by", L), ("Needed", L), ("Why", L)]);
    for q in &plan.quota_increases {
        t.row(vec![
            text(&plan_view::quota_increase(q)),
            text(&short_time(&q.request_by)),
            if q.needed { "yes" } else { "no, saves money" }.into(),
            text(&q.reason),
        ]);
    }
    t.write(md);
}

fn buy(md: &mut String, plan: &Plan) {
    heading(md, "What to buy and when");
    let actions = purchases(plan);
    if actions.is_empty() {
        md.push_str("Nothing to buy: the plan uses on-demand and spot capacity only.\n");
    } else {
        let mut t = MdTable::new(&[
            ("Action", L),
            ("Pool", L),
            ("Where", L),
            ("Instances", L),
            ("When", L),
            ("Act by", L),
            ("Cost", R),
            ("Irreversible", L),
        ]);
        let shown = actions.len().min(MAX_PURCHASE_ROWS);
        for a in &actions[..shown] {
            t.row(vec![
                kind_label(a.kind).into(),
                code_cell(&a.pool),
                text(&plan_view::place(a)),
                text(&plan_view::size(a)),
                text(&plan_view::window(a)),
                text(&short_time(&a.due)),
                dollars(a.cost),
                if a.irreversible { "yes" } else { "no" }.into(),
            ]);
        }
        t.write(md);
        if shown < actions.len() {
            let _ = writeln!(
                md,
                "\n… and {} more purchases (the first {shown} by start are shown; all are in the plan file).",
                actions.len() - shown
            );
        }
    }
    let pools = runs_by_pool(plan);
    if pools.is_empty() {
        return;
    }
    let _ = writeln!(
        md,
        "\nOn-demand and spot runs in scenario {}:",
        code(&plan.actions_scenario)
    );
    let peak = |r: &plan_view::RunTotals| {
        if r.runs == 0 {
            "—".to_string()
        } else {
            plan_view::instances(r.peak_instances, r.peak_gpus)
        }
    };
    let mut t = MdTable::new(&[
        ("Pool", L),
        ("On-demand peak", R),
        ("On-demand cost", R),
        ("Spot peak", R),
        ("Spot cost", R),
    ]);
    for p in pools {
        t.row(vec![
            code_cell(&p.pool),
            peak(&p.on_demand),
            dollars_or_dash(p.on_demand.cost),
            peak(&p.spot),
            dollars_or_dash(p.spot.cost),
        ]);
    }
    t.write(md);
}

fn cost(md: &mut String, plan: &Plan) {
    heading(md, "Cost by kind and month");
    let total = plan.cost.expected_total;
    let mut t = MdTable::new(&[("Kind", L), ("Expected", R), ("Share", R)]);
    for (i, (name, get)) in KINDS.iter().enumerate() {
        let cost = get(&plan.cost.by_kind);
        if cost == 0.0 {
            continue;
        }
        let name = if plan_view::kind_is_irreversible(i) {
            format!("{name} (irreversible)")
        } else {
            name.to_string()
        };
        t.row(vec![
            name,
            dollars(cost),
            share(cost, total).map(percent).unwrap_or_default(),
        ]);
    }
    t.row(vec!["**Total**".into(), format!("**{}**", dollars(total))]);
    t.write(md);
    if plan.cost.by_month.is_empty() {
        return;
    }
    let Some(months) = plan_view::cost_by_month(plan) else {
        let mut t = MdTable::new(&[("Month", L), ("Expected", R)]);
        for m in &plan.cost.by_month {
            t.row(vec![text(&m.month), dollars(m.expected)]);
        }
        t.write(md);
        return;
    };
    let shown: Vec<usize> = (0..KINDS.len())
        .filter(|&k| months.iter().any(|m| m.kinds[k].abs() >= 0.5))
        .collect();
    let names: Vec<String> = shown.iter().map(|&k| capitalized(KINDS[k].0)).collect();
    let mut header = vec![("Month", L)];
    header.extend(names.iter().map(|n| (n.as_str(), R)));
    header.push(("Total", R));
    let mut t = MdTable::new(&header);
    for m in &months {
        let mut row = vec![text(&m.month)];
        row.extend(shown.iter().map(|&k| dollars_or_dash(m.kinds[k])));
        row.push(dollars(m.total));
        t.row(row);
    }
    t.write(md);
    if shown.iter().any(|&k| k >= 3) {
        let _ = writeln!(
            md,
            "On-demand and spot per month are estimated from the runs of scenario {}.",
            code(&plan.actions_scenario)
        );
    }
}

fn baselines(md: &mut String, plan: &Plan) {
    heading(md, "Against simpler strategies");
    if plan.baselines.is_empty() {
        md.push_str("No baselines in the plan.\n");
        return;
    }
    let mut t = MdTable::new(&[
        ("Strategy", L),
        ("Expected", R),
        ("This plan saves", R),
        ("Saving", R),
        ("What it means", L),
    ]);
    for b in &plan.baselines {
        let (cost, amount, pct) = match (b.expected_total, saving(plan, b)) {
            (Some(total), Some((amount, fraction))) => (
                dollars(total),
                dollars(amount),
                fraction.map(percent).unwrap_or_default(),
            ),
            _ => ("cannot cover the demand".into(), "—".into(), String::new()),
        };
        t.row(vec![
            code_cell(&b.name),
            cost,
            amount,
            pct,
            text(&b.description),
        ]);
    }
    t.write(md);
}

fn risk(md: &mut String, plan: &Plan) {
    heading(md, "Risk");
    let risk = &plan.risk;
    let names = super::plan_view::scenario_names(plan);
    if names.is_empty() {
        md.push_str("No scenarios in the plan.\n");
        return;
    }
    let mut t = MdTable::new(&[
        ("Scenario", L),
        ("Probability", R),
        ("On-demand", R),
        ("Spot", R),
        ("Total", R),
        ("Idle term GPU-h", R),
        ("Idle term cost", R),
    ]);
    for name in names {
        let cost = plan.cost.by_scenario.iter().find(|s| s.name == name);
        let stranded = risk.stranded.iter().find(|s| s.scenario == name);
        let probability = cost
            .map(|c| c.probability)
            .or(stranded.map(|s| s.probability));
        let money_or_dash = |x: Option<f64>| x.map(dollars).unwrap_or_else(|| "—".into());
        let label = if name == risk.worst_scenario {
            format!("{} (worst)", code_cell(name))
        } else {
            code_cell(name)
        };
        t.row(vec![
            label,
            probability.map(percent).unwrap_or_default(),
            money_or_dash(cost.map(|c| c.on_demand)),
            money_or_dash(cost.map(|c| c.spot)),
            money_or_dash(cost.map(|c| c.total)),
            stranded
                .map(|s| thousands(s.gpu_hours))
                .unwrap_or_else(|| "—".into()),
            money_or_dash(stranded.map(|s| s.cost)),
        ]);
    }
    t.write(md);
    md.push_str(
        "Idle term capacity: capacity blocks, reservations and commitments paid for but not \
         used when the scenario happens.\n",
    );
}

fn all_actions(md: &mut String, plan: &Plan) {
    if plan.actions.is_empty() {
        return;
    }
    details(md, &format!("All actions ({})", plan.actions.len()), |md| {
        let mut t = MdTable::new(&[
            ("Id", L),
            ("Action", L),
            ("Pool", L),
            ("Where", L),
            ("Instances", L),
            ("When", L),
            ("Act by", L),
            ("Bookable from", L),
            ("Cost", R),
            ("Offer", L),
            ("Campaigns", L),
        ]);
        for a in plan.actions.iter().take(MAX_ACTION_ROWS) {
            t.row(vec![
                code_cell(&a.id),
                kind_label(a.kind).into(),
                code_cell(&a.pool),
                text(&plan_view::place(a)),
                text(&plan_view::size(a)),
                text(&plan_view::window(a)),
                text(&short_time(&a.due)),
                a.bookable_from
                    .as_deref()
                    .map(|b| text(&short_time(b)))
                    .unwrap_or_default(),
                dollars(a.cost),
                code_cell(&a.offer),
                a.campaigns
                    .iter()
                    .map(|c| code_cell(c))
                    .collect::<Vec<_>>()
                    .join(", "),
            ]);
        }
        t.write(md);
        if plan.actions.len() > MAX_ACTION_ROWS {
            let _ = writeln!(
                md,
                "\n… and {} more actions in the plan file.\n",
                plan.actions.len() - MAX_ACTION_ROWS
            );
        }
        md.push_str(
            "Run costs are for the scenario the runs follow; term costs are for the whole \
                 term.\n",
        );
    });
}

fn pools_and_teams(md: &mut String, plan: &Plan) {
    let c = &plan.cost;
    if c.by_pool.is_empty() && c.by_team.is_empty() {
        return;
    }
    details(md, "Cost by pool and team", |md| {
        let mut t = MdTable::new(&[("Pool", L), ("Expected", R), ("Share", R)]);
        for p in &c.by_pool {
            t.row(vec![
                code_cell(&p.pool),
                dollars(p.expected),
                share(p.expected, c.expected_total)
                    .map(percent)
                    .unwrap_or_default(),
            ]);
        }
        t.write(md);
        let mut t = MdTable::new(&[("Team", L), ("Expected", R), ("Share", R)]);
        for team in &c.by_team {
            t.row(vec![
                team.team
                    .as_deref()
                    .map(code_cell)
                    .unwrap_or_else(|| "(no team)".into()),
                dollars(team.expected),
                share(team.expected, c.expected_total)
                    .map(percent)
                    .unwrap_or_default(),
            ]);
        }
        t.write(md);
    });
}

fn quotes(md: &mut String, plan: &Plan) {
    if plan.quotes.is_empty() {
        return;
    }
    details(md, &format!("Price quotes ({})", plan.quotes.len()), |md| {
        let mut t = MdTable::new(&[
            ("Offer", L),
            ("Source", L),
            ("Fetched", L),
            ("Age", R),
            ("Per instance-hour", R),
            ("Upfront per instance", R),
            ("Offering id", L),
            ("Origin", L),
        ]);
        for q in &plan.quotes {
            t.row(vec![
                code_cell(&q.offer),
                text(&q.source),
                text(&short_time(&q.fetched_at)),
                text(&age(&q.fetched_at, &plan.created_at)),
                price(q.price_per_instance_hour),
                price(q.upfront_per_instance),
                q.offering_id.as_deref().map(code_cell).unwrap_or_default(),
                text(&q.origin),
            ]);
        }
        t.write(md);
        md.push_str("Ages are at the time the plan was made.\n");
    });
}

fn assumptions(md: &mut String, plan: &Plan) {
    if plan.assumptions.is_empty() {
        return;
    }
    details(
        md,
        &format!("Assumptions ({})", plan.assumptions.len()),
        |md| {
            for a in &plan.assumptions {
                let _ = writeln!(md, "- {}", text(a));
            }
        },
    );
}

fn inputs(md: &mut String, plan: &Plan) {
    let f = &plan.fingerprint;
    details(
        md,
        &format!("Inputs ({}) and fingerprint", f.inputs.len()),
        |md| {
            let _ = writeln!(
                md,
                "Fingerprint {}: applying this plan is refused if any input below has changed.",
                code(&f.digest)
            );
            if f.inputs.is_empty() {
                return;
            }
            let mut t = MdTable::new(&[("Kind", L), ("Input", L), ("SHA-256", L)]);
            for i in &f.inputs {
                t.row(vec![
                    text(&i.kind),
                    code_cell(&i.name),
                    code_cell(&i.sha256),
                ]);
            }
            t.write(md);
        },
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_escapes_markdown_and_html() {
        assert_eq!(text("a|b"), "a\\|b");
        assert_eq!(text("<img src=x>"), "&lt;img src=x&gt;");
        assert_eq!(text("x\ny"), "x y");
        assert_eq!(text("- item"), "\\- item");
        assert_eq!(text("2027. year"), "2027\\. year");
        assert_eq!(text("$5 and $6"), "\\$5 and \\$6");
        assert_eq!(text("h100-us"), "h100-us");
    }

    #[test]
    fn code_spans_survive_backticks_and_pipes() {
        assert_eq!(code_cell("a|b"), "`a\\|b`");
        assert_eq!(code("a|b"), "`a|b`");
        assert_eq!(code("a`b"), "``a`b``");
        assert_eq!(code("`x`"), "`` `x` ``");
        assert_eq!(code(""), "—");
    }

    #[test]
    fn tidy_trims_and_collapses() {
        assert_eq!(tidy("\n\na  \n\n\n\nb\n\n"), "a\n\nb\n");
    }
}
