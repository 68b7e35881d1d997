"""The field's incidents as scenarios: each builds a multi-tenant capture (packets of
:data:`~isolane.gen.frames.PACKET_DTYPE`) and the policy to replay it through, on a 100 Gbit/s
port. ``docs/scenarios.md`` says what each shows and how to see it with ``isolane replay``."""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable
from typing import Any

import numpy as np
import numpy.typing as npt

from isolane.engine import Engine
from isolane.gen import workloads
from isolane.gen.frames import packet_batch
from isolane.gen.workloads import Tenant
from isolane.policy import Policy

SECOND_NS = 10**9
EPOCH_NS = 1_764_115_200 * SECOND_NS
"""A whole second (2025-11-26 00:00:00 UTC): the captures span it, a quarter in, so that a
1 s poll instant falls inside them."""
DEEP_PORT = {"rate": "100Gbps", "buffer": "32MiB"}
"""A port whose buffer never overflows in these scenarios: delays, not drops."""
DRIFT_RISE, DRIFT_TOLERANCE, DRIFT_ORDERS = 1.2, 0.02, 8
"""The drift scenario's rise of the victim's p99, how close to it is close enough, and how many
orders of the neighbour's extra steps are tried for it."""
Ints = npt.NDArray[np.int64]


@dataclasses.dataclass
class Scenario:
    """A scenario's captures (by name: ``""`` for the one capture, else e.g. ``morning``), its
    policy and the other policies it is compared with (by name: ``isolated``, ``static``,
    ``update``), as documents; ``facts`` are what the tests and docs need to know (the victim,
    the instant of the update)."""

    name: str
    summary: str
    captures: dict[str, npt.NDArray[np.void]]
    policy: dict[str, Any]
    variants: dict[str, dict[str, Any]] = dataclasses.field(default_factory=dict)
    facts: dict[str, Any] = dataclasses.field(default_factory=dict)


