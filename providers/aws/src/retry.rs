//! Retrying throttled AWS calls. The SDKs' own retries are switched off (see `client`), so how
//! often and how long gpucap waits is decided here, with AWS's delays, by the one backoff loop
//! in core ([`RetryPolicy::run_when`]); tests shorten the delays with [`RetryPolicy::fast`].

use std::future::Future;
use std::time::Duration;

pub use gpucap_provider::RetryPolicy;

use crate::error::AwsError;

/// EC2 refills its request token buckets every second, so waits from 0.5 s up to 20 s over six
/// tries ride out a busy minute without stalling a run for long.
pub const DEFAULT_POLICY: RetryPolicy = RetryPolicy {
    min_delay: Duration::from_millis(500),
    max_delay: Duration::from_secs(20),
    max_retries: 5,
};

/// Runs `call` until it succeeds, fails for a reason other than throttling, or runs out of
/// attempts; a final throttling error reports how many attempts were made.
pub async fn throttled<T, F, Fut>(policy: RetryPolicy, call: F) -> Result<T, AwsError>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, AwsError>>,
{
    let (result, attempts) = policy.run_when(call, AwsError::is_throttling).await;
    result.map_err(|e| match e {
        AwsError::Throttled {
            operation, code, ..
        } => AwsError::Throttled {
            operation,
            code,
            attempts,
        },
        other => other,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn throttle() -> AwsError {
        AwsError::Throttled {
            operation: "Op",
            code: "RequestLimitExceeded".into(),
            attempts: 1,
        }
    }

    #[test]
    fn default_policy_makes_six_attempts() {
        assert_eq!(DEFAULT_POLICY.max_retries + 1, 6);
    }

    #[tokio::test]
    async fn retries_throttling_until_success() {
        let mut n = 0;
        let r = throttled(RetryPolicy::fast(4), || {
            n += 1;
            let out = if n < 3 { Err(throttle()) } else { Ok(n) };
            async move { out }
        })
        .await;
        assert_eq!(r.unwrap(), 3);
    }

    #[tokio::test]
    async fn gives_up_and_counts_attempts() {
        let r: Result<(), _> = throttled(RetryPolicy::fast(3), || async { Err(throttle()) }).await;
        assert!(
            matches!(r, Err(AwsError::Throttled { attempts: 4, .. })),
            "{r:?}"
        );
    }

    #[tokio::test]
    async fn other_errors_are_not_retried() {
        let mut n = 0;
        let r: Result<(), _> = throttled(RetryPolicy::fast(3), || {
            n += 1;
            async { Err(AwsError::Config("x".into())) }
        })
        .await;
        assert!(r.is_err());
        assert_eq!(n, 1);
    }
}
