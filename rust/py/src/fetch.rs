//! `ChangelogFetcher` for Python: the core fetcher behind the face of a confluent-kafka consumer.
//!
//! The restore reader calls it as it calls its confluent-kafka restore consumer
//! (`get_watermark_offsets`, `incremental_assign`, `position`, `pause`, ...), with the same
//! `TopicPartition` objects and the same `KafkaException`s, and calls [`ChangelogFetcher::restore`]
//! where it would poll and apply. Every call that waits on Kafka releases the GIL.

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use pyo3::exceptions::{PyRuntimeError, PyTypeError, PyValueError};
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyBool, PyDict, PyFloat, PyInt, PyString, PyType};
use streamstate_core::restore::Origin;
use streamstate_fetch::{
    ChangelogFetcher as CoreFetcher, KafkaFailure, PartitionRestore as CoreRestore, RestoreTarget,
    Settings, UnsupportedSetting,
};

use crate::errors::{guard, IntoPyResult};
use crate::stores::{shared_store, warn_null_keys};

static KAFKA_ERROR: PyOnceLock<Py<PyType>> = PyOnceLock::new();
static KAFKA_EXCEPTION: PyOnceLock<Py<PyType>> = PyOnceLock::new();
static TOPIC_PARTITION: PyOnceLock<Py<PyType>> = PyOnceLock::new();

/// `confluent_kafka.KafkaError(code, text, fatal=..., retriable=...)`.
fn kafka_error<'py>(py: Python<'py>, f: &KafkaFailure) -> PyResult<Bound<'py, PyAny>> {
    let cls = KAFKA_ERROR.import(py, "confluent_kafka", "KafkaError")?;
    let kwargs = PyDict::new(py);
    kwargs.set_item("fatal", f.fatal)?;
    kwargs.set_item("retriable", f.retriable)?;
    cls.call((f.code, f.text.as_str()), Some(&kwargs))
}

/// The `confluent_kafka.KafkaException` confluent-kafka would raise for the same failure.
fn kafka_exception(py: Python<'_>, f: &KafkaFailure) -> PyErr {
    let build = || -> PyResult<PyErr> {
        let cls = KAFKA_EXCEPTION.import(py, "confluent_kafka", "KafkaException")?;
        Ok(PyErr::from_value(cls.call1((kafka_error(py, f)?,))?))
    };
    build().unwrap_or_else(|e| e)
}

trait KafkaResultExt<T> {
    fn kafka_err(self, py: Python<'_>) -> PyResult<T>;
}

impl<T> KafkaResultExt<T> for Result<T, KafkaFailure> {
    fn kafka_err(self, py: Python<'_>) -> PyResult<T> {
        self.map_err(|f| kafka_exception(py, &f))
    }
}

/// A setting's value as librdkafka takes it: text; `True`/`False` as `true`/`false`.
fn setting_value(key: &str, value: &Bound<'_, PyAny>) -> Result<String, UnsupportedSetting> {
    if let Ok(b) = value.cast::<PyBool>() {
        return Ok(if b.is_true() { "true" } else { "false" }.to_owned());
    }
    if value.is_instance_of::<PyString>()
        || value.is_instance_of::<PyInt>()
        || value.is_instance_of::<PyFloat>()
    {
        if let Ok(text) = value.str() {
            return Ok(text.to_string());
        }
    }
    Err(UnsupportedSetting {
        setting: key.to_owned(),
        reason: format!(
            "a {} is a Python object (a callback or a logger) that only confluent-kafka can use",
            value
                .get_type()
                .name()
                .map(|n| n.to_string())
                .unwrap_or_else(|_| "?".into())
        ),
    })
}

fn settings(config: &Bound<'_, PyDict>) -> PyResult<Result<Settings, UnsupportedSetting>> {
    let mut out = Vec::with_capacity(config.len());
    for (k, v) in config.iter() {
        let key: String = k.extract()?;
        match setting_value(&key, &v) {
            Ok(text) => out.push((key, text)),
            Err(e) => return Ok(Err(e)),
        }
    }
    Ok(Ok(out))
}

fn default_parallelism() -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
}

/// Reads changelog partitions with librdkafka and applies them to their stores in Rust.
#[pyclass(frozen, module = "streamstate._core")]
pub struct ChangelogFetcher {
    /// `None` once closed.
    inner: Mutex<Option<CoreFetcher>>,
    /// Client-wide events of the last `restore` calls, until `take_events` takes them.
    events: Mutex<Vec<String>>,
}

