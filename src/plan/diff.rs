//! What changed between two plans (`gpucap plan --compare-to PREVIOUS.json`): the nightly loop
//! re-plans every night and a pull-request comment shows what moved since the last applied plan,
//! the way Infracost shows a cost diff.
//!
//! Actions are matched by their stable ids (made from what an action buys, so the same purchase
//! planned on another night keeps its id): an id in both plans whose fields differ is a change,
//! naming each field, old → new. A removed and an added action that buy the same thing in the
//! same place (kind, pool, cloud, zone or region, instance type) over overlapping windows are
//! the same purchase resized or moved, and are shown as one change rather than a removal and an
//! addition. Beside the actions: the change in expected cost and in irreversible spend, and why
//! the plan moved — which inputs' digests differ, how the prices and their sources moved, and
//! whether the plans were made at different times or against another apply state.
//!
//! Pure and deterministic: the same two plans give the same diff, whatever their content.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};

use chrono::{DateTime, Utc};
use serde::Serialize;
use serde_json::Value;

use super::fingerprint::{InputChange, input_changes};
use super::{Action, ActionKind, Plan, PlanHorizon, Quote};
use crate::state::StateRef;

/// Money differences below half a cent are rounding, not change.
const CENT: f64 = 0.005;

/// The action fields compared, in the order changes are listed. Fields of [`Action`] not named
/// here or in [`NOT_COMPARED`] are compared after these, by name.
pub const COMPARED: [&str; 17] = [
    "kind",
    "pool",
    "cloud",
    "region",
    "zone",
    "instance_type",
    "instances",
    "gpus",
    "start",
    "end",
    "due",
    "bookable_from",
    "cost",
    "irreversible",
    "offer",
    "offering_id",
    "campaigns",
];

/// Fields that say nothing about what is bought: the id (what matching is by) and the hours
/// from the horizon start, which move every night with the horizon.
pub const NOT_COMPARED: [&str; 3] = ["id", "start_hour", "end_hour"];

/// What changed from one plan to the next.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PlanDiff {
    /// The plan compared with.
    pub previous: PlanStamp,
    /// Actions only in the current plan, in its order.
    pub added: Vec<Action>,
    /// Actions only in the previous plan, in its order (not those bought since).
    pub removed: Vec<Action>,
    /// Actions of the previous plan that gpucap's state shows were carried out since: not
    /// planned again because the plan now counts what they bought as owned capacity.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub bought: Vec<Action>,
    /// Actions in both (by id, or paired as the same purchase resized or moved) that differ, in
    /// the current plan's order.
    pub changed: Vec<ActionChange>,
    /// Actions in both plans, the same in every compared field.
    pub unchanged: usize,
    pub totals: Totals,
    pub why: Why,
}

/// Which plan a diff is against.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PlanStamp {
    /// The plan file, where the caller knows it (see [`PlanDiff::against_file`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
    pub created_at: String,
    pub fingerprint: String,
}

/// How a changed action was matched with its previous self.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum MatchedBy {
    /// The same id in both plans: the same purchase, something else about it moved (its price,
    /// the campaigns it serves, when to act).
    Id,
    /// Different ids, the same kind of capacity in the same place over overlapping windows:
    /// the same purchase resized or moved.
    Purchase,
}

/// One action in both plans that differs.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ActionChange {
    /// The id in the current plan.
    pub id: String,
    /// The id in the previous plan (another one when [`MatchedBy::Purchase`]).
    pub previous_id: String,
    pub matched_by: MatchedBy,
    /// The fields that differ, in [`COMPARED`] order.
    pub fields: Vec<FieldChange>,
    pub cost: Delta,
    pub before: Action,
    pub after: Action,
}

impl ActionChange {
    /// The change to `field`, if it changed.
    pub fn field(&self, field: &str) -> Option<&FieldChange> {
        self.fields.iter().find(|f| f.field == field)
    }
}

/// One field of an action, old → new, as the plan's JSON has them.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FieldChange {
    pub field: String,
    pub old: Value,
    pub new: Value,
}

/// A figure in both plans.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Delta {
    pub old: f64,
    pub new: f64,
    /// `new - old`.
    pub delta: f64,
    /// `delta / old`; `None` when `old` is zero (or either is not a number).
    pub fraction: Option<f64>,
}

impl Delta {
    pub fn of(old: f64, new: f64) -> Delta {
        let delta = new - old;
        let fraction = delta / old;
        Delta {
            old,
            new,
            delta,
            fraction: (old != 0.0 && fraction.is_finite()).then_some(fraction),
        }
    }

