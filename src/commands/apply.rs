//! `gpucap apply [PLAN.json]`: carries out the plan's actions due now through the cloud APIs,
//! like `terraform apply` does with a saved plan.
//!
//! The edges live here: reading the plan and the project, the stale-plan and gate checks that
//! need them ([`crate::apply::preflight`]), asking for confirmation, connecting to the clouds,
//! and printing. The run itself is [`crate::apply::run`]. Progress goes to stderr, one line per
//! action; the summary (or `--format json`) goes to stdout.

use std::io::{BufRead, IsTerminal, Write};
use std::path::{Path, PathBuf};
#[cfg(any(feature = "aws", feature = "azure", feature = "gcp"))]
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use chrono::{DateTime, Utc};
use clap::Args;

use crate::apply::{self, Approval, Clouds, Fate, Outcome as Did, Settings, Summary, preflight};
use crate::commands::common::{Format, GlobalArgs, Outcome, exit};
use crate::config;
use crate::diagnostic::{InputError, Location};
use crate::plan::Plan;
use crate::plan::due::{self, Window};
use crate::timespec::{self, Span};

#[derive(Debug, Args)]
pub struct ApplyArgs {
    /// The saved plan (`gpucap plan -o plan.json`). Without it, gpucap plans first, shows the
    /// plan and asks before acting.
    pub plan: Option<PathBuf>,
    /// Make every mutating call with the API's own dry run (permissions and parameters are
    /// checked); change nothing, not even the state.
    #[arg(long)]
    pub dry_run: bool,
    /// Do not ask for confirmation (for CI).
    #[arg(long)]
    pub auto_approve: bool,
    /// Sign off a plan the budget gates send for approval, with a reason; recorded in the
    /// audit log with the identity from the environment (GITHUB_ACTOR, GITLAB_USER_LOGIN, the
    /// user). An `approvals.json` next to the plan can carry it instead.
    #[arg(long, value_name = "REASON")]
    pub approve: Option<String>,
    /// Act on the actions due within this long from now (`36h`, `7d`, `2w`).
    #[arg(long, default_value = "7d", value_parser = Span::parse)]
    pub window: Span,
    /// The current time (RFC 3339), for reproducible runs and tests.
    #[arg(long, value_parser = timespec::parse_timestamp)]
    pub now: Option<DateTime<Utc>>,
    /// How long to wait for another run's state lock (`30s`, `5m`).
    #[arg(long, default_value = "60s", value_parser = humantime::parse_duration)]
    pub lock_timeout: Duration,
    /// How much more than planned a capacity block may cost when re-quoted, in percent.
    #[arg(long, default_value_t = 5.0, value_name = "PERCENT")]
    pub price_tolerance: f64,
    /// How long a call whose outcome is unknown is looked for in the cloud before it is taken
    /// as not having happened (describe calls are eventually consistent).
    #[arg(long, default_value = "60s", value_parser = humantime::parse_duration)]
    pub reconcile_wait: Duration,
    /// What to print on stdout at the end.
    #[arg(long, value_enum, default_value_t = Format::Table)]
    pub format: Format,
    /// When planning first (no PLAN): use only the built-in price snapshot.
    #[arg(long)]
    pub offline: bool,
}

/// Test hooks, read from the environment and never documented for users: stop after N journal
/// records (crash tests), and shorter backoff.
const HALT_ENV: &str = "GPUCAP_HALT_AFTER_JOURNAL";
const RETRY_BASE_ENV: &str = "GPUCAP_RETRY_BASE_MS";

/// Applies the test hooks from the environment to `settings`.
pub(crate) fn test_hooks(settings: &mut Settings) {
    settings.halt_after_journal = std::env::var(HALT_ENV).ok().and_then(|v| v.parse().ok());
    if let Some(ms) = std::env::var(RETRY_BASE_ENV)
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
    {
        settings.retry_min_delay = Duration::from_millis(ms);
        settings.retry_max_delay = Duration::from_millis(ms * 20);
    }
}

