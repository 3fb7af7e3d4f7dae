//! Flex-start pools on GCP: work that can wait asks for its on-demand instances with a DWS
//! resize request (`regionInstanceGroupManagerResizeRequests`) instead of a plain `resize`.
//! Compute Engine queues the request until it can create every instance at once (at the
//! flex-start discount), and deletes them at the end of the request's run duration.
//!
//! **Shape.** A flex-start pool's on-demand template is made `provisioningModel=FLEX_START`,
//! `instanceTerminationAction=DELETE`, no automatic restart and no reservation, and its group
//! `instanceLifecyclePolicy.defaultActionOnFailure=DO_NOTHING`, `ANY_SINGLE_ZONE`, no
//! redistribution and no autoscaler (see `docs/gce-pools-api.md` for the sources). A pool made
//! without `flex_start` is never re-shaped into one: asking one for a resize request is refused.
//!
//! **Identity.** The request's name is deterministic, `gpucap-flex-<12 hex>` from the client
//! token (plan digest and pool), and its `description` carries gpucap's tags; its `requestId`
//! is a UUID v5 of the same token. The name is looked up before the insert and after a 409,
//! so a repeat (a re-run, a lost answer) finds the first request instead of asking twice. One
//! plan asks at most once per pool; while any request gpucap made on the group is still active
//! (`CREATING`, `ACCEPTED`), no other is made: it is followed, unless the plan wants fewer than
//! the group has plus what is queued, which is a plain resize (cancelling as below).
//!
//! **States.** A request is followed while it is `CREATING`; `ACCEPTED` (queued, not yet
//! fulfilled) is reported as pending, neither success nor a failure to repeat; `SUCCEEDED` is
//! done, with the group's running instances counted; `FAILED` and `CANCELLED` are errors
//! that are not asked again under the same plan (the name is taken).
//!
//! **Cancelling.** Sizing a flex-start pool below what its queued requests would bring it to
//! (`gpucap release` scales to zero) first cancels the `ACCEPTED` requests gpucap made
//! (Compute Engine cancels only those); a request it did not make is never touched.

use google_cloud_compute_v1::model::{
    Duration as RunDuration, InstanceGroupManager, InstanceGroupManagerResizeRequest,
    instance_group_manager_resize_request::State,
};
use gpucap_provider::capacity::{
    ActError, ActErrorKind, ActResult, Done, FlexStart, Idempotency, PoolSize,
};

use super::GcpCapacity;
use super::names;
use super::ops::{Scope, classify, found, kind_of_reason, note, refuse};
use super::pools::{GROUP_GET, RESIZE, conflict, is_flex_start, machine_of, not_ours, resource};

/// What a flex-start pool's sizing does next.
enum Next<'a> {
    /// Follow this request of gpucap's (this plan's, or an earlier one still active).
    Follow(&'a InstanceGroupManagerResizeRequest),
    /// Ask for this many more instances.
    Ask(u32),
    /// Size the group with a plain resize (fewer than it has or has queued).
    Size,
}

pub(super) const INSERT: &str = "regionInstanceGroupManagerResizeRequests.insert";
const GET: &str = "regionInstanceGroupManagerResizeRequests.get";
const LIST: &str = "regionInstanceGroupManagerResizeRequests.list";
const CANCEL: &str = "regionInstanceGroupManagerResizeRequests.cancel";
/// The shortest run Compute Engine takes for a resize request (10 minutes).
pub const MIN_RUN_SECONDS: u64 = 10 * 60;
/// The longest: flex-start VMs run for at most seven days.
pub const MAX_RUN_SECONDS: u64 = 7 * 24 * 3600;

fn state_name(r: &InstanceGroupManagerResizeRequest) -> String {
    r.state
        .as_ref()
        .and_then(|s| s.name())
        .unwrap_or("STATE_UNSPECIFIED")
        .to_string()
}

fn is(r: &InstanceGroupManagerResizeRequest, state: State) -> bool {
    r.state.as_ref() == Some(&state)
}

fn active(r: &InstanceGroupManagerResizeRequest) -> bool {
    is(r, State::Creating) || is(r, State::Accepted)
}

fn ours(r: &InstanceGroupManagerResizeRequest) -> bool {
    names::owned(r.name.as_deref(), r.description.as_deref())
}

fn count(r: &InstanceGroupManagerResizeRequest) -> u32 {
    r.resize_by.unwrap_or(0).max(0) as u32
}

