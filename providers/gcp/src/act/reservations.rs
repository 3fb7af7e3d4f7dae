//! Zonal reservations: create (looked up by name, then `reservations.insert` with a
//! `requestId`, followed to `DONE`), resize, delete, and find (get by name, aggregated list by
//! gpucap's marks); and the capability traits wired to their modules: capacity blocks are
//! requested future reservations ([`super::future`]; there are no quoted offerings to buy,
//! so `describe_offerings` and `purchase_block` refuse), commitments
//! [`super::commitments`]', pools [`super::pools`]'.

use chrono::{DateTime, SecondsFormat, Utc};
use google_cloud_compute_v1::model::{
    AllocationSpecificSKUAllocationReservedInstanceProperties, AllocationSpecificSKUReservation,
    Reservation, ReservationsResizeRequest, operation, reservation,
};
use gpucap_provider::BoxFuture;
use gpucap_provider::capacity::{
    ActError, ActErrorKind, ActResult, BlockOffering, BlockQuery, CapacityBlocks, CloudResource,
    CommitmentRequest, Commitments, Describe, Done, Idempotency, Placement, RequestedBlocks,
    ReservationRequest, Reservations, ResourceKind,
};

use super::GcpCapacity;
use super::names;
use super::ops::{Scope, classify, found, note, refuse};

const INSERT: &str = "reservations.insert";
const GET: &str = "reservations.get";
const LIST: &str = "reservations.list";
const AGGREGATED: &str = "reservations.aggregatedList";
const RESIZE: &str = "reservations.resize";
const DELETE: &str = "reservations.delete";
/// How many failed inserts a requestId chain skips (see `create`).
const MAX_CHAIN: u32 = 8;

fn busy(r: &Reservation) -> bool {
    matches!(
        r.status,
        Some(
            reservation::Status::Creating
                | reservation::Status::Updating
                | reservation::Status::Deleting
        )
    )
}

fn count(r: &Reservation) -> Option<i64> {
    r.specific_reservation.as_ref().and_then(|s| s.count)
}

impl GcpCapacity {
    /// The reservation, or `None` when it does not exist.
    async fn get(&self, zone: &str, name: &str) -> ActResult<Option<Reservation>> {
        found(
            GET,
            self.reservations
                .get()
                .set_project(&self.config.project)
                .set_zone(zone)
                .set_reservation(name)
                .send()
                .await,
        )
    }

    /// The reservation, or `None` when it does not exist (for the other modules).
    pub(crate) async fn reservation_get(
        &self,
        zone: &str,
        name: &str,
    ) -> ActResult<Option<Reservation>> {
        self.get(zone, name).await
    }

    /// Waits until a reservation some operation is changing settles; what is there then.
    async fn settled(&self, zone: &str, name: &str) -> ActResult<Option<Reservation>> {
        let deadline = tokio::time::Instant::now() + self.config.operation_timeout;
        loop {
            let r = self.get(zone, name).await?;
            if !r.as_ref().is_some_and(busy) {
                return Ok(r);
            }
            if tokio::time::Instant::now() >= deadline {
                return Err(refuse(
                    GET,
                    ActErrorKind::Unknown,
                    format!("reservation {zone}/{name} is still being changed"),
                ));
            }
            tokio::time::sleep(self.config.poll_interval).await;
        }
    }

    fn done(zone: &str, r: &Reservation, request_id: Option<String>) -> Done {
        Done {
            resource: names::resource(zone, r),
            request_id,
        }
    }

