//! Fuzz the cron layer: parse, encode, decode, render and match must never
//! panic, and what they accept must round-trip:
//! * a pattern that parses encodes, and its encoding decodes to the same sets;
//! * the named rendering of that encoding parses back to the same sets;
//! * a stored string that decodes re-encodes to a string that decodes to the
//!   same entries.
#![no_main]

use libfuzzer_sys::fuzz_target;
use zae_limiter_engine::cron::CronSpec;
use zae_limiter_engine::encoding::{
    decode_reset, decode_schedule, encode_cron, encode_reset, encode_schedule, python_int,
};
use zae_limiter_engine::render::to_cron;
use zae_limiter_engine::zone::{matches, zone};

fuzz_target!(|data: &[u8]| {
    let t_ms = data
        .get(..8)
        .map(|b| i64::from_le_bytes(b.try_into().unwrap_or([0; 8])))
        .unwrap_or(0);
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let _ = zone(text);
    let _ = python_int(text);

    if let Ok(spec) = CronSpec::parse(text) {
        let enc = encode_reset(&[text]).expect("a parsed pattern encodes");
        let dec = decode_reset(&enc).expect("our encoding decodes");
        assert_eq!(dec.len(), 1);
        assert_eq!(
            dec[0].spec, spec,
            "decode(encode({text:?})) = {enc:?} changed the sets"
        );
        let named = to_cron(&enc).expect("our encoding renders");
        let back = CronSpec::parse(&named).expect("the rendering parses");
        assert_eq!(
            back, spec,
            "rendering {named:?} of {text:?} changed the sets"
        );
        for tz in [
            chrono_tz::Tz::UTC,
            chrono_tz::Tz::Pacific__Chatham,
            chrono_tz::Tz::America__New_York,
        ] {
            let _ = matches(&spec, tz, t_ms);
            let _ = matches(&spec, tz, t_ms / 1000);
        }
    } else {
        assert!(encode_cron(text).is_err());
    }

    let _ = to_cron(text);
    if let Ok(entries) = decode_schedule(text) {
        let pairs: Vec<(&str, _)> = entries
            .iter()
            .map(|e| {
                (
                    e.cron.as_str(),
                    e.modifier.expect("schedule entries carry a modifier"),
                )
            })
            .collect();
        let again = encode_schedule(&pairs).expect("decoded entries re-encode");
        let redecoded = decode_schedule(&again).expect("re-encoded schedule decodes");
        let specs = |v: &[zae_limiter_engine::encoding::Entry]| {
            v.iter()
                .map(|e| (e.spec.clone(), e.modifier))
                .collect::<Vec<_>>()
        };
        assert_eq!(specs(&entries), specs(&redecoded), "{text:?} -> {again:?}");
    }
    if let Ok(entries) = decode_reset(text) {
        let crons: Vec<&str> = entries.iter().map(|e| e.cron.as_str()).collect();
        let again = encode_reset(&crons).expect("decoded resets re-encode");
        let redecoded = decode_reset(&again).expect("re-encoded resets decode");
        let a: Vec<_> = entries.iter().map(|e| e.spec.clone()).collect();
        let b: Vec<_> = redecoded.iter().map(|e| e.spec.clone()).collect();
        assert_eq!(a, b, "{text:?} -> {again:?}");
    }
});
