//! The exceptions isolane raises, and the mapping of the core's errors onto them.
//!
//! Every error the core returns reaches Python through `From<CoreError> for PyErr`, so the
//! bindings use `?`; a pcap error that should name its file goes through [`with_path`].
//!
//! | `CoreError`                               | Python                                      |
//! |-------------------------------------------|---------------------------------------------|
//! | `Pcap`                                    | `PcapError(IsolaneError)`                   |
//! | `InvalidBatch`                            | `BatchError(IsolaneError, ValueError)`      |
//! | `InvalidSpec`, `InvalidArgument`          | `EngineError(IsolaneError, ValueError)`     |
//! | `NoTenant`                                | `NoTenantError(EngineError, KeyError)`      |
//! | `RuleIndex`                               | `RuleIndexError(EngineError, IndexError)`   |
//! | `Capture`                                 | `CaptureError(IsolaneError, OSError)`; EPERM and EACCES: `CapturePermissionError(CaptureError, PermissionError)` |
//! | `Io`                                      | `OSError` (its errno subclass)              |
//!
//! The classes with two bases keep `except ValueError` (or `KeyError`, `IndexError`) working
//! for callers written before them; `create_exception!` makes one base only, so they are made
//! with `type(name, bases, namespace)` the first time they are needed.

use std::ffi::CStr;
use std::path::Path;

use pyo3::create_exception;
use pyo3::exceptions::{PyBaseException, PyException, PyIndexError, PyKeyError, PyOSError, PyPermissionError, PyValueError};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyTuple, PyType};

use crate::error::CoreError;
use crate::yaml;

create_exception!(_core, IsolaneError, PyException, "Base class of isolane's errors.");
create_exception!(_core, PcapError, IsolaneError, "A capture file that is not valid pcap/pcapng; `path`, `offset` and `packet` say where.");
create_exception!(_core, YamlError, IsolaneError, "A YAML text that is not one document by isolane's rules; `line` and `column` say where.");
create_exception!(_core, DuplicateKeyError, YamlError, "A YAML mapping that repeats a key at `line` and `column`; `first_line` has the first.");

/// An isolane exception class that is also a builtin one (made at first use, then kept).
pub(crate) struct DualError {
    name: &'static str,
    doc: &'static CStr,
    /// The isolane parent (`None`: `IsolaneError`) and the builtin.
    parent: Option<&'static DualError>,
    builtin: fn(Python<'_>) -> Bound<'_, PyType>,
    class: PyOnceLock<Py<PyType>>,
}

pub(crate) static ENGINE_ERROR: DualError = DualError {
    name: "EngineError",
    doc: c"A spec, rule or argument isolane's engine refuses (also a ValueError); the message says which part and why.",
    parent: None,
    builtin: |py| py.get_type::<PyValueError>(),
    class: PyOnceLock::new(),
};

pub(crate) static BATCH_ERROR: DualError = DualError {
    name: "BatchError",
    doc: c"Arrays that do not describe a packet batch (also a ValueError).",
    parent: None,
    builtin: |py| py.get_type::<PyValueError>(),
    class: PyOnceLock::new(),
};

pub(crate) static NO_TENANT_ERROR: DualError = DualError {
    name: "NoTenantError",
    doc: c"A tenant the engine does not have (also a KeyError).",
    parent: Some(&ENGINE_ERROR),
    builtin: |py| py.get_type::<PyKeyError>(),
    class: PyOnceLock::new(),
};

pub(crate) static RULE_INDEX_ERROR: DualError = DualError {
    name: "RuleIndexError",
    doc: c"A rule edit at an index the tenant's rules do not have (also an IndexError).",
    parent: Some(&ENGINE_ERROR),
    builtin: |py| py.get_type::<PyIndexError>(),
    class: PyOnceLock::new(),
};

pub(crate) static CAPTURE_ERROR: DualError = DualError {
    name: "CaptureError",
    doc: c"A live capture that cannot be opened or read (also an OSError; `errno` is the kernel's answer, or None).",
    parent: None,
    builtin: |py| py.get_type::<PyOSError>(),
    class: PyOnceLock::new(),
};

pub(crate) static CAPTURE_PERMISSION_ERROR: DualError = DualError {
    name: "CapturePermissionError",
    doc: c"A live capture the process lacks the privileges for (also a PermissionError); the message says which.",
    parent: Some(&CAPTURE_ERROR),
    builtin: |py| py.get_type::<PyPermissionError>(),
    class: PyOnceLock::new(),
};

/// Every class made this way, for the module to export.
pub(crate) static DUAL_ERRORS: [&DualError; 6] = [&ENGINE_ERROR, &BATCH_ERROR, &NO_TENANT_ERROR, &RULE_INDEX_ERROR, &CAPTURE_ERROR, &CAPTURE_PERMISSION_ERROR];

impl DualError {
    pub(crate) fn name(&self) -> &'static str {
        self.name
    }

