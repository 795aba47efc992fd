//! The keys that make a limit something other than a token bucket (issue #7):
//! `window` + `rolling: true` (a rolling window, amount = `capacity`) and
//! `concurrency` + `hold_ttl_seconds` (a concurrency limit). Each kind is
//! checked against the bucket keys it cannot be combined with, so a limit
//! reads as exactly one thing; docs/manifest.md explains every choice.

pub use zae_limiter_engine::concurrency::MAX_SLOTS;
use zae_limiter_engine::concurrency::{
    DEFAULT_HOLD_TTL_SECONDS, MAX_HOLD_TTL_SECONDS, MIN_HOLD_TTL_SECONDS,
};
use zae_limiter_engine::rolling::{RollingError, RollingWindow, Window};

use super::fields::{join, Fields};
use super::model::LimitKind;
use super::report::Reporter;
use super::values::{boolean, describe, string, whole, Unit};
use super::yaml::Node;

/// What the kind keys of one limit declare.
pub enum Declared {
    /// None of the kind keys (or only `rolling: false`): the bucket rules apply.
    Bucket,
    /// A rolling window; `None` when its keys were wrong (errors reported).
    Rolling(Option<RollingWindow>),
    /// A concurrency limit: slots and hold TTL; `None` when wrong (errors reported).
    Concurrency(Option<(u64, u64)>),
}

/// Bucket keys a rolling window refuses, with why.
pub(crate) const NOT_ON_ROLLING: [(&str, &str); 6] = [
    ("burst", "a rolling window's amount is `capacity`"),
    (
        "refill_amount",
        "use ages out of a rolling window, nothing refills",
    ),
    (
        "refill_period",
        "use ages out of a rolling window, nothing refills",
    ),
    (
        "schedule",
        "a rolling window's amount is fixed (schedules scale token buckets and quotas)",
    ),
    (
        "reset_schedule",
        "a rolling window never resets, use ages out of it",
    ),
    (
        "reset_after_seconds",
        "a rolling window never resets, use ages out of it",
    ),
];

/// Keys a concurrency limit refuses, with why.
pub(crate) const NOT_ON_CONCURRENCY: [(&str, &str); 9] = [
    (
        "capacity",
        "its amount is `concurrency`, the number of slots",
    ),
    ("burst", "its amount is `concurrency`, the number of slots"),
    (
        "refill_amount",
        "a slot comes back when its hold ends, nothing refills",
    ),
    (
        "refill_period",
        "a slot comes back when its hold ends, nothing refills",
    ),
    ("schedule", "the number of slots is fixed"),
    (
        "reset_schedule",
        "holds end when committed, released or expired; there is nothing to reset",
    ),
    (
        "reset_after_seconds",
        "holds end when committed, released or expired; there is nothing to reset",
    ),
    ("window", "it has no window"),
    ("rolling", "it has no window"),
];

/// Reads and checks the kind keys of limit `name` at `path`.
pub fn declared(r: &mut Reporter, f: &Fields<'_>, path: &str, name: &str) -> Declared {
    if f.has("concurrency") {
        return Declared::Concurrency(concurrency(r, f, path, name));
    }
    if let Some(k) = f.key("hold_ttl_seconds") {
        r.error(
            k,
            &join(path, "hold_ttl_seconds"),
            format!("`hold_ttl_seconds` only applies to a concurrency limit, and limit `{name}` has no `concurrency`"),
            Some("add `concurrency: N` (the number of slots) to cap work in flight, or remove `hold_ttl_seconds`".to_string()),
        );
    }
    let rolling = f.get("rolling").map(|n| {
        let p = join(path, "rolling");
        boolean(r, n, &p, "rolling")
    });
    let window = f.get("window").map(|n| window(r, n, &join(path, "window")));
    let declared = match (window, rolling) {
        (None, None) | (None, Some(Some(false))) => Declared::Bucket,
        (None, Some(None)) => Declared::Rolling(None),
        (None, Some(Some(true))) => {
            if let Some(k) = f.key("rolling") {
                r.error(
                    k,
                    &join(path, "rolling"),
                    format!("limit `{name}` is rolling but has no `window`"),
                    Some("add `window: minute`, `window: hour` or `window: day`: `capacity` is then the most allowed in any such span".to_string()),
                );
            }
            Declared::Rolling(None)
        }
        (Some(w), rolling) => {
            match w {
                Some(w) => match RollingWindow::try_from(w) {
                    Ok(rw) if rolling == Some(Some(true)) => Declared::Rolling(Some(rw)),
                    Ok(rw) => {
                        // An unreadable `rolling` value is reported already.
                        if matches!(rolling, None | Some(Some(false))) {
                            window_needs_rolling(r, f, path, name, rw);
                        }
                        Declared::Rolling(None)
                    }
                    Err(e) => {
                        not_rollable(r, f, path, w, e);
                        Declared::Rolling(None)
                    }
                },
                None => Declared::Rolling(None),
            }
        }
    };
    if let Declared::Rolling(_) = declared {
        refuse(r, f, path, &NOT_ON_ROLLING, |key, why| {
            (
                format!("`{key}` cannot be used on a rolling window: {why}"),
                format!("remove `{key}`, or remove `window` and `rolling` to make `{name}` a token bucket or quota"),
            )
        });
    }
    declared
}

