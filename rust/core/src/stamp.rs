//! `stamp`: Kafka Streams' record-queue admission over whole Arrow batches.
//!
//! A batch in Spark's Kafka source schema goes in; out comes one row per *admitted* record with
//! its deserialized key and value, the extracted timestamp and the partition time after the
//! record was admitted. Rows are processed per Kafka topic-partition in offset order, and each
//! record goes through [`RecordQueue::add_with`], so the admission rules (negative timestamp →
//! drop, partition time = highest admitted timestamp, drop counts) are exactly those of the
//! Python `RecordQueue`. Partition time carries over between calls through [`StampState`].
//!
//! Each record is admitted by [`Admitter::admit`] (the same step as the Python `RecordQueue`'s),
//! with components that write key and value straight into Arrow columns of a requested type
//! (a struct for JSON and Avro values given a schema): JSON goes from bytes to columns in one
//! pass ([`crate::json_columns`]), other formats through [`Value`]; the columns cast as Spark's
//! `from_json` does in PERMISSIVE mode ([`crate::arrow_build`]).

use std::collections::HashMap;
use std::sync::Arc;

use arrow_array::builder::StringBuilder;
use arrow_array::{Array, ArrayRef, Int32Array, Int64Array, RecordBatch};
use arrow_schema::{DataType, Field, Schema, SchemaRef};
use serde::de::IgnoredAny;
use serde::Deserialize;

pub use crate::admission::Handler;
use crate::admission::{
    extract_input, Admitter, DeserializeFailure, KeyValueDeserializer, NativeComponents,
};
use crate::arrow_build::{check_supported, Col};
use crate::arrow_decode::{output_type, timestamps_ms, BinaryColumn, KafkaColumns};
use crate::error::{CoreError, Result};
use crate::json_columns::{json_into_column, json_into_column_capturing};
use crate::record_queue::{DropCounts, RecordQueue};
use crate::serde::{json_error, json_to_vec, DeserializeError, Deserializer};
use crate::timestamp::{TimestampError, TimestampExtractor, NOT_KNOWN};
use crate::value::Value;

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

    /// A partition's state carried over from an earlier run, as [`PartitionState::partition_time`],
    /// [`PartitionState::last_offset`] and [`PartitionState::dropped`] handed it out: Spark's
    /// streaming `stamp` keeps these three in its state store between micro-batches, so the next
    /// batch continues exactly where one record queue reading the partition would be.
    pub fn resumed(partition_time: i64, last_offset: Option<i64>, dropped: DropCounts) -> Self {
        let mut queue = RecordQueue::new();
        queue.set_partition_time(partition_time);
        queue.add_drops(dropped);
        PartitionState { queue, last_offset }
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
                let row = Row {
                    key: keys.get(row),
                    value: values.get(row),
                    // A null record timestamp counts as "no timestamp" (Kafka's -1).
                    timestamp: if record_ts.is_valid(row) {
                        record_ts.value(row)
                    } else {
                        NOT_KNOWN
                    },
                };
                let mut admitter = Admitter::new(
                    &group.topic,
                    group.partition,
                    Columns {
                        stamper: self,
                        key: &mut out.key,
                        value: &mut out.value,
                    },
                );
                entry
                    .queue
                    .add_with(
                        std::iter::once(()),
                        |(), partition_time| {
                            admitter.admit(&row, offset, partition_time, |_, _| ())
                        },
                        |_| {},
                    )
                    .map_err(|e| locate(*e))?;
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
}

/// One row of the batch: its raw key and value and its record timestamp.
struct Row<'a> {
    key: Option<&'a [u8]>,
    value: Option<&'a [u8]>,
    timestamp: i64,
}

/// The stamper's serdes writing into the output columns, its extractor and handler.
struct Columns<'a> {
    stamper: &'a Stamper,
    key: &'a mut Col,
    value: &'a mut Col,
}

impl KeyValueDeserializer<Row<'_>> for Columns<'_> {
    /// The key is in its column.
    type Key = ();
    /// The value is in its column; this is what the extractor may read of it.
    type Value = Decoded;

    fn deserialize_key(&mut self, row: &Row<'_>) -> std::result::Result<(), DeserializeFailure> {
        let st = self.stamper;
        append(&st.key, st.key_mode, self.key, row.key, None)
            .map(|_| ())
            .map_err(|e| DeserializeFailure::of(&st.key, e))
    }

