//! Which write of the `#PROVISIONER` record a plan was computed against
//! (docs/storage.md, "Concurrent applies"): the record's `applied_hash` and
//! `last_applied`, or its absence. Every apply (ours and the reference's
//! provisioner) rewrites both, so a different identity means another apply
//! wrote the record since. A saved plan is refused when it changed
//! ([`crate::plan::saved`]), and apply writes its record only on the identity
//! it planned against ([`RecordIdentity::condition`]).

use serde::{Deserialize, Serialize};

use crate::store::{AttrValue, Condition, Item};

/// The identity of the `#PROVISIONER` record as read.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecordIdentity {
    /// Whether a record existed at all.
    pub exists: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub applied_hash: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_applied: Option<String>,
    /// Ours: a random id every write of ours gives the record
    /// ([`WRITE_ATTR`]). `last_applied` is an apply's start time to the
    /// millisecond and a record widened or added to keeps its `applied_hash`,
    /// so two applies started in the same millisecond could write records
    /// that look alike; the id tells them apart. The reference drops it when
    /// it rewrites the record (then `None`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub write_id: Option<String>,
}

const APPLIED_HASH: &str = "applied_hash";
const LAST_APPLIED: &str = "last_applied";
/// Our attribute on the `#PROVISIONER` record naming the write that made it
/// ([`RecordIdentity::write_id`]); the reference never reads it.
pub const WRITE_ATTR: &str = "zael_write";

impl RecordIdentity {
    /// The identity of `item` (`None`: no record).
    pub fn of(item: Option<&Item>) -> Self {
        let text = |name: &str| {
            item.and_then(|i| i.get(name))
                .and_then(AttrValue::as_s)
                .map(str::to_string)
        };
        RecordIdentity {
            exists: item.is_some(),
            applied_hash: text(APPLIED_HASH),
            last_applied: text(LAST_APPLIED),
            write_id: text(WRITE_ATTR),
        }
    }

    /// The write condition "the record is still the one read": absent, or
    /// present with the same `applied_hash`, `last_applied` and write id.
    pub fn condition(&self) -> Condition {
        if !self.exists {
            return Condition::NotExists;
        }
        let attr = |name: &str, v: &Option<String>| match v {
            Some(s) => Condition::AttrEquals(name.to_string(), AttrValue::s(s)),
            None => Condition::AttrNotExists(name.to_string()),
        };
        Condition::And(vec![
            Condition::Exists,
            attr(APPLIED_HASH, &self.applied_hash),
            attr(LAST_APPLIED, &self.last_applied),
            attr(WRITE_ATTR, &self.write_id),
        ])
    }

    /// For messages: "no #PROVISIONER record" or "the #PROVISIONER record
    /// written at … (manifest sha256:0123abcd…)".
    pub fn describe(&self) -> String {
        if !self.exists {
            return "no #PROVISIONER record".to_string();
        }
        let at = self.last_applied.as_deref().unwrap_or("an unknown time");
        match &self.applied_hash {
            Some(h) => format!(
                "the #PROVISIONER record written at {at} (manifest {})",
                short_hash(h)
            ),
            None => format!("the #PROVISIONER record written at {at}"),
        }
    }
}

/// `sha256:` and the first 12 hex digits.
fn short_hash(h: &str) -> String {
    match h.strip_prefix("sha256:") {
        Some(hex) if hex.len() > 12 => format!("sha256:{}…", &hex[..12]),
        _ => h.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::item::keyed;
    use crate::store::memory::MemoryStore;
    use crate::store::{Key, Store, StoreError, WriteOp};

    fn record(hash: &str, at: &str) -> Item {
        keyed(
            "ns/SYSTEM#",
            "#PROVISIONER",
            &[
                (APPLIED_HASH, AttrValue::s(hash)),
                (LAST_APPLIED, AttrValue::s(at)),
            ],
        )
    }

    /// Puts `item` under the condition of `expect`.
    fn put_if(s: &MemoryStore, item: Item, expect: &RecordIdentity) -> Result<(), StoreError> {
        s.write(WriteOp::Put {
            item,
            condition: Some(expect.condition()),
        })
        .map(|_| ())
    }

    #[test]
    fn the_condition_holds_exactly_for_the_record_read() {
        let s = MemoryStore::new();
        let none = RecordIdentity::of(None);
        assert_eq!(none.describe(), "no #PROVISIONER record");
        put_if(&s, record("sha256:a", "t1"), &none).unwrap();
        assert!(
            put_if(&s, record("sha256:b", "t2"), &none).is_err(),
            "a record appeared"
        );
        let key = Key::new("ns/SYSTEM#", "#PROVISIONER");
        let first = RecordIdentity::of(s.get(&key, true).unwrap().as_ref());
        put_if(&s, record("sha256:a", "t2"), &first).unwrap();
        // Same hash, another write (a new last_applied): not the record read.
        assert!(matches!(
            put_if(&s, record("sha256:c", "t3"), &first),
            Err(StoreError::ConditionFailed { .. })
        ));
        // A record without the two attributes has an identity too.
        s.put(keyed("ns/SYSTEM#", "#PROVISIONER", &[]));
        let bare = RecordIdentity::of(s.get(&key, true).unwrap().as_ref());
        assert!(bare.exists && bare.applied_hash.is_none());
        put_if(&s, record("sha256:d", "t4"), &bare).unwrap();
        assert!(put_if(&s, record("sha256:e", "t5"), &bare).is_err());
    }

    /// Two writes in the same millisecond that keep the hash (a widened
    /// record, levels added to another's) differ in their write id only.
    #[test]
    fn the_write_id_tells_apart_writes_that_look_alike() {
        let s = MemoryStore::new();
        let key = Key::new("ns/SYSTEM#", "#PROVISIONER");
        let with_id = |id: &str| {
            let mut item = record("sha256:a", "t1");
            item.insert(WRITE_ATTR.into(), AttrValue::s(id));
            item
        };
        s.put(with_id("w1"));
        let first = RecordIdentity::of(s.get(&key, true).unwrap().as_ref());
        assert_eq!(first.write_id.as_deref(), Some("w1"));
        put_if(&s, with_id("w2"), &first).unwrap();
        assert!(matches!(
            put_if(&s, with_id("w3"), &first),
            Err(StoreError::ConditionFailed { .. })
        ));
        // The reference rewrites the record without it: another identity.
        let second = RecordIdentity::of(s.get(&key, true).unwrap().as_ref());
        s.put(record("sha256:a", "t1"));
        assert!(put_if(&s, with_id("w4"), &second).is_err());
    }

    #[test]
    fn described_for_people() {
        let id = RecordIdentity::of(Some(&record(
            "sha256:0123456789abcdef0123",
            "2026-12-03T10:00:00.000000+00:00",
        )));
        assert_eq!(
            id.describe(),
            "the #PROVISIONER record written at 2026-12-03T10:00:00.000000+00:00 (manifest sha256:0123456789ab…)"
        );
    }
}