    /// Whether the figure moved by at least half a cent (a figure that is not a number moved
    /// only if the other is a number).
    pub fn moved(&self) -> bool {
        if self.old.is_finite() && self.new.is_finite() {
            self.delta.abs() >= CENT
        } else {
            self.old.is_finite() != self.new.is_finite()
        }
    }
}

/// The plan's cost figures, old and new.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Totals {
    /// `cost.expected_total`: term purchases plus expected on-demand and spot.
    pub expected: Delta,
    /// `cost.irreversible`: capacity blocks and commitments, spent once bought.
    pub irreversible: Delta,
}

/// A value in both plans that differs.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Moved<T> {
    pub old: T,
    pub new: T,
}

/// Why the plan moved.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Why {
    /// Inputs (from the two fingerprints) whose digest changed, that are new, or that are gone:
    /// config, calendars, forecasts, policies, state files, capacity already owned, the price
    /// quotes, the offers of the problem, the gpucap version.
    pub inputs: Vec<InputChange>,
    /// How the prices moved, when they did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prices: Option<PriceMoves>,
    /// When each plan was made (its `now`: booking windows, quote ages, what is due), when that
    /// differs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub created_at: Option<Moved<String>>,
    /// The planning horizons, when they differ.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub horizon: Option<Moved<PlanHorizon>>,
    /// The apply state each plan was made against, when they differ.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub apply_state: Option<Moved<Option<StateRef>>>,
}

impl Why {
    /// Nothing moved that the plans record.
    pub fn is_empty(&self) -> bool {
        self.inputs.is_empty()
            && self.prices.is_none()
            && self.created_at.is_none()
            && self.horizon.is_none()
            && self.apply_state.is_none()
    }
}

/// How the quotes behind the two plans differ.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct PriceMoves {
    /// Quotes per source (`live`, `cache`, `snapshot`, `import`, `state`), when the sources
    /// used differ (e.g. the snapshot then, live prices now).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sources: Option<Moved<BTreeMap<String, usize>>>,
    /// The earliest and latest quote times, when they differ.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fetched: Option<Moved<Option<TimeRange>>>,
    /// Offers quoted in both plans at another price, by offer id.
    pub repriced: Vec<Repriced>,
    /// Offers quoted only in the current plan (it uses them, the previous did not).
    pub newly_quoted: Vec<String>,
    /// Offers quoted only in the previous plan.
    pub no_longer_quoted: Vec<String>,
}

impl PriceMoves {
    fn is_empty(&self) -> bool {
        self.sources.is_none()
            && self.fetched.is_none()
            && self.repriced.is_empty()
            && self.newly_quoted.is_empty()
            && self.no_longer_quoted.is_empty()
    }
}

/// The first and last of some times (RFC 3339).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TimeRange {
    pub earliest: String,
    pub latest: String,
}

/// One offer's quote in both plans, at another price.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Repriced {
    pub offer: String,
    pub old: QuotedPrice,
    pub new: QuotedPrice,
}

/// A price as quoted, and where and when from.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct QuotedPrice {
    pub price_per_instance_hour: f64,
    pub upfront_per_instance: f64,
    pub source: String,
    pub fetched_at: String,
}

impl QuotedPrice {
    fn of(q: &Quote) -> Self {
        QuotedPrice {
            price_per_instance_hour: q.price_per_instance_hour,
            upfront_per_instance: q.upfront_per_instance,
            source: q.source.clone(),
            fetched_at: q.fetched_at.clone(),
        }
    }
}

impl PlanDiff {
    /// No action added, removed or changed, and the totals are the same: the current plan
    /// would do what the previous one did. (Inputs may still have moved; see [`PlanDiff::why`].)
    pub fn is_empty(&self) -> bool {
        self.added.is_empty()
            && self.removed.is_empty()
            && self.changed.is_empty()
            && !self.totals.expected.moved()
            && !self.totals.irreversible.moved()
    }

    /// The same diff, with the removed actions whose purchases the state holds (`actions`: the
    /// state's action ids, a split block's parts as `<action>#n`) moved to [`PlanDiff::bought`].
    pub fn bought_since(mut self, actions: &BTreeSet<String>) -> Self {
        let held = |id: &str| {
            actions
                .iter()
                .any(|a| a == id || a.split_once('#').is_some_and(|(base, _)| base == id))
        };
        let (bought, removed) = std::mem::take(&mut self.removed)
            .into_iter()
            .partition(|a| held(&a.id));
        self.bought = bought;
        self.removed = removed;
        self
    }

    /// The same diff, naming the previous plan's file.
    pub fn against_file(mut self, file: impl Into<String>) -> Self {
        self.previous.file = Some(file.into());
        self
    }
}

