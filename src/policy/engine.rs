//! Loads the built-in and user policies into one regorus engine and evaluates a plan against
//! them: every package under `gpucap.policies` contributes its `deny`, `warn` and `approval`.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use chrono::{DateTime, SecondsFormat, Utc};
use serde_json::{Map, Value};

use super::error::{PolicyError, parse_position};
use super::{DEFAULT_MAX_QUOTE_AGE_HOURS, Decision, DecisionKind, Decisions, POLICY_ROOT, builtin};
use crate::config::Budget;
use crate::diagnostic::Location;

/// One policy file: where it came from (for messages) and its text.
#[derive(Debug, Clone)]
pub struct PolicySource {
    pub path: PathBuf,
    pub text: String,
    pub builtin: bool,
}

/// The loaded policies, ready to evaluate any number of plans.
#[derive(Clone)]
pub struct PolicyEngine {
    engine: regorus::Engine,
    /// Gate packages (`data.gpucap.policies.…`), sorted, each once.
    packages: Vec<String>,
    sources: Vec<PolicySource>,
}

impl std::fmt::Debug for PolicyEngine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PolicyEngine")
            .field("packages", &self.packages)
            .finish_non_exhaustive()
    }
}

impl PolicyEngine {
    /// The built-in gates plus every `*.rego` under each of `dirs` (searched recursively, in
    /// name order).
    pub fn load(dirs: &[PathBuf]) -> Result<PolicyEngine, PolicyError> {
        let mut sources = builtin::policies();
        for dir in dirs {
            sources.extend(read_dir(dir)?);
        }
        PolicyEngine::from_sources(sources)
    }

    /// Only the given sources (no built-ins unless they are among them).
    pub fn from_sources(sources: Vec<PolicySource>) -> Result<PolicyEngine, PolicyError> {
        super::recursion::check(&sources)?;
        // regorus checks its memory limit while parsing too: wait for any evaluation to end.
        let _turn = turn();
        let mut engine = regorus::Engine::new();
        engine.set_rego_v0(false);
        // Plans are data the user controls; a builtin given the wrong type should be an error
        // that names the policy, not a silently undefined rule that lets a plan through.
        engine.set_strict_builtin_errors(true);
        // Policies are code from the repo; an expensive or endless one must end in an error
        // that names it (and so denies: the plan has no decisions), not hang `gpucap plan`.
        engine.set_execution_timer_config(timer(crate::limits::MAX_POLICY_TIME));
        super::ranges::register(&mut engine).map_err(|e| PolicyError::BadData(format!("{e:#}")))?;
        let mut packages = BTreeSet::new();
        for source in &sources {
            let name = source.path.display().to_string();
            let package = engine
                .add_policy(name.clone(), source.text.clone())
                .map_err(|e| PolicyError::from_regorus(&name, &e))?;
            let package = package
                .strip_prefix("data.")
                .unwrap_or(&package)
                .to_string();
            let is_gate = package.starts_with(&format!("{POLICY_ROOT}."));
            if !source.builtin && !is_gate {
                return Err(PolicyError::Package {
                    file: source.path.clone(),
                    package,
                });
            }
            if is_gate {
                packages.insert(package);
            }
        }
        let policy = PolicyEngine {
            engine,
            packages: packages.into_iter().collect(),
            sources,
        };
        // Compile once on an empty plan so unknown functions and unsafe variables surface now,
        // with their file and line, rather than in the middle of `gpucap plan`.
        policy.check()?;
        Ok(policy)
    }

    /// The gate packages loaded, e.g. `gpucap.policies.budget_total`.
    pub fn packages(&self) -> &[String] {
        &self.packages
    }

    /// The policy files loaded.
    pub fn sources(&self) -> &[PolicySource] {
        &self.sources
    }

    /// Evaluates the gates on a plan. `data` is the budget section; see [`prepare_data`] for
    /// the keys the engine fills in.
    pub fn evaluate(
        &self,
        plan: &Value,
        data: &Value,
        now: DateTime<Utc>,
    ) -> Result<Decisions, PolicyError> {
        let _turn = turn();
        self.evaluate_in_turn(plan, data, now)
    }

