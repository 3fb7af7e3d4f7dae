//! Finding what exists, for reconciliation after an unknown outcome and for `release`:
//! capacity reservations and blocks (`DescribeCapacityReservations`, by id or by a `tag:KEY`
//! filter), launch templates (`DescribeLaunchTemplates`) and Auto Scaling groups
//! (`DescribeAutoScalingGroups`). Reads only; "not there" is `Ok(None)`, not an error.

use aws_sdk_autoscaling::types::{AutoScalingGroup, Filter as AsgFilter};
use aws_sdk_ec2::types::{Filter, LaunchTemplate};
use gpucap_provider::BoxFuture;
use gpucap_provider::capacity::{ActErrorKind, ActResult, CloudResource, Describe, ResourceKind};

use super::AwsCapacity;
use super::classify::{classify, refuse};
use super::convert::{launch_template, next_token, pool, reservation};

const DESCRIBE_CR: &str = "DescribeCapacityReservations";
const DESCRIBE_LT: &str = "DescribeLaunchTemplates";
const DESCRIBE_ASG: &str = "DescribeAutoScalingGroups";

/// How a Describe call may ask: by ids/names, or by one tag.
#[derive(Clone, Copy)]
pub(crate) enum Lookup<'a> {
    Id(&'a str),
    Tag(&'a str, &'a str),
}

impl AwsCapacity {
    pub(crate) async fn reservations(
        &self,
        region: &str,
        lookup: Lookup<'_>,
    ) -> ActResult<Vec<CloudResource>> {
        let client = self.ec2(region);
        let mut out = Vec::new();
        let mut token: Option<String> = None;
        loop {
            let mut req = client
                .describe_capacity_reservations()
                .set_next_token(token.clone());
            req = match lookup {
                Lookup::Id(id) => req.capacity_reservation_ids(id),
                Lookup::Tag(k, v) => req
                    .filters(Filter::builder().name(format!("tag:{k}")).values(v).build())
                    .max_results(1000),
            };
            let page = match req.send().await {
                Ok(page) => page,
                Err(e) => {
                    let e = classify(DESCRIBE_CR, e);
                    return match e.kind {
                        ActErrorKind::NotFound => Ok(Vec::new()),
                        _ => Err(e),
                    };
                }
            };
            out.extend(
                page.capacity_reservations()
                    .iter()
                    .map(|cr| reservation(region, cr)),
            );
            token = next_token(page.next_token());
            if token.is_none() {
                return Ok(out);
            }
        }
    }

    pub(crate) async fn reservation_by_id(
        &self,
        region: &str,
        id: &str,
    ) -> ActResult<Option<CloudResource>> {
        Ok(self
            .reservations(region, Lookup::Id(id))
            .await?
            .into_iter()
            .find(|r| r.id == id))
    }

    pub(crate) async fn launch_templates(
        &self,
        region: &str,
        lookup: Lookup<'_>,
    ) -> ActResult<Vec<LaunchTemplate>> {
        let client = self.ec2(region);
        let mut out = Vec::new();
        let mut token: Option<String> = None;
        loop {
            let mut req = client
                .describe_launch_templates()
                .set_next_token(token.clone());
            req = match lookup {
                Lookup::Id(id) if id.starts_with("lt-") => req.launch_template_ids(id),
                Lookup::Id(name) => req.launch_template_names(name),
                Lookup::Tag(k, v) => req
                    .filters(Filter::builder().name(format!("tag:{k}")).values(v).build())
                    .max_results(200),
            };
            let page = match req.send().await {
                Ok(page) => page,
                Err(e) => {
                    let e = classify(DESCRIBE_LT, e);
                    return match e.kind {
                        // `InvalidLaunchTemplateName.NotFoundException` for a missing name.
                        ActErrorKind::NotFound => Ok(Vec::new()),
                        _ => Err(e),
                    };
                }
            };
            out.extend(page.launch_templates().iter().cloned());
            token = next_token(page.next_token());
            if token.is_none() {
                return Ok(out);
            }
        }
    }

