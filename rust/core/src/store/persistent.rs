//! `PersistentKeyValueStore`: a store on disk, in one fjall database (an LSM tree).
//!
//! fjall was chosen over redb and RocksDB by measurement (`docs/stores.md`): it bulk-loads a
//! changelog two to three times faster than redb (restoration is what these stores are for),
//! is pure Rust (no C++ toolchain, portable abi3 wheels), compiles in under a minute, commits
//! write batches atomically through its journal, and scans ranges in byte order.
//!
//! Durability follows Kafka Streams, which writes its RocksDB stores with the write-ahead log
//! unsynced and relies on the changelog plus `flush()` before each checkpoint: writes are
//! journaled atomically but not fsynced, and [`KeyValueStore::flush`] syncs the journal. A crash
//! therefore loses at most the writes since the last flush, and always whole batches: the
//! journal replays up to the last complete batch.
//!
//! Restoration has a write path of its own ([`KeyValueStore::restore_batch`], `bulk.rs`):
//! restore batches wait in memory (bounded) and are written as sorted runs straight into
//! fjall's tables, a full run on a thread of its own while the restore reads on (a run cut short
//! by the budget many stores share, in place: see `write_in_place`). Every other
//! operation waits for that run and writes what waits first, so neither is ever observable,
//! and `flush` makes it durable (or fails, if a run could not be written) before a checkpoint
//! can name it.

use std::fmt::Display;
use std::ops::Bound;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::thread::JoinHandle;

use fjall::{AbstractTree, Database, Keyspace, KeyspaceCreateOptions, PersistMode};

use super::bulk::{self, Pending, Run};
use super::{closed_error, is_empty_range, KeyValue, KeyValueStore, WriteOp};
use crate::error::{CoreError, ErrorKind, Result};

/// The database's directory inside the store's directory (which also holds the `.checkpoint`).
pub const DB_DIR: &str = "fjall";

/// The file fjall writes last when it creates a database (fjall's `VERSION_MARKER`).
const VERSION_MARKER: &str = "version";

/// The one keyspace of a store's database.
const KEYSPACE: &str = "kv";

/// The byte in front of every key on disk. fjall refuses empty keys, which Kafka allows (an
/// empty serialized key is not a null key), so every key gets this prefix; it is the same for
/// all keys, so byte order is kept. It doubles as a format version.
const KEY_PREFIX: u8 = 0;

/// fjall's limit on a key, less the prefix.
pub const MAX_KEY_BYTES: usize = u16::MAX as usize - 1;

/// fjall's block cache per store. An application has one store per partition, so each gets what
/// Kafka Streams gives a RocksDB store's block cache (50 MB), rounded up.
const CACHE_BYTES: u64 = 64 * 1024 * 1024;

/// fjall's background threads per store (flushes and compactions). fjall's default is one per
/// core (up to 4), and with more than one its worker 0 hands every compaction request back to
/// the queue so another worker takes it (`worker_pool.rs`, "let one worker prioritize
/// flushing"): while that other worker compacts, worker 0 takes the request back at once and
/// re-queues it, spinning a whole core until the compaction ends. A restore writes runs that
/// compact all the time, so that spin took half the process's CPU (perf, 1M records of 1 kB).
/// One worker flushes and compacts in turn, without the spin; an application has one store per
/// partition, so the workers still add up.
const WORKER_THREADS: usize = 1;

/// fjall's level-0 threshold (its default): level 0 is merged into level 1 once it holds this
/// many runs, and level 1's size is this many tables.
const L0_THRESHOLD: u8 = 4;

/// The smallest [`StoreOptions::level_base_bytes`]: level 1 of 4 tables of 1 MiB.
pub const MIN_LEVEL_BASE_BYTES: u64 = 4 * 1024 * 1024;

/// How a store's LSM tree is shaped, chosen when the store is created: fjall keeps a keyspace's
/// options with it, so reopening a store keeps the shape it was created with.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StoreOptions {
    /// The size of level 1 (RocksDB's `max_bytes_for_level_base`); `None`: fjall's default,
    /// 4 tables of 64 MiB. Every merge of level 0 rewrites what overlaps it in level 1, and
    /// with keys spread evenly that is all of level 1: a store that fits in level 1 is rewritten
    /// whole by every 4th flush. A smaller level 1 pushes the data down to levels that are merged
    /// a table at a time, so the merges stay small as the store grows. That matters to a store
    /// whose close waits for its merges, as Spark's local stores are closed after every
    /// micro-batch (`docs/spark-streaming.md`).
    pub level_base_bytes: Option<u64>,
}

impl StoreOptions {
    fn keyspace(self) -> KeyspaceCreateOptions {
        let options = KeyspaceCreateOptions::default();
        match self.level_base_bytes {
            None => options,
            Some(bytes) => options.compaction_strategy(Arc::new(
                fjall::compaction::Leveled::default()
                    .with_l0_threshold(L0_THRESHOLD)
                    .with_table_target_size(
                        bytes.max(MIN_LEVEL_BASE_BYTES) / u64::from(L0_THRESHOLD),
                    ),
            )),
        }
    }
}

/// An open database and its keyspace; dropping both releases the directory's lock.
struct Open {
    db: Database,
    kv: Keyspace,
}

