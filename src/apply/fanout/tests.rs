//! Fan-out over the in-memory store: what lands on which bucket.

use super::*;
use crate::items::attrs::{Field, LimitAttr, Prefix};
use crate::store::memory::MemoryStore;

const NS: &str = "ns1";
const NOW: i64 = 1_800_000_000_000;

use crate::store::item::keyed as item;

/// A token bucket's attributes on a config item.
fn limit(n: &str, cp: i64, ra: i64, rp: i64) -> Vec<(String, AttrValue)> {
    let attr = |f| LimitAttr::spell(Prefix::Limit, n, f);
    vec![
        (attr(Field::Capacity), AttrValue::n(cp)),
        (attr(Field::RefillAmount), AttrValue::n(ra)),
        (attr(Field::RefillPeriod), AttrValue::n(rp)),
    ]
}

fn config(key: Key, attrs: Vec<(String, AttrValue)>) -> Item {
    let mut i: Item = attrs.into_iter().collect();
    i.insert("PK".into(), AttrValue::s(key.pk));
    i.insert("SK".into(), AttrValue::s(key.sk));
    i
}

/// Stores a config item at `key` declaring one token bucket.
fn put_limit(s: &MemoryStore, key: Key, n: &str, cp: i64, ra: i64, rp: i64) {
    s.put(config(key, limit(n, cp, ra, rp)));
}

/// A bucket as the limiter creates it: one limit plus the internal `wcu`.
fn bucket(e: &str, r: &str, k: u32, limit_name: &str, cp_milli: i64) -> Item {
    use BucketField::{Capacity, RefillAmount, RefillPeriod, Tokens, TotalConsumed};
    item(
        &format!("{NS}/BUCKET#{e}#{r}#{k}"),
        "#STATE",
        &[
            ("GSI2PK", AttrValue::s(format!("{NS}/RESOURCE#{r}"))),
            ("GSI2SK", AttrValue::s(format!("BUCKET#{e}#{k}"))),
            ("GSI3PK", AttrValue::s(format!("{NS}/ENTITY#{e}"))),
            ("GSI3SK", AttrValue::s(format!("BUCKET#{r}#{k}"))),
            ("GSI4PK", AttrValue::s(NS)),
            ("GSI4SK", AttrValue::s(format!("BUCKET#{e}#{r}#{k}"))),
            (&Capacity.of(limit_name), AttrValue::n(cp_milli)),
            (&RefillAmount.of(limit_name), AttrValue::n(cp_milli)),
            (&RefillPeriod.of(limit_name), AttrValue::n(60_000)),
            (&Tokens.of(limit_name), AttrValue::n(cp_milli - 1000)),
            (&TotalConsumed.of(limit_name), AttrValue::n(1000)),
            ("b_wcu_cp", AttrValue::n(1_000_000)),
            ("b_wcu_tk", AttrValue::n(1_000_000)),
            ("rf", AttrValue::n(NOW - 5000)),
            ("shard_count", AttrValue::n(2)),
            ("ttl", AttrValue::n(NOW / 1000 + 420)),
            ("vu", AttrValue::n(NOW + 60_000)),
        ],
    )
}

fn bucket_item(store: &MemoryStore, e: &str, r: &str, k: u32) -> Item {
    store
        .item(&format!("{NS}/BUCKET#{e}#{r}#{k}"), "#STATE")
        .expect("bucket exists")
}

fn try_fan(
    s: &MemoryStore,
    kind: FanOutKind,
    level: LevelKind,
    target: &str,
) -> Result<(), FanOutError> {
    run(s, NS, &Owed::new(kind, level, target), NOW)
}

/// Runs one fan-out that must succeed.
fn fan(s: &MemoryStore, kind: FanOutKind, level: LevelKind, target: &str) {
    try_fan(s, kind, level, target).unwrap();
}

fn n(i: &Item, a: &str) -> Option<String> {
    i.get(a).and_then(AttrValue::as_n).map(str::to_string)
}

#[test]
fn entity_sync_updates_every_shard_of_that_pair_only() {
    let s = MemoryStore::new();
    put_limit(&s, levels::entity_key(NS, "u1", "gpt"), "rpm", 2, 2, 60);
    put_limit(&s, levels::resource_key(NS, "gpt"), "rpm", 100, 100, 60);
    for k in 0..2 {
        s.put(bucket("u1", "gpt", k, "rpm", 100_000));
    }
    s.put(bucket("u1", "claude", 0, "rpm", 100_000));
    s.put(bucket("u2", "gpt", 0, "rpm", 100_000));
    let before_other = s.snapshot();
    fan(&s, FanOutKind::Sync, LevelKind::Entity, "u1/gpt");
    for k in 0..2 {
        let b = bucket_item(&s, "u1", "gpt", k);
        assert_eq!(n(&b, "b_rpm_cp").as_deref(), Some("2000"));
        assert_eq!(n(&b, "b_rpm_ra").as_deref(), Some("2000"));
        assert_eq!(n(&b, "b_rpm_rp").as_deref(), Some("60000"));
        assert_eq!(n(&b, "vu").as_deref(), Some("0"));
        assert_eq!(
            n(&b, "b_rpm_tk").as_deref(),
            Some("99000"),
            "tk is never written"
        );
        assert_eq!(n(&b, "shard_count").as_deref(), Some("2"));
        assert!(
            !b.contains_key("ttl"),
            "entity-level limits keep the bucket"
        );
        assert!(b.contains_key("b_wcu_cp"));
    }
    for (e, r) in [("u1", "claude"), ("u2", "gpt")] {
        let key = Key::new(format!("{NS}/BUCKET#{e}#{r}#0"), "#STATE");
        assert_eq!(s.snapshot()[&key], before_other[&key], "{e}/{r} untouched");
    }
}

