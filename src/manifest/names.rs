//! Identifier rules for the names a manifest introduces (spec dynamodb.md §2):
//! they become parts of DynamoDB keys and attribute names, so a bad one would be
//! written and then break every later read.

/// Why a name is not allowed, as a message and a fix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NameProblem {
    pub message: String,
    pub help: String,
}

/// The pseudo-resource for an entity's limits on every resource.
pub const DEFAULT_RESOURCE: &str = "_default_";
/// Limit names the library reserves for itself.
pub const RESERVED_LIMIT_NAMES: &[&str] = &["wcu"];

const MAX_ENTITY_ID: usize = 256;
const MAX_NAME: usize = 64;

fn common(kind: &str, name: &str, max: usize) -> Option<NameProblem> {
    if name.is_empty() {
        return Some(NameProblem {
            message: format!("{kind} cannot be empty"),
            help: format!("give the {kind} a name"),
        });
    }
    if name.contains('#') {
        return Some(NameProblem {
            message: format!("{kind} `{name}` contains `#`, the key delimiter"),
            help: "remove the `#`: it separates the parts of every stored key, so a name containing it is written and then cannot be read back".to_string(),
        });
    }
    let len = name.chars().count();
    if len > max {
        return Some(NameProblem {
            message: format!("{kind} is {len} characters long; at most {max} are allowed"),
            help: format!("shorten the {kind}"),
        });
    }
    None
}

/// Entity ids: `^[A-Za-z0-9][A-Za-z0-9_.\-:@]*$`, at most 256 characters.
pub fn check_entity_id(name: &str) -> Option<NameProblem> {
    if let Some(p) = common("entity id", name, MAX_ENTITY_ID) {
        return Some(p);
    }
    let mut chars = name.chars();
    let first_ok = chars.next().is_some_and(|c| c.is_ascii_alphanumeric());
    let rest_ok = chars.all(|c| c.is_ascii_alphanumeric() || "_.-:@".contains(c));
    if first_ok && rest_ok {
        None
    } else {
        Some(NameProblem {
            message: format!("entity id `{name}` is not a valid identifier"),
            help: "an entity id starts with a letter or digit and contains only letters, digits, `_`, `.`, `-`, `:` and `@`".into(),
        })
    }
}

/// Resource names: `^[A-Za-z][A-Za-z0-9_.\-/:]*$`, at most 64 characters.
/// `_default_` is handled by the caller (allowed only under an entity).
pub fn check_resource_name(name: &str) -> Option<NameProblem> {
    if let Some(p) = common("resource name", name, MAX_NAME) {
        return Some(p);
    }
    let mut chars = name.chars();
    let first_ok = chars.next().is_some_and(|c| c.is_ascii_alphabetic());
    let rest_ok = chars.all(|c| c.is_ascii_alphanumeric() || "_.-/:".contains(c));
    if first_ok && rest_ok {
        None
    } else {
        Some(NameProblem {
            message: format!("resource name `{name}` is not a valid name"),
            help: "a resource name starts with a letter and contains only letters, digits, `_`, `.`, `-`, `/` and `:`".into(),
        })
    }
}

/// Limit names: `^[A-Za-z][A-Za-z0-9_.\-]*$`, at most 64 characters, not `wcu`.
pub fn check_limit_name(name: &str) -> Option<NameProblem> {
    if let Some(p) = common("limit name", name, MAX_NAME) {
        return Some(p);
    }
    if RESERVED_LIMIT_NAMES.contains(&name) {
        return Some(NameProblem {
            message: format!("limit name `{name}` is reserved"),
            help: "zae-limiter adds an internal `wcu` (write capacity) limit to every bucket; choose another name".into(),
        });
    }
    let mut chars = name.chars();
    let first_ok = chars.next().is_some_and(|c| c.is_ascii_alphabetic());
    let rest_ok = chars.all(|c| c.is_ascii_alphanumeric() || "_.-".contains(c));
    if first_ok && rest_ok {
        None
    } else {
        Some(NameProblem {
            message: format!("limit name `{name}` is not a valid name"),
            help: "a limit name starts with a letter and contains only letters, digits, `_`, `.` and `-`".into(),
        })
    }
}

/// Namespace names: a non-empty string without `#` (it becomes part of a registry key).
pub fn check_namespace(name: &str) -> Option<NameProblem> {
    if name.trim().is_empty() {
        return Some(NameProblem {
            message: "`namespace` must be a non-empty string".into(),
            help: "write the namespace name, e.g. `namespace: default`".into(),
        });
    }
    common("namespace", name, MAX_ENTITY_ID)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entity_ids() {
        assert!(check_entity_id("user-1").is_none());
        assert!(check_entity_id("9abc:x@y.z_w").is_none());
        assert!(check_entity_id("a#b").unwrap().message.contains('#'));
        assert!(check_entity_id("-x").is_some());
        assert!(check_entity_id("a b").is_some());
        assert!(check_entity_id("").is_some());
        assert!(check_entity_id(&"x".repeat(257)).is_some());
        assert!(check_entity_id(&"x".repeat(256)).is_none());
    }

    #[test]
    fn resource_names() {
        assert!(check_resource_name("gpt-4").is_none());
        assert!(check_resource_name("openai/gpt-4:turbo").is_none());
        assert!(check_resource_name(DEFAULT_RESOURCE).is_some());
        assert!(check_resource_name("4o").is_some());
        assert!(check_resource_name(&"r".repeat(65)).is_some());
    }

    #[test]
    fn limit_names() {
        assert!(check_limit_name("rpm").is_none());
        assert!(check_limit_name("tokens_per.day-1").is_none());
        assert!(check_limit_name("wcu")
            .unwrap()
            .message
            .contains("reserved"));
        assert!(check_limit_name("a/b").is_some());
        assert!(check_limit_name("1rpm").is_some());
    }
}