pub fn run(global: &GlobalArgs, args: ApplyArgs) -> anyhow::Result<Outcome> {
    let now = args.now.unwrap_or_else(Utc::now);
    if !(0.0..=100.0).contains(&args.price_tolerance) {
        anyhow::bail!(InputError::new(
            Location::default().field("--price-tolerance"),
            "must be a percentage from 0 to 100"
        ));
    }
    let (config, _) = config::load(&global.config)?;
    let root = global
        .config
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default();

    // The plan: saved, or made now and confirmed.
    let (plan, plan_path) = match &args.plan {
        Some(path) => {
            let saved = crate::plan::read::read(path).map_err(|e| e.into_anyhow())?;
            check_inputs(&saved.plan, path, &global.config, now)?;
            (saved.plan, Some(path.clone()))
        }
        None => {
            let plan = crate::commands::plan::make(global, args.offline, now)?;
            (plan, None)
        }
    };
    let plan_name = plan_path
        .as_ref()
        .map_or("the plan".to_string(), |p| format!("`{}`", p.display()));

    // The gates again, on the plan as it will be applied.
    let decisions = crate::plan::gates::gates(
        &config.budget,
        &config
            .budget
            .policies
            .iter()
            .map(|d| root.join(d))
            .collect::<Vec<_>>(),
        &plan,
        now,
    )
    .map_err(crate::commands::policy::input)?;
    if decisions.is_denied() {
        eprint!("{}", decisions.report());
        eprintln!("error: the budget gates deny {plan_name}; nothing was done");
        return Ok(Outcome(exit::DENIED));
    }
    let approval = if decisions.needs_approval() {
        let approval = approval_for(&args, &plan, plan_path.as_deref())?;
        match approval {
            Some(a) => {
                eprintln!("approved by {} ({}): {}", a.by, a.source, a.reason);
                Some(a)
            }
            None => {
                eprint!("{}", decisions.report());
                eprintln!(
                    "error: {plan_name} needs an approval before it is applied: pass --approve \"<reason>\" (recorded with your identity in the audit log), or commit an approvals.json next to the plan"
                );
                return Ok(Outcome(exit::DENIED));
            }
        }
    } else {
        None
    };

    let selected = due::select(
        &plan,
        &Window {
            now,
            window: args.window.as_duration(),
        },
    )
    .map_err(|mut e| {
        e.location.file = plan_path.clone();
        anyhow::Error::new(e)
    })?;
    let max_age = config
        .budget
        .max_quote_age
        .map_or(chrono::Duration::hours(24), |s| s.as_duration());
    let old = preflight::stale_quotes(&plan, &selected.due, now, max_age);
    if !old.is_empty() {
        anyhow::bail!(stale(
            plan_path.as_deref(),
            &format!("saved plan is stale: {}", old.join("; "))
        ));
    }

    let irreversible = preflight::irreversible_due(&selected.due);
    if !global.quiet {
        eprintln!(
            "{} action(s) due by {} ({} later, {} over); irreversible spend due: ${irreversible:.2}",
            selected.due.len(),
            timespec::rfc3339(now + args.window.as_duration()),
            selected.later,
            selected.over
        );
    }
    if !args.auto_approve && !args.dry_run && !confirm(&selected, irreversible)? {
        eprintln!("apply cancelled; nothing was done");
        return Ok(Outcome(exit::ERROR));
    }

    let mut settings = Settings::new(now);
    settings.dry_run = args.dry_run;
    settings.price_tolerance = args.price_tolerance / 100.0;
    settings.reconcile_wait = args.reconcile_wait;
    settings.reconcile_poll =
        (args.reconcile_wait / 20).clamp(Duration::from_millis(50), Duration::from_secs(5));
    test_hooks(&mut settings);

    let backend = crate::state::backend::open(&config.state, &root)?;
    let quiet = global.quiet;
    let progress = move |line: &str| {
        if !quiet {
            eprintln!("{line}");
        }
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    let clouds = runtime.block_on(connect(&plan, &config.apply))?;
    let summary = runtime.block_on(apply::run(apply::Run {
        plan: &plan,
        due: &selected.due,
        launch: &config.apply.pools,
        clouds: &clouds,
        backend: backend.as_ref(),
        settings: &settings,
        lock_timeout: args.lock_timeout,
        who: crate::state::lock::who(),
        approval,
        progress: &progress,
    }));
    let summary = match summary {
        Ok(s) => s,
        Err(apply::RunError::Stale(e)) => {
            anyhow::bail!(stale(plan_path.as_deref(), &e.to_string()))
        }
        Err(apply::RunError::Apply(e)) => return Err(anyhow::Error::new(e)),
    };

    let text = match args.format {
        Format::Json => serde_json::to_string_pretty(&summary)? + "\n",
        Format::Table => render(&summary, selected.later),
    };
    crate::commands::common::stdout(&text)?;
    Ok(Outcome(if summary.complete() {
        exit::OK
    } else {
        exit::ERROR
    }))
}

/// Refuses a plan whose local inputs changed since it was made.
fn check_inputs(plan: &Plan, path: &Path, config: &Path, now: DateTime<Utc>) -> anyhow::Result<()> {
    let root = config.parent().map(Path::to_path_buf).unwrap_or_default();
    let state_files: Vec<PathBuf> = plan
        .fingerprint
        .inputs
        .iter()
        .filter(|i| i.kind == "state" && i.is_local_file())
        .map(|i| root.join(&i.name))
        .collect();
    let current = crate::commands::project::local_inputs(config, now, &state_files)?;
    let changes = crate::plan::fingerprint::stale_inputs(&plan.fingerprint.inputs, &current);
    if changes.is_empty() {
        return Ok(());
    }
    let list: Vec<String> = changes.iter().map(ToString::to_string).collect();
    Err(stale(
        Some(path),
        &format!(
            "saved plan is stale: {} since the plan was made",
            list.join(", ")
        ),
    )
    .into())
}

fn stale(path: Option<&Path>, message: &str) -> InputError {
    let location = match path {
        Some(p) => Location::file(p),
        None => Location::default(),
    };
    InputError::new(location, message.to_string())
        .with_hint("run `gpucap plan -o plan.json` again and review the new plan")
}

/// The sign-off for a plan the gates send for approval: `--approve`, else the approvals file.
fn approval_for(
    args: &ApplyArgs,
    plan: &Plan,
    plan_path: Option<&Path>,
) -> anyhow::Result<Option<Approval>> {
    if let Some(reason) = args.approve.as_deref().filter(|r| !r.trim().is_empty()) {
        return Ok(Some(Approval {
            plan: plan.fingerprint.digest.clone(),
            by: preflight::approver(),
            reason: reason.trim().to_string(),
            source: "--approve".into(),
        }));
    }
    let Some(dir) = plan_path.map(|p| p.parent().unwrap_or(Path::new("."))) else {
        return Ok(None);
    };
    let file = dir.join("approvals.json");
    preflight::approval_from_file(&file, &plan.fingerprint.digest)
        .map_err(|m| anyhow::Error::new(InputError::new(Location::file(&file), m)))
}

/// Asks on the terminal, as `terraform apply` does. Without a terminal, refuses: CI passes
/// `--auto-approve`.
fn confirm(selected: &due::Selected<'_>, irreversible: f64) -> anyhow::Result<bool> {
    if !std::io::stdin().is_terminal() {
        anyhow::bail!(
            InputError::new(
                Location::default().field("--auto-approve"),
                "apply needs a confirmation and stdin is not a terminal"
            )
            .with_hint("pass --auto-approve in CI, after reviewing the plan")
        );
    }
    let mut err = std::io::stderr().lock();
    for d in &selected.due {
        writeln!(
            err,
            "  {} {} x {} in {} from {} (${:.2})",
            d.action.kind.as_str(),
            d.action.instances,
            d.action.instance_type,
            d.action.zone.as_deref().unwrap_or(&d.action.region),
            d.action.start,
            d.action.cost
        )?;
    }
    write!(
        err,
        "Do you want to perform these actions (${irreversible:.2} cannot be undone)?\n  Only 'yes' will be accepted: "
    )?;
    err.flush()?;
    let mut answer = String::new();
    std::io::stdin().lock().read_line(&mut answer)?;
    Ok(answer.trim() == "yes")
}

/// The act providers the plan's clouds need, as this build has them.
async fn connect(plan: &Plan, settings: &config::ApplySettings) -> anyhow::Result<Clouds> {
    connect_to(
        plan.actions
            .iter()
            .map(|a| (a.cloud.as_str(), a.region.as_str())),
        settings,
    )
    .await
}

/// The act providers for the clouds of `places` (cloud, region), as this build has them. AWS
/// takes its default region from `AWS_REGION`, else the first AWS place; each call names its
/// own region. Azure takes `AZURE_SUBSCRIPTION_ID` and its credentials from the environment,
/// the resource group from `apply.azure_resource_group`, else `GPUCAP_AZURE_RESOURCE_GROUP`
/// (`gpucap_azure::act`). GCP (with the `gcp` feature) takes the project from
/// `apply.gcp_project`, else `GPUCAP_GCP_PROJECT` or `GOOGLE_CLOUD_PROJECT`, and Application
/// Default Credentials (`gpucap_gcp::act`).
#[cfg_attr(not(all(feature = "azure", feature = "gcp")), allow(unused_variables))]
pub(crate) async fn connect_to<'a>(
    places: impl Iterator<Item = (&'a str, &'a str)>,
    settings: &config::ApplySettings,
) -> anyhow::Result<Clouds> {
    #[allow(unused_mut)]
    let mut clouds = Clouds::default();
    let places: Vec<(&str, &str)> = places.collect();
    let first_aws = places
        .iter()
        .filter(|(cloud, _)| *cloud == "aws")
        .map(|(_, region)| region.to_string())
        .next();
    let any_azure = places.iter().any(|(cloud, _)| *cloud == "azure");
    #[cfg(feature = "azure")]
    if any_azure {
        // Subscription, resource group and credentials from the environment; every call names
        // its own location. Without them, Azure work is left for a person (with this reason),
        // and the AWS part of the plan still runs.
        match gpucap_azure::act::AzureCapacity::from_env(settings.azure_resource_group.as_deref()) {
            Ok(azure) => clouds = clouds.with(gpucap_provider::Cloud::Azure, Arc::new(azure)),
            Err(e) => eprintln!("warning: cannot act on Azure: {}", e.message),
        }
    }
    #[cfg(not(feature = "azure"))]
    if any_azure {
        tracing::warn!(
            "this gpucap was built without the `azure` feature: Azure actions are left for a person"
        );
    }
    let any_gcp = places.iter().any(|(cloud, _)| *cloud == "gcp");
    #[cfg(feature = "gcp")]
    if any_gcp {
        // The project from the config or the environment, Application Default Credentials
        // (or GPUCAP_GCP_ENDPOINT_URL with anonymous ones, for tests); every call names its
        // own zone. Without a project, GCP work is left for a person with this reason.
        match gpucap_gcp::act::GcpCapacity::from_env(settings.gcp_project.as_deref()).await {
            Ok(gcp) => clouds = clouds.with(gpucap_provider::Cloud::Gcp, Arc::new(gcp)),
            Err(e) => eprintln!("warning: cannot act on GCP: {}", e.message),
        }
    }
    #[cfg(not(feature = "gcp"))]
    if any_gcp {
        tracing::warn!(
            "this gpucap was built without the `gcp` feature: GCP actions are left for a person (build with `--features gcp`)"
        );
    }
    #[cfg(feature = "aws")]
    if let Some(first) = first_aws {
        let region = std::env::var("AWS_REGION")
            .ok()
            .filter(|r| !r.is_empty())
            .unwrap_or(first);
        let aws = gpucap_aws::act::AwsCapacity::from_env(region)
            .await
            .map_err(|e| anyhow::anyhow!("{e}"))?;
        clouds = clouds.with(gpucap_provider::Cloud::Aws, Arc::new(aws));
    }
    #[cfg(not(feature = "aws"))]
    if first_aws.is_some() {
        tracing::warn!(
            "this gpucap was built without the `aws` feature: AWS actions are left for a person"
        );
    }
    Ok(clouds)
}

