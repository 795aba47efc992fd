//! "Did you mean" for unknown keys: known confusions first (keys that are right
//! in another place), then the closest allowed key by edit distance.

/// Keys that belong elsewhere or are common synonyms, by where they were written.
/// (context, written, suggestion, why)
const KNOWN: &[(&str, &str, &str, &str)] = &[
    (
        "limit",
        "refill_period_seconds",
        "refill_period",
        "the limit-level key is `refill_period` (in seconds); `refill_period_seconds` is the schedule-entry key",
    ),
    ("limit", "period", "refill_period", "the period is `refill_period`, in seconds"),
    ("limit", "refill_rate", "refill_amount", "tokens added per period are `refill_amount`"),
    ("limit", "rate", "refill_amount", "tokens added per period are `refill_amount`"),
    ("limit", "reset_after", "reset_after_seconds", "the session window is `reset_after_seconds`, in seconds"),
    ("limit", "reset", "reset_schedule", "calendar resets are a `reset_schedule` list"),
    ("limit", "resets", "reset_schedule", "calendar resets are a `reset_schedule` list"),
    ("limit", "schedules", "schedule", ""),
    ("limit", "tz", "schedule", "a time zone belongs on each `schedule` or `reset_schedule` entry"),
    ("limit", "cron", "schedule", "a cron pattern belongs in a `schedule` or `reset_schedule` entry"),
    ("limit", "scale", "schedule", "`scale` belongs in a `schedule` entry"),
    (
        "schedule entry",
        "refill_period",
        "refill_period_seconds",
        "inside a schedule entry the key is `refill_period_seconds`",
    ),
    ("schedule entry", "timezone", "tz", "the time zone key is `tz`"),
    ("schedule entry", "time_zone", "tz", "the time zone key is `tz`"),
    ("schedule entry", "zone", "tz", "the time zone key is `tz`"),
    ("schedule entry", "burst", "capacity", "a schedule entry overrides `capacity`; `burst` exists only at the limit level"),
    ("reset entry", "timezone", "tz", "the time zone key is `tz`"),
    ("reset entry", "time_zone", "tz", "the time zone key is `tz`"),
    ("reset entry", "zone", "tz", "the time zone key is `tz`"),
    ("resource", "limit", "limits", ""),
    ("resource", "enabled", "disabled", "the flag is `disabled` (true, false or bypass)"),
    ("resource", "capacity", "limits", "limits go under `limits: {name: {capacity: ...}}`"),
    ("entity resource", "limit", "limits", ""),
    ("entity resource", "enabled", "disabled", "the flag is `disabled` (true, false or bypass)"),
    ("entity", "limits", "resources", "an entity's limits go under `resources: {<resource or _default_>: {limits: ...}}`"),
    ("entity", "resource", "resources", ""),
    ("system", "limit", "limits", ""),
    ("top level", "entity", "entities", ""),
    ("top level", "resource", "resources", ""),
    ("top level", "limits", "resources", "limits go under `system`, `resources.<name>` or `entities.<id>.resources.<name>`"),
    ("top level", "name", "namespace", ""),
];

/// A suggestion for `written` among `allowed`, with an optional explanation.
pub fn suggest(context: &str, written: &str, allowed: &[&str]) -> Option<(String, String)> {
    for (ctx, w, s, why) in KNOWN {
        if *ctx == context && *w == written && allowed.contains(s) {
            return Some((s.to_string(), why.to_string()));
        }
    }
    let lower = written.to_ascii_lowercase().replace('-', "_");
    if let Some(a) = allowed.iter().find(|a| **a == lower) {
        return Some((a.to_string(), "keys are lower case with `_`".into()));
    }
    let mut best: Option<(usize, &str)> = None;
    for a in allowed {
        let d = strsim::damerau_levenshtein(&lower, a);
        let limit = (a.len().max(written.len()) / 3).max(1);
        if d <= limit && best.is_none_or(|(bd, _)| d < bd) {
            best = Some((d, a));
        }
    }
    if let Some((_, a)) = best {
        return Some((a.to_string(), String::new()));
    }
    // A prefix such as `reset_after` for `reset_after_seconds`.
    allowed
        .iter()
        .find(|a| lower.len() >= 4 && (a.starts_with(&lower) || lower.starts_with(**a)))
        .map(|a| (a.to_string(), String::new()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The keys a limit allows, as the converter lists them.
    const LIMIT: &[&str] = crate::manifest::convert::LIMIT_KEYS;

    #[test]
    fn classic_typo_at_limit_level() {
        let (s, why) = suggest("limit", "refill_period_seconds", LIMIT).unwrap();
        assert_eq!(s, "refill_period");
        assert!(why.contains("schedule-entry"));
    }

    #[test]
    fn edit_distance() {
        assert_eq!(suggest("limit", "capcity", LIMIT).unwrap().0, "capacity");
        assert_eq!(suggest("limit", "Capacity", LIMIT).unwrap().0, "capacity");
        assert_eq!(
            suggest("limit", "refill-amount", LIMIT).unwrap().0,
            "refill_amount"
        );
        assert!(suggest("limit", "zzzzzz", LIMIT).is_none());
    }
}
