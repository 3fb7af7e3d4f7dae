//! Terraform root modules for a plan: the module calls for the actions due in the current
//! window, written as HCL (`terraform fmt` form), as tf-json, or as a Pulumi YAML program, with
//! a copy of (or a pinned source for) the hand-written modules under `modules/`.
//!
//! [`render`] is pure (plan in, files out); [`write_root_module`] also writes them, atomically.

pub mod calls;
pub mod hcl;
pub mod json;
pub mod modules;
pub mod names;
pub mod output;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use chrono::{DateTime, Duration, Utc};

use crate::diagnostic::InputError;
use crate::plan::Plan;
use calls::{Module, Provider, Selection};
pub use calls::{ModuleCall, RootModule, Skipped};
use hcl::{Block, Item, Value};

/// The syntax of the generated code.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Format {
    /// `main.tf`, `versions.tf`, `variables.tf`.
    #[default]
    Hcl,
    /// The same as `.tf.json`.
    TfJson,
    /// `Pulumi.yaml`: the same resources as a Pulumi YAML program.
    Pulumi,
}

/// How to generate.
#[derive(Debug, Clone, PartialEq)]
pub struct Options {
    /// Actions due by `now + window` are written.
    pub now: DateTime<Utc>,
    pub window: Duration,
    pub format: Format,
    /// Where module calls point: `None` copies the modules into `modules/` next to the root
    /// module; otherwise a source such as `git::https://host/repo.git?ref=v1.2.0` (the module's
    /// directory is inserted as `//modules/<name>`) or a template containing `{module}`.
    pub module_source: Option<String>,
    /// How much more than the planned price a capacity block may cost at apply time (0.05 = 5 %).
    pub price_tolerance: f64,
}

impl Options {
    pub fn new(now: DateTime<Utc>) -> Options {
        Options {
            now,
            window: Duration::days(7),
            format: Format::Hcl,
            module_source: None,
            price_tolerance: 0.05,
        }
    }
}

/// The generated files (paths relative to the output directory) and what was selected.
#[derive(Debug, Clone, PartialEq)]
pub struct Rendered {
    pub files: Vec<(PathBuf, String)>,
    pub root: RootModule,
}

