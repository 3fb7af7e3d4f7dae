//! `gpucap release`: cancels reservations no campaign needs any more, scales pools no campaign
//! needs now to zero, and reports what cannot be released (capacity blocks, commitments) with
//! the money still tied up in them.
//!
//! The edges live here: the project (for the demand the calendar gives now), the budget gates
//! on the release list (a policy may forbid releasing during a freeze), the confirmation, the
//! clouds and the printing. The decisions are [`crate::release::select`]'s; the run is
//! [`crate::release::run`].

use std::io::{BufRead, IsTerminal, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::Context as _;
use chrono::{DateTime, Utc};
use clap::Args;
use gpucap_provider::instance_types;
use serde_json::json;

use crate::apply::{Outcome as Did, Settings};
use crate::commands::common::{Format, GlobalArgs, Outcome, exit};
use crate::commands::project::Project;
use crate::diagnostic::{InputError, Location};
use crate::policy::{Decisions, PolicyEngine};
use crate::release::{self, Decision, Item, Summary, Verdict};
use crate::timespec;

#[derive(Debug, Args)]
pub struct ReleaseArgs {
    /// Show what would be released, with each call checked by the API's own dry run; change
    /// nothing, not even the state.
    #[arg(long)]
    pub dry_run: bool,
    /// Do not ask for confirmation (for CI).
    #[arg(long)]
    pub auto_approve: bool,
    /// Sign off releases the budget gates send for approval, with a reason.
    #[arg(long, value_name = "REASON")]
    pub approve: Option<String>,
    /// The current time (RFC 3339), for reproducible runs and tests.
    #[arg(long, value_parser = timespec::parse_timestamp)]
    pub now: Option<DateTime<Utc>>,
    /// How long to wait for another run's state lock (`30s`, `5m`).
    #[arg(long, default_value = "60s", value_parser = humantime::parse_duration)]
    pub lock_timeout: Duration,
    /// How long a call whose outcome is unknown is looked for before it is taken as not having
    /// happened.
    #[arg(long, default_value = "60s", value_parser = humantime::parse_duration)]
    pub reconcile_wait: Duration,
    /// What to print on stdout at the end.
    #[arg(long, value_enum, default_value_t = Format::Table)]
    pub format: Format,
}

pub fn run(global: &GlobalArgs, args: ReleaseArgs) -> anyhow::Result<Outcome> {
    let now = args.now.unwrap_or_else(Utc::now);
    let project = Project::load(&global.config, now)?;
    let demand = project.demand()?;
    let engine =
        PolicyEngine::load(&project.policy_dirs()).map_err(crate::commands::policy::input)?;
    if !args.auto_approve && !args.dry_run && !std::io::stdin().is_terminal() {
        anyhow::bail!(
            InputError::new(
                Location::default().field("--auto-approve"),
                "release needs a confirmation and stdin is not a terminal"
            )
            .with_hint("pass --auto-approve in CI (or --dry-run to see the list)")
        );
    }

    let mut settings = Settings::new(now);
    settings.dry_run = args.dry_run;
    settings.reconcile_wait = args.reconcile_wait;
    settings.reconcile_poll =
        (args.reconcile_wait / 20).clamp(Duration::from_millis(50), Duration::from_secs(5));
    crate::commands::apply::test_hooks(&mut settings);

    let backend = crate::state::backend::open(&project.config.state, &project.root)?;
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
    let state = runtime.block_on(backend.read_state())?;
    let Some(state) = state else {
        crate::commands::common::stdout(&format!(
            "Nothing to release: {} holds no state yet.\n",
            backend.location()
        ))?;
        return Ok(Outcome(exit::OK));
    };
    let clouds = runtime.block_on(crate::commands::apply::connect_to(
        state
            .resources
            .iter()
            .map(|r| (r.cloud.as_str(), r.region.as_str())),
        &project.config.apply,
    ))?;

    let budget = crate::policy::budget_data(&project.config.budget);
    // Whether the gates (rather than a person) stopped the run: exit 3 instead of 1.
    let denied = AtomicBool::new(false);
    let deny = |why: String| {
        denied.store(true, Ordering::Relaxed);
        Verdict::Stop(why)
    };
    let approve = |items: &[Item]| -> Verdict {
        let acts: Vec<&Item> = items.iter().filter(|i| i.decision.acts()).collect();
        if acts.is_empty() {
            return Verdict::Go;
        }
        let decisions = match gates(&engine, &budget, items, now) {
            Ok(d) => d,
            // A gate that cannot be evaluated fails closed.
            Err(e) => return deny(format!("the budget gates failed: {e}")),
        };
        if decisions.is_denied() {
            eprint!("{}", decisions.report());
            return deny("the budget gates deny these releases".into());
        }
        if decisions.needs_approval() {
            match args
                .approve
                .as_deref()
                .map(str::trim)
                .filter(|r| !r.is_empty())
            {
                Some(reason) => eprintln!(
                    "approved by {}: {reason}",
                    crate::apply::preflight::approver()
                ),
                None => {
                    eprint!("{}", decisions.report());
                    return deny(
                        "these releases need an approval: pass --approve \"<reason>\"".into(),
                    );
                }
            }
        }
        if args.auto_approve || args.dry_run {
            return Verdict::Go;
        }
        match confirm(&acts) {
            Ok(true) => Verdict::Go,
            Ok(false) => Verdict::Stop("release cancelled".into()),
            Err(e) => Verdict::Stop(format!("no confirmation: {e}")),
        }
    };
    let summary = runtime.block_on(release::run(release::Run {
        demand: &demand,
        clouds: &clouds,
        backend: backend.as_ref(),
        settings: &settings,
        idle_after: project.config.release.idle_after.as_duration(),
        lock_timeout: args.lock_timeout,
        who: crate::state::lock::who(),
        approve: &approve,
        progress: &progress,
    }))?;

    let text = match args.format {
        Format::Json => serde_json::to_string_pretty(&summary)? + "\n",
        Format::Table => render(&summary),
    };
    crate::commands::common::stdout(&text)?;
    Ok(Outcome(match &summary.stopped {
        Some(_) if denied.load(Ordering::Relaxed) => exit::DENIED,
        Some(_) => exit::ERROR,
        None if summary.complete() => exit::OK,
        None => exit::ERROR,
    }))
}

/// The budget gates on a release list. The policies see `input.operation == "release"`, the
/// releases as `input.actions` of kind `release` (cost 0), and every decision, kept or not, as
/// `input.releases`.
fn gates(
    engine: &PolicyEngine,
    budget: &serde_json::Value,
    items: &[Item],
    now: DateTime<Utc>,
) -> Result<Decisions, crate::policy::PolicyError> {
    let actions: Vec<serde_json::Value> = items
        .iter()
        .filter(|i| i.decision.acts())
        .map(|i| {
            let gpus = instance_types::lookup(i.cloud, &i.instance_type).map_or(0, |(_, g)| g);
            json!({
                "id": format!("release:{}", i.action),
                "kind": "release",
                "resource": i.id,
                "resource_kind": i.kind,
                "cloud": i.cloud,
                "region": i.region,
                "instance_type": i.instance_type,
                "instances": i.instances,
                "gpus": i.instances * gpus,
                "pool": i.pool,
                "cost": 0.0,
                "reason": i.reason,
            })
        })
        .collect();
    let input = json!({
        "operation": "release",
        "now": timespec::rfc3339(now),
        "actions": actions,
        "releases": items,
    });
    engine.evaluate(&input, budget, now)
}

/// Asks on the terminal, as `terraform destroy` does.
fn confirm(acts: &[&Item]) -> std::io::Result<bool> {
    let mut err = std::io::stderr().lock();
    for i in acts {
        writeln!(err, "  {} {}: {}", verb(&i.decision), i.id, i.reason)?;
    }
    write!(
        err,
        "Do you want to release these {} resource(s)?\n  Only 'yes' will be accepted: ",
        acts.len()
    )?;
    err.flush()?;
    let mut answer = String::new();
    std::io::stdin().lock().read_line(&mut answer)?;
    Ok(answer.trim() == "yes")
}

fn verb(d: &Decision) -> &'static str {
    match d {
        Decision::Cancel => "cancel",
        Decision::ScaleToZero { .. } => "scale to zero",
        Decision::Keep => "keep",
        Decision::Ended { .. } => "ended",
        Decision::Owed { .. } => "owed",
        Decision::LeftAlone => "left alone",
    }
}

