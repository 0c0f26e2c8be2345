//! `PartitionGroup`: chooses, across a task's partitions, the record to process next.
//!
//! Kafka Streams (2.3+) orders by the *head record's* timestamp, lowest first, and tracks stream
//! time as the highest timestamp handed out. Kafka leaves ties to a Java `PriorityQueue`; we
//! break them by the order the partitions were given in, so results are reproducible.
//!
//! The group holds its queues by index; callers map topic partitions to indices. A queue is
//! anything that implements [`GroupQueue`]: a [`RecordQueue`] the group owns, or a handle to a
//! queue held elsewhere (the Python binding's `RecordQueue` objects, reached with the GIL).

use crate::record_queue::{RecordQueue, Stamped};
use crate::timestamp::NOT_KNOWN;

/// What the group needs of one of its queues. `Cx` is what reaching the queue takes: nothing
/// (`()`) for a [`RecordQueue`] the group owns, a token such as the GIL for a queue that lives
/// elsewhere.
pub trait GroupQueue<Cx: Copy> {
    /// What a queued record carries.
    type Record;

    /// The head record's timestamp, `None` when the queue is empty.
    fn head_timestamp(&self, cx: Cx) -> Option<i64>;

    fn len(&self, cx: Cx) -> usize;

    fn partition_time(&self, cx: Cx) -> i64;

    fn set_partition_time(&mut self, cx: Cx, t: i64);

    fn poll(&mut self, cx: Cx) -> Option<Stamped<Self::Record>>;

    /// Empties the queue and forgets its partition time.
    fn clear(&mut self, cx: Cx);

    /// How many records from the head, at most `max`, have timestamps that all pass `take`
    /// (counting stops at the first that does not).
    fn count_while(&self, cx: Cx, max: usize, take: &dyn Fn(i64) -> bool) -> usize;
}

impl<R> GroupQueue<()> for RecordQueue<R> {
    type Record = R;

    fn head_timestamp(&self, (): ()) -> Option<i64> {
        self.head().map(|r| r.timestamp)
    }

    fn len(&self, (): ()) -> usize {
        RecordQueue::len(self)
    }

    fn partition_time(&self, (): ()) -> i64 {
        RecordQueue::partition_time(self)
    }

    fn set_partition_time(&mut self, (): (), t: i64) {
        RecordQueue::set_partition_time(self, t);
    }

    fn poll(&mut self, (): ()) -> Option<Stamped<R>> {
        RecordQueue::poll(self)
    }

    fn clear(&mut self, (): ()) {
        RecordQueue::clear(self);
    }

    fn count_while(&self, (): (), max: usize, take: &dyn Fn(i64) -> bool) -> usize {
        self.iter()
            .take(max)
            .take_while(|r| take(r.timestamp))
            .count()
    }
}

#[derive(Debug)]
pub struct PartitionGroup<Q> {
    queues: Vec<Q>,
    stream_time: i64,
}

impl<R> PartitionGroup<RecordQueue<R>> {
    /// A group of `n` empty queues.
    pub fn new(n: usize) -> Self {
        Self::from_queues((0..n).map(|_| RecordQueue::new()).collect())
    }
}

impl<Q> PartitionGroup<Q> {
    /// A group over `queues`, in the order that breaks ties.
    pub fn from_queues(queues: Vec<Q>) -> Self {
        PartitionGroup {
            queues,
            stream_time: NOT_KNOWN,
        }
    }

    pub fn queue(&self, index: usize) -> &Q {
        &self.queues[index]
    }

    pub fn queue_mut(&mut self, index: usize) -> &mut Q {
        &mut self.queues[index]
    }

    pub fn len(&self) -> usize {
        self.queues.len()
    }

    pub fn is_empty(&self) -> bool {
        self.queues.is_empty()
    }

    /// Index of the non-empty queue whose head has the lowest timestamp (first wins ties).
    pub fn next_index<Cx: Copy>(&self, cx: Cx) -> Option<usize>
    where
        Q: GroupQueue<Cx>,
    {
        let mut best: Option<(usize, i64)> = None;
        for (i, q) in self.queues.iter().enumerate() {
            if let Some(ts) = q.head_timestamp(cx) {
                if best.is_none_or(|(_, b)| ts < b) {
                    best = Some((i, ts));
                }
            }
        }
        best.map(|(i, _)| i)
    }

    /// Pops the next record in timestamp order, with the index of the queue it came from, and
    /// advances stream time.
    pub fn next_record<Cx: Copy>(&mut self, cx: Cx) -> Option<(usize, Stamped<Q::Record>)>
    where
        Q: GroupQueue<Cx>,
    {
        let index = self.next_index(cx)?;
        let record = self.queues[index].poll(cx)?;
        self.observe(record.timestamp);
        Some((index, record))
    }

