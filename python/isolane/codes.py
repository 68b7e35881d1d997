"""The integer codes of isolane's records and compiled arrays, from the Rust core.

Each family of codes (a packet's status, tunnel, reason, action, colour and outcome, a burst's
scope and view, a meter's kind, ...) is one Rust enum (``rust/codes.rs``), read here through
``_core.codes()``: :data:`CODES` holds them by family and name, and the enums below
(``isolane.Outcome``, ...) take their values from it. A member's name is its code's name in
upper case (``drop_meter``, Rust's ``Outcome::DropMeter``, is ``Outcome.DROP_METER``).

The enums are written out, so that type checkers and readers see their members; importing this
module checks each against its family (same names, same codes), so a code added or renamed in
Rust stops ``import isolane`` until it is added or renamed here too.
"""

from __future__ import annotations

import enum

from isolane import _core

CODES: dict[str, dict[str, int]] = {family: dict(pairs) for family, pairs in _core.codes().items()}
"""Every family of codes, ``{family: {name: code}}``: ``CODES["meter_kind"]["srtcm"]`` is 1.
The policy's code tables (``isolane.policy.constants``: ``METER_KINDS``, ``COUNT_MODES``,
``COLORS``, ``COLOR_ACTIONS``, ``PORT_MODES``) are read from it."""

_STATUS = CODES["status"]
_TUNNEL = CODES["tunnel"]
_REASON = CODES["reason"]
_ACTION = CODES["action"]
_COLOR = CODES["color"]
_OUTCOME = CODES["outcome"]
_BURST_SCOPE = CODES["burst_scope"]
_BURST_VIEW = CODES["burst_view"]
_PROFILE = CODES["profile"]
_SWITCH_CAUSE = CODES["switch_cause"]


class Status(enum.IntEnum):
    """Why a parsed record is as complete as it is (``rows["status"]``)."""

    OK = _STATUS["ok"]
    """Every field that applies was read."""
    TRUNCATED = _STATUS["truncated"]
    """The capture stopped (captured length below wire length) before a header isolane needed."""
    MALFORMED = _STATUS["malformed"]
    """A header is impossible or runs past a frame that was captured whole."""
    UNSUPPORTED = _STATUS["unsupported"]
    """Well formed, but the tenant packet is not IPv4/IPv6 (ARP, LLC, unknown Geneve payload)."""


class Tunnel(enum.IntEnum):
    """The outermost tunnel (``rows["tunnel"]``)."""

    NONE = _TUNNEL["none"]
    VXLAN = _TUNNEL["vxlan"]
    GENEVE = _TUNNEL["geneve"]


class Reason(enum.IntEnum):
    """Why a packet got its verdict (``verdicts["reason"]``)."""

    RULE = _REASON["rule"]
    """A rule of the tenant matched."""
    DEFAULT = _REASON["default"]
    """No rule matched: the tenant's default action."""
    UNKNOWN_TENANT = _REASON["unknown_tenant"]
    """No tenant claims the packet: the policy's ``unknown_tenant`` action."""
    TRUNCATED = _REASON["truncated"]
    """The capture stopped before the headers needed: dropped."""
    MALFORMED = _REASON["malformed"]
    """Impossible headers: dropped."""
    NOT_IP = _REASON["not_ip"]
    """The tenant's packet is not IP (ARP, ...): the tenant's default action."""


class Action(enum.IntEnum):
    """What the classifier does with a packet (``verdicts["action"]``)."""

    DROP = _ACTION["drop"]
    ALLOW = _ACTION["allow"]


class Color(enum.IntEnum):
    """A packet's colour after the meters (``processed["color"]``): the worst any meter gave."""

    GREEN = _COLOR["green"]
    YELLOW = _COLOR["yellow"]
    RED = _COLOR["red"]
    NONE = _COLOR["none"]
    """Not metered: the classifier dropped it."""


