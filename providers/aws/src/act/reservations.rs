//! On-Demand Capacity Reservations: create (with the caller's client token, which the SDK
//! does not fill in for this API), modify and cancel. A reservation gpucap creates always
//! ends by itself (`EndDateType=limited`, `EndDate` = the end of the need), so a crashed or
//! forgotten run stops paying on time. Modify and cancel look the reservation up first and
//! refuse Capacity Blocks (AWS cannot change them) and anything not tagged
//! `managed-by=gpucap`.

use aws_sdk_ec2::operation::RequestId;
use aws_sdk_ec2::types::{
    CapacityReservationDeliveryPreference, CapacityReservationInstancePlatform, EndDateType,
    InstanceMatchCriteria, ResourceType,
};
use chrono::{DateTime, Duration, Utc};
use gpucap_provider::BoxFuture;
use gpucap_provider::capacity::{
    ActErrorKind, ActResult, CloudResource, Done, Idempotency, ReservationRequest, Reservations,
    ResourceKind,
};

use super::AwsCapacity;
use super::classify::{classify, refuse};
use super::convert::{count, not_managed, reservation, tag_spec, to_smithy};
use gpucap_provider::capacity::managed_by_gpucap;

const CREATE: &str = "CreateCapacityReservation";
const MODIFY: &str = "ModifyCapacityReservation";
const CANCEL: &str = "CancelCapacityReservation";

/// AWS takes future-dated reservations between 5 and 120 days ahead (the `StartDate` doc of
/// `CreateCapacityReservation`); nearer starts are made now.
const FUTURE_DATED_FROM: Duration = Duration::days(5);

impl AwsCapacity {
    async fn create(
        &self,
        request: &ReservationRequest,
        id: &Idempotency,
        dry_run: bool,
        now: DateTime<Utc>,
    ) -> ActResult {
        let Some(token) = id.client_token.as_deref().filter(|t| !t.is_empty()) else {
            return Err(refuse(
                CREATE,
                ActErrorKind::Other,
                "CreateCapacityReservation needs a client token (Idempotency::client_token is None): without one a retry could reserve twice",
            ));
        };
        let placement = &request.placement;
        let Some(zone) = placement.zone.as_deref() else {
            return Err(refuse(
                CREATE,
                ActErrorKind::Other,
                format!(
                    "a capacity reservation needs an availability zone; {} in {} has none",
                    placement.instance_type, placement.region
                ),
            ));
        };
        if request.end <= request.start || request.end <= now {
            return Err(refuse(
                CREATE,
                ActErrorKind::Other,
                format!(
                    "the reservation window {} – {} is empty or over",
                    request.start, request.end
                ),
            ));
        }
        let mut req = self
            .ec2(&placement.region)
            .create_capacity_reservation()
            .client_token(token)
            .instance_type(&placement.instance_type)
            .instance_platform(CapacityReservationInstancePlatform::LinuxUnix)
            .availability_zone(zone)
            .instance_count(count(CREATE, "instance count", request.instances)?)
            .instance_match_criteria(InstanceMatchCriteria::Open)
            .end_date_type(EndDateType::Limited)
            .end_date(to_smithy(request.end))
            .tag_specifications(tag_spec(ResourceType::CapacityReservation, &id.tags()))
            .dry_run(dry_run);
        if request.start - now >= FUTURE_DATED_FROM {
            // Future-dated: delivered at StartDate, committed for the whole window asked for.
            req = req
                .start_date(to_smithy(request.start))
                .commitment_duration((request.end - request.start).num_seconds())
                .delivery_preference(CapacityReservationDeliveryPreference::Incremental);
        }
        let out = req.send().await.map_err(|e| classify(CREATE, e))?;
        let request_id = out.request_id().map(str::to_string);
        let Some(cr) = out.capacity_reservation() else {
            let mut e = refuse(
                CREATE,
                ActErrorKind::Unknown,
                "AWS accepted the reservation but returned none; repeat with the same client token to learn its id",
            );
            e.request_id = request_id;
            return Err(e);
        };
        Ok(Done {
            resource: reservation(&placement.region, cr),
            request_id,
        })
    }

