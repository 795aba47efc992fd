//! `zae-limiter cron check` through the binary: validity and exit codes, the
//! stored and named forms, `--at` matches, and windows and reset edges across
//! DST (New York, Lord Howe, Chatham) and for a pattern years apart.
//!
//! The New York and Lord Howe instants agree with zae-limiter 0.17's
//! `next_reset_edge`; the Chatham ones are the plain definition where the
//! reference misses windows (docs/semantics.md, B2/B3).

use std::process::{Command, Output};

use serde_json::Value;

fn run(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_zae-limiter"))
        .arg("cron")
        .arg("check")
        .args(args)
        .output()
        .expect("the binary runs")
}

fn json(args: &[&str]) -> Value {
    let mut all = args.to_vec();
    all.extend(["--format", "json"]);
    let out = run(&all);
    assert!(
        out.status.code() == Some(0) || out.status.code() == Some(1),
        "{out:?}"
    );
    serde_json::from_slice(&out.stdout).expect("JSON on stdout")
}

/// `cron check CRON --tz TZ --from FROM --next N` as JSON.
fn next_edges(cron: &str, tz: &str, from: &str, n: u32) -> Value {
    json(&[cron, "--tz", tz, "--from", from, "--next", &n.to_string()])
}

/// Windows with an end, as [`windows`] returns them.
fn closed(windows: &[(&str, &str)]) -> Vec<(String, Option<String>)> {
    windows
        .iter()
        .map(|(start, end)| (start.to_string(), Some(end.to_string())))
        .collect()
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .expect("array")
        .iter()
        .map(|s| s.as_str().expect("string").to_string())
        .collect()
}

fn windows(v: &Value) -> Vec<(String, Option<String>)> {
    v["windows"]
        .as_array()
        .expect("windows")
        .iter()
        .map(|w| {
            (
                w["start"].as_str().expect("start").to_string(),
                w["end"].as_str().map(str::to_string),
            )
        })
        .collect()
}

#[test]
fn valid_pattern_text_shows_stored_and_named_forms() {
    let out = run(&[
        "* 9-17 * * 1-5",
        "--tz",
        "America/New_York",
        "--at",
        "2026-03-09T13:30:00Z",
        "--at",
        "2026-03-08T07:00:00Z",
        "--from",
        "2026-03-06T00:00:00Z",
        "--next",
        "2",
    ]);
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8(out.stdout).expect("UTF-8");
    assert!(text.starts_with("valid: * 9-17 * * 1-5\n"), "{text}");
    assert!(text.contains("stored:   1h9-17w1-5\n"), "{text}");
    assert!(text.contains("rendered: * 9-17 * * MON-FRI\n"), "{text}");
    assert!(
        text.contains("at 2026-03-09T13:30:00Z (2026-03-09 09:30 -04:00): matches\n"),
        "{text}"
    );
    assert!(
        text.contains("at 2026-03-08T07:00:00Z (2026-03-08 03:00 -04:00): does not match\n"),
        "{text}"
    );
    // Friday before the switch (EST), then Monday after it (EDT).
    assert!(text.contains(
        "  2026-03-06 09:00 -05:00 (2026-03-06T14:00:00Z) -> 2026-03-06 18:00 -05:00 (2026-03-06T23:00:00Z)\n"
    ), "{text}");
    assert!(text.contains(
        "  2026-03-09 09:00 -04:00 (2026-03-09T13:00:00Z) -> 2026-03-09 18:00 -04:00 (2026-03-09T22:00:00Z)\n"
    ), "{text}");
    assert!(
        text.contains("  2026-03-09T13:00:00Z (2026-03-09 09:00 -04:00)\n"),
        "{text}"
    );
}

#[test]
fn json_report_has_the_documented_fields_in_order() {
    let out = run(&["* 9-17 * * 1-5", "--format", "json"]);
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8(out.stdout).expect("UTF-8");
    let keys = [
        "\"valid\"",
        "\"stored\"",
        "\"rendered\"",
        "\"matches\"",
        "\"windows\"",
        "\"edges\"",
        "\"warnings\"",
    ];
    let pos: Vec<usize> = keys.iter().map(|k| text.find(k).expect(k)).collect();
    assert!(pos.windows(2).all(|w| w[0] < w[1]), "{text}");
    let v: Value = serde_json::from_str(&text).expect("JSON");
    assert_eq!(v["valid"], true);
    assert!(v.get("error").is_none());
    assert_eq!(v["stored"], "1h9-17w1-5");
    assert_eq!(v["rendered"], "* 9-17 * * MON-FRI");
    assert_eq!(v["warnings"], serde_json::json!([]));
}

