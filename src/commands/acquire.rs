//! `zae-limiter acquire ENTITY -r RESOURCE [--mode consume|preview|reserve]
//! [--cost NAME=N]... [--ttl DURATION] [--holder TEXT]`: ask before working.
//! The runtime ([`crate::runtime`]) resolves the level and decides; this
//! prints the answer and maps it to an exit code: 0 allowed, 75 refused
//! (EX_TEMPFAIL), 1 error.
//!
//! When the store cannot be reached or the state is unreadable, the system
//! level's `on_unavailable` answers (`block` when it cannot be read either)
//! and stderr says so. A namespace that is not registered is an error, never
//! an allow.

use std::collections::BTreeMap;

use zae_limiter_engine::duration::{human_duration, parse_duration_ms};

use crate::cli::args::{AcquireArgs, AcquireMode, NamespacedArgs, TextOrJson};
use crate::cli::{output, CliError};
use crate::clock::rfc3339;
use crate::exit_codes;
use crate::runtime::answer::{ceil_seconds, decision_json};
use crate::runtime::decide::Unchecked;
use crate::runtime::{self, Decision, LimitAnswer, Mode, Namespace, Request, RuntimeError};
use crate::store::Store;

pub fn run(a: AcquireArgs) -> Result<i32, CliError> {
    let mode = match a.mode {
        AcquireMode::Consume => Mode::Consume,
        AcquireMode::Preview => Mode::Preview,
        AcquireMode::Reserve => Mode::Reserve,
    };
    let mut req = Request::checked(mode, a.ttl.is_some(), a.holder.is_some()).ok_or_else(|| {
        CliError::Usage(
            "--ttl and --holder go with --mode reserve (a consume or preview holds nothing)".into(),
        )
    })?;
    req.costs = parse_costs(&a.costs)?;
    req.ttl_seconds = a
        .ttl
        .as_deref()
        .map(|t| ttl_seconds(t, "--ttl"))
        .transpose()?;
    req.holder = a.holder.clone();
    let now = crate::clock::now_ms()?;
    let decision = (|| {
        let store = a.store.open()?;
        let ns = runtime::namespace_id(store.as_ref(), &a.store.namespace)?;
        runtime::acquire(store.as_ref(), &ns, &a.entity, &a.resource, &req, now)
    })();
    let d = match decision {
        Ok(d) => d,
        Err(e @ RuntimeError::NamespaceNotFound(_)) => return Err(unregistered(e, &a.store)),
        Err(e) => {
            // Other processes kept winning the write: refused, try again soon.
            if matches!(e, RuntimeError::Contended { .. }) {
                output::eprintln(format!("refused: {e}"));
            }
            runtime::refusal_for(e, mode, now)?
        }
    };
    if let Some(Unchecked::Unavailable(why) | Unchecked::StateUnreadable(why)) = &d.unavailable {
        output::eprintln(format!(
            "warning: the limits cannot be checked ({why}); on_unavailable {} {}",
            if d.allowed { "allows" } else { "blocks" },
            if d.allowed {
                "the call unchecked"
            } else {
                "it"
            }
        ));
    }
    if let Some(Unchecked::StateUnreadable(_)) = &d.unavailable {
        output::eprintln(format!(
            "hint: nothing overwrites an unreadable state; look at it with `zae-limiter runtime show`, then remove it: `{}`",
            super::runtime::clear_command(&a.entity, &a.resource, &a.store)
        ));
    }
    match a.format {
        TextOrJson::Json => {
            let doc = decision_json(&d, &a.store.namespace, &a.entity, &a.resource);
            output::print_json(&doc)?;
        }
        TextOrJson::Text => {
            let text = render_text(&d, &a.entity, &a.resource);
            match (&d.reservation, d.allowed) {
                // `id=$(zae-limiter acquire … --mode reserve)`: the id alone on stdout.
                (Some(r), _) => {
                    output::println(r.id.to_string())?;
                    output::eprint(&text);
                }
                (None, true) if mode == Mode::Reserve => output::eprint(&text),
                (None, true) => output::print(&text)?,
                (None, false) => output::eprint(&text),
            }
        }
    }
    Ok(if d.allowed {
        exit_codes::OK
    } else {
        exit_codes::TEMPFAIL
    })
}

/// The text answer: a verdict line, then one line per limit.
fn render_text(d: &Decision, entity: &str, resource: &str) -> String {
    let mut s = String::new();
    let level = d
        .source
        .map(|l| format!(", limits from the {} level", l.as_str()))
        .unwrap_or_default();
    let verdict = if d.allowed { "allowed" } else { "refused" };
    s.push_str(&format!("{verdict}: {entity} on {resource}{level}\n"));
    if let Some(why) = &d.unavailable {
        s.push_str(&format!("  not checked: {why}\n"));
    }
    if d.is_disabled() {
        let at = d.disabled.map(|(l, _)| l.as_str()).unwrap_or("?");
        s.push_str(&format!(
            "  {resource} is disabled for {entity} (disabled: true at the {at} level); retrying will not help\n"
        ));
    } else if let Some((at, _)) = d
        .disabled
        .filter(|(_, v)| *v == crate::manifest::model::Disabled::Bypass)
    {
        s.push_str(&format!(
            "  bypassed (disabled: bypass at the {} level): counted, never refused\n",
            at.as_str()
        ));
    }
    for l in &d.limits {
        let counted = d.allowed && d.mode != Mode::Preview;
        s.push_str(&format!("  {}\n", limit_line(l, d.now_ms, counted)));
    }
    if let Some(r) = &d.reservation {
        s.push_str(&format!(
            "  reservation {} until {} (in {}), holding a slot of {}\n",
            r.id,
            rfc3339(r.expires_at_ms),
            human_duration(r.expires_at_ms - d.now_ms),
            r.slots.join(", ")
        ));
    } else if d.allowed && d.mode == Mode::Reserve && d.unavailable.is_some() {
        s.push_str("  no reservation: the limits could not be checked (above), so no slot is held; on_unavailable: allow admits the call without one\n");
    } else if d.allowed && d.mode == Mode::Reserve && !d.is_disabled() {
        s.push_str("  no reservation: every concurrency limit with a free slot is soft or bypassed and was full\n");
    }
    if !d.allowed && !d.is_disabled() && d.unavailable.is_none() {
        match d.retry_after_ms {
            Some(ms) => s.push_str(&format!(
                "  retry in {} s (at {})\n",
                ceil_seconds(ms),
                rfc3339(d.now_ms.saturating_add(ms))
            )),
            None => s.push_str("  waiting will not help: the cost is above a limit's amount\n"),
        }
    }
    s
}

