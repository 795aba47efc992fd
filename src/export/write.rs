//! A stored level as manifest YAML (docs/manifest.md for the format): limits
//! by name; a key only where it differs from the loader's default (a drip's
//! `refill_amount` equal to its capacity, a `refill_period` of 60, a quota's
//! inert period, a hold TTL of 300 are left out); schedule entries with named
//! months and weekdays and the level's one zone on every entry.

use zae_limiter_engine::concurrency::DEFAULT_HOLD_TTL_SECONDS;
use zae_limiter_engine::encoding::{encode_reset, encode_schedule, Modifier};
use zae_limiter_engine::render::to_cron;

use crate::items::config::{StoredEntry, StoredLevel, StoredLimit};
use crate::manifest::emit::Node;
use crate::manifest::model::{Disabled, LimitKind};
use crate::manifest::DEFAULT_REFILL_PERIOD;
use crate::plan::level::Level;

fn pair(k: &str, v: Node) -> (String, Node) {
    (k.to_string(), v)
}

/// The level's mapping: `limits`, then its flags (or `on_unavailable`).
pub fn level(level: &Level, stored: &StoredLevel) -> Result<Node, String> {
    let mut out = Vec::new();
    if !stored.limits.is_empty() {
        let mut limits = Vec::with_capacity(stored.limits.len());
        for l in &stored.limits {
            limits.push(pair(
                &l.name,
                limit(l).map_err(|e| format!("limit '{}': {e}", l.name))?,
            ));
        }
        out.push(pair("limits", Node::Map(limits)));
    }
    if let Some(d) = stored.disabled {
        let v = match d {
            Disabled::Disabled => Node::Bool(true),
            Disabled::Enforced => Node::Bool(false),
            Disabled::Bypass => Node::Str("bypass".into()),
        };
        out.push(pair("disabled", v));
    }
    if let Some(c) = stored.cascade {
        out.push(pair("cascade", Node::Bool(c)));
    }
    if let Some(o) = &stored.on_unavailable {
        if *level != Level::System {
            return Err(format!(
                "on_unavailable '{o}' is set on a level other than the system's"
            ));
        }
        out.push(pair("on_unavailable", Node::Str(o.clone())));
    }
    Ok(Node::Map(out))
}

fn limit(l: &StoredLimit) -> Result<Node, String> {
    let mut out = Vec::new();
    match l.kind {
        LimitKind::Rolling { window } => {
            out.push(pair("capacity", Node::Int(l.capacity)));
            out.push(pair("window", Node::Str(window.to_string())));
            out.push(pair("rolling", Node::Bool(true)));
        }
        LimitKind::Concurrency { hold_ttl_seconds } => {
            out.push(pair("concurrency", Node::Int(l.capacity)));
            if hold_ttl_seconds != DEFAULT_HOLD_TTL_SECONDS as u64 {
                out.push(pair("hold_ttl_seconds", Node::Int(hold_ttl_seconds)));
            }
        }
        LimitKind::Bucket => {
            out.push(pair("capacity", Node::Int(l.capacity)));
            let quota = l.resets();
            let default_refill = if quota { 0 } else { l.capacity };
            if l.refill_amount != default_refill {
                out.push(pair("refill_amount", Node::Int(l.refill_amount)));
            }
            // A quota's period is inert (nothing drips): plan ignores it.
            if !quota && l.refill_period != DEFAULT_REFILL_PERIOD {
                out.push(pair("refill_period", Node::Int(l.refill_period)));
            }
            if let Some(rsa) = l.reset_after_seconds {
                out.push(pair("reset_after_seconds", Node::Int(rsa)));
            }
        }
    }
    if l.soft {
        out.push(pair("soft", Node::Bool(true)));
    }
    if !l.schedule.is_empty() {
        let entries = l
            .schedule
            .iter()
            .enumerate()
            .map(|(i, e)| schedule_entry(e).map_err(|m| format!("schedule[{i}]: {m}")))
            .collect::<Result<Vec<_>, _>>()?;
        out.push(pair("schedule", Node::List(entries)));
    }
    if !l.reset_schedule.is_empty() {
        let entries = l
            .reset_schedule
            .iter()
            .enumerate()
            .map(|(i, e)| {
                let cron = cron(e, None).map_err(|m| format!("reset_schedule[{i}]: {m}"))?;
                Ok(Node::Map(vec![
                    pair("cron", Node::Quoted(cron)),
                    pair("tz", Node::Str(e.tz.clone())),
                ]))
            })
            .collect::<Result<Vec<_>, String>>()?;
        out.push(pair("reset_schedule", Node::List(entries)));
    }
    Ok(Node::Map(out))
}

fn schedule_entry(e: &StoredEntry) -> Result<Node, String> {
    let modifier = e
        .modifier
        .ok_or_else(|| "a parameter entry without a modifier".to_string())?;
    let mut out = vec![
        pair("cron", Node::Quoted(cron(e, Some(modifier))?)),
        pair("tz", Node::Str(e.tz.clone())),
    ];
    match modifier {
        Modifier::Scale { permille } => out.push(pair("scale", scale(permille))),
        Modifier::Absolute {
            capacity,
            refill_amount,
            refill_period_seconds,
        } => {
            for (k, v) in [
                ("capacity", capacity),
                ("refill_amount", refill_amount),
                ("refill_period_seconds", refill_period_seconds),
            ] {
                if let Some(v) = v {
                    out.push(pair(k, Node::Int(v)));
                }
            }
        }
    }
    Ok(Node::Map(out))
}

/// A per-mille scale as the number it stands for: 500 → 0.5, 2000 → 2.
/// `permille / 1000` in f64 is the nearest double to that decimal, which
/// Python's repr prints as the decimal and the loader quantises back to
/// the same per-mille.
fn scale(permille: u64) -> Node {
    if permille % 1000 == 0 {
        Node::Int(permille / 1000)
    } else {
        Node::Float(permille as f64 / 1000.0)
    }
}

/// The entry's cron, with names when the named form stores the same
/// compact text, else the numbers as stored (docs/semantics.md, B6).
fn cron(e: &StoredEntry, modifier: Option<Modifier>) -> Result<String, String> {
    let stores_back = |text: &str| -> bool {
        let compact = match modifier {
            Some(m) => encode_schedule(&[(text, m)]),
            None => encode_reset(&[text]),
        };
        compact.is_ok_and(|c| c == e.compact)
    };
    let named = to_cron(&e.compact).map_err(|err| err.to_string())?;
    if stores_back(&named) {
        return Ok(named);
    }
    if stores_back(&e.cron) {
        return Ok(e.cron.clone());
    }
    Err(format!(
        "the stored entry '{}' is written by no cron pattern ('{named}' stores differently)",
        e.compact
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scales_read_back_to_their_permille() {
        for p in [
            1u64,
            5,
            125,
            333,
            500,
            999,
            1001,
            1500,
            2000,
            123_456,
            1_000_000_000,
        ] {
            let f = match scale(p) {
                Node::Int(i) => i as f64,
                Node::Float(f) => f,
                other => panic!("{other:?}"),
            };
            assert_eq!(zae_limiter_engine::encoding::scale_permille(f), p, "{p}");
        }
    }
}
