//! The `RuleTable` class, and the readers of rules from Python: rule dicts and per-rule
//! columns (which `Engine` reads too).

use std::path::PathBuf;

use numpy::PyArray1;
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::classify::{self, Key, Rule};
use crate::error::CoreError;

use super::convert::{address_pairs, column, column_in_place, AddressColumn, U16, U8};
use super::error::with_path;
use super::without_gil;

/// The first-match rule table; see docs/classify-contract.md.
#[pyclass(module = "isolane._core")]
pub struct RuleTable {
    table: std::sync::RwLock<classify::RuleTable>,
}

impl RuleTable {
    fn build(py: Python<'_>, rules: Vec<Rule>) -> PyResult<Self> {
        let table = without_gil(py, || classify::RuleTable::new(rules))??;
        Ok(RuleTable { table: std::sync::RwLock::new(table) })
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, classify::RuleTable> {
        self.table.read().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, classify::RuleTable> {
        self.table.write().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
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
        let text = std::fs::read_to_string(&path).map_err(|err| with_path(err.into(), &path))?;
        let rules = classify::parse_classbench(&text).map_err(|err| err.within(path.display().to_string()))?;
        Self::build(py, rules)
    }

    /// Builds a table from rule dicts: `src`/`dst` ("10.0.0.0/8", "2001:db8::/32", a bare
    /// address, or absent for any), `src_ports`/`dst_ports` (a port or (lo, hi)), `proto`
    /// and `dscp` (int, or absent for any).
    #[staticmethod]
    fn from_rules(py: Python<'_>, rules: Vec<Bound<'_, PyDict>>) -> PyResult<Self> {
        let parsed = rules
            .iter()
            .enumerate()
            .map(|(index, rule)| rule_from_dict(rule).map_err(|err| CoreError::spec_at(format!("rule {index}"), err.value(py).to_string()).into()))
            .collect::<PyResult<Vec<_>>>()?;
        Self::build(py, parsed)
    }

    /// The first matching rule for every packet (-1: none), without the GIL.
    #[pyo3(signature = (src, dst, src_port, dst_port, proto, dscp=None))]
    #[allow(clippy::too_many_arguments)] // one argument a column, as Python passes them
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
            return Err(CoreError::InvalidArgument(format!("dst has {} entries, expected {n}", dst.len())).into());
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
        Ok(self.write().insert(index, rule)?)
    }

    /// Removes rule `index`; later rules move up by one.
    fn remove(&self, index: usize) -> PyResult<()> {
        self.write().remove(index)?;
        Ok(())
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
            return Err(CoreError::spec(format!("unknown key '{key}' (expected one of {})", KEYS.join(", "))).into());
        }
    }
    let prefix = |name: &str| -> PyResult<(u128, u8)> {
        match rule.get_item(name)? {
            None => Ok((0, 0)),
            Some(value) if value.is_none() => Ok((0, 0)),
            Some(value) => match value.extract::<String>() {
                Ok(text) => Ok(prefix_of(&text).map_err(|err| err.within(name))?),
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
    rule.check()?;
    Ok(rule)
}

/// Parses "ADDRESS[/LEN]" (IPv4 or IPv6) into a 128-bit IPv4-mapped prefix.
fn prefix_of(text: &str) -> Result<(u128, u8), CoreError> {
    let (address, len) = match text.split_once('/') {
        Some((address, len)) => (address, Some(len)),
        None => (text, None),
    };
    let address: std::net::IpAddr = address.trim().parse().map_err(|_| CoreError::spec(format!("'{text}' is not an IP address or prefix")))?;
    let (value, offset, width) = match address {
        std::net::IpAddr::V4(v4) => (classify::ipv4_mapped(u32::from(v4)), 96, 32),
        std::net::IpAddr::V6(v6) => (u128::from(v6), 0, 128),
    };
    let len = match len {
        None => width,
        Some(len) => len.trim().parse::<u8>().ok().filter(|&l| l <= width).ok_or_else(|| CoreError::spec(format!("'{text}' has an invalid prefix length")))?,
    };
    Ok((value, offset + len))
}

fn address_of(obj: &Bound<'_, PyAny>) -> PyResult<u128> {
    if let Ok(bytes) = obj.extract::<Vec<u8>>() {
        let bytes: [u8; 16] = bytes.try_into().map_err(|_| CoreError::spec("an address is 16 bytes (IPv4-mapped for IPv4)"))?;
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

/// Rules from the rule arrays of docs/classify-contract.md, in its order: src, src_len, dst,
/// dst_len, src_port_lo, src_port_hi, dst_port_lo, dst_port_hi, proto, proto_mask, dscp, dscp_mask.
pub(super) fn rules_from_columns(columns: [&Bound<'_, PyAny>; 12]) -> PyResult<Vec<Rule>> {
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
