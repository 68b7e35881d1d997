"""The JSON Schema (draft 2020-12) of the policy format (:func:`schema`, :func:`schema_text`)."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from isolane.policy.addresses import PORT_PATTERN, PREFIX_PATTERN
from isolane.policy.constants import (
    _METER_FIELDS,
    _METER_REQUIRED,
    ACTIONS,
    COLORS,
    COUNT_MODES,
    DSCP_NAMES,
    MAX_PORT,
    MAX_PRIORITY,
    MAX_VLAN,
    MAX_VNI,
    MAX_WEIGHT,
    METER_KINDS,
    PORT_ALPHA_LOG2,
    PORT_MODES,
    PROTOCOLS,
    SCHEMA_VERSION,
)
from isolane.policy.units import DURATION_PATTERN, RATE_PATTERN, SIZE_PATTERN


def schema() -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of the policy format.

    It checks the shape of a policy (keys, types, ranges, the syntax of prefixes, ports and
    units, which keys each meter kind takes). What needs more than one value at a time is
    checked by isolane only: host bits, reversed port ranges, duplicate names, VNIs claimed
    twice, class references, IPv4 with IPv6 in one rule, ports with portless protocols, zero
    quantities, rates that are not whole bytes, ceil below rate, rates above the port's, guarantees
    that add up to more than they can, the meters' RFC rules (PIR >= CIR, buckets that can never
    hold or refill), weights on some tenants only, a shaper without any rate.
    """
    port_number = {"type": "integer", "minimum": 0, "maximum": MAX_PORT}
    port_text = {"type": "string", "pattern": PORT_PATTERN, "description": "a port ('80') or an inclusive range ('8000-8080')"}
    port_pair = {
        "type": "array",
        "prefixItems": [port_number, port_number],
        "minItems": 2,
        "maxItems": 2,
        "description": "an inclusive range [lo, hi], as an entry of a list",
    }
    one_port = {"anyOf": [port_number, port_text, port_pair]}
    ports = {
        "description": "a port, a range or a list of them ([80, 443] is two ports; a list expands into several table rules); omitted = any",
        "anyOf": [port_number, port_text, {"type": "array", "minItems": 1, "items": one_port}],
    }

    def named_numbers(names: Iterable[str], hi: int, description: str) -> dict[str, Any]:
        one = {"anyOf": [{"type": "integer", "minimum": 0, "maximum": hi}, {"enum": sorted(names)}]}
        return {"description": description, "anyOf": [one, {"type": "array", "minItems": 1, "items": one}]}

    prefix = {
        "type": "string",
        "pattern": PREFIX_PATTERN,
        "description": "an IPv4 or IPv6 prefix (a bare address is a host prefix) or 'any'",
    }
    rate = {"type": "string", "pattern": RATE_PATTERN, "description": "bits (bps, bit/s) or bytes (B/s) per second, e.g. '40Gbps'"}
    size = {"type": "string", "pattern": SIZE_PATTERN, "description": "bytes (B) or bits (bit), e.g. '256KiB'"}
    duration = {"type": "string", "pattern": DURATION_PATTERN, "description": "ns, us, ms or s, e.g. '10us'"}
    action = {"enum": list(ACTIONS)}
    text = {"type": "string"}
    name = {"type": "string", "minLength": 1, "pattern": r"\S"}
    contract = {
        "rate": {**rate, "description": "guaranteed rate at the egress port"},
        "burst": {**size, "description": "burst of the guarantee (default: 1 ms at the rate, at least the largest frame)"},
        "ceil": {**rate, "description": "the most the tenant or class may use at the egress port (at least rate)"},
        "meter": {"$ref": "#/$defs/meter"},
        "shaper": {"$ref": "#/$defs/shaper"},
        "microburst": {"$ref": "#/$defs/microburst"},
    }
    weight = {"type": "integer", "minimum": 1, "maximum": MAX_WEIGHT}
    dscp = {"anyOf": [{"type": "integer", "minimum": 0, "maximum": 63}, {"enum": sorted(DSCP_NAMES)}]}
    colour = {"enum": list(COLORS)}
    color_action = {
        "anyOf": [
            {"enum": ["pass", "drop"]},
            {"type": "object", "additionalProperties": False, "required": ["remark"], "properties": {"remark": dscp}},
        ]
    }
    count = {"enum": list(COUNT_MODES), "description": "inner frame, outer frame, outer frame + 20 B (wire) or + 24 B (wire_fcs)"}
    meter_fields: dict[str, Any] = {"cir": rate, "cbs": size, "eir": rate, "ebs": size, "pir": rate, "pbs": size}
    by_kind = [
        {
            "if": {"properties": {"kind": {"const": kind}}},
            "then": {
                "required": list(_METER_REQUIRED[kind]),
                "properties": {key: False for key in meter_fields if key not in fields},
            },
        }
        for kind, fields in _METER_FIELDS.items()
    ]
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "urn:isolane:policy:1",
        "title": "isolane tenant policy",
        "description": "Tenants, their traffic classes, ordered rules (first match wins) and contracts. See docs/policy.md.",
        "type": "object",
        "additionalProperties": False,
        "required": ["tenants"],
        "properties": {
            "version": {"const": SCHEMA_VERSION},
            "description": text,
            "unknown_tenant": {**action, "description": "what happens to traffic of no tenant (default drop)"},
            "count": {**count, "description": "which bytes meters, shapers and the port count (default outer)"},
            "largest_frame": {**size, "description": "the largest frame (default 9216B); no default burst is smaller"},
            "color_map": {
                "type": "object",
                "description": "DSCP -> incoming colour for colour-aware meters; unmapped DSCPs are green (default: afX1 green, afX2 yellow, afX3 red)",
                "propertyNames": {"anyOf": [{"enum": sorted(DSCP_NAMES)}, {"pattern": "^0*(?:6[0-3]|[1-5]?[0-9])$"}]},
                "additionalProperties": colour,
            },
            "port": {"$ref": "#/$defs/port"},
            "tenants": {"type": "array", "items": {"$ref": "#/$defs/tenant"}},
        },
        "$defs": {
            "tenant": {
                "type": "object",
                "additionalProperties": False,
                "required": ["name"],
                "properties": {
                    "name": name,
                    "description": text,
                    "vnis": {
                        "type": "array",
                        "uniqueItems": True,
                        "items": {"type": "integer", "minimum": 0, "maximum": MAX_VNI},
                        "description": "VXLAN/Geneve VNIs (24 bits) of the tenant's tunnelled traffic",
                    },
                    "vlans": {
                        "type": "array",
                        "uniqueItems": True,
                        "items": {"type": "integer", "minimum": 0, "maximum": MAX_VLAN},
                        "description": "outer VLAN ids of the tenant's untunnelled traffic",
                    },
                    "sources": {
                        "type": "array",
                        "items": {**prefix, "not": {"const": "any"}},
                        "description": "outer source prefixes of the tenant's untunnelled traffic",
                    },
                    "weight": {**weight, "description": "share of the port's spare capacity (default: in proportion to the guarantee)"},
                    **contract,
                    "classes": {"type": "array", "minItems": 1, "items": {"$ref": "#/$defs/class"}},
                    "default_class": {**name, "description": "class of allow rules without 'class' (default: the first class)"},
                    "default": {**action, "description": "action when no rule matches (default allow)"},
                    "rules": {"type": "array", "items": {"$ref": "#/$defs/rule"}},
                },
            },
            "class": {
                "type": "object",
                "additionalProperties": False,
                "required": ["name"],
                "properties": {
                    "name": name,
                    "description": text,
                    "priority": {"type": "integer", "minimum": 0, "maximum": MAX_PRIORITY, "description": "0 is served first (default 7)"},
                    "weight": {**weight, "description": "share within its priority (default 1)"},
                    **contract,
                },
            },
            "rule": {
                "type": "object",
                "additionalProperties": False,
                "required": ["action"],
                "properties": {
                    "name": text,
                    "description": text,
                    "src": prefix,
                    "dst": prefix,
                    "src_ports": ports,
                    "dst_ports": ports,
                    "proto": named_numbers(PROTOCOLS, 255, "protocol names or numbers; omitted = any"),
                    "dscp": named_numbers(DSCP_NAMES, 63, "DSCP names or numbers 0-63; omitted = any"),
                    "action": action,
                    "class": name,
                },
                "if": {"properties": {"action": {"const": "drop"}}, "required": ["action"]},
                "then": {"not": {"required": ["class"]}},
            },
            "shaper": {
                "type": "object",
                "additionalProperties": False,
                "description": "earliest-departure-time shaper; drops at its tail beyond queue bytes or max_delay",
                "properties": {"rate": rate, "burst": size, "queue": size, "max_delay": duration},
            },
            "meter": {
                "type": "object",
                "additionalProperties": False,
                "required": ["kind"],
                "description": "RFC 2697 srTCM (cir, cbs, ebs), RFC 2698 trTCM (cir, cbs, pir, pbs) or RFC 4115 (cir, cbs, eir, ebs)",
                "properties": {
                    "kind": {"enum": list(METER_KINDS)},
                    **meter_fields,
                    "color_aware": {"type": "boolean"},
                    "count": count,
                    "actions": {
                        "type": "object",
                        "additionalProperties": False,
                        "properties": {c: color_action for c in COLORS},
                    },
                },
                "allOf": by_kind,
            },
            "port": {
                "type": "object",
                "additionalProperties": False,
                "required": ["rate", "buffer"],
                "description": "the egress port the tenants share",
                "properties": {
                    "rate": rate,
                    "buffer": size,
                    "mode": {"enum": list(PORT_MODES)},
                    "alpha": {
                        "enum": [2**k for k in PORT_ALPHA_LOG2],
                        "description": "per_tenant: a queue may hold at most alpha x the shared buffer still free (dynamic threshold; default 1)",
                    },
                    "reserve": {**size, "description": "per_tenant: bytes of the buffer set aside for the guarantees, in proportion to them (default 0B)"},
                    "microburst": {"$ref": "#/$defs/microburst"},
                },
            },
            "microburst": {
                "type": "object",
                "additionalProperties": False,
                "required": ["window", "threshold"],
                "description": "microburst detection (docs/bursts.md): a window carrying more than the threshold is a burst",
                "properties": {
                    "window": {**duration, "description": "the sliding window, 1us to 10ms"},
                    "threshold": {
                        "oneOf": [rate, {"type": "string", "pattern": r"^[0-9]+(\.[0-9]+)? ?%$"}],
                        "description": "a rate, or a percentage of the scope's own rate (the line rate for the port)",
                    },
                    "queue": {
                        "oneOf": [
                            size,
                            {"type": "object", "additionalProperties": False, "required": ["rise"], "properties": {"rise": size, "fall": size}},
                        ],
                        "description": (
                            "the queue view (needs a port): a burst while the scope's queues hold more than rise, "
                            "until they fall to fall (default half of rise)"
                        ),
                    },
                },
            },
        },
    }


def schema_text() -> str:
    """The JSON Schema of the policy format as indented JSON text (what ``isolane schema`` prints)."""
    return json.dumps(schema(), indent=2, ensure_ascii=False) + "\n"
