//! The DynamoDB semantics both emulating stores keep ([`super::emulate`]),
//! run on each: the local SQLite store and the in-memory store.

use std::collections::BTreeSet;

use super::local::LocalStore;
use super::memory::MemoryStore;
use super::{
    emulate, AttrValue, Condition, Index, Item, Key, Store, StoreError, UpdateAction, WriteOp,
};

/// Runs `test` on a fresh local store (in a directory that does not exist
/// yet) and on a fresh in-memory store.
fn each_store(test: impl Fn(&dyn Store)) {
    let dir = tempfile::tempdir().unwrap();
    let local = LocalStore::open(&dir.path().join("sub/dir/local.sqlite"), "t").unwrap();
    test(&local);
    test(&MemoryStore::new());
}

use crate::store::item::keyed as item;

fn put(s: &dyn Store, i: Item) -> Option<Item> {
    s.write(WriteOp::Put {
        item: i,
        condition: None,
    })
    .unwrap()
}

#[test]
fn put_replaces_the_whole_item_and_returns_the_old_one() {
    each_store(|s| {
        let first = item(
            "p",
            "s",
            &[("a", AttrValue::n(1)), ("b", AttrValue::s("x"))],
        );
        assert_eq!(put(s, first.clone()), None);
        let second = item("p", "s", &[("c", AttrValue::Bool(true))]);
        assert_eq!(put(s, second.clone()), Some(first));
        assert_eq!(s.get(&Key::new("p", "s"), false).unwrap(), Some(second));
    });
}

#[test]
fn every_attribute_type_survives_storage() {
    each_store(|s| {
        let i = item(
            "p",
            "s",
            &[
                ("n", AttrValue::n("1.50")),
                ("z", AttrValue::Null),
                (
                    "m",
                    AttrValue::M(Item::from([(
                        "k".into(),
                        AttrValue::L(vec![AttrValue::s("v"), AttrValue::Bool(false)]),
                    )])),
                ),
                (
                    "ss",
                    AttrValue::Ss(["b".to_string(), "a".to_string()].into()),
                ),
            ],
        );
        put(s, i.clone());
        assert_eq!(s.get(&Key::new("p", "s"), true).unwrap(), Some(i));
    });
}

#[test]
fn invalid_items_are_refused() {
    each_store(|s| {
        for bad in [
            Item::from([("PK".to_string(), AttrValue::s("p"))]),
            item("", "s", &[]),
            item("p", "s", &[("n", AttrValue::N("True".into()))]),
            item("p", "s", &[("ss", AttrValue::Ss(BTreeSet::new()))]),
            item(
                "p",
                "s",
                &[("GSI4PK", AttrValue::n(1)), ("GSI4SK", AttrValue::s("x"))],
            ),
        ] {
            assert!(
                s.write(WriteOp::Put {
                    item: bad.clone(),
                    condition: None
                })
                .is_err(),
                "{bad:?}"
            );
        }
        let huge = item(
            "p",
            "s",
            &[("big", AttrValue::s("x".repeat(emulate::MAX_ITEM_BYTES)))],
        );
        assert!(s
            .write(WriteOp::Put {
                item: huge,
                condition: None
            })
            .is_err());
    });
}

#[test]
fn delete_is_idempotent_unless_conditioned() {
    each_store(|s| {
        put(s, item("p", "s", &[]));
        let key = Key::new("p", "s");
        let old = s
            .write(WriteOp::Delete {
                key: key.clone(),
                condition: None,
            })
            .unwrap();
        assert!(old.is_some());
        assert_eq!(s.get(&key, true).unwrap(), None);
        assert_eq!(
            s.write(WriteOp::Delete {
                key: key.clone(),
                condition: None
            })
            .unwrap(),
            None
        );
        let err = s
            .write(WriteOp::Delete {
                key,
                condition: Some(Condition::Exists),
            })
            .unwrap_err();
        assert!(matches!(err, StoreError::ConditionFailed { .. }));
    });
}

