//! `RecordQueue`: the per-partition FIFO of stamped records.
//!
//! The queue is generic over what a record carries (`R`), so the same admission rules serve
//! Python objects (the binding stores `Py<PyAny>` keys and values) and plain Rust values (the
//! Arrow path). What is fixed here are Kafka Streams' rules: records are admitted in offset
//! order, a negative extracted timestamp drops the record, every drop is counted by reason, and
//! partition time is the highest timestamp admitted so far.
//!
//! Deliberate difference from Kafka Streams 2.6+: admission is eager (the whole batch is
//! deserialized and stamped by `add_with`), so partition time advances when a record is
//! admitted rather than when it is polled. The extractor therefore sees, for each record, the
//! highest timestamp among the records before it — including earlier records of the same batch.

use std::collections::VecDeque;

use crate::error::CoreError;
use crate::timestamp::NOT_KNOWN;

/// A record with the timestamp its extractor gave it.
#[derive(Debug, Clone, PartialEq)]
pub struct Stamped<R> {
    pub offset: i64,
    pub timestamp: i64,
    pub record: R,
}

/// Why a record was dropped instead of queued.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DropReason {
    /// The key or value failed to deserialize and the handler said "continue".
    DeserializationError,
    /// The extractor returned a negative timestamp.
    NegativeTimestamp,
}

impl DropReason {
    /// The key under which Python's `dropped_records` reports this reason.
    pub fn as_str(self) -> &'static str {
        match self {
            DropReason::DeserializationError => "deserialization_error",
            DropReason::NegativeTimestamp => "negative_timestamp",
        }
    }
}

/// Number of records dropped, by reason.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DropCounts {
    pub deserialization_error: u64,
    pub negative_timestamp: u64,
}

impl DropCounts {
    fn count(&mut self, reason: DropReason) {
        match reason {
            DropReason::DeserializationError => self.deserialization_error += 1,
            DropReason::NegativeTimestamp => self.negative_timestamp += 1,
        }
    }

    pub fn total(&self) -> u64 {
        self.deserialization_error + self.negative_timestamp
    }
}

/// What the caller's stamping step decided for one raw record.
#[derive(Debug)]
pub enum Admission<R> {
    /// Deserialized and stamped; a negative timestamp still drops it (Kafka's rule).
    Stamped {
        offset: i64,
        timestamp: i64,
        record: R,
    },
    /// Dropped by policy (e.g. a deserialization error with the "continue" handler).
    Dropped {
        offset: i64,
        reason: DropReason,
        /// Why, when there is more to say than the reason (the deserialization error).
        error: Option<Box<CoreError>>,
    },
}

impl<R> Admission<R> {
    /// The same decision about a record carried in another form.
    pub fn map<S>(self, f: impl FnOnce(R) -> S) -> Admission<S> {
        match self {
            Admission::Stamped {
                offset,
                timestamp,
                record,
            } => Admission::Stamped {
                offset,
                timestamp,
                record: f(record),
            },
            Admission::Dropped {
                offset,
                reason,
                error,
            } => Admission::Dropped {
                offset,
                reason,
                error,
            },
        }
    }
}

/// A record the queue dropped during `add_with`, reported so the caller can log it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Dropped {
    pub offset: i64,
    pub reason: DropReason,
    /// The extracted timestamp for `NegativeTimestamp` drops.
    pub timestamp: Option<i64>,
    /// The error behind a `DeserializationError` drop.
    pub error: Option<Box<CoreError>>,
}

/// The FIFO of one topic partition.
#[derive(Debug)]
pub struct RecordQueue<R> {
    fifo: VecDeque<Stamped<R>>,
    partition_time: i64,
    dropped: DropCounts,
}

impl<R> Default for RecordQueue<R> {
    fn default() -> Self {
        Self::new()
    }
}

