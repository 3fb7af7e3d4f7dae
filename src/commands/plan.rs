//! `gpucap plan`: the main job. Reads the infra repo (config, calendars, forecasts), gathers
//! prices, the capacity already owned and (with live prices) the quotas `[quotas]` does not
//! set ([`super::live_quotas`]), builds and solves the planning problem, turns the
//! answer into a dated plan, passes it through the budget gates, and prints or writes it.
//!
//! Everything between reading the inputs and writing the outputs is the pure library
//! (demand → planner → solver → plan → policy); this module is the edges and the progress.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use chrono::{DateTime, Utc};
use clap::{Args, ValueEnum};
use gpucap_provider::{Cloud, Offer, Query};

use crate::commands::common::{GlobalArgs, Outcome, exit, stdout, stdout_color};
use crate::commands::output::Outputs;
use crate::commands::project::Project;
use crate::commands::quotes::{self, Sources};
use crate::config::CapacityConfig;
use crate::diagnostic::{InputError, Location};
use crate::plan::InputDigest;
use crate::plan::Plan;
use crate::plan::build::{PlanInputs, build};
use crate::plan::fingerprint::{EXISTING_CAPACITY, FingerprintBuilder};
use crate::plan::gates;
use crate::plan::quota;
use crate::planner::{self, ExistingCapacity, Planned};
use crate::problem;
use crate::solver::{self, SolveOptions};

#[derive(Debug, Args)]
pub struct PlanArgs {
    /// Use only the built-in price snapshot (and imports), never the cloud APIs.
    #[arg(long)]
    pub offline: bool,
    /// Fetch prices again even where the quote cache is fresh.
    #[arg(long, conflicts_with = "offline")]
    pub refresh: bool,
    /// Read prices from a SkyPilot catalog CSV (repeatable), besides the config's imports.
    #[arg(long = "import", value_name = "FILE")]
    pub imports: Vec<PathBuf>,
    /// Where live quotes are cached (default: $XDG_CACHE_HOME/gpucap/quotes).
    #[arg(long, value_name = "DIR", env = "GPUCAP_CACHE_DIR")]
    pub cache_dir: Option<PathBuf>,
    /// Write the plan (`gpucap.plan/v1` JSON) to FILE.
    #[arg(short = 'o', long = "out", value_name = "FILE")]
    pub out: Option<PathBuf>,
    /// Write the optimisation problem (`gpucap.problem/v1`) to FILE, to re-solve or attach.
    #[arg(long, value_name = "FILE")]
    pub emit_problem: Option<PathBuf>,
    /// What to print on stdout.
    #[arg(long, value_enum, default_value_t = PlanFormat::Table)]
    pub format: PlanFormat,
    /// Write charts (capacity against demand per pool, cost per month) as SVG into DIR.
    #[arg(long, value_name = "DIR")]
    pub chart_dir: Option<PathBuf>,
    /// Exit 0 when the plan has no actions, 2 when it has some (1 on errors, 3 when denied),
    /// like `terraform plan -detailed-exitcode`. With `--compare-to`: 0 when nothing changed
    /// since the previous plan, 2 when something did.
    #[arg(long)]
    pub detailed_exitcode: bool,
    /// Show what changed since a previous plan (`gpucap.plan/v1` JSON, e.g. the last applied
    /// one): actions added, removed and changed, the cost totals, and which inputs moved.
    #[arg(long, value_name = "PREVIOUS.json")]
    pub compare_to: Option<PathBuf>,
    /// Plan as if it were this time (RFC 3339): booking windows and quote ages use it.
    #[arg(long, value_name = "TIME", value_parser = parse_now)]
    pub now: Option<DateTime<Utc>>,
    /// Stop the solver after this many seconds with the best plan found (default 600).
    #[arg(
        long,
        value_name = "SECONDS",
        allow_hyphen_values = true,
        value_parser = crate::commands::common::parse_time_limit
    )]
    pub time_limit: Option<Duration>,
    /// Refuse problems larger than this many solver steps (the tables and curves of the second
    /// stage; see docs/limits.md). Default 2,000,000,000.
    #[arg(long, value_name = "SIZE")]
    pub max_problem_size: Option<u64>,
    /// Count the reservations, capacity blocks and commitments in this `terraform show -json`
    /// output as capacity already owned (repeatable).
    #[arg(long, value_name = "FILE")]
    pub terraform_state: Vec<PathBuf>,
    /// Also write the Terraform root module for the actions due in the next 7 days into DIR
    /// (as `gpucap generate`; not when the plan is denied).
    #[arg(long, value_name = "DIR")]
    pub out_dir: Option<PathBuf>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum PlanFormat {
    /// A summary for a terminal.
    Table,
    /// A pull-request comment.
    Markdown,
    /// The plan document.
    Json,
}

