//! An [`Explanation`] for people (text) and for scripts (one JSON document,
//! `"version": 1`; fields are only ever added within a version). The field
//! list is in docs/explain.md.

use chrono::{DateTime, Utc};
use chrono_tz::Tz;
use serde_json::{json, Value};

use super::{Active, Change, Explanation, Kind, LevelView, LimitView, Numbers};
use crate::clock::rfc3339;
use crate::display::limits::{effect, entry_text, limit_lines, period_suffix};
use crate::display::numbers::thousands;
use crate::items::config::StoredLimit;
use crate::items::source::Source;
use crate::manifest::model::{Disabled, LimitKind};

/// Millitokens as tokens: `1,000`, `166.5`, `0.001`.
pub fn tokens(milli: i128) -> String {
    let neg = if milli < 0 { "-" } else { "" };
    let m = milli.unsigned_abs();
    let whole = thousands(m / 1000);
    match m % 1000 {
        0 => format!("{neg}{whole}"),
        frac => {
            let digits = format!("{frac:03}");
            format!("{neg}{whole}.{}", digits.trim_end_matches('0'))
        }
    }
}

/// Millitokens as a JSON number: an integer when whole.
fn tokens_json(milli: i128) -> Value {
    if milli % 1000 == 0 {
        json!(milli / 1000)
    } else {
        json!(milli as f64 / 1000.0)
    }
}

fn numbers_text(n: &Numbers, quota: bool) -> String {
    let cap = format!("capacity {}", tokens(n.capacity_milli));
    if quota && n.refill_amount_milli == 0 {
        return format!("{cap}, no refill (a quota)");
    }
    let secs = u64::try_from(n.refill_period_ms / 1000).unwrap_or(u64::MAX);
    format!(
        "{cap}, refill {}{}",
        tokens(n.refill_amount_milli),
        period_suffix(secs)
    )
}

fn numbers_json(n: &Numbers) -> Value {
    json!({
        "capacity": tokens_json(n.capacity_milli),
        "refill_amount": tokens_json(n.refill_amount_milli),
        "refill_period_seconds": n.refill_period_ms / 1000,
        "capacity_milli": n.capacity_milli.to_string(),
        "refill_amount_milli": n.refill_amount_milli.to_string(),
    })
}

/// `Mon 18:00 EST` in `tz`.
fn local(ms: i64, tz: Tz) -> String {
    DateTime::<Utc>::from_timestamp_millis(ms)
        .map(|t| t.with_timezone(&tz).format("%a %H:%M %Z").to_string())
        .unwrap_or_default()
}

fn when(ms: i64, tz: Option<Tz>) -> String {
    match tz {
        Some(tz) => format!("{} ({})", rfc3339(ms), local(ms, tz)),
        None => rfc3339(ms),
    }
}

/// `90.001 s (1m 30s)`: the limiter's seconds, and the span for people in
/// whole seconds (the limiter's extra millisecond left out).
fn wait_text(seconds: f64) -> String {
    let ms = (seconds * 1000.0) as i64;
    if ms >= 60_000 {
        format!(
            "{seconds} s ({})",
            zae_limiter_engine::duration::human_duration(ms - ms % 1000)
        )
    } else {
        format!("{seconds} s")
    }
}

fn disabled_word(d: Disabled) -> &'static str {
    match d {
        Disabled::Disabled => "disabled",
        Disabled::Enforced => "enforced",
        Disabled::Bypass => "bypass",
    }
}

/// What the level's `disabled` means for requests.
fn disabled_meaning(d: Disabled) -> &'static str {
    match d {
        Disabled::Disabled => {
            "every request is refused, whatever the limits below say (the Python client raises ResourceDisabled; `acquire` exits 75)"
        }
        Disabled::Bypass => "every request is admitted but counted",
        Disabled::Enforced => "limits are enforced (an explicit carve-out)",
    }
}

/// The kind as a word, for JSON.
pub fn kind_name(l: &StoredLimit) -> &'static str {
    match l.kind {
        LimitKind::Rolling { .. } => "rolling",
        LimitKind::Concurrency { .. } => "concurrency",
        LimitKind::Bucket if l.reset_after_seconds.is_some() => "session_quota",
        LimitKind::Bucket if !l.reset_schedule.is_empty() => "calendar_quota",
        LimitKind::Bucket => "bucket",
    }
}

impl Explanation {
    fn path(&self, s: Source) -> String {
        s.manifest_path(&self.entity, &self.resource)
    }
}

