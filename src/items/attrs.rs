//! The stored attribute vocabulary: how every attribute of a config item and
//! of a bucket item is spelled, and how an attribute name is read back. This is
//! the one module that knows `l_rpm_cp` means "limit `rpm`, capacity" (the
//! layout is described in docs/storage.md); encode, decode, compare, plan
//! detail, kind discovery and bucket fan-out all go through it.
//!
//! A config limit attribute is `{prefix}{name}_{field}`. Limit names may hold
//! `_` but no field suffix does, so the field is whatever follows the last `_`.

use std::collections::{BTreeMap, BTreeSet};

use crate::store::{AttrValue, Item};

/// What a config limit attribute's prefix says about the limit. Ordered as the
/// prefixes sort, so a view iterates them in the item's own order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Prefix {
    /// `c_`: a concurrency limit (ours; zae-limiter 0.17 does not read it).
    Concurrency,
    /// `l_`: a token bucket or a calendar quota.
    Limit,
    /// `r_`: a rolling window (ours; zae-limiter 0.17 does not read it).
    Rolling,
    /// `w_`: a session quota (`reset_after`), hidden from readers before 0.15.
    Session,
}

impl Prefix {
    pub const ALL: [Prefix; 4] = [
        Prefix::Concurrency,
        Prefix::Limit,
        Prefix::Rolling,
        Prefix::Session,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Prefix::Concurrency => "c_",
            Prefix::Limit => "l_",
            Prefix::Rolling => "r_",
            Prefix::Session => "w_",
        }
    }

    /// Whether zae-limiter 0.17 reads limits under this prefix (its token
    /// buckets: `l_` and `w_`), and so whether they reach bucket items.
    pub fn is_bucket(self) -> bool {
        matches!(self, Prefix::Limit | Prefix::Session)
    }

    /// The field whose presence declares a limit: a bucket's `_cp` (the only
    /// field 0.17 discovers limits by), a rolling window's `_amt`, a
    /// concurrency limit's `_slots`.
    pub fn declaring_field(self) -> Field {
        match self {
            Prefix::Limit | Prefix::Session => Field::Capacity,
            Prefix::Rolling => Field::Amount,
            Prefix::Concurrency => Field::Slots,
        }
    }

    /// The fields a limit of this prefix is stored with, in display order (`soft` last).
    pub fn fields(self) -> &'static [Field] {
        match self {
            Prefix::Limit | Prefix::Session => &[
                Field::Capacity,
                Field::RefillAmount,
                Field::RefillPeriod,
                Field::ResetAfter,
                Field::Schedule,
                Field::ResetSchedule,
                Field::Soft,
            ],
            Prefix::Rolling => &[Field::Amount, Field::Window, Field::Soft],
            Prefix::Concurrency => &[Field::Slots, Field::HoldTtl, Field::Soft],
        }
    }

    fn parse(attr: &str) -> Option<(Prefix, &str)> {
        Prefix::ALL
            .into_iter()
            .find_map(|p| attr.strip_prefix(p.as_str()).map(|rest| (p, rest)))
    }
}

/// One field of a config limit: the suffix after `{prefix}{name}_`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Field {
    /// `cp`: capacity, whole tokens.
    Capacity,
    /// `ra`: refill amount, whole tokens.
    RefillAmount,
    /// `rp`: refill period, whole seconds.
    RefillPeriod,
    /// `rsa`: a session quota's `reset_after`, whole seconds.
    ResetAfter,
    /// `sched`: the compact parameter schedule.
    Schedule,
    /// `rsched`: the compact reset schedule.
    ResetSchedule,
    /// `soft`: BOOL, present only when true.
    Soft,
    /// `amt`: a rolling window's amount.
    Amount,
    /// `win`: a rolling window's length (`minute`, `hour`, `day`).
    Window,
    /// `slots`: a concurrency limit's slots.
    Slots,
    /// `ttl`: a concurrency hold's time to live, whole seconds.
    HoldTtl,
}

