//! Kafka's built-in serdes (plus JSON and Confluent-framed Avro) over the [`Value`] tree.
//!
//! Wire formats follow Apache Kafka's `org.apache.kafka.common.serialization` classes so that
//! bytes written by a Java producer decode here and vice versa: fixed-width numbers are
//! big-endian with an exact length, strings are UTF-8, and UUIDs travel as their 36-character
//! text form (`UUIDSerializer` writes `uuid.toString()`, not 16 raw bytes).
//!
//! Errors carry only *what* is wrong with the bytes; the caller knows the topic, partition
//! and offset and adds them.

use std::fmt;

use serde::de::{self, Deserialize, DeserializeSeed, MapAccess, SeqAccess, Visitor};
use serde::ser::{self, Serialize, SerializeMap, SerializeSeq};

pub use crate::avro::{AvroDeserializer, AvroSerializer};
use crate::value::{parse_uuid, write_uuid, Value};

/// Why bytes could not be turned into a [`Value`].
///
/// Only the reason is kept: record coordinates are added by the caller, which knows them.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{reason}")]
pub struct DeserializeError {
    /// A complete, human-readable sentence such as "expected 8 bytes for a Long, got 3".
    pub reason: String,
}

impl DeserializeError {
    /// Builds an error from any message; keeps construction terse at the many call sites.
    pub fn new(reason: impl Into<String>) -> Self {
        DeserializeError {
            reason: reason.into(),
        }
    }
}

/// Why a [`Value`] could not be turned into bytes (usually a type mismatch with the serde).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{reason}")]
pub struct SerializeError {
    /// A complete, human-readable sentence such as "LongSerializer expects an integer, got a String".
    pub reason: String,
}

impl SerializeError {
    /// Builds an error from any message; keeps construction terse at the many call sites.
    pub fn new(reason: impl Into<String>) -> Self {
        SerializeError {
            reason: reason.into(),
        }
    }
}

/// Decodes record keys or values; one variant per supported Kafka serde.
#[derive(Debug, Clone)]
pub enum Deserializer {
    /// `ByteArrayDeserializer`: the bytes unchanged.
    Bytes,
    /// `StringDeserializer` with UTF-8; invalid UTF-8 is an error rather than U+FFFD
    /// replacement, so corrupt data is noticed instead of silently altered.
    String,
    /// `ShortDeserializer`: exactly 2 big-endian bytes.
    Short,
    /// `IntegerDeserializer`: exactly 4 big-endian bytes.
    Integer,
    /// `LongDeserializer`: exactly 8 big-endian bytes.
    Long,
    /// `FloatDeserializer`: exactly 4 bytes, big-endian IEEE 754.
    Float,
    /// `DoubleDeserializer`: exactly 8 bytes, big-endian IEEE 754.
    Double,
    /// `UUIDDeserializer`: the UTF-8 text form `xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx`.
    Uuid,
    /// One UTF-8 JSON document; objects keep their key order.
    Json,
    /// Confluent-framed Avro with a fixed writer schema.
    Avro(AvroDeserializer),
}

