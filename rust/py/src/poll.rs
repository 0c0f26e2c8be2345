//! `split_by_partition`: one consumer poll, split into each partition's records and the
//! messages that carry an error, reading each message once.
//!
//! `Consumer.consume()` returns one list mixing every assigned partition's records with error
//! events. Grouping it in Python asks every message for `error()`, `topic()` and `partition()`;
//! here those go through `message.rs`'s method descriptors, one vectorcall each. What an error
//! means is not decided here: the error events go back as they are, and Python classifies them
//! (`streamstate.clients.kafka_errors`).

use std::collections::HashMap;

use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyString, PyTuple};

use crate::errors::guard;
use crate::message::MessageMethods;

/// The fields the split reads.
#[derive(Clone, Copy)]
enum Field {
    Error,
    Topic,
    Partition,
    Offset,
}

/// Reads the fields of one polled message: through the descriptors for a
/// `confluent_kafka.Message`, by method name for any other object with the same methods.
struct Polled<'py, 'a> {
    py: Python<'py>,
    item: &'a Bound<'py, PyAny>,
    methods: Option<&'a MessageMethods>,
}

impl<'py> Polled<'py, '_> {
    fn get(&self, field: Field) -> PyResult<Bound<'py, PyAny>> {
        let py = self.py;
        match self.methods {
            Some(m) => {
                let descriptor = match field {
                    Field::Error => &m.error,
                    Field::Topic => &m.topic,
                    Field::Partition => &m.partition,
                    Field::Offset => &m.offset,
                };
                m.call(py, descriptor, self.item)
            }
            None => {
                let name = match field {
                    Field::Error => intern!(py, "error"),
                    Field::Topic => intern!(py, "topic"),
                    Field::Partition => intern!(py, "partition"),
                    Field::Offset => intern!(py, "offset"),
                };
                self.item.call_method0(name)
            }
        }
    }
}

/// One partition's records, in poll order.
struct Run<'py> {
    topic: Bound<'py, PyString>,
    partition: i32,
    records: Vec<Bound<'py, PyAny>>,
}

/// Splits the messages one `consume()` call returned: `({(topic, partition): [message, ...]},
/// [(error, topic, partition, offset), ...])`. Records keep their poll order within each
/// partition, and partitions the order they first appear in; a record without a topic or a
/// partition is left out; the error events keep their poll order.
#[pyfunction]
fn split_by_partition<'py>(
    py: Python<'py>,
    messages: &Bound<'py, PyAny>,
) -> PyResult<(Bound<'py, PyDict>, Bound<'py, PyList>)> {
    guard(py, || {
        let message = MessageMethods::get(py)?;
        let mut runs: Vec<Run<'py>> = Vec::new();
        let mut index: HashMap<(String, i32), usize> = HashMap::new();
        // Records of one partition come in runs: the current run is checked first.
        let mut current: Option<usize> = None;
        let events = PyList::empty(py);
        for item in messages.try_iter()? {
            let item = item?;
            let methods = message
                .filter(|(cls, _)| item.is_exact_instance(cls))
                .map(|(_, m)| m);
            let polled = Polled {
                py,
                item: &item,
                methods,
            };
            let error = polled.get(Field::Error)?;
            if !error.is_none() {
                let (topic, partition) = (polled.get(Field::Topic)?, polled.get(Field::Partition)?);
                let offset = polled.get(Field::Offset)?;
                let event = PyTuple::new(py, [error, topic, partition, offset])?;
                events.append(event)?;
                continue;
            }
            let (topic, partition) = (polled.get(Field::Topic)?, polled.get(Field::Partition)?);
            if topic.is_none() || partition.is_none() {
                continue;
            }
            let topic = topic.cast_into::<PyString>()?;
            let partition: i32 = partition.extract()?;
            let name = topic.to_str()?;
            let run = match current {
                Some(i) if runs[i].partition == partition && runs[i].topic.to_str()? == name => i,
                _ => {
                    let i = *index
                        .entry((name.to_owned(), partition))
                        .or_insert_with(|| {
                            runs.push(Run {
                                topic: topic.clone(),
                                partition,
                                records: Vec::new(),
                            });
                            runs.len() - 1
                        });
                    current = Some(i);
                    i
                }
            };
            runs[run].records.push(item);
        }
        let by_partition = PyDict::new(py);
        for run in runs {
            by_partition.set_item((run.topic, run.partition), PyList::new(py, run.records)?)?;
        }
        Ok((by_partition, events))
    })
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(split_by_partition, m)?)?;
    Ok(())
}
