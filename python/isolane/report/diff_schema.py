"""The JSON Schema (draft 2020-12) of what ``isolane diff --json`` writes and
:meth:`~isolane.commands.diff.ReportDiff.to_json` returns (``docs/report.md``, "Comparing two
captures", says what each field means)."""

from __future__ import annotations

from typing import Any

from isolane.commands.diff import DELAY_QUANTILES, DIFF_SCHEMA_VERSION
from isolane.report.model import DROP_STAGES
from isolane.report.schema import _exactly, _object

_NUMBER_OR_NULL = {"type": ["number", "null"]}
_INTEGER = {"type": "integer"}
_CHANGE = _object({"before": _NUMBER_OR_NULL, "after": _NUMBER_OR_NULL, "change": _NUMBER_OR_NULL, "percent": _NUMBER_OR_NULL})
_NAME = {"type": ["string", "null"]}
_SOURCE = {"enum": ["events", "timeline", None]}
_BURSTS = _object(
    {
        "source": _object({"before": _SOURCE, "after": _SOURCE}),
        "threshold_bps": _object({"before": _NUMBER_OR_NULL, "after": _NUMBER_OR_NULL}),
        "count": _CHANGE,
        "time_ns": _CHANGE,
    }
)
_NUMBERS = {
    **{key: _CHANGE for key in ("packets", "bytes", "mean_bps", "peak_bps", "dropped")},
    "drops": _exactly(DROP_STAGES, _CHANGE),
    "bursts": _BURSTS,
}
_CLASS = _object({"cls": {"type": ["integer", "null"]}, "class": _NAME, **_NUMBERS, "delay_ns": _exactly(list(DELAY_QUANTILES), _CHANGE)})
_TENANT = _object(
    {
        "tenant": _NAME,
        "traffic_unchanged": {"type": "boolean"},
        "traffic_differences": {"type": "array", "items": {"type": "string"}},
        **_NUMBERS,
        "classes": {"type": "array", "items": _CLASS},
    }
)
_SIDE_BURSTS = _object({"source": _SOURCE, "threshold_bps": _NUMBER_OR_NULL, "count": _INTEGER, "time_ns": _INTEGER})
_SHARE = {"type": ["number", "null"], "minimum": 0, "maximum": 1}
_NEIGHBOUR = _object(
    {
        "tenant": _NAME,
        "traffic_unchanged": {"type": "boolean"},
        "bursts": _object({"before": _SIDE_BURSTS, "after": _SIDE_BURSTS}),
        "share_before": _SHARE,
        "share_after": _SHARE,
        "score": {"type": "number", "minimum": -1, "maximum": 1},
        "added_delay_share": _NUMBER_OR_NULL,
    }
)
_VICTIM = _object(
    {
        "tenant": _NAME,
        "cls": {"type": ["integer", "null"]},
        "class": _NAME,
        "p99_ns": _CHANGE,
        "traffic_unchanged": {"type": "boolean"},
        "neighbours": {"type": "array", "items": _NEIGHBOUR},
        "culprit": _NAME,
        "summary": {"type": "string"},
    }
)
_CAPTURE = _object({"capture": {"type": "string"}, "packets": _INTEGER, "start_ns": _NUMBER_OR_NULL, "end_ns": _NUMBER_OR_NULL, "duration_ns": _INTEGER})


def diff_schema() -> dict[str, Any]:
    """The schema as a dict."""
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": f"https://github.com/isolane/isolane/blob/main/docs/diff-v{DIFF_SCHEMA_VERSION}.schema.json",
        "title": "isolane diff",
        **_object(
            {
                "schema_version": {"const": DIFF_SCHEMA_VERSION},
                "before": _CAPTURE,
                "after": _CAPTURE,
                "tenants": {"type": "array", "items": _TENANT},
                "victims": {"type": "array", "items": _VICTIM},
            }
        ),
    }