/// A key-value store kept on disk in a directory; reopening the directory gives back every
/// write flushed before.
pub struct PersistentKeyValueStore {
    name: String,
    dir: PathBuf,
    /// `None` once closed.
    open: RwLock<Option<Open>>,
    /// Serializes writes through this object, so that `delete` (a read, then a write) returns
    /// the value it removed even with other writers about.
    writer: Mutex<()>,
    /// Restore writes not written yet (`restore_batch`); taken before `in_flight` and
    /// `writer`, never after.
    pending: Mutex<Pending>,
    /// The full run being written on a thread of its own while the restore reads on (at most
    /// one: the next full run waits for it). Every operation but `restore_batch` waits for it
    /// first, so it is never observable, and its failure is reported by the next operation.
    in_flight: Mutex<Option<InFlight>>,
    /// Known to hold a key (kept once true: keeping tombstones is always correct, dropping them
    /// only while the store is empty).
    holds_data: Arc<AtomicBool>,
    /// Why restore writes were lost, if a run failed to be written: from then on `flush` fails,
    /// so no checkpoint can claim offsets the store does not hold.
    lost: Mutex<Option<String>>,
    /// Runs written by the bulk path since the store was opened.
    runs: Arc<AtomicU64>,
}

/// A run written on a thread of its own: the outcome, and the run's buffers for the next run.
type InFlight = JoinHandle<(Result<()>, Run)>;

/// What writing a run needs, apart from the store object (so that a thread can write it).
struct RunWriter {
    name: String,
    dir: PathBuf,
    db: Database,
    kv: Keyspace,
    holds_data: Arc<AtomicBool>,
    runs: Arc<AtomicU64>,
}

impl RunWriter {
    fn err(&self, what: &str, e: impl Display) -> CoreError {
        CoreError::new(
            ErrorKind::ProcessorState,
            format!("{what} failed in {}: {e}", self.dir.display()),
        )
        .in_store(&self.name)
    }

    /// Writes `run` (in the order written, keeping the last write of each key): as a sorted
    /// run of tables when it is big enough, else as one ordinary write batch.
    fn write(&self, run: &mut Run) -> Result<()> {
        if run.is_empty() {
            return Ok(());
        }
        #[cfg(test)]
        if self.name == tests::FAILING_STORE {
            return Err(self.err("writing a restored run", "injected failure"));
        }
        // Every write of a fjall batch gets the batch's one sequence number, so two writes to
        // one key would tie; a run must be sorted with one write per key. Either way only the
        // last write of each key is kept.
        run.last_writes();
        if run.bytes() < bulk::MIN_INGEST_BYTES {
            let mut batch = self.db.batch();
            for (key, value) in run.iter() {
                let mut k = Vec::with_capacity(key.len() + 1);
                k.push(KEY_PREFIX);
                k.extend_from_slice(key);
                match value {
                    Some(v) => batch.insert(&self.kv, k, v),
                    None => batch.remove(&self.kv, k),
                }
            }
            batch.commit().map_err(|e| self.err("a write batch", e))?;
            self.holds_data.store(true, Ordering::Release);
            return Ok(());
        }
        let holds_data = self.holds_data.load(Ordering::Acquire)
            || !self.kv.is_empty().map_err(|e| self.err("a read", e))?;
        let adds_data = run.adds_data();
        bulk::ingest(&self.kv, KEY_PREFIX, run, !holds_data)
            .map_err(|e| self.err("writing a restored run", e))?;
        if holds_data || adds_data {
            self.holds_data.store(true, Ordering::Release);
        }
        self.runs.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }
}

impl PersistentKeyValueStore {
    /// Opens the store in directory `path`, creating the directory and an empty database if
    /// needed. Fails if another open store (in this or another process) holds the directory.
    pub fn open(name: impl Into<String>, path: impl AsRef<Path>) -> Result<Self> {
        Self::open_with(name, path, StoreOptions::default())
    }

    /// [`Self::open`], creating the store with `options` if it does not exist yet (an existing
    /// store keeps the options it was created with).
    pub fn open_with(
        name: impl Into<String>,
        path: impl AsRef<Path>,
        options: StoreOptions,
    ) -> Result<Self> {
        let name = name.into();
        let dir = path.as_ref().to_path_buf();
        let fail =
            |reason: String| CoreError::new(ErrorKind::ProcessorState, reason).in_store(&name);
        let db_dir = dir.join(DB_DIR);
        // fjall writes its version marker last when it creates a database, and opens none
        // without it: a directory without the marker is a creation that a crash interrupted
        // (no open ever returned, so nothing was ever written to it), and fjall would fail on
        // it with "File exists" forever. It is started again instead.
        if db_dir.is_dir() && !db_dir.join(VERSION_MARKER).exists() {
            std::fs::remove_dir_all(&db_dir).map_err(|e| {
                fail(format!(
                    "cannot remove the interrupted creation of the store in {}: {e}",
                    db_dir.display()
                ))
            })?;
        }
        std::fs::create_dir_all(&db_dir).map_err(|e| {
            fail(format!(
                "cannot create the store directory {}: {e}",
                db_dir.display()
            ))
        })?;
        let db = Database::builder(&db_dir)
            .cache_size(CACHE_BYTES)
            .worker_threads(WORKER_THREADS)
            .open()
            .map_err(|e| match e {
                fjall::Error::Locked => fail(format!(
                    "the store at {} is already open (another store object in this process, or \
                     another process, holds it); close that store first",
                    dir.display()
                )),
                other => fail(format!(
                    "cannot open the store in {}: {other}; if its files are damaged, delete the \
                     directory and restore the store from its changelog",
                    dir.display()
                )),
            })?;
        let kv = db
            .keyspace(KEYSPACE, || options.keyspace())
            .map_err(|e| fail(format!("cannot open the store in {}: {e}", dir.display())))?;
        Ok(PersistentKeyValueStore {
            name,
            dir,
            open: RwLock::new(Some(Open { db, kv })),
            writer: Mutex::new(()),
            pending: Mutex::new(Pending::default()),
            in_flight: Mutex::new(None),
            holds_data: Arc::new(AtomicBool::new(false)),
            lost: Mutex::new(None),
            runs: Arc::new(AtomicU64::new(0)),
        })
    }