fn parse_now(s: &str) -> Result<DateTime<Utc>, String> {
    crate::timespec::parse_timestamp(s)
}

/// What [`make_with`] made, with what the outputs need besides the plan.
struct Made {
    plan: Plan,
    /// The problem as JSON, when `--emit-problem` asked for it.
    problem_text: Option<String>,
    /// The plan actions whose purchases gpucap's state holds (what a diff calls "bought
    /// since"), from the one read of the state.
    bought: BTreeSet<String>,
}

/// Plans: everything `gpucap plan` does before writing, the gates evaluated and the state the
/// plan is made against recorded.
fn make_with(
    global: &GlobalArgs,
    args: &PlanArgs,
    now: DateTime<Utc>,
    progress: &Progress,
) -> anyhow::Result<Made> {
    progress.step("reading calendars and forecasts");
    let project = Project::load(&global.config, now)?;
    let demand = project.demand()?;
    for w in &demand.warnings {
        progress.warn(&w.to_string());
    }
    // Loaded now, once: the fingerprint digests the policy text the gates evaluate later.
    let policies = project.policies()?;
    let mut existing = existing_capacity(&project)?;
    // gpucap's own state, read once: what it holds is counted as owned (each night plans only
    // what is not bought yet), and the plan records the serial it was made against.
    let backend = crate::state::backend::open(&project.config.state, &project.root)?;
    let state = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?
        .block_on(backend.read_state())?;
    if let Some(state) = &state {
        let owned = ExistingCapacity::owned(state, now);
        if !owned.is_empty() {
            progress.note(&format!(
                "{}: {} reservation(s), block(s) and commitment(s) gpucap bought earlier",
                backend.location(),
                owned.len()
            ));
        }
        existing.extend(owned);
    }
    let mut state_inputs = Vec::new();
    for path in &args.terraform_state {
        let (found, digest) = project.terraform_state(path)?;
        progress.note(&format!(
            "{}: {} reservation(s), block(s) and commitment(s) already owned",
            path.display(),
            found.len()
        ));
        existing.extend(found);
        state_inputs.push(digest);
    }

    progress.step("gathering prices");
    let (query, clouds) = query(&project);
    let sources = Sources {
        offline: args.offline || project.config.prices.offline,
        refresh: args.refresh,
        imports: project
            .config
            .prices
            .imports
            .iter()
            .map(|p| project.root.join(p))
            .chain(args.imports.iter().cloned())
            .collect(),
        cache_dir: args.cache_dir.clone(),
    };
    let gathered = quotes::gather(&query, &clouds, &sources, global.quiet)?;
    gathered.report(global.quiet);
    let offers = &gathered.offers;
    // Half hours where the instruments or the calendar need them (AWS blocks start at 11:30).
    let minutes = planner::periods::minutes(
        &project.config,
        &demand,
        &project.campaigns,
        &project.forecasts,
        offers,
        &existing,
    );
    let demand = if minutes == demand.horizon.minutes {
        demand
    } else {
        project.demand_in(project.horizon.with_period(minutes))?
    };

    let build_problem = |book: &planner::QuotaBook| {
        planner::build_with(
            &project.config,
            &demand,
            &project.campaigns,
            offers,
            &existing,
            now,
            book,
        )
        .map_err(|e| match e {
            planner::PlannerError::Campaign(input) => input,
            planner::PlannerError::NoOffers { ref pool, .. } => InputError::new(
                Location::file(&global.config).field(format!("pools.{pool}")),
                e.to_string(),
            )
            .with_hint(e.hint()),
        })
    };
    let mut book = planner::QuotaBook {
        config: project.config.quotas.clone(),
        live: Default::default(),
    };
    let mut planned = build_problem(&book)?;
    // Quotas are read where prices are: never offline (nor from imported catalogs alone).
    if !sources.offline && sources.imports.is_empty() {
        let wanted: Vec<_> = planned
            .quotas
            .iter()
            .filter(|q| q.origin == planner::QuotaOrigin::Default)
            .map(|q| q.quota.clone())
            .collect();
        if !wanted.is_empty() {
            let live = super::live_quotas::read(&wanted, &|line| progress.note(line));
            for note in &live.notes {
                progress.warn(note);
            }
            if !live.values.is_empty() {
                book.live = live.values;
                planned = build_problem(&book)?;
            }
            planned.assumptions.extend(live.notes);
        }
    }
    for w in &planned.warnings {
        progress.warn(w);
    }
    // Written with the other outputs once everything succeeded (all or nothing).
    let problem_text = match &args.emit_problem {
        Some(_) => Some(serde_json::to_string_pretty(&planned.problem)? + "\n"),
        None => None,
    };
    let validated = problem::validate(planned.problem.clone())
        .map_err(|e| anyhow::anyhow!("gpucap built an invalid problem (a bug): {e}"))?;
    let size = problem::size::check(&validated, args.max_problem_size).map_err(|mut e| {
        e.location.file = Some(global.config.clone());
        e
    })?;

    let terms: usize = planned
        .problem
        .offers
        .iter()
        .map(|o| {
            o.starts
                .as_ref()
                .map_or(0, |s| s.hours(validated.hours()).len())
        })
        .sum();
    progress.step(&format!(
        "solving: {} pools, {} offers, {} term starts, {} scenarios (size {} of at most {})",
        planned.problem.pools.len(),
        planned.problem.offers.len(),
        terms,
        planned.problem.scenarios.len(),
        size.total,
        args.max_problem_size
            .unwrap_or(crate::limits::MAX_PROBLEM_SIZE)
    ));
    let options = SolveOptions {
        time_limit: Some(args.time_limit.unwrap_or(crate::limits::DEFAULT_TIME_LIMIT)),
        observer: super::solving::SolveProgress::observer(
            planned.problem.pools.len(),
            progress.bar.clone(),
            global.verbose > 0,
            global.quiet,
        ),
        ..SolveOptions::default()
    };
    let started = Instant::now();
    let mut solution = solver::solve(&validated, &options);
    tracing::info!("solved in {:.2} s", started.elapsed().as_secs_f64());
    if solution.status == crate::problem::Status::Feasible
        && let Some(message) = &solution.message
    {
        progress.warn(message);
    }
    let mut validated = validated;
    let mut quota_increases = Vec::new();
    // Only quotas the problem carries can hold the plan back (the others could never be used
    // up).
    if planned.quotas.iter().any(|q| q.binding) {
        // What more quota would do: needed to cover the demand, or cheaper.
        progress.step("solving again without the quotas, to see what more quota would do");
        let relaxed_problem = quota::without_quotas(&planned.problem, &planned.quotas);
        let relaxed_valid = problem::validate(relaxed_problem)
            .map_err(|e| anyhow::anyhow!("gpucap built an invalid problem (a bug): {e}"))?;
        let relaxed = solver::solve(&relaxed_valid, &options);
        let why = match (solution.status, relaxed.status) {
            (problem::Status::Infeasible, problem::Status::Optimal | problem::Status::Feasible)
                if solution.out_of_time =>
            {
                Some(quota::Why::NotFoundInTime)
            }
            (problem::Status::Infeasible, problem::Status::Optimal | problem::Status::Feasible) => {
                Some(quota::Why::Needed)
            }
            // What is proven: no plan within the quotas costs less than the bound, and the plan
            // without them costs what it costs (either may have stopped at the time limit).
            (
                problem::Status::Optimal | problem::Status::Feasible,
                problem::Status::Optimal | problem::Status::Feasible,
            ) if solution.bound.min(solution.expected_cost) - relaxed.expected_cost >= 1.0 => {
                Some(quota::Why::Saves(
                    solution.bound.min(solution.expected_cost) - relaxed.expected_cost,
                ))
            }
            _ => None,
        };
        if let Some(why) = why {
            quota_increases = quota::increases(
                &planned.problem,
                &planned.quotas,
                &relaxed,
                &demand.horizon,
                now,
                why,
            );
            if why.needed() {
                // The solver's own words say whether no plan exists within the quotas or none
                // was found before the time limit (pools coupled by quotas are solved jointly).
                let said = solution
                    .message
                    .as_deref()
                    .map(|m| format!(" (the solver: {m})"))
                    .unwrap_or_default();
                progress.warn(&format!(
                    "no plan within the quotas{said}: the plan depends on the quota increases it lists"
                ));
                solution = relaxed;
                validated = relaxed_valid;
            }
        }
    }
    // The baselines solve the pools again; their progress would only confuse.
    let options = SolveOptions {
        observer: Default::default(),
        ..options
    };
    progress.step("pricing the baselines");
    let baselines = solver::baselines(&validated, &options);
    // With campaigns placed whole, the same GPU-hours as fluid work: what the plan is measured
    // against (the price of being runnable).
    let fluid = if validated.problem().is_v3() {
        progress.step("pricing the same work as fluid GPU-hours");
        problem::validate(problem::gangs::as_fluid(validated.problem()))
            .ok()
            .map(|f| solver::solve(&f, &options))
    } else {
        None
    };

    let local = project
        .inputs
        .iter()
        .chain(&policies.inputs)
        .chain(&state_inputs)
        .cloned();
    let fingerprint = fingerprint(local, &existing, &planned, offers, &book)?;
    let out_of_time = solution.out_of_time;
    let mut plan = build(PlanInputs {
        problem: &validated,
        planned: &planned,
        solution: &solution,
        baselines: &baselines,
        fluid: fluid.as_ref(),
        restart_hours: project.config.planning.restart_hours,
        demand: &demand,
        campaigns: &project.campaigns,
        fingerprint,
        now,
    })
    .map_err(|e| {
        let hint = if out_of_time {
            "no plan was found in the time limit: allow more time (`--time-limit`); pools that share a binding quota or limit are solved together and can take long (docs/purchase-rules-and-quotas.md, \"When quotas bind\")"
        } else {
            "check the pools' on-demand limits and the demand peaks (`gpucap demand`)"
        };
        anyhow::Error::new(
            InputError::new(Location::file(&global.config), e.to_string()).with_hint(hint),
        )
    })?;

    plan.quota_increases = quota_increases;
    progress.step("evaluating the budget gates");
    let gates_started = std::time::Instant::now();
    plan.gates = gates::evaluate(&policies.engine, &project.config.budget, &plan, now)
        .map_err(crate::commands::policy::input)?;
    tracing::debug!(
        "budget gates evaluated in {:.2} s",
        gates_started.elapsed().as_secs_f64()
    );

    // The apply state the plan is made against: `apply` refuses it once another run wrote it.
    plan.state = state.as_ref().map(crate::state::State::reference);
    let bought = state
        .map(|s| s.resources.into_iter().map(|r| r.action).collect())
        .unwrap_or_default();
    Ok(Made {
        plan,
        problem_text,
        bought,
    })
}

