//! `limits apply`: carries out a plan ([`crate::plan`]) — the config writes and
//! their registries ([`writes`], with the entity-count journal [`counts`]),
//! the bucket fan-outs ([`fanout`], owed ahead as [`pending`] items), and the
//! `#PROVISIONER` record with the level digests at the end. [`run::apply`]
//! runs those steps in order.

/// How long an apply holds what it claims (its shares of pending fan-outs,
/// its entity-count journal): the reference's 900 s Lambda budget plus 60 s.
pub const LEASE_MS: i64 = 960_000;

/// A fresh apply token: 32 hex digits from the OS's random source.
pub fn new_token() -> String {
    use std::io::Read;
    let mut buf = [0u8; 16];
    let ok = std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut buf))
        .is_ok();
    if !ok {
        // No /dev/urandom: mix time, pid and the std hasher's random keys.
        use std::hash::{BuildHasher, Hasher};
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u128(
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos())
                .unwrap_or(0),
        );
        h.write_u32(std::process::id());
        let a = h.finish();
        h.write_u64(a);
        buf[..8].copy_from_slice(&a.to_le_bytes());
        buf[8..].copy_from_slice(&h.finish().to_le_bytes());
    }
    buf.iter().map(|b| format!("{b:02x}")).collect()
}

pub mod conflict;
pub mod counts;
pub mod fanout;
pub mod fault;
pub mod gate;
pub mod lock;
pub mod pending;
pub mod record;
pub mod run;
pub mod writes;
