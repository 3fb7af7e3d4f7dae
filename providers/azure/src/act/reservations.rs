//! Capacity reservations: create (the group made if absent, then a reservation PUT by name
//! followed to its end), resize (PATCH `sku.capacity`), delete, and find (GET by name, list by
//! tag). `Describe` here also finds pools (the `pools` module's scale sets). Capacity blocks
//! answer with a clear error.

use chrono::{DateTime, Utc};
use gpucap_provider::BoxFuture;
use gpucap_provider::capacity::{
    ActError, ActErrorKind, ActResult, BlockOffering, BlockQuery, CapacityBlocks, CloudResource,
    Describe, Done, Idempotency, ReservationRequest, Reservations, ResourceKind, managed_by_gpucap,
    tag,
};
use reqwest::Method;
use serde_json::{Value, json};

use super::AzureCapacity;
use super::arm::refuse;
use super::names;

const PUT_GROUP: &str = "capacityReservationGroups.createOrUpdate";
const GET_GROUP: &str = "capacityReservationGroups.get";
const GET: &str = "capacityReservations.get";
const LIST: &str = "capacityReservations.listByCapacityReservationGroup";
const LIST_GROUPS: &str = "capacityReservationGroups.listByResourceGroup";
const PUT: &str = "capacityReservations.createOrUpdate";
const PATCH: &str = "capacityReservations.update";
const DELETE: &str = "capacityReservations.delete";

impl AzureCapacity {
    fn group_path(&self, group: &str) -> String {
        format!(
            "/subscriptions/{}/resourceGroups/{}/providers/Microsoft.Compute/capacityReservationGroups/{group}",
            self.config.subscription_id, self.config.resource_group
        )
    }

    fn groups_url(&self) -> String {
        self.url(
            &format!(
                "/subscriptions/{}/resourceGroups/{}/providers/Microsoft.Compute/capacityReservationGroups",
                self.config.subscription_id, self.config.resource_group
            ),
            "",
        )
    }

    fn reservation_path(&self, group: &str, name: &str) -> String {
        format!("{}/capacityReservations/{name}", self.group_path(group))
    }

