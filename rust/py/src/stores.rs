//! Key-value stores and `process_next` for Python, over the core's `store` and `restore`.
//!
//! Keys and values are `bytes`. Single-key operations run with the GIL held (they take
//! microseconds); batch work (`put_all`, `process_next`), `flush`, `close` and opening a
//! persistent store release it. Nothing done without the GIL waits for the GIL, so a thread
//! holding it and waiting for a store lock cannot deadlock with one writing a batch.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use arrow_array::RecordBatch;
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyBytes, PyTuple, PyType};
use pyo3_arrow::PyRecordBatch;
use streamstate_core::arrow_decode;
use streamstate_core::error::CoreError;
use streamstate_core::restore::{self, ChangelogRecord, Origin};
use streamstate_core::store::{
    Cursor, InMemoryKeyValueStore as CoreInMemory, KeyValueStore,
    PersistentKeyValueStore as CorePersistent, StoreOptions, WriteOp, MIN_LEVEL_BASE_BYTES,
    PAGE_SIZE,
};

use crate::errors::{guard, IntoPyResult};
use crate::message::RecordReader;

/// A store shared between its Python object, its iterators and batch work off the GIL.
type Shared = Arc<dyn KeyValueStore>;

/// The bytes of a key or value argument; anything but `bytes` is a `TypeError`.
fn bytes_arg<'a>(obj: &'a Bound<'_, PyAny>, what: &str) -> PyResult<&'a [u8]> {
    match obj.cast::<PyBytes>() {
        Ok(b) => Ok(b.as_bytes()),
        Err(_) => Err(PyTypeError::new_err(format!(
            "the {what} must be bytes, got {}",
            type_name(obj)
        ))),
    }
}

fn type_name(obj: &Bound<'_, PyAny>) -> String {
    obj.get_type()
        .name()
        .map(|n| n.to_string())
        .unwrap_or_else(|_| "?".into())
}

/// `(key, value)` pairs of an iterable, copied out; a `None` value deletes the key.
fn write_ops(pairs: &Bound<'_, PyAny>) -> PyResult<Vec<WriteOp>> {
    let mut ops = Vec::new();
    for item in pairs.try_iter()? {
        let item = item?;
        let (key, value): (Bound<'_, PyAny>, Bound<'_, PyAny>) = item.extract().map_err(|_| {
            PyTypeError::new_err(format!(
                "put_all takes (key, value) pairs, got {}",
                type_name(&item)
            ))
        })?;
        let key = bytes_arg(&key, "key")?.to_vec();
        let value = if value.is_none() {
            None
        } else {
            Some(bytes_arg(&value, "value")?.to_vec())
        };
        ops.push((key, value));
    }
    Ok(ops)
}

