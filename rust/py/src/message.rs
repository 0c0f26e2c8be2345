//! Fast reads of `confluent_kafka.Message` fields, shared by `RecordQueue` and `process_next`.
//!
//! `msg.key()` through the limited API (abi3, Python 3.10) means a lookup that allocates a
//! bound method, then a call with an argument tuple; calling the type's unbound method
//! descriptor with `PyObject_CallFunctionObjArgs` goes through vectorcall with no allocation.
//! These are the hot loops over consumer messages.

use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::PyType;

static MESSAGE_CLASS: PyOnceLock<Py<PyType>> = PyOnceLock::new();
static MESSAGE_METHODS: PyOnceLock<MessageMethods> = PyOnceLock::new();

/// The method descriptors of `confluent_kafka.Message`.
pub struct MessageMethods {
    pub key: Py<PyAny>,
    pub value: Py<PyAny>,
    pub timestamp: Py<PyAny>,
    pub offset: Py<PyAny>,
    pub headers: Py<PyAny>,
    pub error: Py<PyAny>,
    pub topic: Py<PyAny>,
    pub partition: Py<PyAny>,
}

impl MessageMethods {
    fn new(cls: &Bound<'_, PyType>) -> PyResult<Self> {
        Ok(MessageMethods {
            key: cls.getattr("key")?.unbind(),
            value: cls.getattr("value")?.unbind(),
            timestamp: cls.getattr("timestamp")?.unbind(),
            offset: cls.getattr("offset")?.unbind(),
            headers: cls.getattr("headers")?.unbind(),
            error: cls.getattr("error")?.unbind(),
            topic: cls.getattr("topic")?.unbind(),
            partition: cls.getattr("partition")?.unbind(),
        })
    }

    /// `confluent_kafka.Message` and its descriptors, or `None` when confluent-kafka cannot be
    /// imported (records then come as `ConsumerRecord`s or plain objects).
    pub fn get(py: Python<'_>) -> PyResult<Option<(&Bound<'_, PyType>, &MessageMethods)>> {
        let Ok(cls) = MESSAGE_CLASS.import(py, "confluent_kafka", "Message") else {
            return Ok(None);
        };
        let methods = MESSAGE_METHODS.get_or_try_init(py, || MessageMethods::new(cls))?;
        Ok(Some((cls, methods)))
    }

    /// Calls one descriptor (`&self.key`, ...) on `msg`, which must be a `Message`.
    pub fn call<'py>(
        &self,
        py: Python<'py>,
        method: &Py<PyAny>,
        msg: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        // SAFETY: both pointers are live objects held by the caller, the argument list is
        // NULL-terminated, and the result is a new reference (or NULL with an exception set).
        unsafe {
            let out = pyo3::ffi::PyObject_CallFunctionObjArgs(
                method.as_ptr(),
                msg.as_ptr(),
                std::ptr::null_mut::<pyo3::ffi::PyObject>(),
            );
            Bound::from_owned_ptr_or_err(py, out)
        }
    }
}
