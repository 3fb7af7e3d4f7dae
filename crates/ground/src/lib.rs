//! The ground every other gpucap crate stands on: what it takes to report bad input
//! ([`diagnostic`]), the bounds on every number gpucap reads ([`limits`]), which names from
//! inputs may be shown and how ([`text`]), and how people write times and how they land on the
//! planning grid ([`timespec`]).
//!
//! It depends on no other gpucap crate, so everything above may use it and nothing here can
//! reach up into planning, solving or acting.

pub mod diagnostic;
pub mod limits;
pub mod text;
pub mod timespec;
