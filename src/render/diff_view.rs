//! The words for a plan diff ([`crate::plan::diff`]), shared by the terminal summary and the
//! markdown comment: the one-line summary, what changed about each action, and why the plan
//! moved. Written once here so both say the same thing.
//!
//! Phrases are made of [`Part`]s, prose apart from names (files, offers, campaigns), and never
//! escaped here: each renderer escapes every part by its own format's rules (the terminal shows
//! control characters escaped, markdown puts names in code spans and escapes prose).
//!
//! Like [`super::plan_view`], everything tolerates any plan content and nothing panics.

use chrono::{DateTime, Utc};
use serde_json::Value;

use super::plan_view::{money, parse_time, percent, short_time, unit_price};
use super::terminal::thousands;
use crate::plan::Action;
use crate::plan::diff::{ActionChange, Delta, Moved, PlanDiff, QuotedPrice, TimeRange};
use crate::plan::fingerprint::{Change, EXISTING_CAPACITY, InputChange};
use crate::state::StateRef;

/// Repriced offers listed before "… and N more".
const MAX_REPRICED: usize = 10;
/// Offer names listed in "offers priced now that were not before".
const MAX_NAMES: usize = 5;

/// A piece of a phrase.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Part {
    /// Prose.
    Text(String),
    /// A name from the plan or the repository: a file, an offer, a campaign.
    Name(String),
}

/// A sentence or a clause, as parts.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Phrase(pub Vec<Part>);

impl Phrase {
    fn new() -> Self {
        Phrase::default()
    }

    fn text(mut self, s: impl Into<String>) -> Self {
        self.0.push(Part::Text(s.into()));
        self
    }

    fn name(mut self, s: impl Into<String>) -> Self {
        self.0.push(Part::Name(s.into()));
        self
    }

    /// The phrase as plain text, names as they are (for tests and logs).
    pub fn plain(&self) -> String {
        self.0
            .iter()
            .map(|p| match p {
                Part::Text(s) | Part::Name(s) => s.as_str(),
            })
            .collect()
    }
}

/// Whole dollars with a sign: `+$12,345`, `−$1,000` (a true minus), `$0`.
pub fn signed_money(x: f64) -> String {
    let m = money(x.abs());
    if !x.is_finite() {
        "?".into()
    } else if x.round() > 0.0 {
        format!("+{m}")
    } else if x.round() < 0.0 {
        format!("−{m}")
    } else {
        m
    }
}

/// A percentage with a sign: `+3.1 %`, `−0.4 %`, `+<0.1 %`, `0.0 %`; empty when not a
/// number.
pub fn signed_percent(fraction: f64) -> String {
    let p = if fraction != 0.0 && (fraction * 1000.0).round() == 0.0 {
        "<0.1 %".to_string()
    } else {
        percent(fraction.abs())
    };
    if p.is_empty() || fraction == 0.0 {
        p
    } else if fraction > 0.0 {
        format!("+{p}")
    } else {
        format!("−{p}")
    }
}

/// `+$12,345 (+3.1 %)`: a delta and, when there is one, its fraction; `$0` when the figure
/// did not move by a dollar.
pub fn delta(d: &Delta) -> String {
    let money = signed_money(d.delta);
    match d.fraction.map(signed_percent).filter(|p| !p.is_empty()) {
        Some(p) if d.delta.round() != 0.0 => format!("{money} ({p})"),
        _ => money,
    }
}

/// `+2 actions, −1, ~1 changed · expected cost +$12,345 (+3.1 %) · irreversible +$10,000`.
pub fn headline(d: &PlanDiff) -> String {
    let mut out = format!(
        "+{} action{}, −{}, ~{} changed · expected cost {} · irreversible {}",
        d.added.len(),
        if d.added.len() == 1 { "" } else { "s" },
        d.removed.len(),
        d.changed.len(),
        delta(&d.totals.expected),
        signed_money(d.totals.irreversible.delta),
    );
    if !d.bought.is_empty() {
        out.push_str(&format!(" · {} bought since, now owned", d.bought.len()));
    }
    out
}

