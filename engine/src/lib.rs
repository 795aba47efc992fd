//! Pure, deterministic evaluation of zae-limiter 0.17 limits.
//!
//! Every function takes its inputs and an explicit `now` (epoch milliseconds);
//! nothing here reads a clock, a file or the network, so a service can embed it
//! and the CLI can explain exactly what a limiter will do at any instant.
//! Tokens are integer millitokens (1 token = 1000) held in `i128`, as the
//! reference's unbounded Python integers require.

pub mod bucket;
pub mod civil;
pub mod concurrency;
pub mod cooldown;
pub mod cron;
pub mod decimal;
pub mod duration;
pub mod encoding;
pub mod limit;
pub mod names;
pub mod params;
pub mod quota;
pub mod render;
pub mod retry;
pub mod rolling;
pub mod scan;
pub mod schedule;
pub mod zone;
mod zone_rules;
