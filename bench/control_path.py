"""The control path at N tenants: full load (file to a running engine), an identical update,
one-tenant changes from ``Policy.with_tenant`` to the data path (rules, meter, guarantee, back
to a policy the running one was edited from, and a guarantee that changes the common divisor of the guarantees, so every tenant's port weight), a
tenant put in the middle of the policy file read again and taken out again (and two, at both
ends; and the first tenant moved to the end), a
tenant added and removed, one with a microburst setting, one with a burst profile and one with an
overload profile, a tenant's classes changed, a tenant renamed in one update, and a tenant removed
while its packets wait at the port; with
``--distinct``, the memory a tenant when no two tenants share a contract; with ``--rules N``, one
tenant of N rules from file to a running engine; with ``--alone``, only the memory a tenant, on
one contract tier and every contract distinct, each in a process of its own; with ``--fresh K``,
only the load, K runs each in a process of its own (the file written once, before them).

    python bench/control_path.py 100 1000 10000 100000 --distinct --rules 100000
    python bench/control_path.py 10000 100000 --alone
    python bench/control_path.py 10000 100000 --fresh 5
"""

from __future__ import annotations

import argparse
import ctypes
import gc
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import yaml

import isolane

DUMPER = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
"""libyaml's writer where PyYAML has it: 100,000 tenants written in seconds, not a minute."""


def tenant(i: int, rate: int = 10) -> dict[str, Any]:
    return {
        "name": f"t{i}",
        "vnis": [1000 + i],
        "rate": f"{rate}Mbps",
        "ceil": "1Gbps",
        "meter": {"kind": "srtcm", "cir": f"{rate}Mbps"},
        "rules": [{"dst": f"10.{i // 250 % 256}.{i % 250}.0/24", "dst_ports": 443, "proto": "tcp", "action": "allow"}],
    }


def changes(engine: isolane.Engine, policy: isolane.Policy, make: Any, n: int = 200) -> tuple[float, float]:
    times = []
    for k in range(n):
        start = time.perf_counter()
        policy = policy.with_tenant(make(k))
        engine.update(policy)
        times.append(time.perf_counter() - start)
    times.sort()
    return statistics.median(times) * 1e3, times[int(n * 0.99) - 1] * 1e3


def settled_resident_bytes() -> int:
    """The resident set once garbage is collected and free heap handed back (so that a case
    run after another starts from what is really held)."""
    gc.collect()
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):  # not glibc
        pass
    return resident_bytes()


def resident_bytes() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def warm_up() -> None:
    """A small policy loaded into an engine once, so that what is imported and cached on first
    use (once a process, whatever the size) is not counted per tenant."""
    path = Path(tempfile.mkdtemp()) / "one.yaml"
    path.write_text(yaml.safe_dump({"port": {"rate": "400Gbps", "buffer": "64MB"}, "tenants": [tenant(0)]}))
    isolane.Engine(isolane.Policy.from_file(path))


