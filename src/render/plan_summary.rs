//! The terminal summary of a plan (`gpucap plan`, `--format table`): what it costs and saves,
//! what changed since a previous plan (`--compare-to`), what to buy and when, cost by kind and
//! month, baselines, risk and the gates, so a person can review a plan without opening the JSON.

use std::fmt::Write;

use comfy_table::{
    Cell, CellAlignment, ColumnConstraint, ContentArrangement, Table, Width,
    presets::UTF8_BORDERS_ONLY,
};
use owo_colors::{AnsiColors, OwoColorize};

use super::diff_view::{self, Part, Phrase, Sign, signed_money};
use super::plan_view::{
    self, KINDS, Verdict, best_baseline, gate_counts, kind_is_irreversible, kind_label, money,
    money_or_dash, percent, purchases, runs_by_pool, saving, saving_phrase, share, short_time,
};
use super::terminal::thousands;
use crate::plan::Plan;
use crate::plan::diff::{Delta, PlanDiff};

/// The summary as text; `color` adds ANSI colour to the verdict, headings and gate labels.
/// Strings from the plan are shown with control characters escaped, so a hostile campaign or
/// pool name cannot move the cursor or recolour the terminal.
pub fn summary(plan: &Plan, color: bool) -> String {
    summary_with_changes(plan, None, color)
}

/// The summary with, after its headline, what changed since a previous plan.
pub fn summary_with_changes(plan: &Plan, changes: Option<&PlanDiff>, color: bool) -> String {
    summary_in(plan, changes, color, None)
}

/// The summary fitted to `width` columns (`None`: as wide as it comes): on a narrow screen
/// the purchases table shows short dates with each window's length and shorter sizes, every
/// table lays its columns out within the width (a cell that still does not fit wraps inside
/// its column), and text lines wrap with a hanging indent.
pub fn summary_in(
    plan: &Plan,
    changes: Option<&PlanDiff>,
    color: bool,
    width: Option<usize>,
) -> String {
    let style = Style { color, width };
    let mut out = String::new();
    headline(&mut out, plan, style);
    if let Some(d) = changes {
        changes_since(&mut out, plan, d, style);
    }
    buy(&mut out, plan, style);
    campaigns(&mut out, plan, style);
    quota_increases(&mut out, plan, style);
    runs(&mut out, plan, style);
    cost_by_kind(&mut out, plan, style);
    cost_by_month(&mut out, plan, style);
    baselines(&mut out, plan, style);
    risk(&mut out, plan, style);
    gates(&mut out, plan, style);
    match width {
        Some(w) => super::terminal::fit(&out, w),
        None => out,
    }
}

/// Below this many columns the purchases table uses its compact form.
const COMPACT_BELOW: usize = 160;

#[derive(Clone, Copy)]
struct Style {
    color: bool,
    width: Option<usize>,
}

impl Style {
    /// Whether tables take their compact layout (a width below [`COMPACT_BELOW`]).
    fn compact(self) -> bool {
        self.width.is_some_and(|w| w < COMPACT_BELOW)
    }

    fn heading(self, out: &mut String, text: &str) {
        if self.color {
            let _ = writeln!(out, "\n{}", text.bold());
        } else {
            let _ = writeln!(out, "\n{text}");
        }
    }

    fn paint(self, text: &str, c: AnsiColors) -> String {
        if self.color {
            text.color(c).bold().to_string()
        } else {
            text.to_string()
        }
    }

    fn verdict(self, v: Verdict) -> String {
        let c = match v {
            Verdict::Denied => AnsiColors::Red,
            Verdict::NeedsApproval => AnsiColors::Yellow,
            Verdict::Allowed => AnsiColors::Green,
        };
        self.paint(v.sentence(), c)
    }
}

/// The text with control characters (escape sequences, newlines) and bidirectional overrides
/// shown escaped ([`crate::text::visible`]).
fn clean(s: &str) -> String {
    crate::text::visible(s).into_owned()
}

/// A table whose columns named `>name` are right-aligned, header included, laid out within
/// the style's width.
fn table(style: Style, header: &[&str]) -> Table {
    let mut t = Table::new();
    t.load_preset(UTF8_BORDERS_ONLY);
    if let Some(w) = style.width {
        t.set_content_arrangement(ContentArrangement::Dynamic);
        t.set_width(u16::try_from(w).unwrap_or(u16::MAX));
    }
    t.set_header(header.iter().map(|h| Cell::new(h.trim_start_matches('>'))));
    for (i, h) in header.iter().enumerate() {
        if let (true, Some(c)) = (h.starts_with('>'), t.column_mut(i)) {
            c.set_cell_alignment(CellAlignment::Right);
        }
    }
    t
}

