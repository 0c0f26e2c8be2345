//! The decoded value tree shared by every deserializer.
//!
//! One tree type for all formats keeps the Python binding to a single conversion routine and
//! lets the timestamp extractors look into a value without knowing whether it came from JSON
//! or Avro.

use std::fmt;

/// A decoded key or value.
///
/// Avro values map onto it as: enum → `String`, fixed → `Bytes`, union → the chosen branch's
/// value, record and map → `Map`, `date`/`time-millis` → `Int`, `time-micros` and timestamps →
/// `Long`, `decimal`/`duration` → their raw `Bytes`, `uuid` → `Uuid`.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// An absent record key or value (Kafka's `null`), JSON `null`, Avro `null`.
    Null,
    /// JSON `true`/`false`, Avro `boolean`.
    Bool(bool),
    /// Kafka's `ShortSerde`.
    Short(i16),
    /// Kafka's `IntegerSerde`, Avro `int`.
    Int(i32),
    /// Kafka's `LongSerde`, Avro `long`, JSON integers that fit in an `i64`.
    Long(i64),
    /// JSON integers above `i64::MAX` (up to `u64::MAX`), kept exact instead of rounded.
    UnsignedLong(u64),
    /// Kafka's `FloatSerde`, Avro `float`.
    Float(f32),
    /// Kafka's `DoubleSerde`, Avro `double`, JSON non-integral numbers.
    Double(f64),
    /// Raw bytes: Kafka's `ByteArraySerde`, Avro `bytes` and `fixed`.
    Bytes(Vec<u8>),
    /// Kafka's `StringSerde`, JSON strings, Avro `string` and `enum` symbols.
    String(String),
    /// Kafka's `UUIDSerde`, Avro `uuid`; kept as 16 raw bytes (big-endian, RFC 4122 order).
    Uuid([u8; 16]),
    /// JSON arrays, Avro arrays.
    Array(Vec<Value>),
    /// JSON objects, Avro records and maps, in source order.
    ///
    /// Duplicate JSON keys are all kept; lookups ([`Value::get`]) return the last one, as
    /// Python's `json` module and a `dict` built from the pairs would.
    Map(Vec<(String, Value)>),
}

impl Value {
    /// A short type name for error messages ("expected a Long, got a String").
    pub fn type_name(&self) -> &'static str {
        match self {
            Value::Null => "null",
            Value::Bool(_) => "boolean",
            Value::Short(_) => "Short",
            Value::Int(_) => "Int",
            Value::Long(_) => "Long",
            Value::UnsignedLong(_) => "UnsignedLong",
            Value::Float(_) => "Float",
            Value::Double(_) => "Double",
            Value::Bytes(_) => "Bytes",
            Value::String(_) => "String",
            Value::Uuid(_) => "Uuid",
            Value::Array(_) => "Array",
            Value::Map(_) => "Map",
        }
    }

    /// True for [`Value::Null`]; saves a `matches!` at every call site.
    pub fn is_null(&self) -> bool {
        matches!(self, Value::Null)
    }

    /// The entry named `key` of a `Map` (the last one when keys repeat); `None` for other
    /// variants, so callers can chain lookups without matching.
    pub fn get(&self, key: &str) -> Option<&Value> {
        match self {
            Value::Map(entries) => entries.iter().rev().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }

    /// Follows `path` through nested `Map`s (`["meta", "ts"]` for the dotted path `meta.ts`).
    ///
    /// An empty path returns `self`; any missing key or non-map step returns `None`, which
    /// the timestamp extractors treat as an invalid (missing) field.
    pub fn get_path<S: AsRef<str>>(&self, path: &[S]) -> Option<&Value> {
        path.iter().try_fold(self, |v, key| v.get(key.as_ref()))
    }

    /// The value as an `i64` when it is an integer that fits; floats are not converted, so a
    /// caller cannot silently lose a fractional part.
    pub fn as_i64(&self) -> Option<i64> {
        match *self {
            Value::Short(v) => Some(i64::from(v)),
            Value::Int(v) => Some(i64::from(v)),
            Value::Long(v) => Some(v),
            Value::UnsignedLong(v) => i64::try_from(v).ok(),
            _ => None,
        }
    }

    /// The value as an `f64` for any numeric variant (integers may round above 2^53).
    pub fn as_f64(&self) -> Option<f64> {
        match *self {
            Value::Short(v) => Some(f64::from(v)),
            Value::Int(v) => Some(f64::from(v)),
            Value::Long(v) => Some(v as f64),
            Value::UnsignedLong(v) => Some(v as f64),
            Value::Float(v) => Some(f64::from(v)),
            Value::Double(v) => Some(v),
            _ => None,
        }
    }

    /// The value as text when it is a `String`.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::String(s) => Some(s),
            _ => None,
        }
    }

    /// The value as raw bytes when it is `Bytes`.
    pub fn as_bytes(&self) -> Option<&[u8]> {
        match self {
            Value::Bytes(b) => Some(b),
            _ => None,
        }
    }

    /// The value as a boolean when it is a `Bool`.
    pub fn as_bool(&self) -> Option<bool> {
        match *self {
            Value::Bool(b) => Some(b),
            _ => None,
        }
    }
}

/// Formats 16 UUID bytes in the canonical lower-case 8-4-4-4-12 form, as Java's
/// `UUID.toString()` (and so Kafka's `UUIDSerializer`) writes it.
pub fn format_uuid(bytes: &[u8; 16]) -> String {
    let mut out = String::with_capacity(36);
    write_uuid(bytes, &mut out);
    out
}

