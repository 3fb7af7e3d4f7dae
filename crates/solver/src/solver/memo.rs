//! Pools already solved on their own, for another solve of a problem that differs only
//! elsewhere. `gpucap plan` solves a problem again without its quotas, to see what more quota
//! would do; a pool whose prepared data ([`PoolData`]) is the same in both is the same program
//! (the model is built from that data alone), so it has the same answer. With costs per
//! purchase such a pool takes seconds: 7 of the quickstart's 16 s went to solving `h100-us` a
//! second time (release build, measured 2026-11-25).
//!
//! Only whole answers are kept: a plan from a solve that ended before the time limit. A solve
//! cut short by the limit might end elsewhere with more time, and one without a plan is
//! explained in words that name the problem's offers.

use std::sync::{Arc, Mutex, PoisonError};

use super::PoolOutcome;
use super::pool::PoolData;
use super::progress::PoolFinished;

/// The pools solved so far, shared by every clone of the [`super::SolveOptions`] that carry
/// it: a fresh one forgets everything.
#[derive(Clone, Default)]
pub struct Memo(Arc<Mutex<Vec<Solved>>>);

/// One pool's solve, as the observer was told of it.
#[derive(Clone)]
pub(crate) struct Solved {
    pub data: PoolData,
    pub rel_gap: f64,
    pub outcome: PoolOutcome,
    pub columns: usize,
    pub rows: usize,
    pub status: &'static str,
    pub cost: Option<f64>,
    pub bound: f64,
}

impl Solved {
    /// What the observer is told when the pool is answered from memory.
    pub fn finished<'a>(&self, pool: &'a str) -> PoolFinished<'a> {
        PoolFinished {
            pool,
            status: self.status,
            cost: self.cost,
            bound: self.bound,
            seconds: 0.0,
        }
    }
}

impl Memo {
    /// The solve of a pool with exactly this data, to this relative gap.
    pub(crate) fn get(&self, data: &PoolData, rel_gap: f64) -> Option<Solved> {
        let solved = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        solved
            .iter()
            .find(|s| s.rel_gap == rel_gap && s.data == *data)
            .cloned()
    }

    pub(crate) fn put(&self, solved: Solved) {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(solved);
    }

    pub(crate) fn len(&self) -> usize {
        self.0.lock().unwrap_or_else(PoisonError::into_inner).len()
    }
}

impl std::fmt::Debug for Memo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Memo({} pools solved)", self.len())
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use crate::problem::{parse, validate};
    use crate::solver::{SolveOptions, solve};

    const SHARED_QUOTA: &str =
        include_str!("../../../../tests/fixtures/problems/shared-quota.json");

    #[test]
    fn a_pool_with_the_same_data_is_answered_again_and_a_changed_one_is_solved() {
        let problem = parse(SHARED_QUOTA, Path::new("shared-quota.json")).expect("parses");
        let options = SolveOptions::default();
        let first = solve(&validate(problem.clone()).expect("valid"), &options);
        // Both pools are solved alone before their quota joins them.
        assert_eq!(options.memo.len(), 2);

        // Without the quota (as `gpucap plan` solves again): the same two pools, remembered.
        let mut relaxed = problem.clone();
        relaxed.shared_limits.clear();
        let again = solve(&validate(relaxed.clone()).expect("valid"), &options);
        assert_eq!(options.memo.len(), 2, "both pools answered from memory");
        assert!((again.expected_cost - 60_480.0).abs() < 1e-6, "{again:?}");
        assert!(first.expected_cost > again.expected_cost);

        // West's on-demand dearer: west is solved again, east is not.
        let west = relaxed
            .offers
            .iter()
            .position(|o| o.id == "west/on-demand")
            .expect("west/on-demand");
        relaxed.offers[west].price_per_instance_hour += 1.0;
        let changed = solve(&validate(relaxed.clone()).expect("valid"), &options);
        assert_eq!(options.memo.len(), 3);
        let fresh = solve(&validate(relaxed).expect("valid"), &SolveOptions::default());
        assert_eq!(changed.expected_cost, fresh.expected_cost);
        assert_eq!(changed.purchases, fresh.purchases);
        assert!(changed.expected_cost > again.expected_cost);
    }
}
