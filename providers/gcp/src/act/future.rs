//! Capacity blocks on GCP: future reservations in calendar mode (`futureReservations.insert`
//! with `reservationMode: CALENDAR`, `planningStatus: SUBMITTED`), read back by name, found by
//! gpucap's marks, and cancelled (`futureReservations.cancel`, then `delete`) while Compute
//! Engine still allows it.
//!
//! A calendar-mode request is not bought from a quoted offering: it is a named request for
//! `totalCount` machines in one zone for a fixed window, which Google reviews. So it is made
//! like a reservation: named from the plan and the action ([`names::reservation_name`]), its
//! `description` carrying gpucap's tags, the name looked up before the insert and after a
//! 409, the insert carrying a `requestId` and followed to `DONE` with `zoneOperations.wait`.
//! The reservation Compute Engine creates at the start of the window gets the same name
//! (`reservationName`), so a pool can target it, and is deleted at the end of the window
//! (`autoDeleteAutoCreatedReservations`).
//!
//! **Cancel.** Compute Engine lets a calendar-mode request be cancelled only while its start
//! is at least 30 days away, or within 24 hours of its approval if the start is at least four
//! days away; once `PROCURING` it is locked. gpucap cancels only what it made, refuses a
//! request whose `procurementStatus` says it is locked, provisioned or over, or whose
//! `lockTime` has passed, with an error saying it can no longer be cancelled, and reads a
//! refusal by Compute Engine the same way. After the cancel is `DONE` the request is deleted:
//! a cancelled request blocks new requests with the same properties until it is. (The 30-day
//! rule itself is `gpucap release`'s: it knows the campaign time; see
//! `gpucap_provider::purchase_rules::GCP_CALENDAR_CANCEL_NOTICE_DAYS`.) Formats and sources:
//! `docs/gce-reservations-api.md`.

use chrono::{DateTime, SecondsFormat, Utc};
use google_cloud_compute_v1::model::{
    AllocationSpecificSKUAllocationReservedInstanceProperties, FutureReservation,
    FutureReservationSpecificSKUProperties, FutureReservationTimeWindow, future_reservation,
    future_reservation_status::ProcurementStatus,
};
use gpucap_provider::capacity::{
    ActError, ActErrorKind, ActResult, CloudResource, Done, Idempotency, Placement,
    ReservationRequest, ResourceKind,
};

use super::GcpCapacity;
use super::names;
use super::ops::{Scope, classify, found, note, refuse};

pub(crate) const INSERT: &str = "futureReservations.insert";
const GET: &str = "futureReservations.get";
const LIST: &str = "futureReservations.list";
const AGGREGATED: &str = "futureReservations.aggregatedList";
pub(crate) const CANCEL: &str = "futureReservations.cancel";
const DELETE: &str = "futureReservations.delete";
/// The most GPU VMs one calendar-mode request holds (the purchase rule's `max_instances`).
const MAX_COUNT: u32 = 80;

/// gpucap's state word for a future reservation's `status.procurementStatus`: `pending`
/// (drafted or waiting for Google's review), `scheduled` (approved, still cancellable while
/// the notice rules allow), `locked` (procuring: no change allowed), `active` (provisioned),
/// `cancelled`, `failed` (declined or failed).
pub fn state_word(fr: &FutureReservation) -> &'static str {
    match procurement(fr) {
        Some(ProcurementStatus::Drafting)
        | Some(ProcurementStatus::PendingApproval)
        | Some(ProcurementStatus::PendingAmendmentApproval) => "pending",
        Some(ProcurementStatus::Approved) | Some(ProcurementStatus::Committed) => "scheduled",
        Some(ProcurementStatus::Procuring) => "locked",
        Some(ProcurementStatus::Provisioning)
        | Some(ProcurementStatus::Fulfilled)
        | Some(ProcurementStatus::FailedPartiallyFulfilled) => "active",
        Some(ProcurementStatus::Cancelled) => "cancelled",
        Some(ProcurementStatus::Declined) | Some(ProcurementStatus::Failed) => "failed",
        _ => "pending",
    }
}

