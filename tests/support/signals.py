"""Children that a test interrupts with SIGINT."""

import signal


def interruptible() -> None:
    """A ``preexec_fn``: SIGINT at its default in the child, as under a terminal. A test run
    started as a background job inherits SIGINT ignored, and a Python started with it ignored
    never raises KeyboardInterrupt."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
