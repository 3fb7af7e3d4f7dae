//! An infra repo as gpucap sees it: the config file, the calendars and forecasts it names, all
//! read and checked, with a digest of each file from the very bytes that were parsed. This is
//! the input edge that `demand`, `plan` and `apply` share: `plan` fingerprints a plan with these
//! digests, and `apply` computes them again ([`local_inputs`]) to refuse a stale plan.

use std::path::{Path, PathBuf};

use chrono::{DateTime, Utc};

use crate::calendar::{self, Campaign};
use crate::config::{self, Config};
use crate::demand::{self, DemandCurve, ForecastSource};
use crate::diagnostic::{InputError, Location};
use crate::forecast;
use crate::plan::InputDigest;
use crate::plan::fingerprint::input_name;
use crate::plan::gates::policy_inputs;
use crate::planner::ExistingCapacity;
use crate::policy::PolicyEngine;
use crate::timespec::Horizon;

/// Calendar extensions picked up by glob patterns; other files in a calendars folder
/// (READMEs, notes) are passed over.
const CALENDAR_EXTENSIONS: &[&str] = &["yaml", "yml", "toml", "ics"];

/// A loaded project.
#[derive(Debug)]
pub struct Project {
    pub config_path: PathBuf,
    /// The directory relative paths in the config are resolved against.
    pub root: PathBuf,
    pub config: Config,
    pub horizon: Horizon,
    pub calendar_files: Vec<PathBuf>,
    pub campaigns: Vec<Campaign>,
    pub forecasts: Vec<ForecastSource>,
    /// The digests of the files read (kinds `config`, `calendar`, `forecast`, named as
    /// [`Project::input_name`] does), each from exactly the bytes that were parsed.
    pub inputs: Vec<InputDigest>,
}

/// A project's budget gates, loaded once: the engine (built-in policies plus the config's
/// `budget.policies` directories), and the digests (kind `policy`) of the user policy files from
/// the very text it compiled.
#[derive(Debug)]
pub struct Policies {
    pub engine: PolicyEngine,
    pub inputs: Vec<InputDigest>,
}

impl Project {
    /// Reads the config and every input it names. `now` is the default planning start.
    pub fn load(config_path: &Path, now: DateTime<Utc>) -> anyhow::Result<Project> {
        let (config, config_text) = config::load(config_path)?;
        let root = config_path
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_default();
        let name = |path: &Path| input_name(&root, path);
        let mut inputs = vec![InputDigest::of(
            "config",
            &name(config_path),
            config_text.as_bytes(),
        )];
        let horizon = config.horizon(now);
        let calendar_files = calendar_files(&config, &root, config_path)?;
        tracing::debug!(files = calendar_files.len(), "reading calendars");
        let (campaigns, texts) = calendar::load_all(&calendar_files, horizon.end())?;
        for (path, text) in calendar_files.iter().zip(&texts) {
            inputs.push(InputDigest::of("calendar", &name(path), text.as_bytes()));
        }
        let mut forecasts = Vec::new();
        for f in &config.inputs.forecasts {
            let path = root.join(&f.path);
            let (series, text) = forecast::load(&path, f.pool.as_deref())?;
            inputs.push(InputDigest::of("forecast", &name(&path), text.as_bytes()));
            for series in series {
                forecasts.push(ForecastSource {
                    series,
                    flex: f.flex,
                    team: f.team.clone(),
                });
            }
        }
        Ok(Project {
            config_path: config_path.to_path_buf(),
            root,
            config,
            horizon,
            calendar_files,
            campaigns,
            forecasts,
            inputs,
        })
    }

    /// How a file is named among a plan's inputs: relative to [`Project::root`].
    pub fn input_name(&self, path: &Path) -> String {
        input_name(&self.root, path)
    }

    /// The config's `budget.policies` directories, resolved against [`Project::root`].
    pub fn policy_dirs(&self) -> Vec<PathBuf> {
        self.config
            .budget
            .policies
            .iter()
            .map(|d| self.root.join(d))
            .collect()
    }

    /// Loads the budget gates and digests the user policy files from the text loaded.
    pub fn policies(&self) -> anyhow::Result<Policies> {
        let engine =
            PolicyEngine::load(&self.policy_dirs()).map_err(crate::commands::policy::input)?;
        let inputs = policy_inputs(&engine, &self.root);
        Ok(Policies { engine, inputs })
    }

