//! `ChangelogFetcher`: partitions spread over librdkafka consumers, read and applied in parallel.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rdkafka::consumer::Consumer as _;
use rdkafka::error::KafkaError;
use rdkafka::types::RDKafkaRespErr;
use rdkafka::{Offset, TopicPartitionList};
use streamstate_core::error::CoreError;
use streamstate_core::restore::{process_next, ChangelogRecord};
use streamstate_core::store::KeyValueStore;

use crate::client::{code_name, Consumer, Item, KafkaFailure, Settings, UnsupportedSetting};

/// librdkafka's (and confluent-kafka's) logical offset "the beginning of the log".
pub const OFFSET_BEGINNING: i64 = -2;

/// Messages taken off a consumer's queue at once.
const READ_BATCH: usize = 10_000;

/// Key and value bytes a worker holds before it writes them: a partition's records are gathered
/// over several reads and written in one batch when this much is pending, or at the end of the
/// call. Small: the persistent store gathers restore batches into large sorted runs itself (one
/// buffer per store, keeping each key's last write), so records held here only cost memory, an
/// allocation per key and value that lives until the batch is written (16 MiB of them were
/// ~30 MB of a one-partition restore's peak RSS, 100 B values).
const APPLY_BYTES: usize = 1024 * 1024;

/// The longest one read waits for records: short, so a call ends soon after its partitions
/// reach their end offsets.
const READ_WAIT: Duration = Duration::from_millis(10);

/// One partition to restore during a [`ChangelogFetcher::restore`] call.
#[derive(Clone)]
pub struct RestoreTarget {
    pub topic: String,
    pub partition: i32,
    pub store: Arc<dyn KeyValueStore>,
    /// The end offset (exclusive) read when the restoration started.
    pub end_offset: i64,
    /// The offset of the next record to apply as the caller knows it: records below it are
    /// never applied again (one fetched before a re-assignment, say).
    pub position: i64,
}

/// A read of a partition that failed (anything but an out-of-range position).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchError {
    /// The offset the error concerns, when librdkafka names one.
    pub offset: Option<i64>,
    pub failure: KafkaFailure,
}

/// What one [`ChangelogFetcher::restore`] call did for one partition: the sum of every write
/// batch applied to it during the call.
#[derive(Debug, Clone)]
pub struct PartitionRestore {
    pub topic: String,
    pub partition: i32,
    /// Records applied (puts and deletes; null keys and records at or past the end excluded).
    pub num_restored: u64,
    /// The offset of the last record applied, `-1` when none was.
    pub last_restored_offset: i64,
    /// Where the records say to continue (`process_next`'s `next_offset`), `-1` without records.
    pub next_offset: i64,
    /// Where an end-of-partition event put the fetch, `-1` without one: past transaction
    /// markers and compaction gaps, which no record reports.
    pub eof_offset: i64,
    /// The position fell out of the log (`auto.offset.reset=error`): the offset and
    /// librdkafka's reason. Nothing of the partition read in this call was applied.
    pub invalid_offset: Option<(i64, String)>,
    /// Reading the partition failed; what was applied before the failure stays applied.
    pub error: Option<FetchError>,
    /// Writing to the store failed; nothing of the failed write batch was applied.
    pub store_error: Option<CoreError>,
    /// Offsets of records with a null key, consumed but not applied.
    pub null_key_offsets: Vec<i64>,
}

impl PartitionRestore {
    fn new(topic: &str, partition: i32) -> Self {
        PartitionRestore {
            topic: topic.to_owned(),
            partition,
            num_restored: 0,
            last_restored_offset: -1,
            next_offset: -1,
            eof_offset: -1,
            invalid_offset: None,
            error: None,
            store_error: None,
            null_key_offsets: Vec::new(),
        }
    }

    /// The furthest position this call saw, or `position` if it saw none.
    pub fn position(&self, position: i64) -> i64 {
        position.max(self.next_offset).max(self.eof_offset)
    }

