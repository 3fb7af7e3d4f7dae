//! From a plan to the module calls of a root module: the actions due in the window (chosen by
//! [`crate::plan::due`], the rule `apply` shares), which module each maps to, and the arguments each call passes, named after pools and action ids.
//! Pure and format-neutral: HCL, tf-json and Pulumi are all written from this [`RootModule`].

use std::collections::{BTreeMap, BTreeSet};

use chrono::{DateTime, Duration, Utc};

use super::hcl::Value;
use super::names::{self, MAX_IDENT, Namer};
use crate::diagnostic::{InputError, Location};
use crate::plan::due::{self, DueAction, Window};
use crate::plan::{Action, ActionKind, Plan};

/// The hand-written modules under `modules/`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Module {
    AwsCapacityBlock,
    AwsCapacityReservation,
    AwsGpuPool,
    GcpFutureReservation,
    GcpReservation,
    GcpCommitment,
    GcpGpuPool,
    AzureCapacityReservation,
}

impl Module {
    pub const ALL: [Module; 8] = [
        Module::AwsCapacityBlock,
        Module::AwsCapacityReservation,
        Module::AwsGpuPool,
        Module::GcpFutureReservation,
        Module::GcpReservation,
        Module::GcpCommitment,
        Module::GcpGpuPool,
        Module::AzureCapacityReservation,
    ];

    /// The directory under `modules/`.
    pub fn dir(self) -> &'static str {
        match self {
            Module::AwsCapacityBlock => "aws-capacity-block",
            Module::AwsCapacityReservation => "aws-capacity-reservation",
            Module::AwsGpuPool => "aws-gpu-pool",
            Module::GcpFutureReservation => "gcp-future-reservation",
            Module::GcpReservation => "gcp-reservation",
            Module::GcpCommitment => "gcp-commitment",
            Module::GcpGpuPool => "gcp-gpu-pool",
            Module::AzureCapacityReservation => "azure-capacity-reservation",
        }
    }

    pub fn provider(self) -> Provider {
        match self {
            Module::AwsCapacityBlock | Module::AwsCapacityReservation | Module::AwsGpuPool => {
                Provider::Aws
            }
            Module::GcpFutureReservation => Provider::GoogleBeta,
            Module::GcpReservation | Module::GcpCommitment | Module::GcpGpuPool => Provider::Google,
            Module::AzureCapacityReservation => Provider::Azurerm,
        }
    }
}

/// Terraform providers a root module may need, with the constraints the modules declare.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Provider {
    Aws,
    Google,
    GoogleBeta,
    Azurerm,
}

impl Provider {
    pub fn local_name(self) -> &'static str {
        match self {
            Provider::Aws => "aws",
            Provider::Google => "google",
            Provider::GoogleBeta => "google-beta",
            Provider::Azurerm => "azurerm",
        }
    }

    pub fn source(self) -> &'static str {
        match self {
            Provider::Aws => "hashicorp/aws",
            Provider::Google => "hashicorp/google",
            Provider::GoogleBeta => "hashicorp/google-beta",
            Provider::Azurerm => "hashicorp/azurerm",
        }
    }

    pub fn version(self) -> &'static str {
        match self {
            Provider::Aws => ">= 5.40.0, < 7.0.0",
            Provider::Google => ">= 6.0.0, < 8.0.0",
            Provider::GoogleBeta => ">= 6.37.0, < 8.0.0",
            Provider::Azurerm => ">= 4.0.0, < 5.0.0",
        }
    }
}

/// One `module` block.
#[derive(Debug, Clone, PartialEq)]
pub struct ModuleCall {
    /// The block label: sanitised and unique, from the pool and action ids.
    pub name: String,
    pub module: Module,
    pub pool: String,
    /// The plan actions this call carries out.
    pub actions: Vec<String>,
    /// Comment lines above the block (plain text; escaped when written).
    pub comment: Vec<String>,
    /// `aws.<alias>` for AWS calls: AWS providers are per region.
    pub provider_alias: Option<String>,
    /// Arguments in the order written; names are the module's variable names.
    pub args: Vec<(&'static str, Value)>,
}

impl ModuleCall {
    pub fn arg(&self, name: &str) -> Option<&Value> {
        self.args.iter().find(|(k, _)| *k == name).map(|(_, v)| v)
    }
}

/// A root-module variable the infra repository supplies (images, subnets, resource groups).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Input {
    pub name: String,
    pub ty: &'static str,
    pub description: String,
    /// `None`: required.
    pub default_null: bool,
}

