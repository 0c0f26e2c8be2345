//! A general Arrow column builder: decoded values (or JSON tokens, see `json_columns`) into a
//! column of a requested type, casting as Spark's `from_json` does in PERMISSIVE mode.
//!
//! A missing field is null, an extra field is ignored, a value of the wrong type is null for
//! that field only, a string column receives the JSON text of a non-string value, a binary
//! column base64-decodes a string, a timestamp column takes epoch milliseconds or ISO-8601
//! text, a date column `YYYY-MM-DD`. See `docs/spark-stamp.md` for the full table. Unlike
//! arrow-rs builders, a column can be truncated: a dropped record takes its values back.

use std::sync::Arc;

use arrow_array::types::{
    Date32Type, Float32Type, Float64Type, Int16Type, Int32Type, Int64Type, Int8Type,
    TimestampMicrosecondType, TimestampMillisecondType, TimestampNanosecondType,
    TimestampSecondType,
};
use arrow_array::{
    ArrayRef, BinaryViewArray, BooleanArray, GenericBinaryArray, GenericListArray,
    GenericStringArray, MapArray, NullArray, OffsetSizeTrait, PrimitiveArray, StringViewArray,
    StructArray,
};
use arrow_buffer::{Buffer, NullBuffer, OffsetBuffer, ScalarBuffer};
use arrow_schema::{DataType, Field, FieldRef, Fields, TimeUnit};

use crate::civil::parse_date;
use crate::error::{CoreError, Result};
use crate::serde::json_to_vec;
use crate::timestamp::parse_iso8601_ms;
use crate::value::{format_uuid, Value};

// ---------------------------------------------------------------------------------------
// Supported target types
// ---------------------------------------------------------------------------------------

pub(crate) fn check_supported(t: &DataType, path: &str) -> Result<()> {
    match t {
        DataType::Null
        | DataType::Boolean
        | DataType::Int8
        | DataType::Int16
        | DataType::Int32
        | DataType::Int64
        | DataType::Float32
        | DataType::Float64
        | DataType::Utf8
        | DataType::LargeUtf8
        | DataType::Utf8View
        | DataType::Binary
        | DataType::LargeBinary
        | DataType::BinaryView
        | DataType::Date32
        | DataType::Timestamp(_, _) => Ok(()),
        DataType::List(f) | DataType::LargeList(f) => {
            check_supported(f.data_type(), &format!("{path}[]"))
        }
        DataType::Struct(fields) => fields
            .iter()
            .try_for_each(|f| check_supported(f.data_type(), &format!("{path}.{}", f.name()))),
        DataType::Map(entries, _) => {
            let DataType::Struct(kv) = entries.data_type() else {
                return Err(CoreError::invalid_argument(format!(
                    "{path}: a map's entries must be a struct"
                )));
            };
            if kv.len() != 2 {
                return Err(CoreError::invalid_argument(format!(
                    "{path}: a map's entries must have a key and a value"
                )));
            }
            if !matches!(
                kv[0].data_type(),
                DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View
            ) {
                return Err(CoreError::invalid_argument(format!(
                    "{path}: map keys must be strings (JSON object keys are), got {}",
                    kv[0].data_type()
                )));
            }
            check_supported(kv[1].data_type(), &format!("{path}{{}}"))
        }
        other => Err(CoreError::invalid_argument(format!(
            "{path}: type {other} is not supported by stamp(); supported: boolean, tinyint, \
             smallint, int, bigint, float, double, string, binary, date, timestamp, array, \
             map<string, _>, struct"
        ))),
    }
}

// ---------------------------------------------------------------------------------------
// Column builders that can be truncated (a dropped record takes its values back)
// ---------------------------------------------------------------------------------------