    fn stopped(&self) -> bool {
        self.invalid_offset.is_some() || self.error.is_some() || self.store_error.is_some()
    }
}

/// Reads changelog partitions with librdkafka and applies them to their stores; see the crate
/// documentation. Not for use from several threads at once (`&mut self`): one caller drives it,
/// and it runs its workers itself during [`ChangelogFetcher::restore`].
pub struct ChangelogFetcher {
    settings: Settings,
    parallelism: usize,
    /// Asks for offsets and is never assigned a partition. A broker answers one connection's
    /// requests in order, so a ListOffsets sent by a worker waits behind its long-polling fetch
    /// (up to `fetch.wait.max.ms`, 500 ms): every partition initialized while others restore
    /// paid that (8 partitions started 0.5 s apart).
    lister: Consumer,
    workers: Vec<Consumer>,
    /// Which worker reads each assigned partition.
    owner: HashMap<(String, i32), usize>,
}

fn key(topic: &str, partition: i32) -> (String, i32) {
    (topic.to_owned(), partition)
}

fn tpl(topic: &str, partition: i32, offset: Option<i64>) -> TopicPartitionList {
    let mut list = TopicPartitionList::new();
    match offset {
        Some(o) => {
            // Only fails for offsets librdkafka has no name for, which the binding rules out.
            let _ = list.add_partition_offset(topic, partition, Offset::from_raw(o));
        }
        None => {
            list.add_partition(topic, partition);
        }
    }
    list
}

fn failure(e: KafkaError) -> KafkaFailure {
    KafkaFailure::from_error(&e)
}

impl ChangelogFetcher {
    /// A fetcher reading with `settings` on up to `parallelism` consumers (at least one). The
    /// offsets client is created at once, so a setting librdkafka refuses is reported here;
    /// the reading consumers are created as partitions are assigned.
    pub fn new(settings: Settings, parallelism: usize) -> Result<Self, UnsupportedSetting> {
        let lister = Consumer::new(&settings)?;
        Ok(ChangelogFetcher {
            settings,
            parallelism: parallelism.max(1),
            lister,
            workers: Vec::new(),
            owner: HashMap::new(),
        })
    }

    /// The most consumers this fetcher reads with.
    pub fn parallelism(&self) -> usize {
        self.parallelism
    }

    /// `(log start offset, end offset)` of a partition, asked of its leader: the end is the
    /// high watermark, or the last stable offset with `isolation.level=read_committed`.
    pub fn watermarks(
        &self,
        topic: &str,
        partition: i32,
        timeout: Duration,
    ) -> Result<(i64, i64), KafkaFailure> {
        self.lister
            .inner
            .fetch_watermarks(topic, partition, timeout)
            .map_err(failure)
    }

    /// The worker with the fewest partitions, a new one while fewer than `parallelism` exist.
    fn pick_worker(&mut self) -> Result<usize, KafkaFailure> {
        let mut load = vec![0usize; self.workers.len()];
        for &w in self.owner.values() {
            load[w] += 1;
        }
        if let Some(idle) = load.iter().position(|&n| n == 0) {
            return Ok(idle);
        }
        if self.workers.len() < self.parallelism {
            // The settings were accepted by the first consumer, so a refusal now is a failure.
            let consumer = Consumer::new(&self.settings).map_err(|e| {
                KafkaFailure::from_code(
                    RDKafkaRespErr::RD_KAFKA_RESP_ERR__INVALID_ARG as i32,
                    e.to_string(),
                )
            })?;
            self.workers.push(consumer);
            return Ok(self.workers.len() - 1);
        }
        let least = (0..load.len()).min_by_key(|&i| load[i]).unwrap_or(0);
        Ok(least)
    }

