//! A fake cloud for the executor's unit tests: it keeps what it "created", records every call
//! with its inputs, and fails calls as a test scripts it (including the dangerous case: the
//! purchase happens, the answer is lost).

use std::collections::{BTreeMap, VecDeque};
use std::sync::Mutex;

use chrono::{DateTime, Utc};
use gpucap_provider::BoxFuture;
use gpucap_provider::capacity::{
    ActError, ActErrorKind, ActResult, BlockOffering, BlockQuery, CapacityBlocks, CloudResource,
    Describe, Done, Idempotency, Placement, PoolSize, PoolSpec, Pools, ReservationRequest,
    Reservations, ResourceKind,
};

/// What a scripted failure does.
#[derive(Debug, Clone)]
pub enum Fault {
    /// Fail with this kind, doing nothing.
    Fail(ActErrorKind),
    /// Do the call, then lose the answer (an `Unknown` outcome).
    DoThenLose,
}

#[derive(Debug, Default)]
pub struct Inner {
    /// `api key=value …` per call, in order.
    pub calls: Vec<String>,
    pub resources: Vec<CloudResource>,
    pub offerings: Vec<BlockOffering>,
    /// Scripted faults per API name, used first to last.
    pub faults: BTreeMap<String, VecDeque<Fault>>,
    /// Client tokens seen by create_reservation, with the resource each made.
    pub tokens: BTreeMap<String, String>,
    next: u32,
}

#[derive(Debug, Default)]
pub struct FakeCloud {
    pub inner: Mutex<Inner>,
}

impl FakeCloud {
    pub fn with_offerings(offerings: Vec<BlockOffering>) -> FakeCloud {
        let fake = FakeCloud::default();
        fake.inner.lock().unwrap().offerings = offerings;
        fake
    }

    pub fn fail(&self, api: &str, fault: Fault) {
        self.inner
            .lock()
            .unwrap()
            .faults
            .entry(api.to_string())
            .or_default()
            .push_back(fault);
    }

    pub fn calls(&self, api: &str) -> usize {
        self.inner
            .lock()
            .unwrap()
            .calls
            .iter()
            .filter(|c| c.split(' ').next() == Some(api))
            .count()
    }

    pub fn resources(&self, kind: ResourceKind) -> Vec<CloudResource> {
        self.inner
            .lock()
            .unwrap()
            .resources
            .iter()
            .filter(|r| r.kind == kind)
            .cloned()
            .collect()
    }

    fn err(api: &str, kind: ActErrorKind) -> ActError {
        ActError {
            api: api.to_string(),
            kind,
            code: None,
            message: format!("scripted {kind}"),
            request_id: None,
        }
    }