/// The end-of-run summary for a terminal.
fn render(s: &Summary) -> String {
    let mut out = String::new();
    let mut section = |title: &str, lines: Vec<String>| {
        if !lines.is_empty() {
            out.push_str(&format!("{title} ({}):\n", lines.len()));
            for l in lines {
                out.push_str("  ");
                out.push_str(&l);
                out.push('\n');
            }
        }
    };
    let line = |i: &Item| {
        format!(
            "{} {} ({} x {} in {}): {}",
            i.kind.as_str(),
            i.id,
            i.instances,
            i.instance_type,
            i.region,
            i.reason
        )
    };
    let released: Vec<String> = s
        .reports
        .iter()
        .filter_map(|r| match &r.outcome {
            Did::Done { detail, .. } | Did::WouldDo { detail, .. } => {
                Some(format!("{}: {detail}", r.id))
            }
            _ => None,
        })
        .collect();
    let failed: Vec<String> = s
        .reports
        .iter()
        .filter_map(|r| match &r.outcome {
            Did::NotDone { reason } | Did::Manual { reason } | Did::Pending { detail: reason } => {
                Some(format!("{}: {reason}", r.id))
            }
            _ => None,
        })
        .collect();
    let pick = |f: fn(&Decision) -> bool| -> Vec<String> {
        s.items
            .iter()
            .filter(|i| f(&i.decision))
            .map(line)
            .collect()
    };
    section(
        if s.dry_run {
            "Would release"
        } else {
            "Released"
        },
        released,
    );
    section("Not released", failed);
    if let Some(why) = &s.stopped {
        section(
            "Stopped before releasing",
            pick(Decision::acts)
                .into_iter()
                .map(|l| format!("{l} [{why}]"))
                .collect(),
        );
    }
    section(
        "Cannot be released",
        pick(|d| matches!(d, Decision::Owed { .. })),
    );
    section("Kept", pick(|d| matches!(d, Decision::Keep)));
    section(
        "Ended by itself",
        pick(|d| matches!(d, Decision::Ended { .. })),
    );
    section("Left alone", pick(|d| matches!(d, Decision::LeftAlone)));
    if s.items.is_empty() {
        out.push_str("Nothing to release: the state holds nothing live.\n");
    }
    out.push_str(&format!(
        "${:.2} is tied up in capacity that cannot be released; {} API call(s), {} retried; state serial {}\n",
        s.owed_ahead(),
        s.counts.calls,
        s.counts.retries,
        s.state_serial
    ));
    if s.settled > 0 {
        out.push_str(&format!(
            "Settled {} call(s) an earlier run left unresolved.\n",
            s.settled
        ));
    }
    out
}
