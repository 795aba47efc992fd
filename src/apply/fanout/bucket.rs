//! What one fan-out writes onto one bucket shard (docs/storage.md, "Bucket
//! items"): the limit parameters in milli-units, schedules, stamps, `vu` and
//! `ttl`.
//!
//! Only token buckets and quotas reach a bucket. Rolling windows and
//! concurrency limits (issue #7) live under `r_`/`c_` attributes of the config
//! item, which [`super::levels::Levels`] leaves out: written as `b_{n}_*`
//! here, Python 0.17 would find them and enforce them as token buckets. A limit
//! that turns from a bucket into a rolling window therefore leaves the bucket
//! like any limit the level no longer declares.

use std::collections::{BTreeMap, BTreeSet};

use super::levels::Source;
use crate::items::attrs::{bucket_item as bucket, bucket_limits, BucketField, INTERNAL_LIMIT};
use crate::items::config::{StoredEntry, StoredLevel, StoredLimit};
use crate::store::{AttrValue, Item, UpdateAction};
use zae_limiter_engine::encoding::Modifier;

/// Fields removed for a limit the level no longer declares (as the reference does).
const REMOVED_FIELDS: [BucketField; 8] = [
    BucketField::Tokens,
    BucketField::Capacity,
    BucketField::RefillAmount,
    BucketField::RefillPeriod,
    BucketField::TotalConsumed,
    BucketField::Schedule,
    BucketField::ResetSchedule,
    BucketField::Soft,
];

/// A bucket's owner and shard, parsed from its PK `{ns}/BUCKET#{e}#{r}#{k}`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct BucketId {
    pub entity: String,
    pub resource: String,
    pub shard: String,
}

impl BucketId {
    pub fn parse(ns: &str, pk: &str) -> Option<BucketId> {
        let rest = pk.strip_prefix(ns)?.strip_prefix("/BUCKET#")?;
        let mut parts = rest.split('#');
        let (e, r, k) = (parts.next()?, parts.next()?, parts.next()?);
        if parts.next().is_some() || e.is_empty() || r.is_empty() {
            return None;
        }
        Some(BucketId {
            entity: e.into(),
            resource: r.into(),
            shard: k.into(),
        })
    }
}

/// `value × 1000`: whole tokens and seconds become the bucket's milli-units.
fn milli(value: u64) -> AttrValue {
    AttrValue::n(u128::from(value) * 1000)
}

/// Stamp deadline: `now + 60 s × U(0.8, 1.0)`, as the reference spreads renewals.
pub fn stamp_deadline(now_ms: i64) -> i64 {
    now_ms + 48_000 + crate::random::jitter(12_000) as i64
}

/// The update that syncs one bucket to the limits resolved for it (`cfg`: the
/// level as 0.17 reads it, see [`super::levels::Levels`]). `current` is the
/// bucket as read (to find limits no longer declared).
pub fn sync_actions(
    cfg: &StoredLevel,
    source: Source,
    current: &Item,
    now_ms: i64,
) -> Vec<UpdateAction> {
    let mut set: BTreeMap<String, AttrValue> = BTreeMap::new();
    let mut remove: BTreeSet<String> = BTreeSet::new();
    let deadline = stamp_deadline(now_ms);
    for l in cfg.buckets() {
        let n = &l.name;
        set.insert(BucketField::Capacity.of(n), milli(l.capacity));
        set.insert(BucketField::RefillAmount.of(n), milli(l.refill_amount));
        set.insert(BucketField::RefillPeriod.of(n), milli(l.refill_period));
        match l.reset_after_seconds {
            Some(rsa) => {
                set.insert(BucketField::ResetAfter.of(n), AttrValue::n(rsa));
            }
            None => {
                remove.insert(BucketField::ResetAfter.of(n));
            }
        }
        if l.soft {
            set.insert(BucketField::Soft.of(n), AttrValue::n(deadline));
        } else {
            remove.insert(BucketField::Soft.of(n));
        }
    }
    let (s, r) = (&mut set, &mut remove);
    let (sched, rsched) = (BucketField::Schedule, BucketField::ResetSchedule);
    schedule_defaults(
        cfg,
        StoredLimit::compact_schedule,
        sched,
        bucket::SCHED,
        s,
        r,
    );
    schedule_defaults(
        cfg,
        StoredLimit::compact_reset_schedule,
        rsched,
        bucket::RSCHED,
        s,
        r,
    );
    if set.contains_key(bucket::SCHED) || set.contains_key(bucket::RSCHED) {
        let tz = cfg.sched_tz.clone().unwrap_or_else(|| "UTC".into());
        set.insert(bucket::SCHED_TZ.into(), AttrValue::S(tz));
    } else {
        remove.insert(bucket::SCHED_TZ.into());
    }
    set.insert(bucket::VALID_UNTIL.into(), AttrValue::n(0));
    if source.is_entity() {
        remove.insert(bucket::TTL.into());
    } else {
        let secs = now_ms.div_euclid(1000) + 7 * recovery_seconds(cfg);
        set.insert(bucket::TTL.into(), AttrValue::n(secs));
    }
    for gone in bucket_limits(current) {
        if gone == INTERNAL_LIMIT || cfg.buckets().any(|l| l.name == gone) {
            continue;
        }
        for f in REMOVED_FIELDS {
            remove.insert(f.of(&gone));
        }
    }
    // Only remove what is there: smaller expressions, same result.
    remove.retain(|a| current.contains_key(a) && !set.contains_key(a));
    let mut actions: Vec<UpdateAction> = set
        .into_iter()
        .map(|(a, v)| UpdateAction::Set(a, v))
        .collect();
    actions.extend(remove.into_iter().map(UpdateAction::Remove));
    actions
}