/// What changed from `previous` to `current`.
pub fn diff(previous: &Plan, current: &Plan) -> PlanDiff {
    let (by_id, removed, added) = match_by_id(&previous.actions, &current.actions);
    let paired = pair_purchases(&previous.actions, &current.actions, &removed, &added);
    let (paired_old, paired_new): (BTreeSet<usize>, BTreeSet<usize>) =
        paired.iter().copied().unzip();

    let mut changed: Vec<(usize, ActionChange)> = Vec::new();
    let mut unchanged = 0;
    let matches = by_id
        .iter()
        .map(|&pair| (pair, MatchedBy::Id))
        .chain(paired.iter().map(|&pair| (pair, MatchedBy::Purchase)));
    for ((i, j), matched_by) in matches {
        let (before, after) = (&previous.actions[i], &current.actions[j]);
        let fields = field_changes(previous, before, current, after);
        if fields.is_empty() {
            unchanged += 1;
            continue;
        }
        changed.push((
            j,
            ActionChange {
                id: after.id.clone(),
                previous_id: before.id.clone(),
                matched_by,
                fields,
                cost: Delta::of(before.cost, after.cost),
                before: before.clone(),
                after: after.clone(),
            },
        ));
    }
    changed.sort_by_key(|(j, _)| *j);

    PlanDiff {
        previous: PlanStamp {
            file: None,
            created_at: previous.created_at.clone(),
            fingerprint: previous.fingerprint.digest.clone(),
        },
        added: added
            .iter()
            .filter(|j| !paired_new.contains(j))
            .map(|&j| current.actions[j].clone())
            .collect(),
        removed: removed
            .iter()
            .filter(|i| !paired_old.contains(i))
            .map(|&i| previous.actions[i].clone())
            .collect(),
        bought: Vec::new(),
        changed: changed.into_iter().map(|(_, c)| c).collect(),
        unchanged,
        totals: Totals {
            expected: Delta::of(previous.cost.expected_total, current.cost.expected_total),
            irreversible: Delta::of(previous.cost.irreversible, current.cost.irreversible),
        },
        why: why(previous, current),
    }
}

/// Pairs of (previous, current) indices with the same id, and the indices of the previous
/// plan's and the current plan's actions without one, each ascending. Ids are unique in a plan
/// `gpucap plan` wrote; should one repeat, its n-th use in one plan matches its n-th in the other.
fn match_by_id(
    previous: &[Action],
    current: &[Action],
) -> (Vec<(usize, usize)>, Vec<usize>, Vec<usize>) {
    let mut by_id: HashMap<&str, VecDeque<usize>> = HashMap::new();
    for (j, a) in current.iter().enumerate() {
        by_id.entry(a.id.as_str()).or_default().push_back(j);
    }
    let mut matched = Vec::new();
    let mut removed = Vec::new();
    for (i, a) in previous.iter().enumerate() {
        match by_id.get_mut(a.id.as_str()).and_then(VecDeque::pop_front) {
            Some(j) => matched.push((i, j)),
            None => removed.push(i),
        }
    }
    let mut added: Vec<usize> = by_id.into_values().flatten().collect();
    added.sort_unstable();
    (matched, removed, added)
}

/// What an action buys, apart from how many and when: kind, pool, cloud, place (zone, else
/// region) and instance type.
fn purchase_key(a: &Action) -> (ActionKind, (&str, &str, &str, &str)) {
    (a.kind, place_key(a))
}

/// Pool, cloud, place (zone, else region) and instance type.
fn place_key(a: &Action) -> (&str, &str, &str, &str) {
    (
        &a.pool,
        &a.cloud,
        a.zone.as_deref().unwrap_or(&a.region),
        &a.instance_type,
    )
}

fn window(a: &Action) -> Option<(DateTime<Utc>, DateTime<Utc>)> {
    Some((parse_time(&a.start)?, parse_time(&a.end)?))
}

fn parse_time(s: &str) -> Option<DateTime<Utc>> {
    DateTime::parse_from_rfc3339(s)
        .ok()
        .map(|t| t.with_timezone(&Utc))
}

