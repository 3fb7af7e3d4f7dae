//! `gpucap policy test [DIR ...]` runs the budget gates' test cases; `gpucap policy eval`
//! evaluates the gates on a plan and prints the decisions, for debugging a policy or a plan.

use std::io::Read;
use std::path::{Path, PathBuf};

use anyhow::Context;
use chrono::{DateTime, Utc};
use clap::{Args, Subcommand};
use serde_json::Value;

use crate::commands::common::{GlobalArgs, Outcome, exit};
use crate::config;
use crate::diagnostic::{InputError, Location};
use crate::policy::{self, PolicyEngine, PolicyError, cases};

#[derive(Debug, Args)]
pub struct PolicyArgs {
    #[command(subcommand)]
    pub command: PolicyCommand,
}

#[derive(Debug, Subcommand)]
pub enum PolicyCommand {
    /// Run the built-in policy test cases, and those in each DIR (whose policies are loaded).
    Test(TestArgs),
    /// Evaluate the budget gates on a plan and print the decisions as JSON.
    Eval(EvalArgs),
}

#[derive(Debug, Args)]
pub struct TestArgs {
    /// Policy directories: every `*.rego` under a DIR is loaded (with the built-ins) for the
    /// cases of that DIR, which are every `*.json` under it (files starting with `_` are
    /// shared plans, not cases).
    #[arg(value_name = "DIR")]
    pub dirs: Vec<PathBuf>,
}

#[derive(Debug, Args)]
pub struct EvalArgs {
    /// The plan (`gpucap.plan/v1` JSON); `-` reads stdin.
    #[arg(long, value_name = "PLAN.json")]
    pub plan: PathBuf,
    /// The data document (the budget section as JSON). Default: `[budget]` of the config, or
    /// nothing when there is no config.
    #[arg(long, value_name = "DATA.json")]
    pub data: Option<PathBuf>,
    /// More policy directories (besides the config's `budget.policies`).
    #[arg(long = "policies", value_name = "DIR")]
    pub policy_dirs: Vec<PathBuf>,
    /// The time quote ages are measured at (RFC 3339). Default: the data's `now`, else now.
    #[arg(long, value_name = "TIME")]
    pub now: Option<DateTime<Utc>>,
}

pub fn run(global: &GlobalArgs, args: PolicyArgs) -> anyhow::Result<Outcome> {
    match args.command {
        PolicyCommand::Test(args) => test(args),
        PolicyCommand::Eval(args) => eval(global, args),
    }
}

fn test(args: TestArgs) -> anyhow::Result<Outcome> {
    // The built-in cases run on the built-in gates alone; a directory's cases run on the
    // built-ins plus that directory's policies, as `gpucap plan` would with it configured.
    let mut suites = vec![(
        None,
        PolicyEngine::load(&[]).map_err(input)?,
        crate::policy::cases::CaseFiles::builtin(),
    )];
    for dir in &args.dirs {
        let engine = PolicyEngine::load(std::slice::from_ref(dir)).map_err(input)?;
        let files = cases::CaseFiles::read_dir(dir).map_err(input)?;
        suites.push((Some(dir.clone()), engine, files));
    }
    let now = Utc::now();
    let (mut passed, mut failed) = (0usize, 0usize);
    for (dir, engine, files) in &suites {
        let found = files.cases().map_err(input)?;
        if dir.is_some() && found.is_empty() {
            eprintln!(
                "warning: no test cases (`*.json`) in `{}`",
                files.root.display()
            );
        }
        for case in found {
            let label = match dir {
                Some(dir) => format!("{}/{}", dir.display(), case.name),
                None => case.name.clone(),
            };
            let failures = match cases::run(engine, &case, now) {
                Ok(outcome) => outcome.failures,
                Err(err) => vec![format!("evaluation failed: {err}")],
            };
            if failures.is_empty() {
                passed += 1;
                println!("ok      {label}");
            } else {
                failed += 1;
                println!("FAILED  {label}: {}", case.description);
                for f in failures {
                    println!("        {f}");
                }
            }
        }
    }
    println!("{passed} passed, {failed} failed");
    Ok(Outcome(if failed == 0 { exit::OK } else { exit::ERROR }))
}

fn eval(global: &GlobalArgs, args: EvalArgs) -> anyhow::Result<Outcome> {
    let plan: Value = read_json(&args.plan, "plan")?;
    let (config_data, mut dirs) = config_budget(&global.config)?;
    let data = match &args.data {
        Some(path) => read_json(path, "data")?,
        None => config_data,
    };
    dirs.extend(args.policy_dirs.iter().cloned());
    let engine = PolicyEngine::load(&dirs).map_err(input)?;
    let now = args.now.unwrap_or_else(Utc::now);
    let decisions = engine.evaluate(&plan, &data, now).map_err(|e| {
        // Say which file the bad plan or data came from.
        let file = match &e {
            PolicyError::BadPlan(_) => Some(args.plan.clone()),
            PolicyError::BadData(_) => Some(args.data.clone().unwrap_or(global.config.clone())),
            _ => None,
        };
        match file {
            Some(file) => InputError::new(Location::file(file), e.to_string()).into(),
            None => input(e),
        }
    })?;
    println!("{}", serde_json::to_string_pretty(&decisions)?);
    if !global.quiet {
        eprint!("{}", decisions.report());
    }
    Ok(Outcome(if decisions.is_denied() {
        exit::DENIED
    } else {
        exit::OK
    }))
}

/// The config's budget as data, and its policy directories resolved against the config's
/// directory. No config file: no budget, no extra policies.
fn config_budget(path: &Path) -> anyhow::Result<(Value, Vec<PathBuf>)> {
    if !path.exists() {
        return Ok((Value::Object(Default::default()), Vec::new()));
    }
    let (config, _) = config::load(path)?;
    let root = path.parent().unwrap_or(Path::new(""));
    let dirs = config
        .budget
        .policies
        .iter()
        .map(|d| root.join(d))
        .collect();
    Ok((policy::budget_data(&config.budget), dirs))
}

fn read_json(path: &Path, what: &str) -> anyhow::Result<Value> {
    let (text, shown) = if path == Path::new("-") {
        let mut text = String::new();
        std::io::stdin()
            .read_to_string(&mut text)
            .with_context(|| format!("cannot read the {what} from stdin"))?;
        (text, PathBuf::from("<stdin>"))
    } else {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read the {what} `{}`", path.display()))?;
        (text, path.to_path_buf())
    };
    serde_json::from_str(&text).map_err(|e| {
        let location = Location::file(&shown).line(e.line()).column(e.column());
        InputError::new(location, format!("the {what} is not valid JSON: {e}")).into()
    })
}

/// Policy errors that are the user's input become [`InputError`]s (exit status 2).
pub(crate) fn input(err: PolicyError) -> anyhow::Error {
    if err.is_input() {
        InputError::from(err).into()
    } else {
        err.into()
    }
}