/// `window`: one of the six window names; `None` (reported) otherwise.
fn window(r: &mut Reporter, n: &Node, path: &str) -> Option<Window> {
    let help = "a rolling window counts the last `minute`, `hour` or `day` at every check, e.g. `window: day`";
    let text = match n.scalar() {
        Some(_) => string(r, n, path, "window")?,
        None => {
            r.error(
                n,
                path,
                format!("window must be minute, hour or day, got {}", describe(n)),
                Some(help.to_string()),
            );
            return None;
        }
    };
    if let Some(w) = Window::parse(text) {
        return Some(w);
    }
    let lower = text.trim().to_ascii_lowercase();
    let fix = match Window::parse(&lower) {
        Some(w) => format!("write `{w}` (lower case)"),
        None => help.to_string(),
    };
    r.error(
        n,
        path,
        format!("window must be minute, hour or day, got '{text}'"),
        Some(fix),
    );
    None
}

fn window_needs_rolling(
    r: &mut Reporter,
    f: &Fields<'_>,
    path: &str,
    name: &str,
    w: RollingWindow,
) {
    let Some(k) = f.key("window") else { return };
    let reset = match w {
        RollingWindow::Minute => "\"* * * * *\"",
        RollingWindow::Hour => "\"0 * * * *\"",
        RollingWindow::Day => "\"0 0 * * *\"",
    };
    r.error(
        k,
        &join(path, "window"),
        format!("limit `{name}` has `window: {w}` but is not rolling; a `window` is only for rolling windows"),
        Some(format!(
            "add `rolling: true` to count the last {w} at every check; for a window that resets at fixed times use a calendar quota instead: `reset_schedule: [{{cron: {reset}}}]`"
        )),
    );
}

fn not_rollable(r: &mut Reporter, f: &Fields<'_>, path: &str, w: Window, e: RollingError) {
    let Some(n) = f.get("window") else { return };
    // `window: concurrent` is how the API this feature comes from spells a
    // concurrency limit: say how we spell it, not only that it cannot roll.
    let message = match w {
        Window::Concurrent => "`window: concurrent` is not a window here: a concurrency limit is written `concurrency: N` (the number of requests in flight at once)".to_string(),
        _ => e.to_string(),
    };
    let help = match w {
        Window::Month => "for a monthly allowance use a calendar quota: `reset_schedule: [{cron: \"0 0 1 * *\"}]` (resets on the 1st)".to_string(),
        Window::Concurrent => "replace `window: concurrent` and `capacity: N` (and `rolling`) with `concurrency: N`; a hold that is never released expires after `hold_ttl_seconds`".to_string(),
        _ => "remove `window` and `rolling`, or use `window: minute`, `hour` or `day`".to_string(),
    };
    r.error(n, &join(path, "window"), message, Some(help));
}

