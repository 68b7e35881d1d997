//! `CaptureReader`: captures as the commands read them, one or several merged by time, from
//! files or standard input, plain or compressed, with what the reader met (its issues).

use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};

use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::error::CoreError;
use crate::pcap::input::{Compression, Input, Progress, STDIN};
use crate::pcap::merge::Merger;
use crate::pcap::{Format, Limits, PcapReader};

use super::batch::{PacketBatch, BATCH_SLACK, MAX_BATCH_BYTES};
use super::error::with_path;
use super::without_gil;

type Source = Box<dyn Read + Send>;

/// What is known of one input besides its reader.
struct Opened {
    /// As errors and warnings name it (`<stdin>` for `-`).
    shown: PathBuf,
    compression: Compression,
    size: Option<u64>,
    progress: Progress,
}

/// Streams one or more captures as PacketBatch objects in timestamp order (a k-way merge that
/// orders ties as mergecap does), at most `batch_size` packets (and about 32 MiB) a batch.
#[pyclass(module = "isolane._core")]
pub struct CaptureReader {
    merger: Mutex<Merger<Source>>,
    inputs: Vec<Opened>,
    batch_size: usize,
}

#[pymethods]
impl CaptureReader {
    #[new]
    #[pyo3(signature = (paths, batch_size=65536))]
    fn new(py: Python<'_>, paths: Vec<PathBuf>, batch_size: usize) -> PyResult<Self> {
        if batch_size == 0 {
            return Err(CoreError::InvalidArgument("batch_size must be at least 1".to_string()).into());
        }
        if paths.is_empty() {
            return Err(CoreError::InvalidArgument("no capture to read".to_string()).into());
        }
        if paths.iter().filter(|path| path.as_os_str() == STDIN).count() > 1 {
            return Err(CoreError::InvalidArgument("standard input (-) can be read only once".to_string()).into());
        }
        let mut readers = Vec::with_capacity(paths.len());
        let mut inputs = Vec::with_capacity(paths.len());
        for path in paths {
            let shown = if path.as_os_str() == STDIN { PathBuf::from("<stdin>") } else { path.clone() };
            let (reader, opened) = without_gil(py, || open(&path, &shown))?.map_err(|err| with_path(err, &shown))?;
            readers.push(reader);
            inputs.push(opened);
        }
        Ok(CaptureReader { merger: Mutex::new(Merger::new(readers)), inputs, batch_size })
    }

    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __next__(&self, py: Python<'_>) -> PyResult<Option<PacketBatch>> {
        let limits = Limits { packets: self.batch_size, bytes: MAX_BATCH_BYTES };
        let read = without_gil(py, || self.lock().next_batch(limits, MAX_BATCH_BYTES + BATCH_SLACK))?;
        let buffers = read.map_err(|(index, err)| self.error(index, err))?;
        Ok((!buffers.is_empty()).then(|| PacketBatch::from_buffers(py, buffers)))
    }

    /// Bytes read from the sources so far (compressed bytes for a compressed file).
    #[getter]
    fn position(&self) -> u64 {
        self.inputs.iter().map(|input| input.progress.bytes()).sum()
    }

    /// The sources' total size in bytes, or None when one has no size (standard input, a pipe).
    #[getter]
    fn size(&self) -> Option<u64> {
        self.inputs.iter().map(|input| input.size).sum()
    }

    #[getter]
    fn packets_read(&self) -> u64 {
        self.lock().readers().map(PcapReader::packets_read).sum()
    }

    /// Each capture's format: "pcap" or "pcapng".
    #[getter]
    fn formats(&self) -> Vec<&'static str> {
        self.lock().readers().map(|reader| format_name(reader.format())).collect()
    }

    /// Each capture's compression: "gzip", "zstd" or None.
    #[getter]
    fn compressions(&self) -> Vec<Option<&'static str>> {
        self.inputs.iter().map(|input| input.compression.name()).collect()
    }

    /// Each capture as messages name it (`<stdin>` for `-`).
    #[getter]
    fn paths(&self) -> Vec<PathBuf> {
        self.inputs.iter().map(|input| input.shown.clone()).collect()
    }

    /// What the reader met in each capture so far, one dict a capture (see `isolane.CaptureIssues`).
    fn issues<'py>(&self, py: Python<'py>) -> PyResult<Vec<Bound<'py, PyDict>>> {
        let merger = self.lock();
        merger.readers().zip(&self.inputs).map(|(reader, input)| issues_dict(py, reader, input)).collect()
    }
}

impl CaptureReader {
    fn lock(&self) -> MutexGuard<'_, Merger<Source>> {
        self.merger.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// `err` from capture `index`, naming it. A corrupt compressed stream is a PcapError at the
    /// compressed byte where decoding failed (the packet being decoded is not known).
    fn error(&self, index: usize, err: CoreError) -> PyErr {
        let input = &self.inputs[index];
        let err = match (err, input.compression.name()) {
            (CoreError::Io(io), Some(compression)) if io.raw_os_error().is_none() => {
                let reason = format!("the {compression} stream is corrupt (the offset counts compressed bytes): {io}");
                CoreError::Pcap { offset: input.progress.bytes(), packet: 0, reason }
            }
            (err, _) => err,
        };
        with_path(err, &input.shown)
    }
}

fn open(path: &Path, shown: &Path) -> crate::error::Result<(PcapReader<Source>, Opened)> {
    let input = Input::open(path)?;
    let opened = Opened { shown: shown.to_path_buf(), compression: input.compression, size: input.size, progress: input.progress.clone() };
    Ok((PcapReader::new(input.reader)?, opened))
}

fn issues_dict<'py>(py: Python<'py>, reader: &PcapReader<Source>, input: &Opened) -> PyResult<Bound<'py, PyDict>> {
    let issues = reader.issues();
    let dict = PyDict::new(py);
    dict.set_item("path", &input.shown)?;
    dict.set_item("format", format_name(reader.format()))?;
    dict.set_item("compression", input.compression.name())?;
    dict.set_item("packets", reader.packets_read())?;
    let truncated = issues.truncated.as_ref().map(|cut| (cut.packet, cut.offset, cut.bytes_left, cut.what));
    dict.set_item("truncated", truncated)?;
    dict.set_item("compressed_stream_cut", input.progress.stream_cut())?;
    let counts = [
        ("out_of_order", issues.out_of_order),
        ("bad_subsecond", issues.bad_subsecond),
        ("wire_below_captured", issues.wire_below_captured),
        ("obsolete_packet_blocks", issues.obsolete_packet_blocks),
        ("unknown_blocks_skipped", issues.unknown_blocks_skipped),
    ];
    for (name, count) in counts {
        dict.set_item(name, count)?;
    }
    Ok(dict)
}

pub(super) fn format_name(format: Format) -> &'static str {
    match format {
        Format::Pcap => "pcap",
        Format::PcapNg => "pcapng",
    }
}