#[test]
fn update_applies_every_action() {
    each_store(|s| {
        let key = Key::new("p", "s");
        let upd = |actions: Vec<UpdateAction>| {
            s.write(WriteOp::Update {
                key: key.clone(),
                actions,
                condition: None,
            })
        };
        // Creates the item when absent.
        assert_eq!(
            upd(vec![
                UpdateAction::Set("a".into(), AttrValue::s("x")),
                UpdateAction::AddNumber("cnt".into(), "1".into()),
                UpdateAction::AddToSet("set".into(), vec!["r1".into(), "r2".into()]),
                UpdateAction::SetIfNotExists("g".into(), AttrValue::s("first")),
            ])
            .unwrap(),
            None
        );
        upd(vec![
            UpdateAction::SetIfNotExists("g".into(), AttrValue::s("second")),
            UpdateAction::AddNumber("cnt".into(), "2".into()),
            UpdateAction::AddToSet("set".into(), vec!["r3".into()]),
            UpdateAction::Remove("a".into()),
        ])
        .unwrap();
        let got = s.get(&key, true).unwrap().unwrap();
        assert_eq!(got.get("g"), Some(&AttrValue::s("first")));
        assert_eq!(got.get("cnt"), Some(&AttrValue::n(3)));
        assert_eq!(got.get("a"), None);
        assert_eq!(
            got.get("set"),
            Some(&AttrValue::Ss(["r1", "r2", "r3"].map(String::from).into()))
        );
        upd(vec![UpdateAction::DeleteFromSet(
            "set".into(),
            vec!["r1".into(), "r2".into(), "r3".into()],
        )])
        .unwrap();
        upd(vec![UpdateAction::AddNumber("cnt".into(), "-3".into())]).unwrap();
        let got = s.get(&key, true).unwrap().unwrap();
        assert_eq!(got.get("set"), None, "an emptied set disappears");
        assert_eq!(got.get("cnt"), Some(&AttrValue::n(0)));
        // Type errors and key updates are refused and change nothing.
        assert!(upd(vec![UpdateAction::AddNumber("g".into(), "1".into())]).is_err());
        assert!(upd(vec![UpdateAction::AddToSet("cnt".into(), vec!["x".into()])]).is_err());
        assert!(upd(vec![UpdateAction::Set("PK".into(), AttrValue::s("q"))]).is_err());
        assert!(upd(vec![
            UpdateAction::Set("x".into(), AttrValue::n(1)),
            UpdateAction::Remove("x".into())
        ])
        .is_err());
        assert_eq!(s.get(&key, true).unwrap().unwrap(), got);
        // A conditioned update of a missing item does not create it.
        let err = s
            .write(WriteOp::Update {
                key: Key::new("p", "missing"),
                actions: vec![UpdateAction::Set("a".into(), AttrValue::n(1))],
                condition: Some(Condition::Exists),
            })
            .unwrap_err();
        assert!(matches!(err, StoreError::ConditionFailed { .. }));
        assert_eq!(s.get(&Key::new("p", "missing"), true).unwrap(), None);
    });
}

#[test]
fn a_failed_condition_writes_nothing() {
    each_store(|s| {
        put(s, item("p", "s", &[("v", AttrValue::n(1))]));
        let err = s
            .write(WriteOp::Put {
                item: item("p", "s", &[("v", AttrValue::n(2))]),
                condition: Some(Condition::NotExists),
            })
            .unwrap_err();
        assert!(matches!(err, StoreError::ConditionFailed { ref pk, .. } if pk == "p"));
        assert_eq!(
            s.get(&Key::new("p", "s"), true).unwrap().unwrap().get("v"),
            Some(&AttrValue::n(1))
        );
    });
}

#[test]
fn write_many_keeps_each_condition_its_own() {
    each_store(|s| {
        put(s, item("p", "exists", &[("v", AttrValue::n(1))]));
        let out = s.write_many(vec![
            WriteOp::Put {
                item: item("p", "new", &[]),
                condition: Some(Condition::NotExists),
            },
            WriteOp::Put {
                item: item("p", "exists", &[("v", AttrValue::n(2))]),
                condition: Some(Condition::NotExists),
            },
            WriteOp::Update {
                key: Key::new("p", "counter"),
                actions: vec![UpdateAction::AddNumber("c".into(), "1".into())],
                condition: None,
            },
        ]);
        assert!(matches!(out[0], Ok(None)));
        assert!(matches!(out[1], Err(StoreError::ConditionFailed { .. })));
        assert!(matches!(out[2], Ok(None)));
        let get = |sk: &str| s.get(&Key::new("p", sk), true).unwrap();
        assert!(get("new").is_some());
        assert_eq!(get("exists").unwrap().get("v"), Some(&AttrValue::n(1)));
        assert_eq!(get("counter").unwrap().get("c"), Some(&AttrValue::n(1)));
        assert!(s.write_many(Vec::new()).is_empty());
    });
}

