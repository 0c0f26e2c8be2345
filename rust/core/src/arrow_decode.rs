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
use arrow_array::{Array, ArrayRef, Int64Array, RecordBatch};
use arrow_schema::{DataType, Field, Schema, TimeUnit};

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
    decode_rows(array, de).map_err(|e| {
        let mut err = e.error;
        err.reason = format!("row {}: {}", e.row, err.reason);
        err
    })
}

fn decode_rows(array: &dyn Array, de: &Deserializer) -> std::result::Result<ArrayRef, RowError> {
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
            ))
            .into())
        }
    })
}

/// A deserialization failure at a row of a column, before the row is mapped to an offset.
#[derive(Debug)]
pub struct RowError {
    pub row: usize,
    pub error: CoreError,
}

fn row_error(row: usize, e: impl std::fmt::Display) -> RowError {
    RowError {
        row,
        error: CoreError::new(ErrorKind::Deserialization, e.to_string()),
    }
}

impl From<CoreError> for RowError {
    fn from(error: CoreError) -> Self {
        RowError { row: 0, error }
    }
}

/// The columns of Spark's Kafka source schema that the kernels read.
pub struct KafkaColumns<'a> {
    pub key: &'a dyn Array,
    pub value: &'a dyn Array,
    pub topic: &'a dyn Array,
    pub partition: &'a arrow_array::Int32Array,
    pub offset: &'a Int64Array,
    pub timestamp: &'a dyn Array,
}

impl<'a> KafkaColumns<'a> {
    /// Finds the columns by name, checking their types.
    pub fn from_batch(batch: &'a RecordBatch) -> Result<Self> {
        let column = |name: &str| {
            batch.column_by_name(name).ok_or_else(|| {
                CoreError::invalid_argument(format!(
                    "the batch has no '{name}' column; expected Spark's Kafka source schema \
                     (key, value, topic, partition, offset, timestamp)"
                ))
            })
        };
        let partition = column("partition")?;
        let offset = column("offset")?;
        Ok(KafkaColumns {
            key: column("key")?.as_ref(),
            value: column("value")?.as_ref(),
            topic: column("topic")?.as_ref(),
            partition: partition
                .as_primitive_opt::<arrow_array::types::Int32Type>()
                .ok_or_else(|| bad_type("partition", "int32", partition.data_type()))?,
            offset: offset
                .as_primitive_opt::<arrow_array::types::Int64Type>()
                .ok_or_else(|| bad_type("offset", "int64", offset.data_type()))?,
            timestamp: column("timestamp")?.as_ref(),
        })
    }

    /// The topic at `row`, whatever string layout it has.
    pub fn topic_at(&self, row: usize) -> String {
        BinaryColumn::new(self.topic)
            .ok()
            .and_then(|c| c.get(row))
            .map(|b| String::from_utf8_lossy(b).into_owned())
            .unwrap_or_default()
    }

    /// Attaches the record position of `row` to an error.
    pub fn locate(&self, e: RowError) -> CoreError {
        let row = e.row;
        if row >= self.offset.len() {
            return e.error;
        }
        e.error.at_record(
            &self.topic_at(row),
            self.partition.value(row),
            self.offset.value(row),
        )
    }
}

fn bad_type(column: &str, expected: &str, got: &DataType) -> CoreError {
    CoreError::invalid_argument(format!("column '{column}' must be {expected}, got {got}"))
}

/// Epoch milliseconds from Spark's `timestamp[us, tz]` (or any Arrow timestamp, or int64 ms).
pub fn timestamps_ms(array: &dyn Array) -> Result<Int64Array> {
    use arrow_array::types::{
        TimestampMicrosecondType, TimestampMillisecondType, TimestampNanosecondType,
        TimestampSecondType,
    };
    Ok(match array.data_type() {
        DataType::Int64 => array
            .as_primitive::<arrow_array::types::Int64Type>()
            .clone(),
        DataType::Timestamp(TimeUnit::Second, _) => array
            .as_primitive::<TimestampSecondType>()
            .unary(|v| v.saturating_mul(1000)),
        DataType::Timestamp(TimeUnit::Millisecond, _) => array
            .as_primitive::<TimestampMillisecondType>()
            .unary(|v| v),
        DataType::Timestamp(TimeUnit::Microsecond, _) => array
            .as_primitive::<TimestampMicrosecondType>()
            .unary(|v| v.div_euclid(1_000)),
        DataType::Timestamp(TimeUnit::Nanosecond, _) => array
            .as_primitive::<TimestampNanosecondType>()
            .unary(|v| v.div_euclid(1_000_000)),
        other => return Err(bad_type("timestamp", "a timestamp or int64", other)),
    })
}

/// Deserializes key and value of a whole Kafka-source batch. Output columns: topic,
/// partition, offset, timestamp (epoch ms), key, value. A malformed key or value fails with
/// a `Deserialization` error naming the record's topic, partition and offset.
pub fn decode_kafka_batch(
    batch: &RecordBatch,
    key: &Deserializer,
    value: &Deserializer,
) -> Result<RecordBatch> {
    let cols = KafkaColumns::from_batch(batch)?;
    let keys = decode_rows(cols.key, key).map_err(|e| cols.locate(e))?;
    let values = decode_rows(cols.value, value).map_err(|e| cols.locate(e))?;
    let timestamps = timestamps_ms(cols.timestamp)?;
    let schema = Schema::new(vec![
        Field::new("topic", cols.topic.data_type().clone(), true),
        Field::new("partition", DataType::Int32, true),
        Field::new("offset", DataType::Int64, true),
        Field::new("timestamp", DataType::Int64, true),
        Field::new("key", keys.data_type().clone(), true),
        Field::new("value", values.data_type().clone(), true),
    ]);
    let topic = batch
        .column_by_name("topic")
        .expect("checked by KafkaColumns")
        .clone();
    RecordBatch::try_new(
        Arc::new(schema),
        vec![
            topic,
            Arc::new(cols.partition.clone()),
            Arc::new(cols.offset.clone()),
            Arc::new(timestamps),
            keys,
            values,
        ],
    )
    .map_err(|e| CoreError::invalid_argument(e.to_string()))
}

