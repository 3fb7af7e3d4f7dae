//! Pictures and tables of gpucap's results for people: terminal charts, SVG/PNG charts.
//! Pure functions from data to text or bytes; the commands decide where they go.

pub mod chart;
pub mod diff_view;
pub mod markdown;
pub mod plan_chart;
pub mod plan_summary;
pub mod plan_view;
pub mod pulumi;
pub mod stack;
pub mod terminal;
pub mod terraform;