    /// The run [`next_record`](Self::next_record) would hand out next: the index of its queue
    /// and how many records in a row (at least 1, at most `max.max(1)`) it would take from
    /// that queue before it would switch to another, the other queues' heads held fixed (no
    /// records added meanwhile). It takes queue `i` while its head is below every earlier
    /// queue's head (ties go to the earlier queue) and at or below every later one's.
    pub fn next_run<Cx: Copy>(&self, cx: Cx, max: usize) -> Option<(usize, usize)>
    where
        Q: GroupQueue<Cx>,
    {
        let index = self.next_index(cx)?;
        let mut below: Option<i64> = None;
        let mut at_most: Option<i64> = None;
        for (i, q) in self.queues.iter().enumerate() {
            let Some(ts) = q.head_timestamp(cx) else {
                continue;
            };
            if i < index {
                below = Some(below.map_or(ts, |b| b.min(ts)));
            } else if i > index {
                at_most = Some(at_most.map_or(ts, |a| a.min(ts)));
            }
        }
        let take = move |ts: i64| below.is_none_or(|b| ts < b) && at_most.is_none_or(|a| ts <= a);
        let n = self.queues[index].count_while(cx, max.max(1), &take);
        Some((index, n.max(1)))
    }

    /// Pops `n` records of queue `index` (what `n` calls of [`next_record`](Self::next_record)
    /// would pop when [`next_run`](Self::next_run) named that queue and at least `n`), advancing
    /// stream time past each; returns how many it popped.
    pub fn advance<Cx: Copy>(&mut self, cx: Cx, index: usize, n: usize) -> usize
    where
        Q: GroupQueue<Cx>,
    {
        let mut popped = 0;
        while popped < n {
            let Some(record) = self.queues[index].poll(cx) else {
                break;
            };
            self.observe(record.timestamp);
            popped += 1;
        }
        popped
    }

    fn observe(&mut self, timestamp: i64) {
        if timestamp > self.stream_time {
            self.stream_time = timestamp;
        }
    }

    /// The highest timestamp handed out by `next_record` (or set), `NOT_KNOWN` before any.
    pub fn stream_time(&self) -> i64 {
        self.stream_time
    }

    pub fn partition_time<Cx: Copy>(&self, cx: Cx, index: usize) -> i64
    where
        Q: GroupQueue<Cx>,
    {
        self.queues[index].partition_time(cx)
    }

    /// Sets a partition's time (from commit metadata); stream time never moves back for it.
    pub fn set_partition_time<Cx: Copy>(&mut self, cx: Cx, index: usize, t: i64)
    where
        Q: GroupQueue<Cx>,
    {
        self.queues[index].set_partition_time(cx, t);
        self.observe(t);
    }

    pub fn num_buffered<Cx: Copy>(&self, cx: Cx) -> usize
    where
        Q: GroupQueue<Cx>,
    {
        self.queues.iter().map(|q| q.len(cx)).sum()
    }

    pub fn all_partitions_buffered<Cx: Copy>(&self, cx: Cx) -> bool
    where
        Q: GroupQueue<Cx>,
    {
        self.queues.iter().all(|q| q.len(cx) > 0)
    }