/// Defines a Python store class over a core store: the same methods for both kinds.
macro_rules! store_class {
    ($rust:ident, $py_name:tt, $doc:tt, { $($extra:tt)* }) => {
        #[doc = $doc]
        // The Python name is the struct's own (`$py_name`, kept for `repr`).
        #[pyclass(frozen, module = "streamstate._core")]
        pub struct $rust {
            inner: Shared,
            /// The directory of a persistent store.
            path: Option<PathBuf>,
        }

        #[pymethods]
        impl $rust {
            $($extra)*

            /// The store's name.
            #[getter]
            fn name(&self) -> &str {
                self.inner.name()
            }

            /// Whether the store keeps its data on disk.
            #[getter]
            fn persistent(&self) -> bool {
                self.inner.persistent()
            }

            /// False once closed.
            fn is_open(&self) -> bool {
                self.inner.is_open()
            }

            /// The value of `key`, or `None`.
            fn get<'py>(
                &self,
                py: Python<'py>,
                key: &Bound<'py, PyAny>,
            ) -> PyResult<Option<Bound<'py, PyBytes>>> {
                let key = bytes_arg(key, "key")?;
                guard(py, || {
                    let v = self.inner.get(key).py_err(py)?;
                    Ok(v.map(|v| PyBytes::new(py, &v)))
                })
            }

            /// Sets `key` to `value`; a `None` value deletes the key (Kafka Streams' `put`).
            fn put(
                &self,
                py: Python<'_>,
                key: &Bound<'_, PyAny>,
                value: &Bound<'_, PyAny>,
            ) -> PyResult<()> {
                let key = bytes_arg(key, "key")?;
                if value.is_none() {
                    return guard(py, || self.inner.delete(key).map(|_| ()).py_err(py));
                }
                let value = bytes_arg(value, "value")?;
                guard(py, || self.inner.put(key, value).py_err(py))
            }

            /// Writes every `(key, value)` pair atomically (a `None` value deletes).
            fn put_all(&self, py: Python<'_>, pairs: &Bound<'_, PyAny>) -> PyResult<()> {
                let ops = write_ops(pairs)?;
                let store = self.inner.clone();
                guard(py, || py.detach(move || store.apply_batch(ops)).py_err(py))
            }

            /// Removes every key with `from_key <= key < to_key`, with no changelog record at
            /// any layer (a segmented store dropping expired segments; a persistent store drops
            /// the tables holding only such keys whole).
            fn drop_range(
                &self,
                py: Python<'_>,
                from_key: &Bound<'_, PyAny>,
                to_key: &Bound<'_, PyAny>,
            ) -> PyResult<()> {
                let from = bytes_arg(from_key, "from_key")?.to_vec();
                let to = bytes_arg(to_key, "to_key")?.to_vec();
                let store = self.inner.clone();
                guard(py, || py.detach(move || store.drop_range(&from, &to)).py_err(py))
            }

            /// Removes `key`; returns its old value or `None`.
            fn delete<'py>(
                &self,
                py: Python<'py>,
                key: &Bound<'py, PyAny>,
            ) -> PyResult<Option<Bound<'py, PyBytes>>> {
                let key = bytes_arg(key, "key")?;
                guard(py, || {
                    let v = self.inner.delete(key).py_err(py)?;
                    Ok(v.map(|v| PyBytes::new(py, &v)))
                })
            }

            /// An iterator of `(key, value)` with `from_key <= key <= to_key`, ascending.
            fn range(
                &self,
                from_key: &Bound<'_, PyAny>,
                to_key: &Bound<'_, PyAny>,
            ) -> PyResult<KeyValueIterator> {
                let from = bytes_arg(from_key, "from_key")?.to_vec();
                let to = bytes_arg(to_key, "to_key")?.to_vec();
                Ok(KeyValueIterator::new(
                    self.inner.clone(),
                    Cursor::new(
                        std::ops::Bound::Included(from),
                        std::ops::Bound::Included(to),
                    ),
                ))
            }

            /// An iterator of every `(key, value)`, ascending.
            fn all(&self) -> KeyValueIterator {
                KeyValueIterator::new(
                    self.inner.clone(),
                    Cursor::new(std::ops::Bound::Unbounded, std::ops::Bound::Unbounded),
                )
            }

            /// The number of entries (an estimate by contract; exact here).
            fn approximate_num_entries(&self, py: Python<'_>) -> PyResult<u64> {
                guard(py, || self.inner.approximate_num_entries().py_err(py))
            }

            /// Makes every write so far durable.
            fn flush(&self, py: Python<'_>) -> PyResult<()> {
                let store = self.inner.clone();
                guard(py, || py.detach(move || store.flush()).py_err(py))
            }

            /// Flushes and closes the store; later operations raise `ProcessorStateError`.
            fn close(&self, py: Python<'_>) -> PyResult<()> {
                let store = self.inner.clone();
                guard(py, || py.detach(move || store.close()).py_err(py))
            }

            fn __enter__(slf: Py<Self>) -> Py<Self> {
                slf
            }

            fn __exit__(
                &self,
                py: Python<'_>,
                exc_type: &Bound<'_, PyAny>,
                exc: &Bound<'_, PyAny>,
                tb: &Bound<'_, PyAny>,
            ) -> PyResult<bool> {
                // Closes whatever happened; the exception, if any, goes on (returns False).
                let _ = (exc_type, exc, tb);
                self.close(py)?;
                Ok(false)
            }

            fn __repr__(&self) -> String {
                let path = match &self.path {
                    Some(p) => format!(", path={:?}", p.display().to_string()),
                    None => String::new(),
                };
                let closed = if self.inner.is_open() { "" } else { ", closed" };
                format!("{}(name={:?}{path}{closed})", $py_name, self.inner.name())
            }
        }
    };
}

store_class!(
    InMemoryKeyValueStore,
    "InMemoryKeyValueStore",
    "A key-value store in memory (an ordered map); its contents go when it is closed.",
    {
        #[new]
        fn new(name: String) -> Self {
            InMemoryKeyValueStore {
                inner: Arc::new(CoreInMemory::new(name)),
                path: None,
            }
        }
    }
);

