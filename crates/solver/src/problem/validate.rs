//! Every rule of `docs/problem-v1.md` that serde's types do not already enforce, checked
//! once, and the checked problem in a form the solver can index: pools and offers by position,
//! allowed starts expanded, per-scenario limits resolved.

use std::collections::{HashMap, HashSet};

use chrono::{DateTime, Timelike, Utc};

use crate::diagnostic::{InputError, did_you_mean};
use crate::limits::MAX_POOL_GPUS;
use crate::timespec::PERIOD_MINUTES;

use super::errors::{error, v2_only, v3_only};
use super::gangs::{self, GangDemand, Gangs};
use super::{
    OfferKind, PROBLEM_SCHEMA, PROBLEM_SCHEMA_V2, PROBLEM_SCHEMA_V3, Problem, Segment, Starts,
};

/// The largest horizon: 12 years of hours. Beyond it the hourly tables (demand, charts, the
/// solver's timeline) grow past what a plan a person reviews can mean; it is also the config's
/// bound on `planning.horizon`.
pub const MAX_HOURS: u32 = 105_120;

/// How far the scenario probabilities may sum from 1.
const PROBABILITY_TOLERANCE: f64 = 1e-9;

/// A problem that passed [`validate`], with what the solver needs resolved. The only way to
/// build one is `validate`, so holding one means every rule of the spec holds.
#[derive(Debug, Clone)]
pub struct Validated {
    problem: Problem,
    start: DateTime<Utc>,
    offer_pools: Vec<usize>,
    starts: Vec<Vec<u32>>,
    limits: Vec<Vec<Option<u32>>>,
    demand: Vec<Vec<PoolSegments>>,
    shared: Vec<Shared>,
    gangs: Gangs,
}

/// A v2 shared limit with its offers resolved: `Σ weight × instances in use ≤ cap`.
#[derive(Debug, Clone, PartialEq)]
pub struct Shared {
    pub cap: u64,
    /// `(offer index, weight)`, by offer index.
    pub offers: Vec<(usize, u32)>,
}

/// The demand segments of one pool in one scenario (empty when absent).
#[derive(Debug, Clone, Default)]
pub struct PoolSegments {
    pub firm: Vec<Segment>,
    pub flex: Vec<Segment>,
}

impl Validated {
    pub fn problem(&self) -> &Problem {
        &self.problem
    }

    pub fn into_problem(self) -> Problem {
        self.problem
    }

    /// Hour 0 of the horizon.
    pub fn start(&self) -> DateTime<Utc> {
        self.start
    }

    /// The horizon length H, in periods (hours unless the problem's `period_minutes` says
    /// otherwise).
    pub fn hours(&self) -> u32 {
        self.problem.hours
    }

    /// Hours per period (1 unless the problem's `period_minutes` says otherwise).
    pub fn period_hours(&self) -> f64 {
        self.problem.period_hours()
    }

    /// The start of period `period` (saturating at chrono's last time).
    pub fn time_of(&self, period: u32) -> DateTime<Utc> {
        let minutes = i64::from(period) * i64::from(self.problem.period_minutes());
        self.start
            .checked_add_signed(chrono::Duration::minutes(minutes))
            .unwrap_or(DateTime::<Utc>::MAX_UTC)
    }

    /// Index into `problem().pools` of offer `o`'s pool.
    pub fn pool_of(&self, offer: usize) -> usize {
        self.offer_pools[offer]
    }

    /// The allowed start hours of term offer `o`, ascending, inside the horizon (empty for other
    /// kinds).
    pub fn starts(&self, offer: usize) -> &[u32] {
        &self.starts[offer]
    }

    /// The limit on instances of offer `o` in use in any one hour of scenario `k`: the scenario's
    /// override, else the offer's `max_instances`. `None` is no limit.
    pub fn limit(&self, scenario: usize, offer: usize) -> Option<u32> {
        self.limits[scenario][offer]
    }

