//! Reads `terraform show -json` output (Terraform's JSON state representation: `values`,
//! `root_module`, nested `child_modules`) and lists the GPU capacity it holds: EC2 capacity
//! reservations and capacity blocks, Compute Engine reservations, calendar-mode future
//! reservations and region commitments, and Azure capacity reservations. Resources inside
//! module calls (as gpucap's generated root modules create them) count like any other.

use std::collections::BTreeMap;
use std::path::Path;

use chrono::{DateTime, Utc};
use gpucap_provider::{Cloud, PurchaseKind};
use serde_json::Value;

use crate::diagnostic::{InputError, Location};
use crate::planner::ExistingCapacity;
use crate::timespec;

/// The capacity found in the state file at `path`, in state order.
pub fn read(path: &Path) -> Result<Vec<ExistingCapacity>, InputError> {
    load(path).map(|(capacity, _)| capacity)
}

/// [`read`], and the text it parsed, so that a digest of the state file is of exactly what was
/// counted.
pub fn load(path: &Path) -> Result<(Vec<ExistingCapacity>, String), InputError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| InputError::in_file(path, format!("cannot read the Terraform state: {e}")))?;
    let capacity = parse(&text, path)?;
    Ok((capacity, text))
}

/// [`read`] on text already in memory; `path` names it in errors and in `source`.
pub fn parse(text: &str, path: &Path) -> Result<Vec<ExistingCapacity>, InputError> {
    let doc: Value = serde_json::from_str(text).map_err(|e| {
        InputError::new(
            Location::file(path).line(e.line()).column(e.column()),
            format!("not JSON: {e}"),
        )
        .with_hint("give the output of `terraform show -json` (not the raw .tfstate file)")
    })?;
    let Some(root) = doc.as_object() else {
        return Err(InputError::in_file(path, "expected a JSON object"));
    };
    if !root.contains_key("format_version") {
        return Err(InputError::new(
            Location::file(path).field("format_version"),
            "missing: this is not `terraform show -json` output",
        )
        .with_hint("run `terraform show -json > state.json` in the root module"));
    }
    // An empty state has no `values` at all.
    let Some(module) = doc.pointer("/values/root_module") else {
        return Ok(Vec::new());
    };
    let mut resources = Vec::new();
    collect(module, "values.root_module", &mut resources);
    let reader = Reader {
        path,
        source: format!("terraform-state:{}", path.display()),
        groups: azure_groups(&resources),
    };
    let mut out = Vec::new();
    for (at, r) in &resources {
        if let Some(found) = reader.resource(at, r)? {
            out.push(found);
        }
    }
    Ok(out)
}

/// Every managed resource of a module and its child modules, with its field path.
fn collect<'a>(module: &'a Value, at: &str, out: &mut Vec<(String, &'a Value)>) {
    if let Some(list) = module.get("resources").and_then(Value::as_array) {
        for (i, r) in list.iter().enumerate() {
            if r.get("mode").and_then(Value::as_str) != Some("data") {
                out.push((format!("{at}.resources[{i}]"), r));
            }
        }
    }
    if let Some(children) = module.get("child_modules").and_then(Value::as_array) {
        for (i, child) in children.iter().enumerate() {
            collect(child, &format!("{at}.child_modules[{i}]"), out);
        }
    }
}

/// Azure capacity reservation groups by id → location (a reservation's region is its group's).
fn azure_groups(resources: &[(String, &Value)]) -> BTreeMap<String, String> {
    resources
        .iter()
        .filter(|(_, r)| {
            r.get("type").and_then(Value::as_str) == Some("azurerm_capacity_reservation_group")
        })
        .filter_map(|(_, r)| {
            let v = r.get("values")?;
            Some((
                v.get("id")?.as_str()?.to_lowercase(),
                v.get("location")?.as_str()?.to_string(),
            ))
        })
        .collect()
}

struct Reader<'a> {
    path: &'a Path,
    source: String,
    groups: BTreeMap<String, String>,
}

