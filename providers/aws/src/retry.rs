//! Retrying throttled AWS calls with exponential backoff and jitter (backon). The SDKs' own
//! retries are switched off (see `client`), so how often and how long gpucap waits is decided
//! here, in one place, and is testable with short delays.

use std::future::Future;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use backon::{ExponentialBuilder, Retryable};

use crate::error::AwsError;

/// How throttled calls are retried.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Tries in total, the first included.
    pub max_attempts: u32,
    pub min_delay: Duration,
    pub max_delay: Duration,
}

impl Default for RetryPolicy {
    /// EC2 refills its request token buckets every second, so waits from 0.5 s up to 20 s
    /// over six tries ride out a busy minute without stalling a run for long.
    fn default() -> Self {
        RetryPolicy {
            max_attempts: 6,
            min_delay: Duration::from_millis(500),
            max_delay: Duration::from_secs(20),
        }
    }
}

/// Runs `call` until it succeeds, fails for a reason other than throttling, or runs out of
/// attempts; a final throttling error reports how many attempts were made.
pub async fn throttled<T, F, Fut>(policy: RetryPolicy, mut call: F) -> Result<T, AwsError>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, AwsError>>,
{
    let attempts = AtomicU32::new(0);
    let backoff = ExponentialBuilder::default()
        .with_min_delay(policy.min_delay)
        .with_max_delay(policy.max_delay)
        .with_max_times(policy.max_attempts.saturating_sub(1) as usize)
        .with_jitter();
    let result = (|| {
        attempts.fetch_add(1, Ordering::Relaxed);
        call()
    })
    .retry(backoff)
    .when(AwsError::is_throttling)
    .notify(|e, wait| tracing::debug!("{e}; retrying in {wait:?}"))
    .await;
    result.map_err(|e| match e {
        AwsError::Throttled {
            operation, code, ..
        } => AwsError::Throttled {
            operation,
            code,
            attempts: attempts.load(Ordering::Relaxed),
        },
        other => other,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fast(max_attempts: u32) -> RetryPolicy {
        RetryPolicy {
            max_attempts,
            min_delay: Duration::from_millis(1),
            max_delay: Duration::from_millis(2),
        }
    }

    fn throttle() -> AwsError {
        AwsError::Throttled {
            operation: "Op",
            code: "RequestLimitExceeded".into(),
            attempts: 1,
        }
    }

    #[tokio::test]
    async fn retries_throttling_until_success() {
        let mut n = 0;
        let r = throttled(fast(5), || {
            n += 1;
            let out = if n < 3 { Err(throttle()) } else { Ok(n) };
            async move { out }
        })
        .await;
        assert_eq!(r.unwrap(), 3);
    }

    #[tokio::test]
    async fn gives_up_and_counts_attempts() {
        let r: Result<(), _> = throttled(fast(4), || async { Err(throttle()) }).await;
        assert!(
            matches!(r, Err(AwsError::Throttled { attempts: 4, .. })),
            "{r:?}"
        );
    }

    #[tokio::test]
    async fn other_errors_are_not_retried() {
        let mut n = 0;
        let r: Result<(), _> = throttled(fast(4), || {
            n += 1;
            async { Err(AwsError::Config("x".into())) }
        })
        .await;
        assert!(r.is_err());
        assert_eq!(n, 1);
    }
}
