//! A tenant's tables from its spec: checked, built, or edited in place of the old ones when one
//! rule differs.

use super::*;

pub(super) fn check_tenant(tenant: &TenantSpec) -> Result<(), CoreError> {
    let n = tenant.rules.len();
    if tenant.actions.len() != n || tenant.classes.len() != n || tenant.policy_rules.len() != n {
        return Err(CoreError::spec(format!(
            "{n} rules but {} actions, {} classes, {} policy rule indices",
            tenant.actions.len(),
            tenant.classes.len(),
            tenant.policy_rules.len()
        )));
    }
    // The engine numbers policy rules by counting their first rows.
    let mut previous = -1;
    for (row, &policy_rule) in tenant.policy_rules.iter().enumerate() {
        if !(policy_rule == previous + 1 || (row > 0 && policy_rule == previous)) {
            return Err(CoreError::spec_at(
                format!("row {row}"),
                format!("policy rule {policy_rule} after {previous}: policy rules must be numbered from 0, in order"),
            ));
        }
        previous = policy_rule;
    }
    Ok(())
}

/// What each row of `spec` does (`spec` checked by [`check_tenant`]).
pub(super) fn outcomes(spec: &TenantSpec) -> impl Iterator<Item = RowOutcome> + '_ {
    let first = |row: usize| row == 0 || spec.policy_rules[row] != spec.policy_rules[row - 1];
    (0..spec.actions.len()).map(move |row| RowOutcome { action: spec.actions[row], class: spec.classes[row], first_of_policy_rule: first(row) })
}

pub(super) fn build(tenant: &TenantSpec, index: usize) -> Result<TenantTables, CoreError> {
    let table = RuleTable::with_payloads(tenant.rules.iter().copied().zip(outcomes(tenant)));
    let mut table = table.map_err(|err| err.within(format!("tenant {index} ({})", tenant.name)))?;
    table.rebuild_elsewhere(); // the engine rebuilds worn trees in the background
    Ok(TenantTables::new(tenant, table))
}

/// The old table with the one rule that differs inserted, removed or replaced; `None` when
/// the rule lists differ by more than that.
pub(super) fn incremental(old: &TenantTables, new: &TenantSpec) -> Option<RuleTable<RowOutcome>> {
    let b = &new.rules;
    let (old_len, shorter) = (old.table.len(), old.table.len().min(b.len()));
    let head = old.table.rules().zip(b).take_while(|(x, y)| x == *y).count();
    let tail = old.table.rules().rev().zip(b.iter().rev()).take(shorter - head).take_while(|(x, y)| x == *y).count();
    let mut table = old.table.clone();
    match (old_len - head - tail, b.len() - head - tail) {
        (0, 0) => {}
        (0, 1) => table.insert(head, b[head]).ok()?,
        (1, 0) => {
            table.remove(head).ok()?;
        }
        (1, 1) => {
            table.replace(head, b[head]).ok()?;
        }
        _ => return None,
    }
    Some(table)
}