    /// The reservation's ARM document with its instance view, or `None` when it (or its
    /// group) does not exist.
    async fn get(&self, group: &str, name: &str) -> ActResult<Option<Value>> {
        let url = self.url(&self.reservation_path(group, name), "$expand=instanceView");
        match self.send(GET, Method::GET, &url, None, false).await {
            Ok(r) => Ok(Some(r.body)),
            Err(e) if e.kind == ActErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Every page of a list call's `value` (each page read patiently: reads change nothing).
    pub(crate) async fn list(&self, api: &str, url: String) -> ActResult<Vec<Value>> {
        let mut out = Vec::new();
        let mut next = Some(url);
        while let Some(url) = next.take() {
            let page = match self.read_patiently(api, &url).await {
                Ok(p) => p,
                Err(e) if e.kind == ActErrorKind::NotFound => return Ok(out),
                Err(e) => return Err(e),
            };
            if let Some(items) = page.body["value"].as_array() {
                out.extend(items.iter().cloned());
            }
            next = page.body["nextLink"]
                .as_str()
                .filter(|s| !s.is_empty())
                .map(str::to_string);
        }
        Ok(out)
    }

    /// Waits until a reservation some operation is changing settles; its last document.
    async fn settled(&self, group: &str, name: &str) -> ActResult<Option<Value>> {
        let deadline = tokio::time::Instant::now() + self.config.operation_timeout;
        loop {
            let doc = self.get(group, name).await?;
            let busy = doc.as_ref().is_some_and(|d| {
                matches!(
                    d["properties"]["provisioningState"].as_str(),
                    Some("Creating" | "Updating" | "Deleting")
                )
            });
            if !busy {
                return Ok(doc);
            }
            if tokio::time::Instant::now() >= deadline {
                return Err(refuse(
                    GET,
                    ActErrorKind::Unknown,
                    format!("capacity reservation {name} is still being changed"),
                ));
            }
            tokio::time::sleep(self.config.poll_interval).await;
        }
    }

    fn done(&self, region: &str, doc: &Value, request_id: Option<String>) -> Done {
        Done {
            resource: names::reservation(region, doc),
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
                PUT,
                ActErrorKind::Other,
                "a capacity reservation is named from the client token (Idempotency::client_token is None): without one a retry could reserve twice",
            ));
        };
        let placement = &request.placement;
        let location = names::location(&placement.region);
        let zone = placement.zone.as_deref().map(names::zone);
        let group = names::group_name(&location, zone.as_deref());
        let name = names::reservation_name(&id.action, token);
        if request.instances == 0 {
            return Err(refuse(
                PUT,
                ActErrorKind::Other,
                "a capacity reservation of 0 instances reserves nothing",
            ));
        }
        if dry_run {
            // ARM has no dry run: a read proves the credentials and the resource group (ARM
            // answers 404 `ResourceGroupNotFound` for a missing one).
            self.send(LIST_GROUPS, Method::GET, &self.groups_url(), None, false)
                .await
                .map_err(|mut e| {
                    if e.kind == ActErrorKind::NotFound {
                        e.kind = ActErrorKind::Other;
                        e.message = format!(
                            "resource group {} in subscription {}: {}",
                            self.config.resource_group, self.config.subscription_id, e.message
                        );
                    }
                    e
                })?;
            return Err(refuse(
                PUT,
                ActErrorKind::DryRunOk,
                format!(
                    "would create capacity reservation {group}/{name} ({} x {})",
                    request.instances, placement.instance_type
                ),
            ));
        }

        // What an earlier attempt made is found by its name, and waited for, before anything
        // is sent again.
        if let Some(doc) = self.settled(&group, &name).await? {
            if !managed_by_gpucap(&names::reservation(&location, &doc).tags) {
                return Err(refuse(
                    PUT,
                    ActErrorKind::Other,
                    format!(
                        "a capacity reservation named {name} exists in {group} and its tags do not say gpucap made it; not changed"
                    ),
                ));
            }
            let same = doc["sku"]["capacity"].as_u64() == Some(u64::from(request.instances))
                && doc["sku"]["name"]
                    .as_str()
                    .is_some_and(|s| s.eq_ignore_ascii_case(&placement.instance_type));
            if same && doc["properties"]["provisioningState"] == "Succeeded" {
                return Ok(self.done(&location, &doc, None));
            }
            // Failed (allocation), or asked with other parameters: the PUT below retries it.
        }

        self.ensure_group(&group, &location, zone.as_deref())
            .await?;

        let mut body = json!({
            "location": location,
            "tags": names::tags(id),
            "sku": { "name": placement.instance_type, "capacity": request.instances },
        });
        if let Some(z) = &zone {
            body["zones"] = json!([z]);
        }
        let url = self.url(&self.reservation_path(&group, &name), "");
        let accepted = match self.send(PUT, Method::PUT, &url, Some(&body), true).await {
            Ok(a) => a,
            Err(e)
                if e.kind == ActErrorKind::Transient && e.code.as_deref() == Some("Conflict") =>
            {
                // Another operation runs on it (an attempt whose answer was lost): wait for it.
                return match self.settled(&group, &name).await? {
                    Some(doc) if doc["properties"]["provisioningState"] == "Succeeded" => {
                        Ok(self.done(&location, &doc, e.request_id))
                    }
                    _ => Err(e),
                };
            }
            Err(e) => return Err(e),
        };
        self.wait_for(PUT, &accepted).await?;
        let doc = self.get(&group, &name).await?.ok_or_else(|| {
            refuse(
                GET,
                ActErrorKind::Unknown,
                format!("capacity reservation {name} succeeded but cannot be read back"),
            )
        })?;
        Ok(self.done(&location, &doc, accepted.request_id))
    }

