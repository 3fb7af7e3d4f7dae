//! Retrying throttled GCP calls. The SDKs' own retries are switched off (see `client`), so how
//! often and how long gpucap waits is decided here, with GCP's delays, by the one backoff loop
//! in core ([`RetryPolicy::run_when`]); tests shorten the delays with [`RetryPolicy::fast`].

use std::future::Future;
use std::time::Duration;

pub use gpucap_provider::RetryPolicy;

use crate::error::GcpError;

/// Billing and Compute quotas are per minute, so waits from 1 s up to 30 s over six tries reach
/// into the next quota window without stalling a run for long.
pub const DEFAULT_POLICY: RetryPolicy = RetryPolicy {
    min_delay: Duration::from_secs(1),
    max_delay: Duration::from_secs(30),
    max_retries: 5,
};

/// Runs `call` until it succeeds, fails for a reason other than throttling, or runs out of
/// attempts; a final throttling error reports how many attempts were made.
pub async fn throttled<T, F, Fut>(policy: RetryPolicy, call: F) -> Result<T, GcpError>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, GcpError>>,
{
    policy.run_throttled(call).await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn throttle() -> GcpError {
        GcpError::Throttled {
            operation: "Op",
            code: "RESOURCE_EXHAUSTED".into(),
            attempts: 1,
        }
    }

    #[test]
    fn default_policy_makes_six_attempts() {
        assert_eq!(DEFAULT_POLICY.max_retries + 1, 6);
    }

    #[tokio::test]
    async fn gives_up_and_counts_attempts() {
        let r: Result<(), _> = throttled(RetryPolicy::fast(3), || async { Err(throttle()) }).await;
        assert!(
            matches!(r, Err(GcpError::Throttled { attempts: 4, .. })),
            "{r:?}"
        );
    }
}