/// A growing column of one Arrow type. Unlike arrow-rs builders it can be truncated, which a
/// dropped record (or a repeated JSON key, where the last one wins) needs.
#[derive(Debug)]
pub(crate) enum Col {
    Null(usize),
    Bool(Vec<bool>, Vec<bool>),
    /// Every integer width, range-checked on append against `Kind`.
    Int(IntKind, Vec<i64>, Vec<bool>),
    Float(Vec<f64>, Vec<bool>),
    /// Days since the epoch.
    Date(Vec<i32>, Vec<bool>),
    /// In the target unit.
    Timestamp(TimeUnit, Vec<i64>, Vec<bool>),
    Str(Bytes),
    Bin(Bytes),
    List(Vec<i64>, Box<Col>, Vec<bool>),
    Struct(Vec<String>, Vec<Col>, Vec<bool>),
    /// Offsets, keys (strings), values.
    Map(Vec<i64>, Box<Col>, Box<Col>, Vec<bool>),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum IntKind {
    I8,
    I16,
    I32,
    I64,
}

impl IntKind {
    #[inline]
    fn fits(self, v: i64) -> bool {
        match self {
            IntKind::I8 => i8::try_from(v).is_ok(),
            IntKind::I16 => i16::try_from(v).is_ok(),
            IntKind::I32 => i32::try_from(v).is_ok(),
            IntKind::I64 => true,
        }
    }
}

/// Variable-length byte values with their offsets.
#[derive(Debug)]
pub(crate) struct Bytes {
    offsets: Vec<i64>,
    data: Vec<u8>,
    valid: Vec<bool>,
}

impl Bytes {
    fn new() -> Self {
        Bytes {
            offsets: vec![0],
            data: Vec::new(),
            valid: Vec::new(),
        }
    }
    #[inline]
    pub(crate) fn push(&mut self, b: &[u8]) {
        self.data.extend_from_slice(b);
        self.offsets.push(self.data.len() as i64);
        self.valid.push(true);
    }
    #[inline]
    pub(crate) fn push_null(&mut self) {
        self.offsets.push(self.data.len() as i64);
        self.valid.push(false);
    }
    #[inline]
    fn truncate(&mut self, n: usize) {
        self.valid.truncate(n);
        self.offsets.truncate(n + 1);
        self.data.truncate(self.offsets[n] as usize);
    }
    #[inline]
    fn get(&self, i: usize) -> Option<&[u8]> {
        self.valid[i].then(|| &self.data[self.offsets[i] as usize..self.offsets[i + 1] as usize])
    }
}

fn nulls(valid: Vec<bool>) -> Option<NullBuffer> {
    if valid.iter().all(|&v| v) {
        None
    } else {
        Some(NullBuffer::from(valid))
    }
}

fn offsets<O: OffsetSizeTrait>(offsets: &[i64]) -> Result<OffsetBuffer<O>> {
    let converted: Option<Vec<O>> = offsets.iter().map(|&o| O::from_usize(o as usize)).collect();
    let converted = converted.ok_or_else(|| {
        CoreError::invalid_argument(
            "a column of this batch exceeds 2 GiB; set spark.sql.execution.arrow.useLargeVarTypes \
             or use smaller batches",
        )
    })?;
    Ok(OffsetBuffer::new(ScalarBuffer::from(converted)))
}

fn arrow_err(e: arrow_schema::ArrowError) -> CoreError {
    CoreError::invalid_argument(format!("building an output column: {e}"))
}

impl Col {
    pub(crate) fn new(t: &DataType) -> Col {
        match t {
            DataType::Boolean => Col::Bool(Vec::new(), Vec::new()),
            DataType::Int8 => Col::Int(IntKind::I8, Vec::new(), Vec::new()),
            DataType::Int16 => Col::Int(IntKind::I16, Vec::new(), Vec::new()),
            DataType::Int32 => Col::Int(IntKind::I32, Vec::new(), Vec::new()),
            DataType::Int64 => Col::Int(IntKind::I64, Vec::new(), Vec::new()),
            DataType::Float32 | DataType::Float64 => Col::Float(Vec::new(), Vec::new()),
            DataType::Date32 => Col::Date(Vec::new(), Vec::new()),
            DataType::Timestamp(unit, _) => Col::Timestamp(*unit, Vec::new(), Vec::new()),
            DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => Col::Str(Bytes::new()),
            DataType::Binary | DataType::LargeBinary | DataType::BinaryView => {
                Col::Bin(Bytes::new())
            }
            DataType::List(f) | DataType::LargeList(f) => {
                Col::List(vec![0], Box::new(Col::new(f.data_type())), Vec::new())
            }
            DataType::Struct(fields) => Col::Struct(
                fields.iter().map(|f| f.name().clone()).collect(),
                fields.iter().map(|f| Col::new(f.data_type())).collect(),
                Vec::new(),
            ),
            DataType::Map(entries, _) => {
                let DataType::Struct(kv) = entries.data_type() else {
                    unreachable!("checked by check_supported")
                };
                Col::Map(
                    vec![0],
                    Box::new(Col::new(kv[0].data_type())),
                    Box::new(Col::new(kv[1].data_type())),
                    Vec::new(),
                )
            }
            _ => Col::Null(0),
        }
    }