class Outcome(enum.IntEnum):
    """What happened to a packet in :meth:`Engine.process` (``processed["outcome"]``)."""

    PASS = _OUTCOME["pass"]
    """Passed every stage, and was admitted at the port if the policy has one."""
    REMARKED = _OUTCOME["remarked"]
    """As PASS, with its DSCP rewritten by a colour action (``processed["dscp"]``)."""
    PENDING = _OUTCOME["pending"]
    """Passed meters and shapers but reaches the port at its ``release_ns``, after the batch's
    last packet: the port's verdict lands in :meth:`Engine.stats` once a later batch passes
    that time."""
    DROP_CLASSIFIER = _OUTCOME["drop_classifier"]
    """Dropped by the classifier (``processed["action"]``): not metered."""
    DROP_METER = _OUTCOME["drop_meter"]
    """Dropped by a meter's colour action."""
    DROP_SHAPER_BYTES = _OUTCOME["drop_shaper_bytes"]
    """A shaper's queue would have held more than its ``queue`` bytes."""
    DROP_SHAPER_TIME = _OUTCOME["drop_shaper_time"]
    """A shaper would have held it longer than its ``max_delay``."""
    DROP_PORT_BUFFER = _OUTCOME["drop_port_buffer"]
    """The port's buffer was full."""
    DROP_PORT_QUEUE = _OUTCOME["drop_port_queue"]
    """Its port queue was at its limit."""

    @property
    def dropped(self) -> bool:
        return self >= Outcome.DROP_CLASSIFIER


class BurstScope(enum.IntEnum):
    """Where a burst was seen (``bursts["scope"]``)."""

    PORT = _BURST_SCOPE["port"]
    TENANT = _BURST_SCOPE["tenant"]
    CLASS = _BURST_SCOPE["class"]


class BurstView(enum.IntEnum):
    """How a burst was seen (``bursts["view"]``)."""

    RATE = _BURST_VIEW["rate"]
    """The window's rate above the threshold."""
    QUEUE = _BURST_VIEW["queue"]
    """The queue at the port above its rise threshold, until it fell to its fall threshold."""


class ProfileId(enum.IntEnum):
    """A tenant's adaptive profile (``profile_events()["from"]``, ``["to"]``; docs/qos.md)."""

    NORMAL = _PROFILE["normal"]
    """Its own contract and queues."""
    BURST = _PROFILE["burst"]
    """Its ``on_burst`` profile."""
    OVERLOAD = _PROFILE["overload"]
    """Its ``on_overload`` profile."""


class SwitchCause(enum.IntEnum):
    """Why a tenant switched profiles (``profile_events()["cause"]``)."""

    BURST_STARTED = _SWITCH_CAUSE["burst_started"]
    """A rate event of its microburst scope started."""
    BURST_ENDED = _SWITCH_CAUSE["burst_ended"]
    """The event ended and its hold passed."""
    OVERLOAD = _SWITCH_CAUSE["overload"]
    """The port's buffer passed its overload threshold."""
    RECOVERED = _SWITCH_CAUSE["recovered"]
    """The buffer drained and the tenant's turn to return came."""
    UPDATE = _SWITCH_CAUSE["update"]
    """A policy update: every tenant starts the new policy in its normal profile."""


ENUMS: dict[str, type[enum.IntEnum]] = {
    "status": Status,
    "tunnel": Tunnel,
    "reason": Reason,
    "action": Action,
    "color": Color,
    "outcome": Outcome,
    "burst_scope": BurstScope,
    "burst_view": BurstView,
    "profile": ProfileId,
    "switch_cause": SwitchCause,
}
"""The family each enum is made of."""


def _check(family: str, members: type[enum.IntEnum]) -> None:
    python = {member.name.lower(): member.value for member in members}
    if python != CODES[family]:
        raise ImportError(f"isolane.{members.__name__} is {python}, but the core's {family!r} codes are {CODES[family]}: isolane/codes.py must follow Rust")


for _family, _members in ENUMS.items():
    _check(_family, _members)
