//! A streaming JSON decoder that writes straight into Arrow columns ([`Col`]), with no
//! [`Value`] tree in between: serde visitors walk the document and append each token to the
//! column of its field, casting as the column builder does. One variant also keeps the value at
//! a dotted path (the JSON-field timestamp), so the extractor needs no second pass.

use std::fmt;

use arrow_array::ArrayRef;
use arrow_schema::DataType;
use serde::de::{self, DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;

use crate::arrow_build::{check_supported, push_json_text, Col};
use crate::error::{CoreError, ErrorKind, Result};
use crate::serde::{json_error, DeserializeError};
use crate::value::Value;

/// Appends one JSON document to `col` (exactly one row, whatever the document holds).
#[inline]
pub(crate) fn json_into_column(
    col: &mut Col,
    data: &[u8],
) -> std::result::Result<(), DeserializeError> {
    let mut d = serde_json::Deserializer::from_slice(data);
    ColSeed(col).deserialize(&mut d).map_err(json_error)?;
    d.end().map_err(json_error)
}

/// Like [`json_into_column`], and also returns a copy of the value at `path` (`None`: missing).
#[inline]
pub(crate) fn json_into_column_capturing(
    col: &mut Col,
    data: &[u8],
    path: &[String],
) -> std::result::Result<Option<Value>, DeserializeError> {
    let mut d = serde_json::Deserializer::from_slice(data);
    let mut slot = None;
    CaptureSeed {
        col,
        path,
        slot: &mut slot,
    }
    .deserialize(&mut d)
    .map_err(json_error)?;
    d.end().map_err(json_error)?;
    Ok(slot)
}

/// Builds the column of one value type straight from JSON documents (`None` = null).
pub fn json_to_array(docs: &[Option<&[u8]>], t: &DataType) -> Result<ArrayRef> {
    check_supported(t, "type")?;
    let mut col = Col::new(t);
    for doc in docs {
        match doc {
            None => col.append_null(),
            Some(data) => json_into_column(&mut col, data)
                .map_err(|e| CoreError::new(ErrorKind::Deserialization, e.reason))?,
        }
    }
    col.finish(t)
}

/// Deserializes one JSON value into a column (exactly one append, whatever the input).
struct ColSeed<'a>(&'a mut Col);

impl<'de> DeserializeSeed<'de> for ColSeed<'_> {
    type Value = ();
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> std::result::Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for ColSeed<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_unit<E>(self) -> std::result::Result<(), E> {
        self.0.append_null();
        Ok(())
    }
    fn visit_none<E>(self) -> std::result::Result<(), E> {
        self.0.append_null();
        Ok(())
    }
    fn visit_some<D: de::Deserializer<'de>>(self, d: D) -> std::result::Result<(), D::Error> {
        d.deserialize_any(self)
    }
    fn visit_bool<E>(self, v: bool) -> std::result::Result<(), E> {
        self.0.append_bool(v);
        Ok(())
    }
    fn visit_i64<E>(self, v: i64) -> std::result::Result<(), E> {
        self.0.append_i64(v);
        Ok(())
    }
    fn visit_u64<E>(self, v: u64) -> std::result::Result<(), E> {
        self.0.append_u64(v);
        Ok(())
    }
    fn visit_f64<E>(self, v: f64) -> std::result::Result<(), E> {
        self.0.append_f64(v);
        Ok(())
    }
    fn visit_str<E>(self, v: &str) -> std::result::Result<(), E> {
        self.0.append_str(v);
        Ok(())
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> std::result::Result<(), A::Error> {
        match self.0 {
            Col::List(offs, child, v) => {
                while seq.next_element_seed(ColSeed(child))?.is_some() {}
                offs.push(child.len() as i64);
                v.push(true);
            }
            Col::Str(s) => {
                let value = Value::deserialize(de::value::SeqAccessDeserializer::new(seq))?;
                push_json_text(s, &value);
            }
            col => {
                while seq.next_element::<IgnoredAny>()?.is_some() {}
                col.append_null();
            }
        }
        Ok(())
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> std::result::Result<(), A::Error> {
        match self.0 {
            Col::Struct(names, children, v) => {
                let row = v.len();
                let mut hint = 0;
                let seed = |hint| FieldIndex {
                    names,
                    hint,
                    head: None,
                };
                while let Some((found, _)) = map.next_key_seed(seed(hint))? {
                    match found {
                        Some(i) => {
                            let child = &mut children[i];
                            if child.len() > row {
                                child.truncate(row); // a repeated key: the last wins
                            }
                            map.next_value_seed(ColSeed(child))?;
                            hint = i + 1;
                        }
                        None => {
                            map.next_value::<IgnoredAny>()?;
                        }
                    }
                }
                for c in children.iter_mut() {
                    if c.len() == row {
                        c.append_null();
                    }
                }
                v.push(true);
            }
            Col::Map(offs, keys, vals, v) => {
                while let Some(k) = map.next_key_seed(KeyInto(keys))? {
                    let () = k;
                    map.next_value_seed(ColSeed(vals))?;
                }
                offs.push(keys.len() as i64);
                v.push(true);
            }
            Col::Str(s) => {
                let value = Value::deserialize(de::value::MapAccessDeserializer::new(map))?;
                push_json_text(s, &value);
            }
            col => {
                while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                col.append_null();
            }
        }
        Ok(())
    }
}

/// Finds the struct field an object key names; `hint` is tried first (fields usually come in
/// schema order).
/// Also tells whether the key is `head` (the next step of a captured path).
struct FieldIndex<'a> {
    names: &'a [String],
    hint: usize,
    head: Option<&'a str>,
}

