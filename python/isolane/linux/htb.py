"""The HTB plan of a policy: the classes and u32 filters that enforce its tenants' guarantees
and ceilings on an underlay device (``docs/linux.md``). Pure Python, no kernel: :mod:`apply`
pushes a plan through netlink, :mod:`tc` prints it as ``tc`` commands.

The tree, with every class id fixed by the policy's order (so that a second apply finds the
same ids):

- ``1:`` the HTB root qdisc, default class ``1:ffff``;
- ``1:1`` the link: rate and ceiling the line rate;
- ``1:ffff`` traffic of no tenant (other VNIs, the underlay's own traffic), under ``1:1``;
- ``1:fffe`` packets whose VNI the filters cannot read (:mod:`isolane.linux.u32`), under ``1:1``;
- ``1:T00`` tenant ``T`` (1-based, hex), under ``1:1``: its guarantee and ceiling;
- ``1:TCC`` its traffic class ``CC`` (1-based, hex), under ``1:T00``.

u32 filters on ``1:`` match the VNI in the outer VXLAN header and send the tenant's packets to
the leaf of its ``default_class`` or, for a tenant with rules, to ``1:T00``, whose own filters
(HTB runs an inner class's filters on what a filter sends it) send them to the leaf of the class
its rules give them (:mod:`isolane.linux.rules`) and the rest to the default class's leaf."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Literal

from isolane.linux.rules import FIRST_RULE_PRIO, tenant_rule_filters
from isolane.linux.u32 import U32Filter, unmatched_filters, vni_filters
from isolane.policy import Policy, Tenant
from isolane.policy.constants import COUNT_OVERHEAD
from isolane.policy.units import default_burst

ROOT_HANDLE = 0x1_0000
"""The HTB qdisc's handle, ``1:``."""
LINK_MINOR = 0x1
DEFAULT_MINOR = 0xFFFF
"""The class of traffic no tenant claims, ``1:ffff``: pyroute2's own default (``1:10``) is a
tenant's class id here."""
UNMATCHED_MINOR = 0xFFFE
"""The class of the packets the VNI filters cannot read (:func:`~isolane.linux.u32.unmatched_filters`), ``1:fffe``."""
MAX_TENANTS = 0xFE
MAX_CLASSES = 0xFF
MIN_RATE_BYTES = 1000
"""HTB needs a rate above 0: a tenant or class without a guarantee gets 8 kbit/s and borrows the rest."""
TICKS_PER_US_DEFAULT = 15.625
"""psched ticks per microsecond (1 tick = 64 ns) when ``/proc/net/psched`` cannot be read."""

Role = Literal["link", "default", "unmatched", "tenant", "class"]


@dataclass(frozen=True)
class HtbClass:
    """One HTB class: ids as the kernel's 32-bit handles, rates in bytes per second, bursts in
    bytes and, as the kernel keeps them, in psched ticks (``buffer``, ``cbuffer``)."""

    classid: int
    parent: int
    rate: int
    ceil: int
    burst: int
    cburst: int
    buffer: int
    cbuffer: int
    prio: int
    role: Role
    overhead: int = 0
    """Bytes HTB adds to each packet's length before charging it (the policy's ``count``)."""
    tenant: str | None = None
    cls: int | None = None
    class_name: str | None = None


@dataclass(frozen=True)
class HtbPlan:
    """What :func:`plan_htb` computed: the classes (parents before children) and the filters."""

    classes: tuple[HtbClass, ...]
    filters: tuple[U32Filter, ...]
    unenforced: tuple[str, ...] = ()
    """What of the policy the kernel does not enforce with this plan, one line each, by place."""

    def class_by_id(self) -> dict[int, HtbClass]:
        return {c.classid: c for c in self.classes}


def handle(major: int, minor: int) -> int:
    return (major << 16) | minor


def format_handle(value: int) -> str:
    """A handle as tc writes it: ``1:ff``."""
    minor = value & 0xFFFF
    return f"{value >> 16:x}:{minor:x}" if minor else f"{value >> 16:x}:"