impl ChangelogFetcher {
    fn lock(&self) -> MutexGuard<'_, Option<CoreFetcher>> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn with<T>(&self, f: impl FnOnce(&mut CoreFetcher) -> PyResult<T>) -> PyResult<T> {
        match self.lock().as_mut() {
            Some(fetcher) => f(fetcher),
            // RuntimeError, as confluent-kafka's closed consumer raises.
            None => Err(PyRuntimeError::new_err("the changelog fetcher is closed")),
        }
    }
}

/// `(topic, partition, offset)` of a `TopicPartition`.
fn topic_partition(tp: &Bound<'_, PyAny>) -> PyResult<(String, i32, i64)> {
    let py = tp.py();
    Ok((
        tp.getattr(intern!(py, "topic"))?.extract()?,
        tp.getattr(intern!(py, "partition"))?.extract()?,
        tp.getattr(intern!(py, "offset"))?.extract()?,
    ))
}

fn new_topic_partition<'py>(
    py: Python<'py>,
    topic: &str,
    partition: i32,
    offset: i64,
) -> PyResult<Bound<'py, PyAny>> {
    TOPIC_PARTITION
        .import(py, "confluent_kafka", "TopicPartition")?
        .call1((topic, partition, offset))
}

/// confluent-kafka's `OFFSET_INVALID`: no position known.
const OFFSET_INVALID: i64 = -1001;

#[pymethods]
impl ChangelogFetcher {
    /// A fetcher reading with `config` (a confluent-kafka consumer configuration) on up to
    /// `parallelism` librdkafka consumers (default: the number of cores). Raises `ValueError`
    /// naming a setting librdkafka refuses; `rejected_setting` tells without raising.
    #[new]
    #[pyo3(signature = (config, parallelism = None))]
    fn new(
        py: Python<'_>,
        config: &Bound<'_, PyDict>,
        parallelism: Option<usize>,
    ) -> PyResult<Self> {
        guard(py, || {
            let settings = settings(config)?.map_err(|e| PyValueError::new_err(e.to_string()))?;
            let parallelism = parallelism.unwrap_or_else(default_parallelism);
            if parallelism == 0 {
                return Err(PyValueError::new_err("parallelism must be at least 1"));
            }
            let fetcher = py
                .detach(move || CoreFetcher::new(settings, parallelism))
                .map_err(|e| PyValueError::new_err(e.to_string()))?;
            Ok(ChangelogFetcher {
                inner: Mutex::new(Some(fetcher)),
                events: Mutex::new(Vec::new()),
            })
        })
    }

    /// `(setting, reason)` for the first setting of `config` this fetcher cannot honour (a
    /// Python callback, a property or value librdkafka as built here refuses), else `None`.
    #[staticmethod]
    fn rejected_setting(
        py: Python<'_>,
        config: &Bound<'_, PyDict>,
    ) -> PyResult<Option<(String, String)>> {
        guard(py, || {
            let settings = match settings(config)? {
                Ok(s) => s,
                Err(e) => return Ok(Some((e.setting, e.reason))),
            };
            Ok(py
                .detach(move || CoreFetcher::new(settings, 1).err())
                .map(|e| (e.setting, e.reason)))
        })
    }

    /// The version of the librdkafka this fetcher is built with (its own copy, linked into the
    /// extension; confluent-kafka brings another, and each uses only its own).
    #[staticmethod]
    fn librdkafka_version() -> String {
        streamstate_fetch::librdkafka_version()
    }

    /// How many librdkafka consumers (and threads) partitions are spread over, at most.
    #[getter]
    fn parallelism(&self, py: Python<'_>) -> PyResult<usize> {
        guard(py, || self.with(|f| Ok(f.parallelism())))
    }

    /// `(low, high)` offsets of `partition`, as `Consumer.get_watermark_offsets` with
    /// `cached=False`: the high one is the last stable offset under `read_committed`.
    #[pyo3(signature = (partition, timeout = None, cached = false))]
    fn get_watermark_offsets(
        &self,
        py: Python<'_>,
        partition: &Bound<'_, PyAny>,
        timeout: Option<f64>,
        cached: bool,
    ) -> PyResult<(i64, i64)> {
        let _ = cached; // always asks the broker, as the restore reader wants
        let (topic, p, _) = topic_partition(partition)?;
        let timeout = Duration::from_secs_f64(timeout.unwrap_or(30.0).max(0.0));
        guard(py, || {
            self.with(|f| {
                let f = &*f;
                py.detach(|| f.watermarks(&topic, p, timeout)).kafka_err(py)
            })
        })
    }

