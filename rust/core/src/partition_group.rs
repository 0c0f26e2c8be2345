//! `PartitionGroup`: chooses, across a task's partitions, the record to process next.
//!
//! Kafka Streams (2.3+) orders by the *head record's* timestamp, lowest first, and tracks stream
//! time as the highest timestamp handed out. Kafka leaves ties to a Java `PriorityQueue`; we
//! break them by the order the partitions were given in, so results are reproducible.
//!
//! The group owns its queues by index; callers map topic partitions to indices.

use crate::record_queue::{RecordQueue, Stamped};
use crate::timestamp::NOT_KNOWN;

#[derive(Debug)]
pub struct PartitionGroup<R> {
    queues: Vec<RecordQueue<R>>,
    stream_time: i64,
}

impl<R> PartitionGroup<R> {
    /// A group of `n` empty queues.
    pub fn new(n: usize) -> Self {
        PartitionGroup {
            queues: (0..n).map(|_| RecordQueue::new()).collect(),
            stream_time: NOT_KNOWN,
        }
    }

    pub fn queue(&self, index: usize) -> &RecordQueue<R> {
        &self.queues[index]
    }

    pub fn queue_mut(&mut self, index: usize) -> &mut RecordQueue<R> {
        &mut self.queues[index]
    }

    pub fn len(&self) -> usize {
        self.queues.len()
    }

    pub fn is_empty(&self) -> bool {
        self.queues.is_empty()
    }

    /// Index of the non-empty queue whose head has the lowest timestamp (first wins ties).
    pub fn next_index<'a, I>(heads: I) -> Option<usize>
    where
        I: IntoIterator<Item = Option<i64>> + 'a,
    {
        let mut best: Option<(usize, i64)> = None;
        for (i, head) in heads.into_iter().enumerate() {
            if let Some(ts) = head {
                if best.is_none_or(|(_, b)| ts < b) {
                    best = Some((i, ts));
                }
            }
        }
        best.map(|(i, _)| i)
    }

    /// Pops the next record in timestamp order, with the index of the queue it came from.
    pub fn next_record(&mut self) -> Option<(usize, Stamped<R>)> {
        let index = Self::next_index(self.queues.iter().map(|q| q.head().map(|r| r.timestamp)))?;
        let record = self.queues[index].poll()?;
        self.observe(record.timestamp);
        Some((index, record))
    }

    /// Advances stream time for a record handed out by `next_record` (or by a caller that
    /// polls queues it holds elsewhere).
    pub fn observe(&mut self, timestamp: i64) {
        if timestamp > self.stream_time {
            self.stream_time = timestamp;
        }
    }

    pub fn stream_time(&self) -> i64 {
        self.stream_time
    }

    /// Sets a partition's time (from commit metadata); stream time never moves back for it.
    pub fn set_partition_time(&mut self, index: usize, t: i64) {
        self.queues[index].set_partition_time(t);
        self.observe(t);
    }

    pub fn num_buffered(&self) -> usize {
        self.queues.iter().map(RecordQueue::len).sum()
    }

    pub fn all_partitions_buffered(&self) -> bool {
        self.queues.iter().all(|q| !q.is_empty())
    }

    pub fn clear(&mut self) {
        for q in &mut self.queues {
            q.clear();
        }
        self.stream_time = NOT_KNOWN;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record_queue::Admission;

    fn add(g: &mut PartitionGroup<i64>, index: usize, offsets: &[i64]) {
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

    fn next(g: &mut PartitionGroup<i64>) -> (usize, i64) {
        let (i, r) = g.next_record().unwrap();
        (i, r.timestamp)
    }

    #[test]
    fn time_tracking() {
        let mut g = PartitionGroup::new(2);
        add(&mut g, 0, &[1, 3, 5]);
        add(&mut g, 1, &[2, 4, 6]);
        assert_eq!(g.num_buffered(), 6);
        assert_eq!(g.stream_time(), NOT_KNOWN);
        assert_eq!(next(&mut g), (0, 1));
        assert_eq!(g.stream_time(), 1);
        assert_eq!(next(&mut g), (1, 2));
        add(&mut g, 0, &[2, 4]);
        assert_eq!(g.num_buffered(), 6);
        let order: Vec<(usize, i64)> = (0..6).map(|_| next(&mut g)).collect();
        assert_eq!(order, vec![(0, 3), (1, 4), (0, 5), (0, 2), (0, 4), (1, 6)]);
        assert_eq!(g.stream_time(), 6);
        assert!(g.next_record().is_none());
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
        let mut g: PartitionGroup<i64> = PartitionGroup::new(2);
        g.set_partition_time(0, 100);
        assert_eq!(g.stream_time(), 100);
        g.set_partition_time(1, 50);
        assert_eq!(g.queue(1).partition_time(), 50);
        assert_eq!(g.stream_time(), 100);
        assert!(!g.all_partitions_buffered());
        g.clear();
        assert_eq!(g.stream_time(), NOT_KNOWN);
    }
}
