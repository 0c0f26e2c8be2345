//! Kafka Streams' timestamp extractors, plus one that reads event time from a JSON field.
//!
//! A record's timestamp drives stream time, windowing and the order in which a task picks
//! records across partitions, so what happens with a *missing or invalid* timestamp matters as
//! much as the happy path. The three policies mirror Kafka's built-in extractors:
//! `FailOnInvalidTimestamp` (the default), `LogAndSkipOnInvalidTimestamp` and
//! `UsePartitionTimeOnInvalidTimestamp`. A negative result always means "drop the record": the
//! record queue does that, as Kafka's `RecordQueue` does.

use std::time::{SystemTime, UNIX_EPOCH};

use crate::civil::{days_from_civil, days_in_month};
use crate::json_path::extract_json_path;
use crate::value::Value;

/// Kafka's `RecordQueue.UNKNOWN`: partition time before any record was processed.
pub const NOT_KNOWN: i64 = -1;

/// Why no usable timestamp could be produced for a record.
///
/// Only the reason is kept: record coordinates are added by the caller, which knows them.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{reason}")]
pub struct TimestampError {
    /// A complete, human-readable sentence, e.g. "JSON field 'meta.ts' is missing".
    pub reason: String,
}

impl TimestampError {
    fn new(reason: impl Into<String>) -> Self {
        TimestampError {
            reason: reason.into(),
        }
    }
}

/// What to do when a record has no valid timestamp.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnInvalid {
    /// Stop processing with an error (`FailOnInvalidTimestamp`, Kafka's default): bad
    /// timestamps usually mean a misconfigured producer, which should be noticed.
    Fail,
    /// Return a negative timestamp so the record is dropped (`LogAndSkipOnInvalidTimestamp`).
    Skip,
    /// Use the partition's current stream time (`UsePartitionTimeOnInvalidTimestamp`); fails
    /// when partition time is still unknown, since there is nothing sensible to fall back to.
    PartitionTime,
}

/// How a JSON field encodes a point in time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimeUnit {
    /// An integer number of milliseconds since the epoch (a float without fraction, such as
    /// `1.7e12`, is accepted because some JSON writers emit large integers that way).
    Millis,
    /// A number of seconds since the epoch, possibly fractional; truncated toward zero to ms.
    Seconds,
    /// An ISO-8601 / RFC 3339 date-time string with a mandatory UTC offset.
    Iso8601,
}

/// Picks the event time of each record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TimestampExtractor {
    /// The timestamp embedded in the Kafka record, with a policy for negative ones
    /// (`ExtractRecordMetadataTimestamp` and its three subclasses).
    RecordTimestamp(OnInvalid),
    /// The current wall-clock time in epoch ms (`WallclockTimestampExtractor`): processing-time
    /// semantics, useful when the data carries no trustworthy time.
    WallClock,
    /// A field of a JSON value, e.g. `meta.ts`, with a policy for missing or invalid values.
    ///
    /// The value may be a decoded `Map` or, when raw values are kept, `Bytes`/`String` holding
    /// JSON (parsed lazily: only the field is materialized). Under `Skip`, a negative field is
    /// returned unchanged (as Kafka's skip extractor does) and any other invalid field yields
    /// [`NOT_KNOWN`]; both make the record queue drop the record.
    JsonField {
        /// The path through nested objects (`["meta", "ts"]`).
        path: Vec<String>,
        /// How the field encodes time.
        unit: TimeUnit,
        /// What to do when the field is missing, null, unparsable or negative.
        on_invalid: OnInvalid,
    },
}

/// What an extractor may look at for one record.
#[derive(Debug, Clone, Copy)]
pub struct ExtractInput<'a> {
    /// The timestamp stored in the Kafka record (may be negative for pre-0.10 producers).
    pub record_timestamp: i64,
    /// The deserialized record value.
    pub value: &'a Value,
    /// The raw value bytes, when still available; preferred over re-encoding a kept
    /// `Bytes`/`String` value for the JSON-field extractor.
    pub raw_value: Option<&'a [u8]>,
}

