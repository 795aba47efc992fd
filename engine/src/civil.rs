//! Proleptic Gregorian calendar arithmetic on minute indices.
//!
//! The scanners work on integer minute counts (minutes since 1970-01-01T00:00 in
//! some fixed frame, UTC or a zone's wall clock) instead of `chrono` values, so a
//! jump to "the first minute of next month" is a few integer operations and can
//! never fail or panic. Days use Howard Hinnant's `days_from_civil` algorithms.

/// Minutes in a day.
pub const DAY: i64 = 1440;

/// First supported minute index: 0001-01-02T00:00 (Python's `datetime` starts at
/// year 1; one day of margin keeps every zone offset inside the range).
pub const MIN_MINUTE: i64 = -719_161 * DAY;
/// Last supported minute index: 9999-12-30T23:59 (Python's `datetime` ends in 9999).
pub const MAX_MINUTE: i64 = 2_932_896 * DAY - 1;

/// First instant (epoch ms) the tool accepts from a user, a trace or a store.
pub const MIN_EPOCH_MS: i64 = MIN_MINUTE * 60_000;
/// Last instant (epoch ms) the tool accepts: 9999-12-30T23:59:59.999Z. Every
/// instant inside the range, and every difference of two of them, is far from
/// i64's limits, so arithmetic on checked instants cannot overflow.
pub const MAX_EPOCH_MS: i64 = MAX_MINUTE * 60_000 + 59_999;

/// Whether `ms` lies in [`MIN_EPOCH_MS`]`..=`[`MAX_EPOCH_MS`].
pub fn in_range_ms(ms: i64) -> bool {
    (MIN_EPOCH_MS..=MAX_EPOCH_MS).contains(&ms)
}

/// Days since 1970-01-01 of the civil date `y-m-d` (`m` 1..=12, `d` 1..=31).
pub fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let m = i64::from(m);
    let mp = if m > 2 { m - 3 } else { m + 9 };
    let doy = (153 * mp + 2) / 5 + i64::from(d) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// Civil date `(year, month, day)` of a day count since 1970-01-01.
pub fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

/// The calendar fields of one wall-clock minute.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fields {
    pub year: i64,
    pub month: u32,
    pub day: u32,
    pub hour: u32,
    pub minute: u32,
    /// ISO weekday, Monday = 1 … Sunday = 7.
    pub weekday: u32,
    /// Minute index of 00:00 of this day.
    pub day_start: i64,
}

impl Fields {
    /// Fields of minute index `l`.
    pub fn of(l: i64) -> Fields {
        let day = l.div_euclid(DAY);
        let in_day = l - day * DAY;
        let (year, month, d) = civil_from_days(day);
        Fields {
            year,
            month,
            day: d,
            hour: (in_day / 60) as u32,
            minute: (in_day % 60) as u32,
            weekday: ((day + 3).rem_euclid(7) + 1) as u32,
            day_start: day * DAY,
        }
    }

    /// Minute index of 00:00 of this minute's hour.
    pub fn hour_start(&self) -> i64 {
        self.day_start + i64::from(self.hour) * 60
    }

    /// Minute index of 00:00 on the first of this month.
    pub fn month_start(&self) -> i64 {
        days_from_civil(self.year, self.month, 1) * DAY
    }

    /// Minute index of 00:00 on the first of the next month.
    pub fn next_month_start(&self) -> i64 {
        let (y, m) = if self.month == 12 {
            (self.year + 1, 1)
        } else {
            (self.year, self.month + 1)
        };
        days_from_civil(y, m, 1) * DAY
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_days_across_eras() {
        for z in (-800_000..3_000_000).step_by(997) {
            let (y, m, d) = civil_from_days(z);
            assert_eq!(days_from_civil(y, m, d), z);
        }
    }

    #[test]
    fn known_dates() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(days_from_civil(2024, 2, 29), 19_782);
        assert_eq!(civil_from_days(MIN_MINUTE / DAY), (1, 1, 2));
        assert_eq!(civil_from_days(MAX_MINUTE / DAY), (9999, 12, 30));
        // 1970-01-01 was a Thursday; 2024-03-10 a Sunday.
        assert_eq!(Fields::of(0).weekday, 4);
        assert_eq!(Fields::of(19_792 * DAY + 61).weekday, 7);
        assert_eq!(Fields::of(19_792 * DAY + 61).hour, 1);
    }
}
