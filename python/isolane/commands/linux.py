"""``isolane linux probe|discover|apply|remove|stats|live``: isolane beside a Linux network stack
(``docs/linux.md``; needs ``isolane[linux]``)."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from isolane.commands import linux_live
from isolane.policy import Policy, parse_rate
from isolane.report.text import align
from isolane.urls import doc_url


def add_parser(commands: Any) -> None:
    """Add ``linux`` and its subcommands to the CLI's subparsers."""
    linux = commands.add_parser(
        "linux",
        help="probe the kernel, discover VXLAN tenants, push a policy's guarantees as HTB or its ceilings as TBF, read the kernel's counters",
        description=f"isolane beside a Linux network stack, through netlink (pyroute2: pip install 'isolane[linux]'). See {doc_url('linux.md')}.",
    )
    sub = linux.add_subparsers(required=True, metavar="COMMAND")
    _command(
        sub,
        "probe",
        _probe,
        "which kernel features isolane can use here",
        "Try each feature in a scratch namespace.",
        json_help="print JSON instead of a table",
    )
    _command(
        sub,
        "discover",
        _discover,
        "the VXLAN devices of a namespace, as a policy skeleton",
        "Print a policy (YAML) with one tenant per VNI of the namespace's vxlan devices, or with --json the devices.",
        json_help="print the devices as JSON instead of a policy",
    )
    apply = _command(
        sub,
        "apply",
        _apply,
        "enforce a policy's guarantees and ceilings as an HTB tree with u32 VNI filters, or its ceilings as TBF",
        "Make DEV's root an HTB tree with one class per tenant (rate = guarantee, ceil = ceiling), one per "
        "traffic class under it, u32 filters on the outer VXLAN VNI (IPv4 and IPv6 underlay) and a default class 1:ffff "
        "for traffic of no tenant; or, with --mode tbf, make the root of each tenant's vxlan devices a TBF at its ceiling. "
        "Changes only what differs; on a failure undoes what it did.",
        plan=True,
    )
    apply.add_argument("--dry-run", action="store_true", help="print the tc commands that build the same on devices with their default qdisc")
    remove = _command(
        sub,
        "remove",
        _remove,
        "put devices back to their default qdisc",
        "Delete isolane's HTB root from DEV, or with --mode tbf its TBF roots (nothing else).",
    )
    remove.add_argument("--dev", help="the underlay device (htb); with --mode tbf one vxlan device (default: all of the namespace's)")
    _mode_option(remove)
    _command(
        sub,
        "stats",
        _stats,
        "the kernel's per-class (htb) or per-device (tbf) counters, by tenant and class",
        "Read DEV's HTB class counters, or with --mode tbf the TBF counters of the tenants' vxlan devices, through netlink and name them by the policy.",
        plan=True,
        json_help="print JSON instead of a table",
    )
    linux_live.add_parser(sub)


def _command(sub: Any, name: str, run: Any, summary: str, description: str, plan: bool = False, json_help: str | None = None) -> argparse.ArgumentParser:
    """One subcommand with ``--netns``, and the options that make a plan (``plan``) and ``--json`` (``json_help``) when asked."""
    command: argparse.ArgumentParser = sub.add_parser(name, help=summary, description=description)
    command.add_argument("--netns", help="network namespace (ip netns name; default: this process's)")
    if plan:
        command.add_argument("--dev", help="the underlay device carrying the VXLAN traffic (htb; tbf finds the tenants' vxlan devices)")
        _mode_option(command)
        command.add_argument("--policy", required=True, help=f"tenant policy (see {doc_url('policy.md')})")
        command.add_argument("--link-rate", metavar="RATE", help="the device's line rate, e.g. 100Gbps (htb; default: the policy's port rate)")
        command.add_argument("--vxlan-port", type=int, action="append", metavar="PORT", help="UDP port carrying VXLAN (htb; repeatable; default 4789)")
    if json_help:
        command.add_argument("--json", action="store_true", help=json_help)
    command.set_defaults(run=run)
    return command