    async fn create(
        &self,
        request: &ReservationRequest,
        id: &Idempotency,
        dry_run: bool,
    ) -> ActResult {
        let Some(token) = id.client_token.as_deref().filter(|t| !t.is_empty()) else {
            return Err(refuse(
                INSERT,
                ActErrorKind::Other,
                "a GCP reservation is named from the client token (Idempotency::client_token is None): without one a retry could reserve twice",
            ));
        };
        let placement = &request.placement;
        let Some(zone) = placement.zone.as_deref().filter(|z| !z.is_empty()) else {
            return Err(refuse(
                INSERT,
                ActErrorKind::Other,
                format!(
                    "GCP reservations are zonal and this one names no zone (region {}); re-plan with a zone",
                    placement.region
                ),
            ));
        };
        if request.instances == 0 {
            return Err(refuse(
                INSERT,
                ActErrorKind::Other,
                "a reservation of 0 instances reserves nothing",
            ));
        }
        let name = names::reservation_name(&id.action, token);
        if dry_run {
            // Compute Engine has no dry run: a read proves the credentials, project and zone.
            self.reservations
                .list()
                .set_project(&self.config.project)
                .set_zone(zone)
                .set_max_results(1_u32)
                .send()
                .await
                .map_err(|e| classify(LIST, &e, false))?;
            return Err(refuse(
                INSERT,
                ActErrorKind::DryRunOk,
                format!(
                    "would insert reservation {zone}/{name} ({} x {})",
                    request.instances, placement.instance_type
                ),
            ));
        }

        // What an earlier attempt made is found by its name, and waited for, before anything
        // is sent again.
        if let Some(found) = self.settled(zone, &name).await? {
            return self
                .adopt(zone, &name, found, request.instances, None)
                .await;
        }

        let mut body = Reservation::default();
        body.name = Some(name.clone());
        body.description = Some(names::description(id));
        body.specific_reservation_required = Some(false);
        let mut properties = AllocationSpecificSKUAllocationReservedInstanceProperties::default();
        properties.machine_type = Some(placement.instance_type.clone());
        let mut specific = AllocationSpecificSKUReservation::default();
        specific.count = Some(i64::from(request.instances));
        specific.instance_properties = Some(properties);
        body.specific_reservation = Some(specific);
        if request.end > Utc::now() {
            // It ends by itself at the planned end, like an EC2 reservation's end date.
            body.delete_at_time = Some(request.end.to_rfc3339_opts(SecondsFormat::Secs, true));
        }
        // The requestId is derived from the client token (plan and action). Compute Engine
        // answers a repeat of a completed request with its Operation: a failed insert (an
        // exhausted zone) would be failed again for as long as it remembers the id. An insert
        // that failed made nothing, so after one the id is chained on deterministically
        // (the token and the failed Operation's name) and the insert is asked again.
        let mut request_id = names::request_id(INSERT, token);
        let mut links = 0;
        loop {
            let sent = self
                .reservations
                .insert()
                .set_project(&self.config.project)
                .set_zone(zone)
                .set_request_id(&request_id)
                .set_body(body.clone())
                .send()
                .await;
            let op = match sent {
                Ok(op) => op,
                Err(e) => {
                    let e = classify(INSERT, &e, true);
                    if matches!(e.code.as_deref(), Some("alreadyExists" | "conflict")) {
                        return self.after_conflict(zone, &name, request.instances, e).await;
                    }
                    return Err(e);
                }
            };
            // An Operation already DONE when the insert answers is the answer to an earlier
            // request with this id (Compute Engine's dedupe).
            let replayed = matches!(op.status, Some(operation::Status::Done))
                && op.client_operation_id.as_deref() == Some(request_id.as_str());
            let failed = op.error.as_ref().is_some_and(|e| !e.errors.is_empty());
            let op_name = op.name.clone();
            let chain = |links: &mut u32| {
                *links += 1;
                let old = op_name.clone().unwrap_or_default();
                tracing::debug!(operation = %old, "the requestId answered with an earlier insert; asking again under a chained one");
                names::request_id(INSERT, &format!("{token}:after:{old}"))
            };
            if replayed && failed && links < MAX_CHAIN {
                request_id = chain(&mut links);
                continue;
            }
            note(Scope::Zone(zone), &op);
            match self.wait_for(INSERT, zone, op).await {
                Ok(_) => {}
                Err(e)
                    if matches!(
                        e.code.as_deref(),
                        Some("alreadyExists" | "RESOURCE_ALREADY_EXISTS")
                    ) =>
                {
                    return self.after_conflict(zone, &name, request.instances, e).await;
                }
                Err(e) => return Err(e),
            }
            match self.settled(zone, &name).await? {
                // Read back, and checked again: whatever holds the name must be gpucap's (a
                // requestId answered for another request would otherwise pass for this one).
                Some(r) if !names::ours(&r) => {
                    return Err(refuse(
                        INSERT,
                        ActErrorKind::Other,
                        format!(
                            "a reservation named {name} exists in {zone} and its description does not say gpucap made it; not changed"
                        ),
                    ));
                }
                Some(r) => return Ok(Self::done(zone, &r, op_name)),
                // The earlier insert this id answers for made a reservation since deleted.
                None if replayed && links < MAX_CHAIN => request_id = chain(&mut links),
                None => {
                    return Err(refuse(
                        GET,
                        ActErrorKind::Unknown,
                        format!("reservation {zone}/{name} was inserted but cannot be read back"),
                    ));
                }
            }
        }
    }

