"""The ``isolane`` command line."""

from __future__ import annotations

import argparse
import datetime
import json
import os
import sys
import warnings
from collections.abc import Sequence
from typing import Any, NoReturn

from isolane import __version__, _core
from isolane.commands import gen, linux
from isolane.commands.diff import diff
from isolane.commands.inspect import CaptureSummary, summarize
from isolane.commands.replay import replay
from isolane.commands.report_output import add_report_options, add_tunnel_options, engine_options, print_output, tunnel_options, write_report
from isolane.policy import Policy, PolicyWarning, schema_text
from isolane.progress import terminal_progress
from isolane.report.schema import report_schema
from isolane.report.text import align
from isolane.urls import doc_url, project_url

#: Exit status of a command stopped by Ctrl-C (128 + SIGINT, as shells report it).
EXIT_INTERRUPTED = 130


def main(argv: Sequence[str] | None = None) -> int:
    """Runs a command: 0 done, 1 a report that does not add up (a bug), 2 bad input (one line
    ``isolane: error: ...`` on stderr), 130 interrupted. Any other exception is a bug in
    isolane and keeps its traceback."""
    try:
        args = _parser().parse_args(argv)
        return int(args.run(args))
    except BrokenPipeError:  # the reader went away (`isolane schema | head`): not an error
        sys.stdout = open(os.devnull, "w")
        return 0
    except KeyboardInterrupt as interrupt:
        print("isolane: interrupted", *(f"\n{note}" for note in getattr(interrupt, "__notes__", ())), sep="", file=sys.stderr)  # e.g. a rollback that failed
        return EXIT_INTERRUPTED
    except (_core.IsolaneError, OSError, ValueError) as err:
        return _input_error(str(err))
    except OverflowError as err:
        argument = _converted_argument(err)
        if argument is None:
            raise
        return _input_error(f"{argument}: {err} (a number out of range)")


def _input_error(message: str) -> int:
    print(f"isolane: error: {message}", file=sys.stderr)
    return 2


def _converted_argument(err: BaseException) -> str | None:
    """The argument whose value the Rust core could not take, if ``err`` says so (the core notes
    "while processing 'batch_size'" on a number that does not fit): an input error, not a bug."""
    for note in getattr(err, "__notes__", ()):
        if note.startswith("while processing '") and note.endswith("'"):
            return note.removeprefix("while processing '").removesuffix("'")
    return None


class _Parser(argparse.ArgumentParser):
    """Bad usage is one line on stderr and status 2, as any other bad input."""

    def error(self, message: str) -> NoReturn:
        print(f"isolane: error: {message} (see {self.prog} --help)", file=sys.stderr)
        raise SystemExit(2)


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="isolane",
        description="Tenant isolation for shared data-center networks.",
        epilog=f"Documentation: {project_url('Documentation')}; issues: {project_url('Issues')}",
    )
    parser.add_argument("--version", action="version", version=f"isolane {__version__}")
    commands = parser.add_subparsers(required=True, metavar="COMMAND")
    inspect = commands.add_parser(
        "inspect",
        help="per-tenant (VNI) summary of a capture",
        description="Summarise pcap/pcapng captures per tenant (VXLAN/Geneve VNI) and for untunnelled traffic: "
        "packets, bytes, first/last timestamp, inner protocol mix and parse statuses. Several captures are merged by "
        "timestamp; '-' reads standard input; gzip and zstd files are read as they are. What the reader met (a file cut "
        "short, time going back, ...) is printed as warnings on stderr, and the exit status stays 0.",
    )
    _add_capture_options(inspect, "pcap or pcapng captures, plain, gzip or zstd (told by their content), merged by time; '-' for standard input")
    inspect.set_defaults(run=_inspect)
    replay = commands.add_parser(
        "replay",
        help="replay a capture through a tenant policy and report what it did to each tenant",
        description="Replay a pcap/pcapng capture through a tenant policy (classification, meters, shapers, the "
        "egress port; time is the capture's) and report per tenant and class: packets and bytes in, colours, "
        f"packets passed, re-marked and dropped (by reason), queueing delays at the port. See {doc_url('report.md')}.",
    )
    _add_capture_options(replay, "pcap or pcapng captures, plain, gzip or zstd, merged by time; '-' for standard input")
    replay.add_argument("--policy", required=True, help=f"tenant policy (YAML, TOML or JSON; see {doc_url('policy.md')})")
    add_report_options(replay)
    replay.set_defaults(run=_replay)
    _add_diff(commands)
    schema = commands.add_parser(
        "schema",
        help="print the JSON Schema of policy files (or of the replay report)",
        description="Print the JSON Schema (draft 2020-12) of isolane policy files (YAML or TOML), or with --report of the JSON that "
        "`isolane replay --json` writes.",
    )
    schema.add_argument("--report", action="store_true", help="the replay report's schema instead of the policy's")
    schema.set_defaults(run=_schema)
    check = commands.add_parser(
        "check",
        help="validate a policy without a capture",
        description=f"Validate a tenant policy (YAML, TOML or JSON; see {doc_url('policy.md')}) as replay reads it: print its "
        "warnings and 'POLICY: ok, N tenants, M rules' (status 0), or its errors with their places (status 2).",
    )
    check.add_argument("policy", help="tenant policy file")
    check.set_defaults(run=_check)
    gen.add_parser(commands)
    linux.add_parser(commands)
    return parser