    /// Assigns each partition at its `offset` (an offset or `OFFSET_BEGINNING`).
    fn incremental_assign(&self, py: Python<'_>, partitions: &Bound<'_, PyAny>) -> PyResult<()> {
        let parts: Vec<(String, i32, i64)> = partitions
            .try_iter()?
            .map(|tp| topic_partition(&tp?))
            .collect::<PyResult<_>>()?;
        guard(py, || {
            self.with(|f| {
                py.detach(|| {
                    for (t, p, o) in &parts {
                        f.assign(t, *p, *o)?;
                    }
                    Ok(())
                })
                .kafka_err(py)
            })
        })
    }

    /// Unassigns each partition (unknown ones are ignored).
    fn incremental_unassign(&self, py: Python<'_>, partitions: &Bound<'_, PyAny>) -> PyResult<()> {
        let parts = tp_list(partitions)?;
        guard(py, || {
            self.with(|f| {
                py.detach(|| {
                    for (t, p) in &parts {
                        f.unassign(t, *p)?;
                    }
                    Ok(())
                })
                .kafka_err(py)
            })
        })
    }

    /// Stops fetching the partitions, keeping their positions.
    fn pause(&self, py: Python<'_>, partitions: &Bound<'_, PyAny>) -> PyResult<()> {
        let parts = tp_list(partitions)?;
        guard(py, || {
            self.with(|f| {
                for (t, p) in &parts {
                    f.pause(t, *p).kafka_err(py)?;
                }
                Ok(())
            })
        })
    }

    /// Fetches paused partitions again.
    fn resume(&self, py: Python<'_>, partitions: &Bound<'_, PyAny>) -> PyResult<()> {
        let parts = tp_list(partitions)?;
        guard(py, || {
            self.with(|f| {
                for (t, p) in &parts {
                    f.resume(t, *p).kafka_err(py)?;
                }
                Ok(())
            })
        })
    }

    /// The assigned partitions as `TopicPartition`s, sorted.
    fn assignment<'py>(&self, py: Python<'py>) -> PyResult<Vec<Bound<'py, PyAny>>> {
        guard(py, || {
            self.with(|f| {
                let mut parts = f.assignment();
                parts.sort();
                parts
                    .iter()
                    .map(|(t, p)| {
                        TOPIC_PARTITION
                            .import(py, "confluent_kafka", "TopicPartition")?
                            .call1((t.as_str(), *p))
                    })
                    .collect()
            })
        })
    }

    /// librdkafka's positions of `partitions`, as `Consumer.position` gives them
    /// (`OFFSET_INVALID` where none is known yet).
    fn position<'py>(
        &self,
        py: Python<'py>,
        partitions: &Bound<'py, PyAny>,
    ) -> PyResult<Vec<Bound<'py, PyAny>>> {
        let parts = tp_list(partitions)?;
        guard(py, || {
            self.with(|f| {
                parts
                    .iter()
                    .map(|(t, p)| {
                        let offset = f.position(t, *p).kafka_err(py)?.unwrap_or(OFFSET_INVALID);
                        new_topic_partition(py, t, *p, offset)
                    })
                    .collect()
            })
        })
    }

    /// Never a member of a group: partitions are assigned manually (`Consumer.memberid`).
    fn memberid(&self) -> Option<String> {
        None
    }

    /// Reads and applies the `targets`, each `(topic, partition, store, end_offset,
    /// position)`, for up to `timeout` seconds or until each is done (reached its end offset,
    /// failed, or fell out of the log), without the GIL; a consumer stops early after
    /// `max_records` messages. Returns one `PartitionRestore` per target, in order. Records with
    /// a null key are logged and skipped; a failed write batch raises `ProcessorStateError`.
    #[pyo3(signature = (targets, timeout, max_records = 1_000_000))]
    fn restore(
        &self,
        py: Python<'_>,
        targets: &Bound<'_, PyAny>,
        timeout: f64,
        max_records: usize,
    ) -> PyResult<Vec<PartitionRestore>> {
        let mut parsed = Vec::new();
        for item in targets.try_iter()? {
            let (topic, partition, store, end_offset, position): (
                String,
                i32,
                Bound<'_, PyAny>,
                i64,
                i64,
            ) = item?.extract().map_err(|_| {
                PyTypeError::new_err(
                    "restore takes (topic, partition, store, end_offset, position) tuples",
                )
            })?;
            parsed.push(RestoreTarget {
                topic,
                partition,
                store: shared_store(&store)?,
                end_offset,
                position,
            });
        }
        let wait = Duration::from_secs_f64(timeout.max(0.0));
        guard(py, || {
            self.with(|f| {
                let f = &*f;
                let targets = Arc::new(parsed);
                let (results, events) = py.detach(|| f.restore(&targets, wait, max_records));
                self.keep_events(events);
                let mut out = Vec::with_capacity(results.len());
                for (target, r) in targets.iter().zip(results) {
                    if !r.null_key_offsets.is_empty() {
                        let origin = Origin {
                            topic: Some(r.topic.clone()),
                            partition: Some(r.partition),
                            span: None,
                        };
                        warn_null_keys(py, target.store.name(), &origin, &r.null_key_offsets);
                    }
                    if let Some(e) = r.store_error.clone() {
                        let mut e = e.at_record(&r.topic, r.partition, r.position(target.position));
                        e.reason = format!("restoring the changelog: {}", e.reason);
                        return Err(e).py_err(py);
                    }
                    out.push(PartitionRestore::from_core(py, r, target.position)?);
                }
                Ok(out)
            })
        })
    }

    /// Client-wide events (a broker connection lost, ...) reported since the last call.
    fn take_events(&self, py: Python<'_>) -> PyResult<Vec<String>> {
        guard(py, || {
            let mut events = self.events.lock().unwrap_or_else(|e| e.into_inner());
            Ok(std::mem::take(&mut *events))
        })
    }

    /// Closes every consumer; later calls raise `RuntimeError` (as a closed confluent-kafka
    /// consumer does). Closing twice is allowed.
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        let fetcher = self.lock().take();
        py.detach(move || drop(fetcher));
        Ok(())
    }
}

