//! Per-call cost of the engine's hot paths. `bench/reference_engine.py` times
//! the same operations in zae-limiter 0.17 so the two can be read side by side.
//!
//! `cargo bench -p zae-limiter-engine --bench engine`

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion};
use zae_limiter_engine::cron::CronSpec;
use zae_limiter_engine::params::{effective_params, Modifier, Params, Scale};
use zae_limiter_engine::retry::{retry_after_with_schedule, RetryInputs};
use zae_limiter_engine::schedule::{next_boundary, Entry, Schedule};
use zae_limiter_engine::zone::{matches, zone};

/// 2026-03-04T15:30:00Z, a Wednesday, 10:30 in New York.
const NOW: i64 = 1_772_638_200_000;

fn entry(cron: &str, modifier: Option<Modifier>) -> Entry {
    Entry {
        cron: cron.to_string(),
        spec: CronSpec::parse(cron).expect("valid pattern"),
        modifier,
    }
}

fn schedule(tz: &str, entries: Vec<Entry>) -> Schedule {
    Schedule {
        tz: zone(tz).expect("known zone"),
        entries,
    }
}

fn business_hours() -> Schedule {
    schedule(
        "America/New_York",
        vec![
            entry(
                "* 9-17 * * MON-FRI",
                Some(Modifier::Scale(Scale::Float(2.0))),
            ),
            entry("* 0-5 * * *", Some(Modifier::Scale(Scale::Float(0.5)))),
            entry(
                "0-29 12 * * *",
                Some(Modifier::Absolute {
                    capacity: Some(10),
                    refill_amount: None,
                    refill_period_seconds: None,
                }),
            ),
        ],
    )
}

fn benches(c: &mut Criterion) {
    c.bench_function("parse `* 9-17 * * MON-FRI`", |b| {
        b.iter(|| CronSpec::parse(black_box("* 9-17 * * MON-FRI")))
    });

    let spec = CronSpec::parse("*/5 9-17 * * MON-FRI").expect("valid");
    let ny = zone("America/New_York").expect("zone");
    c.bench_function("match `*/5 9-17 * * MON-FRI` New York", |b| {
        b.iter(|| matches(black_box(&spec), ny, black_box(NOW)))
    });

    let sched = business_hours();
    let base = Params::new(1_000_000, 1_000_000, 60_000);
    c.bench_function("effective_params (3 entries)", |b| {
        b.iter(|| effective_params(black_box(base), &sched, black_box(NOW)))
    });

    let none = Schedule::empty();
    c.bench_function("next_boundary dense (3 entries)", |b| {
        b.iter(|| next_boundary(&sched, &none, black_box(NOW)))
    });

    let daily = schedule("America/New_York", vec![entry("0 0 * * *", None)]);
    c.bench_function("next_boundary reset `0 0 * * *`", |b| {
        b.iter(|| next_boundary(&none, &daily, black_box(NOW)))
    });

    let leap = schedule("UTC", vec![entry("0 0 29 2 *", None)]);
    c.bench_function("next_boundary reset `0 0 29 2 *` (capped)", |b| {
        b.iter(|| next_boundary(&none, &leap, black_box(NOW)))
    });
    c.bench_function("next_reset_edge `0 0 29 2 *` (2 years away)", |b| {
        b.iter(|| leap.next_reset_edge(black_box(NOW)))
    });
    let leap_ny = schedule("America/New_York", vec![entry("0 0 29 2 *", None)]);
    c.bench_function("next_reset_edge `0 0 29 2 *` New York", |b| {
        b.iter(|| leap_ny.next_reset_edge(black_box(NOW)))
    });
    c.bench_function("prev_reset_edge `0 0 29 2 *` New York", |b| {
        b.iter(|| leap_ny.prev_reset_edge(black_box(NOW)))
    });

    // One bucket's retry inputs at NOW: single shard, the limiter's window cap.
    let retry = |base, sched, reset_sched| RetryInputs {
        base,
        sched,
        reset_sched,
        now_ms: NOW,
        shard_count: 1,
        max_windows: 8,
    };
    let inputs = retry(base, &sched, &none);
    c.bench_function("retry_after_with_schedule (3 entries)", |b| {
        b.iter(|| retry_after_with_schedule(black_box(5_000_000), &inputs))
    });
    let quota = retry(Params::new(1_000_000, 0, 1000), &none, &daily);
    c.bench_function("retry_after_with_schedule quota `0 0 * * *`", |b| {
        b.iter(|| retry_after_with_schedule(black_box(5_000), &quota))
    });
}

criterion_group!(engine, benches);
criterion_main!(engine);
