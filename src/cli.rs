//! The command line: clap types and the mapping from errors to exit codes (logging is set up
//! by [`crate::logging`]).
//!
//! The top-level parser stays in this module. Each subcommand's arguments are handed to a plain
//! function in [`crate::commands`], which returns an [`Outcome`]; what the commands share (the
//! global flags, exit statuses, stdout) is in [`crate::commands::common`], so that the commands
//! never depend on this module.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

use crate::commands;
use crate::commands::common::{GlobalArgs, Outcome, exit};
use crate::diagnostic::InputError;

#[derive(Debug, Parser)]
#[command(
    name = "gpucap",
    version,
    about = "Plan and provision GPU capacity for ML training campaigns",
    long_about = "gpucap reads campaign calendars and demand forecasts, compares reserved, spot and \
on-demand GPU prices across AWS, GCP and Azure, finds the cheapest mix that covers the demand, \
gates it on budget policies, and writes Terraform or calls the cloud APIs.",
    propagate_version = true
)]
pub struct Cli {
    #[command(flatten)]
    pub global: GlobalArgs,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Write a commented gpucap.toml (and example inputs) into a directory.
    Init(commands::init::InitArgs),
    /// Show the demand curve built from calendars and forecasts.
    Demand(commands::demand::DemandArgs),
    /// Compare GPU offers (on-demand, spot, capacity blocks, terms) across clouds.
    Prices(commands::prices::PricesArgs),
    /// Solve a gpucap.problem/v1 and print the proven-optimal purchase plan.
    Solve(commands::solve::SolveArgs),
    /// Test the budget-gate policies, or evaluate them on a plan.
    Policy(commands::policy::PolicyArgs),
    /// Plan: demand and prices in, a gated plan of dated actions out (like `terraform plan`).
    Plan(commands::plan::PlanArgs),
    /// Write the Terraform (or Pulumi) that carries out a plan's actions due now.
    Generate(commands::generate::GenerateArgs),
    /// Carry out a plan's actions due now through the cloud APIs (like `terraform apply`).
    Apply(commands::apply::ApplyArgs),
    /// Cancel reservations no campaign needs any more and scale idle pools to zero; report
    /// what cannot be released (capacity blocks, commitments) with the money still tied up.
    Release(commands::release::ReleaseArgs),
    /// What gpucap manages: `state list`, `state show ID`.
    State(commands::state::StateArgs),
    /// Remove the state lock a killed run left behind (its id is in the waiting run's error).
    ForceUnlock(commands::state::ForceUnlockArgs),
}

pub fn main() -> ExitCode {
    let cli = Cli::parse();
    crate::logging::init(&cli.global);
    let mut errors_exit_1 = false;
    let result = match cli.command {
        Command::Init(args) => commands::init::run(&cli.global, args),
        Command::Demand(args) => commands::demand::run(&cli.global, args),
        Command::Prices(args) => commands::prices::run(&cli.global, args),
        Command::Solve(args) => commands::solve::run(&cli.global, args),
        Command::Policy(args) => commands::policy::run(&cli.global, args),
        Command::Plan(args) => {
            errors_exit_1 = args.detailed_exitcode;
            commands::plan::run(&cli.global, args)
        }
        Command::Generate(args) => commands::generate::run(&cli.global, args),
        Command::Apply(args) => commands::apply::run(&cli.global, args),
        Command::Release(args) => commands::release::run(&cli.global, args),
        Command::State(args) => commands::state::run(&cli.global, args),
        Command::ForceUnlock(args) => commands::state::force_unlock(&cli.global, args),
    };
    match result {
        Ok(Outcome(code)) => ExitCode::from(code),
        Err(err) if errors_exit_1 => {
            report(&err);
            ExitCode::from(exit::ERROR)
        }
        Err(err) => report(&err),
    }
}

/// Prints an error chain with hints on stderr and picks the exit status.
fn report(err: &anyhow::Error) -> ExitCode {
    let input = err.chain().find_map(|e| e.downcast_ref::<InputError>());
    // Messages quote input; a control character in it must not reach the terminal raw.
    let shown = |s: String| crate::render::text::visible_lines(&s).into_owned();
    eprintln!("error: {}", shown(err.to_string()));
    for cause in err.chain().skip(1) {
        eprintln!("  caused by: {}", shown(cause.to_string()));
    }
    if let Some(hint) = input.and_then(|e| e.hint.as_deref()) {
        eprintln!("hint: {}", shown(hint.to_string()));
    }
    ExitCode::from(if input.is_some() {
        exit::INVALID_INPUT
    } else {
        exit::ERROR
    })
}
