//! `streamstate._core`: the thin PyO3 layer over `streamstate-core`.
//!
//! It converts at the boundary (Python objects and Arrow capsules in, Python objects and Arrow
//! out), releases the GIL around batch work, and maps every core error and panic to the
//! `streamstate.errors` hierarchy. No Kafka Streams semantics live here.

use pyo3::prelude::*;

mod admission;
mod arrow;
mod convert;
mod errors;
mod fetch;
mod message;
mod partition_group;
mod poll;
mod queue;
mod records;
mod serde;
mod stamp;
mod stores;
mod streams_group;
mod untracked;
mod window_count;

/// `"release"` or `"debug"`: benchmarks refuse to report numbers of a debug build.
#[pyfunction]
fn build_profile() -> &'static str {
    if cfg!(debug_assertions) {
        "debug"
    } else {
        "release"
    }
}

/// Panics on purpose, to prove that a panic reaches Python as a `StreamsError`.
#[pyfunction]
fn _panic_for_test(py: Python<'_>, message: &str) -> PyResult<()> {
    errors::guard(py, || panic!("{message}"))
}

#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add_function(wrap_pyfunction!(build_profile, m)?)?;
    m.add_function(wrap_pyfunction!(_panic_for_test, m)?)?;
    arrow::register(m)?;
    serde::register(m)?;
    stamp::register(m)?;
    records::register(m)?;
    message::register(m)?;
    queue::register(m)?;
    partition_group::register(m)?;
    stores::register(m)?;
    fetch::register(m)?;
    poll::register(m)?;
    streams_group::register(m)?;
    window_count::register(m)?;
    untracked::register(m)?;
    Ok(())
}