    #[inline]
    pub(crate) fn len(&self) -> usize {
        match self {
            Col::Null(n) => *n,
            Col::Bool(_, v)
            | Col::Int(_, _, v)
            | Col::Float(_, v)
            | Col::Date(_, v)
            | Col::Timestamp(_, _, v)
            | Col::List(_, _, v)
            | Col::Struct(_, _, v)
            | Col::Map(_, _, _, v) => v.len(),
            Col::Str(b) | Col::Bin(b) => b.valid.len(),
        }
    }

    pub(crate) fn truncate(&mut self, n: usize) {
        match self {
            Col::Null(len) => *len = (*len).min(n),
            Col::Bool(x, v) => {
                x.truncate(n);
                v.truncate(n);
            }
            Col::Int(_, x, v) | Col::Timestamp(_, x, v) => {
                x.truncate(n);
                v.truncate(n);
            }
            Col::Float(x, v) => {
                x.truncate(n);
                v.truncate(n);
            }
            Col::Date(x, v) => {
                x.truncate(n);
                v.truncate(n);
            }
            Col::Str(b) | Col::Bin(b) => b.truncate(n),
            Col::List(offs, child, v) => {
                v.truncate(n);
                offs.truncate(n + 1);
                child.truncate(offs[n] as usize);
            }
            Col::Struct(_, children, v) => {
                v.truncate(n);
                children.iter_mut().for_each(|c| c.truncate(n));
            }
            Col::Map(offs, k, val, v) => {
                v.truncate(n);
                offs.truncate(n + 1);
                k.truncate(offs[n] as usize);
                val.truncate(offs[n] as usize);
            }
        }
    }

    #[inline]
    pub(crate) fn append_null(&mut self) {
        match self {
            Col::Null(n) => *n += 1,
            Col::Bool(x, v) => {
                x.push(false);
                v.push(false);
            }
            Col::Int(_, x, v) | Col::Timestamp(_, x, v) => {
                x.push(0);
                v.push(false);
            }
            Col::Float(x, v) => {
                x.push(0.0);
                v.push(false);
            }
            Col::Date(x, v) => {
                x.push(0);
                v.push(false);
            }
            Col::Str(b) | Col::Bin(b) => b.push_null(),
            Col::List(offs, _, v) | Col::Map(offs, _, _, v) => {
                offs.push(*offs.last().expect("offsets start with 0"));
                v.push(false);
            }
            Col::Struct(_, children, v) => {
                children.iter_mut().for_each(Col::append_null);
                v.push(false);
            }
        }
    }

    #[inline]
    pub(crate) fn append_bool(&mut self, b: bool) {
        match self {
            Col::Bool(x, v) => {
                x.push(b);
                v.push(true);
            }
            Col::Str(s) => s.push(if b { b"true" } else { b"false" }),
            _ => self.append_null(),
        }
    }

    #[inline]
    pub(crate) fn append_i64(&mut self, n: i64) {
        match self {
            Col::Int(kind, x, v) if kind.fits(n) => {
                x.push(n);
                v.push(true);
            }
            Col::Float(x, v) => {
                x.push(n as f64);
                v.push(true);
            }
            Col::Timestamp(unit, x, v) => match ms_to_unit(n, *unit) {
                Some(t) => {
                    x.push(t);
                    v.push(true);
                }
                None => self.append_null(),
            },
            Col::Str(s) => s.push(n.to_string().as_bytes()),
            _ => self.append_null(),
        }
    }

    #[inline]
    pub(crate) fn append_u64(&mut self, n: u64) {
        match i64::try_from(n) {
            Ok(n) => self.append_i64(n),
            Err(_) => match self {
                Col::Float(x, v) => {
                    x.push(n as f64);
                    v.push(true);
                }
                Col::Str(s) => s.push(n.to_string().as_bytes()),
                _ => self.append_null(),
            },
        }
    }

