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
//! wait, whatever the number of stores and the length of the changelog. A run taken to be
//! written counts until it is written: the persistent store writes a big run (at least half of
//! [`BULK_BYTES`], one store restoring) on a thread of its own while the restore reads on (one
//! run in flight per store), so the budget bounds both; a run the budget cut short (several
//! stores restoring) is written in place, so that it is not halved by the runs in flight.
//!
//! A run is one buffer of keys and values plus an [`Entry`] per write (no allocation per
//! record), sorted through the entries' 16-byte key heads (perf, 1M records of 100 B: the
//! stable sort of `Vec<WriteOp>` was 44% of the restore's CPU, freeing its two allocations per
//! record another 20%).

use std::cmp::Ordering as Order;
use std::sync::atomic::{AtomicUsize, Ordering};

use fjall::Keyspace;

use super::WriteOp;

/// Key and value bytes gathered before they are written as one run. Bigger runs keep fewer
/// overwritten versions (a changelog rewrites its keys all the time) and leave fewer tables for
/// compaction to merge; this bound keeps a restore's memory independent of the changelog.
pub(super) const BULK_BYTES: usize = 32 * 1024 * 1024;

/// The capacity a run's buffers are allocated with (see [`Pending::push`]): more than a full
/// run and above glibc's largest dynamic mmap threshold (32 MiB on 64-bit).
const RUN_CAPACITY: usize = BULK_BYTES + 1024 * 1024;

/// Below this many bytes, pending writes go through an ordinary write batch instead: a table
/// per tiny run would cost more (files, fsyncs, a version, compaction) than the memtable.
pub(super) const MIN_INGEST_BYTES: usize = 1024 * 1024;

/// What all the stores of the process may hold waiting, together (see the module's docs),
/// runs being written included.
pub(super) const TOTAL_BYTES: usize = 64 * 1024 * 1024;

/// Bytes counted for each waiting write besides its key and value: its [`Entry`]. Keys and
/// values are copied into one buffer per run, so there is no allocation per write to count.
pub(super) const OP_OVERHEAD: usize = size_of::<Entry>();

/// The value length of a delete in an [`Entry`].
const TOMBSTONE: u32 = u32::MAX;

/// The longest value a run holds (one below [`TOMBSTONE`]); a longer one (Kafka's records are
/// far smaller) is refused by the store before it waits.
pub(super) const MAX_VALUE_BYTES: usize = TOMBSTONE as usize - 1;

/// Bytes waiting in every store of the process (the sum of their [`Pending::bytes`] and of the
/// runs taken from them and not written yet).
static WAITING: AtomicUsize = AtomicUsize::new(0);

/// One waiting write: where its key (then its value) is in the run's buffer, and the key's
/// first 16 bytes, big-endian and zero-padded, so that most comparisons of the sort are two
/// integer comparisons instead of a `memcmp` through two pointers (the stable sort of
/// `Vec<WriteOp>` this replaced took 44% of a restore's CPU, perf, 1M records of 100 B).
#[derive(Clone, Copy, Debug)]
struct Entry {
    head: [u64; 2],
    start: usize,
    /// The write's place in the run: ties between writes of one key are broken by it (`start`
    /// cannot: a write of an empty key and no value takes no bytes).
    seq: u64,
    key_len: u32,
    /// [`TOMBSTONE`] for a delete.
    value_len: u32,
}

impl Entry {
    fn key<'a>(&self, data: &'a [u8]) -> &'a [u8] {
        &data[self.start..self.start + self.key_len as usize]
    }

    fn value<'a>(&self, data: &'a [u8]) -> Option<&'a [u8]> {
        if self.value_len == TOMBSTONE {
            return None;
        }
        let from = self.start + self.key_len as usize;
        Some(&data[from..from + self.value_len as usize])
    }
}

/// The first 16 bytes of `key`, zero-padded, as two big-endian integers: ordered as the keys
/// are wherever they differ (a zero pad sorts like the end of a shorter key), equal otherwise.
fn head(key: &[u8]) -> [u64; 2] {
    let mut b = [0u8; 16];
    let n = key.len().min(16);
    b[..n].copy_from_slice(&key[..n]);
    let (hi, lo) = b.split_at(8);
    [
        u64::from_be_bytes(hi.try_into().unwrap_or_default()),
        u64::from_be_bytes(lo.try_into().unwrap_or_default()),
    ]
}

