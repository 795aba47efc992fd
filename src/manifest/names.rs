//! The name rules as the manifest reports them: the rules themselves are the
//! engine's ([`zae_limiter_engine::names`]), one copy shared with the item
//! codec and the JSON Schema; this module turns their typed errors into a
//! message and a fix.

use zae_limiter_engine::names::{
    NameError, NameRule, Problem, ENTITY_ID, LIMIT_NAME, NAMESPACE_REFERENCE, RESOURCE_NAME,
};

/// Why a name is not allowed, as a message and a fix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NameProblem {
    pub message: String,
    pub help: String,
}

pub use zae_limiter_engine::names::DEFAULT_RESOURCE;

/// A name the rule refuses, worded for a manifest author.
fn problem(e: NameError) -> NameProblem {
    let (rule, name) = (e.rule, &e.name);
    let kind = rule.what;
    let (message, help) = match e.problem {
        Problem::Empty => (
            format!("{kind} cannot be empty"),
            format!("give the {kind} a name"),
        ),
        Problem::Delimiter => (
            format!("{kind} `{name}` contains `#`, the key delimiter"),
            "remove the `#`: it separates the parts of every stored key, so a name containing it is written and then cannot be read back".to_string(),
        ),
        Problem::TooLong { len } => (
            format!(
                "{kind} is {len} characters long; at most {} are allowed",
                rule.max_len
            ),
            format!("shorten the {kind}"),
        ),
        Problem::Reserved => (
            format!("{kind} `{name}` is reserved"),
            "zae-limiter adds an internal `wcu` (write capacity) limit to every bucket; choose another name".into(),
        ),
        Problem::BadStart | Problem::BadChar(_) => {
            let noun = if rule.what == ENTITY_ID.what {
                "identifier"
            } else {
                "name"
            };
            let article = if kind.starts_with(['a', 'e', 'i', 'o', 'u']) {
                "an"
            } else {
                "a"
            };
            (
                format!("{kind} `{name}` is not a valid {noun}"),
                format!(
                    "{article} {kind} starts with {} and contains only {}",
                    rule.first_words(),
                    rule.rest_words('`', "and")
                ),
            )
        }
    };
    NameProblem { message, help }
}

fn check(rule: &'static NameRule, name: &str) -> Option<NameProblem> {
    rule.check(name).err().map(problem)
}

/// Entity ids ([`ENTITY_ID`]).
pub fn check_entity_id(name: &str) -> Option<NameProblem> {
    check(&ENTITY_ID, name)
}

/// Resource names ([`RESOURCE_NAME`]). `_default_` is handled by the caller
/// (allowed only under an entity).
pub fn check_resource_name(name: &str) -> Option<NameProblem> {
    check(&RESOURCE_NAME, name)
}

/// Limit names ([`LIMIT_NAME`]).
pub fn check_limit_name(name: &str) -> Option<NameProblem> {
    check(&LIMIT_NAME, name)
}

/// Namespace names: a manifest names a namespace to look up
/// ([`NAMESPACE_REFERENCE`]), so a non-empty string without `#`.
pub fn check_namespace(name: &str) -> Option<NameProblem> {
    if name.trim().is_empty() {
        return Some(NameProblem {
            message: "`namespace` must be a non-empty string".into(),
            help: "write the namespace name, e.g. `namespace: default`".into(),
        });
    }
    check(&NAMESPACE_REFERENCE, name)
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
