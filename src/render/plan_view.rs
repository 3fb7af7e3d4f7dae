//! The figures every plan renderer shows, derived once from a [`Plan`]: the verdict, the best
//! baseline, term purchases, run peaks per pool, cost by month split by kind, quote ages. The
//! terminal summary, the markdown comment and the charts format these; none of them recompute.
//!
//! Everything here tolerates any plan content: unparsable times, zero costs, empty lists,
//! segments out of order. Nothing panics.

use chrono::{DateTime, Utc};

use super::terminal::thousands;
use crate::plan::{
    Action, ActionKind, BaselineCost, CampaignPlacement, CampaignRef, FluidCost, KindCost, Plan,
    SolutionSummary,
};
use crate::policy::Decisions;
use crate::timespec::month_hours;

/// What the gates said, in the words of [`Decisions::report`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Denied,
    NeedsApproval,
    Allowed,
}

impl Verdict {
    pub fn of(gates: &Decisions) -> Verdict {
        if gates.is_denied() {
            Verdict::Denied
        } else if gates.needs_approval() {
            Verdict::NeedsApproval
        } else {
            Verdict::Allowed
        }
    }

    /// As [`Decisions::report`] words it.
    pub fn sentence(self) -> &'static str {
        match self {
            Verdict::Denied => "plan denied",
            Verdict::NeedsApproval => "plan allowed after approval",
            Verdict::Allowed => "plan allowed",
        }
    }

    /// A short title: `Denied`, `Needs approval`, `Allowed`.
    pub fn title(self) -> &'static str {
        match self {
            Verdict::Denied => "Denied",
            Verdict::NeedsApproval => "Needs approval",
            Verdict::Allowed => "Allowed",
        }
    }
}

/// `1 deny, 0 approval, 2 warn`, the counts of [`Decisions::report`].
pub fn gate_counts(gates: &Decisions) -> String {
    format!(
        "{} deny, {} approval, {} warn",
        gates.deny.len(),
        gates.approval.len(),
        gates.warn.len()
    )
}

/// Whole dollars with thousands separators: `$1,234,567`, `-$5`. Not-a-number prints as `?`.
pub fn money(x: f64) -> String {
    if !x.is_finite() {
        return "?".into();
    }
    let rounded = x.round();
    let sign = if rounded < 0.0 { "-" } else { "" };
    // `as` saturates, so absurd amounts print as the largest u64 rather than panicking.
    format!("{sign}${}", thousands(rounded.abs() as u64))
}

/// A unit price with its cents: `$98.32`, `-$0.50`. Not-a-number prints as `?`.
pub fn unit_price(x: f64) -> String {
    if !x.is_finite() {
        return "?".into();
    }
    let cents = (x * 100.0).round();
    let sign = if cents < 0.0 { "-" } else { "" };
    let cents = cents.abs() as u64;
    format!("{sign}${}.{:02}", thousands(cents / 100), cents % 100)
}

/// A percentage with one decimal: `12.3 %`; empty when the fraction is not a number.
pub fn percent(fraction: f64) -> String {
    if fraction.is_finite() {
        format!("{:.1} %", fraction * 100.0)
    } else {
        String::new()
    }
}

/// `part / whole`, or `None` when `whole` is zero (or either is not finite).
pub fn share(part: f64, whole: f64) -> Option<f64> {
    let s = part / whole;
    (whole != 0.0 && s.is_finite()).then_some(s)
}

pub fn parse_time(s: &str) -> Option<DateTime<Utc>> {
    DateTime::parse_from_rfc3339(s)
        .ok()
        .map(|t| t.with_timezone(&Utc))
}

/// `2027-01-18` at midnight, else `2027-01-18 11:30` (UTC); the text itself if it is not a time.
pub fn short_time(s: &str) -> String {
    match parse_time(s) {
        Some(t) if t.format("%H:%M:%S").to_string() == "00:00:00" => {
            t.format("%Y-%m-%d").to_string()
        }
        Some(t) => t.format("%Y-%m-%d %H:%M").to_string(),
        None => s.to_string(),
    }
}

/// How old a quote was when the plan was made: `55 min`, `7 h`, `19 d 6 h`.
pub fn age(fetched_at: &str, created_at: &str) -> String {
    let (Some(f), Some(c)) = (parse_time(fetched_at), parse_time(created_at)) else {
        return "?".into();
    };
    let minutes = (c - f).num_minutes();
    if minutes < 0 {
        return "in the future".into();
    }
    match (minutes / (24 * 60), minutes / 60 % 24, minutes % 60) {
        (0, 0, m) => format!("{m} min"),
        (0, h, _) => format!("{h} h"),
        (d, 0, _) => format!("{d} d"),
        (d, h, _) => format!("{d} d {h} h"),
    }
}

