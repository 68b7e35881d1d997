"""The adaptive-profile part of a replay report (docs/qos.md, "Adaptive profiles"): every switch
the engine made, and per tenant the packets enforced under each of its profiles."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from isolane.codes import ProfileId, SwitchCause
from isolane.engine import Engine
from isolane.report.text import time_text

LISTED_SWITCHES = 10
"""Switches the table lists (the JSON has every one)."""


def profile_switches(engine: Engine, start_ns: int) -> list[dict[str, Any]]:
    """Every profile switch of ``engine`` as JSON; ``start_ns``: the capture's first timestamp,
    which ``offset_ns`` counts from."""
    names = engine.profile_tenants
    class_names = {t.name: t.class_names for t in engine.policy.tenants}
    return [
        {
            "tenant": names[event["tenant"]],
            "cls": int(event["cls"]) if event["cls"] >= 0 else None,
            "class": _class_name(class_names, names[event["tenant"]], int(event["cls"])),
            "time_ns": int(event["time_ns"]),
            "offset_ns": int(event["time_ns"]) - start_ns,
            "from": ProfileId(event["from"]).name.lower(),
            "to": ProfileId(event["to"]).name.lower(),
            "cause": SwitchCause(event["cause"]).name.lower(),
        }
        for event in engine.profile_events()
    ]


def profile_counts(engine: Engine) -> list[dict[str, Any]]:
    """Per tenant and class with profiles: :meth:`Engine.profile_stats`, with the class's name."""
    class_names = {t.name: t.class_names for t in engine.policy.tenants}
    return [{**entry, "class": _class_name(class_names, entry["tenant"], -1 if entry["cls"] is None else entry["cls"])} for entry in engine.profile_stats()]


def _class_name(class_names: dict[str, list[str]], tenant: str, cls: int) -> str | None:
    classes = class_names.get(tenant, [])
    return classes[cls] if 0 <= cls < len(classes) else None


def _label(entry: dict[str, Any]) -> str:
    """A switch's or a count's owner: the tenant, or tenant / class."""
    if entry.get("cls") is None:
        return str(entry["tenant"])
    return f"{entry['tenant']} / {entry.get('class') or entry['cls']}"


def format_profiles(profiles: Sequence[dict[str, Any]], switches: Sequence[dict[str, Any]], align: Any) -> list[str]:
    """The profiles section of the table: per tenant with profiles, its packets under each and
    its switches, then the first switches."""
    if not profiles:
        return []
    header = ["adaptive profiles", "normal", "burst", "overload", "switches"]
    rows = [header] + [[_label(p), *(f"{p['packets'][name]:,}" for name in ("normal", "burst", "overload")), f"{p['switches']:,}"] for p in profiles]
    lines = ["", *align(rows, right=range(1, len(header)))]
    if switches:
        lines += ["", f"first profile switches ({min(len(switches), LISTED_SWITCHES)} of {len(switches):,}; at: time from the first packet):"]
        rows = [["tenant", "at", "from", "to", "cause"]]
        rows += [[_label(s), time_text(s["offset_ns"]), s["from"], s["to"], s["cause"].replace("_", " ")] for s in switches[:LISTED_SWITCHES]]
        lines += align(rows, right=[1])
    return lines