    /// The shared limits (v2), offers resolved; empty for v1.
    pub fn shared_limits(&self) -> &[Shared] {
        &self.shared
    }

    /// Whether offer `o` is in some shared limit.
    pub fn is_shared(&self, offer: usize) -> bool {
        self.shared
            .iter()
            .any(|l| l.offers.iter().any(|&(o, _)| o == offer))
    }

    /// The fewest and most instances of one piece of a purchase of term offer `o`, and the cost
    /// of each piece: `(1, None, 0.0)` when the offer has no purchase rules.
    pub fn piece_rules(&self, offer: usize) -> (u32, Option<u32>, f64) {
        let o = &self.problem.offers[offer];
        (
            o.min_purchase_instances.unwrap_or(1).max(1),
            o.max_purchase_instances,
            o.cost_per_purchase.unwrap_or(0.0),
        )
    }

    /// Demand of pool `p` in scenario `k`.
    pub fn demand(&self, scenario: usize, pool: usize) -> &PoolSegments {
        &self.demand[scenario][pool]
    }

    /// v3's placements and gangs (empty before v3).
    pub fn gangs(&self) -> &Gangs {
        &self.gangs
    }

    /// The gangs of pool `p` in scenario `k`.
    pub fn gang_demand(&self, scenario: usize, pool: usize) -> &[GangDemand] {
        &self.gangs.demand[scenario][pool]
    }

    /// The GPUs of pool `p`'s gangs in scenario `k`, one segment per gang: its nodes times its
    /// placements' node size. They are firm demand besides `demand(k, p).firm`.
    pub fn gang_gpus(&self, scenario: usize, pool: usize) -> Vec<Segment> {
        self.gang_demand(scenario, pool)
            .iter()
            .map(|d| {
                let node = self.gangs.gangs[d.gang]
                    .placements
                    .first()
                    .map_or(1, |&q| self.gangs.placements[q].gpus_per_node);
                Segment(d.from, d.to, d.nodes.saturating_mul(node))
            })
            .collect()
    }

    /// Cost of one instance of a term offer: every period of the term plus the upfront fee.
    pub fn term_cost_per_instance(&self, offer: usize) -> f64 {
        let o = &self.problem.offers[offer];
        o.price_per_instance_hour * f64::from(o.term_hours.unwrap_or(0)) * self.period_hours()
            + o.upfront_per_instance.unwrap_or(0.0)
    }

    /// Cost of one instance of an on-demand or spot offer for one period (an hour unless the
    /// problem's `period_minutes` says otherwise), spot overhead included.
    pub fn hourly_cost(&self, offer: usize) -> f64 {
        let o = &self.problem.offers[offer];
        o.price_per_instance_hour * (1.0 + o.overhead.unwrap_or(0.0)) * self.period_hours()
    }
}

/// Checks every rule of the spec. Errors name the field path, e.g.
/// `offers[3].starts: start 2200 is outside the horizon [0, 2184)`.
pub fn validate(problem: Problem) -> Result<Validated, InputError> {
    let start = check_header(&problem)?;
    let pool_index = check_pools(&problem.pools)?;
    let offer_index = index_offers(&problem)?;
    let shared = check_shared_limits(&problem, &offer_index)?;
    let mut offer_pools = Vec::with_capacity(problem.offers.len());
    let mut starts = Vec::with_capacity(problem.offers.len());
    for i in 0..problem.offers.len() {
        let (pool, offer_starts) = check_offer(&problem, i, &pool_index)?;
        offer_pools.push(pool);
        starts.push(offer_starts);
    }
    check_probabilities(&problem)?;
    let mut limits = Vec::with_capacity(problem.scenarios.len());
    let mut demand = Vec::with_capacity(problem.scenarios.len());
    for k in 0..problem.scenarios.len() {
        limits.push(scenario_limits(&problem, k, &offer_index)?);
        demand.push(scenario_demand(&problem, k, &pool_index)?);
    }
    let gangs = gangs::check(&problem, &offer_pools)?;
    if let Some(budget) = problem.budget
        && !(budget.is_finite() && budget >= 0.0)
    {
        return Err(error(
            "budget",
            format!("must be a finite amount >= 0, found {budget}"),
        ));
    }
    Ok(Validated {
        problem,
        start,
        offer_pools,
        starts,
        limits,
        demand,
        shared,
        gangs,
    })
}

