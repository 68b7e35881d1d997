//! Plainly valid rules (`crate::plain_rules`) made Python `Rule`s, class and all, without running
//! `Rule.__init__` for each: a rule is made empty and each of its slots set through the slot's
//! member descriptor, as `isolane.policy.model.RULE_SLOTS` gives them. A rule so made costs a
//! fifth of one made by `Rule(...)`, which sets each field through `object.__setattr__` in Python.

use std::collections::HashSet;

use pyo3::exceptions::PyValueError;
use pyo3::ffi;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList, PyString, PyTuple, PyType};
use rustc_hash::FxHashMap;

use super::rule_rows::RuleRecord;
use super::yaml::RecentStrings;
use crate::engine::{ALLOW, DROP, NO_CLASS};
use crate::plain_rules::{PlainRule, Vocabulary};

/// `isolane.policy.constants.RULE_VOCABULARY`: the names and limits rules are read with.
#[derive(FromPyObject)]
pub(super) struct RuleVocabulary {
    protocols: FxHashMap<String, u8>,
    dscps: FxHashMap<String, u8>,
    port_protocols: HashSet<u8>,
    max_expansion: u64,
}

impl From<RuleVocabulary> for Vocabulary {
    fn from(given: RuleVocabulary) -> Self {
        let RuleVocabulary { protocols, dscps, port_protocols, max_expansion } = given;
        Vocabulary { protocols, dscps, port_protocols: port_protocols.into_iter().collect(), max_expansion }
    }
}

/// `isolane.policy.model.RULE_SLOTS`: the `Rule` type, and the member descriptor of each of its
/// fields in their order (action, class_name, src, dst, src_ports, dst_ports, proto, dscp, name,
/// description, ethertype).
#[derive(FromPyObject)]
pub(super) struct RuleSlots<'py> {
    kind: Bound<'py, PyType>,
    fields: Vec<Bound<'py, PyAny>>,
}

const RULE_FIELDS: usize = 11;

/// The classes of the tenant whose rules are made: their names (`None` where they could not be
/// read, as Python's checks have it) and its default class.
pub(super) struct TenantClasses<'py> {
    pub names: Option<Vec<String>>,
    pub default: Option<Bound<'py, PyString>>,
}

/// What makes a `Rule` without its `__init__`: `object.__new__` and each field's slot setter.
struct RuleMaker<'py> {
    kind: Bound<'py, PyType>,
    new: Bound<'py, PyAny>,
    fields: [SlotSetter<'py>; RULE_FIELDS],
}

impl<'py> RuleMaker<'py> {
    fn new(slots: &RuleSlots<'py>) -> PyResult<Self> {
        let fields = slots.fields.iter().map(SlotSetter::new).collect::<PyResult<Vec<_>>>()?;
        let count = fields.len();
        let fields = fields.try_into().map_err(|_| PyValueError::new_err(format!("a rule has {RULE_FIELDS} fields, not {count}")))?;
        Ok(RuleMaker { kind: slots.kind.clone(), new: slots.kind.getattr(intern!(slots.kind.py(), "__new__"))?, fields })
    }

    fn make(&self, values: [Option<Bound<'py, PyAny>>; RULE_FIELDS]) -> PyResult<Bound<'py, PyAny>> {
        let made = self.new.call1((&self.kind,))?;
        for (field, value) in self.fields.iter().zip(values) {
            field.set(&made, value)?;
        }
        Ok(made)
    }
}

/// A data descriptor's `__set__`, called as the C function its type has for it (as
/// `descriptor.__set__(owner, value)` calls it, without making a bound method each time).
struct SlotSetter<'py> {
    descriptor: Bound<'py, PyAny>,
    set: ffi::descrsetfunc,
}

impl<'py> SlotSetter<'py> {
    fn new(descriptor: &Bound<'py, PyAny>) -> PyResult<Self> {
        // SAFETY: a live object's type is a live type object, while the GIL is held.
        let set = unsafe { (*ffi::Py_TYPE(descriptor.as_ptr())).tp_descr_set };
        let set = set.ok_or_else(|| PyValueError::new_err(format!("{descriptor} cannot set a field")))?;
        Ok(SlotSetter { descriptor: descriptor.clone(), set })
    }

    fn set(&self, owner: &Bound<'py, PyAny>, value: Option<Bound<'py, PyAny>>) -> PyResult<()> {
        let py = owner.py();
        let value = value.unwrap_or_else(|| py.None().into_bound(py));
        // SAFETY: the three objects are alive for the call, and the GIL is held; the function
        // borrows its arguments and returns -1 with an exception set if it fails.
        let status = unsafe { (self.set)(self.descriptor.as_ptr(), owner.as_ptr(), value.as_ptr()) };
        if status == 0 {
            Ok(())
        } else {
            Err(PyErr::fetch(py))
        }
    }
}

/// What [`make_rules`] gives: the rules (`None` where Python must read one), how many are `None`,
/// and the tenant's packed table rows where it packed them.
pub(super) type MadeRules<'py> = (Bound<'py, PyList>, usize, Option<Bound<'py, PyBytes>>);

/// Each of `rules` made a `Rule`, or `None` where Python must read it, and how many are `None`;
/// and, if every rule was made and there are [`ROWS_FROM`] or more, the tenant's table rows as
/// `isolane.policy.compile` packs them.
pub(super) fn make_rules<'py>(
    py: Python<'py>,
    rules: &[Option<PlainRule>],
    classes: &TenantClasses<'py>,
    slots: &RuleSlots<'py>,
    strings: &mut RecentStrings,
    shared: &mut SharedTuples,
) -> PyResult<MadeRules<'py>> {
    let maker = RuleMaker::new(slots)?;
    let mut left = 0;
    let mut made = Vec::with_capacity(rules.len());
    for rule in rules {
        let rule = match rule {
            Some(rule) => make_rule(py, rule, classes, &maker, strings, shared)?,
            None => None,
        };
        left += usize::from(rule.is_none());
        made.push(rule);
    }
    let rows = if left == 0 && rules.len() >= ROWS_FROM { table_rows(rules, classes) } else { None };
    Ok((PyList::new(py, made)?, left, rows.map(|rows| PyBytes::new(py, bytemuck::cast_slice(&rows)))))
}

