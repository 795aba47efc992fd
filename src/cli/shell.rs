//! Command lines the messages suggest: quoted so a copied line means what it
//! says in a POSIX shell (a path with a space stays one argument).

use std::borrow::Cow;

/// `s` as one shell word: unchanged when it holds only characters no shell
/// treats specially, else in single quotes (a `'` inside written `'\''`).
pub fn quote(s: &str) -> Cow<'_, str> {
    let plain = |c: char| c.is_ascii_alphanumeric() || "-_./:=@%+,".contains(c);
    if !s.is_empty() && s.chars().all(plain) {
        Cow::Borrowed(s)
    } else {
        Cow::Owned(format!("'{}'", s.replace('\'', r"'\''")))
    }
}

#[cfg(test)]
mod tests {
    use super::quote;

    #[test]
    fn only_what_a_shell_would_split_or_expand_is_quoted() {
        assert_eq!(quote("jobs.sqlite"), "jobs.sqlite");
        assert_eq!(quote("http://127.0.0.1:8000"), "http://127.0.0.1:8000");
        assert_eq!(quote("my dir/s.sqlite"), "'my dir/s.sqlite'");
        assert_eq!(quote("it's"), r"'it'\''s'");
        assert_eq!(quote("$HOME"), "'$HOME'");
        assert_eq!(quote(""), "''");
    }
}
