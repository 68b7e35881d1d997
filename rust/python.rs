//! The PyO3 bindings, kept thin: convert arrays, release the GIL, call the core, map errors.
//!
//! Per-packet work never touches a Python object: arrays go in as slices and records come back
//! as one numpy buffer that Python views through `isolane.PARSED_DTYPE`.

mod batch;
mod bursts;
mod capture;
mod codes;
mod convert;
mod engine;
mod error;
#[cfg(target_os = "linux")]
mod live;
mod plain_rules;
mod rule_rows;
mod rule_table;
mod shadowed;
mod timeline;
mod yaml;

use std::panic::{catch_unwind, AssertUnwindSafe};

use pyo3::prelude::*;

use batch::{parse_records, read_pcap, record_layout, PacketBatch, PcapIterator};
use bursts::{burst_flow_layout, burst_layout};
use capture::CaptureReader;
use engine::{processed_layout, profile_event_layout, stats_layout, verdict_layout, Engine};
use error::{DuplicateKeyError, IsolaneError, PcapError, YamlError};
use rule_rows::rule_row_layout;
use rule_table::RuleTable;
use shadowed::shadowed_rules;
use yaml::{load_yaml, stream_yaml, YamlStream};

/// Runs core work without the GIL, turning a panic into an exception instead of letting it
/// cross into Python.
fn without_gil<T: Send>(py: Python<'_>, work: impl FnOnce() -> T + Send) -> PyResult<T> {
    py.detach(|| catch_unwind(AssertUnwindSafe(work))).map_err(|panic| internal_error(panic_message(&*panic)))
}

/// What a caught panic says.
fn panic_message(panic: &(dyn std::any::Any + Send)) -> &str {
    panic.downcast_ref::<String>().map(String::as_str).or_else(|| panic.downcast_ref::<&str>().copied()).unwrap_or("unknown panic")
}

/// A panic in the core, caught, as the error Python sees.
fn internal_error(what: &str) -> PyErr {
    IsolaneError::new_err(format!("internal error in isolane's core (please report it): {what}"))
}

#[pymodule(gil_used = false)]
mod _core {
    #[cfg(target_os = "linux")]
    #[pymodule_export]
    use super::live::LiveCapture;
    #[pymodule_export]
    use super::{
        burst_flow_layout, burst_layout, codes::codes, load_yaml, parse_records, processed_layout, profile_event_layout, read_pcap, record_layout,
        rule_row_layout, shadowed_rules, stats_layout, stream_yaml, timeline::TimelineView, verdict_layout, CaptureReader, Engine, PacketBatch, PcapIterator,
        RuleTable, YamlStream,
    };

    #[pymodule_init]
    fn init(module: &pyo3::Bound<'_, pyo3::types::PyModule>) -> pyo3::PyResult<()> {
        use pyo3::prelude::*;
        let py = module.py();
        module.add("IsolaneError", py.get_type::<super::IsolaneError>())?;
        module.add("PcapError", py.get_type::<super::PcapError>())?;
        for class in super::error::DUAL_ERRORS {
            module.add(class.name(), class.type_object(py)?)?;
        }
        module.add("YamlError", py.get_type::<super::YamlError>())?;
        module.add("DuplicateKeyError", py.get_type::<super::DuplicateKeyError>())?;
        module.add("VXLAN_PORT", crate::parse::VXLAN_PORT)?;
        module.add("GENEVE_PORT", crate::parse::GENEVE_PORT)?;
        module.add("SERIES_FIELDS", super::timeline::SERIES_FIELDS.to_vec())?;
        Ok(())
    }
}
