//! The command line: clap types and the mapping from errors to exit codes (logging is set up
//! by [`crate::logging`]).
//!
//! The top-level parser stays in this module. Each subcommand's arguments are handed to a plain
//! function in [`crate::commands`], which returns an [`Outcome`]; what the commands share (the
//! global flags, exit statuses, stdout) is in [`crate::commands::common`], so that the commands
//! never depend on this module.

use std::process::ExitCode;

use clap::{Args, CommandFactory, Parser, Subcommand};

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
    /// Remove a state lock a run left behind on another host, or in S3 before its lease runs
    /// out (its id is in the waiting run's error). A lock left by a dead process on this host
    /// is taken over by the next run without this.
    ForceUnlock(commands::state::ForceUnlockArgs),
    /// Print a shell completion script (bash, zsh, fish, powershell, elvish) on stdout.
    Completions(CompletionsArgs),
    /// Print the man page (roff) on stdout.
    Man,
}

#[derive(Debug, Args)]
pub struct CompletionsArgs {
    /// The shell to complete in.
    #[arg(value_enum)]
    pub shell: clap_complete::Shell,
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
        Command::Completions(args) => print(&completions(args.shell)),
        Command::Man => man().and_then(|page| print(&page)),
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

/// The completion script for `shell`, generated from the parser itself.
pub fn completions(shell: clap_complete::Shell) -> String {
    let mut out = Vec::new();
    clap_complete::generate(shell, &mut Cli::command(), "gpucap", &mut out);
    String::from_utf8_lossy(&out).into_owned()
}

/// The man page (section 1, roff) of `gpucap` and its subcommands' synopsis, from the parser.
pub fn man() -> anyhow::Result<String> {
    let mut out = Vec::new();
    clap_mangen::Man::new(Cli::command()).render(&mut out)?;
    Ok(String::from_utf8(out)?)
}

fn print(text: &str) -> anyhow::Result<Outcome> {
    commands::common::stdout(text)?;
    Ok(Outcome::OK)
}

/// Prints an error chain with hints on stderr and picks the exit status.
fn report(err: &anyhow::Error) -> ExitCode {
    let input = err.chain().find_map(|e| e.downcast_ref::<InputError>());
    // Messages quote input; a control character in it must not reach the terminal raw.
    let shown = |s: String| crate::text::visible_lines(&s).into_owned();
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bash_completion_knows_every_subcommand() {
        let script = completions(clap_complete::Shell::Bash);
        for name in Cli::command().get_subcommands().map(|c| c.get_name()) {
            assert!(script.contains(name), "`{name}` missing from:\n{script}");
        }
        assert!(
            script.contains("complete -F"),
            "a bash completion: {script}"
        );
        for shell in [
            clap_complete::Shell::Zsh,
            clap_complete::Shell::Fish,
            clap_complete::Shell::PowerShell,
            clap_complete::Shell::Elvish,
        ] {
            assert!(completions(shell).contains("force-unlock"), "{shell}");
        }
    }

    #[test]
    fn the_man_page_is_roff_with_a_title_and_the_subcommands() {
        let page = man().unwrap();
        // clap_mangen defines the apostrophe string (`.ie`/`.el`) first, then the title.
        let first = page
            .lines()
            .find(|l| !l.starts_with(".ie ") && !l.starts_with(".el "))
            .unwrap_or_default();
        assert!(first.starts_with(".TH gpucap 1"), "{page}");
        assert!(
            page.contains(".SH NAME") && page.contains(".SH SUBCOMMANDS"),
            "{page}"
        );
        assert!(page.contains("force\\-unlock"), "{page}");
        // Where groff is installed, it reads the page without a warning (`-ww`: all of them).
        let groff = std::process::Command::new("groff")
            .args(["-man", "-Tutf8", "-ww", "-z"])
            .stdin(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn();
        if let Ok(mut groff) = groff {
            use std::io::Write as _;
            groff
                .stdin
                .take()
                .unwrap()
                .write_all(page.as_bytes())
                .unwrap();
            let out = groff.wait_with_output().unwrap();
            let warnings = String::from_utf8_lossy(&out.stderr);
            assert!(out.status.success() && warnings.is_empty(), "{warnings}");
        }
    }
}