    /// [`PolicyEngine::evaluate`], for a caller that holds the [`turn`].
    fn evaluate_in_turn(
        &self,
        plan: &Value,
        data: &Value,
        now: DateTime<Utc>,
    ) -> Result<Decisions, PolicyError> {
        check_plan(plan)?;
        let data = prepare_data(data.clone(), now)?;
        let _memory = MemoryBound::set();
        let mut engine = self.engine.clone();
        let limit = time_limit(plan);
        engine.set_execution_timer_config(timer(limit));
        engine.set_input(regorus::Value::from(plan.clone()));
        engine
            .add_data(regorus::Value::from(data))
            .map_err(|e| PolicyError::BadData(format!("{e:#}")))?;
        let mut decisions = Decisions::default();
        for package in &self.packages {
            for kind in DecisionKind::ALL {
                let found = eval_set(&mut engine, package, kind, limit)
                    .map_err(|e| self.locate(package, e))?;
                decisions.get_mut(kind).extend(found);
            }
        }
        for kind in DecisionKind::ALL {
            let set = decisions.get_mut(kind);
            set.sort_by(|a, b| {
                (&a.rule, &a.message, &a.policy).cmp(&(&b.rule, &b.message, &b.policy))
            });
            set.dedup();
        }
        Ok(decisions)
    }

    /// Gives an evaluation error without a position the package's file, and for an unknown
    /// function the first line that calls it.
    fn locate(&self, package: &str, err: PolicyError) -> PolicyError {
        let PolicyError::Eval {
            package: p,
            set,
            message,
            location,
        } = err
        else {
            return err;
        };
        if location.file.is_some() {
            return PolicyError::Eval {
                package: p,
                set,
                message,
                location,
            };
        }
        let header = format!("package {package}");
        let files: Vec<&PolicySource> = self
            .sources
            .iter()
            .filter(|s| s.text.lines().any(|l| l.trim() == header))
            .collect();
        let call = message
            .strip_prefix("could not find function ")
            .map(|f| format!("{}(", f.trim()));
        let found = call.as_deref().and_then(|call| {
            files.iter().find_map(|s| {
                s.text.lines().enumerate().find_map(|(i, l)| {
                    l.find(call).map(|c| {
                        Location::file(&s.path)
                            .line(i + 1)
                            .column(l[..c].chars().count() + 1)
                    })
                })
            })
        });
        let location = found
            .or_else(|| files.first().map(|s| Location::file(&s.path)))
            .unwrap_or_default();
        PolicyError::Eval {
            package: p,
            set,
            message,
            location,
        }
    }

    fn check(&self) -> Result<(), PolicyError> {
        let empty = serde_json::json!({});
        let now = DateTime::<Utc>::UNIX_EPOCH;
        match self.evaluate_in_turn(&empty, &empty, now) {
            // A missing field of an empty plan is simply undefined in Rego, so anything that
            // fails here fails for every plan.
            Err(e @ (PolicyError::Eval { .. } | PolicyError::Syntax { .. })) => Err(e),
            _ => Ok(()),
        }
    }
}

/// regorus's memory limit is one process-wide ceiling, checked while parsing policies as well
/// as while evaluating them; so loading and evaluating take turns (they take milliseconds),
/// and one evaluation's ceiling never applies to another's work.
static REGO_TURN: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn turn() -> std::sync::MutexGuard<'static, ()> {
    // A panic elsewhere while holding the turn leaves nothing inconsistent behind.
    REGO_TURN
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Holds the process to [`crate::limits::MAX_POLICY_MEMORY`] more heap than it had when an
/// evaluation began, until dropped. Set only while holding the [`turn`].
struct MemoryBound;

impl MemoryBound {
    fn set() -> MemoryBound {
        let (live, _) = regorus_mimalloc::allocation_stats_snapshot();
        let ceiling = live
            .allocated
            .saturating_add(crate::limits::MAX_POLICY_MEMORY);
        regorus::set_global_memory_limit(Some(ceiling));
        MemoryBound
    }
}

impl Drop for MemoryBound {
    fn drop(&mut self) {
        regorus::set_global_memory_limit(None);
    }
}

/// regorus's execution timer at `limit`, looked at every thousand steps.
fn timer(limit: std::time::Duration) -> regorus::utils::limits::ExecutionTimerConfig {
    regorus::utils::limits::ExecutionTimerConfig {
        limit,
        check_interval: std::num::NonZeroU32::MIN.saturating_add(999),
    }
}