    /// Starts reading a partition at `offset` (an offset, or [`OFFSET_BEGINNING`]); assigning
    /// an assigned partition moves it there.
    pub fn assign(&mut self, topic: &str, partition: i32, offset: i64) -> Result<(), KafkaFailure> {
        if self.owner.contains_key(&key(topic, partition)) {
            self.unassign(topic, partition)?;
        }
        let w = self.pick_worker()?;
        let consumer = &self.workers[w].inner;
        consumer
            .incremental_assign(&tpl(topic, partition, Some(offset)))
            .map_err(failure)?;
        // librdkafka keeps a partition paused across unassign and assign: a partition paused
        // on completion and assigned again must fetch.
        consumer
            .resume(&tpl(topic, partition, None))
            .map_err(failure)?;
        self.owner.insert(key(topic, partition), w);
        Ok(())
    }

    /// Stops reading a partition; unknown partitions are ignored.
    pub fn unassign(&mut self, topic: &str, partition: i32) -> Result<(), KafkaFailure> {
        let Some(w) = self.owner.remove(&key(topic, partition)) else {
            return Ok(());
        };
        self.workers[w]
            .inner
            .incremental_unassign(&tpl(topic, partition, None))
            .map_err(failure)
    }

    /// Stops fetching a partition without forgetting its position.
    pub fn pause(&self, topic: &str, partition: i32) -> Result<(), KafkaFailure> {
        match self.owner.get(&key(topic, partition)) {
            Some(&w) => self.workers[w]
                .inner
                .pause(&tpl(topic, partition, None))
                .map_err(failure),
            None => Ok(()),
        }
    }

    /// Fetches a paused partition again.
    pub fn resume(&self, topic: &str, partition: i32) -> Result<(), KafkaFailure> {
        match self.owner.get(&key(topic, partition)) {
            Some(&w) => self.workers[w]
                .inner
                .resume(&tpl(topic, partition, None))
                .map_err(failure),
            None => Ok(()),
        }
    }

    /// The assigned partitions, in no particular order.
    pub fn assignment(&self) -> Vec<(String, i32)> {
        self.owner.keys().cloned().collect()
    }

    /// librdkafka's position of a partition (the offset after the last record it handed out),
    /// `None` when unknown (nothing read yet) or not assigned.
    pub fn position(&self, topic: &str, partition: i32) -> Result<Option<i64>, KafkaFailure> {
        let Some(&w) = self.owner.get(&key(topic, partition)) else {
            return Ok(None);
        };
        let list = self.workers[w].inner.position().map_err(failure)?;
        Ok(list
            .find_partition(topic, partition)
            .and_then(|e| match e.offset() {
                Offset::Offset(o) => Some(o),
                _ => None,
            }))
    }

