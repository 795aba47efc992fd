//! The DynamoDB layout of zae-limiter 0.17 as data: keys, config items,
//! registries, namespaces and the version record. Knows items, not YAML:
//! config items are built from the validated manifest model.
//!
//! Stable API (plan/diff/apply and the display commands build on it):
//! * [`keys`] — key grammar and identifier rules: `system_pk(ns)`,
//!   `resource_pk(ns, r)`, `entity_pk(ns, e)`, `CONFIG_SK`, `entity_config_sk(r)`,
//!   `PROVISIONER_SK`, `pending_sk(..)`, `*_key(..)` → [`crate::store::Key`],
//!   `validate_*` for entity ids, resource, limit and namespace names.
//! * [`attrs`] — the stored attribute vocabulary, the one place that spells and
//!   parses level and bucket attribute names (`l_{n}_cp`, `r_{n}_win`,
//!   `b_{n}_tk`, `sched_tz`, …), and [`attrs::LevelAttrs`], a lossless view of
//!   a config item's attributes by limit, prefix and field.
//! * [`config`] — `build_system(ns, &SystemLevel)`, `build_resource(ns, r, &LevelConfig)`,
//!   `build_entity(ns, e, r, &LevelConfig)` → the item the Python client writes;
//!   `decode_level(&Item)` → [`config::StoredLevel`] (reference reading rules;
//!   `StoredLevel::buckets()` is the part zae-limiter 0.17 and bucket items see);
//!   `limit_content(&Item)` / `same_limits(a, b)` — what plan compares;
//!   `counted_kinds(&Item)` — what each limit counts, for the kind-change refusal.
//! * The `#RESOURCES` / `#ENTITY_CONFIG_RESOURCES` registries are kept by
//!   [`crate::apply::writes`], which writes each level and its registry entry in
//!   one transaction.
//! * [`namespace`] — `register(store, name)`, `resolve(store, name)`, `list(store)`.
//! * [`chunked`] — splitting our own growing items (digests, the count
//!   journal, the managed set's overflow) below the 400 KB item limit.
//! * [`version`] — `read(store)`, `ensure_initialized(store)` (version record +
//!   `default` namespace, as `Repository.open` does on a new table).

pub mod attrs;
pub mod base64url;
pub mod chunked;
pub mod config;
pub mod keys;
pub mod namespace;
pub mod read;
pub mod source;
pub mod version;
