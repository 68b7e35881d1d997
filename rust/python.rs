//! The PyO3 bindings, kept thin: convert arrays, release the GIL, call the core, map errors.
//!
//! Per-packet work never touches a Python object: arrays go in as slices and records come back
//! as one numpy buffer that Python views through `isolane.PARSED_DTYPE`.

use std::fs::File;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::PathBuf;
use std::sync::Mutex;

use numpy::{dtype, Element, PyArray1, PyArrayMethods, PyReadonlyArray1, PyUntypedArrayMethods};
use pyo3::create_exception;
use pyo3::exceptions::{PyException, PyOSError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

use crate::batch::{linktype, BatchView, LinkTypes, PacketBuffers};
use crate::bursts::{self, BurstEvent, FlowRow, Scope, ScopeKey, ScopeStats};
use crate::classify::{self, Key, Rule};
use crate::enforce::{self, BurstColumns, ContractColumns, MeterColumns, Processed, QosColumns, QosStats, ShaperColumns};
use crate::engine::{self, RuleEdit, RuleRow, TablesSpec, TenantSpec, Verdict};
use crate::error::CoreError;
use crate::parse::{self, ParseConfig, PacketInfo, PortSet};
use crate::memory;
use crate::pcap::{self, Format, Limits, PcapReader};

create_exception!(_core, IsolaneError, PyException, "Base class of isolane's errors.");
create_exception!(
    _core,
    PcapError,
    IsolaneError,
    "A capture file that is not valid pcap/pcapng; `path`, `offset` and `packet` say where."
);

/// A packet batch's caps when streamed: enough to amortise the call, small enough to bound memory.
const MAX_BATCH_BYTES: usize = 32 << 20;
/// Room beyond the cap for the record that crosses it and one read ahead.
const BATCH_SLACK: usize = 2 << 20;

fn to_py_err(err: CoreError, path: Option<&PathBuf>) -> PyErr {
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
        CoreError::InvalidBatch(message) => PyValueError::new_err(message),
        CoreError::Io(io) => match shown {
            Some(place) => PyOSError::new_err((io.raw_os_error().unwrap_or(0), io.to_string(), place)),
            None => PyOSError::new_err(io.to_string()),
        },
    }
}

/// Runs core work without the GIL, turning a panic into an exception instead of letting it
/// cross into Python.
fn without_gil<T: Send>(py: Python<'_>, work: impl FnOnce() -> T + Send) -> PyResult<T> {
    py.detach(|| catch_unwind(AssertUnwindSafe(work))).map_err(|panic| {
        let what = panic
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| panic.downcast_ref::<&str>().copied())
            .unwrap_or("unknown panic");
        IsolaneError::new_err(format!("internal error in isolane's core (please report it): {what}"))
    })
}

/// A numpy array of `T` for `obj` without copying when it already is one (contiguous).
/// Otherwise integers of any width convert when every value fits `T`'s range `bounds`
/// (Python lists become int64, which numpy will not cast to unsigned by itself); anything
/// else converts only by numpy's same-kind casting, so floats never pass as integers.
fn as_array<'py, T: Element>(obj: &Bound<'py, PyAny>, name: &str, bounds: (i128, i128)) -> PyResult<Bound<'py, PyArray1<T>>> {
    if let Ok(array) = obj.cast::<PyArray1<T>>() {
        if array.is_contiguous() {
            return Ok(array.clone());
        }
    }
    let py = obj.py();
    let np = py.import("numpy")?;
    let context = |err: PyErr| PyValueError::new_err(format!("{name}: {}", err.value(py)));
    let array = np.call_method1("asarray", (obj,)).map_err(context)?;
    let is_integer = matches!(array.getattr("dtype")?.getattr("kind")?.extract::<String>()?.as_str(), "i" | "u" | "b");
    if is_integer && array.getattr("size")?.extract::<usize>()? > 0 {
        let (low, high): (i128, i128) = (array.call_method0("min")?.extract()?, array.call_method0("max")?.extract()?);
        if low < bounds.0 || high > bounds.1 {
            return Err(PyValueError::new_err(format!(
                "{name}: values from {low} to {high} do not fit {} .. {}",
                bounds.0, bounds.1
            )));
        }
    }
    let kwargs = PyDict::new(py);
    kwargs.set_item("casting", if is_integer { "unsafe" } else { "same_kind" })?;
    let converted = array
        .call_method("astype", (dtype::<T>(py),), Some(&kwargs))
        .and_then(|a| np.call_method1("ascontiguousarray", (a,)))
        .map_err(context)?;
    converted
        .cast_into::<PyArray1<T>>()
        .map_err(|_| PyValueError::new_err(format!("{name} must be a one-dimensional array")))
}

const U8: (i128, i128) = (0, u8::MAX as i128);
const U16: (i128, i128) = (0, u16::MAX as i128);
const U32: (i128, i128) = (0, u32::MAX as i128);
const U64: (i128, i128) = (0, u64::MAX as i128);
const I64: (i128, i128) = (i64::MIN as i128, i64::MAX as i128);

enum LinkTypeStore {
    Uniform(u16),
    PerPacket(Py<PyArray1<u16>>),
}

/// Packets as numpy arrays: bytes in one buffer, plus per-packet offsets, captured lengths,
/// wire lengths, timestamps (ns) and link type.
#[pyclass(frozen, module = "isolane._core")]
pub struct PacketBatch {
    data: Py<PyArray1<u8>>,
    offsets: Py<PyArray1<u64>>,
    lengths: Py<PyArray1<u32>>,
    wire_lengths: Py<PyArray1<u32>>,
    timestamps_ns: Py<PyArray1<i64>>,
    link_types: LinkTypeStore,
}

impl PacketBatch {
    fn from_buffers(py: Python<'_>, buffers: PacketBuffers) -> Self {
        let link_types = match buffers.uniform_link_type() {
            Some(link_type) => LinkTypeStore::Uniform(link_type),
            None => LinkTypeStore::PerPacket(PyArray1::from_vec(py, buffers.link_types).unbind()),
        };
        PacketBatch {
            data: PyArray1::from_vec(py, buffers.data).unbind(),
            offsets: PyArray1::from_vec(py, buffers.offsets).unbind(),
            lengths: PyArray1::from_vec(py, buffers.lengths).unbind(),
            wire_lengths: PyArray1::from_vec(py, buffers.wire_lengths).unbind(),
            timestamps_ns: PyArray1::from_vec(py, buffers.timestamps_ns).unbind(),
            link_types,
        }
    }

    /// A batch whose packets live in `data` (a mapped file) at the places `index` says.
    fn from_index(py: Python<'_>, data: Bound<'_, PyArray1<u8>>, index: PacketBuffers) -> Self {
        PacketBatch { data: data.unbind(), ..Self::from_buffers(py, index) }
    }

