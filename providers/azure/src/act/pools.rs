//! GPU pools on Azure: a Virtual Machine Scale Set in flexible orchestration per pool and
//! purchase model (`Microsoft.Compute/virtualMachineScaleSets`), sized through `sku.capacity`,
//! and the VMs that actually run counted by listing them (`virtualMachines` filtered on
//! `virtualMachineScaleSet/id`, with their instance view).
//!
//! **Shape.** A pool is regional, like the plan's run actions. A scale set's VMs share one
//! priority, so a pool is up to two scale sets: the pool's own name for on-demand
//! (`priority: Regular`) and `<name>-spot` for spot (`priority: Spot`, `evictionPolicy:
//! Delete`, `billingProfile.maxPrice: -1`, i.e. never evicted for price), made the first time
//! the pool is asked to run spot VMs, from the on-demand one's VM profile. When every capacity
//! reservation of the pool sits in one capacity reservation group, the on-demand scale set is
//! associated with that group (and put in the group's zone, if it has one); spot VMs cannot
//! use reservations.
//!
//! **Identity.** ARM takes no client token: a PUT is create-or-update by the name in the URL,
//! and gpucap's names are deterministic ([`names::scale_set_name`]). Every scale set carries
//! gpucap's tags ([`names::tags`]). Before a PUT the name is read (GET): one that exists is
//! used only when its tags say gpucap made it, and is never re-shaped; nothing without
//! `managed-by=gpucap` is ever resized.
//!
//! **Running, not just asked.** The PATCH of `sku.capacity` is a long-running operation
//! followed to `Succeeded` or `Failed` (an allocation failure ends it `Failed` with
//! `AllocationFailed`, `ZonalAllocationFailed`, …). Either way the scale set's VMs are then
//! listed until the asked number has `provisioningState` `Succeeded` and power state
//! `running`, none is still being made, or the operation timeout passes. Fewer running than
//! asked is an error of the kind the operation or a VM names (capacity when none does), saying
//! how many run; the scale set keeps its target, and the next `gpucap apply` looks again.

use gpucap_provider::BoxFuture;
use gpucap_provider::capacity::{
    ActError, ActErrorKind, ActResult, Done, Idempotency, PoolSize, PoolSpec, Pools,
    managed_by_gpucap,
};
use reqwest::Method;
use serde_json::{Value, json};

use super::AzureCapacity;
use super::arm::{classify, refuse};
use super::names;

const GET: &str = "virtualMachineScaleSets.get";
const LIST: &str = "virtualMachineScaleSets.list";
const PUT: &str = "virtualMachineScaleSets.createOrUpdate";
const PATCH: &str = "virtualMachineScaleSets.update";
const LIST_VMS: &str = "virtualMachines.list";
const GET_GROUP: &str = "capacityReservationGroups.get";

/// What one scale set runs now, as its VMs' instance views say.
#[derive(Debug, Default, PartialEq)]
struct Running {
    running: u32,
    /// VMs listed at all.
    listed: u32,
    /// VMs still being made or changed (`Creating`, `Updating`, no power state yet).
    busy: u32,
    /// The first error a VM reports: (code, message).
    error: Option<(String, String)>,
}

fn not_ours(api: &str, name: &str) -> ActError {
    refuse(
        api,
        ActErrorKind::Other,
        format!(
            "a virtual machine scale set named {name} exists and its tags do not say gpucap made it (managed-by=gpucap); gpucap changes only what it made"
        ),
    )
}

fn owned(doc: &Value) -> bool {
    managed_by_gpucap(&names::tags_of(doc))
}

fn provisioning(doc: &Value) -> &str {
    doc["properties"]["provisioningState"]
        .as_str()
        .unwrap_or("")
}

/// The image a launch setting names: an ARM image id (`/subscriptions/…/images/…` or a
/// gallery image version), or a marketplace URN `publisher:offer:sku:version`.
fn image_reference(image: &str) -> Result<Value, String> {
    let image = image.trim();
    if image.starts_with('/') {
        return Ok(json!({ "id": image }));
    }
    match image.split(':').collect::<Vec<_>>().as_slice() {
        [publisher, offer, sku, version]
            if [publisher, offer, sku, version]
                .iter()
                .all(|p| !p.is_empty()) =>
        {
            Ok(json!({
                "publisher": publisher, "offer": offer, "sku": sku, "version": version
            }))
        }
        _ => Err(format!(
            "`{image}` is neither an image's ARM id (/subscriptions/…/images/…) nor a marketplace URN (publisher:offer:sku:version)"
        )),
    }
}