/// Appends the canonical form of a UUID to `out`, avoiding a temporary `String`.
pub(crate) fn write_uuid(bytes: &[u8; 16], out: &mut String) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    for (i, b) in bytes.iter().enumerate() {
        if matches!(i, 4 | 6 | 8 | 10) {
            out.push('-');
        }
        out.push(HEX[usize::from(b >> 4)] as char);
        out.push(HEX[usize::from(b & 0xf)] as char);
    }
}

/// Parses the canonical 36-character 8-4-4-4-12 UUID form (either letter case).
///
/// Stricter than Java's `UUID.fromString` (which accepts shortened groups such as `1-1-1-1-1`)
/// because a shortened form is almost always a bug upstream and silently padding it hides it.
pub fn parse_uuid(text: &[u8]) -> Option<[u8; 16]> {
    if text.len() != 36 {
        return None;
    }
    let mut out = [0u8; 16];
    let mut nibbles = 0usize;
    for (i, &c) in text.iter().enumerate() {
        if matches!(i, 8 | 13 | 18 | 23) {
            if c != b'-' {
                return None;
            }
            continue;
        }
        let v = match c {
            b'0'..=b'9' => c - b'0',
            b'a'..=b'f' => c - b'a' + 10,
            b'A'..=b'F' => c - b'A' + 10,
            _ => return None,
        };
        out[nibbles / 2] |= if nibbles.is_multiple_of(2) { v << 4 } else { v };
        nibbles += 1;
    }
    Some(out)
}

impl fmt::Display for Value {
    /// A compact, JSON-like rendering for log and error messages.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::Null => f.write_str("null"),
            Value::Bool(v) => write!(f, "{v}"),
            Value::Short(v) => write!(f, "{v}"),
            Value::Int(v) => write!(f, "{v}"),
            Value::Long(v) => write!(f, "{v}"),
            Value::UnsignedLong(v) => write!(f, "{v}"),
            Value::Float(v) => write!(f, "{v}"),
            Value::Double(v) => write!(f, "{v}"),
            Value::Bytes(b) => write!(f, "<{} bytes>", b.len()),
            Value::String(s) => write!(f, "{s:?}"),
            Value::Uuid(u) => f.write_str(&format_uuid(u)),
            Value::Array(items) => {
                f.write_str("[")?;
                for (i, v) in items.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{v}")?;
                }
                f.write_str("]")
            }
            Value::Map(entries) => {
                f.write_str("{")?;
                for (i, (k, v)) in entries.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{k:?}: {v}")?;
                }
                f.write_str("}")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Value {
        Value::Map(vec![
            ("a".into(), Value::Long(1)),
            (
                "meta".into(),
                Value::Map(vec![("ts".into(), Value::Long(42))]),
            ),
            ("a".into(), Value::Long(2)),
        ])
    }

    #[test]
    fn get_path_walks_nested_maps() {
        let v = sample();
        assert_eq!(v.get_path(&["meta", "ts"]), Some(&Value::Long(42)));
        assert_eq!(v.get_path(&["meta", "nope"]), None);
        assert_eq!(v.get_path(&["a", "b"]), None);
        assert_eq!(v.get_path::<&str>(&[]), Some(&v));
        assert_eq!(
            v.get_path(&[String::from("meta")]).map(Value::type_name),
            Some("Map")
        );
    }

    #[test]
    fn duplicate_keys_last_wins() {
        assert_eq!(sample().get("a"), Some(&Value::Long(2)));
    }

    #[test]
    fn numeric_accessors() {
        assert_eq!(Value::Short(-3).as_i64(), Some(-3));
        assert_eq!(Value::UnsignedLong(u64::MAX).as_i64(), None);
        assert_eq!(Value::UnsignedLong(5).as_i64(), Some(5));
        assert_eq!(Value::Double(1.5).as_i64(), None);
        assert_eq!(Value::Float(1.5).as_f64(), Some(1.5));
        assert_eq!(Value::String("x".into()).as_str(), Some("x"));
        assert_eq!(Value::Bool(true).as_bool(), Some(true));
        assert_eq!(Value::Bytes(vec![1]).as_bytes(), Some(&[1u8][..]));
        assert!(Value::Null.is_null());
    }

    #[test]
    fn uuid_text_round_trip() {
        let text = "123e4567-e89b-12d3-a456-426614174000";
        let bytes = parse_uuid(text.as_bytes()).unwrap();
        assert_eq!(bytes[0], 0x12);
        assert_eq!(bytes[15], 0x00);
        assert_eq!(format_uuid(&bytes), text);
        assert_eq!(
            parse_uuid(b"123E4567-E89B-12D3-A456-426614174000"),
            Some(bytes)
        );
        assert_eq!(parse_uuid(b"123e4567e89b12d3a456426614174000"), None);
        assert_eq!(parse_uuid(b"123e4567-e89b-12d3-a456-42661417400g"), None);
        assert_eq!(parse_uuid(b"123e4567-e89b-12d3-a456_426614174000"), None);
        assert_eq!(parse_uuid(b"1-1-1-1-1"), None);
    }

    #[test]
    fn display_is_compact() {
        assert_eq!(
            sample().to_string(),
            r#"{"a": 1, "meta": {"ts": 42}, "a": 2}"#
        );
        assert_eq!(
            Value::Array(vec![Value::Null, Value::Bytes(vec![1, 2])]).to_string(),
            "[null, <2 bytes>]"
        );
    }
}