fn check_header(problem: &Problem) -> Result<DateTime<Utc>, InputError> {
    if ![PROBLEM_SCHEMA, PROBLEM_SCHEMA_V2, PROBLEM_SCHEMA_V3].contains(&problem.schema.as_str()) {
        return Err(error(
            "schema",
            format!(
                "expected `{PROBLEM_SCHEMA}`, `{PROBLEM_SCHEMA_V2}` or `{PROBLEM_SCHEMA_V3}`, found `{}`",
                problem.schema
            ),
        ));
    }
    let start = DateTime::parse_from_rfc3339(&problem.start).map_err(|e| {
        error(
            "start",
            format!("`{}` is not an RFC 3339 timestamp ({e})", problem.start),
        )
        .with_hint("write it like `2027-01-04T00:00:00Z`")
    })?;
    if start.offset().local_minus_utc() != 0 {
        return Err(error(
            "start",
            format!("`{}` must be in UTC (end in `Z`)", problem.start),
        ));
    }
    if start.minute() != 0 || start.second() != 0 || start.nanosecond() != 0 {
        return Err(error(
            "start",
            format!("`{}` is not on a whole hour", problem.start),
        ));
    }
    if let Some(minutes) = problem.period_minutes {
        if !problem.is_v3() {
            return Err(v3_only("period_minutes".into()));
        }
        if !PERIOD_MINUTES.contains(&minutes) {
            return Err(error(
                "period_minutes",
                format!("must be 60, 30 or 15 (minutes per period), found {minutes}"),
            ));
        }
    }
    if !(1..=MAX_HOURS).contains(&problem.hours) {
        return Err(error(
            "hours",
            format!(
                "must be between 1 and {MAX_HOURS} (12 years), found {}",
                problem.hours
            ),
        ));
    }
    Ok(start.with_timezone(&Utc))
}

fn check_pools(pools: &[String]) -> Result<HashMap<&str, usize>, InputError> {
    let mut index = HashMap::new();
    for (i, pool) in pools.iter().enumerate() {
        if pool.is_empty() {
            return Err(error(format!("pools[{i}]"), "pool ids cannot be empty"));
        }
        if index.insert(pool.as_str(), i).is_some() {
            return Err(error(
                format!("pools[{i}]"),
                format!("duplicate pool id `{pool}`"),
            ));
        }
    }
    Ok(index)
}

fn index_offers(problem: &Problem) -> Result<HashMap<&str, usize>, InputError> {
    let mut index = HashMap::new();
    for (i, offer) in problem.offers.iter().enumerate() {
        if offer.id.is_empty() {
            return Err(error(
                format!("offers[{i}].id"),
                "offer ids cannot be empty",
            ));
        }
        if let Some(first) = index.insert(offer.id.as_str(), i) {
            return Err(error(
                format!("offers[{i}].id"),
                format!("duplicate offer id `{}` (also offers[{first}])", offer.id),
            ));
        }
    }
    Ok(index)
}

/// A price-like number: finite and >= 0.
fn check_amount(field: String, what: &str, value: f64) -> Result<(), InputError> {
    if value.is_finite() && value >= 0.0 {
        Ok(())
    } else {
        Err(error(
            field,
            format!("{what} must be a finite number >= 0, found {value}"),
        ))
    }
}