impl Deserializer {
    /// Decodes one key or value; `None` (a Kafka null, e.g. a tombstone) is always
    /// `Ok(Value::Null)`, as every Kafka deserializer returns `null` for `null`.
    pub fn deserialize(&self, data: Option<&[u8]>) -> Result<Value, DeserializeError> {
        let Some(data) = data else {
            return Ok(Value::Null);
        };
        match self {
            Deserializer::Bytes => Ok(Value::Bytes(data.to_vec())),
            Deserializer::String => match std::str::from_utf8(data) {
                Ok(s) => Ok(Value::String(s.to_owned())),
                Err(e) => Err(DeserializeError::new(format!(
                    "String data is not valid UTF-8: {e}"
                ))),
            },
            Deserializer::Short => {
                fixed::<2>(data, "Short").map(|b| Value::Short(i16::from_be_bytes(b)))
            }
            Deserializer::Integer => {
                fixed::<4>(data, "Integer").map(|b| Value::Int(i32::from_be_bytes(b)))
            }
            Deserializer::Long => {
                fixed::<8>(data, "Long").map(|b| Value::Long(i64::from_be_bytes(b)))
            }
            Deserializer::Float => {
                fixed::<4>(data, "Float").map(|b| Value::Float(f32::from_be_bytes(b)))
            }
            Deserializer::Double => {
                fixed::<8>(data, "Double").map(|b| Value::Double(f64::from_be_bytes(b)))
            }
            Deserializer::Uuid => parse_uuid(data).map(Value::Uuid).ok_or_else(|| {
                DeserializeError::new(format!(
                    "UUID data is not a 36-character UUID string \
                     (xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx): {}",
                    preview(data)
                ))
            }),
            Deserializer::Json => json_from_slice(data),
            Deserializer::Avro(avro) => avro.deserialize(data),
        }
    }

    /// Kafka's name for the serde ("LongDeserializer"…), for configuration echo and messages.
    pub fn name(&self) -> &'static str {
        match self {
            Deserializer::Bytes => "ByteArrayDeserializer",
            Deserializer::String => "StringDeserializer",
            Deserializer::Short => "ShortDeserializer",
            Deserializer::Integer => "IntegerDeserializer",
            Deserializer::Long => "LongDeserializer",
            Deserializer::Float => "FloatDeserializer",
            Deserializer::Double => "DoubleDeserializer",
            Deserializer::Uuid => "UUIDDeserializer",
            Deserializer::Json => "JsonDeserializer",
            Deserializer::Avro(_) => "KafkaAvroDeserializer",
        }
    }
}

/// Encodes record keys or values; the mirror image of [`Deserializer`].
#[derive(Debug, Clone)]
pub enum Serializer {
    /// `ByteArraySerializer`: accepts `Bytes` only.
    Bytes,
    /// `StringSerializer` (UTF-8): accepts `String` only.
    String,
    /// `ShortSerializer`: any integer that fits in an `i16`.
    Short,
    /// `IntegerSerializer`: any integer that fits in an `i32`.
    Integer,
    /// `LongSerializer`: any integer that fits in an `i64`.
    Long,
    /// `FloatSerializer`: any number, rounded to `f32`.
    Float,
    /// `DoubleSerializer`: any number, as `f64`.
    Double,
    /// `UUIDSerializer`: a `Uuid` or a string in UUID form, written as lower-case text.
    Uuid,
    /// Compact JSON; `Bytes` become base64 strings (as Jackson writes `byte[]`), `Uuid`s
    /// their text form; NaN and infinities are rejected because JSON cannot express them.
    Json,
    /// Confluent-framed Avro with a fixed writer schema.
    Avro(AvroSerializer),
}

