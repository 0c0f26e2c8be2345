//! `UntrackedPairs`: two-item instances of a tuple subclass (the DSL's `ValueAndTimestamp`)
//! that CPython's cyclic garbage collector does not track when they cannot be in a cycle.
//!
//! Why: a DSL count holds one `ValueAndTimestamp(count, timestamp)` per key (per window, for a
//! windowed count) in its object cache, and makes a new one per record. CPython tracks every
//! instance of a tuple subclass for as long as it lives (it untracks exact tuples and dicts of
//! untracked items, never subclass instances), so every full collection visited every cached
//! count: the collector took 15-20% of the windowed count's CPU (`docs/PERFORMANCE.md`). A pair of numbers, strings, bytes or `None` refers to nothing
//! that can refer back to it, so leaving it untracked is what CPython does for an exact tuple
//! of the same items, at its birth instead of at its first collection.

use std::ffi::c_void;

use pyo3::exceptions::PyTypeError;
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::PyType;

/// Whether `item` can hold no reference to another object: an exact `int`, `float`, `str`,
/// `bytes`, a `bool` or `None`.
///
/// # Safety
/// `item` is a valid object pointer and the GIL is held.
unsafe fn atomic(item: *mut ffi::PyObject) -> bool {
    // SAFETY: the caller's contract; each check reads the object's type only.
    unsafe {
        ffi::PyLong_CheckExact(item) != 0
            || ffi::PyUnicode_CheckExact(item) != 0
            || ffi::PyFloat_CheckExact(item) != 0
            || ffi::PyBytes_CheckExact(item) != 0
            || ffi::PyBool_Check(item) != 0
            || item == ffi::Py_None()
    }
}

/// Makes `cls(first, second)` instances for a tuple subclass `cls` without an instance dict
/// (``__slots__ = ()``, as a ``NamedTuple``): `make(first, second)` is `cls((first, second))`,
/// untracked by the cyclic garbage collector when both items are an exact `int`, `float`,
/// `str`, `bytes`, a `bool` or `None` (module doc).
#[pyclass(frozen, module = "streamstate._core")]
pub struct UntrackedPairs {
    cls: Py<PyType>,
    alloc: ffi::allocfunc,
}

#[pymethods]
impl UntrackedPairs {
    /// For `cls`: a `TypeError` unless it is a tuple subclass whose instances have no dict
    /// (an untracked instance with a dict could be in a cycle through it).
    #[new]
    fn py_new(cls: &Bound<'_, PyType>) -> PyResult<Self> {
        let tp = cls.as_type_ptr();
        // SAFETY: `tp` is a live type object (held by `cls`) and the GIL is held.
        let flags = unsafe { ffi::PyType_GetFlags(tp) };
        let dict_offset: isize = cls.getattr("__dictoffset__")?.extract()?;
        let exact_tuple = std::ptr::eq(tp, &raw mut ffi::PyTuple_Type);
        if flags & ffi::Py_TPFLAGS_TUPLE_SUBCLASS == 0 || exact_tuple || dict_offset != 0 {
            return Err(PyTypeError::new_err(format!(
                "UntrackedPairs needs a tuple subclass without an instance dict, not {}",
                cls.name()?
            )));
        }
        // SAFETY: as above; a heap type (a class statement) always has a tp_alloc slot.
        let slot = unsafe { ffi::PyType_GetSlot(tp, ffi::Py_tp_alloc) };
        if slot.is_null() {
            return Err(PyTypeError::new_err("the type has no tp_alloc"));
        }
        // SAFETY: the Py_tp_alloc slot holds an allocfunc.
        let alloc = unsafe { std::mem::transmute::<*mut c_void, ffi::allocfunc>(slot) };
        Ok(Self {
            cls: cls.clone().unbind(),
            alloc,
        })
    }

    /// `cls((first, second))`, untracked when both items are atomic (class doc).
    fn make<'py>(
        &self,
        py: Python<'py>,
        first: Bound<'py, PyAny>,
        second: Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let tp = self.cls.bind(py).as_type_ptr();
        // SAFETY: the GIL is held; `tp` is a tuple subclass (checked at construction), so
        // its tp_alloc makes a tuple of 2 empty slots with one reference, which
        // `PyTuple_SetItem` fills (each stealing the reference given), as CPython's
        // `tuple.__new__` fills a subclass instance. Untracking an object that can reach no
        // other container is what the collector itself does to such tuples.
        unsafe {
            let untracked = atomic(first.as_ptr()) && atomic(second.as_ptr());
            let obj = (self.alloc)(tp, 2);
            if obj.is_null() {
                return Err(PyErr::fetch(py));
            }
            let pair = Bound::from_owned_ptr(py, obj);
            if ffi::PyTuple_SetItem(obj, 0, first.into_ptr()) != 0
                || ffi::PyTuple_SetItem(obj, 1, second.into_ptr()) != 0
            {
                return Err(PyErr::fetch(py));
            }
            if untracked {
                ffi::PyObject_GC_UnTrack(obj.cast::<c_void>());
            }
            Ok(pair)
        }
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<UntrackedPairs>()?;
    Ok(())
}