fn unknown_pool(field: String, pool: &str, pools: &HashMap<&str, usize>) -> InputError {
    let err = error(field, format!("unknown pool `{pool}`"));
    match did_you_mean(pool, pools.keys().copied()) {
        Some(near) => err.with_hint(format!(
            "did you mean `{near}`? Pools are listed in `pools`"
        )),
        None => err.with_hint("every pool must be listed in `pools`"),
    }
}

/// Checks offer `i`; returns its pool index and allowed starts.
fn check_offer(
    problem: &Problem,
    i: usize,
    pools: &HashMap<&str, usize>,
) -> Result<(usize, Vec<u32>), InputError> {
    let offer = &problem.offers[i];
    let at = |field: &str| format!("offers[{i}].{field}");
    let pool = *pools
        .get(offer.pool.as_str())
        .ok_or_else(|| unknown_pool(at("pool"), &offer.pool, pools))?;
    if offer.gpus_per_instance == 0 {
        return Err(error(
            at("gpus_per_instance"),
            "must be a positive whole number, found 0",
        ));
    }
    check_amount(
        at("price_per_instance_hour"),
        "the price",
        offer.price_per_instance_hour,
    )?;
    let kind = offer.kind;
    let only = |field: &str, present: bool, allowed: OfferKind| {
        if present && kind != allowed {
            Err(error(
                at(field),
                format!("only `{}` offers have `{field}`", kind_name(allowed)),
            ))
        } else {
            Ok(())
        }
    };
    only("overhead", offer.overhead.is_some(), OfferKind::Spot)?;
    only(
        "upfront_per_instance",
        offer.upfront_per_instance.is_some(),
        OfferKind::Term,
    )?;
    only("term_hours", offer.term_hours.is_some(), OfferKind::Term)?;
    only("starts", offer.starts.is_some(), OfferKind::Term)?;
    if let Some(overhead) = offer.overhead {
        check_amount(at("overhead"), "the overhead", overhead)?;
    }
    if let Some(upfront) = offer.upfront_per_instance {
        check_amount(at("upfront_per_instance"), "the upfront fee", upfront)?;
    }
    check_purchase_rules(problem, i)?;
    if kind != OfferKind::Term {
        return Ok((pool, Vec::new()));
    }
    match offer.term_hours {
        None => return Err(error(at("term_hours"), "a `term` offer needs `term_hours`")),
        Some(0) => {
            return Err(error(
                at("term_hours"),
                "must be a positive whole number, found 0",
            ));
        }
        Some(_) => {}
    }
    let starts = offer
        .starts
        .as_ref()
        .ok_or_else(|| error(at("starts"), "a `term` offer needs `starts`"))?;
    match starts {
        Starts::List(list) => {
            if let Some(&s) = list.iter().find(|&&s| s >= problem.hours) {
                return Err(error(
                    at("starts"),
                    format!("start {s} is outside the horizon [0, {})", problem.hours),
                ));
            }
        }
        Starts::Range(range) if range.step == 0 => {
            return Err(error(
                at("starts.step"),
                "must be a positive whole number, found 0",
            ));
        }
        // A range may run past the horizon (its starts are cut there), but not start past it
        // or be empty: an offer that can never be bought is a broken file, not an option.
        Starts::Range(range) if range.from >= problem.hours => {
            return Err(error(
                at("starts.from"),
                format!(
                    "start {} is outside the horizon [0, {})",
                    range.from, problem.hours
                ),
            ));
        }
        Starts::Range(range) if range.to <= range.from => {
            return Err(error(
                at("starts.to"),
                format!(
                    "`to` {} must be after `from` {}: the range holds no start",
                    range.to, range.from
                ),
            ));
        }
        Starts::Range(_) => {}
    }
    Ok((pool, starts.hours(problem.hours)))
}