impl Serializer {
    /// Encodes one key or value; `Value::Null` becomes a Kafka null (`None`), as Kafka's
    /// serializers map `null` to `null`.
    pub fn serialize(&self, v: &Value) -> Result<Option<Vec<u8>>, SerializeError> {
        if v.is_null() {
            return Ok(None);
        }
        let bytes = match self {
            Serializer::Bytes => match v {
                Value::Bytes(b) => b.clone(),
                other => return Err(mismatch(self.name(), "Bytes", other)),
            },
            Serializer::String => match v {
                Value::String(s) => s.as_bytes().to_vec(),
                other => return Err(mismatch(self.name(), "a String", other)),
            },
            Serializer::Short => {
                let n = integer_in::<i16>(v, self.name(), "a Short")?;
                n.to_be_bytes().to_vec()
            }
            Serializer::Integer => {
                let n = integer_in::<i32>(v, self.name(), "an Integer")?;
                n.to_be_bytes().to_vec()
            }
            Serializer::Long => {
                let n = integer_in::<i64>(v, self.name(), "a Long")?;
                n.to_be_bytes().to_vec()
            }
            Serializer::Float => match v.as_f64() {
                Some(x) => (x as f32).to_be_bytes().to_vec(),
                None => return Err(mismatch(self.name(), "a number", v)),
            },
            Serializer::Double => match v.as_f64() {
                Some(x) => x.to_be_bytes().to_vec(),
                None => return Err(mismatch(self.name(), "a number", v)),
            },
            Serializer::Uuid => {
                let bytes = match v {
                    Value::Uuid(u) => *u,
                    Value::String(s) => parse_uuid(s.as_bytes()).ok_or_else(|| {
                        SerializeError::new(format!(
                            "UUIDSerializer got a String that is not a UUID: {s:?}"
                        ))
                    })?,
                    other => return Err(mismatch(self.name(), "a Uuid", other)),
                };
                let mut text = String::with_capacity(36);
                write_uuid(&bytes, &mut text);
                text.into_bytes()
            }
            Serializer::Json => json_to_vec(v)?,
            Serializer::Avro(avro) => avro.serialize(v)?,
        };
        Ok(Some(bytes))
    }

    /// Kafka's name for the serde ("LongSerializer"…), for configuration echo and messages.
    pub fn name(&self) -> &'static str {
        match self {
            Serializer::Bytes => "ByteArraySerializer",
            Serializer::String => "StringSerializer",
            Serializer::Short => "ShortSerializer",
            Serializer::Integer => "IntegerSerializer",
            Serializer::Long => "LongSerializer",
            Serializer::Float => "FloatSerializer",
            Serializer::Double => "DoubleSerializer",
            Serializer::Uuid => "UUIDSerializer",
            Serializer::Json => "JsonSerializer",
            Serializer::Avro(_) => "KafkaAvroSerializer",
        }
    }
}

fn fixed<const N: usize>(data: &[u8], what: &str) -> Result<[u8; N], DeserializeError> {
    data.try_into().map_err(|_| {
        let article = if what.starts_with(['A', 'E', 'I', 'O', 'U']) {
            "an"
        } else {
            "a"
        };
        DeserializeError::new(format!(
            "expected {N} bytes for {article} {what}, got {}",
            data.len()
        ))
    })
}

/// The first bytes of bad input, escaped, so an error shows what was actually received.
pub(crate) fn preview(data: &[u8]) -> String {
    const MAX: usize = 48;
    let shown = &data[..data.len().min(MAX)];
    let mut s = String::from("b\"");
    s.extend(
        shown
            .iter()
            .flat_map(|b| std::ascii::escape_default(*b).map(char::from)),
    );
    s.push('"');
    if data.len() > MAX {
        s.push_str(&format!("... ({} bytes)", data.len()));
    }
    s
}

fn mismatch(serde: &str, expected: &str, got: &Value) -> SerializeError {
    SerializeError::new(format!(
        "{serde} expects {expected}, got a {}",
        got.type_name()
    ))
}

fn integer_in<T: TryFrom<i64>>(v: &Value, serde: &str, what: &str) -> Result<T, SerializeError> {
    let n = match *v {
        Value::UnsignedLong(u) => i64::try_from(u).ok(),
        _ => match v.as_i64() {
            Some(n) => Some(n),
            None => return Err(mismatch(serde, "an integer", v)),
        },
    };
    n.and_then(|n| T::try_from(n).ok())
        .ok_or_else(|| SerializeError::new(format!("{serde}: {v} is out of range for {what}")))
}

// ---------------------------------------------------------------------------------------
// JSON
// ---------------------------------------------------------------------------------------

/// Parses one JSON document straight into a [`Value`] (no intermediate `serde_json::Value`).
///
/// Trailing non-whitespace and invalid UTF-8 are errors; nesting is limited to serde_json's
/// default depth (128) so hostile input cannot overflow the stack.
pub fn json_from_slice(data: &[u8]) -> Result<Value, DeserializeError> {
    let mut de = serde_json::Deserializer::from_slice(data);
    let value = Value::deserialize(&mut de).map_err(json_error)?;
    de.end().map_err(json_error)?;
    Ok(value)
}

