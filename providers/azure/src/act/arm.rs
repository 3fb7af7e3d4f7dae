//! One ARM request, its error classified onto the shared taxonomy, and the long-running
//! operation pattern (`Azure-AsyncOperation`, else `Location`, paced by `Retry-After`).
//!
//! Classification ([`classify`]):
//!
//! | ARM answer                                                        | kind          |
//! |-------------------------------------------------------------------|---------------|
//! | `AllocationFailed`, `ZonalAllocationFailed`, `SkuNotAvailable`, `Overconstrained*AllocationRequest` | capacity |
//! | `QuotaExceeded`, `OperationNotAllowed` naming a quota             | quota         |
//! | 429 (after waiting its `Retry-After`)                             | throttled     |
//! | 401, 403, `AuthorizationFailed`, `InvalidAuthenticationToken*`    | auth          |
//! | 404                                                               | not found     |
//! | 409 `Conflict`/`AnotherOperationInProgress` (another operation runs) | transient  |
//! | 5xx on a read                                                     | transient     |
//! | 5xx, a timeout or a lost connection after a mutating request left | unknown       |
//! | a connection that never opened                                    | transient     |
//! | anything else                                                     | other         |

use std::time::Duration;

use gpucap_provider::capacity::{ActError, ActErrorKind, ActResult};
use reqwest::Method;
use reqwest::header::HeaderMap;
use serde_json::Value;

use super::AzureCapacity;

/// An answer in the 2xx range.
#[derive(Debug)]
pub(crate) struct Reply {
    pub status: u16,
    pub headers: HeaderMap,
    pub body: Value,
    pub request_id: Option<String>,
}

const CAPACITY_CODES: &[&str] = &[
    "AllocationFailed",
    "ZonalAllocationFailed",
    "SkuNotAvailable",
    "OverconstrainedAllocationRequest",
    "OverconstrainedZonalAllocationRequest",
    "AllocationFailedCapacityReservation",
];
const CONFLICT_CODES: &[&str] = &[
    "Conflict",
    "AnotherOperationInProgress",
    "OperationPreempted",
    "RetryableError",
];

pub(crate) fn refuse(api: &str, kind: ActErrorKind, message: impl Into<String>) -> ActError {
    ActError {
        api: api.into(),
        kind,
        code: None,
        message: message.into(),
        request_id: None,
    }
}

/// The kind of an ARM error `code` with `message`, answered with HTTP `status` to a call
/// that did (`mutating`) or did not change anything.
pub fn classify(status: u16, code: &str, message: &str, mutating: bool) -> ActErrorKind {
    let lower = message.to_ascii_lowercase();
    if CAPACITY_CODES.contains(&code) {
        return ActErrorKind::Capacity;
    }
    if code == "QuotaExceeded"
        || code.ends_with("QuotaExceeded")
        || (code == "OperationNotAllowed" && lower.contains("quota"))
    {
        return ActErrorKind::Quota;
    }
    if status == 429 || code == "TooManyRequests" {
        return ActErrorKind::Throttled;
    }
    if status == 401
        || status == 403
        || code == "AuthorizationFailed"
        || code == "AuthenticationFailed"
        || code.starts_with("InvalidAuthenticationToken")
    {
        return ActErrorKind::Auth;
    }
    if status == 404 {
        return ActErrorKind::NotFound;
    }
    if status == 409 && CONFLICT_CODES.contains(&code) {
        return ActErrorKind::Transient;
    }
    if status >= 500 {
        return if mutating {
            ActErrorKind::Unknown
        } else {
            ActErrorKind::Transient
        };
    }
    ActErrorKind::Other
}

fn request_id(headers: &HeaderMap) -> Option<String> {
    ["x-ms-request-id", "x-ms-correlation-request-id"]
        .iter()
        .find_map(|h| headers.get(*h)?.to_str().ok().map(str::to_string))
}

fn header(headers: &HeaderMap, name: &str) -> Option<String> {
    headers
        .get(name)?
        .to_str()
        .ok()
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
}

/// The error envelope `{"error": {"code", "message"}}` (also the `error` of a failed
/// operation), as (code, message).
pub(crate) fn error_of(body: &Value) -> (String, String) {
    let e = if body["error"].is_object() {
        &body["error"]
    } else {
        body
    };
    (
        e["code"].as_str().unwrap_or("").to_string(),
        e["message"].as_str().unwrap_or("").to_string(),
    )
}