/// A due action no module can carry out, written as a comment and warned about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skipped {
    pub action: String,
    pub reason: String,
}

/// Everything a root module holds, before any syntax.
#[derive(Debug, Clone, PartialEq)]
pub struct RootModule {
    pub header: Vec<String>,
    pub plan_id: String,
    pub plan_fingerprint: String,
    pub calls: Vec<ModuleCall>,
    /// `aws` provider aliases: alias → region.
    pub aws_regions: BTreeMap<String, String>,
    pub providers: BTreeSet<Provider>,
    pub inputs: Vec<Input>,
    pub skipped: Vec<Skipped>,
    /// Counts for the stderr summary.
    pub due: usize,
    pub later: usize,
    pub over: usize,
    pub releases: usize,
}

/// What to select and how to price-guard purchases.
#[derive(Debug, Clone, PartialEq)]
pub struct Selection {
    pub now: DateTime<Utc>,
    pub window: Duration,
    /// Fraction over the planned price a capacity block may cost at apply time.
    pub price_tolerance: f64,
}

/// The plan's actions due by `now + window` whose capacity is not over, as module calls.
pub fn root_module(plan: &Plan, selection: &Selection) -> Result<RootModule, InputError> {
    let digest = &plan.fingerprint.digest;
    let hex = digest
        .strip_prefix("sha256:")
        .filter(|h| {
            h.len() == 64
                && h.bytes()
                    .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        })
        .ok_or_else(|| {
            InputError::new(
                Location::default().field("fingerprint.digest"),
                format!("`{digest}` is not `sha256:` followed by 64 lowercase hex digits"),
            )
        })?;
    let horizon = &plan.horizon;
    let header = vec![
        "Generated by `gpucap generate`: do not edit; generate again from a new plan.".into(),
        format!("Plan created {}, fingerprint {digest}", plan.created_at),
        format!(
            "Horizon {} to {} ({} hours); only the actions due in the generation window are here,",
            horizon.start, horizon.end, horizon.hours
        ),
        "the rest stays in the plan for later runs.".into(),
    ];

    // Releases need no code of their own (`modules/README.md`: a release is the removal of a
    // reversible module call), so only `selected.due` becomes calls; releases are counted.
    let selected = due::select(
        plan,
        &Window {
            now: selection.now,
            window: selection.window,
        },
    )?;

    let teams: BTreeMap<&str, &str> = plan
        .campaigns
        .iter()
        .filter_map(|c| Some((c.name.as_str(), c.team.as_deref()?)))
        .collect();

    let mut builder = Builder {
        root: RootModule {
            header,
            plan_id: format!("gpucap-{}", &hex[..12]),
            plan_fingerprint: digest.clone(),
            calls: Vec::new(),
            aws_regions: BTreeMap::new(),
            providers: BTreeSet::new(),
            inputs: Vec::new(),
            skipped: Vec::new(),
            due: selected.due.len(),
            later: selected.later,
            over: selected.over,
            releases: selected.releases,
        },
        teams,
        selection,
        inputs: BTreeMap::new(),
    };
    builder.build(&selected.due);
    Ok(builder.root)
}

struct Builder<'a> {
    root: RootModule,
    teams: BTreeMap<&'a str, &'a str>,
    selection: &'a Selection,
    inputs: BTreeMap<String, Input>,
}

/// The key that groups runs into one pool call.
fn pool_key(a: &Action, spot_split: bool) -> String {
    let mode = match (spot_split, a.kind) {
        (true, ActionKind::RunSpot) => "-spot",
        (true, _) => "-od",
        (false, _) => "",
    };
    // An Auto Scaling group spans the zones of its subnets; a managed instance group is zonal.
    let place = match (a.cloud.as_str(), a.zone.as_deref()) {
        ("gcp", Some(zone)) => zone,
        _ => a.region.as_str(),
    };
    format!(
        "pool-{}-{}-{place}-{}{mode}",
        a.pool, a.cloud, a.instance_type
    )
}

fn is_run(kind: ActionKind) -> bool {
    matches!(kind, ActionKind::RunOnDemand | ActionKind::RunSpot)
}

