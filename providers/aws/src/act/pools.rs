//! GPU pools: a launch template (image, security groups, capacity reservation preference)
//! and an Auto Scaling group with a `MixedInstancesPolicy` over the pool's instance types,
//! on-demand up to `OnDemandBaseCapacity` and spot above it. Both are named by the pool's
//! deterministic name, which is their identity (Auto Scaling takes no client token).
//!
//! `ensure_pool` describes first and creates only what is absent; `scale_pool` sets the
//! desired size and the on-demand base in one `UpdateAutoScalingGroup`. Neither ever touches a
//! group or template whose tags do not say `managed-by=gpucap`. Auto Scaling has no dry run:
//! a dry run checks by describing, and by `CreateLaunchTemplate` with `DryRun` where that is
//! the next call.

use aws_sdk_autoscaling::types::{
    InstancesDistribution, LaunchTemplate as AsgLaunchTemplate, LaunchTemplateOverrides,
    LaunchTemplateSpecification, MixedInstancesPolicy,
};
use aws_sdk_ec2::operation::RequestId;
use aws_sdk_ec2::types::{
    CapacityReservationPreference, CapacityReservationTarget,
    LaunchTemplateCapacityReservationSpecificationRequest, RequestLaunchTemplateData, ResourceType,
};
use gpucap_provider::BoxFuture;
use gpucap_provider::capacity::{
    ActError, ActErrorKind, ActResult, CloudResource, Done, Idempotency, Placement, PoolSize,
    PoolSpec, Pools, ResourceKind, managed_by_gpucap,
};

use super::AwsCapacity;
use super::classify::{classify, refuse};
use super::convert::{asg_tag_map, asg_tags, count, ec2_tags, not_managed, pool, tag_spec};

const CREATE_LT: &str = "CreateLaunchTemplate";
const CREATE_ASG: &str = "CreateAutoScalingGroup";
const UPDATE_ASG: &str = "UpdateAutoScalingGroup";

/// Spot capacity goes to the pools least likely to be interrupted, at the lowest price among
/// them; on-demand follows the order of the pool's instance types.
const SPOT_STRATEGY: &str = "price-capacity-optimized";
const ON_DEMAND_STRATEGY: &str = "prioritized";

fn dry_run_ok(api: &str, message: impl Into<String>) -> ActError {
    refuse(api, ActErrorKind::DryRunOk, message)
}

