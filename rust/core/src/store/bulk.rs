//! The bulk-restore write path of the persistent store: changelog records gathered in memory
//! and written as sorted runs straight into fjall's tables (its ingestion API), past the
//! memtable and the journal.
//!
//! Why: restoring through write batches spends most of its time in fjall's memtable (a skiplist
//! insert and a `ByteView` per record, every version of a key kept until the next flush) and its
//! journal. A changelog overwrites its keys again and again, so a run that keeps only the last
//! write of each key, sorted, is both smaller and cheaper to write: fjall's table writer builds
//! the blocks directly.
//!
//! Semantics (read from lsm-tree 3.1.10, `tree/ingest.rs` and `version/optimize.rs`, and tested
//! below and in `persistent.rs`): an ingestion flushes the active memtable first, under the
//! flush lock and fjall's journal lock, writes its tables (fsynced), then registers them as a new
//! run on top of level 0 with a sequence number above every earlier write, and persists the new
//! version atomically. So a later run overrides every earlier run and every earlier write batch
//! (point reads search level 0's runs newest first; `optimize_runs` keeps a table behind every
//! run that overlaps it), a tombstone in a run hides older versions, and a crash mid-ingestion
//! leaves the store as it was before it (the unregistered table files are orphans). This holds
//! whether or not the store had data: fjall itself ingests tombstones into its non-empty meta
//! keyspace.
//!
//! Memory is bounded by one budget for the whole process, not by a buffer per store: an
//! application restores a store per partition at once, and a fixed buffer per store made the
//! peak grow with the partitions (8 stores x 32 MiB of keys and values, twice that with the
//! allocations around each record, was most of a 1.3 GB peak). A store writes its run when it
//! holds [`BULK_BYTES`], or when all stores together hold [`TOTAL_BYTES`] and it holds at least
//! [`MIN_INGEST_BYTES`]; so at most `TOTAL_BYTES` (plus `MIN_INGEST_BYTES` per store below it)
//! wait, whatever the number of stores and the length of the changelog.

use std::sync::atomic::{AtomicUsize, Ordering};

use fjall::Keyspace;

use super::WriteOp;

/// Key and value bytes gathered before they are written as one run. Bigger runs keep fewer
/// overwritten versions (a changelog rewrites its keys all the time) and leave fewer tables for
/// compaction to merge; this bound keeps a restore's memory independent of the changelog.
pub(super) const BULK_BYTES: usize = 32 * 1024 * 1024;

/// Below this many bytes, pending writes go through an ordinary write batch instead: a table
/// per tiny run would cost more (files, fsyncs, a version, compaction) than the memtable.
pub(super) const MIN_INGEST_BYTES: usize = 1024 * 1024;

/// What all the stores of the process may hold waiting, together (see the module's docs).
pub(super) const TOTAL_BYTES: usize = 64 * 1024 * 1024;

/// Bytes counted for each waiting write besides its key and value: the write's own 48 bytes
/// and the allocator's share of its two buffers. Without it a changelog of small values held
/// twice what it was counted as.
pub(super) const OP_OVERHEAD: usize = 64;

/// Bytes waiting in every store of the process (the sum of their [`Pending::bytes`]).
static WAITING: AtomicUsize = AtomicUsize::new(0);

/// Restore writes waiting to be written, in the order they were made.
pub(super) struct Pending {
    ops: Vec<WriteOp>,
    /// Key and value bytes plus [`OP_OVERHEAD`] per write; counted in `waiting` too.
    bytes: usize,
    /// The bytes waiting in all the stores: [`WAITING`] (a test's own counter in tests, which
    /// run in parallel).
    waiting: &'static AtomicUsize,
}

impl Default for Pending {
    fn default() -> Self {
        Pending {
            ops: Vec::new(),
            bytes: 0,
            waiting: &WAITING,
        }
    }
}