/// Item-level default (the first scheduled limit's encoding, by name) plus
/// per-limit overrides where a limit differs (`-` = explicitly none).
fn schedule_defaults(
    cfg: &StoredLevel,
    pick: fn(&StoredLimit) -> Option<String>,
    field: BucketField,
    attr: &str,
    set: &mut BTreeMap<String, AttrValue>,
    remove: &mut BTreeSet<String>,
) {
    let default = cfg.buckets().find_map(pick);
    match &default {
        Some(d) => {
            set.insert(attr.to_string(), AttrValue::s(d));
        }
        None => {
            remove.insert(attr.to_string());
        }
    }
    for l in cfg.buckets() {
        let per_limit = field.of(&l.name);
        match (&default, pick(l)) {
            (Some(d), Some(o)) if o == *d => {
                remove.insert(per_limit);
            }
            (Some(_), Some(o)) => {
                set.insert(per_limit, AttrValue::S(o));
            }
            (Some(_), None) => {
                set.insert(per_limit, AttrValue::s("-"));
            }
            (None, _) => {
                remove.insert(per_limit);
            }
        }
    }
}

/// The slowest time, in seconds, for any limit of the level to recover fully:
/// capacity ÷ refill × period over the base and every parameter window, the
/// reset cycle of a calendar quota, or the `reset_after` window. At least 1.
pub fn recovery_seconds(cfg: &StoredLevel) -> i64 {
    let mut worst: i64 = 1;
    let int = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
    for l in cfg.buckets() {
        if let Some(rsa) = l.reset_after_seconds {
            worst = worst.max(int(rsa));
            continue;
        }
        if !l.reset_schedule.is_empty() {
            worst = worst.max(reset_cycle_seconds(&l.reset_schedule));
            continue;
        }
        let (cp, ra, rp) = (l.capacity, l.refill_amount, l.refill_period);
        worst = worst.max(refill_time(int(cp), int(ra), int(rp)));
        for e in &l.schedule {
            if let Some(Modifier::Absolute {
                capacity,
                refill_amount,
                refill_period_seconds,
            }) = e.modifier
            {
                worst = worst.max(refill_time(
                    int(capacity.unwrap_or(cp)),
                    int(refill_amount.unwrap_or(ra)),
                    int(refill_period_seconds.unwrap_or(rp)),
                ));
            }
        }
    }
    worst
}

fn refill_time(cp: i64, ra: i64, rp: i64) -> i64 {
    if ra <= 0 {
        return rp.max(1);
    }
    (cp.saturating_mul(rp) + ra - 1) / ra
}

