//! The command line: clap types, logging set-up, and the mapping from errors to exit codes.
//!
//! clap stays in this module. Each subcommand's arguments are handed to a plain function in
//! [`crate::commands`], which returns an [`Outcome`]; nothing below this layer sees clap.

use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand, ValueEnum};

use crate::commands;
use crate::diagnostic::InputError;

/// Exit statuses, documented in the README.
pub mod exit {
    /// Success.
    pub const OK: u8 = 0;
    /// A runtime failure (I/O, a provider, a bug).
    pub const ERROR: u8 = 1;
    /// Bad input: a malformed config, calendar, forecast, problem or plan.
    pub const INVALID_INPUT: u8 = 2;
    /// `gpucap plan --detailed-exitcode`: the plan has actions (with that flag, every error
    /// exits 1, as Terraform's `-detailed-exitcode` does).
    pub const CHANGES: u8 = 2;
    /// The budget gates denied the plan.
    pub const DENIED: u8 = 3;
}

/// What a command returns when it did not fail.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Outcome(pub u8);

impl Outcome {
    pub const OK: Outcome = Outcome(exit::OK);
}

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

#[derive(Debug, Args)]
pub struct GlobalArgs {
    /// The project configuration.
    #[arg(
        short = 'c',
        long,
        global = true,
        default_value = "gpucap.toml",
        env = "GPUCAP_CONFIG"
    )]
    pub config: PathBuf,
    /// More logging on stderr (-v: debug, -vv: trace). `RUST_LOG` overrides.
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    pub verbose: u8,
    /// Only errors on stderr.
    #[arg(short, long, global = true, conflicts_with = "verbose")]
    pub quiet: bool,
    /// When to use colour.
    #[arg(long, global = true, value_enum, default_value_t = ColorChoice::Auto)]
    pub color: ColorChoice,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ColorChoice {
    Auto,
    Always,
    Never,
}

/// How a command prints its result on stdout.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Default)]
pub enum Format {
    /// Tables and charts for a terminal.
    #[default]
    Table,
    /// Machine-readable JSON.
    Json,
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
}

pub fn main() -> ExitCode {
    let cli = Cli::parse();
    init_logging(&cli.global);
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

/// Writes a command's result on stdout. A closed pipe (`gpucap plan | head`) is not an error:
/// the reader has what it wanted.
pub fn stdout(text: &str) -> anyhow::Result<()> {
    use std::io::Write as _;
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(e.into()),
        _ => Ok(()),
    }
}

/// Prints an error chain with hints on stderr and picks the exit status.
fn report(err: &anyhow::Error) -> ExitCode {
    let input = err.chain().find_map(|e| e.downcast_ref::<InputError>());
    eprintln!("error: {err}");
    for cause in err.chain().skip(1) {
        eprintln!("  caused by: {cause}");
    }
    if let Some(hint) = input.and_then(|e| e.hint.as_deref()) {
        eprintln!("hint: {hint}");
    }
    ExitCode::from(if input.is_some() {
        exit::INVALID_INPUT
    } else {
        exit::ERROR
    })
}

fn init_logging(global: &GlobalArgs) {
    use tracing_subscriber::EnvFilter;
    let level = match (global.quiet, global.verbose) {
        (true, _) => "error",
        (false, 0) => "warn",
        (false, 1) => "debug",
        (false, _) => "trace",
    };
    let filter = EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| EnvFilter::new(format!("gpucap={level},gpucap_provider={level}")));
    let ansi = match global.color {
        ColorChoice::Always => true,
        ColorChoice::Never => false,
        ColorChoice::Auto => {
            std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none()
        }
    };
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(ansi)
        .with_target(false)
        .without_time()
        .init();
}

/// Whether stdout output should be coloured.
pub fn stdout_color(choice: ColorChoice) -> bool {
    match choice {
        ColorChoice::Always => true,
        ColorChoice::Never => false,
        ColorChoice::Auto => {
            std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none()
        }
    }
}