    /// Borrows the arrays as slices (validated again: numpy arrays can change after
    /// construction) and runs `work` on them without the GIL.
    fn with_view<T: Send>(&self, py: Python<'_>, work: impl FnOnce(&BatchView<'_>) -> T + Send) -> PyResult<T> {
        let data = self.data.bind(py).readonly();
        let offsets = self.offsets.bind(py).readonly();
        let lengths = self.lengths.bind(py).readonly();
        let wire_lengths = self.wire_lengths.bind(py).readonly();
        let per_packet = match &self.link_types {
            LinkTypeStore::PerPacket(array) => Some(array.bind(py).readonly()),
            LinkTypeStore::Uniform(_) => None,
        };
        let link_types = match (&self.link_types, &per_packet) {
            (LinkTypeStore::Uniform(link_type), _) => LinkTypes::Uniform(*link_type),
            (LinkTypeStore::PerPacket(_), Some(array)) => LinkTypes::PerPacket(array.as_slice()?),
            (LinkTypeStore::PerPacket(_), None) => unreachable!("borrowed above"),
        };
        let (data, offsets, lengths, wire_lengths) =
            (data.as_slice()?, offsets.as_slice()?, lengths.as_slice()?, wire_lengths.as_slice()?);
        let outcome = without_gil(py, || {
            BatchView::new(data, offsets, lengths, wire_lengths, link_types).map(|view| work(&view))
        })?;
        outcome.map_err(|err| to_py_err(err, None))
    }
}

#[pymethods]
impl PacketBatch {
    /// Builds a batch from numpy arrays, without copying those already of the right dtype.
    #[staticmethod]
    #[pyo3(signature = (data, offsets, lengths, timestamps_ns, wire_lengths=None, link_type=None))]
    fn from_arrays(
        py: Python<'_>,
        data: &Bound<'_, PyAny>,
        offsets: &Bound<'_, PyAny>,
        lengths: &Bound<'_, PyAny>,
        timestamps_ns: &Bound<'_, PyAny>,
        wire_lengths: Option<&Bound<'_, PyAny>>,
        link_type: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        let data = if data.is_instance_of::<pyo3::types::PyBytes>() || data.is_instance_of::<pyo3::types::PyByteArray>() {
            py.import("numpy")?.call_method1("frombuffer", (data, "u1"))?.cast_into::<PyArray1<u8>>()?
        } else {
            as_array::<u8>(data, "data", U8)?
        };
        let lengths = as_array::<u32>(lengths, "lengths", U32)?;
        let link_types = match link_type.map(|t| (t, t.extract::<u32>())) {
            None => LinkTypeStore::Uniform(linktype::ETHERNET),
            Some((_, Ok(one))) => LinkTypeStore::Uniform(supported_link_type(one)?),
            Some((link_type, Err(_))) => {
                let array = as_array::<u16>(link_type, "link_type", U16)?;
                for &one in array.readonly().as_slice()? {
                    supported_link_type(u32::from(one))?;
                }
                LinkTypeStore::PerPacket(array.unbind())
            }
        };
        let batch = PacketBatch {
            data: data.unbind(),
            offsets: as_array::<u64>(offsets, "offsets", U64)?.unbind(),
            wire_lengths: match wire_lengths {
                Some(wire) => as_array::<u32>(wire, "wire_lengths", U32)?.unbind(),
                None => PyArray1::from_slice(py, lengths.readonly().as_slice()?).unbind(),
            },
            lengths: lengths.unbind(),
            timestamps_ns: as_array::<i64>(timestamps_ns, "timestamps_ns", I64)?.unbind(),
            link_types,
        };
        let packets = batch.offsets.bind(py).len();
        if batch.timestamps_ns.bind(py).len() != packets {
            return Err(PyValueError::new_err(format!(
                "timestamps_ns has {} entries for {packets} packets",
                batch.timestamps_ns.bind(py).len()
            )));
        }
        batch.with_view(py, |_| ())?;
        Ok(batch)
    }

    #[getter]
    fn data<'py>(&self, py: Python<'py>) -> Bound<'py, PyArray1<u8>> {
        self.data.bind(py).clone()
    }

    #[getter]
    fn offsets<'py>(&self, py: Python<'py>) -> Bound<'py, PyArray1<u64>> {
        self.offsets.bind(py).clone()
    }

    #[getter]
    fn lengths<'py>(&self, py: Python<'py>) -> Bound<'py, PyArray1<u32>> {
        self.lengths.bind(py).clone()
    }

    #[getter]
    fn wire_lengths<'py>(&self, py: Python<'py>) -> Bound<'py, PyArray1<u32>> {
        self.wire_lengths.bind(py).clone()
    }

    #[getter]
    fn timestamps_ns<'py>(&self, py: Python<'py>) -> Bound<'py, PyArray1<i64>> {
        self.timestamps_ns.bind(py).clone()
    }

    /// The link type shared by every packet, or None when they differ (see `link_types`).
    #[getter]
    fn link_type(&self) -> Option<u16> {
        match self.link_types {
            LinkTypeStore::Uniform(link_type) => Some(link_type),
            LinkTypeStore::PerPacket(_) => None,
        }
    }

    /// Every packet's link type.
    #[getter]
    fn link_types<'py>(&self, py: Python<'py>) -> Bound<'py, PyArray1<u16>> {
        match &self.link_types {
            LinkTypeStore::Uniform(link_type) => PyArray1::from_vec(py, vec![*link_type; self.__len__(py)]),
            LinkTypeStore::PerPacket(array) => array.bind(py).clone(),
        }
    }

    /// The captured bytes of packet `index`.
    fn packet<'py>(&self, py: Python<'py>, index: isize) -> PyResult<Bound<'py, pyo3::types::PyBytes>> {
        let count = self.__len__(py) as isize;
        let position = if index < 0 { index + count } else { index };
        if !(0..count).contains(&position) {
            return Err(pyo3::exceptions::PyIndexError::new_err(format!("packet {index} of a batch of {count}")));
        }
        let bytes = self.with_view(py, |view| view.packet(position as usize).to_vec())?;
        Ok(pyo3::types::PyBytes::new(py, &bytes))
    }

    fn __len__(&self, py: Python<'_>) -> usize {
        self.offsets.bind(py).len()
    }

    fn __repr__(&self, py: Python<'_>) -> String {
        let link = match self.link_type() {
            Some(link_type) => link_type.to_string(),
            None => "mixed".to_string(),
        };
        format!("PacketBatch(packets={}, bytes={}, link_type={link})", self.__len__(py), self.data.bind(py).len())
    }
}

fn supported_link_type(link_type: u32) -> PyResult<u16> {
    u16::try_from(link_type)
        .ok()
        .filter(|&t| linktype::is_supported(t))
        .ok_or_else(|| PyValueError::new_err(format!("unsupported link type {link_type}")))
}