store_class!(
    PersistentKeyValueStore,
    "PersistentKeyValueStore",
    "A key-value store on disk (fjall) in a directory; reopening the directory gives back \
     every write flushed before.",
    {
        #[new]
        #[pyo3(signature = (name, path, *, level_base_bytes = None))]
        fn new(
            py: Python<'_>,
            name: String,
            path: PathBuf,
            level_base_bytes: Option<u64>,
        ) -> PyResult<Self> {
            if let Some(bytes) = level_base_bytes.filter(|b| *b < MIN_LEVEL_BASE_BYTES) {
                return Err(PyValueError::new_err(format!(
                    "level_base_bytes must be at least {MIN_LEVEL_BASE_BYTES} (4 MiB), not {bytes}"
                )));
            }
            guard(py, || {
                let dir = path.clone();
                let options = StoreOptions { level_base_bytes };
                let store = py
                    .detach(move || CorePersistent::open_with(name, dir, options))
                    .py_err(py)?;
                Ok(PersistentKeyValueStore {
                    inner: Arc::new(store),
                    path: Some(path),
                })
            })
        }

        /// The store's directory.
        #[getter]
        fn path(&self) -> PathBuf {
            self.path.clone().unwrap_or_default()
        }
    }
);

/// Pages through a store: holds one page of entries, fetches the next when it runs out.
#[pyclass(frozen, module = "streamstate._core")]
pub struct KeyValueIterator {
    store: Shared,
    cursor: Mutex<Cursor>,
}

impl KeyValueIterator {
    fn new(store: Shared, cursor: Cursor) -> Self {
        KeyValueIterator {
            store,
            cursor: Mutex::new(cursor),
        }
    }
}

#[pymethods]
impl KeyValueIterator {
    fn __iter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    fn __next__<'py>(
        &self,
        py: Python<'py>,
    ) -> PyResult<Option<(Bound<'py, PyBytes>, Bound<'py, PyBytes>)>> {
        guard(py, || {
            // The lock is held with the GIL and released before anything waits for the GIL.
            let mut cursor = self.cursor.lock().unwrap_or_else(|e| e.into_inner());
            let next = cursor
                .next_from(self.store.as_ref(), PAGE_SIZE)
                .py_err(py)?;
            Ok(next.map(|(k, v)| (PyBytes::new(py, &k), PyBytes::new(py, &v))))
        })
    }
}

/// The shared core store behind a Python store object.
pub(crate) fn shared_store(obj: &Bound<'_, PyAny>) -> PyResult<Shared> {
    if let Ok(s) = obj.cast::<InMemoryKeyValueStore>() {
        return Ok(s.get().inner.clone());
    }
    if let Ok(s) = obj.cast::<PersistentKeyValueStore>() {
        return Ok(s.get().inner.clone());
    }
    Err(PyTypeError::new_err(format!(
        "process_next needs an InMemoryKeyValueStore or a PersistentKeyValueStore, got {}",
        type_name(obj)
    )))
}

/// The result of one `process_next` step.
#[pyclass(frozen, eq, hash, module = "streamstate._core")]
#[derive(PartialEq, Eq, Hash, Clone, Copy)]
pub struct RestoredBatch {
    /// The offset to read next (`-1` when no record was given).
    #[pyo3(get)]
    next_offset: i64,
    /// The offset of the last record applied, `-1` when none was.
    #[pyo3(get)]
    last_restored_offset: i64,
    /// How many records were applied (puts and deletes; null keys excluded).
    #[pyo3(get)]
    num_restored: u64,
}

#[pymethods]
impl RestoredBatch {
    #[new]
    fn new(next_offset: i64, last_restored_offset: i64, num_restored: u64) -> Self {
        RestoredBatch {
            next_offset,
            last_restored_offset,
            num_restored,
        }
    }

    fn __repr__(&self) -> String {
        format!(
            "RestoredBatch(next_offset={}, last_restored_offset={}, num_restored={})",
            self.next_offset, self.last_restored_offset, self.num_restored
        )
    }

    fn __reduce__<'py>(
        &self,
        py: Python<'py>,
    ) -> PyResult<(Bound<'py, PyType>, Bound<'py, PyTuple>)> {
        Ok((
            py.get_type::<RestoredBatch>(),
            (
                self.next_offset,
                self.last_restored_offset,
                self.num_restored,
            )
                .into_pyobject(py)?,
        ))
    }
}

static LOGGER: PyOnceLock<Py<PyAny>> = PyOnceLock::new();

/// A key or value copied out of its Python object: `None`, or the bytes.
fn copy_bytes(obj: &Bound<'_, PyAny>, what: &str, offset: i64) -> PyResult<Option<Vec<u8>>> {
    if obj.is_none() {
        return Ok(None);
    }
    match obj.cast::<PyBytes>() {
        Ok(b) => Ok(Some(b.as_bytes().to_vec())),
        Err(_) => Err(PyTypeError::new_err(format!(
            "the {what} of the changelog record at offset {offset} must be bytes or None, got {}",
            type_name(obj)
        ))),
    }
}

