//! Attribute-level detail under each planned change: what exactly a write would
//! change in a level's config item (`rpm.capacity: 500 → 600`, schedule entries
//! added and removed). Computed from the two items — the live one and the one
//! apply would write — so it shows precisely what the store would see.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::display::numbers::{python_g, thousands};
use crate::items::attrs::{self, Field, LevelAttrs, Prefix};
use crate::plan::diff::normalise_number;
use crate::store::{AttrValue, Item};

/// One line of detail.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Detail {
    /// `+` added, `-` removed, `~` changed, `!` the item cannot be built.
    pub op: &'static str,
    /// e.g. `rpm.capacity`, `rpm.schedule`, `rpm`, `disabled`.
    pub path: String,
    /// The value before (absent for an addition).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub old: Option<String>,
    /// The value after (absent for a removal).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub new: Option<String>,
}

impl Detail {
    fn change(path: String, old: String, new: String) -> Self {
        Detail {
            op: "~",
            path,
            old: Some(old),
            new: Some(new),
        }
    }
    fn add(path: String, new: String) -> Self {
        Detail {
            op: "+",
            path,
            old: None,
            new: Some(new),
        }
    }
    fn remove(path: String, old: String) -> Self {
        Detail {
            op: "-",
            path,
            old: Some(old),
            new: None,
        }
    }

    /// A level whose item cannot be built (`!`): apply will report it as an error.
    pub fn error(message: String) -> Self {
        Detail {
            op: "!",
            path: "error".into(),
            old: None,
            new: Some(message),
        }
    }

    /// The text form, without indentation.
    pub fn render(&self) -> String {
        match (self.op, &self.old, &self.new) {
            ("!", _, Some(n)) => format!("cannot build the item: {n}"),
            ("~", Some(o), Some(n)) => format!("{}: {o} → {n}", self.path),
            ("+", _, Some(n)) => format!("{} + {n}", self.path),
            (_, Some(o), _) => format!("{} - {o}", self.path),
            _ => self.path.clone(),
        }
    }
}

/// One limit as stored, for display: which kind it is, its scalar fields by
/// the manifest's names, and its schedules rendered.
#[derive(Debug, PartialEq)]
struct LimitView {
    prefix: Prefix,
    fields: BTreeMap<&'static str, String>,
    schedule: Vec<String>,
    reset_schedule: Vec<String>,
}

impl LimitView {
    /// The scalar fields of the limit's kind, in display order (`soft` last).
    fn labels(&self) -> impl Iterator<Item = &'static str> + '_ {
        self.prefix
            .fields()
            .iter()
            .filter(|f| !matches!(f, Field::Schedule | Field::ResetSchedule))
            .map(|f| f.manifest_name())
    }

    fn summary(&self) -> String {
        let mut parts: Vec<String> = self
            .labels()
            .filter(|l| *l != "soft")
            .filter_map(|l| self.fields.get(l).map(|v| format!("{l} {v}")))
            .collect();
        if self.fields.get("soft").map(String::as_str) == Some("true") {
            parts.push("soft".into());
        }
        parts.join(", ")
    }
}

/// The declared limits of an item by (name, prefix). Limits are discovered by
/// their declaring attribute, as every reader does; `l_` and `w_` share one
/// view per name (a bucket that gains `reset_after` shows as a field change).
fn limits_of(item: &Item) -> BTreeMap<(String, Prefix), LimitView> {
    let attrs = LevelAttrs::of(item);
    let tz = attrs
        .rest
        .get(attrs::SCHED_TZ)
        .and_then(|v| v.as_s())
        .unwrap_or("UTC")
        .to_string();
    let mut out: BTreeMap<(String, Prefix), LimitView> = BTreeMap::new();
    for (name, prefix, fields) in attrs.declared() {
        let prefix = if prefix.is_bucket() {
            Prefix::Limit
        } else {
            prefix
        };
        let view = out
            .entry((name.to_string(), prefix))
            .or_insert_with(|| LimitView {
                prefix,
                fields: BTreeMap::new(),
                schedule: Vec::new(),
                reset_schedule: Vec::new(),
            });
        for (field, value) in fields {
            match field {
                Field::Schedule => view.schedule = entries(value, &tz, true),
                Field::ResetSchedule => view.reset_schedule = entries(value, &tz, false),
                f => {
                    view.fields.insert(f.manifest_name(), scalar(value));
                }
            }
        }
        view.fields.entry("soft").or_insert_with(|| "false".into());
    }
    out
}

