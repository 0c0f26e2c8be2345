//! Admission: one raw record to a stamped record, or to a drop that says why.
//!
//! Kafka Streams splits this step between `RecordDeserializer` (deserialize key and value; on
//! failure ask the deserialization exception handler whether to fail or to skip the record)
//! and `RecordQueue.updateHead` (extract the timestamp given the partition time; a user
//! extractor's exception becomes a `StreamsException` unless it already is one). Here it is one
//! step, [`Admitter::admit`], which every path runs: the Python `RecordQueue` over records and
//! Messages, its Arrow path, and the `stamp` kernel. What differs between those paths — where
//! the bytes come from, what a deserialized key or value becomes (a Python object, a [`Value`],
//! a row of an Arrow column), whether serdes, extractor and handler are built in or user code —
//! sits behind [`Components`]. The rules, and every error and warning text, are here; what
//! follows admission (a negative timestamp drops the record, partition time, drop counts) is
//! [`RecordQueue::add_with`]'s.

use std::borrow::Cow;
use std::fmt;

use arrow_array::{Int64Array, RecordBatch};

use crate::arrow_decode::{timestamps_ms, BinaryColumn, KafkaColumns};
use crate::error::{CoreError, ErrorKind};
use crate::record_queue::{Admission, DropReason, Dropped, RecordQueue};
use crate::serde::{DeserializeError, Deserializer};
use crate::timestamp::{ExtractInput, TimestampError, TimestampExtractor};
use crate::value::Value;

/// The part of a record being deserialized.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Part {
    Key,
    Value,
}

impl fmt::Display for Part {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Part::Key => "key",
            Part::Value => "value",
        })
    }
}

/// Why a key or value could not be deserialized.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeserializeFailure {
    /// The deserializer's name (Kafka's class name for a built-in one), for the error text.
    pub deserializer: Cow<'static, str>,
    /// What was wrong, e.g. "expected 8 bytes for a Long, got 3".
    pub reason: String,
}

impl DeserializeFailure {
    /// A built-in deserializer's failure.
    pub fn of(de: &Deserializer, e: DeserializeError) -> Self {
        DeserializeFailure {
            deserializer: Cow::Borrowed(de.name()),
            reason: e.reason,
        }
    }
}

/// What the deserialization exception handler decided (Kafka's `DeserializationHandlerResponse`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HandlerResponse {
    /// Skip the record, log it and count it as dropped.
    Continue,
    /// Stop with the `DeserializationError`.
    Fail,
}

/// The built-in deserialization exception handlers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Handler {
    /// Stop with a `Deserialization` error naming the record (Kafka's `LogAndFailExceptionHandler`).
    Fail,
    /// Drop the record and count it (Kafka's `LogAndContinueExceptionHandler`).
    Continue,
}

impl Handler {
    /// The handler's answer, whatever the record.
    pub fn response(self) -> HandlerResponse {
        match self {
            Handler::Fail => HandlerResponse::Fail,
            Handler::Continue => HandlerResponse::Continue,
        }
    }
}

/// Why a handler gave no answer.
#[derive(Debug)]
pub enum HandlerFailure<E> {
    /// The handler (user code) raised `E`.
    Raised(E),
    /// It answered something other than "continue" or "fail" (shown as given).
    Unknown(String),
}

/// Why an extractor gave no timestamp.
#[derive(Debug)]
pub enum ExtractFailure<E> {
    /// No valid timestamp, and the extractor's policy is to fail (`InvalidTimestamp`).
    Invalid(TimestampError),
    /// User code raised `E`: passed on if it is a streams error, wrapped otherwise.
    Raised(E),
    /// The extractor's answer is unusable (not an integer); `E` says so and is passed on.
    Unusable(E),
}

/// Deserializes a raw record's key and value. `Rec` is one raw record as a path holds it (a
/// row index, Python objects, ...).
pub trait KeyValueDeserializer<Rec: ?Sized> {
    /// What a deserialized key becomes.
    type Key;
    /// What a deserialized value becomes (it may keep what the extractor needs).
    type Value;

    fn deserialize_key(&mut self, record: &Rec) -> Result<Self::Key, DeserializeFailure>;

