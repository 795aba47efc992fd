//! The runtime state item of one (entity, resource) and its encoding (the
//! layout is documented in `docs/runtime.md`).
//!
//! | attribute | type | meaning |
//! |---|---|---|
//! | `PK` / `SK` | S | `{ns}/RUNTIME#{entity}#{resource}` / `#STATE` |
//! | `GSI4PK` / `GSI4SK` | S | `{ns}` / the PK (a namespace purge removes it) |
//! | `kind` | S | `runtime` |
//! | `entity_id`, `resource` | S | the pair |
//! | `version` | N | incremented by every write, the condition of the next one; a new item starts at a random value below 2^53 (never 1 again after a delete: no ABA) |
//! | `updated_at` | N | epoch ms of the last write |
//! | `ttl` | N | epoch **seconds** after which nothing in the item counts any more (DynamoDB's TTL then deletes it) |
//! | `rw_{limit}` | S | a rolling window: `{window}/{head slice}/{i}:{millitokens},…` (the non-zero counters, oldest first) |
//! | `holds` | M | open reservations by token: `exp` N, `at` N, `holder` S?, `slots` SS? (the concurrency limits it holds a slot of), `cost` M? (rolling limit → `{window}/{slice}/{millitokens}` it counted) |
//! | `closed` | M | recently released or committed reservations by token: `how` S, `at` N, `exp` N |
//!
//! The Python library reads no `RUNTIME#` key (nor queries GSI1–3 for one),
//! so these items are invisible to it.

use std::collections::{BTreeMap, BTreeSet};

use zae_limiter_engine::rolling::{RollingState, RollingWindow, Window, COUNTERS};

use super::id::ReservationId;
use crate::items::keys::namespaced_item;
use crate::items::read::{self, Unreadable};
use crate::store::{AttrValue, Item, Key};

/// Sort key of every state item.
pub const SK: &str = "#STATE";
/// The `kind` attribute that marks an item as runtime state.
pub const KIND: &str = "runtime";
/// Closed reservations remembered per item (so a second release says
/// "already released" instead of "unknown"), newest first.
pub const MAX_CLOSED: usize = 128;
/// Seconds the item outlives the last thing it counts.
pub const TTL_GRACE_SECONDS: i64 = 60;
/// Attribute prefix of a rolling window's counters.
const ROLLING: &str = "rw_";

/// How far ahead of this clock another may be before a state it wrote is
/// flagged as written ahead: hosts a little apart (NTP keeps them within
/// milliseconds, a VM resumed may be seconds off) are normal; a minute is
/// not (a skewed host, a `ZAEL_NOW` rehearsal on the real table).
pub const AHEAD_TOLERANCE_MS: i64 = 60_000;

/// Whether window `w` counted in a slice that begins more than
/// [`AHEAD_TOLERANCE_MS`] after `now_ms`.
pub fn window_ahead_of(w: &RollingState, now_ms: i64) -> bool {
    w.ahead_of(now_ms.saturating_add(AHEAD_TOLERANCE_MS))
}

/// Partition key of the state of (entity, resource) in namespace `ns`.
pub fn pk(ns: &str, entity: &str, resource: &str) -> String {
    format!("{ns}/RUNTIME#{entity}#{resource}")
}

pub fn key(ns: &str, entity: &str, resource: &str) -> Key {
    Key::new(pk(ns, entity, resource), SK)
}

/// What a reservation counted in one rolling window, so commit can correct it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Counted {
    pub window: RollingWindow,
    /// The slice the cost was recorded in.
    pub slice: i64,
    /// Millitokens.
    pub cost: i128,
}

/// One open reservation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hold {
    /// Epoch ms; the hold is open while `now < expires_at`.
    pub expires_at: i64,
    pub created_at: i64,
    pub holder: Option<String>,
    /// The concurrency limits it holds a slot of.
    pub slots: BTreeSet<String>,
    /// What it counted per rolling limit.
    pub counted: BTreeMap<String, Counted>,
}