    #[inline]
    pub(crate) fn append_f64(&mut self, f: f64) {
        match self {
            Col::Float(x, v) => {
                x.push(f);
                v.push(true);
            }
            Col::Str(s) => match json_to_vec(&Value::Double(f)) {
                Ok(text) => s.push(&text),
                Err(_) => s.push_null(),
            },
            _ => self.append_null(),
        }
    }

    #[inline]
    pub(crate) fn append_str(&mut self, text: &str) {
        match self {
            Col::Str(s) => s.push(text.as_bytes()),
            Col::Bin(b) => match base64_decode(text) {
                Some(bytes) => b.push(&bytes),
                None => b.push_null(),
            },
            Col::Float(x, v) => match text {
                "NaN" | "Infinity" | "+Infinity" | "-Infinity" => {
                    x.push(text.parse::<f64>().unwrap_or_else(|_| {
                        if text.starts_with('-') {
                            f64::NEG_INFINITY
                        } else {
                            f64::INFINITY
                        }
                    }));
                    v.push(true);
                }
                _ => self.append_null(),
            },
            Col::Timestamp(unit, x, v) => {
                match parse_iso8601_ms(text)
                    .ok()
                    .and_then(|ms| ms_to_unit(ms, *unit))
                {
                    Some(t) => {
                        x.push(t);
                        v.push(true);
                    }
                    None => self.append_null(),
                }
            }
            Col::Date(x, v) => match parse_date(text) {
                Some(d) => {
                    x.push(d);
                    v.push(true);
                }
                None => self.append_null(),
            },
            _ => self.append_null(),
        }
    }

    #[inline]
    pub(crate) fn append_bytes(&mut self, bytes: &[u8]) {
        match self {
            Col::Bin(b) => b.push(bytes),
            Col::Str(s) => match std::str::from_utf8(bytes) {
                Ok(t) => s.push(t.as_bytes()),
                Err(_) => s.push_null(),
            },
            _ => self.append_null(),
        }
    }