#[test]
fn default_sync_writes_each_bucket_its_own_resolution() {
    let s = MemoryStore::new();
    let default = levels::entity_key(NS, "u1", "_default_");
    put_limit(&s, default, "rph", 30, 30, 3600);
    put_limit(&s, levels::entity_key(NS, "u1", "gpt"), "rpm", 5, 5, 60);
    s.put(bucket("u1", "gpt", 0, "rpm", 100_000));
    s.put(bucket("u1", "claude", 0, "rpm", 100_000));
    fan(&s, FanOutKind::Sync, LevelKind::Entity, "u1/_default_");
    let gpt = bucket_item(&s, "u1", "gpt", 0);
    assert_eq!(
        n(&gpt, "b_rpm_cp").as_deref(),
        Some("5000"),
        "entity+resource config wins"
    );
    assert!(!gpt.contains_key("b_rph_cp"));
    let claude = bucket_item(&s, "u1", "claude", 0);
    assert_eq!(n(&claude, "b_rph_cp").as_deref(), Some("30000"));
    assert_eq!(n(&claude, "b_rph_rp").as_deref(), Some("3600000"));
    assert!(
        !claude.contains_key("b_rpm_cp") && !claude.contains_key("b_rpm_tk"),
        "rpm no longer declared"
    );
}

#[test]
fn a_deleted_entity_level_resyncs_to_the_defaults_with_a_ttl() {
    let s = MemoryStore::new();
    put_limit(&s, levels::resource_key(NS, "gpt"), "rpm", 100, 100, 60);
    s.put(bucket("u1", "gpt", 0, "rpm", 7_000));
    fan(&s, FanOutKind::Sync, LevelKind::Entity, "u1/gpt");
    let b = bucket_item(&s, "u1", "gpt", 0);
    assert_eq!(n(&b, "b_rpm_cp").as_deref(), Some("100000"));
    assert_eq!(n(&b, "ttl"), Some((NOW / 1000 + 7 * 60).to_string()));
}

#[test]
fn resource_disabled_skips_entities_with_their_own_directive() {
    let s = MemoryStore::new();
    let mut res = limit("rpm", 100, 100, 60);
    res.push(("disabled".into(), AttrValue::s("bypass")));
    s.put(config(levels::resource_key(NS, "gpt"), res));
    s.put(config(
        levels::entity_key(NS, "vip", "gpt"),
        vec![("disabled".into(), AttrValue::Bool(false))],
    ));
    let mut stamped = bucket("u1", "gpt", 0, "rpm", 1000);
    stamped.insert("disabled".into(), AttrValue::Bool(true));
    s.put(stamped);
    s.put(bucket("vip", "gpt", 0, "rpm", 1000));
    fan(&s, FanOutKind::Disabled, LevelKind::Resource, "gpt");
    let u1 = bucket_item(&s, "u1", "gpt", 0);
    assert!(!u1.contains_key("disabled"));
    let bypass: i64 = n(&u1, "bypass").unwrap().parse().unwrap();
    assert!((NOW + 48_000..=NOW + 60_000).contains(&bypass), "{bypass}");
    assert!(!bucket_item(&s, "vip", "gpt", 0).contains_key("bypass"));

    // The entity's own directive, fanned out at entity level, clears stamps.
    let mut vip = bucket_item(&s, "vip", "gpt", 0);
    vip.insert("disabled".into(), AttrValue::Bool(true));
    s.put(vip);
    fan(&s, FanOutKind::Disabled, LevelKind::Entity, "vip/gpt");
    let vip = bucket_item(&s, "vip", "gpt", 0);
    assert!(!vip.contains_key("disabled") && !vip.contains_key("bypass"));
}

