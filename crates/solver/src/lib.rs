//! gpucap's planning problem and its solver, apart from everything that reads inputs, prices
//! offers or acts on a cloud.
//!
//! [`problem`] is the contract: the `gpucap.problem` and `gpucap.solution` documents
//! (`docs/problem-v1.md`, `docs/problem-v2.md`), parsed and validated. [`solver`] answers a
//! validated problem with the proven-optimal purchase plan. Both are pure: no file, network or
//! clock besides the solver's time limit. The crate builds and tests on its own
//! (`cargo test -p gpucap-solver`), without the cloud SDKs or the policy engine.

pub mod problem;
pub mod solver;

// The ground modules under the names the solver's code has always used (`crate::limits`).
use gpucap_ground::{diagnostic, limits, text, timespec};