impl AzureCapacity {
    /// The URL of `path` (which starts with `/subscriptions/…`) with the api-version.
    pub(crate) fn url(&self, path: &str, query: &str) -> String {
        format!(
            "{}{path}?api-version={}{}",
            self.config.endpoint,
            super::API_VERSION,
            if query.is_empty() {
                String::new()
            } else {
                format!("&{query}")
            }
        )
    }

    /// How long `Retry-After` asks to wait (seconds or an HTTP date; capped).
    fn retry_after(&self, headers: &HeaderMap) -> Option<Duration> {
        let v = header(headers, "retry-after")?;
        let d = match v.parse::<u64>() {
            Ok(s) => Duration::from_secs(s),
            Err(_) => {
                let at = chrono::DateTime::parse_from_rfc2822(&v).ok()?;
                (at.with_timezone(&chrono::Utc) - chrono::Utc::now())
                    .to_std()
                    .unwrap_or_default()
            }
        };
        Some(d.min(self.config.max_retry_after))
    }

    /// One request to `url`. `mutating` says whether it can change anything (a lost answer
    /// to it is `Unknown`). A 429 is waited out (its `Retry-After`) before it is reported as
    /// throttled, so the caller's next attempt comes no sooner than ARM asked.
    pub(crate) async fn send(
        &self,
        api: &str,
        method: Method,
        url: &str,
        body: Option<&Value>,
        mutating: bool,
    ) -> ActResult<Reply> {
        let ours = url
            .strip_prefix(self.config.endpoint.as_str())
            .is_some_and(|rest| rest.starts_with('/') || rest.starts_with('?'));
        if !ours {
            // The bearer token goes to ARM only, never to a host an answer named.
            return Err(refuse(
                api,
                if mutating {
                    ActErrorKind::Unknown
                } else {
                    ActErrorKind::Other
                },
                format!(
                    "ARM pointed to {} to follow the operation, which is not {}; not sent",
                    url.split('?').next().unwrap_or(url),
                    self.config.endpoint
                ),
            ));
        }
        let token = self.token().await?;
        let mut req = self
            .http
            .request(method, url)
            .bearer_auth(token)
            .header("Accept", "application/json");
        if let Some(b) = body {
            req = req
                .header("Content-Type", "application/json")
                .body(b.to_string());
        }
        let reply = match req.send().await {
            Ok(r) => r,
            Err(e) => {
                let kind = if e.is_connect() || !mutating {
                    ActErrorKind::Transient
                } else {
                    ActErrorKind::Unknown
                };
                return Err(refuse(
                    api,
                    kind,
                    format!(
                        "{}{}",
                        e.without_url(),
                        if kind == ActErrorKind::Unknown {
                            "; the request was sent and ARM may have acted"
                        } else {
                            ""
                        }
                    ),
                ));
            }
        };
        let status = reply.status().as_u16();
        let headers = reply.headers().clone();
        let rid = request_id(&headers);
        let text = match reply.text().await {
            Ok(t) => t,
            Err(e) => {
                return Err(ActError {
                    request_id: rid,
                    ..refuse(
                        api,
                        if mutating {
                            ActErrorKind::Unknown
                        } else {
                            ActErrorKind::Transient
                        },
                        format!("the answer was cut off: {}", e.without_url()),
                    )
                });
            }
        };
        let body: Value = if text.trim().is_empty() {
            Value::Null
        } else {
            serde_json::from_str(&text).unwrap_or(Value::Null)
        };
        if (200..300).contains(&status) {
            return Ok(Reply {
                status,
                headers,
                body,
                request_id: rid,
            });
        }
        let (code, message) = error_of(&body);
        let kind = classify(status, &code, &message, mutating);
        let mut message = if message.is_empty() {
            format!("HTTP {status}")
        } else {
            message
        };
        if kind == ActErrorKind::Throttled {
            let wait = self
                .retry_after(&headers)
                .unwrap_or(self.config.poll_interval);
            message = format!("{message} (waited the {} s ARM asked)", wait.as_secs());
            tokio::time::sleep(wait).await;
        }
        Err(ActError {
            api: api.into(),
            kind,
            code: (!code.is_empty()).then_some(code),
            message,
            request_id: rid,
        })
    }

    /// A read, repeated here (reads change nothing) on throttling and server errors a few
    /// times, because the operation polls below (and the listings that confirm a pool's VMs
    /// run) cannot hand it back to the caller.
    pub(crate) async fn read_patiently(&self, api: &str, url: &str) -> ActResult<Reply> {
        let mut tries = 0;
        loop {
            match self.send(api, Method::GET, url, None, false).await {
                Err(e)
                    if tries < 5
                        && matches!(e.kind, ActErrorKind::Throttled | ActErrorKind::Transient) =>
                {
                    tries += 1;
                    if e.kind == ActErrorKind::Transient {
                        tokio::time::sleep(self.config.poll_interval).await;
                    }
                }
                other => return other,
            }
        }
    }