impl<R> RecordQueue<R> {
    pub fn new() -> Self {
        RecordQueue {
            fifo: VecDeque::new(),
            partition_time: NOT_KNOWN,
            dropped: DropCounts::default(),
        }
    }

    /// Admits a batch in order. `stamp` receives each input with the current partition time
    /// and decides; an `Err` stops the batch there, leaving every record before it queued.
    /// `on_drop` hears every dropped record (for logging) as it happens.
    pub fn add_with<I, T, E, F, D>(
        &mut self,
        inputs: I,
        mut stamp: F,
        mut on_drop: D,
    ) -> Result<usize, E>
    where
        I: IntoIterator<Item = T>,
        F: FnMut(T, i64) -> Result<Admission<R>, E>,
        D: FnMut(Dropped),
    {
        let inputs = inputs.into_iter();
        self.fifo.reserve(inputs.size_hint().0);
        for input in inputs {
            match stamp(input, self.partition_time)? {
                Admission::Stamped {
                    offset,
                    timestamp,
                    record,
                } => {
                    if timestamp < 0 {
                        self.dropped.count(DropReason::NegativeTimestamp);
                        on_drop(Dropped {
                            offset,
                            reason: DropReason::NegativeTimestamp,
                            timestamp: Some(timestamp),
                            error: None,
                        });
                    } else {
                        self.push(offset, timestamp, record);
                    }
                }
                Admission::Dropped {
                    offset,
                    reason,
                    error,
                } => {
                    self.dropped.count(reason);
                    on_drop(Dropped {
                        offset,
                        reason,
                        timestamp: None,
                        error,
                    });
                }
            }
        }
        Ok(self.fifo.len())
    }

    /// Appends an already-stamped record with a valid (non-negative) timestamp.
    pub fn push(&mut self, offset: i64, timestamp: i64, record: R) {
        debug_assert!(
            timestamp >= 0,
            "negative timestamps are dropped, never queued"
        );
        if timestamp > self.partition_time {
            self.partition_time = timestamp;
        }
        self.fifo.push_back(Stamped {
            offset,
            timestamp,
            record,
        });
    }

    pub fn poll(&mut self) -> Option<Stamped<R>> {
        self.fifo.pop_front()
    }

    pub fn head(&self) -> Option<&Stamped<R>> {
        self.fifo.front()
    }

    /// Timestamp of the head record, `NOT_KNOWN` when empty.
    pub fn head_timestamp(&self) -> i64 {
        self.fifo.front().map_or(NOT_KNOWN, |r| r.timestamp)
    }

    pub fn head_offset(&self) -> Option<i64> {
        self.fifo.front().map(|r| r.offset)
    }

    pub fn partition_time(&self) -> i64 {
        self.partition_time
    }

    /// Sets partition time unconditionally, as Kafka does when restoring it from commit metadata.
    pub fn set_partition_time(&mut self, t: i64) {
        self.partition_time = t;
    }

    pub fn len(&self) -> usize {
        self.fifo.len()
    }

    pub fn is_empty(&self) -> bool {
        self.fifo.is_empty()
    }

    /// Empties the queue and forgets partition time; drop counts are kept (they are metrics).
    pub fn clear(&mut self) {
        self.fifo.clear();
        self.partition_time = NOT_KNOWN;
    }

    pub fn dropped(&self) -> DropCounts {
        self.dropped
    }

    /// Adds drops counted elsewhere (a batch admitted into a scratch queue off the GIL).
    pub fn add_drops(&mut self, more: DropCounts) {
        self.dropped.deserialization_error += more.deserialization_error;
        self.dropped.negative_timestamp += more.negative_timestamp;
    }

