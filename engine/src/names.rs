//! The name rules: entity ids, resource names, limit names and namespace names
//! become parts of stored keys and attribute names (`{ns}/ENTITY#{id}`,
//! `l_{name}_cp`; docs/storage.md, "Keys"), so a bad one would be written and
//! then break every later read. Each rule is data ([`NameRule`]): the manifest
//! reports its problems as located diagnostics, the item codec as its own
//! error, the engine refuses a [`crate::limit::Limit`] with it, and the JSON
//! Schema's patterns are generated from it.

/// Which characters a name may start with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum First {
    Letter,
    LetterOrDigit,
    /// Anything but the key delimiter `#`.
    Any,
}

/// Which characters may follow the first: letters, digits and `extra`, or anything but `#`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rest {
    LettersDigitsAnd(&'static str),
    Any,
}

/// One identifier rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NameRule {
    /// `entity id`, `resource name`, …
    pub what: &'static str,
    pub first: First,
    pub rest: Rest,
    /// In characters.
    pub max_len: usize,
    /// A name the rule refuses although it is well formed, and why.
    pub reserved: Option<(&'static str, &'static str)>,
}

/// The pseudo-resource of an entity's limits on every resource: allowed where
/// an entity names a resource, never as a resource of its own.
pub const DEFAULT_RESOURCE: &str = "_default_";

/// The reserved internal limit (write capacity) every bucket carries.
pub const RESERVED_LIMIT: &str = "wcu";

/// `^[A-Za-z0-9][A-Za-z0-9_.\-:@]*$`, at most 256 characters.
pub static ENTITY_ID: NameRule = NameRule {
    what: "entity id",
    first: First::LetterOrDigit,
    rest: Rest::LettersDigitsAnd("_.-:@"),
    max_len: 256,
    reserved: None,
};

/// `^[A-Za-z][A-Za-z0-9_.\-/:]*$`, at most 64 characters. `_default_` fails it
/// on purpose: it is only an entity's pseudo-resource.
pub static RESOURCE_NAME: NameRule = NameRule {
    what: "resource name",
    first: First::Letter,
    rest: Rest::LettersDigitsAnd("_.-/:"),
    max_len: 64,
    reserved: None,
};

/// `^[A-Za-z][A-Za-z0-9_.\-]*$`, at most 64 characters, not `wcu`.
pub static LIMIT_NAME: NameRule = NameRule {
    what: "limit name",
    first: First::Letter,
    rest: Rest::LettersDigitsAnd("_.-"),
    max_len: 64,
    reserved: Some((
        RESERVED_LIMIT,
        "reserved for the internal write-capacity limit",
    )),
};

/// A namespace this tool registers: a letter or digit, then letters, digits,
/// `_`, `.` or `-`, at most 64 characters (no `/` or `#`, which would break
/// the key grammar).
pub static NAMESPACE_NAME: NameRule = NameRule {
    what: "namespace name",
    first: First::LetterOrDigit,
    rest: Rest::LettersDigitsAnd("_.-"),
    max_len: 64,
    reserved: None,
};

/// A namespace a manifest names: it is only looked up (never registered from
/// a manifest), so any name without the key delimiter, at most 256 characters.
pub static NAMESPACE_REFERENCE: NameRule = NameRule {
    what: "namespace",
    first: First::Any,
    rest: Rest::Any,
    max_len: 256,
    reserved: None,
};

/// What is wrong with a name, most basic problem first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Problem {
    Empty,
    /// Contains `#`, the key delimiter.
    Delimiter,
    TooLong {
        len: usize,
    },
    Reserved,
    /// The first character is not allowed.
    BadStart,
    /// A later character is not allowed.
    BadChar(char),
}

/// A name a rule refuses.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid {} '{}': {}", rule.what, self.shown(), self.reason())]
pub struct NameError {
    pub rule: &'static NameRule,
    pub name: String,
    pub problem: Problem,
}

impl NameError {
    /// The name as a message quotes it: a long one is cut (an error is
    /// read by people and logged per request; the length is what matters).
    pub fn shown(&self) -> String {
        const SHOWN: usize = 64;
        let len = self.name.chars().count();
        if len <= SHOWN {
            return self.name.clone();
        }
        let head: String = self.name.chars().take(SHOWN).collect();
        format!("{head}… ({len} characters)")
    }

