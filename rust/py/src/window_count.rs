//! `encode_window_counts`: the flush of a built-in windowed count (`streamstate_core::
//! window_count`) over the DSL's object cache entries, for Python.
//!
//! Converts only: reads the cache's dirty items, encodes them in the core with the GIL
//! released, and hands back the byte lists the flush writes and produces.

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList, PyString, PyTuple};
use streamstate_core::window_count::{encode_window_counts as core_encode, WindowCount};

use crate::errors::guard;

/// One dirty item `(cache_key, ((key, start), (count, timestamp), headers))`: its string key
/// and numbers, or `None` when it is not in that shape (a non-string key, a deleted window, a
/// count or timestamp that is not a 64-bit integer, headers).
fn entry<'py>(item: &Bound<'py, PyAny>) -> Option<(Bound<'py, PyString>, i64, i64, i64)> {
    let item = item.cast::<PyTuple>().ok()?;
    if item.len() != 2 {
        return None;
    }
    let held = item.get_item(1).ok()?;
    let held = held.cast::<PyTuple>().ok()?;
    if held.len() != 3 || held.get_item(2).ok()?.is_truthy().ok()? {
        return None;
    }
    let key_start = held.get_item(0).ok()?;
    let key_start = key_start.cast::<PyTuple>().ok()?;
    let value = held.get_item(1).ok()?;
    let value = value.cast::<PyTuple>().ok()?;
    if key_start.len() != 2 || value.len() != 2 {
        return None;
    }
    let key = key_start
        .get_item(0)
        .ok()?
        .cast_into_exact::<PyString>()
        .ok()?;
    let start: i64 = key_start.get_item(1).ok()?.extract().ok()?;
    let count: i64 = value.get_item(0).ok()?.extract().ok()?;
    let timestamp: i64 = value.get_item(1).ok()?.extract().ok()?;
    Some((key, start, count, timestamp))
}

type Encoded<'py> = (Bound<'py, PyList>, Vec<i64>, Bound<'py, PyList>, Vec<usize>);

/// The writes of a windowed count's flush of `items` (the object cache's dirty items, in
/// order): `(store_pairs, log_timestamps, sink_records, expired)` — `(key, value)` pairs for
/// the store and its changelog (live windows only) with each changelog timestamp,
/// `(key, value, timestamp)` for the sink (every item) and the indexes of the items whose
/// segment expired; `None` when an item is not a string-keyed count without headers (the
/// caller then flushes the general way).
#[pyfunction]
fn encode_window_counts<'py>(
    py: Python<'py>,
    items: &Bound<'py, PyList>,
    interval: i64,
    live_segment: i64,
) -> PyResult<Option<Encoded<'py>>> {
    guard(py, || {
        let mut held = Vec::with_capacity(items.len());
        for item in items.iter() {
            match entry(&item) {
                Some(found) => held.push(found),
                None => return Ok(None),
            }
        }
        let mut entries = Vec::with_capacity(held.len());
        for (key, start, count, timestamp) in &held {
            let Ok(text) = key.to_str() else {
                return Ok(None); // not UTF-8 (a lone surrogate): the general path raises
            };
            entries.push(WindowCount {
                key: text.as_bytes(),
                start: *start,
                count: *count,
                timestamp: *timestamp,
            });
        }
        let flushed = py.detach(|| core_encode(&entries, interval, live_segment));
        let store = PyList::empty(py);
        for (key, value) in flushed.store_keys.iter().zip(&flushed.store_values) {
            store.append((PyBytes::new(py, key), PyBytes::new(py, value)))?;
        }
        let sink = PyList::empty(py);
        for ((key, value), stamp) in flushed
            .sink_keys
            .iter()
            .zip(&flushed.sink_values)
            .zip(&flushed.sink_timestamps)
        {
            sink.append((PyBytes::new(py, key), PyBytes::new(py, value), *stamp))?;
        }
        Ok(Some((store, flushed.log_timestamps, sink, flushed.expired)))
    })
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(encode_window_counts, m)?)?;
    Ok(())
}
