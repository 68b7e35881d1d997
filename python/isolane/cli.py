"""The ``isolane`` command line."""

from __future__ import annotations

import argparse
import datetime
import json
import os
import sys
from collections.abc import Sequence

from isolane import _core
from isolane.summary import CaptureSummary, summarize

#: Files at least this big get a progress line on a terminal.
PROGRESS_MIN_BYTES = 64 << 20


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    try:
        return int(args.run(args))
    except BrokenPipeError:  # the reader went away (`isolane schema | head`): not an error
        sys.stdout = open(os.devnull, "w")
        return 0
    except (_core.IsolaneError, OSError, ValueError) as err:
        print(f"isolane: error: {err}", file=sys.stderr)
        return 2


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="isolane", description="Tenant isolation for shared data-center networks.")
    commands = parser.add_subparsers(required=True, metavar="COMMAND")
    inspect = commands.add_parser(
        "inspect",
        help="per-tenant (VNI) summary of a capture",
        description="Summarise a pcap/pcapng capture per tenant (VXLAN/Geneve VNI) and for untunnelled traffic: "
        "packets, bytes, first/last timestamp, inner protocol mix and parse statuses.",
    )
    inspect.add_argument("file", help="pcap or pcapng capture (format detected from its content)")
    inspect.add_argument("--json", action="store_true", help="print JSON instead of a table")
    inspect.add_argument("--vxlan-port", type=int, action="append", metavar="PORT", help="UDP port carrying VXLAN (repeatable; default 4789)")
    inspect.add_argument("--geneve-port", type=int, action="append", metavar="PORT", help="UDP port carrying Geneve (repeatable; default 6081)")
    inspect.add_argument("--batch-size", type=int, default=65536, help="packets per batch (default 65536)")
    inspect.set_defaults(run=_inspect)
    schema = commands.add_parser("schema", help="print the JSON Schema of policy files", description="Print the JSON Schema (draft 2020-12) of isolane policy files (YAML or TOML).")
    schema.set_defaults(run=_schema)
    return parser


def _schema(args: argparse.Namespace) -> int:
    from isolane.policy import schema_text

    print(schema_text())
    return 0


def _inspect(args: argparse.Namespace) -> int:
    summary = summarize(
        args.file,
        vxlan_ports=args.vxlan_port or [_core.VXLAN_PORT],
        geneve_ports=args.geneve_port or [_core.GENEVE_PORT],
        batch_size=args.batch_size,
        progress=_progress_printer() if sys.stderr.isatty() else None,
    )
    if args.json:
        json.dump(summary.to_json(), sys.stdout, indent=2)
        print()
    else:
        print(format_table(summary))
    return 0


def _progress_printer():  # type: ignore[no-untyped-def]
    def show(done: int, total: int) -> None:
        if total >= PROGRESS_MIN_BYTES:
            end = "\n" if done >= total else ""
            print(f"\rreading {done / total:6.1%} of {total / 1e6:,.0f} MB", end=end, file=sys.stderr, flush=True)

    return show


def format_table(summary: CaptureSummary) -> str:
    lines = [f"{summary.path}: {summary.format}, {summary.packets:,} packets, {summary.bytes:,} bytes on the wire"]
    if not summary.groups:
        return lines[0] + " (empty capture)"
    header = ("tenant", "packets", "bytes", "first (UTC)", "duration", "protocols", "status")
    rows = [header]
    for group in summary.sorted_groups():
        first, last = group.first_ns or 0, group.last_ns or 0
        rows.append(
            (
                group.label,
                f"{group.packets:,}",
                f"{group.bytes:,}",
                _utc(first),
                f"{(last - first) / 1e9:.6f} s",
                " ".join(f"{name}:{count}" for name, count in group.protocols.most_common()),
                " ".join(f"{name}:{count}" for name, count in group.statuses.most_common()),
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    right = {1, 2, 4}
    for row in rows:
        cells = [cell.rjust(w) if i in right else cell.ljust(w) for i, (cell, w) in enumerate(zip(row, widths))]
        lines.append("  ".join(cells).rstrip())
    return "\n".join(lines)


def _utc(ns: int) -> str:
    moment = datetime.datetime.fromtimestamp(ns // 1_000_000_000, tz=datetime.timezone.utc)
    return f"{moment:%Y-%m-%d %H:%M:%S}.{ns % 1_000_000_000:09d}"


if __name__ == "__main__":
    sys.exit(main())
