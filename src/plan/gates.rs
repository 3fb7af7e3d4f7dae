//! The budget gates on a plan: the built-in policies plus the project's own, evaluated on the plan
//! with the config's `[budget]` as data. `gpucap plan` records the decisions in the plan, and
//! `gpucap apply` must reach the same ones from the same policies, so both call this.
//!
//! Loading the policies reads their files; the evaluation itself is pure (the caller passes
//! `now`). The policy files' digests come from the text the engine compiled ([`policy_inputs`]),
//! so a plan's fingerprint names exactly the policies that judged it.

use std::path::{Path, PathBuf};

use chrono::{DateTime, Utc};

use super::fingerprint::input_name;
use super::{InputDigest, Plan};
use crate::config::Budget;
use crate::policy::{self, Decisions, PolicyEngine, PolicyError};

/// Loads the built-in gates and every `*.rego` under `policy_dirs` (already resolved against
/// the config's directory) and evaluates them on `plan`.
pub fn gates(
    budget: &Budget,
    policy_dirs: &[PathBuf],
    plan: &Plan,
    now: DateTime<Utc>,
) -> Result<Decisions, PolicyError> {
    let engine = PolicyEngine::load(policy_dirs)?;
    evaluate(&engine, budget, plan, now)
}

/// Evaluates loaded gates on `plan`, with `budget` as their data and quote ages measured at
/// `now`.
pub fn evaluate(
    engine: &PolicyEngine,
    budget: &Budget,
    plan: &Plan,
    now: DateTime<Utc>,
) -> Result<Decisions, PolicyError> {
    // A plan is plain data with string keys: serialising it cannot fail, but if it ever did
    // the gates would have nothing to read.
    let input = serde_json::to_value(plan).map_err(|e| PolicyError::BadPlan(e.to_string()))?;
    engine.evaluate(&input, &policy::budget_data(budget), now)
}

/// Digests (kind `policy`) of the user policy files `engine` loaded, from the very text it
/// compiled, named relative to `root` as every input of a plan is. Built-in policies are part of
/// the gpucap version, which the fingerprint records on its own.
pub fn policy_inputs(engine: &PolicyEngine, root: &Path) -> Vec<InputDigest> {
    engine
        .sources()
        .iter()
        .filter(|s| !s.builtin)
        .map(|s| InputDigest::of("policy", &input_name(root, &s.path), s.text.as_bytes()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_user_policies_judge_the_plan_with_the_built_in_ones() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let policies = dir.path().join("policies/acme");
        std::fs::create_dir_all(&policies).expect("created");
        let text = "package gpucap.policies.acme\n\nimport rego.v1\n\nwarn contains d if {\n\tcount(input.actions) == 0\n\td := {\"rule\": \"acme.idle\", \"message\": \"nothing to do\", \"fix\": \"none\"}\n}\n";
        std::fs::write(policies.join("idle.rego"), text).expect("written");
        let engine = PolicyEngine::load(&[dir.path().join("policies")]).expect("loads");

        let plan = super::super::tests::empty_plan();
        let budget = Budget::default();
        let decisions = evaluate(&engine, &budget, &plan, Utc::now()).expect("evaluates");
        assert!(!decisions.is_denied(), "{decisions:?}");
        assert!(
            decisions.warn.iter().any(|d| d.rule == "acme.idle"),
            "{decisions:?}"
        );
        assert_eq!(
            gates(&budget, &[dir.path().join("policies")], &plan, Utc::now()).expect("evaluates"),
            decisions
        );
    }

    #[test]
    fn user_policies_are_digested_from_the_text_loaded_and_named_from_the_root() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let policies = dir.path().join("policies/acme");
        std::fs::create_dir_all(&policies).expect("created");
        let text = "package gpucap.policies.acme\n\nimport rego.v1\n\ndeny contains d if {\n\tinput.cost.expected_total > 1e12\n\td := {\"rule\": \"acme.huge\", \"message\": \"huge\", \"fix\": \"less\"}\n}\n";
        std::fs::write(policies.join("huge.rego"), text).expect("written");
        let engine = PolicyEngine::load(&[dir.path().join("policies")]).expect("loads");
        assert_eq!(
            policy_inputs(&engine, dir.path()),
            [InputDigest::of(
                "policy",
                "policies/acme/huge.rego",
                text.as_bytes()
            )],
            "the built-in policies are not inputs of their own"
        );
    }
}