/// Plans with the defaults (`gpucap apply` without a saved plan): shows the summary on stderr.
pub fn make(global: &GlobalArgs, offline: bool, now: DateTime<Utc>) -> anyhow::Result<Plan> {
    let args = PlanArgs {
        offline,
        refresh: false,
        imports: Vec::new(),
        cache_dir: None,
        out: None,
        emit_problem: None,
        format: PlanFormat::Table,
        chart_dir: None,
        detailed_exitcode: false,
        compare_to: None,
        now: Some(now),
        time_limit: None,
        max_problem_size: None,
        terraform_state: Vec::new(),
        out_dir: None,
    };
    let progress = Progress::new(global.quiet);
    let plan = make_with(global, &args, now, &progress)?.plan;
    progress.done();
    eprint!(
        "{}",
        crate::render::plan_summary::summary_in(
            &plan,
            None,
            crate::commands::common::stdout_color(global.color),
            Some(crate::commands::common::stderr_width().unwrap_or(100)),
        )
    );
    Ok(plan)
}

pub fn run(global: &GlobalArgs, args: PlanArgs) -> anyhow::Result<Outcome> {
    let now = args.now.unwrap_or_else(Utc::now);
    // Read before planning, so a wrong path fails at once, not after the solve.
    let previous = args.compare_to.as_deref().map(previous_plan).transpose()?;
    let progress = Progress::new(global.quiet);
    let Made {
        plan,
        problem_text,
        bought,
    } = make_with(global, &args, now, &progress)?;
    progress.done();
    let changes = previous.map(|(path, previous)| {
        crate::plan::diff::diff(&previous, &plan)
            .against_file(path.display().to_string())
            .bought_since(&bought)
    });
    // Every output is rendered and staged beside its target first; only when all of them
    // are ready do they replace their targets, so a failure at any step writes nothing.
    let mut outputs = Outputs::new();
    let mut wrote = Vec::new();
    if let (Some(path), Some(text)) = (&args.emit_problem, &problem_text) {
        outputs.stage(path, text.as_bytes())?;
        wrote.push(format!("wrote the problem to {}", path.display()));
    }
    if let Some(path) = &args.out {
        let text = serde_json::to_string_pretty(&plan)? + "\n";
        outputs.stage(path, text.as_bytes())?;
        wrote.push(format!("wrote the plan to {}", path.display()));
    }
    if let Some(dir) = &args.chart_dir {
        for (path, bytes) in crate::render::plan_chart::render_charts(&plan, dir)
            .with_context(|| format!("drawing charts for {}", dir.display()))?
        {
            outputs.stage(&path, &bytes)?;
            wrote.push(format!("wrote {}", path.display()));
        }
    }
    let terraform = match &args.out_dir {
        Some(dir) if plan.gates.is_denied() => {
            progress.note(&format!(
                "not writing Terraform into {}: the plan is denied",
                dir.display()
            ));
            None
        }
        Some(dir) => {
            let options = crate::render::terraform::Options::new(now);
            let rendered = crate::render::terraform::render(&plan, &options)?;
            Some((dir, rendered))
        }
        None => None,
    };
    if let Some((dir, rendered)) = &terraform {
        // Staged in the directory itself and swapped in by renames (`terraform::output`).
        crate::render::terraform::output::replace(dir, &rendered.files)
            .map_err(|e| anyhow::anyhow!("writing Terraform into {}: {e}", dir.display()))?;
    }
    outputs.commit()?;
    for line in wrote {
        progress.note(&line);
    }
    if let Some((dir, rendered)) = &terraform {
        crate::commands::generate::summarise(rendered, dir);
    }
    let text = match args.format {
        // The plan document as `-o` writes it, with the diff after its fields.
        PlanFormat::Json => {
            let json = match &changes {
                Some(diff) => serde_json::to_string_pretty(&PlanWithDiff { plan: &plan, diff })?,
                None => serde_json::to_string_pretty(&plan)?,
            };
            json + "\n"
        }
        PlanFormat::Markdown => {
            crate::render::markdown::markdown_with_changes(&plan, changes.as_ref())
        }
        PlanFormat::Table => crate::render::plan_summary::summary_in(
            &plan,
            changes.as_ref(),
            stdout_color(global.color),
            Some(crate::commands::common::stdout_width()),
        ),
    };
    stdout(&text)?;
    // The summary shows the gates itself; with data on stdout they go to stderr.
    if !global.quiet && args.format != PlanFormat::Table {
        eprint!("{}", plan.gates.report());
    }
    // With a previous plan, "changes" are changes since it (the nightly loop opens a pull
    // request only then); without, any action is one, as Terraform counts them.
    let has_changes = match &changes {
        Some(diff) => !diff.is_empty(),
        None => !plan.actions.is_empty(),
    };
    Ok(Outcome(if plan.gates.is_denied() {
        exit::DENIED
    } else if args.detailed_exitcode && has_changes {
        exit::CHANGES
    } else {
        exit::OK
    }))
}

