//! GPU pools on GCP: a regional instance template and a regional managed instance group
//! (`regionInstanceTemplates`, `regionInstanceGroupManagers`), sized with `resize`, and the
//! instances that actually run counted with `listManagedInstances`.
//!
//! **Shape.** A pool is regional, like the plan's run actions. A managed instance group runs
//! one instance template, and the template fixes the provisioning model, so a pool is up to
//! two (template, group) pairs: the pool's own name for on-demand (`STANDARD`), and
//! `<name>-spot` (`SPOT`) for spot, made the first time the pool is asked to run spot
//! instances. Groups spread `ANY_SINGLE_ZONE` (a training job wants its machines in one zone),
//! limited to the zones of the pool's reservations when it has any; with exactly one
//! reservation the template targets it (`SPECIFIC_RESERVATION`), else it takes any matching
//! one. GPU machines cannot live-migrate: `onHostMaintenance=TERMINATE`.
//!
//! **Identity.** Names are deterministic ([`names::pool_resource_name`]) and gpucap's tags sit
//! in each template's and group's `description`, as on reservations. Before every insert the
//! name is read (`get`); an existing template or group is used only when its name and
//! description say gpucap made it, and nothing else is ever resized. A 409 `alreadyExists`
//! is settled by the same read. Every insert and resize carries a `requestId` (a UUID v5 of
//! the client token, or of the group and size), never the zero UUID, and reports its
//! Operation (`regions/{region}/operations/{name}`) to the executor's journal before waiting
//! on it, so a killed run resumes the wait instead of sending the call again.
//!
//! **Flex-start.** A pool whose spec asks for flex-start gets a `FLEX_START` on-demand
//! template and a group that leaves failed VMs to the request; growing it is a resize request
//! ([`super::flex`]), and sizing it below its queued requests cancels gpucap's first.
//!
//! **Running, not just asked.** A `resize` that is `DONE` only sets the target size. The
//! group's instances are then listed until each has `currentAction=NONE` and is `RUNNING`, or
//! one reports a `lastAttempt` error (`ZONE_RESOURCE_POOL_EXHAUSTED`, `QUOTA_EXCEEDED`, …),
//! or the operation timeout passes. Fewer running than asked is an error of the kind the
//! instance error names (capacity when none does): the group keeps its target and keeps
//! trying, and a later `gpucap apply` looks again.

use google_cloud_compute_v1::model::{
    AttachedDisk, AttachedDiskInitializeParams, DistributionPolicy,
    DistributionPolicyZoneConfiguration, InstanceGroupManager,
    InstanceGroupManagerInstanceLifecyclePolicy, InstanceGroupManagerUpdatePolicy,
    InstanceProperties, InstanceTemplate, ManagedInstance, NetworkInterface, ReservationAffinity,
    Scheduling, Tags, distribution_policy, instance_group_manager_instance_lifecycle_policy,
    instance_group_manager_update_policy, managed_instance, reservation_affinity, scheduling,
};
use gpucap_provider::BoxFuture;
use gpucap_provider::capacity::{
    ActError, ActErrorKind, ActResult, CloudResource, Done, FlexStart, Idempotency, Placement,
    PoolSize, PoolSpec, Pools, ResourceKind, tag,
};

use super::GcpCapacity;
use super::names;
use super::ops::{Scope, classify, found, kind_of_reason, note, refuse};

const TEMPLATE_INSERT: &str = "regionInstanceTemplates.insert";
pub(super) const TEMPLATE_GET: &str = "regionInstanceTemplates.get";
const GROUP_INSERT: &str = "regionInstanceGroupManagers.insert";
pub(super) const GROUP_GET: &str = "regionInstanceGroupManagers.get";
const GROUP_LIST: &str = "regionInstanceGroupManagers.list";
pub(super) const RESIZE: &str = "regionInstanceGroupManagers.resize";
const LIST_MANAGED: &str = "regionInstanceGroupManagers.listManagedInstances";
/// The longest `baseInstanceName` Compute Engine takes.
const MAX_BASE_NAME: usize = 58;

/// What one group runs now, as `listManagedInstances` says.
#[derive(Debug, Default)]
pub(super) struct Running {
    pub(super) running: u32,
    /// Instances listed at all (right after a resize, not every one may show yet).
    listed: u32,
    /// Instances still being created, restarted, … (`currentAction` other than `NONE`).
    busy: u32,
    /// The first `lastAttempt` error an instance reports: (code, message).
    error: Option<(String, String)>,
}

