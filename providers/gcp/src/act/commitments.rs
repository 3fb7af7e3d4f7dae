//! Resource-based committed use discounts on GCP (`regionCommitments.insert`): the plan's
//! `commit` actions, signed once and never cancelled.
//!
//! A commitment has no labels and no client token on its name, and `regionCommitments` has no
//! delete: it is named from the plan and the action ([`names::reservation_name`]), carries
//! gpucap's tags in its `description`, is looked up by name before the insert and after a
//! 409 `alreadyExists`, and the insert carries a `requestId` and is followed to `DONE` with
//! `regionOperations.wait`. A commitment found under the name that gpucap did not make is
//! refused, never adopted.
//!
//! **What is committed.** `instances` machines of the action's type: their vCPUs, memory (MB)
//! and GPUs, read from the machine type (`machineTypes.aggregatedList`, filtered by name, in
//! a zone of the region), times the count; the commitment type from the machine series
//! (`a3-highgpu` → `ACCELERATOR_OPTIMIZED_A3`, …); the plan (`TWELVE_MONTH`,
//! `THIRTY_SIX_MONTH`) from the action's term. Compute Engine requires committed GPUs to be
//! reserved and the reservations attached: gpucap attaches reservations it made for the same
//! type in the region (`existingReservations`) until they hold the committed count, and
//! refuses, before any insert, when they hold fewer. Formats and sources:
//! `docs/gce-reservations-api.md`.

use chrono::DateTime;
use chrono::Utc;
use google_cloud_compute_v1::model::{
    Commitment, ResourceCommitment, commitment, resource_commitment,
};
use gpucap_provider::capacity::{
    ActErrorKind, ActResult, CloudResource, CommitmentRequest, Done, Idempotency, Placement,
    ResourceKind,
};

use super::GcpCapacity;
use super::names;
use super::ops::{Scope, classify, found, note, refuse};

pub(crate) const INSERT: &str = "regionCommitments.insert";
const GET: &str = "regionCommitments.get";
const LIST: &str = "regionCommitments.list";
const MACHINES: &str = "machineTypes.aggregatedList";

/// The commitment type for a machine type, from its series (the documented accelerator- and
/// graphics-optimised ones; anything else is refused rather than guessed).
pub fn commitment_type(machine: &str) -> Option<commitment::Type> {
    use commitment::Type;
    let series = machine.split('-').take(2).collect::<Vec<_>>().join("-");
    Some(match series.as_str() {
        "a2-highgpu" | "a2-megagpu" | "a2-ultragpu" => Type::AcceleratorOptimized,
        "a3-highgpu" | "a3-edgegpu" => Type::AcceleratorOptimizedA3,
        "a3-megagpu" => Type::AcceleratorOptimizedA3Mega,
        "a3-ultragpu" => Type::AcceleratorOptimizedA3Ultra,
        "a4-highgpu" => Type::AcceleratorOptimizedA4,
        s if s.starts_with("g2-") => Type::GraphicsOptimized,
        s if s.starts_with("g4-") => Type::GraphicsOptimizedG4,
        _ => return None,
    })
}

/// The commitment plan for a term from `start` to `end`: one year or three (a few days
/// either way, for leap years and the plan's day boundaries).
pub fn plan_of(start: DateTime<Utc>, end: DateTime<Utc>) -> Option<commitment::Plan> {
    let days = (end - start).num_days();
    match days {
        360..=370 => Some(commitment::Plan::TwelveMonth),
        1090..=1100 => Some(commitment::Plan::ThirtySixMonth),
        _ => None,
    }
}

/// gpucap's state word for a commitment's `status`.
fn state_word(c: &Commitment) -> &'static str {
    match c.status {
        Some(commitment::Status::Active) => "active",
        Some(commitment::Status::Expired) => "expired",
        Some(commitment::Status::Cancelled) => "cancelled",
        _ => "pending",
    }
}

