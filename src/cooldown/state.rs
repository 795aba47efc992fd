//! The stored state of one scope's cooldown and its item encoding (layout in
//! the module doc of [`crate::cooldown`]).

use zae_limiter_engine::cooldown::{may_probe, EpochMs, MAX_DEADLINE_MS};

use crate::items::read::{self, Unreadable};
use crate::store::{AttrValue, Item, Key};

/// Sort key of every cooldown item.
pub const SK: &str = "#STATE";
/// The `kind` attribute that marks an item as a cooldown.
pub const KIND: &str = "cooldown";

/// Partition key of a scope's cooldown in namespace `ns`.
pub fn pk(ns: &str, scope: &str) -> String {
    format!("{ns}/COOLDOWN#{scope}")
}

/// Prefix shared by every cooldown PK of a namespace (also their GSI4SK prefix).
pub fn pk_prefix(ns: &str) -> String {
    format!("{ns}/COOLDOWN#")
}

/// The primary key of a scope's cooldown.
pub fn key(ns: &str, scope: &str) -> Key {
    Key::new(pk(ns, scope), SK)
}

/// Whether calls wait for a deadline or for a person.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// A timed cooldown: calls resume at `not_before`.
    Cooling,
    /// An authentication rejection or an implausible reset: no call until an operator acts.
    NeedsOperator,
}

impl Phase {
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Cooling => "cooling",
            Phase::NeedsOperator => "needs_operator",
        }
    }

    fn parse(s: &str) -> Option<Phase> {
        match s {
            "cooling" => Some(Phase::Cooling),
            "needs_operator" => Some(Phase::NeedsOperator),
            _ => None,
        }
    }
}

/// The single recovery probe's lease.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lease {
    pub holder: String,
    pub expires_at: EpochMs,
}

/// One scope's cooldown as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CooldownState {
    pub scope: String,
    pub phase: Phase,
    /// No call before this instant (for `NeedsOperator`, the last deadline recorded, or 0).
    pub not_before: EpochMs,
    /// The last refusal, in words (shown by `check` and `list`).
    pub reason: String,
    /// Consecutive refusals that named no reset (the backoff step of the next one).
    pub backoff_attempt: u32,
    /// When the last recorded response was received.
    pub received_at: EpochMs,
    /// When the state was last written.
    pub updated_at: EpochMs,
    /// Incremented by every write; the condition of the next write.
    pub version: u64,
    pub probe: Option<Lease>,
}

/// What a worker should do at an instant, given a scope's state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Nothing stands in the way of a call.
    Go,
    /// Not before `until`; `probe_holder` is set when a recovery probe is in flight.
    Wait {
        until: EpochMs,
        probe_holder: Option<String>,
    },
    /// An operator must act first.
    NeedsOperator,
}

impl CooldownState {
    /// The verdict at `now`: wait for the deadline, then for any live probe lease.
    pub fn verdict(&self, now: EpochMs) -> Verdict {
        if self.phase == Phase::NeedsOperator {
            return Verdict::NeedsOperator;
        }
        if !may_probe(now, self.not_before) {
            return Verdict::Wait {
                until: self.not_before,
                probe_holder: None,
            };
        }
        match self.live_lease(now) {
            Some(l) => Verdict::Wait {
                until: l.expires_at,
                probe_holder: Some(l.holder.clone()),
            },
            None => Verdict::Go,
        }
    }

    /// The probe lease, if it has not expired at `now`.
    pub fn live_lease(&self, now: EpochMs) -> Option<&Lease> {
        self.probe.as_ref().filter(|l| l.expires_at > now)
    }

    /// The item for namespace `ns`.
    pub fn to_item(&self, ns: &str) -> Item {
        let mut item = crate::items::keys::namespaced_item(ns, key(ns, &self.scope));
        item.insert("kind".into(), AttrValue::s(KIND));
        item.insert("scope".into(), AttrValue::s(&self.scope));
        item.insert("state".into(), AttrValue::s(self.phase.as_str()));
        item.insert("not_before".into(), AttrValue::n(self.not_before));
        item.insert("reason".into(), AttrValue::s(&self.reason));
        item.insert("backoff_attempt".into(), AttrValue::n(self.backoff_attempt));
        item.insert("received_at".into(), AttrValue::n(self.received_at));
        item.insert("updated_at".into(), AttrValue::n(self.updated_at));
        item.insert("version".into(), AttrValue::n(self.version));
        if let Some(l) = &self.probe {
            item.insert("probe_holder".into(), AttrValue::s(&l.holder));
            item.insert("probe_expires".into(), AttrValue::n(l.expires_at));
        }
        item
    }

