//! `gpucap init`: scaffolds a commented `gpucap.toml` and an example calendar, so a new infra
//! repo starts from documented defaults rather than a blank file.

use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use clap::Args;

use crate::commands::common::{GlobalArgs, Outcome};

/// The commented configuration `gpucap init` writes; it parses to the defaults.
pub const CONFIG_TEMPLATE: &str = include_str!("templates/gpucap.toml");
const CALENDAR_TEMPLATE: &str = include_str!("templates/campaigns.yaml");

#[derive(Debug, Args)]
pub struct InitArgs {
    /// Directory to initialise.
    #[arg(default_value = ".")]
    pub dir: PathBuf,
    /// Overwrite existing files.
    #[arg(long)]
    pub force: bool,
}

pub fn run(_global: &GlobalArgs, args: InitArgs) -> anyhow::Result<Outcome> {
    let files = [
        (args.dir.join("gpucap.toml"), CONFIG_TEMPLATE),
        (
            args.dir.join("calendars").join("campaigns.yaml"),
            CALENDAR_TEMPLATE,
        ),
    ];
    if !args.force
        && let Some((existing, _)) = files.iter().find(|(p, _)| p.exists())
    {
        bail!(
            "`{}` already exists; pass `--force` to overwrite it",
            existing.display()
        );
    }
    for (path, text) in &files {
        write_new(path, text)?;
        eprintln!("wrote {}", path.display());
    }
    eprintln!(
        "next: edit the calendar, then run `gpucap demand` and `gpucap plan` in {}; plans price \
         from the built-in snapshot until you set `[prices] offline = false` for live prices",
        args.dir.display()
    );
    Ok(Outcome::OK)
}

fn write_new(path: &Path, text: &str) -> anyhow::Result<()> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)
            .with_context(|| format!("cannot create `{}`", parent.display()))?;
    }
    std::fs::write(path, text).with_context(|| format!("cannot write `{}`", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;

    #[test]
    fn the_template_parses_to_the_defaults() {
        let c = Config::parse(CONFIG_TEMPLATE, Path::new("gpucap.toml")).unwrap();
        assert_eq!(c.planning.horizon.as_hours(), 13 * 7 * 24);
        assert_eq!(c.scenarios.len(), 3);
        assert_eq!(c.scenarios[1].slip.as_hours(), 14 * 24);
        // A newcomer's first plan answers offline, from the snapshot.
        assert!(c.prices.offline);
    }
}