    /// Reads a `terraform show -json` file once: the capacity it holds, and the digest (kind
    /// `state`) of the bytes parsed.
    pub fn terraform_state(
        &self,
        path: &Path,
    ) -> Result<(Vec<ExistingCapacity>, InputDigest), InputError> {
        let (capacity, text) = crate::state::terraform::load(path)?;
        let digest = InputDigest::of("state", &self.input_name(path), text.as_bytes());
        Ok((capacity, digest))
    }

    /// The demand curve of this project, on whole hours.
    pub fn demand(&self) -> Result<DemandCurve, InputError> {
        self.demand_in(self.horizon)
    }

    /// The demand curve of this project on `horizon` (the project's, in periods of another
    /// length: [`crate::planner::periods`]).
    pub fn demand_in(&self, horizon: Horizon) -> Result<DemandCurve, InputError> {
        demand::build(&self.config, horizon, &self.campaigns, &self.forecasts).map_err(|mut e| {
            // Errors about a pool as a whole are the config's.
            if e.location.file.is_none() {
                e.location.file = Some(self.config_path.clone());
            }
            e
        })
    }
}

/// The digests of a project's local files as they are now: the config, calendars, forecasts,
/// user policies, and the given Terraform state files (those a plan was made with, as
/// `gpucap plan --terraform-state` took them). Compare a saved plan's recorded inputs with them
/// through [`crate::plan::fingerprint::stale_inputs`]; every file is read and checked as
/// `gpucap plan` reads it, so a file that no longer parses is an error here too.
pub fn local_inputs(
    config_path: &Path,
    now: DateTime<Utc>,
    state_files: &[PathBuf],
) -> anyhow::Result<Vec<InputDigest>> {
    let project = Project::load(config_path, now)?;
    let mut inputs = project.inputs.clone();
    inputs.extend(project.policies()?.inputs);
    for path in state_files {
        inputs.push(project.terraform_state(path)?.1);
    }
    inputs.sort();
    inputs.dedup();
    Ok(inputs)
}

/// Expands the config's calendar entries (paths or glob patterns) into files, sorted per entry
/// so results do not depend on directory order.
fn calendar_files(
    config: &Config,
    root: &Path,
    config_path: &Path,
) -> anyhow::Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    for (i, entry) in config.inputs.calendars.iter().enumerate() {
        let at = || Location::file(config_path).field(format!("inputs.calendars[{i}]"));
        let pattern = root.join(entry);
        let is_glob = entry.contains(['*', '?', '[']);
        if !is_glob {
            if !pattern.is_file() {
                return Err(InputError::new(
                    at(),
                    format!("calendar `{}` does not exist", pattern.display()),
                )
                .into());
            }
            files.push(pattern);
            continue;
        }
        let text = pattern.to_string_lossy().into_owned();
        let is_calendar = |p: &Path| {
            p.extension()
                .and_then(|e| e.to_str())
                .is_some_and(|e| CALENDAR_EXTENSIONS.contains(&e.to_ascii_lowercase().as_str()))
        };
        let mut matched: Vec<PathBuf> = Vec::new();
        for p in glob::glob(&text)
            .map_err(|e| InputError::new(at(), format!("bad glob pattern `{entry}`: {e}")))?
            .filter_map(Result::ok)
            .filter(|p| is_calendar(p))
        {
            // A calendar symlink to nothing is a calendar gone missing, not a file to pass over.
            if p.is_symlink() && !p.exists() {
                return Err(InputError::new(
                    at(),
                    format!(
                        "`{}` is a symlink to a file that does not exist",
                        p.display()
                    ),
                )
                .into());
            }
            if p.is_file() {
                matched.push(p);
            }
        }
        matched.sort();
        if matched.is_empty() {
            tracing::warn!("{}: `{entry}` matches no calendar files", at());
        }
        files.extend(matched);
    }
    files.dedup();
    Ok(files)
}

/// Writes a file all at once (see [`super::output`]): never half a file, never over a
/// directory, FIFO or device.
pub use super::output::write_atomically;