fn open(path: &PathBuf) -> PyResult<(File, u64)> {
    let file = File::open(path).map_err(|err| to_py_err(err.into(), Some(path)))?;
    let size = file.metadata().map(|m| m.len()).unwrap_or(0);
    Ok((file, size))
}

/// Below this size a file is read rather than mapped: mapping costs more than it saves.
const MAP_MIN_BYTES: u64 = 1 << 20;

/// A capture file mapped read-only; the mapping lives as long as any array that views it.
#[pyclass(frozen, module = "isolane._core")]
struct MappedCapture {
    map: memmap2::Mmap,
}

/// Reads a whole pcap/pcapng file into one batch. Large files are mapped, not copied: the
/// batch's `data` is the file itself, indexed in place, and read-only.
#[pyfunction]
fn read_pcap(py: Python<'_>, path: PathBuf) -> PyResult<PacketBatch> {
    let (file, size) = open(&path)?;
    if size < MAP_MIN_BYTES {
        let buffers = without_gil(py, || pcap::read_all(file, size as usize))?.map_err(|err| to_py_err(err, Some(&path)))?;
        return Ok(PacketBatch::from_buffers(py, buffers));
    }
    // SAFETY: a read-only mapping, and the numpy view of it is made read-only below. As with
    // numpy.memmap, another process truncating the file while it is mapped would fault on
    // access; iter_pcap reads instead, for captures still being written.
    let map = unsafe { memmap2::MmapOptions::new().populate().map(&file) }.map_err(|err| to_py_err(err.into(), Some(&path)))?;
    let index = without_gil(py, || pcap::index(&map))?.map_err(|err| to_py_err(err, Some(&path)))?;
    let owner = Bound::new(py, MappedCapture { map })?;
    let view = numpy::ndarray::ArrayView1::from(&owner.get().map[..]);
    // SAFETY: the array's base is `owner`, which keeps the mapping (and so the memory the
    // view points at) alive and never remaps it.
    let data = unsafe { PyArray1::borrow_from_array(&view, owner.clone().into_any()) };
    let kwargs = PyDict::new(py);
    kwargs.set_item("write", false)?;
    data.call_method("setflags", (), Some(&kwargs))?;
    Ok(PacketBatch::from_index(py, data, index))
}

/// Streams a capture as batches of at most `batch_size` packets (and about 32 MiB).
#[pyclass(module = "isolane._core")]
pub struct PcapIterator {
    reader: Mutex<PcapReader<File>>,
    path: PathBuf,
    size: u64,
    batch_size: usize,
}

#[pymethods]
impl PcapIterator {
    #[new]
    #[pyo3(signature = (path, batch_size=65536))]
    fn new(py: Python<'_>, path: PathBuf, batch_size: usize) -> PyResult<Self> {
        if batch_size == 0 {
            return Err(PyValueError::new_err("batch_size must be at least 1"));
        }
        let (file, size) = open(&path)?;
        let reader = without_gil(py, || PcapReader::new(file))?.map_err(|err| to_py_err(err, Some(&path)))?;
        Ok(PcapIterator { reader: Mutex::new(reader), path, size, batch_size })
    }

    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __next__(&self, py: Python<'_>) -> PyResult<Option<PacketBatch>> {
        let buffers = without_gil(py, || {
            let mut reader = self.lock();
            let remaining = self.size.saturating_sub(reader.position()) as usize;
            let limits = Limits { packets: self.batch_size, bytes: MAX_BATCH_BYTES };
            reader.next_batch(limits, remaining.min(MAX_BATCH_BYTES + BATCH_SLACK))
        })?
        .map_err(|err| to_py_err(err, Some(&self.path)))?;
        Ok((!buffers.is_empty()).then(|| PacketBatch::from_buffers(py, buffers)))
    }

    /// Bytes of the file consumed so far.
    #[getter]
    fn position(&self) -> u64 {
        self.lock().position()
    }

    /// The file's size in bytes when it was opened.
    #[getter]
    fn size(&self) -> u64 {
        self.size
    }

    #[getter]
    fn packets_read(&self) -> u64 {
        self.lock().packets_read()
    }

    /// "pcap" or "pcapng", from the file's magic number.
    #[getter]
    fn format(&self) -> &'static str {
        match self.lock().format() {
            Format::Pcap => "pcap",
            Format::PcapNg => "pcapng",
        }
    }

    #[getter]
    fn path(&self) -> PathBuf {
        self.path.clone()
    }
}

impl PcapIterator {
    fn lock(&self) -> std::sync::MutexGuard<'_, PcapReader<File>> {
        self.reader.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// Parses a batch into packed records, returned as raw bytes for Python to view with
/// `PARSED_DTYPE`.
#[pyfunction]
#[pyo3(signature = (batch, vxlan_ports, geneve_ports, threads))]
fn parse_records<'py>(
    py: Python<'py>,
    batch: &PacketBatch,
    vxlan_ports: Vec<u16>,
    geneve_ports: Vec<u16>,
    threads: usize,
) -> PyResult<Bound<'py, PyArray1<u8>>> {
    let config = ParseConfig { vxlan_ports: PortSet::new(&vxlan_ports), geneve_ports: PortSet::new(&geneve_ports) };
    let timestamps = batch.timestamps_ns.bind(py).readonly();
    let timestamps = timestamps.as_slice()?;
    let records = batch.with_view(py, |view| {
        let mut records: Vec<PacketInfo> = memory::zeroed_vec(view.len());
        parse::parse_batch(view, &config, timestamps, &mut records, threads.max(1));
        bytemuck::cast_vec::<PacketInfo, u8>(records)
    })?;
    Ok(PyArray1::from_vec(py, records))
}

/// The parsed record's fields as (name, numpy type, byte offset), and its size.
#[pyfunction]
fn record_layout(py: Python<'_>) -> PyResult<(Bound<'_, PyList>, usize)> {
    let fields = PyList::new(py, parse::record_fields())?;
    Ok((fields, std::mem::size_of::<PacketInfo>()))
}

/// Parses "ADDRESS[/LEN]" (IPv4 or IPv6) into a 128-bit IPv4-mapped prefix.
fn prefix_of(text: &str) -> Result<(u128, u8), String> {
    let (address, len) = match text.split_once('/') {
        Some((address, len)) => (address, Some(len)),
        None => (text, None),
    };
    let address: std::net::IpAddr = address.trim().parse().map_err(|_| format!("'{text}' is not an IP address or prefix"))?;
    let (value, offset, width) = match address {
        std::net::IpAddr::V4(v4) => (classify::ipv4_mapped(u32::from(v4)), 96, 32),
        std::net::IpAddr::V6(v6) => (u128::from(v6), 0, 128),
    };
    let len = match len {
        None => width,
        Some(len) => len.trim().parse::<u8>().ok().filter(|&l| l <= width).ok_or_else(|| format!("'{text}' has an invalid prefix length"))?,
    };
    Ok((value, offset + len))
}

