//! The code families of `crate::codes` for Python: `isolane.codes` builds the enums
//! (`isolane.Outcome`, ...) and the policy's code tables (`METER_KINDS`, ...) from them.

use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::bursts::{Scope, View};
use crate::codes::names;
use crate::enforce::{ColorActionCode, Count, Outcome, ProfileId, SwitchCause, NO_COLOR};
use crate::meter::{Color, MeterKindCode};
use crate::parse::{Status, Tunnel};
use crate::shaping::PortMode;
use crate::verdict::{Action, Reason};

/// Every family of codes: {family: [(name, code), ...]}, names in snake case, in code order.
#[pyfunction]
pub(super) fn codes(py: Python<'_>) -> PyResult<Bound<'_, PyDict>> {
    // A processed record's `color` is a meter's colour, or none: the classifier dropped it.
    let mut colors = names::<Color>();
    colors.push(("none".to_string(), NO_COLOR));
    let families = [
        ("status", names::<Status>()),
        ("tunnel", names::<Tunnel>()),
        ("reason", names::<Reason>()),
        ("action", names::<Action>()),
        ("color", colors),
        ("outcome", names::<Outcome>()),
        ("burst_scope", names::<Scope>()),
        ("burst_view", names::<View>()),
        ("profile", names::<ProfileId>()),
        ("switch_cause", names::<SwitchCause>()),
        ("meter_kind", names::<MeterKindCode>()),
        ("color_action", names::<ColorActionCode>()),
        ("count", names::<Count>()),
        ("port_mode", names::<PortMode>()),
    ];
    let out = PyDict::new(py);
    for (family, codes) in families {
        out.set_item(family, codes)?;
    }
    Ok(out)
}
