//! The planner: demand and offers in, a `gpucap.problem/v1` out. Pure: the caller gathers the
//! offers, the existing capacity and the clock.

pub mod existing;

pub use existing::ExistingCapacity;
