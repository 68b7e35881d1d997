"""The progress bar the commands show on a terminal while they read captures (rich, on stderr):
for captures of :data:`PROGRESS_MIN_BYTES` or more, or of unknown size (standard input) once
that much is read; nothing when stderr is not a terminal, so that pipes and logs stay clean."""

from __future__ import annotations

import sys
from typing import Any

PROGRESS_MIN_BYTES = 64 << 20
"""Smaller captures read in about a second: no bar."""


class ReadingProgress:
    """A ``progress(bytes_read, total)`` callback drawing a bar; ``total`` 0 means unknown. The
    bar appears at the first call that reaches the threshold and goes away when reading ends."""

    def __init__(self, console: Any = None) -> None:
        self._console = console
        self._bar: Any = None
        self._task: Any = None

    def __call__(self, done: int, total: int) -> None:
        if self._bar is None:
            if max(done, total) < PROGRESS_MIN_BYTES:
                return
            self._start(total)
        self._bar.update(self._task, completed=done, total=total or None)
        self._bar.refresh()
        if total and done >= total:
            self.close()

    def _start(self, total: int) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeRemainingColumn, TransferSpeedColumn

        columns = (TextColumn("reading"), BarColumn(), DownloadColumn(), TransferSpeedColumn(), TimeRemainingColumn())
        # No refresh thread: the bar is drawn at each batch, and nothing is left running on an error.
        self._bar = Progress(*columns, console=self._console or Console(stderr=True), auto_refresh=False, transient=True)
        self._bar.start()
        self._task = self._bar.add_task("reading", total=total or None)

    def close(self) -> None:
        """Takes the bar away (a second call does nothing)."""
        if self._bar is not None:
            self._bar.stop()
            self._bar = None


def terminal_progress() -> ReadingProgress | None:
    """A bar when stderr is a terminal, else None."""
    return ReadingProgress() if sys.stderr.isatty() else None