/// How a new group spreads and grows: the zones it may use (none: the region's), and whether
/// it is a flex-start group (grown by resize requests).
#[derive(Debug, Clone, Copy)]
struct Shape<'a> {
    zones: &'a [String],
    flex_start: bool,
}

pub(super) fn not_ours(api: &str, what: &str, region: &str, name: &str) -> ActError {
    refuse(
        api,
        ActErrorKind::Other,
        format!(
            "a {what} named {name} exists in {region} and its name or description does not say gpucap made it; gpucap changes only what it made"
        ),
    )
}

fn size_i32(api: &str, n: u32) -> ActResult<i32> {
    i32::try_from(n).map_err(|_| refuse(api, ActErrorKind::Other, format!("{n} is too many")))
}

/// The pool `name` is: gpucap's action tag on the group, else the group's own name.
fn pool_id(group: &InstanceGroupManager) -> String {
    names::tags_of(group.description.as_deref())
        .remove(tag::ACTION)
        .unwrap_or_else(|| group.name.clone().unwrap_or_default())
}

/// Whether a pool's on-demand template makes flex-start VMs.
pub(super) fn is_flex_start(t: Option<&InstanceTemplate>) -> bool {
    t.and_then(|t| t.properties.as_ref())
        .and_then(|p| p.scheduling.as_ref())
        .is_some_and(|s| s.provisioning_model == Some(scheduling::ProvisioningModel::FlexStart))
}

/// What the template says the machines are.
pub(super) fn machine_of(t: Option<&InstanceTemplate>) -> String {
    t.and_then(|t| t.properties.as_ref())
        .and_then(|p| p.machine_type.clone())
        .unwrap_or_default()
}

/// A pool as gpucap describes it: its on-demand group, with the spot group's size added.
pub(super) fn resource(
    region: &str,
    group: &InstanceGroupManager,
    spot: Option<&InstanceGroupManager>,
    machine: String,
    running: Option<u32>,
) -> CloudResource {
    let target = |g: &InstanceGroupManager| g.target_size.unwrap_or(0).max(0) as u32;
    CloudResource {
        id: pool_id(group),
        kind: ResourceKind::Pool,
        placement: Placement {
            region: region.to_string(),
            zone: None,
            instance_type: machine,
        },
        instances: target(group) + spot.map(target).unwrap_or(0),
        start: None,
        end: None,
        state: "active".into(),
        tags: names::tags_of(group.description.as_deref()),
        in_use: running,
    }
}

/// The instance template body: image, network, reservations, purchase model.
fn template_properties(spec: &PoolSpec, spot: bool) -> InstanceProperties {
    let mut p = InstanceProperties::default();
    p.machine_type = Some(spec.instance_types[0].clone());
    let mut init = AttachedDiskInitializeParams::default();
    init.source_image = Some(spec.image.clone());
    let mut disk = AttachedDisk::default();
    disk.boot = Some(true);
    disk.auto_delete = Some(true);
    disk.initialize_params = Some(init);
    p.disks = vec![disk];
    let mut nic = NetworkInterface::default();
    match spec.subnets.first() {
        Some(subnet) => nic.subnetwork = Some(subnet.clone()),
        None => nic.network = Some("global/networks/default".into()),
    }
    p.network_interfaces = vec![nic];
    if !spec.security_groups.is_empty() {
        // GCP firewall rules apply by network tag: the pool's "security groups" are tags.
        let mut tags = Tags::default();
        tags.items = spec.security_groups.clone();
        p.tags = Some(tags);
    }
    let mut s = Scheduling::default();
    s.on_host_maintenance = Some(scheduling::OnHostMaintenance::Terminate);
    let mut affinity = ReservationAffinity::default();
    if spot {
        // Spot VMs cannot consume reservations.
        s.provisioning_model = Some(scheduling::ProvisioningModel::Spot);
        s.instance_termination_action = Some(scheduling::InstanceTerminationAction::Delete);
        s.automatic_restart = Some(false);
        affinity.consume_reservation_type =
            Some(reservation_affinity::ConsumeReservationType::NoReservation);
    } else if spec.flex_start.is_some() {
        // Flex-start VMs (DWS): queued until capacity frees up, deleted at the end of their
        // run duration (the resize request's), never restarted, and they take no reservation.
        s.provisioning_model = Some(scheduling::ProvisioningModel::FlexStart);
        s.instance_termination_action = Some(scheduling::InstanceTerminationAction::Delete);
        s.automatic_restart = Some(false);
        affinity.consume_reservation_type =
            Some(reservation_affinity::ConsumeReservationType::NoReservation);
    } else {
        s.provisioning_model = Some(scheduling::ProvisioningModel::Standard);
        s.automatic_restart = Some(true);
        match spec.capacity_reservations.as_slice() {
            [only] => {
                affinity.consume_reservation_type =
                    Some(reservation_affinity::ConsumeReservationType::SpecificReservation);
                affinity.key = Some("compute.googleapis.com/reservation-name".into());
                affinity.values = vec![
                    names::parse_id(only)
                        .map(|(_, n)| n)
                        .unwrap_or_else(|| only.clone()),
                ];
            }
            _ => {
                affinity.consume_reservation_type =
                    Some(reservation_affinity::ConsumeReservationType::AnyReservation);
            }
        }
    }
    p.scheduling = Some(s);
    p.reservation_affinity = Some(affinity);
    p
}