/// A commitment as gpucap describes it (kind `commitment`, id `<region>/<name>`).
pub fn resource(
    region_hint: &str,
    c: &Commitment,
    instance_type: &str,
    instances: u32,
) -> CloudResource {
    let region = c
        .region
        .as_deref()
        .map(names::last_segment)
        .filter(|r| !r.is_empty())
        .unwrap_or(region_hint)
        .to_string();
    let parse = |t: Option<&String>| {
        t.and_then(|t| DateTime::parse_from_rfc3339(t).ok())
            .map(|t| t.with_timezone(&Utc))
    };
    CloudResource {
        id: names::id_of(&region, c.name.as_deref().unwrap_or_default()),
        kind: ResourceKind::Commitment,
        placement: Placement {
            region,
            zone: None,
            instance_type: instance_type.to_string(),
        },
        instances,
        start: parse(c.start_timestamp.as_ref()),
        end: parse(c.end_timestamp.as_ref()),
        state: state_word(c).to_string(),
        tags: names::tags_of(c.description.as_deref()),
        in_use: None,
    }
}

/// One machine's vCPUs, memory (MB), GPU type and GPU count.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shape {
    pub vcpus: i64,
    pub memory_mb: i64,
    pub accelerator: String,
    pub gpus: i64,
}

impl GcpCapacity {
    async fn commitment_get(&self, region: &str, name: &str) -> ActResult<Option<Commitment>> {
        found(
            GET,
            self.commitments
                .get()
                .set_project(&self.config.project)
                .set_region(region)
                .set_commitment(name)
                .send()
                .await,
        )
    }

    /// The machine type's shape in a zone of `region`.
    async fn shape(&self, region: &str, machine: &str) -> ActResult<Shape> {
        let page = self
            .machines
            .aggregated_list()
            .set_project(&self.config.project)
            .set_filter(format!("name = \"{machine}\""))
            .send()
            .await
            .map_err(|e| classify(MACHINES, &e, false))?;
        let mut scopes: Vec<_> = page.items.into_iter().collect();
        scopes.sort_by(|a, b| a.0.cmp(&b.0));
        for (scope, list) in scopes {
            if names::region_of(names::last_segment(&scope)) != region {
                continue;
            }
            for m in list.machine_types {
                if m.name.as_deref() != Some(machine) {
                    continue;
                }
                let accel = m.accelerators.first();
                return Ok(Shape {
                    vcpus: i64::from(m.guest_cpus.unwrap_or(0)),
                    memory_mb: i64::from(m.memory_mb.unwrap_or(0)),
                    accelerator: accel
                        .and_then(|a| a.guest_accelerator_type.clone())
                        .map(|t| names::last_segment(&t).to_string())
                        .unwrap_or_default(),
                    gpus: i64::from(accel.and_then(|a| a.guest_accelerator_count).unwrap_or(0)),
                });
            }
        }
        Err(refuse(
            MACHINES,
            ActErrorKind::Other,
            format!(
                "machine type {machine} is not offered in any zone of {region}; nothing to commit to"
            ),
        ))
    }

    fn adopt_commitment(
        region: &str,
        name: &str,
        found: &Commitment,
        request: &CommitmentRequest,
        request_id: Option<String>,
    ) -> ActResult {
        if !names::owned(found.name.as_deref(), found.description.as_deref()) {
            return Err(refuse(
                INSERT,
                ActErrorKind::Other,
                format!(
                    "a commitment named {name} exists in {region} and its description does not say gpucap made it; not touched"
                ),
            ));
        }
        Ok(Done {
            resource: resource(
                region,
                found,
                &request.placement.instance_type,
                request.instances,
            ),
            request_id,
        })
    }

