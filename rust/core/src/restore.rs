//! `process_next`: the batch step of changelog restoration (Kafka Streams'
//! `StoreChangelogReader.processNext`), applying polled changelog records to a store.
//!
//! Given the records polled for one changelog partition, in offset order, and the end offset
//! (exclusive) to restore to:
//! - every record with `offset < end_offset` is consumed; those with a key are applied to the
//!   store as ONE atomic write (a `None` value deletes the key), in offset order, so the last
//!   write to a key wins. They go through [`KeyValueStore::restore_batch`]: the persistent store
//!   may let them wait and write several batches as one sorted run (`store/bulk.rs`), and
//!   writes whatever waits once a batch reaches `end_offset`;
//! - a record with a null key is consumed but not applied (a changelog never has one; Kafka
//!   Streams logs and skips it): its offset is reported so the caller can warn;
//! - the first record with `offset >= end_offset` stops the step; it and everything after it
//!   are neither consumed nor applied.

use crate::error::{CoreError, Result};
use crate::store::{KeyValueStore, WriteOp};

/// What one `process_next` step did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RestoredBatch {
    /// The offset to read next: the offset of the first record at or past the end offset if
    /// there was one, else the last record's offset + 1; `-1` when no record was given (the
    /// caller's consumer position is then unchanged and is the answer).
    pub next_offset: i64,
    /// The offset of the last record applied to the store, `-1` when none was. Null-key records
    /// are not applied and so never count here (they still advance `next_offset`).
    pub last_restored_offset: i64,
    /// How many records were applied to the store: consumed records with a key, puts and
    /// deletes alike. Null-key records and records at or past the end offset are not counted.
    pub num_restored: u64,
}

/// The outcome of a step: the batch summary and the offsets of the null-key records skipped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcessNext {
    pub batch: RestoredBatch,
    pub null_key_offsets: Vec<i64>,
}

/// One changelog record: its offset, key (`None` = null key) and value (`None` = tombstone).
pub type ChangelogRecord = (i64, Option<Vec<u8>>, Option<Vec<u8>>);

/// Applies `records` (in strictly increasing offset order) below `end_offset` to `store` in one
/// write batch. An offset that does not increase is an `InvalidArgument` error and nothing is
/// applied; a store failure is a `ProcessorState` error naming the store, and nothing is applied
/// either (the batch is atomic).
pub fn process_next<S, I>(store: &S, records: I, end_offset: i64) -> Result<ProcessNext>
where
    S: KeyValueStore + ?Sized,
    I: IntoIterator<Item = ChangelogRecord>,
{
    let records = records.into_iter();
    let mut ops: Vec<WriteOp> = Vec::with_capacity(records.size_hint().0);
    let mut null_key_offsets = Vec::new();
    let mut next_offset = -1;
    let mut last_restored_offset = -1;
    let mut previous: Option<i64> = None;
    for (offset, key, value) in records {
        if let Some(p) = previous {
            // Records of one partition arrive in offset order; anything else means records of
            // different partitions were mixed, and applying them would corrupt the store.
            if offset <= p {
                return Err(CoreError::invalid_argument(format!(
                    "changelog records must be in increasing offset order: offset {offset} \
                     follows offset {p}"
                ))
                .in_store(store.name()));
            }
        }
        previous = Some(offset);
        if offset >= end_offset {
            next_offset = offset;
            break;
        }
        next_offset = offset + 1;
        match key {
            Some(k) => {
                ops.push((k, value));
                last_restored_offset = offset;
            }
            None => null_key_offsets.push(offset),
        }
    }
    let num_restored = ops.len() as u64;
    // Caught up: whatever the store lets wait is written now, so a restoration that reached
    // its end has its records in the store (not in memory) when the caller hears of it.
    let caught_up = next_offset >= end_offset;
    store.restore_batch(ops, caught_up)?;
    Ok(ProcessNext {
        batch: RestoredBatch {
            next_offset,
            last_restored_offset,
            num_restored,
        },
        null_key_offsets,
    })
}

/// Where a batch came from, as far as it is known, to name in its errors and warnings.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Origin {
    pub topic: Option<String>,
    pub partition: Option<i32>,
    /// The first offset read and the last one below the end offset.
    pub span: Option<(i64, i64)>,
}