pub(crate) fn json_error(e: serde_json::Error) -> DeserializeError {
    DeserializeError::new(format!("invalid JSON: {e}"))
}

/// Writes a [`Value`] as compact JSON (see [`Serializer::Json`] for the mapping).
pub fn json_to_vec(v: &Value) -> Result<Vec<u8>, SerializeError> {
    serde_json::to_vec(v).map_err(|e| SerializeError::new(format!("JsonSerializer: {e}")))
}

struct ValueVisitor;

impl<'de> Visitor<'de> for ValueVisitor {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_some<D: de::Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        Value::deserialize(d)
    }
    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::Long(v))
    }
    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(match i64::try_from(v) {
            Ok(n) => Value::Long(n),
            Err(_) => Value::UnsignedLong(v),
        })
    }
    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(Value::Double(v))
    }
    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_owned()))
    }
    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }
    fn visit_bytes<E>(self, v: &[u8]) -> Result<Value, E> {
        Ok(Value::Bytes(v.to_vec()))
    }
    fn visit_byte_buf<E>(self, v: Vec<u8>) -> Result<Value, E> {
        Ok(Value::Bytes(v))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(4096));
        while let Some(v) = seq.next_element()? {
            items.push(v);
        }
        Ok(Value::Array(items))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut entries = Vec::with_capacity(map.size_hint().unwrap_or(0).min(4096));
        while let Some(k) = map.next_key_seed(KeySeed)? {
            let v = map.next_value()?;
            entries.push((k, v));
        }
        Ok(Value::Map(entries))
    }
}

/// Deserializes object keys into an owned `String` without the `Cow` detour.
struct KeySeed;

impl<'de> DeserializeSeed<'de> for KeySeed {
    type Value = String;
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<String, D::Error> {
        d.deserialize_str(KeyVisitor)
    }
}

struct KeyVisitor;

impl Visitor<'_> for KeyVisitor {
    type Value = String;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a string key")
    }
    fn visit_str<E>(self, v: &str) -> Result<String, E> {
        Ok(v.to_owned())
    }
    fn visit_string<E>(self, v: String) -> Result<String, E> {
        Ok(v)
    }
}

/// Lets any serde format (JSON above all) decode into a [`Value`] directly.
impl<'de> Deserialize<'de> for Value {
    fn deserialize<D: de::Deserializer<'de>>(d: D) -> Result<Value, D::Error> {
        d.deserialize_any(ValueVisitor)
    }
}

/// Lets any serde format encode a [`Value`]; used by [`Serializer::Json`].
impl Serialize for Value {
    fn serialize<S: ser::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Value::Null => s.serialize_unit(),
            Value::Bool(v) => s.serialize_bool(*v),
            Value::Short(v) => s.serialize_i16(*v),
            Value::Int(v) => s.serialize_i32(*v),
            Value::Long(v) => s.serialize_i64(*v),
            Value::UnsignedLong(v) => s.serialize_u64(*v),
            Value::Float(v) if v.is_finite() => s.serialize_f32(*v),
            Value::Double(v) if v.is_finite() => s.serialize_f64(*v),
            Value::Float(_) | Value::Double(_) => Err(ser::Error::custom(format!(
                "{self} cannot be written as JSON (JSON has no NaN or infinity)"
            ))),
            Value::Bytes(b) => s.serialize_str(&base64(b)),
            Value::String(v) => s.serialize_str(v),
            Value::Uuid(u) => {
                let mut text = String::with_capacity(36);
                write_uuid(u, &mut text);
                s.serialize_str(&text)
            }
            Value::Array(items) => {
                let mut seq = s.serialize_seq(Some(items.len()))?;
                for v in items {
                    seq.serialize_element(v)?;
                }
                seq.end()
            }
            Value::Map(entries) => {
                let mut map = s.serialize_map(Some(entries.len()))?;
                for (k, v) in entries {
                    map.serialize_entry(k, v)?;
                }
                map.end()
            }
        }
    }
}