/// A start and an end, either open.
type Window = (Option<DateTime<Utc>>, Option<DateTime<Utc>>);

/// One resource's `values`, with typed access that names the field on failure.
struct Fields<'a> {
    values: &'a Value,
    at: String,
    path: &'a Path,
}

impl Fields<'_> {
    fn error(&self, field: &str, message: &str) -> InputError {
        InputError::new(
            Location::file(self.path).field(format!("{}.{field}", self.at)),
            message.to_string(),
        )
    }

    fn get(&self, pointer: &str) -> Option<&Value> {
        self.values.pointer(pointer).filter(|v| !v.is_null())
    }

    fn field_name(pointer: &str) -> String {
        pointer.trim_start_matches('/').replace('/', ".")
    }

    fn string(&self, pointer: &str) -> Result<String, InputError> {
        self.opt_string(pointer)?
            .ok_or_else(|| self.error(&Self::field_name(pointer), "missing"))
    }

    fn opt_string(&self, pointer: &str) -> Result<Option<String>, InputError> {
        match self.get(pointer) {
            None => Ok(None),
            Some(Value::String(s)) if s.is_empty() => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(_) => Err(self.error(&Self::field_name(pointer), "expected a string")),
        }
    }

    fn count(&self, pointer: &str) -> Result<u32, InputError> {
        let bad = || {
            self.error(
                &Self::field_name(pointer),
                "expected a whole number of instances",
            )
        };
        match self.get(pointer) {
            Some(Value::Number(n)) => n
                .as_u64()
                .and_then(|n| u32::try_from(n).ok())
                .ok_or_else(bad),
            // Some providers keep numbers as strings (commitment amounts).
            Some(Value::String(s)) => s.parse().map_err(|_| bad()),
            _ => Err(bad()),
        }
    }

    /// The start and end at `start` and `end`; an end at or before the start is an error
    /// naming the end (a block that ends before it starts is no capacity to plan on).
    fn window(&self, start: &str, end: &str) -> Result<Window, InputError> {
        let (from, to) = (self.time(start)?, self.time(end)?);
        if let (Some(from), Some(to)) = (from, to)
            && to <= from
        {
            return Err(self
                .error(
                    &Self::field_name(end),
                    &format!(
                        "`{}` is not after the start `{}`",
                        to.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
                        from.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
                    ),
                )
                .with_hint(
                    "the state is damaged or was edited by hand: refresh it (`terraform refresh`)",
                ));
        }
        Ok((from, to))
    }

    fn time(&self, pointer: &str) -> Result<Option<DateTime<Utc>>, InputError> {
        self.opt_string(pointer)?
            .map(|s| {
                timespec::parse_timestamp(&s)
                    .map_err(|e| self.error(&Self::field_name(pointer), &e))
            })
            .transpose()
    }
}

/// `projects/p/zones/us-central1-a` or a URL → `us-central1-a`.
fn last_segment(s: &str) -> String {
    s.rsplit('/').next().unwrap_or(s).to_string()
}