/// The v2 fields of term offer `i`: only in v2, only on term offers, `1 <= min <= max`, a
/// finite cost >= 0.
fn check_purchase_rules(problem: &Problem, i: usize) -> Result<(), InputError> {
    let offer = &problem.offers[i];
    let at = |field: &str| format!("offers[{i}].{field}");
    let present = [
        (
            "min_purchase_instances",
            offer.min_purchase_instances.is_some(),
        ),
        (
            "max_purchase_instances",
            offer.max_purchase_instances.is_some(),
        ),
        ("cost_per_purchase", offer.cost_per_purchase.is_some()),
    ];
    let Some((first, _)) = present.iter().find(|(_, p)| *p) else {
        return Ok(());
    };
    if !problem.is_v2() {
        return Err(v2_only(at(first)));
    }
    if offer.kind != OfferKind::Term {
        return Err(error(
            at(first),
            format!("only `term` offers have `{first}`"),
        ));
    }
    for (field, value) in [
        ("min_purchase_instances", offer.min_purchase_instances),
        ("max_purchase_instances", offer.max_purchase_instances),
    ] {
        if value == Some(0) {
            return Err(error(at(field), "must be a positive whole number, found 0"));
        }
    }
    if let (Some(min), Some(max)) = (offer.min_purchase_instances, offer.max_purchase_instances)
        && min > max
    {
        return Err(error(
            at("min_purchase_instances"),
            format!("{min} is more than `max_purchase_instances` ({max})"),
        ));
    }
    if let Some(cost) = offer.cost_per_purchase {
        check_amount(at("cost_per_purchase"), "the cost per purchase", cost)?;
    }
    Ok(())
}

/// The v2 shared limits: only in v2; ids distinct and non-empty; offers known, listed with a
/// weight >= 1.
fn check_shared_limits(
    problem: &Problem,
    offers: &HashMap<&str, usize>,
) -> Result<Vec<Shared>, InputError> {
    if problem.shared_limits.is_empty() {
        return Ok(Vec::new());
    }
    if !problem.is_v2() {
        return Err(v2_only("shared_limits".to_string()));
    }
    let mut ids = HashSet::new();
    let mut out = Vec::with_capacity(problem.shared_limits.len());
    for (l, limit) in problem.shared_limits.iter().enumerate() {
        let at = |field: &str| format!("shared_limits[{l}].{field}");
        if limit.id.is_empty() {
            return Err(error(at("id"), "shared limit ids cannot be empty"));
        }
        if !ids.insert(limit.id.as_str()) {
            return Err(error(
                at("id"),
                format!("duplicate shared limit id `{}`", limit.id),
            ));
        }
        if limit.offers.is_empty() {
            return Err(error(
                at("offers"),
                "a shared limit needs at least one offer",
            ));
        }
        let mut resolved = Vec::with_capacity(limit.offers.len());
        for (id, &weight) in &limit.offers {
            let field = at(&format!("offers.{id}"));
            let Some(&o) = offers.get(id.as_str()) else {
                let err = error(field, format!("unknown offer `{id}`"));
                return Err(match did_you_mean(id, offers.keys().copied()) {
                    Some(near) => err.with_hint(format!("did you mean `{near}`?")),
                    None => err,
                });
            };
            if weight == 0 {
                return Err(error(
                    field,
                    "the weight must be a positive whole number, found 0",
                ));
            }
            resolved.push((o, weight));
        }
        resolved.sort_unstable();
        out.push(Shared {
            cap: limit.cap,
            offers: resolved,
        });
    }
    Ok(out)
}

fn kind_name(kind: OfferKind) -> &'static str {
    match kind {
        OfferKind::OnDemand => "on_demand",
        OfferKind::Spot => "spot",
        OfferKind::Term => "term",
    }
}