fn concurrency(r: &mut Reporter, f: &Fields<'_>, path: &str, name: &str) -> Option<(u64, u64)> {
    let before = r.diags.len();
    let slots = f.get("concurrency").and_then(|n| {
        let p = join(path, "concurrency");
        let at = r.diags.len();
        let v = whole(r, n, &p, "concurrency", 1, MAX_SLOTS, Unit::Tokens);
        // `whole` words its range in tokens; a slot count is not tokens.
        let range = format!("concurrency is in whole tokens, from 1 to {MAX_SLOTS}");
        for d in &mut r.diags[at..] {
            if d.help.as_deref() == Some(range.as_str()) {
                d.help = Some(format!(
                    "concurrency is the number of slots (how many may be in flight at once), a whole number from 1 to {MAX_SLOTS}"
                ));
            }
        }
        v
    });
    let ttl = match f.get("hold_ttl_seconds") {
        None => Some(DEFAULT_HOLD_TTL_SECONDS as u64),
        Some(n) => whole(
            r,
            n,
            &join(path, "hold_ttl_seconds"),
            "hold_ttl_seconds",
            MIN_HOLD_TTL_SECONDS as u64,
            MAX_HOLD_TTL_SECONDS as u64,
            Unit::Seconds,
        ),
    };
    refuse(r, f, path, &NOT_ON_CONCURRENCY, |key, why| {
        (
            format!("`{key}` cannot be used with `concurrency`: a concurrency limit counts open holds, so {why}"),
            format!("remove `{key}`, or remove `concurrency` (and `hold_ttl_seconds`) to make `{name}` a limit that counts use"),
        )
    });
    if r.errors_since(before) {
        return None;
    }
    Some((slots?, ttl?))
}

/// Reports every key of `refused` written in the limit, at its key.
fn refuse(
    r: &mut Reporter,
    f: &Fields<'_>,
    path: &str,
    refused: &[(&str, &str)],
    words: impl Fn(&str, &str) -> (String, String),
) {
    for (key, why) in refused {
        if let Some(k) = f.key(key) {
            let (message, help) = words(key, why);
            r.error(k, &join(path, key), message, Some(help));
        }
    }
}