/// How an action differs from the previous plan.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Sign {
    Added,
    Changed,
    Removed,
}

impl Sign {
    /// `+`, `~`, `-`.
    pub fn symbol(self) -> &'static str {
        match self {
            Sign::Added => "+",
            Sign::Changed => "~",
            Sign::Removed => "-",
        }
    }
}

/// One row of a table of changes.
#[derive(Debug, Clone, Copy)]
pub struct Row<'a> {
    pub sign: Sign,
    /// The action as it is now (as it was, for a removed one).
    pub action: &'a Action,
    /// Its cost now (then, for a removed one).
    pub cost: f64,
    /// What the change adds to the plan's cost: `+cost`, `-cost`, or new less old.
    pub change: f64,
    pub changed: Option<&'a ActionChange>,
}

/// The rows of a table of changes: purchases (and releases) first, then on-demand and spot
/// runs; in each, added, changed, removed, in plan order. Purchases come first because they
/// are what someone must buy, and a long list is cut at the end.
pub fn rows(d: &PlanDiff) -> Vec<Row<'_>> {
    let mut rows: Vec<Row> = d
        .added
        .iter()
        .map(|a| Row {
            sign: Sign::Added,
            action: a,
            cost: a.cost,
            change: a.cost,
            changed: None,
        })
        .chain(d.changed.iter().map(|c| Row {
            sign: Sign::Changed,
            action: &c.after,
            cost: c.cost.new,
            change: c.cost.delta,
            changed: Some(c),
        }))
        .chain(d.removed.iter().map(|a| Row {
            sign: Sign::Removed,
            action: a,
            cost: a.cost,
            change: -a.cost,
            changed: None,
        }))
        .collect();
    // Stable: plan order within each group.
    rows.sort_by_key(|r| (r.action.kind.is_run(), r.sign));
    rows
}

/// What the previous plan was: `prev.json` (or `the previous plan`).
pub fn previous_name(d: &PlanDiff) -> &str {
    d.previous.file.as_deref().unwrap_or("the previous plan")
}

/// `2 d`, `1 d 12 h`, `5 h`, `30 min` (the absolute length of `seconds`).
pub fn duration(seconds: i64) -> String {
    let s = seconds.unsigned_abs();
    let (d, h, m) = (s / 86_400, s / 3_600 % 24, s / 60 % 60);
    match (d, h, m) {
        (0, 0, m) => format!("{m} min"),
        (0, h, 0) => format!("{h} h"),
        (0, h, m) => format!("{h} h {m} min"),
        (d, 0, _) => format!("{d} d"),
        (d, h, _) => format!("{d} d {h} h"),
    }
}

/// `2 d later`, `5 h earlier`.
fn shift(seconds: i64) -> String {
    let way = if seconds >= 0 { "later" } else { "earlier" };
    format!("{} {way}", duration(seconds))
}

/// A field value as text: strings as they are, `—` for none, numbers and the rest as JSON.
fn value(v: &Value) -> String {
    match v {
        Value::Null => "—".into(),
        Value::String(s) => s.clone(),
        Value::Bool(true) => "yes".into(),
        Value::Bool(false) => "no".into(),
        other => other.to_string(),
    }
}

fn time_value(v: &Value) -> String {
    match v {
        Value::String(s) => short_time(s),
        other => value(other),
    }
}

fn times(a: &str, b: &str) -> Option<(DateTime<Utc>, DateTime<Utc>)> {
    Some((parse_time(a)?, parse_time(b)?))
}

