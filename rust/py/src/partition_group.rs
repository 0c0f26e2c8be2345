//! `PartitionGroup` for Python: the core's group over the task's Python `RecordQueue` objects.
//!
//! The queues stay the objects the caller passed in (`queue(tp)` hands back the same object,
//! and records added to it directly are seen by the group); the group reaches them with the
//! GIL. Topic partitions are mapped to the core's indices through a dict.

use pyo3::exceptions::{PyIndexError, PyKeyError, PyTypeError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyString};
use streamstate_core::partition_group::{GroupQueue, PartitionGroup};
use streamstate_core::record_queue::Stamped;

use crate::queue::{stamped_record, Held, PyRecordQueue};
use crate::records::StampedRecord;

/// One of the group's queues, with what a `StampedRecord` of it needs.
struct Member {
    queue: Py<PyRecordQueue>,
    topic: Py<PyString>,
    partition: i32,
}

impl<'py> GroupQueue<Python<'py>> for Member {
    type Record = Held;

    fn head_timestamp(&self, py: Python<'py>) -> Option<i64> {
        self.queue
            .bind(py)
            .borrow()
            .queue
            .head()
            .map(|r| r.timestamp)
    }

    fn len(&self, py: Python<'py>) -> usize {
        self.queue.bind(py).borrow().queue.len()
    }

    fn partition_time(&self, py: Python<'py>) -> i64 {
        self.queue.bind(py).borrow().queue.partition_time()
    }

    fn set_partition_time(&mut self, py: Python<'py>, t: i64) {
        self.queue.bind(py).borrow_mut().queue.set_partition_time(t);
    }

    fn poll(&mut self, py: Python<'py>) -> Option<Stamped<Held>> {
        self.queue.bind(py).borrow_mut().queue.poll()
    }

    fn clear(&mut self, py: Python<'py>) {
        self.queue.bind(py).borrow_mut().queue.clear();
    }

    fn count_while(&self, py: Python<'py>, max: usize, take: &dyn Fn(i64) -> bool) -> usize {
        self.queue
            .bind(py)
            .borrow()
            .queue
            .iter()
            .take(max)
            .take_while(|r| take(r.timestamp))
            .count()
    }
}

/// Kafka Streams' PartitionGroup over Python-held `RecordQueue`s (see `streamstate.PartitionGroup`).
#[pyclass(module = "streamstate._core", name = "PartitionGroup")]
pub struct PyPartitionGroup {
    partitions: Vec<Py<PyAny>>,
    index: Py<PyDict>,
    group: PartitionGroup<Member>,
}

impl PyPartitionGroup {
    fn lookup(&self, py: Python<'_>, tp: &Bound<'_, PyAny>) -> PyResult<usize> {
        match self.index.bind(py).get_item(tp)? {
            Some(i) => i.extract(),
            None => Err(PyKeyError::new_err(format!(
                "partition {} not found in this PartitionGroup",
                describe_partition(tp)
            ))),
        }
    }

    fn member(&self, index: usize) -> PyResult<&Member> {
        if index >= self.group.len() {
            return Err(PyIndexError::new_err(format!(
                "partition index {index} out of range (the group has {})",
                self.group.len()
            )));
        }
        Ok(self.group.queue(index))
    }

    /// The next record as a `StampedRecord`, with the index of its partition.
    fn next(&mut self, py: Python<'_>) -> PyResult<Option<(Py<StampedRecord>, usize)>> {
        let Some((i, r)) = self.group.next_record(py) else {
            return Ok(None);
        };
        let m = self.group.queue(i);
        Ok(Some((stamped_record(py, &m.topic, m.partition, &r)?, i)))
    }
}

/// `topic-partition`, as Kafka prints a TopicPartition, for any object with those attributes.
fn describe_partition(tp: &Bound<'_, PyAny>) -> String {
    let topic = tp.getattr("topic").and_then(|t| t.extract::<String>());
    let partition = tp.getattr("partition").and_then(|p| p.extract::<i64>());
    match (topic, partition) {
        (Ok(t), Ok(p)) => format!("{t}-{p}"),
        _ => tp
            .str()
            .map(|s| s.to_string())
            .unwrap_or_else(|_| "?".to_owned()),
    }
}

