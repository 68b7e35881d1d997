"""``isolane linux live``: the traffic of an interface, captured through an AF_PACKET ring for a
while, through a policy, with the report ``isolane replay`` gives (``docs/linux.md``); and
:func:`live_report`, the same for an agent. Optionally serves the engine's counters to
Prometheus while it runs."""

from __future__ import annotations

import argparse
import contextlib
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from isolane import _core
from isolane.commands.replay import Replayer
from isolane.commands.report_output import add_report_options, add_tunnel_options, engine_options, tunnel_options, write_report
from isolane.engine import DEFAULT_POLLS, Engine
from isolane.linux.live import LiveCapture, LiveStats
from isolane.policy import Policy, parse_duration
from isolane.report.model import Report
from isolane.urls import doc_url

WAIT_S = 0.1
"""The longest wait (s) for a block of packets: how soon a capture notices its end or Ctrl-C."""


def add_parser(sub: Any) -> None:
    """Add ``live`` to ``isolane linux``'s subcommands."""
    live = sub.add_parser(
        "live",
        help="capture an interface's traffic through an AF_PACKET ring and report what the policy did to each tenant",
        description="Capture DEV's traffic through an AF_PACKET TPACKET_V3 ring for --duration (or until "
        "--count packets, or Ctrl-C), run it through the policy as it arrives and print the report `isolane replay` gives, "
        f"microbursts included. Time is the kernel's packet timestamps. See {doc_url('linux.md')}.",
    )
    live.add_argument("--netns", help="network namespace (ip netns name; default: this process's)")
    live.add_argument("--dev", required=True, help="the interface to capture on")
    live.add_argument("--policy", required=True, help=f"tenant policy (see {doc_url('policy.md')})")
    live.add_argument("--duration", metavar="DURATION", help="how long to capture, e.g. 5s or 500ms (default: until --count or Ctrl-C)")
    live.add_argument("--count", type=int, metavar="N", help="stop after N packets (at the end of the block that reaches N)")
    live.add_argument("--metrics", metavar="ADDRESS", help="serve the engine's counters to Prometheus while capturing, e.g. :9464 or 127.0.0.1:9464")
    live.add_argument(
        "--direction",
        choices=("both", "in", "out"),
        default="both",
        help="the packets DEV receives (in), sends (out) or both (default both; a veth end or lo sees both)",
    )
    live.add_argument("--blocks", type=int, default=64, help="blocks of 1 MiB in the capture ring (default 64): more if the report warns of drops")
    live.add_argument("--json", action="store_true", help="print JSON instead of a table")
    add_tunnel_options(live)
    add_report_options(live)
    live.set_defaults(run=_live)


def _live(args: argparse.Namespace) -> int:
    from isolane.cli import _read_policy

    duration_ns = _duration(args.duration) if args.duration is not None else None
    if args.count is not None and args.count < 1:
        raise ValueError(f"--count {args.count} is not at least 1")
    metrics = _metrics_server(args.metrics) if args.metrics else None
    tunnels = tunnel_options(args)
    policy = _read_policy(args.policy)  # its warnings before the status line
    with _Status(args.dev) if sys.stderr.isatty() else contextlib.nullcontext() as status:
        report = live_report(
            args.dev,
            policy,
            netns=args.netns,
            duration_s=None if duration_ns is None else duration_ns / 1e9,
            count=args.count,
            drain=args.drain,
            on_start=metrics,
            status=status,
            direction=args.direction,
            blocks=args.blocks,
            **engine_options(args),
            vxlan_ports=tunnels["vxlan_ports"],
            geneve_ports=tunnels["geneve_ports"],
        )
    return write_report(report, args)


def _duration(text: str) -> int:
    duration = parse_duration(text)
    if duration <= 0:
        raise ValueError(f"--duration {text!r} is not above 0")
    return duration


