//! plan / diff / apply: desired items from the manifest, the managed set, the
//! diff against live items, writes, pending fan-outs.

pub mod fanout;
