//! Config items both ways: a manifest level → the item zae-limiter 0.17's
//! Python client writes, and a stored item → its limits, with the reference's
//! reading rules (docs/storage.md, "Config items"). Attribute names come from
//! [`super::attrs`], the one owner of the stored vocabulary.
//!
//! Written like the client API, not the thinner provisioner items: every level
//! carries `config_version` 1, entity items carry the sparse GSI3 keys, and
//! apply updates the registries (see [`crate::apply::writes`]).

use std::collections::{BTreeMap, BTreeSet};

use zae_limiter_engine::encoding::{
    decode_reset, decode_schedule, encode_reset, encode_schedule, EncodeError, Modifier, MAX_TOKENS,
};
use zae_limiter_engine::limit::{self, LimitError};

use super::attrs::{self, Field, LevelAttrs, LimitAttr, Prefix, BOOKKEEPING};
use super::keys::{self, IdentifierError};
use crate::manifest::model::{self, Disabled, LevelConfig, LimitKind, LimitSpec, SystemLevel};
use crate::store::number::Number;
use crate::store::{AttrValue, Item, Key};
pub use zae_limiter_engine::concurrency::LimitKind as Counts;
use zae_limiter_engine::concurrency::{MAX_HOLD_TTL_SECONDS, MAX_SLOTS, MIN_HOLD_TTL_SECONDS};
use zae_limiter_engine::rolling::{RollingWindow, Window};

/// The constant every client-written level carries (read by nobody, kept for parity).
pub const CONFIG_VERSION: u32 = 1;

/// Why a level cannot become an item, or an item cannot be read back.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum CodecError {
    #[error("{0}")]
    Identifier(#[from] IdentifierError),
    /// The item stores one timezone for every entry of every limit.
    #[error("every schedule entry on one level must share one timezone: limit '{first_limit}' uses '{first_tz}', limit '{limit}' uses '{tz}'")]
    MixedTimezones {
        first_limit: String,
        first_tz: String,
        limit: String,
        tz: String,
    },
    #[error("limit '{limit}': {source}")]
    Encode {
        limit: String,
        source: Box<EncodeError>,
    },
    /// A stored item the reference would refuse to read: the whole level is unreadable.
    #[error("config item {pk} / {sk} is unreadable: {reason}")]
    Unreadable {
        pk: String,
        sk: String,
        reason: String,
    },
}

fn n(v: u64) -> AttrValue {
    AttrValue::N(v.to_string())
}

/// The prefix a limit is stored under: `w_` for a session quota (hidden from
/// readers before 0.15), `r_` / `c_` for the kinds Python 0.17 does not know
/// (issue #7: its reader discovers limits by `_cp` under `l_`/`w_` only, so it
/// skips them and sees the item's token buckets and quotas alone).
pub fn prefix_of(limit: &LimitSpec) -> Prefix {
    match limit.kind {
        LimitKind::Bucket if limit.reset_after_seconds.is_some() => Prefix::Session,
        LimitKind::Bucket => Prefix::Limit,
        LimitKind::Rolling { .. } => Prefix::Rolling,
        LimitKind::Concurrency { .. } => Prefix::Concurrency,
    }
}

/// A manifest entry's modifier as it is stored (a scale quantised to per-mille).
pub fn model_modifier(
    m: &model::Modifier,
) -> Result<Modifier, zae_limiter_engine::encoding::EntryError> {
    match m {
        model::Modifier::Scale(s) => Modifier::scale(*s),
        model::Modifier::Absolute {
            capacity,
            refill_amount,
            refill_period_seconds,
        } => Ok(Modifier::Absolute {
            capacity: *capacity,
            refill_amount: *refill_amount,
            refill_period_seconds: *refill_period_seconds,
        }),
    }
}

/// Writes every limit of a level into `item` and sets the item's one `sched_tz`.
fn put_limits(
    item: &mut Item,
    limits: &indexmap::IndexMap<String, LimitSpec>,
) -> Result<(), CodecError> {
    let mut tz: Option<(String, String)> = None; // (limit, zone)
    for (name, limit) in limits {
        keys::validate_limit_name(name)?;
        let prefix = prefix_of(limit);
        let mut put = |field: Field, value: AttrValue| {
            item.insert(LimitAttr::spell(prefix, name, field), value);
        };
        match limit.kind {
            LimitKind::Rolling { window } => {
                put(Field::Amount, n(limit.capacity));
                put(Field::Window, AttrValue::s(window.to_string()));
            }
            LimitKind::Concurrency { hold_ttl_seconds } => {
                put(Field::Slots, n(limit.capacity));
                put(Field::HoldTtl, n(hold_ttl_seconds));
            }
            LimitKind::Bucket => {
                let zones = limit
                    .schedule
                    .iter()
                    .map(|e| &e.tz)
                    .chain(limit.reset_schedule.iter().map(|e| &e.tz));
                for zone in zones {
                    match &tz {
                        None => tz = Some((name.clone(), zone.clone())),
                        Some((first_limit, first_tz)) if first_tz != zone => {
                            return Err(CodecError::MixedTimezones {
                                first_limit: first_limit.clone(),
                                first_tz: first_tz.clone(),
                                limit: name.clone(),
                                tz: zone.clone(),
                            })
                        }
                        Some(_) => {}
                    }
                }
                put(Field::Capacity, n(limit.capacity));
                put(Field::RefillAmount, n(limit.refill_amount));
                put(Field::RefillPeriod, n(limit.refill_period));
                let encode_err = |source| CodecError::Encode {
                    limit: name.clone(),
                    source: Box::new(source),
                };
                if !limit.schedule.is_empty() {
                    let mut entries = Vec::with_capacity(limit.schedule.len());
                    for (index, e) in limit.schedule.iter().enumerate() {
                        let m = model_modifier(&e.modifier)
                            .map_err(|source| encode_err(EncodeError::Entry { index, source }))?;
                        entries.push((e.cron.as_str(), m));
                    }
                    let s = encode_schedule(&entries).map_err(encode_err)?;
                    put(Field::Schedule, AttrValue::S(s));
                }
                if !limit.reset_schedule.is_empty() {
                    let crons: Vec<&str> = limit
                        .reset_schedule
                        .iter()
                        .map(|e| e.cron.as_str())
                        .collect();
                    let s = encode_reset(&crons).map_err(encode_err)?;
                    put(Field::ResetSchedule, AttrValue::S(s));
                }
                if let Some(rsa) = limit.reset_after_seconds {
                    put(Field::ResetAfter, n(rsa));
                }
            }
        }
        if limit.soft {
            put(Field::Soft, AttrValue::Bool(true));
        }
    }
    if let Some((_, zone)) = tz {
        item.insert(attrs::SCHED_TZ.into(), AttrValue::S(zone));
    }
    Ok(())
}