impl TimestampExtractor {
    /// Builds a JSON-field extractor from a dotted path; empty segments (`"a..b"`, `""`,
    /// `".a"`) are rejected now rather than silently never matching later.
    pub fn json_field(
        dotted: &str,
        unit: TimeUnit,
        on_invalid: OnInvalid,
    ) -> Result<Self, TimestampError> {
        let path: Vec<String> = dotted.split('.').map(str::to_owned).collect();
        if path.iter().any(String::is_empty) {
            return Err(TimestampError::new(format!(
                "invalid JSON field path {dotted:?}: segments separated by '.' must not be empty"
            )));
        }
        Ok(TimestampExtractor::JsonField {
            path,
            unit,
            on_invalid,
        })
    }

    /// Returns the record's timestamp in epoch ms.
    ///
    /// `Ok(negative)` means "drop this record" (the `Skip` policy); `Err` means processing must
    /// stop. `partition_time` is the partition's stream time, [`NOT_KNOWN`] before any record.
    pub fn extract(
        &self,
        input: &ExtractInput,
        partition_time: i64,
    ) -> Result<i64, TimestampError> {
        match self {
            TimestampExtractor::RecordTimestamp(policy) => {
                let ts = input.record_timestamp;
                if ts >= 0 {
                    return Ok(ts);
                }
                if *policy == OnInvalid::PartitionTime && partition_time < 0 {
                    return Err(TimestampError::new(format!(
                        "could not infer a new timestamp for the input record because partition \
                         time is unknown (the record's own timestamp {ts} is invalid (negative))"
                    )));
                }
                on_invalid(*policy, ts, partition_time, || {
                    format!(
                        "record has an invalid (negative) timestamp {ts}. Possibly because a \
                         pre-0.10 producer client was used to write this record to Kafka without \
                         embedding a timestamp, or because the input topic was created before \
                         upgrading the Kafka cluster to 0.10+. Use a different timestamp \
                         extractor to process this data"
                    )
                })
            }
            TimestampExtractor::WallClock => Ok(wall_clock_ms()),
            TimestampExtractor::JsonField {
                path,
                unit,
                on_invalid: policy,
            } => match json_field_ms(path, *unit, input) {
                Ok(ts) => Ok(ts),
                Err(invalid) => {
                    let dropped = invalid.negative.unwrap_or(NOT_KNOWN);
                    on_invalid(*policy, dropped, partition_time, || invalid.reason)
                }
            },
        }
    }
}

/// Applies a policy to an invalid timestamp; `reason` is only rendered when needed.
fn on_invalid(
    policy: OnInvalid,
    invalid_ts: i64,
    partition_time: i64,
    reason: impl FnOnce() -> String,
) -> Result<i64, TimestampError> {
    match policy {
        OnInvalid::Fail => Err(TimestampError::new(reason())),
        OnInvalid::Skip => Ok(invalid_ts),
        OnInvalid::PartitionTime if partition_time >= 0 => Ok(partition_time),
        OnInvalid::PartitionTime => Err(TimestampError::new(format!(
            "could not infer a new timestamp for the input record because partition time is \
             unknown ({})",
            reason()
        ))),
    }
}

/// Current wall-clock time in epoch milliseconds.
pub fn wall_clock_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

struct Invalid {
    reason: String,
    /// The field's value when it was a readable but negative timestamp; Kafka's skip policy
    /// hands such values back unchanged.
    negative: Option<i64>,
}

fn invalid(reason: String) -> Invalid {
    Invalid {
        reason,
        negative: None,
    }
}

fn json_field_ms(path: &[String], unit: TimeUnit, input: &ExtractInput) -> Result<i64, Invalid> {
    let dotted = || path.join(".");
    let raw: Option<&[u8]> = match input.value {
        Value::Map(_) => None,
        Value::Bytes(b) => Some(input.raw_value.unwrap_or(b)),
        Value::String(s) => Some(input.raw_value.unwrap_or(s.as_bytes())),
        Value::Null => {
            return Err(invalid(format!(
                "JSON field '{}' is missing: the record value is null",
                dotted()
            )))
        }
        other => {
            return Err(invalid(format!(
                "JSON field '{}' is missing: the record value is a {}, not a JSON object",
                dotted(),
                other.type_name()
            )))
        }
    };
    let owned;
    let field = match raw {
        None => input.value.get_path(path),
        Some(raw) => {
            owned = extract_json_path(raw, path).map_err(|e| {
                invalid(format!(
                    "JSON field '{}' cannot be read: the record value is not valid JSON ({})",
                    dotted(),
                    e.reason
                ))
            })?;
            owned.as_ref()
        }
    };
    let field = match field {
        None => return Err(invalid(format!("JSON field '{}' is missing", dotted()))),
        Some(Value::Null) => return Err(invalid(format!("JSON field '{}' is null", dotted()))),
        Some(v) => v,
    };
    let ms = match unit {
        TimeUnit::Millis => millis(field),
        TimeUnit::Seconds => seconds(field),
        TimeUnit::Iso8601 => match field {
            Value::String(s) => parse_iso8601_ms(s).map_err(|e| e.reason),
            other => Err(format!(
                "holds a {} where an ISO-8601 string was expected",
                other.type_name()
            )),
        },
    }
    .map_err(|what| invalid(format!("JSON field '{}' {what}", dotted())))?;
    if ms < 0 {
        return Err(Invalid {
            reason: format!(
                "JSON field '{}' holds a negative timestamp {ms} (before 1970)",
                dotted()
            ),
            negative: Some(ms),
        });
    }
    Ok(ms)
}