fn address_of(obj: &Bound<'_, PyAny>) -> PyResult<u128> {
    if let Ok(bytes) = obj.extract::<Vec<u8>>() {
        let bytes: [u8; 16] = bytes.try_into().map_err(|_| PyValueError::new_err("an address is 16 bytes (IPv4-mapped for IPv4)"))?;
        return Ok(u128::from_be_bytes(bytes));
    }
    obj.extract::<u128>()
}

fn range_of(obj: Option<&Bound<'_, PyAny>>) -> PyResult<(u16, u16)> {
    match obj {
        None => Ok((0, u16::MAX)),
        Some(obj) if obj.is_none() => Ok((0, u16::MAX)),
        Some(obj) => match obj.extract::<u16>() {
            Ok(port) => Ok((port, port)),
            Err(_) => obj.extract::<(u16, u16)>(),
        },
    }
}

/// The rule arrays of docs/classify-contract.md, in its order: src, src_len, dst, dst_len,
/// src_port_lo, src_port_hi, dst_port_lo, dst_port_hi, proto, proto_mask, dscp, dscp_mask.
const RULE_COLUMNS: [&str; 12] =
    ["src", "src_len", "dst", "dst_len", "src_port_lo", "src_port_hi", "dst_port_lo", "dst_port_hi", "proto", "proto_mask", "dscp", "dscp_mask"];

fn rules_from_columns(columns: [&Bound<'_, PyAny>; 12]) -> PyResult<Vec<Rule>> {
    let [src, src_len, dst, dst_len, src_port_lo, src_port_hi, dst_port_lo, dst_port_hi, proto, proto_mask, dscp, dscp_mask] = columns;
    let (srcs, dsts) = address_pairs(src, dst)?;
    let n = srcs.len();
    let (src_len, dst_len) = (column::<u8>(src_len, "src_len", U8, n)?, column::<u8>(dst_len, "dst_len", U8, n)?);
    let (sp_lo, sp_hi) = (column::<u16>(src_port_lo, "src_port_lo", U16, n)?, column::<u16>(src_port_hi, "src_port_hi", U16, n)?);
    let (dp_lo, dp_hi) = (column::<u16>(dst_port_lo, "dst_port_lo", U16, n)?, column::<u16>(dst_port_hi, "dst_port_hi", U16, n)?);
    let (proto, proto_mask) = (column::<u8>(proto, "proto", U8, n)?, column::<u8>(proto_mask, "proto_mask", U8, n)?);
    let (dscp, dscp_mask) = (column::<u8>(dscp, "dscp", U8, n)?, column::<u8>(dscp_mask, "dscp_mask", U8, n)?);
    Ok((0..n)
        .map(|i| Rule {
            src: srcs[i],
            src_len: src_len[i],
            dst: dsts[i],
            dst_len: dst_len[i],
            src_ports: (sp_lo[i], sp_hi[i]),
            dst_ports: (dp_lo[i], dp_hi[i]),
            proto: proto[i],
            proto_mask: proto_mask[i],
            dscp: dscp[i],
            dscp_mask: dscp_mask[i],
        })
        .collect())
}

/// One tenant of an engine spec: the rule columns plus `name`, `action`, `cls`,
/// `policy_rule` (per rule), `default_action` and `default_cls`.
fn tenant_from_dict(tenant: &Bound<'_, PyDict>) -> PyResult<TenantSpec> {
    let item = |key: &str| -> PyResult<Bound<'_, PyAny>> {
        tenant.get_item(key)?.ok_or_else(|| PyValueError::new_err(format!("tenant spec lacks '{key}'")))
    };
    let columns: Vec<Bound<'_, PyAny>> = RULE_COLUMNS.iter().map(|key| item(key)).collect::<PyResult<_>>()?;
    let columns: [&Bound<'_, PyAny>; 12] = std::array::from_fn(|i| &columns[i]);
    let rules = rules_from_columns(columns)?;
    let n = rules.len();
    Ok(TenantSpec {
        name: item("name")?.extract()?,
        actions: column::<u8>(&item("action")?, "action", U8, n)?,
        classes: column::<u16>(&item("cls")?, "cls", U16, n)?,
        policy_rules: column::<i32>(&item("policy_rule")?, "policy_rule", (i128::from(i32::MIN), i128::from(i32::MAX)), n)?,
        default_action: item("default_action")?.extract()?,
        default_class: item("default_cls")?.extract()?,
        rules,
    })
}

fn tables_spec_from_dict(spec: &Bound<'_, PyDict>) -> PyResult<TablesSpec> {
    let item = |key: &str| -> PyResult<Bound<'_, PyAny>> {
        spec.get_item(key)?.ok_or_else(|| PyValueError::new_err(format!("engine spec lacks '{key}'")))
    };
    let tenants = item("tenants")?
        .extract::<Vec<Bound<'_, PyDict>>>()?
        .iter()
        .enumerate()
        .map(|(index, tenant)| tenant_from_dict(tenant).map_err(|err| PyValueError::new_err(format!("tenants[{index}]: {}", err.value(spec.py())))))
        .collect::<PyResult<Vec<_>>>()?;
    let sources = item("sources")?
        .extract::<Vec<(Vec<u8>, u8, i32)>>()?
        .into_iter()
        .map(|(address, len, tenant)| {
            let address: [u8; 16] = address.try_into().map_err(|_| PyValueError::new_err("a source address is 16 bytes"))?;
            Ok((u128::from_be_bytes(address), len, tenant))
        })
        .collect::<PyResult<Vec<_>>>()?;
    Ok(TablesSpec {
        tenants,
        vnis: item("vnis")?.extract()?,
        vlans: item("vlans")?.extract()?,
        sources,
        unknown_action: item("unknown_action")?.extract()?,
    })
}

/// The engine: compiled policy tables, swapped atomically by `update`.
#[pyclass(frozen, module = "isolane._core")]
pub struct Engine {
    engine: engine::Engine,
}

#[pymethods]
impl Engine {
    #[new]
    #[pyo3(signature = (spec, qos=None, threads=1))]
    fn new(py: Python<'_>, spec: &Bound<'_, PyDict>, qos: Option<&Bound<'_, PyDict>>, threads: usize) -> PyResult<Self> {
        let engine = without_gil(py, || engine::Engine::with_threads(TablesSpec::default(), threads))?.map_err(PyValueError::new_err)?;
        let engine = Engine { engine };
        engine.update(py, spec, qos)?;
        Ok(engine)
    }