impl<'de> DeserializeSeed<'de> for FieldIndex<'_> {
    type Value = (Option<usize>, bool);
    fn deserialize<D: de::Deserializer<'de>>(
        self,
        d: D,
    ) -> std::result::Result<(Option<usize>, bool), D::Error> {
        d.deserialize_str(self)
    }
}

impl Visitor<'_> for FieldIndex<'_> {
    type Value = (Option<usize>, bool);
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an object key")
    }
    fn visit_str<E>(self, key: &str) -> std::result::Result<(Option<usize>, bool), E> {
        let is_head = self.head == Some(key);
        if self.names.get(self.hint).is_some_and(|n| n == key) {
            return Ok((Some(self.hint), is_head));
        }
        Ok((self.names.iter().position(|n| n == key), is_head))
    }
}

/// Like [`ColSeed`], and also keeps a copy of the value at `path` (the JSON-field timestamp),
/// so the extractor needs no second pass over the bytes. As in a raw-bytes lookup, the last of
/// repeated keys wins and a missing step leaves `slot` empty.
struct CaptureSeed<'a, 'p> {
    col: &'a mut Col,
    path: &'p [String],
    slot: &'a mut Option<Value>,
}

impl<'de> DeserializeSeed<'de> for CaptureSeed<'_, '_> {
    type Value = ();
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> std::result::Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for CaptureSeed<'_, '_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_unit<E: de::Error>(self) -> std::result::Result<(), E> {
        ColSeed(self.col).visit_unit()
    }
    fn visit_none<E: de::Error>(self) -> std::result::Result<(), E> {
        ColSeed(self.col).visit_none()
    }
    fn visit_some<D: de::Deserializer<'de>>(self, d: D) -> std::result::Result<(), D::Error> {
        d.deserialize_any(self)
    }
    fn visit_bool<E: de::Error>(self, v: bool) -> std::result::Result<(), E> {
        ColSeed(self.col).visit_bool(v)
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> std::result::Result<(), E> {
        ColSeed(self.col).visit_i64(v)
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> std::result::Result<(), E> {
        ColSeed(self.col).visit_u64(v)
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> std::result::Result<(), E> {
        ColSeed(self.col).visit_f64(v)
    }
    fn visit_str<E: de::Error>(self, v: &str) -> std::result::Result<(), E> {
        ColSeed(self.col).visit_str(v)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> std::result::Result<(), A::Error> {
        ColSeed(self.col).visit_seq(seq)
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> std::result::Result<(), A::Error> {
        let CaptureSeed { col, path, slot } = self;
        let Some((head, rest)) = path.split_first() else {
            return Ok(());
        };
        let Col::Struct(names, children, v) = col else {
            let value = Value::deserialize(de::value::MapAccessDeserializer::new(map))?;
            *slot = value.get_path(path).cloned();
            col.append_value(&value);
            return Ok(());
        };
        let row = v.len();
        let mut hint = 0;
        while let Some((found, is_head)) = map.next_key_seed(FieldIndex {
            names,
            hint,
            head: Some(head),
        })? {
            if let Some(i) = found {
                if children[i].len() > row {
                    children[i].truncate(row); // a repeated key: the last wins
                }
                hint = i + 1;
            }
            if !is_head {
                match found {
                    Some(i) => map.next_value_seed(ColSeed(&mut children[i]))?,
                    None => {
                        map.next_value::<IgnoredAny>()?;
                    }
                }
                continue;
            }
            *slot = None;
            match found {
                Some(i) if !rest.is_empty() => map.next_value_seed(CaptureSeed {
                    col: &mut children[i],
                    path: rest,
                    slot: &mut *slot,
                })?,
                found => {
                    let value: Value = map.next_value()?;
                    *slot = value.get_path(rest).cloned();
                    if let Some(i) = found {
                        children[i].append_value(&value);
                    }
                }
            }
        }
        for c in children.iter_mut() {
            if c.len() == row {
                c.append_null();
            }
        }
        v.push(true);
        Ok(())
    }
}

/// Appends an object key to a map's key column.
struct KeyInto<'a>(&'a mut Col);

impl<'de> DeserializeSeed<'de> for KeyInto<'_> {
    type Value = ();
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> std::result::Result<(), D::Error> {
        d.deserialize_str(self)
    }
}

impl Visitor<'_> for KeyInto<'_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an object key")
    }
    fn visit_str<E>(self, key: &str) -> std::result::Result<(), E> {
        self.0.append_str(key);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::arrow_build::tests::event_type;
    use crate::arrow_build::{struct_type, values_to_array};
    use crate::civil::parse_date;
    use crate::serde::json_from_slice;
    use arrow_array::cast::AsArray;
    use arrow_array::types::{Date32Type, Float32Type, Int64Type, TimestampMicrosecondType};
    use arrow_array::Array;
    use arrow_schema::{Field, TimeUnit};

    #[test]
    fn json_fast_path_matches_the_value_path() {
        let docs: Vec<&[u8]> = vec![
            br#"{"id": 1, "meta": {"ts": 5}, "tags": ["a", "b"], "attrs": {"x": 1.5}, "name": "n"}"#,
            br#"{"id": "not a number", "meta": 3, "tags": null, "extra": [1, {"a": 2}]}"#,
            br#"{"id": 2, "id": 3, "name": {"nested": [1, 2]}, "tags": [1, true, null]}"#,
            br#"[1, 2, 3]"#,
            br#"null"#,
            br#"{"id": 1.5, "meta": {"ts": 18446744073709551615}, "attrs": {"a": "NaN", "b": 2}}"#,
            br#"{"name": 12, "tags": [], "attrs": {}}"#,
            br#"{"id": 9223372036854775807, "name": false}"#,
        ];
        let t = event_type();
        let fast = json_to_array(&docs.iter().map(|d| Some(*d)).collect::<Vec<_>>(), &t).unwrap();
        let values: Vec<Value> = docs.iter().map(|d| json_from_slice(d).unwrap()).collect();
        let slow = values_to_array(&values, &t).unwrap();
        assert_eq!(fast.to_data(), slow.to_data());
        let s = fast.as_struct();
        let ids = s.column(0).as_primitive::<Int64Type>();
        assert_eq!(ids.value(0), 1);
        assert!(ids.is_null(1));
        assert_eq!(ids.value(2), 3, "the last of repeated keys wins");
        assert!(s.is_null(3), "a JSON array is no struct");
        assert!(s.is_null(4));
        let names = s.column(4).as_string::<i32>();
        assert_eq!(names.value(2), r#"{"nested":[1,2]}"#);
        assert_eq!(names.value(6), "12");
        assert_eq!(names.value(7), "false");
        let tags = s.column(2).as_list::<i32>();
        assert_eq!(tags.value(2).as_string::<i32>().value(0), "1");
        assert_eq!(tags.value(2).as_string::<i32>().value(1), "true");
        assert!(tags.value(2).is_null(2));
    }

    #[test]
    fn timestamps_dates_binary_and_narrow_ints() {
        let t = struct_type(vec![
            Field::new(
                "at",
                DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())),
                true,
            ),
            Field::new("day", DataType::Date32, true),
            Field::new("raw", DataType::Binary, true),
            Field::new("small", DataType::Int8, true),
            Field::new("f", DataType::Float32, true),
        ]);
        let docs: Vec<Option<&[u8]>> = vec![
            Some(br#"{"at": "2024-01-02T03:04:05.678Z", "day": "2024-03-01", "raw": "aGk=", "small": 7, "f": 1}"#),
            Some(br#"{"at": 1000, "day": "2024-02-30", "raw": "!!", "small": 300, "f": "Infinity"}"#),
            None,
        ];
        let a = json_to_array(&docs, &t).unwrap();
        let s = a.as_struct();
        let at = s.column(0).as_primitive::<TimestampMicrosecondType>();
        assert_eq!(at.value(0), 1_704_164_645_678_000);
        assert_eq!(at.value(1), 1_000_000, "integers are epoch milliseconds");
        let day = s.column(1).as_primitive::<Date32Type>();
        assert_eq!(day.value(0), 19783);
        assert!(day.is_null(1));
        assert_eq!(s.column(2).as_binary::<i32>().value(0), b"hi");
        assert!(s.column(2).is_null(1));
        assert!(s.column(3).is_null(1));
        assert_eq!(
            s.column(4).as_primitive::<Float32Type>().value(1),
            f32::INFINITY
        );
        assert!(s.is_null(2));
        assert_eq!(parse_date("1970-01-01"), Some(0));
        assert_eq!(parse_date("1969-12-31"), Some(-1));
        assert_eq!(parse_date("2000-02-29"), Some(11016));
    }
}