/// How a reservation was closed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Closing {
    Released,
    Committed,
}

impl Closing {
    pub fn as_str(self) -> &'static str {
        match self {
            Closing::Released => "released",
            Closing::Committed => "committed",
        }
    }

    fn parse(s: &str) -> Option<Closing> {
        match s {
            "released" => Some(Closing::Released),
            "committed" => Some(Closing::Committed),
            _ => None,
        }
    }
}

/// A reservation closed recently.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Closed {
    pub how: Closing,
    pub at: i64,
    /// Its expiry when it was closed: remembered until then.
    pub expires_at: i64,
}

/// The state of one (entity, resource).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuntimeState {
    pub entity: String,
    pub resource: String,
    /// 0 for a state not stored yet.
    pub version: u64,
    pub updated_at: i64,
    pub rolling: BTreeMap<String, RollingState>,
    /// Open reservations by token.
    pub holds: BTreeMap<String, Hold>,
    /// Recently closed reservations by token.
    pub closed: BTreeMap<String, Closed>,
}

impl RuntimeState {
    /// Nothing stored yet.
    pub fn empty(entity: &str, resource: &str) -> RuntimeState {
        RuntimeState {
            entity: entity.to_string(),
            resource: resource.to_string(),
            version: 0,
            updated_at: 0,
            rolling: BTreeMap::new(),
            holds: BTreeMap::new(),
            closed: BTreeMap::new(),
        }
    }

    /// The last instant anything in the state counts (a hold's or a closed
    /// reservation's expiry, a window's last counted use leaving it).
    pub fn last_relevant_ms(&self) -> Option<i64> {
        let holds = self.holds.values().map(|h| h.expires_at);
        let closed = self.closed.values().map(|c| c.expires_at);
        let rolling = self.rolling.values().filter_map(RollingState::all_gone_at);
        holds.chain(closed).chain(rolling).max()
    }

    /// The id of the reservation whose hold (or closed record) is `token`.
    pub fn reservation_id(&self, token: &str) -> ReservationId {
        ReservationId {
            entity: self.entity.clone(),
            resource: self.resource.clone(),
            token: token.to_string(),
        }
    }

    /// The tokens of the holds still open at `now_ms`.
    pub fn open_holds(&self, now_ms: i64) -> impl Iterator<Item = &str> {
        self.holds
            .iter()
            .filter(move |(_, h)| now_ms < h.expires_at)
            .map(|(t, _)| t.as_str())
    }

    /// Whether a clock more than [`AHEAD_TOLERANCE_MS`] ahead of `now_ms`
    /// wrote the state: its last write or a window's newest slice.
    pub fn ahead_of(&self, now_ms: i64) -> bool {
        self.updated_at > now_ms.saturating_add(AHEAD_TOLERANCE_MS)
            || self.rolling.values().any(|w| window_ahead_of(w, now_ms))
    }

    /// The item for namespace `ns`, written at `now_ms`.
    pub fn to_item(&self, ns: &str, now_ms: i64) -> Item {
        let mut item = namespaced_item(ns, key(ns, &self.entity, &self.resource));
        item.insert("kind".into(), AttrValue::s(KIND));
        item.insert("entity_id".into(), AttrValue::s(&self.entity));
        item.insert("resource".into(), AttrValue::s(&self.resource));
        item.insert("version".into(), AttrValue::n(self.version));
        item.insert("updated_at".into(), AttrValue::n(self.updated_at));
        let last = self.last_relevant_ms().unwrap_or(now_ms).max(now_ms);
        let ttl = last.div_euclid(1000) + 1 + TTL_GRACE_SECONDS;
        item.insert("ttl".into(), AttrValue::n(ttl));
        for (name, st) in &self.rolling {
            item.insert(format!("{ROLLING}{name}"), AttrValue::S(rolling_text(st)));
        }
        insert_by_token(&mut item, "holds", &self.holds, hold_value);
        insert_by_token(&mut item, "closed", &self.closed, closed_value);
        item
    }

