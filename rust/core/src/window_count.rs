//! The bytes a built-in tumbling-window `count()` writes when its record cache flushes.
//!
//! A DSL windowed count keyed by strings keeps, per key and window, a count and the highest
//! timestamp of the records counted (Kafka's `ValueAndTimestamp`). When the cache flushes, each
//! dirty window becomes three writes, all with Kafka's byte layouts:
//!
//! * the window store's entry: key `segment (8) + key + window start (8)`, value
//!   `timestamp (8) + count (8)` (a timestamped window store's layout, big-endian);
//! * its changelog record: the same key and value, the record timestamp `max(timestamp, 0)`;
//! * the sink record of `to_stream().to(...)`: key `key + window start (8)` (Kafka's
//!   `TimeWindowedSerializer`), value the count as a Long (8 bytes), the timestamp
//!   `max(timestamp, 0)`.
//!
//! A window whose segment expired before the flush (`segment < live_segment`) is not stored nor
//! logged (Kafka skips the write) but is still forwarded to the sink. Everything is computed in
//! one call per flush.

/// One dirty window: the key's UTF-8 bytes, the window start, the count and its timestamp.
#[derive(Debug, Clone, Copy)]
pub struct WindowCount<'a> {
    /// The key serialized (a Kafka `StringSerializer`'s UTF-8 bytes).
    pub key: &'a [u8],
    /// The window start (ms).
    pub start: i64,
    /// The count.
    pub count: i64,
    /// The highest timestamp counted into the window.
    pub timestamp: i64,
}

/// What a flush writes, in the order of its entries (module doc).
#[derive(Debug, Default, PartialEq, Eq)]
pub struct WindowCountFlush {
    /// Store (and changelog) keys of the live windows.
    pub store_keys: Vec<Vec<u8>>,
    /// Store (and changelog) values of the live windows.
    pub store_values: Vec<Vec<u8>>,
    /// The changelog record timestamp of each live window.
    pub log_timestamps: Vec<i64>,
    /// Sink keys, one per entry.
    pub sink_keys: Vec<Vec<u8>>,
    /// Sink values, one per entry.
    pub sink_values: Vec<Vec<u8>>,
    /// Sink record timestamps, one per entry.
    pub sink_timestamps: Vec<i64>,
    /// Indexes of the entries whose segment had expired (not stored).
    pub expired: Vec<usize>,
}

/// The segment of a window start for a segment interval (floor division, as Python's `//`).
fn segment(start: i64, interval: i64) -> i64 {
    start.div_euclid(interval)
}

/// The writes of a flush of `entries` for a store of segment `interval` (ms, > 0) whose
/// oldest live segment is `live_segment` (module doc).
pub fn encode_window_counts(
    entries: &[WindowCount<'_>],
    interval: i64,
    live_segment: i64,
) -> WindowCountFlush {
    let interval = interval.max(1);
    let mut out = WindowCountFlush {
        store_keys: Vec::with_capacity(entries.len()),
        store_values: Vec::with_capacity(entries.len()),
        log_timestamps: Vec::with_capacity(entries.len()),
        sink_keys: Vec::with_capacity(entries.len()),
        sink_values: Vec::with_capacity(entries.len()),
        sink_timestamps: Vec::with_capacity(entries.len()),
        expired: Vec::new(),
    };
    for (index, entry) in entries.iter().enumerate() {
        let stamp = entry.timestamp.max(0);
        let start = entry.start.to_be_bytes();
        let count = entry.count.to_be_bytes();
        let seg = segment(entry.start, interval);
        if seg < live_segment {
            out.expired.push(index);
        } else {
            let mut key = Vec::with_capacity(entry.key.len() + 16);
            key.extend_from_slice(&seg.to_be_bytes());
            key.extend_from_slice(entry.key);
            key.extend_from_slice(&start);
            let mut value = Vec::with_capacity(16);
            value.extend_from_slice(&entry.timestamp.to_be_bytes());
            value.extend_from_slice(&count);
            out.store_keys.push(key);
            out.store_values.push(value);
            out.log_timestamps.push(stamp);
        }
        let mut sink_key = Vec::with_capacity(entry.key.len() + 8);
        sink_key.extend_from_slice(entry.key);
        sink_key.extend_from_slice(&start);
        out.sink_keys.push(sink_key);
        out.sink_values.push(count.to_vec());
        out.sink_timestamps.push(stamp);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(key: &[u8], start: i64, count: i64, timestamp: i64) -> WindowCount<'_> {
        WindowCount {
            key,
            start,
            count,
            timestamp,
        }
    }

    #[test]
    fn layouts_are_kafkas() {
        let flushed = encode_window_counts(&[entry(b"user-1", 120_000, 3, 150_000)], 60_000, 0);
        let mut key = 2i64.to_be_bytes().to_vec();
        key.extend_from_slice(b"user-1");
        key.extend_from_slice(&120_000i64.to_be_bytes());
        assert_eq!(flushed.store_keys, vec![key]);
        let mut value = 150_000i64.to_be_bytes().to_vec();
        value.extend_from_slice(&3i64.to_be_bytes());
        assert_eq!(flushed.store_values, vec![value]);
        assert_eq!(flushed.log_timestamps, vec![150_000]);
        let mut sink_key = b"user-1".to_vec();
        sink_key.extend_from_slice(&120_000i64.to_be_bytes());
        assert_eq!(flushed.sink_keys, vec![sink_key]);
        assert_eq!(flushed.sink_values, vec![3i64.to_be_bytes().to_vec()]);
        assert_eq!(flushed.sink_timestamps, vec![150_000]);
        assert!(flushed.expired.is_empty());
    }

    #[test]
    fn an_expired_segment_is_forwarded_not_stored() {
        let flushed = encode_window_counts(
            &[entry(b"a", 0, 1, 10), entry(b"b", 180_000, 2, 180_001)],
            60_000,
            1,
        );
        assert_eq!(flushed.expired, vec![0]);
        assert_eq!(flushed.store_keys.len(), 1);
        assert_eq!(flushed.log_timestamps, vec![180_001]);
        assert_eq!(flushed.sink_keys.len(), 2);
        assert_eq!(flushed.sink_timestamps, vec![10, 180_001]);
    }

    #[test]
    fn a_negative_timestamp_is_stored_as_is_and_sent_as_zero() {
        let flushed = encode_window_counts(&[entry(b"", 0, 1, -5)], 60_000, 0);
        assert_eq!(&flushed.store_values[0][..8], &(-5i64).to_be_bytes());
        assert_eq!(flushed.log_timestamps, vec![0]);
        assert_eq!(flushed.sink_timestamps, vec![0]);
        assert_eq!(flushed.sink_keys[0], 0i64.to_be_bytes().to_vec());
    }

    #[test]
    fn segments_floor_as_python() {
        assert_eq!(segment(-1, 60_000), -1);
        assert_eq!(segment(59_999, 60_000), 0);
        assert_eq!(segment(60_000, 60_000), 1);
    }
}