    /// Records the call, then applies a scripted fault: `Err` to return now, or whether to
    /// lose the answer after doing it.
    fn enter(&self, api: &str, line: String) -> Result<bool, ActError> {
        let mut inner = self.inner.lock().unwrap();
        inner.calls.push(format!("{api} {line}"));
        match inner.faults.get_mut(api).and_then(VecDeque::pop_front) {
            Some(Fault::Fail(kind)) => Err(Self::err(api, kind)),
            Some(Fault::DoThenLose) => Ok(true),
            None => Ok(false),
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn create(
        &self,
        api: &str,
        kind: ResourceKind,
        placement: Placement,
        instances: u32,
        start: Option<DateTime<Utc>>,
        end: Option<DateTime<Utc>>,
        id: &Idempotency,
        lose: bool,
        name: Option<String>,
    ) -> ActResult {
        let mut inner = self.inner.lock().unwrap();
        inner.next += 1;
        let rid = name.unwrap_or_else(|| format!("cr-{:04}", inner.next));
        let resource = CloudResource {
            id: rid,
            kind,
            placement,
            instances,
            start,
            end,
            state: "scheduled".into(),
            tags: id.tags(),
            in_use: None,
        };
        inner.resources.push(resource.clone());
        if lose {
            return Err(Self::err(api, ActErrorKind::Unknown));
        }
        Ok(Done {
            resource,
            request_id: Some(format!("req-{}", inner.next)),
        })
    }
}

/// Blocks are bought from quoted offerings here, and commitments are not signed by apply: the
/// defaults, which refuse.
impl gpucap_provider::capacity::RequestedBlocks for FakeCloud {}
impl gpucap_provider::capacity::Commitments for FakeCloud {}

impl CapacityBlocks for FakeCloud {
    fn describe_offerings(
        &self,
        query: &BlockQuery,
    ) -> BoxFuture<'_, ActResult<Vec<BlockOffering>>> {
        let query = query.clone();
        Box::pin(async move {
            self.enter(
                "DescribeCapacityBlockOfferings",
                format!("type={} n={}", query.instance_type, query.instances),
            )?;
            Ok(self
                .inner
                .lock()
                .unwrap()
                .offerings
                .iter()
                .filter(|o| {
                    o.placement.instance_type == query.instance_type
                        && o.instances == query.instances
                        && o.start >= query.start_from
                        && o.start <= query.start_to
                })
                .cloned()
                .collect())
        })
    }

    fn purchase_block(
        &self,
        offering: &BlockOffering,
        id: &Idempotency,
        dry_run: bool,
    ) -> BoxFuture<'_, ActResult> {
        let (offering, id) = (offering.clone(), id.clone());
        Box::pin(async move {
            let api = "PurchaseCapacityBlock";
            let lose = self.enter(
                api,
                format!("offering={} dry_run={dry_run}", offering.offering_id),
            )?;
            if dry_run {
                return Err(Self::err(api, ActErrorKind::DryRunOk));
            }
            self.create(
                api,
                ResourceKind::CapacityBlock,
                offering.placement.clone(),
                offering.instances,
                Some(offering.start),
                Some(offering.end),
                &id,
                lose,
                None,
            )
        })
    }
}

impl Reservations for FakeCloud {
    fn create_reservation(
        &self,
        request: &ReservationRequest,
        id: &Idempotency,
        dry_run: bool,
    ) -> BoxFuture<'_, ActResult> {
        let (request, id) = (request.clone(), id.clone());
        Box::pin(async move {
            let api = "CreateCapacityReservation";
            let token = id.client_token.clone().unwrap_or_default();
            let lose = self.enter(api, format!("token={token} n={}", request.instances))?;
            if dry_run {
                return Err(Self::err(api, ActErrorKind::DryRunOk));
            }
            // The same token returns the same reservation, as EC2 does.
            let existing = {
                let inner = self.inner.lock().unwrap();
                inner
                    .tokens
                    .get(&token)
                    .and_then(|rid| inner.resources.iter().find(|r| &r.id == rid).cloned())
            };
            let done = match existing {
                Some(resource) => Ok(Done {
                    resource,
                    request_id: None,
                }),
                None => {
                    let made = self.create(
                        api,
                        ResourceKind::Reservation,
                        request.placement.clone(),
                        request.instances,
                        Some(request.start),
                        Some(request.end),
                        &id,
                        false,
                        None,
                    )?;
                    self.inner
                        .lock()
                        .unwrap()
                        .tokens
                        .insert(token, made.resource.id.clone());
                    Ok(made)
                }
            };
            if lose {
                return Err(Self::err(api, ActErrorKind::Unknown));
            }
            done
        })
    }

    fn modify_reservation(
        &self,
        _region: &str,
        reservation_id: &str,
        instances: u32,
        _end: DateTime<Utc>,
        _dry_run: bool,
    ) -> BoxFuture<'_, ActResult> {
        let rid = reservation_id.to_string();
        Box::pin(async move {
            self.enter(
                "ModifyCapacityReservation",
                format!("id={rid} n={instances}"),
            )?;
            Err(Self::err("ModifyCapacityReservation", ActErrorKind::Other))
        })
    }

    fn cancel_reservation(
        &self,
        _region: &str,
        reservation_id: &str,
        dry_run: bool,
    ) -> BoxFuture<'_, ActResult> {
        let rid = reservation_id.to_string();
        Box::pin(async move {
            let api = "CancelCapacityReservation";
            self.enter(api, format!("id={rid}"))?;
            if dry_run {
                return Err(Self::err(api, ActErrorKind::DryRunOk));
            }
            let mut inner = self.inner.lock().unwrap();
            let r = inner
                .resources
                .iter_mut()
                .find(|r| r.id == rid)
                .ok_or_else(|| Self::err(api, ActErrorKind::NotFound))?;
            r.state = "cancelled".into();
            Ok(Done {
                resource: r.clone(),
                request_id: None,
            })
        })
    }
}