    /// Installs new tables (and QoS contracts, if given); returns how many tenants were kept,
    /// patched and rebuilt.
    #[pyo3(signature = (spec, qos=None))]
    fn update(&self, py: Python<'_>, spec: &Bound<'_, PyDict>, qos: Option<&Bound<'_, PyDict>>) -> PyResult<(usize, usize, usize)> {
        let spec = tables_spec_from_dict(spec)?;
        let report = match qos {
            Some(qos) => {
                let columns = qos_columns_from_dict(qos)?;
                without_gil(py, || columns.into_spec().and_then(|qos| self.engine.update_with_qos(spec, qos)))?
            }
            None => without_gil(py, || self.engine.update(spec))?,
        }
        .map_err(PyValueError::new_err)?;
        Ok((report.kept, report.incremental, report.rebuilt))
    }

    /// Changes policy rule `at` of tenant `name`: op "insert" or "replace" with `rows` (the
    /// rule columns plus `action` and `cls` of the table rows it compiles to), or "remove".
    #[pyo3(signature = (name, op, at, rows=None))]
    fn edit_tenant(&self, py: Python<'_>, name: &str, op: &str, at: i32, rows: Option<&Bound<'_, PyDict>>) -> PyResult<()> {
        let rows = match rows {
            Some(rows) => {
                let item = |key: &str| -> PyResult<Bound<'_, PyAny>> {
                    rows.get_item(key)?.ok_or_else(|| PyValueError::new_err(format!("rows lack '{key}'")))
                };
                let columns: Vec<Bound<'_, PyAny>> = RULE_COLUMNS.iter().map(|key| item(key)).collect::<PyResult<_>>()?;
                let rules = rules_from_columns(std::array::from_fn(|i| &columns[i]))?;
                let n = rules.len();
                let actions = column::<u8>(&item("action")?, "action", U8, n)?;
                let classes = column::<u16>(&item("cls")?, "cls", U16, n)?;
                (0..n).map(|i| RuleRow { rule: rules[i], action: actions[i], class: classes[i] }).collect()
            }
            None => Vec::new(),
        };
        let edit = match op {
            "insert" => RuleEdit::Insert { at, rows },
            "replace" => RuleEdit::Replace { at, rows },
            "remove" => RuleEdit::Remove { at },
            other => return Err(PyValueError::new_err(format!("unknown edit '{other}' (insert, replace or remove)"))),
        };
        without_gil(py, || self.engine.edit_tenant(name, edit))?.map_err(PyValueError::new_err)
    }

    /// Classifies parsed records (raw bytes of a PARSED_DTYPE array) into verdict records.
    fn classify_records<'py>(&self, py: Python<'py>, records: &Bound<'py, PyArray1<u8>>) -> PyResult<Bound<'py, PyArray1<u8>>> {
        per_record(py, records, |records| {
            let mut out: Vec<Verdict> = memory::zeroed_vec(records.len());
            self.engine.classify(records, &mut out);
            out
        })
    }

    /// Classifies and enforces parsed records (raw bytes of a PARSED_DTYPE array) into
    /// processed records (raw bytes of a PROCESSED_DTYPE array).
    fn process_records<'py>(&self, py: Python<'py>, records: &Bound<'py, PyArray1<u8>>) -> PyResult<Bound<'py, PyArray1<u8>>> {
        per_record(py, records, |records| {
            let mut out: Vec<Processed> = memory::with_capacity(records.len());
            self.engine.process(records, &mut out);
            out
        })
    }

    /// Parses, classifies and enforces a batch a chunk at a time (its parsed records are never
    /// all in memory) into processed records (raw bytes of a PROCESSED_DTYPE array).
    #[pyo3(signature = (batch, vxlan_ports, geneve_ports))]
    fn process_batch<'py>(&self, py: Python<'py>, batch: &PacketBatch, vxlan_ports: Vec<u16>, geneve_ports: Vec<u16>) -> PyResult<Bound<'py, PyArray1<u8>>> {
        let config = ParseConfig { vxlan_ports: PortSet::new(&vxlan_ports), geneve_ports: PortSet::new(&geneve_ports) };
        let timestamps = batch.timestamps_ns.bind(py).readonly();
        let timestamps_ns = timestamps.as_slice()?;
        let out = batch.with_view(py, |view| {
            let mut out: Vec<Processed> = memory::with_capacity(view.len());
            self.engine.process_packets(engine::Packets::Capture { batch: view, config: &config, timestamps_ns }, &mut out);
            bytemuck::cast_vec::<Processed, u8>(out)
        })?;
        Ok(PyArray1::from_vec(py, out))
    }

    /// Ends the packet stream: packets in flight reach the port, everything queued is sent,
    /// every open burst ends.
    fn drain(&self, py: Python<'_>) -> PyResult<()> {
        without_gil(py, || self.engine.drain())
    }

    /// Every burst that ended (raw bytes of a BURST_DTYPE array).
    fn bursts<'py>(&self, py: Python<'py>) -> Bound<'py, PyArray1<u8>> {
        let events = self.engine.with_enforcer(|enforcer| bytemuck::cast_slice::<BurstEvent, u8>(enforcer.bursts()).to_vec());
        PyArray1::from_vec(py, events)
    }

    /// The bursts that ended since the last call (raw bytes of a BURST_DTYPE array).
    fn take_ended_bursts<'py>(&self, py: Python<'py>) -> Bound<'py, PyArray1<u8>> {
        let events = self.engine.with_enforcer(|enforcer| enforcer.take_ended_bursts());
        PyArray1::from_vec(py, bytemuck::cast_vec::<BurstEvent, u8>(events))
    }

    /// The top flows of bursts `ids` (raw bytes of a BURST_FLOW_DTYPE array).
    fn burst_flows<'py>(&self, py: Python<'py>, ids: PyReadonlyArray1<'py, u64>) -> PyResult<Bound<'py, PyArray1<u8>>> {
        let ids = ids.as_slice()?;
        let flows = self.engine.with_enforcer(|enforcer| enforcer.burst_flows(ids));
        Ok(PyArray1::from_vec(py, bytemuck::cast_vec::<FlowRow, u8>(flows)))
    }

    /// Tenant names, by the `tenant` of bursts.
    fn burst_tenants(&self) -> Vec<String> {
        self.engine.with_enforcer(|enforcer| enforcer.burst_tenants())
    }

    /// One dict per scope watched for bursts: its setting, totals and polled views.
    fn burst_stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let stats = self.engine.with_enforcer(|enforcer| enforcer.burst_stats());
        PyList::new(py, stats.iter().map(|scope| burst_stats_dict(py, scope)).collect::<PyResult<Vec<_>>>()?)
    }

    /// QoS statistics, one dict per (tenant, class id): counters by colour and outcome,
    /// packets in flight to the port, queueing delay quantiles.
    fn qos_stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let rows = self.engine.qos_stats().into_iter().map(|((tenant, cls), stats)| qos_stats_dict(py, tenant, cls, &stats));
        PyList::new(py, rows.collect::<PyResult<Vec<_>>>()?)
    }

    /// Per tenant name (None: packets no tenant claims): packets and bytes by action, and
    /// packets by reason.
    fn counters<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let out = PyDict::new(py);
        for (name, counters) in self.engine.counters() {
            let entry = PyDict::new(py);
            entry.set_item("packets", counters.packets.to_vec())?;
            entry.set_item("bytes", counters.bytes.to_vec())?;
            entry.set_item("reasons", counters.reasons.to_vec())?;
            out.set_item(name, entry)?;
        }
        Ok(out)
    }

    #[getter]
    fn tenant_names(&self) -> Vec<String> {
        self.engine.tables().tenant_names()
    }

    /// How many threads `process_records` runs on.
    #[getter]
    fn threads(&self) -> usize {
        self.engine.threads()
    }
}