/// What a declared limit counts (use or holds), from its prefix.
fn counts_of(prefix: Prefix) -> Counts {
    match prefix {
        Prefix::Concurrency => Counts::CountsHolds,
        Prefix::Limit | Prefix::Session | Prefix::Rolling => Counts::CountsUse,
    }
}

/// A level item's rolling windows: limit name → its window's length, as
/// stored (`minute`, `hour`, `day`).
pub fn rolling_windows(item: &Item) -> BTreeMap<String, String> {
    LevelAttrs::of(item)
        .declared()
        .filter(|(_, prefix, _)| *prefix == Prefix::Rolling)
        .filter_map(|(name, _, fields)| {
            Some((
                name.to_string(),
                fields.get(&Field::Window)?.as_s()?.to_string(),
            ))
        })
        .collect()
}

/// Every limit name on a config item with what it counts, from the attribute
/// names alone (a bucket's `_cp`, a rolling window's `_amt`, a concurrency
/// limit's `_slots`): what `plan` compares to refuse a change of kind, even on
/// an item the full reader would refuse.
pub fn counted_kinds(item: &Item) -> BTreeMap<String, Counts> {
    LevelAttrs::of(item)
        .declared()
        .filter(|(name, _, _)| !name.is_empty())
        .map(|(name, prefix, _)| (name.to_string(), counts_of(prefix)))
        .collect()
}

fn base(key: Key, ns: &str) -> Item {
    let mut item = keys::namespaced_item(ns, key);
    item.insert(attrs::CONFIG_VERSION.into(), n(CONFIG_VERSION.into()));
    item
}

fn put_flags(item: &mut Item, level: &LevelConfig) {
    if let Some(d) = level.disabled {
        item.insert(attrs::DISABLED.into(), disabled_value(d));
    }
    if let Some(c) = level.cascade {
        item.insert(attrs::CASCADE.into(), AttrValue::Bool(c));
    }
}

/// `disabled` as stored: BOOL, or S `bypass`.
pub fn disabled_value(d: Disabled) -> AttrValue {
    match d {
        Disabled::Disabled => AttrValue::Bool(true),
        Disabled::Enforced => AttrValue::Bool(false),
        Disabled::Bypass => AttrValue::s("bypass"),
    }
}

/// The system defaults item (`{ns}/SYSTEM#` / `#CONFIG`).
pub fn build_system(ns: &str, level: &SystemLevel) -> Result<Item, CodecError> {
    let mut item = base(keys::system_config_key(ns), ns);
    put_limits(&mut item, &level.limits)?;
    if let Some(o) = level.on_unavailable {
        item.insert(attrs::ON_UNAVAILABLE.into(), AttrValue::s(o.as_str()));
    }
    Ok(item)
}

/// A resource defaults item (`{ns}/RESOURCE#{r}` / `#CONFIG`).
pub fn build_resource(ns: &str, resource: &str, level: &LevelConfig) -> Result<Item, CodecError> {
    keys::validate_resource_name(resource)?;
    let mut item = base(keys::resource_config_key(ns, resource), ns);
    item.insert(attrs::RESOURCE.into(), AttrValue::s(resource));
    put_limits(&mut item, &level.limits)?;
    put_flags(&mut item, level);
    Ok(item)
}

/// An entity config item (`{ns}/ENTITY#{e}` / `#CONFIG#{r}`, `r` may be `_default_`),
/// with the sparse GSI3 keys the client writes.
pub fn build_entity(
    ns: &str,
    entity: &str,
    resource: &str,
    level: &LevelConfig,
) -> Result<Item, CodecError> {
    keys::validate_entity_id(entity)?;
    keys::validate_entity_resource(resource)?;
    let mut item = base(keys::entity_config_key(ns, entity, resource), ns);
    item.insert(attrs::ENTITY_ID.into(), AttrValue::s(entity));
    item.insert(attrs::RESOURCE.into(), AttrValue::s(resource));
    item.insert(
        "GSI3PK".into(),
        AttrValue::S(keys::entity_config_gsi3pk(ns, resource)),
    );
    item.insert("GSI3SK".into(), AttrValue::s(entity));
    put_limits(&mut item, &level.limits)?;
    put_flags(&mut item, level);
    Ok(item)
}

/// One decoded schedule entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredEntry {
    /// The entry as stored, with its version prefix (`1h9-17w1-5s500`): what
    /// `zae_limiter_engine::render::to_cron` renders.
    pub compact: String,
    /// The 5-field cron the reference rebuilds from storage (numbers, not names).
    pub cron: String,
    /// The item's `sched_tz` (`UTC` when absent).
    pub tz: String,
    /// `None` for a reset entry.
    pub modifier: Option<Modifier>,
}

/// One limit read back from a config item, in whole tokens and seconds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredLimit {
    pub name: String,
    pub capacity: u64,
    pub refill_amount: u64,
    pub refill_period: u64,
    pub schedule: Vec<StoredEntry>,
    pub reset_schedule: Vec<StoredEntry>,
    pub reset_after_seconds: Option<u64>,
    pub soft: bool,
    /// A bucket (the fields above), a rolling window (`capacity` is its amount)
    /// or a concurrency limit (`capacity` is its slots); the other two kinds
    /// have no refill, period or schedules (all zero or empty).
    pub kind: LimitKind,
}

impl StoredLimit {
    pub fn resets(&self) -> bool {
        !self.reset_schedule.is_empty() || self.reset_after_seconds.is_some()
    }

    /// The stored compact `sched` text (entries joined back as they were stored).
    pub fn compact_schedule(&self) -> Option<String> {
        join_compact(&self.schedule)
    }

    /// The stored compact `rsched` text.
    pub fn compact_reset_schedule(&self) -> Option<String> {
        join_compact(&self.reset_schedule)
    }
}

