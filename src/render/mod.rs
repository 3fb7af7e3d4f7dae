//! Pictures and tables of gpucap's results for people: terminal charts, SVG/PNG charts.
//! Pure functions from data to text or bytes; the commands decide where they go.

pub mod chart;
pub mod pulumi;
pub mod stack;
pub mod terminal;
pub mod terraform;
