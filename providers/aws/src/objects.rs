//! [`S3Objects`]: the [`ObjectStore`] of `[state] backend = "s3"`, one bucket through
//! aws-sdk-s3. Each trait call is one S3 request (`GetObject`, `PutObject` with
//! `If-None-Match`/`If-Match`, `DeleteObject` with `If-Match`, `ListObjectsV2` pages), with the
//! SDK's retries off: the state layer decides what to retry from the typed
//! [`ObjectError`] (a 409 `ConditionalRequestConflict` is worth another try, a 412 never
//! blindly), and a conditional write the SDK repeated behind its back could meet its own first
//! attempt.
//!
//! Credentials come from the default AWS chain (environment, profile, SSO, web identity, IMDS),
//! or explicit keys for emulators, and are resolved on the first call, so that commands which
//! never touch the state need none. With an endpoint (moto, MinIO, another S3-compatible
//! store) requests are path-style (`http://host/bucket/key`), which those stores expect.

use std::fmt;
use std::time::Duration;

use aws_config::retry::RetryConfig;
use aws_config::timeout::TimeoutConfig;
use aws_config::{BehaviorVersion, Region};
use aws_sdk_s3::error::{ProvideErrorMetadata, SdkError};
use aws_sdk_s3::primitives::ByteStream;
use aws_smithy_runtime_api::http::Response as HttpResponse;
use gpucap_provider::BoxFuture;
use gpucap_provider::objects::{Object, ObjectError, ObjectFailure, ObjectStore, PutCondition};

use crate::client::load_with_credentials;
use crate::config::StaticCredentials;

/// Where [`S3Objects`] keeps its objects.
#[derive(Debug, Clone)]
pub struct S3Config {
    pub bucket: String,
    /// The bucket's region; `None` takes the default chain's (`AWS_REGION`, the profile).
    pub region: Option<String>,
    /// An S3-compatible endpoint instead of AWS's (moto, MinIO); requests go path-style.
    pub endpoint_url: Option<String>,
    /// Explicit keys instead of the default chain (tests against emulators). Never printed.
    pub static_credentials: Option<StaticCredentials>,
    pub connect_timeout: Duration,
    /// How long one request may take in all; cut off, it is a [`ObjectError::Transient`].
    pub operation_timeout: Duration,
}

impl S3Config {
    pub fn new(bucket: impl Into<String>) -> S3Config {
        S3Config {
            bucket: bucket.into(),
            region: None,
            endpoint_url: None,
            static_credentials: None,
            connect_timeout: Duration::from_secs(10),
            operation_timeout: Duration::from_secs(60),
        }
    }
}

/// One S3 bucket as an [`ObjectStore`].
pub struct S3Objects {
    config: S3Config,
    client: tokio::sync::OnceCell<aws_sdk_s3::Client>,
}

impl fmt::Debug for S3Objects {
    // By hand, so that nothing credential-shaped can ever reach a log line.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("S3Objects")
            .field("bucket", &self.config.bucket)
            .field("region", &self.config.region)
            .field("endpoint_url", &self.config.endpoint_url)
            .field(
                "static_credentials",
                &self.config.static_credentials.is_some(),
            )
            .finish_non_exhaustive()
    }
}

impl S3Objects {
    /// The store, connecting (and resolving credentials) on its first call.
    pub fn new(config: S3Config) -> S3Objects {
        S3Objects {
            config,
            client: tokio::sync::OnceCell::new(),
        }
    }

    /// The store, connected now: fails with [`ObjectError::Auth`] when no credentials resolve.
    pub async fn connect(config: S3Config) -> Result<S3Objects, ObjectError> {
        let s = S3Objects::new(config);
        s.client().await?;
        Ok(s)
    }

    pub fn bucket(&self) -> &str {
        &self.config.bucket
    }

    async fn client(&self) -> Result<&aws_sdk_s3::Client, ObjectError> {
        self.client
            .get_or_try_init(|| build_client(&self.config))
            .await
    }
}

