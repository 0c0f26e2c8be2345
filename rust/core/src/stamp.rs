//! `stamp`: Kafka Streams' record-queue admission over whole Arrow batches.
//!
//! A batch in Spark's Kafka source schema goes in; out comes one row per *admitted* record with
//! its deserialized key and value, the extracted timestamp and the partition time after the
//! record was admitted. Rows are processed per Kafka topic-partition in offset order, and each
//! record goes through [`RecordQueue::add_with`], so the admission rules (negative timestamp →
//! drop, partition time = highest admitted timestamp, drop counts) are exactly those of the
//! Python `RecordQueue`. Partition time carries over between calls through [`StampState`].
//!
//! Values are written straight into Arrow columns of a requested type (a struct for JSON and
//! Avro values given a schema). JSON goes from bytes to columns in one pass, without a
//! [`Value`] tree; other formats go through [`Value`]. The conversion follows Spark's
//! `from_json` in PERMISSIVE mode where it can: a missing field is null, an extra field is
//! ignored, a value of the wrong type is null for that field only, a string column receives
//! the JSON text of a non-string value. See `docs/spark-stamp.md` for the full table.

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

use arrow_array::builder::StringBuilder;
use arrow_array::types::{
    Date32Type, Float32Type, Float64Type, Int16Type, Int32Type, Int64Type, Int8Type,
    TimestampMicrosecondType, TimestampMillisecondType, TimestampNanosecondType,
    TimestampSecondType,
};
use arrow_array::{
    Array, ArrayRef, BinaryViewArray, BooleanArray, GenericBinaryArray, GenericListArray,
    GenericStringArray, Int32Array, Int64Array, MapArray, NullArray, OffsetSizeTrait,
    PrimitiveArray, RecordBatch, StringViewArray, StructArray,
};
use arrow_buffer::{Buffer, NullBuffer, OffsetBuffer, ScalarBuffer};
use arrow_schema::{DataType, Field, FieldRef, Fields, Schema, SchemaRef, TimeUnit};
use serde::de::{self, DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;

use crate::arrow_decode::{output_type, timestamps_ms, BinaryColumn, KafkaColumns};
use crate::error::{CoreError, ErrorKind, Result};
use crate::record_queue::{Admission, DropCounts, DropReason, RecordQueue};
use crate::serde::{json_error, json_to_vec, DeserializeError, Deserializer};
use crate::timestamp::{parse_iso8601_ms, ExtractInput, TimestampExtractor};
use crate::value::{format_uuid, Value};

/// What to do with a record whose key or value fails to deserialize.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Handler {
    /// Stop with a `Deserialization` error naming the record (Kafka's `LogAndFailExceptionHandler`).
    Fail,
    /// Drop the record and count it (Kafka's `LogAndContinueExceptionHandler`).
    Continue,
}

/// The per-partition state that survives between batches: the record queue (partition time
/// and drop counts; it is always empty between records) and the last offset seen.
#[derive(Debug, Default)]
pub struct PartitionState {
    queue: RecordQueue<()>,
    last_offset: Option<i64>,
}

impl PartitionState {
    /// The highest timestamp admitted so far, `NOT_KNOWN` before any.
    pub fn partition_time(&self) -> i64 {
        self.queue.partition_time()
    }

    /// Records dropped so far, by reason.
    pub fn dropped(&self) -> DropCounts {
        self.queue.dropped()
    }

    /// The offset of the last record processed (admitted or dropped).
    pub fn last_offset(&self) -> Option<i64> {
        self.last_offset
    }
}

/// Partition state by (topic, partition).
pub type StampState = HashMap<(String, i32), PartitionState>;

/// How one output column (key or value) is produced from the raw bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// Deserialize to a [`Value`], then write it into the column.
    Value,
    /// JSON bytes straight into a typed column (no `Value`).
    JsonTyped,
    /// JSON kept as its text (after validation).
    JsonText,
    /// A nested value (Avro) written as JSON text.
    ValueText,
}