/// The plan JSON with a `diff` object after the plan's own fields.
#[derive(serde::Serialize)]
struct PlanWithDiff<'a> {
    #[serde(flatten)]
    plan: &'a Plan,
    diff: &'a crate::plan::diff::PlanDiff,
}

/// The plan `--compare-to` names. Every failure is bad input (exit 2) naming the file: a path
/// given on the command line that is missing or unreadable is the caller's to fix.
fn previous_plan(path: &Path) -> anyhow::Result<(PathBuf, Plan)> {
    match crate::plan::read::read(path) {
        Ok(saved) => Ok((path.to_path_buf(), saved.plan)),
        Err(crate::plan::read::ReadError::Io { source, .. }) => Err(InputError::new(
            Location::file(path).field("--compare-to"),
            format!("cannot read the previous plan: {source}"),
        )
        .with_hint(
            "--compare-to takes a plan `gpucap plan -o plan.json` wrote; on the first run there \
             is none: leave the flag out",
        )
        .into()),
        Err(e) => Err(e.into_anyhow()),
    }
}

/// The capacity the config lists (and, later, Terraform state).
fn existing_capacity(project: &Project) -> anyhow::Result<Vec<ExistingCapacity>> {
    project
        .config
        .capacity
        .iter()
        .enumerate()
        .map(|(i, c)| {
            from_config(c).map_err(|m| {
                InputError::new(
                    Location::file(&project.config_path).field(format!("capacity[{i}]")),
                    m,
                )
                .into()
            })
        })
        .collect()
}