/// The spot twin of an on-demand template's properties.
fn spot_properties(on_demand: &InstanceProperties) -> InstanceProperties {
    let mut p = on_demand.clone();
    let mut s = p.scheduling.clone().unwrap_or_default();
    s.provisioning_model = Some(scheduling::ProvisioningModel::Spot);
    s.instance_termination_action = Some(scheduling::InstanceTerminationAction::Delete);
    s.automatic_restart = Some(false);
    s.on_host_maintenance = Some(scheduling::OnHostMaintenance::Terminate);
    p.scheduling = Some(s);
    let mut affinity = ReservationAffinity::default();
    affinity.consume_reservation_type =
        Some(reservation_affinity::ConsumeReservationType::NoReservation);
    p.reservation_affinity = Some(affinity);
    p
}

impl GcpCapacity {
    fn template_link(&self, region: &str, name: &str) -> String {
        format!(
            "projects/{}/regions/{region}/instanceTemplates/{name}",
            self.config.project
        )
    }

    pub(super) async fn template(
        &self,
        region: &str,
        name: &str,
    ) -> ActResult<Option<InstanceTemplate>> {
        found(
            TEMPLATE_GET,
            self.templates
                .get()
                .set_project(&self.config.project)
                .set_region(region)
                .set_instance_template(name)
                .send()
                .await,
        )
    }

    pub(super) async fn group(
        &self,
        region: &str,
        name: &str,
    ) -> ActResult<Option<InstanceGroupManager>> {
        found(
            GROUP_GET,
            self.groups
                .get()
                .set_project(&self.config.project)
                .set_region(region)
                .set_instance_group_manager(name)
                .send()
                .await,
        )
    }

    /// The template `name`, gpucap's: found, or inserted (requestId from `key`).
    async fn ensure_template(
        &self,
        region: &str,
        name: &str,
        description: &str,
        properties: InstanceProperties,
        key: &str,
    ) -> ActResult<InstanceTemplate> {
        let check = |t: InstanceTemplate| {
            if names::owned(t.name.as_deref(), t.description.as_deref()) {
                Ok(t)
            } else {
                Err(not_ours(TEMPLATE_INSERT, "instance template", region, name))
            }
        };
        if let Some(t) = self.template(region, name).await? {
            return check(t);
        }
        let mut body = InstanceTemplate::default();
        body.name = Some(name.to_string());
        body.description = Some(description.to_string());
        body.properties = Some(properties);
        let sent = self
            .templates
            .insert()
            .set_project(&self.config.project)
            .set_region(region)
            .set_request_id(names::request_id(TEMPLATE_INSERT, key))
            .set_body(body)
            .send()
            .await;
        let outcome = match sent {
            Ok(op) => {
                note(Scope::Region(region), &op);
                self.follow(TEMPLATE_INSERT, Scope::Region(region), op)
                    .await
            }
            Err(e) => Err(classify(TEMPLATE_INSERT, &e, true)),
        };
        match outcome {
            Ok(_) => {}
            // Taken: by an earlier attempt of ours (then it is used), or by someone else.
            Err(e) if conflict(&e) => {}
            Err(e) => return Err(e),
        }
        match self.template(region, name).await? {
            Some(t) => check(t),
            None => Err(refuse(
                TEMPLATE_GET,
                ActErrorKind::Unknown,
                format!("instance template {region}/{name} was inserted but cannot be read back"),
            )),
        }
    }