/// The configuration of a stamping run: serdes, extractor, handler, and the value's type.
#[derive(Debug, Clone)]
pub struct Stamper {
    key: Deserializer,
    value: Deserializer,
    extractor: TimestampExtractor,
    handler: Handler,
    key_type: DataType,
    value_type: DataType,
    key_mode: Mode,
    value_mode: Mode,
    schema: SchemaRef,
}

impl Stamper {
    /// Builds a stamper. `value_type` is the Arrow type the value column should have (a struct
    /// for JSON/Avro records); without it, flat serdes give their natural type (Long → int64,
    /// String → utf8, ...) and JSON/Avro values come out as JSON text. Keys always use their
    /// natural type (JSON/Avro keys as JSON text).
    pub fn new(
        key: Deserializer,
        value: Deserializer,
        extractor: TimestampExtractor,
        handler: Handler,
        value_type: Option<DataType>,
    ) -> Result<Self> {
        let (key_type, key_mode) = natural(&key);
        let (value_type, value_mode) = match value_type {
            Some(t) => {
                check_supported(&t, "value schema")?;
                let mode = if matches!(value, Deserializer::Json) {
                    Mode::JsonTyped
                } else {
                    Mode::Value
                };
                (t, mode)
            }
            None => natural(&value),
        };
        let schema = Arc::new(Schema::new(vec![
            Field::new("topic", DataType::Utf8, true),
            Field::new("partition", DataType::Int32, true),
            Field::new("offset", DataType::Int64, true),
            Field::new("timestamp", DataType::Int64, true),
            Field::new("key", key_type.clone(), true),
            Field::new("value", value_type.clone(), true),
            Field::new("partition_time", DataType::Int64, true),
        ]));
        Ok(Stamper {
            key,
            value,
            extractor,
            handler,
            key_type,
            value_type,
            key_mode,
            value_mode,
            schema,
        })
    }