/// The normalised kind of a declared limit (see [`Declared`]).
pub fn kind_of(d: &Declared) -> Option<LimitKind> {
    match d {
        Declared::Bucket => Some(LimitKind::Bucket),
        Declared::Rolling(w) => w.map(|window| LimitKind::Rolling { window }),
        Declared::Concurrency(c) => {
            c.map(|(_, hold_ttl_seconds)| LimitKind::Concurrency { hold_ttl_seconds })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::load::load_str;
    use super::super::model::{LimitKind, LimitSpec};
    use super::super::normalize::{normalised_json, python_dumps_sorted};
    use super::*;

    fn limit(body: &str) -> Result<LimitSpec, Vec<(String, String, Option<String>)>> {
        let text = format!("namespace: d\nresources:\n  r:\n    limits:\n      x: {body}\n");
        match load_str("m.yaml", &text) {
            Ok(l) => Ok(l.manifest.resources["r"].limits["x"].clone()),
            Err(d) => Err(d.into_iter().map(|d| (d.path, d.message, d.help)).collect()),
        }
    }

    fn errors(body: &str) -> Vec<(String, String)> {
        match limit(body) {
            Ok(l) => panic!("{body} was accepted as {l:?}"),
            Err(d) => d.into_iter().map(|(p, m, _)| (p, m)).collect(),
        }
    }

    fn paths(body: &str) -> Vec<String> {
        errors(body).into_iter().map(|(p, _)| p).collect()
    }

    #[test]
    fn rolling_windows_parse_with_capacity_as_the_amount() {
        for (w, window) in [
            ("minute", RollingWindow::Minute),
            ("hour", RollingWindow::Hour),
            ("day", RollingWindow::Day),
        ] {
            let l = limit(&format!("{{capacity: 100, window: {w}, rolling: true}}")).unwrap();
            assert_eq!(l.kind, LimitKind::Rolling { window });
            assert_eq!((l.capacity, l.refill_amount, l.soft), (100, 0, false));
            assert!(l.schedule.is_empty() && !l.resets());
        }
        let l = limit("{capacity: 5, window: day, rolling: true, soft: true}").unwrap();
        assert!(l.soft, "soft combines with a rolling window");
    }

    #[test]
    fn concurrency_limits_parse_with_the_default_ttl() {
        let l = limit("{concurrency: 3}").unwrap();
        assert_eq!(
            l.kind,
            LimitKind::Concurrency {
                hold_ttl_seconds: 300
            }
        );
        assert_eq!(l.capacity, 3);
        let l = limit("{concurrency: 1000, hold_ttl_seconds: 3600, soft: true}").unwrap();
        assert_eq!(
            l.kind,
            LimitKind::Concurrency {
                hold_ttl_seconds: 3600
            }
        );
        assert!(l.soft);
        let l = limit("{concurrency: 1, hold_ttl_seconds: 1}").unwrap();
        assert_eq!(
            l.kind,
            LimitKind::Concurrency {
                hold_ttl_seconds: 1
            }
        );
    }

    #[test]
    fn rolling_false_alone_is_a_plain_bucket() {
        let l = limit("{capacity: 10, rolling: false}").unwrap();
        assert_eq!(l.kind, LimitKind::Bucket);
        assert_eq!(l.refill_amount, 10);
    }

    #[test]
    fn only_minute_hour_and_day_roll() {
        for w in ["month", "total"] {
            let body = format!("{{capacity: 10, window: {w}, rolling: true}}");
            let m = one_error(&body, "window");
            assert!(
                m.contains(&format!("a {w} window cannot be rolling")),
                "{m}"
            );
        }
        // The reference API's spelling of a concurrency limit: told ours.
        for text in [
            "{capacity: 10, window: concurrent, rolling: true}",
            "{capacity: 10, window: concurrent}",
        ] {
            let m = one_error(text, "window");
            assert!(
                m.contains("a concurrency limit is written `concurrency: N`"),
                "{m}"
            );
        }
        let e = errors("{capacity: 10, window: Day, rolling: true}");
        assert_eq!(e[0].1, "window must be minute, hour or day, got 'Day'");
        assert_eq!(
            paths("{capacity: 10, window: 7, rolling: true}"),
            ["resources.r.limits.x.window"]
        );
    }

    #[test]
    fn rolling_and_window_need_each_other() {
        let e = errors("{capacity: 10, rolling: true}");
        assert_eq!(
            e,
            [(
                "resources.r.limits.x.rolling".to_string(),
                "limit `x` is rolling but has no `window`".to_string()
            )]
        );
        for body in [
            "{capacity: 10, window: day}",
            "{capacity: 10, window: day, rolling: false}",
        ] {
            let m = one_error(body, "window");
            assert!(m.contains("is not rolling"), "{m}");
        }
        let e = errors("{capacity: 10, window: day, rolling: yes}");
        assert_eq!(e.len(), 1, "only the YAML 1.1 boolean: {e:?}");
    }

    /// Limit `body` has exactly one error, at its key `field`; its message.
    fn one_error(body: &str, field: &str) -> String {
        let e = errors(body);
        assert_eq!(e.len(), 1, "{body}: {e:?}");
        assert_eq!(e[0].0, format!("resources.r.limits.x.{field}"), "{body}");
        e[0].1.clone()
    }

    /// Limit `body` has one error: at `key`'s name (`key` is `name: value`),
    /// saying "`name` <why>".
    fn refuses_only(body: &str, key: &str, why: &str) {
        let k = key.split(':').next().unwrap_or_default();
        let m = one_error(body, k);
        assert!(m.starts_with(&format!("`{k}` {why}")), "{m}");
    }

    #[test]
    fn a_rolling_window_refuses_the_bucket_keys() {
        for key in [
            "burst: 5",
            "refill_amount: 5",
            "refill_period: 5",
            "reset_after_seconds: 60",
            "schedule: [{cron: \"* 9 * * *\", scale: 2}]",
            "reset_schedule: [{cron: \"0 0 * * *\"}]",
        ] {
            refuses_only(
                &format!("{{capacity: 10, window: hour, rolling: true, {key}}}"),
                key,
                "cannot be used on a rolling window",
            );
        }
        let e = errors("{window: hour, rolling: true}");
        assert_eq!(e[0].1, "limit `x` has no `capacity`");
    }

    #[test]
    fn a_concurrency_limit_refuses_everything_that_counts_use() {
        for key in [
            "capacity: 5",
            "burst: 5",
            "refill_amount: 5",
            "refill_period: 5",
            "reset_after_seconds: 60",
            "window: day",
            "rolling: true",
            "schedule: []",
            "reset_schedule: []",
        ] {
            refuses_only(
                &format!("{{concurrency: 3, {key}}}"),
                key,
                "cannot be used with `concurrency`",
            );
        }
        let e = errors("{concurrency: 3, capacity: 5, window: day, rolling: true}");
        assert_eq!(e.len(), 3, "every refused key is reported: {e:?}");
    }

    #[test]
    fn slots_and_ttl_are_bounded() {
        for (body, path) in [
            ("{concurrency: 0}", "concurrency"),
            ("{concurrency: 1001}", "concurrency"),
            ("{concurrency: 2.5}", "concurrency"),
            ("{concurrency: true}", "concurrency"),
            ("{concurrency: 3, hold_ttl_seconds: 0}", "hold_ttl_seconds"),
            (
                "{concurrency: 3, hold_ttl_seconds: 3601}",
                "hold_ttl_seconds",
            ),
            ("{capacity: 3, hold_ttl_seconds: 60}", "hold_ttl_seconds"),
        ] {
            assert_eq!(
                paths(body),
                [format!("resources.r.limits.x.{path}")],
                "{body}"
            );
        }
        let Err(d) = limit("{concurrency: 0}") else {
            panic!()
        };
        assert_eq!(
            d[0].2.as_deref(),
            Some("concurrency is the number of slots (how many may be in flight at once), a whole number from 1 to 1000")
        );
    }

    #[test]
    fn normalised_form_names_the_kind_with_its_own_keys() {
        let text = "namespace: d\nsystem:\n  limits:\n    rpm: {capacity: 10}\n    rpd: {capacity: 1000, window: day, rolling: true, soft: true}\n    jobs: {concurrency: 3}\n";
        let m = load_str("m.yaml", text).unwrap().manifest;
        assert_eq!(
            python_dumps_sorted(&normalised_json(&m)),
            r#"{"namespace": "d", "system": {"limits": {"jobs": {"concurrency": 3, "hold_ttl_seconds": 300}, "rpd": {"capacity": 1000, "rolling": true, "soft": true, "window": "day"}, "rpm": {"capacity": 10, "refill_amount": 10, "refill_period": 60}}}}"#
        );
    }

    /// Each limit key with a valid value of its own.
    const KEYS: [&str; 12] = [
        "capacity: 10",
        "burst: 20",
        "refill_amount: 5",
        "refill_period: 30",
        "schedule: [{cron: \"* 9 * * *\", scale: 2}]",
        "reset_schedule: [{cron: \"0 0 * * *\"}]",
        "reset_after_seconds: 60",
        "soft: true",
        "window: hour",
        "rolling: true",
        "concurrency: 3",
        "hold_ttl_seconds: 60",
    ];

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(256))]
        /// Any combination of limit keys is either one kind, as its kind keys
        /// say, or refused with every error at one of the written keys.
        #[test]
        fn any_combination_of_keys_is_one_kind_or_located_errors(
            picked in proptest::collection::btree_set(0..KEYS.len(), 0..=KEYS.len())
        ) {
            let body: Vec<&str> = picked.iter().map(|i| KEYS[*i]).collect();
            let has = |k: &str| body.iter().any(|b| b.starts_with(&format!("{k}:")));
            match limit(&format!("{{{}}}", body.join(", "))) {
                Ok(l) => {
                    let want = if has("concurrency") {
                        LimitKind::Concurrency { hold_ttl_seconds: if has("hold_ttl_seconds") { 60 } else { 300 } }
                    } else if has("window") {
                        LimitKind::Rolling { window: RollingWindow::Hour }
                    } else {
                        LimitKind::Bucket
                    };
                    proptest::prop_assert_eq!(l.kind, want);
                    proptest::prop_assert_eq!(l.soft, has("soft"));
                    if l.kind != LimitKind::Bucket {
                        proptest::prop_assert!(l.schedule.is_empty() && !l.resets() && l.refill_amount == 0);
                    }
                }
                Err(diags) => {
                    for (path, message, _) in diags {
                        let key = path.trim_start_matches("resources.r.limits.x").trim_start_matches('.');
                        let key = key.split(['.', '[']).next().unwrap_or_default();
                        proptest::prop_assert!(
                            key.is_empty() || has(key),
                            "{} at {} for {:?}", message, path, body
                        );
                    }
                }
            }
        }
    }
}
