//! Why a GCP call failed, classified so that callers can tell "retry later" (throttled) from
//! "fix your setup" (credentials, configuration) from "Google said no" from "Google said
//! something gpucap cannot read".

use google_cloud_gax::error::Error as GaxError;
use google_cloud_gax::error::rpc::Code;

#[derive(Debug, thiserror::Error)]
pub enum GcpError {
    #[error("no GCP credentials: {detail}")]
    MissingCredentials { detail: String },
    #[error("`{operation}` was throttled (`{code}`) and still failed after {attempts} attempts")]
    Throttled {
        operation: &'static str,
        code: String,
        attempts: u32,
    },
    #[error("`{operation}` failed: `{code}`: {message}")]
    Api {
        operation: &'static str,
        code: String,
        message: String,
    },
    #[error("`{operation}` could not reach Google: {detail}")]
    Transport {
        operation: &'static str,
        detail: String,
    },
    #[error("`{operation}` returned a response gpucap cannot read: {detail}")]
    Malformed {
        operation: &'static str,
        detail: String,
    },
    #[error("invalid GCP provider configuration: {0}")]
    Config(String),
}

impl gpucap_provider::Throttling for GcpError {
    fn is_throttling(&self) -> bool {
        matches!(self, GcpError::Throttled { .. })
    }

    fn with_attempts(self, attempts: u32) -> Self {
        match self {
            GcpError::Throttled {
                operation, code, ..
            } => GcpError::Throttled {
                operation,
                code,
                attempts,
            },
            other => other,
        }
    }
}

impl GcpError {
    /// What the user can do about it, for the CLI's `hint:` line.
    pub fn hint(&self) -> Option<&'static str> {
        match self {
            GcpError::MissingCredentials { .. } => Some(
                "run `gcloud auth application-default login`, set GOOGLE_APPLICATION_CREDENTIALS, or set GPUCAP_GCP_API_KEY for list prices; or leave `gcp` out of the clouds to price",
            ),
            GcpError::Throttled { .. } => Some("Google is rate-limiting this project; retry later"),
            GcpError::Api { code, .. } if code == "PERMISSION_DENIED" => Some(
                "enable the Cloud Billing and Compute Engine APIs for the project, and check the key's or account's permissions",
            ),
            _ => None,
        }
    }

    /// Classifies a google-cloud-rust error. Throttling is HTTP 429 / `RESOURCE_EXHAUSTED`, or
    /// Compute's HTTP 403 with reason `rateLimitExceeded`.
    pub fn from_gax(operation: &'static str, err: GaxError) -> Self {
        let http = err.http_status_code();
        let payload = err
            .http_payload()
            .map(|p| String::from_utf8_lossy(p).into_owned())
            .unwrap_or_default();
        if let Some(status) = err.status() {
            let code = status.code;
            // Compute's 403 body (`errors[].reason = rateLimitExceeded`) carries no `status`,
            // and the client keeps only its message, so the documented message decides.
            let compute_rate_limit = http == Some(403)
                && status
                    .message
                    .to_ascii_lowercase()
                    .contains("rate limit exceeded");
            if code == Code::ResourceExhausted
                || http == Some(429)
                || compute_rate_limit
                || payload.contains("rateLimitExceeded")
            {
                return GcpError::Throttled {
                    operation,
                    code: code.name().to_string(),
                    attempts: 1,
                };
            }
            return GcpError::Api {
                operation,
                code: code_name(code, http).to_string(),
                message: status.message.clone(),
            };
        }
        match http {
            Some(429) => GcpError::Throttled {
                operation,
                code: "HTTP 429".into(),
                attempts: 1,
            },
            Some(403) if payload.contains("rateLimitExceeded") => GcpError::Throttled {
                operation,
                code: "rateLimitExceeded".into(),
                attempts: 1,
            },
            Some(status) => GcpError::Malformed {
                operation,
                detail: format!("HTTP {status} without a Google error body: {err}"),
            },
            None if err.is_deserialization() => GcpError::Malformed {
                operation,
                detail: err.to_string(),
            },
            None if err.is_authentication() => GcpError::MissingCredentials {
                detail: err.to_string(),
            },
            None => GcpError::Transport {
                operation,
                detail: err.to_string(),
            },
        }
    }
}

/// The status code's name; Compute's REST errors (`{"error": {"code": 403, "errors":
/// [{"reason": "forbidden"}]}}`) carry no `status`, so the client reports `UNKNOWN` and the
/// HTTP status says what it was.
fn code_name(code: Code, http: Option<u16>) -> &'static str {
    if code != Code::Unknown {
        return code.name();
    }
    match http {
        Some(401) => "UNAUTHENTICATED",
        Some(403) => "PERMISSION_DENIED",
        Some(404) => "NOT_FOUND",
        Some(500..=599) => "UNAVAILABLE",
        _ => code.name(),
    }
}