    /// The directory the store lives in.
    pub fn path(&self) -> &Path {
        &self.dir
    }

    /// How many sorted runs restore batches were written as since the store was opened (the
    /// bulk path; small remainders go through write batches and are not counted), once the
    /// run being written, if any, is written.
    pub fn runs_written(&self) -> u64 {
        let _ = self.finish_in_flight(&mut self.pending(), false);
        self.runs.load(Ordering::Relaxed)
    }

    // fjall keeps its own state consistent across a panic (a batch is applied whole), so a
    // poisoned lock here guards nothing torn and is taken over.
    fn read(&self) -> RwLockReadGuard<'_, Option<Open>> {
        self.open.read().unwrap_or_else(|e| e.into_inner())
    }

    fn write(&self) -> RwLockWriteGuard<'_, Option<Open>> {
        self.open.write().unwrap_or_else(|e| e.into_inner())
    }

    fn writer(&self) -> MutexGuard<'_, ()> {
        self.writer.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn pending(&self) -> MutexGuard<'_, Pending> {
        self.pending.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn run_writer(&self, o: &Open) -> RunWriter {
        RunWriter {
            name: self.name.clone(),
            dir: self.dir.clone(),
            db: o.db.clone(),
            kv: o.kv.clone(),
            holds_data: self.holds_data.clone(),
            runs: self.runs.clone(),
        }
    }

    /// Notes why restore writes were lost (the first reason is kept).
    fn note_lost(&self, outcome: &Result<()>) {
        if let Err(e) = outcome {
            let mut lost = self.lost.lock().unwrap_or_else(|e| e.into_inner());
            lost.get_or_insert_with(|| e.reason.clone());
        }
    }

    /// Waits for the run being written on its thread, if any; its outcome. Its buffers go
    /// back to `pending` for the next run if `keep`.
    fn finish_in_flight(&self, pending: &mut Pending, keep: bool) -> Result<()> {
        let handle = self
            .in_flight
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        let Some(handle) = handle else {
            return Ok(());
        };
        let outcome = match handle.join() {
            Ok((outcome, run)) => {
                pending.recycle(run, keep);
                outcome
            }
            Err(panic) => {
                let what = panic
                    .downcast_ref::<&str>()
                    .map(|s| (*s).to_owned())
                    .or_else(|| panic.downcast_ref::<String>().cloned())
                    .unwrap_or_else(|| "a panic".to_owned());
                Err(self.err("writing a restored run", what))
            }
        };
        self.note_lost(&outcome);
        outcome
    }

    /// Writes the restore writes waiting, if any, after the run in flight: as one sorted run
    /// when there is enough of them, else as an ordinary write batch. Called before every
    /// other operation, so that no read misses them and no write is overtaken by them.
    fn write_pending(&self, o: &Open) -> Result<()> {
        let mut pending = self.pending();
        self.finish_in_flight(&mut pending, false)?;
        if pending.is_empty() {
            return Ok(());
        }
        let mut run = pending.take();
        let outcome = self.run_writer(o).write(&mut run);
        self.note_lost(&outcome);
        outcome
    }

    /// Writes the run waiting now, on the caller's thread, keeping its buffers for the next
    /// run (after the run in flight, whose failure is this call's). For runs cut short by the
    /// budget the stores share: many stores restore at once, so the restore's threads keep
    /// the cores busy already, and a run in flight per store halved every run (it counts in
    /// the budget until written), doubling the tables fjall merges (8 partitions x 1M records
    /// of 1 kB: 4.2 CPU s with runs written in place before commit d3635a2, 5.4 s with each
    /// run behind the fetch, 4.6-4.8 s in place again).
    fn write_in_place(&self, o: &Open, pending: &mut Pending) -> Result<()> {
        self.finish_in_flight(pending, true)?;
        let outcome = self.run_writer(o).write(pending.current());
        pending.written();
        self.note_lost(&outcome);
        outcome
    }

    /// Writes the full run waiting on a thread of its own, after the one in flight (whose
    /// failure is this call's): the restore reads on meanwhile. Called with `pending` locked.
    fn write_in_background(&self, o: &Open, pending: &mut Pending) -> Result<()> {
        self.finish_in_flight(pending, true)?;
        let mut run = pending.take();
        let writer = self.run_writer(o);
        let spawned = std::thread::Builder::new()
            .name("streamstate-ingest".into())
            .spawn(move || (writer.write(&mut run), run));
        match spawned {
            Ok(handle) => {
                *self.in_flight.lock().unwrap_or_else(|e| e.into_inner()) = Some(handle);
                Ok(())
            }
            Err(e) => {
                // No thread (the process is at its limit): the run went with the closure.
                let outcome = Err(self.err("starting a thread to write a restored run", e));
                self.note_lost(&outcome);
                outcome
            }
        }
    }

    /// Writes `ops` in one atomic write batch, keeping the last write of each key.
    fn write_batch(&self, o: &Open, mut ops: Vec<WriteOp>) -> Result<()> {
        if ops.is_empty() {
            return Ok(());
        }
        // Every write of a fjall batch gets the batch's one sequence number, so two writes
        // to one key would tie. Keep only the last write per key: a stable sort keeps the
        // order of equal keys, and the last of each run is the one that wins.
        bulk::last_writes(&mut ops);
        let mut batch = o.db.batch();
        for (key, value) in ops {
            let key = self.db_key(&key)?;
            match value {
                Some(v) => batch.insert(&o.kv, key, v),
                None => batch.remove(&o.kv, key),
            }
        }
        let _w = self.writer();
        batch.commit().map_err(|e| self.err("a write batch", e))?;
        self.holds_data.store(true, Ordering::Release);
        Ok(())
    }

    fn err(&self, what: &str, e: impl Display) -> CoreError {
        CoreError::new(
            ErrorKind::ProcessorState,
            format!("{what} failed in {}: {e}", self.dir.display()),
        )
        .in_store(&self.name)
    }

    /// The on-disk form of a key; a key over fjall's limit is an error, not a panic inside it.
    fn db_key(&self, key: &[u8]) -> Result<Vec<u8>> {
        if key.len() > MAX_KEY_BYTES {
            return Err(CoreError::new(
                ErrorKind::ProcessorState,
                format!(
                    "a key of {} bytes is over the persistent store's limit of {MAX_KEY_BYTES}",
                    key.len()
                ),
            )
            .in_store(&self.name));
        }
        let mut k = Vec::with_capacity(key.len() + 1);
        k.push(KEY_PREFIX);
        k.extend_from_slice(key);
        Ok(k)
    }

    fn with_open<T>(&self, f: impl FnOnce(&Open) -> Result<T>) -> Result<T> {
        match self.read().as_ref() {
            Some(open) => {
                self.write_pending(open)?;
                f(open)
            }
            None => Err(closed_error(&self.name)),
        }
    }
}

