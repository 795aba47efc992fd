//! `zae-limiter runtime show|clear ENTITY -r RESOURCE`: the operator's view
//! of the runtime state [`crate::runtime`] keeps for a pair (the use counted
//! in each rolling window, the open holds) and the remedy for a state
//! nothing else overwrites (an unreadable item, windows a clock far ahead
//! counted in). The runtime reads and deletes; this prints.

use zae_limiter_engine::duration::human_duration;

use super::acquire::namespace;
use crate::cli::args::{NamespacedArgs, RuntimeCommand, RuntimeStateArgs};
use crate::cli::shell::quote;
use crate::cli::{output, CliError};
use crate::clock::{now_ms, rfc3339};
use crate::exit_codes;
use crate::runtime::answer::{cleared_json, state_json};
use crate::runtime::decide::units;
use crate::runtime::state::RuntimeState;
use crate::runtime::{self, Cleared, RuntimeError};

pub fn run(cmd: RuntimeCommand) -> Result<i32, CliError> {
    match cmd {
        RuntimeCommand::Show(a) => show(&a),
        RuntimeCommand::Clear(a) => clear(&a),
    }
}

fn show(a: &RuntimeStateArgs) -> Result<i32, CliError> {
    let now = now_ms()?;
    let store = a.store.open_read_only()?;
    let ns = namespace(store.as_ref(), &a.store)?;
    let st = runtime::inspect(store.as_ref(), &ns, &a.entity, &a.resource)
        .map_err(|e| with_clear_command(e, &a.entity, &a.resource, &a.store))?;
    let json = || state_json(st.as_ref(), &ns.name, &a.entity, &a.resource, now);
    output::text_or_json(a.format, || state_text(st.as_ref(), a, now), json)?;
    Ok(exit_codes::OK)
}

fn clear(a: &RuntimeStateArgs) -> Result<i32, CliError> {
    let now = now_ms()?;
    let store = a.store.open()?;
    let ns = namespace(store.as_ref(), &a.store)?;
    let c = runtime::clear(store.as_ref(), &ns, &a.entity, &a.resource)?;
    let json = || cleared_json(&c, &ns.name, &a.entity, &a.resource, now);
    output::text_or_json(a.format, || cleared_text(&c, a, now), json)?;
    Ok(exit_codes::OK)
}

/// The command that clears the state of (entity, resource) on this table.
pub(crate) fn clear_command(entity: &str, resource: &str, store: &NamespacedArgs) -> String {
    format!(
        "zae-limiter runtime clear {} -r {}{}",
        quote(entity),
        quote(resource),
        store.flags()
    )
}

/// An unreadable state names the command that removes it.
pub(crate) fn with_clear_command(
    e: RuntimeError,
    entity: &str,
    resource: &str,
    store: &NamespacedArgs,
) -> CliError {
    match e {
        RuntimeError::StateUnreadable { .. } => CliError::Failed(format!(
            "{e}; nothing overwrites it, and every decision on the pair follows on_unavailable until it is removed: `{}`",
            clear_command(entity, resource, store)
        )),
        e => e.into(),
    }
}

fn state_text(st: Option<&RuntimeState>, a: &RuntimeStateArgs, now: i64) -> String {
    let pair = format!("{} on {}", a.entity, a.resource);
    let Some(st) = st else {
        return format!("no runtime state stored for {pair}: nothing counted, nothing held\n");
    };
    let mut s = format!(
        "runtime state of {pair}: version {}, last written {}\n",
        st.version,
        rfc3339(st.updated_at)
    );
    if st.ahead_of(now) {
        s.push_str(&format!(
            "  warning: written by a clock more than a minute ahead of this one ({}); its use leaves the windows only when this clock catches up. If that clock was wrong (a skewed host, a ZAEL_NOW rehearsal) and the open reservations below may be let go, remove the state: `{}`\n",
            rfc3339(now),
            clear_command(&a.entity, &a.resource, &a.store)
        ));
    }
    if st.rolling.is_empty() {
        s.push_str("  rolling windows: none counted\n");
    }
    for (name, w) in &st.rolling {
        let gone = match w.all_gone_at() {
            Some(at) if at > now => format!(
                "; all of it has left at {} (in {})",
                rfc3339(at),
                human_duration(at - now)
            ),
            _ => String::new(),
        };
        s.push_str(&format!(
            "  {name} (rolling {}): {} counted in the last {}{gone}\n",
            w.window(),
            units(w.used_at(now)),
            w.window()
        ));
    }
    let open = st.open_holds(now).count();
    s.push_str(&format!(
        "  open reservations: {open}{}\n",
        match st.holds.len() - open {
            0 => String::new(),
            n => format!(" ({n} more expired: their slots are free)"),
        }
    ));
    for (token, h) in &st.holds {
        let id = st.reservation_id(token);
        let when = if h.expires_at > now {
            format!(
                "until {} (in {})",
                rfc3339(h.expires_at),
                human_duration(h.expires_at - now)
            )
        } else {
            format!("expired at {}", rfc3339(h.expires_at))
        };
        let holder = h
            .holder
            .as_deref()
            .map(|x| format!(", holder {x:?}"))
            .unwrap_or_default();
        let slots = if h.slots.is_empty() {
            "no slot".to_string()
        } else {
            format!(
                "a slot of {}",
                Vec::from_iter(h.slots.iter().cloned()).join(", ")
            )
        };
        s.push_str(&format!(
            "    {id}: {slots}{holder}, taken {}, {when}\n",
            rfc3339(h.created_at)
        ));
    }
    if !st.closed.is_empty() {
        s.push_str(&format!(
            "  recently closed reservations: {} (a second release of one says so)\n",
            st.closed.len()
        ));
    }
    s
}

fn cleared_text(c: &Cleared, a: &RuntimeStateArgs, now: i64) -> String {
    let pair = format!("{} on {}", a.entity, a.resource);
    match c {
        Cleared::Nothing => {
            format!("no runtime state stored for {pair}; nothing to clear\n")
        }
        Cleared::Unreadable(why) => {
            format!("cleared the unreadable runtime state of {pair} ({why}); its windows start empty, no slot is held\n")
        }
        Cleared::State(st) => {
            let open: Vec<String> = st
                .open_holds(now)
                .map(|t| st.reservation_id(t).to_string())
                .collect();
            let mut s = format!(
                "cleared the runtime state of {pair}: {} emptied, {} let go\n",
                match st.rolling.len() {
                    1 => "1 rolling window".to_string(),
                    n => format!("{n} rolling windows"),
                },
                match open.len() {
                    1 => "1 open reservation".to_string(),
                    n => format!("{n} open reservations"),
                }
            );
            for id in open {
                s.push_str(&format!("  {id}\n"));
            }
            s
        }
    }
}
