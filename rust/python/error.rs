//! The exceptions isolane raises, and the mapping of the core's errors onto them.

use std::path::PathBuf;

use pyo3::create_exception;
use pyo3::exceptions::{PyException, PyOSError, PyValueError};
use pyo3::prelude::*;

use crate::error::CoreError;
use crate::yaml;

create_exception!(_core, IsolaneError, PyException, "Base class of isolane's errors.");
create_exception!(_core, PcapError, IsolaneError, "A capture file that is not valid pcap/pcapng; `path`, `offset` and `packet` say where.");
create_exception!(_core, YamlError, IsolaneError, "A YAML text that is not one document by isolane's rules; `line` and `column` say where.");
create_exception!(_core, DuplicateKeyError, YamlError, "A YAML mapping that repeats a key at `line` and `column`; `first_line` has the first.");

pub(super) fn to_py_err(err: CoreError, path: Option<&PathBuf>) -> PyErr {
    let shown = path.map(|p| p.display().to_string());
    match err {
        CoreError::Pcap { offset, packet, reason } => Python::attach(|py| {
            let place = shown.as_deref().unwrap_or("<capture>");
            let err = PcapError::new_err(format!("{place}: byte offset {offset}, packet {packet}: {reason}"));
            let value = err.value(py);
            // Attributes for programs that handle the error; the message already says it all.
            let _ = value.setattr("path", shown);
            let _ = value.setattr("offset", offset);
            let _ = value.setattr("packet", packet);
            err
        }),
        CoreError::Yaml(err) => yaml_error(err),
        CoreError::InvalidBatch(message) => PyValueError::new_err(message),
        CoreError::Io(io) => match shown {
            Some(place) => PyOSError::new_err((io.raw_os_error().unwrap_or(0), io.to_string(), place)),
            None => PyOSError::new_err(io.to_string()),
        },
    }
}

fn yaml_error(err: yaml::YamlError) -> PyErr {
    Python::attach(|py| {
        let (exception, line, column) = match &err {
            yaml::YamlError::Invalid { line, column, .. } => (YamlError::new_err(err.to_string()), *line, *column),
            yaml::YamlError::DuplicateKey { line, column, first_line, .. } => {
                let exception = DuplicateKeyError::new_err(err.to_string());
                let _ = exception.value(py).setattr("first_line", *first_line);
                (exception, *line, *column)
            }
        };
        let value = exception.value(py);
        let _ = value.setattr("line", line);
        let _ = value.setattr("column", column);
        exception
    })
}