fn from_config(c: &CapacityConfig) -> Result<ExistingCapacity, String> {
    let cloud = Cloud::of_region(&c.region)
        .ok_or_else(|| format!("`{}` is not a known region", c.region))?;
    if gpucap_provider::instance_types::lookup(cloud, &c.instance_type).is_none() {
        return Err(format!(
            "`{}` is not a GPU instance type gpucap knows on {cloud}",
            c.instance_type
        ));
    }
    Ok(ExistingCapacity {
        id: c.id.clone(),
        source: "config".into(),
        kind: c.kind,
        cloud,
        region: c.region.clone(),
        zone: c.zone.clone(),
        instance_type: c.instance_type.clone(),
        instances: c.instances,
        start: c.start.map(|t| t.0),
        end: c.end.map(|t| t.0),
        pool: None,
    })
}

/// What to ask the providers for: the pools' accelerators, regions and clouds.
fn query(project: &Project) -> (Query, Vec<Cloud>) {
    let pools: Vec<_> = project
        .config
        .pools
        .values()
        .map(|p| (p.accelerator, p.regions.clone()))
        .collect();
    let mut accelerators: Vec<_> = project.campaigns.iter().map(|c| c.accelerator).collect();
    accelerators.extend(pools.iter().map(|(a, _)| *a));
    accelerators.sort();
    accelerators.dedup();
    // Regions narrow the query only when every pool names its regions.
    let regions = if !pools.is_empty() && pools.iter().all(|(_, r)| !r.is_empty()) {
        let mut r: Vec<String> = pools.iter().flat_map(|(_, r)| r.clone()).collect();
        r.sort();
        r.dedup();
        r
    } else {
        Vec::new()
    };
    (
        Query {
            accelerators,
            regions,
            kinds: Vec::new(),
        },
        Vec::new(),
    )
}

