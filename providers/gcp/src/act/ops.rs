//! Errors and Operations: every SDK error and every failed Operation classified onto the
//! shared taxonomy, the `zoneOperations.wait` / `regionOperations.wait` loop that follows
//! an Operation to `DONE` (reservations are zonal; pools, resize requests and commitments are
//! regional), and [`note`], which reports a started Operation to the caller's journal.

use google_cloud_compute_v1::model::Operation;
use google_cloud_compute_v1::model::operation;
use google_cloud_gax::error::Error as GaxError;
use google_cloud_gax::error::rpc::StatusDetails;
use gpucap_provider::capacity::{ActError, ActErrorKind, ActResult};

use super::GcpCapacity;

pub const WAIT: &str = "zoneOperations.wait";
pub const REGION_WAIT: &str = "regionOperations.wait";

/// Where an Operation lives: zonal resources have zonal Operations, regional ones regional.
#[derive(Debug, Clone, Copy)]
pub enum Scope<'a> {
    Zone(&'a str),
    Region(&'a str),
}

/// A refusal or local failure, before or without any call.
pub fn refuse(api: &str, kind: ActErrorKind, message: impl Into<String>) -> ActError {
    ActError {
        api: format!("gcp:{api}"),
        kind,
        code: None,
        message: message.into(),
        request_id: None,
    }
}

/// The kind a Compute Engine error reason or Operation error code stands for, if it names one.
pub fn kind_of_reason(reason: &str) -> Option<ActErrorKind> {
    Some(match reason {
        r if r.starts_with("ZONE_RESOURCE_POOL_EXHAUSTED") => ActErrorKind::Capacity,
        "QUOTA_EXCEEDED" | "quotaExceeded" => ActErrorKind::Quota,
        "rateLimitExceeded"
        | "userRateLimitExceeded"
        | "RESOURCE_OPERATION_RATE_EXCEEDED"
        | "RATE_LIMIT_EXCEEDED" => ActErrorKind::Throttled,
        "alreadyExists" | "RESOURCE_ALREADY_EXISTS" => ActErrorKind::Other,
        "notFound" | "RESOURCE_NOT_FOUND" => ActErrorKind::NotFound,
        "forbidden" | "insufficientPermissions" | "PERMISSION_DENIED" => ActErrorKind::Auth,
        _ => return None,
    })
}

/// The answer to a look-up by name (`api`, which changes nothing): the resource, `None` when
/// Compute Engine says there is none, or the error classified.
pub fn found<T>(api: &str, answer: Result<T, GaxError>) -> ActResult<Option<T>> {
    match answer {
        Ok(resource) => Ok(Some(resource)),
        Err(e) => match classify(api, &e, false) {
            e if e.kind == ActErrorKind::NotFound => Ok(None),
            e => Err(e),
        },
    }
}

/// Classifies an SDK error. `mutating`: the request may have changed something, so a
/// transport failure or a 5xx after it was sent is `Unknown`, not `Transient`.
pub fn classify(api: &str, err: &GaxError, mutating: bool) -> ActError {
    let http = err.http_status_code();
    let mut reasons: Vec<String> = Vec::new();
    let mut message = err.to_string();
    if let Some(status) = err.status() {
        message = status.message.clone();
        for d in &status.details {
            if let StatusDetails::ErrorInfo(info) = d
                && !info.reason.is_empty()
            {
                reasons.push(info.reason.clone());
            }
        }
    }
    let payload = err
        .http_payload()
        .map(|p| String::from_utf8_lossy(p).into_owned())
        .unwrap_or_default();
    // A reason also shows in the message or a raw (unparsed) body.
    for known in [
        "ZONE_RESOURCE_POOL_EXHAUSTED",
        "QUOTA_EXCEEDED",
        "RESOURCE_OPERATION_RATE_EXCEEDED",
        "rateLimitExceeded",
    ] {
        if (message.contains(known) || payload.contains(known))
            && !reasons.iter().any(|r| r.starts_with(known))
        {
            reasons.push(known.to_string());
        }
    }
    let by_reason = reasons
        .iter()
        .find_map(|r| kind_of_reason(r).map(|k| (k, r)));
    let (kind, code) = match (by_reason, http) {
        (Some((k, r)), _) => (k, Some(r.clone())),
        (None, Some(404)) => (ActErrorKind::NotFound, Some("notFound".into())),
        (None, Some(409)) => (ActErrorKind::Other, Some("conflict".into())),
        (None, Some(429)) => (ActErrorKind::Quota, Some("HTTP 429".into())),
        (None, Some(401 | 403)) => (
            ActErrorKind::Auth,
            Some(format!("HTTP {}", http.unwrap_or(0))),
        ),
        (None, Some(s)) if s >= 500 => (
            if mutating {
                ActErrorKind::Unknown
            } else {
                ActErrorKind::Transient
            },
            Some(format!("HTTP {s}")),
        ),
        (None, Some(s)) => (ActErrorKind::Other, Some(format!("HTTP {s}"))),
        (None, None) if err.is_authentication() => (ActErrorKind::Auth, None),
        (None, None) if err.is_transient_and_before_rpc() || err.is_connect() => {
            (ActErrorKind::Transient, None)
        }
        (None, None) if err.is_deserialization() => (ActErrorKind::Unknown, None),
        (None, None) => (
            if mutating {
                ActErrorKind::Unknown
            } else {
                ActErrorKind::Transient
            },
            None,
        ),
    };
    ActError {
        api: format!("gcp:{api}"),
        kind,
        code,
        message,
        request_id: None,
    }
}

/// The error a `DONE` Operation carries, if any, classified by its first error's code (a
/// capacity, quota or rate code among them wins).
pub fn operation_error(api: &str, op: &Operation) -> Option<ActError> {
    let errors = op
        .error
        .as_ref()
        .map(|e| e.errors.as_slice())
        .unwrap_or(&[]);
    if errors.is_empty() {
        return None;
    }
    let codes: Vec<&str> = errors.iter().filter_map(|e| e.code.as_deref()).collect();
    let found = codes
        .iter()
        .find_map(|c| kind_of_reason(c).map(|k| (k, c.to_string())));
    let (kind, code) = match found {
        Some(f) => f,
        None => {
            let kind = match op.http_error_status_code {
                Some(404) => ActErrorKind::NotFound,
                Some(429) => ActErrorKind::Quota,
                Some(401 | 403) => ActErrorKind::Auth,
                _ => ActErrorKind::Other,
            };
            (
                kind,
                codes.first().map(|c| c.to_string()).unwrap_or_default(),
            )
        }
    };
    let message = errors
        .iter()
        .filter_map(|e| e.message.as_deref())
        .collect::<Vec<_>>()
        .join("; ");
    Some(ActError {
        api: format!("gcp:{api}"),
        kind,
        code: Some(code).filter(|c| !c.is_empty()),
        message,
        request_id: op.name.clone(),
    })
}

fn done(op: &Operation) -> bool {
    matches!(op.status, Some(operation::Status::Done))
}

/// gpucap's name for an Operation in its scope, as the journal records it
/// (`zones/{zone}/operations/{name}`, `regions/{region}/operations/{name}`).
pub fn operation_ref(scope: Scope<'_>, name: &str) -> String {
    match scope {
        Scope::Zone(zone) => format!("zones/{zone}/operations/{name}"),
        Scope::Region(region) => format!("regions/{region}/operations/{name}"),
    }
}

/// Reports a freshly started Operation to the caller, to journal before the wait
/// (`gpucap_provider::capacity::note_operation`); one already `DONE` needs no resuming.
pub fn note(scope: Scope<'_>, op: &Operation) {
    if let Some(name) = op.name.as_deref().filter(|n| !n.is_empty())
        && !done(op)
    {
        gpucap_provider::capacity::note_operation(&operation_ref(scope, name));
    }
}

impl GcpCapacity {
    /// Waits on an Operation named as [`operation_ref`] gives it (a run killed during a wait
    /// resumes here): `Ok` once it is `DONE`, whatever it did; the caller reads back.
    pub(crate) async fn resume(&self, operation: &str) -> ActResult<()> {
        let parts: Vec<&str> = operation.trim_matches('/').split('/').collect();
        let (scope, name) = match parts.as_slice() {
            ["zones", zone, "operations", name] => (Scope::Zone(zone), *name),
            ["regions", region, "operations", name] => (Scope::Region(region), *name),
            _ => {
                return Err(refuse(
                    WAIT,
                    ActErrorKind::Other,
                    format!("`{operation}` is not an Operation gpucap can wait on"),
                ));
            }
        };
        let mut first = Operation::default();
        first.name = Some(name.to_string());
        match self.follow("operation", scope, first).await {
            Ok(_) => Ok(()),
            // Over, with an error of its own: over all the same.
            Err(e) if e.kind != ActErrorKind::Unknown => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// Follows a zonal Operation until it is `DONE`: `zoneOperations.wait` returns after at
    /// most about two minutes (and may return earlier) with the Operation as it is, so it is
    /// called in a loop. A failed wait is retried (it changes nothing) until the operation
    /// timeout, which is `Unknown`: the next attempt finds the reservation by name. Returns
    /// the Operation's own error, classified, when it has one.
    pub(crate) async fn wait_for(
        &self,
        api: &str,
        zone: &str,
        first: Operation,
    ) -> ActResult<Operation> {
        self.follow(api, Scope::Zone(zone), first).await
    }

    /// [`GcpCapacity::wait_for`] for an Operation in either scope (`regionOperations.wait`
    /// behaves as `zoneOperations.wait` does).
    pub(crate) async fn follow(
        &self,
        api: &str,
        scope: Scope<'_>,
        first: Operation,
    ) -> ActResult<Operation> {
        let deadline = tokio::time::Instant::now() + self.config.operation_timeout;
        let name = first.name.clone().unwrap_or_default();
        let mut op = first;
        loop {
            if done(&op) {
                return match operation_error(api, &op) {
                    Some(e) => Err(e),
                    None => Ok(op),
                };
            }
            if name.is_empty() {
                return Err(refuse(
                    api,
                    ActErrorKind::Unknown,
                    "the Operation has no name and is not DONE; it cannot be followed",
                ));
            }
            if tokio::time::Instant::now() >= deadline {
                return Err(refuse(
                    api,
                    ActErrorKind::Unknown,
                    format!(
                        "operation {name} is not DONE after {:?}",
                        self.config.operation_timeout
                    ),
                ));
            }
            let (waited, wait_api) = match scope {
                Scope::Zone(zone) => (
                    self.operations
                        .wait()
                        .set_project(&self.config.project)
                        .set_zone(zone)
                        .set_operation(&name)
                        .send()
                        .await,
                    WAIT,
                ),
                Scope::Region(region) => (
                    self.region_operations
                        .wait()
                        .set_project(&self.config.project)
                        .set_region(region)
                        .set_operation(&name)
                        .send()
                        .await,
                    REGION_WAIT,
                ),
            };
            match waited {
                Ok(next) => {
                    if !done(&next) {
                        tracing::debug!(operation = %name, "{wait_api} returned before DONE");
                    }
                    op = next;
                }
                Err(e) => {
                    let e = classify(wait_api, &e, false);
                    if matches!(e.kind, ActErrorKind::Auth | ActErrorKind::NotFound) {
                        return Err(ActError {
                            kind: ActErrorKind::Unknown,
                            ..e
                        });
                    }
                    tracing::debug!(operation = %name, error = %e, "{wait_api} failed; waiting again");
                    tokio::time::sleep(self.config.poll_interval).await;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn op(codes: &[&str], http: Option<i32>) -> Operation {
        let mut o = Operation::default();
        o.name = Some("operation-1".into());
        o.status = Some(operation::Status::Done);
        o.http_error_status_code = http;
        let mut err = operation::Error::default();
        for c in codes {
            let mut e = operation::error::Errors::default();
            e.code = Some(c.to_string());
            e.message = Some(format!("{c} happened"));
            err.errors.push(e);
        }
        o.error = Some(err);
        o
    }

    #[test]
    fn operation_errors_map_onto_the_taxonomy() {
        let k = |codes: &[&str], http| {
            operation_error("reservations.insert", &op(codes, http)).map(|e| e.kind)
        };
        assert_eq!(
            k(&["ZONE_RESOURCE_POOL_EXHAUSTED"], Some(503)),
            Some(ActErrorKind::Capacity)
        );
        assert_eq!(
            k(&["ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS"], Some(503)),
            Some(ActErrorKind::Capacity)
        );
        assert_eq!(k(&["QUOTA_EXCEEDED"], Some(403)), Some(ActErrorKind::Quota));
        assert_eq!(
            k(&["RESOURCE_OPERATION_RATE_EXCEEDED"], None),
            Some(ActErrorKind::Throttled)
        );
        assert_eq!(k(&["SOMETHING"], Some(429)), Some(ActErrorKind::Quota));
        assert_eq!(k(&["SOMETHING"], Some(400)), Some(ActErrorKind::Other));
        assert_eq!(k(&[], None), None);
    }
}