def run(count: int) -> None:
    path = Path(tempfile.mkdtemp()) / "tenants.yaml"
    line = f"{max(400, count // 50)}Gbps"  # room for every guarantee (10 Mbps, 20 after a change)
    port = {"rate": line, "buffer": "64MB", "overload": {"above": "50%", "below": "10%"}}  # for tenants with an overload profile
    path.write_text(yaml.dump({"port": port, "tenants": [tenant(i) for i in range(count)]}, Dumper=DUMPER, width=1 << 16))
    warm_up()
    before = settled_resident_bytes()
    start = time.perf_counter()
    policy = isolane.Policy.from_file(path)
    engine = isolane.Engine(policy)
    elapsed = time.perf_counter() - start
    gc.collect()
    per_tenant = (resident_bytes() - before) / count
    print(f"{count} tenants: file to running engine {elapsed:.2f} s, {per_tenant / 1024:.1f} KiB resident per tenant (policy and engine)")
    start = time.perf_counter()
    engine.update(policy)
    print(f"  identical update {1e3 * (time.perf_counter() - start):.3f} ms")
    document = {"port": port, "tenants": [tenant(i) for i in range(count)]}
    tenants = document["tenants"]
    print(f"  {read_again(engine, path, document, tenants[: count // 2] + [tenant(10_000_000)] + tenants[count // 2 :], 'a tenant put in the middle')}")
    print(f"  {read_again(engine, path, document, [tenant(10_000_001)] + tenants + [tenant(10_000_002)], 'tenants put in at both ends')}")
    print(f"  {read_again(engine, path, document, tenants[1:] + tenants[:1], 'the first tenant moved to the end', 'put back')}")
    faster = f"{2 * max(400, count // 50)}Gbps"
    port_changes = {
        "a new port buffer": {"buffer": "32MB"},
        "a new line rate": {"rate": faster},
        "a new port mode": {"mode": "shared_fifo"},
        "a new port microburst setting": {"microburst": {"window": "20us", "threshold": "50%"}},
        "a new alpha (a rebuild)": {"alpha": 2},
    }
    for what, changed in port_changes.items():
        print(f"  {read_again(engine, path, document, tenants, what, 'the old one back', port=dict(port, **changed))}")
    for label, make in (
        ("rules", lambda k: dict(tenant(k % count), rules=[{"dst": f"10.9.{k % 250}.0/24", "dst_ports": 80, "action": "allow"}])),
        ("meter", lambda k: dict(tenant(k % count), meter={"kind": "srtcm", "cir": f"{5 + k % 3}Mbps"})),
        ("guarantee", lambda k: tenant(k % count, 20)),
    ):
        median, p99 = changes(engine, engine.policy, make)
        print(f"  one-tenant change ({label}): median {median:.3f} ms, p99 {p99:.3f} ms")
    # Back to a policy the running one was edited from: the engine finds the one change by
    # comparing the two (isolane.policy.Tenants.differing), not from the edits.
    middle = count // 2
    first = engine.policy.with_tenant(dict(tenant(middle), rules=[{"dst": "10.8.0.0/24", "dst_ports": 80, "action": "allow"}]))
    second = first.with_tenant(dict(tenant(middle), rules=[{"dst": "10.8.0.0/24", "dst_ports": 8080, "action": "allow"}]))
    times = []
    for _ in range(20):
        engine.update(second)
        start = time.perf_counter()
        engine.update(first)
        times.append(time.perf_counter() - start)
    print(f"  one-tenant change back to the policy edited into the running one: median {1e3 * statistics.median(times):.3f} ms")
    times = []
    for k in range(20):  # 15 Mbps among guarantees of 10 and 20 changes their common divisor: every tenant's port weight
        start = time.perf_counter()
        engine.update(engine.policy.with_tenant(tenant(0, 15 if k % 2 == 0 else 10)))
        times.append(time.perf_counter() - start)
    print(f"  a guarantee that changes every tenant's port weight: median {1e3 * statistics.median(times):.3f} ms")
    added = [isolane.Policy.from_dict({"tenants": [tenant(count + k)]}).tenants[0] for k in range(20)]
    times = []
    for new in added:  # new tenants at the end, one by one
        start = time.perf_counter()
        engine.update(engine.policy.with_tenant(new))
        times.append(time.perf_counter() - start)
    start = time.perf_counter()
    engine.update(engine.policy.without_tenant(added[0].name))
    removed = time.perf_counter() - start
    print(f"  a tenant added: median {1e3 * statistics.median(times):.3f} ms; one removed: {1e3 * removed:.3f} ms")
    watched = {"microburst": {"window": "10us", "threshold": "5Gbps"}}
    added_ms, removed_ms = added_and_removed(engine, lambda k: dict(tenant(count + 100 + k), **watched))
    print(f"  a tenant with a microburst setting added: median {added_ms:.3f} ms; removed: {removed_ms:.3f} ms")
    adaptive = dict(watched, on_burst={"meter": {"kind": "srtcm", "cir": "50Mbps"}, "hold": "1ms"})  # docs/qos.md, "Adaptive profiles"
    added_ms, removed_ms = added_and_removed(engine, lambda k: dict(tenant(count + 200 + k), **adaptive))
    print(f"  a tenant with a burst profile added: median {added_ms:.3f} ms; removed: {removed_ms:.3f} ms")
    overload = {"on_overload": {"meter": {"kind": "srtcm", "cir": "5Mbps"}}}
    added_ms, removed_ms = added_and_removed(engine, lambda k: dict(tenant(count + 300 + k), **overload))
    print(f"  a tenant with an overload profile added: median {added_ms:.3f} ms; removed: {removed_ms:.3f} ms")
    classes = [{"name": "bulk", "priority": 5}, {"name": "rpc", "priority": 1}]
    classed = {"classes": classes, "default_class": "bulk"}
    median, p99 = changes(engine, engine.policy, lambda k: dict(tenant(k % count), **classed) if k % 2 == 0 else tenant(k % count), 40)
    print(f"  one-tenant change (classes added or taken away): median {median:.3f} ms, p99 {p99:.3f} ms")
    times = []
    for k in range(20):  # taken out and put in under a new name, in one update
        old, new = (f"t{k}", f"r{k}")
        start = time.perf_counter()
        engine.update(engine.policy.without_tenant(old).with_tenant(dict(tenant(k), name=new)))
        times.append(time.perf_counter() - start)
    print(f"  a tenant renamed (taken out and put in, in one update): median {1e3 * statistics.median(times):.3f} ms")
    times = []
    for k in range(20):  # the last tenant, its packets waiting at the port
        name = engine.policy.tenants[-1].name
        engine.process(burst(engine.policy.tenants[-1].vnis[0], (k + 1) * 10**9))
        start = time.perf_counter()
        engine.update(engine.policy.without_tenant(name))
        times.append(time.perf_counter() - start)
    print(f"  a tenant removed while its packets wait at the port: median {1e3 * statistics.median(times):.3f} ms")