fn procurement(fr: &FutureReservation) -> Option<&ProcurementStatus> {
    fr.status
        .as_ref()
        .and_then(|s| s.procurement_status.as_ref())
}

fn parse_time(t: Option<&String>) -> Option<DateTime<Utc>> {
    t.and_then(|t| DateTime::parse_from_rfc3339(t).ok())
        .map(|t| t.with_timezone(&Utc))
}

/// A future reservation as gpucap describes it (kind `capacity_block`, id `<zone>/<name>`).
pub fn resource(zone_hint: &str, fr: &FutureReservation) -> CloudResource {
    let zone = fr
        .zone
        .as_deref()
        .map(names::last_segment)
        .filter(|z| !z.is_empty())
        .unwrap_or(zone_hint)
        .to_string();
    let sku = fr.specific_sku_properties.as_ref();
    let window = fr.time_window.as_ref();
    CloudResource {
        id: names::id_of(&zone, fr.name.as_deref().unwrap_or_default()),
        kind: ResourceKind::CapacityBlock,
        placement: Placement {
            region: names::region_of(&zone),
            zone: Some(zone),
            instance_type: sku
                .and_then(|s| s.instance_properties.as_ref())
                .and_then(|p| p.machine_type.clone())
                .unwrap_or_default(),
        },
        instances: sku
            .and_then(|s| s.total_count)
            .unwrap_or(0)
            .clamp(0, i64::from(u32::MAX)) as u32,
        start: parse_time(window.and_then(|w| w.start_time.as_ref())),
        end: parse_time(window.and_then(|w| w.end_time.as_ref())),
        state: state_word(fr).to_string(),
        tags: names::tags_of(fr.description.as_deref()),
        in_use: None,
    }
}

fn ours(fr: &FutureReservation) -> bool {
    names::owned(fr.name.as_deref(), fr.description.as_deref())
}

/// Why a future reservation can no longer be cancelled, if it cannot.
fn locked_because(fr: &FutureReservation, now: DateTime<Utc>) -> Option<String> {
    if let Some(
        s @ (ProcurementStatus::Procuring
        | ProcurementStatus::Provisioning
        | ProcurementStatus::Fulfilled
        | ProcurementStatus::FailedPartiallyFulfilled
        | ProcurementStatus::Failed),
    ) = procurement(fr)
    {
        return Some(format!(
            "its procurement status is {}",
            s.name().unwrap_or("?")
        ));
    }
    let lock = fr.status.as_ref().and_then(|s| s.lock_time.as_ref());
    match parse_time(lock) {
        Some(at) if at <= now => Some(format!(
            "its lock time {} has passed",
            at.to_rfc3339_opts(SecondsFormat::Secs, true)
        )),
        _ => None,
    }
}

fn no_longer(id: &str, why: &str) -> ActError {
    refuse(
        CANCEL,
        ActErrorKind::Other,
        format!(
            "future reservation {id} can no longer be cancelled ({why}); Compute Engine allows cancelling a calendar-mode request only while its start is at least 30 days away (or within 24 hours of its approval, at least four days before its start), and the capacity is paid for its whole window"
        ),
    )
}

impl GcpCapacity {
    async fn future_get(&self, zone: &str, name: &str) -> ActResult<Option<FutureReservation>> {
        found(
            GET,
            self.future
                .get()
                .set_project(&self.config.project)
                .set_zone(zone)
                .set_future_reservation(name)
                .send()
                .await,
        )
    }

    fn future_done(zone: &str, fr: &FutureReservation, request_id: Option<String>) -> Done {
        Done {
            resource: resource(zone, fr),
            request_id,
        }
    }