impl Field {
    pub fn suffix(self) -> &'static str {
        match self {
            Field::Capacity => "cp",
            Field::RefillAmount => "ra",
            Field::RefillPeriod => "rp",
            Field::ResetAfter => "rsa",
            Field::Schedule => "sched",
            Field::ResetSchedule => "rsched",
            Field::Soft => "soft",
            Field::Amount => "amt",
            Field::Window => "win",
            Field::Slots => "slots",
            Field::HoldTtl => "ttl",
        }
    }

    /// What the manifest calls the field (the words plan detail uses).
    pub fn manifest_name(self) -> &'static str {
        match self {
            Field::Capacity | Field::Amount => "capacity",
            Field::RefillAmount => "refill_amount",
            Field::RefillPeriod => "refill_period",
            Field::ResetAfter => "reset_after_seconds",
            Field::Schedule => "schedule",
            Field::ResetSchedule => "reset_schedule",
            Field::Soft => "soft",
            Field::Window => "window",
            Field::Slots => "concurrency",
            Field::HoldTtl => "hold_ttl_seconds",
        }
    }
}

/// A config limit attribute name, parsed: `l_tokens_per_day_cp` is
/// (`Limit`, `tokens_per_day`, `Capacity`). The name may be empty or invalid:
/// readers decide what that means.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LimitAttr<'a> {
    pub prefix: Prefix,
    pub name: &'a str,
    pub field: Field,
}

impl<'a> LimitAttr<'a> {
    /// `None` for an attribute that is not a field of a limit of its prefix.
    pub fn parse(attr: &'a str) -> Option<LimitAttr<'a>> {
        let (prefix, rest) = Prefix::parse(attr)?;
        let (name, suffix) = rest.rsplit_once('_')?;
        let field = *prefix.fields().iter().find(|f| f.suffix() == suffix)?;
        Some(LimitAttr {
            prefix,
            name,
            field,
        })
    }

    /// The attribute name.
    pub fn spell(prefix: Prefix, name: &str, field: Field) -> String {
        format!("{}{name}_{}", prefix.as_str(), field.suffix())
    }
}

/// The item's one time zone for every schedule entry of every limit.
pub const SCHED_TZ: &str = "sched_tz";
/// BOOL (true: disabled, false: enforced) or S `bypass`; absent inherits.
pub const DISABLED: &str = "disabled";
/// BOOL; absent inherits.
pub const CASCADE: &str = "cascade";
/// S `allow` / `block`, system level only.
pub const ON_UNAVAILABLE: &str = "on_unavailable";
/// N 1 on every level the Python client writes.
pub const CONFIG_VERSION: &str = "config_version";
/// S, resource and entity levels.
pub const RESOURCE: &str = "resource";
/// S, entity levels.
pub const ENTITY_ID: &str = "entity_id";
/// Level flags, in the order plan detail lists them.
pub const FLAGS: [&str; 3] = [DISABLED, CASCADE, ON_UNAVAILABLE];
/// Attributes that are neither limits nor flags: keys, index keys and the
/// client's bookkeeping. Two levels that differ only in these hold the same limits.
pub const BOOKKEEPING: [&str; 9] = [
    "PK",
    "SK",
    "GSI3PK",
    "GSI3SK",
    "GSI4PK",
    "GSI4SK",
    CONFIG_VERSION,
    RESOURCE,
    ENTITY_ID,
];

/// A limit's attributes on one item under one prefix, by field.
pub type Fields<'a> = BTreeMap<Field, &'a AttrValue>;

/// A config item's attributes sorted by meaning, nothing dropped: every limit
/// attribute by limit name and prefix (declared or not), everything else by name.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LevelAttrs<'a> {
    pub limits: BTreeMap<&'a str, BTreeMap<Prefix, Fields<'a>>>,
    /// `sched_tz`, the flags, keys, bookkeeping and unknown attributes.
    pub rest: BTreeMap<&'a str, &'a AttrValue>,
}