    /// Makes the group if it is not there. An existing one is left as it is (a PUT would
    /// replace its tags).
    async fn ensure_group(&self, group: &str, location: &str, zone: Option<&str>) -> ActResult<()> {
        let url = self.url(&self.group_path(group), "");
        match self.send(GET_GROUP, Method::GET, &url, None, false).await {
            Ok(found) => {
                let there = found.body["location"].as_str().map(names::location);
                if there.as_deref() != Some(location) {
                    return Err(refuse(
                        PUT_GROUP,
                        ActErrorKind::Other,
                        format!(
                            "capacity reservation group {group} exists in {} instead of {location}",
                            there.unwrap_or_default()
                        ),
                    ));
                }
                return Ok(());
            }
            Err(e) if e.kind == ActErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
        let mut body = json!({
            "location": location,
            "tags": { names::tag_key(tag::MANAGED_BY): tag::MANAGED_BY_VALUE },
        });
        if let Some(z) = zone {
            body["zones"] = json!([z]);
        }
        self.send(PUT_GROUP, Method::PUT, &url, Some(&body), true)
            .await?;
        Ok(())
    }

    /// The reservation `id` and its document, if gpucap may change it.
    async fn changeable(&self, api: &str, id: &str) -> ActResult<Option<(String, String, Value)>> {
        let Some((group, name)) = names::parse_id(id) else {
            return Err(refuse(
                api,
                ActErrorKind::Other,
                format!("`{id}` is not an Azure capacity reservation id"),
            ));
        };
        let Some(doc) = self.settled(&group, &name).await? else {
            return Ok(None);
        };
        if !managed_by_gpucap(&names::reservation("", &doc).tags) {
            return Err(refuse(
                api,
                ActErrorKind::Other,
                format!(
                    "capacity reservation `{id}` is not tagged managed-by=gpucap; gpucap changes only what it made"
                ),
            ));
        }
        Ok(Some((group, name, doc)))
    }

    async fn modify(&self, region: &str, id: &str, instances: u32, dry_run: bool) -> ActResult {
        let Some((group, name, doc)) = self.changeable(PATCH, id).await? else {
            return Err(refuse(
                PATCH,
                ActErrorKind::NotFound,
                format!("capacity reservation `{id}` does not exist"),
            ));
        };
        if instances == 0 {
            return Err(refuse(
                PATCH,
                ActErrorKind::Other,
                "a capacity reservation cannot be resized to 0; cancel it instead",
            ));
        }
        if dry_run {
            return Err(refuse(
                PATCH,
                ActErrorKind::DryRunOk,
                format!("would resize {name} to {instances}"),
            ));
        }
        if doc["sku"]["capacity"].as_u64() == Some(u64::from(instances))
            && doc["properties"]["provisioningState"] == "Succeeded"
        {
            return Ok(self.done(region, &doc, None));
        }
        let url = self.url(&self.reservation_path(&group, &name), "");
        let accepted = self
            .send(
                PATCH,
                Method::PATCH,
                &url,
                Some(&json!({ "sku": { "capacity": instances } })),
                true,
            )
            .await?;
        self.wait_for(PATCH, &accepted).await?;
        let doc = self.get(&group, &name).await?.ok_or_else(|| {
            refuse(
                GET,
                ActErrorKind::Unknown,
                format!("capacity reservation {name} was resized but cannot be read back"),
            )
        })?;
        Ok(self.done(region, &doc, accepted.request_id))
    }

    async fn cancel(&self, region: &str, id: &str, dry_run: bool) -> ActResult {
        let gone = |region: &str| Done {
            resource: CloudResource {
                id: id.to_string(),
                kind: ResourceKind::Reservation,
                placement: gpucap_provider::capacity::Placement {
                    region: region.to_string(),
                    zone: None,
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
        };
        let Some((group, name, doc)) = self.changeable(DELETE, id).await? else {
            // Already deleted (an earlier attempt whose answer was lost): what was asked holds.
            return Ok(gone(region));
        };
        let vms = names::associated(&doc);
        if vms > 0 {
            return Err(refuse(
                DELETE,
                ActErrorKind::Other,
                format!(
                    "{vms} virtual machine(s) are associated with capacity reservation {name}; Azure deletes it only when none is: move or delete them first"
                ),
            ));
        }
        if dry_run {
            return Err(refuse(
                DELETE,
                ActErrorKind::DryRunOk,
                format!("would delete {name}"),
            ));
        }
        let url = self.url(&self.reservation_path(&group, &name), "");
        let accepted = self.send(DELETE, Method::DELETE, &url, None, true).await?;
        self.wait_for(DELETE, &accepted).await?;
        let mut done = self.done(region, &doc, accepted.request_id);
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
        let key = names::tag_key(key);
        let mut out = Vec::new();
        if kinds.is_empty() || kinds.contains(&ResourceKind::Pool) {
            out.extend(self.pools_by_tag(region, &key, value).await?);
        }
        if !kinds.is_empty() && !kinds.contains(&ResourceKind::Reservation) {
            return Ok(out);
        }
        let location = names::location(region);
        let groups = self.list(LIST_GROUPS, self.groups_url()).await?;
        for g in groups {
            if g["location"].as_str().map(names::location).as_deref() != Some(location.as_str()) {
                continue;
            }
            let Some(group) = g["name"].as_str() else {
                continue;
            };
            let url = self.url(
                &format!("{}/capacityReservations", self.group_path(group)),
                "",
            );
            for r in self.list(LIST, url).await? {
                if r["tags"][key.as_str()].as_str() == Some(value) {
                    out.push(names::reservation(&location, &r));
                }
            }
        }
        Ok(out)
    }

    async fn one(
        &self,
        region: &str,
        kind: ResourceKind,
        id: &str,
    ) -> ActResult<Option<CloudResource>> {
        if kind == ResourceKind::Pool {
            return self.describe_pool(region, id).await;
        }
        if kind != ResourceKind::Reservation {
            return Err(unsupported("describe", kind));
        }
        let Some((group, name)) = names::parse_id(id) else {
            return Ok(None);
        };
        Ok(self
            .get(&group, &name)
            .await?
            .map(|doc| names::reservation("", &doc)))
    }
}

fn unsupported(api: &str, kind: ResourceKind) -> ActError {
    let what = match kind {
        ResourceKind::CapacityBlock => {
            "Azure sells no capacity blocks (fixed pre-paid windows); plan Azure capacity as reservations or on demand"
        }
        ResourceKind::LaunchTemplate => {
            "Azure pools are VM scale sets, which carry their own VM profile: there are no launch templates"
        }
        ResourceKind::Commitment => {
            "Azure reservations and savings plans are bought by a person (or the generated Terraform), not by `gpucap apply`"
        }
        ResourceKind::Reservation | ResourceKind::Pool => "not supported",
    };
    refuse(api, ActErrorKind::Other, what)
}

/// Blocks are bought from quoted offerings here, and commitments are not signed by apply: the
/// defaults, which refuse.
impl gpucap_provider::capacity::RequestedBlocks for AzureCapacity {}
impl gpucap_provider::capacity::Commitments for AzureCapacity {}

impl CapacityBlocks for AzureCapacity {
    fn describe_offerings(
        &self,
        _query: &BlockQuery,
    ) -> BoxFuture<'_, ActResult<Vec<BlockOffering>>> {
        Box::pin(async {
            Err(unsupported(
                "describeOfferings",
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
        Box::pin(async { Err(unsupported("purchaseBlock", ResourceKind::CapacityBlock)) })
    }
}

impl Reservations for AzureCapacity {
    fn create_reservation(
        &self,
        request: &ReservationRequest,
        id: &Idempotency,
        dry_run: bool,
    ) -> BoxFuture<'_, ActResult> {
        let (request, id) = (request.clone(), id.clone());
        Box::pin(async move { self.create(&request, &id, dry_run).await })
    }

    /// Resizes the reservation; `end` is not sent: Azure reservations have no end date
    /// (gpucap deletes them when the plan's release comes).
    fn modify_reservation(
        &self,
        region: &str,
        reservation_id: &str,
        instances: u32,
        _end: DateTime<Utc>,
        dry_run: bool,
    ) -> BoxFuture<'_, ActResult> {
        let (region, id) = (region.to_string(), reservation_id.to_string());
        Box::pin(async move { self.modify(&region, &id, instances, dry_run).await })
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

impl Describe for AzureCapacity {
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