/// What changed about one action, clause by clause: `8 → 12 instances (64 → 96 GPUs)`,
/// `moved 2 d later`, `cost $1,000 → $1,200`, `serves also finetune`, ….
pub fn change_phrases(c: &ActionChange) -> Vec<Phrase> {
    let (a, b) = (&c.before, &c.after);
    let mut out = Vec::new();
    if c.field("instances").is_some() {
        out.push(Phrase::new().text(format!(
            "{} → {} instances ({} → {} GPUs)",
            thousands(a.instances.into()),
            thousands(b.instances.into()),
            thousands(a.gpus.into()),
            thousands(b.gpus.into()),
        )));
    } else if c.field("gpus").is_some() {
        out.push(Phrase::new().text(format!(
            "{} → {} GPUs",
            thousands(a.gpus.into()),
            thousands(b.gpus.into())
        )));
    }
    // Act-by and bookable-from times that moved with the start say nothing more.
    let shift_of = |old: &str, new: &str| times(old, new).map(|(x, y)| (y - x).num_seconds());
    let start_shift = shift_of(&a.start, &b.start);
    let moved_with_start = |old: Option<&str>, new: Option<&str>| match (old, new) {
        (Some(old), Some(new)) => start_shift.is_some() && shift_of(old, new) == start_shift,
        _ => false,
    };
    let mut length_changed = false;
    if c.field("start").is_some() || c.field("end").is_some() {
        match (times(&a.start, &a.end), times(&b.start, &b.end)) {
            (Some((a0, a1)), Some((b0, b1))) => {
                let moved = (b0 - a0).num_seconds();
                let (old_len, new_len) = ((a1 - a0).num_seconds(), (b1 - b0).num_seconds());
                if moved != 0 && old_len == new_len {
                    out.push(Phrase::new().text(format!("moved {}", shift(moved))));
                } else if moved != 0 {
                    out.push(Phrase::new().text(format!("starts {}", shift(moved))));
                }
                if old_len != new_len {
                    length_changed = true;
                    out.push(Phrase::new().text(format!(
                        "{} → {} long",
                        duration(old_len),
                        duration(new_len)
                    )));
                }
            }
            _ => {
                for f in ["start", "end"] {
                    if let Some(f) = c.field(f) {
                        out.push(Phrase::new().text(format!(
                            "{} {} → {}",
                            f.field,
                            time_value(&f.old),
                            time_value(&f.new)
                        )));
                    }
                }
            }
        }
    }
    for f in &c.fields {
        let phrase = match f.field.as_str() {
            "instances" | "gpus" | "start" | "end" => continue,
            // Term offers are named after their length (`…/capacity-block/14d`): said above.
            "offer" if length_changed && offer_family(&a.offer) == offer_family(&b.offer) => {
                continue;
            }
            "due" if moved_with_start(Some(&a.due), Some(&b.due)) => continue,
            "bookable_from"
                if moved_with_start(a.bookable_from.as_deref(), b.bookable_from.as_deref()) =>
            {
                continue;
            }
            "due" => Phrase::new().text(format!(
                "act by {} → {}",
                time_value(&f.old),
                time_value(&f.new)
            )),
            "bookable_from" => Phrase::new().text(format!(
                "bookable from {} → {}",
                time_value(&f.old),
                time_value(&f.new)
            )),
            "cost" => Phrase::new().text(format!(
                "cost {} → {}",
                money(c.cost.old),
                money(c.cost.new)
            )),
            "irreversible" => Phrase::new().text(if b.irreversible {
                "now irreversible"
            } else {
                "no longer irreversible"
            }),
            "campaigns" => {
                let gained: Vec<&String> = b
                    .campaigns
                    .iter()
                    .filter(|x| !a.campaigns.contains(x))
                    .collect();
                let lost: Vec<&String> = a
                    .campaigns
                    .iter()
                    .filter(|x| !b.campaigns.contains(x))
                    .collect();
                let mut p = Phrase::new();
                if !gained.is_empty() {
                    p = names(p.text("serves also "), &gained, usize::MAX);
                }
                if !lost.is_empty() {
                    if !gained.is_empty() {
                        p = p.text("; ");
                    }
                    p = names(p.text("no longer serves "), &lost, usize::MAX);
                }
                if p.0.is_empty() {
                    p = p.text("campaigns reordered");
                }
                p
            }
            "offer" | "offering_id" | "kind" | "pool" | "cloud" | "region" | "zone"
            | "instance_type" => Phrase::new()
                .text(format!("{} ", f.field.replace('_', " ")))
                .name(value(&f.old))
                .text(" → ")
                .name(value(&f.new)),
            other => Phrase::new()
                .text(format!("{other} "))
                .name(value(&f.old))
                .text(" → ")
                .name(value(&f.new)),
        };
        out.push(phrase);
    }
    out
}

