//! Packets in and parsed records out: `PacketBatch`, reading and streaming captures,
//! `parse_records` and the record layout.

use std::fs::File;
use std::path::PathBuf;
use std::sync::Mutex;

use numpy::{PyArray1, PyArrayMethods, PyUntypedArrayMethods};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

use crate::batch::{linktype, BatchView, LinkTypes, PacketBuffers};
use crate::error::CoreError;
use crate::memory;
use crate::parse::{self, PacketInfo, ParseConfig, PortSet};
use crate::pcap::{self, Limits, PcapReader};

use super::capture::format_name;
use super::convert::{as_array, I64, U16, U32, U64, U8};
use super::error::with_path;
use super::without_gil;

/// A packet batch's caps when streamed: enough to amortise the call, small enough to bound memory.
pub(super) const MAX_BATCH_BYTES: usize = 32 << 20;
/// Room beyond the cap for the record that crosses it and one read ahead.
pub(super) const BATCH_SLACK: usize = 4 << 20;

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
    pub(super) timestamps_ns: Py<PyArray1<i64>>,
    link_types: LinkTypeStore,
}

impl PacketBatch {
    pub(super) fn from_buffers(py: Python<'_>, buffers: PacketBuffers) -> Self {
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
    pub(super) fn with_view<T: Send>(&self, py: Python<'_>, work: impl FnOnce(&BatchView<'_>) -> T + Send) -> PyResult<T> {
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
        let (data, offsets, lengths, wire_lengths) = (data.as_slice()?, offsets.as_slice()?, lengths.as_slice()?, wire_lengths.as_slice()?);
        let outcome = without_gil(py, || BatchView::new(data, offsets, lengths, wire_lengths, link_types).map(|view| work(&view)))?;
        Ok(outcome?)
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
            return Err(CoreError::InvalidBatch(format!("timestamps_ns has {} entries for {packets} packets", batch.timestamps_ns.bind(py).len())).into());
        }
        batch.with_view(py, wire_lengths_cover_captures)??;
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

/// A packet's wire length is at least what was captured of it.
fn wire_lengths_cover_captures(view: &BatchView<'_>) -> Result<(), CoreError> {
    let short = view.lengths.iter().zip(view.wire_lengths).position(|(captured, wire)| wire < captured);
    match short {
        Some(index) => Err(CoreError::InvalidBatch(format!(
            "wire_lengths[{index}] = {} is below lengths[{index}] = {}: a packet's wire length is at least its captured length",
            view.wire_lengths[index], view.lengths[index]
        ))),
        None => Ok(()),
    }
}

fn supported_link_type(link_type: u32) -> PyResult<u16> {
    u16::try_from(link_type)
        .ok()
        .filter(|&t| linktype::is_supported(t))
        .ok_or_else(|| CoreError::InvalidBatch(format!("unsupported link type {link_type}")).into())
}

fn open(path: &PathBuf) -> PyResult<(File, u64)> {
    let file = File::open(path).map_err(|err| with_path(err.into(), path))?;
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
pub(super) fn read_pcap(py: Python<'_>, path: PathBuf) -> PyResult<PacketBatch> {
    let (file, size) = open(&path)?;
    if size < MAP_MIN_BYTES {
        let buffers = without_gil(py, || pcap::read_all(file, size as usize))?.map_err(|err| with_path(err, &path))?;
        return Ok(PacketBatch::from_buffers(py, buffers));
    }
    // SAFETY: a read-only mapping, and the numpy view of it is made read-only below. As with
    // numpy.memmap, another process truncating the file while it is mapped would fault on
    // access; iter_pcap reads instead, for captures still being written.
    let map = unsafe { memmap2::MmapOptions::new().populate().map(&file) }.map_err(|err| with_path(err.into(), &path))?;
    let index = without_gil(py, || pcap::index(&map))?.map_err(|err| with_path(err, &path))?;
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
            return Err(CoreError::InvalidArgument("batch_size must be at least 1".to_string()).into());
        }
        let (file, size) = open(&path)?;
        let reader = without_gil(py, || PcapReader::new(file))?.map_err(|err| with_path(err, &path))?;
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
            let batch = reader.next_batch(limits, remaining.min(MAX_BATCH_BYTES + BATCH_SLACK))?;
            // iter_pcap has no way to warn: a capture cut short is an error (open_captures warns).
            reader.check_complete().map(|()| batch)
        })?
        .map_err(|err| with_path(err, &self.path))?;
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
        format_name(self.lock().format())
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
pub(super) fn parse_records<'py>(
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
pub(super) fn record_layout(py: Python<'_>) -> PyResult<(Bound<'_, PyList>, usize)> {
    let fields = PyList::new(py, parse::record_fields())?;
    Ok((fields, std::mem::size_of::<PacketInfo>()))
}
