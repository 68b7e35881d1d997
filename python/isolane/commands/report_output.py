"""The options and output that ``isolane replay`` and ``isolane linux live`` share: how the
engine runs (threads, draining, the burst window, polling intervals, tenants replayed alone) and
where the report goes (a table or JSON, a file, an HTML page, pictures)."""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from pathlib import Path
from typing import Any

from isolane import _core
from isolane.engine import DEFAULT_POLLS
from isolane.policy import MAX_WINDOW_NS, MIN_WINDOW_NS, parse_duration
from isolane.report.model import Report
from isolane.report.table import format_report


def add_tunnel_options(command: argparse.ArgumentParser) -> None:
    command.add_argument("--vxlan-port", type=int, action="append", metavar="PORT", help="UDP port carrying VXLAN (repeatable; default 4789)")
    command.add_argument("--geneve-port", type=int, action="append", metavar="PORT", help="UDP port carrying Geneve (repeatable; default 6081)")


def tunnel_options(args: argparse.Namespace) -> dict[str, list[int]]:
    return {"vxlan_ports": args.vxlan_port or [_core.VXLAN_PORT], "geneve_ports": args.geneve_port or [_core.GENEVE_PORT]}


def add_report_options(command: argparse.ArgumentParser) -> None:
    """The options of the engine a report comes from, and of where the report goes."""
    command.add_argument("--threads", type=int, default=1, help="threads processing each batch (default 1; the report is the same on any number)")
    command.add_argument(
        "--no-drain",
        dest="drain",
        action="store_false",
        help="leave the packets still on their way to the port at the end in flight (by default they reach it and everything queued is sent)",
    )
    command.add_argument(
        "--window", metavar="DURATION", help="watch every scope the policy watches for microbursts at this window (e.g. 10us; 1us to 10ms) instead of its own"
    )
    command.add_argument(
        "--poll",
        metavar="INTERVALS",
        default=",".join(DEFAULT_POLLS),
        help=f"polling intervals to compare the bursts with, each a multiple of the shortest (default {','.join(DEFAULT_POLLS)})",
    )
    command.add_argument("-o", "--output", metavar="FILE", help="write the table (or with --json the JSON) to FILE instead of standard output")
    command.add_argument("--html", metavar="FILE", help="also write the report as one self-contained HTML page, with its pictures (needs isolane[plot])")
    command.add_argument("--plot", metavar="DIR", help="also write the report's pictures (PNG) into DIR (needs isolane[plot])")
    command.add_argument(
        "--alone",
        metavar="TENANTS",
        help="tenants (comma-separated) also replayed alone, to measure how much the others inflate their queueing delays "
        "(default: every tenant when the policy has a port and at most 16 tenants; '' for none)",
    )


def engine_options(args: argparse.Namespace) -> dict[str, Any]:
    """What the options of :func:`add_report_options` ask of the engine (``Replayer``'s keywords, but ``drain``)."""
    return {
        "threads": args.threads,
        "window_ns": window(args.window) if args.window is not None else None,
        "poll": [interval.strip() for interval in args.poll.split(",") if interval.strip()],
        "alone": None if args.alone is None else [name.strip() for name in args.alone.split(",") if name.strip()],
    }


def window(text: str) -> int:
    """``--window``: a duration within the microburst windows' range."""
    duration = parse_duration(text)
    if not MIN_WINDOW_NS <= duration <= MAX_WINDOW_NS:
        raise ValueError(f"--window {text!r} is not within 1us to 10ms")
    return duration


def write_report(report: Report, args: argparse.Namespace) -> int:
    """Warnings on stderr, the report where the options say; 1 if it does not add up (a bug), else 0."""
    for warning in report.warnings:
        print(f"isolane: warning: {warning}", file=sys.stderr)
    print_output(report.to_json() if args.json else format_report(report), args.output)
    if args.html:
        Path(args.html).write_text(report.to_html())
    if args.plot:
        report.plot(args.plot)
    problems = report.discrepancies()
    for problem in problems:
        print(f"isolane: error: the report does not add up (a bug in isolane): {problem}", file=sys.stderr)
    return 1 if problems else 0


def print_output(output: str | dict[str, object], path: str | None = None) -> None:
    """A table as it is, JSON indented; to standard output, or to ``path``. JSON is written as
    it is made (a big report's text would double its memory)."""
    with contextlib.ExitStack() as stack:
        out = sys.stdout if path is None else stack.enter_context(open(path, "w"))
        if isinstance(output, str):
            out.write(output)
        else:
            json.dump(output, out, indent=2)
        out.write("\n")