/// The horizon's first instant, when it parses.
pub fn horizon_start(plan: &Plan) -> Option<DateTime<Utc>> {
    parse_time(&plan.horizon.start)
}

/// What an action kind is called in prose.
pub fn kind_label(kind: ActionKind) -> &'static str {
    match kind {
        ActionKind::PurchaseCapacityBlock => "capacity block",
        ActionKind::Commit => "commitment",
        ActionKind::Reserve => "reservation",
        ActionKind::RunOnDemand => "on-demand",
        ActionKind::RunSpot => "spot",
        ActionKind::Release => "release",
    }
}

/// The action's kind in a word, for narrow tables: `block`, `commit`, `reserve`.
pub fn short_kind(kind: ActionKind) -> &'static str {
    match kind {
        ActionKind::PurchaseCapacityBlock => "block",
        ActionKind::Commit => "commit",
        ActionKind::Reserve => "reserve",
        ActionKind::RunOnDemand => "on-demand",
        ActionKind::RunSpot => "spot",
        ActionKind::Release => "release",
    }
}

/// `01-18 → 02-28` (without the years), for narrow tables.
pub fn short_campaign_window(c: &CampaignRef) -> String {
    match (&c.start, &c.end) {
        (Some(start), Some(end)) => format!("{} → {}", short_date(start), short_date(end)),
        _ => String::new(),
    }
}

/// `aws us-east-1a` (the zone when there is one, else the region).
pub fn place(a: &Action) -> String {
    match &a.zone {
        Some(zone) => format!("{} {zone}", a.cloud),
        None => format!("{} {}", a.cloud, a.region),
    }
}

/// `p5.48xlarge × 8 = 64 GPUs`; a purchase bought in pieces adds them:
/// `p5.48xlarge × 71 = 568 GPUs in 2 purchases (64 + 7)`.
pub fn size(a: &Action) -> String {
    let mut out = nodes(&a.instance_type, a.instances.into(), a.gpus.into());
    if a.pieces.len() > 1 {
        let pieces: Vec<String> = a.pieces.iter().map(u32::to_string).collect();
        out.push_str(&format!(
            " in {} purchases ({})",
            a.pieces.len(),
            pieces.join(" + ")
        ));
    }
    out
}

/// `aws us-east-1 Running On-Demand P instances (L-417A185B): 1,536 → 4,608 vCPUs`.
pub fn quota_increase(q: &crate::plan::QuotaIncrease) -> String {
    let name = if q.title == q.quota {
        q.quota.clone()
    } else {
        format!("{} ({})", q.title, q.quota)
    };
    format!(
        "{} {} {name}: {} → {} {}",
        q.cloud,
        q.region,
        thousands(q.current),
        thousands(q.requested),
        q.unit
    )
}

/// `2027-01-18 → 2027-02-01`; releases have one time.
pub fn window(a: &Action) -> String {
    if a.kind == ActionKind::Release || a.start == a.end {
        short_time(&a.start)
    } else {
        format!("{} → {}", short_time(&a.start), short_time(&a.end))
    }
}

/// A time without its year: `01-17 11:30`, or `01-17` at midnight.
pub fn short_date(s: &str) -> String {
    parse_time(s).map_or_else(|| s.to_string(), month_day)
}

fn month_day(t: DateTime<Utc>) -> String {
    if t.format("%H:%M").to_string() == "00:00" {
        t.format("%m-%d").to_string()
    } else {
        t.format("%m-%d %H:%M").to_string()
    }
}

/// The compact window for narrow screens: `01-18 11:30 +5d` (the start without its year, and
/// the length), or the start alone for a release.
pub fn short_window(a: &Action) -> String {
    let (Some(start), Some(end)) = (parse_time(&a.start), parse_time(&a.end)) else {
        return window(a);
    };
    let at = month_day(start);
    if a.kind == ActionKind::Release || end <= start {
        return at;
    }
    format!("{at} +{}", length(end - start))
}