impl<'a> LevelAttrs<'a> {
    pub fn of(item: &'a Item) -> LevelAttrs<'a> {
        let mut out = LevelAttrs::default();
        for (attr, value) in item {
            match LimitAttr::parse(attr) {
                Some(a) => {
                    out.limits
                        .entry(a.name)
                        .or_default()
                        .entry(a.prefix)
                        .or_default()
                        .insert(a.field, value);
                }
                None => {
                    out.rest.insert(attr, value);
                }
            }
        }
        out
    }

    /// The limits the item declares (those with their prefix's declaring
    /// field), by name, then prefix: a name under two prefixes comes twice.
    pub fn declared(&self) -> impl Iterator<Item = (&'a str, Prefix, &Fields<'a>)> + '_ {
        self.limits.iter().flat_map(|(name, by_prefix)| {
            by_prefix
                .iter()
                .filter(|(p, f)| f.contains_key(&p.declaring_field()))
                .map(move |(p, f)| (*name, *p, f))
        })
    }

    /// Whether a declared limit is a quota (a session quota, or a limit with a
    /// reset schedule): its refill period is inert.
    pub fn is_quota(&self, name: &str, prefix: Prefix) -> bool {
        let fields = self.limits.get(name).and_then(|p| p.get(&prefix));
        fields.is_some_and(|f| {
            f.contains_key(&prefix.declaring_field())
                && (prefix == Prefix::Session || f.contains_key(&Field::ResetSchedule))
        })
    }
}

/// The internal write-capacity limit the limiter adds to every bucket; never
/// a user limit name, never ours to remove from a bucket.
pub const INTERNAL_LIMIT: &str = zae_limiter_engine::names::RESERVED_LIMIT;

/// One per-limit field of a bucket item: `b_{name}_{field}`, in milli-units.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum BucketField {
    /// `tk`: tokens, written by the limiter only.
    Tokens,
    Capacity,
    RefillAmount,
    RefillPeriod,
    /// `tc`: total consumed, written by the limiter only.
    TotalConsumed,
    /// `sched` / `rsched`: a per-limit schedule overriding the item's (`-`: none).
    Schedule,
    ResetSchedule,
    /// `soft`: the deadline (epoch ms) until which the limit is soft.
    Soft,
    /// `rsa`: a session quota's window length, seconds.
    ResetAfter,
}

impl BucketField {
    pub fn suffix(self) -> &'static str {
        match self {
            BucketField::Tokens => "tk",
            BucketField::Capacity => "cp",
            BucketField::RefillAmount => "ra",
            BucketField::RefillPeriod => "rp",
            BucketField::TotalConsumed => "tc",
            BucketField::Schedule => "sched",
            BucketField::ResetSchedule => "rsched",
            BucketField::Soft => "soft",
            BucketField::ResetAfter => "rsa",
        }
    }

    /// `b_{name}_{field}`.
    pub fn of(self, name: &str) -> String {
        format!("b_{name}_{}", self.suffix())
    }
}

/// Bucket-level attributes fan-out writes or reads.
pub mod bucket_item {
    /// The item-level compact schedules (the default of every limit on the bucket).
    pub const SCHED: &str = "sched";
    pub const RSCHED: &str = "rsched";
    pub use super::SCHED_TZ;
    /// N, epoch ms: when the bucket's cached limits go stale (0: now).
    pub const VALID_UNTIL: &str = "vu";
    /// N, epoch seconds: DynamoDB's expiry of a bucket whose limits are defaults.
    pub const TTL: &str = "ttl";
    /// BOOL true while disabled.
    pub const DISABLED: &str = "disabled";
    /// N, epoch ms: the bypass stamp's deadline.
    pub const BYPASS: &str = "bypass";
    pub const CASCADE: &str = "cascade";
    pub const PARENT_ID: &str = "parent_id";
    /// N: the parent generation, which a stale cascade fan-out must not undo.
    pub const PARENT_GENERATION: &str = "pgen";
    pub const PARENT_INCARNATION: &str = "pinc";
}