impl ChangelogFetcher {
    /// Keeps a bounded number of events: a broker that stays down repeats itself.
    fn keep_events(&self, events: Vec<String>) {
        let mut pending = self.events.lock().unwrap_or_else(|e| e.into_inner());
        for e in events {
            if pending.len() < 64 && !pending.contains(&e) {
                pending.push(e);
            }
        }
    }
}

fn tp_list(partitions: &Bound<'_, PyAny>) -> PyResult<Vec<(String, i32)>> {
    partitions
        .try_iter()?
        .map(|tp| {
            let tp = tp?;
            let py = tp.py();
            Ok((
                tp.getattr(intern!(py, "topic"))?.extract()?,
                tp.getattr(intern!(py, "partition"))?.extract()?,
            ))
        })
        .collect()
}

/// What one `ChangelogFetcher.restore` call did for one partition.
#[pyclass(frozen, module = "streamstate._core")]
pub struct PartitionRestore {
    /// The changelog topic.
    #[pyo3(get)]
    topic: String,
    /// The changelog partition.
    #[pyo3(get)]
    partition: i32,
    /// Records applied during the call (puts and deletes).
    #[pyo3(get)]
    num_restored: u64,
    /// The offset of the last record applied, `-1` when none was.
    #[pyo3(get)]
    last_restored_offset: i64,
    /// The furthest position seen: past the records read, or where an end-of-partition event
    /// put the fetch (past transaction markers and compaction gaps); the given position if none.
    #[pyo3(get)]
    position: i64,
    /// Whether an end-of-partition event was seen.
    #[pyo3(get)]
    eof: bool,
    /// `(offset, reason)` when the position fell out of the log; nothing was applied then.
    #[pyo3(get)]
    invalid_offset: Option<(i64, String)>,
    /// The `confluent_kafka.KafkaError` of a failed read, or `None`.
    #[pyo3(get)]
    error: Option<Py<PyAny>>,
    /// The offset a failed read concerns, when known.
    #[pyo3(get)]
    error_offset: Option<i64>,
}

impl PartitionRestore {
    fn from_core(py: Python<'_>, r: CoreRestore, position: i64) -> PyResult<Self> {
        let error = match &r.error {
            Some(e) => Some(kafka_error(py, &e.failure)?.unbind()),
            None => None,
        };
        Ok(PartitionRestore {
            position: r.position(position),
            eof: r.eof_offset >= 0,
            topic: r.topic,
            partition: r.partition,
            num_restored: r.num_restored,
            last_restored_offset: r.last_restored_offset,
            invalid_offset: r.invalid_offset,
            error_offset: r.error.as_ref().and_then(|e| e.offset),
            error,
        })
    }
}

#[pymethods]
impl PartitionRestore {
    fn __repr__(&self) -> String {
        format!(
            "PartitionRestore(topic={:?}, partition={}, num_restored={}, \
             last_restored_offset={}, position={}, eof={})",
            self.topic,
            self.partition,
            self.num_restored,
            self.last_restored_offset,
            self.position,
            if self.eof { "True" } else { "False" }
        )
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<ChangelogFetcher>()?;
    m.add_class::<PartitionRestore>()?;
    Ok(())
}