#[test]
fn batched_puts_and_deletes_fail_one_by_one() {
    each_store(|s| {
        put(s, item("p", "old", &[("v", AttrValue::n(1))]));
        let too_big = item("p", "big", &[("x", AttrValue::s("y".repeat(500_000)))]);
        let out = s.batch_write(vec![
            WriteOp::Put {
                item: item("p", "new", &[("v", AttrValue::n(2))]),
                condition: None,
            },
            WriteOp::Put {
                item: too_big,
                condition: None,
            },
            WriteOp::Delete {
                key: Key::new("p", "old"),
                condition: None,
            },
            WriteOp::Delete {
                key: Key::new("p", "never"),
                condition: None,
            },
        ]);
        assert!(
            out[0].is_ok() && out[2].is_ok() && out[3].is_ok(),
            "{out:?}"
        );
        assert!(
            matches!(&out[1], Err(e @ StoreError::ItemTooLarge { .. }) if e.to_string().contains("400 KB")),
            "{out:?}"
        );
        let get = |sk: &str| s.get(&Key::new("p", sk), true).unwrap();
        assert_eq!(get("new").unwrap().get("v"), Some(&AttrValue::n(2)));
        assert!(get("old").is_none() && get("big").is_none());
        assert!(s.batch_write(Vec::new()).is_empty());
    });
}

#[test]
fn a_transactions_condition_check_writes_nothing() {
    each_store(|s| {
        let check = |cond: Condition| WriteOp::Update {
            key: Key::new("p", "checked"),
            actions: vec![],
            condition: Some(cond),
        };
        s.transact(vec![
            check(Condition::AttrNotExists("stamp".into())),
            WriteOp::Put {
                item: item("p", "written", &[]),
                condition: None,
            },
        ])
        .unwrap();
        assert!(s.get(&Key::new("p", "checked"), true).unwrap().is_none());
        assert!(s.get(&Key::new("p", "written"), true).unwrap().is_some());
        let failed = s.transact(vec![
            check(Condition::Exists),
            WriteOp::Delete {
                key: Key::new("p", "written"),
                condition: None,
            },
        ]);
        assert!(matches!(failed, Err(StoreError::TransactionCanceled(_))));
        assert!(s.get(&Key::new("p", "written"), true).unwrap().is_some());
    });
}

#[test]
fn transactions_are_all_or_nothing() {
    each_store(|s| {
        put(s, item("p", "exists", &[]));
        let ops = vec![
            WriteOp::Put {
                item: item("p", "new", &[]),
                condition: Some(Condition::NotExists),
            },
            WriteOp::Update {
                key: Key::new("p", "counter"),
                actions: vec![UpdateAction::AddNumber("c".into(), "1".into())],
                condition: None,
            },
            WriteOp::Put {
                item: item("p", "exists", &[("x", AttrValue::n(1))]),
                condition: Some(Condition::NotExists),
            },
        ];
        let err = s.transact(ops).unwrap_err();
        match err {
            StoreError::TransactionCanceled(r) => {
                assert_eq!(r, "[None, None, ConditionalCheckFailed]")
            }
            other => panic!("{other}"),
        }
        assert_eq!(s.query("p", "", true).unwrap().len(), 1, "nothing written");
        s.transact(vec![
            WriteOp::Put {
                item: item("p", "new", &[]),
                condition: Some(Condition::NotExists),
            },
            WriteOp::Delete {
                key: Key::new("p", "exists"),
                condition: Some(Condition::Exists),
            },
            WriteOp::Update {
                key: Key::new("p", "counter"),
                actions: vec![UpdateAction::AddNumber("c".into(), "1".into())],
                condition: None,
            },
        ])
        .unwrap();
        let sks: Vec<String> = s
            .query("p", "", true)
            .unwrap()
            .iter()
            .map(|i| Key::of(i).unwrap().sk)
            .collect();
        assert_eq!(sks, ["counter", "new"]);
        // A write error inside the transaction (ADD on a string) rolls back the rest.
        let err = s.transact(vec![
            WriteOp::Delete {
                key: Key::new("p", "new"),
                condition: None,
            },
            WriteOp::Update {
                key: Key::new("p", "counter"),
                actions: vec![UpdateAction::AddToSet("c".into(), vec!["x".into()])],
                condition: None,
            },
        ]);
        assert!(err.is_err());
        assert!(s.get(&Key::new("p", "new"), true).unwrap().is_some());
        // Two writes to one key and oversized transactions are refused.
        assert!(s
            .transact(vec![
                WriteOp::Delete {
                    key: Key::new("p", "a"),
                    condition: None
                },
                WriteOp::Delete {
                    key: Key::new("p", "a"),
                    condition: None
                },
            ])
            .is_err());
        let many = (0..101)
            .map(|i| WriteOp::Delete {
                key: Key::new("p", format!("{i}")),
                condition: None,
            })
            .collect();
        assert!(s.transact(many).is_err());
    });
}

