//! The one retry loop every provider uses for throttled and transient failures: exponential
//! backoff with jitter (via `backon`), bounded in attempts and delay. [`RetryPolicy::run`]
//! retries the errors whose [`ProviderError::retryable`] says a later try can succeed;
//! [`RetryPolicy::run_when`] is the same loop for a provider's own error type, and
//! [`RetryPolicy::run_throttled`] retries a [`Throttling`] error type's throttling errors and
//! records in the final one how many attempts were made (the AWS and GCP crates use it).

use std::fmt::Display;
use std::future::Future;
use std::sync::atomic::{AtomicU32, Ordering};
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
        self.run_when(op, ProviderError::retryable).await.0
    }

    /// Runs `op` until it succeeds, fails with an error `retryable` rejects, or the retries run
    /// out (then the last error is returned). Also returns how many times `op` was called, so
    /// that a final error can say how hard gpucap tried.
    pub async fn run_when<T, E, F, Fut, R>(&self, mut op: F, retryable: R) -> (Result<T, E>, u32)
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, E>>,
        E: Display,
        R: Fn(&E) -> bool,
    {
        // Atomic rather than `Cell`, so the future stays `Send` for multi-threaded runtimes.
        let attempts = AtomicU32::new(0);
        let result = (|| {
            attempts.fetch_add(1, Ordering::Relaxed);
            op()
        })
        .retry(self.backoff())
        .sleep(tokio::time::sleep)
        .when(retryable)
        .notify(|err: &E, delay: Duration| {
            tracing::debug!("{err}; retrying in {:.1}s", delay.as_secs_f64());
        })
        .await;
        (result, attempts.into_inner())
    }
}

/// A provider error that may mean "throttled", and can say how many attempts were made.
pub trait Throttling: Sized {
    fn is_throttling(&self) -> bool;
    /// The same error, reporting `attempts` if it is a throttling error.
    fn with_attempts(self, attempts: u32) -> Self;
}

impl RetryPolicy {
    /// Runs `call` until it succeeds, fails for a reason other than throttling, or runs out of
    /// attempts; a final throttling error reports how many attempts were made.
    pub async fn run_throttled<T, E, F, Fut>(&self, call: F) -> Result<T, E>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, E>>,
        E: Throttling + Display,
    {
        let (result, attempts) = self.run_when(call, E::is_throttling).await;
        result.map_err(|e| e.with_attempts(attempts))
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

    /// A provider's own error type, as the AWS and GCP crates have.
    #[derive(Debug, PartialEq, Eq)]
    enum CloudError {
        Busy,
        Denied,
    }

    impl Display for CloudError {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            write!(f, "{self:?}")
        }
    }

    fn busy(err: &CloudError) -> bool {
        *err == CloudError::Busy
    }

    #[test]
    fn run_when_retries_until_success_and_counts_attempts() {
        let calls = AtomicUsize::new(0);
        let (result, attempts) = block_on(RetryPolicy::fast(5).run_when(
            || async {
                if calls.fetch_add(1, Ordering::SeqCst) < 2 {
                    Err(CloudError::Busy)
                } else {
                    Ok(42)
                }
            },
            busy,
        ));
        assert_eq!(result, Ok(42));
        assert_eq!(attempts, 3);
        assert_eq!(calls.load(Ordering::SeqCst), 3);
    }

    #[test]
    fn run_when_stops_on_an_error_it_does_not_retry() {
        let calls = AtomicUsize::new(0);
        let (result, attempts): (Result<(), _>, _) = block_on(RetryPolicy::fast(5).run_when(
            || async {
                calls.fetch_add(1, Ordering::SeqCst);
                Err(CloudError::Denied)
            },
            busy,
        ));
        assert_eq!(result, Err(CloudError::Denied));
        assert_eq!(attempts, 1);
        assert_eq!(calls.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn run_when_gives_up_after_max_retries_and_reports_attempts() {
        let calls = AtomicUsize::new(0);
        let (result, attempts): (Result<(), _>, _) = block_on(RetryPolicy::fast(3).run_when(
            || async {
                calls.fetch_add(1, Ordering::SeqCst);
                Err(CloudError::Busy)
            },
            busy,
        ));
        assert_eq!(result, Err(CloudError::Busy));
        assert_eq!(attempts, 4);
        assert_eq!(calls.load(Ordering::SeqCst), 4);
    }

    #[derive(Debug, PartialEq)]
    enum Flaky {
        Throttled(u32),
        Broken,
    }

    impl std::fmt::Display for Flaky {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            write!(f, "{self:?}")
        }
    }

    impl Throttling for Flaky {
        fn is_throttling(&self) -> bool {
            matches!(self, Flaky::Throttled(_))
        }
        fn with_attempts(self, attempts: u32) -> Self {
            match self {
                Flaky::Throttled(_) => Flaky::Throttled(attempts),
                other => other,
            }
        }
    }

    #[tokio::test]
    async fn throttling_is_retried_until_success_and_other_errors_are_not() {
        let mut n = 0;
        let ok = RetryPolicy::fast(4)
            .run_throttled(|| {
                n += 1;
                let out = if n < 3 {
                    Err(Flaky::Throttled(1))
                } else {
                    Ok(n)
                };
                async move { out }
            })
            .await;
        assert_eq!(ok, Ok(3));
        let mut m = 0;
        let broken: Result<(), Flaky> = RetryPolicy::fast(4)
            .run_throttled(|| {
                m += 1;
                async { Err(Flaky::Broken) }
            })
            .await;
        assert_eq!((broken, m), (Err(Flaky::Broken), 1));
        let gave_up: Result<(), Flaky> = RetryPolicy::fast(2)
            .run_throttled(|| async { Err(Flaky::Throttled(1)) })
            .await;
        assert_eq!(gave_up, Err(Flaky::Throttled(3)));
    }
}