async fn build_client(config: &S3Config) -> Result<aws_sdk_s3::Client, ObjectError> {
    let failure = |m: String| ObjectFailure::new("connect", format!("s3://{}", config.bucket), m);
    let mut loader = aws_config::defaults(BehaviorVersion::latest())
        .retry_config(RetryConfig::disabled())
        .timeout_config(
            TimeoutConfig::builder()
                .connect_timeout(config.connect_timeout)
                .operation_timeout(config.operation_timeout)
                .build(),
        );
    if let Some(region) = &config.region {
        loader = loader.region(Region::new(region.clone()));
    }
    let sdk = load_with_credentials(loader, config.static_credentials.as_ref())
        .await
        .map_err(|detail| {
            ObjectError::Auth(failure(format!(
                "no AWS credentials found in the default chain: {detail}"
            )))
        })?;
    if sdk.region().is_none() {
        return Err(ObjectError::Other(failure(
            "no region for the state bucket: set `[state] region` or AWS_REGION".into(),
        )));
    }
    let mut b = aws_sdk_s3::config::Builder::from(&sdk)
        // Said again per client: a conditional write must never be repeated by the SDK.
        .retry_config(RetryConfig::disabled());
    if let Some(url) = &config.endpoint_url {
        b = b.endpoint_url(url).force_path_style(true);
    }
    Ok(aws_sdk_s3::Client::from_conf(b.build()))
}

/// S3 error codes that mean "slow down".
const THROTTLING: &[&str] = &[
    "SlowDown",
    "Throttling",
    "ThrottlingException",
    "RequestLimitExceeded",
    "TooManyRequestsException",
    "RequestThrottled",
];
const AUTH: &[&str] = &[
    "AccessDenied",
    "InvalidAccessKeyId",
    "SignatureDoesNotMatch",
    "ExpiredToken",
    "InvalidToken",
    "TokenRefreshRequired",
    "AllAccessDisabled",
    "AccountProblem",
];

