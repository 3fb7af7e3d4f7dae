//! Capacity Blocks for ML: quoting (`DescribeCapacityBlockOfferings`) and buying
//! (`PurchaseCapacityBlock`). A purchase has no client token and can never be cancelled, so
//! it is exactly one HTTP request per call: the client has SDK retries off and nothing here
//! repeats it. It is tagged with the journal intent, so that an unknown outcome can be
//! reconciled with `find_by_tag` instead of a second purchase.

use aws_sdk_ec2::operation::RequestId;
use aws_sdk_ec2::types::{CapacityReservationInstancePlatform, ResourceType};
use chrono::Duration;
use gpucap_provider::BoxFuture;
use gpucap_provider::capacity::{
    ActErrorKind, ActResult, BlockOffering, BlockQuery, CapacityBlocks, CloudResource, Done,
    Idempotency, Placement, ResourceKind,
};

use super::AwsCapacity;
use super::classify::{classify, refuse};
use super::convert::{count, next_token, reservation, tag_spec, to_chrono, to_smithy};

const DESCRIBE: &str = "DescribeCapacityBlockOfferings";
const PURCHASE: &str = "PurchaseCapacityBlock";

impl AwsCapacity {
    async fn offerings(&self, query: &BlockQuery) -> ActResult<Vec<BlockOffering>> {
        let client = self.ec2(&query.region);
        let instances = count(DESCRIBE, "instance count", query.instances)?;
        let hours = count(DESCRIBE, "duration", query.duration_hours)?;
        // EndDateRange is the latest acceptable *end*.
        let latest_end = query.start_to + Duration::hours(i64::from(query.duration_hours));
        let mut out = Vec::new();
        let mut token: Option<String> = None;
        loop {
            let page = client
                .describe_capacity_block_offerings()
                .instance_type(&query.instance_type)
                .instance_count(instances)
                .capacity_duration_hours(hours)
                .start_date_range(to_smithy(query.start_from))
                .end_date_range(to_smithy(latest_end))
                .set_next_token(token.clone())
                .send()
                .await
                .map_err(|e| classify(DESCRIBE, e))?;
            for o in page.capacity_block_offerings() {
                let row = (|| {
                    Some(BlockOffering {
                        offering_id: o.capacity_block_offering_id()?.to_string(),
                        placement: Placement {
                            region: query.region.clone(),
                            zone: o.availability_zone().map(str::to_string),
                            instance_type: o.instance_type()?.to_string(),
                        },
                        instances: u32::try_from(o.instance_count()?).ok()?,
                        start: o.start_date().and_then(to_chrono)?,
                        end: o.end_date().and_then(to_chrono)?,
                        upfront_fee: o.upfront_fee()?.parse().ok()?,
                        currency: o.currency_code().unwrap_or("USD").to_string(),
                    })
                })();
                match row {
                    Some(row) => out.push(row),
                    None => tracing::warn!(
                        offering = ?o.capacity_block_offering_id(),
                        "skipping a capacity block offering with missing fields"
                    ),
                }
            }
            token = next_token(page.next_token());
            if token.is_none() {
                return Ok(out);
            }
        }
    }

    async fn purchase(
        &self,
        offering: &BlockOffering,
        id: &Idempotency,
        dry_run: bool,
    ) -> ActResult {
        let region = &offering.placement.region;
        let client = self.ec2(region);
        // One send, never in a loop, never retried: see the module doc.
        let sent = client
            .purchase_capacity_block()
            .capacity_block_offering_id(&offering.offering_id)
            .instance_platform(CapacityReservationInstancePlatform::LinuxUnix)
            .tag_specifications(tag_spec(ResourceType::CapacityReservation, &id.tags()))
            .dry_run(dry_run)
            .send()
            .await;
        let out = sent.map_err(|e| classify(PURCHASE, e))?;
        let request_id = out.request_id().map(str::to_string);
        tracing::info!(
            offering = %offering.offering_id,
            intent = %id.intent,
            request_id = ?request_id,
            "capacity block purchased"
        );
        let resource = match out.capacity_reservation() {
            Some(cr) if cr.capacity_reservation_id().is_some() => reservation(region, cr),
            _ => {
                // Bought, but AWS named no reservation: what was bought is known only by tag.
                let ids: Vec<&str> = out
                    .capacity_blocks()
                    .iter()
                    .flat_map(|b| b.capacity_reservation_ids().iter().map(String::as_str))
                    .collect();
                let Some(first) = ids.first() else {
                    let mut e = refuse(
                        PURCHASE,
                        ActErrorKind::Unknown,
                        format!(
                            "the purchase succeeded but the answer names no capacity reservation; find it by the tag {}={}",
                            gpucap_provider::capacity::tag::INTENT,
                            id.intent
                        ),
                    );
                    e.request_id = request_id;
                    return Err(e);
                };
                CloudResource {
                    id: first.to_string(),
                    kind: ResourceKind::CapacityBlock,
                    placement: offering.placement.clone(),
                    instances: offering.instances,
                    start: Some(offering.start),
                    end: Some(offering.end),
                    state: "payment-pending".into(),
                    tags: id.tags(),
                    in_use: None,
                }
            }
        };
        Ok(Done {
            resource,
            request_id,
        })
    }
}

/// Blocks are bought from quoted offerings here, and commitments are not signed by apply: the
/// defaults, which refuse.
impl gpucap_provider::capacity::RequestedBlocks for AwsCapacity {}
impl gpucap_provider::capacity::Commitments for AwsCapacity {}

impl CapacityBlocks for AwsCapacity {
    fn describe_offerings(
        &self,
        query: &BlockQuery,
    ) -> BoxFuture<'_, ActResult<Vec<BlockOffering>>> {
        let query = query.clone();
        Box::pin(async move { self.offerings(&query).await })
    }

    fn purchase_block(
        &self,
        offering: &BlockOffering,
        id: &Idempotency,
        dry_run: bool,
    ) -> BoxFuture<'_, ActResult> {
        let (offering, id) = (offering.clone(), id.clone());
        Box::pin(async move { self.purchase(&offering, &id, dry_run).await })
    }
}