/// A config level as stored: limits sorted by name, and the flags.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct StoredLevel {
    pub limits: Vec<StoredLimit>,
    /// `sched_tz` as stored (absent when nothing is scheduled).
    pub sched_tz: Option<String>,
    /// `None` inherits.
    pub disabled: Option<Disabled>,
    /// `None` inherits.
    pub cascade: Option<bool>,
    /// System level only; kept verbatim (the reference does not validate it).
    pub on_unavailable: Option<String>,
}

impl StoredLevel {
    /// The limits zae-limiter 0.17 reads (token buckets and quotas): the ones
    /// bucket items carry. Rolling windows and concurrency limits are not among them.
    pub fn buckets(&self) -> impl Iterator<Item = &StoredLimit> {
        self.limits.iter().filter(|l| l.kind == LimitKind::Bucket)
    }
}

/// Splits a stored compact string into its entries, each with the version prefix.
fn compact_entries(s: &str) -> Vec<String> {
    let digits = s.bytes().take_while(u8::is_ascii_digit).count();
    let (version, rest) = s.split_at(digits);
    rest.split(';').map(|p| format!("{version}{p}")).collect()
}

/// The inverse of [`compact_entries`]: `1a`, `1b` → `1a;b`.
fn join_compact(entries: &[StoredEntry]) -> Option<String> {
    let first = entries.first()?;
    let digits = first.compact.bytes().take_while(u8::is_ascii_digit).count();
    let bodies: Vec<&str> = entries.iter().map(|e| &e.compact[digits..]).collect();
    Some(format!("{}{}", &first.compact[..digits], bodies.join(";")))
}

/// Reads the fields of one declared limit; every problem makes the item unreadable.
struct FieldReader<'a, 'i> {
    prefix: Prefix,
    name: &'a str,
    fields: &'a attrs::Fields<'i>,
    bad: &'a dyn Fn(String) -> CodecError,
}

impl FieldReader<'_, '_> {
    fn attr(&self, field: Field) -> String {
        LimitAttr::spell(self.prefix, self.name, field)
    }

    /// A whole non-negative number, `None` when absent.
    fn whole(&self, field: Field) -> Result<Option<u64>, CodecError> {
        match self.fields.get(&field) {
            None => Ok(None),
            Some(AttrValue::N(text)) => Number::parse(text)
                .ok()
                .and_then(|num| num.to_i128())
                .and_then(|v| u64::try_from(v).ok())
                .map(Some)
                .ok_or_else(|| {
                    (self.bad)(format!(
                        "{} = {text} is not a whole non-negative number",
                        self.attr(field)
                    ))
                }),
            Some(other) => Err((self.bad)(format!(
                "{} is not a number: {other:?}",
                self.attr(field)
            ))),
        }
    }

    /// A required whole number within `min..=max`.
    fn bounded(&self, field: Field, min: u64, max: u64) -> Result<u64, CodecError> {
        match self.whole(field)? {
            Some(v) if (min..=max).contains(&v) => Ok(v),
            Some(v) => Err((self.bad)(format!(
                "{} = {v} is not a whole number from {min} to {max}",
                self.attr(field)
            ))),
            None => Err((self.bad)(format!("{} is missing", self.attr(field)))),
        }
    }

    fn text(&self, field: Field) -> Result<Option<&str>, CodecError> {
        match self.fields.get(&field) {
            None => Ok(None),
            Some(AttrValue::S(s)) => Ok(Some(s)),
            Some(other) => Err((self.bad)(format!(
                "{} is not a string: {other:?}",
                self.attr(field)
            ))),
        }
    }

    fn soft(&self) -> Result<bool, CodecError> {
        match self.fields.get(&Field::Soft) {
            None => Ok(false),
            Some(AttrValue::Bool(b)) => Ok(*b),
            Some(other) => Err((self.bad)(format!(
                "{} is not a boolean: {other:?}",
                self.attr(Field::Soft)
            ))),
        }
    }

    /// A token bucket or quota (`l_` / `w_`), with the reference's rules.
    fn bucket(&self, zone: &str) -> Result<StoredLimit, CodecError> {
        let name = self.name;
        let capacity = self.whole(Field::Capacity)?.unwrap_or(0);
        let refill_amount = self.whole(Field::RefillAmount)?.unwrap_or(0);
        let refill_period = self.whole(Field::RefillPeriod)?.unwrap_or(0);
        let reset_after_seconds = self.whole(Field::ResetAfter)?;
        if self.prefix == Prefix::Session && reset_after_seconds.is_none() {
            return Err((self.bad)(format!(
                "limit '{name}' is a w_ limit without {}",
                self.attr(Field::ResetAfter)
            )));
        }
        let soft = self.soft()?;
        let entries = |compact: &str, reset: bool| -> Result<Vec<StoredEntry>, CodecError> {
            let decoded = if reset {
                decode_reset(compact)
            } else {
                decode_schedule(compact)
            }
            .map_err(|e| (self.bad)(format!("limit '{name}': {e}")))?;
            let parts = compact_entries(compact);
            Ok(decoded
                .into_iter()
                .zip(parts)
                .map(|(e, part)| StoredEntry {
                    compact: part,
                    cron: e.cron,
                    tz: zone.to_string(),
                    modifier: e.modifier,
                })
                .collect())
        };
        let schedule = match self.text(Field::Schedule)? {
            Some(s) => entries(s, false)?,
            None => Vec::new(),
        };
        let reset_schedule = match self.text(Field::ResetSchedule)? {
            Some(s) => entries(s, true)?,
            None => Vec::new(),
        };
        let limit = StoredLimit {
            name: name.to_string(),
            capacity,
            refill_amount,
            refill_period,
            schedule,
            reset_schedule,
            reset_after_seconds,
            soft,
            kind: LimitKind::Bucket,
        };
        check_limit(&limit).map_err(|r| (self.bad)(format!("limit '{name}': {r}")))?;
        Ok(limit)
    }

