//! Pending fan-outs (docs/storage.md, "Pending fan-outs"): one item per
//! owed bucket fan-out, written *before* the config write that makes it necessary
//! and deleted only when no owner share is left. A share whose lease has expired
//! (its apply died or gave up) is claimed by the next apply.
//!
//! Every change is an optimistic read-modify-write: the new item is put only if
//! the stored `owners` map is still the one just read, so two applies never lose
//! each other's shares.

use std::collections::BTreeMap;

use crate::apply::fanout::{FanOutKind, LevelKind, Owed};
use crate::store::{AttrValue, Condition, Item, Key, Store, StoreError, WriteOp};

use crate::items::keys::{self, PENDING_SK_PREFIX as PREFIX};
const ATTEMPTS: usize = 5;

/// One apply's claim on a pending item.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Share {
    /// Epoch ms after which another apply may claim the item.
    pub lease: i64,
    /// Owed by a `--full` apply.
    pub full: bool,
}

/// A pending item as read.
#[derive(Debug, Clone, PartialEq)]
pub struct Pending {
    pub owed: Owed,
    pub owners: BTreeMap<String, Share>,
}

impl Pending {
    /// No live owner: every lease has passed.
    pub fn claimable(&self, now_ms: i64) -> bool {
        self.owners.values().all(|s| s.lease <= now_ms)
    }
}

pub fn key(ns: &str, owed: &Owed) -> Key {
    Key::new(
        keys::system_pk(ns),
        keys::pending_sk(owed.kind.as_str(), owed.level.as_str(), &owed.target),
    )
}

pub fn parse_kind(s: &str) -> Option<FanOutKind> {
    Some(match s {
        "disabled" => FanOutKind::Disabled,
        "cascade" => FanOutKind::Cascade,
        "soft" => FanOutKind::Soft,
        "sync" => FanOutKind::Sync,
        _ => return None,
    })
}

pub fn parse_level(s: &str) -> Option<LevelKind> {
    Some(match s {
        "system" => LevelKind::System,
        "resource" => LevelKind::Resource,
        "entity" => LevelKind::Entity,
        _ => return None,
    })
}

/// The reference's run order: by kind, the resource level first inside a kind.
pub fn run_order(a: &Owed, b: &Owed) -> std::cmp::Ordering {
    let rank = |l: LevelKind| match l {
        LevelKind::Resource => 0,
        LevelKind::System => 1,
        LevelKind::Entity => 2,
    };
    (a.kind, rank(a.level), &a.target).cmp(&(b.kind, rank(b.level), &b.target))
}

fn num(v: Option<&AttrValue>) -> Option<i64> {
    v?.as_n()?.split('.').next()?.parse().ok()
}

/// Decodes one pending item, in the current shape (`owners`) or the legacy
/// single-owner shape (`token`, `lease_until_ms`, `full`). `None` = not a pending item
/// we understand (left alone, and not counted as ours to retry).
pub fn decode(item: &Item) -> Option<Pending> {
    let s = |n: &str| item.get(n).and_then(|v| v.as_s());
    let owed = Owed::new(
        parse_kind(s("kind")?)?,
        parse_level(s("level")?)?,
        s("target").unwrap_or(""),
    );
    let mut owners = BTreeMap::new();
    match item.get("owners") {
        Some(AttrValue::M(m)) => {
            for (token, v) in m {
                if let AttrValue::M(share) = v {
                    owners.insert(
                        token.clone(),
                        Share {
                            lease: num(share.get("lease")).unwrap_or(0),
                            full: share.get("full").and_then(|v| v.as_bool()).unwrap_or(false),
                        },
                    );
                }
            }
        }
        _ => {
            if let Some(token) = s("token") {
                owners.insert(
                    token.to_string(),
                    Share {
                        lease: num(item.get("lease_until_ms")).unwrap_or(0),
                        full: item.get("full").and_then(|v| v.as_bool()).unwrap_or(false),
                    },
                );
            }
        }
    }
    Some(Pending { owed, owners })
}

