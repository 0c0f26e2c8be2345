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