    /// A rolling window (`r_`) or a concurrency limit (`c_`): every field is
    /// required and within the bounds the manifest allows.
    fn other_kind(&self) -> Result<StoredLimit, CodecError> {
        let (kind, capacity) = if self.prefix == Prefix::Rolling {
            let win = self.attr(Field::Window);
            let window = match self.text(Field::Window)? {
                Some(w) => Window::parse(w)
                    .and_then(|w| RollingWindow::try_from(w).ok())
                    .ok_or_else(|| {
                        (self.bad)(format!("{win} = '{w}' is not minute, hour or day"))
                    })?,
                None => return Err((self.bad)(format!("{win} is missing"))),
            };
            let amount = self.bounded(Field::Amount, 1, MAX_TOKENS)?;
            (LimitKind::Rolling { window }, amount)
        } else {
            let ttl = self.bounded(
                Field::HoldTtl,
                MIN_HOLD_TTL_SECONDS as u64,
                MAX_HOLD_TTL_SECONDS as u64,
            )?;
            let slots = self.bounded(Field::Slots, 1, MAX_SLOTS)?;
            let kind = LimitKind::Concurrency {
                hold_ttl_seconds: ttl,
            };
            (kind, slots)
        };
        keys::validate_limit_name(self.name)
            .map_err(|e| (self.bad)(format!("limit '{}': {e}", self.name)))?;
        Ok(StoredLimit {
            name: self.name.to_string(),
            capacity,
            refill_amount: 0,
            refill_period: 0,
            schedule: Vec::new(),
            reset_schedule: Vec::new(),
            reset_after_seconds: None,
            soft: self.soft()?,
            kind,
        })
    }
}

/// Reads a config item as the reference does: limits are the `_cp`
/// attributes under `l_`/`w_`, missing numbers read as 0, and an undecodable
/// schedule, a `w_` limit without `rsa`, a name under both prefixes, a bad
/// number or a limit the reference could not construct makes the whole item
/// unreadable. Rolling windows (`r_`) and concurrency limits (`c_`) are read
/// with every field required; a name stored as two kinds is unreadable too.
pub fn decode_level(item: &Item) -> Result<StoredLevel, CodecError> {
    let key = Key::of(item).unwrap_or_else(|| Key::new("?", "?"));
    let bad = |reason: String| CodecError::Unreadable {
        pk: key.pk.clone(),
        sk: key.sk.clone(),
        reason,
    };
    let view = LevelAttrs::of(item);
    let tz = match view.rest.get(attrs::SCHED_TZ) {
        None => None,
        Some(AttrValue::S(s)) => Some(s.clone()),
        Some(other) => return Err(bad(format!("sched_tz is not a string: {other:?}"))),
    };
    let zone = tz.clone().unwrap_or_else(|| "UTC".to_string());
    if zone.parse::<chrono_tz::Tz>().is_err() {
        return Err(bad(format!(
            "sched_tz '{zone}' is not a known IANA timezone"
        )));
    }

    let mut limits = Vec::with_capacity(view.limits.len());
    for (name, by_prefix) in &view.limits {
        let declared: Vec<Prefix> = by_prefix
            .iter()
            .filter(|(p, f)| f.contains_key(&p.declaring_field()))
            .map(|(p, _)| *p)
            .collect();
        let prefix = match declared[..] {
            [] => continue,
            [p] => p,
            _ if declared.iter().all(|p| p.is_bucket()) => {
                return Err(bad(format!(
                    "limit '{name}' is stored under both l_ and w_"
                )))
            }
            _ => {
                return Err(bad(format!(
                    "limit '{name}' is stored as more than one kind"
                )))
            }
        };
        let reader = FieldReader {
            prefix,
            name,
            fields: &by_prefix[&prefix],
            bad: &bad,
        };
        limits.push(if prefix.is_bucket() {
            reader.bucket(&zone)?
        } else {
            reader.other_kind()?
        });
    }

    let flag = |name: &str| view.rest.get(name).copied();
    let disabled = match flag(attrs::DISABLED) {
        None => None,
        Some(AttrValue::Bool(true)) => Some(Disabled::Disabled),
        Some(AttrValue::Bool(false)) => Some(Disabled::Enforced),
        Some(AttrValue::S(s)) if s == "bypass" => Some(Disabled::Bypass),
        Some(other) => {
            return Err(bad(format!(
                "disabled must be true, false or 'bypass', got {other:?}"
            )))
        }
    };
    let cascade = match flag(attrs::CASCADE) {
        None => None,
        Some(AttrValue::Bool(b)) => Some(*b),
        Some(other) => return Err(bad(format!("cascade must be true or false, got {other:?}"))),
    };
    let on_unavailable = match flag(attrs::ON_UNAVAILABLE) {
        None => None,
        Some(AttrValue::S(s)) => Some(s.clone()),
        Some(other) => return Err(bad(format!("on_unavailable is not a string: {other:?}"))),
    };
    Ok(StoredLevel {
        limits,
        sched_tz: tz,
        disabled,
        cascade,
        on_unavailable,
    })
}

/// The reference's `Limit` construction rules (the engine's copy) on a stored limit.
fn check_limit(l: &StoredLimit) -> Result<(), LimitError> {
    limit::check(&limit::Fields {
        name: &l.name,
        capacity: l.capacity.into(),
        refill_amount: l.refill_amount.into(),
        refill_period_seconds: l.refill_period.into(),
        reset_schedule: !l.reset_schedule.is_empty(),
        reset_after_seconds: l.reset_after_seconds.map(i128::from),
    })
}

/// The limit-relevant content of a config item: limit attributes, `sched_tz`,
/// the flags and `on_unavailable`, with numbers in canonical form. Bookkeeping
/// the Python client adds (`config_version`, GSI3/GSI4 keys, `resource`,
/// `entity_id`) is left out, so a level written by the Python API compares equal
/// to the same level built here, and `500.0` equals `500`. A quota's refill
/// period is inert (nothing drips), so it is left out too: the API stores 1
/// where a manifest stores 60 (docs/storage.md, "Config items").
pub fn limit_content(item: &Item) -> Item {
    let view = LevelAttrs::of(item);
    let inert = |attr: &str| {
        LimitAttr::parse(attr)
            .is_some_and(|a| a.field == Field::RefillPeriod && view.is_quota(a.name, a.prefix))
    };
    item.iter()
        .filter(|(k, _)| !BOOKKEEPING.contains(&k.as_str()) && !inert(k))
        .map(|(k, v)| {
            let v = match v {
                AttrValue::N(t) => AttrValue::N(
                    Number::parse(t)
                        .map(|x| x.canonical())
                        .unwrap_or_else(|_| t.clone()),
                ),
                other => other.clone(),
            };
            (k.clone(), v)
        })
        .collect()
}

/// Whether two config items hold the same limits and flags (see [`limit_content`]).
pub fn same_limits(a: &Item, b: &Item) -> bool {
    limit_content(a) == limit_content(b)
}

