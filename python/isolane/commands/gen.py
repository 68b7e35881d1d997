"""``isolane gen``: write a scenario's captures and policies (``docs/scenarios.md``)."""

from __future__ import annotations

import argparse
import os
import textwrap
import time
from pathlib import Path
from typing import Any

from isolane.policy import parse_duration


def add_parser(commands: Any) -> None:
    """Add ``gen`` to the CLI's subparsers."""
    from isolane.gen.scenarios import SCENARIOS

    gen = commands.add_parser(
        "gen",
        help="write a multi-tenant AI-cluster capture that reproduces an incident, with its policy",
        description="Write realistic multi-tenant AI-cluster traffic (VXLAN, one VNI per tenant, nanosecond pcap) that "
        "reproduces an incident, and the policy to replay it through (OUT with .yaml; other policies it is compared with "
        "as OUT.<name>.yaml). See docs/scenarios.md. Needs scapy: pip install 'isolane[gen]'.",
    )
    gen.add_argument("scenario", choices=list(SCENARIOS), help="the incident")
    gen.add_argument("-o", "--output", required=True, metavar="OUT.pcap", help="the capture to write (drift writes OUT.morning.pcap and OUT.afternoon.pcap)")
    gen.add_argument("--seed", type=int, default=0, help="random seed: the same seed gives the same files (default 0)")
    gen.add_argument("--duration", default="20ms", help="capture length in packet time (default 20ms, at least 2ms)")
    gen.add_argument("--tenants", type=int, help="tenants in all: the scenario's own plus quiet neighbours (default: the scenario's own)")
    gen.add_argument("--snaplen", type=int, default=None, help="bytes of each packet written (default 128: every header; 0: whole packets)")
    gen.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from isolane.gen import frames, yamlwriter
    from isolane.gen.scenarios import build

    began = time.perf_counter()
    scenario = build(args.scenario, seed=args.seed, duration_ns=parse_duration(args.duration), tenants=args.tenants)
    snaplen = frames.DEFAULT_SNAPLEN if args.snaplen is None else args.snaplen
    output = Path(args.output)
    base = output.with_suffix("") if output.suffix in (".pcap", ".cap") else output
    written = []
    for name, packets in scenario.captures.items():
        path = base.with_name(f"{base.name}.{name}.pcap") if name else output
        frames.write_capture(path, packets, snaplen)
        written.append(f"{path} ({len(packets):,} packets, {os.path.getsize(path):,} bytes)")
    summary = " ".join(scenario.summary.replace("``", "").split())
    for name, document in {"": scenario.policy, **scenario.variants}.items():
        path = base.with_name(f"{base.name}.{name}.yaml" if name else f"{base.name}.yaml")
        tenants = f" --tenants {args.tenants}" if args.tenants is not None else ""
        comment = f"isolane gen {args.scenario} --seed {args.seed} --duration {args.duration}{tenants}\n\n" + textwrap.fill(summary, 96)
        path.write_text(yamlwriter.dump(document, comment))
        written.append(str(path))
    total = sum(len(c) for c in scenario.captures.values())
    print(f"{args.scenario}: {total:,} packets in {time.perf_counter() - began:.2f} s; wrote " + ", ".join(written))
    return 0