/// A pattern Python limiters may read otherwise (cronsim 2.8 against 2.9)
/// gets `limits validate`'s ZL106 warning here too, and still exits 0.
#[test]
fn a_one_value_range_with_a_step_is_warned_about() {
    let out = run(&["0-0/15 9-9/4 * * *"]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let text = String::from_utf8(out.stdout).expect("UTF-8");
    let warnings: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("warning[ZL106]: "))
        .collect();
    assert_eq!(warnings.len(), 2, "{text}");
    assert!(
        warnings[0].contains("`0-0/15` in the minute field"),
        "{text}"
    );
    assert!(warnings[1].contains("`9-9/4` in the hour field"), "{text}");
    assert!(
        text.contains("  help: write `9/4` or `9`, whichever is meant"),
        "{text}"
    );

    let v = json(&["* 9-9/4 * * *"]);
    let w = &v["warnings"][0];
    assert_eq!(w["code"], "ZL106");
    assert!(
        w["message"].as_str().unwrap().contains("cronsim 2.9"),
        "{v}"
    );
    assert_eq!(v["warnings"].as_array().map(Vec::len), Some(1));
    // Spelled so every version reads it alike: no warning.
    assert_eq!(json(&["* 9/4 * * *"])["warnings"], serde_json::json!([]));
}

#[test]
fn invalid_pattern_shows_a_caret_under_the_field_and_exits_1() {
    let out = run(&["0 0 * * SAT-SUN"]);
    assert_eq!(out.status.code(), Some(1));
    let text = String::from_utf8(out.stdout).expect("UTF-8");
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines[0].starts_with("invalid: day-of-week"), "{text}");
    assert_eq!(lines[1], "  0 0 * * SAT-SUN");
    assert_eq!(lines[2], "          ^^^^^^^");

    let v = json(&["0 0 * * * *"]);
    assert_eq!(v["valid"], false);
    assert!(v["error"].as_str().is_some_and(|e| !e.is_empty()));
    assert_eq!(v["stored"], Value::Null);

    let out = run(&["61 * * * *"]);
    assert_eq!(out.status.code(), Some(1));
    let text = String::from_utf8(out.stdout).expect("UTF-8");
    assert_eq!(text.lines().nth(2), Some("  ^^"), "{text}");
}