    /// Reads the `targets` (assigned partitions) and applies their records, for at most
    /// `max_wait` or until each target reached its end offset, failed, or fell out of the log;
    /// a worker also stops after taking `max_records` messages. Returns one
    /// [`PartitionRestore`] per target, in the targets' order, and the client-wide events seen
    /// (broker connections lost, ...). Targets not assigned are returned untouched.
    pub fn restore(
        &self,
        targets: &[RestoreTarget],
        max_wait: Duration,
        max_records: usize,
    ) -> (Vec<PartitionRestore>, Vec<String>) {
        let deadline = Instant::now() + max_wait;
        let mut per_worker: Vec<Vec<usize>> = vec![Vec::new(); self.workers.len()];
        for (i, t) in targets.iter().enumerate() {
            if let Some(&w) = self.owner.get(&key(&t.topic, t.partition)) {
                per_worker[w].push(i);
            }
        }
        let mut results: Vec<PartitionRestore> = targets
            .iter()
            .map(|t| PartitionRestore::new(&t.topic, t.partition))
            .collect();
        let busy: Vec<usize> = (0..per_worker.len())
            .filter(|&w| !per_worker[w].is_empty())
            .collect();
        let run = |w: usize| {
            let mine: Vec<&RestoreTarget> = per_worker[w].iter().map(|&i| &targets[i]).collect();
            read_and_apply(&self.workers[w], &mine, deadline, max_records)
        };
        let outcomes: Vec<(usize, Vec<PartitionRestore>)> = if busy.len() <= 1 {
            // One worker: no thread to start.
            busy.iter().map(|&w| (w, run(w))).collect()
        } else {
            std::thread::scope(|s| {
                let handles: Vec<_> = busy.iter().map(|&w| (w, s.spawn(move || run(w)))).collect();
                handles
                    .into_iter()
                    .map(|(w, h)| {
                        // A worker that panicked is re-raised here, where the binding's guard
                        // turns it into an error.
                        (w, h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
                    })
                    .collect()
            })
        };
        for (w, outcome) in outcomes {
            for (slot, result) in per_worker[w].iter().zip(outcome) {
                results[*slot] = result;
            }
        }
        let mut events = self.lister.take_events();
        for worker in &self.workers {
            events.extend(worker.take_events());
        }
        (results, events)
    }
}

/// Whether an event code means "the position is outside the partition's log" (Java's
/// `InvalidOffsetException`): librdkafka reports `_AUTO_OFFSET_RESET` when
/// `auto.offset.reset=error` forbids a reset.
fn is_invalid_offset(code: RDKafkaRespErr) -> bool {
    matches!(
        code,
        RDKafkaRespErr::RD_KAFKA_RESP_ERR__AUTO_OFFSET_RESET
            | RDKafkaRespErr::RD_KAFKA_RESP_ERR_OFFSET_OUT_OF_RANGE
    )
}

/// Writes each partition's pending records in one batch with `process_next`.
fn apply(
    targets: &[&RestoreTarget],
    pending: &mut [Vec<ChangelogRecord>],
    results: &mut [PartitionRestore],
) {
    for ((target, records), result) in targets.iter().zip(pending).zip(results) {
        apply_one(target, records, result);
    }
}

/// Writes one partition's pending records (unless it stopped: then they are dropped).
fn apply_one(
    target: &RestoreTarget,
    records: &mut Vec<ChangelogRecord>,
    result: &mut PartitionRestore,
) {
    if records.is_empty() || result.stopped() {
        records.clear();
        return;
    }
    match process_next(&*target.store, records.drain(..), target.end_offset) {
        Ok(step) => {
            let b = step.batch;
            result.next_offset = result.next_offset.max(b.next_offset);
            if b.num_restored > 0 {
                result.num_restored += b.num_restored;
                result.last_restored_offset = b.last_restored_offset;
            }
            result.null_key_offsets.extend(step.null_key_offsets);
        }
        Err(e) => result.store_error = Some(e),
    }
}

/// One worker's part of a `restore` call: read its consumer, apply each read's records per
/// partition in one write batch, until every target is done or the deadline passes.
fn read_and_apply(
    consumer: &Consumer,
    targets: &[&RestoreTarget],
    deadline: Instant,
    max_records: usize,
) -> Vec<PartitionRestore> {
    let mut results: Vec<PartitionRestore> = targets
        .iter()
        .map(|t| PartitionRestore::new(&t.topic, t.partition))
        .collect();
    let index: HashMap<(&str, i32), usize> = targets
        .iter()
        .enumerate()
        .map(|(i, t)| ((t.topic.as_str(), t.partition), i))
        .collect();
    let mut pending: Vec<Vec<ChangelogRecord>> = vec![Vec::new(); targets.len()];
    let mut pending_bytes = 0usize;
    let mut taken = 0usize;
    let done = |results: &[PartitionRestore]| {
        results
            .iter()
            .zip(targets)
            .all(|(r, t)| r.stopped() || r.position(t.position) >= t.end_offset)
    };
    loop {
        let now = Instant::now();
        if now >= deadline || taken >= max_records || done(&results) {
            break;
        }
        // Never take more than `max_records` in one call: a caller that asked for small
        // batches (to checkpoint or yield often) gets them.
        let batch = consumer.read(
            READ_WAIT.min(deadline - now),
            READ_BATCH.min(max_records - taken),
        );
        taken += batch.len();
        let mut last: Option<((&str, i32), usize)> = None;
        for item in batch.items() {
            match item {
                Item::Record {
                    topic,
                    partition,
                    offset,
                    key,
                    value,
                } => {
                    // Records of one partition come in runs: look the run's target up once.
                    let i = match last {
                        Some((k, i)) if k == (topic, partition) => i,
                        _ => match index.get(&(topic, partition)) {
                            Some(&i) => {
                                last = Some(((topic, partition), i));
                                i
                            }
                            None => continue,
                        },
                    };
                    if results[i].stopped() || offset < targets[i].position {
                        continue;
                    }
                    pending_bytes += key.map_or(0, <[u8]>::len) + value.map_or(0, <[u8]>::len);
                    pending[i].push((offset, key.map(<[u8]>::to_vec), value.map(<[u8]>::to_vec)));
                }
                Item::Event {
                    topic: Some(topic),
                    partition,
                    offset,
                    code,
                    text,
                } => {
                    let Some(&i) = index.get(&(topic, partition)) else {
                        continue;
                    };
                    let failed = code != RDKafkaRespErr::RD_KAFKA_RESP_ERR__PARTITION_EOF
                        && !is_invalid_offset(code);
                    if failed {
                        // The records read before the failure are sound: apply them, and
                        // nothing after it.
                        apply_one(targets[i], &mut pending[i], &mut results[i]);
                    }
                    let result = &mut results[i];
                    if code == RDKafkaRespErr::RD_KAFKA_RESP_ERR__PARTITION_EOF {
                        if offset >= 0 {
                            result.eof_offset = result.eof_offset.max(offset);
                        }
                    } else if is_invalid_offset(code) {
                        // The store is about to be wiped: what was read of it is dropped.
                        result.invalid_offset = Some((offset, text));
                        pending[i].clear();
                    } else if !result.stopped() {
                        result.error = Some(FetchError {
                            offset: (offset >= 0).then_some(offset),
                            failure: KafkaFailure::from_code(
                                code as i32,
                                format!("{} ({})", text, code_name(code)),
                            ),
                        });
                    }
                }
                Item::Event {
                    topic: None, text, ..
                } => {
                    // Client-wide (a broker connection dropped, say): librdkafka retries by
                    // itself; the caller logs it and its stall timeout ends an outage.
                    consumer.inner.context().note(text);
                }
            }
        }
        drop(batch);
        // Positions known so far, as if everything pending were applied: the loop stops once
        // they reach the end offsets, and the pending records are written below.
        let reached = |results: &[PartitionRestore], pending: &[Vec<ChangelogRecord>]| {
            results.iter().zip(targets).zip(pending).all(|((r, t), p)| {
                let next = p.last().map_or(-1, |rec| rec.0 + 1);
                r.stopped() || r.position(t.position).max(next) >= t.end_offset
            })
        };
        if pending_bytes >= APPLY_BYTES || reached(&results, &pending) {
            apply(targets, &mut pending, &mut results);
            pending_bytes = 0;
        }
    }
    apply(targets, &mut pending, &mut results);
    results
}

#[cfg(test)]
mod tests {
    //! Single calls against librdkafka's in-process mock cluster; the whole protocol is tested
    //! on the real broker from Python (tests/integration).
    use super::*;
    use rdkafka::mocking::MockCluster;
    use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
    use streamstate_core::store::InMemoryKeyValueStore;