/// Byte order of two entries' keys.
fn cmp_keys(data: &[u8], a: &Entry, b: &Entry) -> Order {
    a.head.cmp(&b.head).then_with(|| {
        if a.key_len <= 16 && b.key_len <= 16 {
            // Equal heads of keys that fit in them: the keys differ only by trailing zeros,
            // so the shorter is a prefix of the longer.
            a.key_len.cmp(&b.key_len)
        } else {
            a.key(data).cmp(b.key(data))
        }
    })
}

/// Writes gathered in one buffer, in the order they were made, counted in a budget.
pub(super) struct Run {
    data: Vec<u8>,
    entries: Vec<Entry>,
    /// Key and value bytes plus [`OP_OVERHEAD`] per write; counted in `waiting` until the run
    /// is dropped.
    bytes: usize,
    /// The bytes waiting in all the stores: [`WAITING`] (a test's own counter in tests, which
    /// run in parallel).
    waiting: &'static AtomicUsize,
}

impl Run {
    fn new(waiting: &'static AtomicUsize) -> Self {
        Run {
            data: Vec::new(),
            entries: Vec::new(),
            bytes: 0,
            waiting,
        }
    }

    /// Key and value bytes plus [`OP_OVERHEAD`] per write.
    pub(super) fn bytes(&self) -> usize {
        self.bytes
    }

    pub(super) fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Empties the run, keeping its buffers, and gives its bytes back to the budget.
    fn reset(&mut self) {
        self.waiting.fetch_sub(self.bytes, Ordering::Relaxed);
        self.bytes = 0;
        self.data.clear();
        self.entries.clear();
    }

    /// Whether the run writes a value (not only deletes).
    pub(super) fn adds_data(&self) -> bool {
        self.entries.iter().any(|e| e.value_len != TOMBSTONE)
    }

    /// The writes in the run's order: `(key, value)`, `None` for a delete.
    pub(super) fn iter(&self) -> impl Iterator<Item = (&[u8], Option<&[u8]>)> + '_ {
        self.entries
            .iter()
            .map(|e| (e.key(&self.data), e.value(&self.data)))
    }

    /// Sorts the writes by key and keeps the last write of each key (ties are broken by the
    /// order the writes were made in).
    pub(super) fn last_writes(&mut self) {
        let data = &self.data;
        self.entries
            .sort_unstable_by(|a, b| cmp_keys(data, a, b).then(a.seq.cmp(&b.seq)));
        let n = self.entries.len();
        let mut kept = 0;
        for i in 0..n {
            if i + 1 < n && cmp_keys(data, &self.entries[i], &self.entries[i + 1]) == Order::Equal {
                continue;
            }
            self.entries[kept] = self.entries[i];
            kept += 1;
        }
        self.entries.truncate(kept);
    }
}

impl Drop for Run {
    /// A run written, failed or dropped with its store gives its share of the budget back.
    fn drop(&mut self) {
        self.waiting.fetch_sub(self.bytes, Ordering::Relaxed);
    }
}

/// Restore writes waiting to be written, in the order they were made.
pub(super) struct Pending {
    run: Run,
    /// The buffers of the last run written, for the next run: a fresh 32 MiB buffer per run
    /// cost a page fault per 4 kB (zeroed by the kernel), 1 GB of them for a changelog of 1 GB.
    spare: Option<Run>,
}

impl Default for Pending {
    fn default() -> Self {
        Pending {
            run: Run::new(&WAITING),
            spare: None,
        }
    }
}

impl Pending {
    /// Adds writes (in changelog order) after those already waiting. Keys and values are
    /// copied into the run's buffer, and `ops` is freed here, while its allocations are
    /// recent: freeing a run's worth of small allocations at once cost glibc 20% of a
    /// restore's CPU in `malloc_consolidate` and `unlink_chunk` (perf, 1M records of 100 B).
    /// The caller refuses keys and values too long for the store first.
    pub(super) fn push(&mut self, ops: Vec<WriteOp>) {
        let run = &mut self.run;
        let bytes = ops
            .iter()
            .map(|(k, v)| OP_OVERHEAD + k.len() + v.as_ref().map_or(0, Vec::len))
            .sum::<usize>();
        if run.data.capacity() == 0 {
            // A run's buffers are sized once for a full run: a capacity above glibc's largest
            // dynamic mmap threshold (32 MiB) is always its own mapping, so only the pages a
            // run fills count in RSS, it never moves as it grows, and freeing it returns it to
            // the kernel. Grown by doubling instead, the buffers of eight stores' smaller runs
            // came from glibc's arenas once the threshold had risen, and their freed copies
            // stayed there: RSS grew with the changelog (8 partitions x 10M records).
            run.data.reserve(RUN_CAPACITY);
            run.entries.reserve(RUN_CAPACITY / OP_OVERHEAD);
        }
        run.data.reserve(bytes - OP_OVERHEAD * ops.len());
        run.entries.reserve(ops.len());
        for (k, v) in ops {
            let start = run.data.len();
            run.data.extend_from_slice(&k);
            let value_len = match v {
                Some(v) => {
                    run.data.extend_from_slice(&v);
                    v.len() as u32
                }
                None => TOMBSTONE,
            };
            run.entries.push(Entry {
                head: head(&k),
                start,
                seq: run.entries.len() as u64,
                key_len: k.len() as u32,
                value_len,
            });
        }
        run.bytes += bytes;
        run.waiting.fetch_add(bytes, Ordering::Relaxed);
    }