/// An offer id without its last part (a term offer's length).
fn offer_family(offer: &str) -> &str {
    offer.rsplit_once('/').map_or(offer, |(family, _)| family)
}

/// `a`, `b`, `c` and 2 more: names joined with commas, at most `max` of them.
fn names<S: AsRef<str>>(mut p: Phrase, list: &[S], max: usize) -> Phrase {
    for (i, n) in list.iter().take(max).enumerate() {
        if i > 0 {
            p = p.text(", ");
        }
        p = p.name(n.as_ref());
    }
    if list.len() > max {
        p = p.text(format!(" and {} more", list.len() - max));
    }
    p
}

/// Why the plan moved, one phrase per reason: the inputs whose digests differ, how the prices
/// moved and where from, when each plan was made, the horizon and the apply state.
pub fn why_phrases(d: &PlanDiff) -> Vec<Phrase> {
    let w = &d.why;
    let mut out: Vec<Phrase> = w.inputs.iter().map(input).collect();
    if !d.bought.is_empty() {
        let cost: f64 = d.bought.iter().map(|a| a.cost).sum();
        out.push(names(
            Phrase::new().text(format!(
                "{} action{} of the previous plan bought since ({}), now counted as owned capacity and not planned again: ",
                d.bought.len(),
                if d.bought.len() == 1 { "" } else { "s" },
                money(cost)
            )),
            &d.bought.iter().map(|a| a.id.as_str()).collect::<Vec<_>>(),
            MAX_REPRICED,
        ));
    }
    if let Some(p) = &w.prices {
        if let Some(s) = &p.sources {
            out.push(Phrase::new().text(format!(
                "prices from {} now, from {} before",
                source_mix(&s.new),
                source_mix(&s.old)
            )));
        }
        if let Some(f) = &p.fetched {
            out.push(Phrase::new().text(format!(
                "quotes fetched {} now, {} before",
                range(f.new.as_ref()),
                range(f.old.as_ref())
            )));
        }
        for r in p.repriced.iter().take(MAX_REPRICED) {
            out.push(repriced(&r.offer, &r.old, &r.new));
        }
        if p.repriced.len() > MAX_REPRICED {
            out.push(Phrase::new().text(format!(
                "… and {} more offers at other prices (all are in the JSON: `--format json`)",
                p.repriced.len() - MAX_REPRICED
            )));
        }
        if !p.newly_quoted.is_empty() {
            let n = p.newly_quoted.len();
            out.push(names(
                Phrase::new().text(format!(
                    "{n} offer{} priced now that the previous plan did not use: ",
                    plural(n)
                )),
                &p.newly_quoted,
                MAX_NAMES,
            ));
        }
        if !p.no_longer_quoted.is_empty() {
            let n = p.no_longer_quoted.len();
            out.push(names(
                Phrase::new().text(format!(
                    "{n} offer{} the previous plan used no longer priced: ",
                    plural(n)
                )),
                &p.no_longer_quoted,
                MAX_NAMES,
            ));
        }
    }
    if let Some(m) = &w.created_at {
        out.push(made(m));
    }
    if let Some(h) = &w.horizon {
        out.push(Phrase::new().text(format!(
            "horizon {} → {} now, {} → {} before",
            short_time(&h.new.start),
            short_time(&h.new.end),
            short_time(&h.old.start),
            short_time(&h.old.end)
        )));
    }
    if let Some(s) = &w.apply_state {
        out.push(apply_state(s));
    }
    if out.is_empty() {
        out.push(Phrase::new().text(if d.previous.fingerprint.is_empty() {
            "no recorded input changed"
        } else {
            "no input changed (the same fingerprint)"
        }));
    }
    out
}

