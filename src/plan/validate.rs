//! A plan file read back is input like any other: `gpucap generate` writes Terraform for an
//! irreversible purchase from it, and `gpucap apply` spends money on it. So every field an action
//! is carried out from is checked as strictly as a problem file is: ids unique, times that parse
//! and are ordered, the region one of the cloud's, counts positive and within
//! [`crate::limits`] and the cloud's purchase rules (pieces of a purchase no larger than the
//! cloud sells in one, capacity blocks of a length it sells), money finite. Errors name the file and the field path
//! (`actions[3].instances`).

use std::collections::HashMap;
use std::path::Path;

use chrono::{DateTime, Utc};
use gpucap_provider::Cloud;

use super::{ActionKind, Plan};
use crate::diagnostic::{InputError, Location};
use crate::limits::{MAX_GPUS, MAX_INSTANCES, MAX_USD, finite_in, show};
use crate::problem::validate::MAX_HOURS;
use crate::text::{check_name, visible};
use crate::timespec::parse_timestamp;

/// Longest action id: ids are built from a handful of short parts.
const MAX_ID_LEN: usize = 200;

/// Checks a parsed plan; `path` names the file in errors.
pub fn validate(plan: &Plan, path: &Path) -> Result<(), InputError> {
    let at = |field: String| Location::file(path).field(field);
    let err = |field: String, message: String| Err(InputError::new(at(field), message));
    let time = |field: String, value: &str| -> Result<DateTime<Utc>, InputError> {
        parse_timestamp(value).map_err(|m| InputError::new(at(field), m))
    };
    let money = |field: String, value: f64| -> Result<(), InputError> {
        if finite_in(value, 0.0, MAX_USD) {
            Ok(())
        } else {
            err(
                field,
                format!(
                    "must be a number of US dollars between 0 and {MAX_USD:e}, found {}",
                    show(value)
                ),
            )
        }
    };
    let name = |field: String, value: &str| -> Result<(), InputError> {
        check_name(value).map_err(|m| InputError::new(at(field), m))
    };

    time("created_at".into(), &plan.created_at)?;
    let start = time("horizon.start".into(), &plan.horizon.start)?;
    let end = time("horizon.end".into(), &plan.horizon.end)?;
    if !(1..=MAX_HOURS).contains(&plan.horizon.hours) {
        return err(
            "horizon.hours".into(),
            format!(
                "must be between 1 and {MAX_HOURS} (12 years), found {}",
                plan.horizon.hours
            ),
        );
    }
    if end <= start {
        return err(
            "horizon.end".into(),
            format!(
                "`{}` is not after the start `{}`",
                plan.horizon.end, plan.horizon.start
            ),
        );
    }
    let span_hours = (end - start).num_hours();
    if end - start != chrono::Duration::hours(span_hours)
        || span_hours != i64::from(plan.horizon.hours)
    {
        return Err(InputError::new(
            at("horizon.hours".into()),
            format!(
                "`{}` hours disagree with the horizon from `{}` to `{}`, which is {} hours",
                plan.horizon.hours,
                plan.horizon.start,
                plan.horizon.end,
                show((end - start).num_seconds() as f64 / 3600.0)
            ),
        )
        .with_hint("the plan file was edited by hand or is damaged: plan again"));
    }
    money("cost.expected_total".into(), plan.cost.expected_total)?;
    money("cost.irreversible".into(), plan.cost.irreversible)?;

    for (i, p) in plan.pools.iter().enumerate() {
        name(format!("pools[{i}].id"), &p.id)?;
    }
    for (i, c) in plan.campaigns.iter().enumerate() {
        name(format!("campaigns[{i}].name"), &c.name)?;
        if let Some(team) = &c.team {
            name(format!("campaigns[{i}].team"), team)?;
        }
    }

    let mut ids: HashMap<&str, usize> = HashMap::new();
    for (i, a) in plan.actions.iter().enumerate() {
        let f = |field: &str| format!("actions[{i}].{field}");
        if a.id.is_empty()
            || a.id.len() > MAX_ID_LEN
            || !a
                .id
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        {
            return err(
                f("id"),
                format!(
                    "`{}` is not an action id: lowercase letters, digits and `-`, at most {MAX_ID_LEN}",
                    visible(&a.id)
                ),
            );
        }
        if let Some(first) = ids.insert(a.id.as_str(), i) {
            return err(
                f("id"),
                format!("`{}` is also the id of actions[{first}]", a.id),
            );
        }
        let cloud: Cloud = a
            .cloud
            .parse()
            .map_err(|m: String| InputError::new(at(f("cloud")), visible(&m).into_owned()))?;
        match Cloud::of_region(&a.region) {
            Some(c) if c == cloud && gpucap_provider::regions::exists(cloud, &a.region) => {}
            Some(c) if c == cloud => {
                let near = gpucap_provider::regions::closest(&a.region)
                    .map(|r| format!("; the nearest is `{r}`"))
                    .unwrap_or_default();
                return err(
                    f("region"),
                    format!("{cloud} has no region `{}`{near}", visible(&a.region)),
                );
            }
            Some(c) => {
                return err(
                    f("region"),
                    format!("`{}` is a region of {c}, not of {cloud}", a.region),
                );
            }
            None => {
                return err(
                    f("region"),
                    format!("`{}` is not a region of {cloud}", visible(&a.region)),
                );
            }
        }
        if let Some(zone) = &a.zone
            && !gpucap_provider::regions::zone_in_region(cloud, &a.region, zone)
        {
            return err(
                f("zone"),
                format!(
                    "`{}` is not a zone of {cloud} region `{}`",
                    visible(zone),
                    a.region
                ),
            );
        }
        if a.instance_type.is_empty()
            || !a
                .instance_type
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "._-".contains(c))
        {
            return err(
                f("instance_type"),
                format!(
                    "`{}` is not an instance type name",
                    visible(&a.instance_type)
                ),
            );
        }
        name(f("pool"), &a.pool)?;
        if !plan.pools.is_empty() && !plan.pools.iter().any(|p| p.id == a.pool) {
            return err(
                f("pool"),
                format!("`{}` is not one of the plan's `pools`", a.pool),
            );
        }
        if !(1..=MAX_INSTANCES).contains(&a.instances) {
            return err(
                f("instances"),
                format!(
                    "must be between 1 and {MAX_INSTANCES}, found {}",
                    a.instances
                ),
            );
        }
        if a.gpus > MAX_GPUS || (a.gpus == 0 && a.kind != ActionKind::Release) {
            return err(
                f("gpus"),
                format!("must be between 1 and {MAX_GPUS}, found {}", a.gpus),
            );
        }
        let s = time(f("start"), &a.start)?;
        let e = time(f("end"), &a.end)?;
        let ordered = if a.kind == ActionKind::Release {
            e >= s
        } else {
            e > s
        };
        if !ordered {
            return err(
                f("end"),
                format!("`{}` is not after the start `{}`", a.end, a.start),
            );
        }
        if a.end_hour < a.start_hour {
            return err(
                f("end_hour"),
                format!("{} is before the start hour {}", a.end_hour, a.start_hour),
            );
        }
        let due = time(f("due"), &a.due)?;
        if due > s {
            return err(
                f("due"),
                format!("`{}` is after the start `{}`", a.due, a.start),
            );
        }
        if let Some(from) = &a.bookable_from {
            time(f("bookable_from"), from)?;
        }
        within_purchase_rule(a, s, e).map_err(|(field, m)| InputError::new(at(f(field)), m))?;
        money(f("cost"), a.cost)?;
        if let Some(id) = &a.offering_id {
            name(f("offering_id"), id)?;
        }
        name(f("offer"), &a.offer)?;
        for (j, c) in a.campaigns.iter().enumerate() {
            name(format!("actions[{i}].campaigns[{j}]"), c)?;
        }
    }
    Ok(())
}

