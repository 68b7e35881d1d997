"""The JSON Schema (draft 2020-12) of the policy format (:func:`schema`, :func:`schema_text`),
generated from the models of :mod:`isolane.policy.schema`."""

from __future__ import annotations

from typing import Any

from isolane.policy.schema import json_schema, schema_text

__all__ = ["schema", "schema_text"]


def schema() -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of the policy format, as a new dict.

    It checks the shape of a policy (keys, types, ranges, the syntax of prefixes, ports and
    units, which keys each meter kind takes, no class on a drop rule, a profile that changes
    something). What needs more than one value at a time is checked by isolane only: host bits,
    reversed port ranges, duplicate names, VNIs claimed twice, class references, IPv4 with IPv6
    in one rule, ports with portless protocols, zero quantities, rates that are not whole bytes,
    ceil below rate, rates above the port's, guarantees that add up to more than they can, the
    meters' RFC rules (PIR >= CIR, buckets that can never hold or refill), weights on some
    tenants only, a shaper without any rate, a profile without the setting that starts it (the
    tenant's microburst, the port's overload), ``borrow: false`` without guarantees, overload
    thresholds against the buffer.
    """
    return json_schema()