def read_again(
    engine: isolane.Engine,
    path: Path,
    document: dict[str, Any],
    edited: list[dict[str, Any]],
    what: str,
    undo: str = "taken out again",
    rounds: int = 3,
    **settings: Any,
) -> str:
    """Medians of ``Engine.update`` with the policy file (``path``, of ``document``) written
    again with the tenants ``edited`` and the policy-wide ``settings`` (``what``: how they
    differ), then as it was (``undo``): the file read apart."""
    changed = path.with_name("edited.yaml")
    put, taken = [], []
    for _ in range(rounds):
        for written, times in ((dict(document, tenants=edited, **settings), put), (document, taken)):
            changed.write_text(yaml.dump(written, Dumper=DUMPER, width=1 << 16))
            policy = isolane.Policy.from_file(changed)
            start = time.perf_counter()
            engine.update(policy)
            times.append(time.perf_counter() - start)
    put_ms, taken_ms = 1e3 * statistics.median(put), 1e3 * statistics.median(taken)
    return f"{what} of the file read again: median {put_ms:.3f} ms; {undo}: {taken_ms:.3f} ms"


def burst(vni: int, at_ns: int) -> Any:
    """Eight 1500-byte packets of VNI ``vni`` at once: all but the first wait at the port."""
    rows = np.zeros(8, dtype=isolane.PARSED_DTYPE)
    rows["vni"], rows["tunnel"], rows["ip_version"], rows["proto"] = vni, isolane.Tunnel.VXLAN, 4, 6
    rows["wire_len"], rows["inner_len"], rows["timestamp_ns"] = 1500, 1450, at_ns
    return rows


def added_and_removed(engine: isolane.Engine, make: Any, n: int = 20) -> tuple[float, float]:
    """Medians (ms) of a tenant ``make(k)`` added at the end, and of it removed again."""
    added, removed = [], []
    for k in range(n):
        new = make(k)
        start = time.perf_counter()
        engine.update(engine.policy.with_tenant(new))
        added.append(time.perf_counter() - start)
        start = time.perf_counter()
        engine.update(engine.policy.without_tenant(new["name"]))
        removed.append(time.perf_counter() - start)
    return 1e3 * statistics.median(added), 1e3 * statistics.median(removed)


def policy_file(count: int, distinct: bool) -> Path:
    """A policy of ``count`` simple tenants, each with its own meter rate if ``distinct`` (no two
    tenants share a contract: nothing is held once for many), else on one contract tier."""
    path = Path(tempfile.mkdtemp()) / "tenants.yaml"
    tenants = [dict(tenant(i), meter={"kind": "srtcm", "cir": f"{10_000 + i}kbps"}) if distinct else tenant(i) for i in range(count)]
    path.write_text(yaml.dump({"port": {"rate": f"{max(400, count // 50)}Gbps", "buffer": "64MB"}, "tenants": tenants}, Dumper=DUMPER, width=1 << 16))
    return path