/// Applies the changelog records below `end_offset` to `store` in one atomic write batch (a
/// `None` value deletes; a `None` key is skipped and logged) and says where to continue.
#[pyfunction]
fn process_next(
    py: Python<'_>,
    store: &Bound<'_, PyAny>,
    records: &Bound<'_, PyAny>,
    end_offset: i64,
) -> PyResult<RestoredBatch> {
    let shared = shared_store(store)?;
    guard(py, || {
        if records.hasattr(intern!(py, "__arrow_c_array__"))? {
            let batch: PyRecordBatch = records.extract()?;
            return process_arrow(py, &shared, batch.into_inner(), end_offset);
        }
        let reader = RecordReader::new(py, "changelog record")?;
        // Copy every key and value out while holding the GIL; the batch is then written
        // without it. Reading stops at the first record at or past the end: the core stops
        // there too, and its key and value would be copied for nothing.
        let mut first: Option<Bound<'_, PyAny>> = None;
        let mut batch: Vec<ChangelogRecord> = Vec::with_capacity(records.len().unwrap_or(0));
        for item in records.try_iter()? {
            let item = item?;
            let offset = reader.offset(&item)?;
            if first.is_none() {
                first = Some(item.clone());
            }
            if offset >= end_offset {
                batch.push((offset, None, None));
                break;
            }
            let (key, value) = reader.key_value(&item)?;
            batch.push((
                offset,
                copy_bytes(&key, "key", offset)?,
                copy_bytes(&value, "value", offset)?,
            ));
        }
        let (topic, partition) = first
            .as_ref()
            .map(|f| reader.topic_partition(f))
            .unwrap_or((None, None));
        let origin = Origin::of(&batch, end_offset, topic, partition);
        let store_for_batch = shared.clone();
        let outcome =
            py.detach(move || restore::process_next(&*store_for_batch, batch, end_offset));
        finish(py, &shared, outcome, &origin)
    })
}

/// `process_next` over an Arrow batch with Spark's Kafka columns: copying the keys and values
/// out and writing them both happen without the GIL.
fn process_arrow(
    py: Python<'_>,
    shared: &Shared,
    batch: RecordBatch,
    end_offset: i64,
) -> PyResult<RestoredBatch> {
    let store_for_batch = shared.clone();
    let (outcome, origin) = py.detach(move || {
        let (records, origin) = match arrow_decode::changelog_records(&batch, end_offset) {
            Ok(found) => found,
            Err(e) => return (Err(e.in_store(store_for_batch.name())), Origin::default()),
        };
        let (topic, partition) = origin.unzip();
        let origin = Origin::of(&records, end_offset, topic, partition);
        let outcome = restore::process_next(&*store_for_batch, records, end_offset);
        (outcome, origin)
    });
    finish(py, shared, outcome, &origin)
}

/// Locates an error of the batch, logs its null-key records and builds the `RestoredBatch`.
fn finish(
    py: Python<'_>,
    shared: &Shared,
    outcome: Result<restore::ProcessNext, CoreError>,
    origin: &Origin,
) -> PyResult<RestoredBatch> {
    let outcome = outcome.map_err(|e| origin.locate(e)).py_err(py)?;
    if !outcome.null_key_offsets.is_empty() {
        warn_null_keys(py, shared.name(), origin, &outcome.null_key_offsets);
    }
    let b = outcome.batch;
    Ok(RestoredBatch {
        next_offset: b.next_offset,
        last_restored_offset: b.last_restored_offset,
        num_restored: b.num_restored,
    })
}

/// Kafka Streams' warning for each skipped null-key record, on the `streamstate.changelog`
/// logger (the changelog reader's).
pub(crate) fn warn_null_keys(py: Python<'_>, store: &str, origin: &Origin, offsets: &[i64]) {
    let logger = LOGGER.get_or_try_init(py, || -> PyResult<Py<PyAny>> {
        Ok(py
            .import("logging")?
            .call_method1("getLogger", ("streamstate.changelog",))?
            .unbind())
    });
    let Ok(logger) = logger else { return };
    for &offset in offsets {
        // A failing logging call must not fail a restore that has already been applied.
        let _ = logger.bind(py).call_method1(
            intern!(py, "warning"),
            (origin.null_key_warning(store, offset),),
        );
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<InMemoryKeyValueStore>()?;
    m.add_class::<PersistentKeyValueStore>()?;
    m.add_class::<KeyValueIterator>()?;
    m.add_class::<RestoredBatch>()?;
    m.add_function(wrap_pyfunction!(process_next, m)?)?;
    Ok(())
}