fn scalar(v: &AttrValue) -> String {
    match v {
        AttrValue::N(n) => normalise_number(n),
        AttrValue::S(s) => s.clone(),
        AttrValue::Bool(b) => b.to_string(),
        AttrValue::Null => "null".into(),
        other => format!("{other:?}"),
    }
}

/// Renders each entry of a compact schedule as `"<cron>" <tz>`, plus
/// `→ <effect>` for parameter windows. Undecodable text is shown raw.
fn entries(v: &AttrValue, tz: &str, parameter: bool) -> Vec<String> {
    let Some(s) = v.as_s() else {
        return vec![scalar(v)];
    };
    let body = s.trim_start_matches(|c: char| c.is_ascii_digit());
    if body.is_empty() {
        return vec![format!("(stored as {s:?})")];
    }
    body.split(';')
        .map(|entry| {
            let cron = zae_limiter_engine::render::to_cron(&format!("1{entry}"))
                .unwrap_or_else(|_| entry.to_string());
            let mut text = format!("\"{cron}\" {tz}");
            if parameter {
                text.push_str(" → ");
                text.push_str(&effect(entry));
            }
            text
        })
        .collect()
}

/// The modifier of a compact entry as `get-limits` words it.
fn effect(entry: &str) -> String {
    let tag = |t: char| -> Option<u128> {
        let i = entry.find(t)?;
        let digits: String = entry[i + 1..]
            .chars()
            .take_while(char::is_ascii_digit)
            .collect();
        digits.parse().ok()
    };
    if let Some(permille) = tag('s') {
        return format!("scale {}%", python_g(permille as f64 / 10.0));
    }
    let mut parts = Vec::new();
    for (t, name) in [
        ('c', "capacity"),
        ('a', "refill_amount"),
        ('p', "refill_period_seconds"),
    ] {
        if let Some(v) = tag(t) {
            parts.push(format!("{name} {}", thousands(v)));
        }
    }
    parts.join(", ")
}

fn flag(item: Option<&Item>, name: &str, absent: &str) -> String {
    match item.and_then(|i| i.get(name)) {
        None => absent.to_string(),
        Some(v) => scalar(v),
    }
}

/// What changes when `live` (None = absent) is replaced by `desired` (None =
/// deleted): limits by name (a limit that changes kind is removed and added),
/// then the level's flags.
pub fn details(live: Option<&Item>, desired: Option<&Item>) -> Vec<Detail> {
    let empty = Item::new();
    let old = limits_of(live.unwrap_or(&empty));
    let new = limits_of(desired.unwrap_or(&empty));
    let mut out = Vec::new();
    let mut keys: Vec<&(String, Prefix)> = old.keys().chain(new.keys()).collect();
    keys.sort();
    keys.dedup();
    for key in keys {
        let name = &key.0;
        match (old.get(key), new.get(key)) {
            (None, Some(n)) => {
                out.push(Detail::add(name.clone(), n.summary()));
                list_diff(&mut out, name, "schedule", &[], &n.schedule);
                list_diff(&mut out, name, "reset_schedule", &[], &n.reset_schedule);
            }
            (Some(o), None) => {
                out.push(Detail::remove(name.clone(), o.summary()));
            }
            (Some(o), Some(n)) => {
                let mut labels: Vec<&str> = n.labels().collect();
                labels.sort_unstable();
                for field in labels {
                    let get = |v: &LimitView| {
                        v.fields
                            .get(field)
                            .cloned()
                            .unwrap_or_else(|| "(none)".into())
                    };
                    let (a, b) = (get(o), get(n));
                    if a != b {
                        out.push(Detail::change(format!("{name}.{field}"), a, b));
                    }
                }
                list_diff(&mut out, name, "schedule", &o.schedule, &n.schedule);
                list_diff(
                    &mut out,
                    name,
                    "reset_schedule",
                    &o.reset_schedule,
                    &n.reset_schedule,
                );
            }
            (None, None) => {}
        }
    }
    for (name, absent) in attrs::FLAGS
        .into_iter()
        .zip(["(inherit)", "(inherit)", "(unset)"])
    {
        let a = flag(live, name, absent);
        let b = flag(desired, name, absent);
        if a != b && desired.is_some() {
            out.push(Detail::change(name.to_string(), a, b));
        }
    }
    out
}

