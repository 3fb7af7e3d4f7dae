//! The quickstart plan against the clouds' purchase rules and the account's quotas, as issue
//! #11 asks: no purchase larger than the cloud sells in one piece, no limit that several pools
//! share exceeded by them together, and a quota over every on-demand and spot run.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use assert_cmd::Command;
use gpucap::plan::{ActionKind, Plan};
use gpucap::problem::Problem;
use gpucap_provider::purchase_rules;
use gpucap_provider::{Cloud, PurchaseKind};

const NOW: &str = "2026-12-15T00:00:00Z";

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn quickstart() -> PathBuf {
    root().join("examples/quickstart/gpucap.toml")
}

/// The quickstart planned (offline, on the built-in snapshot), and the problem it emitted.
fn plan(config: &Path, extra: &[&str]) -> (Plan, Problem, String) {
    let dir = tempfile::tempdir().expect("tempdir");
    let problem_path = dir.path().join("problem.json");
    let mut cmd = Command::cargo_bin("gpucap").expect("the gpucap binary");
    cmd.env_remove("RUST_LOG")
        .env("NO_COLOR", "1")
        .env(
            "GPUCAP_CACHE_DIR",
            std::env::temp_dir().join("gpucap-test-no-cache"),
        )
        .arg("--config")
        .arg(config)
        .args(["plan", "--now", NOW, "--format", "json", "--emit-problem"])
        .arg(&problem_path)
        .args(extra);
    let out = cmd.output().expect("run gpucap");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let plan: Plan =
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {stderr}"));
    let problem: Problem =
        serde_json::from_str(&std::fs::read_to_string(&problem_path).expect("problem written"))
            .expect("a gpucap.problem/v3");
    (plan, problem, stderr)
}

#[test]
fn the_quickstart_buys_nothing_larger_than_sold_shares_limits_once_and_checks_quotas() {
    let (plan, problem, stderr) = plan(&quickstart(), &[]);
    // v3: the quickstart's campaigns are placed whole (gangs), with v2's rules and limits.
    assert_eq!(problem.schema, "gpucap.problem/v3");
    assert!(
        plan.quota_increases.iter().all(|q| !q.needed),
        "the quickstart's quotas cover its demand: {:?}\n{stderr}",
        plan.quota_increases
    );

    // No purchase larger than the cloud sells: every piece within the rule's maximum.
    let mut split = 0;
    for a in plan.actions.iter().filter(|a| a.kind.is_term()) {
        let kind = match a.kind {
            ActionKind::PurchaseCapacityBlock => PurchaseKind::CapacityBlock,
            ActionKind::Reserve => PurchaseKind::Reservation,
            _ => PurchaseKind::Commitment,
        };
        let cloud: Cloud = a.cloud.parse().unwrap();
        let sizes = a.piece_sizes();
        assert_eq!(sizes.iter().sum::<u32>(), a.instances, "{}", a.id);
        if let Some(max) =
            purchase_rules::for_offer(cloud, kind, None).and_then(|r| r.max_instances)
        {
            assert!(
                sizes.iter().all(|&s| s <= max),
                "{}: {sizes:?} over {max}",
                a.id
            );
            split += usize::from(sizes.len() > 1);
        }
    }
    println!("{split} purchase(s) bought in pieces");

    // Limits several pools draw on hold once across them, in the plan's scenario: the term
    // capacity held and the runs of every pool together.
    let pools_of = |offers: &BTreeMap<String, u32>| {
        offers
            .keys()
            .filter_map(|o| problem.offers.iter().find(|p| &p.id == o))
            .map(|o| o.pool.as_str())
            .collect::<std::collections::BTreeSet<_>>()
    };
    let shared: Vec<_> = problem
        .shared_limits
        .iter()
        .filter(|l| pools_of(&l.offers).len() > 1)
        .collect();
    // The P-instance quota in us-east-1 is one quota over every pool that buys there (the
    // quickstart's is large enough that the problem leaves it out as unreachable).
    let p_quota = plan
        .quotas
        .iter()
        .find(|q| q.quota == "aws/us-east-1/L-417A185B")
        .expect("the us-east-1 P quota is checked");
    assert!(pools_of(&p_quota.offers).len() > 1, "{p_quota:?}");
    assert!(shared.iter().any(|l| l.id.starts_with("cap:aws/")));
    // By the actions' exact times, in quarter hours: a plan laid on half hours may have two
    // back-to-back actions in one hour.
    let start: chrono::DateTime<chrono::Utc> = plan.horizon.start.parse().expect("a time");
    let quarter = |t: &str| {
        let t: chrono::DateTime<chrono::Utc> = t.parse().expect("a time");
        ((t - start).num_minutes().max(0) / 15) as usize
    };
    let quarters = plan.horizon.hours as usize * 4;
    for limit in &problem.shared_limits {
        let mut used = vec![0u64; quarters];
        for a in &plan.actions {
            let Some(&w) = limit.offers.get(&a.offer) else {
                continue;
            };
            if a.kind == ActionKind::Release {
                continue;
            }
            let to = quarter(&a.end).min(quarters);
            for u in used.iter_mut().take(to).skip(quarter(&a.start)) {
                *u += u64::from(w) * u64::from(a.instances);
            }
        }
        let (at, most) = used
            .iter()
            .enumerate()
            .max_by_key(|(_, u)| **u)
            .map(|(q, u)| (q, *u))
            .unwrap_or_default();
        let hour = at as f64 / 4.0;
        assert!(
            most <= limit.cap,
            "{}: {most} {} in use at hour {hour}, over the cap of {}",
            limit.id,
            limit.unit,
            limit.cap
        );
    }

    // A quota over every on-demand and spot run, and the plan within each one (those the
    // problem leaves out because their offers could never use them all included).
    let runs: Vec<_> = plan.actions.iter().filter(|a| a.kind.is_run()).collect();
    assert!(runs.iter().any(|a| a.kind == ActionKind::RunOnDemand));
    for a in &runs {
        assert!(
            plan.quotas.iter().any(|q| q.offers.contains_key(&a.offer)),
            "run {} ({}) is not checked against any quota",
            a.id,
            a.offer
        );
    }
    for q in &plan.quotas {
        let mut used = vec![0u64; quarters];
        for a in plan
            .actions
            .iter()
            .filter(|a| a.kind != ActionKind::Release)
        {
            if let Some(&w) = q.offers.get(&a.offer) {
                let to = quarter(&a.end).min(quarters);
                for u in used.iter_mut().take(to).skip(quarter(&a.start)) {
                    *u += u64::from(w) * u64::from(a.instances);
                }
            }
        }
        let most = used.iter().max().copied().unwrap_or(0);
        assert!(
            most <= q.value,
            "{}: {most} of {} {}",
            q.quota,
            q.value,
            q.unit
        );
        if q.limiting {
            assert!(
                problem
                    .shared_limits
                    .iter()
                    .any(|l| l.id == format!("quota:{}", q.quota)),
                "{}",
                q.quota
            );
        }
    }
}