    fn deserialize_value(&mut self, record: &Rec) -> Result<Self::Value, DeserializeFailure>;
}

/// The parts of admission that differ between paths: the deserializers, the extractor and
/// the handler, and the error type user code raises.
pub trait Components<Rec: ?Sized>: KeyValueDeserializer<Rec> {
    /// The error user code raises, and what [`Admitter::admit`] returns.
    type Error: fmt::Display;

    /// The record's timestamp; a negative one drops the record (a rule of the queue).
    fn extract(
        &mut self,
        record: &Rec,
        key: &Self::Key,
        value: &Self::Value,
        partition_time: i64,
    ) -> Result<i64, ExtractFailure<Self::Error>>;

    /// Asks the deserialization exception handler about `error`, raised by `record`.
    fn handle(
        &mut self,
        record: &Rec,
        error: &CoreError,
    ) -> Result<HandlerResponse, HandlerFailure<Self::Error>>;

    /// A core error in the path's error type.
    fn error(&mut self, error: CoreError) -> Self::Error;

    /// Whether user code raised one of streamstate's own errors (Kafka rethrows a
    /// `StreamsException` from an extractor unchanged).
    fn is_streams_error(&mut self, error: &Self::Error) -> bool;

    /// `error` in the path's error type, with `cause` (raised by user code) as its cause.
    fn caused_by(&mut self, error: CoreError, cause: Self::Error) -> Self::Error;
}

/// Components that run no user code (built-in serdes, extractor and handler); their errors
/// are the core's own, boxed (errors are rare, and a small `Result` keeps the per-record path
/// in registers).
pub trait NativeComponents<Rec: ?Sized>: KeyValueDeserializer<Rec> {
    /// The record's timestamp, as [`Components::extract`].
    fn timestamp(
        &mut self,
        record: &Rec,
        key: &Self::Key,
        value: &Self::Value,
        partition_time: i64,
    ) -> Result<i64, TimestampError>;

    /// The handler, the same for every record.
    fn handler(&self) -> Handler;
}

impl<Rec: ?Sized, T: NativeComponents<Rec>> Components<Rec> for T {
    type Error = Box<CoreError>;

    fn extract(
        &mut self,
        record: &Rec,
        key: &T::Key,
        value: &T::Value,
        partition_time: i64,
    ) -> Result<i64, ExtractFailure<Box<CoreError>>> {
        self.timestamp(record, key, value, partition_time)
            .map_err(ExtractFailure::Invalid)
    }

    fn handle(
        &mut self,
        _record: &Rec,
        _error: &CoreError,
    ) -> Result<HandlerResponse, HandlerFailure<Box<CoreError>>> {
        Ok(self.handler().response())
    }

    fn error(&mut self, error: CoreError) -> Box<CoreError> {
        Box::new(error)
    }

    fn is_streams_error(&mut self, _error: &Box<CoreError>) -> bool {
        true // never asked: no user code raises
    }

    fn caused_by(&mut self, error: CoreError, _cause: Box<CoreError>) -> Box<CoreError> {
        Box::new(error)
    }
}

/// Admits the records of one topic partition through its components.
#[derive(Debug)]
pub struct Admitter<'a, C> {
    topic: &'a str,
    partition: i32,
    components: C,
}

impl<'a, C> Admitter<'a, C> {
    pub fn new(topic: &'a str, partition: i32, components: C) -> Self {
        Admitter {
            topic,
            partition,
            components,
        }
    }

