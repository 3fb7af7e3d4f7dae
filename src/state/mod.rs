//! What gpucap learns from infrastructure state that already exists: reservations, capacity
//! blocks and commitments bought earlier, so that a plan counts them instead of buying again.

pub mod terraform;

pub mod redact;