    /// A 409 on insert: the name is taken. If gpucap made it, what was asked is done.
    async fn after_conflict(
        &self,
        zone: &str,
        name: &str,
        instances: u32,
        e: ActError,
    ) -> ActResult {
        match self.settled(zone, name).await? {
            Some(found) => self.adopt(zone, name, found, instances, e.request_id).await,
            None => Err(ActError {
                kind: ActErrorKind::Transient,
                ..e
            }),
        }
    }

    /// An existing reservation under the name gpucap would give: done if it is gpucap's
    /// (resized if it was asked with another count), refused otherwise.
    async fn adopt(
        &self,
        zone: &str,
        name: &str,
        found: Reservation,
        instances: u32,
        request_id: Option<String>,
    ) -> ActResult {
        if !names::ours(&found) {
            return Err(refuse(
                INSERT,
                ActErrorKind::Other,
                format!(
                    "a reservation named {name} exists in {zone} and its description does not say gpucap made it; not changed"
                ),
            ));
        }
        if count(&found) != Some(i64::from(instances)) {
            return self.resize(zone, name, instances).await;
        }
        Ok(Self::done(zone, &found, request_id))
    }

    async fn resize(&self, zone: &str, name: &str, instances: u32) -> ActResult {
        let mut body = ReservationsResizeRequest::default();
        body.specific_sku_count = Some(i64::from(instances));
        // Unique per reservation and target count; a repeat inside the dedupe window of an
        // earlier resize to the same count is caught by the read-back below.
        let key = format!("{}:{instances}", names::id_of(zone, name));
        let mut request_id = names::request_id(RESIZE, &key);
        for attempt in 0..2 {
            let op = self
                .reservations
                .resize()
                .set_project(&self.config.project)
                .set_zone(zone)
                .set_reservation(name)
                .set_request_id(&request_id)
                .set_body(body.clone())
                .send()
                .await
                .map_err(|e| classify(RESIZE, &e, true))?;
            let op_name = op.name.clone();
            self.wait_for(RESIZE, zone, op).await?;
            let r = self.settled(zone, name).await?.ok_or_else(|| {
                refuse(
                    GET,
                    ActErrorKind::Unknown,
                    format!("reservation {zone}/{name} was resized but is gone"),
                )
            })?;
            if count(&r) == Some(i64::from(instances)) || attempt == 1 {
                return Ok(Self::done(zone, &r, op_name));
            }
            // The same requestId answered an older resize: ask once more with a fresh one.
            request_id = names::request_id(RESIZE, &format!("{key}:{}", uuid::Uuid::new_v4()));
        }
        unreachable!("the loop returns on its last attempt")
    }

    /// The reservation `id`, if gpucap may change it.
    async fn changeable(
        &self,
        api: &str,
        id: &str,
    ) -> ActResult<Option<(String, String, Reservation)>> {
        let Some((zone, name)) = names::parse_id(id) else {
            return Err(refuse(
                api,
                ActErrorKind::Other,
                format!("`{id}` is not a GCP reservation id (zone/name)"),
            ));
        };
        let Some(r) = self.settled(&zone, &name).await? else {
            return Ok(None);
        };
        if !names::ours(&r) {
            return Err(refuse(
                api,
                ActErrorKind::Other,
                format!(
                    "reservation `{id}` was not made by gpucap (its name or description says otherwise); gpucap changes only what it made"
                ),
            ));
        }
        Ok(Some((zone, name, r)))
    }

    async fn modify(&self, id: &str, instances: u32, dry_run: bool) -> ActResult {
        let Some((zone, name, r)) = self.changeable(RESIZE, id).await? else {
            return Err(refuse(
                RESIZE,
                ActErrorKind::NotFound,
                format!("reservation `{id}` does not exist"),
            ));
        };
        if instances == 0 {
            return Err(refuse(
                RESIZE,
                ActErrorKind::Other,
                "a reservation cannot be resized to 0; delete it instead",
            ));
        }
        if dry_run {
            return Err(refuse(
                RESIZE,
                ActErrorKind::DryRunOk,
                format!("would resize {zone}/{name} to {instances}"),
            ));
        }
        if count(&r) == Some(i64::from(instances)) {
            return Ok(Self::done(&zone, &r, None));
        }
        self.resize(&zone, &name, instances).await
    }