/// How long one query of the gates may run on `plan`: [`crate::limits::MAX_POLICY_TIME`], and
/// [`crate::limits::POLICY_TIME_PER_PLAN_VALUE`] more for each value the plan holds. A gate that
/// reads the plan once takes time in proportion to it, so a large valid plan is never refused
/// for its size, while a policy that loops or explodes still ends, in a time that grows only
/// with its input.
pub fn time_limit(plan: &Value) -> std::time::Duration {
    let values = u32::try_from(count_values(plan)).unwrap_or(u32::MAX);
    crate::limits::MAX_POLICY_TIME
        .saturating_add(crate::limits::POLICY_TIME_PER_PLAN_VALUE.saturating_mul(values))
}

/// The values in `v`: itself, and every element and member within, at any depth.
fn count_values(v: &Value) -> u64 {
    let mut count = 0u64;
    let mut stack = vec![v];
    while let Some(v) = stack.pop() {
        count += 1;
        match v {
            Value::Array(items) => stack.extend(items),
            Value::Object(members) => stack.extend(members.values()),
            _ => {}
        }
    }
    count
}

/// Says which of regorus's limits an evaluation ran into, in the user's terms (`time` is the
/// time limit it had); `None` for any other error.
fn limit_message(err: &anyhow::Error, time: std::time::Duration) -> Option<String> {
    let limit = err
        .chain()
        .find_map(|e| e.downcast_ref::<regorus::LimitError>())?;
    Some(match limit {
        regorus::LimitError::MemoryLimitExceeded { .. } => format!(
            "the policy took more than {} MiB of memory, the limit for one evaluation of the gates",
            crate::limits::MAX_POLICY_MEMORY >> 20
        ),
        regorus::LimitError::TimeLimitExceeded { .. } => format!(
            "the policy ran longer than {} s, the limit for one evaluation of the gates on this plan",
            crate::limits::show(time.as_secs_f64())
        ),
        other => format!("{other}"),
    })
}

/// One `deny`/`warn`/`approval` set of one package, as decisions.
fn eval_set(
    engine: &mut regorus::Engine,
    package: &str,
    kind: DecisionKind,
    time: std::time::Duration,
) -> Result<Vec<Decision>, PolicyError> {
    let set = kind.as_str();
    // A query on a rule the package does not define is undefined (no result), not an error.
    let query = format!("data.{package}.{set}");
    let results = engine.eval_query(query, false).map_err(|e| {
        if let Some(message) = limit_message(&e, time) {
            return PolicyError::Eval {
                package: package.to_string(),
                set,
                message,
                location: Location::default(),
            };
        }
        let text = format!("{e:#}");
        let location = parse_position(&text)
            .map(|p| Location::file(p.file).line(p.line).column(p.column))
            .unwrap_or_default();
        let message = match parse_position(&text) {
            Some(p) => p.message,
            None => text.trim().to_string(),
        };
        PolicyError::Eval {
            package: package.to_string(),
            set,
            message,
            location,
        }
    })?;
    let mut out = Vec::new();
    for result in results.result {
        for expr in result.expressions {
            if expr.value == regorus::Value::Undefined {
                continue;
            }
            let value = serde_json::to_value(&expr.value).map_err(|e| PolicyError::Eval {
                package: package.to_string(),
                set,
                message: e.to_string(),
                location: Location::default(),
            })?;
            let items = match value {
                Value::Array(items) => items,
                Value::Null => Vec::new(),
                other => {
                    return Err(PolicyError::BadDecision {
                        package: package.to_string(),
                        set,
                        value: other.to_string(),
                        reason: format!("`{set}` must be a set (`{set} contains d if {{ … }}`)"),
                    });
                }
            };
            for item in items {
                out.push(decision(package, set, item)?);
            }
        }
    }
    Ok(out)
}

fn decision(package: &str, set: &'static str, item: Value) -> Result<Decision, PolicyError> {
    let bad = |value: &Value, reason: &str| PolicyError::BadDecision {
        package: package.to_string(),
        set,
        value: value.to_string(),
        reason: reason.to_string(),
    };
    let Value::Object(map) = &item else {
        return Err(bad(&item, "it is not an object"));
    };
    for key in ["rule", "message", "fix"] {
        if !map.get(key).is_some_and(Value::is_string) {
            return Err(bad(&item, &format!("`{key}` must be a string")));
        }
    }
    for key in ["amount", "limit", "excess"] {
        if map.get(key).is_some_and(|v| !v.is_number() && !v.is_null()) {
            return Err(bad(&item, &format!("`{key}` must be a number")));
        }
    }
    let mut d: Decision =
        serde_json::from_value(item.clone()).map_err(|e| bad(&item, &e.to_string()))?;
    d.policy = package.to_string();
    Ok(d)
}

