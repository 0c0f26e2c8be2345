//! `InMemoryKeyValueStore`: an ordered map behind a lock (Kafka Streams' in-memory store keeps
//! a `TreeMap` the same way).

use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};

use super::{closed_error, is_empty_range, KeyValue, KeyValueStore, WriteOp};
use crate::error::Result;

type Map = BTreeMap<Vec<u8>, Vec<u8>>;

/// A key-value store held in memory; its contents are gone once it is closed or dropped.
pub struct InMemoryKeyValueStore {
    name: String,
    /// `None` once closed. A `RwLock` lets reads proceed side by side.
    map: RwLock<Option<Map>>,
}

impl InMemoryKeyValueStore {
    /// An empty, open store.
    pub fn new(name: impl Into<String>) -> Self {
        InMemoryKeyValueStore {
            name: name.into(),
            map: RwLock::new(Some(Map::new())),
        }
    }

    // A panic while holding the lock cannot leave the map half-updated in a way later readers
    // could observe as torn (every update is one BTreeMap call or a batch applied in full), so a
    // poisoned lock is taken over rather than propagated.
    fn read(&self) -> RwLockReadGuard<'_, Option<Map>> {
        self.map.read().unwrap_or_else(|e| e.into_inner())
    }

    fn write(&self) -> RwLockWriteGuard<'_, Option<Map>> {
        self.map.write().unwrap_or_else(|e| e.into_inner())
    }

    fn with_map<T>(&self, f: impl FnOnce(&Map) -> T) -> Result<T> {
        match self.read().as_ref() {
            Some(map) => Ok(f(map)),
            None => Err(closed_error(&self.name)),
        }
    }

    fn with_map_mut<T>(&self, f: impl FnOnce(&mut Map) -> T) -> Result<T> {
        match self.write().as_mut() {
            Some(map) => Ok(f(map)),
            None => Err(closed_error(&self.name)),
        }
    }
}

impl KeyValueStore for InMemoryKeyValueStore {
    fn name(&self) -> &str {
        &self.name
    }

    fn persistent(&self) -> bool {
        false
    }

    fn is_open(&self) -> bool {
        self.read().is_some()
    }

    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.with_map(|m| m.get(key).cloned())
    }

    fn put(&self, key: &[u8], value: &[u8]) -> Result<()> {
        self.with_map_mut(|m| {
            m.insert(key.to_vec(), value.to_vec());
        })
    }

    fn delete(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.with_map_mut(|m| m.remove(key))
    }

    fn apply_batch(&self, ops: Vec<WriteOp>) -> Result<()> {
        // One lock acquisition for the whole batch: readers see all of it or none of it.
        self.with_map_mut(|m| {
            for (key, value) in ops {
                match value {
                    Some(v) => {
                        m.insert(key, v);
                    }
                    None => {
                        m.remove(&key);
                    }
                }
            }
        })
    }

    fn drop_range(&self, from: &[u8], to: &[u8]) -> Result<()> {
        self.with_map_mut(|m| {
            if from >= to {
                return;
            }
            // Two splits and an append move only the tail's nodes: the range goes whole.
            let mut doomed = m.split_off(from);
            let mut kept = doomed.split_off(to);
            m.append(&mut kept);
        })
    }

    fn scan(&self, start: Bound<&[u8]>, end: Bound<&[u8]>, limit: usize) -> Result<Vec<KeyValue>> {
        self.with_map(|m| {
            if is_empty_range(start, end) {
                return Vec::new();
            }
            m.range::<[u8], _>((start, end))
                .take(limit)
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect()
        })
    }

    fn approximate_num_entries(&self) -> Result<u64> {
        self.with_map(|m| m.len() as u64)
    }

    fn flush(&self) -> Result<()> {
        self.with_map(|_| ())
    }

    fn close(&self) -> Result<()> {
        *self.write() = None;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::tests as common;

    #[test]
    fn basic_ops() {
        common::check_basic_ops(&InMemoryKeyValueStore::new("m"));
    }

    #[test]
    fn ranges() {
        common::check_ranges(&InMemoryKeyValueStore::new("m"));
    }

    #[test]
    fn paging() {
        common::check_paging(&InMemoryKeyValueStore::new("m"));
    }

    #[test]
    fn batches() {
        common::check_batches(&InMemoryKeyValueStore::new("m"));
    }

    #[test]
    fn drop_range() {
        common::check_drop_range(&InMemoryKeyValueStore::new("m"));
    }

    #[test]
    fn closed() {
        let store = InMemoryKeyValueStore::new("m");
        assert!(!store.persistent());
        common::check_closed(&store);
    }
}
