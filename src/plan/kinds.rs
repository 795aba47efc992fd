//! A limit keeps its kind (issue #7): a concurrency limit counts open holds,
//! every other limit counts use, and the two states have nothing in common.
//! `plan` and `apply` compare each declared level's item with the live one and
//! refuse, before anything is written, a limit that would change from one to
//! the other (the engine's [`check_kind_change`]). Bucket ↔ rolling is allowed:
//! both count use, and a rolling window starts from an empty state.

use zae_limiter_engine::concurrency::{check_kind_change, KindChangeError};

use crate::items::config::{counted_kinds, rolling_windows};
use crate::plan::level::Level;
use crate::store::Item;

/// One limit that would change kind, on one level.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{level}: {refusal}")]
pub struct KindChange {
    /// e.g. `resource 'gpt-4'`, `entity 'user-1' on resource 'gpt-4'`, `system`.
    pub level: String,
    pub refusal: KindChangeError,
}

/// Every change of kind a plan contains; nothing is written when there is one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KindChanges(pub Vec<KindChange>);

impl std::fmt::Display for KindChanges {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for (i, c) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str("\n")?;
            }
            write!(f, "{c}")?;
        }
        Ok(())
    }
}

impl std::error::Error for KindChanges {}

/// How a level reads in a refusal.
pub fn describe(level: &Level) -> String {
    match level {
        Level::System => "system".to_string(),
        Level::Resource(r) => format!("resource '{r}'"),
        Level::Entity(e, r) => format!("entity '{e}' on resource '{r}'"),
    }
}

/// The limits of `desired` that `live` holds as the other kind, by name.
pub fn check(level: &Level, live: Option<&Item>, desired: Option<&Item>) -> Vec<KindChange> {
    let (Some(live), Some(desired)) = (live, desired) else {
        return Vec::new();
    };
    let before = counted_kinds(live);
    let mut out = Vec::new();
    for (name, to) in counted_kinds(desired) {
        let Some(from) = before.get(&name) else {
            continue;
        };
        if let Err(refusal) = check_kind_change(&name, *from, to) {
            out.push(KindChange {
                level: describe(level),
                refusal,
            });
        }
    }
    out
}

/// The rolling limits of `desired` whose window length differs from the
/// same limit's in `live`: the runtime keeps a window's use under its length,
/// so what it counted is forgotten and the new window starts empty. Allowed,
/// but said (a warning of plan and apply).
pub fn restarts(level: &Level, live: Option<&Item>, desired: Option<&Item>) -> Vec<String> {
    let (Some(live), Some(desired)) = (live, desired) else {
        return Vec::new();
    };
    let before = rolling_windows(live);
    rolling_windows(desired)
        .into_iter()
        .filter_map(|(name, to)| {
            let from = before.get(&name).filter(|from| **from != to)?;
            Some(format!(
                "{}: rolling limit '{name}' changes its window ({from} → {to}): the use it counted is forgotten, and the new window starts empty",
                describe(level)
            ))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::AttrValue;

    fn item(attrs: &[(&str, u64)]) -> Item {
        attrs
            .iter()
            .map(|(k, v)| (k.to_string(), AttrValue::n(*v)))
            .collect()
    }

    #[test]
    fn counting_use_and_counting_holds_do_not_mix() {
        let bucket = item(&[("l_x_cp", 5), ("l_x_ra", 5), ("l_x_rp", 60)]);
        let session = item(&[("w_x_cp", 5), ("w_x_ra", 0), ("w_x_rsa", 60)]);
        let rolling = item(&[("r_x_amt", 5)]);
        let slots = item(&[("c_x_slots", 3), ("c_x_ttl", 300)]);
        let level = Level::Entity("u".into(), "gpt-4".into());
        for (from, to, refused) in [
            (&bucket, &rolling, false),
            (&rolling, &bucket, false),
            (&session, &rolling, false),
            (&slots, &slots, false),
            (&bucket, &slots, true),
            (&session, &slots, true),
            (&slots, &rolling, true),
            (&rolling, &slots, true),
        ] {
            let got = check(&level, Some(from), Some(to));
            assert_eq!(got.len(), usize::from(refused), "{from:?} -> {to:?}");
        }
        let got = check(&level, Some(&bucket), Some(&slots));
        assert_eq!(
            got[0].to_string(),
            "entity 'u' on resource 'gpt-4': limit 'x' cannot change from a limit that counts use to a concurrent limit (one counts use, the other open holds): create a new limit instead"
        );
    }

    #[test]
    fn new_removed_and_absent_levels_are_not_changes_of_kind() {
        let bucket = item(&[("l_x_cp", 5)]);
        let other = item(&[("c_y_slots", 3)]);
        let level = Level::System;
        assert!(check(&level, Some(&bucket), Some(&other)).is_empty());
        assert!(check(&level, None, Some(&other)).is_empty());
        assert!(check(&level, Some(&other), None).is_empty());
    }

    #[test]
    fn every_refusal_is_listed() {
        let live = item(&[("l_a_cp", 5), ("c_b_slots", 2), ("l_c_cp", 1)]);
        let desired = item(&[("c_a_slots", 5), ("r_b_amt", 2), ("l_c_cp", 2)]);
        let got = KindChanges(check(
            &Level::Resource("gpt-4".into()),
            Some(&live),
            Some(&desired),
        ));
        assert_eq!(got.0.len(), 2);
        let text = got.to_string();
        assert!(text.starts_with("resource 'gpt-4': limit 'a' cannot change from a limit that counts use to a concurrent limit"), "{text}");
        assert!(text.contains("\nresource 'gpt-4': limit 'b' cannot change from a concurrent limit to a limit that counts use"), "{text}");
    }
}