/// The text report; local times in `tz` (the level's zone when `None` and it has one).
pub fn render_text(x: &Explanation, tz: Option<Tz>) -> String {
    let tz = tz.or_else(|| x.zone.as_deref().and_then(|z| z.parse().ok()));
    let mut out = String::new();
    let mut line = |s: String| {
        out.push_str(&s);
        out.push('\n');
    };
    line(format!(
        "{} on {} at {}; changes until {}",
        x.entity,
        x.resource,
        when(x.at_ms, tz),
        rfc3339(x.until_ms)
    ));
    line(String::new());
    line(
        "levels, in the order a limiter reads them (the first with a limit applies, as a whole):"
            .into(),
    );
    let width = x
        .levels
        .iter()
        .map(|l| x.path(l.source).len())
        .max()
        .unwrap_or(0);
    for l in &x.levels {
        line(level_line(x, l, width));
    }
    line(python_line(x));
    if let Some((s, d)) = x.disabled {
        line(format!(
            "disabled: {} at {}: {}",
            disabled_word(d),
            x.path(s),
            disabled_meaning(d)
        ));
    }
    for l in &x.limits {
        line(String::new());
        for head in limit_lines(&l.stored, 0) {
            line(head);
        }
        for s in limit_body(x, l, tz) {
            line(format!("  {s}"));
        }
    }
    out
}

fn level_line(x: &Explanation, l: &LevelView, width: usize) -> String {
    let role = l.role.as_str().replace('_', " ");
    let mut s = format!("  {:width$}  {role:<9}", x.path(l.source));
    if !l.limits.is_empty() {
        s.push_str("  ");
        s.push_str(&l.limits.join(", "));
    }
    if let Some(d) = l.disabled {
        s.push_str(&format!("  (disabled: {})", disabled_word(d)));
    }
    s.trim_end().to_string()
}

fn python_line(x: &Explanation) -> String {
    match x.python_source {
        Some(p) if p == x.source => {
            "Python 0.17 clients resolve the same level for their token buckets and quotas.".into()
        }
        Some(p) => format!(
            "Python 0.17 clients read no token bucket or quota at {}, so they resolve {} for theirs, while this tool's runtime (acquire) resolves {} (lint ZL104).",
            x.path(x.source),
            x.path(p),
            x.path(x.source)
        ),
        None => "Python 0.17 clients find no token bucket or quota on these levels: their acquire fails for this pair.".into(),
    }
}

fn entry_label(l: &StoredLimit, index: Option<usize>) -> String {
    match index.and_then(|i| l.schedule.get(i).map(|e| (i, e))) {
        Some((i, e)) => format!(
            "schedule[{i}] {} → {}",
            entry_text(e),
            effect(e.modifier.as_ref())
        ),
        None if l.schedule.is_empty() => "the base".into(),
        None => "the base (no schedule entry matches)".into(),
    }
}

fn change_text(c: &Change, quota: bool) -> String {
    let reset = format!(
        "reset: the balance goes back to {}",
        tokens(c.numbers.capacity_milli)
    );
    let Some((before, after)) = c.window else {
        return reset;
    };
    let window = match (before, after) {
        (Some(b), Some(a)) => format!("schedule[{a}] takes over from schedule[{b}]"),
        (Some(b), None) => format!("schedule[{b}] ends, the base applies"),
        (None, Some(a)) => format!("schedule[{a}] starts"),
        (None, None) => "the schedule changes".into(),
    };
    let mut s = format!("{window}: {}", numbers_text(&c.numbers, quota));
    if c.reset {
        s.push_str(&format!("; {reset}"));
    }
    s
}

fn limit_body(x: &Explanation, l: &LimitView, tz: Option<Tz>) -> Vec<String> {
    let s = &l.stored;
    let mut out = Vec::new();
    // A disabled level refuses everything: no wait helps, and soft admits nothing.
    let refused = matches!(x.disabled, Some((_, Disabled::Disabled)));
    let wait = |text: String| {
        if refused {
            "while the level is disabled, every request is refused: no wait helps".to_string()
        } else {
            text
        }
    };
    match (&l.kind, &l.now) {
        (Kind::Bucket { .. }, Some(Active { entry, numbers })) => {
            let quota = s.resets();
            out.push(format!(
                "at {}: {}, from {}",
                rfc3339(x.at_ms),
                numbers_text(numbers, quota),
                entry_label(s, *entry)
            ));
            if s.schedule.is_empty() && s.reset_schedule.is_empty() {
                out.push("no schedule: the same numbers at every instant".into());
            } else if l.changes.is_empty() {
                out.push(format!("no change until {}", rfc3339(x.until_ms)));
            } else {
                out.push(format!("changes until {}:", rfc3339(x.until_ms)));
                for c in &l.changes {
                    out.push(format!(
                        "  {}  {}",
                        when(c.at_ms, tz),
                        change_text(c, quota)
                    ));
                }
                if l.truncated {
                    out.push(format!(
                        "  … more than {} changes: shorten --until to see the rest",
                        super::MAX_CHANGES
                    ));
                }
            }
            if let Some(rsa) = s.reset_after_seconds {
                out.push(format!(
                    "a session window opens at the first use after the last one ended and lasts {}",
                    crate::display::limits::duration(rsa)
                ));
            }
            let why = if s.reset_after_seconds.is_some() {
                ", when the session window that opened at --at ends"
            } else if !s.reset_schedule.is_empty() {
                ", at the next reset"
            } else {
                ""
            };
            out.push(wait(format!("{}{why}", wait_line(l, "at an empty bucket"))));
        }
        (Kind::Rolling, _) => {
            out.push("no schedule: the amount is the same at every instant".into());
            out.push(wait(wait_line(l, "right after the whole amount was used")));
        }
        (Kind::Concurrency, _) => {
            out.push("no schedule: the slots are the same at every instant".into());
            out.push(wait(match l.wait_seconds {
                Some(w) => format!(
                    "a reservation when every slot was taken at {} waits {}: the first hold's TTL, less when a holder releases",
                    rfc3339(x.at_ms),
                    wait_text(w)
                ),
                None => "a reservation when every slot is taken waits for a release".into(),
            }));
        }
        _ => {}
    }
    if s.soft && !refused {
        out.push(
            "soft: counted and reported, never refused (the wait is what a hard limit would give)"
                .into(),
        );
    }
    out
}

