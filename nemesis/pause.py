"""SIGSTOP/SIGCONT of brokers and of client processes.

A paused broker keeps its sockets and leadership claims while the others
move on; a paused client wakes up as a zombie: a producer with an old epoch,
a consumer that still thinks it owns its partitions.
"""

from __future__ import annotations

import os
import signal
import time


def proc_stat(pid: int) -> tuple[str, int] | None:
    """(state letter, start time in clock ticks) of a process, None if gone.

    The start time tells a process from a later one that reused its pid, so
    a heal after a crash never sends SIGCONT to a stranger.
    """
    try:
        with open(f"/proc/{int(pid)}/stat", encoding="ascii", errors="replace") as handle:
            text = handle.read()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    # the command name (field 2) may hold spaces and parentheses
    fields = text[text.rindex(")") + 2:].split()
    return fields[0], int(fields[19])


def process_state(pid: int) -> str | None:
    """'R', 'S', 'T' (stopped), ... or None if the process is gone."""
    stat = proc_stat(pid)
    return stat[0] if stat else None


def identity(pid: int) -> dict | None:
    stat = proc_stat(pid)
    return {"pid": int(pid), "starttime": stat[1]} if stat else None


def same_process(ident: dict) -> bool:
    stat = proc_stat(ident["pid"])
    return stat is not None and stat[1] == ident.get("starttime")


def _signal_and_wait(ident: dict, sig: int, stopped: bool, timeout: float = 5.0) -> bool:
    """Sends sig, then waits until /proc shows the process (not) stopped,
    since signal delivery is asynchronous. False if the process is gone."""
    if not same_process(ident):
        return False
    try:
        os.kill(ident["pid"], sig)
    except ProcessLookupError:
        return False
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        state = process_state(ident["pid"])
        if state is None:
            return False
        if (state in "Tt") == stopped:
            break
        time.sleep(0.01)
    return True


def pause_client(ident: dict) -> bool:
    """SIGSTOP; False if the process is already gone."""
    return _signal_and_wait(ident, signal.SIGSTOP, stopped=True)


def resume_client(ident: dict) -> bool:
    """SIGCONT if it is still the same process; False if it is gone."""
    return _signal_and_wait(ident, signal.SIGCONT, stopped=False)


def pause_nodes(lab, names) -> list[str]:
    done = []
    for name in names:
        lab.node(name).pause()
        done.append(name)
    return done


def resume_nodes(lab, names) -> list[str]:
    """Resumes those still paused (a node may have died meanwhile)."""
    done = []
    for name in names:
        node = lab.node(name)
        if node.state() == "paused":
            node.resume()
            done.append(name)
    return done