    async fn cancel(&self, region: &str, id: &str, dry_run: bool) -> ActResult {
        let Some((zone, name, r)) = self.changeable(DELETE, id).await? else {
            // Already gone (an earlier attempt whose answer was lost, or its deleteAtTime came).
            let zone = names::parse_id(id).map(|(z, _)| z);
            return Ok(Done {
                resource: CloudResource {
                    id: id.to_string(),
                    kind: ResourceKind::Reservation,
                    placement: Placement {
                        region: zone
                            .as_deref()
                            .map(names::region_of)
                            .unwrap_or_else(|| region.to_string()),
                        zone,
                        instance_type: String::new(),
                    },
                    instances: 0,
                    start: None,
                    end: None,
                    state: "cancelled".into(),
                    tags: Default::default(),
                    in_use: Some(0),
                },
                request_id: None,
            });
        };
        let in_use = r
            .specific_reservation
            .as_ref()
            .and_then(|s| s.in_use_count)
            .unwrap_or(0);
        if in_use > 0 {
            return Err(refuse(
                DELETE,
                ActErrorKind::Other,
                format!(
                    "{in_use} instance(s) are using reservation {zone}/{name}; gpucap deletes only idle reservations"
                ),
            ));
        }
        if dry_run {
            return Err(refuse(
                DELETE,
                ActErrorKind::DryRunOk,
                format!("would delete {zone}/{name}"),
            ));
        }
        let request_id = names::request_id(DELETE, &names::id_of(&zone, &name));
        let op = match self
            .reservations
            .delete()
            .set_project(&self.config.project)
            .set_zone(&zone)
            .set_reservation(&name)
            .set_request_id(&request_id)
            .send()
            .await
        {
            Ok(op) => op,
            Err(e) => {
                let e = classify(DELETE, &e, true);
                if e.kind != ActErrorKind::NotFound {
                    return Err(e);
                }
                let mut done = Self::done(&zone, &r, None);
                done.resource.state = "cancelled".into();
                return Ok(done);
            }
        };
        let op_name = op.name.clone();
        match self.wait_for(DELETE, &zone, op).await {
            Ok(_) => {}
            Err(e) if e.kind == ActErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
        // The id answers for one delete of this name; a reservation of the same name made
        // again since (inside the dedupe window) would still be there: ask once more.
        if self.settled(&zone, &name).await?.is_some() {
            let fresh = names::request_id(
                DELETE,
                &format!("{}:{}", names::id_of(&zone, &name), uuid::Uuid::new_v4()),
            );
            let op = self
                .reservations
                .delete()
                .set_project(&self.config.project)
                .set_zone(&zone)
                .set_reservation(&name)
                .set_request_id(&fresh)
                .send()
                .await
                .map_err(|e| classify(DELETE, &e, true))?;
            self.wait_for(DELETE, &zone, op).await?;
        }
        let mut done = Self::done(&zone, &r, op_name);
        done.resource.state = "cancelled".into();
        Ok(done)
    }

    async fn by_tag(
        &self,
        region: &str,
        kinds: &[ResourceKind],
        key: &str,
        value: &str,
    ) -> ActResult<Vec<CloudResource>> {
        let mut out = Vec::new();
        if kinds.is_empty() || kinds.contains(&ResourceKind::Pool) {
            out.extend(self.pools_by_tag(region, key, value).await?);
        }
        if kinds.is_empty() || kinds.contains(&ResourceKind::CapacityBlock) {
            out.extend(self.futures_by_tag(region, key, value).await?);
        }
        if kinds.is_empty() || kinds.contains(&ResourceKind::Commitment) {
            out.extend(self.commitments_by_tag(region, key, value).await?);
        }
        if !kinds.is_empty() && !kinds.contains(&ResourceKind::Reservation) {
            return Ok(out);
        }
        let mut token = String::new();
        loop {
            let page = self
                .reservations
                .aggregated_list()
                .set_project(&self.config.project)
                .set_page_token(token.clone())
                .send()
                .await
                .map_err(|e| classify(AGGREGATED, &e, false))?;
            let mut scopes: Vec<_> = page.items.into_iter().collect();
            scopes.sort_by(|a, b| a.0.cmp(&b.0));
            for (scope, list) in scopes {
                let zone = names::last_segment(&scope).to_string();
                if zone != region && names::region_of(&zone) != region {
                    continue;
                }
                for r in &list.reservations {
                    if names::tags_of(r.description.as_deref())
                        .get(key)
                        .map(String::as_str)
                        == Some(value)
                    {
                        out.push(names::resource(&zone, r));
                    }
                }
            }
            match page.next_page_token.filter(|t| !t.is_empty()) {
                Some(next) => token = next,
                None => return Ok(out),
            }
        }
    }

    async fn one(
        &self,
        region: &str,
        kind: ResourceKind,
        id: &str,
    ) -> ActResult<Option<CloudResource>> {
        match kind {
            ResourceKind::Pool => return self.describe_pool(region, id).await,
            ResourceKind::CapacityBlock => return self.describe_future(id).await,
            ResourceKind::Commitment => return self.describe_commitment(id).await,
            _ => {}
        }
        if kind != ResourceKind::Reservation {
            return Err(unsupported("describe", kind));
        }
        let Some((zone, name)) = names::parse_id(id) else {
            return Ok(None);
        };
        Ok(self
            .get(&zone, &name)
            .await?
            .map(|r| names::resource(&zone, &r)))
    }
}

fn unsupported(api: &str, kind: ResourceKind) -> ActError {
    let what = match kind {
        ResourceKind::CapacityBlock => {
            "GCP capacity blocks are future reservations in calendar mode: there is no offering to quote or buy; they are requested by name (`request_block`)"
        }
        ResourceKind::LaunchTemplate => {
            "a GCP pool's instance template is described with its pool (kind `pool`)"
        }
        ResourceKind::Commitment => {
            "GCP commitments (regionCommitments.insert) are signed with `create_commitment`"
        }
        ResourceKind::Reservation | ResourceKind::Pool => "not supported",
    };
    refuse(api, ActErrorKind::Other, what)
}

impl CapacityBlocks for GcpCapacity {
    fn describe_offerings(
        &self,
        _query: &BlockQuery,
    ) -> BoxFuture<'_, ActResult<Vec<BlockOffering>>> {
        Box::pin(async {
            Err(unsupported(
                "advice.calendarMode",
                ResourceKind::CapacityBlock,
            ))
        })
    }

