//! Turns an SDK failure into an [`ActError`], the one question that matters first being
//! "may AWS have acted?". An answer with an error code says exactly what happened; a
//! request that was sent but got no readable answer (timeout, reset, dropped connection,
//! a 5xx without a known code) is [`ActErrorKind::Unknown`], which the caller must reconcile
//! by tag before anything else; a request that could not even be built is
//! [`ActErrorKind::Transient`]: nothing was sent.
//!
//! Nothing here retries; throttling is only named.

use aws_sdk_ec2::error::{ProvideErrorMetadata, SdkError};
use aws_sdk_ec2::operation::RequestId;
use aws_smithy_runtime_api::http::Response as HttpResponse;
use gpucap_provider::capacity::{ActError, ActErrorKind};

/// No capacity for that type and place now (Karpenter's ICE list, less the quota codes).
const CAPACITY: &[&str] = &[
    "InsufficientInstanceCapacity",
    "InsufficientCapacity",
    "ReservationCapacityExceeded",
    "UnfulfillableCapacity",
    "Unsupported",
    "InsufficientReservedInstanceCapacity",
];
/// Throttling codes of EC2 (`RequestLimitExceeded`), Auto Scaling (`Throttling`) and the
/// others `aws-runtime` knows.
const THROTTLING: &[&str] = &[
    "RequestLimitExceeded",
    "Throttling",
    "ThrottlingException",
    "ThrottledException",
    "EC2ThrottledException",
    "TooManyRequestsException",
    "RequestThrottled",
    "RequestThrottledException",
    "SlowDown",
    "PriorRequestNotComplete",
];
const AUTH: &[&str] = &[
    "UnauthorizedOperation",
    "AuthFailure",
    "AccessDenied",
    "AccessDeniedException",
    "InvalidClientTokenId",
    "SignatureDoesNotMatch",
    "ExpiredToken",
    "OptInRequired",
];

/// The quota an account limit code is about, for the message.
fn quota_name(code: &str) -> Option<&'static str> {
    Some(match code {
        "InstanceLimitExceeded" => {
            "the EC2 instance limit (Service Quotas: Running On-Demand instances of the family)"
        }
        "VcpuLimitExceeded" => {
            "the vCPU limit (Service Quotas: Running On-Demand <family> instances, in vCPUs)"
        }
        "MaxSpotInstanceCountExceeded" => {
            "the Spot limit (Service Quotas: All <family> Spot Instance Requests)"
        }
        "CapacityReservationLimitExceeded" | "ReservationLimitExceeded" => {
            "the Capacity Reservation limit of the account"
        }
        "LimitExceeded" => "an Auto Scaling limit (groups or launch configurations per region)",
        "LaunchTemplateLimitExceeded" => "the launch template limit of the account",
        _ => return None,
    })
}

/// The kind an AWS error code means, independent of the HTTP status.
pub fn kind_of_code(code: &str) -> Option<ActErrorKind> {
    Some(if CAPACITY.contains(&code) {
        ActErrorKind::Capacity
    } else if quota_name(code).is_some() {
        ActErrorKind::Quota
    } else if THROTTLING.contains(&code) {
        ActErrorKind::Throttled
    } else if code.starts_with("InvalidCapacityBlockOfferingId") {
        // …Expired, …NotFound, …Malformed: the quote is no good any more; re-quote.
        ActErrorKind::OfferExpired
    } else if code == "IdempotentParameterMismatch" {
        ActErrorKind::IdempotencyConflict
    } else if code == "DryRunOperation" {
        ActErrorKind::DryRunOk
    } else if AUTH.contains(&code) {
        ActErrorKind::Auth
    } else if code.ends_with(".NotFound")
        || code.ends_with("NotFoundException")
        || code.ends_with("NotFound")
    {
        ActErrorKind::NotFound
    } else {
        return None;
    })
}