    /// Reads a stored item strictly: anything missing, mistyped or out of
    /// range is an error (the caller reports the state as unreadable, never as
    /// "no cooldown"). Instants must lie in 1970..=9999 ([`MAX_DEADLINE_MS`]);
    /// a timed cooldown's `not_before` and a lease's expiry after 1970-01-01
    /// (only an escalated scope may have no deadline, 0).
    pub fn from_item(item: &Item) -> Result<CooldownState, Unreadable> {
        let s = |name: &str| read::string(item, name);
        let kind = s("kind")?;
        if kind != KIND {
            return Err(format!("attribute 'kind' is '{kind}', expected '{KIND}'").into());
        }
        let state = s("state")?;
        let phase = Phase::parse(&state).ok_or_else(|| format!("unknown state '{state}'"))?;
        let instant = |name: &str, min: EpochMs| -> Result<EpochMs, Unreadable> {
            let v: EpochMs = read::integer(item, name)?;
            if (min..=MAX_DEADLINE_MS).contains(&v) {
                Ok(v)
            } else {
                Err(format!(
                    "attribute '{name}' = {v} is out of range (expected epoch milliseconds from {min} to {MAX_DEADLINE_MS})"
                ).into())
            }
        };
        let probe = match (item.get("probe_holder"), item.get("probe_expires")) {
            (None, None) => None,
            (Some(_), Some(_)) => Some(Lease {
                holder: s("probe_holder")?,
                expires_at: instant("probe_expires", 1)?,
            }),
            _ => return Err("probe_holder and probe_expires must appear together".into()),
        };
        let version: u64 = read::integer(item, "version")?;
        if version == u64::MAX {
            return Err(format!("attribute 'version' = {version} is out of range").into());
        }
        Ok(CooldownState {
            scope: s("scope")?,
            phase,
            not_before: instant("not_before", if phase == Phase::Cooling { 1 } else { 0 })?,
            reason: s("reason")?,
            backoff_attempt: read::integer(item, "backoff_attempt")?,
            received_at: instant("received_at", 0)?,
            updated_at: instant("updated_at", 0)?,
            version,
            probe,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> CooldownState {
        CooldownState {
            scope: "openai/acct-42/gpt-4".into(),
            phase: Phase::Cooling,
            not_before: 203_830_000,
            reason: "status 429: resets_in_seconds 202825".into(),
            backoff_attempt: 0,
            received_at: 1_000_000,
            updated_at: 1_000_500,
            version: 3,
            probe: Some(Lease {
                holder: "w1".into(),
                expires_at: 203_900_000,
            }),
        }
    }

    #[test]
    fn round_trips_through_an_item_with_the_documented_layout() {
        let st = sample();
        let item = st.to_item("lum6SW9LwCI");
        assert_eq!(
            item["PK"],
            AttrValue::s("lum6SW9LwCI/COOLDOWN#openai/acct-42/gpt-4")
        );
        assert_eq!(item["SK"], AttrValue::s("#STATE"));
        assert_eq!(item["GSI4PK"], AttrValue::s("lum6SW9LwCI"));
        assert_eq!(item["GSI4SK"], item["PK"]);
        assert_eq!(CooldownState::from_item(&item), Ok(st.clone()));
        let no_probe = CooldownState { probe: None, ..st };
        assert_eq!(
            CooldownState::from_item(&no_probe.to_item("n")),
            Ok(no_probe)
        );
    }

    #[test]
    fn a_damaged_item_is_an_error_not_a_default() {
        let good = sample().to_item("n");
        // (attribute, its damaged value or `None` when missing, what the error names)
        for (attr, value, names) in [
            ("not_before", Some(AttrValue::s("soon")), Some("not_before")),
            ("version", None, Some("version")),
            ("state", Some(AttrValue::s("sleepy")), Some("sleepy")),
            ("probe_expires", None, None),
            ("not_before", Some(AttrValue::n("1.5")), None),
            ("version", Some(AttrValue::n(u64::MAX)), None),
        ] {
            let mut bad = good.clone();
            match value {
                Some(v) => bad.insert(attr.into(), v),
                None => bad.remove(attr),
            };
            let err = CooldownState::from_item(&bad).unwrap_err().0;
            if let Some(names) = names {
                assert!(err.contains(names), "{attr}: {err}");
            }
        }
        // Out-of-range instants are corruption, never "the deadline has passed".
        for (attr, v) in [
            ("not_before", i64::MIN),
            ("not_before", -1),
            ("not_before", 0),
            ("not_before", i64::MAX),
            ("not_before", MAX_DEADLINE_MS + 1),
            ("probe_expires", i64::MIN),
            ("probe_expires", 0),
            ("received_at", -1),
            ("updated_at", i64::MAX),
        ] {
            let mut bad = good.clone();
            bad.insert(attr.into(), AttrValue::n(v));
            let err = CooldownState::from_item(&bad).unwrap_err().0;
            assert!(err.contains(attr) && err.contains("out of range"), "{err}");
        }
        // An escalated scope may have no deadline at all.
        let mut op = good;
        op.insert("state".into(), AttrValue::s("needs_operator"));
        op.insert("not_before".into(), AttrValue::n(0));
        assert_eq!(CooldownState::from_item(&op).unwrap().not_before, 0);
    }

    #[test]
    fn verdicts() {
        let st = CooldownState {
            probe: None,
            ..sample()
        };
        assert_eq!(
            st.verdict(203_829_999),
            Verdict::Wait {
                until: 203_830_000,
                probe_holder: None
            }
        );
        assert_eq!(st.verdict(203_830_000), Verdict::Go);
        let probing = sample();
        assert_eq!(
            probing.verdict(203_830_000),
            Verdict::Wait {
                until: 203_900_000,
                probe_holder: Some("w1".into())
            }
        );
        // An expired lease no longer blocks.
        assert_eq!(probing.verdict(203_900_000), Verdict::Go);
        let op = CooldownState {
            phase: Phase::NeedsOperator,
            ..sample()
        };
        assert_eq!(op.verdict(i64::MAX), Verdict::NeedsOperator);
    }
}
