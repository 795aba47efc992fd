//! `limits apply`: carries out a plan ([`crate::plan`]) — the config writes and
//! their registries ([`writes`], with the entity-count journal [`counts`]),
//! the bucket fan-outs ([`fanout`], owed ahead as [`pending`] items), and the
//! `#PROVISIONER` record with the level digests at the end. [`run::apply`]
//! runs those steps in order.

pub mod counts;
pub mod fanout;
pub mod fault;
pub mod pending;
pub mod run;
pub mod writes;