impl AwsCapacity {
    async fn ensure(&self, spec: &PoolSpec, id: &Idempotency, dry_run: bool) -> ActResult {
        let region = &spec.region;
        if spec.instance_types.is_empty() {
            return Err(refuse(
                CREATE_ASG,
                ActErrorKind::Other,
                format!("pool `{}` names no instance types", spec.name),
            ));
        }
        if spec.subnets.is_empty() {
            return Err(refuse(
                CREATE_ASG,
                ActErrorKind::Other,
                format!("pool `{}` names no subnets to launch into", spec.name),
            ));
        }
        let max_size = count(CREATE_ASG, "max size", spec.max_size)?;

        if let Some(group) = self.group(region, &spec.name).await? {
            if !managed_by_gpucap(&asg_tag_map(group.tags())) {
                return Err(not_managed(CREATE_ASG, "Auto Scaling group", &spec.name));
            }
            // There already; a pool is never re-shaped behind the plan's back.
            return Ok(Done {
                resource: pool(region, &group),
                request_id: None,
            });
        }

        let template = self.launch_template_named(region, &spec.name).await?;
        let mut request_id = None;
        match template {
            Some(t) if !managed_by_gpucap(&ec2_tags(t.tags())) => {
                return Err(not_managed(CREATE_LT, "launch template", &spec.name));
            }
            Some(_) => {}
            None => {
                let out = self
                    .ec2(region)
                    .create_launch_template()
                    .launch_template_name(&spec.name)
                    .set_client_token(id.client_token.clone())
                    .launch_template_data(template_data(spec))
                    .tag_specifications(tag_spec(ResourceType::LaunchTemplate, &id.tags()))
                    .dry_run(dry_run)
                    .send()
                    .await
                    .map_err(|e| classify(CREATE_LT, e))?;
                request_id = out.request_id().map(str::to_string);
            }
        }
        if dry_run {
            return Err(dry_run_ok(
                CREATE_ASG,
                format!(
                    "Auto Scaling has no dry run; group `{}` does not exist and would be created",
                    spec.name
                ),
            ));
        }

        let policy = MixedInstancesPolicy::builder()
            .launch_template(
                AsgLaunchTemplate::builder()
                    .launch_template_specification(
                        LaunchTemplateSpecification::builder()
                            .launch_template_name(&spec.name)
                            .version("$Latest")
                            .build(),
                    )
                    .set_overrides(Some(
                        spec.instance_types
                            .iter()
                            .map(|t| LaunchTemplateOverrides::builder().instance_type(t).build())
                            .collect(),
                    ))
                    .build(),
            )
            .instances_distribution(distribution(None, 0))
            .build();
        let created = self
            .autoscaling(region)
            .create_auto_scaling_group()
            .auto_scaling_group_name(&spec.name)
            .min_size(0)
            .max_size(max_size)
            .desired_capacity(0)
            .vpc_zone_identifier(spec.subnets.join(","))
            .mixed_instances_policy(policy)
            .set_tags(Some(asg_tags(&spec.name, &id.tags())))
            .send()
            .await;
        match created {
            Ok(out) => request_id = out.request_id().map(str::to_string).or(request_id),
            Err(e) => {
                let e = classify(CREATE_ASG, e);
                // Someone made it between our describe and create: fine if it is ours.
                if e.code.as_deref() != Some("AlreadyExists") {
                    return Err(e);
                }
                match self.group(region, &spec.name).await? {
                    Some(g) if managed_by_gpucap(&asg_tag_map(g.tags())) => {}
                    _ => return Err(not_managed(CREATE_ASG, "Auto Scaling group", &spec.name)),
                }
            }
        }
        let resource = match self.group(region, &spec.name).await {
            Ok(Some(group)) => pool(region, &group),
            // Created but not visible yet (eventual consistency): say what was asked for.
            _ => CloudResource {
                id: spec.name.clone(),
                kind: ResourceKind::Pool,
                placement: Placement {
                    region: region.clone(),
                    zone: None,
                    instance_type: spec.instance_types[0].clone(),
                },
                instances: 0,
                start: None,
                end: None,
                state: "created".into(),
                tags: id.tags(),
                in_use: None,
            },
        };
        Ok(Done {
            resource,
            request_id,
        })
    }

    async fn scale(&self, region: &str, name: &str, size: PoolSize, dry_run: bool) -> ActResult {
        let Some(group) = self.group(region, name).await? else {
            return Err(refuse(
                UPDATE_ASG,
                ActErrorKind::NotFound,
                format!("Auto Scaling group `{name}` does not exist in {region}"),
            ));
        };
        if !managed_by_gpucap(&asg_tag_map(group.tags())) {
            return Err(not_managed(UPDATE_ASG, "Auto Scaling group", name));
        }
        let desired = size
            .on_demand
            .checked_add(size.spot)
            .ok_or_else(|| refuse(UPDATE_ASG, ActErrorKind::Other, "pool size overflows"))?;
        let desired_i32 = count(UPDATE_ASG, "desired capacity", desired)?;
        let on_demand = count(UPDATE_ASG, "on-demand base", size.on_demand)?;
        let max = group.max_size().unwrap_or(0);
        if desired_i32 > max {
            // AWS refuses this with a ValidationError; say so before sending.
            return Err(refuse(
                UPDATE_ASG,
                ActErrorKind::Other,
                format!(
                    "group `{name}` can hold at most {max} instances, {desired} were asked for"
                ),
            ));
        }
        let Some(current) = group.mixed_instances_policy() else {
            return Err(refuse(
                UPDATE_ASG,
                ActErrorKind::Other,
                format!(
                    "group `{name}` has no MixedInstancesPolicy, so it cannot split on-demand from spot"
                ),
            ));
        };
        // The whole policy is sent back with only the distribution changed: an update that
        // carried the distribution alone would drop the overrides on some implementations.
        let policy = MixedInstancesPolicy::builder()
            .set_launch_template(current.launch_template().map(resend))
            .instances_distribution(distribution(current.instances_distribution(), on_demand))
            .build();
        if dry_run {
            return Err(dry_run_ok(
                UPDATE_ASG,
                format!(
                    "Auto Scaling has no dry run; group `{name}` would run {} on-demand and {} spot",
                    size.on_demand, size.spot
                ),
            ));
        }
        let out = self
            .autoscaling(region)
            .update_auto_scaling_group()
            .auto_scaling_group_name(name)
            .mixed_instances_policy(policy)
            .desired_capacity(desired_i32)
            .send()
            .await
            .map_err(|e| classify(UPDATE_ASG, e))?;
        let mut resource = pool(region, &group);
        resource.instances = desired;
        Ok(Done {
            resource,
            request_id: out.request_id().map(str::to_string),
        })
    }
}