impl Reader<'_> {
    fn resource(&self, at: &str, r: &Value) -> Result<Option<ExistingCapacity>, InputError> {
        let Some(ty) = r.get("type").and_then(Value::as_str) else {
            return Ok(None);
        };
        let address = r
            .get("address")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        let Some(values) = r.get("values") else {
            return Ok(None);
        };
        let f = Fields {
            values,
            at: format!("{at}.values"),
            path: self.path,
        };
        let id = |key: &str| -> Result<String, InputError> {
            Ok(f.opt_string(key)?.unwrap_or_else(|| address.clone()))
        };
        let found =
            |kind, cloud, region: String, zone, instance_type, instances, start, end, id| {
                Some(ExistingCapacity {
                    id,
                    source: self.source.clone(),
                    kind,
                    cloud,
                    region,
                    zone,
                    instance_type,
                    instances,
                    start,
                    end,
                    pool: None,
                })
            };
        Ok(match ty {
            "aws_ec2_capacity_reservation" | "aws_ec2_capacity_block_reservation" => {
                let zone = f.string("/availability_zone")?;
                // us-east-1a → us-east-1 (the zone name is the region and a letter).
                let region = zone
                    .trim_end_matches(|c: char| c.is_ascii_lowercase())
                    .to_string();
                let (start, end) = f.window("/start_date", "/end_date")?;
                let kind = if ty == "aws_ec2_capacity_reservation" {
                    PurchaseKind::Reservation
                } else {
                    PurchaseKind::CapacityBlock
                };
                found(
                    kind,
                    Cloud::Aws,
                    region,
                    Some(zone),
                    f.string("/instance_type")?,
                    f.count("/instance_count")?,
                    start,
                    end,
                    id("/id")?,
                )
            }
            "google_compute_reservation" => {
                let zone = last_segment(&f.string("/zone")?);
                found(
                    PurchaseKind::Reservation,
                    Cloud::Gcp,
                    gcp_region(&zone),
                    Some(zone),
                    last_segment(
                        &f.string("/specific_reservation/0/instance_properties/0/machine_type")?,
                    ),
                    f.count("/specific_reservation/0/count")?,
                    None,
                    None,
                    id("/name")?,
                )
            }
            "google_compute_future_reservation" => {
                let zone = last_segment(&f.string("/zone")?);
                let (start, end) =
                    f.window("/time_window/0/start_time", "/time_window/0/end_time")?;
                found(
                    PurchaseKind::CapacityBlock,
                    Cloud::Gcp,
                    gcp_region(&zone),
                    Some(zone),
                    last_segment(
                        &f.string("/specific_sku_properties/0/instance_properties/0/machine_type")?,
                    ),
                    f.count("/specific_sku_properties/0/total_count")?,
                    start,
                    end,
                    id("/name")?,
                )
            }
            "google_compute_region_commitment" => {
                let region = last_segment(&f.string("/region")?);
                // The GPUs committed, as machines of the type that carries them.
                let resources = f
                    .get("/resources")
                    .and_then(Value::as_array)
                    .cloned()
                    .unwrap_or_default();
                let Some(i) = resources
                    .iter()
                    .position(|r| r.get("type").and_then(Value::as_str) == Some("ACCELERATOR"))
                else {
                    return Ok(None);
                };
                let accelerator =
                    last_segment(&f.string(&format!("/resources/{i}/accelerator_type"))?);
                let gpus = f.count(&format!("/resources/{i}/amount"))?;
                let (start, end) = f.window("/start_timestamp", "/end_timestamp")?;
                let (instance_type, per_vm) =
                    crate::render::terraform::calls::gcp_machine_for(&accelerator)
                        .map_or((accelerator.clone(), 1), |(m, g)| (m.to_string(), g));
                found(
                    PurchaseKind::Commitment,
                    Cloud::Gcp,
                    region,
                    None,
                    instance_type,
                    gpus / per_vm.max(1),
                    start,
                    end,
                    id("/name")?,
                )
            }
            "azurerm_capacity_reservation" => {
                let group = f.string("/capacity_reservation_group_id")?;
                let Some(region) = self.groups.get(&group.to_lowercase()).cloned() else {
                    return Err(f.error(
                        "capacity_reservation_group_id",
                        "no azurerm_capacity_reservation_group with this id in the state (its location is the reservation's region)",
                    ));
                };
                found(
                    PurchaseKind::Reservation,
                    Cloud::Azure,
                    region,
                    f.opt_string("/zone")?,
                    f.string("/sku/0/name")?,
                    f.count("/sku/0/capacity")?,
                    None,
                    None,
                    id("/id")?,
                )
            }
            _ => None,
        })
    }
}

/// `us-central1-a` → `us-central1`.
fn gcp_region(zone: &str) -> String {
    zone.rsplit_once('-').map_or(zone, |(r, _)| r).to_string()
}
