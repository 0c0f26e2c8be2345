//! Key-value state stores: bytes in, bytes out, keys ordered by unsigned byte comparison.
//!
//! Two kinds, as in Kafka Streams: [`InMemoryKeyValueStore`] (an ordered map) and
//! [`PersistentKeyValueStore`] (an embedded on-disk engine, fjall; `docs/stores.md` tells why).
//! Both are shared across threads (`&self` everywhere, interior locking) because the binding
//! releases the GIL while a restore batch is written.
//!
//! Semantics common to both:
//! - a write batch ([`KeyValueStore::apply_batch`]) is atomic: after a crash a persistent store
//!   holds either all of it or none of it;
//! - ranges are inclusive at both ends and ascend in byte order; an inverted range is empty;
//! - iteration pages through the store ([`KeyValueStore::scan`]) instead of copying it whole, so
//!   an iterator over a huge store costs one page of memory. An iterator is weakly consistent:
//!   it sees writes made after it started to keys it has not passed yet;
//! - every operation on a closed store fails with [`ErrorKind::ProcessorState`] naming the store.

use std::ops::Bound;

use crate::error::{CoreError, ErrorKind, Result};

mod bulk;
mod memory;
mod persistent;

pub use memory::InMemoryKeyValueStore;
pub use persistent::{PersistentKeyValueStore, StoreOptions, MIN_LEVEL_BASE_BYTES};

/// One key and its value.
pub type KeyValue = (Vec<u8>, Vec<u8>);

/// One write of a batch: a key and its new value, `None` deleting the key.
pub type WriteOp = (Vec<u8>, Option<Vec<u8>>);

/// How many entries an iterator fetches from the store at a time: big enough that paging costs
/// little, small enough that an iterator over a huge store holds little memory.
pub const PAGE_SIZE: usize = 1024;

/// The operations of a key-value store (Kafka Streams' `KeyValueStore<Bytes, byte[]>`).
pub trait KeyValueStore: Send + Sync {
    /// The store's name, used in every error message.
    fn name(&self) -> &str;

    /// Whether the store keeps its data on disk across restarts.
    fn persistent(&self) -> bool;

    /// False once [`KeyValueStore::close`] has been called.
    fn is_open(&self) -> bool;

    /// The value of `key`, if any.
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>>;

    /// Sets `key` to `value`.
    fn put(&self, key: &[u8], value: &[u8]) -> Result<()> {
        self.apply_batch(vec![(key.to_vec(), Some(value.to_vec()))])
    }

    /// Removes `key`; returns the value it had.
    fn delete(&self, key: &[u8]) -> Result<Option<Vec<u8>>>;

    /// Sets every pair, atomically. A key given twice ends with its last value.
    fn put_all(&self, pairs: Vec<KeyValue>) -> Result<()> {
        self.apply_batch(pairs.into_iter().map(|(k, v)| (k, Some(v))).collect())
    }

    /// Applies the writes in order, atomically: all of them or (on error) none of them.
    fn apply_batch(&self, ops: Vec<WriteOp>) -> Result<()>;

    /// Applies the writes of a changelog restore batch in order; `caught_up` says the batch
    /// reached the end offset of its restoration. A store may let them wait (bounded) and
    /// write several batches at once (the persistent store writes sorted runs straight into
    /// its tables); whatever waits is written before any other operation of the store, so it
    /// is never observable, and [`KeyValueStore::flush`] makes it durable. The default applies
    /// them at once, as [`KeyValueStore::apply_batch`].
    fn restore_batch(&self, ops: Vec<WriteOp>, caught_up: bool) -> Result<()> {
        let _ = caught_up;
        self.apply_batch(ops)
    }

    /// Removes every key with `from <= key < to` (nothing if `from >= to`), the way a segmented
    /// store drops an expired segment: the persistent store drops the tables that hold only
    /// such keys whole and deletes the few others (see its implementation), the in-memory one
    /// splits its map.
    fn drop_range(&self, from: &[u8], to: &[u8]) -> Result<()>;