    /// The group `name` on `template`, gpucap's: found, or inserted at size 0.
    async fn ensure_group(
        &self,
        region: &str,
        name: &str,
        description: &str,
        template: &str,
        shape: Shape<'_>,
        key: &str,
    ) -> ActResult<InstanceGroupManager> {
        let Shape { zones, flex_start } = shape;
        let check = |g: InstanceGroupManager| {
            if names::owned(g.name.as_deref(), g.description.as_deref()) {
                Ok(g)
            } else {
                Err(not_ours(
                    GROUP_INSERT,
                    "managed instance group",
                    region,
                    name,
                ))
            }
        };
        if let Some(g) = self.group(region, name).await? {
            return check(g);
        }
        let mut body = InstanceGroupManager::default();
        body.name = Some(name.to_string());
        body.description = Some(description.to_string());
        let mut base = name.to_string();
        base.truncate(MAX_BASE_NAME);
        body.base_instance_name = Some(base.trim_end_matches('-').to_string());
        body.instance_template = Some(self.template_link(region, template));
        body.target_size = Some(0);
        let mut distribution = DistributionPolicy::default();
        distribution.target_shape = Some(distribution_policy::TargetShape::AnySingleZone);
        distribution.zones = zones
            .iter()
            .map(|z| {
                let mut c = DistributionPolicyZoneConfiguration::default();
                c.zone = Some(format!("zones/{z}"));
                c
            })
            .collect();
        body.distribution_policy = Some(distribution);
        // Proactive redistribution off: a training job's machines are never moved between
        // zones behind its back (only EVEN needs it to keep its shape).
        let mut update = InstanceGroupManagerUpdatePolicy::default();
        update.instance_redistribution_type =
            Some(instance_group_manager_update_policy::InstanceRedistributionType::None);
        body.update_policy = Some(update);
        if flex_start {
            // What Google's resize-request examples set: a VM that fails to start is left to
            // the request (which fails or retries as a whole), not repaired one by one.
            let mut lifecycle = InstanceGroupManagerInstanceLifecyclePolicy::default();
            lifecycle.default_action_on_failure = Some(
                instance_group_manager_instance_lifecycle_policy::DefaultActionOnFailure::DoNothing,
            );
            body.instance_lifecycle_policy = Some(lifecycle);
        }
        let sent = self
            .groups
            .insert()
            .set_project(&self.config.project)
            .set_region(region)
            .set_request_id(names::request_id(GROUP_INSERT, key))
            .set_body(body)
            .send()
            .await;
        let outcome = match sent {
            Ok(op) => {
                note(Scope::Region(region), &op);
                self.follow(GROUP_INSERT, Scope::Region(region), op).await
            }
            Err(e) => Err(classify(GROUP_INSERT, &e, true)),
        };
        match outcome {
            Ok(_) => {}
            Err(e) if conflict(&e) => {}
            Err(e) => return Err(e),
        }
        match self.group(region, name).await? {
            Some(g) => check(g),
            None => Err(refuse(
                GROUP_GET,
                ActErrorKind::Unknown,
                format!(
                    "managed instance group {region}/{name} was inserted but cannot be read back"
                ),
            )),
        }
    }