/// The VM profile of a pool's on-demand scale set.
fn vm_profile(
    spec: &PoolSpec,
    scale_set: &str,
    image: Value,
    admin: &str,
    ssh_key: &str,
    reservation_group: Option<&str>,
) -> Value {
    let mut nic = json!({
        "name": format!("{scale_set}-nic"),
        "properties": {
            "primary": true,
            "deleteOption": "Delete",
            "ipConfigurations": [{
                "name": "ipconfig1",
                "properties": { "primary": true, "subnet": { "id": spec.subnets[0] } }
            }]
        }
    });
    if let Some(nsg) = spec.security_groups.first() {
        nic["properties"]["networkSecurityGroup"] = json!({ "id": nsg });
    }
    let mut profile = json!({
        "osProfile": {
            "computerNamePrefix": names::computer_name_prefix(scale_set),
            "adminUsername": admin,
            "linuxConfiguration": {
                "disablePasswordAuthentication": true,
                "ssh": { "publicKeys": [{
                    "path": format!("/home/{admin}/.ssh/authorized_keys"),
                    "keyData": ssh_key
                }] }
            }
        },
        "storageProfile": {
            "imageReference": image,
            "osDisk": {
                "createOption": "FromImage",
                "caching": "ReadWrite",
                "deleteOption": "Delete",
                "managedDisk": { "storageAccountType": "Premium_LRS" }
            }
        },
        "networkProfile": {
            "networkApiVersion": "2020-11-01",
            "networkInterfaceConfigurations": [nic]
        },
        "priority": "Regular"
    });
    if let Some(group) = reservation_group {
        profile["capacityReservation"] = json!({ "capacityReservationGroup": { "id": group } });
    }
    profile
}

/// The spot twin of an on-demand VM profile (as ARM returned it).
fn spot_profile(on_demand: &Value) -> Value {
    let mut p = on_demand.clone();
    if let Some(m) = p.as_object_mut() {
        // Spot VMs cannot use a capacity reservation.
        m.remove("capacityReservation");
        m.insert("priority".into(), json!("Spot"));
        m.insert("evictionPolicy".into(), json!("Delete"));
        m.insert("billingProfile".into(), json!({ "maxPrice": -1 }));
    }
    p
}

/// A scale set's PUT body, at capacity 0 (sized afterwards by PATCH).
fn scale_set_body(
    location: &str,
    sku: &str,
    zones: Option<&Value>,
    tags: &Value,
    profile: Value,
) -> Value {
    let mut body = json!({
        "location": location,
        "tags": tags,
        "sku": { "name": sku, "tier": "Standard", "capacity": 0 },
        "properties": {
            "orchestrationMode": "Flexible",
            "platformFaultDomainCount": 1,
            "singlePlacementGroup": false,
            "virtualMachineProfile": profile
        }
    });
    if let Some(z) = zones.filter(|z| z.as_array().is_some_and(|a| !a.is_empty())) {
        body["zones"] = z.clone();
    }
    body
}