    const TOPIC: &str = "changelog";

    fn cluster(partitions: i32) -> MockCluster<'static, rdkafka::producer::DefaultProducerContext> {
        let cluster = MockCluster::new(1).unwrap();
        cluster.create_topic(TOPIC, partitions, 1).unwrap();
        cluster
    }

    /// Produces `(partition, key, value)` records, in order, and waits for them.
    fn produce(bootstrap: &str, records: &[(i32, Option<&str>, Option<&str>)]) {
        let producer: BaseProducer = rdkafka::ClientConfig::new()
            .set("bootstrap.servers", bootstrap)
            .set("linger.ms", "0")
            .create()
            .unwrap();
        for (p, k, v) in records {
            let mut r: BaseRecord<'_, str, str> = BaseRecord::to(TOPIC).partition(*p);
            if let Some(k) = k {
                r = r.key(*k);
            }
            if let Some(v) = v {
                r = r.payload(*v);
            }
            producer.send(r).map_err(|(e, _)| e).unwrap();
        }
        producer.flush(Duration::from_secs(10)).unwrap();
    }

    fn settings(bootstrap: &str) -> Settings {
        vec![
            ("bootstrap.servers".into(), bootstrap.into()),
            ("auto.offset.reset".into(), "error".into()),
        ]
    }

