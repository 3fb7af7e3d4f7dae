//! gpucap plans and provisions GPU capacity for ML training campaigns.
//!
//! Data flows one way: inputs ([`config`], [`calendar`], [`forecast`]) → [`demand`] →
//! [`problem`] → solver → [`plan`] → gates → [`render`] / [`apply`] (with its [`state`]). The modules in the middle are pure;
//! reading files happens at the edges ([`commands`]).

pub mod apply;
pub mod calendar;
pub mod cli;
pub mod commands;
pub mod config;
pub mod contract;
pub mod demand;
pub mod forecast;
pub mod logging;
pub mod nesting;
pub mod plan;
pub mod planner;
pub mod policy;
pub mod release;
pub mod render;
pub mod state;

pub use gpucap_ground::{diagnostic, limits, text, timespec};
pub use gpucap_provider::accelerator::{self, Accelerator};
pub use gpucap_solver::{problem, solver};