    /// The problem in a few words (`cannot contain '#' (the key delimiter)`).
    pub fn reason(&self) -> String {
        let rule = self.rule;
        match &self.problem {
            Problem::Empty => "cannot be empty".into(),
            Problem::Delimiter => "cannot contain '#' (the key delimiter)".into(),
            Problem::TooLong { .. } => format!("at most {} characters", rule.max_len),
            Problem::Reserved => {
                let (name, why) = rule.reserved.unwrap_or_default();
                format!("'{name}' is {why}")
            }
            Problem::BadStart => {
                // `ü` is a letter, but not one a name may hold: say so.
                let not_ascii = match self.name.chars().next() {
                    Some(c) if !c.is_ascii() => format!(" ('{c}' is not: names are ASCII)"),
                    _ => String::new(),
                };
                format!("must start with {}{not_ascii}", rule.first_words())
            }
            Problem::BadChar(c) => {
                let not_ascii = if c.is_ascii() {
                    ""
                } else {
                    " (names are ASCII)"
                };
                format!(
                    "'{c}' is not allowed{not_ascii}; use {}",
                    rule.rest_words('\'', "or")
                )
            }
        }
    }
}

fn first_ok(first: First, c: char) -> bool {
    match first {
        First::Letter => c.is_ascii_alphabetic(),
        First::LetterOrDigit => c.is_ascii_alphanumeric(),
        First::Any => c != '#',
    }
}

fn rest_ok(rest: Rest, c: char) -> bool {
    match rest {
        Rest::LettersDigitsAnd(extra) => c.is_ascii_alphanumeric() || extra.contains(c),
        Rest::Any => c != '#',
    }
}

impl NameRule {
    /// Checks `name`; the first problem found, in [`Problem`]'s order.
    pub fn check(&'static self, name: &str) -> Result<(), NameError> {
        let refuse = |problem| {
            Err(NameError {
                rule: self,
                name: name.to_string(),
                problem,
            })
        };
        let len = name.chars().count();
        let mut chars = name.chars();
        let Some(first) = chars.next() else {
            return refuse(Problem::Empty);
        };
        if name.contains('#') {
            return refuse(Problem::Delimiter);
        }
        if len > self.max_len {
            return refuse(Problem::TooLong { len });
        }
        if self.reserved.is_some_and(|(r, _)| r == name) {
            return refuse(Problem::Reserved);
        }
        if !first_ok(self.first, first) {
            return refuse(Problem::BadStart);
        }
        if let Some(c) = chars.find(|c| !rest_ok(self.rest, *c)) {
            return refuse(Problem::BadChar(c));
        }
        Ok(())
    }

