//! Property tests of the evaluation layer:
//! * a schedule's next change (and a pattern's next/previous edge) is the
//!   first minute at which `matches` says the answer changes, compared with a
//!   bounded minute-by-minute scan on random dense and sparse patterns in DST
//!   zones;
//! * a reported retry-after is never a time at which the request would still
//!   be refused (drip buckets, and calendar quotas through the slow pass).
//!
//! Case counts default low for CI; set `PROPTEST_CASES` for a longer run.

use proptest::prelude::*;
use zae_limiter_engine::bucket::BucketState;
use zae_limiter_engine::cron::CronSpec;
use zae_limiter_engine::params::Params;
use zae_limiter_engine::quota::{slow_pass, QuotaConfig};
use zae_limiter_engine::scan;
use zae_limiter_engine::schedule::{Entry, Schedule};
use zae_limiter_engine::zone::matches;

const ZONES: [chrono_tz::Tz; 6] = [
    chrono_tz::UTC,
    chrono_tz::America::New_York,
    chrono_tz::Australia::Lord_Howe,
    chrono_tz::Pacific::Chatham,
    chrono_tz::Asia::Kolkata,
    chrono_tz::Europe::Dublin,
];

/// Instants near DST transitions (2024/2025) where scans are most fragile.
const NEAR: [i64; 8] = [
    1_710_050_000_000, // 2024-03-10 New York spring-forward
    1_730_610_000_000, // 2024-11-03 New York fall-back
    1_712_400_000_000, // 2024-04-07 Chatham / Lord Howe fall-back
    1_727_530_000_000, // 2024-09-29 Chatham spring-forward
    1_728_140_000_000, // 2024-10-06 Lord Howe spring-forward
    1_711_846_800_000, // 2024-03-31 Dublin
    1_704_067_200_000, // 2024-01-01
    1_740_787_200_000, // 2025-03-01
];

fn mask(bits: u64, width: u32, low: u32) -> u64 {
    (bits << low) & (((1u64 << width) - 1) << low)
}

/// A random pattern: each field a random subset (never empty), dense or sparse.
fn spec_strategy() -> impl Strategy<Value = CronSpec> {
    (
        any::<u64>(),
        any::<u64>(),
        any::<u32>(),
        any::<u32>(),
        any::<u16>(),
        any::<u8>(),
        any::<bool>(),
        0u8..4,
    )
        .prop_map(|(m1, m2, h1, d, mo, wd, day_and, density)| {
            // density 0: dense minutes (~75%), 1: sparse minutes, 2: all minutes
            // and some hours, 3: all minutes and hours, some days.
            let minutes = match density {
                0 => mask(m1 | m2, 60, 0),
                1 => mask(m1 & m2 & (m1 >> 7), 60, 0),
                _ => (1 << 60) - 1,
            };
            let hours = if density >= 3 {
                (1 << 24) - 1
            } else {
                mask(u64::from(h1) | 0x10_0001, 24, 0) as u32
            };
            let days = if density == 3 {
                mask(u64::from(d), 31, 1) as u32
            } else {
                ((1u64 << 32) - 2) as u32
            };
            let months = if density == 3 {
                mask(u64::from(mo) | 0xFFF, 12, 1) as u16
            } else {
                0x1FFE
            };
            let weekdays = if density == 3 {
                mask(u64::from(wd), 7, 1) as u8
            } else {
                0xFE
            };
            let nonempty = |v: u64, dflt: u64| if v == 0 { dflt } else { v };
            CronSpec {
                minutes: nonempty(minutes, 1),
                hours: nonempty(u64::from(hours), 1) as u32,
                days: nonempty(u64::from(days), 2) as u32,
                months: nonempty(u64::from(months), 2) as u16,
                weekdays: nonempty(u64::from(weekdays), 2) as u8,
                day_and,
            }
        })
}

fn now_strategy() -> impl Strategy<Value = i64> {
    (0usize..NEAR.len(), -2 * 86_400_000i64..2 * 86_400_000).prop_map(|(i, d)| NEAR[i] + d)
}

