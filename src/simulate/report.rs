//! What a simulation found, for people (text) and for scripts (one JSON
//! document, `"version": 1`; fields are only ever added within a version).

use serde_json::{json, Value};

use super::counters::{describe, kind_name, Counter};
use super::resolve::Source;
use super::tally::{Streak, Tally};
use super::trace::TraceFormat;
use crate::clock::rfc3339;
use crate::display::numbers::thousands;
use crate::manifest::model::{Disabled, LimitSpec};
use zae_limiter_engine::duration::human_duration;

/// What was simulated, besides the counts.
pub struct Context<'a> {
    pub entity: &'a str,
    pub resource: &'a str,
    pub source: Source,
    pub disabled: Option<(Source, Disabled)>,
    pub trace: &'a str,
    pub format: TraceFormat,
    pub lines: u64,
    pub limits: Vec<(&'a str, &'a LimitSpec)>,
}

fn disabled_word(d: Disabled) -> &'static str {
    match d {
        Disabled::Disabled => "disabled",
        Disabled::Enforced => "enforced",
        Disabled::Bypass => "bypass",
    }
}

/// `part` of `whole` as a percentage with two decimals, in integers.
fn percent(part: u64, whole: u64) -> String {
    if whole == 0 {
        return "0.00%".into();
    }
    let bp = (u128::from(part) * 10_000 + u128::from(whole) / 2) / u128::from(whole);
    format!("{}.{:02}%", bp / 100, bp % 100)
}

fn streak_text(s: &Streak) -> String {
    if s.requests == 1 {
        return format!("1 request at {}", rfc3339(s.from_ms));
    }
    let word = "requests";
    format!(
        "{} {word} from {} to {} ({})",
        thousands(s.requests),
        rfc3339(s.from_ms),
        rfc3339(s.to_ms),
        human_duration(s.span_ms())
    )
}

fn streak_json(s: Option<Streak>) -> Value {
    match s {
        None => Value::Null,
        Some(s) => json!({
            "requests": s.requests,
            "from": rfc3339(s.from_ms),
            "to": rfc3339(s.to_ms),
            "seconds": s.span_ms() / 1000,
        }),
    }
}

fn word(n: u64, one: &str, many: &str) -> String {
    format!("{} {}", thousands(n), if n == 1 { one } else { many })
}

/// The text report.
pub fn render_text(ctx: &Context<'_>, t: &Tally, counters: &[Counter]) -> String {
    let mut out = String::new();
    let mut line = |s: String| {
        out.push_str(&s);
        out.push('\n');
    };
    line(format!(
        "{} on {}: limits from {} ({})",
        ctx.entity,
        ctx.resource,
        ctx.source.manifest_path(ctx.entity, ctx.resource),
        ctx.source.as_str()
    ));
    if let Some((src, d)) = ctx.disabled {
        let what = match d {
            Disabled::Disabled => "every request is admitted and nothing is counted",
            Disabled::Bypass => "every request is admitted but counted",
            Disabled::Enforced => "limits are enforced",
        };
        line(format!(
            "disabled: {} at {}: {what}",
            disabled_word(d),
            src.manifest_path(ctx.entity, ctx.resource)
        ));
    }
    let span = match (t.first_ms, t.last_ms) {
        (Some(a), Some(b)) => format!(
            " from {} to {} ({})",
            rfc3339(a),
            rfc3339(b),
            human_duration(b.saturating_sub(a))
        ),
        _ => String::new(),
    };
    line(format!(
        "trace: {} ({}), {}{span}",
        ctx.trace,
        ctx.format.as_str(),
        word(t.requests, "request", "requests")
    ));
    line(String::new());
    line(format!(
        "admitted {} ({}), refused {} ({})",
        thousands(t.admitted),
        percent(t.admitted, t.requests),
        thousands(t.refused),
        percent(t.refused, t.requests)
    ));
    match t.streak.longest() {
        Some(s) => line(format!("longest refusal streak: {}", streak_text(&s))),
        None => line("no request was refused".into()),
    }
    let disabled = matches!(ctx.disabled, Some((_, Disabled::Disabled)));
    for (((name, spec), lt), c) in ctx.limits.iter().zip(&t.limits).zip(counters) {
        line(String::new());
        line(format!("{name}: {}", describe(spec)));
        if disabled {
            line("  not evaluated (disabled)".into());
            continue;
        }
        if lt.refused == 0 {
            line("  never refused".into());
        } else {
            line(format!(
                "  refused {} of {} ({}), {} by it alone",
                thousands(lt.refused),
                thousands(lt.checked),
                percent(lt.refused, lt.checked),
                thousands(lt.refused_alone)
            ));
            if let (Some(a), Some(b)) = (lt.first_refusal_ms, lt.last_refusal_ms) {
                line(format!(
                    "  first refusal {}, last {}",
                    rfc3339(a),
                    rfc3339(b)
                ));
            }
            if let Some(s) = lt.streak.longest() {
                line(format!("  longest streak: {}", streak_text(&s)));
            }
        }
        if lt.over_but_admitted > 0 {
            line(format!(
                "  {} over the limit but admitted ({})",
                word(lt.over_but_admitted, "request", "requests"),
                if spec.soft { "soft" } else { "bypass" }
            ));
        }
        if let Some(peak) = c.peak_holds() {
            line(format!(
                "  at most {peak} of {} slots held at once",
                spec.capacity
            ));
        } else if let Some(low) = lt.lowest_available {
            line(format!("  lowest available: {low}"));
        }
    }
    let mut notes = Vec::new();
    if !t.unknown_costs.is_empty() {
        let names: Vec<&str> = t.unknown_costs.iter().map(String::as_str).collect();
        notes.push(format!(
            "costs for {} were ignored: no limit of that name applies to {} on {}",
            names.join(", "),
            ctx.entity,
            ctx.resource
        ));
    }
    if t.out_of_order > 0 {
        notes.push(format!(
            "{} stamped earlier than a line before; evaluated at the latest time seen (the clock never goes back)",
            word(t.out_of_order, "line was", "lines were")
        ));
    }
    if t.hold_ops_not_open > 0 {
        notes.push(format!(
            "{} named a hold that was not open (expired, already closed or never reserved)",
            word(
                t.hold_ops_not_open,
                "release/commit/extend",
                "releases/commits/extends"
            )
        ));
    }
    if !notes.is_empty() {
        line(String::new());
        for n in notes {
            line(format!("note: {n}"));
        }
    }
    out
}