    /// Deserializes key and value, then extracts the timestamp given `partition_time`.
    ///
    /// A key or value that fails to deserialize goes to the handler: "continue" drops the
    /// record (the drop carries the `DeserializationError`, for the warning), "fail" returns
    /// that error. A handler that raises, or answers anything else, stops with a
    /// `StreamsError`. An invalid timestamp is an `InvalidTimestamp` error; a user extractor's
    /// exception is passed on if it is a streams error and wrapped in one otherwise. Every
    /// error names the record's topic, partition and offset.
    ///
    /// An admitted record is `build(key, value)`: built once, in the form the caller queues.
    #[inline]
    pub fn admit<Rec: ?Sized, R>(
        &mut self,
        record: &Rec,
        offset: i64,
        partition_time: i64,
        build: impl FnOnce(C::Key, C::Value) -> R,
    ) -> Result<Admission<R>, C::Error>
    where
        C: Components<Rec>,
    {
        let key = match self.components.deserialize_key(record) {
            Ok(key) => key,
            Err(failure) => return self.undeserializable(record, offset, Part::Key, failure),
        };
        let value = match self.components.deserialize_value(record) {
            Ok(value) => value,
            Err(failure) => return self.undeserializable(record, offset, Part::Value, failure),
        };
        let timestamp = match self
            .components
            .extract(record, &key, &value, partition_time)
        {
            Ok(timestamp) => timestamp,
            Err(failure) => return Err(self.extract_failed(offset, failure)),
        };
        Ok(Admission::Stamped {
            offset,
            timestamp,
            record: build(key, value),
        })
    }

    fn at(&self, kind: ErrorKind, reason: String, offset: i64) -> CoreError {
        CoreError::new(kind, reason).at_record(self.topic, self.partition, offset)
    }

    fn undeserializable<Rec: ?Sized, R>(
        &mut self,
        record: &Rec,
        offset: i64,
        part: Part,
        failure: DeserializeFailure,
    ) -> Result<Admission<R>, C::Error>
    where
        C: Components<Rec>,
    {
        let error = self.at(
            ErrorKind::Deserialization,
            format!(
                "could not deserialize the record {part} with {}: {}",
                failure.deserializer, failure.reason
            ),
            offset,
        );
        match self.components.handle(record, &error) {
            Ok(HandlerResponse::Continue) => Ok(Admission::Dropped {
                offset,
                reason: DropReason::DeserializationError,
                error: Some(Box::new(error)),
            }),
            Ok(HandlerResponse::Fail) => Err(self.components.error(error)),
            Err(HandlerFailure::Raised(cause)) => {
                let error = self.at(
                    ErrorKind::Streams,
                    format!("the deserialization exception handler failed: {cause}"),
                    offset,
                );
                Err(self.components.caused_by(error, cause))
            }
            Err(HandlerFailure::Unknown(answer)) => {
                let error = self.at(
                    ErrorKind::Streams,
                    format!(
                        "the deserialization exception handler returned {answer:?}; expected \
                         'continue' or 'fail'"
                    ),
                    offset,
                );
                Err(self.components.error(error))
            }
        }
    }

    fn extract_failed<Rec: ?Sized>(
        &mut self,
        offset: i64,
        failure: ExtractFailure<C::Error>,
    ) -> C::Error
    where
        C: Components<Rec>,
    {
        match failure {
            ExtractFailure::Invalid(e) => {
                let error = self.at(ErrorKind::InvalidTimestamp, e.reason, offset);
                self.components.error(error)
            }
            ExtractFailure::Raised(cause) if self.components.is_streams_error(&cause) => cause,
            ExtractFailure::Raised(cause) => {
                let error = self.at(
                    ErrorKind::Streams,
                    format!("fatal user code error in the timestamp extractor: {cause}"),
                    offset,
                );
                self.components.caused_by(error, cause)
            }
            ExtractFailure::Unusable(error) => error,
        }
    }
}

/// The warning Kafka Streams logs for a dropped record, naming its topic, partition and offset
/// and why it was dropped. `extractor` names the timestamp extractor (for negative timestamps).
pub fn drop_warning(
    topic: &str,
    partition: i32,
    dropped: &Dropped,
    extractor: &dyn fmt::Display,
) -> String {
    match dropped.reason {
        DropReason::DeserializationError => {
            let mut text = format!(
                "Skipping record due to deserialization error. topic=[{topic}] \
                 partition=[{partition}] offset=[{}]",
                dropped.offset
            );
            if let Some(error) = &dropped.error {
                text.push_str(": ");
                text.push_str(&error.reason);
            }
            text
        }
        DropReason::NegativeTimestamp => format!(
            "Skipping record due to negative extracted timestamp. topic=[{topic}] \
             partition=[{partition}] offset=[{}] extractedTimestamp=[{}] extractor=[{extractor}]",
            dropped.offset,
            dropped.timestamp.unwrap_or(crate::timestamp::NOT_KNOWN),
        ),
    }
}