def tenant_classid(tenant: int) -> int:
    return ROOT_HANDLE | ((tenant + 1) << 8)


def leaf_classid(tenant: int, cls: int) -> int:
    return tenant_classid(tenant) | (cls + 1)


def xmit_ticks(rate: int, size: int, ticks_per_us: float) -> int:
    """The psched ticks ``size`` bytes take at ``rate`` bytes per second, computed as tc and
    pyroute2 compute a burst's buffer (whole microseconds first)."""
    return int(int(1_000_000 * (size / rate)) * ticks_per_us)


def read_ticks_per_us(path: str = "/proc/net/psched") -> float:
    """psched ticks per microsecond as tc computes them from ``/proc/net/psched``
    (:data:`TICKS_PER_US_DEFAULT` when it cannot be read)."""
    try:
        with open(path) as psched:
            t2us, us2t, clock_res = (int(word, 16) for word in psched.read().split()[:3])
    except (OSError, ValueError):
        return TICKS_PER_US_DEFAULT
    if clock_res == 1_000_000_000:  # tc's compatibility rule for nanosecond clocks
        t2us = us2t
    return t2us / us2t * clock_res / 1_000_000


def plan_htb(policy: Policy, *, link_rate_bps: int | None = None, vxlan_ports: tuple[int, ...] = (4789,), ticks_per_us: float | None = None) -> HtbPlan:
    """The HTB tree and u32 filters enforcing ``policy``'s guarantees (``rate``) and ceilings
    (``ceil``). ``link_rate_bps``: the line rate at the top, by default the policy's port rate.
    Rates, bursts and defaults are the policy's compiled ones (``docs/qos.md``); a missing
    guarantee becomes :data:`MIN_RATE_BYTES`. ``ticks_per_us``: the kernel's psched clock, by
    default this machine's (:func:`read_ticks_per_us`)."""
    qos = policy.compile_qos()
    ticks_per_us = read_ticks_per_us() if ticks_per_us is None else ticks_per_us
    link_rate = (link_rate_bps // 8) if link_rate_bps else qos.port_rate
    if not link_rate:
        raise ValueError("the policy has no port: give the line rate (--link-rate)")
    if len(policy.tenants) > MAX_TENANTS:
        raise ValueError(f"tenants: {len(policy.tenants)} tenants, more than the {MAX_TENANTS} an HTB tree of isolane's class ids holds")
    builder = _ClassBuilder(link_rate, qos.largest_frame, ticks_per_us, COUNT_OVERHEAD[policy.count])
    classes = [builder.make(handle(1, LINK_MINOR), ROOT_HANDLE, link_rate, link_rate, 0, 0, "link", "link")]
    classes.append(builder.make(handle(1, DEFAULT_MINOR), handle(1, LINK_MINOR), 0, link_rate, 0, 7, "default", "default class"))
    classes.append(builder.make(handle(1, UNMATCHED_MINOR), handle(1, LINK_MINOR), 0, link_rate, 0, 7, "unmatched", "unmatched class"))
    filters: list[U32Filter] = []
    rule_notes: list[tuple[str, ...]] = []
    next_prio = FIRST_RULE_PRIO
    for t, tenant in enumerate(policy.tenants):
        where = f"tenants[{t}]"
        if len(tenant.classes) > MAX_CLASSES:
            raise ValueError(f"{where}.classes: {len(tenant.classes)} classes, more than {MAX_CLASSES}")
        ceil = int(qos.tenant_ceil[t]) or link_rate
        rate, burst = int(qos.tenant_rate[t]), int(qos.tenant_burst[t])
        classes.append(builder.make(tenant_classid(t), handle(1, LINK_MINOR), rate, ceil, burst, 0, "tenant", where, tenant=tenant.name))
        for c, traffic_class in enumerate(tenant.classes):
            row = int(qos.class_offsets[t]) + c
            rate, burst = int(qos.class_rate[row]), int(qos.class_burst[row])
            class_ceil = int(qos.class_ceil[row]) or ceil
            prio = int(qos.class_priority[row])
            made = builder.make(leaf_classid(t, c), tenant_classid(t), rate, class_ceil, burst, prio, "class", f"{where}.classes[{c}]", tenant=tenant.name)
            classes.append(_named(made, c, traffic_class.name))
        rules = tenant_rule_filters(t, tenant, [leaf_classid(t, c) for c in range(len(tenant.classes))], vxlan_ports, tenant_classid(t), next_prio)
        rule_notes.append(rules.unenforced)
        next_prio = rules.next_prio
        target = tenant_classid(t) if rules.filters else leaf_classid(t, tenant.class_id(tenant.default_class))
        filters += (f for vni in tenant.vnis for port in vxlan_ports for f in vni_filters(vni, port, target, tenant.name))
        filters += rules.filters
    filters += unmatched_filters(vxlan_ports, handle(1, UNMATCHED_MINOR))
    return HtbPlan(tuple(classes), tuple(filters), unenforced(policy, rule_notes))


def unenforced(policy: Policy, rule_notes: list[tuple[str, ...]]) -> tuple[str, ...]:
    """The parts of ``policy`` the HTB tree and its filters leave to isolane: ``rule_notes`` per
    tenant (the rules the filters leave out, drops), untunnelled traffic by VLAN or source,
    meters, shapers and microburst watches."""
    notes = []
    if policy.count == "inner":
        notes.append("count: inner: HTB charges the outer frame (it cannot leave the tunnel headers out)")
    for t, tenant in enumerate(policy.tenants):
        where = f"tenants[{t}]"
        notes += rule_notes[t]
        if tenant.vlans or tenant.sources:
            notes.append(f"{where}: its untunnelled traffic (vlans, sources) matches no filter: it lands in the default class")
        if not tenant.vnis:
            notes.append(f"{where}: no VNIs: no filter sends {tenant.name}'s traffic to its classes")
        notes += contract_notes(tenant, where, "HTB enforces rate and ceil")
    return tuple(notes)


def contract_notes(tenant: Tenant, where: str, kernel_does: str) -> list[str]:
    """The meters, shapers and microburst watches of ``tenant`` and its classes: isolane's only."""
    notes = []
    contracts = [(where, tenant.contract)] + [(f"{where}.classes[{c}]", cls.contract) for c, cls in enumerate(tenant.classes)]
    for place, contract in contracts:
        kept = [name for name in ("meter", "shaper", "microburst") if getattr(contract, name) is not None]
        if kept:
            notes.append(f"{place}: {' and '.join(kept)}: isolane's only ({kernel_does})")
    return notes


def _named(made: HtbClass, cls: int, name: str) -> HtbClass:
    return dataclasses.replace(made, cls=cls, class_name=name)


@dataclass(frozen=True)
class _ClassBuilder:
    link_rate: int
    largest_frame: int
    ticks_per_us: float
    overhead: int

    def make(self, classid: int, parent: int, rate: int, ceil: int, burst: int, prio: int, role: Role, where: str, tenant: str | None = None) -> HtbClass:
        """A class; ``rate`` 0 is no guarantee, ``burst`` 0 the default burst. The bursts must fit
        the kernel's 32-bit buffers of ticks."""
        rate = max(rate, MIN_RATE_BYTES)
        ceil = max(min(ceil, self.link_rate), rate)
        burst = burst or default_burst(rate, self.largest_frame)
        cburst = default_burst(ceil, self.largest_frame)
        buffer, cbuffer = xmit_ticks(rate, burst, self.ticks_per_us), xmit_ticks(ceil, cburst, self.ticks_per_us)
        if buffer >= 1 << 32:
            raise ValueError(f"{where}.burst: {burst:,} B at {rate * 8:,} bit/s lasts longer than an HTB buffer holds (about 4.6 min)")
        return HtbClass(classid, parent, rate, ceil, burst, cburst, buffer, cbuffer, prio, role, self.overhead, tenant)
