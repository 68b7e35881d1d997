"""The JSON Schema (draft 2020-12) of the report that ``isolane replay --json`` writes and
:meth:`~isolane.Report.to_json` returns, version :data:`~isolane.report.model.SCHEMA_VERSION`
(``docs/report.md`` says what each field means; ``isolane schema --report`` prints it)."""

from __future__ import annotations

from typing import Any

from isolane.report.model import COLORS, DROP_STAGES, REASONS, SCHEMA_VERSION
from isolane.report.timeline import TENANT_FIELDS

_COUNT = {"type": "integer", "minimum": 0}
_NS = {"type": ["integer", "null"]}
_NUMBER = {"type": "number", "minimum": 0}


def _exactly(keys: list[str], value: dict[str, Any]) -> dict[str, Any]:
    return {"type": "object", "properties": dict.fromkeys(keys, value), "required": keys, "additionalProperties": False}


def _object(properties: dict[str, Any], *, open_ended: bool = False) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": list(properties), "additionalProperties": open_ended}


def _series(kind: Any) -> dict[str, Any]:
    return {"type": "array", "items": kind}


_QUANTILES = _object({"count": _COUNT, "p50": _NS, "p99": _NS, "p999": _NS, "max": _NS})
_COUNTS = {
    "packets": _COUNT,
    "bytes": _COUNT,
    "colors": _exactly(COLORS, _COUNT),
    "passed": _COUNT,
    "remarked": _COUNT,
    "dropped": _COUNT,
    "drops": _exactly(DROP_STAGES, _COUNT),
    "classifier_drops": _exactly(REASONS, _COUNT),
    "in_flight": _COUNT,
}
_RATES = {"first_ns": _NS, "last_ns": _NS, "mean_bps": _NUMBER, "mean_pps": _NUMBER, "peak_bps": _NUMBER}
_NAME = {"type": ["string", "null"]}
_DELAYS = {"oneOf": [_QUANTILES, {"type": "null"}]}
_CLASS = _object({"cls": {"type": ["integer", "null"]}, "class": _NAME, **_COUNTS, **_RATES, "delay_ns": _DELAYS, "hold_ns": _QUANTILES})
_TENANT = _object({"tenant": _NAME, **_COUNTS, **_RATES, "classes": {"type": "array", "items": _CLASS}})
_TIMELINE = _object(
    {
        "start_ns": _NS,
        "bin_ns": {"type": "integer", "minimum": 1},
        "window_ns": {"type": "integer", "minimum": 1},
        "bins": _COUNT,
        "tenants": {"type": "array", "items": _object({"tenant": _NAME, **{f: _series(_COUNT) for f in TENANT_FIELDS}})},
        "classes": {
            "type": "array",
            "items": _object(
                {
                    "tenant": _NAME,
                    "cls": {"type": "integer"},
                    "class": _NAME,
                    "delay_count": _series(_COUNT),
                    "delay_mean_ns": _series({"type": ["number", "null"]}),
                    "delay_max_ns": _series(_NS),
                }
            ),
        },
    }
)
_RATIO = {"type": ["number", "null"], "minimum": 0}
_ISOLATION = _object(
    {
        "fairness_index": _RATIO,
        "tenants": {
            "type": "array",
            "items": _object(
                {
                    "tenant": {"type": "string"},
                    "entitled_bps": {"type": ["integer", "null"], "minimum": 0},
                    "offered_bps": _NUMBER,
                    "achieved_bps": _NUMBER,
                    "share": _RATIO,
                    "conforming_dropped": _COUNT,
                    "delays": {
                        "type": "array",
                        "items": _object(
                            {
                                "cls": _COUNT,
                                "class": {"type": "string"},
                                "p99_ns": _NS,
                                "alone_p99_ns": _NS,
                                "inflation": _RATIO,
                                "only_with_others": {"type": "boolean"},
                            }
                        ),
                    },
                }
            ),
        },
    }
)


def report_schema() -> dict[str, Any]:
    """The schema as a dict. Burst events and scopes, and profile entries, are described in
    ``docs/bursts.md`` and ``docs/qos.md`` and checked here for their shape only."""
    events = {"type": "array", "items": {"type": "object"}}
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": f"https://github.com/isolane/isolane/blob/main/docs/report-v{SCHEMA_VERSION}.schema.json",
        "title": "isolane replay report",
        **_object(
            {
                "schema_version": {"const": SCHEMA_VERSION},
                "captures": {"type": "array", "items": {"type": "string"}, "minItems": 1},
                "capture": {"type": "string"},
                "format": {"type": "string"},
                "count": {"enum": ["inner", "outer", "wire", "wire_fcs"]},
                "port": {"type": "boolean"},
                "packets": _COUNT,
                "start_ns": _NS,
                "end_ns": _NS,
                "duration_ns": _COUNT,
                "warnings": {"type": "array", "items": {"type": "string"}},
                "findings": {"type": "array", "items": {"type": "string"}},
                "reasons": _exactly(REASONS, _COUNT),
                "unclaimed_vnis": {"type": "array", "items": _object({"vni": _COUNT, "packets": _COUNT})},
                "tenants": {"type": "array", "items": _TENANT},
                "total": _object(_COUNTS),
                "microbursts": events,
                "burst_scopes": events,
                "profiles": events,
                "profile_switches": events,
                "timeline": {"oneOf": [_TIMELINE, {"type": "null"}]},
                "isolation": {"oneOf": [_ISOLATION, {"type": "null"}]},
            }
        ),
    }