    async fn ensure(&self, spec: &PoolSpec, id: &Idempotency, dry_run: bool) -> ActResult {
        let region = spec.region.as_str();
        let Some(machine) = spec.instance_types.first() else {
            return Err(refuse(
                GROUP_INSERT,
                ActErrorKind::Other,
                format!("pool `{}` names no machine type", spec.name),
            ));
        };
        if spec.image.trim().is_empty() {
            return Err(refuse(
                TEMPLATE_INSERT,
                ActErrorKind::Other,
                format!(
                    "pool `{}` names no image (`image` in `[apply.pools.<pool>]`)",
                    spec.name
                ),
            ));
        }
        let Some(token) = id.client_token.as_deref().filter(|t| !t.is_empty()) else {
            return Err(refuse(
                GROUP_INSERT,
                ActErrorKind::Other,
                "a GCP pool's requestIds come from the client token (Idempotency::client_token is None)",
            ));
        };
        let name = names::pool_resource_name(&spec.name, false);
        if let Some(g) = self.group(region, &name).await? {
            if !names::owned(g.name.as_deref(), g.description.as_deref()) {
                return Err(not_ours(
                    GROUP_INSERT,
                    "managed instance group",
                    region,
                    &name,
                ));
            }
            // There already; a pool is never re-shaped behind the plan's back.
            let t = self.template(region, &name).await?;
            return Ok(Done {
                resource: resource(region, &g, None, machine_of(t.as_ref()), None),
                request_id: None,
            });
        }
        if dry_run {
            // Compute Engine has no dry run: the read above proved project, region and access.
            return Err(refuse(
                GROUP_INSERT,
                ActErrorKind::DryRunOk,
                format!(
                    "would insert instance template and managed instance group {region}/{name} ({machine})"
                ),
            ));
        }
        let description = names::description(id);
        let zones: Vec<String> = spec
            .capacity_reservations
            .iter()
            .filter_map(|r| names::parse_id(r).map(|(z, _)| z))
            .fold(Vec::new(), |mut out, z| {
                if !out.contains(&z) {
                    out.push(z);
                }
                out
            });
        self.ensure_template(
            region,
            &name,
            &description,
            template_properties(spec, false),
            &format!("{token}:template"),
        )
        .await?;
        let g = self
            .ensure_group(
                region,
                &name,
                &description,
                &name,
                Shape {
                    zones: &zones,
                    flex_start: spec.flex_start.is_some(),
                },
                &format!("{token}:group"),
            )
            .await?;
        Ok(Done {
            resource: resource(region, &g, None, machine.clone(), None),
            request_id: None,
        })
    }

    /// Sets one group's target size (absolute); returns the group as it is after.
    async fn resize_group(
        &self,
        region: &str,
        group: InstanceGroupManager,
        size: u32,
    ) -> ActResult<(InstanceGroupManager, Option<String>)> {
        let name = group.name.clone().unwrap_or_default();
        let want = size_i32(RESIZE, size)?;
        if group.target_size == Some(want) {
            return Ok((group, None));
        }
        // Unique per group and size; an earlier resize to the same size inside the dedupe
        // window answers instead, which the read-back catches (then a fresh id is sent).
        let key = format!("{region}/{name}:{size}");
        let mut request_id = names::request_id(RESIZE, &key);
        for attempt in 0..2 {
            let op = self
                .groups
                .resize()
                .set_project(&self.config.project)
                .set_region(region)
                .set_instance_group_manager(&name)
                .set_size(want)
                .set_request_id(&request_id)
                .send()
                .await
                .map_err(|e| classify(RESIZE, &e, true))?;
            let op_name = op.name.clone();
            note(Scope::Region(region), &op);
            self.follow(RESIZE, Scope::Region(region), op).await?;
            let after = self.group(region, &name).await?.ok_or_else(|| {
                refuse(
                    GROUP_GET,
                    ActErrorKind::Unknown,
                    format!("managed instance group {region}/{name} was resized but is gone"),
                )
            })?;
            if after.target_size == Some(want) || attempt == 1 {
                return Ok((after, op_name));
            }
            request_id = names::request_id(RESIZE, &format!("{key}:{}", uuid::Uuid::new_v4()));
        }
        unreachable!("the loop returns on its last attempt")
    }

    /// One look at a group's instances (every page).
    async fn running(&self, region: &str, name: &str) -> ActResult<Running> {
        let mut out = Running::default();
        let mut token = String::new();
        loop {
            let page = self
                .groups
                .list_managed_instances()
                .set_project(&self.config.project)
                .set_region(region)
                .set_instance_group_manager(name)
                .set_page_token(token.clone())
                .send()
                .await
                .map_err(|e| classify(LIST_MANAGED, &e, false))?;
            for i in &page.managed_instances {
                tally(&mut out, i);
            }
            match page.next_page_token.filter(|t| !t.is_empty()) {
                Some(next) => token = next,
                None => return Ok(out),
            }
        }
    }

    /// Lists a group's instances until `want` run, one reports an error, or time is up.
    pub(super) async fn confirm(&self, region: &str, name: &str, want: u32) -> ActResult<Running> {
        let deadline = tokio::time::Instant::now() + self.config.operation_timeout;
        loop {
            let now = self.running(region, name).await?;
            let settled = now.busy == 0 && now.listed >= want;
            if now.running >= want || now.error.is_some() || settled {
                return Ok(now);
            }
            if tokio::time::Instant::now() >= deadline {
                return Ok(now);
            }
            tokio::time::sleep(self.config.poll_interval).await;
        }
    }