/// Removed and added actions that are the same purchase resized or moved: the same
/// [`purchase_key`] over overlapping windows. Pairs are taken greedily, the most overlapping
/// first (then the closest starts, the closest sizes, then by index), so the result does not
/// depend on anything but the two plans. A release pairs with a release when the reservations
/// they end were paired.
fn pair_purchases(
    previous: &[Action],
    current: &[Action],
    removed: &[usize],
    added: &[usize],
) -> Vec<(usize, usize)> {
    let mut candidates = Vec::new();
    for &i in removed {
        let a = &previous[i];
        let Some((a0, a1)) = window(a).filter(|_| a.kind != ActionKind::Release) else {
            continue;
        };
        for &j in added {
            let b = &current[j];
            if purchase_key(a) != purchase_key(b) {
                continue;
            }
            let Some((b0, b1)) = window(b) else {
                continue;
            };
            let overlap = (a1.min(b1) - a0.max(b0)).num_seconds();
            if overlap <= 0 {
                continue;
            }
            candidates.push((
                Reverse(overlap),
                (b0 - a0).num_seconds().unsigned_abs(),
                a.instances.abs_diff(b.instances),
                i,
                j,
            ));
        }
    }
    candidates.sort_unstable();
    let (mut used_old, mut used_new) = (BTreeSet::new(), BTreeSet::new());
    let mut pairs = Vec::new();
    for (_, _, _, i, j) in candidates {
        if !used_old.contains(&i) && !used_new.contains(&j) {
            used_old.insert(i);
            used_new.insert(j);
            pairs.push((i, j));
        }
    }

    // Releases follow their reservations.
    let ends = |release: &Action, plan: &[Action], candidates: &[usize]| -> Option<usize> {
        candidates.iter().copied().find(|&k| {
            let r = &plan[k];
            r.kind == ActionKind::Reserve
                && place_key(r) == place_key(release)
                && r.instances == release.instances
                && r.end == release.start
        })
    };
    let mut release_pairs = Vec::new();
    for &i in removed {
        let r = &previous[i];
        if r.kind != ActionKind::Release {
            continue;
        }
        let Some(reservation) = ends(r, previous, removed) else {
            continue;
        };
        let Some(&(_, now)) = pairs.iter().find(|(old, _)| *old == reservation) else {
            continue;
        };
        let reservation = &current[now];
        let found = added.iter().copied().find(|&j| {
            let n = &current[j];
            !used_new.contains(&j)
                && n.kind == ActionKind::Release
                && purchase_key(n) == purchase_key(r)
                && n.instances == reservation.instances
                && n.start == reservation.end
        });
        if let Some(j) = found {
            used_new.insert(j);
            release_pairs.push((i, j));
        }
    }
    pairs.extend(release_pairs);
    pairs.sort_unstable();
    pairs
}

/// The compared fields (see [`COMPARED`]) that differ between two actions. Costs within half a
/// cent are the same; `due` is the same when each plan had the action due at its own `now`
/// (both were due already: the date moves with the night, not with the purchase).
fn field_changes(
    previous: &Plan,
    before: &Action,
    current: &Plan,
    after: &Action,
) -> Vec<FieldChange> {
    let (Ok(Value::Object(old)), Ok(Value::Object(new))) =
        (serde_json::to_value(before), serde_json::to_value(after))
    else {
        return Vec::new();
    };
    let mut names: Vec<&str> = COMPARED.to_vec();
    let others: BTreeSet<&str> = old
        .keys()
        .chain(new.keys())
        .map(String::as_str)
        .filter(|k| !COMPARED.contains(k) && !NOT_COMPARED.contains(k))
        .collect();
    names.extend(others);
    let due_now = |a: &Action, plan: &Plan| matches!((parse_time(&a.due), parse_time(&plan.created_at)), (Some(d), Some(c)) if d == c);
    let mut out = Vec::new();
    for name in names {
        let (o, n) = (
            old.get(name).cloned().unwrap_or(Value::Null),
            new.get(name).cloned().unwrap_or(Value::Null),
        );
        let same = match name {
            "cost" => !Delta::of(before.cost, after.cost).moved(),
            "due" => o == n || (due_now(before, previous) && due_now(after, current)),
            _ => o == n,
        };
        if !same {
            out.push(FieldChange {
                field: name.to_string(),
                old: o,
                new: n,
            });
        }
    }
    out
}

fn why(previous: &Plan, current: &Plan) -> Why {
    let created_at = match (
        parse_time(&previous.created_at),
        parse_time(&current.created_at),
    ) {
        (Some(a), Some(b)) => a != b,
        _ => previous.created_at != current.created_at,
    };
    let prices = price_moves(&previous.quotes, &current.quotes);
    Why {
        inputs: input_changes(&previous.fingerprint.inputs, &current.fingerprint.inputs),
        prices: (!prices.is_empty()).then_some(prices),
        created_at: created_at.then(|| Moved {
            old: previous.created_at.clone(),
            new: current.created_at.clone(),
        }),
        horizon: (previous.horizon != current.horizon).then(|| Moved {
            old: previous.horizon.clone(),
            new: current.horizon.clone(),
        }),
        apply_state: (previous.state != current.state).then(|| Moved {
            old: previous.state.clone(),
            new: current.state.clone(),
        }),
    }
}

