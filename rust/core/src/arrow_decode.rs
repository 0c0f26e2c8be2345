//! Decoding Arrow columns of raw Kafka bytes, as Spark's Kafka source delivers them.
//!
//! Spark sends `binary` (32-bit offsets); pyarrow, polars and newer Spark may send
//! `large_binary` or `binary_view`. All three are read through one accessor, so the kernels
//! below never copy the input.

use std::sync::Arc;

use arrow_array::builder::{
    BinaryBuilder, Float32Builder, Float64Builder, Int16Builder, Int32Builder, Int64Builder,
    StringBuilder,
};
use arrow_array::cast::AsArray;
use arrow_array::{Array, ArrayRef};
use arrow_schema::DataType;

use crate::error::{CoreError, ErrorKind, Result};
use crate::serde::Deserializer;
use crate::value::{format_uuid, Value};

/// Read access to a column of optional byte strings, whatever its Arrow layout.
pub enum BinaryColumn<'a> {
    Binary(&'a arrow_array::BinaryArray),
    LargeBinary(&'a arrow_array::LargeBinaryArray),
    BinaryView(&'a arrow_array::BinaryViewArray),
    Utf8(&'a arrow_array::StringArray),
    LargeUtf8(&'a arrow_array::LargeStringArray),
}

impl<'a> BinaryColumn<'a> {
    /// Wraps `array`, or explains which types are accepted.
    pub fn new(array: &'a dyn Array) -> Result<Self> {
        Ok(match array.data_type() {
            DataType::Binary => BinaryColumn::Binary(array.as_binary::<i32>()),
            DataType::LargeBinary => BinaryColumn::LargeBinary(array.as_binary::<i64>()),
            DataType::BinaryView => BinaryColumn::BinaryView(array.as_binary_view()),
            DataType::Utf8 => BinaryColumn::Utf8(array.as_string::<i32>()),
            DataType::LargeUtf8 => BinaryColumn::LargeUtf8(array.as_string::<i64>()),
            other => {
                return Err(CoreError::invalid_argument(format!(
                    "expected a binary, large_binary or binary_view column, got {other}"
                )))
            }
        })
    }

    pub fn len(&self) -> usize {
        match self {
            BinaryColumn::Binary(a) => a.len(),
            BinaryColumn::LargeBinary(a) => a.len(),
            BinaryColumn::BinaryView(a) => a.len(),
            BinaryColumn::Utf8(a) => a.len(),
            BinaryColumn::LargeUtf8(a) => a.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The bytes at row `i`, `None` for a null.
    #[inline]
    pub fn get(&self, i: usize) -> Option<&'a [u8]> {
        match self {
            BinaryColumn::Binary(a) => a.is_valid(i).then(|| a.value(i)),
            BinaryColumn::LargeBinary(a) => a.is_valid(i).then(|| a.value(i)),
            BinaryColumn::BinaryView(a) => a.is_valid(i).then(|| a.value(i)),
            BinaryColumn::Utf8(a) => a.is_valid(i).then(|| a.value(i).as_bytes()),
            BinaryColumn::LargeUtf8(a) => a.is_valid(i).then(|| a.value(i).as_bytes()),
        }
    }
}

/// The Arrow type a deserializer's output column has, for deserializers with a flat output.
pub fn output_type(de: &Deserializer) -> Option<DataType> {
    Some(match de {
        Deserializer::Bytes => DataType::Binary,
        Deserializer::String | Deserializer::Uuid => DataType::Utf8,
        Deserializer::Short => DataType::Int16,
        Deserializer::Integer => DataType::Int32,
        Deserializer::Long => DataType::Int64,
        Deserializer::Float => DataType::Float32,
        Deserializer::Double => DataType::Float64,
        Deserializer::Json | Deserializer::Avro(_) => return None,
    })
}

/// Deserializes every row of a byte column into a typed column. The first malformed row
/// fails the whole column, naming its row index (callers translate it to an offset).
pub fn decode_column(array: &dyn Array, de: &Deserializer) -> Result<ArrayRef> {
    let column = BinaryColumn::new(array)?;
    let n = column.len();
    macro_rules! build {
        ($builder:expr, $variant:ident) => {{
            let mut b = $builder;
            for i in 0..n {
                match de.deserialize(column.get(i)).map_err(|e| row_error(i, e))? {
                    Value::$variant(v) => b.append_value(v),
                    _ => b.append_null(),
                }
            }
            Arc::new(b.finish()) as ArrayRef
        }};
    }
    Ok(match de {
        Deserializer::Short => build!(Int16Builder::with_capacity(n), Short),
        Deserializer::Integer => build!(Int32Builder::with_capacity(n), Int),
        Deserializer::Long => build!(Int64Builder::with_capacity(n), Long),
        Deserializer::Float => build!(Float32Builder::with_capacity(n), Float),
        Deserializer::Double => build!(Float64Builder::with_capacity(n), Double),
        Deserializer::String => build!(StringBuilder::with_capacity(n, n * 16), String),
        Deserializer::Bytes => build!(BinaryBuilder::with_capacity(n, n * 16), Bytes),
        Deserializer::Uuid => {
            let mut b = StringBuilder::with_capacity(n, n * 36);
            for i in 0..n {
                match de.deserialize(column.get(i)).map_err(|e| row_error(i, e))? {
                    Value::Uuid(u) => b.append_value(format_uuid(&u)),
                    _ => b.append_null(),
                }
            }
            Arc::new(b.finish())
        }
        Deserializer::Json | Deserializer::Avro(_) => {
            return Err(CoreError::invalid_argument(format!(
                "{} values decode to nested data; give a value schema to stamp() instead",
                de.name()
            )))
        }
    })
}

fn row_error(row: usize, e: impl std::fmt::Display) -> CoreError {
    CoreError::new(ErrorKind::Deserialization, format!("row {row}: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::{BinaryArray, Int64Array, LargeBinaryArray};

    #[test]
    fn decodes_longs_from_every_binary_layout() {
        let raw: Vec<Option<&[u8]>> = vec![Some(&[0, 0, 0, 0, 0, 0, 0, 7]), None];
        let expected = Int64Array::from(vec![Some(7), None]);
        let a = BinaryArray::from(raw.clone());
        let b = LargeBinaryArray::from(raw.clone());
        let c = arrow_array::BinaryViewArray::from(raw);
        for array in [&a as &dyn Array, &b, &c] {
            let out = decode_column(array, &Deserializer::Long).unwrap();
            assert_eq!(
                out.as_primitive::<arrow_array::types::Int64Type>(),
                &expected
            );
        }
    }

    #[test]
    fn a_malformed_row_names_its_index() {
        let a = BinaryArray::from(vec![Some(&[0u8; 8][..]), Some(&[1u8, 2][..])]);
        let err = decode_column(&a, &Deserializer::Long).unwrap_err();
        assert_eq!(err.kind, ErrorKind::Deserialization);
        assert!(err.reason.starts_with("row 1:"), "{}", err.reason);
    }
}