/// Why generation failed.
#[derive(Debug, thiserror::Error)]
pub enum GenerateError {
    #[error(transparent)]
    Input(#[from] InputError),
    #[error("cannot write `{path}`: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// The files of the root module for `plan` (pure).
pub fn render(plan: &Plan, options: &Options) -> Result<Rendered, InputError> {
    let root = calls::root_module(
        plan,
        &Selection {
            now: options.now,
            window: options.window,
            price_tolerance: options.price_tolerance,
        },
    )?;
    let mut files = match options.format {
        Format::Hcl => vec![
            ("main.tf".into(), hcl::to_string(&main(&root, options))),
            ("versions.tf".into(), hcl::to_string(&versions(&root))),
        ],
        Format::TfJson => vec![
            (
                "main.tf.json".into(),
                json::to_string(&main(&root, options)),
            ),
            ("versions.tf.json".into(), json::to_string(&versions(&root))),
        ],
        Format::Pulumi => vec![("Pulumi.yaml".into(), super::pulumi::program(&root))],
    };
    if options.format != Format::Pulumi && !root.inputs.is_empty() {
        let vars = variables(&root);
        files.push(match options.format {
            Format::TfJson => ("variables.tf.json".into(), json::to_string(&vars)),
            _ => ("variables.tf".into(), hcl::to_string(&vars)),
        });
    }
    if options.format != Format::Pulumi && options.module_source.is_none() {
        let used: BTreeSet<Module> = root.calls.iter().map(|c| c.module).collect();
        for module in used {
            for (name, text) in modules::files(module) {
                let path = Path::new("modules").join(module.dir()).join(name);
                files.push((path, (*text).to_string()));
            }
        }
    }
    files.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(Rendered { files, root })
}

/// Renders and writes the root module into `out_dir` (created if missing). Either every file
/// is written or none: the files go to a fresh directory beside `out_dir` first, which then
/// replaces the files gpucap wrote there before. Files gpucap does not write (a `.terraform`
/// directory, `terraform.tfvars`, a lock file) are kept.
pub fn write_root_module(
    plan: &Plan,
    options: &Options,
    out_dir: &Path,
) -> Result<Rendered, GenerateError> {
    let rendered = render(plan, options)?;
    output::replace(out_dir, &rendered.files)?;
    Ok(rendered)
}

fn header(root: &RootModule) -> Vec<Item> {
    let mut items: Vec<Item> = root.header.iter().cloned().map(Item::Comment).collect();
    items.push(Item::Blank);
    items
}

fn source(module: Module, options: &Options) -> String {
    match &options.module_source {
        None => format!("./modules/{}", module.dir()),
        Some(s) if s.contains("{module}") => s.replace("{module}", module.dir()),
        Some(s) => {
            let (base, query) = s
                .split_once('?')
                .map_or((s.as_str(), None), |(b, q)| (b, Some(q)));
            let base = base.trim_end_matches('/');
            match query {
                Some(q) => format!("{base}//modules/{}?{q}", module.dir()),
                None => format!("{base}//modules/{}", module.dir()),
            }
        }
    }
}

/// `main.tf`: the plan's identity as locals, one module call per due purchase or pool, and a
/// comment for each due action no module can carry out.
fn main(root: &RootModule, options: &Options) -> Vec<Item> {
    let mut items = header(root);
    items.push(Item::Block(
        Block::new("locals", &[])
            .attr("plan_id", Value::str(&root.plan_id))
            .attr("plan_fingerprint", Value::str(&root.plan_fingerprint)),
    ));
    for call in &root.calls {
        items.push(Item::Blank);
        items.extend(call.comment.iter().cloned().map(Item::Comment));
        let mut block = Block::new("module", &[call.name.as_str()])
            .attr("source", Value::Str(source(call.module, options)));
        if let Some(alias) = &call.provider_alias {
            block = block.attr(
                "providers",
                Value::Object(vec![("aws".into(), Value::Ref(format!("aws.{alias}")))]),
            );
        }
        block = block.item(Item::Blank);
        for (key, value) in &call.args {
            block = block.attr(key, value.clone());
        }
        items.push(Item::Block(block));
    }
    if !root.skipped.is_empty() {
        items.push(Item::Blank);
        items.push(Item::Comment(
            "Due actions with no Terraform resource: carry them out by hand.".into(),
        ));
        for s in &root.skipped {
            items.push(Item::Comment(format!("- {}: {}", s.action, s.reason)));
        }
    }
    items
}

/// `versions.tf`: Terraform and provider constraints (the modules' own), and the provider
/// configurations the calls need (one `aws` per region).
fn versions(root: &RootModule) -> Vec<Item> {
    let mut items = header(root);
    let mut required = Block::new("required_providers", &[]);
    for p in &root.providers {
        required = required.attr(
            p.local_name(),
            Value::Object(vec![
                ("source".into(), Value::str(p.source())),
                ("version".into(), Value::str(p.version())),
            ]),
        );
    }
    items.push(Item::Block(
        Block::new("terraform", &[])
            .attr("required_version", Value::str(">= 1.5.0"))
            .item(Item::Blank)
            .item(Item::Block(required)),
    ));
    for (alias, region) in &root.aws_regions {
        items.push(Item::Blank);
        items.push(Item::Block(
            Block::new("provider", &["aws"])
                .attr("alias", Value::str(alias))
                .attr("region", Value::str(region)),
        ));
    }
    if root.providers.contains(&Provider::Azurerm) {
        items.push(Item::Blank);
        items.push(Item::Block(
            Block::new("provider", &["azurerm"]).item(Item::Block(Block::new("features", &[]))),
        ));
    }
    items
}

/// `variables.tf`: what the infra repository supplies (images, subnets, resource groups).
fn variables(root: &RootModule) -> Vec<Item> {
    let mut items = header(root);
    for (i, input) in root.inputs.iter().enumerate() {
        if i > 0 {
            items.push(Item::Blank);
        }
        let mut block = Block::new("variable", &[input.name.as_str()])
            .attr("description", Value::str(&input.description))
            .attr("type", Value::Type(input.ty.into()));
        if input.default_null {
            block = block.attr("default", Value::Ref("null".into()));
        }
        items.push(Item::Block(block));
    }
    items
}
