//! One module per subcommand: each resolves its settings from arguments and the config file,
//! does the I/O at the edges, and calls the pure library code in between. What they share is in
//! [`common`]; nothing here depends on [`crate::cli`], which parses arguments and calls in.

pub mod apply;
pub mod common;
pub mod demand;
pub mod generate;
pub mod init;
pub mod live_quotas;
pub mod output;
pub mod plan;
pub mod policy;
pub mod prices;
pub mod project;
pub mod quotes;
pub mod release;
pub mod solve;
pub mod solving;
pub mod state;