    /// The reservations to attach to a GPU commitment of `n` machines: Compute Engine requires
    /// GPUs committed to be reserved and the reservations attached. Of `ids` (gpucap's
    /// reservations of the type in the region, as the caller knows them), those that exist
    /// and reserve `machine` in `region`, until they hold `n`; refused when they hold fewer.
    async fn attachable(
        &self,
        region: &str,
        machine: &str,
        n: i64,
        ids: &[String],
    ) -> ActResult<Vec<String>> {
        let mut out = Vec::new();
        let mut held = 0;
        for id in ids {
            if held >= n {
                break;
            }
            let Some((zone, name)) = names::parse_id(id) else {
                continue;
            };
            if names::region_of(&zone) != region {
                continue;
            }
            let Some(r) = self.reservation_get(&zone, &name).await? else {
                continue;
            };
            let spec = r.specific_reservation.as_ref();
            if spec
                .and_then(|s| s.instance_properties.as_ref())
                .and_then(|p| p.machine_type.as_deref())
                != Some(machine)
            {
                continue;
            }
            held += spec.and_then(|s| s.count).unwrap_or(0);
            out.push(format!(
                "projects/{}/zones/{zone}/reservations/{name}",
                self.config.project
            ));
        }
        if held < n {
            return Err(refuse(
                INSERT,
                ActErrorKind::Other,
                format!(
                    "Compute Engine requires committed GPUs to be reserved, with the reservations attached to the commitment; gpucap's reservations of {machine} in {region} hold {held} of the {n} machines committed: reserve them first (a `reserve` action in the plan), or sign this commitment by hand"
                ),
            ));
        }
        Ok(out)
    }

    /// Signs a commitment (see the module docs). Never cancelled: there is no API for it.
    pub(crate) async fn commit(
        &self,
        request: &CommitmentRequest,
        id: &Idempotency,
        dry_run: bool,
    ) -> ActResult {
        let Some(token) = id.client_token.as_deref().filter(|t| !t.is_empty()) else {
            return Err(refuse(
                INSERT,
                ActErrorKind::Other,
                "a GCP commitment is named from the client token (Idempotency::client_token is None): without one a retry could commit twice",
            ));
        };
        let region = request.placement.region.as_str();
        let machine = request.placement.instance_type.as_str();
        if request.instances == 0 {
            return Err(refuse(
                INSERT,
                ActErrorKind::Other,
                "a commitment to 0 machines commits to nothing",
            ));
        }
        let Some(kind) = commitment_type(machine) else {
            return Err(refuse(
                INSERT,
                ActErrorKind::Other,
                format!(
                    "gpucap knows no commitment type for machine type {machine}; sign this commitment by hand"
                ),
            ));
        };
        let Some(plan) = plan_of(request.start, request.end) else {
            return Err(refuse(
                INSERT,
                ActErrorKind::Other,
                format!(
                    "a GCP commitment lasts one or three years, not {} days",
                    (request.end - request.start).num_days()
                ),
            ));
        };
        let name = names::reservation_name(&id.action, token);
        if dry_run {
            self.commitments
                .list()
                .set_project(&self.config.project)
                .set_region(region)
                .set_max_results(1_u32)
                .send()
                .await
                .map_err(|e| classify(LIST, &e, false))?;
            return Err(refuse(
                INSERT,
                ActErrorKind::DryRunOk,
                format!(
                    "would sign commitment {region}/{name} ({} x {machine}, {})",
                    request.instances,
                    plan.name().unwrap_or("?")
                ),
            ));
        }
        if let Some(found) = self.commitment_get(region, &name).await? {
            return Self::adopt_commitment(region, &name, &found, request, None);
        }
        let shape = self.shape(region, machine).await?;
        let n = i64::from(request.instances);
        let attached = if shape.gpus > 0 {
            self.attachable(region, machine, n, &request.reservations)
                .await?
        } else {
            Vec::new()
        };
        let amount = |t: resource_commitment::Type, amount: i64, accel: Option<&str>| {
            let mut r = ResourceCommitment::default();
            r.r#type = Some(t);
            r.amount = Some(amount);
            r.accelerator_type = accel.map(str::to_string);
            r
        };
        let mut resources = vec![
            amount(resource_commitment::Type::Vcpu, shape.vcpus * n, None),
            amount(resource_commitment::Type::Memory, shape.memory_mb * n, None),
        ];
        if shape.gpus > 0 {
            resources.push(amount(
                resource_commitment::Type::Accelerator,
                shape.gpus * n,
                Some(&shape.accelerator),
            ));
        }
        let mut body = Commitment::default();
        body.name = Some(name.clone());
        body.description = Some(names::description(id));
        body.plan = Some(plan);
        body.r#type = Some(kind);
        body.category = Some(commitment::Category::Machine);
        body.auto_renew = Some(false);
        body.resources = resources;
        body.existing_reservations = attached;

        let request_id = names::request_id(INSERT, token);
        let op = match self
            .commitments
            .insert()
            .set_project(&self.config.project)
            .set_region(region)
            .set_request_id(&request_id)
            .set_body(body)
            .send()
            .await
        {
            Ok(op) => op,
            Err(e) => {
                let e = classify(INSERT, &e, true);
                if matches!(e.code.as_deref(), Some("alreadyExists" | "conflict")) {
                    return match self.commitment_get(region, &name).await? {
                        Some(found) => {
                            Self::adopt_commitment(region, &name, &found, request, e.request_id)
                        }
                        None => Err(gpucap_provider::capacity::ActError {
                            kind: ActErrorKind::Transient,
                            ..e
                        }),
                    };
                }
                return Err(e);
            }
        };
        note(Scope::Region(region), &op);
        let op_name = op.name.clone();
        match self.follow(INSERT, Scope::Region(region), op).await {
            Ok(_) => {}
            Err(e)
                if matches!(
                    e.code.as_deref(),
                    Some("alreadyExists" | "RESOURCE_ALREADY_EXISTS")
                ) => {}
            Err(e) => return Err(e),
        }
        match self.commitment_get(region, &name).await? {
            Some(found) => Self::adopt_commitment(region, &name, &found, request, op_name),
            None => Err(refuse(
                GET,
                ActErrorKind::Unknown,
                format!("commitment {region}/{name} was inserted but cannot be read back"),
            )),
        }
    }

