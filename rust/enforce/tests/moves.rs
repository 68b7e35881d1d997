//! Tenants an update moves keep their stages ([`super::super::moves`]).

use super::*;

/// Tenant `at`'s stages by value: its meter and shaper, then its classes'.
fn stages_of(e: &Enforcer, at: usize) -> String {
    let state = &e.tenants[at];
    let rows = state.first_row as usize..(state.first_row + state.classes) as usize;
    let classes: Vec<_> = e.class_stages.get(rows).unwrap_or_default().iter().map(|s| (s.meter, s.shaper)).collect();
    format!("{:?} {:?} {classes:?}", state.stage.meter, state.stage.shaper)
}

#[test]
fn a_tenant_an_update_moves_keeps_its_stages_whether_put_in_or_taken_out_first() {
    let (tenants, _) = tenants_a_b_c();
    let a = || vec![tenants[0].clone()];
    let through_a: Vec<_> = (0..3).map(|i| (packet((MS + i) as i64, 100), verdict(0, 0, ALLOW))).collect();
    let fresh = stages_of(&with_and_without_b().0, 0);
    let names = |e: &Enforcer| e.contracts.iter().map(|kept| kept.name.to_string()).collect::<Vec<_>>();
    for put_in_first in [false, true] {
        let (mut e, _) = with_and_without_b();
        run(&mut e, &through_a);
        e.drain();
        let before = stages_of(&e, 0);
        assert_ne!(before, fresh, "a's packets drew on its meter and shapers");
        e.begin_moves(["a".to_string()].into_iter().collect());
        let moved = if put_in_first { e.insert(3, a()) && e.remove(0) } else { e.remove(0) && e.insert(2, a()) };
        e.end_moves();
        assert!(moved);
        assert_eq!(names(&e), ["b", "c", "a"]);
        assert_eq!(stages_of(&e, 2), before, "put in first: {put_in_first}");
        assert_stats_add_up(&e, 3);
    }
    // Not announced as a move: a is refused while its copy is in place, and comes back fresh after it.
    let (mut e, _) = with_and_without_b();
    run(&mut e, &through_a);
    e.drain();
    assert!(!e.insert(3, a()));
    assert!(e.remove(0) && e.insert(2, a()));
    assert_eq!(stages_of(&e, 2), fresh);
}
