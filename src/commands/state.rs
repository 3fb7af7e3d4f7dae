//! `gpucap state list`, `gpucap state show ID` and `gpucap force-unlock ID`: what gpucap
//! manages, read from the state backend the config names, and the way out of a lock a killed
//! run left behind.

use std::path::Path;

use anyhow::Context as _;
use clap::{Args, Subcommand};
use comfy_table::{Table, presets::UTF8_BORDERS_ONLY};

use crate::commands::common::{Format, GlobalArgs, Outcome, exit, stdout};
use crate::config;
use crate::state::{AuditRecord, ManagedResource, StateBackend};
use crate::timespec::rfc3339;

#[derive(Debug, Args)]
pub struct StateArgs {
    #[command(subcommand)]
    pub command: StateCommand,
}

#[derive(Debug, Subcommand)]
pub enum StateCommand {
    /// Everything gpucap manages: id, kind, place, instances, window, cost, status, and the
    /// plan and action that created it.
    List {
        #[arg(long, value_enum, default_value_t = Format::Table)]
        format: Format,
    },
    /// One managed resource, with the journal records of the action that created it.
    Show {
        /// The cloud's id (`cr-…`, a pool name).
        id: String,
    },
}

#[derive(Debug, Args)]
pub struct ForceUnlockArgs {
    /// The lock id, as the error of a waiting run names it.
    pub id: String,
}

fn open(global: &GlobalArgs) -> anyhow::Result<Box<dyn StateBackend>> {
    let (config, _) = config::load(&global.config)?;
    let root = global
        .config
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default();
    Ok(crate::state::backend::open(&config.state, &root)?)
}

fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")
}

pub fn run(global: &GlobalArgs, args: StateArgs) -> anyhow::Result<Outcome> {
    let backend = open(global)?;
    let rt = runtime()?;
    let state = rt.block_on(backend.read_state())?;
    match args.command {
        StateCommand::List { format } => {
            let resources = state.map(|s| s.resources).unwrap_or_default();
            let text = match format {
                Format::Json => serde_json::to_string_pretty(&resources)? + "\n",
                Format::Table if resources.is_empty() => {
                    if !global.quiet {
                        eprintln!("gpucap manages nothing yet in {}", backend.location());
                    }
                    String::new()
                }
                Format::Table => table(&resources),
            };
            stdout(&text)?;
            Ok(Outcome::OK)
        }
        StateCommand::Show { id } => {
            let Some(r) = state
                .as_ref()
                .and_then(|s| s.resources.iter().find(|r| r.id == id))
            else {
                eprintln!(
                    "error: `{id}` is not in the state at {}; `gpucap state list` shows what is",
                    backend.location()
                );
                return Ok(Outcome(exit::ERROR));
            };
            let history = rt.block_on(backend.read_journal())?;
            let records: Vec<_> = history
                .records
                .iter()
                .filter(|j| j.action == r.action || j.resource_id.as_deref() == Some(&id))
                .collect();
            let mut doc = serde_json::to_value(r)?;
            doc["journal"] = serde_json::to_value(&records)?;
            stdout(&(serde_json::to_string_pretty(&doc)? + "\n"))?;
            Ok(Outcome::OK)
        }
    }
}

fn table(resources: &[ManagedResource]) -> String {
    let mut t = Table::new();
    t.load_preset(UTF8_BORDERS_ONLY).set_header([
        "id", "kind", "cloud", "place", "type", "n", "start", "end", "cost $", "status", "plan",
        "action",
    ]);
    for r in resources {
        let short = r
            .plan
            .strip_prefix("sha256:")
            .unwrap_or(&r.plan)
            .chars()
            .take(12)
            .collect::<String>();
        t.add_row([
            r.id.clone(),
            r.kind.as_str().to_string(),
            r.cloud.as_str().to_string(),
            r.zone.clone().unwrap_or_else(|| r.region.clone()),
            r.instance_type.clone(),
            r.instances.to_string(),
            r.start.map(rfc3339).unwrap_or_default(),
            r.end.map(rfc3339).unwrap_or_default(),
            format!("{:.2}", r.cost),
            format!("{:?}", r.status).to_lowercase(),
            short,
            r.action.clone(),
        ]);
    }
    t.to_string() + "\n"
}

pub fn force_unlock(global: &GlobalArgs, args: ForceUnlockArgs) -> anyhow::Result<Outcome> {
    let backend = open(global)?;
    let rt = runtime()?;
    let removed = rt.block_on(backend.force_unlock(&args.id))?;
    rt.block_on(backend.append_audit(&AuditRecord {
        at: chrono::Utc::now(),
        who: crate::state::lock::who(),
        run: removed.id.clone(),
        plan_fingerprint: String::new(),
        action: "*".into(),
        api: "force-unlock".into(),
        request_id: None,
        outcome: "force-unlock".into(),
        cost: None,
        detail: Some(format!(
            "removed the lock of {} on {} (pid {}, {}) taken at {}",
            removed.who, removed.host, removed.pid, removed.operation, removed.created_at
        )),
    }))?;
    eprintln!(
        "removed lock {} ({} on {}, {} since {}); the next `gpucap apply` settles what that run left unresolved",
        removed.id, removed.who, removed.host, removed.operation, removed.created_at
    );
    Ok(Outcome::OK)
}