#[test]
fn under_the_default_quotas_the_plan_keeps_them_and_lists_the_increases_that_save_money() {
    let dir = tempfile::tempdir().unwrap();
    let from = root().join("examples/quickstart");
    for entry in walk(&from) {
        let to = dir.path().join(entry.strip_prefix(&from).unwrap());
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        std::fs::copy(&entry, &to).unwrap();
    }
    let config = dir.path().join("gpucap.toml");
    let text = std::fs::read_to_string(&config).unwrap();
    // No [quotas]: the offline default, far below what the campaigns need. The campaigns as
    // fluid work (`placement = "fluid"`): this test is about the increases that save money. Placed
    // whole, the 512-GPU pre-training needs 64 p5.48xlarge at once wherever no block holds it
    // (12,288 vCPUs against the default 1,536), and the plan lists that increase as needed.
    let cut = text.find("[quotas").map_or(text.len(), |i| i);
    let text = text[..cut].replace("[planning]\n", "[planning]\nplacement = \"fluid\"\n");
    assert!(
        text.contains("placement = \"fluid\""),
        "the quickstart has [planning]"
    );
    std::fs::write(&config, text).unwrap();
    // Pools sharing a binding quota are solved as one program, which may not be proven optimal
    // in the time limit; a plan within the quotas is found before branch and bound starts
    // (`solver::incumbent`), so the plan keeps the quotas and the increases it lists are
    // savings, proven against the plan's bound.
    let (plan, _, stderr) = plan(&config, &["--time-limit", "20"]);
    assert!(!plan.quota_increases.is_empty(), "{stderr}");
    for q in &plan.quota_increases {
        assert!(!q.needed, "{q:?}");
        assert!(q.reason.contains("costs at least $"), "{q:?}");
        assert!(
            q.requested > q.current && q.increase == q.requested - q.current,
            "{q:?}"
        );
        assert_eq!(q.current_source, "default");
        assert!(q.request_by <= q.first_needed, "{q:?}");
    }
    assert!(
        !plan
            .gates
            .deny
            .iter()
            .any(|d| d.rule == "quota.increase_needed"),
        "{:?}",
        plan.gates.deny
    );
    assert!(
        plan.assumptions
            .iter()
            .any(|a| a.contains("gpucap's assumption, not a cloud figure"))
    );
}

#[test]
fn with_no_quota_granted_the_plan_asks_for_increases_and_the_gates_deny_it() {
    let dir = tempfile::tempdir().unwrap();
    let from = root().join("examples/quickstart");
    for entry in walk(&from) {
        let to = dir.path().join(entry.strip_prefix(&from).unwrap());
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        std::fs::copy(&entry, &to).unwrap();
    }
    let config = dir.path().join("gpucap.toml");
    // Every quota the quickstart's problem carries, stated as 0: the pools without capacity
    // blocks cannot be covered within them.
    let (_, problem, _) = plan(&config, &[]);
    let ids: Vec<&str> = problem
        .shared_limits
        .iter()
        .filter_map(|l| l.id.strip_prefix("quota:"))
        .collect();
    assert!(ids.len() >= 10, "{ids:?}");
    let text = std::fs::read_to_string(&config).unwrap();
    let cut = text.find("[quotas").unwrap();
    let zero: String = ids.iter().map(|id| format!("\"{id}\" = 0\n")).collect();
    std::fs::write(&config, format!("{}[quotas.limits]\n{zero}", &text[..cut])).unwrap();
    let (plan, _, stderr) = plan(&config, &[]);
    let needed: Vec<_> = plan.quota_increases.iter().filter(|q| q.needed).collect();
    assert!(!needed.is_empty(), "{stderr}");
    for q in &needed {
        assert!(
            q.reason.contains("cannot be covered within the quotas"),
            "{q:?}"
        );
        assert!(
            q.requested > q.current && q.increase == q.requested - q.current,
            "{q:?}"
        );
        assert!(q.request_by <= q.first_needed, "{q:?}");
    }
    // Quotas the shipped plan did not carry keep gpucap's default; those stated are 0.
    assert!(
        needed
            .iter()
            .any(|q| q.current == 0 && q.current_source == "config"),
        "{needed:?}"
    );
    assert!(
        plan.gates
            .deny
            .iter()
            .any(|d| d.rule == "quota.increase_needed"),
        "{:?}",
        plan.gates.deny
    );
    assert!(stderr.contains("no plan within the quotas"), "{stderr}");
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}