def live_report(
    dev: str,
    policy: Policy,
    *,
    netns: str | None = None,
    duration_s: float | None = None,
    count: int | None = None,
    drain: bool = True,
    vxlan_ports: Iterable[int] = (_core.VXLAN_PORT,),
    geneve_ports: Iterable[int] = (_core.GENEVE_PORT,),
    threads: int = 1,
    window_ns: int | None = None,
    poll: Iterable[int | str] = DEFAULT_POLLS,
    alone: Iterable[str] | None = None,
    on_start: Callable[[Engine], contextlib.AbstractContextManager[Any]] | None = None,
    status: Callable[[int, float], None] | None = None,
    **capture_options: Any,
) -> Report:
    """Capture ``dev`` (in ``netns``) for ``duration_s`` seconds of wall time, or until ``count``
    packets, or until Ctrl-C, processing each block of packets as it arrives, and report as
    :func:`isolane.replay` does (its options have the same meaning). ``on_start(engine)`` is
    entered once the engine exists and left when the capture ends (``--metrics`` serves it
    then); ``status(packets, seconds)`` is called after every wait. The ring's drops, if any,
    are a warning of the report. ``capture_options`` go to :class:`isolane.linux.LiveCapture`."""
    replayer = Replayer(
        policy, vxlan_ports=vxlan_ports, geneve_ports=geneve_ports, threads=threads, window_ns=window_ns, poll=poll, alone=alone
    )
    with LiveCapture(dev, netns=netns, **capture_options) as capture:
        with on_start(replayer.engine) if on_start else contextlib.nullcontext():
            interrupted = _feed(capture, replayer, duration_s, count, status)
        ring = capture.stats()
    if drain:
        replayer.drain()
    warnings = _ring_warnings(ring) + (["the capture was stopped by Ctrl-C; the report covers what came before"] if interrupted else [])
    return replayer.report([dev if netns is None else f"{dev} (netns {netns})"], "live capture (AF_PACKET, TPACKET_V3)", warnings)


def _feed(capture: LiveCapture, replayer: Replayer, duration_s: float | None, count: int | None, status: Callable[[int, float], None] | None) -> bool:
    """Blocks from ``capture`` into ``replayer`` until the time or count is reached: True when Ctrl-C stopped it."""
    start = time.monotonic()
    end = None if duration_s is None else start + duration_s
    try:
        while count is None or replayer.packets < count:
            now = time.monotonic()
            if end is not None and now >= end:
                break
            batch = capture.next_batch(WAIT_S if end is None else min(WAIT_S, end - now))
            if batch is not None:
                replayer.add(batch)
            if status is not None:
                status(replayer.packets, time.monotonic() - start)
    except KeyboardInterrupt:
        return True
    return False


def _ring_warnings(ring: LiveStats) -> list[str]:
    drops = ring.drops
    if not drops:
        return []
    return [
        f"the capture ring dropped {drops:,} packets (the kernel's count) that the report does not have: "
        "the process read too slowly; give the ring more blocks (--blocks)"
    ]


def _metrics_server(address: str) -> Callable[[Engine], contextlib.AbstractContextManager[Any]]:
    """``--metrics``: the engine served at ``address`` (checked now, before the capture starts) for as long as the capture runs."""
    from isolane.linux.metrics import parse_metrics_address, serve

    parse_metrics_address(address)

    @contextlib.contextmanager
    def serving(engine: Engine) -> Iterator[None]:
        with serve(engine, address) as server:
            print(f"isolane: serving metrics at {server.url}", file=sys.stderr, flush=True)
            yield

    return serving


class _Status:
    """On a terminal: packets so far and seconds captured, on one line that goes away when the block ends."""

    def __init__(self, dev: str) -> None:
        from rich.console import Console
        from rich.status import Status

        self._status = Status(f"capturing on {dev}", console=Console(stderr=True))
        self._dev = dev

    def __call__(self, packets: int, seconds: float) -> None:
        self._status.update(f"capturing on {self._dev}: {packets:,} packets in {seconds:.1f} s (Ctrl-C stops and reports)")

    def __enter__(self) -> _Status:
        self._status.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._status.stop()