fn price_moves(previous: &[Quote], current: &[Quote]) -> PriceMoves {
    // One quote per offer in a plan; should an offer repeat, its first quote stands for it.
    let by_offer = |quotes: &[Quote]| -> BTreeMap<String, Quote> {
        let mut map = BTreeMap::new();
        for q in quotes {
            map.entry(q.offer.clone()).or_insert_with(|| q.clone());
        }
        map
    };
    let (old, new) = (by_offer(previous), by_offer(current));
    let sources = |quotes: &[Quote]| -> BTreeMap<String, usize> {
        let mut counts = BTreeMap::new();
        for q in quotes {
            *counts.entry(q.source.clone()).or_insert(0) += 1;
        }
        counts
    };
    let (old_sources, new_sources) = (sources(previous), sources(current));
    let source_set_moved = !old_sources.keys().eq(new_sources.keys());
    let fetched = (fetched_range(previous), fetched_range(current));
    let differs = |a: f64, b: f64| {
        if a.is_finite() && b.is_finite() {
            (a - b).abs() > 1e-9 * a.abs().max(b.abs()).max(1.0)
        } else {
            a.is_finite() != b.is_finite()
        }
    };
    PriceMoves {
        sources: source_set_moved.then_some(Moved {
            old: old_sources,
            new: new_sources,
        }),
        fetched: (fetched.0 != fetched.1).then_some(Moved {
            old: fetched.0,
            new: fetched.1,
        }),
        repriced: old
            .iter()
            .filter_map(|(offer, o)| {
                let n = new.get(offer)?;
                (differs(o.price_per_instance_hour, n.price_per_instance_hour)
                    || differs(o.upfront_per_instance, n.upfront_per_instance))
                .then(|| Repriced {
                    offer: offer.clone(),
                    old: QuotedPrice::of(o),
                    new: QuotedPrice::of(n),
                })
            })
            .collect(),
        newly_quoted: new
            .keys()
            .filter(|k| !old.contains_key(*k))
            .cloned()
            .collect(),
        no_longer_quoted: old
            .keys()
            .filter(|k| !new.contains_key(*k))
            .cloned()
            .collect(),
    }
}