/// Every pending item of the namespace (strongly consistent), including ones this
/// build cannot decode (returned as raw count only via [`count`]).
pub fn list(store: &dyn Store, ns: &str) -> Result<Vec<Pending>, StoreError> {
    Ok(store
        .query(&keys::system_pk(ns), PREFIX, true)?
        .iter()
        .filter_map(decode)
        .collect())
}

/// How many pending items exist (what plan and apply report).
pub fn count(store: &dyn Store, ns: &str) -> Result<usize, StoreError> {
    Ok(store.query(&keys::system_pk(ns), PREFIX, true)?.len())
}

/// The pending items left, and when the next apply can take them all.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Left {
    pub count: usize,
    /// The latest lease still running among them (epoch ms): an apply claims
    /// an item only once every lease on it has run out, so before this
    /// instant the next apply leaves some of them alone. `None`: the next
    /// apply takes them all.
    pub leased_until: Option<i64>,
}

/// What [`Left`] says at `now_ms`.
pub fn left(store: &dyn Store, ns: &str, now_ms: i64) -> Result<Left, StoreError> {
    let items = store.query(&keys::system_pk(ns), PREFIX, true)?;
    let leased_until = items
        .iter()
        .filter_map(decode)
        .filter(|p| !p.claimable(now_ms))
        .flat_map(|p| p.owners.into_values().map(|s| s.lease))
        .max();
    Ok(Left {
        count: items.len(),
        leased_until,
    })
}

fn encode(ns: &str, owed: &Owed, owners: &BTreeMap<String, Share>, written_ms: i64) -> Item {
    let mut item = keys::namespaced_item(ns, key(ns, owed));
    item.insert("kind".into(), AttrValue::s(owed.kind.as_str()));
    item.insert("level".into(), AttrValue::s(owed.level.as_str()));
    item.insert("target".into(), AttrValue::s(&owed.target));
    item.insert("written_ms".into(), AttrValue::n(written_ms));
    item.insert("owners".into(), owners_value(owners));
    item
}

fn owners_value(owners: &BTreeMap<String, Share>) -> AttrValue {
    AttrValue::M(
        owners
            .iter()
            .map(|(t, s)| {
                let mut m = BTreeMap::new();
                m.insert("lease".to_string(), AttrValue::n(s.lease));
                m.insert("full".to_string(), AttrValue::Bool(s.full));
                (t.clone(), AttrValue::M(m))
            })
            .collect(),
    )
}

/// The condition that the stored item is exactly as read (or still absent).
fn unchanged_since(read: &Option<Item>) -> Condition {
    match read {
        None => Condition::NotExists,
        Some(item) => match item.get("owners") {
            Some(v) => Condition::AttrEquals("owners".into(), v.clone()),
            None => Condition::And(vec![
                Condition::Exists,
                Condition::AttrNotExists("owners".into()),
            ]),
        },
    }
}

/// What an edit of one pending item comes to.
enum Step {
    /// `edit` declined: leave the item alone.
    Unchanged,
    /// Nothing stored and nothing to store.
    Done,
    Write(WriteOp),
}

/// Applies `edit` to the owners as read and builds the write that stores the
/// result, conditioned on nothing having changed meanwhile.
fn step(
    ns: &str,
    owed: &Owed,
    read: &Option<Item>,
    now_ms: i64,
    edit: &mut impl FnMut(Option<&Pending>, &mut BTreeMap<String, Share>) -> bool,
) -> Step {
    let current = read.as_ref().and_then(decode);
    let mut owners = current
        .as_ref()
        .map(|p| p.owners.clone())
        .unwrap_or_default();
    if !edit(current.as_ref(), &mut owners) {
        return Step::Unchanged;
    }
    let written_ms = read
        .as_ref()
        .and_then(|i| num(i.get("written_ms")))
        .unwrap_or(now_ms);
    let condition = Some(unchanged_since(read));
    if owners.is_empty() {
        if read.is_none() {
            return Step::Done;
        }
        Step::Write(WriteOp::Delete {
            key: key(ns, owed),
            condition,
        })
    } else {
        Step::Write(WriteOp::Put {
            item: encode(ns, owed, &owners, written_ms),
            condition,
        })
    }
}

