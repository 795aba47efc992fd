//! The reference's raw item dump (docs/storage.md, "Interop";
//! `fixtures/items/reference-dump.jsonl`) against this layout: every item
//! survives the local store unchanged, every config item reads back, and the
//! levels the Python client wrote are rebuilt byte for byte, registries
//! included.

use indexmap::IndexMap;

use crate::apply::writes;
use crate::items::{config, keys, namespace};
use crate::manifest::model::{
    LevelConfig, LimitSpec, Modifier, OnUnavailable, ResetEntry, ScheduleEntry, SystemLevel,
};
use crate::plan::level::Level;
use crate::store::local::LocalStore;
use crate::store::typed_json::item_from_str;
use crate::store::{Item, Key, Store, WriteOp};

const DUMP: &str = include_str!("../../fixtures/items/reference-dump.jsonl");
const NS: &str = "lum6SW9LwCI";

fn dump() -> Vec<Item> {
    DUMP.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| item_from_str(l).unwrap())
        .collect()
}

fn find(items: &[Item], pk: &str, sk: &str) -> Item {
    let key = Key::new(pk, sk);
    items
        .iter()
        .find(|i| Key::of(i).as_ref() == Some(&key))
        .unwrap_or_else(|| panic!("{pk} / {sk} not in the dump"))
        .clone()
}

fn store() -> (tempfile::TempDir, LocalStore) {
    let dir = tempfile::tempdir().unwrap();
    let s = LocalStore::open(&dir.path().join("s.sqlite"), "t").unwrap();
    (dir, s)
}

fn limit(capacity: u64, refill: u64, period: u64) -> LimitSpec {
    LimitSpec::bucket(capacity, refill, period)
}

#[test]
fn every_dump_item_survives_the_local_store() {
    let (_d, s) = store();
    let items = dump();
    assert_eq!(items.len(), 24);
    for item in &items {
        s.write(WriteOp::Put {
            item: item.clone(),
            condition: None,
        })
        .unwrap();
    }
    for item in &items {
        let key = Key::of(item).unwrap();
        assert_eq!(s.get(&key, true).unwrap().as_ref(), Some(item), "{key:?}");
    }
    // Namespaces resolve from the real registry records.
    assert_eq!(
        namespace::resolve(&s, "default").unwrap().as_deref(),
        Some(NS)
    );
    assert_eq!(
        namespace::resolve(&s, "tenant-a").unwrap().as_deref(),
        Some("ZzOcV1xqyB8")
    );
    let names: Vec<String> = namespace::list(&s)
        .unwrap()
        .into_iter()
        .map(|r| r.name)
        .collect();
    assert_eq!(names, ["default", "tenant-a"]);
    // GSI lookups on the real index keys: the client's sparse ENTITY_CONFIG index
    // and the bucket index GSI2.
    let gsi3 = s
        .query_index(
            crate::store::Index::Gsi3,
            &keys::entity_config_gsi3pk(NS, "gpt-4"),
            "",
        )
        .unwrap();
    assert_eq!(gsi3, [keys::entity_config_key(NS, "user-1", "gpt-4")]);
    let buckets = s
        .query_index(
            crate::store::Index::Gsi2,
            &format!("{NS}/RESOURCE#gpt-4"),
            "BUCKET#",
        )
        .unwrap();
    assert_eq!(buckets.len(), 3);
}

#[test]
fn every_config_item_in_the_dump_reads_back() {
    let items = dump();
    let configs: Vec<&Item> = items
        .iter()
        .filter(|i| {
            let k = Key::of(i).unwrap();
            k.sk.starts_with(keys::CONFIG_SK)
        })
        .collect();
    assert_eq!(configs.len(), 6);
    for item in configs {
        let level = config::decode_level(item).unwrap_or_else(|e| panic!("{e}"));
        assert!(!level.limits.is_empty());
    }
    let rsrc =
        config::decode_level(&find(&items, &keys::resource_pk(NS, "gpt-4"), "#CONFIG")).unwrap();
    let rpm = &rsrc.limits[1];
    assert_eq!(rpm.name, "rpm");
    assert_eq!(rpm.schedule.len(), 2);
    assert_eq!(rpm.schedule[1].cron, "* 0-6 * * *");
}