fn right(text: impl ToString) -> Cell {
    Cell::new(text).set_alignment(CellAlignment::Right)
}

fn text(s: &str) -> Cell {
    Cell::new(clean(s))
}

/// A cell of two lines, each escaped like [`text`].
fn two(first: &str, second: &str) -> Cell {
    Cell::new(format!("{}\n{}", clean(first), clean(second)))
}

fn push_table(out: &mut String, t: &mut Table) {
    let _ = writeln!(out, "{t}");
}

fn headline(out: &mut String, plan: &Plan, style: Style) {
    let _ = writeln!(
        out,
        "plan for {} → {} ({} h), made {}, solver: {}",
        clean(&short_time(&plan.horizon.start)),
        clean(&short_time(&plan.horizon.end)),
        thousands(plan.horizon.hours.into()),
        clean(&short_time(&plan.created_at)),
        clean(plan_view::solver_word(&plan.solution))
    );
    let cost = &plan.cost;
    let mut rows: Vec<(String, String)> = vec![
        ("expected total".into(), money(cost.expected_total)),
        (
            "irreversible".into(),
            format!(
                "{}  (capacity blocks and commitments: spent once bought)",
                money(cost.irreversible)
            ),
        ),
    ];
    if let Some(f) = &cost.fluid {
        rows.push(("being runnable".into(), plan_view::runnable_phrase(f)));
    }
    match best_baseline(plan).and_then(|b| Some((b, saving(plan, b)?))) {
        Some((b, (amount, fraction))) => rows.push((
            format!("vs {}", clean(&b.name)),
            format!(
                "{}  (the cheapest baseline)",
                saving_phrase(amount, fraction)
            ),
        )),
        None => rows.push(("baselines".into(), "none covers the demand".into())),
    }
    rows.push((
        "gates".into(),
        format!(
            "{}: {}",
            style.verdict(Verdict::of(&plan.gates)),
            gate_counts(&plan.gates)
        ),
    ));
    let width = rows
        .iter()
        .map(|(k, _)| k.chars().count())
        .max()
        .unwrap_or(0);
    for (k, v) in rows {
        let pad = width - k.chars().count();
        let _ = writeln!(out, "  {k}{}  {v}", " ".repeat(pad));
    }
}

/// A phrase with every part's control characters escaped.
fn phrase(p: &Phrase) -> String {
    p.0.iter()
        .map(|part| match part {
            Part::Text(s) | Part::Name(s) => clean(s),
        })
        .collect()
}

fn phrases(list: &[Phrase]) -> String {
    list.iter().map(phrase).collect::<Vec<_>>().join("; ")
}