    /// gpucap's commitments in `region` whose tag `key` is `value`.
    pub(crate) async fn commitments_by_tag(
        &self,
        region: &str,
        key: &str,
        value: &str,
    ) -> ActResult<Vec<CloudResource>> {
        let mut out = Vec::new();
        let mut token = String::new();
        loop {
            let page = self
                .commitments
                .list()
                .set_project(&self.config.project)
                .set_region(region)
                .set_page_token(token.clone())
                .send()
                .await
                .map_err(|e| classify(LIST, &e, false))?;
            for c in &page.items {
                if names::tags_of(c.description.as_deref())
                    .get(key)
                    .map(String::as_str)
                    == Some(value)
                {
                    out.push(resource(region, c, "", 0));
                }
            }
            match page.next_page_token.filter(|t| !t.is_empty()) {
                Some(next) => token = next,
                None => return Ok(out),
            }
        }
    }

    pub(crate) async fn describe_commitment(&self, id: &str) -> ActResult<Option<CloudResource>> {
        let Some((region, name)) = names::parse_id(id) else {
            return Ok(None);
        };
        Ok(self
            .commitment_get(&region, &name)
            .await?
            .map(|c| resource(&region, &c, "", 0)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    #[test]
    fn types_and_plans_are_read_from_the_machine_and_the_term() {
        assert_eq!(
            commitment_type("a3-highgpu-8g"),
            Some(commitment::Type::AcceleratorOptimizedA3)
        );
        assert_eq!(
            commitment_type("a3-megagpu-8g"),
            Some(commitment::Type::AcceleratorOptimizedA3Mega)
        );
        assert_eq!(
            commitment_type("a2-ultragpu-8g"),
            Some(commitment::Type::AcceleratorOptimized)
        );
        assert_eq!(commitment_type("n2-standard-8"), None);
        let start = Utc.with_ymd_and_hms(2027, 1, 4, 0, 0, 0).unwrap();
        let year = Utc.with_ymd_and_hms(2028, 1, 4, 0, 0, 0).unwrap();
        let three = Utc.with_ymd_and_hms(2030, 1, 4, 0, 0, 0).unwrap();
        assert_eq!(plan_of(start, year), Some(commitment::Plan::TwelveMonth));
        assert_eq!(
            plan_of(start, three),
            Some(commitment::Plan::ThirtySixMonth)
        );
        assert_eq!(plan_of(start, start + chrono::Duration::days(90)), None);
    }
}