/// What bucket items are synced from: the [`limit_content`] of the token
/// buckets and quotas (`l_`/`w_` attributes) and `sched_tz`. Rolling windows,
/// concurrency limits and flags never reach a bucket's parameters.
pub fn bucket_content(item: &Item) -> Item {
    limit_content(item)
        .into_iter()
        .filter(|(k, _)| {
            k == attrs::SCHED_TZ || LimitAttr::parse(k).is_some_and(|a| a.prefix.is_bucket())
        })
        .collect()
}

/// The token buckets and quotas an item marks soft (`{l_|w_}{name}_soft` true).
pub fn soft_buckets(item: &Item) -> BTreeSet<String> {
    item.iter()
        .filter(|(_, v)| **v == AttrValue::Bool(true))
        .filter_map(|(k, _)| LimitAttr::parse(k))
        .filter(|a| a.prefix.is_bucket() && a.field == Field::Soft)
        .map(|a| a.name.to_string())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::manifest::model::{Modifier as M, OnUnavailable, ResetEntry, ScheduleEntry};
    use crate::store::typed_json::item_from_str;
    use indexmap::IndexMap;

    fn limit(capacity: u64, refill: u64, period: u64) -> LimitSpec {
        LimitSpec::bucket(capacity, refill, period)
    }

    fn sched(cron: &str, tz: &str, modifier: M) -> ScheduleEntry {
        ScheduleEntry {
            cron: cron.into(),
            tz: tz.into(),
            modifier,
        }
    }

    fn reset(cron: &str, tz: &str) -> ResetEntry {
        ResetEntry {
            cron: cron.into(),
            tz: tz.into(),
        }
    }

    /// `fixtures/manifests/valid/reference-example-2.yaml`, normalised.
    pub(crate) fn example2() -> (LevelConfig, LevelConfig) {
        let ny = "America/New_York";
        let mut rpm = limit(1000, 1000, 60);
        rpm.schedule = vec![
            sched("* 9-17 * * MON-FRI", ny, M::Scale(0.5)),
            sched(
                "* * * * SAT,SUN",
                ny,
                M::Absolute {
                    capacity: Some(2000),
                    refill_amount: Some(2000),
                    refill_period_seconds: Some(60),
                },
            ),
        ];
        let mut rpd = limit(10000, 0, 60);
        rpd.reset_schedule = vec![reset("0 0 * * *", ny)];
        let resource = LevelConfig {
            limits: IndexMap::from([("rpm".to_string(), rpm), ("rpd".to_string(), rpd)]),
            disabled: None,
            cascade: None,
        };
        let mut session = limit(500, 0, 60);
        session.reset_after_seconds = Some(18000);
        session.soft = true;
        let mut monthly = limit(1_000_000, 0, 60);
        monthly.reset_schedule = vec![reset("0 0 1 * *", "UTC")];
        monthly.schedule = vec![sched("* * * 12 *", "UTC", M::Scale(2.0))];
        let entity = LevelConfig {
            limits: IndexMap::from([
                ("session".to_string(), session),
                ("monthly".to_string(), monthly),
            ]),
            disabled: None,
            cascade: Some(false),
        };
        (resource, entity)
    }

    fn attrs(item: &Item) -> Vec<(String, AttrValue)> {
        item.iter().map(|(k, v)| (k.clone(), v.clone())).collect()
    }

    #[test]
    fn example_2_resource_item_matches_the_applier_plus_client_bookkeeping() {
        let (resource, _) = example2();
        let item = build_resource("nsP", "gpt-4", &resource).unwrap();
        let expected = item_from_str(
            r##"{"PK":{"S":"nsP/RESOURCE#gpt-4"},"SK":{"S":"#CONFIG"},"GSI4PK":{"S":"nsP"},"GSI4SK":{"S":"nsP/RESOURCE#gpt-4"},
            "config_version":{"N":"1"},"resource":{"S":"gpt-4"},
            "l_rpm_cp":{"N":"1000"},"l_rpm_ra":{"N":"1000"},"l_rpm_rp":{"N":"60"},
            "l_rpm_sched":{"S":"1h9-17w1-5s500;w6,7c2000a2000p60"},
            "l_rpd_cp":{"N":"10000"},"l_rpd_ra":{"N":"0"},"l_rpd_rp":{"N":"60"},"l_rpd_rsched":{"S":"1m0h0"},
            "sched_tz":{"S":"America/New_York"}}"##,
        )
        .unwrap();
        assert_eq!(attrs(&item), attrs(&expected));
    }

    #[test]
    fn example_2_entity_item_matches_the_applier_plus_client_bookkeeping() {
        let (_, entity) = example2();
        let item = build_entity("nsP", "team-a", "gpt-4", &entity).unwrap();
        let expected = item_from_str(
            r##"{"PK":{"S":"nsP/ENTITY#team-a"},"SK":{"S":"#CONFIG#gpt-4"},"GSI4PK":{"S":"nsP"},"GSI4SK":{"S":"nsP/ENTITY#team-a"},
            "GSI3PK":{"S":"nsP/ENTITY_CONFIG#gpt-4"},"GSI3SK":{"S":"team-a"},
            "config_version":{"N":"1"},"entity_id":{"S":"team-a"},"resource":{"S":"gpt-4"},"cascade":{"BOOL":false},
            "w_session_cp":{"N":"500"},"w_session_ra":{"N":"0"},"w_session_rp":{"N":"60"},"w_session_rsa":{"N":"18000"},"w_session_soft":{"BOOL":true},
            "l_monthly_cp":{"N":"1000000"},"l_monthly_ra":{"N":"0"},"l_monthly_rp":{"N":"60"},
            "l_monthly_sched":{"S":"1M12s2000"},"l_monthly_rsched":{"S":"1m0h0D1"},
            "sched_tz":{"S":"UTC"}}"##,
        )
        .unwrap();
        assert_eq!(attrs(&item), attrs(&expected));
    }

    #[test]
    fn items_written_by_the_python_client_are_reproduced_exactly() {
        // From the dump (`fixtures/items/reference-dump.jsonl`): user-1's _default_ level and the system level.
        let user1 = item_from_str(r##"{"PK":{"S":"lum6SW9LwCI/ENTITY#user-1"},"SK":{"S":"#CONFIG#_default_"},"GSI3PK":{"S":"lum6SW9LwCI/ENTITY_CONFIG#_default_"},"GSI3SK":{"S":"user-1"},"GSI4PK":{"S":"lum6SW9LwCI"},"GSI4SK":{"S":"lum6SW9LwCI/ENTITY#user-1"},"config_version":{"N":"1"},"entity_id":{"S":"user-1"},"l_rph_cp":{"N":"3000"},"l_rph_ra":{"N":"3000"},"l_rph_rp":{"N":"3600"},"resource":{"S":"_default_"}}"##).unwrap();
        let level = LevelConfig {
            limits: IndexMap::from([("rph".to_string(), limit(3000, 3000, 3600))]),
            ..Default::default()
        };
        assert_eq!(
            build_entity("lum6SW9LwCI", "user-1", "_default_", &level).unwrap(),
            user1
        );

        let system = item_from_str(r##"{"PK":{"S":"lum6SW9LwCI/SYSTEM#"},"SK":{"S":"#CONFIG"},"GSI4PK":{"S":"lum6SW9LwCI"},"GSI4SK":{"S":"lum6SW9LwCI/SYSTEM#"},"config_version":{"N":"1"},"l_rpm_cp":{"N":"1000"},"l_rpm_ra":{"N":"1000"},"l_rpm_rp":{"N":"60"},"l_tpm_cp":{"N":"100000"},"l_tpm_ra":{"N":"100000"},"l_tpm_rp":{"N":"60"},"on_unavailable":{"S":"block"}}"##).unwrap();
        let level = SystemLevel {
            limits: IndexMap::from([
                ("rpm".to_string(), limit(1000, 1000, 60)),
                ("tpm".to_string(), limit(100000, 100000, 60)),
            ]),
            on_unavailable: Some(OnUnavailable::Block),
        };
        assert_eq!(build_system("lum6SW9LwCI", &level).unwrap(), system);
    }

    #[test]
    fn decode_inverts_build() {
        let (resource, entity) = example2();
        let item = build_entity("ns", "team-a", "gpt-4", &entity).unwrap();
        let level = decode_level(&item).unwrap();
        assert_eq!(level.cascade, Some(false));
        assert_eq!(level.disabled, None);
        let names: Vec<&str> = level.limits.iter().map(|l| l.name.as_str()).collect();
        assert_eq!(names, ["monthly", "session"], "sorted by name");
        let monthly = &level.limits[0];
        assert_eq!(
            (
                monthly.capacity,
                monthly.refill_amount,
                monthly.refill_period
            ),
            (1_000_000, 0, 60)
        );
        assert_eq!(monthly.schedule.len(), 1);
        assert_eq!(monthly.schedule[0].compact, "1M12s2000");
        assert_eq!(monthly.schedule[0].cron, "* * * 12 *");
        assert_eq!(
            monthly.schedule[0].modifier,
            Some(Modifier::Scale { permille: 2000 })
        );
        assert_eq!(monthly.reset_schedule[0].cron, "0 0 1 * *");
        assert_eq!(monthly.reset_schedule[0].modifier, None);
        let session = &level.limits[1];
        assert_eq!(session.reset_after_seconds, Some(18000));
        assert!(session.soft);

        let item = build_resource("ns", "gpt-4", &resource).unwrap();
        let level = decode_level(&item).unwrap();
        let rpm = level.limits.iter().find(|l| l.name == "rpm").unwrap();
        assert_eq!(rpm.schedule.len(), 2);
        assert_eq!(rpm.schedule[1].compact, "1w6,7c2000a2000p60");
        assert_eq!(rpm.schedule[1].tz, "America/New_York");
        assert_eq!(
            rpm.schedule[1].modifier,
            Some(Modifier::Absolute {
                capacity: Some(2000),
                refill_amount: Some(2000),
                refill_period_seconds: Some(60)
            })
        );
    }

    #[test]
    fn flags_round_trip() {
        for (d, stored) in [
            (Disabled::Disabled, AttrValue::Bool(true)),
            (Disabled::Enforced, AttrValue::Bool(false)),
            (Disabled::Bypass, AttrValue::s("bypass")),
        ] {
            let level = LevelConfig {
                disabled: Some(d),
                cascade: Some(true),
                ..Default::default()
            };
            let item = build_resource("ns", "r", &level).unwrap();
            assert_eq!(item["disabled"], stored);
            let back = decode_level(&item).unwrap();
            assert_eq!(back.disabled, Some(d));
            assert_eq!(back.cascade, Some(true));
            assert!(
                back.limits.is_empty(),
                "a stub level has flags and no limits"
            );
        }
    }

    #[test]
    fn mixed_timezones_on_one_item_are_refused() {
        let mut a = limit(10, 10, 60);
        a.schedule = vec![sched("* 9 * * *", "UTC", M::Scale(2.0))];
        let mut b = limit(10, 0, 60);
        b.reset_schedule = vec![reset("0 0 * * *", "Europe/Berlin")];
        let level = LevelConfig {
            limits: IndexMap::from([("a".to_string(), a), ("b".to_string(), b)]),
            ..Default::default()
        };
        let err = build_resource("ns", "r", &level).unwrap_err();
        assert_eq!(
            err.to_string(),
            "every schedule entry on one level must share one timezone: limit 'a' uses 'UTC', limit 'b' uses 'Europe/Berlin'"
        );
    }

    #[test]
    fn bad_identifiers_are_refused() {
        let level = LevelConfig {
            limits: IndexMap::from([("bad#name".to_string(), limit(1, 1, 60))]),
            ..Default::default()
        };
        assert!(build_resource("ns", "gpt-4", &level).is_err());
        assert!(build_resource("ns", "a#b", &LevelConfig::default()).is_err());
        assert!(build_entity("ns", "a#b", "gpt-4", &LevelConfig::default()).is_err());
        assert!(build_resource("ns", "_default_", &LevelConfig::default()).is_err());
    }

    fn unreadable(extra: &str) -> String {
        let item = item_from_str(&format!(
            r##"{{"PK":{{"S":"p"}},"SK":{{"S":"#CONFIG"}}{extra}}}"##
        ))
        .unwrap();
        match decode_level(&item) {
            Err(CodecError::Unreadable { reason, .. }) => reason,
            other => panic!("{extra}: {other:?}"),
        }
    }

    #[test]
    fn unreadable_items_fail_as_a_whole() {
        assert!(
            unreadable(r##","w_s_cp":{"N":"5"},"w_s_ra":{"N":"0"},"w_s_rp":{"N":"60"}"##)
                .contains("without w_s_rsa")
        );
        assert!(unreadable(r##","l_x_cp":{"N":"5"},"l_x_ra":{"N":"5"},"l_x_rp":{"N":"60"},"w_x_cp":{"N":"5"},"w_x_rsa":{"N":"5"}"##).contains("both"));
        assert!(unreadable(r##","l_x_cp":{"N":"5"},"l_x_ra":{"N":"5"},"l_x_rp":{"N":"60"},"l_x_sched":{"S":"h9s500"}"##).contains("version"));
        assert!(unreadable(
            r##","l_x_cp":{"N":"5"},"l_x_ra":{"N":"0"},"l_x_rp":{"N":"60"},"l_x_rsched":{"S":"1"}"##
        )
        .contains("no entries"));
        assert!(
            unreadable(r##","l_x_cp":{"N":"1000.5"},"l_x_ra":{"N":"5"},"l_x_rp":{"N":"60"}"##)
                .contains("whole")
        );
        assert!(
            unreadable(r##","l_x_cp":{"N":"5"},"l_x_ra":{"N":"0"},"l_x_rp":{"N":"60"}"##)
                .contains("does not drip")
        );
        assert!(unreadable(
            r##","l_x_cp":{"N":"1000000000000001"},"l_x_ra":{"N":"5"},"l_x_rp":{"N":"60"}"##
        )
        .contains("at most"));
        assert!(unreadable(
            r##","l_bad#n_cp":{"N":"5"},"l_bad#n_ra":{"N":"5"},"l_bad#n_rp":{"N":"60"}"##
        )
        .contains("'#'"));
        assert!(unreadable(r##","disabled":{"S":"maybe"}"##).contains("disabled"));
        assert!(unreadable(r##","sched_tz":{"S":"Mars/Olympus"}"##).contains("timezone"));
        // Missing numeric fields read as 0: a limit with only `_cp` cannot drip.
        assert!(
            unreadable(r##","l_x_cp":{"N":"5"},"l_x_rp":{"N":"60"}"##).contains("does not drip")
        );
    }

    #[test]
    fn python_written_items_decode() {
        // user-1/gpt-4 from the dump: soft limit, session quota, plain drip.
        let item = item_from_str(r##"{"PK":{"S":"lum6SW9LwCI/ENTITY#user-1"},"SK":{"S":"#CONFIG#gpt-4"},"GSI3PK":{"S":"lum6SW9LwCI/ENTITY_CONFIG#gpt-4"},"GSI3SK":{"S":"user-1"},"GSI4PK":{"S":"lum6SW9LwCI"},"GSI4SK":{"S":"lum6SW9LwCI/ENTITY#user-1"},"config_version":{"N":"1"},"entity_id":{"S":"user-1"},"l_rpm_cp":{"N":"60"},"l_rpm_ra":{"N":"60"},"l_rpm_rp":{"N":"60"},"l_tpm_cp":{"N":"20000"},"l_tpm_ra":{"N":"20000"},"l_tpm_rp":{"N":"60"},"l_tpm_soft":{"BOOL":true},"resource":{"S":"gpt-4"},"w_session_cp":{"N":"2000"},"w_session_ra":{"N":"0"},"w_session_rp":{"N":"1"},"w_session_rsa":{"N":"18000"}}"##).unwrap();
        let level = decode_level(&item).unwrap();
        let names: Vec<_> = level
            .limits
            .iter()
            .map(|l| (l.name.as_str(), l.soft))
            .collect();
        assert_eq!(names, [("rpm", false), ("session", false), ("tpm", true)]);
    }

    #[test]
    fn limit_content_ignores_client_bookkeeping_and_number_spelling() {
        let (resource, _) = example2();
        let ours = build_resource("ns", "gpt-4", &resource).unwrap();
        let mut theirs = ours.clone();
        theirs.remove("config_version");
        theirs.insert("l_rpm_cp".into(), AttrValue::n("1000.0"));
        theirs.insert("l_rpd_rp".into(), AttrValue::n("1"));
        assert!(same_limits(&ours, &theirs));
        let mut changed = theirs.clone();
        changed.insert("l_rpm_rp".into(), AttrValue::n("1"));
        assert!(!same_limits(&ours, &changed), "a drip's period matters");
        let mut changed = theirs;
        changed.insert("cascade".into(), AttrValue::Bool(true));
        assert!(!same_limits(&ours, &changed), "flags matter");
    }

    fn kinds_level() -> LevelConfig {
        let mut rpd = limit(1000, 0, 60);
        rpd.kind = LimitKind::Rolling {
            window: RollingWindow::Day,
        };
        rpd.soft = true;
        let mut jobs = limit(3, 0, 60);
        jobs.kind = LimitKind::Concurrency {
            hold_ttl_seconds: 120,
        };
        LevelConfig {
            limits: IndexMap::from([
                ("rpm".to_string(), limit(100, 100, 60)),
                ("rpd".to_string(), rpd),
                ("jobs".to_string(), jobs),
            ]),
            ..Default::default()
        }
    }

    #[test]
    fn other_kinds_are_stored_under_attributes_python_ignores() {
        let item = build_resource("ns", "gpt-4", &kinds_level()).unwrap();
        let expected = item_from_str(
            r##"{"PK":{"S":"ns/RESOURCE#gpt-4"},"SK":{"S":"#CONFIG"},"GSI4PK":{"S":"ns"},"GSI4SK":{"S":"ns/RESOURCE#gpt-4"},
            "config_version":{"N":"1"},"resource":{"S":"gpt-4"},
            "l_rpm_cp":{"N":"100"},"l_rpm_ra":{"N":"100"},"l_rpm_rp":{"N":"60"},
            "r_rpd_amt":{"N":"1000"},"r_rpd_win":{"S":"day"},"r_rpd_soft":{"BOOL":true},
            "c_jobs_slots":{"N":"3"},"c_jobs_ttl":{"N":"120"}}"##,
        )
        .unwrap();
        assert_eq!(attrs(&item), attrs(&expected));
        // The 0.17 reading rule finds the bucket only.
        assert_eq!(attrs::python_017_limit_names(&item), ["rpm"]);
    }

    #[test]
    fn other_kinds_round_trip() {
        let item = build_entity("ns", "u", "_default_", &kinds_level()).unwrap();
        let level = decode_level(&item).unwrap();
        let got: Vec<(&str, u64, LimitKind, bool)> = level
            .limits
            .iter()
            .map(|l| (l.name.as_str(), l.capacity, l.kind, l.soft))
            .collect();
        assert_eq!(
            got,
            [
                (
                    "jobs",
                    3,
                    LimitKind::Concurrency {
                        hold_ttl_seconds: 120
                    },
                    false
                ),
                (
                    "rpd",
                    1000,
                    LimitKind::Rolling {
                        window: RollingWindow::Day
                    },
                    true
                ),
                ("rpm", 100, LimitKind::Bucket, false),
            ]
        );
        assert_eq!(level.sched_tz, None, "nothing scheduled");
        let kinds = counted_kinds(&item);
        assert_eq!(kinds["jobs"], Counts::CountsHolds);
        assert_eq!(kinds["rpd"], Counts::CountsUse);
        assert_eq!(kinds["rpm"], Counts::CountsUse);
        assert_eq!(kinds.len(), 3);
    }

    #[test]
    fn a_change_to_another_kind_is_a_change_of_content() {
        let before = build_resource("ns", "r", &kinds_level()).unwrap();
        let mut level = kinds_level();
        assert!(same_limits(
            &before,
            &build_resource("ns", "r", &level).unwrap()
        ));
        level.limits["rpd"].kind = LimitKind::Rolling {
            window: RollingWindow::Hour,
        };
        assert!(!same_limits(
            &before,
            &build_resource("ns", "r", &level).unwrap()
        ));
        let mut level = kinds_level();
        level.limits["jobs"].kind = LimitKind::Concurrency {
            hold_ttl_seconds: 300,
        };
        assert!(!same_limits(
            &before,
            &build_resource("ns", "r", &level).unwrap()
        ));
        let mut level = kinds_level();
        level.limits["rpd"].soft = false;
        assert!(!same_limits(
            &before,
            &build_resource("ns", "r", &level).unwrap()
        ));
    }

    #[test]
    fn unreadable_other_kinds_fail_the_item() {
        assert!(unreadable(r##","r_x_amt":{"N":"5"}"##).contains("r_x_win is missing"));
        assert!(
            unreadable(r##","r_x_amt":{"N":"5"},"r_x_win":{"S":"month"}"##)
                .contains("not minute, hour or day")
        );
        assert!(unreadable(r##","r_x_amt":{"N":"0"},"r_x_win":{"S":"day"}"##).contains("from 1"));
        assert!(unreadable(r##","c_x_slots":{"N":"3"}"##).contains("c_x_ttl is missing"));
        assert!(
            unreadable(r##","c_x_slots":{"N":"3"},"c_x_ttl":{"N":"3601"}"##)
                .contains("from 1 to 3600")
        );
        assert!(
            unreadable(r##","c_x_slots":{"N":"1001"},"c_x_ttl":{"N":"60"}"##)
                .contains("from 1 to 1000")
        );
        assert!(unreadable(
            r##","c_x_slots":{"N":"3"},"c_x_ttl":{"N":"60"},"r_x_amt":{"N":"5"},"r_x_win":{"S":"day"}"##
        )
        .contains("more than one kind"));
        assert!(unreadable(
            r##","l_x_cp":{"N":"5"},"l_x_ra":{"N":"5"},"l_x_rp":{"N":"60"},"c_x_slots":{"N":"3"},"c_x_ttl":{"N":"60"}"##
        )
        .contains("more than one kind"));
        assert!(unreadable(
            r##","c_x_slots":{"N":"3"},"c_x_ttl":{"N":"60"},"c_x_soft":{"S":"y"}"##
        )
        .contains("not a boolean"));
    }

    fn kind_strategy() -> impl proptest::strategy::Strategy<Value = (LimitKind, u64)> {
        use proptest::prelude::*;
        prop_oneof![
            (1..=MAX_TOKENS).prop_map(|c| (LimitKind::Bucket, c)),
            (
                prop_oneof![
                    Just(RollingWindow::Minute),
                    Just(RollingWindow::Hour),
                    Just(RollingWindow::Day)
                ],
                1..=MAX_TOKENS
            )
                .prop_map(|(window, c)| (LimitKind::Rolling { window }, c)),
            (1..=MAX_SLOTS, 1u64..=3600).prop_map(|(slots, ttl)| (
                LimitKind::Concurrency {
                    hold_ttl_seconds: ttl
                },
                slots
            )),
        ]
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(128))]
        /// Any mix of kinds decodes to what was built, and the 0.17 reading
        /// rule (`_cp` under `l_`/`w_`) finds exactly the buckets.
        #[test]
        fn every_mix_of_kinds_round_trips(
            limits in proptest::collection::btree_map("[a-z][a-z0-9_]{0,8}", (kind_strategy(), proptest::bool::ANY), 0..6)
        ) {
            let level = LevelConfig {
                limits: limits
                    .iter()
                    .map(|(name, ((kind, cap), soft))| {
                        let mut l = limit(*cap, if *kind == LimitKind::Bucket { *cap } else { 0 }, 60);
                        l.kind = *kind;
                        l.soft = *soft;
                        (name.clone(), l)
                    })
                    .collect(),
                ..Default::default()
            };
            let item = build_entity("ns", "e", "r", &level).unwrap();
            let back = decode_level(&item).unwrap();
            let got: Vec<(String, LimitKind, u64, bool)> = back
                .limits
                .iter()
                .map(|l| (l.name.clone(), l.kind, l.capacity, l.soft))
                .collect();
            let want: Vec<(String, LimitKind, u64, bool)> = limits
                .iter()
                .map(|(n, ((k, c), s))| (n.clone(), *k, *c, *s))
                .collect();
            proptest::prop_assert_eq!(got, want);
            let python_sees = attrs::python_017_limit_names(&item);
            let buckets: Vec<String> = limits
                .iter()
                .filter(|(_, ((k, _), _))| *k == LimitKind::Bucket)
                .map(|(n, _)| n.clone())
                .collect();
            proptest::prop_assert_eq!(python_sees, buckets);
            let kinds = counted_kinds(&item);
            proptest::prop_assert_eq!(kinds.len(), limits.len());
        }
    }
}