/// Runs `work` without the GIL on parsed records (raw bytes of a PARSED_DTYPE array), which
/// gives one output record per packet, and returns the output as raw bytes.
fn per_record<'py, T: bytemuck::Pod + Send>(
    py: Python<'py>,
    records: &Bound<'py, PyArray1<u8>>,
    work: impl FnOnce(&[PacketInfo]) -> Vec<T> + Send,
) -> PyResult<Bound<'py, PyArray1<u8>>> {
    let records = records.readonly();
    let bytes = records.as_slice()?;
    if bytes.len() % std::mem::size_of::<PacketInfo>() != 0 {
        return Err(PyValueError::new_err("records are not whole parsed records"));
    }
    let out = without_gil(py, || {
        let records: &[PacketInfo] = bytemuck::cast_slice(bytes);
        bytemuck::cast_vec::<T, u8>(work(records))
    })?;
    Ok(PyArray1::from_vec(py, out))
}

fn qos_stats_dict<'py>(py: Python<'py>, tenant: Option<String>, cls: Option<u16>, stats: &QosStats) -> PyResult<Bound<'py, PyDict>> {
    let c = &stats.counters;
    let entry = PyDict::new(py);
    entry.set_item("tenant", tenant)?;
    entry.set_item("cls", cls)?;
    entry.set_item("packets", c.packets)?;
    entry.set_item("bytes", c.bytes)?;
    entry.set_item("color_packets", c.color_packets.to_vec())?;
    entry.set_item("color_bytes", c.color_bytes.to_vec())?;
    entry.set_item("outcome_packets", c.outcome_packets.to_vec())?;
    entry.set_item("outcome_bytes", c.outcome_bytes.to_vec())?;
    entry.set_item("in_flight", stats.in_flight)?;
    let delay = &stats.delay_ns;
    let delays = PyDict::new(py);
    delays.set_item("count", delay.count())?;
    delays.set_item("p50", delay.p50())?;
    delays.set_item("p99", delay.p99())?;
    delays.set_item("p999", delay.p999())?;
    delays.set_item("max", (delay.count() > 0).then(|| delay.max()))?;
    entry.set_item("delay_ns", delays)?;
    Ok(entry)
}

fn burst_stats_dict<'py>(py: Python<'py>, stats: &ScopeStats) -> PyResult<Bound<'py, PyDict>> {
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
    entry.set_item("peak_window_bps", bursts::window_bps(totals.peak_window_bytes, config.window_ns))?;
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
fn burst_layout(py: Python<'_>) -> PyResult<(Bound<'_, PyList>, usize)> {
    Ok((PyList::new(py, bursts::event_fields())?, std::mem::size_of::<BurstEvent>()))
}

/// A burst flow's fields as (name, numpy type, byte offset), and its size.
#[pyfunction]
fn burst_flow_layout(py: Python<'_>) -> PyResult<(Bound<'_, PyList>, usize)> {
    Ok((PyList::new(py, bursts::flow_fields())?, std::mem::size_of::<FlowRow>()))
}

/// A value of a QoS spec dict, named in the error when it is missing.
fn qos_item<'py>(dict: &Bound<'py, PyDict>, key: &str) -> PyResult<Bound<'py, PyAny>> {
    dict.get_item(key)?.ok_or_else(|| PyValueError::new_err(format!("qos spec lacks '{key}'")))
}

fn qos_vector<T: Element + Copy>(dict: &Bound<'_, PyDict>, key: &str, bounds: (i128, i128)) -> PyResult<Vec<T>> {
    Ok(as_array::<T>(&qos_item(dict, key)?, key, bounds)?.readonly().as_slice()?.to_vec())
}

fn contract_columns_from_dict(dict: &Bound<'_, PyDict>) -> PyResult<ContractColumns> {
    let meter = qos_item(dict, "meter")?.cast_into::<PyDict>()?;
    let shaper = qos_item(dict, "shaper")?.cast_into::<PyDict>()?;
    Ok(ContractColumns {
        meter: MeterColumns {
            kind: qos_vector(&meter, "kind", U8)?,
            color_aware: qos_vector(&meter, "color_aware", U8)?,
            count: qos_vector(&meter, "count", U8)?,
            cir: qos_vector(&meter, "cir", U64)?,
            cbs: qos_vector(&meter, "cbs", U64)?,
            eir: qos_vector(&meter, "eir", U64)?,
            ebs: qos_vector(&meter, "ebs", U64)?,
            pir: qos_vector(&meter, "pir", U64)?,
            pbs: qos_vector(&meter, "pbs", U64)?,
            action: qos_vector(&meter, "action", U8)?,
            remark_dscp: qos_vector(&meter, "remark_dscp", U8)?,
        },
        shaper: ShaperColumns {
            rate: qos_vector(&shaper, "rate", U64)?,
            burst: qos_vector(&shaper, "burst", U64)?,
            queue: qos_vector(&shaper, "queue", U64)?,
            max_delay_ns: qos_vector(&shaper, "max_delay_ns", U64)?,
        },
    })
}

/// The dict `isolane.engine` builds from a `CompiledQos` (see `QosColumns`).
fn qos_columns_from_dict(qos: &Bound<'_, PyDict>) -> PyResult<QosColumns> {
    let section = |key: &str| -> PyResult<ContractColumns> {
        let dict = qos_item(qos, key)?.cast_into::<PyDict>()?;
        contract_columns_from_dict(&dict).map_err(|err| PyValueError::new_err(format!("qos spec '{key}': {}", err.value(qos.py()))))
    };
    Ok(QosColumns {
        tenant_names: qos_item(qos, "tenant_names")?.extract()?,
        count: qos_item(qos, "count")?.extract()?,
        color_map: qos_vector(qos, "color_map", U8)?,
        port_rate: qos_item(qos, "port_rate")?.extract()?,
        port_buffer: qos_item(qos, "port_buffer")?.extract()?,
        port_mode: qos_item(qos, "port_mode")?.extract()?,
        port_alpha_log2: qos_item(qos, "port_alpha_log2")?.extract()?,
        tenant: section("tenant")?,
        class: section("class")?,
        class_offsets: qos_vector(qos, "class_offsets", I64)?,
        queue_priority: qos_vector(qos, "queue_priority", U8)?,
        queue_weight: qos_vector(qos, "queue_weight", U32)?,
        queue_guarantee: qos_vector(qos, "queue_guarantee", U64)?,
        queue_ceil: qos_vector(qos, "queue_ceil", U64)?,
        queue_burst: qos_vector(qos, "queue_burst", U64)?,
        queue_reserved: qos_vector(qos, "queue_reserved", U64)?,
        bursts: burst_columns_from_dict(&qos_item(qos, "bursts")?.cast_into::<PyDict>()?)?,
    })
}