    fn purchase_block(
        &self,
        _offering: &BlockOffering,
        _id: &Idempotency,
        _dry_run: bool,
    ) -> BoxFuture<'_, ActResult> {
        Box::pin(async {
            Err(unsupported(
                "futureReservations.insert",
                ResourceKind::CapacityBlock,
            ))
        })
    }
}

impl RequestedBlocks for GcpCapacity {
    fn request_block(
        &self,
        request: &ReservationRequest,
        id: &Idempotency,
        dry_run: bool,
    ) -> BoxFuture<'_, ActResult> {
        let (request, id) = (request.clone(), id.clone());
        Box::pin(async move { self.request_future(&request, &id, dry_run).await })
    }

    fn cancel_block(
        &self,
        region: &str,
        block_id: &str,
        dry_run: bool,
    ) -> BoxFuture<'_, ActResult> {
        let (region, id) = (region.to_string(), block_id.to_string());
        Box::pin(async move { self.cancel_future(&region, &id, dry_run).await })
    }
}

impl Commitments for GcpCapacity {
    fn create_commitment(
        &self,
        request: &CommitmentRequest,
        id: &Idempotency,
        dry_run: bool,
    ) -> BoxFuture<'_, ActResult> {
        let (request, id) = (request.clone(), id.clone());
        Box::pin(async move { self.commit(&request, &id, dry_run).await })
    }
}

impl Reservations for GcpCapacity {
    fn create_reservation(
        &self,
        request: &ReservationRequest,
        id: &Idempotency,
        dry_run: bool,
    ) -> BoxFuture<'_, ActResult> {
        let (request, id) = (request.clone(), id.clone());
        Box::pin(async move { self.create(&request, &id, dry_run).await })
    }

    /// Resizes the reservation; `end` is not sent (`reservations.resize` changes the count
    /// only; the `deleteAtTime` set at insert stays).
    fn modify_reservation(
        &self,
        _region: &str,
        reservation_id: &str,
        instances: u32,
        _end: DateTime<Utc>,
        dry_run: bool,
    ) -> BoxFuture<'_, ActResult> {
        let id = reservation_id.to_string();
        Box::pin(async move { self.modify(&id, instances, dry_run).await })
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

impl Describe for GcpCapacity {
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

    /// `zoneOperations.wait` / `regionOperations.wait` on an Operation an interrupted run
    /// journalled, until it is `DONE`.
    fn wait_operation(&self, operation: &str) -> BoxFuture<'_, ActResult<()>> {
        let operation = operation.to_string();
        Box::pin(async move { self.resume(&operation).await })
    }
}