/// The input a built-in extractor sees for a value deserialized as `decoded` (`None`: not
/// kept) from `raw`: the decoded value when kept, else a placeholder of the raw form, with the
/// raw bytes (the JSON-field extractor then reads just its field from them).
#[inline]
pub fn extract_input<'a>(
    record_timestamp: i64,
    decoded: Option<&'a Value>,
    raw: Option<&'a [u8]>,
) -> ExtractInput<'a> {
    static RAW: Value = Value::Bytes(Vec::new());
    ExtractInput {
        record_timestamp,
        value: decoded.unwrap_or(if raw.is_some() { &RAW } else { &Value::Null }),
        raw_value: raw,
    }
}

/// Built-in serdes, extractor and handler: everything in Rust, no user code.
#[derive(Debug, Clone)]
pub struct BuiltIn {
    pub key: Deserializer,
    pub value: Deserializer,
    pub extractor: TimestampExtractor,
    pub handler: Handler,
}

/// What [`BuiltIn::admit_arrow`] admitted, dropped, and the error that stopped it, if any.
#[derive(Debug)]
pub struct ArrowAdmission {
    /// The admitted records: (row, key, value). The value is `Null` for a `Bytes` value
    /// deserializer: the caller takes the bytes from the batch.
    pub admitted: RecordQueue<(usize, Value, Value)>,
    pub dropped: Vec<Dropped>,
    /// The error that stopped the batch; the records before it stay admitted.
    pub error: Option<CoreError>,
}

/// Built-in components over the rows of a Kafka-source batch.
struct Rows<'a> {
    parts: &'a BuiltIn,
    keys: BinaryColumn<'a>,
    values: BinaryColumn<'a>,
    timestamps: Int64Array,
    keep_value: bool,
}

impl KeyValueDeserializer<usize> for Rows<'_> {
    type Key = Value;
    type Value = Value;

    fn deserialize_key(&mut self, row: &usize) -> Result<Value, DeserializeFailure> {
        let de = &self.parts.key;
        de.deserialize(self.keys.get(*row))
            .map_err(|e| DeserializeFailure::of(de, e))
    }

    fn deserialize_value(&mut self, row: &usize) -> Result<Value, DeserializeFailure> {
        match &self.parts.value {
            // Kept raw: the caller copies the bytes once into its own form.
            Deserializer::Bytes => Ok(Value::Null),
            de => de
                .deserialize(self.values.get(*row))
                .map_err(|e| DeserializeFailure::of(de, e)),
        }
    }
}

impl NativeComponents<usize> for Rows<'_> {
    fn timestamp(
        &mut self,
        row: &usize,
        _key: &Value,
        value: &Value,
        partition_time: i64,
    ) -> Result<i64, TimestampError> {
        let kept =
            (self.keep_value && !matches!(self.parts.value, Deserializer::Bytes)).then_some(value);
        let input = extract_input(self.timestamps.value(*row), kept, self.values.get(*row));
        self.parts.extractor.extract(&input, partition_time)
    }

    fn handler(&self) -> Handler {
        self.parts.handler
    }
}

impl BuiltIn {
    /// Whether the extractor reads the decoded value (the JSON-field extractor does).
    pub fn extractor_reads_value(&self) -> bool {
        matches!(self.extractor, TimestampExtractor::JsonField { .. })
    }