    /// Sizes a pool (absolute). `cancel_queued`: a flex-start pool's unfulfilled resize
    /// requests that gpucap made are cancelled first when they would grow the on-demand group
    /// past `size` ([`GcpCapacity::cancel_queued`]); `gpucap release` scaling to zero always
    /// does.
    pub(super) async fn scale(
        &self,
        region: &str,
        pool: &str,
        size: PoolSize,
        dry_run: bool,
        cancel_queued: bool,
    ) -> ActResult {
        let name = names::pool_resource_name(pool, false);
        let Some(group) = self.group(region, &name).await? else {
            if dry_run {
                // A dry run of a new pool: `ensure_pool` would have made it first.
                return Err(refuse(
                    RESIZE,
                    ActErrorKind::DryRunOk,
                    format!(
                        "{region}/{name} does not exist yet; once made it would run {} on-demand and {} spot",
                        size.on_demand, size.spot
                    ),
                ));
            }
            return Err(refuse(
                RESIZE,
                ActErrorKind::NotFound,
                format!("managed instance group {name} does not exist in {region}"),
            ));
        };
        if !names::owned(group.name.as_deref(), group.description.as_deref()) {
            return Err(not_ours(RESIZE, "managed instance group", region, &name));
        }
        let spot_name = names::pool_resource_name(pool, true);
        let spot_group = self.group(region, &spot_name).await?;
        if let Some(g) = &spot_group
            && !names::owned(g.name.as_deref(), g.description.as_deref())
        {
            return Err(not_ours(
                RESIZE,
                "managed instance group",
                region,
                &spot_name,
            ));
        }
        if dry_run {
            return Err(refuse(
                RESIZE,
                ActErrorKind::DryRunOk,
                format!(
                    "would size {region}/{name} to {} on-demand and {spot_name} to {} spot",
                    size.on_demand, size.spot
                ),
            ));
        }
        let template = self.template(region, &name).await?;
        let machine = machine_of(template.as_ref());
        let group = if cancel_queued && is_flex_start(template.as_ref()) {
            self.cancel_queued(region, group, size.on_demand).await?
        } else {
            group
        };
        let spot_group = match spot_group {
            Some(g) => Some(g),
            None if size.spot > 0 => {
                // The spot half is made the first time it is needed, from the on-demand
                // template and with the pool's tags (so it is gpucap's, and found with it).
                let Some(on_demand) = template.as_ref().and_then(|t| t.properties.as_ref()) else {
                    return Err(refuse(
                        TEMPLATE_GET,
                        ActErrorKind::Other,
                        format!(
                            "instance template {region}/{name} is missing; the spot group is made from it"
                        ),
                    ));
                };
                let description = group.description.clone().unwrap_or_default();
                let key = format!("{region}/{spot_name}");
                self.ensure_template(
                    region,
                    &spot_name,
                    &description,
                    spot_properties(on_demand),
                    &format!("{key}:template"),
                )
                .await?;
                let zones: Vec<String> = group
                    .distribution_policy
                    .as_ref()
                    .map(|d| {
                        d.zones
                            .iter()
                            .filter_map(|z| z.zone.as_deref().map(names::last_segment))
                            .map(str::to_string)
                            .collect()
                    })
                    .unwrap_or_default();
                Some(
                    self.ensure_group(
                        region,
                        &spot_name,
                        &description,
                        &spot_name,
                        Shape {
                            zones: &zones,
                            flex_start: false,
                        },
                        &format!("{key}:group"),
                    )
                    .await?,
                )
            }
            None => None,
        };
        let (group, mut request_id) = self.resize_group(region, group, size.on_demand).await?;
        let spot_group = match spot_group {
            Some(g) => {
                let (g, rid) = self.resize_group(region, g, size.spot).await?;
                request_id = request_id.or(rid);
                Some(g)
            }
            None => None,
        };

        // DONE set the target size; count what runs.
        let mut running = 0;
        let mut shortfall: Vec<String> = Vec::new();
        let mut worst: Option<(String, String)> = None;
        for (g, want) in [
            (Some(&name), size.on_demand),
            (spot_group.as_ref().map(|_| &spot_name), size.spot),
        ] {
            let Some(g) = g else { continue };
            if want == 0 {
                continue;
            }
            let now = self.confirm(region, g, want).await?;
            running += now.running.min(want);
            if now.running < want {
                shortfall.push(format!("{g}: {} of {want} running", now.running));
                if worst.is_none() {
                    worst = now.error;
                }
            }
        }
        if !shortfall.is_empty() {
            let (code, message) = worst.unwrap_or_else(|| {
                (
                    String::new(),
                    "instances are still being created".to_string(),
                )
            });
            let kind = kind_of_reason(&code).unwrap_or(ActErrorKind::Capacity);
            return Err(ActError {
                api: format!("gcp:{LIST_MANAGED}"),
                kind,
                code: Some(code).filter(|c| !c.is_empty()),
                message: format!(
                    "{running} of {} instance(s) run ({}): {}. The group keeps its target size and keeps trying, and the next `gpucap apply` looks again",
                    size.on_demand + size.spot,
                    shortfall.join(", "),
                    message.trim_end().trim_end_matches('.')
                ),
                request_id,
            });
        }
        Ok(Done {
            resource: resource(region, &group, spot_group.as_ref(), machine, Some(running)),
            request_id,
        })
    }