/// Every due action, one line each, with what became of it: the "N action(s) due" the run
/// began with, accounted for. Details of what was done are in the lists after it.
fn ledger(s: &Summary) -> String {
    let shown = |t: &str| crate::text::visible(t).into_owned();
    let order = [
        "done",
        "would do",
        "done earlier",
        "pending",
        "not done",
        "for a person",
        "later run",
    ];
    let counts: Vec<String> = order
        .iter()
        .filter_map(|label| {
            let n = s.due.iter().filter(|a| a.fate.label() == *label).count();
            (n > 0).then(|| format!("{n} {label}"))
        })
        .collect();
    let mut out = format!("Due actions ({}): {}\n", s.due.len(), counts.join(", "));
    for a in &s.due {
        out.push_str(&format!("  {:<12}  {}", a.fate.label(), shown(&a.action)));
        if let Some(via) = &a.via {
            out.push_str(&format!(" ({})", shown(via)));
        }
        match &a.fate {
            Fate::NotDone { .. } | Fate::Manual { .. } | Fate::Later { .. } => {
                out.push_str(&format!(": {}", shown(a.fate.text())));
            }
            Fate::Pending { .. } | Fate::WouldDo { .. } | Fate::Done { .. } | Fate::DoneEarlier => {
            }
        }
        out.push('\n');
    }
    out
}