fn plural(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
}

fn input(i: &InputChange) -> Phrase {
    let what = match i.change {
        Change::Changed => " changed",
        Change::Added => " is new",
        Change::Removed => " is gone",
    };
    let p = Phrase::new();
    match (i.kind.as_str(), i.name.as_str()) {
        ("state", EXISTING_CAPACITY) => p.text(format!("capacity already owned{what}")),
        ("state", name) => p.text("state file ").name(name).text(what),
        ("quotes", _) => p.text(format!("price quotes{what}")),
        ("problem", _) => p.text(format!("offers priced for the problem{what}")),
        ("quotas", _) => p.text(format!("quotas read from the clouds{what}")),
        ("tool", _) => p.text(format!("gpucap version{what}")),
        (kind, name) => p.text(format!("{kind} ")).name(name).text(what),
    }
}

/// `live (10), cache (2)`.
fn source_mix(counts: &std::collections::BTreeMap<String, usize>) -> String {
    if counts.is_empty() {
        return "no quotes".into();
    }
    counts
        .iter()
        .map(|(s, n)| format!("{s} ({n})"))
        .collect::<Vec<_>>()
        .join(", ")
}

fn range(r: Option<&TimeRange>) -> String {
    match r {
        None => "at no known time".into(),
        Some(r) if r.earliest == r.latest => short_time(&r.earliest),
        Some(r) => format!("{} to {}", short_time(&r.earliest), short_time(&r.latest)),
    }
}

/// `offer: $98.32 → $101.20 per instance-hour (snapshot → live)`.
fn repriced(offer: &str, old: &QuotedPrice, new: &QuotedPrice) -> Phrase {
    let mut parts = Vec::new();
    if old.price_per_instance_hour != new.price_per_instance_hour {
        parts.push(format!(
            "{} → {} per instance-hour",
            unit_price(old.price_per_instance_hour),
            unit_price(new.price_per_instance_hour)
        ));
    }
    if old.upfront_per_instance != new.upfront_per_instance {
        parts.push(format!(
            "{} → {} upfront per instance",
            unit_price(old.upfront_per_instance),
            unit_price(new.upfront_per_instance)
        ));
    }
    let mut text = format!(": {}", parts.join(", "));
    if old.source != new.source {
        text.push_str(&format!(" ({} → {})", old.source, new.source));
    }
    Phrase::new().name(offer).text(text)
}

fn made(m: &Moved<String>) -> Phrase {
    let (new, old) = (short_time(&m.new), short_time(&m.old));
    let text = match times(&m.old, &m.new) {
        Some((a, b)) => {
            let way = if b >= a { "after" } else { "before" };
            format!(
                "planned at {new} UTC, {} {way} the previous plan ({old} UTC): booking windows, \
                 quote ages and due dates are counted from then",
                duration((b - a).num_seconds())
            )
        }
        None => format!("planned at {new}, the previous plan at {old}"),
    };
    Phrase::new().text(text)
}