    /// Reads a stored item strictly: anything missing or mistyped is an error
    /// (the caller reports the state as unreadable, never as empty).
    pub fn from_item(item: &Item) -> Result<RuntimeState, Unreadable> {
        let kind = read::string(item, "kind")?;
        if kind != KIND {
            return Err(format!("attribute 'kind' is '{kind}', expected '{KIND}'").into());
        }
        let mut st = RuntimeState::empty(
            &read::string(item, "entity_id")?,
            &read::string(item, "resource")?,
        );
        st.version = read::integer(item, "version")?;
        st.updated_at = read::integer(item, "updated_at")?;
        for (attr, value) in item {
            let Some(name) = attr.strip_prefix(ROLLING) else {
                continue;
            };
            let AttrValue::S(text) = value else {
                return Err(format!("attribute '{attr}' is not a string").into());
            };
            let rolling = parse_rolling(text).map_err(|e| format!("attribute '{attr}': {e}"))?;
            st.rolling.insert(name.to_string(), rolling);
        }
        st.holds = by_token(item, "holds", |token, v| {
            parse_hold(v).map_err(|e| format!("hold '{token}': {e}").into())
        })?;
        st.closed = by_token(item, "closed", parse_closed)?;
        Ok(st)
    }
}

/// Map attribute `attr` of reservations by token, left out when there are none.
fn insert_by_token<T>(
    item: &mut Item,
    attr: &str,
    by_token: &BTreeMap<String, T>,
    value: fn(&T) -> AttrValue,
) {
    if !by_token.is_empty() {
        let m = by_token
            .iter()
            .map(|(t, v)| (t.clone(), value(v)))
            .collect();
        item.insert(attr.into(), AttrValue::M(m));
    }
}

/// Map attribute `attr` read back by [`insert_by_token`]: absent is empty,
/// every key a reservation token, every value read by `parse`.
fn by_token<T>(
    item: &Item,
    attr: &str,
    parse: impl Fn(&str, &AttrValue) -> Result<T, Unreadable>,
) -> Result<BTreeMap<String, T>, Unreadable> {
    match item.get(attr) {
        None => Ok(BTreeMap::new()),
        Some(AttrValue::M(m)) => m
            .iter()
            .map(|(token, v)| {
                check_token(token)?;
                Ok((token.clone(), parse(token, v)?))
            })
            .collect(),
        Some(_) => Err(format!("attribute '{attr}' is not a map").into()),
    }
}

/// A hold's key: 16 bytes in URL-safe base64 (what [`super::id`] draws).
fn check_token(token: &str) -> Result<(), Unreadable> {
    match crate::items::base64url::decode(token) {
        Some(b) if b.len() == 16 => Ok(()),
        _ => Err(format!("hold key '{token}' is not a reservation token").into()),
    }
}

fn window_of(text: &str) -> Result<RollingWindow, Unreadable> {
    Window::parse(text)
        .and_then(|w| RollingWindow::try_from(w).ok())
        .ok_or_else(|| format!("'{text}' is not minute, hour or day").into())
}

/// `{window}/{head}/{i}:{count},…` with the non-zero counters, oldest first.
fn rolling_text(st: &RollingState) -> String {
    let counters: Vec<String> = st
        .counters()
        .iter()
        .enumerate()
        .filter(|(_, &c)| c != 0)
        .map(|(i, c)| format!("{i}:{c}"))
        .collect();
    format!("{}/{}/{}", st.window(), st.head_slice(), counters.join(","))
}