    /// Up to `limit` entries with keys within `(start, end)`, ascending. Fewer than `limit`
    /// entries means the range is exhausted. An inverted or empty range gives none.
    fn scan(&self, start: Bound<&[u8]>, end: Bound<&[u8]>, limit: usize) -> Result<Vec<KeyValue>>;

    /// The entries with `from <= key <= to`, ascending, fetched a page at a time.
    fn range(&self, from: &[u8], to: &[u8]) -> StoreIter<'_>
    where
        Self: Sized,
    {
        StoreIter::new(
            self,
            Cursor::new(Bound::Included(from.to_vec()), Bound::Included(to.to_vec())),
        )
    }

    /// Every entry, ascending, fetched a page at a time.
    fn all(&self) -> StoreIter<'_>
    where
        Self: Sized,
    {
        StoreIter::new(self, Cursor::new(Bound::Unbounded, Bound::Unbounded))
    }

    /// The number of entries: exact for both kinds here, but callers must not rely on it
    /// (Kafka Streams' contract promises only an estimate).
    fn approximate_num_entries(&self) -> Result<u64>;

    /// Makes every write so far durable (a no-op in memory).
    fn flush(&self) -> Result<()>;

    /// Flushes and releases the store (for a persistent one, its file lock). Closing twice is
    /// allowed; any other operation afterwards fails.
    fn close(&self) -> Result<()>;
}

/// The error of an operation on a closed store.
pub(crate) fn closed_error(name: &str) -> CoreError {
    CoreError::new(
        ErrorKind::ProcessorState,
        "the store is closed; open a new store object to use it again",
    )
    .in_store(name)
}

/// True when no key can lie within `(start, end)`: the range is inverted, or it is one key
/// excluded at either end. Engines may panic on such ranges, so callers check first.
pub(crate) fn is_empty_range(start: Bound<&[u8]>, end: Bound<&[u8]>) -> bool {
    match (start, end) {
        (Bound::Included(s), Bound::Included(e)) => s > e,
        (Bound::Included(s), Bound::Excluded(e))
        | (Bound::Excluded(s), Bound::Included(e))
        | (Bound::Excluded(s), Bound::Excluded(e)) => s >= e,
        _ => false,
    }
}

/// The position of an iteration through a store: what is left of the range, and one page
/// fetched ahead. It holds no reference to the store, so an owner (the Python iterator) can
/// keep it beside a shared handle.
#[derive(Debug, Clone)]
pub struct Cursor {
    start: Bound<Vec<u8>>,
    end: Bound<Vec<u8>>,
    page: std::collections::VecDeque<KeyValue>,
    exhausted: bool,
}

impl Cursor {
    /// A cursor over the keys within `(start, end)`.
    pub fn new(start: Bound<Vec<u8>>, end: Bound<Vec<u8>>) -> Self {
        Cursor {
            start,
            end,
            page: Default::default(),
            exhausted: false,
        }
    }

    /// The next entry, fetching a page of `page_size` from `store` when the last one is used up.
    pub fn next_from(
        &mut self,
        store: &dyn KeyValueStore,
        page_size: usize,
    ) -> Result<Option<KeyValue>> {
        if self.page.is_empty() && !self.exhausted {
            let page = store.scan(
                self.start.as_ref().map(Vec::as_slice),
                self.end.as_ref().map(Vec::as_slice),
                page_size,
            )?;
            self.exhausted = page.len() < page_size;
            if let Some((last, _)) = page.last() {
                // The next page starts after the last key seen, wherever later writes land.
                self.start = Bound::Excluded(last.clone());
            }
            self.page = page.into();
        }
        Ok(self.page.pop_front())
    }
}

/// An iterator over a store's entries, a page at a time; yields an error (once) if the store
/// fails or is closed midway.
pub struct StoreIter<'a> {
    store: &'a dyn KeyValueStore,
    cursor: Cursor,
    failed: bool,
}