/// The end-of-run summary for a terminal.
fn render(s: &Summary, later: usize) -> String {
    let mut done = Vec::new();
    let mut not_done = Vec::new();
    let mut manual = Vec::new();
    let mut pending = Vec::new();
    for r in &s.reports {
        match &r.outcome {
            Did::Done { detail, .. } | Did::WouldDo { detail, .. } => {
                done.push(format!("  {} {}: {detail}", r.kind, r.id));
            }
            Did::NotDone { reason } => not_done.push(format!("  {} {}: {reason}", r.kind, r.id)),
            Did::Manual { reason } => manual.push(format!("  {}: {reason}", r.id)),
            Did::Pending { detail } => pending.push(format!("  {} {}: {detail}", r.kind, r.id)),
        }
    }
    let mut out = ledger(s);
    let verb = if s.dry_run { "Would do" } else { "Done" };
    out.push_str(&format!("{verb} ({}):\n", done.len()));
    for l in &done {
        out.push_str(l);
        out.push('\n');
    }
    if !not_done.is_empty() {
        out.push_str(&format!("Not done ({}):\n", not_done.len()));
        for l in &not_done {
            out.push_str(l);
            out.push('\n');
        }
    }
    if !pending.is_empty() {
        out.push_str(&format!(
            "Pending ({}), asked for and not there yet:\n",
            pending.len()
        ));
        for l in &pending {
            out.push_str(l);
            out.push('\n');
        }
    }
    if !manual.is_empty() {
        out.push_str(&format!("Needs a person ({}):\n", manual.len()));
        for l in &manual {
            out.push_str(l);
            out.push('\n');
        }
    }
    if !s.already_done.is_empty() {
        out.push_str(&format!(
            "Already done earlier: {} action(s)\n",
            s.already_done.len()
        ));
    }
    if s.recovered.settled > 0 {
        out.push_str(&format!(
            "Settled from an earlier run: {} call(s), {} of them had happened\n",
            s.recovered.settled, s.recovered.found
        ));
    }
    out.push_str(&format!(
        "{} ${:.2} this run; {later} action(s) left for later runs; {} API call(s), {} retried; state serial {}\n",
        if s.dry_run { "Would spend" } else { "Spent" },
        if s.dry_run {
            s.reports
                .iter()
                .map(|r| match r.outcome {
                    Did::WouldDo { cost, .. } => cost,
                    _ => 0.0,
                })
                .sum::<f64>()
                + 0.0
        } else {
            s.spent()
        },
        s.counts.calls,
        s.counts.retries,
        s.state_serial
    ));
    if !s.complete() {
        out.push_str(
            "Apply was partial: what is listed as done is recorded in the state; re-run `gpucap apply` with the same plan to finish the rest.\n",
        );
    }
    out
}