    /// Empties every queue and resets stream time.
    pub fn clear<Cx: Copy>(&mut self, cx: Cx)
    where
        Q: GroupQueue<Cx>,
    {
        for q in &mut self.queues {
            q.clear(cx);
        }
        self.stream_time = NOT_KNOWN;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record_queue::Admission;

    fn add(g: &mut PartitionGroup<RecordQueue<i64>>, index: usize, offsets: &[i64]) {
        g.queue_mut(index)
            .add_with(
                offsets.to_vec(),
                |o, _| {
                    Ok::<_, ()>(Admission::Stamped {
                        offset: o,
                        timestamp: o,
                        record: o,
                    })
                },
                |_| {},
            )
            .unwrap();
    }

    fn next(g: &mut PartitionGroup<RecordQueue<i64>>) -> (usize, i64) {
        let (i, r) = g.next_record(()).unwrap();
        (i, r.timestamp)
    }

    #[test]
    fn time_tracking() {
        let mut g = PartitionGroup::new(2);
        add(&mut g, 0, &[1, 3, 5]);
        add(&mut g, 1, &[2, 4, 6]);
        assert_eq!(g.num_buffered(()), 6);
        assert_eq!(g.stream_time(), NOT_KNOWN);
        assert_eq!(next(&mut g), (0, 1));
        assert_eq!(g.stream_time(), 1);
        assert_eq!(next(&mut g), (1, 2));
        add(&mut g, 0, &[2, 4]);
        assert_eq!(g.num_buffered(()), 6);
        let order: Vec<(usize, i64)> = (0..6).map(|_| next(&mut g)).collect();
        assert_eq!(order, vec![(0, 3), (1, 4), (0, 5), (0, 2), (0, 4), (1, 6)]);
        assert_eq!(g.stream_time(), 6);
        assert!(g.next_record(()).is_none());
    }

    #[test]
    fn chooses_by_head_timestamp() {
        let mut g = PartitionGroup::new(2);
        add(&mut g, 0, &[1, 5, 3]);
        assert_eq!(next(&mut g).1, 1);
        assert_eq!(next(&mut g).1, 5);
        add(&mut g, 1, &[2, 4, 6]);
        assert_eq!(next(&mut g), (1, 2));
        assert_eq!(next(&mut g), (0, 3));
    }

    #[test]
    fn ties_go_to_the_earlier_partition() {
        let mut g = PartitionGroup::new(3);
        add(&mut g, 2, &[7]);
        add(&mut g, 1, &[7]);
        assert_eq!(next(&mut g).0, 1);
        assert_eq!(next(&mut g).0, 2);
    }

    /// A small deterministic generator (no dependency for a test).
    struct Lcg(u64);

    impl Lcg {
        fn below(&mut self, n: u64) -> u64 {
            self.0 = self
                .0
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            (self.0 >> 33) % n
        }
    }

    fn random_group(rng: &mut Lcg, queues: usize) -> PartitionGroup<RecordQueue<i64>> {
        let mut g = PartitionGroup::new(queues);
        let mut offset = 0;
        for q in 0..queues {
            let len = rng.below(12);
            let mut records = Vec::new();
            for _ in 0..len {
                // Few distinct timestamps: many ties across queues, and out-of-order ones.
                records.push((offset, rng.below(4) as i64));
                offset += 1;
            }
            g.queue_mut(q)
                .add_with(
                    records,
                    |(o, t), _| {
                        Ok::<_, ()>(Admission::Stamped {
                            offset: o,
                            timestamp: t,
                            record: o,
                        })
                    },
                    |_| {},
                )
                .unwrap();
        }
        g
    }

    #[test]
    fn runs_are_the_one_at_a_time_order() {
        let mut rng = Lcg(42);
        for round in 0..2000 {
            let queues = 1 + (round % 4);
            // The same content twice, from one seed.
            let seed = rng.0;
            let mut one = random_group(&mut Lcg(seed), queues);
            let mut runs = random_group(&mut Lcg(seed), queues);
            rng.below(2);
            let mut expected = Vec::new();
            let mut times = Vec::new();
            while let Some((i, r)) = one.next_record(()) {
                expected.push((i, r.record));
                times.push(one.stream_time());
            }
            let mut got = Vec::new();
            let mut got_times = Vec::new();
            let max = 1 + rng.below(6) as usize;
            while let Some((i, n)) = runs.next_run((), max) {
                assert!(n >= 1 && n <= max);
                let offsets: Vec<i64> = runs.queue(i).iter().take(n).map(|r| r.record).collect();
                assert_eq!(offsets.len(), n);
                for o in offsets {
                    got.push((i, o));
                    // Stream time after each record, as the loop would see it.
                    assert_eq!(runs.advance((), i, 1), 1);
                    got_times.push(runs.stream_time());
                }
            }
            assert_eq!(got, expected, "round {round}");
            assert_eq!(got_times, times, "round {round}");
        }
    }

    #[test]
    fn a_run_ends_where_the_loop_switches() {
        let mut g = PartitionGroup::new(3);
        add(&mut g, 0, &[5, 9]);
        add(&mut g, 1, &[1, 2, 5, 5, 6]);
        add(&mut g, 2, &[5]);
        // Queue 1 until its head reaches queue 0's 5 (a tie goes to queue 0).
        assert_eq!(g.next_run((), 100), Some((1, 2)));
        assert_eq!(g.next_run((), 1), Some((1, 1)));
        assert_eq!(g.advance((), 1, 2), 2);
        assert_eq!(g.stream_time(), 2);
        assert_eq!(g.next_run((), 100), Some((0, 1)));
        assert_eq!(g.advance((), 0, 1), 1);
        // Queue 1's 5s tie with queue 2's 5: queue 1 comes first, up to its 6.
        assert_eq!(g.next_run((), 100), Some((1, 2)));
        assert_eq!(g.advance((), 1, 2), 2);
        assert_eq!(g.next_run((), 100), Some((2, 1)));
        assert_eq!(g.advance((), 2, 5), 1);
        assert_eq!(g.next_run((), 100), Some((1, 1)));
        assert_eq!(g.advance((), 1, 1), 1);
        assert_eq!(g.next_run((), 100), Some((0, 1)));
        assert_eq!(g.advance((), 0, 1), 1);
        assert_eq!(g.stream_time(), 9);
        assert_eq!(g.next_run((), 100), None);
    }

    #[test]
    fn set_partition_time_raises_stream_time_only() {
        let mut g: PartitionGroup<RecordQueue<i64>> = PartitionGroup::new(2);
        g.set_partition_time((), 0, 100);
        assert_eq!(g.stream_time(), 100);
        g.set_partition_time((), 1, 50);
        assert_eq!(g.queue(1).partition_time(), 50);
        assert_eq!(g.stream_time(), 100);
        assert!(!g.all_partitions_buffered(()));
        g.clear(());
        assert_eq!(g.stream_time(), NOT_KNOWN);
    }
}