    /// Admits the rows of a batch in Spark's Kafka source schema, in row order, for the queue
    /// of `topic` partition `partition` whose partition time is `partition_time`.
    pub fn admit_arrow(
        &self,
        batch: &RecordBatch,
        topic: &str,
        partition: i32,
        partition_time: i64,
    ) -> ArrowAdmission {
        let mut out = ArrowAdmission {
            admitted: RecordQueue::new(),
            dropped: Vec::new(),
            error: None,
        };
        out.admitted.set_partition_time(partition_time);
        let found = KafkaColumns::from_batch(batch).and_then(|cols| {
            let rows = Rows {
                parts: self,
                keys: BinaryColumn::new(cols.key)?,
                values: BinaryColumn::new(cols.value)?,
                timestamps: timestamps_ms(cols.timestamp)?,
                keep_value: self.extractor_reads_value(),
            };
            Ok((rows, cols.offset))
        });
        let (rows, offsets) = match found {
            Ok(found) => found,
            Err(e) => {
                out.error = Some(e);
                return out;
            }
        };
        let mut admitter = Admitter::new(topic, partition, rows);
        let dropped = &mut out.dropped;
        let result = out.admitted.add_with(
            0..batch.num_rows(),
            |row, pt| admitter.admit(&row, offsets.value(row), pt, |key, value| (row, key, value)),
            |d| dropped.push(d),
        );
        out.error = result.err().map(|e| *e);
        out
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow_array::{ArrayRef, BinaryArray, Int32Array, Int64Array, StringArray};

    use super::*;
    use crate::timestamp::OnInvalid;

    /// A record of the scripted components: what each step does with it.
    #[derive(Default)]
    struct Script {
        bad_key: bool,
        bad_value: bool,
        timestamp: Option<i64>,
        extractor_raises: Option<&'static str>,
        extractor_unusable: bool,
        handler: Option<Result<HandlerResponse, HandlerFailure<&'static str>>>,
    }

    /// Components whose user-code errors are strings; `streams:` ones count as streams errors.
    /// Remembers the errors the handler was asked about.
    struct Scripted<'a> {
        asked: &'a mut Vec<CoreError>,
    }

    #[derive(Debug, PartialEq)]
    enum Failed {
        Core(CoreError),
        User(String),
        Wrapped(CoreError, String),
    }