fn parse_rolling(text: &str) -> Result<RollingState, Unreadable> {
    let mut parts = text.splitn(3, '/');
    let (Some(window), Some(head), Some(list)) = (parts.next(), parts.next(), parts.next()) else {
        return Err(format!("'{text}' is not window/head/counters").into());
    };
    let window = window_of(window)?;
    let head: i64 = head
        .parse()
        .map_err(|_| format!("head slice '{head}' is not an integer"))?;
    let mut counters = [0i128; COUNTERS];
    let mut last: Option<usize> = None;
    for pair in list.split(',').filter(|p| !p.is_empty()) {
        let (i, c) = pair
            .split_once(':')
            .ok_or_else(|| format!("counter '{pair}' is not index:count"))?;
        let i: usize = i
            .parse()
            .ok()
            .filter(|i| *i < COUNTERS && last.is_none_or(|l| *i > l))
            .ok_or_else(|| format!("counter index '{i}' is out of order or range"))?;
        let c: i128 = c
            .parse()
            .ok()
            .filter(|c| *c > 0)
            .ok_or_else(|| format!("counter '{pair}' is not a positive count"))?;
        counters[i] = c;
        last = Some(i);
    }
    RollingState::from_parts(window, head, &counters).map_err(|e| e.to_string().into())
}

fn hold_value(h: &Hold) -> AttrValue {
    let mut m = BTreeMap::from([
        ("exp".to_string(), AttrValue::n(h.expires_at)),
        ("at".to_string(), AttrValue::n(h.created_at)),
    ]);
    if let Some(holder) = &h.holder {
        m.insert("holder".into(), AttrValue::s(holder));
    }
    if !h.slots.is_empty() {
        m.insert("slots".into(), AttrValue::Ss(h.slots.clone()));
    }
    if !h.counted.is_empty() {
        let cost = h
            .counted
            .iter()
            .map(|(name, c)| {
                let text = format!("{}/{}/{}", c.window, c.slice, c.cost);
                (name.clone(), AttrValue::S(text))
            })
            .collect();
        m.insert("cost".into(), AttrValue::M(cost));
    }
    AttrValue::M(m)
}

fn closed_value(c: &Closed) -> AttrValue {
    AttrValue::M(BTreeMap::from([
        ("how".to_string(), AttrValue::s(c.how.as_str())),
        ("at".to_string(), AttrValue::n(c.at)),
        ("exp".to_string(), AttrValue::n(c.expires_at)),
    ]))
}

fn parse_closed(token: &str, v: &AttrValue) -> Result<Closed, Unreadable> {
    let AttrValue::M(c) = v else {
        return Err(format!("closed '{token}' is not a map").into());
    };
    let how = read::string(c, "how")?;
    Ok(Closed {
        how: Closing::parse(&how)
            .ok_or_else(|| format!("closed '{token}': unknown how '{how}'"))?,
        at: read::integer(c, "at")?,
        expires_at: read::integer(c, "exp")?,
    })
}