/// Fills the keys policies may rely on: `now` (RFC 3339, UTC) and `max_quote_age_hours`.
pub fn prepare_data(data: Value, now: DateTime<Utc>) -> Result<Value, PolicyError> {
    let mut map = match data {
        Value::Object(map) => map,
        Value::Null => Map::new(),
        other => {
            return Err(PolicyError::BadData(format!(
                "expected an object (the budget section), got {other}"
            )));
        }
    };
    if map.contains_key("gpucap") {
        return Err(PolicyError::BadData(
            "the key `gpucap` is reserved for the policies themselves".into(),
        ));
    }
    // `null` means "not set", as an absent key does; a Rego comparison with null would not.
    map.retain(|_, v| !v.is_null());
    check_data_types(&map)?;
    match map.get("now") {
        None | Some(Value::Null) => {
            let now = now.to_rfc3339_opts(SecondsFormat::Secs, true);
            map.insert("now".into(), Value::String(now));
        }
        Some(Value::String(s)) if DateTime::parse_from_rfc3339(s).is_ok() => {}
        Some(other) => {
            return Err(PolicyError::BadData(format!(
                "`now` must be an RFC 3339 time such as `2027-01-03T06:00:00Z`, got {other}"
            )));
        }
    }
    match map.get("max_quote_age_hours") {
        None | Some(Value::Null) => {
            map.insert(
                "max_quote_age_hours".into(),
                Value::from(DEFAULT_MAX_QUOTE_AGE_HOURS),
            );
        }
        Some(v) if v.as_f64().is_some_and(|h| h >= 0.0) => {}
        Some(other) => {
            return Err(PolicyError::BadData(format!(
                "`max_quote_age_hours` must be a number of hours, got {other}"
            )));
        }
    }
    Ok(Value::Object(map))
}

/// Rego compares values of different types by type order (`5 > "9"` is false), so a limit of
/// the wrong type would let every plan through. The known keys are checked here; other keys
/// (for user policies) pass as they are.
fn check_data_types(map: &Map<String, Value>) -> Result<(), PolicyError> {
    let bad = |key: &str, want: &str, got: &Value| {
        PolicyError::BadData(format!("`{key}` must be {want}, got {got}"))
    };
    for key in ["total", "monthly", "approval_above"] {
        match map.get(key) {
            Some(v) if !v.is_number() => return Err(bad(key, "a number (USD)", v)),
            _ => {}
        }
    }
    if let Some(teams) = map.get("teams") {
        let Value::Object(teams) = teams else {
            return Err(bad("teams", "an object of team budgets", teams));
        };
        if let Some((team, v)) = teams.iter().find(|(_, v)| !v.is_number()) {
            return Err(bad(&format!("teams.{team}"), "a number (USD)", v));
        }
    }
    for key in ["allowed_clouds", "allowed_regions"] {
        match map.get(key) {
            Some(Value::Array(items)) if items.iter().all(Value::is_string) => {}
            Some(v) => return Err(bad(key, "a list of strings", v)),
            None => {}
        }
    }
    Ok(())
}

/// The shape of the plan fields the built-in gates read. A gate must fail closed: a cost that
/// is a string, say, would compare as "not over the limit" and let the plan through.
pub fn check_plan(plan: &Value) -> Result<(), PolicyError> {
    let bad = |path: String, want: &str| PolicyError::BadPlan(format!("`{path}` must be {want}"));
    if let Some(schema) = plan.get("schema")
        && schema != "gpucap.plan/v1"
    {
        return Err(PolicyError::BadPlan(format!(
            "`schema` is {schema}; expected \"gpucap.plan/v1\""
        )));
    }
    let number = |v: Option<&Value>| v.is_none_or(|v| v.is_number());
    let cost = plan.get("cost");
    for key in ["expected_total", "irreversible"] {
        if !number(cost.and_then(|c| c.get(key))) {
            return Err(bad(format!("cost.{key}"), "a number"));
        }
    }
    for list in ["by_month", "by_team"] {
        let items = cost.and_then(|c| c.get(list));
        for (i, item) in items
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .enumerate()
        {
            if !number(item.get("expected")) {
                return Err(bad(format!("cost.{list}[{i}].expected"), "a number"));
            }
        }
    }
    let actions = plan.get("actions").and_then(Value::as_array);
    for (i, action) in actions.into_iter().flatten().enumerate() {
        if !number(action.get("cost")) {
            return Err(bad(format!("actions[{i}].cost"), "a number"));
        }
        if !number(action.get("gpus")) {
            return Err(bad(format!("actions[{i}].gpus"), "a number"));
        }
    }
    Ok(())
}

