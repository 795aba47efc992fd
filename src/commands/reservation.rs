//! `zae-limiter reservation release|commit|extend ID`: the other half of
//! `acquire --mode reserve`. The id names the state item, so nothing but the
//! id, the store flags and `-N` is needed; the hold must be open there.
//! Closing a reservation twice is harmless and says so (exit 0); closing or
//! extending one that expired or is unknown is an error (exit 1), never a
//! silent success that hides a lost slot.

use serde_json::Value;

use super::acquire::{namespace, parse_costs, ttl_seconds};
use super::runtime::with_clear_command;
use crate::cli::args::{ReservationArgs, ReservationCommand, TextOrJson};
use crate::cli::{output, CliError};
use crate::clock::now_ms;
use crate::clock::rfc3339;
use crate::exit_codes;
use crate::runtime::answer::{closure_json, extended_json};
use crate::runtime::state::Closing;
use crate::runtime::{self, Closure, ReservationId};

pub fn run(cmd: ReservationCommand) -> Result<i32, CliError> {
    match cmd {
        ReservationCommand::Release(a) => close(&a, Closing::Released, &[]),
        ReservationCommand::Commit(c) => close(&c.reservation, Closing::Committed, &c.costs),
        ReservationCommand::Extend(e) => {
            let a = &e.reservation;
            let id = parse_id(&a.id)?;
            let ttl = ttl_seconds(&e.ttl, "--ttl")?;
            let now = now_ms()?;
            let store = a.store.open()?;
            let ns = namespace(store.as_ref(), &a.store)?;
            let x = runtime::extend(store.as_ref(), &ns, &id, ttl, now)
                .map_err(|e| with_clear_command(e, &id.entity, &id.resource, &a.store))?;
            print(a.format, extended_json(&x, &ns.name, now), || {
                format!(
                    "extended {}: open until {} (was {})\n",
                    x.id,
                    rfc3339(x.expires_at_ms),
                    rfc3339(x.previous_ms)
                )
            })
        }
    }
}

fn close(a: &ReservationArgs, how: Closing, costs: &[String]) -> Result<i32, CliError> {
    let id = parse_id(&a.id)?;
    let costs = parse_costs(costs)?;
    let now = now_ms()?;
    let store = a.store.open()?;
    let ns = namespace(store.as_ref(), &a.store)?;
    let c = match how {
        Closing::Released => runtime::release(store.as_ref(), &ns, &id, now),
        Closing::Committed => runtime::commit(store.as_ref(), &ns, &id, &costs, now),
    }
    .map_err(|e| with_clear_command(e, &id.entity, &id.resource, &a.store))?;
    print(a.format, closure_json(&c, &ns.name, now), || {
        closure_text(&c)
    })
}

fn closure_text(c: &Closure) -> String {
    if let Some(a) = &c.already {
        return format!(
            "already {} at {}: nothing to do\n",
            a.how.as_str(),
            rfc3339(a.at)
        );
    }
    let mut s = format!("{} {}", c.how.as_str(), c.id);
    if c.slots.is_empty() {
        s.push_str(": it held no slot any more (its limits were removed)");
    } else {
        s.push_str(&format!(": gave back a slot of {}", c.slots.join(", ")));
    }
    s.push('\n');
    for x in &c.corrections {
        if x.applied {
            s.push_str(&format!(
                "  {}: counted {} → {}\n",
                x.name, x.counted, x.actual
            ));
        } else {
            s.push_str(&format!(
                "  {}: counted {}, left as is (the window it was counted in has passed)\n",
                x.name, x.counted
            ));
        }
    }
    s
}

fn print(format: TextOrJson, json: Value, text: impl FnOnce() -> String) -> Result<i32, CliError> {
    output::text_or_json(format, text, || json)?;
    Ok(exit_codes::OK)
}

fn parse_id(text: &str) -> Result<ReservationId, CliError> {
    Ok(ReservationId::parse(text.trim())?)
}
