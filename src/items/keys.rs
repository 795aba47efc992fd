//! The key grammar of a zae-limiter 0.17 table (docs/storage.md, "Keys") and the
//! identifier rules that keep keys parseable: `#` delimits, `/` splits the
//! namespace off, so user identifiers are checked before they become keys.

use zae_limiter_engine::names::{self, NameError};

use crate::store::{AttrValue, Item, Key};

/// The reserved namespace of table-level records.
pub const TABLE_NS: &str = "_";
/// PK of table-level records (namespace registry, version record).
pub const TABLE_SYSTEM_PK: &str = "_/SYSTEM#";
/// SK of the version record.
pub const VERSION_SK: &str = "#VERSION";
/// SK prefix of the forward namespace records (`#NAMESPACE#{name}`).
pub const NAMESPACE_SK_PREFIX: &str = "#NAMESPACE#";
/// SK prefix of the reverse namespace records (`#NSID#{id}`).
pub const NSID_SK_PREFIX: &str = "#NSID#";
/// SK of system and resource config items.
pub const CONFIG_SK: &str = "#CONFIG";
/// SK prefix of entity config items (`#CONFIG#{resource}`).
pub const ENTITY_CONFIG_SK_PREFIX: &str = "#CONFIG#";
/// The pseudo-resource of an entity's limits for every resource.
pub use zae_limiter_engine::names::DEFAULT_RESOURCE;
/// SK of the resource registry (string set `resources`).
pub const RESOURCES_SK: &str = "#RESOURCES";
/// SK of the entity-config registry (one counter per resource).
pub const ENTITY_CONFIG_RESOURCES_SK: &str = "#ENTITY_CONFIG_RESOURCES";
/// SK of the provisioner's managed-set record.
pub const PROVISIONER_SK: &str = "#PROVISIONER";
/// SK prefix of pending fan-out records.
pub const PENDING_SK_PREFIX: &str = "#PROVISIONER#PENDING#";
/// SK of entity metadata.
pub const META_SK: &str = "#META";
/// SK of bucket items.
pub const STATE_SK: &str = "#STATE";

/// `{ns}/SYSTEM#`
pub fn system_pk(ns: &str) -> String {
    format!("{ns}/SYSTEM#")
}

/// `{ns}/RESOURCE#{r}`
pub fn resource_pk(ns: &str, resource: &str) -> String {
    format!("{ns}/RESOURCE#{resource}")
}

/// `{ns}/ENTITY#{e}`
pub fn entity_pk(ns: &str, entity: &str) -> String {
    format!("{ns}/ENTITY#{entity}")
}

/// `#CONFIG#{r}` (`r` may be `_default_`)
pub fn entity_config_sk(resource: &str) -> String {
    format!("{ENTITY_CONFIG_SK_PREFIX}{resource}")
}

/// GSI3PK of a client-written entity config item: `{ns}/ENTITY_CONFIG#{r}`.
pub fn entity_config_gsi3pk(ns: &str, resource: &str) -> String {
    format!("{ns}/ENTITY_CONFIG#{resource}")
}

/// `#NAMESPACE#{name}`
pub fn namespace_sk(name: &str) -> String {
    format!("{NAMESPACE_SK_PREFIX}{name}")
}

/// `#NSID#{id}`
pub fn nsid_sk(id: &str) -> String {
    format!("{NSID_SK_PREFIX}{id}")
}

/// `#PROVISIONER#PENDING#{kind}#{level}#{target}`
pub fn pending_sk(kind: &str, level: &str, target: &str) -> String {
    format!("{PENDING_SK_PREFIX}{kind}#{level}#{target}")
}

/// `{ns}/BUCKET#{e}#{r}#{k}`
pub fn bucket_pk(ns: &str, entity: &str, resource: &str, shard: u32) -> String {
    format!("{ns}/BUCKET#{entity}#{resource}#{shard}")
}

/// The version record.
pub fn version_key() -> Key {
    Key::new(TABLE_SYSTEM_PK, VERSION_SK)
}

/// Forward namespace record: name → id.
pub fn namespace_key(name: &str) -> Key {
    Key::new(TABLE_SYSTEM_PK, namespace_sk(name))
}

/// Reverse namespace record: id → name.
pub fn nsid_key(id: &str) -> Key {
    Key::new(TABLE_SYSTEM_PK, nsid_sk(id))
}

pub fn system_config_key(ns: &str) -> Key {
    Key::new(system_pk(ns), CONFIG_SK)
}

pub fn resource_config_key(ns: &str, resource: &str) -> Key {
    Key::new(resource_pk(ns, resource), CONFIG_SK)
}

pub fn entity_config_key(ns: &str, entity: &str, resource: &str) -> Key {
    Key::new(entity_pk(ns, entity), entity_config_sk(resource))
}

pub fn resources_registry_key(ns: &str) -> Key {
    Key::new(system_pk(ns), RESOURCES_SK)
}

pub fn entity_config_registry_key(ns: &str) -> Key {
    Key::new(system_pk(ns), ENTITY_CONFIG_RESOURCES_SK)
}

/// The entity metadata item (parent, cascade default).
pub fn meta_key(ns: &str, entity: &str) -> Key {
    Key::new(entity_pk(ns, entity), META_SK)
}

