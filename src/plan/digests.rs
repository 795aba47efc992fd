//! Level digests: what the last `limits apply` left in each level, so
//! `--no-refresh` can skip reading the levels the manifest does not change.
//!
//! A normal plan or apply reads every declared level (one consistent
//! BatchGetItem per 100 levels) to notice changes made behind the manifest's
//! back, as the reference does. That read is most of the cost of a plan and of
//! an apply that changes little. With `--no-refresh` (Terraform's
//! `-refresh=false`), a level whose desired content hashes to a digest the
//! last apply recorded is taken as unchanged without a read, so the cost grows
//! with the levels the manifest changes, not with its size. The price: a level
//! changed outside `limits apply` since then (Python's `set_limits`, the
//! console) is not noticed until a normal plan or apply.
//!
//! Every apply records the digests in a few items of its own under the
//! namespace's `SYSTEM#` partition (`#APPLY#DIGESTS#0000`, …; the Python
//! library ignores them, and `GSI4` keys let a namespace purge remove them).
//! One digest is `sha256(PK, SK, limit content)` cut to 128 bits: the level's
//! key and its enforcement-relevant content ([`crate::items::config::limit_content`]),
//! recorded only for levels the apply wrote or found already equal.
//!
//! When the digests are not trusted, `--no-refresh` reads every level, as
//! without it ([`Untrusted`] says why):
//! * chunk 0 is deleted before an apply's first config write and written last,
//!   after the `#PROVISIONER` record, so an apply that died half way leaves no
//!   usable digests;
//! * the digests name the `#PROVISIONER` record they were written with
//!   (`applied_hash` and `last_applied`), so an apply by another provisioner
//!   (the reference's Lambda) since then is noticed;
//! * chunks of another generation (a torn write) are not used.

use std::collections::HashSet;
use std::fmt::Write as _;

use sha2::{Digest as _, Sha256};

use crate::items::keys;
use crate::store::{AttrValue, Item, Key, Store, StoreError};

/// SK prefix of the digest items, under the namespace's `SYSTEM#` partition.
pub const SK_PREFIX: &str = "#APPLY#DIGESTS#";

/// One level's digest.
pub type Digest = [u8; 16];

/// The digest of `item` (a desired or live config item) stored under its key.
pub fn digest(key: &Key, item: &Item) -> Digest {
    let content = crate::items::config::limit_content(item);
    let json = crate::store::typed_json::item_to_json(&content).to_string();
    let mut h = Sha256::new();
    for part in [key.pk.as_bytes(), key.sk.as_bytes(), json.as_bytes()] {
        h.update((part.len() as u64).to_be_bytes());
        h.update(part);
    }
    let full = h.finalize();
    let mut out = [0u8; 16];
    out.copy_from_slice(&full[..16]);
    out
}

/// The `#PROVISIONER` record the digests belong to: its hash and timestamp.
pub fn stamp(applied_hash: &str, last_applied: &str) -> String {
    format!("{applied_hash} {last_applied}")
}

/// Why the recorded digests cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Untrusted {
    #[error(
        "no apply by this tool has recorded level digests yet (or the last one did not finish)"
    )]
    Missing,
    #[error("the recorded level digests are incomplete")]
    Torn,
    #[error(
        "the #PROVISIONER record was written by another apply since the digests were recorded"
    )]
    OtherApply,
}

/// The stored digest items: which exist, and the usable set if any.
#[derive(Debug, Clone)]
pub struct Recorded {
    /// Every digest item found (so a rewrite can drop the ones it no longer needs).
    pub keys: Vec<Key>,
    pub digests: Result<HashSet<Digest>, Untrusted>,
}

/// Reads the digest items (one consistent Query) and checks them against the
/// stamp of the `#PROVISIONER` record just read (`None`: no record).
pub fn read(
    store: &dyn Store,
    ns: &str,
    record_stamp: Option<&str>,
) -> Result<Recorded, StoreError> {
    let items = store.query(&keys::system_pk(ns), SK_PREFIX, true)?;
    let keys: Vec<Key> = items.iter().filter_map(Key::of).collect();
    let digests = usable(&items, record_stamp);
    Ok(Recorded { keys, digests })
}