impl Origin {
    /// The origin of `records` (read for `end_offset`) from `topic` / `partition`.
    pub fn of(
        records: &[ChangelogRecord],
        end_offset: i64,
        topic: Option<String>,
        partition: Option<i32>,
    ) -> Self {
        let first = records.first().map(|r| r.0);
        let last = records.iter().rev().find(|r| r.0 < end_offset).map(|r| r.0);
        Origin {
            topic,
            partition,
            span: first.zip(last),
        }
    }

    /// A failed step's error, naming the changelog partition and the offsets it was restoring.
    pub fn locate(&self, mut e: CoreError) -> CoreError {
        e.location.topic = e.location.topic.take().or_else(|| self.topic.clone());
        e.location.partition = e.location.partition.or(self.partition);
        if let Some((a, b)) = self.span {
            e.reason = format!("restoring changelog offsets {a} to {b}: {}", e.reason);
            e.location.offset = e.location.offset.or(Some(a));
        }
        e
    }

    /// Kafka Streams' warning for a null-key record skipped at `offset` while restoring `store`.
    pub fn null_key_warning(&self, store: &str, offset: i64) -> String {
        let changelog = match (&self.topic, self.partition) {
            (Some(t), Some(p)) => format!("{t}-{p}"),
            (Some(t), None) => t.clone(),
            _ => "?".to_owned(),
        };
        format!(
            "Read changelog record with null key from changelog {changelog} at offset \
             {offset}, skipping it for restoration (store '{store}')"
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorKind;
    use crate::store::InMemoryKeyValueStore;

    fn rec(offset: i64, key: Option<&str>, value: Option<&str>) -> ChangelogRecord {
        (
            offset,
            key.map(|k| k.as_bytes().to_vec()),
            value.map(|v| v.as_bytes().to_vec()),
        )
    }

    fn get(store: &InMemoryKeyValueStore, key: &str) -> Option<String> {
        store
            .get(key.as_bytes())
            .unwrap()
            .map(|v| String::from_utf8(v).unwrap())
    }

    #[test]
    fn applies_everything_below_the_end() {
        let store = InMemoryKeyValueStore::new("s");
        let recs = (0..10).map(|i| rec(i, Some(&format!("k{i}")), Some("v")));
        let out = process_next(&store, recs, 10).unwrap();
        assert_eq!(
            out.batch,
            RestoredBatch {
                next_offset: 10,
                last_restored_offset: 9,
                num_restored: 10
            }
        );
        assert!(out.null_key_offsets.is_empty());
        assert_eq!(store.approximate_num_entries().unwrap(), 10);
    }

    #[test]
    fn stops_at_the_first_record_at_or_past_the_end() {
        let store = InMemoryKeyValueStore::new("s");
        let recs = (0..10).map(|i| rec(i, Some(&format!("k{i}")), Some("v")));
        let out = process_next(&store, recs, 5).unwrap();
        assert_eq!(
            out.batch,
            RestoredBatch {
                next_offset: 5,
                last_restored_offset: 4,
                num_restored: 5
            }
        );
        assert_eq!(get(&store, "k4").as_deref(), Some("v"));
        assert_eq!(get(&store, "k5"), None);
    }

    #[test]
    fn a_gap_before_the_end_offset_stops_at_the_record_after_it() {
        // Compaction or a transaction marker leaves a gap: records 0..4, then 6..10, end 6.
        let store = InMemoryKeyValueStore::new("s");
        let recs = (0..5)
            .chain(7..11)
            .map(|i| rec(i, Some(&format!("k{i}")), Some("v")));
        let out = process_next(&store, recs, 6).unwrap();
        assert_eq!(out.batch.next_offset, 7);
        assert_eq!(out.batch.last_restored_offset, 4);
        assert_eq!(out.batch.num_restored, 5);
    }

    #[test]
    fn null_keys_are_consumed_not_applied() {
        let store = InMemoryKeyValueStore::new("s");
        let recs = vec![
            rec(0, Some("k"), Some("a")),
            rec(1, None, Some("x")),
            rec(2, Some("k"), Some("b")),
            rec(3, None, None),
        ];
        let out = process_next(&store, recs, 100).unwrap();
        assert_eq!(
            out.batch,
            RestoredBatch {
                next_offset: 4,
                last_restored_offset: 2,
                num_restored: 2
            }
        );
        assert_eq!(out.null_key_offsets, vec![1, 3]);
        assert_eq!(get(&store, "k").as_deref(), Some("b"));
    }

    #[test]
    fn only_null_keys_apply_nothing() {
        let store = InMemoryKeyValueStore::new("s");
        let out = process_next(&store, vec![rec(7, None, Some("x"))], 100).unwrap();
        assert_eq!(
            out.batch,
            RestoredBatch {
                next_offset: 8,
                last_restored_offset: -1,
                num_restored: 0
            }
        );
    }

    #[test]
    fn a_null_value_deletes() {
        let store = InMemoryKeyValueStore::new("s");
        store.put(b"k", b"old").unwrap();
        let recs = vec![rec(0, Some("k"), None), rec(1, Some("j"), Some("1"))];
        let out = process_next(&store, recs, 2).unwrap();
        assert_eq!(out.batch.num_restored, 2);
        assert_eq!(get(&store, "k"), None);
        assert_eq!(get(&store, "j").as_deref(), Some("1"));
    }

    #[test]
    fn no_records_mean_next_offset_minus_one() {
        let store = InMemoryKeyValueStore::new("s");
        let out = process_next(&store, Vec::new(), 10).unwrap();
        assert_eq!(
            out.batch,
            RestoredBatch {
                next_offset: -1,
                last_restored_offset: -1,
                num_restored: 0
            }
        );
    }

    #[test]
    fn end_offset_zero_applies_nothing() {
        let store = InMemoryKeyValueStore::new("s");
        let out = process_next(&store, vec![rec(0, Some("k"), Some("v"))], 0).unwrap();
        assert_eq!(out.batch.next_offset, 0);
        assert_eq!(out.batch.num_restored, 0);
        assert_eq!(store.approximate_num_entries().unwrap(), 0);
    }

    #[test]
    fn offsets_out_of_order_apply_nothing() {
        let store = InMemoryKeyValueStore::new("s");
        let recs = vec![rec(5, Some("a"), Some("1")), rec(5, Some("b"), Some("2"))];
        let err = process_next(&store, recs, 100).unwrap_err();
        assert_eq!(err.kind, ErrorKind::InvalidArgument);
        assert_eq!(store.approximate_num_entries().unwrap(), 0);
    }

    #[test]
    fn a_closed_store_fails_naming_it() {
        let store = InMemoryKeyValueStore::new("s");
        store.close().unwrap();
        let err = process_next(&store, vec![rec(0, Some("k"), Some("v"))], 10).unwrap_err();
        assert_eq!(err.kind, ErrorKind::ProcessorState);
        assert_eq!(err.location.store_name.as_deref(), Some("s"));
    }

    #[test]
    fn origin_names_the_changelog_and_the_offsets_in_errors_and_warnings() {
        let records = vec![
            rec(5, Some("a"), None),
            rec(6, None, None),
            rec(9, Some("b"), None),
        ];
        let origin = Origin::of(&records, 9, Some("app-s-changelog".into()), Some(2));
        assert_eq!(origin.span, Some((5, 6)));
        let e = origin.locate(CoreError::new(ErrorKind::ProcessorState, "disk full").in_store("s"));
        assert_eq!(e.reason, "restoring changelog offsets 5 to 6: disk full");
        assert_eq!(
            (
                e.location.topic.as_deref(),
                e.location.partition,
                e.location.offset
            ),
            (Some("app-s-changelog"), Some(2), Some(5))
        );
        assert_eq!(
            origin.null_key_warning("s", 6),
            "Read changelog record with null key from changelog app-s-changelog-2 at offset 6, \
             skipping it for restoration (store 's')"
        );
        assert_eq!(Origin::default().locate(e.clone()), e);
        assert!(Origin::default()
            .null_key_warning("s", 1)
            .contains("changelog ? at offset 1"));
    }
}
