//! The `Engine` class: the compiler's typed results read as they are (`FromPyObject`), the
//! processed and verdict record layouts, and the statistics it reports.

use std::num::NonZeroU64;

use numpy::{PyArray1, PyArray2, PyArrayMethods, PyReadonlyArray1};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList};

use crate::bursts::{BurstEvent, FlowRow};
use crate::enforce::{self, profile_event_fields, Processed, ProfileEvent, QosSettings, StatsRow, TenantInput};
use crate::engine::{self, Delta, Route, RuleEdit, RuleRow, TablesSpec, TenantEntry, TenantOp, TenantSpec, Verdict};
use crate::error::CoreError;
use crate::memory;
use crate::parse::{PacketInfo, ParseConfig, PortSet};
use crate::shaping::WeightScale;

use super::batch::PacketBatch;
use super::bursts::burst_stats_dict;
use super::rule_rows::{read_rows, Rows};
use super::timeline::{TimelineData, TimelineView};
use super::without_gil;

/// An update of this many tenant operations or more hands the heap it freed back to the kernel
/// (a policy installed whole frees as much as it builds; a small edit frees little).
const LARGE_UPDATE: usize = 1024;

/// A tenant's compiled tables as Python's `isolane.policy.TenantTables` holds them (read by
/// attribute): its rows packed (`rule_rows`), its default, and what selects its traffic.
#[derive(FromPyObject)]
struct TablesArg<'py> {
    name: String,
    packed_rows: Bound<'py, PyBytes>,
    default_action: u8,
    default_cls: u16,
    vnis: Vec<u32>,
    vlans: Vec<u16>,
    sources: Vec<(Vec<u8>, u8)>,
}

impl TablesArg<'_> {
    fn spec(&self) -> PyResult<TenantSpec> {
        let Rows { rules, actions, classes, policy_rules } = read_rows(self.packed_rows.as_bytes(), &self.name)?;
        Ok(TenantSpec { name: self.name.clone(), actions, classes, policy_rules, default_action: self.default_action, default_class: self.default_cls, rules })
    }

    /// Its rows as one policy rule's, for a rule edit.
    fn rows(&self) -> PyResult<Vec<RuleRow>> {
        let Rows { rules, actions, classes, .. } = read_rows(self.packed_rows.as_bytes(), &self.name)?;
        Ok((0..rules.len()).map(|i| RuleRow { rule: rules[i], action: actions[i], class: classes[i] }).collect())
    }

    fn route(&self) -> PyResult<Route> {
        let sources = self
            .sources
            .iter()
            .map(|(address, len)| {
                let address: [u8; 16] =
                    address.as_slice().try_into().map_err(|_| CoreError::spec_at(format!("tenant '{}'", self.name), "a source address is 16 bytes"))?;
                Ok((u128::from_be_bytes(address), *len))
            })
            .collect::<PyResult<_>>()?;
        Ok(Route { vnis: self.vnis.clone(), vlans: self.vlans.clone(), sources })
    }
}

/// One tenant operation as `isolane.engine` gives it: ("replace" | "insert", position,
/// TenantTables, TenantQos) or ("remove", position, None, None).
#[derive(FromPyObject)]
struct OpArg<'py>(String, usize, Option<TablesArg<'py>>, Option<TenantInput>);

impl OpArg<'_> {
    fn op(self) -> PyResult<TenantOp> {
        let OpArg(kind, at, tables, qos) = self;
        let entry = match (tables, qos) {
            (Some(tables), Some(qos)) => Some(Box::new(TenantEntry { tables: tables.spec()?, route: tables.route()?, qos })),
            _ => None,
        };
        match (kind.as_str(), entry) {
            ("replace", Some(tenant)) => Ok(TenantOp::Replace { at, tenant }),
            ("insert", Some(tenant)) => Ok(TenantOp::Insert { at, tenant }),
            ("remove", _) => Ok(TenantOp::Remove { at }),
            (other, _) => Err(CoreError::InvalidArgument(format!(
                "tenant op '{other}' at {at}: expected ('replace' | 'insert', at, tables, qos) or ('remove', at, None, None)"
            ))
            .into()),
        }
    }
}

/// A tenant's or class's adaptive profiles: name, class id, packets by profile, switches.
type ProfileCountsRow = (String, Option<u16>, [u64; 3], u64);

/// Statistics rows (bytes), delays at or below each edge (rows x edges), delay sums, tenant names.
type DelayHistogramsOut<'py> = (Bound<'py, PyArray1<u8>>, Bound<'py, PyArray2<u64>>, Vec<u128>, Vec<String>);