    fn target(partition: i32, store: &Arc<InMemoryKeyValueStore>, end: i64) -> RestoreTarget {
        RestoreTarget {
            topic: TOPIC.into(),
            partition,
            store: store.clone(),
            end_offset: end,
            position: 0,
        }
    }

    /// Calls `restore` until every target is done (or a minute passes); sums the results.
    fn restore_all(f: &ChangelogFetcher, targets: &[RestoreTarget]) -> Vec<PartitionRestore> {
        let mut totals: Vec<PartitionRestore> = targets
            .iter()
            .map(|t| PartitionRestore::new(&t.topic, t.partition))
            .collect();
        let deadline = Instant::now() + Duration::from_secs(60);
        while Instant::now() < deadline {
            let (results, _) = f.restore(targets, Duration::from_millis(200), usize::MAX);
            for ((total, r), t) in totals.iter_mut().zip(results).zip(targets) {
                total.num_restored += r.num_restored;
                if r.last_restored_offset >= 0 {
                    total.last_restored_offset = r.last_restored_offset;
                }
                total.next_offset = total.next_offset.max(r.next_offset);
                total.eof_offset = total.eof_offset.max(r.eof_offset);
                total.null_key_offsets.extend(r.null_key_offsets);
                total.invalid_offset = total.invalid_offset.take().or(r.invalid_offset);
                let _ = t;
            }
            if totals
                .iter()
                .zip(targets)
                .all(|(r, t)| r.stopped() || r.position(t.position) >= t.end_offset)
            {
                return totals;
            }
        }
        panic!("restoration did not finish: {totals:?}");
    }

    #[test]
    fn restores_puts_deletes_and_skips_null_keys() {
        let c = cluster(1);
        let bootstrap = c.bootstrap_servers();
        produce(
            &bootstrap,
            &[
                (0, Some("a"), Some("1")),
                (0, Some("b"), Some("2")),
                (0, None, Some("x")),
                (0, Some("a"), None),
                (0, Some("c"), Some("3")),
            ],
        );
        let mut f = ChangelogFetcher::new(settings(&bootstrap), 1).unwrap();
        let (low, high) = f.watermarks(TOPIC, 0, Duration::from_secs(10)).unwrap();
        assert_eq!((low, high), (0, 5));
        f.assign(TOPIC, 0, OFFSET_BEGINNING).unwrap();
        let store = Arc::new(InMemoryKeyValueStore::new("s"));
        let r = &restore_all(&f, &[target(0, &store, high)])[0];
        assert_eq!(r.num_restored, 4);
        assert_eq!(r.last_restored_offset, 4);
        assert_eq!(r.null_key_offsets, vec![2]);
        assert_eq!(r.position(0), 5);
        assert_eq!(store.get(b"a").unwrap(), None);
        assert_eq!(store.get(b"b").unwrap(), Some(b"2".to_vec()));
        assert_eq!(store.get(b"c").unwrap(), Some(b"3".to_vec()));
    }

    #[test]
    fn stops_at_the_end_offset_and_resumes_from_an_offset() {
        let c = cluster(1);
        let bootstrap = c.bootstrap_servers();
        let recs: Vec<(i32, Option<&str>, Option<&str>)> =
            (0..10).map(|_| (0, Some("k"), Some("v"))).collect();
        produce(&bootstrap, &recs);
        let mut f = ChangelogFetcher::new(settings(&bootstrap), 1).unwrap();
        f.assign(TOPIC, 0, 3).unwrap();
        let store = Arc::new(InMemoryKeyValueStore::new("s"));
        let mut t = target(0, &store, 7);
        t.position = 3;
        let r = &restore_all(&f, &[t])[0];
        assert_eq!(r.num_restored, 4, "offsets 3..7");
        assert_eq!(r.last_restored_offset, 6);
    }

