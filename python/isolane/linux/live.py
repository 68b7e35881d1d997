"""Live capture from a Linux device: :class:`~isolane.PacketBatch` objects straight from an
AF_PACKET socket's TPACKET_V3 ring, read in isolane's core with the GIL released (docs/linux.md,
"Live capture"). Needs root (CAP_NET_RAW; CAP_SYS_ADMIN to capture in another namespace), and
no pyroute2."""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from types import TracebackType

from isolane import _core


@dataclass(frozen=True)
class LiveStats:
    """A capture's counters since it opened. ``packets``, ``drops`` and ``freezes`` are the
    kernel's (``PACKET_STATISTICS``, accumulated: the kernel resets them when read); the rest
    are the reader's. Once everything in the ring is read, ``packets = delivered + skipped + drops``."""

    packets: int
    """Packets the socket saw, those it dropped included."""
    drops: int
    """Packets the kernel could not put in the ring because every block was full: 0 means the
    capture lost nothing it could see."""
    freezes: int
    """Times the ring filled up."""
    delivered: int
    """Packets handed on in batches."""
    skipped: int
    """Packets in the ring that ``direction`` left out (``"out"`` skips incoming ones)."""
    blocks: int
    """Ring blocks read (one copy each)."""


class LiveCapture:
    """A capture on device ``dev`` of network namespace ``netns`` (an ``ip netns`` name; None:
    this process's). Iterating yields non-empty batches until the capture is closed or, with
    ``duration`` (seconds of wall time), until that much time has passed::

        with LiveCapture("eth1", "ns1", duration=5.0) as capture:
            for batch in capture:
                engine.process(batch)
            print(capture.stats().drops)

    ``snaplen`` bytes are kept of each packet (its wire length still counts the rest). The
    ring is ``blocks`` blocks of ``block_size`` bytes (a multiple of the page size) of kernel
    memory; the kernel hands a block over when it is full or ``block_timeout_ms`` after its
    first packet. ``direction``: ``"both"``, ``"in"`` (received by the device) or ``"out"``
    (sent by it). Errors are :class:`~isolane._core.CaptureError` (an ``OSError``; its
    ``CapturePermissionError`` subclass, a ``PermissionError``, without the privileges)."""

    def __init__(
        self,
        dev: str,
        netns: str | None = None,
        *,
        duration: float | None = None,
        snaplen: int = 262144,
        block_size: int = 1 << 20,
        blocks: int = 64,
        block_timeout_ms: int = 10,
        direction: str = "both",
    ) -> None:
        self.duration = duration
        self._core = _core.LiveCapture(
            dev, netns, snaplen=snaplen, block_size=block_size, blocks=blocks, timeout_ms=block_timeout_ms, direction=direction
        )

    @property
    def dev(self) -> str:
        return self._core.dev

    @property
    def netns(self) -> str | None:
        return self._core.netns

    @property
    def link_type(self) -> int:
        """The batches' link type: 1 (Ethernet; loopback too) or 101 (raw IP)."""
        return self._core.link_type

    @property
    def closed(self) -> bool:
        return self._core.closed

    def next_batch(self, timeout: float | None = None) -> _core.PacketBatch | None:
        """The packets the ring holds now as one batch, waiting up to ``timeout`` seconds (None:
        until packets come; Ctrl-C interrupts) for some; None when the time passed without any."""
        return self._core.next_batch(None if timeout is None else max(0, round(timeout * 1000)))

    def __iter__(self) -> Iterator[_core.PacketBatch]:
        end = None if self.duration is None else time.monotonic() + self.duration
        while not self.closed:
            left = None if end is None else end - time.monotonic()
            if left is not None and left <= 0:
                return
            batch = self.next_batch(left)
            if batch is not None:
                yield batch

    def stats(self) -> LiveStats:
        """The counters since the capture opened (the last ones once it is closed)."""
        return LiveStats(**self._core.stats())

    def close(self) -> None:
        """Release the socket and its ring (reading the kernel's counters a last time)."""
        self._core.close()

    def __enter__(self) -> LiveCapture:
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None, traceback: TracebackType | None) -> None:
        self.close()

    def __repr__(self) -> str:
        return repr(self._core)
