//! Why a provider call failed, classified so that callers can decide what to do about it:
//! retry (throttled, unavailable), skip the cloud with a hint (auth), or report bad data
//! (malformed) — without knowing which SDK or HTTP client produced the error.

use std::fmt;

use serde::Serialize;

use crate::Cloud;

/// The classes of failure every provider maps its errors to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ErrorKind {
    /// The API asked us to slow down (`RequestLimitExceeded`, `ThrottlingException`, HTTP 429).
    Throttled,
    /// A transient server-side or network failure (HTTP 5xx, timeout, connection reset).
    Unavailable,
    /// Missing, expired or insufficient credentials (HTTP 401/403, `UnauthorizedOperation`).
    Auth,
    /// The region, service, SKU or offering does not exist (HTTP 404, `NotFoundException`).
    NotFound,
    /// The response could not be understood (bad JSON/XML, missing fields, unknown units).
    Malformed,
    /// Anything else (bad request, a bug in gpucap's request).
    Other,
}

impl ErrorKind {
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorKind::Throttled => "throttled",
            ErrorKind::Unavailable => "unavailable",
            ErrorKind::Auth => "auth",
            ErrorKind::NotFound => "not found",
            ErrorKind::Malformed => "malformed response",
            ErrorKind::Other => "error",
        }
    }

    /// Whether trying again later can succeed.
    pub fn retryable(self) -> bool {
        matches!(self, ErrorKind::Throttled | ErrorKind::Unavailable)
    }

    /// The class of an HTTP status that is not a success.
    pub fn from_http_status(status: u16) -> ErrorKind {
        match status {
            429 => ErrorKind::Throttled,
            401 | 403 => ErrorKind::Auth,
            404 | 410 => ErrorKind::NotFound,
            408 | 500..=599 => ErrorKind::Unavailable,
            _ => ErrorKind::Other,
        }
    }
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A failed provider call: which cloud and region, what class of failure, and the API's own
/// words.
#[derive(Debug, thiserror::Error)]
pub struct ProviderError {
    pub cloud: Cloud,
    pub region: Option<String>,
    pub kind: ErrorKind,
    pub message: String,
    #[source]
    pub source: Option<Box<dyn std::error::Error + Send + Sync + 'static>>,
}

impl fmt::Display for ProviderError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.cloud)?;
        if let Some(region) = &self.region {
            write!(f, " {region}")?;
        }
        write!(f, ": {}: {}", self.kind, self.message)
    }
}

impl ProviderError {
    pub fn new(cloud: Cloud, kind: ErrorKind, message: impl Into<String>) -> Self {
        ProviderError {
            cloud,
            region: None,
            kind,
            message: message.into(),
            source: None,
        }
    }

    pub fn throttled(cloud: Cloud, message: impl Into<String>) -> Self {
        Self::new(cloud, ErrorKind::Throttled, message)
    }

    pub fn auth(cloud: Cloud, message: impl Into<String>) -> Self {
        Self::new(cloud, ErrorKind::Auth, message)
    }

    pub fn not_found(cloud: Cloud, message: impl Into<String>) -> Self {
        Self::new(cloud, ErrorKind::NotFound, message)
    }

    pub fn malformed(cloud: Cloud, message: impl Into<String>) -> Self {
        Self::new(cloud, ErrorKind::Malformed, message)
    }

    /// Names the region the call was for.
    pub fn in_region(mut self, region: impl Into<String>) -> Self {
        self.region = Some(region.into());
        self
    }

    /// Keeps the underlying error for `caused by:` chains.
    pub fn with_source(mut self, source: impl std::error::Error + Send + Sync + 'static) -> Self {
        self.source = Some(Box::new(source));
        self
    }

    /// Whether trying again later can succeed.
    pub fn retryable(&self) -> bool {
        self.kind.retryable()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_throttling_and_outages_are_retried() {
        assert!(ErrorKind::from_http_status(429).retryable());
        assert!(ErrorKind::from_http_status(503).retryable());
        for status in [400, 401, 403, 404] {
            assert!(!ErrorKind::from_http_status(status).retryable(), "{status}");
        }
        assert_eq!(ErrorKind::from_http_status(403), ErrorKind::Auth);
    }

    #[test]
    fn display_names_cloud_region_and_class() {
        let err = ProviderError::throttled(Cloud::Azure, "HTTP 429").in_region("eastus");
        assert_eq!(err.to_string(), "azure eastus: throttled: HTTP 429");
    }
}