def run_distinct(count: int) -> None:
    """Resident bytes a tenant when no two tenants share a contract, after the other cases."""
    path = policy_file(count, distinct=True)
    warm_up()
    before = settled_resident_bytes()
    engine = isolane.Engine(isolane.Policy.from_file(path))
    gc.collect()
    print(f"{count} tenants, every contract distinct: {(resident_bytes() - before) / count / 1024:.1f} KiB resident per tenant (policy and engine)")
    del engine


def run_alone(count: int) -> None:
    """Resident bytes a tenant, on one contract tier and every contract distinct, each in a
    process of its own (in one, what a case frees is counted in the next)."""
    for distinct in (False, True):
        command = [sys.executable, __file__, "--resident", str(count), *(["--distinct"] if distinct else [])]
        print(subprocess.run(command, capture_output=True, text=True, check=True).stdout, end="")


def resident(count: int, distinct: bool) -> None:
    """The resident bytes a tenant that reading the policy and then making the engine add."""
    path = policy_file(count, distinct)
    warm_up()
    before = settled_resident_bytes()
    policy = isolane.Policy.from_file(path)
    read = settled_resident_bytes()
    engine = isolane.Engine(policy)
    made = settled_resident_bytes()
    label = "every contract distinct" if distinct else "on one contract tier"
    print(
        f"{count} tenants {label}, alone: policy {(read - before) / count:.0f} B, engine {(made - read) / count:.0f} B, "
        f"{(made - before) / count / 1024:.2f} KiB resident per tenant"
    )
    del engine


def run_fresh(count: int, runs: int) -> None:
    """File to running engine, ``runs`` times, each in a process of its own that has done nothing
    else but a warm-up (in one process, what writing the file made and freed sways the time)."""
    path = policy_file(count, distinct=False)
    command = [sys.executable, __file__, "--load-once", str(path)]
    times = sorted(float(subprocess.run(command, capture_output=True, text=True, check=True).stdout) for _ in range(runs))
    print(f"{count} tenants: file to running engine, {runs} fresh processes: best {times[0]:.2f} s, median {statistics.median(times):.2f} s")


def load_once(path: Path) -> None:
    """One load of ``path`` after a warm-up; prints its seconds."""
    warm_up()
    start = time.perf_counter()
    isolane.Engine(isolane.Policy.from_file(path))
    print(f"{time.perf_counter() - start:.4f}")


def run_rules(count: int) -> None:
    """One tenant of ``count`` distinct /32 rules (bench/test_policy_load_bench.py's shape)."""
    rules = [{"dst": f"10.{i // 65536}.{i // 256 % 256}.{i % 256}/32", "dst_ports": 1000 + i % 5000, "proto": "tcp", "action": "allow"} for i in range(count)]
    path = Path(tempfile.mkdtemp()) / "rules.yaml"
    path.write_text(yaml.dump({"tenants": [{"name": "big", "vnis": [1], "rules": rules}]}, Dumper=DUMPER, sort_keys=False))
    del rules
    before = settled_resident_bytes()
    start = time.perf_counter()
    engine = isolane.Engine(isolane.Policy.from_file(path))
    elapsed = time.perf_counter() - start
    assert len(engine.policy.tenants[0].rules) == count
    print(f"one tenant of {count} rules: file to running engine {elapsed:.2f} s, {(resident_bytes() - before) / 2**20:.0f} MiB resident")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("tenants", nargs="*", type=int, help="policy sizes (default 1000 10000)")
    parser.add_argument("--rules", type=int, help="also one tenant of this many rules")
    parser.add_argument("--distinct", action="store_true", help="also the memory a tenant when no two share a contract")
    parser.add_argument("--alone", action="store_true", help="only the memory a tenant, each case in a process of its own")
    parser.add_argument("--fresh", type=int, metavar="K", help="only the load, K runs each in a process of its own")
    parser.add_argument("--resident", type=int, help=argparse.SUPPRESS)  # one case of --alone
    parser.add_argument("--load-once", type=Path, help=argparse.SUPPRESS)  # one run of --fresh
    args = parser.parse_args()
    if args.resident:
        resident(args.resident, args.distinct)
        sys.exit()
    if args.load_once:
        load_once(args.load_once)
        sys.exit()
    for count in args.tenants or ([] if args.rules else [1000, 10000]):
        if args.alone:
            run_alone(count)
            continue
        if args.fresh:
            run_fresh(count, args.fresh)
            continue
        run(count)
        if args.distinct:
            run_distinct(count)
    if args.rules:
        run_rules(args.rules)