/// Digests of every input the plan depends on: the local files (config, calendars, forecasts,
/// policies, state files), digested by their loaders from the bytes they parsed, and the
/// capacity, quotes and problem offers derived from them.
fn fingerprint(
    local: impl IntoIterator<Item = InputDigest>,
    existing: &[ExistingCapacity],
    planned: &Planned,
    offers: &[Offer],
    book: &planner::QuotaBook,
) -> anyhow::Result<crate::plan::Fingerprint> {
    let mut f = FingerprintBuilder::default();
    f.extend(local);
    f.add("state", EXISTING_CAPACITY, &serde_json::to_vec(existing)?);
    // Every quote the problem was built from: offer, price, upfront, source, time, offering id.
    // Each serialised once, sorted, so the digest does not depend on fetch order.
    let mut quotes = offers
        .iter()
        .map(serde_json::to_string)
        .collect::<Result<Vec<_>, _>>()?;
    quotes.sort_unstable();
    f.add("quotes", "offers", quotes.join("\n").as_bytes());
    f.add(
        "problem",
        "offers",
        &serde_json::to_vec(&planned.problem.offers)?,
    );
    // Quotas read from the clouds are inputs too (the config's are in its digest).
    if !book.live.is_empty() {
        let live: Vec<String> = book.live.iter().map(|(q, v)| format!("{q}={v}")).collect();
        f.add("quotas", "live", live.join("\n").as_bytes());
    }
    f.add("tool", "gpucap", env!("CARGO_PKG_VERSION").as_bytes());
    Ok(f.finish())
}

