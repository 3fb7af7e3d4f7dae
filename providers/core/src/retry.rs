//! The one retry policy every provider uses for throttled and transient failures:
//! exponential backoff with jitter (via `backon`), bounded in attempts and delay, retrying only
//! errors whose [`ProviderError::retryable`] says a later try can succeed.

use std::future::Future;
use std::time::Duration;

use backon::{ExponentialBuilder, Retryable};

use crate::ProviderError;

/// How often and how patiently to retry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Delay before the first retry; doubles each time, plus jitter.
    pub min_delay: Duration,
    /// Cap on any one delay.
    pub max_delay: Duration,
    /// Retries after the first attempt.
    pub max_retries: usize,
}

impl RetryPolicy {
    /// For the clouds' public APIs: 0.5 s, 1 s, 2 s, … up to 20 s, six retries (about a
    /// minute in all), which outlasts the per-second token buckets AWS, GCP and Azure use.
    pub const CLOUD_API: RetryPolicy = RetryPolicy {
        min_delay: Duration::from_millis(500),
        max_delay: Duration::from_secs(20),
        max_retries: 6,
    };

    /// Millisecond delays, for tests that replay throttling.
    pub const fn fast(max_retries: usize) -> RetryPolicy {
        RetryPolicy {
            min_delay: Duration::from_millis(1),
            max_delay: Duration::from_millis(5),
            max_retries,
        }
    }

    fn backoff(&self) -> ExponentialBuilder {
        ExponentialBuilder::default()
            .with_min_delay(self.min_delay)
            .with_max_delay(self.max_delay)
            .with_max_times(self.max_retries)
            .with_jitter()
    }

    /// Runs `op` until it succeeds, fails with a non-retryable error, or the retries run out
    /// (then the last error is returned).
    pub async fn run<T, F, Fut>(&self, op: F) -> Result<T, ProviderError>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, ProviderError>>,
    {
        op.retry(self.backoff())
            .sleep(tokio::time::sleep)
            .when(ProviderError::retryable)
            .notify(|err: &ProviderError, delay: Duration| {
                tracing::debug!("{err}; retrying in {:.1}s", delay.as_secs_f64());
            })
            .await
    }
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy::CLOUD_API
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;
    use crate::{Cloud, ErrorKind};

    fn block_on<F: Future>(f: F) -> F::Output {
        tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .expect("runtime")
            .block_on(f)
    }

    #[test]
    fn throttling_is_retried_until_success() {
        let calls = AtomicUsize::new(0);
        let result = block_on(RetryPolicy::fast(5).run(|| async {
            if calls.fetch_add(1, Ordering::SeqCst) < 2 {
                Err(ProviderError::throttled(Cloud::Aws, "RequestLimitExceeded"))
            } else {
                Ok(42)
            }
        }));
        assert_eq!(result.expect("third call succeeds"), 42);
        assert_eq!(calls.load(Ordering::SeqCst), 3);
    }

    #[test]
    fn auth_errors_are_not_retried() {
        let calls = AtomicUsize::new(0);
        let result: Result<(), _> = block_on(RetryPolicy::fast(5).run(|| async {
            calls.fetch_add(1, Ordering::SeqCst);
            Err(ProviderError::auth(Cloud::Gcp, "PERMISSION_DENIED"))
        }));
        assert_eq!(result.expect_err("fails").kind, ErrorKind::Auth);
        assert_eq!(calls.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn retries_are_bounded() {
        let calls = AtomicUsize::new(0);
        let result: Result<(), _> = block_on(RetryPolicy::fast(3).run(|| async {
            calls.fetch_add(1, Ordering::SeqCst);
            Err(ProviderError::throttled(Cloud::Azure, "HTTP 429"))
        }));
        assert_eq!(result.expect_err("gives up").kind, ErrorKind::Throttled);
        assert_eq!(calls.load(Ordering::SeqCst), 4);
    }
}
