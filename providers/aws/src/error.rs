//! Why an AWS call failed, classified so that callers can tell "retry later" (throttled) from
//! "fix your setup" (credentials, configuration) from "AWS said no" from "AWS said something
//! gpucap cannot read".

use aws_sdk_ec2::error::{ProvideErrorMetadata, SdkError};
use aws_smithy_runtime_api::http::Response as HttpResponse;

/// An error and its causes in words, `outer: inner: …`, each said once. Not the SDK's
/// `DisplayErrorContext`, which ends with the error's `Debug` dump (HTTP headers and bodies of
/// credential look-ups): that is for logs, not for people.
pub fn in_words(err: &(dyn std::error::Error + 'static)) -> String {
    let mut words: Vec<String> = Vec::new();
    let mut next = Some(err);
    while let Some(e) = next {
        let text = e.to_string();
        if !text.is_empty() && !words.iter().any(|w| w.contains(&text)) {
            words.push(text);
        }
        next = e.source();
    }
    words.join(": ")
}

/// Error codes AWS uses for throttling (EC2 Query APIs, JSON APIs such as Pricing).
const THROTTLING_CODES: &[&str] = &[
    "RequestLimitExceeded",
    "ThrottlingException",
    "Throttling",
    "TooManyRequestsException",
];

#[derive(Debug, thiserror::Error)]
pub enum AwsError {
    #[error("no AWS credentials found in the default chain: {detail}")]
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
    #[error("`{operation}` could not reach AWS: {detail}")]
    Transport {
        operation: &'static str,
        detail: String,
    },
    #[error("`{operation}` returned a response gpucap cannot read: {detail}")]
    Malformed {
        operation: &'static str,
        detail: String,
    },
    #[error("invalid AWS provider configuration: {0}")]
    Config(String),
}

impl gpucap_provider::Throttling for AwsError {
    fn is_throttling(&self) -> bool {
        matches!(self, AwsError::Throttled { .. })
    }

    fn with_attempts(self, attempts: u32) -> Self {
        match self {
            AwsError::Throttled {
                operation, code, ..
            } => AwsError::Throttled {
                operation,
                code,
                attempts,
            },
            other => other,
        }
    }
}

impl AwsError {
    /// What the user can do about it, for the CLI's `hint:` line.
    pub fn hint(&self) -> Option<&'static str> {
        match self {
            AwsError::MissingCredentials { .. } => Some(
                "set AWS_PROFILE or AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, run `aws sso login`, or leave `aws` out of the clouds to price",
            ),
            AwsError::Throttled { .. } => Some(
                "AWS is rate-limiting this account; retry later or price fewer regions at once",
            ),
            AwsError::Api { code, .. }
                if code.starts_with("Unauthorized") || code == "AccessDeniedException" =>
            {
                Some(
                    "the credentials lack a permission; gpucap needs ec2:Describe*, ec2:GetSpotPlacementScores and pricing:GetProducts (and for quotas servicequotas:GetServiceQuota and servicequotas:GetAWSDefaultServiceQuota)",
                )
            }
            _ => None,
        }
    }

    /// Classifies an SDK error. Throttling is recognised by code or by HTTP 429.
    pub fn from_sdk<E>(operation: &'static str, err: SdkError<E, HttpResponse>) -> Self
    where
        E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
    {
        let detail = || in_words(&err);
        match &err {
            SdkError::ServiceError(service) => {
                let code = err.code().map(str::to_string);
                let status = service.raw().status().as_u16();
                match code {
                    Some(code) if THROTTLING_CODES.contains(&code.as_str()) => {
                        AwsError::Throttled {
                            operation,
                            code,
                            attempts: 1,
                        }
                    }
                    None if status == 429 => AwsError::Throttled {
                        operation,
                        code: "HTTP 429".into(),
                        attempts: 1,
                    },
                    Some(code) => AwsError::Api {
                        operation,
                        code,
                        message: err.message().unwrap_or_default().to_string(),
                    },
                    None => AwsError::Malformed {
                        operation,
                        detail: format!("HTTP {status} without an error code: {}", detail()),
                    },
                }
            }
            SdkError::ResponseError(_) => AwsError::Malformed {
                operation,
                detail: detail(),
            },
            SdkError::ConstructionFailure(_) => AwsError::Config(detail()),
            _ => AwsError::Transport {
                operation,
                detail: detail(),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::in_words;

    #[derive(Debug)]
    struct Outer(Inner);
    #[derive(Debug)]
    struct Inner {
        _headers: &'static str,
    }
    impl std::fmt::Display for Outer {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("an error occurred while loading credentials")
        }
    }
    impl std::fmt::Display for Inner {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("failed to load IMDS session token")
        }
    }
    impl std::error::Error for Outer {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            Some(&self.0)
        }
    }
    impl std::error::Error for Inner {}

    #[test]
    fn an_error_chain_is_words_without_its_debug_dump() {
        let e = Outer(Inner {
            _headers: "server: keryx",
        });
        let words = in_words(&e);
        assert_eq!(
            words,
            "an error occurred while loading credentials: failed to load IMDS session token"
        );
        assert!(!words.contains("keryx") && !words.contains("Inner"));
    }
}