    /// Whether enough is waiting to be written as a run now: a full run of this store, or a
    /// run worth a table while the stores together are at their budget.
    pub(super) fn is_full(&self) -> bool {
        let bytes = self.run.bytes;
        bytes >= BULK_BYTES
            || (bytes >= MIN_INGEST_BYTES
                && self.run.waiting.load(Ordering::Relaxed) >= TOTAL_BYTES)
    }

    pub(super) fn is_empty(&self) -> bool {
        self.run.is_empty()
    }

    /// Whether the run waiting is big enough to be worth a thread of its own: at least half a
    /// full run (a run cut short by the budget the stores share is smaller: many stores are
    /// restoring, see `persistent.rs`; one store's run comes close to full either way).
    pub(super) fn holds_a_big_run(&self) -> bool {
        self.run.bytes >= BULK_BYTES / 2
    }

    /// The run gathering, to be written where it is (then [`Pending::written`]).
    pub(super) fn current(&mut self) -> &mut Run {
        &mut self.run
    }

    /// Empties the run gathering, written, keeping its buffers (already resident) for the next.
    pub(super) fn written(&mut self) {
        self.run.reset();
    }

    /// Takes everything waiting as a run; its bytes stay counted until the run is dropped.
    pub(super) fn take(&mut self) -> Run {
        let fresh = self
            .spare
            .take()
            .unwrap_or_else(|| Run::new(self.run.waiting));
        std::mem::replace(&mut self.run, fresh)
    }

    /// Keeps the buffers of `run` (written) for the next run; with `keep` false (the restore
    /// caught up: no run may follow for long) they are freed instead.
    pub(super) fn recycle(&mut self, mut run: Run, keep: bool) {
        if keep {
            run.reset();
            self.spare = Some(run);
        } else {
            self.spare = None;
        }
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

/// Writes `run` (sorted by key, one write per key: [`Run::last_writes`]) as one run of tables,
/// each key behind `prefix` (the store's on-disk key prefix). With `drop_tombstones` (the store
/// holds no key at all) deletes are left out: there is nothing for them to hide. Nothing is
/// visible until the run is complete, and a failure or a crash before that leaves the store
/// unchanged.
pub(super) fn ingest(
    kv: &Keyspace,
    prefix: u8,
    run: &Run,
    drop_tombstones: bool,
) -> fjall::Result<()> {
    if drop_tombstones && !run.adds_data() {
        return Ok(());
    }
    let mut tables = kv.start_ingestion()?;
    let pause = test_pause();
    let mut key = Vec::new();
    for (k, value) in run.iter() {
        if let Some(p) = pause {
            std::thread::sleep(p);
        }
        key.clear();
        key.push(prefix);
        key.extend_from_slice(k);
        match value {
            Some(v) => tables.write(key.as_slice(), v)?,
            None if drop_tombstones => {}
            None => tables.write_tombstone(key.as_slice())?,
        }
    }
    tables.finish()
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
        p.push(vec![op("g", Some("h")), op("", Some(""))]);
        let run = p.take();
        assert_eq!(run.bytes(), 8 + 4 * OP_OVERHEAD);
        let writes: Vec<(&[u8], Option<&[u8]>)> = run.iter().collect();
        let expected: Vec<(&[u8], Option<&[u8]>)> = vec![
            (b"ab", Some(b"cde")),
            (b"f", None),
            (b"g", Some(b"h")),
            (b"", Some(b"")),
        ];
        assert_eq!(
            writes, expected,
            "in the order written, deletes and empty keys kept"
        );
        assert!(run.adds_data());
        assert!(p.is_empty() && !p.is_full());
    }

    /// A tiny deterministic generator (xorshift64*), so that the property test needs no crate.
    struct Rng(u64);

    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
        }