    pub(crate) async fn groups(
        &self,
        region: &str,
        lookup: Lookup<'_>,
    ) -> ActResult<Vec<AutoScalingGroup>> {
        let client = self.autoscaling(region);
        let mut out = Vec::new();
        let mut token: Option<String> = None;
        loop {
            let mut req = client
                .describe_auto_scaling_groups()
                .set_next_token(token.clone());
            req = match lookup {
                Lookup::Id(name) => req.auto_scaling_group_names(name),
                Lookup::Tag(k, v) => req.filters(
                    AsgFilter::builder()
                        .name(format!("tag:{k}"))
                        .values(v)
                        .build(),
                ),
            };
            let page = req.send().await.map_err(|e| classify(DESCRIBE_ASG, e))?;
            out.extend(page.auto_scaling_groups().iter().cloned());
            token = next_token(page.next_token());
            if token.is_none() {
                return Ok(out);
            }
        }
    }

    pub(crate) async fn group(
        &self,
        region: &str,
        name: &str,
    ) -> ActResult<Option<AutoScalingGroup>> {
        Ok(self
            .groups(region, Lookup::Id(name))
            .await?
            .into_iter()
            .find(|g| g.auto_scaling_group_name() == Some(name)))
    }

    pub(crate) async fn launch_template_named(
        &self,
        region: &str,
        name: &str,
    ) -> ActResult<Option<LaunchTemplate>> {
        Ok(self
            .launch_templates(region, Lookup::Id(name))
            .await?
            .into_iter()
            .find(|t| {
                t.launch_template_name() == Some(name) || t.launch_template_id() == Some(name)
            }))
    }

    async fn by_tag(
        &self,
        region: &str,
        kinds: &[ResourceKind],
        key: &str,
        value: &str,
    ) -> ActResult<Vec<CloudResource>> {
        let wants = |k: ResourceKind| kinds.is_empty() || kinds.contains(&k);
        let lookup = Lookup::Tag(key, value);
        let mut out = Vec::new();
        if wants(ResourceKind::Reservation) || wants(ResourceKind::CapacityBlock) {
            out.extend(
                self.reservations(region, lookup)
                    .await?
                    .into_iter()
                    .filter(|r| wants(r.kind)),
            );
        }
        if wants(ResourceKind::LaunchTemplate) {
            out.extend(
                self.launch_templates(region, lookup)
                    .await?
                    .iter()
                    .map(|t| launch_template(region, t)),
            );
        }
        if wants(ResourceKind::Pool) {
            out.extend(
                self.groups(region, lookup)
                    .await?
                    .iter()
                    .map(|g| pool(region, g)),
            );
        }
        Ok(out)
    }

    async fn one(
        &self,
        region: &str,
        kind: ResourceKind,
        id: &str,
    ) -> ActResult<Option<CloudResource>> {
        match kind {
            ResourceKind::CapacityBlock | ResourceKind::Reservation => {
                self.reservation_by_id(region, id).await
            }
            ResourceKind::LaunchTemplate => Ok(self
                .launch_template_named(region, id)
                .await?
                .map(|t| launch_template(region, &t))),
            ResourceKind::Pool => Ok(self.group(region, id).await?.map(|g| pool(region, &g))),
            ResourceKind::Commitment => Err(refuse(
                "describe",
                ActErrorKind::Other,
                "gpucap makes no commitments on AWS (Savings Plans and Reserved Instances are bought by people)",
            )),
        }
    }
}

impl Describe for AwsCapacity {
    fn find_by_tag(
        &self,
        region: &str,
        kinds: &[ResourceKind],
        key: &str,
        value: &str,
    ) -> BoxFuture<'_, ActResult<Vec<CloudResource>>> {
        let (region, kinds, key, value) = (
            region.to_string(),
            kinds.to_vec(),
            key.to_string(),
            value.to_string(),
        );
        Box::pin(async move { self.by_tag(&region, &kinds, &key, &value).await })
    }

    fn describe(
        &self,
        region: &str,
        kind: ResourceKind,
        id: &str,
    ) -> BoxFuture<'_, ActResult<Option<CloudResource>>> {
        let (region, id) = (region.to_string(), id.to_string());
        Box::pin(async move { self.one(&region, kind, &id).await })
    }
}