/// `5d`, `1d12h`, `11h30m`.
fn length(d: chrono::Duration) -> String {
    let minutes = d.num_minutes();
    let (days, hours, mins) = (minutes / 1440, minutes % 1440 / 60, minutes % 60);
    let mut out = String::new();
    if days > 0 {
        out.push_str(&format!("{days}d"));
    }
    if hours > 0 {
        out.push_str(&format!("{hours}h"));
    }
    if mins > 0 || out.is_empty() {
        out.push_str(&format!("{mins}m"));
    }
    out
}

/// The compact size: `71 × p5.48xlarge (64 + 7)`.
pub fn short_size(a: &Action) -> String {
    let mut out = format!("{} × {}", thousands(a.instances.into()), a.instance_type);
    if a.pieces.len() > 1 {
        let pieces: Vec<String> = a.pieces.iter().map(u32::to_string).collect();
        out.push_str(&format!(" ({})", pieces.join(" + ")));
    }
    out
}

/// `p5.48xlarge × 8 = 64 GPUs`.
fn nodes(instance_type: &str, instances: u64, gpus: u64) -> String {
    format!(
        "{instance_type} × {} = {} GPUs",
        thousands(instances),
        thousands(gpus)
    )
}

/// The campaigns placed whole (`[planning] placement = "gangs"`), with where they run.
pub fn placed_campaigns(plan: &Plan) -> Vec<(&CampaignRef, &CampaignPlacement)> {
    plan.campaigns
        .iter()
        .filter_map(|c| Some((c, c.placement.as_ref()?)))
        .collect()
}

/// A campaign's restarts and what they cost: `4 ($22,720)`, `0`.
pub fn restarts(p: &CampaignPlacement) -> String {
    if p.restarts == 0 || p.restart_cost <= 0.0 {
        p.restarts.to_string()
    } else {
        format!("{} ({})", p.restarts, money(p.restart_cost))
    }
}

/// The price of being runnable, in words: `+$113,627 (2.0 %) over the same GPU-hours as fluid
/// work, $5,767,174`, saying how far from optimal the fluid plan may be when it is not proven.
pub fn runnable_phrase(fluid: &FluidCost) -> String {
    let gap = if fluid.gap > 0.0 {
        format!(" (within {:.2} % of its optimum)", fluid.gap * 100.0)
    } else {
        String::new()
    };
    // A fluid plan that is not proven optimal can cost more than the plan placed whole.
    if fluid.price < 0.5 {
        return format!(
            "no more than the same GPU-hours as fluid work, {}{gap}",
            money(fluid.expected_total)
        );
    }
    let pct = share(fluid.price, fluid.expected_total)
        .map(|f| format!(" ({})", percent(f)))
        .unwrap_or_default();
    format!(
        "+{}{pct} over the same GPU-hours as fluid work, {}{gap}",
        money(fluid.price),
        money(fluid.expected_total),
    )
}

/// When a campaign runs: `2027-01-18 → 2027-02-27` (empty where it has no demand in the
/// actions' scenario).
pub fn campaign_window(c: &CampaignRef) -> String {
    match (&c.start, &c.end) {
        (Some(start), Some(end)) => format!("{} → {}", short_time(start), short_time(end)),
        _ => String::new(),
    }
}