def _mode_option(command: argparse.ArgumentParser) -> None:
    command.add_argument(
        "--mode", choices=("htb", "tbf"), default="htb", help="htb: an HTB tree on the underlay device (default); tbf: TBF on each tenant's vxlan devices"
    )


def _plan(args: argparse.Namespace) -> Any:
    from isolane.cli import _read_policy
    from isolane.linux import discover_vxlan, plan_htb, plan_tbf

    policy: Policy = _read_policy(args.policy)
    if args.mode == "tbf":
        return plan_tbf(policy, discover_vxlan(args.netns))
    if args.dev is None:
        raise ValueError("--dev: the underlay device is needed in htb mode")
    link_rate = parse_rate(args.link_rate) if args.link_rate else None
    return plan_htb(policy, link_rate_bps=link_rate, vxlan_ports=tuple(args.vxlan_port or [4789]))


def _probe(args: argparse.Namespace) -> int:
    from isolane.linux import probe_features

    features = probe_features(args.netns)
    print(json.dumps(features.to_json(), indent=2) if args.json else features)
    return 0


def _discover(args: argparse.Namespace) -> int:
    from isolane.linux import discover_vxlan, policy_skeleton

    devices = discover_vxlan(args.netns)
    print(json.dumps([d.__dict__ for d in devices], indent=2) if args.json else policy_skeleton(devices), end="" if not args.json else "\n")
    return 0


def _apply(args: argparse.Namespace) -> int:
    from isolane.linux import TbfPlan, apply_plan, apply_tbf, tbf_tc_commands, tc_commands

    plan = _plan(args)
    for note in plan.unenforced:
        print(f"isolane: warning: not enforced by the kernel: {note}", file=sys.stderr)
    tbf = isinstance(plan, TbfPlan)
    if args.dry_run:
        print("\n".join(tbf_tc_commands(plan, args.netns) if tbf else tc_commands(plan, args.dev, args.netns)))
        return 0
    changes = apply_tbf(plan, args.netns) if tbf else apply_plan(plan, args.dev, args.netns)
    where = ", ".join(q.dev for q in plan.qdiscs) if tbf else args.dev
    print("\n".join(changes) if changes else f"{where}: already as the policy says, nothing changed")
    return 0


def _remove(args: argparse.Namespace) -> int:
    from isolane.linux import remove, remove_tbf

    if args.mode == "tbf":
        removed = remove_tbf([args.dev] if args.dev else None, args.netns)
        print("\n".join(f"{dev}: isolane's TBF root deleted, back to the default qdisc" for dev in removed) or "no isolane TBF root, nothing changed")
        return 0
    if args.dev is None:
        raise ValueError("--dev: the underlay device is needed in htb mode")
    deleted = remove(args.dev, args.netns)
    print(f"{args.dev}: " + ("isolane's HTB root deleted, back to the default qdisc" if deleted else "no isolane HTB root, nothing changed"))
    return 0


def _stats(args: argparse.Namespace) -> int:
    from isolane.linux import TbfPlan, read_stats, read_tbf_stats

    plan = _plan(args)
    rows = read_tbf_stats(plan, args.netns) if isinstance(plan, TbfPlan) else read_stats(plan, args.dev, args.netns)
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    header = ("device" if isinstance(plan, TbfPlan) else "class", "tenant / class", "packets", "bytes", "drops", "overlimits", "backlog")
    table = [header]
    for row in rows:
        label = row["class"] and f"  {row['class']}" or row["tenant"] or row["role"]
        first = row.get("dev") or row["classid"]
        table.append((first, label, f"{row['packets']:,}", f"{row['bytes']:,}", f"{row['drops']:,}", f"{row['overlimits']:,}", f"{row['backlog_bytes']:,} B"))
    print("\n".join(align(table, right={2, 3, 4, 5, 6})))
    return 0