    impl fmt::Display for Failed {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            match self {
                Failed::User(s) => f.write_str(s),
                other => write!(f, "{other:?}"),
            }
        }
    }

    impl KeyValueDeserializer<Script> for Scripted<'_> {
        type Key = &'static str;
        type Value = &'static str;

        fn deserialize_key(&mut self, r: &Script) -> Result<&'static str, DeserializeFailure> {
            if r.bad_key {
                return Err(DeserializeFailure::of(
                    &Deserializer::Long,
                    DeserializeError::new("expected 8 bytes for a Long, got 2"),
                ));
            }
            Ok("k")
        }

        fn deserialize_value(&mut self, r: &Script) -> Result<&'static str, DeserializeFailure> {
            if r.bad_value {
                return Err(DeserializeFailure {
                    deserializer: Cow::Owned("Upper".to_owned()),
                    reason: "no bad values here".to_owned(),
                });
            }
            Ok("v")
        }
    }

    impl Components<Script> for Scripted<'_> {
        type Error = Failed;

        fn extract(
            &mut self,
            r: &Script,
            key: &&'static str,
            value: &&'static str,
            _partition_time: i64,
        ) -> Result<i64, ExtractFailure<Failed>> {
            assert_eq!((*key, *value), ("k", "v"));
            if let Some(raised) = r.extractor_raises {
                return Err(ExtractFailure::Raised(Failed::User(raised.to_owned())));
            }
            if r.extractor_unusable {
                return Err(ExtractFailure::Unusable(Failed::User("not an int".into())));
            }
            r.timestamp.ok_or_else(|| {
                ExtractFailure::Invalid(TimestampError {
                    reason: "no ts".into(),
                })
            })
        }

        fn handle(
            &mut self,
            r: &Script,
            error: &CoreError,
        ) -> Result<HandlerResponse, HandlerFailure<Failed>> {
            self.asked.push(error.clone());
            match r.handler.as_ref().expect("the handler is not asked here") {
                Ok(response) => Ok(*response),
                Err(HandlerFailure::Raised(e)) => {
                    Err(HandlerFailure::Raised(Failed::User((*e).to_owned())))
                }
                Err(HandlerFailure::Unknown(a)) => Err(HandlerFailure::Unknown(a.clone())),
            }
        }

        fn error(&mut self, error: CoreError) -> Failed {
            Failed::Core(error)
        }

        fn is_streams_error(&mut self, error: &Failed) -> bool {
            matches!(error, Failed::User(s) if s.starts_with("streams:"))
        }

        fn caused_by(&mut self, error: CoreError, cause: Failed) -> Failed {
            Failed::Wrapped(error, cause.to_string())
        }
    }

    type Out = Result<Admission<(&'static str, &'static str)>, Failed>;

    fn admit(script: Script) -> (Out, Vec<CoreError>) {
        let mut asked = Vec::new();
        let out = Admitter::new("orders", 3, Scripted { asked: &mut asked }).admit(
            &script,
            42,
            7,
            |k, v| (k, v),
        );
        (out, asked)
    }

    fn located(kind: ErrorKind, reason: &str) -> CoreError {
        CoreError::new(kind, reason).at_record("orders", 3, 42)
    }

    fn wrapped(reason: &str, cause: &str) -> Failed {
        Failed::Wrapped(located(ErrorKind::Streams, reason), cause.into())
    }

    const BAD_KEY: &str =
        "could not deserialize the record key with LongDeserializer: expected 8 bytes for a Long, got 2";

    #[test]
    fn a_good_record_is_stamped() {
        let (out, asked) = admit(Script {
            timestamp: Some(5),
            ..Script::default()
        });
        match out.unwrap() {
            Admission::Stamped {
                offset,
                timestamp,
                record,
            } => assert_eq!((offset, timestamp, record), (42, 5, ("k", "v"))),
            other => panic!("{other:?}"),
        }
        assert!(asked.is_empty());
    }

    #[test]
    fn an_undeserializable_record_goes_to_the_handler() {
        let (out, asked) = admit(Script {
            bad_key: true,
            handler: Some(Ok(HandlerResponse::Fail)),
            ..Script::default()
        });
        let want = located(ErrorKind::Deserialization, BAD_KEY);
        assert_eq!(out.unwrap_err(), Failed::Core(want.clone()));
        assert_eq!(asked, vec![want.clone()]);

        let (out, _) = admit(Script {
            bad_key: true,
            handler: Some(Ok(HandlerResponse::Continue)),
            ..Script::default()
        });
        match out.unwrap() {
            Admission::Dropped {
                offset,
                reason,
                error,
            } => {
                assert_eq!((offset, reason), (42, DropReason::DeserializationError));
                assert_eq!(error.as_deref(), Some(&want));
            }
            other => panic!("{other:?}"),
        }

        let (out, asked) = admit(Script {
            bad_value: true,
            handler: Some(Ok(HandlerResponse::Fail)),
            ..Script::default()
        });
        assert_eq!(
            asked[0].reason,
            "could not deserialize the record value with Upper: no bad values here"
        );
        assert!(matches!(out, Err(Failed::Core(_))));
    }

    #[test]
    fn a_failing_or_confused_handler_stops_with_a_streams_error() {
        let (out, _) = admit(Script {
            bad_key: true,
            handler: Some(Err(HandlerFailure::Raised("boom"))),
            ..Script::default()
        });
        assert_eq!(
            out.unwrap_err(),
            wrapped("the deserialization exception handler failed: boom", "boom")
        );
        let (out, _) = admit(Script {
            bad_value: true,
            handler: Some(Err(HandlerFailure::Unknown("ignore".into()))),
            ..Script::default()
        });
        assert_eq!(
            out.unwrap_err(),
            Failed::Core(located(
                ErrorKind::Streams,
                "the deserialization exception handler returned \"ignore\"; expected \
                 'continue' or 'fail'"
            ))
        );
    }

    #[test]
    fn extractor_failures_follow_kafkas_rules() {
        let (out, _) = admit(Script::default());
        assert_eq!(
            out.unwrap_err(),
            Failed::Core(located(ErrorKind::InvalidTimestamp, "no ts"))
        );
        // A streams error from user code passes unchanged; anything else is wrapped.
        let (out, _) = admit(Script {
            extractor_raises: Some("streams: already located"),
            ..Script::default()
        });
        assert_eq!(
            out.unwrap_err(),
            Failed::User("streams: already located".into())
        );
        let (out, _) = admit(Script {
            extractor_raises: Some("RuntimeError: blew up"),
            ..Script::default()
        });
        assert_eq!(
            out.unwrap_err(),
            wrapped(
                "fatal user code error in the timestamp extractor: RuntimeError: blew up",
                "RuntimeError: blew up"
            )
        );
        let (out, _) = admit(Script {
            extractor_unusable: true,
            ..Script::default()
        });
        assert_eq!(out.unwrap_err(), Failed::User("not an int".into()));
    }

    #[test]
    fn drop_warnings_say_where_and_why() {
        let dropped = Dropped {
            offset: 42,
            reason: DropReason::DeserializationError,
            timestamp: None,
            error: Some(Box::new(located(ErrorKind::Deserialization, BAD_KEY))),
        };
        assert_eq!(
            drop_warning("orders", 3, &dropped, &"x"),
            format!(
                "Skipping record due to deserialization error. topic=[orders] partition=[3] \
                 offset=[42]: {BAD_KEY}"
            )
        );
        let dropped = Dropped {
            offset: 43,
            reason: DropReason::NegativeTimestamp,
            timestamp: Some(-5),
            error: None,
        };
        assert_eq!(
            drop_warning("orders", 3, &dropped, &"Negative"),
            "Skipping record due to negative extracted timestamp. topic=[orders] \
             partition=[3] offset=[43] extractedTimestamp=[-5] extractor=[Negative]"
        );
    }

    fn kafka_batch(keys: Vec<Option<&[u8]>>, values: Vec<Option<&[u8]>>) -> RecordBatch {
        let n = keys.len() as i64;
        RecordBatch::try_from_iter(vec![
            ("key", Arc::new(BinaryArray::from(keys)) as ArrayRef),
            ("value", Arc::new(BinaryArray::from(values)) as ArrayRef),
            (
                "topic",
                Arc::new(StringArray::from(vec!["t"; n as usize])) as ArrayRef,
            ),
            (
                "partition",
                Arc::new(Int32Array::from(vec![0; n as usize])) as ArrayRef,
            ),
            (
                "offset",
                Arc::new(Int64Array::from_iter_values(0..n)) as ArrayRef,
            ),
            (
                "timestamp",
                Arc::new(Int64Array::from_iter_values((0..n).map(|i| 100 * i))) as ArrayRef,
            ),
        ])
        .unwrap()
    }

    #[test]
    fn built_in_arrow_admission_keeps_why_a_row_was_dropped() {
        let long = 5i64.to_be_bytes();
        let batch = kafka_batch(
            vec![Some(&long), Some(b"\x00\x01"), Some(&long), None],
            vec![
                Some(b"{\"ts\": 7}"),
                Some(b"{}"),
                Some(b"{\"ts\": 3}"),
                None,
            ],
        );
        let parts = BuiltIn {
            key: Deserializer::Long,
            value: Deserializer::Json,
            extractor: TimestampExtractor::json_field(
                "ts",
                crate::timestamp::TimeUnit::Millis,
                OnInvalid::Skip,
            )
            .unwrap(),
            handler: Handler::Continue,
        };
        let mut out = parts.admit_arrow(&batch, "t", 0, 1);
        assert!(out.error.is_none());
        let rows: Vec<(i64, i64, usize)> = std::iter::from_fn(|| out.admitted.poll())
            .map(|r| (r.offset, r.timestamp, r.record.0))
            .collect();
        assert_eq!(rows, vec![(0, 7, 0), (2, 3, 2)]);
        assert_eq!(out.admitted.partition_time(), 7);
        let reasons: Vec<(i64, DropReason)> =
            out.dropped.iter().map(|d| (d.offset, d.reason)).collect();
        assert_eq!(
            reasons,
            vec![
                (1, DropReason::DeserializationError),
                (3, DropReason::NegativeTimestamp)
            ]
        );
        let error = out.dropped[0].error.as_deref().unwrap();
        assert_eq!(
            error.reason,
            "could not deserialize the record key with LongDeserializer: expected 8 bytes \
             for a Long, got 2"
        );
        assert_eq!(error.location, crate::error::Location::record("t", 0, 1));

        let parts = BuiltIn {
            handler: Handler::Fail,
            ..parts
        };
        let mut out = parts.admit_arrow(&batch, "t", 0, crate::timestamp::NOT_KNOWN);
        assert_eq!(out.error.unwrap().location.offset, Some(1));
        assert_eq!(out.admitted.poll().map(|r| r.offset), Some(0));
        assert!(out.admitted.poll().is_none());
    }
}