impl<'a> StoreIter<'a> {
    /// Iterates `store` from the position `cursor`.
    pub fn new(store: &'a dyn KeyValueStore, cursor: Cursor) -> Self {
        StoreIter {
            store,
            cursor,
            failed: false,
        }
    }
}

impl Iterator for StoreIter<'_> {
    type Item = Result<KeyValue>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed {
            return None;
        }
        match self.cursor.next_from(self.store, PAGE_SIZE) {
            Ok(kv) => kv.map(Ok),
            Err(e) => {
                self.failed = true;
                Some(Err(e))
            }
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    //! Behaviour every store kind must show; each kind's module runs these on itself.
    use super::*;

    pub fn kv(k: &str, v: &str) -> KeyValue {
        (k.as_bytes().to_vec(), v.as_bytes().to_vec())
    }

    fn collect(it: StoreIter<'_>) -> Vec<KeyValue> {
        it.map(|r| r.unwrap()).collect()
    }

    pub fn check_basic_ops(store: &impl KeyValueStore) {
        assert!(store.is_open());
        assert_eq!(store.get(b"a").unwrap(), None);
        store.put(b"a", b"1").unwrap();
        store.put(b"b", b"2").unwrap();
        assert_eq!(store.get(b"a").unwrap(), Some(b"1".to_vec()));
        store.put(b"a", b"3").unwrap();
        assert_eq!(store.get(b"a").unwrap(), Some(b"3".to_vec()));
        assert_eq!(store.delete(b"a").unwrap(), Some(b"3".to_vec()));
        assert_eq!(store.delete(b"a").unwrap(), None);
        assert_eq!(store.approximate_num_entries().unwrap(), 1);
        // An empty value is a value, not a delete.
        store.put(b"e", b"").unwrap();
        assert_eq!(store.get(b"e").unwrap(), Some(vec![]));
        // An empty key is a key (Kafka allows it), and sorts first.
        store.put(b"", b"first").unwrap();
        assert_eq!(store.get(b"").unwrap(), Some(b"first".to_vec()));
        assert_eq!(
            store.scan(Bound::Unbounded, Bound::Unbounded, 1).unwrap()[0].0,
            b""
        );
        assert_eq!(store.delete(b"").unwrap(), Some(b"first".to_vec()));
    }

    pub fn check_ranges(store: &impl KeyValueStore) {
        store
            .put_all(vec![
                kv("b", "2"),
                kv("a", "1"),
                kv("c", "3"),
                (vec![0xff], b"hi".to_vec()),
                (vec![0x00], b"lo".to_vec()),
            ])
            .unwrap();
        assert_eq!(
            collect(store.range(b"a", b"c")),
            vec![kv("a", "1"), kv("b", "2"), kv("c", "3")]
        );
        assert_eq!(collect(store.range(b"b", b"b")), vec![kv("b", "2")]);
        assert!(collect(store.range(b"c", b"a")).is_empty());
        assert!(collect(store.range(b"x", b"y")).is_empty());
        let all = collect(store.all());
        assert_eq!(all.len(), 5);
        assert_eq!(all[0].0, vec![0x00]);
        assert_eq!(all[4].0, vec![0xff]);
        assert!(store
            .scan(Bound::Excluded(b"b"), Bound::Excluded(b"b"), 10)
            .unwrap()
            .is_empty());
        assert!(store
            .scan(Bound::Included(b"b"), Bound::Excluded(b"b"), 10)
            .unwrap()
            .is_empty());
    }

    pub fn check_paging(store: &impl KeyValueStore) {
        let n = PAGE_SIZE * 2 + 7;
        let pairs: Vec<KeyValue> = (0..n as u32)
            .map(|i| (i.to_be_bytes().to_vec(), i.to_le_bytes().to_vec()))
            .collect();
        store.put_all(pairs.clone()).unwrap();
        assert_eq!(collect(store.all()), pairs);
        let from = 5u32.to_be_bytes();
        let to = (PAGE_SIZE as u32 + 3).to_be_bytes();
        assert_eq!(collect(store.range(&from, &to)), pairs[5..PAGE_SIZE + 4]);
    }

    pub fn check_batches(store: &impl KeyValueStore) {
        store.put(b"gone", b"x").unwrap();
        store
            .apply_batch(vec![
                (b"k".to_vec(), Some(b"1".to_vec())),
                (b"gone".to_vec(), None),
                (b"k".to_vec(), Some(b"2".to_vec())),
                (b"t".to_vec(), Some(b"1".to_vec())),
                (b"t".to_vec(), None),
            ])
            .unwrap();
        assert_eq!(store.get(b"k").unwrap(), Some(b"2".to_vec()));
        assert_eq!(store.get(b"gone").unwrap(), None);
        assert_eq!(store.get(b"t").unwrap(), None);
        assert_eq!(store.approximate_num_entries().unwrap(), 1);
        store.apply_batch(vec![]).unwrap();
    }

    pub fn check_drop_range(store: &impl KeyValueStore) {
        let key =
            |segment: u64, k: u32| [segment.to_be_bytes(), u64::from(k).to_be_bytes()].concat();
        let pairs: Vec<KeyValue> = (0..4u64)
            .flat_map(|s| (0..(PAGE_SIZE as u32 + 5)).map(move |k| (key(s, k), vec![s as u8])))
            .collect();
        store.put_all(pairs).unwrap();
        // Segments 1 and 2 go, whole; 0 and 3 stay, to the key.
        store
            .drop_range(&1u64.to_be_bytes(), &3u64.to_be_bytes())
            .unwrap();
        let left = collect(store.all());
        assert_eq!(left.len(), 2 * (PAGE_SIZE + 5));
        assert!(left
            .iter()
            .all(|(k, v)| (v[0] == 0 || v[0] == 3) && k[..8] == [0, 0, 0, 0, 0, 0, 0, v[0]]));
        // An empty or inverted range drops nothing.
        store.drop_range(&key(3, 0), &key(3, 0)).unwrap();
        store.drop_range(&key(3, 9), &key(3, 1)).unwrap();
        assert_eq!(store.approximate_num_entries().unwrap(), left.len() as u64);
        // The range's end is excluded, its start included.
        store.drop_range(&key(3, 0), &key(3, 2)).unwrap();
        assert_eq!(store.get(&key(3, 1)).unwrap(), None);
        assert_eq!(store.get(&key(3, 2)).unwrap(), Some(vec![3]));
        store.put(&key(1, 7), b"again").unwrap();
        assert_eq!(store.get(&key(1, 7)).unwrap(), Some(b"again".to_vec()));
    }

    pub fn check_closed(store: &impl KeyValueStore) {
        store.put(b"a", b"1").unwrap();
        store.close().unwrap();
        store.close().unwrap();
        assert!(!store.is_open());
        let err = store.get(b"a").unwrap_err();
        assert_eq!(err.kind, ErrorKind::ProcessorState);
        assert_eq!(err.location.store_name.as_deref(), Some(store.name()));
        assert!(store.put(b"a", b"1").is_err());
        assert!(store.flush().is_err());
        assert!(store.approximate_num_entries().is_err());
        let mut it = store.all();
        assert!(it.next().unwrap().is_err());
        assert!(it.next().is_none());
    }

    #[test]
    fn empty_ranges() {
        let (a, b): (&[u8], &[u8]) = (b"a", b"b");
        assert!(is_empty_range(Bound::Included(b), Bound::Included(a)));
        assert!(!is_empty_range(Bound::Included(a), Bound::Included(a)));
        assert!(is_empty_range(Bound::Excluded(a), Bound::Included(a)));
        assert!(is_empty_range(Bound::Included(a), Bound::Excluded(a)));
        assert!(!is_empty_range(Bound::Excluded(a), Bound::Included(b)));
        assert!(!is_empty_range(Bound::Unbounded, Bound::Included(a)));
    }
}