fn wait_line(l: &LimitView, from: &str) -> String {
    match l.wait_seconds {
        Some(w) => format!(
            "a request of {} {from} waits {}",
            thousands(l.cost),
            wait_text(w)
        ),
        None => format!(
            "a request of {} {from} never fits: it is more than the limit's capacity",
            thousands(l.cost)
        ),
    }
}

fn active_json(l: &StoredLimit, a: &Active) -> Value {
    let mut v = numbers_json(&a.numbers);
    v["entry"] = entry_json(l, a.entry);
    v
}

fn entry_json(l: &StoredLimit, index: Option<usize>) -> Value {
    match index.and_then(|i| l.schedule.get(i).map(|e| (i, e))) {
        Some((i, e)) => json!({
            "index": i,
            "cron": crate::display::limits::cron_text(e),
            "tz": e.tz,
            "effect": effect(e.modifier.as_ref()),
        }),
        None => Value::Null,
    }
}

fn change_json(c: &Change) -> Value {
    let mut v = numbers_json(&c.numbers);
    v["at"] = json!(rfc3339(c.at_ms));
    v["window"] = match c.window {
        Some((from, to)) => json!({"from": from, "to": to}),
        None => Value::Null,
    };
    v["reset"] = json!(c.reset);
    v
}

/// The JSON document.
pub fn render_json(x: &Explanation) -> Value {
    let levels: Vec<Value> = x
        .levels
        .iter()
        .map(|l| {
            json!({
                "source": l.source.as_str(),
                "path": x.path(l.source),
                "role": l.role.as_str(),
                "limits": l.limits,
                "disabled": l.disabled.map(disabled_word),
            })
        })
        .collect();
    let limits: Vec<Value> = x
        .limits
        .iter()
        .map(|l| {
            let s = &l.stored;
            let mut v = json!({
                "name": s.name,
                "kind": kind_name(s),
                "soft": s.soft,
                "cost": l.cost,
                "retry_after_seconds": l.wait_seconds,
            });
            match s.kind {
                LimitKind::Rolling { window } => {
                    v["capacity"] = json!(s.capacity);
                    v["window"] = json!(window.to_string());
                }
                LimitKind::Concurrency { hold_ttl_seconds } => {
                    v["concurrency"] = json!(s.capacity);
                    v["hold_ttl_seconds"] = json!(hold_ttl_seconds);
                }
                LimitKind::Bucket => {
                    if let Some(a) = &l.now {
                        v["at"] = active_json(s, a);
                    }
                    v["reset_after_seconds"] = json!(s.reset_after_seconds);
                    v["changes"] = Value::Array(l.changes.iter().map(change_json).collect());
                    v["changes_truncated"] = json!(l.truncated);
                }
            }
            v
        })
        .collect();
    json!({
        "version": 1,
        "command": "limits explain",
        "entity": x.entity,
        "resource": x.resource,
        "at": rfc3339(x.at_ms),
        "until": rfc3339(x.until_ms),
        "source": x.source.as_str(),
        "level": x.path(x.source),
        "python_source": x.python_source.map(Source::as_str),
        "disabled": x.disabled.map(|(s, d)| json!({"source": s.as_str(), "value": disabled_word(d)})),
        "zone": x.zone,
        "levels": levels,
        "limits": limits,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn millitokens_read_as_tokens() {
        assert_eq!(tokens(1_000_000), "1,000");
        assert_eq!(tokens(166_500), "166.5");
        assert_eq!(tokens(1), "0.001");
        assert_eq!(tokens(0), "0");
        assert_eq!(tokens(-2_500), "-2.5");
        // Whole tokens past u64 keep their separators.
        assert_eq!(
            tokens(10i128.pow(27) + 500),
            "1,000,000,000,000,000,000,000,000.5"
        );
        assert_eq!(tokens_json(2_000), json!(2));
        assert_eq!(tokens_json(2_500), json!(2.5));
    }
}