/// The JSON document.
pub fn render_json(ctx: &Context<'_>, t: &Tally, counters: &[Counter]) -> Value {
    let limits: Vec<Value> = ctx
        .limits
        .iter()
        .zip(&t.limits)
        .zip(counters)
        .map(|(((name, spec), lt), c)| {
            json!({
                "name": name,
                "kind": kind_name(spec),
                "description": describe(spec),
                "capacity": spec.capacity,
                "soft": spec.soft,
                "checked": lt.checked,
                "refused": lt.refused,
                "refused_alone": lt.refused_alone,
                "over_but_admitted": lt.over_but_admitted,
                "first_refusal": lt.first_refusal_ms.map(rfc3339),
                "last_refusal": lt.last_refusal_ms.map(rfc3339),
                "longest_refusal_streak": streak_json(lt.streak.longest()),
                "lowest_available": lt.lowest_available.map(|v| v.clamp(i64::MIN.into(), i64::MAX.into()) as i64),
                "peak_holds": c.peak_holds(),
            })
        })
        .collect();
    json!({
        "version": 1,
        "command": "limits simulate",
        "entity": ctx.entity,
        "resource": ctx.resource,
        "source": ctx.source.as_str(),
        "disabled": ctx.disabled.map(|(_, d)| disabled_word(d)),
        "trace": {
            "path": ctx.trace,
            "format": ctx.format.as_str(),
            "lines": ctx.lines,
            "first": t.first_ms.map(rfc3339),
            "last": t.last_ms.map(rfc3339),
            "out_of_order": t.out_of_order,
            "unknown_costs": t.unknown_costs,
        },
        "requests": t.requests,
        "admitted": t.admitted,
        "refused": t.refused,
        "longest_refusal_streak": streak_json(t.streak.longest()),
        "hold_ops": t.hold_ops,
        "hold_ops_for_refused": t.hold_ops_for_refused,
        "hold_ops_not_open": t.hold_ops_not_open,
        "limits": limits,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentages_in_integers() {
        assert_eq!(percent(1, 3), "33.33%");
        assert_eq!(percent(2, 3), "66.67%");
        assert_eq!(percent(0, 0), "0.00%");
        assert_eq!(percent(5, 5), "100.00%");
        assert_eq!(percent(1, 1_000_000), "0.00%");
    }
}