pub fn provisioner_key(ns: &str) -> Key {
    Key::new(system_pk(ns), PROVISIONER_SK)
}

/// A new item at `key` in namespace `ns` with the GSI4 keys (`{ns}` / its PK)
/// that every namespaced item of ours carries: a namespace purge finds items
/// through GSI4.
pub fn namespaced_item(ns: &str, key: Key) -> Item {
    let mut item = Item::new();
    item.insert("GSI4PK".into(), AttrValue::s(ns));
    item.insert("GSI4SK".into(), AttrValue::s(&key.pk));
    item.insert("PK".into(), AttrValue::S(key.pk));
    item.insert("SK".into(), AttrValue::S(key.sk));
    item
}

/// An identifier that would not make a well-formed key (the engine's name
/// rules, [`zae_limiter_engine::names`], are the one copy).
pub type IdentifierError = NameError;

/// Entity ids: [`names::ENTITY_ID`].
pub fn validate_entity_id(id: &str) -> Result<(), IdentifierError> {
    names::ENTITY_ID.check(id)
}

/// Resource names: [`names::RESOURCE_NAME`]. `_default_` fails this rule on
/// purpose (it is only an entity-config pseudo-resource).
pub fn validate_resource_name(name: &str) -> Result<(), IdentifierError> {
    names::RESOURCE_NAME.check(name)
}

/// The resource part of an entity config: a resource name or `_default_`.
pub fn validate_entity_resource(name: &str) -> Result<(), IdentifierError> {
    if name == DEFAULT_RESOURCE {
        Ok(())
    } else {
        validate_resource_name(name)
    }
}

/// Limit names: [`names::LIMIT_NAME`] (`wcu` is reserved).
pub fn validate_limit_name(name: &str) -> Result<(), IdentifierError> {
    names::LIMIT_NAME.check(name)
}

/// Namespace names this tool registers: [`names::NAMESPACE_NAME`].
pub fn validate_namespace_name(name: &str) -> Result<(), IdentifierError> {
    names::NAMESPACE_NAME.check(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_match_the_reference_catalogue() {
        let ns = "lum6SW9LwCI";
        assert_eq!(
            system_config_key(ns),
            Key::new("lum6SW9LwCI/SYSTEM#", "#CONFIG")
        );
        assert_eq!(
            resource_config_key(ns, "gpt-4"),
            Key::new("lum6SW9LwCI/RESOURCE#gpt-4", "#CONFIG")
        );
        assert_eq!(
            entity_config_key(ns, "user-1", DEFAULT_RESOURCE),
            Key::new("lum6SW9LwCI/ENTITY#user-1", "#CONFIG#_default_")
        );
        assert_eq!(
            entity_config_gsi3pk(ns, "gpt-4"),
            "lum6SW9LwCI/ENTITY_CONFIG#gpt-4"
        );
        assert_eq!(
            namespace_key("default"),
            Key::new("_/SYSTEM#", "#NAMESPACE#default")
        );
        assert_eq!(nsid_key(ns), Key::new("_/SYSTEM#", "#NSID#lum6SW9LwCI"));
        assert_eq!(version_key(), Key::new("_/SYSTEM#", "#VERSION"));
        assert_eq!(provisioner_key(ns).sk, "#PROVISIONER");
        assert_eq!(resources_registry_key(ns).sk, "#RESOURCES");
        assert_eq!(
            entity_config_registry_key(ns).sk,
            "#ENTITY_CONFIG_RESOURCES"
        );
        assert_eq!(
            pending_sk("sync", "entity", "user-1/gpt-4"),
            "#PROVISIONER#PENDING#sync#entity#user-1/gpt-4"
        );
        assert_eq!(
            bucket_pk(ns, "org-1", "gpt-4", 0),
            "lum6SW9LwCI/BUCKET#org-1#gpt-4#0"
        );
    }

    #[test]
    fn identifier_rules() {
        for ok in ["user-1", "1abc", "a.b:c@d_e", &"x".repeat(256)] {
            assert!(validate_entity_id(ok).is_ok(), "{ok}");
        }
        for bad in ["", "-x", "a#b", "a/b", "a b", &"x".repeat(257)] {
            assert!(validate_entity_id(bad).is_err(), "{bad}");
        }
        for ok in ["gpt-4", "openai/gpt-4:turbo", "a_b.c"] {
            assert!(validate_resource_name(ok).is_ok(), "{ok}");
        }
        for bad in ["", "4o", "_default_", "a#b", "a@b", &"r".repeat(65)] {
            assert!(validate_resource_name(bad).is_err(), "{bad}");
        }
        assert!(validate_entity_resource("_default_").is_ok());
        for ok in ["rpm", "tokens_per_min", "a.b-c"] {
            assert!(validate_limit_name(ok).is_ok(), "{ok}");
        }
        for bad in ["wcu", "1rpm", "a/b", "a:b", "a#b", ""] {
            assert!(validate_limit_name(bad).is_err(), "{bad}");
        }
        let e = validate_limit_name("bad#name").unwrap_err();
        assert_eq!(
            e.to_string(),
            "invalid limit name 'bad#name': cannot contain '#' (the key delimiter)"
        );
        assert!(validate_namespace_name("tenant-a").is_ok());
        assert!(validate_namespace_name("a/b").is_err());
    }
}
