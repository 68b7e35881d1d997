//! `load_yaml`: the core reads the document without the GIL, then it becomes Python objects.

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyString};

use super::without_gil;
use crate::error::CoreError;
use crate::yaml::{self, Value};

/// The document in `text` as dicts, lists, strings, ints, floats, bools and None.
#[pyfunction]
pub(super) fn load_yaml(py: Python<'_>, text: &str) -> PyResult<Py<PyAny>> {
    let value = without_gil(py, || yaml::load(text))?.map_err(CoreError::from)?;
    Ok(to_python(py, value)?.unbind())
}

/// The longest string interned (see `to_python`).
const SHARED_STRING_MAX: usize = 32;

/// Depth is bounded by `yaml::MAX_DEPTH`, so the recursion is too.
fn to_python(py: Python<'_>, value: Value) -> PyResult<Bound<'_, PyAny>> {
    Ok(match value {
        Value::Null => py.None().into_bound(py),
        Value::Bool(b) => b.into_pyobject(py)?.to_owned().into_any(),
        // Most integers fit 64 bits, which convert faster than 128.
        Value::Int(i) => match i64::try_from(i) {
            Ok(small) => small.into_pyobject(py)?.into_any(),
            Err(_) => i.into_pyobject(py)?.into_any(),
        },
        Value::Float(f) => f.into_pyobject(py)?.into_any(),
        // Short strings recur (keys, units, actions, kinds): interned, each is one object however often it is written.
        Value::Str(s) if s.len() <= SHARED_STRING_MAX => PyString::intern(py, &s).into_any(),
        Value::Str(s) => s.into_pyobject(py)?.into_any(),
        Value::Seq(items) => PyList::new(py, items.into_iter().map(|item| to_python(py, item)).collect::<PyResult<Vec<_>>>()?)?.into_any(),
        Value::Map(entries) => {
            let dict = PyDict::new(py);
            for (key, value) in entries {
                dict.set_item(to_python(py, key)?, to_python(py, value)?)?;
            }
            dict.into_any()
        }
    })
}
