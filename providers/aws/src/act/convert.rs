//! Plain conversions between gpucap's capacity model and the SDK types: times, counts, tags
//! in each service's shape, and described resources to [`CloudResource`]s. No I/O.

use std::collections::BTreeMap;

use aws_sdk_ec2::types::{
    CapacityReservation, CapacityReservationType, ResourceType, Tag as Ec2Tag, TagSpecification,
};
use chrono::{DateTime, Utc};
use gpucap_provider::capacity::{
    ActError, ActErrorKind, CloudResource, Placement, ResourceKind, tag,
};

use super::classify::refuse;

pub(crate) fn to_smithy(t: DateTime<Utc>) -> aws_smithy_types::DateTime {
    aws_smithy_types::DateTime::from_secs_and_nanos(t.timestamp(), t.timestamp_subsec_nanos())
}

pub(crate) fn to_chrono(t: &aws_smithy_types::DateTime) -> Option<DateTime<Utc>> {
    DateTime::from_timestamp(t.secs(), t.subsec_nanos())
}

/// A count as the `i32` the SDK wants.
pub(crate) fn count(api: &str, what: &str, n: u32) -> Result<i32, ActError> {
    i32::try_from(n)
        .map_err(|_| refuse(api, ActErrorKind::Other, format!("{what} {n} is too large")))
}

/// The token of the next page; AWS ends a listing with an absent or empty token.
pub(crate) fn next_token(token: Option<&str>) -> Option<String> {
    token.filter(|t| !t.is_empty()).map(str::to_string)
}

/// EC2 tags for one resource type.
pub(crate) fn tag_spec(kind: ResourceType, tags: &BTreeMap<String, String>) -> TagSpecification {
    TagSpecification::builder()
        .resource_type(kind)
        .set_tags(Some(
            tags.iter()
                .map(|(k, v)| Ec2Tag::builder().key(k).value(v).build())
                .collect(),
        ))
        .build()
}

pub(crate) fn ec2_tags(tags: &[Ec2Tag]) -> BTreeMap<String, String> {
    tag_map(tags.iter().map(|t| (t.key(), t.value())))
}

/// Key-value pairs as a map; tags without a key are dropped, a missing value is empty.
fn tag_map<'a>(
    pairs: impl Iterator<Item = (Option<&'a str>, Option<&'a str>)>,
) -> BTreeMap<String, String> {
    pairs
        .filter_map(|(k, v)| Some((k?.to_string(), v.unwrap_or_default().to_string())))
        .collect()
}

/// Auto Scaling group tags, each propagated to the instances the group launches.
pub(crate) fn asg_tags(
    group: &str,
    tags: &BTreeMap<String, String>,
) -> Vec<aws_sdk_autoscaling::types::Tag> {
    tags.iter()
        .map(|(k, v)| {
            aws_sdk_autoscaling::types::Tag::builder()
                .resource_id(group)
                .resource_type("auto-scaling-group")
                .key(k)
                .value(v)
                .propagate_at_launch(true)
                .build()
        })
        .collect()
}

pub(crate) fn asg_tag_map(
    tags: &[aws_sdk_autoscaling::types::TagDescription],
) -> BTreeMap<String, String> {
    tag_map(tags.iter().map(|t| (t.key(), t.value())))
}

/// The refusal for a resource gpucap did not create.
pub(crate) fn not_managed(api: &str, what: &str, id: &str) -> ActError {
    refuse(
        api,
        ActErrorKind::Other,
        format!(
            "refusing to change {what} `{id}`: it is not tagged {}={}, so gpucap did not create it",
            tag::MANAGED_BY,
            tag::MANAGED_BY_VALUE
        ),
    )
}

/// A capacity reservation (ODCR or Capacity Block) as gpucap sees it.
pub(crate) fn reservation(region: &str, cr: &CapacityReservation) -> CloudResource {
    let kind = if cr.reservation_type() == Some(&CapacityReservationType::CapacityBlock) {
        ResourceKind::CapacityBlock
    } else {
        ResourceKind::Reservation
    };
    CloudResource {
        id: cr.capacity_reservation_id().unwrap_or_default().to_string(),
        kind,
        placement: Placement {
            region: region.to_string(),
            zone: cr.availability_zone().map(str::to_string),
            instance_type: cr.instance_type().unwrap_or_default().to_string(),
        },
        instances: cr
            .total_instance_count()
            .and_then(|n| u32::try_from(n).ok())
            .unwrap_or(0),
        start: cr.start_date().and_then(to_chrono),
        end: cr.end_date().and_then(to_chrono),
        state: cr
            .state()
            .map(|s| s.as_str().to_string())
            .unwrap_or_else(|| "unknown".into()),
        tags: ec2_tags(cr.tags()),
        in_use: in_use(cr),
    }
}

/// How many instances run in a reservation: its total minus what is available while it is
/// active, none while it is scheduled or pending (nothing can run in it yet), unknown otherwise.
fn in_use(cr: &CapacityReservation) -> Option<u32> {
    use aws_sdk_ec2::types::CapacityReservationState as S;
    match cr.state()? {
        S::Active => {
            let total = cr.total_instance_count()?;
            let available = cr.available_instance_count()?;
            u32::try_from(total.checked_sub(available)?).ok()
        }
        S::Scheduled | S::Pending | S::PaymentPending => Some(0),
        _ => None,
    }
}

/// A launch template (its name is gpucap's identity for it).
pub(crate) fn launch_template(
    region: &str,
    lt: &aws_sdk_ec2::types::LaunchTemplate,
) -> CloudResource {
    CloudResource {
        id: lt
            .launch_template_name()
            .or(lt.launch_template_id())
            .unwrap_or_default()
            .to_string(),
        kind: ResourceKind::LaunchTemplate,
        placement: Placement {
            region: region.to_string(),
            zone: None,
            // The instance types are the group's overrides, not the template's.
            instance_type: String::new(),
        },
        instances: 0,
        start: lt.create_time().and_then(to_chrono),
        end: None,
        state: "available".into(),
        tags: ec2_tags(lt.tags()),
        in_use: None,
    }
}

/// An Auto Scaling group: its name is its id, its size the desired capacity.
pub(crate) fn pool(
    region: &str,
    group: &aws_sdk_autoscaling::types::AutoScalingGroup,
) -> CloudResource {
    let first_type = group
        .mixed_instances_policy()
        .and_then(|p| p.launch_template())
        .and_then(|lt| lt.overrides().first())
        .and_then(|o| o.instance_type())
        .unwrap_or_default();
    CloudResource {
        id: group
            .auto_scaling_group_name()
            .unwrap_or_default()
            .to_string(),
        kind: ResourceKind::Pool,
        placement: Placement {
            region: region.to_string(),
            zone: None,
            instance_type: first_type.to_string(),
        },
        instances: group
            .desired_capacity()
            .and_then(|n| u32::try_from(n).ok())
            .unwrap_or(0),
        start: group.created_time().and_then(to_chrono),
        end: None,
        state: group.status().unwrap_or("active").to_string(),
        tags: asg_tag_map(group.tags()),
        in_use: u32::try_from(group.instances().len()).ok(),
    }
}