/// What a placed campaign runs on, by kind: `capacity block × 2, on-demand × 1, owned × 1`
/// (distinct actions of each kind, then capacity already owned).
pub fn campaign_carriers(plan: &Plan, c: &CampaignRef) -> String {
    let mut by_kind: Vec<(&'static str, std::collections::BTreeSet<&str>)> = Vec::new();
    let mut owned = std::collections::BTreeSet::new();
    for run in &c.runs_on {
        if let Some(id) = &run.action {
            let kind = plan
                .actions
                .iter()
                .find(|a| &a.id == id)
                .map_or("action", |a| kind_label(a.kind));
            match by_kind.iter_mut().find(|(k, _)| *k == kind) {
                Some((_, ids)) => {
                    ids.insert(id);
                }
                None => by_kind.push((kind, [id.as_str()].into())),
            }
        } else if let Some(id) = &run.capacity {
            owned.insert(id.as_str());
        }
    }
    let mut parts: Vec<String> = by_kind
        .iter()
        .map(|(kind, ids)| format!("{kind} × {}", ids.len()))
        .collect();
    if !owned.is_empty() {
        parts.push(format!("owned × {}", owned.len()));
    }
    parts.join(", ")
}

/// Where a placed campaign runs: `aws us-east-1`, or the zone where the plan fixes one.
pub fn placement_place(p: &CampaignPlacement) -> String {
    match &p.zone {
        Some(zone) => format!("{} {zone}", p.cloud),
        None => format!("{} {}", p.cloud, p.region),
    }
}

/// What a placed campaign runs on: `p5.48xlarge × 64 = 512 GPUs`.
pub fn placement_size(p: &CampaignPlacement) -> String {
    let gpus = u64::from(p.nodes) * u64::from(p.gpus_per_node);
    nodes(&p.instance_type, p.nodes.into(), gpus)
}

/// `1 instance (8 GPUs)`, `4 instances (32 GPUs)`.
pub fn instances(instances: u64, gpus: u64) -> String {
    let s = if instances == 1 { "" } else { "s" };
    format!(
        "{} instance{s} ({} GPUs)",
        thousands(instances),
        thousands(gpus)
    )
}

/// A cost in a breakdown: whole dollars, or an em dash where there is none.
pub fn money_or_dash(x: f64) -> String {
    if x.abs() < 0.5 {
        "—".into()
    } else {
        money(x)
    }
}

/// The actions that buy, reserve, commit or release: what someone must do, by start time.
pub fn purchases(plan: &Plan) -> Vec<&Action> {
    let mut out: Vec<&Action> = plan
        .actions
        .iter()
        .filter(|a| a.kind.is_term() || a.kind == ActionKind::Release)
        .collect();
    out.sort_by(|a, b| (a.start_hour, &a.pool, &a.id).cmp(&(b.start_hour, &b.pool, &b.id)));
    out
}

/// The on-demand and spot runs of one pool, summed up.
#[derive(Debug, Clone, PartialEq)]
pub struct PoolRuns {
    pub pool: String,
    pub on_demand: RunTotals,
    pub spot: RunTotals,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct RunTotals {
    pub runs: usize,
    /// Most instances running at once, and their GPUs.
    pub peak_instances: u64,
    pub peak_gpus: u64,
    /// From the first start to the last end.
    pub first_hour: Option<u32>,
    pub last_hour: Option<u32>,
    pub cost: f64,
}

/// Run actions per pool, pools in plan order (then any pool only actions name).
pub fn runs_by_pool(plan: &Plan) -> Vec<PoolRuns> {
    let mut pools: Vec<String> = plan.pools.iter().map(|p| p.id.clone()).collect();
    for a in &plan.actions {
        if !pools.contains(&a.pool) {
            pools.push(a.pool.clone());
        }
    }
    pools
        .into_iter()
        .filter_map(|pool| {
            let totals = |kind| {
                let runs: Vec<&Action> = plan
                    .actions
                    .iter()
                    .filter(|a| a.pool == pool && a.kind == kind)
                    .collect();
                RunTotals {
                    runs: runs.len(),
                    peak_instances: peak(&runs, |a| a.instances.into()),
                    peak_gpus: peak(&runs, |a| a.gpus.into()),
                    first_hour: runs.iter().map(|a| a.start_hour).min(),
                    last_hour: runs.iter().map(|a| a.end_hour).max(),
                    cost: runs.iter().map(|a| a.cost).sum(),
                }
            };
            let on_demand = totals(ActionKind::RunOnDemand);
            let spot = totals(ActionKind::RunSpot);
            (on_demand.runs + spot.runs > 0).then_some(PoolRuns {
                pool,
                on_demand,
                spot,
            })
        })
        .collect()
}

/// The largest sum of `value` over actions running at the same time (`[start, end)`, by their
/// times: on a plan in half hours two runs can share an hour without overlapping).
fn peak(actions: &[&Action], value: impl Fn(&Action) -> u64) -> u64 {
    // Ends sort before starts at the same time: back-to-back runs do not overlap. Times were
    // checked when the plan was read; one that does not parse falls back to its hours.
    let at = |text: &str, hour: u32| {
        crate::timespec::parse_timestamp(text).map_or(i64::from(hour) * 3600, |t| t.timestamp())
    };
    let mut events: Vec<(i64, bool, u64)> = actions
        .iter()
        .map(|a| (at(&a.start, a.start_hour), at(&a.end, a.end_hour), a))
        .filter(|(start, end, _)| end > start)
        .flat_map(|(start, end, a)| [(start, true, value(a)), (end, false, value(a))])
        .collect();
    events.sort();
    let (mut level, mut best) = (0u64, 0u64);
    for (_, start, v) in events {
        if start {
            level = level.saturating_add(v);
            best = best.max(level);
        } else {
            level = level.saturating_sub(v);
        }
    }
    best
}

/// Reads one kind's cost.
pub type KindField = fn(&KindCost) -> f64;

/// The kinds of cost, in the order tables and charts show them (term first).
pub const KINDS: [(&str, KindField); 5] = [
    ("capacity block", |k| k.capacity_block),
    ("reservation", |k| k.reservation),
    ("commitment", |k| k.commitment),
    ("on-demand", |k| k.on_demand),
    ("spot", |k| k.spot),
];

/// Whether a kind in [`KINDS`] is spent once bought.
pub fn kind_is_irreversible(index: usize) -> bool {
    index < 3
}

/// One month of `cost.by_month`, split by kind.
#[derive(Debug, Clone, PartialEq)]
pub struct MonthKinds {
    pub month: String,
    /// The plan's figure, exact.
    pub total: f64,
    /// By [`KINDS`]: terms exactly (each purchase's cost spread over its active hours, as the
    /// plan spreads it); on-demand and spot are estimated (see [`cost_by_month`]).
    pub kinds: [f64; 5],
}

/// `cost.by_month` split by kind. The plan gives each month's expected total only; term cost per
/// month follows from the purchase actions, and the rest of the month (the expected on-demand
/// and spot cost) is split between on-demand and spot in proportion to that month's run actions
/// in the actions scenario (or to the whole plan's on-demand and spot cost when a month has no
/// runs). `None` when the horizon start does not parse (nothing can be placed in a month).
pub fn cost_by_month(plan: &Plan) -> Option<Vec<MonthKinds>> {
    let start = horizon_start(plan)?;
    let mut months: Vec<MonthKinds> = plan
        .cost
        .by_month
        .iter()
        .map(|m| MonthKinds {
            month: m.month.clone(),
            total: m.expected,
            kinds: [0.0; 5],
        })
        .collect();
    // Run cost per month in the actions scenario, [on-demand, spot].
    let mut runs: Vec<[f64; 2]> = vec![[0.0; 2]; months.len()];
    for a in &plan.actions {
        let slot = match a.kind {
            ActionKind::PurchaseCapacityBlock => Slot::Kind(0),
            ActionKind::Reserve => Slot::Kind(1),
            ActionKind::Commit => Slot::Kind(2),
            ActionKind::RunOnDemand => Slot::Run(0),
            ActionKind::RunSpot => Slot::Run(1),
            ActionKind::Release => continue,
        };
        // Terms longer than 20 years are cut there: no plan has months that far out.
        let end = a.end_hour.min(a.start_hour.saturating_add(20 * 8784));
        let length = f64::from(a.end_hour.saturating_sub(a.start_hour));
        for (month, hours) in month_hours(start, a.start_hour, end) {
            let Some(i) = months.iter().position(|m| m.month == month) else {
                continue;
            };
            let part = a.cost * f64::from(hours) / length;
            match slot {
                Slot::Kind(k) => months[i].kinds[k] += part,
                Slot::Run(k) => runs[i][k] += part,
            }
        }
    }
    let overall = [plan.cost.by_kind.on_demand, plan.cost.by_kind.spot];
    for (m, run) in months.iter_mut().zip(runs) {
        let term: f64 = m.kinds[..3].iter().sum();
        let rest = (m.total - term).max(0.0);
        let weights = if run[0] + run[1] > 0.0 { run } else { overall };
        let sum = weights[0] + weights[1];
        if sum > 0.0 {
            m.kinds[3] = rest * weights[0] / sum;
            m.kinds[4] = rest * weights[1] / sum;
        } else {
            m.kinds[3] = rest;
        }
    }
    Some(months)
}

#[derive(Clone, Copy)]
enum Slot {
    Kind(usize),
    Run(usize),
}

/// Every scenario the plan prices or measures, in the plan's order.
pub fn scenario_names(plan: &Plan) -> Vec<&str> {
    let mut names: Vec<&str> = plan
        .cost
        .by_scenario
        .iter()
        .map(|s| s.name.as_str())
        .collect();
    for s in &plan.risk.stranded {
        if !names.contains(&s.scenario.as_str()) {
            names.push(&s.scenario);
        }
    }
    names
}

/// The solver's result in one word that matches its gap: `optimal` when the bound meets the
/// cost (within [`crate::solver::OPTIMALITY_GAP`], relative), whatever an older plan file
/// recorded; the recorded status otherwise.
pub fn solver_word(s: &SolutionSummary) -> &str {
    let gap = s.expected_cost - s.bound;
    if gap <= crate::solver::OPTIMALITY_GAP * s.expected_cost.abs().max(1e-9) {
        "optimal"
    } else {
        &s.status
    }
}

/// The cheapest baseline that can cover the demand: what the plan is best compared with.
pub fn best_baseline(plan: &Plan) -> Option<&BaselineCost> {
    plan.baselines
        .iter()
        .filter(|b| b.expected_total.is_some_and(f64::is_finite))
        .min_by(|a, b| {
            a.expected_total
                .unwrap_or(f64::INFINITY)
                .total_cmp(&b.expected_total.unwrap_or(f64::INFINITY))
        })
}

/// A baseline's saving and its fraction, from the plan's figures when given, else computed.
pub fn saving(plan: &Plan, b: &BaselineCost) -> Option<(f64, Option<f64>)> {
    let total = b.expected_total?;
    let saving = b.saving.unwrap_or(total - plan.cost.expected_total);
    let fraction = b.saving_fraction.or_else(|| share(saving, total));
    Some((saving, fraction))
}

/// `saves $128,215 (13.4 %)` or `costs $5 (0.1 %) more`.
pub fn saving_phrase(saving: f64, fraction: Option<f64>) -> String {
    let pct = fraction
        .map(|f| format!(" ({})", percent(f.abs())))
        .unwrap_or_default();
    if saving >= 0.0 {
        format!("saves {}{pct}", money(saving))
    } else {
        format!("costs {}{pct} more", money(-saving))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_solver_word_matches_the_gap() {
        let summary = |status: &str, cost: f64, bound: f64| SolutionSummary {
            status: status.into(),
            expected_cost: cost,
            bound,
            term_cost: 0.0,
        };
        // A bound that meets the cost is optimal, whatever an older plan file recorded.
        assert_eq!(
            solver_word(&summary("feasible", 5_000_000.0, 5_000_000.0)),
            "optimal"
        );
        assert_eq!(
            solver_word(&summary("feasible", 5_000_000.0, 4_999_996.0)),
            "optimal"
        );
        // Further apart: what the solver said.
        assert_eq!(
            solver_word(&summary("feasible", 5_000_000.0, 4_999_000.0)),
            "feasible"
        );
        assert_eq!(solver_word(&summary("optimal", 0.0, 0.0)), "optimal");
        assert_eq!(solver_word(&summary("feasible", 1.0, f64::NAN)), "feasible");
    }

    #[test]
    fn the_price_of_being_runnable_says_what_it_is_measured_against() {
        let proven = FluidCost {
            expected_total: 5_767_174.0,
            price: 113_627.0,
            gap: 0.0,
        };
        assert_eq!(
            runnable_phrase(&proven),
            "+$113,627 (2.0 %) over the same GPU-hours as fluid work, $5,767,174"
        );
        let found = FluidCost {
            gap: 0.0036,
            ..proven
        };
        assert!(
            runnable_phrase(&found)
                .ends_with("as fluid work, $5,767,174 (within 0.36 % of its optimum)")
        );
        let cheaper = FluidCost {
            price: -9_000.0,
            ..found
        };
        assert_eq!(
            runnable_phrase(&cheaper),
            "no more than the same GPU-hours as fluid work, $5,767,174 (within 0.36 % of its optimum)"
        );
    }

    #[test]
    fn money_is_whole_dollars() {
        assert_eq!(money(1_234_567.49), "$1,234,567");
        assert_eq!(money(0.5), "$1");
        assert_eq!(money(-1500.0), "-$1,500");
        assert_eq!(money(-0.2), "$0");
        assert_eq!(money(f64::NAN), "?");
        assert_eq!(unit_price(98.324), "$98.32");
        assert_eq!(unit_price(-0.5), "-$0.50");
        assert_eq!(unit_price(f64::INFINITY), "?");
    }

    #[test]
    fn ages_read_like_durations() {
        let made = "2027-01-03T06:00:00Z";
        assert_eq!(age("2027-01-03T05:05:00Z", made), "55 min");
        assert_eq!(age("2027-01-02T23:00:00Z", made), "7 h");
        assert_eq!(age("2026-12-15T00:00:00Z", made), "19 d 6 h");
        assert_eq!(age("yesterday", made), "?");
    }

    #[test]
    fn short_times_drop_midnight() {
        assert_eq!(short_time("2027-01-18T00:00:00Z"), "2027-01-18");
        assert_eq!(short_time("2027-01-18T11:30:00Z"), "2027-01-18 11:30");
        assert_eq!(short_time("soon"), "soon");
    }
}
