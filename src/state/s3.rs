//! `[state] backend = "s3"`: an [`ObjectBackend`] on the AWS crate's `S3Objects`, built from
//! the `[state]` settings. This is the only place the engine names S3; the SDK stays in
//! `gpucap-aws`. A build without the `aws` feature says so instead.

use crate::config::StateSettings;

use super::StateBackend;
use super::error::StateError;

/// Points the S3 backend at another endpoint (a test server), over `[state] endpoint`.
pub const ENDPOINT_ENV: &str = "GPUCAP_S3_ENDPOINT";

/// The endpoint: `GPUCAP_S3_ENDPOINT` when set and not empty, else `[state] endpoint`.
pub fn endpoint(settings: &StateSettings) -> Option<String> {
    std::env::var(ENDPOINT_ENV)
        .ok()
        .filter(|v| !v.trim().is_empty())
        .or_else(|| settings.endpoint.clone())
}

/// The S3 backend `settings` describe (validated by the config: bucket and key are set).
/// Credentials are resolved on its first call, from the default AWS chain.
#[cfg(feature = "aws")]
pub fn open(settings: &StateSettings) -> Result<Box<dyn StateBackend>, StateError> {
    use std::sync::Arc;

    let (Some(bucket), Some(key)) = (&settings.bucket, &settings.key) else {
        return Err(StateError::BackendUnavailable {
            backend: "s3",
            message: "needs `bucket` and `key` in `[state]`".to_string(),
        });
    };
    let config = gpucap_aws::S3Config {
        region: settings.region.clone(),
        endpoint_url: endpoint(settings),
        ..gpucap_aws::S3Config::new(bucket.trim())
    };
    let store = Arc::new(gpucap_aws::S3Objects::new(config));
    let mut backend = super::ObjectBackend::new(store, key);
    if let Some(lease) = settings.lock_lease {
        backend = backend.with_lease(lease);
    }
    Ok(Box::new(backend))
}

/// This build has no S3 client.
#[cfg(not(feature = "aws"))]
pub fn open(_settings: &StateSettings) -> Result<Box<dyn StateBackend>, StateError> {
    Err(StateError::BackendUnavailable {
        backend: "s3",
        message: "needs the `aws` feature, which this gpucap was built without; build it with `cargo build --features aws` (on by default), or use `backend = \"local\"`".to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::StateBackendKind;

    fn settings() -> StateSettings {
        StateSettings {
            backend: StateBackendKind::S3,
            bucket: Some("acme-state".into()),
            key: Some("gpucap/prod/state.json".into()),
            ..StateSettings::default()
        }
    }

    /// Opening connects to nothing: the location is known before any request.
    #[cfg(feature = "aws")]
    #[test]
    fn the_s3_backend_is_at_s3_bucket_key() {
        let backend = open(&settings()).unwrap();
        assert_eq!(backend.location(), "s3://acme-state/gpucap/prod/state.json");
        let via_config = super::super::backend::open(&settings(), std::path::Path::new("/repo"));
        assert_eq!(
            via_config.unwrap().location(),
            "s3://acme-state/gpucap/prod/state.json"
        );
    }

    #[cfg(not(feature = "aws"))]
    #[test]
    fn a_build_without_aws_says_it_lacks_the_s3_backend() {
        let err = open(&settings()).err().expect("refused").to_string();
        assert!(
            err.contains("`s3` state backend") && err.contains("`aws` feature"),
            "{err}"
        );
    }
}