    /// `a letter`, `a letter or digit`.
    pub fn first_words(&self) -> &'static str {
        match self.first {
            First::Letter => "a letter",
            First::LetterOrDigit => "a letter or digit",
            First::Any => "any character but '#'",
        }
    }

    /// The characters allowed after the first, in words: `letters, digits,
    /// '_', '.' or '-'` (each extra character in `quote`s, the last joined by `last`).
    pub fn rest_words(&self, quote: char, last: &str) -> String {
        let Rest::LettersDigitsAnd(extra) = self.rest else {
            return "any character but '#'".into();
        };
        let mut parts: Vec<String> = vec!["letters".into(), "digits".into()];
        parts.extend(extra.chars().map(|c| format!("{quote}{c}{quote}")));
        let tail = parts.pop().unwrap_or_default();
        format!("{} {last} {tail}", parts.join(", "))
    }

    /// The rule as an ECMA-262 regular expression (length excluded; see
    /// [`NameRule::max_len`]), for the JSON Schema.
    pub fn pattern(&self) -> String {
        let class = |first: bool| match (first, self.first, self.rest) {
            (true, First::Letter, _) => "[A-Za-z]".to_string(),
            (true, First::LetterOrDigit, _) => "[A-Za-z0-9]".to_string(),
            (true, First::Any, _) | (false, _, Rest::Any) => "[^#]".to_string(),
            (false, _, Rest::LettersDigitsAnd(extra)) => {
                let escaped: String = extra
                    .chars()
                    .map(|c| match c {
                        '-' | '\\' | ']' | '^' => format!("\\{c}"),
                        c => c.to_string(),
                    })
                    .collect();
                format!("[A-Za-z0-9{escaped}]")
            }
        };
        let reserved = self
            .reserved
            .map(|(r, _)| format!("(?!{r}$)"))
            .unwrap_or_default();
        let (first, rest) = (class(true), class(false));
        if first == rest {
            format!("^{reserved}{first}+$")
        } else {
            format!("^{reserved}{first}{rest}*$")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn problem(rule: &'static NameRule, name: &str) -> Option<Problem> {
        rule.check(name).err().map(|e| e.problem)
    }

    #[test]
    fn the_rules() {
        for ok in ["user-1", "1abc", "9abc:x@y.z_w", &"x".repeat(256)] {
            assert_eq!(problem(&ENTITY_ID, ok), None, "{ok}");
        }
        assert_eq!(problem(&ENTITY_ID, ""), Some(Problem::Empty));
        assert_eq!(problem(&ENTITY_ID, "a#b"), Some(Problem::Delimiter));
        assert_eq!(problem(&ENTITY_ID, "-x"), Some(Problem::BadStart));
        assert_eq!(problem(&ENTITY_ID, "a b"), Some(Problem::BadChar(' ')));
        assert_eq!(
            problem(&ENTITY_ID, &"x".repeat(257)),
            Some(Problem::TooLong { len: 257 })
        );
        for ok in ["gpt-4", "openai/gpt-4:turbo", "a_b.c"] {
            assert_eq!(problem(&RESOURCE_NAME, ok), None, "{ok}");
        }
        for bad in ["4o", "_default_", "a@b", &"r".repeat(65)] {
            assert!(problem(&RESOURCE_NAME, bad).is_some(), "{bad}");
        }
        for ok in ["rpm", "tokens_per.day-1", "a.b-c"] {
            assert_eq!(problem(&LIMIT_NAME, ok), None, "{ok}");
        }
        assert_eq!(problem(&LIMIT_NAME, "wcu"), Some(Problem::Reserved));
        assert_eq!(problem(&LIMIT_NAME, "1rpm"), Some(Problem::BadStart));
        assert_eq!(problem(&LIMIT_NAME, "a/b"), Some(Problem::BadChar('/')));
        assert_eq!(problem(&NAMESPACE_NAME, "a/b"), Some(Problem::BadChar('/')));
        assert_eq!(problem(&NAMESPACE_REFERENCE, "a/b c"), None);
        assert_eq!(
            problem(&NAMESPACE_REFERENCE, "a#b"),
            Some(Problem::Delimiter)
        );
    }

    #[test]
    fn errors_say_what_and_how() {
        // A letter outside ASCII is named as such, not as "not a letter";
        // a long name is cut.
        for (name, says) in [
            ("über", "must start with a letter or digit ('ü' is not: names are ASCII)"),
            ("jürgen", "'ü' is not allowed (names are ASCII); use letters, digits, '_', '.', '-', ':' or '@'"),
            (&"x".repeat(5000), "at most 256 characters"),
        ] {
            let e = ENTITY_ID.check(name).unwrap_err();
            assert_eq!(e.reason(), says, "{name}");
        }
        let long = ENTITY_ID.check(&"x".repeat(5000)).unwrap_err().to_string();
        let head = "x".repeat(64);
        assert_eq!(
            long,
            format!("invalid entity id '{head}… (5000 characters)': at most 256 characters")
        );
        let e = LIMIT_NAME.check("bad#name").unwrap_err();
        assert_eq!(
            e.to_string(),
            "invalid limit name 'bad#name': cannot contain '#' (the key delimiter)"
        );
        let e = ENTITY_ID.check("a b").unwrap_err();
        assert_eq!(
            e.to_string(),
            "invalid entity id 'a b': ' ' is not allowed; use letters, digits, '_', '.', '-', ':' or '@'"
        );
        assert_eq!(
            LIMIT_NAME.check("wcu").unwrap_err().reason(),
            "'wcu' is reserved for the internal write-capacity limit"
        );
    }

    #[test]
    fn patterns_match_the_rules() {
        assert_eq!(ENTITY_ID.pattern(), r"^[A-Za-z0-9][A-Za-z0-9_.\-:@]*$");
        assert_eq!(RESOURCE_NAME.pattern(), r"^[A-Za-z][A-Za-z0-9_.\-/:]*$");
        assert_eq!(LIMIT_NAME.pattern(), r"^(?!wcu$)[A-Za-z][A-Za-z0-9_.\-]*$");
        assert_eq!(NAMESPACE_REFERENCE.pattern(), r"^[^#]+$");
    }
}