impl Pending {
    /// Adds writes (in changelog order) after those already waiting.
    pub(super) fn push(&mut self, ops: Vec<WriteOp>) {
        let bytes = ops
            .iter()
            .map(|(k, v)| OP_OVERHEAD + k.len() + v.as_ref().map_or(0, Vec::len))
            .sum::<usize>();
        self.bytes += bytes;
        self.waiting.fetch_add(bytes, Ordering::Relaxed);
        if self.ops.is_empty() {
            self.ops = ops;
        } else {
            self.ops.extend(ops);
        }
    }

    /// Whether enough is waiting to be written as a run now: a full run of this store, or a
    /// run worth a table while the stores together are at their budget.
    pub(super) fn is_full(&self) -> bool {
        self.bytes >= BULK_BYTES
            || (self.bytes >= MIN_INGEST_BYTES
                && self.waiting.load(Ordering::Relaxed) >= TOTAL_BYTES)
    }

    pub(super) fn is_empty(&self) -> bool {
        self.ops.is_empty()
    }

    /// Takes everything waiting: the writes and their bytes as counted.
    pub(super) fn take(&mut self) -> (Vec<WriteOp>, usize) {
        let bytes = std::mem::take(&mut self.bytes);
        self.waiting.fetch_sub(bytes, Ordering::Relaxed);
        (std::mem::take(&mut self.ops), bytes)
    }
}

impl Drop for Pending {
    /// A store closed or dropped with writes waiting (they are lost, as the checkpoint that
    /// would name them is never written) gives their share of the budget back.
    fn drop(&mut self) {
        self.waiting.fetch_sub(self.bytes, Ordering::Relaxed);
    }
}

/// Sorts `ops` by key and keeps the last write of each key, in place (a stable sort keeps equal
/// keys in the order written, and the last of each run of equal keys is the one that wins).
pub(super) fn last_writes(ops: &mut Vec<WriteOp>) {
    ops.sort_by(|a, b| a.0.cmp(&b.0));
    let n = ops.len();
    let mut kept = 0;
    for i in 0..n {
        if i + 1 < n && ops[i].0 == ops[i + 1].0 {
            continue;
        }
        // Everything in kept..i was overwritten, so the swap only moves dead writes.
        ops.swap(kept, i);
        kept += 1;
    }
    ops.truncate(kept);
}

/// Writes `ops` (sorted by key, one write per key) as one run, each key behind `prefix` (the
/// store's on-disk key prefix). With `drop_tombstones` (the store holds no key at all) deletes
/// are left out: there is nothing for them to hide. Nothing is visible until the run is
/// complete, and a failure or a crash before that leaves the store unchanged.
pub(super) fn ingest(
    kv: &Keyspace,
    prefix: u8,
    ops: Vec<WriteOp>,
    drop_tombstones: bool,
) -> fjall::Result<()> {
    if drop_tombstones && ops.iter().all(|(_, v)| v.is_none()) {
        return Ok(());
    }
    let mut run = kv.start_ingestion()?;
    let pause = test_pause();
    let mut key = Vec::new();
    for (k, value) in ops {
        if let Some(p) = pause {
            std::thread::sleep(p);
        }
        key.clear();
        key.push(prefix);
        key.extend_from_slice(&k);
        match value {
            Some(v) => run.write(key.as_slice(), v)?,
            None if drop_tombstones => {}
            None => run.write_tombstone(key.as_slice())?,
        }
    }
    run.finish()
}

/// A test hook: with `STREAMSTATE_TEST_INGEST_PAUSE_US=N` set, every write of a run takes `N`
/// microseconds longer, and each run appends a line to the file named by
/// `STREAMSTATE_TEST_INGEST_MARKER` as it starts, so a crash test can kill a process inside an
/// ingestion by construction (`tests/integration/test_restore_crash.py`). Read once; unset
/// (always, outside tests), it costs one branch per run.
fn test_pause() -> Option<std::time::Duration> {
    use std::io::Write as _;
    use std::sync::OnceLock;
    static PAUSE: OnceLock<Option<std::time::Duration>> = OnceLock::new();
    let pause = *PAUSE.get_or_init(|| {
        let us: u64 = std::env::var("STREAMSTATE_TEST_INGEST_PAUSE_US")
            .ok()?
            .parse()
            .ok()?;
        Some(std::time::Duration::from_micros(us))
    });
    if pause.is_some() {
        if let Ok(marker) = std::env::var("STREAMSTATE_TEST_INGEST_MARKER") {
            if let Ok(mut f) = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(marker)
            {
                let _ = f.write_all(b"run\n");
            }
        }
    }
    pause
}

