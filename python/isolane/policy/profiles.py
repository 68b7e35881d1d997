"""Reading a tenant's adaptive profiles (``on_burst``, ``on_overload``), a class's
(``on_burst``) and the port's ``overload`` setting (``docs/qos.md``, "Adaptive profiles")."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from fractions import Fraction
from typing import TYPE_CHECKING, Any, Literal

from isolane.policy.bursts import _PERCENT_RE
from isolane.policy.constants import (
    _BURST_PROFILE_KEYS,
    _OVERLOAD_KEYS,
    _OVERLOAD_PROFILE_KEYS,
    DEFAULT_STAGGER_NS,
    MAX_PRIORITY,
    MAX_PROFILE_SWITCHES,
    MAX_PROFILE_TIME_NS,
    MAX_WEIGHT,
)
from isolane.policy.errors import _at, _describe
from isolane.policy.model import Contract, Overload, Profile, TrafficClass
from isolane.policy.units import format_duration, format_size, parse_duration, parse_size, read_number
from isolane.policy.validate_shapes import _Bad

if TYPE_CHECKING:
    from isolane.policy.validate_qos import _QosChecks

ProfileKind = Literal["on_burst", "on_overload"]
Owner = Literal["tenant", "class"]

#: The keys that change something (a profile must give one, or ``borrow: false``).
_CHANGES = ("meter", "shaper", "priority", "weight")
#: The keys only one kind of profile takes, and why.
_ONE_KIND: dict[str, tuple[ProfileKind, str]] = {
    "borrow": ("on_overload", "a burst profile cannot cap the tenant's queues at their guarantees"),
    "hold": ("on_burst", "an overload profile is kept while the port is overloaded; port.overload.stagger spaces the returns"),
    "max_switches": ("on_burst", "an overload profile is taken once per overload"),
}
#: Why a class's profile takes no ``borrow``.
_NO_CLASS_BORROW = "unknown key: a class's profile cannot take borrow (only a tenant's on_overload profile caps its queues at their guarantees)"
#: What a key that changes the tenant's port queues is called in the warning when there is no port.
_AT_THE_PORT = {"priority": "priority", "weight": "weight", "borrow": "borrow: false"}
#: What the keys at the port change, by the profile's owner.
_QUEUES = {"tenant": "the tenant's queues", "class": "the class's queue"}


def read_profiles(
    ck: _QosChecks, data: Mapping[str, Any], path: str, contract: Contract, classes: Sequence[TrafficClass] | None
) -> tuple[Profile | None, Profile | None]:
    """The tenant's ``on_burst`` and ``on_overload`` at ``path``; ``contract`` is the tenant's,
    ``classes`` its classes (``None`` if they could not be read: the checks that need them are
    left out)."""
    on_burst = _profile(ck, data["on_burst"], _at(path, "on_burst"), "on_burst", contract, classes) if "on_burst" in data else None
    on_overload = _profile(ck, data["on_overload"], _at(path, "on_overload"), "on_overload", contract, classes) if "on_overload" in data else None
    if "on_burst" in data and "microburst" not in data:
        ck.error(
            _at(path, "on_burst"),
            "a burst profile is taken when a rate event of the tenant's own microburst setting starts, and the tenant has none: "
            "give it one, e.g. microburst: {window: 10us, threshold: 150%} (a class's microburst does not switch the tenant)",
        )
    if "on_overload" in data and (ck.egress is None or ck.egress.overload is None):
        if ck.egress is None:
            example = "port: {rate: 100Gbps, buffer: 32MiB, overload: {above: 80%, below: 20%}}"
            missing = f"the policy has no port: give it one with an overload setting, e.g. {example}"
        else:
            missing = "the port has no overload setting: give it one, e.g. overload: {above: 80%, below: 20%}"
        ck.error(_at(path, "on_overload"), f"an overload profile is taken while the port is overloaded, and {missing}")
    return on_burst, on_overload


def read_class_profile(ck: _QosChecks, data: Mapping[str, Any], path: str, contract: Contract) -> Profile | None:
    """The class's ``on_burst`` at ``path`` (the class's), if it has one; ``contract`` is the class's:
    the profile's meter and shaper replace the class's, a shaper without a rate shapes to the class's
    ceil, else its rate."""
    if "on_burst" not in data:
        return None
    profile = _profile(ck, data["on_burst"], _at(path, "on_burst"), "on_burst", contract, None, owner="class")
    if "microburst" not in data:
        ck.error(
            _at(path, "on_burst"),
            "a burst profile is taken when a rate event of the class's own microburst setting starts, and the class has none: "
            "give it one, e.g. microburst: {window: 10us, threshold: 150%} (its tenant's microburst does not switch the class)",
        )
        return None
    return profile


def _profile(
    ck: _QosChecks,
    value: Any,
    path: str,
    kind: ProfileKind,
    contract: Contract,
    classes: Sequence[TrafficClass] | None,
    owner: Owner = "tenant",
) -> Profile | None:
    keys = _BURST_PROFILE_KEYS if kind == "on_burst" else _OVERLOAD_PROFILE_KEYS
    if isinstance(value, Mapping):
        # A key of the other kind of profile gets its own message rather than a did-you-mean.
        misplaced = [key for key in value if key in _ONE_KIND and key not in keys]
        for key in misplaced:
            taker, why = _ONE_KIND[key]
            ck.error(_at(path, key), _NO_CLASS_BORROW if owner == "class" else f"unknown key: only {taker} profiles take {key} ({why})")
        value = {key: item for key, item in value.items() if key not in misplaced}
    data = ck.mapping(value, path, keys)
    if data is None:
        return None
    before = len(ck.errors)
    meter = ck.meter(data["meter"], _at(path, "meter")) if "meter" in data else None
    # Without a rate of its own, the profile's shaper shapes to what its owner's would.
    owner_bps = contract.ceil_bps if contract.ceil_bps is not None else contract.rate_bps
    shaper = ck.shaper(data["shaper"], _at(path, "shaper"), owner_bps) if "shaper" in data else None
    priority = ck.integer(data["priority"], _at(path, "priority"), 0, MAX_PRIORITY, "priority") if "priority" in data else None
    weight = ck.weight(data["weight"], _at(path, "weight")) if "weight" in data else None
    borrow = data.get("borrow", True)
    if not isinstance(borrow, bool):
        ck.error(_at(path, "borrow"), f"expected true or false, got {_describe(borrow)}")
    hold = _time(ck, data["hold"], _at(path, "hold")) if "hold" in data else 0
    max_switches = None
    if "max_switches" in data:
        max_switches = ck.integer(data["max_switches"], _at(path, "max_switches"), 1, MAX_PROFILE_SWITCHES, "max_switches", " (switches a second)")
    if not any(key in data for key in _CHANGES) and borrow is True:
        changes = "a meter, shaper, priority or weight" + (", or borrow: false" if kind == "on_overload" else "")
        ck.error(path, f"the profile changes nothing: give it {changes}")
    if isinstance(weight, int) and classes is not None:
        for tc in classes:
            # The class's own weight, or its burst profile's while that holds: the larger is checked.
            class_weight = max(tc.weight or 1, (tc.on_burst.weight if tc.on_burst is not None else None) or 1)
            if weight * class_weight > MAX_WEIGHT:
                ck.error(
                    _at(path, "weight"),
                    f"the port weighs class {tc.name!r} by the tenant's weight times its own, {weight} x {class_weight}, which is over {MAX_WEIGHT} (32 bits)",
                )
    if borrow is False and classes is not None:
        _check_guarantees(ck, _at(path, "borrow"), contract, classes)
    if len(ck.errors) > before:
        return None
    assert not isinstance(priority, _Bad) and not isinstance(weight, _Bad) and not isinstance(max_switches, _Bad) and hold is not None
    _port_warnings(ck, data, path, owner)
    return Profile(meter, shaper, priority, weight, borrow, hold, max_switches)


def _check_guarantees(ck: _QosChecks, path: str, contract: Contract, classes: Sequence[TrafficClass]) -> None:
    """``borrow: false`` caps each class queue at its guarantee, so each needs one: its rate plus
    its share, by class weight, of the tenant's rate its classes leave (the first class taking
    the rounding), as the port's queues get them (docs/qos.md, "The port in the engine")."""
    rates = [(tc.contract.rate_bps or 0) // 8 for tc in classes]
    if contract.rate_bps is None and not any(rates):
        ck.error(path, "false caps every class queue at its guarantee, and the tenant has none: give it a rate, or give its classes rates")
        return
    spare = max((contract.rate_bps or 0) // 8 - sum(rates), 0)
    weights = [tc.weight or 1 for tc in classes]
    shares = [spare * w // sum(weights) for w in weights]
    shares[0] += spare - sum(shares)
    unguaranteed = [tc.name for tc, rate, share in zip(classes, rates, shares) if rate + share == 0]
    if unguaranteed:
        names = ", ".join(map(repr, unguaranteed))
        ck.error(
            path,
            f"false caps every class queue at its guarantee, and {names} would get none (no rate of its own, and no share of the tenant's "
            "rate its classes leave): give it a rate, or the tenant a rate its classes do not claim in full",
        )


def _port_warnings(ck: _QosChecks, data: Mapping[str, Any], path: str, owner: Owner) -> None:
    """The keys that change the tenant's (or class's) queues at the port do nothing without per-tenant queues."""
    port = ck.egress
    if port is not None and port.mode == "per_tenant":
        return
    why = "the policy has no port" if port is None else "the port is a shared_fifo (one FIFO: priorities, weights and ceilings do not apply)"
    for key, shown in _AT_THE_PORT.items():
        if key in data and (key != "borrow" or data[key] is False):
            ck.warnings.append(f"{_at(path, key)}: {shown} changes {_QUEUES[owner]} at the port, and {why}: it changes nothing")


def read_overload(ck: _QosChecks, value: Any, path: str, buffer: int | None) -> Overload | None:
    """The port's ``overload`` setting; a threshold written as a percentage is a share of
    ``buffer`` (``None``: the buffer could not be read, an error already)."""
    data = ck.mapping(value, path, _OVERLOAD_KEYS, required=("above", "below"))
    if data is None:
        return None
    above = _threshold(ck, data["above"], _at(path, "above"), buffer, zero_ok=False) if "above" in data else None
    below = _threshold(ck, data["below"], _at(path, "below"), buffer, zero_ok=True) if "below" in data else None
    stagger = _time(ck, data["stagger"], _at(path, "stagger")) if "stagger" in data else DEFAULT_STAGGER_NS
    if above is None or below is None or stagger is None or buffer is None:
        return None
    if above[0] >= buffer:
        ck.error(
            _at(path, "above"),
            f"{_written(data['above'], above)} is not below the buffer ({format_size(buffer)}): more can never wait, so the port would never be overloaded",
        )
        return None
    if below[0] > above[0]:
        written = _written(data["below"], below), _written(data["above"], above)
        ck.error(_at(path, "below"), f"{written[0]} is above {written[1]}: the buffer must fall to where it rose or lower")
        return None
    return Overload(above[0], below[0], stagger, above[1], below[1])


def _threshold(ck: _QosChecks, value: Any, path: str, buffer: int | None, zero_ok: bool) -> tuple[int, Fraction | None] | None:
    """Bytes of the buffer, and the percentage they were written as (if they were)."""
    match = _PERCENT_RE.fullmatch(value) if isinstance(value, str) else None
    if match is None:
        try:
            parse_size(value)
        except ValueError as err:  # say that a percentage would do too
            ck.error(path, f"{err}; or a percentage of the buffer, e.g. '80%'")
            return None
        size = ck.queue_size(value, path, zero_ok=zero_ok)
        return None if size is None else (size, None)
    try:
        percent = read_number(match.group(1), value)
    except ValueError as err:
        ck.error(path, str(err))
        return None
    if buffer is None:
        return None
    size = int(buffer * percent / 100)
    if size == 0 and not zero_ok:
        ck.error(path, f"{value!r} of the buffer ({format_size(buffer)}) is under 1 byte: it must be more than zero")
        return None
    return size, percent


def _written(value: Any, threshold: tuple[int, Fraction | None]) -> str:
    """A threshold as written, with its bytes if it was a percentage."""
    return f"{value!r}" if threshold[1] is None else f"{value!r} ({format_size(threshold[0])})"


def _time(ck: _QosChecks, value: Any, path: str) -> int | None:
    """A hold or a stagger: a duration, zero to 10 s."""
    time = ck.quantity(value, path, parse_duration, zero_ok=True)
    if time is not None and time > MAX_PROFILE_TIME_NS:
        ck.error(path, f"{value!r} is over {format_duration(MAX_PROFILE_TIME_NS)}, the longest isolane takes (a profile kept longer is a new contract)")
        return None
    return time