    /// The reservation `id`, if gpucap may change it.
    async fn changeable(&self, api: &str, region: &str, id: &str) -> ActResult<CloudResource> {
        let Some(found) = self.reservation_by_id(region, id).await? else {
            return Err(refuse(
                api,
                ActErrorKind::NotFound,
                format!("capacity reservation `{id}` does not exist in {region}"),
            ));
        };
        if found.kind == ResourceKind::CapacityBlock {
            return Err(refuse(
                api,
                ActErrorKind::Other,
                format!("`{id}` is a Capacity Block: AWS cannot modify or cancel it"),
            ));
        }
        if !managed_by_gpucap(&found.tags) {
            return Err(not_managed(api, "capacity reservation", id));
        }
        Ok(found)
    }

    async fn modify(
        &self,
        region: &str,
        id: &str,
        instances: u32,
        end: DateTime<Utc>,
        dry_run: bool,
    ) -> ActResult {
        let mut resource = self.changeable(MODIFY, region, id).await?;
        let out = self
            .ec2(region)
            .modify_capacity_reservation()
            .capacity_reservation_id(id)
            .instance_count(count(MODIFY, "instance count", instances)?)
            .end_date_type(EndDateType::Limited)
            .end_date(to_smithy(end))
            .dry_run(dry_run)
            .send()
            .await
            .map_err(|e| classify(MODIFY, e))?;
        let request_id = out.request_id().map(str::to_string);
        if out.r#return() != Some(true) {
            let mut e = refuse(
                MODIFY,
                ActErrorKind::Other,
                format!("AWS did not confirm the change of `{id}`"),
            );
            e.request_id = request_id;
            return Err(e);
        }
        resource.instances = instances;
        resource.end = Some(end);
        Ok(Done {
            resource,
            request_id,
        })
    }

    async fn cancel(&self, region: &str, id: &str, dry_run: bool) -> ActResult {
        let mut resource = self.changeable(CANCEL, region, id).await?;
        let out = self
            .ec2(region)
            .cancel_capacity_reservation()
            .capacity_reservation_id(id)
            .dry_run(dry_run)
            .send()
            .await
            .map_err(|e| classify(CANCEL, e))?;
        let request_id = out.request_id().map(str::to_string);
        if out.r#return() != Some(true) {
            let mut e = refuse(
                CANCEL,
                ActErrorKind::Other,
                format!("AWS did not confirm the cancellation of `{id}`"),
            );
            e.request_id = request_id;
            return Err(e);
        }
        resource.state = "cancelled".into();
        Ok(Done {
            resource,
            request_id,
        })
    }
}

impl Reservations for AwsCapacity {
    fn create_reservation(
        &self,
        request: &ReservationRequest,
        id: &Idempotency,
        dry_run: bool,
    ) -> BoxFuture<'_, ActResult> {
        let (request, id) = (request.clone(), id.clone());
        Box::pin(async move { self.create(&request, &id, dry_run, Utc::now()).await })
    }

    fn modify_reservation(
        &self,
        region: &str,
        reservation_id: &str,
        instances: u32,
        end: DateTime<Utc>,
        dry_run: bool,
    ) -> BoxFuture<'_, ActResult> {
        let (region, id) = (region.to_string(), reservation_id.to_string());
        Box::pin(async move { self.modify(&region, &id, instances, end, dry_run).await })
    }

    fn cancel_reservation(
        &self,
        region: &str,
        reservation_id: &str,
        dry_run: bool,
    ) -> BoxFuture<'_, ActResult> {
        let (region, id) = (region.to_string(), reservation_id.to_string());
        Box::pin(async move { self.cancel(&region, &id, dry_run).await })
    }
}