/// One VM into the tally: running when provisioned and powered on, busy while being made.
fn tally(out: &mut Running, vm: &Value) {
    out.listed += 1;
    let statuses = vm["properties"]["instanceView"]["statuses"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let provisioning = vm["properties"]["provisioningState"].as_str().unwrap_or("");
    let power = statuses
        .iter()
        .filter_map(|s| s["code"].as_str())
        .find_map(|c| c.strip_prefix("PowerState/"));
    match (provisioning, power) {
        ("Succeeded", Some("running")) => out.running += 1,
        ("Failed", _) => {}
        ("Creating" | "Updating" | "", _) | (_, None | Some("starting")) => out.busy += 1,
        _ => {}
    }
    if out.error.is_none() {
        // A failed provisioning state carries its reason:
        // `ProvisioningState/failed/AllocationFailed` with a message.
        if let Some(s) = statuses.iter().find(|s| {
            s["code"]
                .as_str()
                .is_some_and(|c| c.starts_with("ProvisioningState/failed"))
        }) {
            let code = s["code"]
                .as_str()
                .unwrap_or("")
                .trim_start_matches("ProvisioningState/failed")
                .trim_start_matches('/')
                .to_string();
            out.error = Some((code, s["message"].as_str().unwrap_or("").to_string()));
        }
    }
}

impl AzureCapacity {
    fn scale_sets_path(&self) -> String {
        format!(
            "/subscriptions/{}/resourceGroups/{}/providers/Microsoft.Compute/virtualMachineScaleSets",
            self.config.subscription_id, self.config.resource_group
        )
    }

    fn scale_sets_url(&self) -> String {
        self.url(&self.scale_sets_path(), "")
    }

    fn scale_set_url(&self, name: &str) -> String {
        self.url(&format!("{}/{name}", self.scale_sets_path()), "")
    }

    /// The scale set's ARM document, or `None` when there is none of that name.
    async fn scale_set(&self, name: &str) -> ActResult<Option<Value>> {
        match self
            .send(GET, Method::GET, &self.scale_set_url(name), None, false)
            .await
        {
            Ok(r) => Ok(Some(r.body)),
            Err(e) if e.kind == ActErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// The scale set once no operation changes it (an earlier attempt's may still run).
    async fn scale_set_settled(&self, name: &str) -> ActResult<Option<Value>> {
        let deadline = tokio::time::Instant::now() + self.config.operation_timeout;
        loop {
            let doc = self.scale_set(name).await?;
            let busy = doc
                .as_ref()
                .is_some_and(|d| matches!(provisioning(d), "Creating" | "Updating" | "Deleting"));
            if !busy {
                return Ok(doc);
            }
            if tokio::time::Instant::now() >= deadline {
                return Err(refuse(
                    GET,
                    ActErrorKind::Unknown,
                    format!("virtual machine scale set {name} is still being changed"),
                ));
            }
            tokio::time::sleep(self.config.poll_interval).await;
        }
    }

    /// PUTs a new scale set and follows the operation; the scale set as it is after.
    async fn put_scale_set(&self, name: &str, body: &Value) -> ActResult<(Value, Option<String>)> {
        let accepted = match self
            .send(
                PUT,
                Method::PUT,
                &self.scale_set_url(name),
                Some(body),
                true,
            )
            .await
        {
            Ok(a) => a,
            Err(e)
                if e.kind == ActErrorKind::Transient && e.code.as_deref() == Some("Conflict") =>
            {
                // Another operation runs on it (an attempt whose answer was lost): wait for it.
                return match self.scale_set_settled(name).await? {
                    Some(doc) if owned(&doc) && provisioning(&doc) == "Succeeded" => {
                        Ok((doc, e.request_id))
                    }
                    _ => Err(e),
                };
            }
            Err(e) => return Err(e),
        };
        self.wait_for(PUT, &accepted).await?;
        let doc = self.scale_set(name).await?.ok_or_else(|| {
            refuse(
                GET,
                ActErrorKind::Unknown,
                format!("virtual machine scale set {name} was created but cannot be read back"),
            )
        })?;
        if !owned(&doc) {
            return Err(not_ours(PUT, name));
        }
        Ok((doc, accepted.request_id))
    }

    /// The capacity reservation group the pool's reservations share (its id and zones), or
    /// `None` when they are in none or in more than one.
    async fn reservation_group(&self, spec: &PoolSpec) -> ActResult<Option<(String, Value)>> {
        let mut groups: Vec<String> = spec
            .capacity_reservations
            .iter()
            .filter_map(|r| names::parse_id(r).map(|(g, _)| g))
            .collect();
        groups.sort();
        groups.dedup();
        let [group] = groups.as_slice() else {
            return Ok(None);
        };
        let path = format!(
            "/subscriptions/{}/resourceGroups/{}/providers/Microsoft.Compute/capacityReservationGroups/{group}",
            self.config.subscription_id, self.config.resource_group
        );
        match self
            .send(GET_GROUP, Method::GET, &self.url(&path, ""), None, false)
            .await
        {
            Ok(found) => Ok(Some((path, found.body["zones"].clone()))),
            Err(e) if e.kind == ActErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }

    async fn ensure(&self, spec: &PoolSpec, id: &Idempotency, dry_run: bool) -> ActResult {
        let Some(sku) = spec.instance_types.first() else {
            return Err(refuse(
                PUT,
                ActErrorKind::Other,
                format!("pool `{}` names no VM size", spec.name),
            ));
        };
        let image = image_reference(&spec.image).map_err(|why| {
            refuse(
                PUT,
                ActErrorKind::Other,
                format!(
                    "pool `{}`: `image` in `[apply.pools.<pool>]`: {why}",
                    spec.name
                ),
            )
        })?;
        if spec.subnets.is_empty() {
            return Err(refuse(
                PUT,
                ActErrorKind::Other,
                format!(
                    "pool `{}` names no subnet (`subnets` in `[apply.pools.<pool>]`: the subnet's ARM id, /subscriptions/…/virtualNetworks/…/subnets/…)",
                    spec.name
                ),
            ));
        }
        let location = names::location(&spec.region);
        let name = names::scale_set_name(&spec.name, false);
        if let Some(doc) = self.scale_set_settled(&name).await? {
            if !owned(&doc) {
                return Err(not_ours(PUT, &name));
            }
            // There already; a pool is never re-shaped behind the plan's back.
            return Ok(Done {
                resource: names::pool(&location, &doc, None, None),
                request_id: None,
            });
        }
        let Some(key) = self.config.ssh_public_key.as_deref() else {
            return Err(refuse(
                PUT,
                ActErrorKind::Other,
                format!(
                    "a Linux scale set needs an SSH public key for its VMs and gpucap sets no password: set {} (the key, or the path of a .pub file)",
                    super::SSH_PUBLIC_KEY_ENV
                ),
            ));
        };
        if dry_run {
            // ARM has no dry run: the read above proved the credentials and the resource group.
            return Err(refuse(
                PUT,
                ActErrorKind::DryRunOk,
                format!("would create virtual machine scale set {name} ({sku}, flexible)"),
            ));
        }
        let group = self.reservation_group(spec).await?;
        let profile = vm_profile(
            spec,
            &name,
            image,
            &self.config.admin_username,
            key,
            group.as_ref().map(|(g, _)| g.as_str()),
        );
        let body = scale_set_body(
            &location,
            sku,
            group.as_ref().map(|(_, z)| z),
            &json!(names::tags(id)),
            profile,
        );
        let (doc, request_id) = self.put_scale_set(&name, &body).await?;
        Ok(Done {
            resource: names::pool(&location, &doc, None, None),
            request_id,
        })
    }

    /// Sets one scale set's capacity (absolute) and follows the operation. An operation that
    /// failed for capacity or quota is handed back beside the document (what could be made
    /// runs, and is counted); any other failure is the error.
    async fn resize(
        &self,
        name: &str,
        doc: Value,
        want: u32,
    ) -> ActResult<(Value, Option<String>, Option<ActError>)> {
        if names::capacity(&doc) == want && provisioning(&doc) == "Succeeded" {
            return Ok((doc, None, None));
        }
        let accepted = self
            .send(
                PATCH,
                Method::PATCH,
                &self.scale_set_url(name),
                Some(&json!({ "sku": { "capacity": want } })),
                true,
            )
            .await?;
        let failed = match self.wait_for(PATCH, &accepted).await {
            Ok(()) => None,
            Err(e) if matches!(e.kind, ActErrorKind::Capacity | ActErrorKind::Quota) => Some(e),
            Err(e) => return Err(e),
        };
        let after = self.scale_set(name).await?.ok_or_else(|| {
            refuse(
                GET,
                ActErrorKind::Unknown,
                format!("virtual machine scale set {name} was resized but is gone"),
            )
        })?;
        Ok((after, accepted.request_id, failed))
    }

    /// One look at a scale set's VMs (every page), with their instance views.
    async fn running(&self, scale_set_id: &str) -> ActResult<Running> {
        let mut url = reqwest::Url::parse(&self.url(
            &format!(
                "/subscriptions/{}/resourceGroups/{}/providers/Microsoft.Compute/virtualMachines",
                self.config.subscription_id, self.config.resource_group
            ),
            "",
        ))
        .map_err(|e| refuse(LIST_VMS, ActErrorKind::Other, e.to_string()))?;
        url.query_pairs_mut()
            .append_pair(
                "$filter",
                &format!("'virtualMachineScaleSet/id' eq '{scale_set_id}'"),
            )
            .append_pair("$expand", "instanceView");
        let mut out = Running::default();
        for vm in self.list(LIST_VMS, url.to_string()).await? {
            tally(&mut out, &vm);
        }
        Ok(out)
    }

    /// Lists a scale set's VMs until `want` run, or none is being made and every one asked
    /// for is listed (or the operation failed, or a VM says why it did not start), or time
    /// is up.
    async fn confirm(&self, scale_set_id: &str, want: u32, failed: bool) -> ActResult<Running> {
        let deadline = tokio::time::Instant::now() + self.config.operation_timeout;
        loop {
            let now = self.running(scale_set_id).await?;
            let settled = now.busy == 0 && (now.listed >= want || failed || now.error.is_some());
            if now.running >= want || settled {
                return Ok(now);
            }
            if tokio::time::Instant::now() >= deadline {
                return Ok(now);
            }
            tokio::time::sleep(self.config.poll_interval).await;
        }
    }

    async fn scale(&self, region: &str, pool: &str, size: PoolSize, dry_run: bool) -> ActResult {
        let location = names::location(region);
        let name = names::scale_set_name(pool, false);
        let Some(on_demand) = self.scale_set_settled(&name).await? else {
            if dry_run {
                // A dry run of a new pool: `ensure_pool` would have made it first.
                return Err(refuse(
                    PATCH,
                    ActErrorKind::DryRunOk,
                    format!(
                        "{name} does not exist yet; once made it would run {} on-demand and {} spot",
                        size.on_demand, size.spot
                    ),
                ));
            }
            return Err(refuse(
                PATCH,
                ActErrorKind::NotFound,
                format!("virtual machine scale set {name} does not exist"),
            ));
        };
        if !owned(&on_demand) {
            return Err(not_ours(PATCH, &name));
        }
        let spot_name = names::scale_set_name(pool, true);
        let spot = self.scale_set_settled(&spot_name).await?;
        if let Some(s) = &spot
            && !owned(s)
        {
            return Err(not_ours(PATCH, &spot_name));
        }
        if dry_run {
            return Err(refuse(
                PATCH,
                ActErrorKind::DryRunOk,
                format!(
                    "would size {name} to {} on-demand and {spot_name} to {} spot",
                    size.on_demand, size.spot
                ),
            ));
        }
        let spot = match spot {
            Some(s) => Some(s),
            None if size.spot > 0 => {
                // The spot half is made the first time it is needed, from the on-demand VM
                // profile and with the pool's tags (so it is gpucap's, and found with it).
                let profile = &on_demand["properties"]["virtualMachineProfile"];
                if !profile.is_object() {
                    return Err(refuse(
                        GET,
                        ActErrorKind::Other,
                        format!(
                            "virtual machine scale set {name} shows no VM profile; its spot twin is made from it"
                        ),
                    ));
                }
                let mut profile = spot_profile(profile);
                profile["osProfile"]["computerNamePrefix"] =
                    json!(names::computer_name_prefix(&spot_name));
                if let Some(nic) =
                    profile["networkProfile"]["networkInterfaceConfigurations"].get_mut(0)
                {
                    nic["name"] = json!(format!("{spot_name}-nic"));
                }
                let body = scale_set_body(
                    &location,
                    on_demand["sku"]["name"].as_str().unwrap_or_default(),
                    Some(&on_demand["zones"]),
                    &on_demand["tags"],
                    profile,
                );
                Some(self.put_scale_set(&spot_name, &body).await?.0)
            }
            None => None,
        };

        let (on_demand, mut request_id, mut failed) =
            self.resize(&name, on_demand, size.on_demand).await?;
        let spot = match spot {
            Some(s) => {
                let (s, rid, f) = self.resize(&spot_name, s, size.spot).await?;
                request_id = request_id.or(rid);
                failed = failed.or(f);
                Some(s)
            }
            None => None,
        };

        // The operation set the target; count what runs.
        let mut running = 0;
        let mut shortfall: Vec<String> = Vec::new();
        let mut worst: Option<(String, String)> = None;
        for (doc, set, want) in [
            (Some(&on_demand), &name, size.on_demand),
            (spot.as_ref(), &spot_name, size.spot),
        ] {
            let Some(doc) = doc else { continue };
            if want == 0 {
                continue;
            }
            let id = doc["id"].as_str().unwrap_or_default();
            let now = self.confirm(id, want, failed.is_some()).await?;
            running += now.running.min(want);
            if now.running < want {
                shortfall.push(format!("{set}: {} of {want} running", now.running));
                if worst.is_none() {
                    worst = now.error;
                }
            }
        }
        if !shortfall.is_empty() {
            let (code, message) = match (&failed, worst) {
                (Some(e), _) => (e.code.clone().unwrap_or_default(), e.message.clone()),
                (None, Some(w)) => w,
                (None, None) => (String::new(), "VMs are still being created".to_string()),
            };
            let kind = match &failed {
                Some(e) => e.kind,
                None if code.is_empty() => ActErrorKind::Capacity,
                None => match classify(409, &code, &message, false) {
                    ActErrorKind::Other => ActErrorKind::Capacity,
                    k => k,
                },
            };
            return Err(ActError {
                api: format!("azure:{LIST_VMS}"),
                kind,
                code: Some(code).filter(|c| !c.is_empty()),
                message: format!(
                    "{running} of {} VM(s) run ({}): {}. The scale set keeps its capacity, and the next `gpucap apply` looks again",
                    size.on_demand + size.spot,
                    shortfall.join(", "),
                    message.trim_end().trim_end_matches('.')
                ),
                request_id,
            });
        }
        if let Some(e) = failed {
            // Every VM asked for runs after all (an operation that failed, then recovered).
            tracing::info!("{e}; every VM asked for runs");
        }
        Ok(Done {
            resource: names::pool(&location, &on_demand, spot.as_ref(), Some(running)),
            request_id,
        })
    }

    /// The pool `id` (its name), if its on-demand scale set exists.
    pub(super) async fn describe_pool(
        &self,
        region: &str,
        id: &str,
    ) -> ActResult<Option<gpucap_provider::capacity::CloudResource>> {
        let Some(doc) = self.scale_set(&names::scale_set_name(id, false)).await? else {
            return Ok(None);
        };
        let spot = self.scale_set(&names::scale_set_name(id, true)).await?;
        Ok(Some(names::pool(
            &names::location(region),
            &doc,
            spot.as_ref(),
            None,
        )))
    }

    /// Pools in `region` whose scale set's tag `key` is `value` (one per pool: its on-demand
    /// scale set; the spot twin carries the same tags).
    pub(super) async fn pools_by_tag(
        &self,
        region: &str,
        key: &str,
        value: &str,
    ) -> ActResult<Vec<gpucap_provider::capacity::CloudResource>> {
        let location = names::location(region);
        let all = self.list(LIST, self.scale_sets_url()).await?;
        let named = |name: &str| all.iter().find(|d| d["name"].as_str() == Some(name));
        let mut out = Vec::new();
        for doc in &all {
            if doc["location"].as_str().map(names::location).as_deref() != Some(&location) {
                continue;
            }
            if doc["tags"][key].as_str() != Some(value) {
                continue;
            }
            let id = names::pool(&location, doc, None, None).id;
            if doc["name"].as_str() == Some(names::scale_set_name(&id, false).as_str()) {
                let spot = named(&names::scale_set_name(&id, true)).filter(|s| owned(s));
                out.push(names::pool(&location, doc, spot, None));
            }
        }
        Ok(out)
    }
}

impl Pools for AzureCapacity {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> PoolSpec {
        PoolSpec {
            name: "gpucap-h100-azure-eastus-standard-nc40ads-h100-v5".into(),
            region: "eastus".into(),
            instance_types: vec!["Standard_NC40ads_H100_v5".into()],
            image: "microsoft-dsvm:ubuntu-hpc:2204:latest".into(),
            subnets: vec!["/subscriptions/s/resourceGroups/net/providers/Microsoft.Network/virtualNetworks/v/subnets/train".into()],
            security_groups: vec!["/subscriptions/s/resourceGroups/net/providers/Microsoft.Network/networkSecurityGroups/gpu".into()],
            capacity_reservations: vec![],
            max_size: 4,
            flex_start: None,
        }
    }

    #[test]
    fn images_are_ids_or_urns() {
        assert_eq!(
            image_reference(
                "/subscriptions/s/resourceGroups/r/providers/Microsoft.Compute/images/i"
            )
            .unwrap()["id"],
            "/subscriptions/s/resourceGroups/r/providers/Microsoft.Compute/images/i"
        );
        let urn = image_reference("microsoft-dsvm:ubuntu-hpc:2204:latest").unwrap();
        assert_eq!(urn["offer"], "ubuntu-hpc");
        assert_eq!(urn["version"], "latest");
        assert!(image_reference("ami-0abc").is_err());
        assert!(image_reference("a::b:c").is_err());
    }

    #[test]
    fn the_on_demand_profile_uses_the_reservation_group_and_spot_never_does() {
        let s = spec();
        let p = vm_profile(
            &s,
            "gpucap-x",
            json!({"id": "/i"}),
            "gpucap",
            "ssh-ed25519 AAAA test",
            Some(
                "/subscriptions/s/resourceGroups/r/providers/Microsoft.Compute/capacityReservationGroups/gpucap-eastus",
            ),
        );
        assert_eq!(p["priority"], "Regular");
        assert!(p["capacityReservation"]["capacityReservationGroup"]["id"].is_string());
        let nic = &p["networkProfile"]["networkInterfaceConfigurations"][0]["properties"];
        assert_eq!(
            nic["ipConfigurations"][0]["properties"]["subnet"]["id"],
            s.subnets[0]
        );
        assert_eq!(nic["networkSecurityGroup"]["id"], s.security_groups[0]);
        assert_eq!(
            p["osProfile"]["linuxConfiguration"]["disablePasswordAuthentication"],
            true
        );
        let spot = spot_profile(&p);
        assert_eq!(spot["priority"], "Spot");
        assert_eq!(spot["evictionPolicy"], "Delete");
        assert_eq!(spot["billingProfile"]["maxPrice"], -1);
        assert!(spot.get("capacityReservation").is_none());
        let body = scale_set_body(
            "eastus",
            "Standard_NC40ads_H100_v5",
            Some(&json!(["1"])),
            &json!({}),
            p,
        );
        assert_eq!(body["properties"]["orchestrationMode"], "Flexible");
        assert_eq!(body["sku"]["capacity"], 0);
        assert_eq!(body["zones"], json!(["1"]));
        let regional = scale_set_body("eastus", "x", Some(&Value::Null), &json!({}), json!({}));
        assert!(regional.get("zones").is_none());
    }

    #[test]
    fn vms_count_as_running_only_when_provisioned_and_powered_on() {
        let vm = |state: &str, codes: &[(&str, &str)]| {
            json!({"properties": {"provisioningState": state, "instanceView": {"statuses":
                codes.iter().map(|(c, m)| json!({"code": c, "message": m})).collect::<Vec<_>>()}}})
        };
        let mut out = Running::default();
        tally(
            &mut out,
            &vm(
                "Succeeded",
                &[
                    ("ProvisioningState/succeeded", ""),
                    ("PowerState/running", ""),
                ],
            ),
        );
        tally(
            &mut out,
            &vm("Creating", &[("ProvisioningState/creating", "")]),
        );
        tally(
            &mut out,
            &vm(
                "Failed",
                &[(
                    "ProvisioningState/failed/AllocationFailed",
                    "Allocation failed.",
                )],
            ),
        );
        tally(
            &mut out,
            &vm(
                "Succeeded",
                &[
                    ("ProvisioningState/succeeded", ""),
                    ("PowerState/deallocated", ""),
                ],
            ),
        );
        assert_eq!((out.running, out.busy, out.listed), (1, 1, 4));
        assert_eq!(
            out.error,
            Some((
                "AllocationFailed".to_string(),
                "Allocation failed.".to_string()
            ))
        );
        assert_eq!(
            classify(409, "AllocationFailed", "", false),
            ActErrorKind::Capacity
        );
    }
}