    /// The schema of every batch [`Stamper::stamp`] returns.
    pub fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }

    /// Stamps one batch in Spark's Kafka source schema, carrying partition time in `state`.
    ///
    /// Rows are grouped by (topic, partition); groups come out sorted by topic then partition,
    /// each in offset order (the batch is sorted if needed). Offsets of a partition must
    /// increase strictly across calls with the same state: a repeated or earlier offset is an
    /// `InvalidArgument` error. With `Handler::Fail`, the first record that cannot be
    /// deserialized fails the call with a `Deserialization` error naming its topic, partition
    /// and offset; a timestamp the extractor rejects fails with `InvalidTimestamp`. Records
    /// before the failing one still moved their partition's time forward in `state`.
    pub fn stamp(&self, batch: &RecordBatch, state: &mut StampState) -> Result<RecordBatch> {
        let cols = KafkaColumns::from_batch(batch)?;
        let keys = BinaryColumn::new(cols.key)?;
        let values = BinaryColumn::new(cols.value)?;
        let topics = BinaryColumn::new(cols.topic)?;
        let record_ts = timestamps_ms(cols.timestamp)?;
        let n = batch.num_rows();

        let groups = group_rows(&topics, cols.partition, cols.offset, n)?;

        let mut out = Output {
            topic: StringBuilder::with_capacity(n, n * 8),
            partition: Vec::with_capacity(n),
            offset: Vec::with_capacity(n),
            timestamp: Vec::with_capacity(n),
            partition_time: Vec::with_capacity(n),
            key: Col::new(&self.key_type),
            value: Col::new(&self.value_type),
        };
        for group in groups {
            let entry = state
                .entry((group.topic.clone(), group.partition))
                .or_default();
            if let (Some(last), Some(&first)) = (entry.last_offset, group.rows.first()) {
                let first = cols.offset.value(first);
                if first <= last {
                    return Err(CoreError::invalid_argument(format!(
                        "records of a partition must arrive in increasing offset order: offset \
                         {first} after offset {last}"
                    ))
                    .at_record(&group.topic, group.partition, first));
                }
            }
            for &row in &group.rows {
                let offset = cols.offset.value(row);
                let locate = |e: CoreError| e.at_record(&group.topic, group.partition, offset);
                let before = out.offset.len();
                entry.last_offset = Some(offset);
                let raw_key = keys.get(row);
                let raw_value = values.get(row);
                let ts = if record_ts.is_valid(row) {
                    record_ts.value(row)
                } else {
                    // A null record timestamp counts as "no timestamp" (Kafka's -1).
                    crate::timestamp::NOT_KNOWN
                };
                let key_col = &mut out.key;
                let value_col = &mut out.value;
                entry
                    .queue
                    .add_with(
                        std::iter::once(()),
                        |(), partition_time| {
                            self.stamp_row(
                                key_col,
                                value_col,
                                raw_key,
                                raw_value,
                                ts,
                                offset,
                                partition_time,
                            )
                        },
                        |_| {},
                    )
                    .map_err(locate)?;
                if let Some(admitted) = entry.queue.poll() {
                    // Admitted: key and value are already in their columns.
                    out.topic.append_value(&group.topic);
                    out.partition.push(group.partition);
                    out.offset.push(offset);
                    out.timestamp.push(admitted.timestamp);
                    out.partition_time.push(entry.queue.partition_time());
                } else {
                    // Dropped: take back whatever this record wrote.
                    out.key.truncate(before);
                    out.value.truncate(before);
                }
            }
        }
        out.finish(self)
    }

    #[allow(clippy::too_many_arguments)]
    fn stamp_row(
        &self,
        key_col: &mut Col,
        value_col: &mut Col,
        raw_key: Option<&[u8]>,
        raw_value: Option<&[u8]>,
        record_timestamp: i64,
        offset: i64,
        partition_time: i64,
    ) -> Result<Admission<()>> {
        let before = key_col.len();
        if let Err(e) = append(&self.key, self.key_mode, key_col, raw_key, None) {
            key_col.truncate(before);
            return self.deserialization_failed("key", &self.key, e, offset);
        }
        let capture = match (&self.extractor, self.value_mode) {
            (TimestampExtractor::JsonField { path, .. }, Mode::JsonTyped) => Some(path.as_slice()),
            _ => None,
        };
        let decoded = match append(&self.value, self.value_mode, value_col, raw_value, capture) {
            Ok(v) => v,
            Err(e) => {
                key_col.truncate(before);
                value_col.truncate(before);
                return self.deserialization_failed("value", &self.value, e, offset);
            }
        };
        // JSON that was not turned into a `Value` is handed to the extractor as raw bytes: the
        // JSON-field extractor then reads just its field.
        const RAW: Value = Value::Bytes(Vec::new());
        let nested;
        let (value, raw_value) = match decoded {
            Decoded::Value(ref v) => (v, raw_value),
            Decoded::Raw => (
                if raw_value.is_some() {
                    &RAW
                } else {
                    &Value::Null
                },
                raw_value,
            ),
            Decoded::Captured(field) => {
                nested = nest(capture.unwrap_or_default(), field);
                (&nested, None)
            }
        };
        let input = ExtractInput {
            record_timestamp,
            value,
            raw_value,
        };
        let timestamp = self
            .extractor
            .extract(&input, partition_time)
            .map_err(|e| CoreError::new(ErrorKind::InvalidTimestamp, e.reason))?;
        Ok(Admission::Stamped {
            offset,
            timestamp,
            record: (),
        })
    }

    fn deserialization_failed(
        &self,
        what: &str,
        de: &Deserializer,
        e: DeserializeError,
        offset: i64,
    ) -> Result<Admission<()>> {
        match self.handler {
            Handler::Fail => Err(CoreError::new(
                ErrorKind::Deserialization,
                format!(
                    "could not deserialize the record {what} with {}: {e}",
                    de.name()
                ),
            )),
            Handler::Continue => Ok(Admission::Dropped {
                offset,
                reason: DropReason::DeserializationError,
            }),
        }
    }
}

fn natural(de: &Deserializer) -> (DataType, Mode) {
    match output_type(de) {
        Some(t) => (t, Mode::Value),
        None if matches!(de, Deserializer::Json) => (DataType::Utf8, Mode::JsonText),
        None => (DataType::Utf8, Mode::ValueText),
    }
}