    pub fn iter(&self) -> impl Iterator<Item = &Stamped<R>> {
        self.fifo.iter()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Timestamp = offset, like Kafka's MockTimestampExtractor.
    fn by_offset(offsets: &[i64]) -> Vec<i64> {
        offsets.to_vec()
    }

    fn add(q: &mut RecordQueue<i64>, offsets: &[i64]) -> usize {
        q.add_with(
            by_offset(offsets),
            |o, _pt| {
                Ok::<_, ()>(Admission::Stamped {
                    offset: o,
                    timestamp: o,
                    record: o,
                })
            },
            |_| {},
        )
        .unwrap()
    }

    #[test]
    fn time_tracking_follows_admission_order() {
        let mut q = RecordQueue::new();
        assert!(q.is_empty());
        assert_eq!(q.head_timestamp(), NOT_KNOWN);
        assert_eq!(add(&mut q, &[2, 1, 3]), 3);
        assert_eq!(q.head_timestamp(), 2);
        assert_eq!(q.partition_time(), 3);
        assert_eq!(q.poll().unwrap().timestamp, 2);
        assert_eq!(q.poll().unwrap().timestamp, 1);
        assert_eq!(add(&mut q, &[4, 1, 2]), 4);
        assert_eq!(q.head_timestamp(), 3);
        let order: Vec<i64> = std::iter::from_fn(|| q.poll().map(|r| r.timestamp)).collect();
        assert_eq!(order, vec![3, 4, 1, 2]);
        assert_eq!(q.partition_time(), 4);
        q.clear();
        assert_eq!(q.partition_time(), NOT_KNOWN);
        assert_eq!(add(&mut q, &[4, 5, 6]), 3);
    }

    #[test]
    fn extractor_sees_running_partition_time() {
        let mut q: RecordQueue<i64> = RecordQueue::new();
        let mut seen = Vec::new();
        q.add_with(
            vec![2i64, 1, 3, 4],
            |o, pt| {
                seen.push(pt);
                Ok::<_, ()>(Admission::Stamped {
                    offset: o,
                    timestamp: o,
                    record: o,
                })
            },
            |_| {},
        )
        .unwrap();
        assert_eq!(seen, vec![NOT_KNOWN, 2, 2, 3]);
    }

    #[test]
    fn negative_timestamps_and_policy_drops_are_counted() {
        let mut q: RecordQueue<i64> = RecordQueue::new();
        let mut drops = Vec::new();
        let n = q
            .add_with(
                vec![0i64, 1, 2],
                |o, _| {
                    Ok::<_, ()>(match o {
                        1 => Admission::Dropped {
                            offset: o,
                            reason: DropReason::DeserializationError,
                            error: None,
                        },
                        2 => Admission::Stamped {
                            offset: o,
                            timestamp: -7,
                            record: o,
                        },
                        _ => Admission::Stamped {
                            offset: o,
                            timestamp: 10,
                            record: o,
                        },
                    })
                },
                |d| drops.push(d),
            )
            .unwrap();
        assert_eq!(n, 1);
        assert_eq!(q.dropped().deserialization_error, 1);
        assert_eq!(q.dropped().negative_timestamp, 1);
        assert_eq!(drops[1].timestamp, Some(-7));
        assert_eq!(q.partition_time(), 10);
    }

    #[test]
    fn failure_keeps_records_before_it() {
        let mut q: RecordQueue<i64> = RecordQueue::new();
        let err = q.add_with(
            vec![0i64, 1, 2],
            |o, _| {
                if o == 2 {
                    Err("bad")
                } else {
                    Ok(Admission::Stamped {
                        offset: o,
                        timestamp: o,
                        record: o,
                    })
                }
            },
            |_| {},
        );
        assert_eq!(err, Err("bad"));
        assert_eq!(q.len(), 2);
        assert_eq!(q.partition_time(), 1);
    }

    #[test]
    fn set_partition_time_is_unconditional() {
        let mut q: RecordQueue<i64> = RecordQueue::new();
        q.set_partition_time(150);
        add(&mut q, &[200, 100, 300, 400]);
        assert_eq!(q.partition_time(), 400);
        q.set_partition_time(50);
        assert_eq!(q.partition_time(), 50);
    }
}