    pub(crate) fn type_object<'py>(&self, py: Python<'py>) -> PyResult<&Bound<'py, PyType>> {
        self.class.get_or_try_init(py, || self.make(py)).map(|class| class.bind(py))
    }

    fn make(&self, py: Python<'_>) -> PyResult<Py<PyType>> {
        let parent = match self.parent {
            Some(parent) => parent.type_object(py)?.clone(),
            None => py.get_type::<IsolaneError>(),
        };
        let bases = PyTuple::new(py, [parent, (self.builtin)(py)])?;
        let namespace = PyDict::new(py);
        namespace.set_item("__doc__", self.doc.to_str().expect("the docs are UTF-8"))?;
        namespace.set_item("__module__", "isolane._core")?;
        // KeyError's __str__ shows its argument's repr; these show the message as it is.
        namespace.set_item("__str__", py.get_type::<PyBaseException>().getattr("__str__")?)?;
        let class = py.get_type::<PyType>().call1((self.name, bases, namespace))?;
        Ok(class.cast_into::<PyType>()?.unbind())
    }

    /// An instance with `message`; if the class cannot be made, the error that says why.
    pub(crate) fn new_err(&'static self, message: String) -> PyErr {
        Python::attach(|py| match self.type_object(py) {
            Ok(class) => PyErr::from_type(class.clone(), message),
            Err(err) => err,
        })
    }
}

impl From<CoreError> for PyErr {
    fn from(err: CoreError) -> PyErr {
        to_py_err(err, None)
    }
}

/// `err` with the file it is about: a pcap error's message and `path` name it, and an OS
/// error is raised as `OSError(errno, message, path)`.
pub(super) fn with_path(err: CoreError, path: &Path) -> PyErr {
    to_py_err(err, Some(path))
}

fn to_py_err(err: CoreError, path: Option<&Path>) -> PyErr {
    let shown = path.map(|p| p.display().to_string());
    let message = err.to_string();
    match err {
        CoreError::Pcap { offset, packet, .. } => Python::attach(|py| {
            let place = shown.as_deref().unwrap_or("<capture>");
            let err = PcapError::new_err(format!("{place}: {message}"));
            let value = err.value(py);
            // Attributes for programs that handle the error; the message already says it all.
            let _ = value.setattr("path", shown);
            let _ = value.setattr("offset", offset);
            let _ = value.setattr("packet", packet);
            err
        }),
        CoreError::Yaml(err) => yaml_error(err),
        CoreError::InvalidBatch(_) => BATCH_ERROR.new_err(message),
        CoreError::InvalidSpec { .. } | CoreError::InvalidArgument(_) => ENGINE_ERROR.new_err(message),
        CoreError::NoTenant(_) => NO_TENANT_ERROR.new_err(message),
        CoreError::RuleIndex { .. } => RULE_INDEX_ERROR.new_err(message),
        CoreError::Capture { errno, .. } => capture_error(message, errno),
        CoreError::Io(io) => os_error(&io, shown),
    }
}