/// A described launch template setting, fit to be sent back: Describe names the template by
/// id *and* name, a request must name it by exactly one.
fn resend(current: &AsgLaunchTemplate) -> AsgLaunchTemplate {
    let spec = current.launch_template_specification().map(|s| {
        let by_id = s.launch_template_id().is_some();
        LaunchTemplateSpecification::builder()
            .set_launch_template_id(s.launch_template_id().map(str::to_string))
            .set_launch_template_name(
                (!by_id)
                    .then(|| s.launch_template_name().map(str::to_string))
                    .flatten(),
            )
            .set_version(s.version().map(str::to_string))
            .build()
    });
    AsgLaunchTemplate::builder()
        .set_launch_template_specification(spec)
        .set_overrides(Some(current.overrides().to_vec()))
        .build()
}

/// `on_demand` instances on-demand, every one above them spot; other settings kept.
fn distribution(current: Option<&InstancesDistribution>, on_demand: i32) -> InstancesDistribution {
    InstancesDistribution::builder()
        .on_demand_allocation_strategy(
            current
                .and_then(|d| d.on_demand_allocation_strategy())
                .unwrap_or(ON_DEMAND_STRATEGY),
        )
        .spot_allocation_strategy(
            current
                .and_then(|d| d.spot_allocation_strategy())
                .unwrap_or(SPOT_STRATEGY),
        )
        .set_spot_max_price(current.and_then(|d| d.spot_max_price()).map(str::to_string))
        .on_demand_base_capacity(on_demand)
        .on_demand_percentage_above_base_capacity(0)
        .build()
}

/// Image, security groups and where to launch: into the pool's one reservation when it has
/// exactly one (a launch template can target only one reservation, or a resource group),
/// else into any open reservation that matches.
fn template_data(spec: &PoolSpec) -> RequestLaunchTemplateData {
    let reservations = match spec.capacity_reservations.as_slice() {
        [only] => LaunchTemplateCapacityReservationSpecificationRequest::builder()
            .capacity_reservation_target(
                CapacityReservationTarget::builder()
                    .capacity_reservation_id(only)
                    .build(),
            )
            .build(),
        _ => LaunchTemplateCapacityReservationSpecificationRequest::builder()
            .capacity_reservation_preference(CapacityReservationPreference::Open)
            .build(),
    };
    RequestLaunchTemplateData::builder()
        .image_id(&spec.image)
        .set_security_group_ids(
            (!spec.security_groups.is_empty()).then(|| spec.security_groups.clone()),
        )
        .capacity_reservation_specification(reservations)
        .build()
}

impl Pools for AwsCapacity {
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
        Box::pin(async move { self.scale(&region, &name, size, dry_run).await })
    }
}
