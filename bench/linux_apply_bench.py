"""Pushing a policy into the kernel (issue 19): ``isolane.linux.apply_plan`` (netlink through
pyroute2, reading the device first, idempotent, with rollback) against ``tc -batch`` of the same
plan's dry-run commands (iproute2, no reading, no rollback), each on a fresh veth device in a
namespace of its own, in the same run; then apply again (nothing changes) and the read-back.

Policies: ``tenants`` tenants of one VNI with two classes (HTB classes and u32 VNI filters), and
``rules`` tenants of one VNI, three classes and ten rules each (the rules' u32 filters on the
inner headers). Both trees are checked to hold the same classes and filters.

    python bench/linux_apply_bench.py [--tenants 254] [--rules 100] [--runs 3]   # as root
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import tempfile
import time
from collections import Counter
from typing import Any

from isolane.linux import apply_plan, plan_htb, read_stats, tc_commands
from isolane.linux.apply import device_filters
from isolane.linux.netlink import htb_classes, link_index, open_netns
from isolane.policy import Policy

NAMESPACES = (f"islbench{os.getpid()}a", f"islbench{os.getpid()}b")


def plain_policy(tenants: int) -> dict[str, Any]:
    return {
        "count": "wire",
        "port": {"rate": "100Gbps", "buffer": "64MiB"},
        "tenants": [
            {"name": f"t{i}", "vnis": [1000 + i], "rate": "100Mbps", "ceil": "10Gbps", "classes": [{"name": "bulk"}, {"name": "control"}]}
            for i in range(tenants)
        ],
    }


def rules_policy(tenants: int) -> dict[str, Any]:
    rules: list[dict[str, Any]] = [{"proto": "udp", "dst_ports": 5000 + k, "action": "allow", "class": ("a", "b")[k % 2]} for k in range(8)]
    rules.append({"src": "10.1.0.0/16", "proto": "tcp", "dst_ports": "1000-1999", "action": "allow", "class": "b"})
    rules.append({"proto": "udp", "dst_ports": 6000, "action": "drop"})
    classes = [{"name": "bulk"}, {"name": "a"}, {"name": "b"}]
    return {
        "count": "wire",
        "port": {"rate": "100Gbps", "buffer": "64MiB"},
        "tenants": [{"name": f"t{i}", "vnis": [1000 + i], "rate": "100Mbps", "classes": classes, "rules": rules} for i in range(tenants)],
    }


def fresh_device(netns: str) -> None:
    subprocess.run(["ip", "netns", "del", netns], capture_output=True)
    subprocess.run(["ip", "netns", "add", netns], check=True)
    subprocess.run(["ip", "-n", netns, "link", "add", "eth1", "type", "veth", "peer", "name", "eth2"], check=True)


def tree(netns: str) -> tuple[int, Counter[object]]:
    """The device's class count and its filters, comparable across namespaces."""
    with open_netns(netns) as ipr:
        index = link_index(ipr, "eth1")
        classes = [kernel for kernel, _ in htb_classes(ipr, index)]
        return len(classes), Counter(f.same_as() for f in device_filters(ipr, index, classes))


def timed(action: Any) -> tuple[float, Any]:
    start = time.perf_counter()
    result = action()
    return time.perf_counter() - start, result


def one_run(policy: Policy) -> dict[str, float]:
    isolane_ns, tc_ns = NAMESPACES
    plan_s, plan = timed(lambda: plan_htb(policy))
    fresh_device(isolane_ns)
    fresh_device(tc_ns)
    apply_s, changes = timed(lambda: apply_plan(plan, "eth1", isolane_ns))
    again_s, again = timed(lambda: apply_plan(plan, "eth1", isolane_ns))
    read_s, _ = timed(lambda: read_stats(plan, "eth1", isolane_ns))
    with tempfile.NamedTemporaryFile("w", suffix=".tc") as batch:
        batch.write("\n".join(line.removeprefix("tc ") for line in tc_commands(plan, "eth1")))
        batch.flush()
        tc_s, _ = timed(lambda: subprocess.run(["tc", "-n", tc_ns, "-batch", batch.name], check=True, stderr=subprocess.DEVNULL))  # its quantum warnings
    if again or tree(isolane_ns) != tree(tc_ns):
        raise AssertionError("apply and tc -batch built different trees (or a second apply changed something)")
    return {"plan": plan_s, "apply": apply_s, "changes": len(changes), "again": again_s, "read": read_s, "tc": tc_s}


def report(name: str, runs: list[dict[str, float]]) -> None:
    best = {key: min(r[key] for r in runs) for key in runs[0]}
    median = {key: statistics.median(r[key] for r in runs) for key in runs[0]}
    print(
        f"{name}: {int(best['changes']):,} changes; plan {best['plan']:.3f} s; apply {best['apply']:.2f} s (median {median['apply']:.2f}); "
        f"tc -batch {best['tc']:.2f} s (median {median['tc']:.2f}); apply / tc {best['apply'] / best['tc']:.2f}x; "
        f"apply again {best['again']:.2f} s; read back {best['read']:.2f} s"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tenants", type=int, default=254)
    parser.add_argument("--rules", type=int, default=100)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    if os.geteuid() != 0 or shutil.which("tc") is None:
        raise SystemExit("needs root and iproute2's tc")
    try:
        for name, policy in ((f"{args.tenants} tenants, 2 classes", plain_policy(args.tenants)), (f"{args.rules} tenants, 10 rules", rules_policy(args.rules))):
            compiled = Policy.from_dict(policy)
            report(name, [one_run(compiled) for _ in range(args.runs)])
    finally:
        for netns in NAMESPACES:
            subprocess.run(["ip", "netns", "del", netns], capture_output=True)


if __name__ == "__main__":
    main()