/// Deserializes `raw` into `col`. Returns the `Value` when one was built (for the extractor).
fn append(
    de: &Deserializer,
    mode: Mode,
    col: &mut Col,
    raw: Option<&[u8]>,
    capture: Option<&[String]>,
) -> std::result::Result<Decoded, DeserializeError> {
    let Some(data) = raw else {
        col.append_null();
        return Ok(Decoded::Value(Value::Null));
    };
    match mode {
        Mode::Value => {
            let v = de.deserialize(Some(data))?;
            col.append_value(&v);
            Ok(Decoded::Value(v))
        }
        Mode::ValueText => {
            let v = de.deserialize(Some(data))?;
            match json_to_vec(&v) {
                Ok(text) => col.append_str(std::str::from_utf8(&text).unwrap_or_default()),
                Err(_) => col.append_null(),
            }
            Ok(Decoded::Value(v))
        }
        Mode::JsonText => {
            let mut d = serde_json::Deserializer::from_slice(data);
            IgnoredAny::deserialize(&mut d).map_err(json_error)?;
            d.end().map_err(json_error)?;
            // Valid JSON is valid UTF-8 (serde_json checks strings; the rest is ASCII).
            let text = std::str::from_utf8(data)
                .map_err(|e| DeserializeError::new(format!("invalid JSON: {e}")))?;
            col.append_str(text);
            Ok(Decoded::Raw)
        }
        Mode::JsonTyped => {
            let mut d = serde_json::Deserializer::from_slice(data);
            let decoded = match capture {
                None => {
                    ColSeed(col).deserialize(&mut d).map_err(json_error)?;
                    Decoded::Raw
                }
                Some(path) => {
                    let mut slot = None;
                    CaptureSeed {
                        col,
                        path,
                        slot: &mut slot,
                    }
                    .deserialize(&mut d)
                    .map_err(json_error)?;
                    Decoded::Captured(slot)
                }
            };
            d.end().map_err(json_error)?;
            Ok(decoded)
        }
    }
}

/// What the extractor gets to see of a value after it was written to its column.
enum Decoded {
    /// The whole decoded value.
    Value(Value),
    /// Nothing decoded: the extractor reads the raw bytes itself.
    Raw,
    /// Only the value at the JSON-field extractor's path (`None`: missing).
    Captured(Option<Value>),
}

/// `{"a": {"b": field}}` for the path `a.b`: the smallest value on which the JSON-field
/// extractor finds `field` (or finds nothing, when it is missing).
fn nest(path: &[String], field: Option<Value>) -> Value {
    let Some(mut v) = field else {
        return Value::Map(Vec::new());
    };
    for key in path.iter().rev() {
        v = Value::Map(vec![(key.clone(), v)]);
    }
    v
}

struct Group {
    topic: String,
    partition: i32,
    rows: Vec<usize>,
}

/// Splits a batch into its (topic, partition) groups, sorted by topic and partition, each
/// in offset order.
fn group_rows(
    topics: &BinaryColumn<'_>,
    partitions: &Int32Array,
    offsets: &Int64Array,
    n: usize,
) -> Result<Vec<Group>> {
    let mut index: HashMap<(&[u8], i32), usize> = HashMap::new();
    let mut groups: Vec<Group> = Vec::new();
    let mut last: Option<(&[u8], i32, usize)> = None;
    for row in 0..n {
        let topic = topics.get(row).ok_or_else(|| {
            CoreError::invalid_argument(format!("row {row}: the topic column is null"))
        })?;
        if partitions.is_null(row) || offsets.is_null(row) {
            return Err(CoreError::invalid_argument(format!(
                "row {row}: partition and offset must not be null"
            )));
        }
        let partition = partitions.value(row);
        let g = match last {
            Some((t, p, g)) if t == topic && p == partition => g,
            _ => {
                let g = *index.entry((topic, partition)).or_insert_with(|| {
                    groups.push(Group {
                        topic: String::from_utf8_lossy(topic).into_owned(),
                        partition,
                        rows: Vec::new(),
                    });
                    groups.len() - 1
                });
                last = Some((topic, partition, g));
                g
            }
        };
        groups[g].rows.push(row);
    }
    for g in &mut groups {
        let sorted = g
            .rows
            .windows(2)
            .all(|w| offsets.value(w[0]) < offsets.value(w[1]));
        if !sorted {
            g.rows.sort_by_key(|&r| offsets.value(r));
            if let Some(w) = g
                .rows
                .windows(2)
                .find(|w| offsets.value(w[0]) == offsets.value(w[1]))
            {
                let offset = offsets.value(w[0]);
                return Err(CoreError::invalid_argument(format!(
                    "offset {offset} appears twice in the batch"
                ))
                .at_record(&g.topic, g.partition, offset));
            }
        }
    }
    groups.sort_by(|a, b| (&a.topic, a.partition).cmp(&(&b.topic, b.partition)));
    Ok(groups)
}

