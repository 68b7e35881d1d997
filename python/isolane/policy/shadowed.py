"""Rules that never match: the policy rules of a tenant's tables that earlier rules cover."""

from __future__ import annotations

from isolane._core import shadowed_rules
from isolane.policy.compile import TenantTables

_BIG_GROUP = 48
"""Groups of table rules alike but for their ports are scanned up to this size, indexed by port above it."""


def _shadowed_rules(t: TenantTables) -> list[tuple[int, list[int]]]:
    """Policy rules none of whose table rules can match because, for each of them, a table rule
    of an earlier policy rule covers it (every field of the earlier one contains the later one's).
    Returns ``[(rule, [earliest covering rules])]``.

    Runs in the Rust core (``rust/classify/shadowed.rs``): candidates are found through hash
    indexes over the prefixes, protocol and DSCP masks in use, never by comparing all pairs. A
    side that is "any" beside an IPv4-only side counts as any IPv4 address; frame (EtherType)
    rules cover frame rules only.
    """
    return shadowed_rules(t.packed_rows, t.name, _BIG_GROUP)