/// The first error a failed request (or its last attempt) carries: (code, message).
fn request_error(r: &InstanceGroupManagerResizeRequest) -> Option<(String, String)> {
    let status = r.status.as_ref()?;
    if let Some(e) = status.error.as_ref().and_then(|e| e.errors.first()) {
        return Some((
            e.code.clone().unwrap_or_default(),
            e.message.clone().unwrap_or_default(),
        ));
    }
    status
        .last_attempt
        .as_ref()
        .and_then(|a| a.error.as_ref())
        .and_then(|e| e.errors.first())
        .map(|e| {
            (
                e.code.clone().unwrap_or_default(),
                e.message.clone().unwrap_or_default(),
            )
        })
}

impl GcpCapacity {
    async fn resize_request(
        &self,
        region: &str,
        group: &str,
        name: &str,
    ) -> ActResult<Option<InstanceGroupManagerResizeRequest>> {
        found(
            GET,
            self.resize_requests
                .get()
                .set_project(&self.config.project)
                .set_region(region)
                .set_instance_group_manager(group)
                .set_resize_request(name)
                .send()
                .await,
        )
    }

    /// Every resize request on a group (every page).
    async fn all_resize_requests(
        &self,
        region: &str,
        group: &str,
    ) -> ActResult<Vec<InstanceGroupManagerResizeRequest>> {
        let mut out = Vec::new();
        let mut token = String::new();
        loop {
            let page = self
                .resize_requests
                .list()
                .set_project(&self.config.project)
                .set_region(region)
                .set_instance_group_manager(group)
                .set_page_token(token.clone())
                .send()
                .await
                .map_err(|e| classify(LIST, &e, false))?;
            out.extend(page.items);
            match page.next_page_token.filter(|t| !t.is_empty()) {
                Some(next) => token = next,
                None => return Ok(out),
            }
        }
    }

    /// The instances gpucap's active (`CREATING`, `ACCEPTED`) resize requests on a group
    /// will add.
    pub(super) async fn queued_instances(&self, region: &str, group: &str) -> ActResult<u32> {
        Ok(self
            .all_resize_requests(region, group)
            .await?
            .iter()
            .filter(|r| ours(r) && active(r))
            .map(count)
            .sum())
    }

