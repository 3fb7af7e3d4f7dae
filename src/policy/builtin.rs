//! The built-in gates and their test cases, compiled into the binary from `policies/`.
//!
//! The lists are explicit (no build script); a unit test checks they match the files on disk,
//! so a new policy or case cannot be forgotten here.

use std::path::PathBuf;

use super::PolicySource;

/// Where the built-in files appear in messages (they are not read from disk at run time).
pub const ROOT: &str = "<builtin>/policies";

macro_rules! embed {
    ($($path:literal),* $(,)?) => {
        &[$(($path, include_str!(concat!("../../policies/", $path)))),*]
    };
}

/// `policies/*.rego`: the gates and the helpers they share.
pub const POLICIES: &[(&str, &str)] = embed![
    "approval_irreversible.rego",
    "budget_monthly.rego",
    "budget_team.rego",
    "budget_total.rego",
    "lib.rego",
    "quota_increase.rego",
    "quote_age.rego",
    "residency.rego",
    "spot_critical.rego",
];

/// `policies/tests/**/*.json`: the cases and the plans they extend.
pub const CASES: &[(&str, &str)] = embed![
    "tests/_plan.json",
    "tests/approval_irreversible/above.json",
    "tests/approval_irreversible/above_without_teams.json",
    "tests/approval_irreversible/absent.json",
    "tests/approval_irreversible/at_threshold.json",
    "tests/budget_monthly/absent.json",
    "tests/budget_monthly/at_limit.json",
    "tests/budget_monthly/over.json",
    "tests/budget_monthly/pass.json",
    "tests/budget_team/at_limit.json",
    "tests/budget_team/null_team.json",
    "tests/budget_team/null_team_no_team_budgets.json",
    "tests/budget_team/over.json",
    "tests/budget_team/pass.json",
    "tests/budget_team/team_without_budget.json",
    "tests/budget_total/absent.json",
    "tests/budget_total/at_limit.json",
    "tests/budget_total/just_over.json",
    "tests/budget_total/near.json",
    "tests/budget_total/over.json",
    "tests/budget_total/pass.json",
    "tests/quota_increase/needed.json",
    "tests/quota_increase/none.json",
    "tests/quota_increase/saves.json",
    "tests/quote_age/at_max_age.json",
    "tests/quote_age/contract_prices.json",
    "tests/quote_age/custom_max_age.json",
    "tests/quote_age/fresh_live.json",
    "tests/quote_age/fresh_snapshot.json",
    "tests/quote_age/just_over.json",
    "tests/quote_age/stale_snapshot.json",
    "tests/residency/absent.json",
    "tests/residency/pass.json",
    "tests/residency/region_allowed_cloud_not.json",
    "tests/residency/region_not_allowed.json",
    "tests/residency/release_ignored.json",
    "tests/residency/unknown_cloud.json",
    "tests/spot_critical/critical_interruptible.json",
    "tests/spot_critical/normal_campaign.json",
    "tests/spot_critical/uninterruptible_normal.json",
];

/// The built-in policies as sources for the engine.
pub fn policies() -> Vec<PolicySource> {
    POLICIES
        .iter()
        .map(|(path, text)| PolicySource {
            path: PathBuf::from(ROOT).join(path),
            text: (*text).to_string(),
            builtin: true,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn on_disk(ext: &str) -> Vec<String> {
        // At run time, as cargo sets it for the test: a test binary may be reused from a clone
        // at another path, where the compile-time value would point.
        let root =
            std::env::var_os("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR, set by cargo");
        let dir = Path::new(&root).join("policies");
        let mut out = Vec::new();
        crate::policy::engine::collect(&dir, ext, &mut out).expect("policies/ is readable");
        let mut names: Vec<String> = out
            .iter()
            .map(|p| {
                p.strip_prefix(&dir)
                    .expect("under policies/")
                    .to_string_lossy()
                    .replace('\\', "/")
            })
            .collect();
        names.sort();
        names
    }

    #[test]
    fn every_policy_file_is_embedded() {
        let embedded: Vec<String> = POLICIES.iter().map(|(p, _)| p.to_string()).collect();
        assert_eq!(embedded, on_disk("rego"));
    }

    #[test]
    fn every_case_file_is_embedded() {
        let embedded: Vec<String> = CASES.iter().map(|(p, _)| p.to_string()).collect();
        assert_eq!(embedded, on_disk("json"));
    }
}
