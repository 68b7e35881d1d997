//! The check for rules that never match (`classify::shadowed`), on a tenant's packed rows.

use pyo3::prelude::*;
use pyo3::types::PyBytes;

use crate::classify::shadowed::{self, Shadowed};

use super::rule_rows::read_rows;
use super::without_gil;

/// The policy rules of tenant `tenant`'s packed table rows that can never match, each with the
/// earliest policy rules covering its rows: `[(rule, [covering rules, ascending])]`. Groups of rows
/// alike but for their ports larger than `big_group` are indexed by port instead of scanned.
#[pyfunction]
pub(super) fn shadowed_rules(py: Python<'_>, packed_rows: &Bound<'_, PyBytes>, tenant: &str, big_group: usize) -> PyResult<Vec<Shadowed>> {
    let packed = packed_rows.as_bytes();
    let found = without_gil(py, || read_rows(packed, tenant).map(|rows| shadowed::shadowed_rules(&rows.rules, &rows.policy_rules, big_group)))??;
    Ok(found)
}