fn check_probabilities(problem: &Problem) -> Result<(), InputError> {
    if problem.scenarios.is_empty() {
        return Err(error("scenarios", "at least one scenario is needed"));
    }
    let mut names = HashSet::new();
    for (k, scenario) in problem.scenarios.iter().enumerate() {
        if scenario.name.is_empty() {
            return Err(error(
                format!("scenarios[{k}].name"),
                "scenario names cannot be empty",
            ));
        }
        if !names.insert(scenario.name.as_str()) {
            return Err(error(
                format!("scenarios[{k}].name"),
                format!("duplicate scenario name `{}`", scenario.name),
            ));
        }
        let p = scenario.probability;
        if !(p.is_finite() && p > 0.0 && p <= 1.0) {
            return Err(error(
                format!("scenarios[{k}].probability"),
                format!("must be a number in (0, 1], found {p}"),
            ));
        }
    }
    let total: f64 = problem.scenarios.iter().map(|s| s.probability).sum();
    if (total - 1.0).abs() > PROBABILITY_TOLERANCE {
        return Err(error(
            "scenarios",
            format!(
                "the probabilities sum to {}, not 1",
                (total * 1e9).round() / 1e9
            ),
        ));
    }
    Ok(())
}

/// Resolves the limit of every offer in scenario `k`, checking the overrides.
fn scenario_limits(
    problem: &Problem,
    k: usize,
    offers: &HashMap<&str, usize>,
) -> Result<Vec<Option<u32>>, InputError> {
    let mut limits: Vec<Option<u32>> = problem.offers.iter().map(|o| o.max_instances).collect();
    for (id, &limit) in &problem.scenarios[k].max_instances {
        let field = format!("scenarios[{k}].max_instances.{id}");
        let Some(&o) = offers.get(id.as_str()) else {
            let err = error(field, format!("unknown offer `{id}`"));
            return Err(match did_you_mean(id, offers.keys().copied()) {
                Some(near) => err.with_hint(format!("did you mean `{near}`?")),
                None => err,
            });
        };
        if problem.offers[o].kind == OfferKind::Term {
            return Err(error(
                field,
                format!(
                    "`{id}` is a `term` offer; only on_demand and spot limits can vary by scenario"
                ),
            ));
        }
        limits[o] = Some(limit);
    }
    Ok(limits)
}

