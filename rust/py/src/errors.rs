//! Core errors and Rust panics become `streamstate.errors` classes at the boundary.
//!
//! The classes are imported from the Python module rather than created here, so they pickle
//! under their public names (they cross Spark worker boundaries) and users catch one hierarchy.

use std::panic::{catch_unwind, AssertUnwindSafe};

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use streamstate_core::error::{CoreError, ErrorKind, Location};

/// Builds an instance of the named `streamstate.errors` class with its location keywords.
pub fn streams_error(py: Python<'_>, class: &str, reason: &str, location: &Location) -> PyErr {
    let build = || -> PyResult<PyErr> {
        let cls = py.import("streamstate.errors")?.getattr(class)?;
        let kwargs = PyDict::new(py);
        kwargs.set_item("topic", location.topic.as_deref())?;
        kwargs.set_item("partition", location.partition)?;
        kwargs.set_item("offset", location.offset)?;
        kwargs.set_item("store_name", location.store_name.as_deref())?;
        let err = cls.call((reason,), Some(&kwargs))?;
        Ok(PyErr::from_value(err))
    };
    // If even the import fails (a broken install), surface that failure rather than hiding it.
    build().unwrap_or_else(|e| e)
}

fn class_of(kind: ErrorKind) -> Option<&'static str> {
    match kind {
        ErrorKind::Deserialization => Some("DeserializationError"),
        ErrorKind::InvalidTimestamp => Some("InvalidTimestampError"),
        ErrorKind::CorruptCheckpoint => Some("CorruptCheckpointError"),
        ErrorKind::ProcessorState => Some("ProcessorStateError"),
        ErrorKind::Streams => Some("StreamsError"),
        ErrorKind::InvalidArgument => None,
    }
}

/// Converts a core error into the matching Python exception.
pub fn to_py(py: Python<'_>, err: CoreError) -> PyErr {
    match class_of(err.kind) {
        Some(class) => streams_error(py, class, &err.reason, &err.location),
        None => PyValueError::new_err(err.to_string()),
    }
}

/// Extension trait so binding code can write `core_call().py_err(py)?`.
pub trait IntoPyResult<T> {
    fn py_err(self, py: Python<'_>) -> PyResult<T>;
}

impl<T> IntoPyResult<T> for Result<T, CoreError> {
    fn py_err(self, py: Python<'_>) -> PyResult<T> {
        self.map_err(|e| to_py(py, e))
    }
}

fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "unknown panic payload".to_owned()
    }
}

/// Runs binding code so that a Rust panic becomes a `StreamsError` instead of PyO3's
/// `PanicException` (a `BaseException` that `except Exception` would not catch). Every
/// exported function goes through here.
pub fn guard<T>(py: Python<'_>, f: impl FnOnce() -> PyResult<T>) -> PyResult<T> {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(result) => result,
        Err(payload) => Err(streams_error(
            py,
            "StreamsError",
            &format!(
                "internal error in streamstate's Rust core: {}; this is a bug, please report it",
                panic_message(payload.as_ref())
            ),
            &Location::default(),
        )),
    }
}