impl KeyValueStore for PersistentKeyValueStore {
    fn name(&self) -> &str {
        &self.name
    }

    fn persistent(&self) -> bool {
        true
    }

    fn is_open(&self) -> bool {
        self.read().is_some()
    }

    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.with_open(|o| {
            let v =
                o.kv.get(self.db_key(key)?)
                    .map_err(|e| self.err("a read", e))?;
            Ok(v.map(|v| v.to_vec()))
        })
    }

    fn put(&self, key: &[u8], value: &[u8]) -> Result<()> {
        self.with_open(|o| {
            let key = self.db_key(key)?;
            let _w = self.writer();
            o.kv.insert(key, value)
                .map_err(|e| self.err("a write", e))?;
            self.holds_data.store(true, Ordering::Release);
            Ok(())
        })
    }

    fn delete(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.with_open(|o| {
            let key = self.db_key(key)?;
            let _w = self.writer();
            let old = o.kv.get(&key).map_err(|e| self.err("a read", e))?;
            if old.is_some() {
                o.kv.remove(key).map_err(|e| self.err("a delete", e))?;
            }
            Ok(old.map(|v| v.to_vec()))
        })
    }

    fn apply_batch(&self, ops: Vec<WriteOp>) -> Result<()> {
        self.with_open(|o| self.write_batch(o, ops))
    }

    fn restore_batch(&self, ops: Vec<WriteOp>, caught_up: bool) -> Result<()> {
        let guard = self.read();
        let Some(o) = guard.as_ref() else {
            return Err(closed_error(&self.name));
        };
        // Refused whole before anything waits: a key fjall cannot hold fails its own batch.
        if let Some((k, _)) = ops.iter().find(|(k, _)| k.len() > MAX_KEY_BYTES) {
            return self.db_key(k).map(|_| ());
        }
        if let Some((_, Some(v))) = ops
            .iter()
            .find(|(_, v)| v.as_ref().is_some_and(|v| v.len() > bulk::MAX_VALUE_BYTES))
        {
            return Err(self.err(
                "a restore batch",
                format!(
                    "a value of {} bytes is over the limit of {}",
                    v.len(),
                    bulk::MAX_VALUE_BYTES
                ),
            ));
        }
        let mut pending = self.pending();
        pending.push(ops);
        if caught_up {
            // A restoration that reached its end has its records in the store (not in memory
            // nor on a thread) when its caller hears of it.
            drop(pending);
            self.write_pending(o)
        } else if pending.is_full() {
            if pending.holds_a_big_run() {
                self.write_in_background(o, &mut pending)
            } else {
                self.write_in_place(o, &mut pending)
            }
        } else {
            Ok(())
        }
    }

    fn drop_range(&self, from: &[u8], to: &[u8]) -> Result<()> {
        self.with_open(|o| {
            if from >= to {
                return Ok(());
            }
            let (from, to) = (self.db_key(from)?, self.db_key(to)?);
            // The tables that hold only keys of the range go whole, in one change of the tree's
            // version (no tombstone, nothing to compact away later): what Kafka's segmented
            // stores get by keeping a RocksDB per segment. A segmented store's key starts with
            // its segment, and its writes move forward in time, so an expired segment's keys
            // mostly sit in tables of their own. lsm-tree's `drop_range` is reached through
            // fjall's (doc-hidden) tree handle; Cargo.lock pins the version.
            o.kv.tree
                .drop_range::<&[u8], _>((
                    Bound::Included(from.as_slice()),
                    Bound::Excluded(to.as_slice()),
                ))
                .map_err(|e| self.err("dropping the tables of a range", e))?;
            // What is left (the memtables, tables shared with keys outside the range) is
            // deleted key by key, a page per atomic batch; each page starts after the last
            // key deleted, not over the tombstones just written.
            let mut start = Bound::Included(from);
            loop {
                let mut batch = o.db.batch();
                let mut n = 0;
                let range = (start.clone(), Bound::Excluded(to.clone()));
                for item in o.kv.range::<Vec<u8>, _>(range).take(super::PAGE_SIZE) {
                    let (key, _) = item.into_inner().map_err(|e| self.err("a range scan", e))?;
                    start = Bound::Excluded(key.to_vec());
                    batch.remove(&o.kv, key);
                    n += 1;
                }
                if n > 0 {
                    let _w = self.writer();
                    batch
                        .commit()
                        .map_err(|e| self.err("deleting what is left of a range", e))?;
                }
                if n < super::PAGE_SIZE {
                    return Ok(());
                }
            }
        })
    }

    fn scan(&self, start: Bound<&[u8]>, end: Bound<&[u8]>, limit: usize) -> Result<Vec<KeyValue>> {
        self.with_open(|o| {
            if is_empty_range(start, end) {
                return Ok(Vec::new());
            }
            let bound = |b: Bound<&[u8]>| -> Result<Bound<Vec<u8>>> {
                Ok(match b {
                    Bound::Included(k) => Bound::Included(self.db_key(k)?),
                    Bound::Excluded(k) => Bound::Excluded(self.db_key(k)?),
                    Bound::Unbounded => Bound::Unbounded,
                })
            };
            let range = (bound(start)?, bound(end)?);
            let mut out = Vec::with_capacity(limit.min(super::PAGE_SIZE));
            for item in o.kv.range::<Vec<u8>, _>(range).take(limit) {
                let (k, v) = item.into_inner().map_err(|e| self.err("a range scan", e))?;
                out.push((k[1..].to_vec(), v.to_vec()));
            }
            Ok(out)
        })
    }

    fn approximate_num_entries(&self) -> Result<u64> {
        // fjall's own estimate counts overwritten versions and tombstones too, which after a
        // restore (many writes per key) is far off; an exact count costs a scan of the keys.
        self.with_open(|o| {
            let n = o.kv.len().map_err(|e| self.err("counting entries", e))?;
            Ok(n as u64)
        })
    }

    fn flush(&self) -> Result<()> {
        self.with_open(|o| {
            if let Some(reason) = self.lost.lock().unwrap_or_else(|e| e.into_inner()).as_ref() {
                return Err(self.err(
                    "a flush",
                    format!(
                        "restored writes were lost when a run could not be written ({reason}); \
                         restore the store again from its last checkpoint"
                    ),
                ));
            }
            o.db.persist(PersistMode::SyncAll)
                .map_err(|e| self.err("a flush", e))
        })
    }

    fn close(&self) -> Result<()> {
        // The write lock waits for operations in flight and keeps new ones out meanwhile.
        let mut guard = self.write();
        let Some(open) = guard.take() else {
            return Ok(());
        };
        // What waits is written first (a clean close keeps every write, as before); if that
        // fails the store still closes, and the error says what was lost.
        let pending = self.write_pending(&open);
        // Closed even if the flush fails: the store is unusable either way, and the lock must go
        // (with `open`) so that the directory can be reopened or wiped.
        let flushed = open
            .db
            .persist(PersistMode::SyncAll)
            .map_err(|e| self.err("a flush", e));
        pending.and(flushed)
    }
}

