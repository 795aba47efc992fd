//! `limits simulate` and `limits gen-trace`: replay a request trace through the
//! engine with a virtual clock, and make synthetic traces to replay.
//!
//! Data flows one way: a trace file is read one line at a time ([`trace`]),
//! each event is evaluated against the limits that apply to one entity and
//! resource ([`resolve`], [`counters`]) by [`replay`], which feeds per-limit
//! tallies ([`tally`]) and a bounded time series ([`series`]); [`report`]
//! renders the tallies as text or JSON and [`chart`] the series as SVG.
//! Nothing here holds more than one trace line, the open holds and a fixed
//! number of chart buckets, so a trace of any length runs in bounded memory.

pub mod chart;
pub mod clock;
pub mod counters;
pub mod generate;
pub mod prng;
pub mod replay;
pub mod report;
pub mod resolve;
pub mod series;
pub mod tally;
pub mod trace;
