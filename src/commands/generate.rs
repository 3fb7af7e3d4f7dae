//! `gpucap generate PLAN.json --out DIR`: writes the Terraform root module (or tf-json, or a
//! Pulumi YAML program) that carries out the plan's actions due in the current window, for a
//! reviewer to read in a pull request and Terraform to apply. Progress and warnings go to
//! stderr; the written file names go to stdout.

use std::path::{Path, PathBuf};

use chrono::Utc;
use clap::{Args, ValueEnum};

use crate::commands::common::{GlobalArgs, Outcome};
use crate::diagnostic::{InputError, Location};
use crate::plan;
use crate::render::terraform::{self, Format, Options};
use crate::timespec::{self, Span};

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum OutputFormat {
    /// Terraform native syntax (`main.tf`, `versions.tf`, `variables.tf`).
    Hcl,
    /// Terraform JSON syntax (`*.tf.json`).
    TfJson,
    /// A Pulumi YAML program (`Pulumi.yaml`).
    Pulumi,
}

#[derive(Debug, Args)]
pub struct GenerateArgs {
    /// The plan (`gpucap.plan/v1` JSON).
    pub plan: PathBuf,
    /// Directory to write the root module into (created if missing).
    #[arg(long, short = 'o')]
    pub out: PathBuf,
    /// Syntax of the generated code.
    #[arg(long, value_enum, default_value_t = OutputFormat::Hcl)]
    pub format: OutputFormat,
    /// Write the actions due within this long from now (`36h`, `7d`, `2w`).
    #[arg(long, default_value = "7d", allow_hyphen_values = true, value_parser = Span::parse)]
    pub window: Span,
    /// The current time (RFC 3339), for reproducible output and tests.
    #[arg(long, value_parser = timespec::parse_timestamp)]
    pub now: Option<chrono::DateTime<Utc>>,
    /// Module source instead of copying the modules next to the root module, e.g.
    /// `git::https://github.com/gpucap/gpucap.git?ref=v0.1.0` (`//modules/<name>` is inserted)
    /// or a template containing `{module}`.
    #[arg(long, value_name = "SOURCE")]
    pub module_source: Option<String>,
    /// How much more than planned a capacity block may cost when bought, in percent.
    #[arg(
        long,
        default_value_t = 5.0,
        value_name = "PERCENT",
        allow_negative_numbers = true
    )]
    pub price_tolerance: f64,
}

pub fn run(_global: &GlobalArgs, args: GenerateArgs) -> anyhow::Result<Outcome> {
    let plan = plan::read::read(&args.plan)
        .map_err(plan::read::ReadError::into_anyhow)?
        .plan;
    if !(0.0..=100.0).contains(&args.price_tolerance) {
        anyhow::bail!(InputError::new(
            Location::default().field("--price-tolerance"),
            "must be a percentage from 0 to 100"
        ));
    }
    let options = Options {
        now: args.now.unwrap_or_else(Utc::now),
        window: args.window.as_duration(),
        format: match args.format {
            OutputFormat::Hcl => Format::Hcl,
            OutputFormat::TfJson => Format::TfJson,
            OutputFormat::Pulumi => Format::Pulumi,
        },
        module_source: args.module_source,
        price_tolerance: args.price_tolerance / 100.0,
    };
    let rendered =
        terraform::write_root_module(&plan, &options, &args.out).map_err(|e| match e {
            terraform::GenerateError::Input(mut input) => {
                input.location.file = Some(args.plan.clone());
                anyhow::Error::new(input)
            }
            other => anyhow::Error::new(other),
        })?;
    for (path, _) in &rendered.files {
        println!("{}", args.out.join(path).display());
    }
    summarise(&rendered, &args.out);
    Ok(Outcome::OK)
}

/// What was written and what was left, on stderr.
pub fn summarise(rendered: &terraform::Rendered, out: &Path) {
    let root = &rendered.root;
    for s in &root.skipped {
        tracing::warn!("action {}: {}", s.action, s.reason);
    }
    eprintln!(
        "wrote {} module call(s) for {} due action(s) into {}; {} action(s) left for later runs, {} over, {} release(s) need no code{}",
        root.calls.len(),
        root.due - root.skipped.len(),
        out.display(),
        root.later,
        root.over,
        root.releases,
        if root.skipped.is_empty() {
            String::new()
        } else {
            format!(
                "; {} due action(s) need doing by hand (see warnings)",
                root.skipped.len()
            )
        }
    );
}