impl Drop for PersistentKeyValueStore {
    fn drop(&mut self) {
        // Best effort: a store dropped without close() keeps what was written, as Kafka's
        // RocksDB store does on a clean shutdown. Errors have nowhere to go here.
        let _ = self.close();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::tests as common;

    /// A store of this name fails to write any run of restore writes (a disk error, say).
    pub(super) const FAILING_STORE: &str = "fails-to-write-runs";

    fn tempdir(tag: &str) -> PathBuf {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos();
        let dir = std::env::temp_dir().join(format!(
            "streamstate-store-{tag}-{}-{nanos}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        dir
    }

    fn open(tag: &str) -> (PersistentKeyValueStore, PathBuf) {
        let dir = tempdir(tag);
        (PersistentKeyValueStore::open("p", &dir).unwrap(), dir)
    }

    #[test]
    fn a_creation_interrupted_by_a_crash_is_started_again() {
        // What a SIGKILL during fjall's creation of a database leaves (seen in the restore
        // crash test): the lock, the keyspaces folder and a journal, but no version marker.
        let dir = tempdir("interrupted");
        let db = dir.join(DB_DIR);
        std::fs::create_dir_all(db.join("keyspaces")).unwrap();
        std::fs::write(db.join("lock"), b"").unwrap();
        std::fs::write(db.join("0.jnl"), vec![0u8; 4096]).unwrap();
        let s = PersistentKeyValueStore::open("p", &dir).unwrap();
        s.put(b"k", b"v").unwrap();
        s.flush().unwrap();
        drop(s);
        let s = PersistentKeyValueStore::open("p", &dir).unwrap();
        assert_eq!(s.get(b"k").unwrap(), Some(b"v".to_vec()));
        drop(s);
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn basic_ops() {
        let (s, dir) = open("basic");
        common::check_basic_ops(&s);
        drop(s);
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn ranges() {
        let (s, dir) = open("ranges");
        common::check_ranges(&s);
        drop(s);
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn paging() {
        let (s, dir) = open("paging");
        common::check_paging(&s);
        drop(s);
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn batches() {
        let (s, dir) = open("batches");
        common::check_batches(&s);
        drop(s);
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn drop_range() {
        let (s, dir) = open("drop-range");
        common::check_drop_range(&s);
        drop(s);
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn a_dropped_range_takes_its_tables_whole_without_tombstones() {
        let (s, dir) = open("drop-whole");
        let tree = |s: &PersistentKeyValueStore| {
            let guard = s.read();
            let kv = &guard.as_ref().unwrap().kv;
            (kv.tree.table_count(), kv.tree.tombstone_count())
        };
        // Four segments of 2,000 keys, each flushed to tables of its own (as a segment's
        // writes are, written while its time is the stream's).
        for segment in 0..4u64 {
            let pairs = (0..2000u64)
                .map(|k| {
                    (
                        [segment.to_be_bytes(), k.to_be_bytes()].concat(),
                        vec![7u8; 100],
                    )
                })
                .collect();
            write_table(&s, pairs);
        }
        let (tables, _) = tree(&s);
        assert!(tables >= 4, "{tables} tables");
        s.drop_range(&1u64.to_be_bytes(), &3u64.to_be_bytes())
            .unwrap();
        let (after, tombstones) = tree(&s);
        assert_eq!(tombstones, 0, "the dropped keys were deleted one by one");
        assert!(after < tables, "{after} tables left of {tables}");
        assert_eq!(s.approximate_num_entries().unwrap(), 4000);
        assert!(s
            .get(&[1u64.to_be_bytes(), 5u64.to_be_bytes()].concat())
            .unwrap()
            .is_none());
        let kept = [3u64.to_be_bytes(), 5u64.to_be_bytes()].concat();
        assert_eq!(s.get(&kept).unwrap(), Some(vec![7u8; 100]));
        drop(s);
        std::fs::remove_dir_all(dir).unwrap();
    }

    /// Writes `pairs` and flushes them to tables of their own (a level-0 run).
    fn write_table(s: &PersistentKeyValueStore, pairs: Vec<KeyValue>) {
        s.put_all(pairs).unwrap();
        let guard = s.read();
        guard
            .as_ref()
            .unwrap()
            .kv
            .rotate_memtable_and_wait()
            .unwrap();
    }

    /// 92 bytes that fjall's block compression cannot shrink (an xorshift stream from `seed`).
    fn incompressible(seed: u64) -> Vec<u8> {
        let mut x = seed | 1;
        (0..92)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect()
    }

    /// Writes `segments` of 1.5 MiB whose keys interleave (each overlaps every other, as keys
    /// spread evenly do), each flushed to a level-0 run of its own, then waits until level 0 is
    /// merged down; returns how many tables the store has below level 0.
    fn tables_after_merging(s: &PersistentKeyValueStore, segments: std::ops::Range<u64>) -> usize {
        for segment in segments {
            let pairs = (0..15_000u64)
                .map(|k| {
                    let key = k * 16 + segment;
                    (key.to_be_bytes().to_vec(), incompressible(key))
                })
                .collect();
            write_table(s, pairs);
        }
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        loop {
            let guard = s.read();
            let tree = &guard.as_ref().unwrap().kv.tree;
            if tree.l0_run_count() < usize::from(L0_THRESHOLD) {
                return tree.table_count() - tree.level_table_count(0).unwrap_or(0);
            }
            assert!(
                std::time::Instant::now() < deadline,
                "level 0 was never merged"
            );
            drop(guard);
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
    }

    #[test]
    fn a_small_level_base_merges_into_small_tables_and_the_store_keeps_it() {
        let dir = tempdir("level-base");
        let small = StoreOptions {
            level_base_bytes: Some(MIN_LEVEL_BASE_BYTES),
        };
        let s = PersistentKeyValueStore::open_with("p", &dir, small).unwrap();
        // 12 MiB, most of it merged into tables of 1 MiB.
        let tables = tables_after_merging(&s, 0..8);
        assert!(tables >= 5, "{tables} tables");
        drop(s);
        // Reopened without options: the store was created with a small level 1 and keeps it.
        let s = PersistentKeyValueStore::open("p", &dir).unwrap();
        let tables = tables_after_merging(&s, 8..16);
        assert!(tables >= 10, "{tables} tables");
        let last = 14_999u64 * 16 + 15;
        assert_eq!(
            s.get(&last.to_be_bytes()).unwrap(),
            Some(incompressible(last))
        );
        drop(s);
        std::fs::remove_dir_all(&dir).unwrap();
        // fjall's default: what was merged stays in one or two tables (of up to 64 MiB), against
        // at least 5 above.
        let (s, dir) = open("level-base-default");
        let tables = tables_after_merging(&s, 0..8);
        assert!(tables <= 2, "{tables} tables");
        drop(s);
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn closed() {
        let (s, dir) = open("closed");
        assert!(s.persistent());
        common::check_closed(&s);
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn reopen_keeps_flushed_data_and_locks_the_directory() {
        let (s, dir) = open("reopen");
        s.put(b"k", b"v").unwrap();
        s.flush().unwrap();
        let err = PersistentKeyValueStore::open("again", &dir)
            .err()
            .expect("a second open must fail");
        assert_eq!(err.kind, ErrorKind::ProcessorState);
        assert!(err.reason.contains("already open"), "{}", err.reason);
        assert_eq!(err.location.store_name.as_deref(), Some("again"));
        s.close().unwrap();
        let s = PersistentKeyValueStore::open("p", &dir).unwrap();
        assert_eq!(s.get(b"k").unwrap(), Some(b"v".to_vec()));
        assert_eq!(s.approximate_num_entries().unwrap(), 1);
        drop(s);
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn a_file_where_the_directory_should_be_is_an_error() {
        let dir = tempdir("file");
        std::fs::write(&dir, b"not a directory").unwrap();
        let err = PersistentKeyValueStore::open("p", &dir).err().unwrap();
        assert_eq!(err.kind, ErrorKind::ProcessorState);
        std::fs::remove_file(dir).unwrap();
    }

    #[test]
    fn a_file_where_the_database_should_be_is_an_error() {
        let dir = tempdir("dbfile");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join(DB_DIR), vec![0x5a; 8192]).unwrap();
        let err = PersistentKeyValueStore::open("p", &dir).err().unwrap();
        assert_eq!(err.kind, ErrorKind::ProcessorState);
        assert_eq!(err.location.store_name.as_deref(), Some("p"));
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn oversized_keys_are_errors_not_panics() {
        let (s, dir) = open("bigkey");
        let big = vec![1u8; MAX_KEY_BYTES + 1];
        assert_eq!(
            s.put(&big, b"v").unwrap_err().kind,
            ErrorKind::ProcessorState
        );
        assert!(s.apply_batch(vec![(big.clone(), None)]).is_err());
        let ok = vec![1u8; MAX_KEY_BYTES];
        s.put(&ok, b"v").unwrap();
        assert_eq!(s.get(&ok).unwrap(), Some(b"v".to_vec()));
        s.flush().unwrap();
        drop(s);
        std::fs::remove_dir_all(dir).unwrap();
    }

    /// Restore batches of 1 kB values (so that each is big enough to be written as a run) over
    /// `keys` keys, with deletes, following `model`.
    fn restore_batch_of(
        round: u32,
        keys: u32,
        n: u32,
        model: &mut std::collections::BTreeMap<Vec<u8>, Vec<u8>>,
    ) -> Vec<WriteOp> {
        (0..n)
            .map(|i| {
                let k = format!("k{:05}", (i * 7 + round * 13) % keys).into_bytes();
                let v = if (i + round).is_multiple_of(9) {
                    None
                } else {
                    Some(format!("{round}:{i}:{}", "v".repeat(1000)).into_bytes())
                };
                match &v {
                    Some(v) => model.insert(k.clone(), v.clone()),
                    None => model.remove(&k),
                };
                (k, v)
            })
            .collect()
    }

    fn tables(s: &PersistentKeyValueStore) -> u64 {
        s.runs_written()
    }

    #[test]
    fn restore_batches_are_written_as_runs_that_override_older_writes() {
        let (s, dir) = open("bulk");
        let mut model = std::collections::BTreeMap::new();
        // Data written the ordinary way first: runs must override it, and deletes hide it.
        for i in 0..50u32 {
            let k = format!("k{i:05}").into_bytes();
            s.put(&k, b"before").unwrap();
            model.insert(k, b"before".to_vec());
        }
        for round in 0..5 {
            let ops = restore_batch_of(round, 700, 3000, &mut model);
            s.restore_batch(ops, true).unwrap();
        }
        // Five runs of ~3 MB each: written as tables, not through the memtable.
        assert_eq!(tables(&s), 5);
        let expected: Vec<KeyValue> = model.clone().into_iter().collect();
        assert_eq!(s.all().map(|r| r.unwrap()).collect::<Vec<_>>(), expected);
        s.close().unwrap();
        let s = PersistentKeyValueStore::open("p", &dir).unwrap();
        assert_eq!(s.all().map(|r| r.unwrap()).collect::<Vec<_>>(), expected);
        // An ordinary write after the runs wins over them, across a reopen too.
        s.put(b"k00001", b"after").unwrap();
        s.flush().unwrap();
        drop(s);
        let s = PersistentKeyValueStore::open("p", &dir).unwrap();
        assert_eq!(s.get(b"k00001").unwrap(), Some(b"after".to_vec()));
        drop(s);
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn restore_batches_wait_until_full_caught_up_or_any_other_operation() {
        let (s, dir) = open("pending");
        let mut model = std::collections::BTreeMap::new();
        // Deletes of keys an empty store never had are dropped from its first run.
        let deletes: Vec<WriteOp> = (0..10).map(|i| (vec![b'z', i], None)).collect();
        s.restore_batch(deletes, false).unwrap();
        s.restore_batch(restore_batch_of(0, 400, 2000, &mut model), false)
            .unwrap();
        assert_eq!(tables(&s), 0, "nothing written before it is needed");
        // A read writes what waits first: never observable.
        let (k, v) = model.iter().next().unwrap();
        assert_eq!(s.get(k).unwrap().as_ref(), Some(v));
        assert_eq!(tables(&s), 1);
        // A small remainder goes through an ordinary write batch.
        s.restore_batch(vec![(b"small".to_vec(), Some(b"1".to_vec()))], true)
            .unwrap();
        model.insert(b"small".to_vec(), b"1".to_vec());
        let expected: Vec<KeyValue> = model.into_iter().collect();
        assert_eq!(s.all().map(|r| r.unwrap()).collect::<Vec<_>>(), expected);
        // Enough waiting to fill a run is written without being asked.
        let mut big = std::collections::BTreeMap::new();
        let before = tables(&s);
        for round in 1..=15 {
            s.restore_batch(restore_batch_of(round, 5000, 3000, &mut big), false)
                .unwrap();
        }
        assert!(tables(&s) > before, "a full run is written at once");
        // A key fjall cannot hold fails its own batch, and nothing of that batch waits.
        let err = s
            .restore_batch(vec![(vec![1u8; MAX_KEY_BYTES + 1], Some(vec![]))], false)
            .unwrap_err();
        assert_eq!(err.kind, ErrorKind::ProcessorState);
        s.flush().unwrap();
        drop(s);
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn a_batch_writing_one_key_twice_keeps_the_last_write() {
        let (s, dir) = open("dups");
        let ops = (0..100u8)
            .flat_map(|i| {
                [
                    (vec![i % 7], Some(vec![i])),
                    (vec![i % 5], if i % 2 == 0 { None } else { Some(vec![i]) }),
                ]
            })
            .collect::<Vec<_>>();
        let mut expected = std::collections::BTreeMap::new();
        for (k, v) in &ops {
            match v {
                Some(v) => expected.insert(k.clone(), v.clone()),
                None => expected.remove(k),
            };
        }
        s.apply_batch(ops).unwrap();
        let got: Vec<KeyValue> = s.all().map(|r| r.unwrap()).collect();
        assert_eq!(got, expected.into_iter().collect::<Vec<_>>());
        drop(s);
        std::fs::remove_dir_all(dir).unwrap();
    }

    /// Restore batches of `n` writes of 1 kB values over `keys` keys, from record `from` on.
    fn restore_records(from: u32, n: u32, keys: u32) -> Vec<WriteOp> {
        (from..from + n)
            .map(|i| {
                let v = format!("{i}:{}", "v".repeat(1000)).into_bytes();
                (format!("k{:06}", i % keys).into_bytes(), Some(v))
            })
            .collect()
    }

    #[test]
    fn full_runs_are_written_behind_the_restore_and_every_operation_waits_for_them() {
        let (s, dir) = open("behind");
        let keys = 20_000;
        // 60k writes of 1 kB: full runs (32 MiB) are handed to a thread as the batches arrive.
        for b in 0..60 {
            s.restore_batch(restore_records(b * 1000, 1000, keys), false)
                .unwrap();
        }
        // A read waits for the run in flight and writes what waits: it sees the last write.
        let last = |k: u32| {
            let i = (0..60_000).rev().find(|i| i % keys == k).unwrap();
            Some(format!("{i}:{}", "v".repeat(1000)).into_bytes())
        };
        assert_eq!(s.get(b"k000007").unwrap(), last(7));
        assert!(s.runs_written() >= 1, "a full run was written as tables");
        assert_eq!(s.approximate_num_entries().unwrap(), u64::from(keys));
        // More runs in flight, then a close: nothing is lost.
        for b in 60..120 {
            s.restore_batch(restore_records(b * 1000, 1000, keys), false)
                .unwrap();
        }
        s.close().unwrap();
        let s = PersistentKeyValueStore::open("p", &dir).unwrap();
        for k in [0, 1, 19_999] {
            let i = (0..120_000).rev().find(|i| i % keys == k).unwrap();
            let want = format!("{i}:{}", "v".repeat(1000)).into_bytes();
            assert_eq!(s.get(format!("k{k:06}").as_bytes()).unwrap(), Some(want));
        }
        drop(s);
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn a_run_that_fails_behind_the_restore_fails_the_next_call_and_every_flush() {
        let dir = tempdir("fails");
        let s = PersistentKeyValueStore::open(FAILING_STORE, &dir).unwrap();
        // Enough for a full run: it is handed to a thread, and this call succeeds.
        let mut calls = 0;
        let failed = loop {
            calls += 1;
            assert!(calls < 100, "no run was ever written");
            if let Err(e) = s.restore_batch(restore_records(calls * 1000, 1000, 50_000), false) {
                break e;
            }
            if s.in_flight.lock().unwrap().is_some() {
                // The run in flight fails: the next call that waits for it reports it.
                break s
                    .restore_batch(restore_records(0, 10, 50_000), true)
                    .unwrap_err();
            }
        };
        assert_eq!(failed.kind, ErrorKind::ProcessorState);
        assert_eq!(failed.location.store_name.as_deref(), Some(FAILING_STORE));
        assert!(
            failed.reason.contains("injected failure"),
            "{}",
            failed.reason
        );
        // No checkpoint can follow: every flush fails.
        let flush = s.flush().unwrap_err();
        assert_eq!(flush.location.store_name.as_deref(), Some(FAILING_STORE));
        let again = s.flush().unwrap_err();
        assert!(again.reason.contains("were lost"), "{}", again.reason);
        drop(s);
        // Nothing of the failed run is in the store: the next restore starts from the last
        // checkpoint (none here) and rebuilds it.
        let s = PersistentKeyValueStore::open("p", &dir).unwrap();
        assert_eq!(s.approximate_num_entries().unwrap(), 0);
        drop(s);
        std::fs::remove_dir_all(dir).unwrap();
    }
}