        fn below(&mut self, n: u64) -> u64 {
            self.next() % n
        }
    }

    /// A key of the shapes the sort's fast path must get right: empty, short, differing only by
    /// trailing zero bytes, exactly 16 bytes, and longer keys sharing their first 16 bytes.
    fn random_key(rng: &mut Rng) -> Vec<u8> {
        let stem: &[u8] = match rng.below(4) {
            0 => b"",
            1 => b"key-000",
            2 => b"0123456789abcdef",
            _ => b"0123456789abcdef-shared-",
        };
        let mut k = stem.to_vec();
        for _ in 0..rng.below(4) {
            k.push([0u8, 1, b'a', 0xff][rng.below(4) as usize]);
        }
        k
    }

    #[test]
    fn a_run_keeps_the_last_write_of_each_key_in_byte_order_like_the_reference() {
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
        for round in 0..200 {
            let n = rng.below(300) as usize;
            let ops: Vec<WriteOp> = (0..n)
                .map(|i| {
                    let value = (rng.below(5) != 0).then(|| format!("{round}:{i}").into_bytes());
                    (random_key(&mut rng), value)
                })
                .collect();
            let mut expected = ops.clone();
            last_writes(&mut expected);
            let mut p = Pending::default();
            // In pieces, as restore batches arrive.
            let mut rest = ops;
            while !rest.is_empty() {
                let tail = rest.split_off(rest.len().min(1 + rng.below(50) as usize));
                let first = std::mem::replace(&mut rest, tail);
                p.push(first);
            }
            let mut run = p.take();
            run.last_writes();
            let got: Vec<WriteOp> = run
                .iter()
                .map(|(k, v)| (k.to_vec(), v.map(<[u8]>::to_vec)))
                .collect();
            assert_eq!(got, expected, "round {round}");
        }
    }

    #[test]
    fn the_head_orders_keys_as_their_bytes_do() {
        let keys: [&[u8]; 7] = [b"", b"\0", b"a", b"a\0", b"a\0\x01", b"b", b"\xff"];
        for a in keys {
            for b in keys {
                let (ha, hb) = (head(a), head(b));
                if ha != hb {
                    assert_eq!(ha.cmp(&hb), a.cmp(b), "{a:?} {b:?}");
                }
            }
        }
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
    fn a_run_is_big_from_half_a_full_run_and_keeps_its_buffers_once_written() {
        static BUDGET: AtomicUsize = AtomicUsize::new(0);
        let mut p = Pending {
            run: Run::new(&BUDGET),
            spare: None,
        };
        fill(&mut p, BULK_BYTES / 2 - 4096);
        assert!(!p.holds_a_big_run());
        // Allocated once for a full run, above glibc's largest dynamic mmap threshold.
        let (data, entries) = (p.run.data.as_ptr(), p.run.entries.as_ptr());
        assert!(p.run.data.capacity() >= RUN_CAPACITY && RUN_CAPACITY > 32 * 1024 * 1024);
        fill(&mut p, 8192);
        assert!(p.holds_a_big_run() && !p.is_full());
        fill(&mut p, BULK_BYTES / 2);
        assert!(p.is_full());
        assert_eq!(
            (p.run.data.as_ptr(), p.run.entries.as_ptr()),
            (data, entries),
            "a full run never moved"
        );
        // Written in place: emptied, its bytes back in the budget, the same buffers reused.
        p.current().last_writes();
        p.written();
        assert!(p.is_empty());
        assert_eq!(BUDGET.load(Ordering::Relaxed), 0);
        fill(&mut p, 4096);
        assert_eq!(p.run.data.as_ptr(), data);
    }

    #[test]
    fn the_stores_share_one_budget() {
        // A budget of its own: the stores of tests running alongside count in WAITING.
        static BUDGET: AtomicUsize = AtomicUsize::new(0);
        let mut stores: Vec<Pending> = (0..8)
            .map(|_| Pending {
                run: Run::new(&BUDGET),
                spare: None,
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
        // Together they hold more than TOTAL_BYTES, though none holds BULK_BYTES: each is full,
        // with a run too small for a thread of its own (written in place, not halved by runs
        // in flight).
        assert!(stores.iter().all(Pending::is_full));
        assert!(stores.iter().all(|p| !p.holds_a_big_run()));
        let held = BUDGET.load(Ordering::Relaxed);
        assert!(held >= TOTAL_BYTES);
        let run = stores[0].take();
        let bytes = run.bytes();
        assert!(bytes >= share && !stores[0].is_full());
        // A run taken to be written still counts until it is written (dropped).
        assert_eq!(BUDGET.load(Ordering::Relaxed), held);
        assert!(stores[1].is_full());
        drop(run);
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