/// The `bursts` part of that dict (see `BurstColumns`).
fn burst_columns_from_dict(bursts: &Bound<'_, PyDict>) -> PyResult<BurstColumns> {
    Ok(BurstColumns {
        scope: qos_vector(bursts, "scope", U8)?,
        tenant: qos_vector(bursts, "tenant", I64)?,
        cls: qos_vector(bursts, "cls", I64)?,
        window_ns: qos_vector(bursts, "window_ns", U64)?,
        threshold_bps: qos_vector(bursts, "threshold_bps", U64)?,
        has_queue: qos_vector(bursts, "has_queue", U8)?,
        queue_rise: qos_vector(bursts, "queue_rise", U64)?,
        queue_fall: qos_vector(bursts, "queue_fall", U64)?,
        poll_ns: qos_vector(bursts, "poll_ns", U64)?,
    })
}

/// The processed record's fields as (name, numpy type, byte offset), and its size.
#[pyfunction]
fn processed_layout(py: Python<'_>) -> PyResult<(Bound<'_, PyList>, usize)> {
    Ok((PyList::new(py, enforce::processed_fields())?, std::mem::size_of::<Processed>()))
}

/// The verdict record's fields as (name, numpy type, byte offset), and its size.
#[pyfunction]
fn verdict_layout(py: Python<'_>) -> PyResult<(Bound<'_, PyList>, usize)> {
    Ok((PyList::new(py, engine::verdict_fields())?, std::mem::size_of::<Verdict>()))
}

/// The first-match rule table; see docs/classify-contract.md.
#[pyclass(module = "isolane._core")]
pub struct RuleTable {
    table: std::sync::RwLock<classify::RuleTable>,
}