/// Standard padded base64, as Jackson writes `byte[]`.
fn base64(data: &[u8]) -> String {
    const TABLE: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(data.len().div_ceil(3) * 4);
    for chunk in data.chunks(3) {
        let b = [
            chunk[0],
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(TABLE[((n >> (18 - 6 * i)) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALL_SIMPLE: [Deserializer; 9] = [
        Deserializer::Bytes,
        Deserializer::String,
        Deserializer::Short,
        Deserializer::Integer,
        Deserializer::Long,
        Deserializer::Float,
        Deserializer::Double,
        Deserializer::Uuid,
        Deserializer::Json,
    ];

    fn round_trip(ser: &Serializer, de: &Deserializer, v: Value) {
        let bytes = ser.serialize(&v).unwrap();
        assert_eq!(
            de.deserialize(bytes.as_deref()).unwrap(),
            v,
            "{}",
            ser.name()
        );
    }

    #[test]
    fn null_is_null_everywhere() {
        for de in ALL_SIMPLE {
            assert_eq!(de.deserialize(None).unwrap(), Value::Null);
        }
        assert_eq!(Serializer::Long.serialize(&Value::Null).unwrap(), None);
        assert_eq!(Serializer::Json.serialize(&Value::Null).unwrap(), None);
    }

    #[test]
    fn kafka_exact_bytes() {
        let b = |s: &Serializer, v: Value| s.serialize(&v).unwrap().unwrap();
        assert_eq!(
            b(&Serializer::Long, Value::Long(1)),
            [0, 0, 0, 0, 0, 0, 0, 1]
        );
        assert_eq!(
            b(&Serializer::Long, Value::Long(-2)),
            [0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xfe]
        );
        assert_eq!(b(&Serializer::Integer, Value::Int(258)), [0, 0, 1, 2]);
        assert_eq!(b(&Serializer::Short, Value::Short(-1)), [0xff, 0xff]);
        assert_eq!(
            b(&Serializer::Double, Value::Double(1.0)),
            [0x3f, 0xf0, 0, 0, 0, 0, 0, 0]
        );
        assert_eq!(b(&Serializer::Float, Value::Float(1.0)), [0x3f, 0x80, 0, 0]);
        assert_eq!(
            b(&Serializer::String, Value::String("hé".into())),
            "hé".as_bytes()
        );
        let uuid = parse_uuid(b"123E4567-e89b-12d3-a456-426614174000").unwrap();
        assert_eq!(
            b(&Serializer::Uuid, Value::Uuid(uuid)),
            b"123e4567-e89b-12d3-a456-426614174000"
        );
        assert_eq!(
            Deserializer::Long
                .deserialize(Some(&[0, 0, 0, 0, 0, 0, 0, 1]))
                .unwrap(),
            Value::Long(1)
        );
        assert_eq!(
            Deserializer::Double
                .deserialize(Some(&[0xc0, 0, 0, 0, 0, 0, 0, 0]))
                .unwrap(),
            Value::Double(-2.0)
        );
        assert_eq!(
            Deserializer::Uuid
                .deserialize(Some(b"123e4567-e89b-12d3-a456-426614174000"))
                .unwrap(),
            Value::Uuid(uuid)
        );
    }

    #[test]
    fn round_trips() {
        let uuid = parse_uuid(b"00112233-4455-6677-8899-aabbccddeeff").unwrap();
        let cases: Vec<(Serializer, Deserializer, Vec<Value>)> = vec![
            (
                Serializer::Bytes,
                Deserializer::Bytes,
                vec![Value::Bytes(vec![]), Value::Bytes(vec![0, 255, 7])],
            ),
            (
                Serializer::String,
                Deserializer::String,
                vec![
                    Value::String(String::new()),
                    Value::String("ünïcødé ✓".into()),
                ],
            ),
            (
                Serializer::Short,
                Deserializer::Short,
                vec![
                    Value::Short(i16::MIN),
                    Value::Short(0),
                    Value::Short(i16::MAX),
                ],
            ),
            (
                Serializer::Integer,
                Deserializer::Integer,
                vec![Value::Int(i32::MIN), Value::Int(-1), Value::Int(i32::MAX)],
            ),
            (
                Serializer::Long,
                Deserializer::Long,
                vec![
                    Value::Long(i64::MIN),
                    Value::Long(42),
                    Value::Long(i64::MAX),
                ],
            ),
            (
                Serializer::Float,
                Deserializer::Float,
                vec![
                    Value::Float(1.5),
                    Value::Float(f32::INFINITY),
                    Value::Float(-0.0),
                ],
            ),
            (
                Serializer::Double,
                Deserializer::Double,
                vec![Value::Double(std::f64::consts::PI), Value::Double(f64::MIN)],
            ),
            (
                Serializer::Uuid,
                Deserializer::Uuid,
                vec![Value::Uuid(uuid)],
            ),
            (
                Serializer::Json,
                Deserializer::Json,
                vec![
                    Value::Long(-7),
                    Value::UnsignedLong(u64::MAX),
                    Value::Double(0.25),
                    Value::Bool(false),
                    Value::String("a\"b\\c\n\u{1}".into()),
                    Value::Array(vec![Value::Null, Value::Long(1)]),
                    Value::Map(vec![
                        ("z".into(), Value::Long(1)),
                        ("a".into(), Value::Map(vec![])),
                        ("m".into(), Value::Array(vec![])),
                    ]),
                ],
            ),
        ];
        for (ser, de, values) in cases {
            for v in values {
                round_trip(&ser, &de, v);
            }
        }
        // NaN is not equal to itself, so check it separately.
        let nan = Serializer::Double
            .serialize(&Value::Double(f64::NAN))
            .unwrap();
        assert!(matches!(
            Deserializer::Double.deserialize(nan.as_deref()).unwrap(),
            Value::Double(x) if x.is_nan()
        ));
    }

    #[test]
    fn wrong_lengths_are_errors() {
        let err = Deserializer::Long
            .deserialize(Some(&[1, 2, 3]))
            .unwrap_err();
        assert_eq!(err.reason, "expected 8 bytes for a Long, got 3");
        let err = Deserializer::Integer.deserialize(Some(&[])).unwrap_err();
        assert_eq!(err.to_string(), "expected 4 bytes for an Integer, got 0");
        assert!(Deserializer::Short.deserialize(Some(&[1, 2, 3])).is_err());
        assert!(Deserializer::Float.deserialize(Some(&[1, 2, 3])).is_err());
        assert!(Deserializer::Double.deserialize(Some(&[0; 9])).is_err());
    }

    #[test]
    fn bad_text_is_an_error() {
        let err = Deserializer::String
            .deserialize(Some(&[b'a', 0xff]))
            .unwrap_err();
        assert!(err.reason.contains("not valid UTF-8"), "{err}");
        let err = Deserializer::Uuid
            .deserialize(Some(b"not-a-uuid"))
            .unwrap_err();
        assert!(err.reason.contains("b\"not-a-uuid\""), "{err}");
        // 16 raw bytes are not Kafka's UUID wire format.
        assert!(Deserializer::Uuid.deserialize(Some(&[0u8; 16])).is_err());
    }

    #[test]
    fn json_mapping() {
        let v = json_from_slice(
            br#"{"b": 1, "a": [true, null, 1.5, -3, 18446744073709551615, 1e400, "x"], "b": 2}"#,
        );
        // 1e400 overflows f64: serde_json rejects it, which is the precise behaviour.
        assert!(v.is_err());
        let v = json_from_slice(
            br#" {"b": 1, "a": [true, null, 1.5, -3, 18446744073709551615, 1.0, "x\u00e9"]} "#,
        )
        .unwrap();
        assert_eq!(
            v,
            Value::Map(vec![
                ("b".into(), Value::Long(1)),
                (
                    "a".into(),
                    Value::Array(vec![
                        Value::Bool(true),
                        Value::Null,
                        Value::Double(1.5),
                        Value::Long(-3),
                        Value::UnsignedLong(u64::MAX),
                        Value::Double(1.0),
                        Value::String("xé".into()),
                    ])
                ),
            ])
        );
        // Beyond u64 the number becomes a Double, as in most JSON readers.
        assert_eq!(
            json_from_slice(b"-9223372036854775809").unwrap(),
            Value::Double(-9223372036854775809.0)
        );
    }

    #[test]
    fn json_errors() {
        for bad in [
            &b""[..],
            b"{",
            b"{} x",
            b"[1,]",
            b"\"\xff\"",
            b"nul",
            b"{\"a\" 1}",
        ] {
            let err = Deserializer::Json.deserialize(Some(bad)).unwrap_err();
            assert!(err.reason.starts_with("invalid JSON: "), "{err}");
        }
        let deep = "[".repeat(100_000);
        assert!(json_from_slice(deep.as_bytes()).is_err());
    }

    #[test]
    fn json_serializer_mapping() {
        let v = Value::Map(vec![
            ("b".into(), Value::Bytes(b"hello".to_vec())),
            ("u".into(), Value::Uuid([0xab; 16])),
            ("f".into(), Value::Float(0.5)),
            ("s".into(), Value::Short(3)),
        ]);
        let out = Serializer::Json.serialize(&v).unwrap().unwrap();
        assert_eq!(
            std::str::from_utf8(&out).unwrap(),
            r#"{"b":"aGVsbG8=","u":"abababab-abab-abab-abab-abababababab","f":0.5,"s":3}"#
        );
        assert!(Serializer::Json
            .serialize(&Value::Double(f64::NAN))
            .is_err());
        assert_eq!(base64(b""), "");
        assert_eq!(base64(b"f"), "Zg==");
        assert_eq!(base64(b"fo"), "Zm8=");
        assert_eq!(base64(b"foo"), "Zm9v");
    }

    #[test]
    fn serializer_type_checks() {
        assert_eq!(
            Serializer::Long
                .serialize(&Value::String("1".into()))
                .unwrap_err()
                .reason,
            "LongSerializer expects an integer, got a String"
        );
        assert!(Serializer::Short.serialize(&Value::Long(40_000)).is_err());
        assert!(Serializer::Integer
            .serialize(&Value::UnsignedLong(u64::MAX))
            .is_err());
        assert_eq!(
            Serializer::Integer
                .serialize(&Value::Long(7))
                .unwrap()
                .unwrap(),
            [0, 0, 0, 7]
        );
        assert!(Serializer::Bytes
            .serialize(&Value::String("x".into()))
            .is_err());
        assert!(Serializer::String.serialize(&Value::Bytes(vec![])).is_err());
        assert!(Serializer::Uuid
            .serialize(&Value::String("nope".into()))
            .is_err());
        assert_eq!(
            Serializer::Uuid
                .serialize(&Value::String(
                    "123E4567-E89B-12D3-A456-426614174000".into()
                ))
                .unwrap()
                .unwrap(),
            b"123e4567-e89b-12d3-a456-426614174000"
        );
        assert!(Serializer::Double.serialize(&Value::Bool(true)).is_err());
    }

    #[test]
    fn names_follow_kafka() {
        assert_eq!(Deserializer::Long.name(), "LongDeserializer");
        assert_eq!(Deserializer::Uuid.name(), "UUIDDeserializer");
        assert_eq!(Serializer::Bytes.name(), "ByteArraySerializer");
    }
}