#[cfg(test)]
mod tests {
    use super::*;

    fn op(k: &str, v: Option<&str>) -> WriteOp {
        (k.as_bytes().to_vec(), v.map(|v| v.as_bytes().to_vec()))
    }

    #[test]
    fn last_writes_keeps_the_last_write_of_each_key_in_key_order() {
        let mut ops = vec![
            op("b", Some("1")),
            op("a", Some("1")),
            op("b", None),
            op("c", Some("1")),
            op("a", Some("2")),
            op("b", Some("3")),
            op("d", Some("1")),
            op("d", None),
        ];
        last_writes(&mut ops);
        assert_eq!(
            ops,
            vec![
                op("a", Some("2")),
                op("b", Some("3")),
                op("c", Some("1")),
                op("d", None)
            ]
        );
        let mut none: Vec<WriteOp> = Vec::new();
        last_writes(&mut none);
        assert!(none.is_empty());
    }

    #[test]
    fn pending_counts_key_and_value_bytes() {
        let mut p = Pending::default();
        assert!(p.is_empty());
        p.push(vec![op("ab", Some("cde")), op("f", None)]);
        p.push(vec![op("g", Some("h"))]);
        let (ops, bytes) = p.take();
        assert_eq!((ops.len(), bytes), (3, 8 + 3 * OP_OVERHEAD));
        assert!(p.is_empty() && !p.is_full());
    }

    /// Pushes `bytes` (as counted) of one-byte-key writes.
    fn fill(p: &mut Pending, bytes: usize) {
        let value = vec![0u8; 4096 - OP_OVERHEAD - 1];
        p.push(
            (0..bytes / 4096)
                .map(|_| (b"k".to_vec(), Some(value.clone())))
                .collect(),
        );
    }

    #[test]
    fn the_stores_share_one_budget() {
        // A budget of its own: the stores of tests running alongside count in WAITING.
        static BUDGET: AtomicUsize = AtomicUsize::new(0);
        let mut stores: Vec<Pending> = (0..8)
            .map(|_| Pending {
                ops: Vec::new(),
                bytes: 0,
                waiting: &BUDGET,
            })
            .collect();
        for p in &mut stores {
            fill(p, MIN_INGEST_BYTES / 2);
            assert!(
                !p.is_full(),
                "under MIN_INGEST_BYTES a store never writes a run"
            );
        }
        let share = TOTAL_BYTES / stores.len();
        assert!(
            share < BULK_BYTES,
            "the budget must bind before a store's own bound"
        );
        for p in &mut stores {
            fill(p, share);
        }
        // Together they hold more than TOTAL_BYTES, though none holds BULK_BYTES: each is full.
        assert!(stores.iter().all(Pending::is_full));
        let held = BUDGET.load(Ordering::Relaxed);
        assert!(held >= TOTAL_BYTES);
        let (_, bytes) = stores[0].take();
        assert!(bytes >= share && !stores[0].is_full());
        assert_eq!(BUDGET.load(Ordering::Relaxed), held - bytes);
        // Below the budget again, a store waits until it holds a run of its own.
        for p in &mut stores[1..4] {
            p.take();
        }
        assert!(BUDGET.load(Ordering::Relaxed) < TOTAL_BYTES);
        assert!(!stores[4].is_full());
        // Dropped with writes waiting (a store closed mid-restore), they give their bytes back.
        drop(stores);
        assert_eq!(BUDGET.load(Ordering::Relaxed), 0);
    }
}