/// `+ / - / ~` rows (added, changed, removed) with their cost changes, the totals old → new,
/// and why the plan moved.
fn changes_since(out: &mut String, plan: &Plan, d: &PlanDiff, style: Style) {
    let name = clean(diff_view::previous_name(d));
    style.heading(
        out,
        &format!(
            "changes since {name} (made {})",
            clean(&short_time(&d.previous.created_at))
        ),
    );
    if d.is_empty() {
        let _ = writeln!(
            out,
            "  No changes since {name}: the plan buys and runs the same ({} action{})",
            thousands(d.unchanged as u64),
            if d.unchanged == 1 { "" } else { "s" }
        );
    } else {
        let _ = writeln!(out, "  {}", diff_view::headline(d));
        let mut t = table(
            style,
            &[
                "",
                "action",
                "pool",
                "where",
                "instances",
                "when",
                ">cost",
                ">change",
                "what changed",
            ],
        );
        for row in diff_view::rows(d) {
            let a = row.action;
            let what = match (row.sign, row.changed) {
                (_, Some(c)) => phrases(&diff_view::change_phrases(c)),
                (Sign::Added, None) => "new".into(),
                _ => "removed".into(),
            };
            t.add_row(vec![
                Cell::new(row.sign.symbol()),
                Cell::new(kind_label(a.kind)),
                text(&a.pool),
                text(&plan_view::place(a)),
                text(&plan_view::size(a)),
                text(&plan_view::window(a)),
                right(money(row.cost)),
                right(signed_money(row.change)),
                Cell::new(what),
            ]);
        }
        // Long descriptions wrap rather than stretch the table.
        t.set_content_arrangement(ContentArrangement::Dynamic);
        if let Some(c) = t.column_mut(8) {
            c.set_constraint(ColumnConstraint::UpperBoundary(Width::Fixed(60)));
        }
        push_table(out, &mut t);
        let rows: [(&str, &Delta); 2] = [
            ("expected total", &d.totals.expected),
            ("irreversible", &d.totals.irreversible),
        ];
        for (label, x) in rows {
            let _ = writeln!(
                out,
                "  {label:<14}  {} → {}  {}",
                money(x.old),
                money(x.new),
                diff_view::delta(x)
            );
        }
        let _ = writeln!(
            out,
            "  {} action{} unchanged; run costs are for scenario \"{}\", the totals are expected over every scenario",
            thousands(d.unchanged as u64),
            if d.unchanged == 1 { "" } else { "s" },
            clean(&plan.actions_scenario)
        );
    }
    if d.is_empty() && d.why.is_empty() {
        out.push_str("  no input changed either (the same fingerprint)\n");
        return;
    }
    let _ = writeln!(
        out,
        "  {}",
        if d.is_empty() {
            "what moved without changing the plan:"
        } else {
            "why:"
        }
    );
    for p in diff_view::why_phrases(d) {
        let _ = writeln!(out, "    - {}", phrase(&p));
    }
}

fn buy(out: &mut String, plan: &Plan, style: Style) {
    style.heading(out, "what to buy and when");
    let actions = purchases(plan);
    if actions.is_empty() {
        out.push_str("  nothing to buy: the plan uses on-demand and spot capacity only\n");
        return;
    }
    if style.compact() {
        // Narrow: the pool under the place, the date to act by under the window, short dates
        // with the window's length, and the instance count before the type.
        let mut t = table(
            style,
            &[
                "action",
                "where, pool",
                "instances",
                "when, act by",
                ">cost",
                "irrev.",
            ],
        );
        for a in actions {
            t.add_row(vec![
                Cell::new(plan_view::short_kind(a.kind)),
                two(&plan_view::place(a), &a.pool),
                text(&plan_view::short_size(a)),
                two(
                    &plan_view::short_window(a),
                    &format!("by {}", plan_view::short_date(&a.due)),
                ),
                right(money(a.cost)),
                Cell::new(if a.irreversible { "yes" } else { "no" }),
            ]);
        }
        push_table(out, &mut t);
        return;
    }
    let mut t = table(
        style,
        &[
            "action",
            "pool",
            "where",
            "instances",
            "when",
            "act by",
            ">cost",
            "irreversible",
        ],
    );
    for a in actions {
        t.add_row(vec![
            Cell::new(kind_label(a.kind)),
            text(&a.pool),
            text(&plan_view::place(a)),
            text(&plan_view::size(a)),
            text(&plan_view::window(a)),
            text(&short_time(&a.due)),
            right(money(a.cost)),
            Cell::new(if a.irreversible { "yes" } else { "no" }),
        ]);
    }
    push_table(out, &mut t);
}

/// Where the campaigns placed whole run (`[planning] placement = "gangs"`); nothing for fluid
/// plans.
fn campaigns(out: &mut String, plan: &Plan, style: Style) {
    let placed = plan_view::placed_campaigns(plan);
    if placed.is_empty() {
        return;
    }
    style.heading(
        out,
        "where campaigns run (whole, in one place, start to end)",
    );
    if style.compact() {
        let mut t = table(
            style,
            &["campaign", "when", "where, on", "runs on", "restarts"],
        );
        for (c, p) in placed {
            t.add_row(vec![
                text(&c.name),
                text(&plan_view::short_campaign_window(c)),
                two(
                    &plan_view::placement_place(p),
                    &plan_view::placement_size(p),
                ),
                text(&plan_view::campaign_carriers(plan, c)),
                right(plan_view::restarts(p)),
            ]);
        }
        push_table(out, &mut t);
        return;
    }
    let mut t = table(
        style,
        &["campaign", "when", "where", "on", "runs on", "restarts"],
    );
    for (c, p) in placed {
        t.add_row(vec![
            text(&c.name),
            text(&plan_view::campaign_window(c)),
            text(&plan_view::placement_place(p)),
            text(&plan_view::placement_size(p)),
            text(&plan_view::campaign_carriers(plan, c)),
            right(plan_view::restarts(p)),
        ]);
    }
    push_table(out, &mut t);
}

