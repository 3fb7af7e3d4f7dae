//! What every subcommand shares: the global flags, the output format and colour choices, the
//! [`Outcome`] a command returns with its exit status, and writing to stdout.
//!
//! It lives here, below the commands, so that [`crate::cli`] depends on the commands and never
//! the other way round: `cli` parses arguments and reports errors, the commands only see these
//! plain types.

use std::io::IsTerminal;
use std::path::PathBuf;

use clap::{Args, ValueEnum};

/// Exit statuses, documented in docs/commands.md ("Exit codes").
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

/// Flags every subcommand takes.
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

/// The columns text on stdout should fit: `COLUMNS` when it is set to a number, else the
/// terminal's width, else 100 (a pipe, a file, a CI log). Never below 40.
pub fn stdout_width() -> usize {
    width_of(terminal_size::terminal_size_of(std::io::stdout()))
}

/// The columns progress and warnings on stderr should fit: `COLUMNS`, else the terminal's
/// width; `None` when stderr is a pipe or a file (a CI log keeps one message per line, for
/// `grep`).
pub fn stderr_width() -> Option<usize> {
    columns()
        .or(terminal_size::terminal_size_of(std::io::stderr()).map(|(w, _)| usize::from(w.0)))
        .map(|w| w.max(40))
}

fn width_of(terminal: Option<(terminal_size::Width, terminal_size::Height)>) -> usize {
    columns()
        .or(terminal.map(|(w, _)| usize::from(w.0)))
        .unwrap_or(100)
        .max(40)
}

/// `COLUMNS`, when it is set to a number above 0.
fn columns() -> Option<usize> {
    std::env::var("COLUMNS")
        .ok()
        .and_then(|c| c.trim().parse::<usize>().ok())
        .filter(|&c| c > 0)
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

/// `--time-limit SECONDS`: a finite number of seconds above 0 and at most a week
/// ([`crate::limits::MAX_TIME_LIMIT_SECS`]). NaN, infinities and negative numbers are refused
/// here, with the value in the message, rather than panic in `Duration::from_secs_f64`.
pub fn parse_time_limit(s: &str) -> Result<std::time::Duration, String> {
    use crate::limits::MAX_TIME_LIMIT_SECS;
    let secs: f64 = s
        .trim()
        .parse()
        .map_err(|_| format!("`{s}` is not a number of seconds"))?;
    if !(secs.is_finite() && secs > 0.0 && secs <= MAX_TIME_LIMIT_SECS) {
        return Err(format!(
            "`{s}` is not a time limit: give a number of seconds above 0 and at most {MAX_TIME_LIMIT_SECS} (a week)"
        ));
    }
    Ok(std::time::Duration::from_secs_f64(secs))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn time_limits_are_finite_positive_seconds() {
        assert_eq!(
            parse_time_limit("1.5").unwrap(),
            std::time::Duration::from_millis(1500)
        );
        for bad in ["nan", "NaN", "inf", "-inf", "-5", "0", "1e300", "soon", ""] {
            let err = parse_time_limit(bad).unwrap_err();
            assert!(err.contains(&format!("`{bad}`")), "{bad}: {err}");
        }
    }
}