#[test]
fn cascade_copies_the_owner_stamp_and_skips_owners_without_meta() {
    let s = MemoryStore::new();
    s.put(config(
        levels::resource_key(NS, "gpt"),
        vec![("cascade".into(), AttrValue::Bool(true))],
    ));
    s.put(item(
        &format!("{NS}/ENTITY#child"),
        "#META",
        &[
            ("parent_id", AttrValue::s("org")),
            ("cascade", AttrValue::Bool(false)),
            ("pgen", AttrValue::n(42)),
            ("pinc", AttrValue::s("abc")),
        ],
    ));
    s.put(bucket("child", "gpt", 0, "rpm", 1000));
    s.put(bucket("ghost", "gpt", 0, "rpm", 1000));
    let ghost_before = bucket_item(&s, "ghost", "gpt", 0);
    fan(&s, FanOutKind::Cascade, LevelKind::Resource, "gpt");
    let b = bucket_item(&s, "child", "gpt", 0);
    assert_eq!(
        b.get("cascade"),
        Some(&AttrValue::Bool(true)),
        "the resource policy wins over META"
    );
    assert_eq!(b.get("parent_id"), Some(&AttrValue::s("org")));
    assert_eq!(n(&b, "pgen").as_deref(), Some("42"));
    assert_eq!(bucket_item(&s, "ghost", "gpt", 0), ghost_before);
}

#[test]
fn system_soft_stamps_only_buckets_resolving_from_system() {
    let s = MemoryStore::new();
    let mut sys = limit("rpm", 100, 100, 60);
    sys.push(("l_rpm_soft".into(), AttrValue::Bool(true)));
    s.put(config(levels::system_key(NS), sys));
    put_limit(&s, levels::resource_key(NS, "gpt"), "rpm", 50, 50, 60);
    s.put(bucket("u1", "claude", 0, "rpm", 100_000));
    s.put(bucket("u1", "gpt", 0, "rpm", 50_000));
    fan(&s, FanOutKind::Soft, LevelKind::System, "");
    assert!(bucket_item(&s, "u1", "claude", 0).contains_key("b_rpm_soft"));
    assert!(!bucket_item(&s, "u1", "gpt", 0).contains_key("b_rpm_soft"));
}

#[test]
fn nothing_is_created_and_malformed_targets_are_refused() {
    let s = MemoryStore::new();
    put_limit(&s, levels::entity_key(NS, "u1", "gpt"), "rpm", 2, 2, 60);
    let before = s.snapshot();
    fan(&s, FanOutKind::Sync, LevelKind::Entity, "u1/gpt");
    assert_eq!(s.snapshot(), before);
    assert!(try_fan(&s, FanOutKind::Sync, LevelKind::Entity, "no-slash").is_err());
}

#[test]
fn an_unreadable_config_item_fails_the_fan_out() {
    let s = MemoryStore::new();
    s.put(config(
        levels::entity_key(NS, "u1", "gpt"),
        vec![("w_x_cp".into(), AttrValue::n(1))],
    ));
    s.put(bucket("u1", "gpt", 0, "rpm", 1000));
    let err = try_fan(&s, FanOutKind::Sync, LevelKind::Entity, "u1/gpt")
        .unwrap_err()
        .to_string();
    assert!(err.contains("unreadable"), "{err}");
}

#[test]
fn many_fan_outs_at_once_equal_one_at_a_time() {
    let build = || {
        let s = MemoryStore::new();
        put_limit(&s, levels::resource_key(NS, "gpt"), "rpm", 100, 100, 60);
        for e in 0..40 {
            let ent = format!("u{e:02}");
            if e % 3 != 0 {
                put_limit(&s, levels::entity_key(NS, &ent, "gpt"), "rpm", e, e, 60);
            }
            if e % 4 == 0 {
                s.put(config(
                    levels::entity_key(NS, &ent, "_default_"),
                    vec![("disabled".into(), AttrValue::Bool(true))],
                ));
            }
            s.put(bucket(&ent, "gpt", 0, "rpm", 7_000));
            s.put(bucket(&ent, "claude", 0, "rpm", 7_000));
        }
        s
    };
    let owed: Vec<Owed> = (0..40)
        .flat_map(|e| {
            [
                Owed::new(FanOutKind::Sync, LevelKind::Entity, format!("u{e:02}/gpt")),
                Owed::new(
                    FanOutKind::Disabled,
                    LevelKind::Entity,
                    format!("u{e:02}/_default_"),
                ),
            ]
        })
        .chain([Owed::new(FanOutKind::Sync, LevelKind::Entity, "bad")])
        .collect();
    let one_by_one = build();
    let expected: Vec<bool> = owed
        .iter()
        .map(|o| run(&one_by_one, NS, o, NOW).is_ok())
        .collect();
    let batched = build();
    let got: Vec<bool> = run_many(&batched, NS, &owed, NOW)
        .iter()
        .map(Result::is_ok)
        .collect();
    assert_eq!(got, expected);
    assert_eq!(
        got.iter().filter(|ok| !**ok).count(),
        1,
        "only the malformed target fails"
    );
    assert_eq!(batched.snapshot(), one_by_one.snapshot());
    assert!(bucket_item(&batched, "u04", "claude", 0).contains_key("disabled"));
    assert_eq!(
        n(&bucket_item(&batched, "u05", "gpt", 0), "b_rpm_cp").as_deref(),
        Some("5000")
    );
}