fn millis(v: &Value) -> Result<i64, String> {
    if let Some(n) = v.as_i64() {
        return Ok(n);
    }
    match *v {
        Value::UnsignedLong(u) => Err(format!("holds {u}, too large for epoch milliseconds")),
        Value::Float(_) | Value::Double(_) => {
            let x = v.as_f64().unwrap_or(f64::NAN);
            if x.fract() != 0.0 || !x.is_finite() {
                Err(format!("holds {x}, not a whole number of milliseconds"))
            } else {
                float_to_i64(x)
            }
        }
        _ => Err(format!(
            "holds a {} where epoch milliseconds (a number) were expected",
            v.type_name()
        )),
    }
}

fn seconds(v: &Value) -> Result<i64, String> {
    if let Some(n) = v.as_i64() {
        return n
            .checked_mul(1000)
            .ok_or_else(|| format!("holds {n} seconds, too large for epoch milliseconds"));
    }
    match *v {
        Value::UnsignedLong(u) => Err(format!(
            "holds {u} seconds, too large for epoch milliseconds"
        )),
        Value::Float(_) | Value::Double(_) => {
            let x = v.as_f64().unwrap_or(f64::NAN);
            if !x.is_finite() {
                return Err(format!("holds {x}, not a number of seconds"));
            }
            let ms = x * 1000.0;
            // 1700000000.123 * 1000 may land a hair below ...123; do not let a binary rounding
            // error of well under a microsecond cost a whole millisecond when truncating.
            let nearest = ms.round();
            let ms = if (ms - nearest).abs() < 1e-3 {
                nearest
            } else {
                ms.trunc()
            };
            float_to_i64(ms)
        }
        _ => Err(format!(
            "holds a {} where epoch seconds (a number) were expected",
            v.type_name()
        )),
    }
}

fn float_to_i64(x: f64) -> Result<i64, String> {
    // i64::MAX as f64 rounds up to 2^63, so compare with a strict bound.
    if (-9.223_372_036_854_776e18..9.223_372_036_854_776e18).contains(&x) {
        Ok(x as i64)
    } else {
        Err(format!("holds {x}, out of range for epoch milliseconds"))
    }
}

/// Parses an ISO-8601 / RFC 3339 date-time with a mandatory offset into epoch milliseconds.
///
/// Accepted: `YYYY-MM-DDTHH:MM:SS[.fraction](Z|±HH:MM|±HHMM)`, with `T` or a space between date
/// and time (lower-case `t`/`z` too, as RFC 3339 allows); the fraction has 1–9 digits and is
/// truncated to milliseconds. An offset is required because a local time without one names no
/// single instant; leap second `:60`, out-of-range fields and impossible dates (Feb 30) are
/// rejected rather than normalized.
pub fn parse_iso8601_ms(s: &str) -> Result<i64, TimestampError> {
    parse_iso(s.as_bytes()).map_err(|why| {
        TimestampError::new(format!(
            "holds {s:?}, not an ISO-8601 date-time with offset: {why}"
        ))
    })
}

fn digits(b: &[u8], at: usize, n: usize) -> Result<i64, &'static str> {
    let part = b.get(at..at + n).ok_or("the string ends early")?;
    part.iter().try_fold(0i64, |acc, &c| {
        if c.is_ascii_digit() {
            Ok(acc * 10 + i64::from(c - b'0'))
        } else {
            Err("a digit was expected")
        }
    })
}