/// `text` wrapped to stderr's width where it has one ([`crate::commands::common::stderr_width`]).
fn on_stderr(text: &str) -> String {
    match crate::commands::common::stderr_width() {
        Some(width) => crate::render::terminal::fit(text, width),
        None => text.to_string(),
    }
}

/// Steps on stderr: a spinner on a terminal, plain lines otherwise; nothing with `--quiet`.
struct Progress {
    bar: Option<indicatif::ProgressBar>,
    quiet: bool,
    started: Instant,
}

impl Progress {
    fn new(quiet: bool) -> Self {
        let bar = (!quiet && std::io::IsTerminal::is_terminal(&std::io::stderr())).then(|| {
            let bar = indicatif::ProgressBar::new_spinner();
            bar.enable_steady_tick(Duration::from_millis(120));
            bar
        });
        Progress {
            bar,
            quiet,
            started: Instant::now(),
        }
    }

    fn step(&self, what: &str) {
        if self.quiet {
            return;
        }
        match &self.bar {
            Some(bar) => bar.set_message(what.to_string()),
            None => eprint!("{}", on_stderr(&format!("{what}…\n"))),
        }
        tracing::debug!(elapsed = ?self.started.elapsed(), "{what}");
    }

    fn warn(&self, what: &str) {
        if self.quiet {
            return;
        }
        let what = on_stderr(&format!("warning: {}", crate::text::visible_lines(what)));
        match &self.bar {
            Some(bar) => bar.suspend(|| eprintln!("{what}")),
            None => eprintln!("{what}"),
        }
    }

    fn note(&self, what: &str) {
        if !self.quiet {
            eprint!("{}", on_stderr(&format!("{what}\n")));
        }
    }

    fn done(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
        if !self.quiet {
            eprintln!("planned in {:.1} s", self.started.elapsed().as_secs_f64());
        }
    }
}
