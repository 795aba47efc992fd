//! plan / diff / apply: desired items from the manifest, the managed set, the
//! diff against live items, writes, pending fan-outs.

pub mod counts;
pub mod detail;
pub mod diff;
pub mod digests;
pub mod fanout;
pub mod fault;
pub mod kinds;
pub mod level;
pub mod managed;
pub mod output;
pub mod pending;
pub mod prepare;
pub mod run;
pub mod version;
pub mod writes;