/// The engine: compiled policy tables, swapped atomically by `update`.
#[pyclass(frozen, module = "isolane._core")]
pub struct Engine {
    engine: engine::Engine,
}

#[pymethods]
impl Engine {
    #[new]
    #[pyo3(signature = (threads=1))]
    fn new(py: Python<'_>, threads: usize) -> PyResult<Self> {
        let engine = without_gil(py, || engine::Engine::with_threads(TablesSpec::default(), threads))??;
        Ok(Engine { engine })
    }

    /// Applies a policy update as the tenants that changed (`ops`, in order), the port's weight
    /// scale (times, per: a tenant's share x times / per is its units of weight), the QoS
    /// settings if they changed, and the action on packets of no tenant; returns how many
    /// tenants' tables were kept, patched and rebuilt. Nothing changes if anything is refused.
    #[pyo3(signature = (ops, weight_scale, settings, unknown_action))]
    fn apply(
        &self,
        py: Python<'_>,
        ops: Vec<OpArg<'_>>,
        weight_scale: (u32, u64),
        settings: Option<QosSettings>,
        unknown_action: u8,
    ) -> PyResult<(usize, usize, usize)> {
        let ops = ops.into_iter().map(OpArg::op).collect::<PyResult<Vec<_>>>()?;
        let large = ops.len() >= LARGE_UPDATE;
        let (times, per) = weight_scale;
        let per = NonZeroU64::new(per).ok_or_else(|| CoreError::InvalidArgument("a weight scale's divisor must be at least 1".to_string()))?;
        let delta = Delta { ops, weight_scale: WeightScale { times, per }, settings, unknown_action };
        let report = without_gil(py, || {
            let report = self.engine.apply(delta);
            if large {
                memory::release_free_heap(); // what building the new state took and freed, and the old state
            }
            report
        })??;
        Ok((report.kept, report.incremental, report.rebuilt))
    }

    /// Changes policy rule `at` of tenant `name`: op "insert" or "replace" with `rows` (the
    /// tables of a tenant whose one rule is the new rule), or "remove".
    #[pyo3(signature = (name, op, at, rows=None))]
    fn edit_tenant(&self, py: Python<'_>, name: &str, op: &str, at: i32, rows: Option<TablesArg<'_>>) -> PyResult<()> {
        let rows = rows.map(|tables| tables.rows()).transpose()?.unwrap_or_default();
        let edit = match op {
            "insert" => RuleEdit::Insert { at, rows },
            "replace" => RuleEdit::Replace { at, rows },
            "remove" => RuleEdit::Remove { at },
            other => return Err(CoreError::InvalidArgument(format!("unknown edit '{other}' (insert, replace or remove)")).into()),
        };
        Ok(without_gil(py, || self.engine.edit_tenant(name, edit))??)
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

    /// Keeps time series per tenant and class from the next packet on (docs/report.md,
    /// "Timeline"), with the most bytes in one window of `window_ns` in each bin.
    fn keep_timeline(&self, window_ns: u64) -> PyResult<()> {
        if window_ns == 0 {
            return Err(CoreError::InvalidArgument("the timeline's window must be at least 1 ns".to_string()).into());
        }
        self.engine.with_enforcer(|enforcer| enforcer.keep_timeline(window_ns));
        Ok(())
    }

    /// The time series kept since `keep_timeline`; None if it was never called.
    fn timeline(&self, py: Python<'_>) -> PyResult<Option<TimelineView>> {
        let data = self.engine.with_enforcer(|enforcer| enforcer.timeline().map(TimelineData::of));
        data.map(|data| TimelineView::new(py, data)).transpose()
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

    /// Every switch of an adaptive profile so far (raw bytes of a PROFILE_EVENT_DTYPE array).
    fn profile_events<'py>(&self, py: Python<'py>) -> Bound<'py, PyArray1<u8>> {
        let events = self.engine.with_enforcer(|enforcer| bytemuck::cast_slice::<ProfileEvent, u8>(enforcer.profile_events()).to_vec());
        PyArray1::from_vec(py, events)
    }

    /// Tenant names, by the `tenant` of profile events.
    fn profile_tenants(&self) -> Vec<String> {
        self.engine.with_enforcer(|enforcer| enforcer.profile_tenants())
    }