/// The config's `[budget]` section as the policies' data document: absent keys stay absent,
/// `max_quote_age` becomes `max_quote_age_hours`, and the policy directories are left out.
pub fn budget_data(budget: &Budget) -> Value {
    // JSON has no NaN or infinity: `Value::from(f64::NAN)` is `null`, which the gates read as
    // "no limit". A non-finite amount becomes its text instead, which [`check_data_types`]
    // refuses, so the gates fail closed even if a caller skipped the config's validation.
    let amount = |v: f64| {
        if v.is_finite() {
            Value::from(v)
        } else {
            Value::String(v.to_string())
        }
    };
    let mut map = Map::new();
    if let Some(total) = budget.total {
        map.insert("total".into(), amount(total));
    }
    if let Some(monthly) = budget.monthly {
        map.insert("monthly".into(), amount(monthly));
    }
    if !budget.teams.is_empty() {
        let teams = budget
            .teams
            .iter()
            .map(|(team, limit)| (team.clone(), amount(*limit)))
            .collect();
        map.insert("teams".into(), Value::Object(teams));
    }
    if let Some(above) = budget.approval_above {
        map.insert("approval_above".into(), amount(above));
    }
    if !budget.allowed_clouds.is_empty() {
        let clouds = budget
            .allowed_clouds
            .iter()
            .map(|c| Value::from(c.as_str()))
            .collect();
        map.insert("allowed_clouds".into(), Value::Array(clouds));
    }
    if !budget.allowed_regions.is_empty() {
        map.insert(
            "allowed_regions".into(),
            Value::from(budget.allowed_regions.clone()),
        );
    }
    if let Some(age) = budget.max_quote_age {
        map.insert("max_quote_age_hours".into(), Value::from(age.as_hours()));
    }
    Value::Object(map)
}

/// Every `*.rego` under `dir`, recursively, sorted by path.
fn read_dir(dir: &Path) -> Result<Vec<PolicySource>, PolicyError> {
    if !dir.is_dir() {
        return Err(PolicyError::MissingDir(dir.to_path_buf()));
    }
    let mut paths = Vec::new();
    collect(dir, "rego", &mut paths)?;
    if paths.is_empty() {
        return Err(PolicyError::EmptyDir(dir.to_path_buf()));
    }
    paths
        .into_iter()
        .map(|path| {
            let text = std::fs::read_to_string(&path).map_err(|source| PolicyError::Read {
                path: path.clone(),
                source,
            })?;
            Ok(PolicySource {
                path,
                text,
                builtin: false,
            })
        })
        .collect()
}