    /// The pool `id` (its name), if its on-demand group exists.
    pub(crate) async fn describe_pool(
        &self,
        region: &str,
        id: &str,
    ) -> ActResult<Option<CloudResource>> {
        let name = names::pool_resource_name(id, false);
        let Some(group) = self.group(region, &name).await? else {
            return Ok(None);
        };
        let spot = self
            .group(region, &names::pool_resource_name(id, true))
            .await?;
        let t = self.template(region, &name).await?;
        let mut found = resource(region, &group, spot.as_ref(), machine_of(t.as_ref()), None);
        if is_flex_start(t.as_ref()) {
            // What gpucap's queued resize requests will add is wanted too (`release` sees a
            // pool whose instances are only queued, and cancels them).
            found.instances += self.queued_instances(region, &name).await?;
        }
        Ok(Some(found))
    }

    /// Pools in `region` whose group's tag `key` is `value` (one per pool: its on-demand
    /// group, the spot group carrying the same tags).
    pub(crate) async fn pools_by_tag(
        &self,
        region: &str,
        key: &str,
        value: &str,
    ) -> ActResult<Vec<CloudResource>> {
        let mut out = Vec::new();
        let mut token = String::new();
        loop {
            let page = self
                .groups
                .list()
                .set_project(&self.config.project)
                .set_region(region)
                .set_page_token(token.clone())
                .send()
                .await
                .map_err(|e| classify(GROUP_LIST, &e, false))?;
            for g in &page.items {
                let tags = names::tags_of(g.description.as_deref());
                let id = pool_id(g);
                if tags.get(key).map(String::as_str) == Some(value)
                    && g.name.as_deref() == Some(names::pool_resource_name(&id, false).as_str())
                {
                    out.push(resource(region, g, None, String::new(), None));
                }
            }
            match page.next_page_token.filter(|t| !t.is_empty()) {
                Some(next) => token = next,
                None => return Ok(out),
            }
        }
    }
}

/// An insert that found the name taken (409, or an Operation error saying so).
pub(super) fn conflict(e: &ActError) -> bool {
    matches!(
        e.code.as_deref(),
        Some("alreadyExists" | "RESOURCE_ALREADY_EXISTS" | "conflict")
    )
}

fn tally(out: &mut Running, i: &ManagedInstance) {
    let idle = matches!(
        i.current_action,
        None | Some(managed_instance::CurrentAction::None)
    );
    let up = matches!(
        i.instance_status,
        Some(managed_instance::InstanceStatus::Running)
    );
    out.listed += 1;
    if idle && up {
        out.running += 1;
    } else if !idle {
        out.busy += 1;
    }
    if out.error.is_none()
        && let Some(e) = i
            .last_attempt
            .as_ref()
            .and_then(|a| a.errors.as_ref())
            .and_then(|e| e.errors.first())
    {
        out.error = Some((
            e.code.clone().unwrap_or_default(),
            e.message.clone().unwrap_or_default(),
        ));
    }
}