/// Entries removed, then entries added; a pure reordering (which matters: the
/// first matching window wins) is reported as one line.
fn list_diff(out: &mut Vec<Detail>, limit: &str, what: &str, old: &[String], new: &[String]) {
    if old == new {
        return;
    }
    let path = format!("{limit}.{what}");
    let mut remaining: Vec<&String> = new.iter().collect();
    let mut removed = Vec::new();
    for e in old {
        match remaining.iter().position(|n| *n == e) {
            Some(i) => {
                remaining.remove(i);
            }
            None => removed.push(e),
        }
    }
    if removed.is_empty() && remaining.is_empty() {
        out.push(Detail::change(
            path,
            "order as before".into(),
            "entries reordered".into(),
        ));
        return;
    }
    for e in removed {
        out.push(Detail::remove(path.clone(), e.clone()));
    }
    for e in remaining {
        out.push(Detail::add(path.clone(), e.clone()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::store::item::from_pairs as item;

    fn lines(d: &[Detail]) -> Vec<String> {
        d.iter().map(Detail::render).collect()
    }

    #[test]
    fn a_capacity_change_is_one_line() {
        let live = item(&[
            ("l_rpm_cp", AttrValue::n(500)),
            ("l_rpm_ra", AttrValue::n(500)),
            ("l_rpm_rp", AttrValue::n(60)),
            ("config_version", AttrValue::n(1)),
        ]);
        let mut desired = live.clone();
        desired.remove("config_version");
        desired.insert("l_rpm_cp".into(), AttrValue::n(600));
        assert_eq!(
            lines(&details(Some(&live), Some(&desired))),
            ["rpm.capacity: 500 → 600"]
        );
    }

    #[test]
    fn schedules_show_entries_added_and_removed_with_their_effect() {
        let live = item(&[
            ("l_rpm_cp", AttrValue::n(1000)),
            ("l_rpm_ra", AttrValue::n(1000)),
        ]);
        let mut desired = live.clone();
        desired.insert(
            "l_rpm_sched".into(),
            AttrValue::s("1h9-17w1-5s500;w6,7c2000a2000p60"),
        );
        desired.insert("sched_tz".into(), AttrValue::s("America/New_York"));
        assert_eq!(
            lines(&details(Some(&live), Some(&desired))),
            [
                "rpm.schedule + \"* 9-17 * * MON-FRI\" America/New_York → scale 50%",
                "rpm.schedule + \"* * * * SAT,SUN\" America/New_York → capacity 2,000, refill_amount 2,000, refill_period_seconds 60",
            ]
        );
        assert_eq!(
            lines(&details(Some(&desired), Some(&live))),
            [
                "rpm.schedule - \"* 9-17 * * MON-FRI\" America/New_York → scale 50%",
                "rpm.schedule - \"* * * * SAT,SUN\" America/New_York → capacity 2,000, refill_amount 2,000, refill_period_seconds 60",
            ]
        );
    }

    #[test]
    fn whole_limits_and_flags_are_summarised() {
        let desired = item(&[
            ("w_s_cp", AttrValue::n(500)),
            ("w_s_ra", AttrValue::n(0)),
            ("w_s_rp", AttrValue::n(60)),
            ("w_s_rsa", AttrValue::n(18000)),
            ("w_s_soft", AttrValue::Bool(true)),
            ("l_q_cp", AttrValue::n(10)),
            ("l_q_rsched", AttrValue::s("1m0h0")),
            ("disabled", AttrValue::s("bypass")),
        ]);
        assert_eq!(
            lines(&details(None, Some(&desired))),
            [
                "q + capacity 10",
                "q.reset_schedule + \"0 0 * * *\" UTC",
                "s + capacity 500, refill_amount 0, refill_period 60, reset_after_seconds 18000, soft",
                "disabled: (inherit) → bypass",
            ]
        );
        assert_eq!(lines(&details(Some(&desired), None))[0], "q - capacity 10");
    }

    #[test]
    fn reordered_windows_are_reported() {
        let a = item(&[
            ("l_r_cp", AttrValue::n(1)),
            ("l_r_sched", AttrValue::s("1h1s500;h2s500")),
        ]);
        let b = item(&[
            ("l_r_cp", AttrValue::n(1)),
            ("l_r_sched", AttrValue::s("1h2s500;h1s500")),
        ]);
        assert_eq!(
            lines(&details(Some(&a), Some(&b))),
            ["r.schedule: order as before → entries reordered"]
        );
    }

    fn rendered(d: &[Detail]) -> Vec<String> {
        d.iter()
            .map(|d| format!("{} {}", d.op, d.render()))
            .collect()
    }

    #[test]
    fn plan_detail_names_the_fields_of_the_new_kinds() {
        let a = item(&[
            ("r_rpd_amt", AttrValue::n(10)),
            ("r_rpd_win", AttrValue::s("day")),
            ("c_jobs_slots", AttrValue::n(3)),
            ("c_jobs_ttl", AttrValue::n(300)),
        ]);
        let b = item(&[
            ("r_rpd_amt", AttrValue::n(10)),
            ("r_rpd_win", AttrValue::s("hour")),
            ("r_rpd_soft", AttrValue::Bool(true)),
            ("c_jobs_slots", AttrValue::n(4)),
            ("c_jobs_ttl", AttrValue::n(60)),
        ]);
        assert_eq!(
            rendered(&details(Some(&a), Some(&b))),
            [
                "~ jobs.concurrency: 3 → 4",
                "~ jobs.hold_ttl_seconds: 300 → 60",
                "~ rpd.soft: false → true",
                "~ rpd.window: day → hour",
            ]
        );
        assert_eq!(
            rendered(&details(None, Some(&b))),
            [
                "+ jobs + concurrency 4, hold_ttl_seconds 60",
                "+ rpd + capacity 10, window hour, soft"
            ]
        );
        assert_eq!(
            rendered(&details(Some(&a), None)),
            [
                "- jobs - concurrency 3, hold_ttl_seconds 300",
                "- rpd - capacity 10, window day"
            ]
        );
        assert!(details(Some(&a), Some(&a)).is_empty());
    }

    #[test]
    fn a_change_of_kind_removes_then_adds_and_flags_stay_last() {
        let bucket = item(&[
            ("l_a_cp", AttrValue::n(5)),
            ("l_a_ra", AttrValue::n(5)),
            ("l_b_cp", AttrValue::n(1)),
            ("cascade", AttrValue::Bool(true)),
        ]);
        let rolling = item(&[
            ("r_a_amt", AttrValue::n(5)),
            ("r_a_win", AttrValue::s("day")),
            ("l_b_cp", AttrValue::n(2)),
        ]);
        assert_eq!(
            rendered(&details(Some(&bucket), Some(&rolling))),
            [
                "- a - capacity 5, refill_amount 5",
                "+ a + capacity 5, window day",
                "~ b.capacity: 1 → 2",
                "~ cascade: true → (inherit)",
            ]
        );
        assert_eq!(
            rendered(&details(Some(&rolling), Some(&bucket)))[..2],
            [
                "+ a + capacity 5, refill_amount 5",
                "- a - capacity 5, window day",
            ]
        );
    }
}
