//! Microbursts across the boundary: events, flows and per-scope statistics out (docs/bursts.md).

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

use crate::bursts::{self, BurstEvent, FlowRow, Scope, ScopeKey, ScopeStats};

/// One scope's statistics as `Engine.burst_stats` gives them.
pub(super) fn burst_stats_dict<'py>(py: Python<'py>, stats: &ScopeStats) -> PyResult<Bound<'py, PyDict>> {
    let entry = PyDict::new(py);
    let (scope, tenant, cls) = match &stats.key {
        ScopeKey::Port => (Scope::Port, None, None),
        ScopeKey::Tenant(name) => (Scope::Tenant, Some(name.as_str()), None),
        ScopeKey::Class(name, cls) => (Scope::Class, Some(name.as_str()), Some(*cls)),
    };
    entry.set_item("scope", scope as u8)?;
    entry.set_item("tenant", tenant)?;
    entry.set_item("cls", cls)?;
    let (config, totals) = (&stats.config, &stats.totals);
    entry.set_item("window_ns", config.window_ns)?;
    entry.set_item("threshold_bps", config.threshold_bps)?;
    entry.set_item("queue", config.queue.map(|q| (q.rise_bytes, q.fall_bytes)))?;
    entry.set_item("rate_events", totals.rate_events)?;
    entry.set_item("queue_events", totals.queue_events)?;
    entry.set_item("time_in_burst_ns", totals.time_in_burst_ns)?;
    entry.set_item("peak_window_bps", totals.peak_window_bps)?;
    entry.set_item("max_queue_bytes", totals.max_queue_bytes)?;
    let polls = stats.polls.iter().map(|view| {
        let poll = PyDict::new(py);
        poll.set_item("interval_ns", view.interval_ns)?;
        poll.set_item("polls", view.polls)?;
        poll.set_item("peak_bps", view.peak_bps)?;
        poll.set_item("mean_bps", view.mean_bps)?;
        poll.set_item("queue_polls", view.queue_polls)?;
        poll.set_item("queue_nonzero_polls", view.queue_nonzero_polls)?;
        poll.set_item("queue_max_at_polls", view.queue_max_at_polls)?;
        Ok(poll)
    });
    entry.set_item("polls", PyList::new(py, polls.collect::<PyResult<Vec<_>>>()?)?)?;
    Ok(entry)
}

/// A burst event's fields as (name, numpy type, byte offset), and its size.
#[pyfunction]
pub(super) fn burst_layout(py: Python<'_>) -> PyResult<(Bound<'_, PyList>, usize)> {
    Ok((PyList::new(py, bursts::event_fields())?, std::mem::size_of::<BurstEvent>()))
}

/// A burst flow's fields as (name, numpy type, byte offset), and its size.
#[pyfunction]
pub(super) fn burst_flow_layout(py: Python<'_>) -> PyResult<(Bound<'_, PyList>, usize)> {
    Ok((PyList::new(py, bursts::flow_fields())?, std::mem::size_of::<FlowRow>()))
}