impl RuleTable {
    fn build(py: Python<'_>, rules: Vec<Rule>) -> PyResult<Self> {
        let table = without_gil(py, || classify::RuleTable::new(rules))?
            .map_err(|(index, why)| PyValueError::new_err(format!("rule {index}: {why}")))?;
        Ok(RuleTable { table: std::sync::RwLock::new(table) })
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, classify::RuleTable> {
        self.table.read().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, classify::RuleTable> {
        self.table.write().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// Reads a (n, 16) uint8 address array, or a uint32 array of IPv4 addresses in host order.
/// An address column as numpy gave it: IPv4 as uint32 (host order), or 16 bytes an address.
enum AddressColumn<'py> {
    Ipv4(PyReadonlyArray1<'py, u32>),
    Bytes(PyReadonlyArray1<'py, u8>),
}

impl<'py> AddressColumn<'py> {
    fn new(obj: &Bound<'py, PyAny>, name: &str) -> PyResult<Self> {
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
            return Err(PyValueError::new_err(format!("{name}: a 2-D address array must have 16 columns")));
        }
        Ok(AddressColumn::Bytes(flat))
    }

    fn addresses(&self) -> PyResult<Addresses<'_>> {
        Ok(match self {
            AddressColumn::Ipv4(values) => Addresses::Ipv4(values.as_slice()?),
            AddressColumn::Bytes(bytes) => Addresses::Bytes(bytes.as_slice()?),
        })
    }
}

/// Addresses read in place, one at a time, without the GIL.
#[derive(Clone, Copy)]
enum Addresses<'a> {
    Ipv4(&'a [u32]),
    Bytes(&'a [u8]),
}

impl Addresses<'_> {
    fn len(&self) -> usize {
        match self {
            Addresses::Ipv4(values) => values.len(),
            Addresses::Bytes(bytes) => bytes.len() / 16,
        }
    }

    #[inline]
    fn get(&self, index: usize) -> u128 {
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
fn address_pairs(src: &Bound<'_, PyAny>, dst: &Bound<'_, PyAny>) -> PyResult<(Vec<u128>, Vec<u128>)> {
    let (srcs, dsts) = (addresses(src, "src")?, addresses(dst, "dst")?);
    if dsts.len() != srcs.len() {
        return Err(PyValueError::new_err(format!("dst has {} entries, expected {}", dsts.len(), srcs.len())));
    }
    Ok((srcs, dsts))
}

fn column<'py, T: Element + Copy>(obj: &Bound<'py, PyAny>, name: &str, bounds: (i128, i128), count: usize) -> PyResult<Vec<T>> {
    Ok(column_in_place(obj, name, bounds, count)?.as_slice()?.to_vec())
}

/// A column of `count` values, read in place.
fn column_in_place<'py, T: Element + Copy>(obj: &Bound<'py, PyAny>, name: &str, bounds: (i128, i128), count: usize) -> PyResult<PyReadonlyArray1<'py, T>> {
    let values = as_array::<T>(obj, name, bounds)?.readonly();
    if values.len() != count {
        return Err(PyValueError::new_err(format!("{name} has {} entries, expected {count}", values.len())));
    }
    Ok(values)
}

#[pymethods]
impl RuleTable {
    /// Builds a table from per-rule arrays in priority order (docs/classify-contract.md).
    #[new]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        src: &Bound<'_, PyAny>,
        src_len: &Bound<'_, PyAny>,
        dst: &Bound<'_, PyAny>,
        dst_len: &Bound<'_, PyAny>,
        src_port_lo: &Bound<'_, PyAny>,
        src_port_hi: &Bound<'_, PyAny>,
        dst_port_lo: &Bound<'_, PyAny>,
        dst_port_hi: &Bound<'_, PyAny>,
        proto: &Bound<'_, PyAny>,
        proto_mask: &Bound<'_, PyAny>,
        dscp: &Bound<'_, PyAny>,
        dscp_mask: &Bound<'_, PyAny>,
    ) -> PyResult<Self> {
        let rules = rules_from_columns([src, src_len, dst, dst_len, src_port_lo, src_port_hi, dst_port_lo, dst_port_hi, proto, proto_mask, dscp, dscp_mask])?;
        Self::build(py, rules)
    }

    /// Reads a ClassBench rule file (IPv4; TCP flags ignored).
    #[staticmethod]
    fn from_classbench(py: Python<'_>, path: PathBuf) -> PyResult<Self> {
        let text = std::fs::read_to_string(&path).map_err(|err| to_py_err(err.into(), Some(&path)))?;
        let rules = classify::parse_classbench(&text)
            .map_err(|(line, why)| PyValueError::new_err(format!("{}: line {line}: {why}", path.display())))?;
        Self::build(py, rules)
    }

    /// Builds a table from rule dicts: `src`/`dst` ("10.0.0.0/8", "2001:db8::/32", a bare
    /// address, or absent for any), `src_ports`/`dst_ports` (a port or (lo, hi)), `proto`
    /// and `dscp` (int, or absent for any).
    #[staticmethod]
    fn from_rules(py: Python<'_>, rules: Vec<Bound<'_, PyDict>>) -> PyResult<Self> {
        let parsed = rules.iter().enumerate().map(|(index, rule)| rule_from_dict(rule).map_err(|err| {
            PyValueError::new_err(format!("rule {index}: {}", err.value(py)))
        })).collect::<PyResult<Vec<_>>>()?;
        Self::build(py, parsed)
    }

    /// The first matching rule for every packet (-1: none), without the GIL.
    #[pyo3(signature = (src, dst, src_port, dst_port, proto, dscp=None))]
    fn lookup<'py>(
        &self,
        py: Python<'py>,
        src: &Bound<'py, PyAny>,
        dst: &Bound<'py, PyAny>,
        src_port: &Bound<'py, PyAny>,
        dst_port: &Bound<'py, PyAny>,
        proto: &Bound<'py, PyAny>,
        dscp: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyArray1<i32>>> {
        let (src, dst) = (AddressColumn::new(src, "src")?, AddressColumn::new(dst, "dst")?);
        let (src, dst) = (src.addresses()?, dst.addresses()?);
        let n = src.len();
        if dst.len() != n {
            return Err(PyValueError::new_err(format!("dst has {} entries, expected {n}", dst.len())));
        }
        let (sp, dp) = (column_in_place::<u16>(src_port, "src_port", U16, n)?, column_in_place::<u16>(dst_port, "dst_port", U16, n)?);
        let proto = column_in_place::<u8>(proto, "proto", U8, n)?;
        let dscp = dscp.map(|dscp| column_in_place::<u8>(dscp, "dscp", U8, n)).transpose()?;
        let (sp, dp, proto) = (sp.as_slice()?, dp.as_slice()?, proto.as_slice()?);
        let dscp = dscp.as_ref().map(|dscp| dscp.as_slice()).transpose()?;
        let key = |i: usize| Key { src: src.get(i), dst: dst.get(i), src_port: sp[i], dst_port: dp[i], proto: proto[i], dscp: dscp.map_or(0, |d| d[i]) };
        let table = self.read();
        let out = without_gil(py, || {
            // Keys are made a chunk at a time, next to their lookup, rather than all up front.
            const CHUNK: usize = 4096;
            let mut out = vec![-1i32; n];
            let mut keys = Vec::with_capacity(CHUNK.min(n));
            for (start, out) in (0..n).step_by(CHUNK).zip(out.chunks_mut(CHUNK)) {
                keys.clear();
                keys.extend((start..start + out.len()).map(key));
                table.lookup_all(&keys, out);
            }
            out
        })?;
        Ok(PyArray1::from_vec(py, out))
    }

    /// Inserts a rule (a dict as for `from_rules`) before rule `index`.
    fn insert(&self, index: usize, rule: &Bound<'_, PyDict>) -> PyResult<()> {
        let rule = rule_from_dict(rule)?;
        self.write().insert(index, rule).map_err(PyValueError::new_err)
    }

    /// Removes rule `index`; later rules move up by one.
    fn remove(&self, index: usize) -> PyResult<()> {
        self.write().remove(index).map(|_| ()).map_err(PyValueError::new_err)
    }

    /// Bytes held by the rules and their hash tables.
    #[getter]
    fn memory_bytes(&self) -> usize {
        self.read().memory_bytes()
    }

    /// How many structures a lookup may visit: decision trees plus tuple tables.
    #[getter]
    fn table_count(&self) -> usize {
        self.read().table_count()
    }

    fn __len__(&self) -> usize {
        self.read().len()
    }

    fn __repr__(&self) -> String {
        let table = self.read();
        format!("RuleTable(rules={}, tables={}, bytes={})", table.len(), table.table_count(), table.memory_bytes())
    }
}

fn rule_from_dict(rule: &Bound<'_, PyDict>) -> PyResult<Rule> {
    const KEYS: [&str; 6] = ["src", "dst", "src_ports", "dst_ports", "proto", "dscp"];
    for key in rule.keys() {
        let key: String = key.extract()?;
        if !KEYS.contains(&key.as_str()) {
            return Err(PyValueError::new_err(format!("unknown key '{key}' (expected one of {})", KEYS.join(", "))));
        }
    }
    let prefix = |name: &str| -> PyResult<(u128, u8)> {
        match rule.get_item(name)? {
            None => Ok((0, 0)),
            Some(value) if value.is_none() => Ok((0, 0)),
            Some(value) => match value.extract::<String>() {
                Ok(text) => prefix_of(&text).map_err(|why| PyValueError::new_err(format!("{name}: {why}"))),
                Err(_) => Ok((address_of(&value)?, 128)),
            },
        }
    };
    let masked = |name: &str, full: u8| -> PyResult<(u8, u8)> {
        match rule.get_item(name)? {
            None => Ok((0, 0)),
            Some(value) if value.is_none() => Ok((0, 0)),
            Some(value) => Ok((value.extract::<u8>()?, full)),
        }
    };
    let (src, src_len) = prefix("src")?;
    let (dst, dst_len) = prefix("dst")?;
    let (proto, proto_mask) = masked("proto", 0xff)?;
    let (dscp, dscp_mask) = masked("dscp", 0x3f)?;
    let rule = Rule {
        src: src & classify::prefix_mask(src_len),
        src_len,
        dst: dst & classify::prefix_mask(dst_len),
        dst_len,
        src_ports: range_of(rule.get_item("src_ports")?.as_ref())?,
        dst_ports: range_of(rule.get_item("dst_ports")?.as_ref())?,
        proto,
        proto_mask,
        dscp,
        dscp_mask,
    };
    rule.check().map_err(PyValueError::new_err)?;
    Ok(rule)
}

#[pymodule(gil_used = false)]
mod _core {
    #[pymodule_export]
    use super::{burst_flow_layout, burst_layout, parse_records, processed_layout, read_pcap, record_layout, verdict_layout, Engine, PacketBatch, PcapIterator, RuleTable};

    #[pymodule_init]
    fn init(module: &pyo3::Bound<'_, pyo3::types::PyModule>) -> pyo3::PyResult<()> {
        use pyo3::prelude::*;
        let py = module.py();
        module.add("IsolaneError", py.get_type::<super::IsolaneError>())?;
        module.add("PcapError", py.get_type::<super::PcapError>())?;
        module.add("VXLAN_PORT", crate::parse::VXLAN_PORT)?;
        module.add("GENEVE_PORT", crate::parse::GENEVE_PORT)?;
        Ok(())
    }
}