#[test]
fn usage_errors_exit_2() {
    for args in [
        &["* * * * *", "--tz", "Mars/Olympus"][..],
        &["* * * * *", "--at", "yesterday"][..],
        &["* * * * *", "--next", "3"][..],
    ] {
        let out = run(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {out:?}");
        assert!(!out.stderr.is_empty());
    }
}

#[test]
fn new_york_spring_forward_skips_the_missing_half_hour() {
    // 02:30 does not exist on 2024-03-10: no reset that day.
    let v = json(&[
        "30 2 * * *",
        "--tz",
        "America/New_York",
        "--from",
        "2024-03-09T12:00:00Z",
        "--next",
        "2",
        "--at",
        "2024-03-10T07:30:00Z",
        "--at",
        "2024-03-11T06:30:59Z",
    ]);
    assert_eq!(v["matches"][0]["matches"], false);
    assert_eq!(v["matches"][1]["matches"], true);
    assert_eq!(v["matches"][1]["at"], "2024-03-11T06:30:59Z");
    assert_eq!(
        strings(&v["edges"]),
        ["2024-03-11T06:30:00Z", "2024-03-12T06:30:00Z"]
    );
    assert_eq!(
        windows(&v),
        closed(&[
            ("2024-03-11T06:30:00Z", "2024-03-11T06:31:00Z"),
            ("2024-03-12T06:30:00Z", "2024-03-12T06:31:00Z"),
        ])
    );
}

#[test]
fn new_york_fall_back_repeats_the_hour() {
    // 01:30 happens twice on 2024-11-03: two edges an hour apart.
    let v = next_edges("30 1 * * *", "America/New_York", "2024-11-03T00:00:00Z", 3);
    assert_eq!(
        strings(&v["edges"]),
        [
            "2024-11-03T05:30:00Z",
            "2024-11-03T06:30:00Z",
            "2024-11-04T06:30:00Z"
        ]
    );
    // A whole-hour pattern stays one window across the repeat.
    let v = next_edges("* 1 * * *", "America/New_York", "2024-11-03T00:00:00Z", 1);
    assert_eq!(
        windows(&v),
        closed(&[("2024-11-03T05:00:00Z", "2024-11-03T07:00:00Z")])
    );
}

#[test]
fn lord_howe_half_hour_shift() {
    // 2024-10-06: 02:00 +10:30 becomes 02:30 +11:00, so 02:15 is skipped.
    let v = next_edges(
        "15 2 * * *",
        "Australia/Lord_Howe",
        "2024-10-04T00:00:00Z",
        3,
    );
    assert_eq!(
        strings(&v["edges"]),
        [
            "2024-10-04T15:45:00Z",
            "2024-10-06T15:15:00Z",
            "2024-10-07T15:15:00Z"
        ]
    );
}

#[test]
fn chatham_short_hour_and_repeated_hour() {
    // 2024-09-29: 02:45 +12:45 becomes 03:45 +13:45; local hour 3 lasts 15 minutes.
    let v = next_edges("* 3 * * *", "Pacific/Chatham", "2024-09-28T00:00:00Z", 2);
    assert_eq!(
        windows(&v),
        closed(&[
            ("2024-09-28T14:00:00Z", "2024-09-28T14:15:00Z"),
            ("2024-09-29T13:15:00Z", "2024-09-29T14:15:00Z"),
        ])
    );
    // 2024-04-07: 03:45 +13:45 becomes 02:45 +12:45, so hour 2 comes back for
    // 15 minutes (the reference's forward scan misses this window: B3).
    let v = next_edges("* 2 * * *", "Pacific/Chatham", "2024-04-06T00:00:00Z", 3);
    assert_eq!(
        windows(&v),
        closed(&[
            ("2024-04-06T12:15:00Z", "2024-04-06T13:15:00Z"),
            ("2024-04-06T14:00:00Z", "2024-04-06T14:15:00Z"),
            ("2024-04-07T13:15:00Z", "2024-04-07T14:15:00Z"),
        ])
    );
}

#[test]
fn feb_29_is_found_years_away() {
    // The reference's horizon finds no edge for this pattern (B4); we list them.
    let v = json(&[
        "0 0 29 2 *",
        "--from",
        "2025-01-01T00:00:00Z",
        "--next",
        "3",
    ]);
    assert_eq!(v["stored"], "1m0h0D29M2");
    assert_eq!(v["rendered"], "0 0 29 FEB *");
    assert_eq!(
        strings(&v["edges"]),
        [
            "2028-02-29T00:00:00Z",
            "2032-02-29T00:00:00Z",
            "2036-02-29T00:00:00Z"
        ]
    );
    assert_eq!(windows(&v)[0].1.as_deref(), Some("2028-02-29T00:01:00Z"));
    // Strictly after --from: an edge at --from itself is not listed.
    let v = json(&[
        "0 0 29 2 *",
        "--from",
        "2028-02-29T00:00:00Z",
        "--next",
        "1",
    ]);
    assert_eq!(strings(&v["edges"]), ["2032-02-29T00:00:00Z"]);
}

#[test]
fn a_pattern_that_always_matches_has_no_windows() {
    let v = json(&["* * * * *", "--from", "2025-01-01T00:00:00Z", "--next", "2"]);
    assert_eq!(v["valid"], true);
    assert_eq!(v["edges"], Value::Array(vec![]));
    assert_eq!(v["windows"], Value::Array(vec![]));
}

/// The JSON report is versioned like every other JSON output, valid or not.
#[test]
fn json_reports_are_versioned() {
    assert_eq!(json(&["0 0 * * *"])["version"], 1);
    let invalid = json(&["61 * * * *"]);
    assert_eq!(invalid["valid"], false);
    assert_eq!(invalid["version"], 1);
}