/// Classifies a failed call of `api`.
pub fn classify<E>(api: &str, err: SdkError<E, HttpResponse>) -> ActError
where
    E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
{
    let detail = crate::error::in_words(&err);
    let request_id = request_id(&err);
    let (kind, code, message) = match &err {
        SdkError::ServiceError(service) => {
            let status = service.raw().status().as_u16();
            let code = err.code().map(str::to_string);
            let aws_message = err.message().unwrap_or_default().to_string();
            let kind = match code.as_deref().and_then(kind_of_code) {
                Some(kind) => kind,
                None if status == 429 => ActErrorKind::Throttled,
                // EC2 documents no 5xx as "not applied": the call may have been carried out.
                None if status >= 500 => ActErrorKind::Unknown,
                None => ActErrorKind::Other,
            };
            let message = match (kind, code.as_deref()) {
                (ActErrorKind::Quota, Some(c)) => format!(
                    "{} is too small: {aws_message}",
                    quota_name(c).unwrap_or("an account quota")
                ),
                (ActErrorKind::Unknown, _) => format!(
                    "HTTP {status} after the request was sent; AWS may have acted, reconcile by tag before anything else: {}",
                    if aws_message.is_empty() {
                        &detail
                    } else {
                        &aws_message
                    }
                ),
                _ if aws_message.is_empty() => format!("HTTP {status}: {detail}"),
                _ => aws_message,
            };
            (kind, code, message)
        }
        SdkError::ConstructionFailure(_) => (
            ActErrorKind::Transient,
            None,
            format!("the request could not be built, nothing was sent: {detail}"),
        ),
        // Timeouts, dispatch (IO, connection) failures and unreadable answers all happen after
        // the request may have reached AWS.
        _ => (
            ActErrorKind::Unknown,
            None,
            format!(
                "no usable answer after the request was sent; AWS may have acted, reconcile by tag before anything else: {detail}"
            ),
        ),
    };
    ActError {
        api: api.to_string(),
        kind,
        code,
        message,
        request_id,
    }
}

/// The request id from the `x-amzn-requestid` header, else from the error body
/// (`<RequestID>` in EC2's envelope, `<RequestId>` in Auto Scaling's).
fn request_id<E>(err: &SdkError<E, HttpResponse>) -> Option<String> {
    if let Some(id) = err.request_id() {
        return Some(id.to_string());
    }
    let raw = match err {
        SdkError::ServiceError(e) => e.raw(),
        SdkError::ResponseError(e) => e.raw(),
        _ => return None,
    };
    let body = std::str::from_utf8(raw.body().bytes()?).ok()?;
    ["<RequestID>", "<RequestId>", "<requestId>"]
        .iter()
        .find_map(|open| {
            let start = body.find(open)? + open.len();
            let end = body[start..].find('<')? + start;
            Some(body[start..end].trim().to_string())
        })
        .filter(|id| !id.is_empty())
}

/// An error gpucap raises itself, before or instead of a call.
pub(crate) fn refuse(api: &str, kind: ActErrorKind, message: impl Into<String>) -> ActError {
    ActError {
        api: api.to_string(),
        kind,
        code: None,
        message: message.into(),
        request_id: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_map_to_kinds() {
        use ActErrorKind::*;
        let cases = [
            ("InsufficientInstanceCapacity", Capacity),
            ("ReservationCapacityExceeded", Capacity),
            ("UnfulfillableCapacity", Capacity),
            ("Unsupported", Capacity),
            ("InstanceLimitExceeded", Quota),
            ("VcpuLimitExceeded", Quota),
            ("MaxSpotInstanceCountExceeded", Quota),
            ("RequestLimitExceeded", Throttled),
            ("Throttling", Throttled),
            ("InvalidCapacityBlockOfferingIdExpired", OfferExpired),
            ("InvalidCapacityBlockOfferingIdNotFound", OfferExpired),
            ("InvalidCapacityBlockOfferingIdMalformed", OfferExpired),
            ("IdempotentParameterMismatch", IdempotencyConflict),
            ("DryRunOperation", DryRunOk),
            ("UnauthorizedOperation", Auth),
            ("AuthFailure", Auth),
            ("InvalidCapacityReservationId.NotFound", NotFound),
            ("InvalidLaunchTemplateName.NotFoundException", NotFound),
        ];
        for (code, kind) in cases {
            assert_eq!(kind_of_code(code), Some(kind), "{code}");
        }
        assert_eq!(kind_of_code("InvalidParameterValue"), None);
    }
}
