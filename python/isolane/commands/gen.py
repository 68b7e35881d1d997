"""``isolane gen``: write a scenario's captures and policies (``docs/scenarios.md``)."""

from __future__ import annotations

import argparse
import os
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

from isolane.gen import frames, templates, yamlwriter
from isolane.gen.frames import DEFAULT_SNAPLEN
from isolane.gen.scenarios import SCENARIOS, Scenario, build
from isolane.policy import parse_duration
from isolane.urls import doc_url


def add_parser(commands: Any) -> None:
    """Add ``gen`` to the CLI's subparsers."""
    gen = commands.add_parser(
        "gen",
        help="write a multi-tenant AI-cluster capture that reproduces an incident, with its policy",
        description="Write realistic multi-tenant AI-cluster traffic (VXLAN, one VNI per tenant, nanosecond pcap) that "
        "reproduces an incident, and the policy to replay it through (OUT with .yaml; other policies it is compared with "
        f"as OUT.<name>.yaml). See {doc_url('scenarios.md')}. Needs scapy: pip install 'isolane[gen]'.",
    )
    gen.add_argument("scenario", choices=list(SCENARIOS), help="the incident")
    gen.add_argument("-o", "--output", required=True, metavar="OUT.pcap", help="the capture to write (drift writes OUT.morning.pcap and OUT.afternoon.pcap)")
    gen.add_argument("--seed", type=int, default=0, help="random seed: the same seed gives the same files (default 0)")
    gen.add_argument("--duration", default="20ms", help="capture length in packet time (default 20ms, at least 2ms)")
    gen.add_argument("--tenants", type=int, help="tenants in all: the scenario's own plus quiet neighbours (default: the scenario's own)")
    gen.add_argument(
        "--snaplen", type=int, default=DEFAULT_SNAPLEN, help=f"bytes of each packet written (default {DEFAULT_SNAPLEN}: every header; 0: whole packets)"
    )
    gen.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    try:
        templates.templates()
    except ImportError as err:  # scapy is an optional extra: say how to get it, not a traceback
        print(f"isolane: error: {err}", file=sys.stderr)
        return 2
    began = time.perf_counter()
    scenario = build(args.scenario, seed=args.seed, duration_ns=parse_duration(args.duration), tenants=args.tenants)
    output = Path(args.output)
    base = output.with_suffix("") if output.suffix in (".pcap", ".cap") else output
    written = _write_captures(scenario, output, base, args.snaplen) + _write_policies(scenario, base, _command(args))
    total = sum(len(c) for c in scenario.captures.values())
    print(f"{args.scenario}: {total:,} packets in {time.perf_counter() - began:.2f} s; wrote " + ", ".join(written))
    return 0


def _write_captures(scenario: Scenario, output: Path, base: Path, snaplen: int) -> list[str]:
    """Write the scenario's captures: ``output``, or ``base.<name>.pcap`` for named ones."""
    written = []
    for name, packets in scenario.captures.items():
        path = base.with_name(f"{base.name}.{name}.pcap") if name else output
        frames.write_capture(path, packets, snaplen)
        written.append(f"{path} ({len(packets):,} packets, {os.path.getsize(path):,} bytes)")
    return written


def _write_policies(scenario: Scenario, base: Path, command: str) -> list[str]:
    """Write ``base.yaml`` and ``base.<variant>.yaml``, each opening with the command and what
    the scenario shows."""
    comment = f"{command}\n\n" + textwrap.fill(" ".join(scenario.summary.replace("``", "").split()), 96)
    written = []
    for name, document in {"": scenario.policy, **scenario.variants}.items():
        path = base.with_name(f"{base.name}.{name}.yaml" if name else f"{base.name}.yaml")
        path.write_text(yamlwriter.dump(document, comment))
        written.append(str(path))
    return written


def _command(args: argparse.Namespace) -> str:
    """The command that writes these files again (but for ``-o``)."""
    command = f"isolane gen {args.scenario} --seed {args.seed} --duration {args.duration}"
    command += f" --tenants {args.tenants}" if args.tenants is not None else ""
    return command + (f" --snaplen {args.snaplen}" if args.snaplen != DEFAULT_SNAPLEN else "")