    /// Per tenant and class that had profiles, by name and class id (None: the tenant's own):
    /// packets enforced under each profile (by `ProfileId`) and switches.
    fn profile_counts(&self, py: Python<'_>) -> PyResult<Vec<ProfileCountsRow>> {
        let counts = without_gil(py, || self.engine.with_enforcer(|enforcer| enforcer.profile_counts()))?;
        Ok(counts.into_iter().map(|(name, cls, c)| (name, cls, c.packets, c.switches)).collect())
    }

    /// One dict per scope watched for bursts: its setting, totals and polled views.
    fn burst_stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let stats = without_gil(py, || self.engine.with_enforcer(|enforcer| enforcer.burst_stats()))?;
        PyList::new(py, stats.iter().map(|scope| burst_stats_dict(py, scope)).collect::<PyResult<Vec<_>>>()?)
    }

    /// QoS statistics, one row per (tenant, class id) seen (raw bytes of a STATS_DTYPE array):
    /// counters by colour and outcome, packets in flight to the port, queueing delay quantiles.
    fn qos_stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyArray1<u8>>> {
        // StatsRow is 8-byte aligned: its bytes are copied, not cast in place, into a u8 vector.
        let rows = without_gil(py, || self.engine.with_enforcer(|enforcer| bytemuck::cast_slice::<StatsRow, u8>(&enforcer.stats_rows()).to_vec()))?;
        Ok(PyArray1::from_vec(py, rows))
    }

    /// The statistics rows (raw bytes of a STATS_DTYPE array) with, per row, the queueing delays
    /// at or below each of `edges_ns` (rows x edges) and their exact sum in ns, and the tenant
    /// names the rows index: one reading, taken while no batch runs.
    fn delay_histograms<'py>(&self, py: Python<'py>, edges_ns: PyReadonlyArray1<'py, u64>) -> PyResult<DelayHistogramsOut<'py>> {
        let edges = edges_ns.as_slice()?;
        let (histograms, names) = without_gil(py, || self.engine.with_enforcer(|enforcer| (enforcer.delay_histograms(edges), enforcer.stats_tenants())))?;
        let rows = PyArray1::from_vec(py, bytemuck::cast_slice::<StatsRow, u8>(&histograms.rows).to_vec());
        let at_or_below = PyArray1::from_vec(py, histograms.at_or_below).reshape([histograms.rows.len(), edges.len()])?;
        Ok((rows, at_or_below, histograms.sum_ns, names))
    }

    /// Tenant names, by the `tenant` of statistics rows.
    fn stats_tenants(&self) -> Vec<String> {
        self.engine.with_enforcer(|enforcer| enforcer.stats_tenants())
    }

    /// Per tenant name (None: packets no tenant claims): packets and bytes by action, and
    /// packets by reason.
    fn counters<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let out = PyDict::new(py);
        for (name, counters) in without_gil(py, || self.engine.counters())? {
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
        return Err(CoreError::InvalidBatch("records are not whole parsed records".to_string()).into());
    }
    let out = without_gil(py, || {
        let records: &[PacketInfo] = bytemuck::cast_slice(bytes);
        bytemuck::cast_vec::<T, u8>(work(records))
    })?;
    Ok(PyArray1::from_vec(py, out))
}

/// The processed record's fields as (name, numpy type, byte offset), and its size.
#[pyfunction]
pub(super) fn processed_layout(py: Python<'_>) -> PyResult<(Bound<'_, PyList>, usize)> {
    Ok((PyList::new(py, enforce::processed_fields())?, std::mem::size_of::<Processed>()))
}

/// The verdict record's fields as (name, numpy type, byte offset), and its size.
#[pyfunction]
pub(super) fn verdict_layout(py: Python<'_>) -> PyResult<(Bound<'_, PyList>, usize)> {
    Ok((PyList::new(py, engine::verdict_fields())?, std::mem::size_of::<Verdict>()))
}

/// A profile switch's fields as (name, numpy type, byte offset), and its size.
#[pyfunction]
pub(super) fn profile_event_layout(py: Python<'_>) -> PyResult<(Bound<'_, PyList>, usize)> {
    Ok((PyList::new(py, profile_event_fields())?, std::mem::size_of::<ProfileEvent>()))
}

/// A statistics row's fields as (name, numpy type, byte offset), and its size.
#[pyfunction]
pub(super) fn stats_layout(py: Python<'_>) -> PyResult<(Bound<'_, PyList>, usize)> {
    Ok((PyList::new(py, enforce::stats_fields())?, std::mem::size_of::<StatsRow>()))
}