/// The earliest and latest quote times that parse, as the plan wrote them.
fn fetched_range(quotes: &[Quote]) -> Option<TimeRange> {
    let times: Vec<(DateTime<Utc>, &str)> = quotes
        .iter()
        .filter_map(|q| Some((parse_time(&q.fetched_at)?, q.fetched_at.as_str())))
        .collect();
    let earliest = times.iter().min()?;
    let latest = times.iter().max()?;
    Some(TimeRange {
        earliest: earliest.1.to_string(),
        latest: latest.1.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::fingerprint::{Change, FingerprintBuilder};
    use crate::plan::tests::empty_plan;

    fn action(
        id: &str,
        kind: ActionKind,
        instances: u32,
        start: &str,
        end: &str,
        cost: f64,
    ) -> Action {
        Action {
            id: id.into(),
            kind,
            pool: "h100-us".into(),
            cloud: "aws".into(),
            region: "us-east-1".into(),
            zone: None,
            instance_type: "p5.48xlarge".into(),
            instances,
            gpus: instances * 8,
            start: start.into(),
            end: end.into(),
            start_hour: 0,
            end_hour: 0,
            due: start.into(),
            bookable_from: None,
            cost,
            irreversible: kind == ActionKind::PurchaseCapacityBlock,
            offer: "aws/us-east-1/p5.48xlarge/capacity-block".into(),
            offering_id: None,
            campaigns: vec!["pretrain".into()],
            pieces: Vec::new(),
        }
    }

    fn block(id: &str, instances: u32, start: &str, end: &str, cost: f64) -> Action {
        action(
            id,
            ActionKind::PurchaseCapacityBlock,
            instances,
            start,
            end,
            cost,
        )
    }

    fn plan_with(actions: Vec<Action>) -> Plan {
        let mut plan = empty_plan();
        plan.cost.expected_total = actions.iter().map(|a| a.cost).sum();
        plan.cost.irreversible = actions
            .iter()
            .filter(|a| a.irreversible)
            .map(|a| a.cost)
            .sum();
        plan.actions = actions;
        plan
    }

    fn ids(actions: &[Action]) -> Vec<&str> {
        actions.iter().map(|a| a.id.as_str()).collect()
    }

    #[test]
    fn actions_bought_since_are_told_apart_from_removed_ones() {
        let bought = block(
            "b1",
            4,
            "2027-01-05T11:30:00Z",
            "2027-01-12T11:30:00Z",
            1000.0,
        );
        let split = block(
            "b2",
            80,
            "2027-01-05T11:30:00Z",
            "2027-01-12T11:30:00Z",
            9000.0,
        );
        let dropped = block(
            "b3",
            2,
            "2027-01-20T11:30:00Z",
            "2027-01-27T11:30:00Z",
            500.0,
        );
        let previous = plan_with(vec![bought, split, dropped]);
        let current = plan_with(Vec::new());
        let held: BTreeSet<String> = ["b1".to_string(), "b2#1".into(), "b2#2".into()].into();
        let d = diff(&previous, &current).bought_since(&held);
        assert_eq!(ids(&d.bought), ["b1", "b2"]);
        assert_eq!(ids(&d.removed), ["b3"]);
    }

    #[test]
    fn identical_plans_have_an_empty_diff() {
        let plan = plan_with(vec![
            block(
                "b1",
                4,
                "2027-01-05T11:30:00Z",
                "2027-01-12T11:30:00Z",
                1000.0,
            ),
            action(
                "od1",
                ActionKind::RunOnDemand,
                2,
                "2027-01-01T00:00:00Z",
                "2027-01-02T00:00:00Z",
                50.0,
            ),
        ]);
        let d = diff(&plan, &plan);
        assert!(d.is_empty(), "{d:#?}");
        assert!(d.why.is_empty(), "{:#?}", d.why);
        assert_eq!(d.unchanged, 2);
        assert_eq!(d.totals.expected.delta, 0.0);
        assert_eq!(d.previous.created_at, plan.created_at);
    }

    #[test]
    fn added_and_removed_actions_are_named_and_totals_move() {
        let a = block(
            "keep",
            4,
            "2027-01-05T11:30:00Z",
            "2027-01-12T11:30:00Z",
            1000.0,
        );
        let gone = action(
            "od-gone",
            ActionKind::RunOnDemand,
            2,
            "2027-01-01T00:00:00Z",
            "2027-01-02T00:00:00Z",
            50.0,
        );
        let mut new_block = block(
            "new",
            2,
            "2027-02-05T11:30:00Z",
            "2027-02-12T11:30:00Z",
            500.0,
        );
        new_block.pool = "a100-us".into();
        let previous = plan_with(vec![a.clone(), gone]);
        let current = plan_with(vec![a, new_block]);
        let d = diff(&previous, &current);
        assert_eq!(ids(&d.added), ["new"]);
        assert_eq!(ids(&d.removed), ["od-gone"]);
        assert!(d.changed.is_empty(), "{:#?}", d.changed);
        assert_eq!(d.unchanged, 1);
        assert_eq!(d.totals.expected.old, 1050.0);
        assert_eq!(d.totals.expected.new, 1500.0);
        assert_eq!(d.totals.expected.delta, 450.0);
        assert!((d.totals.expected.fraction.unwrap() - 450.0 / 1050.0).abs() < 1e-12);
        assert_eq!(d.totals.irreversible.delta, 500.0);
        assert!(!d.is_empty());
    }

    #[test]
    fn the_same_id_at_another_price_is_a_change_naming_the_fields() {
        let old = block(
            "b1",
            4,
            "2027-01-05T11:30:00Z",
            "2027-01-12T11:30:00Z",
            1000.0,
        );
        let mut new = old.clone();
        new.cost = 1100.0;
        new.offering_id = Some("cb-123".into());
        new.campaigns.push("finetune".into());
        new.start_hour = 24; // the horizon moved a day: not a change
        new.end_hour = 192;
        let d = diff(&plan_with(vec![old]), &plan_with(vec![new]));
        assert!(d.added.is_empty() && d.removed.is_empty());
        assert_eq!(d.changed.len(), 1);
        let c = &d.changed[0];
        assert_eq!((c.id.as_str(), c.previous_id.as_str()), ("b1", "b1"));
        assert_eq!(c.matched_by, MatchedBy::Id);
        let fields: Vec<&str> = c.fields.iter().map(|f| f.field.as_str()).collect();
        assert_eq!(fields, ["cost", "offering_id", "campaigns"]);
        assert_eq!(c.field("cost").unwrap().old, serde_json::json!(1000.0));
        assert_eq!(c.field("cost").unwrap().new, serde_json::json!(1100.0));
        assert_eq!(c.field("offering_id").unwrap().old, Value::Null);
        assert_eq!(c.cost.delta, 100.0);
        assert_eq!(d.unchanged, 0);
    }

    #[test]
    fn sub_cent_costs_and_due_now_on_both_nights_are_not_changes() {
        let mut previous = plan_with(vec![action(
            "od",
            ActionKind::RunOnDemand,
            2,
            "2026-12-31T00:00:00Z",
            "2027-01-09T00:00:00Z",
            50.0,
        )]);
        let mut current = previous.clone();
        previous.actions[0].due = previous.created_at.clone();
        current.created_at = "2027-01-02T00:00:00Z".into();
        current.actions[0].due = current.created_at.clone();
        current.actions[0].cost = 50.004;
        let d = diff(&previous, &current);
        assert!(d.changed.is_empty(), "{:#?}", d.changed);
        assert_eq!(d.unchanged, 1);
        // A due date that moved for another reason is a change.
        current.actions[0].due = "2027-01-05T00:00:00Z".into();
        let d = diff(&previous, &current);
        assert_eq!(d.changed[0].fields[0].field, "due");
    }

    #[test]
    fn a_resized_or_moved_purchase_is_one_change_not_a_removal_and_an_addition() {
        let old = block(
            "block-8x",
            8,
            "2027-01-05T11:30:00Z",
            "2027-01-12T11:30:00Z",
            8000.0,
        );
        let resized = block(
            "block-12x",
            12,
            "2027-01-07T11:30:00Z",
            "2027-01-14T11:30:00Z",
            12000.0,
        );
        // Elsewhere, and after the old window: not the same purchase.
        let mut other_place = block(
            "block-west",
            8,
            "2027-01-05T11:30:00Z",
            "2027-01-12T11:30:00Z",
            8000.0,
        );
        other_place.region = "us-west-2".into();
        let later = block(
            "block-later",
            8,
            "2027-02-05T11:30:00Z",
            "2027-02-12T11:30:00Z",
            8000.0,
        );
        let d = diff(
            &plan_with(vec![old]),
            &plan_with(vec![resized, other_place, later]),
        );
        assert_eq!(ids(&d.added), ["block-west", "block-later"]);
        assert!(d.removed.is_empty(), "{:#?}", d.removed);
        assert_eq!(d.changed.len(), 1);
        let c = &d.changed[0];
        assert_eq!(c.matched_by, MatchedBy::Purchase);
        assert_eq!(
            (c.previous_id.as_str(), c.id.as_str()),
            ("block-8x", "block-12x")
        );
        let fields: Vec<&str> = c.fields.iter().map(|f| f.field.as_str()).collect();
        assert_eq!(fields, ["instances", "gpus", "start", "end", "due", "cost"]);
        assert_eq!(c.field("instances").unwrap().old, serde_json::json!(8));
        assert_eq!(c.field("instances").unwrap().new, serde_json::json!(12));
    }

    #[test]
    fn pairing_prefers_the_most_overlap_and_is_deterministic() {
        let old = block(
            "old",
            8,
            "2027-01-05T00:00:00Z",
            "2027-01-12T00:00:00Z",
            8.0,
        );
        let near = block(
            "near",
            9,
            "2027-01-06T00:00:00Z",
            "2027-01-13T00:00:00Z",
            9.0,
        );
        let far = block(
            "far",
            8,
            "2027-01-10T00:00:00Z",
            "2027-01-17T00:00:00Z",
            8.0,
        );
        let previous = plan_with(vec![old]);
        for current in [
            plan_with(vec![far.clone(), near.clone()]),
            plan_with(vec![near.clone(), far.clone()]),
        ] {
            let d = diff(&previous, &current);
            assert_eq!(d.changed.len(), 1);
            assert_eq!(d.changed[0].id, "near");
            assert_eq!(ids(&d.added), ["far"]);
        }
    }

    #[test]
    fn releases_pair_with_the_reservations_they_end() {
        let reserve = |id: &str, n, end: &str| {
            action(
                id,
                ActionKind::Reserve,
                n,
                "2027-01-05T00:00:00Z",
                end,
                100.0 * f64::from(n),
            )
        };
        let release = |id: &str, n, at: &str| {
            let mut r = action(id, ActionKind::Release, n, at, at, 0.0);
            r.campaigns.clear();
            r
        };
        let previous = plan_with(vec![
            reserve("r-4x", 4, "2027-01-12T00:00:00Z"),
            release("rel-4x", 4, "2027-01-12T00:00:00Z"),
        ]);
        let current = plan_with(vec![
            reserve("r-6x", 6, "2027-01-14T00:00:00Z"),
            release("rel-6x", 6, "2027-01-14T00:00:00Z"),
        ]);
        let d = diff(&previous, &current);
        assert!(d.added.is_empty() && d.removed.is_empty(), "{d:#?}");
        let pairs: Vec<(&str, &str)> = d
            .changed
            .iter()
            .map(|c| (c.previous_id.as_str(), c.id.as_str()))
            .collect();
        assert_eq!(pairs, [("r-4x", "r-6x"), ("rel-4x", "rel-6x")]);
    }

    #[test]
    fn why_names_the_inputs_prices_and_times_that_moved() {
        let mut previous = plan_with(Vec::new());
        let mut f = FingerprintBuilder::default();
        f.add("calendar", "calendars/q1.yaml", b"a")
            .add("config", "gpucap.toml", b"c")
            .add("forecast", "f.csv", b"f");
        previous.fingerprint = f.finish();
        let mut current = previous.clone();
        let mut f = FingerprintBuilder::default();
        f.add("calendar", "calendars/q1.yaml", b"b")
            .add("calendar", "calendars/q2.yaml", b"new")
            .add("config", "gpucap.toml", b"c");
        current.fingerprint = f.finish();
        current.created_at = "2027-01-02T00:00:00Z".into();
        let quote = |offer: &str, source: &str, at: &str, price: f64| Quote {
            offer: offer.into(),
            source: source.into(),
            fetched_at: at.into(),
            price_per_instance_hour: price,
            upfront_per_instance: 0.0,
            offering_id: None,
            origin: String::new(),
            list_price_per_instance_hour: None,
            list_source: None,
        };
        previous.quotes = vec![
            quote("od", "snapshot", "2026-11-01T00:00:00Z", 98.32),
            quote("block", "snapshot", "2026-11-01T00:00:00Z", 31.46),
        ];
        current.quotes = vec![
            quote("od", "live", "2027-01-01T23:10:00Z", 98.32),
            quote("block", "live", "2027-01-01T23:12:00Z", 33.0),
            quote("spot", "live", "2027-01-01T23:11:00Z", 40.0),
        ];
        let d = diff(&previous, &current);
        let inputs: Vec<(String, &str, Change)> = d
            .why
            .inputs
            .iter()
            .map(|i| (i.kind.clone(), i.name.as_str(), i.change))
            .collect();
        assert_eq!(
            inputs,
            [
                ("calendar".to_string(), "calendars/q1.yaml", Change::Changed),
                ("calendar".to_string(), "calendars/q2.yaml", Change::Added),
                ("forecast".to_string(), "f.csv", Change::Removed),
            ]
        );
        let prices = d.why.prices.as_ref().expect("prices moved");
        let sources = prices.sources.as_ref().expect("snapshot then, live now");
        assert_eq!(sources.old.get("snapshot"), Some(&2));
        assert_eq!(sources.new.get("live"), Some(&3));
        let fetched = prices.fetched.as_ref().unwrap();
        assert_eq!(
            fetched.new.as_ref().unwrap().earliest,
            "2027-01-01T23:10:00Z"
        );
        assert_eq!(fetched.new.as_ref().unwrap().latest, "2027-01-01T23:12:00Z");
        assert_eq!(prices.repriced.len(), 1);
        assert_eq!(prices.repriced[0].offer, "block");
        assert_eq!(prices.repriced[0].new.price_per_instance_hour, 33.0);
        assert_eq!(prices.newly_quoted, ["spot"]);
        assert!(prices.no_longer_quoted.is_empty());
        let made = d.why.created_at.as_ref().expect("made at another time");
        assert_eq!(made.new, "2027-01-02T00:00:00Z");
        assert!(d.why.horizon.is_none());
        assert!(d.why.apply_state.is_none());
        // Inputs moved, but the plan buys the same: nothing to act on.
        assert!(d.is_empty());
    }

    #[test]
    fn every_action_field_is_compared_or_deliberately_not() {
        let a = block("b", 1, "2027-01-05T11:30:00Z", "2027-01-12T11:30:00Z", 1.0);
        let Value::Object(fields) = serde_json::to_value(&a).unwrap() else {
            panic!("an action is an object");
        };
        for key in fields.keys() {
            assert!(
                COMPARED.contains(&key.as_str()) || NOT_COMPARED.contains(&key.as_str()),
                "`{key}`: add it to COMPARED or NOT_COMPARED"
            );
        }
        assert_eq!(fields.len(), COMPARED.len() + NOT_COMPARED.len());
    }

    #[test]
    fn hostile_plans_do_not_panic() {
        let mut odd = block("x", 1, "not a time", "", f64::NAN);
        odd.due = "never".into();
        let mut twin = odd.clone();
        twin.cost = f64::INFINITY;
        twin.instances = 2;
        let previous = plan_with(vec![odd.clone(), odd.clone(), odd]);
        let mut current = plan_with(vec![twin]);
        current.created_at = "garbage".into();
        current.cost.expected_total = 5.0;
        let d = diff(&previous, &current);
        assert_eq!(d.changed.len(), 1, "{d:#?}");
        assert_eq!(d.removed.len(), 2, "the repeated id matches once");
        assert!(d.why.created_at.is_some());
        assert!(d.totals.expected.moved());
        assert_eq!(d.totals.expected.fraction, None);
    }
}