fn apply_state(s: &Moved<Option<StateRef>>) -> Phrase {
    let show = |r: &Option<StateRef>| match r {
        None => "no apply state".to_string(),
        Some(r) => format!(
            "apply state {} serial {}",
            r.lineage.as_deref().unwrap_or("(new)"),
            r.serial
        ),
    };
    Phrase::new().text(format!(
        "made against {} now, {} before",
        show(&s.new),
        show(&s.old)
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::diff::diff;
    use crate::plan::tests::empty_plan;
    use crate::plan::{Action, ActionKind};

    fn block(id: &str, instances: u32, start: &str, end: &str, cost: f64) -> Action {
        Action {
            id: id.into(),
            kind: ActionKind::PurchaseCapacityBlock,
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
            due: "2027-01-01T00:00:00Z".into(),
            bookable_from: None,
            cost,
            irreversible: true,
            offer: "aws/block".into(),
            offering_id: None,
            campaigns: vec!["pretrain".into()],
            pieces: Vec::new(),
        }
    }

    #[test]
    fn signed_amounts_use_a_true_minus() {
        assert_eq!(signed_money(12_345.4), "+$12,345");
        assert_eq!(signed_money(-1_000.0), "−$1,000");
        assert_eq!(signed_money(0.2), "$0");
        assert_eq!(signed_money(f64::NAN), "?");
        assert_eq!(signed_percent(0.031), "+3.1 %");
        assert_eq!(signed_percent(-0.004), "−0.4 %");
        assert_eq!(signed_percent(-0.00001), "−<0.1 %");
        assert_eq!(signed_percent(0.0), "0.0 %");
        assert_eq!(delta(&Delta::of(100.0, 100.2)), "$0");
        assert_eq!(delta(&Delta::of(1000.0, 1031.0)), "+$31 (+3.1 %)");
        assert_eq!(delta(&Delta::of(0.0, 5.0)), "+$5");
        assert_eq!(duration(2 * 86_400), "2 d");
        assert_eq!(duration(-(36 * 3_600)), "1 d 12 h");
        assert_eq!(duration(1_800), "30 min");
    }

    #[test]
    fn a_resized_and_moved_block_reads_as_such() {
        let mut previous = empty_plan();
        previous.actions = vec![block(
            "a",
            8,
            "2027-01-05T11:30:00Z",
            "2027-01-12T11:30:00Z",
            8000.0,
        )];
        previous.cost.expected_total = 8000.0;
        previous.cost.irreversible = 8000.0;
        let mut current = empty_plan();
        let mut b = block(
            "b",
            12,
            "2027-01-07T11:30:00Z",
            "2027-01-14T11:30:00Z",
            12000.0,
        );
        b.campaigns = vec!["pretrain".into(), "finetune".into()];
        current.actions = vec![b];
        current.cost.expected_total = 12000.0;
        current.cost.irreversible = 12000.0;
        let d = diff(&previous, &current);
        let words: Vec<String> = change_phrases(&d.changed[0])
            .iter()
            .map(Phrase::plain)
            .collect();
        assert_eq!(
            words,
            [
                "8 → 12 instances (64 → 96 GPUs)",
                "moved 2 d later",
                "cost $8,000 → $12,000",
                "serves also finetune",
            ]
        );
        assert_eq!(
            headline(&d),
            "+0 actions, −0, ~1 changed · expected cost +$4,000 (+50.0 %) · irreversible +$4,000"
        );
        let why: Vec<String> = why_phrases(&d).iter().map(Phrase::plain).collect();
        assert_eq!(why, ["no recorded input changed"]);
    }

    #[test]
    fn a_longer_block_says_how_long() {
        let mut previous = empty_plan();
        previous.actions = vec![block(
            "a",
            8,
            "2027-01-05T00:00:00Z",
            "2027-01-12T00:00:00Z",
            1.0,
        )];
        let mut current = empty_plan();
        current.actions = vec![block(
            "b",
            8,
            "2027-01-05T00:00:00Z",
            "2027-01-19T00:00:00Z",
            1.0,
        )];
        current.created_at = "2027-01-02T06:00:00Z".into();
        current.fingerprint.inputs =
            vec![crate::plan::InputDigest::of("calendar", "q1.yaml", b"x")];
        let d = diff(&previous, &current);
        let words: Vec<String> = change_phrases(&d.changed[0])
            .iter()
            .map(Phrase::plain)
            .collect();
        assert_eq!(words, ["7 d → 14 d long"]);
        let why: Vec<String> = why_phrases(&d).iter().map(Phrase::plain).collect();
        assert_eq!(why[0], "calendar q1.yaml is new");
        assert!(
            why[1].starts_with(
                "planned at 2027-01-02 06:00 UTC, 1 d 6 h after the previous plan (2027-01-01 UTC)"
            ),
            "{why:?}"
        );
        // The file name is a name, never prose.
        assert_eq!(why_phrases(&d)[0].0[1], Part::Name("q1.yaml".into()));
    }
}