/// A topic and a partition, as read from a batch.
pub type TopicPartitionName = (String, i32);

/// The changelog records of an Arrow batch with Spark's Kafka columns (only `key`, `value` and
/// `offset` are required), copied out for [`crate::restore::process_next`]. Copying stops after
/// the first record at or past `end_offset`, which is passed on without its key and value: it
/// only tells `process_next` where to stop. Also returns the topic and partition of the first
/// row when the batch has those columns, to locate errors.
pub fn changelog_records(
    batch: &RecordBatch,
    end_offset: i64,
) -> Result<(
    Vec<crate::restore::ChangelogRecord>,
    Option<TopicPartitionName>,
)> {
    let column = |name: &str| {
        batch.column_by_name(name).ok_or_else(|| {
            CoreError::invalid_argument(format!(
                "the batch has no '{name}' column; changelog records need 'key', 'value' and \
                 'offset' (Spark's Kafka source schema)"
            ))
        })
    };
    let offsets = column("offset")?;
    let offsets = offsets
        .as_primitive_opt::<arrow_array::types::Int64Type>()
        .ok_or_else(|| bad_type("offset", "int64", offsets.data_type()))?;
    let key_column = column("key")?;
    let value_column = column("value")?;
    let keys = BinaryColumn::new(key_column.as_ref())
        .map_err(|e| CoreError::invalid_argument(format!("column 'key': {}", e.reason)))?;
    let values = BinaryColumn::new(value_column.as_ref())
        .map_err(|e| CoreError::invalid_argument(format!("column 'value': {}", e.reason)))?;
    if offsets.null_count() > 0 {
        return Err(CoreError::invalid_argument(
            "column 'offset' has nulls; every changelog record needs an offset",
        ));
    }
    let origin = if batch.num_rows() > 0 {
        let topic = batch
            .column_by_name("topic")
            .and_then(|c| BinaryColumn::new(c.as_ref()).ok())
            .and_then(|c| c.get(0).map(|b| String::from_utf8_lossy(b).into_owned()));
        let partition = batch
            .column_by_name("partition")
            .and_then(|c| c.as_primitive_opt::<arrow_array::types::Int32Type>())
            .filter(|p| p.is_valid(0))
            .map(|p| p.value(0));
        topic.zip(partition)
    } else {
        None
    };
    let mut records = Vec::with_capacity(batch.num_rows());
    for row in 0..batch.num_rows() {
        let offset = offsets.value(row);
        if offset >= end_offset {
            records.push((offset, None, None));
            break;
        }
        records.push((
            offset,
            keys.get(row).map(<[u8]>::to_vec),
            values.get(row).map(<[u8]>::to_vec),
        ));
    }
    Ok((records, origin))
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

    fn changelog_batch(offsets: Vec<i64>, keys: Vec<Option<&[u8]>>) -> RecordBatch {
        let n = offsets.len();
        let values: Vec<Option<&[u8]>> =
            (0..n).map(|i| (i % 2 == 0).then_some(&b"v"[..])).collect();
        RecordBatch::try_from_iter(vec![
            ("key", Arc::new(BinaryArray::from(keys)) as ArrayRef),
            (
                "value",
                Arc::new(LargeBinaryArray::from(values)) as ArrayRef,
            ),
            (
                "topic",
                Arc::new(arrow_array::StringArray::from(vec!["t"; n])) as ArrayRef,
            ),
            (
                "partition",
                Arc::new(arrow_array::Int32Array::from(vec![3; n])) as ArrayRef,
            ),
            ("offset", Arc::new(Int64Array::from(offsets)) as ArrayRef),
        ])
        .unwrap()
    }

    #[test]
    fn changelog_records_stop_after_the_first_record_at_the_end() {
        let batch = changelog_batch(
            vec![5, 6, 7, 8],
            vec![Some(b"a"), None, Some(b"c"), Some(b"d")],
        );
        let (records, origin) = changelog_records(&batch, 7).unwrap();
        assert_eq!(origin, Some(("t".to_owned(), 3)));
        assert_eq!(
            records,
            vec![
                (5, Some(b"a".to_vec()), Some(b"v".to_vec())),
                (6, None, None),
                (7, None, None),
            ]
        );
    }

    #[test]
    fn changelog_records_need_an_int64_offset_column() {
        let batch = RecordBatch::try_from_iter(vec![
            (
                "key",
                Arc::new(BinaryArray::from(vec![Some(&b"k"[..])])) as ArrayRef,
            ),
            (
                "value",
                Arc::new(BinaryArray::from(vec![Some(&b"v"[..])])) as ArrayRef,
            ),
            (
                "offset",
                Arc::new(arrow_array::Int32Array::from(vec![1])) as ArrayRef,
            ),
        ])
        .unwrap();
        let err = changelog_records(&batch, 10).unwrap_err();
        assert_eq!(err.kind, ErrorKind::InvalidArgument);
        assert!(err.reason.contains("offset"), "{}", err.reason);
        let good = changelog_batch(vec![1], vec![Some(b"k")]);
        let no_key = good.project(&[1, 2, 3, 4]).unwrap();
        assert!(changelog_records(&no_key, 10)
            .unwrap_err()
            .reason
            .contains("'key'"));
    }
}