    /// Writes a whole `Value` (the path for every format but JSON).
    pub(crate) fn append_value(&mut self, value: &Value) {
        match value {
            Value::Null => self.append_null(),
            Value::Bool(b) => self.append_bool(*b),
            Value::Short(n) => self.append_i64(i64::from(*n)),
            Value::Int(n) => self.append_i64(i64::from(*n)),
            Value::Long(n) => self.append_i64(*n),
            Value::UnsignedLong(n) => self.append_u64(*n),
            Value::Float(f) => self.append_f64(f64::from(*f)),
            Value::Double(f) => self.append_f64(*f),
            Value::String(s) => self.append_str(s),
            Value::Bytes(b) => self.append_bytes(b),
            Value::Uuid(u) => match self {
                Col::Str(s) => s.push(format_uuid(u).as_bytes()),
                Col::Bin(b) => b.push(u),
                _ => self.append_null(),
            },
            Value::Array(items) => match self {
                Col::List(offs, child, v) => {
                    for item in items {
                        child.append_value(item);
                    }
                    offs.push(child.len() as i64);
                    v.push(true);
                }
                Col::Str(s) => push_json_text(s, value),
                _ => self.append_null(),
            },
            Value::Map(entries) => match self {
                Col::Struct(names, children, v) => {
                    let row = v.len();
                    for (k, item) in entries {
                        if let Some(i) = names.iter().position(|n| n == k) {
                            if children[i].len() > row {
                                children[i].truncate(row); // a repeated key: the last wins
                            }
                            children[i].append_value(item);
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
                    for (k, item) in entries {
                        keys.append_str(k);
                        vals.append_value(item);
                    }
                    offs.push(keys.len() as i64);
                    v.push(true);
                }
                Col::Str(s) => push_json_text(s, value),
                _ => self.append_null(),
            },
        }
    }

    pub(crate) fn finish(self, t: &DataType) -> Result<ArrayRef> {
        Ok(match (self, t) {
            (Col::Null(n), _) => Arc::new(NullArray::new(n)),
            (Col::Bool(x, v), _) => Arc::new(BooleanArray::new(x.into(), nulls(v))),
            (Col::Int(_, x, v), DataType::Int8) => prim::<Int8Type, _>(x, v, |n| n as i8),
            (Col::Int(_, x, v), DataType::Int16) => prim::<Int16Type, _>(x, v, |n| n as i16),
            (Col::Int(_, x, v), DataType::Int32) => prim::<Int32Type, _>(x, v, |n| n as i32),
            (Col::Int(_, x, v), _) => prim::<Int64Type, _>(x, v, |n| n),
            (Col::Float(x, v), DataType::Float32) => prim::<Float32Type, _>(x, v, |f| f as f32),
            (Col::Float(x, v), _) => prim::<Float64Type, _>(x, v, |f| f),
            (Col::Date(x, v), _) => prim::<Date32Type, _>(x, v, |d| d),
            (Col::Timestamp(unit, x, v), DataType::Timestamp(_, tz)) => {
                let tz = tz.clone();
                match unit {
                    TimeUnit::Second => Arc::new(
                        PrimitiveArray::<TimestampSecondType>::new(x.into(), nulls(v))
                            .with_timezone_opt(tz),
                    ),
                    TimeUnit::Millisecond => Arc::new(
                        PrimitiveArray::<TimestampMillisecondType>::new(x.into(), nulls(v))
                            .with_timezone_opt(tz),
                    ),
                    TimeUnit::Microsecond => Arc::new(
                        PrimitiveArray::<TimestampMicrosecondType>::new(x.into(), nulls(v))
                            .with_timezone_opt(tz),
                    ),
                    TimeUnit::Nanosecond => Arc::new(
                        PrimitiveArray::<TimestampNanosecondType>::new(x.into(), nulls(v))
                            .with_timezone_opt(tz),
                    ),
                }
            }
            (Col::Str(b), DataType::Utf8View) => Arc::new(StringViewArray::from_iter(
                (0..b.valid.len()).map(|i| b.get(i).map(|s| std::str::from_utf8(s).unwrap_or(""))),
            )),
            (Col::Str(b), DataType::LargeUtf8) => string::<i64>(b)?,
            (Col::Str(b), _) => string::<i32>(b)?,
            (Col::Bin(b), DataType::BinaryView) => Arc::new(BinaryViewArray::from_iter(
                (0..b.valid.len()).map(|i| b.get(i)),
            )),
            (Col::Bin(b), DataType::LargeBinary) => binary::<i64>(b)?,
            (Col::Bin(b), _) => binary::<i32>(b)?,
            (Col::List(offs, child, v), DataType::List(f)) => list::<i32>(f, &offs, *child, v)?,
            (Col::List(offs, child, v), DataType::LargeList(f)) => {
                list::<i64>(f, &offs, *child, v)?
            }
            (Col::Struct(_, children, v), DataType::Struct(fields)) => {
                let arrays = children
                    .into_iter()
                    .zip(fields.iter())
                    .map(|(c, f)| c.finish(f.data_type()))
                    .collect::<Result<Vec<_>>>()?;
                let len = v.len();
                Arc::new(
                    StructArray::try_new_with_length(fields.clone(), arrays, nulls(v), len)
                        .map_err(arrow_err)?,
                )
            }
            (Col::Map(offs, keys, vals, v), DataType::Map(entries, sorted)) => {
                let DataType::Struct(kv) = entries.data_type() else {
                    unreachable!("checked by check_supported")
                };
                let keys = keys.finish(kv[0].data_type())?;
                let vals = vals.finish(kv[1].data_type())?;
                let entry_struct =
                    StructArray::try_new(kv.clone(), vec![keys, vals], None).map_err(arrow_err)?;
                Arc::new(
                    MapArray::try_new(
                        entries.clone(),
                        offsets::<i32>(&offs)?,
                        entry_struct,
                        nulls(v),
                        *sorted,
                    )
                    .map_err(arrow_err)?,
                )
            }
            (col, t) => {
                return Err(CoreError::invalid_argument(format!(
                    "internal: column {col:?} does not build a {t}"
                )))
            }
        })
    }
}

fn prim<T, V>(x: Vec<V>, v: Vec<bool>, conv: impl Fn(V) -> T::Native) -> ArrayRef
where
    T: arrow_array::ArrowPrimitiveType,
{
    let values: ScalarBuffer<T::Native> = x.into_iter().map(conv).collect();
    Arc::new(PrimitiveArray::<T>::new(values, nulls(v)))
}

fn string<O: OffsetSizeTrait>(b: Bytes) -> Result<ArrayRef> {
    let offs = offsets::<O>(&b.offsets)?;
    // SAFETY: a `Col::Str` only ever receives whole `&str`s (or bytes checked with
    // `from_utf8`), and truncation cuts at value boundaries, so every value is valid UTF-8
    // and the offsets are monotonic and in bounds; re-validating would cost a pass over the data.
    Ok(Arc::new(unsafe {
        GenericStringArray::<O>::new_unchecked(offs, Buffer::from_vec(b.data), nulls(b.valid))
    }))
}

fn binary<O: OffsetSizeTrait>(b: Bytes) -> Result<ArrayRef> {
    let offs = offsets::<O>(&b.offsets)?;
    Ok(Arc::new(
        GenericBinaryArray::<O>::try_new(offs, Buffer::from_vec(b.data), nulls(b.valid))
            .map_err(arrow_err)?,
    ))
}

fn list<O: OffsetSizeTrait>(
    field: &FieldRef,
    offs: &[i64],
    child: Col,
    v: Vec<bool>,
) -> Result<ArrayRef> {
    let child = child.finish(field.data_type())?;
    Ok(Arc::new(
        GenericListArray::<O>::try_new(field.clone(), offsets::<O>(offs)?, child, nulls(v))
            .map_err(arrow_err)?,
    ))
}

#[inline]
pub(crate) fn push_json_text(s: &mut Bytes, value: &Value) {
    match json_to_vec(value) {
        Ok(text) => s.push(&text),
        Err(_) => s.push_null(),
    }
}

/// Epoch milliseconds in another unit, `None` on overflow.
#[inline]
fn ms_to_unit(ms: i64, unit: TimeUnit) -> Option<i64> {
    match unit {
        TimeUnit::Second => Some(ms.div_euclid(1000)),
        TimeUnit::Millisecond => Some(ms),
        TimeUnit::Microsecond => ms.checked_mul(1_000),
        TimeUnit::Nanosecond => ms.checked_mul(1_000_000),
    }
}

/// Standard base64 (padding optional), as Spark's JSON reader decodes binary fields.
fn base64_decode(s: &str) -> Option<Vec<u8>> {
    let s = s.trim_end_matches('=');
    let mut out = Vec::with_capacity(s.len() * 3 / 4);
    let mut acc = 0u32;
    let mut bits = 0;
    for c in s.bytes() {
        let v = match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => return None,
        };
        acc = (acc << 6) | u32::from(v);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
            acc &= (1 << bits) - 1;
        }
    }
    (bits < 6).then_some(out)
}

/// Builds the column of one value type from `Value`s, for tests and callers that have
/// decoded values already.
pub fn values_to_array(values: &[Value], t: &DataType) -> Result<ArrayRef> {
    check_supported(t, "type")?;
    let mut col = Col::new(t);
    for v in values {
        col.append_value(v);
    }
    col.finish(t)
}

/// Fields helper for callers building struct types.
pub fn struct_type(fields: Vec<Field>) -> DataType {
    DataType::Struct(Fields::from(fields))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A value type with every nesting kind: struct, list, map.
    pub(crate) fn event_type() -> DataType {
        struct_type(vec![
            Field::new("id", DataType::Int64, true),
            Field::new(
                "meta",
                struct_type(vec![Field::new("ts", DataType::Int64, true)]),
                true,
            ),
            Field::new(
                "tags",
                DataType::List(Arc::new(Field::new("element", DataType::Utf8, true))),
                true,
            ),
            Field::new(
                "attrs",
                DataType::Map(
                    Arc::new(Field::new(
                        "entries",
                        struct_type(vec![
                            Field::new("key", DataType::Utf8, false),
                            Field::new("value", DataType::Float64, true),
                        ]),
                        false,
                    )),
                    false,
                ),
                true,
            ),
            Field::new("name", DataType::Utf8, true),
        ])
    }
}