def _add_capture_options(command: argparse.ArgumentParser, files_help: str) -> None:
    command.add_argument("files", nargs="+", metavar="FILE", help=files_help)
    command.add_argument("--json", action="store_true", help="print JSON instead of a table")
    add_tunnel_options(command)
    command.add_argument("--batch-size", type=_positive_int, default=65536, help="packets per batch (default 65536)")


def _positive_int(text: str) -> int:
    """``--batch-size``: a whole number of at least 1 (argparse turns the error into a usage error)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not at least 1")
    return value


def _capture_options(args: argparse.Namespace) -> dict[str, Any]:
    """What the options of ``_add_capture_options`` ask of ``summarize`` and ``replay``."""
    return {
        **tunnel_options(args),
        "batch_size": args.batch_size,
        "progress": terminal_progress(),
    }


def _schema(args: argparse.Namespace) -> int:
    print(json.dumps(report_schema(), indent=2) if args.report else schema_text())
    return 0


def _check(args: argparse.Namespace) -> int:
    policy = _read_policy(args.policy)
    rules = sum(len(tenant.rules) for tenant in policy.tenants)
    print(f"{args.policy}: ok, {_count(len(policy.tenants), 'tenant')}, {_count(rules, 'rule')}")
    return 0


def _count(n: int, noun: str) -> str:
    return f"{n:,} {noun}{'' if n == 1 else 's'}"


def _inspect(args: argparse.Namespace) -> int:
    summary = summarize(args.files, **_capture_options(args))
    print_output(summary.to_json() if args.json else format_table(summary))
    for warning in summary.warnings:
        print(f"isolane: warning: {warning}", file=sys.stderr)
    return 0


def _replay(args: argparse.Namespace) -> int:
    report = replay(args.files, _read_policy(args.policy), drain=args.drain, **engine_options(args), **_capture_options(args))
    return write_report(report, args)


def _add_diff(commands: Any) -> None:
    compare = commands.add_parser(
        "diff",
        help="compare two captures replayed through one policy, and name the neighbour behind a tenant's worse delay",
        description="Replay two captures (BEFORE, AFTER) through a tenant policy and show per tenant and class what changed "
        "(rates, drops, bursts, queueing delays), whether each tenant's own traffic is the same, and for each class whose "
        f"p99 delay rose, the other tenants ranked by how much more of its delay falls while they burst. See {doc_url('report.md')}.",
    )
    compare.add_argument("before", help="the earlier capture (pcap or pcapng)")
    compare.add_argument("after", help="the later capture")
    compare.add_argument("--policy", required=True, help="tenant policy both are replayed through (YAML, TOML or JSON)")
    compare.add_argument("--json", action="store_true", help="print JSON instead of tables")
    compare.add_argument("-o", "--output", metavar="FILE", help="write the tables (or with --json the JSON) to FILE instead of standard output")
    compare.set_defaults(run=_diff)


def _diff(args: argparse.Namespace) -> int:
    policy = _read_policy(args.policy)
    before, after = (replay(path, policy, alone=[], progress=terminal_progress()) for path in (args.before, args.after))
    for report in (before, after):
        for warning in report.warnings:
            print(f"isolane: warning: {report.capture}: {warning}", file=sys.stderr)
    result = diff(before, after)
    print_output(result.to_json() if args.json else result.to_text(), args.output)
    return 0


def _read_policy(path: str) -> Policy:
    """The policy at ``path``, its warnings printed as the CLI's rather than as Python's."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PolicyWarning)
        policy = Policy.from_file(path)
    for message in policy.warnings:
        print(f"isolane: warning: {message}", file=sys.stderr)
    return policy


def format_table(summary: CaptureSummary) -> str:
    """A line per tenant (VNI) and for the untunnelled traffic, its protocol mix and parse
    statuses on the line under it, so that the table keeps to 100 columns."""
    lines = [f"{summary.path}: {summary.format}, {summary.packets:,} packets, {summary.bytes:,} bytes on the wire"]
    if not summary.groups:
        return lines[0] + " (empty capture)"
    rows = [("tenant", "packets", "bytes", "first (UTC)", "duration")]
    mixes = []
    for group in summary.sorted_groups():
        first, last = group.first_ns or 0, group.last_ns or 0
        rows.append((group.label, f"{group.packets:,}", f"{group.bytes:,}", _utc(first), f"{(last - first) / 1e9:.6f} s"))
        protocols = " ".join(f"{name}:{count}" for name, count in group.protocols.most_common())
        statuses = " ".join(f"{name}:{count}" for name, count in group.statuses.most_common())
        mixes.append(f"  protocols {protocols}; status {statuses}")
    table = align(rows, right={1, 2, 4})
    return "\n".join([*lines, table[0], *(line for pair in zip(table[1:], mixes) for line in pair)])


def _utc(ns: int) -> str:
    moment = datetime.datetime.fromtimestamp(ns // 1_000_000_000, tz=datetime.timezone.utc)
    return f"{moment:%Y-%m-%d %H:%M:%S}.{ns % 1_000_000_000:09d}"


if __name__ == "__main__":
    sys.exit(main())