/// Limit names present on a bucket (a `b_{n}_tk` or `b_{n}_cp` attribute).
pub fn bucket_limits(bucket: &Item) -> BTreeSet<String> {
    bucket
        .keys()
        .filter_map(|a| {
            let (name, suffix) = a.strip_prefix("b_")?.rsplit_once('_')?;
            let declares = [BucketField::Tokens, BucketField::Capacity]
                .iter()
                .any(|f| f.suffix() == suffix);
            (declares && !name.is_empty()).then(|| name.to_string())
        })
        .collect()
}

/// The limit names zae-limiter 0.17 discovers on an item, by its own rule (an
/// attribute ending in `_cp` under `l_` or `w_`), sorted. Spelled out apart
/// from [`LimitAttr::parse`] so tests can hold our items against it.
#[cfg(test)]
pub(crate) fn python_017_limit_names(item: &Item) -> Vec<String> {
    let mut out: Vec<String> = item
        .keys()
        .filter_map(|a| a.strip_suffix("_cp"))
        .filter_map(|b| b.strip_prefix("l_").or_else(|| b.strip_prefix("w_")))
        .map(str::to_string)
        .collect();
    out.sort();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limit_attributes_parse_by_their_last_underscore() {
        let a = LimitAttr::parse("l_tokens_per_day_cp").unwrap();
        assert_eq!(
            (a.prefix, a.name, a.field),
            (Prefix::Limit, "tokens_per_day", Field::Capacity)
        );
        let a = LimitAttr::parse("w_x_cp_rsa").unwrap();
        assert_eq!((a.name, a.field), ("x_cp", Field::ResetAfter));
        let a = LimitAttr::parse("c_jobs_ttl").unwrap();
        assert_eq!((a.prefix, a.field), (Prefix::Concurrency, Field::HoldTtl));
        for not_a_field in ["l_x_amt", "r_x_cp", "c_x_win", "b_x_cp", "sched_tz", "l_cp"] {
            assert_eq!(LimitAttr::parse(not_a_field), None, "{not_a_field}");
        }
        assert_eq!(
            LimitAttr::parse("l__cp").unwrap().name,
            "",
            "readers judge names"
        );
        for p in Prefix::ALL {
            for f in p.fields() {
                let spelled = LimitAttr::spell(p, "a_b", *f);
                let back = LimitAttr::parse(&spelled).unwrap();
                assert_eq!((back.prefix, back.name, back.field), (p, "a_b", *f));
            }
        }
    }

    #[test]
    fn the_view_keeps_every_attribute() {
        let item: Item = [
            ("PK", AttrValue::s("p")),
            ("l_rpm_cp", AttrValue::n(5)),
            ("l_rpm_rp", AttrValue::n(60)),
            ("w_rpm_rsa", AttrValue::n(60)),
            ("r_rpd_amt", AttrValue::n(9)),
            ("c_jobs_ttl", AttrValue::n(9)),
            ("sched_tz", AttrValue::s("UTC")),
            ("x_unknown", AttrValue::Bool(true)),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
        let view = LevelAttrs::of(&item);
        let count: usize = view
            .limits
            .values()
            .flat_map(|p| p.values())
            .map(|f| f.len())
            .sum();
        assert_eq!(count + view.rest.len(), item.len());
        let declared: Vec<(&str, Prefix)> = view.declared().map(|(n, p, _)| (n, p)).collect();
        assert_eq!(declared, [("rpd", Prefix::Rolling), ("rpm", Prefix::Limit)]);
        assert!(!view.is_quota("rpm", Prefix::Limit));
    }

    #[test]
    fn bucket_limits_are_found_by_tokens_or_capacity() {
        let item: Item = ["b_rpm_tk", "b_tpm_cp", "b_x_ra", "b__cp", "sched"]
            .into_iter()
            .map(|k| (k.to_string(), AttrValue::n(1)))
            .collect();
        let names: Vec<String> = bucket_limits(&item).into_iter().collect();
        assert_eq!(names, ["rpm", "tpm"]);
        assert_eq!(BucketField::Soft.of("rpm"), "b_rpm_soft");
    }
}
