//! Budget gates: Rego policies that every plan passes before it is applied.
//!
//! The policies read the plan (`gpucap.plan/v1`) as `input` and the config's `[budget]` section
//! (plus `now`) as `data`, and yield three sets of [`Decision`]s: `deny` (the plan must not be
//! applied), `warn` (worth a look) and `approval` (someone must sign off first). They are
//! evaluated in-process with [regorus](https://github.com/microsoft/regorus), so gpucap needs no
//! OPA binary. The policies use only builtins OPA also has, so `opa eval` should run them too
//! (this is not tested here).
//!
//! The built-in gates live in `policies/*.rego` and are compiled into the binary; users add
//! packages under `gpucap.policies.*` from their own directories. Test cases (plan + data →
//! expected decisions) sit beside the policies and run with `gpucap policy test` ([`cases`]).
//!
//! Apart from reading policy and case files, everything here is pure: the caller passes `now`.

pub mod builtin;
pub mod cases;
mod engine;
mod error;
mod ranges;
mod recursion;

pub use engine::{PolicyEngine, PolicySource, budget_data, check_plan, prepare_data};
pub use error::PolicyError;

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The package every gate lives under; the engine collects `deny`, `warn` and `approval` from
/// each package below it.
pub const POLICY_ROOT: &str = "gpucap.policies";

/// The oldest acceptable price quote when the config sets none (`budget.max_quote_age`): a day,
/// because capacity-block and spot prices are re-published about daily.
pub const DEFAULT_MAX_QUOTE_AGE_HOURS: i64 = 24;

/// One outcome of one rule: which rule, what it found, by how much, and what to change.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Decision {
    /// The rule's id, e.g. `budget.total`.
    pub rule: String,
    /// What the rule found, for people.
    pub message: String,
    /// The amount checked (dollars, hours), where it applies.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub amount: Option<f64>,
    /// The limit it was checked against.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<f64>,
    /// How far over the limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub excess: Option<f64>,
    /// What to change to clear it.
    pub fix: String,
    /// The package that produced it (filled by the engine), e.g. `gpucap.policies.budget_total`.
    #[serde(default)]
    pub policy: String,
    /// Anything else the rule reports (month, team, action, approvers, …).
    #[serde(flatten)]
    pub details: BTreeMap<String, serde_json::Value>,
}

/// Everything the gates decided about one plan, each set sorted by rule id then message.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Decisions {
    pub deny: Vec<Decision>,
    pub warn: Vec<Decision>,
    pub approval: Vec<Decision>,
}

impl Decisions {
    /// Whether any gate denied the plan.
    pub fn is_denied(&self) -> bool {
        !self.deny.is_empty()
    }

    /// Whether the plan needs a sign-off before apply.
    pub fn needs_approval(&self) -> bool {
        !self.approval.is_empty()
    }

    /// What a person reads on stderr: each decision with its fix (denials first), then the
    /// verdict, e.g. `plan denied: 1 deny, 0 approval, 2 warn`.
    pub fn report(&self) -> String {
        let mut out = String::new();
        for (label, set) in [
            ("deny", &self.deny),
            ("approval", &self.approval),
            ("warn", &self.warn),
        ] {
            for d in set {
                out.push_str(&format!(
                    "{label}: [{}] {}\n  fix: {}\n",
                    d.rule, d.message, d.fix
                ));
            }
        }
        let verdict = if self.is_denied() {
            "plan denied"
        } else if self.needs_approval() {
            "plan allowed after approval"
        } else {
            "plan allowed"
        };
        out.push_str(&format!(
            "{verdict}: {} deny, {} approval, {} warn\n",
            self.deny.len(),
            self.approval.len(),
            self.warn.len()
        ));
        out
    }

    /// The decisions of one kind.
    pub fn get(&self, kind: DecisionKind) -> &[Decision] {
        match kind {
            DecisionKind::Deny => &self.deny,
            DecisionKind::Warn => &self.warn,
            DecisionKind::Approval => &self.approval,
        }
    }

    fn get_mut(&mut self, kind: DecisionKind) -> &mut Vec<Decision> {
        match kind {
            DecisionKind::Deny => &mut self.deny,
            DecisionKind::Warn => &mut self.warn,
            DecisionKind::Approval => &mut self.approval,
        }
    }
}

/// The three sets a gate may define.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum DecisionKind {
    Deny,
    Warn,
    Approval,
}

impl DecisionKind {
    pub const ALL: [DecisionKind; 3] = [
        DecisionKind::Deny,
        DecisionKind::Warn,
        DecisionKind::Approval,
    ];

    /// The Rego rule name of the set.
    pub fn as_str(self) -> &'static str {
        match self {
            DecisionKind::Deny => "deny",
            DecisionKind::Warn => "warn",
            DecisionKind::Approval => "approval",
        }
    }
}