fn quota_increases(out: &mut String, plan: &Plan, style: Style) {
    if plan.quota_increases.is_empty() {
        return;
    }
    style.heading(out, "quota increases to request");
    let mut t = table(style, &["quota", "ask by", "needed", "why"]);
    for q in &plan.quota_increases {
        t.add_row(vec![
            text(&plan_view::quota_increase(q)),
            text(&short_time(&q.request_by)),
            Cell::new(if q.needed { "yes" } else { "no, saves" }),
            text(&q.reason),
        ]);
    }
    push_table(out, &mut t);
}

fn runs(out: &mut String, plan: &Plan, style: Style) {
    let pools = runs_by_pool(plan);
    if pools.is_empty() {
        return;
    }
    style.heading(
        out,
        &format!(
            "on-demand and spot runs (scenario \"{}\")",
            clean(&plan.actions_scenario)
        ),
    );
    let mut t = table(
        style,
        &[
            "pool",
            ">on-demand peak",
            ">on-demand cost",
            ">spot peak",
            ">spot cost",
        ],
    );
    let peak = |r: &plan_view::RunTotals| {
        if r.runs == 0 {
            "—".to_string()
        } else {
            plan_view::instances(r.peak_instances, r.peak_gpus)
        }
    };
    for p in pools {
        t.add_row(vec![
            text(&p.pool),
            right(peak(&p.on_demand)),
            right(money_or_dash(p.on_demand.cost)),
            right(peak(&p.spot)),
            right(money_or_dash(p.spot.cost)),
        ]);
    }
    push_table(out, &mut t);
}

fn cost_by_kind(out: &mut String, plan: &Plan, style: Style) {
    style.heading(out, "cost by kind (expected over scenarios)");
    let total = plan.cost.expected_total;
    let mut t = table(style, &["kind", ">expected", ">share", "irreversible"]);
    for (i, (name, get)) in KINDS.iter().enumerate() {
        let cost = get(&plan.cost.by_kind);
        if cost == 0.0 {
            continue;
        }
        t.add_row(vec![
            Cell::new(name),
            right(money(cost)),
            right(share(cost, total).map(percent).unwrap_or_default()),
            Cell::new(if kind_is_irreversible(i) { "yes" } else { "no" }),
        ]);
    }
    t.add_row(vec![
        Cell::new("total"),
        right(money(total)),
        right(""),
        Cell::new(""),
    ]);
    push_table(out, &mut t);
}

fn cost_by_month(out: &mut String, plan: &Plan, style: Style) {
    style.heading(out, "cost by month (expected)");
    if plan.cost.by_month.is_empty() {
        out.push_str("  no monthly figures in the plan\n");
        return;
    }
    let Some(months) = plan_view::cost_by_month(plan) else {
        let mut t = table(style, &["month", ">expected"]);
        for m in &plan.cost.by_month {
            t.add_row(vec![text(&m.month), right(money(m.expected))]);
        }
        push_table(out, &mut t);
        return;
    };
    let shown: Vec<usize> = (0..KINDS.len())
        .filter(|&k| months.iter().any(|m| m.kinds[k].abs() >= 0.5))
        .collect();
    let names: Vec<String> = shown.iter().map(|&k| format!(">{}", KINDS[k].0)).collect();
    let mut header = vec!["month"];
    header.extend(names.iter().map(String::as_str));
    header.push(">total");
    let mut t = table(style, &header);
    for m in &months {
        let mut row = vec![text(&m.month)];
        row.extend(shown.iter().map(|&k| right(money_or_dash(m.kinds[k]))));
        row.push(right(money(m.total)));
        t.add_row(row);
    }
    push_table(out, &mut t);
    if shown.iter().any(|&k| k >= 3) {
        let _ = writeln!(
            out,
            "  on-demand and spot per month are estimated from the runs of scenario \"{}\"",
            clean(&plan.actions_scenario)
        );
    }
}