impl<'a> Builder<'a> {
    fn build(&mut self, due: &[DueAction<'a>]) {
        // Every call's raw name first, so collisions resolve the same way whatever the order.
        let raw = |d: &DueAction| {
            if is_run(d.action.kind) {
                pool_key(d.action, d.action.cloud == "gcp")
            } else {
                d.action.id.clone()
            }
        };
        let raws: Vec<String> = due.iter().map(raw).collect();
        let namer = Namer::assign(raws.iter().map(String::as_str), MAX_IDENT);
        let regions: BTreeSet<&str> = due
            .iter()
            .filter(|d| d.action.cloud == "aws")
            .map(|d| d.action.region.as_str())
            .collect();
        let aliases = Namer::assign(regions.iter().copied(), MAX_IDENT);
        for region in &regions {
            self.root
                .aws_regions
                .insert(aliases.get(region).replace('-', "_"), region.to_string());
        }

        // Term purchases first (pools refer to their reservations), then pools.
        let mut terms: Vec<&DueAction> = due.iter().filter(|d| !is_run(d.action.kind)).collect();
        // Commitments last: they attach to reservations made in the same run.
        terms.sort_by_key(|d| (d.action.kind == ActionKind::Commit, d.action.id.as_str()));
        for d in terms {
            let name = namer.get(&raw(d)).to_string();
            self.term(d, name, &aliases);
        }
        let mut pools: BTreeMap<String, Vec<&DueAction>> = BTreeMap::new();
        for d in due.iter().filter(|d| is_run(d.action.kind)) {
            pools.entry(raw(d)).or_default().push(d);
        }
        for (key, runs) in pools {
            let name = namer.get(&key).to_string();
            self.pool(&runs, name, &aliases);
        }
        self.root.calls.sort_by(|a, b| {
            (a.pool.as_str(), a.module, a.name.as_str()).cmp(&(
                b.pool.as_str(),
                b.module,
                b.name.as_str(),
            ))
        });
        self.root.inputs = std::mem::take(&mut self.inputs).into_values().collect();
        for call in &self.root.calls {
            self.root.providers.insert(call.module.provider());
        }
    }

    fn skip(&mut self, d: &DueAction, reason: impl Into<String>) {
        self.root.skipped.push(Skipped {
            action: d.action.id.clone(),
            reason: reason.into(),
        });
    }

    fn input(
        &mut self,
        name: String,
        ty: &'static str,
        description: String,
        optional: bool,
    ) -> Value {
        let value = Value::Ref(format!("var.{name}"));
        self.inputs.entry(name.clone()).or_insert(Input {
            name,
            ty,
            description,
            default_null: optional,
        });
        value
    }

    fn campaigns(&self, actions: &[&Action]) -> (String, String) {
        let campaigns: BTreeSet<&str> = actions
            .iter()
            .flat_map(|a| a.campaigns.iter().map(String::as_str))
            .collect();
        let teams: BTreeSet<&str> = campaigns
            .iter()
            .filter_map(|c| self.teams.get(c).copied())
            .collect();
        (
            campaigns.into_iter().collect::<Vec<_>>().join(","),
            teams.into_iter().collect::<Vec<_>>().join(","),
        )
    }

    /// `tags` (AWS, Azure: any string) or `labels` (GCP: sanitised to label values).
    fn tags(&self, actions: &[&Action], gcp: bool) -> (&'static str, Value) {
        let (campaigns, teams) = self.campaigns(actions);
        let pool = actions.first().map_or("", |a| a.pool.as_str());
        let mut entries = vec![("pool", pool.to_string())];
        if !campaigns.is_empty() {
            entries.push(("campaigns", campaigns));
        }
        if !teams.is_empty() {
            entries.push(("team", teams));
        }
        if gcp {
            let labels = entries
                .into_iter()
                .map(|(k, v)| (k.to_string(), Value::Str(names::label_value(&v))))
                .collect();
            ("labels", Value::Object(labels))
        } else {
            let tags = entries
                .into_iter()
                .map(|(k, v)| (k.to_string(), Value::Str(v)))
                .collect();
            ("tags", Value::Object(tags))
        }
    }

    fn base_args(&self, actions: &[&Action], gcp: bool) -> Vec<(&'static str, Value)> {
        let (key, tags) = self.tags(actions, gcp);
        vec![
            ("plan_id", Value::Ref("local.plan_id".into())),
            (
                "plan_fingerprint",
                Value::Ref("local.plan_fingerprint".into()),
            ),
            (key, tags),
        ]
    }

    fn call(
        &mut self,
        name: String,
        module: Module,
        actions: &[&Action],
        comment: Vec<String>,
        args: Vec<(&'static str, Value)>,
        aliases: &Namer,
    ) {
        let first = actions[0];
        let provider_alias = (module.provider() == Provider::Aws)
            .then(|| aliases.get(&first.region).replace('-', "_"));
        self.root.calls.push(ModuleCall {
            name,
            module,
            pool: first.pool.clone(),
            actions: actions.iter().map(|a| a.id.clone()).collect(),
            comment,
            provider_alias,
            args,
        });
    }

    /// One call per piece the cloud sells the purchase in (`71` AWS block instances: a call
    /// for 64 and one for 7, named `<call>_1`, `<call>_2`).
    fn term(&mut self, d: &DueAction<'a>, name: String, aliases: &Namer) {
        let sizes = d.action.piece_sizes();
        if sizes.len() <= 1 {
            return self.term_piece(d, d.action, name, aliases);
        }
        let total = d.action.instances.max(1);
        let count = u32::try_from(sizes.len()).unwrap_or(u32::MAX);
        for (n, &size) in (1..).zip(&sizes) {
            let mut piece = d.action.clone();
            piece.id = crate::plan::piece_id(&d.action.id, n, count);
            piece.instances = size;
            piece.gpus = d.action.gpus / total * size;
            piece.cost = d.action.cost * f64::from(size) / f64::from(total);
            piece.pieces = Vec::new();
            self.term_piece(d, &piece, format!("{name}_{n}"), aliases);
        }
    }

    fn term_piece(&mut self, d: &DueAction<'a>, a: &Action, name: String, aliases: &Namer) {
        let hours = (d.end - d.start).num_hours();
        let mut comment = vec![format!(
            "{} {} x {} in {} for pool {}, {} to {} ({} {}).",
            a.kind.as_str(),
            a.instances,
            a.instance_type,
            a.zone.as_deref().unwrap_or(&a.region),
            a.pool,
            a.start,
            a.end,
            if a.id == d.action.id {
                "action"
            } else {
                "piece"
            },
            a.id
        )];
        if a.irreversible {
            comment.push(format!(
                "Irreversible: USD {} once bought; removing this block does not refund it.",
                super::hcl::money(a.cost)
            ));
        }
        let gcp = a.cloud == "gcp";
        let mut args = self.base_args(&[a], gcp);
        let zone = a.zone.clone();
        let module = match (a.kind, a.cloud.as_str()) {
            (ActionKind::PurchaseCapacityBlock, "aws") => {
                let fee = (a.cost * (1.0 + self.selection.price_tolerance) * 100.0).ceil() / 100.0;
                args.extend([
                    ("name", Value::str(&a.id)),
                    ("instance_type", Value::str(&a.instance_type)),
                    ("instance_count", Value::Int(a.instances.into())),
                    ("capacity_duration_hours", Value::Int(hours)),
                    ("start_date_range", Value::str(&a.start)),
                    ("end_date_range", Value::str(&a.end)),
                    ("max_upfront_fee_usd", Value::Money(fee)),
                    (
                        "allowed_availability_zones",
                        Value::List(zone.iter().map(Value::str).collect()),
                    ),
                ]);
                if let Some(id) = &a.offering_id {
                    args.push(("capacity_block_offering_id", Value::str(id)));
                }
                Module::AwsCapacityBlock
            }
            (ActionKind::PurchaseCapacityBlock, "gcp") => {
                let Some(zone) = zone else {
                    return self.skip(d, "a GCP calendar-mode reservation needs a zone");
                };
                let rname = names::rfc1035(&a.id, 63);
                args.extend([
                    ("name", Value::Str(rname.clone())),
                    (
                        "reservation_name",
                        Value::Str(names::rfc1035(&format!("{rname}-r"), 63)),
                    ),
                    ("zone", Value::Str(zone)),
                    ("machine_type", Value::str(&a.instance_type)),
                    ("instance_count", Value::Int(a.instances.into())),
                    ("start_time", Value::str(&a.start)),
                    ("end_time", Value::str(&a.end)),
                ]);
                Module::GcpFutureReservation
            }
            (ActionKind::Reserve, "aws") => {
                let Some(zone) = zone else {
                    return self.skip(d, "an EC2 capacity reservation needs an availability zone");
                };
                args.extend([
                    ("name", Value::str(&a.id)),
                    ("instance_type", Value::str(&a.instance_type)),
                    ("availability_zone", Value::Str(zone)),
                    ("instance_count", Value::Int(a.instances.into())),
                    // The plan's release: the reservation ends on its own.
                    ("end_date", Value::str(&a.end)),
                ]);
                Module::AwsCapacityReservation
            }
            (ActionKind::Reserve, "gcp") => {
                let Some(zone) = zone else {
                    return self.skip(d, "a Compute Engine reservation needs a zone");
                };
                comment.push(format!(
                    "No end date in Compute Engine: the first generate run after {} leaves this call out, which deletes it.",
                    a.end
                ));
                args.extend([
                    ("name", Value::Str(names::rfc1035(&a.id, 63))),
                    ("zone", Value::Str(zone)),
                    ("instance_count", Value::Int(a.instances.into())),
                    ("machine_type", Value::str(&a.instance_type)),
                ]);
                Module::GcpReservation
            }
            (ActionKind::Reserve, "azure") => {
                comment.push(format!(
                    "No end date in Azure: the first generate run after {} leaves this call out, which deletes it.",
                    a.end
                ));
                let rg = self.input(
                    "azure_resource_group_name".into(),
                    "string",
                    "Resource group for the capacity reservation groups.".into(),
                    false,
                );
                let zones: Vec<Value> = zone.iter().map(Value::str).collect();
                let mut reservation = vec![
                    ("sku".to_string(), Value::str(&a.instance_type)),
                    ("capacity".to_string(), Value::Int(a.instances.into())),
                ];
                if let Some(z) = &zone {
                    reservation.push(("zone".to_string(), Value::str(z)));
                }
                args.extend([
                    ("name", Value::Str(names::sanitize(&a.id, 80, true))),
                    ("resource_group_name", rg),
                    ("location", Value::str(&a.region)),
                    ("zones", Value::List(zones)),
                    (
                        "reservations",
                        Value::Object(vec![(
                            names::sanitize(&a.instance_type, 80, true),
                            Value::Object(reservation),
                        )]),
                    ),
                ]);
                Module::AzureCapacityReservation
            }
            (ActionKind::Commit, "gcp") => {
                let days = hours / 24;
                let term = match days {
                    360..=370 => "TWELVE_MONTH",
                    1090..=1100 => "THIRTY_SIX_MONTH",
                    _ => {
                        return self.skip(
                            d,
                            format!("a {days}-day commitment: Compute Engine sells 1 or 3 years"),
                        );
                    }
                };
                let Some(shape) = gcp_shape(&a.instance_type) else {
                    return self.skip(
                        d,
                        format!(
                            "no commitment shape known for machine type `{}` (vCPUs, memory, GPUs)",
                            a.instance_type
                        ),
                    );
                };
                let n = i64::from(a.instances);
                let resource = |ty: &str, amount: i64, acc: Option<&str>| {
                    let mut o = vec![
                        ("type".to_string(), Value::str(ty)),
                        ("amount".to_string(), Value::Int(amount)),
                    ];
                    if let Some(acc) = acc {
                        o.push(("accelerator_type".to_string(), Value::str(acc)));
                    }
                    Value::Object(o)
                };
                args.extend([
                    ("name", Value::Str(names::rfc1035(&a.id, 63))),
                    ("region", Value::str(&a.region)),
                    ("term", Value::str(term)),
                    ("type", Value::str(shape.commitment_type)),
                    (
                        "resources",
                        Value::List(vec![
                            resource("VCPU", n * i64::from(shape.vcpus), None),
                            resource("MEMORY", n * i64::from(shape.memory_mb), None),
                            resource(
                                "ACCELERATOR",
                                n * i64::from(shape.gpus),
                                Some(shape.accelerator),
                            ),
                        ]),
                    ),
                ]);
                if let Some(res) = self.root.calls.iter().find(|c| {
                    c.module == Module::GcpReservation
                        && c.pool == a.pool
                        && c.arg("machine_type") == Some(&Value::str(&a.instance_type))
                }) {
                    args.push((
                        "existing_reservations",
                        Value::Ref(format!("module.{}.self_link", res.name)),
                    ));
                }
                Module::GcpCommitment
            }
            (ActionKind::Commit, cloud) => {
                let what = match cloud {
                    "aws" => "AWS savings plans and reserved instances have no Terraform resource",
                    "azure" => "Azure reservations (reserved instances) have no Terraform resource",
                    _ => "commitments on this cloud have no Terraform resource",
                };
                return self.skip(d, format!("{what}; buy it in the console or API"));
            }
            (kind, cloud) => {
                return self.skip(d, format!("no module for `{}` on `{cloud}`", kind.as_str()));
            }
        };
        self.call(name, module, &[a], comment, args, aliases);
    }

    fn pool(&mut self, runs: &[&DueAction<'a>], name: String, aliases: &Namer) {
        let first = runs[0].action;
        let actions: Vec<&Action> = runs.iter().map(|d| d.action).collect();
        // Sized for the busiest moment among the runs due in the window: at `now` or at a run's
        // start, whichever needs most; the next generate run resizes it.
        let now = self.selection.now;
        let mut moments: Vec<DateTime<Utc>> = vec![now];
        moments.extend(runs.iter().map(|d| d.start).filter(|s| *s > now));
        let (mut od_peak, mut total_peak) = (0u32, 0u32);
        for t in moments {
            let active = runs.iter().filter(|d| d.start <= t && t < d.end);
            let (od, spot) = active.fold((0, 0), |(od, spot), d| match d.action.kind {
                ActionKind::RunSpot => (od, spot + d.action.instances),
                _ => (od + d.action.instances, spot),
            });
            od_peak = od_peak.max(od);
            total_peak = total_peak.max(od + spot);
        }
        let spot_peak = total_peak.saturating_sub(od_peak);
        let mut ids: Vec<&str> = actions.iter().map(|a| a.id.as_str()).collect();
        ids.sort_unstable();
        let comment = vec![
            format!(
                "Pool {}: {} in {} {}, sized for the busiest moment of its due runs.",
                first.pool,
                first.instance_type,
                first.cloud,
                match (first.cloud.as_str(), first.zone.as_deref()) {
                    ("gcp", Some(zone)) => zone,
                    _ => first.region.as_str(),
                },
            ),
            format!("Runs: {}.", ids.join(", ")),
        ];
        let gcp = first.cloud == "gcp";
        let mut args = self.base_args(&actions, gcp);
        let zone_of_pool = first.zone.clone();
        let module = match first.cloud.as_str() {
            "aws" => {
                let region = aliases.get(&first.region).replace('-', "_");
                let image = self.input(
                    format!("aws_{region}_image_id"),
                    "string",
                    format!("AMI of the GPU nodes in {}.", first.region),
                    false,
                );
                let subnets = self.input(
                    format!("aws_{region}_subnet_ids"),
                    "list(string)",
                    format!(
                        "Subnets of the GPU pools in {} (one per zone).",
                        first.region
                    ),
                    false,
                );
                let reservations: Vec<Value> = self
                    .root
                    .calls
                    .iter()
                    .filter(|c| {
                        c.module == Module::AwsCapacityReservation
                            && c.pool == first.pool
                            && c.arg("instance_type") == Some(&Value::str(&first.instance_type))
                    })
                    .map(|c| Value::Ref(format!("module.{}.id", c.name)))
                    .collect();
                args.extend([
                    ("name", Value::Str(names::sanitize(&name, 64, false))),
                    ("image_id", image),
                    (
                        "instance_types",
                        Value::List(vec![Value::Object(vec![(
                            "instance_type".into(),
                            Value::str(&first.instance_type),
                        )])]),
                    ),
                    ("subnet_ids", subnets),
                    ("desired_capacity", Value::Int(total_peak.into())),
                    ("max_size", Value::Int(total_peak.max(1).into())),
                    ("on_demand_base_capacity", Value::Int(od_peak.into())),
                    (
                        "on_demand_percentage_above_base_capacity",
                        Value::Int(if spot_peak > 0 { 0 } else { 100 }),
                    ),
                ]);
                if !reservations.is_empty() {
                    args.push(("capacity_reservation_ids", Value::List(reservations)));
                    args.push((
                        "capacity_reservation_preference",
                        Value::str("capacity-reservations-first"),
                    ));
                }
                Module::AwsGpuPool
            }
            "gcp" => {
                let Some(zone) = zone_of_pool else {
                    for d in runs {
                        self.skip(d, "a managed instance group needs a zone");
                    }
                    return;
                };
                let spot = first.kind == ActionKind::RunSpot;
                let image = self.input(
                    "gcp_source_image".into(),
                    "string",
                    "Boot image of the GPU nodes.".into(),
                    false,
                );
                args.extend([
                    ("name", Value::Str(names::rfc1035(&name, 36))),
                    ("zone", Value::Str(zone.clone())),
                    ("machine_type", Value::str(&first.instance_type)),
                    ("source_image", image),
                    (
                        "provisioning",
                        Value::str(if spot { "spot" } else { "standard" }),
                    ),
                    ("target_size", Value::Int(total_peak.into())),
                ]);
                if !spot {
                    let reservations: Vec<Value> = self
                        .root
                        .calls
                        .iter()
                        .filter(|c| {
                            matches!(c.module, Module::GcpReservation)
                                && c.pool == first.pool
                                && c.arg("zone") == Some(&Value::str(&zone))
                                && c.arg("machine_type") == Some(&Value::str(&first.instance_type))
                        })
                        .map(|c| Value::Ref(format!("module.{}.name", c.name)))
                        .collect();
                    if !reservations.is_empty() {
                        args.push(("reservation_names", Value::List(reservations)));
                    }
                }
                Module::GcpGpuPool
            }
            cloud => {
                for d in runs {
                    self.skip(d, format!("no GPU pool module for `{cloud}`"));
                }
                return;
            }
        };
        self.call(name, module, &actions, comment, args, aliases);
    }
}

/// The machine type that carries a GPU type, and its GPUs per VM (for reading commitments
/// back from state).
pub fn gcp_machine_for(accelerator: &str) -> Option<(&'static str, u32)> {
    const MACHINES: [&str; 7] = [
        "a3-highgpu-8g",
        "a3-megagpu-8g",
        "a3-ultragpu-8g",
        "a2-ultragpu-8g",
        "a2-highgpu-8g",
        "g2-standard-48",
        "a2-highgpu-1g",
    ];
    MACHINES.into_iter().find_map(|m| {
        gcp_shape(m)
            .filter(|s| s.accelerator == accelerator)
            .map(|s| (m, s.gpus))
    })
}

/// What one VM of a GPU machine type commits to.
struct Shape {
    vcpus: u32,
    memory_mb: u32,
    gpus: u32,
    accelerator: &'static str,
    commitment_type: &'static str,
}

/// Accelerator-optimised machine types (Compute Engine documentation, 2026).
fn gcp_shape(machine_type: &str) -> Option<Shape> {
    let (vcpus, memory_mb, gpus, accelerator, commitment_type) = match machine_type {
        "a3-highgpu-8g" => (
            208,
            1_916_928,
            8,
            "nvidia-h100-80gb",
            "ACCELERATOR_OPTIMIZED_A3",
        ),
        "a3-megagpu-8g" => (
            208,
            1_916_928,
            8,
            "nvidia-h100-mega-80gb",
            "ACCELERATOR_OPTIMIZED_A3_MEGA",
        ),
        "a3-ultragpu-8g" => (
            224,
            3_022_848,
            8,
            "nvidia-h200-141gb",
            "ACCELERATOR_OPTIMIZED_A3_ULTRA",
        ),
        "a2-highgpu-8g" => (96, 696_320, 8, "nvidia-tesla-a100", "ACCELERATOR_OPTIMIZED"),
        "a2-ultragpu-8g" => (
            96,
            1_392_640,
            8,
            "nvidia-a100-80gb",
            "ACCELERATOR_OPTIMIZED",
        ),
        "a2-highgpu-1g" => (12, 87_040, 1, "nvidia-tesla-a100", "ACCELERATOR_OPTIMIZED"),
        "g2-standard-48" => (48, 196_608, 4, "nvidia-l4", "GRAPHICS_OPTIMIZED"),
        _ => return None,
    };
    Some(Shape {
        vcpus,
        memory_mb,
        gpus,
        accelerator,
        commitment_type,
    })
}
