"""The TBF plan of a policy: a token bucket filter as the root qdisc of each tenant's own vxlan
device, capping the tenant at its ceiling (``docs/linux.md``, "TBF on per-tenant vxlan devices").
Pure Python, no kernel: :mod:`isolane.linux.tbf_apply` pushes a plan through netlink,
:func:`isolane.linux.tc.tbf_tc_commands` prints it as ``tc`` commands.

A tenant's devices are the vxlan devices whose VNI is one of its ``vnis``. Each gets
``tbf rate R burst B limit L overhead O`` with the handle ``1:``:

- ``R``: the tenant's ``ceil``, or without one its guarantee (``rate``, or its classes' rates);
- ``B``: the tenant's ``burst`` if the policy gives one, else 1 ms at ``R`` (at least
  ``largest_frame``), and never less than the device's MTU plus its Ethernet header (TBF drops a
  packet larger than its burst);
- ``L``: ``B`` plus :data:`LATENCY_US` at ``R`` (tc's ``latency``): what may wait in the queue;
- ``O``: the tunnel's headers (TBF sees the inner frame) plus what the policy's ``count`` adds;
  nothing for ``count: inner``, which is exactly what the device sees."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from isolane.linux.discover import VxlanDevice
from isolane.linux.htb import contract_notes
from isolane.linux.netlink import U32_MAX, KernelTbf
from isolane.policy import Policy
from isolane.policy.constants import COUNT_OVERHEAD
from isolane.policy.units import default_burst, format_rate

TBF_HANDLE = 0x1_0000
"""isolane's TBF root, ``1:``: a TBF root with another handle is not isolane's."""
ETHERNET_HEADER = 14
TUNNEL_HEADERS = {4: 14 + 20 + 8 + 8, 6: 14 + 40 + 8 + 8}
"""What VXLAN adds to the inner frame: outer Ethernet, IPv4 or IPv6, UDP and VXLAN headers."""
LATENCY_US = 10_000
"""How long a packet may wait in a TBF queue at its rate (10 ms): the limit is the burst plus that."""
NSEC_PER_SEC = 1_000_000_000
PSCHED_SHIFT = 6
"""The kernel keeps TBF's buffer in psched ticks of 2^6 ns."""


@dataclass(frozen=True)
class TbfQdisc:
    """The TBF root of one vxlan device of one tenant (``tenant`` its index in the policy)."""

    dev: str
    vni: int
    tenant: int
    tenant_name: str
    rate: int
    burst: int
    limit: int
    overhead: int
    buffer: int
    """The burst as the kernel keeps it: psched ticks, computed as the kernel computes them."""

    def as_kernel(self) -> KernelTbf:
        """The qdisc as the kernel will report it."""
        return KernelTbf(self.rate, self.buffer, self.limit, self.overhead)


@dataclass(frozen=True)
class TbfPlan:
    """What :func:`plan_tbf` computed: one TBF root per tenant device, by device name."""

    qdiscs: tuple[TbfQdisc, ...]
    unclaimed: tuple[str, ...] = ()
    """The other vxlan devices: apply leaves them alone, except that it deletes a TBF root isolane made there before."""
    unenforced: tuple[str, ...] = ()
    """What of the policy TBF does not enforce, one line each, by place."""

    def devices(self) -> tuple[str, ...]:
        """Every vxlan device the plan knows, planned or not, by name."""
        return tuple(sorted([q.dev for q in self.qdiscs] + list(self.unclaimed)))