/// Read, let `edit` change the owners (return `false` to leave the item alone),
/// then put or delete conditioned on nothing having changed meanwhile.
fn modify(
    store: &dyn Store,
    ns: &str,
    owed: &Owed,
    now_ms: i64,
    mut edit: impl FnMut(Option<&Pending>, &mut BTreeMap<String, Share>) -> bool,
) -> Result<bool, StoreError> {
    let k = key(ns, owed);
    for _ in 0..ATTEMPTS {
        let read = store.get(&k, true)?;
        let op = match step(ns, owed, &read, now_ms, &mut edit) {
            Step::Unchanged => return Ok(false),
            Step::Done => return Ok(true),
            Step::Write(op) => op,
        };
        match store.write(op) {
            Ok(_) => return Ok(true),
            Err(StoreError::ConditionFailed { .. }) => continue,
            Err(e) => return Err(e),
        }
    }
    Err(StoreError::Backend(format!(
        "pending item {} kept changing; gave up after {ATTEMPTS} attempts",
        k.sk
    )))
}

/// [`modify`] for many items: one batched read, then the writes. Creating an
/// item read as absent and deleting one whose last share goes are batched
/// unconditional writes ([`Store::batch_write`], 25 a call); changing an item
/// other applies also hold stays a conditional write ([`Store::write_many`]),
/// redone alone by [`modify`] when it meets a concurrent change.
///
/// The batched writes trade a narrow race for one request per 25 items instead
/// of one each: a share another apply adds in the moment between our read and
/// our write is lost. That matters only if that apply then dies before its own
/// fan-out, which it runs anyway; the fan-out is then redone by its next apply
/// only if the config changes again.
fn modify_many<E>(
    store: &dyn Store,
    ns: &str,
    owed: &[Owed],
    now_ms: i64,
    make_edit: impl Fn() -> E,
) -> Result<(), StoreError>
where
    E: FnMut(Option<&Pending>, &mut BTreeMap<String, Share>) -> bool,
{
    // A chunk at a time: however many fan-outs an apply owes, it holds one
    // chunk of their items.
    for owed in owed.chunks(crate::plan::prepare::CHUNK) {
        modify_chunk(store, ns, owed, now_ms, &make_edit)?;
    }
    Ok(())
}

