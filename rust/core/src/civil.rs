//! Civil (proleptic Gregorian) dates: the one calendar the ISO-8601 timestamp parser and the
//! JSON date columns share.

/// Whether `y` is a leap year.
pub fn is_leap(y: i64) -> bool {
    (y % 4 == 0 && y % 100 != 0) || y % 400 == 0
}

/// The number of days of month `m` (1-12) in year `y`.
pub fn days_in_month(y: i64, m: i64) -> i64 {
    match m {
        2 if is_leap(y) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days since 1970-01-01 for a proleptic Gregorian date (H. Hinnant's `days_from_civil`,
/// from its public-domain description). The date must exist (see [`days_in_month`]).
pub fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// `YYYY-MM-DD` → days since 1970-01-01, `None` if malformed or the date does not exist.
pub fn parse_date(s: &str) -> Option<i32> {
    let b = s.as_bytes();
    if b.len() != 10 || b[4] != b'-' || b[7] != b'-' {
        return None;
    }
    let num = |r: std::ops::Range<usize>| -> Option<i64> {
        let part = &s[r];
        part.bytes()
            .all(|c| c.is_ascii_digit())
            .then(|| part.parse().ok())
            .flatten()
    };
    let (y, m, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
    if !(1..=12).contains(&m) || d < 1 || d > days_in_month(y, m) {
        return None;
    }
    i32::try_from(days_from_civil(y, m, d)).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn days_from_civil_matches_known_dates() {
        assert_eq!(days_from_civil(1970, 1, 1), 0);
        assert_eq!(days_from_civil(2000, 1, 1), 10_957);
        assert_eq!(days_from_civil(1969, 12, 31), -1);
        assert_eq!(days_from_civil(0, 3, 1), -719_468);
        // Consecutive days over four centuries step by exactly one.
        let mut prev = days_from_civil(1899, 12, 31);
        for y in 1900..2301 {
            for m in 1..=12 {
                for d in 1..=days_in_month(y, m) {
                    let cur = days_from_civil(y, m, d);
                    assert_eq!(cur, prev + 1, "{y}-{m}-{d}");
                    prev = cur;
                }
            }
        }
    }

    #[test]
    fn parse_date_accepts_real_dates_only() {
        assert_eq!(parse_date("1970-01-01"), Some(0));
        assert_eq!(parse_date("1969-12-31"), Some(-1));
        assert_eq!(parse_date("2000-02-29"), Some(11016));
        assert_eq!(parse_date("2024-03-01"), Some(19783));
        for bad in [
            "2023-02-29",
            "2024-02-30",
            "2024-13-01",
            "2024-00-10",
            "2024-1-01",
            "+024-01-01",
        ] {
            assert_eq!(parse_date(bad), None, "{bad}");
        }
    }
}