fn m(spec: &CronSpec, tz: chrono_tz::Tz, u: i64) -> bool {
    matches(spec, tz, u * 60_000)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(
        std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(64)
    ))]

    #[test]
    fn next_change_is_the_first_minute_the_active_entry_changes(
        specs in proptest::collection::vec(spec_strategy(), 1..4),
        z in 0usize..ZONES.len(),
        now in now_strategy(),
    ) {
        let tz = ZONES[z];
        let sched = Schedule {
            tz,
            entries: specs.iter().map(|s| Entry { cron: String::new(), spec: s.clone(), modifier: None }).collect(),
        };
        let u0 = now.div_euclid(60_000);
        let horizon = u0 + 2 * 1440;
        let active = |u: i64| specs.iter().position(|s| m(s, tz, u));
        let cur = active(u0);
        let brute = (u0 + 1..=horizon).find(|&u| active(u) != cur);
        prop_assert_eq!(sched.next_active_change(u0, horizon), brute);
    }

    #[test]
    fn edges_are_the_first_minutes_of_windows(
        spec in spec_strategy(),
        z in 0usize..ZONES.len(),
        now in now_strategy(),
    ) {
        let tz = ZONES[z];
        let u0 = now.div_euclid(60_000);
        let edge = |u: i64| m(&spec, tz, u) && !m(&spec, tz, u - 1);
        let next = (u0 + 1..=u0 + 2 * 1440).find(|&u| edge(u));
        prop_assert_eq!(scan::next_edge(&spec, tz, u0 + 1, u0 + 2 * 1440), next);
        let prev = (u0 - 2 * 1440 + 1..=u0).rev().find(|&u| edge(u));
        prop_assert_eq!(scan::prev_edge(&spec, tz, u0, u0 - 2 * 1440), prev);
    }

    #[test]
    fn a_drip_wait_is_never_too_short(
        cap_tokens in 1i128..1_000_000,
        ra in 1i128..10_000_000,
        rp in 1i128..3_600_000,
        debt in -5_000_000i128..0,
        want in 1i128..1_000_000,
        shards in 1i128..4,
        now in 1_600_000_000_000i64..1_800_000_000_000,
    ) {
        // The request must fit the shard's ceiling, and the shard's rate must be positive.
        let cap = (cap_tokens + shards) * 1000;
        let want = 1 + want % (cap / shards / 1000);
        let ra = ra + shards;
        let st = BucketState {
            tokens_milli: debt,
            shard_count: shards,
            ..BucketState::empty(Params::new(cap, ra, rp), now)
        };
        let first = st.try_consume(want, now);
        prop_assert!(!first.success);
        let wait_ms = (first.retry_after_seconds * 1000.0).round() as i64;
        let later = st.try_consume(want, now + wait_ms);
        prop_assert!(later.success, "refused at the reported time: wait {} ms", wait_ms);
    }

    #[test]
    fn a_quota_wait_ends_at_a_reset(
        minute in 0u32..60,
        hour in 0u32..24,
        z in 0usize..ZONES.len(),
        now in now_strategy(),
        amount in 1i128..10_000,
        want in 1i128..10_000,
    ) {
        let want = 1 + (want - 1) % amount;
        let tz = ZONES[z];
        let cron = format!("{minute} {hour} * * *");
        let resets = Schedule {
            tz,
            entries: vec![Entry { cron: cron.clone(), spec: CronSpec::parse(&cron).expect("valid"), modifier: None }],
        };
        let st = BucketState {
            total_consumed_milli: Some(amount * 1000),
            reset_sched: resets.clone(),
            grant_count: Some(1),
            ..BucketState::empty(Params::new(amount * 1000, 0, 1000), now)
        };
        let config = QuotaConfig { schedule: Schedule::empty(), reset_schedule: resets, reset_after_seconds: None };
        let first = slow_pass(&st, &config, want, now);
        prop_assert!(first.exceeded);
        let wait_ms = (first.retry_after_seconds * 1000.0).round() as i64;
        prop_assert!(wait_ms > 0);
        let later = slow_pass(&st, &config, want, now + wait_ms);
        prop_assert!(!later.exceeded, "refused at the reported time: wait {} ms", wait_ms);
        prop_assert!(later.reset_applied);
    }
}