    /// Looks at a request again while it is `CREATING` (being made), until it is not or the
    /// operation timeout passes.
    async fn past_creating(
        &self,
        region: &str,
        group: &str,
        mut r: InstanceGroupManagerResizeRequest,
    ) -> ActResult<InstanceGroupManagerResizeRequest> {
        let deadline = tokio::time::Instant::now() + self.config.operation_timeout;
        let name = r.name.clone().unwrap_or_default();
        while is(&r, State::Creating) && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(self.config.poll_interval).await;
            match self.resize_request(region, group, &name).await? {
                Some(next) => r = next,
                None => {
                    return Err(refuse(
                        GET,
                        ActErrorKind::Unknown,
                        format!("resize request {region}/{group}/{name} is gone"),
                    ));
                }
            }
        }
        Ok(r)
    }

    /// Cancels the queued (`ACCEPTED`) resize requests gpucap made on a flex-start group when
    /// they would bring its on-demand size past `on_demand`; returns the group as it is after.
    /// A request of gpucap's still `CREATING` is waited on first; one that is being fulfilled
    /// cannot be cancelled and is left to finish (the resize that follows sets the size).
    pub(super) async fn cancel_queued(
        &self,
        region: &str,
        group: InstanceGroupManager,
        on_demand: u32,
    ) -> ActResult<InstanceGroupManager> {
        let name = group.name.clone().unwrap_or_default();
        let mut queued = Vec::new();
        for r in self.all_resize_requests(region, &name).await? {
            if !ours(&r) || !active(&r) {
                continue;
            }
            let r = self.past_creating(region, &name, r).await?;
            if is(&r, State::Accepted) {
                queued.push(r);
            }
        }
        let target = group.target_size.unwrap_or(0).max(0) as u32;
        let coming: u32 = queued.iter().map(count).sum();
        if queued.is_empty() || target + coming <= on_demand {
            return Ok(group);
        }
        for r in &queued {
            let rr = r.name.clone().unwrap_or_default();
            let sent = self
                .resize_requests
                .cancel()
                .set_project(&self.config.project)
                .set_region(region)
                .set_instance_group_manager(&name)
                .set_resize_request(&rr)
                .set_request_id(names::request_id(CANCEL, &format!("{region}/{name}/{rr}")))
                .send()
                .await;
            let outcome = match sent {
                Ok(op) => {
                    note(Scope::Region(region), &op);
                    self.follow(CANCEL, Scope::Region(region), op)
                        .await
                        .map(|_| ())
                }
                Err(e) => Err(classify(CANCEL, &e, true)),
            };
            if let Err(e) = outcome {
                // Refused (no longer ACCEPTED) or lost: what the request is now decides.
                match self.resize_request(region, &name, &rr).await? {
                    Some(now) if !active(&now) => {}
                    _ => return Err(e),
                }
            }
            tracing::info!(request = %rr, "cancelled the queued resize request of {region}/{name}");
        }
        self.group(region, &name).await?.ok_or_else(|| {
            refuse(
                GROUP_GET,
                ActErrorKind::Unknown,
                format!("managed instance group {region}/{name} is gone"),
            )
        })
    }

    /// [`gpucap_provider::capacity::Pools::request_pool`] on GCP (see the module docs).
    pub(super) async fn flex(
        &self,
        region: &str,
        pool: &str,
        size: PoolSize,
        flex: FlexStart,
        id: &Idempotency,
        dry_run: bool,
    ) -> ActResult {
        if !(MIN_RUN_SECONDS..=MAX_RUN_SECONDS).contains(&flex.run_seconds) {
            return Err(refuse(
                INSERT,
                ActErrorKind::Other,
                format!(
                    "a flex-start run lasts 10 minutes to 7 days; {} s was asked",
                    flex.run_seconds
                ),
            ));
        }
        let Some(token) = id.client_token.as_deref().filter(|t| !t.is_empty()) else {
            return Err(refuse(
                INSERT,
                ActErrorKind::Other,
                "a resize request is named from the client token (Idempotency::client_token is None)",
            ));
        };
        let name = names::pool_resource_name(pool, false);
        let Some(group) = self.group(region, &name).await? else {
            return Err(refuse(
                INSERT,
                if dry_run {
                    ActErrorKind::DryRunOk
                } else {
                    ActErrorKind::NotFound
                },
                format!(
                    "{region}/{name} does not exist yet; once made it would ask for {} flex-start instance(s)",
                    size.on_demand
                ),
            ));
        };
        if !names::owned(group.name.as_deref(), group.description.as_deref()) {
            return Err(not_ours(INSERT, "managed instance group", region, &name));
        }
        let template = self.template(region, &name).await?;
        if !is_flex_start(template.as_ref()) {
            return Err(refuse(
                INSERT,
                ActErrorKind::Other,
                format!(
                    "{region}/{name} was made without `flex_start` (its template is not FLEX_START); gpucap never re-shapes a pool: size it without `flex_start`, or make a new pool"
                ),
            ));
        }
        let machine = machine_of(template.as_ref());
        let rr = names::reservation_name("flex", token);
        let requests = self.all_resize_requests(region, &name).await?;
        let asked = requests.iter().find(|r| r.name.as_deref() == Some(&rr));
        if let Some(r) = asked
            && !ours(r)
        {
            return Err(not_ours(INSERT, "resize request", region, &rr));
        }
        let target = group.target_size.unwrap_or(0).max(0) as u32;
        // What gpucap's active requests (an earlier plan's) will still add.
        let coming: u32 = requests
            .iter()
            .filter(|r| ours(r) && active(r))
            .map(count)
            .sum();
        let earlier = requests.iter().find(|r| ours(r) && active(r));
        let next = match (asked, earlier) {
            (Some(r), _) => Next::Follow(r),
            // Still wanted: followed, and nothing more asked while it is active (one request
            // of gpucap's at a time per group).
            (None, Some(r)) if size.on_demand >= target + coming => Next::Follow(r),
            (None, None) if size.on_demand > target => Next::Ask(size.on_demand - target),
            // Fewer wanted than the group has or has queued: a plain resize, which cancels
            // gpucap's queued requests first.
            _ => Next::Size,
        };
        if dry_run {
            let what = match next {
                Next::Follow(r) => format!(
                    "resize request {} is {} already",
                    r.name.as_deref().unwrap_or_default(),
                    state_name(r).to_lowercase()
                ),
                Next::Ask(n) => format!(
                    "would ask {region}/{name} for {n} flex-start instance(s) for {} s (resize request {rr})",
                    flex.run_seconds
                ),
                Next::Size => format!(
                    "would size {region}/{name} to {} (cancelling gpucap's queued requests)",
                    size.on_demand
                ),
            };
            return Err(refuse(INSERT, ActErrorKind::DryRunOk, what));
        }
        let request = match next {
            Next::Follow(r) => r.clone(),
            Next::Ask(n) => self.ask(region, &name, &rr, n, flex, id).await?,
            Next::Size => return self.scale(region, pool, size, false, true).await,
        };
        let request = self.past_creating(region, &name, request).await?;
        let rr = request.name.clone().unwrap_or(rr);
        let queued = is(&request, State::Accepted) || is(&request, State::Creating);
        if is(&request, State::Failed) || is(&request, State::Cancelled) {
            let (code, message) = request_error(&request).unwrap_or_default();
            return Err(ActError {
                api: format!("gcp:{INSERT}"),
                kind: if is(&request, State::Failed) {
                    kind_of_reason(&code).unwrap_or(ActErrorKind::Other)
                } else {
                    ActErrorKind::Other
                },
                code: Some(code).filter(|c| !c.is_empty()),
                message: format!(
                    "resize request {region}/{name}/{rr} is {}{}; this plan does not ask again (a new plan asks under a new name)",
                    state_name(&request),
                    if message.is_empty() {
                        String::new()
                    } else {
                        format!(": {}", message.trim_end_matches('.'))
                    }
                ),
                request_id: Some(rr),
            });
        }
        // Fulfilled, or queued: the spot half (if any) is sized as in any pool, the on-demand
        // group kept at what it has.
        let now = self.group(region, &name).await?.unwrap_or(group);
        let on_demand_now = now.target_size.unwrap_or(0).max(0) as u32;
        let spot_exists = self
            .group(region, &names::pool_resource_name(pool, true))
            .await?
            .is_some();
        let mut done = if size.spot > 0 || spot_exists {
            let sized = PoolSize {
                on_demand: on_demand_now,
                spot: size.spot,
            };
            self.scale(region, pool, sized, false, false).await?
        } else {
            let running = if on_demand_now > 0 {
                Some(self.confirm(region, &name, on_demand_now).await?.running)
            } else {
                Some(0)
            };
            Done {
                resource: resource(region, &now, None, machine, running),
                request_id: None,
            }
        };
        done.request_id = Some(rr);
        if queued {
            done.resource.state = "pending".into();
        }
        Ok(done)
    }

    /// Inserts the resize request `rr` (or finds it, after a 409 or a lost answer) and reads
    /// it back.
    async fn ask(
        &self,
        region: &str,
        group: &str,
        rr: &str,
        instances: u32,
        flex: FlexStart,
        id: &Idempotency,
    ) -> ActResult<InstanceGroupManagerResizeRequest> {
        let token = id.client_token.as_deref().unwrap_or(rr);
        let mut body = InstanceGroupManagerResizeRequest::default();
        body.name = Some(rr.to_string());
        body.description = Some(names::description(id));
        body.resize_by = Some(i32::try_from(instances).map_err(|_| {
            refuse(
                RESIZE,
                ActErrorKind::Other,
                format!("{instances} is too many"),
            )
        })?);
        let mut run = RunDuration::default();
        run.seconds = Some(i64::try_from(flex.run_seconds).unwrap_or(i64::MAX));
        body.requested_run_duration = Some(run);
        let sent = self
            .resize_requests
            .insert()
            .set_project(&self.config.project)
            .set_region(region)
            .set_instance_group_manager(group)
            .set_request_id(names::request_id(INSERT, token))
            .set_body(body)
            .send()
            .await;
        let outcome = match sent {
            Ok(op) => {
                note(Scope::Region(region), &op);
                self.follow(INSERT, Scope::Region(region), op)
                    .await
                    .map(|_| ())
            }
            Err(e) => Err(classify(INSERT, &e, true)),
        };
        match outcome {
            Ok(()) => {}
            // Taken: by an earlier attempt of ours (then it is followed), or by someone else.
            Err(e) if conflict(&e) => {}
            Err(e) => return Err(e),
        }
        match self.resize_request(region, group, rr).await? {
            Some(r) if ours(&r) => Ok(r),
            Some(_) => Err(not_ours(INSERT, "resize request", region, rr)),
            None => Err(refuse(
                GET,
                ActErrorKind::Unknown,
                format!(
                    "resize request {region}/{group}/{rr} was inserted but cannot be read back"
                ),
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_active_requests_of_gpucap_count() {
        let mut r = InstanceGroupManagerResizeRequest::default();
        r.name = Some("gpucap-flex-0123456789ab".into());
        r.description = Some(r#"{"managed-by":"gpucap"}"#.into());
        r.state = Some(State::Accepted);
        assert!(ours(&r) && active(&r));
        r.state = Some(State::Succeeded);
        assert!(!active(&r));
        r.description = Some("made by hand".into());
        assert!(!ours(&r));
        assert_eq!(state_name(&r), "SUCCEEDED");
    }
}
