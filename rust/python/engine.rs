//! The `Engine` class: its spec and QoS readers, the processed and verdict record layouts, and
//! the statistics it reports.

use numpy::{Element, PyArray1, PyArrayMethods, PyReadonlyArray1};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

use crate::bursts::{BurstEvent, FlowRow};
use crate::enforce::{self, ContractColumns, MeterColumns, Processed, QosColumns, QosStats, ShaperColumns};
use crate::engine::{self, RuleEdit, RuleRow, TablesSpec, TenantSpec, Verdict};
use crate::error::CoreError;
use crate::memory;
use crate::parse::{PacketInfo, ParseConfig, PortSet};

use super::batch::PacketBatch;
use super::bursts::{burst_columns_from_dict, burst_stats_dict};
use super::convert::{as_array, column, I64, U16, U32, U64, U8};
use super::rule_table::{rules_from_columns, RULE_COLUMNS};
use super::without_gil;

/// One tenant of an engine spec: the rule columns plus `name`, `action`, `cls`,
/// `policy_rule` (per rule), `default_action` and `default_cls`.
fn tenant_from_dict(tenant: &Bound<'_, PyDict>) -> PyResult<TenantSpec> {
    let item = |key: &str| -> PyResult<Bound<'_, PyAny>> { tenant.get_item(key)?.ok_or_else(|| PyValueError::new_err(format!("tenant spec lacks '{key}'"))) };
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
    let item = |key: &str| -> PyResult<Bound<'_, PyAny>> { spec.get_item(key)?.ok_or_else(|| PyValueError::new_err(format!("engine spec lacks '{key}'"))) };
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
    Ok(TablesSpec { tenants, vnis: item("vnis")?.extract()?, vlans: item("vlans")?.extract()?, sources, unknown_action: item("unknown_action")?.extract()? })
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
        let engine = without_gil(py, || engine::Engine::with_threads(TablesSpec::default(), threads))??;
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
        }?;
        Ok((report.kept, report.incremental, report.rebuilt))
    }

    /// Changes policy rule `at` of tenant `name`: op "insert" or "replace" with `rows` (the
    /// rule columns plus `action` and `cls` of the table rows it compiles to), or "remove".
    #[pyo3(signature = (name, op, at, rows=None))]
    fn edit_tenant(&self, py: Python<'_>, name: &str, op: &str, at: i32, rows: Option<&Bound<'_, PyDict>>) -> PyResult<()> {
        let rows = match rows {
            Some(rows) => {
                let item = |key: &str| -> PyResult<Bound<'_, PyAny>> { rows.get_item(key)?.ok_or_else(|| PyValueError::new_err(format!("rows lack '{key}'"))) };
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
        return Err(CoreError::InvalidBatch("records are not whole parsed records".to_string()).into());
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

/// A value of a QoS spec dict, named in the error when it is missing.
fn qos_item<'py>(dict: &Bound<'py, PyDict>, key: &str) -> PyResult<Bound<'py, PyAny>> {
    dict.get_item(key)?.ok_or_else(|| PyValueError::new_err(format!("qos spec lacks '{key}'")))
}

pub(super) fn qos_vector<T: Element + Copy>(dict: &Bound<'_, PyDict>, key: &str, bounds: (i128, i128)) -> PyResult<Vec<T>> {
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
