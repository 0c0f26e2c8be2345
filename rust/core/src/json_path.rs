//! Pulls one field out of raw JSON bytes without building the whole document.
//!
//! The JSON-field timestamp extractor needs a single value per record; when the user keeps raw
//! values, decoding the full tree just to read `meta.ts` would allocate every other string in
//! the record. This walker skips non-matching members with `IgnoredAny` and only materializes
//! the target value.

use std::fmt;

use ::serde::de::{self, DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Visitor};
use ::serde::Deserialize;

use crate::serde::{json_error, DeserializeError};
use crate::value::Value;

/// The value at `path` inside the JSON document `data`, or `Ok(None)` when some step is missing
/// or is not an object.
///
/// The whole document is still validated (a syntax error anywhere, or trailing garbage, is an
/// error) so that results do not depend on where the field happens to sit. As in Python's
/// `json`, the last of duplicate keys wins.
pub fn extract_json_path<S: AsRef<str>>(
    data: &[u8],
    path: &[S],
) -> Result<Option<Value>, DeserializeError> {
    let mut de = serde_json::Deserializer::from_slice(data);
    let found = PathSeed { path }.deserialize(&mut de).map_err(json_error)?;
    de.end().map_err(json_error)?;
    Ok(found)
}

struct PathSeed<'p, S> {
    path: &'p [S],
}

impl<'de, S: AsRef<str>> DeserializeSeed<'de> for PathSeed<'_, S> {
    type Value = Option<Value>;

    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Option<Value>, D::Error> {
        if self.path.is_empty() {
            return Value::deserialize(d).map(Some);
        }
        d.deserialize_any(self)
    }
}

impl<'de, S: AsRef<str>> Visitor<'de> for PathSeed<'_, S> {
    type Value = Option<Value>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Option<Value>, A::Error> {
        let (head, rest) = self.path.split_first().expect("non-empty path");
        let mut found = None;
        while let Some(matched) = map.next_key_seed(KeyIs(head.as_ref()))? {
            if matched {
                found = map.next_value_seed(PathSeed { path: rest })?;
            } else {
                map.next_value::<IgnoredAny>()?;
            }
        }
        Ok(found)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Option<Value>, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(None)
    }

    fn visit_bool<E>(self, _: bool) -> Result<Option<Value>, E> {
        Ok(None)
    }
    fn visit_i64<E>(self, _: i64) -> Result<Option<Value>, E> {
        Ok(None)
    }
    fn visit_u64<E>(self, _: u64) -> Result<Option<Value>, E> {
        Ok(None)
    }
    fn visit_f64<E>(self, _: f64) -> Result<Option<Value>, E> {
        Ok(None)
    }
    fn visit_str<E>(self, _: &str) -> Result<Option<Value>, E> {
        Ok(None)
    }
    fn visit_unit<E>(self) -> Result<Option<Value>, E> {
        Ok(None)
    }
}

/// Compares an object key with the wanted one without allocating it.
struct KeyIs<'k>(&'k str);

impl<'de> DeserializeSeed<'de> for KeyIs<'_> {
    type Value = bool;
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<bool, D::Error> {
        d.deserialize_str(self)
    }
}

impl Visitor<'_> for KeyIs<'_> {
    type Value = bool;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a string key")
    }
    fn visit_str<E>(self, v: &str) -> Result<bool, E> {
        Ok(v == self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_nested_fields() {
        let doc = br#"{"a": {"x": [1, {"ts": 0}], "ts": 5, "s": "q\"\u00e9"}, "b": null, "ts": 9}"#;
        assert_eq!(
            extract_json_path(doc, &["ts"]).unwrap(),
            Some(Value::Long(9))
        );
        assert_eq!(
            extract_json_path(doc, &["a", "ts"]).unwrap(),
            Some(Value::Long(5))
        );
        assert_eq!(
            extract_json_path(doc, &["a", "s"]).unwrap(),
            Some(Value::String("q\"é".into()))
        );
        assert_eq!(extract_json_path(doc, &["b"]).unwrap(), Some(Value::Null));
        assert_eq!(extract_json_path(doc, &["b", "c"]).unwrap(), None);
        assert_eq!(extract_json_path(doc, &["a", "x", "ts"]).unwrap(), None);
        assert_eq!(extract_json_path(doc, &["zz"]).unwrap(), None);
        assert_eq!(
            extract_json_path(br#"{"t\u0073": 1}"#, &["ts"]).unwrap(),
            Some(Value::Long(1))
        );
        assert_eq!(
            extract_json_path(br#"{"ts": 1, "ts": 2}"#, &["ts"]).unwrap(),
            Some(Value::Long(2))
        );
        assert_eq!(extract_json_path(b"[1]", &["ts"]).unwrap(), None);
        assert_eq!(extract_json_path(b"7", &["ts"]).unwrap(), None);
    }

    #[test]
    fn whole_document_is_validated() {
        assert!(extract_json_path(br#"{"ts": 1, "x": }"#, &["ts"]).is_err());
        assert!(extract_json_path(br#"{"ts": 1} x"#, &["ts"]).is_err());
        assert!(extract_json_path(b"\xff", &["ts"]).is_err());
    }
}