/// The levels the dump's client calls wrote (the interop script): rebuilt from the
/// model they describe, they are identical to the dump, and writing them with
/// the client's registry bookkeeping produces the dump's registry items.
#[test]
fn client_written_levels_and_registries_are_reproduced() {
    let items = dump();
    let ny = "America/New_York";
    let mut rpm = limit(600, 500, 60);
    rpm.schedule = vec![
        ScheduleEntry {
            cron: "* 9-17 * * MON-FRI".into(),
            tz: ny.into(),
            modifier: Modifier::Scale(0.5),
        },
        ScheduleEntry {
            cron: "* 0-6 * * *".into(),
            tz: ny.into(),
            modifier: Modifier::Absolute {
                capacity: Some(100),
                refill_amount: Some(50),
                refill_period_seconds: None,
            },
        },
    ];
    // Limit.quota() stores a refill period of 1.
    let mut rpd = limit(10000, 0, 1);
    rpd.reset_schedule = vec![ResetEntry {
        cron: "0 0 * * *".into(),
        tz: ny.into(),
    }];
    let resource = LevelConfig {
        limits: IndexMap::from([("rpm".to_string(), rpm), ("rpd".to_string(), rpd)]),
        ..Default::default()
    };
    let mut tpm = limit(20000, 20000, 60);
    tpm.soft = true;
    let mut session = limit(2000, 0, 1);
    session.reset_after_seconds = Some(18000);
    let user1 = LevelConfig {
        limits: IndexMap::from([
            ("rpm".to_string(), limit(60, 60, 60)),
            ("tpm".to_string(), tpm),
            ("session".to_string(), session),
        ]),
        ..Default::default()
    };
    let user1_default = LevelConfig {
        limits: IndexMap::from([("rph".to_string(), limit(3000, 3000, 3600))]),
        ..Default::default()
    };
    let system = SystemLevel {
        limits: IndexMap::from([
            ("rpm".to_string(), limit(1000, 1000, 60)),
            ("tpm".to_string(), limit(100000, 100000, 60)),
        ]),
        on_unavailable: Some(OnUnavailable::Block),
    };

    let built = [
        config::build_system(NS, &system).unwrap(),
        config::build_resource(NS, "gpt-4", &resource).unwrap(),
        config::build_entity(NS, "user-1", "gpt-4", &user1).unwrap(),
        config::build_entity(NS, "user-1", "_default_", &user1_default).unwrap(),
    ];
    for item in &built {
        let key = Key::of(item).unwrap();
        assert_eq!(item, &find(&items, &key.pk, &key.sk), "{key:?}");
    }

    let (_d, s) = store();
    // The same writes apply performs, so the registries apply keeps are the client's.
    let levels = [
        Level::System,
        Level::Resource("gpt-4".into()),
        Level::Entity("user-1".into(), "gpt-4".into()),
        Level::Entity("user-1".into(), "_default_".into()),
    ];
    for (level, item) in levels.iter().zip(built) {
        writes::tests::put_level(&s, NS, level, item);
    }
    for sk in [keys::RESOURCES_SK, keys::ENTITY_CONFIG_RESOURCES_SK] {
        let key = Key::new(keys::system_pk(NS), sk);
        // Ours carries the counts' recount stamp too, which the client ignores.
        let mut ours = s.get(&key, true).unwrap();
        if let Some(i) = ours.as_mut() {
            i.remove(crate::apply::counts::STAMP_ATTR);
        }
        assert_eq!(ours, Some(find(&items, &key.pk, &key.sk)), "{sk}");
    }
}

#[test]
fn provisioner_written_levels_compare_equal_to_ours() {
    // user-3 was written by the provisioner (no config_version, no GSI3): the
    // same limits built here differ only in bookkeeping, which plan ignores.
    let items = dump();
    let theirs = find(&items, &keys::entity_pk(NS, "user-3"), "#CONFIG#gpt-4");
    let mut rpm = limit(30, 30, 60);
    rpm.schedule = vec![ScheduleEntry {
        cron: "* 0-6 * * *".into(),
        tz: "UTC".into(),
        modifier: Modifier::Scale(2.0),
    }];
    let ours = config::build_entity(
        NS,
        "user-3",
        "gpt-4",
        &LevelConfig {
            limits: IndexMap::from([("rpm".to_string(), rpm)]),
            ..Default::default()
        },
    )
    .unwrap();
    assert_ne!(ours, theirs);
    assert!(config::same_limits(&ours, &theirs));
}