fn modify_chunk<E>(
    store: &dyn Store,
    ns: &str,
    owed: &[Owed],
    now_ms: i64,
    make_edit: &impl Fn() -> E,
) -> Result<(), StoreError>
where
    E: FnMut(Option<&Pending>, &mut BTreeMap<String, Share>) -> bool,
{
    let keys: Vec<Key> = owed.iter().map(|o| key(ns, o)).collect();
    let reads = store.batch_get(&keys, true)?;
    let (mut batched, mut conditional) = (Vec::new(), Vec::new());
    let mut which = Vec::new();
    for (o, read) in owed.iter().zip(&reads) {
        match step(ns, o, read, now_ms, &mut make_edit()) {
            Step::Write(WriteOp::Put {
                item,
                condition: Some(Condition::NotExists),
            }) => batched.push(WriteOp::Put {
                item,
                condition: None,
            }),
            Step::Write(WriteOp::Delete { key, .. }) => batched.push(WriteOp::Delete {
                key,
                condition: None,
            }),
            Step::Write(op) => {
                conditional.push(op);
                which.push(o);
            }
            Step::Unchanged | Step::Done => {}
        }
    }
    for r in store.batch_write(batched) {
        r?;
    }
    for (o, result) in which.into_iter().zip(store.write_many(conditional)) {
        match result {
            Ok(_) => {}
            Err(StoreError::ConditionFailed { .. }) => {
                modify(store, ns, o, now_ms, make_edit())?;
            }
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// The edit that adds (or widens) `token`'s share.
fn add_share(
    token: &str,
    share: Share,
) -> impl FnMut(Option<&Pending>, &mut BTreeMap<String, Share>) -> bool + '_ {
    move |_, owners| {
        let merged = match owners.get(token) {
            Some(old) => Share {
                lease: share.lease.max(old.lease),
                full: share.full || old.full,
            },
            None => share,
        };
        if owners.get(token) == Some(&merged) {
            return false;
        }
        owners.insert(token.to_string(), merged);
        true
    }
}

/// Records that `token` owes `owed` (created when absent, share added otherwise).
pub fn write_ahead(
    store: &dyn Store,
    ns: &str,
    owed: &Owed,
    token: &str,
    share: Share,
    now_ms: i64,
) -> Result<(), StoreError> {
    modify(store, ns, owed, now_ms, add_share(token, share)).map(|_| ())
}

/// [`write_ahead`] for many fan-outs at once (one batched read, one batch of writes).
pub fn write_ahead_many(
    store: &dyn Store,
    ns: &str,
    owed: &[Owed],
    token: &str,
    share: Share,
    now_ms: i64,
) -> Result<(), StoreError> {
    modify_many(store, ns, owed, now_ms, || add_share(token, share))
}

/// Takes over `p` when every lease has expired: the expired shares are replaced by
/// ours (keeping `full` if any of them was). Returns whether we now own it.
pub fn claim(
    store: &dyn Store,
    ns: &str,
    p: &Pending,
    token: &str,
    share: Share,
    now_ms: i64,
) -> Result<bool, StoreError> {
    modify(store, ns, &p.owed, now_ms, |current, owners| {
        let Some(current) = current else { return false };
        if !current.claimable(now_ms) {
            return false;
        }
        let full = owners.values().any(|s| s.full) || share.full;
        owners.clear();
        owners.insert(
            token.to_string(),
            Share {
                lease: share.lease,
                full,
            },
        );
        true
    })
}

/// Drops `token`'s share of each fan-out; an item goes when no share is left.
pub fn release(
    store: &dyn Store,
    ns: &str,
    owed: &[Owed],
    token: &str,
    now_ms: i64,
) -> Result<(), StoreError> {
    modify_many(store, ns, owed, now_ms, || {
        |_: Option<&Pending>, owners: &mut BTreeMap<String, Share>| owners.remove(token).is_some()
    })
}

/// Ends `token`'s lease now, so the next apply can claim the item at once.
pub fn expire(
    store: &dyn Store,
    ns: &str,
    owed: &Owed,
    token: &str,
    now_ms: i64,
) -> Result<(), StoreError> {
    modify(store, ns, owed, now_ms, |_, owners| {
        match owners.get_mut(token) {
            Some(s) if s.lease > now_ms => {
                s.lease = now_ms;
                true
            }
            _ => false,
        }
    })
    .map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::memory::MemoryStore;

    const NOW: i64 = 1_000_000;

    #[test]
    fn write_ahead_then_release_leaves_nothing() {
        let s = MemoryStore::new();
        let o = Owed::new(FanOutKind::Sync, LevelKind::Entity, "user-1/gpt-4");
        let share = Share {
            lease: NOW + 5,
            full: false,
        };
        write_ahead(&s, "ns", &o, "t1", share, NOW).unwrap();
        let item = s
            .item(
                "ns/SYSTEM#",
                "#PROVISIONER#PENDING#sync#entity#user-1/gpt-4",
            )
            .unwrap();
        assert_eq!(item.get("written_ms"), Some(&AttrValue::n(NOW)));
        assert_eq!(item.get("GSI4PK"), Some(&AttrValue::s("ns")));
        assert_eq!(count(&s, "ns").unwrap(), 1);
        write_ahead(&s, "ns", &o, "t2", share, NOW).unwrap();
        release(&s, "ns", std::slice::from_ref(&o), "t1", NOW).unwrap();
        assert_eq!(list(&s, "ns").unwrap()[0].owners.len(), 1);
        release(&s, "ns", std::slice::from_ref(&o), "t2", NOW).unwrap();
        assert_eq!(count(&s, "ns").unwrap(), 0);
    }

    #[test]
    fn batched_write_ahead_and_release_match_the_single_forms() {
        let s = MemoryStore::new();
        let a = Owed::new(FanOutKind::Sync, LevelKind::Entity, "u/a");
        let b = Owed::new(FanOutKind::Disabled, LevelKind::Resource, "b");
        let share = Share {
            lease: NOW + 5,
            full: true,
        };
        write_ahead(&s, "ns", &a, "other", share, NOW).unwrap();
        write_ahead_many(&s, "ns", &[a.clone(), b.clone()], "me", share, NOW).unwrap();
        let all = list(&s, "ns").unwrap();
        assert_eq!(all.len(), 2);
        assert!(all.iter().all(|p| p.owners.get("me") == Some(&share)));
        release(&s, "ns", &[a.clone(), b.clone()], "me", NOW).unwrap();
        let all = list(&s, "ns").unwrap();
        assert_eq!(all.len(), 1, "the other apply's share keeps its item");
        assert_eq!(all[0].owed, a);
        assert_eq!(all[0].owners.keys().collect::<Vec<_>>(), ["other"]);
    }

    #[test]
    fn only_expired_items_are_claimed_and_full_is_kept() {
        let s = MemoryStore::new();
        let o = Owed::new(FanOutKind::Disabled, LevelKind::Resource, "r");
        write_ahead(
            &s,
            "ns",
            &o,
            "dead",
            Share {
                lease: NOW + 10,
                full: true,
            },
            NOW,
        )
        .unwrap();
        let p = list(&s, "ns").unwrap().remove(0);
        let mine = Share {
            lease: NOW + 999,
            full: false,
        };
        assert!(!claim(&s, "ns", &p, "me", mine, NOW).unwrap());
        expire(&s, "ns", &o, "dead", NOW).unwrap();
        let p = list(&s, "ns").unwrap().remove(0);
        assert!(p.claimable(NOW));
        assert!(claim(&s, "ns", &p, "me", mine, NOW).unwrap());
        let p = list(&s, "ns").unwrap().remove(0);
        assert_eq!(
            p.owners.into_iter().collect::<Vec<_>>(),
            vec![(
                "me".to_string(),
                Share {
                    lease: NOW + 999,
                    full: true
                }
            )]
        );
    }

    #[test]
    fn legacy_single_owner_items_are_read_and_rewritten_on_claim() {
        let s = MemoryStore::new();
        let o = Owed::new(FanOutKind::Cascade, LevelKind::Entity, "u/r");
        let k = key("ns", &o);
        let mut item = Item::new();
        item.insert("PK".into(), AttrValue::s(&k.pk));
        item.insert("SK".into(), AttrValue::s(&k.sk));
        item.insert("kind".into(), AttrValue::s("cascade"));
        item.insert("level".into(), AttrValue::s("entity"));
        item.insert("target".into(), AttrValue::s("u/r"));
        item.insert("token".into(), AttrValue::s("old"));
        item.insert("lease_until_ms".into(), AttrValue::n(NOW - 1));
        item.insert("full".into(), AttrValue::Bool(true));
        s.put(item);
        let p = list(&s, "ns").unwrap().remove(0);
        assert_eq!(
            p.owners["old"],
            Share {
                lease: NOW - 1,
                full: true
            }
        );
        assert!(claim(
            &s,
            "ns",
            &p,
            "me",
            Share {
                lease: NOW + 1,
                full: false
            },
            NOW
        )
        .unwrap());
        let stored = s.item(&k.pk, &k.sk).unwrap();
        assert!(stored.contains_key("owners"));
        release(&s, "ns", std::slice::from_ref(&o), "me", NOW).unwrap();
        assert_eq!(count(&s, "ns").unwrap(), 0);
    }

    #[test]
    fn run_order_is_kind_then_resource_first() {
        let mut v = [
            Owed::new(FanOutKind::Sync, LevelKind::Entity, "u/r"),
            Owed::new(FanOutKind::Soft, LevelKind::System, ""),
            Owed::new(FanOutKind::Soft, LevelKind::Resource, "r"),
            Owed::new(FanOutKind::Disabled, LevelKind::Entity, "u/r"),
            Owed::new(FanOutKind::Disabled, LevelKind::Resource, "r"),
        ];
        v.sort_by(run_order);
        let got: Vec<_> = v
            .iter()
            .map(|o| format!("{}:{}", o.kind.as_str(), o.level.as_str()))
            .collect();
        assert_eq!(
            got,
            [
                "disabled:resource",
                "disabled:entity",
                "soft:resource",
                "soft:system",
                "sync:entity"
            ]
        );
    }
}
