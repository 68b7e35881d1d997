//! `load_yaml`: the core reads the document without the GIL, then it becomes Python objects.

use std::sync::Mutex;

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyString};

use super::without_gil;
use crate::error::CoreError;
use crate::memory;
use crate::yaml::{self, Value};

/// The document in `text` as dicts, lists, strings, ints, floats, bools and None. With `lazy`,
/// the top-level mapping's sequence under that key becomes a `YamlItems`, whose items become
/// Python objects one at a time as they are read: a reader that takes one item, keeps what it
/// makes of it and drops the rest never holds every item's objects at once.
#[pyfunction]
#[pyo3(signature = (text, lazy=None))]
pub(super) fn load_yaml<'py>(py: Python<'py>, text: &str, lazy: Option<&str>) -> PyResult<Bound<'py, PyAny>> {
    let value = without_gil(py, || yaml::load(text))?.map_err(CoreError::from)?;
    let loaded = to_python_maybe_lazy(py, value, lazy);
    memory::release_free_heap(); // the parsed tree is gone (but lazy items)
    loaded
}

fn to_python_maybe_lazy<'py>(py: Python<'py>, value: Value, lazy: Option<&str>) -> PyResult<Bound<'py, PyAny>> {
    let mut strings = RecentStrings::new();
    match (value, lazy) {
        (Value::Map(entries), Some(lazy_key)) => {
            let dict = PyDict::new(py);
            for (key, value) in entries {
                let is_lazy = matches!((&key, &value), (Value::Str(k), Value::Seq(_)) if k == lazy_key);
                let value = match value {
                    Value::Seq(items) if is_lazy => Bound::new(py, YamlItems { items, strings: Mutex::new(RecentStrings::new()) })?.into_any(),
                    value => to_python(py, &value, &mut strings)?,
                };
                dict.set_item(to_python(py, &key, &mut strings)?, value)?;
            }
            Ok(dict.into_any())
        }
        (value, _) => to_python(py, &value, &mut strings),
    }
}

impl Drop for YamlItems {
    fn drop(&mut self) {
        drop(std::mem::take(&mut self.items));
        memory::release_free_heap();
    }
}

/// A YAML sequence whose items become Python objects when read (a new object each read).
#[pyclass(frozen, sequence, module = "isolane._core")]
pub struct YamlItems {
    items: Vec<Value>,
    strings: Mutex<RecentStrings>,
}

#[pymethods]
impl YamlItems {
    fn __len__(&self) -> usize {
        self.items.len()
    }

    fn __getitem__<'py>(&self, py: Python<'py>, index: isize) -> PyResult<Bound<'py, PyAny>> {
        let at = if index < 0 { index + self.items.len() as isize } else { index };
        match usize::try_from(at).ok().and_then(|at| self.items.get(at)) {
            Some(item) => to_python(py, item, &mut self.strings.lock().unwrap_or_else(|p| p.into_inner())),
            None => Err(pyo3::exceptions::PyIndexError::new_err("index out of range")),
        }
    }
}

/// The longest string [`RecentStrings`] keeps.
const SHARED_STRING_MAX: usize = 32;

/// Python strings made from a document's short strings, kept in a small table by their hash:
/// what recurs (keys, units, actions, kinds) is one object however often it is written, while
/// what does not (names, prefixes) is not kept. (Interning them instead grew Python's table of
/// interned strings by two entries a tenant, about 190 bytes, for as long as the process runs.)
/// A string found again is marked, and a marked string is not replaced by the next one that
/// falls on its place, only unmarked: unique strings pass by the recurring ones.
struct RecentStrings {
    slots: Box<[(Option<Py<PyString>>, bool)]>,
}

impl RecentStrings {
    const SLOTS: usize = 512;

    fn new() -> Self {
        RecentStrings { slots: (0..Self::SLOTS).map(|_| (None, false)).collect() }
    }

    fn get<'py>(&mut self, py: Python<'py>, text: &str) -> Bound<'py, PyString> {
        let (held, found_again) = &mut self.slots[slot_of(text, Self::SLOTS)];
        if let Some(held) = held.as_ref().map(|held| held.bind(py)) {
            if held.to_str().is_ok_and(|held| held == text) {
                *found_again = true;
                return held.clone();
            }
        }
        let made = PyString::new(py, text);
        if std::mem::take(found_again) {
            return made; // the string held recurs: it stays, for now
        }
        *held = Some(made.clone().unbind());
        made
    }
}

/// FNV-1a of `text`, in `0..slots` (a power of two).
fn slot_of(text: &str, slots: usize) -> usize {
    let hash = text.bytes().fold(0xcbf2_9ce4_8422_2325u64, |hash, byte| (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3));
    hash as usize & (slots - 1)
}

/// Depth is bounded by `yaml::MAX_DEPTH`, so the recursion is too.
fn to_python<'py>(py: Python<'py>, value: &Value, strings: &mut RecentStrings) -> PyResult<Bound<'py, PyAny>> {
    Ok(match value {
        Value::Null => py.None().into_bound(py),
        Value::Bool(b) => b.into_pyobject(py)?.to_owned().into_any(),
        // Most integers fit 64 bits, which convert faster than 128.
        Value::Int(i) => match i64::try_from(*i) {
            Ok(small) => small.into_pyobject(py)?.into_any(),
            Err(_) => i.into_pyobject(py)?.into_any(),
        },
        Value::Float(f) => f.into_pyobject(py)?.into_any(),
        Value::Str(s) if s.len() <= SHARED_STRING_MAX => strings.get(py, s).into_any(),
        Value::Str(s) => PyString::new(py, s).into_any(),
        Value::Seq(items) => PyList::new(py, items.iter().map(|item| to_python(py, item, strings)).collect::<PyResult<Vec<_>>>()?)?.into_any(),
        Value::Map(entries) => {
            let dict = PyDict::new(py);
            for (key, value) in entries {
                dict.set_item(to_python(py, key, strings)?, to_python(py, value, strings)?)?;
            }
            dict.into_any()
        }
    })
}