def build(name: str, *, seed: int = 0, duration_ns: int = 20_000_000, tenants: int | None = None) -> Scenario:
    """The scenario ``name`` (one of :data:`SCENARIOS`), the same for the same arguments."""
    if name not in SCENARIOS:
        raise ValueError(f"unknown scenario {name!r}; the scenarios are {', '.join(SCENARIOS)}")
    if duration_ns < 2_000_000:
        raise ValueError("a scenario needs a duration of at least 2ms")
    make, roles = SCENARIOS[name]
    if tenants is not None and not roles <= tenants <= workloads.MAX_TENANT_NUMBER:
        raise ValueError(f"scenario {name!r} takes {roles} to {workloads.MAX_TENANT_NUMBER} tenants, not {tenants}")
    rng = np.random.default_rng(seed)
    scenario = make(rng, EPOCH_NS - duration_ns // 4, duration_ns)
    _add_neighbours(scenario, rng, (tenants or roles) - roles, EPOCH_NS - duration_ns // 4, duration_ns)
    return scenario


def invisible_loss(rng: np.random.Generator, start: int, duration: int) -> Scenario:
    """A training tenant's all-reduce is an incast: every 500 µs three ring neighbours send at
    50 Gbit/s each for about 16 µs into the 100 Gbit/s port, whose shallow buffer loses the tail
    of each step. Between steps the port is nearly idle, so a poll sees a calm port."""
    training, inference = Tenant("training", 1, 1001), Tenant("inference", 2, 2001)
    steps = _steps_avoiding_polls(start, duration, period=500_000, phase=120_000)
    packets = workloads.merge(
        workloads.all_reduce(training, steps, flows=3, message_bytes=96 << 10, flow_rate_bps=50e9, rng=rng),
        workloads.checkpoint(training, start, start + duration, rate_bps=2e9, rng=rng),
        workloads.control(training, start, start + duration, sessions=4, interval_ns=1_000_000, rng=rng),
        _serving(inference, rng, start, duration, requests_per_s=20_000),
    )
    policy = _policy(
        [_training(training, "60Gbps", microburst={"window": "10us", "threshold": "100Gbps"}), _inference(inference, "20Gbps")],
        port={"rate": "100Gbps", "buffer": "216KiB"},
        description="invisible loss: a training tenant loses about 2% of its packets in 10-20 us incast bursts that 1 s polls never see",
    )
    return Scenario("invisible-loss", invisible_loss.__doc__ or "", {"": packets}, policy, facts={"victim": training.name})


def noisy_neighbour(rng: np.random.Generator, start: int, duration: int) -> Scenario:
    """A training tenant well within its 60 Gbit/s guarantee (under 20 Gbit/s on average)
    sends its all-reduce steps as two 80 Gbit/s flows for about 20 µs every 250 µs. Through a
    shared FIFO every inference packet that arrives during a step waits behind it; with
    per-tenant queues (the ``isolated`` variant) inference's priority keeps it out of the way."""
    training, inference = Tenant("training", 1, 1001), Tenant("inference", 2, 2001)
    steps = start + 50_000 + np.arange(0, duration - 100_000, 250_000)
    packets = workloads.merge(
        workloads.all_reduce(training, steps, flows=2, message_bytes=192 << 10, flow_rate_bps=80e9, rng=rng),
        workloads.control(training, start, start + duration, sessions=4, interval_ns=1_000_000, rng=rng),
        _serving(inference, rng, start, duration, requests_per_s=40_000),
    )
    tenants = [_training(training, "60Gbps"), _inference(inference, "20Gbps")]
    policy = _policy(tenants, port={**DEEP_PORT, "mode": "shared_fifo"}, description="noisy neighbour: inference behind training's bursts in one FIFO")
    isolated = _policy(tenants, port=dict(DEEP_PORT), description="noisy neighbour, isolated: the same port with per-tenant queues")
    return Scenario("noisy-neighbour", noisy_neighbour.__doc__ or "", {"": packets}, policy, {"isolated": isolated}, {"victim": inference.name})


def update_mid_burst(rng: np.random.Generator, start: int, duration: int) -> Scenario:
    """Training's all-reduce steps fill the port for 40 µs every 500 µs; half-way through the
    capture, in the middle of a step, an update lowers training's ceiling to 80 Gbit/s
    (``update`` variant, applied with ``Engine.update`` at ``facts['update_ns']``): its queue
    grows and drains, nothing is lost, every counter runs on."""
    training, inference = Tenant("training", 1, 1001), Tenant("inference", 2, 2001)
    steps = start + 100_000 + np.arange(0, duration - 200_000, 500_000)
    packets = workloads.merge(
        workloads.all_reduce(training, steps, flows=4, message_bytes=120 << 10, flow_rate_bps=24e9, rng=rng),
        workloads.checkpoint(training, start, start + duration, rate_bps=1e9, rng=rng),
        workloads.control(training, start, start + duration, sessions=4, interval_ns=1_000_000, rng=rng),
        _serving(inference, rng, start, duration, requests_per_s=20_000),
    )
    middle = steps[len(steps) // 2] + 20_000
    tenants = [_training(training, "60Gbps", microburst={"window": "10us", "threshold": "50Gbps"}), _inference(inference, "20Gbps")]
    policy = _policy(tenants, port=dict(DEEP_PORT), description="update mid-burst: a policy update lands in the middle of an all-reduce step")
    update = copy.deepcopy(policy)
    update["tenants"][0]["ceil"] = "80Gbps"
    update["description"] = f"the update, applied at packet time {middle} ns: training's ceiling lowered to 80Gbps"
    return Scenario(
        "update-mid-burst", update_mid_burst.__doc__ or "", {"": packets}, policy, {"update": update}, {"victim": training.name, "update_ns": int(middle)}
    )


def overload(rng: np.random.Generator, start: int, duration: int) -> Scenario:
    """Four tenants guaranteed 40, 30, 20 and 10 Gbit/s write at 60% of their guarantees, but
    for 40% of the capture the other three write at 95% of theirs and ``bulk`` at 70 Gbit/s:
    127 Gbit/s offered to a 100 Gbit/s port. While its buffer holds more than 30%, every
    tenant's ``on_overload`` profile caps it at its guarantee; once it falls to 5% they return
    one every 100 µs. The ``static`` variant returns them all at once."""
    names = [("bulk", 40), ("training", 30), ("serving", 20), ("batch", 10)]
    tenants = [Tenant(name, number, 1000 * number + 1) for number, (name, _) in enumerate(names, start=1)]
    surge = (start + duration // 4, start + duration // 4 + duration * 2 // 5)
    parts = []
    for tenant, (_, guarantee) in zip(tenants, names):
        phases = ((start, surge[0], 0.6), (surge[0], surge[1], 0.95), (surge[1], start + duration, 0.6))
        for host, (begin, end, share) in enumerate(phases, start=1):  # a connection a phase
            rate = 70e9 if tenant.name == "bulk" and begin == surge[0] else guarantee * 1e9 * share
            parts.append(workloads.checkpoint(tenant, begin, end, rate_bps=rate, rng=rng, host=host))
        parts.append(workloads.control(tenant, start, start + duration, sessions=2, interval_ns=1_000_000, rng=rng))
    documents = [_bulk_tenant(tenant, guarantee) for tenant, (_, guarantee) in zip(tenants, names)]
    port: dict[str, Any] = {"rate": "100Gbps", "buffer": "4MiB", "overload": {"above": "30%", "below": "5%", "stagger": "100us"}}
    policy = _policy(documents, port=port, description="overload: 127 Gbit/s offered for a while; fair degradation, staggered recovery")
    static = _policy(
        documents, port={**port, "overload": {**port["overload"], "stagger": "0ns"}}, description="overload, static fallback: every tenant returns at once"
    )
    return Scenario("overload", overload.__doc__ or "", {"": workloads.merge(*parts)}, policy, {"static": static}, {"surge": [int(surge[0]), int(surge[1])]})


def drift(rng: np.random.Generator, start: int, duration: int) -> Scenario:
    """The same inference workload captured twice through a shared FIFO beside a training
    tenant: in the ``afternoon`` capture more of training's all-reduce steps overlap the
    inference traffic than in the ``morning`` one, and inference's p99 delay is up about 20%
    while its own packets are the very same."""
    training, inference = Tenant("training", 1, 1001), Tenant("inference", 2, 2001)
    victim = _serving(inference, rng, start, duration, requests_per_s=40_000)
    background = workloads.control(training, start, start + duration, sessions=4, interval_ns=1_000_000, rng=rng)
    slots = start + 50_000 + rng.permutation(np.arange(0, duration - 100_000, 125_000))
    tenants = [_training(training, "60Gbps"), _inference(inference, "20Gbps")]
    policy = _policy(tenants, port={**DEEP_PORT, "mode": "shared_fifo"}, description="drift: the same inference workload, morning and afternoon")
    morning = slots[: len(slots) // 4]

    def capture(steps: npt.NDArray[np.int64]) -> npt.NDArray[np.void]:
        step_rng = np.random.default_rng(int(slots[0]))  # the same flows for the same steps
        bursts = workloads.all_reduce(training, np.sort(steps), flows=2, message_bytes=64 << 10, flow_rate_bps=80e9, rng=step_rng)
        return workloads.merge(victim, background, bursts)

    afternoon = _steps_for_rise(policy, inference.name, capture, morning, slots[len(morning) :], rng)
    captures = {"morning": capture(morning), "afternoon": capture(afternoon)}
    return Scenario("drift", drift.__doc__ or "", captures, policy, facts={"victim": inference.name, "steps": [len(morning), len(afternoon)]})


SCENARIOS: dict[str, tuple[Callable[[np.random.Generator, int, int], Scenario], int]] = {
    "invisible-loss": (invisible_loss, 2),
    "noisy-neighbour": (noisy_neighbour, 2),
    "update-mid-burst": (update_mid_burst, 2),
    "overload": (overload, 4),
    "drift": (drift, 2),
}
"""Each scenario's builder and the tenants it needs (``--tenants`` adds quiet neighbours)."""


def _steps_for_rise(
    policy: dict[str, Any], victim: str, capture: Callable[[Ints], npt.NDArray[np.void]], base: Ints, spare: Ints, rng: np.random.Generator
) -> Ints:
    """``base`` and as many ``spare`` steps as take the p99 delay of the victim's ``serving``
    class closest to :data:`DRIFT_RISE` times its p99 with ``base`` alone, replayed by
    isolane's engine. A p99 moves by jumps, so a few orders of the spare steps are tried, each
    bisected for the fewest steps that reach the rise (a dozen replays for thousands of steps)."""

    def p99(steps: Ints) -> int:
        engine = Engine(Policy.from_dict(policy))
        engine.process(packet_batch(capture(steps)))
        engine.drain()
        delays = next(entry["delay_ns"] for entry in engine.stats() if entry["tenant"] == victim and entry["class"] == "serving")
        if delays["p99"] is None:
            raise AssertionError(f"{victim} / serving sent no packet")
        return delays["p99"]

    reference = p99(base)
    best, best_miss = base, float("inf")
    for _ in range(DRIFT_ORDERS):
        order = rng.permutation(spare)
        low, high = 0, len(order)  # the delay grows with the steps
        while high - low > 1:
            middle = (low + high) // 2
            low, high = (low, middle) if p99(np.concatenate([base, order[:middle]])) >= DRIFT_RISE * reference else (middle, high)
        for count in (low, high):
            steps = np.concatenate([base, order[:count]])
            miss = abs(p99(steps) / reference - DRIFT_RISE)
            best, best_miss = (steps, miss) if miss < best_miss else (best, best_miss)
        if best_miss <= DRIFT_TOLERANCE:
            break
    return best


def _steps_avoiding_polls(start: int, duration: int, *, period: int, phase: int) -> npt.NDArray[np.int64]:
    """All-reduce step starts every ``period``, none within 100 µs of a whole second."""
    steps = start + phase + np.arange(0, duration - phase - 50_000, period)
    past_second = (steps + 50_000) % SECOND_NS  # from the middle of the step
    return steps[np.minimum(past_second, SECOND_NS - past_second) > 100_000]


def _serving(tenant: Tenant, rng: np.random.Generator, start: int, duration: int, *, requests_per_s: float) -> npt.NDArray[np.void]:
    return workloads.merge(
        workloads.inference(
            tenant, start, start + duration, requests_per_s=requests_per_s, request_bytes=600, response_bytes=24_000, server_rate_bps=100e9, rng=rng
        ),
        workloads.control(tenant, start, start + duration, sessions=2, interval_ns=1_000_000, rng=rng),
    )


def _add_neighbours(scenario: Scenario, rng: np.random.Generator, count: int, start: int, duration: int) -> None:
    """``count`` quiet tenants beside the scenario's own (a little serving traffic each, no
    guarantee: they share what the others leave), in every capture and policy."""
    if count == 0:
        return
    taken = len(scenario.policy["tenants"])
    neighbours = [Tenant(f"tenant-{number}", number, 1000 * number + 1) for number in range(taken + 1, taken + count + 1)]
    packets = [_serving(tenant, rng, start, duration, requests_per_s=500) for tenant in neighbours]
    for name, capture in scenario.captures.items():
        scenario.captures[name] = workloads.merge(capture, *packets)
    for document in (scenario.policy, *scenario.variants.values()):
        document["tenants"] += [_inference(tenant, None) for tenant in neighbours]


def _policy(tenants: list[dict[str, Any]], *, port: dict[str, Any], description: str) -> dict[str, Any]:
    return {"version": 1, "description": description, "unknown_tenant": "drop", "count": "wire", "port": port, "tenants": copy.deepcopy(tenants)}


def _bfd_rule() -> dict[str, Any]:
    return {"name": "BFD", "proto": "udp", "dst_ports": 3784, "dscp": "cs6", "action": "allow", "class": "control"}


def _training(tenant: Tenant, rate: str, **contract: Any) -> dict[str, Any]:
    """A training tenant: control, all-reduce (RoCEv2) and checkpoint classes."""
    return {
        "name": tenant.name,
        "description": "distributed training: RoCEv2 all-reduce, checkpoints over TCP",
        "vnis": [tenant.vni],
        "rate": rate,
        **contract,
        "classes": [
            {"name": "control", "priority": 0},
            {"name": "collective", "priority": 1, "weight": 8},
            {"name": "checkpoint", "priority": 2, "weight": 1},
        ],
        "default_class": "control",
        "default": "drop",
        "rules": [
            _bfd_rule(),
            {"name": "RoCEv2", "src": tenant.subnet, "dst": tenant.subnet, "proto": "udp", "dst_ports": 4791, "action": "allow", "class": "collective"},
            {"name": "checkpoint writes", "src": tenant.subnet, "proto": "tcp", "dst_ports": 9000, "action": "allow", "class": "checkpoint"},
        ],
    }


def _inference(tenant: Tenant, rate: str | None) -> dict[str, Any]:
    """A model-serving tenant: control and requests/responses (TCP port 8001), served first;
    guaranteed ``rate`` (None: nothing)."""
    return {
        "name": tenant.name,
        "description": "model serving: requests and responses over TCP port 8001",
        "vnis": [tenant.vni],
        **({"rate": rate} if rate else {}),
        "classes": [{"name": "control", "priority": 0}, {"name": "serving", "priority": 0, "weight": 4}],
        "default_class": "serving",
        "default": "drop",
        "rules": [
            _bfd_rule(),
            {"name": "requests", "src": tenant.subnet, "proto": "tcp", "dst_ports": 8001, "action": "allow", "class": "serving"},
            {"name": "responses", "src": tenant.subnet, "proto": "tcp", "src_ports": 8001, "action": "allow", "class": "serving"},
        ],
    }


def _bulk_tenant(tenant: Tenant, gbps: int) -> dict[str, Any]:
    """A tenant of the overload scenario: bulk TCP writes, capped at its guarantee while the
    port is overloaded."""
    return {
        "name": tenant.name,
        "vnis": [tenant.vni],
        "rate": f"{gbps}Gbps",
        "on_overload": {"borrow": False},
        "classes": [{"name": "control", "priority": 0, "rate": "100Mbps"}, {"name": "data", "priority": 1, "rate": f"{gbps * 1000 - 100}Mbps"}],
        "default_class": "data",
        "default": "drop",
        "rules": [_bfd_rule(), {"name": "writes", "src": tenant.subnet, "proto": "tcp", "dst_ports": 9000, "action": "allow", "class": "data"}],
    }
