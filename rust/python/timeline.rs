//! An engine's time series (`Engine.timeline()`; docs/report.md, "Timeline") as numpy arrays:
//! one 3-D array per level (series x field x bin), the fields named by `SERIES_FIELDS`.

use numpy::{PyArray1, PyArrayMethods};
use pyo3::prelude::*;

use crate::shaping::LogHistogram;
use crate::timeline::{Bin, ClassKey, Series, Timeline};

/// The fields of a series, in the order of the arrays' second axis.
pub(super) const SERIES_FIELDS: [&str; 8] = ["bytes", "packets", "dropped", "conforming_dropped", "peak_bytes", "delay_count", "delay_sum_ns", "delay_max_ns"];

/// The fields by [`SERIES_FIELDS`].
const SERIES_COLUMNS: [fn(&Bin) -> u64; 8] =
    [|b| b.bytes, |b| b.packets, |b| b.dropped, |b| b.conforming_dropped, |b| b.peak_bytes, |b| b.delay_count, |b| b.delay_sum_ns, |b| b.delay_max_ns];

/// What `Engine.timeline()` returns: the bins' geometry, the series' names and their values.
#[pyclass(frozen, module = "isolane._core")]
pub struct TimelineView {
    /// The burst window: `peak_bytes` is the most bytes in one window inside a bin.
    #[pyo3(get)]
    window_ns: u64,
    /// Every bin's width: the window times a power of two.
    #[pyo3(get)]
    bin_ns: u64,
    /// Bin 0's start (ns since the epoch); None before the first packet.
    #[pyo3(get)]
    start_ns: Option<u64>,
    #[pyo3(get)]
    bins: usize,
    /// Tenant names (None: packets of no tenant), by the first axis of `tenant_series`.
    #[pyo3(get)]
    tenants: Vec<Option<String>>,
    /// (tenant, class id) (None: no tenant, or the tenant's packets in no class), by the first
    /// axis of `class_series`.
    #[pyo3(get)]
    classes: Vec<ClassKey>,
    /// uint64, (tenants, SERIES_FIELDS, bins).
    #[pyo3(get)]
    tenant_series: Py<PyAny>,
    /// uint64, (classes, SERIES_FIELDS, bins).
    #[pyo3(get)]
    class_series: Py<PyAny>,
    /// int64, (tenants, 2): first and last arrival, -1 when none.
    #[pyo3(get)]
    tenant_spans: Py<PyAny>,
    /// int64, (classes, 2).
    #[pyo3(get)]
    class_spans: Py<PyAny>,
    /// uint64, (classes, 5): how long the shapers held the class's packets: count, p50, p99,
    /// p99.9, max (ns).
    #[pyo3(get)]
    class_holds: Py<PyAny>,
}

/// A timeline's numbers, copied out under the engine's lock (no series is cloned), to become
/// numpy arrays once the lock is let go.
pub(super) struct TimelineData {
    window_ns: u64,
    bin_ns: u64,
    start_ns: Option<u64>,
    bins: usize,
    tenants: Vec<Option<String>>,
    classes: Vec<ClassKey>,
    tenant_series: Vec<u64>,
    class_series: Vec<u64>,
    tenant_spans: Vec<i64>,
    class_spans: Vec<i64>,
    class_holds: Vec<u64>,
}

impl TimelineData {
    pub(super) fn of(timeline: &Timeline) -> TimelineData {
        let bins = timeline.bins();
        let (tenants, classes) = (timeline.tenant_series(), timeline.class_series());
        TimelineData {
            window_ns: timeline.window_ns(),
            bin_ns: timeline.bin_ns(),
            start_ns: timeline.start_ns(),
            bins,
            tenant_series: columns(tenants.iter().map(|(_, s)| s), bins),
            class_series: columns(classes.iter().map(|(_, s)| s), bins),
            tenant_spans: spans(tenants.iter().map(|(_, s)| s)),
            class_spans: spans(classes.iter().map(|(_, s)| s)),
            class_holds: classes.iter().flat_map(|(_, series)| hold_summary(&series.hold_ns)).collect(),
            tenants: tenants.iter().map(|(name, _)| name.clone()).collect(),
            classes: classes.iter().map(|(key, _)| key.clone()).collect(),
        }
    }
}

impl TimelineView {
    pub(super) fn new(py: Python<'_>, data: TimelineData) -> PyResult<TimelineView> {
        let (tenants, classes, fields, bins) = (data.tenants.len(), data.classes.len(), SERIES_FIELDS.len(), data.bins);
        let array = |values: Vec<u64>, shape: [usize; 3]| -> PyResult<Py<PyAny>> { Ok(PyArray1::from_vec(py, values).reshape(shape)?.into_any().unbind()) };
        let pairs = |values: Vec<i64>, count: usize| -> PyResult<Py<PyAny>> { Ok(PyArray1::from_vec(py, values).reshape([count, 2])?.into_any().unbind()) };
        Ok(TimelineView {
            window_ns: data.window_ns,
            bin_ns: data.bin_ns,
            start_ns: data.start_ns,
            bins,
            tenant_series: array(data.tenant_series, [tenants, fields, bins])?,
            class_series: array(data.class_series, [classes, fields, bins])?,
            tenant_spans: pairs(data.tenant_spans, tenants)?,
            class_spans: pairs(data.class_spans, classes)?,
            class_holds: PyArray1::from_vec(py, data.class_holds).reshape([classes, 5])?.into_any().unbind(),
            tenants: data.tenants,
            classes: data.classes,
        })
    }
}

/// Every series' fields (by [`SERIES_FIELDS`]) over its first `bins` bins, zeros where it has none.
fn columns<'a>(series: impl ExactSizeIterator<Item = &'a Series>, bins: usize) -> Vec<u64> {
    let mut values = Vec::with_capacity(series.len() * SERIES_FIELDS.len() * bins);
    for s in series {
        for field in SERIES_COLUMNS {
            match s.bins.get(..bins) {
                Some(used) => values.extend(used.iter().map(field)),
                None => values.extend(std::iter::repeat_n(0, bins)),
            }
        }
    }
    values
}

fn spans<'a>(series: impl Iterator<Item = &'a Series>) -> Vec<i64> {
    series.flat_map(|s| s.first_ns.map_or([-1, -1], |first| [first as i64, s.last_ns as i64])).collect()
}

fn hold_summary(hold: &LogHistogram) -> [u64; 5] {
    [hold.count(), hold.p50().unwrap_or(0), hold.p99().unwrap_or(0), hold.p999().unwrap_or(0), hold.max()]
}