struct Output {
    topic: StringBuilder,
    partition: Vec<i32>,
    offset: Vec<i64>,
    timestamp: Vec<i64>,
    partition_time: Vec<i64>,
    key: Col,
    value: Col,
}

impl Output {
    fn finish(mut self, stamper: &Stamper) -> Result<RecordBatch> {
        let columns: Vec<ArrayRef> = vec![
            Arc::new(self.topic.finish()),
            Arc::new(Int32Array::from(self.partition)),
            Arc::new(Int64Array::from(self.offset)),
            Arc::new(Int64Array::from(self.timestamp)),
            self.key.finish(&stamper.key_type)?,
            self.value.finish(&stamper.value_type)?,
            Arc::new(Int64Array::from(self.partition_time)),
        ];
        RecordBatch::try_new(stamper.schema(), columns)
            .map_err(|e| CoreError::invalid_argument(format!("building the output batch: {e}")))
    }
}

// ---------------------------------------------------------------------------------------
// Supported target types
// ---------------------------------------------------------------------------------------

fn check_supported(t: &DataType, path: &str) -> Result<()> {
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
enum Col {
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
enum IntKind {
    I8,
    I16,
    I32,
    I64,
}

impl IntKind {
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
struct Bytes {
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
    fn push(&mut self, b: &[u8]) {
        self.data.extend_from_slice(b);
        self.offsets.push(self.data.len() as i64);
        self.valid.push(true);
    }
    fn push_null(&mut self) {
        self.offsets.push(self.data.len() as i64);
        self.valid.push(false);
    }
    fn truncate(&mut self, n: usize) {
        self.valid.truncate(n);
        self.offsets.truncate(n + 1);
        self.data.truncate(self.offsets[n] as usize);
    }
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
    fn new(t: &DataType) -> Col {
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

    fn len(&self) -> usize {
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

    fn truncate(&mut self, n: usize) {
        match self {
            Col::Null(len) => *len = (*len).min(n),
            Col::Bool(x, v) => {
                x.truncate(n);
                v.truncate(n)
            }
            Col::Int(_, x, v) | Col::Timestamp(_, x, v) => {
                x.truncate(n);
                v.truncate(n)
            }
            Col::Float(x, v) => {
                x.truncate(n);
                v.truncate(n)
            }
            Col::Date(x, v) => {
                x.truncate(n);
                v.truncate(n)
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

    fn append_null(&mut self) {
        match self {
            Col::Null(n) => *n += 1,
            Col::Bool(x, v) => {
                x.push(false);
                v.push(false)
            }
            Col::Int(_, x, v) | Col::Timestamp(_, x, v) => {
                x.push(0);
                v.push(false)
            }
            Col::Float(x, v) => {
                x.push(0.0);
                v.push(false)
            }
            Col::Date(x, v) => {
                x.push(0);
                v.push(false)
            }
            Col::Str(b) | Col::Bin(b) => b.push_null(),
            Col::List(offs, _, v) | Col::Map(offs, _, _, v) => {
                offs.push(*offs.last().expect("offsets start with 0"));
                v.push(false)
            }
            Col::Struct(_, children, v) => {
                children.iter_mut().for_each(Col::append_null);
                v.push(false)
            }
        }
    }

    fn append_bool(&mut self, b: bool) {
        match self {
            Col::Bool(x, v) => {
                x.push(b);
                v.push(true)
            }
            Col::Str(s) => s.push(if b { b"true" } else { b"false" }),
            _ => self.append_null(),
        }
    }

    fn append_i64(&mut self, n: i64) {
        match self {
            Col::Int(kind, x, v) if kind.fits(n) => {
                x.push(n);
                v.push(true)
            }
            Col::Float(x, v) => {
                x.push(n as f64);
                v.push(true)
            }
            Col::Timestamp(unit, x, v) => match ms_to_unit(n, *unit) {
                Some(t) => {
                    x.push(t);
                    v.push(true)
                }
                None => self.append_null(),
            },
            Col::Str(s) => s.push(n.to_string().as_bytes()),
            _ => self.append_null(),
        }
    }

    fn append_u64(&mut self, n: u64) {
        match i64::try_from(n) {
            Ok(n) => self.append_i64(n),
            Err(_) => match self {
                Col::Float(x, v) => {
                    x.push(n as f64);
                    v.push(true)
                }
                Col::Str(s) => s.push(n.to_string().as_bytes()),
                _ => self.append_null(),
            },
        }
    }

    fn append_f64(&mut self, f: f64) {
        match self {
            Col::Float(x, v) => {
                x.push(f);
                v.push(true)
            }
            Col::Str(s) => match json_to_vec(&Value::Double(f)) {
                Ok(text) => s.push(&text),
                Err(_) => s.push_null(),
            },
            _ => self.append_null(),
        }
    }

    fn append_str(&mut self, text: &str) {
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
                    v.push(true)
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
                        v.push(true)
                    }
                    None => self.append_null(),
                }
            }
            Col::Date(x, v) => match parse_date(text) {
                Some(d) => {
                    x.push(d);
                    v.push(true)
                }
                None => self.append_null(),
            },
            _ => self.append_null(),
        }
    }

    fn append_bytes(&mut self, bytes: &[u8]) {
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
    fn append_value(&mut self, value: &Value) {
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

    fn finish(self, t: &DataType) -> Result<ArrayRef> {
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

fn push_json_text(s: &mut Bytes, value: &Value) {
    match json_to_vec(value) {
        Ok(text) => s.push(&text),
        Err(_) => s.push_null(),
    }
}

/// Epoch milliseconds in another unit, `None` on overflow.
fn ms_to_unit(ms: i64, unit: TimeUnit) -> Option<i64> {
    match unit {
        TimeUnit::Second => Some(ms.div_euclid(1000)),
        TimeUnit::Millisecond => Some(ms),
        TimeUnit::Microsecond => ms.checked_mul(1_000),
        TimeUnit::Nanosecond => ms.checked_mul(1_000_000),
    }
}

/// `YYYY-MM-DD` → days since 1970-01-01 (proleptic Gregorian), `None` if malformed.
fn parse_date(s: &str) -> Option<i32> {
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
    if !(1..=12).contains(&m) || d < 1 {
        return None;
    }
    let leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    let days_in_month = [
        31,
        if leap { 29 } else { 28 },
        31,
        30,
        31,
        30,
        31,
        31,
        30,
        31,
        30,
        31,
    ];
    if d > days_in_month[(m - 1) as usize] {
        return None;
    }
    // Days from civil (H. Hinnant's algorithm, public domain description).
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    i32::try_from(era * 146_097 + doe - 719_468).ok()
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

// ---------------------------------------------------------------------------------------
// JSON straight into columns
// ---------------------------------------------------------------------------------------

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

/// Builds the column of one value type straight from JSON documents (`None` = null).
pub fn json_to_array(docs: &[Option<&[u8]>], t: &DataType) -> Result<ArrayRef> {
    check_supported(t, "type")?;
    let mut col = Col::new(t);
    for doc in docs {
        append(&Deserializer::Json, Mode::JsonTyped, &mut col, *doc, None)
            .map_err(|e| CoreError::new(ErrorKind::Deserialization, e.reason))?;
    }
    col.finish(t)
}

/// Fields helper for callers building struct types.
pub fn struct_type(fields: Vec<Field>) -> DataType {
    DataType::Struct(Fields::from(fields))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::serde::json_from_slice;
    use crate::timestamp::{OnInvalid, TimeUnit as TsUnit};
    use arrow_array::cast::AsArray;
    use arrow_array::{BinaryArray, StringArray, TimestampMicrosecondArray};

    fn event_type() -> DataType {
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

    fn kafka_batch(
        partitions: &[i32],
        offsets: &[i64],
        timestamps: &[i64],
        values: &[Option<&[u8]>],
    ) -> RecordBatch {
        let n = partitions.len();
        RecordBatch::try_from_iter(vec![
            (
                "key",
                Arc::new(BinaryArray::from(vec![None::<&[u8]>; n])) as ArrayRef,
            ),
            (
                "value",
                Arc::new(BinaryArray::from(values.to_vec())) as ArrayRef,
            ),
            (
                "topic",
                Arc::new(StringArray::from(vec!["t"; n])) as ArrayRef,
            ),
            (
                "partition",
                Arc::new(Int32Array::from(partitions.to_vec())) as ArrayRef,
            ),
            (
                "offset",
                Arc::new(Int64Array::from(offsets.to_vec())) as ArrayRef,
            ),
            (
                "timestamp",
                Arc::new(
                    TimestampMicrosecondArray::from(
                        timestamps.iter().map(|t| t * 1000).collect::<Vec<_>>(),
                    )
                    .with_timezone("UTC"),
                ) as ArrayRef,
            ),
        ])
        .unwrap()
    }

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

    fn json_stamper(handler: Handler, extractor: TimestampExtractor) -> Stamper {
        Stamper::new(
            Deserializer::Bytes,
            Deserializer::Json,
            extractor,
            handler,
            Some(event_type()),
        )
        .unwrap()
    }

    #[test]
    fn admission_follows_the_record_queue_rules_across_batches() {
        let st = json_stamper(
            Handler::Continue,
            TimestampExtractor::json_field("meta.ts", TsUnit::Millis, OnInvalid::Skip).unwrap(),
        );
        let mut state = StampState::new();
        let b1 = kafka_batch(
            &[1, 0, 0, 1, 0],
            &[10, 2, 0, 11, 1],
            &[0; 5],
            &[
                Some(br#"{"meta": {"ts": 50}}"#),
                Some(br#"{"meta": {"ts": 20}}"#),
                Some(br#"{"meta": {"ts": 30}}"#),
                Some(b"{not json"),
                Some(br#"{"meta": {}}"#),
            ],
        );
        let out = st.stamp(&b1, &mut state).unwrap();
        let parts = out.column(1).as_primitive::<Int32Type>();
        let offs = out.column(2).as_primitive::<Int64Type>();
        let ts = out.column(3).as_primitive::<Int64Type>();
        let pt = out.column(6).as_primitive::<Int64Type>();
        assert_eq!(parts.values().to_vec(), vec![0, 0, 1]);
        assert_eq!(offs.values().to_vec(), vec![0, 2, 10]);
        assert_eq!(ts.values().to_vec(), vec![30, 20, 50]);
        assert_eq!(pt.values().to_vec(), vec![30, 30, 50]);
        let p0 = &state[&("t".to_owned(), 0)];
        assert_eq!(p0.dropped().negative_timestamp, 1);
        assert_eq!(
            state[&("t".to_owned(), 1)].dropped().deserialization_error,
            1
        );
        // The value column lost the dropped rows' partial values.
        let v = out.column(5).as_struct();
        assert_eq!(v.len(), 3);
        assert_eq!(
            v.column(1)
                .as_struct()
                .column(0)
                .as_primitive::<Int64Type>()
                .values()
                .to_vec(),
            vec![30, 20, 50]
        );

        let b2 = kafka_batch(&[0], &[3], &[0], &[Some(br#"{"meta": {"ts": 25}}"#)]);
        let out = st.stamp(&b2, &mut state).unwrap();
        assert_eq!(out.column(6).as_primitive::<Int64Type>().value(0), 30);

        let err = st.stamp(&b2, &mut state).unwrap_err();
        assert_eq!(err.kind, ErrorKind::InvalidArgument);
        assert_eq!(err.location.offset, Some(3));
    }

    #[test]
    fn captured_json_field_agrees_with_the_raw_bytes_lookup() {
        let docs: Vec<Option<&[u8]>> = vec![
            Some(br#"{"meta": {"ts": 10}}"#),
            Some(br#"{"meta": {"ts": 5}, "meta": {"x": 1}}"#),
            Some(br#"{"meta": {"ts": 7}, "meta": {"ts": 30}}"#),
            Some(br#"{"meta": 3}"#),
            Some(br#"[1, 2]"#),
            Some(br#"null"#),
            None,
            Some(br#"{"meta": {"ts": 2.0e1}}"#),
            Some(br#"{"meta": {"ts": -4}}"#),
            Some(br#"{"meta": {"ts": "12"}}"#),
            Some(br#"{"meta": {"ts": 40, "deep": {"a": [1]}}, "id": 2}"#),
        ];
        let n = docs.len();
        let offsets: Vec<i64> = (0..n as i64).collect();
        let batch = kafka_batch(&vec![0; n], &offsets, &vec![1; n], &docs);
        let schemas = [
            Some(event_type()),
            // The timestamp's parent is not in the schema at all.
            Some(struct_type(vec![Field::new("id", DataType::Int64, true)])),
            // The parent is a string column (gets the JSON text).
            Some(struct_type(vec![Field::new("meta", DataType::Utf8, true)])),
            // The timestamp itself is a string column.
            Some(struct_type(vec![Field::new(
                "meta",
                struct_type(vec![Field::new("ts", DataType::Utf8, true)]),
                true,
            )])),
        ];
        for policy in [OnInvalid::Skip, OnInvalid::PartitionTime] {
            let extractor =
                TimestampExtractor::json_field("meta.ts", TsUnit::Millis, policy).unwrap();
            let reference = Stamper::new(
                Deserializer::Bytes,
                Deserializer::Json,
                extractor.clone(),
                Handler::Fail,
                None,
            )
            .unwrap();
            let want = reference.stamp(&batch, &mut StampState::new()).unwrap();
            for schema in &schemas {
                let st = Stamper::new(
                    Deserializer::Bytes,
                    Deserializer::Json,
                    extractor.clone(),
                    Handler::Fail,
                    schema.clone(),
                )
                .unwrap();
                let got = st.stamp(&batch, &mut StampState::new()).unwrap();
                for c in [2, 3, 6] {
                    assert_eq!(
                        got.column(c).to_data(),
                        want.column(c).to_data(),
                        "{schema:?}"
                    );
                }
            }
        }
    }

    #[test]
    fn failures_name_the_record() {
        let st = json_stamper(
            Handler::Fail,
            TimestampExtractor::RecordTimestamp(OnInvalid::Fail),
        );
        let mut state = StampState::new();
        let b = kafka_batch(&[4, 4], &[7, 8], &[1, 2], &[Some(b"{}"), Some(b"{")]);
        let err = st.stamp(&b, &mut state).unwrap_err();
        assert_eq!(err.kind, ErrorKind::Deserialization);
        assert_eq!(err.location.partition, Some(4));
        assert_eq!(err.location.offset, Some(8));
        assert_eq!(state[&("t".to_owned(), 4)].partition_time(), 1);

        let b = kafka_batch(&[5], &[0], &[-3], &[Some(b"{}")]);
        let err = st.stamp(&b, &mut state).unwrap_err();
        assert_eq!(err.kind, ErrorKind::InvalidTimestamp);
        assert_eq!(err.location.offset, Some(0));
    }
}