    #[test]
    fn partitions_restore_on_several_consumers() {
        let c = cluster(4);
        let bootstrap = c.bootstrap_servers();
        let recs: Vec<(i32, Option<&str>, Option<&str>)> = (0..400)
            .map(|i| (i % 4, Some(["a", "b", "c"][i as usize % 3]), Some("v")))
            .collect();
        produce(&bootstrap, &recs);
        let mut f = ChangelogFetcher::new(settings(&bootstrap), 2).unwrap();
        let stores: Vec<_> = (0..4)
            .map(|p| Arc::new(InMemoryKeyValueStore::new(format!("s{p}"))))
            .collect();
        let mut targets = Vec::new();
        for p in 0..4 {
            f.assign(TOPIC, p, OFFSET_BEGINNING).unwrap();
            targets.push(target(p, &stores[p as usize], 100));
        }
        assert_eq!(f.workers.len(), 2, "two consumers for four partitions");
        let results = restore_all(&f, &targets);
        for (p, r) in results.iter().enumerate() {
            assert_eq!((r.topic.as_str(), r.partition), (TOPIC, p as i32));
            assert_eq!(r.num_restored, 100);
            assert_eq!(r.last_restored_offset, 99);
        }
        f.unassign(TOPIC, 1).unwrap();
        assert_eq!(f.assignment().len(), 3);
    }

    #[test]
    fn one_call_takes_at_most_max_records() {
        let c = cluster(1);
        let bootstrap = c.bootstrap_servers();
        let recs: Vec<(i32, Option<&str>, Option<&str>)> =
            (0..100).map(|_| (0, Some("k"), Some("v"))).collect();
        produce(&bootstrap, &recs);
        let mut f = ChangelogFetcher::new(settings(&bootstrap), 1).unwrap();
        f.assign(TOPIC, 0, OFFSET_BEGINNING).unwrap();
        let store = Arc::new(InMemoryKeyValueStore::new("s"));
        let mut t = target(0, &store, 100);
        let mut calls = 0;
        while t.position < 100 {
            calls += 1;
            assert!(calls < 1000, "the restore did not finish");
            let (results, _) = f.restore(&[t.clone()], Duration::from_millis(200), 10);
            let r = &results[0];
            assert!(r.num_restored <= 10, "{r:?}");
            t.position = r.position(t.position);
        }
        assert!(calls >= 10, "100 records, at most 10 a call: {calls} calls");
    }

    #[test]
    fn a_position_past_the_log_is_an_invalid_offset() {
        let c = cluster(1);
        let bootstrap = c.bootstrap_servers();
        produce(&bootstrap, &[(0, Some("a"), Some("1"))]);
        let mut f = ChangelogFetcher::new(settings(&bootstrap), 1).unwrap();
        f.assign(TOPIC, 0, 50).unwrap();
        let store = Arc::new(InMemoryKeyValueStore::new("s"));
        let mut t = target(0, &store, 100);
        t.position = 50;
        let r = &restore_all(&f, &[t])[0];
        let (offset, reason) = r.invalid_offset.clone().expect("an invalid offset");
        assert_eq!(offset, 50, "{reason}");
        assert_eq!(r.num_restored, 0);
    }

    #[test]
    fn a_setting_librdkafka_refuses_is_named() {
        let mut s = settings("127.0.0.1:1");
        s.push(("no.such.setting".into(), "1".into()));
        let e = ChangelogFetcher::new(s, 1).err().expect("refused");
        assert_eq!(e.setting, "no.such.setting");
        let mut s = settings("127.0.0.1:1");
        s.push(("fetch.max.bytes".into(), "many".into()));
        let e = ChangelogFetcher::new(s, 1).err().expect("refused");
        assert_eq!(e.setting, "fetch.max.bytes", "{}", e.reason);
    }
}
