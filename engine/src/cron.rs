//! 5-field cron patterns: parsing (cronsim 2.8 grammar plus zae-limiter's checks),
//! expanded field sets and the day-of-month/day-of-week rule.
//!
//! CONTRACT (shared with schedule scanning, the manifest validator and the
//! CLI): the public names and signatures below are relied on elsewhere; extend,
//! don't rename.

use std::ops::Range;

/// One of the five fields, in cron order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CronField {
    Minute,
    Hour,
    DayOfMonth,
    Month,
    DayOfWeek,
}

impl CronField {
    /// The name used in messages: `minute`, `hour`, `day-of-month`, `month`, `day-of-week`.
    pub fn name(self) -> &'static str {
        match self {
            CronField::Minute => "minute",
            CronField::Hour => "hour",
            CronField::DayOfMonth => "day-of-month",
            CronField::Month => "month",
            CronField::DayOfWeek => "day-of-week",
        }
    }
}

/// Why a pattern was rejected, and where.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct CronError {
    /// The offending field, when the problem is inside one (None for a wrong field count).
    pub field: Option<CronField>,
    /// Byte range of the offending text within the expression as given.
    pub span: Range<usize>,
    /// What is wrong, in one sentence, e.g. "day-of-week: a range cannot end at SUN (0)".
    pub message: String,
    /// How to fix it, e.g. "write SAT,SUN or 6-7 instead of SAT-SUN".
    pub help: Option<String>,
}

/// A parsed pattern: expanded sets as bitmasks, plus the day rule.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct CronSpec {
    /// Bit m set for each matching minute 0..=59.
    pub minutes: u64,
    /// Bit h set for each matching hour 0..=23.
    pub hours: u32,
    /// Bit d set for each matching day-of-month 1..=31.
    pub days: u32,
    /// Bit m set for each matching month 1..=12.
    pub months: u16,
    /// Bit d set for each matching ISO weekday 1..=7 (Mon=1 … Sun=7; Sunday folded to 7).
    pub weekdays: u8,
    /// True when the raw day-of-month or day-of-week field starts with `*`:
    /// days match when both agree (AND); otherwise when either does (OR, as in Vixie cron).
    pub day_and: bool,
}
