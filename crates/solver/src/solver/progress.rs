//! What the solver says while it works, for a caller that shows progress: which pool it is on,
//! how large its model is, and how each pool ended (status, cost, proven bound, time). A narrow
//! observer, so the solver stays pure and the CLI decides whether and how to show it (a spinner
//! on a terminal, lines at `-v`, nothing in tests).
//!
//! The granularity is the pool: Cbc runs each pool's branch and bound in one call with no
//! callback into Rust, so node counts and incumbents inside a pool are not reported.

use std::sync::Arc;

/// Receives the solver's progress. Called from the solver's worker threads.
pub trait SolveObserver: Send + Sync {
    /// A pool's model is built and handed to the MIP engine.
    fn pool_started(&self, _pool: &PoolStarted<'_>) {}
    /// The MIP engine returned for a pool.
    fn pool_finished(&self, _pool: &PoolFinished<'_>) {}
}

/// A pool about to be solved.
#[derive(Debug, Clone, Copy)]
pub struct PoolStarted<'a> {
    pub pool: &'a str,
    pub columns: usize,
    pub rows: usize,
}

/// How a pool's solve ended.
#[derive(Debug, Clone, Copy)]
pub struct PoolFinished<'a> {
    pub pool: &'a str,
    /// `optimal`, `feasible` (stopped at the time limit with a plan), `no plan yet` (stopped
    /// without one) or `infeasible`.
    pub status: &'static str,
    /// The cost of the plan found, when there is one (the solver's objective).
    pub cost: Option<f64>,
    /// The proven lower bound on the pool's cost.
    pub bound: f64,
    pub seconds: f64,
}

/// An optional observer in [`super::SolveOptions`].
#[derive(Clone, Default)]
pub struct Observer(Option<Arc<dyn SolveObserver>>);

impl Observer {
    pub fn new(observer: Arc<dyn SolveObserver>) -> Observer {
        Observer(Some(observer))
    }

    pub(crate) fn started(&self, pool: PoolStarted<'_>) {
        if let Some(o) = &self.0 {
            o.pool_started(&pool);
        }
    }

    pub(crate) fn finished(&self, pool: PoolFinished<'_>) {
        if let Some(o) = &self.0 {
            o.pool_finished(&pool);
        }
    }
}

impl std::fmt::Debug for Observer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.is_some() {
            "Observer(..)"
        } else {
            "Observer(None)"
        })
    }
}