#[pymethods]
impl PyPartitionGroup {
    #[new]
    fn new(py: Python<'_>, queues: &Bound<'_, PyAny>) -> PyResult<Self> {
        let index = PyDict::new(py);
        let mut partitions = Vec::new();
        let mut members = Vec::new();
        let items = queues.call_method0("items")?;
        for (i, item) in items.try_iter()?.enumerate() {
            let (tp, q): (Bound<'_, PyAny>, Bound<'_, PyAny>) = item?.extract()?;
            let q = q.cast::<PyRecordQueue>().map_err(|_| {
                PyTypeError::new_err(format!("the queue for {tp} is not a RecordQueue"))
            })?;
            index.set_item(&tp, i)?;
            partitions.push(tp.unbind());
            let (topic, partition) = {
                let q = q.borrow();
                (q.topic_py.clone_ref(py), q.partition)
            };
            members.push(Member {
                queue: q.clone().unbind(),
                topic,
                partition,
            });
        }
        Ok(PyPartitionGroup {
            partitions,
            index: index.unbind(),
            group: PartitionGroup::from_queues(members),
        })
    }

    /// Adds a batch to the queue of `tp`; returns that queue's size.
    fn add_raw_records(
        &self,
        py: Python<'_>,
        tp: &Bound<'_, PyAny>,
        records: &Bound<'_, PyAny>,
    ) -> PyResult<usize> {
        let i = self.lookup(py, tp)?;
        self.group
            .queue(i)
            .queue
            .bind(py)
            .borrow_mut()
            .add_raw_records(py, records)
    }

    /// The record with the lowest head timestamp across the queues, with its queue.
    fn next_record(
        &mut self,
        py: Python<'_>,
    ) -> PyResult<Option<(Py<StampedRecord>, Py<PyRecordQueue>)>> {
        Ok(self
            .next(py)?
            .map(|(r, i)| (r, self.group.queue(i).queue.clone_ref(py))))
    }

    /// Like `next_record`, with the index of the record's partition in `partitions()` instead
    /// of its queue.
    fn next_record_indexed(
        &mut self,
        py: Python<'_>,
    ) -> PyResult<Option<(Py<StampedRecord>, usize)>> {
        self.next(py)
    }

    /// The run `next_record` would hand out next, as `(index, n)`: the index of its
    /// partition in `partitions()` and how many records in a row (1 to `max(max_records, 1)`)
    /// it would take from that queue before switching to another, if no records are added
    /// meanwhile; `None` when every queue is empty. Changes nothing.
    fn next_run(&self, py: Python<'_>, max_records: usize) -> Option<(usize, usize)> {
        self.group.next_run(py, max_records)
    }

    /// The first `n` records of the queue at `index` (fewer when it holds fewer), as
    /// `StampedRecord`s, without removing them.
    fn peek<'py>(&self, py: Python<'py>, index: usize, n: usize) -> PyResult<Bound<'py, PyList>> {
        let m = self.member(index)?;
        let q = m.queue.bind(py).borrow();
        let records = q
            .queue
            .iter()
            .take(n)
            .map(|r| stamped_record(py, &m.topic, m.partition, r))
            .collect::<PyResult<Vec<_>>>()?;
        PyList::new(py, records)
    }

    /// Removes the first `n` records of the queue at `index`, advancing stream time past each
    /// (what `n` calls of `next_record` do after `next_run` named that queue for `n` or
    /// more); returns how many it removed.
    fn advance(&mut self, py: Python<'_>, index: usize, n: usize) -> PyResult<usize> {
        self.member(index)?;
        Ok(self.group.advance(py, index, n))
    }

    /// Highest timestamp returned by `next_record`; `NOT_KNOWN` before any.
    #[getter]
    fn stream_time(&self) -> i64 {
        self.group.stream_time()
    }

    fn num_buffered(&self, py: Python<'_>) -> usize {
        self.group.num_buffered(py)
    }

    fn all_partitions_buffered(&self, py: Python<'_>) -> bool {
        self.group.all_partitions_buffered(py)
    }

    fn partition_time(&self, py: Python<'_>, tp: &Bound<'_, PyAny>) -> PyResult<i64> {
        let i = self.lookup(py, tp)?;
        Ok(self.group.partition_time(py, i))
    }

    /// Sets a partition's time; stream time becomes at least `t`.
    fn set_partition_time(
        &mut self,
        py: Python<'_>,
        tp: &Bound<'_, PyAny>,
        t: i64,
    ) -> PyResult<()> {
        let i = self.lookup(py, tp)?;
        self.group.set_partition_time(py, i, t);
        Ok(())
    }

    /// The queue of `tp`.
    fn queue(&self, py: Python<'_>, tp: &Bound<'_, PyAny>) -> PyResult<Py<PyRecordQueue>> {
        let i = self.lookup(py, tp)?;
        Ok(self.group.queue(i).queue.clone_ref(py))
    }

    /// The partitions, in the order given.
    fn partitions<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        PyList::new(py, self.partitions.iter().map(|p| p.clone_ref(py)))
    }

    /// Empties every queue and resets stream time.
    fn clear(&mut self, py: Python<'_>) {
        self.group.clear(py);
    }

    fn __len__(&self) -> usize {
        self.group.len()
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyPartitionGroup>()?;
    Ok(())
}
