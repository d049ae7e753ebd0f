"""SIGTERM unwinds the stack like Ctrl-C, so every `finally` that heals faults runs for both;
and a signal for a client process reaches all of it.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading


def signal_client(pid: int, sig: int) -> bool:
    """Sends `sig` to a client process and everything it started: a client leads its own
    process group (workloads/client.py), which holds its JVM when it runs Kafka's Java
    client, so a pause or a kill acts on both at once, as on one librdkafka process.
    A process that does not lead a group (yet) gets it alone. False if it is gone."""
    try:
        if os.getpgid(pid) == pid:
            os.killpg(pid, sig)
        else:
            os.kill(pid, sig)
    except ProcessLookupError:
        return False
    return True


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