/// The fewest rules a tenant has for its rows to be packed here: Python keeps the tables of a
/// tenant of two rules or more (its check for rules never matched compiles them), and
/// compiles a one-rule tenant's when an engine takes it.
const ROWS_FROM: usize = 2;

/// The table rows of `rules` (each made), if every class they name is among the tenant's.
fn table_rows(rules: &[Option<PlainRule>], classes: &TenantClasses<'_>) -> Option<Vec<RuleRecord>> {
    let names = classes.names.as_ref()?;
    let class_id = |name: &str| names.iter().position(|known| known == name).and_then(|id| u16::try_from(id).ok());
    let default = classes.default.as_ref().and_then(|name| name.to_str().ok()).and_then(class_id);
    let mut rows = Vec::with_capacity(rules.len());
    for (index, rule) in rules.iter().enumerate() {
        let rule = rule.as_ref()?;
        let (action, cls) = match &rule.class {
            _ if !rule.allow => (DROP, NO_CLASS),
            Some(name) => (ALLOW, class_id(name)?),
            None => (ALLOW, default?),
        };
        let policy_rule = i32::try_from(index).ok()?;
        rows.extend(rule.table_rules().iter().map(|table_rule| RuleRecord::new(table_rule, policy_rule, cls, action)));
    }
    Some(rows)
}

/// `rule` as a `Rule` of the tenant, or `None` if it names a class the tenant lacks (which Python reports).
fn make_rule<'py>(
    py: Python<'py>,
    rule: &PlainRule,
    classes: &TenantClasses<'py>,
    maker: &RuleMaker<'py>,
    strings: &mut RecentStrings,
    shared: &mut SharedTuples,
) -> PyResult<Option<Bound<'py, PyAny>>> {
    let class = match &rule.class {
        None if rule.allow => classes.default.clone().map(Bound::into_any),
        None => None,
        Some(name) if classes.names.as_ref().is_some_and(|names| !names.contains(name)) => return Ok(None),
        Some(name) => Some(strings.get(py, name).into_any()),
    };
    let action = if rule.allow { intern!(py, "allow") } else { intern!(py, "drop") };
    let prefix = |prefix: Option<u64>| prefix.map(|prefix| prefix.into_pyobject(py).map(Bound::into_any)).transpose();
    let values: [Option<Bound<'py, PyAny>>; RULE_FIELDS] = [
        Some(action.clone().into_any()),
        class,
        prefix(rule.src)?,
        prefix(rule.dst)?,
        shared.ports(py, rule.src_ports.as_deref())?,
        shared.ports(py, rule.dst_ports.as_deref())?,
        shared.numbers(py, rule.proto.as_deref())?,
        shared.numbers(py, rule.dscp.as_deref())?,
        rule.name.as_deref().map(|name| strings.get(py, name).into_any()),
        None, // description and ethertype: never in a plain rule
        None,
    ];
    maker.make(values).map(Some)
}

/// Tuples of ports and of numbers that rules repeat, made once (a policy of many tenants writes
/// the same few): one Python object each however often it is written, as
/// `isolane.policy.validate` shares the values it reads.
#[derive(Default)]
pub(super) struct SharedTuples {
    ports: FxHashMap<Vec<(u16, u16)>, Py<PyTuple>>,
    numbers: FxHashMap<Vec<u8>, Py<PyTuple>>,
}

impl SharedTuples {
    /// The most tuples of each kind kept: past it, the table starts again.
    const MOST: usize = 4096;

    fn ports<'py>(&mut self, py: Python<'py>, ranges: Option<&[(u16, u16)]>) -> PyResult<Option<Bound<'py, PyAny>>> {
        ranges.map(|ranges| shared_tuple(py, &mut self.ports, ranges)).transpose()
    }

    fn numbers<'py>(&mut self, py: Python<'py>, numbers: Option<&[u8]>) -> PyResult<Option<Bound<'py, PyAny>>> {
        numbers.map(|numbers| shared_tuple(py, &mut self.numbers, numbers)).transpose()
    }
}

/// The tuple of `items`, from `table` if it was made before.
fn shared_tuple<'py, T>(py: Python<'py>, table: &mut FxHashMap<Vec<T>, Py<PyTuple>>, items: &[T]) -> PyResult<Bound<'py, PyAny>>
where
    T: Copy + Eq + std::hash::Hash + IntoPyObject<'py>,
{
    if let Some(made) = table.get(items) {
        return Ok(made.bind(py).clone().into_any());
    }
    let made = PyTuple::new(py, items.iter().copied())?;
    if table.len() >= SharedTuples::MOST {
        table.clear();
    }
    table.insert(items.to_vec(), made.clone().unbind());
    Ok(made.into_any())
}