    /// An existing future reservation under the name gpucap would give: done if it is
    /// gpucap's, refused otherwise (never changed: a submitted request is Google's to review).
    fn adopt_future(
        zone: &str,
        name: &str,
        found: &FutureReservation,
        request_id: Option<String>,
    ) -> ActResult {
        if !ours(found) {
            return Err(refuse(
                INSERT,
                ActErrorKind::Other,
                format!(
                    "a future reservation named {name} exists in {zone} and its description does not say gpucap made it; not changed"
                ),
            ));
        }
        Ok(Self::future_done(zone, found, request_id))
    }

    /// Requests a calendar-mode future reservation (see the module docs).
    pub(crate) async fn request_future(
        &self,
        request: &ReservationRequest,
        id: &Idempotency,
        dry_run: bool,
    ) -> ActResult {
        let Some(token) = id.client_token.as_deref().filter(|t| !t.is_empty()) else {
            return Err(refuse(
                INSERT,
                ActErrorKind::Other,
                "a GCP future reservation is named from the client token (Idempotency::client_token is None): without one a retry could request twice",
            ));
        };
        let placement = &request.placement;
        let Some(zone) = placement.zone.as_deref().filter(|z| !z.is_empty()) else {
            return Err(refuse(
                INSERT,
                ActErrorKind::Other,
                format!(
                    "a calendar-mode future reservation is zonal and this one names no zone (region {}); re-plan with a zone",
                    placement.region
                ),
            ));
        };
        if request.instances == 0 || request.instances > MAX_COUNT {
            return Err(refuse(
                INSERT,
                ActErrorKind::Other,
                format!(
                    "a calendar-mode request holds 1 to {MAX_COUNT} VMs, not {}",
                    request.instances
                ),
            ));
        }
        let days = (request.end - request.start).num_hours() as f64 / 24.0;
        if !(1.0..=90.0).contains(&days) {
            return Err(refuse(
                INSERT,
                ActErrorKind::Other,
                format!("a calendar-mode window lasts 1 to 90 days, not {days:.1}"),
            ));
        }
        let name = names::reservation_name(&id.action, token);
        if dry_run {
            // Compute Engine has no dry run: a read proves the credentials, project and zone.
            self.future
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
                    "would request future reservation {zone}/{name} ({} x {}, calendar mode)",
                    request.instances, placement.instance_type
                ),
            ));
        }
        // What an earlier attempt made is found by its name before anything is sent again.
        if let Some(found) = self.future_get(zone, &name).await? {
            return Self::adopt_future(zone, &name, &found, None);
        }

        let mut body = FutureReservation::default();
        body.name = Some(name.clone());
        body.description = Some(names::description(id));
        body.reservation_mode = Some(future_reservation::ReservationMode::Calendar);
        body.planning_status = Some(future_reservation::PlanningStatus::Submitted);
        body.reservation_name = Some(name.clone());
        body.specific_reservation_required = Some(true);
        body.auto_delete_auto_created_reservations = Some(true);
        let mut window = FutureReservationTimeWindow::default();
        window.start_time = Some(request.start.to_rfc3339_opts(SecondsFormat::Secs, true));
        window.end_time = Some(request.end.to_rfc3339_opts(SecondsFormat::Secs, true));
        body.time_window = Some(window);
        let mut properties = AllocationSpecificSKUAllocationReservedInstanceProperties::default();
        properties.machine_type = Some(placement.instance_type.clone());
        let mut sku = FutureReservationSpecificSKUProperties::default();
        sku.total_count = Some(i64::from(request.instances));
        sku.instance_properties = Some(properties);
        body.specific_sku_properties = Some(sku);

        let request_id = names::request_id(INSERT, token);
        let op = match self
            .future
            .insert()
            .set_project(&self.config.project)
            .set_zone(zone)
            .set_request_id(&request_id)
            .set_body(body)
            .send()
            .await
        {
            Ok(op) => op,
            Err(e) => {
                let e = classify(INSERT, &e, true);
                if matches!(e.code.as_deref(), Some("alreadyExists" | "conflict")) {
                    return self.future_after_conflict(zone, &name, e).await;
                }
                return Err(e);
            }
        };
        note(Scope::Zone(zone), &op);
        let op_name = op.name.clone();
        match self.wait_for(INSERT, zone, op).await {
            Ok(_) => {}
            Err(e)
                if matches!(
                    e.code.as_deref(),
                    Some("alreadyExists" | "RESOURCE_ALREADY_EXISTS")
                ) =>
            {
                return self.future_after_conflict(zone, &name, e).await;
            }
            Err(e) => return Err(e),
        }
        // Read back, and checked again: whatever holds the name must be gpucap's.
        match self.future_get(zone, &name).await? {
            Some(fr) => Self::adopt_future(zone, &name, &fr, op_name),
            None => Err(refuse(
                GET,
                ActErrorKind::Unknown,
                format!("future reservation {zone}/{name} was inserted but cannot be read back"),
            )),
        }
    }

    /// A 409 on insert: the name is taken. If gpucap made it, what was asked is done.
    async fn future_after_conflict(&self, zone: &str, name: &str, e: ActError) -> ActResult {
        match self.future_get(zone, name).await? {
            Some(found) => Self::adopt_future(zone, name, &found, e.request_id),
            None => Err(ActError {
                kind: ActErrorKind::Transient,
                ..e
            }),
        }
    }

    /// Cancels, then deletes, a future reservation gpucap made, while that is still allowed.
    pub(crate) async fn cancel_future(&self, region: &str, id: &str, dry_run: bool) -> ActResult {
        let Some((zone, name)) = names::parse_id(id) else {
            return Err(refuse(
                CANCEL,
                ActErrorKind::Other,
                format!("`{id}` is not a GCP future reservation id (zone/name)"),
            ));
        };
        let gone = |state: &str| Done {
            resource: CloudResource {
                id: id.to_string(),
                kind: ResourceKind::CapacityBlock,
                placement: Placement {
                    region: if region.is_empty() {
                        names::region_of(&zone)
                    } else {
                        region.to_string()
                    },
                    zone: Some(zone.clone()),
                    instance_type: String::new(),
                },
                instances: 0,
                start: None,
                end: None,
                state: state.to_string(),
                tags: Default::default(),
                in_use: None,
            },
            request_id: None,
        };
        let Some(fr) = self.future_get(&zone, &name).await? else {
            // Already gone: an earlier cancel and delete whose answer was lost.
            return Ok(gone("cancelled"));
        };
        if !ours(&fr) {
            return Err(refuse(
                CANCEL,
                ActErrorKind::Other,
                format!(
                    "future reservation `{id}` was not made by gpucap (its name or description says otherwise); gpucap cancels only what it made"
                ),
            ));
        }
        let cancelled = matches!(procurement(&fr), Some(ProcurementStatus::Cancelled));
        let declined = matches!(procurement(&fr), Some(ProcurementStatus::Declined));
        if !cancelled
            && !declined
            && let Some(why) = locked_because(&fr, Utc::now())
        {
            return Err(no_longer(id, &why));
        }
        if dry_run {
            return Err(refuse(
                CANCEL,
                ActErrorKind::DryRunOk,
                format!("would cancel and delete future reservation {zone}/{name}"),
            ));
        }
        let mut op_name = None;
        if !cancelled && !declined {
            let request_id = names::request_id(CANCEL, &names::id_of(&zone, &name));
            let op = self
                .future
                .cancel()
                .set_project(&self.config.project)
                .set_zone(&zone)
                .set_future_reservation(&name)
                .set_request_id(&request_id)
                .send()
                .await
                .map_err(|e| {
                    let e = classify(CANCEL, &e, true);
                    match e.kind {
                        // Compute Engine's own refusal (400 or 412): past its notice period.
                        ActErrorKind::Other => no_longer(id, &format!("Compute Engine: {e}")),
                        _ => e,
                    }
                })?;
            op_name = op.name.clone();
            self.wait_for(CANCEL, &zone, op)
                .await
                .map_err(|e| match e.kind {
                    ActErrorKind::Other => no_longer(id, &format!("Compute Engine: {e}")),
                    _ => e,
                })?;
        }
        // A cancelled request blocks new requests with the same properties until deleted.
        let request_id = names::request_id(DELETE, &names::id_of(&zone, &name));
        match self
            .future
            .delete()
            .set_project(&self.config.project)
            .set_zone(&zone)
            .set_future_reservation(&name)
            .set_request_id(&request_id)
            .send()
            .await
        {
            Ok(op) => match self.wait_for(DELETE, &zone, op).await {
                Ok(_) => {}
                Err(e) if e.kind == ActErrorKind::NotFound => {}
                Err(e) => return Err(e),
            },
            Err(e) => {
                let e = classify(DELETE, &e, true);
                if e.kind != ActErrorKind::NotFound {
                    return Err(e);
                }
            }
        }
        let mut done = Self::future_done(&zone, &fr, op_name);
        done.resource.state = "cancelled".into();
        Ok(done)
    }

    /// gpucap's future reservations in `region` whose tag `key` is `value`.
    pub(crate) async fn futures_by_tag(
        &self,
        region: &str,
        key: &str,
        value: &str,
    ) -> ActResult<Vec<CloudResource>> {
        let mut out = Vec::new();
        let mut token = String::new();
        loop {
            let page = self
                .future
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
                for fr in &list.future_reservations {
                    if names::tags_of(fr.description.as_deref())
                        .get(key)
                        .map(String::as_str)
                        == Some(value)
                    {
                        out.push(resource(&zone, fr));
                    }
                }
            }
            match page.next_page_token.filter(|t| !t.is_empty()) {
                Some(next) => token = next,
                None => return Ok(out),
            }
        }
    }

    pub(crate) async fn describe_future(&self, id: &str) -> ActResult<Option<CloudResource>> {
        let Some((zone, name)) = names::parse_id(id) else {
            return Ok(None);
        };
        Ok(self
            .future_get(&zone, &name)
            .await?
            .map(|fr| resource(&zone, &fr)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use google_cloud_compute_v1::model::FutureReservationStatus;

    fn with(status: ProcurementStatus, lock: Option<&str>) -> FutureReservation {
        let mut s = FutureReservationStatus::default();
        s.procurement_status = Some(status);
        s.lock_time = lock.map(str::to_string);
        let mut fr = FutureReservation::default();
        fr.status = Some(s);
        fr
    }

    #[test]
    fn procurement_states_map_to_words_and_locks() {
        let now = Utc::now();
        assert_eq!(
            state_word(&with(ProcurementStatus::PendingApproval, None)),
            "pending"
        );
        assert_eq!(
            state_word(&with(ProcurementStatus::Approved, None)),
            "scheduled"
        );
        assert_eq!(
            state_word(&with(ProcurementStatus::Procuring, None)),
            "locked"
        );
        assert_eq!(
            state_word(&with(ProcurementStatus::Fulfilled, None)),
            "active"
        );
        assert_eq!(
            state_word(&with(ProcurementStatus::Cancelled, None)),
            "cancelled"
        );
        assert_eq!(
            state_word(&with(ProcurementStatus::Declined, None)),
            "failed"
        );
        assert!(locked_because(&with(ProcurementStatus::Approved, None), now).is_none());
        assert!(
            locked_because(&with(ProcurementStatus::Procuring, None), now)
                .unwrap()
                .contains("PROCURING")
        );
        let past = (now - chrono::Duration::hours(1)).to_rfc3339();
        let ahead = (now + chrono::Duration::days(3)).to_rfc3339();
        assert!(
            locked_because(&with(ProcurementStatus::Approved, Some(&past)), now)
                .unwrap()
                .contains("lock time")
        );
        assert!(locked_because(&with(ProcurementStatus::Approved, Some(&ahead)), now).is_none());
    }
}