/// The [`ObjectError`] an S3 failure of `op` on `key` is: by error code first, then by HTTP
/// status. The message is S3's own (code, message, status) or the SDK's description of a
/// failure without an answer; neither carries credentials.
pub fn classify<E>(op: &'static str, key: &str, err: SdkError<E, HttpResponse>) -> ObjectError
where
    E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
{
    match &err {
        SdkError::ServiceError(service) => {
            let status = service.raw().status().as_u16();
            let code = err.code().map(str::to_string);
            let message = match err.message() {
                Some(m) if !m.is_empty() => format!("HTTP {status}: {m}"),
                _ => format!("HTTP {status}"),
            };
            let mut failure = ObjectFailure::new(op, key, message);
            failure.code = code.clone();
            classify_status(status, code.as_deref(), failure)
        }
        SdkError::ConstructionFailure(_) => ObjectError::Other(ObjectFailure::new(
            op,
            key,
            format!(
                "the request could not be built, nothing was sent: {}",
                crate::error::in_words(&err)
            ),
        )),
        // Timeouts, dispatch (connection) failures and unreadable answers: the request may
        // have reached S3.
        _ => ObjectError::Transient(ObjectFailure::new(op, key, crate::error::in_words(&err))),
    }
}

/// The variant for an S3 answer with this status and code.
pub fn classify_status(status: u16, code: Option<&str>, failure: ObjectFailure) -> ObjectError {
    match code {
        Some("PreconditionFailed") => return ObjectError::PreconditionFailed(failure),
        Some("ConditionalRequestConflict" | "OperationAborted") => {
            return ObjectError::ConditionalConflict(failure);
        }
        Some("NoSuchKey" | "NotFound") => return ObjectError::NotFound(failure),
        // The bucket itself is missing: a configuration error, not an absent object.
        Some("NoSuchBucket") => {
            let mut f = failure;
            f.message = format!("{}; does the state bucket exist?", f.message);
            return ObjectError::Other(f);
        }
        Some(c) if THROTTLING.contains(&c) => return ObjectError::Throttled(failure),
        Some(c) if AUTH.contains(&c) => return ObjectError::Auth(failure),
        _ => {}
    }
    match status {
        412 => ObjectError::PreconditionFailed(failure),
        409 => ObjectError::ConditionalConflict(failure),
        404 => ObjectError::NotFound(failure),
        429 | 503 => ObjectError::Throttled(failure),
        401 | 403 => ObjectError::Auth(failure),
        s if s >= 500 => ObjectError::Transient(failure),
        _ => ObjectError::Other(failure),
    }
}

fn missing_etag(op: &'static str, key: &str) -> ObjectError {
    ObjectError::Other(ObjectFailure::new(
        op,
        key,
        "the store answered without an ETag; conditional writes need one",
    ))
}

impl ObjectStore for S3Objects {
    fn url(&self, key: &str) -> String {
        format!("s3://{}/{key}", self.config.bucket)
    }

    fn get<'a>(&'a self, key: &'a str) -> BoxFuture<'a, Result<Option<Object>, ObjectError>> {
        Box::pin(async move {
            let client = self.client().await?;
            let out = match client
                .get_object()
                .bucket(&self.config.bucket)
                .key(key)
                .send()
                .await
            {
                Ok(out) => out,
                Err(e) => {
                    return match classify("get", key, e) {
                        ObjectError::NotFound(_) => Ok(None),
                        other => Err(other),
                    };
                }
            };
            let etag = out
                .e_tag()
                .map(str::to_string)
                .ok_or_else(|| missing_etag("get", key))?;
            let bytes = out.body.collect().await.map_err(|e| {
                ObjectError::Transient(ObjectFailure::new(
                    "get",
                    key,
                    format!("reading the body: {}", crate::error::in_words(&e)),
                ))
            })?;
            Ok(Some(Object {
                bytes: bytes.into_bytes().to_vec(),
                etag,
            }))
        })
    }

    fn put<'a>(
        &'a self,
        key: &'a str,
        bytes: Vec<u8>,
        condition: PutCondition,
    ) -> BoxFuture<'a, Result<String, ObjectError>> {
        Box::pin(async move {
            let client = self.client().await?;
            let mut req = client
                .put_object()
                .bucket(&self.config.bucket)
                .key(key)
                .content_type("application/json")
                .body(ByteStream::from(bytes));
            match condition {
                PutCondition::None => {}
                PutCondition::IfNoneMatch => req = req.if_none_match("*"),
                PutCondition::IfMatch(etag) => req = req.if_match(etag),
            }
            let out = req.send().await.map_err(|e| classify("put", key, e))?;
            out.e_tag()
                .map(str::to_string)
                .ok_or_else(|| missing_etag("put", key))
        })
    }

    fn delete<'a>(
        &'a self,
        key: &'a str,
        if_match: Option<&'a str>,
    ) -> BoxFuture<'a, Result<(), ObjectError>> {
        Box::pin(async move {
            let client = self.client().await?;
            let mut req = client.delete_object().bucket(&self.config.bucket).key(key);
            if let Some(etag) = if_match {
                req = req.if_match(etag);
            }
            req.send().await.map_err(|e| classify("delete", key, e))?;
            Ok(())
        })
    }

    fn list<'a>(&'a self, prefix: &'a str) -> BoxFuture<'a, Result<Vec<String>, ObjectError>> {
        Box::pin(async move {
            let client = self.client().await?;
            let mut keys = Vec::new();
            let mut token: Option<String> = None;
            loop {
                let page = client
                    .list_objects_v2()
                    .bucket(&self.config.bucket)
                    .prefix(prefix)
                    .set_continuation_token(token.clone())
                    .send()
                    .await
                    .map_err(|e| classify("list", prefix, e))?;
                keys.extend(
                    page.contents()
                        .iter()
                        .filter_map(|o| o.key())
                        .map(str::to_string),
                );
                token = page
                    .next_continuation_token()
                    .filter(|t| !t.is_empty())
                    .map(str::to_string);
                if token.is_none() || page.is_truncated() == Some(false) {
                    break;
                }
            }
            // S3 lists in UTF-8 byte order already; S3-compatible stores need not.
            keys.sort();
            Ok(keys)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f() -> ObjectFailure {
        ObjectFailure::new("put", "k", "m")
    }

    #[test]
    fn statuses_and_codes_map_to_variants() {
        use ObjectError as E;
        type Case = (u16, Option<&'static str>, fn(&ObjectError) -> bool);
        let cases: [Case; 12] = [
            (412, Some("PreconditionFailed"), |e| {
                matches!(e, E::PreconditionFailed(_))
            }),
            (412, None, |e| matches!(e, E::PreconditionFailed(_))),
            (409, Some("ConditionalRequestConflict"), |e| {
                matches!(e, E::ConditionalConflict(_))
            }),
            (409, Some("OperationAborted"), |e| {
                matches!(e, E::ConditionalConflict(_))
            }),
            (404, Some("NoSuchKey"), |e| matches!(e, E::NotFound(_))),
            (
                404,
                Some("NoSuchBucket"),
                |e| matches!(e, E::Other(f) if f.message.contains("bucket")),
            ),
            (503, Some("SlowDown"), |e| matches!(e, E::Throttled(_))),
            (429, None, |e| matches!(e, E::Throttled(_))),
            (403, Some("AccessDenied"), |e| matches!(e, E::Auth(_))),
            (400, Some("ExpiredToken"), |e| matches!(e, E::Auth(_))),
            (500, Some("InternalError"), |e| matches!(e, E::Transient(_))),
            (400, Some("InvalidArgument"), |e| matches!(e, E::Other(_))),
        ];
        for (status, code, ok) in cases {
            let e = classify_status(status, code, f());
            assert!(ok(&e), "{status} {code:?} -> {e:?}");
        }
    }
}
