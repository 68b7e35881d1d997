//! `LiveCapture`: packet batches from a Linux device through the TPACKET_V3 ring (`crate::live`).

use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::error::CoreError;
use crate::live::{self, CaptureOptions, CaptureStats, Direction};

use super::batch::PacketBatch;
use super::without_gil;

/// The longest wait without the GIL before Python looks at its signals (Ctrl-C).
const WAIT_SLICE: Duration = Duration::from_millis(100);

/// A capture from one device; closed by `close()` or on leaving a `with` block.
#[pyclass(frozen, module = "isolane._core")]
pub struct LiveCapture {
    /// None once closed.
    capture: Mutex<Option<live::LiveCapture>>,
    /// The counters as they were when the capture closed.
    final_stats: Mutex<CaptureStats>,
    dev: String,
    netns: Option<String>,
    link_type: u16,
}

#[pymethods]
impl LiveCapture {
    #[new]
    #[pyo3(signature = (dev, netns=None, *, snaplen=262_144, block_size=1_048_576, blocks=64, timeout_ms=10, direction="both"))]
    #[allow(clippy::too_many_arguments)] // the Python signature, keyword-only past netns
    fn new(py: Python<'_>, dev: String, netns: Option<String>, snaplen: u32, block_size: u32, blocks: u32, timeout_ms: u32, direction: &str) -> PyResult<Self> {
        let options = CaptureOptions { snaplen, block_size, blocks, block_timeout_ms: timeout_ms, direction: Direction::from_name(direction)? };
        let capture = without_gil(py, || live::LiveCapture::open(&dev, netns.as_deref(), &options))??;
        let link_type = capture.link_type();
        Ok(LiveCapture { capture: Mutex::new(Some(capture)), final_stats: Mutex::new(CaptureStats::default()), dev, netns, link_type })
    }

    /// The packets of the ring's ready blocks as one batch, waiting up to `timeout_ms` (None:
    /// until packets come) for them; None when the time passed without a packet.
    #[pyo3(signature = (timeout_ms=None))]
    fn next_batch(&self, py: Python<'_>, timeout_ms: Option<u64>) -> PyResult<Option<PacketBatch>> {
        let deadline = timeout_ms.map(|ms| Instant::now() + Duration::from_millis(ms));
        loop {
            let slice = deadline.map_or(WAIT_SLICE, |deadline| deadline.saturating_duration_since(Instant::now()).min(WAIT_SLICE));
            let batch = without_gil(py, || self.guard().as_mut().map_or_else(|| Err(self.closed_error()), |capture| capture.next_batch(slice)))??;
            if let Some(batch) = batch {
                return Ok(Some(PacketBatch::from_buffers(py, batch)));
            }
            py.check_signals()?;
            if deadline.is_some_and(|deadline| Instant::now() >= deadline) {
                return Ok(None);
            }
        }
    }

    /// The counters since the capture opened: the kernel's (`packets` it saw, drops included;
    /// `drops`; `freezes`) and this reader's (`delivered`, `skipped`, `blocks`).
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let stats = match self.guard().as_mut() {
            Some(capture) => capture.stats()?,
            None => *lock(&self.final_stats),
        };
        let dict = PyDict::new(py);
        let kernel = stats.kernel;
        for (name, value) in [
            ("packets", kernel.packets),
            ("drops", kernel.drops),
            ("freezes", kernel.freezes),
            ("delivered", stats.delivered),
            ("skipped", stats.skipped),
            ("blocks", stats.blocks),
        ] {
            dict.set_item(name, value)?;
        }
        Ok(dict)
    }

    /// Reads the counters a last time and releases the socket and its ring; closing twice is
    /// a no-op.
    fn close(&self) -> PyResult<()> {
        if let Some(mut open) = self.guard().take() {
            *lock(&self.final_stats) = open.stats()?;
        }
        Ok(())
    }

    #[getter]
    fn closed(&self) -> bool {
        self.guard().is_none()
    }

    #[getter]
    fn dev(&self) -> &str {
        &self.dev
    }

    #[getter]
    fn netns(&self) -> Option<&str> {
        self.netns.as_deref()
    }

    /// The pcap link type of the batches: 1 (Ethernet) or 101 (raw IP).
    #[getter]
    fn link_type(&self) -> u16 {
        self.link_type
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    fn __exit__(&self, _kind: Option<Bound<'_, PyAny>>, _value: Option<Bound<'_, PyAny>>, _traceback: Option<Bound<'_, PyAny>>) -> PyResult<bool> {
        self.close()?;
        Ok(false)
    }

    fn __repr__(&self) -> String {
        let netns = self.netns.as_ref().map(|name| format!(", netns='{name}'")).unwrap_or_default();
        format!("LiveCapture(dev='{}'{netns})", self.dev)
    }
}

impl LiveCapture {
    fn guard(&self) -> MutexGuard<'_, Option<live::LiveCapture>> {
        lock(&self.capture)
    }

    fn closed_error(&self) -> CoreError {
        CoreError::Capture { message: format!("the capture on '{}' is closed", self.dev), errno: None }
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}