fn usable(items: &[Item], record_stamp: Option<&str>) -> Result<HashSet<Digest>, Untrusted> {
    let s = |item: &Item, name: &str| item.get(name).and_then(AttrValue::as_s).map(str::to_string);
    let n = |item: &Item, name: &str| {
        item.get(name)
            .and_then(AttrValue::as_n)
            .and_then(|v| v.parse::<usize>().ok())
    };
    let first = items
        .iter()
        .find(|i| s(i, "SK").as_deref() == Some(&chunk_sk(0)))
        .ok_or(Untrusted::Missing)?;
    if s(first, "provisioner").as_deref() != record_stamp {
        return Err(Untrusted::OtherApply);
    }
    let generation = s(first, "generation").ok_or(Untrusted::Torn)?;
    let chunks = n(first, "chunks").ok_or(Untrusted::Torn)?;
    let mut set = HashSet::new();
    for i in 0..chunks {
        let item = items
            .iter()
            .find(|it| s(it, "SK").as_deref() == Some(&chunk_sk(i)))
            .filter(|it| s(it, "generation").as_ref() == Some(&generation))
            .ok_or(Untrusted::Torn)?;
        let text = s(item, "digests").unwrap_or_default();
        if text.len() % 32 != 0 {
            return Err(Untrusted::Torn);
        }
        for hex in text.as_bytes().chunks(32) {
            set.insert(parse_hex(hex).ok_or(Untrusted::Torn)?);
        }
    }
    Ok(set)
}

/// The items that record `digests` for the `#PROVISIONER` record stamped
/// `record_stamp`, chunk 0 first (apply writes it last, see
/// [`crate::apply::record`]): sorted, so the same levels always make the same
/// items, and split below the item limit as the stores measure it.
pub fn chunk_items(
    ns: &str,
    generation: &str,
    record_stamp: &str,
    digests: &[Digest],
) -> Vec<Item> {
    let mut digests = digests.to_vec();
    digests.sort_unstable();
    digests.dedup();
    let pk = keys::system_pk(ns);
    let item = |i: usize, chunks: usize, part: &[Digest]| {
        let mut text = String::with_capacity(part.len() * 32);
        for d in part {
            for b in d {
                let _ = write!(text, "{b:02x}");
            }
        }
        let mut it = keys::namespaced_item(ns, Key::new(&pk, chunk_sk(i)));
        it.insert("generation".into(), AttrValue::s(generation));
        it.insert("chunks".into(), AttrValue::n(chunks));
        it.insert("provisioner".into(), AttrValue::s(record_stamp));
        it.insert("digests".into(), AttrValue::s(text));
        it
    };
    // 32 hex digits each, nothing to escape.
    let room = crate::items::chunked::room(&item(9999, 9999, &[]), crate::items::chunked::LIMIT);
    let parts = crate::items::chunked::split(digests, room, |_| 32);
    let n = parts.len();
    parts
        .iter()
        .enumerate()
        .map(|(i, p)| item(i, n, p))
        .collect()
}

/// The key of chunk 0, whose absence makes the recorded digests unusable.
pub fn first_chunk_key(ns: &str) -> Key {
    Key::new(keys::system_pk(ns), chunk_sk(0))
}

fn chunk_sk(i: usize) -> String {
    format!("{SK_PREFIX}{i:04}")
}

fn parse_hex(hex: &[u8]) -> Option<Digest> {
    let mut out = [0u8; 16];
    for (i, pair) in hex.chunks(2).enumerate() {
        let text = std::str::from_utf8(pair).ok()?;
        *out.get_mut(i)? = u8::from_str_radix(text, 16).ok()?;
    }
    Some(out)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) fn item(cap: &str) -> Item {
        crate::store::item::keyed(
            "ns/ENTITY#u",
            "#CONFIG#r",
            &[("l_rpm_cp", AttrValue::N(cap.into()))],
        )
    }

    pub(crate) fn key() -> Key {
        Key::new("ns/ENTITY#u", "#CONFIG#r")
    }

    #[test]
    fn digest_follows_limit_content_and_key_only() {
        let mut with_bookkeeping = item("60");
        with_bookkeeping.insert("config_version".into(), AttrValue::n(1));
        assert_eq!(
            digest(&key(), &item("60")),
            digest(&key(), &with_bookkeeping)
        );
        // Numbers compare numerically, as `same_content` does.
        assert_eq!(digest(&key(), &item("60")), digest(&key(), &item("60.0")));
        assert_ne!(digest(&key(), &item("60")), digest(&key(), &item("61")));
        let other = Key::new("ns/ENTITY#v", "#CONFIG#r");
        assert_ne!(digest(&key(), &item("60")), digest(&other, &item("60")));
    }
}
