//! The keys of one YAML mapping, checked against the keys allowed in that place:
//! unknown keys are errors with a "did you mean", non-string keys are refused.

use super::report::Reporter;
use super::suggest::suggest;
use super::values::describe;
use super::yaml::{Kind, Node, Scalar, Value};

/// The allowed keys found in a mapping, in document order, with their key nodes.
pub struct Fields<'n> {
    entries: Vec<(&'static str, &'n Node, &'n Node)>,
}

impl<'n> Fields<'n> {
    /// The (key node, value) of `key`, if written; the last one when repeated.
    fn entry(&self, key: &str) -> Option<(&'n Node, &'n Node)> {
        self.entries
            .iter()
            .rev()
            .find(|(k, _, _)| *k == key)
            .map(|(_, k, v)| (*k, *v))
    }

    /// The value of `key`, if written.
    pub fn get(&self, key: &str) -> Option<&'n Node> {
        self.entry(key).map(|(_, v)| v)
    }

    /// The key node of `key`, if written (to point at a key whose value is wrong).
    pub fn key(&self, key: &str) -> Option<&'n Node> {
        self.entry(key).map(|(k, _)| k)
    }

    pub fn has(&self, key: &str) -> bool {
        self.get(key).is_some()
    }
}

/// Where the mapping is, for messages and suggestions.
pub struct Place<'a> {
    /// e.g. "limit", "schedule entry" (used to pick suggestions).
    pub context: &'static str,
    /// e.g. "limit `rpm`", "schedule[0]" (used in messages).
    pub label: &'a str,
    pub path: &'a str,
    /// Extra help for unknown keys in this place.
    pub unknown_help: Option<&'a str>,
}

/// [`fields`] for a place without extension keys or extra help: every key
/// not in `allowed` is reported.
pub fn known_fields<'n>(
    r: &mut Reporter,
    entries: &'n [(Node, Node)],
    allowed: &'static [&'static str],
    context: &'static str,
    label: &str,
    path: &str,
) -> Fields<'n> {
    let place = Place {
        context,
        label,
        path,
        unknown_help: None,
    };
    fields(r, entries, allowed, &place, |_| false)
}

/// Split a mapping's entries into allowed keys and report the others.
/// `ignore` lets a place accept extension keys (e.g. top-level `x-…`).
pub fn fields<'n>(
    r: &mut Reporter,
    entries: &'n [(Node, Node)],
    allowed: &'static [&'static str],
    place: &Place,
    ignore: impl Fn(&str) -> bool,
) -> Fields<'n> {
    let mut out = Vec::with_capacity(entries.len());
    for (k, v) in entries {
        let Some(name) = key_name(r, k, place.path) else {
            continue;
        };
        if let Some(a) = allowed.iter().find(|a| **a == name) {
            out.push((*a, k, v));
            continue;
        }
        if ignore(name) {
            continue;
        }
        let path = join(place.path, name);
        let mut help = String::new();
        if let Some((s, why)) = suggest(place.context, name, allowed) {
            help.push_str(&format!("did you mean `{s}`?"));
            if !why.is_empty() {
                help.push_str(&format!(" ({why})"));
            }
            help.push(' ');
        }
        // Keys accepted only to give a better error are not advertised.
        let shown: Vec<&str> = allowed
            .iter()
            .copied()
            .filter(|k| !(place.context == "system" && (*k == "cascade" || *k == "disabled")))
            .collect();
        help.push_str(&format!("Allowed here: {}.", shown.join(", ")));
        if let Some(extra) = place.unknown_help {
            help.push(' ');
            help.push_str(extra);
        }
        r.error(
            k,
            &path,
            format!("unknown key `{name}` in {}", place.label),
            Some(help),
        );
    }
    Fields { entries: out }
}

/// A mapping key as a name. Keys are names, so any scalar's text is taken as
/// written (`123` is the name "123"); null and collection keys are refused.
pub fn key_name<'n>(r: &mut Reporter, key: &'n Node, path: &str) -> Option<&'n str> {
    match &key.kind {
        Kind::Scalar(Scalar {
            value: Value::Null, ..
        }) => {
            r.error(
                key,
                path,
                "a key is empty (null)",
                Some("give the key a name".to_string()),
            );
            None
        }
        Kind::Scalar(s) => Some(&s.text),
        _ => {
            r.error(
                key,
                path,
                format!("a key must be a plain name, got {}", describe(key)),
                None,
            );
            None
        }
    }
}

/// `a.b` path join; the top level has an empty path.
pub fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}
