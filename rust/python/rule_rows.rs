//! A tenant's table rows as Python packs them: one fixed-size record a table rule (the rule,
//! what it does and the policy rule it came from), all of a tenant's in one `bytes`, so the
//! compiler keeps one small object a tenant instead of fifteen arrays.

use bytemuck::{Pod, Zeroable};
use pyo3::prelude::*;
use pyo3::types::PyList;

use crate::classify::Rule;
use crate::error::CoreError;

/// One table rule as `isolane.policy.RULE_ROW_DTYPE` lays it out (native byte order; addresses
/// big-endian, as numpy's (n, 16) address arrays hold them).
#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
pub(super) struct RuleRecord {
    src: [u8; 16],
    dst: [u8; 16],
    policy_rule: i32,
    src_port_lo: u16,
    src_port_hi: u16,
    dst_port_lo: u16,
    dst_port_hi: u16,
    cls: u16,
    src_len: u8,
    dst_len: u8,
    proto: u8,
    proto_mask: u8,
    dscp: u8,
    dscp_mask: u8,
    action: u8,
    _padding: [u8; 3],
}

/// The record's fields as (name, numpy type, byte offset).
fn rule_row_fields() -> Vec<(&'static str, &'static str, usize)> {
    use std::mem::offset_of;
    vec![
        ("src", "16u1", offset_of!(RuleRecord, src)),
        ("dst", "16u1", offset_of!(RuleRecord, dst)),
        ("policy_rule", "=i4", offset_of!(RuleRecord, policy_rule)),
        ("src_port_lo", "=u2", offset_of!(RuleRecord, src_port_lo)),
        ("src_port_hi", "=u2", offset_of!(RuleRecord, src_port_hi)),
        ("dst_port_lo", "=u2", offset_of!(RuleRecord, dst_port_lo)),
        ("dst_port_hi", "=u2", offset_of!(RuleRecord, dst_port_hi)),
        ("cls", "=u2", offset_of!(RuleRecord, cls)),
        ("src_len", "u1", offset_of!(RuleRecord, src_len)),
        ("dst_len", "u1", offset_of!(RuleRecord, dst_len)),
        ("proto", "u1", offset_of!(RuleRecord, proto)),
        ("proto_mask", "u1", offset_of!(RuleRecord, proto_mask)),
        ("dscp", "u1", offset_of!(RuleRecord, dscp)),
        ("dscp_mask", "u1", offset_of!(RuleRecord, dscp_mask)),
        ("action", "u1", offset_of!(RuleRecord, action)),
    ]
}

/// The table row record's fields as (name, numpy type, byte offset), and its size.
#[pyfunction]
pub(super) fn rule_row_layout(py: Python<'_>) -> PyResult<(Bound<'_, PyList>, usize)> {
    Ok((PyList::new(py, rule_row_fields())?, std::mem::size_of::<RuleRecord>()))
}

/// A tenant's rows: each rule, its action, class and policy rule.
pub(super) struct Rows {
    pub rules: Vec<Rule>,
    pub actions: Vec<u8>,
    pub classes: Vec<u16>,
    pub policy_rules: Vec<i32>,
}

/// Reads packed records (read unaligned: a `bytes` object's data carries no alignment promise).
pub(super) fn read_rows(packed: &[u8], tenant: &str) -> Result<Rows, CoreError> {
    let size = std::mem::size_of::<RuleRecord>();
    if !packed.len().is_multiple_of(size) {
        return Err(CoreError::spec_at(format!("tenant '{tenant}'"), format!("packed rows are {} bytes, not whole {size}-byte records", packed.len())));
    }
    let records: Vec<RuleRecord> = packed.chunks_exact(size).map(bytemuck::pod_read_unaligned).collect();
    Ok(Rows {
        rules: records.iter().map(RuleRecord::rule).collect(),
        actions: records.iter().map(|r| r.action).collect(),
        classes: records.iter().map(|r| r.cls).collect(),
        policy_rules: records.iter().map(|r| r.policy_rule).collect(),
    })
}

impl RuleRecord {
    /// The record of table rule `rule`, which policy rule `policy_rule` compiled into.
    pub(super) fn new(rule: &Rule, policy_rule: i32, cls: u16, action: u8) -> Self {
        RuleRecord {
            src: rule.src.to_be_bytes(),
            dst: rule.dst.to_be_bytes(),
            policy_rule,
            src_port_lo: rule.src_ports.0,
            src_port_hi: rule.src_ports.1,
            dst_port_lo: rule.dst_ports.0,
            dst_port_hi: rule.dst_ports.1,
            cls,
            src_len: rule.src_len,
            dst_len: rule.dst_len,
            proto: rule.proto,
            proto_mask: rule.proto_mask,
            dscp: rule.dscp,
            dscp_mask: rule.dscp_mask,
            action,
            _padding: [0; 3],
        }
    }

    fn rule(&self) -> Rule {
        Rule {
            src: u128::from_be_bytes(self.src),
            src_len: self.src_len,
            dst: u128::from_be_bytes(self.dst),
            dst_len: self.dst_len,
            src_ports: (self.src_port_lo, self.src_port_hi),
            dst_ports: (self.dst_port_lo, self.dst_port_hi),
            proto: self.proto,
            proto_mask: self.proto_mask,
            dscp: self.dscp,
            dscp_mask: self.dscp_mask,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_record_has_no_hidden_padding_and_reads_unaligned() {
        let fields = rule_row_fields();
        assert!(fields.windows(2).all(|pair| pair[0].2 < pair[1].2), "fields in record order");
        assert_eq!((fields.last().unwrap().2, std::mem::size_of::<RuleRecord>()), (52, 56), "action last, then 3 bytes of explicit padding");
        let mut record = RuleRecord::zeroed();
        record.dst[15] = 7;
        record.dst_len = 128;
        record.policy_rule = -1;
        record.cls = 513;
        let mut packed = vec![0u8];
        packed.extend_from_slice(bytemuck::bytes_of(&record));
        let rows = read_rows(&packed[1..], "t").unwrap();
        assert_eq!((rows.rules[0].dst, rows.rules[0].dst_len, rows.policy_rules[0], rows.classes[0]), (7, 128, -1, 513));
        assert!(read_rows(&packed, "t").is_err());
    }
}