impl Pools for FakeCloud {
    fn ensure_pool(
        &self,
        spec: &PoolSpec,
        id: &Idempotency,
        dry_run: bool,
    ) -> BoxFuture<'_, ActResult> {
        let (spec, id) = (spec.clone(), id.clone());
        Box::pin(async move {
            let api = "CreateAutoScalingGroup";
            let lose = self.enter(
                api,
                format!(
                    "name={} reservations={}",
                    spec.name,
                    spec.capacity_reservations.join(",")
                ),
            )?;
            if dry_run {
                return Err(Self::err(api, ActErrorKind::DryRunOk));
            }
            let existing = self
                .inner
                .lock()
                .unwrap()
                .resources
                .iter()
                .find(|r| r.id == spec.name)
                .cloned();
            if let Some(resource) = existing {
                return Ok(Done {
                    resource,
                    request_id: None,
                });
            }
            self.create(
                api,
                ResourceKind::Pool,
                Placement {
                    region: spec.region.clone(),
                    zone: None,
                    instance_type: spec.instance_types.join(","),
                },
                0,
                None,
                None,
                &id,
                lose,
                Some(spec.name.clone()),
            )
        })
    }

    fn scale_pool(
        &self,
        _region: &str,
        name: &str,
        size: PoolSize,
        dry_run: bool,
    ) -> BoxFuture<'_, ActResult> {
        let name = name.to_string();
        Box::pin(async move {
            let api = "UpdateAutoScalingGroup";
            self.enter(
                api,
                format!("name={name} od={} spot={}", size.on_demand, size.spot),
            )?;
            if dry_run {
                return Err(Self::err(api, ActErrorKind::DryRunOk));
            }
            let mut inner = self.inner.lock().unwrap();
            let r = inner
                .resources
                .iter_mut()
                .find(|r| r.id == name)
                .ok_or_else(|| Self::err(api, ActErrorKind::NotFound))?;
            r.instances = size.on_demand + size.spot;
            Ok(Done {
                resource: r.clone(),
                request_id: None,
            })
        })
    }
}

impl Describe for FakeCloud {
    fn find_by_tag(
        &self,
        _region: &str,
        kinds: &[ResourceKind],
        key: &str,
        value: &str,
    ) -> BoxFuture<'_, ActResult<Vec<CloudResource>>> {
        let (key, value, kinds) = (key.to_string(), value.to_string(), kinds.to_vec());
        Box::pin(async move {
            self.enter("FindByTag", format!("{key}={value}"))?;
            Ok(self
                .inner
                .lock()
                .unwrap()
                .resources
                .iter()
                .filter(|r| kinds.is_empty() || kinds.contains(&r.kind))
                .filter(|r| r.tags.get(&key) == Some(&value))
                .cloned()
                .collect())
        })
    }

    fn describe(
        &self,
        _region: &str,
        _kind: ResourceKind,
        id: &str,
    ) -> BoxFuture<'_, ActResult<Option<CloudResource>>> {
        let id = id.to_string();
        Box::pin(async move {
            self.enter("Describe", format!("id={id}"))?;
            Ok(self
                .inner
                .lock()
                .unwrap()
                .resources
                .iter()
                .find(|r| r.id == id)
                .cloned())
        })
    }
}