    /// Follows the long-running operation `accepted` started (the answer to a PUT, PATCH or
    /// DELETE) until it ends. `Ok(())` when it succeeded; its error, classified, when it
    /// failed; `Unknown` when it cannot be followed to the end (the resource is found by name
    /// later).
    pub(crate) async fn wait_for(&self, api: &str, accepted: &Reply) -> ActResult<()> {
        let async_op = header(&accepted.headers, "azure-asyncoperation");
        let location = header(&accepted.headers, "location");
        let Some(url) = async_op.clone().or(location.clone()) else {
            return Ok(());
        };
        let by_status = async_op.is_some();
        let deadline = tokio::time::Instant::now() + self.config.operation_timeout;
        let mut wait = self
            .retry_after(&accepted.headers)
            .unwrap_or(self.config.poll_interval);
        loop {
            tokio::time::sleep(wait).await;
            let reply = match self.read_patiently(api, &url).await {
                Ok(r) => r,
                Err(e) if !by_status && e.kind != ActErrorKind::Unknown && e.code.is_some() => {
                    // A `Location` poll answers a failed operation with its error.
                    return Err(ActError {
                        api: api.into(),
                        ..e
                    });
                }
                Err(e) => {
                    return Err(ActError {
                        kind: ActErrorKind::Unknown,
                        message: format!(
                            "ARM accepted the request, then following its operation failed: {}",
                            e.message
                        ),
                        ..e
                    });
                }
            };
            wait = self
                .retry_after(&reply.headers)
                .unwrap_or(self.config.poll_interval);
            let done = if by_status {
                match reply.body["status"].as_str().unwrap_or("") {
                    "Succeeded" => true,
                    "Failed" | "Canceled" | "Cancelled" => {
                        let (code, message) = error_of(&reply.body["error"]);
                        return Err(ActError {
                            api: api.into(),
                            kind: if code.is_empty() {
                                ActErrorKind::Other
                            } else {
                                classify(400, &code, &message, false)
                            },
                            code: (!code.is_empty()).then_some(code),
                            message: if message.is_empty() {
                                format!(
                                    "the operation ended {}",
                                    reply.body["status"].as_str().unwrap_or("?")
                                )
                            } else {
                                message
                            },
                            request_id: accepted.request_id.clone(),
                        });
                    }
                    _ => false,
                }
            } else {
                reply.status != 202
            };
            if done {
                return Ok(());
            }
            if tokio::time::Instant::now() >= deadline {
                return Err(refuse(
                    api,
                    ActErrorKind::Unknown,
                    format!(
                        "the operation was still running after {} s; a later run finds what it made by its name",
                        self.config.operation_timeout.as_secs()
                    ),
                ));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_map_onto_the_shared_kinds() {
        use ActErrorKind::*;
        let k = |s, c, m| classify(s, c, m, true);
        assert_eq!(k(409, "AllocationFailed", ""), Capacity);
        assert_eq!(k(200, "ZonalAllocationFailed", ""), Capacity);
        assert_eq!(k(409, "SkuNotAvailable", ""), Capacity);
        assert_eq!(
            k(
                409,
                "OperationNotAllowed",
                "exceeding approved standardNCadsH100v5Family Cores quota"
            ),
            Quota
        );
        assert_eq!(k(409, "OperationNotAllowed", "VMs are associated"), Other);
        assert_eq!(k(429, "TooManyRequests", ""), Throttled);
        assert_eq!(k(403, "AuthorizationFailed", ""), Auth);
        assert_eq!(k(404, "ResourceNotFound", ""), NotFound);
        assert_eq!(k(409, "Conflict", ""), Transient);
        assert_eq!(k(500, "InternalServerError", ""), Unknown);
        assert_eq!(
            classify(503, "ServiceUnavailable", "", false),
            ActErrorKind::Transient
        );
        assert_eq!(k(400, "InvalidParameter", ""), Other);
    }

    #[test]
    fn the_error_envelope_is_read() {
        let body = serde_json::json!({"error": {"code": "AllocationFailed", "message": "no"}});
        assert_eq!(error_of(&body), ("AllocationFailed".into(), "no".into()));
        let op = serde_json::json!({"code": "X", "message": "y"});
        assert_eq!(error_of(&op), ("X".into(), "y".into()));
    }
}