    fn deserialize_value(
        &mut self,
        row: &Row<'_>,
    ) -> std::result::Result<Decoded, DeserializeFailure> {
        let st = self.stamper;
        // With the JSON-field extractor, a value decoded straight into columns keeps the
        // field for it: no second pass over the bytes.
        let capture = match (&st.extractor, st.value_mode) {
            (TimestampExtractor::JsonField { path, .. }, Mode::JsonTyped) => Some(path.as_slice()),
            _ => None,
        };
        append(&st.value, st.value_mode, self.value, row.value, capture)
            .map_err(|e| DeserializeFailure::of(&st.value, e))
    }
}

impl NativeComponents<Row<'_>> for Columns<'_> {
    fn timestamp(
        &mut self,
        row: &Row<'_>,
        _key: &(),
        value: &Decoded,
        partition_time: i64,
    ) -> std::result::Result<i64, TimestampError> {
        let input = match value {
            Decoded::Value(v) => extract_input(row.timestamp, Some(v), row.value),
            // JSON that was not turned into a `Value`: the extractor reads the raw bytes.
            Decoded::Raw => extract_input(row.timestamp, None, row.value),
            Decoded::Captured(nested) => extract_input(row.timestamp, Some(nested), None),
        };
        self.stamper.extractor.extract(&input, partition_time)
    }

    fn handler(&self) -> Handler {
        self.stamper.handler
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
        Mode::JsonTyped => match capture {
            None => {
                json_into_column(col, data)?;
                Ok(Decoded::Raw)
            }
            Some(path) => {
                let field = json_into_column_capturing(col, data, path)?;
                Ok(Decoded::Captured(nest(path, field)))
            }
        },
    }
}

/// What the extractor gets to see of a value after it was written to its column.
enum Decoded {
    /// The whole decoded value.
    Value(Value),
    /// Nothing decoded: the extractor reads the raw bytes itself.
    Raw,
    /// Only the field at the JSON-field extractor's path, nested as in the document (see
    /// [`nest`]).
    Captured(Value),
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::arrow_build::struct_type;
    use crate::arrow_build::tests::event_type;
    use crate::error::ErrorKind;
    use crate::timestamp::{OnInvalid, TimeUnit as TsUnit};
    use arrow_array::cast::AsArray;
    use arrow_array::types::{Int32Type, Int64Type};
    use arrow_array::{BinaryArray, StringArray, TimestampMicrosecondArray};

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

    #[test]
    fn a_resumed_partition_continues_where_the_first_state_stopped() {
        // One state over both batches, and a fresh state resumed from what the first handed
        // out, stamp the second batch identically: that is what Spark's streaming `stamp`
        // relies on between micro-batches.
        let st = json_stamper(
            Handler::Continue,
            TimestampExtractor::json_field("meta.ts", TsUnit::Millis, OnInvalid::PartitionTime)
                .unwrap(),
        );
        let b1 = kafka_batch(
            &[0, 0, 0],
            &[0, 1, 2],
            &[0; 3],
            &[
                Some(br#"{"meta": {"ts": 40}}"#),
                Some(b"{broken"),
                Some(br#"{"meta": {"ts": -5}}"#),
            ],
        );
        let b2 = kafka_batch(
            &[0, 0],
            &[3, 4],
            &[0; 2],
            &[Some(br#"{"meta": {}}"#), Some(br#"{"meta": {"ts": 10}}"#)],
        );
        let mut whole = StampState::new();
        st.stamp(&b1, &mut whole).unwrap();
        let first = &whole[&("t".to_owned(), 0)];
        let mut resumed = StampState::new();
        resumed.insert(
            ("t".to_owned(), 0),
            PartitionState::resumed(first.partition_time(), first.last_offset(), first.dropped()),
        );
        let want = st.stamp(&b2, &mut whole).unwrap();
        let got = st.stamp(&b2, &mut resumed).unwrap();
        assert_eq!(got, want);
        // The record without a timestamp took the carried partition time.
        assert_eq!(got.column(3).as_primitive::<Int64Type>().value(0), 40);
        let (w, r) = (&whole[&("t".to_owned(), 0)], &resumed[&("t".to_owned(), 0)]);
        assert_eq!(r.dropped(), w.dropped());
        assert_eq!(r.dropped().deserialization_error, 1);
        // A negative timestamp takes the partition time under this policy: no drop.
        assert_eq!(r.dropped().negative_timestamp, 0);
        assert_eq!(r.last_offset(), Some(4));
        // The carried last offset still guards the order.
        let err = st.stamp(&b1, &mut resumed).unwrap_err();
        assert_eq!(err.kind, ErrorKind::InvalidArgument);
    }
}