fn scenario_demand(
    problem: &Problem,
    k: usize,
    pools: &HashMap<&str, usize>,
) -> Result<Vec<PoolSegments>, InputError> {
    let mut demand = vec![PoolSegments::default(); problem.pools.len()];
    for (pool, d) in &problem.scenarios[k].demand {
        let at = format!("scenarios[{k}].demand.{pool}");
        let &p = pools
            .get(pool.as_str())
            .ok_or_else(|| unknown_pool(at.clone(), pool, pools))?;
        for (list, segments) in [("firm", &d.firm), ("flex", &d.flex)] {
            for (j, s) in segments.iter().enumerate() {
                if u64::from(s.value()) > MAX_POOL_GPUS {
                    return Err(error(
                        format!("{at}.{list}[{j}]"),
                        format!(
                            "{} GPUs at once is more than the {MAX_POOL_GPUS} gpucap plans for in one pool",
                            s.value()
                        ),
                    ));
                }
                if !(s.from() < s.to() && s.to() <= problem.hours) {
                    return Err(error(
                        format!("{at}.{list}[{j}]"),
                        format!(
                            "segment [{}, {}, {}] must have 0 <= from < to <= {} (the horizon)",
                            s.0, s.1, s.2, problem.hours
                        ),
                    ));
                }
            }
        }
        demand[p] = PoolSegments {
            firm: d.firm.clone(),
            flex: d.flex.clone(),
        };
    }
    Ok(demand)
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::problem::parse;

    fn problem(schema: &str, offer_extra: &str, extra: &str) -> Result<Validated, InputError> {
        let text = format!(
            r#"{{"schema": "{schema}", "start": "2027-01-04T00:00:00Z", "hours": 48,
            "pools": ["a", "b"],
            "offers": [
              {{"id": "a-od", "pool": "a", "kind": "on_demand", "gpus_per_instance": 8,
                "price_per_instance_hour": 10.0}},
              {{"id": "b-block", "pool": "b", "kind": "term", "gpus_per_instance": 8,
                "price_per_instance_hour": 0.0, "term_hours": 24, "starts": [0, 24]{offer_extra}}}],
            "scenarios": [{{"name": "s", "probability": 1.0}}]{extra}}}"#
        );
        validate(parse(&text, Path::new("p.json")).expect("parses"))
    }

    const V2: &str = "gpucap.problem/v2";
    const LIMIT: &str = r#", "shared_limits": [{"id": "quota", "unit": "vCPUs", "cap": 384,
        "offers": {"a-od": 192, "b-block": 192}, "reason": "L-1216C47A"}]"#;

    #[test]
    fn v2_resolves_shared_limits_and_piece_rules() {
        let v = problem(
            V2,
            r#", "min_purchase_instances": 2, "max_purchase_instances": 64, "cost_per_purchase": 250.0"#,
            LIMIT,
        )
        .expect("valid");
        assert_eq!(
            v.shared_limits(),
            &[Shared {
                cap: 384,
                offers: vec![(0, 192), (1, 192)]
            }]
        );
        assert_eq!(v.piece_rules(1), (2, Some(64), 250.0));
        assert_eq!(v.piece_rules(0), (1, None, 0.0));
    }

    #[test]
    fn v1_refuses_v2_fields() {
        let err = problem(PROBLEM_SCHEMA, "", LIMIT).unwrap_err();
        assert_eq!(err.location.field.as_deref(), Some("shared_limits"));
        let err = problem(PROBLEM_SCHEMA, r#", "cost_per_purchase": 250.0"#, "").unwrap_err();
        assert_eq!(
            err.location.field.as_deref(),
            Some("offers[1].cost_per_purchase")
        );
        assert!(err.message.contains("gpucap.problem/v2"), "{err}");
    }

    #[test]
    fn v2_errors_name_the_field() {
        let cases = [
            (
                r#", "min_purchase_instances": 9, "max_purchase_instances": 8"#,
                "",
                "offers[1].min_purchase_instances",
            ),
            (
                r#", "max_purchase_instances": 0"#,
                "",
                "offers[1].max_purchase_instances",
            ),
            (
                r#", "cost_per_purchase": -1.0"#,
                "",
                "offers[1].cost_per_purchase",
            ),
            (
                "",
                r#", "shared_limits": [{"id": "q", "unit": "GPUs", "cap": 8, "offers": {"a-odd": 8}}]"#,
                "shared_limits[0].offers.a-odd",
            ),
            (
                "",
                r#", "shared_limits": [{"id": "q", "unit": "GPUs", "cap": 8, "offers": {"a-od": 0}}]"#,
                "shared_limits[0].offers.a-od",
            ),
            (
                "",
                r#", "shared_limits": [{"id": "q", "unit": "GPUs", "cap": 8, "offers": {}}]"#,
                "shared_limits[0].offers",
            ),
        ];
        for (offer, extra, field) in cases {
            let err = problem(V2, offer, extra).unwrap_err();
            assert_eq!(err.location.field.as_deref(), Some(field), "{err}");
        }
    }

    #[test]
    fn purchase_rules_only_on_term_offers() {
        let text = r#"{"schema": "gpucap.problem/v2", "start": "2027-01-04T00:00:00Z", "hours": 4,
            "pools": ["a"], "offers": [{"id": "od", "pool": "a", "kind": "on_demand",
            "gpus_per_instance": 8, "price_per_instance_hour": 1.0, "cost_per_purchase": 5.0}],
            "scenarios": [{"name": "s", "probability": 1.0}]}"#;
        let err = validate(parse(text, Path::new("p.json")).expect("parses")).unwrap_err();
        assert_eq!(
            err.location.field.as_deref(),
            Some("offers[0].cost_per_purchase")
        );
    }
}