fn baselines(out: &mut String, plan: &Plan, style: Style) {
    style.heading(out, "the same demand bought simply");
    if plan.baselines.is_empty() {
        out.push_str("  no baselines in the plan\n");
        return;
    }
    let mut t = table(
        style,
        &[
            "strategy",
            ">expected",
            ">this plan saves",
            ">saving",
            "what it means",
        ],
    );
    for b in &plan.baselines {
        let (cost, phrase, pct) = match (b.expected_total, saving(plan, b)) {
            (Some(total), Some((amount, fraction))) => (
                money(total),
                money(amount),
                fraction.map(percent).unwrap_or_default(),
            ),
            _ => (
                "cannot cover the demand".to_string(),
                "—".to_string(),
                String::new(),
            ),
        };
        t.add_row(vec![
            text(&b.name),
            right(cost),
            right(phrase),
            right(pct),
            text(&b.description),
        ]);
    }
    push_table(out, &mut t);
}

fn risk(out: &mut String, plan: &Plan, style: Style) {
    style.heading(out, "risk: cost per scenario, idle term capacity");
    let risk = &plan.risk;
    let names = super::plan_view::scenario_names(plan);
    if names.is_empty() {
        out.push_str("  no scenarios in the plan\n");
        return;
    }
    let mut t = table(
        style,
        &[
            "scenario",
            ">probability",
            ">on-demand",
            ">spot",
            ">total",
            ">idle term GPU-h",
            ">idle term cost",
        ],
    );
    for name in names {
        let cost = plan.cost.by_scenario.iter().find(|s| s.name == name);
        let stranded = risk.stranded.iter().find(|s| s.scenario == name);
        let probability = cost
            .map(|c| c.probability)
            .or(stranded.map(|s| s.probability));
        let label = if name == risk.worst_scenario {
            format!("{} (worst)", clean(name))
        } else {
            clean(name)
        };
        let money_or_dash = |x: Option<f64>| x.map(money).unwrap_or_else(|| "—".into());
        t.add_row(vec![
            Cell::new(label),
            right(probability.map(percent).unwrap_or_default()),
            right(money_or_dash(cost.map(|c| c.on_demand))),
            right(money_or_dash(cost.map(|c| c.spot))),
            right(money_or_dash(cost.map(|c| c.total))),
            right(
                stranded
                    .map(|s| thousands(s.gpu_hours))
                    .unwrap_or_else(|| "—".into()),
            ),
            right(money_or_dash(stranded.map(|s| s.cost))),
        ]);
    }
    push_table(out, &mut t);
    // Where the idle term capacity is, when more than one pool has some.
    if risk.stranded.iter().any(|s| s.pools.len() > 1) {
        for s in risk.stranded.iter().filter(|s| !s.pools.is_empty()) {
            let by_pool: Vec<String> = s
                .pools
                .iter()
                .map(|p| {
                    format!(
                        "{} {} GPU-h ({})",
                        clean(&p.pool),
                        thousands(p.gpu_hours),
                        money(p.cost)
                    )
                })
                .collect();
            let _ = writeln!(
                out,
                "  idle in \"{}\": {}",
                clean(&s.scenario),
                by_pool.join(", ")
            );
        }
    }
    if !risk.worst_scenario.is_empty() {
        let over = risk.worst_total - plan.cost.expected_total;
        let _ = writeln!(
            out,
            "  worst case: {} in \"{}\", {} {} the expected total",
            money(risk.worst_total),
            clean(&risk.worst_scenario),
            money(over.abs()),
            if over >= 0.0 { "above" } else { "below" }
        );
    }
}

/// The decisions as [`crate::policy::Decisions::report`] words them, labels coloured.
fn gates(out: &mut String, plan: &Plan, style: Style) {
    style.heading(out, "budget gates");
    let g = &plan.gates;
    for (label, set, c) in [
        ("deny", &g.deny, AnsiColors::Red),
        ("approval", &g.approval, AnsiColors::Yellow),
        ("warn", &g.warn, AnsiColors::Yellow),
    ] {
        for d in set {
            let _ = writeln!(
                out,
                "{}: [{}] {}\n  fix: {}",
                style.paint(label, c),
                clean(&d.rule),
                clean(&d.message),
                clean(&d.fix)
            );
        }
    }
    let _ = writeln!(out, "{}: {}", style.verdict(Verdict::of(g)), gate_counts(g));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_are_escaped() {
        assert_eq!(clean("a\u{1b}[31mb\nc"), "a\\u{1b}[31mb\\nc");
        assert_eq!(clean("plain"), "plain");
    }
}