/// One limit's line; `counted`: the request was recorded (an admitted consume or reserve).
fn limit_line(l: &LimitAnswer, now: i64, counted: bool) -> String {
    let soft = if l.soft { ", soft" } else { "" };
    if !l.enforced_here {
        return format!(
            "{} ({}{soft}): not enforced here (the Python library's acquire enforces it on its buckets)",
            l.name, l.kind
        );
    }
    let what = match l.window {
        Some(w) => format!("{} (rolling {w}{soft})", l.name),
        None => format!("{} (concurrency{soft})", l.name),
    };
    let Some(allowed) = l.allowed else {
        return format!("{what}: not checked");
    };
    let counted = counted && allowed;
    let state = match (l.window, l.remaining) {
        (Some(_), Some(left)) => format!(
            "{left} of {} left{}",
            l.amount,
            l.cost
                .map(|c| if counted {
                    format!(" after this one (cost {c})")
                } else {
                    format!(" (this one costs {c})")
                })
                .unwrap_or_default()
        ),
        (None, Some(free)) => format!("{free} of {} slots free", l.amount),
        _ => String::new(),
    };
    let tail = if allowed {
        String::new()
    } else if l.never {
        format!(
            ": REFUSED, a cost of {} never fits in {}",
            l.cost.unwrap_or(0),
            l.amount
        )
    } else {
        match l.retry_after_ms {
            Some(ms) => format!(
                ": REFUSED, admits it again in {} s (at {})",
                ceil_seconds(ms),
                rfc3339(now.saturating_add(ms))
            ),
            None => ": REFUSED".into(),
        }
    };
    format!("{what}: {state}{tail}")
}

/// `NAME=N` pairs, each name once.
pub(crate) fn parse_costs(pairs: &[String]) -> Result<BTreeMap<String, u64>, CliError> {
    let mut out = BTreeMap::new();
    for pair in pairs {
        let bad = || {
            CliError::Usage(format!(
                "--cost {pair:?}: expected NAME=N with N a whole number, e.g. --cost tokens_per_minute=1200"
            ))
        };
        let (name, n) = pair.split_once('=').ok_or_else(bad)?;
        let n: u64 = n.trim().parse().map_err(|_| bad())?;
        if name.is_empty() {
            return Err(bad());
        }
        if out.insert(name.to_string(), n).is_some() {
            return Err(CliError::Usage(format!(
                "--cost {name} is given twice; give each limit's cost once"
            )));
        }
    }
    Ok(out)
}

/// A hold TTL in whole seconds from a duration such as `90s` or `10m`.
pub(crate) fn ttl_seconds(text: &str, flag: &str) -> Result<i64, CliError> {
    let ms = parse_duration_ms(text).map_err(|e| CliError::Usage(format!("{flag}: {e}")))?;
    if ms % 1000 != 0 {
        return Err(CliError::Usage(format!(
            "{flag} {text}: a hold lasts whole seconds"
        )));
    }
    let s = ms / 1000;
    runtime::decide::check_ttl("--ttl", s).map_err(|e| CliError::Usage(e.to_string()))?;
    Ok(s)
}

/// The namespace `args` name; one that is not registered is an error whose
/// suggested command reaches the same table.
pub(crate) fn namespace(store: &dyn Store, args: &NamespacedArgs) -> Result<Namespace, CliError> {
    runtime::namespace_id(store, &args.namespace).map_err(|e| unregistered(e, args))
}

/// [`RuntimeError::NamespaceNotFound`] with the store flags in its hint.
fn unregistered(e: RuntimeError, args: &NamespacedArgs) -> CliError {
    match e {
        RuntimeError::NamespaceNotFound(name) => CliError::Failed(format!(
            "namespace '{name}' is not registered; register it with `{}` (or apply a manifest to it)",
            args.table.register_command(&name)
        )),
        e => e.into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn costs_and_ttls() {
        let costs = parse_costs(&["rpm=1".into(), "tpm=0".into()]).unwrap();
        assert_eq!(costs["tpm"], 0);
        for bad in ["rpm", "rpm=-1", "rpm=1.5", "=3", "rpm=x"] {
            assert!(parse_costs(&[bad.into()]).is_err(), "{bad}");
        }
        assert!(parse_costs(&["a=1".into(), "a=2".into()]).is_err());
        assert_eq!(ttl_seconds("10m", "--ttl").unwrap(), 600);
        assert_eq!(ttl_seconds("1h", "--ttl").unwrap(), 3600);
        for bad in ["0s", "1h1s", "500ms", "soon"] {
            assert!(ttl_seconds(bad, "--ttl").is_err(), "{bad}");
        }
    }
}
