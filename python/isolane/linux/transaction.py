"""Changes to the kernel's tc configuration as one transaction, as far as netlink allows: netlink
has no transaction across messages, so every change is recorded with what undoes it, and when
one fails the recorded ones are undone, newest first (``docs/linux.md``, "One transaction").

When an undo step fails too (the device vanished, another program replaced its root qdisc), the
error says what failed, which devices may not be as they were, and how to clean up
(:class:`RollbackFailed`); an interrupt (Ctrl-C) keeps its type and carries the same report as a
note."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from isolane.linux.netlink import LinuxError, request

SHOWN_PER_DEVICE = 3
"""Undo steps that failed, shown per device in the error (the rest are counted)."""


class Inverse(NamedTuple):
    """What undoes a change: the request to send (built when sent), its type and flags."""

    doing: str
    message: Callable[[], Any]
    msg_type: int
    flags: int


class RollbackFailed(LinuxError):
    """A change failed, and undoing the changes made before it failed too: ``cause`` is what
    failed first, ``failures`` the undo steps that failed (device, error), ``cleanup`` the
    commands that put each of those devices back to its default qdisc."""

    def __init__(self, cause: BaseException, failures: list[tuple[str, str]], cleanup: Callable[[str], str]) -> None:
        devices = list(dict.fromkeys(dev for dev, _ in failures))
        self.cause, self.failures = cause, failures
        self.devices = tuple(devices)
        self.cleanup = tuple(cleanup(dev) for dev in devices)
        undone = "; ".join(_failed_steps(dev, [error for d, error in failures if d == dev]) for dev in devices)
        what = str(cause) or type(cause).__name__
        super().__init__(f"{what}; rolling back failed too, so {', '.join(devices)} may not be as before ({undone}). To clean up: {'; '.join(self.cleanup)}")


def _failed_steps(dev: str, errors: list[str]) -> str:
    shown = ", ".join(errors[:SHOWN_PER_DEVICE])
    more = len(errors) - SHOWN_PER_DEVICE
    return f"{dev}: {shown}" + (f" and {more} more undo steps failed" if more > 0 else "")


@dataclass
class Transaction:
    """The changes made so far, each with its device and what undoes it. ``dev`` and ``index``:
    the device changes are recorded against unless :meth:`change` names another."""

    ipr: Any
    dev: str = ""
    index: int = 0
    done: list[str] = field(default_factory=list)
    undo: list[tuple[str, Inverse]] = field(default_factory=list)

    def change(
        self, doing: str, message: Callable[[], Any], msg_type: int, flags: int, inverse: tuple[str, Callable[[], Any], int, int], dev: str = ""
    ) -> None:
        """Sends one change; once the kernel accepted it, records it and its inverse."""
        request(self.ipr, message(), msg_type, flags, doing)
        self.done.append(doing)
        self.undo.append((dev or self.dev, Inverse(*inverse)))

    def rollback(self) -> list[tuple[str, str]]:
        """Undoes every recorded change, newest first; returns the steps that failed (device, error)."""
        failed = []
        for dev, (doing, message, msg_type, flags) in reversed(self.undo):
            try:
                request(self.ipr, message(), msg_type, flags, doing)
            except Exception as err:  # the kernel's refusal, or the undo request could not be built (what it undoes is gone)
                failed.append((dev, _without_errno(err)))
        self.undo.clear()
        return failed


def _without_errno(err: Exception) -> str:
    """The error's text without ``[Errno N]`` (its text names the error)."""
    return err.strerror if isinstance(err, OSError) and err.errno is not None and err.strerror else str(err)


@contextmanager
def transaction(ipr: Any, cleanup: Callable[[str], str]) -> Iterator[Transaction]:
    """A :class:`Transaction` undone when the block raises. If undoing fails too, an error becomes
    :class:`RollbackFailed` (``cleanup(dev)``: the command that puts ``dev`` back) and an
    interrupt carries that report as a note."""
    tx = Transaction(ipr)
    try:
        yield tx
    except BaseException as err:
        failures = tx.rollback()
        if not failures:
            raise
        report = RollbackFailed(err, failures, cleanup)
        if isinstance(err, Exception):
            raise report from err
        err.add_note(str(report))
        raise


def remove_command(dev: str, netns: str | None, mode: str = "htb") -> str:
    """What puts ``dev`` back to its default qdisc (``isolane linux remove``), and what shows its qdiscs then."""
    in_netns = f" --netns {netns}" if netns else ""
    tc = f"tc -n {netns}" if netns else "tc"
    mode_option = " --mode tbf" if mode == "tbf" else ""
    return f"isolane linux remove{in_netns}{mode_option} --dev {dev}, then check {tc} qdisc show dev {dev}"