/// Files with extension `ext` under `dir`, recursively, sorted.
pub(crate) fn collect(dir: &Path, ext: &str, out: &mut Vec<PathBuf>) -> Result<(), PolicyError> {
    let read = |source| PolicyError::Read {
        path: dir.to_path_buf(),
        source,
    };
    let mut entries = std::fs::read_dir(dir)
        .map_err(read)?
        .map(|e| e.map(|e| e.path()))
        .collect::<Result<Vec<_>, _>>()
        .map_err(read)?;
    entries.sort();
    for path in entries {
        if path.is_dir() {
            collect(&path, ext, out)?;
        } else if path.extension().is_some_and(|e| e == ext) {
            out.push(path);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::cases;
    use serde_json::json;

    #[test]
    fn the_time_limit_grows_with_the_plan() {
        use crate::limits::{MAX_POLICY_TIME, POLICY_TIME_PER_PLAN_VALUE};
        assert_eq!(count_values(&json!({})), 1);
        let plan = json!({"actions": [{"id": "a", "campaigns": ["x", "y"]}], "cost": 1.0});
        // The plan, `actions`, the action, `id`, `campaigns`, its two names, `cost`.
        assert_eq!(count_values(&plan), 8);
        assert_eq!(
            time_limit(&plan),
            MAX_POLICY_TIME + POLICY_TIME_PER_PLAN_VALUE * 8
        );
        let names: Vec<String> = (0..100_000).map(|i| format!("c{i}")).collect();
        let large = json!({"campaigns": names});
        assert_eq!(
            time_limit(&large),
            MAX_POLICY_TIME + POLICY_TIME_PER_PLAN_VALUE * 100_002
        );
    }

    fn user(path: &str, text: &str) -> PolicySource {
        PolicySource {
            path: PathBuf::from(path),
            text: text.to_string(),
            builtin: false,
        }
    }

    fn now() -> DateTime<Utc> {
        "2027-01-03T06:00:00Z".parse().expect("a time")
    }

    /// Once the plan has a cost, builds a string of 1.1 × 10⁹ bytes, ten times longer at each
    /// step (`concat` copies fast): a gigabyte well within the time the timer allows.
    fn greedy() -> String {
        let mut steps = String::from("\ts0 := \"xxxxxxxxxx\"\n");
        for i in 1..=7 {
            let parts = vec![format!("s{}", i - 1); 10].join(", ");
            steps += &format!("\ts{i} := concat(\"\", [{parts}])\n");
        }
        let parts = ["s7"; 11].join(", ");
        format!(
            "package gpucap.policies.greedy\n\nimport rego.v1\n\ndeny contains d if {{\n\
             \tinput.cost.expected_total > 0\n{steps}\tcount(concat(\"\", [{parts}])) > 0\n\
             \td := {{\"rule\": \"greedy\", \"message\": \"m\", \"fix\": \"f\"}}\n}}\n"
        )
    }

    #[test]
    fn a_policy_that_takes_gigabytes_is_an_error_naming_it_not_an_out_of_memory() {
        let mut sources = builtin::policies();
        sources.push(user("team/greedy.rego", &greedy()));
        let engine = PolicyEngine::from_sources(sources).expect("loads: the empty plan costs 0");
        let plan = json!({"cost": {"expected_total": 1000.0}});
        // No assertion on the time it took: a test must pass on a loaded machine (the memory
        // bound, not the clock, is what this checks).
        let err = engine
            .evaluate(&plan, &json!({}), now())
            .expect_err("the evaluation is stopped");
        let shown = InputErrorText::of(err);
        assert!(shown.starts_with("team/greedy.rego: "), "{shown}");
        assert!(
            shown.contains("gpucap.policies.greedy.deny")
                && shown.contains("more than 1024 MiB of memory"),
            "{shown}"
        );
        // The bound is lifted afterwards: the same engine still evaluates a plan it can afford.
        let cheap = json!({"cost": {"expected_total": 0.0}});
        engine
            .evaluate(&cheap, &json!({}), now())
            .expect("evaluates");
    }

    #[test]
    fn a_range_too_long_to_hold_is_an_error_naming_the_line_not_an_abort() {
        let text = "package gpucap.policies.greedy\n\nimport rego.v1\n\n\
            deny contains d if {\n\tinput.cost.expected_total > 0\n\t\
            count({x | some x in numbers.range(1, 1000000000000000)}) > 0\n\t\
            d := {\"rule\": \"greedy\", \"message\": \"m\", \"fix\": \"f\"}\n}\n";
        let mut sources = builtin::policies();
        sources.push(user("team/greedy.rego", text));
        let engine = PolicyEngine::from_sources(sources).expect("loads");
        let plan = json!({"cost": {"expected_total": 1000.0}});
        let err = engine
            .evaluate(&plan, &json!({}), now())
            .expect_err("refused");
        let shown = InputErrorText::of(err);
        assert!(shown.starts_with("team/greedy.rego:7:"), "{shown}");
        assert!(
            shown.contains("a range of 1000000000000000 numbers is more than a gate may hold"),
            "{shown}"
        );
    }

    /// An error as the user sees it.
    struct InputErrorText;

    impl InputErrorText {
        fn of(err: PolicyError) -> String {
            crate::diagnostic::InputError::from(err).to_string()
        }
    }

    #[test]
    fn builtin_cases_pass() {
        let engine = PolicyEngine::load(&[]).expect("built-ins load");
        let all = crate::policy::cases::CaseFiles::builtin()
            .cases()
            .expect("built-in cases parse");
        assert!(all.len() >= 30, "only {} cases", all.len());
        for case in &all {
            let outcome = cases::run(&engine, case, now()).expect("evaluates");
            assert!(outcome.passed(), "{}: {:?}", case.name, outcome.failures);
        }
    }

    #[test]
    fn every_builtin_gate_has_cases() {
        let engine = PolicyEngine::load(&[]).expect("built-ins load");
        let names: Vec<String> = crate::policy::cases::CaseFiles::builtin()
            .cases()
            .expect("parse")
            .into_iter()
            .map(|c| c.name)
            .collect();
        for package in engine.packages() {
            let gate = package.rsplit('.').next().expect("a name");
            assert!(
                names.iter().any(|n| n.starts_with(&format!("{gate}/"))),
                "no cases for {gate}"
            );
        }
        assert_eq!(engine.packages().len(), 8, "{:?}", engine.packages());
    }

    #[test]
    fn money_is_formatted_with_thousands_separators() {
        let engine = PolicyEngine::load(&[]).expect("built-ins load");
        for (amount, limit, shown) in [
            (
                1000.4,
                999.0,
                "expected cost $1,000 exceeds the total budget $999 by $1",
            ),
            (
                12.0,
                0.0,
                "expected cost $12 exceeds the total budget $0 by $12",
            ),
            (
                123456789.0,
                100000.0,
                "expected cost $123,456,789 exceeds the total budget $100,000 by $123,356,789",
            ),
        ] {
            let plan = json!({"cost": {"expected_total": amount}});
            let d = engine
                .evaluate(&plan, &json!({"total": limit}), now())
                .expect("evaluates");
            assert_eq!(d.deny.len(), 1);
            assert_eq!(d.deny[0].message, shown);
            assert_eq!(d.deny[0].policy, "gpucap.policies.budget_total");
        }
    }

    #[test]
    fn decisions_are_sorted_and_carry_amounts() {
        let engine = PolicyEngine::load(&[]).expect("built-ins load");
        let plan = json!({"cost": {"expected_total": 10.0, "by_month": [
            {"month": "2027-02", "expected": 9.0}, {"month": "2027-01", "expected": 8.0}]}});
        let d = engine
            .evaluate(&plan, &json!({"total": 5, "monthly": 5}), now())
            .expect("evaluates");
        let rules: Vec<&str> = d.deny.iter().map(|d| d.rule.as_str()).collect();
        assert_eq!(rules, ["budget.monthly", "budget.monthly", "budget.total"]);
        assert!(d.deny[0].message.starts_with("2027-01"));
        assert_eq!(d.deny[2].excess, Some(5.0));
        assert_eq!(d.deny[0].details.get("month"), Some(&json!("2027-01")));
    }

    #[test]
    fn syntax_errors_name_file_line_and_message() {
        let bad = "package gpucap.policies.mine\n\ndeny contains d if {\n  d := {\"rule\": \n}\n";
        let err = PolicyEngine::from_sources(vec![user("team/mine.rego", bad)])
            .expect_err("does not parse");
        let PolicyError::Syntax {
            file,
            line,
            message,
            ..
        } = &err
        else {
            panic!("not a syntax error: {err:?}");
        };
        assert_eq!(file, Path::new("team/mine.rego"));
        assert!((4..=5).contains(line), "line {line}");
        assert!(!message.is_empty());
        assert!(err.to_string().starts_with("team/mine.rego:"), "{err}");
    }

    #[test]
    fn unknown_functions_are_caught_at_load() {
        let bad =
            "package gpucap.policies.mine\n\ndeny contains d if {\n  d := no_such_fn(input)\n}\n";
        let err =
            PolicyEngine::from_sources(vec![user("mine.rego", bad)]).expect_err("unknown function");
        assert!(err.to_string().starts_with("mine.rego:4:"), "{err}");
        assert!(err.to_string().contains("no_such_fn"), "{err}");
    }

    #[test]
    fn user_packages_must_be_gates() {
        let err = PolicyEngine::from_sources(vec![user("x.rego", "package acme.budget\n")])
            .expect_err("outside gpucap.policies");
        assert!(matches!(err, PolicyError::Package { .. }), "{err:?}");
        assert!(
            err.hint()
                .expect("a hint")
                .contains("gpucap.policies.budget")
        );
    }

    #[test]
    fn bare_string_decisions_are_rejected() {
        let text = "package gpucap.policies.mine\n\ndeny contains \"no\" if { input.x }\n";
        let engine = PolicyEngine::from_sources(vec![user("m.rego", text)]).expect("loads");
        let err = engine
            .evaluate(&json!({"x": true}), &json!({}), now())
            .expect_err("a string is not a decision");
        assert!(matches!(err, PolicyError::BadDecision { .. }), "{err:?}");
    }

    #[test]
    fn directories_must_exist_and_hold_policies() {
        let missing = PathBuf::from("/nonexistent/gpucap-policies");
        assert!(matches!(
            PolicyEngine::load(std::slice::from_ref(&missing)),
            Err(PolicyError::MissingDir(_))
        ));
        let empty = tempfile::tempdir().expect("a temp dir");
        assert!(matches!(
            PolicyEngine::load(&[empty.path().to_path_buf()]),
            Err(PolicyError::EmptyDir(_))
        ));
    }

    #[test]
    fn data_gets_now_and_the_default_quote_age() {
        let data = prepare_data(json!({"total": 1}), now()).expect("valid");
        assert_eq!(data["now"], json!("2027-01-03T06:00:00Z"));
        assert_eq!(data["max_quote_age_hours"], json!(24));
        let kept = prepare_data(
            json!({"now": "2026-01-01T00:00:00Z", "max_quote_age_hours": 6}),
            now(),
        )
        .expect("valid");
        assert_eq!(kept["now"], json!("2026-01-01T00:00:00Z"));
        assert_eq!(kept["max_quote_age_hours"], json!(6));
        assert!(prepare_data(json!([1]), now()).is_err());
        assert!(prepare_data(json!({"now": "yesterday"}), now()).is_err());
        assert!(prepare_data(json!({"total": "9000000"}), now()).is_err());
        assert!(prepare_data(json!({"teams": {"research": "1"}}), now()).is_err());
        assert!(prepare_data(json!({"allowed_clouds": "aws"}), now()).is_err());
        let nulls = prepare_data(json!({"total": null}), now()).expect("null is absent");
        assert!(nulls.get("total").is_none());
    }

    #[test]
    fn malformed_plans_fail_closed() {
        let engine = PolicyEngine::load(&[]).expect("built-ins load");
        let err = engine
            .evaluate(
                &json!({"cost": {"expected_total": "5"}}),
                &json!({"total": 1}),
                now(),
            )
            .expect_err("a string cost");
        assert_eq!(
            err.to_string(),
            "plan: `cost.expected_total` must be a number"
        );
        let err = engine
            .evaluate(
                &json!({"cost": {"by_month": [{"month": "2027-01", "expected": true}]}}),
                &json!({}),
                now(),
            )
            .expect_err("a boolean month");
        assert!(
            err.to_string().contains("cost.by_month[0].expected"),
            "{err}"
        );
        assert!(
            engine
                .evaluate(&json!({"schema": "gpucap.plan/v2"}), &json!({}), now())
                .is_err()
        );
    }

    #[test]
    fn budget_section_becomes_data() {
        let config = crate::config::Config::parse(
            "[budget]\ntotal = 100.0\nteams = { research = 50.0 }\nallowed_clouds = [\"aws\"]\nmax_quote_age = \"2d\"\n",
            Path::new("gpucap.toml"),
        )
        .expect("valid config");
        assert_eq!(
            budget_data(&config.budget),
            json!({"total": 100.0, "teams": {"research": 50.0}, "allowed_clouds": ["aws"], "max_quote_age_hours": 48})
        );
    }

    #[test]
    fn a_non_finite_budget_fails_closed_even_unvalidated() {
        let engine = PolicyEngine::load(&[]).expect("built-in gates load");
        for total in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
            let budget = Budget {
                total: Some(total),
                ..Budget::default()
            };
            let plan = json!({"schema": "gpucap.plan/v1", "cost": {"expected_total": 7.0e6}});
            let err = engine
                .evaluate(&plan, &budget_data(&budget), now())
                .expect_err("a gate that cannot compare must not pass the plan");
            assert!(
                err.to_string().contains("`total` must be a number"),
                "{err}"
            );
        }
    }
}