impl Pools for GcpCapacity {
    fn ensure_pool(
        &self,
        spec: &PoolSpec,
        id: &Idempotency,
        dry_run: bool,
    ) -> BoxFuture<'_, ActResult> {
        let (spec, id) = (spec.clone(), id.clone());
        Box::pin(async move { self.ensure(&spec, &id, dry_run).await })
    }

    fn scale_pool(
        &self,
        region: &str,
        name: &str,
        size: PoolSize,
        dry_run: bool,
    ) -> BoxFuture<'_, ActResult> {
        let (region, name) = (region.to_string(), name.to_string());
        Box::pin(async move { self.scale(&region, &name, size, dry_run, true).await })
    }

    fn request_pool(
        &self,
        region: &str,
        name: &str,
        size: PoolSize,
        flex: FlexStart,
        id: &Idempotency,
        dry_run: bool,
    ) -> BoxFuture<'_, ActResult> {
        let (region, name, id) = (region.to_string(), name.to_string(), id.clone());
        Box::pin(async move { self.flex(&region, &name, size, flex, &id, dry_run).await })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(reservations: &[&str]) -> PoolSpec {
        PoolSpec {
            name: "gpucap-h100-us-central1-a3-highgpu-8g".into(),
            region: "us-central1".into(),
            instance_types: vec!["a3-highgpu-8g".into()],
            image: "projects/deeplearning-platform-release/global/images/family/common-cu124"
                .into(),
            subnets: vec![],
            security_groups: vec!["train".into()],
            capacity_reservations: reservations.iter().map(|r| r.to_string()).collect(),
            max_size: 4,
            flex_start: None,
        }
    }

    #[test]
    fn on_demand_targets_its_one_reservation_and_spot_none() {
        let p = template_properties(&spec(&["us-central1-a/gpucap-r1-abc"]), false);
        let a = p.reservation_affinity.as_ref().unwrap();
        assert_eq!(
            a.consume_reservation_type,
            Some(reservation_affinity::ConsumeReservationType::SpecificReservation)
        );
        assert_eq!(a.values, vec!["gpucap-r1-abc".to_string()]);
        let s = p.scheduling.as_ref().unwrap();
        assert_eq!(
            s.on_host_maintenance,
            Some(scheduling::OnHostMaintenance::Terminate)
        );
        assert_eq!(
            s.provisioning_model,
            Some(scheduling::ProvisioningModel::Standard)
        );
        let spot = spot_properties(&p);
        assert_eq!(
            spot.scheduling.as_ref().unwrap().provisioning_model,
            Some(scheduling::ProvisioningModel::Spot)
        );
        assert_eq!(
            spot.reservation_affinity.unwrap().consume_reservation_type,
            Some(reservation_affinity::ConsumeReservationType::NoReservation)
        );
        let any = template_properties(&spec(&[]), false);
        assert_eq!(
            any.reservation_affinity.unwrap().consume_reservation_type,
            Some(reservation_affinity::ConsumeReservationType::AnyReservation)
        );
        assert_eq!(p.tags.unwrap().items, vec!["train".to_string()]);
    }

    #[test]
    fn instances_count_as_running_only_when_idle_and_running() {
        let mut out = Running::default();
        let mut up = ManagedInstance::default();
        up.current_action = Some(managed_instance::CurrentAction::None);
        up.instance_status = Some(managed_instance::InstanceStatus::Running);
        tally(&mut out, &up);
        let mut creating = ManagedInstance::default();
        creating.current_action = Some(managed_instance::CurrentAction::Creating);
        let mut err =
            google_cloud_compute_v1::model::managed_instance_last_attempt::errors::Errors::default(
            );
        err.code = Some("ZONE_RESOURCE_POOL_EXHAUSTED".into());
        err.message = Some("no room".into());
        let mut errors =
            google_cloud_compute_v1::model::managed_instance_last_attempt::Errors::default();
        errors.errors.push(err);
        let mut attempt = google_cloud_compute_v1::model::ManagedInstanceLastAttempt::default();
        attempt.errors = Some(errors);
        creating.last_attempt = Some(attempt);
        tally(&mut out, &creating);
        assert_eq!((out.running, out.busy), (1, 1));
        assert_eq!(
            out.error.as_ref().map(|e| e.0.as_str()),
            Some("ZONE_RESOURCE_POOL_EXHAUSTED")
        );
        assert_eq!(
            kind_of_reason(&out.error.unwrap().0),
            Some(ActErrorKind::Capacity)
        );
    }
}