/// A `CaptureError` (a `CapturePermissionError` for EPERM and EACCES) with its errno.
fn capture_error(message: String, errno: Option<i32>) -> PyErr {
    let class = match errno {
        Some(libc::EPERM | libc::EACCES) => &CAPTURE_PERMISSION_ERROR,
        _ => &CAPTURE_ERROR,
    };
    let err = class.new_err(message);
    Python::attach(|py| {
        let _ = err.value(py).setattr("errno", errno);
    });
    err
}

/// An OSError that reads like Python's own: `[Errno 2] No such file or directory: 'x.pcap'`,
/// with the errno's text from `os.strerror` (Rust's own text adds "(os error 2)").
fn os_error(io: &std::io::Error, path: Option<String>) -> PyErr {
    let Some(errno) = io.raw_os_error() else {
        return match path {
            Some(path) => PyOSError::new_err(format!("{path}: {io}")),
            None => PyOSError::new_err(io.to_string()),
        };
    };
    let text = Python::attach(|py| py.import("os")?.call_method1("strerror", (errno,))?.extract::<String>()).unwrap_or_else(|_| io.to_string());
    match path {
        Some(path) => PyOSError::new_err((errno, text, path)),
        None => PyOSError::new_err((errno, text)),
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

#[cfg(test)]
mod tests {
    use std::io;

    use pyo3::exceptions::{PyFileNotFoundError, PyIndexError, PyKeyError, PyOSError, PyValueError};

    use super::*;

    /// The exception's class name, its `str()`, and the exception.
    fn raised(err: CoreError, path: Option<&Path>) -> (String, String, PyErr) {
        Python::initialize();
        let err = match path {
            Some(path) => with_path(err, path),
            None => PyErr::from(err),
        };
        Python::attach(|py| {
            let value = err.value(py);
            (value.get_type().name().unwrap().to_string(), value.str().unwrap().to_string(), err.clone_ref(py))
        })
    }

    fn is(err: &PyErr, class: &DualError) -> bool {
        Python::attach(|py| err.matches(py, class.type_object(py).unwrap()).unwrap())
    }

    #[test]
    fn specs_and_arguments_are_engine_errors_and_value_errors() {
        let (class, message, err) = raised(CoreError::spec_at("tenant 0 ('a')", "meter kind 7 is not 0 (none)"), None);
        assert_eq!((class.as_str(), message.as_str()), ("EngineError", "tenant 0 ('a'): meter kind 7 is not 0 (none)"));
        Python::attach(|py| assert!(err.is_instance_of::<IsolaneError>(py) && err.is_instance_of::<PyValueError>(py)));
        let (class, message, err) = raised(CoreError::InvalidArgument("threads must be at least 1".into()), None);
        assert_eq!((class.as_str(), message.as_str()), ("EngineError", "threads must be at least 1"));
        assert!(is(&err, &ENGINE_ERROR));
    }

    #[test]
    fn no_tenant_is_an_engine_error_and_a_key_error_that_shows_its_message() {
        let (class, message, err) = raised(CoreError::NoTenant("blue".into()), None);
        assert_eq!((class.as_str(), message.as_str()), ("NoTenantError", "no tenant 'blue'"));
        assert!(is(&err, &ENGINE_ERROR) && is(&err, &NO_TENANT_ERROR));
        Python::attach(|py| assert!(err.is_instance_of::<PyKeyError>(py) && err.is_instance_of::<IsolaneError>(py)));
    }

    #[test]
    fn rule_index_is_an_engine_error_and_an_index_error() {
        let (class, message, err) = raised(CoreError::RuleIndex { what: "policy rule", index: 7, rules: 2, insert: false }, None);
        assert_eq!((class.as_str(), message.as_str()), ("RuleIndexError", "no policy rule 7 (2 policy rules)"));
        assert!(is(&err, &ENGINE_ERROR) && is(&err, &RULE_INDEX_ERROR));
        Python::attach(|py| assert!(err.is_instance_of::<PyIndexError>(py) && err.is_instance_of::<PyValueError>(py)));
    }

    #[test]
    fn bad_batches_are_batch_errors_and_value_errors() {
        let (class, message, err) = raised(CoreError::InvalidBatch("offsets has 2 entries for 3 packets".into()), None);
        assert_eq!((class.as_str(), message.as_str()), ("BatchError", "offsets has 2 entries for 3 packets"));
        assert!(is(&err, &BATCH_ERROR) && !is(&err, &ENGINE_ERROR));
        Python::attach(|py| assert!(err.is_instance_of::<PyValueError>(py) && err.is_instance_of::<IsolaneError>(py)));
    }

    #[test]
    fn pcap_errors_name_the_file_and_place() {
        let pcap = || CoreError::Pcap { offset: 40, packet: 1, reason: "record runs past the end of data".into() };
        let (class, message, err) = raised(pcap(), Some(Path::new("/tmp/x.pcap")));
        assert_eq!((class.as_str(), message.as_str()), ("PcapError", "/tmp/x.pcap: byte offset 40, packet 1: record runs past the end of data"));
        Python::attach(|py| {
            assert!(err.is_instance_of::<IsolaneError>(py) && !err.is_instance_of::<PyValueError>(py));
            let value = err.value(py);
            assert_eq!(value.getattr("path").unwrap().extract::<String>().unwrap(), "/tmp/x.pcap");
            assert_eq!((value.getattr("offset").unwrap().extract::<u64>().unwrap(), value.getattr("packet").unwrap().extract::<u64>().unwrap()), (40, 1));
        });
        let (_, message, _) = raised(pcap(), None);
        assert!(message.starts_with("<capture>: byte offset 40"), "{message}");
    }

    #[test]
    fn io_errors_are_os_errors_with_their_errno_and_path() {
        let missing = || CoreError::Io(io::Error::from_raw_os_error(2));
        let (class, _, err) = raised(missing(), Some(Path::new("/nowhere.pcap")));
        assert_eq!(class, "FileNotFoundError");
        Python::attach(|py| {
            // The instance is what `except` matches (on Python 3.11 the error's own type stays OSError).
            let value = err.value(py);
            assert!(value.is_instance_of::<PyFileNotFoundError>() && !value.is_instance_of::<IsolaneError>());
            assert_eq!(err.value(py).getattr("filename").unwrap().extract::<String>().unwrap(), "/nowhere.pcap");
        });
        let (_, _, err) = raised(missing(), None);
        Python::attach(|py| assert!(err.is_instance_of::<PyOSError>(py)));
    }

    #[test]
    fn os_errors_read_like_pythons_own() {
        let (_, message, _) = raised(CoreError::Io(io::Error::from_raw_os_error(2)), Some(Path::new("/nowhere.pcap")));
        assert_eq!(message, "[Errno 2] No such file or directory: '/nowhere.pcap'");
    }

    #[test]
    fn capture_errors_are_os_errors_and_permission_errors_when_the_kernel_refused() {
        let refused = CoreError::Capture { message: "cannot open an AF_PACKET socket (...): Operation not permitted".into(), errno: Some(libc::EPERM) };
        let (class, message, err) = raised(refused, None);
        assert_eq!((class.as_str(), message.as_str()), ("CapturePermissionError", "cannot open an AF_PACKET socket (...): Operation not permitted"));
        assert!(is(&err, &CAPTURE_ERROR));
        Python::attach(|py| {
            assert!(err.is_instance_of::<PyPermissionError>(py) && err.is_instance_of::<IsolaneError>(py));
            assert_eq!(err.value(py).getattr("errno").unwrap().extract::<i32>().unwrap(), libc::EPERM);
        });
        let (class, message, err) = raised(CoreError::Capture { message: "no device 'x': No such device".into(), errno: Some(libc::ENODEV) }, None);
        assert_eq!((class.as_str(), message.as_str()), ("CaptureError", "no device 'x': No such device"));
        Python::attach(|py| assert!(err.is_instance_of::<PyOSError>(py) && !err.is_instance_of::<PyPermissionError>(py)));
        let (_, _, err) = raised(CoreError::Capture { message: "the capture on 'x' is closed".into(), errno: None }, None);
        Python::attach(|py| assert!(err.value(py).getattr("errno").unwrap().is_none()));
    }
}
