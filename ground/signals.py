"""SIGTERM unwinds the stack like Ctrl-C, so every `finally` that heals faults runs for both."""

from __future__ import annotations

import contextlib
import signal
import threading


def _interrupt(_signum, _frame):
    raise KeyboardInterrupt


@contextlib.contextmanager
def sigterm_as_interrupt():
    """Within the block, SIGTERM raises KeyboardInterrupt in the main thread
    (elsewhere signals cannot be handled, and the block runs unchanged)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, _interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _exit(signum, _frame):
    raise SystemExit(128 + signum)


def unwind_on_sigterm():
    """Where nobody handles SIGTERM yet (and only in the main thread), makes
    it unwind the stack (SystemExit 143, as a shell reports a SIGTERM), so
    `finally` blocks run; returns a callable that puts things back."""
    if (
        threading.current_thread() is not threading.main_thread()
        or signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL
    ):
        return lambda: None
    previous = signal.signal(signal.SIGTERM, _exit)

    def restore() -> None:
        if threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGTERM, previous)

    return restore
