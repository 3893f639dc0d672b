//! Wall-clock time in UTC for the operator-facing outputs (`SHOW ENGINE
//! SHALE STATUS`, the slow-query log), without a calendar crate.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// A UTC calendar time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Utc {
    pub year: i64,
    pub month: u32,
    pub day: u32,
    pub hour: u32,
    pub minute: u32,
    pub second: u32,
    pub micros: u32,
}

impl Utc {
    /// Now (the epoch if the clock is before it).
    pub fn now() -> Utc {
        Utc::at(SystemTime::now())
    }

    /// The UTC calendar time of `t`.
    pub fn at(t: SystemTime) -> Utc {
        let since = t.duration_since(UNIX_EPOCH).unwrap_or(Duration::ZERO);
        let secs = since.as_secs();
        let days = i64::try_from(secs / 86_400).unwrap_or(i64::MAX);
        let rem = u32::try_from(secs % 86_400).unwrap_or(0); // < 86,400
        let (year, month, day) = civil_from_days(days);
        Utc {
            year,
            month,
            day,
            hour: rem / 3600,
            minute: rem / 60 % 60,
            second: rem % 60,
            micros: since.subsec_micros(),
        }
    }

    /// `2026-11-25 17:45:01`.
    pub fn datetime(&self) -> String {
        format!(
            "{:04}-{:02}-{:02} {:02}:{:02}:{:02}",
            self.year, self.month, self.day, self.hour, self.minute, self.second
        )
    }

    /// `2026-11-25T17:45:01.123456Z` (MySQL 8's slow-log `# Time:`).
    pub fn iso8601_micros(&self) -> String {
        format!(
            "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:06}Z",
            self.year, self.month, self.day, self.hour, self.minute, self.second, self.micros
        )
    }
}

/// Year, month (1-12), day (1-31) of day `z` since 1970-01-01, by Howard
/// Hinnant's `civil_from_days` (proleptic Gregorian; exact for every day).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097); // [0, 146096]
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365; // [0, 399]
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100); // [0, 365]
    let mp = (5 * doy + 2) / 153; // [0, 11]
    let day = doy - (153 * mp + 2) / 5 + 1; // [1, 31]
    let month = if mp < 10 { mp + 3 } else { mp - 9 }; // [1, 12]
    let year = yoe + era * 400 + i64::from(month <= 2);
    (
        year,
        u32::try_from(month).unwrap_or(1),
        u32::try_from(day).unwrap_or(1),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calendar_dates_of_known_instants() {
        let at = |s: u64, us: u64| Utc::at(UNIX_EPOCH + Duration::from_micros(s * 1_000_000 + us));
        assert_eq!(at(0, 0).datetime(), "1970-01-01 00:00:00");
        // `date -u -d @1795629555` = Wed Nov 25 17:59:15 UTC 2026.
        assert_eq!(
            at(1_795_629_555, 42).iso8601_micros(),
            "2026-11-25T17:59:15.000042Z"
        );
        // 2024-02-29 (leap day) and 2000-03-01 (after a 400-year leap day).
        assert_eq!(at(1_709_164_800, 0).datetime(), "2024-02-29 00:00:00");
        assert_eq!(at(951_868_800, 0).datetime(), "2000-03-01 00:00:00");
        assert_eq!(at(4_102_444_799, 0).datetime(), "2099-12-31 23:59:59");
    }
}