#[test]
fn query_returns_a_prefix_in_sk_order() {
    each_store(|s| {
        for sk in [
            "#CONFIG#gpt-4",
            "#META",
            "#CONFIG#_default_",
            "#CONFIG",
            "#CONFIH",
            "#CONFIG#é",
        ] {
            put(s, item("E", sk, &[]));
        }
        put(s, item("F", "#CONFIG#x", &[]));
        let sks = |p: &str| -> Vec<String> {
            s.query("E", p, false)
                .unwrap()
                .iter()
                .map(|i| Key::of(i).unwrap().sk)
                .collect()
        };
        assert_eq!(
            sks("#CONFIG#"),
            ["#CONFIG#_default_", "#CONFIG#gpt-4", "#CONFIG#é"]
        );
        assert_eq!(
            sks("#CONFIG"),
            ["#CONFIG", "#CONFIG#_default_", "#CONFIG#gpt-4", "#CONFIG#é"]
        );
        assert_eq!(sks("").len(), 6);
        assert_eq!(sks("#NOPE"), Vec::<String>::new());
    });
}

#[test]
fn index_queries_find_items_by_their_gsi_keys() {
    each_store(|s| {
        let gsi3 = |e: &str| {
            item(
                &format!("ns/ENTITY#{e}"),
                "#CONFIG#gpt-4",
                &[
                    ("GSI3PK", AttrValue::s("ns/ENTITY_CONFIG#gpt-4")),
                    ("GSI3SK", AttrValue::s(e)),
                ],
            )
        };
        put(s, gsi3("user-2"));
        put(s, gsi3("user-1"));
        put(s, gsi3("admin"));
        // Only GSI3PK, no GSI3SK: not in the index.
        put(
            s,
            item(
                "ns/ENTITY#x",
                "#CONFIG#gpt-4",
                &[("GSI3PK", AttrValue::s("ns/ENTITY_CONFIG#gpt-4"))],
            ),
        );
        let keys = s
            .query_index(Index::Gsi3, "ns/ENTITY_CONFIG#gpt-4", "user-")
            .unwrap();
        assert_eq!(
            keys,
            [
                Key::new("ns/ENTITY#user-1", "#CONFIG#gpt-4"),
                Key::new("ns/ENTITY#user-2", "#CONFIG#gpt-4")
            ]
        );
        assert_eq!(
            s.query_index(Index::Gsi3, "ns/ENTITY_CONFIG#gpt-4", "")
                .unwrap()
                .len(),
            3
        );
        assert!(s
            .query_index(Index::Gsi1, "ns/ENTITY_CONFIG#gpt-4", "")
            .unwrap()
            .is_empty());
        // Counting agrees with the query, prefix or not.
        for (index, prefix, n) in [
            (Index::Gsi3, "", 3),
            (Index::Gsi3, "user-", 2),
            (Index::Gsi3, "user-1", 1),
            (Index::Gsi3, "user-3", 0),
            (Index::Gsi1, "", 0),
        ] {
            assert_eq!(
                s.count_index(index, "ns/ENTITY_CONFIG#gpt-4", prefix)
                    .unwrap(),
                n,
                "{index:?} {prefix:?}"
            );
        }
        // Replacing the item without its index keys takes it out of the index.
        put(s, item("ns/ENTITY#admin", "#CONFIG#gpt-4", &[]));
        assert_eq!(
            s.query_index(Index::Gsi3, "ns/ENTITY_CONFIG#gpt-4", "")
                .unwrap()
                .len(),
            2
        );
    });
}

#[test]
fn batch_get_answers_in_key_order() {
    each_store(|s| {
        put(s, item("a", "1", &[]));
        put(s, item("b", "2", &[]));
        let got = s
            .batch_get(
                &[Key::new("b", "2"), Key::new("x", "x"), Key::new("a", "1")],
                false,
            )
            .unwrap();
        assert_eq!(
            got.iter().map(Option::is_some).collect::<Vec<_>>(),
            [true, false, true]
        );
        assert_eq!(
            Key::of(got[0].as_ref().unwrap()).unwrap(),
            Key::new("b", "2")
        );
    });
}

#[test]
fn each_write_of_a_batch_fails_on_its_own() {
    each_store(|s| {
        let out = s.write_many(vec![
            WriteOp::Update {
                key: Key::new("p", "a"),
                actions: vec![UpdateAction::AddNumber("n".into(), "one".into())],
                condition: None,
            },
            WriteOp::Put {
                item: item("p", "b", &[]),
                condition: None,
            },
        ]);
        assert!(matches!(out[0], Err(StoreError::Backend(_))), "{out:?}");
        assert!(matches!(out[1], Ok(None)), "{out:?}");
        assert!(s.get(&Key::new("p", "a"), true).unwrap().is_none());
        assert!(s.get(&Key::new("p", "b"), true).unwrap().is_some());
    });
}
