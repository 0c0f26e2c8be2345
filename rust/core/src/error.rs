//! The crate-wide error type: every failure a caller may see, with the record it concerns.
//!
//! Location fields are optional because the same error may arise before a record is known
//! (a bad configuration) or deep inside a batch (a malformed value at a given offset).

use std::fmt;

/// Where a failure happened, as far as it is known.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Location {
    pub topic: Option<String>,
    pub partition: Option<i32>,
    pub offset: Option<i64>,
    pub store_name: Option<String>,
}

impl Location {
    /// A record's position in a topic partition.
    pub fn record(topic: &str, partition: i32, offset: i64) -> Self {
        Location {
            topic: Some(topic.to_owned()),
            partition: Some(partition),
            offset: Some(offset),
            store_name: None,
        }
    }
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut parts = Vec::new();
        if let Some(s) = &self.store_name {
            parts.push(format!("store '{s}'"));
        }
        if let Some(t) = &self.topic {
            parts.push(format!("topic '{t}'"));
        }
        if let Some(p) = self.partition {
            parts.push(format!("partition {p}"));
        }
        if let Some(o) = self.offset {
            parts.push(format!("offset {o}"));
        }
        if parts.is_empty() {
            Ok(())
        } else {
            write!(f, " ({})", parts.join(", "))
        }
    }
}

/// What went wrong; the binding maps each kind to one class of `streamstate.errors`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// A key or value could not be deserialized (`DeserializationError`).
    Deserialization,
    /// No valid timestamp could be extracted and the policy is to fail (`InvalidTimestampError`).
    InvalidTimestamp,
    /// A checkpoint file is malformed (`CorruptCheckpointError`).
    CorruptCheckpoint,
    /// A store is unusable: closed, failed I/O, bad path (`ProcessorStateError`).
    ProcessorState,
    /// The caller passed something unusable (`ValueError`/`TypeError` on the Python side).
    InvalidArgument,
    /// Processing must stop for another reason, e.g. user code failed (`StreamsError`).
    Streams,
}

/// An error of the core, with the record or store it concerns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CoreError {
    pub kind: ErrorKind,
    pub reason: String,
    pub location: Location,
}

impl CoreError {
    pub fn new(kind: ErrorKind, reason: impl Into<String>) -> Self {
        CoreError {
            kind,
            reason: reason.into(),
            location: Location::default(),
        }
    }

    /// Attaches the record position, keeping fields that are already known.
    pub fn at_record(mut self, topic: &str, partition: i32, offset: i64) -> Self {
        self.location.topic.get_or_insert_with(|| topic.to_owned());
        self.location.partition.get_or_insert(partition);
        self.location.offset.get_or_insert(offset);
        self
    }

    pub fn in_store(mut self, store_name: &str) -> Self {
        self.location
            .store_name
            .get_or_insert_with(|| store_name.to_owned());
        self
    }

    pub fn invalid_argument(reason: impl Into<String>) -> Self {
        CoreError::new(ErrorKind::InvalidArgument, reason)
    }
}

impl fmt::Display for CoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}{}", self.reason, self.location)
    }
}

impl std::error::Error for CoreError {}

pub type Result<T> = std::result::Result<T, CoreError>;