/// How long a calendar quota's reset cycle can be: monthly (31 days) when the
/// day or month is constrained, weekly, daily, hourly, else a minute.
fn reset_cycle_seconds(entries: &[StoredEntry]) -> i64 {
    entries
        .iter()
        .map(|e| {
            // minute hour day-of-month month day-of-week; `*` is unconstrained.
            let set: Vec<bool> = e.cron.split_whitespace().map(|f| f != "*").collect();
            let at = |i: usize| set.get(i).copied().unwrap_or(false);
            if at(2) || at(3) {
                31 * 86_400
            } else if at(4) {
                7 * 86_400
            } else if at(1) {
                86_400
            } else if at(0) {
                3_600
            } else {
                60
            }
        })
        .max()
        .unwrap_or(60)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::items::config::decode_level;

    /// The level as fan-out sees it.
    fn decode(item: &Item) -> Result<StoredLevel, crate::items::config::CodecError> {
        decode_level(item)
    }

    use crate::store::item::from_pairs as item;

    /// The attributes `acts` set, with their values, in order.
    fn sets(acts: &[UpdateAction]) -> impl Iterator<Item = (&str, &AttrValue)> {
        acts.iter().filter_map(|a| match a {
            UpdateAction::Set(n, v) => Some((n.as_str(), v)),
            _ => None,
        })
    }

    /// The attributes `acts` remove, in order.
    fn removes(acts: &[UpdateAction]) -> impl Iterator<Item = &str> {
        acts.iter().filter_map(|a| match a {
            UpdateAction::Remove(n) => Some(n.as_str()),
            _ => None,
        })
    }

    #[test]
    fn parses_bucket_keys_with_slashes_in_resources() {
        let id = BucketId::parse("ns", "ns/BUCKET#user-1#openai/gpt-4:x#3").unwrap();
        assert_eq!(
            (id.entity.as_str(), id.resource.as_str(), id.shard.as_str()),
            ("user-1", "openai/gpt-4:x", "3")
        );
        assert!(BucketId::parse("ns", "other/BUCKET#a#b#0").is_none());
        assert!(BucketId::parse("ns", "ns/BUCKET#a#b").is_none());
    }

    /// The observed reference sync (u1 after its limits shrank): parameters in
    /// milli, soft stamp, overrides and item schedules removed, dropped limits
    /// removed except `wcu`, `tk`/`tc`/`ws` untouched, `vu = 0`, no `ttl`.
    #[test]
    fn sync_matches_the_observed_reference_update() {
        let cfg = decode(&item(&[
            ("l_zz_cp", AttrValue::n(40)),
            ("l_zz_ra", AttrValue::n(40)),
            ("l_zz_rp", AttrValue::n(60)),
            ("l_zz_soft", AttrValue::Bool(true)),
            ("w_session_cp", AttrValue::n(60)),
            ("w_session_ra", AttrValue::n(0)),
            ("w_session_rp", AttrValue::n(60)),
            ("w_session_rsa", AttrValue::n(3600)),
        ]))
        .unwrap();
        let bucket = item(&[
            ("b_aaa_cp", AttrValue::n(10000)),
            ("b_aaa_tk", AttrValue::n(10000)),
            ("b_aaa_sched", AttrValue::s("1h0-6c5")),
            ("b_daily_cp", AttrValue::n(1)),
            ("b_daily_gc", AttrValue::n(1)),
            ("b_session_cp", AttrValue::n(50000)),
            ("b_session_tk", AttrValue::n(50000)),
            ("b_session_sched", AttrValue::s("-")),
            ("b_session_ws", AttrValue::n(5)),
            ("b_zz_cp", AttrValue::n(100000)),
            ("b_zz_rsched", AttrValue::s("-")),
            ("b_wcu_cp", AttrValue::n(1000000)),
            ("b_wcu_tk", AttrValue::n(1000000)),
            ("sched", AttrValue::s("1h9-17w1-5s500")),
            ("rsched", AttrValue::s("1m0h0")),
            ("sched_tz", AttrValue::s("Europe/Berlin")),
            ("vu", AttrValue::n(123)),
        ]);
        let acts = sync_actions(&cfg, Source::Entity, &bucket, 1_000_000);
        let sets: BTreeMap<&str, &AttrValue> = sets(&acts).collect();
        let removes: BTreeSet<&str> = removes(&acts).collect();
        assert_eq!(sets["b_zz_cp"], &AttrValue::n(40000));
        assert_eq!(sets["b_zz_rp"], &AttrValue::n(60000));
        assert_eq!(sets["b_session_ra"], &AttrValue::n(0));
        assert_eq!(sets["b_session_rsa"], &AttrValue::n(3600));
        assert_eq!(sets["vu"], &AttrValue::n(0));
        let soft: i64 = sets["b_zz_soft"].as_n().unwrap().parse().unwrap();
        assert!((1_048_000..=1_060_000).contains(&soft), "{soft}");
        assert_eq!(
            removes,
            BTreeSet::from([
                "b_aaa_cp",
                "b_aaa_sched",
                "b_aaa_tk",
                "b_daily_cp",
                "b_session_sched",
                "b_zz_rsched",
                "rsched",
                "sched",
                "sched_tz",
            ])
        );
        assert!(!sets.contains_key("ttl") && !removes.contains("b_wcu_cp"));
    }

    #[test]
    fn schedules_get_a_default_and_overrides_and_defaults_get_a_ttl() {
        let cfg = decode(&item(&[
            ("l_aaa_cp", AttrValue::n(10)),
            ("l_aaa_ra", AttrValue::n(10)),
            ("l_aaa_rp", AttrValue::n(60)),
            ("l_aaa_sched", AttrValue::s("1h0-6c5")),
            ("l_rpm_cp", AttrValue::n(100)),
            ("l_rpm_ra", AttrValue::n(100)),
            ("l_rpm_rp", AttrValue::n(60)),
            ("l_rpm_sched", AttrValue::s("1h9-17w1-5s500")),
            ("l_rpd_cp", AttrValue::n(500)),
            ("l_rpd_ra", AttrValue::n(0)),
            ("l_rpd_rp", AttrValue::n(60)),
            ("l_rpd_rsched", AttrValue::s("1m0h0")),
            ("sched_tz", AttrValue::s("Europe/Berlin")),
        ]))
        .unwrap();
        let acts = sync_actions(&cfg, Source::Resource, &Item::new(), 10_000_000);
        let set = |n: &str| sets(&acts).find(|(k, _)| *k == n).map(|(_, v)| v.clone());
        assert_eq!(set("sched"), Some(AttrValue::s("1h0-6c5")));
        assert_eq!(set("b_aaa_sched"), None, "equal to the item default");
        assert_eq!(set("b_rpm_sched"), Some(AttrValue::s("1h9-17w1-5s500")));
        assert_eq!(set("b_rpd_sched"), Some(AttrValue::s("-")));
        assert_eq!(set("rsched"), Some(AttrValue::s("1m0h0")));
        assert_eq!(set("b_rpm_rsched"), Some(AttrValue::s("-")));
        assert_eq!(set("sched_tz"), Some(AttrValue::s("Europe/Berlin")));
        // A daily reset dominates: 7 × 86 400 s from now.
        assert_eq!(set("ttl"), Some(AttrValue::n(10_000 + 7 * 86_400)));
    }

    #[test]
    fn recovery_uses_the_slowest_window() {
        let cfg = decode(&item(&[
            ("l_rpm_cp", AttrValue::n(60)),
            ("l_rpm_ra", AttrValue::n(60)),
            ("l_rpm_rp", AttrValue::n(60)),
            ("l_rpm_sched", AttrValue::s("1h0-6c600a10")),
        ]))
        .unwrap();
        assert_eq!(recovery_seconds(&cfg), 3600);
    }

    /// A level declaring a bucket, a rolling window and a concurrency limit.
    fn kinds_config_item() -> Item {
        let text = "namespace: d\nresources:\n  r:\n    limits:\n      rpm: {capacity: 100}\n      rpd: {capacity: 1000, window: day, rolling: true}\n      jobs: {concurrency: 3}\n";
        let m = crate::manifest::load_str("m.yaml", text).unwrap().manifest;
        crate::items::config::build_resource("ns", "r", &m.resources["r"]).unwrap()
    }

    #[test]
    fn rolling_and_concurrency_limits_never_reach_a_bucket() {
        let cfg = decode(&kinds_config_item()).unwrap();
        let buckets: Vec<&str> = cfg.buckets().map(|l| l.name.as_str()).collect();
        assert_eq!(buckets, ["rpm"]);
        // The bucket as it was when `rpd` was still a token bucket.
        let current = item(&[
            ("b_rpm_tk", AttrValue::n(100_000)),
            ("b_rpm_cp", AttrValue::n(100_000)),
            ("b_rpd_tk", AttrValue::n(5_000)),
            ("b_rpd_cp", AttrValue::n(1_000_000)),
            ("b_rpd_ra", AttrValue::n(1_000_000)),
            ("b_rpd_rp", AttrValue::n(86_400_000)),
            ("b_wcu_tk", AttrValue::n(1000)),
        ]);
        let actions = sync_actions(&cfg, Source::Resource, &current, 1_000_000);
        let set: Vec<&str> = sets(&actions).map(|(k, _)| k).collect();
        let removed: Vec<&str> = removes(&actions).collect();
        assert!(
            set.iter()
                .all(|k| !k.contains("rpd") && !k.contains("jobs")),
            "{set:?}"
        );
        assert!(set.contains(&"b_rpm_cp"), "{set:?}");
        assert_eq!(
            removed,
            ["b_rpd_cp", "b_rpd_ra", "b_rpd_rp", "b_rpd_tk"],
            "the former token bucket leaves the bucket"
        );
    }
}