def plan_tbf(policy: Policy, devices: Sequence[VxlanDevice], *, latency_us: int = LATENCY_US) -> TbfPlan:
    """The TBF root of each device of each tenant with a ceiling or a guarantee (module docstring).
    ``devices``: the namespace's vxlan devices (:func:`~isolane.linux.discover_vxlan`). A ValueError
    when no tenant has a device, or a burst does not fit the kernel's buffer."""
    qos = policy.compile_qos()
    by_vni: dict[int, list[VxlanDevice]] = {}
    for device in devices:
        by_vni.setdefault(device.vni, []).append(device)
    claimed = [(t, device) for t, tenant in enumerate(policy.tenants) for vni in tenant.vnis for device in by_vni.get(vni, ())]
    if not claimed:
        vnis = sorted({vni for tenant in policy.tenants for vni in tenant.vnis})
        raise ValueError(f"tenants: no tenant has a vxlan device here (their VNIs: {', '.join(map(str, vnis)) or 'none'}; the devices' VNIs: {_vnis(devices)})")
    qdiscs = []
    for t, device in claimed:
        tenant = policy.tenants[t]
        rate = (tenant.contract.ceil_bps or 0) // 8 or int(qos.tenant_rate[t])
        if not rate:
            continue
        burst = int(qos.tenant_burst[t]) if qos.tenant_burst_given[t] else default_burst(rate, qos.largest_frame)
        burst = max(burst, device.mtu + ETHERNET_HEADER)
        overhead = 0 if policy.count == "inner" else TUNNEL_HEADERS[underlay_family(device)] + COUNT_OVERHEAD[policy.count]
        buffer = buffer_ticks(rate, burst + overhead)
        if buffer > U32_MAX:
            raise ValueError(f"tenants[{t}].burst: {burst:,} B at {rate * 8:,} bit/s lasts longer than a TBF buffer holds (about 4.6 min)")
        limit = min(burst + rate * latency_us // 1_000_000, U32_MAX)
        qdiscs.append(TbfQdisc(device.name, device.vni, t, tenant.name, rate, burst, limit, overhead, buffer))
    planned = {q.dev for q in qdiscs}
    unclaimed = tuple(sorted(d.name for d in devices if d.name not in planned))
    return TbfPlan(tuple(sorted(qdiscs, key=lambda q: q.dev)), unclaimed, unenforced_by_tbf(policy, devices))


def _vnis(devices: Sequence[VxlanDevice]) -> str:
    return ", ".join(str(vni) for vni in sorted({d.vni for d in devices})) or "no vxlan devices"


def underlay_family(device: VxlanDevice) -> int:
    """4 or 6: the IP version of the device's tunnel, from its local or remote address (IPv4 when it has neither)."""
    return 6 if ":" in (device.local or device.remote or "") else 4


def buffer_ticks(rate: int, size: int) -> int:
    """The psched ticks ``size`` bytes take at ``rate`` bytes per second, as the kernel computes a
    TBF's buffer from its burst (``psched_ratecfg_precompute`` and ``psched_l2t_ns``)."""
    factor, shift = NSEC_PER_SEC, 0
    while True:
        mult = factor // rate
        if mult & (1 << 31) or factor & (1 << 63):
            break
        factor, shift = factor << 1, shift + 1
    return ((size * mult) >> shift) >> PSCHED_SHIFT


def unenforced_by_tbf(policy: Policy, devices: Sequence[VxlanDevice]) -> tuple[str, ...]:
    """What TBF leaves to isolane: guarantees and borrowing (TBF only caps), the tenant's classes
    (one bucket per device), tenants without a device or without a rate, rules, meters, shapers
    and microburst watches; devices without a known underlay address are charged as IPv4."""
    notes = []
    vnis = {d.vni for d in devices}
    for t, tenant in enumerate(policy.tenants):
        where, contract = f"tenants[{t}]", tenant.contract
        capped = contract.ceil_bps or contract.rate_bps or any(c.contract.rate_bps for c in tenant.classes)
        if not any(vni in vnis for vni in tenant.vnis):
            notes.append(f"{where}: no vxlan device here has its VNIs ({', '.join(map(str, tenant.vnis)) or 'none'}): nothing enforces {tenant.name}")
        elif not capped:
            notes.append(f"{where}: no ceil and no rate: TBF has nothing to cap, {tenant.name}'s devices are left as they are")
        elif contract.ceil_bps and contract.rate_bps and contract.rate_bps < contract.ceil_bps:
            guarantee, ceiling = format_rate(contract.rate_bps), format_rate(contract.ceil_bps)
            notes.append(f"{where}: its guarantee ({guarantee}) is not enforced: TBF caps it at its ceiling ({ceiling}), neither guarantees nor borrows")
        own = sorted(d.name for d in devices if d.vni in tenant.vnis)
        if len(own) > 1 and capped:
            notes.append(f"{where}: {len(own)} vxlan devices ({', '.join(own)}), one TBF each: together they may pass {len(own)}x its rate")
        if len(tenant.classes) > 1 or any(c.contract.rate_bps or c.contract.ceil_bps for c in tenant.classes):
            notes.append(f"{where}.classes: TBF is one bucket per device: no per-class rates, ceilings or priorities")
        if tenant.rules or tenant.default == "drop":
            notes.append(f"{where}: its rules are not pushed: TBF passes or queues all of {tenant.name}'s packets alike")
        notes += contract_notes(tenant, where, "TBF enforces the ceiling")
    notes += [f"{d.name}: no local or remote address: its tunnel headers are charged as IPv4's" for d in devices if not (d.local or d.remote)]
    return tuple(notes)
