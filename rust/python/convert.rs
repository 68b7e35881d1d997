//! Python values to what the core takes: numpy arrays (checked against their range), address
//! columns and per-rule columns.

use numpy::{dtype, Element, PyArray1, PyArrayMethods, PyReadonlyArray1, PyUntypedArrayMethods};
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::classify;
use crate::error::CoreError;

/// A numpy array of `T` for `obj` without copying when it already is one (contiguous).
/// Otherwise integers of any width convert when every value fits `T`'s range `bounds`
/// (Python lists become int64, which numpy will not cast to unsigned by itself); anything
/// else converts only by numpy's same-kind casting, so floats never pass as integers.
pub(super) fn as_array<'py, T: Element>(obj: &Bound<'py, PyAny>, name: &str, bounds: (i128, i128)) -> PyResult<Bound<'py, PyArray1<T>>> {
    if let Ok(array) = obj.cast::<PyArray1<T>>() {
        if array.is_contiguous() {
            return Ok(array.clone());
        }
    }
    let py = obj.py();
    let np = py.import("numpy")?;
    let context = |err: PyErr| PyErr::from(CoreError::InvalidArgument(format!("{name}: {}", err.value(py))));
    let array = np.call_method1("asarray", (obj,)).map_err(context)?;
    let is_integer = matches!(array.getattr("dtype")?.getattr("kind")?.extract::<String>()?.as_str(), "i" | "u" | "b");
    if is_integer && array.getattr("size")?.extract::<usize>()? > 0 {
        let (low, high): (i128, i128) = (array.call_method0("min")?.extract()?, array.call_method0("max")?.extract()?);
        if low < bounds.0 || high > bounds.1 {
            return Err(CoreError::InvalidArgument(format!("{name}: values from {low} to {high} do not fit {} .. {}", bounds.0, bounds.1)).into());
        }
    }
    let kwargs = PyDict::new(py);
    kwargs.set_item("casting", if is_integer { "unsafe" } else { "same_kind" })?;
    let converted = array.call_method("astype", (dtype::<T>(py),), Some(&kwargs)).and_then(|a| np.call_method1("ascontiguousarray", (a,))).map_err(context)?;
    converted.cast_into::<PyArray1<T>>().map_err(|_| CoreError::InvalidArgument(format!("{name} must be a one-dimensional array")).into())
}

pub(super) const U8: (i128, i128) = (0, u8::MAX as i128);
pub(super) const U16: (i128, i128) = (0, u16::MAX as i128);
pub(super) const U32: (i128, i128) = (0, u32::MAX as i128);
pub(super) const U64: (i128, i128) = (0, u64::MAX as i128);
pub(super) const I64: (i128, i128) = (i64::MIN as i128, i64::MAX as i128);

/// Reads a (n, 16) uint8 address array, or a uint32 array of IPv4 addresses in host order.
/// An address column as numpy gave it: IPv4 as uint32 (host order), or 16 bytes an address.
pub(super) enum AddressColumn<'py> {
    Ipv4(PyReadonlyArray1<'py, u32>),
    Bytes(PyReadonlyArray1<'py, u8>),
}

impl<'py> AddressColumn<'py> {
    pub(super) fn new(obj: &Bound<'py, PyAny>, name: &str) -> PyResult<Self> {
        if let Ok(values) = obj.cast::<PyArray1<u32>>() {
            if values.is_contiguous() {
                return Ok(AddressColumn::Ipv4(values.readonly())); // the common case, without numpy calls
            }
        }
        let np = obj.py().import("numpy")?;
        let array = np.call_method1("asarray", (obj,))?;
        let ndim: usize = array.getattr("ndim")?.extract()?;
        if ndim != 2 {
            return Ok(AddressColumn::Ipv4(as_array::<u32>(&array, name, U32)?.readonly()));
        }
        let flat = as_array::<u8>(&array.call_method1("reshape", (-1,))?, name, U8)?.readonly();
        if flat.len() % 16 != 0 {
            return Err(CoreError::InvalidArgument(format!("{name}: a 2-D address array must have 16 columns")).into());
        }
        Ok(AddressColumn::Bytes(flat))
    }

    pub(super) fn addresses(&self) -> PyResult<Addresses<'_>> {
        Ok(match self {
            AddressColumn::Ipv4(values) => Addresses::Ipv4(values.as_slice()?),
            AddressColumn::Bytes(bytes) => Addresses::Bytes(bytes.as_slice()?),
        })
    }
}

/// Addresses read in place, one at a time, without the GIL.
#[derive(Clone, Copy)]
pub(super) enum Addresses<'a> {
    Ipv4(&'a [u32]),
    Bytes(&'a [u8]),
}

impl Addresses<'_> {
    pub(super) fn len(&self) -> usize {
        match self {
            Addresses::Ipv4(values) => values.len(),
            Addresses::Bytes(bytes) => bytes.len() / 16,
        }
    }

    #[inline]
    pub(super) fn get(&self, index: usize) -> u128 {
        match self {
            Addresses::Ipv4(values) => classify::ipv4_mapped(values[index]),
            Addresses::Bytes(bytes) => u128::from_be_bytes(bytes[index * 16..][..16].try_into().unwrap_or_default()),
        }
    }
}

fn addresses(obj: &Bound<'_, PyAny>, name: &str) -> PyResult<Vec<u128>> {
    let column = AddressColumn::new(obj, name)?;
    let addresses = column.addresses()?;
    Ok((0..addresses.len()).map(|i| addresses.get(i)).collect())
}

/// The `src` and `dst` address columns, which must be equally long.
pub(super) fn address_pairs(src: &Bound<'_, PyAny>, dst: &Bound<'_, PyAny>) -> PyResult<(Vec<u128>, Vec<u128>)> {
    let (srcs, dsts) = (addresses(src, "src")?, addresses(dst, "dst")?);
    if dsts.len() != srcs.len() {
        return Err(CoreError::InvalidArgument(format!("dst has {} entries, expected {}", dsts.len(), srcs.len())).into());
    }
    Ok((srcs, dsts))
}

pub(super) fn column<'py, T: Element + Copy>(obj: &Bound<'py, PyAny>, name: &str, bounds: (i128, i128), count: usize) -> PyResult<Vec<T>> {
    Ok(column_in_place(obj, name, bounds, count)?.as_slice()?.to_vec())
}

/// A column of `count` values, read in place.
pub(super) fn column_in_place<'py, T: Element + Copy>(
    obj: &Bound<'py, PyAny>,
    name: &str,
    bounds: (i128, i128),
    count: usize,
) -> PyResult<PyReadonlyArray1<'py, T>> {
    let values = as_array::<T>(obj, name, bounds)?.readonly();
    if values.len() != count {
        return Err(CoreError::InvalidArgument(format!("{name} has {} entries, expected {count}", values.len())).into());
    }
    Ok(values)
}