fn parse_hold(v: &AttrValue) -> Result<Hold, Unreadable> {
    let AttrValue::M(m) = v else {
        return Err("not a map".into());
    };
    let holder = match m.get("holder") {
        None => None,
        Some(AttrValue::S(h)) => Some(h.clone()),
        Some(_) => return Err("holder is not a string".into()),
    };
    let slots = match m.get("slots") {
        None => BTreeSet::new(),
        Some(AttrValue::Ss(set)) => set.clone(),
        Some(_) => return Err("slots is not a string set".into()),
    };
    let mut counted = BTreeMap::new();
    match m.get("cost") {
        None => {}
        Some(AttrValue::M(costs)) => {
            for (name, v) in costs {
                let AttrValue::S(text) = v else {
                    return Err(format!("cost of '{name}' is not a string").into());
                };
                let parts: Vec<&str> = text.split('/').collect();
                let [window, slice, cost] = parts[..] else {
                    return Err(format!("cost of '{name}' is not window/slice/cost").into());
                };
                let bad = || format!("cost of '{name}' = '{text}' is not window/slice/cost");
                let c = Counted {
                    window: window_of(window)?,
                    slice: slice.parse().map_err(|_| bad())?,
                    cost: cost.parse().ok().filter(|c| *c >= 0).ok_or_else(bad)?,
                };
                counted.insert(name.clone(), c);
            }
        }
        Some(_) => return Err("cost is not a map".into()),
    }
    Ok(Hold {
        expires_at: read::integer(m, "exp")?,
        created_at: read::integer(m, "at")?,
        holder,
        slots,
        counted,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use zae_limiter_engine::rolling::RollingLimit;

    fn sample() -> RuntimeState {
        let limit = RollingLimit::new(Window::Minute, 30_000).unwrap();
        let mut rpm = limit.empty_state();
        limit.consume(&mut rpm, 3_000, 1_796_205_600_500).unwrap();
        limit.consume(&mut rpm, 1_000, 1_796_205_612_000).unwrap();
        let mut st = RuntimeState::empty("user-1", "openai/gpt-4");
        st.version = 7;
        st.updated_at = 1_796_205_612_000;
        st.rolling.insert("rpm".into(), rpm);
        st.holds.insert(
            "AAAAAAAAAAAAAAAAAAAAAA".into(),
            Hold {
                expires_at: 1_796_205_900_000,
                created_at: 1_796_205_600_000,
                holder: Some("host-1 pid 42".into()),
                slots: BTreeSet::from(["jobs".to_string()]),
                counted: BTreeMap::from([(
                    "rpm".to_string(),
                    Counted {
                        window: RollingWindow::Minute,
                        slice: 1_796_205_600,
                        cost: 3_000,
                    },
                )]),
            },
        );
        st.holds.insert(
            "BBBBBBBBBBBBBBBBBBBBBA".into(),
            Hold {
                expires_at: 1_796_205_700_000,
                created_at: 1_796_205_600_000,
                holder: None,
                slots: BTreeSet::from(["jobs".to_string()]),
                counted: BTreeMap::new(),
            },
        );
        st.closed.insert(
            "CCCCCCCCCCCCCCCCCCCCCA".into(),
            Closed {
                how: Closing::Committed,
                at: 1_796_205_610_000,
                expires_at: 1_796_205_950_000,
            },
        );
        st
    }

    /// A host a little behind the writer is normal; a minute is not.
    #[test]
    fn written_ahead_means_more_than_a_minute_ahead() {
        let st = sample();
        // Written at 612.000 s, its window's head slice is 612 s.
        for (now, ahead) in [
            (1_796_205_612_000, false),
            (1_796_205_611_900, false),
            (1_796_205_552_000, false),
            (1_796_205_551_999, true),
        ] {
            assert_eq!(st.ahead_of(now), ahead, "{now}");
        }
        assert_eq!(
            st.open_holds(1_796_205_700_000).collect::<Vec<_>>(),
            ["AAAAAAAAAAAAAAAAAAAAAA"],
            "the hold that expires at 700 s is not open then"
        );
    }

    /// `runtime show`'s JSON: use as of now, no instant in the past.
    #[test]
    fn the_shown_state_counts_as_of_now() {
        let st = sample();
        let doc = |now| {
            super::super::answer::state_json(Some(&st), "default", "user-1", "openai/gpt-4", now)
        };
        let at_612 = doc(1_796_205_612_000);
        assert_eq!(at_612["windows"][0]["used"], 4, "{at_612}");
        assert_eq!(
            at_612["windows"][0]["all_gone_at"], "2026-12-02T10:01:13Z",
            "{at_612}"
        );
        assert_eq!(at_612["holds"][1]["expired"], false, "{at_612}");
        // 61 s after the first use it has left; a minute after the last, all.
        let later = doc(1_796_205_661_000);
        assert_eq!(later["windows"][0]["used"], 1, "{later}");
        let gone = doc(1_796_205_673_000);
        assert_eq!(gone["windows"][0]["used"], 0, "{gone}");
        assert_eq!(
            gone["windows"][0]["all_gone_at"],
            serde_json::Value::Null,
            "{gone}"
        );
        assert_eq!(gone["holds"][1]["expired"], false, "{gone}");
        assert_eq!(gone["ahead_of_clock"], false, "{gone}");
    }

    #[test]
    fn round_trips_through_the_documented_layout() {
        let st = sample();
        let item = st.to_item("lum6SW9LwCI", 1_796_205_612_000);
        assert_eq!(
            item["PK"],
            AttrValue::s("lum6SW9LwCI/RUNTIME#user-1#openai/gpt-4")
        );
        assert_eq!(item["SK"], AttrValue::s("#STATE"));
        assert_eq!(item["GSI4PK"], AttrValue::s("lum6SW9LwCI"));
        assert_eq!(item["GSI4SK"], item["PK"]);
        assert!(!item
            .keys()
            .any(|k| k.starts_with("GSI1") || k.starts_with("GSI2") || k.starts_with("GSI3")));
        assert_eq!(
            item["rw_rpm"],
            AttrValue::s("minute/1796205612/48:3000,60:1000")
        );
        // The closed reservation is remembered longest: until 1_796_205_950 s.
        assert_eq!(item["ttl"], AttrValue::n(1_796_205_950 + 1 + 60));
        assert_eq!(RuntimeState::from_item(&item), Ok(st));
    }

    #[test]
    fn idle_state_expires_a_grace_after_now() {
        let st = RuntimeState::empty("u", "r");
        let item = st.to_item("ns", 10_500);
        assert_eq!(item["ttl"], AttrValue::n(10 + 1 + 60));
        assert_eq!(st.last_relevant_ms(), None);
    }

    #[test]
    fn a_damaged_item_is_an_error_not_an_empty_state() {
        let good = sample().to_item("n", 0);
        let damage: Vec<(&str, Option<AttrValue>)> = vec![
            ("version", None),
            ("version", Some(AttrValue::s("7"))),
            ("kind", Some(AttrValue::s("cooldown"))),
            ("rw_rpm", Some(AttrValue::s("month/1/0:1"))),
            ("rw_rpm", Some(AttrValue::s("minute/x/0:1"))),
            ("rw_rpm", Some(AttrValue::s("minute/1/61:1"))),
            ("rw_rpm", Some(AttrValue::s("minute/1/5:1,5:2"))),
            ("rw_rpm", Some(AttrValue::s("minute/1/5:-1"))),
            ("rw_rpm", Some(AttrValue::n(3))),
            ("holds", Some(AttrValue::s("x"))),
            (
                "closed",
                Some(AttrValue::M(BTreeMap::from([(
                    "t".to_string(),
                    AttrValue::M(BTreeMap::from([("how".to_string(), AttrValue::s("lost"))])),
                )]))),
            ),
        ];
        for (attr, value) in damage {
            let mut bad = good.clone();
            match &value {
                Some(v) => bad.insert(attr.to_string(), v.clone()),
                None => bad.remove(attr),
            };
            assert!(
                RuntimeState::from_item(&bad).is_err(),
                "{attr} = {value:?} was accepted"
            );
        }
        let AttrValue::M(mut holds) = good["holds"].clone() else {
            panic!()
        };
        let AttrValue::M(mut h) = holds["AAAAAAAAAAAAAAAAAAAAAA"].clone() else {
            panic!()
        };
        h.insert(
            "cost".into(),
            AttrValue::M(BTreeMap::from([(
                "rpm".to_string(),
                AttrValue::s("minute/1"),
            )])),
        );
        holds.insert("AAAAAAAAAAAAAAAAAAAAAA".into(), AttrValue::M(h));
        let mut bad = good;
        bad.insert("holds".into(), AttrValue::M(holds));
        assert!(RuntimeState::from_item(&bad)
            .unwrap_err()
            .0
            .contains("window/slice/cost"));
    }
}