fn expect(b: &[u8], at: usize, what: &[u8]) -> Result<(), &'static str> {
    match b.get(at) {
        Some(c) if what.contains(c) => Ok(()),
        Some(_) => Err("unexpected separator"),
        None => Err("the string ends early"),
    }
}

fn parse_iso(b: &[u8]) -> Result<i64, &'static str> {
    let year = digits(b, 0, 4)?;
    expect(b, 4, b"-")?;
    let month = digits(b, 5, 2)?;
    expect(b, 7, b"-")?;
    let day = digits(b, 8, 2)?;
    expect(b, 10, b"Tt ")?;
    let hour = digits(b, 11, 2)?;
    expect(b, 13, b":")?;
    let minute = digits(b, 14, 2)?;
    expect(b, 16, b":")?;
    let second = digits(b, 17, 2)?;
    let mut i = 19;
    let mut millis = 0;
    if b.get(i) == Some(&b'.') || b.get(i) == Some(&b',') {
        i += 1;
        let start = i;
        while b.get(i).is_some_and(u8::is_ascii_digit) {
            if i - start < 3 {
                millis = millis * 10 + i64::from(b[i] - b'0');
            }
            i += 1;
        }
        let n = i - start;
        if n == 0 {
            return Err("the fraction of a second has no digits");
        }
        if n > 9 {
            return Err("the fraction of a second has more than 9 digits");
        }
        for _ in n..3 {
            millis *= 10;
        }
    }
    if !(1..=12).contains(&month) {
        return Err("the month is not 01-12");
    }
    if day < 1 || day > days_in_month(year, month) {
        return Err("the day does not exist in that month");
    }
    if hour > 23 {
        return Err("the hour is not 00-23");
    }
    if minute > 59 {
        return Err("the minute is not 00-59");
    }
    if second > 59 {
        return Err("the second is not 00-59");
    }
    let offset_minutes = match b.get(i) {
        Some(b'Z' | b'z') => {
            i += 1;
            0
        }
        Some(&sign @ (b'+' | b'-')) => {
            let oh = digits(b, i + 1, 2)?;
            i += 3;
            if b.get(i) == Some(&b':') {
                i += 1;
            }
            let om = digits(b, i, 2)?;
            i += 2;
            if oh > 23 || om > 59 {
                return Err("the UTC offset is out of range");
            }
            let m = oh * 60 + om;
            if sign == b'-' {
                -m
            } else {
                m
            }
        }
        None => return Err("a UTC offset (Z or ±HH:MM) is required"),
        Some(_) => return Err("unexpected character before the UTC offset"),
    };
    if i != b.len() {
        return Err("unexpected characters after the UTC offset");
    }
    let days = days_from_civil(year, month, day);
    let secs = days * 86_400 + hour * 3600 + minute * 60 + second - offset_minutes * 60;
    Ok(secs * 1000 + millis)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn input(ts: i64, value: &Value) -> ExtractInput<'_> {
        ExtractInput {
            record_timestamp: ts,
            value,
            raw_value: None,
        }
    }

    const ALL: [OnInvalid; 3] = [OnInvalid::Fail, OnInvalid::Skip, OnInvalid::PartitionTime];

    // FailOnInvalidTimestampTest / LogAndSkip… / UsePartitionTime…: a valid embedded
    // timestamp is returned whatever the policy.
    #[test]
    fn valid_record_timestamp_is_extracted() {
        for p in ALL {
            let x = TimestampExtractor::RecordTimestamp(p);
            assert_eq!(x.extract(&input(42, &Value::Null), NOT_KNOWN), Ok(42));
            assert_eq!(x.extract(&input(0, &Value::Null), 7), Ok(0));
        }
    }

    // FailOnInvalidTimestampTest.failOnInvalidTimestamp
    #[test]
    fn fail_on_invalid_timestamp() {
        let x = TimestampExtractor::RecordTimestamp(OnInvalid::Fail);
        let err = x.extract(&input(-1, &Value::Null), 42).unwrap_err();
        assert!(err
            .reason
            .starts_with("record has an invalid (negative) timestamp -1."));
        assert!(err.reason.contains("Use a different timestamp extractor"));
    }

    // LogAndSkipOnInvalidTimestampTest.logAndSkipOnInvalidTimestamp
    #[test]
    fn log_and_skip_returns_negative_unchanged() {
        let x = TimestampExtractor::RecordTimestamp(OnInvalid::Skip);
        assert_eq!(x.extract(&input(-42, &Value::Null), 0), Ok(-42));
    }

    // UsePartitionTimeOnInvalidTimestampTest
    #[test]
    fn use_partition_time_on_invalid() {
        let x = TimestampExtractor::RecordTimestamp(OnInvalid::PartitionTime);
        assert_eq!(x.extract(&input(-1, &Value::Null), 42), Ok(42));
        assert_eq!(x.extract(&input(-1, &Value::Null), 0), Ok(0));
        let err = x.extract(&input(-1, &Value::Null), NOT_KNOWN).unwrap_err();
        assert_eq!(
            err.reason,
            "could not infer a new timestamp for the input record because partition time is \
             unknown (the record's own timestamp -1 is invalid (negative))"
        );
    }

    // WallclockTimestampExtractorTest.extractSystemTimestamp
    #[test]
    fn wall_clock_lies_between_readings() {
        let before = wall_clock_ms();
        let got = TimestampExtractor::WallClock
            .extract(&input(-5, &Value::Null), NOT_KNOWN)
            .unwrap();
        let after = wall_clock_ms();
        assert!(before <= got && got <= after);
    }

    fn json(text: &str) -> Value {
        crate::serde::json_from_slice(text.as_bytes()).unwrap()
    }

    fn field(path: &str, unit: TimeUnit, p: OnInvalid) -> TimestampExtractor {
        TimestampExtractor::json_field(path, unit, p).unwrap()
    }

    #[test]
    fn json_field_path_validation() {
        for bad in ["", ".", "a..b", ".a", "a."] {
            assert!(
                TimestampExtractor::json_field(bad, TimeUnit::Millis, OnInvalid::Fail).is_err()
            );
        }
        assert_eq!(
            field("meta.ts", TimeUnit::Millis, OnInvalid::Skip),
            TimestampExtractor::JsonField {
                path: vec!["meta".into(), "ts".into()],
                unit: TimeUnit::Millis,
                on_invalid: OnInvalid::Skip
            }
        );
    }

    #[test]
    fn json_field_millis() {
        let x = field("meta.ts", TimeUnit::Millis, OnInvalid::Fail);
        for (doc, want) in [
            (r#"{"meta": {"ts": 1700000000123}}"#, 1_700_000_000_123),
            (r#"{"meta": {"ts": 1.7e12}}"#, 1_700_000_000_000),
            (r#"{"meta": {"ts": 0}}"#, 0),
        ] {
            assert_eq!(
                x.extract(&input(-1, &json(doc)), NOT_KNOWN),
                Ok(want),
                "{doc}"
            );
        }
        for v in [
            Value::Short(5),
            Value::Int(5),
            Value::UnsignedLong(5),
            Value::Float(5.0),
        ] {
            let doc = Value::Map(vec![("meta".into(), Value::Map(vec![("ts".into(), v)]))]);
            assert_eq!(x.extract(&input(-1, &doc), NOT_KNOWN), Ok(5));
        }
        for (doc, why) in [
            (r#"{"meta": {}}"#, "JSON field 'meta.ts' is missing"),
            (r#"{"other": 1}"#, "JSON field 'meta.ts' is missing"),
            (r#"{"meta": 5}"#, "JSON field 'meta.ts' is missing"),
            (r#"{"meta": {"ts": null}}"#, "JSON field 'meta.ts' is null"),
            (r#"{"meta": {"ts": "1700000000000"}}"#, "holds a String"),
            (r#"{"meta": {"ts": 1.5}}"#, "not a whole number"),
            (r#"{"meta": {"ts": 18446744073709551615}}"#, "too large"),
            (r#"{"meta": {"ts": -5}}"#, "negative timestamp -5"),
            (r#"{"meta": {"ts": 1e300}}"#, "out of range"),
        ] {
            let err = x.extract(&input(10, &json(doc)), 99).unwrap_err();
            assert!(err.reason.contains(why), "{doc}: {err}");
        }
        let err = x.extract(&input(10, &Value::Long(3)), 99).unwrap_err();
        assert!(err.reason.contains("not a JSON object"), "{err}");
        let err = x.extract(&input(10, &Value::Null), 99).unwrap_err();
        assert!(err.reason.contains("record value is null"), "{err}");
    }

    #[test]
    fn json_field_policies() {
        let missing = json(r#"{"a": 1}"#);
        let negative = json(r#"{"ts": -5}"#);
        let skip = field("ts", TimeUnit::Millis, OnInvalid::Skip);
        assert_eq!(skip.extract(&input(100, &missing), 50), Ok(NOT_KNOWN));
        assert_eq!(skip.extract(&input(100, &negative), 50), Ok(-5));
        let pt = field("ts", TimeUnit::Millis, OnInvalid::PartitionTime);
        assert_eq!(pt.extract(&input(100, &missing), 50), Ok(50));
        assert_eq!(pt.extract(&input(100, &negative), 50), Ok(50));
        let err = pt.extract(&input(100, &missing), NOT_KNOWN).unwrap_err();
        assert!(err.reason.contains("partition time is unknown"), "{err}");
        assert!(err.reason.contains("JSON field 'ts' is missing"), "{err}");
        let fail = field("ts", TimeUnit::Millis, OnInvalid::Fail);
        assert!(fail.extract(&input(100, &missing), 50).is_err());
    }

    #[test]
    fn json_field_from_raw_bytes_and_strings() {
        let x = field("meta.ts", TimeUnit::Millis, OnInvalid::Fail);
        let raw = br#"{"big": [1, 2, {"ts": 3}], "meta": {"ts": 77}}"#;
        let kept = Value::Bytes(raw.to_vec());
        assert_eq!(x.extract(&input(-1, &kept), NOT_KNOWN), Ok(77));
        let kept_str = Value::String(String::from_utf8(raw.to_vec()).unwrap());
        assert_eq!(x.extract(&input(-1, &kept_str), NOT_KNOWN), Ok(77));
        let with_raw = ExtractInput {
            record_timestamp: -1,
            value: &Value::Bytes(vec![]),
            raw_value: Some(raw),
        };
        assert_eq!(x.extract(&with_raw, NOT_KNOWN), Ok(77));
        let garbage = Value::Bytes(b"{not json".to_vec());
        let err = x.extract(&input(-1, &garbage), NOT_KNOWN).unwrap_err();
        assert!(err.reason.contains("not valid JSON"), "{err}");
        let skip = field("meta.ts", TimeUnit::Millis, OnInvalid::Skip);
        assert_eq!(skip.extract(&input(-1, &garbage), NOT_KNOWN), Ok(NOT_KNOWN));
    }

    #[test]
    fn json_field_seconds() {
        let x = field("t", TimeUnit::Seconds, OnInvalid::Fail);
        for (doc, want) in [
            (r#"{"t": 1700000000}"#, 1_700_000_000_000),
            (r#"{"t": 1700000000.123}"#, 1_700_000_000_123),
            (r#"{"t": 1700000000.1239}"#, 1_700_000_000_123),
            (r#"{"t": 0.0015}"#, 1),
            (r#"{"t": 1.005}"#, 1005),
            (r#"{"t": 0}"#, 0),
        ] {
            assert_eq!(
                x.extract(&input(-1, &json(doc)), NOT_KNOWN),
                Ok(want),
                "{doc}"
            );
        }
        for doc in [
            r#"{"t": -1}"#,
            r#"{"t": -0.5}"#,
            r#"{"t": 9223372036854775807}"#,
            r#"{"t": "1700000000"}"#,
            r#"{"t": true}"#,
        ] {
            assert!(
                x.extract(&input(-1, &json(doc)), NOT_KNOWN).is_err(),
                "{doc}"
            );
        }
    }

    #[test]
    fn json_field_iso8601() {
        let x = field("when", TimeUnit::Iso8601, OnInvalid::Fail);
        let doc = json(r#"{"when": "2024-03-01T12:00:00.5+01:00"}"#);
        assert_eq!(
            x.extract(&input(-1, &doc), NOT_KNOWN),
            Ok(1_709_290_800_500)
        );
        let err = x
            .extract(&input(-1, &json(r#"{"when": 1709290800}"#)), NOT_KNOWN)
            .unwrap_err();
        assert!(err.reason.contains("ISO-8601 string was expected"), "{err}");
        let err = x
            .extract(
                &input(-1, &json(r#"{"when": "2024-03-01T12:00:00"}"#)),
                NOT_KNOWN,
            )
            .unwrap_err();
        assert!(err.reason.contains("UTC offset"), "{err}");
        let err = x
            .extract(
                &input(-1, &json(r#"{"when": "1969-12-31T23:59:59Z"}"#)),
                NOT_KNOWN,
            )
            .unwrap_err();
        assert!(err.reason.contains("negative timestamp -1000"), "{err}");
    }

    #[test]
    fn iso8601_parser() {
        let ok = |s: &str| parse_iso8601_ms(s).unwrap_or_else(|e| panic!("{s}: {e}"));
        assert_eq!(ok("1970-01-01T00:00:00Z"), 0);
        assert_eq!(ok("2024-03-01T12:00:00Z"), 1_709_294_400_000);
        assert_eq!(ok("2024-03-01 12:00:00Z"), 1_709_294_400_000);
        assert_eq!(ok("2024-03-01t12:00:00z"), 1_709_294_400_000);
        assert_eq!(ok("2024-03-01T12:00:00.123+01:00"), 1_709_290_800_123);
        assert_eq!(ok("2024-03-01T12:00:00.123+0100"), 1_709_290_800_123);
        assert_eq!(ok("2024-03-01T12:00:00.123456Z"), 1_709_294_400_123);
        assert_eq!(ok("2024-03-01T12:00:00.123456789Z"), 1_709_294_400_123);
        assert_eq!(ok("2024-03-01T12:00:00,1Z"), 1_709_294_400_100);
        assert_eq!(ok("2024-03-01T12:00:00.12Z"), 1_709_294_400_120);
        assert_eq!(ok("2024-03-01T07:30:00-04:30"), 1_709_294_400_000);
        assert_eq!(ok("2024-03-01T07:30:00-0430"), 1_709_294_400_000);
        // Leap years: 2024 and 2000 have Feb 29, 1900 and 2023 do not.
        assert_eq!(ok("2024-02-29T00:00:00Z"), 1_709_164_800_000);
        assert_eq!(ok("2000-02-29T00:00:00Z"), 951_782_400_000);
        assert_eq!(
            ok("2000-03-01T00:00:00Z") - ok("2000-02-28T00:00:00Z"),
            2 * 86_400_000
        );
        assert_eq!(
            ok("2100-03-01T00:00:00Z") - ok("2100-02-28T00:00:00Z"),
            86_400_000
        );
        assert_eq!(ok("1969-12-31T23:59:59.999Z"), -1);
        assert_eq!(ok("1900-01-01T00:00:00Z"), -2_208_988_800_000);
        assert_eq!(ok("9999-12-31T23:59:59.999Z"), 253_402_300_799_999);
        assert_eq!(ok("2024-12-31T23:59:59+23:59"), 1_735_603_259_000);
        for bad in [
            "",
            "2024-13-01T00:00:00Z",
            "2024-00-01T00:00:00Z",
            "2024-02-30T00:00:00Z",
            "2023-02-29T00:00:00Z",
            "1900-02-29T00:00:00Z",
            "2024-04-31T00:00:00Z",
            "2024-01-00T00:00:00Z",
            "2024-03-01T24:00:00Z",
            "2024-03-01T12:60:00Z",
            "2024-03-01T12:00:60Z",
            "2024-03-01T12:00:00",
            "2024-03-01T12:00Z",
            "2024-03-01",
            "2024-03-01X12:00:00Z",
            "2024-3-01T12:00:00Z",
            "2024-03-01T12:00:00.Z",
            "2024-03-01T12:00:00.1234567890Z",
            "2024-03-01T12:00:00+24:00",
            "2024-03-01T12:00:00+01:60",
            "2024-03-01T12:00:00+1",
            "2024-03-01T12:00:00+01:0",
            "2024-03-01T12:00:00Z ",
            "2024-03-01T12:00:00ZZ",
            "+2024-03-01T12:00:00Z",
            "２０２４-03-01T12:00:00Z",
        ] {
            assert!(parse_iso8601_ms(bad).is_err(), "{bad:?} should be rejected");
        }
        let err = parse_iso8601_ms("2024-02-30T00:00:00Z").unwrap_err();
        assert!(err.reason.contains("does not exist"), "{err}");
    }
}