/// A purchase against its cloud's rule (`gpucap_provider::purchase_rules`): its pieces add up to
/// its instances and each is a size the cloud sells in one purchase; a capacity block lasts a
/// whole number of days the cloud sells. Actions without a rule (runs, releases, clouds or
/// instruments gpucap has no rule for) pass. The error is the field and the message.
fn within_purchase_rule(
    a: &super::Action,
    start: DateTime<Utc>,
    end: DateTime<Utc>,
) -> Result<(), (&'static str, String)> {
    let Some(rule) = a.purchase_rule() else {
        return Ok(());
    };
    let sells = |n: u32| n >= rule.min_instances && rule.max_instances.is_none_or(|m| n <= m);
    let range = match rule.max_instances {
        Some(m) => format!("{} to {m}", rule.min_instances),
        None => format!("at least {}", rule.min_instances),
    };
    if !a.pieces.is_empty() {
        let sum: u64 = a.pieces.iter().map(|&n| u64::from(n)).sum();
        if sum != u64::from(a.instances) {
            return Err((
                "pieces",
                format!(
                    "add up to {sum} instances, not the action's {}",
                    a.instances
                ),
            ));
        }
        if let Some(n) = a.pieces.iter().find(|&&n| !sells(n)) {
            return Err((
                "pieces",
                format!(
                    "a piece of {n} instances: {} sells {range} instances in one purchase ({})",
                    rule.name, rule.source
                ),
            ));
        }
    }
    if a.kind == ActionKind::PurchaseCapacityBlock && !rule.lengths.is_empty() {
        let hours = (end - start).num_hours();
        let whole_days = (end - start).num_minutes() % (24 * 60) == 0;
        let days = u32::try_from(hours / 24).unwrap_or(u32::MAX);
        let sold = rule.lengths_days(u32::MAX);
        if !whole_days || !sold.contains(&days) {
            return Err((
                "end",
                format!(
                    "a block of {hours} hours: {} sells blocks of {} days ({})",
                    rule.name,
                    days_list(&sold),
                    rule.source
                ),
            ));
        }
    }
    Ok(())
}

/// `1-14, 21, 28, …` in short: runs of consecutive days joined.
fn days_list(days: &[u32]) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut i = 0;
    while i < days.len() {
        let mut j = i;
        while j + 1 < days.len() && days[j + 1] == days[j] + 1 {
            j += 1;
        }
        parts.push(if j > i + 1 {
            format!("{}-{}", days[i], days[j])
        } else if j == i + 1 {
            format!("{}, {}", days[i], days[j])
        } else {
            days[i].to_string()
        });
        i = j + 1;
    }
    parts.join(", ")
}
